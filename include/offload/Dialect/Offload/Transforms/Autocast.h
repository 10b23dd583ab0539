//===- Autocast.h - Mixed precision as a rewrite of a forward step -*- C++ -*-===//
//
// Part of offload. PyTorch's autocast policy applied to a forward-only step:
// the casts that --offload-autocast and --offload-autodiff="precision=..."
// insert (docs/precision.md, "The precision policy").
//
//===----------------------------------------------------------------------===//
#ifndef OFFLOAD_DIALECT_OFFLOAD_TRANSFORMS_AUTOCAST_H
#define OFFLOAD_DIALECT_OFFLOAD_TRANSFORMS_AUTOCAST_H

#include "offload/Dialect/Offload/Transforms/PassOptions.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/DenseMap.h"

namespace mlir {
namespace offload {

/// How autocast treats an op (ATen's autocast_mode.h lists for CUDA).
enum class AutocastClass {
  /// matmul, linear, conv, attention: f32 operands cast to the low type.
  LowPrecision,
  /// softmax, layer norm, losses, exp, rsqrt, sum: low operands cast to f32.
  Fp32,
  /// Ops combining floats: operands cast to the widest of their types.
  Promote,
  /// Runs in its operands' types.
  Keep,
};

/// The class of `op` under autocast.
AutocastClass classifyForAutocast(Operation *op);

/// The policy applied one op at a time, for applyAutocast and for an
/// importer that meets a region run under `torch.autocast` (a .pt2's
/// `wrap_with_autocast`): casts are `offload.copy`s inserted before their
/// reader, one per (value, element type) for all the ops rewritten by one
/// rewriter (so earlier ones must dominate later ones, as in one block).
class AutocastRewriter {
public:
  /// `low`: bf16 or f16, the type of the low-precision class.
  AutocastRewriter(MLIRContext *ctx, Type low);
  /// With `policy`, casts `op`'s float operands as its class says
  /// (classifyForAutocast); without it (an op outside an autocast region),
  /// only promotes mixed float operands, as PyTorch's type promotion does.
  /// Either way re-infers its result types from its operands. Ops of other
  /// dialects, casts, fills, constants and phase markers are left alone.
  /// Fails with an error at `op` when its result types cannot be inferred.
  LogicalResult rewrite(Operation *op, bool policy = true);
  /// Casts inserted so far.
  unsigned numCasts() const { return casted; }

private:
  void castOperand(OpOperand &use, Type elt);
  MLIRContext *ctx;
  Type low, f32;
  OpBuilder b;
  llvm::DenseMap<std::pair<Value, Type>, Value> casts;
  unsigned casted = 0;
};

/// Rewrites the forward-only step `fn` for `precision` (nothing for fp32):
/// casts before each op as its class says, result types re-inferred, step
/// results cast back to their declared types. Returns the number of casts
/// inserted, or failure (with an error at the op) when an op cannot take
/// the types. Idempotent.
FailureOr<unsigned> applyAutocast(func::FuncOp fn, Precision precision);

} // namespace offload
} // namespace mlir

#endif
