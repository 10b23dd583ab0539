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
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/raw_ostream.h"

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
/// --offload-autodiff precision= and --offload-autocast precision=
/// (Lightning's names; docs/precision.md).
enum class Precision { Fp32, Bf16Mixed, Fp16Mixed };

/// The type of the precision= option: a Precision whose parser, unlike
/// cl::values' ("Cannot find option named 'x'!"), answers a bad value with
/// the names it takes (the "bad input" rule). Prints as its name,
/// so a recorded pipeline (offload.autodiff) parses back.
struct PrecisionOption {
  Precision value = Precision::Fp32;
  PrecisionOption() = default;
  PrecisionOption(Precision v) : value(v) {}
  bool operator==(const PrecisionOption &o) const { return value == o.value; }
  bool operator!=(const PrecisionOption &o) const { return value != o.value; }
};
llvm::raw_ostream &operator<<(llvm::raw_ostream &os, const PrecisionOption &p);

/// The option keyword of each value ("every-k", "per-parameter", ...).
llvm::StringRef stringifyOption(RecomputePolicy v);
llvm::StringRef stringifyOption(HostOffloadPolicy v);
llvm::StringRef stringifyOption(HostParametersPolicy v);
llvm::StringRef stringifyOption(RefetchMode v);
llvm::StringRef stringifyOption(OptimizerKind v);
llvm::StringRef stringifyOption(StepCounters v);
llvm::StringRef stringifyOption(PlanSlicing v);
llvm::StringRef stringifyOption(Precision v);

} // namespace offload
} // namespace mlir

namespace llvm {
namespace cl {
template <>
class parser<mlir::offload::PrecisionOption>
    : public basic_parser<mlir::offload::PrecisionOption> {
public:
  parser(Option &o) : basic_parser(o) {}
  /// Accepts fp32, bf16-mixed, fp16-mixed; otherwise an error that lists
  /// them.
  bool parse(Option &o, StringRef argName, StringRef arg,
             mlir::offload::PrecisionOption &value);
  StringRef getValueName() const override { return "fp32|bf16-mixed|fp16-mixed"; }
  void printOptionDiff(const Option &o, mlir::offload::PrecisionOption value,
                       const OptionValue<mlir::offload::PrecisionOption> &dflt,
                       size_t globalWidth) const;
};
} // namespace cl
} // namespace llvm

#endif
