//===- OffloadToPlan.h - Lower a training step to a runtime plan -*- C++ -*-===//
//
// Part of offload. The library form of the plan exporter
// (`offload-translate --offload-to-plan`, and the deprecated pass
// --convert-offload-to-plan), for tools and tests that compile and run a step
// in one process.
//
//===----------------------------------------------------------------------===//
#ifndef OFFLOAD_CONVERSION_OFFLOADTOPLAN_H
#define OFFLOAD_CONVERSION_OFFLOADTOPLAN_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "offload/Runtime/Plan.h"

namespace mlir {
namespace offload {
struct MemoryPlan;

/// Lowers `step` (a function with `offload.step`) to a validated runtime
/// plan. `memoryPlanPeak`, when given, receives the peak device bytes of the
/// compiler's memory plan (MemoryPlan.h), which equals the plan's
/// predictedPeakDeviceBytes. Emits a diagnostic and fails on an op without a
/// lowering, a dynamic shape, or (a compiler bug) an invalid plan.
/// `memoryPlan`, when given, is the step's memory plan already computed
/// (MemoryPlanAnalysis); otherwise it is computed here.
FailureOr<::offload::rt::PlanData> lowerStepToPlan(func::FuncOp step,
                                                   int64_t *memoryPlanPeak = nullptr,
                                                   const MemoryPlan *memoryPlan = nullptr);

/// The function of `module` with `offload.step`; an error unless there is
/// exactly one.
FailureOr<func::FuncOp> findStep(ModuleOp module);

/// What the exporter is asked for (offload-translate's options).
struct ExportPlanOptions {
  /// Lower a step with parameters and no backward phase (an inference
  /// plan); without it such a step is refused, since the plan would compute
  /// the loss and train nothing.
  bool forwardOnly = false;
  /// Where the plan summary goes (instructions, buffers, peak device bytes,
  /// arenas, in bytes): "" or false (none), - or true (stderr), or FILE.
  std::string report;
  /// The plan's name in the summary (the output file).
  std::string planName = "-";
};

/// The exporter: writes the plan of `module`'s step (lowerStepToPlan) to
/// `os` as the runtime's FlatBuffers plan file, and its summary where
/// `options.report` says. The IR is not changed. Emits a diagnostic and
/// fails as lowerStepToPlan does, on a step that trains nothing (unless
/// forwardOnly), or when the report file cannot be written.
LogicalResult exportPlan(ModuleOp module, llvm::raw_ostream &os,
                         const ExportPlanOptions &options = {});

/// One line: the plan `name`'s instruction and buffer counts, its peak
/// device bytes beside the compiler's memory plan's (`memoryPlanPeak`), and
/// its device and host arenas in bytes. The summary of both exporters.
void writePlanSummary(llvm::raw_ostream &os, llvm::StringRef name,
                      const ::offload::rt::PlanData &data, int64_t memoryPlanPeak);

/// Registers the translation `--offload-to-plan` (exportPlan) for
/// offload-translate.
void registerToPlanTranslation();

} // namespace offload
} // namespace mlir

#endif
