//===- KernelUtilB.h - Helpers for the BLAS/conv/pool/norm kernels -*- C++ -*-===//
//
// Part of offload. Private to LinAlg.cpp, Conv.cpp, Pool.cpp and Norm.cpp:
// argument checking that yields one-line errors, a deterministic parallel-for
// over index ranges, and typed wrappers of OpenBLAS GEMM.
//
// Determinism: parallelFor splits [0, n) into fixed contiguous chunks that
// depend only on n, the thread count and the grain; every kernel makes each
// output element the responsibility of exactly one chunk, and reductions are
// done inside a chunk in a fixed order (no atomics, no cross-thread float
// sums). Results are therefore identical run to run for a fixed thread count.
//
//===----------------------------------------------------------------------===//
#ifndef OFFLOAD_LIB_RUNTIME_KERNELS_KERNELUTILB_H
#define OFFLOAD_LIB_RUNTIME_KERNELS_KERNELUTILB_H

#include "Kernels.h"
#include "ThreadPool.h"

#include <cblas.h>

#include <algorithm>
#include <cstdint>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace offload {
namespace rt {
namespace kernels {
namespace kb {

/// Formats a shape as "[2,3,4]".
inline std::string shapeStr(const std::vector<int64_t> &s) {
  std::ostringstream os;
  os << '[';
  for (size_t i = 0; i < s.size(); ++i)
    os << (i ? "," : "") << s[i];
  os << ']';
  return os.str();
}

/// Concatenates the streamable arguments into one string.
template <typename... Ts> std::string cat(const Ts &...xs) {
  std::ostringstream os;
  (void)std::initializer_list<int>{((os << xs), 0)...};
  return os.str();
}

/// Checks input/output counts; returns "" or an error prefixed by `op`.
inline std::string checkArity(const char *op, const KernelArgs &a,
                              size_t minIn, size_t maxIn, size_t nOut) {
  if (a.inputs.size() < minIn || a.inputs.size() > maxIn)
    return cat(op, ": expected ", minIn == maxIn ? "" : "between ", minIn,
               minIn == maxIn ? "" : cat(" and ", maxIn), " inputs, got ",
               a.inputs.size());
  if (a.outputs.size() != nOut)
    return cat(op, ": expected ", nOut, " outputs, got ", a.outputs.size());
  return "";
}

/// True when the optional operand `i` is present.
inline bool present(const std::vector<TensorView> &v, size_t i) {
  return i < v.size() && v[i].data != nullptr;
}

/// Requires `t` present (data != nullptr unless it has no elements), of float
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

inline std::string checkShape(const char *op, const char *name,
                              const TensorView &t,
                              const std::vector<int64_t> &want) {
  if (t.shape != want)
    return cat(op, ": ", name, " has shape ", shapeStr(t.shape), ", expected ",
               shapeStr(want));
  return "";
}

/// The kernel's element type: the dtype of `t` when it is F32 or F64.
inline bool isFloat(DType t) { return t == DType::F32 || t == DType::F64; }

/// Runs fn(begin, end) over [0, n) split into at most `threads` contiguous
/// chunks of at least `grain` indices each; the calling thread runs the first
/// chunk. fn must not throw.
template <typename Fn>
void parallelFor(int64_t n, int threads, int64_t grain, Fn &&fn) {
  if (n <= 0)
    return;
  grain = std::max<int64_t>(grain, 1);
  int64_t chunks = std::min<int64_t>(std::max(threads, 1), (n + grain - 1) / grain);
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

} // namespace kb
} // namespace kernels
} // namespace rt
} // namespace offload

#endif
