//===- KernelTestUtil.h - Helpers for the host kernel tests -----*- C++ -*-===//
//
// Part of offload. Runs a registered host kernel on LibTorch tensors and
// compares results with an ATen reference.
//
//===----------------------------------------------------------------------===//
#ifndef OFFLOAD_UNITTESTS_KERNELS_KERNELTESTUTIL_H
#define OFFLOAD_UNITTESTS_KERNELS_KERNELTESTUTIL_H

#include "offload/Runtime/Kernel.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <string>
#include <vector>

namespace atest {
using offload::rt::AttrMap;
using offload::rt::AttrValue;
using offload::rt::DType;
using offload::rt::KernelArgs;
using offload::rt::KernelRegistry;
using offload::rt::TensorView;

inline DType toDType(at::ScalarType t) {
  switch (t) {
  case at::kFloat: return DType::F32;
  case at::kDouble: return DType::F64;
  case at::kLong: return DType::I64;
  case at::kInt: return DType::I32;
  case at::kBool: return DType::Bool;
  case at::kBFloat16: return DType::BF16;
  case at::kHalf: return DType::F16;
  default: ADD_FAILURE() << "unsupported dtype"; return DType::F32;
  }
}

/// View of a contiguous tensor (the tensor keeps owning the memory).
inline TensorView view(const at::Tensor &t) {
  EXPECT_TRUE(t.is_contiguous());
  TensorView v;
  v.data = t.data_ptr();
  v.dtype = toDType(t.scalar_type());
  v.shape = t.sizes().vec();
  return v;
}

/// Attribute builder.
struct Attrs {
  AttrMap m;
  Attrs &i(const std::string &n, std::vector<int64_t> v) {
    AttrValue a;
    a.kind = AttrValue::Kind::Ints;
    a.ints = std::move(v);
    m.set(n, a);
    return *this;
  }
  Attrs &f(const std::string &n, double v) {
    AttrValue a;
    a.kind = AttrValue::Kind::Floats;
    a.floats = {v};
    m.set(n, a);
    return *this;
  }
  Attrs &s(const std::string &n, std::string v) {
    AttrValue a;
    a.kind = AttrValue::Kind::String;
    a.str = std::move(v);
    m.set(n, a);
    return *this;
  }
};

/// Runs kernel `op` ("offload.<op>", or just "<op>") with `ins` and
/// pre-allocated `outs`; an undefined tensor is an absent operand or an
/// output the kernel should skip. Returns the kernel's message ("" on success) or "no kernel".
inline std::string runKernel(const std::string &op, const std::vector<at::Tensor> &ins,
                             const std::vector<at::Tensor> &outs, const AttrMap &attrs,
                             int threads) {
  offload::rt::registerAllHostKernels();
  std::string name = op.rfind("offload.", 0) == 0 ? op : "offload." + op;
  auto fn = KernelRegistry::host().lookup(name);
  if (!fn) return "no kernel for " + name;
  std::vector<TensorView> in, out;
  for (auto &t : ins) {
    if (t.defined()) in.push_back(view(t));
    else in.push_back(TensorView());
  }
  for (auto &t : outs) {
    if (t.defined()) out.push_back(view(t));
    else out.push_back(TensorView());
  }
  KernelArgs args{in, out, attrs, threads};
  return fn(args);
}

/// Attributes from the builder, one thread by default.
inline std::string run(const std::string &op, const std::vector<at::Tensor> &ins,
                       const std::vector<at::Tensor> &outs,
                       const Attrs &attrs = Attrs(), int threads = 1) {
  return runKernel(op, ins, outs, attrs.m, threads);
}

/// A plain AttrMap, three threads by default (exercises the kernels'
/// parallel paths).
inline std::string run(const std::string &op, const std::vector<at::Tensor> &ins,
                       const std::vector<at::Tensor> &outs, const AttrMap &attrs,
                       int threads = 3) {
  return runKernel(op, ins, outs, attrs, threads);
}

/// max|got - ref| / max(max|ref|, 1e-30): the error measure of the
/// linear-algebra, convolution, pooling and normalization tests (reordered sums make elementwise relative error meaningless).
inline double relErr(const at::Tensor &got, const at::Tensor &ref) {
  if (ref.numel() == 0)
    return 0;
  double scale = ref.abs().max().item<double>();
  double err = (got.to(at::kDouble) - ref.to(at::kDouble)).abs().max().item<double>();
  return err / std::max(scale, 1e-30);
}

#define EXPECT_CLOSE(got, ref, tol)                                            \
  do {                                                                         \
    ASSERT_EQ((got).sizes(), (ref).sizes());                                   \
    EXPECT_LE(atest::relErr((got), (ref)), (tol));                             \
  } while (0)

/// Expects |got - ref| <= atol + rtol * max(|ref|, |scale|) everywhere (NaNs
/// must match). `scale` (optional, ref's shape) is the magnitude of the
/// operands the element was computed from: a short chain of multiply-adds
/// (an optimizer update, p - lr * d) rounds at the operands' magnitude, so
/// where it cancels (|ref| much smaller than |p|) an evaluation with or
/// without FMA, or in another order, differs by a few ulps of the operands,
/// not of the result.
inline void expectClose(const at::Tensor &got, const at::Tensor &ref,
                        double rtol, double atol, const std::string &what,
                        const at::Tensor &scale = at::Tensor()) {
  ASSERT_EQ(got.sizes(), ref.sizes()) << what;
  ASSERT_EQ(got.scalar_type(), ref.scalar_type()) << what;
  at::Tensor g = got.to(at::kDouble), r = ref.to(at::kDouble);
  at::Tensor nanG = g.isnan(), nanR = r.isnan();
  EXPECT_TRUE(at::equal(nanG, nanR)) << what << ": NaN positions differ";
  at::Tensor err = (g - r).abs().masked_fill(nanR, 0);
  at::Tensor mag = r.abs();
  if (scale.defined())
    mag = at::maximum(mag, scale.to(at::kDouble).abs());
  at::Tensor lim = mag.masked_fill(nanR, 0) * rtol + atol;
  at::Tensor bad = err > lim;
  int64_t nBad = bad.sum().item<int64_t>();
  if (nBad) {
    at::Tensor idx = bad.reshape(-1).nonzero().reshape(-1);
    for (int64_t k = 0; k < std::min<int64_t>(idx.numel(), 3); ++k) {
      int64_t i = idx[k].item<int64_t>();
      ADD_FAILURE() << what << ": element " << i << " got "
                    << g.reshape(-1)[i].item<double>() << " expected "
                    << r.reshape(-1)[i].item<double>();
    }
  }
  EXPECT_EQ(nBad, 0) << what << ": " << nBad << " of " << g.numel()
                     << " elements out of tolerance; max abs err "
                     << (err.numel() ? err.max().item<double>() : 0.0)
                     << " (rtol " << rtol << ", atol " << atol << ")";
}

/// Default tolerances: f32 1e-5 relative (+1e-6 absolute for values near
/// zero), f64 1e-12 relative (+1e-13 absolute).
inline void expectNear(const at::Tensor &got, const at::Tensor &ref,
                       const std::string &what) {
  if (ref.scalar_type() == at::kDouble)
    expectClose(got, ref, 1e-12, 1e-13, what);
  else
    expectClose(got, ref, 1e-5, 1e-6, what);
}

inline const std::vector<at::ScalarType> &floatTypes() {
  static const std::vector<at::ScalarType> t = {at::kFloat, at::kDouble};
  return t;
}

inline std::string tname(at::ScalarType t) {
  return t == at::kFloat ? "f32" : "f64";
}

} // namespace atest

#endif
