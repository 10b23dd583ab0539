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
      s.priceRecompute(j, *cone);
}

namespace {

/// The checkpoint candidates the recomputed cones run through, each with its
/// readers, the most promising first (its producer's seconds times its
/// readers, per byte), at most `limit`.
llvm::SmallVector<std::pair<unsigned, llvm::SmallVector<unsigned, 2>>>
checkpointsThrough(Planner &p, PlanState &s, size_t limit) {
  const std::vector<CheckpointFacts> &facts = p.problem.checkpoints;
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
  auto order = [&](unsigned k) {
    return facts[k].producerSeconds * double(readers[k].size()) /
           double(std::max<int64_t>(1, facts[k].bytes));
  };
  llvm::sort(through, [&](unsigned a, unsigned b) {
    double x = order(a), y = order(b);
    return x > y || (x == y && a < b);
  });
  if (through.size() > limit)
    through.resize(limit);
  llvm::SmallVector<std::pair<unsigned, llvm::SmallVector<unsigned, 2>>> res;
  for (unsigned k : through)
    res.push_back({k, std::move(readers[k])});
  return res;
}

/// Saves checkpoint k for those of `readers` whose cones still run through
/// it: their cones walked again, stopping there; the profile with its bytes
/// held to the last of their regions. False (nothing changed) when no
/// reader's cone gets cheaper. `old` receives the readers' choices before.
bool takeCheckpoint(Planner &p, PlanState &s, unsigned k, llvm::ArrayRef<unsigned> readers,
                    llvm::SmallVectorImpl<unsigned> &js,
                    llvm::SmallVectorImpl<SavedChoice> &old) {
  const CheckpointFacts &c = p.problem.checkpoints[k];
  js.clear();
  old.clear();
  double before = 0;
  for (unsigned j : readers)
    if (std::optional<Cone> cone = p.cones.coneOf(j);
        s.saved[j].decision == Decision::Recompute && cone &&
        llvm::is_contained(cone->checkpointsThrough, k)) {
      js.push_back(j);
      before += cone->seconds;
    }
  if (js.empty())
    return false;
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
    return false;
  }
  for (unsigned j : js)
    old.push_back(s.saved[j]);
  for (auto [j, cone] : llvm::zip_equal(js, after))
    s.priceRecompute(j, cone);
  s.checkpoints[k] = CheckpointChoice{true, holdTo, saved};
  s.profileOfCheckpoint(k, +1);
  return true;
}

/// Checkpoints no recomputed cone reads any more are given back; the others
/// held to the last region that reads them now.
void pruneCheckpoints(Planner &p, PlanState &s) {
  if (!s.anyCheckpoint())
    return;
  std::vector<int64_t> lastReader(s.checkpoints.size(), -1);
  for (auto [j, d] : llvm::enumerate(s.saved))
    if (d.decision == Decision::Recompute)
      if (std::optional<Cone> cone = p.cones.coneOf(unsigned(j)))
        for (unsigned k : cone->checkpointsRead)
          lastReader[k] = std::max(lastReader[k], p.problem.saved[j].firstBackward);
  for (auto [k, c] : llvm::enumerate(s.checkpoints)) {
    if (!c.saved || lastReader[k] == c.holdTo)
      continue;
    s.profileOfCheckpoint(unsigned(k), -1);
    if (lastReader[k] <= p.problem.checkpoints[k].lastForward) {
      c = CheckpointChoice();
      p.cones.setCheckpoint(unsigned(k), false);
    } else {
      c.holdTo = lastReader[k];
      s.profileOfCheckpoint(unsigned(k), +1);
    }
  }
}

} // namespace

void offload::planner::checkpointRecomputes(Planner &p, PlanState &s, int64_t aimBytes) {
  if (p.problem.checkpoints.empty())
    return;
  llvm::SmallVector<unsigned, 4> js;
  llvm::SmallVector<SavedChoice, 4> old;
  size_t tries = p.small() ? p.options.maxCheckpointTries : p.options.maxCheckpointTriesLarge;
  if (tries == 0)
    return;
  for (auto &[k, readers] : checkpointsThrough(p, s, tries)) {
    if (!takeCheckpoint(p, s, k, readers, js, old))
      continue;
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

// Where a checkpoint's bytes do not fit beside the decisions as they are,
// it can still pay for itself: the regions that stop at it rerun less, and
// the greedy frees its bytes elsewhere (a value held through the peak traded
// for a smaller intermediate, as the min-cut partitioner trades). Ruin and
// recreate, as for host parameters: each of the most promising checkpoints
// (options.checkpointReplans) is taken, the greedy reaches the aim again from
// there, the reverse delete gives back what it no longer needs, checkpoints
// no region reads are dropped, and the result is kept when its price in the
// model is lower.
void offload::planner::replanCheckpoints(Planner &p, PlanState &s, int64_t aimBytes) {
  size_t tries = p.options.checkpointReplans;
  if (p.problem.checkpoints.empty() || tries == 0)
    return;
  llvm::SmallVector<unsigned, 4> js;
  llvm::SmallVector<SavedChoice, 4> old;
  for (auto &[k, readers] : checkpointsThrough(p, s, tries)) {
    if (s.checkpoints[k].saved)
      continue;
    PlanState before = s;
    double seconds = p.decisionsSeconds(s);
    if (!takeCheckpoint(p, s, k, readers, js, old)) {
      p.restore(s, std::move(before));
      continue;
    }
    bool reached = greedy(p, s, aimBytes);
    if (reached) {
      giveBack(p, s, aimBytes);
      pruneCheckpoints(p, s);
    }
    if (!reached || s.profile.max().first > aimBytes ||
        p.decisionsSeconds(s) >= seconds * (1 - 1e-9))
      p.restore(s, std::move(before));
  }
}
