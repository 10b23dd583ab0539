//===- TorchImporter.cpp - TorchScript to offload dialect -----------------===//
//
// Part of offload. Walks the inlined TorchScript graph of `forward` once, in
// order, keeping for every TorchScript value what is known about it at import
// time (Val below): an MLIR tensor value of the step, a compile-time constant
// (numbers, lists, shapes, and tensors that do not depend on the inputs or
// parameters, such as a causal mask), a submodule, or a list of those.
// Nodes whose inputs are all constants are evaluated with LibTorch itself, so
// shape arithmetic (aten::size, prim::NumToTensor, aten::Int, list
// construction) and mask construction (arange/ones/triu) fold away. The
// other nodes are converted through the op table (`opTable()` below). Ops that
// are neither are collected and reported together.
//
// Compiled with -fexceptions: every LibTorch exception is caught here.
//
//===----------------------------------------------------------------------===//
#include "offload/Import/TorchImporter.h"
#include "Npz.h"

#include "offload/Dialect/Offload/IR/OffloadDialect.h"
#include "offload/Dialect/Offload/IR/OffloadOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Transforms/RegionUtils.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/raw_ostream.h"

#include <torch/csrc/jit/ir/ir.h>
#include <torch/csrc/jit/ir/constants.h>
#include <torch/csrc/jit/passes/inliner.h>
#include <torch/csrc/jit/serialization/import.h>
#include <torch/script.h>

#include <cmath>
#include <fstream>
#include <functional>
#include <map>
#include <set>
#include <unordered_map>

using namespace mlir;
using namespace mlir::offload;
using namespace ::offload::import;
namespace tj = torch::jit;

//===----------------------------------------------------------------------===//
// Input specs
//===----------------------------------------------------------------------===//

auto ::offload::import::parseInputSpec(const std::string &text, InputSpec &out)
    -> std::string {
  size_t eq = text.find('=');
  if (eq == std::string::npos || eq == 0)
    return "--input '" + text + "': expected NAME=DIMSxDTYPE, e.g. x=32x3x32x32xf32";
  out.name = text.substr(0, eq);
  std::string rest = text.substr(eq + 1);
  out.shape.clear();
  size_t pos = 0;
  while (true) {
    size_t x = rest.find('x', pos);
    std::string part = rest.substr(pos, x == std::string::npos ? std::string::npos : x - pos);
    if (x == std::string::npos) {
      out.dtype = part;
      break;
    }
    if (part.empty() || part.find_first_not_of("0123456789") != std::string::npos)
      return "--input '" + text + "': dimension '" + part + "' is not a positive integer";
    long long d = std::atoll(part.c_str());
    if (d <= 0 || part.size() > 12)
      return "--input '" + text + "': dimension '" + part + "' is not a positive integer";
    out.shape.push_back(d);
    pos = x + 1;
  }
  static const std::set<std::string> dtypes = {"f32", "f64", "i64", "i32", "i1"};
  if (!dtypes.count(out.dtype))
    return "--input '" + text + "': unknown element type '" + out.dtype +
           "' (expected f32, f64, i64, i32 or i1)";
  return "";
}

//===----------------------------------------------------------------------===//
// Loading
//===----------------------------------------------------------------------===//

namespace offload {
namespace import {
class LoadedModel {
public:
  tj::Module module;
  std::string path;
};
} // namespace import
} // namespace offload

void LoadedModelDeleter::operator()(LoadedModel *m) const { delete m; }

/// The first line of a LibTorch message, without its C++ backtrace.
static std::string firstLine(const std::string &s) {
  std::string line = s.substr(0, s.find('\n'));
  while (!line.empty() && (line.back() == ' ' || line.back() == '\r'))
    line.pop_back();
  return line;
}

static std::string torchMessage(const std::exception &e) {
  if (auto *ce = dynamic_cast<const c10::Error *>(&e))
    return firstLine(ce->what_without_backtrace());
  return firstLine(e.what());
}

auto ::offload::import::loadModel(const std::string &path, ImportError &err)
    -> LoadedModelPtr {
  {
    std::ifstream f(path, std::ios::binary);
    if (!f) {
      err = {1, "cannot open '" + path + "': no such file or not readable"};
      return nullptr;
    }
  }
  try {
    auto m = std::make_unique<LoadedModel>();
    m->module = tj::load(path, c10::Device(c10::kCPU));
    m->path = path;
    if (!m->module.find_method("forward")) {
      err = {1, "'" + path + "' has no forward method"};
      return nullptr;
    }
    return LoadedModelPtr(m.release());
  } catch (const std::exception &e) {
    err = {1, "cannot load '" + path + "' as TorchScript: " + torchMessage(e)};
    return nullptr;
  } catch (...) {
    err = {2, "cannot load '" + path + "': unknown exception"};
    return nullptr;
  }
}

//===----------------------------------------------------------------------===//
// Parameter export
//===----------------------------------------------------------------------===//

static NamedArray toArray(const std::string &name, const at::Tensor &t0) {
  at::Tensor t = t0.detach().contiguous().cpu();
  NamedArray a;
  a.name = name;
  if (t.is_floating_point()) {
    if (t.scalar_type() != at::kDouble)
      t = t.to(at::kFloat);
    a.descr = t.scalar_type() == at::kDouble ? "<f8" : "<f4";
  } else if (t.scalar_type() == at::kBool) {
    a.descr = "|b1";
  } else {
    t = t.to(at::kLong);
    a.descr = "<i8";
  }
  for (int64_t d : t.sizes())
    a.shape.push_back(d);
  const char *p = static_cast<const char *>(t.data_ptr());
  a.bytes.assign(p, p + t.numel() * t.element_size());
  return a;
}

auto ::offload::import::writeParams(LoadedModel &model, const std::string &path)
    -> std::string {
  try {
    std::vector<NamedArray> arrays;
    for (const auto &p : model.module.named_parameters(true))
      arrays.push_back(toArray(p.name, p.value));
    for (const auto &b : model.module.named_buffers(true))
      arrays.push_back(toArray(b.name, b.value));
    return writeNpz(path, arrays);
  } catch (const std::exception &e) {
    return "cannot write parameters: " + torchMessage(e);
  }
}

//===----------------------------------------------------------------------===//
// The importer
//===----------------------------------------------------------------------===//

namespace {

/// What the importer knows about one TorchScript value.
struct Val {
  enum Kind { Unknown, Const, Tensor, List, Module } kind = Unknown;
  c10::IValue iv;           // Const: the value; Module: the object.
  mlir::Value value;        // Tensor.
  std::vector<Val> elems;   // List (some element is not constant).
  std::string path;         // Module: qualified name; Tensor: the parameter
                            // or buffer it holds, if any.

  static Val constant(c10::IValue v) {
    Val r;
    r.kind = Const;
    r.iv = std::move(v);
    return r;
  }
  static Val tensor(mlir::Value v, std::string name = "") {
    Val r;
    r.kind = Tensor;
    r.value = v;
    r.path = std::move(name);
    return r;
  }
  bool isConst() const { return kind == Const; }
  bool isNone() const { return kind == Const && iv.isNone(); }
};

/// A user-facing failure; the message already carries the location.
struct ConvError {
  std::string message;
};

class Importer;
using ConvertFn = std::function<void(Importer &, tj::Node *)>;

class Importer {
public:
  Importer(LoadedModel &model, MLIRContext &ctx, const ImportOptions &opts)
      : model(model), ctx(ctx), opts(opts), b(&ctx) {}

  OwningOpRef<ModuleOp> run(ImportError &err);

  // --- helpers used by the op table ----------------------------------------
  Location loc(tj::Node *n);
  std::string where(tj::Node *n);
  [[noreturn]] void fail(tj::Node *n, const std::string &msg) {
    throw ConvError{where(n) + ": " + msg};
  }
  Val &in(tj::Node *n, size_t i) { return vals[n->input(i)]; }
  void setOut(tj::Node *n, size_t i, Val v) { vals[n->output(i)] = std::move(v); }
  void setOut(tj::Node *n, mlir::Value v) { vals[n->output(0)] = Val::tensor(v); }

  int64_t getInt(tj::Node *n, size_t i);
  double getDouble(tj::Node *n, size_t i);
  bool getBool(tj::Node *n, size_t i);
  std::vector<int64_t> getInts(tj::Node *n, size_t i);
  std::string getString(tj::Node *n, size_t i);
  bool isScalar(const Val &v);
  double scalarValue(const Val &v);
  mlir::Value tensorIn(tj::Node *n, size_t i, Type elemHint = {});
  mlir::Value optTensorIn(tj::Node *n, size_t i) {
    return in(n, i).isNone() ? mlir::Value() : tensorIn(n, i);
  }
  mlir::Value materialize(tj::Node *n, const at::Tensor &t, Type elemHint);
  RankedTensorType tt(mlir::Value v) { return cast<RankedTensorType>(v.getType()); }

  /// Creates op `OpTy` with `operands` and `attrs`; result types are inferred
  /// when the op can, else `types`. The op is verified; a failure (a dtype
  /// or shape the op cannot take) becomes a user error at `n`.
  template <typename OpTy>
  Operation *emit(tj::Node *n, ValueRange operands,
                  ArrayRef<NamedAttribute> attrs = {},
                  ArrayRef<Type> types = {});
  template <typename OpTy>
  mlir::Value emit1(tj::Node *n, ValueRange operands,
                    ArrayRef<NamedAttribute> attrs = {},
                    ArrayRef<Type> types = {}) {
    return emit<OpTy>(n, operands, attrs, types)->getResult(0);
  }
  NamedAttribute attr(StringRef name, Attribute a) {
    return b.getNamedAttr(name, a);
  }
  NamedAttribute f64(StringRef name, double v) {
    return attr(name, b.getF64FloatAttr(v));
  }
  NamedAttribute i64(StringRef name, int64_t v) {
    return attr(name, b.getI64IntegerAttr(v));
  }
  NamedAttribute i64s(StringRef name, ArrayRef<int64_t> v) {
    return attr(name, b.getDenseI64ArrayAttr(v));
  }
  mlir::Value reshape(tj::Node *n, mlir::Value v, ArrayRef<int64_t> shape);
  mlir::Value fill(tj::Node *n, double value, RankedTensorType type);
  mlir::Value seed(tj::Node *n);
  int64_t nextDropoutOffset(int64_t numel) {
    int64_t o = dropoutOffset;
    dropoutOffset += numel;
    return o;
  }
  void updateState(const Val &target, mlir::Value newValue);

  LoadedModel &model;
  MLIRContext &ctx;
  const ImportOptions &opts;
  OpBuilder b;

private:
  void convertBlock(tj::Block *block);
  void convertNode(tj::Node *n);
  bool tryFold(tj::Node *n);
  void convertGetAttr(tj::Node *n);
  void recordUnsupported(tj::Node *n);
  Type elementType(at::ScalarType st, const std::string &what);

  std::unordered_map<const tj::Value *, Val> vals;
  Block *body = nullptr;
  func::FuncOp func;
  // Parameters and buffers: qualified name -> argument index and current
  // value (buffers change when the step updates them).
  llvm::StringMap<unsigned> argIndex;
  llvm::StringMap<mlir::Value> current;
  std::vector<std::string> bufferNames;
  std::vector<std::pair<std::string, std::string>> argNameRole;
  int seedArg = -1;
  int64_t dropoutOffset = 0;
  // Unsupported ops: kind -> (count, distinct locations in order).
  std::map<std::string, std::pair<int, std::vector<std::string>>> unsupported;
  std::vector<std::string> diagnostics;
};

} // namespace

//===----------------------------------------------------------------------===//
// Locations and scalar access
//===----------------------------------------------------------------------===//

/// file:line:col of the Python code that produced `n`, when recorded.
static bool sourceOf(tj::Node *n, std::string &file, size_t &line, size_t &col) {
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

double Importer::getDouble(tj::Node *n, size_t i) {
  Val &v = in(n, i);
  if (isScalar(v))
    return scalarValue(v);
  fail(n, "argument " + std::to_string(i) +
              " must be a number known at import time");
}

bool Importer::getBool(tj::Node *n, size_t i) {
  Val &v = in(n, i);
  if (v.isConst() && v.iv.isBool())
    return v.iv.toBool();
  if (v.isConst() && v.iv.isInt())
    return v.iv.toInt() != 0;
  fail(n, "argument " + std::to_string(i) +
              " must be a boolean known at import time");
}

std::vector<int64_t> Importer::getInts(tj::Node *n, size_t i) {
  Val &v = in(n, i);
  if (v.isConst() && v.iv.isIntList())
    return v.iv.toIntVector();
  if (v.isConst() && v.iv.isInt())
    return {v.iv.toInt()};
  fail(n, "argument " + std::to_string(i) +
              " must be a list of integers known at import time");
}

std::string Importer::getString(tj::Node *n, size_t i) {
  Val &v = in(n, i);
  if (v.isConst() && v.iv.isString())
    return v.iv.toStringRef();
  fail(n, "argument " + std::to_string(i) + " must be a string");
}

bool Importer::isScalar(const Val &v) {
  if (!v.isConst())
    return false;
  if (v.iv.isDouble() || v.iv.isInt() || v.iv.isBool())
    return true;
  return v.iv.isTensor() && v.iv.toTensor().dim() == 0;
}

double Importer::scalarValue(const Val &v) {
  if (v.iv.isDouble())
    return v.iv.toDouble();
  if (v.iv.isInt())
    return static_cast<double>(v.iv.toInt());
  if (v.iv.isBool())
    return v.iv.toBool() ? 1.0 : 0.0;
  return v.iv.toTensor().item<double>();
}

Type Importer::elementType(at::ScalarType st, const std::string &what) {
  switch (st) {
  case at::kFloat:
    return b.getF32Type();
  case at::kDouble:
    return b.getF64Type();
  case at::kLong:
    return b.getI64Type();
  case at::kInt:
    return b.getI32Type();
  case at::kBool:
    return b.getI1Type();
  default:
    throw ConvError{what + " has dtype " + std::string(c10::toString(st)) +
                    ", which offload does not support (f32, f64, i64, i32, bool)"};
  }
}

//===----------------------------------------------------------------------===//
// Op creation
//===----------------------------------------------------------------------===//

template <typename OpTy>
Operation *Importer::emit(tj::Node *n, ValueRange operands,
                          ArrayRef<NamedAttribute> attrs,
                          ArrayRef<Type> types) {
  Location l = loc(n);
  OperationState state(l, OpTy::getOperationName());
  state.addOperands(operands);
  state.addAttributes(attrs);
  diagnostics.clear();
  if constexpr (OpTy::template hasTrait<InferTypeOpInterface::Trait>()) {
    SmallVector<Type> inferred;
    if (failed(OpTy::inferReturnTypes(&ctx, l, operands,
                                      state.attributes.getDictionary(&ctx),
                                      /*properties=*/nullptr, /*regions=*/{},
                                      inferred))) {
      std::string msg = diagnostics.empty() ? "cannot infer the result type"
                                            : diagnostics.front();
      fail(n, std::string(OpTy::getOperationName()) + ": " + msg);
    }
    state.addTypes(inferred);
  } else {
    state.addTypes(types);
  }
  Operation *op = b.create(state);
  if (failed(mlir::verify(op))) {
    std::string msg = diagnostics.empty() ? "invalid operands" : diagnostics.front();
    op->erase();
    fail(n, msg);
  }
  return op;
}

mlir::Value Importer::fill(tj::Node *n, double value, RankedTensorType type) {
  return emit1<FillOp>(n, {}, {f64("value", value)}, {type});
}

mlir::Value Importer::reshape(tj::Node *n, mlir::Value v,
                              ArrayRef<int64_t> shape) {
  auto t = tt(v);
  if (t.getShape() == shape)
    return v;
  return emit1<ReshapeOp>(n, {v}, {},
                          {RankedTensorType::get(shape, t.getElementType())});
}

/// A constant tensor as an op of the step: a splat becomes offload.fill, the
/// rest offload.constant. `elemHint`, when set, is the element type the
/// consumer needs (PyTorch casts wrapped numbers and 0-dim tensors to the
/// other operand's type).
mlir::Value Importer::materialize(tj::Node *n, const at::Tensor &t0,
                                  Type elemHint) {
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
  } else {
    at::Tensor f = flat.to(at::kFloat);
    auto acc = f.accessor<float, 1>();
    attrV = DenseElementsAttr::get(type, ArrayRef<float>(acc.data(), f.numel()));
  }
  return emit1<ConstantOp>(n, {}, {attr("value", attrV)});
}

mlir::Value Importer::tensorIn(tj::Node *n, size_t i, Type elemHint) {
  Val &v = in(n, i);
  if (v.kind == Val::Tensor)
    return v.value;
  if (v.isConst() && v.iv.isTensor())
    return materialize(n, v.iv.toTensor(), elemHint);
  if (v.isConst() && (v.iv.isDouble() || v.iv.isInt() || v.iv.isBool())) {
    at::Tensor t = v.iv.isDouble() ? at::scalar_tensor(v.iv.toDouble(), at::kDouble)
                   : v.iv.isInt()  ? at::scalar_tensor(v.iv.toInt(), at::kLong)
                                   : at::scalar_tensor(v.iv.toBool(), at::kBool);
    return materialize(n, t, elemHint);
  }
  fail(n, "argument " + std::to_string(i) + " must be a tensor");
}

mlir::Value Importer::seed(tj::Node *n) {
  if (seedArg < 0) {
    seedArg = body->getNumArguments();
    body->addArgument(RankedTensorType::get({}, b.getI64Type()),
                      NameLoc::get(b.getStringAttr("rng_seed")));
    argNameRole.push_back({"rng_seed", "rng_seed"});
  }
  return body->getArgument(seedArg);
}

void Importer::updateState(const Val &target, mlir::Value newValue) {
  if (!target.path.empty() && current.count(target.path))
    current[target.path] = newValue;
}

//===----------------------------------------------------------------------===//
// The op table
//===----------------------------------------------------------------------===//

namespace {

template <typename OpTy>
void convertUnary(Importer &im, tj::Node *n) {
  mlir::Value x = im.tensorIn(n, 0);
  im.setOut(n, im.emit1<OpTy>(n, {x}, {}, {x.getType()}));
}

void convertHardtanh(Importer &im, tj::Node *n) {
  mlir::Value x = im.tensorIn(n, 0);
  double lo = n->inputs().size() > 1 ? im.getDouble(n, 1) : -1.0;
  double hi = n->inputs().size() > 2 ? im.getDouble(n, 2) : 1.0;
  im.setOut(n, im.emit1<HardtanhOp>(n, {x}, {im.f64("min_val", lo), im.f64("max_val", hi)},
                                    {x.getType()}));
}

void convertRelu6(Importer &im, tj::Node *n) {
  mlir::Value x = im.tensorIn(n, 0);
  im.setOut(n, im.emit1<HardtanhOp>(n, {x}, {im.f64("min_val", 0), im.f64("max_val", 6)},
                                    {x.getType()}));
}

// hardsigmoid(x) = hardtanh(x + 3, 0, 6) / 6 (exactly ATen's formula).
void convertHardsigmoid(Importer &im, tj::Node *n) {
  mlir::Value x = im.tensorIn(n, 0);
  mlir::Value s = im.emit1<AddScalarOp>(n, {x}, {im.f64("value", 3.0)}, {x.getType()});
  s = im.emit1<HardtanhOp>(n, {s}, {im.f64("min_val", 0), im.f64("max_val", 6)}, {x.getType()});
  mlir::Value six = im.fill(n, 6.0, RankedTensorType::get({}, im.tt(x).getElementType()));
  im.setOut(n, im.emit1<DivOp>(n, {s, six}));
}

void convertGelu(Importer &im, tj::Node *n) {
  mlir::Value x = im.tensorIn(n, 0);
  std::string a = n->inputs().size() > 1 ? im.getString(n, 1) : "none";
  if (a != "none" && a != "tanh")
    im.fail(n, "unknown GELU approximation '" + a + "'");
  auto approx = GeluApproximationAttr::get(
      &im.ctx, a == "tanh" ? GeluApproximation::tanh : GeluApproximation::none);
  im.setOut(n, im.emit1<GeluOp>(n, {x}, {im.attr("approximate", approx)}, {x.getType()}));
}

/// add/sub/mul/div with tensors or numbers (aten::add(self, other, alpha)).
enum class BinKind { Add, Sub, Mul, Div };
template <BinKind K>
void convertBinary(Importer &im, tj::Node *n) {
  Val &lhsV = im.in(n, 0), &rhsV = im.in(n, 1);
  double alpha = 1.0;
  if ((K == BinKind::Add || K == BinKind::Sub) && n->inputs().size() > 2)
    alpha = im.getDouble(n, 2);
  if (K == BinKind::Div && n->inputs().size() > 2 && !im.in(n, 2).isNone())
    im.fail(n, "division with a rounding mode on tensors is not supported");
  // Tensor op number: the scalar ops.
  if (lhsV.kind == Val::Tensor && im.isScalar(rhsV) && K != BinKind::Div) {
    mlir::Value x = lhsV.value;
    double c = im.scalarValue(rhsV);
    if (K == BinKind::Mul)
      im.setOut(n, im.emit1<MulScalarOp>(n, {x}, {im.f64("value", c)}, {x.getType()}));
    else
      im.setOut(n, im.emit1<AddScalarOp>(
                       n, {x}, {im.f64("value", (K == BinKind::Add ? 1 : -1) * alpha * c)},
                       {x.getType()}));
    return;
  }
  if (rhsV.kind == Val::Tensor && im.isScalar(lhsV) &&
      (K == BinKind::Mul || (K == BinKind::Add && alpha == 1.0))) {
    mlir::Value x = rhsV.value;
    double c = im.scalarValue(lhsV);
    if (K == BinKind::Mul)
      im.setOut(n, im.emit1<MulScalarOp>(n, {x}, {im.f64("value", c)}, {x.getType()}));
    else
      im.setOut(n, im.emit1<AddScalarOp>(n, {x}, {im.f64("value", c)}, {x.getType()}));
    return;
  }
  Type hint;
  if (lhsV.kind == Val::Tensor)
    hint = im.tt(lhsV.value).getElementType();
  else if (rhsV.kind == Val::Tensor)
    hint = im.tt(rhsV.value).getElementType();
  mlir::Value a = im.tensorIn(n, 0, hint), c = im.tensorIn(n, 1, hint);
  if (alpha != 1.0)
    c = im.emit1<MulScalarOp>(n, {c}, {im.f64("value", alpha)}, {c.getType()});
  switch (K) {
  case BinKind::Add:
    im.setOut(n, im.emit1<AddOp>(n, {a, c}));
    break;
  case BinKind::Sub:
    im.setOut(n, im.emit1<SubOp>(n, {a, c}));
    break;
  case BinKind::Mul:
    im.setOut(n, im.emit1<MulOp>(n, {a, c}));
    break;
  case BinKind::Div:
    im.setOut(n, im.emit1<DivOp>(n, {a, c}));
    break;
  }
}

void convertRsub(Importer &im, tj::Node *n) {
  // rsub(self, other, alpha) = other - alpha * self.
  mlir::Value x = im.tensorIn(n, 0);
  double alpha = n->inputs().size() > 2 ? im.getDouble(n, 2) : 1.0;
  if (!im.isScalar(im.in(n, 1)))
    im.fail(n, "rsub with a tensor 'other' is not supported");
  mlir::Value y = im.emit1<MulScalarOp>(n, {x}, {im.f64("value", -alpha)}, {x.getType()});
  im.setOut(n, im.emit1<AddScalarOp>(n, {y}, {im.f64("value", im.scalarValue(im.in(n, 1)))},
                                     {x.getType()}));
}

void convertLinear(Importer &im, tj::Node *n) {
  mlir::Value x = im.tensorIn(n, 0), w = im.tensorIn(n, 1);
  SmallVector<mlir::Value> ops = {x, w};
  if (mlir::Value bias = im.optTensorIn(n, 2))
    ops.push_back(bias);
  im.setOut(n, im.emit1<LinearOp>(n, ops));
}

/// matmul/bmm/mm; a transpose of the last two dims feeding an operand folds
/// into the op's transpose flag.
void convertMatmul(Importer &im, tj::Node *n) {
  mlir::Value a = im.tensorIn(n, 0), c = im.tensorIn(n, 1);
  if (im.tt(a).getRank() < 2 || im.tt(c).getRank() < 2)
    im.fail(n, "matmul of a 1-D tensor is not supported");
  auto peel = [&](mlir::Value &v) {
    auto t = v.getDefiningOp<TransposeOp>();
    if (!t)
      return false;
    ArrayRef<int64_t> p = t.getPerm();
    int64_t r = p.size();
    for (int64_t i = 0; i + 2 < r; ++i)
      if (p[i] != i)
        return false;
    if (p[r - 2] != r - 1 || p[r - 1] != r - 2)
      return false;
    v = t.getInput();
    return true;
  };
  bool ta = peel(a), tb = peel(c);
  SmallVector<NamedAttribute> attrs;
  if (ta)
    attrs.push_back(im.attr("transpose_a", im.b.getBoolAttr(true)));
  if (tb)
    attrs.push_back(im.attr("transpose_b", im.b.getBoolAttr(true)));
  im.setOut(n, im.emit1<MatmulOp>(n, {a, c}, attrs));
}

void convertBaddbmm(Importer &im, tj::Node *n) {
  // baddbmm(input, b1, b2, beta, alpha) = beta * input + alpha * (b1 @ b2).
  mlir::Value x = im.tensorIn(n, 0), a = im.tensorIn(n, 1), c = im.tensorIn(n, 2);
  double beta = n->inputs().size() > 3 ? im.getDouble(n, 3) : 1.0;
  double alpha = n->inputs().size() > 4 ? im.getDouble(n, 4) : 1.0;
  mlir::Value p = im.emit1<MatmulOp>(n, {a, c});
  if (alpha != 1.0)
    p = im.emit1<MulScalarOp>(n, {p}, {im.f64("value", alpha)}, {p.getType()});
  if (beta != 1.0)
    x = im.emit1<MulScalarOp>(n, {x}, {im.f64("value", beta)}, {x.getType()});
  im.setOut(n, im.emit1<AddOp>(n, {p, x}));
}

void convertConvCommon(Importer &im, tj::Node *n, std::vector<int64_t> stride,
                       std::vector<int64_t> padding, std::vector<int64_t> dilation,
                       int64_t groups) {
  mlir::Value x = im.tensorIn(n, 0), w = im.tensorIn(n, 1);
  if (im.tt(x).getRank() != 4)
    im.fail(n, "only 2-D convolution is supported; the input has rank " +
                   std::to_string(im.tt(x).getRank()) + " (expected 4: N, C, H, W)");
  auto two = [&](std::vector<int64_t> v, const char *what) {
    if (v.size() == 1)
      v.push_back(v[0]);
    if (v.size() != 2)
      im.fail(n, std::string(what) + " must have 2 values");
    return v;
  };
  SmallVector<mlir::Value> ops = {x, w};
  if (mlir::Value bias = im.optTensorIn(n, 2))
    ops.push_back(bias);
  im.setOut(n, im.emit1<Conv2dOp>(n, ops,
                                  {im.i64s("stride", two(stride, "stride")),
                                   im.i64s("padding", two(padding, "padding")),
                                   im.i64s("dilation", two(dilation, "dilation")),
                                   im.i64("groups", groups)}));
}

void convertConvolution(Importer &im, tj::Node *n) {
  // _convolution(input, weight, bias, stride, padding, dilation, transposed,
  //              output_padding, groups, ...)
  if (im.getBool(n, 6))
    im.fail(n, "transposed convolution is not supported");
  convertConvCommon(im, n, im.getInts(n, 3), im.getInts(n, 4), im.getInts(n, 5),
                    im.getInt(n, 8));
}

void convertConv2d(Importer &im, tj::Node *n) {
  // conv2d(input, weight, bias, stride, padding, dilation, groups)
  if (im.in(n, 4).isConst() && im.in(n, 4).iv.isString())
    im.fail(n, "string padding is not supported");
  convertConvCommon(im, n, im.getInts(n, 3), im.getInts(n, 4), im.getInts(n, 5),
                    im.getInt(n, 6));
}

void convertBatchNorm(Importer &im, tj::Node *n) {
  // batch_norm(input, weight, bias, running_mean, running_var, training,
  //            momentum, eps, cudnn_enabled)
  if (!im.getBool(n, 5))
    im.fail(n, "eval-mode batch norm is not supported: save the model in train mode");
  Val rmV = im.in(n, 3), rvV = im.in(n, 4);
  if (rmV.isNone() || rvV.isNone())
    im.fail(n, "batch norm without running statistics is not supported");
  mlir::Value x = im.tensorIn(n, 0);
  auto xt = im.tt(x);
  if (xt.getRank() < 2)
    im.fail(n, "batch norm input must have rank >= 2");
  auto ct = RankedTensorType::get({xt.getDimSize(1)}, xt.getElementType());
  mlir::Value w = im.in(n, 1).isNone() ? im.fill(n, 1.0, ct) : im.tensorIn(n, 1);
  mlir::Value bias = im.in(n, 2).isNone() ? im.fill(n, 0.0, ct) : im.tensorIn(n, 2);
  mlir::Value rm = im.tensorIn(n, 3), rv = im.tensorIn(n, 4);
  double momentum = im.in(n, 6).isNone() ? 0.0 : im.getDouble(n, 6);
  if (im.in(n, 6).isNone())
    im.fail(n, "batch norm with momentum=None (cumulative average) is not supported");
  Operation *op = im.emit<BatchNormOp>(n, {x, w, bias, rm, rv},
                                       {im.f64("momentum", momentum),
                                        im.f64("eps", im.getDouble(n, 7))});
  im.setOut(n, op->getResult(0));
  im.updateState(rmV, op->getResult(3));
  im.updateState(rvV, op->getResult(4));
}

void convertLayerNorm(Importer &im, tj::Node *n) {
  // layer_norm(input, normalized_shape, weight, bias, eps, cudnn_enable)
  mlir::Value x = im.tensorIn(n, 0);
  std::vector<int64_t> shape = im.getInts(n, 1);
  auto xt = im.tt(x);
  auto wt = RankedTensorType::get(shape, xt.getElementType());
  mlir::Value w = im.in(n, 2).isNone() ? im.fill(n, 1.0, wt) : im.tensorIn(n, 2);
  mlir::Value bias = im.in(n, 3).isNone() ? im.fill(n, 0.0, wt) : im.tensorIn(n, 3);
  Operation *op = im.emit<LayerNormOp>(
      n, {x, w, bias},
      {im.i64("normalized_ndim", static_cast<int64_t>(shape.size())),
       im.f64("eps", im.getDouble(n, 4))});
  im.setOut(n, op->getResult(0));
}

template <typename OpTy>
void convertSoftmax(Importer &im, tj::Node *n) {
  mlir::Value x = im.tensorIn(n, 0);
  int64_t dim = im.getInt(n, 1);
  int64_t r = im.tt(x).getRank();
  if (dim < 0)
    dim += r;
  if (n->inputs().size() > 2 && !im.in(n, 2).isNone())
    im.fail(n, "softmax with a dtype argument is not supported");
  im.setOut(n, im.emit1<OpTy>(n, {x}, {im.i64("dim", dim)}, {x.getType()}));
}

void convertMaxPool(Importer &im, tj::Node *n) {
  // max_pool2d(input, kernel_size, stride, padding, dilation, ceil_mode)
  mlir::Value x = im.tensorIn(n, 0);
  auto two = [](std::vector<int64_t> v) {
    if (v.size() == 1)
      v.push_back(v[0]);
    return v;
  };
  std::vector<int64_t> k = two(im.getInts(n, 1)), s = two(im.getInts(n, 2));
  if (s.empty())
    s = k;
  Operation *op = im.emit<MaxPool2dOp>(
      n, {x},
      {im.i64s("kernel_size", k), im.i64s("stride", s),
       im.i64s("padding", two(im.getInts(n, 3))),
       im.i64s("dilation", two(im.getInts(n, 4))),
       im.attr("ceil_mode", im.b.getBoolAttr(im.getBool(n, 5)))});
  im.setOut(n, op->getResult(0));
}

void convertAvgPool(Importer &im, tj::Node *n) {
  // avg_pool2d(input, kernel_size, stride, padding, ceil_mode,
  //            count_include_pad, divisor_override)
  mlir::Value x = im.tensorIn(n, 0);
  auto two = [](std::vector<int64_t> v) {
    if (v.size() == 1)
      v.push_back(v[0]);
    return v;
  };
  std::vector<int64_t> k = two(im.getInts(n, 1)), s = two(im.getInts(n, 2));
  if (s.empty())
    s = k;
  if (n->inputs().size() > 6 && !im.in(n, 6).isNone())
    im.fail(n, "avg_pool2d with divisor_override is not supported");
  im.setOut(n, im.emit1<AvgPool2dOp>(
                   n, {x},
                   {im.i64s("kernel_size", k), im.i64s("stride", s),
                    im.i64s("padding", two(im.getInts(n, 3))),
                    im.attr("ceil_mode", im.b.getBoolAttr(im.getBool(n, 4))),
                    im.attr("count_include_pad", im.b.getBoolAttr(im.getBool(n, 5)))}));
}

void convertAdaptiveAvgPool(Importer &im, tj::Node *n) {
  mlir::Value x = im.tensorIn(n, 0);
  std::vector<int64_t> os = im.getInts(n, 1);
  if (os.size() == 1)
    os.push_back(os[0]);
  im.setOut(n, im.emit1<AdaptiveAvgPool2dOp>(n, {x}, {im.i64s("output_size", os)}));
}

int64_t normDim(Importer &im, tj::Node *n, int64_t d, int64_t rank) {
  int64_t r = std::max<int64_t>(rank, 1);
  if (d < -r || d >= r)
    im.fail(n, "dimension " + std::to_string(d) + " out of range for rank " +
                   std::to_string(rank));
  return d < 0 ? d + r : d;
}

/// view/reshape with one -1 inferred.
void convertView(Importer &im, tj::Node *n) {
  mlir::Value x = im.tensorIn(n, 0);
  auto t = im.tt(x);
  std::vector<int64_t> shape = im.getInts(n, 1);
  int64_t known = 1, infer = -1;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == -1) {
      if (infer >= 0)
        im.fail(n, "only one dimension can be -1");
      infer = i;
    } else if (shape[i] < 0) {
      im.fail(n, "negative dimension " + std::to_string(shape[i]));
    } else {
      known *= shape[i];
    }
  }
  if (infer >= 0) {
    if (known == 0 || t.getNumElements() % known != 0)
      im.fail(n, "cannot reshape a tensor of " + std::to_string(t.getNumElements()) +
                     " elements");
    shape[infer] = t.getNumElements() / known;
  }
  int64_t total = 1;
  for (int64_t d : shape)
    total *= d;
  if (total != t.getNumElements())
    im.fail(n, "cannot reshape a tensor of " + std::to_string(t.getNumElements()) +
                   " elements into " + std::to_string(total));
  im.setOut(n, im.reshape(n, x, shape));
}

void convertFlatten(Importer &im, tj::Node *n) {
  mlir::Value x = im.tensorIn(n, 0);
  auto t = im.tt(x);
  int64_t r = t.getRank();
  if (r == 0) {
    im.setOut(n, im.reshape(n, x, {1}));
    return;
  }
  int64_t s = normDim(im, n, im.getInt(n, 1), r), e = normDim(im, n, im.getInt(n, 2), r);
  std::vector<int64_t> shape;
  for (int64_t i = 0; i < s; ++i)
    shape.push_back(t.getDimSize(i));
  int64_t p = 1;
  for (int64_t i = s; i <= e; ++i)
    p *= t.getDimSize(i);
  shape.push_back(p);
  for (int64_t i = e + 1; i < r; ++i)
    shape.push_back(t.getDimSize(i));
  im.setOut(n, im.reshape(n, x, shape));
}

void convertUnsqueeze(Importer &im, tj::Node *n) {
  mlir::Value x = im.tensorIn(n, 0);
  auto t = im.tt(x);
  int64_t d = im.getInt(n, 1);
  if (d < 0)
    d += t.getRank() + 1;
  std::vector<int64_t> shape(t.getShape().begin(), t.getShape().end());
  if (d < 0 || d > static_cast<int64_t>(shape.size()))
    im.fail(n, "dimension out of range");
  shape.insert(shape.begin() + d, 1);
  im.setOut(n, im.reshape(n, x, shape));
}

void convertSqueeze(Importer &im, tj::Node *n) {
  mlir::Value x = im.tensorIn(n, 0);
  auto t = im.tt(x);
  std::vector<int64_t> shape;
  if (n->inputs().size() == 1) {
    for (int64_t d : t.getShape())
      if (d != 1)
        shape.push_back(d);
  } else {
    int64_t d = normDim(im, n, im.getInt(n, 1), t.getRank());
    for (int64_t i = 0; i < t.getRank(); ++i)
      if (i != d || t.getDimSize(i) != 1)
        shape.push_back(t.getDimSize(i));
  }
  im.setOut(n, im.reshape(n, x, shape));
}

void emitPermute(Importer &im, tj::Node *n, mlir::Value x, std::vector<int64_t> perm) {
  bool identity = true;
  for (size_t i = 0; i < perm.size(); ++i)
    identity &= perm[i] == static_cast<int64_t>(i);
  if (identity) {
    im.setOut(n, x);
    return;
  }
  im.setOut(n, im.emit1<TransposeOp>(n, {x}, {im.i64s("perm", perm)}));
}

void convertTranspose(Importer &im, tj::Node *n) {
  mlir::Value x = im.tensorIn(n, 0);
  int64_t r = im.tt(x).getRank();
  if (r < 2) {
    im.setOut(n, x);
    return;
  }
  int64_t a = normDim(im, n, im.getInt(n, 1), r), c = normDim(im, n, im.getInt(n, 2), r);
  std::vector<int64_t> perm(r);
  for (int64_t i = 0; i < r; ++i)
    perm[i] = i;
  std::swap(perm[a], perm[c]);
  emitPermute(im, n, x, perm);
}

void convertT(Importer &im, tj::Node *n) {
  mlir::Value x = im.tensorIn(n, 0);
  if (im.tt(x).getRank() < 2) {
    im.setOut(n, x);
    return;
  }
  emitPermute(im, n, x, {1, 0});
}

void convertPermute(Importer &im, tj::Node *n) {
  mlir::Value x = im.tensorIn(n, 0);
  std::vector<int64_t> perm = im.getInts(n, 1);
  for (int64_t &p : perm)
    p = normDim(im, n, p, im.tt(x).getRank());
  emitPermute(im, n, x, perm);
}

void convertIdentity(Importer &im, tj::Node *n) {
  im.setOut(n, 0, im.in(n, 0));
}

void convertExpand(Importer &im, tj::Node *n) {
  mlir::Value x = im.tensorIn(n, 0);
  auto t = im.tt(x);
  std::vector<int64_t> sizes = im.getInts(n, 1);
  int64_t off = sizes.size() - t.getRank();
  if (off < 0)
    im.fail(n, "expand to fewer dimensions");
  for (size_t i = 0; i < sizes.size(); ++i)
    if (sizes[i] == -1 && static_cast<int64_t>(i) >= off)
      sizes[i] = t.getDimSize(i - off);
  for (int64_t d : sizes)
    if (d < 0)
      im.fail(n, "negative size in expand");
  if (ArrayRef<int64_t>(sizes) == t.getShape()) {
    im.setOut(n, x);
    return;
  }
  im.setOut(n, im.emit1<BroadcastToOp>(
                   n, {x}, {}, {RankedTensorType::get(sizes, t.getElementType())}));
}

void convertCat(Importer &im, tj::Node *n) {
  Val &l = im.in(n, 0);
  std::vector<mlir::Value> ins;
  if (l.kind != Val::List)
    im.fail(n, "the tensor list must be built in the model");
  Type hint;
  for (Val &e : l.elems)
    if (e.kind == Val::Tensor)
      hint = im.tt(e.value).getElementType();
  for (Val &e : l.elems) {
    if (e.kind == Val::Tensor)
      ins.push_back(e.value);
    else if (e.isConst() && e.iv.isTensor())
      ins.push_back(im.materialize(n, e.iv.toTensor(), hint));
    else
      im.fail(n, "list element is not a tensor");
  }
  if (ins.empty())
    im.fail(n, "cat of an empty list");
  int64_t dim = normDim(im, n, im.getInt(n, 1), im.tt(ins[0]).getRank());
  if (ins.size() == 1) {
    im.setOut(n, ins[0]);
    return;
  }
  im.setOut(n, im.emit1<CatOp>(n, ins, {im.i64("dim", dim)}));
}

mlir::Value emitSlice(Importer &im, tj::Node *n, mlir::Value x, int64_t dim,
                      int64_t start, int64_t end, int64_t step) {
  auto t = im.tt(x);
  int64_t size = t.getDimSize(dim);
  if (start < 0)
    start += size;
  if (end < 0)
    end += size;
  start = std::clamp<int64_t>(start, 0, size);
  end = std::clamp<int64_t>(end, start, size);
  if (step <= 0)
    im.fail(n, "slice step must be positive");
  if (start == 0 && end == size && step == 1)
    return x;
  return im.emit1<SliceOp>(n, {x},
                           {im.i64("dim", dim), im.i64("start", start), im.i64("end", end),
                            im.i64("step", step)});
}

void convertSlice(Importer &im, tj::Node *n) {
  // slice(self, dim, start, end, step); start/end may be None.
  mlir::Value x = im.tensorIn(n, 0);
  int64_t dim = normDim(im, n, im.getInt(n, 1), im.tt(x).getRank());
  int64_t start = im.in(n, 2).isNone() ? 0 : im.getInt(n, 2);
  int64_t end = im.in(n, 3).isNone() ? INT64_MAX : im.getInt(n, 3);
  int64_t step = im.getInt(n, 4);
  im.setOut(n, emitSlice(im, n, x, dim, start, end, step));
}

void convertSelect(Importer &im, tj::Node *n) {
  mlir::Value x = im.tensorIn(n, 0);
  auto t = im.tt(x);
  int64_t dim = normDim(im, n, im.getInt(n, 1), t.getRank());
  int64_t idx = im.getInt(n, 2);
  if (idx < 0)
    idx += t.getDimSize(dim);
  mlir::Value s = emitSlice(im, n, x, dim, idx, idx + 1, 1);
  std::vector<int64_t> shape(t.getShape().begin(), t.getShape().end());
  shape.erase(shape.begin() + dim);
  im.setOut(n, im.reshape(n, s, shape));
}

void convertChunk(Importer &im, tj::Node *n) {
  mlir::Value x = im.tensorIn(n, 0);
  int64_t chunks = im.getInt(n, 1);
  if (chunks <= 0)
    im.fail(n, "chunk count must be positive");
  int64_t dim = normDim(im, n, im.getInt(n, 2), im.tt(x).getRank());
  int64_t size = im.tt(x).getDimSize(dim);
  int64_t each = (size + chunks - 1) / chunks;
  Val list;
  list.kind = Val::List;
  for (int64_t s = 0; s < size; s += each)
    list.elems.push_back(Val::tensor(emitSlice(im, n, x, dim, s, s + each, 1)));
  im.setOut(n, 0, list);
}

/// split(x, split_size, dim) and split_with_sizes(x, sizes, dim).
void convertSplit(Importer &im, tj::Node *n) {
  mlir::Value x = im.tensorIn(n, 0);
  int64_t dim = normDim(im, n, im.getInt(n, 2), im.tt(x).getRank());
  int64_t size = im.tt(x).getDimSize(dim);
  std::vector<int64_t> sizes;
  if (n->kind().toQualString() == std::string("aten::split_with_sizes")) {
    sizes = im.getInts(n, 1);
  } else {
    int64_t each = im.getInt(n, 1);
    if (each <= 0)
      im.fail(n, "split size must be positive");
    for (int64_t s = 0; s < size; s += each)
      sizes.push_back(std::min(each, size - s));
  }
  Val list;
  list.kind = Val::List;
  int64_t s = 0;
  for (int64_t len : sizes) {
    list.elems.push_back(Val::tensor(emitSlice(im, n, x, dim, s, s + len, 1)));
    s += len;
  }
  if (s != size)
    im.fail(n, "split sizes do not add up to the dimension's size");
  im.setOut(n, 0, list);
}

template <bool Mean>
void convertReduce(Importer &im, tj::Node *n) {
  // mean(self, dim, keepdim, dtype) / mean(self, dtype); same for sum.
  mlir::Value x = im.tensorIn(n, 0);
  std::vector<int64_t> dims;
  bool keep = false;
  size_t nIn = n->inputs().size();
  if (nIn >= 3) {
    if (!im.in(n, 1).isNone())
      dims = im.getInts(n, 1);
    keep = im.getBool(n, 2);
    if (nIn > 3 && !im.in(n, 3).isNone())
      im.fail(n, "reduction with a dtype argument is not supported");
  } else if (nIn == 2 && !im.in(n, 1).isNone()) {
    im.fail(n, "reduction with a dtype argument is not supported");
  }
  for (int64_t &d : dims)
    d = normDim(im, n, d, im.tt(x).getRank());
  SmallVector<NamedAttribute> attrs = {im.i64s("dims", dims)};
  if (keep)
    attrs.push_back(im.attr("keepdim", im.b.getBoolAttr(true)));
  if (Mean)
    im.setOut(n, im.emit1<ReduceMeanOp>(n, {x}, attrs));
  else
    im.setOut(n, im.emit1<ReduceSumOp>(n, {x}, attrs));
}

void convertDropout(Importer &im, tj::Node *n) {
  // dropout(input, p, train)
  mlir::Value x = im.tensorIn(n, 0);
  double p = im.getDouble(n, 1);
  bool train = im.getBool(n, 2);
  if (!train || p == 0.0) {
    im.setOut(n, x);
    return;
  }
  if (p < 0.0 || p >= 1.0)
    im.fail(n, "dropout probability must be in [0, 1)");
  mlir::Value s = im.seed(n);
  int64_t off = im.nextDropoutOffset(im.tt(x).getNumElements());
  im.setOut(n, im.emit1<DropoutOp>(n, {x, s}, {im.f64("p", p), im.i64("offset", off)},
                                   {x.getType()}));
}

void convertEmbedding(Importer &im, tj::Node *n) {
  // embedding(weight, indices, padding_idx, scale_grad_by_freq, sparse)
  mlir::Value w = im.tensorIn(n, 0), idx = im.tensorIn(n, 1);
  if (n->inputs().size() > 2 && im.getInt(n, 2) != -1)
    im.fail(n, "embedding with padding_idx is not supported");
  if (n->inputs().size() > 3 && im.getBool(n, 3))
    im.fail(n, "embedding with scale_grad_by_freq is not supported");
  im.setOut(n, im.emit1<EmbeddingOp>(n, {w, idx}));
}

Attribute reductionAttr(Importer &im, tj::Node *n, int64_t r) {
  if (r == 0)
    im.fail(n, "loss with reduction='none' is not supported");
  return ReductionAttr::get(&im.ctx, r == 2 ? Reduction::sum : Reduction::mean);
}

void convertCrossEntropy(Importer &im, tj::Node *n) {
  // cross_entropy_loss(self, target, weight, reduction, ignore_index,
  //                    label_smoothing)
  if (!im.in(n, 2).isNone())
    im.fail(n, "cross-entropy with class weights is not supported");
  mlir::Value z = im.tensorIn(n, 0), t = im.tensorIn(n, 1);
  im.setOut(n, im.emit1<CrossEntropyOp>(
                   n, {z, t},
                   {im.attr("reduction", reductionAttr(im, n, im.getInt(n, 3))),
                    im.i64("ignore_index", im.getInt(n, 4)),
                    im.f64("label_smoothing", im.getDouble(n, 5))}));
}

void convertNllLoss(Importer &im, tj::Node *n) {
  // nll_loss(self, target, weight, reduction, ignore_index)
  if (!im.in(n, 2).isNone())
    im.fail(n, "nll_loss with class weights is not supported");
  mlir::Value z = im.tensorIn(n, 0), t = im.tensorIn(n, 1);
  im.setOut(n, im.emit1<NllLossOp>(
                   n, {z, t},
                   {im.attr("reduction", reductionAttr(im, n, im.getInt(n, 3))),
                    im.i64("ignore_index", im.getInt(n, 4))}));
}

void convertMseLoss(Importer &im, tj::Node *n) {
  mlir::Value z = im.tensorIn(n, 0), t = im.tensorIn(n, 1);
  im.setOut(n, im.emit1<MseLossOp>(
                   n, {z, t}, {im.attr("reduction", reductionAttr(im, n, im.getInt(n, 2)))}));
}

void convertMaskedFill(Importer &im, tj::Node *n) {
  mlir::Value x = im.tensorIn(n, 0), m = im.tensorIn(n, 1);
  im.setOut(n, im.emit1<MaskedFillOp>(n, {x, m}, {im.f64("value", im.getDouble(n, 2))},
                                      {x.getType()}));
}

void convertWhere(Importer &im, tj::Node *n) {
  Type hint;
  for (size_t i = 1; i < 3; ++i)
    if (im.in(n, i).kind == Val::Tensor)
      hint = im.tt(im.in(n, i).value).getElementType();
  mlir::Value c = im.tensorIn(n, 0), a = im.tensorIn(n, 1, hint), d = im.tensorIn(n, 2, hint);
  im.setOut(n, im.emit1<WhereOp>(n, {c, a, d}));
}

void convertTo(Importer &im, tj::Node *n) {
  // to(self, dtype, non_blocking, copy, memory_format) and device variants:
  // only a dtype change is an op.
  mlir::Value x = im.tensorIn(n, 0);
  for (size_t i = 1; i < n->inputs().size(); ++i) {
    tj::Value *v = n->input(i);
    if (v->type()->kind() == c10::TypeKind::IntType ||
        (v->type()->kind() == c10::TypeKind::OptionalType &&
         v->type()->expectRef<c10::OptionalType>().getElementType()->kind() ==
             c10::TypeKind::IntType)) {
      Val &dv = im.in(n, i);
      if (dv.isNone())
        break;
      auto st = static_cast<at::ScalarType>(im.getInt(n, i));
      Type et;
      switch (st) {
      case at::kFloat: et = im.b.getF32Type(); break;
      case at::kDouble: et = im.b.getF64Type(); break;
      case at::kLong: et = im.b.getI64Type(); break;
      case at::kInt: et = im.b.getI32Type(); break;
      case at::kBool: et = im.b.getI1Type(); break;
      default: im.fail(n, "unsupported target dtype");
      }
      if (et == im.tt(x).getElementType())
        break;
      im.setOut(n, im.emit1<CopyOp>(n, {x}, {}, {im.tt(x).clone(et)}));
      return;
    }
  }
  im.setOut(n, x);
}

const llvm::StringMap<ConvertFn> &opTable() {
  static const llvm::StringMap<ConvertFn> table = [] {
    llvm::StringMap<ConvertFn> t;
    // Unary elementwise ops, one entry each.
    t["aten::relu"] = convertUnary<ReluOp>;
    t["aten::sigmoid"] = convertUnary<SigmoidOp>;
    t["aten::tanh"] = convertUnary<TanhOp>;
    t["aten::exp"] = convertUnary<ExpOp>;
    t["aten::neg"] = convertUnary<NegOp>;
    t["aten::sqrt"] = convertUnary<SqrtOp>;
    t["aten::rsqrt"] = convertUnary<RsqrtOp>;
    t["aten::hardswish"] = convertUnary<HardswishOp>;
    t["aten::silu"] = convertUnary<SiluOp>;
    t["aten::gelu"] = convertGelu;
    t["aten::hardtanh"] = convertHardtanh;
    t["aten::relu6"] = convertRelu6;
    t["aten::hardsigmoid"] = convertHardsigmoid;
    // Binary and scalar arithmetic.
    t["aten::add"] = convertBinary<BinKind::Add>;
    t["aten::sub"] = convertBinary<BinKind::Sub>;
    t["aten::mul"] = convertBinary<BinKind::Mul>;
    t["aten::div"] = convertBinary<BinKind::Div>;
    t["aten::rsub"] = convertRsub;
    t["aten::masked_fill"] = convertMaskedFill;
    t["aten::where"] = convertWhere;
    // Linear algebra.
    t["aten::linear"] = convertLinear;
    t["aten::matmul"] = convertMatmul;
    t["aten::bmm"] = convertMatmul;
    t["aten::mm"] = convertMatmul;
    t["aten::baddbmm"] = convertBaddbmm;
    // Convolution, pooling, normalization.
    t["aten::_convolution"] = convertConvolution;
    t["aten::conv2d"] = convertConv2d;
    t["aten::batch_norm"] = convertBatchNorm;
    t["aten::layer_norm"] = convertLayerNorm;
    t["aten::max_pool2d"] = convertMaxPool;
    t["aten::avg_pool2d"] = convertAvgPool;
    t["aten::adaptive_avg_pool2d"] = convertAdaptiveAvgPool;
    t["aten::softmax"] = convertSoftmax<SoftmaxOp>;
    t["aten::log_softmax"] = convertSoftmax<LogSoftmaxOp>;
    // Shapes and data movement.
    t["aten::view"] = convertView;
    t["aten::reshape"] = convertView;
    t["aten::flatten"] = convertFlatten;
    t["aten::unsqueeze"] = convertUnsqueeze;
    t["aten::squeeze"] = convertSqueeze;
    t["aten::transpose"] = convertTranspose;
    t["aten::t"] = convertT;
    t["aten::permute"] = convertPermute;
    t["aten::contiguous"] = convertIdentity;
    t["aten::clone"] = convertIdentity;
    t["aten::expand"] = convertExpand;
    t["aten::cat"] = convertCat;
    t["aten::slice"] = convertSlice;
    t["aten::select"] = convertSelect;
    t["aten::chunk"] = convertChunk;
    t["aten::split"] = convertSplit;
    t["aten::split_with_sizes"] = convertSplit;
    t["aten::to"] = convertTo;
    t["aten::mean"] = convertReduce<true>;
    t["aten::sum"] = convertReduce<false>;
    // Dropout, embedding, losses.
    t["aten::dropout"] = convertDropout;
    t["aten::embedding"] = convertEmbedding;
    t["aten::cross_entropy_loss"] = convertCrossEntropy;
    t["aten::nll_loss"] = convertNllLoss;
    t["aten::nll_loss_nd"] = convertNllLoss;
    t["aten::mse_loss"] = convertMseLoss;
    return t;
  }();
  return table;
}

/// Ops that must never be evaluated at import time (random numbers).
bool isRandom(const std::string &kind) {
  static const std::set<std::string> r = {
      "aten::dropout", "aten::feature_dropout", "aten::alpha_dropout",
      "aten::rand", "aten::randn", "aten::randint", "aten::rand_like",
      "aten::randn_like", "aten::bernoulli", "aten::bernoulli_",
      "aten::normal", "aten::normal_", "aten::uniform_", "aten::randperm",
      "aten::multinomial"};
  return r.count(kind) != 0;
}

} // namespace

//===----------------------------------------------------------------------===//
// Graph walk
//===----------------------------------------------------------------------===//

void Importer::recordUnsupported(tj::Node *n) {
  std::string file;
  size_t line = 0, col = 0;
  auto &entry = unsupported[n->kind().toQualString()];
  entry.first++;
  std::string at = sourceOf(n, file, line, col) ? file + ":" + std::to_string(line)
                                                 : std::string("<unknown location>");
  if (std::find(entry.second.begin(), entry.second.end(), at) == entry.second.end())
    entry.second.push_back(at);
  for (tj::Value *o : n->outputs())
    vals[o] = Val();
}

void Importer::convertGetAttr(tj::Node *n) {
  Val &obj = in(n, 0);
  if (obj.kind != Val::Module)
    fail(n, "attribute of a non-module value");
  std::string name = n->s(c10::Symbol::attr("name"));
  std::string q = obj.path.empty() ? name : obj.path + "." + name;
  if (current.count(q)) {
    setOut(n, 0, Val::tensor(current[q], q));
    return;
  }
  c10::IValue v = obj.iv.toObject()->getAttr(name);
  if (v.isObject() && v.toObject()->type()->is_module()) {
    Val r;
    r.kind = Val::Module;
    r.iv = v;
    r.path = q;
    setOut(n, 0, r);
    return;
  }
  // A plain attribute (a flag, a number, a tensor that is neither parameter
  // nor buffer): a constant.
  setOut(n, 0, Val::constant(v));
}

/// Evaluates `n` with LibTorch when every input is a constant. Returns false
/// when it cannot.
bool Importer::tryFold(tj::Node *n) {
  std::string kind = n->kind().toQualString();
  if (isRandom(kind) || n->blocks().size() != 0 || n->kind() == c10::prim::If)
    return false;
  tj::Stack stack;
  for (tj::Value *v : n->inputs()) {
    Val &x = vals[v];
    if (!x.isConst())
      return false;
    stack.push_back(x.iv);
  }
  const tj::Operator *opr = n->maybeOperator();
  if (!opr && !(n->kind().is_prim() || n->kind().is_aten()))
    return false;
  // Vararg ops (aten::format) take their input count on top of the stack.
  if (const c10::FunctionSchema *schema = n->maybeSchema())
    if (schema->is_vararg())
      stack.push_back(c10::IValue(static_cast<int64_t>(n->inputs().size())));
  try {
    tj::Operation op = n->getOperation();
    op(stack);
  } catch (const std::exception &e) {
    std::string m = torchMessage(e);
    if (m.empty())
      m = firstLine(e.what());
    fail(n, "cannot evaluate at import time: " + m);
  }
  if (stack.size() != n->outputs().size())
    return false;
  for (size_t i = 0; i < n->outputs().size(); ++i)
    setOut(n, i, Val::constant(stack[i]));
  return true;
}

void Importer::convertBlock(tj::Block *block) {
  for (tj::Node *n : block->nodes())
    convertNode(n);
}

void Importer::convertNode(tj::Node *n) {
  auto kind = n->kind();
  std::string name = kind.toQualString();
  // A node downstream of an unsupported op: keep looking for other
  // unsupported kinds, convert nothing.
  bool poisoned = false;
  for (tj::Value *v : n->inputs())
    if (vals[v].kind == Val::Unknown)
      poisoned = true;
  if (kind == c10::prim::Constant) {
    auto iv = tj::toIValue(n->output());
    setOut(n, 0, iv ? Val::constant(*iv) : Val::constant(c10::IValue()));
    return;
  }
  if (poisoned) {
    bool known = opTable().count(name) || kind.is_prim() ||
                 (name.size() > 1 && name.back() == '_' &&
                  opTable().count(name.substr(0, name.size() - 1)));
    if (!known && !n->maybeOperator())
      recordUnsupported(n);
    else if (!known && kind.is_aten()) {
      // An aten op we only fold (on constants): report it when it computes
      // on tensors.
      bool onTensors = false;
      for (tj::Value *v : n->inputs())
        onTensors |= v->type()->kind() == c10::TypeKind::TensorType;
      for (tj::Value *v : n->outputs())
        onTensors |= v->type()->kind() == c10::TypeKind::TensorType;
      static const std::set<std::string> metaOnly = {
          "aten::size", "aten::dim", "aten::Int", "aten::Float", "aten::Bool",
          "aten::ScalarImplicit", "aten::len", "aten::__getitem__"};
      if (onTensors && !metaOnly.count(name))
        recordUnsupported(n);
    }
    for (tj::Value *o : n->outputs())
      vals[o] = Val();
    return;
  }
  if (kind == c10::prim::GetAttr) {
    convertGetAttr(n);
    return;
  }
  if (kind == c10::prim::If) {
    Val &c = in(n, 0);
    if (!c.isConst() || !c.iv.isBool())
      fail(n, "data-dependent control flow is not supported");
    tj::Block *blk = n->blocks()[c.iv.toBool() ? 0 : 1];
    convertBlock(blk);
    for (size_t i = 0; i < n->outputs().size(); ++i)
      vals[n->output(i)] = vals[blk->outputs()[i]];
    return;
  }
  if (kind == c10::prim::Loop) {
    // Loops with a trip count and condition known at import time unroll:
    // the body is converted once per iteration.
    tj::Block *blk = n->blocks()[0];
    int64_t maxTrip = getInt(n, 0);
    std::vector<Val> carried;
    for (size_t i = 2; i < n->inputs().size(); ++i)
      carried.push_back(in(n, i));
    bool cond = getBool(n, 1);
    for (int64_t it = 0; cond && it < maxTrip; ++it) {
      if (it > 100000)
        fail(n, "loop too long to unroll");
      vals[blk->inputs()[0]] = Val::constant(c10::IValue(it));
      for (size_t i = 0; i < carried.size(); ++i)
        vals[blk->inputs()[i + 1]] = carried[i];
      convertBlock(blk);
      Val &c = vals[blk->outputs()[0]];
      if (!c.isConst() || !c.iv.isBool())
        fail(n, "data-dependent loop condition is not supported");
      cond = c.iv.toBool();
      for (size_t i = 0; i < carried.size(); ++i)
        carried[i] = vals[blk->outputs()[i + 1]];
    }
    for (size_t i = 0; i < n->outputs().size(); ++i)
      setOut(n, i, carried[i]);
    return;
  }
  if (kind == c10::prim::RaiseException)
    fail(n, "the model raises an exception for these inputs");
  // Metadata of tensors known at import time.
  if (name == "aten::size" || name == "aten::dim" || name == "prim::dtype" ||
      name == "prim::device" || name == "aten::len") {
    Val &x = in(n, 0);
    if (x.kind == Val::Tensor) {
      auto t = tt(x.value);
      if (name == "aten::dim") {
        setOut(n, 0, Val::constant(c10::IValue(t.getRank())));
      } else if (name == "prim::device") {
        setOut(n, 0, Val::constant(c10::IValue(c10::Device(c10::kCPU))));
      } else if (name == "prim::dtype") {
        Type et = t.getElementType();
        at::ScalarType st = et.isF32()   ? at::kFloat
                            : et.isF64() ? at::kDouble
                            : et.isInteger(64) ? at::kLong
                            : et.isInteger(32) ? at::kInt
                                               : at::kBool;
        setOut(n, 0, Val::constant(c10::IValue(static_cast<int64_t>(st))));
      } else if (n->inputs().size() == 1) {
        std::vector<int64_t> s(t.getShape().begin(), t.getShape().end());
        setOut(n, 0, Val::constant(c10::IValue(s)));
      } else {
        int64_t d = normDim(*this, n, getInt(n, 1), t.getRank());
        setOut(n, 0, Val::constant(c10::IValue(t.getDimSize(d))));
      }
      return;
    }
    if (x.kind == Val::List && name == "aten::len") {
      setOut(n, 0, Val::constant(c10::IValue(static_cast<int64_t>(x.elems.size()))));
      return;
    }
  }
  // Tensor properties that are fixed for step values (CPU-like, dense).
  static const std::set<std::string> falseProps = {
      "prim::is_cuda", "prim::is_nested", "prim::is_sparse", "prim::is_sparse_csr",
      "prim::is_quantized", "prim::is_mkldnn", "prim::is_meta", "prim::is_xpu",
      "prim::is_vulkan", "prim::is_ipu", "prim::is_mps", "prim::is_ort"};
  if (n->inputs().size() == 1 && in(n, 0).kind == Val::Tensor) {
    if (falseProps.count(name)) {
      setOut(n, 0, Val::constant(c10::IValue(false)));
      return;
    }
    if (name == "aten::is_floating_point") {
      setOut(n, 0, Val::constant(c10::IValue(
                       isa<FloatType>(tt(in(n, 0).value).getElementType()))));
      return;
    }
  }
  if (name == "aten::__is__" || name == "aten::__isnot__") {
    Val &a = in(n, 0), &c = in(n, 1);
    if (!(a.isConst() && c.isConst()) && (a.isNone() || c.isNone())) {
      bool same = a.isNone() && c.isNone();
      setOut(n, 0, Val::constant(c10::IValue(name == "aten::__is__" ? same : !same)));
      return;
    }
    if (a.kind == Val::Tensor && c.kind == Val::Tensor) {
      // Identity of step values (`query is key`).
      bool same = a.value == c.value;
      setOut(n, 0, Val::constant(c10::IValue(name == "aten::__is__" ? same : !same)));
      return;
    }
  }
  if (name == "prim::unchecked_cast" || name == "aten::warn") {
    if (n->outputs().size() == 1)
      setOut(n, 0, in(n, 0));
    return;
  }
  // Lists and tuples of constants stay constants.
  bool allConst = std::all_of(n->inputs().begin(), n->inputs().end(),
                              [&](tj::Value *v) { return vals[v].isConst(); });
  if (allConst && kind == c10::prim::ListConstruct) {
    auto lt = n->output()->type()->cast<c10::ListType>();
    c10::impl::GenericList l(lt ? lt->getElementType() : c10::AnyType::get());
    for (tj::Value *v : n->inputs())
      l.push_back(vals[v].iv);
    setOut(n, 0, Val::constant(c10::IValue(l)));
    return;
  }
  if (allConst && kind == c10::prim::TupleConstruct) {
    std::vector<c10::IValue> elems;
    for (tj::Value *v : n->inputs())
      elems.push_back(vals[v].iv);
    setOut(n, 0, Val::constant(c10::ivalue::Tuple::create(std::move(elems))));
    return;
  }
  if (allConst && (kind == c10::prim::ListUnpack || kind == c10::prim::TupleUnpack)) {
    c10::IValue v = in(n, 0).iv;
    std::vector<c10::IValue> elems;
    if (v.isTuple())
      elems = v.toTupleRef().elements().vec();
    else if (v.isList())
      elems = v.toListRef().vec();
    if (elems.size() != n->outputs().size())
      fail(n, "cannot unpack this value");
    for (size_t i = 0; i < elems.size(); ++i)
      setOut(n, i, Val::constant(elems[i]));
    return;
  }
  if (tryFold(n))
    return;
  // Lists and tuples holding step values.
  if (kind == c10::prim::ListConstruct || kind == c10::prim::TupleConstruct) {
    Val l;
    l.kind = Val::List;
    for (tj::Value *v : n->inputs())
      l.elems.push_back(vals[v]);
    setOut(n, 0, l);
    return;
  }
  if (kind == c10::prim::ListUnpack || kind == c10::prim::TupleUnpack) {
    Val l = in(n, 0);
    if (l.kind != Val::List || l.elems.size() != n->outputs().size())
      fail(n, "cannot unpack this value");
    for (size_t i = 0; i < n->outputs().size(); ++i)
      setOut(n, i, l.elems[i]);
    return;
  }
  if (kind == c10::prim::TupleIndex || name == "aten::__getitem__") {
    Val l = in(n, 0);
    if (l.kind == Val::List) {
      int64_t i = getInt(n, 1);
      if (i < 0)
        i += l.elems.size();
      if (i < 0 || i >= static_cast<int64_t>(l.elems.size()))
        fail(n, "index out of range");
      setOut(n, 0, l.elems[i]);
      return;
    }
  }
  // The op table; an in-place op `aten::X_` is `aten::X` whose result
  // replaces its first operand (and the buffer it holds, if any).
  auto &table = opTable();
  auto it = table.find(name);
  bool inplace = false;
  if (it == table.end() && name.size() > 1 && name.back() == '_') {
    it = table.find(name.substr(0, name.size() - 1));
    inplace = it != table.end();
  }
  if (it == table.end()) {
    recordUnsupported(n);
    return;
  }
  Val target = in(n, 0);
  if (inplace && target.kind == Val::Tensor && !target.path.empty() &&
      argNameRole[argIndex[target.path]].second == "parameter")
    fail(n, "in-place update of parameter '" + target.path + "' is not supported");
  if (inplace && target.kind == Val::Tensor && !target.path.empty() &&
      tt(target.value).getElementType().isInteger(64) && name == "aten::add_") {
    // A counter such as num_batches_tracked: `add_(1)` on an i64 buffer.
    double c = getDouble(n, 1);
    double alpha = n->inputs().size() > 2 ? getDouble(n, 2) : 1.0;
    mlir::Value r = emit1<AddScalarOp>(n, {target.value}, {f64("value", c * alpha)},
                                       {target.value.getType()});
    setOut(n, r);
  } else {
    it->second(*this, n);
  }
  if (inplace) {
    Val &res = vals[n->output(0)];
    if (res.kind != Val::Tensor)
      fail(n, "in-place op on a value that is not a tensor of the step");
    if (target.kind == Val::Tensor && target.value.getDefiningOp<ReshapeOp>() &&
        target.path.empty())
      fail(n, "in-place op on a view is not supported");
    res.path = target.path;
    updateState(target, res.value);
    vals[n->input(0)] = res;
  }
}

//===----------------------------------------------------------------------===//
// Driver
//===----------------------------------------------------------------------===//

OwningOpRef<ModuleOp> Importer::run(ImportError &err) {
  ScopedDiagnosticHandler handler(&ctx, [&](Diagnostic &d) {
    diagnostics.push_back(d.str());
    return success();
  });
  tj::Module &m = model.module;
  std::shared_ptr<tj::Graph> graph = m.get_method("forward").graph()->copy();
  tj::Inline(*graph);

  Location fileLoc = FileLineColLoc::get(&ctx, model.path, 0, 0);
  OwningOpRef<ModuleOp> module = ModuleOp::create(fileLoc);
  b.setInsertionPointToEnd(module->getBody());
  func = func::FuncOp::create(b, fileLoc, "forward", b.getFunctionType({}, {}));
  body = func.addEntryBlock();
  b.setInsertionPointToEnd(body);

  // Parameters, then buffers, as arguments with their qualified names.
  auto addArg = [&](const std::string &name, const at::Tensor &t,
                    const std::string &role) {
    Type et = elementType(t.scalar_type(), "'" + name + "'");
    auto type = RankedTensorType::get(t.sizes().vec(), et);
    argIndex[name] = body->getNumArguments();
    current[name] = body->addArgument(type, NameLoc::get(b.getStringAttr(name)));
    argNameRole.push_back({name, role});
  };
  for (const auto &p : m.named_parameters(true))
    addArg(p.name, p.value, p.value.requires_grad() ? "parameter" : "state");
  for (const auto &buf : m.named_buffers(true)) {
    addArg(buf.name, buf.value, "state");
    bufferNames.push_back(buf.name);
  }

  // Inputs: the forward's arguments after `self`, then an optional target.
  auto gin = graph->inputs();
  size_t nFwd = gin.size() - 1;
  size_t nGiven = opts.inputs.size();
  if (nGiven != nFwd && nGiven != nFwd + 1) {
    std::string names;
    for (size_t i = 1; i < gin.size(); ++i)
      names += (i > 1 ? ", " : "") + gin[i]->debugNameBase();
    throw ConvError{"the model's forward takes " + std::to_string(nFwd) +
                    " input(s) (" + names + ") [+ 1 loss target]; got " +
                    std::to_string(nGiven) + " --input"};
  }
  std::set<std::string> seen;
  std::vector<mlir::Value> inputVals;
  for (const InputSpec &s : opts.inputs) {
    if (!seen.insert(s.name).second || argIndex.count(s.name))
      throw ConvError{"--input name '" + s.name + "' is used twice or names a parameter"};
    Type et = s.dtype == "f32"   ? b.getF32Type()
              : s.dtype == "f64" ? b.getF64Type()
              : s.dtype == "i64" ? b.getI64Type()
              : s.dtype == "i32" ? (Type)b.getI32Type()
                                 : (Type)b.getI1Type();
    inputVals.push_back(body->addArgument(RankedTensorType::get(s.shape, et),
                                          NameLoc::get(b.getStringAttr(s.name))));
    argNameRole.push_back({s.name, "input"});
  }
  Val self;
  self.kind = Val::Module;
  self.iv = m._ivalue();
  vals[gin[0]] = self;
  for (size_t i = 0; i < nFwd; ++i)
    vals[gin[i + 1]] = Val::tensor(inputVals[i]);

  PhaseOp::create(b, fileLoc, Phase::forward);
  convertBlock(graph->block());

  if (!unsupported.empty()) {
    std::string msg = "unsupported op";
    msg += unsupported.size() > 1 ? "s: " : ": ";
    bool first = true;
    for (auto &[kind, info] : unsupported) {
      msg += (first ? "" : "; ") + kind + " (" + std::to_string(info.first) + "x at ";
      for (size_t i = 0; i < info.second.size(); ++i)
        msg += (i ? ", " : "") + info.second[i];
      msg += ")";
      first = false;
    }
    throw ConvError{msg};
  }

  // The loss.
  tj::Node *ret = graph->return_node();
  Val out = vals[ret->input(0)];
  while (out.kind == Val::List && !out.elems.empty())
    out = out.elems[0];
  if (out.kind != Val::Tensor)
    throw ConvError{"the forward's first output is not a tensor computed from the inputs"};
  auto ot = tt(out.value);
  mlir::Value loss;
  bool hasTarget = nGiven == nFwd + 1;
  bool stage = opts.lossGiven && opts.loss == LossKind::None;
  if (stage && hasTarget)
    throw ConvError{"--loss none builds a pipeline stage, which takes no loss target: "
                    "drop the last --input"};
  if (stage) {
    if (!ot.getElementType().isF32())
      throw ConvError{"a pipeline stage's output must be f32"};
    loss = out.value;
  } else if (ot.getRank() == 0 && ot.getElementType().isF32() && !hasTarget) {
    loss = out.value;
  } else {
    if (!hasTarget)
      throw ConvError{"the forward returns a tensor of shape " +
                      [&] {
                        std::string s;
                        llvm::raw_string_ostream os(s);
                        os << ot;
                        return os.str();
                      }() +
                      ", not a scalar loss: pass the loss target as one more --input "
                      "and choose --loss cross_entropy|nll|mse"};
    mlir::Value target = inputVals.back();
    tj::Node *rn = ret;
    std::string what;
    {
      llvm::raw_string_ostream os(what);
      os << "the loss ("
         << (opts.loss == LossKind::Mse ? "mse"
             : opts.loss == LossKind::Nll ? "nll" : "cross_entropy")
         << ") on the forward's output " << ot << " and target '"
         << opts.inputs.back().name << "' " << target.getType();
    }
    try {
    mlir::Value z = out.value;
    auto tt0 = tt(target);
    if (opts.loss == LossKind::Mse) {
      loss = emit1<MseLossOp>(rn, {z, target});
    } else {
      // Class-index losses over [N, C]: flatten leading dims as PyTorch
      // users do (logits.reshape(-1, C), target.reshape(-1)).
      if (ot.getRank() > 2) {
        z = reshape(rn, z, {ot.getNumElements() / ot.getShape().back(), ot.getShape().back()});
        if (tt0.getRank() > 1)
          target = reshape(rn, target, {tt0.getNumElements()});
      }
      if (!tt0.getElementType().isInteger(64))
        throw ConvError{"prim::Return: the target must be i64 class indices"};
      if (opts.loss == LossKind::CrossEntropy)
        loss = emit1<CrossEntropyOp>(rn, {z, target});
      else
        loss = emit1<NllLossOp>(rn, {z, target});
    }
    } catch (const ConvError &e) {
      std::string m = e.message;
      size_t p = m.find("prim::Return: ");
      if (p == 0)
        m = m.substr(14);
      throw ConvError{what + ": " + m};
    }
  }
  if (!tt(loss).getElementType().isF32())
    throw ConvError{"the loss must be f32"};

  // Results: loss, then every buffer the step updated.
  SmallVector<mlir::Value> results = {loss};
  SmallVector<std::pair<std::string, std::string>> resNameRole = {
      stage ? std::pair<std::string, std::string>{"output", "output"}
            : std::pair<std::string, std::string>{"loss", "loss"}};
  for (const std::string &name : bufferNames) {
    mlir::Value now = current[name];
    if (now != body->getArgument(argIndex[name])) {
      results.push_back(now);
      resNameRole.push_back({name, "new_state"});
    }
  }
  func::ReturnOp::create(b, fileLoc, results);

  // Drop ops whose results nothing reads (unused chunks, transposes folded
  // into matmul), newest first.
  for (Operation &op : llvm::make_early_inc_range(llvm::reverse(*body)))
    if (isOpTriviallyDead(&op))
      op.erase();

  // Parameters and buffers the graph never reads are left out (see
  // ImportOptions::keepUnused).
  if (!opts.keepUnused)
    for (unsigned i = body->getNumArguments(); i-- > 0;) {
      const std::string &role = argNameRole[i].second;
      if ((role == "parameter" || role == "state") && body->getArgument(i).use_empty()) {
        if (opts.unusedOut)
          opts.unusedOut->insert(opts.unusedOut->begin(), argNameRole[i].first);
        body->eraseArgument(i);
        argNameRole.erase(argNameRole.begin() + i);
      }
    }

  SmallVector<Type> argTypes(body->getArgumentTypes());
  SmallVector<Type> resTypes;
  for (mlir::Value v : results)
    resTypes.push_back(v.getType());
  func.setFunctionType(b.getFunctionType(argTypes, resTypes));
  auto setAttrs = [&](auto setter, unsigned i, const std::pair<std::string, std::string> &nr) {
    setter(i, OffloadDialect::kNameAttrName, b.getStringAttr(nr.first));
    setter(i, OffloadDialect::kRoleAttrName, getRoleAttr(b.getContext(), nr.second));
  };
  for (unsigned i = 0; i < argNameRole.size(); ++i)
    setAttrs([&](unsigned j, StringRef k, Attribute a) { func.setArgAttr(j, k, a); }, i,
             argNameRole[i]);
  for (unsigned i = 0; i < resNameRole.size(); ++i)
    setAttrs([&](unsigned j, StringRef k, Attribute a) { func.setResultAttr(j, k, a); }, i,
             resNameRole[i]);
  func->setAttr(OffloadDialect::kStepAttrName, b.getUnitAttr());

  diagnostics.clear();
  if (failed(mlir::verify(*module))) {
    err = {2, "internal error: the imported module does not verify: " +
                  (diagnostics.empty() ? std::string("?") : diagnostics.front())};
    return nullptr;
  }
  return module;
}

auto ::offload::import::importModel(LoadedModel &model, MLIRContext &ctx,
                                   const ImportOptions &options, ImportError &err)
    -> OwningOpRef<ModuleOp> {
  Importer im(model, ctx, options);
  try {
    return im.run(err);
  } catch (const ConvError &e) {
    err = {1, e.message};
  } catch (const std::exception &e) {
    err = {2, "internal error: " + torchMessage(e)};
  } catch (...) {
    err = {2, "internal error: unknown exception"};
  }
  return nullptr;
}
