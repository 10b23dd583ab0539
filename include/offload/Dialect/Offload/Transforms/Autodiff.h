//===- Autodiff.h - The forward step behind a training step -----*- C++ -*-===//
//
// Part of offload. What the planner (--offload-plan-memory) needs to rewrite a
// training step's forward (slicing a weight, --offload-slice-parameters, must
// run before autodiff) and build the step again with the same autodiff
// options, instead of a second slicing rewrite of the differentiated step.
//
//===----------------------------------------------------------------------===//
#ifndef OFFLOAD_DIALECT_OFFLOAD_TRANSFORMS_AUTODIFF_H
#define OFFLOAD_DIALECT_OFFLOAD_TRANSFORMS_AUTODIFF_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/PassManager.h"

#include <string>

namespace mlir {
namespace offload {

/// Clones the forward step that --offload-autodiff turned into `step`, at the
/// end of `into`: the forward phase's ops without their `offload.save`s, the
/// arguments with role parameter or input, and the loss as the only result.
/// Returns null and sets `why` when `step` was not built by autodiff (no
/// `offload.autodiff` attribute) or is a pipeline stage. Whether the clone
/// rebuilds `step` exactly is for the caller to check (differentiate it with
/// addRecordedAutodiff and compare): a rewrite after autodiff is not undone.
func::FuncOp cloneForwardOfStep(func::FuncOp step, ModuleOp into, std::string &why);

/// Adds --offload-autodiff, with the options recorded on the step it built
/// (`offload.autodiff` of `recordedFrom`), to the module pass manager `pm`.
/// Fails (with an error at `recordedFrom`) when the attribute is missing or
/// does not parse.
LogicalResult addRecordedAutodiff(func::FuncOp recordedFrom, OpPassManager &pm);

/// Gradient accumulation (--offload-autodiff micro-batches=K,
/// MicroBatches.cpp): the slices of the step's inputs to micro-batch 0.
struct MicroBatchSplit {
  int64_t k = 1;
  SmallVector<Operation *> slices;
};
/// On the forward step before differentiation: slices every input (role
/// `input`) along dim 0 to its first micro-batch and retypes the forward ops
/// for it. Refuses, naming the op or input, what would compute something
/// else than PyTorch's accumulation loop (batch norm in training mode, state
/// updates) or cannot be split (no batch dim, a batch not divisible by k).
LogicalResult splitStepBatch(func::FuncOp fn, int64_t k, MicroBatchSplit &split);
/// After the backward of micro-batch 0, with the builder before the return:
/// clones the forward and backward for micro-batches 1..k-1, replaces each
/// of `grads` by its f32 sum over the micro-batches, and makes the returned
/// loss the mean of the micro-batch losses. The builder is left before the
/// return.
LogicalResult unrollMicroBatches(func::FuncOp fn, const MicroBatchSplit &split, OpBuilder &b,
                                 SmallVectorImpl<Value> &grads);

} // namespace offload
} // namespace mlir

#endif
