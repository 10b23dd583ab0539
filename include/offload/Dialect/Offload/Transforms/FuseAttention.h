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

} // namespace offload
} // namespace mlir

#endif
