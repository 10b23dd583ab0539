//===- NodeImporter.cpp - The TorchScript node walk -----------------------===//
//
// Part of offload. Walks the inlined graph of `forward` once, in order,
// keeping for every TorchScript value what is known about it at import time
// (Val): an MLIR tensor value of the step, a compile-time constant (numbers,
// lists, shapes, and tensors that do not depend on the inputs or parameters,
// such as a causal mask), a submodule, or a list of those. Nodes whose
// inputs are all constants are evaluated with LibTorch itself, so shape
// arithmetic (aten::size, prim::NumToTensor, aten::Int, list construction)
// and mask construction (arange/ones/triu) fold away; prim::If with a known
// condition and prim::Loop with a known trip count are flattened. Other
// nodes go through the op table (opTable(), built from the Convert*.cpp
// families); in-place `aten::X_` is `aten::X` whose result replaces its first
// operand. Unsupported ops are collected and reported together.
//
//===----------------------------------------------------------------------===//
#include "Importer.h"

using namespace mlir;
using namespace mlir::offload;
using namespace ::offload::import;
using namespace ::offload::import::ts;

#include <torch/csrc/jit/ir/constants.h>

#include <set>

namespace {
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

/// Whether `v` or a view of it (slice, select, view, reshape, ...) is the
/// target of an in-place op later in the graph (Call::resultWrittenInPlace:
/// `clone` then copies).
bool writtenInPlace(tj::Value *v, int depth = 0) {
  static const std::set<std::string> views = {
      "aten::slice", "aten::select", "aten::view", "aten::reshape", "aten::narrow",
      "aten::unsqueeze", "aten::squeeze", "aten::flatten", "aten::transpose", "aten::permute"};
  if (depth > 8)
    return false;
  for (const tj::Use &u : v->uses()) {
    std::string k = u.user->kind().toQualString();
    if (u.offset == 0 && k.size() > 1 && k.back() == '_')
      return true;
    if (u.offset == 0 && views.count(k) && writtenInPlace(u.user->output(0), depth + 1))
      return true;
  }
  return false;
}

} // namespace


//===----------------------------------------------------------------------===//
// Graph walk
//===----------------------------------------------------------------------===//

void Importer::recordUnsupported(tj::Node *n, const std::string &reason,
                                 const std::string &message) {
  std::string file;
  size_t line = 0, col = 0;
  std::string at = sourceOf(n, file, line, col) ? file + ":" + std::to_string(line)
                                                 : std::string("<unknown location>");
  StepBuilder::recordUnsupported(n->kind().toQualString(), reason, message, at);
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
          "aten::ScalarImplicit", "aten::len", "aten::__getitem__", "aten::numel"};
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
      name == "prim::device" || name == "aten::len" || name == "aten::numel") {
    Val &x = in(n, 0);
    if (x.kind == Val::Tensor) {
      auto t = tt(x.value);
      if (name == "aten::dim") {
        setOut(n, 0, Val::constant(c10::IValue(t.getRank())));
      } else if (name == "aten::numel") {
        setOut(n, 0, Val::constant(c10::IValue(t.getNumElements())));
      } else if (name == "prim::device") {
        setOut(n, 0, Val::constant(c10::IValue(c10::Device(c10::kCPU))));
      } else if (name == "prim::dtype") {
        at::ScalarType st = scalarTypeOf(t.getElementType());
        setOut(n, 0, Val::constant(c10::IValue(static_cast<int64_t>(st))));
      } else if (n->inputs().size() == 1) {
        std::vector<int64_t> s(t.getShape().begin(), t.getShape().end());
        setOut(n, 0, Val::constant(c10::IValue(s)));
      } else {
        int64_t d = getInt(n, 1), r = std::max<int64_t>(t.getRank(), 1);
        if (d < -r || d >= r)
          fail(n, "dimension " + std::to_string(d) + " out of range for rank " +
                      std::to_string(t.getRank()));
        setOut(n, 0, Val::constant(c10::IValue(t.getDimSize(d < 0 ? d + r : d))));
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
  // Ops whose result depends only on a step tensor's shape and dtype
  // (x.new_zeros(...), zeros_like(x), ...): evaluated with LibTorch on a
  // zero tensor of that shape and dtype, so what is built from them (Swin's
  // shifted-window mask: new_zeros, slice, fill_, eq) folds to a constant.
  static const std::set<std::string> shapeOnly = {
      "aten::new_zeros", "aten::new_ones", "aten::new_full", "aten::new_empty",
      "aten::zeros_like", "aten::ones_like", "aten::full_like", "aten::empty_like"};
  if (shapeOnly.count(name) && !n->inputs().empty() && in(n, 0).kind == Val::Tensor) {
    Val saved = in(n, 0);
    auto t = tt(saved.value);
    at::ScalarType st = scalarTypeOf(t.getElementType());
    std::vector<int64_t> shape(t.getShape().begin(), t.getShape().end());
    vals[n->input(0)] = Val::constant(at::zeros(shape, at::TensorOptions().dtype(st)));
    bool folded = tryFold(n);
    vals[n->input(0)] = saved;
    if (folded)
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
  // A conversion that refuses this use (an attribute, rank or dtype it
  // cannot take) is recorded like an unsupported op, and the walk goes on.
  try {
    convertTableOp(n, it->second, inplace);
  } catch (const ConvError &e) {
    if (e.origin != n)
      throw;
    recordUnsupported(n, e.reason, e.message);
    if (inplace)
      vals[n->input(0)] = Val();
  }
}

Arg Importer::toArg(const Val &v, const std::string &name) {
  switch (v.kind) {
  case Val::Tensor:
    return Arg::tensor(v.value, v.path);
  case Val::List: {
    std::vector<Arg> elems;
    for (const Val &e : v.elems)
      elems.push_back(toArg(e, ""));
    return Arg::list(std::move(elems));
  }
  case Val::Const:
    break;
  default:
    return Arg();
  }
  const c10::IValue &iv = v.iv;
  if (iv.isNone())
    return Arg::none();
  if (name == "dtype" && iv.isInt()) {
    Arg a;
    a.kind = Arg::Dtype;
    auto st = static_cast<at::ScalarType>(iv.toInt());
    a.s = c10::toString(st);
    switch (st) {
    case at::kFloat: a.type = b.getF32Type(); break;
    case at::kDouble: a.type = b.getF64Type(); break;
    case at::kBFloat16: a.type = b.getBF16Type(); break;
    case at::kHalf: a.type = b.getF16Type(); break;
    case at::kLong: a.type = b.getI64Type(); break;
    case at::kInt: a.type = b.getI32Type(); break;
    case at::kBool: a.type = b.getI1Type(); break;
    default: break;
    }
    return a;
  }
  if (iv.isInt())
    return Arg::integer(iv.toInt());
  if (iv.isDouble())
    return Arg::number(iv.toDouble());
  if (iv.isBool())
    return Arg::boolean(iv.toBool());
  if (iv.isIntList())
    return Arg::intList(iv.toIntVector());
  if (iv.isDoubleList()) {
    Arg a;
    a.kind = Arg::Doubles;
    a.doubles = iv.toDoubleVector();
    return a;
  }
  if (iv.isString()) {
    Arg a;
    a.kind = Arg::String;
    a.s = iv.toStringRef();
    return a;
  }
  if (iv.isTensor()) {
    at::Tensor t = iv.toTensor();
    Arg a;
    a.kind = Arg::Const;
    if (t.numel() == 1) {
      a.isScalar = t.dim() == 0;
      a.d = t.item<double>();
      if (!t.is_floating_point()) {
        a.intScalar = true;
        a.i = t.item<int64_t>();
      }
    }
    a.materialize = [this, t](Call &n, Type hint) { return materializeTensor(n, t, hint); };
    return a;
  }
  if (iv.isList() || iv.isTuple()) {
    std::vector<Arg> elems;
    for (const c10::IValue &e : iv.isList() ? iv.toListRef().vec()
                                            : iv.toTupleRef().elements().vec())
      elems.push_back(toArg(Val::constant(e), ""));
    return Arg::list(std::move(elems));
  }
  return Arg();
}

Val Importer::fromArg(const Arg &a) {
  if (a.kind == Arg::Tensor)
    return Val::tensor(a.value, a.path);
  if (a.kind == Arg::List) {
    Val l;
    l.kind = Val::List;
    for (const Arg &e : a.elems)
      l.elems.push_back(fromArg(e));
    return l;
  }
  return Val();
}

void Importer::convertTableOp(tj::Node *n, const ConvertFn &convert, bool inplace) {
  std::string name = n->kind().toQualString();
  if (inplace)
    name.pop_back();
  Call call(name, loc(n), where(n));
  call.resultWrittenInPlace = n->outputs().size() == 1 && writtenInPlace(n->output(0));
  const c10::FunctionSchema *schema = n->maybeSchema();
  for (size_t i = 0; i < n->inputs().size(); ++i) {
    std::string argName;
    if (schema && i < schema->arguments().size())
      argName = schema->arguments()[i].name();
    call.args.push_back(toArg(vals[n->input(i)], argName));
  }
  Val target = in(n, 0);
  try {
    convertCall(call, convert, inplace);
    // An in-place op on a view wrote through it into its base.
    if (inplace && target.kind == Val::Tensor && target.path.empty() &&
        call.results[0].kind == Arg::Tensor)
      functionalize(call, target.value, call.results[0].value);
  } catch (ConvError &e) {
    if (e.origin == &call)
      e.origin = n;
    throw;
  }
  for (size_t i = 0; i < n->outputs().size() && i < call.results.size(); ++i)
    setOut(n, i, fromArg(call.results[i]));
  // Conversions that update their operands (batch norm's running
  // statistics) did so through updateState on the Call's arguments.
  if (inplace)
    vals[n->input(0)] = vals[n->output(0)];
}

/// An in-place op on a view of another value (StepBuilder::writeThroughView):
/// a reshape view (view, flatten, unsqueeze, ...; EfficientNet's `dropout_`
/// after `flatten`) or a step-1 slice (`x[a:b].zero_()`, Swin v2's qkv
/// bias). Every TorchScript value holding the base now holds its new value
/// (and a buffer base is updated). A parameter written through a slice is
/// refused (parameters are never updated by the step); `clone` gives a base
/// of its own (a copy) when its result is written in place, so the cloned
/// value is not touched.
void Importer::functionalize(Call &call, mlir::Value view, mlir::Value result) {
  rebindThroughView(call, view, result, vals);
}

