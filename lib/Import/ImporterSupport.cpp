//===- ImporterSupport.cpp - Locations, constants and op creation ---------===//
//
// Part of offload. The TorchScript side of what conversions use: the source
// location of a node, integer/boolean node arguments known at import time,
// and LibTorch constant tensors materialized as ops of the step (the
// front-end-neutral helpers are StepBuilder's, OpBuilder.cpp).
//
//===----------------------------------------------------------------------===//
#include "Importer.h"

using namespace mlir;
using namespace mlir::offload;
using namespace ::offload::import;
using namespace ::offload::import::ts;

//===----------------------------------------------------------------------===//
// Locations and scalar access
//===----------------------------------------------------------------------===//

/// file:line:col of the Python code that produced `n`, when recorded.
bool ts::sourceOf(tj::Node *n, std::string &file, size_t &line, size_t &col) {
  try {
    tj::SourceRange r = n->sourceRange();
    if (auto gen = r.findSourceRangeThatGenerated())
      r = *gen;
    if (auto flc = r.file_line_col()) {
      file = std::get<0>(*flc);
      line = std::get<1>(*flc);
      col = std::get<2>(*flc);
      return !file.empty();
    }
  } catch (...) {
  }
  return false;
}

Location Importer::loc(tj::Node *n) {
  std::string file;
  size_t line = 0, col = 0;
  if (sourceOf(n, file, line, col))
    return FileLineColLoc::get(&ctx, file, line, col);
  return NameLoc::get(b.getStringAttr(n->kind().toQualString()));
}

std::string Importer::where(tj::Node *n) {
  std::string file;
  size_t line = 0, col = 0;
  std::string kind = n->kind().toQualString();
  if (sourceOf(n, file, line, col))
    return file + ":" + std::to_string(line) + ": " + kind;
  return kind;
}

int64_t Importer::getInt(tj::Node *n, size_t i) {
  Val &v = in(n, i);
  if (v.isConst() && v.iv.isInt())
    return v.iv.toInt();
  if (v.isConst() && v.iv.isBool())
    return v.iv.toBool();
  if (v.isConst() && v.iv.isTensor() && v.iv.toTensor().numel() == 1 &&
      !v.iv.toTensor().is_floating_point())
    return v.iv.toTensor().item<int64_t>();
  fail(n, "argument " + std::to_string(i) +
              " must be an integer known at import time");
}

bool Importer::getBool(tj::Node *n, size_t i) {
  Val &v = in(n, i);
  if (v.isConst() && v.iv.isBool())
    return v.iv.toBool();
  if (v.isConst() && v.iv.isInt())
    return v.iv.toInt() != 0;
  fail(n, "argument " + std::to_string(i) + " must be a boolean known at import time");
}

Type Importer::elementType(at::ScalarType st, const std::string &what) {
  switch (st) {
  case at::kFloat:
    return b.getF32Type();
  case at::kDouble:
    return b.getF64Type();
  case at::kBFloat16:
    return b.getBF16Type();
  case at::kHalf:
    return b.getF16Type();
  case at::kLong:
    return b.getI64Type();
  case at::kInt:
    return b.getI32Type();
  case at::kBool:
    return b.getI1Type();
  default:
    throw ConvError{what + " has dtype " + std::string(c10::toString(st)) +
                    ", which offload does not support (f32, f64, bf16, f16, i64, i32, bool)"};
  }
}

at::ScalarType Importer::scalarTypeOf(Type et) {
  if (et.isF32()) return at::kFloat;
  if (et.isF64()) return at::kDouble;
  if (et.isBF16()) return at::kBFloat16;
  if (et.isF16()) return at::kHalf;
  if (et.isInteger(64)) return at::kLong;
  if (et.isInteger(32)) return at::kInt;
  return at::kBool;
}

//===----------------------------------------------------------------------===//
// Op creation
//===----------------------------------------------------------------------===//

/// A constant tensor as an op of the step: a splat becomes offload.fill, the
/// rest offload.constant. `elemHint`, when set, is the element type the
/// consumer needs (PyTorch casts wrapped numbers and 0-dim tensors to the
/// other operand's type).
mlir::Value Importer::materializeTensor(Call &n, const at::Tensor &t0, Type elemHint) {
  at::Tensor t = t0.detach().contiguous();
  Type et = elementType(t.scalar_type(), "a constant");
  if (elemHint && t.dim() == 0)
    et = elemHint;
  auto type = RankedTensorType::get(t.sizes().vec(), et);
  at::Tensor flat = t.reshape({-1});
  if (t.numel() >= 1 && at::equal(flat, flat[0].expand_as(flat)))
    return fill(n, flat[0].item<double>(), type);
  Attribute attrV;
  if (t.scalar_type() == at::kBool) {
    auto acc = flat.accessor<bool, 1>();
    SmallVector<bool> v(acc.data(), acc.data() + flat.numel());
    attrV = DenseElementsAttr::get(type, ArrayRef<bool>(v));
  } else if (t.scalar_type() == at::kLong) {
    auto acc = flat.accessor<int64_t, 1>();
    attrV = DenseElementsAttr::get(type, ArrayRef<int64_t>(acc.data(), flat.numel()));
  } else if (t.scalar_type() == at::kInt) {
    auto acc = flat.accessor<int32_t, 1>();
    attrV = DenseElementsAttr::get(type, ArrayRef<int32_t>(acc.data(), flat.numel()));
  } else if (t.scalar_type() == at::kDouble) {
    auto acc = flat.accessor<double, 1>();
    attrV = DenseElementsAttr::get(type, ArrayRef<double>(acc.data(), flat.numel()));
  } else if (isa<BFloat16Type, Float16Type>(et)) {
    // bf16/f16 values: exact in f64, exact again in their own semantics.
    at::Tensor f = flat.to(at::kDouble);
    auto acc = f.accessor<double, 1>();
    attrV = lowFloatElements(type, ArrayRef<double>(acc.data(), f.numel()));
  } else {
    at::Tensor f = flat.to(at::kFloat);
    auto acc = f.accessor<float, 1>();
    attrV = DenseElementsAttr::get(type, ArrayRef<float>(acc.data(), f.numel()));
  }
  return emit1<ConstantOp>(n, {}, {attr("value", attrV)});
}
