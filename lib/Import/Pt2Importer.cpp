//===- Pt2Importer.cpp - An exported program's graph into a step ----------===//
//
// Part of offload. Walks the graph of a .pt2's model.json (Pt2Archive.cpp
// reads and checks the archive) in order and builds the step with the op
// builders the TorchScript importer uses (OpBuilder.h, Convert*.cpp):
//   - the signature's parameters and buffers become state arguments named by
//     their qualified names, with shapes and dtypes from the graph's tensor
//     metadata (checked against the weights' description), then the user
//     inputs, then the loss target;
//   - each `torch.ops.aten.<op>.<overload>` node becomes a Call: its
//     arguments, which the archive stores by name without their default
//     values, are put in schema order with the defaults filled in from
//     Pt2Schemas.cpp; in-place ops (`add_`, `relu_`) and batch norm's running
//     statistics update buffers as in TorchScript;
//   - ops whose tensor operands are all known at import time (arange, ones,
//     full, tensors torch.export lifted as constants, non-persistent buffers
//     the step does not update, and what is computed from them: position
//     ids, causal masks, T5's relative-position buckets) are evaluated here
//     (Pt2Fold.cpp), so such a mask becomes one constant of the step;
//   - `wrap_with_autocast` (autocast disabled) and `wrap_with_set_grad_enabled`
//     (a `torch.no_grad()` block) are inlined;
//   - buffer_mutation outputs (functional graphs) set the buffers' new values.
// Every op without a conversion is collected and reported once, with its
// count and the source location the archive records (stack_trace, and the
// module path from nn_module_stack).
//
//===----------------------------------------------------------------------===//
#include "OpBuilder.h"
#include "offload/Dialect/Offload/Transforms/Autocast.h"
#include "Pt2.h"

#include "mlir/IR/Diagnostics.h"
#include "llvm/ADT/StringExtras.h"

#include <cmath>
#include <limits>
#include <memory>
#include <set>

using namespace mlir;
using namespace mlir::offload;
using namespace ::offload::import;
using namespace ::offload::import::ts;
namespace json = llvm::json;

namespace {

/// The refusal of an op the importer only evaluates on constants.
const char *const kFoldOnly = "only supported on values known at import time (constants), not "
                              "on values computed from the step's inputs";

//===----------------------------------------------------------------------===//
// The importer
//===----------------------------------------------------------------------===//

/// Thrown by Pt2Importer::run when an in-place op writes through a view of
/// a value it evaluated at import time (T5's _shift_right:
/// `shifted[..., 1:] = labels[..., :-1]` on `labels.new_zeros(...)`): the
/// import starts over with the view's base kept as a value of the step
/// (`keep`), so that the write reaches it as for any other tensor.
struct Pt2Retry {
  std::set<std::string> keep;
};

class Pt2Importer : public StepBuilder {
public:
  /// `keepAsValues`: values (by graph name) that stay values of the step
  /// even when the importer can evaluate them (see Pt2Retry).
  Pt2Importer(Pt2Archive &ar, MLIRContext &ctx, const ImportOptions &opts,
              std::set<std::string> keepAsValues)
      : StepBuilder(ctx, opts), ar(ar), keepAsValues(std::move(keepAsValues)) {}
  OwningOpRef<ModuleOp> run(ImportError &err);

private:
  [[noreturn]] void bad(const std::string &msg) {
    throw ConvError{"'" + ar.path + "': " + msg};
  }
  const json::Object &obj(const json::Value *v, const std::string &what) {
    const json::Object *o = v ? v->getAsObject() : nullptr;
    if (!o)
      bad(what + " is missing or not an object");
    return *o;
  }
  const json::Array &arr(const json::Object &o, const char *key, const std::string &what) {
    const json::Array *a = o.getArray(key);
    if (!a)
      bad(what + " has no '" + key + "' list");
    return *a;
  }
  std::string str(const json::Object &o, const char *key, const std::string &what) {
    auto s = o.getString(key);
    if (!s)
      bad(what + " has no string '" + key + "'");
    return s->str();
  }
  Type elemType(int64_t code, const std::string &what);
  RankedTensorType tensorType(const std::string &name);
  /// Throws the error of a node whose result has a data-dependent shape or
  /// is a number read from a tensor's data; `op` and `at` name it.
  void dataDependentResult(const json::Object &node, const std::string &op,
                           const std::string &at);
  Arg argOf(const json::Value &v, const std::string &what);
  /// Converts one node, then applies the autocast policy of the region it
  /// is in to the ops it created (applyAutocastTo).
  void convertNode(const json::Object &node, size_t index);
  void convertNodeOps(const json::Object &node, size_t index);
  /// The ops created after `last` (nullptr: the block's start) in the
  /// builder's block: inside an enabled autocast region (`autocastLow`),
  /// cast as PyTorch's autocast casts them (AutocastRewriter, the policy of
  /// --offload-autocast); outside, an op with a bf16/f16 operand only has
  /// its mixed float operands promoted and its result types re-inferred.
  void applyAutocastTo(Operation *last);
  /// The low type of the enabled `torch.autocast` region being inlined
  /// (null outside one, or in a region with autocast disabled).
  Type autocastLow;
  /// One rewriter per low type (their casts shared by every region of that
  /// type), and one that only promotes.
  std::map<std::string, std::unique_ptr<AutocastRewriter>> rewriters;
  /// Fills `writtenInPlace`: the tensors that an in-place op of the graph
  /// (torch.export's training IR keeps `x[a:b].zero_()`) targets, directly
  /// or through views.
  void findInPlaceTargets(const json::Array &nodes);
  /// After an in-place op whose target `view` is a view of another value:
  /// every value holding that base holds its new value.
  void functionalize(Call &call, mlir::Value view, mlir::Value result);
  /// Evaluates the node at import time when its tensor operands are all
  /// constants (Pt2Fold.cpp); its output then names a constant.
  bool foldConstant(Call &call, const std::string &op, const std::string &overload,
                    const std::vector<std::string> &outs);
  /// `torch.ops.higher_order.wrap_with_autocast(device, dtype, enabled,
  /// cache_enabled, subgraph, *operands)`, what a `with torch.autocast(...)`
  /// block becomes: its nodes are converted here in line, its inputs bound
  /// to the operands, its outputs to the node's. Enabled, each op gets the
  /// casts of our autocast policy (AutocastRewriter: ATen's CUDA lists,
  /// docs/precision.md) to the block's dtype; disabled, the block computes
  /// in its own dtypes. Returns false (after recording why) for a dtype
  /// other than bfloat16 or float16.
  bool inlineAutocast(const json::Object &node, const std::string &what, const std::string &at,
                      const std::vector<std::string> &outs,
                      const std::vector<std::vector<std::string>> &outLists);
  /// `torch.ops.higher_order.wrap_with_set_grad_enabled(enabled, subgraph,
  /// *operands)`, what a `with torch.no_grad():` block (or a function
  /// decorated with it, as HF's rotary embeddings) becomes: inlined. With
  /// gradients disabled, every float result must not depend on a parameter
  /// (the step has no stop-gradient: it would differentiate through the
  /// block); HF computes cos/sin tables from buffers and position ids there.
  bool inlineSetGradEnabled(const json::Object &node, const std::string &what,
                            const std::string &at, const std::vector<std::string> &outs,
                            const std::vector<std::vector<std::string>> &outLists);
  /// The parts of a higher-order wrapper node `kind`
  /// (`wrap_with_autocast`, `wrap_with_set_grad_enabled`): its boolean
  /// `enabled` argument at input `enabledAt`, its subgraph at `graphAt` and
  /// the operands after it; `expected` lists the inputs for the error when
  /// there are too few.
  struct Wrapped {
    bool enabled = false;
    const json::Object *sub = nullptr;
    std::vector<Arg> operands;
  };
  Wrapped readWrapped(const json::Object &node, const std::string &what, const char *kind,
                      size_t enabledAt, size_t graphAt, const char *expected);
  /// Where a higher-order node's block comes from (the node itself records
  /// no source): the first line of `sub` that does, else `at`.
  std::string blockSource(const json::Object &sub, const std::string &at);
  /// Converts `sub`'s nodes in line, its inputs bound to `operands`, and
  /// binds the node's outputs to its results.
  void inlineSubgraph(const json::Object &sub, const std::vector<Arg> &operands,
                      const std::string &what, const std::vector<std::string> &outs,
                      const std::vector<std::vector<std::string>> &outLists);
  /// `x * ones`, `x + zeros`, `x - zeros` with a constant that changes
  /// neither x's shape nor its dtype: x itself (diffusers broadcasts its
  /// int64 timesteps with `timesteps * torch.ones(batch)`).
  bool foldIdentity(Call &call, const std::string &op, const std::vector<std::string> &outs);
  /// Whether `v` is computed from a parameter of the step.
  bool dependsOnParameter(mlir::Value v);
  Arg constArg(ConstPtr c, const std::string &name);
  /// `file:line` from the innermost frame of a node's stack_trace, and the
  /// module path from its nn_module_stack.
  void sourceOf(const json::Object &node, std::string &file, int64_t &line, std::string &module);

  Pt2Archive &ar;
  const json::Object *graph = nullptr;
  std::map<std::string, Arg> vals;
  std::map<std::string, ConstPtr> consts;
  std::set<std::string> writtenInPlace;
  /// Each view op's output and the tensor it views.
  std::map<std::string, std::string> viewOf;
  std::set<std::string> keepAsValues, retryKeeping;
};

void Pt2Importer::findInPlaceTargets(const json::Array &nodes) {
  pt2WrittenInPlace(nodes, writtenInPlace);
  pt2ViewSources(nodes, viewOf);
}

void Pt2Importer::functionalize(Call &call, mlir::Value view, mlir::Value result) {
  rebindThroughView(call, view, result, vals);
}

Type Pt2Importer::elemType(int64_t code, const std::string &what) {
  switch (code) {
  case kPt2Float: return b.getF32Type();
  case kPt2Double: return b.getF64Type();
  case kPt2BFloat16: return b.getBF16Type();
  case kPt2Half: return b.getF16Type();
  case kPt2Long: return b.getI64Type();
  case kPt2Int: return b.getI32Type();
  case kPt2Bool: return b.getI1Type();
  default:
    bad(what + " has dtype " + pt2DtypeName(code) +
        ", which offload does not support (float32, float64, bfloat16, float16, int64, int32, "
        "bool)");
  }
}

RankedTensorType Pt2Importer::tensorType(const std::string &name) {
  const json::Object *tv = graph->getObject("tensor_values");
  std::string what = "tensor '" + name + "'";
  const json::Object &meta = obj(tv ? tv->get(name) : nullptr, "the metadata of " + what);
  auto dt = meta.getInteger("dtype");
  if (!dt)
    bad(what + " has no dtype");
  std::vector<int64_t> shape;
  const json::Array &sizes = arr(meta, "sizes", what);
  for (size_t i = 0; i < sizes.size(); ++i) {
    const json::Object &s = obj(&sizes[i], what + " size " + std::to_string(i));
    if (auto v = s.getInteger("as_int")) {
      if (*v < 0)
        bad(what + " has a negative size");
      shape.push_back(*v);
      continue;
    }
    std::string expr;
    if (const json::Object *e = s.getObject("as_expr"))
      if (auto t = e->getString("expr_str")) {
        llvm::StringRef x = *t;
        // sympy's repr, `Symbol('s77', positive=True, integer=True)`: its name.
        if (x.consume_front("Symbol('"))
          x = x.take_until([](char c) { return c == '\''; });
        expr = " (" + x.str() + ")";
      }
    bad(what + " has a symbolic dimension" + expr + " at dim " + std::to_string(i) +
        ": offload needs static shapes; export without dynamic_shapes");
  }
  return RankedTensorType::get(shape, elemType(*dt, what));
}

/// The symbol of a size `as_expr` (sympy's `Symbol('u0', integer=True)`):
/// `u0`.
static std::string symbolOf(const json::Object &size) {
  if (const json::Object *e = size.getObject("as_expr"))
    if (auto t = e->getString("expr_str")) {
      llvm::StringRef x = *t;
      if (x.consume_front("Symbol('"))
        x = x.take_until([](char c) { return c == '\''; });
      return x.str();
    }
  return "";
}

void Pt2Importer::dataDependentResult(const json::Object &node, const std::string &op,
                                      const std::string &at) {
  const json::Array *outs = node.getArray("outputs");
  const json::Object *tv = graph->getObject("tensor_values");
  if (!outs)
    return;
  for (const json::Value &o : *outs) {
    const json::Object *oo = o.getAsObject();
    if (!oo)
      continue;
    if (oo->getObject("as_sym_int") || oo->getObject("as_sym_bool") ||
        oo->getObject("as_sym_float"))
      if (llvm::StringRef(op).starts_with("aten::item") ||
          llvm::StringRef(op).starts_with("aten::_local_scalar_dense"))
        throw ConvError{at + op + ": reads a number from a tensor's data (`.item()`, "
                        "`int(t)`): offload compiles one static graph, whose sizes and "
                        "branches cannot depend on the data"};
    const json::Object *tn = oo->getObject("as_tensor");
    auto name = tn ? tn->getString("name") : std::nullopt;
    const json::Object *meta = name && tv ? tv->getObject(*name) : nullptr;
    const json::Array *sizes = meta ? meta->getArray("sizes") : nullptr;
    if (!sizes)
      continue;
    for (size_t d = 0; d < sizes->size(); ++d) {
      const json::Object *s = (*sizes)[d].getAsObject();
      std::string sym = s ? symbolOf(*s) : "";
      if (!sym.empty() && sym[0] == 'u') // unbacked: known only from the data
        throw ConvError{at + op + ": its result's shape depends on the tensor's data (dim " +
                        std::to_string(d) + " is " + sym +
                        ", known only when the step runs): offload compiles static shapes; "
                        "boolean-mask indexing (`x[mask]`), nonzero, unique and masked_select "
                        "cannot be compiled (keep the shape and mask the values: where, "
                        "masked_fill, a product with the mask)"};
    }
  }
}

Arg Pt2Importer::constArg(ConstPtr c, const std::string &name) {
  Arg a;
  a.kind = Arg::Const;
  a.s = name; // the value's name: the folder finds its data by it
  a.type = c->elemType;
  if (c->data.size() == 1) {
    a.isScalar = c->shape.empty();
    a.d = c->data[0];
    if (isa<IntegerType>(c->elemType)) {
      a.intScalar = true;
      a.i = int64_t(c->data[0]);
    }
  }
  // Materialized once per element type: every use (a mask read by each
  // layer) shares one constant of the step.
  auto made = std::make_shared<std::map<Type, mlir::Value, bool (*)(Type, Type)>>(
      [](Type x, Type y) { return x.getAsOpaquePointer() < y.getAsOpaquePointer(); });
  a.materialize = [this, c, made](Call &n, Type hint) {
    Type et = hint && c->shape.empty() ? hint : c->elemType;
    auto it = made->find(et);
    if (it != made->end())
      return it->second;
    mlir::Value v = constant(n, RankedTensorType::get(c->shape, et), c->data);
    (*made)[et] = v;
    return v;
  };
  return a;
}

Arg Pt2Importer::argOf(const json::Value &v, const std::string &what) {
  const json::Object &o = obj(&v, what);
  if (o.empty())
    bad(what + " is empty");
  const auto &kv = *o.begin();
  llvm::StringRef k = kv.first;
  const json::Value &x = kv.second;
  auto tensorNamed = [&](const json::Value &t) -> Arg {
    std::string name = str(obj(&t, what), "name", what);
    auto it = vals.find(name);
    if (it == vals.end())
      bad(what + " refers to '" + name + "', which no earlier node or input defines");
    return it->second;
  };
  auto number = [&](const json::Value &f) -> double {
    if (auto d = f.getAsNumber())
      return *d;
    if (auto s = f.getAsString()) {
      if (*s == "Infinity")
        return std::numeric_limits<double>::infinity();
      if (*s == "-Infinity")
        return -std::numeric_limits<double>::infinity();
      if (*s == "NaN")
        return std::numeric_limits<double>::quiet_NaN();
    }
    bad(what + " is not a number");
  };
  if (k == "as_none")
    return Arg::none();
  if (k == "as_tensor")
    return tensorNamed(x);
  if (k == "as_tensors" || k == "as_optional_tensors") {
    const json::Array *a = x.getAsArray();
    if (!a)
      bad(what + " is not a list");
    std::vector<Arg> elems;
    for (const json::Value &e : *a) {
      const json::Object *eo = e.getAsObject();
      if (eo && eo->get("as_none"))
        elems.push_back(Arg::none());
      else if (eo && eo->get("as_tensor"))
        elems.push_back(tensorNamed(*eo->get("as_tensor")));
      else
        elems.push_back(tensorNamed(e));
    }
    return Arg::list(std::move(elems));
  }
  if (k == "as_int") {
    if (auto i = x.getAsInteger())
      return Arg::integer(*i);
    bad(what + " is not an integer");
  }
  if (k == "as_float")
    return Arg::number(number(x));
  if (k == "as_bool") {
    if (auto bv = x.getAsBoolean())
      return Arg::boolean(*bv);
    bad(what + " is not a boolean");
  }
  if (k == "as_ints" || k == "as_floats") {
    const json::Array *a = x.getAsArray();
    if (!a)
      bad(what + " is not a list");
    Arg r;
    r.kind = k == "as_ints" ? Arg::Ints : Arg::Doubles;
    for (const json::Value &e : *a) {
      if (k == "as_ints") {
        auto i = e.getAsInteger();
        if (!i)
          bad(what + " is not a list of integers");
        r.ints.push_back(*i);
      } else {
        r.doubles.push_back(number(e));
      }
    }
    return r;
  }
  if (k == "as_string") {
    auto s = x.getAsString();
    if (!s)
      bad(what + " is not a string");
    Arg r;
    r.kind = Arg::String;
    r.s = s->str();
    return r;
  }
  if (k == "as_scalar_type") {
    auto code = x.getAsInteger();
    if (!code)
      bad(what + " is not a dtype code");
    Arg r;
    r.kind = Arg::Dtype;
    r.s = pt2DtypeName(*code);
    r.type = pt2DtypeSize(*code) ? elemType(*code, what) : Type();
    return r;
  }
  if (k.starts_with("as_sym"))
    bad(what + " is a symbolic value (" + k.str() +
        "): offload needs static shapes; export without dynamic_shapes");
  // Memory formats, layouts, devices: nothing a conversion reads.
  Arg r;
  r.s = k.str();
  return r;
}

void Pt2Importer::sourceOf(const json::Object &node, std::string &file, int64_t &line,
                           std::string &module) {
  file.clear();
  line = 0;
  module.clear();
  const json::Object *meta = node.getObject("metadata");
  if (!meta)
    return;
  if (auto st = meta->getString("stack_trace")) {
    // The innermost frame is the last `File "F", line N` of the trace.
    llvm::StringRef s = *st;
    size_t p = s.rfind("File \"");
    if (p != llvm::StringRef::npos) {
      llvm::StringRef rest = s.substr(p + 6);
      size_t q = rest.find('"');
      if (q != llvm::StringRef::npos) {
        file = rest.substr(0, q).str();
        llvm::StringRef after = rest.substr(q + 1);
        if (after.consume_front(", line ")) {
          size_t e = after.find_first_not_of("0123456789");
          after.substr(0, e).getAsInteger(10, line);
        }
      }
    }
  }
  if (auto ms = meta->getString("nn_module_stack")) {
    // `key,path,type;key,path,type;...`: the innermost module's path.
    llvm::StringRef last = ms->rsplit(';').second.empty() ? *ms : ms->rsplit(';').second;
    llvm::SmallVector<llvm::StringRef> f;
    last.split(f, ',');
    if (f.size() >= 2)
      module = f[1].str();
  }
}

bool Pt2Importer::foldConstant(Call &call, const std::string &op, const std::string &overload,
                               const std::vector<std::string> &outs) {
  if (outs.size() != 1 || outs[0].empty())
    return false;
  ConstLookup lookup = [this](const Arg &a) -> ConstPtr {
    if (a.kind != Arg::Const)
      return nullptr;
    auto it = consts.find(a.s);
    return it == consts.end() ? nullptr : it->second;
  };
  ConstPtr c = pt2Fold(*this, call, op, overload, lookup);
  if (!c)
    return false;
  consts[outs[0]] = c;
  vals[outs[0]] = constArg(c, outs[0]);
  if (keepAsValues.count(outs[0])) // written through a view later: a value
    vals[outs[0]] = Arg::tensor(constant(call, RankedTensorType::get(c->shape, c->elemType),
                                         c->data));
  return true;
}

bool Pt2Importer::foldIdentity(Call &call, const std::string &op,
                               const std::vector<std::string> &outs) {
  if ((op != "mul" && op != "add" && op != "sub") || outs.size() != 1 || outs[0].empty() ||
      call.args.size() < 2)
    return false;
  double unit = op == "mul" ? 1.0 : 0.0;
  for (size_t c = 0; c < 2; ++c) {
    if (op == "sub" && c == 0)
      continue; // 0 - x is not x
    const Arg &k = call.args[c], &x = call.args[1 - c];
    auto it = k.kind == Arg::Const ? consts.find(k.s) : consts.end();
    if (it == consts.end() || x.kind != Arg::Tensor)
      continue;
    const ConstTensor &ct = *it->second;
    auto xt = tt(x.value);
    if (ct.shape.size() > size_t(xt.getRank()))
      continue;
    bool fits = true;
    for (size_t d = 0; d < ct.shape.size(); ++d)
      fits &= ct.shape[d] == 1 || ct.shape[d] == xt.getShape()[xt.getRank() - ct.shape.size() + d];
    // The constant's dtype must not promote x's: same kind, no wider float.
    Type xe = xt.getElementType(), ke = ct.elemType;
    bool keepsType = xe == ke || (isa<FloatType>(xe) && isa<IntegerType>(ke)) ||
                     (xe.isF64() && ke.isF32()) || (xe.isInteger(64) && ke.isInteger(1));
    if (!fits || !keepsType ||
        !std::all_of(ct.data.begin(), ct.data.end(), [&](double v) { return v == unit; }))
      continue;
    vals[outs[0]] = x;
    return true;
  }
  return false;
}

std::string Pt2Importer::blockSource(const json::Object &sub, const std::string &at) {
  std::string file, module;
  int64_t line = 0;
  if (const json::Array *nodes = sub.getArray("nodes"))
    for (const json::Value &nv : *nodes)
      if (const json::Object *n = nv.getAsObject()) {
        sourceOf(*n, file, line, module);
        if (!file.empty())
          return file + ":" + std::to_string(line) + (module.empty() ? "" : " (" + module + ")");
      }
  return at;
}

Pt2Importer::Wrapped Pt2Importer::readWrapped(const json::Object &node, const std::string &what,
                                              const char *kind, size_t enabledAt,
                                              size_t graphAt, const char *expected) {
  const json::Array &ins = arr(node, "inputs", what);
  if (ins.size() <= graphAt)
    bad(what + " (" + kind + ") has " + std::to_string(ins.size()) + " inputs; expected " +
        expected);
  auto argAt = [&](size_t i) -> const json::Object & {
    return obj(obj(&ins[i], what + " input").get("arg"), what + " input " + std::to_string(i));
  };
  std::optional<bool> enabled = argAt(enabledAt).getBoolean("as_bool");
  if (!enabled)
    bad(what + " (" + kind + "): its 'enabled' argument is not a boolean");
  Wrapped w;
  w.enabled = *enabled;
  w.sub = &obj(obj(argAt(graphAt).get("as_graph"), what + " subgraph").get("graph"),
               what + " subgraph's graph");
  for (size_t i = graphAt + 1; i < ins.size(); ++i)
    w.operands.push_back(argOf(*obj(&ins[i], what + " input").get("arg"), what + " operand"));
  return w;
}

bool Pt2Importer::inlineAutocast(const json::Object &node, const std::string &what,
                                 const std::string &at, const std::vector<std::string> &outs,
                                 const std::vector<std::vector<std::string>> &outLists) {
  Wrapped w = readWrapped(node, what, "wrap_with_autocast", 2, 4,
                          "device, dtype, enabled, cache_enabled, the subgraph, operands");
  Type low;
  if (w.enabled) {
    // The region's ops get autocast's casts as they are converted
    // (convertNode); its dtype (input 1) is the low type.
    const json::Array &ins = arr(node, "inputs", what);
    Arg dtype = argOf(*obj(&ins[1], what + " input").get("arg"), what + " dtype");
    if (dtype.kind != Arg::Dtype || !dtype.type ||
        !mlir::offload::detail::isLowFloat(dtype.type)) {
      recordUnsupported("higher_order::wrap_with_autocast",
                        "autocast to " + (dtype.s.empty() ? std::string("this dtype") : dtype.s) +
                            " (only bfloat16 and float16 are low-precision types)",
                        "", blockSource(*w.sub, at));
      return false;
    }
    low = dtype.type;
  }
  Type outer = autocastLow;
  autocastLow = low; // null: autocast disabled inside
  inlineSubgraph(*w.sub, w.operands, what + " (wrap_with_autocast)", outs, outLists);
  autocastLow = outer;
  return true;
}

bool Pt2Importer::inlineSetGradEnabled(const json::Object &node, const std::string &what,
                                       const std::string &at,
                                       const std::vector<std::string> &outs,
                                       const std::vector<std::vector<std::string>> &outLists) {
  Wrapped w = readWrapped(node, what, "wrap_with_set_grad_enabled", 0, 1,
                          "enabled, the subgraph, operands");
  const json::Object &sub = *w.sub;
  inlineSubgraph(sub, w.operands, what + " (wrap_with_set_grad_enabled)", outs, outLists);
  if (w.enabled)
    return true;
  // No gradient may leave the block: its float results must not depend on
  // a parameter.
  auto check = [&](const Arg &a) {
    if (a.kind == Arg::Tensor && isa<FloatType>(tt(a.value).getElementType()) &&
        dependsOnParameter(a.value))
      throw ConvError{blockSource(sub, at) +
                      ": higher_order::wrap_with_set_grad_enabled: a torch.no_grad() block "
                      "computes a float value from a parameter, which the step would "
                      "differentiate (offload has no stop-gradient op)"};
  };
  for (size_t i = 0; i < outs.size(); ++i) {
    if (!outs[i].empty())
      check(vals[outs[i]]);
    for (const std::string &n : outLists[i])
      check(vals[n]);
  }
  return true;
}

bool Pt2Importer::dependsOnParameter(mlir::Value v) {
  llvm::SmallVector<mlir::Value> work = {v};
  llvm::DenseSet<mlir::Value> seen;
  while (!work.empty()) {
    mlir::Value x = work.pop_back_val();
    if (!seen.insert(x).second)
      continue;
    if (auto arg = dyn_cast<BlockArgument>(x)) {
      unsigned i = arg.getArgNumber();
      if (i < argNameRole.size() && argNameRole[i].second == "parameter")
        return true;
      continue;
    }
    if (Operation *op = x.getDefiningOp())
      for (mlir::Value o : op->getOperands())
        work.push_back(o);
  }
  return false;
}

void Pt2Importer::inlineSubgraph(const json::Object &sub, const std::vector<Arg> &operands,
                                 const std::string &what, const std::vector<std::string> &outs,
                                 const std::vector<std::vector<std::string>> &outLists) {
  const json::Array &subIns = arr(sub, "inputs", what + " subgraph");
  if (subIns.size() != operands.size())
    bad(what + ": its subgraph takes " + std::to_string(subIns.size()) +
        " inputs but the node gives " + std::to_string(operands.size()));
  // The subgraph's names are its own: the outer values are put back after.
  std::map<std::string, Arg> outer = vals;
  for (size_t i = 0; i < subIns.size(); ++i) {
    const json::Object &si = obj(&subIns[i], what + " subgraph input");
    const json::Object *tn = si.getObject("as_tensor");
    if (!tn)
      bad(what + ": a subgraph input that is not a tensor");
    vals[str(*tn, "name", what + " subgraph input")] = operands[i];
  }
  const json::Array &nodes = arr(sub, "nodes", what + " subgraph");
  findInPlaceTargets(nodes);
  for (size_t k = 0; k < nodes.size(); ++k)
    convertNode(obj(&nodes[k], what + " subgraph node " + std::to_string(k)), k);
  std::vector<Arg> results;
  for (const json::Value &ov : arr(sub, "outputs", what + " subgraph")) {
    const json::Object *tn = obj(&ov, what + " subgraph output").getObject("as_tensor");
    auto it = tn ? vals.find(str(*tn, "name", what + " subgraph output")) : vals.end();
    results.push_back(it == vals.end() ? Arg() : it->second);
  }
  vals = std::move(outer);
  // The node's outputs, a tensor or a list each, take the results in order.
  size_t r = 0;
  for (size_t i = 0; i < outs.size(); ++i) {
    if (!outs[i].empty())
      vals[outs[i]] = r < results.size() ? results[r++] : Arg();
    for (const std::string &n : outLists[i])
      vals[n] = r < results.size() ? results[r++] : Arg();
  }
}

void Pt2Importer::convertNode(const json::Object &node, size_t index) {
  // A wrapper's subgraph nodes were each converted (and cast) by their
  // own call, under the wrapper's autocast state.
  std::optional<StringRef> target = node.getString("target");
  bool wrapper = target && target->starts_with("torch.ops.higher_order.wrap_with_");
  Block *block = b.getInsertionBlock();
  Operation *last = block && !block->empty() ? &block->back() : nullptr;
  convertNodeOps(node, index);
  if (!wrapper && block == b.getInsertionBlock())
    applyAutocastTo(last);
}

void Pt2Importer::applyAutocastTo(Operation *last) {
  Block *block = b.getInsertionBlock();
  Operation *first = last ? last->getNextNode() : (block->empty() ? nullptr : &block->front());
  SmallVector<Operation *> created;
  for (Operation *op = first; op; op = op->getNextNode())
    created.push_back(op);
  if (created.empty())
    return;
  bool policy = bool(autocastLow);
  if (!policy && llvm::none_of(created, [](Operation *op) {
        return llvm::any_of(op->getOperandTypes(),
                            [](Type t) { return mlir::offload::detail::isLowFloat(t); });
      }))
    return; // fp32 (or f64) code outside autocast: nothing to do
  Type low = policy ? autocastLow : Type(BFloat16Type::get(&ctx));
  std::string key;
  llvm::raw_string_ostream(key) << (policy ? "policy " : "promote ") << low;
  std::unique_ptr<AutocastRewriter> &rw = rewriters[key];
  if (!rw)
    rw = std::make_unique<AutocastRewriter>(&ctx, low);
  for (Operation *op : created)
    if (failed(rw->rewrite(op, policy)))
      bad("under torch.autocast: '" + op->getName().getStringRef().str() +
          "' cannot take the types autocast gives its operands");
}

void Pt2Importer::convertNodeOps(const json::Object &node, size_t index) {
  std::string what = "node " + std::to_string(index);
  std::string target = str(node, "target", what);
  std::string file, module;
  int64_t line = 0;
  sourceOf(node, file, line, module);
  // torch.ops.<namespace>.<op>.<overload>
  llvm::StringRef t(target);
  std::string ns, op, overload;
  if (t.consume_front("torch.ops.")) {
    auto [n1, rest] = t.split('.');
    auto [o, ov] = rest.rsplit('.');
    ns = n1.str();
    op = o.str();
    overload = ov.str();
  }
  std::string kind = ns.empty() ? target : ns + "::" + op;
  std::string at = file.empty() ? (module.empty() ? "<unknown location>" : "<" + module + ">")
                                : file + ":" + std::to_string(line) +
                                      (module.empty() ? "" : " (" + module + ")");
  Location loc = file.empty() ? Location(NameLoc::get(b.getStringAttr(kind)))
                              : Location(FileLineColLoc::get(&ctx, file, line, 0));
  std::string where = (file.empty() ? "" : file + ":" + std::to_string(line) + ": ") + kind;

  // Output names.
  std::vector<std::string> outs;
  std::vector<std::vector<std::string>> outLists;
  for (const json::Value &o : arr(node, "outputs", what)) {
    const json::Object &oo = obj(&o, what + " output");
    std::vector<std::string> list;
    if (const json::Object *tn = oo.getObject("as_tensor"))
      outs.push_back(str(*tn, "name", what + " output"));
    else if (const json::Array *ts = oo.getArray("as_tensors")) {
      outs.push_back("");
      for (const json::Value &e : *ts)
        list.push_back(str(obj(&e, what + " output"), "name", what + " output"));
    } else
      outs.push_back("");
    outLists.push_back(list);
  }
  // A result whose shape torch.export could not know before running (an
  // unbacked size, `u0`: boolean-mask indexing, nonzero, unique) or a number
  // read from a tensor's data (`.item()`): one error at this node.
  dataDependentResult(node, kind + (overload.empty() ? "" : "." + overload),
                      file.empty() ? "" : file + ":" + std::to_string(line) + ": ");
  auto poison = [&] {
    for (size_t i = 0; i < outs.size(); ++i) {
      if (!outs[i].empty())
        vals[outs[i]] = Arg();
      for (const std::string &n : outLists[i])
        vals[n] = Arg();
    }
  };

  if (target == "torch.ops.higher_order.wrap_with_autocast") {
    if (!inlineAutocast(node, what, at, outs, outLists))
      poison();
    return;
  }
  if (target == "torch.ops.higher_order.wrap_with_set_grad_enabled") {
    inlineSetGradEnabled(node, what, at, outs, outLists);
    return;
  }

  bool inplace = op.size() > 1 && op.back() == '_' && op[op.size() - 2] != '_';
  std::string base = inplace ? op.substr(0, op.size() - 1) : op;
  std::string callKind = ns + "::" + base;
  const auto &table = opTable();
  const std::vector<Pt2ArgSpec> *schema = pt2Schema(base + "." + overload);
  bool foldable = ns == "aten" && pt2Foldable(base);
  auto cit = table.find(callKind);
  if (ns != "aten" || !schema || (!foldable && cit == table.end())) {
    recordUnsupported(ns == "aten" ? kind + "." + overload : kind, "", "", at);
    poison();
    return;
  }

  // Arguments by name, in schema order, defaults filled in.
  std::map<std::string, const json::Value *> given;
  std::vector<const json::Value *> positional;
  for (const json::Value &iv : arr(node, "inputs", what)) {
    const json::Object &io = obj(&iv, what + " input");
    std::string name = str(io, "name", what + " input");
    const json::Value *a = io.get("arg");
    if (!a)
      bad(what + " input '" + name + "' has no arg");
    given[name] = a;
    positional.push_back(a);
  }
  Call call(callKind, loc, where);
  call.resultWrittenInPlace = outs.size() == 1 && writtenInPlace.count(outs[0]);
  bool poisoned = false;
  auto add = [&](const json::Value &a, const std::string &argName) {
    Arg v = argOf(a, what + " (" + kind + ") argument '" + argName + "'");
    if (v.kind == Arg::Unknown && v.s.empty())
      poisoned = true;
    if (v.kind == Arg::List)
      for (const Arg &e : v.elems)
        poisoned |= e.kind == Arg::Unknown;
    // Constants keep their value's name (triu of ones).
    if (v.kind == Arg::Const && a.getAsObject())
      if (const json::Object *tn = a.getAsObject()->getObject("as_tensor"))
        if (auto nm = tn->getString("name"))
          v.s = nm->str();
    call.args.push_back(std::move(v));
  };
  if (schema) {
    for (const Pt2ArgSpec &spec : *schema) {
      auto g = given.find(spec.name);
      if (g != given.end())
        add(*g->second, spec.name);
      else if (spec.hasDefault)
        call.args.push_back(spec.dflt);
      else
        bad(what + " (" + kind + ") lacks its argument '" + spec.name + "'");
    }
  } else {
    for (size_t i = 0; i < positional.size(); ++i)
      add(*positional[i], std::to_string(i));
  }
  // An in-place op that writes through a view of a value evaluated at
  // import: that value must be a value of the step (Pt2Retry).
  if (inplace && !positional.empty() && !poisoned)
    if (const json::Object *so = positional[0]->getAsObject())
      if (const json::Object *tn = so->getObject("as_tensor"))
        if (auto nm = tn->getString("name")) {
          std::string root = nm->str();
          auto sv = vals.find(root);
          if (sv != vals.end() && sv->second.kind == Arg::Const && viewOf.count(root)) {
            while (viewOf.count(root))
              root = viewOf[root];
            if (!keepAsValues.count(root)) {
              retryKeeping.insert(root);
              poison();
              return;
            }
          }
        }
  if (poisoned) {
    // An op offload only evaluates at import, on the result of an
    // unsupported op (not a constant either): reported too.
    if (foldable && cit == table.end())
      recordUnsupported(kind, kFoldOnly, "", at);
    poison();
    return;
  }
  if (foldable) {
    bool folded = false;
    try {
      folded = foldConstant(call, base, overload, outs);
    } catch (ConvError &e) {
      if (e.origin != &call)
        throw;
      recordUnsupported(kind, e.reason, e.message, at);
      poison();
      return;
    }
    if (folded) {
      // An in-place op's target now holds the result.
      if (inplace && !positional.empty())
        if (const json::Object *so = positional[0]->getAsObject())
          if (const json::Object *tn = so->getObject("as_tensor"))
            if (auto nm = tn->getString("name"))
              vals[nm->str()] = vals[outs[0]];
      return;
    }
  }
  if (foldIdentity(call, base, outs))
    return;
  if (cit == table.end()) {
    // An op offload evaluates only at import time, on a value computed from
    // the step's inputs.
    if (foldable)
      recordUnsupported(kind, kFoldOnly, "", at);
    else
      recordUnsupported(kind + "." + overload, "", "", at);
    poison();
    return;
  }
  try {
    Arg self = call.args.empty() ? Arg() : call.args[0];
    convertCall(call, cit->second, inplace);
    // An in-place op on a view wrote through it into its base.
    if (inplace && self.kind == Arg::Tensor && self.path.empty())
      functionalize(call, self.value, call.results[0].value);
  } catch (ConvError &e) {
    if (e.origin != &call)
      throw;
    recordUnsupported(kind, e.reason, e.message, at);
    poison();
    return;
  }
  for (size_t i = 0; i < outs.size() && i < call.results.size(); ++i) {
    const Arg &r = call.results[i];
    if (!outs[i].empty())
      vals[outs[i]] = r;
    if (r.kind == Arg::List)
      for (size_t k = 0; k < outLists[i].size() && k < r.elems.size(); ++k)
        vals[outLists[i][k]] = r.elems[k];
  }
  // Outputs the conversion does not produce (e.g. a second result) stay
  // unknown: a node that reads one is reported.
  for (size_t i = call.results.size(); i < outs.size(); ++i)
    if (!outs[i].empty())
      vals[outs[i]] = Arg();
  // An in-place op's target now holds the result.
  if (inplace && !call.results.empty()) {
    const json::Value *self = positional.empty() ? nullptr : positional[0];
    if (const json::Object *so = self ? self->getAsObject() : nullptr)
      if (const json::Object *tn = so->getObject("as_tensor"))
        if (auto nm = tn->getString("name"))
          vals[nm->str()] = call.results[0];
  }
}

OwningOpRef<ModuleOp> Pt2Importer::run(ImportError &err) {
  ScopedDiagnosticHandler handler(&ctx, [&](Diagnostic &d) {
    diagnostics.push_back(d.str());
    return success();
  });
  const json::Object &top = obj(&ar.model, "models/model.json");
  const json::Object &gm = obj(top.get("graph_module"), "graph_module");
  graph = &obj(gm.get("graph"), "graph_module.graph");
  const json::Object &sig = obj(gm.get("signature"), "graph_module.signature");

  begin(ar.path);
  // Parameters and buffers (in the signature's order), then user inputs.
  std::vector<std::pair<std::string, RankedTensorType>> userInputs;
  size_t k = 0;
  std::set<std::string> mutated = pt2MutatedBuffers(ar);
  // A tensor of data/constants as a constant of the step, bound to `argName`.
  auto constantInput = [&](const std::string &argName, const std::string &name,
                           const std::string &what) {
    auto cit = ar.constants.find(name);
    if (cit == ar.constants.end())
      bad(what + ": '" + name + "' has no entry in data/constants/model_constants_config.json");
    ConstPtr c = pt2ConstOf(ctx, cit->second);
    if (!c)
      bad(what + ": constant '" + name + "' has dtype " + pt2DtypeName(cit->second.dtype) +
          ", which offload does not support (float32, float64, bfloat16, float16, int64, "
          "int32, bool)");
    if (RankedTensorType::get(c->shape, c->elemType) != tensorType(argName))
      bad(what + ": constant '" + name + "' does not match the graph's input '" + argName + "'");
    consts[argName] = c;
    vals[argName] = constArg(c, argName);
    if (keepAsValues.count(argName)) { // written through a view: a value
      Call at("constant", fileLoc, what);
      vals[argName] =
          Arg::tensor(constant(at, RankedTensorType::get(c->shape, c->elemType), c->data));
    }
  };
  for (const json::Value &sv : arr(sig, "input_specs", "the signature")) {
    std::string what = "input_specs[" + std::to_string(k++) + "]";
    const json::Object &spec = obj(&sv, what);
    const json::Object *p = spec.getObject("parameter");
    const json::Object *bu = spec.getObject("buffer");
    const json::Object *ui = spec.getObject("user_input");
    if (const json::Object *tc = spec.getObject("tensor_constant")) {
      // A tensor the forward creates (`torch.tensor([...])`), lifted by
      // torch.export: a constant of the step.
      constantInput(str(obj(tc->get("arg"), what + ".arg"), "name", what + ".arg"),
                    str(*tc, "tensor_constant_name", what), what);
      continue;
    }
    if (bu && pt2IsConstantBuffer(ar, *bu, mutated)) {
      // A non-persistent buffer (not in the state_dict: derived from the
      // configuration, as rotary inv_freq or HF's position_ids) that the
      // step does not update: a constant of the step.
      constantInput(str(obj(bu->get("arg"), what + ".arg"), "name", what + ".arg"),
                    str(*bu, "buffer_name", what), what);
      continue;
    }
    if (p || bu) {
      const json::Object &s = p ? *p : *bu;
      std::string argName = str(obj(s.get("arg"), what + ".arg"), "name", what + ".arg");
      std::string fqn = str(s, p ? "parameter_name" : "buffer_name", what);
      auto wit = ar.weights.find(fqn);
      const Pt2Weight *found = wit == ar.weights.end() ? nullptr : &wit->second;
      if (!found && bu) { // a non-persistent buffer the step updates: state
        auto cit = ar.constants.find(fqn);
        found = cit == ar.constants.end() ? nullptr : &cit->second;
      }
      if (!found)
        bad(std::string(p ? "parameter" : "buffer") + " '" + fqn +
            "' has no entry in data/weights/model_weights_config.json" +
            (bu && !bu->getBoolean("persistent").value_or(true)
                 ? " nor in data/constants/model_constants_config.json"
                 : ""));
      RankedTensorType type = tensorType(argName);
      const Pt2Weight &w = *found;
      RankedTensorType wtype =
          RankedTensorType::get(w.shape, elemType(w.dtype, "weight '" + fqn + "'"));
      if (wtype != type) {
        std::string a, c;
        llvm::raw_string_ostream(a) << wtype;
        llvm::raw_string_ostream(c) << type;
        bad("weight '" + fqn + "' is " + a + " in model_weights_config.json but the graph's "
            "input '" + argName + "' is " + c);
      }
      std::string role = p ? (w.requiresGrad ? "parameter" : "state") : "state";
      vals[argName] = Arg::tensor(addStateArg(fqn, type, role, bu != nullptr), fqn);
    } else if (ui) {
      const json::Object &a = obj(ui->get("arg"), what + ".arg");
      const json::Object *tn = a.getObject("as_tensor");
      if (!tn)
        bad(what + ": a user input that is not a tensor is not supported");
      std::string name = str(*tn, "name", what);
      userInputs.push_back({name, tensorType(name)});
    } else {
      std::string kind = spec.empty() ? "?" : spec.begin()->first.str();
      bad(what + " is a '" + kind + "' input, which offload does not support "
          "(parameters, buffers, tensor constants and tensor user inputs only)");
    }
  }
  // --input: entries naming a user input must agree with the archive; one
  // more entry is the loss target.
  std::vector<const InputSpec *> extra;
  for (const InputSpec &s : opts.inputs) {
    auto it = std::find_if(userInputs.begin(), userInputs.end(),
                           [&](const auto &u) { return u.first == s.name; });
    if (it == userInputs.end()) {
      extra.push_back(&s);
      continue;
    }
    if (it->second != s.type) {
      std::string a, c;
      llvm::raw_string_ostream(a) << s.type;
      llvm::raw_string_ostream(c) << it->second;
      throw ConvError{"--input '" + s.name + "' is " + a + " but the archive's input '" +
                      s.name + "' is " + c};
    }
  }
  if (extra.size() > 1)
    throw ConvError{"--input '" + extra[1]->name + "': the archive's inputs are known; only "
                    "one more --input (the loss target) may be given"};
  for (auto &[name, type] : userInputs)
    vals[name] = Arg::tensor(addInput(name, type));

  PhaseOp::create(b, fileLoc, Phase::forward);
  findInPlaceTargets(arr(*graph, "nodes", "the graph"));
  size_t idx = 0;
  for (const json::Value &nv : arr(*graph, "nodes", "the graph"))
    convertNode(obj(&nv, "node " + std::to_string(idx)), idx), ++idx;
  if (!retryKeeping.empty())
    throw Pt2Retry{retryKeeping};
  throwIfUnsupported();

  // Outputs: the first user (or loss) output, and buffer mutations.
  mlir::Value out;
  for (const json::Value &ov : arr(sig, "output_specs", "the signature")) {
    const json::Object &spec = obj(&ov, "an output spec");
    if (const json::Object *bm = spec.getObject("buffer_mutation")) {
      std::string name = str(obj(bm->get("arg"), "buffer_mutation.arg"), "name", "output");
      std::string buf = str(*bm, "buffer_name", "buffer_mutation");
      auto it = vals.find(name);
      if (it == vals.end() || it->second.kind != Arg::Tensor || !current.count(buf))
        bad("buffer_mutation of '" + buf + "' names no tensor of the graph");
      current[buf] = it->second.value;
      continue;
    }
    const json::Object *uo = spec.getObject("user_output");
    if (!uo)
      uo = spec.getObject("loss_output");
    if (!uo) {
      std::string kind = spec.empty() ? "?" : spec.begin()->first.str();
      bad("a '" + kind + "' output is not supported");
    }
    if (out)
      continue;
    const json::Object &a = obj(uo->get("arg"), "output arg");
    const json::Object *tn = a.getObject("as_tensor");
    auto it = tn ? vals.find(str(*tn, "name", "output")) : vals.end();
    if (it == vals.end() || it->second.kind != Arg::Tensor)
      throw ConvError{"the forward's first output is not a tensor computed from the inputs"};
    out = it->second.value;
  }
  if (!out)
    throw ConvError{"'" + ar.path + "': the exported program has no output"};

  // The loss target: given, or derived from the output for a class-index
  // (or mse) loss when the output is not already the loss.
  mlir::Value target;
  std::string targetName;
  auto ot = tt(out);
  bool stage = opts.lossGiven && opts.loss == LossKind::None;
  if (!extra.empty()) {
    targetName = extra[0]->name;
    target = addInput(targetName, extra[0]->type);
  } else if (!stage && !(ot.getRank() == 0 && isa<FloatType>(ot.getElementType()))) {
    targetName = argIndex.count("y") ? "target" : "y";
    RankedTensorType type =
        opts.loss == LossKind::Mse
            ? ot
            : RankedTensorType::get(ot.getShape().drop_back(), b.getI64Type());
    if (ot.getRank() == 0)
      type = ot;
    target = addInput(targetName, type);
  }
  return finish(out, target, targetName, err);
}

} // namespace

auto ::offload::import::importPt2(Pt2Archive &archive, MLIRContext &ctx,
                                   const ImportOptions &options, ImportError &err)
    -> OwningOpRef<ModuleOp> {
  // At most one more pass per view base found written in place (Pt2Retry);
  // each pass keeps more values, so the loop ends.
  std::set<std::string> keep;
  for (;;) {
    Pt2Importer im(archive, ctx, options, keep);
    try {
      return im.run(err);
    } catch (const Pt2Retry &r) {
      size_t before = keep.size();
      keep.insert(r.keep.begin(), r.keep.end());
      if (keep.size() == before) {
        err = {2, "internal error: the import of '" + archive.path + "' did not settle"};
        return nullptr;
      }
      continue;
    } catch (const ConvError &e) {
      err = {1, e.message};
    } catch (const std::bad_alloc &) {
      err = {1, "out of memory while importing '" + archive.path + "'"};
    } catch (const std::exception &e) {
      err = {2, std::string("internal error: ") + e.what()};
    }
    return nullptr;
  }
}
