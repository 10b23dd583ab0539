//===- MemoryTimeline.h - Live device bytes by category over a step -*- C++ -*-===//
//
// Part of offload. The memory timeline of a step: for every program point of
// its memory plan (MemoryPlan.h), the bytes of live device buffers split by
// what they hold, and where each phase starts. The planner writes it as JSON
// (`--offload-plan-memory="... timeline=FILE.json"`) for the unplanned and
// the planned step; python/plot_memory_timeline.py draws it (docs/planner.md).
//
//===----------------------------------------------------------------------===//

#ifndef OFFLOAD_DIALECT_OFFLOAD_ANALYSIS_MEMORYTIMELINE_H
#define OFFLOAD_DIALECT_OFFLOAD_ANALYSIS_MEMORYTIMELINE_H

#include "offload/Dialect/Offload/Analysis/MemoryPlan.h"
#include "llvm/Support/raw_ostream.h"

#include <array>
#include <string>

namespace mlir {
namespace offload {

/// What a device buffer holds, decided from its values (first rule that
/// matches):
///  * Parameter: a step argument whose role is `parameter` (and the new
///    parameter written in place over it);
///  * OptimizerState: an argument whose role is `optimizer_state` (momentum, Adam
///    moments, step counters);
///  * Input: any other argument (the batch);
///  * Copy: the destination of a host-to-device copy (`offload.to_device`:
///    a prefetched saved value or host parameter, from the copy's issue on);
///  * Gradient: a value the optimizer update reads as its gradient;
///  * Saved: a forward value saved for backward (`offload.save`);
///  * Temporary: everything else (activations not saved, partial gradients
///    of activations, workspace-like intermediates, constants).
enum class MemoryCategory : unsigned {
  Parameter,
  OptimizerState,
  Input,
  Copy,
  Gradient,
  Saved,
  Temporary,
};
constexpr unsigned kNumMemoryCategories = 7;

/// The JSON key of a category ("parameters", "optimizer_state", ...).
llvm::StringRef memoryCategoryName(MemoryCategory c);

/// Live device bytes per program point and category of one memory plan.
struct MemoryTimeline {
  /// liveBytes[c][p]: bytes of live device buffers of category c at point p;
  /// summed over c, the plan's liveDeviceBytes[p].
  std::array<llvm::SmallVector<int64_t>, kNumMemoryCategories> liveBytes;
  /// (phase name, first program point of that phase), in order.
  llvm::SmallVector<std::pair<std::string, int64_t>> phases;
  int64_t points = 0;
  int64_t arenaBytes = 0; ///< the plan's device arena bytes
  int64_t peakBytes = 0;  ///< max live device bytes
  int64_t peakPoint = 0;
  std::string peakOp; ///< the op at peakPoint, e.g. "offload.matmul"
};

/// Builds the timeline of `plan` (a computed memory plan of a step).
MemoryTimeline computeMemoryTimeline(const MemoryPlan &plan);

/// Writes the timelines as one JSON document:
///   {"format": "offload-memory-timeline", "version": 1, "step": NAME,
///    "target": TARGET, "budget_bytes": B, "categories": [...],
///    "plans": [{"name": "unplanned", "points": N, "arena_bytes": ...,
///               "peak_bytes": ..., "peak_point": ..., "peak_op": ...,
///               "phases": [{"phase": "forward", "point": 0}, ...],
///               "live_bytes": {"parameters": [N ints], ...}}, ...]}
/// All sizes in bytes; points index the plan's schedule (one op each).
void writeMemoryTimelineJson(llvm::raw_ostream &os, llvm::StringRef stepName,
                             llvm::StringRef targetName, int64_t budgetBytes,
                             llvm::ArrayRef<std::pair<std::string, const MemoryTimeline *>> plans);

} // namespace offload
} // namespace mlir

#endif // OFFLOAD_DIALECT_OFFLOAD_ANALYSIS_MEMORYTIMELINE_H
