//===- State.cpp - The planner's decisions and what they imply ------------===//
//
// Part of offload. See State.h.
//
//===----------------------------------------------------------------------===//

#include "offload/Planner/State.h"

#include "llvm/ADT/STLExtras.h"

#include <algorithm>
#include <climits>
#include <cmath>

using namespace offload::planner;

//===----------------------------------------------------------------------===//
// LiveProfile: a lazy segment tree (range add, max with argmax)
//===----------------------------------------------------------------------===//

LiveProfile::LiveProfile(llvm::ArrayRef<int64_t> live) : n(std::max<size_t>(1, live.size())) {
  size = 1;
  while (size < n)
    size *= 2;
  best.assign(2 * size, {INT64_MIN / 4, 0});
  lazy.assign(2 * size, 0);
  for (size_t i = 0; i < live.size(); ++i)
    best[size + i] = {live[i], int64_t(i)};
  for (size_t i = size - 1; i >= 1; --i)
    best[i] = merge(best[2 * i], best[2 * i + 1]);
}

void LiveProfile::add(int64_t lo, int64_t hi, int64_t delta) {
  lo = std::max<int64_t>(lo, 0);
  hi = std::min<int64_t>(hi, int64_t(n) - 1);
  if (lo > hi || delta == 0)
    return;
  add(1, 0, int64_t(size) - 1, lo, hi, delta);
}

void LiveProfile::values(std::vector<int64_t> &out) const {
  out.assign(n, 0);
  fill(1, 0, int64_t(size) - 1, 0, out);
}

void LiveProfile::add(size_t node, int64_t l, int64_t r, int64_t lo, int64_t hi, int64_t delta) {
  if (hi < l || r < lo)
    return;
  if (lo <= l && r <= hi) {
    best[node].first += delta;
    lazy[node] += delta;
    return;
  }
  int64_t m = (l + r) / 2;
  add(2 * node, l, m, lo, hi, delta);
  add(2 * node + 1, m + 1, r, lo, hi, delta);
  best[node] = merge(best[2 * node], best[2 * node + 1]);
  best[node].first += lazy[node];
}

int64_t LiveProfile::maxOver(int64_t lo, int64_t hi) const {
  lo = std::max<int64_t>(lo, 0);
  hi = std::min<int64_t>(hi, int64_t(n) - 1);
  if (lo > hi)
    return INT64_MIN;
  return maxOver(1, 0, int64_t(size) - 1, lo, hi);
}

// best[node] holds the node's maximum with its own pending `lazy` and
// without its ancestors'.
int64_t LiveProfile::maxOver(size_t node, int64_t l, int64_t r, int64_t lo, int64_t hi) const {
  if (lo <= l && r <= hi)
    return best[node].first;
  int64_t m = (l + r) / 2, most = INT64_MIN;
  if (lo <= m)
    most = std::max(most, maxOver(2 * node, l, m, lo, hi));
  if (hi > m)
    most = std::max(most, maxOver(2 * node + 1, m + 1, r, lo, hi));
  return most + lazy[node];
}

void LiveProfile::fill(size_t node, int64_t l, int64_t r, int64_t above,
                       std::vector<int64_t> &out) const {
  if (l >= int64_t(n))
    return;
  if (l == r) {
    out[l] = best[node].first + above;
    return;
  }
  int64_t m = (l + r) / 2;
  fill(2 * node, l, m, above + lazy[node], out);
  fill(2 * node + 1, m + 1, r, above + lazy[node], out);
}

//===----------------------------------------------------------------------===//
// LinkQueue: the copies on one link, run as the simulator runs them
//===----------------------------------------------------------------------===//

LinkQueue::Copy LinkQueue::resolve(const LinkCopy &c) const {
  double issue = c.issue >= 0 ? c.issue : (c.backward ? forward : 0.0);
  double due = c.due >= 0 ? c.due : (c.backward ? forward + backward : forward);
  return {issue, std::max(issue, due), c.seconds};
}

void LinkQueue::add(const LinkCopy &c, double sign) {
  used[c.backward] += sign * c.seconds;
  if (c.seconds == 0)
    return;
  if (c.issue >= 0 || c.due >= 0)
    timed += sign > 0 ? 1 : -1;
  Copy x = resolve(c);
  settled = false;
  // The copies stay in issue order and `byDue` in due order, each change
  // O(copies), so that a price after a take runs the queue without sorting.
  if (sign > 0) {
    unsigned at = unsigned(std::upper_bound(copies.begin(), copies.end(), x) - copies.begin());
    copies.insert(copies.begin() + at, x);
    for (unsigned &k : byDue)
      k += k >= at;
    auto pos = std::upper_bound(byDue.begin(), byDue.end(), x.due,
                                [&](double due, unsigned k) { return due < copies[k].due; });
    byDue.insert(pos, at);
    return;
  }
  auto [lo, hi] = std::equal_range(copies.begin(), copies.end(), x);
  for (auto it = lo; it != hi; ++it)
    if (it->seconds == x.seconds) {
      unsigned at = unsigned(it - copies.begin());
      copies.erase(it);
      byDue.erase(llvm::find(byDue, at));
      for (unsigned &k : byDue)
        k -= k > at;
      return;
    }
}

namespace {
/// The link and the compute's waits as the copies are issued and waited
/// for: an issue at compute time t is at t + waited in the step; the copy
/// starts when the link is free; at a due, compute waits for the copy.
struct Run {
  double linkFree = 0, waited = 0;
  double issue(double at, double seconds) {
    linkFree = std::max(linkFree, at + waited) + seconds;
    return linkFree;
  }
  void due(double at, double done) { waited = std::max(waited, done - at); }
};
} // namespace

void LinkQueue::settle() const {
  if (settled)
    return;
  size_t n = copies.size();
  after.resize(n);
  done.resize(n);
  Run run;
  size_t d = 0;
  for (size_t i = 0; i < n; ++i) {
    // The dues before this issue (at the same time: the issue first).
    for (; d < n && copies[byDue[d]].due < copies[i].issue; ++d)
      run.due(copies[byDue[d]].due, done[byDue[d]]);
    done[i] = run.issue(copies[i].issue, copies[i].seconds);
    after[i] = {run.linkFree, run.waited, d};
  }
  for (; d < n; ++d)
    run.due(copies[byDue[d]].due, done[byDue[d]]);
  waited = run.waited;
  settled = true;
}

// With no copy timed, the run is the per-phase window: the copy seconds of
// each phase beyond its compute, summed as the copies come and go (so that
// the prices are the windows' to the last bit, whatever the queue's order).
double LinkQueue::windowExposed(double addForward, double addBackward) const {
  return (std::max(0.0, used[0] + addForward - forward) - std::max(0.0, used[0] - forward)) +
         (std::max(0.0, used[1] + addBackward - backward) - std::max(0.0, used[1] - backward));
}

void LinkQueue::addExposed(double &t) const {
  if (timed == 0) {
    t += std::max(0.0, used[0] - forward);
    t += std::max(0.0, used[1] - backward);
    return;
  }
  settle();
  t += waited;
}

double LinkQueue::exposed() const {
  double t = 0;
  addExposed(t);
  return t;
}

double LinkQueue::exposedAdding(llvm::ArrayRef<LinkCopy> add) const {
  if (timed == 0 && llvm::none_of(add, [](const LinkCopy &c) {
        return c.seconds != 0 && (c.issue >= 0 || c.due >= 0);
      })) {
    double phase[2] = {0, 0};
    for (const LinkCopy &c : add)
      phase[c.backward] += c.seconds;
    return windowExposed(phase[0], phase[1]);
  }
  llvm::SmallVector<Copy, 4> extra;
  for (const LinkCopy &c : add)
    if (c.seconds != 0)
      extra.push_back(resolve(c));
  if (extra.empty())
    return 0;
  settle();
  llvm::sort(extra);
  size_t n = copies.size();
  // The added copies go after the queued ones they tie with; the run is
  // taken up right after the issue before the first of them.
  size_t from = size_t(std::upper_bound(copies.begin(), copies.end(), extra.front()) -
                       copies.begin());
  Run run;
  size_t d = 0;
  if (from > 0) {
    run.linkFree = after[from - 1].linkFree;
    run.waited = after[from - 1].waited;
    d = after[from - 1].duesDone;
  }
  llvm::SmallVector<unsigned, 4> extraByDue;
  for (unsigned k = 0; k < extra.size(); ++k)
    extraByDue.push_back(k);
  llvm::sort(extraByDue, [&](unsigned a, unsigned b) { return extra[a].due < extra[b].due; });
  llvm::SmallVector<double, 4> extraDone(extra.size(), 0);
  scratch.resize(n);
  auto doneOf = [&](unsigned j) { return j < from ? done[j] : scratch[j]; };
  size_t ed = 0;
  // The dues (queued and added) before `at` (all with `all`), by due.
  auto duesBefore = [&](double at, bool all) {
    while (true) {
      bool q = d < n && (all || copies[byDue[d]].due < at);
      bool x = ed < extra.size() && (all || extra[extraByDue[ed]].due < at);
      if (!q && !x)
        return;
      if (q && (!x || copies[byDue[d]].due <= extra[extraByDue[ed]].due)) {
        run.due(copies[byDue[d]].due, doneOf(byDue[d]));
        ++d;
      } else {
        run.due(extra[extraByDue[ed]].due, extraDone[extraByDue[ed]]);
        ++ed;
      }
    }
  };
  // Once the added copies are issued and waited for, the run is the record
  // later by `shift` from a queued issue on where the link is as far ahead
  // of compute as in the record and every copy still to be waited for ends
  // `shift` later too: the rest is the record's, later by `shift` (the
  // queue is a max-plus recurrence). Checked only where the link agrees.
  pending.clear();
  size_t i = from, e = 0;
  auto caughtUp = [&](size_t at) {
    if (e < extra.size() || ed < extra.size())
      return false;
    double shift = run.waited - after[at].waited;
    double tol = 1e-12 * (std::abs(run.linkFree) + 1e-300);
    if (std::abs(run.linkFree - (after[at].linkFree + shift)) > tol)
      return false;
    size_t keep = 0;
    bool ok = true;
    for (unsigned j : pending) {
      if (copies[j].due < copies[at].issue)
        continue; // waited for already (dues are taken before the issue)
      pending[keep++] = j;
      ok &= std::abs(scratch[j] - (done[j] + shift)) <= tol;
    }
    pending.resize(keep);
    return ok;
  };
  while (i < n || e < extra.size()) {
    bool queued = i < n && (e == extra.size() || !(extra[e] < copies[i]));
    const Copy &c = queued ? copies[i] : extra[e];
    duesBefore(c.issue, false);
    double finish = run.issue(c.issue, c.seconds);
    if (!queued) {
      extraDone[e++] = finish;
      continue;
    }
    scratch[i] = finish;
    if (caughtUp(i))
      return run.waited - after[i].waited;
    pending.push_back(unsigned(i));
    ++i;
  }
  duesBefore(0, true);
  return run.waited - waited;
}

std::pair<LinkCopy, LinkCopy> offload::planner::offloadCopies(const SavedFacts &c, bool timed) {
  auto t = [&](double x) { return timed ? x : -1.0; };
  return {LinkCopy{c.toHostSeconds, t(c.toHostIssue), t(c.toHostDue), false},
          LinkCopy{c.toDeviceSeconds, t(c.toDeviceIssue), t(c.toDeviceDue), true}};
}

void offload::planner::paramCopies(const ParamFacts &p, bool timed,
                                   llvm::SmallVectorImpl<LinkCopy> &toDevice,
                                   llvm::SmallVectorImpl<LinkCopy> &toHost) {
  auto t = [&](double x) { return timed ? x : -1.0; };
  double fwd = p.toDeviceForwardSeconds, bwd = p.toDeviceSeconds - p.toDeviceForwardSeconds;
  if (fwd != 0)
    toDevice.push_back(LinkCopy{fwd, t(p.forwardFetchIssue), t(p.forwardFetchDue), false});
  if (bwd != 0)
    toDevice.push_back(LinkCopy{bwd, t(p.backwardFetchIssue), t(p.backwardFetchDue), true});
  if (p.toHostSeconds != 0)
    toHost.push_back(LinkCopy{p.toHostSeconds, t(p.gradientIssue), t(p.gradientDue), true});
}

//===----------------------------------------------------------------------===//
// PlanState
//===----------------------------------------------------------------------===//

PlanState::PlanState(const PlanProblem &problem, bool timedLinks)
    : problem(&problem), saved(problem.saved.size()), params(problem.params.size()),
      checkpoints(problem.checkpoints.size()), readers(problem.saved.size()),
      profile(problem.baseLive),
      toHost(problem.forwardSeconds, problem.backwardSeconds),
      toDevice(problem.forwardSeconds, problem.backwardSeconds), timedLinks(timedLinks) {}

void PlanState::profileOfSaved(unsigned i, int64_t sign) {
  const SavedFacts &c = problem->saved[i];
  const SavedChoice &d = saved[i];
  if (d.decision == Decision::Offload) {
    profile.add(c.offloadFreed.lo, c.offloadFreed.hi, sign * c.bytes);
  } else if (d.decision == Decision::Recompute && problem->hasSavedBudget()) {
    // Saved bytes only (withSavedBudget): not saved from its last forward
    // use to its first backward use, whatever the region holds.
    profile.add(c.lastForward + 1, c.firstBackward - 1, sign * c.bytes);
  } else if (d.decision == Decision::Recompute) {
    // Freed from the last forward use to the region (or to the point its
    // group's region holds it from), and its intermediates at the region.
    profile.add(c.lastForward + 1, (d.holdFrom >= 0 ? d.holdFrom : c.firstBackward) - 1,
                sign * c.bytes);
    profile.add(c.firstBackward, c.firstBackward, -sign * d.transientBytes);
  }
}

void PlanState::priceRecompute(unsigned i, const Cone &cone) {
  SavedChoice &d = saved[i];
  profileOfSaved(i, +1);
  d.seconds = cone.seconds;
  d.transientBytes = cone.transientBytes;
  d.reads = cone.reads;
  d.through = cone.through;
  d.coneOps = cone.numOps;
  profileOfSaved(i, -1);
  registerReader(i);
}

void PlanState::profileOfCheckpoint(unsigned k, int64_t sign) {
  const CheckpointFacts &c = problem->checkpoints[k];
  const CheckpointChoice &d = checkpoints[k];
  if (d.saved)
    profile.add(c.lastForward + 1, d.holdTo, sign * c.bytes);
}

bool PlanState::anyCheckpoint() const {
  return llvm::any_of(checkpoints, [](const CheckpointChoice &c) { return c.saved; });
}

void PlanState::profileOfParam(unsigned i, int64_t sign) {
  for (const Freed &f : problem->params[i].freed)
    profile.add(f.lo, f.hi, sign * f.bytes);
}

void PlanState::setTimedLinks(bool timed) {
  timedLinks = timed;
  relink();
}

void PlanState::relink() {
  toHost = LinkQueue(problem->forwardSeconds, problem->backwardSeconds);
  toDevice = LinkQueue(problem->forwardSeconds, problem->backwardSeconds);
  for (auto [i, c] : llvm::enumerate(saved))
    if (c.decision == Decision::Offload)
      linkOfOffload(unsigned(i), +1);
  for (auto [i, q] : llvm::enumerate(params))
    if (q.decision == Decision::Host)
      linkOfParam(unsigned(i), +1);
}

void PlanState::linkOfOffload(unsigned i, double sign) {
  auto [out, back] = offloadCopies(problem->saved[i], timedLinks);
  toHost.add(out, sign);
  toDevice.add(back, sign);
}

void PlanState::linkOfParam(unsigned i, double sign) {
  llvm::SmallVector<LinkCopy, 2> in, out;
  paramCopies(problem->params[i], timedLinks, in, out);
  for (const LinkCopy &c : in)
    toDevice.add(c, sign);
  for (const LinkCopy &c : out)
    toHost.add(c, sign);
}

void PlanState::registerReader(unsigned j) {
  auto add = [&](unsigned i) {
    if (!llvm::is_contained(readers[i], j))
      readers[i].push_back(j);
  };
  for (unsigned i : saved[j].reads)
    add(i);
  for (unsigned i : saved[j].through)
    add(i);
}

llvm::SmallVector<unsigned, 2> PlanState::dependentsOf(unsigned i) const {
  llvm::SmallVector<unsigned, 2> out;
  for (unsigned j : readers[i]) {
    const SavedChoice &d = saved[j];
    if (j == i || d.decision != Decision::Recompute)
      continue;
    if (llvm::is_contained(d.through, i) || llvm::is_contained(d.reads, i))
      out.push_back(j);
  }
  return out;
}

double PlanState::linkExposed(double linkWeight) const {
  double t = 0;
  toHost.addExposed(t);
  toDevice.addExposed(t);
  return linkWeight * t;
}

double PlanState::linkWaits(double linkWeight) const {
  double t = linkExposed(linkWeight);
  if (!timedLinks)
    for (auto [i, c] : llvm::enumerate(saved))
      if (c.decision == Decision::Offload)
        t += problem->saved[i].releaseNotHidden + problem->saved[i].prefetchNotHidden;
  return t;
}

double PlanState::priceOfDecisions(double tieBreak, double linkWeight) const {
  double t = linkWaits(linkWeight);
  for (auto [i, c] : llvm::enumerate(saved))
    if (c.decision == Decision::Offload)
      t += tieBreak * (problem->saved[i].toHostSeconds + problem->saved[i].toDeviceSeconds);
    else if (c.decision == Decision::Recompute)
      t += c.seconds;
  for (auto [i, p] : llvm::enumerate(params))
    if (p.decision == Decision::Host)
      t += hostOwnSeconds(problem->params[i], tieBreak);
  return t;
}

bool PlanState::anyHost() const {
  return llvm::any_of(params, [](const ParamChoice &p) { return p.decision == Decision::Host; });
}

int64_t offload::planner::keptSavedBytes(const PlanState &state) {
  int64_t bytes = 0;
  for (auto [i, c] : llvm::enumerate(state.saved))
    if (c.decision == Decision::Keep)
      bytes += state.problem->saved[i].bytes;
  for (auto [k, c] : llvm::enumerate(state.checkpoints))
    if (c.saved)
      bytes += state.problem->checkpoints[k].bytes;
  return bytes;
}
