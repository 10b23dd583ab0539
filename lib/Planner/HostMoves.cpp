//===- HostMoves.cpp - Host-parameter exchange and re-plan ----------------===//
//
// Part of offload. A host parameter costs about its bytes (its update runs
// on the host), and which set of them covers the peaks most cheaply is a
// covering problem the peak-by-peak greedy and the reverse delete leave far
// from optimal at tight budgets (resnet18 at 54% of its arena: 46 host
// parameters, 1293% of the step in host updates, where the exact oracle
// covers with 18 for 1062%). See Algorithms.h.
//
//===----------------------------------------------------------------------===//

#include "offload/Planner/Algorithms.h"

#include "llvm/ADT/STLExtras.h"

using namespace offload::planner;

namespace {

/// The exchange's moves over one state; `tries` bounds the moves evaluated
/// on the profile in all.
struct Exchange {
  Planner &p;
  PlanState &s;
  int64_t aimBytes;
  int64_t tries;

  double own(unsigned i) const { return hostOwnSeconds(p.problem.params[i], p.options.tieBreak); }
  void setHost(unsigned i, bool host) {
    s.profileOfParam(i, host ? -1 : +1);
    s.linkOfParam(i, host ? +1 : -1);
    s.params[i].decision = host ? Decision::Host : Decision::Keep;
  }
  bool fitsAndGains(double ownDelta, double exposedBefore) const {
    return s.profile.max().first <= aimBytes &&
           ownDelta + s.linkExposed(p.linkWeight) - exposedBefore < -1e-15;
  }

  /// Whether the profile stays at or below the aim with `removed` off the
  /// host and `added` on it, without changing it: the move changes the
  /// live bytes by a step function over its parameters' freed ranges, so
  /// only the segments where it adds bytes are checked, each by its
  /// maximum (LiveProfile::maxOver). The same answer as making the move and
  /// reading the profile's maximum, when that is at or below the aim now.
  bool fitsAfter(llvm::ArrayRef<unsigned> removed, unsigned added) const {
    llvm::SmallVector<std::pair<int64_t, int64_t>, 16> steps; // (point, delta from it on)
    auto ranges = [&](unsigned i, int64_t sign) {
      for (const Freed &f : p.problem.params[i].freed)
        if (f.lo <= f.hi && f.bytes != 0) {
          steps.push_back({f.lo, sign * f.bytes});
          steps.push_back({f.hi + 1, -sign * f.bytes});
        }
    };
    for (unsigned r : removed)
      ranges(r, +1); // back on the device: its freed bytes are live again
    ranges(added, -1);
    llvm::sort(steps);
    int64_t delta = 0;
    for (size_t k = 0; k < steps.size();) {
      int64_t at = steps[k].first;
      for (; k < steps.size() && steps[k].first == at; ++k)
        delta += steps[k].second;
      if (delta > 0 && k < steps.size() &&
          s.profile.maxOver(at, steps[k].first - 1) + delta > aimBytes)
        return false;
    }
    return true;
  }

  /// Takes `removed` off the host and `added` onto it; keeps the exchange
  /// when it fits and is cheaper. The fit is checked before the profile is
  /// touched (fitsAfter); the link windows change and change back as the
  /// move did before, so their sums are the same.
  bool tryExchange(llvm::ArrayRef<unsigned> removed, unsigned added) {
    double before = s.linkExposed(p.linkWeight), delta = 0;
    for (unsigned r : removed) {
      if (s.params[r].decision != Decision::Host)
        return false;
      delta -= own(r);
    }
    if (s.params[added].decision != Decision::Keep)
      return false;
    delta += own(added);
    if (delta >= 0 && delta >= before) // cannot gain: exposure only drops by `before`
      return false;
    if (--tries < 0)
      return false;
    if (s.profile.max().first > aimBytes) {
      // Not at the aim now: the move is judged by the whole profile.
      for (unsigned r : removed)
        setHost(r, false);
      setHost(added, true);
      if (fitsAndGains(delta, before)) {
        s.params[added].seconds = own(added);
        s.params[added].why = "exchanged for a costlier host parameter at the same peaks";
        return true;
      }
      setHost(added, false);
      for (unsigned r : removed)
        setHost(r, true);
      return false;
    }
    bool fits = fitsAfter(removed, added);
    for (unsigned r : removed)
      s.linkOfParam(r, -1);
    s.linkOfParam(added, +1);
    if (fits && delta + s.linkExposed(p.linkWeight) - before < -1e-15) {
      for (unsigned r : removed) {
        s.profileOfParam(r, +1);
        s.params[r].decision = Decision::Keep;
      }
      s.profileOfParam(added, -1);
      s.params[added].decision = Decision::Host;
      s.params[added].seconds = own(added);
      s.params[added].why = "exchanged for a costlier host parameter at the same peaks";
      return true;
    }
    s.linkOfParam(added, -1);
    for (unsigned r : removed)
      s.linkOfParam(r, +1);
    return false;
  }

  /// One for several: `r` off the host, then the parameters still on the
  /// device that are cheapest per byte they free at the peak point (each
  /// counted up to the peak's excess over the aim) onto it until the peak
  /// is back at the aim; kept when cheaper. The swaps cannot find a large
  /// parameter's bytes among several small ones.
  bool oneForSeveral(unsigned r, llvm::ArrayRef<unsigned> out) {
    double before = s.linkExposed(p.linkWeight), delta = -own(r);
    setHost(r, false);
    llvm::SmallVector<unsigned> added;
    while (tries > 0 && delta < before) {
      auto [peakBytes, peakAt] = s.profile.max();
      if (peakBytes <= aimBytes)
        break;
      --tries;
      int64_t excess = peakBytes - aimBytes;
      std::optional<unsigned> pick;
      double pickPrice = 0;
      for (unsigned a : out) {
        if (s.params[a].decision != Decision::Keep || s.params[a].banned || a == r)
          continue;
        int64_t freedAtPeak = bytesFreedAt(p.problem.params[a].freed, peakAt);
        if (freedAtPeak <= 0)
          continue;
        double price = own(a) / double(std::min(freedAtPeak, excess));
        if (!pick || price < pickPrice) {
          pick = a;
          pickPrice = price;
        }
      }
      if (!pick)
        break;
      setHost(*pick, true);
      added.push_back(*pick);
      delta += own(*pick);
    }
    if (fitsAndGains(delta, before)) {
      for (unsigned a : added) {
        s.params[a].seconds = own(a);
        s.params[a].why = "with others, exchanged for a costlier host parameter";
      }
      return true;
    }
    for (unsigned a : llvm::reverse(added))
      setHost(a, false);
    setHost(r, true);
    return false;
  }

  /// One pass of the three moves; true when one was kept.
  bool pass() {
    llvm::SmallVector<unsigned> in, out;
    for (auto [i, q] : llvm::enumerate(s.params))
      (q.decision == Decision::Host ? in : out).push_back(unsigned(i));
    if (in.empty() || out.empty())
      return false;
    auto byOwn = [&](unsigned a, unsigned b) { return own(a) < own(b); };
    llvm::stable_sort(out, byOwn); // cheapest first
    llvm::stable_sort(in, [&](unsigned a, unsigned b) { return byOwn(b, a); });
    bool improved = false;
    // `out` is sorted cheapest first: once an added parameter costs as much
    // as what is removed, no later one can gain on its own seconds.
    for (unsigned r : in)
      for (unsigned a : out) {
        if (own(a) >= own(r) || tries <= 0)
          break;
        if (tryExchange({r}, a)) {
          improved = true;
          break;
        }
      }
    for (size_t x = 0; x < in.size() && tries > 0; ++x)
      for (size_t y = x + 1; y < in.size() && tries > 0; ++y)
        for (unsigned a : out) {
          if (own(a) >= own(in[x]) + own(in[y]) || tries <= 0)
            break;
          if (tryExchange({in[x], in[y]}, a)) {
            improved = true;
            break;
          }
        }
    for (unsigned r : in) {
      if (tries <= 0 || s.params[r].decision != Decision::Host)
        continue;
      improved |= oneForSeveral(r, out);
    }
    return improved;
  }
};

} // namespace

// After the reverse delete, local moves are kept when the profile stays at
// or below the aim and the host parameters' own seconds plus the link time
// the four windows cannot hide fall. Small steps only; at most
// options.exchangePasses passes and exchangeTriesPerPoint x points moves
// evaluated on the profile in all, so it stays linear in the step.
void offload::planner::exchangeHostParameters(Planner &p, PlanState &s, int64_t aimBytes) {
  if (!p.small())
    return;
  Exchange ex{p, s, aimBytes, p.options.exchangeTriesPerPoint * p.problem.numPoints()};
  for (int pass = 0; pass < p.options.exchangePasses && ex.tries > 0; ++pass)
    if (!ex.pass())
      return;
}

// Ruin and recreate: each host parameter, most expensive first, is put back
// on the device and kept off the host, the greedy reaches the aim again
// from there and the reverse delete gives back what it no longer needs; the
// result is kept when its price is lower. This finds one large parameter's
// bytes among several smaller ones and the saved values around them
// (resnet18 at 31% of its arena: the exact oracle covers
// layer2.1.conv1.weight's 1.2 MB with conv1.weight, layer1.0.conv1.weight,
// fc and two recomputes, 29% of the step cheaper). At most
// options.replanTries tries.
void offload::planner::replanHostParameters(Planner &p, PlanState &s, int64_t aimBytes) {
  llvm::SmallVector<unsigned> hosted;
  for (auto [i, q] : llvm::enumerate(s.params))
    if (q.decision == Decision::Host)
      hosted.push_back(unsigned(i));
  auto own = [&](unsigned i) { return hostOwnSeconds(p.problem.params[i], p.options.tieBreak); };
  llvm::stable_sort(hosted, [&](unsigned a, unsigned b) { return own(a) > own(b); });
  if (hosted.size() > p.options.replanTries)
    hosted.resize(p.options.replanTries);
  for (unsigned i : hosted) {
    if (s.params[i].decision != Decision::Host)
      continue;
    PlanState before = s;
    double seconds = p.decisionsSeconds(s);
    ParamChoice &q = s.params[i];
    s.profileOfParam(i, +1);
    s.linkOfParam(i, -1);
    q.decision = Decision::Keep;
    q.seconds = 0;
    q.why.clear();
    q.banned = true;
    bool reached = greedy(p, s, aimBytes);
    if (reached)
      giveBack(p, s, aimBytes);
    s.params[i].banned = false;
    if (!reached || p.decisionsSeconds(s) >= seconds * (1 - 1e-9))
      p.restore(s, std::move(before));
  }
}
