//===- Norm.cpp - Host kernels: batch norm and layer norm -----------------===//
//
// Part of offload. offload.batch_norm (training mode), offload.batch_norm_backward,
// offload.layer_norm and offload.layer_norm_backward on f32/f64 tensors.
// Semantics: ATen 1.13 `native_batch_norm` / `native_batch_norm_backward`
// (train=true) and `native_layer_norm` / `native_layer_norm_backward`, see
// docs/op-semantics.md. Statistics and reductions accumulate in double, with a
// two-pass mean/variance; each reduction runs inside one thread in a fixed
// order (batch norm: parallel over channels; layer norm: parallel over rows
// for dx and over columns for dweight/dbias), so results are deterministic.
//
// The layer-norm input gradient uses ATen's closed form (LayerNormKernel.cpp):
//   ds = sum_j dy*g*x, db = sum_j dy*g, b = (db*mean - ds) * rstd^3 / D,
//   c = -b*mean - db*rstd/D, dx = rstd*dy*g + b*x + c.
// The batch-norm input gradient (training):
//   dx = (dy - mean(dy) - (x-mean) * sum(dy*(x-mean)) * invstd^2 / count)
//        * invstd * weight.
//
//===----------------------------------------------------------------------===//

#include "ElementMath.h"
#include "KernelSupport.h"

#include <algorithm>
#include <cmath>

using namespace offload::rt;
using namespace offload::rt::kernels;

namespace {

/// Checks an optional per-channel/per-feature operand: absent, or of dtype dt
/// and shape `want`.
std::string checkOpt(const char *op, const char *name,
                     const std::vector<TensorView> &v, size_t i, DType dt,
                     const std::vector<int64_t> &want) {
  if (!present(v, i))
    return "";
  if (auto e = checkTensor(op, name, v[i], dt); !e.empty())
    return e;
  return checkShape(op, name, v[i], want);
}

//===----------------------------------------------------------------------===//
// batch_norm
//===----------------------------------------------------------------------===//

struct BnGeom {
  int64_t n = 0, c = 0, s = 1; // x viewed as [n, c, s]
  int64_t count() const { return n * s; }
};

std::string bnGeom(const char *op, const TensorView &x, BnGeom &g) {
  if (x.rank() < 2)
    return cat(op, ": x must be [N,C,...], got ", shapeStr(x.shape));
  g.n = x.shape[0];
  g.c = x.shape[1];
  g.s = 1;
  for (size_t i = 2; i < x.shape.size(); ++i)
    g.s *= x.shape[i];
  return "";
}

template <typename T> void bnForward(const BnGeom &g, const KernelArgs &a) {
  const T *x = a.inputs[0].as<T>();
  const T *w = present(a.inputs, 1) ? a.inputs[1].as<T>() : nullptr;
  const T *b = present(a.inputs, 2) ? a.inputs[2].as<T>() : nullptr;
  const T *rm = present(a.inputs, 3) ? a.inputs[3].as<T>() : nullptr;
  const T *rv = present(a.inputs, 4) ? a.inputs[4].as<T>() : nullptr;
  T *y = a.outputs[0].as<T>(), *sm = a.outputs[1].as<T>(),
    *si = a.outputs[2].as<T>();
  T *nrm = present(a.outputs, 3) ? a.outputs[3].as<T>() : nullptr;
  T *nrv = present(a.outputs, 4) ? a.outputs[4].as<T>() : nullptr;
  double mom = a.attrs.getFloat("momentum", 0.1);
  double eps = a.attrs.getFloat("eps", 1e-5);
  int64_t cnt = g.count();
  parallelFor(g.c, a.numThreads, 1, [&](int64_t c0, int64_t c1) {
    for (int64_t c = c0; c < c1; ++c) {
      double sum = 0;
      for (int64_t n = 0; n < g.n; ++n)
        sum += sumLanes(x + (n * g.c + c) * g.s, g.s);
      double mean = sum / double(cnt), vs = 0;
      for (int64_t n = 0; n < g.n; ++n)
        vs += sqDevLanes(x + (n * g.c + c) * g.s, g.s, mean);
      double invstd = em::bnInvStd(vs, cnt, eps);
      sm[c] = T(mean);
      si[c] = T(invstd);
      if (rm && nrm)
        nrm[c] = T(em::bnRunningMean(double(rm[c]), mean, mom));
      if (rv && nrv)
        nrv[c] = T(em::bnRunningVar(double(rv[c]), vs, cnt, mom));
      em::BnAffine af = em::BnAffine::make(mean, invstd, w ? double(w[c]) : 1.0,
                                           b ? double(b[c]) : 0.0);
      for (int64_t n = 0; n < g.n; ++n) {
        const T *p = x + (n * g.c + c) * g.s;
        T *q = y + (n * g.c + c) * g.s;
        for (int64_t i = 0; i < g.s; ++i)
          q[i] = em::bnApply(p[i], af);
      }
    }
  });
}

std::string batchNormKernel(const KernelArgs &a) {
  const char *op = "offload.batch_norm";
  const TensorView &x = a.inputs[0];
  DType dt = x.dtype;
  if (!isFloat(dt))
    return cat(op, ": unsupported dtype ", dtypeName(dt));
  if (auto e = checkTensor(op, "x", x, dt); !e.empty())
    return e;
  BnGeom g;
  if (auto e = bnGeom(op, x, g); !e.empty())
    return e;
  std::vector<int64_t> cs{g.c};
  const char *inNames[] = {"x", "weight", "bias", "running_mean",
                           "running_var"};
  for (size_t i = 1; i < 5; ++i)
    if (auto e = checkOpt(op, inNames[i], a.inputs, i, dt, cs); !e.empty())
      return e;
  if (present(a.inputs, 3) != present(a.inputs, 4))
    return cat(op, ": running_mean and running_var must both be given or both "
                   "be absent");
  if (auto e = checkTensor(op, "y", a.outputs[0], dt); !e.empty())
    return e;
  if (auto e = checkShape(op, "y", a.outputs[0], x.shape); !e.empty())
    return e;
  const char *outNames[] = {"y", "save_mean", "save_invstd",
                            "new_running_mean", "new_running_var"};
  for (size_t i = 1; i < 3; ++i) {
    if (auto e = checkTensor(op, outNames[i], a.outputs[i], dt); !e.empty())
      return e;
    if (auto e = checkShape(op, outNames[i], a.outputs[i], cs); !e.empty())
      return e;
  }
  for (size_t i = 3; i < 5; ++i) {
    if (present(a.inputs, i) && !present(a.outputs, i) && g.c > 0)
      return cat(op, ": ", outNames[i], " is missing");
    if (auto e = checkOpt(op, outNames[i], a.outputs, i, dt, cs); !e.empty())
      return e;
  }
  if (g.count() < 2 && g.c > 0)
    return cat(op, ": training needs more than one value per channel, x is ",
               shapeStr(x.shape));
  if (dt == DType::F32)
    bnForward<float>(g, a);
  else
    bnForward<double>(g, a);
  return "";
}

template <typename T> void bnBackward(const BnGeom &g, const KernelArgs &a) {
  const T *dy = a.inputs[0].as<T>(), *x = a.inputs[1].as<T>();
  const T *w = present(a.inputs, 2) ? a.inputs[2].as<T>() : nullptr;
  const T *sm = a.inputs[3].as<T>(), *si = a.inputs[4].as<T>();
  T *dx = present(a.outputs, 0) ? a.outputs[0].as<T>() : nullptr;
  T *dw = present(a.outputs, 1) ? a.outputs[1].as<T>() : nullptr;
  T *db = present(a.outputs, 2) ? a.outputs[2].as<T>() : nullptr;
  double cnt = double(g.count());
  parallelFor(g.c, a.numThreads, 1, [&](int64_t c0, int64_t c1) {
    for (int64_t c = c0; c < c1; ++c) {
      double mean = double(sm[c]), invstd = double(si[c]);
      double sum = 0, dot = 0;
      for (int64_t n = 0; n < g.n; ++n) {
        const T *gp = dy + (n * g.c + c) * g.s;
        sum += sumLanes(gp, g.s);
        dot += dotDevLanes(gp, x + (n * g.c + c) * g.s, g.s, mean);
      }
      if (dw)
        dw[c] = T(dot * invstd);
      if (db)
        db[c] = T(sum);
      if (!dx)
        continue;
      // dx = (dy - gm - (x - mean) * k) * invstd * wv
      //    = dy * s + x * t + u (em::BnBackward).
      em::BnBackward bw = em::BnBackward::make(sum, dot, mean, invstd,
                                               w ? double(w[c]) : 1.0, cnt);
      for (int64_t n = 0; n < g.n; ++n) {
        const T *gp = dy + (n * g.c + c) * g.s;
        const T *xp = x + (n * g.c + c) * g.s;
        T *q = dx + (n * g.c + c) * g.s;
        T st = T(bw.s), tt = T(bw.t), ut = T(bw.u);
        for (int64_t i = 0; i < g.s; ++i)
          q[i] = em::bnBackwardApply(gp[i], xp[i], st, tt, ut);
      }
    }
  });
}

std::string batchNormBackwardKernel(const KernelArgs &a) {
  const char *op = "offload.batch_norm_backward";
  const TensorView &dy = a.inputs[0], &x = a.inputs[1];
  DType dt = x.dtype;
  if (!isFloat(dt))
    return cat(op, ": unsupported dtype ", dtypeName(dt));
  if (auto e = checkTensor(op, "x", x, dt); !e.empty())
    return e;
  if (auto e = checkTensor(op, "dy", dy, dt); !e.empty())
    return e;
  if (auto e = checkShape(op, "dy", dy, x.shape); !e.empty())
    return e;
  BnGeom g;
  if (auto e = bnGeom(op, x, g); !e.empty())
    return e;
  std::vector<int64_t> cs{g.c};
  if (auto e = checkOpt(op, "weight", a.inputs, 2, dt, cs); !e.empty())
    return e;
  for (size_t i = 3; i < 5; ++i) {
    const char *nm = i == 3 ? "save_mean" : "save_invstd";
    if (auto e = checkTensor(op, nm, a.inputs[i], dt); !e.empty())
      return e;
    if (auto e = checkShape(op, nm, a.inputs[i], cs); !e.empty())
      return e;
  }
  if (auto e = checkOpt(op, "dx", a.outputs, 0, dt, x.shape); !e.empty())
    return e;
  if (auto e = checkOpt(op, "dweight", a.outputs, 1, dt, cs); !e.empty())
    return e;
  if (auto e = checkOpt(op, "dbias", a.outputs, 2, dt, cs); !e.empty())
    return e;
  if (g.count() == 0) {
    // Empty batch: gradients of the affine parameters are zero.
    for (size_t i = 1; i < 3; ++i)
      if (present(a.outputs, i))
        std::fill_n(static_cast<char *>(a.outputs[i].data),
                    a.outputs[i].bytes(), char(0));
    return "";
  }
  if (dt == DType::F32)
    bnBackward<float>(g, a);
  else
    bnBackward<double>(g, a);
  return "";
}

//===----------------------------------------------------------------------===//
// layer_norm
//===----------------------------------------------------------------------===//

struct LnGeom {
  int64_t m = 1, d = 1; // rows, normalized size
  std::vector<int64_t> normShape;
};

std::string lnGeom(const char *op, const KernelArgs &a, const TensorView &x,
                   size_t weightIdx, LnGeom &g) {
  int64_t nd = a.attrs.getInt("normalized_ndim", -1);
  if (nd < 0 && present(a.inputs, weightIdx))
    nd = a.inputs[weightIdx].rank();
  if (nd < 0)
    return cat(op, ": missing attribute normalized_ndim");
  if (nd < 1 || nd > x.rank())
    return cat(op, ": normalized_ndim ", nd, " is out of range for x ",
               shapeStr(x.shape));
  size_t split = size_t(x.rank() - nd);
  g.m = 1;
  g.d = 1;
  for (size_t i = 0; i < split; ++i)
    g.m *= x.shape[i];
  for (size_t i = split; i < x.shape.size(); ++i)
    g.d *= x.shape[i];
  g.normShape.assign(x.shape.begin() + long(split), x.shape.end());
  return "";
}

std::string checkStat(const char *op, const char *name, const TensorView &t,
                      DType dt, int64_t m) {
  if (auto e = checkTensor(op, name, t, dt); !e.empty())
    return e;
  if (t.numel() != m)
    return cat(op, ": ", name, " has shape ", shapeStr(t.shape), ", expected ",
               m, " elements (one per normalized row)");
  return "";
}

template <typename T> void lnForward(const LnGeom &g, const KernelArgs &a) {
  const T *x = a.inputs[0].as<T>();
  const T *w = present(a.inputs, 1) ? a.inputs[1].as<T>() : nullptr;
  const T *b = present(a.inputs, 2) ? a.inputs[2].as<T>() : nullptr;
  T *y = a.outputs[0].as<T>(), *mo = a.outputs[1].as<T>(),
    *ro = a.outputs[2].as<T>();
  double eps = a.attrs.getFloat("eps", 1e-5);
  int64_t D = g.d;
  parallelFor(g.m, a.numThreads, std::max<int64_t>(1, 4096 / std::max<int64_t>(D, 1)),
              [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const T *p = x + r * D;
      double mean = sumLanes(p, D) / double(D);
      double vs = sqDevLanes(p, D, mean);
      double rstd = em::lnRstd(vs, D, eps);
      mo[r] = T(mean);
      ro[r] = T(rstd);
      T *q = y + r * D;
      T mt = T(mean), rt = T(rstd);
      if (w && b)
        for (int64_t j = 0; j < D; ++j)
          q[j] = em::lnNormalize(p[j], mt, rt) * w[j] + b[j];
      else if (w)
        for (int64_t j = 0; j < D; ++j)
          q[j] = em::lnNormalize(p[j], mt, rt) * w[j];
      else if (b)
        for (int64_t j = 0; j < D; ++j)
          q[j] = em::lnNormalize(p[j], mt, rt) + b[j];
      else
        for (int64_t j = 0; j < D; ++j)
          q[j] = em::lnNormalize(p[j], mt, rt);
    }
  });
}

std::string layerNormKernel(const KernelArgs &a) {
  const char *op = "offload.layer_norm";
  const TensorView &x = a.inputs[0];
  DType dt = x.dtype;
  if (!isFloat(dt))
    return cat(op, ": unsupported dtype ", dtypeName(dt));
  if (auto e = checkTensor(op, "x", x, dt); !e.empty())
    return e;
  LnGeom g;
  if (auto e = lnGeom(op, a, x, 1, g); !e.empty())
    return e;
  if (auto e = checkOpt(op, "weight", a.inputs, 1, dt, g.normShape); !e.empty())
    return e;
  if (auto e = checkOpt(op, "bias", a.inputs, 2, dt, g.normShape); !e.empty())
    return e;
  if (auto e = checkTensor(op, "y", a.outputs[0], dt); !e.empty())
    return e;
  if (auto e = checkShape(op, "y", a.outputs[0], x.shape); !e.empty())
    return e;
  if (auto e = checkStat(op, "mean", a.outputs[1], dt, g.m); !e.empty())
    return e;
  if (auto e = checkStat(op, "rstd", a.outputs[2], dt, g.m); !e.empty())
    return e;
  if (g.d == 0) {
    // Nothing to normalize: y is empty; we define mean 0, rstd 1/sqrt(eps).
    double eps = a.attrs.getFloat("eps", 1e-5);
    for (int64_t r = 0; r < g.m; ++r) {
      if (dt == DType::F32) {
        a.outputs[1].as<float>()[r] = 0;
        a.outputs[2].as<float>()[r] = float(1.0 / std::sqrt(eps));
      } else {
        a.outputs[1].as<double>()[r] = 0;
        a.outputs[2].as<double>()[r] = 1.0 / std::sqrt(eps);
      }
    }
    return "";
  }
  if (dt == DType::F32)
    lnForward<float>(g, a);
  else
    lnForward<double>(g, a);
  return "";
}

template <typename T> void lnBackward(const LnGeom &g, const KernelArgs &a) {
  const T *dy = a.inputs[0].as<T>(), *x = a.inputs[1].as<T>();
  const T *w = present(a.inputs, 2) ? a.inputs[2].as<T>() : nullptr;
  const T *mean = a.inputs[3].as<T>(), *rstd = a.inputs[4].as<T>();
  T *dx = present(a.outputs, 0) ? a.outputs[0].as<T>() : nullptr;
  T *dw = present(a.outputs, 1) ? a.outputs[1].as<T>() : nullptr;
  T *db = present(a.outputs, 2) ? a.outputs[2].as<T>() : nullptr;
  int64_t D = g.d;
  int64_t rowGrain = std::max<int64_t>(1, 4096 / std::max<int64_t>(D, 1));
  if (dx)
    parallelFor(g.m, a.numThreads, rowGrain, [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) {
        const T *gp = dy + r * D, *xp = x + r * D;
        // With gw = dy*w: ds = sum gw*x, dbs = sum gw, accumulated in
        // kLanes fixed-order double lanes.
        double accS[kLanes] = {0}, accB[kLanes] = {0};
        int64_t j = 0;
        if (w) {
          for (; j + kLanes <= D; j += kLanes)
            for (int l = 0; l < kLanes; ++l) {
              double gw = double(gp[j + l]) * double(w[j + l]);
              accS[l] += gw * double(xp[j + l]);
              accB[l] += gw;
            }
        } else {
          for (; j + kLanes <= D; j += kLanes)
            for (int l = 0; l < kLanes; ++l) {
              double gw = double(gp[j + l]);
              accS[l] += gw * double(xp[j + l]);
              accB[l] += gw;
            }
        }
        for (int l = 0; j < D; ++j, ++l) {
          double gw = double(gp[j]) * (w ? double(w[j]) : 1.0);
          accS[l] += gw * double(xp[j]);
          accB[l] += gw;
        }
        double ds = reduceLanes(accS), dbs = reduceLanes(accB);
        double mu = double(mean[r]), rs = double(rstd[r]);
        em::LnBackward bw = em::LnBackward::make(ds, dbs, mu, rs, D);
        T *q = dx + r * D;
        T rt = T(rs), bt = T(bw.b), ct = T(bw.c);
        if (w)
          for (int64_t j = 0; j < D; ++j)
            q[j] = em::lnBackwardApply(rt, gp[j], w[j], bt, xp[j], ct);
        else
          for (int64_t j = 0; j < D; ++j)
            q[j] = em::lnBackwardApplyNoWeight(rt, gp[j], bt, xp[j], ct);
      }
    });
  if (!dw && !db)
    return;
  // Column sums: each thread owns a column range and walks every row.
  parallelFor(D, a.numThreads, 64, [&](int64_t j0, int64_t j1) {
    std::vector<double> sw(size_t(j1 - j0), 0.0), sb(size_t(j1 - j0), 0.0);
    for (int64_t r = 0; r < g.m; ++r) {
      const T *gp = dy + r * D, *xp = x + r * D;
      double mu = double(mean[r]), rs = double(rstd[r]);
      for (int64_t j = j0; j < j1; ++j) {
        sw[size_t(j - j0)] += double(gp[j]) * (double(xp[j]) - mu) * rs;
        sb[size_t(j - j0)] += double(gp[j]);
      }
    }
    for (int64_t j = j0; j < j1; ++j) {
      if (dw)
        dw[j] = T(sw[size_t(j - j0)]);
      if (db)
        db[j] = T(sb[size_t(j - j0)]);
    }
  });
}

std::string layerNormBackwardKernel(const KernelArgs &a) {
  const char *op = "offload.layer_norm_backward";
  const TensorView &dy = a.inputs[0], &x = a.inputs[1];
  DType dt = x.dtype;
  if (!isFloat(dt))
    return cat(op, ": unsupported dtype ", dtypeName(dt));
  if (auto e = checkTensor(op, "x", x, dt); !e.empty())
    return e;
  if (auto e = checkTensor(op, "dy", dy, dt); !e.empty())
    return e;
  if (auto e = checkShape(op, "dy", dy, x.shape); !e.empty())
    return e;
  LnGeom g;
  if (auto e = lnGeom(op, a, x, 2, g); !e.empty())
    return e;
  if (auto e = checkOpt(op, "weight", a.inputs, 2, dt, g.normShape); !e.empty())
    return e;
  if (auto e = checkStat(op, "mean", a.inputs[3], dt, g.m); !e.empty())
    return e;
  if (auto e = checkStat(op, "rstd", a.inputs[4], dt, g.m); !e.empty())
    return e;
  if (auto e = checkOpt(op, "dx", a.outputs, 0, dt, x.shape); !e.empty())
    return e;
  if (auto e = checkOpt(op, "dweight", a.outputs, 1, dt, g.normShape);
      !e.empty())
    return e;
  if (auto e = checkOpt(op, "dbias", a.outputs, 2, dt, g.normShape);
      !e.empty())
    return e;
  if (dt == DType::F32)
    lnBackward<float>(g, a);
  else
    lnBackward<double>(g, a);
  return "";
}

} // namespace

void offload::rt::kernels::registerNormKernels(KernelRegistry &r) {
  addEmulated<batchNormKernel>(r, "offload.batch_norm", Absent::Allowed);
  addEmulated<batchNormBackwardKernel>(r, "offload.batch_norm_backward", Absent::Allowed);
  addEmulated<layerNormKernel>(r, "offload.layer_norm", Absent::Allowed);
  addEmulated<layerNormBackwardKernel>(r, "offload.layer_norm_backward", Absent::Allowed);
}
