//===- KernelSupport.h - Helpers shared by the host kernels -----*- C++ -*-===//
//
// Part of offload. Private to lib/Runtime/Kernels: one-line argument errors,
// the deterministic parallel-for over the kernel thread pool, numpy-style
// broadcast index helpers, typed OpenBLAS GEMM wrappers and fixed-order
// floating-point sums.
//
// Operand and result counts, attribute presence, dimensions and data are
// checked once per plan instruction when a plan is loaded (the op-signature
// table, OpSignatures.h), and once per direct call (unit tests, embedders) by
// the registry's Kernel (checkKernelArgs, Kernel.h): kernels check only what
// neither covers (dtypes, shapes against each other, attribute values).
//
// Determinism: parallelFor splits [0, n) into fixed contiguous chunks that
// depend only on n, the thread count and the grain; every kernel makes each
// output element the responsibility of exactly one chunk, and reductions are
// done inside a chunk (or in fixed blocks combined in order), never with
// atomics or cross-thread float sums. Results are therefore identical run to
// run, and independent of the thread count unless a kernel says otherwise.
//
//===----------------------------------------------------------------------===//
#ifndef OFFLOAD_LIB_RUNTIME_KERNELS_KERNELSUPPORT_H
#define OFFLOAD_LIB_RUNTIME_KERNELS_KERNELSUPPORT_H

#include "Geometry.h"
#include "Kernels.h"
#include "ThreadPool.h"
#include "offload/Runtime/Float16.h"

#include <cblas.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <sstream>
#include <string>
#include <vector>

namespace offload {
namespace rt {
namespace kernels {

/// Formats a shape as "[2,3,4]".
inline std::string shapeStr(const std::vector<int64_t> &s) {
  std::string r = "[";
  for (size_t i = 0; i < s.size(); ++i) {
    if (i) r += ",";
    r += std::to_string(s[i]);
  }
  return r + "]";
}

/// Concatenates the streamable arguments into one string.
template <typename... Ts> std::string cat(const Ts &...xs) {
  std::ostringstream os;
  (void)std::initializer_list<int>{((os << xs), 0)...};
  return os.str();
}

/// True when the optional operand `i` is present.
inline bool present(const std::vector<TensorView> &v, size_t i) {
  return i < v.size() && v[i].data != nullptr;
}

/// True for the float dtypes the float kernels take (f32, f64).
inline bool isFloat(DType t) { return t == DType::F32 || t == DType::F64; }

/// Error unless `t` is f32 or f64.
inline std::string checkFloat(const TensorView &t, const char *op,
                              const char *what) {
  if (!isFloat(t.dtype))
    return cat(op, ": ", what, " must be f32 or f64, got ", dtypeName(t.dtype));
  return "";
}

/// Error unless `a` and `b` have the same dtype and shape.
inline std::string checkSame(const TensorView &a, const TensorView &b,
                             const char *op, const char *an, const char *bn) {
  if (a.dtype != b.dtype)
    return cat(op, ": ", an, " is ", dtypeName(a.dtype), " but ", bn, " is ",
               dtypeName(b.dtype));
  if (a.shape != b.shape)
    return cat(op, ": ", an, " has shape ", shapeStr(a.shape), " but ", bn,
               " has shape ", shapeStr(b.shape));
  return "";
}

/// Error unless `t` has dtype `d`.
inline std::string checkDType(const TensorView &t, DType d, const char *op,
                              const char *what) {
  if (t.dtype != d)
    return cat(op, ": ", what, " must be ", dtypeName(d), ", got ",
               dtypeName(t.dtype));
  return "";
}

/// Requires `t` present (data != nullptr unless it has no elements), of
/// dtype `dt` and with no negative dimension.
inline std::string checkTensor(const char *op, const char *name,
                               const TensorView &t, DType dt) {
  for (int64_t d : t.shape)
    if (d < 0)
      return cat(op, ": ", name, " has a negative dimension ",
                 shapeStr(t.shape));
  if (!t.data && t.numel() != 0)
    return cat(op, ": ", name, " is missing");
  if (t.dtype != dt)
    return cat(op, ": ", name, " has dtype ", dtypeName(t.dtype),
               ", expected ", dtypeName(dt));
  return "";
}

/// Error unless `t` has shape `want`.
inline std::string checkShape(const char *op, const char *name,
                              const TensorView &t,
                              const std::vector<int64_t> &want) {
  if (t.shape != want)
    return cat(op, ": ", name, " has shape ", shapeStr(t.shape), ", expected ",
               shapeStr(want));
  return "";
}

/// Minimum elements per thread before an elementwise loop is split.
constexpr int64_t kGrain = 1 << 15;

/// Runs fn(begin, end) over [0, n) split into at most `threads` contiguous
/// chunks of at least `grain` indices each (one chunk when n < 2 * grain);
/// chunk sizes differ by at most one. The calling thread runs the first
/// chunk, pool workers the others (runChunks). fn must not throw.
template <typename Fn>
void parallelFor(int64_t n, int threads, int64_t grain, Fn &&fn) {
  if (n <= 0)
    return;
  grain = std::max<int64_t>(grain, 1);
  int64_t chunks = std::min<int64_t>(std::max(threads, 1),
                                     std::max<int64_t>(1, n / grain));
  if (chunks <= 1) {
    fn(int64_t(0), n);
    return;
  }
  // Chunk c is [c*per + min(c, rem), ...): the first `rem` chunks hold one
  // index more.
  int64_t per = n / chunks, rem = n % chunks;
  runChunks(chunks, [&](int64_t c) {
    int64_t b = c * per + std::min(c, rem);
    fn(b, b + per + (c < rem ? 1 : 0));
  });
}

/// Strides (in elements) of `in` viewed as broadcast to `out` (numpy rules:
/// right-aligned, size-1 or missing dims get stride 0). Returns false when
/// `in` is not broadcastable to `out`.
inline bool broadcastStrides(const std::vector<int64_t> &in,
                             const std::vector<int64_t> &out,
                             std::vector<int64_t> &strides) {
  strides.assign(out.size(), 0);
  return geom::broadcastStrides(in, out, strides.data());
}

/// Walks output linear indices [begin, end) of `shape` and keeps the matching
/// offsets into up to three broadcast inputs up to date.
struct BroadcastWalker {
  const std::vector<int64_t> &shape;
  const std::vector<int64_t> *strides[3];
  int nIn;
  std::vector<int64_t> idx;
  int64_t off[3] = {0, 0, 0};

  BroadcastWalker(const std::vector<int64_t> &outShape,
                  std::initializer_list<const std::vector<int64_t> *> s,
                  int64_t begin)
      : shape(outShape), nIn(int(s.size())) {
    int k = 0;
    for (auto *p : s) strides[k++] = p;
    idx.assign(shape.size(), 0);
    int64_t r = begin;
    for (size_t d = shape.size(); d-- > 0;) {
      idx[d] = shape[d] ? r % shape[d] : 0;
      r = shape[d] ? r / shape[d] : 0;
    }
    for (int j = 0; j < nIn; ++j)
      for (size_t d = 0; d < shape.size(); ++d)
        off[j] += idx[d] * (*strides[j])[d];
  }
  void next() {
    for (size_t d = shape.size(); d-- > 0;) {
      if (++idx[d] < shape[d]) {
        for (int j = 0; j < nIn; ++j) off[j] += (*strides[j])[d];
        return;
      }
      for (int j = 0; j < nIn; ++j) off[j] -= (idx[d] - 1) * (*strides[j])[d];
      idx[d] = 0;
    }
  }
};

/// Normalizes a possibly negative dimension; false when out of range.
inline bool normDim(int64_t &d, int64_t rank) {
  if (d < 0) d += rank;
  return d >= 0 && d < rank;
}

/// Product of shape[b..e).
inline int64_t prodRange(const std::vector<int64_t> &s, size_t b, size_t e) {
  int64_t p = 1;
  for (size_t i = b; i < e && i < s.size(); ++i) p *= s[i];
  return p;
}

/// Sets OpenBLAS's thread count when it differs from the current one.
inline void setBlasThreads(int n) {
  n = std::max(n, 1);
  if (openblas_get_num_threads() != n)
    openblas_set_num_threads(n);
}

/// Row-major C[M,N] = alpha * op(A) op(B) + beta * C, op = transpose when
/// the flag is set; lda/ldb/ldc are row strides in elements.
inline void gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k,
                 float alpha, const float *a, int64_t lda, const float *b,
                 int64_t ldb, float beta, float *c, int64_t ldc) {
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans,
              tb ? CblasTrans : CblasNoTrans, blasint(m), blasint(n),
              blasint(k), alpha, a, blasint(lda), b, blasint(ldb), beta, c,
              blasint(ldc));
}
inline void gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k,
                 double alpha, const double *a, int64_t lda, const double *b,
                 int64_t ldb, double beta, double *c, int64_t ldc) {
  cblas_dgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans,
              tb ? CblasTrans : CblasNoTrans, blasint(m), blasint(n),
              blasint(k), alpha, a, blasint(lda), b, blasint(ldb), beta, c,
              blasint(ldc));
}

/// gemm split over `threads` of our pool: the larger of M and N is cut into
/// contiguous blocks, each a single-threaded BLAS call on its own rows or
/// columns of C. OpenBLAS's own threads are kept at one: on a machine with
/// few cores its idle threads spin (sched_yield) against ours and the copy
/// threads. Every element of C is the same dot product in the same order
/// whatever the split, so results do not depend on the thread count.
/// Products under kGemmSplitFlops run on the calling thread.
constexpr int64_t kGemmSplitFlops = int64_t(1) << 21;
template <typename T>
void gemmParallel(bool ta, bool tb, int64_t m, int64_t n, int64_t k, T alpha,
                  const T *a, int64_t lda, const T *b, int64_t ldb, T beta,
                  T *c, int64_t ldc, int threads) {
  setBlasThreads(1);
  if (threads <= 1 || 2 * m * n * k < kGemmSplitFlops) {
    gemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    return;
  }
  if (n >= m) {
    // Columns [j0, j1) of op(B) and C.
    parallelFor(n, threads, 16, [&](int64_t j0, int64_t j1) {
      gemm(ta, tb, m, j1 - j0, k, alpha, a, lda, tb ? b + j0 * ldb : b + j0,
           ldb, beta, c + j0, ldc);
    });
  } else {
    // Rows [i0, i1) of op(A) and C.
    parallelFor(m, threads, 16, [&](int64_t i0, int64_t i1) {
      gemm(ta, tb, i1 - i0, n, k, alpha, ta ? a + i0 : a + i0 * lda, lda, b,
           ldb, beta, c + i0 * ldc, ldc);
    });
  }
}

/// Largest dimension BLAS accepts (blasint is 32-bit in Debian's OpenBLAS).
constexpr int64_t kMaxBlasDim = 0x7fffffff;

/// Fixed-order sums with kLanes independent double accumulators (lane i sums
/// elements i, i+kLanes, ...; lanes are added left to right at the end). The
/// independent chains let the compiler pipeline or vectorize the loop without
/// reassociating, so the result is the same on every run.
constexpr int kLanes = 8;

inline double reduceLanes(const double *acc) {
  double s = 0;
  for (int l = 0; l < kLanes; ++l)
    s += acc[l];
  return s;
}

/// sum_i p[i].
template <typename T> double sumLanes(const T *p, int64_t n) {
  double acc[kLanes] = {0};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int l = 0; l < kLanes; ++l)
      acc[l] += double(p[i + l]);
  for (int l = 0; i < n; ++i, ++l)
    acc[l] += double(p[i]);
  return reduceLanes(acc);
}

/// sum_i (p[i] - m)^2.
template <typename T> double sqDevLanes(const T *p, int64_t n, double m) {
  double acc[kLanes] = {0};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int l = 0; l < kLanes; ++l) {
      double d = double(p[i + l]) - m;
      acc[l] += d * d;
    }
  for (int l = 0; i < n; ++i, ++l) {
    double d = double(p[i]) - m;
    acc[l] += d * d;
  }
  return reduceLanes(acc);
}

/// sum_i a[i] * (b[i] - m).
template <typename T>
double dotDevLanes(const T *a, const T *b, int64_t n, double m) {
  double acc[kLanes] = {0};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int l = 0; l < kLanes; ++l)
      acc[l] += double(a[i + l]) * (double(b[i + l]) - m);
  for (int l = 0; i < n; ++i, ++l)
    acc[l] += double(a[i]) * (double(b[i]) - m);
  return reduceLanes(acc);
}

//===----------------------------------------------------------------------===//
// bf16 and f16: emulated in f32
//===----------------------------------------------------------------------===//

/// Widens n bf16/f16 elements (dtype `dt`) at `src` to f32 at `dst` (exact).
inline void widenLowFloat(DType dt, const void *src, float *dst, int64_t n,
                          int threads) {
  const uint16_t *p = static_cast<const uint16_t *>(src);
  parallelFor(n, threads, kGrain, [&](int64_t b, int64_t e) {
    if (dt == DType::BF16)
      for (int64_t i = b; i < e; ++i) dst[i] = bf16ToFloat(p[i]);
    else
      for (int64_t i = b; i < e; ++i) dst[i] = f16ToFloat(p[i]);
  });
}

/// Rounds n f32 elements at `src` to bf16/f16 (dtype `dt`) at `dst`, to
/// nearest even.
inline void roundToLowFloat(DType dt, const float *src, void *dst, int64_t n,
                            int threads) {
  uint16_t *p = static_cast<uint16_t *>(dst);
  parallelFor(n, threads, kGrain, [&](int64_t b, int64_t e) {
    if (dt == DType::BF16)
      for (int64_t i = b; i < e; ++i) p[i] = floatToBf16(src[i]);
    else
      for (int64_t i = b; i < e; ++i) p[i] = floatToF16(src[i]);
  });
}

/// The bf16/f16 form of the f32 kernel F (LowFloat::Emulated, Kernel.h):
/// with no bf16/f16 view it is F itself; otherwise every bf16/f16 input is
/// widened to an f32 copy, F runs on f32 views (outputs in f32 scratch,
/// initialised from the outputs' current values), and every bf16/f16
/// output is rounded from its scratch to nearest even. The scratch is host
/// memory of the emulation, outside the plan's arenas. Mixing bf16/f16 with
/// f64 is refused (the dialect never builds it).
template <KernelFn F> std::string emulateLowFloat(const KernelArgs &args) {
  bool low = false, f64 = false;
  for (const auto *views : {&args.inputs, &args.outputs})
    for (const TensorView &v : *views) {
      low |= isLowFloat(v.dtype);
      f64 |= v.dtype == DType::F64;
    }
  if (!low)
    return F(args);
  if (f64)
    return "bf16/f16 operands cannot be mixed with f64 ones";
  std::vector<TensorView> ins(args.inputs), outs(args.outputs);
  std::vector<std::vector<float>> scratch;
  scratch.reserve(ins.size() + outs.size());
  auto widen = [&](TensorView &v) {
    if (!isLowFloat(v.dtype) || !v.data)
      return;
    scratch.emplace_back(size_t(v.numel()));
    widenLowFloat(v.dtype, v.data, scratch.back().data(), v.numel(),
                  args.numThreads);
    v.data = scratch.back().data();
    v.dtype = DType::F32;
  };
  for (TensorView &v : ins) widen(v);
  for (TensorView &v : outs) widen(v);
  KernelArgs wide{ins, outs, args.attrs, args.numThreads};
  if (std::string e = F(wide); !e.empty())
    return e;
  for (size_t k = 0; k < outs.size(); ++k) {
    const TensorView &o = args.outputs[k];
    if (isLowFloat(o.dtype) && o.data)
      roundToLowFloat(o.dtype, outs[k].as<float>(), o.data, o.numel(),
                      args.numThreads);
  }
  return "";
}

/// Registers F for `op` with its bf16/f16 form (emulateLowFloat).
template <KernelFn F>
void addEmulated(KernelRegistry &r, const char *op,
                 Absent absent = Absent::Rejected) {
  r.add(op, &emulateLowFloat<F>, absent, LowFloat::Emulated);
}

} // namespace kernels
} // namespace rt
} // namespace offload

#endif
