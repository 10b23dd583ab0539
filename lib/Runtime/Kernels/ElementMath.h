//===- ElementMath.h - Element formulas shared by host and CUDA -*- C++ -*-===//
//
// Part of offload. The one definition of every elementwise, loss, optimizer,
// dropout and normalization formula of the kernel library, as
// `__host__ __device__` functors and functions. The host kernels
// (lib/Runtime/Kernels/*.cpp) and the CUDA kernels (lib/Runtime/CUDA) both
// call these, so the arithmetic that the GPU runs is the arithmetic that the
// host kernel tests check (unittests/Kernels). Where a host loop is
// hand-vectorised (the AVX2 optimizer loops), the functor is the scalar
// reference those loops are tested against bit for bit.
//
// Rules:
//   * Every formula is written once, with its operations in the order of the
//     PyTorch 1.13 kernel it follows (docs/op-semantics.md); T is float or
//     double, and constants are rounded to T where ATen rounds them.
//   * Transcendental functions go through the wrappers below: the C++
//     library on the host (what the host kernels always called), the CUDA
//     math library in device code. Those are the only operations whose
//     results may differ between the backends (by an ulp or two); +, -, *, /,
//     sqrt and explicit fma are correctly rounded on both, and the CUDA
//     sources are compiled with --fmad=false so that no product and sum are
//     fused beyond the explicit fma calls (docs/runtime.md, "CUDA backend").
//
// No dependency besides <cmath>, <cstdint> and Float16.h (the bf16/f16
// conversions, standard C++ usable in device code); private to lib/Runtime
// and the kernel tests.
//
//===----------------------------------------------------------------------===//
#ifndef OFFLOAD_LIB_RUNTIME_KERNELS_ELEMENTMATH_H
#define OFFLOAD_LIB_RUNTIME_KERNELS_ELEMENTMATH_H

#include "offload/Runtime/Float16.h"

#include <cmath>
#include <cstdint>
#include <type_traits>

#ifdef __CUDACC__
#define OFFLOAD_HD __host__ __device__
#else
#define OFFLOAD_HD
#endif

namespace offload {
namespace rt {
namespace em {

//===----------------------------------------------------------------------===//
// Math wrappers
//===----------------------------------------------------------------------===//

#ifdef __CUDA_ARCH__
#define OFFLOAD_EM_MATH1(NAME, FN)                                             \
  OFFLOAD_HD inline float NAME(float x) { return ::FN##f(x); }                 \
  OFFLOAD_HD inline double NAME(double x) { return ::FN(x); }
#else
#define OFFLOAD_EM_MATH1(NAME, FN)                                             \
  OFFLOAD_HD inline float NAME(float x) { return std::FN(x); }                 \
  OFFLOAD_HD inline double NAME(double x) { return std::FN(x); }
#endif
OFFLOAD_EM_MATH1(expOf, exp)
OFFLOAD_EM_MATH1(sinOf, sin)
OFFLOAD_EM_MATH1(cosOf, cos)
OFFLOAD_EM_MATH1(logOf, log)
OFFLOAD_EM_MATH1(erfOf, erf)
OFFLOAD_EM_MATH1(tanhOf, tanh)
OFFLOAD_EM_MATH1(sqrtOf, sqrt)
#undef OFFLOAD_EM_MATH1

OFFLOAD_HD inline float fmaOf(float a, float b, float c) {
#ifdef __CUDA_ARCH__
  return ::fmaf(a, b, c);
#else
  return std::fma(a, b, c);
#endif
}
OFFLOAD_HD inline double fmaOf(double a, double b, double c) {
#ifdef __CUDA_ARCH__
  return ::fma(a, b, c);
#else
  return std::fma(a, b, c);
#endif
}
OFFLOAD_HD inline double powOf(double a, double b) {
#ifdef __CUDA_ARCH__
  return ::pow(a, b);
#else
  return std::pow(a, b);
#endif
}
template <typename T> OFFLOAD_HD inline bool isNaN(T x) {
#ifdef __CUDA_ARCH__
  return ::isnan(x);
#else
  return std::isnan(x);
#endif
}
template <typename T> OFFLOAD_HD inline bool isInf(T x) {
#ifdef __CUDA_ARCH__
  return ::isinf(x);
#else
  return std::isinf(x);
#endif
}
template <typename T> OFFLOAD_HD inline T minOf(T a, T b) {
  return b < a ? b : a;
}
template <typename T> OFFLOAD_HD inline T maxOf(T a, T b) {
  return a < b ? b : a;
}

//===----------------------------------------------------------------------===//
// Activations and unary math: y = f(x)
//===----------------------------------------------------------------------===//

constexpr double kSqrt1_2 = 0.70710678118654752440;
constexpr double kSqrt2OverPi = 0.79788456080286535588; // sqrt(2/pi)
constexpr double kInvSqrt2Pi = 0.39894228040143267794;  // 1/sqrt(2*pi)
constexpr double kGeluKappa = 0.044715;

template <typename T> OFFLOAD_HD inline T sigmoidOf(T x) {
  return T(1) / (T(1) + expOf(-x));
}

/// ATen relu: NaN propagates.
struct Relu {
  template <typename T> OFFLOAD_HD T operator()(T x) const {
    return isNaN(x) ? x : (x > T(0) ? x : T(0));
  }
};
/// hardtanh(x, min_val, max_val): clamp, NaN propagates.
struct Hardtanh {
  double lo, hi;
  template <typename T> OFFLOAD_HD T operator()(T x) const {
    if (isNaN(x))
      return x;
    return x < T(lo) ? T(lo) : (x > T(hi) ? T(hi) : x);
  }
};
struct Hardswish {
  template <typename T> OFFLOAD_HD T operator()(T x) const {
    T r = minOf(maxOf(x + T(3), T(0)), T(6));
    return x * r / T(6);
  }
};
struct Silu {
  template <typename T> OFFLOAD_HD T operator()(T x) const {
    return x / (T(1) + expOf(-x));
  }
};
/// gelu(approximate="none"): x/2 * (1 + erf(x/sqrt(2))).
struct Gelu {
  template <typename T> OFFLOAD_HD T operator()(T x) const {
    return x * T(0.5) * (T(1) + erfOf(x * T(kSqrt1_2)));
  }
};
/// gelu(approximate="tanh").
struct GeluTanh {
  template <typename T> OFFLOAD_HD T operator()(T x) const {
    T inner = T(kSqrt2OverPi) * (x + T(kGeluKappa) * x * x * x);
    return T(0.5) * x * (T(1) + tanhOf(inner));
  }
};
struct Sigmoid {
  template <typename T> OFFLOAD_HD T operator()(T x) const {
    return sigmoidOf(x);
  }
};
struct Tanh {
  template <typename T> OFFLOAD_HD T operator()(T x) const { return tanhOf(x); }
};
struct Exp {
  template <typename T> OFFLOAD_HD T operator()(T x) const { return expOf(x); }
};
struct Sin {
  template <typename T> OFFLOAD_HD T operator()(T x) const { return sinOf(x); }
};
struct Cos {
  template <typename T> OFFLOAD_HD T operator()(T x) const { return cosOf(x); }
};
struct Neg {
  template <typename T> OFFLOAD_HD T operator()(T x) const { return -x; }
};
struct Sqrt {
  template <typename T> OFFLOAD_HD T operator()(T x) const { return sqrtOf(x); }
};
struct Rsqrt {
  template <typename T> OFFLOAD_HD T operator()(T x) const {
    return T(1) / sqrtOf(x);
  }
};
/// x + value, the Scalar cast to T first (as ATen).
struct AddScalar {
  double value;
  template <typename T> OFFLOAD_HD T operator()(T x) const {
    return x + T(value);
  }
};
/// x * value, the Scalar cast to T first (as ATen).
struct MulScalar {
  double value;
  template <typename T> OFFLOAD_HD T operator()(T x) const {
    return x * T(value);
  }
};

//===----------------------------------------------------------------------===//
// Backward of activations: dx = f(dy, s), s the saved input or result
//===----------------------------------------------------------------------===//

/// ATen threshold_backward(dy, y, 0): y <= 0 ? 0 : dy.
struct ReluBackward {
  template <typename T> OFFLOAD_HD T operator()(T g, T y) const {
    return y <= T(0) ? T(0) : g;
  }
};
struct HardtanhBackward {
  double lo, hi;
  template <typename T> OFFLOAD_HD T operator()(T g, T x) const {
    return (x <= T(lo) || x >= T(hi)) ? T(0) : g;
  }
};
/// ATen 1.13: x < -3 -> 0; x >= 3 -> dy; else dy * (x/3 + 0.5). At exactly
/// x == 3 ATen's own kernels disagree (CPU vectorized and contiguous: dy;
/// CPU scalar path and CUDA: 1.5*dy); this follows the CPU vectorized path,
/// which is what LibTorch CPU returns for contiguous tensors.
struct HardswishBackward {
  template <typename T> OFFLOAD_HD T operator()(T g, T x) const {
    if (x < T(-3))
      return T(0);
    if (x >= T(3))
      return g;
    return g * ((x / T(3)) + T(0.5));
  }
};
struct SiluBackward {
  template <typename T> OFFLOAD_HD T operator()(T g, T x) const {
    T s = sigmoidOf(x);
    return g * s * (T(1) + x * (T(1) - s));
  }
};
struct GeluBackward {
  template <typename T> OFFLOAD_HD T operator()(T g, T x) const {
    T cdf = T(0.5) * (T(1) + erfOf(x * T(kSqrt1_2)));
    T pdf = expOf(T(-0.5) * x * x) * T(kInvSqrt2Pi);
    return g * (cdf + x * pdf);
  }
};
struct GeluTanhBackward {
  template <typename T> OFFLOAD_HD T operator()(T g, T x) const {
    T xSq = x * x;
    T inner = T(kSqrt2OverPi) * (x + T(kGeluKappa) * xSq * x);
    T th = tanhOf(inner);
    T left = T(0.5) * x, right = T(1) + th;
    T leftD = T(0.5) * right;
    T rightD = left * (T(1) - th * th) * T(kSqrt2OverPi) *
               (T(1) + T(3 * kGeluKappa) * xSq);
    return g * (leftD + rightD);
  }
};
struct SigmoidBackward {
  template <typename T> OFFLOAD_HD T operator()(T g, T y) const {
    return g * (T(1) - y) * y;
  }
};
struct TanhBackward {
  template <typename T> OFFLOAD_HD T operator()(T g, T y) const {
    return g * (T(1) - y * y);
  }
};

//===----------------------------------------------------------------------===//
// Binary arithmetic (after numpy broadcasting)
//===----------------------------------------------------------------------===//

struct Add {
  template <typename T> OFFLOAD_HD T operator()(T x, T y) const { return x + y; }
};
struct Sub {
  template <typename T> OFFLOAD_HD T operator()(T x, T y) const { return x - y; }
};
struct Mul {
  template <typename T> OFFLOAD_HD T operator()(T x, T y) const { return x * y; }
};
/// True division (floats only).
struct Div {
  template <typename T> OFFLOAD_HD T operator()(T x, T y) const { return x / y; }
};

/// Integer add that wraps (two's complement) instead of overflowing, as
/// ATen's integer kernels behave: cumsum's running sum.
template <typename T> OFFLOAD_HD inline T wrapAdd(T x, T y) {
  if constexpr (std::is_integral_v<T>)
    return T(std::make_unsigned_t<T>(x) + std::make_unsigned_t<T>(y));
  else
    return x + y;
}

/// offload.compare's predicates, in the order of the dialect's
/// ComparePredicate enum (eq, ne, lt, le, gt, ge); the result is 1 or 0.
/// IEEE comparisons: NaN is unequal to everything.
template <typename T> OFFLOAD_HD inline uint8_t compareOf(int predicate, T x, T y) {
  switch (predicate) {
  case 0: return x == y;
  case 1: return x != y;
  case 2: return x < y;
  case 3: return x <= y;
  case 4: return x > y;
  default: return x >= y;
  }
}

//===----------------------------------------------------------------------===//
// Conversions (fill, copy, masked_fill)
//===----------------------------------------------------------------------===//

/// A double attribute stored as one element of T (bool as uint8_t 0/1).
template <typename T> OFFLOAD_HD inline T fromDouble(double v) {
  if constexpr (std::is_same_v<T, uint8_t>)
    return v != 0.0;
  else
    return T(v);
}
/// copy's dtype cast: a C++ conversion, bool (uint8_t) is "v != 0".
template <typename To, typename From> OFFLOAD_HD inline To castElem(From v) {
  if constexpr (std::is_same_v<To, uint8_t>)
    return v != From(0);
  else
    return To(v);
}

//===----------------------------------------------------------------------===//
// Losses
//===----------------------------------------------------------------------===//

/// cross_entropy's loss from the row sums (docs/op-semantics.md): `nll` =
/// sum_i (lse_i - x[i,t_i]), `smooth` = sum_i sum_c (lse_i - x[i,c]) over
/// the `count` non-ignored rows, in double.
struct CrossEntropyLoss {
  double ls;      ///< label_smoothing
  int64_t c;      ///< classes
  bool mean;      ///< reduction "mean" (else "sum")
  OFFLOAD_HD double operator()(double nll, double smooth,
                               int64_t count) const {
    if (mean) {
      nll /= double(count);
      smooth /= double(count);
    }
    return ls > 0 ? (1 - ls) * nll + (ls / double(c)) * smooth : nll;
  }
};

/// One element of cross_entropy's gradient, with p = exp(x - lse):
///   dloss * ((1-ls)/Dn * (p - [k == t]) + (ls/C)/Ds * (C p - 1)).
struct CrossEntropyGrad {
  double wN; ///< dloss * (1 - ls) / Dn
  double wS; ///< dloss * (ls / C) / Ds
  double ls;
  int64_t c;
  /// The weights for gradient `dloss`, `count` non-ignored rows.
  OFFLOAD_HD static CrossEntropyGrad make(double dloss, double ls, int64_t c,
                                          bool mean, int64_t count) {
    double dn = mean ? double(count) : 1.0;
    double ds = dn;
    return {dloss * (1 - ls) / dn, dloss * (ls / double(c)) / ds, ls, c};
  }
  OFFLOAD_HD double operator()(double x, double lse, bool isTarget) const {
    double pk = expOf(x - lse);
    double v = wN * (pk - (isTarget ? 1.0 : 0.0));
    if (ls > 0)
      v += wS * (double(c) * pk - 1.0);
    return v;
  }
};

/// nll_loss_backward's value at the target positions.
template <typename T>
OFFLOAD_HD inline T nllGradValue(double dloss, bool mean, int64_t count) {
  return T(mean ? -dloss / double(count) : -dloss);
}

/// (x - t)^2 in double: one term of mse_loss's sum.
template <typename T> OFFLOAD_HD inline double mseTerm(T x, T t) {
  double d = double(x) - double(t);
  return d * d;
}
/// mse_loss_backward: norm * (x - t) * dloss, norm = 2/N (mean) or 2,
/// rounded to T (ATen).
template <typename T> struct MseGrad {
  T norm, g;
  OFFLOAD_HD static MseGrad make(bool mean, int64_t n, T dloss) {
    return {T(mean ? 2.0 / double(n) : 2.0), dloss};
  }
  OFFLOAD_HD T operator()(T x, T t) const { return norm * (x - t) * g; }
};

//===----------------------------------------------------------------------===//
// Optimizer updates (torch.optim 1.13, see Optimizer.cpp)
//===----------------------------------------------------------------------===//

/// One SGD element: param p, grad g, momentum buffer b -> new param np, new
/// buffer nb. Factors are the Python floats rounded to T; `t.add_(u,
/// alpha=a)` is fma(u, a, t) as in ATen's vectorized add.
template <typename T> struct SgdStep {
  T wd, mom, damp1, negLr; ///< weight_decay, momentum, 1 - dampening, -lr
  bool hasWd, hasMom, nesterov, first;
  OFFLOAD_HD static SgdStep make(double lr, double momentum, double dampening,
                                 double weightDecay, bool nesterov,
                                 bool firstStep) {
    return {T(weightDecay), T(momentum), T(1 - dampening), T(-lr),
            weightDecay != 0, momentum != 0, nesterov, firstStep};
  }
  OFFLOAD_HD void operator()(T p, T g, T b, T &np, T &nb) const {
    T d = g;
    if (hasWd)
      d = fmaOf(p, wd, d);
    if (hasMom) {
      T bi = first ? d : fmaOf(d, damp1, b * mom);
      nb = bi;
      d = nesterov ? fmaOf(bi, mom, d) : bi;
    } else {
      nb = b;
    }
    np = fmaOf(d, negLr, p);
  }
};

/// One AdamW element at step t (1-based, after the increment):
///   p' = p*(1-lr*wd); m' = fma(g, 1-b1, m*b1); v' = fma((1-b2)*g, g, v*b2)
///   p'' = p' + (-lr/bc1 * m') / (sqrt(v')/sqrt(bc2) + eps)
/// with bc_i = 1 - b_i^t computed in double and the factors rounded to T.
template <typename T> struct AdamWStep {
  T decay, b1, a1, b2, a2, bc2Sqrt, eps, negStep;
  OFFLOAD_HD static AdamWStep make(double lr, double beta1, double beta2,
                                   double epsilon, double weightDecay,
                                   int64_t t) {
    double bc1 = 1 - powOf(beta1, double(t));
    double bc2 = 1 - powOf(beta2, double(t));
    double stepSize = lr / bc1;
    double bc2s = sqrtOf(bc2);
    return {T(1 - lr * weightDecay), T(beta1), T(1 - beta1), T(beta2),
            T(1 - beta2), T(bc2s), T(epsilon), T(-stepSize)};
  }
  OFFLOAD_HD void operator()(T p, T g, T m, T v, T &np, T &nm, T &nv) const {
    T pi = p * decay;                          // param.mul_(1 - lr*wd)
    T mi = fmaOf(g, a1, m * b1);               // exp_avg.mul_(b1).add_(g, 1-b1)
    T vi = fmaOf(a2 * g, g, v * b2);           // exp_avg_sq.mul_(b2).addcmul_
    T denom = sqrtOf(vi) / bc2Sqrt + eps;      // (sqrt(v)/bc2_sqrt).add_(eps)
    np = pi + (negStep * mi) / denom;          // param.addcdiv_(m, denom, -ss)
    nm = mi;
    nv = vi;
  }
};

/// Storage of an optimizer value: f32 and f64 as they are; bf16 and f16
/// (their bits, Bf16Bits and F16Bits) widened to f32 when read and rounded
/// to nearest even when stored (Float16.h). Each has its uint16_t's layout.
struct Bf16Bits {
  uint16_t bits;
};
struct F16Bits {
  uint16_t bits;
};
OFFLOAD_HD inline float widen(float x) { return x; }
OFFLOAD_HD inline double widen(double x) { return x; }
OFFLOAD_HD inline float widen(Bf16Bits x) { return bf16ToFloat(x.bits); }
OFFLOAD_HD inline float widen(F16Bits x) { return f16ToFloat(x.bits); }
OFFLOAD_HD inline void narrow(float x, float &out) { out = x; }
OFFLOAD_HD inline void narrow(double x, double &out) { out = x; }
OFFLOAD_HD inline void narrow(float x, Bf16Bits &out) { out.bits = floatToBf16(x); }
OFFLOAD_HD inline void narrow(float x, F16Bits &out) { out.bits = floatToF16(x); }

/// SgdStep<T> over a stored parameter, gradient and momentum buffer of type
/// P (a bf16/f16 parameter, "bf16-true": P = Bf16Bits/F16Bits, T = float):
/// all widened to T, the step computed in T, each result rounded once to P.
template <typename T, typename P> struct SgdStoredStep {
  SgdStep<T> f;
  OFFLOAD_HD void operator()(P p, P g, P b, P &np, P &nb) const {
    T pi, bi;
    f(T(widen(p)), T(widen(g)), T(widen(b)), pi, bi);
    narrow(pi, np);
    narrow(bi, nb);
  }
};

/// AdamWStep<T> over a stored parameter and gradient of type P and moments
/// of type M: moments=bf16 (P = float, M = Bf16Bits) or a bf16/f16
/// parameter (P = M = Bf16Bits/F16Bits), T = float. Everything is widened to
/// T, the step computed in T, and each result rounded once to its storage;
/// the parameter's step uses the unrounded moments, as a PyTorch loop that
/// keeps `exp_avg.to(bfloat16)` between f32 updates does.
template <typename T, typename P, typename M> struct AdamWStoredStep {
  AdamWStep<T> f;
  OFFLOAD_HD void operator()(P p, P g, M m, M v, P &np, M &nm, M &nv) const {
    T pi, mi, vi;
    f(T(widen(p)), T(widen(g)), T(widen(m)), T(widen(v)), pi, mi, vi);
    narrow(pi, np);
    narrow(mi, nm);
    narrow(vi, nv);
  }
};

//===----------------------------------------------------------------------===//
// Philox4x32-10 and dropout (Random.cpp documents the stream)
//===----------------------------------------------------------------------===//

/// Philox4x32-10 block (Salmon et al., SC'11): encrypts counter `ctr` under
/// `key`, writing four 32-bit words to `out`.
OFFLOAD_HD inline void philox4x32_10(const uint32_t ctr[4],
                                     const uint32_t key[2], uint32_t out[4]) {
  uint32_t c0 = ctr[0], c1 = ctr[1], c2 = ctr[2], c3 = ctr[3];
  uint32_t k0 = key[0], k1 = key[1];
  for (int r = 0; r < 10; ++r) {
    if (r) {
      k0 += 0x9E3779B9u;
      k1 += 0xBB67AE85u;
    }
    uint64_t p0 = uint64_t(0xD2511F53u) * c0;
    uint64_t p1 = uint64_t(0xCD9E8D57u) * c2;
    uint32_t hi0 = uint32_t(p0 >> 32), lo0 = uint32_t(p0);
    uint32_t hi1 = uint32_t(p1 >> 32), lo1 = uint32_t(p1);
    c0 = hi1 ^ c1 ^ k0;
    c1 = lo1;
    c2 = hi0 ^ c3 ^ k1;
    c3 = lo0;
  }
  out[0] = c0;
  out[1] = c1;
  out[2] = c2;
  out[3] = c3;
}

/// philox_uniform(seed, counter) in [0, 1): the first word of the block with
/// key (seed lo, seed hi) and counter (counter lo, counter hi, 0, 0), >> 8,
/// times 2^-24.
OFFLOAD_HD inline float philoxUniform(uint64_t seed, uint64_t counter) {
  const uint32_t key[2] = {uint32_t(seed), uint32_t(seed >> 32)};
  const uint32_t ctr[4] = {uint32_t(counter), uint32_t(counter >> 32), 0, 0};
  uint32_t out[4];
  philox4x32_10(ctr, key, out);
  return float(out[0] >> 8) * (1.0f / 16777216.0f);
}

/// dropout / dropout_backward element i: kept iff philox_uniform(seed,
/// offset + i) >= p (compared in double) and p < 1; kept elements are
/// scaled by 1/(1-p) rounded to T.
template <typename T> struct Dropout {
  double p;
  T scale;
  uint64_t seed, offset;
  OFFLOAD_HD static Dropout make(double p, uint64_t seed, uint64_t offset) {
    return {p, p >= 1.0 ? T(0) : T(1.0 / (1.0 - p)), seed, offset};
  }
  OFFLOAD_HD bool keep(int64_t i) const {
    return double(philoxUniform(seed, offset + uint64_t(i))) >= p && p < 1.0;
  }
  OFFLOAD_HD T operator()(T x, int64_t i) const {
    return keep(i) ? x * scale : T(0);
  }
};

//===----------------------------------------------------------------------===//
// Normalization (Norm.cpp documents the formulas); statistics in double
//===----------------------------------------------------------------------===//

/// Batch norm (training): 1/sqrt(biased variance + eps) from the sum of
/// squared deviations `sq` over `count` values.
OFFLOAD_HD inline double bnInvStd(double sq, int64_t count, double eps) {
  return 1.0 / sqrtOf(sq / double(count) + eps);
}
/// Running statistics: (1 - momentum) * old + momentum * new, the variance
/// unbiased (sq / (count - 1)).
OFFLOAD_HD inline double bnRunningMean(double old, double mean,
                                       double momentum) {
  return (1 - momentum) * old + momentum * mean;
}
OFFLOAD_HD inline double bnRunningVar(double old, double sq, int64_t count,
                                      double momentum) {
  return (1 - momentum) * old + momentum * sq / double(count - 1);
}
/// y = (x - mean) * alpha + b per channel, alpha = invstd * w (w = 1, b = 0
/// when absent), evaluated in double and rounded once. The folded form
/// x * alpha + (b - mean * alpha) in the element type cancels where the mean
/// is large next to the spread (activations around 1000 +- 1: x * alpha and
/// b - mean * alpha each round at 1000 alpha, and their sum keeps only the
/// last digits): 4x ATen fp32's error against float64 there (issue 28,
/// unittests/Kernels/PrecisionTest.cpp); x - mean is exact in double.
struct BnAffine {
  double mean, alpha, beta;
  OFFLOAD_HD static BnAffine make(double mean, double invstd, double w,
                                  double b) {
    return {mean, invstd * w, b};
  }
};
template <typename T> OFFLOAD_HD inline T bnApply(T x, const BnAffine &af) {
  return T((double(x) - af.mean) * af.alpha + af.beta);
}
/// Batch-norm input gradient dx = dy * s + x * t + u per channel, from
/// sum(dy), dot = sum(dy * (x - mean)), the saved mean and invstd, the
/// weight (1 when absent) and the count N*S:
///   k = dot * invstd^2 / count, s = invstd * w, t = -k * s,
///   u = (mean * k - sum / count) * s.
/// dweight = dot * invstd, dbias = sum.
struct BnBackward {
  double s, t, u;
  OFFLOAD_HD static BnBackward make(double sum, double dot, double mean,
                                    double invstd, double w, double count) {
    double k = dot * invstd * invstd / count;
    double gm = sum / count;
    double s = invstd * w;
    return {s, -k * s, (mean * k - gm) * s};
  }
};
template <typename T> OFFLOAD_HD inline T bnBackwardApply(T g, T x, T s, T t,
                                                          T u) {
  return g * s + x * t + u;
}

/// Layer norm: rstd = 1/sqrt(max(sq/D, 0) + eps).
OFFLOAD_HD inline double lnRstd(double sq, int64_t d, double eps) {
  return 1.0 / sqrtOf(maxOf(sq / double(d), 0.0) + eps);
}
/// (x - mean) * rstd, before the affine transform.
template <typename T> OFFLOAD_HD inline T lnNormalize(T x, T mean, T rstd) {
  return (x - mean) * rstd;
}
/// Layer-norm input gradient (ATen LayerNormKernel.cpp) from ds = sum dy*w*x
/// and db = sum dy*w over the row: b = (db*mean - ds) * rstd^3 / D,
/// c = -b*mean - db*rstd/D, dx = rstd*dy*w + b*x + c.
struct LnBackward {
  double b, c;
  OFFLOAD_HD static LnBackward make(double ds, double db, double mean,
                                    double rstd, int64_t d) {
    double bb = (db * mean - ds) * rstd * rstd * rstd / double(d);
    return {bb, -bb * mean - db * rstd / double(d)};
  }
};
template <typename T>
OFFLOAD_HD inline T lnBackwardApply(T rstd, T g, T w, T b, T x, T c) {
  return rstd * g * w + b * x + c;
}
template <typename T>
OFFLOAD_HD inline T lnBackwardApplyNoWeight(T rstd, T g, T b, T x, T c) {
  return rstd * g + b * x + c;
}

//===----------------------------------------------------------------------===//
// Pooling windows (ATen 1.13 Pool.h / AvgPoolKernel / AdaptiveAvgPool)
//===----------------------------------------------------------------------===//

/// Pooling geometry: planes of h*w inputs pooled to oh*ow outputs.
struct PoolGeom {
  int64_t planes = 0, h = 0, w = 0, oh = 0, ow = 0;
  int64_t kh = 1, kw = 1, sh = 1, sw = 1, ph = 0, pw = 0, dh = 1, dw = 1;
  bool ceil = false, countPad = true;
};

/// Largest kernel size, stride, padding or dilation the window kernels
/// (pooling and convolution, host and CUDA) accept. With every window
/// attribute at most 2^31 and tensor dimensions below 2^62 (a plan's buffer
/// sizes bound them far lower), every coordinate those kernels form
/// (`o*s - p + k*d`, `in + 2p`, `(k-1)*d + 1`) fits int64; a corrupted plan
/// with padding 2^40 is refused before any loop instead of looping 1e12
/// times.
constexpr int64_t kMaxWindowAttr = int64_t(1) << 31;

/// The first element >= 0 of the sequence start, start + step, ... (step
/// >= 1), in O(1): a window that begins in the padding skips to its first
/// tap inside the input without stepping through the padding.
OFFLOAD_HD inline int64_t firstInside(int64_t start, int64_t step) {
  return start >= 0 ? start : start + ((-start + step - 1) / step) * step;
}

/// ATen pooling_output_shape.
OFFLOAD_HD inline int64_t poolOutSize(int64_t in, int64_t k, int64_t pad,
                                      int64_t stride, int64_t dil,
                                      bool ceil) {
  int64_t num = in + 2 * pad - dil * (k - 1) - 1 + (ceil ? stride - 1 : 0);
  // Floor division (num may be negative for tiny inputs).
  int64_t q = num >= 0 ? num / stride : -((-num + stride - 1) / stride);
  int64_t out = q + 1;
  if (ceil && (out - 1) * stride >= in + pad)
    --out;
  return out;
}

/// Average-pool window [h0,h1) x [w0,w1) (clipped to the input) and divisor
/// of output (oh, ow), as ATen's cpu_avg_pool.
OFFLOAD_HD inline void avgPoolWindow(const PoolGeom &g, int64_t oh, int64_t ow,
                                     int64_t &h0, int64_t &h1, int64_t &w0,
                                     int64_t &w1, int64_t &div) {
  h0 = oh * g.sh - g.ph;
  w0 = ow * g.sw - g.pw;
  h1 = minOf(h0 + g.kh, g.h + g.ph);
  w1 = minOf(w0 + g.kw, g.w + g.pw);
  int64_t poolSize = (h1 - h0) * (w1 - w0);
  h0 = maxOf<int64_t>(h0, 0);
  w0 = maxOf<int64_t>(w0, 0);
  h1 = minOf(h1, g.h);
  w1 = minOf(w1, g.w);
  div = g.countPad ? poolSize : (h1 - h0) * (w1 - w0);
}

/// Adaptive pooling: output o of `out` covers inputs
/// [floor(o*in/out), ceil((o+1)*in/out)).
OFFLOAD_HD inline int64_t adaptiveStart(int64_t o, int64_t out, int64_t in) {
  return (o * in) / out;
}
OFFLOAD_HD inline int64_t adaptiveEnd(int64_t o, int64_t out, int64_t in) {
  return ((o + 1) * in + out - 1) / out;
}

} // namespace em
} // namespace rt
} // namespace offload

#endif // OFFLOAD_LIB_RUNTIME_KERNELS_ELEMENTMATH_H
