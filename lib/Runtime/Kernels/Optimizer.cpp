//===- Optimizer.cpp - SGD and AdamW parameter updates ---------------------===//
//
// Part of offload. sgd_update and adamw_update (docs/op-semantics.md,
// "Optimizer updates"), following torch.optim's 1.13 single-tensor
// implementations (and the C++ frontend's, which has the same order) operation
// by operation, so that f32 results match PyTorch's to about one ulp:
//   * every Python-float factor is computed in double and rounded to the
//     tensor's dtype before use, as ATen does with a Scalar;
//   * `t.add_(u, alpha=a)` is evaluated as fma(u, a, t), which is what ATen's
//     vectorized CPU add kernel computes (vec::fmadd);
//   * addcmul is fma(v * u1, u2, t) (ATen's AVX2/AVX-512 kernels are built
//     with FMA contraction), addcdiv is `t + (v * u1) / u2`.
// With these, f32 and f64 results are bit-identical to LibTorch 1.13 CPU on
// an FMA machine (checked by unittests/Kernels/LossOptimizerRandomTest.cpp,
// which allows 2 ulp so that it also passes where ATen runs without FMA).
// Outputs may alias the corresponding inputs (in-place update).
//
//===----------------------------------------------------------------------===//

#include "ElementMath.h"
#include "KernelSupport.h"

#include <cmath>
#include <cstring>
#include <immintrin.h>
#include <type_traits>

namespace offload {
namespace rt {
namespace kernels {
namespace {


/// One contiguous range of an SGD update; the element formula is
/// em::SgdStep (ElementMath.h).
template <typename T> struct SgdChunk {
  const T *pp, *gp, *bp;
  T *npp, *nbp;
  em::SgdStep<T> f;
};

template <typename T>
inline void sgdChunkBody(const SgdChunk<T> &c, int64_t b, int64_t e) {
  for (int64_t i = b; i < e; ++i)
    c.f(c.pp[i], c.gp[i], c.bp[i], c.npp[i], c.nbp[i]);
}

template <typename T> void sgdChunk(const SgdChunk<T> &c, int64_t b, int64_t e) {
  sgdChunkBody(c, b, e);
}

template <typename T>
__attribute__((target("fma"))) void sgdChunkFma(const SgdChunk<T> &c, int64_t b, int64_t e) {
  sgdChunkBody(c, b, e);
}

/// The float loop eight lanes at a time with AVX2 + FMA intrinsics, the same
/// operations in the same order as em::SgdStep (the tail runs it), so the
/// results are identical (unittests/Kernels check it bit for bit). Each block of 8 is loaded before it is stored, so
/// an update in place (new_param over param) is well defined. The scalar
/// loop does not vectorize: the compiler cannot rule out partial overlap of
/// its five arrays.
__attribute__((target("avx2,fma"), optimize("fp-contract=off"))) void sgdChunkAvx2(const SgdChunk<float> &c,
                                                      int64_t b, int64_t e) {
  const em::SgdStep<float> &f = c.f;
  const __m256 wd = _mm256_set1_ps(f.wd), mom = _mm256_set1_ps(f.mom),
               damp = _mm256_set1_ps(f.damp1), negLr = _mm256_set1_ps(f.negLr);
  int64_t i = b;
  for (; i + 8 <= e; i += 8) {
    __m256 pi = _mm256_loadu_ps(c.pp + i);
    __m256 d = _mm256_loadu_ps(c.gp + i);
    __m256 bo = _mm256_loadu_ps(c.bp + i);
    if (f.hasWd)
      d = _mm256_fmadd_ps(pi, wd, d);
    __m256 bi = bo;
    if (f.hasMom) {
      bi = f.first ? d : _mm256_fmadd_ps(d, damp, _mm256_mul_ps(bo, mom));
      d = f.nesterov ? _mm256_fmadd_ps(bi, mom, d) : bi;
    }
    _mm256_storeu_ps(c.nbp + i, bi);
    _mm256_storeu_ps(c.npp + i, _mm256_fmadd_ps(d, negLr, pi));
  }
  sgdChunkBody(c, i, e);
}

/// One contiguous range of an AdamW update; the element formula is
/// em::AdamWStep (ElementMath.h).
template <typename T> struct AdamWChunk {
  const T *pp, *gp, *mp, *vp;
  T *npp, *nmp, *nvp;
  em::AdamWStep<T> f;
};

template <typename T>
inline void adamwChunkBody(const AdamWChunk<T> &c, int64_t b, int64_t e) {
  for (int64_t i = b; i < e; ++i)
    c.f(c.pp[i], c.gp[i], c.mp[i], c.vp[i], c.npp[i], c.nmp[i], c.nvp[i]);
}

/// em::AdamWStep eight float lanes at a time (AVX2 + FMA), the same
/// operations in the same order (tested bit for bit against it); fp-contract is off so that no product and
/// sum are fused beyond the explicit fmas.
__attribute__((target("avx2,fma"), optimize("fp-contract=off"))) void
adamwChunkAvx2(const AdamWChunk<float> &c, int64_t b, int64_t e) {
  const em::AdamWStep<float> &f = c.f;
  const __m256 decay = _mm256_set1_ps(f.decay), b1 = _mm256_set1_ps(f.b1),
               a1 = _mm256_set1_ps(f.a1), b2 = _mm256_set1_ps(f.b2),
               a2 = _mm256_set1_ps(f.a2), bc2 = _mm256_set1_ps(f.bc2Sqrt),
               eps = _mm256_set1_ps(f.eps), negStep = _mm256_set1_ps(f.negStep);
  int64_t i = b;
  for (; i + 8 <= e; i += 8) {
    __m256 gi = _mm256_loadu_ps(c.gp + i);
    __m256 pi = _mm256_mul_ps(_mm256_loadu_ps(c.pp + i), decay);
    __m256 mi = _mm256_fmadd_ps(gi, a1, _mm256_mul_ps(_mm256_loadu_ps(c.mp + i), b1));
    __m256 vi = _mm256_fmadd_ps(_mm256_mul_ps(a2, gi), gi,
                                _mm256_mul_ps(_mm256_loadu_ps(c.vp + i), b2));
    __m256 denom = _mm256_add_ps(_mm256_div_ps(_mm256_sqrt_ps(vi), bc2), eps);
    _mm256_storeu_ps(c.npp + i,
                     _mm256_add_ps(pi, _mm256_div_ps(_mm256_mul_ps(negStep, mi), denom)));
    _mm256_storeu_ps(c.nmp + i, mi);
    _mm256_storeu_ps(c.nvp + i, vi);
  }
  adamwChunkBody(c, i, e);
}

std::string checkStep(const char *op, const TensorView &s, const TensorView &ns) {
  if (auto e = checkDType(s, DType::I64, op, "step"); !e.empty()) return e;
  if (auto e = checkDType(ns, DType::I64, op, "new_step"); !e.empty()) return e;
  if (s.numel() != 1 || ns.numel() != 1)
    return std::string(op) + ": step must hold one element";
  return "";
}

/// The update's operands before `skip_if` and all its results must have
/// data (the kernels are registered with Absent::Allowed for the flag only).
std::string checkPresent(const char *op, const KernelArgs &args, size_t required) {
  for (size_t i = 0; i < args.inputs.size(); ++i)
    if (i < required && !args.inputs[i].data && args.inputs[i].numel() != 0)
      return cat(op, ": input ", i, " is null");
  for (size_t i = 0; i < args.outputs.size(); ++i)
    if (!args.outputs[i].data && args.outputs[i].numel() != 0)
      return cat(op, ": output ", i, " is null");
  return "";
}

/// `skip_if` (input `i`, optional; fp16 loss scaling's found_inf): a 0-d i1.
/// Sets `skip` when it is present and true.
std::string readSkip(const char *op, const KernelArgs &args, size_t i, bool &skip) {
  skip = false;
  if (!present(args.inputs, i))
    return "";
  const TensorView &f = args.inputs[i];
  if (auto e = checkDType(f, DType::Bool, op, "found_inf"); !e.empty()) return e;
  if (f.numel() != 1)
    return cat(op, ": found_inf must hold one element, got ", f.numel());
  skip = f.as<uint8_t>()[0] != 0;
  return "";
}

/// The parameter of an update: f32, f64, or bf16/f16 ("bf16-true": computed
/// in f32, each result rounded once to the parameter's type).
std::string checkParam(const char *op, const TensorView &p) {
  if (!isFloat(p.dtype) && !isLowFloat(p.dtype))
    return cat(op, ": param must be f32, f64, bf16 or f16, got ", dtypeName(p.dtype));
  return "";
}

/// Runs `body(P-typed tag)` for the stored type of a bf16/f16 view.
template <typename F> void forLowFloat(DType d, F &&body) {
  if (d == DType::BF16)
    body(em::Bf16Bits());
  else
    body(em::F16Bits());
}

/// A skipped update's result: `to` = `from` bit for bit (nothing to do when
/// the update is in place).
void keep(const TensorView &from, const TensorView &to) {
  if (from.data != to.data && from.bytes())
    std::memmove(to.data, from.data, from.bytes());
}

// sgd_update: param, grad, momentum_buffer, step[, found_inf] -> new_param,
// new_momentum_buffer, new_step. The param (and grad, buffer) is f32, f64,
// bf16 or f16.
std::string sgdUpdate(const KernelArgs &args) {
  const char *op = "sgd_update";
  if (auto e = checkPresent(op, args, 4); !e.empty()) return e;
  const TensorView &p = args.inputs[0], &g = args.inputs[1],
                   &buf = args.inputs[2], &step = args.inputs[3];
  const TensorView &np = args.outputs[0], &nbuf = args.outputs[1],
                   &nstep = args.outputs[2];
  if (auto e = checkParam(op, p); !e.empty()) return e;
  if (auto e = checkSame(p, g, op, "param", "grad"); !e.empty()) return e;
  if (auto e = checkSame(p, buf, op, "param", "momentum_buffer"); !e.empty()) return e;
  if (auto e = checkSame(p, np, op, "param", "new_param"); !e.empty()) return e;
  if (auto e = checkSame(p, nbuf, op, "param", "new_momentum_buffer"); !e.empty()) return e;
  if (auto e = checkStep(op, step, nstep); !e.empty()) return e;
  double lr = args.attrs.getFloat("lr", 0.01);
  double mom = args.attrs.getFloat("momentum", 0.0);
  double damp = args.attrs.getFloat("dampening", 0.0);
  double wd = args.attrs.getFloat("weight_decay", 0.0);
  bool nesterov = args.attrs.getInt("nesterov", 0) != 0;
  if (nesterov && (mom <= 0 || damp != 0))
    return std::string(op) + ": nesterov needs momentum > 0 and zero dampening";
  bool skip;
  if (auto e = readSkip(op, args, 4, skip); !e.empty()) return e;
  if (skip) {
    keep(p, np);
    keep(buf, nbuf);
    keep(step, nstep);
    return "";
  }
  int64_t s = step.as<int64_t>()[0];
  bool first = s == 0;
  auto run = [&](auto tag) {
    using T = decltype(tag);
    SgdChunk<T> c{p.as<T>(), g.as<T>(), buf.as<T>(), np.as<T>(), nbuf.as<T>(),
                  em::SgdStep<T>::make(lr, mom, damp, wd, nesterov, first)};
    // std::fma is one instruction where the CPU has FMA and a libm call
    // otherwise: pick the FMA-compiled loop at run time (same results).
    static const bool hasFma = __builtin_cpu_supports("fma");
    static const bool hasAvx2 = hasFma && __builtin_cpu_supports("avx2");
    parallelFor(p.numel(), args.numThreads, kGrain, [&](int64_t b, int64_t e) {
      if constexpr (std::is_same_v<T, float>) {
        if (hasAvx2) {
          sgdChunkAvx2(c, b, e);
          return;
        }
      }
      if (hasFma)
        sgdChunkFma(c, b, e);
      else
        sgdChunk(c, b, e);
    });
  };
  if (isLowFloat(p.dtype)) {
    // bf16/f16 parameter: f32 compute, one rounding per stored result
    // (em::SgdStoredStep; scalar loop).
    forLowFloat(p.dtype, [&](auto tag) {
      using P = decltype(tag);
      em::SgdStoredStep<float, P> f{em::SgdStep<float>::make(lr, mom, damp, wd, nesterov, first)};
      const P *pp = p.as<P>(), *gp = g.as<P>(), *bp = buf.as<P>();
      P *npp = np.as<P>(), *nbp = nbuf.as<P>();
      parallelFor(p.numel(), args.numThreads, kGrain, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i)
          f(pp[i], gp[i], bp[i], npp[i], nbp[i]);
      });
    });
  } else if (p.dtype == DType::F32) {
    run(float());
  } else {
    run(double());
  }
  nstep.as<int64_t>()[0] = s + 1;
  return "";
}

// adamw_update: param, grad, exp_avg, exp_avg_sq, step[, found_inf] ->
// new_param, new_exp_avg, new_exp_avg_sq, new_step. The param is f32, f64,
// bf16 or f16; the moments are the param's dtype, or bf16 for an f32 param.
std::string adamwUpdate(const KernelArgs &args) {
  const char *op = "adamw_update";
  if (auto e = checkPresent(op, args, 5); !e.empty()) return e;
  const TensorView &p = args.inputs[0], &g = args.inputs[1],
                   &m = args.inputs[2], &v = args.inputs[3], &step = args.inputs[4];
  const TensorView &np = args.outputs[0], &nm = args.outputs[1],
                   &nv = args.outputs[2], &nstep = args.outputs[3];
  if (auto e = checkParam(op, p); !e.empty()) return e;
  if (auto e = checkSame(p, g, op, "param", "grad"); !e.empty()) return e;
  if (auto e = checkSame(p, np, op, "param", "new_param"); !e.empty()) return e;
  // The moments: the parameter's dtype, or bf16 for an f32 parameter
  // (moments=bf16).
  if (m.dtype != p.dtype && !(m.dtype == DType::BF16 && p.dtype == DType::F32))
    return cat(op, ": exp_avg is ", dtypeName(m.dtype), " for a ", dtypeName(p.dtype),
               " param; the moments must be the param's dtype, or bf16 for an f32 param");
  if (m.shape != p.shape)
    return cat(op, ": param has shape ", shapeStr(p.shape), " but exp_avg has shape ",
               shapeStr(m.shape));
  if (auto e = checkSame(m, v, op, "exp_avg", "exp_avg_sq"); !e.empty()) return e;
  if (auto e = checkSame(m, nm, op, "exp_avg", "new_exp_avg"); !e.empty()) return e;
  if (auto e = checkSame(m, nv, op, "exp_avg", "new_exp_avg_sq"); !e.empty()) return e;
  if (auto e = checkStep(op, step, nstep); !e.empty()) return e;
  double lr = args.attrs.getFloat("lr", 1e-3);
  double b1 = args.attrs.getFloat("beta1", 0.9);
  double b2 = args.attrs.getFloat("beta2", 0.999);
  double eps = args.attrs.getFloat("eps", 1e-8);
  double wd = args.attrs.getFloat("weight_decay", 1e-2);
  bool skip;
  if (auto e = readSkip(op, args, 5, skip); !e.empty()) return e;
  if (skip) {
    keep(p, np);
    keep(m, nm);
    keep(v, nv);
    keep(step, nstep);
    return "";
  }
  int64_t t = step.as<int64_t>()[0] + 1;
  auto run = [&](auto tag) {
    using T = decltype(tag);
    const T *pp = p.as<T>(), *gp = g.as<T>(), *mp = m.as<T>(), *vp = v.as<T>();
    T *npp = np.as<T>(), *nmp = nm.as<T>(), *nvp = nv.as<T>();
    AdamWChunk<T> c{pp, gp, mp, vp, npp, nmp, nvp,
                    em::AdamWStep<T>::make(lr, b1, b2, eps, wd, t)};
    static const bool hasAvx2 =
        __builtin_cpu_supports("fma") && __builtin_cpu_supports("avx2");
    parallelFor(p.numel(), args.numThreads, kGrain, [&](int64_t b, int64_t e) {
      if constexpr (std::is_same_v<T, float>) {
        if (hasAvx2) {
          adamwChunkAvx2(c, b, e);
          return;
        }
      }
      adamwChunkBody(c, b, e);
    });
  };
  // Stored types other than f32/f64 (moments=bf16, a bf16/f16 param): f32
  // compute, each result rounded once to its storage (em::AdamWStoredStep;
  // scalar loop, std::fma where AdamWStep fuses).
  auto stored = [&](auto ptag, auto mtag) {
    using P = decltype(ptag);
    using M = decltype(mtag);
    em::AdamWStoredStep<float, P, M> f{em::AdamWStep<float>::make(lr, b1, b2, eps, wd, t)};
    const P *pp = p.as<P>(), *gp = g.as<P>();
    const M *mp = m.as<M>(), *vp = v.as<M>();
    P *npp = np.as<P>();
    M *nmp = nm.as<M>(), *nvp = nv.as<M>();
    parallelFor(p.numel(), args.numThreads, kGrain, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i)
        f(pp[i], gp[i], mp[i], vp[i], npp[i], nmp[i], nvp[i]);
    });
  };
  if (isLowFloat(p.dtype)) {
    forLowFloat(p.dtype, [&](auto tag) { stored(tag, tag); });
  } else if (m.dtype == DType::BF16) {
    stored(float(), em::Bf16Bits());
  } else if (p.dtype == DType::F32) {
    run(float());
  } else {
    run(double());
  }
  nstep.as<int64_t>()[0] = t;
  return "";
}

} // namespace

void registerOptimizerKernels(KernelRegistry &r) {
  // Absent::Allowed for the optional skip_if flag; checkPresent checks the
  // rest. LowFloat::Native: both take bf16/f16 parameters (and adamw_update
  // an f32 parameter's bf16 moments) themselves, computing in f32 and
  // rounding each stored result once; any other mix is refused by name.
  r.add("offload.sgd_update", sgdUpdate, Absent::Allowed, LowFloat::Native);
  r.add("offload.adamw_update", adamwUpdate, Absent::Allowed, LowFloat::Native);
}

} // namespace kernels
} // namespace rt
} // namespace offload
