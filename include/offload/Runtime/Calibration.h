//===- Calibration.h - Measure this machine as the planner's host target -*- C++ -*-===//
//
// Part of offload. The planner's `target=host` describes the host backend
// running on this machine: its memory and copy rates, its GEMM and
// convolution throughput, per-op rates of the kernels whose speed differs
// most from a roofline, and the fixed latency of a copy on the host
// backend's copy threads. Those figures are measured here, by running the
// host kernels, on the runtime side: the compiler links no kernels and reads
// the result from a target file (`offload-run --calibrate FILE.json`;
// docs/planner.md, "The host target").
//
// No MLIR or LLVM dependency.
//
//===----------------------------------------------------------------------===//
#ifndef OFFLOAD_RUNTIME_CALIBRATION_H
#define OFFLOAD_RUNTIME_CALIBRATION_H

#include <map>
#include <string>
#include <utility>
#include <vector>

namespace offload {
namespace rt {

/// What calibrateHost() measured. Rates are per second: bytes/s count every
/// byte an op reads and writes (inputs plus outputs), FLOP/s count a
/// multiply-add as 2 FLOPs.
struct HostCalibration {
  /// Threads the kernels ran with (offload-run --threads).
  int threads = 1;
  /// Bytes/s of one memcpy direction (a 64 MiB copy: read + written once).
  double copyBytesPerSecond = 0;
  /// Bytes/s of memory traffic (read plus written: 2 x copyBytesPerSecond).
  double memoryBytesPerSecond = 0;
  /// FLOP/s of the GEMM probe ([256 x 512] x [512 x 512]^T, offload.linear):
  /// the target's peak.
  double flopsPerSecond = 0;
  /// FLOP/s of the 3x3 convolution probe (64 -> 64 channels, 16x16, batch 8).
  double convFlopsPerSecond = 0;
  /// Fractions of flopsPerSecond / memoryBytesPerSecond (in (0, 1]).
  double gemmEfficiency = 1, convEfficiency = 0.5, otherFlopsEfficiency = 0.1,
         memoryEfficiency = 1;
  /// Bytes/s of the host-side optimizer update (offload.sgd_update on 16 MiB
  /// tensors).
  double hostUpdateBytesPerSecond = 0;
  /// Per-op rates by full op name ("offload.softmax"): FLOP/s and bytes/s.
  std::map<std::string, double> opFlopsPerSecond, opBytesPerSecond;
  /// Rates that depend on size, (size, rate) points in ascending size (the
  /// planner's TargetSpec::sizedFlopsPerSecond / sizedBytesPerSecond say
  /// what the size is).
  std::map<std::string, std::vector<std::pair<double, double>>> sizedFlopsPerSecond,
      sizedBytesPerSecond;
  /// Seconds every host<->device copy of the host backend costs on top of
  /// its bytes / rate: 2 x handoffSeconds + sleepOvershootSeconds.
  double copyLatencySeconds = 0;
  /// Median seconds from a notify to the wake-up of a blocked thread.
  double handoffSeconds = 0;
  /// Median seconds by which a 20 us sleep ends late on a copy thread.
  double sleepOvershootSeconds = 0;
};

/// Measures this machine by running the host kernels with `threads` threads
/// (< 1: every hardware thread). Takes 1-3 s; allocates about 200 MiB
/// (two 64 MiB copy buffers, and kernel operands cycled over 64 MiB so that
/// each call reads them from memory, not from the cache). Allocation
/// failures throw std::bad_alloc (offload-run reports them as errors).
HostCalibration calibrateHost(int threads);

/// The model name of this machine's CPU ("AMD EPYC 7B13"), from
/// /proc/cpuinfo; "unknown CPU" where it cannot be read.
std::string hostCpuName();

/// `cal` as a target file, the JSON object that the planner's target-file
/// reader takes (docs/planner.md, "Target files"): name "host", every figure
/// (doubles printed to round-trip exactly), "calibration_threads", and
/// "source": `source` followed by a summary of the main figures. Ends with
/// a newline.
std::string hostTargetFileJson(const HostCalibration &cal, const std::string &source);

} // namespace rt
} // namespace offload

#endif // OFFLOAD_RUNTIME_CALIBRATION_H
