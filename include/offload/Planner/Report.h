//===- Report.h - The planner's decision table ------------------*- C++ -*-===//
//
// Part of offload. The text report of --offload-plan-memory (report=): the
// decisions with their bytes, added seconds and reasons, the arena and the
// simulated step time before and after, and each run of the search.
//
//===----------------------------------------------------------------------===//

#ifndef OFFLOAD_PLANNER_REPORT_H
#define OFFLOAD_PLANNER_REPORT_H

#include "offload/Planner/Search.h"

#include "llvm/Support/JSON.h"

namespace offload::planner {

/// The figures of a planned step beyond the search's result.
struct ReportFigures {
  /// The slicing that made the plan fit ("" when none).
  std::string slicing;
  bool reportKept = false; // list kept candidates too
  /// The step as given: its device arena (bytes) and simulated seconds.
  int64_t unplannedArenaBytes = 0;
  double unplannedStepSeconds = 0;
  /// The chosen plan's simulated time.
  SimulatedTime planned;
  /// Prefetches the tuning against the simulation moved in the chosen plan
  /// (tunePrefetches, Prefetch.h), and its simulated seconds before them.
  unsigned prefetchesTuned = 0;
  double untunedStepSeconds = 0;
  double planningSeconds = 0;
  /// Plans the checker built: the checks less those answered from its cache
  /// of decisions already checked (< 0: not known).
  int plansBuilt = -1;
};

/// Counts of the decisions taken: saves recomputed and offloaded (each save
/// op of a buffer counts), parameters on the host.
struct DecisionCounts {
  unsigned recomputed = 0, offloaded = 0, hostParameters = 0;
  /// Checkpoints beyond the saved values (Checkpoints.cpp): how many, their
  /// bytes, the recompute seconds they save in the model.
  unsigned checkpoints = 0;
  int64_t checkpointBytes = 0;
  double checkpointSeconds = 0;
};
DecisionCounts countDecisions(const PlanProblem &problem, const PlanState &state);

/// Writes the decision table of `result` (which has a chosen plan).
void writePlanReport(llvm::raw_ostream &os, const PlanProblem &problem,
                     const SearchResult &result, const ReportFigures &figures);

/// The same as one entry of the JSON report (report=json:FILE; format
/// "offload-plan-report", docs/planner.md "Machine-readable results"):
/// {"step", "target", "budget_bytes", "status": "planned", "arena_bytes",
/// "peak_bytes", "unplanned_arena_bytes", "unplanned_step_seconds",
/// "planned_step_seconds", "stall_seconds", "slicing", "fallback",
/// "decisions": {"recomputed", "offloaded", "kept", "host_parameters",
/// "early_updates"}, "candidates": [{"kind": "saved" | "parameter", "name",
/// "bytes", "decision", "seconds", "why"}] (those not kept, or all with
/// report-kept), "runs": [{"moves", "link_weight", "checks": [[aim bytes,
/// arena bytes]], "step_seconds" (null: nothing fit), "arena_bytes",
/// "kept"}], "planning_seconds", "checks", "plans_built"}.
llvm::json::Object planReportJson(const PlanProblem &problem, const SearchResult &result,
                                  const ReportFigures &figures);

/// "1.50 MiB": `bytes` in binary units, for reports.
std::string humanBytes(int64_t bytes);

} // namespace offload::planner

#endif // OFFLOAD_PLANNER_REPORT_H
