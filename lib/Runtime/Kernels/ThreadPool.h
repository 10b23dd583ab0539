//===- ThreadPool.h - Persistent worker threads for the host kernels -------===//
//
// Part of offload. A kernel split over T threads used to start T-1
// std::threads per call; a training step makes thousands of kernel calls, and
// thread start and join (tens of microseconds each) then cost more than the
// small kernels themselves. runChunks hands the chunks to workers that live
// as long as the process.
//
//===----------------------------------------------------------------------===//
#ifndef OFFLOAD_LIB_RUNTIME_KERNELS_THREADPOOL_H
#define OFFLOAD_LIB_RUNTIME_KERNELS_THREADPOOL_H

#include <cstdint>
#include <functional>

namespace offload {
namespace rt {
namespace kernels {

/// Runs chunk(0) .. chunk(n-1), chunk 0 on the calling thread and the others
/// on pool workers (started on first use, up to n-1 of them), and returns
/// when all have finished. Which thread runs a chunk never changes what it
/// computes, so results do not depend on scheduling. A call made while the
/// pool is busy (from a worker, or from a second thread) runs its chunks one
/// after another on the calling thread. `chunk` must not throw.
void runChunks(int64_t n, const std::function<void(int64_t)> &chunk);

} // namespace kernels
} // namespace rt
} // namespace offload

#endif
