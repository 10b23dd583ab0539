//===- State.h - The planner's decisions and what they imply ----*- C++ -*-===//
//
// Part of offload. `PlanState` is a value: the decision of every candidate
// of a PlanProblem and what follows from them -- the live-bytes profile
// (a lazy segment tree), the copies queued on the two links, and which recomputed regions read which candidates. Copying it is
// a snapshot; assigning a copy back is undo. Take and give back go through
// its methods, so the profile and the links always match the decisions.
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

/// One copy on a link: its seconds, and when it may start (`issue`) and
/// when compute waits for it (`due`), in seconds of compute from the start
/// of the step; a negative time is its phase's start (issue) or end (due).
struct LinkCopy {
  double seconds = 0, issue = -1, due = -1;
  bool backward = false; // its phase
};

/// The copies on one link (one direction) over the step, as the simulator
/// runs them (Timeline.h): in issue order on one stream, each from its
/// issue, with compute waiting at its due time until it is done; the wait
/// delays the compute after it, and the issues and dues with it. Times are
/// the compute's own (the step's estimated op seconds before the point);
/// the exposed seconds are the compute's waits. With every copy from the
/// start to the end of its phase this is the per-phase window (copy time
/// beyond the phase's compute is exposed); a copy issued late in forward
/// cannot use the compute before its issue, a prefetch due early in
/// backward cannot use the compute after its use, and a copy queued behind
/// others waits for them.
class LinkQueue {
public:
  LinkQueue() = default;
  LinkQueue(double forwardSeconds, double backwardSeconds)
      : forward(std::max(0.0, forwardSeconds)), backward(std::max(0.0, backwardSeconds)) {}
  /// Adds (sign +1) or removes (-1) a copy.
  void add(const LinkCopy &c, double sign);
  /// Compute seconds spent waiting for the copies.
  double exposed() const;
  /// Adds exposed() to `t` (with no copy timed, phase by phase).
  void addExposed(double &t) const;
  /// What adding `copies` would add to exposed(): the queue run again from
  /// the first of their issues, O(copies queued after it).
  double exposedAdding(llvm::ArrayRef<LinkCopy> copies) const;

private:
  struct Copy {
    double issue, due, seconds;
    bool operator<(const Copy &o) const {
      return issue < o.issue || (issue == o.issue && due < o.due);
    }
  };
  Copy resolve(const LinkCopy &c) const;
  double windowExposed(double addForward, double addBackward) const;
  /// Records the run (settled).
  void settle() const;
  double forward = 0, backward = 0;
  /// The copy seconds of each phase (forward, backward) and how many
  /// copies have times: with none, the queue is the per-phase window.
  double used[2] = {0, 0};
  int64_t timed = 0;
  std::vector<Copy> copies; // by issue (then due)
  std::vector<unsigned> byDue; // indices into `copies`, by due
  mutable bool settled = true;
  /// The recorded run: right after each copy's issue (index in `copies`),
  /// when the link is next free, the compute's waits so far and the dues
  /// done (into `byDue`); each copy's completion; the indices of the copies
  /// by due; the total wait.
  struct After {
    double linkFree = 0, waited = 0;
    size_t duesDone = 0;
  };
  mutable std::vector<After> after;
  mutable std::vector<double> done, scratch;
  mutable std::vector<unsigned> pending;
  mutable double waited = 0;
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

/// A checkpoint candidate saved for the recomputed regions whose cones
/// stop at it (Checkpoints.cpp): held on the device from its last forward
/// use to `holdTo`, the last of those regions.
struct CheckpointChoice {
  bool saved = false;
  int64_t holdTo = -1;
  /// The cone seconds the regions no longer rerun (when saved).
  double secondsSaved = 0;
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
  /// the links empty. `timedLinks`: the copies queue at their issue and due
  /// times (the facts'); else each may use any compute of its phase (the
  /// per-phase windows, Options.h's timedLinksOnSmallSteps).
  explicit PlanState(const PlanProblem &problem, bool timedLinks = true);

  const PlanProblem *problem;
  std::vector<SavedChoice> saved;
  std::vector<ParamChoice> params;
  std::vector<CheckpointChoice> checkpoints;
  /// readers[i]: recomputed candidates whose cone reads or reruns
  /// candidate i (may hold stale entries; dependentsOf checks each).
  std::vector<llvm::SmallVector<unsigned, 2>> readers;
  LiveProfile profile;
  /// The device-to-host and host-to-device links.
  LinkQueue toHost, toDevice;
  bool timedLinks = true;

  /// The effect of saved candidate i's current decision on the profile
  /// (sign -1: taken, +1: taken back).
  void profileOfSaved(unsigned i, int64_t sign);
  void profileOfParam(unsigned i, int64_t sign);
  /// The bytes of saved checkpoint k over its hold (sign +1: taken, -1:
  /// taken back).
  void profileOfCheckpoint(unsigned k, int64_t sign);
  bool anyCheckpoint() const;
  /// The effect on the links (sign +1: taken, -1: taken back).
  void linkOfOffload(unsigned i, double sign);
  void linkOfParam(unsigned i, double sign);
  /// Times the links' copies or not (PlanState's `timedLinks`), their
  /// queues built again from the decisions.
  void setTimedLinks(bool timed);
  /// The links' queues built again from the decisions (after decisions were
  /// set directly: a decisions file, the fallback's all-in variants).
  void relink();
  /// Recomputed candidate i priced with `cone` (its seconds, intermediates
  /// and reads), the profile and the readers with it.
  void priceRecompute(unsigned i, const Cone &cone);
  /// Records that recomputed candidate j's cone reads its inputs.
  void registerReader(unsigned j);
  /// The recomputed candidates whose cones read or rerun candidate i.
  llvm::SmallVector<unsigned, 2> dependentsOf(unsigned i) const;
  /// Compute seconds waiting for the two links, times `linkWeight`.
  double linkExposed(double linkWeight) const;
  bool anyHost() const;
  /// The decisions' price: the recomputes' and host updates' seconds, the
  /// link waits (linkWaits; timed, the queues hold the offloads' own
  /// waits), and `tieBreak` of every copy's seconds.
  double priceOfDecisions(double tieBreak, double linkWeight) const;
  /// The link waits the prices assume: linkExposed (times `linkWeight`),
  /// and where the links are not timed the offloads' own waits (unweighted,
  /// as the problem file states them).
  double linkWaits(double linkWeight) const;
};

/// The kept saved bytes of `state`'s decisions: the saved values it keeps
/// on the device and the checkpoints it saves (what a saved budget bounds,
/// PlanProblem::savedBudgetBytes).
int64_t keptSavedBytes(const PlanState &state);

/// The copies of saved candidate c's offload: to the host, to the device
/// (`timed`: with the facts' issue and due times; else each in its phase).
std::pair<LinkCopy, LinkCopy> offloadCopies(const SavedFacts &c, bool timed);
/// The copies of parameter p on the host: its fetches (to the device, at
/// most two), its gradient (to the host, at most one).
void paramCopies(const ParamFacts &p, bool timed, llvm::SmallVectorImpl<LinkCopy> &toDevice,
                 llvm::SmallVectorImpl<LinkCopy> &toHost);

} // namespace offload::planner

#endif // OFFLOAD_PLANNER_STATE_H
