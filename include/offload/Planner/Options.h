//===- Options.h - Every constant of the planner's search -------*- C++ -*-===//
//
// Part of offload. The tuning constants of the planner's algorithms and
// search, in one place, each with the measurement that set it (see
// docs/planner.md). The defaults are the planner's; unit tests change them
// to drive an algorithm into a corner.
//
//===----------------------------------------------------------------------===//

#ifndef OFFLOAD_PLANNER_OPTIONS_H
#define OFFLOAD_PLANNER_OPTIONS_H

#include <cstddef>
#include <cstdint>

namespace offload::planner {

struct PlannerOptions {
  /// A recompute cone (or a chain of them) of more ops is not offered:
  /// chains stay bounded and priced as they run (the 32-layer encoder at
  /// 40% of its arena reran 45,629 ops unbounded).
  size_t maxConeOps = 256;
  /// Steps of up to this many program points are "small": the greedy takes
  /// at most one choice per `takeEvery` offered per round and refreshes its
  /// excess profile every round, and the host-parameter moves, the aim
  /// bisection and the link calibration run. Larger steps keep planning
  /// near-linear (a 10k-op chain: 7 s -> 0.9 s).
  int64_t finePoints = 2048;
  size_t takeEvery = 16;
  /// On a large step the greedy's excess profile is refreshed after this
  /// many takes (an O(points) pass each).
  size_t refreshTakes = 32;
  /// Checkpoints beyond the saved values (Checkpoints.cpp): at most this
  /// many tried per aim's decisions, the most promising first; on a step
  /// larger than finePoints, `maxCheckpointTriesLarge` (each try walks its
  /// readers' cones again: 512 cost the 128-layer encoder at 40% of its
  /// arena +12% of planning time, 64 cost the 10k-op chain +8% whole
  /// process, 16 +0.3% (median of 5, against f07565f's planner), and none
  /// was taken there nor on the realistic steps).
  size_t maxCheckpointTries = 512, maxCheckpointTriesLarge = 16;
  /// The checkpoint re-plan (Checkpoints.cpp; a greedy each): at most this
  /// many checkpoints tried per aim's decisions, in a run of the rounds of
  /// its own on a small step (Search.cpp), kept where it simulates faster.
  size_t checkpointReplans = 8;
  /// Randomised restarts on a small step (Search.cpp): runs of the rounds
  /// with every candidate's greedy price scaled by a factor drawn in
  /// [1 - perturbation, 1 + perturbation] (fixed seeds: plans reproduce).
  size_t perturbedRuns = 4;
  double perturbation = 0.25;
  /// Host-parameter re-plan: at most this many parameters tried.
  size_t replanTries = 16;
  /// On a step larger than finePoints, the re-plan runs once from the
  /// chosen plan (Search.cpp, replanChosen) where the step has at most this
  /// many points: it costs a decide and a plan built (the 96-layer encoder,
  /// 9.3k ops at 40% of its arena: +0.25 s decide and build, +0.4 s in all,
  /// for a 10% faster step), which would take the 10k-op steps past 1 s of
  /// planning. GPT-2 1.5B has 7,345 points, Llama-2-7B 8,034.
  int64_t replanChosenPoints = 8192;
  /// Host-parameter exchange: passes, and exchanges evaluated per point.
  int exchangePasses = 4;
  int64_t exchangeTriesPerPoint = 4;
  /// Real-memory-plan checks per run: aims lowered by the overshoot, then
  /// the aim bisected on a small step.
  int maxRounds = 8;
  /// On a step larger than finePoints (no aim bisection there), the first
  /// aim is lowered by the base step's packing fragmentation (its arena
  /// over its peak), which the live-bytes model does not see: the 96-layer
  /// encoder at half its arena needed 5 checks aiming from the budget, each
  /// a full arena packing. Small steps aim from the budget and bisect.
  bool predictFragmentation = true;
  int reclaimChecks = 6;
  /// Real-memory-plan checks the fallback's give-back may spend (Search.cpp,
  /// giveBack: a bisection of ~log2(decisions) checks per round): at most
  /// giveBackChecks, and at most giveBackWork program points checked in
  /// all, but never fewer than giveBackMinChecks. ResNet-50 at its floor
  /// (1,100 points, 40 checks): 1.141 s -> 0.577 s simulated, 2.7 s of
  /// planning; GPT-2 1.5B (~5,000 points) gets 12.
  int giveBackChecks = 40, giveBackMinChecks = 8;
  int64_t giveBackWork = 60000;
  /// Aims closer than budget / this are not told apart (and never closer
  /// than two arena alignments).
  int64_t aimResolutionDivisor = 1024;
  /// Link calibration: a run whose simulated stall is over `stallTrigger`
  /// times the unhidden link seconds its prices assumed, and over
  /// `stallShare` of the step, runs again with those seconds weighted by
  /// the ratio, at most `maxLinkWeight`.
  double stallTrigger = 1.25, stallShare = 0.02, maxLinkWeight = 4;
  /// The links' copies queue at their issue and due times (LinkQueue,
  /// State.h) on steps larger than finePoints; on small steps only with
  /// this set, else each copy may use any compute of its phase (the
  /// per-phase windows, to the last bit). Timed on small steps, the
  /// reference set of the examples (44 planned rows) came out 0.34% slower
  /// in geomean, 12 rows worse (up to +23%: the transformer at 35%) and 10
  /// better (down to -10%: gpt at 55%): the search there (host moves, aim
  /// bisection, link calibration against the simulated stall) already
  /// corrects the windows' error, and each check is cheap.
  bool timedLinksOnSmallSteps = false;
  /// Where the links are timed, the greedy also runs with the windows'
  /// prices and the timed queues judge (Search.cpp, decideJudged).
  bool windowGreedyToo = true;
  /// The share of a copy's seconds added to its price to break ties
  /// against free recomputes.
  double tieBreak = 0.01;
  /// The chosen plan's prefetches tuned against the simulation
  /// (tunePrefetches, Prefetch.h): passes over the copies, and the work
  /// budget in ops simulated per op of the step. 32 keeps the 96-layer
  /// encoder at half its arena within ~0.1 s of planning without it, and
  /// every row of docs/planner.md's oracle table at or below the planner's
  /// before the one-target-model step (16 and 64 do too; 256 costs ~1 s
  /// there for 2% more).
  unsigned prefetchTuningSweeps = 2;
  double prefetchTuningWorkPerOp = 32;
};

} // namespace offload::planner

#endif // OFFLOAD_PLANNER_OPTIONS_H
