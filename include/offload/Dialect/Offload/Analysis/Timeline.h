//===- Timeline.h - Step-time simulation over compute and copy streams -*- C++ -*-===//
//
// Part of offload. The step time a plan costs on a target: the step's ops
// in program order on one compute stream, each taking the cost model's
// seconds (TargetModel::opSeconds), and its async copies on two copy
// streams (host-to-device, device-to-host) that run beside compute. A copy
// starts when it is issued (compute has reached it), its stream is free
// and the copies it depends on are done; an `offload.wait` holds compute
// until the copies it names are done. The step ends when all three streams
// are idle. This is the model the runtime executes (docs/runtime.md:
// streams and events), so the simulated time is what the planner trades
// memory against.
//
//===----------------------------------------------------------------------===//
#ifndef OFFLOAD_DIALECT_OFFLOAD_ANALYSIS_TIMELINE_H
#define OFFLOAD_DIALECT_OFFLOAD_ANALYSIS_TIMELINE_H

#include "offload/Dialect/Offload/Analysis/Target.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace mlir {
namespace offload {

/// Simulated seconds of one step. All fields are seconds.
struct Timeline {
  /// When the last of the streams finishes.
  double stepSeconds = 0;
  /// Busy time of the compute stream (the sum of op times).
  double computeSeconds = 0;
  /// Busy time of the host-to-device and device-to-host copy streams.
  double hostToDeviceSeconds = 0, deviceToHostSeconds = 0;
  /// Busy time of the communication stream (offload.all_reduce,
  /// TargetModel::allReduceSeconds).
  double collectiveSeconds = 0;
  /// Time compute spent waiting for copies (copies not hidden by compute).
  double stallSeconds = 0;
};

/// Simulates `step` (one block; recompute regions count as their ops) on
/// `target`.
Timeline simulateTimeline(func::FuncOp step, const TargetModel &target);

} // namespace offload
} // namespace mlir

#endif
