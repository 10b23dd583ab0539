//===- Algorithms.h - The planner's algorithms over a PlanState -*- C++ -*-===//
//
// Part of offload. Free functions that move a PlanState toward an aim (a
// live-bytes level): the greedy at the peak, the reverse delete, the
// host-parameter exchange and re-plan, and shared recompute regions. Each
// is described where it is defined (Greedy.cpp, HostMoves.cpp,
// SharedRegions.cpp) and in docs/planner.md. They price with the `Planner`
// context: the problem, the cone model, the options and the link weight.
//
//===----------------------------------------------------------------------===//

#ifndef OFFLOAD_PLANNER_ALGORITHMS_H
#define OFFLOAD_PLANNER_ALGORITHMS_H

#include "offload/Planner/Options.h"
#include "offload/Planner/State.h"

namespace offload::planner {

/// Recompute cones against the current decisions: recomputed values are no
/// longer checkpoints, so a cone chains through them. The IR's model is
/// PlanProblemBuilder.cpp's; unit tests give synthetic ones.
class ConeModel {
public:
  virtual ~ConeModel();
  /// Saved candidate i's cone against the current availability, or none
  /// when it has more than the options' maxConeOps ops.
  virtual std::optional<Cone> coneOf(unsigned i) = 0;
  /// Candidate i's values stop (or start again) being available as
  /// checkpoints.
  virtual void setRecomputed(unsigned i, bool recomputed) = 0;
  /// Checkpoint candidate k (PlanProblem::checkpoints) is saved (or not):
  /// cones stop at it. A model without checkpoints ignores it.
  virtual void setCheckpoint(unsigned k, bool saved) {}
  /// Makes availability match `state`'s decisions (after a snapshot of it
  /// was assigned back).
  void sync(const PlanState &state);
};

/// What the algorithms share: the problem, the cones, the constants, and
/// the weight of unhidden link seconds in the prices (1: the model as it
/// is; the link calibration raises it, Search.cpp).
struct Planner {
  const PlanProblem &problem;
  ConeModel &cones;
  const PlannerOptions &options;
  double linkWeight = 1;
  /// The checkpoint re-plan runs in `decide` (a run of its own in the
  /// search, Search.cpp).
  bool checkpointReplan = false;
  /// The knapsack (Knapsack.cpp) takes the first decisions of `decide`
  /// instead of the greedy (the search's knapsack run under a saved budget).
  bool useKnapsack = false;
  /// Non-zero: the greedy's prices are perturbed, per candidate, by a
  /// factor drawn from this seed (the search's randomised restarts,
  /// Search.cpp); 0: the prices as they are.
  uint64_t perturbSeed = 0;
  /// The factor of candidate `index` of `kind` (0 saved, 1 parameter) in
  /// [1 - options.perturbation, 1 + options.perturbation]; 1 when
  /// perturbSeed is 0.
  double perturbation(int kind, unsigned index) const;

  /// A step of up to options.finePoints points.
  bool small() const { return problem.numPoints() <= options.finePoints; }
  /// Whether the links' copies queue at their times (PlanState).
  bool timedLinks() const { return !small() || options.timedLinksOnSmallSteps; }
  /// Offloading saved candidate i now: its unhidden copy ends or the link
  /// time its windows cannot hide, whichever is more, weighted, plus the
  /// tie-break share of its copy seconds.
  double offloadSeconds(const PlanState &s, unsigned i) const;
  /// Parameter i on the host now: its host update, the link time it adds
  /// that the windows cannot hide (weighted), and the tie-break share.
  double hostSeconds(const PlanState &s, unsigned i) const;
  /// The decisions' price as the problem file states it.
  double decisionsSeconds(const PlanState &s) const;
  /// Assigns `snapshot` back to `s` and makes the cones' availability match
  /// its decisions again.
  void restore(PlanState &s, PlanState snapshot) {
    s = std::move(snapshot);
    cones.sync(s);
  }
};

/// The greedy at the peak (Chvatal's cost-effectiveness rule, over the
/// excess above `aimBytes`): true when the profile reaches the aim.
bool greedy(Planner &p, PlanState &s, int64_t aimBytes);
/// Under a saved budget: the candidates live at the peak that free at least
/// (peak - aimBytes) bytes at the least price, by the knapsack's dynamic
/// program (Knapsack.cpp), then the greedy for what is left; true when the
/// profile reaches the aim. Any profile works; it is exact only where the
/// peak is one point all candidates span (the saved bytes').
bool knapsack(Planner &p, PlanState &s, int64_t aimBytes);
/// Takes `decision` (Recompute with `cone`, or Offload) for kept saved
/// candidate i at `seconds`, with `why`, as the greedy takes it.
void takeSaved(Planner &p, PlanState &s, unsigned i, Decision decision, double seconds,
               const Cone *cone, const std::string &why);
/// Reverse delete: decisions, most expensive first, given back while the
/// profile stays at or below `aimBytes`.
void giveBack(Planner &p, PlanState &s, int64_t aimBytes);
/// Re-prices the recomputed regions that read candidate i (after it became
/// recomputed or kept again).
void repriceDependents(Planner &p, PlanState &s, unsigned i);
/// One-for-one, two-for-one and one-for-several host-parameter exchanges.
void exchangeHostParameters(Planner &p, PlanState &s, int64_t aimBytes);
/// Ruin and recreate around each host parameter, most expensive first.
void replanHostParameters(Planner &p, PlanState &s, int64_t aimBytes);
/// Shared recompute regions (Chen et al.'s segments) while the profile
/// stays at or below `aimBytes`; `unshareAll` undoes them.
void shareRecomputes(Planner &p, PlanState &s, int64_t aimBytes);
/// Under a saved budget, recompute regions that rerun a common recomputed
/// value made one, at the earlier region's point (the later's values held
/// from there), while the profile stays at or below `aimBytes`
/// (shareRecomputes calls it last).
void mergeOverlappingRegions(Planner &p, PlanState &s, int64_t aimBytes);
void unshareAll(PlanState &s);

/// Checkpoints beyond autodiff's saved values (Checkpoints.cpp): a forward
/// value inside recomputed regions' cones, saved so that they stop there,
/// where the seconds they no longer rerun are positive and the profile
/// stays at or below `aimBytes`; the most seconds saved per byte first.
/// `uncheckpointAll` gives every one back (and re-prices the regions).
void checkpointRecomputes(Planner &p, PlanState &s, int64_t aimBytes);
void uncheckpointAll(Planner &p, PlanState &s);
/// Ruin and recreate around the most promising checkpoints whose bytes do
/// not fit as the decisions stand: each taken, the greedy and the reverse
/// delete run again, kept when the price falls (Checkpoints.cpp).
void replanCheckpoints(Planner &p, PlanState &s, int64_t aimBytes);

/// The host-parameter moves a run makes after the greedy and the reverse
/// delete.
enum class HostMoves { None, Exchange, ExchangeAndReplan };
const char *hostMovesName(HostMoves m);

/// One aim's decisions: greedy, reverse delete, the host moves, shared
/// regions. False when the greedy cannot reach the aim (the rest then runs
/// at the peak it reached).
bool decide(Planner &p, PlanState &s, int64_t aimBytes, HostMoves moves);

} // namespace offload::planner

#endif // OFFLOAD_PLANNER_ALGORITHMS_H
