//===- OffloadDialect.h - The offload dialect ---------------------*- C++ -*-===//
//
// Part of offload. Dialect, types, enums and memory resources.
//
//===----------------------------------------------------------------------===//
#ifndef OFFLOAD_DIALECT_OFFLOAD_IR_OFFLOADDIALECT_H
#define OFFLOAD_DIALECT_OFFLOAD_IR_OFFLOADDIALECT_H

#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/Interfaces/FunctionInterfaces.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "offload/Dialect/Offload/IR/OffloadDialect.h.inc"
#include "offload/Dialect/Offload/IR/OffloadEnums.h.inc"

#define GET_TYPEDEF_CLASSES
#include "offload/Dialect/Offload/IR/OffloadTypes.h.inc"

#define GET_ATTRDEF_CLASSES
#include "offload/Dialect/Offload/IR/OffloadAttrs.h.inc"

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

/// The one accessor API of step roles (`offload.role = #offload.role<...>`,
/// the enum Role of OffloadTypes.td). Roles of arguments: parameter, state,
/// optimizer_state, input, rng_seed, output_gradient; of results: loss,
/// new_parameter, new_state, new_optimizer_state, gradient, output,
/// input_gradient.
bool isArgumentRole(Role role);
bool isResultRole(Role role);

/// The role of argument / result `i` of `fn`; std::nullopt when it has none
/// (or, before verification, one that is not a role attribute).
std::optional<Role> getArgRole(FunctionOpInterface fn, unsigned i);
std::optional<Role> getResultRole(FunctionOpInterface fn, unsigned i);

/// The `offload.role` attribute of `role`, for building argument and result
/// attribute dictionaries.
RoleAttr getRoleAttr(MLIRContext *ctx, Role role);
/// Same from the role's keyword ("parameter"); a null attribute when
/// `keyword` is no role (the step verifier then names the argument).
Attribute getRoleAttr(MLIRContext *ctx, llvm::StringRef keyword);

/// Sets the role of argument / result `i` of `fn`.
void setArgRole(FunctionOpInterface fn, unsigned i, Role role);
void setResultRole(FunctionOpInterface fn, unsigned i, Role role);

/// Sets attribute `name` to `value` on the arguments of `fn` numbered in
/// `args`, or removes it there when `value` is null, in one rewrite of the
/// function's argument attributes. FunctionOpInterface::setArgAttr rebuilds
/// the whole array per call, so a loop over a step's thousands of parameters
/// was quadratic (a tenth of planning a 12k-op encoder).
void setArgAttrs(FunctionOpInterface fn, llvm::ArrayRef<unsigned> args, llvm::StringRef name,
                 Attribute value);

} // namespace offload
} // namespace mlir

#endif // OFFLOAD_DIALECT_OFFLOAD_IR_OFFLOADDIALECT_H
