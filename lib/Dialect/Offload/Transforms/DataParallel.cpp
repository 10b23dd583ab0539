//===- DataParallel.cpp - Gradient buckets averaged across ranks ----------===//
//
// Part of offload. Implements --offload-data-parallel. See Passes.td and
// docs/data_parallel.md.
//
//===----------------------------------------------------------------------===//

#include "offload/Dialect/Offload/IR/OffloadInterfaces.h"
#include "offload/Dialect/Offload/Transforms/PassReport.h"
#include "offload/Dialect/Offload/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/Support/raw_ostream.h"

#define DEBUG_TYPE "offload-data-parallel"

namespace mlir {
namespace offload {
#define GEN_PASS_DEF_DATAPARALLEL
#include "offload/Dialect/Offload/Transforms/Passes.h.inc"
} // namespace offload
} // namespace mlir

using namespace mlir;
using namespace mlir::offload;

namespace {

/// One optimizer update and where its gradient becomes final.
struct GradUse {
  Operation *update;
  OpOperand *grad;
  Operation *final; ///< top-level op that defines the gradient
  int64_t bytes;
};

struct DataParallelPass : public offload::impl::DataParallelBase<DataParallelPass> {
  using DataParallelBase::DataParallelBase;
  void runOnOperation() override {
    if (failed(out.run(report, "offload-data-parallel", getOperation().getLoc(), [&] { runPass(); })))
      signalPassFailure();
  }
  PassReport out;

  void runPass() {
    if (bucketBytes < 1) {
      getOperation().emitError() << "offload-data-parallel: bucket-bytes=" << int64_t(bucketBytes)
                                 << " must be at least 1";
      return signalPassFailure();
    }
    getOperation().walk([&](func::FuncOp fn) {
      if (fn->hasAttr(OffloadDialect::kStepAttrName) && failed(runOnStep(fn)))
        signalPassFailure();
    });
  }

  LogicalResult runOnStep(func::FuncOp step) {
    Block &body = step.getBody().front();
    llvm::DenseMap<Operation *, int64_t> pos;
    int64_t p = 0;
    for (Operation &op : body)
      pos[&op] = p++;
    PhaseOp optimizerMarker;
    for (Operation &op : body)
      if (auto m = dyn_cast<PhaseOp>(op); m && m.getPhase() == Phase::optimizer)
        optimizerMarker = m;

    SmallVector<GradUse> uses;
    for (Operation &op : body) {
      OpOperand *grad = nullptr;
      Value foundInf;
      if (auto u = dyn_cast<SgdUpdateOp>(op)) {
        grad = &u.getGradMutable();
        foundInf = u.getFoundInf();
      } else if (auto u = dyn_cast<AdamWUpdateOp>(op)) {
        grad = &u.getGradMutable();
        foundInf = u.getFoundInf();
      } else if (isa<AllReduceOp>(op)) {
        return op.emitOpError("is already in the step; run --offload-data-parallel once");
      } else {
        continue;
      }
      if (foundInf)
        return op.emitOpError("skips on a loss-scaling overflow flag (fp16 loss scaling), "
                              "which each rank would compute from its own gradients; "
                              "data parallel does not support it yet");
      Value g = grad->get();
      if (!isa<RankedTensorType>(g.getType()))
        return op.emitOpError() << "reads a gradient of type " << g.getType()
                                << "; run --offload-data-parallel before "
                                   "--offload-host-parameters (buckets are device tensors)";
      Operation *def = g.getDefiningOp();
      if (!def)
        return op.emitOpError("reads a gradient that is a step argument; data parallel "
                              "reduces gradients computed by backward");
      def = body.findAncestorOpInBlock(*def);
      uses.push_back({&op, grad, def, mlir::offload::detail::tensorBytes(g.getType())});
    }
    if (uses.empty())
      return success();

    // Buckets in the order backward makes gradients final (stable: updates
    // of one op keep their program order).
    llvm::stable_sort(uses, [&](const GradUse &a, const GradUse &b) {
      return pos.lookup(a.final) < pos.lookup(b.final);
    });
    SmallVector<SmallVector<GradUse>> buckets(1);
    int64_t filled = 0;
    for (const GradUse &u : uses) {
      if (filled >= bucketBytes) {
        buckets.emplace_back();
        filled = 0;
      }
      buckets.back().push_back(u);
      filled += u.bytes;
    }

    OpBuilder b(step.getContext());
    SmallVector<AllReduceOp> reduces;
    for (auto [k, bucket] : llvm::enumerate(buckets)) {
      Operation *last = bucket.front().final;
      SmallVector<Value> grads;
      for (const GradUse &u : bucket) {
        if (pos.lookup(u.final) > pos.lookup(last))
          last = u.final;
        grads.push_back(u.grad->get());
      }
      // After the previous bucket's reduction too: one op may make the
      // last gradient of a bucket and the first of the next (a linear's
      // weight and bias gradients).
      if (!reduces.empty() && !reduces.back()->isBeforeInBlock(last))
        last = reduces.back();
      b.setInsertionPointAfter(last);
      auto reduce = AllReduceOp::create(b, last->getLoc(), ValueRange(grads).getTypes(),
                                        TokenType::get(b.getContext()), ValueRange(grads),
                                        b.getI64IntegerAttr(int64_t(k)));
      for (auto [u, r] : llvm::zip(bucket, reduce.getReduced()))
        u.grad->set(r);
      reduces.push_back(reduce);
    }

    // Waits, and the updates after them. Early updates (an update before
    // the optimizer marker, --offload-early-update) are kept in backward.
    bool early = optimizerMarker && llvm::any_of(uses, [&](const GradUse &u) {
      return u.update->isBeforeInBlock(optimizerMarker);
    });
    for (auto [k, bucket] : llvm::enumerate(buckets)) {
      AllReduceOp reduce = reduces[k];
      Operation *waitBefore = nullptr; // insert the wait before this op
      if (early) {
        if (k + 1 < reduces.size())
          waitBefore = reduces[k + 1]->getNextNode();
        else
          waitBefore = reduce->isBeforeInBlock(optimizerMarker) ? optimizerMarker.getOperation()
                                                                : body.getTerminator();
      } else {
        for (const GradUse &u : bucket)
          if (!waitBefore || u.update->isBeforeInBlock(waitBefore))
            waitBefore = u.update;
      }
      b.setInsertionPoint(waitBefore);
      auto wait = WaitOp::create(b, reduce.getLoc(), Type(), ValueRange{reduce.getAsyncToken()});
      // Updates before the wait move right after it, in their order.
      Operation *after = wait;
      SmallVector<Operation *> moving;
      for (const GradUse &u : bucket)
        if (u.update->isBeforeInBlock(wait))
          moving.push_back(u.update);
      llvm::sort(moving, [](Operation *a, Operation *c) { return a->isBeforeInBlock(c); });
      for (Operation *u : moving) {
        for (Value r : u->getResults())
          for (Operation *user : r.getUsers()) {
            Operation *top = body.findAncestorOpInBlock(*user);
            if (top && top->isBeforeInBlock(wait))
              return u->emitOpError("has a result read before its bucket's reduction is "
                                    "waited for; cannot move the update after it");
          }
        u->moveAfter(after);
        after = u;
      }
      ++numBuckets;
      if (out) {
        int64_t bytes = 0;
        for (const GradUse &u : bucket)
          bytes += u.bytes;
        *out.stream() << "data parallel @" << step.getName() << ": bucket " << k << ": "
                      << bucket.size() << " gradients, " << bytes << " bytes"
                      << (early ? ", updates after the next bucket's issue\n"
                                : ", updates in the optimizer phase\n");
      }
    }
    return success();
  }
};

} // namespace
