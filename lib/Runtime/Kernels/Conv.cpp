//===- Conv.cpp - Host kernels: 2-D convolution and its gradients ---------===//
//
// Part of offload. offload.conv2d, offload.conv2d_backward_input and
// offload.conv2d_backward_weight on f32/f64 NCHW tensors, with stride,
// padding, dilation and groups (ATen `conv2d` / `convolution_backward`
// semantics, docs/op-semantics.md).
//
// Method. Grouped convolution with more than one input channel per group runs
// as im2col + GEMM (OpenBLAS): a chunk of the batch is unfolded into
// cols[C*KH*KW, NB*OH*OW] so that one GEMM per group covers every sample of
// the chunk (small spatial sizes, as in ResNet on 32x32 images, would make
// per-sample GEMMs tiny). The backward input product is W^T * dy followed by
// col2im; the backward weight product is dy * cols^T, accumulated over chunks.
// Depthwise convolution (one input channel per group, MobileNet) runs as a
// direct loop parallel over planes. Chunks hold at most kColsBudget elements.
//
// Scratch: cols and transposed-output buffers are host memory owned by the
// calling thread and reused between calls (they are not arena memory).
//
//===----------------------------------------------------------------------===//

#include "ElementMath.h"
#include "Geometry.h"
#include "KernelSupport.h"

#include <algorithm>
#include <cstring>

using namespace offload::rt;
using namespace offload::rt::kernels;

namespace {

/// Upper bound on elements of the im2col buffer of one batch chunk.
constexpr int64_t kColsBudget = int64_t(1) << 24;

/// Geometry of a 2-D convolution, all sizes in elements.
struct ConvGeom : offload::rt::geom::ConvWindow {
  /// Kernel positions kh*KW+kw that read the input at some output position.
  /// The others only ever meet padding (a 3x3 kernel with padding 1 on a
  /// 1x1 map, as in ResNet's last stage on 32x32 images, reads the input
  /// with its centre only): the GEMM paths leave them out of the unfolded
  /// matrix, which saves their multiplications by zero.
  std::vector<int64_t> kpos;
  int64_t nk() const { return int64_t(kpos.size()); }
  bool allLive() const { return nk() == kk(); }
};

/// Whether kernel tap `k` (stride s, padding p, dilation d) reads the input
/// [0, in) at some output position o in [0, out): some o with
/// 0 <= o*s - p + k*d < in. Closed form, so a corrupted plan's geometry costs
/// no loop over the output.
bool tapLive(int64_t k, int64_t s, int64_t p, int64_t d, int64_t in,
             int64_t out) {
  int64_t lo = p - k * d; // o*s must lie in [lo, lo + in - 1]
  int64_t o = lo <= 0 ? 0 : (lo + s - 1) / s;
  return o < out && o * s <= lo + in - 1;
}

/// Fills g from the input shape xs[N,C,H,W], weight shape ws[O,C/g,KH,KW] and
/// the attributes, checks them against each other and the output (or output
/// gradient) y[N,O,OH,OW] before anything loops over the geometry.
std::string makeGeom(const char *op, const AttrMap &attrs,
                     const std::vector<int64_t> &xs,
                     const std::vector<int64_t> &ws,
                     const TensorView &y, const char *yName,
                     ConvGeom &g) {
  if (auto e = offload::rt::geom::convWindow(op, attrs, xs, ws, g); !e.empty())
    return e;
  if (auto e = checkShape(op, yName, y, {g.n, g.o, g.oh, g.ow}); !e.empty())
    return e;
  g.kpos.clear();
  for (int64_t kh = 0; kh < g.kh; ++kh) {
    if (!tapLive(kh, g.sh, g.ph, g.dh, g.h, g.oh))
      continue;
    for (int64_t kw = 0; kw < g.kw; ++kw)
      if (tapLive(kw, g.sw, g.pw, g.dw, g.w, g.ow))
        g.kpos.push_back(kh * g.kw + kw);
  }
  if (g.c / g.g * g.kk() > kMaxBlasDim || g.o > kMaxBlasDim)
    return cat(op, ": dimensions exceed the BLAS 32-bit limit");
  return "";
}

template <typename T> std::vector<T> &scratch(int slot) {
  thread_local std::vector<T> bufs[4];
  return bufs[slot];
}

template <typename T> T *scratchPtr(int slot, int64_t n) {
  std::vector<T> &v = scratch<T>(slot);
  if (int64_t(v.size()) < n)
    v.resize(size_t(n));
  return v.data();
}

/// Range [lo, hi) of output columns ow whose input column
/// ow*s - p + off lies in [0, w).
inline void validRange(int64_t ow, int64_t s, int64_t p, int64_t off,
                       int64_t w, int64_t &lo, int64_t &hi) {
  // ow*s >= p - off  and  ow*s < w + p - off
  int64_t a = p - off, b = w + p - off;
  lo = a <= 0 ? 0 : (a + s - 1) / s;
  hi = b <= 0 ? 0 : (b + s - 1) / s;
  lo = std::min(lo, ow);
  hi = std::min(std::max(hi, lo), ow);
}

/// One output row of im2col: d[ow] = src[ow * sw] for ow in [lo, hi), 0
/// elsewhere. OW > 0 fixes the width at compile time: ResNet on 32x32 images
/// has rows of 1 to 16 elements, where memcpy and fill calls would cost more
/// than the copy itself.
template <int OW, typename T>
inline void im2colRow(T *d, const T *src, int64_t ow, int64_t sw, int64_t lo,
                      int64_t hi) {
  if constexpr (OW > 0) {
    for (int64_t i = 0; i < OW; ++i)
      d[i] = i >= lo && i < hi ? src[i * sw] : T(0);
  } else {
    std::fill(d, d + lo, T(0));
    if (sw == 1)
      std::memcpy(d + lo, src + lo, size_t(hi - lo) * sizeof(T));
    else
      for (int64_t i = lo; i < hi; ++i)
        d[i] = src[i * sw];
    std::fill(d + hi, d + ow, T(0));
  }
}

template <int OW, typename T>
void im2colRows(const ConvGeom &g, const T *x, int64_t n0, int64_t nb, T *cols,
                int threads) {
  int64_t rows = g.c * g.nk(), L = g.l(), NL = nb * L;
  parallelFor(rows, threads, 8, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      int64_t c = r / g.nk(), pos = g.kpos[size_t(r % g.nk())];
      int64_t kh = pos / g.kw, kw = pos % g.kw;
      int64_t lo, hi;
      validRange(g.ow, g.sw, g.pw, kw * g.dw, g.w, lo, hi);
      T *dst = cols + r * NL;
      for (int64_t n = 0; n < nb; ++n) {
        const T *xp = x + ((n0 + n) * g.c + c) * g.h * g.w;
        for (int64_t oh = 0; oh < g.oh; ++oh) {
          T *d = dst + n * L + oh * g.ow;
          int64_t ih = oh * g.sh - g.ph + kh * g.dh;
          if (ih < 0 || ih >= g.h) {
            for (int64_t i = 0; i < (OW > 0 ? OW : g.ow); ++i)
              d[i] = T(0);
            continue;
          }
          im2colRow<OW>(d, xp + ih * g.w - g.pw + kw * g.dw, g.ow, g.sw, lo, hi);
        }
      }
    }
  });
}

/// cols[c*nk + j][(n-n0)*L + oh*OW + ow] = x[n,c,ih,iw] (0 outside), where
/// (kh, kw) is the j-th live kernel position (ConvGeom::kpos).
template <typename T>
void im2col(const ConvGeom &g, const T *x, int64_t n0, int64_t nb, T *cols,
            int threads) {
  switch (g.ow) {
  case 1: return im2colRows<1>(g, x, n0, nb, cols, threads);
  case 2: return im2colRows<2>(g, x, n0, nb, cols, threads);
  case 4: return im2colRows<4>(g, x, n0, nb, cols, threads);
  case 8: return im2colRows<8>(g, x, n0, nb, cols, threads);
  case 16: return im2colRows<16>(g, x, n0, nb, cols, threads);
  default: return im2colRows<0>(g, x, n0, nb, cols, threads);
  }
}

template <int OW, typename T>
void col2imPlanes(const ConvGeom &g, const T *cols, int64_t n0, int64_t nb, T *dx,
                  int threads) {
  int64_t L = g.l(), NL = nb * L, HW = g.h * g.w;
  const int64_t ow = OW > 0 ? OW : g.ow;
  parallelFor(nb * g.c, threads, 1, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      int64_t n = t / g.c, c = t % g.c;
      T *dp = dx + ((n0 + n) * g.c + c) * HW;
      for (int64_t i = 0; i < HW; ++i)
        dp[i] = T(0);
      for (int64_t j = 0; j < g.nk(); ++j) {
          int64_t kh = g.kpos[size_t(j)] / g.kw, kw = g.kpos[size_t(j)] % g.kw;
          const T *src = cols + (c * g.nk() + j) * NL + n * L;
          int64_t lo, hi;
          validRange(ow, g.sw, g.pw, kw * g.dw, g.w, lo, hi);
          for (int64_t oh = 0; oh < g.oh; ++oh) {
            int64_t ih = oh * g.sh - g.ph + kh * g.dh;
            if (ih < 0 || ih >= g.h)
              continue;
            T *d = dp + ih * g.w - g.pw + kw * g.dw;
            const T *s = src + oh * ow;
            for (int64_t o = lo; o < hi; ++o)
              d[o * g.sw] += s[o];
          }
        }
    }
  });
}

/// dx[n,c] = sum over (kh,kw) of cols scattered back (samples n0..n0+nb).
/// Small output widths get fixed-width loops, as in im2col.
template <typename T>
void col2im(const ConvGeom &g, const T *cols, int64_t n0, int64_t nb, T *dx,
            int threads) {
  switch (g.ow) {
  case 1: return col2imPlanes<1>(g, cols, n0, nb, dx, threads);
  case 2: return col2imPlanes<2>(g, cols, n0, nb, dx, threads);
  case 4: return col2imPlanes<4>(g, cols, n0, nb, dx, threads);
  case 8: return col2imPlanes<8>(g, cols, n0, nb, dx, threads);
  default: return col2imPlanes<0>(g, cols, n0, nb, dx, threads);
  }
}

int64_t chunkSize(const ConvGeom &g) {
  int64_t per = std::max<int64_t>(1, g.c * g.nk() * g.l());
  int64_t nb = std::max<int64_t>(1, kColsBudget / per);
  nb = std::min(nb, std::max<int64_t>(g.n, 1));
  // Keep NB*L within BLAS's 32-bit dimension.
  nb = std::min(nb, std::max<int64_t>(1, kMaxBlasDim / std::max<int64_t>(g.l(), 1)));
  return nb;
}

//===----------------------------------------------------------------------===//
// Depthwise (one input channel per group): direct loops.
//===----------------------------------------------------------------------===//

template <typename T>
void dwForward(const ConvGeom &g, const T *x, const T *w, const T *b, T *y,
               int threads) {
  int64_t mult = g.o / g.c, L = g.l(), HW = g.h * g.w;
  parallelFor(g.n * g.o, threads, 1, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      int64_t n = t / g.o, o = t % g.o, c = o / mult;
      const T *xp = x + (n * g.c + c) * HW;
      T *yp = y + t * L;
      std::fill(yp, yp + L, b ? b[o] : T(0));
      for (int64_t kh = 0; kh < g.kh; ++kh)
        for (int64_t kw = 0; kw < g.kw; ++kw) {
          T wv = w[(o * g.kh + kh) * g.kw + kw];
          int64_t lo, hi;
          validRange(g.ow, g.sw, g.pw, kw * g.dw, g.w, lo, hi);
          for (int64_t oh = 0; oh < g.oh; ++oh) {
            int64_t ih = oh * g.sh - g.ph + kh * g.dh;
            if (ih < 0 || ih >= g.h)
              continue;
            const T *src = xp + ih * g.w - g.pw + kw * g.dw;
            T *d = yp + oh * g.ow;
            if (g.sw == 1)
              for (int64_t ow = lo; ow < hi; ++ow)
                d[ow] += wv * src[ow];
            else
              for (int64_t ow = lo; ow < hi; ++ow)
                d[ow] += wv * src[ow * g.sw];
          }
        }
    }
  });
}

template <typename T>
void dwBackwardInput(const ConvGeom &g, const T *dy, const T *w, T *dx,
                     int threads) {
  int64_t mult = g.o / g.c, L = g.l(), HW = g.h * g.w;
  parallelFor(g.n * g.c, threads, 1, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      int64_t n = t / g.c, c = t % g.c;
      T *dp = dx + t * HW;
      std::fill(dp, dp + HW, T(0));
      for (int64_t o = c * mult; o < (c + 1) * mult; ++o) {
        const T *gp = dy + (n * g.o + o) * L;
        for (int64_t kh = 0; kh < g.kh; ++kh)
          for (int64_t kw = 0; kw < g.kw; ++kw) {
            T wv = w[(o * g.kh + kh) * g.kw + kw];
            int64_t lo, hi;
            validRange(g.ow, g.sw, g.pw, kw * g.dw, g.w, lo, hi);
            for (int64_t oh = 0; oh < g.oh; ++oh) {
              int64_t ih = oh * g.sh - g.ph + kh * g.dh;
              if (ih < 0 || ih >= g.h)
                continue;
              T *d = dp + ih * g.w - g.pw + kw * g.dw;
              const T *s = gp + oh * g.ow;
              for (int64_t ow = lo; ow < hi; ++ow)
                d[ow * g.sw] += wv * s[ow];
            }
          }
      }
    }
  });
}

template <typename T>
void dwBackwardWeight(const ConvGeom &g, const T *dy, const T *x, T *dw,
                      int threads) {
  int64_t mult = g.o / g.c, L = g.l(), HW = g.h * g.w;
  parallelFor(g.o, threads, 1, [&](int64_t o0, int64_t o1) {
    // Per-column partial sums (vectorizable, fixed order), reduced at the end.
    std::vector<double> row(size_t(std::max<int64_t>(g.ow, 1)));
    for (int64_t o = o0; o < o1; ++o) {
      int64_t c = o / mult;
      for (int64_t kh = 0; kh < g.kh; ++kh)
        for (int64_t kw = 0; kw < g.kw; ++kw) {
          std::fill(row.begin(), row.end(), 0.0);
          int64_t lo, hi;
          validRange(g.ow, g.sw, g.pw, kw * g.dw, g.w, lo, hi);
          for (int64_t n = 0; n < g.n; ++n) {
            const T *gp = dy + (n * g.o + o) * L;
            const T *xp = x + (n * g.c + c) * HW;
            for (int64_t oh = 0; oh < g.oh; ++oh) {
              int64_t ih = oh * g.sh - g.ph + kh * g.dh;
              if (ih < 0 || ih >= g.h)
                continue;
              const T *src = xp + ih * g.w - g.pw + kw * g.dw;
              const T *s = gp + oh * g.ow;
              for (int64_t ow = lo; ow < hi; ++ow)
                row[size_t(ow)] += double(s[ow]) * double(src[ow * g.sw]);
            }
          }
          double acc = 0;
          for (double v : row)
            acc += v;
          dw[(o * g.kh + kh) * g.kw + kw] = T(acc);
        }
    }
  });
}

//===----------------------------------------------------------------------===//
// General grouped convolution: im2col + GEMM.
//===----------------------------------------------------------------------===//

/// The weight's live kernel positions as [O, Cg*nk] (scratch slot 2), or the
/// weight itself when every position is live.
template <typename T> const T *liveWeights(const ConvGeom &g, const T *w) {
  if (g.allLive())
    return w;
  T *wc = scratchPtr<T>(2, g.o * g.cg() * g.nk());
  for (int64_t oc = 0; oc < g.o * g.cg(); ++oc)
    for (int64_t j = 0; j < g.nk(); ++j)
      wc[oc * g.nk() + j] = w[oc * g.kk() + g.kpos[size_t(j)]];
  return wc;
}

template <typename T>
void gemmForward(const ConvGeom &g, const T *x, const T *w, const T *b, T *y,
                 int threads) {
  int64_t L = g.l(), CgKK = g.cg() * g.nk(), Og = g.og();
  w = liveWeights(g, w);
  int64_t chunk = chunkSize(g);
  for (int64_t n0 = 0; n0 < g.n; n0 += chunk) {
    int64_t nb = std::min(chunk, g.n - n0), NL = nb * L;
    T *cols = scratchPtr<T>(0, g.c * g.nk() * NL);
    T *tmp = scratchPtr<T>(1, g.o * NL);
    im2col(g, x, n0, nb, cols, threads);
    for (int64_t gi = 0; gi < g.g; ++gi)
      gemmParallel(false, false, Og, NL, CgKK, T(1), w + gi * Og * CgKK, CgKK,
                   cols + gi * CgKK * NL, NL, T(0), tmp + gi * Og * NL, NL, threads);
    parallelFor(nb * g.o, threads, 16, [&](int64_t t0, int64_t t1) {
      for (int64_t t = t0; t < t1; ++t) {
        int64_t n = t / g.o, o = t % g.o;
        const T *s = tmp + o * NL + n * L;
        T *d = y + ((n0 + n) * g.o + o) * L;
        T bv = b ? b[o] : T(0);
        for (int64_t i = 0; i < L; ++i)
          d[i] = s[i] + bv;
      }
    });
  }
}

/// dyT[o][(n-n0)*L + l] = dy[n,o,l].
template <typename T>
void gatherDy(const ConvGeom &g, const T *dy, int64_t n0, int64_t nb, T *dyT,
              int threads) {
  int64_t L = g.l(), NL = nb * L;
  parallelFor(nb * g.o, threads, 16, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      int64_t n = t / g.o, o = t % g.o;
      const T *src = dy + ((n0 + n) * g.o + o) * L;
      T *dst = dyT + o * NL + n * L;
      if (L < 16) // a call per few elements costs more than the copy
        for (int64_t i = 0; i < L; ++i)
          dst[i] = src[i];
      else
        std::memcpy(dst, src, size_t(L) * sizeof(T));
    }
  });
}

template <typename T>
void gemmBackwardInput(const ConvGeom &g, const T *dy, const T *w, T *dx,
                       int threads) {
  int64_t L = g.l(), CgKK = g.cg() * g.nk(), Og = g.og();
  w = liveWeights(g, w);
  int64_t chunk = chunkSize(g);
  for (int64_t n0 = 0; n0 < g.n; n0 += chunk) {
    int64_t nb = std::min(chunk, g.n - n0), NL = nb * L;
    T *cols = scratchPtr<T>(0, g.c * g.nk() * NL);
    T *dyT = scratchPtr<T>(1, g.o * NL);
    gatherDy(g, dy, n0, nb, dyT, threads);
    for (int64_t gi = 0; gi < g.g; ++gi)
      gemmParallel(true, false, CgKK, NL, Og, T(1), w + gi * Og * CgKK, CgKK,
                   dyT + gi * Og * NL, NL, T(0), cols + gi * CgKK * NL, NL, threads);
    col2im(g, cols, n0, nb, dx, threads);
  }
}

template <typename T>
void gemmBackwardWeight(const ConvGeom &g, const T *dy, const T *x, T *dwOut,
                        int threads) {
  int64_t L = g.l(), CgKK = g.cg() * g.nk(), Og = g.og();
  // Dead kernel positions only ever multiply padding: their gradient is 0.
  T *dw = g.allLive() ? dwOut : scratchPtr<T>(2, g.o * CgKK);
  int64_t chunk = chunkSize(g);
  if (g.n == 0 || L == 0) {
    std::fill(dwOut, dwOut + g.o * g.cg() * g.kk(), T(0));
    return;
  }
  for (int64_t n0 = 0; n0 < g.n; n0 += chunk) {
    int64_t nb = std::min(chunk, g.n - n0), NL = nb * L;
    T *cols = scratchPtr<T>(0, g.c * g.nk() * NL);
    T *dyT = scratchPtr<T>(1, g.o * NL);
    im2col(g, x, n0, nb, cols, threads);
    gatherDy(g, dy, n0, nb, dyT, threads);
    for (int64_t gi = 0; gi < g.g; ++gi)
      gemmParallel(false, true, Og, CgKK, NL, T(1), dyT + gi * Og * NL, NL,
                   cols + gi * CgKK * NL, NL, T(n0 == 0 ? 0 : 1),
                   dw + gi * Og * CgKK, CgKK, threads);
  }
  if (!g.allLive()) {
    std::fill(dwOut, dwOut + g.o * g.cg() * g.kk(), T(0));
    for (int64_t oc = 0; oc < g.o * g.cg(); ++oc)
      for (int64_t j = 0; j < g.nk(); ++j)
        dwOut[oc * g.kk() + g.kpos[size_t(j)]] = dw[oc * g.nk() + j];
  }
}

//===----------------------------------------------------------------------===//
// Kernel entry points.
//===----------------------------------------------------------------------===//

std::string checkFloat3(const char *op, const TensorView &a, const char *an,
                        const TensorView &b, const char *bn,
                        const TensorView &c, const char *cn, DType &dt) {
  dt = a.dtype;
  if (!isFloat(dt))
    return cat(op, ": unsupported dtype ", dtypeName(dt));
  if (auto e = checkTensor(op, an, a, dt); !e.empty())
    return e;
  if (auto e = checkTensor(op, bn, b, dt); !e.empty())
    return e;
  return checkTensor(op, cn, c, dt);
}

template <typename T>
void runForward(const ConvGeom &g, const KernelArgs &a) {
  const T *x = a.inputs[0].as<T>(), *w = a.inputs[1].as<T>();
  const T *b = present(a.inputs, 2) ? a.inputs[2].as<T>() : nullptr;
  T *y = a.outputs[0].as<T>();
  if (g.n == 0 || g.o == 0)
    return;
  if (g.cg() == 1 && g.g > 1)
    dwForward(g, x, w, b, y, a.numThreads);
  else
    gemmForward(g, x, w, b, y, a.numThreads);
}

std::string conv2dKernel(const KernelArgs &a) {
  const char *op = "offload.conv2d";
  DType dt;
  const TensorView &x = a.inputs[0], &w = a.inputs[1], &y = a.outputs[0];
  if (auto e = checkFloat3(op, x, "x", w, "w", y, "y", dt); !e.empty())
    return e;
  ConvGeom g;
  if (auto e = makeGeom(op, a.attrs, x.shape, w.shape, y, "y", g);
      !e.empty())
    return e;
  if (present(a.inputs, 2)) {
    if (auto e = checkTensor(op, "b", a.inputs[2], dt); !e.empty())
      return e;
    if (auto e = checkShape(op, "b", a.inputs[2], {g.o}); !e.empty())
      return e;
  }
  if (dt == DType::F32)
    runForward<float>(g, a);
  else
    runForward<double>(g, a);
  return "";
}

template <typename T>
void runBackwardInput(const ConvGeom &g, const KernelArgs &a) {
  const T *dy = a.inputs[0].as<T>(), *w = a.inputs[1].as<T>();
  T *dx = a.outputs[0].as<T>();
  if (g.n == 0)
    return;
  if (g.o == 0) {
    std::fill(dx, dx + g.n * g.c * g.h * g.w, T(0));
    return;
  }
  if (g.cg() == 1 && g.g > 1)
    dwBackwardInput(g, dy, w, dx, a.numThreads);
  else
    gemmBackwardInput(g, dy, w, dx, a.numThreads);
}

std::string conv2dBackwardInputKernel(const KernelArgs &a) {
  const char *op = "offload.conv2d_backward_input";
  DType dt;
  const TensorView &dy = a.inputs[0], &w = a.inputs[1], &dx = a.outputs[0];
  if (auto e = checkFloat3(op, dy, "dy", w, "w", dx, "dx", dt); !e.empty())
    return e;
  ConvGeom g;
  if (auto e = makeGeom(op, a.attrs, dx.shape, w.shape, dy, "dy", g);
      !e.empty())
    return e;
  if (dt == DType::F32)
    runBackwardInput<float>(g, a);
  else
    runBackwardInput<double>(g, a);
  return "";
}

template <typename T>
void runBackwardWeight(const ConvGeom &g, const KernelArgs &a) {
  const T *dy = a.inputs[0].as<T>(), *x = a.inputs[1].as<T>();
  T *dw = a.outputs[0].as<T>();
  if (g.o == 0)
    return;
  if (g.cg() == 1 && g.g > 1)
    dwBackwardWeight(g, dy, x, dw, a.numThreads);
  else
    gemmBackwardWeight(g, dy, x, dw, a.numThreads);
}

std::string conv2dBackwardWeightKernel(const KernelArgs &a) {
  const char *op = "offload.conv2d_backward_weight";
  DType dt;
  const TensorView &dy = a.inputs[0], &x = a.inputs[1], &dw = a.outputs[0];
  if (auto e = checkFloat3(op, dy, "dy", x, "x", dw, "dw", dt); !e.empty())
    return e;
  ConvGeom g;
  if (auto e = makeGeom(op, a.attrs, x.shape, dw.shape, dy, "dy", g);
      !e.empty())
    return e;
  if (dt == DType::F32)
    runBackwardWeight<float>(g, a);
  else
    runBackwardWeight<double>(g, a);
  return "";
}

} // namespace

void offload::rt::kernels::registerConvKernels(KernelRegistry &r) {
  addEmulated<conv2dKernel>(r, "offload.conv2d", Absent::Allowed);
  addEmulated<conv2dBackwardInputKernel>(r, "offload.conv2d_backward_input", Absent::Allowed);
  addEmulated<conv2dBackwardWeightKernel>(r, "offload.conv2d_backward_weight", Absent::Allowed);
}
