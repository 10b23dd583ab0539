//===- Pool.cpp - Host kernels: 2-D max, average and adaptive pooling -----===//
//
// Part of offload. offload.max_pool2d (+ indices), offload.max_pool2d_backward,
// offload.avg_pool2d(_backward), offload.adaptive_avg_pool2d(_backward) on
// f32/f64 tensors [N,C,H,W] or [C,H,W]; indices are i64 flat offsets ih*W+iw
// within each plane. Semantics follow ATen 1.13's CPU kernels
// (aten/src/ATen/native/cpu/MaxPoolKernel.cpp, AvgPoolKernel.cpp,
// AdaptiveAvgPoolKernel.cpp, and the output size of
// pooling_output_shape in Pool.h), see docs/op-semantics.md.
//
// All kernels run parallel over planes (N*C); each plane is written by one
// thread only, so backward scatter-adds are deterministic.
//
//===----------------------------------------------------------------------===//

#include "ElementMath.h"
#include "Geometry.h"
#include "KernelSupport.h"

#include <algorithm>
#include <cmath>
#include <limits>

using namespace offload::rt;
using namespace offload::rt::kernels;

namespace {

using offload::rt::em::PoolGeom;
using offload::rt::geom::get2;

/// ATen pooling_output_shape (Pool.h, PyTorch 1.13): em::poolOutSize.
inline int64_t poolOut(int64_t in, int64_t k, int64_t pad, int64_t stride,
                       int64_t dil, bool ceil) {
  return offload::rt::em::poolOutSize(in, k, pad, stride, dil, ceil);
}

std::vector<int64_t> withPlane(const std::vector<int64_t> &s, int64_t a,
                               int64_t b) {
  std::vector<int64_t> r(s.begin(), s.end() - 2);
  r.push_back(a);
  r.push_back(b);
  return r;
}

std::string checkF(const char *op, const char *name, const TensorView &t,
                   DType &dt, bool first) {
  if (first) {
    dt = t.dtype;
    if (!isFloat(dt))
      return cat(op, ": unsupported dtype ", dtypeName(dt));
  }
  return checkTensor(op, name, t, dt);
}

//===----------------------------------------------------------------------===//
// max_pool2d
//===----------------------------------------------------------------------===//

template <typename T>
void maxPoolImpl(const PoolGeom &g, const T *x, T *y, int64_t *ind,
                 int threads) {
  int64_t HW = g.h * g.w, L = g.oh * g.ow;
  parallelFor(g.planes, threads, 1, [&](int64_t p0, int64_t p1) {
    for (int64_t p = p0; p < p1; ++p) {
      const T *xp = x + p * HW;
      T *yp = y + p * L;
      int64_t *ip = ind + p * L;
      for (int64_t oh = 0; oh < g.oh; ++oh) {
        int64_t h0 = oh * g.sh - g.ph;
        int64_t h1 = std::min(h0 + (g.kh - 1) * g.dh + 1, g.h);
        h0 = offload::rt::em::firstInside(h0, g.dh);
        for (int64_t ow = 0; ow < g.ow; ++ow) {
          int64_t w0 = ow * g.sw - g.pw;
          int64_t w1 = std::min(w0 + (g.kw - 1) * g.dw + 1, g.w);
          w0 = offload::rt::em::firstInside(w0, g.dw);
          int64_t best = h0 * g.w + w0;
          T bestV = -std::numeric_limits<T>::infinity();
          for (int64_t ih = h0; ih < h1; ih += g.dh)
            for (int64_t iw = w0; iw < w1; iw += g.dw) {
              int64_t idx = ih * g.w + iw;
              T v = xp[idx];
              if (v > bestV || std::isnan(v)) {
                bestV = v;
                best = idx;
              }
            }
          yp[oh * g.ow + ow] = bestV;
          ip[oh * g.ow + ow] = best;
        }
      }
    }
  });
}

std::string maxPoolKernel(const KernelArgs &a) {
  const char *op = "offload.max_pool2d";
  const TensorView &x = a.inputs[0], &y = a.outputs[0], &ind = a.outputs[1];
  DType dt;
  if (auto e = checkF(op, "x", x, dt, true); !e.empty())
    return e;
  if (auto e = checkF(op, "y", y, dt, false); !e.empty())
    return e;
  if (auto e = checkTensor(op, "indices", ind, DType::I64); !e.empty())
    return e;
  PoolGeom g;
  if (auto e = offload::rt::geom::planesOf(op, "x", x.shape, g.planes); !e.empty())
    return e;
  g.h = x.shape[size_t(x.rank() - 2)];
  g.w = x.shape[size_t(x.rank() - 1)];
  if (auto e = offload::rt::geom::poolWindow(op, a.attrs, true, g); !e.empty())
    return e;
  auto ys = withPlane(x.shape, g.oh, g.ow);
  if (auto e = checkShape(op, "y", y, ys); !e.empty())
    return e;
  if (auto e = checkShape(op, "indices", ind, ys); !e.empty())
    return e;
  if (dt == DType::F32)
    maxPoolImpl<float>(g, x.as<float>(), y.as<float>(), ind.as<int64_t>(),
                       a.numThreads);
  else
    maxPoolImpl<double>(g, x.as<double>(), y.as<double>(), ind.as<int64_t>(),
                        a.numThreads);
  return "";
}

template <typename T>
std::string maxPoolBackwardImpl(const PoolGeom &g, const T *dy,
                                const int64_t *ind, T *dx, int threads) {
  int64_t HW = g.h * g.w, L = g.oh * g.ow;
  // Validate every index before writing anything.
  for (int64_t i = 0, e = g.planes * L; i < e; ++i)
    if (ind[i] < 0 || ind[i] >= HW)
      return cat("offload.max_pool2d_backward: index ", ind[i],
                 " out of range for a ", g.h, "x", g.w, " plane");
  parallelFor(g.planes, threads, 1, [&](int64_t p0, int64_t p1) {
    for (int64_t p = p0; p < p1; ++p) {
      T *dp = dx + p * HW;
      std::fill(dp, dp + HW, T(0));
      const T *gp = dy + p * L;
      const int64_t *ip = ind + p * L;
      for (int64_t i = 0; i < L; ++i)
        dp[ip[i]] += gp[i];
    }
  });
  return "";
}

std::string maxPoolBackwardKernel(const KernelArgs &a) {
  const char *op = "offload.max_pool2d_backward";
  const TensorView &dy = a.inputs[0], &ind = a.inputs[1], &dx = a.outputs[0];
  DType dt;
  if (auto e = checkF(op, "dy", dy, dt, true); !e.empty())
    return e;
  if (auto e = checkF(op, "dx", dx, dt, false); !e.empty())
    return e;
  if (auto e = checkTensor(op, "indices", ind, DType::I64); !e.empty())
    return e;
  PoolGeom g;
  if (auto e = offload::rt::geom::planesOf(op, "dx", dx.shape, g.planes); !e.empty())
    return e;
  g.h = dx.shape[size_t(dx.rank() - 2)];
  g.w = dx.shape[size_t(dx.rank() - 1)];
  if (dy.rank() != dx.rank())
    return cat(op, ": dy ", shapeStr(dy.shape), " and dx ", shapeStr(dx.shape),
               " differ in rank");
  g.oh = dy.shape[size_t(dy.rank() - 2)];
  g.ow = dy.shape[size_t(dy.rank() - 1)];
  if (auto e = checkShape(op, "dy", dy, withPlane(dx.shape, g.oh, g.ow));
      !e.empty())
    return e;
  if (auto e = checkShape(op, "indices", ind, dy.shape); !e.empty())
    return e;
  if (dt == DType::F32)
    return maxPoolBackwardImpl<float>(g, dy.as<float>(), ind.as<int64_t>(),
                                      dx.as<float>(), a.numThreads);
  return maxPoolBackwardImpl<double>(g, dy.as<double>(), ind.as<int64_t>(),
                                     dx.as<double>(), a.numThreads);
}

//===----------------------------------------------------------------------===//
// avg_pool2d
//===----------------------------------------------------------------------===//

/// Window [h0,h1) x [w0,w1) (clipped to the input) and divisor of output
/// (oh, ow), as ATen's cpu_avg_pool: em::avgPoolWindow.
inline void avgWindow(const PoolGeom &g, int64_t oh, int64_t ow, int64_t &h0,
                      int64_t &h1, int64_t &w0, int64_t &w1, int64_t &div) {
  offload::rt::em::avgPoolWindow(g, oh, ow, h0, h1, w0, w1, div);
}

template <typename T>
void avgPoolImpl(const PoolGeom &g, const T *x, T *y, int threads) {
  int64_t HW = g.h * g.w, L = g.oh * g.ow;
  parallelFor(g.planes, threads, 1, [&](int64_t p0, int64_t p1) {
    for (int64_t p = p0; p < p1; ++p) {
      const T *xp = x + p * HW;
      T *yp = y + p * L;
      for (int64_t oh = 0; oh < g.oh; ++oh)
        for (int64_t ow = 0; ow < g.ow; ++ow) {
          int64_t h0, h1, w0, w1, div;
          avgWindow(g, oh, ow, h0, h1, w0, w1, div);
          if (h0 >= h1 || w0 >= w1 || div <= 0) {
            yp[oh * g.ow + ow] = T(0);
            continue;
          }
          double s = 0;
          for (int64_t ih = h0; ih < h1; ++ih)
            for (int64_t iw = w0; iw < w1; ++iw)
              s += double(xp[ih * g.w + iw]);
          yp[oh * g.ow + ow] = T(s / double(div));
        }
    }
  });
}

template <typename T>
void avgPoolBackwardImpl(const PoolGeom &g, const T *dy, T *dx, int threads) {
  int64_t HW = g.h * g.w, L = g.oh * g.ow;
  parallelFor(g.planes, threads, 1, [&](int64_t p0, int64_t p1) {
    for (int64_t p = p0; p < p1; ++p) {
      T *dp = dx + p * HW;
      std::fill(dp, dp + HW, T(0));
      const T *gp = dy + p * L;
      for (int64_t oh = 0; oh < g.oh; ++oh)
        for (int64_t ow = 0; ow < g.ow; ++ow) {
          int64_t h0, h1, w0, w1, div;
          avgWindow(g, oh, ow, h0, h1, w0, w1, div);
          if (h0 >= h1 || w0 >= w1 || div <= 0)
            continue;
          T d = gp[oh * g.ow + ow] / T(div);
          for (int64_t ih = h0; ih < h1; ++ih)
            for (int64_t iw = w0; iw < w1; ++iw)
              dp[ih * g.w + iw] += d;
        }
    }
  });
}

std::string avgPoolKernel(const KernelArgs &a) {
  const char *op = "offload.avg_pool2d";
  const TensorView &x = a.inputs[0], &y = a.outputs[0];
  DType dt;
  if (auto e = checkF(op, "x", x, dt, true); !e.empty())
    return e;
  if (auto e = checkF(op, "y", y, dt, false); !e.empty())
    return e;
  PoolGeom g;
  if (auto e = offload::rt::geom::planesOf(op, "x", x.shape, g.planes); !e.empty())
    return e;
  g.h = x.shape[size_t(x.rank() - 2)];
  g.w = x.shape[size_t(x.rank() - 1)];
  if (auto e = offload::rt::geom::poolWindow(op, a.attrs, false, g); !e.empty())
    return e;
  if (auto e = checkShape(op, "y", y, withPlane(x.shape, g.oh, g.ow));
      !e.empty())
    return e;
  if (dt == DType::F32)
    avgPoolImpl<float>(g, x.as<float>(), y.as<float>(), a.numThreads);
  else
    avgPoolImpl<double>(g, x.as<double>(), y.as<double>(), a.numThreads);
  return "";
}

std::string avgPoolBackwardKernel(const KernelArgs &a) {
  const char *op = "offload.avg_pool2d_backward";
  const TensorView &dy = a.inputs[0], &dx = a.outputs[0];
  DType dt;
  if (auto e = checkF(op, "dy", dy, dt, true); !e.empty())
    return e;
  if (auto e = checkF(op, "dx", dx, dt, false); !e.empty())
    return e;
  PoolGeom g;
  if (auto e = offload::rt::geom::planesOf(op, "dx", dx.shape, g.planes); !e.empty())
    return e;
  g.h = dx.shape[size_t(dx.rank() - 2)];
  g.w = dx.shape[size_t(dx.rank() - 1)];
  if (auto e = offload::rt::geom::poolWindow(op, a.attrs, false, g); !e.empty())
    return e;
  if (auto e = checkShape(op, "dy", dy, withPlane(dx.shape, g.oh, g.ow));
      !e.empty())
    return e;
  if (dt == DType::F32)
    avgPoolBackwardImpl<float>(g, dy.as<float>(), dx.as<float>(),
                               a.numThreads);
  else
    avgPoolBackwardImpl<double>(g, dy.as<double>(), dx.as<double>(),
                                a.numThreads);
  return "";
}

//===----------------------------------------------------------------------===//
// adaptive_avg_pool2d
//===----------------------------------------------------------------------===//

/// ATen start_index/end_index: [floor(o*in/out), ceil((o+1)*in/out)).
inline int64_t adStart(int64_t o, int64_t out, int64_t in) {
  return offload::rt::em::adaptiveStart(o, out, in);
}
inline int64_t adEnd(int64_t o, int64_t out, int64_t in) {
  return offload::rt::em::adaptiveEnd(o, out, in);
}

template <typename T>
void adaptiveImpl(const PoolGeom &g, const T *x, T *y, int threads) {
  int64_t HW = g.h * g.w, L = g.oh * g.ow;
  parallelFor(g.planes, threads, 1, [&](int64_t p0, int64_t p1) {
    for (int64_t p = p0; p < p1; ++p) {
      const T *xp = x + p * HW;
      T *yp = y + p * L;
      for (int64_t oh = 0; oh < g.oh; ++oh) {
        int64_t h0 = adStart(oh, g.oh, g.h), h1 = adEnd(oh, g.oh, g.h);
        for (int64_t ow = 0; ow < g.ow; ++ow) {
          int64_t w0 = adStart(ow, g.ow, g.w), w1 = adEnd(ow, g.ow, g.w);
          double s = 0;
          for (int64_t ih = h0; ih < h1; ++ih)
            for (int64_t iw = w0; iw < w1; ++iw)
              s += double(xp[ih * g.w + iw]);
          yp[oh * g.ow + ow] = T(s / double((h1 - h0) * (w1 - w0)));
        }
      }
    }
  });
}

template <typename T>
void adaptiveBackwardImpl(const PoolGeom &g, const T *dy, T *dx, int threads) {
  int64_t HW = g.h * g.w, L = g.oh * g.ow;
  parallelFor(g.planes, threads, 1, [&](int64_t p0, int64_t p1) {
    for (int64_t p = p0; p < p1; ++p) {
      T *dp = dx + p * HW;
      std::fill(dp, dp + HW, T(0));
      const T *gp = dy + p * L;
      for (int64_t oh = 0; oh < g.oh; ++oh) {
        int64_t h0 = adStart(oh, g.oh, g.h), h1 = adEnd(oh, g.oh, g.h);
        for (int64_t ow = 0; ow < g.ow; ++ow) {
          int64_t w0 = adStart(ow, g.ow, g.w), w1 = adEnd(ow, g.ow, g.w);
          T d = gp[oh * g.ow + ow] / T(h1 - h0) / T(w1 - w0);
          for (int64_t ih = h0; ih < h1; ++ih)
            for (int64_t iw = w0; iw < w1; ++iw)
              dp[ih * g.w + iw] += d;
        }
      }
    }
  });
}

std::string adaptiveKernel(const KernelArgs &a) {
  const char *op = "offload.adaptive_avg_pool2d";
  const TensorView &x = a.inputs[0], &y = a.outputs[0];
  DType dt;
  if (auto e = checkF(op, "x", x, dt, true); !e.empty())
    return e;
  if (auto e = checkF(op, "y", y, dt, false); !e.empty())
    return e;
  PoolGeom g;
  if (auto e = offload::rt::geom::planesOf(op, "x", x.shape, g.planes); !e.empty())
    return e;
  g.h = x.shape[size_t(x.rank() - 2)];
  g.w = x.shape[size_t(x.rank() - 1)];
  if (y.rank() != x.rank())
    return cat(op, ": y ", shapeStr(y.shape), " and x ", shapeStr(x.shape),
               " differ in rank");
  g.oh = y.shape[size_t(y.rank() - 2)];
  g.ow = y.shape[size_t(y.rank() - 1)];
  if (a.attrs.has("output_size")) {
    int64_t oh, ow;
    if (auto e = get2(op, a.attrs, "output_size", g.oh, g.ow, oh, ow);
        !e.empty())
      return e;
    if (oh != g.oh || ow != g.ow)
      return cat(op, ": output_size (", oh, ",", ow, ") disagrees with y ",
                 shapeStr(y.shape));
  }
  if (auto e = checkShape(op, "y", y, withPlane(x.shape, g.oh, g.ow));
      !e.empty())
    return e;
  if ((g.oh < 1 || g.ow < 1) && y.numel() > 0)
    return cat(op, ": output size must be positive, got ", shapeStr(y.shape));
  if (g.h < 1 || g.w < 1)
    return cat(op, ": empty input plane ", shapeStr(x.shape));
  if (dt == DType::F32)
    adaptiveImpl<float>(g, x.as<float>(), y.as<float>(), a.numThreads);
  else
    adaptiveImpl<double>(g, x.as<double>(), y.as<double>(), a.numThreads);
  return "";
}

std::string adaptiveBackwardKernel(const KernelArgs &a) {
  const char *op = "offload.adaptive_avg_pool2d_backward";
  const TensorView &dy = a.inputs[0], &dx = a.outputs[0];
  DType dt;
  if (auto e = checkF(op, "dy", dy, dt, true); !e.empty())
    return e;
  if (auto e = checkF(op, "dx", dx, dt, false); !e.empty())
    return e;
  PoolGeom g;
  if (auto e = offload::rt::geom::planesOf(op, "dx", dx.shape, g.planes); !e.empty())
    return e;
  if (dy.rank() != dx.rank())
    return cat(op, ": dy ", shapeStr(dy.shape), " and dx ", shapeStr(dx.shape),
               " differ in rank");
  g.h = dx.shape[size_t(dx.rank() - 2)];
  g.w = dx.shape[size_t(dx.rank() - 1)];
  g.oh = dy.shape[size_t(dy.rank() - 2)];
  g.ow = dy.shape[size_t(dy.rank() - 1)];
  if (auto e = checkShape(op, "dy", dy, withPlane(dx.shape, g.oh, g.ow));
      !e.empty())
    return e;
  if ((g.oh < 1 || g.ow < 1) && g.planes * g.h * g.w > 0)
    return cat(op, ": output size must be positive, got ", shapeStr(dy.shape));
  if (dt == DType::F32)
    adaptiveBackwardImpl<float>(g, dy.as<float>(), dx.as<float>(),
                                a.numThreads);
  else
    adaptiveBackwardImpl<double>(g, dy.as<double>(), dx.as<double>(),
                                 a.numThreads);
  return "";
}

} // namespace

void offload::rt::kernels::registerPoolKernels(KernelRegistry &r) {
  addEmulated<maxPoolKernel>(r, "offload.max_pool2d", Absent::Allowed);
  addEmulated<maxPoolBackwardKernel>(r, "offload.max_pool2d_backward", Absent::Allowed);
  addEmulated<avgPoolKernel>(r, "offload.avg_pool2d", Absent::Allowed);
  addEmulated<avgPoolBackwardKernel>(r, "offload.avg_pool2d_backward", Absent::Allowed);
  addEmulated<adaptiveKernel>(r, "offload.adaptive_avg_pool2d", Absent::Allowed);
  addEmulated<adaptiveBackwardKernel>(r, "offload.adaptive_avg_pool2d_backward", Absent::Allowed);
}
