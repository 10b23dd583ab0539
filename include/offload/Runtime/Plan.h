//===- Plan.h - Executable plan: in-memory form, loading, building -*- C++
//-*-===//
//
// Part of offload. A plan is the static schedule that the compiler's lowering
// emits and the runtime executes: buffers at fixed byte offsets in a device
// arena and a host arena, instructions on three streams synchronised by
// events, bindings from external names to buffers, and phases (forward,
// backward_input, backward_weight, optimizer) as instruction ranges.
//
// On disk a plan is a size-prefixed FlatBuffers buffer (schema Plan.fbs,
// identifier "OFLP", format_version kPlanFormatVersion) followed by a 4-byte
// little-endian CRC-32 (zlib's) of every byte before it. Plan::load verifies
// the FlatBuffer, the format version and then the checksum (a file changed in
// any byte after it was written is refused), and then validates its
// semantics; every error names the offending instruction or buffer. See
// docs/runtime.md.
//
// No MLIR, LLVM or FlatBuffers types appear in this header.
//
//===----------------------------------------------------------------------===//
#ifndef OFFLOAD_RUNTIME_PLAN_H
#define OFFLOAD_RUNTIME_PLAN_H

#include "offload/Runtime/PlanFormat.h"
#include "offload/Runtime/Status.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace offload {
namespace rt {

/// The plan format version this runtime reads and writes.
/// Version 3: the workspace buffer (BufferRole::Workspace,
/// PlanData::workspaceBuffer). Version 4: the CRC-32 trailer after the
/// FlatBuffer.
constexpr uint32_t kPlanFormatVersion = 4;

enum class MemorySpace : uint8_t { Device = 0, Host = 1 };

enum class BufferRole : uint8_t {
  Parameter = 0,
  State = 1,
  OptimizerState = 2,
  Input = 3,
  Output = 4,
  Gradient = 5,
  Temporary = 6,
  Constant = 7,
  /// Library scratch of the backend (PlanData::workspaceBuffer).
  Workspace = 8
};

/// Streams of a plan. Instructions on one stream run in program order.
enum Stream : uint8_t {
  ComputeStream = 0,
  HostToDeviceStream = 1,
  DeviceToHostStream = 2,
  /// Collectives across data-parallel ranks (offload.all_reduce).
  CommStream = 3,
  NumStreams = 4
};

const char *memorySpaceName(MemorySpace s);
const char *bufferRoleName(BufferRole r);
const char *streamName(int stream);

/// A buffer: a fixed byte range [offset, offset + size) of the arena of
/// `space`, live from instruction `liveFirst` to `liveLast` (inclusive).
struct BufferDesc {
  std::string name;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  MemorySpace space = MemorySpace::Device;
  uint64_t offset = 0; ///< bytes
  uint64_t size = 0;   ///< bytes reserved (>= numel * dtypeSize)
  BufferRole role = BufferRole::Temporary;
  int32_t liveFirst = 0;
  int32_t liveLast = 0;
  /// The buffer whose bytes this one reuses (reshape view), or -1.
  int32_t aliasOf = -1;

  int64_t numel() const {
    int64_t n = 1;
    for (int64_t d : shape)
      n *= d;
    return n;
  }
  /// Bytes of the tensor's elements (numel * dtype size).
  uint64_t dataBytes() const { return uint64_t(numel()) * dtypeSize(dtype); }
};

enum class BindingDirection : uint8_t { In = 0, Out = 1 };

/// An external name bound to a buffer: "fc1.weight" In (parameter value
/// before the step), "fc1.weight" Out (value after the step), "grad:fc1.weight"
/// Out, "loss" Out, "x" In (role Input).
///
/// A slice binding (sliceOf non-empty) binds the buffer to bytes
/// [sliceOffset, sliceOffset + buffer bytes) of the tensor of shape
/// wholeShape bound as `sliceOf`: "fc.weight[0:4096]" is rows 0..4095 of
/// "fc.weight". Users bind and read the whole tensor; the session copies the
/// slices in and assembles them out.
struct BindingDesc {
  std::string name;
  int32_t buffer = -1;
  BufferRole role = BufferRole::Input;
  BindingDirection direction = BindingDirection::In;
  std::string sliceOf;
  std::vector<int64_t> wholeShape;
  uint64_t sliceOffset = 0; ///< bytes
};

/// Runtime ops handled by the executor itself (no kernel).
constexpr const char *kOpToHost = "offload.to_host";
constexpr const char *kOpToDevice = "offload.to_device";
constexpr const char *kOpWait = "offload.wait";
constexpr const char *kOpReshape = "offload.reshape";
/// Averages a bucket across data-parallel ranks (Communicator.h): reads
/// inputs[i], writes outputs[i] (same dtype and size), on the CommStream;
/// attribute bucket (int).
constexpr const char *kOpAllReduce = "offload.all_reduce";
/// ZeRO-1's collectives (docs/data_parallel.md): attributes bucket and
/// world_size (the job's size the plan was built for).
constexpr const char *kOpReduceScatter = "offload.reduce_scatter";
constexpr const char *kOpAllGather = "offload.all_gather";

/// One instruction. Copies (to_host/to_device) read inputs[0] and write
/// outputs[0]; optional attributes src_offset, dst_offset, bytes (ints) copy a
/// byte slice (default: the whole source). offload.wait only waits.
struct InstructionDesc {
  std::string op;
  std::vector<int32_t> inputs; ///< -1 = absent optional operand
  std::vector<int32_t> outputs;
  AttrMap attrs;
  int stream = ComputeStream;
  std::vector<int32_t> waitEvents;
  int32_t recordEvent = -1;
};

/// Instructions [first, last) named forward | backward | backward_input |
/// backward_weight | optimizer.
struct PhaseDesc {
  std::string name;
  int32_t first = 0;
  int32_t last = 0;
};

struct ConstantDesc {
  int32_t buffer = -1;
  std::vector<uint8_t> data;
};

/// The plain-data content of a plan.
struct PlanData {
  uint32_t formatVersion = kPlanFormatVersion;
  std::string producer;
  uint64_t deviceCapacity = 0; ///< bytes
  uint64_t hostCapacity = 0;   ///< bytes
  uint64_t predictedPeakDeviceBytes = 0;
  int32_t numEvents = 0;
  std::vector<BufferDesc> buffers;
  std::vector<BindingDesc> bindings;
  std::vector<InstructionDesc> instructions;
  std::vector<PhaseDesc> phases;
  std::vector<ConstantDesc> constants;
  /// The workspace buffer or -1: a device buffer of role Workspace, live
  /// over the whole step, named by no instruction or binding; its `size`
  /// bytes are the scratch the backend gives its libraries (CUDA: cuDNN's
  /// convolution algorithms and cuBLAS; host: allocated and counted in the
  /// measured peak, otherwise unused). docs/runtime.md, "Workspace".
  int32_t workspaceBuffer = -1;
};

/// Peak bytes of live device buffers over the plan, following the runtime's
/// allocation rule: at instruction i the live set is every non-alias device
/// buffer with liveFirst <= i <= liveLast. A plan with no instruction counts
/// the buffers live at 0.
uint64_t computePeakDeviceBytes(const PlanData &plan);

/// Checks everything the runtime relies on; the message names the first
/// offending buffer/instruction/binding. See docs/runtime.md, "Validation".
Status validatePlan(const PlanData &plan);

/// A loaded, verified, validated plan. Immutable; share it between sessions.
class Plan {
public:
  /// Reads, verifies and validates a plan file.
  static Expected<std::shared_ptr<const Plan>> load(const std::string &path);
  /// Same, from bytes in memory.
  static Expected<std::shared_ptr<const Plan>> fromBytes(const uint8_t *data,
                                                         size_t size);
  /// Validates `data` and wraps it (no serialization round trip).
  static Expected<std::shared_ptr<const Plan>> fromData(PlanData data);

  /// Serializes plan data to the file format: the size-prefixed FlatBuffer
  /// and its CRC-32 trailer (no validation).
  static std::vector<uint8_t> serialize(const PlanData &data);
  /// Writes serialize(data) to `path`.
  static Status save(const PlanData &data, const std::string &path);

  const PlanData &data() const { return data_; }
  /// Index of the binding (name, direction) or -1.
  int findBinding(const std::string &name, BindingDirection dir) const;
  /// Index of the phase or -1.
  int findPhase(const std::string &name) const;
  /// Distinct op names of the instructions, in first-use order.
  std::vector<std::string> opNames() const;
  /// A readable multi-line listing of the plan.
  std::string dump() const;

private:
  PlanData data_;
};

/// Builds plans without knowing FlatBuffers. Offsets are assigned by the
/// caller (the compiler) or, with autoLayout(), by a simple first-fit over
/// live intervals. Usage:
///   PlanBuilder b;  int w = b.buffer("fc.weight", DType::F32, {4, 8},
///                                    BufferRole::Parameter);
///   b.bindIn("fc.weight", w); b.instr("offload.linear", {x, w, -1}, {y});
///   PlanData p = b.finish();   // computes intervals/offsets/capacity
class PlanBuilder {
public:
  PlanBuilder();
  /// Adds a buffer; returns its id. Offset is assigned by finish() unless
  /// setOffset() is called. Size defaults to the data bytes.
  int buffer(const std::string &name, DType dtype, std::vector<int64_t> shape,
             BufferRole role, MemorySpace space = MemorySpace::Device);
  /// A view of `base`'s bytes with another shape (reshape); same size.
  int alias(const std::string &name, int base, std::vector<int64_t> shape);
  void setOffset(int buffer, uint64_t offset);
  void setLive(int buffer, int first, int last);
  BufferDesc &buf(int id) { return data_.buffers[id]; }

  void bindIn(const std::string &name, int buffer);
  void bindOut(const std::string &name, int buffer);
  /// Makes the last binding a slice of `wholeName` (shape `wholeShape`)
  /// starting `offsetBytes` into it.
  void sliceLastBinding(const std::string &wholeName,
                        std::vector<int64_t> wholeShape, uint64_t offsetBytes);

  /// Appends an instruction; returns its index.
  int instr(const std::string &op, std::vector<int32_t> inputs,
            std::vector<int32_t> outputs, AttrMap attrs = {},
            int stream = ComputeStream, std::vector<int32_t> waitEvents = {},
            int32_t recordEvent = -1);
  /// A fresh event id.
  int event() { return data_.numEvents++; }
  /// Phase [first, last); call after its instructions are added.
  void phase(const std::string &name, int first, int last);
  /// Phase from the end of the previous phase to the current instruction
  /// count.
  void endPhase(const std::string &name);
  void constant(int buffer, std::vector<uint8_t> bytes);

  void setDeviceCapacity(uint64_t bytes) { deviceCapacity_ = bytes; }
  void setHostCapacity(uint64_t bytes) { hostCapacity_ = bytes; }
  void setPredictedPeak(uint64_t bytes) { predictedPeak_ = bytes; }
  void setProducer(std::string p) { data_.producer = std::move(p); }
  /// Gives the plan a workspace of `bytes` bytes: a device buffer
  /// "workspace" (dtype Bool, the one-byte type, shape {bytes}), role
  /// Workspace, live over the whole step, offset assigned by finish() like
  /// any buffer; a second call resizes it. Returns its id; bytes == 0 adds
  /// nothing (returns the current id, -1 when none).
  int workspace(uint64_t bytes);

  /// Completes the plan: live intervals of buffers not set explicitly are
  /// derived from their uses (bound inputs and constants from 0, bound
  /// outputs to the end); offsets not set explicitly are laid out first-fit
  /// (alignment 256 bytes); capacities default to the arena high-water
  /// marks; predicted peak defaults to computePeakDeviceBytes().
  PlanData finish();

private:
  PlanData data_;
  std::vector<bool> offsetSet_, liveSet_;
  uint64_t deviceCapacity_ = 0, hostCapacity_ = 0, predictedPeak_ = 0;
};

/// Gives `plan`, which has no workspace buffer, one of `bytes` bytes: a new
/// device buffer "workspace" placed after every other device byte (the
/// device arena grows by it, 256-byte aligned), live over the whole step;
/// the predicted peak is recomputed. A plan that already has a workspace is
/// left as it is; bytes == 0 does nothing. For runners (offload-run
/// --workspace-bytes) and tests: a compiler reserves the workspace in its
/// own memory plan (PlanBuilder::workspace). Errors: a plan whose
/// predicted peak disagrees with its buffers (not validated).
Status addWorkspace(PlanData &plan, uint64_t bytes);

/// Attribute helpers for PlanBuilder users.
AttrValue attrInts(std::vector<int64_t> v);
AttrValue attrInt(int64_t v);
AttrValue attrFloats(std::vector<double> v);
AttrValue attrFloat(double v);
AttrValue attrString(std::string s);

} // namespace rt
} // namespace offload

#endif // OFFLOAD_RUNTIME_PLAN_H
