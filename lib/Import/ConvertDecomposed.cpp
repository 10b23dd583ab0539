//===- ConvertDecomposed.cpp - ATen ops built from existing offload ops ---===//
//
// Part of offload. Ops the zoo needs that are exact compositions of ops the
// dialect already has, so they inherit those ops' shape inference, VJPs
// (each finite-difference checked in GradCheckTest), costs and host/CUDA
// kernels:
//   clamp/clamp_min/clamp_max  hardtanh with +-inf bounds (the gradient
//                              differs from PyTorch's only at x == bound);
//   roll                       two slices and a cat per rolled dimension;
//   index (one index tensor)   embedding on the indexed dim (a row gather);
//   group_norm, instance_norm  layer_norm over each group, then the affine;
//   pixel_shuffle              reshape, transpose, reshape;
//   upsample_nearest2d         reshape, broadcast_to, reshape (integer
//                              scale factors only);
//   pad, constant_pad_nd       fills concatenated on each side (constant
//                              mode), slices for negative amounts.
//
//===----------------------------------------------------------------------===//
#include "OpBuilder.h"

#include <limits>

using namespace mlir;
using namespace mlir::offload;
using namespace ::offload::import;
using namespace ::offload::import::ts;

namespace {

/// The number at input `i`, or `dflt` when it is None.
double optDouble(StepBuilder &im, Call &n, size_t i, double dflt) {
  if (i >= n.numInputs() || im.in(n, i).isNone())
    return dflt;
  return im.getDouble(n, i);
}

/// clamp(x, min, max), clamp_min(x, min), clamp_max(x, max) with numbers.
template <int Which> // 0 clamp, 1 clamp_min, 2 clamp_max
void convertClamp(StepBuilder &im, Call &n) {
  mlir::Value x = im.tensorIn(n, 0);
  if (!isa<FloatType>(im.tt(x).getElementType()))
    im.fail(n, "clamp of an integer tensor is not supported");
  for (size_t i = 1; i < n.numInputs(); ++i)
    if (!im.in(n, i).isNone() && !im.isScalar(im.in(n, i)))
      im.fail(n, "clamp with tensor bounds is not supported");
  const double inf = std::numeric_limits<double>::infinity();
  double lo = Which == 2 ? -inf : optDouble(im, n, 1, -inf);
  double hi = Which == 0 ? optDouble(im, n, 2, inf) : Which == 2 ? optDouble(im, n, 1, inf) : inf;
  im.setOut(n, im.emit1<HardtanhOp>(n, {x}, {im.f64("min_val", lo), im.f64("max_val", hi)},
                                    {x.getType()}));
}

/// roll(x, shifts, dims): per dim, x[n-s:] then x[:n-s]; no dims rolls the
/// flattened tensor.
void convertRoll(StepBuilder &im, Call &n) {
  mlir::Value x = im.tensorIn(n, 0);
  auto t = im.tt(x);
  std::vector<int64_t> shifts = im.getInts(n, 1), dims = im.getInts(n, 2);
  mlir::Value v = x;
  if (dims.empty()) {
    if (shifts.size() != 1)
      im.fail(n, "roll without dims takes one shift");
    v = im.reshape(n, x, {t.getNumElements()});
    dims = {0};
  }
  if (shifts.size() != dims.size())
    im.fail(n, "roll needs as many shifts as dims");
  for (size_t k = 0; k < dims.size(); ++k) {
    auto vt = im.tt(v);
    int64_t d = normDim(im, n, dims[k], vt.getRank());
    int64_t size = vt.getDimSize(d);
    int64_t s = ((shifts[k] % size) + size) % size;
    if (s == 0)
      continue;
    mlir::Value tail = emitSlice(im, n, v, d, size - s, size, 1);
    mlir::Value head = emitSlice(im, n, v, d, 0, size - s, 1);
    v = im.emit1<CatOp>(n, {tail, head}, {im.i64("dim", d)});
  }
  im.setOut(n, im.reshape(n, v, t.getShape()));
}

/// index(x, [None, ..., idx, None...]) with exactly one index tensor: a
/// gather of slices along that dim, as embedding on x moved to [L, rest].
/// `x[i0, i1, ...]` of an integer or bool value of the step (HF's padding
/// mask read as `mask[batch_idx, kv_idx]`) by index tensors known at
/// import: the result's offsets into x are computed here (AdvancedIndex,
/// the rule the import-time evaluation uses) and read with one gather of x
/// flattened to [1, numel].
void indexIntegerValue(StepBuilder &im, Call &n, mlir::Value x, const std::vector<Arg> &elems) {
  auto t = im.tt(x);
  std::vector<AdvancedIndex::Index> store(elems.size());
  std::vector<const AdvancedIndex::Index *> idx(elems.size(), nullptr);
  for (size_t k = 0; k < elems.size(); ++k) {
    if (elems[k].isNone())
      continue;
    std::vector<double> vals;
    mlir::Value v = elems[k].kind == Arg::Const ? im.materialize(n, elems[k], {}) : mlir::Value();
    if (!v || !constantValues(v, vals))
      im.fail(n, "indexing an integer or bool value of the step needs index tensors known at "
                 "import time (constants), not values computed from the step's inputs");
    if (im.tt(v).getElementType().isInteger(1))
      im.fail(n, "boolean mask indexing is not supported");
    store[k].shape.assign(im.tt(v).getShape().begin(), im.tt(v).getShape().end());
    store[k].values.assign(vals.begin(), vals.end());
    idx[k] = &store[k];
  }
  AdvancedIndex ai(t.getShape(), idx);
  if (!ai.error().empty())
    im.fail(n, ai.error());
  const std::vector<int64_t> &out = ai.shape();
  int64_t m = 1;
  for (int64_t d : out)
    m *= d;
  std::vector<double> offsets;
  offsets.reserve(size_t(m));
  std::vector<int64_t> o(out.size(), 0);
  for (int64_t k = 0; k < m; ++k) {
    std::string err;
    offsets.push_back(double(ai.offset(o, err)));
    if (!err.empty())
      im.fail(n, err);
    for (size_t d = o.size(); d-- > 0;) {
      if (++o[d] < out[d])
        break;
      o[d] = 0;
    }
  }
  // Offsets 0, 1, ..., numel - 1 (HF's mask[arange(B)[:, None, None, None],
  // arange(S)[None, None, None, :]]): x itself, reshaped.
  bool identity = m == t.getNumElements();
  for (int64_t k = 0; identity && k < m; ++k)
    identity = offsets[size_t(k)] == double(k);
  if (identity) {
    im.setOut(n, im.reshape(n, x, out));
    return;
  }
  mlir::Value flat = im.reshape(n, x, {1, t.getNumElements()});
  mlir::Value lin =
      im.constant(n, RankedTensorType::get({1, m}, im.b.getI64Type()), offsets);
  mlir::Value g = im.emit1<GatherOp>(n, {flat, lin}, {im.i64("dim", 1)});
  im.setOut(n, im.reshape(n, g, out));
}

void convertIndex(StepBuilder &im, Call &n) {
  mlir::Value x = im.tensorIn(n, 0);
  auto t = im.tt(x);
  Arg &l = im.in(n, 1);
  std::vector<Arg> elems;
  if (l.kind == Arg::List)
    elems = l.elems;
  else
    im.fail(n, "the index list must be built in the model");
  if (!isa<FloatType>(t.getElementType())) {
    indexIntegerValue(im, n, x, elems);
    return;
  }
  int64_t dim = -1;
  Arg idxV;
  for (size_t i = 0; i < elems.size(); ++i) {
    if (elems[i].isNone())
      continue;
    if (dim >= 0)
      im.fail(n, "indexing with more than one index tensor is not supported");
    dim = i;
    idxV = elems[i];
  }
  if (dim < 0)
    im.fail(n, "indexing without an index tensor");
  mlir::Value idx;
  if (idxV.kind == Arg::Tensor)
    idx = idxV.value;
  else if (idxV.kind == Arg::Const)
    idx = im.materialize(n, idxV, {});
  else
    im.fail(n, "the index must be a tensor");
  if (!im.tt(idx).getElementType().isInteger(64))
    im.fail(n, "only i64 index tensors are supported (not boolean masks)");
  // Move `dim` first, flatten the rest: [L, R].
  int64_t r = t.getRank();
  std::vector<int64_t> perm = {dim};
  for (int64_t i = 0; i < r; ++i)
    if (i != dim)
      perm.push_back(i);
  mlir::Value moved = x;
  if (dim != 0)
    moved = im.emit1<TransposeOp>(n, {x}, {im.i64s("perm", perm)});
  std::vector<int64_t> rest;
  int64_t restN = 1;
  for (int64_t i = 1; i < r; ++i) {
    rest.push_back(t.getDimSize(perm[i]));
    restN *= t.getDimSize(perm[i]);
  }
  mlir::Value table = im.reshape(n, moved, {t.getDimSize(dim), restN});
  mlir::Value g = im.emit1<EmbeddingOp>(n, {table, idx});
  // [idx..., rest...]; PyTorch puts the index dims where `dim` was when it
  // is the only advanced index.
  auto it = im.tt(idx);
  std::vector<int64_t> shape(it.getShape().begin(), it.getShape().end());
  shape.insert(shape.end(), rest.begin(), rest.end());
  g = im.reshape(n, g, shape);
  if (dim != 0) {
    int64_t ir = it.getRank();
    // Result order: x dims before `dim`, index dims, x dims after `dim`.
    std::vector<int64_t> back;
    for (int64_t i = 0; i < dim; ++i)
      back.push_back(ir + i);
    for (int64_t i = 0; i < ir; ++i)
      back.push_back(i);
    for (int64_t i = dim + 1; i < r; ++i)
      back.push_back(ir + i - 1);
    g = im.emit1<TransposeOp>(n, {g}, {im.i64s("perm", back)});
  }
  im.setOut(n, g);
}

/// Normalizes x [N, C, *] over groups of C/G channels and the spatial dims
/// (layer_norm over each group), then the per-channel affine.
mlir::Value groupNorm(StepBuilder &im, Call &n, mlir::Value x, int64_t groups,
                      mlir::Value weight, mlir::Value bias, double eps) {
  auto t = im.tt(x);
  if (t.getRank() < 2)
    im.fail(n, "group/instance norm input must have rank >= 2");
  int64_t N = t.getDimSize(0), C = t.getDimSize(1);
  if (groups <= 0 || C % groups != 0)
    im.fail(n, "the number of channels is not divisible by the number of groups");
  int64_t per = t.getNumElements() / (N * groups);
  mlir::Value g = im.reshape(n, x, {N, groups, per});
  auto wt = RankedTensorType::get({per}, t.getElementType());
  Operation *ln = im.emit<LayerNormOp>(n, {g, im.fill(n, 1.0, wt), im.fill(n, 0.0, wt)},
                                       {im.i64("normalized_ndim", 1), im.f64("eps", eps)});
  mlir::Value y = im.reshape(n, ln->getResult(0), t.getShape());
  std::vector<int64_t> cshape(t.getRank(), 1);
  cshape[1] = C;
  if (weight)
    y = im.emit1<MulOp>(n, {y, im.reshape(n, weight, cshape)});
  if (bias)
    y = im.emit1<AddOp>(n, {y, im.reshape(n, bias, cshape)});
  return y;
}

void convertGroupNorm(StepBuilder &im, Call &n) {
  // group_norm(input, num_groups, weight, bias, eps, cudnn_enabled)
  mlir::Value x = im.tensorIn(n, 0);
  im.setOut(n, groupNorm(im, n, x, im.getInt(n, 1), im.optTensorIn(n, 2),
                         im.optTensorIn(n, 3), im.getDouble(n, 4)));
}

void convertInstanceNorm(StepBuilder &im, Call &n) {
  // instance_norm(input, weight, bias, running_mean, running_var,
  //               use_input_stats, momentum, eps, cudnn_enabled)
  if (!im.in(n, 3).isNone() || !im.in(n, 4).isNone())
    im.fail(n, "instance norm with running statistics (track_running_stats=True) is not "
               "supported");
  if (!im.getBool(n, 5))
    im.fail(n, "instance norm without input statistics is not supported");
  mlir::Value x = im.tensorIn(n, 0);
  im.setOut(n, groupNorm(im, n, x, im.tt(x).getDimSize(1), im.optTensorIn(n, 1),
                         im.optTensorIn(n, 2), im.getDouble(n, 7)));
}

void convertPixelShuffle(StepBuilder &im, Call &n) {
  // [N, C r^2, H, W] -> [N, C, r, r, H, W] -> [N, C, H, r, W, r] -> [N, C, H r, W r]
  mlir::Value x = im.tensorIn(n, 0);
  auto t = im.tt(x);
  int64_t r = im.getInt(n, 1);
  if (t.getRank() != 4 || r <= 0 || t.getDimSize(1) % (r * r) != 0)
    im.fail(n, "pixel_shuffle needs [N, C*r*r, H, W] and r > 0");
  int64_t N = t.getDimSize(0), C = t.getDimSize(1) / (r * r), H = t.getDimSize(2),
          W = t.getDimSize(3);
  mlir::Value v = im.reshape(n, x, {N, C, r, r, H, W});
  v = im.emit1<TransposeOp>(n, {v}, {im.i64s("perm", {0, 1, 4, 2, 5, 3})});
  im.setOut(n, im.reshape(n, v, {N, C, H * r, W * r}));
}

void convertUpsampleNearest(StepBuilder &im, Call &n) {
  // upsample_nearest2d(input, output_size?, scale_factors?)
  mlir::Value x = im.tensorIn(n, 0);
  auto t = im.tt(x);
  if (t.getRank() != 4)
    im.fail(n, "upsample_nearest2d needs [N, C, H, W]");
  int64_t H = t.getDimSize(2), W = t.getDimSize(3);
  int64_t sh = 0, sw = 0;
  if (!im.in(n, 1).isNone()) {
    std::vector<int64_t> os = im.getInts(n, 1);
    if (os.size() != 2 || os[0] % H != 0 || os[1] % W != 0)
      im.fail(n, "nearest upsampling to a size that is not an integer multiple is not "
                 "supported");
    sh = os[0] / H;
    sw = os[1] / W;
  } else {
    Arg &s = im.in(n, 2);
    if (s.kind != Arg::Doubles)
      im.fail(n, "nearest upsampling needs an output size or scale factors");
    std::vector<double> f = s.doubles;
    if (f.size() != 2 || f[0] != std::floor(f[0]) || f[1] != std::floor(f[1]) || f[0] < 1 ||
        f[1] < 1)
      im.fail(n, "nearest upsampling by a non-integer scale factor is not supported");
    sh = int64_t(f[0]);
    sw = int64_t(f[1]);
  }
  int64_t N = t.getDimSize(0), C = t.getDimSize(1);
  mlir::Value v = im.reshape(n, x, {N, C, H, 1, W, 1});
  v = im.emit1<BroadcastToOp>(
      n, {v}, {}, {RankedTensorType::get({N, C, H, sh, W, sw}, t.getElementType())});
  im.setOut(n, im.reshape(n, v, {N, C, H * sh, W * sw}));
}

/// constant_pad_nd(x, pad, value) and pad(x, pad, "constant", value): pad
/// lists (lo, hi) pairs from the last dim backwards; each side becomes a
/// fill concatenated to x (a negative amount crops with a slice).
void convertPad(StepBuilder &im, Call &n) {
  mlir::Value x = im.tensorIn(n, 0);
  std::vector<int64_t> pad = im.getInts(n, 1);
  double value = 0.0;
  if (n.kind == std::string("aten::pad")) {
    std::string mode = im.getString(n, 2);
    if (mode != "constant")
      im.fail(n, "padding mode '" + mode + "' is not supported (only constant)");
    value = optDouble(im, n, 3, 0.0);
  } else {
    value = optDouble(im, n, 2, 0.0);
  }
  int64_t r = im.tt(x).getRank();
  if (pad.size() % 2 != 0 || int64_t(pad.size()) > 2 * r)
    im.fail(n, "pad needs an even number of amounts, at most two per dimension");
  mlir::Value v = x;
  for (size_t k = 0; k < pad.size() / 2; ++k) {
    int64_t d = r - 1 - k, lo = pad[2 * k], hi = pad[2 * k + 1];
    int64_t size = im.tt(v).getDimSize(d);
    if (lo < 0 || hi < 0) {
      v = emitSlice(im, n, v, d, std::max<int64_t>(-lo, 0), size - std::max<int64_t>(-hi, 0), 1);
      lo = std::max<int64_t>(lo, 0);
      hi = std::max<int64_t>(hi, 0);
    }
    SmallVector<mlir::Value> parts;
    auto side = [&](int64_t amount) {
      auto t = im.tt(v);
      SmallVector<int64_t> shape(t.getShape());
      shape[d] = amount;
      return im.fill(n, value, RankedTensorType::get(shape, t.getElementType()));
    };
    if (lo > 0)
      parts.push_back(side(lo));
    parts.push_back(v);
    if (hi > 0)
      parts.push_back(side(hi));
    if (parts.size() > 1)
      v = im.emit1<CatOp>(n, parts, {im.i64("dim", d)});
  }
  im.setOut(n, v);
}

/// gather(self, dim, index, sparse_grad) of an integer or bool tensor (BERT
/// and RoBERTa gather their zero token types by position ids): one
/// offload.gather, run at run time when the index depends on the step's
/// inputs. A float gather would need a VJP and is refused.
void convertGather(StepBuilder &im, Call &n) {
  mlir::Value x = im.tensorIn(n, 0), idx = im.tensorIn(n, 2);
  auto t = im.tt(x);
  if (isa<FloatType>(t.getElementType()))
    im.fail(n, "gather of a float tensor is not supported (only integer and bool gathers, as "
               "of ids and masks, run in the step)");
  if (!im.tt(idx).getElementType().isInteger(64))
    im.fail(n, "the gather index must be int64");
  int64_t d = normDim(im, n, im.getInt(n, 1), t.getRank());
  im.setOut(n, im.emit1<GatherOp>(n, {x, idx}, {im.i64("dim", d)}));
}

} // namespace

void ts::registerDecomposedConversions(OpTable &t) {
  t["aten::clamp"] = convertClamp<0>;
  t["aten::clip"] = convertClamp<0>;
  t["aten::clamp_min"] = convertClamp<1>;
  t["aten::clamp_max"] = convertClamp<2>;
  t["aten::roll"] = convertRoll;
  t["aten::index"] = convertIndex;
  t["aten::gather"] = convertGather;
  t["aten::group_norm"] = convertGroupNorm;
  t["aten::instance_norm"] = convertInstanceNorm;
  t["aten::pixel_shuffle"] = convertPixelShuffle;
  t["aten::upsample_nearest2d"] = convertUpsampleNearest;
  t["aten::pad"] = convertPad;
  t["aten::constant_pad_nd"] = convertPad;
}
