//===- OpSignatures.cpp - The op-signature table of plan instructions -----===//
//
// Part of offload. The table itself is generated from the dialect's ODS
// (offload-tblgen --gen-op-signatures); OFFLOAD_OP_SIGNATURES_INC names the
// generated file (lib/Runtime/CMakeLists.txt).
//
//===----------------------------------------------------------------------===//

#include "offload/Runtime/OpSignatures.h"

#include <algorithm>
#include <cstdlib>
#include <sstream>

using namespace offload::rt;

static std::vector<std::string> splitCommas(const char *s) {
  std::vector<std::string> out;
  std::string cur;
  for (const char *p = s; *p; ++p) {
    if (*p == ',') {
      out.push_back(cur);
      cur.clear();
    } else {
      cur += *p;
    }
  }
  if (!cur.empty())
    out.push_back(cur);
  return out;
}

AttrValue OpAttrSignature::defaultValue() const {
  AttrValue v;
  switch (kind) {
  case OpAttrKind::Int:
  case OpAttrKind::Bool:
    v.kind = AttrValue::Kind::Ints;
    v.ints = {std::strtoll(defaultText, nullptr, 10)};
    break;
  case OpAttrKind::Float:
    v.kind = AttrValue::Kind::Floats;
    v.floats = {std::strtod(defaultText, nullptr)};
    break;
  case OpAttrKind::Ints:
    v.kind = AttrValue::Kind::Ints;
    for (const std::string &s : splitCommas(defaultText))
      v.ints.push_back(std::strtoll(s.c_str(), nullptr, 10));
    break;
  case OpAttrKind::String:
  case OpAttrKind::Enum:
    v.kind = AttrValue::Kind::String;
    v.str = defaultText;
    break;
  }
  return v;
}

std::vector<std::string> OpAttrSignature::cases() const {
  return splitCommas(enumCases);
}

const OpAttrSignature *OpSignature::findAttr(const std::string &n) const {
  for (const OpAttrSignature &a : attrs)
    if (n == a.name)
      return &a;
  return nullptr;
}

const std::vector<OpSignature> &offload::rt::opSignatures() {
  static const std::vector<OpSignature> table = [] {
    std::vector<OpSignature> t;
#define OFFLOAD_OP(NAME, MIN_IN, MAX_IN, N_OUT)                                \
  t.push_back(OpSignature{NAME, MIN_IN, MAX_IN, N_OUT, {}});
#define OFFLOAD_ATTR(NAME, KIND, PRESENCE, DEFAULT, CASES)                     \
  t.back().attrs.push_back(OpAttrSignature{NAME, OpAttrKind::KIND,             \
                                           OpAttrPresence::PRESENCE, DEFAULT,  \
                                           CASES});
#define OFFLOAD_OP_END()
#include OFFLOAD_OP_SIGNATURES_INC
#undef OFFLOAD_OP
#undef OFFLOAD_ATTR
#undef OFFLOAD_OP_END
    std::sort(t.begin(), t.end(), [](const OpSignature &a, const OpSignature &b) {
      return std::string(a.name) < b.name;
    });
    return t;
  }();
  return table;
}

const OpSignature *offload::rt::findOpSignature(const std::string &op) {
  const std::vector<OpSignature> &t = opSignatures();
  auto it = std::lower_bound(
      t.begin(), t.end(), op,
      [](const OpSignature &s, const std::string &n) { return s.name < n; });
  return it != t.end() && op == it->name ? &*it : nullptr;
}

static const char *kindText(OpAttrKind k) {
  switch (k) {
  case OpAttrKind::Int: return "an integer";
  case OpAttrKind::Bool: return "a bool (integer 0 or 1)";
  case OpAttrKind::Float: return "a float";
  case OpAttrKind::Ints: return "an integer list";
  case OpAttrKind::String: return "a string";
  case OpAttrKind::Enum: return "a keyword";
  }
  return "?";
}

std::string offload::rt::checkOpSignature(const OpSignature &sig,
                                          size_t numInputs, size_t numOutputs,
                                          const AttrMap &attrs) {
  std::ostringstream os;
  os << sig.name << ": ";
  if (numInputs < size_t(sig.minInputs) ||
      (sig.maxInputs >= 0 && numInputs > size_t(sig.maxInputs))) {
    os << "has " << numInputs << " operands, expected ";
    if (sig.maxInputs == sig.minInputs)
      os << sig.minInputs;
    else if (sig.maxInputs < 0)
      os << "at least " << sig.minInputs;
    else
      os << sig.minInputs << " to " << sig.maxInputs;
    return os.str();
  }
  if (numOutputs != size_t(sig.numOutputs)) {
    os << "has " << numOutputs << " results, expected " << sig.numOutputs;
    return os.str();
  }
  for (const OpAttrSignature &a : sig.attrs)
    if (a.presence == OpAttrPresence::Required && !attrs.has(a.name)) {
      os << "missing attribute '" << a.name << "' (" << kindText(a.kind) << ")";
      return os.str();
    }
  for (const auto &[name, v] : attrs.entries()) {
    const OpAttrSignature *a = sig.findAttr(name);
    if (!a) {
      os << "unknown attribute '" << name << "'";
      if (!sig.attrs.empty()) {
        os << " (the op has";
        for (size_t i = 0; i < sig.attrs.size(); ++i)
          os << (i ? ", '" : " '") << sig.attrs[i].name << "'";
        os << ")";
      } else {
        os << " (the op has none)";
      }
      return os.str();
    }
    bool ok = true;
    switch (a->kind) {
    case OpAttrKind::Int:
      ok = v.kind == AttrValue::Kind::Ints && v.ints.size() == 1;
      break;
    case OpAttrKind::Bool:
      ok = v.kind == AttrValue::Kind::Ints && v.ints.size() == 1 &&
           (v.ints[0] == 0 || v.ints[0] == 1);
      break;
    case OpAttrKind::Float:
      // An integral value written as an integer reads as a float
      // (AttrMap::getFloat).
      ok = (v.kind == AttrValue::Kind::Floats && v.floats.size() == 1) ||
           (v.kind == AttrValue::Kind::Ints && v.ints.size() == 1);
      break;
    case OpAttrKind::Ints:
      ok = v.kind == AttrValue::Kind::Ints;
      break;
    case OpAttrKind::String:
      ok = v.kind == AttrValue::Kind::String;
      break;
    case OpAttrKind::Enum: {
      ok = v.kind == AttrValue::Kind::String;
      if (ok) {
        std::vector<std::string> cs = a->cases();
        if (std::find(cs.begin(), cs.end(), v.str) == cs.end()) {
          os << "attribute '" << name << "' is '" << v.str
             << "', expected one of " << a->enumCases;
          return os.str();
        }
      }
      break;
    }
    }
    if (!ok) {
      os << "attribute '" << name << "' must be " << kindText(a->kind);
      return os.str();
    }
  }
  return "";
}

void offload::rt::fillDefaultAttrs(const OpSignature &sig, AttrMap &attrs) {
  for (const OpAttrSignature &a : sig.attrs)
    if (a.presence == OpAttrPresence::Defaulted && !attrs.has(a.name))
      attrs.set(a.name, a.defaultValue());
}
