//===- State.cpp - The planner's decisions and what they imply ------------===//
//
// Part of offload. See State.h.
//
//===----------------------------------------------------------------------===//

#include "offload/Planner/State.h"

#include "llvm/ADT/STLExtras.h"

#include <algorithm>
#include <climits>

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
// PlanState
//===----------------------------------------------------------------------===//

PlanState::PlanState(const PlanProblem &problem)
    : problem(&problem), saved(problem.saved.size()), params(problem.params.size()),
      readers(problem.saved.size()), profile(problem.baseLive),
      toHostFwd{problem.forwardSeconds}, toHostBwd{problem.backwardSeconds},
      toDeviceFwd{problem.forwardSeconds}, toDeviceBwd{problem.backwardSeconds} {}

void PlanState::profileOfSaved(unsigned i, int64_t sign) {
  const SavedFacts &c = problem->saved[i];
  const SavedChoice &d = saved[i];
  if (d.decision == Decision::Offload) {
    profile.add(c.offloadFreed.lo, c.offloadFreed.hi, sign * c.bytes);
  } else if (d.decision == Decision::Recompute) {
    // Freed from the last forward use to the region (or to the point its
    // group's region holds it from), and its intermediates at the region.
    profile.add(c.lastForward + 1, (d.holdFrom >= 0 ? d.holdFrom : c.firstBackward) - 1,
                sign * c.bytes);
    profile.add(c.firstBackward, c.firstBackward, -sign * d.transientBytes);
  }
}

void PlanState::profileOfParam(unsigned i, int64_t sign) {
  for (const Freed &f : problem->params[i].freed)
    profile.add(f.lo, f.hi, sign * f.bytes);
}

void PlanState::linkOfOffload(unsigned i, double sign) {
  const SavedFacts &c = problem->saved[i];
  toHostFwd.used += sign * c.toHostSeconds;
  toDeviceBwd.used += sign * c.toDeviceSeconds;
}

void PlanState::linkOfParam(unsigned i, double sign) {
  const ParamFacts &p = problem->params[i];
  toDeviceFwd.used += sign * p.toDeviceForwardSeconds;
  toDeviceBwd.used += sign * (p.toDeviceSeconds - p.toDeviceForwardSeconds);
  toHostBwd.used += sign * p.toHostSeconds;
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
  for (const LinkWindow *w : {&toHostFwd, &toHostBwd, &toDeviceFwd, &toDeviceBwd})
    t += std::max(0.0, w->used - w->window);
  return linkWeight * t;
}

bool PlanState::anyHost() const {
  return llvm::any_of(params, [](const ParamChoice &p) { return p.decision == Decision::Host; });
}
