//===- Report.cpp - The planner's decision table --------------------------===//
//
// Part of offload. See Report.h.
//
//===----------------------------------------------------------------------===//

#include "offload/Planner/Report.h"

#include "llvm/Support/Format.h"

#include <algorithm>

using namespace offload::planner;

std::string offload::planner::humanBytes(int64_t bytes) {
  const char *units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = double(bytes);
  int u = 0;
  while (v >= 1024 && u < 4) {
    v /= 1024;
    ++u;
  }
  std::string out;
  llvm::raw_string_ostream os(out);
  os << llvm::format(u ? "%.2f %s" : "%.0f %s", v, units[u]);
  return out;
}

DecisionCounts offload::planner::countDecisions(const PlanProblem &problem,
                                                const PlanState &state) {
  DecisionCounts n;
  for (auto [i, c] : llvm::enumerate(state.saved))
    (c.decision == Decision::Recompute ? n.recomputed : n.offloaded) +=
        c.decision != Decision::Keep ? problem.saved[i].numSaves : 0;
  for (const ParamChoice &q : state.params)
    n.hostParameters += q.decision == Decision::Host;
  for (auto [k, c] : llvm::enumerate(state.checkpoints))
    if (c.saved) {
      ++n.checkpoints;
      n.checkpointBytes += problem.checkpoints[k].bytes;
      n.checkpointSeconds += c.secondsSaved;
    }
  return n;
}

void offload::planner::writePlanReport(llvm::raw_ostream &os, const PlanProblem &problem,
                                       const SearchResult &result, const ReportFigures &f) {
  const PlanState &s = result.state;
  int64_t budget = problem.budgetBytes;
  os << llvm::format("plan-memory @%s: budget %lld bytes (%s) on %s\n", problem.step.c_str(),
                     (long long)budget, humanBytes(budget).c_str(), problem.target.c_str());
  if (problem.hasSavedBudget())
    os << llvm::format("  saved budget %lld bytes (%s): kept saved bytes %lld -> %lld (saved "
                       "values left on the device and checkpoints)\n",
                       (long long)problem.savedBudgetBytes,
                       humanBytes(problem.savedBudgetBytes).c_str(),
                       (long long)totalSavedBytes(problem), (long long)keptSavedBytes(s));
  if (!f.slicing.empty())
    os << "  slicing: " << f.slicing << "\n";
  os << llvm::format("  %-9s %-44s %14s %-10s %12s  %s\n", "kind", "value or parameter", "bytes",
                     "decision", "added s", "why");
  if (problem.movedUpdates)
    os << llvm::format("  %-9s %-44s %14s %-10s %12.3e  %s\n", "update", "optimizer updates", "-",
                       "early", 0.0,
                       (std::to_string(problem.movedUpdates) +
                        " updates run as soon as their gradient is final")
                           .c_str());
  for (auto [i, c] : llvm::enumerate(s.saved)) {
    if (c.decision == Decision::Keep && !f.reportKept)
      continue;
    const SavedFacts &facts = problem.saved[i];
    // A value held from its group's region costs nothing of its own: the
    // region (the group's anchor) computes it once.
    bool held = c.decision == Decision::Recompute && c.holdFrom >= 0;
    std::string why = c.why;
    if (held) {
      const std::string &anchor = problem.saved[c.group].name;
      why = "held from the region of " + anchor.substr(0, anchor.find(' ')) +
            " (recomputed there once)";
    }
    os << llvm::format("  %-9s %-44s %14lld %-10s %12.3e  %s\n", "saved",
                       facts.name.substr(0, 44).c_str(), (long long)facts.bytes,
                       decisionName(c.decision), held ? 0.0 : c.seconds, why.c_str());
  }
  for (auto [k, c] : llvm::enumerate(s.checkpoints))
    if (c.saved) {
      const CheckpointFacts &facts = problem.checkpoints[k];
      os << llvm::format("  %-9s %-44s %14lld %-10s %12.3e  %s\n", "forward",
                         facts.name.substr(0, 44).c_str(), (long long)facts.bytes, "checkpoint",
                         -c.secondsSaved,
                         ("saved so that recompute regions stop here (held to op #" +
                          std::to_string(c.holdTo) + ")")
                             .c_str());
    }
  for (auto [i, q] : llvm::enumerate(s.params))
    if (q.decision != Decision::Keep || f.reportKept) {
      const ParamFacts &facts = problem.params[i];
      os << llvm::format("  %-9s %-44s %14lld %-10s %12.3e  %s\n", "parameter",
                         facts.name.substr(0, 44).c_str(),
                         (long long)(facts.bytes + facts.stateBytes),
                         q.decision == Decision::Host ? "host" : "device", q.seconds,
                         q.why.c_str());
    }
  DecisionCounts n = countDecisions(problem, s);
  double overhead = f.unplannedStepSeconds > 0 ? 100.0 *
                                                     (f.planned.stepSeconds -
                                                      f.unplannedStepSeconds) /
                                                     f.unplannedStepSeconds
                                               : 0;
  os << llvm::format("  decisions: %u saved values recomputed, %u offloaded, %zu kept; %u "
                     "parameters on the host; %u early optimizer updates%s\n",
                     n.recomputed, n.offloaded,
                     size_t(problem.numSaves) - n.recomputed - n.offloaded, n.hostParameters,
                     problem.movedUpdates,
                     result.fallback ? " (the smallest reachable arena's plan)" : "");
  if (n.checkpoints)
    os << llvm::format("  checkpoints: %u forward values saved for recompute regions to stop "
                       "at (%lld bytes), %.4g s of recompute saved in the model\n",
                       n.checkpoints, (long long)n.checkpointBytes, n.checkpointSeconds);
  os << llvm::format("  device arena: %lld -> %lld bytes (%s -> %s; budget %s), peak "
                     "live %lld bytes\n",
                     (long long)f.unplannedArenaBytes, (long long)result.chosen->arenaBytes,
                     humanBytes(f.unplannedArenaBytes).c_str(),
                     humanBytes(result.chosen->arenaBytes).c_str(), humanBytes(budget).c_str(),
                     (long long)result.chosen->peakBytes);
  os << llvm::format("  simulated step time on %s: %.4g s -> %.4g s (%+.1f%%); copies "
                     "not hidden by compute %.4g s\n",
                     problem.target.c_str(), f.unplannedStepSeconds, f.planned.stepSeconds,
                     overhead, f.planned.stallSeconds);
  if (f.prefetchesTuned)
    os << llvm::format("  prefetches tuned against the simulation: %u moved, simulated step "
                       "%.4g s -> %.4g s\n",
                       f.prefetchesTuned, f.untunedStepSeconds, f.planned.stepSeconds);
  // The runs of the search: each aim checked ("over" past the budget: with
  // a saved budget, the kept saved bytes past it) and the simulated step of
  // the plan the run returned; the fastest that fits is kept.
  int64_t checkedBudget = problem.checkedBudgetBytes();
  for (const RunLog &run : result.runs) {
    os << "  run " << hostMovesName(run.moves);
    if (run.checkpoints)
      os << "+checkpoints";
    if (run.knapsack)
      os << "+knapsack";
    if (run.perturbSeed)
      os << "+perturbed " << run.perturbSeed;
    if (run.linkWeight != 1)
      os << llvm::format(" (link x%.2f)", run.linkWeight);
    os << ": aims";
    for (auto [aimBytes, arena] : run.checks)
      os << " " << aimBytes << (arena > checkedBudget ? " (over)" : "");
    if (run.seconds < 0)
      os << "; nothing fit\n";
    else
      os << llvm::format("; arena %lld bytes, %.4g s%s\n", (long long)run.arena, run.seconds,
                         run.kept ? ", kept" : "");
  }
  os << llvm::format("  planning took %.3f s (%d checks of the real memory plan", f.planningSeconds,
                     std::max(result.checks, 1));
  if (f.plansBuilt >= 0)
    os << ", " << f.plansBuilt << " built";
  os << ")\n";
  os.flush();
}

llvm::json::Object offload::planner::planReportJson(const PlanProblem &problem,
                                                    const SearchResult &result,
                                                    const ReportFigures &f) {
  const PlanState &s = result.state;
  DecisionCounts n = countDecisions(problem, s);
  llvm::json::Array candidates;
  for (auto [i, c] : llvm::enumerate(s.saved)) {
    if (c.decision == Decision::Keep && !f.reportKept)
      continue;
    bool held = c.decision == Decision::Recompute && c.holdFrom >= 0;
    llvm::json::Object o{{"kind", "saved"},
                         {"name", problem.saved[i].name},
                         {"bytes", problem.saved[i].bytes},
                         {"decision", decisionName(c.decision)},
                         {"seconds", held ? 0.0 : c.seconds},
                         {"why", c.why}};
    if (held)
      o["held_from"] = problem.saved[c.group].name;
    candidates.push_back(std::move(o));
  }
  for (auto [k, c] : llvm::enumerate(s.checkpoints))
    if (c.saved)
      candidates.push_back(llvm::json::Object{{"kind", "checkpoint"},
                                              {"name", problem.checkpoints[k].name},
                                              {"bytes", problem.checkpoints[k].bytes},
                                              {"decision", "checkpoint"},
                                              {"seconds", -c.secondsSaved},
                                              {"held_to_point", c.holdTo}});
  for (auto [i, q] : llvm::enumerate(s.params))
    if (q.decision != Decision::Keep || f.reportKept)
      candidates.push_back(llvm::json::Object{
          {"kind", "parameter"},
          {"name", problem.params[i].name},
          {"bytes", problem.params[i].bytes + problem.params[i].stateBytes},
          {"decision", q.decision == Decision::Host ? "host" : "device"},
          {"seconds", q.seconds},
          {"why", q.why}});
  llvm::json::Array runs;
  for (const RunLog &run : result.runs) {
    llvm::json::Array checks;
    for (auto [aimBytes, arena] : run.checks)
      checks.push_back(llvm::json::Array{aimBytes, arena});
    runs.push_back(llvm::json::Object{
        {"moves", hostMovesName(run.moves)},
        {"link_weight", run.linkWeight},
        {"checkpoints", run.checkpoints},
        {"perturb_seed", int64_t(run.perturbSeed)},
        {"knapsack", run.knapsack},
        {"checks", std::move(checks)},
        {"step_seconds", run.seconds < 0 ? llvm::json::Value(nullptr) : run.seconds},
        {"arena_bytes", run.arena},
        {"kept", run.kept}});
  }
  return llvm::json::Object{
      {"step", problem.step},
      {"target", problem.target},
      {"budget_bytes", problem.budgetBytes},
      {"saved_budget_bytes",
       problem.hasSavedBudget() ? llvm::json::Value(problem.savedBudgetBytes) : nullptr},
      {"saved_bytes", totalSavedBytes(problem)},
      {"kept_saved_bytes", keptSavedBytes(s)},
      {"status", "planned"},
      {"arena_bytes", result.chosen->arenaBytes},
      {"peak_bytes", result.chosen->peakBytes},
      {"unplanned_arena_bytes", f.unplannedArenaBytes},
      {"unplanned_step_seconds", f.unplannedStepSeconds},
      {"planned_step_seconds", f.planned.stepSeconds},
      {"stall_seconds", f.planned.stallSeconds},
      {"prefetches_tuned", int64_t(f.prefetchesTuned)},
      {"slicing", f.slicing},
      {"fallback", result.fallback},
      {"decisions",
       llvm::json::Object{{"recomputed", n.recomputed},
                          {"offloaded", n.offloaded},
                          {"kept", int64_t(problem.numSaves) - n.recomputed - n.offloaded},
                          {"host_parameters", n.hostParameters},
                          {"checkpoints", n.checkpoints},
                          {"early_updates", problem.movedUpdates}}},
      {"candidates", std::move(candidates)},
      {"runs", std::move(runs)},
      {"planning_seconds", f.planningSeconds},
      {"checks", std::max(result.checks, 1)},
      {"plans_built", f.plansBuilt}};
}
