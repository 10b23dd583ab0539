//===- Timeline.h - Step-time simulation over compute and copy streams -*- C++ -*-===//
//
// Part of offload. The step time a plan costs on a target: the step's ops
// in program order on one compute stream, each taking the cost model's
// seconds (TargetModel::opSeconds), and its async copies on two copy
// streams (host-to-device, device-to-host) that run beside compute. A copy
// starts when it is issued (compute has reached it), its stream is free
// and the copies it depends on are done; an `offload.wait` holds compute
// until the copies it names are done. A data-parallel step's all-reduces
// (`offload.all_reduce`) run on a communication stream of their own, each
// after compute made its bucket (TargetModel::allReduceSeconds). The step
// ends when every stream is idle. This is the model the runtime executes (docs/runtime.md:
// streams and events), so the simulated time is what the planner trades
// memory against.
//
//===----------------------------------------------------------------------===//
#ifndef OFFLOAD_DIALECT_OFFLOAD_ANALYSIS_TIMELINE_H
#define OFFLOAD_DIALECT_OFFLOAD_ANALYSIS_TIMELINE_H

#include "offload/Dialect/Offload/Analysis/Target.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

#include <algorithm>

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

/// What a caller that simulates the same step many times (its ops fixed,
/// its copies moving: tunePrefetches) keeps between runs, and what it learns
/// per op. All seconds.
struct TimelineCache {
  /// Each op's seconds on the target (TargetModel::opSeconds, and a copy's
  /// transfer time), filled on first use.
  llvm::DenseMap<Operation *, double> seconds;
  /// Filled by each run: the seconds compute waited at each `offload.wait`
  /// that held it (absent: it did not).
  llvm::DenseMap<Operation *, double> stallAt;
};

/// Simulates `step` (one block; recompute regions count as their ops) on
/// `target`. With `cache`, op times are taken from it (and added to it),
/// and it receives the stall at each wait.
Timeline simulateTimeline(func::FuncOp step, const TargetModel &target,
                          TimelineCache *cache = nullptr);

/// The simulation's clocks between two ops: when compute, each copy
/// stream and the communication stream are next free (seconds).
struct TimelineClock {
  double compute = 0, toDevice = 0, toHost = 0, comm = 0;
  /// When the last of the four is done.
  double end() const { return std::max({compute, toDevice, toHost, comm}); }
};

/// One simulation of `step` recorded (each op's clocks before it, each
/// copy's completion), to answer what the step time becomes when one op has
/// moved, without simulating the whole step again: the same rule as
/// simulateTimeline, run from where the order changed and stopped as soon
/// as no clock and no copy still to be waited for is ahead of the record
/// (the rest then cannot end sooner). For tunePrefetches, which tries many
/// single moves.
class TimelineReplay {
public:
  TimelineReplay(func::FuncOp step, const TargetModel &target, TimelineCache &cache);
  /// The recorded simulation (and `cache.stallAt` of it).
  const Timeline &timeline() const { return recorded; }
  /// Records the step as it is now (after a move is kept).
  void record();
  /// The simulated step seconds if `op` were right before `point` instead,
  /// nothing else changed since record(): exact when shorter than the
  /// recorded step, the recorded step's seconds when it cannot be shorter
  /// (the replay stops there). The IR is as it was on return.
  double stepSecondsIfMoved(Operation *op, Operation *point);
  /// Ops simulated by stepSecondsIfMoved so far (its work).
  int64_t opsReplayed() const { return replayed; }
  /// `op`'s index in the recorded order.
  int64_t positionOf(Operation *op) const { return position.lookup(op); }

private:
  func::FuncOp step;
  const TargetModel &target;
  TimelineCache &cache;
  Timeline recorded;
  llvm::DenseMap<Value, double> tokenDone;
  /// Each op's index in the recorded order, the clocks before the op at
  /// each index, and the index of the last op that reads each token.
  llvm::DenseMap<Operation *, int64_t> position;
  std::vector<TimelineClock> clockAt;
  llvm::DenseMap<Value, int64_t> lastRead;
  int64_t replayed = 0;
};

} // namespace offload
} // namespace mlir

#endif
