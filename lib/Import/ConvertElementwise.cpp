//===- ConvertElementwise.cpp - Elementwise ATen ops ----------------------===//
//
// Part of offload. Unary activations, binary arithmetic with tensors or
// numbers in PyTorch's result type (resultType, OpBuilder.h; integer
// add/sub/mul for position ids), comparisons, cumsum of ids,
// masked_fill/where, not/and/or of bool masks, copy and dtype casts.
//
//===----------------------------------------------------------------------===//
#include "OpBuilder.h"

#include <cmath>

using namespace mlir;
using namespace mlir::offload;
using namespace ::offload::import;
using namespace ::offload::import::ts;

namespace {

template <typename OpTy>
void convertUnary(StepBuilder &im, Call &n) {
  mlir::Value x = im.tensorIn(n, 0);
  im.setOut(n, im.emit1<OpTy>(n, {x}, {}, {x.getType()}));
}

void convertHardtanh(StepBuilder &im, Call &n) {
  mlir::Value x = im.tensorIn(n, 0);
  double lo = n.numInputs() > 1 ? im.getDouble(n, 1) : -1.0;
  double hi = n.numInputs() > 2 ? im.getDouble(n, 2) : 1.0;
  im.setOut(n, im.emit1<HardtanhOp>(n, {x}, {im.f64("min_val", lo), im.f64("max_val", hi)},
                                    {x.getType()}));
}

void convertRelu6(StepBuilder &im, Call &n) {
  mlir::Value x = im.tensorIn(n, 0);
  im.setOut(n, im.emit1<HardtanhOp>(n, {x}, {im.f64("min_val", 0), im.f64("max_val", 6)},
                                    {x.getType()}));
}

// hardsigmoid(x) = hardtanh(x + 3, 0, 6) / 6 (exactly ATen's formula).
void convertHardsigmoid(StepBuilder &im, Call &n) {
  mlir::Value x = im.tensorIn(n, 0);
  mlir::Value s = im.emit1<AddScalarOp>(n, {x}, {im.f64("value", 3.0)}, {x.getType()});
  s = im.emit1<HardtanhOp>(n, {s}, {im.f64("min_val", 0), im.f64("max_val", 6)}, {x.getType()});
  mlir::Value six = im.fill(n, 6.0, RankedTensorType::get({}, im.tt(x).getElementType()));
  im.setOut(n, im.emit1<DivOp>(n, {s, six}));
}

void convertGelu(StepBuilder &im, Call &n) {
  mlir::Value x = im.tensorIn(n, 0);
  std::string a = n.numInputs() > 1 ? im.getString(n, 1) : "none";
  if (a != "none" && a != "tanh")
    im.fail(n, "unknown GELU approximation '" + a + "'");
  auto approx = GeluApproximationAttr::get(
      &im.ctx, a == "tanh" ? GeluApproximation::tanh : GeluApproximation::none);
  im.setOut(n, im.emit1<GeluOp>(n, {x}, {im.attr("approximate", approx)}, {x.getType()}));
}

/// add/sub/mul/div with tensors or numbers (aten::add(self, other, alpha)),
/// in PyTorch's result type of the two operands (resultType: an int64
/// tensor times a float number is float32, an int32 tensor plus a number
/// int32, a float32 tensor plus a 0-dim float64 tensor float32); true
/// division of integers is float32. Integer results (position ids) are
/// add/sub/mul on i64 or i32; they carry no gradient.
enum class BinKind { Add, Sub, Mul, Div };
template <BinKind K>
void convertBinary(StepBuilder &im, Call &n) {
  Arg &lhsV = im.in(n, 0), &rhsV = im.in(n, 1);
  double alpha = 1.0;
  if ((K == BinKind::Add || K == BinKind::Sub) && n.numInputs() > 2)
    alpha = im.getDouble(n, 2);
  if (K == BinKind::Div && n.numInputs() > 2 && !im.in(n, 2).isNone())
    im.fail(n, "division with a rounding mode on tensors is not supported");
  Type et = resultType(im.ctx, {im.promoted(n, 0), im.promoted(n, 1)});
  if (K == BinKind::Div && !isa<FloatType>(et))
    et = im.b.getF32Type();
  if (!isa<FloatType>(et)) {
    if (et.isInteger(1))
      im.fail(n, "arithmetic on bool tensors is not supported");
    if (alpha != std::trunc(alpha))
      im.fail(n, "a non-integral alpha on integer tensors");
    bool rhsNumber = rhsV.kind == Arg::Int || rhsV.kind == Arg::Double || rhsV.kind == Arg::Bool;
    mlir::Value a = im.tensorAs(n, 0, et);
    // x + 0, x - 0, x * 1 (RoBERTa's `+ past_key_values_length`): x.
    double c = rhsNumber ? im.scalarValue(rhsV) * (K == BinKind::Mul ? 1 : alpha) : 0;
    if (rhsNumber && ((K != BinKind::Mul && c == 0) || (K == BinKind::Mul && c == 1))) {
      im.setOut(n, a);
      return;
    }
    mlir::Value d = im.tensorAs(n, 1, et);
    if (alpha != 1.0)
      d = im.emit1<MulOp>(n, {d, im.fill(n, alpha, RankedTensorType::get({}, et))});
    if (K == BinKind::Add)
      im.setOut(n, im.emit1<AddOp>(n, {a, d}));
    else if (K == BinKind::Sub)
      im.setOut(n, im.emit1<SubOp>(n, {a, d}));
    else
      im.setOut(n, im.emit1<MulOp>(n, {a, d}));
    return;
  }
  // Tensor op number: the scalar ops.
  if (lhsV.kind == Arg::Tensor && im.isScalar(rhsV) && K != BinKind::Div) {
    mlir::Value x = im.tensorAs(n, 0, et);
    double c = im.scalarValue(rhsV);
    if (K == BinKind::Mul)
      im.setOut(n, im.emit1<MulScalarOp>(n, {x}, {im.f64("value", c)}, {x.getType()}));
    else
      im.setOut(n, im.emit1<AddScalarOp>(
                       n, {x}, {im.f64("value", (K == BinKind::Add ? 1 : -1) * alpha * c)},
                       {x.getType()}));
    return;
  }
  if (rhsV.kind == Arg::Tensor && im.isScalar(lhsV) &&
      (K == BinKind::Mul || (K == BinKind::Add && alpha == 1.0))) {
    mlir::Value x = im.tensorAs(n, 1, et);
    double c = im.scalarValue(lhsV);
    if (K == BinKind::Mul)
      im.setOut(n, im.emit1<MulScalarOp>(n, {x}, {im.f64("value", c)}, {x.getType()}));
    else
      im.setOut(n, im.emit1<AddScalarOp>(n, {x}, {im.f64("value", c)}, {x.getType()}));
    return;
  }
  mlir::Value a = im.tensorAs(n, 0, et), c = im.tensorAs(n, 1, et);
  if (alpha != 1.0)
    c = im.emit1<MulScalarOp>(n, {c}, {im.f64("value", alpha)}, {c.getType()});
  switch (K) {
  case BinKind::Add:
    im.setOut(n, im.emit1<AddOp>(n, {a, c}));
    break;
  case BinKind::Sub:
    im.setOut(n, im.emit1<SubOp>(n, {a, c}));
    break;
  case BinKind::Mul:
    im.setOut(n, im.emit1<MulOp>(n, {a, c}));
    break;
  case BinKind::Div:
    im.setOut(n, im.emit1<DivOp>(n, {a, c}));
    break;
  }
}

/// eq/ne/lt/le/gt/ge (Tensor and Scalar overloads): both operands in their
/// PyTorch result type (an int64 tensor against a float number compares in
/// float32), then offload.compare; the result is a bool tensor, computed at
/// run time when an operand depends on the step's inputs (padding masks,
/// RoBERTa's `input_ids != pad`).
template <ComparePredicate P>
void convertCompare(StepBuilder &im, Call &n) {
  Type et = resultType(im.ctx, {im.promoted(n, 0), im.promoted(n, 1)});
  mlir::Value a = im.tensorAs(n, 0, et), c = im.tensorAs(n, 1, et);
  im.setOut(n, im.emit1<CompareOp>(
                   n, {a, c}, {im.attr("predicate", ComparePredicateAttr::get(&im.ctx, P))}));
}

/// cumsum(self, dim, dtype=None) of an integer or bool value of the step
/// (RoBERTa's position ids): int64 unless `dtype` says otherwise, as
/// PyTorch; a float cumsum would need a VJP and is refused.
void convertCumsum(StepBuilder &im, Call &n) {
  mlir::Value x = im.tensorIn(n, 0);
  auto t = im.tt(x);
  if (isa<FloatType>(t.getElementType()))
    im.fail(n, "cumsum of a float value of the step is not supported (only integer and bool "
               "cumsums, as position ids, run in the step; they carry no gradient)");
  int64_t d = normDim(im, n, im.getInt(n, 1), t.getRank());
  Type out = im.b.getI64Type();
  if (n.numInputs() > 2 && im.in(n, 2).kind == Arg::Dtype) {
    out = im.in(n, 2).type;
    if (!out || isa<FloatType>(out))
      im.fail(n, "cumsum to dtype " + im.in(n, 2).s + " is not supported");
  }
  mlir::Value y = im.tensorAs(n, 0, im.b.getI64Type());
  if (t.getRank() > 0)
    y = im.emit1<CumsumOp>(n, {y}, {im.i64("dim", d)}, {y.getType()});
  if (out != im.b.getI64Type())
    y = im.emit1<CopyOp>(n, {y}, {}, {im.tt(y).clone(out)});
  im.setOut(n, y);
}

/// copy(self, src): src cast to self's dtype and broadcast to its shape (the
/// in-place `x[a:b].copy_(src)` of T5's _shift_right; the write into x is
/// the importer's in-place handling).
void convertCopy(StepBuilder &im, Call &n) {
  auto self = im.tt(im.tensorIn(n, 0));
  mlir::Value v = im.tensorAs(n, 1, self.getElementType());
  if (im.tt(v).getShape() != self.getShape())
    v = im.emit1<BroadcastToOp>(n, {v}, {}, {self});
  im.setOut(n, v);
}

/// addcmul(self, tensor1, tensor2, value) = self + value * tensor1 * tensor2
/// (broadcasting; timm's ResMLP and LayerScale affine layers).
void convertAddcmul(StepBuilder &im, Call &n) {
  mlir::Value x = im.tensorIn(n, 0);
  Type et = im.tt(x).getElementType();
  mlir::Value a = im.tensorIn(n, 1, et), c = im.tensorIn(n, 2, et);
  double value = n.numInputs() > 3 ? im.getDouble(n, 3) : 1.0;
  mlir::Value p = im.emit1<MulOp>(n, {a, c});
  if (value != 1.0)
    p = im.emit1<MulScalarOp>(n, {p}, {im.f64("value", value)}, {p.getType()});
  im.setOut(n, im.emit1<AddOp>(n, {x, p}));
}

void convertRsub(StepBuilder &im, Call &n) {
  // rsub(self, other, alpha) = other - alpha * self, in the operands'
  // result type (`1 - mask` of an integer mask is integer).
  double alpha = n.numInputs() > 2 ? im.getDouble(n, 2) : 1.0;
  if (!im.isScalar(im.in(n, 1)))
    im.fail(n, "rsub with a tensor 'other' is not supported");
  Type et = resultType(im.ctx, {im.promoted(n, 0), im.promoted(n, 1)});
  mlir::Value x = im.tensorAs(n, 0, et);
  double other = im.scalarValue(im.in(n, 1));
  if (!isa<FloatType>(et)) {
    if (et.isInteger(1) || alpha != std::trunc(alpha))
      im.fail(n, "rsub on bool tensors, or with a non-integral alpha on integers, is not "
                 "supported");
    auto scalar = RankedTensorType::get({}, et);
    if (alpha != 1.0)
      x = im.emit1<MulOp>(n, {x, im.fill(n, alpha, scalar)});
    im.setOut(n, im.emit1<SubOp>(n, {im.fill(n, other, scalar), x}));
    return;
  }
  mlir::Value y = im.emit1<MulScalarOp>(n, {x}, {im.f64("value", -alpha)}, {x.getType()});
  im.setOut(n, im.emit1<AddScalarOp>(n, {y}, {im.f64("value", other)}, {x.getType()}));
}


/// pow(x, e) for the exponents ATen's CPU kernel computes by multiplication
/// or a root (pow_tensor_scalar_optimized_kernel: 2 and 3 as products, 0.5
/// and -0.5 as (r)sqrt, -1 and -2 as reciprocals), so the step rounds as
/// PyTorch does; RMSNorm's x.pow(2) and GPT-2's GELU x.pow(3).
void convertPow(StepBuilder &im, Call &n) {
  mlir::Value x = im.tensorIn(n, 0);
  if (!im.isScalar(im.in(n, 1)))
    im.fail(n, "pow with a tensor exponent is not supported");
  if (!isa<FloatType>(im.tt(x).getElementType()))
    im.fail(n, "pow of an integer tensor of the step is not supported");
  double e = im.scalarValue(im.in(n, 1));
  RankedTensorType scalar = RankedTensorType::get({}, im.tt(x).getElementType());
  auto sq = [&] { return im.emit1<MulOp>(n, {x, x}); };
  if (e == 1)
    im.setOut(n, x);
  else if (e == 2)
    im.setOut(n, sq());
  else if (e == 3)
    im.setOut(n, im.emit1<MulOp>(n, {sq(), x}));
  else if (e == 0.5)
    im.setOut(n, im.emit1<SqrtOp>(n, {x}, {}, {x.getType()}));
  else if (e == -0.5)
    im.setOut(n, im.emit1<RsqrtOp>(n, {x}, {}, {x.getType()}));
  else if (e == -1)
    im.setOut(n, im.emit1<DivOp>(n, {im.fill(n, 1.0, scalar), x}));
  else if (e == -2)
    im.setOut(n, im.emit1<DivOp>(n, {im.fill(n, 1.0, scalar), sq()}));
  else
    im.fail(n, "pow with exponent " + std::to_string(e) +
                   " is not supported (2, 3, 0.5, -0.5, -1, -2 and 1 are)");
}

/// detach / lift_fresh_copy of a value of the step: an integer or bool
/// tensor (no gradient) passes through; a float one is refused, since the
/// step has no stop-gradient op.
void convertDetach(StepBuilder &im, Call &n) {
  mlir::Value x = im.tensorIn(n, 0);
  if (isa<FloatType>(im.tt(x).getElementType()) && n.kind == "aten::detach")
    im.fail(n, "detach of a float value of the step is not supported (offload has no "
               "stop-gradient op)");
  im.setOut(n, x);
}

void convertMaskedFill(StepBuilder &im, Call &n) {
  mlir::Value x = im.tensorIn(n, 0), m = im.tensorIn(n, 1);
  im.setOut(n, im.emit1<MaskedFillOp>(n, {x, m}, {im.f64("value", im.getDouble(n, 2))},
                                      {x.getType()}));
}

/// where(cond, a, b): a and b in their PyTorch result type (HF's
/// `where(mask, tensor(0.0), finfo.min)` is float32, ids select as ints).
void convertWhere(StepBuilder &im, Call &n) {
  Type et = resultType(im.ctx, {im.promoted(n, 1), im.promoted(n, 2)});
  mlir::Value c = im.tensorIn(n, 0), a = im.tensorAs(n, 1, et), d = im.tensorAs(n, 2, et);
  im.setOut(n, im.emit1<WhereOp>(n, {c, a, d}));
}

/// `~m`, `a & b`, `a | b` (bitwise_* and logical_* alike) on bool tensors:
/// masks. Integer bitwise arithmetic is refused.
mlir::Value boolIn(StepBuilder &im, Call &n, size_t i) {
  mlir::Value v = im.tensorIn(n, i, im.b.getI1Type());
  if (!im.tt(v).getElementType().isInteger(1))
    im.fail(n, "only bool tensors (masks) are supported, not " +
                   [&] {
                     std::string s;
                     llvm::raw_string_ostream os(s);
                     os << im.tt(v).getElementType();
                     return s;
                   }());
  return v;
}

void convertLogicalNot(StepBuilder &im, Call &n) {
  mlir::Value x = boolIn(im, n, 0);
  im.setOut(n, im.emit1<LogicalNotOp>(n, {x}, {}, {x.getType()}));
}

template <typename OpTy>
void convertLogicalBinary(StepBuilder &im, Call &n) {
  mlir::Value a = boolIn(im, n, 0), c = boolIn(im, n, 1);
  im.setOut(n, im.emit1<OpTy>(n, {a, c}));
}

void convertTo(StepBuilder &im, Call &n) {
  // to(self, dtype, non_blocking, copy, memory_format), the device variants
  // and _to_copy(self, dtype=None, ...): only a dtype change is an op.
  mlir::Value x = im.tensorIn(n, 0);
  for (size_t i = 1; i < n.numInputs(); ++i) {
    const Arg &dv = im.in(n, i);
    if (dv.kind != Arg::Dtype)
      continue;
    if (!dv.type)
      im.fail(n, "unsupported target dtype " + dv.s);
    if (dv.type == im.tt(x).getElementType())
      break;
    im.setOut(n, im.emit1<CopyOp>(n, {x}, {}, {im.tt(x).clone(dv.type)}));
    return;
  }
  im.setOut(n, x);
}
/// type_as(self, other): self cast to other's dtype (a copy), else itself.
void convertTypeAs(StepBuilder &im, Call &n) {
  mlir::Value x = im.tensorIn(n, 0);
  Type et = im.tt(im.tensorIn(n, 1)).getElementType();
  if (et == im.tt(x).getElementType()) {
    im.setOut(n, x);
    return;
  }
  im.setOut(n, im.emit1<CopyOp>(n, {x}, {}, {im.tt(x).clone(et)}));
}
} // namespace

void ts::registerElementwiseConversions(OpTable &t) {
  // Unary elementwise ops, one entry each.
  t["aten::relu"] = convertUnary<ReluOp>;
  t["aten::sigmoid"] = convertUnary<SigmoidOp>;
  t["aten::tanh"] = convertUnary<TanhOp>;
  t["aten::exp"] = convertUnary<ExpOp>;
  t["aten::sin"] = convertUnary<SinOp>;
  t["aten::cos"] = convertUnary<CosOp>;
  t["aten::neg"] = convertUnary<NegOp>;
  t["aten::sqrt"] = convertUnary<SqrtOp>;
  t["aten::rsqrt"] = convertUnary<RsqrtOp>;
  t["aten::hardswish"] = convertUnary<HardswishOp>;
  t["aten::silu"] = convertUnary<SiluOp>;
  t["aten::gelu"] = convertGelu;
  t["aten::hardtanh"] = convertHardtanh;
  t["aten::relu6"] = convertRelu6;
  t["aten::hardsigmoid"] = convertHardsigmoid;
  // Binary and scalar arithmetic.
  t["aten::add"] = convertBinary<BinKind::Add>;
  t["aten::sub"] = convertBinary<BinKind::Sub>;
  t["aten::mul"] = convertBinary<BinKind::Mul>;
  t["aten::div"] = convertBinary<BinKind::Div>;
  t["aten::rsub"] = convertRsub;
  t["aten::pow"] = convertPow;
  t["aten::detach"] = convertDetach;
  t["aten::lift_fresh_copy"] = convertDetach;
  t["aten::addcmul"] = convertAddcmul;
  t["aten::masked_fill"] = convertMaskedFill;
  t["aten::where"] = convertWhere;
  t["aten::eq"] = convertCompare<ComparePredicate::eq>;
  t["aten::ne"] = convertCompare<ComparePredicate::ne>;
  t["aten::lt"] = convertCompare<ComparePredicate::lt>;
  t["aten::le"] = convertCompare<ComparePredicate::le>;
  t["aten::gt"] = convertCompare<ComparePredicate::gt>;
  t["aten::ge"] = convertCompare<ComparePredicate::ge>;
  t["aten::cumsum"] = convertCumsum;
  t["aten::copy"] = convertCopy;
  t["aten::to"] = convertTo;
  t["aten::type_as"] = convertTypeAs;
  // Bool masks.
  t["aten::bitwise_not"] = convertLogicalNot;
  t["aten::logical_not"] = convertLogicalNot;
  for (const char *k : {"aten::bitwise_and", "aten::logical_and", "aten::__and__"})
    t[k] = convertLogicalBinary<LogicalAndOp>;
  for (const char *k : {"aten::bitwise_or", "aten::logical_or", "aten::__or__"})
    t[k] = convertLogicalBinary<LogicalOrOp>;
}
