//===- Backend.h - Interface between Session and a backend ------*- C++ -*-===//
//
// Part of offload. Internal to lib/Runtime. A backend owns the arenas and
// executes instruction ranges of a validated plan; the Session does bindings,
// uploads/downloads and the commit of a step.
//
//===----------------------------------------------------------------------===//
#ifndef OFFLOAD_LIB_RUNTIME_BACKEND_H
#define OFFLOAD_LIB_RUNTIME_BACKEND_H

#include "offload/Runtime/Runtime.h"

#include <array>
#include <memory>

namespace offload {
namespace rt {

class Backend {
public:
  virtual ~Backend() = default;
  virtual const char *name() const = 0;
  /// Allocates the arenas and checks the plan's ops have kernels.
  virtual Status init(std::shared_ptr<const Plan> plan,
                      const SessionOptions &options) = 0;
  /// Every op name this backend has a kernel for (runtime ops excluded).
  /// Needs no device.
  virtual std::vector<std::string> ops() const = 0;
  /// The plan's ops that this backend cannot run, each once, in first-use
  /// order; empty when it runs them all. Needs no device. An entry may carry
  /// a note in parentheses ("offload.x (host)": an instruction on host
  /// buffers that needs a host kernel).
  virtual std::vector<std::string> missingOps(const PlanData &plan) const = 0;
  /// Starts a step: every buffer live at instruction 0 is allocated.
  virtual Status beginStep() = 0;
  /// Copies `bytes` host bytes into / out of buffer `id` (live).
  virtual Status write(int id, const void *src, size_t bytes) = 0;
  virtual Status read(int id, void *dst, size_t bytes) = 0;
  /// Copies `bytes` bytes at `offset` into buffer `id`, which is bound as
  /// an output, to `dst`: after a step ended successfully (endStep), until
  /// the next beginStep, the output buffers still hold that step's values.
  virtual Status readAfterStep(int id, uint64_t offset, void *dst,
                               size_t bytes) = 0;
  /// True when read() of a buffer bound as an output, at the end of a step
  /// that ran to completion, cannot fail once read(id, nullptr, 0) succeeded
  /// for it (a plain memory copy): the session then commits new parameter
  /// values into the store's tensors in place instead of into spare tensors
  /// (one copy of the store instead of two).
  virtual bool outputReadsCannotFail() const { return false; }
  /// Executes instructions [first, last) and waits for every stream.
  virtual Status run(int first, int last) = 0;
  /// Ends the step (success or not): frees every buffer.
  virtual void endStep() = 0;
  /// Max over steps of live device bytes, as allocated by the executor.
  virtual uint64_t peakDeviceBytes() const = 0;
  virtual std::array<double, NumStreams> busySeconds() const = 0;
  /// Seconds of the last step during which a copy stream and the compute
  /// stream were both busy; -1 when the backend does not measure it.
  virtual double copyComputeOverlapSeconds() const { return -1; }
  /// Whether buffers keep their bytes from the end of one step to the start
  /// of the next (then a session need not upload values the arena holds).
  virtual bool keepsBuffersBetweenSteps() const { return false; }
};

/// The kernel's view of buffer `id` whose bytes start at `data`; an empty
/// view (data == nullptr) for an absent optional operand (id -1).
inline TensorView bufferView(const PlanData &plan, int id, void *data) {
  TensorView v;
  if (id < 0)
    return v;
  const BufferDesc &b = plan.buffers[size_t(id)];
  v.data = data;
  v.dtype = b.dtype;
  v.shape = b.shape;
  return v;
}

std::unique_ptr<Backend> createHostBackend();
/// nullptr when the library was built without CUDA.
std::unique_ptr<Backend> createCudaBackend();

/// True for the ops that the executors run themselves (copies, wait,
/// reshape): they need no kernel.
inline bool isRuntimeOp(const std::string &op) {
  return op == kOpToHost || op == kOpToDevice || op == kOpWait ||
         op == kOpReshape;
}

/// "a, b, c".
inline std::string joinNames(const std::vector<std::string> &names) {
  std::string out;
  for (const std::string &n : names)
    out += (out.empty() ? "" : ", ") + n;
  return out;
}

/// Statically checks that the plan's stream order and events make every
/// cross-stream hazard ordered (docs/runtime.md, "Synchronisation").
Status checkPlanRaces(const PlanData &plan);

/// Per-instruction: buffers whose live interval starts / ends there.
struct LiveSchedule {
  std::vector<std::vector<int>> allocAt, freeAfter;
  /// For each instruction and each waited event, the recorder instruction.
  std::vector<std::vector<int>> waitFor;
  static LiveSchedule build(const PlanData &plan);
};

} // namespace rt
} // namespace offload

#endif
