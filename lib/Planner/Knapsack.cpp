//===- Knapsack.cpp - Saved bytes freed by an exact knapsack --------------===//
//
// Part of offload. Under a saved budget (PlanProblem::savedBudgetBytes) the
// profile's peak is the kept saved bytes, and freeing them is a covering
// knapsack: free at least (peak - aim) bytes at the least price. The greedy
// takes the cheapest per byte, which misses where the values are coarse
// (the gpt example at PyTorch's saved bytes of fraction 0.4 on the
// FLOPs-priced target: 10.5 MFLOP recomputed, 8.4 with this run);
// PyTorch's partitioner solves its knapsack exactly (a dynamic program,
// torch/_functorch/_activation_checkpointing/knapsack.py). This is that
// dynamic program over the candidates live at the peak, each priced on its
// own against the decisions as they stand (its cone once, or its offload).
// Bytes are counted in units of the greatest common divisor of the
// candidates' bytes, exact, where that needs few enough units for the
// demand (peak - aim; below); otherwise in units of demand / that many, each
// candidate's bytes rounded down and the demand up, so that a cover in units
// frees at least the bytes asked for. (With units of demand / 1024, resnet18
// at PyTorch's saved bytes of fraction 0.2 lost a unit on each of its 24
// items and left out its 40 batch-norm statistics, under a unit each: the
// cover took a third 151 MFLOP convolution where PyTorch's takes a 75 MFLOP
// one.) The prices are additive only where the cones do not share ops; the
// search keeps the knapsack's plan only where it simulates faster than the
// greedy's (Search.cpp).
//
//===----------------------------------------------------------------------===//

#include "offload/Planner/Algorithms.h"

#include "llvm/ADT/STLExtras.h"

#include <algorithm>
#include <numeric>
#include <limits>

using namespace offload::planner;

namespace {
/// The most units the demand is cut into, and the most cells (candidates x
/// units: the time, and one bit each of memory) of one program: with many
/// candidates fewer units, down to kMinUnits (ViT-B/16's 247 candidates:
/// 16,981 units, 4.2 M cells, a few milliseconds per program).
constexpr int64_t kMaxUnits = int64_t(1) << 16;
constexpr int64_t kMinUnits = 1024;
constexpr int64_t kMaxCells = int64_t(1) << 22;

struct Item {
  unsigned index;
  Decision decision;
  double seconds;
  int64_t units;
};
} // namespace

bool offload::planner::knapsack(Planner &p, PlanState &s, int64_t aimBytes) {
  auto [peakBytes, peakAt] = s.profile.max();
  if (peakBytes <= aimBytes)
    return true;
  int64_t demand = peakBytes - aimBytes;
  struct Priced {
    unsigned index;
    Decision decision;
    double seconds;
    int64_t bytes;
  };
  llvm::SmallVector<Priced, 0> priced;
  int64_t common = 0; // the gcd of the candidates' bytes
  for (auto [i, c] : llvm::enumerate(p.problem.saved)) {
    if (s.saved[i].decision != Decision::Keep || c.bytes <= 0)
      continue;
    std::optional<Priced> best;
    if (c.recomputable && c.lastForward < peakAt && peakAt < c.firstBackward)
      if (std::optional<Cone> cone = p.cones.coneOf(unsigned(i)))
        best = Priced{unsigned(i), Decision::Recompute, cone->seconds, c.bytes};
    if (c.offloadFreed.lo <= peakAt && peakAt <= c.offloadFreed.hi) {
      double seconds = p.offloadSeconds(s, unsigned(i));
      if (!best || seconds < best->seconds)
        best = Priced{unsigned(i), Decision::Offload, seconds, c.bytes};
    }
    if (best) {
      priced.push_back(*best);
      common = std::gcd(common, c.bytes);
    }
  }
  if (priced.empty())
    return greedy(p, s, aimBytes);
  int64_t maxUnits =
      std::clamp<int64_t>(kMaxCells / int64_t(priced.size()), kMinUnits, kMaxUnits);
  int64_t unit = common;
  if ((demand + unit - 1) / unit > maxUnits)
    unit = (demand + maxUnits - 1) / maxUnits;
  int64_t need = (demand + unit - 1) / unit;
  llvm::SmallVector<Item, 0> items;
  for (const Priced &c : priced)
    if (c.bytes >= unit)
      items.push_back(Item{c.index, c.decision, c.seconds, c.bytes / unit});
  if (items.empty())
    return greedy(p, s, aimBytes);
  // cost[u]: the least price of freeing at least u units (u capped at
  // `need`) with the items so far; took[k][u]: item k was added to reach u;
  // capFrom[k]: the u it was added to where it reached `need` (the one
  // entry whose source the cap hides).
  const double inf = std::numeric_limits<double>::infinity();
  size_t width = size_t(need) + 1;
  std::vector<double> cost(width, inf), next(width);
  std::vector<bool> took(items.size() * width, false);
  std::vector<int64_t> capFrom(items.size(), -1);
  cost[0] = 0;
  for (size_t k = 0; k < items.size(); ++k) {
    next = cost;
    for (int64_t u = 0; u <= need; ++u) {
      if (cost[size_t(u)] == inf)
        continue;
      int64_t v = std::min(need, u + items[k].units);
      double with = cost[size_t(u)] + items[k].seconds;
      if (with < next[size_t(v)]) {
        next[size_t(v)] = with;
        took[k * width + size_t(v)] = true;
        if (v == need)
          capFrom[k] = u;
      }
    }
    std::swap(cost, next);
  }
  if (cost[size_t(need)] == inf)
    return greedy(p, s, aimBytes); // the items cannot cover it: the greedy's answer
  llvm::SmallVector<unsigned> taken;
  for (int64_t k = int64_t(items.size()) - 1, u = need; k >= 0; --k)
    if (took[size_t(k) * width + size_t(u)]) {
      taken.push_back(unsigned(k));
      u = u == need ? capFrom[size_t(k)] : u - items[size_t(k)].units;
    }
  // Taken in forward order, each priced against the ones before it.
  llvm::sort(taken, [&](unsigned a, unsigned b) {
    return p.problem.saved[items[a].index].lastForward < p.problem.saved[items[b].index].lastForward;
  });
  std::string why = "the saved bytes' knapsack (" + std::to_string(peakBytes) + " bytes at op #" +
                    std::to_string(peakAt) + " " + p.problem.opName(peakAt).str() + ")";
  for (unsigned k : taken) {
    const Item &it = items[k];
    if (it.decision == Decision::Recompute) {
      std::optional<Cone> cone = p.cones.coneOf(it.index);
      if (!cone)
        continue;
      takeSaved(p, s, it.index, Decision::Recompute, cone->seconds, &*cone, why);
    } else {
      takeSaved(p, s, it.index, Decision::Offload, p.offloadSeconds(s, it.index), nullptr, why);
    }
  }
  return greedy(p, s, aimBytes); // what the rounding or the chains left
}
