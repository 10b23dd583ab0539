//===- Importer.h - TorchScript importer internals (private) ----*- C++ -*-===//
//
// Part of offload. The TorchScript front end: Val (what the walk knows of a
// TorchScript value) and Importer, a StepBuilder (OpBuilder.h) that turns
// each node it cannot fold into a Call for the shared op table. Files:
//   ModelLoader.cpp        loading a .pt (torch::jit::load) and writing its
//                          parameters (the runtime's npz writer);
//   InputSpec.cpp          `--input NAME=DIMSxDTYPE`, parsed as an MLIR type;
//   ImporterSupport.cpp    locations, LibTorch tensors as step constants;
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

#include "OpBuilder.h"
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

/// The TorchScript front end: walks the graph, folds what LibTorch can
/// evaluate, and hands every other op to the shared op table as a Call.
class Importer : public StepBuilder {
public:
  Importer(LoadedModel &model, MLIRContext &ctx, const ImportOptions &opts)
      : StepBuilder(ctx, opts), model(model) {}

  OwningOpRef<ModuleOp> run(ImportError &err);

  using StepBuilder::fail;
  using StepBuilder::getBool;
  using StepBuilder::getInt;
  using StepBuilder::in;
  using StepBuilder::setOut;
  Location loc(tj::Node *n);
  std::string where(tj::Node *n);
  [[noreturn]] void fail(tj::Node *n, const std::string &msg) {
    throw ConvError{where(n) + ": " + msg, n, msg};
  }
  Val &in(tj::Node *n, size_t i) { return vals[n->input(i)]; }
  void setOut(tj::Node *n, size_t i, Val v) { vals[n->output(i)] = std::move(v); }
  int64_t getInt(tj::Node *n, size_t i);
  bool getBool(tj::Node *n, size_t i);
  RankedTensorType tt(mlir::Value v) { return cast<RankedTensorType>(v.getType()); }
  /// A constant tensor as an op of the step (offload.fill for a splat).
  mlir::Value materializeTensor(Call &n, const at::Tensor &t, Type elemHint);

  LoadedModel &model;

private:
  void convertBlock(tj::Block *block);
  void convertNode(tj::Node *n);
  /// Converts `n` through the op table entry `convert` (`inplace`: `aten::X_`).
  void convertTableOp(tj::Node *n, const ConvertFn &convert, bool inplace);
  /// `v` as an argument of a Call (`name`: its schema name, if known).
  Arg toArg(const Val &v, const std::string &name);
  Val fromArg(const Arg &a);
  /// After an in-place op whose target `view` is a view of another value:
  /// every value holding that base holds its new value.
  void functionalize(Call &call, mlir::Value view, mlir::Value result);
  bool tryFold(tj::Node *n);
  void convertGetAttr(tj::Node *n);
  /// Records `n` as unsupported (an op kind without a conversion, or one
  /// whose conversion refused it with `reason`) and poisons its outputs, so
  /// the walk goes on and every problem is reported in one message.
  void recordUnsupported(tj::Node *n, const std::string &reason = "",
                         const std::string &message = "");
  Type elementType(at::ScalarType st, const std::string &what);
  /// The ATen dtype of an element type elementType() gives (prim::dtype,
  /// the zeros_like family's folding).
  static at::ScalarType scalarTypeOf(Type et);

  std::unordered_map<const tj::Value *, Val> vals;
};

} // namespace ts
} // namespace import
} // namespace offload

#endif // OFFLOAD_LIB_IMPORT_IMPORTER_H
