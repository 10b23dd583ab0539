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
// own against the decisions as they stand (its cone once, or its offload),
// bytes in units of (peak - aim) / kUnits rounded down and the demand rounded
// up, so that a cover in units frees at least the bytes asked for. The
// prices are additive only where the cones do not share ops; the search
// keeps the knapsack's plan only where it simulates faster than the greedy's
// (Search.cpp).
//
//===----------------------------------------------------------------------===//

#include "offload/Planner/Algorithms.h"

#include "llvm/ADT/STLExtras.h"

#include <algorithm>
#include <limits>

using namespace offload::planner;

namespace {
/// Units the demand is cut into (time and memory: candidates x kUnits).
constexpr int64_t kUnits = 1024;

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
  int64_t unit = std::max<int64_t>(1, (demand + kUnits - 1) / kUnits);
  int64_t need = (demand + unit - 1) / unit;
  llvm::SmallVector<Item, 0> items;
  for (auto [i, c] : llvm::enumerate(p.problem.saved)) {
    if (s.saved[i].decision != Decision::Keep || c.bytes < unit)
      continue;
    std::optional<Item> best;
    if (c.recomputable && c.lastForward < peakAt && peakAt < c.firstBackward)
      if (std::optional<Cone> cone = p.cones.coneOf(unsigned(i)))
        best = Item{unsigned(i), Decision::Recompute, cone->seconds, c.bytes / unit};
    if (c.offloadFreed.lo <= peakAt && peakAt <= c.offloadFreed.hi) {
      double seconds = p.offloadSeconds(s, unsigned(i));
      if (!best || seconds < best->seconds)
        best = Item{unsigned(i), Decision::Offload, seconds, c.bytes / unit};
    }
    if (best)
      items.push_back(*best);
  }
  if (items.empty())
    return greedy(p, s, aimBytes);
  // cost[k][u]: the least price of freeing at least u units with the first
  // k items (u capped at `need`); from[k][u]: the cover of the first k - 1
  // items item k - 1 was added to, or -1 (it was not taken).
  const double inf = std::numeric_limits<double>::infinity();
  size_t width = size_t(need) + 1;
  std::vector<double> cost((items.size() + 1) * width, inf);
  std::vector<int64_t> from((items.size() + 1) * width, -1);
  auto at = [&](size_t k, int64_t u) { return k * width + size_t(u); };
  cost[at(0, 0)] = 0;
  for (size_t k = 0; k < items.size(); ++k) {
    for (int64_t u = 0; u <= need; ++u)
      cost[at(k + 1, u)] = cost[at(k, u)];
    for (int64_t u = 0; u <= need; ++u) {
      if (cost[at(k, u)] == inf)
        continue;
      int64_t v = std::min(need, u + items[k].units);
      double with = cost[at(k, u)] + items[k].seconds;
      if (with < cost[at(k + 1, v)]) {
        cost[at(k + 1, v)] = with;
        from[at(k + 1, v)] = u;
      }
    }
  }
  if (cost[at(items.size(), need)] == inf)
    return greedy(p, s, aimBytes); // the items cannot cover it: the greedy's answer
  llvm::SmallVector<unsigned> taken;
  for (int64_t k = int64_t(items.size()), u = need; k > 0; --k)
    if (int64_t f = from[at(size_t(k), u)]; f >= 0) {
      taken.push_back(unsigned(k - 1));
      u = f;
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
