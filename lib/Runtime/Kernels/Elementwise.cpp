//===- Elementwise.cpp - Elementwise host kernels --------------------------===//
//
// Part of offload. Activations and their backward ops, unary math, binary
// arithmetic with numpy broadcasting, scalar ops, masked_fill, where, the
// boolean ops on masks (logical_not/and/or), comparisons (compare, any
// dtype to bool), fill and copy (with dtype cast). Semantics: docs/op-semantics.md ("Elementwise"),
// each matching the PyTorch 1.13 ATen function named there. Float ops take
// f32 or f64; every operand of one op has the same float dtype. Each output
// element depends only on the same-index inputs, so results do not depend on
// the thread count, and outputs may alias same-shaped inputs exactly.
//
//===----------------------------------------------------------------------===//

#include "ElementMath.h"
#include "KernelSupport.h"

#include <cmath>
#include <limits>

namespace offload {
namespace rt {
namespace kernels {
namespace {

/// y = f(x) for one float input and one output of the same dtype and shape.
template <typename F>
std::string unaryFloat(const KernelArgs &args, const char *op, F f) {
  const TensorView &x = args.inputs[0], &y = args.outputs[0];
  if (auto e = checkFloat(x, op, "x"); !e.empty()) return e;
  if (auto e = checkSame(x, y, op, "x", "y"); !e.empty()) return e;
  auto run = [&](auto tag) {
    using T = decltype(tag);
    const T *xp = x.as<T>();
    T *yp = y.as<T>();
    parallelFor(x.numel(), args.numThreads, kGrain, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) yp[i] = f(xp[i]);
    });
  };
  if (x.dtype == DType::F32) run(float());
  else run(double());
  return "";
}

/// dx = f(dy, s) for backward ops reading one saved tensor s; all three have
/// the same float dtype and shape.
template <typename F>
std::string backwardFloat(const KernelArgs &args, const char *op,
                          const char *savedName, F f) {
  const TensorView &dy = args.inputs[0], &s = args.inputs[1],
                   &dx = args.outputs[0];
  if (auto e = checkFloat(dy, op, "dy"); !e.empty()) return e;
  if (auto e = checkSame(dy, s, op, "dy", savedName); !e.empty()) return e;
  if (auto e = checkSame(dy, dx, op, "dy", "dx"); !e.empty()) return e;
  auto run = [&](auto tag) {
    using T = decltype(tag);
    const T *g = dy.as<T>(), *sp = s.as<T>();
    T *o = dx.as<T>();
    parallelFor(dy.numel(), args.numThreads, kGrain, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) o[i] = f(g[i], sp[i]);
    });
  };
  if (dy.dtype == DType::F32) run(float());
  else run(double());
  return "";
}

// --- Activations (formulas: ElementMath.h) ------------------------------------

std::string relu(const KernelArgs &a) {
  return unaryFloat(a, "relu", em::Relu());
}
std::string reluBackward(const KernelArgs &a) {
  return backwardFloat(a, "relu_backward", "y", em::ReluBackward());
}

std::string hardtanh(const KernelArgs &a) {
  double lo = a.attrs.getFloat("min_val", -1.0);
  double hi = a.attrs.getFloat("max_val", 1.0);
  if (!(lo <= hi)) return "hardtanh: min_val > max_val";
  return unaryFloat(a, "hardtanh", em::Hardtanh{lo, hi});
}
std::string hardtanhBackward(const KernelArgs &a) {
  double lo = a.attrs.getFloat("min_val", -1.0);
  double hi = a.attrs.getFloat("max_val", 1.0);
  return backwardFloat(a, "hardtanh_backward", "x", em::HardtanhBackward{lo, hi});
}

std::string hardswish(const KernelArgs &a) {
  return unaryFloat(a, "hardswish", em::Hardswish());
}
std::string hardswishBackward(const KernelArgs &a) {
  return backwardFloat(a, "hardswish_backward", "x", em::HardswishBackward());
}

std::string silu(const KernelArgs &a) {
  return unaryFloat(a, "silu", em::Silu());
}
std::string siluBackward(const KernelArgs &a) {
  return backwardFloat(a, "silu_backward", "x", em::SiluBackward());
}

/// approximate attribute: "none" (erf) or "tanh"; error string otherwise.
std::string geluMode(const KernelArgs &a, const char *op, bool &useTanh) {
  std::string m = a.attrs.getString("approximate", "none");
  if (m == "none") useTanh = false;
  else if (m == "tanh") useTanh = true;
  else return std::string(op) + ": approximate must be none or tanh, got " + m;
  return "";
}

std::string gelu(const KernelArgs &a) {
  bool useTanh = false;
  if (auto e = geluMode(a, "gelu", useTanh); !e.empty()) return e;
  if (useTanh)
    return unaryFloat(a, "gelu", em::GeluTanh());
  return unaryFloat(a, "gelu", em::Gelu());
}
std::string geluBackward(const KernelArgs &a) {
  bool useTanh = false;
  if (auto e = geluMode(a, "gelu_backward", useTanh); !e.empty()) return e;
  if (useTanh)
    return backwardFloat(a, "gelu_backward", "x", em::GeluTanhBackward());
  return backwardFloat(a, "gelu_backward", "x", em::GeluBackward());
}

std::string sigmoid(const KernelArgs &a) {
  return unaryFloat(a, "sigmoid", em::Sigmoid());
}
std::string sigmoidBackward(const KernelArgs &a) {
  return backwardFloat(a, "sigmoid_backward", "y", em::SigmoidBackward());
}
std::string tanhK(const KernelArgs &a) {
  return unaryFloat(a, "tanh", em::Tanh());
}
std::string tanhBackward(const KernelArgs &a) {
  return backwardFloat(a, "tanh_backward", "y", em::TanhBackward());
}

std::string sinK(const KernelArgs &a) {
  return unaryFloat(a, "sin", em::Sin());
}
std::string cosK(const KernelArgs &a) {
  return unaryFloat(a, "cos", em::Cos());
}
std::string expK(const KernelArgs &a) {
  return unaryFloat(a, "exp", em::Exp());
}
std::string negK(const KernelArgs &a) {
  return unaryFloat(a, "neg", em::Neg());
}
std::string sqrtK(const KernelArgs &a) {
  return unaryFloat(a, "sqrt", em::Sqrt());
}
std::string rsqrtK(const KernelArgs &a) {
  return unaryFloat(a, "rsqrt", em::Rsqrt());
}

// --- Broadcasting binary ops --------------------------------------------------

enum class BinOp { Add, Sub, Mul, Div };

template <typename T> T applyBin(BinOp k, T x, T y) {
  switch (k) {
  case BinOp::Add: return em::Add()(x, y);
  case BinOp::Sub: return em::Sub()(x, y);
  case BinOp::Mul: return em::Mul()(x, y);
  case BinOp::Div: return em::Div()(x, y);
  }
  return x;
}

/// c = a (op) b with numpy broadcasting to c's shape. Float ops for all four;
/// add/sub/mul also for i64/i32 (div is true division: floats only).
std::string binary(const KernelArgs &args, const char *op, BinOp k) {
  const TensorView &x = args.inputs[0], &y = args.inputs[1],
                   &c = args.outputs[0];
  if (x.dtype != y.dtype || x.dtype != c.dtype)
    return std::string(op) + ": dtypes differ: " + dtypeName(x.dtype) + ", " +
           dtypeName(y.dtype) + " -> " + dtypeName(c.dtype);
  bool isFloat = x.dtype == DType::F32 || x.dtype == DType::F64;
  bool isInt = x.dtype == DType::I64 || x.dtype == DType::I32;
  if (!isFloat && !(isInt && k != BinOp::Div))
    return std::string(op) + ": unsupported dtype " + dtypeName(x.dtype);
  std::vector<int64_t> sa, sb;
  if (!broadcastStrides(x.shape, c.shape, sa) ||
      !broadcastStrides(y.shape, c.shape, sb))
    return std::string(op) + ": shapes " + shapeStr(x.shape) + " and " +
           shapeStr(y.shape) + " do not broadcast to " + shapeStr(c.shape);
  // The result shape must be exactly the broadcast of a and b.
  for (size_t d = 0; d < c.shape.size(); ++d)
    if (c.shape[d] != 1 && sa[d] == 0 && sb[d] == 0 && c.shape[d] != 0)
      return std::string(op) + ": result " + shapeStr(c.shape) +
             " is larger than the broadcast of " + shapeStr(x.shape) +
             " and " + shapeStr(y.shape);
  bool same = x.shape == c.shape && y.shape == c.shape;
  auto run = [&](auto tag) {
    using T = decltype(tag);
    const T *ap = x.as<T>(), *bp = y.as<T>();
    T *cp = c.as<T>();
    parallelFor(c.numel(), args.numThreads, kGrain, [&](int64_t b, int64_t e) {
      if (same) {
        for (int64_t i = b; i < e; ++i) cp[i] = applyBin<T>(k, ap[i], bp[i]);
        return;
      }
      BroadcastWalker w(c.shape, {&sa, &sb}, b);
      for (int64_t i = b; i < e; ++i, w.next())
        cp[i] = applyBin<T>(k, ap[w.off[0]], bp[w.off[1]]);
    });
  };
  switch (x.dtype) {
  case DType::F32: run(float()); break;
  case DType::F64: run(double()); break;
  case DType::I64: run(int64_t()); break;
  case DType::I32: run(int32_t()); break;
  default: break;
  }
  return "";
}

std::string add(const KernelArgs &a) { return binary(a, "add", BinOp::Add); }
std::string sub(const KernelArgs &a) { return binary(a, "sub", BinOp::Sub); }
std::string mul(const KernelArgs &a) { return binary(a, "mul", BinOp::Mul); }
std::string divK(const KernelArgs &a) { return binary(a, "div", BinOp::Div); }

std::string addScalar(const KernelArgs &a) {
  double v = a.attrs.getFloat("value", 0.0);
  // i64 (the batch-norm num_batches_tracked counter): exact integer add.
  if (a.inputs.size() == 1 && a.outputs.size() == 1 &&
      a.inputs[0].dtype == DType::I64 && a.outputs[0].dtype == DType::I64) {
    if (a.inputs[0].numel() != a.outputs[0].numel())
      return "add_scalar: input and output sizes differ";
    const int64_t *x = a.inputs[0].as<int64_t>();
    int64_t *y = a.outputs[0].as<int64_t>();
    for (int64_t i = 0, n = a.inputs[0].numel(); i < n; ++i)
      y[i] = x[i] + int64_t(v);
    return "";
  }
  // ATen casts the Scalar to the tensor's dtype before the add.
  return unaryFloat(a, "add_scalar", em::AddScalar{v});
}
std::string mulScalar(const KernelArgs &a) {
  double v = a.attrs.getFloat("value", 1.0);
  return unaryFloat(a, "mul_scalar", em::MulScalar{v});
}

/// Stores double `v` as one element of dtype `d` at p[i].
void storeAs(DType d, void *p, int64_t i, double v) {
  switch (d) {
  case DType::F32: static_cast<float *>(p)[i] = em::fromDouble<float>(v); break;
  case DType::F64: static_cast<double *>(p)[i] = em::fromDouble<double>(v); break;
  case DType::I64: static_cast<int64_t *>(p)[i] = em::fromDouble<int64_t>(v); break;
  case DType::I32: static_cast<int32_t *>(p)[i] = em::fromDouble<int32_t>(v); break;
  case DType::Bool: static_cast<uint8_t *>(p)[i] = em::fromDouble<uint8_t>(v); break;
  // Through f32, as PyTorch rounds a double scalar to bfloat16/half.
  case DType::BF16: static_cast<uint16_t *>(p)[i] = floatToBf16(float(v)); break;
  case DType::F16: static_cast<uint16_t *>(p)[i] = floatToF16(float(v)); break;
  }
}

std::string maskedFill(const KernelArgs &args) {
  const char *op = "masked_fill";
  const TensorView &x = args.inputs[0], &m = args.inputs[1],
                   &y = args.outputs[0];
  if (auto e = checkSame(x, y, op, "x", "y"); !e.empty()) return e;
  if (auto e = checkDType(m, DType::Bool, op, "mask"); !e.empty()) return e;
  std::vector<int64_t> sm;
  if (!broadcastStrides(m.shape, x.shape, sm))
    return std::string(op) + ": mask " + shapeStr(m.shape) +
           " does not broadcast to " + shapeStr(x.shape);
  double v = args.attrs.getFloat("value", 0.0);
  size_t es = dtypeSize(x.dtype);
  const uint8_t *mp = m.as<uint8_t>();
  const char *xp = static_cast<const char *>(x.data);
  char *yp = static_cast<char *>(y.data);
  // The fill value as one element of x's dtype.
  alignas(8) char fillBytes[8];
  storeAs(x.dtype, fillBytes, 0, v);
  parallelFor(x.numel(), args.numThreads, kGrain, [&](int64_t b, int64_t e) {
    BroadcastWalker w(x.shape, {&sm}, b);
    for (int64_t i = b; i < e; ++i, w.next())
      std::memmove(yp + i * es, mp[w.off[0]] ? fillBytes : xp + i * es, es);
  });
  return "";
}

std::string whereK(const KernelArgs &args) {
  const char *op = "where";
  const TensorView &cnd = args.inputs[0], &x = args.inputs[1],
                   &y = args.inputs[2], &c = args.outputs[0];
  if (auto e = checkDType(cnd, DType::Bool, op, "cond"); !e.empty()) return e;
  if (x.dtype != y.dtype || x.dtype != c.dtype)
    return std::string(op) + ": dtypes of a, b and result differ";
  std::vector<int64_t> sc, sa, sb;
  if (!broadcastStrides(cnd.shape, c.shape, sc) ||
      !broadcastStrides(x.shape, c.shape, sa) ||
      !broadcastStrides(y.shape, c.shape, sb))
    return std::string(op) + ": shapes " + shapeStr(cnd.shape) + ", " +
           shapeStr(x.shape) + ", " + shapeStr(y.shape) +
           " do not broadcast to " + shapeStr(c.shape);
  size_t es = dtypeSize(c.dtype);
  const uint8_t *cp = cnd.as<uint8_t>();
  const char *ap = static_cast<const char *>(x.data);
  const char *bp = static_cast<const char *>(y.data);
  char *op_ = static_cast<char *>(c.data);
  parallelFor(c.numel(), args.numThreads, kGrain, [&](int64_t b, int64_t e) {
    BroadcastWalker w(c.shape, {&sc, &sa, &sb}, b);
    for (int64_t i = b; i < e; ++i, w.next())
      std::memmove(op_ + i * es,
                   cp[w.off[0]] ? ap + w.off[1] * es : bp + w.off[2] * es, es);
  });
  return "";
}

std::string logicalNot(const KernelArgs &args) {
  const char *op = "logical_not";
  const TensorView &x = args.inputs[0], &y = args.outputs[0];
  if (auto e = checkDType(x, DType::Bool, op, "x"); !e.empty()) return e;
  if (auto e = checkSame(x, y, op, "x", "y"); !e.empty()) return e;
  const uint8_t *xp = x.as<uint8_t>();
  uint8_t *yp = y.as<uint8_t>();
  parallelFor(x.numel(), args.numThreads, kGrain, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) yp[i] = xp[i] ? 0 : 1;
  });
  return "";
}

/// c = a AND b / a OR b on bool tensors (bytes 0 or 1), broadcasting.
std::string logicalBinary(const KernelArgs &args, const char *op, bool isAnd) {
  const TensorView &a = args.inputs[0], &b = args.inputs[1], &c = args.outputs[0];
  if (auto e = checkDType(a, DType::Bool, op, "a"); !e.empty()) return e;
  if (auto e = checkDType(b, DType::Bool, op, "b"); !e.empty()) return e;
  if (auto e = checkDType(c, DType::Bool, op, "c"); !e.empty()) return e;
  std::vector<int64_t> sa, sb;
  if (!broadcastStrides(a.shape, c.shape, sa) || !broadcastStrides(b.shape, c.shape, sb))
    return std::string(op) + ": shapes " + shapeStr(a.shape) + " and " + shapeStr(b.shape) +
           " do not broadcast to " + shapeStr(c.shape);
  const uint8_t *ap = a.as<uint8_t>(), *bp = b.as<uint8_t>();
  uint8_t *cp = c.as<uint8_t>();
  parallelFor(c.numel(), args.numThreads, kGrain, [&](int64_t lo, int64_t hi) {
    BroadcastWalker w(c.shape, {&sa, &sb}, lo);
    for (int64_t i = lo; i < hi; ++i, w.next()) {
      bool x = ap[w.off[0]] != 0, y = bp[w.off[1]] != 0;
      cp[i] = (isAnd ? (x && y) : (x || y)) ? 1 : 0;
    }
  });
  return "";
}

std::string logicalAnd(const KernelArgs &a) { return logicalBinary(a, "logical_and", true); }
std::string logicalOr(const KernelArgs &a) { return logicalBinary(a, "logical_or", false); }

/// The index of offload.compare's `predicate` (em::compareOf's order), or
/// -1 for another string.
int comparePredicate(const std::string &p) {
  static const char *const names[] = {"eq", "ne", "lt", "le", "gt", "ge"};
  for (int i = 0; i < 6; ++i)
    if (p == names[i]) return i;
  return -1;
}

/// c = (a <predicate> b) as bool, a and b of one dtype, broadcasting.
std::string compare(const KernelArgs &args) {
  const char *op = "compare";
  const TensorView &a = args.inputs[0], &b = args.inputs[1], &c = args.outputs[0];
  int pred = comparePredicate(args.attrs.getString("predicate", ""));
  if (pred < 0)
    return cat(op, ": predicate must be eq, ne, lt, le, gt or ge, got '",
               args.attrs.getString("predicate", ""), "'");
  if (a.dtype != b.dtype)
    return cat(op, ": a is ", dtypeName(a.dtype), " but b is ", dtypeName(b.dtype));
  if (auto e = checkDType(c, DType::Bool, op, "c"); !e.empty()) return e;
  std::vector<int64_t> sa, sb;
  if (!broadcastStrides(a.shape, c.shape, sa) || !broadcastStrides(b.shape, c.shape, sb))
    return cat(op, ": shapes ", shapeStr(a.shape), " and ", shapeStr(b.shape),
               " do not broadcast to ", shapeStr(c.shape));
  uint8_t *cp = c.as<uint8_t>();
  auto run = [&](auto tag) {
    using T = decltype(tag);
    const T *ap = a.as<T>(), *bp = b.as<T>();
    parallelFor(c.numel(), args.numThreads, kGrain, [&](int64_t lo, int64_t hi) {
      BroadcastWalker w(c.shape, {&sa, &sb}, lo);
      for (int64_t i = lo; i < hi; ++i, w.next())
        cp[i] = em::compareOf<T>(pred, ap[w.off[0]], bp[w.off[1]]);
    });
  };
  switch (a.dtype) {
  case DType::F32: run(float()); break;
  case DType::F64: run(double()); break;
  case DType::I64: run(int64_t()); break;
  case DType::I32: run(int32_t()); break;
  case DType::Bool: run(uint8_t()); break;
  }
  return "";
}

std::string fill(const KernelArgs &args) {
  const TensorView &y = args.outputs[0];
  double v = args.attrs.getFloat("value", 0.0);
  parallelFor(y.numel(), args.numThreads, kGrain, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) storeAs(y.dtype, y.data, i, v);
  });
  return "";
}

template <typename To, typename From>
void castLoop(const From *x, To *y, int64_t b, int64_t e) {
  for (int64_t i = b; i < e; ++i) y[i] = em::castElem<To>(x[i]);
}

/// x[i] as f32: bf16/f16 widened exactly, the rest a C++ conversion.
template <typename From> float toFloat(const From *x, int64_t i) {
  return em::castElem<float>(x[i]);
}

template <typename From>
void castFrom(const From *x, const TensorView &y, int64_t b, int64_t e) {
  switch (y.dtype) {
  case DType::F32: castLoop(x, y.as<float>(), b, e); break;
  case DType::F64: castLoop(x, y.as<double>(), b, e); break;
  case DType::I64: castLoop(x, y.as<int64_t>(), b, e); break;
  case DType::I32: castLoop(x, y.as<int32_t>(), b, e); break;
  case DType::Bool: castLoop(x, y.as<uint8_t>(), b, e); break;
  // To bf16/f16: through f32 (exact from f32; from f64 and integers one
  // rounding to f32 first, as PyTorch's casts), then to nearest even.
  case DType::BF16:
    for (int64_t i = b; i < e; ++i) y.as<uint16_t>()[i] = floatToBf16(toFloat(x, i));
    break;
  case DType::F16:
    for (int64_t i = b; i < e; ++i) y.as<uint16_t>()[i] = floatToF16(toFloat(x, i));
    break;
  }
}

/// From bf16/f16 (dtype `dt`): widened to f32 (exact), then the f32 cast.
void castFromLow(DType dt, const uint16_t *x, const TensorView &y, int64_t b,
                 int64_t e) {
  float buf[256];
  for (int64_t lo = b; lo < e; lo += 256) {
    int64_t hi = std::min<int64_t>(e, lo + 256);
    for (int64_t i = lo; i < hi; ++i)
      buf[i - lo] = dt == DType::BF16 ? bf16ToFloat(x[i]) : f16ToFloat(x[i]);
    // castFrom indexes from 0: point the output at element lo.
    TensorView part = y;
    part.data = static_cast<char *>(y.data) + lo * int64_t(dtypeSize(y.dtype));
    castFrom(buf, part, 0, hi - lo);
  }
}

std::string copy(const KernelArgs &args) {
  const char *op = "copy";
  const TensorView &x = args.inputs[0], &y = args.outputs[0];
  if (x.shape != y.shape)
    return std::string(op) + ": x has shape " + shapeStr(x.shape) +
           " but y has shape " + shapeStr(y.shape);
  if (x.dtype == y.dtype) {
    if (x.data != y.data) std::memmove(y.data, x.data, x.bytes());
    return "";
  }
  parallelFor(x.numel(), args.numThreads, kGrain, [&](int64_t b, int64_t e) {
    switch (x.dtype) {
    case DType::F32: castFrom(x.as<float>(), y, b, e); break;
    case DType::F64: castFrom(x.as<double>(), y, b, e); break;
    case DType::I64: castFrom(x.as<int64_t>(), y, b, e); break;
    case DType::I32: castFrom(x.as<int32_t>(), y, b, e); break;
    case DType::Bool: castFrom(x.as<uint8_t>(), y, b, e); break;
    case DType::BF16:
    case DType::F16: castFromLow(x.dtype, x.as<uint16_t>(), y, b, e); break;
    }
  });
  return "";
}

} // namespace

void registerElementwiseKernels(KernelRegistry &r) {
  addEmulated<relu>(r, "offload.relu");
  addEmulated<reluBackward>(r, "offload.relu_backward");
  addEmulated<hardtanh>(r, "offload.hardtanh");
  addEmulated<hardtanhBackward>(r, "offload.hardtanh_backward");
  addEmulated<hardswish>(r, "offload.hardswish");
  addEmulated<hardswishBackward>(r, "offload.hardswish_backward");
  addEmulated<silu>(r, "offload.silu");
  addEmulated<siluBackward>(r, "offload.silu_backward");
  addEmulated<gelu>(r, "offload.gelu");
  addEmulated<geluBackward>(r, "offload.gelu_backward");
  addEmulated<sigmoid>(r, "offload.sigmoid");
  addEmulated<sigmoidBackward>(r, "offload.sigmoid_backward");
  addEmulated<tanhK>(r, "offload.tanh");
  addEmulated<tanhBackward>(r, "offload.tanh_backward");
  addEmulated<expK>(r, "offload.exp");
  addEmulated<sinK>(r, "offload.sin");
  addEmulated<cosK>(r, "offload.cos");
  addEmulated<negK>(r, "offload.neg");
  addEmulated<sqrtK>(r, "offload.sqrt");
  addEmulated<rsqrtK>(r, "offload.rsqrt");
  addEmulated<add>(r, "offload.add");
  addEmulated<sub>(r, "offload.sub");
  addEmulated<mul>(r, "offload.mul");
  addEmulated<divK>(r, "offload.div");
  addEmulated<addScalar>(r, "offload.add_scalar");
  addEmulated<mulScalar>(r, "offload.mul_scalar");
  r.add("offload.masked_fill", maskedFill, Absent::Rejected, LowFloat::Native);
  r.add("offload.where", whereK, Absent::Rejected, LowFloat::Native);
  r.add("offload.logical_not", logicalNot);
  r.add("offload.logical_and", logicalAnd);
  r.add("offload.logical_or", logicalOr);
  r.add("offload.compare", compare);
  r.add("offload.fill", fill, Absent::Rejected, LowFloat::Native);
  r.add("offload.copy", copy, Absent::Rejected, LowFloat::Native);
}

} // namespace kernels
} // namespace rt
} // namespace offload
