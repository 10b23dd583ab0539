//===- HostDevice.cpp - Host backend enforcing the device capacity --------===//
//
// Part of offload. The host backend's Device (Device.h). The device arena is
// one allocation of exactly the plan's capacity, so a plan whose buffers do
// not fit cannot run. Commands of the compute stream run on the calling
// thread as they are issued; each copy stream has its own worker thread
// that runs its queue in order. An event wait blocks until the instruction
// that recorded the event has no command left on its stream. Poison mode
// fills dead bytes with all-ones (a NaN for f32/f64), defers every copy
// stream's commands until something waits for them, and fails a kernel
// whose float input holds the pattern: a missing wait becomes a failure.
//
//===----------------------------------------------------------------------===//

#include "Device.h"

#include "offload/Runtime/Communicator.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <system_error>
#include <thread>

#ifdef __linux__
#include <sys/prctl.h>
#endif

using namespace offload::rt;

namespace {

/// A command of one stream: a wait for an instruction, a copy or a launch
/// (the last two owned by the executor).
struct Command {
  enum Kind : uint8_t { Wait, CopyBytes, LaunchKernel, Reduce } kind = Wait;
  int instruction = -1; ///< the instruction that issued it
  int waitFor = -1;     ///< Wait: the instruction that recorded the event
  const Copy *copy = nullptr;
  const Launch *launch = nullptr;
  const Collective *collective = nullptr;
};

class HostDevice final : public Device {
public:
  ~HostDevice() override;
  const char *name() const override { return "host"; }
  std::vector<std::string> ops() const override {
    registerAllHostKernels();
    return KernelRegistry::host().names();
  }
  std::vector<std::string> missingOps(const PlanData &d) const override {
    registerAllHostKernels();
    std::vector<std::string> missing;
    for (const InstructionDesc &in : d.instructions) {
      if (isRuntimeOp(in.op))
        continue;
      Kernel k = KernelRegistry::host().lookup(in.op);
      std::string name = in.op;
      if (k) {
        // A kernel without bf16/f16 support given such a buffer: missing
        // as "offload.x (bf16)", never upcast.
        DType low = lowFloatOf(d, in);
        if (!isLowFloat(low) || k.lowFloat() != LowFloat::Rejected)
          continue;
        name += std::string(" (") + dtypeName(low) + ")";
      }
      if (std::find(missing.begin(), missing.end(), name) == missing.end())
        missing.push_back(name);
    }
    return missing;
  }
  Status open(std::shared_ptr<const Plan> plan,
              const SessionOptions &options) override;
  uint8_t *arenaBase(MemorySpace space) const override {
    return space == MemorySpace::Device ? device_.get() : host_.get();
  }
  Status upload(MemorySpace, uint8_t *dst, const void *src,
                size_t bytes) override {
    std::memcpy(dst, src, bytes);
    return Status::success();
  }
  Status download(MemorySpace, void *dst, const uint8_t *src,
                  size_t bytes) override {
    std::memcpy(dst, src, bytes);
    return Status::success();
  }
  bool downloadsCannotFail() const override { return true; }
  /// Poison mode overwrites buffers as they are allocated.
  bool keepsBuffersBetweenSteps() const override { return !opts_.poison; }

  Status beginStep() override;
  Status allocated(int buffer) override;
  Status waitEvent(int stream, int event, int instruction) override {
    Command c;
    c.kind = Command::Wait;
    c.instruction = instruction;
    c.waitFor = recorder_[size_t(event)];
    return submit(stream, c);
  }
  Status copy(const Copy &copy) override {
    Command c;
    c.kind = Command::CopyBytes;
    c.instruction = copy.instruction;
    c.copy = &copy;
    return submit(copy.stream, c);
  }
  Status launch(const Launch &launch) override {
    Command c;
    c.kind = Command::LaunchKernel;
    c.instruction = launch.instruction;
    c.launch = &launch;
    return submit(launch.stream, c);
  }
  Status collective(const Collective &c) override {
    Command cmd;
    cmd.kind = Command::Reduce;
    cmd.instruction = c.instruction;
    cmd.collective = &c;
    return submit(c.stream, cmd);
  }
  /// Stream order is instruction order, so the event completes with the
  /// recording instruction's last command: only who recorded it is kept.
  Status recordEvent(int, int event, int instruction) override {
    recorder_[size_t(event)] = instruction;
    return failed_ ? firstError() : Status::success();
  }
  Status synchronize(int first, int last) override;

  std::array<double, NumStreams> busySeconds() const override {
    std::lock_guard<std::mutex> g(mu_);
    return busy_;
  }
  double copyComputeOverlapSeconds() const override;
  double commComputeOverlapSeconds() const override {
    return overlapWithCompute({CommStream});
  }

private:
  /// Runs a compute-stream command now, or queues a copy stream's.
  Status submit(int stream, const Command &c);
  /// Runs a command (no lock held): "" or the error.
  std::string execute(const Command &c);
  std::string runCopy(const Copy &c);
  std::string runLaunch(const Launch &l);
  std::string runCollective(const Collective &c);
  /// Seconds of the last step during which one of `streams` and the
  /// compute stream were both busy.
  double overlapWithCompute(std::initializer_list<int> streams) const;
  /// The first poisoned f32/f64 input of `l`, as an error; "" when none.
  std::string poisonedInput(const Launch &l) const;
  /// Adds [t0, t1) (seconds) to the busy time of instruction i's stream.
  void account(int i, int stream, double t0, double t1);
  /// Whether instruction i has no command left on its stream (mu_ held).
  bool doneLocked(int i) const;
  /// Waits until instruction i has completed (releasing deferred copies).
  void waitDone(int i);
  void worker(int stream);
  /// Keeps `error` if it is the step's first.
  void fail(const std::string &error);
  Status firstError() const {
    std::lock_guard<std::mutex> g(mu_);
    return Status::error(error_);
  }

  std::shared_ptr<const Plan> plan_;
  SessionOptions opts_;
  std::vector<KernelFn> kernels_;
  std::unique_ptr<uint8_t[]> device_, host_;
  /// Poison mode: per buffer, the instructions (last uses of the earlier
  /// occupants of its bytes) that must complete before it is poisoned.
  std::vector<std::vector<int>> allocWait_;
  /// Per plan event: the instruction that last recorded it in this step
  /// (issuing thread only).
  std::vector<int> recorder_;

  // Execution state, guarded by mu_.
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Command> queue_[NumStreams];
  /// The instruction whose command a copy thread is running, or -1.
  int running_[NumStreams] = {-1, -1, -1, -1};
  /// Poison mode: a copy stream runs commands of instructions <= this.
  int released_[NumStreams] = {-1, -1, -1, -1};
  /// Threads blocked in waitDone: a copy thread that finishes a command
  /// wakes the others only when one is (or the issuing thread drains).
  int doneWaiters_ = 0;
  bool draining_ = false;
  std::string error_;
  /// error_ is set (read without the lock on the issuing thread).
  std::atomic<bool> failed_{false};
  bool stop_ = false;
  std::array<double, NumStreams> busy_{};
  /// Busy intervals [start, end) of each stream in the current step.
  std::array<std::vector<std::pair<double, double>>, NumStreams> spans_;
  std::thread workers_[NumStreams];
};

HostDevice::~HostDevice() {
  {
    std::lock_guard<std::mutex> g(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  for (int s = 1; s < NumStreams; ++s)
    if (workers_[s].joinable())
      workers_[s].join();
}

/// Poison mode poisons a buffer when it is allocated, after every use of
/// earlier occupants of its bytes completed: per buffer, those last uses.
static std::vector<std::vector<int>> poisonWaits(const PlanData &d) {
  std::vector<std::array<int, NumStreams>> lastUse(d.buffers.size(),
                                                   {-1, -1, -1, -1});
  for (size_t i = 0; i < d.instructions.size(); ++i) {
    const InstructionDesc &in = d.instructions[i];
    for (const auto *ids : {&in.inputs, &in.outputs})
      for (int id : *ids) {
        if (id < 0)
          continue;
        int base = d.buffers[size_t(id)].aliasOf >= 0
                       ? d.buffers[size_t(id)].aliasOf
                       : id;
        lastUse[size_t(base)][size_t(in.stream)] = int(i);
      }
  }
  std::vector<std::vector<int>> waits(d.buffers.size());
  for (size_t b = 0; b < d.buffers.size(); ++b) {
    const BufferDesc &B = d.buffers[b];
    if (B.aliasOf >= 0)
      continue;
    for (size_t a = 0; a < d.buffers.size(); ++a) {
      const BufferDesc &A = d.buffers[a];
      if (a == b || A.aliasOf >= 0 || A.space != B.space ||
          A.liveLast >= B.liveFirst || B.offset >= A.offset + A.size ||
          A.offset >= B.offset + B.size)
        continue;
      for (int u : lastUse[a])
        if (u >= 0)
          waits[b].push_back(u);
    }
  }
  return waits;
}

Status HostDevice::open(std::shared_ptr<const Plan> plan,
                        const SessionOptions &options) {
  plan_ = std::move(plan);
  opts_ = options;
  const PlanData &d = plan_->data();
  if (opts_.deviceMemoryBytes && opts_.deviceMemoryBytes < d.deviceCapacity)
    return Status::error("device has " +
                         std::to_string(opts_.deviceMemoryBytes) +
                         " bytes but the plan's device arena needs " +
                         std::to_string(d.deviceCapacity) + " bytes");
  // Kernels: every non-runtime op needs one; list all missing.
  std::vector<std::string> missing = missingOps(d);
  if (!missing.empty())
    return Status::error("host backend has no kernel for: " +
                         joinNames(missing));
  kernels_.assign(d.instructions.size(), nullptr);
  for (size_t i = 0; i < d.instructions.size(); ++i)
    if (!isRuntimeOp(d.instructions[i].op))
      kernels_[i] = KernelRegistry::host().lookup(d.instructions[i].op).unchecked();
  // Exactly the plan's capacities (at least one byte so pointers are valid).
  device_.reset(new (std::nothrow)
                    uint8_t[std::max<uint64_t>(d.deviceCapacity, 1)]);
  host_.reset(new (std::nothrow)
                  uint8_t[std::max<uint64_t>(d.hostCapacity, 1)]);
  if (!device_ || !host_)
    return Status::error("out of host memory allocating the arenas (" +
                         std::to_string(d.deviceCapacity) + " + " +
                         std::to_string(d.hostCapacity) + " bytes)");
  std::memset(device_.get(), opts_.poison ? 0xFF : 0, d.deviceCapacity);
  std::memset(host_.get(), opts_.poison ? 0xFF : 0, d.hostCapacity);
  if (opts_.poison)
    allocWait_ = poisonWaits(d);
  recorder_.assign(size_t(d.numEvents), -1);
  // A thread that cannot be started (a memory or process limit) is an
  // error of the session's creation, not an exception.
  for (int s = 1; s < NumStreams; ++s) {
    try {
      workers_[s] = std::thread([this, s] { worker(s); });
    } catch (const std::system_error &e) {
      return Status::error(std::string("cannot start the host backend's copy thread: ") +
                           e.what() + " (a memory or thread limit?)");
    }
  }
  return Status::success();
}

Status HostDevice::beginStep() {
  std::lock_guard<std::mutex> g(mu_);
  for (auto &q : queue_)
    q.clear();
  for (int &r : released_)
    r = -1;
  error_.clear();
  failed_ = false;
  busy_ = {};
  for (auto &sp : spans_)
    sp.clear();
  std::fill(recorder_.begin(), recorder_.end(), -1);
  return Status::success();
}

Status HostDevice::allocated(int buffer) {
  const BufferDesc &b = plan_->data().buffers[size_t(buffer)];
  if (opts_.poison && b.aliasOf < 0) {
    for (int u : allocWait_[size_t(buffer)])
      waitDone(u);
    std::memset(arenaBase(b.space) + b.offset, 0xFF, b.size);
  }
  return Status::success();
}

void HostDevice::fail(const std::string &error) {
  {
    std::lock_guard<std::mutex> g(mu_);
    if (error_.empty())
      error_ = error;
    failed_ = true;
  }
  cv_.notify_all();
}

Status HostDevice::submit(int stream, const Command &c) {
  if (stream == ComputeStream) {
    if (failed_)
      return firstError();
    std::string err = execute(c);
    if (!err.empty())
      fail(err);
    // A copy thread's failure (while this command waited) ends the step.
    return failed_ ? firstError() : Status::success();
  }
  {
    std::lock_guard<std::mutex> g(mu_);
    if (!error_.empty())
      return Status::error(error_);
    queue_[stream].push_back(c);
  }
  cv_.notify_all();
  return Status::success();
}

bool HostDevice::doneLocked(int i) const {
  if (i < 0)
    return true;
  int s = plan_->data().instructions[size_t(i)].stream;
  if (s == ComputeStream) // ran when it was issued
    return true;
  if (running_[s] >= 0)
    return running_[s] > i;
  return queue_[s].empty() || queue_[s].front().instruction > i;
}

void HostDevice::waitDone(int i) {
  if (i < 0)
    return;
  std::unique_lock<std::mutex> lk(mu_);
  int s = plan_->data().instructions[size_t(i)].stream;
  if (released_[s] < i) {
    released_[s] = i;
    cv_.notify_all();
  }
  ++doneWaiters_;
  cv_.wait(lk, [&] { return doneLocked(i); });
  --doneWaiters_;
}

/// The first NaN or infinity among the f32/f64 outputs of a launch, as an
/// error naming the instruction, the buffer and the element; "" when every
/// value is finite.
static std::string firstNonFinite(const PlanData &d, const Launch &l) {
  for (size_t k = 0; k < l.outputs.size(); ++k) {
    int id = l.desc->outputs[k];
    const BufferDesc &b = d.buffers[size_t(id)];
    if (b.dtype != DType::F32 && b.dtype != DType::F64 && !isLowFloat(b.dtype))
      continue;
    size_t n = size_t(b.dataBytes() / dtypeSize(b.dtype));
    auto scan = [&](const auto *p) -> std::string {
      for (size_t e = 0; e < n; ++e)
        if (!std::isfinite(double(p[e])))
          return instructionName(d, l.instruction) + " wrote " +
                 (std::isnan(double(p[e])) ? "nan" : p[e] > 0 ? "inf" : "-inf") +
                 " into buffer " + std::to_string(id) + " '" + b.name +
                 "' (element " + std::to_string(e) + " of " + std::to_string(n) +
                 "), the step's first non-finite value (--check-finite)";
      return "";
    };
    std::string e;
    if (isLowFloat(b.dtype)) {
      // Widened to f32 (exact): inf and NaN stay what they are.
      const uint16_t *p = static_cast<const uint16_t *>(l.outputs[k].data);
      std::vector<float> wide(n);
      for (size_t j = 0; j < n; ++j)
        wide[j] = b.dtype == DType::BF16 ? bf16ToFloat(p[j]) : f16ToFloat(p[j]);
      e = scan(wide.data());
    } else {
      e = b.dtype == DType::F32
              ? scan(static_cast<const float *>(l.outputs[k].data))
              : scan(static_cast<const double *>(l.outputs[k].data));
    }
    if (!e.empty())
      return e;
  }
  return "";
}

std::string HostDevice::poisonedInput(const Launch &l) const {
  const PlanData &d = plan_->data();
  for (size_t k = 0; k < l.inputs.size(); ++k) {
    int id = l.desc->inputs[k];
    if (id < 0)
      continue;
    const BufferDesc &b = d.buffers[size_t(id)];
    // 0xFF bytes are a NaN in every float type, bf16 and f16 included.
    if (b.dtype != DType::F32 && b.dtype != DType::F64 && !isLowFloat(b.dtype))
      continue;
    const uint8_t *p = static_cast<const uint8_t *>(l.inputs[k].data);
    size_t w = dtypeSize(b.dtype);
    for (size_t e = 0; e + w <= b.dataBytes(); e += w) {
      bool all = true;
      for (size_t j = 0; j < w && all; ++j)
        all = p[e + j] == 0xFF;
      if (all)
        return instructionName(d, l.instruction) +
               " reads poisoned bytes of buffer " + std::to_string(id) +
               " '" + b.name +
               "' (not yet arrived or already freed: a missing wait?)";
    }
  }
  return "";
}

void HostDevice::account(int i, int stream, double t0, double t1) {
  {
    std::lock_guard<std::mutex> g(mu_);
    busy_[size_t(stream)] += t1 - t0;
    spans_[size_t(stream)].push_back({t0, t1});
  }
}

std::string HostDevice::runCopy(const Copy &c) {
  double t0 = steadySeconds();
  if (c.bytes) {
    if (c.kind == CopyKind::WithinArena)
      std::memmove(c.dst, c.src, size_t(c.bytes));
    else
      std::memcpy(c.dst, c.src, size_t(c.bytes));
  }
  // An emulated link: the copy occupies its stream for at least
  // bytes / rate seconds from its start (the memcpy counts towards it).
  if (opts_.emulatedLinkBytesPerSecond > 0 && c.bytes > 0 &&
      c.kind != CopyKind::WithinArena)
    std::this_thread::sleep_until(
        std::chrono::steady_clock::time_point(
            std::chrono::ceil<std::chrono::steady_clock::duration>(
                std::chrono::duration<double>(
                    t0 + double(c.bytes) / opts_.emulatedLinkBytesPerSecond))));
  account(c.instruction, c.stream, t0, steadySeconds());
  return "";
}

std::string HostDevice::runLaunch(const Launch &l) {
  const PlanData &d = plan_->data();
  double t0 = steadySeconds();
  std::string err = opts_.poison ? poisonedInput(l) : "";
  if (err.empty()) {
    KernelArgs args{l.inputs, l.outputs, l.desc->attrs,
                    std::max(1, opts_.numThreads)};
    err = kernels_[size_t(l.instruction)](args);
    if (!err.empty())
      err = instructionName(d, l.instruction) + ": " + err;
    else if (opts_.checkFinite)
      err = firstNonFinite(d, l);
  }
  account(l.instruction, l.stream, t0, steadySeconds());
  return err;
}

std::string HostDevice::execute(const Command &c) {
  switch (c.kind) {
  case Command::Wait:
    waitDone(c.waitFor);
    return "";
  case Command::CopyBytes:
    return runCopy(*c.copy);
  case Command::LaunchKernel:
    return runLaunch(*c.launch);
  case Command::Reduce:
    return runCollective(*c.collective);
  }
  return "";
}

std::string HostDevice::runCollective(const Collective &c) {
  double t0 = steadySeconds();
  std::string err;
  if (c.kind != Collective::AllReduce) {
    // ZeRO-1. One rank without a communicator is rank 0 of 1.
    Communicator *comm = opts_.communicator.get();
    int rank = comm ? comm->rank() : 0;
    if (c.kind == Collective::ReduceScatter) {
      size_t n = c.inputs.size() / 2;
      std::vector<TensorView> grads(c.inputs.begin(), c.inputs.begin() + long(n));
      std::vector<TensorView> params(c.inputs.begin() + long(n), c.inputs.end());
      int64_t s = c.outputs[1].numel();
      // This rank's slice of the parameters: a local copy.
      gatherRange(params, int64_t(rank) * s, s, c.outputs[1].data);
      if (comm) {
        Status st = comm->reduceScatterMean(grads, c.outputs[0], c.what);
        if (!st.ok())
          err = st.message();
      } else {
        gatherRange(grads, 0, s, c.outputs[0].data);
      }
    } else {
      if (comm) {
        Status st = comm->allGatherShards(c.inputs[0], c.outputs, c.what);
        if (!st.ok())
          err = st.message();
      } else {
        scatterRange(c.inputs[0].data, 0, c.inputs[0].numel(), c.outputs);
      }
    }
  } else if (opts_.communicator) {
    Status s = opts_.communicator->allReduceMean(c.inputs, c.outputs, c.what);
    if (!s.ok())
      err = s.message();
  } else {
    // One rank: the mean is the bucket itself.
    for (size_t k = 0; k < c.inputs.size(); ++k)
      if (c.inputs[k].data != c.outputs[k].data)
        std::memcpy(c.outputs[k].data, c.inputs[k].data, c.inputs[k].bytes());
  }
  account(c.instruction, c.stream, t0, steadySeconds());
  return err;
}

void HostDevice::worker(int stream) {
#ifdef __linux__
  // An emulated link sleeps for copy durations of microseconds; Linux's
  // default timer slack (50 us) would lengthen each of them by up to that.
  if (opts_.emulatedLinkBytesPerSecond > 0)
    (void)prctl(PR_SET_TIMERSLACK, 1UL, 0UL, 0UL, 0UL);
#endif
  std::unique_lock<std::mutex> lk(mu_);
  for (;;) {
    cv_.wait(lk, [&] {
      if (stop_)
        return true;
      if (queue_[stream].empty())
        return false;
      return !opts_.poison ||
             released_[stream] >= queue_[stream].front().instruction;
    });
    if (stop_)
      return;
    Command c = queue_[stream].front();
    queue_[stream].pop_front();
    running_[stream] = c.instruction;
    // After a failure the rest of the step is dropped.
    bool failed = !error_.empty();
    lk.unlock();
    std::string err = failed ? std::string() : execute(c);
    lk.lock();
    if (!err.empty() && error_.empty())
      error_ = err;
    if (!err.empty())
      failed_ = true;
    running_[stream] = -1;
    if (doneWaiters_ > 0 || draining_ || !err.empty())
      cv_.notify_all();
  }
}

Status HostDevice::synchronize(int, int last) {
  // Release every deferred command of the run and drain the copy streams
  // (a later run of the step defers its own commands again).
  std::unique_lock<std::mutex> lk(mu_);
  for (int s = 1; s < NumStreams; ++s)
    released_[s] = std::max(released_[s], last);
  draining_ = true;
  cv_.notify_all();
  cv_.wait(lk, [&] {
    for (int s = 1; s < NumStreams; ++s)
      if (!queue_[s].empty() || running_[s] >= 0)
        return false;
    return true;
  });
  draining_ = false;
  if (!error_.empty())
    return Status::error(error_);
  return Status::success();
}

double HostDevice::copyComputeOverlapSeconds() const {
  return overlapWithCompute({HostToDeviceStream, DeviceToHostStream});
}

double HostDevice::overlapWithCompute(std::initializer_list<int> streams) const {
  std::lock_guard<std::mutex> g(mu_);
  // Union of the streams' busy intervals, intersected with the compute
  // stream's (each list is in start order per stream).
  std::vector<std::pair<double, double>> copies;
  for (int s : streams)
    copies.insert(copies.end(), spans_[size_t(s)].begin(), spans_[size_t(s)].end());
  std::sort(copies.begin(), copies.end());
  std::vector<std::pair<double, double>> merged;
  for (auto &c : copies) {
    if (!merged.empty() && c.first <= merged.back().second)
      merged.back().second = std::max(merged.back().second, c.second);
    else
      merged.push_back(c);
  }
  double overlap = 0;
  size_t j = 0;
  for (auto &c : spans_[0]) {
    while (j < merged.size() && merged[j].second <= c.first)
      ++j;
    for (size_t k = j; k < merged.size() && merged[k].first < c.second; ++k)
      overlap += std::min(c.second, merged[k].second) - std::max(c.first, merged[k].first);
  }
  return overlap;
}

} // namespace

std::unique_ptr<Device> offload::rt::createHostDevice() {
  return std::make_unique<HostDevice>();
}
