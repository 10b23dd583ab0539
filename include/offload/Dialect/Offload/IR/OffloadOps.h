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
/// The layer a location belongs to: the innermost NameLoc's name (the
/// importer records module paths such as `layer1.0.conv1` that way), else
/// `file:line`, else `?`.
std::string getLayerName(Location loc);

/// Whether the training step `fn` has been differentiated: its body holds an
/// `offload.phase backward` (or `backward_input`) marker, as
/// --offload-autodiff writes. The memory passes and the lowering refuse a
/// step without one instead of silently doing nothing.
bool hasBackwardPhase(Operation *fn);

/// Replaces every `offload.recompute` in `block` by clones of its ops at its
/// position (region arguments become the recompute's inputs).
void inlineRecomputeRegions(Block &block);
} // namespace offload
} // namespace mlir

#endif
