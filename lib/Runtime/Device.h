//===- Device.h - What a backend implements: arenas and streams -*- C++ -*-===//
//
// Part of offload. Internal to lib/Runtime. A Device is the part of a
// backend below the Executor (Executor.h): it owns the two arenas, runs
// copies and kernel launches on its three streams, records and waits for
// events, and synchronises. It knows nothing of live intervals, peaks, fault
// injection or how an instruction's operands become kernel arguments: the
// Executor does those once for every backend and issues each instruction as
// a few stream-ordered commands (after IREE's HAL command buffers: copies,
// dispatches, events and barriers over a queue; docs/runtime.md, "Backends").
//
// Command protocol, per step: beginStep(); then, for each instruction in
// program order, allocated() for the buffers whose live interval starts
// there, then its commands: waitEvent() for each event it waits on, at most
// one copy() or launch(), and recordEvent() if it records one; then
// synchronize(), after the last instruction of a run or after a failure (a
// command's error or the injected one). A Copy or Launch passed to the
// device stays valid and unchanged for the device's lifetime, so that a
// device may keep a pointer to it until synchronize() returns.
//
//===----------------------------------------------------------------------===//
#ifndef OFFLOAD_LIB_RUNTIME_DEVICE_H
#define OFFLOAD_LIB_RUNTIME_DEVICE_H

#include "offload/Runtime/Runtime.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <chrono>
#include <memory>

namespace offload {
namespace rt {

/// Which way a stream-ordered copy moves bytes.
enum class CopyKind : uint8_t {
  HostToDevice, ///< offload.to_device: host arena -> device arena
  DeviceToHost, ///< offload.to_host: device arena -> host arena
  /// offload.reshape whose result does not alias its operand: within one
  /// arena; source and destination may overlap.
  WithinArena,
};

/// One copy instruction, resolved to addresses once at session creation.
struct Copy {
  int instruction = -1; ///< index in the plan
  int stream = ComputeStream;
  CopyKind kind = CopyKind::HostToDevice;
  uint8_t *dst = nullptr;
  const uint8_t *src = nullptr;
  uint64_t bytes = 0; ///< bytes to copy (0: nothing moves)
};

/// One kernel launch, its arguments assembled once at session creation:
/// views into the arenas of the instruction's operands, in op order.
struct Launch {
  int instruction = -1; ///< index in the plan
  int stream = ComputeStream;
  /// The instruction: op name, attributes, operand buffer ids.
  const InstructionDesc *desc = nullptr;
  /// An absent optional input (buffer id -1) is an empty view (data ==
  /// nullptr).
  std::vector<TensorView> inputs, outputs;
};

/// One offload.all_reduce (or ZeRO-1's offload.reduce_scatter /
/// offload.all_gather), its views resolved once at session creation.
struct Collective {
  enum Kind : uint8_t {
    /// inputs[i] is averaged across ranks into outputs[i].
    AllReduce,
    /// inputs: n gradients, then n parameters; outputs: this rank's shard
    /// of the gradients' mean, and of the parameters (shardLayout).
    ReduceScatter,
    /// inputs: this rank's shard; outputs: the parameters, from every
    /// rank's shard.
    AllGather
  } kind = AllReduce;
  int instruction = -1; ///< index in the plan
  int stream = CommStream;
  std::vector<TensorView> inputs, outputs;
  /// "offload.all_reduce of bucket 2 (instruction 57)", for errors.
  std::string what;
};

class Device {
public:
  virtual ~Device() = default;
  /// "host", "cuda": the backend's name.
  virtual const char *name() const = 0;

  // --- Kernels (need no device) ---------------------------------------------
  /// Every op name this device has a kernel for (runtime ops excluded).
  virtual std::vector<std::string> ops() const = 0;
  /// The plan's ops that this device cannot run, each once, in first-use
  /// order; empty when it runs them all. An entry may carry a note in
  /// parentheses ("offload.x (host)": an instruction on host buffers that
  /// needs a host kernel).
  virtual std::vector<std::string> missingOps(const PlanData &plan) const = 0;

  // --- Set-up ---------------------------------------------------------------
  /// Checks the plan's ops have kernels and the device has room for the
  /// plan's device arena (`deviceCapacity` bytes, within
  /// options.deviceMemoryBytes), then allocates both arenas, streams and
  /// one event per plan event. The error says which.
  virtual Status open(std::shared_ptr<const Plan> plan,
                      const SessionOptions &options) = 0;
  /// The first byte of the device or host arena (after open). A buffer's
  /// bytes start `offset` bytes after its arena's base.
  virtual uint8_t *arenaBase(MemorySpace space) const = 0;
  /// Called once per kernel launch after open, in program order, before
  /// any step: a device may pick per-launch resources (CUDA: a convolution
  /// algorithm whose workspace fits). An error fails session creation.
  virtual Status prepare(const Launch &launch) {
    (void)launch;
    return Status::success();
  }

  // --- Transfers outside the plan (synchronous) -----------------------------
  /// Copies `bytes` bytes from host memory `src` to `dst` in the arena of
  /// `space` (Session uploads before a step), and back (downloads after it).
  virtual Status upload(MemorySpace space, uint8_t *dst, const void *src,
                        size_t bytes) = 0;
  virtual Status download(MemorySpace space, void *dst, const uint8_t *src,
                          size_t bytes) = 0;

  // --- Commands of a step, in program order ---------------------------------
  /// Starts a step (before any allocated() of it).
  virtual Status beginStep() = 0;
  /// Buffer `buffer`'s live interval starts at the instruction about to be
  /// issued (or at the step's start). Only a checking device uses it: the
  /// host device's poison mode fills the bytes with the NaN pattern.
  virtual Status allocated(int buffer) {
    (void)buffer;
    return Status::success();
  }
  /// `stream` waits, before its next command, until the command that last
  /// recorded `event` (recordEvent) has completed. `instruction` is the
  /// instruction issuing the wait (error messages).
  virtual Status waitEvent(int stream, int event, int instruction) = 0;
  /// Enqueues `copy` on copy.stream. Like every command, it returns an
  /// error when it fails at once or when an earlier command failed (the
  /// step is then over; the device may drop what follows).
  virtual Status copy(const Copy &copy) = 0;
  /// Enqueues `launch` on launch.stream (a device may run it at once).
  virtual Status launch(const Launch &launch) = 0;
  /// Enqueues `c` on c.stream: the mean across the ranks of
  /// SessionOptions::communicator, or a copy of each input to its output
  /// without one. Default: an error (a backend without collectives).
  virtual Status collective(const Collective &c) {
    return Status::error("the " + std::string(name()) +
                         " backend cannot run " + c.what);
  }
  /// Records `event` on `stream`: it completes when every command enqueued
  /// on `stream` so far has completed.
  virtual Status recordEvent(int stream, int event, int instruction) = 0;
  /// Waits until every command enqueued so far has completed, on every
  /// stream. Returns the first error a command reported after it was
  /// enqueued (a kernel fault found on the device), or success. [first,
  /// last) are the instructions issued since the last synchronize (error
  /// messages; every command since then came from an instruction below
  /// `last`).
  virtual Status synchronize(int first, int last) = 0;

  // --- Measurements and properties ------------------------------------------
  /// Seconds each stream spent executing commands in the current step.
  virtual std::array<double, NumStreams> busySeconds() const = 0;
  /// Seconds of the last step during which a copy stream and the compute
  /// stream were both busy; -1 when the device does not measure it.
  virtual double copyComputeOverlapSeconds() const { return -1; }
  /// The same for the communication stream (collectives hidden under
  /// compute); -1 when the device does not measure it.
  virtual double commComputeOverlapSeconds() const { return -1; }
  /// Whether arenas keep their bytes from one step to the next.
  virtual bool keepsBuffersBetweenSteps() const = 0;
  /// True when download() of a buffer cannot fail (a plain memory copy).
  virtual bool downloadsCannotFail() const { return false; }
  /// A zero-filled host tensor that download() fills at the device's full
  /// rate: the session's commit reads new parameter and optimizer-state
  /// values into such tensors. CUDA: page-locked memory (cudaMallocHost),
  /// which a device-to-host copy reaches at the link's rate instead of
  /// through the driver's staging buffers; an ordinary tensor when page-
  /// locked memory cannot be had. Default: an ordinary tensor.
  virtual Tensor hostTensor(DType dtype, std::vector<int64_t> shape) {
    return Tensor(dtype, std::move(shape));
  }
  /// Whether `t` is a tensor hostTensor() would give (so reusing it keeps
  /// the fast path).
  virtual bool isHostTensor(const Tensor &t) const {
    (void)t;
    return true;
  }
};

/// The host device: arenas in host memory of exactly the plan's
/// capacities, compute on the calling thread, one thread per copy stream.
std::unique_ptr<Device> createHostDevice();
/// The CUDA device; nullptr when the library was built without CUDA.
std::unique_ptr<Device> createCudaDevice();

/// ZeRO-1's shard layout: the elements [begin, begin + count) of the
/// concatenation of `parts` (all of one dtype) copied to `dst`, zeros past
/// its end (the padding to a multiple of the world size).
inline void gatherRange(const std::vector<TensorView> &parts, int64_t begin, int64_t count,
                        void *dst) {
  size_t es = parts.empty() ? 0 : dtypeSize(parts[0].dtype);
  auto *out = static_cast<uint8_t *>(dst);
  int64_t off = 0;
  for (const TensorView &p : parts) {
    int64_t n = p.numel();
    int64_t lo = std::max(begin, off), hi = std::min(begin + count, off + n);
    if (lo < hi) {
      std::memcpy(out + size_t(lo - begin) * es,
                  static_cast<const uint8_t *>(p.data) + size_t(lo - off) * es,
                  size_t(hi - lo) * es);
    }
    off += n;
  }
  if (off < begin + count) {
    int64_t from = std::max(off, begin);
    std::memset(out + size_t(from - begin) * es, 0, size_t(begin + count - from) * es);
  }
}

/// The inverse: `src` holds elements [begin, begin + count) of the
/// concatenation of `parts`; those inside the parts are written there (the
/// padding is dropped).
inline void scatterRange(const void *src, int64_t begin, int64_t count,
                         const std::vector<TensorView> &parts) {
  size_t es = parts.empty() ? 0 : dtypeSize(parts[0].dtype);
  const auto *in = static_cast<const uint8_t *>(src);
  int64_t off = 0;
  for (const TensorView &p : parts) {
    int64_t n = p.numel();
    int64_t lo = std::max(begin, off), hi = std::min(begin + count, off + n);
    if (lo < hi)
      std::memcpy(static_cast<uint8_t *>(p.data) + size_t(lo - off) * es,
                  in + size_t(lo - begin) * es, size_t(hi - lo) * es);
    off += n;
  }
}

/// "instruction 5 (offload.linear)": how every runtime message names an
/// instruction.
inline std::string instructionName(const PlanData &plan, int i) {
  return "instruction " + std::to_string(i) + " (" +
         plan.instructions[size_t(i)].op + ")";
}

/// True for the ops that the executor issues as commands itself (copies,
/// wait, reshape): they need no kernel.
inline bool isRuntimeOp(const std::string &op) {
  return op == kOpToHost || op == kOpToDevice || op == kOpWait ||
         op == kOpReshape || op == kOpAllReduce || op == kOpReduceScatter ||
         op == kOpAllGather;
}

/// The first bf16/f16 element type among the buffers instruction `in`
/// reads or writes, or F32 when it has none (a backend's check that its
/// kernel takes them: missingOps).
inline DType lowFloatOf(const PlanData &plan, const InstructionDesc &in) {
  for (const auto *ids : {&in.inputs, &in.outputs})
    for (int id : *ids)
      if (id >= 0 && isLowFloat(plan.buffers[size_t(id)].dtype))
        return plan.buffers[size_t(id)].dtype;
  return DType::F32;
}

/// Seconds on the monotonic clock (std::chrono::steady_clock): the one
/// clock of the runtime's timings (step, run, busy and profile seconds).
inline double steadySeconds() {
  return std::chrono::duration<double>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

/// "a, b, c".
inline std::string joinNames(const std::vector<std::string> &names) {
  std::string out;
  for (const std::string &n : names)
    out += (out.empty() ? "" : ", ") + n;
  return out;
}

} // namespace rt
} // namespace offload

#endif
