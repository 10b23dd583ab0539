//===- Prefetch.cpp - Prefetch placement from a target cost model ---------===//
//
// Part of offload. See Prefetch.h.
//
//===----------------------------------------------------------------------===//

#include "offload/Dialect/Offload/Transforms/Prefetch.h"
#include "offload/Dialect/Offload/Analysis/MemoryPlan.h"

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

LogicalResult mlir::offload::placePrefetches(func::FuncOp fn,
                                             MutableArrayRef<PrefetchRequest> requests,
                                             const TargetModel &target) {
  if (requests.empty())
    return success();
  Block &body = fn.getBody().front();
  // Only the peak and the live bytes per point: no arena packing.
  FailureOr<MemoryPlan> mp = computeMemoryPlan(fn, /*placeBuffers=*/false);
  if (failed(mp))
    return failure();

  // Live device bytes at each op of `fn`'s block. The memory plan may
  // describe a copy with recompute regions inlined: a region's op then
  // stands for the points of its inlined ops (their maximum).
  llvm::DenseMap<Operation *, int64_t> live;
  size_t point = 0;
  for (Operation &op : body) {
    size_t n = 1;
    if (mp->function != fn)
      if (auto r = dyn_cast<RecomputeOp>(op))
        n = r.getBody().front().getOperations().size() - 1;
    int64_t m = 0;
    for (size_t k = 0; k < n && point + k < mp->liveDeviceBytes.size(); ++k)
      m = std::max(m, mp->liveDeviceBytes[point + k]);
    live[&op] = m;
    point += n;
  }
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
    Operation *floor = r->earliest;
    for (Value v : copy->getOperands())
      if (Operation *def = v.getDefiningOp())
        if (Operation *top = body.findAncestorOpInBlock(*def))
          if (!floor || position.lookup(floor) < position.lookup(top))
            floor = top;
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
    int64_t distance = 0;
    for (Operation *o = copy->getNextNode(); o && o != r->use; o = o->getNextNode())
      if (isComputeForDistance(o))
        ++distance;
    copy.setPrefetchDistanceAttr(IntegerAttr::get(IntegerType::get(fn.getContext(), 64),
                                                  distance));
  }
  return success();
}
