//===- OpBuilder.h - Front-end-neutral ATen op builders (private) -*- C++ -*-===//
//
// Part of offload. What both importers share, free of LibTorch:
//   Arg / Call       one ATen op application as a front end sees it: the op
//                    name (`aten::linear`), its arguments in schema order
//                    (tensors of the step, numbers, lists, dtypes, constant
//                    tensors, None), the location, and the results the
//                    conversion sets;
//   StepBuilder      the step under construction (module, function, state
//                    arguments, dropout seed, unsupported-op records) and the
//                    helpers every conversion uses (typed argument reads, op
//                    creation with inferred result types, reshape, fill);
//   the op table     ATen name -> conversion, one entry per op, assembled
//                    from the families in Convert*.cpp (elementwise, NN,
//                    shapes, decomposed, composite, recurrent).
// The TorchScript importer (NodeImporter.cpp) builds a Call from a
// torch::jit::Node, the .pt2 importer (Pt2Importer.cpp) from a node of the
// exported program's JSON graph; both then run the same conversion.
// Errors are thrown as ConvError (this library is built with -fexceptions)
// and caught at the library boundary; nothing is thrown through MLIR.
//
//===----------------------------------------------------------------------===//
#ifndef OFFLOAD_LIB_IMPORT_OPBUILDER_H
#define OFFLOAD_LIB_IMPORT_OPBUILDER_H

#include "offload/Import/TorchImporter.h"

#include "offload/Dialect/Offload/IR/OffloadDialect.h"
#include "offload/Dialect/Offload/IR/OffloadOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "llvm/ADT/StringMap.h"

#include <functional>
#include <map>
#include <string>
#include <vector>

namespace offload {
namespace import {
namespace ts {
using namespace mlir;
using namespace mlir::offload;

struct Call;

/// One argument (or result) of an ATen op application.
struct Arg {
  enum Kind {
    Unknown, ///< not representable (a conversion that reads it fails)
    None,    ///< Python None (an absent optional argument)
    Tensor,  ///< a tensor of the step: `value`
    Int,     ///< `i`
    Double,  ///< `d`
    Bool,    ///< `b`
    Ints,    ///< `ints` (a list of integers)
    Doubles, ///< `doubles` (a list of numbers)
    String,  ///< `s`
    Dtype,   ///< a dtype argument: `type` (null when offload has no such
             ///< element type; `s` then names it)
    Const,   ///< a tensor known at import time: `materialize`; `isScalar`
             ///< with `d` when it has rank 0
    List,    ///< `elems` (tensors and other values)
  } kind = Unknown;
  mlir::Value value;
  int64_t i = 0;
  double d = 0;
  bool b = false;
  bool isScalar = false;
  std::vector<int64_t> ints;
  std::vector<double> doubles;
  std::string s;
  /// Dtype: the dtype; Const: its element type when the front end knows it
  /// without materializing (else null).
  mlir::Type type;
  std::vector<Arg> elems;
  /// Const: builds the constant as an op of the step; `elemHint`, when set,
  /// is the element type the consumer needs (PyTorch casts 0-dim tensors).
  std::function<mlir::Value(Call &n, mlir::Type elemHint)> materialize;
  /// Const: a one-element integer tensor (its value is `i`).
  bool intScalar = false;
  /// Tensor: the parameter or buffer it holds (qualified name), if any.
  std::string path;

  static Arg tensor(mlir::Value v, std::string name = "") {
    Arg a;
    a.kind = Tensor;
    a.value = v;
    a.path = std::move(name);
    return a;
  }
  static Arg none() {
    Arg a;
    a.kind = None;
    return a;
  }
  static Arg integer(int64_t v) {
    Arg a;
    a.kind = Int;
    a.i = v;
    return a;
  }
  static Arg number(double v) {
    Arg a;
    a.kind = Double;
    a.d = v;
    return a;
  }
  static Arg boolean(bool v) {
    Arg a;
    a.kind = Bool;
    a.b = v;
    return a;
  }
  static Arg intList(std::vector<int64_t> v) {
    Arg a;
    a.kind = Ints;
    a.ints = std::move(v);
    return a;
  }
  static Arg list(std::vector<Arg> v) {
    Arg a;
    a.kind = List;
    a.elems = std::move(v);
    return a;
  }
  bool isNone() const { return kind == None; }
  bool isConst() const { return kind != Tensor && kind != Unknown && kind != List; }
};

/// One ATen op application: `kind` (`aten::linear`, the in-place `_` already
/// stripped), `args` in the op's schema order (defaults filled in),
/// `results` set by the conversion (a tensor, or a list of tensors for
/// chunk/split).
struct Call {
  std::string kind;
  std::vector<Arg> args;
  std::vector<Arg> results;
  mlir::Location loc;
  /// The error prefix: `file:line: aten::kind`.
  std::string where;
  /// Set by the front end when the result (or a view of it) is later the
  /// target of an in-place op, so `clone` must copy (TorchScript; a .pt2's
  /// graph is functional).
  bool resultWrittenInPlace = false;

  Call(std::string kind, mlir::Location loc, std::string where)
      : kind(std::move(kind)), loc(loc), where(std::move(where)) {}
  size_t numInputs() const { return args.size(); }
};

/// A user-facing failure; the message already carries the location.
struct ConvError {
  std::string message;
  /// Set by StepBuilder::fail: the Call (or a front end's node) that
  /// refused, and the reason without the location.
  const void *origin = nullptr;
  std::string reason;
};

/// An element type of offload for a dtype name (`float32`, `int64`, ...),
/// or null.
mlir::Type elementTypeNamed(mlir::MLIRContext &ctx, const std::string &dtype);
/// The elements of a bf16/f16 constant from their values (each rounded to
/// nearest even; exact for values read from bf16/f16 weights).
mlir::DenseElementsAttr lowFloatElements(mlir::RankedTensorType type,
                                         llvm::ArrayRef<double> values);

/// One operand of PyTorch's type promotion: its element type and its
/// priority, 2 for a tensor with dimensions, 1 for a 0-dim tensor, 0 for a
/// Python number (typed f64, i64 or i1 by its kind).
struct Promoted {
  mlir::Type type;
  int priority = 2;
};
/// torch.result_type of `ops`: the highest kind (bool < integer < float)
/// among all operands; within that kind the widest type among the operands
/// of the highest priority that have it; numbers alone give the default
/// dtypes (float32, int64). The one promotion rule of both the import-time
/// evaluation (Pt2Fold.cpp) and the conversions (ConvertElementwise.cpp).
mlir::Type resultType(mlir::MLIRContext &ctx, llvm::ArrayRef<Promoted> ops);

/// PyTorch's advanced indexing `x[i0, i1, ...]` (`index.Tensor`) of a tensor
/// of shape `in` by index tensors known at import (a null entry: that dim
/// taken whole): the index tensors broadcast together, and their dims go
/// where the first one stands when they are adjacent, else first. One rule
/// for the import-time evaluation and for the conversion of an integer or
/// boolean value of the step (a gather by these offsets).
class AdvancedIndex {
public:
  struct Index {
    std::vector<int64_t> shape;
    std::vector<int64_t> values; ///< row-major
  };
  /// `error()` says why the indexing is invalid ("" when it is valid).
  AdvancedIndex(llvm::ArrayRef<int64_t> in, std::vector<const Index *> indices);
  const std::string &error() const { return err; }
  const std::vector<int64_t> &shape() const { return out; }
  /// The row-major offset in x of the result element at `idx`; sets `error`
  /// (and returns 0) for an index out of range (negative indices count from
  /// the end).
  int64_t offset(llvm::ArrayRef<int64_t> idx, std::string &error) const;

private:
  std::vector<int64_t> in, inSt, out, bshape, rest, at;
  std::vector<const Index *> idx;
  std::vector<std::vector<int64_t>> ist;
  size_t restBefore = 0;
  std::string err;
};

/// The elements of a value defined by offload.fill or offload.constant
/// (what a constant argument materializes to), as doubles; false for any
/// other value.
bool constantValues(mlir::Value v, std::vector<double> &out);

class StepBuilder;
using ConvertFn = std::function<void(StepBuilder &, Call &)>;

/// The step under construction and the conversions' helpers. A front end
/// creates the function (begin), adds parameter/buffer/input arguments,
/// converts its ops through the op table, then calls finish.
class StepBuilder {
public:
  StepBuilder(MLIRContext &ctx, const ImportOptions &opts) : ctx(ctx), opts(opts), b(&ctx) {}
  virtual ~StepBuilder() = default;

  // --- the step -----------------------------------------------------------
  /// Creates the module and `func.func @forward` (named after `path`).
  void begin(const std::string &path);
  /// Adds a parameter/state argument of `type` named `name`.
  mlir::Value addStateArg(const std::string &name, mlir::Type type, const std::string &role,
                          bool isBuffer);
  /// Adds an input argument.
  mlir::Value addInput(const std::string &name, mlir::Type type);
  /// Records an unsupported op (or a refused use of one) at `at` (`file:line`).
  void recordUnsupported(const std::string &kind, const std::string &reason,
                         const std::string &message, const std::string &at);
  /// Throws one ConvError listing every recorded unsupported op, if any.
  void throwIfUnsupported();
  /// Applies the loss to `out` (the forward's first output; `target` the
  /// loss target input or null) at `retLoc`, adds every buffer the step
  /// updated as a `new_state` result, folds transposes into matmuls, drops
  /// dead ops and unused parameters, sets names and roles and verifies.
  OwningOpRef<ModuleOp> finish(mlir::Value out, mlir::Value target,
                               const std::string &targetName, ImportError &err);

  /// Runs `convert` on `call`. `inplace` (`aten::X_` converted as `aten::X`):
  /// an update of a parameter is refused, `add_` on an i64 buffer (a
  /// counter such as num_batches_tracked) is an i64 add_scalar, and the
  /// result (which keeps the target's buffer name) becomes the buffer's
  /// current value.
  void convertCall(Call &call, const ConvertFn &convert, bool inplace);

  // --- helpers used by the op table ----------------------------------------
  [[noreturn]] void fail(const Call &n, const std::string &msg) {
    throw ConvError{n.where + ": " + msg, &n, msg};
  }
  Arg &in(Call &n, size_t i);
  void setOut(Call &n, size_t i, Arg v) {
    if (n.results.size() <= i)
      n.results.resize(i + 1);
    n.results[i] = std::move(v);
  }
  void setOut(Call &n, mlir::Value v) { setOut(n, 0, Arg::tensor(v)); }

  int64_t getInt(Call &n, size_t i);
  double getDouble(Call &n, size_t i);
  bool getBool(Call &n, size_t i);
  std::vector<int64_t> getInts(Call &n, size_t i);
  std::string getString(Call &n, size_t i);
  bool isScalar(const Arg &v);
  double scalarValue(const Arg &v);
  mlir::Value tensorIn(Call &n, size_t i, Type elemHint = {});
  /// Argument i as an operand of PyTorch's type promotion (a constant
  /// tensor of unknown type is materialized to learn it).
  Promoted promoted(Call &n, size_t i);
  /// Argument i (a tensor, a constant or a number) as a tensor of element
  /// type `et`: a number is a 0-dim fill of it, a tensor of another type is
  /// cast (offload.copy).
  mlir::Value tensorAs(Call &n, size_t i, Type et);
  mlir::Value optTensorIn(Call &n, size_t i) {
    return i >= n.args.size() || in(n, i).isNone() ? mlir::Value() : tensorIn(n, i);
  }
  /// A constant argument as an op of the step.
  mlir::Value materialize(Call &n, const Arg &c, Type elemHint);
  RankedTensorType tt(mlir::Value v) { return cast<RankedTensorType>(v.getType()); }

  /// Creates op `OpTy` with `operands` and `attrs`; result types are inferred
  /// when the op can, else `types`. The op is verified; a failure (a dtype
  /// or shape the op cannot take) becomes a user error at `n`.
  template <typename OpTy>
  Operation *emit(Call &n, ValueRange operands, ArrayRef<NamedAttribute> attrs = {},
                  ArrayRef<Type> types = {});
  template <typename OpTy>
  mlir::Value emit1(Call &n, ValueRange operands, ArrayRef<NamedAttribute> attrs = {},
                    ArrayRef<Type> types = {}) {
    return emit<OpTy>(n, operands, attrs, types)->getResult(0);
  }
  NamedAttribute attr(StringRef name, Attribute a) { return b.getNamedAttr(name, a); }
  NamedAttribute f64(StringRef name, double v) { return attr(name, b.getF64FloatAttr(v)); }
  NamedAttribute i64(StringRef name, int64_t v) { return attr(name, b.getI64IntegerAttr(v)); }
  NamedAttribute i64s(StringRef name, ArrayRef<int64_t> v) {
    return attr(name, b.getDenseI64ArrayAttr(v));
  }
  mlir::Value reshape(Call &n, mlir::Value v, ArrayRef<int64_t> shape);
  mlir::Value fill(Call &n, double value, RankedTensorType type);
  /// A dense constant of `type` from `values` (converted to its element
  /// type); a splat becomes offload.fill.
  mlir::Value constant(Call &n, RankedTensorType type, ArrayRef<double> values);
  /// The `rng_seed` argument (added on first use).
  mlir::Value seed(Call &n);
  int64_t nextDropoutOffset(int64_t numel) {
    int64_t o = dropoutOffset;
    dropoutOffset += numel;
    return o;
  }
  /// When `target` holds a buffer, its current value becomes `newValue`.
  void updateState(const Arg &target, mlir::Value newValue);
  /// An in-place op `n` wrote `result` into `view`. When `view` is a reshape
  /// (view, flatten, unsqueeze, ...) or a step-1 slice of another value, sets
  /// `base` to that value and returns what it holds afterwards: `result`
  /// reshaped back, or cat(base[:a], result, base[b:]) along the slice's dim.
  /// Null for any other value; a strided slice is refused. The front end
  /// then replaces `base` by the result in every value it tracks.
  mlir::Value writeThroughView(Call &n, mlir::Value view, mlir::Value result,
                               mlir::Value &base);
  /// Functionalizes an in-place op `n` that wrote `result` into `view`:
  /// writeThroughView, then every value the front end tracks that held the
  /// view's base (`tracked`: its key -> a record with `kind`, `value` and
  /// `path`, as Importer's Val and Pt2Importer's Arg) holds the base's new
  /// value, and so does the parameter or buffer it names. Refuses, by
  /// failing `n`, a parameter written through a slice (the step never
  /// updates parameters) and a base no tracked value holds.
  /// A view of a view that no tracked value holds (`x[:, 0]`: a reshape of a
  /// slice) is written through to the first base that one holds.
  template <typename Map>
  void rebindThroughView(Call &n, mlir::Value view, mlir::Value result, Map &tracked) {
    mlir::Value base;
    mlir::Value newBase = writeThroughView(n, view, result, base);
    if (!newBase)
      return;
    bool isSlice = false, found = false;
    for (;;) {
      isSlice |= static_cast<bool>(view.getDefiningOp<SliceOp>());
      for (auto &entry : tracked) {
        auto &v = entry.second;
        using Record = std::remove_reference_t<decltype(v)>;
        if (v.kind != Record::Tensor || v.value != base)
          continue;
        if (isSlice && !v.path.empty() && roleOf(v.path) == "parameter")
          fail(n, "in-place update of parameter '" + v.path + "' through a slice is not "
                  "supported");
        if (!v.path.empty() && current.count(v.path))
          current[v.path] = newBase;
        v.value = newBase;
        found = true;
      }
      if (found || !(base.getDefiningOp<ReshapeOp>() || base.getDefiningOp<SliceOp>()))
        break;
      view = base;
      newBase = writeThroughView(n, view, newBase, base);
    }
    if (!found)
      fail(n, isSlice ? "in-place op on a slice of a value the importer cannot track is not "
                        "supported"
                      : "in-place op on a view of a value the importer cannot track (a view "
                        "of a slice or of an intermediate result) is not supported");
  }
  /// The role of the parameter/buffer named `path` ("" when none).
  std::string roleOf(const std::string &path) const;

  MLIRContext &ctx;
  const ImportOptions &opts;
  OpBuilder b;

protected:
  OwningOpRef<ModuleOp> module;
  Block *body = nullptr;
  func::FuncOp func;
  Location fileLoc = UnknownLoc::get(&ctx);
  // Parameters and buffers: qualified name -> argument index and current
  // value (buffers change when the step updates them).
  llvm::StringMap<unsigned> argIndex;
  llvm::StringMap<mlir::Value> current;
  std::vector<std::string> bufferNames;
  std::vector<std::pair<std::string, std::string>> argNameRole;
  int seedArg = -1;
  int64_t dropoutOffset = 0;
  // Unsupported ops: "kind" or "kind: reason" -> uses.
  struct Unsupported {
    int count = 0;
    std::vector<std::string> at; // distinct locations, in order
    std::string message;         // a refusal's full first message
  };
  std::map<std::string, Unsupported> unsupported;
public:
  std::vector<std::string> diagnostics;
};

template <typename OpTy>
Operation *StepBuilder::emit(Call &n, ValueRange operands, ArrayRef<NamedAttribute> attrs,
                             ArrayRef<Type> types) {
  Location l = n.loc;
  OperationState state(l, OpTy::getOperationName());
  state.addOperands(operands);
  state.addAttributes(attrs);
  diagnostics.clear();
  if constexpr (OpTy::template hasTrait<InferTypeOpInterface::Trait>()) {
    SmallVector<Type> inferred;
    if (failed(OpTy::inferReturnTypes(&ctx, l, operands, state.attributes.getDictionary(&ctx),
                                      /*properties=*/nullptr, /*regions=*/{}, inferred))) {
      std::string msg =
          diagnostics.empty() ? "cannot infer the result type" : diagnostics.front();
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

//===----------------------------------------------------------------------===//
// Helpers shared by the conversion families
//===----------------------------------------------------------------------===//

/// `d` normalized into [0, rank) (negative counts from the end); a user error
/// naming `n` when out of range. A rank-0 tensor accepts 0 and -1.
int64_t normDim(StepBuilder &im, Call &n, int64_t d, int64_t rank);
/// x[start:end:step] along `dim` (Python slice rules: negative bounds count
/// from the end and are clamped); returns `x` itself for the full range.
mlir::Value emitSlice(StepBuilder &im, Call &n, mlir::Value x, int64_t dim, int64_t start,
                      int64_t end, int64_t step);
/// `x` permuted by `perm` (`x` itself for the identity).
mlir::Value permuted(StepBuilder &im, Call &n, mlir::Value x, std::vector<int64_t> perm);
/// Class-index loss operands with the class dim 1 of any rank, as PyTorch
/// takes them (logits [N, C, d1, ...] with target [N, d1, ...], or [C] with a
/// scalar): rewritten to the dialect's [M, C] and [M] (ConvertNN.cpp). A
/// target of another shape is an error naming both shapes.
void classDimLast(StepBuilder &im, Call &n, mlir::Value &z, mlir::Value &t);
/// Attention that reads key/value heads repeated as HF's repeat_kv does
/// reads the un-repeated ones as grouped-query attention (ConvertNN.cpp);
/// run on the finished step, when every use is known.
void foldRepeatedKeyValue(func::FuncOp f);
/// Sets `n`'s result to `x` permuted by `perm` (no op for the identity).
void emitPermute(StepBuilder &im, Call &n, mlir::Value x, std::vector<int64_t> perm);

/// The op table, by family: each adds its `aten::` kinds to `t`.
using OpTable = llvm::StringMap<ConvertFn>;
void registerElementwiseConversions(OpTable &t);
void registerNNConversions(OpTable &t);
void registerShapeConversions(OpTable &t);
void registerDecomposedConversions(OpTable &t);
void registerRecurrentConversions(OpTable &t);
void registerCompositeConversions(OpTable &t);
/// All of them (built once).
const OpTable &opTable();

} // namespace ts
} // namespace import
} // namespace offload

#endif // OFFLOAD_LIB_IMPORT_OPBUILDER_H
