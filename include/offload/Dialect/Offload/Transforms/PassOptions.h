//===- PassOptions.h - Enum-valued options of the offload passes -*- C++ -*-===//
//
// Part of offload. The keyword options of the passes (Passes.td) as enums:
// the option parser accepts only their keywords (`--help` lists them, a bad
// value fails before any pass runs), and passes compare enums, not strings.
//
//===----------------------------------------------------------------------===//
#ifndef OFFLOAD_DIALECT_OFFLOAD_TRANSFORMS_PASSOPTIONS_H
#define OFFLOAD_DIALECT_OFFLOAD_TRANSFORMS_PASSOPTIONS_H

#include "llvm/ADT/StringRef.h"

namespace mlir {
namespace offload {

/// --offload-recompute policy=.
enum class RecomputePolicy { Ops, EveryK, Sqrt, Names, All, Marked };
/// --offload-host-offload policy=.
enum class HostOffloadPolicy { Size, Ops, Names, All, Marked };
/// --offload-host-parameters policy=.
enum class HostParametersPolicy { All, Size, Names, Marked };
/// --offload-host-parameters refetch=.
enum class RefetchMode { Auto, Always, Never };
/// --offload-autodiff optimizer=.
enum class OptimizerKind { Sgd, AdamW, None };
/// --offload-autodiff step-counters=.
enum class StepCounters { Shared, PerParameter };
/// --offload-plan-memory slice=.
enum class PlanSlicing { Auto, Never };

/// The option keyword of each value ("every-k", "per-parameter", ...).
llvm::StringRef stringifyOption(RecomputePolicy v);
llvm::StringRef stringifyOption(HostOffloadPolicy v);
llvm::StringRef stringifyOption(HostParametersPolicy v);
llvm::StringRef stringifyOption(RefetchMode v);
llvm::StringRef stringifyOption(OptimizerKind v);
llvm::StringRef stringifyOption(StepCounters v);
llvm::StringRef stringifyOption(PlanSlicing v);

} // namespace offload
} // namespace mlir

#endif
