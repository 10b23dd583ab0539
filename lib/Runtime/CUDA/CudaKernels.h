//===- CudaKernels.h - Kernels of the CUDA backend --------------*- C++ -*-===//
//
// Part of offload. The CUDA backend's kernel table: one entry per dialect op
// that the host backend runs (lib/Runtime/Kernels/Registry.cpp), with the
// host kernel's semantics, attributes, operand order, defaults and dtypes
// (docs/op-semantics.md). Libraries where they fit: cuBLAS for linear and
// matmul, cuDNN for convolutions, batch norm and softmax; own kernels for
// the rest, whose element formulas come from lib/Runtime/Kernels/
// ElementMath.h (the same functors the host kernels use).
//
// Contract of a kernel: it enqueues its work on ctx.stream (never
// synchronises), touches only its outputs and the workspace, and returns ""
// or a one-line error that names the failing library call (unsupported
// dtype or shape, launch failure, cuDNN/cuBLAS status). Errors that only
// the device can see (an index out of range) are reported through
// ctx.errorFlag and turned into a step failure by the backend after the
// step's synchronisation. Reductions use no floating-point atomics: every
// result is a fixed-order sum, so results are bit-identical run to run on
// one GPU model.
//
//===----------------------------------------------------------------------===//
#ifndef OFFLOAD_LIB_RUNTIME_CUDA_CUDAKERNELS_H
#define OFFLOAD_LIB_RUNTIME_CUDA_CUDAKERNELS_H

#include "offload/Runtime/Kernel.h"

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cudnn.h>

#include <cstdint>
#include <string>
#include <vector>

namespace offload {
namespace rt {
namespace cuda {

/// Device-side error codes written to CudaContext::errorFlag[1].
enum DeviceError : int {
  kDeviceErrorNone = 0,
  /// An index operand (class target, embedding index, max-pool index) is
  /// outside its range.
  kDeviceErrorIndexRange = 1,
};

/// One-line description of a DeviceError code.
const char *deviceErrorText(int code);

/// What every kernel of one backend shares.
struct CudaContext {
  cudaStream_t stream = nullptr; ///< the compute stream
  cublasHandle_t cublas = nullptr;
  cudnnHandle_t cudnn = nullptr;
  /// The plan's workspace (256-byte aligned) or nullptr / 0 bytes.
  void *workspace = nullptr;
  size_t workspaceBytes = 0;
  /// Two device ints: [0] = 1 + index of the first instruction that found
  /// bad input on the device, [1] = its DeviceError code. Zeroed at the
  /// start of each step.
  int *errorFlag = nullptr;
  /// kPartialSlots device doubles of scratch owned by the backend (outside
  /// the plan, like the library handles' memory) for the partial sums of a
  /// reduction across blocks: a kernel writes one partial per fixed chunk
  /// of its rows, a second kernel on the same stream adds them in chunk
  /// order (the loss kernels). Valid only within one launch pair.
  double *partials = nullptr;
};

/// Doubles of CudaContext::partials: three sums for each of up to 1024
/// row chunks.
constexpr int kPartialChunks = 1024;
constexpr int kPartialSlots = 3 * kPartialChunks;

/// A convolution's algorithm, chosen once at session creation.
struct ConvChoice {
  int algo = -1;        ///< cudnnConvolution*Algo_t value
  int mathType = 0;     ///< cudnnMathType_t to set on the descriptor
  size_t workspace = 0; ///< bytes the algorithm needs
  /// 0: one cuDNN call over the whole batch. Otherwise the batch runs in
  /// slices of batchChunk samples, one call each, in batch order, with the
  /// algorithm above chosen for a slice's shape; the last slice is smaller
  /// when batchChunk does not divide the batch, and uses the rest* fields.
  int64_t batchChunk = 0;
  int restAlgo = -1;        ///< the last, smaller slice's algorithm; or -1
  int restMathType = 0;     ///< its cudnnMathType_t
  size_t restWorkspace = 0; ///< bytes it needs
};

/// What a kernel sees: the operands in op order (an absent optional operand
/// has data == nullptr), the attributes, the shared context, the index of
/// its instruction (for device error reports) and, for a convolution, its
/// chosen algorithm.
struct CudaKernelArgs {
  const std::vector<TensorView> &inputs;
  const std::vector<TensorView> &outputs;
  const AttrMap &attrs;
  const CudaContext &ctx;
  int instruction = 0;
  ConvChoice conv;
};

using CudaKernelFn = std::string (*)(const CudaKernelArgs &args);

/// nullptr when the CUDA backend has no kernel for `op`. Kernels do not
/// check operand and result counts: the backend runs only instructions of a
/// plan validated against the op-signature table when it was loaded.
CudaKernelFn lookupKernel(const std::string &op);
/// Whether the CUDA kernel of `op` takes bf16/f16 views itself
/// (LowFloat::Native: sgd_update and adamw_update, for bf16/f16 parameters
/// and bf16 moments) or not
/// (LowFloat::Rejected: CudaDevice::missingOps reports such an instruction).
LowFloat kernelLowFloat(const std::string &op);
/// Every op name of the table.
std::vector<std::string> kernelNames();

/// True for offload.conv2d, conv2d_backward_input, conv2d_backward_weight:
/// ops whose algorithm chooseConvAlgorithm picks at session creation.
bool isConvOp(const std::string &op);

/// Picks the fastest deterministic cuDNN algorithm for the convolution op
/// `op` with these operand views (shapes and dtypes; data is not read) whose
/// workspace fits in ctx.workspaceBytes: the first of cuDNN's heuristic
/// ranking (cudnnGetConvolution*Algorithm_v7) with determinism ==
/// CUDNN_DETERMINISTIC, status success, no tensor-core math (no TF32) and
/// memory <= ctx.workspaceBytes.
///
/// When none fits for the whole batch N, the op runs in batch slices
/// (ConvChoice::batchChunk): slice sizes ceil(N/2), ceil(N/4), ... down to 1
/// are tried in that order, each by the same rule applied to the ranking for
/// the slice's shape and, when the size does not divide N, to the ranking
/// for the smaller last slice's shape (both must fit); the first, largest,
/// size that fits is taken. The choice depends only on the shapes, the GPU,
/// the cuDNN version and the workspace size (no timing). Forward and
/// backward-data slices are independent; backward-weight slices add into
/// dweight in batch order (cuDNN's beta = 0 for the first, 1 after), a fixed
/// order: reproducible run to run, though not bit-identical to one call over
/// the whole batch.
///
/// Returns "" and sets `out`, or an error. When nothing fits, the error
/// says how many bytes the smallest deterministic algorithm needs for the
/// whole batch and, when N > 1, the least a batch slice size needs; `*needed`
/// is set to the least workspace with which a choice would succeed (the
/// smaller of the two), 0 when cuDNN offers no deterministic algorithm.
std::string chooseConvAlgorithm(const std::string &op,
                                const std::vector<TensorView> &inputs,
                                const std::vector<TensorView> &outputs,
                                const AttrMap &attrs, const CudaContext &ctx,
                                ConvChoice &out, size_t *needed);

/// The smallest workspace among the algorithms chooseConvAlgorithm accepts
/// (deterministic, status success, no tensor-core math) for `op` with these
/// operand views run on `batch` samples at a time (0: the whole batch), by
/// cuDNN's heuristics on handle `cudnn`; SIZE_MAX when cuDNN offers none.
/// Returns "" or an error. For tests and diagnostics.
std::string smallestConvWorkspace(cudnnHandle_t cudnn, const std::string &op,
                                  const std::vector<TensorView> &inputs,
                                  const std::vector<TensorView> &outputs,
                                  const AttrMap &attrs, int64_t batch,
                                  size_t &bytes);

/// "cudaMalloc: out of memory (cudaErrorMemoryAllocation)".
std::string cudaErrorText(const char *call, cudaError_t err);
/// "cublasSgemm: CUBLAS_STATUS_INVALID_VALUE (an invalid value ...)".
std::string cublasErrorText(const char *call, cublasStatus_t st);
/// "cudnnConvolutionForward: CUDNN_STATUS_BAD_PARAM".
std::string cudnnErrorText(const char *call, cudnnStatus_t st);

} // namespace cuda
} // namespace rt
} // namespace offload

#endif // OFFLOAD_LIB_RUNTIME_CUDA_CUDAKERNELS_H
