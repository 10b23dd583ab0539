//===- Geometry.h - Window and slice geometry shared by both backends -----===//
//
// Part of offload. The device-independent geometry of the window and slice
// ops, computed on the host before any kernel is launched: reading the
// window attributes (1 or 2 values), checking them, output sizes of a
// convolution and of a pooling window, the plane count of a pooled tensor,
// and ATen's slice normalization. The host kernels (Conv.cpp, Pool.cpp,
// Shape.cpp) and the CUDA kernels (CudaDnn.cu, CudaNormPool.cu, CudaData.cu)
// both use these, so a shape the host refuses the GPU refuses with the same
// words, and a fix lands once. Plain C++17 (no exceptions, no device code),
// so nvcc compiles it in the .cu files as host code. Unit tests:
// unittests/Runtime/GeometryTest.cpp.
//
//===----------------------------------------------------------------------===//
#ifndef OFFLOAD_LIB_RUNTIME_KERNELS_GEOMETRY_H
#define OFFLOAD_LIB_RUNTIME_KERNELS_GEOMETRY_H

#include "ElementMath.h"
#include "offload/Runtime/Kernel.h"

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

namespace offload {
namespace rt {
namespace geom {

/// "[2,3,4]".
inline std::string shapeText(const std::vector<int64_t> &s) {
  std::string r = "[";
  for (size_t i = 0; i < s.size(); ++i)
    r += (i ? "," : "") + std::to_string(s[i]);
  return r + "]";
}

/// Reads a window attribute of 1 or 2 values (one value is used for both);
/// absent: (dfltA, dfltB).
inline std::string get2(const char *op, const AttrMap &attrs, const char *name,
                        int64_t dfltA, int64_t dfltB, int64_t &a, int64_t &b) {
  std::vector<int64_t> v = attrs.getInts(name);
  if (v.empty()) {
    a = dfltA;
    b = dfltB;
  } else if (v.size() == 1) {
    a = b = v[0];
  } else if (v.size() == 2) {
    a = v[0];
    b = v[1];
  } else {
    return std::string(op) + ": attribute " + name +
           " must have 1 or 2 values, got " + std::to_string(v.size());
  }
  return "";
}

/// A 2-d convolution: input [N,C,H,W], weight [O,C/G,KH,KW], output
/// [N,O,OH,OW].
struct ConvWindow {
  int64_t n = 0, c = 0, h = 0, w = 0; // input
  int64_t o = 0, kh = 0, kw = 0;      // output channels, kernel
  int64_t oh = 0, ow = 0;             // output spatial
  int64_t sh = 1, sw = 1, ph = 0, pw = 0, dh = 1, dw = 1, g = 1;
  int64_t cg() const { return c / g; }
  int64_t og() const { return o / g; }
  int64_t kk() const { return kh * kw; }
  int64_t l() const { return oh * ow; }
};

/// Fills `g` from the input shape `xs`, the weight shape `ws` and the
/// attributes (stride, padding, dilation, groups), checks them against each
/// other and computes the output size (ATen's conv output formula).
inline std::string convWindow(const char *op, const AttrMap &attrs,
                              const std::vector<int64_t> &xs,
                              const std::vector<int64_t> &ws, ConvWindow &g) {
  std::string o(op);
  if (xs.size() != 4)
    return o + ": input must be [N,C,H,W], got " + shapeText(xs);
  if (ws.size() != 4)
    return o + ": weight must be [O,C/groups,KH,KW], got " + shapeText(ws);
  g.n = xs[0];
  g.c = xs[1];
  g.h = xs[2];
  g.w = xs[3];
  g.o = ws[0];
  g.kh = ws[2];
  g.kw = ws[3];
  if (auto e = get2(op, attrs, "stride", 1, 1, g.sh, g.sw); !e.empty())
    return e;
  if (auto e = get2(op, attrs, "padding", 0, 0, g.ph, g.pw); !e.empty())
    return e;
  if (auto e = get2(op, attrs, "dilation", 1, 1, g.dh, g.dw); !e.empty())
    return e;
  g.g = attrs.getInt("groups", 1);
  if (g.sh < 1 || g.sw < 1 || g.dh < 1 || g.dw < 1 || g.ph < 0 || g.pw < 0)
    return o + ": stride and dilation must be >= 1 and padding >= 0";
  for (int64_t v : {g.sh, g.sw, g.ph, g.pw, g.dh, g.dw})
    if (v > em::kMaxWindowAttr)
      return o + ": stride, padding or dilation value " + std::to_string(v) +
             " exceeds the supported maximum " +
             std::to_string(em::kMaxWindowAttr);
  if (g.g < 1 || g.c % g.g != 0 || g.o % g.g != 0)
    return o + ": groups=" + std::to_string(g.g) +
           " must divide input channels " + std::to_string(g.c) +
           " and output channels " + std::to_string(g.o);
  if (ws[1] != g.c / g.g)
    return o + ": weight " + shapeText(ws) + " expects " +
           std::to_string(ws[1] * g.g) + " input channels with groups=" +
           std::to_string(g.g) + ", input has " + std::to_string(g.c);
  if (g.kh < 1 || g.kw < 1 || g.c < 1)
    return o + ": empty kernel or channel dimension in weight " + shapeText(ws);
  int64_t nh = g.h + 2 * g.ph - g.dh * (g.kh - 1) - 1;
  int64_t nw = g.w + 2 * g.pw - g.dw * (g.kw - 1) - 1;
  if (nh < 0 || nw < 0)
    return o + ": kernel " + std::to_string(g.kh) + "x" + std::to_string(g.kw) +
           " (dilation " + std::to_string(g.dh) + "," + std::to_string(g.dw) +
           ") is larger than padded input " + std::to_string(g.h + 2 * g.ph) +
           "x" + std::to_string(g.w + 2 * g.pw);
  g.oh = nh / g.sh + 1;
  g.ow = nw / g.sw + 1;
  return "";
}

/// The leading dimensions of a [N,C,H,W] or [C,H,W] tensor, as one count of
/// planes.
inline std::string planesOf(const char *op, const char *name,
                            const std::vector<int64_t> &shape,
                            int64_t &planes) {
  if (shape.size() != 3 && shape.size() != 4)
    return std::string(op) + ": " + name +
           " must be [N,C,H,W] or [C,H,W], got " + shapeText(shape);
  planes = 1;
  for (size_t i = 0; i + 2 < shape.size(); ++i)
    planes *= shape[i];
  return "";
}

/// Reads kernel_size, stride (default: the kernel size), padding, dilation
/// (when `withDilation`), ceil_mode and count_include_pad, checks them
/// (ATen's rules: padding at most half the kernel) and computes the output
/// size of an input plane g.h x g.w, which the caller sets.
inline std::string poolWindow(const char *op, const AttrMap &attrs,
                              bool withDilation, em::PoolGeom &g) {
  std::string o(op);
  if (!attrs.has("kernel_size"))
    return o + ": missing attribute kernel_size";
  if (auto e = get2(op, attrs, "kernel_size", 1, 1, g.kh, g.kw); !e.empty())
    return e;
  if (auto e = get2(op, attrs, "stride", g.kh, g.kw, g.sh, g.sw); !e.empty())
    return e;
  if (auto e = get2(op, attrs, "padding", 0, 0, g.ph, g.pw); !e.empty())
    return e;
  if (withDilation)
    if (auto e = get2(op, attrs, "dilation", 1, 1, g.dh, g.dw); !e.empty())
      return e;
  g.ceil = attrs.getInt("ceil_mode", 0) != 0;
  g.countPad = attrs.getInt("count_include_pad", 1) != 0;
  if (g.kh < 1 || g.kw < 1 || g.sh < 1 || g.sw < 1 || g.dh < 1 || g.dw < 1)
    return o + ": kernel_size, stride and dilation must be >= 1";
  for (int64_t v : {g.kh, g.kw, g.sh, g.sw, g.ph, g.pw, g.dh, g.dw})
    if (v > em::kMaxWindowAttr)
      return o + ": window attribute value " + std::to_string(v) +
             " (kernel_size, stride, padding or dilation) exceeds the "
             "supported maximum " + std::to_string(em::kMaxWindowAttr);
  if (g.ph < 0 || g.pw < 0 || g.ph > g.kh / 2 || g.pw > g.kw / 2)
    return o + ": padding (" + std::to_string(g.ph) + "," +
           std::to_string(g.pw) +
           ") must be >= 0 and at most half the kernel size (" +
           std::to_string(g.kh) + "," + std::to_string(g.kw) + ")";
  g.oh = em::poolOutSize(g.h, g.kh, g.ph, g.sh, g.dh, g.ceil);
  g.ow = em::poolOutSize(g.w, g.kw, g.pw, g.sw, g.dw, g.ceil);
  if (g.oh < 1 || g.ow < 1)
    return o + ": input plane " + std::to_string(g.h) + "x" +
           std::to_string(g.w) + " is too small for the pooling window (output " +
           std::to_string(g.oh) + "x" + std::to_string(g.ow) + ")";
  return "";
}

/// A normalized slice (ATen `slice`: negative start/end wrap, then clamp to
/// [0, size]; step >= 1): `len` elements from `start` every `step` along
/// `dim`.
struct SliceSpec {
  int64_t dim = 0, start = 0, step = 1, len = 0;
};

/// Normalizes the dim/start/end/step attributes against the full shape.
inline std::string sliceSpec(const char *op, const AttrMap &attrs,
                             const std::vector<int64_t> &full, SliceSpec &s) {
  int64_t rank = int64_t(full.size());
  s.dim = attrs.getInt("dim", 0);
  if (s.dim < 0)
    s.dim += rank;
  if (s.dim < 0 || s.dim >= rank)
    return std::string(op) + ": dim out of range for rank " +
           std::to_string(rank);
  int64_t size = full[size_t(s.dim)];
  int64_t start = attrs.getInt("start", 0);
  int64_t end = attrs.getInt("end", INT64_MAX);
  s.step = attrs.getInt("step", 1);
  if (s.step < 1)
    return std::string(op) + ": step must be >= 1";
  if (start < 0)
    start += size;
  if (end < 0)
    end += size;
  start = std::min(std::max<int64_t>(start, 0), size);
  end = std::min(std::max<int64_t>(end, 0), size);
  if (end < start)
    end = start;
  s.start = start;
  s.len = (end - start + s.step - 1) / s.step;
  return "";
}

/// Checks the inputs of a concatenation against its result: dim (negative
/// wraps) in range, one dtype, one rank, equal sizes off `dim`, sizes along
/// `dim` summing to the result's. Sets `dim` to the normalized dimension.
inline std::string catGeometry(const char *op, const std::vector<TensorView> &xs,
                               const TensorView &y, int64_t &dim) {
  std::string o(op);
  int64_t rank = y.rank();
  if (dim < 0)
    dim += rank;
  if (dim < 0 || dim >= rank)
    return o + ": dim out of range for rank " + std::to_string(rank);
  int64_t total = 0;
  for (size_t k = 0; k < xs.size(); ++k) {
    const TensorView &x = xs[k];
    if (x.dtype != y.dtype)
      return o + ": input " + std::to_string(k) + " is " + dtypeName(x.dtype) +
             ", result is " + dtypeName(y.dtype);
    if (x.rank() != rank)
      return o + ": input " + std::to_string(k) + " has rank " +
             std::to_string(x.rank()) + ", result has rank " + std::to_string(rank);
    for (int64_t d = 0; d < rank; ++d)
      if (d != dim && x.shape[size_t(d)] != y.shape[size_t(d)])
        return o + ": input " + std::to_string(k) + " shape " + shapeText(x.shape) +
               " does not match result " + shapeText(y.shape);
    total += x.shape[size_t(dim)];
  }
  if (total != y.shape[size_t(dim)])
    return o + ": inputs sum to " + std::to_string(total) + " along dim " +
           std::to_string(dim) + ", result has " + std::to_string(y.shape[size_t(dim)]);
  return "";
}

/// Strides (in elements) of `in` viewed as broadcast to `out` (numpy rules:
/// right-aligned; size-1 or missing dimensions get stride 0), written to
/// strides[0, out.size()). False when `in` does not broadcast to `out`.
inline bool broadcastStrides(const std::vector<int64_t> &in,
                             const std::vector<int64_t> &out, int64_t *strides) {
  if (in.size() > out.size())
    return false;
  size_t off = out.size() - in.size();
  for (size_t d = 0; d < off; ++d)
    strides[d] = 0;
  int64_t s = 1;
  for (size_t i = in.size(); i-- > 0;) {
    if (in[i] != out[i + off] && in[i] != 1)
      return false;
    strides[i + off] = in[i] == 1 ? 0 : s;
    s *= in[i];
  }
  return true;
}

/// Checks `perm` (negative entries wrap) as a permutation of x's dimensions
/// and y's shape as x's permuted, and gives the strides (in elements) of x
/// in y's dimension order: y[i...] = x[sum(i_d * strides[d])].
inline std::string permutation(const char *op, std::vector<int64_t> perm,
                               const std::vector<int64_t> &x,
                               const std::vector<int64_t> &y,
                               std::vector<int64_t> &strides) {
  int64_t rank = int64_t(x.size());
  if (int64_t(perm.size()) != rank)
    return std::string(op) + ": perm has " + std::to_string(perm.size()) +
           " entries for rank " + std::to_string(rank);
  std::vector<char> seen(size_t(rank), 0);
  std::vector<int64_t> expect(static_cast<size_t>(rank));
  for (int64_t i = 0; i < rank; ++i) {
    int64_t p = perm[size_t(i)];
    if (p < 0)
      p += rank;
    if (p < 0 || p >= rank || seen[size_t(p)])
      return std::string(op) + ": perm is not a permutation";
    seen[size_t(p)] = 1;
    perm[size_t(i)] = p;
    expect[size_t(i)] = x[size_t(p)];
  }
  if (y != expect)
    return std::string(op) + ": y has shape " + shapeText(y) + ", expected " +
           shapeText(expect);
  std::vector<int64_t> xs(static_cast<size_t>(rank));
  int64_t s = 1;
  for (int64_t d = rank - 1; d >= 0; --d) {
    xs[size_t(d)] = s;
    s *= x[size_t(d)];
  }
  strides.assign(size_t(rank), 0);
  for (int64_t i = 0; i < rank; ++i)
    strides[size_t(i)] = xs[size_t(perm[size_t(i)])];
  return "";
}

} // namespace geom
} // namespace rt
} // namespace offload

#endif // OFFLOAD_LIB_RUNTIME_KERNELS_GEOMETRY_H
