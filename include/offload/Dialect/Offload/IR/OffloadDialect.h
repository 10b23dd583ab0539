//===- OffloadDialect.h - The offload dialect ---------------------*- C++ -*-===//
//
// Part of offload. Dialect, types, enums and memory resources.
//
//===----------------------------------------------------------------------===//
#ifndef OFFLOAD_DIALECT_OFFLOAD_IR_OFFLOADDIALECT_H
#define OFFLOAD_DIALECT_OFFLOAD_IR_OFFLOADDIALECT_H

#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "offload/Dialect/Offload/IR/OffloadDialect.h.inc"
#include "offload/Dialect/Offload/IR/OffloadEnums.h.inc"

#define GET_TYPEDEF_CLASSES
#include "offload/Dialect/Offload/IR/OffloadTypes.h.inc"

namespace mlir {
namespace offload {

/// Device memory (the arena on the accelerator), as a side-effect resource.
struct DeviceMemoryResource
    : public SideEffects::Resource::Base<DeviceMemoryResource> {
  llvm::StringRef getName() final { return "<DeviceMemory>"; }
};

/// Host memory (the pinned host arena), as a side-effect resource.
struct HostMemoryResource
    : public SideEffects::Resource::Base<HostMemoryResource> {
  llvm::StringRef getName() final { return "<HostMemory>"; }
};

/// Roles of a step function's arguments (`offload.role`).
/// parameter: trainable; state: updated by the step, not trained (batch-norm
/// statistics); optimizer_state: momentum buffers, Adam moments, step counts;
/// input: a batch input; rng_seed: the i64 seed of the counter-based RNG.
bool isValidArgumentRole(llvm::StringRef role);
/// Roles of results: loss, new_parameter, new_state, new_optimizer_state,
/// gradient, output, input_gradient (pipeline stages).
bool isValidResultRole(llvm::StringRef role);

} // namespace offload
} // namespace mlir

#endif // OFFLOAD_DIALECT_OFFLOAD_IR_OFFLOADDIALECT_H
