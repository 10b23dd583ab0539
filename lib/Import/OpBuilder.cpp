//===- OpBuilder.cpp - The step under construction, shared by importers ---===//
//
// Part of offload. StepBuilder (OpBuilder.h): the step's arguments, typed
// reads of an op's arguments, op creation helpers, constants, the dropout
// seed, unsupported-op records, and the end of every import (the loss, the
// new_state results, the matmul-transpose fold, dead-op and unused-argument
// removal, names, roles, verification). Free of LibTorch.
//
//===----------------------------------------------------------------------===//
#include "OpBuilder.h"
#include "offload/Dialect/Offload/Transforms/FuseAttention.h"

#include "mlir/IR/PatternMatch.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Rewrite/FrozenRewritePatternSet.h"
#include "mlir/Transforms/WalkPatternRewriteDriver.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>

using namespace mlir;
using namespace mlir::offload;
using namespace ::offload::import;
using namespace ::offload::import::ts;

const OpTable &ts::opTable() {
  static const OpTable table = [] {
    OpTable t;
    registerElementwiseConversions(t);
    registerNNConversions(t);
    registerShapeConversions(t);
    registerDecomposedConversions(t);
    registerRecurrentConversions(t);
    registerCompositeConversions(t);
    return t;
  }();
  return table;
}

DenseElementsAttr ts::lowFloatElements(RankedTensorType type, ArrayRef<double> values) {
  const llvm::fltSemantics &sem = cast<FloatType>(type.getElementType()).getFloatSemantics();
  SmallVector<APFloat> v;
  for (double x : values) {
    APFloat a(x);
    bool lost = false;
    a.convert(sem, APFloat::rmNearestTiesToEven, &lost);
    v.push_back(a);
  }
  return DenseElementsAttr::get(type, v);
}

Type ts::elementTypeNamed(MLIRContext &ctx, const std::string &dtype) {
  Builder b(&ctx);
  if (dtype == "float32")
    return b.getF32Type();
  if (dtype == "float64")
    return b.getF64Type();
  if (dtype == "bfloat16")
    return b.getBF16Type();
  if (dtype == "float16")
    return b.getF16Type();
  if (dtype == "int64")
    return b.getI64Type();
  if (dtype == "int32")
    return b.getI32Type();
  if (dtype == "bool")
    return b.getI1Type();
  return {};
}

//===----------------------------------------------------------------------===//
// Type promotion, advanced indexing, constant values
//===----------------------------------------------------------------------===//

namespace {
int kindOf(Type t) { // 0 bool, 1 integer, 2 float
  if (t.isInteger(1))
    return 0;
  return isa<IntegerType>(t) ? 1 : 2;
}
int widthOf(Type t) { // order within PyTorch's promotion lattice
  if (t.isInteger(1)) return 0;
  if (t.isInteger(32)) return 1;
  if (t.isInteger(64)) return 2;
  if (t.isBF16() || t.isF16()) return 3;
  if (t.isF32()) return 4;
  return 5;
}
} // namespace

Type ts::resultType(MLIRContext &ctx, ArrayRef<Promoted> ops) {
  Builder b(&ctx);
  int kind = 0;
  for (const Promoted &o : ops)
    kind = std::max(kind, kindOf(o.type));
  for (int p = 2; p >= 0; --p) {
    Type t;
    for (const Promoted &o : ops)
      if (o.priority == p && kindOf(o.type) == kind && (!t || widthOf(o.type) > widthOf(t)))
        t = o.type;
    if (!t)
      continue;
    if (p == 0) // numbers: the default dtypes
      return kind == 2 ? Type(b.getF32Type()) : kind == 1 ? Type(b.getI64Type()) : t;
    // bf16 with f16 (neither holds the other) promote to f32.
    for (const Promoted &o : ops)
      if (o.priority == p && widthOf(o.type) == widthOf(t) && o.type != t && kind == 2)
        return b.getF32Type();
    return t;
  }
  return b.getF32Type();
}

static std::vector<int64_t> rowMajorStrides(ArrayRef<int64_t> s) {
  std::vector<int64_t> st(s.size(), 1);
  for (size_t d = s.size(); d-- > 1;)
    st[d - 1] = st[d] * s[d];
  return st;
}

static std::string shapeText(ArrayRef<int64_t> s) {
  std::string r = "[";
  for (size_t i = 0; i < s.size(); ++i)
    r += (i ? ", " : "") + std::to_string(s[i]);
  return r + "]";
}

AdvancedIndex::AdvancedIndex(ArrayRef<int64_t> inShape, std::vector<const Index *> indices)
    : in(inShape.begin(), inShape.end()), idx(std::move(indices)) {
  int64_t rank = int64_t(in.size());
  inSt = rowMajorStrides(in);
  if (int64_t(idx.size()) > rank) {
    err = "too many indices for a tensor of rank " + std::to_string(rank);
    return;
  }
  for (size_t k = 0; k < idx.size(); ++k) {
    if (!idx[k])
      continue;
    at.push_back(int64_t(k));
    // Broadcast the index shapes together (numpy rules).
    const std::vector<int64_t> &s = idx[k]->shape;
    std::vector<int64_t> o(std::max(bshape.size(), s.size()), 1);
    for (size_t q = 0; q < o.size(); ++q) {
      int64_t x = q < o.size() - bshape.size() ? 1 : bshape[q - (o.size() - bshape.size())];
      int64_t y = q < o.size() - s.size() ? 1 : s[q - (o.size() - s.size())];
      if (x != y && x != 1 && y != 1) {
        err = "index shapes " + shapeText(bshape) + " and " + shapeText(s) + " do not broadcast";
        return;
      }
      o[q] = x == 1 ? y : x;
    }
    bshape = o;
  }
  if (at.empty()) {
    out = in;
    return;
  }
  bool adjacent = at.back() - at.front() + 1 == int64_t(at.size());
  int64_t first = adjacent ? at.front() : 0;
  for (int64_t k = 0; k < rank; ++k)
    if (size_t(k) >= idx.size() || !idx[size_t(k)])
      rest.push_back(k);
  for (int64_t k : rest)
    if (k < first)
      ++restBefore;
  for (size_t k = 0; k < restBefore; ++k)
    out.push_back(in[size_t(rest[k])]);
  out.insert(out.end(), bshape.begin(), bshape.end());
  for (size_t k = restBefore; k < rest.size(); ++k)
    out.push_back(in[size_t(rest[k])]);
  // Strides of each index tensor read as broadcast to bshape.
  for (const Index *c : idx) {
    std::vector<int64_t> r(bshape.size(), 0);
    if (c) {
      std::vector<int64_t> st = rowMajorStrides(c->shape);
      size_t off = bshape.size() - c->shape.size();
      for (size_t q = 0; q < c->shape.size(); ++q)
        r[off + q] = c->shape[q] == 1 ? 0 : st[q];
    }
    ist.push_back(std::move(r));
  }
}

int64_t AdvancedIndex::offset(ArrayRef<int64_t> o, std::string &error) const {
  if (at.empty()) {
    int64_t off = 0;
    for (size_t k = 0; k < o.size(); ++k)
      off += o[k] * inSt[k];
    return off;
  }
  size_t nb = bshape.size();
  int64_t off = 0;
  for (size_t k = 0; k < restBefore; ++k)
    off += o[k] * inSt[size_t(rest[k])];
  for (size_t k = restBefore; k < rest.size(); ++k)
    off += o[k + nb] * inSt[size_t(rest[k])];
  for (int64_t k : at) {
    int64_t flat = 0;
    for (size_t q = 0; q < nb; ++q)
      flat += o[restBefore + q] * ist[size_t(k)][q];
    int64_t v = idx[size_t(k)]->values[size_t(flat)], n = in[size_t(k)];
    if (v < 0)
      v += n;
    if (v < 0 || v >= n) {
      error = "index " + std::to_string(idx[size_t(k)]->values[size_t(flat)]) +
              " out of range for size " + std::to_string(n);
      return 0;
    }
    off += v * inSt[size_t(k)];
  }
  return off;
}

bool ts::constantValues(mlir::Value v, std::vector<double> &out) {
  auto t = dyn_cast<RankedTensorType>(v.getType());
  if (!t || !t.hasStaticShape())
    return false;
  out.clear();
  if (auto f = v.getDefiningOp<FillOp>()) {
    out.assign(size_t(t.getNumElements()), f.getValue().convertToDouble());
    return true;
  }
  auto c = v.getDefiningOp<ConstantOp>();
  auto dense = c ? dyn_cast<DenseElementsAttr>(c.getValue()) : DenseElementsAttr();
  if (!dense)
    return false;
  Type et = t.getElementType();
  if (isa<FloatType>(et))
    for (APFloat x : dense.getValues<APFloat>())
      out.push_back(x.convertToDouble());
  else if (et.isInteger(1))
    for (bool x : dense.getValues<bool>())
      out.push_back(x ? 1 : 0);
  else
    for (APInt x : dense.getValues<APInt>())
      out.push_back(double(x.getSExtValue()));
  return true;
}

//===----------------------------------------------------------------------===//
// Arguments
//===----------------------------------------------------------------------===//

Arg &StepBuilder::in(Call &n, size_t i) {
  if (i >= n.args.size())
    fail(n, "missing argument " + std::to_string(i));
  return n.args[i];
}

int64_t StepBuilder::getInt(Call &n, size_t i) {
  Arg &v = in(n, i);
  if (v.kind == Arg::Int)
    return v.i;
  if (v.kind == Arg::Bool)
    return v.b;
  if (v.kind == Arg::Const && v.intScalar)
    return v.i;
  fail(n, "argument " + std::to_string(i) + " must be an integer known at import time");
}

double StepBuilder::getDouble(Call &n, size_t i) {
  Arg &v = in(n, i);
  if (isScalar(v))
    return scalarValue(v);
  fail(n, "argument " + std::to_string(i) + " must be a number known at import time");
}

bool StepBuilder::getBool(Call &n, size_t i) {
  Arg &v = in(n, i);
  if (v.kind == Arg::Bool)
    return v.b;
  if (v.kind == Arg::Int)
    return v.i != 0;
  fail(n, "argument " + std::to_string(i) + " must be a boolean known at import time");
}

std::vector<int64_t> StepBuilder::getInts(Call &n, size_t i) {
  Arg &v = in(n, i);
  if (v.kind == Arg::Ints)
    return v.ints;
  if (v.kind == Arg::Int)
    return {v.i};
  fail(n, "argument " + std::to_string(i) + " must be a list of integers known at import time");
}

std::string StepBuilder::getString(Call &n, size_t i) {
  Arg &v = in(n, i);
  if (v.kind == Arg::String)
    return v.s;
  fail(n, "argument " + std::to_string(i) + " must be a string");
}

bool StepBuilder::isScalar(const Arg &v) {
  return v.kind == Arg::Double || v.kind == Arg::Int || v.kind == Arg::Bool ||
         (v.kind == Arg::Const && v.isScalar);
}

double StepBuilder::scalarValue(const Arg &v) {
  switch (v.kind) {
  case Arg::Double:
    return v.d;
  case Arg::Int:
    return static_cast<double>(v.i);
  case Arg::Bool:
    return v.b ? 1.0 : 0.0;
  default:
    return v.d;
  }
}

mlir::Value StepBuilder::materialize(Call &n, const Arg &c, Type elemHint) {
  if (c.kind != Arg::Const || !c.materialize)
    fail(n, "a constant tensor cannot be built here");
  return c.materialize(n, elemHint);
}

mlir::Value StepBuilder::tensorIn(Call &n, size_t i, Type elemHint) {
  Arg &v = in(n, i);
  if (v.kind == Arg::Tensor)
    return v.value;
  if (v.kind == Arg::Const)
    return materialize(n, v, elemHint);
  if (v.kind == Arg::Double || v.kind == Arg::Int || v.kind == Arg::Bool) {
    // A number used as a tensor: a 0-dim tensor of the consumer's element
    // type (PyTorch's wrapped-number promotion), else its own.
    Type et = elemHint            ? elemHint
              : v.kind == Arg::Double ? Type(b.getF64Type())
              : v.kind == Arg::Int    ? Type(b.getI64Type())
                                      : Type(b.getI1Type());
    return fill(n, scalarValue(v), RankedTensorType::get({}, et));
  }
  fail(n, "argument " + std::to_string(i) + " must be a tensor");
}

Promoted StepBuilder::promoted(Call &n, size_t i) {
  Arg &v = in(n, i);
  switch (v.kind) {
  case Arg::Tensor:
    return {tt(v.value).getElementType(), tt(v.value).getRank() > 0 ? 2 : 1};
  case Arg::Const: {
    Type et = v.type ? v.type : tt(materialize(n, v, {})).getElementType();
    return {et, v.isScalar ? 1 : 2};
  }
  case Arg::Double:
    return {b.getF64Type(), 0};
  case Arg::Int:
    return {b.getI64Type(), 0};
  case Arg::Bool:
    return {b.getI1Type(), 0};
  default:
    fail(n, "argument " + std::to_string(i) + " must be a tensor or a number");
  }
}

mlir::Value StepBuilder::tensorAs(Call &n, size_t i, Type et) {
  mlir::Value v = tensorIn(n, i, et);
  if (tt(v).getElementType() == et)
    return v;
  return emit1<CopyOp>(n, {v}, {}, {tt(v).clone(et)});
}

//===----------------------------------------------------------------------===//
// Op creation
//===----------------------------------------------------------------------===//

mlir::Value StepBuilder::fill(Call &n, double value, RankedTensorType type) {
  return emit1<FillOp>(n, {}, {f64("value", value)}, {type});
}

mlir::Value StepBuilder::reshape(Call &n, mlir::Value v, ArrayRef<int64_t> shape) {
  auto t = tt(v);
  if (t.getShape() == shape)
    return v;
  return emit1<ReshapeOp>(n, {v}, {}, {RankedTensorType::get(shape, t.getElementType())});
}

mlir::Value StepBuilder::constant(Call &n, RankedTensorType type, ArrayRef<double> values) {
  if (!values.empty() &&
      std::all_of(values.begin(), values.end(), [&](double x) { return x == values[0]; }))
    return fill(n, values[0], type);
  Type et = type.getElementType();
  Attribute attrV;
  if (et.isInteger(1)) {
    SmallVector<bool> v;
    for (double x : values)
      v.push_back(x != 0);
    attrV = DenseElementsAttr::get(type, ArrayRef<bool>(v));
  } else if (et.isInteger(64)) {
    SmallVector<int64_t> v(values.begin(), values.end());
    attrV = DenseElementsAttr::get(type, ArrayRef<int64_t>(v));
  } else if (et.isInteger(32)) {
    SmallVector<int32_t> v(values.begin(), values.end());
    attrV = DenseElementsAttr::get(type, ArrayRef<int32_t>(v));
  } else if (et.isF64()) {
    attrV = DenseElementsAttr::get(type, values);
  } else if (isa<BFloat16Type, Float16Type>(et)) {
    attrV = lowFloatElements(type, values);
  } else {
    SmallVector<float> v(values.begin(), values.end());
    attrV = DenseElementsAttr::get(type, ArrayRef<float>(v));
  }
  return emit1<ConstantOp>(n, {}, {attr("value", attrV)});
}

mlir::Value StepBuilder::seed(Call &n) {
  if (seedArg < 0) {
    seedArg = body->getNumArguments();
    body->addArgument(RankedTensorType::get({}, b.getI64Type()),
                      NameLoc::get(b.getStringAttr("rng_seed")));
    argNameRole.push_back({"rng_seed", "rng_seed"});
  }
  return body->getArgument(seedArg);
}

void StepBuilder::updateState(const Arg &target, mlir::Value newValue) {
  if (!target.path.empty() && current.count(target.path))
    current[target.path] = newValue;
}

mlir::Value StepBuilder::writeThroughView(Call &n, mlir::Value view, mlir::Value result,
                                          mlir::Value &base) {
  if (auto r = view.getDefiningOp<ReshapeOp>()) {
    base = r.getInput();
    return reshape(n, result, tt(base).getShape());
  }
  auto s = view.getDefiningOp<SliceOp>();
  if (!s)
    return {};
  if (s.getStep() != 1)
    fail(n, "in-place op on a strided slice (step " + std::to_string(s.getStep()) +
                ") is not supported");
  base = s.getInput();
  int64_t dim = s.getDim(), size = tt(base).getDimSize(dim);
  int64_t start = s.getStart(), end = s.getEnd();
  SmallVector<mlir::Value> parts;
  if (start > 0)
    parts.push_back(emitSlice(*this, n, base, dim, 0, start, 1));
  parts.push_back(result);
  if (end < size)
    parts.push_back(emitSlice(*this, n, base, dim, end, size, 1));
  return parts.size() == 1 ? parts[0] : emit1<CatOp>(n, parts, {i64("dim", dim)});
}

std::string StepBuilder::roleOf(const std::string &path) const {
  auto it = argIndex.find(path);
  return it == argIndex.end() ? std::string() : argNameRole[it->second].second;
}

void StepBuilder::convertCall(Call &call, const ConvertFn &convert, bool inplace) {
  Arg target = call.args.empty() ? Arg() : call.args[0];
  bool onState = inplace && target.kind == Arg::Tensor && !target.path.empty();
  if (onState && roleOf(target.path) == "parameter")
    fail(call, "in-place update of parameter '" + target.path + "' is not supported");
  if (onState && tt(target.value).getElementType().isInteger(64) && call.kind == "aten::add") {
    // A counter such as num_batches_tracked: `add_(1)` on an i64 buffer.
    double c = getDouble(call, 1);
    double alpha = call.numInputs() > 2 ? getDouble(call, 2) : 1.0;
    setOut(call, emit1<AddScalarOp>(call, {target.value}, {f64("value", c * alpha)},
                                    {target.value.getType()}));
  } else {
    convert(*this, call);
  }
  if (!inplace)
    return;
  if (call.results.empty() || call.results[0].kind != Arg::Tensor)
    fail(call, "in-place op on a value that is not a tensor of the step");
  call.results[0].path = target.path;
  updateState(target, call.results[0].value);
}

//===----------------------------------------------------------------------===//
// The step
//===----------------------------------------------------------------------===//

void StepBuilder::begin(const std::string &path) {
  fileLoc = FileLineColLoc::get(&ctx, path, 0, 0);
  module = ModuleOp::create(fileLoc);
  b.setInsertionPointToEnd(module->getBody());
  func = func::FuncOp::create(b, fileLoc, "forward", b.getFunctionType({}, {}));
  body = func.addEntryBlock();
  b.setInsertionPointToEnd(body);
}

mlir::Value StepBuilder::addStateArg(const std::string &name, Type type, const std::string &role,
                                     bool isBuffer) {
  argIndex[name] = body->getNumArguments();
  mlir::Value v = body->addArgument(type, NameLoc::get(b.getStringAttr(name)));
  current[name] = v;
  argNameRole.push_back({name, role});
  if (isBuffer)
    bufferNames.push_back(name);
  return v;
}

mlir::Value StepBuilder::addInput(const std::string &name, Type type) {
  if (argIndex.count(name))
    throw ConvError{"input name '" + name + "' is used twice or names a parameter"};
  argIndex[name] = body->getNumArguments();
  argNameRole.push_back({name, "input"});
  return body->addArgument(type, NameLoc::get(b.getStringAttr(name)));
}

void StepBuilder::recordUnsupported(const std::string &kind, const std::string &reason,
                                    const std::string &message, const std::string &at) {
  std::string key = kind;
  if (!reason.empty())
    key += ": " + reason;
  Unsupported &entry = unsupported[key];
  entry.count++;
  if (entry.message.empty())
    entry.message = message;
  if (std::find(entry.at.begin(), entry.at.end(), at) == entry.at.end())
    entry.at.push_back(at);
}

void StepBuilder::throwIfUnsupported() {
  // Every problem of the walk in one message: op kinds without a conversion
  // and uses a conversion refused, each with its count and locations. A
  // single refused use keeps its own message (location first).
  if (unsupported.empty())
    return;
  if (unsupported.size() == 1 && unsupported.begin()->second.count == 1 &&
      !unsupported.begin()->second.message.empty())
    throw ConvError{unsupported.begin()->second.message};
  std::string msg = "unsupported op";
  msg += unsupported.size() > 1 ? "s: " : ": ";
  bool first = true;
  for (auto &[kind, info] : unsupported) {
    msg += (first ? "" : "; ") + kind + " (" + std::to_string(info.count) + "x at ";
    for (size_t i = 0; i < info.at.size(); ++i)
      msg += (i ? ", " : "") + info.at[i];
    msg += ")";
    first = false;
  }
  throw ConvError{msg};
}

static std::string typeString(Type t) {
  std::string s;
  llvm::raw_string_ostream os(s);
  os << t;
  return os.str();
}

OwningOpRef<ModuleOp> StepBuilder::finish(mlir::Value out, mlir::Value target,
                                          const std::string &targetName, ImportError &err) {
  auto ot = tt(out);
  mlir::Value loss;
  bool hasTarget = static_cast<bool>(target);
  bool stage = opts.lossGiven && opts.loss == LossKind::None;
  if (stage && hasTarget)
    throw ConvError{"--loss none builds a pipeline stage, which takes no loss target: "
                    "drop the last --input"};
  if (stage) {
    if (!isa<FloatType>(ot.getElementType()))
      throw ConvError{"a pipeline stage's output must be f32 or f64"};
    loss = out;
  } else if (ot.getRank() == 0 && isa<FloatType>(ot.getElementType()) && !hasTarget) {
    loss = out;
  } else {
    if (!hasTarget)
      throw ConvError{"the forward returns a tensor of shape " + typeString(ot) +
                      ", not a scalar loss: pass the loss target as one more --input "
                      "and choose --loss cross_entropy|nll|mse"};
    std::string what;
    {
      llvm::raw_string_ostream os(what);
      os << "the loss ("
         << (opts.loss == LossKind::Mse ? "mse" : opts.loss == LossKind::Nll ? "nll" : "cross_entropy")
         << ") on the forward's output " << ot << " and target '" << targetName << "' "
         << target.getType();
    }
    Call rn("prim::Return", fileLoc, "prim::Return");
    try {
      mlir::Value z = out;
      auto tt0 = tt(target);
      if (opts.loss == LossKind::Mse) {
        loss = emit1<MseLossOp>(rn, {z, target});
      } else {
        if (!tt0.getElementType().isInteger(64))
          throw ConvError{"prim::Return: the target must be i64 class indices"};
        // Class-index losses over logits of rank > 2: the target's shape
        // says where the classes are. Without dim 1 ([N, C, d1, ...] with
        // [N, d1, ...]): dim 1, as F.cross_entropy(output, target) takes
        // them (a segmentation output); without the last dim ([B, T, V]
        // with [B, T]): the last, as a language model's loss flattens them
        // (logits.reshape(-1, V), target.reshape(-1)). A shape that fits
        // both, or neither, is an error: guessing would train on the wrong
        // classes without a word.
        if (ot.getRank() > 2) {
          ArrayRef<int64_t> os = ot.getShape();
          SmallVector<int64_t> noLast(os.drop_back()), noDim1(os);
          noDim1.erase(noDim1.begin() + 1);
          bool lastDim = tt0.getShape() == ArrayRef<int64_t>(noLast);
          bool dim1 = tt0.getShape() == ArrayRef<int64_t>(noDim1);
          if (lastDim && dim1)
            throw ConvError{"prim::Return: the target's shape fits classes at dim 1 (as "
                            "F.cross_entropy takes them) and at the last dim (as a language "
                            "model's loss flattens them): return the loss from the model "
                            "(offload.compile(..., loss=None) / a forward that computes it)"};
          if (!lastDim && !dim1)
            throw ConvError{"prim::Return: the target must be the output's shape without "
                            "the class dim: dim 1 (as F.cross_entropy takes it) or the last"};
          if (dim1) {
            classDimLast(*this, rn, z, target);
          } else {
            z = reshape(rn, z, {ot.getNumElements() / os.back(), os.back()});
            target = reshape(rn, target, {tt0.getNumElements()});
          }
        }
        if (opts.loss == LossKind::CrossEntropy)
          loss = emit1<CrossEntropyOp>(rn, {z, target});
        else
          loss = emit1<NllLossOp>(rn, {z, target});
      }
    } catch (const ConvError &e) {
      std::string m = e.message;
      if (m.find("prim::Return: ") == 0)
        m = m.substr(14);
      throw ConvError{what + ": " + m};
    }
  }
  // A float loss: f32 or f64 (f64 gives the tests an exact oracle), or
  // bf16/f16 (a bf16-true model, whose loss is its logits' type, as in
  // PyTorch).
  if (!isa<FloatType>(tt(loss).getElementType()))
    throw ConvError{"the loss must be f32, f64, bf16 or f16"};

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

  // Attention spelled out (matmul, scale, constant mask, softmax, dropout,
  // matmul: TorchScript 1.13's models) becomes offload.attention where it
  // is exactly that op (FuseAttention.h, --offload-fuse-attention).
  if (opts.fuseAttention)
    fuseAttention(func);

  // HF's repeat_kv feeding attention becomes grouped-query attention.
  foldRepeatedKeyValue(func);

  // Attention between transpose(1, 2)s (q.view(N, L, H, E).transpose(1, 2)
  // ... out.transpose(1, 2)) takes the token layout without the copies.
  if (opts.attentionTokenLayout)
    foldAttentionTokenLayout(func);

  // Transposes of the last two dims feeding a matmul fold into its flags
  // (MatmulOp's canonicalization; no other pattern or folder runs here).
  {
    RewritePatternSet patterns(&ctx);
    MatmulOp::getCanonicalizationPatterns(patterns, &ctx);
    walkAndApplyPatterns(func, FrozenRewritePatternSet(std::move(patterns)));
  }

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
  return std::move(module);
}
