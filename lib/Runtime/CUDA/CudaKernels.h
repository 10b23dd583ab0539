//===- CudaKernels.h - CUDA kernels of the CUDA backend ---------*- C++ -*-===//
//
// Part of offload. Each kernel enqueues its work on `stream` (no host
// synchronisation) and returns "" or a one-line error (unsupported dtype or
// shape, launch failure). f32 only unless stated. Semantics:
// docs/op-semantics.md.
//
//===----------------------------------------------------------------------===//
#ifndef OFFLOAD_LIB_RUNTIME_CUDA_CUDAKERNELS_H
#define OFFLOAD_LIB_RUNTIME_CUDA_CUDAKERNELS_H

#include "offload/Runtime/Kernel.h"

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <string>
#include <vector>

namespace offload {
namespace rt {
namespace cuda {

struct CudaKernelArgs {
  const std::vector<TensorView> &inputs;
  const std::vector<TensorView> &outputs;
  const AttrMap &attrs;
  cudaStream_t stream;
  cublasHandle_t cublas;
};

using CudaKernelFn = std::string (*)(const CudaKernelArgs &args);

/// nullptr when the CUDA backend has no kernel for `op`.
CudaKernelFn lookupKernel(const std::string &op);
std::vector<std::string> kernelNames();

/// "cudaMalloc: out of memory" style text for a CUDA error.
std::string cudaErrorText(const char *call, cudaError_t err);
std::string cublasErrorText(const char *call, cublasStatus_t st);

} // namespace cuda
} // namespace rt
} // namespace offload

#endif
