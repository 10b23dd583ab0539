//===- Pt2Importer.h - torch.export (.pt2) to offload dialect ---*- C++ -*-===//
//
// Part of offload. Reads an archive written by `torch.export.save` (PyTorch
// 2.x) without LibTorch: the zip with libzip, `<name>/models/model.json` (the
// serialized ExportedProgram: graph, signature, tensor metadata) with
// llvm::json, and the parameters and buffers from `<name>/data/weights/*` as
// `model_weights_config.json` describes them. The graph's ATen ops go through
// the same op builders as the TorchScript importer (lib/Import/OpBuilder.h),
// so both front ends produce the same step. docs/import.md, section ".pt2".
//
// Supported: export schema version 8 up to 8.20 (what PyTorch 2.15 writes),
// static shapes, little-endian archives, weights stored as raw bytes (not
// pickled) in f32, f64, i64, i32 or bool.
//
//===----------------------------------------------------------------------===//
#ifndef OFFLOAD_IMPORT_PT2IMPORTER_H
#define OFFLOAD_IMPORT_PT2IMPORTER_H

#include "offload/Import/TorchImporter.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace offload {
namespace import {

/// The export schema version this reader supports: major 8, minor <= 20.
constexpr int kPt2SchemaMajor = 8;
constexpr int kPt2SchemaMaxMinor = 20;

/// A parsed, validated .pt2 archive (opaque; holds the JSON and the weights).
class Pt2Archive;
struct Pt2ArchiveDeleter {
  void operator()(Pt2Archive *a) const;
};
using Pt2ArchivePtr = std::unique_ptr<Pt2Archive, Pt2ArchiveDeleter>;

/// Reads the archive at `path`: the zip directory, the model JSON (schema
/// version checked), and every weight the config lists (its bytes checked
/// against its dtype, shape, strides and storage offset). On failure returns
/// null and sets `err` (exit code 1 for every problem of the file: missing or
/// truncated archive, missing member, bad JSON, other schema version,
/// weights that disagree with their description).
Pt2ArchivePtr readPt2(const std::string &path, ImportError &err);
/// The same from bytes in memory (`name` is used in messages); the fuzz
/// target's entry point.
Pt2ArchivePtr readPt2Buffer(const void *data, size_t size, const std::string &name,
                            ImportError &err);

/// Converts the archive's graph into a module holding one `func.func
/// @forward` step, as importModel does for TorchScript: parameters, then
/// buffers, then the user inputs (their shapes from the archive; `--input`
/// entries naming a user input must agree with it), then the loss target.
/// When the forward's output is not a scalar and no target is given, the
/// target is an input `y`: i64 class indices of the output's shape without
/// its last dim (cross_entropy, nll), or the output's type (mse). The
/// context must have the offload and func dialects loaded. Never throws.
mlir::OwningOpRef<mlir::ModuleOp> importPt2(Pt2Archive &archive, mlir::MLIRContext &ctx,
                                            const ImportOptions &options, ImportError &err);

/// Writes every parameter and buffer under its qualified name as an
/// uncompressed .npz (f32/f64 kept, integers as int64, bool as bool), in the
/// signature's order. Returns an empty string on success, else a message.
std::string writePt2Params(Pt2Archive &archive, const std::string &path);

/// True when `path` names a .pt2 archive (by its extension).
bool isPt2Path(const std::string &path);

} // namespace import
} // namespace offload

#endif // OFFLOAD_IMPORT_PT2IMPORTER_H
