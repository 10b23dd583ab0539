//===- CudaNormPool.h - Batch-norm helpers shared by CUDA files -*- C++ -*-===//
//
// Part of offload. Operand checks of batch_norm / batch_norm_backward (as
// Norm.cpp) and the own-kernel batch norm that CudaDnn.cu falls back to when
// cuDNN's batch norm does not fit (absent weight, bias or gradient output).
//
//===----------------------------------------------------------------------===//
#ifndef OFFLOAD_LIB_RUNTIME_CUDA_CUDANORMPOOL_H
#define OFFLOAD_LIB_RUNTIME_CUDA_CUDANORMPOOL_H

#include "CudaKernels.h"

namespace offload {
namespace rt {
namespace cuda {

/// x viewed as [n, c, s].
struct BnShape {
  int64_t n = 0, c = 0, s = 1;
  int64_t count() const { return n * s; }
};

/// Checks batch_norm's operands (inputs x, weight?, bias?, running_mean?,
/// running_var?; outputs y, save_mean, save_invstd, new_running_mean?,
/// new_running_var?) and that each channel has more than one value.
std::string checkBatchNorm(const CudaKernelArgs &a, BnShape &g);
/// Checks batch_norm_backward's operands (dy, x, weight?, save_mean,
/// save_invstd -> dx?, dweight?, dbias?).
std::string checkBatchNormBackward(const CudaKernelArgs &a, BnShape &g);

/// batch_norm / batch_norm_backward with own kernels: one block per
/// channel, statistics in double with fixed-order sums, the formulas of
/// ElementMath.h (em::bnInvStd, BnAffine, BnBackward, ...). Operands
/// checked by the functions above.
std::string batchNormOwn(const CudaKernelArgs &a, const BnShape &g);
std::string batchNormBackwardOwn(const CudaKernelArgs &a, const BnShape &g);

/// softmax_backward (dx = y * (dy - sum(dy * y))) or log_softmax_backward
/// (dx = dy - exp(y) * sum(dy)) over the lines of [outer, n, inner] views
/// of dy, y and dx (the softmax dim is n): the host kernel's formulas, the
/// line sum in double rounded to T. inner == 1: a block per line (the sum
/// by a fixed tree); else a thread per line (the sum in order, the host's).
/// cuDNN's cudnnSoftmaxBackward took 115 ms on an H200 for one
/// [8*12*1024, 1024] attention matrix (channel mode), 300x this kernel's
/// memory-bound time.
std::string softmaxBackwardLines(const CudaKernelArgs &a, bool isLog,
                                 int64_t outer, int64_t n, int64_t inner);

/// softmax / log_softmax of bf16/f16 x over the lines of its [outer, n,
/// inner] view: one thread per line, the host kernel's f32 formulas, each
/// result rounded once (cuDNN's softmax serves f32 and f64).
std::string softmaxLowLines(const CudaKernelArgs &a, bool isLog,
                            int64_t outer, int64_t n, int64_t inner);

} // namespace cuda
} // namespace rt
} // namespace offload

#endif
