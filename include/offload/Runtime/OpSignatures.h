//===- OpSignatures.h - The op-signature table of plan instructions -*- C++ -*-===//
//
// Part of offload. One entry per op of the offload dialect that becomes a
// kernel instruction of a plan (ODS `hasKernel = 1`), generated from the ODS
// by `offload-tblgen --gen-op-signatures` (tools/offload-tblgen): operand and
// result counts, and each attribute's name, kind, presence and default. The
// lowering (lib/Conversion/OffloadToPlan) converts attributes by it, and the
// runtime checks every instruction of a plan against it once, when the plan
// is loaded (validatePlan), so kernels see only instructions of the right
// shape. Needs no MLIR.
//
//===----------------------------------------------------------------------===//
#ifndef OFFLOAD_RUNTIME_OPSIGNATURES_H
#define OFFLOAD_RUNTIME_OPSIGNATURES_H

#include "offload/Runtime/PlanFormat.h"

#include <string>
#include <vector>

namespace offload {
namespace rt {

/// How an attribute is stored in a plan (AttrValue).
enum class OpAttrKind : uint8_t {
  Int,    ///< Ints of length 1 (ODS I64Attr)
  Bool,   ///< Ints of length 1, value 0 or 1 (ODS BoolAttr)
  Float,  ///< Floats of length 1 (ODS F64Attr)
  Ints,   ///< Ints of any length (ODS DenseI64ArrayAttr)
  String, ///< String (ODS StrAttr)
  Enum,   ///< String, one of `enumCases` (ODS I32EnumAttr)
};

/// Whether an instruction must carry the attribute.
enum class OpAttrPresence : uint8_t {
  Required,  ///< must be present
  Optional,  ///< may be absent; the kernel decides what absence means
  Defaulted, ///< may be absent; absence means `defaultValue`
};

struct OpAttrSignature {
  const char *name;
  OpAttrKind kind;
  OpAttrPresence presence;
  /// Defaulted: the ODS default in text form: "0"/"1" for Bool, the number
  /// for Int and Float, comma-separated integers for Ints ("" is empty),
  /// the keyword for Enum and String. "" otherwise.
  const char *defaultText;
  /// Enum: the keywords, comma-separated, keyword i being the case of value
  /// i ("mean,sum"). "" otherwise.
  const char *enumCases;

  /// The default as an AttrValue (Defaulted attributes only).
  AttrValue defaultValue() const;
  /// The keywords of an Enum attribute.
  std::vector<std::string> cases() const;
};

struct OpSignature {
  /// "offload.linear".
  const char *name;
  /// Inputs of an instruction: at least minInputs, at most maxInputs (-1:
  /// no bound, a variadic operand). Absent optional operands are -1 buffer
  /// ids and count.
  int minInputs;
  int maxInputs;
  /// Outputs (the op's results).
  int numOutputs;
  std::vector<OpAttrSignature> attrs;

  /// The attribute named `name`, or nullptr.
  const OpAttrSignature *findAttr(const std::string &name) const;
};

/// Every signature, sorted by op name.
const std::vector<OpSignature> &opSignatures();

/// The signature of `op` ("offload.linear"), or nullptr when the dialect has
/// no kernel op of that name.
const OpSignature *findOpSignature(const std::string &op);

/// Checks one instruction's operand count, result count and attributes
/// against `sig`: every Required attribute present, no attribute the op does
/// not have, every attribute of its kind (an Enum's value one of its
/// keywords). Returns "" or a one-line message naming the op and what is
/// wrong; the caller prefixes where (plan instruction index).
std::string checkOpSignature(const OpSignature &sig, size_t numInputs,
                             size_t numOutputs, const AttrMap &attrs);

/// `attrs` with every Defaulted attribute it lacks set to its default.
void fillDefaultAttrs(const OpSignature &sig, AttrMap &attrs);

} // namespace rt
} // namespace offload

#endif
