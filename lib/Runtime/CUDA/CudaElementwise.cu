//===- CudaElementwise.cu - Elementwise CUDA kernels ----------------------===//
//
// Part of offload. Activations and their backward ops, unary math, binary
// arithmetic with numpy broadcasting (floats; add/sub/mul also i64/i32),
// scalar ops, masked_fill, where, logical_not/and/or on bool masks,
// compare (any dtype to bool), fill,
// copy (with dtype cast) and dropout, as the host kernels of Elementwise.cpp and Random.cpp. Every element
// formula is the ElementMath.h functor the host kernel calls; each output
// element depends only on same-index inputs, so results are deterministic
// and outputs may alias same-shaped inputs exactly.
//
//===----------------------------------------------------------------------===//

#include "CudaCommon.cuh"

namespace offload {
namespace rt {
namespace cuda {
namespace {

// Storage type T: float, double, or bf16/f16 computed in float (ld/st,
// CudaCommon.cuh): one rounding per result, the host's emulation bit for bit.
template <typename T, typename F>
__global__ void unaryKernel(const T *x, T *y, int64_t n, F f) {
  OFFLOAD_GRID_LOOP(i, n) y[i] = st<T>(f(ld(x[i])));
}

template <typename T, typename F>
__global__ void backwardKernel(const T *g, const T *s, T *dx, int64_t n,
                               F f) {
  OFFLOAD_GRID_LOOP(i, n) dx[i] = st<T>(f(ld(g[i]), ld(s[i])));
}

/// y = f(x): one float input (f32, f64, bf16, f16) and an output of the
/// same dtype and shape.
template <typename F>
std::string unaryFloat(const CudaKernelArgs &a, const char *op, F f) {
  const TensorView &x = a.inputs[0], &y = a.outputs[0];
  if (auto e = needAnyFloat(x, op, "x"); !e.empty())
    return e;
  if (auto e = needSame(x, y, op, "x", "y"); !e.empty())
    return e;
  int64_t n = x.numel();
  if (n == 0)
    return "";
  dispatchFloat(x.dtype, [&](auto tag) {
    using T = decltype(tag);
    unaryKernel<T, F><<<blocksFor(n), kThreads, 0, a.ctx.stream>>>(
        x.as<T>(), y.as<T>(), n, f);
  });
  return launched(op);
}

/// dx = f(dy, s): dy, the saved tensor s and dx of one float dtype and shape.
template <typename F>
std::string backwardFloat(const CudaKernelArgs &a, const char *op,
                          const char *savedName, F f) {
  const TensorView &dy = a.inputs[0], &s = a.inputs[1], &dx = a.outputs[0];
  if (auto e = needAnyFloat(dy, op, "dy"); !e.empty())
    return e;
  if (auto e = needSame(dy, s, op, "dy", savedName); !e.empty())
    return e;
  if (auto e = needSame(dy, dx, op, "dy", "dx"); !e.empty())
    return e;
  int64_t n = dy.numel();
  if (n == 0)
    return "";
  dispatchFloat(dy.dtype, [&](auto tag) {
    using T = decltype(tag);
    backwardKernel<T, F><<<blocksFor(n), kThreads, 0, a.ctx.stream>>>(
        dy.as<T>(), s.as<T>(), dx.as<T>(), n, f);
  });
  return launched(op);
}

//===----------------------------------------------------------------------===//
// Activations
//===----------------------------------------------------------------------===//

std::string kRelu(const CudaKernelArgs &a) {
  return unaryFloat(a, "relu", em::Relu());
}
std::string kReluBackward(const CudaKernelArgs &a) {
  return backwardFloat(a, "relu_backward", "y", em::ReluBackward());
}
std::string kHardtanh(const CudaKernelArgs &a) {
  double lo = a.attrs.getFloat("min_val", -1.0);
  double hi = a.attrs.getFloat("max_val", 1.0);
  if (!(lo <= hi))
    return "hardtanh: min_val > max_val";
  return unaryFloat(a, "hardtanh", em::Hardtanh{lo, hi});
}
std::string kHardtanhBackward(const CudaKernelArgs &a) {
  double lo = a.attrs.getFloat("min_val", -1.0);
  double hi = a.attrs.getFloat("max_val", 1.0);
  return backwardFloat(a, "hardtanh_backward", "x",
                       em::HardtanhBackward{lo, hi});
}
std::string kHardswish(const CudaKernelArgs &a) {
  return unaryFloat(a, "hardswish", em::Hardswish());
}
std::string kHardswishBackward(const CudaKernelArgs &a) {
  return backwardFloat(a, "hardswish_backward", "x", em::HardswishBackward());
}
std::string kSilu(const CudaKernelArgs &a) {
  return unaryFloat(a, "silu", em::Silu());
}
std::string kSiluBackward(const CudaKernelArgs &a) {
  return backwardFloat(a, "silu_backward", "x", em::SiluBackward());
}

/// approximate: "none" (erf) or "tanh".
std::string geluMode(const CudaKernelArgs &a, const char *op, bool &useTanh) {
  std::string m = a.attrs.getString("approximate", "none");
  if (m == "none")
    useTanh = false;
  else if (m == "tanh")
    useTanh = true;
  else
    return std::string(op) + ": approximate must be none or tanh, got " + m;
  return "";
}
std::string kGelu(const CudaKernelArgs &a) {
  bool useTanh = false;
  if (auto e = geluMode(a, "gelu", useTanh); !e.empty())
    return e;
  return useTanh ? unaryFloat(a, "gelu", em::GeluTanh())
                 : unaryFloat(a, "gelu", em::Gelu());
}
std::string kGeluBackward(const CudaKernelArgs &a) {
  bool useTanh = false;
  if (auto e = geluMode(a, "gelu_backward", useTanh); !e.empty())
    return e;
  return useTanh
             ? backwardFloat(a, "gelu_backward", "x", em::GeluTanhBackward())
             : backwardFloat(a, "gelu_backward", "x", em::GeluBackward());
}
std::string kSigmoid(const CudaKernelArgs &a) {
  return unaryFloat(a, "sigmoid", em::Sigmoid());
}
std::string kSigmoidBackward(const CudaKernelArgs &a) {
  return backwardFloat(a, "sigmoid_backward", "y", em::SigmoidBackward());
}
std::string kTanh(const CudaKernelArgs &a) {
  return unaryFloat(a, "tanh", em::Tanh());
}
std::string kTanhBackward(const CudaKernelArgs &a) {
  return backwardFloat(a, "tanh_backward", "y", em::TanhBackward());
}
std::string kExp(const CudaKernelArgs &a) {
  return unaryFloat(a, "exp", em::Exp());
}
std::string kSin(const CudaKernelArgs &a) {
  return unaryFloat(a, "sin", em::Sin());
}
std::string kCos(const CudaKernelArgs &a) {
  return unaryFloat(a, "cos", em::Cos());
}
std::string kNeg(const CudaKernelArgs &a) {
  return unaryFloat(a, "neg", em::Neg());
}
std::string kSqrt(const CudaKernelArgs &a) {
  return unaryFloat(a, "sqrt", em::Sqrt());
}
std::string kRsqrt(const CudaKernelArgs &a) {
  return unaryFloat(a, "rsqrt", em::Rsqrt());
}

//===----------------------------------------------------------------------===//
// Broadcasting binary ops
//===----------------------------------------------------------------------===//

template <typename T, typename F>
__global__ void binaryKernel(const T *x, const T *y, T *z, int64_t n,
                             Strided s, int same, F f) {
  OFFLOAD_GRID_LOOP(i, n) {
    if (same) {
      z[i] = st<T>(f(ld(x[i]), ld(y[i])));
    } else {
      int64_t off[2];
      s.offsets(i, off, 2);
      z[i] = st<T>(f(ld(x[off[0]]), ld(y[off[1]])));
    }
  }
}

template <typename T, typename F>
void launchBinary(const CudaKernelArgs &a, int64_t n, const Strided &s,
                  int same, F f) {
  binaryKernel<T, F><<<blocksFor(n), kThreads, 0, a.ctx.stream>>>(
      a.inputs[0].as<T>(), a.inputs[1].as<T>(), a.outputs[0].as<T>(), n, s,
      same, f);
}

/// The strides of a two-operand elementwise op: x and y broadcast (numpy
/// rules) to the result c, which is walked in row-major order.
std::string twoOperandStrides(const TensorView &x, const TensorView &y,
                              const TensorView &c, const char *op,
                              Strided &s) {
  if (auto e = stridedOver(c, op, s); !e.empty())
    return e;
  if (!broadcastStrides(x.shape, c.shape, s.st[0]) ||
      !broadcastStrides(y.shape, c.shape, s.st[1]))
    return std::string(op) + ": shapes " + shapeStr(x.shape) + " and " +
           shapeStr(y.shape) + " do not broadcast to " + shapeStr(c.shape);
  return "";
}

/// c = a (op) b with numpy broadcasting to c's shape. Floats for all four
/// ops; add/sub/mul also for i64/i32 (div is true division).
template <typename F>
std::string binary(const CudaKernelArgs &a, const char *op, F f, bool isDiv) {
  const TensorView &x = a.inputs[0], &y = a.inputs[1], &c = a.outputs[0];
  if (x.dtype != y.dtype || x.dtype != c.dtype)
    return std::string(op) + ": dtypes differ: " + dtypeName(x.dtype) + ", " +
           dtypeName(y.dtype) + " -> " + dtypeName(c.dtype);
  bool isFloat = x.dtype == DType::F32 || x.dtype == DType::F64 ||
                 isLowFloat(x.dtype);
  bool isInt = x.dtype == DType::I64 || x.dtype == DType::I32;
  if (!isFloat && !(isInt && !isDiv))
    return std::string(op) + ": unsupported dtype " + dtypeName(x.dtype);
  Strided s;
  if (auto e = twoOperandStrides(x, y, c, op, s); !e.empty())
    return e;
  for (int d = 0; d < s.rank; ++d)
    if (c.shape[size_t(d)] != 1 && c.shape[size_t(d)] != 0 &&
        s.st[0][d] == 0 && s.st[1][d] == 0)
      return std::string(op) + ": result " + shapeStr(c.shape) +
             " is larger than the broadcast of " + shapeStr(x.shape) +
             " and " + shapeStr(y.shape);
  int same = x.shape == c.shape && y.shape == c.shape;
  int64_t n = c.numel();
  if (n == 0)
    return "";
  switch (x.dtype) {
  case DType::F32: launchBinary<float>(a, n, s, same, f); break;
  case DType::F64: launchBinary<double>(a, n, s, same, f); break;
  case DType::I64: launchBinary<int64_t>(a, n, s, same, f); break;
  case DType::I32: launchBinary<int32_t>(a, n, s, same, f); break;
  case DType::BF16: launchBinary<__nv_bfloat16>(a, n, s, same, f); break;
  case DType::F16: launchBinary<__half>(a, n, s, same, f); break;
  default: break;
  }
  return launched(op);
}

std::string kAdd(const CudaKernelArgs &a) {
  return binary(a, "add", em::Add(), false);
}
std::string kSub(const CudaKernelArgs &a) {
  return binary(a, "sub", em::Sub(), false);
}
std::string kMul(const CudaKernelArgs &a) {
  return binary(a, "mul", em::Mul(), false);
}
std::string kDiv(const CudaKernelArgs &a) {
  return binary(a, "div", em::Div(), true);
}

__global__ void addI64Kernel(const int64_t *x, int64_t *y, int64_t n,
                             int64_t v) {
  OFFLOAD_GRID_LOOP(i, n) y[i] = x[i] + v;
}

std::string kAddScalar(const CudaKernelArgs &a) {
  double v = a.attrs.getFloat("value", 0.0);
  // i64 (the batch-norm num_batches_tracked counter): exact integer add.
  if (a.inputs.size() == 1 && a.outputs.size() == 1 &&
      a.inputs[0].dtype == DType::I64 && a.outputs[0].dtype == DType::I64) {
    int64_t n = a.inputs[0].numel();
    if (n != a.outputs[0].numel())
      return "add_scalar: input and output sizes differ";
    if (n == 0)
      return "";
    addI64Kernel<<<blocksFor(n), kThreads, 0, a.ctx.stream>>>(
        a.inputs[0].as<int64_t>(), a.outputs[0].as<int64_t>(), n,
        int64_t(v));
    return launched("add_scalar");
  }
  return unaryFloat(a, "add_scalar", em::AddScalar{v});
}
std::string kMulScalar(const CudaKernelArgs &a) {
  return unaryFloat(a, "mul_scalar",
                    em::MulScalar{a.attrs.getFloat("value", 1.0)});
}

//===----------------------------------------------------------------------===//
// masked_fill, where, fill, copy
//===----------------------------------------------------------------------===//

/// The double `v` as one element of dtype `d`, in the low bytes of a word.
uint64_t elementBits(DType d, double v) {
  uint64_t bits = 0;
  switch (d) {
  case DType::F32: {
    float f = em::fromDouble<float>(v);
    std::memcpy(&bits, &f, 4);
    break;
  }
  case DType::F64: {
    double f = em::fromDouble<double>(v);
    std::memcpy(&bits, &f, 8);
    break;
  }
  case DType::I64: {
    int64_t f = em::fromDouble<int64_t>(v);
    std::memcpy(&bits, &f, 8);
    break;
  }
  case DType::I32: {
    int32_t f = em::fromDouble<int32_t>(v);
    std::memcpy(&bits, &f, 4);
    break;
  }
  case DType::Bool:
    bits = em::fromDouble<uint8_t>(v);
    break;
  // Through f32, as the host kernel (storeAs) and PyTorch round a double
  // scalar to bfloat16/half.
  case DType::BF16:
    bits = floatToBf16(float(v));
    break;
  case DType::F16:
    bits = floatToF16(float(v));
    break;
  }
  return bits;
}

template <typename W>
__global__ void maskedFillKernel(const W *x, const uint8_t *mask, W *y,
                                 int64_t n, Strided s, W fill) {
  OFFLOAD_GRID_LOOP(i, n) {
    int64_t off[1];
    s.offsets(i, off, 1);
    y[i] = mask[off[0]] ? fill : x[i];
  }
}

std::string kMaskedFill(const CudaKernelArgs &a) {
  const char *op = "masked_fill";
  const TensorView &x = a.inputs[0], &m = a.inputs[1], &y = a.outputs[0];
  if (auto e = needSame(x, y, op, "x", "y"); !e.empty())
    return e;
  if (auto e = needDType(m, DType::Bool, op, "mask"); !e.empty())
    return e;
  Strided s;
  if (auto e = stridedOver(x, op, s); !e.empty())
    return e;
  if (!broadcastStrides(m.shape, x.shape, s.st[0]))
    return std::string(op) + ": mask " + shapeStr(m.shape) +
           " does not broadcast to " + shapeStr(x.shape);
  uint64_t bits = elementBits(x.dtype, a.attrs.getFloat("value", 0.0));
  int64_t n = x.numel();
  if (n == 0)
    return "";
  const uint8_t *mp = m.as<uint8_t>();
  switch (dtypeSize(x.dtype)) {
  case 1:
    maskedFillKernel<uint8_t><<<blocksFor(n), kThreads, 0, a.ctx.stream>>>(
        x.as<uint8_t>(), mp, y.as<uint8_t>(), n, s, uint8_t(bits));
    break;
  case 2:
    maskedFillKernel<uint16_t><<<blocksFor(n), kThreads, 0, a.ctx.stream>>>(
        x.as<uint16_t>(), mp, y.as<uint16_t>(), n, s, uint16_t(bits));
    break;
  case 4:
    maskedFillKernel<uint32_t><<<blocksFor(n), kThreads, 0, a.ctx.stream>>>(
        x.as<uint32_t>(), mp, y.as<uint32_t>(), n, s, uint32_t(bits));
    break;
  default:
    maskedFillKernel<uint64_t><<<blocksFor(n), kThreads, 0, a.ctx.stream>>>(
        x.as<uint64_t>(), mp, y.as<uint64_t>(), n, s, bits);
    break;
  }
  return launched(op);
}

template <typename W>
__global__ void whereKernel(const uint8_t *cnd, const W *x, const W *y, W *z,
                            int64_t n, Strided s) {
  OFFLOAD_GRID_LOOP(i, n) {
    int64_t off[3];
    s.offsets(i, off, 3);
    z[i] = cnd[off[0]] ? x[off[1]] : y[off[2]];
  }
}

std::string kWhere(const CudaKernelArgs &a) {
  const char *op = "where";
  const TensorView &cnd = a.inputs[0], &x = a.inputs[1], &y = a.inputs[2],
                   &c = a.outputs[0];
  if (auto e = needDType(cnd, DType::Bool, op, "cond"); !e.empty())
    return e;
  if (x.dtype != y.dtype || x.dtype != c.dtype)
    return std::string(op) + ": dtypes of a, b and result differ";
  Strided s;
  if (auto e = stridedOver(c, op, s); !e.empty())
    return e;
  if (!broadcastStrides(cnd.shape, c.shape, s.st[0]) ||
      !broadcastStrides(x.shape, c.shape, s.st[1]) ||
      !broadcastStrides(y.shape, c.shape, s.st[2]))
    return std::string(op) + ": shapes " + shapeStr(cnd.shape) + ", " +
           shapeStr(x.shape) + ", " + shapeStr(y.shape) +
           " do not broadcast to " + shapeStr(c.shape);
  int64_t n = c.numel();
  if (n == 0)
    return "";
  const uint8_t *cp = cnd.as<uint8_t>();
  switch (dtypeSize(c.dtype)) {
  case 1:
    whereKernel<uint8_t><<<blocksFor(n), kThreads, 0, a.ctx.stream>>>(
        cp, x.as<uint8_t>(), y.as<uint8_t>(), c.as<uint8_t>(), n, s);
    break;
  case 2:
    whereKernel<uint16_t><<<blocksFor(n), kThreads, 0, a.ctx.stream>>>(
        cp, x.as<uint16_t>(), y.as<uint16_t>(), c.as<uint16_t>(), n, s);
    break;
  case 4:
    whereKernel<uint32_t><<<blocksFor(n), kThreads, 0, a.ctx.stream>>>(
        cp, x.as<uint32_t>(), y.as<uint32_t>(), c.as<uint32_t>(), n, s);
    break;
  default:
    whereKernel<uint64_t><<<blocksFor(n), kThreads, 0, a.ctx.stream>>>(
        cp, x.as<uint64_t>(), y.as<uint64_t>(), c.as<uint64_t>(), n, s);
    break;
  }
  return launched(op);
}

// The boolean ops on masks: bytes 0 or 1.
__global__ void logicalNotKernel(const uint8_t *x, uint8_t *y, int64_t n) {
  OFFLOAD_GRID_LOOP(i, n) y[i] = x[i] ? 0 : 1;
}

__global__ void logicalBinaryKernel(const uint8_t *a, const uint8_t *b, uint8_t *c,
                                    int64_t n, Strided s, bool isAnd) {
  OFFLOAD_GRID_LOOP(i, n) {
    int64_t off[2];
    s.offsets(i, off, 2);
    bool x = a[off[0]] != 0, y = b[off[1]] != 0;
    c[i] = (isAnd ? (x && y) : (x || y)) ? 1 : 0;
  }
}

std::string kLogicalNot(const CudaKernelArgs &a) {
  const char *op = "logical_not";
  const TensorView &x = a.inputs[0], &y = a.outputs[0];
  if (auto e = needDType(x, DType::Bool, op, "x"); !e.empty())
    return e;
  if (auto e = needSame(x, y, op, "x", "y"); !e.empty())
    return e;
  int64_t n = x.numel();
  if (n == 0)
    return "";
  logicalNotKernel<<<blocksFor(n), kThreads, 0, a.ctx.stream>>>(x.as<uint8_t>(),
                                                                 y.as<uint8_t>(), n);
  return launched(op);
}

std::string logicalBinary(const CudaKernelArgs &a, const char *op, bool isAnd) {
  const TensorView &x = a.inputs[0], &y = a.inputs[1], &c = a.outputs[0];
  if (auto e = needDType(x, DType::Bool, op, "a"); !e.empty())
    return e;
  if (auto e = needDType(y, DType::Bool, op, "b"); !e.empty())
    return e;
  if (auto e = needDType(c, DType::Bool, op, "c"); !e.empty())
    return e;
  Strided s;
  if (auto e = twoOperandStrides(x, y, c, op, s); !e.empty())
    return e;
  int64_t n = c.numel();
  if (n == 0)
    return "";
  logicalBinaryKernel<<<blocksFor(n), kThreads, 0, a.ctx.stream>>>(
      x.as<uint8_t>(), y.as<uint8_t>(), c.as<uint8_t>(), n, s, isAnd);
  return launched(op);
}

std::string kLogicalAnd(const CudaKernelArgs &a) { return logicalBinary(a, "logical_and", true); }
std::string kLogicalOr(const CudaKernelArgs &a) { return logicalBinary(a, "logical_or", false); }

//===----------------------------------------------------------------------===//
// compare (any dtype -> bool)
//===----------------------------------------------------------------------===//

template <typename T>
__global__ void compareKernel(const T *x, const T *y, uint8_t *c, int64_t n,
                              Strided s, int pred) {
  OFFLOAD_GRID_LOOP(i, n) {
    int64_t off[2];
    s.offsets(i, off, 2);
    c[i] = em::compareOf<T>(pred, x[off[0]], y[off[1]]);
  }
}

std::string kCompare(const CudaKernelArgs &a) {
  const char *op = "compare";
  const TensorView &x = a.inputs[0], &y = a.inputs[1], &c = a.outputs[0];
  static const char *const names[] = {"eq", "ne", "lt", "le", "gt", "ge"};
  std::string p = a.attrs.getString("predicate", "");
  int pred = -1;
  for (int i = 0; i < 6; ++i)
    if (p == names[i])
      pred = i;
  if (pred < 0)
    return std::string(op) + ": predicate must be eq, ne, lt, le, gt or ge, got '" + p + "'";
  if (x.dtype != y.dtype)
    return std::string(op) + ": a is " + dtypeName(x.dtype) + " but b is " +
           dtypeName(y.dtype);
  if (auto e = needDType(c, DType::Bool, op, "c"); !e.empty())
    return e;
  Strided s;
  if (auto e = twoOperandStrides(x, y, c, op, s); !e.empty())
    return e;
  int64_t n = c.numel();
  if (n == 0)
    return "";
  auto run = [&](auto tag) {
    using T = decltype(tag);
    compareKernel<T><<<blocksFor(n), kThreads, 0, a.ctx.stream>>>(
        x.as<T>(), y.as<T>(), c.as<uint8_t>(), n, s, pred);
  };
  switch (x.dtype) {
  case DType::F32: run(float()); break;
  case DType::F64: run(double()); break;
  case DType::I64: run(int64_t()); break;
  case DType::I32: run(int32_t()); break;
  case DType::Bool: run(uint8_t()); break;
  }
  return launched(op);
}

template <typename W> __global__ void fillKernel(W *y, int64_t n, W v) {
  OFFLOAD_GRID_LOOP(i, n) y[i] = v;
}

std::string kFill(const CudaKernelArgs &a) {
  const TensorView &y = a.outputs[0];
  int64_t n = y.numel();
  if (n == 0)
    return "";
  uint64_t bits = elementBits(y.dtype, a.attrs.getFloat("value", 0.0));
  switch (dtypeSize(y.dtype)) {
  case 1:
    fillKernel<uint8_t><<<blocksFor(n), kThreads, 0, a.ctx.stream>>>(
        y.as<uint8_t>(), n, uint8_t(bits));
    break;
  case 2:
    fillKernel<uint16_t><<<blocksFor(n), kThreads, 0, a.ctx.stream>>>(
        y.as<uint16_t>(), n, uint16_t(bits));
    break;
  case 4:
    fillKernel<uint32_t><<<blocksFor(n), kThreads, 0, a.ctx.stream>>>(
        y.as<uint32_t>(), n, uint32_t(bits));
    break;
  default:
    fillKernel<uint64_t><<<blocksFor(n), kThreads, 0, a.ctx.stream>>>(
        y.as<uint64_t>(), n, bits);
    break;
  }
  return launched("fill");
}

template <typename From, typename To>
__global__ void castKernel(const From *x, To *y, int64_t n) {
  OFFLOAD_GRID_LOOP(i, n) y[i] = em::castElem<To>(x[i]);
}

/// To bf16/f16 (Low): through f32 (exact from f32; from f64 and integers
/// one rounding to f32 first, as the host kernel and PyTorch's casts), then
/// to nearest even (st, Float16.h).
template <typename From, typename Low>
__global__ void castToLowKernel(const From *x, Low *y, int64_t n) {
  OFFLOAD_GRID_LOOP(i, n) y[i] = st<Low>(em::castElem<float>(x[i]));
}

/// From bf16/f16: widened to f32 (exact), then the f32 cast (the host's
/// castFromLow); to the other 2-byte type through f32, rounded once.
template <typename Low, typename To>
__global__ void castFromLowKernel(const Low *x, To *y, int64_t n) {
  OFFLOAD_GRID_LOOP(i, n) {
    float f = ld(x[i]);
    if constexpr (kIsLow<To>)
      y[i] = st<To>(f);
    else
      y[i] = em::castElem<To>(f);
  }
}

std::string kCopy(const CudaKernelArgs &a) {
  const char *op = "copy";
  const TensorView &x = a.inputs[0], &y = a.outputs[0];
  if (x.shape != y.shape)
    return std::string(op) + ": x has shape " + shapeStr(x.shape) +
           " but y has shape " + shapeStr(y.shape);
  int64_t n = x.numel();
  if (n == 0)
    return "";
  if (x.dtype == y.dtype) {
    if (x.data == y.data)
      return "";
    cudaError_t e = cudaMemcpyAsync(y.data, x.data, x.bytes(),
                                    cudaMemcpyDeviceToDevice, a.ctx.stream);
    return e == cudaSuccess ? "" : cudaErrorText("cudaMemcpyAsync", e);
  }
  // From a 2-byte float: castFromLowKernel (to any type); to one:
  // castToLowKernel; else castKernel.
  cudaStream_t st = a.ctx.stream;
  dispatchStorage(x.dtype, [&](auto from) {
    using From = decltype(from);
    dispatchStorage(y.dtype, [&](auto to) {
      using To = decltype(to);
      const From *xp = x.as<From>();
      To *yp = y.as<To>();
      if constexpr (kIsLow<From>)
        castFromLowKernel<From, To><<<blocksFor(n), kThreads, 0, st>>>(xp, yp, n);
      else if constexpr (kIsLow<To>)
        castToLowKernel<From, To><<<blocksFor(n), kThreads, 0, st>>>(xp, yp, n);
      else
        castKernel<From, To><<<blocksFor(n), kThreads, 0, st>>>(xp, yp, n);
    });
  });
  return launched(op);
}

//===----------------------------------------------------------------------===//
// Dropout (Philox4x32-10, the host's stream: em::Dropout)
//===----------------------------------------------------------------------===//

template <typename T>
__global__ void dropoutKernel(const T *x, const int64_t *seed, T *y,
                              int64_t n, double p, uint64_t offset) {
  em::Dropout<Acc<T>> f = em::Dropout<Acc<T>>::make(p, uint64_t(*seed), offset);
  OFFLOAD_GRID_LOOP(i, n) y[i] = st<T>(f(ld(x[i]), i));
}

std::string dropoutImpl(const CudaKernelArgs &a, const char *op) {
  const TensorView &x = a.inputs[0], &seed = a.inputs[1], &y = a.outputs[0];
  if (auto e = needAnyFloat(x, op, "input"); !e.empty())
    return e;
  if (auto e = needSame(x, y, op, "input", "result"); !e.empty())
    return e;
  if (auto e = needDType(seed, DType::I64, op, "seed"); !e.empty())
    return e;
  if (seed.numel() != 1)
    return std::string(op) + ": seed must hold one element, got " +
           shapeStr(seed.shape);
  double p = a.attrs.getFloat("p", 0.5);
  if (!(p >= 0.0 && p <= 1.0))
    return std::string(op) + ": p must be in [0, 1]";
  uint64_t offset = uint64_t(a.attrs.getInt("offset", 0));
  int64_t n = x.numel();
  if (n == 0)
    return "";
  if (p == 0.0) {
    if (x.data == y.data)
      return "";
    cudaError_t e = cudaMemcpyAsync(y.data, x.data, x.bytes(),
                                    cudaMemcpyDeviceToDevice, a.ctx.stream);
    return e == cudaSuccess ? "" : cudaErrorText("cudaMemcpyAsync", e);
  }
  dispatchFloat(x.dtype, [&](auto tag) {
    using T = decltype(tag);
    dropoutKernel<T><<<blocksFor(n), kThreads, 0, a.ctx.stream>>>(
        x.as<T>(), seed.as<int64_t>(), y.as<T>(), n, p, offset);
  });
  return launched(op);
}

std::string kDropout(const CudaKernelArgs &a) {
  return dropoutImpl(a, "dropout");
}
std::string kDropoutBackward(const CudaKernelArgs &a) {
  return dropoutImpl(a, "dropout_backward");
}

} // namespace

const std::vector<Entry> &elementwiseEntries() {
  static const std::vector<Entry> e = {
      {"offload.relu", kRelu, true},
      {"offload.relu_backward", kReluBackward, true},
      {"offload.hardtanh", kHardtanh, true},
      {"offload.hardtanh_backward", kHardtanhBackward, true},
      {"offload.hardswish", kHardswish, true},
      {"offload.hardswish_backward", kHardswishBackward, true},
      {"offload.silu", kSilu, true},
      {"offload.silu_backward", kSiluBackward, true},
      {"offload.gelu", kGelu, true},
      {"offload.gelu_backward", kGeluBackward, true},
      {"offload.sigmoid", kSigmoid, true},
      {"offload.sigmoid_backward", kSigmoidBackward, true},
      {"offload.tanh", kTanh, true},
      {"offload.tanh_backward", kTanhBackward, true},
      {"offload.exp", kExp, true},
      {"offload.sin", kSin, true},
      {"offload.cos", kCos, true},
      {"offload.neg", kNeg, true},
      {"offload.sqrt", kSqrt, true},
      {"offload.rsqrt", kRsqrt, true},
      {"offload.add", kAdd, true},
      {"offload.sub", kSub, true},
      {"offload.mul", kMul, true},
      {"offload.div", kDiv, true},
      {"offload.add_scalar", kAddScalar, true},
      {"offload.mul_scalar", kMulScalar, true},
      {"offload.masked_fill", kMaskedFill, true},
      {"offload.where", kWhere, true},
      {"offload.logical_not", kLogicalNot},
      {"offload.logical_and", kLogicalAnd},
      {"offload.logical_or", kLogicalOr},
      {"offload.compare", kCompare},
      {"offload.fill", kFill, true},
      {"offload.copy", kCopy, true},
      {"offload.dropout", kDropout, true},
      {"offload.dropout_backward", kDropoutBackward, true},
  };
  return e;
}

} // namespace cuda
} // namespace rt
} // namespace offload
