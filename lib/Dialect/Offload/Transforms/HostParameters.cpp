//===- HostParameters.cpp - Parameters and optimizer state on the host ----===//
//
// Part of offload. Implements --offload-host-parameters. See Passes.td.
//
//===----------------------------------------------------------------------===//

#include "offload/Dialect/Offload/Transforms/PassReport.h"
#include "offload/Dialect/Offload/Transforms/Passes.h"
#include "offload/Dialect/Offload/Transforms/Prefetch.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/BitVector.h"
#include "llvm/ADT/SmallPtrSet.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/GlobPattern.h"
#include "llvm/Support/raw_ostream.h"

#define DEBUG_TYPE "offload-host-parameters"

namespace mlir {
namespace offload {
#define GEN_PASS_DEF_HOSTPARAMETERS
#include "offload/Dialect/Offload/Transforms/Passes.h.inc"
} // namespace offload
} // namespace mlir

using namespace mlir;
using namespace mlir::offload;

/// The op after which a value defined by `def` may be read by compute or a
/// copy: `def`'s ancestor in `body`, or, for a reduction across ranks
/// (offload.all_reduce, --offload-data-parallel), the wait on its token.
static Operation *readyPoint(Operation *def, Block &body) {
  Operation *top = body.findAncestorOpInBlock(*def);
  if (!isa<AllReduceOp, ReduceScatterOp, AllGatherOp>(top))
    return top;
  Operation *ready = nullptr;
  for (Operation *user : top->getResults().back().getUsers())
    if (isa<WaitOp>(user) && user->getBlock() == &body &&
        (!ready || user->isBeforeInBlock(ready)))
      ready = user;
  return ready ? ready : top;
}

static bool isUpdate(Operation *op) { return isa<SgdUpdateOp, AdamWUpdateOp>(op); }

namespace {
struct HostParametersPass
    : public offload::impl::HostParametersBase<HostParametersPass> {
  using HostParametersBase::HostParametersBase;

  void runOnOperation() override {
    if (failed(out.run(report, "offload-host-parameters", getOperation().getLoc(), [&] { runPass(); })))
      signalPassFailure();
  }
  /// The report (report=, PassReport.h).
  PassReport out;
  void runPass() {
    ModuleOp m = getOperation();
    // policy= and refetch= are checked by the option parser (cl::values,
    // Passes.td).
    if (failed(checkMemoryPassOptions(m, "offload-host-parameters", policy == HostParametersPolicy::Names, names,
                                      minBytes, prefetchDistance)))
      return signalPassFailure();
    auto glob = llvm::GlobPattern::create(names);
    if (!glob) {
      mlir::emitError(m.getLoc()) << "offload-host-parameters: bad glob '" << names << "'";
      return signalPassFailure();
    }
    if (failed(resolveTargetModel("offload-host-parameters")))
      return signalPassFailure();
    m.walk([&](func::FuncOp fn) {
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

LogicalResult HostParametersPass::rewrite(func::FuncOp fn, const llvm::GlobPattern &glob) {
  MLIRContext *ctx = fn.getContext();
  Block &body = fn.getBody().front();
  Operation *ret = body.getTerminator();
  PhaseOp forwardStart, backwardStart;
  for (Operation &op : body)
    if (auto mk = dyn_cast<PhaseOp>(op)) {
      if (mk.getPhase() == Phase::forward && !forwardStart)
        forwardStart = mk;
      else if (mk.getPhase() != Phase::forward && !backwardStart)
        backwardStart = mk;
    }
  if (!backwardStart)
    return fn.emitOpError("offload-host-parameters: the step has no backward phase; "
                          "run --offload-autodiff first");
  Operation *firstUpdate = nullptr;
  for (Operation &op : body)
    if (isUpdate(&op)) {
      firstUpdate = &op;
      break;
    }

  auto hostOf = [&](Type t) { return HostType::get(ctx, cast<RankedTensorType>(t)); };
  auto argAttr = [&](unsigned i, StringRef name) {
    auto a = fn.getArgAttrOfType<StringAttr>(i, name);
    return a ? a.getValue() : StringRef();
  };
  OpBuilder b(ctx);
  SmallVector<PrefetchRequest> requests;
  // Step counters and skip flags: one read only by this update moves to the
  // host; a shared one is copied to the host once.
  llvm::DenseMap<Value, Value> onHostOf;
  int moved = 0, refetched = 0, kept = 0;
  int64_t hostBytes = 0;

  // Sends a device gradient to the host right after it is computed and
  // frees the device copy `waitDistance` compute ops later (before `limit`).
  auto gradientToHost = [&](Value g, Operation *limit) -> Value {
    Operation *def = g.getDefiningOp();
    if (def)
      b.setInsertionPointAfter(readyPoint(def, body));
    else
      b.setInsertionPoint(limit);
    auto toHost = ToHostOp::create(b, g.getLoc(), hostOf(g.getType()), TokenType::get(ctx),
                                   ValueRange{}, g);
    b.setInsertionPoint(advanceComputeOps(toHost, waitDistance, limit));
    WaitOp::create(b, g.getLoc(), Type(), ValueRange{toHost.getAsyncToken()});
    return toHost.getResult();
  };

  llvm::DenseMap<Operation *, double> startTime;
  // Positions before anything is inserted (O(1) order comparisons while the
  // rewrite invalidates the block's op order).
  llvm::DenseMap<Operation *, int64_t> position;
  double now = 0;
  for (Operation &op : body) {
    startTime[&op] = now;
    now += targetModel.opSeconds(&op);
    position[&op] = int64_t(position.size());
  }
  auto before = [&](Operation *x, Operation *y) { return position.lookup(x) < position.lookup(y); };
  // Gradient accumulation: each micro-batch's forward and backward read the
  // parameter; it is fetched for each phase that reads it (the marker that
  // starts each op's phase).
  bool microBatched = getNumMicroBatches(fn) > 1;
  llvm::DenseMap<Operation *, Operation *> phaseStartOf;
  {
    Operation *start = forwardStart;
    for (Operation &op : body) {
      if (isa<PhaseOp>(op))
        start = &op;
      phaseStartOf[&op] = start;
    }
  }

  // The marks are read, then removed from every argument at once.
  llvm::BitVector markedArgs(fn.getNumArguments());
  SmallVector<unsigned> markedList;
  for (unsigned i = 0, e = fn.getNumArguments(); i < e; ++i)
    if (fn.getArgAttr(i, kHostParameterAttrName)) {
      markedArgs.set(i);
      markedList.push_back(i);
    }
  setArgAttrs(fn, markedList, kHostParameterAttrName, Attribute());

  for (BlockArgument arg : body.getArguments()) {
    unsigned i = arg.getArgNumber();
    if (getArgRole(fn, i) != Role::parameter ||
        !isa<RankedTensorType>(arg.getType()))
      continue;
    StringRef name = argAttr(i, OffloadDialect::kNameAttrName);
    int64_t bytes = mlir::offload::detail::tensorBytes(arg.getType());
    bool marked = markedArgs.test(i);
    if ((policy == HostParametersPolicy::Size && bytes < minBytes) ||
        (policy == HostParametersPolicy::Names && !glob.match(name)) ||
        (policy == HostParametersPolicy::Marked && !marked))
      continue;

    // Uses: forward, backward, and the parameter operand of its update.
    SmallVector<Operation *> fwd, bwd;
    Operation *update = nullptr;
    bool returned = false;
    for (OpOperand &use : arg.getUses()) {
      Operation *top = body.findAncestorOpInBlock(*use.getOwner());
      if (top == ret) {
        returned = true;
      } else if (isUpdate(top) && use.getOperandNumber() == 0) {
        update = top;
      } else {
        auto &list = before(top, backwardStart) ? fwd : bwd;
        if (!llvm::is_contained(list, top))
          list.push_back(top);
      }
    }
    if (returned) {
      mlir::emitWarning(arg.getLoc()) << "offload-host-parameters: '" << name
                                      << "' is returned unchanged; kept on the device";
      continue;
    }
    // The update's optimizer state must be arguments read only by it.
    if (update) {
      bool ok = true;
      for (Value v : getUpdateOperands(update).state) {
        auto s = dyn_cast<BlockArgument>(v);
        ok &= s && s.hasOneUse();
      }
      if (!ok) {
        update->emitWarning() << "offload-host-parameters: the optimizer state of '"
                              << name << "' is not a step argument of its own; kept on "
                                         "the device";
        continue;
      }
    }
    llvm::sort(fwd, before);
    llvm::sort(bwd, before);

    // Keep the forward copy through to backward, or fetch it again?
    bool keep = false;
    if (!fwd.empty() && !bwd.empty()) {
      if (refetch == RefetchMode::Never) {
        keep = true;
      } else if (refetch == RefetchMode::Auto) {
        // Compute seconds from the end of the last forward use to the first
        // backward use (start times of the step's ops before this pass
        // inserted anything; copies and waits cost no compute).
        double gap = startTime.lookup(bwd.front()) - startTime.lookup(fwd.back()) -
                     targetModel.opSeconds(fwd.back());
        keep = keepParameterThrough(gap, targetModel.copySeconds(bytes));
      }
    }
    SmallVector<SmallVector<Operation *>> segments;
    if (microBatched) {
      SmallVector<Operation *> all(fwd);
      all.append(bwd.begin(), bwd.end());
      llvm::sort(all, before);
      for (Operation *op : all) {
        if (segments.empty() || phaseStartOf.lookup(segments.back().front()) != phaseStartOf.lookup(op))
          segments.emplace_back();
        segments.back().push_back(op);
      }
      ++refetched;
    } else if (keep) {
      SmallVector<Operation *> all(fwd);
      all.append(bwd.begin(), bwd.end());
      segments.push_back(all);
    } else {
      if (!fwd.empty())
        segments.push_back(fwd);
      if (!bwd.empty())
        segments.push_back(bwd);
    }
    if (!microBatched && !fwd.empty() && !bwd.empty())
      (keep ? kept : refetched)++;

    auto tensorType = cast<RankedTensorType>(arg.getType());
    arg.setType(hostOf(tensorType));
    for (auto &seg : segments) {
      Operation *first = seg.front();
      bool backwardOnly = !before(first, backwardStart);
      Operation *earliest = backwardOnly ? backwardStart.getOperation() : forwardStart.getOperation();
      if (microBatched && phaseStartOf.lookup(first))
        earliest = phaseStartOf.lookup(first);
      b.setInsertionPoint(prefetchDistance >= 0
                              ? retreatComputeOps(first, unsigned(prefetchDistance), earliest)
                              : first);
      auto copy = ToDeviceOp::create(
          b, arg.getLoc(), tensorType, TokenType::get(ctx), ValueRange{}, arg,
          prefetchDistance >= 0 ? b.getI64IntegerAttr(prefetchDistance) : IntegerAttr());
      b.setInsertionPoint(first);
      auto wait = WaitOp::create(b, arg.getLoc(), Type(), ValueRange{copy.getAsyncToken()});
      llvm::SmallPtrSet<Operation *, 8> members(seg.begin(), seg.end());
      arg.replaceUsesWithIf(copy.getResult(), [&](OpOperand &u) {
        return members.contains(body.findAncestorOpInBlock(*u.getOwner()));
      });
      requests.push_back({copy, wait, earliest});
    }

    // The gradient goes to the host; a returned one is returned from there.
    Value grad = update ? update->getOperand(1) : Value();
    if (!grad)
      for (auto [k, v] : llvm::enumerate(ret->getOperands())) {
        auto rn = fn.getResultAttrOfType<StringAttr>(k, OffloadDialect::kNameAttrName);
        if (rn && rn.getValue() == ("grad:" + name).str() && isa<RankedTensorType>(v.getType()))
          grad = v;
      }
    Value gradHost;
    if (grad && isa<RankedTensorType>(grad.getType())) {
      gradHost = gradientToHost(grad, update ? update : ret);
      for (OpOperand &o : ret->getOpOperands())
        if (o.get() == grad)
          o.set(gradHost);
    }

    // The update runs on the host, over host values.
    if (update) {
      UpdateOperands parts = getUpdateOperands(update);
      // The step counter and the skip flag (fp16 loss scaling's found_inf,
      // computed on the device from all gradients): an argument read only
      // by this update moves to the host; any other value is copied to the
      // host once, before the first update (an argument) or right after it
      // is computed.
      auto onHost = [&](Value v) {
        Value &host = onHostOf[v];
        if (!host) {
          auto own = dyn_cast<BlockArgument>(v);
          if (own && own.hasOneUse()) {
            own.setType(hostOf(v.getType()));
            host = own;
          } else {
            if (Operation *def = v.getDefiningOp())
              b.setInsertionPointAfter(readyPoint(def, body));
            else
              b.setInsertionPoint(firstUpdate);
            host = ToHostOp::create(b, update->getLoc(), hostOf(v.getType()), Type(),
                                    ValueRange{}, v)
                       .getResult();
          }
        }
        return host;
      };
      SmallVector<Value> operands{arg, gradHost};
      for (Value s : parts.state) {
        s.setType(hostOf(s.getType()));
        hostBytes += mlir::offload::detail::tensorBytes(s.getType());
        operands.push_back(s);
      }
      operands.push_back(onHost(parts.step));
      if (parts.foundInf)
        operands.push_back(onHost(parts.foundInf));
      SmallVector<Type> resultTypes;
      for (Type t : update->getResultTypes())
        resultTypes.push_back(hostOf(t));
      b.setInsertionPoint(update);
      OperationState st(update->getLoc(), update->getName());
      st.addOperands(operands);
      st.addTypes(resultTypes);
      st.addAttributes(update->getAttrs());
      Operation *hostUpdate = b.create(st);
      update->replaceAllUsesWith(hostUpdate->getResults());
      update->erase();
      if (firstUpdate == update)
        firstUpdate = hostUpdate;
    }
    ++moved;
    hostBytes += bytes;
  }

  fn.setFunctionType(
      FunctionType::get(ctx, body.getArgumentTypes(), ret->getOperandTypes()));
  if (prefetchDistance < 0 && failed(placePrefetches(fn, requests, targetModel)))
    return failure();
  if (out)
    *out.stream() << llvm::format(
        "host parameters @%s (policy %s): %d parameters, %lld bytes of parameters and "
        "optimizer state on the host; %d prefetched again for backward, %d kept on the "
        "device from forward to backward\n",
        fn.getName().str().c_str(), stringifyOption(policy).str().c_str(), moved, (long long)hostBytes, refetched,
        kept);
  return success();
}
