//===- PlanFormat.h - Element types and attributes of plan instructions -*- C++ -*-===//
//
// Part of offload. The vocabulary a plan is written in, shared by the
// compiler's lowering (lib/Conversion/OffloadToPlan), the plan library
// (Plan.h, OpSignatures.h) and the kernels (Kernel.h): the element type of a
// buffer (`DType`) and the attributes of an instruction (`AttrValue`,
// `AttrMap`). Their enum values are the ones Plan.fbs stores.
//
// Standard C++ only: no MLIR, LLVM or CUDA, and nothing of the kernel
// interface, so that the compiler includes this and not Kernel.h.
//
//===----------------------------------------------------------------------===//
#ifndef OFFLOAD_RUNTIME_PLANFORMAT_H
#define OFFLOAD_RUNTIME_PLANFORMAT_H

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace offload {
namespace rt {

/// Element types a plan buffer can hold. Sizes in bytes: F32 4, F64 8, I64 8,
/// I32 4, Bool 1 (0 or 1), BF16 2 (bfloat16: the top half of an f32), F16 2
/// (IEEE binary16). New values are appended: the numbers are the ones Plan.fbs
/// stores. Conversions to and from f32: Float16.h.
enum class DType : uint8_t {
  F32 = 0,
  F64 = 1,
  I64 = 2,
  I32 = 3,
  Bool = 4,
  BF16 = 5,
  F16 = 6,
};
/// The largest DType value (plan validation refuses larger ones).
constexpr uint8_t kMaxDType = uint8_t(DType::F16);

/// True for the 16-bit float types (bf16, f16): stored in 2 bytes, computed
/// in f32 by the kernels (docs/precision.md).
inline bool isLowFloat(DType t) { return t == DType::BF16 || t == DType::F16; }

/// Size of one element of `t`, in bytes.
inline size_t dtypeSize(DType t) {
  switch (t) {
  case DType::F32: return 4;
  case DType::F64: return 8;
  case DType::I64: return 8;
  case DType::I32: return 4;
  case DType::Bool: return 1;
  case DType::BF16: return 2;
  case DType::F16: return 2;
  }
  return 0;
}

/// The MLIR spelling of `t` ("f32", "i1"), for messages and plan listings.
inline const char *dtypeName(DType t) {
  switch (t) {
  case DType::F32: return "f32";
  case DType::F64: return "f64";
  case DType::I64: return "i64";
  case DType::I32: return "i32";
  case DType::Bool: return "i1";
  case DType::BF16: return "bf16";
  case DType::F16: return "f16";
  }
  return "unknown";
}

/// "f32[2,3]": dtype and shape in the runtime's error messages.
inline std::string typeString(DType dt, const std::vector<int64_t> &shape) {
  static const char *names[] = {"f32", "f64", "i64", "i32", "bool", "bf16", "f16"};
  std::string s = uint8_t(dt) <= kMaxDType ? names[uint8_t(dt)] : "?";
  s += "[";
  for (size_t i = 0; i < shape.size(); ++i)
    s += (i ? "," : "") + std::to_string(shape[i]);
  return s + "]";
}

/// One attribute value of an instruction: an integer list, a float list, or a
/// string. Scalars are lists of length one.
struct AttrValue {
  enum class Kind : uint8_t { Ints, Floats, String } kind = Kind::Ints;
  std::vector<int64_t> ints;
  std::vector<double> floats;
  std::string str;
};

/// Named attributes of an instruction, as lowered from the op's MLIR
/// attributes (bool attributes become Ints {0|1}).
class AttrMap {
public:
  void set(std::string name, AttrValue v) {
    for (auto &e : entries_)
      if (e.first == name) { e.second = std::move(v); return; }
    entries_.emplace_back(std::move(name), std::move(v));
  }
  const AttrValue *find(const std::string &name) const {
    for (auto &e : entries_)
      if (e.first == name) return &e.second;
    return nullptr;
  }
  bool has(const std::string &name) const { return find(name) != nullptr; }
  int64_t getInt(const std::string &name, int64_t dflt) const {
    const AttrValue *v = find(name);
    return v && !v->ints.empty() ? v->ints[0] : dflt;
  }
  std::vector<int64_t> getInts(const std::string &name) const {
    const AttrValue *v = find(name);
    return v ? v->ints : std::vector<int64_t>{};
  }
  double getFloat(const std::string &name, double dflt) const {
    const AttrValue *v = find(name);
    if (!v) return dflt;
    if (!v->floats.empty()) return v->floats[0];
    if (!v->ints.empty()) return double(v->ints[0]);
    return dflt;
  }
  std::vector<double> getFloats(const std::string &name) const {
    const AttrValue *v = find(name);
    return v ? v->floats : std::vector<double>{};
  }
  std::string getString(const std::string &name, std::string dflt) const {
    const AttrValue *v = find(name);
    return v && v->kind == AttrValue::Kind::String ? v->str : dflt;
  }
  const std::vector<std::pair<std::string, AttrValue>> &entries() const {
    return entries_;
  }

private:
  std::vector<std::pair<std::string, AttrValue>> entries_;
};

} // namespace rt
} // namespace offload

#endif // OFFLOAD_RUNTIME_PLANFORMAT_H
