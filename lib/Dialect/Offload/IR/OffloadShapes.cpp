//===- OffloadShapes.cpp - Result type inference of compute ops -----------===//
//
// Part of offload. Shape rules are PyTorch 1.13's (ATen shape functions);
// sources are cited per op. Errors name the op's operands and the mismatch.
//
//===----------------------------------------------------------------------===//

#include "offload/Dialect/Offload/IR/OffloadOps.h"

#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Diagnostics.h"
#include "llvm/Support/MathExtras.h"

using namespace mlir;
using namespace mlir::offload;

static LogicalResult fail(std::optional<Location> loc, const Twine &msg) {
  if (loc)
    emitError(*loc) << msg;
  return failure();
}


namespace {
/// Reads an op's attributes for result type inference.
///
/// Inference runs while the op is parsed or built, before the verifier has
/// checked that required attributes exist or have the declared kind (the
/// parser even infers result types before it fills in default values), so
/// the adaptor's typed getters, which assume a checked op, are never used
/// here. Every read checks presence, kind and value range and reports a
/// problem at the op's location, in the verifier's words ("'offload.conv2d'
/// op requires attribute 'stride'").
class AttrReader {
public:
  AttrReader(std::optional<Location> loc, StringRef opName, DictionaryAttr attrs)
      : loc(loc), opName(opName), attrs(attrs) {}

  /// A boolean attribute, `dflt` when absent.
  FailureOr<bool> flag(StringRef name, bool dflt) const {
    if (reported)
      return failure();
    Attribute a = attrs ? attrs.get(name) : Attribute();
    if (!a)
      return dflt;
    if (auto b = dyn_cast<BoolAttr>(a))
      return b.getValue();
    return error("attribute '" + name + "' must be a bool attribute");
  }

  /// An integer attribute in [lo, hi]; required when `dflt` is empty.
  FailureOr<int64_t> integer(StringRef name, std::optional<int64_t> dflt,
                             int64_t lo = INT64_MIN, int64_t hi = INT64_MAX) const {
    if (reported)
      return failure();
    Attribute a = attrs ? attrs.get(name) : Attribute();
    if (!a) {
      if (dflt)
        return *dflt;
      return error("requires attribute '" + name + "'");
    }
    auto i = dyn_cast<IntegerAttr>(a);
    if (!i || !i.getType().isSignlessInteger(64))
      return error("attribute '" + name + "' must be a 64-bit signless integer");
    int64_t v = i.getInt();
    if (v < lo || v > hi)
      return error("attribute '" + name + "' is " + Twine(v) + ", outside [" +
                   Twine(lo) + ", " + Twine(hi) + "]");
    return v;
  }

  /// A required `array<i64: ...>` attribute; `size` entries unless it is
  /// negative, each in [lo, hi].
  FailureOr<ArrayRef<int64_t>> array(StringRef name, int64_t size,
                                     int64_t lo = INT64_MIN,
                                     int64_t hi = INT64_MAX) const {
    if (reported)
      return failure();
    Attribute a = attrs ? attrs.get(name) : Attribute();
    if (!a)
      return error("requires attribute '" + name + "'");
    return checkArray(name, a, size, lo, hi);
  }

  /// An optional `array<i64: ...>` attribute: empty when absent.
  FailureOr<ArrayRef<int64_t>> optionalArray(StringRef name, int64_t size,
                                             int64_t lo = INT64_MIN) const {
    if (reported)
      return failure();
    Attribute a = attrs ? attrs.get(name) : Attribute();
    if (!a)
      return ArrayRef<int64_t>();
    return checkArray(name, a, size, lo, INT64_MAX);
  }

  /// Reports the first problem only: after one, every read fails quietly.
  LogicalResult error(const Twine &msg) const {
    if (loc && !reported)
      emitError(*loc) << "'" << opName << "' op " << msg;
    reported = true;
    return failure();
  }

private:
  FailureOr<ArrayRef<int64_t>> checkArray(StringRef name, Attribute a, int64_t size,
                                          int64_t lo, int64_t hi) const {
    auto arr = dyn_cast<DenseI64ArrayAttr>(a);
    if (!arr)
      return error("attribute '" + name + "' must be an i64 dense array (array<i64: ...>)");
    if (size >= 0 && int64_t(arr.size()) != size)
      return error("attribute '" + name + "' must have " + Twine(size) +
                   " values, got " + Twine(arr.size()));
    for (int64_t v : arr.asArrayRef()) {
      if (v < lo)
        return error("attribute '" + name + "' has value " + Twine(v) +
                     " (must be >= " + Twine(lo) + ")");
      if (v > hi)
        return error("attribute '" + name + "' has value " + Twine(v) +
                     " (must be <= " + Twine(hi) + ")");
    }
    return arr.asArrayRef();
  }

  std::optional<Location> loc;
  StringRef opName;
  DictionaryAttr attrs;
  mutable bool reported = false;
};
} // namespace

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

LogicalResult CompareOp::inferReturnTypes(MLIRContext *ctx, std::optional<Location> loc,
                                          Adaptor adaptor, SmallVectorImpl<Type> &types) {
  SmallVector<Type> ab;
  if (failed(detail::inferBroadcast(loc, adaptor.getLhs().getType(),
                                    adaptor.getRhs().getType(), ab)))
    return failure();
  types.push_back(cast<RankedTensorType>(ab[0]).clone(IntegerType::get(ctx, 1)));
  return success();
}

LogicalResult GatherOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                         Adaptor adaptor, SmallVectorImpl<Type> &types) {
  auto in = cast<RankedTensorType>(adaptor.getInput().getType());
  auto idx = cast<RankedTensorType>(adaptor.getIndex().getType());
  types.push_back(idx.clone(in.getElementType()));
  return success();
}

static LogicalResult inferReduce(std::optional<Location> loc, StringRef opName,
                                 DictionaryAttr attrs, Type input,
                                 SmallVectorImpl<Type> &types) {
  auto in = cast<RankedTensorType>(input);
  AttrReader attr(loc, opName, attrs);
  FailureOr<ArrayRef<int64_t>> dims = attr.optionalArray("dims", -1);
  FailureOr<bool> keepdim = attr.flag("keepdim", false);
  if (failed(dims) || failed(keepdim))
    return failure();
  for (int64_t d : *dims)
    if (d < 0 || d >= in.getRank())
      return fail(loc, "reduction dimension " + Twine(d) + " out of range");
  SmallVector<int64_t> shape;
  for (int64_t i = 0; i < in.getRank(); ++i) {
    bool reduced = dims->empty() || llvm::is_contained(*dims, i);
    if (!reduced)
      shape.push_back(in.getDimSize(i));
    else if (*keepdim)
      shape.push_back(1);
  }
  types.push_back(RankedTensorType::get(shape, in.getElementType()));
  return success();
}

LogicalResult ReduceSumOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                            Adaptor a, SmallVectorImpl<Type> &types) {
  return inferReduce(loc, getOperationName(), a.getAttributes(),
                     a.getInput().getType(), types);
}
LogicalResult ReduceMeanOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                             Adaptor a, SmallVectorImpl<Type> &types) {
  return inferReduce(loc, getOperationName(), a.getAttributes(),
                     a.getInput().getType(), types);
}

LogicalResult TransposeOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                            Adaptor a, SmallVectorImpl<Type> &types) {
  auto in = cast<RankedTensorType>(a.getInput().getType());
  FailureOr<ArrayRef<int64_t>> perm =
      AttrReader(loc, getOperationName(), a.getAttributes()).array("perm", -1);
  if (failed(perm))
    return failure();
  if (int64_t(perm->size()) != in.getRank())
    return fail(loc, "perm has " + Twine(perm->size()) + " entries for a rank-" +
                         Twine(in.getRank()) + " input");
  SmallVector<bool> seen(perm->size(), false);
  SmallVector<int64_t> shape;
  for (int64_t p : *perm) {
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
  FailureOr<int64_t> dimOr =
      AttrReader(loc, getOperationName(), a.getAttributes()).integer("dim", std::nullopt);
  if (failed(dimOr))
    return failure();
  int64_t dim = *dimOr;
  if (dim < 0 || dim >= first.getRank())
    return fail(loc, "cat dimension " + Twine(dim) + " out of range");
  SmallVector<int64_t> shape(first.getShape());
  int64_t total = 0;
  for (Value v : a.getInputs()) {
    auto t = cast<RankedTensorType>(v.getType());
    if (t.getRank() != first.getRank() || t.getElementType() != first.getElementType())
      return fail(loc, "cat inputs differ in rank or element type");
    for (int64_t i = 0; i < t.getRank(); ++i)
      if (i != dim && t.getDimSize(i) != first.getDimSize(i))
        return fail(loc, "cat inputs differ in dimension " + Twine(i));
    int64_t size = t.getDimSize(dim);
    if (ShapedType::isDynamic(size) || ShapedType::isDynamic(total))
      total = ShapedType::kDynamic;
    else if (llvm::AddOverflow(total, size, total))
      return fail(loc, "cat result size along dimension " + Twine(dim) +
                           " overflows a 64-bit integer");
  }
  shape[dim] = total;
  types.push_back(RankedTensorType::get(shape, first.getElementType()));
  return success();
}

LogicalResult SliceOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                        Adaptor a, SmallVectorImpl<Type> &types) {
  auto in = cast<RankedTensorType>(a.getInput().getType());
  AttrReader attr(loc, getOperationName(), a.getAttributes());
  FailureOr<int64_t> dimOr = attr.integer("dim", std::nullopt);
  FailureOr<int64_t> startOr = attr.integer("start", std::nullopt);
  FailureOr<int64_t> endOr = attr.integer("end", std::nullopt);
  FailureOr<int64_t> stepOr = attr.integer("step", 1);
  if (failed(dimOr) || failed(startOr) || failed(endOr) || failed(stepOr))
    return failure();
  int64_t dim = *dimOr, start = *startOr, end = *endOr, step = *stepOr;
  if (dim < 0 || dim >= in.getRank())
    return fail(loc, "slice dimension " + Twine(dim) + " out of range");
  if (step < 1)
    return fail(loc, "slice step must be >= 1");
  SmallVector<int64_t> shape(in.getShape());
  int64_t size = in.getDimSize(dim);
  if (ShapedType::isDynamic(size)) {
    shape[dim] = ShapedType::kDynamic;
  } else {
    // ATen clamps start/end into [0, size] (negative values count from the
    // end); `size` >= 0, so no step below overflows.
    if (start < 0) start = start < -size ? 0 : start + size;
    if (end < 0) end = end < -size ? 0 : end + size;
    start = std::clamp<int64_t>(start, 0, size);
    end = std::clamp<int64_t>(end, start, size);
    int64_t len = end - start;
    shape[dim] = len / step + (len % step != 0);
  }
  types.push_back(RankedTensorType::get(shape, in.getElementType()));
  return success();
}

/// The float operands of a product have one element type (null values, an
/// absent bias, are skipped).
static LogicalResult sameFloatType(std::optional<Location> loc, StringRef op,
                                   ArrayRef<Value> operands) {
  Type first;
  for (Value v : operands) {
    if (!v)
      continue;
    Type et = cast<RankedTensorType>(v.getType()).getElementType();
    if (!first)
      first = et;
    else if (et != first) {
      std::string a, b;
      llvm::raw_string_ostream(a) << first;
      llvm::raw_string_ostream(b) << et;
      return fail(loc, op + " operands must have one element type, got " + a + " and " + b +
                           " (cast one, as PyTorch requires)");
    }
  }
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
  // One float type, as PyTorch requires (no silent upcast of a mixed pair;
  // autocast casts every operand first).
  if (failed(sameFloatType(loc, "linear", {a.getInput(), a.getWeight(), a.getBias()})))
    return failure();
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
  AttrReader attr(loc, getOperationName(), a.getAttributes());
  FailureOr<bool> ta = attr.flag("transpose_a", false);
  FailureOr<bool> tb = attr.flag("transpose_b", false);
  if (failed(ta) || failed(tb))
    return failure();
  if (l.getRank() < 2 || r.getRank() < 2)
    return fail(loc, "matmul operands must have rank >= 2");
  if (failed(sameFloatType(loc, "matmul", {a.getLhs(), a.getRhs()})))
    return failure();
  int64_t m = l.getDimSize(l.getRank() - 2), k = l.getDimSize(l.getRank() - 1);
  if (*ta) std::swap(m, k);
  int64_t k2 = r.getDimSize(r.getRank() - 2), n = r.getDimSize(r.getRank() - 1);
  if (*tb) std::swap(k2, n);
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

/// Largest kernel size, stride, padding or dilation of a window op: the
/// runtime's kernels accept no more (em::kMaxWindowAttr in
/// lib/Runtime/Kernels/ElementMath.h), so a step that could not run is
/// refused here.
constexpr int64_t kMaxWindowAttr = int64_t(1) << 31;

/// Output size of a convolution or pooling window along one dimension:
/// ATen's pooling_output_shape (aten/src/ATen/native/Pool.h) with ceil_mode;
/// for ceil_mode false it is `(in + 2p - d(k-1) - 1) / s + 1`. Needs s >= 1,
/// d >= 1, p >= 0. Computed in 128 bits, so no input overflows; returns a
/// dynamic size for a dynamic input or kernel, std::nullopt when the result
/// does not fit 64 bits.
static std::optional<int64_t> windowOut(int64_t in, int64_t k, int64_t s, int64_t p,
                                        int64_t d, bool ceil) {
  if (ShapedType::isDynamic(in) || ShapedType::isDynamic(k))
    return ShapedType::kDynamic;
  using Wide = __int128;
  Wide num = Wide(in) + 2 * Wide(p) - Wide(d) * (Wide(k) - 1) - 1 + (ceil ? Wide(s) - 1 : 0);
  Wide out = (num >= 0 ? num / s : -((-num + s - 1) / s)) + 1;
  if (ceil && (out - 1) * s >= Wide(in) + p)
    --out;
  if (out > INT64_MAX || out < INT64_MIN)
    return std::nullopt;
  return int64_t(out);
}

LogicalResult Conv2dOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                         Adaptor a, SmallVectorImpl<Type> &types) {
  auto in = cast<RankedTensorType>(a.getInput().getType());
  auto w = cast<RankedTensorType>(a.getWeight().getType());
  AttrReader attr(loc, getOperationName(), a.getAttributes());
  FailureOr<ArrayRef<int64_t>> stride = attr.array("stride", 2, 1, kMaxWindowAttr);
  FailureOr<ArrayRef<int64_t>> padding = attr.array("padding", 2, 0, kMaxWindowAttr);
  FailureOr<ArrayRef<int64_t>> dilation = attr.array("dilation", 2, 1, kMaxWindowAttr);
  FailureOr<int64_t> groups = attr.integer("groups", std::nullopt, 1);
  if (failed(stride) || failed(padding) || failed(dilation) || failed(groups))
    return failure();
  if (in.getRank() != 4 || w.getRank() != 4)
    return fail(loc, "conv2d expects a rank-4 input and weight");
  SmallVector<int64_t> shape{in.getDimSize(0), w.getDimSize(0)};
  for (int i = 0; i < 2; ++i) {
    std::optional<int64_t> o =
        windowOut(in.getDimSize(2 + i), w.getDimSize(2 + i), (*stride)[i],
                  (*padding)[i], (*dilation)[i], false);
    if (!o)
      return fail(loc, "conv2d output size along spatial dim " + Twine(i) +
                           " overflows a 64-bit integer");
    if (!ShapedType::isDynamic(*o) && *o < 1)
      return fail(loc, "conv2d output would be empty along spatial dim " + Twine(i));
    shape.push_back(*o);
  }
  types.push_back(RankedTensorType::get(shape, in.getElementType()));
  return success();
}

/// The output shape of a 2-D pooling op from its window attributes (read and
/// range-checked here: kernel_size and stride >= 1, padding >= 0, at most
/// half the kernel, dilation >= 1 where the op has one; all at most
/// kMaxWindowAttr).
static LogicalResult inferPool(std::optional<Location> loc, StringRef opName,
                               DictionaryAttr attrs, RankedTensorType in,
                               bool hasDilation, SmallVectorImpl<int64_t> &shape) {
  AttrReader attr(loc, opName, attrs);
  FailureOr<ArrayRef<int64_t>> k = attr.array("kernel_size", 2, 1, kMaxWindowAttr);
  FailureOr<ArrayRef<int64_t>> s = attr.array("stride", 2, 1, kMaxWindowAttr);
  FailureOr<ArrayRef<int64_t>> p = attr.array("padding", 2, 0, kMaxWindowAttr);
  FailureOr<ArrayRef<int64_t>> d =
      hasDilation ? attr.array("dilation", 2, 1, kMaxWindowAttr) : FailureOr<ArrayRef<int64_t>>(ArrayRef<int64_t>());
  FailureOr<bool> ceil = attr.flag("ceil_mode", false);
  if (failed(k) || failed(s) || failed(p) || failed(d) || failed(ceil))
    return failure();
  if (in.getRank() != 4)
    return fail(loc, "pooling expects a rank-4 input");
  shape.assign({in.getDimSize(0), in.getDimSize(1)});
  for (int i = 0; i < 2; ++i) {
    if ((*p)[i] > (*k)[i] / 2) // p * 2 > k, without overflow
      return fail(loc, "pad should be at most half of the kernel size");
    std::optional<int64_t> o = windowOut(in.getDimSize(2 + i), (*k)[i], (*s)[i], (*p)[i],
                                         d->empty() ? 1 : (*d)[i], *ceil);
    if (!o)
      return fail(loc, "pooling output size overflows a 64-bit integer");
    if (!ShapedType::isDynamic(*o) && *o < 1)
      return fail(loc, "pooling output would be empty");
    shape.push_back(*o);
  }
  return success();
}

LogicalResult MaxPool2dOp::inferReturnTypes(MLIRContext *ctx, std::optional<Location> loc,
                                            Adaptor a, SmallVectorImpl<Type> &types) {
  auto in = cast<RankedTensorType>(a.getInput().getType());
  SmallVector<int64_t> shape;
  if (failed(inferPool(loc, getOperationName(), a.getAttributes(), in,
                       /*hasDilation=*/true, shape)))
    return failure();
  types.push_back(RankedTensorType::get(shape, in.getElementType()));
  types.push_back(RankedTensorType::get(shape, IntegerType::get(ctx, 64)));
  return success();
}

LogicalResult AvgPool2dOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                            Adaptor a, SmallVectorImpl<Type> &types) {
  auto in = cast<RankedTensorType>(a.getInput().getType());
  SmallVector<int64_t> shape;
  if (failed(inferPool(loc, getOperationName(), a.getAttributes(), in,
                       /*hasDilation=*/false, shape)))
    return failure();
  if (failed(AttrReader(loc, getOperationName(), a.getAttributes())
                 .flag("count_include_pad", true)))
    return failure();
  types.push_back(RankedTensorType::get(shape, in.getElementType()));
  return success();
}

LogicalResult AdaptiveAvgPool2dOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                                    Adaptor a, SmallVectorImpl<Type> &types) {
  auto in = cast<RankedTensorType>(a.getInput().getType());
  FailureOr<ArrayRef<int64_t>> out =
      AttrReader(loc, getOperationName(), a.getAttributes()).array("output_size", 2, 1);
  if (failed(out))
    return failure();
  if (in.getRank() != 4)
    return fail(loc, "adaptive_avg_pool2d expects a rank-4 input");
  types.push_back(RankedTensorType::get(
      {in.getDimSize(0), in.getDimSize(1), (*out)[0], (*out)[1]}, in.getElementType()));
  return success();
}

LogicalResult BatchNormOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                            Adaptor a, SmallVectorImpl<Type> &types) {
  auto in = cast<RankedTensorType>(a.getInput().getType());
  if (in.getRank() < 2)
    return fail(loc, "batch_norm expects an input of rank >= 2");
  // Statistics and running statistics in the per-channel operands' type: a
  // bf16/f16 input with f32 affine parameters and running statistics
  // (mixed precision, docs/precision.md) keeps them in f32.
  Type st = cast<RankedTensorType>(a.getRunningMean().getType()).getElementType();
  auto c = RankedTensorType::get({in.getDimSize(1)}, st);
  types.append({in, c, c, c, c});
  return success();
}

LogicalResult LayerNormOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                            Adaptor a, SmallVectorImpl<Type> &types) {
  auto in = cast<RankedTensorType>(a.getInput().getType());
  FailureOr<int64_t> ndOr = AttrReader(loc, getOperationName(), a.getAttributes())
                               .integer("normalized_ndim", std::nullopt);
  if (failed(ndOr))
    return failure();
  int64_t nd = *ndOr;
  if (nd < 1 || nd > in.getRank())
    return fail(loc, "normalized_ndim must be in [1, rank]");
  // ATen's native_layer_norm: mean/rstd keep the leading dims, with 1s for
  // the normalized ones.
  SmallVector<int64_t> stat(in.getShape());
  for (int64_t i = in.getRank() - nd; i < in.getRank(); ++i)
    stat[i] = 1;
  auto st = RankedTensorType::get(stat, detail::statisticsType(in.getElementType()));
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

LogicalResult AttentionOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                            Adaptor a, SmallVectorImpl<Type> &types) {
  auto q = cast<RankedTensorType>(a.getQuery().getType());
  auto v = cast<RankedTensorType>(a.getValue().getType());
  // Unset before the op exists (its defaults are filled in at creation).
  AttentionLayout layout =
      a.getLayoutAttr() ? a.getLayoutAttr().getValue() : AttentionLayout::bhld;
  if (q.getRank() != 4 || v.getRank() != 4)
    return fail(loc, layout == AttentionLayout::blhd
                         ? "attention (layout blhd) expects query [N, L, Hq, E] and value "
                           "[N, S, Hkv, Ev]"
                         : "attention expects query [N, Hq, L, E] and value [N, Hkv, S, Ev]");
  // out: the query's layout with the value's head size; lse [N, Hq, L].
  AttentionDims qd = attentionDims(q, layout);
  types.push_back(RankedTensorType::get(
      attentionShape({qd.n, qd.h, qd.l, v.getDimSize(3)}, layout), q.getElementType()));
  types.push_back(RankedTensorType::get({qd.n, qd.h, qd.l},
                                        detail::statisticsType(q.getElementType())));
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
