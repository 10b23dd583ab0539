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
    if (zero != 0 && zero != 1) {
      getOperation().emitError() << "offload-data-parallel: zero=" << int64_t(zero)
                                 << " is not a supported ZeRO stage; use 0 (off) or 1 "
                                    "(optimizer state sharded)";
      return signalPassFailure();
    }
    if (zero == 1 && worldSize < 1) {
      getOperation().emitError() << "offload-data-parallel: zero=1 needs world-size=W, the "
                                    "number of ranks (at least 1), at compile time; got world-size="
                                 << int64_t(worldSize);
      return signalPassFailure();
    }
    if (zero == 0 && worldSize != 0) {
      getOperation().emitError() << "offload-data-parallel: world-size=" << int64_t(worldSize)
                                 << " is only used by zero=1 (a plan without ZeRO runs at any "
                                    "world size); drop it or add zero=1";
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
      } else if (isa<AllReduceOp, ReduceScatterOp, AllGatherOp>(op)) {
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
    if (zero == 1 && !optimizerMarker)
      return step.emitOpError("has no optimizer phase marker; --offload-data-parallel zero=1 "
                              "runs after --offload-autodiff");
    // With zero=1 a bucket's updates become one update on a flat shard, so
    // they must be of one kind, hyperparameters, types and step counter.
    auto sameUpdate = [](Operation *a, Operation *c) {
      return a->getName() == c->getName() &&
             a->getAttrDictionary() == c->getAttrDictionary() &&
             getElementTypeOrSelf(a->getOperand(0).getType()) ==
                 getElementTypeOrSelf(c->getOperand(0).getType()) &&
             getElementTypeOrSelf(a->getOperand(2).getType()) ==
                 getElementTypeOrSelf(c->getOperand(2).getType()) &&
             a->getOperands().back() == c->getOperands().back();
    };
    SmallVector<SmallVector<GradUse>> buckets(1);
    int64_t filled = 0;
    for (const GradUse &u : uses) {
      if (filled >= bucketBytes ||
          (zero == 1 && !buckets.back().empty() &&
           !sameUpdate(buckets.back().front().update, u.update))) {
        buckets.emplace_back();
        filled = 0;
      }
      buckets.back().push_back(u);
      filled += u.bytes;
    }

    if (zero == 1)
      return runZero1(step, body, buckets, pos, optimizerMarker);

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

  /// ZeRO-1: per bucket, a reduce-scatter of the gradients (with this
  /// rank's slice of the parameters), one update of the flat shard with
  /// sharded optimizer state, and an all-gather of the updated parameters.
  LogicalResult runZero1(func::FuncOp step, Block &body,
                         SmallVector<SmallVector<GradUse>> &buckets,
                         llvm::DenseMap<Operation *, int64_t> &pos, PhaseOp optimizerMarker) {
    MLIRContext *ctx = step.getContext();
    OpBuilder b(ctx);
    const int64_t W = worldSize;
    auto ret = cast<func::ReturnOp>(body.getTerminator());
    // Return positions of the replaced per-parameter state, the sharded
    // state appended (arguments and results), the old state arguments.
    llvm::BitVector dropResults(ret.getNumOperands());
    SmallVector<std::pair<Value, DictionaryAttr>> newResults;
    llvm::BitVector dropArgs(body.getNumArguments());
    SmallVector<DictionaryAttr> newArgAttrs;
    SmallVector<Value> gatherTokens;
    SmallVector<Operation *> toErase;
    auto nameRole = [&](StringRef name, Role role) {
      return b.getDictionaryAttr(
          {b.getNamedAttr(OffloadDialect::kNameAttrName, b.getStringAttr(name)),
           b.getNamedAttr(OffloadDialect::kRoleAttrName, getRoleAttr(ctx, role))});
    };
    // Early updates (--offload-early-update before this pass): a bucket's
    // flat update follows the issue of the next bucket's reduce-scatter, as
    // the all-reduce's updates do.
    bool early = llvm::any_of(buckets, [&](const SmallVector<GradUse> &bk) {
      return llvm::any_of(bk, [&](const GradUse &u) {
        return u.update->isBeforeInBlock(optimizerMarker);
      });
    });
    SmallVector<ReduceScatterOp> scatters;
    SmallVector<int64_t> counts;
    Operation *prevReduce = nullptr;
    for (auto [k, bucket] : llvm::enumerate(buckets)) {
      Operation *last = bucket.front().final;
      SmallVector<Value> values;
      int64_t n = 0;
      for (const GradUse &u : bucket) {
        if (pos.lookup(u.final) > pos.lookup(last))
          last = u.final;
        values.push_back(u.grad->get());
        n += cast<RankedTensorType>(u.grad->get().getType()).getNumElements();
      }
      for (const GradUse &u : bucket) {
        Value p = u.update->getOperand(0);
        if (!isa<BlockArgument>(p) || !isa<RankedTensorType>(p.getType()))
          return u.update->emitOpError("updates a parameter that is not a device step argument; "
                                       "--offload-data-parallel zero=1 shards step parameters");
        values.push_back(p);
      }
      if (prevReduce && !prevReduce->isBeforeInBlock(last))
        last = prevReduce;
      Type elt = getElementTypeOrSelf(values.front().getType());
      if (!elt.isF32() && !elt.isF64())
        return bucket.front().update->emitOpError()
               << "updates " << elt << " parameters; --offload-data-parallel zero=1 shards f32 "
                  "or f64 buckets (as the all-reduce averages f32 or f64 gradients)";
      auto shardT = RankedTensorType::get({(n + W - 1) / W}, elt);
      b.setInsertionPointAfter(last);
      Location loc = last->getLoc();
      auto rs = ReduceScatterOp::create(b, loc, shardT, shardT, TokenType::get(ctx), values,
                                        b.getI64IntegerAttr(int64_t(k)), b.getI64IntegerAttr(W));
      prevReduce = rs;
      scatters.push_back(rs);
      counts.push_back(n);
    }

    for (auto [k, bucket] : llvm::enumerate(buckets)) {
      ReduceScatterOp rs = scatters[k];
      int64_t n = counts[k];
      auto shardT = cast<RankedTensorType>(rs.getGradShard().getType());
      Location loc = rs.getLoc();
      // The flat update: where the bucket's first update was, or, with early
      // updates, after the next bucket's issue (the last bucket's at the end
      // of backward).
      Operation *first = bucket.front().update;
      for (const GradUse &u : bucket)
        if (u.update->isBeforeInBlock(first))
          first = u.update;
      Operation *where = first;
      if (early)
        where = k + 1 < scatters.size() ? scatters[k + 1]->getNextNode()
                : rs->isBeforeInBlock(optimizerMarker) ? optimizerMarker.getOperation()
                                                       : body.getTerminator();
      b.setInsertionPoint(where);
      WaitOp::create(b, loc, Type(), ValueRange{rs.getAsyncToken()});
      Operation *flat = b.clone(*first);
      unsigned nOps = flat->getNumOperands(), nRes = flat->getNumResults();
      bool sgd = isa<SgdUpdateOp>(flat);
      flat->setOperand(0, rs.getParamShard());
      flat->setOperand(1, rs.getGradShard());
      for (unsigned j = 2; j + 1 < nOps; ++j) {
        Type stateElt = getElementTypeOrSelf(flat->getOperand(j).getType());
        auto stateT = RankedTensorType::get({shardT.getDimSize(0)}, stateElt);
        BlockArgument arg = body.addArgument(stateT, flat->getLoc());
        std::string name = "zero1.bucket" + std::to_string(k) + "." +
                           (sgd ? "momentum_buffer" : (j == 2 ? "exp_avg" : "exp_avg_sq"));
        newArgAttrs.push_back(nameRole(name, Role::optimizer_state));
        flat->setOperand(j, arg);
        flat->getResult(j - 1).setType(stateT);
        newResults.push_back({flat->getResult(j - 1), nameRole(name, Role::new_optimizer_state)});
      }
      flat->getResult(0).setType(shardT);
      // The all-gather writes over the parameters: after their last reader
      // (backward may still read them after an early update).
      Operation *after = flat;
      SmallVector<Value> params;
      for (const GradUse &u : bucket)
        params.push_back(u.update->getOperand(0));
      for (Value p : params)
        for (Operation *user : p.getUsers()) {
          Operation *top = body.findAncestorOpInBlock(*user);
          if (!top || top == rs || llvm::any_of(bucket, [&](const GradUse &u) {
                return u.update == top;
              }))
            continue;
          if (after->isBeforeInBlock(top))
            after = top;
        }
      b.setInsertionPointAfter(after);
      auto ag = AllGatherOp::create(b, loc, flat->getResult(0), params, int64_t(k), W);
      gatherTokens.push_back(ag.getAsyncToken());

      // The per-parameter updates go: their parameters come from the
      // all-gather, their state is replaced by the shard's.
      for (auto [i, u] : llvm::enumerate(bucket)) {
        Operation *old = u.update;
        for (unsigned j = 2; j + 1 < nOps; ++j) {
          Value st = old->getOperand(j);
          auto arg = dyn_cast<BlockArgument>(st);
          if (!arg || !st.hasOneUse() || getArgRole(step, arg.getArgNumber()) != Role::optimizer_state)
            return old->emitOpError() << "reads optimizer state (operand #" << j
                                      << ") that is not a step argument read by this update "
                                         "only; --offload-data-parallel zero=1 cannot shard it";
          dropArgs.set(arg.getArgNumber());
          for (OpOperand &use : old->getResult(j - 1).getUses()) {
            if (use.getOwner() != ret)
              return old->emitOpError() << "has new optimizer state (result #" << (j - 1)
                                        << ") read by more than the step's return; "
                                           "--offload-data-parallel zero=1 cannot shard it";
            dropResults.set(use.getOperandNumber());
          }
        }
        old->getResult(0).replaceAllUsesWith(ag.getGathered()[i]);
        old->getResult(nRes - 1).replaceAllUsesWith(flat->getResult(nRes - 1));
      }
      for (const GradUse &u : bucket)
        toErase.push_back(u.update);
      ++numBuckets;
      if (out) {
        *out.stream() << "data parallel @" << step.getName() << ": bucket " << k << ": "
                      << bucket.size() << " gradients, " << n << " elements, ZeRO-1 shard of "
                      << shardT.getDimSize(0) << " elements per rank (world size " << W
                      << "); parameters in shard order:";
        // The layout of zero1.bucket<K>.<state> (docs/data_parallel.md).
        for (const GradUse &u : bucket) {
          auto arg = cast<BlockArgument>(u.update->getOperand(0));
          auto name = step.getArgAttrOfType<StringAttr>(arg.getArgNumber(),
                                                         OffloadDialect::kNameAttrName);
          *out.stream() << " " << (name ? name.getValue() : StringRef("?"));
        }
        *out.stream() << "\n";
      }
    }
    b.setInsertionPoint(ret);
    WaitOp::create(b, ret.getLoc(), Type(), gatherTokens);

    // The signature: old state arguments and results out, shards in.
    SmallVector<DictionaryAttr> argAttrs;
    for (unsigned i = 0; i < step.getNumArguments(); ++i)
      if (!dropArgs.test(i))
        argAttrs.push_back(step.getArgAttrDict(i) ? step.getArgAttrDict(i)
                                                  : DictionaryAttr::get(ctx));
    argAttrs.append(newArgAttrs);
    SmallVector<Value> results;
    SmallVector<DictionaryAttr> resultAttrs;
    for (unsigned i = 0; i < ret.getNumOperands(); ++i)
      if (!dropResults.test(i)) {
        results.push_back(ret.getOperand(i));
        resultAttrs.push_back(step.getResultAttrDict(i) ? step.getResultAttrDict(i)
                                                        : DictionaryAttr::get(ctx));
      }
    for (auto &[v, attrs] : newResults) {
      results.push_back(v);
      resultAttrs.push_back(attrs);
    }
    ret->setOperands(results);
    for (Operation *op : toErase)
      op->erase();
    dropArgs.resize(body.getNumArguments());
    body.eraseArguments(dropArgs);
    step.setFunctionType(FunctionType::get(ctx, body.getArgumentTypes(),
                                           ValueRange(results).getTypes()));
    step.setAllArgAttrs(argAttrs);
    step.setAllResultAttrs(resultAttrs);
    return success();
  }
};

} // namespace
