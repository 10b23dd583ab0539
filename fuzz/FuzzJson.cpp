//===- FuzzJson.cpp - libFuzzer target: the JSON files the tools read ------===//
//
// Part of offload (issue 34). The first byte picks the kind, the rest is the
// JSON text:
//   0  a target file (parseTargetFile; "base": "host" reads the host target
//      file of OFFLOAD_HOST_TARGET, or fails naming it when it is missing)
//   1  a decisions file, replayed by --offload-plan-memory on a fixed MLP
//      step (its candidates are "relu step.mlir:11", "linear step.mlir:12",
//      then the parameters fc1.weight, fc1.bias, fc2.weight, fc2.bias)
//   2  models/model.json of a .pt2 (fuzz/corpus/pt2/mlp.pt2 with the member
//      replaced, stored), read and imported
//   3  data/weights/model_weights_config.json of the same archive
// Every input must give a result or an error message through the bounded
// reader (BoundedJson.h): never a crash, a hang, or memory its bytes do not
// justify.
//
// With libFuzzer (-DOFFLOAD_FUZZ=ON), LLVMFuzzerCustomMutator mutates the
// structure as well as the bytes: it wraps a value in hundreds of levels of
// nesting, repeats an array's first element thousands of times, swaps a
// value for one of another type and puts extreme numbers in place of
// numbers (INT64_MAX, 2^64, 1e308, -0, 1e-400).
//
//===----------------------------------------------------------------------===//

#include "offload/Dialect/Offload/Analysis/Target.h"
#include "offload/Dialect/Offload/IR/OffloadDialect.h"
#include "offload/Dialect/Offload/Transforms/Passes.h"
#include "offload/Import/Pt2Importer.h"
#include "offload/Support/BoundedJson.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "llvm/Support/SourceMgr.h"

#include <zip.h>
#include <zlib.h>

#include <cctype>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <unistd.h>
#include <utility>
#include <vector>

#ifndef OFFLOAD_SOURCE_DIR
#error "OFFLOAD_SOURCE_DIR must name the source tree (fuzz/CMakeLists.txt)"
#endif

using namespace mlir;

namespace {

/// The MLP step (after --offload-autodiff) the decisions replay on.
const char *kStep = R"mlir(
func.func @forward(%w1: tensor<16x8xf32> {offload.name = "fc1.weight", offload.role = #offload.role<parameter>},
                   %b1: tensor<16xf32> {offload.name = "fc1.bias", offload.role = #offload.role<parameter>},
                   %w2: tensor<4x16xf32> {offload.name = "fc2.weight", offload.role = #offload.role<parameter>},
                   %b2: tensor<4xf32> {offload.name = "fc2.bias", offload.role = #offload.role<parameter>},
                   %x: tensor<32x8xf32> {offload.name = "x", offload.role = #offload.role<input>},
                   %t: tensor<32xi64> {offload.name = "y", offload.role = #offload.role<input>})
    -> (tensor<f32> {offload.name = "loss", offload.role = #offload.role<loss>}) attributes {offload.step} {
  offload.phase forward
  %h = offload.linear %x, %w1, %b1 : tensor<32x8xf32>, tensor<16x8xf32>, tensor<16xf32>
  %r = offload.relu %h : tensor<32x16xf32>
  %z = offload.linear %r, %w2, %b2 : tensor<32x16xf32>, tensor<4x16xf32>, tensor<4xf32>
  %l = offload.cross_entropy %z, %t : tensor<32x4xf32>, tensor<32xi64>
  return %l : tensor<f32>
}
)mlir";

/// A stored (uncompressed) zip of `members`, in order.
std::vector<uint8_t> storedZip(const std::vector<std::pair<std::string, std::string>> &members) {
  std::vector<uint8_t> out, central;
  auto u16 = [](std::vector<uint8_t> &v, uint32_t x) {
    v.push_back(uint8_t(x));
    v.push_back(uint8_t(x >> 8));
  };
  auto u32 = [&](std::vector<uint8_t> &v, uint32_t x) {
    u16(v, x & 0xFFFF);
    u16(v, x >> 16);
  };
  for (const auto &[name, data] : members) {
    uint32_t crc = uint32_t(crc32(0, reinterpret_cast<const Bytef *>(data.data()), uInt(data.size())));
    uint32_t offset = uint32_t(out.size());
    u32(out, 0x04034b50);
    u16(out, 20);
    u16(out, 0);
    u16(out, 0); // stored
    u16(out, 0);
    u16(out, 0);
    u32(out, crc);
    u32(out, uint32_t(data.size()));
    u32(out, uint32_t(data.size()));
    u16(out, uint32_t(name.size()));
    u16(out, 0);
    out.insert(out.end(), name.begin(), name.end());
    out.insert(out.end(), data.begin(), data.end());
    u32(central, 0x02014b50);
    u16(central, 20);
    u16(central, 20);
    u16(central, 0);
    u16(central, 0);
    u16(central, 0);
    u16(central, 0);
    u32(central, crc);
    u32(central, uint32_t(data.size()));
    u32(central, uint32_t(data.size()));
    u16(central, uint32_t(name.size()));
    u16(central, 0);
    u16(central, 0);
    u16(central, 0);
    u16(central, 0);
    u32(central, 0);
    u32(central, offset);
    central.insert(central.end(), name.begin(), name.end());
  }
  uint32_t centralOffset = uint32_t(out.size());
  out.insert(out.end(), central.begin(), central.end());
  u32(out, 0x06054b50);
  u16(out, 0);
  u16(out, 0);
  u16(out, uint32_t(members.size()));
  u16(out, uint32_t(members.size()));
  u32(out, uint32_t(central.size()));
  u32(out, centralOffset);
  u16(out, 0);
  return out;
}

struct Setup {
  DialectRegistry registry;
  /// The members of fuzz/corpus/pt2/mlp.pt2, in order.
  std::vector<std::pair<std::string, std::string>> pt2;
  std::string targetPath, decisionsPath;

  Setup() {
    registry.insert<mlir::offload::OffloadDialect, func::FuncDialect>();
    mlir::offload::registerOffloadPasses();
    std::string pid = std::to_string(::getpid());
    targetPath = "/tmp/offload-fuzzjson-" + pid + "-target.json";
    decisionsPath = "/tmp/offload-fuzzjson-" + pid + "-decisions.json";
    int errc = 0;
    zip_t *z = zip_open(OFFLOAD_SOURCE_DIR "/fuzz/corpus/pt2/mlp.pt2", ZIP_RDONLY, &errc);
    if (!z)
      std::abort();
    for (zip_int64_t i = 0, n = zip_get_num_entries(z, 0); i < n; ++i) {
      zip_stat_t st;
      zip_file_t *f = zip_fopen_index(z, zip_uint64_t(i), 0);
      if (zip_stat_index(z, zip_uint64_t(i), 0, &st) != 0 || !f)
        std::abort();
      std::string data(size_t(st.size), '\0');
      if (zip_fread(f, data.data(), data.size()) != zip_int64_t(data.size()))
        std::abort();
      zip_fclose(f);
      pt2.emplace_back(st.name, std::move(data));
    }
    zip_discard(z);
  }
  ~Setup() {
    std::remove(targetPath.c_str());
    std::remove(decisionsPath.c_str());
  }
};

Setup &setup() {
  static Setup s;
  return s;
}

void writeFile(const std::string &path, const uint8_t *data, size_t size) {
  FILE *f = std::fopen(path.c_str(), "wb");
  if (!f)
    std::abort();
  if (size)
    std::fwrite(data, 1, size, f);
  std::fclose(f);
}

void fuzzTarget(const uint8_t *data, size_t size) {
  std::string error;
  writeFile(setup().targetPath, data, size);
  FailureOr<mlir::offload::TargetSpec> spec = mlir::offload::parseTargetFile(setup().targetPath, error);
  if (failed(spec) && error.empty())
    std::abort();
  if (succeeded(spec) && (spec->workspaceBytes < 0 || spec->workspaceBytes > (int64_t(1) << 48) ||
                          spec->memoryBytes > (int64_t(1) << 48)))
    std::abort();
}

void fuzzDecisions(const uint8_t *data, size_t size) {
  writeFile(setup().decisionsPath, data, size);
  MLIRContext ctx(setup().registry, MLIRContext::Threading::DISABLED);
  ScopedDiagnosticHandler quiet(&ctx, [](Diagnostic &) { return success(); });
  llvm::SourceMgr sm;
  sm.AddNewSourceBuffer(llvm::MemoryBuffer::getMemBuffer(kStep, "step.mlir"), llvm::SMLoc());
  OwningOpRef<ModuleOp> module = parseSourceFile<ModuleOp>(sm, &ctx);
  if (!module)
    std::abort();
  PassManager pm(&ctx);
  std::string pipeline = "builtin.module(offload-autodiff,offload-plan-memory{budget=1GiB "
                         "decisions=" + setup().decisionsPath + "})";
  if (failed(parsePassPipeline(pipeline, pm)))
    std::abort();
  (void)pm.run(*module);
}

void fuzzPt2Member(const uint8_t *data, size_t size, const char *suffix) {
  static MLIRContext *ctx = [] {
    auto *c = new MLIRContext(MLIRContext::Threading::DISABLED);
    c->loadDialect<mlir::offload::OffloadDialect, func::FuncDialect>();
    return c;
  }();
  std::vector<std::pair<std::string, std::string>> members = setup().pt2;
  for (auto &[name, bytes] : members)
    if (llvm::StringRef(name).ends_with(suffix))
      bytes.assign(reinterpret_cast<const char *>(data), size);
  std::vector<uint8_t> zip = storedZip(members);
  using namespace ::offload::import;
  ImportError err;
  Pt2ArchivePtr archive = readPt2Buffer(zip.data(), zip.size(), "fuzz.pt2", err);
  if (!archive) {
    if (err.message.empty())
      std::abort();
    return;
  }
  ImportOptions opts;
  auto module = importPt2(*archive, *ctx, opts, err);
  if (!module && (err.message.empty() || err.exitCode == 2))
    std::abort();
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  // Large enough for the structural mutations, small enough to stay fast.
  if (size < 1 || size > 1024 * 1024)
    return 0;
  switch (data[0] % 4) {
  case 0:
    fuzzTarget(data + 1, size - 1);
    break;
  case 1:
    fuzzDecisions(data + 1, size - 1);
    break;
  case 2:
    fuzzPt2Member(data + 1, size - 1, "models/model.json");
    break;
  default:
    fuzzPt2Member(data + 1, size - 1, "data/weights/model_weights_config.json");
    break;
  }
  return 0;
}

#ifdef OFFLOAD_LIBFUZZER
extern "C" size_t LLVMFuzzerMutate(uint8_t *data, size_t size, size_t maxSize);

namespace {
/// Where values start in `text` (after '[', ',' or ':'), skipping strings.
std::vector<size_t> valueStarts(const std::string &text) {
  std::vector<size_t> starts;
  bool inString = false, escaped = false;
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (inString) {
      escaped = !escaped && c == '\\';
      if (c == '"' && !escaped)
        inString = false;
      continue;
    }
    if (c == '"')
      inString = true;
    else if (c == '[' || c == ',' || c == ':')
      starts.push_back(i + 1);
  }
  return starts;
}

/// The end of the scalar (number, literal or string) at `i`, or `i`.
size_t scalarEnd(const std::string &text, size_t i) {
  while (i < text.size() && text[i] == ' ')
    ++i;
  if (i < text.size() && text[i] == '"') {
    for (size_t j = i + 1; j < text.size(); ++j)
      if (text[j] == '"' && text[j - 1] != '\\')
        return j + 1;
    return i;
  }
  size_t j = i;
  while (j < text.size() && (std::isalnum(static_cast<unsigned char>(text[j])) ||
                             text[j] == '-' || text[j] == '+' || text[j] == '.'))
    ++j;
  return j;
}
} // namespace

extern "C" size_t LLVMFuzzerCustomMutator(uint8_t *data, size_t size, size_t maxSize,
                                          unsigned int seed) {
  std::mt19937 rng(seed);
  if (size < 2 || rng() % 3 == 0)
    return LLVMFuzzerMutate(data, size, maxSize);
  std::string text(reinterpret_cast<char *>(data) + 1, size - 1);
  std::vector<size_t> starts = valueStarts(text);
  if (starts.empty())
    return LLVMFuzzerMutate(data, size, maxSize);
  size_t at = starts[rng() % starts.size()];
  size_t end = scalarEnd(text, at);
  static const char *const kExtreme[] = {"9223372036854775807", "-9223372036854775808",
                                         "18446744073709551616", "1e308", "-1e308", "-0",
                                         "1e-400", "0.5", "-1", "4294967296", "281474976710657"};
  static const char *const kOther[] = {"null", "true", "\"\"", "\"x\"", "[]", "{}", "0",
                                       "{\"as_int\": 1}", "[[[]]]"};
  switch (rng() % 4) {
  case 0: { // deep nesting around the value
    size_t depth = 1 + rng() % 800;
    text.insert(end, std::string(depth, ']'));
    text.insert(at, std::string(depth, '['));
    break;
  }
  case 1: { // a huge array: the value repeated
    if (end == at)
      return LLVMFuzzerMutate(data, size, maxSize);
    std::string item = text.substr(at, end - at) + ",";
    size_t copies = 1 + rng() % 4096;
    std::string many;
    for (size_t k = 0; k < copies && many.size() < maxSize; ++k)
      many += item;
    text.insert(at, "[" + many.substr(0, many.size() - 1) + "]");
    text.erase(at + many.size() + 1, end - at);
    break;
  }
  case 2: // another type
    text.replace(at, end - at, kOther[rng() % (sizeof(kOther) / sizeof(*kOther))]);
    break;
  default: // an extreme number
    text.replace(at, end - at, kExtreme[rng() % (sizeof(kExtreme) / sizeof(*kExtreme))]);
    break;
  }
  if (text.size() + 1 > maxSize)
    return LLVMFuzzerMutate(data, size, maxSize);
  std::memcpy(data + 1, text.data(), text.size());
  return text.size() + 1;
}
#endif
