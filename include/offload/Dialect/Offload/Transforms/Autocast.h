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

/// Rewrites the forward-only step `fn` for `precision` (nothing for fp32):
/// casts before each op as its class says, result types re-inferred, step
/// results cast back to their declared types. Returns the number of casts
/// inserted, or failure (with an error at the op) when an op cannot take
/// the types. Idempotent.
FailureOr<unsigned> applyAutocast(func::FuncOp fn, Precision precision);

} // namespace offload
} // namespace mlir

#endif
