//===- Calibration.cpp - Measure this machine as the planner's host target ===//
//
// Part of offload. See include/offload/Runtime/Calibration.h. Moved here from
// the compiler (lib/Dialect/Offload/Analysis/Target.cpp), which measured the
// host at every `target=host` and so linked the kernels (issue 31).
//
//===----------------------------------------------------------------------===//

#include "offload/Runtime/Calibration.h"
#include "offload/Runtime/Kernel.h"
#include "Device.h" // steadySeconds

#include <algorithm>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <thread>

#include <pthread.h>

#ifdef __linux__
#include <sys/prctl.h>
#endif

using namespace offload::rt;

namespace {
/// Best time of `reps` runs of `fn` (the least disturbed by other load).
template <typename Fn> double bestOf(int reps, Fn fn) {
  double best = 1e30;
  for (int r = 0; r < reps; ++r) {
    double t0 = steadySeconds();
    fn();
    best = std::min(best, steadySeconds() - t0);
  }
  return best;
}

/// One tensor of a calibration call: its shape and dtype (f32 tensors hold
/// 0.5; integer tensors 0, a valid class index; bool masks false).
struct CalTensor {
  std::vector<int64_t> shape;
  DType dtype = DType::F32;
  CalTensor(std::vector<int64_t> s) : shape(std::move(s)) {}
  CalTensor(std::vector<int64_t> s, DType d) : shape(std::move(s)), dtype(d) {}
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
                     const AttrMap &attrs, int threads, double *bytes = nullptr,
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
                   const AttrMap &attrs, double flops, int threads) {
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
      notified = steadySeconds();
      cv.notify_all();
    }
  };
  bool started = runBeside(peer, [&] {
    for (int i = 0; i < kRounds; ++i) {
      std::unique_lock<std::mutex> lk(mu);
      cv.wait(lk, [&] { return ready; });
      lag.push_back(steadySeconds() - notified);
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

AttrValue ints(std::vector<int64_t> v) {
  AttrValue a;
  a.ints = std::move(v);
  return a;
}
} // namespace

HostCalibration offload::rt::calibrateHost(int threads) {
  HostCalibration cal;
  if (threads < 1)
    threads = int(std::max(1u, std::thread::hardware_concurrency()));
  cal.threads = threads;
  // Memory: a 64 MiB copy, read + written.
  constexpr size_t kBytes = 64u << 20;
  std::vector<char> a(kBytes, 1), b(kBytes, 0);
  double copy = bestOf(3, [&] { std::memcpy(b.data(), a.data(), kBytes); });
  double copyRate = copy > 0 ? double(kBytes) / copy : 1e10;
  cal.copyBytesPerSecond = copyRate;
  cal.memoryBytesPerSecond = 2 * copyRate;
  // Host backend copies are memcpys on the copy threads (the target file's
  // host_to_device and device_to_host rates).
  cal.hostUpdateBytesPerSecond = 2 * copyRate;
  // GEMM: a [256 x 512] x [512 x 512]^T linear.
  AttrMap none;
  double gemm = kernelFlops("offload.linear", {{{256, 512}}, {{512, 512}}, {{256, 512}}}, none,
                            2.0 * 256 * 512 * 512, threads);
  // Convolution: 3x3, 64 -> 64 channels, 16x16, batch 8, padding 1.
  AttrMap convAttrs;
  AttrValue one, pad;
  one.ints = {1, 1};
  pad.ints = {1, 1};
  convAttrs.set("stride", one);
  convAttrs.set("padding", pad);
  convAttrs.set("dilation", one);
  double conv = kernelFlops("offload.conv2d", {{{8, 64, 16, 16}}, {{64, 64, 3, 3}}, {{8, 64, 16, 16}}},
                            convAttrs, 2.0 * 8 * 64 * 16 * 16 * 64 * 9, threads);
  // The peak is the GEMM rate; efficiencies are measured relative to it.
  cal.flopsPerSecond = gemm > 0 ? gemm : 1e10;
  cal.convFlopsPerSecond = conv;
  cal.gemmEfficiency = 1;
  cal.convEfficiency = conv > 0 ? std::min(1.0, conv / cal.flopsPerSecond) : 0.5;
  cal.otherFlopsEfficiency = 0.1;
  cal.memoryEfficiency = 1;

  // Kernels whose rate differs most from the roofline above (issue 13,
  // bench/planner/sim_vs_measured.py): batched matmul with small matrices
  // (attention), the convolution's backward kernels, and the memory-bound
  // ops, whose loops reach a fraction of memcpy's bandwidth.
  // Batched matmul run as one BLAS call per product (attention's scores and
  // context): small products reach a different rate than large ones.
  auto sized = [&](const char *op, double size, double rate) {
    if (rate > 0)
      cal.sizedFlopsPerSecond[op].push_back({size, rate});
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
                     const AttrMap &attrs, size_t numOutputs = 1) {
    double bytes = 0;
    double t = kernelSeconds(op, tensors, attrs, threads, &bytes, numOutputs);
    double r = t > 0 ? bytes / t : 0;
    if (r > 0)
      cal.opBytesPerSecond[op] = r;
    return r;
  };

  // Sizes of the example models' activations: 256 KiB to 1 MiB (the
  // tensors of a step stay in the last-level cache, as here).
  constexpr int64_t kN = 1 << 18;
  const std::vector<int64_t> rows = {4096, 64};
  double add = bytesOf("offload.add", {{{kN}}, {{kN}}, {{kN}}}, none);
  bytesOf("offload.relu", {{{kN}}, {{kN}}}, none);
  bytesOf("offload.gelu", {{{kN}}, {{kN}}}, none);
  bytesOf("offload.gelu_backward", {{{kN}}, {{kN}}, {{kN}}}, none);
  bytesOf("offload.div", {{{kN}}, {{}}, {{kN}}}, none);
  AttrMap fill;
  AttrValue minusInf;
  minusInf.kind = AttrValue::Kind::Floats;
  minusInf.floats = {-1e9};
  fill.set("value", minusInf);
  bytesOf("offload.masked_fill", {{{64, 64, 64}}, {{64, 64}, DType::Bool}, {{64, 64, 64}}}, fill);
  AttrMap perm;
  perm.set("perm", ints({0, 2, 1}));
  bytesOf("offload.transpose", {{{64, 64, 64}}, {{64, 64, 64}}}, perm);
  AttrMap slice;
  slice.set("dim", ints({1}));
  slice.set("start", ints({1024}));
  slice.set("end", ints({2048}));
  bytesOf("offload.slice", {{{256, 3072}}, {{256, 1024}}}, slice);
  bytesOf("offload.slice_backward", {{{256, 1024}}, {{256, 3072}}}, slice);
  AttrMap lastDim;
  lastDim.set("dim", ints({-1}));
  bytesOf("offload.softmax", {{rows}, {rows}}, lastDim);
  // Cross-entropy over a vocabulary: logits [N, V], class indices [N].
  const std::vector<int64_t> logits = {128, 2048};
  bytesOf("offload.cross_entropy", {{logits}, {{128}, DType::I64}, {{}}}, none);
  bytesOf("offload.cross_entropy_backward", {{{}}, {logits}, {{128}, DType::I64}, {logits}},
          none);
  AttrMap ln;
  ln.set("normalized_ndim", ints({1}));
  AttrValue eps;
  eps.kind = AttrValue::Kind::Floats;
  eps.floats = {1e-5};
  ln.set("eps", eps);
  bytesOf("offload.layer_norm", {{rows}, {{64}}, {{64}}, {rows}, {{4096}}, {{4096}}}, ln, 3);
  bytesOf("offload.layer_norm_backward",
          {{rows}, {rows}, {{64}}, {{4096}}, {{4096}}, {rows}, {{64}}, {{64}}}, ln, 3);
  // The SGD update (momentum), on the device and for parameters on the host
  // (the host backend's "host" memory is this machine's too).
  AttrMap sgd;
  AttrValue lr, momentum;
  lr.kind = momentum.kind = AttrValue::Kind::Floats;
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
      cal.sizedBytesPerSecond["offload.sgd_update"].push_back({bytes, bytes / t});
    sgdLarge = t > 0 ? bytes / t : sgdLarge;
  }
  if (sgdLarge > 0)
    cal.hostUpdateBytesPerSecond = sgdLarge;
  // Other memory-bound ops: at the elementwise add's rate.
  if (add > 0)
    cal.memoryEfficiency = std::min(1.0, add / cal.memoryBytesPerSecond);

  // Every copy: the copy thread is woken, the emulated link's sleep ends
  // late by the timer's overshoot, and the thread waiting for it is woken.
  double handoff = handoffSeconds(), overshoot = sleepOvershootSeconds();
  cal.copyLatencySeconds = 2 * handoff + overshoot;
  cal.handoffSeconds = handoff;
  cal.sleepOvershootSeconds = overshoot;
  return cal;
}

std::string offload::rt::hostCpuName() {
  std::string name;
  if (FILE *f = std::fopen("/proc/cpuinfo", "r")) {
    char line[512];
    while (std::fgets(line, sizeof(line), f)) {
      if (std::strncmp(line, "model name", 10) != 0)
        continue;
      const char *colon = std::strchr(line, ':');
      if (!colon)
        continue;
      name = colon + 1;
      break;
    }
    std::fclose(f);
  }
  auto space = [](char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; };
  while (!name.empty() && space(name.back()))
    name.pop_back();
  size_t start = 0;
  while (start < name.size() && space(name[start]))
    ++start;
  name = name.substr(start);
  return name.empty() ? "unknown CPU" : name;
}

namespace {
/// `s` as a JSON string literal.
std::string quote(const std::string &s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += char(c);
    } else if (c < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\u%04x", c);
      out += buf;
    } else {
      out += char(c);
    }
  }
  return out + "\"";
}

/// `v` as a JSON number that reads back as the same double: the shortest
/// of 15, 16 and 17 significant digits that does.
std::string number(double v) {
  char buf[32];
  for (int digits = 15; digits <= 17; ++digits) {
    std::snprintf(buf, sizeof(buf), "%.*g", digits, v);
    if (std::strtod(buf, nullptr) == v)
      break;
  }
  return buf;
}

std::string rateMap(const std::map<std::string, double> &m) {
  std::string out = "{";
  const char *sep = "";
  for (const auto &[op, rate] : m) {
    out += sep + std::string("\n    ") + quote(op) + ": " + number(rate);
    sep = ",";
  }
  return out + (m.empty() ? "}" : "\n  }");
}

std::string pointMap(const std::map<std::string, std::vector<std::pair<double, double>>> &m) {
  std::string out = "{";
  const char *sep = "";
  for (const auto &[op, points] : m) {
    out += sep + std::string("\n    ") + quote(op) + ": [";
    for (size_t i = 0; i < points.size(); ++i)
      out += (i ? ", [" : "[") + number(points[i].first) + ", " + number(points[i].second) + "]";
    out += "]";
    sep = ",";
  }
  return out + (m.empty() ? "}" : "\n  }");
}
} // namespace

std::string offload::rt::hostTargetFileJson(const HostCalibration &cal,
                                            const std::string &source) {
  std::string summary = ": GEMM " + std::to_string(int64_t(cal.flopsPerSecond / 1e9)) +
                        " GFLOP/s, conv " +
                        std::to_string(int64_t(cal.convFlopsPerSecond / 1e9)) +
                        " GFLOP/s, copy " +
                        std::to_string(int64_t(cal.copyBytesPerSecond / 1e9)) +
                        " GB/s, copy latency " +
                        std::to_string(int64_t(cal.copyLatencySeconds * 1e9)) + " ns (hand-off " +
                        std::to_string(int64_t(cal.handoffSeconds * 1e9)) +
                        " ns, sleep overshoot " +
                        std::to_string(int64_t(cal.sleepOvershootSeconds * 1e9)) + " ns)";
  std::string j = "{\n";
  auto field = [&](const char *key, const std::string &value, bool last = false) {
    j += std::string("  \"") + key + "\": " + value + (last ? "\n" : ",\n");
  };
  field("name", quote("host"));
  field("source", quote(source + summary));
  field("calibration_threads", std::to_string(cal.threads));
  // The host backend's "device" is this machine's memory: no size of its
  // own (the planner then needs budget=).
  field("memory_bytes", "0");
  field("memory_bytes_per_second", number(cal.memoryBytesPerSecond));
  field("flops_per_second", number(cal.flopsPerSecond));
  // Host backend copies are memcpys on its copy threads.
  field("host_to_device_bytes_per_second", number(cal.copyBytesPerSecond));
  field("device_to_host_bytes_per_second", number(cal.copyBytesPerSecond));
  field("host_update_bytes_per_second", number(cal.hostUpdateBytesPerSecond));
  field("gemm_efficiency", number(cal.gemmEfficiency));
  field("conv_efficiency", number(cal.convEfficiency));
  field("other_flops_efficiency", number(cal.otherFlopsEfficiency));
  field("memory_efficiency", number(cal.memoryEfficiency));
  field("copy_latency_seconds", number(cal.copyLatencySeconds));
  field("op_flops_per_second", rateMap(cal.opFlopsPerSecond));
  field("op_bytes_per_second", rateMap(cal.opBytesPerSecond));
  field("sized_flops_per_second", pointMap(cal.sizedFlopsPerSecond));
  field("sized_bytes_per_second", pointMap(cal.sizedBytesPerSecond), /*last=*/true);
  return j + "}\n";
}
