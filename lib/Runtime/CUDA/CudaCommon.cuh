//===- CudaCommon.cuh - Helpers of the CUDA kernels -------------*- C++ -*-===//
//
// Part of offload. Private to lib/Runtime/CUDA: launch geometry, grid-stride
// loops, fixed-order block reductions (no atomics: the tree over a block of
// fixed size adds the same pairs in the same order every run), operand
// checks that yield one-line errors, and per-file kernel registration.
//
//===----------------------------------------------------------------------===//
#ifndef OFFLOAD_LIB_RUNTIME_CUDA_CUDACOMMON_CUH
#define OFFLOAD_LIB_RUNTIME_CUDA_CUDACOMMON_CUH

#include "CudaKernels.h"
#include "Kernels/ElementMath.h"
#include "Kernels/Geometry.h"
#include "offload/Runtime/Float16.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

namespace offload {
namespace rt {
namespace cuda {

namespace em = offload::rt::em;

//===----------------------------------------------------------------------===//
// bf16 and f16 (DType::BF16, DType::F16): stored, never computed in
//===----------------------------------------------------------------------===//
//
// A kernel templated on its storage type S runs on float, double,
// __nv_bfloat16 (bf16) or __half (f16). It computes in Acc<S>: S itself for
// float and double (so the f32/f64 code is unchanged), float for bf16 and
// f16. Loads widen exactly (ld); stores round once, to nearest even (st),
// with Float16.h's conversions, the host's own (NaN sign and payload kept):
// a low-type kernel that computes its f32 value as the f32 kernel does is
// bit for bit the host's emulation (Kernels/KernelSupport.h,
// emulateLowFloat), which rounds the f32 kernel's result once.

template <typename S> struct LowTraits { using C = S; };
template <> struct LowTraits<__nv_bfloat16> { using C = float; };
template <> struct LowTraits<__half> { using C = float; };
/// The type a kernel on storage type S computes in.
template <typename S> using Acc = typename LowTraits<S>::C;
/// True for the 2-byte float storage types.
template <typename S>
constexpr bool kIsLow = std::is_same_v<S, __nv_bfloat16> || std::is_same_v<S, __half>;

/// Widens one stored element (exact for bf16/f16).
__device__ __forceinline__ float ld(__nv_bfloat16 v) {
  return bf16ToFloat(__bfloat16_as_ushort(v));
}
__device__ __forceinline__ float ld(__half v) {
  return f16ToFloat(__half_as_ushort(v));
}
__device__ __forceinline__ float ld(float v) { return v; }
__device__ __forceinline__ double ld(double v) { return v; }
__device__ __forceinline__ int64_t ld(int64_t v) { return v; }
__device__ __forceinline__ int32_t ld(int32_t v) { return v; }

/// Rounds a computed value to the storage type S (identity for float and
/// double; to nearest even for bf16/f16, the host's Float16.h).
template <typename S> __device__ __forceinline__ S st(Acc<S> v) {
  if constexpr (std::is_same_v<S, __nv_bfloat16>)
    return __ushort_as_bfloat16(floatToBf16(v));
  else if constexpr (std::is_same_v<S, __half>)
    return __ushort_as_half(floatToF16(v));
  else
    return v;
}

/// Calls f(S()) with the storage type of a float dtype (f32, f64, bf16,
/// f16); false for any other dtype.
template <typename F> bool dispatchFloat(DType d, F &&f) {
  switch (d) {
  case DType::F32: f(float()); return true;
  case DType::F64: f(double()); return true;
  case DType::BF16: f(__nv_bfloat16()); return true;
  case DType::F16: f(__half()); return true;
  default: return false;
  }
}

/// Calls f(S()) with the storage type of any dtype (bool as uint8_t).
template <typename F> void dispatchStorage(DType d, F &&f) {
  switch (d) {
  case DType::F32: f(float()); break;
  case DType::F64: f(double()); break;
  case DType::I64: f(int64_t()); break;
  case DType::I32: f(int32_t()); break;
  case DType::Bool: f(uint8_t()); break;
  case DType::BF16: f(__nv_bfloat16()); break;
  case DType::F16: f(__half()); break;
  }
}

/// Threads per block of the elementwise kernels and of the block
/// reductions (a power of two: the reduction tree halves it).
constexpr int kThreads = 256;
/// Highest tensor rank of the broadcasting / permuting kernels.
constexpr int kMaxRank = 8;

/// Blocks for a grid-stride loop over n items (at least 1, capped so that
/// launches stay legal; the loop covers the rest).
inline int blocksFor(int64_t n) {
  int64_t b = (n + kThreads - 1) / kThreads;
  return int(b < 1 ? 1 : (b > 65535 * 32 ? 65535 * 32 : b));
}

#define OFFLOAD_GRID_LOOP(i, n)                                                \
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < (n);    \
       i += int64_t(gridDim.x) * blockDim.x)

/// "" after a launch, or the launch error naming `what`.
inline std::string launched(const char *what) {
  cudaError_t e = cudaGetLastError();
  return e == cudaSuccess ? std::string()
                          : cudaErrorText((std::string(what) + " launch").c_str(), e);
}

/// Records bad input seen on the device: the first report of a step wins.
__device__ inline void reportDeviceError(int *flag, int instruction,
                                         int code) {
  if (flag && atomicCAS(flag, 0, instruction + 1) == 0)
    flag[1] = code;
}

/// Sum of `v` over the block (blockDim.x == kThreads) in a fixed tree
/// order; every thread gets the result. `shm` holds kThreads values.
template <typename A> __device__ A blockSum(A v, A *shm) {
  shm[threadIdx.x] = v;
  __syncthreads();
  for (int s = kThreads / 2; s > 0; s >>= 1) {
    if (int(threadIdx.x) < s)
      shm[threadIdx.x] = shm[threadIdx.x] + shm[threadIdx.x + s];
    __syncthreads();
  }
  A r = shm[0];
  __syncthreads();
  return r;
}

/// Max of `v` over the block in a fixed tree order (em::maxOf: a NaN
/// operand on the left is kept); every thread gets the result.
template <typename A> __device__ A blockMax(A v, A *shm) {
  shm[threadIdx.x] = v;
  __syncthreads();
  for (int s = kThreads / 2; s > 0; s >>= 1) {
    if (int(threadIdx.x) < s)
      shm[threadIdx.x] = em::maxOf(shm[threadIdx.x], shm[threadIdx.x + s]);
    __syncthreads();
  }
  A r = shm[0];
  __syncthreads();
  return r;
}

/// "[2,3,4]".
std::string shapeStr(const std::vector<int64_t> &s);

/// Error unless `t` is f32 or f64.
std::string needFloat(const TensorView &t, const char *op, const char *what);
/// Error unless `t` is f32, f64, bf16 or f16 (kernels with a low-type path).
std::string needAnyFloat(const TensorView &t, const char *op, const char *what);
/// Error unless `a` and `b` have the same dtype and shape.
std::string needSame(const TensorView &a, const TensorView &b, const char *op,
                     const char *an, const char *bn);
/// Error unless `t` has dtype `d`.
std::string needDType(const TensorView &t, DType d, const char *op,
                      const char *what);
/// True when the optional operand i is present.
inline bool present(const std::vector<TensorView> &v, size_t i) {
  return i < v.size() && v[i].data != nullptr;
}

/// Broadcast strides: the same formula as the host kernels' (Kernels/Geometry.h).
using geom::broadcastStrides;

/// Shape and up to three operand stride sets of a strided gather.
struct Strided {
  int rank = 0;
  int64_t shape[kMaxRank] = {};
  int64_t st[3][kMaxRank] = {};
  /// Offsets of output element i into the operands.
  __device__ void offsets(int64_t i, int64_t *off, int nOps) const {
    for (int k = 0; k < nOps; ++k)
      off[k] = 0;
    for (int d = rank - 1; d >= 0; --d) {
      int64_t idx = i % shape[d];
      i /= shape[d];
      for (int k = 0; k < nOps; ++k)
        off[k] += idx * st[k][d];
    }
  }
};

/// `s` over the output `out`: its rank and shape, operand strides still 0
/// (the caller broadcasts each operand into s.st[k] with broadcastStrides).
/// "" or the error for a rank above kMaxRank.
inline std::string stridedOver(const TensorView &out, const char *op, Strided &s) {
  if (out.rank() > kMaxRank)
    return std::string(op) + ": rank above 8 is not supported";
  s.rank = int(out.rank());
  for (int d = 0; d < s.rank; ++d)
    s.shape[d] = out.shape[size_t(d)];
  return "";
}

/// One table entry, defined by the file that implements the kernel.
struct Entry {
  const char *name;
  CudaKernelFn fn;
  /// Whether fn takes bf16/f16 operands (docs/precision.md, "CUDA
  /// backend"); a plan that gives another kernel one is refused at load
  /// (CudaDevice::missingOps).
  bool lowFloat = false;
};
/// The entries of each kernel file.
const std::vector<Entry> &elementwiseEntries();
const std::vector<Entry> &dataEntries();
const std::vector<Entry> &lossOptEntries();
const std::vector<Entry> &dnnEntries();
const std::vector<Entry> &normPoolEntries();
const std::vector<Entry> &attentionEntries();

} // namespace cuda
} // namespace rt
} // namespace offload

#endif // OFFLOAD_LIB_RUNTIME_CUDA_CUDACOMMON_CUH
