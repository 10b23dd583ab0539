//===- HostBackend.cpp - Host backend enforcing the device capacity -------===//
//
// Part of offload. The device arena is one allocation of exactly the plan's
// capacity; buffers are allocated and freed in program order as their live
// intervals begin and end, and an instruction touching a buffer that is not
// live fails. Compute runs on the calling thread; each copy stream has its
// own worker thread, and events are honoured by waiting for the recording
// instruction. Poison mode fills dead bytes with all-ones (a NaN for f32/f64),
// defers every copy until something waits for it, and fails a kernel whose
// float input holds the pattern: a missing wait becomes a failure.
//
//===----------------------------------------------------------------------===//

#include "Backend.h"

#include <cmath>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <cstdlib>
#include <map>
#include <mutex>
#include <thread>
#include <system_error>

#ifdef __linux__
#include <sys/prctl.h>
#endif

using namespace offload::rt;

namespace {

double now() {
  return std::chrono::duration<double>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

/// OFFLOAD_PROFILE=1 in the environment: seconds spent per op name, summed
/// over the session and printed to stderr when the backend is destroyed.
struct OpProfile {
  std::mutex mu;
  std::map<std::string, std::pair<double, long>> seconds;
  bool enabled = std::getenv("OFFLOAD_PROFILE") != nullptr;
};

class HostBackend final : public Backend {
public:
  ~HostBackend() override;
  const char *name() const override { return "host"; }
  Status init(std::shared_ptr<const Plan> plan,
              const SessionOptions &options) override;
  std::vector<std::string> ops() const override {
    registerAllHostKernels();
    return KernelRegistry::host().names();
  }
  std::vector<std::string> missingOps(const PlanData &d) const override {
    registerAllHostKernels();
    std::vector<std::string> missing;
    for (const InstructionDesc &in : d.instructions)
      if (!isRuntimeOp(in.op) && !KernelRegistry::host().lookup(in.op) &&
          std::find(missing.begin(), missing.end(), in.op) == missing.end())
        missing.push_back(in.op);
    return missing;
  }
  Status beginStep() override;
  Status write(int id, const void *src, size_t bytes) override;
  Status read(int id, void *dst, size_t bytes) override;
  Status readAfterStep(int id, uint64_t offset, void *dst,
                       size_t bytes) override;
  bool outputReadsCannotFail() const override { return true; }
  Status run(int first, int last) override;
  void endStep() override;
  uint64_t peakDeviceBytes() const override { return peak_; }
  /// Poison mode overwrites buffers as they are allocated.
  bool keepsBuffersBetweenSteps() const override { return !opts_.poison; }
  double copyComputeOverlapSeconds() const override {
    std::lock_guard<std::mutex> g(mu_);
    // Union of the copy streams' busy intervals, intersected with the
    // compute stream's (each list is in start order per stream).
    std::vector<std::pair<double, double>> copies(spans_[1]);
    copies.insert(copies.end(), spans_[2].begin(), spans_[2].end());
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
  std::array<double, NumStreams> busySeconds() const override {
    std::lock_guard<std::mutex> g(mu_);
    return busy_;
  }

private:
  uint8_t *ptr(int id) const {
    const BufferDesc &b = plan_->data().buffers[size_t(id)];
    return (b.space == MemorySpace::Device ? device_.get() : host_.get()) +
           b.offset;
  }
  void allocate(int id);
  /// One outstanding use of buffer `id` is over; the last one frees it.
  void unuse(int id);
  /// Executes instruction i on the current thread (waits done by caller).
  std::string execute(int i);
  /// Waits until instruction r has completed (releasing lazy copies).
  void waitDone(int r);
  void worker(int stream);
  void markDone(int i, const std::string &error);

  std::shared_ptr<const Plan> plan_;
  SessionOptions opts_;
  LiveSchedule sched_;
  std::vector<KernelFn> kernels_;
  std::unique_ptr<uint8_t[]> device_, host_;
  std::vector<uint8_t> boundOut_; ///< freed only at endStep

  // Execution state, guarded by mu_.
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<uint8_t> done_;
  std::vector<std::atomic<uint8_t>> live_;
  /// Uses outstanding before a buffer dies: its users plus one for program
  /// order passing its interval's end.
  std::vector<std::atomic<int>> pending_;
  std::vector<int> users_;
  std::vector<std::vector<int>> allocWait_;
  std::deque<int> queue_[NumStreams];
  int released_[NumStreams] = {-1, -1, -1};
  OpProfile profile_;
  int busyWorkers_ = 0;
  /// Threads blocked in waitDone (guarded by mu_). markDone wakes the
  /// others only when one is: an idle copy thread has nothing to do with a
  /// finished compute instruction, and waking both on each of them costs
  /// two context switches per instruction.
  int doneWaiters_ = 0;
  std::string error_;
  bool stop_ = false;
  std::array<double, NumStreams> busy_{0, 0, 0};
  /// Busy intervals [start, end) of each stream in the current step.
  std::array<std::vector<std::pair<double, double>>, NumStreams> spans_;
  std::thread workers_[NumStreams];

  uint64_t cur_ = 0, peak_ = 0;
};

HostBackend::~HostBackend() {
  if (profile_.enabled && !profile_.seconds.empty()) {
    std::vector<std::pair<double, std::string>> rows;
    double total = 0;
    for (auto &e : profile_.seconds) {
      rows.push_back({e.second.first, e.first});
      total += e.second.first;
    }
    std::sort(rows.rbegin(), rows.rend());
    std::fprintf(stderr, "host backend profile (OFFLOAD_PROFILE), %.3f s in total:\n", total);
    for (auto &r : rows)
      std::fprintf(stderr, "  %-34s %9.4f s %5.1f%%  %ld calls\n", r.second.c_str(), r.first,
                   100.0 * r.first / total, profile_.seconds[r.second].second);
  }
  {
    std::lock_guard<std::mutex> g(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  for (int s = 1; s < NumStreams; ++s)
    if (workers_[s].joinable())
      workers_[s].join();
}

Status HostBackend::init(std::shared_ptr<const Plan> plan,
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
  sched_ = LiveSchedule::build(d);
  boundOut_.assign(d.buffers.size(), 0);
  for (const BindingDesc &b : d.bindings)
    if (b.direction == BindingDirection::Out)
      boundOut_[size_t(b.buffer)] = 1;
  live_ = std::vector<std::atomic<uint8_t>>(d.buffers.size());
  pending_ = std::vector<std::atomic<int>>(d.buffers.size());
  users_.assign(d.buffers.size(), 0);
  std::vector<std::array<int, NumStreams>> lastUse(d.buffers.size(),
                                                   {-1, -1, -1});
  for (size_t i = 0; i < d.instructions.size(); ++i) {
    const InstructionDesc &in = d.instructions[i];
    std::vector<int> ids;
    for (int id : in.inputs)
      if (id >= 0)
        ids.push_back(id);
    for (int id : in.outputs)
      ids.push_back(id);
    std::sort(ids.begin(), ids.end());
    ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
    for (int id : ids) {
      ++users_[size_t(id)];
      int base = d.buffers[size_t(id)].aliasOf >= 0
                     ? d.buffers[size_t(id)].aliasOf
                     : id;
      lastUse[size_t(base)][size_t(in.stream)] = int(i);
    }
  }
  // Poison mode poisons a buffer when it is allocated, after every use of
  // earlier occupants of its bytes completed.
  allocWait_.assign(d.buffers.size(), {});
  if (opts_.poison)
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
            allocWait_[b].push_back(u);
      }
    }
  done_.assign(d.instructions.size(), 0);
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

void HostBackend::allocate(int id) {
  const BufferDesc &b = plan_->data().buffers[size_t(id)];
  if (opts_.poison && b.aliasOf < 0) {
    for (int u : allocWait_[size_t(id)])
      waitDone(u);
    std::memset(ptr(id), 0xFF, b.size);
  }
  pending_[size_t(id)] = users_[size_t(id)] + 1;
  live_[size_t(id)] = 1;
  if (b.space == MemorySpace::Device && b.aliasOf < 0) {
    cur_ += b.size;
    peak_ = std::max(peak_, cur_);
  }
}

void HostBackend::unuse(int id) {
  if (--pending_[size_t(id)] == 0 && !boundOut_[size_t(id)])
    live_[size_t(id)] = 0;
}

Status HostBackend::beginStep() {
  {
    std::lock_guard<std::mutex> g(mu_);
    std::fill(done_.begin(), done_.end(), 0);
    for (auto &q : queue_)
      q.clear();
    for (int &r : released_)
      r = -1;
    error_.clear();
    busy_ = {0, 0, 0};
    for (auto &sp : spans_)
      sp.clear();
  }
  for (auto &l : live_)
    l = 0;
  cur_ = 0;
  for (int id : sched_.allocAt[0])
    allocate(id);
  return Status::success();
}

Status HostBackend::write(int id, const void *src, size_t bytes) {
  if (!live_[size_t(id)])
    return Status::error("buffer '" + plan_->data().buffers[size_t(id)].name +
                         "' is not live at the start of the step");
  if (bytes)
    std::memcpy(ptr(id), src, bytes);
  return Status::success();
}

Status HostBackend::read(int id, void *dst, size_t bytes) {
  if (!live_[size_t(id)])
    return Status::error("buffer '" + plan_->data().buffers[size_t(id)].name +
                         "' is not live at the end of the step");
  if (bytes)
    std::memcpy(dst, ptr(id), bytes);
  return Status::success();
}

Status HostBackend::readAfterStep(int id, uint64_t offset, void *dst,
                                  size_t bytes) {
  const BufferDesc &b = plan_->data().buffers[size_t(id)];
  if (!boundOut_[size_t(id)] || offset > b.size || bytes > b.size - offset)
    return Status::error("buffer '" + b.name +
                         "' is not an output or the range is outside it");
  if (bytes)
    std::memcpy(dst, ptr(id) + offset, bytes);
  return Status::success();
}

void HostBackend::markDone(int i, const std::string &error) {
  bool wake;
  {
    std::lock_guard<std::mutex> g(mu_);
    done_[size_t(i)] = 1;
    if (!error.empty() && error_.empty())
      error_ = error;
    wake = doneWaiters_ > 0 || !error.empty();
  }
  if (wake)
    cv_.notify_all();
}

void HostBackend::waitDone(int r) {
  std::unique_lock<std::mutex> lk(mu_);
  int s = plan_->data().instructions[size_t(r)].stream;
  if (released_[s] < r) {
    released_[s] = r;
    cv_.notify_all();
  }
  ++doneWaiters_;
  cv_.wait(lk, [&] { return done_[size_t(r)] != 0; });
  --doneWaiters_;
}

/// The first NaN or infinity among the f32/f64 `outputs` (a buffer id and
/// its bytes) of an instruction, as an error naming the instruction, the
/// buffer and the element; "" when every value is finite.
static std::string
firstNonFinite(const PlanData &d, const std::vector<std::pair<int, const uint8_t *>> &outputs,
               const std::string &where) {
  for (const auto &[id, bytes] : outputs) {
    const BufferDesc &b = d.buffers[size_t(id)];
    if (b.dtype != DType::F32 && b.dtype != DType::F64)
      continue;
    size_t n = size_t(b.dataBytes() / dtypeSize(b.dtype));
    auto scan = [&](const auto *p) -> std::string {
      for (size_t k = 0; k < n; ++k)
        if (!std::isfinite(p[k]))
          return where + " wrote " +
                 (std::isnan(p[k]) ? "nan" : p[k] > 0 ? "inf" : "-inf") +
                 " into buffer " + std::to_string(id) + " '" + b.name +
                 "' (element " + std::to_string(k) + " of " + std::to_string(n) +
                 "), the step's first non-finite value (--check-finite)";
      return "";
    };
    std::string e = b.dtype == DType::F32
                        ? scan(reinterpret_cast<const float *>(bytes))
                        : scan(reinterpret_cast<const double *>(bytes));
    if (!e.empty())
      return e;
  }
  return "";
}

std::string HostBackend::execute(int i) {
  const PlanData &d = plan_->data();
  const InstructionDesc &in = d.instructions[size_t(i)];
  std::string where = "instruction " + std::to_string(i) + " (" + in.op + ")";
  // Every operand must be live now.
  for (const auto *ids : {&in.inputs, &in.outputs})
    for (int id : *ids)
      if (id >= 0 && !live_[size_t(id)])
        return where + " accesses buffer " + std::to_string(id) + " '" +
               d.buffers[size_t(id)].name + "' outside its live interval";
  if (opts_.failAtInstruction == i)
    return where + ": injected failure (SessionOptions::failAtInstruction)";
  double t0 = now();
  std::string err;
  if (in.op == kOpToHost || in.op == kOpToDevice) {
    const BufferDesc &src = d.buffers[size_t(in.inputs[0])];
    int64_t so = in.attrs.getInt("src_offset", 0);
    int64_t dof = in.attrs.getInt("dst_offset", 0);
    int64_t bytes = in.attrs.getInt("bytes", int64_t(src.dataBytes()));
    if (bytes)
      std::memcpy(ptr(in.outputs[0]) + dof, ptr(in.inputs[0]) + so,
                  size_t(bytes));
    // An emulated link: the copy occupies its stream for at least
    // bytes / rate seconds from its start (the memcpy counts towards it).
    if (opts_.emulatedLinkBytesPerSecond > 0 && bytes > 0)
      std::this_thread::sleep_until(
          std::chrono::steady_clock::time_point(
              std::chrono::ceil<std::chrono::steady_clock::duration>(
                  std::chrono::duration<double>(
                      t0 + double(bytes) / opts_.emulatedLinkBytesPerSecond))));
  } else if (in.op == kOpReshape) {
    uint8_t *s = ptr(in.inputs[0]), *t = ptr(in.outputs[0]);
    if (s != t)
      std::memmove(t, s, d.buffers[size_t(in.outputs[0])].dataBytes());
  } else if (in.op != kOpWait) {
    std::vector<TensorView> ins, outs;
    for (int id : in.inputs) {
      TensorView v = bufferView(d, id, id >= 0 ? ptr(id) : nullptr);
      if (id >= 0) {
        const BufferDesc &b = d.buffers[size_t(id)];
        if (opts_.poison && (b.dtype == DType::F32 || b.dtype == DType::F64)) {
          const uint8_t *p = ptr(id);
          size_t w = dtypeSize(b.dtype);
          for (size_t k = 0; k + w <= b.dataBytes(); k += w) {
            bool all = true;
            for (size_t j = 0; j < w && all; ++j)
              all = p[k + j] == 0xFF;
            if (all)
              return where + " reads poisoned bytes of buffer " +
                     std::to_string(id) + " '" + b.name +
                     "' (not yet arrived or already freed: a missing wait?)";
          }
        }
      }
      ins.push_back(std::move(v));
    }
    for (int id : in.outputs)
      outs.push_back(bufferView(d, id, ptr(id)));
    KernelArgs args{ins, outs, in.attrs, std::max(1, opts_.numThreads)};
    err = kernels_[size_t(i)](args);
    if (!err.empty())
      err = where + ": " + err;
    else if (opts_.checkFinite) {
      std::vector<std::pair<int, const uint8_t *>> written;
      for (int id : in.outputs)
        written.push_back({id, ptr(id)});
      err = firstNonFinite(d, written, where);
    }
  }
  double t1 = now();
  {
    std::lock_guard<std::mutex> g(mu_);
    busy_[size_t(in.stream)] += t1 - t0;
    spans_[size_t(in.stream)].push_back({t0, t1});
  }
  if (profile_.enabled) {
    std::lock_guard<std::mutex> g(profile_.mu);
    auto &e = profile_.seconds[in.op];
    e.first += t1 - t0;
    e.second += 1;
  }
  std::vector<int> ids;
  for (int id : in.inputs)
    if (id >= 0)
      ids.push_back(id);
  for (int id : in.outputs)
    ids.push_back(id);
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  for (int id : ids)
    unuse(id);
  return err;
}

void HostBackend::worker(int stream) {
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
      return !opts_.poison || released_[stream] >= queue_[stream].front();
    });
    if (stop_)
      return;
    int i = queue_[stream].front();
    queue_[stream].pop_front();
    ++busyWorkers_;
    bool failed = !error_.empty();
    lk.unlock();
    std::string err;
    if (!failed) {
      for (int r : sched_.waitFor[size_t(i)])
        waitDone(r);
      std::lock_guard<std::mutex> g(mu_);
      failed = !error_.empty();
    }
    if (!failed)
      err = execute(i);
    markDone(i, err);
    lk.lock();
    --busyWorkers_;
    cv_.notify_all();
  }
}

Status HostBackend::run(int first, int last) {
  const PlanData &d = plan_->data();
  std::string err;
  int i = first;
  for (; i < last; ++i) {
    {
      std::lock_guard<std::mutex> g(mu_);
      if (!error_.empty())
        break;
    }
    if (i > 0)
      for (int id : sched_.allocAt[size_t(i)])
        allocate(id);
    const InstructionDesc &in = d.instructions[size_t(i)];
    if (in.stream != ComputeStream) {
      {
        std::lock_guard<std::mutex> g(mu_);
        queue_[in.stream].push_back(i);
      }
      cv_.notify_all();
    } else {
      for (int r : sched_.waitFor[size_t(i)])
        waitDone(r);
      {
        std::lock_guard<std::mutex> g(mu_);
        if (!error_.empty())
          break;
      }
      markDone(i, execute(i));
    }
    // Program-order accounting: the interval ends after instruction i.
    for (int id : sched_.freeAfter[size_t(i)]) {
      const BufferDesc &b = d.buffers[size_t(id)];
      if (b.space == MemorySpace::Device && b.aliasOf < 0)
        cur_ -= b.size;
      unuse(id);
    }
  }
  // Synchronise every stream: release all deferred copies and drain.
  {
    std::unique_lock<std::mutex> lk(mu_);
    for (int s = 1; s < NumStreams; ++s)
      released_[s] = std::max(released_[s], last);
    cv_.notify_all();
    cv_.wait(lk, [&] {
      return queue_[1].empty() && queue_[2].empty() && busyWorkers_ == 0;
    });
    err = error_;
  }
  if (!err.empty())
    return Status::error(err);
  return Status::success();
}

void HostBackend::endStep() {
  for (auto &l : live_)
    l = 0;
}

} // namespace

std::unique_ptr<Backend> offload::rt::createHostBackend() {
  return std::make_unique<HostBackend>();
}
