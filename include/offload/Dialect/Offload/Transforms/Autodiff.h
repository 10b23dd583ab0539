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

} // namespace offload
} // namespace mlir

#endif
