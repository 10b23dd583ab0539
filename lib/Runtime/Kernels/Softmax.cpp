//===- Softmax.cpp - softmax, log_softmax and their backward ops -----------===//
//
// Part of offload. Over attribute `dim` (may be negative), x is viewed as
// [outer, n, inner]:
//   softmax:              y = exp(x - max) / sum(exp(x - max))
//   softmax_backward:     dx = y * (dy - sum(dy * y))
//   log_softmax:          y = x - max - log(sum(exp(x - max)))
//   log_softmax_backward: dx = dy - exp(y) * sum(dy)
// (docs/op-semantics.md). Sums accumulate in double; each (outer, inner) line
// is computed by one thread, so results are deterministic.
//
//===----------------------------------------------------------------------===//

#include "KernelSupport.h"

#include <cmath>
#include <limits>

namespace offload {
namespace rt {
namespace kernels {
namespace {

struct Lines {
  int64_t outer, n, inner;
};

std::string lines(const KernelArgs &args, const char *op, const TensorView &x,
                  Lines &l) {
  int64_t dim = args.attrs.getInt("dim", -1);
  int64_t rank = std::max<int64_t>(1, x.rank());
  if (!normDim(dim, rank))
    return std::string(op) + ": dim out of range for rank " + std::to_string(x.rank());
  if (x.rank() == 0) {
    l = {1, 1, 1};
    return "";
  }
  l.outer = prodRange(x.shape, 0, size_t(dim));
  l.n = x.shape[size_t(dim)];
  l.inner = prodRange(x.shape, size_t(dim) + 1, x.shape.size());
  return "";
}

/// Calls fn(base, stride) for every line of `l`, in parallel.
template <typename F> void forLines(const Lines &l, int threads, F fn) {
  int64_t count = l.outer * l.inner;
  parallelFor(count, threads, std::max<int64_t>(1, kGrain / std::max<int64_t>(1, l.n)),
              [&](int64_t b, int64_t e) {
                for (int64_t k = b; k < e; ++k) {
                  int64_t o = k / l.inner, i = k % l.inner;
                  fn(o * l.n * l.inner + i, l.inner);
                }
              });
}

std::string forward(const KernelArgs &args, const char *op, bool isLog) {
  const TensorView &x = args.inputs[0], &y = args.outputs[0];
  if (auto e = checkFloat(x, op, "x"); !e.empty()) return e;
  if (auto e = checkSame(x, y, op, "x", "y"); !e.empty()) return e;
  Lines l;
  if (auto e = lines(args, op, x, l); !e.empty()) return e;
  auto run = [&](auto tag) {
    using T = decltype(tag);
    const T *xp = x.as<T>();
    T *yp = y.as<T>();
    forLines(l, args.numThreads, [&](int64_t base, int64_t st) {
      const T *in = xp + base;
      T *out = yp + base;
      T m = -std::numeric_limits<T>::infinity();
      for (int64_t j = 0; j < l.n; ++j) m = std::max(m, in[j * st]);
      double s = 0;
      for (int64_t j = 0; j < l.n; ++j) s += std::exp(double(in[j * st] - m));
      if (isLog) {
        T lse = T(std::log(s));
        for (int64_t j = 0; j < l.n; ++j) out[j * st] = in[j * st] - m - lse;
      } else {
        double inv = 1.0 / s;
        for (int64_t j = 0; j < l.n; ++j)
          out[j * st] = T(std::exp(double(in[j * st] - m)) * inv);
      }
    });
  };
  if (x.dtype == DType::F32) run(float());
  else run(double());
  return "";
}

std::string backward(const KernelArgs &args, const char *op, bool isLog) {
  const TensorView &dy = args.inputs[0], &y = args.inputs[1],
                   &dx = args.outputs[0];
  if (auto e = checkFloat(dy, op, "dy"); !e.empty()) return e;
  if (auto e = checkSame(dy, y, op, "dy", "y"); !e.empty()) return e;
  if (auto e = checkSame(dy, dx, op, "dy", "dx"); !e.empty()) return e;
  Lines l;
  if (auto e = lines(args, op, y, l); !e.empty()) return e;
  auto run = [&](auto tag) {
    using T = decltype(tag);
    const T *gp = dy.as<T>(), *yp = y.as<T>();
    T *op_ = dx.as<T>();
    forLines(l, args.numThreads, [&](int64_t base, int64_t st) {
      const T *g = gp + base, *yy = yp + base;
      T *out = op_ + base;
      double s = 0;
      if (isLog) {
        for (int64_t j = 0; j < l.n; ++j) s += double(g[j * st]);
        T sT = T(s);
        for (int64_t j = 0; j < l.n; ++j)
          out[j * st] = g[j * st] - std::exp(yy[j * st]) * sT;
      } else {
        for (int64_t j = 0; j < l.n; ++j) s += double(g[j * st]) * double(yy[j * st]);
        T sT = T(s);
        for (int64_t j = 0; j < l.n; ++j)
          out[j * st] = yy[j * st] * (g[j * st] - sT);
      }
    });
  };
  if (dy.dtype == DType::F32) run(float());
  else run(double());
  return "";
}

std::string softmax(const KernelArgs &a) { return forward(a, "softmax", false); }
std::string logSoftmax(const KernelArgs &a) { return forward(a, "log_softmax", true); }
std::string softmaxBackward(const KernelArgs &a) {
  return backward(a, "softmax_backward", false);
}
std::string logSoftmaxBackward(const KernelArgs &a) {
  return backward(a, "log_softmax_backward", true);
}

} // namespace

void registerSoftmaxKernels(KernelRegistry &r) {
  addEmulated<softmax>(r, "offload.softmax");
  addEmulated<softmaxBackward>(r, "offload.softmax_backward");
  addEmulated<logSoftmax>(r, "offload.log_softmax");
  addEmulated<logSoftmaxBackward>(r, "offload.log_softmax_backward");
}

} // namespace kernels
} // namespace rt
} // namespace offload
