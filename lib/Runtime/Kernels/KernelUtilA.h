//===- KernelUtilA.h - Helpers for the part-A host kernels ------*- C++ -*-===//
//
// Part of offload. Private to lib/Runtime/Kernels: argument validation,
// shape formatting, a deterministic parallel-for, and numpy-style broadcast
// index helpers used by the elementwise, reduction, shape, loss, optimizer,
// dropout, embedding and softmax kernels.
//
//===----------------------------------------------------------------------===//
#ifndef OFFLOAD_LIB_RUNTIME_KERNELS_KERNELUTILA_H
#define OFFLOAD_LIB_RUNTIME_KERNELS_KERNELUTILA_H

#include "Kernels.h"
#include "ThreadPool.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace offload {
namespace rt {
namespace kernels {
namespace a {

/// "[2,3,4]" for a shape.
inline std::string shapeStr(const std::vector<int64_t> &s) {
  std::string r = "[";
  for (size_t i = 0; i < s.size(); ++i) {
    if (i) r += ",";
    r += std::to_string(s[i]);
  }
  return r + "]";
}

/// Checks operand/result counts; returns an error line or "".
inline std::string checkArity(const KernelArgs &args, const char *op,
                              size_t nIn, size_t nOut) {
  if (args.inputs.size() != nIn || args.outputs.size() != nOut)
    return std::string(op) + ": expected " + std::to_string(nIn) +
           " inputs and " + std::to_string(nOut) + " outputs, got " +
           std::to_string(args.inputs.size()) + " and " +
           std::to_string(args.outputs.size());
  auto badShape = [](const TensorView &t) {
    for (int64_t d : t.shape)
      if (d < 0) return true;
    return false;
  };
  for (size_t i = 0; i < nIn; ++i)
    if (badShape(args.inputs[i]))
      return std::string(op) + ": input " + std::to_string(i) +
             " has a negative dimension " + shapeStr(args.inputs[i].shape);
  for (size_t i = 0; i < nOut; ++i)
    if (badShape(args.outputs[i]))
      return std::string(op) + ": output " + std::to_string(i) +
             " has a negative dimension " + shapeStr(args.outputs[i].shape);
  for (size_t i = 0; i < nIn; ++i)
    if (!args.inputs[i].data && args.inputs[i].numel() != 0)
      return std::string(op) + ": input " + std::to_string(i) + " is null";
  for (size_t i = 0; i < nOut; ++i)
    if (!args.outputs[i].data && args.outputs[i].numel() != 0)
      return std::string(op) + ": output " + std::to_string(i) + " is null";
  return "";
}

/// Error unless `t` is f32 or f64.
inline std::string checkFloat(const TensorView &t, const char *op,
                              const char *what) {
  if (t.dtype != DType::F32 && t.dtype != DType::F64)
    return std::string(op) + ": " + what + " must be f32 or f64, got " +
           dtypeName(t.dtype);
  return "";
}

/// Error unless `a` and `b` have the same dtype and shape.
inline std::string checkSame(const TensorView &a, const TensorView &b,
                             const char *op, const char *an, const char *bn) {
  if (a.dtype != b.dtype)
    return std::string(op) + ": " + an + " is " + dtypeName(a.dtype) +
           " but " + bn + " is " + dtypeName(b.dtype);
  if (a.shape != b.shape)
    return std::string(op) + ": " + an + " has shape " + shapeStr(a.shape) +
           " but " + bn + " has shape " + shapeStr(b.shape);
  return "";
}

/// Error unless `t` has dtype `d`.
inline std::string checkDType(const TensorView &t, DType d, const char *op,
                              const char *what) {
  if (t.dtype != d)
    return std::string(op) + ": " + what + " must be " + dtypeName(d) +
           ", got " + dtypeName(t.dtype);
  return "";
}

/// Minimum elements per thread before a loop is split across threads.
constexpr int64_t kGrain = 1 << 15;

/// Runs fn(begin, end) over [0, n) split into at most `threads` contiguous
/// chunks of at least `grain` items; the caller's thread runs the first chunk.
/// Results are deterministic provided fn writes disjoint outputs per index.
template <typename F>
void parallelFor(int64_t n, int threads, int64_t grain, F &&fn) {
  if (n <= 0) return;
  int64_t maxChunks = std::max<int64_t>(1, n / std::max<int64_t>(1, grain));
  int64_t chunks = std::min<int64_t>(std::max(1, threads), maxChunks);
  if (chunks <= 1) {
    fn(int64_t(0), n);
    return;
  }
  int64_t per = (n + chunks - 1) / chunks;
  runChunks((n + per - 1) / per, [&](int64_t c) {
    int64_t b = c * per, e = std::min(n, b + per);
    if (b < e) fn(b, e);
  });
}

/// Strides (in elements) of `in` viewed as broadcast to `out` (numpy rules:
/// right-aligned, size-1 or missing dims get stride 0). Returns false when
/// `in` is not broadcastable to `out`.
inline bool broadcastStrides(const std::vector<int64_t> &in,
                             const std::vector<int64_t> &out,
                             std::vector<int64_t> &strides) {
  if (in.size() > out.size()) return false;
  size_t off = out.size() - in.size();
  strides.assign(out.size(), 0);
  int64_t s = 1;
  for (size_t i = in.size(); i-- > 0;) {
    if (in[i] != out[i + off] && in[i] != 1) return false;
    strides[i + off] = in[i] == 1 ? 0 : s;
    s *= in[i];
  }
  return true;
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

/// Philox4x32-10 block (Salmon et al., SC'11): encrypts counter `ctr` under
/// `key`, writing four 32-bit words to `out`. Defined in Random.cpp as
/// em::philox4x32_10 (ElementMath.h).
void philox4x32_10(const uint32_t ctr[4], const uint32_t key[2],
                   uint32_t out[4]);

/// Accumulator type for sums: double for both f32 and f64.
template <typename T> struct Acc { using type = double; };

} // namespace a
} // namespace kernels
} // namespace rt
} // namespace offload

#endif
