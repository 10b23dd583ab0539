//===- Reduction.cpp - Sum/mean reductions and broadcast_to ----------------===//
//
// Part of offload. reduce_sum / reduce_mean over a set of dims (ATen
// `sum(x, dims, keepdim)` / `mean`), broadcast_to (ATen `expand` +
// contiguous) and the integer prefix sum cumsum (position ids). Sums accumulate in double for f32 and f64 and each output
// element is summed by one thread in a fixed order, so results are
// bit-reproducible and independent of the thread count.
//
//===----------------------------------------------------------------------===//

#include "KernelSupport.h"

#include <limits>

namespace offload {
namespace rt {
namespace kernels {
namespace {

/// Sum (mean when `mean`) of x over attribute `dims` into y.
std::string reduce(const KernelArgs &args, const char *op, bool mean) {
  const TensorView &x = args.inputs[0], &y = args.outputs[0];
  if (auto e = checkFloat(x, op, "x"); !e.empty()) return e;
  if (auto e = checkDType(y, x.dtype, op, "y"); !e.empty()) return e;
  int64_t rank = x.rank();
  bool keepdim = args.attrs.getInt("keepdim", 0) != 0;
  std::vector<int64_t> dims = args.attrs.getInts("dims");
  std::vector<char> red(static_cast<size_t>(rank), dims.empty() ? 1 : 0);
  for (int64_t d : dims) {
    if (!normDim(d, rank))
      return std::string(op) + ": dim " + std::to_string(d) +
             " out of range for rank " + std::to_string(rank);
    if (red[size_t(d)] && !dims.empty())
      return std::string(op) + ": dim " + std::to_string(d) + " repeated";
    red[size_t(d)] = 1;
  }
  std::vector<int64_t> expect, keptShape, redShape, keptStr, redStr;
  int64_t stride = 1;
  std::vector<int64_t> xs(static_cast<size_t>(rank), 0);
  for (int64_t d = rank - 1; d >= 0; --d) {
    xs[size_t(d)] = stride;
    stride *= x.shape[size_t(d)];
  }
  for (int64_t d = 0; d < rank; ++d) {
    if (red[size_t(d)]) {
      if (keepdim) expect.push_back(1);
      redShape.push_back(x.shape[size_t(d)]);
      redStr.push_back(xs[size_t(d)]);
    } else {
      expect.push_back(x.shape[size_t(d)]);
      keptShape.push_back(x.shape[size_t(d)]);
      keptStr.push_back(xs[size_t(d)]);
    }
  }
  if (y.shape != expect)
    return std::string(op) + ": y has shape " + shapeStr(y.shape) +
           ", expected " + shapeStr(expect);
  int64_t nOut = y.numel(), nRed = prodRange(redShape, 0, redShape.size());
  // Reduced dims that are all leading and kept dims all trailing: rows of
  // length nOut are accumulated in order (contiguous access).
  bool prefix = true;
  for (int64_t d = 0, seenKept = 0; d < rank; ++d) {
    if (!red[size_t(d)]) seenKept = 1;
    else if (seenKept) prefix = false;
  }
  auto run = [&](auto tag) {
    using T = decltype(tag);
    const T *xp = x.as<T>();
    T *yp = y.as<T>();
    auto finish = [&](double s) {
      // The mean of no elements is NaN (ATen: 0/0), without dividing by 0.
      return mean ? T(nRed ? s / double(nRed)
                           : std::numeric_limits<double>::quiet_NaN())
                  : T(s);
    };
    if (prefix && nOut > 1) {
      parallelFor(nOut, args.numThreads, std::max<int64_t>(1, kGrain / std::max<int64_t>(1, nRed)),
                  [&](int64_t b, int64_t e) {
                    std::vector<double> acc(size_t(e - b), 0.0);
                    for (int64_t r = 0; r < nRed; ++r) {
                      const T *row = xp + r * nOut;
                      for (int64_t j = b; j < e; ++j) acc[size_t(j - b)] += row[j];
                    }
                    for (int64_t j = b; j < e; ++j) yp[j] = finish(acc[size_t(j - b)]);
                  });
      return;
    }
    // General case: per output, walk the reduced index space (innermost
    // reduced dim fastest). Blocks of a full reduction are summed in
    // parallel in fixed-size pieces and combined in order.
    auto sumRange = [&](int64_t base, int64_t rb, int64_t re) {
      double s = 0;
      if (rb >= re) return s; // an empty reduced dim: nothing to index
      if (redShape.empty()) return double(xp[base]);
      std::vector<int64_t> idx(redShape.size(), 0);
      int64_t r = rb, off = 0;
      for (size_t d = redShape.size(); d-- > 0;) {
        idx[d] = r % redShape[d];
        r /= redShape[d];
        off += idx[d] * redStr[d];
      }
      size_t last = redShape.size() - 1;
      for (int64_t k = rb; k < re;) {
        // Innermost run.
        int64_t len = std::min(re - k, redShape[last] - idx[last]);
        const T *p = xp + base + off;
        int64_t st = redStr[last];
        for (int64_t t = 0; t < len; ++t) s += p[t * st];
        k += len;
        off += len * st;
        idx[last] += len;
        for (size_t d = last + 1; d-- > 0;) {
          if (idx[d] < redShape[d] || d == 0) break;
          off -= idx[d] * redStr[d];
          idx[d] = 0;
          ++idx[d - 1];
          off += redStr[d - 1];
        }
      }
      return s;
    };
    auto baseOf = [&](int64_t o) {
      int64_t base = 0;
      for (size_t d = keptShape.size(); d-- > 0;) {
        base += (o % keptShape[d]) * keptStr[d];
        o /= keptShape[d];
      }
      return base;
    };
    if (nOut == 1 && nRed >= 2 * kGrain) {
      int64_t nBlocks = (nRed + kGrain - 1) / kGrain;
      std::vector<double> part(static_cast<size_t>(nBlocks), 0.0);
      parallelFor(nBlocks, args.numThreads, 1, [&](int64_t b, int64_t e) {
        for (int64_t k = b; k < e; ++k)
          part[size_t(k)] = sumRange(0, k * kGrain, std::min(nRed, (k + 1) * kGrain));
      });
      double s = 0;
      for (double p : part) s += p;
      yp[0] = finish(s);
      return;
    }
    parallelFor(nOut, args.numThreads, std::max<int64_t>(1, kGrain / std::max<int64_t>(1, nRed)),
                [&](int64_t b, int64_t e) {
                  for (int64_t o = b; o < e; ++o)
                    yp[o] = finish(sumRange(baseOf(o), 0, nRed));
                });
  };
  if (x.dtype == DType::F32) run(float());
  else run(double());
  return "";
}

std::string reduceSum(const KernelArgs &a) { return reduce(a, "reduce_sum", false); }
std::string reduceMean(const KernelArgs &a) { return reduce(a, "reduce_mean", true); }

std::string broadcastTo(const KernelArgs &args) {
  const char *op = "broadcast_to";
  const TensorView &x = args.inputs[0], &y = args.outputs[0];
  if (auto e = checkDType(y, x.dtype, op, "y"); !e.empty()) return e;
  std::vector<int64_t> sx;
  if (!broadcastStrides(x.shape, y.shape, sx))
    return std::string(op) + ": " + shapeStr(x.shape) +
           " does not broadcast to " + shapeStr(y.shape);
  size_t es = dtypeSize(x.dtype);
  const char *xp = static_cast<const char *>(x.data);
  char *yp = static_cast<char *>(y.data);
  int64_t inner = y.shape.empty() ? 1 : y.shape.back();
  bool innerContig = !y.shape.empty() && sx.back() == 1;
  int64_t rows = inner ? y.numel() / inner : 0;
  parallelFor(rows, args.numThreads, std::max<int64_t>(1, kGrain / std::max<int64_t>(1, inner)),
              [&](int64_t b, int64_t e) {
                BroadcastWalker w(y.shape, {&sx}, b * inner);
                for (int64_t r = b; r < e; ++r) {
                  char *dst = yp + r * inner * es;
                  if (innerContig) {
                    std::memcpy(dst, xp + w.off[0] * es, size_t(inner) * es);
                  } else {
                    int64_t st = y.shape.empty() ? 0 : sx.back();
                    for (int64_t j = 0; j < inner; ++j)
                      std::memcpy(dst + j * es, xp + (w.off[0] + j * st) * es, es);
                  }
                  for (int64_t j = 0; j < inner; ++j) w.next();
                }
              });
  return "";
}

} // namespace

/// Inclusive prefix sums of an i64 or i32 tensor along attribute `dim`
/// (wrapping, as ATen's integer cumsum); each line is summed by one thread
/// in index order.
std::string cumsum(const KernelArgs &args) {
  const char *op = "cumsum";
  const TensorView &x = args.inputs[0], &y = args.outputs[0];
  if (x.dtype != DType::I64 && x.dtype != DType::I32)
    return cat(op, ": x must be i64 or i32, got ", dtypeName(x.dtype));
  if (auto e = checkSame(x, y, op, "x", "y"); !e.empty()) return e;
  int64_t d = args.attrs.getInt("dim", 0);
  if (x.rank() == 0) {
    if (d != 0) return cat(op, ": dim ", d, " out of range for a rank-0 input");
    if (x.data != y.data) std::memmove(y.data, x.data, x.bytes());
    return "";
  }
  if (!normDim(d, int64_t(x.rank())))
    return cat(op, ": dim ", args.attrs.getInt("dim", 0), " out of range for shape ",
               shapeStr(x.shape));
  int64_t outer = prodRange(x.shape, 0, size_t(d)), n = x.shape[size_t(d)],
          inner = prodRange(x.shape, size_t(d) + 1, x.shape.size());
  auto run = [&](auto tag) {
    using T = decltype(tag);
    const T *xp = x.as<T>();
    T *yp = y.as<T>();
    parallelFor(outer * inner, args.numThreads,
                std::max<int64_t>(1, kGrain / std::max<int64_t>(n, 1)),
                [&](int64_t lo, int64_t hi) {
                  for (int64_t line = lo; line < hi; ++line) {
                    int64_t base = (line / inner) * n * inner + line % inner;
                    T acc = 0;
                    for (int64_t k = 0; k < n; ++k) {
                      acc = em::wrapAdd<T>(acc, xp[base + k * inner]);
                      yp[base + k * inner] = acc;
                    }
                  }
                });
  };
  if (x.dtype == DType::I64) run(int64_t());
  else run(int32_t());
  return "";
}

void registerReductionKernels(KernelRegistry &r) {
  addEmulated<reduceSum>(r, "offload.reduce_sum");
  addEmulated<reduceMean>(r, "offload.reduce_mean");
  r.add("offload.broadcast_to", broadcastTo, Absent::Rejected, LowFloat::Native);
  r.add("offload.cumsum", cumsum);
}

} // namespace kernels
} // namespace rt
} // namespace offload
