//===- CudaNormPool.cu - Layer norm, own batch norm, pooling on CUDA ------===//
//
// Part of offload. layer_norm and layer_norm_backward; the own batch-norm
// kernels that CudaDnn.cu falls back to; max_pool2d, avg_pool2d,
// adaptive_avg_pool2d and their backward ops. Semantics of Norm.cpp and
// Pool.cpp; formulas and window geometry from ElementMath.h.
//
// Determinism and agreement with the host:
//   * layer norm: one block per row (statistics in double, fixed tree);
//     dweight/dbias: tiles of 32 columns, 32 lanes each adding every 32nd
//     row in order, then a fixed tree (a fixed order, not the host's).
//   * pooling: one thread per output (forward) or per input element
//     (average backward: it gathers the gradients of the outputs whose
//     window holds the element, in output order); max-pool backward has one
//     thread per plane adding at the saved indices in output order. These
//     are the host kernels' additions in the host kernels' order, so pooling
//     is bit-identical to the host, with no atomics. cuDNN's pooling
//     does not fit these ops: its max pooling returns no indices (the
//     plan's max_pool2d_backward takes them), it has no ceil_mode nor
//     adaptive windows, and its average backward needs the forward's x and
//     y, which avg_pool2d_backward does not take.
//
//===----------------------------------------------------------------------===//

#include "CudaCommon.cuh"
#include "CudaNormPool.h"
#include "Kernels/Geometry.h"

#include <algorithm>
#include <cmath>

namespace offload {
namespace rt {
namespace cuda {

using em::PoolGeom;

//===----------------------------------------------------------------------===//
// Batch norm: checks and own kernels
//===----------------------------------------------------------------------===//

namespace {

/// An optional per-channel/feature operand: absent, or of dtype dt and shape
/// `want`.
std::string checkOpt(const char *op, const char *name,
                     const std::vector<TensorView> &v, size_t i, DType dt,
                     const std::vector<int64_t> &want) {
  if (!present(v, i))
    return "";
  if (v[i].dtype != dt)
    return std::string(op) + ": " + name + " has dtype " +
           dtypeName(v[i].dtype) + ", expected " + dtypeName(dt);
  if (v[i].shape != want)
    return std::string(op) + ": " + name + " has shape " +
           shapeStr(v[i].shape) + ", expected " + shapeStr(want);
  return "";
}

/// A required operand of dtype dt and shape `want`.
std::string checkReq(const char *op, const char *name, const TensorView &t,
                     DType dt, const std::vector<int64_t> &want) {
  if (!t.data && t.numel() != 0)
    return std::string(op) + ": " + name + " is missing";
  std::vector<TensorView> one{t};
  if (!t.data)
    return t.shape == want ? "" : std::string(op) + ": " + name + " has shape " +
                                      shapeStr(t.shape) + ", expected " +
                                      shapeStr(want);
  return checkOpt(op, name, one, 0, dt, want);
}

std::string bnShape(const char *op, const TensorView &x, BnShape &g) {
  if (auto e = needAnyFloat(x, op, "x"); !e.empty())
    return e;
  if (x.rank() < 2)
    return std::string(op) + ": x must be [N,C,...], got " + shapeStr(x.shape);
  g.n = x.shape[0];
  g.c = x.shape[1];
  g.s = 1;
  for (size_t i = 2; i < x.shape.size(); ++i)
    g.s *= x.shape[i];
  return "";
}

struct BnDev {
  int64_t n, c, s;
};

/// X: the storage type of x and y (float, double, or bf16/f16 computed in
/// f32); T: the type of the parameters and statistics (X, or f32 for a
/// bf16/f16 X, as the host and cuDNN's mixed batch norm).
template <typename X, typename T = X>
__global__ void bnForwardKernel(const X *x, const T *w, const T *b,
                                const T *rm, const T *rv, X *y, T *sm, T *si,
                                T *nrm, T *nrv, BnDev g, double mom,
                                double eps) {
  __shared__ double shm[kThreads];
  int64_t cnt = g.n * g.s;
  for (int64_t ch = blockIdx.x; ch < g.c; ch += gridDim.x) {
    double sum = 0;
    for (int64_t k = threadIdx.x; k < cnt; k += kThreads)
      sum += double(ld(x[((k / g.s) * g.c + ch) * g.s + k % g.s]));
    sum = blockSum(sum, shm);
    double mean = sum / double(cnt), vs = 0;
    for (int64_t k = threadIdx.x; k < cnt; k += kThreads) {
      double d = double(ld(x[((k / g.s) * g.c + ch) * g.s + k % g.s])) - mean;
      vs += d * d;
    }
    vs = blockSum(vs, shm);
    double invstd = em::bnInvStd(vs, cnt, eps);
    if (threadIdx.x == 0) {
      sm[ch] = T(mean);
      si[ch] = T(invstd);
      if (rm && nrm)
        nrm[ch] = T(em::bnRunningMean(double(rm[ch]), mean, mom));
      if (rv && nrv)
        nrv[ch] = T(em::bnRunningVar(double(rv[ch]), vs, cnt, mom));
    }
    em::BnAffine af = em::BnAffine::make(mean, invstd, w ? double(w[ch]) : 1.0,
                                         b ? double(b[ch]) : 0.0);
    for (int64_t k = threadIdx.x; k < cnt; k += kThreads) {
      int64_t off = ((k / g.s) * g.c + ch) * g.s + k % g.s;
      y[off] = st<X>(em::bnApply(ld(x[off]), af));
    }
  }
}

template <typename X, typename T = X>
__global__ void bnBackwardKernel(const X *dy, const X *x, const T *w,
                                 const T *sm, const T *si, X *dx, T *dw,
                                 T *db, BnDev g) {
  __shared__ double shm[kThreads];
  int64_t cnt = g.n * g.s;
  for (int64_t ch = blockIdx.x; ch < g.c; ch += gridDim.x) {
    double mean = double(sm[ch]), invstd = double(si[ch]);
    double sum = 0, dot = 0;
    for (int64_t k = threadIdx.x; k < cnt; k += kThreads) {
      int64_t off = ((k / g.s) * g.c + ch) * g.s + k % g.s;
      sum += double(ld(dy[off]));
      dot += double(ld(dy[off])) * (double(ld(x[off])) - mean);
    }
    sum = blockSum(sum, shm);
    dot = blockSum(dot, shm);
    if (threadIdx.x == 0) {
      if (dw)
        dw[ch] = T(dot * invstd);
      if (db)
        db[ch] = T(sum);
    }
    if (!dx)
      continue;
    em::BnBackward bw = em::BnBackward::make(
        sum, dot, mean, invstd, w ? double(w[ch]) : 1.0, double(cnt));
    using A = Acc<X>;
    A sT = A(bw.s), tt = A(bw.t), ut = A(bw.u);
    for (int64_t k = threadIdx.x; k < cnt; k += kThreads) {
      int64_t off = ((k / g.s) * g.c + ch) * g.s + k % g.s;
      dx[off] = st<X>(em::bnBackwardApply(ld(dy[off]), ld(x[off]), sT, tt, ut));
    }
  }
}

template <typename T> T *opt(const std::vector<TensorView> &v, size_t i) {
  return present(v, i) ? v[i].as<T>() : nullptr;
}

int channelBlocks(int64_t c) {
  return int(std::max<int64_t>(1, std::min<int64_t>(c, 65535)));
}

} // namespace

std::string checkBatchNorm(const CudaKernelArgs &a, BnShape &g) {
  const char *op = "offload.batch_norm";
  const TensorView &x = a.inputs[0];
  if (auto e = bnShape(op, x, g); !e.empty())
    return e;
  // A bf16/f16 x takes f32 parameters and statistics (the dialect's rule).
  DType dt = isLowFloat(x.dtype) ? DType::F32 : x.dtype;
  std::vector<int64_t> cs{g.c};
  const char *inNames[] = {"x", "weight", "bias", "running_mean",
                           "running_var"};
  for (size_t i = 1; i < 5; ++i)
    if (auto e = checkOpt(op, inNames[i], a.inputs, i, dt, cs); !e.empty())
      return e;
  if (present(a.inputs, 3) != present(a.inputs, 4))
    return std::string(op) + ": running_mean and running_var must both be "
                             "given or both be absent";
  if (auto e = checkReq(op, "y", a.outputs[0], x.dtype, x.shape); !e.empty())
    return e;
  const char *outNames[] = {"y", "save_mean", "save_invstd",
                            "new_running_mean", "new_running_var"};
  for (size_t i = 1; i < 3; ++i)
    if (auto e = checkReq(op, outNames[i], a.outputs[i], dt, cs); !e.empty())
      return e;
  for (size_t i = 3; i < 5; ++i) {
    if (present(a.inputs, i) && !present(a.outputs, i) && g.c > 0)
      return std::string(op) + ": " + outNames[i] + " is missing";
    if (auto e = checkOpt(op, outNames[i], a.outputs, i, dt, cs); !e.empty())
      return e;
  }
  if (g.count() < 2 && g.c > 0)
    return std::string(op) +
           ": training needs more than one value per channel, x is " +
           shapeStr(x.shape);
  return "";
}

std::string checkBatchNormBackward(const CudaKernelArgs &a, BnShape &g) {
  const char *op = "offload.batch_norm_backward";
  const TensorView &dy = a.inputs[0], &x = a.inputs[1];
  if (auto e = bnShape(op, x, g); !e.empty())
    return e;
  if (auto e = needSame(x, dy, op, "x", "dy"); !e.empty())
    return e;
  DType dt = isLowFloat(x.dtype) ? DType::F32 : x.dtype;
  std::vector<int64_t> cs{g.c};
  if (auto e = checkOpt(op, "weight", a.inputs, 2, dt, cs); !e.empty())
    return e;
  if (auto e = checkReq(op, "save_mean", a.inputs[3], dt, cs); !e.empty())
    return e;
  if (auto e = checkReq(op, "save_invstd", a.inputs[4], dt, cs); !e.empty())
    return e;
  if (auto e = checkOpt(op, "dx", a.outputs, 0, x.dtype, x.shape); !e.empty())
    return e;
  if (auto e = checkOpt(op, "dweight", a.outputs, 1, dt, cs); !e.empty())
    return e;
  return checkOpt(op, "dbias", a.outputs, 2, dt, cs);
}

std::string batchNormOwn(const CudaKernelArgs &a, const BnShape &g) {
  if (g.c == 0 || g.count() == 0)
    return "";
  double mom = a.attrs.getFloat("momentum", 0.1);
  double eps = a.attrs.getFloat("eps", 1e-5);
  BnDev d{g.n, g.c, g.s};
  const auto &in = a.inputs, &out = a.outputs;
  if (isLowFloat(in[0].dtype)) {
    auto run = [&](auto tag) {
      using X = decltype(tag);
      bnForwardKernel<X, float><<<channelBlocks(g.c), kThreads, 0,
                                  a.ctx.stream>>>(
          in[0].as<X>(), opt<float>(in, 1), opt<float>(in, 2),
          opt<float>(in, 3), opt<float>(in, 4), out[0].as<X>(),
          out[1].as<float>(), out[2].as<float>(), opt<float>(out, 3),
          opt<float>(out, 4), d, mom, eps);
    };
    if (in[0].dtype == DType::BF16)
      run(__nv_bfloat16());
    else
      run(__half());
  } else if (in[0].dtype == DType::F32)
    bnForwardKernel<float><<<channelBlocks(g.c), kThreads, 0, a.ctx.stream>>>(
        in[0].as<float>(), opt<float>(in, 1), opt<float>(in, 2),
        opt<float>(in, 3), opt<float>(in, 4), out[0].as<float>(),
        out[1].as<float>(), out[2].as<float>(), opt<float>(out, 3),
        opt<float>(out, 4), d, mom, eps);
  else
    bnForwardKernel<double><<<channelBlocks(g.c), kThreads, 0, a.ctx.stream>>>(
        in[0].as<double>(), opt<double>(in, 1), opt<double>(in, 2),
        opt<double>(in, 3), opt<double>(in, 4), out[0].as<double>(),
        out[1].as<double>(), out[2].as<double>(), opt<double>(out, 3),
        opt<double>(out, 4), d, mom, eps);
  return launched("offload.batch_norm");
}

std::string batchNormBackwardOwn(const CudaKernelArgs &a, const BnShape &g) {
  if (g.c == 0)
    return "";
  BnDev d{g.n, g.c, g.s};
  const auto &in = a.inputs, &out = a.outputs;
  if (isLowFloat(in[1].dtype)) {
    auto run = [&](auto tag) {
      using X = decltype(tag);
      bnBackwardKernel<X, float><<<channelBlocks(g.c), kThreads, 0,
                                   a.ctx.stream>>>(
          in[0].as<X>(), in[1].as<X>(), opt<float>(in, 2), in[3].as<float>(),
          in[4].as<float>(), opt<X>(out, 0), opt<float>(out, 1),
          opt<float>(out, 2), d);
    };
    if (in[1].dtype == DType::BF16)
      run(__nv_bfloat16());
    else
      run(__half());
  } else if (in[1].dtype == DType::F32)
    bnBackwardKernel<float><<<channelBlocks(g.c), kThreads, 0, a.ctx.stream>>>(
        in[0].as<float>(), in[1].as<float>(), opt<float>(in, 2),
        in[3].as<float>(), in[4].as<float>(), opt<float>(out, 0),
        opt<float>(out, 1), opt<float>(out, 2), d);
  else
    bnBackwardKernel<double><<<channelBlocks(g.c), kThreads, 0,
                               a.ctx.stream>>>(
        in[0].as<double>(), in[1].as<double>(), opt<double>(in, 2),
        in[3].as<double>(), in[4].as<double>(), opt<double>(out, 0),
        opt<double>(out, 1), opt<double>(out, 2), d);
  return launched("offload.batch_norm_backward");
}

namespace {

//===----------------------------------------------------------------------===//
// Layer norm
//===----------------------------------------------------------------------===//

/// Rows m and normalized size d of x; `normShape` the trailing dims.
std::string lnGeom(const char *op, const CudaKernelArgs &a, const TensorView &x,
                   size_t weightIdx, int64_t &m, int64_t &d,
                   std::vector<int64_t> &normShape) {
  int64_t nd = a.attrs.getInt("normalized_ndim", -1);
  if (nd < 0 && present(a.inputs, weightIdx))
    nd = a.inputs[weightIdx].rank();
  if (nd < 0)
    return std::string(op) + ": missing attribute normalized_ndim";
  if (nd < 1 || nd > x.rank())
    return std::string(op) + ": normalized_ndim " + std::to_string(nd) +
           " is out of range for x " + shapeStr(x.shape);
  size_t split = size_t(x.rank() - nd);
  m = d = 1;
  for (size_t i = 0; i < split; ++i)
    m *= x.shape[i];
  for (size_t i = split; i < x.shape.size(); ++i)
    d *= x.shape[i];
  normShape.assign(x.shape.begin() + long(split), x.shape.end());
  return "";
}

std::string checkStat(const char *op, const char *name, const TensorView &t,
                      DType dt, int64_t m) {
  if (t.dtype != dt)
    return std::string(op) + ": " + name + " has dtype " + dtypeName(t.dtype) +
           ", expected " + dtypeName(dt);
  if (t.numel() != m)
    return std::string(op) + ": " + name + " has shape " + shapeStr(t.shape) +
           ", expected " + std::to_string(m) +
           " elements (one per normalized row)";
  return "";
}

int rowBlocks(int64_t m) {
  return int(std::max<int64_t>(1, std::min<int64_t>(m, 1 << 20)));
}

/// T: the storage type of x, the parameters and y; the statistics are
/// Acc<T> (f32 for bf16/f16, the dialect's statistics type).
template <typename T>
__global__ void lnForwardKernel(const T *x, const T *w, const T *b, T *y,
                                Acc<T> *mo, Acc<T> *ro, int64_t m, int64_t d,
                                double eps) {
  using A = Acc<T>;
  __shared__ double shm[kThreads];
  for (int64_t r = blockIdx.x; r < m; r += gridDim.x) {
    const T *p = x + r * d;
    double s = 0;
    for (int64_t j = threadIdx.x; j < d; j += kThreads)
      s += double(ld(p[j]));
    double mean = blockSum(s, shm) / double(d);
    double vs = 0;
    for (int64_t j = threadIdx.x; j < d; j += kThreads) {
      double dv = double(ld(p[j])) - mean;
      vs += dv * dv;
    }
    vs = blockSum(vs, shm);
    double rstd = em::lnRstd(vs, d, eps);
    if (threadIdx.x == 0) {
      mo[r] = A(mean);
      ro[r] = A(rstd);
    }
    A mt = A(mean), rt = A(rstd);
    T *q = y + r * d;
    for (int64_t j = threadIdx.x; j < d; j += kThreads) {
      A v = em::lnNormalize(ld(p[j]), mt, rt);
      if (w)
        v = v * ld(w[j]);
      if (b)
        v = v + ld(b[j]);
      q[j] = st<T>(v);
    }
  }
}

template <typename T>
__global__ void lnEmptyKernel(T *mo, T *ro, int64_t m, T rstd) {
  OFFLOAD_GRID_LOOP(r, m) {
    mo[r] = T(0);
    ro[r] = rstd;
  }
}

template <typename T>
__global__ void lnBackwardDxKernel(const T *dy, const T *x, const T *w,
                                   const Acc<T> *mean, const Acc<T> *rstd,
                                   T *dx, int64_t m, int64_t d) {
  using A = Acc<T>;
  __shared__ double shm[kThreads];
  for (int64_t r = blockIdx.x; r < m; r += gridDim.x) {
    const T *gp = dy + r * d, *xp = x + r * d;
    double ds = 0, dbs = 0;
    for (int64_t j = threadIdx.x; j < d; j += kThreads) {
      double gw = double(ld(gp[j])) * (w ? double(ld(w[j])) : 1.0);
      ds += gw * double(ld(xp[j]));
      dbs += gw;
    }
    ds = blockSum(ds, shm);
    dbs = blockSum(dbs, shm);
    double mu = double(mean[r]), rs = double(rstd[r]);
    em::LnBackward bw = em::LnBackward::make(ds, dbs, mu, rs, d);
    A rt = A(rs), bt = A(bw.b), ct = A(bw.c);
    T *q = dx + r * d;
    for (int64_t j = threadIdx.x; j < d; j += kThreads)
      q[j] = st<T>(w ? em::lnBackwardApply(rt, ld(gp[j]), ld(w[j]), bt,
                                           ld(xp[j]), ct)
                     : em::lnBackwardApplyNoWeight(rt, ld(gp[j]), bt,
                                                   ld(xp[j]), ct));
  }
}

/// Tiles of kTile columns: thread (c, l) of a kTile x kLanes block adds
/// rows l, l + kLanes, ... of its column in order (a warp reads kTile
/// consecutive elements of a row), then the kLanes partial sums of each
/// column add in a fixed tree. A fixed order, so the same bits every run;
/// not the host's order (which adds the rows one by one).
constexpr int kTile = 32, kLanes = 32;
template <typename T>
__global__ void lnBackwardParamsKernel(const T *dy, const T *x,
                                       const Acc<T> *mean,
                                       const Acc<T> *rstd, T *dw, T *db,
                                       int64_t m, int64_t d) {
  __shared__ double sw[kLanes][kTile + 1], sb[kLanes][kTile + 1];
  int c = threadIdx.x, l = threadIdx.y;
  for (int64_t j0 = int64_t(blockIdx.x) * kTile; j0 < d;
       j0 += int64_t(gridDim.x) * kTile) {
    int64_t j = j0 + c;
    double w = 0, b = 0;
    if (j < d)
      for (int64_t r = l; r < m; r += kLanes) {
        double g = double(ld(dy[r * d + j]));
        w += g * (double(ld(x[r * d + j])) - double(mean[r])) * double(rstd[r]);
        b += g;
      }
    sw[l][c] = w;
    sb[l][c] = b;
    __syncthreads();
    for (int h = kLanes / 2; h > 0; h >>= 1) {
      if (l < h) {
        sw[l][c] += sw[l + h][c];
        sb[l][c] += sb[l + h][c];
      }
      __syncthreads();
    }
    if (l == 0 && j < d) {
      if (dw)
        dw[j] = st<T>(Acc<T>(sw[0][c]));
      if (db)
        db[j] = st<T>(Acc<T>(sb[0][c]));
    }
    __syncthreads();
  }
}

std::string kLayerNorm(const CudaKernelArgs &a) {
  const char *op = "offload.layer_norm";
  const TensorView &x = a.inputs[0];
  if (auto e = needAnyFloat(x, op, "x"); !e.empty())
    return e;
  DType dt = x.dtype;
  DType statType = isLowFloat(dt) ? DType::F32 : dt; // mean and rstd
  int64_t m, d;
  std::vector<int64_t> ns;
  if (auto e = lnGeom(op, a, x, 1, m, d, ns); !e.empty())
    return e;
  if (auto e = checkOpt(op, "weight", a.inputs, 1, dt, ns); !e.empty())
    return e;
  if (auto e = checkOpt(op, "bias", a.inputs, 2, dt, ns); !e.empty())
    return e;
  if (auto e = needSame(x, a.outputs[0], op, "x", "y"); !e.empty())
    return e;
  if (auto e = checkStat(op, "mean", a.outputs[1], statType, m); !e.empty())
    return e;
  if (auto e = checkStat(op, "rstd", a.outputs[2], statType, m); !e.empty())
    return e;
  if (m == 0)
    return "";
  double eps = a.attrs.getFloat("eps", 1e-5);
  const auto &in = a.inputs, &out = a.outputs;
  if (d == 0) {
    // Nothing to normalize: mean 0, rstd 1/sqrt(eps) (as the host kernel).
    if (statType == DType::F32)
      lnEmptyKernel<float><<<blocksFor(m), kThreads, 0, a.ctx.stream>>>(
          out[1].as<float>(), out[2].as<float>(), m,
          float(1.0 / std::sqrt(eps)));
    else
      lnEmptyKernel<double><<<blocksFor(m), kThreads, 0, a.ctx.stream>>>(
          out[1].as<double>(), out[2].as<double>(), m, 1.0 / std::sqrt(eps));
    return launched(op);
  }
  dispatchFloat(dt, [&](auto tag) {
    using T = decltype(tag);
    using A = Acc<T>;
    lnForwardKernel<T><<<rowBlocks(m), kThreads, 0, a.ctx.stream>>>(
        in[0].as<T>(), opt<T>(in, 1), opt<T>(in, 2), out[0].as<T>(),
        out[1].as<A>(), out[2].as<A>(), m, d, eps);
  });
  return launched(op);
}

std::string kLayerNormBackward(const CudaKernelArgs &a) {
  const char *op = "offload.layer_norm_backward";
  const TensorView &dy = a.inputs[0], &x = a.inputs[1];
  if (auto e = needAnyFloat(x, op, "x"); !e.empty())
    return e;
  if (auto e = needSame(x, dy, op, "x", "dy"); !e.empty())
    return e;
  DType dt = x.dtype;
  DType statType = isLowFloat(dt) ? DType::F32 : dt; // mean and rstd
  int64_t m, d;
  std::vector<int64_t> ns;
  if (auto e = lnGeom(op, a, x, 2, m, d, ns); !e.empty())
    return e;
  if (auto e = checkOpt(op, "weight", a.inputs, 2, dt, ns); !e.empty())
    return e;
  if (auto e = checkStat(op, "mean", a.inputs[3], statType, m); !e.empty())
    return e;
  if (auto e = checkStat(op, "rstd", a.inputs[4], statType, m); !e.empty())
    return e;
  if (auto e = checkOpt(op, "dx", a.outputs, 0, dt, x.shape); !e.empty())
    return e;
  if (auto e = checkOpt(op, "dweight", a.outputs, 1, dt, ns); !e.empty())
    return e;
  if (auto e = checkOpt(op, "dbias", a.outputs, 2, dt, ns); !e.empty())
    return e;
  const auto &in = a.inputs, &out = a.outputs;
  if (present(out, 0) && m > 0 && d > 0) {
    dispatchFloat(dt, [&](auto tag) {
      using T = decltype(tag);
      using A = Acc<T>;
      lnBackwardDxKernel<T><<<rowBlocks(m), kThreads, 0, a.ctx.stream>>>(
          in[0].as<T>(), in[1].as<T>(), opt<T>(in, 2), in[3].as<A>(),
          in[4].as<A>(), out[0].as<T>(), m, d);
    });
    if (auto e = launched(op); !e.empty())
      return e;
  }
  if ((present(out, 1) || present(out, 2)) && d > 0) {
    dim3 tile(kTile, kLanes);
    int grid = rowBlocks((d + kTile - 1) / kTile);
    dispatchFloat(dt, [&](auto tag) {
      using T = decltype(tag);
      using A = Acc<T>;
      lnBackwardParamsKernel<T><<<grid, tile, 0, a.ctx.stream>>>(
          in[0].as<T>(), in[1].as<T>(), in[3].as<A>(), in[4].as<A>(),
          opt<T>(out, 1), opt<T>(out, 2), m, d);
    });
    return launched(op);
  }
  return "";
}

//===----------------------------------------------------------------------===//
// Pooling
//===----------------------------------------------------------------------===//

std::vector<int64_t> withPlane(const std::vector<int64_t> &s, int64_t a,
                               int64_t b) {
  std::vector<int64_t> r(s.begin(), s.end() - 2);
  r.push_back(a);
  r.push_back(b);
  return r;
}

/// The plane geometry of a forward op from x, or of a backward op from dx
/// and dy.
std::string planeOf(const char *op, const TensorView &x, PoolGeom &g) {
  if (auto e = needAnyFloat(x, op, "x"); !e.empty())
    return e;
  if (auto e = geom::planesOf(op, "x", x.shape, g.planes); !e.empty())
    return e;
  g.h = x.shape[size_t(x.rank() - 2)];
  g.w = x.shape[size_t(x.rank() - 1)];
  return "";
}

template <typename T>
__global__ void maxPoolKernel(const T *x, T *y, int64_t *ind, PoolGeom g) {
  int64_t L = g.oh * g.ow;
  OFFLOAD_GRID_LOOP(i, g.planes * L) {
    int64_t p = i / L, oh = (i % L) / g.ow, ow = i % g.ow;
    const T *xp = x + p * g.h * g.w;
    int64_t h0 = oh * g.sh - g.ph;
    int64_t h1 = em::minOf(h0 + (g.kh - 1) * g.dh + 1, g.h);
    h0 = em::firstInside(h0, g.dh);
    int64_t w0 = ow * g.sw - g.pw;
    int64_t w1 = em::minOf(w0 + (g.kw - 1) * g.dw + 1, g.w);
    w0 = em::firstInside(w0, g.dw);
    int64_t best = h0 * g.w + w0;
    Acc<T> bestV = -INFINITY;
    for (int64_t ih = h0; ih < h1; ih += g.dh)
      for (int64_t iw = w0; iw < w1; iw += g.dw) {
        int64_t idx = ih * g.w + iw;
        Acc<T> v = ld(xp[idx]);
        if (v > bestV || em::isNaN(v)) {
          bestV = v;
          best = idx;
        }
      }
    y[i] = st<T>(bestV);
    ind[i] = best;
  }
}

/// One thread per plane adds dy at the saved indices in output order: the
/// host kernel's scatter, additions in the same order (max_pool2d_backward
/// carries no window, so a gather would have to search the whole plane).
/// dx is zeroed before.
template <typename T>
__global__ void maxPoolBackwardKernel(const T *dy, const int64_t *ind, T *dx,
                                      int64_t planes, int64_t hw, int64_t l,
                                      int *flag, int instr) {
  OFFLOAD_GRID_LOOP(p, planes) {
    T *dp = dx + p * hw;
    const T *gp = dy + p * l;
    const int64_t *ip = ind + p * l;
    for (int64_t i = 0; i < l; ++i) {
      int64_t k = ip[i];
      if (k < 0 || k >= hw) {
        reportDeviceError(flag, instr, kDeviceErrorIndexRange);
        continue;
      }
      dp[k] += gp[i];
    }
  }
}

/// bf16/f16 max-pool backward: the host's f32 scatter (additions in output
/// order into a zeroed plane) with the plane's sums in f32, rounded once.
/// One block per plane; the plane's dx in chunks of kPoolChunk f32 sums in
/// shared memory, thread 0 adding dy in output order (the order of the
/// host kernel), all threads zeroing and storing.
constexpr int kPoolChunk = 4096;
template <typename T>
__global__ void maxPoolBackwardLowKernel(const T *dy, const int64_t *ind,
                                         T *dx, int64_t planes, int64_t hw,
                                         int64_t l, int *flag, int instr) {
  __shared__ float acc[kPoolChunk];
  for (int64_t p = blockIdx.x; p < planes; p += gridDim.x) {
    T *dp = dx + p * hw;
    const T *gp = dy + p * l;
    const int64_t *ip = ind + p * l;
    for (int64_t lo = 0; lo < hw; lo += kPoolChunk) {
      int64_t len = em::minOf<int64_t>(kPoolChunk, hw - lo);
      for (int64_t j = threadIdx.x; j < len; j += blockDim.x)
        acc[j] = 0.f;
      __syncthreads();
      if (threadIdx.x == 0)
        for (int64_t i = 0; i < l; ++i) {
          int64_t k = ip[i];
          if (k < 0 || k >= hw) {
            if (lo == 0)
              reportDeviceError(flag, instr, kDeviceErrorIndexRange);
            continue;
          }
          if (k >= lo && k < lo + len)
            acc[k - lo] += ld(gp[i]);
        }
      __syncthreads();
      for (int64_t j = threadIdx.x; j < len; j += blockDim.x)
        dp[lo + j] = st<T>(acc[j]);
      __syncthreads();
    }
  }
}

template <typename T>
__global__ void avgPoolKernel(const T *x, T *y, PoolGeom g) {
  int64_t L = g.oh * g.ow;
  OFFLOAD_GRID_LOOP(i, g.planes * L) {
    int64_t p = i / L, oh = (i % L) / g.ow, ow = i % g.ow;
    const T *xp = x + p * g.h * g.w;
    int64_t h0, h1, w0, w1, div;
    em::avgPoolWindow(g, oh, ow, h0, h1, w0, w1, div);
    if (h0 >= h1 || w0 >= w1 || div <= 0) {
      y[i] = st<T>(Acc<T>(0));
      continue;
    }
    double s = 0;
    for (int64_t ih = h0; ih < h1; ++ih)
      for (int64_t iw = w0; iw < w1; ++iw)
        s += double(ld(xp[ih * g.w + iw]));
    y[i] = st<T>(Acc<T>(s / double(div)));
  }
}

template <typename T>
__global__ void avgPoolBackwardKernel(const T *dy, T *dx, PoolGeom g) {
  int64_t HW = g.h * g.w, L = g.oh * g.ow;
  OFFLOAD_GRID_LOOP(i, g.planes * HW) {
    int64_t p = i / HW, r = i % HW, ih = r / g.w, iw = r % g.w;
    const T *gp = dy + p * L;
    int64_t ohLo = em::maxOf<int64_t>(0, (ih + g.ph - g.kh) / g.sh);
    int64_t ohHi = em::minOf<int64_t>(g.oh - 1, (ih + g.ph) / g.sh);
    int64_t owLo = em::maxOf<int64_t>(0, (iw + g.pw - g.kw) / g.sw);
    int64_t owHi = em::minOf<int64_t>(g.ow - 1, (iw + g.pw) / g.sw);
    using A = Acc<T>;
    A acc = A(0);
    for (int64_t oh = ohLo; oh <= ohHi; ++oh)
      for (int64_t ow = owLo; ow <= owHi; ++ow) {
        int64_t h0, h1, w0, w1, div;
        em::avgPoolWindow(g, oh, ow, h0, h1, w0, w1, div);
        if (h0 >= h1 || w0 >= w1 || div <= 0)
          continue;
        if (ih < h0 || ih >= h1 || iw < w0 || iw >= w1)
          continue;
        acc += ld(gp[oh * g.ow + ow]) / A(div);
      }
    dx[i] = st<T>(acc);
  }
}

template <typename T>
__global__ void adaptiveKernel(const T *x, T *y, PoolGeom g) {
  int64_t L = g.oh * g.ow;
  OFFLOAD_GRID_LOOP(i, g.planes * L) {
    int64_t p = i / L, oh = (i % L) / g.ow, ow = i % g.ow;
    const T *xp = x + p * g.h * g.w;
    int64_t h0 = em::adaptiveStart(oh, g.oh, g.h),
            h1 = em::adaptiveEnd(oh, g.oh, g.h);
    int64_t w0 = em::adaptiveStart(ow, g.ow, g.w),
            w1 = em::adaptiveEnd(ow, g.ow, g.w);
    double s = 0;
    for (int64_t ih = h0; ih < h1; ++ih)
      for (int64_t iw = w0; iw < w1; ++iw)
        s += double(ld(xp[ih * g.w + iw]));
    y[i] = st<T>(Acc<T>(s / double((h1 - h0) * (w1 - w0))));
  }
}

template <typename T>
__global__ void adaptiveBackwardKernel(const T *dy, T *dx, PoolGeom g) {
  int64_t HW = g.h * g.w, L = g.oh * g.ow;
  OFFLOAD_GRID_LOOP(i, g.planes * HW) {
    int64_t p = i / HW, r = i % HW, ih = r / g.w, iw = r % g.w;
    const T *gp = dy + p * L;
    int64_t ohLo = em::maxOf<int64_t>(0, (ih * g.oh) / g.h);
    int64_t ohHi = em::minOf<int64_t>(g.oh - 1, ((ih + 1) * g.oh + g.h - 1) / g.h);
    int64_t owLo = em::maxOf<int64_t>(0, (iw * g.ow) / g.w);
    int64_t owHi = em::minOf<int64_t>(g.ow - 1, ((iw + 1) * g.ow + g.w - 1) / g.w);
    using A = Acc<T>;
    A acc = A(0);
    for (int64_t oh = ohLo; oh <= ohHi; ++oh) {
      int64_t h0 = em::adaptiveStart(oh, g.oh, g.h),
              h1 = em::adaptiveEnd(oh, g.oh, g.h);
      if (ih < h0 || ih >= h1)
        continue;
      for (int64_t ow = owLo; ow <= owHi; ++ow) {
        int64_t w0 = em::adaptiveStart(ow, g.ow, g.w),
                w1 = em::adaptiveEnd(ow, g.ow, g.w);
        if (iw < w0 || iw >= w1)
          continue;
        acc += ld(gp[oh * g.ow + ow]) / A(h1 - h0) / A(w1 - w0);
      }
    }
    dx[i] = st<T>(acc);
  }
}

std::string kMaxPool(const CudaKernelArgs &a) {
  const char *op = "offload.max_pool2d";
  const TensorView &x = a.inputs[0], &y = a.outputs[0], &ind = a.outputs[1];
  PoolGeom g;
  if (auto e = planeOf(op, x, g); !e.empty())
    return e;
  if (auto e = geom::poolWindow(op, a.attrs, true, g); !e.empty())
    return e;
  std::vector<int64_t> ys = withPlane(x.shape, g.oh, g.ow);
  if (y.dtype != x.dtype || y.shape != ys)
    return std::string(op) + ": y must be " + dtypeName(x.dtype) +
           shapeStr(ys);
  if (ind.dtype != DType::I64 || ind.shape != ys)
    return std::string(op) + ": indices must be i64" + shapeStr(ys);
  int64_t n = y.numel();
  if (n == 0)
    return "";
  dispatchFloat(x.dtype, [&](auto tag) {
    using T = decltype(tag);
    maxPoolKernel<T><<<blocksFor(n), kThreads, 0, a.ctx.stream>>>(
        x.as<T>(), y.as<T>(), ind.as<int64_t>(), g);
  });
  return launched(op);
}

std::string kMaxPoolBackward(const CudaKernelArgs &a) {
  const char *op = "offload.max_pool2d_backward";
  const TensorView &dy = a.inputs[0], &ind = a.inputs[1], &dx = a.outputs[0];
  PoolGeom g;
  if (auto e = planeOf(op, dx, g); !e.empty())
    return e;
  if (dy.rank() != dx.rank() || dy.dtype != dx.dtype)
    return std::string(op) + ": dy " + shapeStr(dy.shape) + " and dx " +
           shapeStr(dx.shape) + " differ in rank or dtype";
  g.oh = dy.shape[size_t(dy.rank() - 2)];
  g.ow = dy.shape[size_t(dy.rank() - 1)];
  if (dy.shape != withPlane(dx.shape, g.oh, g.ow))
    return std::string(op) + ": dy has shape " + shapeStr(dy.shape) +
           ", expected " + shapeStr(withPlane(dx.shape, g.oh, g.ow));
  if (ind.dtype != DType::I64 || ind.shape != dy.shape)
    return std::string(op) + ": indices must be i64" + shapeStr(dy.shape);
  int64_t n = dx.numel();
  if (n == 0)
    return "";
  cudaError_t ce = cudaMemsetAsync(dx.data, 0, dx.bytes(), a.ctx.stream);
  if (ce != cudaSuccess)
    return cudaErrorText("cudaMemsetAsync", ce);
  int64_t hw = g.h * g.w, l = g.oh * g.ow;
  if (l == 0)
    return "";
  if (isLowFloat(dx.dtype)) {
    auto run = [&](auto tag) {
      using T = decltype(tag);
      maxPoolBackwardLowKernel<T>
          <<<int(em::minOf<int64_t>(g.planes, 65535)), kThreads, 0,
             a.ctx.stream>>>(dy.as<T>(), ind.as<int64_t>(), dx.as<T>(),
                             g.planes, hw, l, a.ctx.errorFlag, a.instruction);
    };
    if (dx.dtype == DType::BF16)
      run(__nv_bfloat16());
    else
      run(__half());
  } else if (dx.dtype == DType::F32)
    maxPoolBackwardKernel<float><<<blocksFor(g.planes), kThreads, 0,
                                   a.ctx.stream>>>(
        dy.as<float>(), ind.as<int64_t>(), dx.as<float>(), g.planes, hw, l,
        a.ctx.errorFlag, a.instruction);
  else
    maxPoolBackwardKernel<double><<<blocksFor(g.planes), kThreads, 0,
                                    a.ctx.stream>>>(
        dy.as<double>(), ind.as<int64_t>(), dx.as<double>(), g.planes, hw, l,
        a.ctx.errorFlag, a.instruction);
  return launched(op);
}

std::string kAvgPool(const CudaKernelArgs &a) {
  const char *op = "offload.avg_pool2d";
  const TensorView &x = a.inputs[0], &y = a.outputs[0];
  PoolGeom g;
  if (auto e = planeOf(op, x, g); !e.empty())
    return e;
  if (auto e = geom::poolWindow(op, a.attrs, false, g); !e.empty())
    return e;
  std::vector<int64_t> ys = withPlane(x.shape, g.oh, g.ow);
  if (y.dtype != x.dtype || y.shape != ys)
    return std::string(op) + ": y must be " + dtypeName(x.dtype) +
           shapeStr(ys);
  int64_t n = y.numel();
  if (n == 0)
    return "";
  dispatchFloat(x.dtype, [&](auto tag) {
    using T = decltype(tag);
    avgPoolKernel<T><<<blocksFor(n), kThreads, 0, a.ctx.stream>>>(
        x.as<T>(), y.as<T>(), g);
  });
  return launched(op);
}

std::string kAvgPoolBackward(const CudaKernelArgs &a) {
  const char *op = "offload.avg_pool2d_backward";
  const TensorView &dy = a.inputs[0], &dx = a.outputs[0];
  PoolGeom g;
  if (auto e = planeOf(op, dx, g); !e.empty())
    return e;
  if (auto e = geom::poolWindow(op, a.attrs, false, g); !e.empty())
    return e;
  std::vector<int64_t> ys = withPlane(dx.shape, g.oh, g.ow);
  if (dy.dtype != dx.dtype || dy.shape != ys)
    return std::string(op) + ": dy must be " + dtypeName(dx.dtype) +
           shapeStr(ys);
  int64_t n = dx.numel();
  if (n == 0)
    return "";
  dispatchFloat(dx.dtype, [&](auto tag) {
    using T = decltype(tag);
    avgPoolBackwardKernel<T><<<blocksFor(n), kThreads, 0, a.ctx.stream>>>(
        dy.as<T>(), dx.as<T>(), g);
  });
  return launched(op);
}

std::string kAdaptive(const CudaKernelArgs &a) {
  const char *op = "offload.adaptive_avg_pool2d";
  const TensorView &x = a.inputs[0], &y = a.outputs[0];
  PoolGeom g;
  if (auto e = planeOf(op, x, g); !e.empty())
    return e;
  if (y.rank() != x.rank() || y.dtype != x.dtype)
    return std::string(op) + ": y " + shapeStr(y.shape) + " and x " +
           shapeStr(x.shape) + " differ in rank or dtype";
  g.oh = y.shape[size_t(y.rank() - 2)];
  g.ow = y.shape[size_t(y.rank() - 1)];
  if (a.attrs.has("output_size")) {
    int64_t oh, ow;
    if (auto e = geom::get2(op, a.attrs, "output_size", g.oh, g.ow, oh, ow);
        !e.empty())
      return e;
    if (oh != g.oh || ow != g.ow)
      return std::string(op) + ": output_size disagrees with y " +
             shapeStr(y.shape);
  }
  if (y.shape != withPlane(x.shape, g.oh, g.ow))
    return std::string(op) + ": y has shape " + shapeStr(y.shape) +
           ", expected " + shapeStr(withPlane(x.shape, g.oh, g.ow));
  if ((g.oh < 1 || g.ow < 1) && y.numel() > 0)
    return std::string(op) + ": output size must be positive, got " +
           shapeStr(y.shape);
  if (g.h < 1 || g.w < 1)
    return std::string(op) + ": empty input plane " + shapeStr(x.shape);
  int64_t n = y.numel();
  if (n == 0)
    return "";
  dispatchFloat(x.dtype, [&](auto tag) {
    using T = decltype(tag);
    adaptiveKernel<T><<<blocksFor(n), kThreads, 0, a.ctx.stream>>>(
        x.as<T>(), y.as<T>(), g);
  });
  return launched(op);
}

std::string kAdaptiveBackward(const CudaKernelArgs &a) {
  const char *op = "offload.adaptive_avg_pool2d_backward";
  const TensorView &dy = a.inputs[0], &dx = a.outputs[0];
  PoolGeom g;
  if (auto e = planeOf(op, dx, g); !e.empty())
    return e;
  if (dy.rank() != dx.rank() || dy.dtype != dx.dtype)
    return std::string(op) + ": dy " + shapeStr(dy.shape) + " and dx " +
           shapeStr(dx.shape) + " differ in rank or dtype";
  g.oh = dy.shape[size_t(dy.rank() - 2)];
  g.ow = dy.shape[size_t(dy.rank() - 1)];
  if (dy.shape != withPlane(dx.shape, g.oh, g.ow))
    return std::string(op) + ": dy has shape " + shapeStr(dy.shape) +
           ", expected " + shapeStr(withPlane(dx.shape, g.oh, g.ow));
  if ((g.oh < 1 || g.ow < 1) && g.planes * g.h * g.w > 0)
    return std::string(op) + ": output size must be positive, got " +
           shapeStr(dy.shape);
  int64_t n = dx.numel();
  if (n == 0)
    return "";
  dispatchFloat(dx.dtype, [&](auto tag) {
    using T = decltype(tag);
    adaptiveBackwardKernel<T><<<blocksFor(n), kThreads, 0, a.ctx.stream>>>(
        dy.as<T>(), dx.as<T>(), g);
  });
  return launched(op);
}

} // namespace

const std::vector<Entry> &normPoolEntries() {
  static const std::vector<Entry> e = {
      {"offload.layer_norm", kLayerNorm, true},
      {"offload.layer_norm_backward", kLayerNormBackward, true},
      {"offload.max_pool2d", kMaxPool, true},
      {"offload.max_pool2d_backward", kMaxPoolBackward, true},
      {"offload.avg_pool2d", kAvgPool, true},
      {"offload.avg_pool2d_backward", kAvgPoolBackward, true},
      {"offload.adaptive_avg_pool2d", kAdaptive, true},
      {"offload.adaptive_avg_pool2d_backward", kAdaptiveBackward, true},
  };
  return e;
}


//===----------------------------------------------------------------------===//
// softmax_backward / log_softmax_backward
//===----------------------------------------------------------------------===//

namespace {

template <typename T>
__device__ T softmaxGrad(bool isLog, T g, T y, T s) {
  return isLog ? g - exp(y) * s : y * (g - s);
}

/// One block per line of n contiguous elements.
template <typename T>
__global__ void softmaxBackwardRowKernel(const T *dy, const T *y, T *dx,
                                         int64_t lines, int64_t n,
                                         bool isLog) {
  __shared__ double shm[kThreads];
  for (int64_t r = blockIdx.x; r < lines; r += gridDim.x) {
    const T *g = dy + r * n, *yy = y + r * n;
    double s = 0;
    for (int64_t j = threadIdx.x; j < n; j += kThreads)
      s += isLog ? double(ld(g[j])) : double(ld(g[j])) * double(ld(yy[j]));
    Acc<T> sT = Acc<T>(blockSum(s, shm));
    T *out = dx + r * n;
    for (int64_t j = threadIdx.x; j < n; j += kThreads)
      out[j] = st<T>(softmaxGrad(isLog, ld(g[j]), ld(yy[j]), sT));
  }
}

/// One thread per line (o, i) of n elements at stride inner.
template <typename T>
__global__ void softmaxBackwardStridedKernel(const T *dy, const T *y, T *dx,
                                             int64_t outer, int64_t n,
                                             int64_t inner, bool isLog) {
  OFFLOAD_GRID_LOOP(t, outer * inner) {
    int64_t base = (t / inner) * n * inner + t % inner;
    const T *g = dy + base, *yy = y + base;
    double s = 0;
    for (int64_t j = 0; j < n; ++j)
      s += isLog ? double(ld(g[j * inner]))
                 : double(ld(g[j * inner])) * double(ld(yy[j * inner]));
    Acc<T> sT = Acc<T>(s);
    T *out = dx + base;
    for (int64_t j = 0; j < n; ++j)
      out[j * inner] =
          st<T>(softmaxGrad(isLog, ld(g[j * inner]), ld(yy[j * inner]), sT));
  }
}

} // namespace

std::string softmaxBackwardLines(const CudaKernelArgs &a, bool isLog,
                                 int64_t outer, int64_t n, int64_t inner) {
  const TensorView &dy = a.inputs[0], &y = a.inputs[1], &dx = a.outputs[0];
  auto run = [&](auto tag) {
    using T = decltype(tag);
    if (inner == 1)
      softmaxBackwardRowKernel<T><<<rowBlocks(outer), kThreads, 0,
                                    a.ctx.stream>>>(
          dy.as<T>(), y.as<T>(), dx.as<T>(), outer, n, isLog);
    else
      softmaxBackwardStridedKernel<T><<<blocksFor(outer * inner), kThreads,
                                        0, a.ctx.stream>>>(
          dy.as<T>(), y.as<T>(), dx.as<T>(), outer, n, inner, isLog);
  };
  dispatchFloat(dy.dtype, run);
  return launched(isLog ? "log_softmax_backward" : "softmax_backward");
}

namespace {
/// bf16/f16 softmax / log_softmax: one thread per line, the host kernel's
/// f32 formulas (Kernels/Softmax.cpp: the max in f32, the sum of exp in
/// double, y in f32), each result rounded once.
template <typename T>
__global__ void softmaxLowKernel(const T *x, T *y, int64_t outer, int64_t n,
                                 int64_t inner, bool isLog) {
  OFFLOAD_GRID_LOOP(t, outer * inner) {
    int64_t base = (t / inner) * n * inner + t % inner;
    const T *in = x + base;
    T *out = y + base;
    float m = -INFINITY;
    for (int64_t j = 0; j < n; ++j)
      m = em::maxOf(m, ld(in[j * inner]));
    double s = 0;
    for (int64_t j = 0; j < n; ++j)
      s += em::expOf(double(ld(in[j * inner]) - m));
    if (isLog) {
      float lse = float(em::logOf(s));
      for (int64_t j = 0; j < n; ++j)
        out[j * inner] = st<T>(ld(in[j * inner]) - m - lse);
    } else {
      double inv = 1.0 / s;
      for (int64_t j = 0; j < n; ++j)
        out[j * inner] =
            st<T>(float(em::expOf(double(ld(in[j * inner]) - m)) * inv));
    }
  }
}
} // namespace

std::string softmaxLowLines(const CudaKernelArgs &a, bool isLog,
                            int64_t outer, int64_t n, int64_t inner) {
  const TensorView &x = a.inputs[0], &y = a.outputs[0];
  auto run = [&](auto tag) {
    using T = decltype(tag);
    softmaxLowKernel<T><<<blocksFor(outer * inner), kThreads, 0,
                          a.ctx.stream>>>(x.as<T>(), y.as<T>(), outer, n,
                                          inner, isLog);
  };
  if (x.dtype == DType::BF16)
    run(__nv_bfloat16());
  else
    run(__half());
  return launched(isLog ? "log_softmax" : "softmax");
}

} // namespace cuda
} // namespace rt
} // namespace offload
