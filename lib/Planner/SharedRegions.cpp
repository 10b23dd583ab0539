//===- SharedRegions.cpp - Recompute regions shared along a chain ---------===//
//
// Part of offload. A recomputed value u whose cone another recomputed
// region j already reruns (u in j's cone, j used first in backward) can be
// taken from j's region and held until its own uses, instead of being
// recomputed again by a region of its own: one region for the group
// (--offload-recompute policy=marked with a group id), each op once, as in
// Chen et al.'s segments. It saves u's cone seconds and costs u's bytes
// from j's region to u's first use. Merges are taken in order of seconds
// saved while the profile stays at or below the aim; `decide` undoes them
// (unshareAll) before each greedy, which prices regions on their own.
//
//===----------------------------------------------------------------------===//

#include "offload/Planner/Algorithms.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/STLExtras.h"

using namespace offload::planner;

void offload::planner::unshareAll(PlanState &s) {
  for (auto [i, c] : llvm::enumerate(s.saved))
    if (c.group >= 0) {
      if (c.holdFrom >= 0) {
        s.profileOfSaved(unsigned(i), +1);
        c.holdFrom = -1;
        s.profileOfSaved(unsigned(i), -1);
      }
      c.group = -1;
    }
}

void offload::planner::shareRecomputes(Planner &p, PlanState &s, int64_t aimBytes) {
  struct Merge {
    unsigned u, j;
    double saving;
  };
  llvm::SmallVector<Merge> merges;
  const std::vector<SavedFacts> &facts = p.problem.saved;
  for (auto [ui, u] : llvm::enumerate(s.saved)) {
    if (u.decision != Decision::Recompute)
      continue;
    // The reader whose region comes last before u's first use.
    std::optional<unsigned> best;
    for (unsigned j : s.readers[ui]) {
      const SavedChoice &d = s.saved[j];
      if (j == ui || d.decision != Decision::Recompute ||
          facts[j].firstBackward >= facts[ui].firstBackward ||
          !llvm::is_contained(d.through, unsigned(ui)))
        continue;
      if (!best || facts[j].firstBackward > facts[*best].firstBackward)
        best = j;
    }
    if (!best)
      continue;
    if (std::optional<Cone> cone = p.cones.coneOf(unsigned(ui)))
      merges.push_back({unsigned(ui), *best, cone->seconds});
  }
  llvm::stable_sort(merges, [](const Merge &a, const Merge &b) { return a.saving > b.saving; });
  llvm::DenseMap<int64_t, int64_t> groupPoint;
  for (const Merge &m : merges) {
    SavedChoice &u = s.saved[m.u], &j = s.saved[m.j];
    if (u.group >= 0) // already an anchor of its own group
      continue;
    int64_t gid = j.group >= 0 ? j.group : int64_t(m.j);
    int64_t point = j.group >= 0 ? groupPoint.lookup(gid) : facts[m.j].firstBackward;
    s.profileOfSaved(m.u, +1);
    u.holdFrom = point;
    s.profileOfSaved(m.u, -1);
    if (s.profile.max().first > aimBytes) {
      s.profileOfSaved(m.u, +1);
      u.holdFrom = -1;
      s.profileOfSaved(m.u, -1);
      continue;
    }
    if (j.group < 0) {
      j.group = gid;
      groupPoint[gid] = point;
    }
    u.group = gid;
  }
}
