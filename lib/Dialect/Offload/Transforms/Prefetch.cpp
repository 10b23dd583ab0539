//===- Prefetch.cpp - Prefetch placement from a target cost model ---------===//
//
// Part of offload. See Prefetch.h.
//
//===----------------------------------------------------------------------===//

#include "offload/Dialect/Offload/Transforms/Prefetch.h"
#include "offload/Dialect/Offload/Analysis/MemoryPlan.h"
#include "offload/Dialect/Offload/Analysis/Timeline.h"

#include "llvm/ADT/SetVector.h"

#include <algorithm>

using namespace mlir;
using namespace mlir::offload;

bool mlir::offload::isComputeForDistance(Operation *op) {
  return isa<CostOpInterface>(op) && !isa<ReshapeOp>(op);
}

Operation *mlir::offload::advanceComputeOps(Operation *from, unsigned n,
                                            Operation *limit) {
  Operation *op = from;
  while (n > 0 && op->getNextNode() && op->getNextNode() != limit) {
    op = op->getNextNode();
    if (isComputeForDistance(op))
      --n;
  }
  return op->getNextNode() ? op->getNextNode() : limit;
}

Operation *mlir::offload::retreatComputeOps(Operation *to, unsigned n,
                                            Operation *limit) {
  Operation *op = to;
  while (n > 0 && op->getPrevNode() && op->getPrevNode() != limit) {
    op = op->getPrevNode();
    if (isComputeForDistance(op))
      --n;
  }
  return op;
}

LogicalResult mlir::offload::checkMemoryPassOptions(Operation *anchor, StringRef passName,
                                                    bool namesPolicy, StringRef names,
                                                    int64_t minBytes,
                                                    int64_t prefetchDistance) {
  if (namesPolicy && names.empty())
    return mlir::emitError(anchor->getLoc())
           << passName << ": policy=names needs names=GLOB (e.g. names=fc*); use "
           << "policy=all for everything";
  if (minBytes < 0)
    return mlir::emitError(anchor->getLoc())
           << passName << ": min-bytes must be >= 0, got " << minBytes;
  if (prefetchDistance < -1)
    return mlir::emitError(anchor->getLoc())
           << passName << ": prefetch-distance must be -1 (placed from the cost model) "
           << "or >= 0 compute ops, got " << prefetchDistance;
  return success();
}

LogicalResult mlir::offload::targetModelFromOptions(Operation *anchor, StringRef passName,
                                                    StringRef target, double linkBandwidth,
                                                    double deviceFlops, double deviceBandwidth,
                                                    bool ratesGiven, TargetModel &out) {
  std::string error;
  if (!target.empty()) {
    FailureOr<TargetSpec> spec = resolveTarget(target, error);
    if (failed(spec))
      return mlir::emitError(anchor->getLoc()) << passName << ": " << error;
    out = TargetModel::fromSpec(*spec);
    return success();
  }
  if (!ratesGiven) {
    FailureOr<std::optional<TargetSpec>> recorded = moduleTarget(anchor, error);
    if (failed(recorded))
      return mlir::emitError(anchor->getLoc()) << passName << ": " << error;
    if (*recorded) {
      out = TargetModel::fromSpec(**recorded);
      return success();
    }
  }
  if (!(linkBandwidth > 0) || !(deviceFlops > 0) || !(deviceBandwidth > 0))
    return mlir::emitError(anchor->getLoc())
           << passName << ": link-bandwidth, device-flops and device-bandwidth must be > 0";
  out = TargetModel();
  out.linkBytesPerSecond = out.deviceToHostBytesPerSecond = linkBandwidth;
  out.flopsPerSecond = deviceFlops;
  out.memoryBytesPerSecond = deviceBandwidth;
  return success();
}

int64_t mlir::offload::latestCoveringPoint(llvm::function_ref<double(int64_t)> startAt,
                                           int64_t lo, int64_t hi, double deadline,
                                           double seconds, double linkFree) {
  auto covers = [&](int64_t p) { return std::max(startAt(p), linkFree) + seconds <= deadline; };
  // Start times grow along the block, so the points that cover the copy
  // are a prefix of [lo, hi]: bisect for its end.
  while (lo < hi) {
    int64_t mid = lo + (hi - lo + 1) / 2;
    if (covers(mid))
      lo = mid;
    else
      hi = mid - 1;
  }
  return lo;
}

/// Sets `copy`'s prefetch_distance to the compute ops between it and `use`.
static void setPrefetchDistance(ToDeviceOp copy, Operation *use) {
  int64_t distance = 0;
  for (Operation *o = copy->getNextNode(); o && o != use; o = o->getNextNode())
    distance += isComputeForDistance(o);
  copy.setPrefetchDistanceAttr(IntegerAttr::get(IntegerType::get(copy.getContext(), 64), distance));
}

/// The op a copy in `body` may not rise above: the latest of `floor` and
/// its operands' definitions (their ancestors in `body`), by `before`.
static Operation *copyFloor(Block &body, ToDeviceOp copy, Operation *floor,
                            llvm::function_ref<bool(Operation *, Operation *)> before) {
  for (Value v : copy->getOperands())
    if (Operation *def = v.getDefiningOp())
      if (Operation *top = body.findAncestorOpInBlock(*def))
        if (!floor || before(floor, top))
          floor = top;
  return floor;
}

/// Live device bytes at each op of `fn`'s block, from its memory plan `mp`.
/// The memory plan may run the recompute regions op by op (an inlined copy,
/// or the regions read in place: MemoryPlan::regionsExpanded): a region's
/// op then stands for the points of its ops (their maximum).
static llvm::DenseMap<Operation *, int64_t> liveBytesByOp(func::FuncOp fn,
                                                          const MemoryPlan &mp) {
  llvm::DenseMap<Operation *, int64_t> live;
  size_t point = 0;
  for (Operation &op : fn.getBody().front()) {
    size_t n = 1;
    if (mp.regionsExpanded())
      if (auto r = dyn_cast<RecomputeOp>(op))
        n = r.getBody().front().getOperations().size() - 1;
    int64_t m = 0;
    for (size_t k = 0; k < n && point + k < mp.liveDeviceBytes.size(); ++k)
      m = std::max(m, mp.liveDeviceBytes[point + k]);
    live[&op] = m;
    point += n;
  }
  return live;
}

LogicalResult mlir::offload::placePrefetches(func::FuncOp fn,
                                             MutableArrayRef<PrefetchRequest> requests,
                                             const TargetModel &target) {
  if (requests.empty())
    return success();
  Block &body = fn.getBody().front();
  // Only the peak and the live bytes per point: no arena packing.
  FailureOr<MemoryPlan> mp = computeMemoryPlanInPlace(fn, /*placeBuffers=*/false);
  if (failed(mp))
    return failure();

  llvm::DenseMap<Operation *, int64_t> live = liveBytesByOp(fn, *mp);
  int64_t peak = mp->peakDeviceBytes;

  // Estimated start time of each op, compute stream only, and its position
  // before any copy moves (moves invalidate the block's op order, and
  // recomputing it per comparison would be quadratic).
  llvm::DenseMap<Operation *, double> start;
  llvm::DenseMap<Operation *, int64_t> position;
  std::vector<double> startAt; // by position
  double t = 0;
  for (Operation &op : body) {
    start[&op] = t;
    startAt.push_back(t);
    t += target.opSeconds(&op);
    position[&op] = int64_t(position.size());
  }

  SmallVector<PrefetchRequest *> order;
  for (PrefetchRequest &r : requests)
    order.push_back(&r);
  llvm::stable_sort(order, [&](PrefetchRequest *a, PrefetchRequest *b) {
    return start[a->use] < start[b->use] ||
           (start[a->use] == start[b->use] && position[a->use] < position[b->use]);
  });

  double streamFree = 0; // when the host-to-device stream is next idle
  // Copies run in issue order on the one host-to-device stream: a copy
  // needed later never moves above one needed earlier, which would queue
  // the earlier one behind it.
  Operation *lastPlaced = nullptr;
  for (PrefetchRequest *r : order) {
    ToDeviceOp copy = r->copy;
    int64_t bytes = mlir::offload::detail::tensorBytes(copy.getResult().getType());
    double duration = target.copySeconds(bytes);
    // The copy may not rise above `earliest` or its operands' definitions.
    Operation *floor = copyFloor(body, copy, r->earliest, [&](Operation *a, Operation *b) {
      return position.lookup(a) < position.lookup(b);
    });
    // The rule (latestCoveringPoint, which the planner's prediction also
    // calls): the latest point from which the copy, queued behind the
    // copies placed before it, finishes before the use. The ops between
    // the copy and that point are the block's original ones (a copy placed
    // earlier is never passed), so positions index them.
    int64_t lowest = floor ? position.lookup(floor) + 1 : 0;
    int64_t covering = latestCoveringPoint([&](int64_t p) { return startAt[size_t(p)]; },
                                           lowest, position.lookup(copy), start[r->use],
                                           duration, streamFree);
    // Up to there, unless the peak or the previous copy stops it first.
    Operation *pos = copy; // the copy goes right before `pos`
    while (position.lookup(pos) > covering) {
      Operation *prev = pos->getPrevNode();
      if (!prev || prev == floor || prev == lastPlaced)
        break;
      if (live[prev] + bytes > peak)
        break; // would raise the peak
      pos = prev;
    }
    if (pos != copy) {
      // The buffer is now also live over [pos, old position).
      for (Operation *o = pos; o && o != copy; o = o->getNextNode())
        live[o] += bytes;
      copy->moveBefore(pos);
    }
    lastPlaced = copy;
    streamFree = std::max(start[pos], streamFree) + duration;
    setPrefetchDistance(copy, r->use);
  }
  return success();
}

namespace {
/// A placed prefetch as tunePrefetches sees it: the copy, the op it must
/// stay above (its first reader, the wait on its token) and the op it must
/// stay below (its operands' definitions, the phase marker before it).
struct PlacedPrefetch {
  ToDeviceOp copy;
  Operation *wait = nullptr;
  Operation *floor = nullptr;
  int64_t bytes = 0;
};
} // namespace

/// The async host-to-device copies of `body` that a host pass placed (they
/// carry `prefetch_distance`) and whose first reader is a wait on their token.
static SmallVector<PlacedPrefetch> placedPrefetches(Block &body) {
  SmallVector<PlacedPrefetch> out;
  Operation *phase = nullptr;
  for (Operation &op : body) {
    if (isa<PhaseOp>(op)) {
      phase = &op;
      continue;
    }
    auto copy = dyn_cast<ToDeviceOp>(op);
    if (!copy || !copy.getAsyncToken() || !copy.getPrefetchDistanceAttr())
      continue;
    Operation *first = nullptr;
    for (Value v : copy->getResults())
      for (Operation *user : v.getUsers())
        if (Operation *top = body.findAncestorOpInBlock(*user))
          if (!first || top->isBeforeInBlock(first))
            first = top;
    auto wait = dyn_cast_or_null<WaitOp>(first);
    if (!wait || !llvm::is_contained(wait->getOperands(), copy.getAsyncToken()))
      continue;
    Operation *floor = copyFloor(body, copy, phase, [](Operation *a, Operation *b) {
      return a->isBeforeInBlock(b);
    });
    out.push_back({copy, wait, floor,
                   mlir::offload::detail::tensorBytes(copy.getResult().getType())});
  }
  return out;
}

namespace {
/// One run of tunePrefetches: the step's replay, its live bytes per op, the
/// moves kept so far.
class PrefetchTuner {
public:
  PrefetchTuner(func::FuncOp fn, const TargetModel &target)
      : fn(fn), target(target), replay(fn, target, cache),
        best(replay.timeline().stepSeconds) {}

  /// Reads the live bytes per op; fails when the memory plan cannot be
  /// computed.
  LogicalResult start() {
    FailureOr<MemoryPlan> mp = computeMemoryPlanInPlace(fn, /*placeBuffers=*/false);
    if (failed(mp))
      return failure();
    live = liveBytesByOp(fn, *mp);
    peak = mp->peakDeviceBytes;
    prefetches = placedPrefetches(fn.getBody().front());
    return success();
  }

  /// One pass over the copies worth trying, within `workBudget` ops
  /// replayed in all; whether a move was kept.
  bool sweep(int64_t workBudget) {
    bool improved = false;
    for (size_t index : copiesToTry()) {
      if (replay.opsReplayed() >= workBudget)
        break;
      improved |= tryMoves(prefetches[index]);
    }
    return improved;
  }

  /// Keeps the longest run of the first moves after which `stillFits()`
  /// (each move shortened the step, so every prefix is an improvement):
  /// the packing of a buffer that starts earlier can grow the arena
  /// without raising the peak. Bisected, so the arena is checked
  /// O(log moves) times. Returns the moves kept.
  size_t keepFitting(llvm::function_ref<bool()> stillFits) {
    applied = moves.size();
    if (moves.empty() || stillFits())
      return applied;
    size_t lo = 0, hi = moves.size() - 1;
    while (lo < hi) {
      size_t mid = lo + (hi - lo + 1) / 2;
      applyFirst(mid);
      if (stillFits())
        lo = mid;
      else
        hi = mid - 1;
    }
    applyFirst(lo);
    // The caller's figures are of the last state it checked: check this one.
    if (lo > 0 && !stillFits())
      applyFirst(0);
    best = simulateTimeline(fn, target, &cache).stepSeconds;
    return applied;
  }

  /// Sets each copy's prefetch_distance to the compute ops before its wait.
  void setDistances() {
    for (PlacedPrefetch &p : prefetches)
      setPrefetchDistance(p.copy, p.wait);
  }

  const Timeline &before() const { return replay.timeline(); }
  double bestSeconds() const { return best; }

private:
  /// Positions are the replay's record of the block's order (every trial
  /// move is undone, so it holds; Operation::isBeforeInBlock would
  /// renumber the block after each).
  int64_t pos(Operation *op) const { return replay.positionOf(op); }

  /// The copies worth trying, as indices into `prefetches`: each one whose
  /// wait held compute, and the copies issued shortly before it (up to
  /// kQueueAhead, in block order) that are waited for after it, which
  /// occupy the link ahead of it; the largest stall that brought each in
  /// first (then block order), so that the work budget goes where compute
  /// waits longest.
  SmallVector<size_t> copiesToTry() {
    constexpr size_t kQueueAhead = 8;
    llvm::sort(prefetches, [&](const PlacedPrefetch &a, const PlacedPrefetch &b) {
      return pos(a.copy) < pos(b.copy);
    });
    llvm::DenseMap<size_t, double> stallOf;
    auto bring = [&](size_t j, double stall) {
      double &s = stallOf[j];
      s = std::max(s, stall);
    };
    for (size_t i = 0; i < prefetches.size(); ++i) {
      auto it = cache.stallAt.find(prefetches[i].wait);
      if (it == cache.stallAt.end())
        continue;
      for (size_t j = i > kQueueAhead ? i - kQueueAhead : 0; j < i; ++j)
        if (pos(prefetches[i].wait) < pos(prefetches[j].wait))
          bring(j, it->second);
      bring(i, it->second);
    }
    SmallVector<std::pair<double, size_t>> order;
    for (auto [index, stall] : stallOf)
      order.push_back({stall, index});
    llvm::sort(order, [](auto a, auto b) {
      return a.first > b.first || (a.first == b.first && a.second < b.second);
    });
    SmallVector<size_t> indices;
    for (auto [stall, index] : order)
      indices.push_back(index);
    return indices;
  }

  /// Tries `p`'s copy right before its wait and 1, 2, 4, ... 32 compute ops
  /// above and below its place; moves it to the point with the shortest
  /// simulated step when that is strictly shorter. Whether it moved.
  bool tryMoves(PlacedPrefetch &p) {
    constexpr unsigned kSteps[] = {1, 2, 4, 8, 16, 32};
    Operation *copy = p.copy;
    Operation *home = copy->getNextNode();
    SmallVector<Operation *, 16> points{p.wait};
    for (unsigned k : kSteps) {
      points.push_back(retreatComputeOps(copy, k, p.floor));
      points.push_back(advanceComputeOps(copy, k, p.wait));
    }
    Operation *bestPoint = nullptr;
    for (Operation *point : points) {
      if (!point || point == home || point == copy ||
          (p.floor && pos(point) <= pos(p.floor)) || pos(p.wait) < pos(point))
        continue;
      if (pos(point) < pos(copy)) {
        // Above: the buffer is live from `point` on; never over the peak.
        bool fits = true;
        for (Operation *o = point; o != copy && fits; o = o->getNextNode())
          fits = live.lookup(o) + p.bytes <= peak;
        if (!fits)
          continue;
      }
      double seconds = replay.stepSecondsIfMoved(copy, point);
      // Strictly shorter (relative 1e-9: not a rounding difference).
      if (seconds < best * (1 - 1e-9)) {
        best = seconds;
        bestPoint = point;
      }
    }
    if (!bestPoint)
      return false;
    if (pos(bestPoint) < pos(copy)) {
      for (Operation *o = bestPoint; o != copy; o = o->getNextNode())
        live[o] += p.bytes;
    } else {
      for (Operation *o = home; o != bestPoint; o = o->getNextNode())
        live[o] -= p.bytes;
    }
    moves.push_back({copy, home, bestPoint});
    copy->moveBefore(bestPoint);
    replay.record();
    return true;
  }

  /// Leaves the first `k` moves applied (undoing or redoing in order).
  void applyFirst(size_t k) {
    for (; applied > k; --applied)
      moves[applied - 1].op->moveBefore(moves[applied - 1].home);
    for (; applied < k; ++applied)
      moves[applied].op->moveBefore(moves[applied].dest);
  }

  func::FuncOp fn;
  const TargetModel &target;
  TimelineCache cache;
  TimelineReplay replay;
  double best;
  llvm::DenseMap<Operation *, int64_t> live;
  int64_t peak = 0;
  SmallVector<PlacedPrefetch> prefetches;
  /// Each kept move: `op` went from right before `home` to right before
  /// `dest`; the first `applied` are in the IR.
  struct Move {
    Operation *op, *home, *dest;
  };
  SmallVector<Move> moves;
  size_t applied = 0;
};
} // namespace

FailureOr<PrefetchTuning>
mlir::offload::tunePrefetches(func::FuncOp fn, const TargetModel &target,
                              llvm::function_ref<bool()> stillFits, unsigned maxSweeps,
                              double workPerOp) {
  PrefetchTuner tuner(fn, target);
  PrefetchTuning out;
  out.beforeSeconds = out.afterSeconds = tuner.before().stepSeconds;
  if (!(tuner.before().stallSeconds > 0))
    return out; // every copy is hidden already
  if (failed(tuner.start()))
    return failure();
  int64_t workBudget = int64_t(workPerOp * double(fn.getBody().front().getOperations().size()));
  for (unsigned sweep = 0; sweep < maxSweeps && tuner.sweep(workBudget); ++sweep) {
  }
  size_t kept = tuner.keepFitting(stillFits);
  if (kept == 0)
    return out;
  tuner.setDistances();
  out.afterSeconds = tuner.bestSeconds();
  out.moved = unsigned(kept);
  return out;
}
