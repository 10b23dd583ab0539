//===- Runtime.h - offload runtime C++ API ---------------------*- C++ -*-===//
//
// Part of offload. Executes plans emitted by the compiler (Plan.h) on a
// backend ("host" or "cuda"). No MLIR or LLVM dependency. Typical use:
//
//   auto plan = Plan::load("mlp.oflp");           // verified + validated
//   if (!plan) { report(plan.message()); }
//   auto s = Session::create(*plan, "host");       // arenas, kernels checked
//   (*s)->bind("fc1.weight", w);                  // parameters/state/inputs
//   for (...) { if (Status st = (*s)->step(); !st.ok()) ...; }
//   double loss = *(*s)->loss();
//   Tensor g = *(*s)->output("grad:fc1.weight");
//
// Errors are returned (Status / Expected), never thrown. A failed step leaves
// the ParameterStore bit-identical to before it (see docs/runtime.md).
//
//===----------------------------------------------------------------------===//
#ifndef OFFLOAD_RUNTIME_RUNTIME_H
#define OFFLOAD_RUNTIME_RUNTIME_H

#include "offload/Runtime/Plan.h"
#include "offload/Runtime/Status.h"
#include "offload/Runtime/Tensor.h"

#include <array>
#include <map>
#include <set>
#include <memory>
#include <string>
#include <vector>

namespace offload {
namespace rt {

/// Host-side store of parameters, state (e.g. batch-norm running stats) and
/// optimizer state, keyed by binding name. It holds the committed values:
/// a session uploads them at the start of a step and writes the plan's new
/// values back only when the whole step succeeded. Several sessions (plans)
/// may share one store (e.g. per-task heads over a shared trunk).
class ParameterStore {
public:
  void set(const std::string &name, Tensor t) {
    values_[name] = std::move(t);
    versions_[name] = ++counter_;
  }
  /// Replaces the value of `name` by `t` and returns the previous value
  /// (empty when there was none), so that its memory can be reused.
  Tensor exchange(const std::string &name, Tensor t) {
    Tensor old = std::move(values_[name]);
    values_[name] = std::move(t);
    versions_[name] = ++counter_;
    return old;
  }
  /// A number that changes whenever `name` is set (0 when absent). Sessions
  /// use it to skip uploading a value their device arena already holds.
  uint64_t version(const std::string &name) const {
    auto it = versions_.find(name);
    return it == versions_.end() ? 0 : it->second;
  }
  /// nullptr when absent.
  const Tensor *get(const std::string &name) const {
    auto it = values_.find(name);
    return it == values_.end() ? nullptr : &it->second;
  }
  bool has(const std::string &name) const { return values_.count(name) != 0; }
  /// Bytes of every value held (the sum of their byteSize()).
  uint64_t totalBytes() const {
    uint64_t n = 0;
    for (auto &e : values_)
      n += e.second.byteSize();
    return n;
  }
  std::vector<std::string> names() const {
    std::vector<std::string> out;
    for (auto &e : values_)
      out.push_back(e.first);
    return out;
  }

private:
  friend class Session;
  /// The value of `name` for a session's commit to overwrite in place
  /// (nullptr when absent); the session calls touch() afterwards.
  Tensor *mutableValue(const std::string &name) {
    auto it = values_.find(name);
    return it == values_.end() ? nullptr : &it->second;
  }
  /// Marks `name` as changed (a new version).
  void touch(const std::string &name) { versions_[name] = ++counter_; }

  std::map<std::string, Tensor> values_;
  std::map<std::string, uint64_t> versions_;
  uint64_t counter_ = 0;
};

class Communicator;

struct SessionOptions {
  /// Threads kernels may use (host backend).
  int numThreads = 1;
  /// Host backend debug mode: dead and not-yet-arrived device bytes hold a
  /// NaN pattern (all bits set), copies run only when waited for, and a
  /// kernel reading the pattern in a float input fails the step.
  bool poison = false;
  /// Check at creation that the plan's events order every cross-stream
  /// read-after-write, write-after-read and arena reuse (docs/runtime.md).
  bool checkRaces = true;
  /// Device memory available to the session in bytes; 0 = the backend's
  /// own (host: exactly the plan's capacity; cuda: free device memory).
  /// Creation fails when it is smaller than the plan's device arena.
  uint64_t deviceMemoryBytes = 0;
  /// Host backend: after every compute instruction, scan its f32/f64
  /// outputs and fail the step at the first NaN or infinity, naming the
  /// instruction, its op and the buffer (offload-run --check-finite). Costs
  /// one read of every output; off by default.
  bool checkFinite = false;
  /// Profiling (offload-run --profile): the executor waits for every
  /// stream after each instruction and records the wall seconds from its
  /// issue to that wait (Session::instructionSeconds), so each figure is
  /// the instruction alone, launch overhead included, with no overlap
  /// between streams: a profiled step takes longer than an unprofiled one.
  /// Every backend; off by default.
  bool profile = false;
  /// Testing: instruction index at which execution reports an injected
  /// failure, or -1.
  int failAtInstruction = -1;
  /// Host backend: an emulated host<->device link, in bytes per second per
  /// direction (0 = off, copies run at memcpy speed). A copy of N bytes on
  /// a copy stream (or a synchronous one on the compute stream) then takes
  /// at least N / emulatedLinkBytesPerSecond seconds: after its memcpy the
  /// copy thread sleeps until that much time has passed since the copy
  /// started. Each direction (host->device, device->host) has its own copy
  /// thread, so the two directions overlap as on a full-duplex PCIe link.
  /// Creation fails for a negative or non-finite value, and on a backend
  /// other than host.
  double emulatedLinkBytesPerSecond = 0;
  /// CUDA device ordinal.
  int cudaDevice = 0;
  /// Whether a step copies its outputs that are not parameter-store values
  /// (gradients, the loss, other outputs) out of the device arena into
  /// tensors the session holds (true, the default): output() then returns
  /// them until the next successful step, even after a failed one.
  /// false: only the output "loss" is copied; the others stay where the
  /// step left them (the device arena), and output() / readOutput() read
  /// them from there until the next step starts (beginStep, runPhase,
  /// step), after which they are an error. Saves host memory of the size
  /// of those outputs (e.g. every gradient); offload-run uses it and streams
  /// the outputs of the last step to its --dump file with readOutput().
  bool retainOutputs = true;
  /// Data parallel (docs/data_parallel.md): the job's communicator
  /// (Communicator.h), which each offload.all_reduce of the plan averages
  /// its bucket over, and with which creation checks that every rank runs
  /// the same plan. Null: one process, where offload.all_reduce copies its
  /// bucket (the mean over one rank), bit for bit.
  std::shared_ptr<Communicator> communicator;
};

class Executor;

/// One plan bound to one backend. Not thread-safe; one step at a time.
class Session {
public:
  /// Creates a session: allocates the arenas (host: exactly the plan's
  /// capacities), checks that every op has a kernel (one error lists all
  /// missing ones) and, if options.checkRaces, the plan's synchronisation.
  /// `backend` is "host" or "cuda". `store` defaults to a fresh store.
  static Expected<std::unique_ptr<Session>>
  create(std::shared_ptr<const Plan> plan, const std::string &backend,
         const SessionOptions &options = {},
         std::shared_ptr<ParameterStore> store = nullptr);
  ~Session();

  const Plan &plan() const { return *plan_; }
  ParameterStore &store() { return *store_; }
  std::shared_ptr<ParameterStore> sharedStore() { return store_; }

  /// Binds a value to the input binding `name`. Parameters, state and
  /// optimizer state go to the store (a borrowed tensor is copied once: the
  /// store owns its values); inputs stay bound until rebound, a borrowed
  /// one without a copy (Tensor::borrow: each step uploads its bytes as they
  /// are then).
  /// Errors: no such input binding; dtype or shape differ from the buffer.
  /// A plan whose bindings are slices of a tensor (offload-slice-parameters)
  /// is bound with the whole tensor under its own name.
  Status bind(const std::string &name, Tensor value);
  /// Binds zeros of the binding's dtype and shape (optimizer state starts
  /// as zeros, as in torch.optim).
  Status bindZeros(const std::string &name);
  /// The dtype and shape the input binding `name` expects.
  Status inputType(const std::string &name, DType &dtype,
                   std::vector<int64_t> &shape) const;
  /// Names of input bindings (of `role`, or all) that have no value yet.
  std::vector<std::string> missingBindings() const;
  /// Input binding names and roles, in plan order.
  std::vector<std::pair<std::string, BufferRole>> inputBindings() const;

  /// Runs one whole training step: beginStep, every instruction, finishStep.
  Status step();
  /// Starts a step: checks bindings, uploads store values, inputs and
  /// constants.
  Status beginStep();
  /// Runs the instructions up to the end of phase `name` (forward, backward,
  /// backward_input, backward_weight, optimizer) of the current step,
  /// starting one if none is active. Phases run in plan order.
  Status runPhase(const std::string &name);
  /// Runs what remains of the step, reads outputs and commits the new
  /// parameter/state values to the store. On failure nothing is committed.
  Status finishStep();
  /// Abandons the current step; the store is unchanged.
  void abortStep();
  bool stepActive() const { return active_; }

  /// Output binding values of the last successful step ("loss",
  /// "grad:fc1.weight", new "fc1.weight"). New parameters and state are
  /// read from the parameter store they were committed to.
  Expected<Tensor> output(const std::string &name) const;
  std::vector<std::string> outputNames() const;
  /// The dtype and shape of output `name` (the whole tensor's for slices).
  /// Errors: no output binding of that name.
  Status outputType(const std::string &name, DType &dtype,
                    std::vector<int64_t> &shape) const;
  /// Copies bytes [offset, offset + bytes) of output `name` of the last
  /// successful step (row-major data, as output() would hold it) to `dst`,
  /// from wherever the value lives: the session's copy, the parameter store
  /// (new parameters and state), or the device arena (outputs not retained,
  /// SessionOptions::retainOutputs); no tensor is allocated. For streaming
  /// large outputs to a file. Errors: no such output, no successful step,
  /// a range beyond the output's bytes, an output no longer available
  /// (not retained and a step has started since), a backend read error.
  Status readOutput(const std::string &name, uint64_t offset, void *dst,
                    size_t bytes) const;
  /// The tensor holding output `name` of the last successful step (the
  /// session's copy, or the store's tensor of a committed value), nullptr
  /// when there is none (no step, an unknown name, or an output left in the
  /// arena by retainOutputs false). Valid until the next step or bind.
  const Tensor *outputTensor(const std::string &name) const;
  /// The tensor bound to input `name` (role input), nullptr when none.
  const Tensor *input(const std::string &name) const;
  /// Host bytes the session holds in tensors of its own: bound inputs (not
  /// borrowed ones) and
  /// retained outputs (the parameter store is counted by the store, the
  /// arenas by the plan's capacities).
  uint64_t heldTensorBytes() const;
  /// The "loss" output of the last successful step as a double.
  Expected<double> loss() const;

  /// Peak bytes of live device buffers measured by the executor, max over
  /// all steps run so far.
  uint64_t measuredPeakDeviceBytes() const;
  uint64_t plannedPeakDeviceBytes() const {
    return plan_->data().predictedPeakDeviceBytes;
  }
  /// Seconds each stream (compute, h2d, d2h, comm) spent executing instructions in
  /// the last step.
  std::array<double, NumStreams> streamBusySeconds() const;
  /// Seconds of the last step during which a copy stream and the compute
  /// stream were both busy (copies hidden under compute); -1 when the
  /// backend does not measure it.
  double copyComputeOverlapSeconds() const;
  /// Seconds of the last step during which the communication stream (data
  /// parallel's offload.all_reduce) and the compute stream were both busy:
  /// the reduction time hidden under compute. -1 when the backend does not
  /// measure it (host backend: measured).
  double commComputeOverlapSeconds() const;
  /// Wall seconds of the last step (beginStep to finishStep).
  double lastStepSeconds() const { return lastStepSeconds_; }
  /// Wall seconds of the last step spent running the plan's instructions
  /// (Backend::run, every stream drained), without beginStep's uploads of
  /// inputs and store values and finishStep's reads of outputs and commit of
  /// new parameters and state to the store: the part of the step that the
  /// planner's simulated step time describes.
  double lastRunSeconds() const { return lastRunSeconds_; }
  /// With SessionOptions::profile: per instruction of the plan, the wall
  /// seconds it took in the last step that ran it (issue to every stream
  /// drained); 0 for an instruction not run yet. Empty without profiling.
  const std::vector<double> &instructionSeconds() const;
  const char *backendName() const;

private:
  Session() = default;
  Status runTo(int end);
  /// Index of the input binding whose value is bound as `name` (the whole
  /// tensor's name for slices), or -1.
  int findInput(const std::string &name) const;
  /// Bytes of the Out slice bindings of the whole tensor `whole`.
  uint64_t sliceBytesOut(const std::string &whole) const;

  std::shared_ptr<const Plan> plan_;
  std::shared_ptr<ParameterStore> store_;
  std::unique_ptr<Executor> executor_;
  SessionOptions options_;
  std::map<std::string, Tensor> inputs_;
  std::map<std::string, Tensor> outputs_;
  /// Store-role outputs of the last successful step, committed to the store
  /// (output() reads them from there).
  std::set<std::string> committed_;
  /// Input bindings whose buffer already holds the store's value: binding
  /// index -> the store version it holds. Filled when a step commits a value
  /// that the plan updated in place (so the arena has it), cleared when a
  /// step fails. beginStep skips uploading these (parameters stay resident
  /// on the device between steps).
  std::map<int, uint64_t> resident_;
  /// Tensors of the values replaced at the last commit, reused to read the
  /// next step's outputs (no allocation or page faults per step). Only on
  /// backends whose output reads may fail (Backend::outputReadsCannotFail);
  /// the others commit into the store's tensors in place.
  std::map<std::string, Tensor> spare_;
  /// Outputs of the last successful step left in the device arena
  /// (retainOutputs false); cleared when a step starts.
  std::set<std::string> inArena_;
  bool active_ = false;
  /// Whether a step has succeeded (for output()'s messages).
  bool succeeded_ = false;
  int next_ = 0;
  double stepStart_ = 0, lastStepSeconds_ = 0;
  /// Seconds inside Backend::run in the current step, and in the last one.
  double runSeconds_ = 0, lastRunSeconds_ = 0;
};

/// Names of the backends compiled into this library ("host", "cuda").
std::vector<std::string> availableBackends();

/// Every op name ("offload.linear", ...) that `backend` has a kernel for,
/// sorted; the runtime ops that the executors run themselves
/// (offload.to_host, to_device, wait, reshape) are not listed. Needs no
/// device. Errors: unknown backend, or one not compiled into this library.
Expected<std::vector<std::string>> backendOps(const std::string &backend);

/// The ops of `plan` that `backend` cannot run, each once, in first-use
/// order; empty when it can run every instruction. This is the list that
/// Session::create reports as one error. Needs no device (a plan can be
/// checked for the CUDA backend on a machine without a GPU). Errors as
/// backendOps.
Expected<std::vector<std::string>> missingOps(const Plan &plan,
                                              const std::string &backend);

} // namespace rt
} // namespace offload

#endif // OFFLOAD_RUNTIME_RUNTIME_H
