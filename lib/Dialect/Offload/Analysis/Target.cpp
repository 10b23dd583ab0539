//===- Target.cpp - Device specs and the per-op cost model ----------------===//
//
// Part of offload. See Target.h. The built-in figures and their sources are
// also tabulated in docs/planner.md.
//
//===----------------------------------------------------------------------===//

#include "offload/Dialect/Offload/Analysis/Target.h"
#include "offload/Dialect/Offload/IR/OffloadOps.h"
#include "offload/Runtime/Kernel.h"
#include "offload/Support/BoundedJson.h"

#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <mutex>
#include <cstring>
#include <thread>

#include <pthread.h>

#ifdef __linux__
#include <sys/prctl.h>
#endif

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

const TargetSpec &builtin(StringRef name, bool &found) {
  static const TargetSpec specs[] = {
      {"h100-sxm",
       "NVIDIA H100 SXM5 datasheet: 80 GB HBM3 at 3.35 TB/s, 67 TFLOPS fp32; "
       "pinned copies over PCIe Gen5 x16 measured 35-53 GB/s, 45 GB/s taken",
       80000000000, 3.35e12, 66.9e12, kGen5Copy, kGen5Copy},
      {"h100-pcie",
       "NVIDIA H100 PCIe datasheet: 80 GB HBM2e at 2.0 TB/s, 51 TFLOPS fp32; "
       "pinned copies over PCIe Gen5 x16 measured 35-53 GB/s, 45 GB/s taken",
       80000000000, 2.0e12, 51.2e12, kGen5Copy, kGen5Copy},
      {"a100-80g",
       "NVIDIA A100 80GB SXM datasheet: 80 GB HBM2e at 2.039 TB/s, 19.5 TFLOPS "
       "fp32; pinned copies over PCIe Gen4 x16 ~25 GB/s (bandwidthTest)",
       80000000000, 2.039e12, 19.5e12, kGen4Copy, kGen4Copy},
      {"a100-40g",
       "NVIDIA A100 40GB datasheet: 40 GB HBM2 at 1.555 TB/s, 19.5 TFLOPS "
       "fp32; pinned copies over PCIe Gen4 x16 ~25 GB/s (bandwidthTest)",
       40000000000, 1.555e12, 19.5e12, kGen4Copy, kGen4Copy},
      {"l4",
       "NVIDIA L4 datasheet: 24 GB GDDR6 at 300 GB/s, 30.3 TFLOPS fp32; pinned "
       "copies over PCIe Gen4 x16 ~25 GB/s (bandwidthTest)",
       24000000000, 300e9, 30.3e12, kGen4Copy, kGen4Copy},
      {"rtx-4090",
       "NVIDIA Ada Lovelace whitepaper (GeForce RTX 4090): 24 GB GDDR6X at "
       "1008 GB/s, 82.6 TFLOPS fp32; pinned copies over PCIe Gen4 x16 ~25 GB/s",
       24000000000, 1008e9, 82.6e12, kGen4Copy, kGen4Copy},
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

FailureOr<TargetSpec> mlir::offload::resolveTarget(StringRef target, std::string &error) {
  if (target == "host")
    return calibrateHostTarget();
  if (target.ends_with(".json"))
    return parseTargetFile(target, error);
  bool found = false;
  const TargetSpec &spec = builtin(target, found);
  if (found)
    return spec;
  error = "unknown target '" + target.str() + "'; expected one of";
  for (const std::string &n : builtinTargetNames())
    error += " " + n + ",";
  error += " host (this machine, measured), or a FILE.json";
  return failure();
}

FailureOr<TargetSpec> mlir::offload::parseTargetFile(StringRef path, std::string &error) {
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
  auto fail = [&](const std::string &msg) -> FailureOr<TargetSpec> {
    error = "target file '" + path.str() + "': " + msg;
    return failure();
  };
  static const char *const known[] = {
      "name", "base", "calibration_threads", "source", "memory_bytes", "memory_bytes_per_second", "flops_per_second",
      "host_to_device_bytes_per_second", "device_to_host_bytes_per_second",
      "host_update_bytes_per_second", "gemm_efficiency", "conv_efficiency",
      "other_flops_efficiency", "memory_efficiency", "workspace_bytes"};
  for (const auto &kv : *obj)
    if (!llvm::is_contained(known, StringRef(kv.first)))
      return fail("unknown key '" + kv.first.str() + "'");

  TargetSpec spec;
  // "base": start from a built-in target or the calibrated host; the other
  // keys then only override what they name.
  const llvm::json::Value *baseValue = obj->get("base");
  std::optional<StringRef> base = baseValue ? baseValue->getAsString() : std::nullopt;
  if (baseValue && !base)
    return fail("'base' must be a string naming a built-in target or 'host'");
  const llvm::json::Value *threadsValue = obj->get("calibration_threads");
  int64_t threads = 0;
  if (threadsValue) {
    std::optional<int64_t> t = threadsValue->getAsInteger();
    if (!base || *base != "host")
      return fail("'calibration_threads' needs \"base\": \"host\" (it sets the threads the "
                  "host calibration runs the kernels with)");
    if (!t || *t < 1 || *t > 1024)
      return fail("'calibration_threads' must be an integer in [1, 1024]");
    threads = *t;
  }
  if (base) {
    if (*base == "host") {
      spec = calibrateHostTarget(int(threads));
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
    spec.source = "target file " + path.str() + " over " + base->str() + " (" + spec.source + ")";
  else
    spec.source = ("target file " + path).str();

  // Byte counts are bounded by 2^48, the plan format's bound on a buffer:
  // the planner adds and aligns them, and a value near INT64_MAX would wrap
  // to a negative arena that "fits" any budget.
  constexpr int64_t kMaxBytes = int64_t(1) << 48;
  auto integer = [&](StringRef key, bool required, int64_t minimum,
                     int64_t &out) -> LogicalResult {
    const llvm::json::Value *v = obj->get(key);
    if (!v) {
      if (required)
        error = "target file '" + path.str() + "': missing integer '" + key.str() + "'";
      return required ? failure() : success();
    }
    std::optional<int64_t> i = v->getAsInteger();
    if (!i || *i < minimum || *i > kMaxBytes) {
      error = "target file '" + path.str() + "': '" + key.str() + "' must be an integer in [" +
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
        error = "target file '" + path.str() + "': missing number '" + key.str() + "'";
      return required ? failure() : success();
    }
    std::optional<double> d = v->getAsNumber();
    if (!d || !(*d > 0) || *d > maximum) {
      error = "target file '" + path.str() + "': '" + key.str() + "' must be a number > 0" +
              (maximum < 1e300 ? " and <= 1" : "");
      return failure();
    }
    out = *d;
    return success();
  };
  constexpr double kAny = 1e308;
  if (failed(integer("memory_bytes", required, 1, spec.memoryBytes)) ||
      failed(number("memory_bytes_per_second", required, kAny, spec.memoryBytesPerSecond)) ||
      failed(number("flops_per_second", required, kAny, spec.flopsPerSecond)) ||
      failed(number("host_to_device_bytes_per_second", required, kAny,
                    spec.hostToDeviceBytesPerSecond)) ||
      failed(number("device_to_host_bytes_per_second", required, kAny,
                    spec.deviceToHostBytesPerSecond)) ||
      failed(number("host_update_bytes_per_second", false, kAny,
                    spec.hostUpdateBytesPerSecond)) ||
      failed(number("gemm_efficiency", false, 1, spec.gemmEfficiency)) ||
      failed(number("conv_efficiency", false, 1, spec.convEfficiency)) ||
      failed(number("other_flops_efficiency", false, 1, spec.otherFlopsEfficiency)) ||
      failed(number("memory_efficiency", false, 1, spec.memoryEfficiency)) ||
      failed(integer("workspace_bytes", false, 0, spec.workspaceBytes)))
    return failure();
  return spec;
}

//===----------------------------------------------------------------------===//
// Calibration of the host target
//===----------------------------------------------------------------------===//

namespace {
double seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

/// Best time of `reps` runs of `fn` (the least disturbed by other load).
template <typename Fn> double bestOf(int reps, Fn fn) {
  double best = 1e30;
  for (int r = 0; r < reps; ++r) {
    double t0 = seconds();
    fn();
    best = std::min(best, seconds() - t0);
  }
  return best;
}

/// One tensor of a calibration call: its shape and dtype (f32 tensors hold
/// 0.5; integer tensors 0, a valid class index; bool masks false).
struct CalTensor {
  std::vector<int64_t> shape;
  ::offload::rt::DType dtype = ::offload::rt::DType::F32;
  CalTensor(std::vector<int64_t> s) : shape(std::move(s)) {}
  CalTensor(std::vector<int64_t> s, ::offload::rt::DType d) : shape(std::move(s)), dtype(d) {}
};

/// Best seconds of a call of the host backend's kernel `op` on `tensors`
/// (the inputs, then `numOutputs` outputs); 0 if the kernel is missing or
/// refuses the call. `bytes` receives the bytes of all the tensors (inputs
/// plus outputs, as CostOpInterface counts them).
///
/// The calls cycle through copies of the tensors that together span at
/// least 64 MiB (twice this machine's 32 MiB last-level cache), so that a
/// call finds its operands where a step's kernel does: in memory, written
/// long before, not in the cache from the previous call. With an 8 MiB span
/// (in the LLC) resnet18's simulated step (a 135 MB arena) came out 25-30%
/// short of the measured one (bench/planner/sim_vs_measured.py).
double kernelSeconds(const char *op, const std::vector<CalTensor> &tensors,
                     const ::offload::rt::AttrMap &attrs, int threads, double *bytes = nullptr,
                     size_t numOutputs = 1) {
  using namespace ::offload::rt;
  registerAllHostKernels();
  Kernel fn = KernelRegistry::host().lookup(op);
  if (!fn || tensors.size() < numOutputs)
    return 0;
  double total = 0;
  for (const CalTensor &t : tensors) {
    TensorView v;
    v.shape = t.shape;
    v.dtype = t.dtype;
    total += double(v.bytes());
  }
  if (bytes)
    *bytes = total;
  constexpr double kSpanBytes = 64.0 * (1 << 20);
  size_t copies = size_t(std::clamp(std::ceil(kSpanBytes / std::max(total, 1.0)), 1.0, 64.0));
  std::vector<std::vector<uint8_t>> storage;
  std::vector<KernelArgs> calls;
  std::vector<std::vector<TensorView>> ins(copies), outs(copies);
  storage.reserve(copies * tensors.size());
  for (size_t c = 0; c < copies; ++c)
    for (size_t i = 0; i < tensors.size(); ++i) {
      TensorView v;
      v.shape = tensors[i].shape;
      v.dtype = tensors[i].dtype;
      storage.emplace_back(v.bytes(), 0);
      if (v.dtype == DType::F32)
        std::fill_n(reinterpret_cast<float *>(storage.back().data()), size_t(v.numel()), 0.5f);
      v.data = storage.back().data();
      (i + numOutputs < tensors.size() ? ins[c] : outs[c]).push_back(v);
    }
  for (size_t c = 0; c < copies; ++c) {
    calls.push_back(KernelArgs{ins[c], outs[c], attrs, threads});
    if (!fn(calls.back()).empty())
      return 0;
  }
  // The fastest single call (over three passes when there are few copies):
  // other load on the machine can only lengthen a call.
  double best = 1e30;
  for (int pass = 0; pass < (copies >= 3 ? 1 : 3); ++pass)
    for (const KernelArgs &a : calls)
      best = std::min(best, bestOf(1, [&] { (void)fn(a); }));
  return best;
}

/// FLOP/s of `op` doing `flops` FLOPs a call (see kernelSeconds); 0 if it
/// fails.
double kernelFlops(const char *op, const std::vector<CalTensor> &tensors,
                   const ::offload::rt::AttrMap &attrs, double flops, int threads) {
  double t = kernelSeconds(op, tensors, attrs, threads);
  return t > 0 ? flops / t : 0;
}

/// Runs `fn` on a new thread and joins it after `alongside` ran on this one;
/// false (and neither runs) when the thread cannot be started (a memory or
/// thread limit: std::thread would throw, which this library, built without
/// exceptions, cannot catch).
template <typename Peer, typename Here> bool runBeside(Peer &peer, Here &&alongside) {
  pthread_t t;
  auto trampoline = [](void *arg) -> void * {
    (*static_cast<Peer *>(arg))();
    return nullptr;
  };
  if (pthread_create(&t, nullptr, trampoline, &peer) != 0)
    return false;
  alongside();
  pthread_join(t, nullptr);
  return true;
}

/// What the hand-off and the sleep overshoot are taken to be when no thread
/// can be started to measure them (typical of a 2-vCPU VM).
constexpr double kUnmeasuredHandoffSeconds = 20e-6;
constexpr double kUnmeasuredOvershootSeconds = 60e-6;

/// Median seconds from one thread's notify to the wake-up of another that
/// has been blocked on the condition variable for ~100 us (as the host
/// backend's idle copy thread is when a copy is queued, and the compute
/// thread is while it waits for a copy), over 50 hand-offs. A blocked
/// thread's CPU may have gone idle, so this is much longer than a hot
/// ping-pong (4 us against 15-30 us on a 2-vCPU VM).
double handoffSeconds() {
  std::mutex mu;
  std::condition_variable cv;
  bool ready = false;
  double notified = 0;
  constexpr int kRounds = 50;
  std::vector<double> lag;
  // The peer hands off only after the previous hand-off was taken: on a
  // loaded machine the waiting thread can miss 100 us, and two hand-offs
  // merged into one left it waiting for a 51st that never came (offload-opt
  // hung in calibration under a load of 7 on 2 cores).
  auto peer = [&] {
    for (int i = 0; i < kRounds; ++i) {
      std::this_thread::sleep_for(std::chrono::microseconds(100));
      std::unique_lock<std::mutex> lk(mu);
      cv.wait(lk, [&] { return !ready; });
      ready = true;
      notified = seconds();
      cv.notify_all();
    }
  };
  bool started = runBeside(peer, [&] {
    for (int i = 0; i < kRounds; ++i) {
      std::unique_lock<std::mutex> lk(mu);
      cv.wait(lk, [&] { return ready; });
      lag.push_back(seconds() - notified);
      ready = false;
      cv.notify_all();
    }
  });
  if (!started)
    return kUnmeasuredHandoffSeconds;
  std::nth_element(lag.begin(), lag.begin() + kRounds / 2, lag.end());
  return std::max(0.0, lag[kRounds / 2]);
}

/// Median seconds by which a 20 us sleep_until overshoots, on a thread with
/// the host backend's copy-thread timer slack (1 ns, Linux).
double sleepOvershootSeconds() {
  std::vector<double> over;
  over.reserve(50);
  auto measure = [&] {
#ifdef __linux__
    (void)prctl(PR_SET_TIMERSLACK, 1UL, 0UL, 0UL, 0UL);
#endif
    for (int i = 0; i < 50; ++i) {
      auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(20);
      std::this_thread::sleep_until(until);
      over.push_back(
          std::chrono::duration<double>(std::chrono::steady_clock::now() - until).count());
    }
  };
  if (!runBeside(measure, [] {}))
    return kUnmeasuredOvershootSeconds;
  std::nth_element(over.begin(), over.begin() + 25, over.end());
  return std::max(0.0, over[25]);
}

::offload::rt::AttrValue ints(std::vector<int64_t> v) {
  ::offload::rt::AttrValue a;
  a.ints = std::move(v);
  return a;
}
} // namespace

TargetSpec mlir::offload::calibrateHostTarget(int threads) {
  TargetSpec spec;
  spec.name = "host";
  if (threads < 1)
    threads = int(std::max(1u, std::thread::hardware_concurrency()));
  // Memory: a 64 MiB copy, read + written.
  constexpr size_t kBytes = 64u << 20;
  std::vector<char> a(kBytes, 1), b(kBytes, 0);
  double copy = bestOf(3, [&] { std::memcpy(b.data(), a.data(), kBytes); });
  double copyRate = copy > 0 ? double(kBytes) / copy : 1e10;
  spec.memoryBytesPerSecond = 2 * copyRate;
  // Host backend copies are memcpys on the copy threads.
  spec.hostToDeviceBytesPerSecond = spec.deviceToHostBytesPerSecond = copyRate;
  spec.hostUpdateBytesPerSecond = 2 * copyRate;
  // GEMM: a [256 x 512] x [512 x 512]^T linear.
  ::offload::rt::AttrMap none;
  double gemm = kernelFlops("offload.linear", {{{256, 512}}, {{512, 512}}, {{256, 512}}}, none,
                            2.0 * 256 * 512 * 512, threads);
  // Convolution: 3x3, 64 -> 64 channels, 16x16, batch 8, padding 1.
  ::offload::rt::AttrMap convAttrs;
  ::offload::rt::AttrValue one, pad;
  one.ints = {1, 1};
  pad.ints = {1, 1};
  convAttrs.set("stride", one);
  convAttrs.set("padding", pad);
  convAttrs.set("dilation", one);
  double conv = kernelFlops("offload.conv2d", {{{8, 64, 16, 16}}, {{64, 64, 3, 3}}, {{8, 64, 16, 16}}},
                            convAttrs, 2.0 * 8 * 64 * 16 * 16 * 64 * 9, threads);
  // The peak is the GEMM rate; efficiencies are measured relative to it.
  spec.flopsPerSecond = gemm > 0 ? gemm : 1e10;
  spec.gemmEfficiency = 1;
  spec.convEfficiency = conv > 0 ? std::min(1.0, conv / spec.flopsPerSecond) : 0.5;
  spec.otherFlopsEfficiency = 0.1;
  spec.memoryEfficiency = 1;

  // Kernels whose rate differs most from the roofline above (issue 13,
  // bench/planner/sim_vs_measured.py): batched matmul with small matrices
  // (attention), the convolution's backward kernels, and the memory-bound
  // ops, whose loops reach a fraction of memcpy's bandwidth.
  // Batched matmul run as one BLAS call per product (attention's scores and
  // context): small products reach a different rate than large ones.
  auto sized = [&](const char *op, double size, double rate) {
    if (rate > 0)
      spec.sizedFlopsPerSecond[op].push_back({size, rate});
  };
  for (int64_t d : {16, 128}) {
    int64_t batch = d == 16 ? 256 : 8;
    sized("offload.matmul", double(d * d * d),
          kernelFlops("offload.matmul", {{{batch, d, d}}, {{batch, d, d}}, {{batch, d, d}}}, none,
                      2.0 * double(batch * d * d * d), threads));
  }
  // Convolutions, 3x3 with padding 1, forward and both backward kernels, at
  // many output pixels (batch 8 of 16x16, 64 channels) and at few (batch 4
  // of 2x2, 256 channels: resnet18's late layers on small images), where the
  // im2col GEMMs are thin.
  struct ConvShape {
    int64_t n, c, hw;
  };
  for (ConvShape g : {ConvShape{4, 256, 2}, ConvShape{8, 64, 16}}) {
    std::vector<int64_t> x = {g.n, g.c, g.hw, g.hw}, w = {g.c, g.c, 3, 3};
    double flops = 2.0 * double(g.n * g.hw * g.hw) * double(g.c * g.c * 9);
    double pixels = double(g.n * g.hw * g.hw);
    sized("offload.conv2d", pixels,
          kernelFlops("offload.conv2d", {{x}, {w}, {x}}, convAttrs, flops, threads));
    sized("offload.conv2d_backward_input", pixels,
          kernelFlops("offload.conv2d_backward_input", {{x}, {w}, {x}}, convAttrs, flops, threads));
    sized("offload.conv2d_backward_weight", pixels,
          kernelFlops("offload.conv2d_backward_weight", {{x}, {x}, {w}}, convAttrs, flops,
                      threads));
  }
  // (Sizes are measured in ascending order; an op whose other size failed
  // keeps one point, used at every size.)
  auto bytesOf = [&](const char *op, const std::vector<CalTensor> &tensors,
                     const ::offload::rt::AttrMap &attrs, size_t numOutputs = 1) {
    double bytes = 0;
    double t = kernelSeconds(op, tensors, attrs, threads, &bytes, numOutputs);
    double r = t > 0 ? bytes / t : 0;
    if (r > 0)
      spec.opBytesPerSecond[op] = r;
    return r;
  };
  using ::offload::rt::DType;
  // Sizes of the example models' activations: 256 KiB to 1 MiB (the
  // tensors of a step stay in the last-level cache, as here).
  constexpr int64_t kN = 1 << 18;
  const std::vector<int64_t> rows = {4096, 64};
  double add = bytesOf("offload.add", {{{kN}}, {{kN}}, {{kN}}}, none);
  bytesOf("offload.relu", {{{kN}}, {{kN}}}, none);
  bytesOf("offload.gelu", {{{kN}}, {{kN}}}, none);
  bytesOf("offload.gelu_backward", {{{kN}}, {{kN}}, {{kN}}}, none);
  bytesOf("offload.div", {{{kN}}, {{}}, {{kN}}}, none);
  ::offload::rt::AttrMap fill;
  ::offload::rt::AttrValue minusInf;
  minusInf.kind = ::offload::rt::AttrValue::Kind::Floats;
  minusInf.floats = {-1e9};
  fill.set("value", minusInf);
  bytesOf("offload.masked_fill", {{{64, 64, 64}}, {{64, 64}, DType::Bool}, {{64, 64, 64}}}, fill);
  ::offload::rt::AttrMap perm;
  perm.set("perm", ints({0, 2, 1}));
  bytesOf("offload.transpose", {{{64, 64, 64}}, {{64, 64, 64}}}, perm);
  ::offload::rt::AttrMap slice;
  slice.set("dim", ints({1}));
  slice.set("start", ints({1024}));
  slice.set("end", ints({2048}));
  bytesOf("offload.slice", {{{256, 3072}}, {{256, 1024}}}, slice);
  bytesOf("offload.slice_backward", {{{256, 1024}}, {{256, 3072}}}, slice);
  ::offload::rt::AttrMap lastDim;
  lastDim.set("dim", ints({-1}));
  bytesOf("offload.softmax", {{rows}, {rows}}, lastDim);
  // Cross-entropy over a vocabulary: logits [N, V], class indices [N].
  const std::vector<int64_t> logits = {128, 2048};
  bytesOf("offload.cross_entropy", {{logits}, {{128}, DType::I64}, {{}}}, none);
  bytesOf("offload.cross_entropy_backward", {{{}}, {logits}, {{128}, DType::I64}, {logits}},
          none);
  ::offload::rt::AttrMap ln;
  ln.set("normalized_ndim", ints({1}));
  ::offload::rt::AttrValue eps;
  eps.kind = ::offload::rt::AttrValue::Kind::Floats;
  eps.floats = {1e-5};
  ln.set("eps", eps);
  bytesOf("offload.layer_norm", {{rows}, {{64}}, {{64}}, {rows}, {{4096}}, {{4096}}}, ln, 3);
  bytesOf("offload.layer_norm_backward",
          {{rows}, {rows}, {{64}}, {{4096}}, {{4096}}, {rows}, {{64}}, {{64}}}, ln, 3);
  // The SGD update (momentum), on the device and for parameters on the host
  // (the host backend's "host" memory is this machine's too).
  ::offload::rt::AttrMap sgd;
  ::offload::rt::AttrValue lr, momentum;
  lr.kind = momentum.kind = ::offload::rt::AttrValue::Kind::Floats;
  lr.floats = {0.1};
  momentum.floats = {0.9};
  sgd.set("lr", lr);
  sgd.set("momentum", momentum);
  // At 1 MiB and 16 MiB per tensor: in the last-level cache and from memory
  // (resnet18's large layers).
  double sgdLarge = 0;
  for (int64_t n : {kN, 16 * kN}) {
    double bytes = 0;
    double t = kernelSeconds("offload.sgd_update",
                             {{{n}}, {{n}}, {{n}}, {{}, DType::I64}, {{n}}, {{n}}, {{}, DType::I64}},
                             sgd, threads, &bytes, 3);
    if (t > 0)
      spec.sizedBytesPerSecond["offload.sgd_update"].push_back({bytes, bytes / t});
    sgdLarge = t > 0 ? bytes / t : sgdLarge;
  }
  if (sgdLarge > 0)
    spec.hostUpdateBytesPerSecond = sgdLarge;
  // Other memory-bound ops: at the elementwise add's rate.
  if (add > 0)
    spec.memoryEfficiency = std::min(1.0, add / spec.memoryBytesPerSecond);

  std::string measured;
  for (const auto &[op, r] : spec.opFlopsPerSecond)
    measured += ", " + StringRef(op).drop_front(8).str() + " " +
                std::to_string(int64_t(r / 1e9)) + " GFLOP/s";
  for (const auto &[op, r] : spec.opBytesPerSecond)
    measured += ", " + StringRef(op).drop_front(8).str() + " " +
                std::to_string(int64_t(r / 1e6)) + " MB/s";
  for (const auto &[op, pts] : spec.sizedBytesPerSecond)
    for (const auto &[size, r] : pts)
      measured += ", " + StringRef(op).drop_front(8).str() + " at " +
                  std::to_string(int64_t(size)) + " bytes " + std::to_string(int64_t(r / 1e6)) +
                  " MB/s";
  for (const auto &[op, pts] : spec.sizedFlopsPerSecond)
    for (const auto &[size, r] : pts)
      measured += ", " + StringRef(op).drop_front(8).str() + " at size " +
                  std::to_string(int64_t(size)) + " " + std::to_string(int64_t(r / 1e9)) +
                  " GFLOP/s";
  // Every copy: the copy thread is woken, the emulated link's sleep ends
  // late by the timer's overshoot, and the thread waiting for it is woken.
  double handoff = handoffSeconds(), overshoot = sleepOvershootSeconds();
  spec.copyLatencySeconds = 2 * handoff + overshoot;
  measured += ", copy latency " + std::to_string(int64_t(spec.copyLatencySeconds * 1e9)) +
              " ns (hand-off " + std::to_string(int64_t(handoff * 1e9)) + " ns, sleep overshoot " +
              std::to_string(int64_t(overshoot * 1e9)) + " ns)";
  spec.source = "measured on this machine with " + std::to_string(threads) +
                " threads: GEMM " + std::to_string(int64_t(gemm / 1e9)) + " GFLOP/s, conv " +
                std::to_string(int64_t(conv / 1e9)) + " GFLOP/s, copy " +
                std::to_string(int64_t(copyRate / 1e9)) + " GB/s" + measured;
  return spec;
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
  m.memoryBytesPerSecond = spec.memoryBytesPerSecond;
  m.linkBytesPerSecond = spec.hostToDeviceBytesPerSecond;
  m.deviceToHostBytesPerSecond = spec.deviceToHostBytesPerSecond;
  m.hostUpdateBytesPerSecond = spec.hostUpdateBytesPerSecond;
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
  return std::max(flops / (flopsPerSecond * efficiency),
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
