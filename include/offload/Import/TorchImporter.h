//===- TorchImporter.h - TorchScript to offload dialect ---------*- C++ -*-===//
//
// Part of offload. Imports a TorchScript module saved by PyTorch (traced or
// scripted, in train mode) into one `func.func @forward` training step of the
// offload dialect (forward phase only): parameters and buffers lifted to
// named arguments, shapes inferred from the `--input` types, in-place ops
// functionalized, shape arithmetic folded at import time, and the loss as the
// first result. docs/import.md describes the conventions.
//
// This header is free of LibTorch types, so tools compiled without C++
// exceptions can include it; the implementation catches every LibTorch
// exception and reports it as an error string.
//
//===----------------------------------------------------------------------===//
#ifndef OFFLOAD_IMPORT_TORCHIMPORTER_H
#define OFFLOAD_IMPORT_TORCHIMPORTER_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/OwningOpRef.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace offload {
namespace import {

/// One `--input NAME=DIMSxDTYPE` argument, e.g. `x=32x3x32x32xf32` or
/// `y=32xi64` (a rank-0 tensor is `NAME=f32`): DIMSxDTYPE is the body of a
/// builtin tensor type, `type` is that type (static positive dims; element
/// type f32, f64, i64, i32 or i1).
struct InputSpec {
  std::string name;
  mlir::RankedTensorType type;
};

/// Parses `NAME=DIMSxDTYPE` with MLIR's type parser in `ctx`; returns an
/// empty string on success, else a one-line message naming the problem
/// (`--input 'TEXT': ...`).
std::string parseInputSpec(const std::string &text, mlir::MLIRContext &ctx,
                           InputSpec &out);

/// The loss applied to the forward's first output when it is not a scalar.
/// None: a pipeline stage; the first output is the step's result (role
/// `output`) and `offload-autodiff` seeds backward with its gradient.
enum class LossKind { CrossEntropy, Nll, Mse, None };

struct ImportOptions {
  /// Forward inputs in order, then optionally the loss target.
  std::vector<InputSpec> inputs;
  /// Set when `--loss` was given; cross-entropy is the default when a target
  /// input is present.
  bool lossGiven = false;
  LossKind loss = LossKind::CrossEntropy;
  /// Keep parameters and buffers the forward never reads as step arguments.
  /// By default they are left out (and listed in `unusedOut`): a step must not
  /// update a parameter the loss does not depend on, as torch.optim skips a
  /// parameter whose gradient is None (e.g. the other task's head of a
  /// multi-task model).
  bool keepUnused = false;
  /// Filled with the names left out.
  std::vector<std::string> *unusedOut = nullptr;
  /// Rewrite spelled-out attention (matmul(q, kᵀ), scale, constant mask,
  /// softmax, dropout, matmul(·, v)) into offload.attention where exactly
  /// equivalent (--offload-fuse-attention, run at the end of the import).
  bool fuseAttention = true;
  /// Attention whose query, key, value and output the model transposes
  /// (1, 2) (HF, nanoGPT: the heads of a projection) takes the token layout
  /// (offload.attention layout blhd) instead of those copies
  /// (foldAttentionTokenLayout, run at the end of the import; offload-import
  /// --attention-layout=bhld turns it off).
  bool attentionTokenLayout = true;
};

/// How an import failed: 1 = user error (bad file, bad inputs, unsupported
/// model), 2 = internal error (a bug in the importer).
struct ImportError {
  int exitCode = 0;
  std::string message;
  explicit operator bool() const { return exitCode != 0; }
};

/// A loaded TorchScript module (opaque; holds a torch::jit::Module).
class LoadedModel;
struct LoadedModelDeleter {
  void operator()(LoadedModel *m) const;
};
using LoadedModelPtr = std::unique_ptr<LoadedModel, LoadedModelDeleter>;

/// Loads `path` with torch::jit::load on the CPU. On failure returns null and
/// sets `err` (missing file, truncated or corrupt archive, archive from a
/// PyTorch this LibTorch cannot read).
LoadedModelPtr loadModel(const std::string &path, ImportError &err);

/// Converts the loaded module's `forward` into a module holding one
/// `func.func @forward` step. The context must have the offload and func
/// dialects loaded. Never throws; on failure returns null and sets `err`.
mlir::OwningOpRef<mlir::ModuleOp> importModel(LoadedModel &model,
                                              mlir::MLIRContext &ctx,
                                              const ImportOptions &options,
                                              ImportError &err);

/// Writes every parameter and buffer of `model` under its qualified name as
/// an uncompressed .npz (floating tensors keep their dtype, integer ones
/// become int64, as `python/export_models.py` writes them). Returns an empty
/// string on success, else a one-line message.
std::string writeParams(LoadedModel &model, const std::string &path);

} // namespace import
} // namespace offload

#endif // OFFLOAD_IMPORT_TORCHIMPORTER_H
