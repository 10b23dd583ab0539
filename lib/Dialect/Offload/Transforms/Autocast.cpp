//===- Autocast.cpp - Mixed precision as a rewrite of a forward step ------===//
//
// Part of offload. Implements --offload-autocast and the precision= option of
// --offload-autodiff: PyTorch's autocast policy (ATen's autocast_mode.h op
// lists for CUDA, the "Autocast Op Reference" of the torch.amp docs) as casts
// in a forward-only step. docs/precision.md has the tables.
//
//===----------------------------------------------------------------------===//

#include "offload/Dialect/Offload/Transforms/Autocast.h"
#include "offload/Dialect/Offload/Transforms/Passes.h"

#include "mlir/IR/Verifier.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "llvm/ADT/DenseMap.h"

#define DEBUG_TYPE "offload-autocast"

namespace mlir {
namespace offload {
#define GEN_PASS_DEF_AUTOCAST
#include "offload/Dialect/Offload/Transforms/Passes.h.inc"
} // namespace offload
} // namespace mlir

using namespace mlir;
using namespace mlir::offload;

AutocastClass mlir::offload::classifyForAutocast(Operation *op) {
  // AT_FORALL_LOWER_PRECISION_FP: conv2d, conv_transpose2d, linear, matmul
  // (mm, bmm), scaled_dot_product_attention.
  if (isa<LinearOp, MatmulOp, Conv2dOp, Conv2dBackwardInputOp, AttentionOp>(op))
    return AutocastClass::LowPrecision;
  // AT_FORALL_FP32 (CUDA): exp, rsqrt, layer_norm, nll_loss, mse_loss,
  // cross_entropy_loss; AT_FORALL_FP32_SET_OPT_DTYPE: softmax, log_softmax,
  // sum.
  if (isa<SoftmaxOp, LogSoftmaxOp, LayerNormOp, CrossEntropyOp, NllLossOp, MseLossOp,
          ExpOp, RsqrtOp, ReduceSumOp>(op))
    return AutocastClass::Fp32;
  // Type promotion (binary ops, where) and AT_FORALL_PROMOTE (cat).
  if (isa<AddOp, SubOp, MulOp, DivOp, WhereOp, CatOp>(op))
    return AutocastClass::Promote;
  return AutocastClass::Keep;
}

static bool isF32OrLow(Type elt) { return elt.isF32() || offload::detail::isLowFloat(elt); }

/// Rank of a float element type for promotion: bf16/f16 < f32 < f64.
static int floatRank(Type t) {
  if (offload::detail::isLowFloat(t))
    return 0;
  if (t.isF32())
    return 1;
  if (t.isF64())
    return 2;
  return -1;
}

AutocastRewriter::AutocastRewriter(MLIRContext *ctx, Type low)
    : ctx(ctx), low(low), f32(Float32Type::get(ctx)), b(ctx) {}

void AutocastRewriter::castOperand(OpOperand &use, Type elt) {
  Value v = use.get();
  auto t = dyn_cast<RankedTensorType>(v.getType());
  if (!t || t.getElementType() == elt)
    return;
  auto key = std::make_pair(v, elt);
  Value c = casts.lookup(key);
  if (!c) {
    b.setInsertionPoint(use.getOwner());
    c = CopyOp::create(b, v.getLoc(), t.clone(elt), v);
    casts[key] = c;
    ++casted;
  }
  use.set(c);
}

LogicalResult AutocastRewriter::rewrite(Operation *op, bool policy) {
  if (isa<PhaseOp, CopyOp, FillOp, ConstantOp>(op) || !op->getDialect() ||
      op->getDialect()->getNamespace() != OffloadDialect::getDialectNamespace())
    return success();
  auto floatOperands = [](Operation *op) {
    SmallVector<OpOperand *> r;
    for (OpOperand &o : op->getOpOperands())
      if (offload::detail::isFloatTensor(o.get().getType()))
        r.push_back(&o);
    return r;
  };
  bool changed = false;
  AutocastClass cls = classifyForAutocast(op);
  if (!policy && cls != AutocastClass::Promote)
    cls = AutocastClass::Keep;
  switch (cls) {
  case AutocastClass::LowPrecision:
    for (OpOperand *o : floatOperands(op))
      if (getElementTypeOrSelf(o->get().getType()).isF32()) {
        castOperand(*o, low);
        changed = true;
      }
    break;
  case AutocastClass::Fp32:
    for (OpOperand *o : floatOperands(op))
      if (offload::detail::isLowFloat(o->get().getType())) {
        castOperand(*o, f32);
        changed = true;
      }
    break;
  case AutocastClass::Promote: {
    SmallVector<OpOperand *> fl = floatOperands(op);
    Type widest;
    bool mixed = false, bf16 = false, f16 = false;
    for (OpOperand *o : fl) {
      Type e = getElementTypeOrSelf(o->get().getType());
      bf16 |= e.isBF16();
      f16 |= e.isF16();
      if (!widest)
        widest = e;
      else if (e != widest) {
        mixed = true;
        if (floatRank(e) > floatRank(widest))
          widest = e;
      }
    }
    if (!mixed)
      break;
    if (bf16 && f16 && offload::detail::isLowFloat(widest))
      widest = f32; // PyTorch promotes bf16 with f16 to f32
    for (OpOperand *o : fl) {
      castOperand(*o, widest);
      changed = true;
    }
    break;
  }
  case AutocastClass::Keep:
    break;
  }
  // Result types follow the (possibly new) operand types.
  bool anyLowIn = llvm::any_of(op->getOperandTypes(),
                               [](Type t) { return offload::detail::isLowFloat(t); });
  if (!changed && !anyLowIn)
    return success();
  SmallVector<Type> types;
  if (auto infer = dyn_cast<InferTypeOpInterface>(op)) {
    if (failed(infer.inferReturnTypes(ctx, op->getLoc(), op->getOperands(),
                                      op->getAttrDictionary(), op->getPropertiesStorage(),
                                      op->getRegions(), types)))
      return op->emitOpError("autocast: cannot infer its result types after the casts");
  } else {
    // Results of unstated type follow the first float operand's element
    // type (the op computes in it): reshape, broadcast_to, slice_backward,
    // conv2d_backward_input, ...
    Type elt;
    for (Value v : op->getOperands())
      if (offload::detail::isFloatTensor(v.getType())) {
        elt = getElementTypeOrSelf(v.getType());
        break;
      }
    for (Type t : op->getResultTypes()) {
      auto rt = dyn_cast<RankedTensorType>(t);
      types.push_back(rt && elt && isF32OrLow(rt.getElementType()) && isF32OrLow(elt)
                          ? Type(rt.clone(elt))
                          : t);
    }
  }
  for (auto [r, t] : llvm::zip(op->getResults(), types))
    r.setType(t);
  return success();
}

FailureOr<unsigned> mlir::offload::applyAutocast(func::FuncOp fn, Precision precision) {
  if (precision == Precision::Fp32)
    return 0u;
  MLIRContext *ctx = fn.getContext();
  Type low = precision == Precision::Bf16Mixed ? Type(BFloat16Type::get(ctx))
                                               : Type(Float16Type::get(ctx));
  Block &body = fn.getBody().front();
  // One cast per (value, element type), before its first reader.
  AutocastRewriter rewriter(ctx, low);
  SmallVector<Operation *> ops;
  for (Operation &op : body.without_terminator())
    ops.push_back(&op);
  for (Operation *op : ops)
    if (failed(rewriter.rewrite(op)))
      return failure();
  unsigned numCasts = rewriter.numCasts();

  // Step results keep their declared types.
  OpBuilder b(ctx);
  auto ret = cast<func::ReturnOp>(body.getTerminator());
  for (auto [i, v] : llvm::enumerate(ret.getOperands())) {
    Type want = fn.getFunctionType().getResult(i);
    if (v.getType() == want)
      continue;
    b.setInsertionPoint(ret);
    ret.setOperand(i, CopyOp::create(b, v.getLoc(), want, v));
    ++numCasts;
  }
  for (Operation &op : body)
    if (failed(verify(&op)))
      return failure();
  return numCasts;
}

namespace {
struct AutocastPass : public offload::impl::AutocastBase<AutocastPass> {
  using AutocastBase::AutocastBase;
  void runOnOperation() override {
    SmallVector<func::FuncOp> steps;
    getOperation().walk([&](func::FuncOp fn) {
      if (fn->hasAttr(OffloadDialect::kStepAttrName))
        steps.push_back(fn);
    });
    for (func::FuncOp fn : steps) {
      for (Operation &op : fn.getBody().front())
        if (auto marker = dyn_cast<PhaseOp>(op); marker && marker.getPhase() != Phase::forward) {
          marker.emitOpError("offload-autocast expects a forward-only step (run it before "
                             "--offload-autodiff, or use its precision= option)");
          return signalPassFailure();
        }
      FailureOr<unsigned> n = applyAutocast(fn, precision.getValue().value);
      if (failed(n))
        return signalPassFailure();
      numCasts += *n;
    }
  }
};
} // namespace
