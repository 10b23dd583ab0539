//===- OffloadInterfaces.h - Cost and differentiation interfaces --*- C++ -*-===//
#ifndef OFFLOAD_DIALECT_OFFLOAD_IR_OFFLOADINTERFACES_H
#define OFFLOAD_DIALECT_OFFLOAD_IR_OFFLOADINTERFACES_H

#include "mlir/IR/Builders.h"
#include "mlir/IR/OpDefinition.h"
#include "llvm/ADT/SmallVector.h"

namespace mlir {
namespace offload {
namespace detail {
/// Number of elements of all ranked tensor results (-1 if any is dynamic).
int64_t sumResultElements(Operation *op);
/// Bytes of all ranked tensor operands (-1 if any is dynamic).
int64_t sumOperandBytes(Operation *op);
/// Bytes of all ranked tensor results (-1 if any is dynamic).
int64_t sumResultBytes(Operation *op);
/// Whether `t` is a ranked tensor of f32, f64, bf16 or f16.
bool isFloatTensor(Type t);
/// Whether `t` is bf16 or f16 (an element type, or a tensor of one).
bool isLowFloat(Type t);
/// The element type of per-row statistics (layer norm's mean and rstd,
/// attention's log-sum-exp) of values of element type `t`: f32 for bf16 and
/// f16, as PyTorch's and FlashAttention's kernels keep them; `t` otherwise.
Type statisticsType(Type t);
/// Bytes of a ranked tensor type with static shape (i1 counts 1 byte), or -1.
int64_t tensorBytes(Type t);
} // namespace detail
} // namespace offload
} // namespace mlir

#include "offload/Dialect/Offload/IR/OffloadInterfaces.h.inc"

#endif
