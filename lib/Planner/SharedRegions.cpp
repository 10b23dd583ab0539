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
// Then, under a saved budget (where holding a value costs no saved bytes),
// regions whose cones rerun a common recomputed value (neither region
// reruns the other's values, so the merges above do not join them) become
// one region at the earlier one's point, its values held from there: the
// common chain runs once. resnet18 at PyTorch's saved bytes of fraction 0.2
// on the FLOPs-priced target: the knapsack's five convolutions (540 MFLOP,
// PyTorch's own) reran the stem and two convolutions of the first stage in
// two regions (the downsample's and the second stage's first convolution's,
// both fed by the first stage's output), 1006 MFLOP in all. Under an arena
// budget alone the holds cost arena bytes the model prices only at the
// aim: on the 44-row reference set (bench/planner/refset.py) 10 rows ran
// 0.05-1.1% faster and gpt at 45% of its arena 6.5% slower, so it is not
// done there.
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
  mergeOverlappingRegions(p, s, aimBytes);
}

void offload::planner::mergeOverlappingRegions(Planner &p, PlanState &s, int64_t aimBytes) {
  if (!p.problem.hasSavedBudget())
    return;
  const std::vector<SavedFacts> &facts = p.problem.saved;
  // Each region: the recomputed value it is built for (a group's anchor,
  // or a value with a region of its own), by that value's index.
  auto regionOf = [&](unsigned v) -> int64_t {
    const SavedChoice &c = s.saved[v];
    return c.group >= 0 ? c.group : int64_t(v);
  };
  llvm::DenseMap<int64_t, llvm::SmallVector<unsigned>> members;
  for (auto [v, c] : llvm::enumerate(s.saved))
    if (c.decision == Decision::Recompute)
      members[regionOf(unsigned(v))].push_back(unsigned(v));
  if (members.size() < 2)
    return;
  // Which regions rerun each recomputed value: its own, and every region
  // with a member whose cone runs through it.
  llvm::DenseMap<unsigned, llvm::SmallVector<int64_t, 2>> rerunBy;
  for (auto &[r, vs] : members)
    for (unsigned v : vs)
      for (unsigned w : llvm::concat<const unsigned>(llvm::ArrayRef<unsigned>(v),
                                                     llvm::ArrayRef(s.saved[v].through))) {
        llvm::SmallVector<int64_t, 2> &by = rerunBy[w];
        if (!llvm::is_contained(by, r))
          by.push_back(r);
      }
  // Pairs of regions with their seconds rerun twice (the common values'
  // prices), the largest first.
  llvm::DenseMap<std::pair<int64_t, int64_t>, double> common;
  for (auto &[w, by] : rerunBy)
    for (size_t a = 0; a < by.size(); ++a)
      for (size_t b = a + 1; b < by.size(); ++b)
        common[{std::min(by[a], by[b]), std::max(by[a], by[b])}] += s.saved[w].seconds;
  struct Pair {
    int64_t a, b;
    double seconds;
  };
  llvm::SmallVector<Pair> pairs;
  for (auto &[ab, seconds] : common)
    pairs.push_back({ab.first, ab.second, seconds});
  llvm::sort(pairs, [](const Pair &x, const Pair &y) {
    return x.seconds != y.seconds ? x.seconds > y.seconds
                                  : std::make_pair(x.a, x.b) < std::make_pair(y.a, y.b);
  });
  // Merged regions by union-find; a region's point is its anchor's first
  // backward use (the earliest of its values').
  llvm::DenseMap<int64_t, int64_t> parent;
  auto root = [&](int64_t r) {
    while (parent.count(r))
      r = parent[r];
    return r;
  };
  for (const Pair &pr : pairs) {
    int64_t a = root(pr.a), b = root(pr.b);
    if (a == b)
      continue;
    if (facts[size_t(b)].firstBackward < facts[size_t(a)].firstBackward ||
        (facts[size_t(b)].firstBackward == facts[size_t(a)].firstBackward && b < a))
      std::swap(a, b); // a runs first: b's values join it
    int64_t point = facts[size_t(a)].firstBackward;
    llvm::SmallVector<std::pair<unsigned, int64_t>> before;
    for (unsigned v : members[b]) {
      before.push_back({v, s.saved[v].holdFrom});
      s.profileOfSaved(v, +1);
      s.saved[v].holdFrom = point;
      s.profileOfSaved(v, -1);
    }
    if (s.profile.max().first > aimBytes) {
      for (auto [v, from] : before) {
        s.profileOfSaved(v, +1);
        s.saved[v].holdFrom = from;
        s.profileOfSaved(v, -1);
      }
      continue;
    }
    for (unsigned v : members[a])
      s.saved[v].group = a;
    for (unsigned v : members[b])
      s.saved[v].group = a;
    llvm::append_range(members[a], members[b]);
    members.erase(b);
    parent[b] = a;
  }
}
