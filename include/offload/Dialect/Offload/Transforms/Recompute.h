//===- Recompute.h - The forward ops that rematerialize a value -*- C++ -*-===//
//
// Part of offload. Shared by --offload-recompute, which clones these ops
// into a recompute region, and the planner, which prices them.
//
//===----------------------------------------------------------------------===//
#ifndef OFFLOAD_DIALECT_OFFLOAD_TRANSFORMS_RECOMPUTE_H
#define OFFLOAD_DIALECT_OFFLOAD_TRANSFORMS_RECOMPUTE_H

#include "mlir/IR/Operation.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/SetVector.h"

namespace mlir {
namespace offload {

/// Whether `op` may be cloned into a recompute region: a pure compute op of
/// the offload dialect without regions (copies, waits and phase markers
/// have effects; saves and restores are handles).
bool isRecomputable(Operation *op);

/// The recompute cone of `values`: the forward ops that produce them from
/// block arguments and from the values in `available` (saved values that
/// stay kept), in a valid order (producers first), appended to `cone`; the
/// arguments and available values it reads are appended to `inputs`.
/// Fails when a producer is not recomputable, or when the cone would hold
/// more than `maxOps` ops (0: no limit).
LogicalResult computeRecomputeCone(ArrayRef<Value> values,
                                   const llvm::DenseSet<Value> &available,
                                   llvm::SetVector<Operation *> &cone,
                                   llvm::SetVector<Value> &inputs, size_t maxOps = 0);

} // namespace offload
} // namespace mlir

#endif
