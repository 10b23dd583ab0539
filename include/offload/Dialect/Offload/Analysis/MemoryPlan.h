//===- MemoryPlan.h - Liveness, arena offsets and peak of a step -*- C++ -*-===//
//
// Part of offload. The static memory plan of a training step: which buffer
// each SSA tensor lives in, the interval of program points during which the
// buffer is live, its byte offset in the device or host arena, and the peak
// of live device bytes. The lowering to a runtime plan and the memory passes
// (recompute, offload, planner) share it, so the peak they predict is the
// peak the runtime measures.
//
// The model (docs/memory-model.md):
//  * program point i is the i-th op of the step's single block (an op nested
//    in a recompute region counts at its region's op); a buffer defined by op
//    i and last used by op j is live on [i, j]; both its operands and its
//    results are live while an op runs;
//  * arguments (parameters, state, optimizer state, inputs) and
//    `offload.constant` values (uploaded with the plan) are live for the
//    whole step, and so are the values the step returns;
//  * views alias: `offload.reshape`, `offload.save` and `offload.restore`
//    results share their operand's buffer, which lives until the last use of
//    any alias;
//  * optimizer updates run in place: a new parameter or optimizer-state value
//    shares the buffer of the argument it replaces when the update is that
//    argument's last reader;
//  * `!offload.host<T>` values live in the host arena; an async copy's source
//    stays live until the `offload.wait` that covers its token.
//
//===----------------------------------------------------------------------===//
#ifndef OFFLOAD_DIALECT_OFFLOAD_ANALYSIS_MEMORYPLAN_H
#define OFFLOAD_DIALECT_OFFLOAD_ANALYSIS_MEMORYPLAN_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/OwningOpRef.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/SmallVector.h"

#include <memory>

namespace mlir {
namespace offload {

enum class MemorySpace { Device, Host };

/// Byte alignment of every buffer offset in an arena.
constexpr int64_t kArenaAlignment = 256;

/// `bytes` rounded up to kArenaAlignment: where a buffer placed above an
/// arena of `bytes` bytes starts (the lowering puts the library workspace
/// there).
inline int64_t alignedArenaBytes(int64_t bytes) {
  return (bytes + kArenaAlignment - 1) / kArenaAlignment * kArenaAlignment;
}

/// The device bytes of a plan whose arena is `arenaBytes`, with the
/// library workspace of `workspaceBytes` above it as the lowering lays it
/// out (OffloadToPlan.cpp): the arena aligned plus the workspace, or the
/// arena alone without one.
inline int64_t deviceBytesWithWorkspace(int64_t arenaBytes, int64_t workspaceBytes) {
  return workspaceBytes > 0 ? alignedArenaBytes(arenaBytes) + workspaceBytes : arenaBytes;
}

/// One allocation: the values that share it, its size in bytes, live
/// interval [begin, end] in program points, and arena offset in bytes.
struct PlannedBuffer {
  llvm::SmallVector<Value, 2> values;
  int64_t bytes = 0;
  int64_t begin = 0, end = 0;
  int64_t offset = 0;
  MemorySpace space = MemorySpace::Device;
  /// Live for the whole step (arguments and returned values).
  bool persistent = false;
};

struct MemoryPlan {
  /// The function the plan describes: the step itself, or, when it has
  /// recompute regions, a copy of it with the regions inlined (they run at
  /// their position), owned by `inlinedCopy`. Values below belong to it.
  func::FuncOp function;
  OwningOpRef<func::FuncOp> inlinedCopy;
  /// Set by computeMemoryPlanInPlace on a step with recompute regions:
  /// `function` is the step itself and `schedule` lists each region's ops
  /// (not its yield) at the region's place, as the inlined copy would.
  bool regionsInPlace = false;
  llvm::SmallVector<PlannedBuffer> buffers;
  llvm::DenseMap<Value, unsigned> bufferOf; // value -> index in `buffers`
  llvm::SmallVector<Operation *> schedule;  // program point -> op
  /// Max over program points of the bytes of live device buffers.
  int64_t peakDeviceBytes = 0;
  /// Program point where the peak is first reached.
  int64_t peakPoint = 0;
  /// Bytes of the device arena (max offset + size, >= peak: fragmentation).
  int64_t deviceArenaBytes = 0;
  int64_t hostArenaBytes = 0;
  /// Live device bytes at each program point.
  llvm::SmallVector<int64_t> liveDeviceBytes;

  /// Bytes of the device buffers live for the whole step (arguments,
  /// constants, returned values).
  int64_t persistentDeviceBytes() const;
  /// The device buffers that are not persistent and are live at the peak,
  /// largest first.
  llvm::SmallVector<const PlannedBuffer *> temporariesAtPeak() const;
  /// Whether `schedule` runs the step's recompute regions op by op (an
  /// inlined copy, or the regions read in place): a region's op of the step
  /// then stands for as many program points as its region has ops.
  bool regionsExpanded() const { return bool(inlinedCopy) || regionsInPlace; }
};

/// Computes the plan of `fn` (a step: one block; recompute regions are
/// inlined into a copy first, see MemoryPlan::function). Offsets come from
/// the smaller of two placements: greedy best-fit by decreasing size over the
/// live intervals (the "greedy by size" heuristic of TensorFlow Lite's arena
/// planner; Pisarchyk and Lee, "Efficient Memory Management for Deep Neural
/// Net Inference", 2020), skipped when too many buffers are alive together
/// for its O(n k log k) cost, and a best-fit linear scan over program points
/// (O(n log n)). Fails, with a diagnostic, on a tensor of dynamic shape.
/// With `placeBuffers` false only the liveness is computed (buffers, live
/// bytes per point, the peak): no offsets, and deviceArenaBytes and
/// hostArenaBytes are 0 -- for callers that need the peak, not the arena
/// (prefetch placement), since packing is most of a plan's time.
FailureOr<MemoryPlan> computeMemoryPlan(func::FuncOp fn, bool placeBuffers = true);

/// The same plan as computeMemoryPlan -- the same buffers in the same order,
/// intervals, offsets, peak, arenas and live bytes per point -- with the
/// recompute regions read where they are instead of inlined into a copy of
/// the step: cloning and erasing a 12k-op step cost a tenth of planning it.
/// `function` is `fn`; `schedule` holds the regions' ops (see
/// MemoryPlan::regionsInPlace); a region's block arguments and results have
/// no entry in `bufferOf` (they stand for its inputs and yielded values).
/// For callers that read the figures (the planner's checks, prefetch
/// placement and tuning); the lowering and the reports, which walk the
/// values, take computeMemoryPlan's flat copy. unittests/Compiler
/// (MemoryPlanInPlace) checks the two agree on planned steps.
FailureOr<MemoryPlan> computeMemoryPlanInPlace(func::FuncOp fn, bool placeBuffers = true);

/// The memory plans of the steps of a module, as an MLIR analysis
/// (`getAnalysis<MemoryPlanAnalysis>()` on the module): each step's plan is
/// computed on its first request and kept while passes that leave the IR
/// unchanged (the reports, the lowering) mark analyses preserved, so a
/// pipeline computes it once rather than once per consumer.
class MemoryPlanAnalysis {
public:
  explicit MemoryPlanAnalysis(Operation *) {}
  /// The plan of `fn`; failure (with a diagnostic) when it cannot be
  /// computed. The pointer stays valid while the analysis is cached.
  FailureOr<const MemoryPlan *> lookup(func::FuncOp fn);

private:
  llvm::DenseMap<Operation *, std::unique_ptr<MemoryPlan>> plans;
};

} // namespace offload
} // namespace mlir

#endif
