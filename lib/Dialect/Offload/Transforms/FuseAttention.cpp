//===- FuseAttention.cpp - softmax(q kᵀ) v into offload.attention ---------===//
//
// Part of offload. Implements --offload-fuse-attention (Passes.td) and
// fuseAttention (FuseAttention.h), which the importer runs on every import.
//
// The pattern, read backwards from each softmax over the last dim:
//
//   s0 = matmul(q', k) {transpose_b}       (or matmul(q', transpose(k)))
//        q' = q | mul_scalar(q, c) | div(q, C) | mul(q, C)   (C a scalar
//        fill/constant: the scale on the query, PyTorch 1.13's MHA)
//   s1 = s0 | mul_scalar(s0, c) | div(s0, C) | mul(s0, C)    (the scale)
//   s2 = s1 | masked_fill(s1, M, -inf) | add(s1, A) | add(A, s1)
//        M, A offload.constant (i1 "masked", float additive)
//   p  = softmax(s2, dim = last)
//   p' = p | dropout(p, seed) {p, offset}
//   o  = matmul(p', v)
//
// Every intermediate (q' when scaled, s0, s1, s2, p, p') must be read by the
// next op of the pattern only. Exactness: the fused op computes
// softmax(scale · q kᵀ + mask) with the same dropout element order, so
// each of the rules below keeps the value:
//  * q, k, v rank 4 [N, H, L, E] with equal batch dims, or rank 3
//    [B, L, E] (PyTorch 1.13's MultiheadAttention: B = batch · heads),
//    reshaped (a view, no copy) to [1, B, L, E]: the flat index
//    ((n·H + h)·L + i)·S + j of the op's dropout is then b·L·S + i·S + j,
//    the element order of the [B, L, S] probabilities the dropout ran over;
//  * the scale is a finite constant (none: 1);
//  * a masked_fill with -inf of a constant mask becomes the op's keep mask
//    (not mask, a new constant), or is_causal when the mask is the strictly
//    upper-triangular [.., L, S] matrix with leading dims of 1 (keep j <= i,
//    PyTorch's top-left tril); an additive mask must be a constant of the
//    query's element type. A mask with a row masked entirely is refused:
//    the spelled-out softmax gives NaN there, the op 0;
//  * dropout over the softmax's own result (same shape, same order).
//
// Then (foldAttentionTokenLayout, for every head-layout attention of the
// step, fused here or imported from scaled_dot_product_attention) the
// transposes that HF and nanoGPT code write around attention,
//
//   q = transpose(x_q) {perm 0 2 1 3}   (x_q = proj(x).view(N, L, H, E))
//   k = transpose(x_k), v = transpose(x_v)      (the same perm)
//   o, lse = attention(q, k, v, extras)          (layout bhld)
//   y = transpose(o) {perm 0 2 1 3}      (every reader of o)
//
// become o', lse = attention(x_q, x_k, x_v, extras) {layout = blhd} with y
// replaced by o'. Exact: a transpose copies, and the token-layout op
// computes the same values (the mask, the dropout's element index and lse
// are the logical [N, H, L, S] ones in either layout); the host kernels
// give the same bits. The q/k/v transposes go when nothing else reads them,
// and o' is then what y.reshape(N, L, H·E) views: the step saves one
// buffer where it saved o for attention's backward and y for the output
// projection's.
//
//===----------------------------------------------------------------------===//

#include "offload/Dialect/Offload/Transforms/FuseAttention.h"
#include "offload/Dialect/Offload/Transforms/PassReport.h"
#include "offload/Dialect/Offload/Transforms/Passes.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/Transforms/RegionUtils.h"
#include "llvm/ADT/SetVector.h"

#include <cmath>
#include <optional>
#include <string>

#define DEBUG_TYPE "offload-fuse-attention"

namespace mlir {
namespace offload {
#define GEN_PASS_DEF_FUSEATTENTION
#include "offload/Dialect/Offload/Transforms/Passes.h.inc"
} // namespace offload
} // namespace mlir

using namespace mlir;
using namespace mlir::offload;

namespace {

/// The value of a scalar constant: an offload.fill or a splat
/// offload.constant whose elements are all one value (every dim 1, so it
/// broadcasts without changing the other operand's shape).
std::optional<double> scalarConstant(Value v) {
  auto t = dyn_cast<RankedTensorType>(v.getType());
  if (!t || !isa<FloatType>(t.getElementType()) ||
      llvm::any_of(t.getShape(), [](int64_t d) { return d != 1; }))
    return std::nullopt;
  if (auto f = v.getDefiningOp<FillOp>())
    return f.getValue().convertToDouble();
  if (auto c = v.getDefiningOp<ConstantOp>())
    if (auto d = dyn_cast<DenseElementsAttr>(c.getValue()))
      if (d.isSplat() || d.getNumElements() == 1)
        return (*d.getValues<APFloat>().begin()).convertToDouble();
  return std::nullopt;
}

/// `x` scaled by a constant: sets `in` to the unscaled value and returns the
/// factor; else nullopt.
std::optional<double> scaledBy(Value x, Value &in) {
  Operation *op = x.getDefiningOp();
  if (!op)
    return std::nullopt;
  if (auto m = dyn_cast<MulScalarOp>(op)) {
    in = m.getInput();
    return m.getValue().convertToDouble();
  }
  auto rt = cast<RankedTensorType>(x.getType());
  if (auto d = dyn_cast<DivOp>(op)) {
    if (d.getLhs().getType() != rt)
      return std::nullopt;
    if (std::optional<double> c = scalarConstant(d.getRhs())) {
      in = d.getLhs();
      return 1.0 / *c;
    }
  }
  if (auto m = dyn_cast<MulOp>(op)) {
    for (int i = 0; i < 2; ++i)
      if (m->getOperand(i).getType() == rt)
        if (std::optional<double> c = scalarConstant(m->getOperand(1 - i))) {
          in = m->getOperand(i);
          return *c;
        }
  }
  return std::nullopt;
}

/// The dense value of an offload.constant, or null.
DenseElementsAttr denseConstant(Value v) {
  if (auto c = v.getDefiningOp<ConstantOp>())
    return dyn_cast<DenseElementsAttr>(c.getValue());
  return {};
}

/// Whether some row (last dim) of `flags` (the mask's own shape, row-major)
/// is true throughout: a row the mask removes entirely.
bool someRowAll(ArrayRef<bool> flags, int64_t rowLen) {
  if (rowLen <= 0)
    return false;
  for (size_t r = 0; r < flags.size(); r += rowLen) {
    bool all = true;
    for (int64_t j = 0; j < rowLen && all; ++j)
      all = flags[r + j];
    if (all)
      return true;
  }
  return false;
}

struct Fuser {
  raw_ostream *log;
  unsigned fused = 0;

  void refuse(Operation *at, const Twine &why) {
    if (log)
      *log << "refused: " << at->getLoc() << ": " << why << "\n";
  }

  /// Tries the pattern ending at `pv`, the matmul(p', v).
  void tryFuse(SoftmaxOp sm, MatmulOp pv);
};

void Fuser::tryFuse(SoftmaxOp sm, MatmulOp pv) {
  auto ptype = cast<RankedTensorType>(sm.getType());
  int64_t r = ptype.getRank();
  if (r != 3 && r != 4)
    return refuse(sm, "scores of rank " + Twine(r) + " (3 or 4 fuse)");
  if (sm.getDim() != r - 1 && sm.getDim() != -1)
    return refuse(sm, "softmax over dim " + Twine(sm.getDim()) + ", not the last");
  // Intermediates read by the next op of the pattern only.
  auto only = [](Value x, Operation *user) {
    return x.hasOneUse() && *x.getUsers().begin() == user;
  };
  // p' and dropout.
  DropoutOp drop;
  Value probs = sm.getResult();
  if (!probs.hasOneUse())
    return refuse(sm, "the probabilities have another user");
  if (auto d = dyn_cast<DropoutOp>(*probs.getUsers().begin())) {
    drop = d;
    probs = d.getResult();
    if (!probs.hasOneUse())
      return refuse(sm, "the dropped-out probabilities have another user");
  }
  if (pv.getLhs() != probs || pv.getRhs() == probs || pv.getTransposeA() || pv.getTransposeB())
    return refuse(sm, "the probabilities are not the plain left operand of matmul(p, v)");

  // The mask.
  Value s = sm.getInput();
  Operation *maskOp = nullptr;
  Value maskVal;
  bool maskIsFill = false;
  if (auto mf = s.getDefiningOp<MaskedFillOp>()) {
    double fill = mf.getValue().convertToDouble();
    if (!(std::isinf(fill) && fill < 0))
      return refuse(sm, "masked_fill with a value other than -inf");
    maskOp = mf;
    maskVal = mf.getMask();
    maskIsFill = true;
    s = mf.getInput();
  } else if (auto add = s.getDefiningOp<AddOp>()) {
    // The scores are the operand of the result's type, the mask the other.
    Value a = add.getLhs(), b = add.getRhs();
    if (a.getType() != ptype || (b.getType() == ptype && !denseConstant(b)))
      std::swap(a, b);
    if (a.getType() != ptype)
      return refuse(sm, "an add whose operands are not the scores and a mask");
    maskOp = add;
    maskVal = b;
    s = a;
  }
  DenseElementsAttr maskAttr;
  if (maskOp) {
    if (!only(s, maskOp))
      return refuse(sm, "the scores before the mask have another user");
    maskAttr = denseConstant(maskVal);
    if (!maskAttr)
      return refuse(sm, "the mask is not a constant");
  }
  // The scale after the matmul.
  double scale = 1.0;
  Operation *scaleOp = nullptr;
  {
    Value in;
    if (std::optional<double> c = scaledBy(s, in)) {
      scaleOp = s.getDefiningOp();
      if (!only(in, scaleOp))
        return refuse(sm, "the unscaled scores have another user");
      scale = *c;
      s = in;
    }
  }
  auto qk = s.getDefiningOp<MatmulOp>();
  if (!qk)
    return refuse(sm, "the scores are not a matmul");
  if (!sm.getInput().hasOneUse() || !qk.getResult().hasOneUse() ||
      (scaleOp && !scaleOp->getResult(0).hasOneUse()))
    return refuse(sm, "an intermediate score has another user");
  if (qk.getTransposeA())
    return refuse(sm, "matmul(q, k) transposes q");
  Value q = qk.getLhs(), k = qk.getRhs();
  if (!qk.getTransposeB()) {
    auto t = k.getDefiningOp<TransposeOp>();
    SmallVector<int64_t> swapLast;
    for (int64_t i = 0; i < r; ++i)
      swapLast.push_back(i);
    std::swap(swapLast[r - 1], swapLast[r - 2]);
    if (!t || t.getPerm() != ArrayRef<int64_t>(swapLast))
      return refuse(sm, "the scores are not matmul(q, kᵀ)");
    k = t.getInput(); // the transpose is erased below once unused
  }
  // The scale on the query (applied before the matmul).
  Operation *qScaleOp = nullptr;
  {
    Value in;
    if (std::optional<double> c = scaledBy(q, in)) {
      if (q.hasOneUse()) {
        qScaleOp = q.getDefiningOp();
        scale *= *c;
        q = in;
      }
    }
  }
  if (!std::isfinite(scale))
    return refuse(sm, "the scale is not finite");
  Value v = pv.getRhs();
  auto qt = cast<RankedTensorType>(q.getType()), kt = cast<RankedTensorType>(k.getType()),
       vt = cast<RankedTensorType>(v.getType());
  if (qt.getRank() != r || kt.getRank() != r || vt.getRank() != r)
    return refuse(sm, "query, key and value are not of the scores' rank");
  Type et = qt.getElementType();
  if (kt.getElementType() != et || vt.getElementType() != et || ptype.getElementType() != et)
    return refuse(sm, "query, key, value and scores differ in element type");
  ArrayRef<int64_t> qs = qt.getShape(), ks = kt.getShape(), vs = vt.getShape();
  if (qs.drop_back(2) != ks.drop_back(2) || qs.drop_back(2) != vs.drop_back(2))
    return refuse(sm, "query, key and value have different batch dims (broadcast)");
  if (ks[r - 2] != vs[r - 2] || ks[r - 1] != qs[r - 1])
    return refuse(sm, "key and value lengths or query and key head sizes differ");
  if (llvm::any_of(qs, ShapedType::isDynamic) || llvm::any_of(vs, ShapedType::isDynamic) ||
      llvm::any_of(ks, ShapedType::isDynamic))
    return refuse(sm, "dynamic shapes");
  int64_t L = qs[r - 2], S = ks[r - 2];
  if (ptype.getShape() != cast<RankedTensorType>(qk.getType()).getShape())
    return refuse(sm, "the scores change shape before the softmax");

  // The mask's form for the op.
  bool causal = false;
  Value maskExtra;
  OpBuilder b(pv);
  Location loc = pv.getLoc();
  if (maskAttr) {
    auto mt = cast<RankedTensorType>(maskAttr.getType());
    int64_t mr = mt.getRank();
    ArrayRef<int64_t> ms = mt.getShape();
    if (mr > r)
      return refuse(sm, "the mask has more dims than the scores");
    int64_t rowLen = mr ? ms[mr - 1] : 1;
    if (maskIsFill) {
      SmallVector<bool> masked(maskAttr.getValues<bool>());
      // A masked row: NaN spelled out, 0 fused. A mask broadcast over the
      // keys (last dim 1) masks whole rows where true.
      if (someRowAll(masked, rowLen))
        return refuse(sm, "the mask removes every key of some query (NaN spelled out, 0 fused)");
      bool triu = mr >= 2 && ms[mr - 2] == L && ms[mr - 1] == S &&
                  llvm::all_of(ms.drop_back(2), [](int64_t d) { return d == 1; });
      for (int64_t i = 0; triu && i < L; ++i)
        for (int64_t j = 0; triu && j < S; ++j)
          triu = masked[i * S + j] == (j > i);
      if (triu) {
        causal = true;
      } else {
        SmallVector<bool> keep;
        for (bool m : masked)
          keep.push_back(!m);
        maskExtra = ConstantOp::create(b, maskVal.getLoc(), mt,
                                       DenseElementsAttr::get(mt, ArrayRef<bool>(keep)));
      }
    } else {
      if (mt.getElementType() != et)
        return refuse(sm, "the additive mask's type differs from the query's");
      // Broadcastable into the scores (the add's result is the scores' type).
      SmallVector<bool> ninf;
      for (APFloat x : maskAttr.getValues<APFloat>())
        ninf.push_back(x.isInfinity() && x.isNegative());
      if (someRowAll(ninf, rowLen))
        return refuse(sm, "the mask removes every key of some query (NaN spelled out, 0 fused)");
      maskExtra = maskVal;
    }
  }

  // Rank 3 [B, L, E]: the op's [1, B, L, E] (the same element order).
  auto to4 = [&](Value x) -> Value {
    if (r == 4)
      return x;
    auto t = cast<RankedTensorType>(x.getType());
    SmallVector<int64_t> s4 = {1};
    s4.append(t.getShape().begin(), t.getShape().end());
    return ReshapeOp::create(b, loc, RankedTensorType::get(s4, t.getElementType()), x);
  };
  SmallVector<Value> operands = {to4(q), to4(k), to4(v)};
  SmallVector<NamedAttribute> attrs = {b.getNamedAttr("scale", b.getF64FloatAttr(scale))};
  if (causal)
    attrs.push_back(b.getNamedAttr("is_causal", b.getBoolAttr(true)));
  if (maskExtra) {
    operands.push_back(maskExtra);
    attrs.push_back(b.getNamedAttr("has_mask", b.getBoolAttr(true)));
  }
  if (drop && drop.getP().convertToDouble() > 0.0) {
    operands.push_back(drop.getSeed());
    attrs.push_back(b.getNamedAttr("dropout_p", drop.getPAttr()));
    attrs.push_back(b.getNamedAttr("offset", drop.getOffsetAttr()));
  }
  auto att = AttentionOp::create(b, loc, operands, attrs);
  Value out = att.getOut();
  if (r == 3)
    out = ReshapeOp::create(b, loc, pv.getType(), out);
  pv.getResult().replaceAllUsesWith(out);
  if (log)
    *log << "fused: " << loc << ": scale " << scale << (causal ? ", causal" : "")
         << (maskExtra ? (maskIsFill ? ", keep mask (not the masked_fill's)" : ", additive mask")
                       : "")
         << (drop && drop.getP().convertToDouble() > 0.0 ? ", dropout" : "")
         << (r == 3 ? ", [B, L, E] as [1, B, L, E]" : "") << "\n";
  // The pattern's ops, newest first; operands (the transpose, the scale's
  // and mask's constants) go when nothing else reads them.
  SmallVector<Operation *> dead = {pv};
  if (drop)
    dead.push_back(drop);
  dead.push_back(sm);
  if (maskOp)
    dead.push_back(maskOp);
  if (scaleOp)
    dead.push_back(scaleOp);
  dead.push_back(qk);
  if (qScaleOp)
    dead.push_back(qScaleOp);
  llvm::SetVector<Operation *> feeders;
  for (Operation *op : dead) {
    for (Value o : op->getOperands())
      if (Operation *d = o.getDefiningOp())
        if (isa<FillOp, ConstantOp, TransposeOp>(d))
          feeders.insert(d);
    op->erase();
  }
  for (Operation *d : feeders)
    if (d->use_empty())
      d->erase();
  ++fused;
}

/// Whether `t` swaps dims 1 and 2 of a rank-4 value (`transpose(1, 2)`).
bool swapsOneTwo(TransposeOp t) {
  return t && t.getPerm() == ArrayRef<int64_t>{0, 2, 1, 3};
}

} // namespace

unsigned mlir::offload::foldAttentionTokenLayout(func::FuncOp fn, raw_ostream *log) {
  SmallVector<AttentionOp> atts;
  fn.walk([&](AttentionOp op) { atts.push_back(op); });
  unsigned folded = 0;
  for (AttentionOp att : atts) {
    if (att.getLayout() != AttentionLayout::bhld)
      continue;
    auto keep = [&](const Twine &why) {
      if (log)
        *log << "head layout kept: " << att.getLoc() << ": " << why << "\n";
    };
    SmallVector<TransposeOp, 3> in;
    for (Value x : {att.getQuery(), att.getKey(), att.getValue()})
      in.push_back(x.getDefiningOp<TransposeOp>());
    if (!llvm::all_of(in, swapsOneTwo)) {
      keep("query, key and value are not all transpose(1, 2) of a value");
      continue;
    }
    Value out = att.getOut();
    auto swapped = [](Operation *u) { return swapsOneTwo(dyn_cast<TransposeOp>(u)); };
    if (out.use_empty() || !llvm::all_of(out.getUsers(), swapped)) {
      keep("the output is not read only through transpose(1, 2)");
      continue;
    }
    OpBuilder b(att);
    SmallVector<Value> operands = {in[0].getInput(), in[1].getInput(), in[2].getInput()};
    operands.append(att.getExtras().begin(), att.getExtras().end());
    NamedAttrList attrs(att->getAttrDictionary());
    attrs.set(att.getLayoutAttrName(),
              AttentionLayoutAttr::get(b.getContext(), AttentionLayout::blhd));
    auto tok = AttentionOp::create(b, att.getLoc(), operands, attrs.getAttrs());
    for (Operation *u : llvm::make_early_inc_range(out.getUsers())) {
      u->getResult(0).replaceAllUsesWith(tok.getOut());
      u->erase();
    }
    att.getLse().replaceAllUsesWith(tok.getLse());
    att->erase();
    // q, k and v may share a transpose: each erased once.
    llvm::SetVector<Operation *> ins;
    for (TransposeOp t : in)
      ins.insert(t);
    for (Operation *t : ins)
      if (t->use_empty())
        t->erase();
    if (log)
      *log << "token layout: " << tok.getLoc()
           << ": the transposes around attention folded (layout blhd)\n";
    ++folded;
  }
  return folded;
}

unsigned mlir::offload::fuseAttention(func::FuncOp fn, raw_ostream *log) {
  Fuser f{log};
  SmallVector<std::pair<SoftmaxOp, MatmulOp>> cands;
  fn.walk([&](SoftmaxOp sm) {
    // Candidates: the softmax's result (or its dropout's) read by a matmul.
    Value p = sm.getResult();
    for (int hop = 0; hop < 2; ++hop) {
      for (Operation *u : p.getUsers())
        if (auto mm = dyn_cast<MatmulOp>(u)) {
          cands.push_back({sm, mm});
          return;
        }
      Operation *next = p.hasOneUse() ? *p.getUsers().begin() : nullptr;
      if (!next || !isa<DropoutOp>(next))
        return;
      p = next->getResult(0);
    }
  });
  for (auto [sm, mm] : cands)
    f.tryFuse(sm, mm);
  return f.fused;
}

namespace {
struct FuseAttentionPass : public offload::impl::FuseAttentionBase<FuseAttentionPass> {
  using FuseAttentionBase::FuseAttentionBase;
  PassReport out;
  void runOnOperation() override {
    if (failed(out.run(report, "offload-fuse-attention", getOperation().getLoc(), [&] {
          unsigned n = 0, t = 0;
          getOperation().walk([&](func::FuncOp fn) {
            if (!fn->hasAttr(OffloadDialect::kStepAttrName))
              return;
            n += fuseAttention(fn, out.stream());
            if (tokenLayout)
              t += foldAttentionTokenLayout(fn, out.stream());
          });
          numFused += n;
          numTokenLayout += t;
          if (raw_ostream *os = out.stream()) {
            *os << "offload-fuse-attention: " << n << " attention(s) fused";
            if (tokenLayout)
              *os << ", " << t << " in the token layout";
            *os << "\n";
          }
          if (!n && !t)
            markAllAnalysesPreserved();
        })))
      signalPassFailure();
  }
};
} // namespace
