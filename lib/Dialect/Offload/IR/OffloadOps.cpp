//===- OffloadOps.cpp - offload op verifiers, folders, canonicalizers -----===//
//
// Part of offload.
//
//===----------------------------------------------------------------------===//

#include "offload/Dialect/Offload/IR/OffloadOps.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/Matchers.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/IR/PatternMatch.h"
#include "llvm/ADT/STLExtras.h"

#include <cmath>
#include <cstdio>
#include <string>

using namespace mlir;
using namespace mlir::offload;

/// Why `v` is not a valid non-negative hyperparameter: " (must be >= 0)",
/// or " (must be a finite number)" for NaN and infinities.
static const char *nonNegative(double v) {
  return std::isfinite(v) ? " (must be >= 0)" : " (must be a finite number)";
}

/// `v` as printf's %g writes it (1, 0.5, 1e-08): readable in diagnostics.
static std::string fmtDouble(double v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%g", v);
  return buf;
}

//===----------------------------------------------------------------------===//
// custom<AsyncDependencies>: `async`? (`[` deps `]`)?
//===----------------------------------------------------------------------===//

static ParseResult
parseAsyncDependencies(OpAsmParser &parser, Type &asyncTokenType,
                       SmallVectorImpl<OpAsmParser::UnresolvedOperand> &deps) {
  if (succeeded(parser.parseOptionalKeyword("async")))
    asyncTokenType = TokenType::get(parser.getContext());
  if (failed(parser.parseOptionalLSquare()))
    return success();
  if (succeeded(parser.parseOptionalRSquare()))
    return success();
  if (parser.parseOperandList(deps) || parser.parseRSquare())
    return failure();
  return success();
}

static void printAsyncDependencies(OpAsmPrinter &p, Operation *op,
                                   Type asyncTokenType, OperandRange deps) {
  if (asyncTokenType)
    p << "async";
  if (deps.empty())
    return;
  if (asyncTokenType)
    p << ' ';
  p << '[';
  llvm::interleaveComma(deps, p);
  p << ']';
}

//===----------------------------------------------------------------------===//
// custom<AdamWTypes>: param-type (`moments` moments-type)? `,` step-type
// (`,` found_inf-type)?; the moments' type is written only when it is not
// the parameter's (bf16 moments).
//===----------------------------------------------------------------------===//

static ParseResult parseAdamWTypes(OpAsmParser &parser, Type &paramType, Type &momentsType,
                                   Type &stepType, Type &foundInfType) {
  if (parser.parseType(paramType))
    return failure();
  momentsType = paramType;
  if (succeeded(parser.parseOptionalKeyword("moments")) && parser.parseType(momentsType))
    return failure();
  if (parser.parseComma() || parser.parseType(stepType))
    return failure();
  if (succeeded(parser.parseOptionalComma()))
    return parser.parseType(foundInfType);
  return success();
}

static void printAdamWTypes(OpAsmPrinter &p, Operation *, Type paramType, Type momentsType,
                            Type stepType, Type foundInfType) {
  p << paramType;
  if (momentsType != paramType)
    p << " moments " << momentsType;
  p << ", " << stepType;
  if (foundInfType)
    p << ", " << foundInfType;
}

#define GET_OP_CLASSES
#include "offload/Dialect/Offload/IR/OffloadOps.cpp.inc"

//===----------------------------------------------------------------------===//
// RecomputeOp
//===----------------------------------------------------------------------===//

LogicalResult RecomputeOp::verify() {
  Block &block = getBody().front();
  if (block.getNumArguments() != getInputs().size())
    return emitOpError() << "has " << getInputs().size()
                         << " inputs but its region takes "
                         << block.getNumArguments() << " arguments";
  for (auto [i, pair] :
       llvm::enumerate(llvm::zip(getInputs(), block.getArguments()))) {
    auto [input, arg] = pair;
    if (input.getType() != arg.getType())
      return emitOpError() << "input #" << i << " has type " << input.getType()
                           << " but region argument #" << i << " has type "
                           << arg.getType();
  }
  auto yield = dyn_cast<YieldOp>(block.getTerminator());
  if (!yield)
    return emitOpError("region must end with offload.yield");
  if (yield.getValues().getTypes() != getResultTypes())
    return emitOpError() << "yields " << yield.getValues().size()
                         << " values of types (" << yield.getValues().getTypes()
                         << ") but returns (" << getResultTypes() << ")";
  return success();
}

namespace {
/// A recompute region that recomputes nothing (yields its own arguments)
/// forwards its inputs.
struct ForwardTrivialRecompute : public OpRewritePattern<RecomputeOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(RecomputeOp op,
                                PatternRewriter &rewriter) const override {
    Block &block = op.getBody().front();
    if (!llvm::hasSingleElement(block))
      return failure();
    auto yield = cast<YieldOp>(block.getTerminator());
    SmallVector<Value> replacements;
    for (Value v : yield.getValues()) {
      auto arg = dyn_cast<BlockArgument>(v);
      if (!arg)
        return failure();
      replacements.push_back(op.getInputs()[arg.getArgNumber()]);
    }
    rewriter.replaceOp(op, replacements);
    return success();
  }
};

/// A wait on nothing does nothing.
struct EraseEmptyWait : public OpRewritePattern<WaitOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(WaitOp op,
                                PatternRewriter &rewriter) const override {
    if (!op.getAsyncDependencies().empty() || op.getAsyncToken())
      return failure();
    rewriter.eraseOp(op);
    return success();
  }
};
} // namespace

void RecomputeOp::getCanonicalizationPatterns(RewritePatternSet &results,
                                              MLIRContext *context) {
  results.add<ForwardTrivialRecompute>(context);
}

void WaitOp::getCanonicalizationPatterns(RewritePatternSet &results,
                                         MLIRContext *context) {
  results.add<EraseEmptyWait>(context);
}

//===----------------------------------------------------------------------===//
// Optimizer updates: the argument checks of torch.optim 1.13.
//===----------------------------------------------------------------------===//

/// An update runs on the device or on the host, never across both; its
/// step is a 0-d i64 tensor and its skip flag (`skip_if`), if any, a 0-d i1
/// tensor, in host memory or not.
static LogicalResult verifyOneSpace(Operation *op, Value step, Value foundInf) {
  bool host = isa<HostType>(op->getOperand(0).getType());
  for (Value v : op->getOperands())
    if (isa<HostType>(v.getType()) != host)
      return op->emitOpError() << "mixes device and host operands; an update runs "
                                  "on the device or, with every operand an "
                                  "!offload.host value, on the host";
  auto scalarOf = [](Value v, Type elt) {
    Type t = v.getType();
    if (auto h = dyn_cast<HostType>(t))
      t = h.getTensorType();
    auto r = dyn_cast<RankedTensorType>(t);
    return r && r.getRank() == 0 && r.getElementType() == elt;
  };
  Builder b(op->getContext());
  if (!scalarOf(step, b.getI64Type()))
    return op->emitOpError() << "step must be a 0-d i64 tensor, got " << step.getType();
  if (foundInf && !scalarOf(foundInf, b.getI1Type()))
    return op->emitOpError() << "skip_if (found_inf) must be a 0-d i1 tensor, got "
                             << foundInf.getType();
  return success();
}

UpdateOperands mlir::offload::getUpdateOperands(Operation *update) {
  if (auto s = dyn_cast<SgdUpdateOp>(update))
    return {{s.getMomentumBuffer()}, s.getStep(), s.getFoundInf()};
  auto a = cast<AdamWUpdateOp>(update);
  return {{a.getExpAvg(), a.getExpAvgSq()}, a.getStep(), a.getFoundInf()};
}

LogicalResult SgdUpdateOp::verify() {
  if (failed(verifyOneSpace(*this, getStep(), getFoundInf())))
    return failure();
  double lr = getLr().convertToDouble(), momentum = getMomentum().convertToDouble();
  double dampening = getDampening().convertToDouble();
  double wd = getWeightDecay().convertToDouble();
  // Written as what each value must be, so that NaN (which compares false)
  // and infinities are refused too.
  if (!std::isfinite(lr) || lr < 0)
    return emitOpError() << "invalid learning rate " << fmtDouble(lr) << nonNegative(lr);
  if (!std::isfinite(momentum) || momentum < 0)
    return emitOpError() << "invalid momentum " << fmtDouble(momentum) << nonNegative(momentum);
  if (!std::isfinite(dampening) || dampening < 0)
    return emitOpError() << "invalid dampening " << fmtDouble(dampening) << nonNegative(dampening);
  if (!std::isfinite(wd) || wd < 0)
    return emitOpError() << "invalid weight_decay " << fmtDouble(wd) << nonNegative(wd);
  if (getNesterov() && (momentum <= 0 || dampening != 0))
    return emitOpError("nesterov momentum requires a momentum > 0 and zero "
                       "dampening");
  return success();
}

LogicalResult AdamWUpdateOp::verify() {
  if (failed(verifyOneSpace(*this, getStep(), getFoundInf())))
    return failure();
  // The moments: the parameter's shape, and its type or (f32 parameter)
  // bf16.
  auto tensorOf = [](Type t) {
    if (auto h = dyn_cast<HostType>(t))
      return h.getTensorType();
    return cast<RankedTensorType>(t);
  };
  RankedTensorType p = tensorOf(getParam().getType()), m = tensorOf(getExpAvg().getType());
  if (m.getShape() != p.getShape())
    return emitOpError() << "exp_avg has shape " << m << " but param is " << p;
  if (m.getElementType() != p.getElementType() &&
      !(m.getElementType().isBF16() && p.getElementType().isF32()))
    return emitOpError() << "moments of type " << m.getElementType() << " for a "
                         << p.getElementType()
                         << " parameter; they must be the parameter's type, or bf16 for f32";
  double lr = getLr().convertToDouble(), eps = getEps().convertToDouble();
  double b1 = getBeta1().convertToDouble(), b2 = getBeta2().convertToDouble();
  double wd = getWeightDecay().convertToDouble();
  if (!std::isfinite(lr) || lr < 0)
    return emitOpError() << "invalid learning rate " << fmtDouble(lr) << nonNegative(lr);
  if (!std::isfinite(eps) || eps < 0)
    return emitOpError() << "invalid eps " << fmtDouble(eps) << nonNegative(eps);
  if (!(b1 >= 0 && b1 < 1))
    return emitOpError() << "invalid beta1 " << fmtDouble(b1) << " (must be in [0, 1))";
  if (!(b2 >= 0 && b2 < 1))
    return emitOpError() << "invalid beta2 " << fmtDouble(b2) << " (must be in [0, 1))";
  if (!std::isfinite(wd) || wd < 0)
    return emitOpError() << "invalid weight_decay " << fmtDouble(wd) << nonNegative(wd);
  return success();
}

//===----------------------------------------------------------------------===//
// Compute op verifiers
//===----------------------------------------------------------------------===//

/// Whether `from` broadcasts to `to` under numpy rules.
static bool broadcastsTo(ArrayRef<int64_t> from, ArrayRef<int64_t> to) {
  if (from.size() > to.size())
    return false;
  for (size_t i = 0; i < from.size(); ++i) {
    int64_t f = from[from.size() - 1 - i], t = to[to.size() - 1 - i];
    if (f != t && f != 1)
      return false;
  }
  return true;
}

LogicalResult MaskedFillOp::verify() {
  auto in = getInput().getType(), mask = getMask().getType();
  if (!broadcastsTo(mask.getShape(), in.getShape()))
    return emitOpError() << "mask of type " << mask
                         << " does not broadcast to the input's shape";
  return success();
}

LogicalResult CumsumOp::verify() {
  int64_t rank = getInput().getType().getRank(), d = getDim();
  if (d < 0 || d >= std::max<int64_t>(rank, 1))
    return emitOpError() << "dim " << d << " is out of range for a rank-" << rank
                         << " input (dims are normalized, >= 0)";
  return success();
}

LogicalResult GatherOp::verify() {
  auto in = getInput().getType(), idx = getIndex().getType();
  int64_t d = getDim();
  if (in.getRank() != idx.getRank())
    return emitOpError() << "index of rank " << idx.getRank() << " for an input of rank "
                         << in.getRank() << " (they must be equal)";
  if (d < 0 || d >= std::max<int64_t>(in.getRank(), 1))
    return emitOpError() << "dim " << d << " is out of range for a rank-" << in.getRank()
                         << " input (dims are normalized, >= 0)";
  for (int64_t k = 0; k < in.getRank(); ++k)
    if (k != d && idx.getDimSize(k) > in.getDimSize(k))
      return emitOpError() << "index size " << idx.getDimSize(k) << " at dim " << k
                           << " exceeds the input's " << in.getDimSize(k);
  return success();
}

static LogicalResult verifyReduceDims(Operation *op, RankedTensorType in,
                                      ArrayRef<int64_t> dims) {
  llvm::SmallDenseSet<int64_t> seen;
  for (int64_t d : dims) {
    if (d < 0 || d >= in.getRank())
      return op->emitOpError() << "reduction dimension " << d
                               << " is out of range for a rank-" << in.getRank()
                               << " input (dims are normalized, >= 0)";
    if (!seen.insert(d).second)
      return op->emitOpError() << "reduction dimension " << d << " is repeated";
  }
  return success();
}

LogicalResult ReduceSumOp::verify() {
  return verifyReduceDims(*this, getInput().getType(), getDims());
}
LogicalResult ReduceMeanOp::verify() {
  return verifyReduceDims(*this, getInput().getType(), getDims());
}

LogicalResult BroadcastToOp::verify() {
  auto in = getInput().getType(), out = getResult().getType();
  if (in.getElementType() != out.getElementType())
    return emitOpError("element types of input and result differ");
  if (!broadcastsTo(in.getShape(), out.getShape()))
    return emitOpError() << "input of type " << in
                         << " does not broadcast to " << out;
  return success();
}

LogicalResult ReshapeOp::verify() {
  auto in = getInput().getType(), out = getResult().getType();
  if (in.getElementType() != out.getElementType())
    return emitOpError("element types of input and result differ");
  if (in.hasStaticShape() && out.hasStaticShape() &&
      in.getNumElements() != out.getNumElements())
    return emitOpError() << "cannot reshape " << in.getNumElements()
                         << " elements into " << out.getNumElements();
  return success();
}

LogicalResult Conv2dOp::verify() {
  auto in = getInput().getType(), w = getWeight().getType();
  if (in.getRank() != 4 || w.getRank() != 4)
    return emitOpError("expects a rank-4 input [N, C, H, W] and weight "
                       "[O, C/groups, KH, KW]");
  if (getStride().size() != 2 || getPadding().size() != 2 ||
      getDilation().size() != 2)
    return emitOpError("stride, padding and dilation must have 2 values each");
  int64_t groups = getGroups();
  if (groups < 1)
    return emitOpError() << "groups must be >= 1, got " << groups;
  // C == (C/groups) * groups, without forming the product (groups is not
  // bounded by anything but int64).
  int64_t c = in.getDimSize(1), cg = w.getDimSize(1);
  if (!ShapedType::isDynamic(c) && !ShapedType::isDynamic(cg) &&
      (c % groups != 0 || c / groups != cg))
    return emitOpError() << "input has " << in.getDimSize(1)
                         << " channels but weight expects " << w.getDimSize(1)
                         << " x " << groups << " groups";
  if (!ShapedType::isDynamic(w.getDimSize(0)) && w.getDimSize(0) % groups != 0)
    return emitOpError() << "output channels " << w.getDimSize(0)
                         << " are not divisible by groups " << groups;
  return success();
}

// The result's spatial size is free within one stride (see the op's
// description); everything else must match conv2d's geometry read backwards.
LogicalResult Conv2dBackwardInputOp::verify() {
  auto dy = getGradOutput().getType(), w = getWeight().getType();
  auto dx = getGradInput().getType();
  if (dy.getRank() != 4 || w.getRank() != 4 || dx.getRank() != 4)
    return emitOpError("expects rank-4 grad_output [N, O, OH, OW], weight "
                       "[O, C/groups, KH, KW] and result [N, C, H, W]");
  if (getStride().size() != 2 || getPadding().size() != 2 || getDilation().size() != 2)
    return emitOpError("stride, padding and dilation must have 2 values each");
  int64_t groups = getGroups();
  if (groups < 1)
    return emitOpError() << "groups must be >= 1, got " << groups;
  if (!dy.hasStaticShape() || !w.hasStaticShape() || !dx.hasStaticShape())
    return success();
  if (dy.getDimSize(0) != dx.getDimSize(0))
    return emitOpError() << "batch " << dx.getDimSize(0) << " of the result differs from "
                         << dy.getDimSize(0) << " of grad_output";
  if (dy.getDimSize(1) != w.getDimSize(0) || w.getDimSize(0) % groups != 0)
    return emitOpError() << "grad_output has " << dy.getDimSize(1)
                         << " channels, weight expects " << w.getDimSize(0)
                         << " (divisible by groups " << groups << ")";
  if (dx.getDimSize(1) != w.getDimSize(1) * groups)
    return emitOpError() << "result has " << dx.getDimSize(1) << " channels, weight gives "
                         << w.getDimSize(1) << " x " << groups << " groups";
  for (int i = 0; i < 2; ++i) {
    int64_t s = getStride()[i], p = getPadding()[i], d = getDilation()[i];
    if (s < 1 || d < 1 || p < 0)
      return emitOpError("stride and dilation must be >= 1 and padding >= 0");
    int64_t span = dx.getDimSize(2 + i) + 2 * p - d * (w.getDimSize(2 + i) - 1) - 1;
    if (span < 0 || span / s + 1 != dy.getDimSize(2 + i))
      return emitOpError() << "result spatial size " << dx.getDimSize(2 + i)
                           << " does not convolve back to grad_output's "
                           << dy.getDimSize(2 + i) << " (stride " << s << ", padding " << p
                           << ", dilation " << d << ")";
  }
  return success();
}

LogicalResult BatchNormOp::verify() {
  auto in = getInput().getType();
  if (in.getRank() < 2)
    return emitOpError("expects an input of rank >= 2 [N, C, ...]");
  int64_t c = in.getDimSize(1);
  for (Value v : {getWeight(), getBias(), getRunningMean(), getRunningVar()}) {
    auto t = cast<RankedTensorType>(v.getType());
    if (t.getRank() != 1 || t.getDimSize(0) != c)
      return emitOpError() << "per-channel operand of type " << t
                           << " does not match " << c << " channels";
  }
  // Mixed precision: a bf16/f16 input may have f32 per-channel operands.
  Type et = in.getElementType(), pt = getWeight().getType().getElementType();
  if (et != pt && !(detail::isLowFloat(et) && pt.isF32()))
    return emitOpError() << "input element type " << et
                         << " must be the per-channel operands' (" << pt
                         << "), or bf16/f16 with f32 per-channel operands";
  return success();
}

/// The operand rules that attention and its backward share (the op's
/// description in OffloadComputeOps.td); `layout` says where the heads dim
/// is (bhld: [N, H, L, E], blhd: [N, L, H, E]).
static LogicalResult verifyAttentionOperands(Operation *op, RankedTensorType q,
                                             RankedTensorType k, RankedTensorType v,
                                             ValueRange extras, bool hasMask,
                                             double dropoutP, double scale,
                                             AttentionLayout layout) {
  auto err = [&]() { return op->emitOpError(); };
  bool tokens = layout == AttentionLayout::blhd;
  if (q.getRank() != 4 || k.getRank() != 4 || v.getRank() != 4)
    return err() << (tokens ? "expects (layout blhd) query [N, L, Hq, E], key [N, S, Hkv, E] "
                              "and value [N, S, Hkv, Ev]"
                            : "expects query [N, Hq, L, E], key [N, Hkv, S, E] and value "
                              "[N, Hkv, S, Ev]");
  Type et = q.getElementType();
  if (k.getElementType() != et || v.getElementType() != et)
    return err() << "query, key and value must have one element type";
  AttentionDims qd = attentionDims(q, layout), kd = attentionDims(k, layout),
                vd = attentionDims(v, layout);
  int64_t n = qd.n, hq = qd.h, e = qd.e;
  int64_t hkv = kd.h, s = kd.l;
  if (kd.n != n || vd.n != n)
    return err() << "query, key and value must have the same batch size";
  if (vd.h != hkv || vd.l != s)
    return err() << "key and value must have the same heads and length";
  if (kd.e != e)
    return err() << "query and key must have the same head size";
  if (hkv <= 0 || hq % hkv != 0)
    return err() << "query heads (" << hq << ") must be a multiple of key/value heads ("
                 << hkv << ")";
  if (!(dropoutP >= 0 && dropoutP < 1))
    return err() << "dropout_p " << fmtDouble(dropoutP) << " must be in [0, 1)";
  if (!std::isfinite(scale))
    return err() << "scale must be finite";
  size_t want = (hasMask ? 1 : 0) + (dropoutP > 0 ? 1 : 0);
  if (extras.size() != want)
    return err() << "expects " << want << " extra operand(s) (the mask when has_mask, then "
                 << "the seed when dropout_p > 0), got " << extras.size();
  if (hasMask) {
    auto m = cast<RankedTensorType>(extras[0].getType());
    if (!m.getElementType().isInteger(1) && m.getElementType() != et)
      return err() << "mask must be i1 or the query's element type";
    if (m.getRank() > 4)
      return err() << "mask must broadcast to [N, Hq, L, S]";
    int64_t full[4] = {n, hq, qd.l, s};
    for (int64_t i = 0; i < m.getRank(); ++i) {
      int64_t d = m.getDimSize(m.getRank() - 1 - i), f = full[3 - i];
      if (d != 1 && d != f)
        return err() << "mask must broadcast to [N, Hq, L, S]";
    }
  }
  if (dropoutP > 0) {
    auto sd = cast<RankedTensorType>(extras.back().getType());
    if (sd.getRank() != 0 || !sd.getElementType().isInteger(64))
      return err() << "the dropout seed must be an i64 scalar";
  }
  return success();
}

LogicalResult AttentionOp::verify() {
  return verifyAttentionOperands(*this, getQuery().getType(), getKey().getType(),
                                 getValue().getType(), getExtras(), getHasMask(),
                                 getDropoutP().convertToDouble(),
                                 getScale().convertToDouble(), getLayout());
}

LogicalResult AttentionBackwardOp::verify() {
  AttentionLayout layout = getLayout();
  if (failed(verifyAttentionOperands(*this, getQuery().getType(), getKey().getType(),
                                     getValue().getType(), getExtras(), getHasMask(),
                                     getDropoutP().convertToDouble(),
                                     getScale().convertToDouble(), layout)))
    return failure();
  auto q = getQuery().getType(), v = getValue().getType();
  AttentionDims qd = attentionDims(q, layout);
  SmallVector<int64_t, 4> outShape =
      attentionShape({qd.n, qd.h, qd.l, attentionDims(v, layout).e}, layout);
  bool tokens = layout == AttentionLayout::blhd;
  if (getGradOut().getType().getShape() != ArrayRef<int64_t>(outShape) ||
      getOut().getType().getShape() != ArrayRef<int64_t>(outShape))
    return emitOpError(tokens ? "grad_out and out must be [N, L, Hq, Ev] (layout blhd)"
                              : "grad_out and out must be [N, Hq, L, Ev]");
  if (getLse().getType().getShape() != ArrayRef<int64_t>{qd.n, qd.h, qd.l})
    return emitOpError("lse must be [N, Hq, L]");
  if (getGradQuery().getType() != q || getGradKey().getType() != getKey().getType() ||
      getGradValue().getType() != v)
    return emitOpError("gradients must have the query's, key's and value's types");
  return success();
}

LogicalResult DropoutOp::verify() {
  double p = getP().convertToDouble();
  if (!(p >= 0 && p < 1))
    return emitOpError() << "dropout probability " << fmtDouble(p)
                         << " must be in [0, 1)";
  return success();
}

LogicalResult CrossEntropyOp::verify() {
  auto logits = getLogits().getType(), target = getTarget().getType();
  if (logits.getRank() != 2 || target.getRank() != 1)
    return emitOpError("expects logits [N, C] and class-index target [N]");
  if (logits.getDimSize(0) != target.getDimSize(0))
    return emitOpError() << "logits have batch " << logits.getDimSize(0)
                         << " but target has " << target.getDimSize(0);
  double ls = getLabelSmoothing().convertToDouble();
  if (!(ls >= 0 && ls <= 1))
    return emitOpError() << "label_smoothing " << fmtDouble(ls) << " must be in [0, 1]";
  return success();
}

LogicalResult NllLossOp::verify() {
  auto input = getInput().getType(), target = getTarget().getType();
  if (input.getRank() != 2 || target.getRank() != 1)
    return emitOpError("expects log-probabilities [N, C] and class-index target [N]");
  if (input.getDimSize(0) != target.getDimSize(0))
    return emitOpError() << "input has batch " << input.getDimSize(0) << " but target has "
                         << target.getDimSize(0);
  return success();
}

//===----------------------------------------------------------------------===//
// Folders
//===----------------------------------------------------------------------===//

OpFoldResult AddScalarOp::fold(FoldAdaptor) {
  return getValue().isZero() ? OpFoldResult(getInput()) : OpFoldResult();
}
OpFoldResult MulScalarOp::fold(FoldAdaptor) {
  return getValue().convertToDouble() == 1.0 ? OpFoldResult(getInput())
                                             : OpFoldResult();
}
OpFoldResult BroadcastToOp::fold(FoldAdaptor) {
  return getInput().getType() == getResult().getType() ? OpFoldResult(getInput())
                                                       : OpFoldResult();
}
OpFoldResult ReshapeOp::fold(FoldAdaptor) {
  if (getInput().getType() == getResult().getType())
    return getInput();
  // reshape(reshape(x)) -> reshape(x)
  if (auto inner = getInput().getDefiningOp<ReshapeOp>()) {
    getInputMutable().assign(inner.getInput());
    return getResult();
  }
  return {};
}
OpFoldResult TransposeOp::fold(FoldAdaptor) {
  for (auto [i, p] : llvm::enumerate(getPerm()))
    if (int64_t(i) != p)
      return {};
  return getInput();
}
OpFoldResult CopyOp::fold(FoldAdaptor) {
  return getInput().getType() == getResult().getType() ? OpFoldResult(getInput())
                                                       : OpFoldResult();
}
OpFoldResult DropoutOp::fold(FoldAdaptor) {
  return getP().isZero() ? OpFoldResult(getInput()) : OpFoldResult();
}

//===----------------------------------------------------------------------===//
// Utilities
//===----------------------------------------------------------------------===//

std::string mlir::offload::getLayerName(Location loc) {
  if (auto name = dyn_cast<NameLoc>(loc))
    return name.getName().str();
  if (auto fused = dyn_cast<FusedLoc>(loc)) {
    for (Location l : fused.getLocations()) {
      std::string s = getLayerName(l);
      if (s != "?")
        return s;
    }
  }
  if (auto flc = dyn_cast<FileLineColLoc>(loc))
    return (flc.getFilename().getValue() + ":" + Twine(flc.getLine())).str();
  if (auto cs = dyn_cast<CallSiteLoc>(loc))
    return getLayerName(cs.getCallee());
  return "?";
}

bool mlir::offload::hasBackwardPhase(Operation *fn) {
  bool found = false;
  fn->walk([&](PhaseOp p) {
    if (p.getPhase() == Phase::backward || p.getPhase() == Phase::backward_input)
      found = true;
  });
  return found;
}

int64_t mlir::offload::getNumMicroBatches(Operation *fn) {
  int64_t n = 1;
  fn->walk([&](PhaseOp p) {
    if (p.getMicroBatch())
      n = std::max(n, p.getMicroBatchIndex() + 1);
  });
  return n;
}

PhaseOp mlir::offload::getBackwardMarkerAfter(Operation *op) {
  for (Operation *o = op->getNextNode(); o; o = o->getNextNode())
    if (auto m = dyn_cast<PhaseOp>(o); m && m.getPhase() != Phase::forward)
      return m;
  return PhaseOp();
}

void mlir::offload::inlineRecomputeRegions(Block &block) {
  SmallVector<RecomputeOp> regions;
  for (Operation &op : block)
    if (auto r = dyn_cast<RecomputeOp>(op))
      regions.push_back(r);
  for (RecomputeOp r : regions) {
    IRMapping map;
    Block &body = r.getBody().front();
    for (auto [arg, input] : llvm::zip(body.getArguments(), r.getInputs()))
      map.map(arg, input);
    OpBuilder b(r);
    for (Operation &inner : body.without_terminator())
      b.clone(inner, map);
    auto yield = cast<YieldOp>(body.getTerminator());
    SmallVector<Value> results;
    for (Value v : yield.getValues())
      results.push_back(map.lookupOrDefault(v));
    r.replaceAllUsesWith(results);
    r.erase();
  }
}

//===----------------------------------------------------------------------===//
// Matmul canonicalization
//===----------------------------------------------------------------------===//

/// The input of `v` when `v` is an offload.transpose that swaps exactly the
/// last two dimensions, else null.
static Value swappedLastTwoInput(Value v) {
  auto t = v.getDefiningOp<TransposeOp>();
  if (!t)
    return Value();
  ArrayRef<int64_t> p = t.getPerm();
  int64_t r = p.size();
  if (r < 2)
    return Value();
  for (int64_t i = 0; i + 2 < r; ++i)
    if (p[i] != i)
      return Value();
  if (p[r - 2] != r - 1 || p[r - 1] != r - 2)
    return Value();
  return t.getInput();
}

LogicalResult MatmulOp::canonicalize(MatmulOp op, PatternRewriter &rewriter) {
  Value a = swappedLastTwoInput(op.getLhs());
  Value b = swappedLastTwoInput(op.getRhs());
  if (!a && !b)
    return failure();
  // A false flag is left out, as the parser's default.
  auto setFlag = [&](StringAttr name, bool value) {
    if (value)
      op->setAttr(name, rewriter.getBoolAttr(true));
    else
      op->removeAttr(name);
  };
  rewriter.modifyOpInPlace(op, [&] {
    if (a) {
      op.getLhsMutable().assign(a);
      setFlag(op.getTransposeAAttrName(), !op.getTransposeA());
    }
    if (b) {
      op.getRhsMutable().assign(b);
      setFlag(op.getTransposeBAttrName(), !op.getTransposeB());
    }
  });
  return success();
}

//===----------------------------------------------------------------------===//
// AllReduceOp
//===----------------------------------------------------------------------===//

// `offload.all_reduce` %a, %b attr-dict `:` type(%a), type(%b): the results
// have the operands' types, then one token.
ParseResult AllReduceOp::parse(OpAsmParser &parser, OperationState &result) {
  SmallVector<OpAsmParser::UnresolvedOperand> values;
  SmallVector<Type> types;
  SMLoc loc = parser.getCurrentLocation();
  if (parser.parseOperandList(values) ||
      parser.parseOptionalAttrDict(result.attributes) || parser.parseColon() ||
      parser.parseTypeList(types) ||
      parser.resolveOperands(values, types, loc, result.operands))
    return failure();
  result.addTypes(types);
  result.addTypes(TokenType::get(parser.getContext()));
  return success();
}

void AllReduceOp::print(OpAsmPrinter &p) {
  p << ' ' << getValues();
  p.printOptionalAttrDict((*this)->getAttrs());
  p << " : " << getValues().getTypes();
}

LogicalResult AllReduceOp::verify() {
  if (getValues().empty())
    return emitOpError("reduces an empty bucket; give it at least one gradient");
  if (getReduced().size() != getValues().size())
    return emitOpError() << "has " << getReduced().size() << " tensor results for "
                         << getValues().size() << " operands; one per operand";
  for (auto [i, v, r] : llvm::enumerate(getValues(), getReduced())) {
    auto t = dyn_cast<RankedTensorType>(v.getType());
    if (!t)
      return emitOpError() << "operand #" << i << " is " << v.getType()
                           << "; a bucket holds device tensors";
    if (!t.getElementType().isF32() && !t.getElementType().isF64())
      return emitOpError() << "operand #" << i << " has element type " << t.getElementType()
                           << "; the mean across ranks is of f32 or f64 gradients";
    if (r.getType() != v.getType())
      return emitOpError() << "result #" << i << " has type " << r.getType()
                           << ", not its operand's " << v.getType();
  }
  return success();
}

//===----------------------------------------------------------------------===//
// ReduceScatterOp / AllGatherOp (ZeRO-1)
//===----------------------------------------------------------------------===//

/// Checks that `values` are device tensors of one f32/f64 element type and
/// that `shard` is `tensor<S x T>` with S = ceil(n / worldSize), n their
/// total element count. `what` names the values in errors.
static LogicalResult verifyShardLayout(Operation *op, ValueRange values, Type shard,
                                       int64_t worldSize, StringRef what) {
  if (worldSize < 1)
    return op->emitOpError() << "has world_size = " << worldSize << "; it must be at least 1";
  if (values.empty())
    return op->emitOpError() << "has no " << what << "; a bucket holds at least one";
  Type elt;
  int64_t n = 0;
  for (auto [i, v] : llvm::enumerate(values)) {
    auto t = dyn_cast<RankedTensorType>(v.getType());
    if (!t || !t.hasStaticShape())
      return op->emitOpError() << what << " #" << i << " is " << v.getType()
                               << "; a bucket holds device tensors of static shape";
    if (!t.getElementType().isF32() && !t.getElementType().isF64())
      return op->emitOpError() << what << " #" << i << " has element type " << t.getElementType()
                               << "; sharded buckets are f32 or f64";
    if (elt && t.getElementType() != elt)
      return op->emitOpError() << what << " #" << i << " has element type " << t.getElementType()
                               << ", not the bucket's " << elt << "; a bucket has one element type";
    elt = t.getElementType();
    n += t.getNumElements();
  }
  int64_t s = (n + worldSize - 1) / worldSize;
  auto st = dyn_cast<RankedTensorType>(shard);
  if (!st || st.getRank() != 1 || st.getDimSize(0) != s || st.getElementType() != elt)
    return op->emitOpError() << "has shard type " << shard << "; " << n << " elements of " << elt
                             << " over " << worldSize << " ranks make a shard of "
                             << RankedTensorType::get({s}, elt);
  return success();
}

LogicalResult ReduceScatterOp::verify() {
  if (getValues().size() % 2 != 0)
    return emitOpError() << "has " << getValues().size()
                         << " operands; it takes the gradients, then one parameter per gradient";
  for (auto [i, g, p] : llvm::enumerate(getGrads(), getParams()))
    if (g.getType() != p.getType())
      return emitOpError() << "parameter #" << i << " has type " << p.getType()
                           << ", not its gradient's " << g.getType();
  if (getParamShard().getType() != getGradShard().getType())
    return emitOpError() << "has param_shard of type " << getParamShard().getType()
                         << ", not grad_shard's " << getGradShard().getType();
  return verifyShardLayout(*this, getGrads(), getGradShard().getType(), getWorldSize(),
                           "gradient");
}

// `offload.all_gather` %s `into` %p0, %p1 attr-dict `:` type(%s) `into`
// type(%p0), type(%p1): the results have the parameters' types, then a token.
ParseResult AllGatherOp::parse(OpAsmParser &parser, OperationState &result) {
  OpAsmParser::UnresolvedOperand shard;
  SmallVector<OpAsmParser::UnresolvedOperand> params;
  Type shardType;
  SmallVector<Type> types;
  SMLoc loc = parser.getCurrentLocation();
  if (parser.parseOperand(shard) || parser.parseKeyword("into") ||
      parser.parseOperandList(params) || parser.parseOptionalAttrDict(result.attributes) ||
      parser.parseColon() || parser.parseType(shardType) || parser.parseKeyword("into") ||
      parser.parseTypeList(types) ||
      parser.resolveOperand(shard, shardType, result.operands) ||
      parser.resolveOperands(params, types, loc, result.operands))
    return failure();
  result.addTypes(types);
  result.addTypes(TokenType::get(parser.getContext()));
  return success();
}

void AllGatherOp::print(OpAsmPrinter &p) {
  p << ' ' << getShard() << " into " << getParams();
  p.printOptionalAttrDict((*this)->getAttrs());
  p << " : " << getShard().getType() << " into " << getParams().getTypes();
}

void AllGatherOp::build(OpBuilder &b, OperationState &state, Value shard, ValueRange params,
                        int64_t bucket, int64_t worldSize) {
  state.addOperands(shard);
  state.addOperands(params);
  state.addAttribute(getBucketAttrName(state.name), b.getI64IntegerAttr(bucket));
  state.addAttribute(getWorldSizeAttrName(state.name), b.getI64IntegerAttr(worldSize));
  state.addTypes(params.getTypes());
  state.addTypes(TokenType::get(b.getContext()));
}

LogicalResult AllGatherOp::verify() {
  if (getParams().size() != getGathered().size())
    return emitOpError() << "has " << getGathered().size() << " results for "
                         << getParams().size() << " parameters; one per parameter";
  for (auto [i, p, r] : llvm::enumerate(getParams(), getGathered()))
    if (p.getType() != r.getType())
      return emitOpError() << "result #" << i << " has type " << r.getType()
                           << ", not its parameter's " << p.getType();
  return verifyShardLayout(*this, getGathered(), getShard().getType(), getWorldSize(), "result");
}
