//===- Checkpoints.cpp - Saved intermediates that cut recompute cones -----===//
//
// Part of offload. Autodiff saves what backward reads, and a recompute
// region reruns the forward back to the nearest value that stays saved.
// PyTorch's min-cut partitioner may save any intermediate instead and rerun
// only what follows it (a convolution's output kept, the batch norm and
// ReLU after it recomputed). Here the recomputed regions an aim's decisions
// chose are given such checkpoints where the profile has room: for each
// forward value that autodiff did not save and that recomputed cones run
// through (PlanProblem::checkpoints), the cones are walked again with it
// available; the seconds they no longer rerun are weighed against its
// bytes, held from its last forward use to the last region that reads it.
// Tried in order of the seconds its own producer costs, times its readers,
// per byte; each kept only when it saves seconds and the profile stays at
// or below the aim. The mechanism is --offload-recompute's
// `offload.checkpoint` on the producer (PlanMaterialize.cpp marks it).
//
//===----------------------------------------------------------------------===//

#include "offload/Planner/Algorithms.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/STLExtras.h"

#include <algorithm>

using namespace offload::planner;

namespace {

/// Recomputed candidate j priced with `cone` (its seconds, intermediates,
/// reads), the profile with it.
void setCone(PlanState &s, unsigned j, const Cone &cone) {
  SavedChoice &d = s.saved[j];
  s.profileOfSaved(j, +1);
  d.seconds = cone.seconds;
  d.transientBytes = cone.transientBytes;
  d.reads = cone.reads;
  d.through = cone.through;
  d.coneOps = cone.numOps;
  s.profileOfSaved(j, -1);
  s.registerReader(j);
}

} // namespace

void offload::planner::uncheckpointAll(Planner &p, PlanState &s) {
  if (!s.anyCheckpoint())
    return;
  // The regions that stop at a saved checkpoint run through it again.
  llvm::SmallVector<unsigned> stopped;
  for (auto [j, d] : llvm::enumerate(s.saved))
    if (d.decision == Decision::Recompute)
      if (std::optional<Cone> cone = p.cones.coneOf(unsigned(j));
          cone && !cone->checkpointsRead.empty())
        stopped.push_back(unsigned(j));
  for (auto [k, c] : llvm::enumerate(s.checkpoints))
    if (c.saved) {
      s.profileOfCheckpoint(unsigned(k), -1);
      c = CheckpointChoice();
      p.cones.setCheckpoint(unsigned(k), false);
    }
  for (unsigned j : stopped)
    if (std::optional<Cone> cone = p.cones.coneOf(j))
      setCone(s, j, *cone);
}

void offload::planner::checkpointRecomputes(Planner &p, PlanState &s, int64_t aimBytes) {
  const std::vector<CheckpointFacts> &facts = p.problem.checkpoints;
  if (facts.empty())
    return;
  // The checkpoints the recomputed cones run through, each with its readers.
  std::vector<llvm::SmallVector<unsigned, 2>> readers(facts.size());
  llvm::SmallVector<unsigned> through;
  for (auto [j, d] : llvm::enumerate(s.saved)) {
    if (d.decision != Decision::Recompute)
      continue;
    if (std::optional<Cone> cone = p.cones.coneOf(unsigned(j)))
      for (unsigned k : cone->checkpointsThrough)
        if (!s.checkpoints[k].saved) {
          if (readers[k].empty())
            through.push_back(k);
          readers[k].push_back(unsigned(j));
        }
  }
  if (through.empty())
    return;
  auto order = [&](unsigned k) {
    return facts[k].coneSeconds * double(readers[k].size()) /
           double(std::max<int64_t>(1, facts[k].bytes));
  };
  llvm::sort(through, [&](unsigned a, unsigned b) {
    double x = order(a), y = order(b);
    return x > y || (x == y && a < b);
  });
  if (through.size() > p.options.maxCheckpointTries)
    through.resize(p.options.maxCheckpointTries);
  for (unsigned k : through) {
    const CheckpointFacts &c = facts[k];
    // Its readers now: a checkpoint taken before may have cut it off.
    llvm::SmallVector<unsigned, 4> js;
    double before = 0;
    for (unsigned j : readers[k])
      if (std::optional<Cone> cone = p.cones.coneOf(j);
          cone && llvm::is_contained(cone->checkpointsThrough, k)) {
        js.push_back(j);
        before += cone->seconds;
      }
    if (js.empty())
      continue;
    p.cones.setCheckpoint(k, true);
    llvm::SmallVector<Cone, 4> after;
    double afterSeconds = 0;
    int64_t holdTo = -1;
    for (unsigned j : js) {
      std::optional<Cone> cone = p.cones.coneOf(j);
      if (!cone)
        break;
      afterSeconds += cone->seconds;
      after.push_back(*cone);
      holdTo = std::max(holdTo, p.problem.saved[j].firstBackward);
    }
    double saved = before - afterSeconds;
    // Relative to the seconds, so that rounding in the sums never counts.
    if (after.size() != js.size() || saved <= 1e-9 * before || holdTo <= c.lastForward) {
      p.cones.setCheckpoint(k, false);
      continue;
    }
    llvm::SmallVector<SavedChoice, 4> old;
    for (unsigned j : js)
      old.push_back(s.saved[j]);
    for (auto [j, cone] : llvm::zip_equal(js, after))
      setCone(s, j, cone);
    s.checkpoints[k] = CheckpointChoice{true, holdTo, saved};
    s.profileOfCheckpoint(k, +1);
    if (s.profile.max().first <= aimBytes)
      continue;
    // No room for its bytes: everything as it was.
    s.profileOfCheckpoint(k, -1);
    s.checkpoints[k] = CheckpointChoice();
    p.cones.setCheckpoint(k, false);
    for (auto [j, d] : llvm::zip_equal(js, old)) {
      s.profileOfSaved(j, +1);
      s.saved[j] = d;
      s.profileOfSaved(j, -1);
    }
  }
}
