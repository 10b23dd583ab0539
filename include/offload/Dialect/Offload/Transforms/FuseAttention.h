//===- FuseAttention.h - softmax(q kᵀ) v into offload.attention -*- C++ -*-===//
//
// Part of offload. The rewrite behind --offload-fuse-attention (Passes.td),
// also run by the importer at the end of every import (StepBuilder::finish,
// ImportOptions::fuseAttention).
//
//===----------------------------------------------------------------------===//
#ifndef OFFLOAD_DIALECT_OFFLOAD_TRANSFORMS_FUSEATTENTION_H
#define OFFLOAD_DIALECT_OFFLOAD_TRANSFORMS_FUSEATTENTION_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/Support/raw_ostream.h"

namespace mlir {
namespace offload {

/// Rewrites every spelled-out attention of `fn`'s forward
///   matmul(q, kᵀ) [scale] [masked_fill(-inf) | add mask] softmax(-1)
///   [dropout] matmul(·, v)
/// that is exactly one offload.attention into that op (see Passes.td,
/// FuseAttention, for what is fused and what is refused). Ops left without
/// users are erased. Returns the number of attentions formed; when `log` is
/// given, writes one line per attention formed and per candidate refused
/// (a softmax over the last dim feeding a matmul) with the reason.
unsigned fuseAttention(func::FuncOp fn, llvm::raw_ostream *log = nullptr);

/// Rewrites every head-layout offload.attention of `fn`'s forward whose
/// query, key and value are each `transpose(x, 1, 2)` (perm [0, 2, 1, 3])
/// and whose output is read only through such transposes into the
/// token-layout op (layout = blhd) on the untransposed x, its output in
/// place of the transposed ones: exactly the same values, no transpose
/// copies, and one buffer where the head-layout output and its transpose
/// were two (FuseAttention.cpp). Transposes left unused are erased. Returns
/// the number rewritten; `log` gets one line per attention rewritten or
/// kept in head layout, with the reason.
unsigned foldAttentionTokenLayout(func::FuncOp fn, llvm::raw_ostream *log = nullptr);

} // namespace offload
} // namespace mlir

#endif
