//===- ConvertComposite.cpp - More ATen ops built from offload ops --------===//
//
// Part of offload. Like ConvertDecomposed.cpp (same reasons: shape
// inference, VJPs with finite-difference checks, costs and kernels come
// from the ops used), for the ops Swin v2, MaxViT and nn.Upsample need:
//   einsum               per pair of operands: sums of labels used nowhere
//                        else, then permute/reshape to [batch, M, K] x
//                        [batch, K, N], matmul, reshape and permute to the
//                        requested order (more than two operands contract
//                        left to right);
//   linalg_vector_norm,  ord 2 only: sqrt(reduce_sum(x * x)) (F.normalize);
//   norm
//   expand_as            broadcast_to the other operand's shape;
//   upsample_bilinear2d  two products with constant interpolation matrices,
//                        y = A_h x A_w^T, A from ATen's source-index rule;
//   zero, fill           a fill of the operand's type (zero_/fill_ on a slice
//                        go through the in-place functionalization).
//
//===----------------------------------------------------------------------===//
#include "OpBuilder.h"

#include "llvm/ADT/STLExtras.h"

#include <algorithm>
#include <cctype>

#include <cmath>
#include <limits>
#include <map>

using namespace mlir;
using namespace mlir::offload;
using namespace ::offload::import;
using namespace ::offload::import::ts;

namespace {

//===----------------------------------------------------------------------===//
// einsum
//===----------------------------------------------------------------------===//

/// A tensor with one label per dim.
struct Labeled {
  mlir::Value v;
  std::string labels;
};

/// `x` with its dims reordered to `order` (a permutation of x.labels).
Labeled permuteTo(StepBuilder &im, Call &n, Labeled x, const std::string &order) {
  if (x.labels == order)
    return x;
  SmallVector<int64_t> perm;
  for (char c : order)
    perm.push_back(int64_t(x.labels.find(c)));
  x.v = im.emit1<TransposeOp>(n, {x.v}, {im.i64s("perm", perm)});
  x.labels = order;
  return x;
}

/// Sums the dims of `x` whose labels are not in `keep`.
Labeled sumOut(StepBuilder &im, Call &n, Labeled x, const std::string &keep) {
  SmallVector<int64_t> dims;
  std::string rest;
  for (size_t i = 0; i < x.labels.size(); ++i) {
    if (keep.find(x.labels[i]) == std::string::npos)
      dims.push_back(int64_t(i));
    else
      rest += x.labels[i];
  }
  if (dims.empty())
    return x;
  x.v = im.emit1<ReduceSumOp>(n, {x.v}, {im.i64s("dims", dims)});
  x.labels = rest;
  return x;
}

/// Contracts a and b over their shared labels not in `keep`; the result has
/// labels batch (shared, kept) + a-only + b-only.
Labeled contract(StepBuilder &im, Call &n, Labeled a, Labeled b, const std::string &keep,
                 std::map<char, int64_t> &size) {
  auto has = [](const std::string &s, char c) { return s.find(c) != std::string::npos; };
  std::string both, aOnly, bOnly;
  for (char c : a.labels)
    if (has(b.labels, c))
      both += c;
  // Labels used by only one operand and not kept are summed first.
  std::string keepA = keep + b.labels, keepB = keep + a.labels;
  a = sumOut(im, n, a, keepA);
  b = sumOut(im, n, b, keepB);
  std::string batch, red;
  for (char c : both)
    (has(keep, c) ? batch : red) += c;
  for (char c : a.labels)
    if (!has(both, c))
      aOnly += c;
  for (char c : b.labels)
    if (!has(both, c))
      bOnly += c;
  auto prod = [&](const std::string &s) {
    int64_t p = 1;
    for (char c : s)
      p *= size[c];
    return p;
  };
  int64_t B = prod(batch), M = prod(aOnly), K = prod(red), N = prod(bOnly);
  a = permuteTo(im, n, a, batch + aOnly + red);
  b = permuteTo(im, n, b, batch + red + bOnly);
  mlir::Value av = im.reshape(n, a.v, {B, M, K}), bv = im.reshape(n, b.v, {B, K, N});
  mlir::Value p = im.emit1<MatmulOp>(n, {av, bv});
  std::string labels = batch + aOnly + bOnly;
  SmallVector<int64_t> shape;
  for (char c : labels)
    shape.push_back(size[c]);
  return {im.reshape(n, p, shape), labels};
}

void convertEinsum(StepBuilder &im, Call &n) {
  // einsum(equation, tensors, path=None)
  std::string eq;
  for (char c : im.getString(n, 0))
    if (c != ' ')
      eq += c;
  Arg &l = im.in(n, 1);
  if (l.kind != Arg::List)
    im.fail(n, "einsum's operand list must be built in the model");
  std::vector<Labeled> ops;
  size_t arrow = eq.find("->");
  if (arrow == std::string::npos)
    im.fail(n, "einsum without an explicit output ('->') is not supported");
  if (eq.find("...") != std::string::npos)
    im.fail(n, "einsum with an ellipsis is not supported");
  std::string lhs = eq.substr(0, arrow), out = eq.substr(arrow + 2);
  std::vector<std::string> specs;
  for (size_t s = 0;;) {
    size_t c = lhs.find(',', s);
    specs.push_back(lhs.substr(s, c == std::string::npos ? c : c - s));
    if (c == std::string::npos)
      break;
    s = c + 1;
  }
  if (specs.size() != l.elems.size())
    im.fail(n, "einsum equation '" + eq + "' names " + std::to_string(specs.size()) +
                   " operands, got " + std::to_string(l.elems.size()));
  std::map<char, int64_t> size;
  for (size_t i = 0; i < specs.size(); ++i) {
    if (l.elems[i].kind != Arg::Tensor)
      im.fail(n, "einsum operand " + std::to_string(i) + " is not a tensor of the step");
    mlir::Value v = l.elems[i].value;
    auto t = im.tt(v);
    if (int64_t(specs[i].size()) != t.getRank())
      im.fail(n, "einsum operand " + std::to_string(i) + " has rank " +
                     std::to_string(t.getRank()) + " but '" + specs[i] + "' names " +
                     std::to_string(specs[i].size()) + " dims");
    for (size_t d = 0; d < specs[i].size(); ++d) {
      char c = specs[i][d];
      if (!std::isalpha((unsigned char)c))
        im.fail(n, "einsum label '" + std::string(1, c) + "' is not a letter");
      if (specs[i].find(c) != d)
        im.fail(n, "einsum with a repeated label in one operand (a diagonal) is not supported");
      auto it = size.find(c);
      if (it != size.end() && it->second != t.getDimSize(d))
        im.fail(n, "einsum label '" + std::string(1, c) + "' has sizes " +
                       std::to_string(it->second) + " and " +
                       std::to_string(t.getDimSize(d)) + " (broadcasting is not supported)");
      size[c] = t.getDimSize(d);
    }
    ops.push_back({v, specs[i]});
  }
  for (char c : out)
    if (!size.count(c) || out.find(c) != out.rfind(c))
      im.fail(n, "einsum output label '" + std::string(1, c) +
                     "' is repeated or names no input dim");
  Labeled acc = ops[0];
  for (size_t i = 1; i < ops.size(); ++i) {
    std::string keep = out;
    for (size_t j = i + 1; j < ops.size(); ++j)
      keep += ops[j].labels;
    acc = contract(im, n, acc, ops[i], keep, size);
  }
  acc = sumOut(im, n, acc, out);
  acc = permuteTo(im, n, acc, out);
  im.setOut(n, acc.v);
}

//===----------------------------------------------------------------------===//
// Norms, expand_as
//===----------------------------------------------------------------------===//

/// linalg_vector_norm(x, ord=2, dim=None, keepdim=False, dtype=None) and
/// norm(x, p=2, dim, keepdim=False[, dtype]) (torch.norm, F.normalize): the
/// 2-norm sqrt(clamp_min(sum(x * x), 0)) over `dim`. The clamp changes no
/// value; it makes the gradient 0 at a zero vector, as PyTorch's is.
void convertVectorNorm(StepBuilder &im, Call &n) {
  mlir::Value x = im.tensorIn(n, 0);
  auto t = im.tt(x);
  if (!isa<FloatType>(t.getElementType()))
    im.fail(n, "vector norm of an integer tensor is not supported");
  if (n.numInputs() < 4)
    im.fail(n, "norm without a dim argument is not supported");
  if (!im.in(n, 1).isNone() && im.getDouble(n, 1) != 2.0)
    im.fail(n, "vector norm with ord other than 2 is not supported");
  if (n.numInputs() > 4 && !im.in(n, 4).isNone())
    im.fail(n, "vector norm with a dtype argument is not supported");
  SmallVector<int64_t> dims;
  if (im.in(n, 2).isNone()) {
    for (int64_t i = 0; i < t.getRank(); ++i)
      dims.push_back(i);
  } else {
    for (int64_t d : im.getInts(n, 2))
      dims.push_back(normDim(im, n, d, t.getRank()));
    llvm::sort(dims);
  }
  bool keepdim = im.getBool(n, 3);
  mlir::Value sq = im.emit1<MulOp>(n, {x, x});
  mlir::Value s = im.emit1<ReduceSumOp>(
      n, {sq}, {im.i64s("dims", dims), im.attr("keepdim", im.b.getBoolAttr(keepdim))});
  // sqrt's VJP at s == 0 is g / 0, and through x*x that is 0 * inf = NaN,
  // where ATen's norm backward masks the zero norms to a zero gradient
  // (aten/src/ATen/native/.../FunctionsManual.cpp, norm_backward). A
  // clamp_min(s, 0) in front leaves every value unchanged (s >= 0 or NaN)
  // and its backward, a select on 0 < s, drops the NaN exactly there.
  const double inf = std::numeric_limits<double>::infinity();
  s = im.emit1<HardtanhOp>(n, {s}, {im.f64("min_val", 0.0), im.f64("max_val", inf)},
                           {s.getType()});
  im.setOut(n, im.emit1<SqrtOp>(n, {s}, {}, {s.getType()}));
}

void convertExpandAs(StepBuilder &im, Call &n) {
  mlir::Value x = im.tensorIn(n, 0);
  auto other = im.tt(im.tensorIn(n, 1));
  auto t = im.tt(x);
  if (t.getShape() == other.getShape()) {
    im.setOut(n, x);
    return;
  }
  im.setOut(n, im.emit1<BroadcastToOp>(
                   n, {x}, {}, {RankedTensorType::get(other.getShape(), t.getElementType())}));
}

//===----------------------------------------------------------------------===//
// Bilinear upsampling
//===----------------------------------------------------------------------===//

/// The [out, in] matrix of 1-D linear interpolation, ATen's rule
/// (aten/src/ATen/native/UpSample.h, area_pixel_compute_scale and
/// area_pixel_compute_source_index): scale = (in-1)/(out-1) with
/// align_corners, else 1/scale_factor when one was given, else in/out;
/// src = scale*o (align_corners) or max(scale*(o+0.5)-0.5, 0); i0 = floor(src),
/// i1 = min(i0+1, in-1), weights 1-(src-i0) and src-i0.
std::vector<double> interpolation(int64_t in, int64_t out, bool alignCorners,
                                  double scaleFactor) {
  double scale;
  if (alignCorners)
    scale = out > 1 ? double(in - 1) / double(out - 1) : 0.0;
  else
    scale = scaleFactor > 0 ? 1.0 / scaleFactor : double(in) / double(out);
  std::vector<double> m(size_t(out * in), 0.0);
  for (int64_t o = 0; o < out; ++o) {
    double src = alignCorners ? scale * o : std::max(scale * (o + 0.5) - 0.5, 0.0);
    int64_t i0 = std::min<int64_t>(int64_t(src), in - 1);
    int64_t i1 = i0 + (i0 < in - 1 ? 1 : 0);
    double l1 = src - double(i0);
    m[size_t(o * in + i0)] += 1.0 - l1;
    m[size_t(o * in + i1)] += l1;
  }
  return m;
}

void convertUpsampleBilinear(StepBuilder &im, Call &n) {
  // upsample_bilinear2d(input, output_size?, align_corners, scale_factors?)
  // or (input, output_size, align_corners, scales_h?, scales_w?)
  mlir::Value x = im.tensorIn(n, 0);
  auto t = im.tt(x);
  if (t.getRank() != 4)
    im.fail(n, "upsample_bilinear2d needs [N, C, H, W]");
  if (!t.getElementType().isF64() && !t.getElementType().isF32())
    im.fail(n, "upsample_bilinear2d needs an f32 or f64 input");
  int64_t H = t.getDimSize(2), W = t.getDimSize(3);
  bool align = im.getBool(n, 2);
  double sh = 0, sw = 0;
  int64_t oh = 0, ow = 0;
  if (n.numInputs() == 4 && !im.in(n, 3).isNone()) {
    Arg &s = im.in(n, 3);
    if (s.kind != Arg::Doubles || s.doubles.size() != 2)
      im.fail(n, "bilinear upsampling needs two constant scale factors");
    std::vector<double> f = s.doubles;
    sh = f[0];
    sw = f[1];
    oh = int64_t(std::floor(double(H) * sh));
    ow = int64_t(std::floor(double(W) * sw));
  }
  if (!im.in(n, 1).isNone()) {
    std::vector<int64_t> os = im.getInts(n, 1);
    if (os.size() != 2)
      im.fail(n, "bilinear upsampling needs a 2-D output size");
    oh = os[0];
    ow = os[1];
    if (n.numInputs() == 5) {
      sh = im.in(n, 3).isNone() ? 0.0 : im.getDouble(n, 3);
      sw = im.in(n, 4).isNone() ? 0.0 : im.getDouble(n, 4);
    }
  }
  if (oh <= 0 || ow <= 0)
    im.fail(n, "bilinear upsampling needs an output size or scale factors giving a "
               "non-empty output");
  // y = A_h x A_w^T: linear(x, A_w) over W, then over H on the transpose.
  Type et = t.getElementType();
  mlir::Value aw = im.constant(n, RankedTensorType::get({ow, W}, et),
                               interpolation(W, ow, align, sw));
  mlir::Value ah = im.constant(n, RankedTensorType::get({oh, H}, et),
                               interpolation(H, oh, align, sh));
  mlir::Value v = im.emit1<LinearOp>(n, {x, aw});                       // [N,C,H,ow]
  v = im.emit1<TransposeOp>(n, {v}, {im.i64s("perm", {0, 1, 3, 2})});  // [N,C,ow,H]
  v = im.emit1<LinearOp>(n, {v, ah});                                   // [N,C,ow,oh]
  im.setOut(n, im.emit1<TransposeOp>(n, {v}, {im.i64s("perm", {0, 1, 3, 2})}));
}

/// zero(x) and fill(x, value): a fill of x's type (as `zero_`/`fill_` they
/// write a slice in place through the importer's functionalization).
void convertFill(StepBuilder &im, Call &n) {
  mlir::Value x = im.tensorIn(n, 0);
  double value = 0.0;
  if (n.numInputs() > 1) {
    if (!im.isScalar(im.in(n, 1)))
      im.fail(n, "fill with a tensor value is not supported");
    value = im.scalarValue(im.in(n, 1));
  }
  im.setOut(n, im.fill(n, value, im.tt(x)));
}

} // namespace

void ts::registerCompositeConversions(OpTable &t) {
  t["aten::einsum"] = convertEinsum;
  t["aten::linalg_vector_norm"] = convertVectorNorm;
  t["aten::norm"] = convertVectorNorm;
  t["aten::expand_as"] = convertExpandAs;
  t["aten::upsample_bilinear2d"] = convertUpsampleBilinear;
  t["aten::zero"] = convertFill;
  t["aten::fill"] = convertFill;
}
