//===- MemoryPlan.cpp - Liveness, arena offsets and peak of a step --------===//
//
// Part of offload. See MemoryPlan.h for the model.
//
//===----------------------------------------------------------------------===//

#include "offload/Dialect/Offload/Analysis/MemoryPlan.h"
#include "offload/Dialect/Offload/IR/OffloadOps.h"

#include "llvm/ADT/EquivalenceClasses.h"
#include <algorithm>
#include <functional>
#include <map>
#include <queue>
#include <random>
#include <set>

using namespace mlir;
using namespace mlir::offload;

/// Optimizer-update results written in place over their state operand:
/// result -> operand (see updateInPlace).
using InPlaceMap = llvm::DenseMap<Value, Value>;

namespace {
/// How the plan reads the step's recompute regions. Inlined (a flat copy):
/// every value is itself. In place: a region's block argument stands for
/// the region's input and a region's result for the value its yield
/// returns, as inlineRecomputeRegions would substitute them; uses through
/// a region's input or yield are the uses of the region's argument or
/// result.
struct RegionView {
  Block *body = nullptr;
  bool inPlace = false;

  RecomputeOp regionOf(Operation *op) const {
    auto r = dyn_cast_or_null<RecomputeOp>(op);
    return r && r->getBlock() == body ? r : RecomputeOp();
  }
  /// The value `v` stands for in the inlined step.
  Value canon(Value v) const {
    if (!inPlace)
      return v;
    while (true) {
      if (auto a = dyn_cast<BlockArgument>(v)) {
        if (RecomputeOp r = regionOf(a.getOwner()->getParentOp())) {
          v = r.getInputs()[a.getArgNumber()];
          continue;
        }
        return v;
      }
      if (RecomputeOp r = regionOf(v.getDefiningOp())) {
        v = r.getBody().front().getTerminator()->getOperand(cast<OpResult>(v).getResultNumber());
        continue;
      }
      return v;
    }
  }
  /// Calls `f` on each op that reads `v` in the inlined step (in place: a
  /// region's input is read by the readers of its block argument, a value
  /// yielded by the readers of the region's result).
  void forEachReader(Value v, llvm::function_ref<void(Operation *)> f) const {
    for (OpOperand &use : v.getUses()) {
      Operation *user = use.getOwner();
      if (inPlace) {
        if (RecomputeOp r = regionOf(user)) {
          forEachReader(r.getBody().front().getArgument(use.getOperandNumber()), f);
          continue;
        }
        if (isa<YieldOp>(user))
          if (RecomputeOp r = regionOf(user->getParentOp())) {
            forEachReader(r->getResult(use.getOperandNumber()), f);
            continue;
          }
      }
      f(user);
    }
  }
};
} // namespace

/// The value whose buffer `v` shares (views, saved-value handles, and
/// in-place optimizer updates).
static Value aliasRoot(Value v, const InPlaceMap &inPlace, const RegionView &view) {
  while (true) {
    v = view.canon(v);
    auto ip = inPlace.find(v);
    if (ip != inPlace.end()) {
      v = ip->second;
      continue;
    }
    Operation *def = v.getDefiningOp();
    if (!def)
      return v;
    if (auto r = dyn_cast<ReshapeOp>(def)) {
      v = r.getInput();
      continue;
    }
    if (auto s = dyn_cast<SaveOp>(def)) {
      v = s.getValue();
      continue;
    }
    if (auto r = dyn_cast<RestoreOp>(def)) {
      v = r.getSaved();
      continue;
    }
    return v;
  }
}

/// In-place optimizer updates: `offload.sgd_update` / `offload.adamw_update`
/// (with or without `skip_if`: a skipped one leaves the bytes as they are)
/// write each new value over the parameter or state argument it replaces
/// when nothing reads that argument afterwards. The runtime keeps the
/// committed values in its host-side parameter store and uploads them at the
/// start of every step, so overwriting the device copy cannot lose a value
/// even when a step fails (docs/runtime.md, atomic steps).
static InPlaceMap updateInPlace(Block &body, llvm::DenseMap<Operation *, int64_t> &point,
                                const RegionView &view) {
  InPlaceMap map;
  llvm::DenseSet<Value> returned;
  for (Value v : body.getTerminator()->getOperands())
    returned.insert(view.canon(v));
  llvm::DenseSet<Value> written;
  // The last program point that reads `v` (an op of a region read in place
  // has a point of its own; an op nested deeper counts at its ancestor).
  auto lastUse = [&](Value v) {
    int64_t last = -1;
    view.forEachReader(v, [&](Operation *u) {
      auto it = point.find(u);
      if (it != point.end()) {
        last = std::max(last, it->second);
        return;
      }
      if (Operation *top = body.findAncestorOpInBlock(*u))
        last = std::max(last, point.lookup(top));
    });
    return last;
  };
  auto consider = [&](Operation *op, Value result, Value operand) {
    operand = view.canon(operand);
    if (!isa<BlockArgument>(operand) || result.getType() != operand.getType())
      return;
    // The update must be the operand's last reader, and the operand must not
    // be returned (it would then be needed after the step).
    if (lastUse(operand) > point[op])
      return;
    if (returned.contains(operand))
      return;
    // One writer per argument.
    if (!written.insert(operand).second)
      return;
    map[result] = operand;
  };
  // Gradient accumulation's sums (`offload.accumulate`, MicroBatches.cpp):
  // acc_i = acc_{i-1} + g_i writes over acc_{i-1} when the add is its only
  // reader and acc_{i-1} is a buffer of its own (an op's result, not a view,
  // or an earlier sum written in place), as `acc += g` does in PyTorch.
  auto readers = [&](Value v) {
    int n = 0;
    view.forEachReader(v, [&](Operation *) { ++n; });
    return n;
  };
  auto accumulateInPlace = [&](AddOp add) {
    Value acc = view.canon(add.getLhs());
    Operation *def = acc.getDefiningOp();
    if (!def || readers(acc) != 1 || acc.getType() != add.getResult().getType() ||
        view.canon(add.getRhs()) == acc || returned.contains(acc))
      return;
    bool chained = map.count(acc);
    if (!chained && isa<ReshapeOp, SaveOp, RestoreOp>(def))
      return;
    map[add.getResult()] = acc;
  };
  for (Operation &op : body) {
    // The regions hold forward ops only: no update or accumulation.
    if (auto add = dyn_cast<AddOp>(op); add && add->hasAttr(OffloadDialect::kAccumulateAttrName))
      accumulateInPlace(add);
    if (auto g = dyn_cast<AllGatherOp>(op)) {
      // ZeRO-1: the gathered parameters over the ones they replace.
      for (auto [r, p] : llvm::zip(g.getGathered(), g.getParams()))
        consider(g, r, p);
    } else if (auto s = dyn_cast<SgdUpdateOp>(op)) {
      consider(s, s.getNewParam(), s.getParam());
      consider(s, s.getNewMomentumBuffer(), s.getMomentumBuffer());
    } else if (auto a = dyn_cast<AdamWUpdateOp>(op)) {
      consider(a, a.getNewParam(), a.getParam());
      consider(a, a.getNewExpAvg(), a.getExpAvg());
      consider(a, a.getNewExpAvgSq(), a.getExpAvgSq());
    }
  }
  return map;
}

static bool isTensorLike(Type t) {
  return isa<RankedTensorType, SavedType, HostType>(t);
}

static int64_t paddedBytes(int64_t bytes) {
  return (bytes + kArenaAlignment - 1) / kArenaAlignment * kArenaAlignment;
}

/// Cap on the work of greedy-by-size below: the number of (buffer, placed
/// overlapping buffer) pairs it visits. About 0.05 s on this project's
/// 2-core reference machine; a step past it (tens of thousands of buffers
/// alive together, e.g. a 100k-op chain) keeps the linear-scan offsets.
constexpr int64_t kGreedyWorkCap = 4'000'000;

/// Offsets by greedy by size: by decreasing size, each buffer at the
/// lowest-waste gap (best fit) among the already placed buffers whose live
/// intervals overlap its own, else above them (the "greedy by size" heuristic
/// of TensorFlow Lite's arena planner, Pisarchyk & Lee 2020). The placed
/// buffers that overlap an interval are found from the buffers sorted by
/// interval start (each leaf holds the interval end of a placed buffer, each
/// block of leaves their maximum), so a query costs O(n / 64 + 64 b) for b
/// blocks holding an overlapping buffer. Writes offsets into `offsets`
/// (indexed like `buffers`) and returns the arena bytes, or -1 once the
/// pairs visited use up `workLeft` (which it decrements).
static int64_t greedyBySize(ArrayRef<PlannedBuffer> buffers, ArrayRef<unsigned> members,
                            ArrayRef<unsigned> order, SmallVectorImpl<int64_t> &offsets,
                            int64_t &workLeft) {
  // Leaves: buffers by interval start.
  SmallVector<unsigned> byBegin(members);
  llvm::stable_sort(byBegin, [&](unsigned a, unsigned b) {
    return buffers[a].begin < buffers[b].begin;
  });
  SmallVector<int64_t> begins;
  SmallVector<size_t> leafOf(buffers.size(), 0);
  for (auto [k, i] : llvm::enumerate(byBegin)) {
    begins.push_back(buffers[i].begin);
    leafOf[i] = k;
  }
  // Each leaf holds the interval end of its placed buffer (-1 until placed),
  // and each block of kLeafBlock leaves the largest of them: a query scans
  // the blocks' maxima and only the leaves of blocks that hold an
  // overlapping buffer. Sequential scans of two arrays beat a segment
  // tree's O(k log n) pointer-chasing walk here (the 128-layer encoder's
  // checks: 0.13 -> 0.09 s a greedy run; the same buffers found).
  constexpr size_t kLeafBlock = 64;
  SmallVector<int64_t> leafEnd(byBegin.size(), -1);
  SmallVector<int64_t> blockEnd((byBegin.size() + kLeafBlock - 1) / kLeafBlock, -1);
  auto setLeaf = [&](size_t k, int64_t end) {
    leafEnd[k] = end;
    blockEnd[k / kLeafBlock] = std::max(blockEnd[k / kLeafBlock], end);
  };
  // Placed buffers among leaves [0, limit) whose end is >= `from`, in
  // leaf order.
  SmallVector<unsigned> found;
  auto collect = [&](size_t limit, int64_t from) {
    for (size_t blk = 0, blocks = (limit + kLeafBlock - 1) / kLeafBlock; blk < blocks; ++blk) {
      if (blockEnd[blk] < from)
        continue;
      for (size_t k = blk * kLeafBlock, hi = std::min(limit, k + kLeafBlock); k < hi; ++k)
        if (leafEnd[k] >= from)
          found.push_back(byBegin[k]);
    }
  };

  // The placed buffers by (offset, end offset), with their intervals: where
  // most placed buffers overlap the next one in time (long-lived saved
  // values), walking them all in offset order is cheaper than collecting
  // the overlapping ones from the tree and sorting them, and gives the same
  // sequence (the overlapping ones, in (offset, end) order). Which of the
  // two runs is chosen from the last placement's overlap; the offsets are
  // the same either way. The buffers placed since the last walk wait in
  // `pending` and are merged in before the next walk (inserting each into
  // the sorted vector cost a fifth of a greedy run on the 128-layer encoder,
  // which walks for one buffer in ten).
  struct Placed {
    int64_t lo, hi, begin, end;
  };
  auto byLoHi = [](const Placed &x, const Placed &y) {
    return x.lo != y.lo ? x.lo < y.lo : x.hi < y.hi;
  };
  SmallVector<Placed> byOffset, pending;
  size_t lastFound = 0;

  int64_t arenaBytes = 0;
  SmallVector<std::pair<int64_t, int64_t>> busy;
  for (unsigned i : order) {
    const PlannedBuffer &b = buffers[i];
    int64_t need = paddedBytes(b.bytes);
    int64_t bestOffset = -1, bestGap = INT64_MAX, cursor = 0;
    // Best fit: the smallest gap that holds the buffer, else the end.
    auto visit = [&](int64_t lo, int64_t hi) {
      if (lo - cursor >= need && lo - cursor < bestGap) {
        bestGap = lo - cursor;
        bestOffset = cursor;
      }
      cursor = std::max(cursor, hi);
    };
    // The walk costs a cheap test per placed buffer, the sort about
    // log2(found) comparisons of pairs per found one: while the placed
    // buffers stay in the cache (16,384 of them, 512 KiB), walking wins
    // down to a sixteenth overlapping (EfficientNet-B0's step planned at
    // 40% of its arena: 0.97 s -> 0.61 s of CPU with 16 instead of 4; the
    // 96-layer encoder 0.80 -> 0.63 s); beyond, down to a quarter (the
    // 100k-op chain took 9.9 s -> 12.8 s with 16). The offsets are the
    // same either way.
    size_t placedCount = byOffset.size() + pending.size();
    size_t walkRatio = placedCount <= 16384 ? 16 : 4;
    if (walkRatio * lastFound >= placedCount) {
      if (!pending.empty()) {
        llvm::sort(pending, byLoHi);
        size_t sorted = byOffset.size();
        byOffset.append(pending.begin(), pending.end());
        std::inplace_merge(byOffset.begin(), byOffset.begin() + sorted, byOffset.end(), byLoHi);
        pending.clear();
      }
      size_t overlapping = 0;
      for (const Placed &q : byOffset)
        overlapping += q.begin <= b.end && q.end >= b.begin;
      workLeft -= int64_t(overlapping) + 1;
      if (workLeft < 0)
        return -1;
      for (const Placed &q : byOffset)
        if (q.begin <= b.end && q.end >= b.begin)
          visit(q.lo, q.hi);
      lastFound = overlapping;
    } else {
      found.clear();
      size_t limit = std::upper_bound(begins.begin(), begins.end(), b.end) - begins.begin();
      collect(limit, b.begin);
      workLeft -= int64_t(found.size()) + 1;
      if (workLeft < 0)
        return -1;
      busy.clear();
      for (unsigned j : found)
        busy.push_back({offsets[j], offsets[j] + paddedBytes(buffers[j].bytes)});
      // By offset alone: of two with one offset, the second's gap is
      // negative (the first's end is above it), so their order is moot.
      llvm::sort(busy, [](auto x, auto y) { return x.first < y.first; });
      for (auto [lo, hi] : busy)
        visit(lo, hi);
      lastFound = found.size();
    }
    offsets[i] = bestOffset >= 0 ? bestOffset : cursor;
    arenaBytes = std::max(arenaBytes, offsets[i] + b.bytes);
    setLeaf(leafOf[i], b.end);
    pending.push_back({offsets[i], offsets[i] + need, b.begin, b.end});
  }
  return arenaBytes;
}

/// Offsets by a linear scan over program points, as a best-fit allocator
/// with coalescing free lists would place them at run time: buffers in order
/// of interval start (larger first at one point); before a point, buffers
/// whose interval ended are freed and their gap merged with free neighbours;
/// each buffer takes the smallest free gap that holds it, else the top of the
/// arena. O(n log n) for n buffers, whatever their overlap. Writes offsets
/// into `offsets` and returns the arena bytes.
static int64_t linearScan(ArrayRef<PlannedBuffer> buffers, ArrayRef<unsigned> members,
                          SmallVectorImpl<int64_t> &offsets) {
  SmallVector<unsigned> order(members);
  llvm::stable_sort(order, [&](unsigned a, unsigned b) {
    if (buffers[a].begin != buffers[b].begin)
      return buffers[a].begin < buffers[b].begin;
    return buffers[a].bytes > buffers[b].bytes;
  });
  std::map<int64_t, int64_t> freeByOffset;          // offset -> bytes
  std::set<std::pair<int64_t, int64_t>> freeBySize; // (bytes, offset)
  // Allocated buffers by interval end, earliest first.
  std::priority_queue<std::pair<int64_t, unsigned>, std::vector<std::pair<int64_t, unsigned>>,
                      std::greater<>>
      active;
  int64_t frontier = 0, arenaBytes = 0;
  auto release = [&](int64_t offset, int64_t bytes) {
    auto next = freeByOffset.lower_bound(offset);
    if (next != freeByOffset.end() && next->first == offset + bytes) {
      bytes += next->second;
      freeBySize.erase({next->second, next->first});
      next = freeByOffset.erase(next);
    }
    if (next != freeByOffset.begin()) {
      auto prev = std::prev(next);
      if (prev->first + prev->second == offset) {
        offset = prev->first;
        bytes += prev->second;
        freeBySize.erase({prev->second, prev->first});
        freeByOffset.erase(prev);
      }
    }
    if (offset + bytes == frontier) {
      frontier = offset;
      return;
    }
    freeByOffset[offset] = bytes;
    freeBySize.insert({bytes, offset});
  };
  for (unsigned i : order) {
    const PlannedBuffer &b = buffers[i];
    while (!active.empty() && active.top().first < b.begin) {
      unsigned j = active.top().second;
      active.pop();
      release(offsets[j], paddedBytes(buffers[j].bytes));
    }
    int64_t need = paddedBytes(b.bytes);
    auto fit = freeBySize.lower_bound({need, INT64_MIN});
    if (fit != freeBySize.end()) {
      auto [gapBytes, gapOffset] = *fit;
      freeBySize.erase(fit);
      freeByOffset.erase(gapOffset);
      offsets[i] = gapOffset;
      if (gapBytes > need) {
        freeByOffset[gapOffset + need] = gapBytes - need;
        freeBySize.insert({gapBytes - need, gapOffset + need});
      }
    } else {
      offsets[i] = frontier;
      frontier += need;
    }
    arenaBytes = std::max(arenaBytes, offsets[i] + b.bytes);
    active.push({b.end, i});
  }
  return arenaBytes;
}

/// Offsets in the arena of `space`, multiples of kArenaAlignment (cudaMalloc's
/// 256-byte alignment, which also suits host SIMD). Buffers alive at every
/// point (parameters, optimizer state, constants) are stacked at the bottom,
/// largest first: any placement can be compacted into that one without
/// growing (the others always lie between them). The rest go above, placed
/// both ways below and the smaller arena kept (greedy by size on a tie);
/// greedy by size costs O(n k log k) for k buffers alive together and is
/// skipped past kGreedyWorkCap, where the O(n log n) linear scan decides.
static void assignArenaOffsets(MutableArrayRef<PlannedBuffer> buffers, MemorySpace space,
                               int64_t &arenaBytes) {
  SmallVector<unsigned> members, wholeStep;
  int64_t lastPoint = 0;
  for (unsigned i = 0; i < buffers.size(); ++i)
    if (buffers[i].space == space && buffers[i].bytes > 0)
      lastPoint = std::max(lastPoint, buffers[i].end);
  for (unsigned i = 0; i < buffers.size(); ++i) {
    if (buffers[i].space != space || buffers[i].bytes <= 0)
      continue;
    if (buffers[i].begin == 0 && buffers[i].end == lastPoint)
      wholeStep.push_back(i);
    else
      members.push_back(i);
  }
  llvm::stable_sort(wholeStep, [&](unsigned a, unsigned b) {
    return buffers[a].bytes > buffers[b].bytes;
  });
  int64_t base = 0;
  arenaBytes = 0;
  for (unsigned i : wholeStep) {
    buffers[i].offset = base;
    arenaBytes = base + buffers[i].bytes;
    base += paddedBytes(buffers[i].bytes);
  }
  if (members.empty())
    return;
  SmallVector<int64_t> best(buffers.size(), 0), trial(buffers.size(), 0);
  int64_t bestBytes = linearScan(buffers, members, best);
  // No placement beats the most padded bytes live at one point.
  int64_t lowerBound = 0;
  {
    SmallVector<std::pair<int64_t, int64_t>> events; // (point, +bytes at begin / -bytes after end)
    for (unsigned i : members) {
      events.push_back({buffers[i].begin, paddedBytes(buffers[i].bytes)});
      events.push_back({buffers[i].end + 1, -paddedBytes(buffers[i].bytes)});
    }
    llvm::sort(events, [](auto a, auto b) {
      return a.first != b.first ? a.first < b.first : a.second < b.second;
    });
    int64_t live = 0;
    for (auto [point, delta] : events)
      lowerBound = std::max(lowerBound, live += delta);
  }
  // Greedy by size first (it wins ties with the linear scan); then, while
  // the arena is above the lower bound, greedy in perturbed orders: each
  // buffer's size scaled by a factor in [0.7, 1.3] and by up to 2x its share
  // of the step's points (long-lived buffers first), from a fixed seed so
  // plans are reproducible. Greedy by size alone leaves gaps where long-lived
  // small buffers meet short large ones: on the Transformer example's plan
  // at 46% of its arena it packed 444,164 bytes over a 395,264-byte lower
  // bound, which the perturbed orders reach to within 0.1%. At most
  // kPackTrials orders, stopping after kPackStale in a row that do not
  // improve, in at most kPackWorkPerGreedy times the first greedy's pairs
  // (and kPackWorkCap), so packing stays a few greedy runs.
  constexpr int kPackTrials = 32, kPackStale = 8;
  constexpr size_t kPackMaxBuffers = 4096;
  constexpr int64_t kPackWorkCap = 1'000'000, kPackWorkPerGreedy = 8;
  int64_t workLeft = kGreedyWorkCap;
  int64_t span = 1;
  for (unsigned i : members)
    span = std::max(span, buffers[i].end + 1);
  std::mt19937_64 rng(0x6f66666c6f6164); // fixed: "offload"
  auto uniform = [&]() { return double(rng() >> 11) * 0x1.0p-53; };
  SmallVector<unsigned> order(members);
  SmallVector<double> key(buffers.size(), 0.0);
  int64_t firstWork = 0;
  // Perturbed orders only on steps of up to kPackMaxBuffers buffers: on a
  // 10k-op chain they cost more planning time than the 1 s target allows.
  int trials = members.size() <= kPackMaxBuffers ? kPackTrials : 0;
  // Each greedy run visits every pair of buffers whose intervals overlap,
  // once (when the later of the two is placed), plus one step per buffer,
  // whatever the order: counted here in O(n log n), so that a run the work
  // left cannot finish is not started (it would be cut off and thrown
  // away; the 128-layer encoder's unplanned step spent a fifth of its
  // planning time so).
  int64_t runWork = 0;
  {
    SmallVector<int64_t> begins;
    for (unsigned i : members)
      begins.push_back(buffers[i].begin);
    llvm::sort(begins);
    int64_t n = int64_t(members.size()), disjoint = 0;
    for (unsigned i : members)
      disjoint += begins.end() - std::upper_bound(begins.begin(), begins.end(), buffers[i].end);
    runWork = n * (n - 1) / 2 - disjoint + n;
  }
  for (int t = 0, stale = 0; t <= trials && bestBytes > lowerBound && stale < kPackStale; ++t) {
    for (unsigned i : members) {
      double bytes = double(buffers[i].bytes);
      key[i] = t == 0 ? bytes
                      : bytes * (0.7 + 0.6 * uniform()) *
                            (1.0 + uniform() * double(buffers[i].end - buffers[i].begin + 1) /
                                       double(span));
    }
    llvm::stable_sort(order, [&](unsigned a, unsigned b) { return key[a] > key[b]; });
    if (t == 1) // the perturbed orders share a smaller cap
      workLeft = std::min({workLeft, kPackWorkCap, kPackWorkPerGreedy * firstWork});
    if (runWork > workLeft)
      break; // past the work cap
    int64_t before = workLeft;
    int64_t bytes = greedyBySize(buffers, members, order, trial, workLeft);
    if (t == 0)
      firstWork = before - workLeft;
    if (bytes < 0)
      break; // past the work cap
    if (t == 0 ? bytes <= bestBytes : bytes < bestBytes) {
      bestBytes = bytes;
      best.swap(trial);
      stale = 0;
    } else if (t > 0) {
      ++stale;
    }
  }
  for (unsigned i : members)
    buffers[i].offset = base + best[i];
  arenaBytes = std::max(arenaBytes, base + bestBytes);
}

static FailureOr<MemoryPlan> planOf(func::FuncOp step, bool placeBuffers, bool regionsInPlace) {
  MemoryPlan plan;
  plan.function = step;
  bool anyRegion = llvm::any_of(step.getBody().front(),
                                [](Operation &op) { return isa<RecomputeOp>(op); });
  if (anyRegion && !regionsInPlace) {
    plan.inlinedCopy = step.clone();
    plan.function = *plan.inlinedCopy;
    inlineRecomputeRegions(plan.function.getBody().front());
  }
  plan.regionsInPlace = anyRegion && regionsInPlace;
  func::FuncOp fn = plan.function;
  Block &body = fn.getBody().front();
  RegionView view{&body, plan.regionsInPlace};
  for (Operation &op : body) {
    if (RecomputeOp r = view.inPlace ? view.regionOf(&op) : RecomputeOp()) {
      for (Operation &inner : r.getBody().front().without_terminator())
        plan.schedule.push_back(&inner);
      continue;
    }
    plan.schedule.push_back(&op);
  }
  int64_t last = int64_t(plan.schedule.size()) - 1;
  llvm::DenseMap<Operation *, int64_t> point;
  for (auto [i, op] : llvm::enumerate(plan.schedule))
    point[op] = i;
  InPlaceMap inPlace = updateInPlace(body, point, view);

  // Buffers by alias root.
  llvm::DenseMap<Value, unsigned> rootBuffer;
  auto bufferFor = [&](Value root) -> PlannedBuffer & {
    auto it = rootBuffer.find(root);
    if (it != rootBuffer.end())
      return plan.buffers[it->second];
    rootBuffer[root] = plan.buffers.size();
    plan.buffers.emplace_back();
    return plan.buffers.back();
  };

  auto addValue = [&](Value v, int64_t defPoint) -> LogicalResult {
    if (!isTensorLike(v.getType()))
      return success();
    Value root = aliasRoot(v, inPlace, view);
    PlannedBuffer &buf = bufferFor(root);
    unsigned idx = rootBuffer[root];
    buf.values.push_back(v);
    plan.bufferOf[v] = idx;
    if (root == v) {
      int64_t bytes = mlir::offload::detail::tensorBytes(v.getType());
      if (bytes < 0)
        return emitError(v.getLoc()) << "memory planning needs static shapes; "
                                     << v.getType() << " is dynamic";
      buf.bytes = bytes;
      buf.begin = buf.end = defPoint;
      buf.space = isa<HostType>(v.getType()) ? MemorySpace::Host : MemorySpace::Device;
    }
    return success();
  };

  for (BlockArgument arg : body.getArguments()) {
    if (failed(addValue(arg, 0)))
      return failure();
    if (isTensorLike(arg.getType())) {
      PlannedBuffer &b = plan.buffers[plan.bufferOf[arg]];
      b.persistent = true;
      b.begin = 0;
      b.end = last;
    }
  }
  for (Operation *op : plan.schedule)
    for (Value r : op->getResults())
      if (failed(addValue(r, point[op])))
        return failure();

  // Uses extend lifetimes; an op nested in a recompute region counts at its
  // region's op (its operands are block arguments, bound at that op).
  for (Operation *op : plan.schedule) {
    int64_t p = point[op];
    for (Value v : op->getOperands()) {
      auto it = plan.bufferOf.find(view.canon(v));
      if (it == plan.bufferOf.end())
        continue;
      PlannedBuffer &b = plan.buffers[it->second];
      b.end = std::max(b.end, p);
    }
  }
  // An async copy's source (and a reduction's operands) stays live until
  // the wait covering its token.
  llvm::DenseMap<Value, SmallVector<Value>> tokenSources;
  llvm::DenseMap<Value, SmallVector<Value>> joins;
  for (Operation *op : plan.schedule) {
    if (auto th = dyn_cast<ToHostOp>(op)) {
      if (Value t = th.getAsyncToken())
        tokenSources[t].push_back(view.canon(th.getValue()));
    } else if (auto td = dyn_cast<ToDeviceOp>(op)) {
      if (Value t = td.getAsyncToken())
        tokenSources[t].push_back(view.canon(td.getValue()));
    } else if (isa<AllReduceOp, ReduceScatterOp, AllGatherOp>(op)) {
      // The communication stream reads the bucket's gradients (ZeRO-1:
      // and parameters, or the updated shard) until then.
      for (Value operand : op->getOperands())
        if (Value g = view.canon(operand); plan.bufferOf.count(g))
          tokenSources[op->getResults().back()].push_back(g);
    } else if (auto w = dyn_cast<WaitOp>(op)) {
      if (Value j = w.getAsyncToken()) {
        joins[j] = llvm::to_vector(w.getAsyncDependencies());
        continue;
      }
      std::function<void(Value)> extend = [&](Value tok) {
        for (Value src : tokenSources.lookup(tok)) {
          PlannedBuffer &b = plan.buffers[plan.bufferOf[src]];
          b.end = std::max(b.end, point[op]);
        }
        for (Value t : joins.lookup(tok))
          extend(t);
      };
      for (Value tok : w.getAsyncDependencies())
        extend(tok);
    }
  }
  // Constants are uploaded with the plan: live for the whole step.
  for (Operation *op : plan.schedule)
    if (isa<ConstantOp>(op)) {
      PlannedBuffer &b = plan.buffers[plan.bufferOf[op->getResult(0)]];
      b.begin = 0;
      b.end = last;
      b.persistent = true;
    }
  // Returned values stay until the end.
  for (Value v : body.getTerminator()->getOperands()) {
    auto it = plan.bufferOf.find(view.canon(v));
    if (it == plan.bufferOf.end())
      continue;
    plan.buffers[it->second].end = last;
    plan.buffers[it->second].persistent = true;
  }

  // Live bytes per point (a difference array over the intervals), and the
  // peak.
  SmallVector<int64_t> delta(plan.schedule.size() + 1, 0);
  for (PlannedBuffer &b : plan.buffers)
    if (b.space == MemorySpace::Device) {
      delta[b.begin] += b.bytes;
      delta[b.end + 1] -= b.bytes;
    }
  plan.liveDeviceBytes.assign(plan.schedule.size(), 0);
  int64_t running = 0;
  for (size_t p = 0; p < plan.schedule.size(); ++p) {
    running += delta[p];
    plan.liveDeviceBytes[p] = running;
    if (running > plan.peakDeviceBytes) {
      plan.peakDeviceBytes = running;
      plan.peakPoint = int64_t(p);
    }
  }

  if (!placeBuffers)
    return plan;
  assignArenaOffsets(plan.buffers, MemorySpace::Device, plan.deviceArenaBytes);
  // The host arena is not what a budget limits, and its buffers (host
  // parameters, optimizer state, offloaded saved values) mostly live from
  // forward to backward, where best fit would cost O(n^2): they are packed
  // one after another.
  plan.hostArenaBytes = 0;
  for (PlannedBuffer &b : plan.buffers)
    if (b.space == MemorySpace::Host && b.bytes > 0) {
      b.offset = plan.hostArenaBytes;
      plan.hostArenaBytes += paddedBytes(b.bytes);
    }
  return plan;
}

FailureOr<MemoryPlan> mlir::offload::computeMemoryPlan(func::FuncOp step, bool placeBuffers) {
  return planOf(step, placeBuffers, /*regionsInPlace=*/false);
}

FailureOr<MemoryPlan> mlir::offload::computeMemoryPlanInPlace(func::FuncOp step,
                                                              bool placeBuffers) {
  return planOf(step, placeBuffers, /*regionsInPlace=*/true);
}

FailureOr<const MemoryPlan *> MemoryPlanAnalysis::lookup(func::FuncOp fn) {
  auto it = plans.find(fn);
  if (it != plans.end())
    return static_cast<const MemoryPlan *>(it->second.get());
  FailureOr<MemoryPlan> plan = computeMemoryPlan(fn);
  if (failed(plan))
    return failure();
  auto owned = std::make_unique<MemoryPlan>(std::move(*plan));
  const MemoryPlan *result = owned.get();
  plans[fn] = std::move(owned);
  return result;
}

int64_t MemoryPlan::persistentDeviceBytes() const {
  int64_t bytes = 0;
  for (const PlannedBuffer &b : buffers)
    if (b.persistent && b.space == MemorySpace::Device)
      bytes += b.bytes;
  return bytes;
}

SmallVector<const PlannedBuffer *> MemoryPlan::temporariesAtPeak() const {
  SmallVector<const PlannedBuffer *> live;
  for (const PlannedBuffer &b : buffers)
    if (b.space == MemorySpace::Device && !b.persistent && b.begin <= peakPoint &&
        peakPoint <= b.end)
      live.push_back(&b);
  llvm::stable_sort(live, [](auto *x, auto *y) { return x->bytes > y->bytes; });
  return live;
}
