//===- Autodiff.cpp - Training step from a forward step -------------------===//
//
// Part of offload. Implements --offload-autodiff: reverse-mode
// differentiation through each op's VJP (DifferentiableOpInterface), with
// every value the backward phase reads made an explicit saved value, and the
// optimizer update. See the pass description in Passes.td.
//
//===----------------------------------------------------------------------===//

#include <cmath>
#include <cstdio>
#include "offload/Dialect/Offload/Transforms/Autocast.h"
#include "offload/Dialect/Offload/Transforms/Autodiff.h"
#include "offload/Dialect/Offload/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Interfaces/FunctionInterfaces.h"
#include "mlir/Transforms/RegionUtils.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/SetVector.h"

#define DEBUG_TYPE "offload-autodiff"

namespace mlir {
namespace offload {
#define GEN_PASS_DEF_AUTODIFF
#include "offload/Dialect/Offload/Transforms/Passes.h.inc"
} // namespace offload
} // namespace mlir

using namespace mlir;
using namespace mlir::offload;

static std::optional<Role> argRole(FunctionOpInterface fn, unsigned i) {
  return getArgRole(fn, i);
}
static StringRef argName(FunctionOpInterface fn, unsigned i) {
  auto a = fn.getArgAttrOfType<StringAttr>(i, OffloadDialect::kNameAttrName);
  return a ? a.getValue() : StringRef();
}
static std::optional<Role> resultRole(FunctionOpInterface fn, unsigned i) {
  return getResultRole(fn, i);
}

static DictionaryAttr nameRole(MLIRContext *ctx, StringRef name, Role role) {
  Builder b(ctx);
  return b.getDictionaryAttr(
      {b.getNamedAttr(OffloadDialect::kNameAttrName, b.getStringAttr(name)),
       b.getNamedAttr(OffloadDialect::kRoleAttrName, getRoleAttr(ctx, role))});
}

namespace {
struct AutodiffPass : public offload::impl::AutodiffBase<AutodiffPass> {
  using AutodiffBase::AutodiffBase;

  void runOnOperation() override {
    // optimizer= and step-counters= are checked by the option parser
    // (cl::values, Passes.td).
    // Hyperparameters: a NaN compares false with everything, so each range
    // is written as what it must be (a NaN lr used to train to NaN, exit 0).
    auto badNumber = [&](const char *name, double v, bool ok, const char *want) {
      if (ok && std::isfinite(v))
        return false;
      char text[32];
      std::snprintf(text, sizeof(text), "%g", v);
      mlir::emitError(getOperation().getLoc())
          << "offload-autodiff: " << name << " must be a finite number " << want
          << ", got " << text;
      return true;
    };
    if (badNumber("lr", lr, lr >= 0, ">= 0") ||
        badNumber("momentum", momentum, momentum >= 0, ">= 0") ||
        badNumber("dampening", dampening, dampening >= 0, ">= 0") ||
        badNumber("weight-decay", weightDecay, weightDecay >= 0, ">= 0") ||
        badNumber("beta1", beta1, beta1 >= 0 && beta1 < 1, "in [0, 1)") ||
        badNumber("beta2", beta2, beta2 >= 0 && beta2 < 1, "in [0, 1)") ||
        badNumber("eps", eps, eps >= 0, ">= 0") ||
        badNumber("init-scale", initScale, initScale > 0, "> 0"))
      return signalPassFailure();
    if (lossScale != "dynamic" && lossScale != "none") {
      mlir::emitError(getOperation().getLoc())
          << "offload-autodiff: '" << lossScale
          << "' is not a loss-scale; expected dynamic or none";
      return signalPassFailure();
    }
    if (moments.getValue().value != Moments::F32 && optimizer != OptimizerKind::AdamW) {
      mlir::emitError(getOperation().getLoc())
          << "offload-autodiff: moments=" << stringifyOption(moments.getValue().value)
          << " needs optimizer=adamw (the moments are AdamW's exp_avg and exp_avg_sq), got "
             "optimizer="
          << stringifyOption(optimizer);
      return signalPassFailure();
    }
    if (microBatches < 1) {
      mlir::emitError(getOperation().getLoc())
          << "offload-autodiff: micro-batches must be >= 1, got " << int64_t(microBatches);
      return signalPassFailure();
    }
    if (growthInterval < 1) {
      mlir::emitError(getOperation().getLoc())
          << "offload-autodiff: growth-interval must be >= 1, got " << int64_t(growthInterval);
      return signalPassFailure();
    }
    SmallVector<func::FuncOp> steps;
    getOperation().walk([&](func::FuncOp fn) {
      if (fn->hasAttr(OffloadDialect::kStepAttrName))
        steps.push_back(fn);
    });
    if (steps.empty()) {
      mlir::emitError(getOperation().getLoc(), 
          "offload-autodiff: no function carries 'offload.step'; run "
          "offload-import first or mark the forward function");
      return signalPassFailure();
    }
    // The options, recorded on each step (offload.autodiff, Autodiff.h).
    std::string pipeline;
    {
      llvm::raw_string_ostream os(pipeline);
      printAsTextualPipeline(os);
    }
    for (func::FuncOp fn : steps) {
      if (failed(differentiate(fn)))
        return signalPassFailure();
      fn->setAttr(OffloadDialect::kAutodiffAttrName, StringAttr::get(fn.getContext(), pipeline));
    }
  }

  LogicalResult differentiate(func::FuncOp fn);
};
} // namespace

LogicalResult AutodiffPass::differentiate(func::FuncOp fn) {
  MLIRContext *ctx = fn.getContext();
  Block &body = fn.getBody().front();
  auto ret = cast<func::ReturnOp>(body.getTerminator());

  // The step must be forward-only and return its loss first.
  for (Operation &op : body)
    if (auto marker = dyn_cast<PhaseOp>(op))
      if (marker.getPhase() != Phase::forward)
        return marker.emitOpError(
            "offload-autodiff expects a forward-only step, but this step "
            "already has a later phase");
  // A training step returns its loss first; a pipeline stage (imported with
  // --loss none) returns its output first, and backward starts from that
  // output's gradient, a new argument.
  bool stage = fn.getNumResults() > 0 && resultRole(fn, 0) == Role::output;
  if (fn.getNumResults() == 0 || (resultRole(fn, 0) != Role::loss && !stage))
    return fn.emitOpError("offload-autodiff needs the step's first result to "
                          "be the loss (role 'loss') or a pipeline stage's "
                          "output (role 'output')");
  // Mixed precision: the casts first, so that the VJPs run the low-type
  // ops in the low type and the casts' VJPs bring gradients back to f32.
  if (failed(applyAutocast(fn, precision.getValue().value)))
    return failure();
  // Gradient accumulation: the forward runs on micro-batch 0's rows here,
  // and is unrolled for the others after the backward (MicroBatches.cpp).
  MicroBatchSplit micro;
  if (microBatches > 1) {
    if (stage)
      return fn.emitOpError() << "offload-autodiff micro-batches=" << int64_t(microBatches)
                              << " needs a training step (loss first); a pipeline stage "
                                 "runs its micro-batches through its schedule";
    if (failed(splitStepBatch(fn, microBatches, micro)))
      return failure();
  }
  ret = cast<func::ReturnOp>(body.getTerminator());

  Value loss = ret.getOperand(0);
  auto lossType = dyn_cast<RankedTensorType>(loss.getType());
  if (!lossType || !mlir::offload::detail::isFloatTensor(lossType) ||
      (!stage && lossType.getRank() != 0))
    return fn.emitOpError() << (stage ? "the stage output must be a float tensor, got "
                                      : "the loss must be a float scalar tensor, got ")
                            << loss.getType();

  SmallVector<unsigned> params;
  for (unsigned i = 0; i < fn.getNumArguments(); ++i)
    if (argRole(fn, i) == Role::parameter)
      params.push_back(i);
  if (params.empty())
    return fn.emitOpError("the step has no argument with role 'parameter'; "
                          "nothing to train");

  SmallVector<Operation *> forwardOps;
  for (Operation &op : body.without_terminator())
    if (!isa<PhaseOp>(op))
      forwardOps.push_back(&op);

  // 1. Activity: depends on a parameter (forward) and reaches the loss.
  // A stage also returns the gradient of each float input (for the
  // previous stage).
  SmallVector<unsigned> stageInputs;
  if (stage)
    for (unsigned i = 0; i < fn.getNumArguments(); ++i)
      if (argRole(fn, i) == Role::input &&
          mlir::offload::detail::isFloatTensor(body.getArgument(i).getType()))
        stageInputs.push_back(i);
  llvm::DenseSet<Value> varied;
  for (unsigned i : params)
    varied.insert(body.getArgument(i));
  for (unsigned i : stageInputs)
    varied.insert(body.getArgument(i));
  // Every op propagates activity, differentiable or not: an op without a VJP
  // on the path from a parameter to the loss is refused below, never
  // silently treated as a constant (which would give a zero gradient).
  for (Operation *op : forwardOps) {
    if (llvm::any_of(op->getOperands(), [&](Value v) { return varied.count(v); }))
      for (Value r : op->getResults())
        if (mlir::offload::detail::isFloatTensor(r.getType()))
          varied.insert(r);
  }
  llvm::DenseSet<Value> useful{loss};
  for (Operation *op : llvm::reverse(forwardOps)) {
    if (llvm::none_of(op->getResults(), [&](Value r) { return useful.count(r); }))
      continue;
    for (Value v : op->getOperands())
      if (varied.count(v))
        useful.insert(v);
  }
  if (!varied.count(loss))
    return fn.emitOpError("the loss does not depend on any parameter");
  auto isActive = [&](Value v) { return varied.count(v) && useful.count(v); };

  SmallVector<Operation *> activeOps;
  for (Operation *op : forwardOps) {
    if (llvm::none_of(op->getResults(), isActive))
      continue;
    if (!isa<DifferentiableOpInterface>(op))
      return op->emitOpError()
             << "cannot be differentiated: it is on the path from the "
                "parameters to the loss but has no VJP (it does not implement "
                "the differentiation interface); refusing rather than giving "
                "a zero gradient";
    activeOps.push_back(op);
  }

  // 2. Saved values: one offload.save per forward value the VJPs read.
  OpBuilder b(ctx);
  llvm::DenseMap<Value, Value> savedHandle;
  llvm::DenseMap<Operation *, SmallVector<Value>> savedOf;
  for (Operation *op : activeOps) {
    SmallVector<Value> saved;
    cast<DifferentiableOpInterface>(op).getSavedValues(saved);
    for (Value v : saved) {
      // Arguments and constants live for the whole step: read them directly.
      if (isa<BlockArgument>(v) || v.getDefiningOp<ConstantOp>() || savedHandle.count(v))
        continue;
      // A micro-batch's rows of an input: sliced again in backward.
      if (llvm::is_contained(micro.slices, v.getDefiningOp()))
        continue;
      b.setInsertionPointAfter(v.getDefiningOp());
      savedHandle[v] = SaveOp::create(b, v.getLoc(), v);
      ++numSaved;
    }
    savedOf[op] = std::move(saved);
  }

  // 3. Backward phase, in reverse program order.
  b.setInsertionPoint(ret);
  if (forwardOps.empty() || !isa<PhaseOp>(body.front())) {
    OpBuilder fb(ctx);
    fb.setInsertionPointToStart(&body);
    PhaseOp::create(fb, fn.getLoc(), Phase::forward);
  }
  PhaseOp::create(b, fn.getLoc(), Phase::backward);
  llvm::DenseMap<Value, Value> cotangent;
  // Ops producing the gradient of an activation (not of a parameter) carry
  // `offload.activation_grad`: the B/W split keeps them (and what they
  // read) in the input-gradient half.
  auto isStageInput = [&](Value v) {
    auto arg = dyn_cast<BlockArgument>(v);
    return arg && llvm::is_contained(stageInputs, arg.getArgNumber());
  };
  auto tag = [&](Value v, Value g) {
    if ((!isa<BlockArgument>(v) || isStageInput(v)) && g.getDefiningOp())
      g.getDefiningOp()->setAttr(OffloadDialect::kActivationGradAttrName,
                                 UnitAttr::get(ctx));
  };
  auto accumulate = [&](Value v, Value g, Location loc) {
    if (!g)
      return;
    tag(v, g);
    auto it = cotangent.find(v);
    if (it == cotangent.end())
      cotangent[v] = g;
    else {
      it->second = AddOp::create(b, loc, it->second, g);
      tag(v, it->second);
    }
  };
  // fp16 loss scaling: GradScaler's dynamic scale, in the step
  // (docs/precision.md, "Loss scaling").
  bool scaling = !stage && optimizer != OptimizerKind::None &&
                 precision.getValue().value == Precision::Fp16Mixed && lossScale == "dynamic";
  auto f32Scalar = RankedTensorType::get({}, b.getF32Type());
  auto i64Scalar = RankedTensorType::get({}, b.getI64Type());
  struct {
    Value scale, tracker, skipped, effective, foundInf;
  } amp;
  // New arguments are appended to the block now and to the signature below.
  SmallVector<DictionaryAttr> newArgAttrs;
  for (unsigned i = 0; i < fn.getNumArguments(); ++i)
    newArgAttrs.push_back(fn.getArgAttrDict(i));
  if (stage) {
    StringRef outName = fn.getResultAttrOfType<StringAttr>(0, OffloadDialect::kNameAttrName)
                            .getValue();
    newArgAttrs.push_back(nameRole(ctx, ("grad:" + outName).str(), Role::output_gradient));
    cotangent[loss] = body.addArgument(lossType, fn.getLoc());
  } else if (scaling) {
    // fp16 loss scaling (GradScaler): backward starts from d(scale * loss) =
    // scale. The scale is step state; a zero one is a fresh store's, and
    // stands for init-scale (2^16).
    Location loc = fn.getLoc();
    auto addState = [&](Type t, StringRef name) {
      newArgAttrs.push_back(nameRole(ctx, name, Role::optimizer_state));
      return body.addArgument(t, loc);
    };
    amp.scale = addState(f32Scalar, "amp.scale");
    amp.tracker = addState(i64Scalar, "amp.growth_tracker");
    amp.skipped = addState(i64Scalar, "amp.skipped_steps");
    Value zero = FillOp::create(b, loc, f32Scalar, b.getF64FloatAttr(0.0));
    Value init = FillOp::create(b, loc, f32Scalar, b.getF64FloatAttr(initScale));
    Value fresh = CompareOp::create(b, loc, ComparePredicate::eq, amp.scale, zero);
    amp.effective = WhereOp::create(b, loc, fresh, init, amp.scale);
    Value seed = amp.effective;
    if (microBatches > 1) // d(scale * loss_i / K)
      seed = MulScalarOp::create(b, loc, seed, b.getF64FloatAttr(1.0 / double(microBatches)));
    if (lossType.getElementType() != b.getF32Type())
      seed = CopyOp::create(b, loc, lossType, seed);
    cotangent[loss] = seed;
  } else {
    // d(loss_i / K) for micro-batch i (1 for the whole batch).
    cotangent[loss] = FillOp::create(b, loss.getLoc(), lossType,
                                     b.getF64FloatAttr(1.0 / double(microBatches)));
  }

  llvm::DenseMap<Value, Value> resliced;
  for (Operation *op : llvm::reverse(activeOps)) {
    SmallVector<Value> resultGrads;
    for (Value r : op->getResults())
      resultGrads.push_back(cotangent.lookup(r));
    if (llvm::all_of(resultGrads, [](Value g) { return !g; }))
      continue;
    SmallVector<Value> restored;
    for (Value v : savedOf[op]) {
      if (llvm::is_contained(micro.slices, v.getDefiningOp())) {
        Value &again = resliced[v];
        if (!again)
          again = b.clone(*v.getDefiningOp())->getResult(0);
        restored.push_back(again);
      } else if (!savedHandle.count(v))
        restored.push_back(v);
      else
        restored.push_back(RestoreOp::create(b, op->getLoc(), savedHandle[v]));
    }
    SmallVector<Value> operandGrads;
    if (failed(cast<DifferentiableOpInterface>(op).buildVJP(b, restored, resultGrads,
                                                            operandGrads)))
      return op->emitOpError("failed to build its VJP");
    if (operandGrads.size() != op->getNumOperands())
      return op->emitOpError() << "VJP returned " << operandGrads.size()
                               << " gradients for " << op->getNumOperands()
                               << " operands";
    ++numVJPs;
    for (auto [k, v, g] : llvm::enumerate(op->getOperands(), operandGrads)) {
      if (!isActive(v))
        continue;
      // A cotangent reached the op but its VJP gives none for an operand
      // that depends on a parameter: that would be a silent zero gradient.
      if (!g)
        return op->emitOpError()
               << "cannot be differentiated with respect to operand #" << k
               << " (" << v.getType()
               << "): its VJP gives no gradient, but the operand depends on "
                  "a parameter and reaches the loss";
      accumulate(v, g, op->getLoc());
    }
  }

  // Parameter gradients (zeros for a parameter the loss does not reach).
  SmallVector<Value> grads;
  for (unsigned i : params) {
    Value p = body.getArgument(i);
    Value g = cotangent.lookup(p);
    if (!g)
      g = FillOp::create(b, p.getLoc(), p.getType(), b.getF64FloatAttr(0.0));
    grads.push_back(g);
  }
  // The other micro-batches, the f32 gradient sums and the mean loss.
  for (auto &[v, again] : resliced)
    micro.slices.push_back(again.getDefiningOp());
  if (microBatches > 1 && failed(unrollMicroBatches(fn, micro, b, grads)))
    return failure();
  // An accumulated gradient goes back to its parameter's type for the update.
  auto gradOf = [&](unsigned k, Value p) -> Value {
    Value g = grads[k];
    if (g.getType() != p.getType())
      g = CopyOp::create(b, p.getLoc(), p.getType(), g);
    return g;
  };

  // 4. Optimizer phase.
  SmallVector<Value> newResults(ret.getOperands());
  SmallVector<DictionaryAttr> newResultAttrs;
  for (unsigned i = 0; i < fn.getNumResults(); ++i)
    newResultAttrs.push_back(fn.getResultAttrDict(i));
  // A value derived from a sliced parameter (offload-slice-parameters) is
  // the same rows of the derived whole tensor: "W.momentum_buffer" for the
  // momentum of a slice of "W", "grad:W" for its gradient.
  auto sliced = [&](DictionaryAttr d, int param, StringRef prefix,
                    StringRef suffix) -> DictionaryAttr {
    if (param < 0)
      return d;
    auto of = fn.getArgAttrOfType<StringAttr>(param, OffloadDialect::kSliceOfAttrName);
    Attribute rows = fn.getArgAttr(param, OffloadDialect::kSliceAttrName);
    if (!of || !rows)
      return d;
    NamedAttrList l(d);
    l.set(OffloadDialect::kSliceOfAttrName,
          StringAttr::get(ctx, (prefix + of.getValue() + suffix).str()));
    l.set(OffloadDialect::kSliceAttrName, rows);
    return l.getDictionary(ctx);
  };
  auto addArg = [&](Type t, StringRef name, int param = -1, StringRef suffix = "") -> Value {
    newArgAttrs.push_back(sliced(nameRole(ctx, name, Role::optimizer_state), param, "", suffix));
    return body.addArgument(t, fn.getLoc());
  };
  auto addResult = [&](Value v, StringRef name, Role role, int param = -1,
                       StringRef prefix = "", StringRef suffix = "") {
    newResults.push_back(v);
    newResultAttrs.push_back(sliced(nameRole(ctx, name, role), param, prefix, suffix));
  };

  if (optimizer != OptimizerKind::None) {
    PhaseOp::create(b, fn.getLoc(), Phase::optimizer);
    if (scaling) {
      // GradScaler.unscale_: found_inf if any scaled gradient is inf or NaN
      // (g * 0 is 0 for a finite g, NaN otherwise), then g * (1 / scale) in
      // f32.
      Location loc = fn.getLoc();
      Value one = FillOp::create(b, loc, f32Scalar, b.getF64FloatAttr(1.0));
      Value inv = DivOp::create(b, loc, one, amp.effective);
      Value total;
      for (Value &g : grads) {
        auto gt = cast<RankedTensorType>(g.getType());
        Value z = MulScalarOp::create(b, loc, g, b.getF64FloatAttr(0.0));
        if (gt.getRank() != 0)
          z = ReduceSumOp::create(b, loc, z, b.getDenseI64ArrayAttr({}), b.getBoolAttr(false));
        if (gt.getElementType() != b.getF32Type())
          z = CopyOp::create(b, loc, f32Scalar, z);
        total = total ? Value(AddOp::create(b, loc, total, z)) : z;
        Value invG = inv;
        if (gt.getElementType() != b.getF32Type())
          invG = CopyOp::create(b, loc, RankedTensorType::get({}, gt.getElementType()), inv);
        g = MulOp::create(b, loc, g, invG);
      }
      amp.foundInf = CompareOp::create(b, loc, ComparePredicate::ne, total, total);
    }
    // The one rule of a skipped step: every value the optimizer writes
    // (parameter, momentum, moments, step counters) keeps its old value
    // when the gradients held an inf or NaN. The updates own all of them,
    // so each takes the flag (`skip_if`) and leaves its outputs equal to
    // its inputs, in place (no `where` that would read the old value after
    // the update, which would keep it on the device).
    auto stepType = RankedTensorType::get({}, b.getI64Type());
    bool perParameter = stepCounters == StepCounters::PerParameter;
    Value step = perParameter ? Value() : addArg(stepType, "optimizer.step");
    Value newStep;
    for (auto [k, i] : llvm::enumerate(params)) {
      Value p = body.getArgument(i);
      std::string name = argName(fn, i).str();
      Location loc = p.getLoc();
      if (perParameter)
        step = addArg(stepType, name + ".step");
      if (optimizer == OptimizerKind::Sgd) {
        Value buf = addArg(p.getType(), name + ".momentum_buffer", i, ".momentum_buffer");
        auto upd = SgdUpdateOp::create(
            b, loc, p.getType(), p.getType(), stepType, p, gradOf(k, p), buf, step, amp.foundInf,
            b.getF64FloatAttr(lr), b.getF64FloatAttr(momentum),
            b.getF64FloatAttr(dampening), b.getF64FloatAttr(weightDecay),
            b.getBoolAttr(nesterov));
        if (failed(upd.verify()))
          return failure();
        addResult(upd.getNewParam(), name, Role::new_parameter, i);
        addResult(upd.getNewMomentumBuffer(), name + ".momentum_buffer",
                  Role::new_optimizer_state, i, "", ".momentum_buffer");
        newStep = upd.getNewStep();
        if (perParameter)
          addResult(newStep, name + ".step", Role::new_optimizer_state);
      } else {
        // moments=bf16: the moments' element type (the update computes in
        // f32 and rounds what it stores).
        Type momentType = p.getType();
        if (moments.getValue().value == Moments::Bf16)
          momentType = cast<RankedTensorType>(p.getType()).clone(b.getBF16Type());
        Value m = addArg(momentType, name + ".exp_avg", i, ".exp_avg");
        Value v = addArg(momentType, name + ".exp_avg_sq", i, ".exp_avg_sq");
        auto upd = AdamWUpdateOp::create(
            b, loc, p.getType(), momentType, momentType, stepType, p, gradOf(k, p), m, v,
            step, amp.foundInf, b.getF64FloatAttr(lr), b.getF64FloatAttr(beta1),
            b.getF64FloatAttr(beta2), b.getF64FloatAttr(eps),
            b.getF64FloatAttr(weightDecay));
        if (failed(upd.verify()))
          return failure();
        addResult(upd.getNewParam(), name, Role::new_parameter, i);
        addResult(upd.getNewExpAvg(), name + ".exp_avg", Role::new_optimizer_state, i, "",
                  ".exp_avg");
        addResult(upd.getNewExpAvgSq(), name + ".exp_avg_sq", Role::new_optimizer_state, i,
                  "", ".exp_avg_sq");
        newStep = upd.getNewStep();
        if (perParameter)
          addResult(newStep, name + ".step", Role::new_optimizer_state);
      }
    }
    if (!perParameter)
      addResult(newStep, "optimizer.step", Role::new_optimizer_state);
    if (scaling) {
      // GradScaler.update (ATen's _amp_update_scale_): an overflow halves
      // the scale and restarts the count; growth-interval clean steps in a
      // row double it (unless that overflows f32).
      Location loc = fn.getLoc();
      Value zero = FillOp::create(b, loc, f32Scalar, b.getF64FloatAttr(0.0));
      Value zeroI = FillOp::create(b, loc, i64Scalar, b.getF64FloatAttr(0.0));
      Value interval = FillOp::create(b, loc, i64Scalar,
                                      b.getF64FloatAttr(double(int64_t(growthInterval))));
      Value succ = AddScalarOp::create(b, loc, amp.tracker, b.getF64FloatAttr(1.0));
      Value grow = CompareOp::create(b, loc, ComparePredicate::eq, succ, interval);
      Value grown = MulScalarOp::create(b, loc, amp.effective, b.getF64FloatAttr(2.0));
      Value grownFinite = CompareOp::create(
          b, loc, ComparePredicate::eq,
          MulScalarOp::create(b, loc, grown, b.getF64FloatAttr(0.0)), zero);
      Value clean = WhereOp::create(b, loc, LogicalAndOp::create(b, loc, grow, grownFinite),
                                    grown, amp.effective);
      Value backedOff = MulScalarOp::create(b, loc, amp.effective, b.getF64FloatAttr(0.5));
      Value newScale = WhereOp::create(b, loc, amp.foundInf, backedOff, clean);
      Value newTracker = WhereOp::create(b, loc, LogicalOrOp::create(b, loc, amp.foundInf, grow),
                                         zeroI, succ);
      Value newSkipped =
          AddOp::create(b, loc, amp.skipped, CopyOp::create(b, loc, i64Scalar, amp.foundInf));
      addResult(newScale, "amp.scale", Role::new_optimizer_state);
      addResult(newTracker, "amp.growth_tracker", Role::new_optimizer_state);
      addResult(newSkipped, "amp.skipped_steps", Role::new_optimizer_state);
    }
  }
  if (returnGradients || optimizer == OptimizerKind::None)
    for (auto [k, i] : llvm::enumerate(params))
      addResult(gradOf(k, body.getArgument(i)), ("grad:" + argName(fn, i)).str(), Role::gradient,
                i, "grad:");
  for (unsigned i : stageInputs) {
    Value x = body.getArgument(i);
    Value g = cotangent.lookup(x);
    if (!g) {
      b.setInsertionPoint(ret);
      g = FillOp::create(b, x.getLoc(), x.getType(), b.getF64FloatAttr(0.0));
    }
    addResult(g, ("grad:" + argName(fn, i)).str(), Role::input_gradient);
  }

  // Rewrite the return and the signature.
  b.setInsertionPoint(ret);
  func::ReturnOp::create(b, ret.getLoc(), newResults);
  ret.erase();
  SmallVector<Type> resultTypes;
  for (Value v : newResults)
    resultTypes.push_back(v.getType());
  fn.setFunctionType(FunctionType::get(ctx, body.getArgumentTypes(), resultTypes));
  fn.setAllArgAttrs(newArgAttrs);
  fn.setAllResultAttrs(newResultAttrs);

  // Drop gradients nobody needs (e.g. of inputs): backward ops are pure.
  SmallVector<Operation *> all;
  for (Operation &op : body.without_terminator())
    all.push_back(&op);
  for (Operation *op : llvm::reverse(all))
    if (isOpTriviallyDead(op) && !isa<SaveOp>(op))
      op->erase();
  // Saves whose restores were all dead (a VJP that did not need them).
  for (auto &[v, handle] : savedHandle)
    if (handle.use_empty()) {
      handle.getDefiningOp()->erase();
      --numSaved;
    }
  // Their clones in the other micro-batches.
  for (Operation &op : llvm::make_early_inc_range(body))
    if (isa<SaveOp>(op) && op.use_empty())
      op.erase();
  return success();
}

//===----------------------------------------------------------------------===//
// The forward step behind a training step (Autodiff.h)
//===----------------------------------------------------------------------===//

LogicalResult mlir::offload::addRecordedAutodiff(func::FuncOp recordedFrom, OpPassManager &pm) {
  auto recorded = recordedFrom->getAttrOfType<StringAttr>(OffloadDialect::kAutodiffAttrName);
  if (!recorded)
    return recordedFrom.emitOpError("has no 'offload.autodiff' attribute");
  std::string error;
  llvm::raw_string_ostream es(error);
  if (failed(parsePassPipeline(recorded.getValue(), pm, es)))
    return recordedFrom.emitOpError("cannot parse its 'offload.autodiff' attribute '")
           << recorded.getValue() << "': " << error;
  return success();
}

func::FuncOp mlir::offload::cloneForwardOfStep(func::FuncOp step, ModuleOp into,
                                               std::string &why) {
  if (!step->hasAttr(OffloadDialect::kAutodiffAttrName)) {
    why = "the step carries no 'offload.autodiff' attribute (it was not built by this "
          "version's --offload-autodiff)";
    return nullptr;
  }
  if (step.getNumResults() == 0 || getResultRole(step, 0) != Role::loss) {
    why = "the step's first result is not a loss (a pipeline stage)";
    return nullptr;
  }
  if (int64_t k = getNumMicroBatches(step); k > 1) {
    why = "the step accumulates gradients over " + std::to_string(k) +
          " micro-batches (its forward is unrolled per micro-batch)";
    return nullptr;
  }
  OpBuilder b = OpBuilder::atBlockEnd(into.getBody());
  auto fwd = cast<func::FuncOp>(b.clone(*step));
  fwd->removeAttr(OffloadDialect::kAutodiffAttrName);
  Block &body = fwd.getBody().front();
  auto ret = cast<func::ReturnOp>(body.getTerminator());
  // The loss alone is returned; then everything after the forward phase,
  // and the saves, are dead and go, last first.
  Value loss = ret.getOperand(0);
  b.setInsertionPoint(ret);
  func::ReturnOp::create(b, ret.getLoc(), ValueRange{loss});
  ret.erase();
  Operation *firstLater = nullptr;
  for (Operation &op : body)
    if (auto mk = dyn_cast<PhaseOp>(op); mk && mk.getPhase() != Phase::forward) {
      firstLater = &op;
      break;
    }
  SmallVector<Operation *> doomed;
  bool later = false;
  for (Operation &op : body.without_terminator()) {
    later |= &op == firstLater;
    if (later || isa<SaveOp>(op))
      doomed.push_back(&op);
  }
  for (Operation *op : llvm::reverse(doomed)) {
    if (!op->use_empty()) {
      why = "the forward op '" + op->getName().getStringRef().str() +
            "' is read after the forward phase only";
      fwd.erase();
      return nullptr;
    }
    op->erase();
  }
  // Arguments autodiff added (optimizer state, step counters, output
  // gradients) are unused now.
  SmallVector<DictionaryAttr> argAttrs;
  llvm::BitVector drop(body.getNumArguments());
  for (unsigned i = 0; i < body.getNumArguments(); ++i) {
    std::optional<Role> r = getArgRole(fwd, i);
    if (r == Role::parameter || r == Role::input) {
      argAttrs.push_back(fwd.getArgAttrDict(i) ? fwd.getArgAttrDict(i)
                                               : DictionaryAttr::get(fwd.getContext()));
      continue;
    }
    if (!body.getArgument(i).use_empty()) {
      why = "argument #" + std::to_string(i) + " is read by the forward phase but is neither "
            "a parameter nor an input";
      fwd.erase();
      return nullptr;
    }
    drop.set(i);
  }
  DictionaryAttr lossAttrs = fwd.getResultAttrDict(0);
  body.eraseArguments(drop);
  fwd.setFunctionType(FunctionType::get(fwd.getContext(), body.getArgumentTypes(),
                                        {loss.getType()}));
  fwd.setAllArgAttrs(argAttrs);
  fwd.setAllResultAttrs(
      ArrayRef<DictionaryAttr>{lossAttrs ? lossAttrs : DictionaryAttr::get(fwd.getContext())});
  return fwd;
}
