//===- Passes.h - offload conversions -----------------------------*- C++ -*-===//
#ifndef OFFLOAD_CONVERSION_PASSES_H
#define OFFLOAD_CONVERSION_PASSES_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

namespace mlir {
namespace offload {
#define GEN_PASS_DECL
#include "offload/Conversion/Passes.h.inc"
#define GEN_PASS_REGISTRATION
#include "offload/Conversion/Passes.h.inc"
} // namespace offload
} // namespace mlir

#endif
