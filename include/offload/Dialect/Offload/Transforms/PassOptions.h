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

#include <iterator>
#include <string>

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

/// --offload-autodiff moments= (the element type of AdamW's exp_avg and
/// exp_avg_sq; docs/precision.md).
enum class Moments { F32, Bf16 };

/// An enum option whose parser, unlike cl::values' ("Cannot find option
/// named 'x'!"), answers a bad value with the names it takes (the issue's
/// "bad input" rule). Prints as its name, so a recorded pipeline
/// (offload.autodiff) parses back. NamedOptionTraits<E> gives the values and
/// the noun of the error ("'x' is not a precision; expected ...").
template <typename E> struct NamedOption {
  E value{};
  NamedOption() = default;
  NamedOption(E v) : value(v) {}
  bool operator==(const NamedOption &o) const { return value == o.value; }
  bool operator!=(const NamedOption &o) const { return value != o.value; }
};
template <typename E> struct NamedOptionTraits;
template <> struct NamedOptionTraits<Precision> {
  static constexpr const char *noun = "a precision";
  static constexpr Precision values[] = {Precision::Fp32, Precision::Bf16Mixed,
                                         Precision::Fp16Mixed};
};
template <> struct NamedOptionTraits<Moments> {
  static constexpr const char *noun = "a moments type";
  static constexpr Moments values[] = {Moments::F32, Moments::Bf16};
};
/// The type of precision= (--offload-autodiff, --offload-autocast).
using PrecisionOption = NamedOption<Precision>;
/// The type of moments= (--offload-autodiff).
using MomentsOption = NamedOption<Moments>;

/// The option keyword of each value ("every-k", "per-parameter", ...).
llvm::StringRef stringifyOption(RecomputePolicy v);
llvm::StringRef stringifyOption(HostOffloadPolicy v);
llvm::StringRef stringifyOption(HostParametersPolicy v);
llvm::StringRef stringifyOption(RefetchMode v);
llvm::StringRef stringifyOption(OptimizerKind v);
llvm::StringRef stringifyOption(StepCounters v);
llvm::StringRef stringifyOption(PlanSlicing v);
llvm::StringRef stringifyOption(Precision v);
llvm::StringRef stringifyOption(Moments v);

template <typename E>
llvm::raw_ostream &operator<<(llvm::raw_ostream &os, const NamedOption<E> &p) {
  return os << stringifyOption(p.value);
}
/// "a, b or c": the names a NamedOption<E> takes.
template <typename E> std::string namedOptionValues(llvm::StringRef sep = ", ") {
  std::string r;
  const auto &vs = NamedOptionTraits<E>::values;
  size_t n = std::size(vs);
  for (size_t i = 0; i < n; ++i) {
    if (i)
      r += i + 1 == n ? " or " : sep.str();
    r += stringifyOption(vs[i]).str();
  }
  return r;
}

} // namespace offload
} // namespace mlir

namespace llvm {
namespace cl {
template <typename E>
class parser<mlir::offload::NamedOption<E>>
    : public basic_parser<mlir::offload::NamedOption<E>> {
public:
  using Value = mlir::offload::NamedOption<E>;
  parser(Option &o) : basic_parser<Value>(o) {}
  /// Accepts the names of E's values; otherwise an error that lists them.
  bool parse(Option &o, StringRef argName, StringRef arg, Value &value) {
    for (E v : mlir::offload::NamedOptionTraits<E>::values)
      if (arg == mlir::offload::stringifyOption(v)) {
        value = v;
        return false;
      }
    return o.error("'" + arg + "' is not " + mlir::offload::NamedOptionTraits<E>::noun +
                   "; expected " + mlir::offload::namedOptionValues<E>());
  }
  StringRef getValueName() const override {
    static const std::string names = [] {
      std::string r;
      for (E v : mlir::offload::NamedOptionTraits<E>::values)
        r += (r.empty() ? "" : "|") + mlir::offload::stringifyOption(v).str();
      return r;
    }();
    return names;
  }
  void printOptionDiff(const Option &o, Value value, const OptionValue<Value> &dflt,
                       size_t globalWidth) const {
    this->printOptionName(o, globalWidth);
    llvm::outs() << "= " << value;
    if (dflt.hasValue() && dflt.getValue() != value)
      llvm::outs() << " (default: " << dflt.getValue() << ")";
    llvm::outs() << "\n";
  }
};
} // namespace cl
} // namespace llvm

#endif
