//===- Greedy.cpp - The greedy at the peak and the reverse delete ---------===//
//
// Part of offload. See Algorithms.h and docs/planner.md ("Formulation and
// algorithm").
//
//===----------------------------------------------------------------------===//

#include "offload/Planner/Algorithms.h"

#include "llvm/ADT/STLExtras.h"

#include <algorithm>
#include <cmath>
#include <queue>

using namespace offload::planner;

ConeModel::~ConeModel() = default;

void ConeModel::sync(const PlanState &state) {
  for (auto [i, c] : llvm::enumerate(state.saved))
    setRecomputed(unsigned(i), c.decision == Decision::Recompute);
  for (auto [k, c] : llvm::enumerate(state.checkpoints))
    setCheckpoint(unsigned(k), c.saved);
}

// The links' queues price a copy by when it may start and when compute
// waits for it (LinkQueue, State.h); the parts its own neighbourhood cannot
// hide (SavedFacts) bound it from below.
double Planner::offloadSeconds(const PlanState &s, unsigned i) const {
  const SavedFacts &c = problem.saved[i];
  auto [out, back] = offloadCopies(c, s.timedLinks);
  return linkWeight * (std::max(c.releaseNotHidden, s.toHost.exposedAdding(out)) +
                       std::max(c.prefetchNotHidden, s.toDevice.exposedAdding(back))) +
         options.tieBreak * (c.toHostSeconds + c.toDeviceSeconds);
}

double Planner::hostSeconds(const PlanState &s, unsigned i) const {
  const ParamFacts &p = problem.params[i];
  llvm::SmallVector<LinkCopy, 2> in, out;
  paramCopies(p, s.timedLinks, in, out);
  return p.hostUpdateSeconds +
         linkWeight * (s.toDevice.exposedAdding(in) + s.toHost.exposedAdding(out)) +
         options.tieBreak * (p.toDeviceSeconds + p.toHostSeconds);
}

double Planner::perturbation(int kind, unsigned index) const {
  if (!perturbSeed)
    return 1.0;
  // splitmix64 of (seed, kind, index): the same factor for a candidate
  // whenever the run prices it.
  uint64_t z = perturbSeed * 0x9e3779b97f4a7c15ULL + (uint64_t(kind) << 32 | index);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  z ^= z >> 31;
  double u = double(z >> 11) * 0x1.0p-53; // [0, 1)
  return 1.0 + options.perturbation * (2.0 * u - 1.0);
}

double Planner::decisionsSeconds(const PlanState &s) const {
  return s.priceOfDecisions(options.tieBreak, linkWeight);
}

void offload::planner::repriceDependents(Planner &p, PlanState &s, unsigned i) {
  for (unsigned j : s.dependentsOf(i)) {
    if (std::optional<Cone> cone = p.cones.coneOf(j))
      s.priceRecompute(j, *cone);
    // else beyond maxConeOps: keep the last price
  }
}

namespace {

/// One option offered in a round of the greedy.
struct Choice {
  int kind = -1; // 0 saved, 1 param
  unsigned index = 0;
  Decision decision = Decision::Keep;
  double score = 0, seconds = 0;
  int64_t bytesAtPeak = 0;
  Cone cone;
  /// Over-budget byte-points it removes.
  double benefit = 0;
};

double scoreOf(const Choice &c) { return c.seconds / std::max(1.0, c.benefit); }

/// One round's view of the excess over the aim: prefix sums of the excess
/// and of the points above the aim, refreshed from the profile.
struct Excess {
  std::vector<int64_t> live;
  std::vector<double> prefixExcess, prefixHot;

  void refresh(const LiveProfile &profile, int64_t aimBytes) {
    profile.values(live);
    size_t n = live.size();
    prefixExcess.assign(n + 1, 0);
    prefixHot.assign(n + 1, 0);
    for (size_t q = 0; q < n; ++q) {
      int64_t excess = std::max<int64_t>(0, live[q] - aimBytes);
      prefixExcess[q + 1] = prefixExcess[q] + double(excess);
      prefixHot[q + 1] = prefixHot[q] + (excess > 0 ? 1 : 0);
    }
  }
  /// Over-budget byte-points removed by freeing `bytes` over [lo, hi].
  double coverage(int64_t lo, int64_t hi, int64_t bytes) const {
    lo = std::max<int64_t>(lo, 0);
    hi = std::min<int64_t>(hi, int64_t(live.size()) - 1);
    if (lo > hi || bytes <= 0)
      return 0.0;
    return std::min(double(bytes) * (prefixHot[hi + 1] - prefixHot[lo]),
                    prefixExcess[hi + 1] - prefixExcess[lo]);
  }
  /// Over-budget bytes a recompute's intermediates add at its use.
  double transientCost(int64_t at, int64_t bytes, int64_t aimBytes) const {
    if (bytes <= 0 || at < 0 || at >= int64_t(live.size()))
      return 0.0;
    return double(std::min<int64_t>(bytes, std::max<int64_t>(0, live[at] + bytes - aimBytes)));
  }
};

/// The recompute choice for candidate i against the current decisions.
/// Recomputing it adds to the recomputed regions that read it a rerun of
/// its cone each, and its value among their intermediates; switching from
/// an offload gives the offload's seconds back and frees only the points
/// the offload did not. None when the cone or a reader's chain would be
/// longer than maxConeOps (chains stay bounded and priced as they run:
/// without it, on the 32-layer encoder at 40% of its arena the regions
/// reran 45,629 ops where the planner believed 9,104).
std::optional<Choice> recomputeChoice(Planner &p, const PlanState &s, const Excess &ex,
                                      int64_t aimBytes, unsigned i) {
  const SavedFacts &c = p.problem.saved[i];
  const SavedChoice &now = s.saved[i];
  std::optional<Cone> cone = p.cones.coneOf(i);
  if (!cone)
    return std::nullopt;
  llvm::SmallVector<unsigned, 2> deps = s.dependentsOf(i);
  if (llvm::any_of(deps, [&](unsigned j) {
        return s.saved[j].coneOps + cone->numOps > p.options.maxConeOps;
      }))
    return std::nullopt;
  bool switching = now.decision == Decision::Offload;
  // Each recomputed region that reads i reruns its cone too; under a saved
  // budget, where holding values costs no saved bytes, shared regions run
  // the chain once (shareRecomputes), so the cone is paid once.
  double reruns = p.problem.hasSavedBudget() ? 1.0 : double(1 + deps.size());
  Choice r{0, i, Decision::Recompute, 0,
           cone->seconds * reruns - (switching ? now.seconds : 0.0), c.bytes, *cone};
  r.benefit = switching ? ex.coverage(c.lastForward + 1, c.offloadFreed.lo - 1, c.bytes) +
                              ex.coverage(c.offloadFreed.hi + 1, c.firstBackward - 1, c.bytes)
                        : ex.coverage(c.lastForward + 1, c.firstBackward - 1, c.bytes);
  if (p.problem.hasSavedBudget())
    return r; // saved bytes only: a region's intermediates are not saved
  r.benefit -= ex.transientCost(c.firstBackward, cone->transientBytes, aimBytes);
  for (unsigned j : deps)
    r.benefit -= ex.transientCost(p.problem.saved[j].firstBackward, c.bytes, aimBytes);
  return r;
}

/// Every option that frees bytes at `peakAt`, priced against the current
/// decisions: for a kept saved value the cheaper of offload and recompute,
/// for an offloaded one the switch to recompute where only that frees the
/// peak, for a parameter on the device the move to the host.
llvm::SmallVector<Choice, 0> offerChoices(Planner &p, const PlanState &s, const Excess &ex,
                                          int64_t aimBytes, int64_t peakAt) {
  llvm::SmallVector<Choice, 0> choices;
  auto consider = [&](Choice c) {
    c.score = scoreOf(c) * p.perturbation(c.kind, c.index);
    choices.push_back(c);
  };
  for (auto [i, c] : llvm::enumerate(p.problem.saved)) {
    Decision now = s.saved[i].decision;
    bool recomputeFrees = c.recomputable && c.lastForward < peakAt && peakAt < c.firstBackward;
    bool offloadFrees = c.offloadFreed.lo <= peakAt && peakAt <= c.offloadFreed.hi;
    if (now == Decision::Offload) {
      // An offloaded value comes back before its first backward use;
      // recomputing it instead also frees the points after the prefetch.
      if (recomputeFrees && !offloadFrees)
        if (std::optional<Choice> ch = recomputeChoice(p, s, ex, aimBytes, unsigned(i)))
          consider(*ch);
      continue;
    }
    if (now != Decision::Keep)
      continue;
    std::optional<Choice> best;
    if (offloadFrees) {
      best = Choice{0, unsigned(i), Decision::Offload, 0, p.offloadSeconds(s, unsigned(i)),
                    c.bytes, {}};
      best->benefit = ex.coverage(c.offloadFreed.lo, c.offloadFreed.hi, c.bytes);
    }
    if (recomputeFrees)
      if (std::optional<Choice> r = recomputeChoice(p, s, ex, aimBytes, unsigned(i)))
        if (!best || scoreOf(*r) < scoreOf(*best))
          best = *r;
    if (best)
      consider(*best);
  }
  for (auto [i, q] : llvm::enumerate(p.problem.params)) {
    if (s.params[i].decision != Decision::Keep || s.params[i].banned)
      continue;
    int64_t at = bytesFreedAt(q.freed, peakAt);
    if (at > 0) {
      Choice h{1, unsigned(i), Decision::Host, 0, p.hostSeconds(s, unsigned(i)), at, {}};
      for (const Freed &f : q.freed)
        h.benefit += ex.coverage(f.lo, f.hi, f.bytes);
      consider(h);
    }
  }
  return choices;
}

/// Takes `best` into the state, with `why`.
void take(Planner &p, PlanState &s, Choice &best, const std::string &why) {
  if (best.kind == 1) {
    ParamChoice &q = s.params[best.index];
    q.decision = Decision::Host;
    q.seconds = best.seconds;
    q.why = why;
    s.profileOfParam(best.index, -1);
    s.linkOfParam(best.index, +1);
    return;
  }
  SavedChoice &c = s.saved[best.index];
  if (c.decision == Decision::Offload) {
    // Switch to recompute: the offload's bytes and copies go back.
    s.profileOfSaved(best.index, +1);
    s.linkOfOffload(best.index, -1);
    best.seconds += c.seconds;
  }
  c.decision = best.decision;
  c.seconds = best.seconds;
  c.why = why;
  if (best.decision == Decision::Recompute) {
    c.transientBytes = best.cone.transientBytes;
    c.reads = best.cone.reads;
    c.through = best.cone.through;
    c.coneOps = best.cone.numOps;
    p.cones.setRecomputed(best.index, true);
    s.registerReader(best.index);
    repriceDependents(p, s, best.index);
  } else {
    s.linkOfOffload(best.index, +1);
  }
  s.profileOfSaved(best.index, -1);
}

} // namespace

void offload::planner::takeSaved(Planner &p, PlanState &s, unsigned i, Decision decision,
                                 double seconds, const Cone *cone, const std::string &why) {
  Choice c{0, i, decision, 0, seconds, p.problem.saved[i].bytes, cone ? *cone : Cone()};
  take(p, s, c, why);
}

// One round resolves the current peak point: every candidate that frees
// bytes there is priced in added seconds per over-budget byte-point it
// removes -- the sum, over every point above `aimBytes`, of the bytes it
// frees there, each point counted up to its excess -- and the cheapest are
// taken until the peak point is at `aimBytes`; then the next peak. Counting
// every point above the aim, not only the peak, keeps a tight budget near
// the optimum (the Transformer example at 61% of its arena: 292% of the
// step in added seconds with the per-point price, 17% with this one, the
// exact oracle's optimum 16.9%). This is the cost-effectiveness rule of the
// greedy for covering problems (Chvatal 1979), with the excess as the
// demand; a round costs O(points + candidates).
//
// Prices are those at the start of the round. On a small step a round takes
// at most one choice per options.takeEvery offered, so the rest are
// re-priced after each few takes (the Transformer at 64% of its arena:
// +308% -> +86%). A larger step takes choices until the peak point is at
// the aim, so that planning stays near-linear in its size, and refreshes
// the excess profile every options.refreshTakes takes.
bool offload::planner::greedy(Planner &p, PlanState &s, int64_t aimBytes) {
  const PlannerOptions &o = p.options;
  Excess ex;
  bool fresh = false;
  size_t takesSinceRefresh = 0;
  while (true) {
    auto [peakBytes, peakAt] = s.profile.max();
    if (peakBytes <= aimBytes)
      return true;
    if (!fresh || p.small() || takesSinceRefresh >= o.refreshTakes) {
      takesSinceRefresh = 0;
      ex.refresh(s.profile, aimBytes);
      fresh = true;
    }
    llvm::SmallVector<Choice, 0> choices = offerChoices(p, s, ex, aimBytes, peakAt);
    if (choices.empty())
      return false;
    // Lazy greedy: the cheapest per byte first. A choice that uses the
    // link is re-priced when it comes up, since the copies taken before it
    // in this round may have used up the compute that hides them; a
    // recompute is re-priced since recomputes taken before it may have
    // lengthened its cone (and is dropped when a chain would grow too
    // long). When it is no longer the cheapest it goes back into the queue.
    // Ties (free recomputes) by bytes at the peak, perturbed as the prices
    // are in a randomised restart.
    auto worse = [&](unsigned a, unsigned b) {
      const Choice &x = choices[a], &y = choices[b];
      return x.score > y.score ||
             (x.score == y.score && double(x.bytesAtPeak) * p.perturbation(x.kind, x.index) <
                                        double(y.bytesAtPeak) * p.perturbation(y.kind, y.index));
    };
    std::priority_queue<unsigned, std::vector<unsigned>, decltype(worse)> queue(worse);
    for (unsigned k = 0; k < choices.size(); ++k)
      queue.push(k);
    std::string why = "live at the peak (" + std::to_string(peakBytes) + " bytes at op #" +
                      std::to_string(peakAt) + " " + p.problem.opName(peakAt).str() + ")";
    int64_t atPeak = peakBytes;
    size_t takes = 0,
           maxTakes = p.small() ? std::max<size_t>(1, choices.size() / o.takeEvery) : SIZE_MAX;
    while (!queue.empty() && atPeak > aimBytes && takes < maxTakes) {
      unsigned k = queue.top();
      queue.pop();
      Choice &best = choices[k];
      double now = best.seconds;
      if (best.decision == Decision::Host || best.decision == Decision::Offload) {
        now = best.kind == 0 ? p.offloadSeconds(s, best.index) : p.hostSeconds(s, best.index);
      } else if (best.decision == Decision::Recompute) {
        std::optional<Choice> again = recomputeChoice(p, s, ex, aimBytes, best.index);
        if (!again)
          continue;
        now = again->seconds;
        best.cone = again->cone;
      }
      // Relative to the price's magnitude: a switch from an offload to a
      // recompute can have a negative price (the offload's seconds given
      // back), and `now > seconds * (1 + 1e-12)` then held for an unchanged
      // price, so such a choice went back into the queue forever (ViT-B/16
      // on h100-sxm at budget=1 looped here for minutes).
      if (now > best.seconds + 1e-12 * std::abs(best.seconds) + 1e-18) {
        best.seconds = now;
        best.score = scoreOf(best) * p.perturbation(best.kind, best.index);
        queue.push(k);
        continue;
      }
      atPeak -= best.bytesAtPeak;
      ++takes;
      ++takesSinceRefresh;
      take(p, s, best, why);
    }
  }
}

// Taking the cheapest per byte at each peak can overshoot: a large
// parameter taken last at one peak, or decisions made at an early peak that
// later ones made unnecessary. The decisions, most expensive first, are
// undone one at a time while the profile stays at or below `aimBytes`.
void offload::planner::giveBack(Planner &p, PlanState &s, int64_t aimBytes) {
  struct Taken {
    int kind;
    unsigned index;
    double seconds;
  };
  llvm::SmallVector<Taken, 0> taken;
  for (auto [i, c] : llvm::enumerate(s.saved))
    if (c.decision != Decision::Keep)
      taken.push_back({0, unsigned(i), c.seconds});
  for (auto [i, q] : llvm::enumerate(s.params))
    if (q.decision != Decision::Keep)
      taken.push_back({1, unsigned(i), q.seconds});
  llvm::stable_sort(taken, [](const Taken &a, const Taken &b) { return a.seconds > b.seconds; });
  for (const Taken &t : taken) {
    auto apply = [&](int64_t sign) {
      if (t.kind == 0)
        s.profileOfSaved(t.index, sign);
      else
        s.profileOfParam(t.index, sign);
    };
    apply(+1);
    if (s.profile.max().first > aimBytes) {
      apply(-1);
      continue;
    }
    if (t.kind == 1) {
      ParamChoice &q = s.params[t.index];
      s.linkOfParam(t.index, -1);
      q.decision = Decision::Keep;
      q.seconds = 0;
      q.why.clear();
      continue;
    }
    SavedChoice &c = s.saved[t.index];
    bool wasRecompute = c.decision == Decision::Recompute;
    if (c.decision == Decision::Offload)
      s.linkOfOffload(t.index, -1);
    else
      p.cones.setRecomputed(t.index, false);
    c.decision = Decision::Keep;
    c.seconds = 0;
    c.transientBytes = 0;
    c.why.clear();
    if (wasRecompute)
      repriceDependents(p, s, t.index); // their cones stop at c again
  }
}

const char *offload::planner::hostMovesName(HostMoves m) {
  switch (m) {
  case HostMoves::None: return "greedy";
  case HostMoves::Exchange: return "exchange";
  case HostMoves::ExchangeAndReplan: return "exchange+re-plan";
  }
  return "?";
}

// Where the greedy cannot reach the aim, the rest runs at the peak it
// reached: the real arena can still fit the budget (the model's peak lies
// above it where it overestimates a region's bytes: resnet18 at 31% of its
// arena, a 44.9 MB floor in the model was a 38.6 MB arena), and decisions
// that peak does not need are given back.
bool offload::planner::decide(Planner &p, PlanState &s, int64_t aimBytes, HostMoves moves) {
  unshareAll(s);
  uncheckpointAll(p, s);
  bool reached = p.useKnapsack ? knapsack(p, s, aimBytes) : greedy(p, s, aimBytes);
  int64_t at = reached ? aimBytes : std::max(aimBytes, s.profile.max().first);
  giveBack(p, s, at);
  if (moves != HostMoves::None) {
    exchangeHostParameters(p, s, at);
    giveBack(p, s, at);
    if (moves == HostMoves::ExchangeAndReplan)
      replanHostParameters(p, s, at);
  }
  // Checkpoints: on a small step in the search's checkpoint runs only (the
  // runs without them stay as they were, and the simulator picks); on a
  // larger one, where the search runs once, those that fit as they stand.
  if (!p.small() || p.checkpointReplan)
    checkpointRecomputes(p, s, at);
  if (p.checkpointReplan)
    replanCheckpoints(p, s, at);
  shareRecomputes(p, s, at);
  return reached;
}
