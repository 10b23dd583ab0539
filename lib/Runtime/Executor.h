//===- Executor.h - Runs a plan over a Device -------------------*- C++ -*-===//
//
// Part of offload. Internal to lib/Runtime. The one executor of every
// backend, between the Session (bindings, uploads, the commit) and a Device
// (Device.h: arenas, streams, copies, launches, events). At session
// creation it resolves each instruction once into the command it issues (a
// Copy with its addresses and byte count, or a Launch with its kernel
// arguments); each step it walks the instructions in program order,
// allocating and freeing buffers as their live intervals begin and end,
// counting live device bytes and their peak, injecting the test failure
// (SessionOptions::failAtInstruction) and issuing each instruction's waits,
// copy or launch, and event to the device.
//
//===----------------------------------------------------------------------===//
#ifndef OFFLOAD_LIB_RUNTIME_EXECUTOR_H
#define OFFLOAD_LIB_RUNTIME_EXECUTOR_H

#include "Device.h"

namespace offload {
namespace rt {

/// Per instruction: the buffers whose live interval starts / ends there.
struct LiveSchedule {
  std::vector<std::vector<int>> allocAt, freeAfter;
  static LiveSchedule build(const PlanData &plan);
};

/// Statically checks that the plan's stream order and events make every
/// cross-stream hazard ordered (docs/runtime.md, "Synchronisation").
Status checkPlanRaces(const PlanData &plan);

class Executor {
public:
  explicit Executor(std::unique_ptr<Device> device);
  const char *name() const { return device_->name(); }
  Device &device() { return *device_; }

  /// Opens the device for `plan` (arenas, streams, kernels), then records
  /// each instruction's command and lets the device prepare each launch.
  Status init(std::shared_ptr<const Plan> plan, const SessionOptions &options);

  /// Starts a step: every buffer live at instruction 0 is allocated.
  Status beginStep();
  /// Copies `bytes` host bytes into buffer `id`, which must be live at the
  /// start of the step.
  Status write(int id, const void *src, size_t bytes);
  /// Copies `bytes` bytes of buffer `id`, live now, to `dst`. read(id,
  /// nullptr, 0) only checks that it is live.
  Status read(int id, void *dst, size_t bytes);
  /// Copies `bytes` bytes at `offset` of buffer `id`, bound as an output,
  /// to `dst`: after a step ended successfully (endStep), until the next
  /// beginStep, the output buffers still hold that step's values.
  Status readAfterStep(int id, uint64_t offset, void *dst, size_t bytes);
  /// True when read() of a buffer bound as an output, at the end of a step
  /// that ran to completion, cannot fail once read(id, nullptr, 0)
  /// succeeded for it: the session then commits new parameter values into
  /// the store's tensors in place (one copy of the store instead of two).
  bool outputReadsCannotFail() const {
    return device_->downloadsCannotFail();
  }
  /// Device::hostTensor / isHostTensor: where the commit reads new values.
  Tensor hostTensor(DType dtype, std::vector<int64_t> shape) {
    return device_->hostTensor(dtype, std::move(shape));
  }
  bool isHostTensor(const Tensor &t) const {
    return device_->isHostTensor(t);
  }
  /// Issues instructions [first, last) and waits for every stream. The
  /// first error wins: an injected failure or a command's error stops the
  /// issue; otherwise what the device reports when synchronising.
  Status run(int first, int last);
  /// Ends the step (success or not): no buffer is live any more.
  void endStep();

  /// Max over steps of live device bytes (non-alias device buffers whose
  /// live interval holds the instruction being issued), in bytes.
  uint64_t peakDeviceBytes() const { return peak_; }
  /// Live device bytes now (in program order), in bytes.
  uint64_t liveDeviceBytes() const { return cur_; }
  std::array<double, NumStreams> busySeconds() const {
    return device_->busySeconds();
  }
  double copyComputeOverlapSeconds() const {
    return device_->copyComputeOverlapSeconds();
  }
  double commComputeOverlapSeconds() const {
    return device_->commComputeOverlapSeconds();
  }
  /// Whether buffers keep their bytes from the end of one step to the start
  /// of the next (then a session need not upload values the arena holds).
  bool keepsBuffersBetweenSteps() const {
    return device_->keepsBuffersBetweenSteps();
  }
  /// SessionOptions::profile: per instruction, the wall seconds from its
  /// issue to every stream drained, in the last run that issued it.
  const std::vector<double> &instructionSeconds() const { return seconds_; }

private:
  /// What one instruction issues besides its waits and event.
  struct Work {
    enum Kind : uint8_t { None, CopyBytes, LaunchKernel, Reduce } kind = None;
    Copy copy;
    Launch launch;
    Collective collective;
  };
  uint8_t *address(int id) const;
  Status recordWork();
  Status allocate(const std::vector<int> &ids);
  void release(const std::vector<int> &ids);
  /// Issues instruction i's waits, copy or launch, and event.
  Status issue(int i);

  std::unique_ptr<Device> device_;
  std::shared_ptr<const Plan> plan_;
  SessionOptions opts_;
  LiveSchedule sched_;
  std::vector<Work> work_;
  /// Per buffer: bound as an output (stays live after its interval ends).
  std::vector<uint8_t> boundOut_;
  /// Per buffer: allocated and not yet freed, in program order.
  std::vector<uint8_t> live_;
  uint64_t cur_ = 0, peak_ = 0;
  std::vector<double> seconds_;
};

} // namespace rt
} // namespace offload

#endif
