//===- Kernels.h - Host kernel library, internal registration ---*- C++ -*-===//
//
// Part of offload. Each kernel source file registers its kernels with one of
// these functions; registerAllHostKernels() (Registry.cpp) calls them all.
// Semantics of every op: docs/op-semantics.md.
//
//===----------------------------------------------------------------------===//
#ifndef OFFLOAD_LIB_RUNTIME_KERNELS_KERNELS_H
#define OFFLOAD_LIB_RUNTIME_KERNELS_KERNELS_H

#include "offload/Runtime/Kernel.h"

namespace offload {
namespace rt {
namespace kernels {

// Elementwise, reductions, shape/data movement, losses, optimizer, dropout
// (Philox), embedding, softmax.
void registerElementwiseKernels(KernelRegistry &r);
void registerReductionKernels(KernelRegistry &r);
void registerShapeKernels(KernelRegistry &r);
void registerLossKernels(KernelRegistry &r);
void registerOptimizerKernels(KernelRegistry &r);
void registerRandomKernels(KernelRegistry &r);
void registerEmbeddingKernels(KernelRegistry &r);
void registerSoftmaxKernels(KernelRegistry &r);

// Linear algebra (OpenBLAS), fused attention, convolution, pooling, batch
// and layer norm.
void registerLinAlgKernels(KernelRegistry &r);
void registerAttentionKernels(KernelRegistry &r);
void registerConvKernels(KernelRegistry &r);
void registerPoolKernels(KernelRegistry &r);
void registerNormKernels(KernelRegistry &r);

/// Philox4x32-10 uniform in [0,1) for (seed, counter); see
/// docs/op-semantics.md. The generator is em::philoxUniform (ElementMath.h),
/// which the CUDA backend's dropout evaluates too.
float philoxUniform(uint64_t seed, uint64_t counter);

/// Philox4x32-10 block (Salmon et al., SC'11): encrypts counter `ctr` under
/// `key`, writing four 32-bit words to `out` (em::philox4x32_10).
void philox4x32_10(const uint32_t ctr[4], const uint32_t key[2],
                   uint32_t out[4]);

} // namespace kernels
} // namespace rt
} // namespace offload

#endif
