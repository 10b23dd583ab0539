//===- OffloadShapes.cpp - Result type inference of compute ops -----------===//
//
// Part of offload. Shape rules are PyTorch 1.13's (ATen shape functions);
// sources are cited per op. Errors name the op's operands and the mismatch.
//
//===----------------------------------------------------------------------===//

#include "offload/Dialect/Offload/IR/OffloadOps.h"

#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Diagnostics.h"

using namespace mlir;
using namespace mlir::offload;

static LogicalResult fail(std::optional<Location> loc, const Twine &msg) {
  if (loc)
    emitError(*loc) << msg;
  return failure();
}


// Default-valued attributes may still be absent while an op is being parsed
// (the parser infers result types before it fills in defaults): read them
// through these helpers, never through the adaptor's value getters.
static bool boolOr(BoolAttr a, bool dflt) { return a ? a.getValue() : dflt; }
static int64_t intOr(IntegerAttr a, int64_t dflt) { return a ? a.getInt() : dflt; }
static ArrayRef<int64_t> arrayOr(DenseI64ArrayAttr a) {
  return a ? a.asArrayRef() : ArrayRef<int64_t>();
}

static LogicalResult broadcastShapes(std::optional<Location> loc,
                                     ArrayRef<int64_t> a, ArrayRef<int64_t> b,
                                     SmallVectorImpl<int64_t> &out) {
  size_t rank = std::max(a.size(), b.size());
  out.assign(rank, 1);
  for (size_t i = 0; i < rank; ++i) {
    int64_t x = i < a.size() ? a[a.size() - 1 - i] : 1;
    int64_t y = i < b.size() ? b[b.size() - 1 - i] : 1;
    if (x != y && x != 1 && y != 1)
      return fail(loc, "shapes are not broadcast-compatible: dimension " +
                           Twine(x) + " vs " + Twine(y));
    out[rank - 1 - i] = x == 1 ? y : x;
  }
  return success();
}

LogicalResult mlir::offload::detail::inferBroadcast(std::optional<Location> loc,
                                                    Type lhs, Type rhs,
                                                    SmallVectorImpl<Type> &types) {
  auto l = cast<RankedTensorType>(lhs), r = cast<RankedTensorType>(rhs);
  if (l.getElementType() != r.getElementType())
    return fail(loc, "operands have different element types");
  SmallVector<int64_t> shape;
  if (failed(broadcastShapes(loc, l.getShape(), r.getShape(), shape)))
    return failure();
  types.push_back(RankedTensorType::get(shape, l.getElementType()));
  return success();
}

LogicalResult WhereOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                        Adaptor adaptor, SmallVectorImpl<Type> &types) {
  SmallVector<Type> ab;
  if (failed(detail::inferBroadcast(loc, adaptor.getLhs().getType(),
                                    adaptor.getRhs().getType(), ab)))
    return failure();
  auto t = cast<RankedTensorType>(ab[0]);
  SmallVector<int64_t> shape;
  if (failed(broadcastShapes(
          loc, cast<RankedTensorType>(adaptor.getCondition().getType()).getShape(),
          t.getShape(), shape)))
    return failure();
  types.push_back(RankedTensorType::get(shape, t.getElementType()));
  return success();
}

static LogicalResult inferReduce(std::optional<Location> loc, Type input,
                                 ArrayRef<int64_t> dims, bool keepdim,
                                 SmallVectorImpl<Type> &types) {
  auto in = cast<RankedTensorType>(input);
  SmallVector<int64_t> shape;
  for (int64_t i = 0; i < in.getRank(); ++i) {
    bool reduced = dims.empty() || llvm::is_contained(dims, i);
    if (!reduced)
      shape.push_back(in.getDimSize(i));
    else if (keepdim)
      shape.push_back(1);
  }
  for (int64_t d : dims)
    if (d < 0 || d >= in.getRank())
      return fail(loc, "reduction dimension " + Twine(d) + " out of range");
  types.push_back(RankedTensorType::get(shape, in.getElementType()));
  return success();
}

LogicalResult ReduceSumOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                            Adaptor a, SmallVectorImpl<Type> &types) {
  return inferReduce(loc, a.getInput().getType(), arrayOr(a.getDimsAttr()),
                     boolOr(a.getKeepdimAttr(), false), types);
}
LogicalResult ReduceMeanOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                             Adaptor a, SmallVectorImpl<Type> &types) {
  return inferReduce(loc, a.getInput().getType(), arrayOr(a.getDimsAttr()),
                     boolOr(a.getKeepdimAttr(), false), types);
}

LogicalResult TransposeOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                            Adaptor a, SmallVectorImpl<Type> &types) {
  auto in = cast<RankedTensorType>(a.getInput().getType());
  ArrayRef<int64_t> perm = a.getPerm();
  if (int64_t(perm.size()) != in.getRank())
    return fail(loc, "perm has " + Twine(perm.size()) + " entries for a rank-" +
                         Twine(in.getRank()) + " input");
  SmallVector<bool> seen(perm.size(), false);
  SmallVector<int64_t> shape;
  for (int64_t p : perm) {
    if (p < 0 || p >= in.getRank() || seen[p])
      return fail(loc, "perm is not a permutation of 0.." + Twine(in.getRank() - 1));
    seen[p] = true;
    shape.push_back(in.getDimSize(p));
  }
  types.push_back(RankedTensorType::get(shape, in.getElementType()));
  return success();
}

LogicalResult CatOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                      Adaptor a, SmallVectorImpl<Type> &types) {
  if (a.getInputs().empty())
    return fail(loc, "cat needs at least one input");
  auto first = cast<RankedTensorType>(a.getInputs()[0].getType());
  int64_t dim = a.getDim();
  if (dim < 0 || dim >= first.getRank())
    return fail(loc, "cat dimension " + Twine(dim) + " out of range");
  SmallVector<int64_t> shape(first.getShape());
  shape[dim] = 0;
  for (Value v : a.getInputs()) {
    auto t = cast<RankedTensorType>(v.getType());
    if (t.getRank() != first.getRank() || t.getElementType() != first.getElementType())
      return fail(loc, "cat inputs differ in rank or element type");
    for (int64_t i = 0; i < t.getRank(); ++i)
      if (i != dim && t.getDimSize(i) != first.getDimSize(i))
        return fail(loc, "cat inputs differ in dimension " + Twine(i));
    shape[dim] += t.getDimSize(dim);
  }
  types.push_back(RankedTensorType::get(shape, first.getElementType()));
  return success();
}

LogicalResult SliceOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                        Adaptor a, SmallVectorImpl<Type> &types) {
  auto in = cast<RankedTensorType>(a.getInput().getType());
  int64_t dim = a.getDim(), start = a.getStart(), end = a.getEnd(), step = intOr(a.getStepAttr(), 1);
  if (dim < 0 || dim >= in.getRank())
    return fail(loc, "slice dimension " + Twine(dim) + " out of range");
  int64_t size = in.getDimSize(dim);
  if (step < 1)
    return fail(loc, "slice step must be >= 1");
  // ATen clamps start/end into [0, size] (negative values count from the end).
  if (start < 0) start += size;
  if (end < 0) end += size;
  start = std::clamp<int64_t>(start, 0, size);
  end = std::clamp<int64_t>(end, start, size);
  SmallVector<int64_t> shape(in.getShape());
  shape[dim] = (end - start + step - 1) / step;
  types.push_back(RankedTensorType::get(shape, in.getElementType()));
  return success();
}

LogicalResult LinearOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                         Adaptor a, SmallVectorImpl<Type> &types) {
  auto in = cast<RankedTensorType>(a.getInput().getType());
  auto w = cast<RankedTensorType>(a.getWeight().getType());
  if (in.getRank() < 1 || w.getRank() != 2)
    return fail(loc, "linear expects input [*, K] and weight [M, K]");
  if (in.getShape().back() != w.getDimSize(1))
    return fail(loc, "linear input has " + Twine(in.getShape().back()) +
                         " features but weight expects " + Twine(w.getDimSize(1)));
  if (Value b = a.getBias()) {
    auto bt = cast<RankedTensorType>(b.getType());
    if (bt.getRank() != 1 || bt.getDimSize(0) != w.getDimSize(0))
      return fail(loc, "linear bias must be [" + Twine(w.getDimSize(0)) + "]");
  }
  SmallVector<int64_t> shape(in.getShape());
  shape.back() = w.getDimSize(0);
  types.push_back(RankedTensorType::get(shape, in.getElementType()));
  return success();
}

LogicalResult MatmulOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                         Adaptor a, SmallVectorImpl<Type> &types) {
  auto l = cast<RankedTensorType>(a.getLhs().getType());
  auto r = cast<RankedTensorType>(a.getRhs().getType());
  if (l.getRank() < 2 || r.getRank() < 2)
    return fail(loc, "matmul operands must have rank >= 2");
  int64_t m = l.getDimSize(l.getRank() - 2), k = l.getDimSize(l.getRank() - 1);
  if (boolOr(a.getTransposeAAttr(), false)) std::swap(m, k);
  int64_t k2 = r.getDimSize(r.getRank() - 2), n = r.getDimSize(r.getRank() - 1);
  if (boolOr(a.getTransposeBAttr(), false)) std::swap(k2, n);
  if (k != k2)
    return fail(loc, "matmul contraction sizes differ: " + Twine(k) + " vs " + Twine(k2));
  SmallVector<int64_t> batch;
  if (failed(broadcastShapes(loc, l.getShape().drop_back(2), r.getShape().drop_back(2), batch)))
    return failure();
  batch.push_back(m);
  batch.push_back(n);
  types.push_back(RankedTensorType::get(batch, l.getElementType()));
  return success();
}

/// Output size of a convolution or pooling window along one dimension:
/// ATen's pooling_output_shape (aten/src/ATen/native/Pool.h) with ceil_mode;
/// for ceil_mode false it is `(in + 2p - d(k-1) - 1) / s + 1`.
static int64_t windowOut(int64_t in, int64_t k, int64_t s, int64_t p, int64_t d,
                         bool ceil) {
  int64_t num = in + 2 * p - d * (k - 1) - 1 + (ceil ? s - 1 : 0);
  int64_t out = (num >= 0 ? num / s : -((-num + s - 1) / s)) + 1;
  if (ceil && (out - 1) * s >= in + p)
    --out;
  return out;
}

LogicalResult Conv2dOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                         Adaptor a, SmallVectorImpl<Type> &types) {
  auto in = cast<RankedTensorType>(a.getInput().getType());
  auto w = cast<RankedTensorType>(a.getWeight().getType());
  if (in.getRank() != 4 || w.getRank() != 4 || a.getStride().size() != 2 ||
      a.getPadding().size() != 2 || a.getDilation().size() != 2)
    return fail(loc, "conv2d expects rank-4 input and weight and 2-value "
                     "stride/padding/dilation");
  SmallVector<int64_t> shape{in.getDimSize(0), w.getDimSize(0)};
  for (int i = 0; i < 2; ++i) {
    int64_t o = windowOut(in.getDimSize(2 + i), w.getDimSize(2 + i), a.getStride()[i],
                          a.getPadding()[i], a.getDilation()[i], false);
    if (o < 1)
      return fail(loc, "conv2d output would be empty along spatial dim " + Twine(i));
    shape.push_back(o);
  }
  types.push_back(RankedTensorType::get(shape, in.getElementType()));
  return success();
}

static LogicalResult inferPool(std::optional<Location> loc, RankedTensorType in,
                               ArrayRef<int64_t> k, ArrayRef<int64_t> s,
                               ArrayRef<int64_t> p, ArrayRef<int64_t> d, bool ceil,
                               SmallVectorImpl<int64_t> &shape) {
  if (in.getRank() != 4 || k.size() != 2 || s.size() != 2 || p.size() != 2 ||
      (!d.empty() && d.size() != 2))
    return fail(loc, "pooling expects a rank-4 input and 2-value window attributes");
  shape.assign({in.getDimSize(0), in.getDimSize(1)});
  for (int i = 0; i < 2; ++i) {
    if (p[i] * 2 > k[i])
      return fail(loc, "pad should be at most half of the kernel size");
    int64_t o = windowOut(in.getDimSize(2 + i), k[i], s[i], p[i], d.empty() ? 1 : d[i], ceil);
    if (o < 1)
      return fail(loc, "pooling output would be empty");
    shape.push_back(o);
  }
  return success();
}

LogicalResult MaxPool2dOp::inferReturnTypes(MLIRContext *ctx, std::optional<Location> loc,
                                            Adaptor a, SmallVectorImpl<Type> &types) {
  auto in = cast<RankedTensorType>(a.getInput().getType());
  SmallVector<int64_t> shape;
  if (failed(inferPool(loc, in, a.getKernelSize(), a.getStride(), a.getPadding(),
                       a.getDilation(), boolOr(a.getCeilModeAttr(), false), shape)))
    return failure();
  types.push_back(RankedTensorType::get(shape, in.getElementType()));
  types.push_back(RankedTensorType::get(shape, IntegerType::get(ctx, 64)));
  return success();
}

LogicalResult AvgPool2dOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                            Adaptor a, SmallVectorImpl<Type> &types) {
  auto in = cast<RankedTensorType>(a.getInput().getType());
  SmallVector<int64_t> shape;
  if (failed(inferPool(loc, in, a.getKernelSize(), a.getStride(), a.getPadding(), {},
                       boolOr(a.getCeilModeAttr(), false), shape)))
    return failure();
  types.push_back(RankedTensorType::get(shape, in.getElementType()));
  return success();
}

LogicalResult AdaptiveAvgPool2dOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                                    Adaptor a, SmallVectorImpl<Type> &types) {
  auto in = cast<RankedTensorType>(a.getInput().getType());
  if (in.getRank() != 4 || a.getOutputSize().size() != 2)
    return fail(loc, "adaptive_avg_pool2d expects a rank-4 input and 2 output sizes");
  types.push_back(RankedTensorType::get(
      {in.getDimSize(0), in.getDimSize(1), a.getOutputSize()[0], a.getOutputSize()[1]},
      in.getElementType()));
  return success();
}

LogicalResult BatchNormOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                            Adaptor a, SmallVectorImpl<Type> &types) {
  auto in = cast<RankedTensorType>(a.getInput().getType());
  if (in.getRank() < 2)
    return fail(loc, "batch_norm expects an input of rank >= 2");
  auto c = RankedTensorType::get({in.getDimSize(1)}, in.getElementType());
  types.append({in, c, c, c, c});
  return success();
}

LogicalResult LayerNormOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                            Adaptor a, SmallVectorImpl<Type> &types) {
  auto in = cast<RankedTensorType>(a.getInput().getType());
  int64_t nd = a.getNormalizedNdim();
  if (nd < 1 || nd > in.getRank())
    return fail(loc, "normalized_ndim must be in [1, rank]");
  // ATen's native_layer_norm: mean/rstd keep the leading dims, with 1s for
  // the normalized ones.
  SmallVector<int64_t> stat(in.getShape());
  for (int64_t i = in.getRank() - nd; i < in.getRank(); ++i)
    stat[i] = 1;
  auto st = RankedTensorType::get(stat, in.getElementType());
  types.append({in, st, st});
  return success();
}

LogicalResult EmbeddingOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                            Adaptor a, SmallVectorImpl<Type> &types) {
  auto w = cast<RankedTensorType>(a.getWeight().getType());
  auto idx = cast<RankedTensorType>(a.getIndices().getType());
  if (w.getRank() != 2)
    return fail(loc, "embedding weight must be [num_embeddings, dim]");
  SmallVector<int64_t> shape(idx.getShape());
  shape.push_back(w.getDimSize(1));
  types.push_back(RankedTensorType::get(shape, w.getElementType()));
  return success();
}

static LogicalResult scalarLike(Type t, SmallVectorImpl<Type> &types) {
  types.push_back(RankedTensorType::get({}, cast<RankedTensorType>(t).getElementType()));
  return success();
}
LogicalResult CrossEntropyOp::inferReturnTypes(MLIRContext *, std::optional<Location>,
                                               Adaptor a, SmallVectorImpl<Type> &types) {
  return scalarLike(a.getLogits().getType(), types);
}
LogicalResult NllLossOp::inferReturnTypes(MLIRContext *, std::optional<Location>,
                                          Adaptor a, SmallVectorImpl<Type> &types) {
  return scalarLike(a.getInput().getType(), types);
}
LogicalResult MseLossOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                          Adaptor a, SmallVectorImpl<Type> &types) {
  if (a.getInput().getType() != a.getTarget().getType())
    return fail(loc, "mse_loss input and target types differ");
  return scalarLike(a.getInput().getType(), types);
}
