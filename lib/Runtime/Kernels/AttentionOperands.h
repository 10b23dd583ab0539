//===- AttentionOperands.h - offload.attention's operands, checked once ---===//
//
// Part of offload. The operand and attribute rules of offload.attention and
// offload.attention_backward (OffloadComputeOps.td), shared by the host
// kernels (Attention.cpp) and the CUDA ones (CUDA/CudaAttention.cu), so both
// backends accept and refuse the same instructions with the same messages.
//
//===----------------------------------------------------------------------===//

#ifndef OFFLOAD_RUNTIME_KERNELS_ATTENTIONOPERANDS_H
#define OFFLOAD_RUNTIME_KERNELS_ATTENTIONOPERANDS_H

#include "offload/Runtime/Kernel.h"

#include <cstdint>
#include <string>
#include <vector>

namespace offload {
namespace rt {

/// The resolved operands and attributes of one attention call.
struct AttentionOperands {
  /// query [N, Hq, L, E], key [N, Hkv, S, E], value [N, Hkv, S, Ev] (layout
  /// bhld), or with the heads and length dims swapped (layout blhd, the
  /// token layout: `tokens`); group = Hq / Hkv.
  int64_t n = 0, hq = 0, hkv = 0, l = 0, s = 0, e = 0, ev = 0, group = 1;
  bool tokens = false;
  double scale = 1;
  bool causal = false;
  double p = 0; ///< dropout probability
  uint64_t offset = 0;
  /// Mask: absent, boolean (uint8) or additive (the query's type), with
  /// element strides broadcasting it to [N, Hq, L, S] (0 where broadcast).
  const TensorView *mask = nullptr;
  bool boolMask = false;
  int64_t mstride[4] = {0, 0, 0, 0};
  /// The dropout seed (one i64) when p > 0. Its data is device memory on
  /// the CUDA backend: the kernels read it, this check does not.
  const TensorView *seed = nullptr;
};

/// Checks query/key/value (inputs[first..first+2]) of a float dtype, the
/// `layout`, `scale`, `is_causal`, `has_mask`, `dropout_p` and `offset`
/// attributes, and the extras from inputs[numExtrasAt] on (the mask when
/// has_mask, then the seed when dropout_p > 0), and fills `a`. `first` is 0
/// forward, 1 backward (grad_out first). The float dtypes are f32 and f64,
/// and bf16 and f16 too when `lowFloats` (the CUDA kernels, which load them
/// into f32 tiles; the host's kernels see f32, its emulation having widened
/// the operands). Returns "" or the message.
std::string resolveAttention(const std::vector<TensorView> &inputs, const AttrMap &attrs,
                             const char *op, size_t first, size_t numExtrasAt,
                             AttentionOperands &a, bool lowFloats = false);

} // namespace rt
} // namespace offload

#endif
