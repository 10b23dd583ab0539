//===- CudaKernels.cu - CUDA kernels for the CUDA backend -----------------===//
//
// Part of offload. Kernels for an MLP with ReLU, cross-entropy and SGD/AdamW:
// linear and matmul (cuBLAS), relu, relu_backward, add/sub/mul (numpy
// broadcasting), add_scalar/mul_scalar, reduce_sum, fill, cross_entropy,
// cross_entropy_backward, sgd_update, adamw_update. Semantics follow
// docs/op-semantics.md (PyTorch 1.13 ATen).
//
//===----------------------------------------------------------------------===//

#include "CudaKernels.h"

#include <cmath>
#include <cstring>

namespace offload {
namespace rt {
namespace cuda {

std::string cudaErrorText(const char *call, cudaError_t err) {
  return std::string(call) + ": " + cudaGetErrorString(err) + " (" +
         cudaGetErrorName(err) + ")";
}

std::string cublasErrorText(const char *call, cublasStatus_t st) {
  return std::string(call) + ": cuBLAS status " + std::to_string(int(st));
}

namespace {

constexpr int kThreads = 256;
constexpr int kMaxRank = 8;

inline int blocksFor(int64_t n) {
  int64_t b = (n + kThreads - 1) / kThreads;
  return int(b < 1 ? 1 : (b > 65535 * 32 ? 65535 * 32 : b));
}

std::string launched(const char *what) {
  cudaError_t e = cudaGetLastError();
  return e == cudaSuccess ? std::string() : cudaErrorText(what, e);
}

std::string needF32(const CudaKernelArgs &a, const char *op) {
  for (const TensorView &v : a.inputs)
    if (v.data && v.dtype != DType::F32 && v.dtype != DType::I64)
      return std::string(op) + ": the CUDA backend supports f32 only, got " +
             dtypeName(v.dtype);
  for (const TensorView &v : a.outputs)
    if (v.dtype != DType::F32 && v.dtype != DType::I64)
      return std::string(op) + ": the CUDA backend supports f32 only, got " +
             dtypeName(v.dtype);
  return "";
}

//===--------------------------------------------------------------------===//
// Elementwise
//===--------------------------------------------------------------------===//

__global__ void reluKernel(const float *x, float *y, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x)
    y[i] = x[i] > 0.f ? x[i] : 0.f;
}

__global__ void reluBackwardKernel(const float *dy, const float *y, float *dx,
                                   int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x)
    dx[i] = y[i] > 0.f ? dy[i] : 0.f;
}

__global__ void scalarKernel(const float *x, float *y, int64_t n, float v,
                             int mul) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x)
    y[i] = mul ? x[i] * v : x[i] + v;
}

template <typename T> __global__ void fillKernel(T *y, int64_t n, T v) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x)
    y[i] = v;
}

struct Bcast {
  int rank;
  int64_t shape[kMaxRank];
  int64_t sa[kMaxRank], sb[kMaxRank]; // element strides, 0 when broadcast
};

/// Strides of `in` broadcast to `out` (numpy rules, right-aligned).
bool broadcastStrides(const std::vector<int64_t> &in,
                      const std::vector<int64_t> &out, int64_t *strides) {
  int r = int(out.size()), ri = int(in.size());
  if (ri > r)
    return false;
  int64_t s = 1;
  for (int d = r - 1; d >= 0; --d) {
    int di = d - (r - ri);
    if (di < 0) {
      strides[d] = 0;
      continue;
    }
    if (in[size_t(di)] == out[size_t(d)])
      strides[d] = s;
    else if (in[size_t(di)] == 1)
      strides[d] = 0;
    else
      return false;
    s *= in[size_t(di)];
  }
  return true;
}

__global__ void binaryKernel(const float *a, const float *b, float *c,
                             int64_t n, Bcast bc, int op) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    int64_t rem = i, ia = 0, ib = 0;
    for (int d = bc.rank - 1; d >= 0; --d) {
      int64_t idx = rem % bc.shape[d];
      rem /= bc.shape[d];
      ia += idx * bc.sa[d];
      ib += idx * bc.sb[d];
    }
    float x = a[ia], y = b[ib];
    c[i] = op == 0 ? x + y : op == 1 ? x - y : op == 2 ? x * y : x / y;
  }
}

std::string binary(const CudaKernelArgs &a, int op, const char *name) {
  if (std::string e = needF32(a, name); !e.empty())
    return e;
  if (a.inputs.size() != 2 || a.outputs.size() != 1)
    return std::string(name) + ": expects 2 inputs and 1 output";
  const TensorView &x = a.inputs[0], &y = a.inputs[1], &z = a.outputs[0];
  if (z.rank() > kMaxRank)
    return std::string(name) + ": rank above 8 is not supported";
  Bcast bc{};
  bc.rank = int(z.rank());
  for (int d = 0; d < bc.rank; ++d)
    bc.shape[d] = z.shape[size_t(d)];
  if (!broadcastStrides(x.shape, z.shape, bc.sa) ||
      !broadcastStrides(y.shape, z.shape, bc.sb))
    return std::string(name) + ": operands do not broadcast to the result";
  int64_t n = z.numel();
  if (n == 0)
    return "";
  binaryKernel<<<blocksFor(n), kThreads, 0, a.stream>>>(
      x.as<float>(), y.as<float>(), z.as<float>(), n, bc, op);
  return launched(name);
}

std::string kAdd(const CudaKernelArgs &a) { return binary(a, 0, "add"); }
std::string kSub(const CudaKernelArgs &a) { return binary(a, 1, "sub"); }
std::string kMul(const CudaKernelArgs &a) { return binary(a, 2, "mul"); }
std::string kDiv(const CudaKernelArgs &a) { return binary(a, 3, "div"); }

std::string kRelu(const CudaKernelArgs &a) {
  if (std::string e = needF32(a, "relu"); !e.empty())
    return e;
  int64_t n = a.outputs[0].numel();
  if (n == 0)
    return "";
  reluKernel<<<blocksFor(n), kThreads, 0, a.stream>>>(
      a.inputs[0].as<float>(), a.outputs[0].as<float>(), n);
  return launched("relu");
}

std::string kReluBackward(const CudaKernelArgs &a) {
  if (std::string e = needF32(a, "relu_backward"); !e.empty())
    return e;
  int64_t n = a.outputs[0].numel();
  if (n == 0)
    return "";
  reluBackwardKernel<<<blocksFor(n), kThreads, 0, a.stream>>>(
      a.inputs[0].as<float>(), a.inputs[1].as<float>(),
      a.outputs[0].as<float>(), n);
  return launched("relu_backward");
}

std::string scalarOp(const CudaKernelArgs &a, int mul, const char *name) {
  if (std::string e = needF32(a, name); !e.empty())
    return e;
  int64_t n = a.outputs[0].numel();
  if (n == 0)
    return "";
  scalarKernel<<<blocksFor(n), kThreads, 0, a.stream>>>(
      a.inputs[0].as<float>(), a.outputs[0].as<float>(), n,
      float(a.attrs.getFloat("value", 0.0)), mul);
  return launched(name);
}
std::string kAddScalar(const CudaKernelArgs &a) {
  return scalarOp(a, 0, "add_scalar");
}
std::string kMulScalar(const CudaKernelArgs &a) {
  return scalarOp(a, 1, "mul_scalar");
}

std::string kFill(const CudaKernelArgs &a) {
  const TensorView &y = a.outputs[0];
  int64_t n = y.numel();
  if (n == 0)
    return "";
  double v = a.attrs.getFloat("value", 0.0);
  switch (y.dtype) {
  case DType::F32:
    fillKernel<float>
        <<<blocksFor(n), kThreads, 0, a.stream>>>(y.as<float>(), n, float(v));
    break;
  case DType::F64:
    fillKernel<double>
        <<<blocksFor(n), kThreads, 0, a.stream>>>(y.as<double>(), n, v);
    break;
  case DType::I64:
    fillKernel<int64_t><<<blocksFor(n), kThreads, 0, a.stream>>>(
        y.as<int64_t>(), n, int64_t(v));
    break;
  case DType::I32:
    fillKernel<int32_t><<<blocksFor(n), kThreads, 0, a.stream>>>(
        y.as<int32_t>(), n, int32_t(v));
    break;
  case DType::Bool:
    fillKernel<uint8_t><<<blocksFor(n), kThreads, 0, a.stream>>>(
        y.as<uint8_t>(), n, uint8_t(v != 0));
    break;
  }
  return launched("fill");
}

//===--------------------------------------------------------------------===//
// Reductions
//===--------------------------------------------------------------------===//

struct ReduceDesc {
  int rank;
  int64_t shape[kMaxRank];
  int64_t stride[kMaxRank];
  int reduced[kMaxRank]; // 1 if the dim is summed
};

__global__ void reduceSumKernel(const float *x, float *y, int64_t nOut,
                                int64_t nRed, ReduceDesc rd) {
  for (int64_t o = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; o < nOut;
       o += int64_t(gridDim.x) * blockDim.x) {
    // Base offset from the kept dims (row-major over kept dims).
    int64_t rem = o, base = 0;
    for (int d = rd.rank - 1; d >= 0; --d) {
      if (rd.reduced[d])
        continue;
      int64_t idx = rem % rd.shape[d];
      rem /= rd.shape[d];
      base += idx * rd.stride[d];
    }
    double acc = 0;
    for (int64_t r = 0; r < nRed; ++r) {
      int64_t rr = r, off = base;
      for (int d = rd.rank - 1; d >= 0; --d) {
        if (!rd.reduced[d])
          continue;
        int64_t idx = rr % rd.shape[d];
        rr /= rd.shape[d];
        off += idx * rd.stride[d];
      }
      acc += x[off];
    }
    y[o] = float(acc);
  }
}

std::string kReduceSum(const CudaKernelArgs &a) {
  if (std::string e = needF32(a, "reduce_sum"); !e.empty())
    return e;
  const TensorView &x = a.inputs[0], &y = a.outputs[0];
  if (x.rank() > kMaxRank)
    return "reduce_sum: rank above 8 is not supported";
  ReduceDesc rd{};
  rd.rank = int(x.rank());
  std::vector<int64_t> dims = a.attrs.getInts("dims");
  int64_t s = 1;
  for (int d = rd.rank - 1; d >= 0; --d) {
    rd.shape[d] = x.shape[size_t(d)];
    rd.stride[d] = s;
    s *= x.shape[size_t(d)];
  }
  if (dims.empty())
    for (int d = 0; d < rd.rank; ++d)
      rd.reduced[d] = 1;
  for (int64_t d : dims) {
    int64_t dd = d < 0 ? d + rd.rank : d;
    if (dd < 0 || dd >= rd.rank)
      return "reduce_sum: dim out of range";
    rd.reduced[dd] = 1;
  }
  int64_t nRed = 1;
  for (int d = 0; d < rd.rank; ++d)
    if (rd.reduced[d])
      nRed *= rd.shape[d];
  int64_t nOut = y.numel();
  if (nOut * nRed != x.numel() && x.numel() != 0)
    return "reduce_sum: result shape does not match dims";
  if (nOut == 0)
    return "";
  reduceSumKernel<<<blocksFor(nOut), kThreads, 0, a.stream>>>(
      x.as<float>(), y.as<float>(), nOut, nRed, rd);
  return launched("reduce_sum");
}

//===--------------------------------------------------------------------===//
// Linear algebra (cuBLAS, row-major via the transposed column-major product)
//===--------------------------------------------------------------------===//

__global__ void biasRowsKernel(float *y, const float *b, int64_t rows,
                               int64_t cols) {
  int64_t n = rows * cols;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x)
    y[i] = b[i % cols];
}

std::string kLinear(const CudaKernelArgs &a) {
  if (std::string e = needF32(a, "linear"); !e.empty())
    return e;
  const TensorView &x = a.inputs[0], &w = a.inputs[1], &y = a.outputs[0];
  bool hasBias = a.inputs.size() > 2 && a.inputs[2].data;
  if (x.rank() < 1 || w.rank() != 2)
    return "linear: expects x[*,K] and w[M,K]";
  int64_t K = x.shape.back(), M = w.shape[0];
  if (w.shape[1] != K || y.shape.back() != M)
    return "linear: shapes do not agree";
  int64_t R = x.numel() / (K ? K : 1);
  if (R == 0 || M == 0)
    return "";
  float beta = 0.f, alpha = 1.f;
  if (hasBias) {
    biasRowsKernel<<<blocksFor(R * M), kThreads, 0, a.stream>>>(
        y.as<float>(), a.inputs[2].as<float>(), R, M);
    if (std::string e = launched("linear bias"); !e.empty())
      return e;
    beta = 1.f;
  }
  if (K == 0) {
    if (!hasBias)
      fillKernel<float><<<blocksFor(R * M), kThreads, 0, a.stream>>>(
          y.as<float>(), R * M, 0.f);
    return launched("linear");
  }
  cublasSetStream(a.cublas, a.stream);
  // y^T[M,R] = W[M,K] * X^T[K,R] in column-major terms.
  cublasStatus_t st =
      cublasSgemm(a.cublas, CUBLAS_OP_T, CUBLAS_OP_N, int(M), int(R), int(K),
                  &alpha, w.as<float>(), int(K), x.as<float>(), int(K), &beta,
                  y.as<float>(), int(M));
  if (st != CUBLAS_STATUS_SUCCESS)
    return cublasErrorText("cublasSgemm", st);
  return "";
}

std::string kMatmul(const CudaKernelArgs &a) {
  if (std::string e = needF32(a, "matmul"); !e.empty())
    return e;
  const TensorView &A = a.inputs[0], &B = a.inputs[1], &C = a.outputs[0];
  if (A.rank() < 2 || B.rank() < 2 || C.rank() < 2)
    return "matmul: operands need rank >= 2";
  bool ta = a.attrs.getInt("transpose_a", 0) != 0;
  bool tb = a.attrs.getInt("transpose_b", 0) != 0;
  int64_t M =
      ta ? A.shape[size_t(A.rank() - 1)] : A.shape[size_t(A.rank() - 2)];
  int64_t K =
      ta ? A.shape[size_t(A.rank() - 2)] : A.shape[size_t(A.rank() - 1)];
  int64_t Kb =
      tb ? B.shape[size_t(B.rank() - 1)] : B.shape[size_t(B.rank() - 2)];
  int64_t N =
      tb ? B.shape[size_t(B.rank() - 2)] : B.shape[size_t(B.rank() - 1)];
  if (K != Kb || C.shape[size_t(C.rank() - 2)] != M ||
      C.shape[size_t(C.rank() - 1)] != N)
    return "matmul: shapes do not agree";
  int64_t batchA = A.numel() / (M * K ? M * K : 1);
  int64_t batchB = B.numel() / (K * N ? K * N : 1);
  int64_t batchC = C.numel() / (M * N ? M * N : 1);
  if (!((batchA == batchC || batchA == 1) && (batchB == batchC || batchB == 1)))
    return "matmul: the CUDA backend broadcasts batch dims only when equal "
           "or when one operand has none";
  if (M * N * batchC == 0)
    return "";
  float alpha = 1.f, beta = 0.f;
  cublasSetStream(a.cublas, a.stream);
  // Row-major C = op(A) op(B)  <=>  column-major C^T = op(B)^T op(A)^T.
  cublasOperation_t opB = tb ? CUBLAS_OP_T : CUBLAS_OP_N;
  cublasOperation_t opA = ta ? CUBLAS_OP_T : CUBLAS_OP_N;
  int ldb = int(tb ? K : N), lda = int(ta ? M : K);
  cublasStatus_t st = cublasSgemmStridedBatched(
      a.cublas, opB, opA, int(N), int(M), int(K), &alpha, B.as<float>(), ldb,
      batchB == 1 ? 0 : K * N, A.as<float>(), lda, batchA == 1 ? 0 : M * K,
      &beta, C.as<float>(), int(N), M * N, int(batchC));
  if (st != CUBLAS_STATUS_SUCCESS)
    return cublasErrorText("cublasSgemmStridedBatched", st);
  return "";
}

//===--------------------------------------------------------------------===//
// Cross-entropy (one block; deterministic order)
//===--------------------------------------------------------------------===//

struct CeParams {
  int64_t N, C, ignoreIndex;
  float smoothing;
  int mean;
};

__device__ float blockReduceSum(float v, float *shm) {
  shm[threadIdx.x] = v;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s)
      shm[threadIdx.x] += shm[threadIdx.x + s];
    __syncthreads();
  }
  float r = shm[0];
  __syncthreads();
  return r;
}

__device__ float blockReduceMax(float v, float *shm) {
  shm[threadIdx.x] = v;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s)
      shm[threadIdx.x] = fmaxf(shm[threadIdx.x], shm[threadIdx.x + s]);
    __syncthreads();
  }
  float r = shm[0];
  __syncthreads();
  return r;
}

__global__ void crossEntropyKernel(const float *logits, const int64_t *target,
                                   float *loss, CeParams p) {
  __shared__ float shm[kThreads];
  double total = 0;
  int64_t count = 0;
  for (int64_t i = 0; i < p.N; ++i) {
    int64_t t = target[i];
    if (t == p.ignoreIndex)
      continue;
    const float *row = logits + i * p.C;
    float m = -INFINITY;
    for (int64_t c = threadIdx.x; c < p.C; c += blockDim.x)
      m = fmaxf(m, row[c]);
    m = blockReduceMax(m, shm);
    float se = 0, sl = 0;
    for (int64_t c = threadIdx.x; c < p.C; c += blockDim.x) {
      se += expf(row[c] - m);
      sl += row[c];
    }
    se = blockReduceSum(se, shm);
    sl = blockReduceSum(sl, shm);
    float lse = m + logf(se);
    // -logp[t] = lse - x_t; -sum_c logp_c = C*lse - sum_c x_c.
    // An out-of-range target gives NaN (ATen raises; kernels cannot).
    float nll = t >= 0 && t < p.C ? lse - row[t] : NAN;
    float smooth = (float(p.C) * lse - sl) / float(p.C);
    total += double((1.f - p.smoothing) * nll + p.smoothing * smooth);
    ++count;
  }
  if (threadIdx.x == 0)
    loss[0] = p.mean ? float(total / double(count)) : float(total);
}

__global__ void crossEntropyBackwardKernel(const float *dloss,
                                           const float *logits,
                                           const int64_t *target, float *dx,
                                           CeParams p) {
  __shared__ float shm[kThreads];
  int64_t i = blockIdx.x;
  // The mean divides by the number of non-ignored targets (exact in float
  // below 2^24 rows); each block counts them itself.
  float cnt = 0;
  for (int64_t k = threadIdx.x; k < p.N; k += blockDim.x)
    cnt += target[k] != p.ignoreIndex ? 1.f : 0.f;
  float count = blockReduceSum(cnt, shm);
  const float *row = logits + i * p.C;
  float *drow = dx + i * p.C;
  int64_t t = target[i];
  if (t == p.ignoreIndex) {
    for (int64_t c = threadIdx.x; c < p.C; c += blockDim.x)
      drow[c] = 0.f;
    return;
  }
  float m = -INFINITY;
  for (int64_t c = threadIdx.x; c < p.C; c += blockDim.x)
    m = fmaxf(m, row[c]);
  m = blockReduceMax(m, shm);
  float se = 0;
  for (int64_t c = threadIdx.x; c < p.C; c += blockDim.x)
    se += expf(row[c] - m);
  se = blockReduceSum(se, shm);
  float g = dloss[0] / (p.mean ? count : 1.f);
  for (int64_t c = threadIdx.x; c < p.C; c += blockDim.x) {
    float sm = expf(row[c] - m) / se;
    float tgt = (c == t ? 1.f - p.smoothing : 0.f) + p.smoothing / float(p.C);
    drow[c] = g * (sm - tgt);
  }
}

std::string ceParams(const CudaKernelArgs &a, const TensorView &logits,
                     const TensorView &target, CeParams &p) {
  if (logits.dtype != DType::F32 || target.dtype != DType::I64)
    return "cross_entropy: the CUDA backend needs f32 logits and i64 targets";
  if (logits.rank() != 2 || target.rank() != 1 ||
      target.shape[0] != logits.shape[0])
    return "cross_entropy: expects logits[N,C] and target[N]";
  p.N = logits.shape[0];
  p.C = logits.shape[1];
  p.ignoreIndex = a.attrs.getInt("ignore_index", -100);
  p.smoothing = float(a.attrs.getFloat("label_smoothing", 0.0));
  std::string red = a.attrs.getString("reduction", "mean");
  if (red != "mean" && red != "sum")
    return "cross_entropy: reduction '" + red + "' is not supported";
  p.mean = red == "mean";
  return "";
}

std::string kCrossEntropy(const CudaKernelArgs &a) {
  CeParams p{};
  if (std::string e = ceParams(a, a.inputs[0], a.inputs[1], p); !e.empty())
    return e;
  crossEntropyKernel<<<1, kThreads, 0, a.stream>>>(a.inputs[0].as<float>(),
                                                   a.inputs[1].as<int64_t>(),
                                                   a.outputs[0].as<float>(), p);
  return launched("cross_entropy");
}

std::string kCrossEntropyBackward(const CudaKernelArgs &a) {
  CeParams p{};
  if (std::string e = ceParams(a, a.inputs[1], a.inputs[2], p); !e.empty())
    return e;
  if (p.N == 0)
    return "";
  crossEntropyBackwardKernel<<<int(p.N), kThreads, 0, a.stream>>>(
      a.inputs[0].as<float>(), a.inputs[1].as<float>(),
      a.inputs[2].as<int64_t>(), a.outputs[0].as<float>(), p);
  return launched("cross_entropy_backward");
}

//===--------------------------------------------------------------------===//
// Optimizers (torch.optim.SGD / AdamW; the step counter stays on device)
//===--------------------------------------------------------------------===//

struct SgdParams {
  float lr, momentum, dampening, wd;
  int nesterov;
};

__global__ void sgdKernel(const float *param, const float *grad,
                          const float *buf, const int64_t *step, float *np,
                          float *nbuf, int64_t *nstep, int64_t n, SgdParams p) {
  int64_t s = step ? *step : 0;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    float g = grad[i] + p.wd * param[i];
    if (p.momentum != 0.f) {
      float b =
          s == 0 || !buf ? g : p.momentum * buf[i] + (1.f - p.dampening) * g;
      if (nbuf)
        nbuf[i] = b;
      g = p.nesterov ? g + p.momentum * b : b;
    } else if (nbuf) {
      nbuf[i] = buf ? buf[i] : 0.f;
    }
    np[i] = param[i] - p.lr * g;
  }
  if (nstep && blockIdx.x == 0 && threadIdx.x == 0)
    *nstep = s + 1;
}

const void *optData(const std::vector<TensorView> &v, size_t i) {
  return i < v.size() ? v[i].data : nullptr;
}

std::string kSgd(const CudaKernelArgs &a) {
  if (a.inputs.size() < 2 || a.outputs.empty())
    return "sgd_update: expects param, grad, momentum_buffer, step";
  if (a.inputs[0].dtype != DType::F32)
    return "sgd_update: the CUDA backend supports f32 only";
  SgdParams p{float(a.attrs.getFloat("lr", 0.01)),
              float(a.attrs.getFloat("momentum", 0.0)),
              float(a.attrs.getFloat("dampening", 0.0)),
              float(a.attrs.getFloat("weight_decay", 0.0)),
              int(a.attrs.getInt("nesterov", 0))};
  int64_t n = a.inputs[0].numel();
  sgdKernel<<<blocksFor(n), kThreads, 0, a.stream>>>(
      a.inputs[0].as<float>(), a.inputs[1].as<float>(),
      static_cast<const float *>(optData(a.inputs, 2)),
      static_cast<const int64_t *>(optData(a.inputs, 3)),
      a.outputs[0].as<float>(),
      static_cast<float *>(const_cast<void *>(optData(a.outputs, 1))),
      static_cast<int64_t *>(const_cast<void *>(optData(a.outputs, 2))), n, p);
  return launched("sgd_update");
}

struct AdamParams {
  float lr, b1, b2, eps, wd;
};

__global__ void adamwKernel(const float *param, const float *grad,
                            const float *m, const float *v, const int64_t *step,
                            float *np, float *nm, float *nv, int64_t *nstep,
                            int64_t n, AdamParams p) {
  int64_t t = (step ? *step : 0) + 1;
  float bc1 = 1.f - powf(p.b1, float(t));
  float bc2 = 1.f - powf(p.b2, float(t));
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    float w = param[i] * (1.f - p.lr * p.wd);
    float g = grad[i];
    float mm = p.b1 * m[i] + (1.f - p.b1) * g;
    float vv = p.b2 * v[i] + (1.f - p.b2) * g * g;
    nm[i] = mm;
    nv[i] = vv;
    np[i] = w - (p.lr / bc1) * mm / (sqrtf(vv) / sqrtf(bc2) + p.eps);
  }
  if (nstep && blockIdx.x == 0 && threadIdx.x == 0)
    *nstep = t;
}

std::string kAdamw(const CudaKernelArgs &a) {
  if (a.inputs.size() < 4 || a.outputs.size() < 3)
    return "adamw_update: expects param, grad, exp_avg, exp_avg_sq, step";
  if (a.inputs[0].dtype != DType::F32)
    return "adamw_update: the CUDA backend supports f32 only";
  AdamParams p{float(a.attrs.getFloat("lr", 1e-3)),
               float(a.attrs.getFloat("beta1", 0.9)),
               float(a.attrs.getFloat("beta2", 0.999)),
               float(a.attrs.getFloat("eps", 1e-8)),
               float(a.attrs.getFloat("weight_decay", 1e-2))};
  int64_t n = a.inputs[0].numel();
  adamwKernel<<<blocksFor(n), kThreads, 0, a.stream>>>(
      a.inputs[0].as<float>(), a.inputs[1].as<float>(), a.inputs[2].as<float>(),
      a.inputs[3].as<float>(),
      static_cast<const int64_t *>(optData(a.inputs, 4)),
      a.outputs[0].as<float>(), a.outputs[1].as<float>(),
      a.outputs[2].as<float>(),
      static_cast<int64_t *>(const_cast<void *>(optData(a.outputs, 3))), n, p);
  return launched("adamw_update");
}

struct Entry {
  const char *name;
  CudaKernelFn fn;
};

const Entry kTable[] = {
    {"offload.linear", kLinear},
    {"offload.matmul", kMatmul},
    {"offload.relu", kRelu},
    {"offload.relu_backward", kReluBackward},
    {"offload.add", kAdd},
    {"offload.sub", kSub},
    {"offload.mul", kMul},
    {"offload.div", kDiv},
    {"offload.add_scalar", kAddScalar},
    {"offload.mul_scalar", kMulScalar},
    {"offload.reduce_sum", kReduceSum},
    {"offload.fill", kFill},
    {"offload.cross_entropy", kCrossEntropy},
    {"offload.cross_entropy_backward", kCrossEntropyBackward},
    {"offload.sgd_update", kSgd},
    {"offload.adamw_update", kAdamw},
};

} // namespace

CudaKernelFn lookupKernel(const std::string &op) {
  for (const Entry &e : kTable)
    if (op == e.name)
      return e.fn;
  return nullptr;
}

std::vector<std::string> kernelNames() {
  std::vector<std::string> out;
  for (const Entry &e : kTable)
    out.push_back(e.name);
  return out;
}

} // namespace cuda
} // namespace rt
} // namespace offload
