//===- State.h - The planner's decisions and what they imply ----*- C++ -*-===//
//
// Part of offload. `PlanState` is a value: the decision of every candidate
// of a PlanProblem and what follows from them -- the live-bytes profile
// (a lazy segment tree), the link time each of the four copy windows
// uses, and which recomputed regions read which candidates. Copying it is
// a snapshot; assigning a copy back is undo. Take and give back go through
// its methods, so the profile and the windows always match the decisions.
//
//===----------------------------------------------------------------------===//

#ifndef OFFLOAD_PLANNER_STATE_H
#define OFFLOAD_PLANNER_STATE_H

#include "offload/Planner/Problem.h"

#include <utility>

namespace offload::planner {

/// Live bytes per program point with range add and max (with the first
/// point holding it) in O(log points).
class LiveProfile {
public:
  explicit LiveProfile(llvm::ArrayRef<int64_t> live = {});
  /// Adds `delta` bytes over the points [lo, hi] (clamped; empty if lo > hi).
  void add(int64_t lo, int64_t hi, int64_t delta);
  /// The largest live bytes and the first point holding them.
  std::pair<int64_t, int64_t> max() const { return best[1]; }
  /// The live bytes at every point, into `out` (O(points)).
  void values(std::vector<int64_t> &out) const;
  /// The largest live bytes over the points [lo, hi] (clamped; INT64_MIN
  /// when empty), O(log points).
  int64_t maxOver(int64_t lo, int64_t hi) const;

private:
  using Entry = std::pair<int64_t, int64_t>; // bytes, point
  static Entry merge(Entry a, Entry b) { return b.first > a.first ? b : a; }
  void add(size_t node, int64_t l, int64_t r, int64_t lo, int64_t hi, int64_t delta);
  void fill(size_t node, int64_t l, int64_t r, int64_t above, std::vector<int64_t> &out) const;
  int64_t maxOver(size_t node, int64_t l, int64_t r, int64_t lo, int64_t hi) const;
  size_t n = 1, size = 1;
  std::vector<Entry> best;
  std::vector<int64_t> lazy;
};

/// Compute seconds that can hide copies in one direction and phase, and
/// the copy seconds taken there.
struct LinkWindow {
  double window = 0, used = 0;
  /// The seconds adding `add` would leave unhidden.
  double exposed(double add) const {
    return std::max(0.0, used + add - window) - std::max(0.0, used - window);
  }
};

/// The decision of one saved candidate and, for a recompute, its cone as
/// priced against the decisions around it.
struct SavedChoice {
  Decision decision = Decision::Keep;
  double seconds = 0;         // the price taken (seconds)
  int64_t transientBytes = 0; // a recompute's intermediates at its use
  llvm::SmallVector<unsigned> reads, through; // its cone's (Cone)
  size_t coneOps = 0;
  /// A recompute shared with a reader's region (shareRecomputes): the
  /// region's group id and the point from which the value is held to its
  /// own uses; -1 when it has a region of its own.
  int64_t group = -1, holdFrom = -1;
  std::string why;
};

struct ParamChoice {
  Decision decision = Decision::Keep;
  double seconds = 0;
  std::string why;
  /// Not offered to the greedy (while the re-plan tries the plan without
  /// this one on the host).
  bool banned = false;
};

struct PlanState {
  /// Every candidate kept; the profile at the problem's base live bytes and
  /// the windows at its forward and backward compute seconds.
  explicit PlanState(const PlanProblem &problem);

  const PlanProblem *problem;
  std::vector<SavedChoice> saved;
  std::vector<ParamChoice> params;
  /// readers[i]: recomputed candidates whose cone reads or reruns
  /// candidate i (may hold stale entries; dependentsOf checks each).
  std::vector<llvm::SmallVector<unsigned, 2>> readers;
  LiveProfile profile;
  LinkWindow toHostFwd, toHostBwd, toDeviceFwd, toDeviceBwd;

  /// The effect of saved candidate i's current decision on the profile
  /// (sign -1: taken, +1: taken back).
  void profileOfSaved(unsigned i, int64_t sign);
  void profileOfParam(unsigned i, int64_t sign);
  /// The effect on the link windows (sign +1: taken, -1: taken back).
  void linkOfOffload(unsigned i, double sign);
  void linkOfParam(unsigned i, double sign);
  /// Records that recomputed candidate j's cone reads its inputs.
  void registerReader(unsigned j);
  /// The recomputed candidates whose cones read or rerun candidate i.
  llvm::SmallVector<unsigned, 2> dependentsOf(unsigned i) const;
  /// Link seconds the four windows cannot hide, times `linkWeight`.
  double linkExposed(double linkWeight) const;
  bool anyHost() const;
};

} // namespace offload::planner

#endif // OFFLOAD_PLANNER_STATE_H
