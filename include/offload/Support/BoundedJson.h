//===- BoundedJson.h - The one reader of the JSON files the tools read -*- C++ -*-===//
//
// Part of offload. Every JSON document a tool reads goes through here: the
// target file (`target=FILE.json`), the planner's decisions file
// (`decisions=`), and the JSON members of a `.pt2` archive
// (`models/model.json`, `data/weights/model_weights_config.json`).
//
//   * a size limit per kind, checked before anything is read or inflated
//     (llvm::json holds about 24 bytes of memory per byte of text); each
//     kind's limit is raised with an environment variable, which the error
//     names;
//   * a nesting-depth limit (kMaxJsonDepth), checked by a linear scan before
//     llvm::json::parse, whose recursion would otherwise overflow the stack
//     on a document nested 100,000 deep;
//   * files are opened as regular files only (InputFiles.h): a FIFO,
//     /dev/zero or a directory is refused by name.
//
//===----------------------------------------------------------------------===//
#ifndef OFFLOAD_SUPPORT_BOUNDEDJSON_H
#define OFFLOAD_SUPPORT_BOUNDEDJSON_H

#include "llvm/Support/LogicalResult.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/JSON.h"

#include <cstdint>
#include <string>

namespace offload {

/// The kinds of JSON the tools read, each with its own size limit.
enum class JsonKind {
  Target,           ///< target=FILE.json: 1 MiB, OFFLOAD_MAX_TARGET_JSON_BYTES
  Decisions,        ///< decisions=FILE: 64 MiB, OFFLOAD_MAX_DECISIONS_JSON_BYTES
  Pt2Model,         ///< .pt2 models/model.json: 256 MiB, OFFLOAD_MAX_PT2_JSON_BYTES
  Pt2WeightsConfig, ///< .pt2 model_weights_config.json: the same limit
};

/// Deepest nesting of arrays and objects accepted (real files: under 20).
constexpr unsigned kMaxJsonDepth = 512;

/// What the kind is called in errors ("target file", "decisions file").
const char *jsonKindName(JsonKind kind);
/// The environment variable that raises the kind's limit.
const char *jsonLimitVariable(JsonKind kind);
/// The kind's size limit in bytes (its variable, else the default); an
/// invalid variable is an error in `error`.
uint64_t jsonSizeLimit(JsonKind kind, std::string &error);
/// "set OFFLOAD_MAX_..._BYTES=N to raise it".
std::string jsonLimitHint(JsonKind kind);

/// "" or an error when `text` nests arrays/objects deeper than `maxDepth`
/// ("nested more than 512 deep at byte 1234"); strings are skipped, so a
/// bracket inside one does not count. Linear, no recursion.
std::string checkJsonDepth(llvm::StringRef text, unsigned maxDepth = kMaxJsonDepth);

/// Parses `text`, named `name` in errors, after the depth check; the size
/// limit is the caller's (it knew the size before reading).
llvm::FailureOr<llvm::json::Value> parseBoundedJson(llvm::StringRef text,
                                              const std::string &name,
                                              std::string &error);

/// Reads and parses the JSON file `path` of `kind`: a regular file within the
/// kind's size limit, nested at most kMaxJsonDepth deep. Errors name the
/// file, the limit and how to raise it.
llvm::FailureOr<llvm::json::Value> readJsonFile(llvm::StringRef path, JsonKind kind,
                                          std::string &error);

} // namespace offload

#endif
