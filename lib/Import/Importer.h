//===- Importer.h - TorchScript importer internals (private) ----*- C++ -*-===//
//
// Part of offload. Shared by the parts of the TorchScript importer, split
// the way torch-mlir splits its importer:
//   ModelLoader.cpp        loading a .pt (torch::jit::load) and writing its
//                          parameters (the runtime's npz writer);
//   InputSpec.cpp          `--input NAME=DIMSxDTYPE`, parsed as an MLIR type;
//   ImporterSupport.cpp    locations, import-time constants, op creation;
//   NodeImporter.cpp       the node walk: import-time folding with LibTorch,
//                          control flow unrolling, lists, in-place ops, and
//                          the op table assembled from the families below;
//   Convert*.cpp           op conversions by family (elementwise, neural
//                          network layers, shapes and data movement);
//   ConvertDecomposed.cpp  ATen ops composed of existing offload ops;
//   ConvertComposite.cpp   more of them: einsum, vector norm, expand_as,
//                          bilinear upsampling;
//   ConvertRecurrent.cpp   LSTM/GRU/RNN unrolled over the sequence;
//   StepSignature.cpp      the step's arguments, inputs, loss and results.
// Compiled with -fexceptions: a user error is thrown as ConvError and caught
// at the library boundary (importModel); nothing throws through MLIR.
//
//===----------------------------------------------------------------------===//
#ifndef OFFLOAD_LIB_IMPORT_IMPORTER_H
#define OFFLOAD_LIB_IMPORT_IMPORTER_H

#include "offload/Import/TorchImporter.h"

#include "offload/Dialect/Offload/IR/OffloadDialect.h"
#include "offload/Dialect/Offload/IR/OffloadOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "llvm/ADT/StringMap.h"

#include <torch/csrc/jit/ir/ir.h>
#include <torch/script.h>

#include <functional>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

namespace offload {
namespace import {

/// A loaded TorchScript module (the public header keeps it opaque).
class LoadedModel {
public:
  torch::jit::Module module;
  std::string path;
};

namespace ts {
using namespace mlir;
using namespace mlir::offload;
namespace tj = torch::jit;

/// The first line of a LibTorch message, without its C++ backtrace.
std::string firstLine(const std::string &s);
/// A LibTorch exception's message, first line only.
std::string torchMessage(const std::exception &e);
/// file, line and column of the Python code that produced `n`, when
/// TorchScript recorded them.
bool sourceOf(tj::Node *n, std::string &file, size_t &line, size_t &col);


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
  /// Set by Importer::fail: the node and the reason without the location.
  tj::Node *node = nullptr;
  std::string reason;
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
    throw ConvError{where(n) + ": " + msg, n, msg};
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
  /// Converts `n` through the op table entry `convert` (`inplace`: `aten::X_`).
  void convertTableOp(tj::Node *n, const ConvertFn &convert, bool inplace);
  void functionalizeView(tj::Node *n, ReshapeOp view, mlir::Value result);
  void functionalizeSlice(tj::Node *n, SliceOp view, mlir::Value result);
  bool tryFold(tj::Node *n);
  void convertGetAttr(tj::Node *n);
  /// Records `n` as unsupported (an op kind without a conversion, or one
  /// whose conversion refused it with `reason`) and poisons its outputs, so
  /// the walk goes on and every problem is reported in one message.
  void recordUnsupported(tj::Node *n, const std::string &reason = "",
                         const std::string &message = "");
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
  struct Unsupported {
    int count = 0;
    std::vector<std::string> at; // distinct locations, in order
    std::string message;         // a refusal's full first message
  };
  // "kind" or "kind: reason" -> uses.
  std::map<std::string, Unsupported> unsupported;
  std::vector<std::string> diagnostics;
};


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


//===----------------------------------------------------------------------===//
// Helpers shared by the conversion families
//===----------------------------------------------------------------------===//

/// `d` normalized into [0, rank) (negative counts from the end); a user error
/// naming `n` when out of range. A rank-0 tensor accepts 0 and -1.
int64_t normDim(Importer &im, tj::Node *n, int64_t d, int64_t rank);
/// x[start:end:step] along `dim` (Python slice rules: negative bounds count
/// from the end and are clamped); returns `x` itself for the full range.
mlir::Value emitSlice(Importer &im, tj::Node *n, mlir::Value x, int64_t dim,
                      int64_t start, int64_t end, int64_t step);
/// Sets `n`'s result to `x` permuted by `perm` (no op for the identity).
void emitPermute(Importer &im, tj::Node *n, mlir::Value x, std::vector<int64_t> perm);

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

#endif // OFFLOAD_LIB_IMPORT_IMPORTER_H
