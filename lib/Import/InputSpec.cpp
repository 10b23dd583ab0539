//===- InputSpec.cpp - `--input NAME=DIMSxDTYPE` as an MLIR tensor type ---===//
//
// Part of offload. The text after `=` is the body of a builtin tensor type
// (`32x3x32x32xf32` is `tensor<32x3x32x32xf32>`), parsed by MLIR's type
// parser; the importer then requires a static, positive shape, no encoding
// and one of the element types the runtime has.
//
//===----------------------------------------------------------------------===//
#include "offload/Import/TorchImporter.h"

#include "mlir/AsmParser/AsmParser.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Diagnostics.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;

static bool isSupportedElement(Type t) {
  return t.isF32() || t.isF64() || t.isBF16() || t.isF16() || t.isSignlessInteger(64) ||
         t.isSignlessInteger(32) || t.isSignlessInteger(1);
}

static const char *kExpectedTypes = "(expected f32, f64, bf16, f16, i64, i32 or i1)";

auto ::offload::import::parseInputSpec(const std::string &text, MLIRContext &ctx,
                                       InputSpec &out) -> std::string {
  std::string prefix = "--input '" + text + "': ";
  size_t eq = text.find('=');
  if (eq == std::string::npos || eq == 0)
    return prefix + "expected NAME=DIMSxDTYPE, e.g. x=32x3x32x32xf32";
  out.name = text.substr(0, eq);
  StringRef body = StringRef(text).substr(eq + 1);

  // MLIR's diagnostics become part of our message, never printed.
  std::string diag;
  ScopedDiagnosticHandler handler(&ctx, [&](Diagnostic &d) {
    if (diag.empty())
      diag = d.str();
    return success();
  });
  Type parsed;
  {
    std::string typeText = ("tensor<" + body + ">").str();
    size_t consumed = 0;
    parsed = parseType(typeText, &ctx, &consumed);
    if (parsed && consumed != typeText.size()) {
      parsed = Type();
      diag = "unexpected text after the element type";
    }
  }
  if (!parsed) {
    // Name the part that is wrong: the element type (after the last 'x') or
    // the first dimension that is not a positive integer.
    auto [dims, elem] = body.rsplit('x');
    if (body.contains('x') || !elem.empty()) {
      std::string e = body.contains('x') ? elem.str() : body.str();
      Type et = parseType(e, &ctx);
      if (!et || !isSupportedElement(et))
        return prefix + "unknown element type '" + e + "' " + kExpectedTypes;
      SmallVector<StringRef> parts;
      dims.split(parts, 'x');
      for (StringRef p : parts)
        if (p.empty() || !llvm::all_of(p, llvm::isDigit))
          return prefix + "dimension '" + p.str() + "' is not a positive integer";
    }
    return prefix + "not a tensor type: " + diag;
  }
  auto type = dyn_cast<RankedTensorType>(parsed);
  if (!type)
    return prefix + "not a ranked tensor type";
  if (type.getEncoding())
    return prefix + "a tensor encoding is not supported";
  for (int64_t d : type.getShape())
    if (ShapedType::isDynamic(d) || d <= 0)
      return prefix + "dimension '" +
             (ShapedType::isDynamic(d) ? std::string("?") : std::to_string(d)) +
             "' is not a positive integer";
  if (!isSupportedElement(type.getElementType())) {
    std::string s;
    llvm::raw_string_ostream os(s);
    os << type.getElementType();
    return prefix + "unknown element type '" + s + "' " + kExpectedTypes;
  }
  out.type = type;
  return "";
}
