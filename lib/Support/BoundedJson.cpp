//===- BoundedJson.cpp - The one reader of the JSON files the tools read --===//
//
// Part of offload. See include/offload/Support/BoundedJson.h.
//
//===----------------------------------------------------------------------===//

#include "offload/Support/BoundedJson.h"
#include "offload/Support/InputFiles.h"

#include "llvm/Support/Error.h"

using namespace offload;

namespace {
struct KindInfo {
  const char *name;
  const char *variable;
  uint64_t defaultBytes;
};

const KindInfo &info(JsonKind kind) {
  static const KindInfo kinds[] = {
      {"target file", "OFFLOAD_MAX_TARGET_JSON_BYTES", uint64_t(1) << 20},
      {"decisions file", "OFFLOAD_MAX_DECISIONS_JSON_BYTES", uint64_t(64) << 20},
      {".pt2 model.json", "OFFLOAD_MAX_PT2_JSON_BYTES", uint64_t(256) << 20},
      {".pt2 model_weights_config.json", "OFFLOAD_MAX_PT2_JSON_BYTES",
       uint64_t(256) << 20},
  };
  return kinds[int(kind)];
}
} // namespace

const char *offload::jsonKindName(JsonKind kind) { return info(kind).name; }

const char *offload::jsonLimitVariable(JsonKind kind) { return info(kind).variable; }

uint64_t offload::jsonSizeLimit(JsonKind kind, std::string &error) {
  return limitFromEnv(info(kind).variable, info(kind).defaultBytes, error);
}

std::string offload::jsonLimitHint(JsonKind kind) {
  return std::string("set ") + info(kind).variable + "=BYTES to raise it";
}

std::string offload::checkJsonDepth(llvm::StringRef text, unsigned maxDepth) {
  unsigned depth = 0;
  bool inString = false, escaped = false;
  for (size_t i = 0, e = text.size(); i < e; ++i) {
    char c = text[i];
    if (inString) {
      if (escaped)
        escaped = false;
      else if (c == '\\')
        escaped = true;
      else if (c == '"')
        inString = false;
      continue;
    }
    switch (c) {
    case '"':
      inString = true;
      break;
    case '[':
    case '{':
      if (++depth > maxDepth)
        return "arrays and objects nested more than " + std::to_string(maxDepth) +
               " deep (at byte " + std::to_string(i) +
               "); this limit is fixed (deeper nesting would overflow the parser's stack)";
      break;
    case ']':
    case '}':
      if (depth > 0)
        --depth;
      break;
    default:
      break;
    }
  }
  return "";
}

llvm::FailureOr<llvm::json::Value> offload::parseBoundedJson(llvm::StringRef text,
                                                       const std::string &name,
                                                       std::string &error) {
  if (std::string e = checkJsonDepth(text); !e.empty()) {
    error = name + " is not accepted: " + e;
    return llvm::failure();
  }
  llvm::Expected<llvm::json::Value> parsed = llvm::json::parse(text);
  if (!parsed) {
    error = name + " is not valid JSON: " + llvm::toString(parsed.takeError());
    return llvm::failure();
  }
  return std::move(*parsed);
}

llvm::FailureOr<llvm::json::Value> offload::readJsonFile(llvm::StringRef path, JsonKind kind,
                                                   std::string &error) {
  std::string limitError;
  uint64_t limit = jsonSizeLimit(kind, limitError);
  if (!limitError.empty()) {
    error = limitError;
    return llvm::failure();
  }
  std::string text;
  if (std::string e = readInputFile(path.str(), jsonKindName(kind), limit,
                                    jsonLimitHint(kind), text);
      !e.empty()) {
    error = e;
    return llvm::failure();
  }
  return parseBoundedJson(text, std::string(jsonKindName(kind)) + " '" + path.str() + "'",
                          error);
}
