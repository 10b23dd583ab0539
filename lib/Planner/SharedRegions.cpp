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
    // The seconds u's own region would rerun; where its cone is now past
    // maxConeOps (every value before it recomputed too), the price it was
    // taken at. Merging never lengthens j's region, which reruns u already.
    std::optional<Cone> cone = p.cones.coneOf(unsigned(ui));
    merges.push_back({unsigned(ui), *best, cone ? cone->seconds : u.seconds});
  }
  llvm::stable_sort(merges, [](const Merge &a, const Merge &b) { return a.saving > b.saving; });
  llvm::DenseMap<int64_t, int64_t> groupPoint;
  // Each group's members other than its anchor.
  llvm::DenseMap<int64_t, llvm::SmallVector<unsigned>> members;
  for (const Merge &m : merges) {
    SavedChoice &u = s.saved[m.u], &j = s.saved[m.j];
    if (u.group >= 0 && u.group != int64_t(m.u))
      continue; // already held from another region
    int64_t gid = j.group >= 0 ? j.group : int64_t(m.j);
    if (gid == u.group)
      continue;
    int64_t point = j.group >= 0 ? groupPoint.lookup(gid) : facts[m.j].firstBackward;
    // u is held from j's group's region, and where u anchors a group of its
    // own (merged into before its own merge came up), so are the values its
    // region held: j's region reruns u's cone, and so theirs.
    llvm::SmallVector<unsigned> moved{m.u};
    if (u.group >= 0)
      llvm::append_range(moved, members[u.group]);
    llvm::SmallVector<int64_t> before;
    auto hold = [&](unsigned v, int64_t from) {
      s.profileOfSaved(v, +1);
      s.saved[v].holdFrom = from;
      s.profileOfSaved(v, -1);
    };
    for (unsigned v : moved) {
      before.push_back(s.saved[v].holdFrom);
      hold(v, point);
    }
    if (s.profile.max().first > aimBytes) {
      for (auto [v, from] : llvm::zip(moved, before))
        hold(v, from);
      continue;
    }
    if (j.group < 0) {
      j.group = gid;
      groupPoint[gid] = point;
    }
    if (u.group >= 0)
      members.erase(u.group);
    for (unsigned v : moved)
      s.saved[v].group = gid;
    llvm::append_range(members[gid], moved);
  }
}
