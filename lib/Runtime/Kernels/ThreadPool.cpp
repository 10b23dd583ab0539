//===- ThreadPool.cpp - Persistent worker threads for the host kernels -----===//
//
// Part of offload. See ThreadPool.h.
//
//===----------------------------------------------------------------------===//

#include "ThreadPool.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <system_error>
#include <thread>
#include <vector>

#include <sys/resource.h>
#include <unistd.h>

using namespace offload::rt::kernels;

namespace {

class Pool {
public:
  ~Pool() {
    {
      std::lock_guard<std::mutex> g(mu_);
      stop_ = true;
    }
    wake_.notify_all();
    for (std::thread &t : workers_)
      t.join();
  }

  void run(int64_t n, const std::function<void(int64_t)> &chunk) {
    std::unique_lock<std::mutex> busy(busy_, std::try_to_lock);
    if (!busy.owns_lock() || n <= 1) {
      for (int64_t i = 0; i < n; ++i)
        chunk(i);
      return;
    }
    {
      std::lock_guard<std::mutex> g(mu_);
      // A worker that cannot be started (a memory or thread limit:
      // --threads 1024 under ulimit -v) is not an error: the chunks are the
      // same whoever runs them, so the results are too; the caller and the
      // workers there are take them all.
      while (int64_t(workers_.size()) < n - 1 && !cannotStart_) {
        if (!roomForAnotherThread()) {
          cannotStart_ = true;
          break;
        }
        try {
          workers_.emplace_back([this] { work(); });
        } catch (const std::system_error &) {
          cannotStart_ = true;
        }
      }
      oversubscribed_.store(workers_.size() + 1 > hardwareThreads(),
                            std::memory_order_relaxed);
      job_ = &chunk;
      next_ = 1;
      end_ = n;
      remaining_ = n - 1;
      generation_.fetch_add(1);
    }
    wake_.notify_all();
    chunk(0);
    // Take any chunk no worker has started yet, then wait for the rest.
    for (int64_t i; (i = claim()) >= 0;)
      finish(i);
    std::unique_lock<std::mutex> g(mu_);
    done_.wait(g, [&] { return remaining_ == 0; });
    job_ = nullptr;
  }

private:
  /// The next unclaimed chunk, or -1.
  int64_t claim() {
    std::lock_guard<std::mutex> g(mu_);
    return job_ && next_ < end_ ? next_++ : -1;
  }
  void finish(int64_t i) {
    (*job_)(i);
    std::lock_guard<std::mutex> g(mu_);
    if (--remaining_ == 0)
      done_.notify_all();
  }
  void work() {
    uint64_t seen = 0;
    while (true) {
      // Kernel calls come back to back during a step: poll for the next
      // job for a while before sleeping, since waking a sleeping thread
      // costs tens of microseconds (more on a virtual machine), which small
      // kernels cannot absorb.
      // Only while the pool fits the machine: with more threads than
      // hardware threads (--threads 1000 on 2 cores) spinning workers take
      // the cores from the ones doing the work, and a step stalled for
      // minutes; then they sleep at once.
      if (!oversubscribed_.load(std::memory_order_relaxed))
        for (int k = 0; k < kSpin && generation_.load() == seen; ++k)
          pause();
      {
        std::unique_lock<std::mutex> g(mu_);
        wake_.wait(g, [&] { return stop_ || (generation_.load() != seen && job_); });
        if (stop_)
          return;
        seen = generation_.load();
      }
      for (int64_t i; (i = claim()) >= 0;)
        finish(i);
    }
  }

  std::mutex busy_; ///< held by the thread running a job
  std::mutex mu_;
  std::condition_variable wake_, done_;
  std::vector<std::thread> workers_;
  const std::function<void(int64_t)> *job_ = nullptr;
  int64_t next_ = 0, end_ = 0, remaining_ = 0;
  std::atomic<uint64_t> generation_{0};
  /// More workers (plus the caller) than hardware threads: no spinning.
  std::atomic<bool> oversubscribed_{false};
  static size_t hardwareThreads() {
    static const size_t n = std::max(1u, std::thread::hardware_concurrency());
    return n;
  }
  /// Polls before sleeping: 20000 pause instructions, 0.1 to 1 ms depending
  /// on the CPU (measured: resnet18 at two threads 98-138 -> 88-116 ms).
  static constexpr int kSpin = 20000;
  static void pause() {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
  }
  bool stop_ = false;
  /// Under an address-space limit (RLIMIT_AS, ulimit -v), whether one more
  /// thread stack fits and leaves kReserveBytes for what the step allocates
  /// next. Threads that took the whole limit left nothing for the first
  /// matrix product, where OpenBLAS retries a failed 128 MiB buffer forever.
  static bool roomForAnotherThread() {
    struct rlimit as, stack;
    if (getrlimit(RLIMIT_AS, &as) != 0 || as.rlim_cur == RLIM_INFINITY)
      return true;
    uint64_t stackBytes = uint64_t(8) << 20;
    if (getrlimit(RLIMIT_STACK, &stack) == 0 && stack.rlim_cur != RLIM_INFINITY)
      stackBytes = uint64_t(stack.rlim_cur);
    unsigned long pages = 0;
    FILE *f = std::fopen("/proc/self/statm", "r");
    if (!f)
      return true;
    bool read = std::fscanf(f, "%lu", &pages) == 1;
    std::fclose(f);
    if (!read)
      return true;
    uint64_t used = uint64_t(pages) * uint64_t(sysconf(_SC_PAGESIZE));
    return used + stackBytes + kReserveBytes <= uint64_t(as.rlim_cur);
  }
  static constexpr uint64_t kReserveBytes = uint64_t(512) << 20;
  /// Set when a worker could not be started: no more are tried.
  bool cannotStart_ = false;
};

Pool &pool() {
  static Pool p;
  return p;
}

} // namespace

void offload::rt::kernels::runChunks(int64_t n,
                                     const std::function<void(int64_t)> &chunk) {
  pool().run(n, chunk);
}
