//===- Prefetch.h - Prefetch placement from a target cost model -*- C++ -*-===//
//
// Part of offload. The host-offload passes (--offload-host-offload for saved
// values, --offload-host-parameters for parameters) bring tensors back with
// async host-to-device copies. Where each copy is issued decides whether it
// is hidden under compute, and how long its device buffer is alive: too late
// and compute waits for it, too early and it raises the peak. This file
// places those copies from a roofline estimate of each op's time on the
// target and the host link's bandwidth.
//
//===----------------------------------------------------------------------===//
#ifndef OFFLOAD_DIALECT_OFFLOAD_TRANSFORMS_PREFETCH_H
#define OFFLOAD_DIALECT_OFFLOAD_TRANSFORMS_PREFETCH_H

#include "offload/Dialect/Offload/Analysis/Target.h"
#include "offload/Dialect/Offload/IR/OffloadOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace mlir {
namespace offload {

// The target the placement estimates times for: TargetModel (Target.h).

/// Marks read by the policy=marked of the host-offload passes (set by the
/// planner or by hand; OffloadDialect.td).
constexpr llvm::StringLiteral kHostOffloadAttrName = OffloadDialect::kHostOffloadAttrName;
constexpr llvm::StringLiteral kHostParameterAttrName = OffloadDialect::kHostParameterAttrName;

/// Checks the options that the host-offload passes share, before any
/// rewrite: policy=names needs a non-empty `names` glob (an empty one used to
/// default to "*", moving everything), `min-bytes` must be >= 0 and
/// `prefetch-distance` -1 (from the cost model) or >= 0. Emits an error
/// naming the pass and the option at `anchor` and fails.
LogicalResult checkMemoryPassOptions(Operation *anchor, StringRef passName,
                                     bool namesPolicy, StringRef names,
                                     int64_t minBytes, int64_t prefetchDistance);

/// The cost model of a host-offload pass's target options (Passes.td,
/// TargetModelOptions): the target named by `target` when it is not empty
/// (Target.h, resolveTarget); else, unless a rate was given on the command
/// line (`ratesGiven`), the target recorded on the module (kTargetAttrName,
/// which the planner sets, so its mechanisms price as it does); else the
/// three rates. Emits an error at `anchor` prefixed by `passName` and fails
/// on an unknown target, a bad target file or attribute, or a rate that is
/// not > 0.
LogicalResult targetModelFromOptions(Operation *anchor, StringRef passName, StringRef target,
                                     double linkBandwidth, double deviceFlops,
                                     double deviceBandwidth, bool ratesGiven, TargetModel &out);

/// One prefetch to place: an async `offload.to_device` that sits right
/// before `use`, the `offload.wait` on its token (which sits right before
/// the first op that reads the copy). The copy may move up to just after
/// `earliest` (nullptr: the start of the block), never above the
/// definitions of its operands.
struct PrefetchRequest {
  ToDeviceOp copy;
  Operation *use = nullptr;
  Operation *earliest = nullptr;
};

/// The prefetch rule, shared by the mechanism (placePrefetches) and the
/// planner's prediction of it (PlanProblemBuilder.cpp): the latest point p
/// in [lo, hi] from which a host-to-device copy of `seconds`, issued at p
/// but not before the link is free (`linkFree`, seconds), finishes by
/// `deadline`: max(startAt(p), linkFree) + seconds <= deadline. `lo` when
/// no point does. `startAt(p)` is the estimated start time, in seconds, of
/// the op at point p and must not decrease with p.
int64_t latestCoveringPoint(llvm::function_ref<double(int64_t)> startAt, int64_t lo,
                            int64_t hi, double deadline, double seconds,
                            double linkFree = 0);

/// Moves each copy up to where, by `target`'s estimate, it finishes before
/// its use: the latest op whose estimated start time is at least the copy's
/// duration before the use, taking copies queued earlier on the one
/// host-to-device stream into account. A copy never moves above a point
/// where the live device bytes plus its own would exceed the step's peak as
/// planned with every copy at its use (so prefetching never raises the
/// peak). Sets each copy's `prefetch_distance` to the compute ops it now
/// precedes its use by. Requests are handled in the order of their uses.
/// Fails (with a diagnostic) only when the memory plan cannot be computed.
LogicalResult placePrefetches(func::FuncOp fn,
                              MutableArrayRef<PrefetchRequest> requests,
                              const TargetModel &target);

/// What tunePrefetches did: the simulated step time before and after, in
/// seconds, and the number of moves it kept.
struct PrefetchTuning {
  double beforeSeconds = 0, afterSeconds = 0;
  unsigned moved = 0;
};

/// Tunes the placed prefetches of `fn` (the async host-to-device copies a
/// host pass placed: they carry `prefetch_distance`) against the step-time
/// simulation on `target` (Timeline.h, the model the planner judges plans
/// with), where placePrefetches' estimate left compute waiting: each copy
/// in turn is tried right before its wait and 1, 2, 4, ... 32 compute ops
/// above and below its place (never above its operands or its phase
/// marker, never above a point where it would raise the step's peak live
/// device bytes) and moved to the point with the shortest simulated step,
/// when that is strictly shorter; up to `maxSweeps` passes over the copies,
/// ending at one that moves nothing, or when the trials have simulated
/// `workPerOp` times the step's op count (TimelineReplay::opsReplayed: a
/// bound on the work that does not depend on the machine, so the plan does
/// not either). The copies tried are those whose wait held compute and
/// the copies queued on the link just ahead of them, the longest stalls
/// first. Nothing is tried when no copy stalls compute. When moves were made, `stillFits()` (the caller's check of the
/// arena, which moving a buffer's start can change) decides whether they
/// are kept; otherwise every copy goes back. The simulated time never
/// grows. Fails only when the memory plan cannot be computed.
FailureOr<PrefetchTuning> tunePrefetches(func::FuncOp fn, const TargetModel &target,
                                         llvm::function_ref<bool()> stillFits,
                                         unsigned maxSweeps = 2, double workPerOp = 32);

/// --offload-host-parameters' rule (refetch=auto) for a host parameter
/// used in forward and in backward: its forward copy stays on the device
/// through to backward when the compute between its last forward use and
/// its first backward use (`gapSeconds`) is shorter than two of its
/// host-to-device copies (`copySeconds` each): a second copy would not be
/// hidden by that gap, and the bytes it frees would be held by the copies
/// in flight for most of it. The planner predicts the move with this rule
/// (PlanProblemBuilder.cpp), so prediction and mechanism agree.
inline bool keepParameterThrough(double gapSeconds, double copySeconds) {
  return gapSeconds < 2 * copySeconds;
}

/// Whether `op` counts as a compute op for prefetch and wait distances
/// (copies, waits, phase markers, saved-value handles and views do not).
bool isComputeForDistance(Operation *op);

/// The op `n` compute ops after `from` (exclusive) in its block, not past
/// `limit`: the point to insert before. `limit` when there are fewer.
Operation *advanceComputeOps(Operation *from, unsigned n, Operation *limit);
/// The op `n` compute ops before `to` (exclusive), not above `limit`
/// (nullptr: the block's start): the point to insert before.
Operation *retreatComputeOps(Operation *to, unsigned n, Operation *limit);

} // namespace offload
} // namespace mlir

#endif
