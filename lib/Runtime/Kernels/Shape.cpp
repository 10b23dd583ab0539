//===- Shape.cpp - Shape and data-movement host kernels --------------------===//
//
// Part of offload. reshape (a byte copy when the lowering did not alias it),
// transpose (`permute(perm).contiguous()`), cat, slice and slice_backward
// (docs/op-semantics.md, "Reductions, shape, data movement"). These kernels
// move bytes and work for every dtype; outputs must not overlap inputs
// (except reshape, which tolerates exact aliasing).
//
//===----------------------------------------------------------------------===//

#include "Geometry.h"
#include "KernelSupport.h"

namespace offload {
namespace rt {
namespace kernels {
namespace {

std::string reshape(const KernelArgs &args) {
  const char *op = "reshape";
  const TensorView &x = args.inputs[0], &y = args.outputs[0];
  if (auto e = checkDType(y, x.dtype, op, "y"); !e.empty()) return e;
  if (x.numel() != y.numel())
    return std::string(op) + ": cannot reshape " + shapeStr(x.shape) + " to " +
           shapeStr(y.shape);
  if (x.data != y.data) std::memmove(y.data, x.data, x.bytes());
  return "";
}

std::string transpose(const KernelArgs &args) {
  const char *op = "transpose";
  const TensorView &x = args.inputs[0], &y = args.outputs[0];
  if (auto e = checkDType(y, x.dtype, op, "y"); !e.empty()) return e;
  // Input strides, permuted into output order.
  std::vector<int64_t> ps;
  if (auto e = geom::permutation(op, args.attrs.getInts("perm"), x.shape, y.shape, ps);
      !e.empty())
    return e;
  size_t es = dtypeSize(x.dtype);
  const char *xp = static_cast<const char *>(x.data);
  char *yp = static_cast<char *>(y.data);
  parallelFor(y.numel(), args.numThreads, kGrain, [&](int64_t b, int64_t e) {
    BroadcastWalker w(y.shape, {&ps}, b);
    switch (es) {
    case 8:
      for (int64_t i = b; i < e; ++i, w.next())
        reinterpret_cast<uint64_t *>(yp)[i] =
            reinterpret_cast<const uint64_t *>(xp)[w.off[0]];
      break;
    case 4:
      for (int64_t i = b; i < e; ++i, w.next())
        reinterpret_cast<uint32_t *>(yp)[i] =
            reinterpret_cast<const uint32_t *>(xp)[w.off[0]];
      break;
    case 2:
      for (int64_t i = b; i < e; ++i, w.next())
        reinterpret_cast<uint16_t *>(yp)[i] =
            reinterpret_cast<const uint16_t *>(xp)[w.off[0]];
      break;
    default:
      for (int64_t i = b; i < e; ++i, w.next())
        std::memcpy(yp + i * es, xp + w.off[0] * es, es);
    }
  });
  return "";
}

std::string cat(const KernelArgs &args) {
  const char *op = "cat";
  // The table allows a variadic operand with no values; cat needs one.
  if (args.inputs.empty())
    return "cat: expected at least one input and one output";
  const TensorView &y = args.outputs[0];
  int64_t rank = y.rank();
  int64_t dim = args.attrs.getInt("dim", 0);
  if (auto e = geom::catGeometry(op, args.inputs, y, dim); !e.empty())
    return e;
  size_t es = dtypeSize(y.dtype);
  int64_t outer = prodRange(y.shape, 0, size_t(dim));
  int64_t inner = prodRange(y.shape, size_t(dim) + 1, size_t(rank));
  int64_t yRow = y.shape[size_t(dim)] * inner * int64_t(es);
  char *yp = static_cast<char *>(y.data);
  parallelFor(outer, args.numThreads,
              std::max<int64_t>(1, kGrain / std::max<int64_t>(1, yRow / int64_t(es))),
              [&](int64_t b, int64_t e) {
                for (int64_t o = b; o < e; ++o) {
                  char *dst = yp + o * yRow;
                  for (const TensorView &x : args.inputs) {
                    int64_t n = x.shape[size_t(dim)] * inner * int64_t(es);
                    if (n)
                      std::memcpy(dst, static_cast<const char *>(x.data) + o * n,
                                  size_t(n));
                    dst += n;
                  }
                }
              });
  return "";
}

using offload::rt::geom::SliceSpec;

/// Copies between the full tensor and its slice; `toFull` scatters the slice
/// into the full tensor (which the caller zeroed).
void sliceCopy(const TensorView &full, const TensorView &part,
               const SliceSpec &s, bool toFull, int threads) {
  size_t es = dtypeSize(full.dtype);
  int64_t rank = full.rank();
  int64_t outer = prodRange(full.shape, 0, size_t(s.dim));
  int64_t inner = prodRange(full.shape, size_t(s.dim) + 1, size_t(rank));
  int64_t fullDim = full.shape[size_t(s.dim)];
  size_t rowBytes = size_t(inner) * es;
  char *fp = static_cast<char *>(full.data);
  char *pp = static_cast<char *>(part.data);
  int64_t rows = outer * s.len;
  parallelFor(rows, threads, std::max<int64_t>(1, kGrain / std::max<int64_t>(1, inner)),
              [&](int64_t b, int64_t e) {
                for (int64_t r = b; r < e; ++r) {
                  int64_t o = r / std::max<int64_t>(1, s.len), j = r % std::max<int64_t>(1, s.len);
                  char *f = fp + ((o * fullDim) + s.start + j * s.step) * int64_t(rowBytes);
                  char *p = pp + r * int64_t(rowBytes);
                  if (toFull) std::memcpy(f, p, rowBytes);
                  else std::memcpy(p, f, rowBytes);
                }
              });
}

std::vector<int64_t> slicedShape(std::vector<int64_t> s, const SliceSpec &sp) {
  s[size_t(sp.dim)] = sp.len;
  return s;
}

std::string slice(const KernelArgs &args) {
  const char *op = "slice";
  const TensorView &x = args.inputs[0], &y = args.outputs[0];
  if (auto e = checkDType(y, x.dtype, op, "y"); !e.empty()) return e;
  SliceSpec s;
  if (auto e = offload::rt::geom::sliceSpec(op, args.attrs, x.shape, s); !e.empty()) return e;
  if (y.shape != slicedShape(x.shape, s))
    return std::string(op) + ": y has shape " + shapeStr(y.shape) +
           ", expected " + shapeStr(slicedShape(x.shape, s));
  sliceCopy(x, y, s, false, args.numThreads);
  return "";
}

std::string sliceBackward(const KernelArgs &args) {
  const char *op = "slice_backward";
  const TensorView &dy = args.inputs[0], &dx = args.outputs[0];
  if (auto e = checkDType(dx, dy.dtype, op, "dx"); !e.empty()) return e;
  SliceSpec s;
  if (auto e = offload::rt::geom::sliceSpec(op, args.attrs, dx.shape, s); !e.empty()) return e;
  if (dy.shape != slicedShape(dx.shape, s))
    return std::string(op) + ": dy has shape " + shapeStr(dy.shape) +
           ", expected " + shapeStr(slicedShape(dx.shape, s));
  std::memset(dx.data, 0, dx.bytes());
  sliceCopy(dx, dy, s, true, args.numThreads);
  return "";
}

} // namespace

void registerShapeKernels(KernelRegistry &r) {
  r.add("offload.reshape", reshape, Absent::Rejected, LowFloat::Native);
  r.add("offload.transpose", transpose, Absent::Rejected, LowFloat::Native);
  r.add("offload.cat", cat, Absent::Rejected, LowFloat::Native);
  r.add("offload.slice", slice, Absent::Rejected, LowFloat::Native);
  r.add("offload.slice_backward", sliceBackward, Absent::Rejected, LowFloat::Native);
}

} // namespace kernels
} // namespace rt
} // namespace offload
