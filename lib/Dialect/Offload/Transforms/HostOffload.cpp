//===- HostOffload.cpp - Saved values to the host and back ----------------===//
//
// Part of offload. Implements --offload-host-offload. See Passes.td.
//
//===----------------------------------------------------------------------===//

#include "offload/Dialect/Offload/Transforms/PassReport.h"
#include "offload/Dialect/Offload/Transforms/Passes.h"
#include "offload/Dialect/Offload/Transforms/Prefetch.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/GlobPattern.h"
#include "llvm/Support/raw_ostream.h"

#define DEBUG_TYPE "offload-host-offload"

namespace mlir {
namespace offload {
#define GEN_PASS_DEF_HOSTOFFLOAD
#include "offload/Dialect/Offload/Transforms/Passes.h.inc"
} // namespace offload
} // namespace mlir

using namespace mlir;
using namespace mlir::offload;

static Operation *advance(Operation *from, unsigned n, Operation *limit) {
  return advanceComputeOps(from, n, limit);
}
static Operation *retreat(Operation *to, unsigned n, Operation *limit) {
  return retreatComputeOps(to, n, limit);
}

namespace {
struct HostOffloadPass : public offload::impl::HostOffloadBase<HostOffloadPass> {
  using HostOffloadBase::HostOffloadBase;
  void runOnOperation() override {
    if (failed(out.run(report, "offload-host-offload", getOperation().getLoc(), [&] { runPass(); })))
      signalPassFailure();
  }
  /// The report (report=, PassReport.h).
  PassReport out;
  void runPass() {
    // policy= is checked by the option parser (cl::values, Passes.td).
    if (failed(resolveTargetModel("offload-host-offload")))
      return signalPassFailure();
    if (failed(checkMemoryPassOptions(getOperation(), "offload-host-offload",
                                      policy == HostOffloadPolicy::Names,
                                      names, minBytes, prefetchDistance)))
      return signalPassFailure();
    auto glob = llvm::GlobPattern::create(names);
    if (!glob) {
      mlir::emitError(getOperation().getLoc()) << "offload-host-offload: bad glob '" << names << "'";
      return signalPassFailure();
    }
    getOperation().walk([&](func::FuncOp fn) {
      if (fn->hasAttr(OffloadDialect::kStepAttrName) && failed(rewrite(fn, *glob)))
        signalPassFailure();
    });
  }
  LogicalResult rewrite(func::FuncOp fn, const llvm::GlobPattern &glob);
  /// The cost model of the options (`target=`, or the three numbers).
  LogicalResult resolveTargetModel(StringRef passName) {
    bool ratesGiven =
        linkBandwidth.hasValue() || deviceFlops.hasValue() || deviceBandwidth.hasValue();
    return targetModelFromOptions(getOperation(), passName, target, linkBandwidth,
                                  deviceFlops, deviceBandwidth, ratesGiven, targetModel);
  }
  TargetModel targetModel;
};
} // namespace

LogicalResult HostOffloadPass::rewrite(func::FuncOp fn, const llvm::GlobPattern &glob) {
  Block &body = fn.getBody().front();
  PhaseOp firstBackward;
  for (Operation &op : body)
    if (auto m = dyn_cast<PhaseOp>(op);
        m && m.getPhase() != Phase::forward && !firstBackward)
      firstBackward = m;
  if (!firstBackward)
    return fn.emitOpError("offload-host-offload: the step has no backward phase; "
                          "run --offload-autodiff first");

  SmallVector<SaveOp> chosen;
  for (Operation &op : body) {
    auto s = dyn_cast<SaveOp>(op);
    if (!s || s.getResult().use_empty())
      continue;
    int64_t bytes = mlir::offload::detail::tensorBytes(s.getValue().getType());
    Operation *producer = s.getValue().getDefiningOp();
    bool pick = false;
    if (policy == HostOffloadPolicy::Size)
      pick = bytes >= minBytes;
    else if (policy == HostOffloadPolicy::Ops)
      pick = producer && llvm::is_contained(ops, producer->getName().stripDialect().str());
    else if (policy == HostOffloadPolicy::Names)
      pick = producer && glob.match(getLayerName(producer->getLoc()));
    else if (policy == HostOffloadPolicy::Marked)
      pick = s->hasAttr(kHostOffloadAttrName);
    else
      pick = true;
    if (pick)
      chosen.push_back(s);
  }

  // Positions of the step's ops before anything is inserted: comparing them
  // stays O(1) while the rewrite invalidates the block's op order.
  llvm::DenseMap<Operation *, int64_t> position;
  for (Operation &op : body)
    position[&op] = int64_t(position.size());
  auto before = [&](Operation *x, Operation *y) { return position.lookup(x) < position.lookup(y); };

  int64_t bytesOffloaded = 0;
  OpBuilder b(fn.getContext());
  SmallVector<PrefetchRequest> requests;
  for (SaveOp s : chosen) {
    Value v = s.getValue();
    // The backward of the save's micro-batch (gradient accumulation: each
    // micro-batch's saved values go to the host in its forward and come
    // back in its backward); the step's backward for one micro-batch.
    PhaseOp backwardStart = getBackwardMarkerAfter(s);
    if (!backwardStart)
      return s.emitOpError("offload-host-offload: no backward phase follows this save");
    // After the last forward use of the value (uses before backward).
    Operation *lastForwardUse = s;
    for (Operation *u : v.getUsers()) {
      Operation *top = body.findAncestorOpInBlock(*u);
      if (top && before(top, backwardStart) && before(lastForwardUse, top))
        lastForwardUse = top;
    }
    b.setInsertionPointAfter(lastForwardUse);
    auto toHost = ToHostOp::create(b, s.getLoc(), HostType::get(b.getContext(),
                                       cast<RankedTensorType>(v.getType())),
                                   TokenType::get(b.getContext()), ValueRange{}, v);
    // Release the device copy a few compute ops later (end of forward at
    // the latest).
    b.setInsertionPoint(advance(toHost, waitDistance, backwardStart));
    WaitOp::create(b, s.getLoc(), Type(), ValueRange{toHost.getAsyncToken()});

    // First backward use of any restore of this saved value.
    Operation *firstUse = nullptr;
    for (Operation *r : s.getResult().getUsers())
      if (!firstUse || before(r, firstUse))
        firstUse = r;
    // An explicit distance places the copy now; the cost model places all
    // of them together below, starting from right before the use.
    b.setInsertionPoint(prefetchDistance >= 0
                            ? retreat(firstUse, unsigned(prefetchDistance), backwardStart)
                            : firstUse);
    auto toDevice = ToDeviceOp::create(
        b, s.getLoc(), v.getType(), TokenType::get(b.getContext()),
        ValueRange{toHost.getAsyncToken()}, toHost.getResult(),
        prefetchDistance >= 0 ? b.getI64IntegerAttr(prefetchDistance) : IntegerAttr());
    b.setInsertionPoint(firstUse);
    auto wait = WaitOp::create(b, s.getLoc(), Type(), ValueRange{toDevice.getAsyncToken()});
    // The restores are erased below: the wait stands for the use.
    requests.push_back({toDevice, wait, backwardStart});
    for (Operation *r : llvm::make_early_inc_range(s.getResult().getUsers())) {
      cast<RestoreOp>(r).getResult().replaceAllUsesWith(toDevice.getResult());
      r->erase();
    }
    s.erase();
    bytesOffloaded += mlir::offload::detail::tensorBytes(v.getType());
  }
  if (prefetchDistance < 0 && failed(placePrefetches(fn, requests, targetModel)))
    return failure();
  if (out)
    *out.stream() << llvm::format("host offload @%s (policy %s): %zu saved values, %lld "
                                 "bytes to the host and back\n",
                                 fn.getName().str().c_str(), stringifyOption(policy).str().c_str(),
                                 chosen.size(), (long long)bytesOffloaded);
  return success();
}
