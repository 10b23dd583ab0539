//===- CudaLossOpt.cu - Losses and optimizer updates on CUDA --------------===//
//
// Part of offload. cross_entropy, nll_loss and mse_loss with their backward
// ops, sgd_update and adamw_update, as the host kernels of Loss.cpp and
// Optimizer.cpp, with the element formulas of ElementMath.h
// (em::CrossEntropyLoss / CrossEntropyGrad / MseGrad / nllGradValue,
// em::SgdStep / AdamWStep).
//
// Determinism without atomics: a cross-entropy loss is summed over up to
// 1024 fixed chunks of rows, one block each (rows in order, each row's sums
// by a fixed tree), into the backend's partials scratch, then the chunks'
// sums are added in order by one thread; the other losses are reduced by
// one block or thread, rows in order as the host kernel; each row of a
// cross-entropy gradient is one block.
// The optimizer step counter stays on the device: the update kernel reads
// it, and a one-thread kernel after it writes new_step (so that new_step
// may alias step).
//
// A class target outside [0, C) (and not ignore_index) is an error on the
// host; here the kernel reports it through the context's device error flag
// and the step fails after its synchronisation.
//
//===----------------------------------------------------------------------===//

#include "CudaCommon.cuh"

#include <algorithm>

namespace offload {
namespace rt {
namespace cuda {
namespace {

std::string reductionMode(const CudaKernelArgs &a, const char *op,
                          bool &mean) {
  std::string s = a.attrs.getString("reduction", "mean");
  if (s == "mean")
    mean = true;
  else if (s == "sum")
    mean = false;
  else
    return std::string(op) + ": reduction must be mean or sum, got " + s;
  return "";
}

/// Logits/log-probabilities [N,C] float, target [N] i64, a rank-0 scalar of
/// the input's dtype.
std::string checkClassification(const char *op, const TensorView &in,
                                const TensorView &target,
                                const TensorView &scalar) {
  // bf16/f16 logits (and loss) too: computed from the widened values in
  // double/f32 as the host's emulation, each result rounded once.
  if (auto e = needAnyFloat(in, op, "input"); !e.empty())
    return e;
  if (in.rank() != 2)
    return std::string(op) + ": input must be [N,C], got " +
           shapeStr(in.shape);
  if (auto e = needDType(target, DType::I64, op, "target"); !e.empty())
    return e;
  if (target.rank() != 1 || target.shape[0] != in.shape[0])
    return std::string(op) + ": target has shape " + shapeStr(target.shape) +
           ", expected [" + std::to_string(in.shape[0]) + "]";
  if (auto e = needDType(scalar, in.dtype, op, "loss"); !e.empty())
    return e;
  if (scalar.numel() != 1 || scalar.rank() != 0)
    return std::string(op) + ": loss must be a rank-0 tensor, got " +
           shapeStr(scalar.shape);
  return "";
}

struct CeParams {
  int64_t n, c, ignore;
  double ls;
  int mean;
};

std::string ceParams(const CudaKernelArgs &a, const char *op, CeParams &p) {
  bool mean = true;
  if (auto e = reductionMode(a, op, mean); !e.empty())
    return e;
  p.mean = mean;
  p.ignore = a.attrs.getInt("ignore_index", -100);
  p.ls = a.attrs.getFloat("label_smoothing", 0.0);
  if (p.ls < 0.0 || p.ls > 1.0)
    return std::string(op) + ": label_smoothing must be in [0, 1]";
  return "";
}

/// log(sum(exp(row))) in double over the block (every thread gets it), as
/// the host's rowLogSumExp: the max, then the sum of exp(x - max); a row
/// whose max is infinite gives that max.
template <typename T>
__device__ double rowLogSumExp(const T *row, int64_t c, double *shm) {
  double m = -INFINITY;
  for (int64_t k = threadIdx.x; k < c; k += kThreads)
    m = em::maxOf(m, double(ld(row[k])));
  m = blockMax(m, shm);
  if (em::isInf(m))
    return m;
  double s = 0;
  for (int64_t k = threadIdx.x; k < c; k += kThreads)
    s += em::expOf(double(ld(row[k])) - m);
  s = blockSum(s, shm);
  return m + em::logOf(s);
}

/// Rows [lo, hi) of chunk b of n rows in `chunks` chunks: a function of n
/// and chunks only, so the sums' order does not depend on the launch.
__device__ inline void chunkRows(int64_t n, int64_t chunks, int64_t b,
                                 int64_t &lo, int64_t &hi) {
  lo = b * n / chunks;
  hi = (b + 1) * n / chunks;
}

/// Block b sums the nll, the label-smoothing term and the count of chunk b
/// (rows in order, each row's log-sum-exp by a fixed tree) into
/// partials[b], [chunks + b], [2 chunks + b].
template <typename T>
__global__ void crossEntropyChunkKernel(const T *x, const int64_t *t,
                                        double *partials, int64_t chunks,
                                        CeParams p, int *flag, int instr) {
  __shared__ double shm[kThreads];
  for (int64_t b = blockIdx.x; b < chunks; b += gridDim.x) {
    int64_t lo, hi;
    chunkRows(p.n, chunks, b, lo, hi);
    double nll = 0, sm = 0;
    int64_t count = 0;
    for (int64_t i = lo; i < hi; ++i) {
      int64_t ti = t[i];
      if (ti == p.ignore)
        continue;
      if (ti < 0 || ti >= p.c) {
        if (threadIdx.x == 0)
          reportDeviceError(flag, instr, kDeviceErrorIndexRange);
        continue;
      }
      const T *row = x + i * p.c;
      double lse = rowLogSumExp(row, p.c, shm);
      nll += lse - double(ld(row[ti]));
      if (p.ls > 0) {
        double s = 0;
        for (int64_t k = threadIdx.x; k < p.c; k += kThreads)
          s += lse - double(ld(row[k]));
        sm += blockSum(s, shm);
      }
      ++count;
    }
    if (threadIdx.x == 0) {
      partials[b] = nll;
      partials[chunks + b] = sm;
      partials[2 * chunks + b] = double(count);
    }
  }
}

/// One thread adds the chunks' partial sums in chunk order.
template <typename T>
__global__ void crossEntropyFinishKernel(const double *partials,
                                         int64_t chunks, T *loss,
                                         CeParams p) {
  double nll = 0, sm = 0, count = 0;
  for (int64_t b = 0; b < chunks; ++b) {
    nll += partials[b];
    sm += partials[chunks + b];
    count += partials[2 * chunks + b];
  }
  loss[0] = st<T>(Acc<T>(em::CrossEntropyLoss{p.ls, p.c, p.mean != 0}(
      nll, sm, int64_t(count))));
}

/// Number of targets that are not ignore_index, over the block.
__device__ int64_t countValid(const int64_t *t, int64_t n, int64_t ignore,
                              double *shm) {
  double cnt = 0;
  for (int64_t k = threadIdx.x; k < n; k += kThreads)
    cnt += t[k] != ignore ? 1.0 : 0.0;
  return int64_t(blockSum(cnt, shm));
}

/// One block per row (grid-stride over rows).
template <typename T>
__global__ void crossEntropyBackwardKernel(const T *dloss, const T *x,
                                           const int64_t *t, T *dx,
                                           CeParams p, int *flag, int instr) {
  __shared__ double shm[kThreads];
  int64_t count = countValid(t, p.n, p.ignore, shm);
  em::CrossEntropyGrad grad = em::CrossEntropyGrad::make(
      double(ld(dloss[0])), p.ls, p.c, p.mean != 0, count);
  for (int64_t i = blockIdx.x; i < p.n; i += gridDim.x) {
    const T *row = x + i * p.c;
    T *out = dx + i * p.c;
    int64_t ti = t[i];
    bool bad = ti != p.ignore && (ti < 0 || ti >= p.c);
    if (bad && threadIdx.x == 0)
      reportDeviceError(flag, instr, kDeviceErrorIndexRange);
    if (ti == p.ignore || bad) {
      for (int64_t k = threadIdx.x; k < p.c; k += kThreads)
        out[k] = st<T>(Acc<T>(0));
      continue;
    }
    double lse = rowLogSumExp(row, p.c, shm);
    for (int64_t k = threadIdx.x; k < p.c; k += kThreads)
      out[k] = st<T>(Acc<T>(grad(double(ld(row[k])), lse, k == ti)));
  }
}

std::string kCrossEntropy(const CudaKernelArgs &a) {
  const char *op = "cross_entropy";
  CeParams p;
  if (auto e = ceParams(a, op, p); !e.empty())
    return e;
  const TensorView &x = a.inputs[0], &t = a.inputs[1], &y = a.outputs[0];
  if (auto e = checkClassification(op, x, t, y); !e.empty())
    return e;
  p.n = x.shape[0];
  p.c = x.shape[1];
  // The rows in up to kPartialChunks fixed chunks, one block each, then
  // the chunks' sums in order.
  int64_t chunks = std::max<int64_t>(1, std::min<int64_t>(p.n, kPartialChunks));
  auto run = [&](auto tag) {
    using T = decltype(tag);
    crossEntropyChunkKernel<T><<<int(chunks), kThreads, 0, a.ctx.stream>>>(
        x.as<T>(), t.as<int64_t>(), a.ctx.partials, chunks, p,
        a.ctx.errorFlag, a.instruction);
    crossEntropyFinishKernel<T><<<1, 1, 0, a.ctx.stream>>>(
        a.ctx.partials, chunks, y.as<T>(), p);
  };
  dispatchFloat(x.dtype, run);
  return launched(op);
}

std::string kCrossEntropyBackward(const CudaKernelArgs &a) {
  const char *op = "cross_entropy_backward";
  CeParams p;
  if (auto e = ceParams(a, op, p); !e.empty())
    return e;
  const TensorView &dl = a.inputs[0], &x = a.inputs[1], &t = a.inputs[2],
                   &dx = a.outputs[0];
  if (auto e = checkClassification(op, x, t, dl); !e.empty())
    return e;
  if (auto e = needSame(x, dx, op, "logits", "dlogits"); !e.empty())
    return e;
  p.n = x.shape[0];
  p.c = x.shape[1];
  if (p.n == 0 || p.c == 0)
    return "";
  int blocks = int(std::min<int64_t>(p.n, 1 << 16));
  dispatchFloat(x.dtype, [&](auto tag) {
    using T = decltype(tag);
    crossEntropyBackwardKernel<T><<<blocks, kThreads, 0, a.ctx.stream>>>(
        dl.as<T>(), x.as<T>(), t.as<int64_t>(), dx.as<T>(), p,
        a.ctx.errorFlag, a.instruction);
  });
  return launched(op);
}

/// One thread, rows in order: the host kernel's sum.
template <typename T>
__global__ void nllKernel(const T *x, const int64_t *t, T *loss, CeParams p,
                          int *flag, int instr) {
  if (threadIdx.x != 0 || blockIdx.x != 0)
    return;
  double s = 0;
  int64_t count = 0;
  for (int64_t i = 0; i < p.n; ++i) {
    int64_t ti = t[i];
    if (ti == p.ignore)
      continue;
    if (ti < 0 || ti >= p.c) {
      reportDeviceError(flag, instr, kDeviceErrorIndexRange);
      continue;
    }
    s -= double(ld(x[i * p.c + ti]));
    ++count;
  }
  if (p.mean)
    s /= double(count);
  loss[0] = st<T>(Acc<T>(s));
}

/// One block: dx (zeroed before) gets the gradient at the target positions.
template <typename T>
__global__ void nllBackwardKernel(const T *dloss, const int64_t *t, T *dx,
                                  CeParams p, int *flag, int instr) {
  __shared__ double shm[kThreads];
  int64_t count = countValid(t, p.n, p.ignore, shm);
  T v = st<T>(em::nllGradValue<Acc<T>>(double(ld(dloss[0])), p.mean != 0, count));
  for (int64_t i = threadIdx.x; i < p.n; i += kThreads) {
    int64_t ti = t[i];
    if (ti == p.ignore)
      continue;
    if (ti < 0 || ti >= p.c) {
      reportDeviceError(flag, instr, kDeviceErrorIndexRange);
      continue;
    }
    dx[i * p.c + ti] = v;
  }
}

std::string kNllLoss(const CudaKernelArgs &a) {
  const char *op = "nll_loss";
  bool mean = true;
  if (auto e = reductionMode(a, op, mean); !e.empty())
    return e;
  const TensorView &x = a.inputs[0], &t = a.inputs[1], &y = a.outputs[0];
  if (auto e = checkClassification(op, x, t, y); !e.empty())
    return e;
  CeParams p{x.shape[0], x.shape[1], a.attrs.getInt("ignore_index", -100),
             0.0, mean};
  dispatchFloat(x.dtype, [&](auto tag) {
    using T = decltype(tag);
    nllKernel<T><<<1, 1, 0, a.ctx.stream>>>(x.as<T>(), t.as<int64_t>(),
                                           y.as<T>(), p, a.ctx.errorFlag,
                                           a.instruction);
  });
  return launched(op);
}

std::string kNllLossBackward(const CudaKernelArgs &a) {
  const char *op = "nll_loss_backward";
  bool mean = true;
  if (auto e = reductionMode(a, op, mean); !e.empty())
    return e;
  const TensorView &dl = a.inputs[0], &x = a.inputs[1], &t = a.inputs[2],
                   &dx = a.outputs[0];
  if (auto e = checkClassification(op, x, t, dl); !e.empty())
    return e;
  if (auto e = needSame(x, dx, op, "logp", "dlogp"); !e.empty())
    return e;
  CeParams p{x.shape[0], x.shape[1], a.attrs.getInt("ignore_index", -100),
             0.0, mean};
  if (dx.bytes()) {
    cudaError_t e = cudaMemsetAsync(dx.data, 0, dx.bytes(), a.ctx.stream);
    if (e != cudaSuccess)
      return cudaErrorText("cudaMemsetAsync", e);
  }
  dispatchFloat(x.dtype, [&](auto tag) {
    using T = decltype(tag);
    nllBackwardKernel<T><<<1, kThreads, 0, a.ctx.stream>>>(
        dl.as<T>(), t.as<int64_t>(), dx.as<T>(), p, a.ctx.errorFlag,
        a.instruction);
  });
  return launched(op);
}

template <typename T>
__global__ void mseKernel(const T *x, const T *t, T *loss, int64_t n,
                          int mean) {
  __shared__ double shm[kThreads];
  double s = 0;
  for (int64_t i = threadIdx.x; i < n; i += kThreads)
    s += em::mseTerm(ld(x[i]), ld(t[i]));
  s = blockSum(s, shm);
  if (threadIdx.x == 0) {
    if (mean)
      s /= double(n);
    loss[0] = st<T>(Acc<T>(s));
  }
}

template <typename T>
__global__ void mseBackwardKernel(const T *dloss, const T *x, const T *t,
                                  T *dx, int64_t n, int mean) {
  using A = Acc<T>;
  em::MseGrad<A> grad = em::MseGrad<A>::make(mean != 0, n, ld(dloss[0]));
  OFFLOAD_GRID_LOOP(i, n) dx[i] = st<T>(grad(ld(x[i]), ld(t[i])));
}

std::string kMseLoss(const CudaKernelArgs &a) {
  const char *op = "mse_loss";
  bool mean = true;
  if (auto e = reductionMode(a, op, mean); !e.empty())
    return e;
  const TensorView &x = a.inputs[0], &t = a.inputs[1], &y = a.outputs[0];
  if (auto e = needAnyFloat(x, op, "x"); !e.empty())
    return e;
  if (auto e = needSame(x, t, op, "x", "target"); !e.empty())
    return e;
  if (auto e = needDType(y, x.dtype, op, "loss"); !e.empty())
    return e;
  if (y.rank() != 0)
    return std::string(op) + ": loss must be rank 0";
  dispatchFloat(x.dtype, [&](auto tag) {
    using T = decltype(tag);
    mseKernel<T><<<1, kThreads, 0, a.ctx.stream>>>(x.as<T>(), t.as<T>(),
                                                  y.as<T>(), x.numel(), mean);
  });
  return launched(op);
}

std::string kMseLossBackward(const CudaKernelArgs &a) {
  const char *op = "mse_loss_backward";
  bool mean = true;
  if (auto e = reductionMode(a, op, mean); !e.empty())
    return e;
  const TensorView &dl = a.inputs[0], &x = a.inputs[1], &t = a.inputs[2],
                   &dx = a.outputs[0];
  if (auto e = needAnyFloat(x, op, "x"); !e.empty())
    return e;
  if (auto e = needSame(x, t, op, "x", "target"); !e.empty())
    return e;
  if (auto e = needSame(x, dx, op, "x", "dx"); !e.empty())
    return e;
  if (auto e = needDType(dl, x.dtype, op, "dloss"); !e.empty())
    return e;
  if (dl.rank() != 0)
    return std::string(op) + ": dloss must be rank 0";
  int64_t n = x.numel();
  if (n == 0)
    return "";
  dispatchFloat(x.dtype, [&](auto tag) {
    using T = decltype(tag);
    mseBackwardKernel<T><<<blocksFor(n), kThreads, 0, a.ctx.stream>>>(
        dl.as<T>(), x.as<T>(), t.as<T>(), dx.as<T>(), n, mean);
  });
  return launched(op);
}

//===----------------------------------------------------------------------===//
// Optimizers
//===----------------------------------------------------------------------===//

// `skip_if` (fp16 loss scaling's found_inf): an optional 0-d i1 on the
// device, read by the kernels themselves (no host sync). When it is set the
// update is skipped and every result equals its operand bit for bit.
__device__ inline bool skipped(const uint8_t *skip) { return skip && *skip; }

__global__ void stepIncrementKernel(const int64_t *step, int64_t *newStep,
                                    const uint8_t *skip) {
  *newStep = skipped(skip) ? *step : *step + 1;
}

/// The optional flag at input `i`: absent (nullptr) or a 0-d i1.
std::string skipFlag(const char *op, const CudaKernelArgs &a, size_t i,
                     const uint8_t *&skip) {
  skip = nullptr;
  if (i >= a.inputs.size() || !a.inputs[i].data)
    return "";
  const TensorView &f = a.inputs[i];
  if (auto e = needDType(f, DType::Bool, op, "found_inf"); !e.empty())
    return e;
  if (f.numel() != 1)
    return std::string(op) + ": found_inf must hold one element";
  skip = f.as<uint8_t>();
  return "";
}

std::string checkStep(const char *op, const TensorView &s,
                      const TensorView &ns) {
  if (auto e = needDType(s, DType::I64, op, "step"); !e.empty())
    return e;
  if (auto e = needDType(ns, DType::I64, op, "new_step"); !e.empty())
    return e;
  if (s.numel() != 1 || ns.numel() != 1)
    return std::string(op) + ": step must hold one element";
  return "";
}

struct SgdAttrs {
  double lr, mom, damp, wd;
  int nesterov;
};

/// The parameter of an update: f32, f64, or bf16/f16 (computed in f32,
/// each result rounded once to the parameter's type).
std::string needParam(const char *op, const TensorView &p) {
  if (p.dtype != DType::F32 && p.dtype != DType::F64 && !isLowFloat(p.dtype))
    return std::string(op) + ": param must be f32, f64, bf16 or f16, got " +
           dtypeName(p.dtype);
  return "";
}

// T: the compute type; P: the parameter's storage (T, or em::Bf16Bits /
// em::F16Bits for a bf16/f16 parameter: widened, computed in f32, rounded).
template <typename T, typename P>
__global__ void sgdKernel(const P *p, const P *g, const P *b,
                          const int64_t *step, P *np, P *nb, int64_t n,
                          SgdAttrs at, const uint8_t *skip) {
  if (skipped(skip)) {
    OFFLOAD_GRID_LOOP(i, n) {
      np[i] = p[i];
      nb[i] = b[i];
    }
    return;
  }
  em::SgdStoredStep<T, P> f{em::SgdStep<T>::make(at.lr, at.mom, at.damp, at.wd,
                                                  at.nesterov != 0, *step == 0)};
  OFFLOAD_GRID_LOOP(i, n) f(p[i], g[i], b[i], np[i], nb[i]);
}

// sgd_update: param, grad, momentum_buffer, step[, found_inf] -> new_param,
// new_momentum_buffer, new_step.
std::string kSgdUpdate(const CudaKernelArgs &a) {
  const char *op = "sgd_update";
  const TensorView &p = a.inputs[0], &g = a.inputs[1], &buf = a.inputs[2],
                   &step = a.inputs[3];
  const TensorView &np = a.outputs[0], &nbuf = a.outputs[1],
                   &nstep = a.outputs[2];
  if (auto e = needParam(op, p); !e.empty())
    return e;
  for (auto [t, name] : {std::pair<const TensorView *, const char *>{&g, "grad"},
                         {&buf, "momentum_buffer"},
                         {&np, "new_param"},
                         {&nbuf, "new_momentum_buffer"}})
    if (auto e = needSame(p, *t, op, "param", name); !e.empty())
      return e;
  if (auto e = checkStep(op, step, nstep); !e.empty())
    return e;
  SgdAttrs at{a.attrs.getFloat("lr", 0.01), a.attrs.getFloat("momentum", 0.0),
              a.attrs.getFloat("dampening", 0.0),
              a.attrs.getFloat("weight_decay", 0.0),
              int(a.attrs.getInt("nesterov", 0) != 0)};
  if (at.nesterov && (at.mom <= 0 || at.damp != 0))
    return std::string(op) +
           ": nesterov needs momentum > 0 and zero dampening";
  const uint8_t *skip;
  if (auto e = skipFlag(op, a, 4, skip); !e.empty())
    return e;
  int64_t n = p.numel();
  if (n > 0) {
    auto stored = [&](auto tag) {
      using P = decltype(tag);
      sgdKernel<float, P><<<blocksFor(n), kThreads, 0, a.ctx.stream>>>(
          p.as<P>(), g.as<P>(), buf.as<P>(), step.as<int64_t>(), np.as<P>(),
          nbuf.as<P>(), n, at, skip);
    };
    if (p.dtype == DType::BF16)
      stored(em::Bf16Bits());
    else if (p.dtype == DType::F16)
      stored(em::F16Bits());
    else if (p.dtype == DType::F32)
      sgdKernel<float, float><<<blocksFor(n), kThreads, 0, a.ctx.stream>>>(
          p.as<float>(), g.as<float>(), buf.as<float>(), step.as<int64_t>(),
          np.as<float>(), nbuf.as<float>(), n, at, skip);
    else
      sgdKernel<double, double><<<blocksFor(n), kThreads, 0, a.ctx.stream>>>(
          p.as<double>(), g.as<double>(), buf.as<double>(),
          step.as<int64_t>(), np.as<double>(), nbuf.as<double>(), n, at, skip);
    if (auto e = launched(op); !e.empty())
      return e;
  }
  stepIncrementKernel<<<1, 1, 0, a.ctx.stream>>>(step.as<int64_t>(),
                                                 nstep.as<int64_t>(), skip);
  return launched(op);
}

struct AdamWAttrs {
  double lr, b1, b2, eps, wd;
};

// T: the compute type; P, M: the parameter's and the moments' storage (T,
// or em::Bf16Bits / em::F16Bits: widened, computed in f32, rounded once).
template <typename T, typename P, typename M>
__global__ void adamwKernel(const P *p, const P *g, const M *m, const M *v,
                            const int64_t *step, P *np, M *nm, M *nv,
                            int64_t n, AdamWAttrs at, const uint8_t *skip) {
  if (skipped(skip)) {
    OFFLOAD_GRID_LOOP(i, n) {
      np[i] = p[i];
      nm[i] = m[i];
      nv[i] = v[i];
    }
    return;
  }
  em::AdamWStoredStep<T, P, M> f{
      em::AdamWStep<T>::make(at.lr, at.b1, at.b2, at.eps, at.wd, *step + 1)};
  OFFLOAD_GRID_LOOP(i, n) f(p[i], g[i], m[i], v[i], np[i], nm[i], nv[i]);
}

// adamw_update: param, grad, exp_avg, exp_avg_sq, step[, found_inf] ->
// new_param, new_exp_avg, new_exp_avg_sq, new_step. The moments are the
// param's dtype, or bf16 for an f32 param.
std::string kAdamwUpdate(const CudaKernelArgs &a) {
  const char *op = "adamw_update";
  const TensorView &p = a.inputs[0], &g = a.inputs[1], &m = a.inputs[2],
                   &v = a.inputs[3], &step = a.inputs[4];
  const TensorView &np = a.outputs[0], &nm = a.outputs[1], &nv = a.outputs[2],
                   &nstep = a.outputs[3];
  if (auto e = needParam(op, p); !e.empty())
    return e;
  for (auto [t, name] :
       {std::pair<const TensorView *, const char *>{&g, "grad"},
        {&np, "new_param"}})
    if (auto e = needSame(p, *t, op, "param", name); !e.empty())
      return e;
  // The moments: the param's dtype, or bf16 for an f32 param (moments=bf16).
  if (m.dtype != p.dtype && !(m.dtype == DType::BF16 && p.dtype == DType::F32))
    return std::string(op) + ": exp_avg is " + dtypeName(m.dtype) + " for a " +
           dtypeName(p.dtype) +
           " param; the moments must be the param's dtype, or bf16 for an f32 param";
  if (m.shape != p.shape)
    return std::string(op) + ": param has shape " + shapeStr(p.shape) +
           " but exp_avg has shape " + shapeStr(m.shape);
  for (auto [t, name] :
       {std::pair<const TensorView *, const char *>{&v, "exp_avg_sq"},
        {&nm, "new_exp_avg"},
        {&nv, "new_exp_avg_sq"}})
    if (auto e = needSame(m, *t, op, "exp_avg", name); !e.empty())
      return e;
  if (auto e = checkStep(op, step, nstep); !e.empty())
    return e;
  AdamWAttrs at{a.attrs.getFloat("lr", 1e-3), a.attrs.getFloat("beta1", 0.9),
                a.attrs.getFloat("beta2", 0.999), a.attrs.getFloat("eps", 1e-8),
                a.attrs.getFloat("weight_decay", 1e-2)};
  const uint8_t *skip;
  if (auto e = skipFlag(op, a, 5, skip); !e.empty())
    return e;
  int64_t n = p.numel();
  if (n > 0) {
    auto stored = [&](auto ptag, auto mtag) {
      using P = decltype(ptag);
      using M = decltype(mtag);
      adamwKernel<float, P, M><<<blocksFor(n), kThreads, 0, a.ctx.stream>>>(
          p.as<P>(), g.as<P>(), m.as<M>(), v.as<M>(), step.as<int64_t>(),
          np.as<P>(), nm.as<M>(), nv.as<M>(), n, at, skip);
    };
    if (p.dtype == DType::BF16)
      stored(em::Bf16Bits(), em::Bf16Bits());
    else if (p.dtype == DType::F16)
      stored(em::F16Bits(), em::F16Bits());
    else if (m.dtype == DType::BF16)
      stored(float(), em::Bf16Bits());
    else if (p.dtype == DType::F32)
      adamwKernel<float, float, float><<<blocksFor(n), kThreads, 0, a.ctx.stream>>>(
          p.as<float>(), g.as<float>(), m.as<float>(), v.as<float>(),
          step.as<int64_t>(), np.as<float>(), nm.as<float>(), nv.as<float>(),
          n, at, skip);
    else
      adamwKernel<double, double, double><<<blocksFor(n), kThreads, 0, a.ctx.stream>>>(
          p.as<double>(), g.as<double>(), m.as<double>(), v.as<double>(),
          step.as<int64_t>(), np.as<double>(), nm.as<double>(),
          nv.as<double>(), n, at, skip);
    if (auto e = launched(op); !e.empty())
      return e;
  }
  stepIncrementKernel<<<1, 1, 0, a.ctx.stream>>>(step.as<int64_t>(),
                                                 nstep.as<int64_t>(), skip);
  return launched(op);
}

} // namespace

const std::vector<Entry> &lossOptEntries() {
  static const std::vector<Entry> e = {
      {"offload.cross_entropy", kCrossEntropy, true},
      {"offload.cross_entropy_backward", kCrossEntropyBackward, true},
      {"offload.nll_loss", kNllLoss, true},
      {"offload.nll_loss_backward", kNllLossBackward, true},
      {"offload.mse_loss", kMseLoss, true},
      {"offload.mse_loss_backward", kMseLossBackward, true},
      {"offload.sgd_update", kSgdUpdate, true},
      {"offload.adamw_update", kAdamwUpdate, true},
  };
  return e;
}

} // namespace cuda
} // namespace rt
} // namespace offload
