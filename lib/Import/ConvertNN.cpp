//===- ConvertNN.cpp - Neural-network layer ATen ops ----------------------===//
//
// Part of offload. Linear algebra (linear, matmul/bmm/mm, baddbmm),
// convolution (transposed convolution as conv2d_backward_input), pooling,
// normalization, softmax, dropout (seeded Philox, one offset range per call
// site), embedding and the losses.
//
//===----------------------------------------------------------------------===//
#include "OpBuilder.h"

#include <cmath>
#include <limits>

using namespace mlir;
using namespace mlir::offload;
using namespace ::offload::import;
using namespace ::offload::import::ts;

namespace {

/// linear(x, weight, bias). A 1-D x ([K], one sample without a batch dim,
/// which nn.Linear accepts) runs as [1, K] and its [1, N] result is read as
/// [N]: the op's VJP multiplies with a leading batch dim (a [K] x failed
/// autodiff: "matmul operands must have rank >= 2").
void convertLinear(StepBuilder &im, Call &n) {
  mlir::Value x = im.tensorIn(n, 0), w = im.tensorIn(n, 1);
  bool vector = im.tt(x).getRank() == 1;
  if (vector)
    x = im.reshape(n, x, {1, im.tt(x).getDimSize(0)});
  SmallVector<mlir::Value> ops = {x, w};
  if (mlir::Value bias = im.optTensorIn(n, 2))
    ops.push_back(bias);
  mlir::Value y = im.emit1<LinearOp>(n, ops);
  if (vector)
    y = im.reshape(n, y, {im.tt(y).getDimSize(1)});
  im.setOut(n, y);
}

/// matmul/bmm/mm. A transpose of the last two dims feeding an operand
/// folds into the op's transpose flag by MatmulOp's canonicalization, which
/// the importer applies to the step (StepSignature.cpp).
void convertMatmul(StepBuilder &im, Call &n) {
  mlir::Value a = im.tensorIn(n, 0), c = im.tensorIn(n, 1);
  if (im.tt(a).getRank() < 2 || im.tt(c).getRank() < 2)
    im.fail(n, "matmul of a 1-D tensor is not supported");
  im.setOut(n, im.emit1<MatmulOp>(n, {a, c}));
}

void convertBaddbmm(StepBuilder &im, Call &n) {
  // baddbmm(input, b1, b2, beta, alpha) = beta * input + alpha * (b1 @ b2).
  mlir::Value x = im.tensorIn(n, 0), a = im.tensorIn(n, 1), c = im.tensorIn(n, 2);
  double beta = n.numInputs() > 3 ? im.getDouble(n, 3) : 1.0;
  double alpha = n.numInputs() > 4 ? im.getDouble(n, 4) : 1.0;
  mlir::Value p = im.emit1<MatmulOp>(n, {a, c});
  if (alpha != 1.0)
    p = im.emit1<MulScalarOp>(n, {p}, {im.f64("value", alpha)}, {p.getType()});
  if (beta != 1.0)
    x = im.emit1<MulScalarOp>(n, {x}, {im.f64("value", beta)}, {x.getType()});
  im.setOut(n, im.emit1<AddOp>(n, {p, x}));
}

void convertConvCommon(StepBuilder &im, Call &n, std::vector<int64_t> stride,
                       std::vector<int64_t> padding, std::vector<int64_t> dilation,
                       int64_t groups) {
  mlir::Value x = im.tensorIn(n, 0), w = im.tensorIn(n, 1);
  auto xt = im.tt(x), wt = im.tt(w);
  // 1-D convolution (conv1d, Whisper's and wav2vec's front ends): x [N, C, L]
  // and w [O, C/groups, K] run as a 2-D convolution of height 1, x [N, C, 1,
  // L] and w [O, C/groups, 1, K] with stride, padding and dilation (1, s),
  // (0, p), (1, d), and the [N, O, 1, L'] result is read as [N, O, L'].
  // Which one the weight's rank says (an unbatched input is refused).
  bool oneD = wt.getRank() == 3;
  if (oneD) {
    if (xt.getRank() != 3)
      im.fail(n, "1-D convolution: the input has rank " + std::to_string(xt.getRank()) +
                     " (expected 3: N, C, L)");
    auto lift = [&](std::vector<int64_t> v, int64_t first, const char *what) {
      if (v.size() != 1)
        im.fail(n, std::string("1-D convolution: ") + what + " must have 1 value");
      return std::vector<int64_t>{first, v[0]};
    };
    stride = lift(stride, 1, "stride");
    padding = lift(padding, 0, "padding");
    dilation = lift(dilation, 1, "dilation");
    x = im.reshape(n, x, {xt.getDimSize(0), xt.getDimSize(1), 1, xt.getDimSize(2)});
    w = im.reshape(n, w, {wt.getDimSize(0), wt.getDimSize(1), 1, wt.getDimSize(2)});
  } else if (xt.getRank() != 4 || wt.getRank() != 4) {
    im.fail(n, "only 2-D convolution is supported; the input has rank " +
                   std::to_string(xt.getRank()) + " (expected 4: N, C, H, W)");
  }
  auto two = [&](std::vector<int64_t> v, const char *what) {
    if (v.size() == 1)
      v.push_back(v[0]);
    if (v.size() != 2)
      im.fail(n, std::string(what) + " must have 2 values");
    return v;
  };
  SmallVector<mlir::Value> ops = {x, w};
  if (mlir::Value bias = im.optTensorIn(n, 2))
    ops.push_back(bias);
  mlir::Value y = im.emit1<Conv2dOp>(n, ops,
                                     {im.i64s("stride", two(stride, "stride")),
                                      im.i64s("padding", two(padding, "padding")),
                                      im.i64s("dilation", two(dilation, "dilation")),
                                      im.i64("groups", groups)});
  if (oneD) {
    auto yt = im.tt(y);
    y = im.reshape(n, y, {yt.getDimSize(0), yt.getDimSize(1), yt.getDimSize(3)});
  }
  im.setOut(n, y);
}

/// conv_transpose2d(x, w, bias, stride, padding, output_padding, groups,
/// dilation) as conv2d_backward_input (the adjoint of conv2d; see the op's
/// description) plus the bias. x [N, C_in, H, W], w [C_in, C_out/groups, KH,
/// KW] -> [N, C_out, (H-1)s - 2p + d(KH-1) + output_padding + 1, ...]
/// (torch.nn.ConvTranspose2d's formula).
void convertConvTransposeCommon(StepBuilder &im, Call &n, std::vector<int64_t> stride,
                                std::vector<int64_t> padding,
                                std::vector<int64_t> outputPadding,
                                std::vector<int64_t> dilation, int64_t groups) {
  mlir::Value x = im.tensorIn(n, 0), w = im.tensorIn(n, 1);
  auto xt = im.tt(x), wt = im.tt(w);
  if (xt.getRank() != 4 || wt.getRank() != 4)
    im.fail(n, "only 2-D transposed convolution is supported; the input has rank " +
                   std::to_string(xt.getRank()) + " (expected 4: N, C, H, W)");
  auto two = [&](std::vector<int64_t> v, const char *what) {
    if (v.size() == 1)
      v.push_back(v[0]);
    if (v.size() != 2)
      im.fail(n, std::string(what) + " must have 2 values");
    return v;
  };
  stride = two(stride, "stride");
  padding = two(padding, "padding");
  outputPadding = two(outputPadding, "output_padding");
  dilation = two(dilation, "dilation");
  if (groups < 1 || wt.getDimSize(0) != xt.getDimSize(1))
    im.fail(n, "transposed convolution: the input has " + std::to_string(xt.getDimSize(1)) +
                   " channels, the weight expects " + std::to_string(wt.getDimSize(0)));
  SmallVector<int64_t> shape = {xt.getDimSize(0), wt.getDimSize(1) * groups, 0, 0};
  for (int i = 0; i < 2; ++i) {
    if (outputPadding[i] < 0 || outputPadding[i] >= std::max(stride[i], dilation[i]))
      im.fail(n, "output_padding must be smaller than stride or dilation");
    shape[2 + i] = (xt.getDimSize(2 + i) - 1) * stride[i] - 2 * padding[i] +
                   dilation[i] * (wt.getDimSize(2 + i) - 1) + outputPadding[i] + 1;
    if (shape[2 + i] <= 0)
      im.fail(n, "transposed convolution gives an empty output");
  }
  mlir::Value y = im.emit1<Conv2dBackwardInputOp>(
      n, {x, w},
      {im.i64s("stride", stride), im.i64s("padding", padding),
       im.i64s("dilation", dilation), im.i64("groups", groups)},
      {RankedTensorType::get(shape, xt.getElementType())});
  if (mlir::Value bias = im.optTensorIn(n, 2))
    y = im.emit1<AddOp>(n, {y, im.reshape(n, bias, {1, shape[1], 1, 1})});
  im.setOut(n, y);
}

void convertConvolution(StepBuilder &im, Call &n) {
  // _convolution(input, weight, bias, stride, padding, dilation, transposed,
  //              output_padding, groups, ...)
  if (im.getBool(n, 6)) {
    convertConvTransposeCommon(im, n, im.getInts(n, 3), im.getInts(n, 4), im.getInts(n, 7),
                               im.getInts(n, 5), im.getInt(n, 8));
    return;
  }
  convertConvCommon(im, n, im.getInts(n, 3), im.getInts(n, 4), im.getInts(n, 5),
                    im.getInt(n, 8));
}

void convertConv2d(StepBuilder &im, Call &n) {
  // conv2d(input, weight, bias, stride, padding, dilation, groups)
  if (im.in(n, 4).kind == Arg::String)
    im.fail(n, "string padding is not supported");
  convertConvCommon(im, n, im.getInts(n, 3), im.getInts(n, 4), im.getInts(n, 5),
                    im.getInt(n, 6));
}

void convertConv1d(StepBuilder &im, Call &n) {
  // conv1d(input, weight, bias, stride, padding, dilation, groups)
  if (im.in(n, 4).kind == Arg::String)
    im.fail(n, "string padding is not supported");
  convertConvCommon(im, n, im.getInts(n, 3), im.getInts(n, 4), im.getInts(n, 5),
                    im.getInt(n, 6));
}

void convertConvTranspose2d(StepBuilder &im, Call &n) {
  // conv_transpose2d(input, weight, bias, stride, padding, output_padding,
  //                  groups, dilation)
  convertConvTransposeCommon(im, n, im.getInts(n, 3), im.getInts(n, 4), im.getInts(n, 5),
                             im.getInts(n, 7), im.getInt(n, 6));
}

void convertBatchNorm(StepBuilder &im, Call &n) {
  // batch_norm(input, weight, bias, running_mean, running_var, training,
  //            momentum, eps, cudnn_enabled)
  if (!im.getBool(n, 5))
    im.fail(n, "eval-mode batch norm is not supported: save the model in train mode");
  Arg rmV = im.in(n, 3), rvV = im.in(n, 4);
  if (rmV.isNone() != rvV.isNone())
    im.fail(n, "batch norm with only one of running_mean and running_var is not supported");
  // Without running statistics (F.batch_norm(x, None, None, training=True),
  // timm's weight-standardized convolutions): the batch statistics alone;
  // the op gets zeros and ones as running statistics whose updates are
  // dropped.
  bool stats = !rmV.isNone();
  mlir::Value x = im.tensorIn(n, 0);
  auto xt = im.tt(x);
  if (xt.getRank() < 2)
    im.fail(n, "batch norm input must have rank >= 2");
  auto ct = RankedTensorType::get({xt.getDimSize(1)}, xt.getElementType());
  mlir::Value w = im.in(n, 1).isNone() ? im.fill(n, 1.0, ct) : im.tensorIn(n, 1);
  mlir::Value bias = im.in(n, 2).isNone() ? im.fill(n, 0.0, ct) : im.tensorIn(n, 2);
  mlir::Value rm = stats ? im.tensorIn(n, 3) : im.fill(n, 0.0, ct);
  mlir::Value rv = stats ? im.tensorIn(n, 4) : im.fill(n, 1.0, ct);
  double momentum = im.in(n, 6).isNone() ? 0.0 : im.getDouble(n, 6);
  if (stats && im.in(n, 6).isNone())
    im.fail(n, "batch norm with momentum=None (cumulative average) is not supported");
  Operation *op = im.emit<BatchNormOp>(n, {x, w, bias, rm, rv},
                                       {im.f64("momentum", momentum),
                                        im.f64("eps", im.getDouble(n, 7))});
  im.setOut(n, op->getResult(0));
  if (!stats)
    return;
  im.updateState(rmV, op->getResult(3));
  im.updateState(rvV, op->getResult(4));
}

void convertLayerNorm(StepBuilder &im, Call &n) {
  // layer_norm(input, normalized_shape, weight, bias, eps, cudnn_enable)
  mlir::Value x = im.tensorIn(n, 0);
  std::vector<int64_t> shape = im.getInts(n, 1);
  auto xt = im.tt(x);
  auto wt = RankedTensorType::get(shape, xt.getElementType());
  mlir::Value w = im.in(n, 2).isNone() ? im.fill(n, 1.0, wt) : im.tensorIn(n, 2);
  mlir::Value bias = im.in(n, 3).isNone() ? im.fill(n, 0.0, wt) : im.tensorIn(n, 3);
  Operation *op = im.emit<LayerNormOp>(
      n, {x, w, bias},
      {im.i64("normalized_ndim", static_cast<int64_t>(shape.size())),
       im.f64("eps", im.getDouble(n, 4))});
  im.setOut(n, op->getResult(0));
}

template <typename OpTy>
void convertSoftmax(StepBuilder &im, Call &n) {
  mlir::Value x = im.tensorIn(n, 0);
  int64_t dim = im.getInt(n, 1);
  int64_t r = im.tt(x).getRank();
  if (dim < 0)
    dim += r;
  // softmax(x, dim, dtype): x is cast to dtype first (ViT's and BERT's
  // `softmax(..., dtype=torch.float32)` on float32 scores: no cast).
  if (n.numInputs() > 2 && !im.in(n, 2).isNone()) {
    const Arg &dt = im.in(n, 2);
    if (dt.kind != Arg::Dtype || !dt.type || !isa<FloatType>(dt.type))
      im.fail(n, "softmax with a dtype argument other than float32 or float64 is not supported");
    if (dt.type != im.tt(x).getElementType())
      x = im.emit1<CopyOp>(n, {x}, {}, {im.tt(x).clone(dt.type)});
  }
  im.setOut(n, im.emit1<OpTy>(n, {x}, {im.i64("dim", dim)}, {x.getType()}));
}

void convertMaxPool(StepBuilder &im, Call &n) {
  // max_pool2d(input, kernel_size, stride, padding, dilation, ceil_mode)
  mlir::Value x = im.tensorIn(n, 0);
  auto two = [](std::vector<int64_t> v) {
    if (v.size() == 1)
      v.push_back(v[0]);
    return v;
  };
  std::vector<int64_t> k = two(im.getInts(n, 1)), s = two(im.getInts(n, 2));
  if (s.empty())
    s = k;
  Operation *op = im.emit<MaxPool2dOp>(
      n, {x},
      {im.i64s("kernel_size", k), im.i64s("stride", s),
       im.i64s("padding", two(im.getInts(n, 3))),
       im.i64s("dilation", two(im.getInts(n, 4))),
       im.attr("ceil_mode", im.b.getBoolAttr(im.getBool(n, 5)))});
  im.setOut(n, op->getResult(0));
}

void convertAvgPool(StepBuilder &im, Call &n) {
  // avg_pool2d(input, kernel_size, stride, padding, ceil_mode,
  //            count_include_pad, divisor_override)
  mlir::Value x = im.tensorIn(n, 0);
  auto two = [](std::vector<int64_t> v) {
    if (v.size() == 1)
      v.push_back(v[0]);
    return v;
  };
  std::vector<int64_t> k = two(im.getInts(n, 1)), s = two(im.getInts(n, 2));
  if (s.empty())
    s = k;
  if (n.numInputs() > 6 && !im.in(n, 6).isNone())
    im.fail(n, "avg_pool2d with divisor_override is not supported");
  im.setOut(n, im.emit1<AvgPool2dOp>(
                   n, {x},
                   {im.i64s("kernel_size", k), im.i64s("stride", s),
                    im.i64s("padding", two(im.getInts(n, 3))),
                    im.attr("ceil_mode", im.b.getBoolAttr(im.getBool(n, 4))),
                    im.attr("count_include_pad", im.b.getBoolAttr(im.getBool(n, 5)))}));
}

void convertAdaptiveAvgPool(StepBuilder &im, Call &n) {
  mlir::Value x = im.tensorIn(n, 0);
  std::vector<int64_t> os = im.getInts(n, 1);
  if (os.size() == 1)
    os.push_back(os[0]);
  im.setOut(n, im.emit1<AdaptiveAvgPool2dOp>(n, {x}, {im.i64s("output_size", os)}));
}


void convertDropout(StepBuilder &im, Call &n) {
  // dropout(input, p, train)
  mlir::Value x = im.tensorIn(n, 0);
  double p = im.getDouble(n, 1);
  bool train = im.getBool(n, 2);
  if (!train || p == 0.0) {
    im.setOut(n, x);
    return;
  }
  if (p < 0.0 || p >= 1.0)
    im.fail(n, "dropout probability must be in [0, 1)");
  mlir::Value s = im.seed(n);
  int64_t off = im.nextDropoutOffset(im.tt(x).getNumElements());
  im.setOut(n, im.emit1<DropoutOp>(n, {x, s}, {im.f64("p", p), im.i64("offset", off)},
                                   {x.getType()}));
}

void convertEmbedding(StepBuilder &im, Call &n) {
  // embedding(weight, indices, padding_idx, scale_grad_by_freq, sparse)
  // padding_idx: that row gets no gradient (the lookup is unchanged).
  mlir::Value w = im.tensorIn(n, 0), idx = im.tensorIn(n, 1);
  int64_t pad = n.numInputs() > 2 && !im.in(n, 2).isNone() ? im.getInt(n, 2) : -1;
  int64_t rows = im.tt(w).getRank() > 0 ? im.tt(w).getDimSize(0) : 0;
  if (pad < -1 || pad >= rows)
    im.fail(n, "padding_idx " + std::to_string(pad) + " out of range for " +
                   std::to_string(rows) + " rows");
  if (n.numInputs() > 3 && im.getBool(n, 3))
    im.fail(n, "embedding with scale_grad_by_freq is not supported");
  SmallVector<NamedAttribute> attrs;
  if (pad != -1)
    attrs.push_back(im.i64("padding_idx", pad));
  im.setOut(n, im.emit1<EmbeddingOp>(n, {w, idx}, attrs));
}

Attribute reductionAttr(StepBuilder &im, Call &n, int64_t r) {
  if (r == 0)
    im.fail(n, "loss with reduction='none' is not supported");
  return ReductionAttr::get(&im.ctx, r == 2 ? Reduction::sum : Reduction::mean);
}

void convertCrossEntropy(StepBuilder &im, Call &n) {
  // cross_entropy_loss(self, target, weight, reduction, ignore_index,
  //                    label_smoothing)
  if (!im.in(n, 2).isNone())
    im.fail(n, "cross-entropy with class weights is not supported");
  mlir::Value z = im.tensorIn(n, 0), t = im.tensorIn(n, 1);
  if (!isa<FloatType>(im.tt(t).getElementType()))
    classDimLast(im, n, z, t);
  im.setOut(n, im.emit1<CrossEntropyOp>(
                   n, {z, t},
                   {im.attr("reduction", reductionAttr(im, n, im.getInt(n, 3))),
                    im.i64("ignore_index", im.getInt(n, 4)),
                    im.f64("label_smoothing", im.getDouble(n, 5))}));
}

void convertNllLoss(StepBuilder &im, Call &n) {
  // nll_loss(self, target, weight, reduction, ignore_index)
  if (!im.in(n, 2).isNone())
    im.fail(n, "nll_loss with class weights is not supported");
  mlir::Value z = im.tensorIn(n, 0), t = im.tensorIn(n, 1);
  classDimLast(im, n, z, t);
  im.setOut(n, im.emit1<NllLossOp>(
                   n, {z, t},
                   {im.attr("reduction", reductionAttr(im, n, im.getInt(n, 3))),
                    im.i64("ignore_index", im.getInt(n, 4))}));
}

void convertMseLoss(StepBuilder &im, Call &n) {
  mlir::Value z = im.tensorIn(n, 0), t = im.tensorIn(n, 1);
  im.setOut(n, im.emit1<MseLossOp>(
                   n, {z, t}, {im.attr("reduction", reductionAttr(im, n, im.getInt(n, 2)))}));
}

/// scaled_dot_product_attention(q, k, v, attn_mask, dropout_p, is_causal,
/// scale, enable_gqa) as one offload.attention, whose saved values are q, k,
/// v, the output and the row log-sum-exp (never the L x S probabilities).
/// q [..., Hq, L, E], k [..., Hkv, S, E], v [..., Hkv, S, Ev]: dim -3 is the
/// head dim (PyTorch's enable_gqa repeats key/value along it) and the dims
/// before it are batch dims, collapsed into the op's N (a rank-3 [B, L, E]
/// input is [1, B, L, E]; rank 2 is [1, 1, L, E]); the result is reshaped
/// back. Key/value batch dims of size 1 broadcast (a copy), a key/value head
/// dim of 1 is the op's Hkv = 1 with or without enable_gqa, as PyTorch's
/// matmul broadcasting gives the same. The mask: bool (true takes part) or
/// float (added to the scores, cast to the query's type), broadcastable to
/// [..., Hq, L, S]; it stays broadcast (not materialized) unless its own
/// batch dims are a mix of 1 and full sizes. Dropout draws from the step's
/// Philox stream over the N·Hq·L·S probabilities.
void convertSdpa(StepBuilder &im, Call &n) {
  mlir::Value q = im.tensorIn(n, 0), k = im.tensorIn(n, 1), v = im.tensorIn(n, 2);
  auto qt = im.tt(q), kt = im.tt(k), vt = im.tt(v);
  int64_t r = qt.getRank();
  if (r < 2 || kt.getRank() != r || vt.getRank() != r)
    im.fail(n, "query, key and value must have the same rank >= 2");
  if (!isa<FloatType>(qt.getElementType()) || kt.getElementType() != qt.getElementType() ||
      vt.getElementType() != qt.getElementType())
    im.fail(n, "query, key and value must have one float element type");
  bool gqa = n.numInputs() > 7 && im.getBool(n, 7);
  auto shapeStr = [](ArrayRef<int64_t> s) {
    std::string out = "[";
    for (size_t i = 0; i < s.size(); ++i)
      out += (i ? ", " : "") + std::to_string(s[i]);
    return out + "]";
  };
  // [batch..., H, L, E] of each operand, the batch dims collapsed.
  auto dims4 = [&](RankedTensorType t) {
    ArrayRef<int64_t> s = t.getShape();
    int64_t batch = 1;
    for (int64_t i = 0; i + 3 < r; ++i)
      batch *= s[i];
    return SmallVector<int64_t, 4>{batch, r >= 3 ? s[r - 3] : 1, s[r - 2], s[r - 1]};
  };
  ArrayRef<int64_t> qs = qt.getShape();
  ArrayRef<int64_t> qBatch = qs.take_front(std::max<int64_t>(0, r - 3));
  // Key/value batch dims broadcast to the query's (PyTorch's matmul rule).
  auto batchLike = [&](mlir::Value x) {
    auto xt = im.tt(x);
    ArrayRef<int64_t> xb = xt.getShape().take_front(qBatch.size());
    if (xb == qBatch)
      return x;
    for (size_t i = 0; i < qBatch.size(); ++i)
      if (xb[i] != qBatch[i] && xb[i] != 1)
        im.fail(n, "key/value " + shapeStr(xt.getShape()) + " and query " + shapeStr(qs) +
                       " have batch dims that do not broadcast");
    SmallVector<int64_t> to(qBatch);
    to.append(xt.getShape().begin() + qBatch.size(), xt.getShape().end());
    return im.emit1<BroadcastToOp>(n, {x}, {}, {RankedTensorType::get(to, xt.getElementType())});
  };
  k = batchLike(k);
  v = batchLike(v);
  SmallVector<int64_t, 4> q4 = dims4(qt), k4 = dims4(im.tt(k)), v4 = dims4(im.tt(v));
  int64_t hq = q4[1], hkv = k4[1], L = q4[2], S = k4[2], E = q4[3];
  if (k4[3] != E)
    im.fail(n, "query " + shapeStr(qs) + " and key " + shapeStr(kt.getShape()) +
                   " have different head sizes");
  if (v4[1] != hkv || v4[2] != S)
    im.fail(n, "key " + shapeStr(kt.getShape()) + " and value " + shapeStr(vt.getShape()) +
                   " must have the same heads and length");
  if (hkv != hq && hkv != 1) {
    if (!gqa)
      im.fail(n, "query heads (" + std::to_string(hq) + ") and key/value heads (" +
                     std::to_string(hkv) + ") differ: grouped-query attention needs "
                     "enable_gqa=True");
    if (hkv == 0 || hq % hkv != 0)
      im.fail(n, "query heads (" + std::to_string(hq) +
                     ") must be a multiple of key/value heads (" + std::to_string(hkv) + ")");
  }
  q = im.reshape(n, q, q4);
  k = im.reshape(n, k, k4);
  v = im.reshape(n, v, v4);

  SmallVector<mlir::Value> extras;
  bool hasMask = n.numInputs() > 3 && !im.in(n, 3).isNone();
  if (hasMask) {
    mlir::Value m = im.tensorIn(n, 3);
    auto mt = im.tt(m);
    Type et = mt.getElementType();
    if (isa<FloatType>(et)) {
      if (et != qt.getElementType())
        m = im.emit1<CopyOp>(n, {m}, {}, {mt.clone(qt.getElementType())});
    } else if (!et.isInteger(1)) {
      im.fail(n, "attn_mask must be bool (true takes part) or float (added to the scores)");
    }
    mt = im.tt(m);
    // Right-aligned against [batch..., Hq, L, S] (the query's rank).
    SmallVector<int64_t> full(qs.drop_back());
    full.push_back(S);
    if (mt.getRank() > r)
      im.fail(n, "attn_mask " + shapeStr(mt.getShape()) + " has more dims than the scores " +
                     shapeStr(full));
    SmallVector<int64_t> ms(size_t(r - mt.getRank()), 1);
    ms.append(mt.getShape().begin(), mt.getShape().end());
    for (int64_t i = 0; i < r; ++i)
      if (ms[i] != 1 && ms[i] != full[i])
        im.fail(n, "attn_mask " + shapeStr(mt.getShape()) + " does not broadcast to the scores " +
                       shapeStr(full));
    // Rank <= 4: the op right-aligns the mask against [N, Hq, L, S] as
    // PyTorch does against the scores; it stays broadcast.
    if (r > 4) {
      ArrayRef<int64_t> mb = ArrayRef<int64_t>(ms).take_front(r - 3);
      bool allOne = llvm::all_of(mb, [](int64_t d) { return d == 1; });
      if (!allOne && mb != qBatch) {
        SmallVector<int64_t> to(qBatch);
        to.append(ms.begin() + (r - 3), ms.end());
        m = im.emit1<BroadcastToOp>(n, {im.reshape(n, m, ms)}, {},
                                    {RankedTensorType::get(to, im.tt(m).getElementType())});
      }
      m = im.reshape(n, m, {allOne ? 1 : q4[0], ms[r - 3], ms[r - 2], ms[r - 1]});
    }
    extras.push_back(m);
  }
  double p = n.numInputs() > 4 ? im.getDouble(n, 4) : 0.0;
  if (!(p >= 0.0 && p < 1.0))
    im.fail(n, "dropout probability must be in [0, 1)");
  int64_t offset = 0;
  if (p > 0.0) {
    extras.push_back(im.seed(n));
    offset = im.nextDropoutOffset(q4[0] * hq * L * S);
  }
  bool causal = n.numInputs() > 5 && im.getBool(n, 5);
  double scale = n.numInputs() > 6 && !im.in(n, 6).isNone() ? im.getDouble(n, 6)
                                                             : 1.0 / std::sqrt(double(E));
  SmallVector<mlir::Value> ops = {q, k, v};
  ops.append(extras.begin(), extras.end());
  SmallVector<NamedAttribute> attrs = {im.f64("scale", scale)};
  if (causal)
    attrs.push_back(im.attr("is_causal", im.b.getBoolAttr(true)));
  if (hasMask)
    attrs.push_back(im.attr("has_mask", im.b.getBoolAttr(true)));
  if (p > 0.0) {
    attrs.push_back(im.f64("dropout_p", p));
    attrs.push_back(im.i64("offset", offset));
  }
  mlir::Value out = im.emit1<AttentionOp>(n, ops, attrs);
  SmallVector<int64_t> outShape(qs.drop_back());
  outShape.push_back(v4[3]);
  im.setOut(n, im.reshape(n, out, outShape));
}

} // namespace

/// HF's repeat_kv: `x[:, :, None, :, :].expand(N, Hkv, rep, S, E)
/// .reshape(N, Hkv * rep, S, E)`, which the importer sees as a reshape to
/// [N, Hkv, 1, S, E], a broadcast_to [N, Hkv, rep, S, E] and a reshape to
/// [N, Hkv * rep, S, E]. When `x` is such a repeat read only by `att`, and
/// the broadcast only by that reshape, returns the un-repeated [N, Hkv, S, E]
/// value (a reshape of the broadcast's input when it is not one already)
/// and sets `rep`; else null.
static mlir::Value unrepeated(OpBuilder &b, mlir::Value x, AttentionOp att, int64_t &rep) {
  auto outer = x.getDefiningOp<ReshapeOp>();
  if (!outer || !llvm::all_of(x.getUsers(), [&](Operation *u) { return u == att; }))
    return {};
  auto bc = outer->getOperand(0).getDefiningOp<BroadcastToOp>();
  if (!bc || !bc->getResult(0).hasOneUse())
    return {};
  auto xt = cast<RankedTensorType>(x.getType());
  auto bt = cast<RankedTensorType>(bc->getResult(0).getType());
  mlir::Value a = bc->getOperand(0);
  auto at = cast<RankedTensorType>(a.getType());
  if (xt.getRank() != 4 || bt.getRank() != 5 || at.getRank() != 5 || at.getDimSize(2) != 1)
    return {};
  ArrayRef<int64_t> xs = xt.getShape(), bs = bt.getShape(), as = at.getShape();
  if (bs[0] != xs[0] || bs[1] * bs[2] != xs[1] || bs[3] != xs[2] || bs[4] != xs[3] ||
      as[0] != bs[0] || as[1] != bs[1] || as[3] != bs[3] || as[4] != bs[4])
    return {};
  rep = bs[2];
  SmallVector<int64_t> base = {as[0], as[1], as[3], as[4]};
  if (auto inner = a.getDefiningOp<ReshapeOp>()) {
    mlir::Value src = inner->getOperand(0);
    if (cast<RankedTensorType>(src.getType()).getShape() == ArrayRef<int64_t>(base))
      return src;
  }
  b.setInsertionPoint(att);
  return ReshapeOp::create(b, att.getLoc(), RankedTensorType::get(base, at.getElementType()), a);
}

/// Feeds attention that reads HF-style repeated key/value heads the
/// un-repeated ones instead (grouped-query attention): the repeated copies
/// are then dead, neither computed nor saved. Only where the repeat's
/// results have no other reader, and key and value repeat alike.
void ts::foldRepeatedKeyValue(func::FuncOp f) {
  SmallVector<AttentionOp> atts;
  f.walk([&](AttentionOp op) { atts.push_back(op); });
  OpBuilder b(f.getContext());
  for (AttentionOp att : atts) {
    int64_t kr = 0, vr = 0;
    mlir::Value k = unrepeated(b, att.getKey(), att, kr);
    if (!k)
      continue;
    mlir::Value v = att.getValue() == att.getKey() ? k : unrepeated(b, att.getValue(), att, vr);
    if (!v || (v != k && vr != kr)) {
      if (k.use_empty() && k.getDefiningOp())
        k.getDefiningOp()->erase(); // a reshape made above
      continue;
    }
    att->setOperand(1, k);
    att->setOperand(2, v);
  }
}

/// The class-index losses take the class dim 1 of any rank, as PyTorch does:
/// logits [N, C, d1, ..., dk] with target [N, d1, ..., dk], or logits [C]
/// with a scalar target. The dialect's ops take [M, C] and [M]: the class dim
/// is moved last and the rest flattened (M = N * d1 * ... * dk, or 1). Each
/// element is then one row, so reduction mean still averages over the kept
/// (non-ignore_index) elements, sum sums them, and label smoothing applies
/// per element as before.
void ts::classDimLast(StepBuilder &im, Call &n, mlir::Value &z, mlir::Value &t) {
  auto zt = im.tt(z), tt = im.tt(t);
  int64_t r = zt.getRank();
  if (r == 2)
    return;
  auto shapeStr = [](ArrayRef<int64_t> s) {
    std::string out = "[";
    for (size_t i = 0; i < s.size(); ++i)
      out += (i ? ", " : "") + std::to_string(s[i]);
    return out + "]";
  };
  // The target has the logits' shape without the class dim.
  SmallVector<int64_t> expect(zt.getShape());
  if (r >= 1)
    expect.erase(expect.begin() + (r == 1 ? 0 : 1));
  if (r == 0 || tt.getShape() != ArrayRef<int64_t>(expect))
    im.fail(n, "logits " + shapeStr(zt.getShape()) + " (class dim 1) need a target of shape " +
                   shapeStr(expect) + ", got " + shapeStr(tt.getShape()));
  int64_t C = r == 1 ? zt.getDimSize(0) : zt.getDimSize(1);
  int64_t M = C ? zt.getNumElements() / C : tt.getNumElements();
  if (r > 2) {
    std::vector<int64_t> perm = {0};
    for (int64_t i = 2; i < r; ++i)
      perm.push_back(i);
    perm.push_back(1);
    z = permuted(im, n, z, perm);
  }
  z = im.reshape(n, z, {M, C});
  t = im.reshape(n, t, {M});
}

void ts::registerNNConversions(OpTable &t) {
  // Linear algebra.
  t["aten::linear"] = convertLinear;
  t["aten::matmul"] = convertMatmul;
  t["aten::bmm"] = convertMatmul;
  t["aten::mm"] = convertMatmul;
  t["aten::baddbmm"] = convertBaddbmm;
  t["aten::addmm"] = convertBaddbmm; // same arguments: self, mat1, mat2, beta, alpha
  // Convolution, pooling, normalization.
  t["aten::_convolution"] = convertConvolution;
  t["aten::conv1d"] = convertConv1d;
  t["aten::conv2d"] = convertConv2d;
  t["aten::conv_transpose2d"] = convertConvTranspose2d;
  t["aten::batch_norm"] = convertBatchNorm;
  t["aten::layer_norm"] = convertLayerNorm;
  t["aten::max_pool2d"] = convertMaxPool;
  t["aten::avg_pool2d"] = convertAvgPool;
  t["aten::adaptive_avg_pool2d"] = convertAdaptiveAvgPool;
  t["aten::softmax"] = convertSoftmax<SoftmaxOp>;
  t["aten::log_softmax"] = convertSoftmax<LogSoftmaxOp>;
  // Dropout, embedding, losses.
  t["aten::scaled_dot_product_attention"] = convertSdpa;
  t["aten::dropout"] = convertDropout;
  t["aten::embedding"] = convertEmbedding;
  t["aten::cross_entropy_loss"] = convertCrossEntropy;
  t["aten::nll_loss"] = convertNllLoss;
  t["aten::nll_loss_nd"] = convertNllLoss;
  t["aten::nll_loss2d"] = convertNllLoss;
  t["aten::mse_loss"] = convertMseLoss;
}
