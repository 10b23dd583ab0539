//===- Target.h - Device specs and the per-op cost model --------*- C++ -*-===//
//
// Part of offload. What the memory planner and the prefetch placement know
// about the GPU they plan for: its memory, its compute and memory
// throughput, and the host link, as a `TargetSpec` (built in, or read from a
// JSON target file: the host target is the file that `offload-run
// --calibrate` wrote on this machine), and the roofline cost model
// (`TargetModel`) that turns an op's FLOPs and bytes into seconds.
//
//===----------------------------------------------------------------------===//
#ifndef OFFLOAD_DIALECT_OFFLOAD_ANALYSIS_TARGET_H
#define OFFLOAD_DIALECT_OFFLOAD_ANALYSIS_TARGET_H

#include "offload/Dialect/Offload/IR/OffloadDialect.h"

#include "mlir/IR/Operation.h"
#include "mlir/Support/LLVM.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/JSON.h"

#include <optional>

#include <map>
#include <string>
#include <vector>

namespace mlir {
namespace offload {

/// One device the planner can target. Rates are per second; "per
/// direction" rates are for one copy stream, the other direction running at
/// the same time.
struct TargetSpec {
  std::string name;
  /// Where the figures come from (datasheet, measurement), for the report.
  std::string source;
  /// Device memory in bytes (0: unknown, e.g. the host target).
  int64_t memoryBytes = 0;
  /// Device memory bandwidth, bytes/s (HBM or GDDR).
  double memoryBytesPerSecond = 0;
  /// Dense fp32 throughput without tensor cores, FLOP/s.
  double flopsPerSecond = 0;
  /// Host-to-device and device-to-host copy bandwidth of pinned memory,
  /// bytes/s per direction (measured where published, not the link's
  /// theoretical figure).
  double hostToDeviceBytesPerSecond = 0;
  double deviceToHostBytesPerSecond = 0;
  /// Dense bf16 and f16 tensor-core throughput (fp32 accumulation, no
  /// sparsity), FLOP/s: the rate of matrix products, convolutions and
  /// attention whose operands are bf16/f16 (mixed precision, issue 29).
  /// 0: those run at flopsPerSecond (a target without tensor cores, or a
  /// calibrated host, whose bf16/f16 is emulated in f32). After the fields
  /// that the built-in targets initialize in order.
  double bf16FlopsPerSecond = 0;
  double f16FlopsPerSecond = 0;
  /// Bytes/s that an optimizer update running on the host (parameters kept
  /// on the host) streams through host memory.
  double hostUpdateBytesPerSecond = 20e9;
  /// Bytes/s per direction of the link between the data-parallel ranks'
  /// devices, as NCCL's tests call it "bus bandwidth": NVLink for SXM
  /// GPUs, PCIe for PCIe cards, the network between hosts otherwise
  /// (default: 10 Gb Ethernet, 1.25e9). The cost of offload.all_reduce
  /// (TargetModel::allReduceSeconds). Target file key
  /// collective_bytes_per_second.
  double collectiveBytesPerSecond = 1.25e9;
  /// Fractions of the peak that kernels reach, by op kind: matrix products
  /// (linear, matmul), convolutions, other FLOP-bound ops, and memory
  /// traffic. Assumptions stated in docs/planner.md; a target file may set
  /// measured ones.
  double gemmEfficiency = 0.7;
  double convEfficiency = 0.5;
  double otherFlopsEfficiency = 0.3;
  double memoryEfficiency = 0.8;
  /// Device bytes reserved for cuBLAS/cuDNN workspace, counted in the
  /// plan's device memory (0: the backend picks algorithms without one).
  int64_t workspaceBytes = 0;
  /// Measured rates of individual ops by full name ("offload.softmax"),
  /// replacing the roofline for them: FLOP/s for compute-bound kernels
  /// (the convolution's backward kernels), bytes/s (inputs plus outputs,
  /// as CostOpInterface counts them) for memory-bound ones. Empty on the
  /// built-in GPU targets; the host calibration fills them.
  std::map<std::string, double> opFlopsPerSecond, opBytesPerSecond;
  /// Measured FLOP/s of ops whose rate depends on their size, by op name:
  /// (size, FLOP/s) points in ascending size, interpolated on log(size) and
  /// clamped at the ends (TargetModel::opSize says what the size is: the
  /// multiply-adds of one product for offload.matmul run as one GEMM per
  /// batch element, the output pixels N*Ho*Wo of the forward convolution
  /// for offload.conv2d and its backward kernels). They take precedence
  /// over opFlopsPerSecond. Empty on the built-in GPU targets; the host
  /// calibration measures a small and a large size of each.
  std::map<std::string, std::vector<std::pair<double, double>>> sizedFlopsPerSecond;
  /// The same for memory-bound ops, by the bytes the op moves (inputs plus
  /// outputs): (bytes, bytes/s) points, interpolated on log(bytes): small
  /// operands stay in the last-level cache, large ones stream from memory.
  /// The host calibration measures offload.sgd_update so.
  std::map<std::string, std::vector<std::pair<double, double>>> sizedBytesPerSecond;
  /// Fixed seconds of every host<->device copy on top of its bytes / rate
  /// (0 on the built-in GPU targets; the host calibration measures the host
  /// backend's: waking a copy thread and the thread waiting for the copy,
  /// and the overshoot of the emulated link's sleep).
  double copyLatencySeconds = 0;
  /// Threads the host kernels ran with when this target was calibrated
  /// (target file key calibration_threads); 0: not calibrated.
  int calibrationThreads = 0;
};

/// Names of the built-in targets, for --help and error messages.
std::vector<std::string> builtinTargetNames();

/// Resolves `target`: a built-in name (h100-sxm, h100-pcie, a100-80g,
/// a100-40g, l4, rtx-4090), `host` (this machine: the target file at
/// hostTargetPath(), which `offload-run --calibrate PATH` writes; nothing is
/// measured here, so the same file gives the same figures on every run), or
/// a path ending in `.json` (see parseTargetFile). On failure returns an
/// error message naming the problem and the choices; a missing or invalid
/// host file's names the command that makes it.
FailureOr<TargetSpec> resolveTarget(StringRef target, std::string &error);

/// Where `target=host` (and "base": "host") reads the calibrated host target:
/// $OFFLOAD_HOST_TARGET when set and not empty, else
/// $XDG_CACHE_HOME/offload/host-target.json when XDG_CACHE_HOME is an
/// absolute path, else $HOME/.cache/offload/host-target.json. Fails (with
/// `error`) only when none of the three variables is set.
FailureOr<std::string> hostTargetPath(std::string &error);

/// Reads a target file: a JSON object with the keys
///   name (string), memory_bytes (integer >= 0; 0: no memory size of its
///   own, give the planner budget=), memory_bytes_per_second,
///   flops_per_second, host_to_device_bytes_per_second,
///   device_to_host_bytes_per_second (numbers > 0, bytes/s and FLOP/s; all
///   required), and optionally source (string),
///   host_update_bytes_per_second (bytes/s), gemm_efficiency,
///   conv_efficiency, other_flops_efficiency, memory_efficiency (in (0, 1]),
///   workspace_bytes (integer >= 0), and the measured figures of a
///   calibrated host: copy_latency_seconds (seconds, in [0, 1]),
///   op_flops_per_second and op_bytes_per_second ({"offload.OP": FLOP/s or
///   bytes/s}), sized_flops_per_second and sized_bytes_per_second
///   ({"offload.OP": [[size, rate], ...]}, sizes ascending; see
///   TargetSpec), calibration_threads (integer in [1, 1024]).
/// Unknown keys are errors (a misspelt key would otherwise be ignored).
/// With "base" (a built-in name, or "host" for this machine's calibrated
/// file, as target=host reads it) the file starts from that target and every
/// other key, name included, is optional and overrides it (a map key
/// replaces the base's whole map): e.g. {"base": "host",
/// "host_to_device_bytes_per_second": 2e9, "device_to_host_bytes_per_second":
/// 2e9} is this machine behind the 2 GB/s link that `offload-run
/// --emulate-link 2e9` emulates. Over "base": "host", "calibration_threads"
/// is a check: the host file must have been calibrated with that many
/// threads (`offload-run --calibrate PATH --threads N`; match `offload-run
/// --threads`). `allowBase` false (the host file itself) refuses "base".
/// Errors name the file and the key.
FailureOr<TargetSpec> parseTargetFile(StringRef path, std::string &error,
                                      bool allowBase = true);

/// parseTargetFile's rules over an already parsed JSON object: errors start
/// with `origin` (e.g. "target file 'F'"), and `sourceOf` is the spec's
/// source when the object names none.
FailureOr<TargetSpec> parseTargetObject(const llvm::json::Object &object, StringRef origin,
                                        StringRef sourceOf, std::string &error,
                                        bool allowBase);

/// The module attribute that records the target a module is planned for
/// (IREE carries its target the same way): a dictionary with the target
/// file's keys, every figure of the TargetSpec (no "base"). The planner
/// sets it on the module it plans (`--offload-plan-memory`); the host-offload
/// passes price with it when given no target of their own, so the planner's
/// mechanisms and its prediction use one cost model.
constexpr llvm::StringLiteral kTargetAttrName = OffloadDialect::kTargetAttrName;

/// `spec` as the value of kTargetAttrName (f64 floats, i64 integers; a
/// round trip through targetSpecFromAttr gives `spec` back exactly).
Attribute targetSpecToAttr(MLIRContext *ctx, const TargetSpec &spec);
/// Reads a kTargetAttrName value with the target file's rules; on failure
/// `error` names the attribute and the key.
FailureOr<TargetSpec> targetSpecFromAttr(Attribute attr, std::string &error);
/// The target recorded on the module around `op` (nullopt when it has
/// none); fails when the attribute is not a valid target.
FailureOr<std::optional<TargetSpec>> moduleTarget(Operation *op, std::string &error);

/// The cost model the passes use: a roofline estimate of each op's seconds
/// (Williams, Waterman, Patterson, "Roofline", CACM 2009) and copy times.
/// The defaults describe one NVIDIA H100 PCIe card derated to what kernels
/// and copies reach in practice: the datasheet gives 51 TFLOPS fp32,
/// 2.0 TB/s HBM2e and a PCIe 5.0 x16 link (64 GB/s per direction); the
/// defaults take 25 TFLOPS, 1.5 TB/s and 25 GB/s, with efficiencies of 1
/// (the derating is in the rates). The planner builds one from a TargetSpec.
struct TargetModel {
  double flopsPerSecond = 25e12;        ///< FLOP/s of compute kernels
  /// FLOP/s of bf16/f16 matrix products, convolutions and attention
  /// (TargetSpec::bf16FlopsPerSecond; 0: flopsPerSecond).
  double bf16FlopsPerSecond = 0, f16FlopsPerSecond = 0;
  double memoryBytesPerSecond = 1.5e12; ///< bytes/s of device memory traffic
  double linkBytesPerSecond = 25e9;     ///< bytes/s host->device
  double deviceToHostBytesPerSecond = 25e9; ///< bytes/s device->host
  double hostUpdateBytesPerSecond = 20e9;   ///< bytes/s of host-side updates
  double collectiveBytesPerSecond = 1.25e9; ///< TargetSpec's
  double gemmEfficiency = 1, convEfficiency = 1, otherFlopsEfficiency = 1,
         memoryEfficiency = 1;
  /// Measured per-op rates (TargetSpec::opFlopsPerSecond, opBytesPerSecond):
  /// an op named here costs its FLOPs or bytes at that rate instead of the
  /// roofline.
  std::map<std::string, double> opFlopsPerSecond, opBytesPerSecond;
  /// TargetSpec::sizedFlopsPerSecond.
  std::map<std::string, std::vector<std::pair<double, double>>> sizedFlopsPerSecond;
  /// TargetSpec::sizedBytesPerSecond.
  std::map<std::string, std::vector<std::pair<double, double>>> sizedBytesPerSecond;
  /// TargetSpec::copyLatencySeconds.
  double copyLatencySeconds = 0;

  static TargetModel fromSpec(const TargetSpec &spec);

  /// Estimated seconds of `op` on the target: max(FLOPs / (peak x the op
  /// kind's efficiency), bytes moved / (bandwidth x memory efficiency)),
  /// from the op's CostOpInterface; an op with a measured rate
  /// (opFlopsPerSecond, opBytesPerSecond) costs its FLOPs or bytes at that
  /// rate; an optimizer update over host values costs its bytes at
  /// hostUpdateBytesPerSecond; a recompute region costs its ops; 0 for ops
  /// without a cost (copies, waits, markers, views).
  double opSeconds(Operation *op) const;
  /// The size that sizedFlopsPerSecond interpolates on for `op`: m*n*k of
  /// one product of an offload.matmul that runs as one GEMM call per batch
  /// element (b batched, or a transposed); N*Ho*Wo of offload.conv2d and
  /// its backward kernels; -1 for other ops and dynamic shapes.
  static double opSize(Operation *op);
  /// Seconds of a host->device copy of `bytes` bytes (copyLatencySeconds
  /// plus bytes / linkBytesPerSecond).
  double copySeconds(int64_t bytes) const {
    return copyLatencySeconds + double(bytes) / linkBytesPerSecond;
  }
  /// Seconds of an all-reduce of `bytes` bytes across data-parallel ranks:
  /// a ring all-reduce sends and receives 2 (W-1)/W times the buffer over
  /// each rank's link (Patarasuk & Yuan, J. Parallel Distrib. Comput. 2009;
  /// NCCL's "bus bandwidth"), bounded here by its large-W limit 2 x bytes /
  /// collectiveBytesPerSecond, since the world size is the runtime's.
  double allReduceSeconds(int64_t bytes) const {
    return 2.0 * double(bytes) / collectiveBytesPerSecond;
  }
  /// Seconds of a device->host copy of `bytes` bytes.
  double copyToHostSeconds(int64_t bytes) const {
    return copyLatencySeconds + double(bytes) / deviceToHostBytesPerSecond;
  }
};

} // namespace offload
} // namespace mlir

#endif
