//===- PassOptions.cpp - Keywords of the enum-valued pass options ---------===//
//
// Part of offload. Must agree with the cl::values of Passes.td (the option
// parser maps the same keywords to the same values).
//
//===----------------------------------------------------------------------===//

#include "offload/Dialect/Offload/Transforms/PassOptions.h"

using namespace mlir::offload;
using llvm::StringRef;

StringRef mlir::offload::stringifyOption(RecomputePolicy v) {
  switch (v) {
  case RecomputePolicy::Ops: return "ops";
  case RecomputePolicy::EveryK: return "every-k";
  case RecomputePolicy::Sqrt: return "sqrt";
  case RecomputePolicy::Names: return "names";
  case RecomputePolicy::All: return "all";
  case RecomputePolicy::Marked: return "marked";
  }
  return "?";
}

StringRef mlir::offload::stringifyOption(HostOffloadPolicy v) {
  switch (v) {
  case HostOffloadPolicy::Size: return "size";
  case HostOffloadPolicy::Ops: return "ops";
  case HostOffloadPolicy::Names: return "names";
  case HostOffloadPolicy::All: return "all";
  case HostOffloadPolicy::Marked: return "marked";
  }
  return "?";
}

StringRef mlir::offload::stringifyOption(HostParametersPolicy v) {
  switch (v) {
  case HostParametersPolicy::All: return "all";
  case HostParametersPolicy::Size: return "size";
  case HostParametersPolicy::Names: return "names";
  case HostParametersPolicy::Marked: return "marked";
  }
  return "?";
}

StringRef mlir::offload::stringifyOption(RefetchMode v) {
  switch (v) {
  case RefetchMode::Auto: return "auto";
  case RefetchMode::Always: return "always";
  case RefetchMode::Never: return "never";
  }
  return "?";
}

StringRef mlir::offload::stringifyOption(OptimizerKind v) {
  switch (v) {
  case OptimizerKind::Sgd: return "sgd";
  case OptimizerKind::AdamW: return "adamw";
  case OptimizerKind::None: return "none";
  }
  return "?";
}

StringRef mlir::offload::stringifyOption(PlanSlicing v) {
  switch (v) {
  case PlanSlicing::Auto: return "auto";
  case PlanSlicing::Never: return "never";
  }
  return "?";
}

StringRef mlir::offload::stringifyOption(StepCounters v) {
  switch (v) {
  case StepCounters::Shared: return "shared";
  case StepCounters::PerParameter: return "per-parameter";
  }
  return "?";
}

StringRef mlir::offload::stringifyOption(Precision v) {
  switch (v) {
  case Precision::Fp32: return "fp32";
  case Precision::Bf16Mixed: return "bf16-mixed";
  case Precision::Fp16Mixed: return "fp16-mixed";
  }
  return "?";
}

StringRef mlir::offload::stringifyOption(Moments v) {
  switch (v) {
  case Moments::F32: return "f32";
  case Moments::Bf16: return "bf16";
  }
  return "?";
}
