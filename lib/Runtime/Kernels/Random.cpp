//===- Random.cpp - Philox4x32-10 and dropout ------------------------------===//
//
// Part of offload. The counter-based generator used by dropout, so that a
// recomputed dropout reproduces its mask bit for bit on every backend:
//
//   philox_uniform(seed, counter): Philox4x32-10 with key = (seed lo, seed hi)
//   and counter block = (counter lo, counter hi, 0, 0); the first output word
//   u gives (u >> 8) * 2^-24, in [0, 1).
//
// Philox4x32 round (Salmon, Moraes, Dror, Shaw, "Parallel random numbers: as
// easy as 1, 2, 3", SC'11; Random123's philox.h): with multipliers
// M0 = 0xD2511F53, M1 = 0xCD9E8D57,
//   (hi0, lo0) = M0 * c0, (hi1, lo1) = M1 * c2   (64-bit products)
//   c' = (hi1 ^ c1 ^ k0, lo1, hi0 ^ c3 ^ k1, lo0)
// and the key is bumped by the Weyl constants (0x9E3779B9, 0xBB67AE85)
// between rounds; 10 rounds.
//
// dropout: element i is kept iff philox_uniform(seed, offset + i) >= p (the
// comparison in double: u is exact there), and
// kept elements are scaled by 1/(1-p); p = 1 drops everything.
//
//===----------------------------------------------------------------------===//

#include "ElementMath.h"
#include "KernelSupport.h"

namespace offload {
namespace rt {
namespace kernels {

// The generator itself is em::philox4x32_10 / em::philoxUniform
// (ElementMath.h), shared with the CUDA backend.
void philox4x32_10(const uint32_t ctr[4], const uint32_t key[2],
                   uint32_t out[4]) {
  em::philox4x32_10(ctr, key, out);
}

float philoxUniform(uint64_t seed, uint64_t counter) {
  return em::philoxUniform(seed, counter);
}

namespace {

/// Shared by dropout and dropout_backward: y = x * mask / (1 - p).
std::string dropoutImpl(const KernelArgs &args, const char *op) {
  const TensorView &x = args.inputs[0], &seed = args.inputs[1],
                   &y = args.outputs[0];
  if (auto e = checkFloat(x, op, "input"); !e.empty()) return e;
  if (auto e = checkSame(x, y, op, "input", "result"); !e.empty()) return e;
  if (auto e = checkDType(seed, DType::I64, op, "seed"); !e.empty()) return e;
  if (seed.numel() != 1)
    return std::string(op) + ": seed must hold one element, got " +
           shapeStr(seed.shape);
  double p = args.attrs.getFloat("p", 0.5);
  if (!(p >= 0.0 && p <= 1.0))
    return std::string(op) + ": p must be in [0, 1]";
  uint64_t s = uint64_t(seed.as<int64_t>()[0]);
  uint64_t offset = uint64_t(args.attrs.getInt("offset", 0));
  auto run = [&](auto tag) {
    using T = decltype(tag);
    const T *xp = x.as<T>();
    T *yp = y.as<T>();
    if (p == 0.0) {
      if (xp != yp) std::memmove(yp, xp, x.bytes());
      return;
    }
    // ATen's fused dropout multiplies by the mask and by 1/(1-p) computed in
    // the tensor's dtype (em::Dropout).
    em::Dropout<T> f = em::Dropout<T>::make(p, s, offset);
    parallelFor(x.numel(), args.numThreads, kGrain / 8, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) yp[i] = f(xp[i], i);
    });
  };
  if (x.dtype == DType::F32) run(float());
  else run(double());
  return "";
}

std::string dropout(const KernelArgs &a) { return dropoutImpl(a, "dropout"); }
std::string dropoutBackward(const KernelArgs &a) {
  return dropoutImpl(a, "dropout_backward");
}

} // namespace

void registerRandomKernels(KernelRegistry &r) {
  addEmulated<dropout>(r, "offload.dropout");
  addEmulated<dropoutBackward>(r, "offload.dropout_backward");
}

} // namespace kernels
} // namespace rt
} // namespace offload
