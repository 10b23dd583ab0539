//===- OffloadToPlan.h - Lower a training step to a runtime plan -*- C++ -*-===//
//
// Part of offload. The library form of --convert-offload-to-plan, for tools
// and tests that compile and run a step in one process.
//
//===----------------------------------------------------------------------===//
#ifndef OFFLOAD_CONVERSION_OFFLOADTOPLAN_H
#define OFFLOAD_CONVERSION_OFFLOADTOPLAN_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
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

} // namespace offload
} // namespace mlir

#endif
