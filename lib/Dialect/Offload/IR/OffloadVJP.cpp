//===- OffloadVJP.cpp - Vector-Jacobian products of offload ops -----------===//
//
// Part of offload. Each forward op lists the values its VJP reads
// (getSavedValues) and builds its VJP from backward ops. The saved sets are
// no larger than PyTorch 1.13's autograd formulas
// (tools/autograd/derivatives.yaml) and smaller where a formula allows:
// ReLU/sigmoid/tanh/softmax save their result, dropout only its seed,
// max-pooling only its indices, additions and views nothing.
//
//===----------------------------------------------------------------------===//

#include "offload/Dialect/Offload/IR/OffloadOps.h"

#include "mlir/IR/Builders.h"

#include <limits>

using namespace mlir;
using namespace mlir::offload;

using Grads = SmallVectorImpl<Value>;

/// Sums `grad` over the dimensions that broadcasting added or expanded, so
/// that it has `target`'s shape (the inverse of numpy broadcasting).
static Value reduceToShape(OpBuilder &b, Location loc, Value grad, Type target) {
  if (!grad || grad.getType() == target)
    return grad;
  auto g = cast<RankedTensorType>(grad.getType());
  auto t = cast<RankedTensorType>(target);
  int64_t lead = g.getRank() - t.getRank();
  SmallVector<int64_t> dims;
  for (int64_t i = 0; i < g.getRank(); ++i)
    if (i < lead || (t.getDimSize(i - lead) == 1 && g.getDimSize(i) != 1))
      dims.push_back(i);
  Value r = grad;
  if (!dims.empty())
    r = ReduceSumOp::create(b, loc, grad, dims, false);
  if (r.getType() != target)
    r = ReshapeOp::create(b, loc, target, r);
  return r;
}

/// For ops reading (input, weight, optional bias): saves input and weight;
/// when no cotangent reaches the result, every operand gets none.
static void saveInputAndWeight(Value input, Value weight, SmallVectorImpl<Value> &s) {
  s.push_back(input);
  s.push_back(weight);
}
static bool noCotangent(Value dy, bool hasBias, Grads &og) {
  if (dy)
    return false;
  og.append({Value(), Value()});
  if (hasBias)
    og.push_back(Value());
  return true;
}

static Value zerosLike(OpBuilder &b, Location loc, Type t) {
  return FillOp::create(b, loc, t, b.getF64FloatAttr(0.0));
}

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

void ExpOp::getSavedValues(SmallVectorImpl<Value> &s) { s.push_back(getResult()); }
LogicalResult ExpOp::buildVJP(OpBuilder &b, ValueRange saved, ValueRange rg, Grads &og) {
  og.push_back(rg[0] ? Value(MulOp::create(b, getLoc(), rg[0], saved[0])) : Value());
  return success();
}

void SinOp::getSavedValues(SmallVectorImpl<Value> &s) { s.push_back(getInput()); }
LogicalResult SinOp::buildVJP(OpBuilder &b, ValueRange saved, ValueRange rg, Grads &og) {
  // d sin(x) = cos(x) dy
  og.push_back(rg[0] ? Value(MulOp::create(b, getLoc(), rg[0],
                                           CosOp::create(b, getLoc(), saved[0])))
                     : Value());
  return success();
}

void CosOp::getSavedValues(SmallVectorImpl<Value> &s) { s.push_back(getInput()); }
LogicalResult CosOp::buildVJP(OpBuilder &b, ValueRange saved, ValueRange rg, Grads &og) {
  // d cos(x) = -sin(x) dy
  if (!rg[0]) {
    og.push_back(Value());
    return success();
  }
  Value s = SinOp::create(b, getLoc(), saved[0]);
  og.push_back(NegOp::create(b, getLoc(), MulOp::create(b, getLoc(), rg[0], s)));
  return success();
}

void NegOp::getSavedValues(SmallVectorImpl<Value> &) {}
LogicalResult NegOp::buildVJP(OpBuilder &b, ValueRange, ValueRange rg, Grads &og) {
  og.push_back(rg[0] ? Value(NegOp::create(b, getLoc(), rg[0])) : Value());
  return success();
}

void SqrtOp::getSavedValues(SmallVectorImpl<Value> &s) { s.push_back(getResult()); }
LogicalResult SqrtOp::buildVJP(OpBuilder &b, ValueRange saved, ValueRange rg, Grads &og) {
  if (!rg[0]) {
    og.push_back(Value());
    return success();
  }
  // d sqrt(x) = dy / (2 sqrt(x))
  Value twoY = MulScalarOp::create(b, getLoc(), saved[0], b.getF64FloatAttr(2.0));
  og.push_back(DivOp::create(b, getLoc(), rg[0], twoY));
  return success();
}

void RsqrtOp::getSavedValues(SmallVectorImpl<Value> &s) { s.push_back(getResult()); }
LogicalResult RsqrtOp::buildVJP(OpBuilder &b, ValueRange saved, ValueRange rg, Grads &og) {
  if (!rg[0]) {
    og.push_back(Value());
    return success();
  }
  // d x^-1/2 = -1/2 x^-3/2 = -1/2 y^3
  Location loc = getLoc();
  Value y2 = MulOp::create(b, loc, saved[0], saved[0]);
  Value y3 = MulOp::create(b, loc, y2, saved[0]);
  Value g = MulOp::create(b, loc, rg[0], y3);
  og.push_back(MulScalarOp::create(b, loc, g, b.getF64FloatAttr(-0.5)));
  return success();
}

void AddScalarOp::getSavedValues(SmallVectorImpl<Value> &) {}
LogicalResult AddScalarOp::buildVJP(OpBuilder &, ValueRange, ValueRange rg, Grads &og) {
  og.push_back(rg[0]);
  return success();
}

void MulScalarOp::getSavedValues(SmallVectorImpl<Value> &) {}
LogicalResult MulScalarOp::buildVJP(OpBuilder &b, ValueRange, ValueRange rg, Grads &og) {
  og.push_back(rg[0] ? Value(MulScalarOp::create(b, getLoc(), rg[0], getValueAttr()))
                     : Value());
  return success();
}

void AddOp::getSavedValues(SmallVectorImpl<Value> &) {}
LogicalResult AddOp::buildVJP(OpBuilder &b, ValueRange, ValueRange rg, Grads &og) {
  og.push_back(reduceToShape(b, getLoc(), rg[0], getLhs().getType()));
  og.push_back(reduceToShape(b, getLoc(), rg[0], getRhs().getType()));
  return success();
}

void SubOp::getSavedValues(SmallVectorImpl<Value> &) {}
LogicalResult SubOp::buildVJP(OpBuilder &b, ValueRange, ValueRange rg, Grads &og) {
  og.push_back(reduceToShape(b, getLoc(), rg[0], getLhs().getType()));
  Value neg = rg[0] ? Value(NegOp::create(b, getLoc(), rg[0])) : Value();
  og.push_back(reduceToShape(b, getLoc(), neg, getRhs().getType()));
  return success();
}

void MulOp::getSavedValues(SmallVectorImpl<Value> &s) {
  s.push_back(getLhs());
  s.push_back(getRhs());
}
LogicalResult MulOp::buildVJP(OpBuilder &b, ValueRange saved, ValueRange rg, Grads &og) {
  if (!rg[0]) {
    og.append({Value(), Value()});
    return success();
  }
  Location loc = getLoc();
  og.push_back(reduceToShape(b, loc, MulOp::create(b, loc, rg[0], saved[1]),
                             getLhs().getType()));
  og.push_back(reduceToShape(b, loc, MulOp::create(b, loc, rg[0], saved[0]),
                             getRhs().getType()));
  return success();
}

void DivOp::getSavedValues(SmallVectorImpl<Value> &s) {
  s.push_back(getLhs());
  s.push_back(getRhs());
}
LogicalResult DivOp::buildVJP(OpBuilder &b, ValueRange saved, ValueRange rg, Grads &og) {
  if (!rg[0]) {
    og.append({Value(), Value()});
    return success();
  }
  Location loc = getLoc();
  Value da = DivOp::create(b, loc, rg[0], saved[1]);
  // d(a/b)/db = -a/b^2 = -(dy/b) * a / b
  Value t = DivOp::create(b, loc, MulOp::create(b, loc, da, saved[0]), saved[1]);
  og.push_back(reduceToShape(b, loc, da, getLhs().getType()));
  og.push_back(reduceToShape(b, loc, NegOp::create(b, loc, t), getRhs().getType()));
  return success();
}

void MaskedFillOp::getSavedValues(SmallVectorImpl<Value> &s) { s.push_back(getMask()); }
LogicalResult MaskedFillOp::buildVJP(OpBuilder &b, ValueRange saved, ValueRange rg,
                                     Grads &og) {
  og.push_back(rg[0] ? Value(MaskedFillOp::create(b, getLoc(), rg[0].getType(), rg[0],
                                                  saved[0], b.getF64FloatAttr(0.0)))
                     : Value());
  og.push_back(Value());
  return success();
}

void WhereOp::getSavedValues(SmallVectorImpl<Value> &s) { s.push_back(getCondition()); }
LogicalResult WhereOp::buildVJP(OpBuilder &b, ValueRange saved, ValueRange rg, Grads &og) {
  og.push_back(Value());
  if (!rg[0]) {
    og.append({Value(), Value()});
    return success();
  }
  Location loc = getLoc();
  Value zeros = zerosLike(b, loc, rg[0].getType());
  og.push_back(reduceToShape(b, loc, WhereOp::create(b, loc, saved[0], rg[0], zeros),
                             getLhs().getType()));
  og.push_back(reduceToShape(b, loc, WhereOp::create(b, loc, saved[0], zeros, rg[0]),
                             getRhs().getType()));
  return success();
}

//===----------------------------------------------------------------------===//
// Reductions and shapes
//===----------------------------------------------------------------------===//

/// Broadcasts the gradient of a reduction back to the input's shape.
static Value unreduce(OpBuilder &b, Location loc, Value grad, RankedTensorType in,
                      ArrayRef<int64_t> dims) {
  SmallVector<int64_t> kept(in.getShape());
  for (int64_t i = 0; i < in.getRank(); ++i)
    if (dims.empty() || llvm::is_contained(dims, i))
      kept[i] = 1;
  auto keptType = RankedTensorType::get(kept, in.getElementType());
  Value g = grad;
  if (g.getType() != keptType)
    g = ReshapeOp::create(b, loc, keptType, g);
  return BroadcastToOp::create(b, loc, in, g);
}

void ReduceSumOp::getSavedValues(SmallVectorImpl<Value> &) {}
LogicalResult ReduceSumOp::buildVJP(OpBuilder &b, ValueRange, ValueRange rg, Grads &og) {
  og.push_back(rg[0] ? unreduce(b, getLoc(), rg[0], getInput().getType(), getDims())
                     : Value());
  return success();
}

void ReduceMeanOp::getSavedValues(SmallVectorImpl<Value> &) {}
LogicalResult ReduceMeanOp::buildVJP(OpBuilder &b, ValueRange, ValueRange rg, Grads &og) {
  if (!rg[0]) {
    og.push_back(Value());
    return success();
  }
  auto in = getInput().getType();
  int64_t count = 1;
  for (int64_t i = 0; i < in.getRank(); ++i)
    if (getDims().empty() || llvm::is_contained(getDims(), i))
      count *= in.getDimSize(i);
  Value g = MulScalarOp::create(b, getLoc(), rg[0], b.getF64FloatAttr(1.0 / double(count)));
  og.push_back(unreduce(b, getLoc(), g, in, getDims()));
  return success();
}

void BroadcastToOp::getSavedValues(SmallVectorImpl<Value> &) {}
LogicalResult BroadcastToOp::buildVJP(OpBuilder &b, ValueRange, ValueRange rg, Grads &og) {
  og.push_back(reduceToShape(b, getLoc(), rg[0], getInput().getType()));
  return success();
}

void ReshapeOp::getSavedValues(SmallVectorImpl<Value> &) {}
LogicalResult ReshapeOp::buildVJP(OpBuilder &b, ValueRange, ValueRange rg, Grads &og) {
  og.push_back(rg[0] ? Value(ReshapeOp::create(b, getLoc(), getInput().getType(), rg[0]))
                     : Value());
  return success();
}

void TransposeOp::getSavedValues(SmallVectorImpl<Value> &) {}
LogicalResult TransposeOp::buildVJP(OpBuilder &b, ValueRange, ValueRange rg, Grads &og) {
  if (!rg[0]) {
    og.push_back(Value());
    return success();
  }
  SmallVector<int64_t> inverse(getPerm().size());
  for (auto [i, p] : llvm::enumerate(getPerm()))
    inverse[p] = i;
  og.push_back(TransposeOp::create(b, getLoc(), rg[0], inverse));
  return success();
}

void CatOp::getSavedValues(SmallVectorImpl<Value> &) {}
LogicalResult CatOp::buildVJP(OpBuilder &b, ValueRange, ValueRange rg, Grads &og) {
  int64_t offset = 0, dim = getDim();
  for (Value in : getInputs()) {
    int64_t size = cast<RankedTensorType>(in.getType()).getDimSize(dim);
    og.push_back(rg[0] ? Value(SliceOp::create(b, getLoc(), rg[0], dim, offset,
                                               offset + size, 1))
                       : Value());
    offset += size;
  }
  return success();
}

void SliceOp::getSavedValues(SmallVectorImpl<Value> &) {}
LogicalResult SliceOp::buildVJP(OpBuilder &b, ValueRange, ValueRange rg, Grads &og) {
  og.push_back(rg[0] ? Value(SliceBackwardOp::create(b, getLoc(), getInput().getType(),
                                                     rg[0], getDim(), getStart(),
                                                     getEnd(), getStep()))
                     : Value());
  return success();
}

void CopyOp::getSavedValues(SmallVectorImpl<Value> &) {}
LogicalResult CopyOp::buildVJP(OpBuilder &b, ValueRange, ValueRange rg, Grads &og) {
  Type in = getInput().getType();
  if (!rg[0] || !detail::isFloatTensor(in)) {
    og.push_back(Value());
    return success();
  }
  // A dtype change is differentiated by the opposite cast.
  og.push_back(rg[0].getType() == in ? rg[0]
                                     : Value(CopyOp::create(b, getLoc(), in, rg[0])));
  return success();
}

//===----------------------------------------------------------------------===//
// Linear algebra
//===----------------------------------------------------------------------===//

void LinearOp::getSavedValues(SmallVectorImpl<Value> &s) {
  saveInputAndWeight(getInput(), getWeight(), s);
}
LogicalResult LinearOp::buildVJP(OpBuilder &b, ValueRange saved, ValueRange rg, Grads &og) {
  Value dy = rg[0];
  if (noCotangent(dy, bool(getBias()), og))
    return success();
  Location loc = getLoc();
  Value x = saved[0], w = saved[1];
  auto xt = getInput().getType();
  auto dyt = cast<RankedTensorType>(dy.getType());
  // dx = dy @ w : [*, M] x [M, K]
  og.push_back(MatmulOp::create(b, loc, dy, w, false, false));
  // dw = dy^T @ x over all leading rows: [M, R] x [R, K]
  int64_t rows = xt.getNumElements() / xt.getShape().back();
  Value dy2 = dy, x2 = x;
  if (dyt.getRank() != 2) {
    dy2 = ReshapeOp::create(b, loc,
                            RankedTensorType::get({rows, dyt.getShape().back()},
                                                  dyt.getElementType()),
                            dy);
    x2 = ReshapeOp::create(b, loc,
                           RankedTensorType::get({rows, xt.getShape().back()},
                                                 xt.getElementType()),
                           x);
  }
  og.push_back(MatmulOp::create(b, loc, dy2, x2, true, false));
  if (getBias()) {
    SmallVector<int64_t> dims;
    for (int64_t i = 0; i + 1 < dyt.getRank(); ++i)
      dims.push_back(i);
    og.push_back(ReduceSumOp::create(b, loc, dy, dims, false));
  }
  return success();
}

void MatmulOp::getSavedValues(SmallVectorImpl<Value> &s) {
  s.push_back(getLhs());
  s.push_back(getRhs());
}
LogicalResult MatmulOp::buildVJP(OpBuilder &b, ValueRange saved, ValueRange rg, Grads &og) {
  Value dc = rg[0];
  if (!dc) {
    og.append({Value(), Value()});
    return success();
  }
  Location loc = getLoc();
  Value a = saved[0], bb = saved[1];
  bool ta = getTransposeA(), tb = getTransposeB();
  Value da, db;
  if (!ta && !tb) {
    da = MatmulOp::create(b, loc, dc, bb, false, true);
    db = MatmulOp::create(b, loc, a, dc, true, false);
  } else if (ta && !tb) {
    da = MatmulOp::create(b, loc, bb, dc, false, true);
    db = MatmulOp::create(b, loc, a, dc, false, false);
  } else if (!ta && tb) {
    da = MatmulOp::create(b, loc, dc, bb, false, false);
    db = MatmulOp::create(b, loc, dc, a, true, false);
  } else {
    da = MatmulOp::create(b, loc, bb, dc, true, true);
    db = MatmulOp::create(b, loc, dc, a, true, true);
  }
  og.push_back(reduceToShape(b, loc, da, getLhs().getType()));
  og.push_back(reduceToShape(b, loc, db, getRhs().getType()));
  return success();
}

//===----------------------------------------------------------------------===//
// Convolution and pooling
//===----------------------------------------------------------------------===//

void Conv2dOp::getSavedValues(SmallVectorImpl<Value> &s) {
  saveInputAndWeight(getInput(), getWeight(), s);
}
LogicalResult Conv2dOp::buildVJP(OpBuilder &b, ValueRange saved, ValueRange rg, Grads &og) {
  Value dy = rg[0];
  if (noCotangent(dy, bool(getBias()), og))
    return success();
  Location loc = getLoc();
  og.push_back(Conv2dBackwardInputOp::create(b, loc, getInput().getType(), dy, saved[1],
                                             getStrideAttr(), getPaddingAttr(),
                                             getDilationAttr(), getGroupsAttr()));
  og.push_back(Conv2dBackwardWeightOp::create(b, loc, getWeight().getType(), dy, saved[0],
                                              getStrideAttr(), getPaddingAttr(),
                                              getDilationAttr(), getGroupsAttr()));
  if (getBias())
    og.push_back(ReduceSumOp::create(b, loc, dy, ArrayRef<int64_t>{0, 2, 3}, false));
  return success();
}

// conv2d_backward_input as a forward op (conv_transpose2d): it is linear in
// each operand, y = J(w)^T x with J(w) the Jacobian of conv2d(., w), so
// <g, y> = <conv2d(g, w), x>: dx = conv2d(g, w) and
// dw = conv2d_backward_weight(x, g) (x in the role of conv2d's output gradient,
// g in the role of its input).
void Conv2dBackwardInputOp::getSavedValues(SmallVectorImpl<Value> &s) {
  saveInputAndWeight(getGradOutput(), getWeight(), s);
}
LogicalResult Conv2dBackwardInputOp::buildVJP(OpBuilder &b, ValueRange saved, ValueRange rg,
                                              Grads &og) {
  Value g = rg[0];
  if (noCotangent(g, false, og))
    return success();
  Location loc = getLoc();
  og.push_back(Conv2dOp::create(b, loc, getGradOutput().getType(), g, saved[1], Value(),
                                getStrideAttr(), getPaddingAttr(), getDilationAttr(),
                                getGroupsAttr()));
  og.push_back(Conv2dBackwardWeightOp::create(b, loc, getWeight().getType(), saved[0], g,
                                              getStrideAttr(), getPaddingAttr(),
                                              getDilationAttr(), getGroupsAttr()));
  return success();
}

void MaxPool2dOp::getSavedValues(SmallVectorImpl<Value> &s) { s.push_back(getIndices()); }
LogicalResult MaxPool2dOp::buildVJP(OpBuilder &b, ValueRange saved, ValueRange rg,
                                    Grads &og) {
  og.push_back(rg[0] ? Value(MaxPool2dBackwardOp::create(b, getLoc(), getInput().getType(),
                                                         rg[0], saved[0]))
                     : Value());
  return success();
}

void AvgPool2dOp::getSavedValues(SmallVectorImpl<Value> &) {}
LogicalResult AvgPool2dOp::buildVJP(OpBuilder &b, ValueRange, ValueRange rg, Grads &og) {
  og.push_back(rg[0] ? Value(AvgPool2dBackwardOp::create(
                           b, getLoc(), getInput().getType(), rg[0], getKernelSizeAttr(),
                           getStrideAttr(), getPaddingAttr(), getCeilModeAttr(),
                           getCountIncludePadAttr()))
                     : Value());
  return success();
}

void AdaptiveAvgPool2dOp::getSavedValues(SmallVectorImpl<Value> &) {}
LogicalResult AdaptiveAvgPool2dOp::buildVJP(OpBuilder &b, ValueRange, ValueRange rg,
                                            Grads &og) {
  og.push_back(rg[0] ? Value(AdaptiveAvgPool2dBackwardOp::create(
                           b, getLoc(), getInput().getType(), rg[0]))
                     : Value());
  return success();
}

//===----------------------------------------------------------------------===//
// Normalization and softmax
//===----------------------------------------------------------------------===//

void BatchNormOp::getSavedValues(SmallVectorImpl<Value> &s) {
  s.append({getInput(), getWeight(), getSaveMean(), getSaveInvstd()});
}
LogicalResult BatchNormOp::buildVJP(OpBuilder &b, ValueRange saved, ValueRange rg,
                                    Grads &og) {
  Value dy = rg[0];
  if (!dy) {
    og.append({Value(), Value(), Value(), Value(), Value()});
    return success();
  }
  auto c = getSaveMean().getType();
  auto bwd = BatchNormBackwardOp::create(b, getLoc(), getInput().getType(), c, c, dy,
                                         saved[0], saved[1], saved[2], saved[3],
                                         getEpsAttr());
  og.append({bwd.getGradInput(), bwd.getGradWeight(), bwd.getGradBias()});
  og.append({Value(), Value()}); // running statistics are state, not trained
  return success();
}

void LayerNormOp::getSavedValues(SmallVectorImpl<Value> &s) {
  s.append({getInput(), getWeight(), getMean(), getRstd()});
}
LogicalResult LayerNormOp::buildVJP(OpBuilder &b, ValueRange saved, ValueRange rg,
                                    Grads &og) {
  Value dy = rg[0];
  if (!dy) {
    og.append({Value(), Value(), Value()});
    return success();
  }
  auto wt = getWeight().getType();
  auto bwd = LayerNormBackwardOp::create(b, getLoc(), getInput().getType(), wt, wt, dy,
                                         saved[0], saved[1], saved[2], saved[3],
                                         getNormalizedNdimAttr());
  og.append({bwd.getGradInput(), bwd.getGradWeight(), bwd.getGradBias()});
  return success();
}

void SoftmaxOp::getSavedValues(SmallVectorImpl<Value> &s) { s.push_back(getResult()); }
LogicalResult SoftmaxOp::buildVJP(OpBuilder &b, ValueRange saved, ValueRange rg, Grads &og) {
  og.push_back(rg[0] ? Value(SoftmaxBackwardOp::create(b, getLoc(), rg[0].getType(), rg[0],
                                                       saved[0], getDimAttr()))
                     : Value());
  return success();
}

void LogSoftmaxOp::getSavedValues(SmallVectorImpl<Value> &s) { s.push_back(getResult()); }
LogicalResult LogSoftmaxOp::buildVJP(OpBuilder &b, ValueRange saved, ValueRange rg,
                                     Grads &og) {
  og.push_back(rg[0] ? Value(LogSoftmaxBackwardOp::create(b, getLoc(), rg[0].getType(),
                                                          rg[0], saved[0], getDimAttr()))
                     : Value());
  return success();
}

//===----------------------------------------------------------------------===//
// Embedding, dropout, losses
//===----------------------------------------------------------------------===//

void EmbeddingOp::getSavedValues(SmallVectorImpl<Value> &s) { s.push_back(getIndices()); }
LogicalResult EmbeddingOp::buildVJP(OpBuilder &b, ValueRange saved, ValueRange rg,
                                    Grads &og) {
  og.push_back(rg[0] ? Value(EmbeddingBackwardOp::create(b, getLoc(), getWeight().getType(),
                                                         rg[0], saved[0],
                                                         getPaddingIdxAttr()))
                     : Value());
  og.push_back(Value());
  return success();
}

void DropoutOp::getSavedValues(SmallVectorImpl<Value> &s) { s.push_back(getSeed()); }
LogicalResult DropoutOp::buildVJP(OpBuilder &b, ValueRange saved, ValueRange rg, Grads &og) {
  og.push_back(rg[0] ? Value(DropoutBackwardOp::create(b, getLoc(), rg[0].getType(), rg[0],
                                                       saved[0], getPAttr(), getOffsetAttr()))
                     : Value());
  og.push_back(Value());
  return success();
}

/// The gradient of a float (additive) attention mask: the gradient of the
/// scores s = scale · q kᵀ + mask, dS = P ∘ (dP - D), summed over the dims
/// the mask is broadcast along. attention_backward does not return dS (its
/// results are fixed), so it is composed here from the ops of the unfused
/// attention, in the element type (f32 for bf16/f16 attention): it materializes [N, Hq, L, S] values, as
/// the unfused path did, but only where the mask depends on a parameter (a
/// learned relative-position bias passed as `attn_mask`, timm's Swin): for
/// any other mask nothing reads it and autodiff drops these ops as dead.
/// P = exp(s - lse) with lse clamped to a finite value, so that a row with
/// no key left (lse -inf) gives P = 0 and no NaN; dropout's keep mask is
/// dropout_backward's over the same [N, Hq, L, S] index space and offset.
/// In the token layout (blhd) q, k, v, out and dout are first transposed to
/// the head layout this composition is written in.
static Value attentionMaskGrad(OpBuilder &b, AttentionOp op, Value dout, ValueRange saved) {
  Location loc = op.getLoc();
  Value q = saved[0], k = saved[1], v = saved[2], out = saved[3], lse = saved[4],
        mask = saved[5];
  if (op.getLayout() == AttentionLayout::blhd) {
    auto heads = [&](Value x) -> Value {
      return TransposeOp::create(b, loc, x, b.getDenseI64ArrayAttr({0, 2, 1, 3}));
    };
    q = heads(q);
    k = heads(k);
    v = heads(v);
    out = heads(out);
    dout = heads(dout);
  }
  // bf16/f16 attention (mixed precision): the probabilities are recomputed
  // in f32, from the widened operands and the f32 log-sum-exp, as the
  // attention kernels compute them (f32 inside, one rounding of each
  // result), and the mask's gradient is rounded to the mask's type once,
  // after the sum over its broadcast dimensions.
  Type maskType = mask.getType();
  auto widened = [&](Value x) -> Value {
    auto t = cast<RankedTensorType>(x.getType());
    if (t.getElementType().getIntOrFloatBitWidth() >= 32)
      return x;
    return CopyOp::create(b, loc, t.clone(b.getF32Type()), x);
  };
  q = widened(q);
  k = widened(k);
  v = widened(v);
  out = widened(out);
  dout = widened(dout);
  mask = widened(mask);
  auto qt = cast<RankedTensorType>(q.getType());
  auto kt = cast<RankedTensorType>(k.getType());
  auto vt = cast<RankedTensorType>(v.getType());
  Type et = qt.getElementType();
  int64_t n = qt.getDimSize(0), hq = qt.getDimSize(1), l = qt.getDimSize(2),
          e = qt.getDimSize(3), hkv = kt.getDimSize(1), s = kt.getDimSize(2),
          ev = vt.getDimSize(3), g = hq / hkv;
  auto reshape = [&](Value x, ArrayRef<int64_t> shape) -> Value {
    auto t = RankedTensorType::get(shape, et);
    return x.getType() == t ? x : Value(ReshapeOp::create(b, loc, t, x));
  };
  // Query heads of one key/value head are consecutive: [N, Hkv, G·L, E].
  Value sc = MatmulOp::create(b, loc, reshape(q, {n, hkv, g * l, e}), k, false, true);
  sc = reshape(sc, {n, hq, l, s});
  sc = MulScalarOp::create(b, loc, sc, op.getScaleAttr());
  sc = AddOp::create(b, loc, sc, mask);
  if (op.getIsCausal()) {
    SmallVector<bool> upper(size_t(l * s));
    for (int64_t i = 0; i < l; ++i)
      for (int64_t j = i + 1; j < s; ++j)
        upper[size_t(i * s + j)] = true;
    auto ut = RankedTensorType::get({l, s}, b.getI1Type());
    Value c = ConstantOp::create(b, loc, ut, DenseElementsAttr::get(ut, ArrayRef<bool>(upper)));
    sc = MaskedFillOp::create(b, loc, sc.getType(), sc, c,
                              b.getF64FloatAttr(-std::numeric_limits<double>::infinity()));
  }
  Value finiteLse = HardtanhOp::create(b, loc, lse.getType(), lse, b.getF64FloatAttr(-3.0e38),
                                       b.getF64FloatAttr(3.0e38));
  Value p = ExpOp::create(b, loc, SubOp::create(b, loc, sc, reshape(finiteLse, {n, hq, l, 1})));
  Value dp = MatmulOp::create(b, loc, reshape(dout, {n, hkv, g * l, ev}), v, false, true);
  dp = reshape(dp, {n, hq, l, s});
  if (op.getDropoutP().convertToDouble() > 0)
    dp = DropoutBackwardOp::create(b, loc, dp.getType(), dp, saved.back(),
                                   op.getDropoutPAttr(), op.getOffsetAttr());
  Value d = ReduceSumOp::create(b, loc, MulOp::create(b, loc, dout, out),
                                ArrayRef<int64_t>{3}, true);
  Value ds = MulOp::create(b, loc, p, SubOp::create(b, loc, dp, d));
  Value dmask = reduceToShape(b, loc, ds, mask.getType());
  if (dmask.getType() != maskType)
    dmask = CopyOp::create(b, loc, maskType, dmask);
  return dmask;
}

void AttentionOp::getSavedValues(SmallVectorImpl<Value> &s) {
  s.append({getQuery(), getKey(), getValue(), getOut(), getLse()});
  s.append(getExtras().begin(), getExtras().end());
}
LogicalResult AttentionOp::buildVJP(OpBuilder &b, ValueRange saved, ValueRange rg, Grads &og) {
  // Only `out` has a cotangent: `lse` is a statistic no user reads.
  size_t numOperands = 3 + getExtras().size();
  if (!rg[0]) {
    og.append(numOperands, Value());
    return success();
  }
  auto bwd = AttentionBackwardOp::create(
      b, getLoc(), getQuery().getType(), getKey().getType(), getValue().getType(), rg[0],
      saved[0], saved[1], saved[2], saved[3], saved[4], saved.drop_front(5), getScaleAttr(),
      getIsCausalAttr(), getHasMaskAttr(), getDropoutPAttr(), getOffsetAttr(),
      getLayoutAttr());
  og.append({bwd.getGradQuery(), bwd.getGradKey(), bwd.getGradValue()});
  // A float mask gets its gradient (dead, and dropped, unless the mask
  // depends on a parameter); a boolean mask and the seed get none.
  Value mask = getHasMask() ? getExtras()[0] : Value();
  bool floatMask = mask && isa<FloatType>(cast<RankedTensorType>(mask.getType()).getElementType());
  if (floatMask && !mask.getDefiningOp<ConstantOp>() && !mask.getDefiningOp<FillOp>())
    og.push_back(attentionMaskGrad(b, *this, rg[0], saved));
  else if (mask)
    og.push_back(Value());
  if (getDropoutP().convertToDouble() > 0)
    og.push_back(Value());
  return success();
}

void CrossEntropyOp::getSavedValues(SmallVectorImpl<Value> &s) {
  s.push_back(getLogits());
  s.push_back(getTarget());
}
LogicalResult CrossEntropyOp::buildVJP(OpBuilder &b, ValueRange saved, ValueRange rg,
                                       Grads &og) {
  og.push_back(rg[0] ? Value(CrossEntropyBackwardOp::create(
                           b, getLoc(), getLogits().getType(), rg[0], saved[0], saved[1],
                           getReductionAttr(), getIgnoreIndexAttr(),
                           getLabelSmoothingAttr()))
                     : Value());
  og.push_back(Value());
  return success();
}

void NllLossOp::getSavedValues(SmallVectorImpl<Value> &s) {
  s.push_back(getInput());
  s.push_back(getTarget());
}
LogicalResult NllLossOp::buildVJP(OpBuilder &b, ValueRange saved, ValueRange rg, Grads &og) {
  og.push_back(rg[0] ? Value(NllLossBackwardOp::create(b, getLoc(), getInput().getType(),
                                                       rg[0], saved[0], saved[1],
                                                       getReductionAttr(),
                                                       getIgnoreIndexAttr()))
                     : Value());
  og.push_back(Value());
  return success();
}

void MseLossOp::getSavedValues(SmallVectorImpl<Value> &s) {
  s.push_back(getInput());
  s.push_back(getTarget());
}
LogicalResult MseLossOp::buildVJP(OpBuilder &b, ValueRange saved, ValueRange rg, Grads &og) {
  if (!rg[0]) {
    og.append({Value(), Value()});
    return success();
  }
  Value dx = MseLossBackwardOp::create(b, getLoc(), getInput().getType(), rg[0], saved[0],
                                       saved[1], getReductionAttr());
  og.push_back(dx);
  og.push_back(NegOp::create(b, getLoc(), dx));
  return success();
}
