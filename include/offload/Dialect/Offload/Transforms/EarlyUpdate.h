//===- EarlyUpdate.h - Optimizer updates as soon as gradients are final -*- C++ -*-===//
//
// Part of offload. The mechanism of --offload-early-update, also called by
// the planner (--offload-plan-memory).
//
//===----------------------------------------------------------------------===//
#ifndef OFFLOAD_DIALECT_OFFLOAD_TRANSFORMS_EARLYUPDATE_H
#define OFFLOAD_DIALECT_OFFLOAD_TRANSFORMS_EARLYUPDATE_H

#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace mlir {
namespace offload {

/// Moves every optimizer update of `step` (`offload.sgd_update`,
/// `offload.adamw_update`) up to right after the last op it must follow
/// (see the pass description in Passes.td). Returns how many moved.
unsigned moveOptimizerUpdatesEarly(func::FuncOp step);

} // namespace offload
} // namespace mlir

#endif
