//===- Timeline.cpp - Step-time simulation over compute and copy streams --===//
//
// Part of offload. See Timeline.h.
//
//===----------------------------------------------------------------------===//

#include "offload/Dialect/Offload/Analysis/Timeline.h"
#include "offload/Dialect/Offload/IR/OffloadOps.h"

#include <algorithm>

using namespace mlir;
using namespace mlir::offload;

/// `op`'s seconds on `target` (a compute op's, or a copy's transfer),
/// through `cache` when given.
static double secondsOf(Operation *op, const TargetModel &target, TimelineCache *cache) {
  auto compute = [&] {
    if (auto copy = dyn_cast<ToDeviceOp>(op))
      return target.copySeconds(mlir::offload::detail::tensorBytes(copy.getResult().getType()));
    if (auto copy = dyn_cast<ToHostOp>(op))
      return target.copyToHostSeconds(
          mlir::offload::detail::tensorBytes(copy.getValue().getType()));
    if (auto reduce = dyn_cast<AllReduceOp>(op)) {
      int64_t bytes = 0;
      for (Value g : reduce.getValues())
        bytes += mlir::offload::detail::tensorBytes(g.getType());
      return target.allReduceSeconds(bytes);
    }
    // ZeRO-1's halves of a ring all-reduce: a reduce-scatter or an
    // all-gather of n bytes each moves (W-1)/W n bytes per link, half the
    // all-reduce's 2 (W-1)/W n. The all-reduce is costed at its large-W
    // bound (2 n / link, the runtime's W being unknown to a plain plan), so
    // each half is n / link here: ZeRO-1 moves what plain data parallel
    // moves, and the two compare at the same W-independent bound.
    if (auto rs = dyn_cast<ReduceScatterOp>(op)) {
      int64_t bytes = 0;
      for (Value g : rs.getGrads())
        bytes += mlir::offload::detail::tensorBytes(g.getType());
      return target.allReduceSeconds(bytes) * 0.5;
    }
    if (auto ag = dyn_cast<AllGatherOp>(op)) {
      int64_t bytes = 0;
      for (Value p : ag.getGathered())
        bytes += mlir::offload::detail::tensorBytes(p.getType());
      return target.allReduceSeconds(bytes) * 0.5;
    }
    return target.opSeconds(op);
  };
  if (!cache)
    return compute();
  auto [it, inserted] = cache->seconds.try_emplace(op, 0.0);
  if (inserted)
    it->second = compute();
  return it->second;
}

/// The simulation's one rule: advances `clock` over `op`. `tokenDone(t)` is
/// when the copy (or join of copies) token `t` stands for is done (0 for a
/// token not seen), `setToken(t, s)` records it. Adds to `tl`'s busy and
/// stall times and returns the stall at `op` (seconds compute waited).
template <typename TokenDone, typename SetToken>
static double advance(Operation &op, TimelineClock &clock, const TargetModel &target,
                      TimelineCache *cache, TokenDone tokenDone, SetToken setToken,
                      Timeline &tl) {
  auto depsDone = [&](ValueRange deps) {
    double t = 0;
    for (Value d : deps)
      t = std::max(t, tokenDone(d));
    return t;
  };
  // A copy starts when compute has issued it, its stream is free and the
  // copies it depends on are done; a synchronous one holds compute.
  auto copyOn = [&](double &streamFree, double &busy, ValueRange deps, Value token) {
    double seconds = secondsOf(&op, target, cache);
    double start = std::max({clock.compute, streamFree, depsDone(deps)});
    streamFree = start + seconds;
    busy += seconds;
    if (token) {
      setToken(token, streamFree);
      return 0.0;
    }
    double stall = streamFree - clock.compute;
    clock.compute = streamFree;
    return stall;
  };
  double stall = 0;
  if (auto copy = dyn_cast<ToDeviceOp>(op)) {
    stall = copyOn(clock.toDevice, tl.hostToDeviceSeconds, copy.getAsyncDependencies(),
                   copy.getAsyncToken());
  } else if (auto copy = dyn_cast<ToHostOp>(op)) {
    stall = copyOn(clock.toHost, tl.deviceToHostSeconds, copy.getAsyncDependencies(),
                   copy.getAsyncToken());
  } else if (isa<AllReduceOp, ReduceScatterOp, AllGatherOp>(op)) {
    // The communication stream, after compute made the bucket.
    double seconds = secondsOf(&op, target, cache);
    clock.comm = std::max(clock.compute, clock.comm) + seconds;
    tl.collectiveSeconds += seconds;
    setToken(op.getResults().back(), clock.comm);
  } else if (auto wait = dyn_cast<WaitOp>(op)) {
    double done = depsDone(wait.getAsyncDependencies());
    if (Value joined = wait.getAsyncToken()) {
      setToken(joined, done);
    } else if (done > clock.compute) {
      stall = done - clock.compute;
      clock.compute = done;
    }
  } else {
    double seconds = secondsOf(&op, target, cache);
    clock.compute += seconds;
    tl.computeSeconds += seconds;
  }
  tl.stallSeconds += stall;
  return stall;
}

/// The whole step in program order: `seen(op, clock)` before each op, each
/// copy's completion into `tokenDone`, and (with `cache`) the stall at each
/// wait into `cache->stallAt`.
template <typename Seen>
static Timeline runStep(func::FuncOp step, const TargetModel &target, TimelineCache *cache,
                        llvm::DenseMap<Value, double> &tokenDone, Seen seen) {
  Timeline tl;
  if (cache)
    cache->stallAt.clear();
  TimelineClock clock;
  for (Operation &op : step.getBody().front()) {
    seen(op, clock);
    double stall = advance(
        op, clock, target, cache, [&](Value t) { return tokenDone.lookup(t); },
        [&](Value t, double s) { tokenDone[t] = s; }, tl);
    if (cache && stall > 0 && isa<WaitOp>(op))
      cache->stallAt[&op] = stall;
  }
  tl.stepSeconds = clock.end();
  return tl;
}

Timeline mlir::offload::simulateTimeline(func::FuncOp step, const TargetModel &target,
                                         TimelineCache *cache) {
  llvm::DenseMap<Value, double> tokenDone;
  return runStep(step, target, cache, tokenDone, [](Operation &, const TimelineClock &) {});
}

TimelineReplay::TimelineReplay(func::FuncOp step, const TargetModel &target,
                               TimelineCache &cache)
    : step(step), target(target), cache(cache) {
  record();
}

void TimelineReplay::record() {
  clockAt.clear();
  tokenDone.clear();
  position.clear();
  lastRead.clear();
  recorded = runStep(step, target, &cache, tokenDone, [&](Operation &op, const TimelineClock &clock) {
    int64_t here = int64_t(clockAt.size());
    position[&op] = here;
    for (Value v : op.getOperands())
      if (isa<TokenType>(v.getType()))
        lastRead[v] = here;
    clockAt.push_back(clock);
  });
}

double TimelineReplay::stepSecondsIfMoved(Operation *op, Operation *point) {
  Operation *oldNext = op->getNextNode();
  bool up = position.lookup(point) < position.lookup(op);
  op->moveBefore(point);
  // The order changed only between the op's new and old places. The replay
  // starts at the first op of that span with the clock recorded before the
  // op that used to be there, and runs in the new order.
  Operation *start = up ? op : oldNext;
  Operation *end = up ? oldNext : point; // the first op in recorded order again
  TimelineClock clock = clockAt[size_t(position.lookup(up ? point : op))];
  llvm::DenseMap<Value, double> overlay;
  // Copies done earlier than recorded (that may still be waited for).
  llvm::SmallDenseSet<Value, 8> earlier;
  auto done = [&](Value t) {
    auto it = overlay.find(t);
    return it != overlay.end() ? it->second : tokenDone.lookup(t);
  };
  auto set = [&](Value t, double s) {
    overlay[t] = s;
    if (s < tokenDone.lookup(t))
      earlier.insert(t);
    else
      earlier.erase(t);
  };
  Timeline scratch;
  bool inSpan = true;
  double seconds = -1;
  for (Operation *o = start; o; o = o->getNextNode()) {
    if (o == end)
      inSpan = false;
    // Past the span (where the recorded order holds again): every clock at
    // or after the recorded one and no copy done earlier than recorded
    // that is still to be read means the rest cannot end sooner than
    // recorded (the simulation is monotone: each time is a max or a sum of
    // earlier ones), so it is not run.
    if (!inSpan) {
      int64_t here = position.lookup(o);
      const TimelineClock &was = clockAt[size_t(here)];
      if (clock.compute >= was.compute && clock.toDevice >= was.toDevice &&
          clock.toHost >= was.toHost && clock.comm >= was.comm) {
        SmallVector<Value, 8> read;
        for (Value t : earlier)
          if (lastRead.lookup(t) < here)
            read.push_back(t);
        for (Value t : read)
          earlier.erase(t);
        if (earlier.empty()) {
          seconds = recorded.stepSeconds;
          break;
        }
      }
    }
    advance(*o, clock, target, &cache, done, set, scratch);
    ++replayed;
  }
  if (seconds < 0)
    seconds = clock.end();
  op->moveBefore(oldNext);
  return seconds;
}
