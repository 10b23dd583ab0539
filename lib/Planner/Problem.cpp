//===- Problem.cpp - The planner's problem and its serialization ----------===//
//
// Part of offload. See Problem.h.
//
//===----------------------------------------------------------------------===//

#include "offload/Planner/Problem.h"
#include "offload/Planner/State.h"

#include "llvm/Support/JSON.h"

#include <algorithm>

using namespace offload::planner;

const char *offload::planner::decisionName(Decision d) {
  switch (d) {
  case Decision::Keep: return "keep";
  case Decision::Recompute: return "recompute";
  case Decision::Offload: return "offload";
  case Decision::Host: return "host";
  }
  return "?";
}

std::optional<Decision> offload::planner::parseDecision(llvm::StringRef name) {
  for (Decision d : {Decision::Keep, Decision::Recompute, Decision::Offload, Decision::Host})
    if (name == decisionName(d))
      return d;
  return std::nullopt;
}

int64_t offload::planner::bytesFreedAt(llvm::ArrayRef<Freed> freed, int64_t point) {
  int64_t bytes = 0;
  for (const Freed &f : freed)
    if (f.lo <= point && point <= f.hi)
      bytes += f.bytes;
  return bytes;
}

int64_t offload::planner::totalSavedBytes(const PlanProblem &problem) {
  int64_t bytes = 0;
  for (const SavedFacts &c : problem.saved)
    bytes += c.bytes;
  return bytes;
}

void offload::planner::withSavedBudget(PlanProblem &problem, int64_t savedBudgetBytes) {
  problem.savedBudgetBytes = savedBudgetBytes;
  problem.aimBytes = savedBudgetBytes;
  std::vector<int64_t> delta(problem.baseLive.size() + 1, 0);
  for (SavedFacts &c : problem.saved) {
    int64_t lo = std::max<int64_t>(0, c.lastForward + 1),
            hi = std::min<int64_t>(int64_t(problem.baseLive.size()) - 1, c.firstBackward - 1);
    c.offloadFreed = Freed{lo, hi, c.bytes};
    if (lo > hi)
      continue;
    delta[lo] += c.bytes;
    delta[hi + 1] -= c.bytes;
  }
  int64_t live = 0;
  for (size_t q = 0; q < problem.baseLive.size(); ++q)
    problem.baseLive[q] = live += delta[q];
  for (ParamFacts &q : problem.params)
    q.freed.clear();
}

double offload::planner::offloadOwnSeconds(const SavedFacts &c, double tieBreak) {
  return (c.releaseNotHidden + c.prefetchNotHidden) +
         tieBreak * (c.toHostSeconds + c.toDeviceSeconds);
}

double offload::planner::hostOwnSeconds(const ParamFacts &p, double tieBreak) {
  return p.hostUpdateSeconds + tieBreak * (p.toDeviceSeconds + p.toHostSeconds);
}

void offload::planner::writeProblemJson(llvm::raw_ostream &os, const PlanProblem &problem,
                                        const PlanState &state, bool fallback,
                                        double tieBreak) {
  llvm::json::OStream j(os);
  auto ranges = [&](llvm::ArrayRef<Freed> fs) {
    j.array([&] {
      for (const Freed &f : fs)
        if (f.lo <= f.hi && f.bytes != 0)
          j.array([&] {
            j.value(f.lo);
            j.value(f.hi);
            j.value(f.bytes);
          });
    });
  };
  auto savedOptions = [&](const SavedFacts &c) {
    j.object([&] {
      j.attribute("decision", "offload");
      j.attribute("seconds", offloadOwnSeconds(c, tieBreak));
      j.attribute("to_host_seconds", c.toHostSeconds);
      j.attribute("to_device_seconds", c.toDeviceSeconds);
      j.attributeObject("link", [&] {
        j.attribute("to_host_forward", c.toHostSeconds);
        j.attribute("to_device_backward", c.toDeviceSeconds);
      });
      j.attributeBegin("freed");
      ranges({c.offloadFreed});
      j.attributeEnd();
      j.attributeArray("added", [] {});
    });
    if (!c.standaloneCone)
      return;
    const Cone &cone = *c.standaloneCone;
    j.object([&] {
      j.attribute("decision", "recompute");
      j.attribute("seconds", cone.seconds);
      j.attribute("to_host_seconds", 0.0);
      j.attribute("to_device_seconds", 0.0);
      j.attributeObject("link", [] {});
      j.attributeBegin("freed");
      ranges({Freed{c.lastForward + 1, c.firstBackward - 1, c.bytes}});
      j.attributeEnd();
      j.attributeBegin("added");
      ranges({Freed{c.firstBackward, c.firstBackward, cone.transientBytes}});
      j.attributeEnd();
      // The candidates whose values the standalone cone reads: when one of
      // them is recomputed too, this region reruns its cone as well.
      j.attributeArray("reads", [&] {
        for (unsigned r : cone.reads)
          j.value(int64_t(r));
      });
      j.attribute("at", c.firstBackward);
      // The cone's ops ([id, seconds, checkpoint candidates downstream of
      // it in the cone], an id per op of the step): the oracle's valid bound
      // counts an op several recomputed cones share once, and lets a saved
      // checkpoint downstream of an op skip it.
      auto opList = [&](const char *key, llvm::ArrayRef<ConeOp> ops, bool withCheckpoints) {
        if (!ops.empty())
          j.attributeArray(key, [&] {
            for (const ConeOp &op : ops)
              j.array([&] {
                j.value(op.id);
                j.value(op.seconds);
                if (withCheckpoints)
                  j.array([&] {
                    for (unsigned k : op.checkpoints)
                      j.value(int64_t(k));
                  });
              });
          });
      };
      opList("ops", cone.ops, true);
      // With every checkpoint candidate saved (the fewest a region runs).
      opList("min_ops",
             c.minimalConeOps.empty() ? llvm::ArrayRef(cone.ops) : llvm::ArrayRef(c.minimalConeOps),
             false);
    });
  };
  j.object([&] {
    j.attribute("format", "offload-plan-problem");
    j.attribute("version", 3);
    j.attribute("step", problem.step);
    j.attribute("target", problem.target);
    j.attribute("budget_bytes", problem.budgetBytes);
    if (problem.hasSavedBudget())
      j.attribute("saved_budget_bytes", problem.savedBudgetBytes);
    j.attribute("aim_bytes", problem.aimBytes);
    j.attribute("achieved_bytes", state.profile.max().first);
    j.attribute("fallback", fallback);
    j.attribute("compute_seconds", problem.computeSeconds);
    // The share of copy seconds the options' seconds carry as a tie-break
    // (not a cost: the oracle's valid bound takes it out).
    j.attribute("tie_break", tieBreak);
    // Link windows (seconds of compute that hide copies), per direction
    // and phase; each option's "link" gives its copy seconds in each.
    j.attributeObject("link_windows", [&] {
      j.attribute("to_host_forward", problem.forwardSeconds);
      j.attribute("to_host_backward", problem.backwardSeconds);
      j.attribute("to_device_forward", problem.forwardSeconds);
      j.attribute("to_device_backward", problem.backwardSeconds);
    });
    j.attribute("unplanned_step_seconds", problem.unplannedStepSeconds);
    // The planner's own price of the chosen decisions (Planner::
    // decisionsSeconds at link weight 1): their seconds plus the compute
    // waiting for the links' queues (LinkQueue, State.h), of which
    // `link_windows` above is the per-phase relaxation the oracle prices.
    j.attributeObject("link_exposed_seconds", [&] {
      j.attribute("to_host", state.toHost.exposed());
      j.attribute("to_device", state.toDevice.exposed());
    });
    j.attribute("decisions_seconds", state.priceOfDecisions(tieBreak, 1.0));
    j.attribute("timed_links", state.timedLinks);
    // The checkpoint candidates (the cones' `ops` name them by index):
    // bytes and last forward use.
    j.attributeArray("checkpoints", [&] {
      for (const CheckpointFacts &k : problem.checkpoints)
        j.object([&] {
          j.attribute("name", k.name);
          j.attribute("bytes", k.bytes);
          j.attribute("last_forward", k.lastForward);
        });
    });
    j.attributeArray("base_live_bytes", [&] {
      for (int64_t v : problem.baseLive)
        j.value(v);
    });
    j.attributeArray("candidates", [&] {
      for (auto [i, c] : llvm::enumerate(problem.saved))
        j.object([&] {
          j.attribute("kind", "saved");
          j.attribute("name", c.name);
          j.attribute("bytes", c.bytes);
          j.attribute("chosen", decisionName(state.saved[i].decision));
          // A recompute shared with a reader's region (SharedRegions.cpp):
          // that region's candidate, and the point from which the value is
          // held to its own uses (its own region does not exist).
          const SavedChoice &d = state.saved[i];
          if (d.decision == Decision::Recompute && d.holdFrom >= 0 && d.group >= 0 &&
              d.group != int64_t(i)) {
            j.attribute("shared_into", d.group);
            j.attribute("held_from", d.holdFrom);
          }
          j.attributeArray("options", [&] { savedOptions(c); });
        });
      for (auto [i, p] : llvm::enumerate(problem.params))
        j.object([&] {
          j.attribute("kind", "parameter");
          j.attribute("name", p.name);
          j.attribute("bytes", p.bytes + p.stateBytes);
          j.attribute("chosen", decisionName(state.params[i].decision));
          j.attributeArray("options", [&] {
            j.object([&] {
              j.attribute("decision", "host");
              j.attribute("seconds", hostOwnSeconds(p, tieBreak));
              j.attribute("to_host_seconds", p.toHostSeconds);
              j.attribute("to_device_seconds", p.toDeviceSeconds);
              j.attributeObject("link", [&] {
                j.attribute("to_device_forward", p.toDeviceForwardSeconds);
                j.attribute("to_device_backward", p.toDeviceSeconds - p.toDeviceForwardSeconds);
                j.attribute("to_host_backward", p.toHostSeconds);
              });
              j.attributeBegin("freed");
              ranges(p.freed);
              j.attributeEnd();
              j.attributeArray("added", [] {});
            });
          });
        });
    });
  });
  os << "\n";
}
