//===- Search.h - The planner's search over real checks ---------*- C++ -*-===//
//
// Part of offload. The search runs the algorithms at an aim, builds the
// plan the decisions describe and checks it with the real memory plan
// (through a PlanChecker: PlanMaterialize.cpp for IR, a fake in unit
// tests), aims again by the overshoot, bisects the aim, tries the
// host-parameter moves and the link calibration, and keeps the plan with
// the shortest simulated step that fits. Where nothing fits it builds the
// most the mechanisms can do, for the smallest reachable arena.
//
//===----------------------------------------------------------------------===//

#ifndef OFFLOAD_PLANNER_SEARCH_H
#define OFFLOAD_PLANNER_SEARCH_H

#include "offload/Planner/Algorithms.h"

#include "llvm/Support/LogicalResult.h"

#include <memory>
#include <optional>

namespace offload::planner {

/// Whether host parameters used in forward and backward may stay on the
/// device between the two (Auto, HostParameters.cpp's rule) or are always
/// fetched again (the fewest bytes).
enum class Refetch { Auto, Always };

/// A plan built from decisions, with its real memory plan's figures. The
/// checker's subclass owns whatever holds the plan and frees it when
/// destroyed.
class CheckedPlan {
public:
  virtual ~CheckedPlan();
  int64_t arenaBytes = 0; // device arena + workspace
  int64_t peakBytes = 0;  // peak live device bytes
};

/// Simulated step time of a plan on the target (seconds).
struct SimulatedTime {
  double stepSeconds = 0, stallSeconds = 0;
};

class PlanChecker {
public:
  virtual ~PlanChecker();
  /// Builds the plan of `state`'s decisions and its memory plan. Failure
  /// only on an error already reported (invalid IR).
  virtual llvm::FailureOr<std::unique_ptr<CheckedPlan>> build(const PlanState &state,
                                                               Refetch refetch) = 0;
  /// The simulated step time of `plan` (a checker may build what it
  /// deferred, hence not const).
  virtual SimulatedTime simulate(CheckedPlan &plan) = 0;
  /// The simulated step time of `plan` once its prefetches are tuned
  /// against the simulation (the mechanism's tuning, which may move its
  /// copies: the plan, its arena and peak follow; done once per plan). The
  /// search compares two runs' plans so where the untuned times would
  /// replace the kept one. By default the plan as it is.
  virtual SimulatedTime tuned(CheckedPlan &plan) { return simulate(plan); }
};

/// What one run of the rounds tried, for the report.
struct RunLog {
  HostMoves moves = HostMoves::None;
  double linkWeight = 1;
  bool checkpoints = false; // the checkpoint re-plan ran
  llvm::SmallVector<std::pair<int64_t, int64_t>> checks; // (aim, real arena)
  double seconds = -1;                                   // < 0: nothing fit
  int64_t arena = 0;
  bool kept = false;
  /// The simulated stall over the unhidden link seconds the prices assumed
  /// (the link calibration's weight); 0 when it calls for none.
  double stallRatio = 0;
  /// The randomised restart's seed (Planner::perturbSeed); 0: none.
  uint64_t perturbSeed = 0;
  /// The knapsack took the first decisions (Planner::useKnapsack).
  bool knapsack = false;
};

struct SearchResult {
  explicit SearchResult(const PlanProblem &problem) : state(problem) {}
  /// The plan kept; null when nothing fits the budget.
  std::unique_ptr<CheckedPlan> chosen;
  /// When nothing fits: the smallest reachable arena, the smallest arena
  /// the search at budget kReachBudgetBytes builds (whatever the budget;
  /// see search), and its decisions. A search at a budget of at least its
  /// arena plans.
  std::unique_ptr<CheckedPlan> smallest;
  std::optional<PlanState> smallestState;
  PlanState state; // the decisions of `chosen`
  llvm::SmallVector<RunLog> runs;
  int checks = 0;        // real memory plans checked
  bool fallback = false; // `chosen` is the smallest reachable arena's plan
};

/// The budget whose search defines the smallest reachable arena.
constexpr int64_t kReachBudgetBytes = 1;

/// Searches from `initial` (every candidate kept) for the fastest plan
/// whose real arena fits the problem's budget. When nothing fits, the
/// search at budget kReachBudgetBytes runs as well: its smallest arena is
/// the plan when it fits the budget, else `smallest`. Failure only on a
/// checker error.
llvm::FailureOr<SearchResult> search(Planner &p, PlanChecker &checker, PlanState initial);

} // namespace offload::planner

#endif // OFFLOAD_PLANNER_SEARCH_H
