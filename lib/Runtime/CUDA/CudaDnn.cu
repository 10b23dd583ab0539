//===- CudaDnn.cu - cuBLAS and cuDNN ops of the CUDA backend --------------===//
//
// Part of offload. linear and matmul through cuBLAS (row-major products as
// the transposed column-major ones), conv2d / conv2d_backward_input /
// conv2d_backward_weight, batch_norm / batch_norm_backward, softmax and
// log_softmax (and backward) through cuDNN, with the semantics of the host
// kernels (LinAlg.cpp, Conv.cpp, Norm.cpp, Softmax.cpp).
//
// Precision and determinism: cuBLAS runs in its default math mode (FP32
// products in FP32, no TF32), with the plan's workspace set once by the
// backend; cuDNN convolutions use the algorithm that chooseConvAlgorithm
// picked at session creation among those cuDNN reports deterministic, with
// FMA math (no TF32 tensor cores), over the whole batch or, when no such
// algorithm fits the workspace, in batch slices (backward weight adds the
// slices' gradients in batch order). cuDNN's batch norm and softmax are
// reproducible run to run (cuDNN's "Reproducibility" notes list none of
// them). Batch norm falls back to the own kernels of CudaNormPool.cu when
// an operand cuDNN needs is absent (weight, bias, or a gradient output).
//
// bf16/f16 (run on an H200, docs/gpu.md): GEMMs through cublasGemmEx /
// cublasGemmStridedBatchedEx with CUBLAS_COMPUTE_32F (the backend disallows
// reduced-precision reductions), convolutions with bf16/f16 descriptors and
// an f32 compute type (tensor-core math allowed), a bias inside the one
// rounding of the result (as the GEMM's or the convolution's beta = 1
// operand); batch norm with a bf16/f16 input (f32 parameters and
// statistics) and softmax run the own kernels (CudaNormPool.cu).
//
//===----------------------------------------------------------------------===//

#include "CudaCommon.cuh"
#include "Kernels/Geometry.h"
#include "CudaNormPool.h"

#include <algorithm>
#include <climits>

namespace offload {
namespace rt {
namespace cuda {
namespace {

#define OFFLOAD_CUBLAS_TRY(name, call)                                         \
  do {                                                                         \
    cublasStatus_t _s = (call);                                                \
    if (_s != CUBLAS_STATUS_SUCCESS)                                           \
      return cublasErrorText(name, _s);                                        \
  } while (0)

#define OFFLOAD_CUDNN_TRY(name, call)                                          \
  do {                                                                         \
    cudnnStatus_t _s = (call);                                                 \
    if (_s != CUDNN_STATUS_SUCCESS)                                            \
      return cudnnErrorText(name, _s);                                         \
  } while (0)

bool isFloatType(DType t) { return t == DType::F32 || t == DType::F64; }
/// f32, f64, bf16 or f16: the dtypes of the cuBLAS / cuDNN kernels that
/// take low types (f32 accumulation).
bool isAnyFloatType(DType t) { return isFloatType(t) || isLowFloat(t); }

cudnnDataType_t dnnType(DType t) {
  switch (t) {
  case DType::F64: return CUDNN_DATA_DOUBLE;
  case DType::BF16: return CUDNN_DATA_BFLOAT16;
  case DType::F16: return CUDNN_DATA_HALF;
  default: return CUDNN_DATA_FLOAT;
  }
}
/// A convolution's compute (accumulation) type: f32 for bf16/f16 data
/// (cuDNN's PSEUDO_BFLOAT16 / PSEUDO_HALF configurations), else the data's.
cudnnDataType_t convComputeType(DType t) {
  return isLowFloat(t) ? CUDNN_DATA_FLOAT : dnnType(t);
}

bool fitsInt(int64_t v) { return v >= 0 && v <= INT_MAX; }

/// cuDNN's scaling factors: double for double data, float otherwise.
struct Scale {
  float f;
  double d;
  const void *ptr(DType t) const {
    return t == DType::F64 ? static_cast<const void *>(&d)
                           : static_cast<const void *>(&f);
  }
};
const Scale kOne{1.0f, 1.0}, kZero{0.0f, 0.0};

/// Owning cuDNN descriptors.
struct TensorDesc {
  cudnnTensorDescriptor_t d = nullptr;
  TensorDesc() = default;
  TensorDesc(const TensorDesc &) = delete;
  ~TensorDesc() {
    if (d)
      cudnnDestroyTensorDescriptor(d);
  }
  /// A packed NCHW tensor.
  cudnnStatus_t set(DType t, int64_t n, int64_t c, int64_t h, int64_t w) {
    cudnnStatus_t s = d ? CUDNN_STATUS_SUCCESS : cudnnCreateTensorDescriptor(&d);
    if (s != CUDNN_STATUS_SUCCESS)
      return s;
    return cudnnSetTensor4dDescriptor(d, CUDNN_TENSOR_NCHW, dnnType(t), int(n),
                                      int(c), int(h), int(w));
  }
};
struct FilterDesc {
  cudnnFilterDescriptor_t d = nullptr;
  FilterDesc() = default;
  FilterDesc(const FilterDesc &) = delete;
  ~FilterDesc() {
    if (d)
      cudnnDestroyFilterDescriptor(d);
  }
  cudnnStatus_t set(DType t, int64_t k, int64_t c, int64_t h, int64_t w) {
    cudnnStatus_t s = d ? CUDNN_STATUS_SUCCESS : cudnnCreateFilterDescriptor(&d);
    if (s != CUDNN_STATUS_SUCCESS)
      return s;
    return cudnnSetFilter4dDescriptor(d, dnnType(t), CUDNN_TENSOR_NCHW, int(k),
                                      int(c), int(h), int(w));
  }
};
struct ConvDesc {
  cudnnConvolutionDescriptor_t d = nullptr;
  ConvDesc() = default;
  ConvDesc(const ConvDesc &) = delete;
  ~ConvDesc() {
    if (d)
      cudnnDestroyConvolutionDescriptor(d);
  }
};

//===----------------------------------------------------------------------===//
// linear and matmul (cuBLAS)
//===----------------------------------------------------------------------===//

__global__ void biasRowsKernelF(float *y, const float *b, int64_t rows,
                                int64_t cols) {
  OFFLOAD_GRID_LOOP(i, rows * cols) y[i] = b[i % cols];
}
__global__ void biasRowsKernelD(double *y, const double *b, int64_t rows,
                                int64_t cols) {
  OFFLOAD_GRID_LOOP(i, rows * cols) y[i] = b[i % cols];
}
/// bf16/f16 bias rows: the bits, copied (the GEMM then reads them as C).
__global__ void biasRowsKernelH(uint16_t *y, const uint16_t *b, int64_t rows,
                                int64_t cols) {
  OFFLOAD_GRID_LOOP(i, rows * cols) y[i] = b[i % cols];
}

/// bf16/f16 conv bias: y[n, o, s] = b[o], the bits.
__global__ void biasChannelsKernelH(uint16_t *y, const uint16_t *b,
                                    int64_t total, int64_t channels,
                                    int64_t spatial) {
  OFFLOAD_GRID_LOOP(i, total) y[i] = b[(i / spatial) % channels];
}

/// cuBLAS's data type of a bf16/f16 operand.
cudaDataType_t lowDataType(DType t) {
  return t == DType::BF16 ? CUDA_R_16BF : CUDA_R_16F;
}

/// Row-major C[M,N] = alpha * op(A) op(B) + beta * C, batched with element
/// strides (0 = shared), as the column-major product C^T = op(B)^T op(A)^T.
std::string gemmBatched(cublasHandle_t h, DType dt, bool ta, bool tb,
                        int64_t m, int64_t n, int64_t k, const void *a,
                        int64_t strideA, const void *b, int64_t strideB,
                        double beta, void *c, int64_t strideC,
                        int64_t batch) {
  if (!fitsInt(m) || !fitsInt(n) || !fitsInt(k) || !fitsInt(batch))
    return "cuBLAS: dimensions exceed the 32-bit limit";
  cublasOperation_t opA = ta ? CUBLAS_OP_T : CUBLAS_OP_N;
  cublasOperation_t opB = tb ? CUBLAS_OP_T : CUBLAS_OP_N;
  int lda = int(ta ? m : k), ldb = int(tb ? k : n);
  if (isLowFloat(dt)) {
    // bf16/f16 operands and result, f32 accumulation (CUBLAS_COMPUTE_32F:
    // no TF32, no f16 accumulation; the backend sets
    // CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION, so split-K partial
    // sums stay f32 too). alpha * AB + beta * C is formed in f32 and rounded
    // once to the result type: the host's emulation up to the order of the
    // f32 sums.
    cudaDataType_t ty = lowDataType(dt);
    float alpha = 1.f, bf = float(beta);
    if (batch == 1)
      OFFLOAD_CUBLAS_TRY("cublasGemmEx",
                         cublasGemmEx(h, opB, opA, int(n), int(m), int(k),
                                      &alpha, b, ty, ldb, a, ty, lda, &bf, c,
                                      ty, int(n), CUBLAS_COMPUTE_32F,
                                      CUBLAS_GEMM_DEFAULT));
    else
      OFFLOAD_CUBLAS_TRY(
          "cublasGemmStridedBatchedEx",
          cublasGemmStridedBatchedEx(h, opB, opA, int(n), int(m), int(k),
                                     &alpha, b, ty, ldb, strideB, a, ty, lda,
                                     strideA, &bf, c, ty, int(n), strideC,
                                     int(batch), CUBLAS_COMPUTE_32F,
                                     CUBLAS_GEMM_DEFAULT));
  } else if (dt == DType::F32) {
    float alpha = 1.f, bf = float(beta);
    if (batch == 1)
      OFFLOAD_CUBLAS_TRY("cublasSgemm",
                         cublasSgemm(h, opB, opA, int(n), int(m), int(k),
                                     &alpha, static_cast<const float *>(b), ldb,
                                     static_cast<const float *>(a), lda, &bf,
                                     static_cast<float *>(c), int(n)));
    else
      OFFLOAD_CUBLAS_TRY(
          "cublasSgemmStridedBatched",
          cublasSgemmStridedBatched(
              h, opB, opA, int(n), int(m), int(k), &alpha,
              static_cast<const float *>(b), ldb, strideB,
              static_cast<const float *>(a), lda, strideA, &bf,
              static_cast<float *>(c), int(n), strideC, int(batch)));
  } else {
    double alpha = 1.0;
    if (batch == 1)
      OFFLOAD_CUBLAS_TRY("cublasDgemm",
                         cublasDgemm(h, opB, opA, int(n), int(m), int(k),
                                     &alpha, static_cast<const double *>(b),
                                     ldb, static_cast<const double *>(a), lda,
                                     &beta, static_cast<double *>(c), int(n)));
    else
      OFFLOAD_CUBLAS_TRY(
          "cublasDgemmStridedBatched",
          cublasDgemmStridedBatched(
              h, opB, opA, int(n), int(m), int(k), &alpha,
              static_cast<const double *>(b), ldb, strideB,
              static_cast<const double *>(a), lda, strideA, &beta,
              static_cast<double *>(c), int(n), strideC, int(batch)));
  }
  return "";
}

std::string zeroFill(void *p, size_t bytes, cudaStream_t s) {
  if (!bytes)
    return "";
  cudaError_t e = cudaMemsetAsync(p, 0, bytes, s);
  return e == cudaSuccess ? "" : cudaErrorText("cudaMemsetAsync", e);
}

/// linear: x[*,K], w[M,K], b[M]? -> y[*,M]; y = x w^T + b.
std::string kLinear(const CudaKernelArgs &a) {
  const char *op = "offload.linear";
  const TensorView &x = a.inputs[0], &w = a.inputs[1], &y = a.outputs[0];
  if (!isAnyFloatType(x.dtype))
    return std::string(op) + ": unsupported dtype " + dtypeName(x.dtype);
  if (w.dtype != x.dtype || y.dtype != x.dtype)
    return std::string(op) + ": x, w and y must have one dtype";
  if (x.rank() < 1 || w.rank() != 2)
    return std::string(op) + ": expected x[*,K] and w[M,K], got x " +
           shapeStr(x.shape) + " and w " + shapeStr(w.shape);
  int64_t k = x.shape.back(), m = w.shape[0];
  if (w.shape[1] != k)
    return std::string(op) + ": x " + shapeStr(x.shape) + " and w " +
           shapeStr(w.shape) + " disagree on K";
  bool hasBias = present(a.inputs, 2);
  if (hasBias && (a.inputs[2].dtype != x.dtype ||
                  a.inputs[2].shape != std::vector<int64_t>{m}))
    return std::string(op) + ": b must be " + dtypeName(x.dtype) + "[" +
           std::to_string(m) + "]";
  std::vector<int64_t> ys(x.shape.begin(), x.shape.end() - 1);
  ys.push_back(m);
  if (y.shape != ys)
    return std::string(op) + ": y has shape " + shapeStr(y.shape) +
           ", expected " + shapeStr(ys);
  int64_t rows = 1;
  for (size_t i = 0; i + 1 < x.shape.size(); ++i)
    rows *= x.shape[i];
  if (rows == 0 || m == 0)
    return "";
  if (hasBias) {
    if (x.dtype == DType::F32)
      biasRowsKernelF<<<blocksFor(rows * m), kThreads, 0, a.ctx.stream>>>(
          y.as<float>(), a.inputs[2].as<float>(), rows, m);
    else if (isLowFloat(x.dtype))
      biasRowsKernelH<<<blocksFor(rows * m), kThreads, 0, a.ctx.stream>>>(
          y.as<uint16_t>(), a.inputs[2].as<uint16_t>(), rows, m);
    else
      biasRowsKernelD<<<blocksFor(rows * m), kThreads, 0, a.ctx.stream>>>(
          y.as<double>(), a.inputs[2].as<double>(), rows, m);
    if (auto e = launched("linear bias"); !e.empty())
      return e;
  }
  if (k == 0)
    return hasBias ? "" : zeroFill(y.data, y.bytes(), a.ctx.stream);
  // y[rows,M] = x[rows,K] w^T.
  return gemmBatched(a.ctx.cublas, x.dtype, false, true, rows, m, k, x.data,
                     0, w.data, 0, hasBias ? 1.0 : 0.0, y.data, 0, 1);
}

/// matmul with transpose flags, 1-D operands and numpy-broadcast batch
/// dims (LinAlg.cpp's planMatmul).
std::string kMatmul(const CudaKernelArgs &a) {
  const char *op = "offload.matmul";
  const TensorView &A = a.inputs[0], &B = a.inputs[1], &C = a.outputs[0];
  if (!isAnyFloatType(A.dtype))
    return std::string(op) + ": unsupported dtype " + dtypeName(A.dtype);
  if (B.dtype != A.dtype || C.dtype != A.dtype)
    return std::string(op) + ": a, b and c must have one dtype";
  if (A.rank() < 1 || B.rank() < 1)
    return std::string(op) + ": operands must have rank >= 1, got " +
           shapeStr(A.shape) + " and " + shapeStr(B.shape);
  bool ta = a.attrs.getInt("transpose_a", 0) != 0 && A.rank() >= 2;
  bool tb = a.attrs.getInt("transpose_b", 0) != 0 && B.rank() >= 2;
  std::vector<int64_t> as = A.shape, bs = B.shape;
  bool dropM = false, dropN = false;
  if (as.size() == 1) {
    as.insert(as.begin(), 1);
    dropM = true;
  }
  if (bs.size() == 1) {
    bs.push_back(1);
    dropN = true;
  }
  size_t ar = as.size(), br = bs.size();
  int64_t m = ta ? as[ar - 1] : as[ar - 2];
  int64_t ka = ta ? as[ar - 2] : as[ar - 1];
  int64_t kb = tb ? bs[br - 1] : bs[br - 2];
  int64_t n = tb ? bs[br - 2] : bs[br - 1];
  if (ka != kb)
    return std::string(op) + ": contraction sizes differ: a " +
           shapeStr(A.shape) + " and b " + shapeStr(B.shape);
  int64_t k = ka;
  std::vector<int64_t> ab(as.begin(), as.end() - 2), bb(bs.begin(), bs.end() - 2);
  size_t nb = std::max(ab.size(), bb.size());
  std::vector<int64_t> batch(nb, 1), aStride(nb, 0), bStride(nb, 0);
  int64_t sa = 1, sb = 1;
  for (size_t i = 0; i < nb; ++i) {
    size_t d = nb - 1 - i;
    int64_t da = i < ab.size() ? ab[ab.size() - 1 - i] : 1;
    int64_t db = i < bb.size() ? bb[bb.size() - 1 - i] : 1;
    if (da != db && da != 1 && db != 1)
      return std::string(op) + ": batch dims of a " + shapeStr(A.shape) +
             " and b " + shapeStr(B.shape) + " do not broadcast";
    batch[d] = (da == 0 || db == 0) ? 0 : std::max(da, db);
    aStride[d] = da == 1 ? 0 : sa;
    bStride[d] = db == 1 ? 0 : sb;
    sa *= da;
    sb *= db;
  }
  std::vector<int64_t> cs = batch;
  if (!dropM)
    cs.push_back(m);
  if (!dropN)
    cs.push_back(n);
  if (C.shape != cs)
    return std::string(op) + ": c has shape " + shapeStr(C.shape) +
           ", expected " + shapeStr(cs);
  int64_t nbatch = 1;
  for (int64_t d : batch)
    nbatch *= d;
  if (nbatch == 0 || m == 0 || n == 0)
    return "";
  if (k == 0)
    return zeroFill(C.data, C.bytes(), a.ctx.stream);
  int64_t aBatch = sa, bBatch = sb;
  size_t es = dtypeSize(A.dtype);
  // a's matrices folded into M when b is shared: one product.
  if (bBatch == 1 && !ta && aBatch == nbatch)
    return gemmBatched(a.ctx.cublas, A.dtype, false, tb, nbatch * m, n, k,
                       A.data, 0, B.data, 0, 0.0, C.data, 0, 1);
  // Uniform batch strides (each operand contiguous over the batch or
  // shared): one strided-batched product.
  if ((aBatch == nbatch || aBatch == 1) && (bBatch == nbatch || bBatch == 1))
    return gemmBatched(a.ctx.cublas, A.dtype, ta, tb, m, n, k, A.data,
                       aBatch == 1 ? 0 : m * k, B.data,
                       bBatch == 1 ? 0 : k * n, 0.0, C.data, m * n, nbatch);
  // General broadcasting: one product per batch element.
  std::vector<int64_t> idx(nb, 0);
  for (int64_t i = 0; i < nbatch; ++i) {
    int64_t oa = 0, ob = 0;
    for (size_t d = 0; d < nb; ++d) {
      oa += idx[d] * aStride[d];
      ob += idx[d] * bStride[d];
    }
    if (auto e = gemmBatched(
            a.ctx.cublas, A.dtype, ta, tb, m, n, k,
            static_cast<const uint8_t *>(A.data) + size_t(oa * m * k) * es, 0,
            static_cast<const uint8_t *>(B.data) + size_t(ob * k * n) * es, 0,
            0.0, static_cast<uint8_t *>(C.data) + size_t(i * m * n) * es, 0,
            1);
        !e.empty())
      return e;
    for (size_t d = nb; d-- > 0;) {
      if (++idx[d] < batch[d])
        break;
      idx[d] = 0;
    }
  }
  return "";
}

//===----------------------------------------------------------------------===//
// Convolutions (cuDNN)
//===----------------------------------------------------------------------===//

/// Geometry of a 2-D convolution (Conv.cpp's makeGeom checks).
struct ConvGeom : geom::ConvWindow {
  bool empty() const { return n == 0 || o == 0 || oh == 0 || ow == 0; }
};

std::string convGeom(const char *op, const AttrMap &attrs,
                     const std::vector<int64_t> &xs,
                     const std::vector<int64_t> &ws, ConvGeom &g) {
  if (auto e = geom::convWindow(op, attrs, xs, ws, g); !e.empty())
    return e;
  for (int64_t v : {g.n, g.c, g.h, g.w, g.o, g.kh, g.kw, g.oh, g.ow, g.sh,
                    g.sw, g.ph, g.pw, g.dh, g.dw, g.g})
    if (!fitsInt(v))
      return std::string(op) + ": a dimension exceeds cuDNN's 32-bit limit";
  return "";
}

/// The descriptors of one convolution.
struct ConvDescs {
  TensorDesc x, y;
  FilterDesc w;
  ConvDesc conv;
};

std::string makeConvDescs(DType dt, const ConvGeom &g, int mathType,
                          ConvDescs &d) {
  OFFLOAD_CUDNN_TRY("cudnnSetTensor4dDescriptor", d.x.set(dt, g.n, g.c, g.h, g.w));
  OFFLOAD_CUDNN_TRY("cudnnSetTensor4dDescriptor",
                    d.y.set(dt, g.n, g.o, g.oh, g.ow));
  OFFLOAD_CUDNN_TRY("cudnnSetFilter4dDescriptor",
                    d.w.set(dt, g.o, g.c / g.g, g.kh, g.kw));
  OFFLOAD_CUDNN_TRY("cudnnCreateConvolutionDescriptor",
                    cudnnCreateConvolutionDescriptor(&d.conv.d));
  OFFLOAD_CUDNN_TRY("cudnnSetConvolution2dDescriptor",
                    cudnnSetConvolution2dDescriptor(
                        d.conv.d, int(g.ph), int(g.pw), int(g.sh), int(g.sw),
                        int(g.dh), int(g.dw), CUDNN_CROSS_CORRELATION,
                        convComputeType(dt)));
  OFFLOAD_CUDNN_TRY("cudnnSetConvolutionGroupCount",
                    cudnnSetConvolutionGroupCount(d.conv.d, int(g.g)));
  OFFLOAD_CUDNN_TRY("cudnnSetConvolutionMathType",
                    cudnnSetConvolutionMathType(d.conv.d,
                                                cudnnMathType_t(mathType)));
  int on, oc, oh, ow;
  OFFLOAD_CUDNN_TRY("cudnnGetConvolution2dForwardOutputDim",
                    cudnnGetConvolution2dForwardOutputDim(
                        d.conv.d, d.x.d, d.w.d, &on, &oc, &oh, &ow));
  if (on != g.n || oc != g.o || oh != g.oh || ow != g.ow)
    return "cudnnGetConvolution2dForwardOutputDim: cuDNN's output " +
           shapeStr({on, oc, oh, ow}) + " differs from the op's " +
           shapeStr({g.n, g.o, g.oh, g.ow});
  return "";
}

/// Which convolution an op is, and its geometry from its operands.
enum class ConvKind { Forward, BackwardData, BackwardFilter };

std::string convOperands(const std::string &opName,
                         const std::vector<TensorView> &ins,
                         const std::vector<TensorView> &outs,
                         const AttrMap &attrs, ConvKind &kind, ConvGeom &g,
                         DType &dt) {
  const char *op = opName.c_str();
  if (opName == "offload.conv2d") {
    kind = ConvKind::Forward;
    if (ins.size() < 2 || ins.size() > 3 || outs.size() != 1)
      return opName + ": expected 2 or 3 inputs and 1 output";
  } else if (opName == "offload.conv2d_backward_input") {
    kind = ConvKind::BackwardData;
    if (ins.size() != 2 || outs.size() != 1)
      return opName + ": expected 2 inputs and 1 output";
  } else {
    kind = ConvKind::BackwardFilter;
    if (ins.size() != 2 || outs.size() != 1)
      return opName + ": expected 2 inputs and 1 output";
  }
  dt = ins[0].dtype;
  if (!isAnyFloatType(dt))
    return opName + ": unsupported dtype " + dtypeName(dt);
  for (const auto *v : {&ins, &outs})
    for (const TensorView &t : *v)
      if (t.data && t.dtype != dt)
        return opName + ": operands must have one dtype";
  const std::vector<int64_t> &xs =
      kind == ConvKind::Forward          ? ins[0].shape
      : kind == ConvKind::BackwardData   ? outs[0].shape
                                         : ins[1].shape;
  const std::vector<int64_t> &ws =
      kind == ConvKind::BackwardFilter ? outs[0].shape : ins[1].shape;
  if (auto e = convGeom(op, attrs, xs, ws, g); !e.empty())
    return e;
  std::vector<int64_t> ys{g.n, g.o, g.oh, g.ow};
  const TensorView &y = kind == ConvKind::Forward ? outs[0] : ins[0];
  if (y.shape != ys)
    return opName + ": " + (kind == ConvKind::Forward ? "y" : "dy") +
           " has shape " + shapeStr(y.shape) + ", expected " + shapeStr(ys);
  if (kind == ConvKind::Forward && present(ins, 2) &&
      ins[2].shape != std::vector<int64_t>{g.o})
    return opName + ": b has shape " + shapeStr(ins[2].shape) + ", expected [" +
           std::to_string(g.o) + "]";
  return "";
}

bool tensorCoreMath(cudnnMathType_t m) {
  return m == CUDNN_TENSOR_OP_MATH || m == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION;
}

/// One algorithm of a heuristic ranking.
struct ConvPick {
  int algo = -1;
  int mathType = 0;
  size_t workspace = 0;
};

/// Takes the first usable result of a heuristic ranking: deterministic,
/// supported, FMA math, fitting in `limit`; records the smallest workspace
/// of the deterministic ones. For bf16/f16 data (`lowData`) tensor-core math
/// is allowed too (it multiplies the 16-bit values exactly and accumulates in
/// the f32 compute type; TF32 concerns f32 data only), but not
/// CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION (a down-conversion of f32 data).
template <typename Perf>
void pickFrom(const Perf *perf, int count, size_t limit, bool lowData,
              ConvPick &out, size_t &minNeeded) {
  for (int i = 0; i < count; ++i) {
    const Perf &p = perf[i];
    bool mathOk = lowData
                      ? p.mathType != CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION
                      : !tensorCoreMath(p.mathType);
    if (p.status != CUDNN_STATUS_SUCCESS ||
        p.determinism != CUDNN_DETERMINISTIC || !mathOk)
      continue;
    minNeeded = std::min(minNeeded, p.memory);
    if (out.algo < 0 && p.memory <= limit) {
      out.algo = int(p.algo);
      out.mathType = int(p.mathType);
      out.workspace = p.memory;
    }
  }
}

const char *convOpCall(ConvKind k) {
  switch (k) {
  case ConvKind::Forward:
    return "cudnnGetConvolutionForwardAlgorithm_v7";
  case ConvKind::BackwardData:
    return "cudnnGetConvolutionBackwardDataAlgorithm_v7";
  default:
    return "cudnnGetConvolutionBackwardFilterAlgorithm_v7";
  }
}

/// cuDNN's heuristic ranking for the convolution `kind` of geometry `g`
/// (g.n samples), through pickFrom: `out` is the first usable algorithm
/// within `limit` bytes (algo -1 when none), `minNeeded` the smallest
/// workspace of the deterministic ones (SIZE_MAX when none).
std::string rankConv(cudnnHandle_t h, ConvKind kind, DType dt,
                     const ConvGeom &g, size_t limit, ConvPick &out,
                     size_t &minNeeded) {
  out = ConvPick();
  minNeeded = SIZE_MAX;
  ConvDescs d;
  // bf16/f16: ranked with tensor-core math allowed on the descriptor (the
  // ranking's algorithms then may use it; pickFrom takes them).
  bool low = isLowFloat(dt);
  if (auto e = makeConvDescs(dt, g, low ? CUDNN_TENSOR_OP_MATH : CUDNN_FMA_MATH,
                             d);
      !e.empty())
    return e;
  int count = 0, got = 0;
  switch (kind) {
  case ConvKind::Forward: {
    OFFLOAD_CUDNN_TRY("cudnnGetConvolutionForwardAlgorithmMaxCount",
                      cudnnGetConvolutionForwardAlgorithmMaxCount(h, &count));
    std::vector<cudnnConvolutionFwdAlgoPerf_t> perf(size_t(std::max(count, 1)));
    OFFLOAD_CUDNN_TRY(convOpCall(kind),
                      cudnnGetConvolutionForwardAlgorithm_v7(
                          h, d.x.d, d.w.d, d.conv.d, d.y.d, count, &got,
                          perf.data()));
    pickFrom(perf.data(), got, limit, low, out, minNeeded);
    break;
  }
  case ConvKind::BackwardData: {
    OFFLOAD_CUDNN_TRY("cudnnGetConvolutionBackwardDataAlgorithmMaxCount",
                      cudnnGetConvolutionBackwardDataAlgorithmMaxCount(
                          h, &count));
    std::vector<cudnnConvolutionBwdDataAlgoPerf_t> perf(
        size_t(std::max(count, 1)));
    OFFLOAD_CUDNN_TRY(convOpCall(kind),
                      cudnnGetConvolutionBackwardDataAlgorithm_v7(
                          h, d.w.d, d.y.d, d.conv.d, d.x.d, count, &got,
                          perf.data()));
    pickFrom(perf.data(), got, limit, low, out, minNeeded);
    break;
  }
  case ConvKind::BackwardFilter: {
    OFFLOAD_CUDNN_TRY("cudnnGetConvolutionBackwardFilterAlgorithmMaxCount",
                      cudnnGetConvolutionBackwardFilterAlgorithmMaxCount(
                          h, &count));
    std::vector<cudnnConvolutionBwdFilterAlgoPerf_t> perf(
        size_t(std::max(count, 1)));
    OFFLOAD_CUDNN_TRY(convOpCall(kind),
                      cudnnGetConvolutionBackwardFilterAlgorithm_v7(
                          h, d.x.d, d.y.d, d.conv.d, d.w.d, count, &got,
                          perf.data()));
    pickFrom(perf.data(), got, limit, low, out, minNeeded);
    break;
  }
  }
  return "";
}

/// The batch slice sizes chooseConvAlgorithm tries for a batch of n, in
/// order: ceil(n/2), ceil(n/4), ... down to 1, each once.
std::vector<int64_t> batchSliceSizes(int64_t n) {
  std::vector<int64_t> sizes;
  for (int64_t d = 2;; d *= 2) {
    int64_t k = n / d + (n % d != 0);
    if (k < n && (sizes.empty() || sizes.back() != k))
      sizes.push_back(k);
    if (k <= 1 || d > n)
      break;
  }
  return sizes;
}

/// Runs the convolution of kind `kind` with the chosen algorithm, over the
/// whole batch or in the chosen batch slices.
std::string runConv(const CudaKernelArgs &a, const char *op, ConvKind kind) {
  ConvGeom g;
  DType dt;
  if (auto e = convOperands(op, a.inputs, a.outputs, a.attrs, kind, g, dt);
      !e.empty())
    return e;
  const CudaContext &ctx = a.ctx;
  if (g.empty()) {
    // Nothing to compute; gradients of an empty batch are zero.
    if (kind == ConvKind::BackwardFilter || kind == ConvKind::BackwardData)
      return zeroFill(a.outputs[0].data, a.outputs[0].bytes(), ctx.stream);
    return "";
  }
  const ConvChoice &c = a.conv;
  int64_t chunk = c.batchChunk > 0 && c.batchChunk < g.n ? c.batchChunk : g.n;
  if (c.algo < 0 || (g.n % chunk != 0 && c.restAlgo < 0))
    return std::string(op) + ": no cuDNN algorithm was chosen at session "
                             "creation";
  // The operands along the batch: x and y (forward), dy and dx (backward
  // data), dy and x (backward weight); w and dw are whole in every slice.
  size_t es = dtypeSize(dt);
  size_t xSample = size_t(g.c * g.h * g.w) * es;
  size_t ySample = size_t(g.o * g.oh * g.ow) * es;
  auto at = [](void *p, int64_t n, size_t sample) {
    return static_cast<void *>(static_cast<char *>(p) + size_t(n) * sample);
  };
  bool bias = kind == ConvKind::Forward && present(a.inputs, 2);
  // bf16/f16 with a bias: y starts as the broadcast bias (its bits) and the
  // convolution adds into it (beta 1), so y = round(conv + b) is rounded
  // once, as the host's emulation, not once for the convolution and again
  // for cudnnAddTensor.
  bool lowBias = bias && isLowFloat(dt);
  TensorDesc b;
  if (bias && !lowBias)
    OFFLOAD_CUDNN_TRY("cudnnSetTensor4dDescriptor", b.set(dt, 1, g.o, 1, 1));
  if (lowBias) {
    int64_t total = g.n * g.o * g.oh * g.ow;
    biasChannelsKernelH<<<blocksFor(total), kThreads, 0, ctx.stream>>>(
        a.outputs[0].as<uint16_t>(), a.inputs[2].as<uint16_t>(), total, g.o,
        g.oh * g.ow);
    if (auto e = launched("conv2d bias"); !e.empty())
      return e;
  }
  // At most two slice shapes: `chunk` samples, and the smaller last one.
  ConvDescs full, last;
  for (int64_t n0 = 0; n0 < g.n; n0 += chunk) {
    int64_t cnt = std::min(chunk, g.n - n0);
    bool rest = cnt != chunk;
    ConvDescs &d = rest ? last : full;
    int algo = rest ? c.restAlgo : c.algo;
    size_t need = rest ? c.restWorkspace : c.workspace;
    if (!d.conv.d) {
      ConvGeom gs = g;
      gs.n = cnt;
      if (auto e = makeConvDescs(dt, gs, rest ? c.restMathType : c.mathType, d);
          !e.empty())
        return std::string(op) + ": " + e;
    }
    void *ws = need ? ctx.workspace : nullptr;
    size_t wsBytes = need ? ctx.workspaceBytes : 0;
    switch (kind) {
    case ConvKind::Forward: {
      void *y = at(a.outputs[0].data, n0, ySample);
      OFFLOAD_CUDNN_TRY("cudnnConvolutionForward",
                        cudnnConvolutionForward(
                            ctx.cudnn, kOne.ptr(dt), d.x.d,
                            at(a.inputs[0].data, n0, xSample), d.w.d,
                            a.inputs[1].data, d.conv.d,
                            cudnnConvolutionFwdAlgo_t(algo), ws, wsBytes,
                            (lowBias ? kOne : kZero).ptr(dt), d.y.d, y));
      if (bias && !lowBias)
        OFFLOAD_CUDNN_TRY("cudnnAddTensor",
                          cudnnAddTensor(ctx.cudnn, kOne.ptr(dt), b.d,
                                         a.inputs[2].data, kOne.ptr(dt), d.y.d,
                                         y));
      break;
    }
    case ConvKind::BackwardData:
      OFFLOAD_CUDNN_TRY(
          "cudnnConvolutionBackwardData",
          cudnnConvolutionBackwardData(
              ctx.cudnn, kOne.ptr(dt), d.w.d, a.inputs[1].data, d.y.d,
              at(a.inputs[0].data, n0, ySample), d.conv.d,
              cudnnConvolutionBwdDataAlgo_t(algo), ws, wsBytes, kZero.ptr(dt),
              d.x.d, at(a.outputs[0].data, n0, xSample)));
      break;
    case ConvKind::BackwardFilter:
      // dw = sum over the slices in batch order: the first overwrites
      // (beta 0), the others add (beta 1).
      OFFLOAD_CUDNN_TRY(
          "cudnnConvolutionBackwardFilter",
          cudnnConvolutionBackwardFilter(
              ctx.cudnn, kOne.ptr(dt), d.x.d,
              at(a.inputs[1].data, n0, xSample), d.y.d,
              at(a.inputs[0].data, n0, ySample), d.conv.d,
              cudnnConvolutionBwdFilterAlgo_t(algo), ws, wsBytes,
              (n0 == 0 ? kZero : kOne).ptr(dt), d.w.d, a.outputs[0].data));
      break;
    }
  }
  return "";
}

std::string kConv2d(const CudaKernelArgs &a) {
  return runConv(a, "offload.conv2d", ConvKind::Forward);
}
std::string kConv2dBackwardInput(const CudaKernelArgs &a) {
  return runConv(a, "offload.conv2d_backward_input", ConvKind::BackwardData);
}
std::string kConv2dBackwardWeight(const CudaKernelArgs &a) {
  return runConv(a, "offload.conv2d_backward_weight",
                 ConvKind::BackwardFilter);
}

//===----------------------------------------------------------------------===//
// Batch norm (cuDNN, own kernels when an operand cuDNN needs is absent)
//===----------------------------------------------------------------------===//

std::string kBatchNorm(const CudaKernelArgs &a) {
  BnShape g;
  if (auto e = checkBatchNorm(a, g); !e.empty())
    return e;
  const TensorView &x = a.inputs[0];
  DType dt = x.dtype;
  bool affine = present(a.inputs, 1) && present(a.inputs, 2);
  if (g.c == 0 || g.count() == 0)
    return "";
  // A bf16/f16 input (f32 parameters and statistics): the own kernels,
  // which compute in f32/double as the host's emulation.
  if (!affine || isLowFloat(dt) || !fitsInt(g.n) || !fitsInt(g.c) ||
      !fitsInt(g.s))
    return batchNormOwn(a, g);
  double mom = a.attrs.getFloat("momentum", 0.1);
  double eps = a.attrs.getFloat("eps", 1e-5);
  // cuDNN updates the running statistics in place: start from the inputs.
  bool running = present(a.inputs, 3) && present(a.outputs, 3) &&
                 present(a.inputs, 4) && present(a.outputs, 4);
  if (running)
    for (size_t i : {size_t(3), size_t(4)})
      if (a.inputs[i].data != a.outputs[i].data) {
        cudaError_t e = cudaMemcpyAsync(a.outputs[i].data, a.inputs[i].data,
                                        a.inputs[i].bytes(),
                                        cudaMemcpyDeviceToDevice, a.ctx.stream);
        if (e != cudaSuccess)
          return cudaErrorText("cudaMemcpyAsync", e);
      }
  TensorDesc xd, bd;
  OFFLOAD_CUDNN_TRY("cudnnSetTensor4dDescriptor", xd.set(dt, g.n, g.c, g.s, 1));
  OFFLOAD_CUDNN_TRY("cudnnSetTensor4dDescriptor", bd.set(dt, 1, g.c, 1, 1));
  OFFLOAD_CUDNN_TRY(
      "cudnnBatchNormalizationForwardTraining",
      cudnnBatchNormalizationForwardTraining(
          a.ctx.cudnn, CUDNN_BATCHNORM_SPATIAL, kOne.ptr(dt), kZero.ptr(dt),
          xd.d, x.data, xd.d, a.outputs[0].data, bd.d, a.inputs[1].data,
          a.inputs[2].data, mom, running ? a.outputs[3].data : nullptr,
          running ? a.outputs[4].data : nullptr, eps, a.outputs[1].data,
          a.outputs[2].data));
  return "";
}

std::string kBatchNormBackward(const CudaKernelArgs &a) {
  BnShape g;
  if (auto e = checkBatchNormBackward(a, g); !e.empty())
    return e;
  const TensorView &x = a.inputs[1];
  DType dt = x.dtype;
  if (g.count() == 0) {
    // Empty batch: gradients of the affine parameters are zero.
    for (size_t i = 1; i < 3; ++i)
      if (present(a.outputs, i))
        if (auto e = zeroFill(a.outputs[i].data, a.outputs[i].bytes(),
                              a.ctx.stream);
            !e.empty())
          return e;
    return "";
  }
  bool all = present(a.inputs, 2) && present(a.outputs, 0) &&
             present(a.outputs, 1) && present(a.outputs, 2);
  if (!all || isLowFloat(dt) || !fitsInt(g.n) || !fitsInt(g.c) ||
      !fitsInt(g.s))
    return batchNormBackwardOwn(a, g);
  double eps = a.attrs.getFloat("eps", 1e-5);
  TensorDesc xd, bd;
  OFFLOAD_CUDNN_TRY("cudnnSetTensor4dDescriptor", xd.set(dt, g.n, g.c, g.s, 1));
  OFFLOAD_CUDNN_TRY("cudnnSetTensor4dDescriptor", bd.set(dt, 1, g.c, 1, 1));
  OFFLOAD_CUDNN_TRY(
      "cudnnBatchNormalizationBackward",
      cudnnBatchNormalizationBackward(
          a.ctx.cudnn, CUDNN_BATCHNORM_SPATIAL, kOne.ptr(dt), kZero.ptr(dt),
          kOne.ptr(dt), kZero.ptr(dt), xd.d, x.data, xd.d, a.inputs[0].data,
          xd.d, a.outputs[0].data, bd.d, a.inputs[2].data, a.outputs[1].data,
          a.outputs[2].data, eps, a.inputs[3].data, a.inputs[4].data));
  return "";
}

//===----------------------------------------------------------------------===//
// softmax, log_softmax (cuDNN, channel mode) and their backward (own)
//===----------------------------------------------------------------------===//

/// x viewed as [outer, n, inner] around attribute `dim`.
std::string softmaxLines(const CudaKernelArgs &a, const char *op,
                         const TensorView &x, int64_t &outer, int64_t &n,
                         int64_t &inner) {
  int64_t dim = a.attrs.getInt("dim", -1);
  int64_t rank = std::max<int64_t>(1, x.rank());
  if (dim < 0)
    dim += rank;
  if (dim < 0 || dim >= rank)
    return std::string(op) + ": dim out of range for rank " +
           std::to_string(x.rank());
  outer = n = inner = 1;
  if (x.rank() == 0)
    return "";
  for (int64_t i = 0; i < dim; ++i)
    outer *= x.shape[size_t(i)];
  n = x.shape[size_t(dim)];
  for (int64_t i = dim + 1; i < x.rank(); ++i)
    inner *= x.shape[size_t(i)];
  if (!fitsInt(outer) || !fitsInt(n) || !fitsInt(inner))
    return std::string(op) + ": a dimension exceeds cuDNN's 32-bit limit";
  return "";
}

std::string softmaxForward(const CudaKernelArgs &a, const char *op,
                           bool isLog) {
  const TensorView &x = a.inputs[0], &y = a.outputs[0];
  if (auto e = needAnyFloat(x, op, "x"); !e.empty())
    return e;
  if (auto e = needSame(x, y, op, "x", "y"); !e.empty())
    return e;
  int64_t outer, n, inner;
  if (auto e = softmaxLines(a, op, x, outer, n, inner); !e.empty())
    return e;
  if (x.numel() == 0)
    return "";
  if (isLowFloat(x.dtype))
    return softmaxLowLines(a, isLog, outer, n, inner);
  TensorDesc d;
  OFFLOAD_CUDNN_TRY("cudnnSetTensor4dDescriptor",
                    d.set(x.dtype, outer, n, inner, 1));
  OFFLOAD_CUDNN_TRY("cudnnSoftmaxForward",
                    cudnnSoftmaxForward(
                        a.ctx.cudnn,
                        isLog ? CUDNN_SOFTMAX_LOG : CUDNN_SOFTMAX_ACCURATE,
                        CUDNN_SOFTMAX_MODE_CHANNEL, kOne.ptr(x.dtype), d.d,
                        x.data, kZero.ptr(x.dtype), d.d, y.data));
  return "";
}

std::string softmaxBackward(const CudaKernelArgs &a, const char *op,
                            bool isLog) {
  const TensorView &dy = a.inputs[0], &y = a.inputs[1], &dx = a.outputs[0];
  if (auto e = needAnyFloat(dy, op, "dy"); !e.empty())
    return e;
  if (auto e = needSame(dy, y, op, "dy", "y"); !e.empty())
    return e;
  if (auto e = needSame(dy, dx, op, "dy", "dx"); !e.empty())
    return e;
  int64_t outer, n, inner;
  if (auto e = softmaxLines(a, op, y, outer, n, inner); !e.empty())
    return e;
  if (y.numel() == 0)
    return "";
  // Own kernel, not cudnnSoftmaxBackward (CudaNormPool.h says why).
  return softmaxBackwardLines(a, isLog, outer, n, inner);
}

std::string kSoftmax(const CudaKernelArgs &a) {
  return softmaxForward(a, "softmax", false);
}
std::string kLogSoftmax(const CudaKernelArgs &a) {
  return softmaxForward(a, "log_softmax", true);
}
std::string kSoftmaxBackward(const CudaKernelArgs &a) {
  return softmaxBackward(a, "softmax_backward", false);
}
std::string kLogSoftmaxBackward(const CudaKernelArgs &a) {
  return softmaxBackward(a, "log_softmax_backward", true);
}

} // namespace

std::string chooseConvAlgorithm(const std::string &op,
                                const std::vector<TensorView> &inputs,
                                const std::vector<TensorView> &outputs,
                                const AttrMap &attrs, const CudaContext &ctx,
                                ConvChoice &out, size_t *needed) {
  if (needed)
    *needed = 0;
  out = ConvChoice();
  ConvKind kind;
  ConvGeom g;
  DType dt;
  if (auto e = convOperands(op, inputs, outputs, attrs, kind, g, dt);
      !e.empty())
    return e;
  if (g.empty()) {
    out.algo = 0; // never run: the kernel handles empty operands itself
    return "";
  }
  size_t limit = ctx.workspaceBytes;
  ConvPick whole;
  size_t wholeMin = SIZE_MAX;
  if (auto e = rankConv(ctx.cudnn, kind, dt, g, limit, whole, wholeMin);
      !e.empty())
    return e;
  if (whole.algo >= 0) {
    out.algo = whole.algo;
    out.mathType = whole.mathType;
    out.workspace = whole.workspace;
    return "";
  }
  // Batch slices: the largest size whose slice (and smaller last slice)
  // each have a deterministic algorithm within the workspace.
  size_t sliceMin = SIZE_MAX; // the least workspace a slice size needs
  int64_t sliceMinSize = 0;
  for (int64_t k : batchSliceSizes(g.n)) {
    ConvGeom gs = g;
    gs.n = k;
    ConvPick p, r;
    size_t pMin, rMin = 0;
    if (auto e = rankConv(ctx.cudnn, kind, dt, gs, limit, p, pMin); !e.empty())
      return e;
    int64_t rest = g.n % k;
    if (rest) {
      gs.n = rest;
      if (auto e = rankConv(ctx.cudnn, kind, dt, gs, limit, r, rMin);
          !e.empty())
        return e;
    }
    if (p.algo >= 0 && (!rest || r.algo >= 0)) {
      out.algo = p.algo;
      out.mathType = p.mathType;
      out.workspace = p.workspace;
      out.batchChunk = k;
      if (rest) {
        out.restAlgo = r.algo;
        out.restMathType = r.mathType;
        out.restWorkspace = r.workspace;
      }
      return "";
    }
    size_t need = std::max(pMin, rMin);
    if (need < sliceMin) {
      sliceMin = need;
      sliceMinSize = k;
    }
  }
  if (wholeMin == SIZE_MAX && sliceMin == SIZE_MAX)
    return std::string(isLowFloat(dt)
                           ? "cuDNN offers no deterministic algorithm for this "
                             "convolution ("
                           : "cuDNN offers no deterministic algorithm without "
                             "tensor-core math for this convolution (") +
           std::string(dtypeName(dt)) + ", input " +
           shapeStr({g.n, g.c, g.h, g.w}) + ", weight " +
           shapeStr({g.o, g.c / g.g, g.kh, g.kw}) + ")";
  if (needed)
    *needed = std::min(wholeMin, sliceMin);
  std::string msg = "no deterministic cuDNN algorithm fits in the plan's "
                    "workspace of " +
                    std::to_string(limit) + " bytes: ";
  msg += wholeMin == SIZE_MAX
             ? std::string("cuDNN offers none for the whole batch")
             : "the smallest needs " + std::to_string(wholeMin) + " bytes";
  if (sliceMinSize > 0)
    msg += "; in batch slices, the least is " + std::to_string(sliceMin) +
           " bytes (slices of " + std::to_string(sliceMinSize) + " of " +
           std::to_string(g.n) + " samples)";
  return msg;
}

std::string smallestConvWorkspace(cudnnHandle_t cudnn, const std::string &op,
                                  const std::vector<TensorView> &inputs,
                                  const std::vector<TensorView> &outputs,
                                  const AttrMap &attrs, int64_t batch,
                                  size_t &bytes) {
  bytes = SIZE_MAX;
  ConvKind kind;
  ConvGeom g;
  DType dt;
  if (auto e = convOperands(op, inputs, outputs, attrs, kind, g, dt);
      !e.empty())
    return e;
  if (batch < 0 || batch > g.n)
    return op + ": batch slice of " + std::to_string(batch) +
           " samples outside the batch of " + std::to_string(g.n);
  if (batch > 0)
    g.n = batch;
  if (g.empty()) {
    bytes = 0;
    return "";
  }
  ConvPick p;
  return rankConv(cudnn, kind, dt, g, 0, p, bytes);
}

const std::vector<Entry> &dnnEntries() {
  static const std::vector<Entry> e = {
      {"offload.linear", kLinear, true},
      {"offload.matmul", kMatmul, true},
      {"offload.conv2d", kConv2d, true},
      {"offload.conv2d_backward_input", kConv2dBackwardInput, true},
      {"offload.conv2d_backward_weight", kConv2dBackwardWeight, true},
      {"offload.batch_norm", kBatchNorm, true},
      {"offload.batch_norm_backward", kBatchNormBackward, true},
      {"offload.softmax", kSoftmax, true},
      {"offload.softmax_backward", kSoftmaxBackward, true},
      {"offload.log_softmax", kLogSoftmax, true},
      {"offload.log_softmax_backward", kLogSoftmaxBackward, true},
  };
  return e;
}

} // namespace cuda
} // namespace rt
} // namespace offload
