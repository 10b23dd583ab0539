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

Timeline mlir::offload::simulateTimeline(func::FuncOp step, const TargetModel &target) {
  Timeline tl;
  double compute = 0, toDeviceFree = 0, toHostFree = 0, commFree = 0;
  // When the copy (or the join of copies) a token stands for is done.
  llvm::DenseMap<Value, double> tokenDone;
  auto depsDone = [&](ValueRange deps) {
    double t = 0;
    for (Value d : deps)
      t = std::max(t, tokenDone.lookup(d));
    return t;
  };
  for (Operation &op : step.getBody().front()) {
    if (auto copy = dyn_cast<ToDeviceOp>(op)) {
      double seconds =
          target.copySeconds(mlir::offload::detail::tensorBytes(copy.getResult().getType()));
      double start = std::max({compute, toDeviceFree, depsDone(copy.getAsyncDependencies())});
      toDeviceFree = start + seconds;
      tl.hostToDeviceSeconds += seconds;
      if (Value tok = copy.getAsyncToken())
        tokenDone[tok] = toDeviceFree;
      else {
        tl.stallSeconds += toDeviceFree - compute;
        compute = toDeviceFree;
      }
    } else if (auto copy = dyn_cast<ToHostOp>(op)) {
      double seconds =
          target.copyToHostSeconds(mlir::offload::detail::tensorBytes(copy.getValue().getType()));
      double start = std::max({compute, toHostFree, depsDone(copy.getAsyncDependencies())});
      toHostFree = start + seconds;
      tl.deviceToHostSeconds += seconds;
      if (Value tok = copy.getAsyncToken())
        tokenDone[tok] = toHostFree;
      else {
        tl.stallSeconds += toHostFree - compute;
        compute = toHostFree;
      }
    } else if (auto reduce = dyn_cast<AllReduceOp>(op)) {
      // The communication stream, after compute made the bucket.
      int64_t bytes = 0;
      for (Value g : reduce.getValues())
        bytes += mlir::offload::detail::tensorBytes(g.getType());
      double seconds = target.allReduceSeconds(bytes);
      commFree = std::max(compute, commFree) + seconds;
      tl.collectiveSeconds += seconds;
      tokenDone[reduce.getAsyncToken()] = commFree;
    } else if (auto wait = dyn_cast<WaitOp>(op)) {
      double done = depsDone(wait.getAsyncDependencies());
      if (Value joined = wait.getAsyncToken()) {
        tokenDone[joined] = done;
      } else if (done > compute) {
        tl.stallSeconds += done - compute;
        compute = done;
      }
    } else {
      double seconds = target.opSeconds(&op);
      compute += seconds;
      tl.computeSeconds += seconds;
    }
  }
  tl.stepSeconds = std::max({compute, toDeviceFree, toHostFree, commFree});
  return tl;
}
