//===- OffloadOps.h - offload operations --------------------------*- C++ -*-===//
#ifndef OFFLOAD_DIALECT_OFFLOAD_IR_OFFLOADOPS_H
#define OFFLOAD_DIALECT_OFFLOAD_IR_OFFLOADOPS_H

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/Interfaces/ControlFlowInterfaces.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "offload/Dialect/Offload/IR/OffloadDialect.h"
#include "offload/Dialect/Offload/IR/OffloadInterfaces.h"

namespace mlir {
namespace offload {
namespace detail {
/// Result type of numpy-style broadcasting of `lhs` and `rhs`.
LogicalResult inferBroadcast(std::optional<Location> loc, Type lhs, Type rhs,
                             SmallVectorImpl<Type> &types);
/// Builds the VJP of a unary elementwise op through its backward op
/// `BwdOp(grad_output, saved)`, copying the forward op's attributes.
template <typename BwdOp>
LogicalResult buildUnaryVJP(Operation *op, OpBuilder &b, ValueRange saved,
                            ValueRange resultGrads,
                            SmallVectorImpl<Value> &operandGrads) {
  if (!resultGrads[0]) {
    operandGrads.push_back(Value());
    return success();
  }
  SmallVector<NamedAttribute> attrs(op->getAttrs());
  auto bwd = BwdOp::create(b, op->getLoc(), TypeRange{resultGrads[0].getType()},
                           ValueRange{resultGrads[0], saved[0]}, attrs);
  operandGrads.push_back(bwd->getResult(0));
  return success();
}
} // namespace detail
} // namespace offload
} // namespace mlir

#define GET_OP_CLASSES
#include "offload/Dialect/Offload/IR/OffloadOps.h.inc"

namespace mlir {
namespace offload {
/// Sizes of an attention operand (query, key, value, out or a gradient of
/// one) in the op's logical order [N, H, L, E]: `layout` bhld stores them in
/// that order, blhd as [N, L, H, E] (AttentionLayout, OffloadTypes.td).
struct AttentionDims {
  int64_t n, h, l, e;
};
/// The dim of the heads (1 in bhld, 2 in blhd) and of the length (the other).
inline int64_t attentionHeadDim(AttentionLayout layout) {
  return layout == AttentionLayout::blhd ? 2 : 1;
}
inline int64_t attentionLengthDim(AttentionLayout layout) {
  return layout == AttentionLayout::blhd ? 1 : 2;
}
/// `t` (rank 4) read as [N, H, L, E] under `layout`.
inline AttentionDims attentionDims(ShapedType t, AttentionLayout layout) {
  return {t.getDimSize(0), t.getDimSize(attentionHeadDim(layout)),
          t.getDimSize(attentionLengthDim(layout)), t.getDimSize(3)};
}
/// The shape of [N, H, L, E] sizes stored in `layout`.
inline SmallVector<int64_t, 4> attentionShape(AttentionDims d, AttentionLayout layout) {
  if (layout == AttentionLayout::blhd)
    return {d.n, d.l, d.h, d.e};
  return {d.n, d.h, d.l, d.e};
}

/// The layer a location belongs to: the innermost NameLoc's name (the
/// importer records module paths such as `layer1.0.conv1` that way), else
/// `file:line`, else `?`.
std::string getLayerName(Location loc);

/// Whether the training step `fn` has been differentiated: its body holds an
/// `offload.phase backward` (or `backward_input`) marker, as
/// --offload-autodiff writes. The memory passes and the lowering refuse a
/// step without one instead of silently doing nothing.
bool hasBackwardPhase(Operation *fn);

/// The number of micro-batches the step `fn` accumulates gradients over
/// (--offload-autodiff micro-batches=K): one more than the largest
/// `micro_batch` index of its phase markers, 1 when none carries one.
int64_t getNumMicroBatches(Operation *fn);

/// The marker that ends the forward phase `op` belongs to: the first phase
/// marker after `op` that is not a forward one (its micro-batch's backward),
/// null when there is none.
PhaseOp getBackwardMarkerAfter(Operation *op);

/// The parts of an optimizer update (`offload.sgd_update`,
/// `offload.adamw_update`): its optimizer state operands (the momentum
/// buffer; exp_avg and exp_avg_sq), its step counter and its skip flag
/// (`skip_if`, null when absent). `update` must be one of the two.
struct UpdateOperands {
  SmallVector<Value, 2> state;
  Value step, foundInf;
};
UpdateOperands getUpdateOperands(Operation *update);
/// Replaces every `offload.recompute` in `block` by clones of its ops at its
/// position (region arguments become the recompute's inputs).
void inlineRecomputeRegions(Block &block);
} // namespace offload
} // namespace mlir

#endif
