//===- Target.cpp - Device specs and the per-op cost model ----------------===//
//
// Part of offload. See Target.h. The built-in figures and their sources are
// also tabulated in docs/planner.md.
//
//===----------------------------------------------------------------------===//

#include "offload/Dialect/Offload/Analysis/Target.h"
#include "offload/Dialect/Offload/IR/OffloadOps.h"
#include "offload/Support/BoundedJson.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinOps.h"

#include "llvm/Support/JSON.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>

using namespace mlir;
using namespace mlir::offload;

namespace {
/// Copy bandwidth of pinned memory over PCIe, bytes/s per direction. The
/// brief's measured range for H100 PCIe Gen5 x16 hosts is 35-53 GB/s (64
/// GB/s theoretical); A100, L4 and RTX 4090 sit on PCIe Gen4 x16 (32 GB/s
/// theoretical), where CUDA's bandwidthTest on pinned memory typically
/// reports 24-26 GB/s.
constexpr double kGen5Copy = 45e9;
constexpr double kGen4Copy = 25e9;

/// A built-in target with its dense bf16 and f16 tensor-core rates (fp32
/// accumulation, without sparsity), from the same datasheets.
TargetSpec withLowPrecision(TargetSpec s, double bf16, double f16) {
  s.bf16FlopsPerSecond = bf16;
  s.f16FlopsPerSecond = f16;
  return s;
}

/// A built-in target with its link to the other data-parallel ranks,
/// bytes/s per direction (TargetSpec::collectiveBytesPerSecond).
TargetSpec withLink(TargetSpec s, double collective) {
  s.collectiveBytesPerSecond = collective;
  return s;
}
/// NVLink per direction, from the datasheets' totals over both directions:
/// H100 SXM5 NVLink 4, 900 GB/s; A100 SXM NVLink 3, 600 GB/s.
constexpr double kNvLink4 = 450e9;
constexpr double kNvLink3 = 300e9;

const TargetSpec &builtin(StringRef name, bool &found) {
  static const TargetSpec specs[] = {
      // Dense bf16/f16 tensor core (fp32 accumulate), H100 SXM5 datasheet: 989 TFLOPS dense bf16 and fp16 tensor core (1979 with sparsity)
      withLink(withLowPrecision({"h100-sxm",
       "NVIDIA H100 SXM5 datasheet: 80 GB HBM3 at 3.35 TB/s, 67 TFLOPS fp32; "
       "pinned copies over PCIe Gen5 x16 measured 35-53 GB/s, 45 GB/s taken",
       80000000000, 3.35e12, 66.9e12, kGen5Copy, kGen5Copy},
                       989.4e12, 989.4e12), kNvLink4),
      // Dense bf16/f16 tensor core (fp32 accumulate), H100 PCIe datasheet: 756 TFLOPS dense bf16 and fp16 tensor core (1513 with sparsity)
      withLink(withLowPrecision({"h100-pcie",
       "NVIDIA H100 PCIe datasheet: 80 GB HBM2e at 2.0 TB/s, 51 TFLOPS fp32; "
       "pinned copies over PCIe Gen5 x16 measured 35-53 GB/s, 45 GB/s taken",
       80000000000, 2.0e12, 51.2e12, kGen5Copy, kGen5Copy},
                       756e12, 756e12), kGen5Copy),
      // Dense bf16/f16 tensor core (fp32 accumulate), A100 datasheet: 312 TFLOPS dense bf16 and fp16 tensor core (624 with sparsity)
      withLink(withLowPrecision({"a100-80g",
       "NVIDIA A100 80GB SXM datasheet: 80 GB HBM2e at 2.039 TB/s, 19.5 TFLOPS "
       "fp32; pinned copies over PCIe Gen4 x16 ~25 GB/s (bandwidthTest)",
       80000000000, 2.039e12, 19.5e12, kGen4Copy, kGen4Copy},
                       312e12, 312e12), kNvLink3),
      // Dense bf16/f16 tensor core (fp32 accumulate), A100 datasheet: 312 TFLOPS dense bf16 and fp16 tensor core (624 with sparsity)
      withLink(withLowPrecision({"a100-40g",
       "NVIDIA A100 40GB datasheet: 40 GB HBM2 at 1.555 TB/s, 19.5 TFLOPS "
       "fp32; pinned copies over PCIe Gen4 x16 ~25 GB/s (bandwidthTest)",
       40000000000, 1.555e12, 19.5e12, kGen4Copy, kGen4Copy},
                       312e12, 312e12), kNvLink3),
      // Dense bf16/f16 tensor core (fp32 accumulate), L4 datasheet: 121 TFLOPS dense bf16 and fp16 tensor core (242 with sparsity)
      withLink(withLowPrecision({"l4",
       "NVIDIA L4 datasheet: 24 GB GDDR6 at 300 GB/s, 30.3 TFLOPS fp32; pinned "
       "copies over PCIe Gen4 x16 ~25 GB/s (bandwidthTest)",
       24000000000, 300e9, 30.3e12, kGen4Copy, kGen4Copy},
                       121e12, 121e12), kGen4Copy),
      // Dense bf16/f16 tensor core (fp32 accumulate), Ada whitepaper, RTX 4090: 165.2 TFLOPS dense bf16 and fp16 tensor core with fp32 accumulate (330.3 with fp16 accumulate)
      withLink(withLowPrecision({"rtx-4090",
       "NVIDIA Ada Lovelace whitepaper (GeForce RTX 4090): 24 GB GDDR6X at "
       "1008 GB/s, 82.6 TFLOPS fp32; pinned copies over PCIe Gen4 x16 ~25 GB/s",
       24000000000, 1008e9, 82.6e12, kGen4Copy, kGen4Copy},
                       165.2e12, 165.2e12), kGen4Copy),
  };
  for (const TargetSpec &s : specs)
    if (s.name == name) {
      found = true;
      return s;
    }
  found = false;
  return specs[0];
}
} // namespace

std::vector<std::string> mlir::offload::builtinTargetNames() {
  return {"h100-sxm", "h100-pcie", "a100-80g", "a100-40g", "l4", "rtx-4090"};
}

FailureOr<std::string> mlir::offload::hostTargetPath(std::string &error) {
  auto env = [](const char *name) -> std::string {
    const char *v = std::getenv(name);
    return v ? v : "";
  };
  if (std::string path = env("OFFLOAD_HOST_TARGET"); !path.empty())
    return path;
  // XDG Base Directory: a relative XDG_CACHE_HOME is invalid and ignored.
  llvm::SmallString<256> path;
  if (std::string cache = env("XDG_CACHE_HOME"); !cache.empty() && cache[0] == '/') {
    path = cache;
  } else if (std::string home = env("HOME"); !home.empty()) {
    path = home;
    llvm::sys::path::append(path, ".cache");
  } else {
    error = "target=host: neither OFFLOAD_HOST_TARGET nor HOME (nor XDG_CACHE_HOME) is set, "
            "so there is no host target file to read; calibrate with `offload-run --calibrate "
            "FILE.json` and set OFFLOAD_HOST_TARGET=FILE.json";
    return failure();
  }
  llvm::sys::path::append(path, "offload", "host-target.json");
  return std::string(path.str());
}

/// The host target: the calibrated file at hostTargetPath(), which must be
/// a complete target file (no "base"). Errors name the path and the command
/// that writes it.
static FailureOr<TargetSpec> readHostTarget(std::string &error) {
  FailureOr<std::string> path = hostTargetPath(error);
  if (failed(path))
    return failure();
  std::string remedy = "; measure this machine with `offload-run --calibrate " + *path +
                       "` (target=host reads OFFLOAD_HOST_TARGET, else "
                       "${XDG_CACHE_HOME:-~/.cache}/offload/host-target.json)";
  if (!llvm::sys::fs::exists(*path)) {
    error = "target=host: the host target file '" + *path + "' does not exist" + remedy;
    return failure();
  }
  FailureOr<TargetSpec> spec = parseTargetFile(*path, error, /*allowBase=*/false);
  if (failed(spec)) {
    error = "target=host: " + error + remedy;
    return failure();
  }
  return spec;
}

FailureOr<TargetSpec> mlir::offload::resolveTarget(StringRef target, std::string &error) {
  if (target == "host")
    return readHostTarget(error);
  if (target.ends_with(".json"))
    return parseTargetFile(target, error);
  bool found = false;
  const TargetSpec &spec = builtin(target, found);
  if (found)
    return spec;
  error = "unknown target '" + target.str() + "'; expected one of";
  for (const std::string &n : builtinTargetNames())
    error += " " + n + ",";
  error += " host (this machine, as offload-run --calibrate measured it), or a FILE.json";
  return failure();
}

FailureOr<TargetSpec> mlir::offload::parseTargetFile(StringRef path, std::string &error,
                                                     bool allowBase) {
  // A regular file within OFFLOAD_MAX_TARGET_JSON_BYTES, nested at most
  // 512 deep (BoundedJson.h).
  FailureOr<llvm::json::Value> parsed = ::offload::readJsonFile(path, ::offload::JsonKind::Target,
                                                                error);
  if (failed(parsed))
    return failure();
  const llvm::json::Object *obj = parsed->getAsObject();
  if (!obj) {
    error = "target file '" + path.str() + "': expected a JSON object";
    return failure();
  }
  return parseTargetObject(*obj, "target file '" + path.str() + "'", ("target file " + path).str(),
                           error, allowBase);
}

FailureOr<TargetSpec> mlir::offload::parseTargetObject(const llvm::json::Object &object,
                                                       StringRef origin, StringRef sourceOf,
                                                       std::string &error, bool allowBase) {
  const llvm::json::Object *obj = &object;
  const std::string where = origin.str();
  auto fail = [&](const std::string &msg) -> FailureOr<TargetSpec> {
    error = where + ": " + msg;
    return failure();
  };
  static const char *const known[] = {
      "name", "base", "calibration_threads", "source", "memory_bytes", "memory_bytes_per_second",
      "flops_per_second", "bf16_flops_per_second", "f16_flops_per_second",
      "host_to_device_bytes_per_second", "device_to_host_bytes_per_second",
      "host_update_bytes_per_second", "collective_bytes_per_second", "gemm_efficiency", "conv_efficiency",
      "other_flops_efficiency", "memory_efficiency", "workspace_bytes", "copy_latency_seconds",
      "op_flops_per_second", "op_bytes_per_second", "sized_flops_per_second",
      "sized_bytes_per_second"};
  for (const auto &kv : *obj)
    if (!llvm::is_contained(known, StringRef(kv.first)))
      return fail("unknown key '" + kv.first.str() + "'");

  TargetSpec spec;
  // "base": start from a built-in target or the calibrated host; the other
  // keys then only override what they name.
  const llvm::json::Value *baseValue = obj->get("base");
  std::optional<StringRef> base = baseValue ? baseValue->getAsString() : std::nullopt;
  if (baseValue && !allowBase)
    return fail("the host target file must be complete, without 'base' (it is what "
                "\"base\": \"host\" reads)");
  if (baseValue && !base)
    return fail("'base' must be a string naming a built-in target or 'host'");
  // calibration_threads: the threads the kernels ran with when the host
  // was calibrated. Recorded by offload-run --calibrate; over "base":
  // "host" it is a check that the calibrated file used that many.
  const llvm::json::Value *threadsValue = obj->get("calibration_threads");
  int64_t threads = 0;
  if (threadsValue) {
    std::optional<int64_t> t = threadsValue->getAsInteger();
    if (base && *base != "host")
      return fail("'calibration_threads' needs \"base\": \"host\" (it names the threads the "
                  "host calibration ran the kernels with)");
    if (!t || *t < 1 || *t > 1024)
      return fail("'calibration_threads' must be an integer in [1, 1024]");
    threads = *t;
  }
  if (base) {
    if (*base == "host") {
      FailureOr<TargetSpec> host = readHostTarget(error);
      if (failed(host)) {
        error = where + " (\"base\": \"host\"): " + error;
        return failure();
      }
      if (threads && host->calibrationThreads != threads) {
        std::string hostPath = hostTargetPath(error).value_or("FILE.json");
        return fail("'calibration_threads' is " + std::to_string(threads) +
                    " but the host target file '" + hostPath + "' was calibrated with " +
                    (host->calibrationThreads ? std::to_string(host->calibrationThreads)
                                              : std::string("an unknown number of")) +
                    " thread(s); calibrate it with `offload-run --calibrate " + hostPath +
                    " --threads " + std::to_string(threads) + "`");
      }
      spec = *host;
    } else {
      bool found = false;
      spec = builtin(*base, found);
      if (!found) {
        std::string choices;
        for (const std::string &n : builtinTargetNames())
          choices += " " + n + ",";
        return fail("unknown base target '" + base->str() + "'; expected one of" + choices +
                    " or host");
      }
    }
  } else if (threads) {
    spec.calibrationThreads = int(threads);
  }
  const bool required = !base;
  std::optional<StringRef> name = obj->getString("name");
  if (!name && required)
    return fail("missing string 'name'");
  if (name)
    spec.name = name->str();
  if (std::optional<StringRef> source = obj->getString("source"))
    spec.source = source->str();
  else if (base)
    spec.source = sourceOf.str() + " over " + base->str() + " (" + spec.source + ")";
  else
    spec.source = sourceOf.str();

  // Byte counts are bounded by 2^48, the plan format's bound on a buffer:
  // the planner adds and aligns them, and a value near INT64_MAX would wrap
  // to a negative arena that "fits" any budget.
  constexpr int64_t kMaxBytes = int64_t(1) << 48;
  auto integer = [&](StringRef key, bool required, int64_t minimum,
                     int64_t &out) -> LogicalResult {
    const llvm::json::Value *v = obj->get(key);
    if (!v) {
      if (required)
        error = where + ": missing integer '" + key.str() + "'";
      return required ? failure() : success();
    }
    std::optional<int64_t> i = v->getAsInteger();
    if (!i || *i < minimum || *i > kMaxBytes) {
      error = where + ": '" + key.str() + "' must be an integer in [" +
              std::to_string(minimum) + ", 2^48 = " + std::to_string(kMaxBytes) + "]";
      return failure();
    }
    out = *i;
    return success();
  };
  auto number = [&](StringRef key, bool required, double maximum,
                    double &out) -> LogicalResult {
    const llvm::json::Value *v = obj->get(key);
    if (!v) {
      if (required)
        error = where + ": missing number '" + key.str() + "'";
      return required ? failure() : success();
    }
    std::optional<double> d = v->getAsNumber();
    if (!d || !(*d > 0) || *d > maximum) {
      error = where + ": '" + key.str() + "' must be a number > 0" +
              (maximum < 1e300 ? " and <= 1" : "");
      return failure();
    }
    out = *d;
    return success();
  };
  constexpr double kAny = 1e308;
  // memory_bytes 0: no memory size of its own (the host target); the
  // planner then needs budget=.
  if (failed(integer("memory_bytes", required, 0, spec.memoryBytes)) ||
      failed(number("memory_bytes_per_second", required, kAny, spec.memoryBytesPerSecond)) ||
      failed(number("flops_per_second", required, kAny, spec.flopsPerSecond)) ||
      failed(number("bf16_flops_per_second", false, kAny, spec.bf16FlopsPerSecond)) ||
      failed(number("f16_flops_per_second", false, kAny, spec.f16FlopsPerSecond)) ||
      failed(number("host_to_device_bytes_per_second", required, kAny,
                    spec.hostToDeviceBytesPerSecond)) ||
      failed(number("device_to_host_bytes_per_second", required, kAny,
                    spec.deviceToHostBytesPerSecond)) ||
      failed(number("host_update_bytes_per_second", false, kAny,
                    spec.hostUpdateBytesPerSecond)) ||
      failed(number("collective_bytes_per_second", false, kAny,
                    spec.collectiveBytesPerSecond)) ||
      failed(number("gemm_efficiency", false, 1, spec.gemmEfficiency)) ||
      failed(number("conv_efficiency", false, 1, spec.convEfficiency)) ||
      failed(number("other_flops_efficiency", false, 1, spec.otherFlopsEfficiency)) ||
      failed(number("memory_efficiency", false, 1, spec.memoryEfficiency)) ||
      failed(integer("workspace_bytes", false, 0, spec.workspaceBytes)))
    return failure();

  // The measured figures of a calibrated host (offload-run --calibrate).
  if (const llvm::json::Value *v = obj->get("copy_latency_seconds")) {
    std::optional<double> d = v->getAsNumber();
    if (!d || !(*d >= 0) || *d > 1)
      return fail("'copy_latency_seconds' must be a number in [0, 1]");
    spec.copyLatencySeconds = *d;
  }
  // {"offload.OP": rate > 0, ...}; a key present replaces the base's map.
  auto rates = [&](StringRef key, std::map<std::string, double> &out) -> LogicalResult {
    const llvm::json::Value *v = obj->get(key);
    if (!v)
      return success();
    const llvm::json::Object *m = v->getAsObject();
    if (!m) {
      error = where + ": '" + key.str() +
              "' must be an object of op names to rates";
      return failure();
    }
    out.clear();
    for (const auto &kv : *m) {
      std::optional<double> d = kv.second.getAsNumber();
      if (!d || !(*d > 0) || !std::isfinite(*d)) {
        error = where + ": '" + key.str() + "': the rate of '" +
                kv.first.str() + "' must be a finite number > 0";
        return failure();
      }
      out[kv.first.str()] = *d;
    }
    return success();
  };
  // {"offload.OP": [[size, rate], ...], ...}: sizes ascending, all > 0.
  auto points = [&](StringRef key,
                    std::map<std::string, std::vector<std::pair<double, double>>> &out)
      -> LogicalResult {
    const llvm::json::Value *v = obj->get(key);
    if (!v)
      return success();
    const llvm::json::Object *m = v->getAsObject();
    auto bad = [&](const std::string &what) {
      error = where + ": '" + key.str() + "': " + what;
      return failure();
    };
    if (!m)
      return bad("expected an object of op names to [[size, rate], ...] in ascending size");
    out.clear();
    for (const auto &kv : *m) {
      const llvm::json::Array *arr = kv.second.getAsArray();
      std::string op = kv.first.str();
      if (!arr || arr->empty())
        return bad("'" + op + "' must be a non-empty array of [size, rate] pairs");
      std::vector<std::pair<double, double>> pts;
      for (const llvm::json::Value &p : *arr) {
        const llvm::json::Array *pair = p.getAsArray();
        std::optional<double> size = pair && pair->size() == 2 ? (*pair)[0].getAsNumber()
                                                               : std::nullopt;
        std::optional<double> rate = pair && pair->size() == 2 ? (*pair)[1].getAsNumber()
                                                               : std::nullopt;
        if (!size || !rate || !(*size > 0) || !(*rate > 0) || !std::isfinite(*size) ||
            !std::isfinite(*rate))
          return bad("'" + op + "': every point must be [size, rate], both finite and > 0");
        if (!pts.empty() && !(*size > pts.back().first))
          return bad("'" + op + "': sizes must be in ascending order");
        pts.push_back({*size, *rate});
      }
      out[op] = std::move(pts);
    }
    return success();
  };
  if (failed(rates("op_flops_per_second", spec.opFlopsPerSecond)) ||
      failed(rates("op_bytes_per_second", spec.opBytesPerSecond)) ||
      failed(points("sized_flops_per_second", spec.sizedFlopsPerSecond)) ||
      failed(points("sized_bytes_per_second", spec.sizedBytesPerSecond)))
    return failure();
  return spec;
}

//===----------------------------------------------------------------------===//
// The target as a module attribute
//===----------------------------------------------------------------------===//

Attribute mlir::offload::targetSpecToAttr(MLIRContext *ctx, const TargetSpec &spec) {
  Builder b(ctx);
  NamedAttrList attrs;
  auto f64 = [&](StringRef key, double v) { attrs.append(key, b.getF64FloatAttr(v)); };
  auto i64 = [&](StringRef key, int64_t v) { attrs.append(key, b.getI64IntegerAttr(v)); };
  attrs.append("name", b.getStringAttr(spec.name));
  attrs.append("source", b.getStringAttr(spec.source));
  i64("memory_bytes", spec.memoryBytes);
  f64("memory_bytes_per_second", spec.memoryBytesPerSecond);
  f64("flops_per_second", spec.flopsPerSecond);
  // 0 means "at flops_per_second", which a target file says by leaving
  // the key out.
  if (spec.bf16FlopsPerSecond > 0)
    f64("bf16_flops_per_second", spec.bf16FlopsPerSecond);
  if (spec.f16FlopsPerSecond > 0)
    f64("f16_flops_per_second", spec.f16FlopsPerSecond);
  f64("host_to_device_bytes_per_second", spec.hostToDeviceBytesPerSecond);
  f64("device_to_host_bytes_per_second", spec.deviceToHostBytesPerSecond);
  f64("host_update_bytes_per_second", spec.hostUpdateBytesPerSecond);
  f64("collective_bytes_per_second", spec.collectiveBytesPerSecond);
  f64("gemm_efficiency", spec.gemmEfficiency);
  f64("conv_efficiency", spec.convEfficiency);
  f64("other_flops_efficiency", spec.otherFlopsEfficiency);
  f64("memory_efficiency", spec.memoryEfficiency);
  i64("workspace_bytes", spec.workspaceBytes);
  f64("copy_latency_seconds", spec.copyLatencySeconds);
  if (spec.calibrationThreads > 0)
    i64("calibration_threads", spec.calibrationThreads);
  auto rates = [&](StringRef key, const std::map<std::string, double> &m) {
    if (m.empty())
      return;
    NamedAttrList entries;
    for (const auto &[op, rate] : m)
      entries.append(op, b.getF64FloatAttr(rate));
    attrs.append(key, entries.getDictionary(ctx));
  };
  auto points = [&](StringRef key,
                    const std::map<std::string, std::vector<std::pair<double, double>>> &m) {
    if (m.empty())
      return;
    NamedAttrList entries;
    for (const auto &[op, pts] : m) {
      SmallVector<Attribute> pairs;
      for (auto [size, rate] : pts)
        pairs.push_back(b.getArrayAttr({b.getF64FloatAttr(size), b.getF64FloatAttr(rate)}));
      entries.append(op, b.getArrayAttr(pairs));
    }
    attrs.append(key, entries.getDictionary(ctx));
  };
  rates("op_flops_per_second", spec.opFlopsPerSecond);
  rates("op_bytes_per_second", spec.opBytesPerSecond);
  points("sized_flops_per_second", spec.sizedFlopsPerSecond);
  points("sized_bytes_per_second", spec.sizedBytesPerSecond);
  return attrs.getDictionary(ctx);
}

/// `attr` as JSON (integers, f64 floats, strings, dictionaries, arrays);
/// nullopt for any other attribute.
static std::optional<llvm::json::Value> attrToJson(Attribute attr) {
  if (auto i = dyn_cast<IntegerAttr>(attr))
    return llvm::json::Value(i.getInt());
  if (auto f = dyn_cast<FloatAttr>(attr))
    return llvm::json::Value(f.getValueAsDouble());
  if (auto s = dyn_cast<StringAttr>(attr))
    return llvm::json::Value(s.getValue().str());
  if (auto d = dyn_cast<DictionaryAttr>(attr)) {
    llvm::json::Object o;
    for (NamedAttribute n : d) {
      std::optional<llvm::json::Value> v = attrToJson(n.getValue());
      if (!v)
        return std::nullopt;
      o[n.getName().getValue()] = std::move(*v);
    }
    return llvm::json::Value(std::move(o));
  }
  if (auto a = dyn_cast<ArrayAttr>(attr)) {
    llvm::json::Array arr;
    for (Attribute e : a) {
      std::optional<llvm::json::Value> v = attrToJson(e);
      if (!v)
        return std::nullopt;
      arr.push_back(std::move(*v));
    }
    return llvm::json::Value(std::move(arr));
  }
  return std::nullopt;
}

FailureOr<TargetSpec> mlir::offload::targetSpecFromAttr(Attribute attr, std::string &error) {
  const std::string where = "the module's '" + kTargetAttrName.str() + "' attribute";
  std::optional<llvm::json::Value> json = attrToJson(attr);
  const llvm::json::Object *obj = json ? json->getAsObject() : nullptr;
  if (!obj) {
    error = where + ": expected a dictionary of the target file's keys (docs/planner.md)";
    return failure();
  }
  return parseTargetObject(*obj, where, where, error, /*allowBase=*/false);
}

FailureOr<std::optional<TargetSpec>> mlir::offload::moduleTarget(Operation *op,
                                                                 std::string &error) {
  auto module = isa<ModuleOp>(op) ? cast<ModuleOp>(op) : op->getParentOfType<ModuleOp>();
  Attribute attr = module ? module->getAttr(kTargetAttrName) : Attribute();
  if (!attr)
    return std::optional<TargetSpec>();
  FailureOr<TargetSpec> spec = targetSpecFromAttr(attr, error);
  if (failed(spec))
    return failure();
  return std::optional<TargetSpec>(*spec);
}

//===----------------------------------------------------------------------===//
// Cost model
//===----------------------------------------------------------------------===//

/// The rate at `size` from (size, rate) points in ascending size:
/// interpolated on log(size), clamped to the end points.
static double interpolateRate(const std::vector<std::pair<double, double>> &pts, double size) {
  if (size <= pts.front().first)
    return pts.front().second;
  for (size_t i = 1; i < pts.size(); ++i)
    if (size < pts[i].first) {
      double f = std::log(size / pts[i - 1].first) / std::log(pts[i].first / pts[i - 1].first);
      return pts[i - 1].second + f * (pts[i].second - pts[i - 1].second);
    }
  return pts.back().second;
}

TargetModel TargetModel::fromSpec(const TargetSpec &spec) {
  TargetModel m;
  m.flopsPerSecond = spec.flopsPerSecond;
  m.bf16FlopsPerSecond = spec.bf16FlopsPerSecond;
  m.f16FlopsPerSecond = spec.f16FlopsPerSecond;
  m.memoryBytesPerSecond = spec.memoryBytesPerSecond;
  m.linkBytesPerSecond = spec.hostToDeviceBytesPerSecond;
  m.deviceToHostBytesPerSecond = spec.deviceToHostBytesPerSecond;
  m.hostUpdateBytesPerSecond = spec.hostUpdateBytesPerSecond;
  m.collectiveBytesPerSecond = spec.collectiveBytesPerSecond;
  m.gemmEfficiency = spec.gemmEfficiency;
  m.convEfficiency = spec.convEfficiency;
  m.otherFlopsEfficiency = spec.otherFlopsEfficiency;
  m.memoryEfficiency = spec.memoryEfficiency;
  m.opFlopsPerSecond = spec.opFlopsPerSecond;
  m.opBytesPerSecond = spec.opBytesPerSecond;
  m.sizedFlopsPerSecond = spec.sizedFlopsPerSecond;
  m.sizedBytesPerSecond = spec.sizedBytesPerSecond;
  m.copyLatencySeconds = spec.copyLatencySeconds;
  return m;
}

double TargetModel::opSeconds(Operation *op) const {
  if (auto region = dyn_cast<RecomputeOp>(op)) {
    double t = 0;
    for (Operation &inner : region.getBody().front())
      t += opSeconds(&inner);
    return t;
  }
  auto cost = dyn_cast<CostOpInterface>(op);
  if (!cost || isa<ReshapeOp>(op))
    return 0;
  double flops = double(std::max<int64_t>(cost.getFlops(), 0));
  double bytes = double(std::max<int64_t>(cost.getBytesRead(), 0)) +
                 double(std::max<int64_t>(cost.getBytesWritten(), 0));
  if (isa<SgdUpdateOp, AdamWUpdateOp>(op) &&
      llvm::any_of(op->getOperandTypes(), [](Type t) { return isa<HostType>(t); }))
    return bytes / hostUpdateBytesPerSecond;
  // Ops whose measured rate depends on their size (host target); still a
  // roofline: no faster than their bytes from memory (a thin convolution
  // that reads a 9 MiB weight from memory, not from the cache where the
  // calibration found it).
  double memoryBound = bytes / (memoryBytesPerSecond * memoryEfficiency);
  if (auto it = sizedFlopsPerSecond.find(op->getName().getStringRef().str());
      it != sizedFlopsPerSecond.end() && !it->second.empty())
    if (double size = opSize(op); size > 0)
      return std::max(flops / interpolateRate(it->second, size), memoryBound);
  if (auto it = sizedBytesPerSecond.find(op->getName().getStringRef().str());
      it != sizedBytesPerSecond.end() && !it->second.empty() && bytes > 0)
    return bytes / interpolateRate(it->second, bytes);
  if (!opFlopsPerSecond.empty() || !opBytesPerSecond.empty()) {
    std::string full = op->getName().getStringRef().str();
    if (auto it = opFlopsPerSecond.find(full); it != opFlopsPerSecond.end())
      return std::max(flops / it->second, memoryBound);
    if (auto it = opBytesPerSecond.find(full); it != opBytesPerSecond.end())
      return bytes / it->second;
  }
  StringRef name = op->getName().stripDialect();
  double efficiency = otherFlopsEfficiency;
  if (name.contains("linear") || name.contains("matmul"))
    efficiency = gemmEfficiency;
  else if (name.contains("conv"))
    efficiency = convEfficiency;
  // Matrix products, convolutions and attention on bf16/f16 operands run
  // on tensor cores (fp32 accumulation); every other op, and these on f32,
  // at the fp32 rate.
  double rate = flopsPerSecond;
  if (name.contains("linear") || name.contains("matmul") || name.contains("conv") ||
      name.contains("attention")) {
    Type elt;
    for (Type t : op->getOperandTypes())
      if (auto tt = dyn_cast<RankedTensorType>(t);
          tt && isa<FloatType>(tt.getElementType())) {
        elt = tt.getElementType();
        break;
      }
    if (elt && elt.isBF16() && bf16FlopsPerSecond > 0)
      rate = bf16FlopsPerSecond;
    else if (elt && elt.isF16() && f16FlopsPerSecond > 0)
      rate = f16FlopsPerSecond;
  }
  return std::max(flops / (rate * efficiency),
                  bytes / (memoryBytesPerSecond * memoryEfficiency));
}

double TargetModel::opSize(Operation *op) {
  auto shapeOf = [](Value v) -> ArrayRef<int64_t> {
    auto t = dyn_cast<RankedTensorType>(v.getType());
    return t && t.hasStaticShape() ? t.getShape() : ArrayRef<int64_t>();
  };
  if (auto mm = dyn_cast<MatmulOp>(op)) {
    ArrayRef<int64_t> a = shapeOf(mm->getOperand(0)), b = shapeOf(mm->getOperand(1)),
                      c = shapeOf(mm->getResult(0));
    // One GEMM for the whole batch when b is shared and a not transposed.
    if (a.size() < 2 || b.empty() || c.size() <= 2 || (b.size() <= 2 && !mm.getTransposeA()))
      return -1;
    int64_t k = mm.getTransposeA() ? a[a.size() - 2] : a.back();
    return double(c[c.size() - 2]) * double(c.back()) * double(k);
  }
  StringRef name = op->getName().getStringRef();
  if (name == "offload.conv2d" || name == "offload.conv2d_backward_input" ||
      name == "offload.conv2d_backward_weight") {
    // The forward output: conv2d's result, the backward kernels' dy.
    ArrayRef<int64_t> y =
        name == "offload.conv2d" ? shapeOf(op->getResult(0)) : shapeOf(op->getOperand(0));
    if (y.size() != 4)
      return -1;
    return double(y[0]) * double(y[2]) * double(y[3]);
  }
  return -1;
}
