//===- Passes.h - offload passes ----------------------------------*- C++ -*-===//
#ifndef OFFLOAD_DIALECT_OFFLOAD_TRANSFORMS_PASSES_H
#define OFFLOAD_DIALECT_OFFLOAD_TRANSFORMS_PASSES_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"
#include "offload/Dialect/Offload/IR/OffloadOps.h"
#include "offload/Dialect/Offload/Transforms/PassOptions.h"

namespace mlir {
namespace offload {

#define GEN_PASS_DECL
#include "offload/Dialect/Offload/Transforms/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "offload/Dialect/Offload/Transforms/Passes.h.inc"

} // namespace offload
} // namespace mlir

#endif
