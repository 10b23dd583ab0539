//===- Plan.cpp - Plan serialization, verification, validation, dump ------===//
//
// Part of offload. Converts between PlanData and the FlatBuffers plan file
// (Plan.fbs), verifies loaded bytes with the FlatBuffers Verifier and
// validates the plan's semantics (docs/runtime.md, "Validation").
//
//===----------------------------------------------------------------------===//

#include "offload/Runtime/Plan.h"
#include "offload/Support/InputFiles.h"
#include "offload/Runtime/OpSignatures.h"
#include "offload/Runtime/Plan_generated.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include <cerrno>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

using namespace offload::rt;

const char *offload::rt::memorySpaceName(MemorySpace s) {
  return s == MemorySpace::Device ? "device" : "host";
}

const char *offload::rt::bufferRoleName(BufferRole r) {
  switch (r) {
  case BufferRole::Parameter:
    return "parameter";
  case BufferRole::State:
    return "state";
  case BufferRole::OptimizerState:
    return "optimizer_state";
  case BufferRole::Input:
    return "input";
  case BufferRole::Output:
    return "output";
  case BufferRole::Gradient:
    return "gradient";
  case BufferRole::Temporary:
    return "temporary";
  case BufferRole::Constant:
    return "constant";
  case BufferRole::Workspace:
    return "workspace";
  }
  return "?";
}

const char *offload::rt::streamName(int stream) {
  switch (stream) {
  case ComputeStream:
    return "compute";
  case HostToDeviceStream:
    return "h2d";
  case DeviceToHostStream:
    return "d2h";
  case CommStream:
    return "comm";
  }
  return "?";
}

//===----------------------------------------------------------------------===//
// Serialization
//===----------------------------------------------------------------------===//

/// CRC-32 (zlib; polynomial 0xEDB88320) of a plan file's bytes before its
/// trailer. zlib takes at most 4 GiB per call, so longer inputs are fed in
/// pieces.
static uint32_t contentChecksum(const uint8_t *bytes, size_t size) {
  uLong crc = crc32(0L, Z_NULL, 0);
  while (size > 0) {
    uInt n = uInt(std::min<size_t>(size, size_t(1) << 30));
    crc = crc32(crc, bytes, n);
    bytes += n;
    size -= n;
  }
  return uint32_t(crc);
}

std::vector<uint8_t> Plan::serialize(const PlanData &d) {
  flatbuffers::FlatBufferBuilder fbb(1024);
  std::vector<flatbuffers::Offset<fb::Buffer>> bufs;
  for (const BufferDesc &b : d.buffers)
    bufs.push_back(fb::CreateBufferDirect(
        fbb, b.name.c_str(), fb::DType(uint8_t(b.dtype)), &b.shape,
        fb::MemorySpace(uint8_t(b.space)), b.offset, b.size,
        fb::BufferRole(uint8_t(b.role)), b.liveFirst, b.liveLast, b.aliasOf));
  std::vector<flatbuffers::Offset<fb::Binding>> binds;
  for (const BindingDesc &b : d.bindings)
    binds.push_back(fb::CreateBindingDirect(
        fbb, b.name.c_str(), b.buffer, fb::BufferRole(uint8_t(b.role)),
        fb::BindingDirection(uint8_t(b.direction)),
        b.sliceOf.empty() ? nullptr : b.sliceOf.c_str(),
        b.sliceOf.empty() ? nullptr : &b.wholeShape, b.sliceOffset));
  std::vector<flatbuffers::Offset<fb::Instruction>> instrs;
  for (const InstructionDesc &in : d.instructions) {
    std::vector<flatbuffers::Offset<fb::Attr>> attrs;
    for (const auto &e : in.attrs.entries()) {
      const AttrValue &v = e.second;
      attrs.push_back(fb::CreateAttrDirect(fbb, e.first.c_str(),
                                           fb::AttrKind(uint8_t(v.kind)),
                                           &v.ints, &v.floats, v.str.c_str()));
    }
    instrs.push_back(fb::CreateInstructionDirect(
        fbb, in.op.c_str(), &in.inputs, &in.outputs, &attrs, uint8_t(in.stream),
        &in.waitEvents, in.recordEvent));
  }
  std::vector<flatbuffers::Offset<fb::Phase>> phases;
  for (const PhaseDesc &p : d.phases)
    phases.push_back(
        fb::CreatePhaseDirect(fbb, p.name.c_str(), p.first, p.last));
  std::vector<flatbuffers::Offset<fb::ConstantData>> consts;
  for (const ConstantDesc &c : d.constants)
    consts.push_back(fb::CreateConstantDataDirect(fbb, c.buffer, &c.data));
  auto root = fb::CreatePlanDirect(fbb, d.formatVersion, d.producer.c_str(),
                                   d.deviceCapacity, d.hostCapacity,
                                   d.predictedPeakDeviceBytes, d.numEvents,
                                   &bufs, &binds, &instrs, &phases, &consts,
                                   d.workspaceBuffer);
  fb::FinishSizePrefixedPlanBuffer(fbb, root);
  std::vector<uint8_t> bytes(fbb.GetBufferPointer(),
                             fbb.GetBufferPointer() + fbb.GetSize());
  uint32_t crc = contentChecksum(bytes.data(), bytes.size());
  for (int i = 0; i < 4; ++i)
    bytes.push_back(uint8_t(crc >> (8 * i)));
  return bytes;
}

Status Plan::save(const PlanData &data, const std::string &path) {
  std::vector<uint8_t> bytes = serialize(data);
  std::ofstream os(path, std::ios::binary | std::ios::trunc);
  if (!os)
    return Status::error("cannot open '" + path + "' for writing");
  os.write(reinterpret_cast<const char *>(bytes.data()),
           std::streamsize(bytes.size()));
  if (!os)
    return Status::error("error writing '" + path + "'");
  return Status::success();
}

//===----------------------------------------------------------------------===//
// Loading
//===----------------------------------------------------------------------===//

template <typename T, typename V>
static std::vector<T> toVec(const flatbuffers::Vector<V> *v) {
  std::vector<T> out;
  if (v)
    for (auto x : *v)
      out.push_back(T(x));
  return out;
}

static std::string str(const flatbuffers::String *s) {
  return s ? s->str() : std::string();
}

Expected<std::shared_ptr<const Plan>> Plan::load(const std::string &path) {
  // A regular file only: a FIFO (which would block in open() without a
  // writer), a device such as /dev/zero (which never ends) or a directory
  // is refused by name (InputFiles.h). The file is mapped, not read into a
  // buffer: the checksum and the FlatBuffers verifier read it in place,
  // PlanData takes what it needs, and the mapping is dropped before
  // returning (a plan's constants are the only bytes it keeps a copy of).
  int fd;
  uint64_t fileSize;
  if (std::string e = ::offload::openRegularFile(path, "plan file", fd, fileSize);
      !e.empty())
    return Status::error(e);
  Expected<std::shared_ptr<const Plan>> p =
      Status::error("plan file '" + path + "' was not read");
  if (fileSize > 0) {
    size_t size = size_t(fileSize);
    void *map = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (map == MAP_FAILED) {
      int e = errno;
      ::close(fd);
      return Status::error("cannot map plan file '" + path +
                           "': " + std::strerror(e));
    }
    ::close(fd);
    p = fromBytes(static_cast<const uint8_t *>(map), size);
    ::munmap(map, size);
  } else {
    ::close(fd);
    p = fromBytes(nullptr, 0);
  }
  if (!p)
    return p.status().withContext("plan '" + path + "': ");
  return p;
}

/// FlatBuffers 2.0.8's verifier checks only 4-byte alignment of vectors; a
/// corrupt file can misalign the elements of an 8-byte vector.
template <typename T> static bool misaligned(const flatbuffers::Vector<T> *v) {
  return v && v->size() > 0 &&
         reinterpret_cast<uintptr_t>(v->data()) % alignof(T) != 0;
}

Expected<std::shared_ptr<const Plan>> Plan::fromBytes(const uint8_t *bytes,
                                                      size_t size) {
  // Verify and read from 8-byte aligned storage.
  std::vector<uint64_t> aligned;
  if (reinterpret_cast<uintptr_t>(bytes) % 8 != 0) {
    aligned.resize((size + 7) / 8);
    std::memcpy(aligned.data(), bytes, size);
    bytes = reinterpret_cast<const uint8_t *>(aligned.data());
  }
  // Layout: uint32 size prefix, then the FlatBuffer whose identifier sits at
  // bytes [8, 12). The prefix makes any truncation detectable.
  if (size < 12)
    return Status::error("file is truncated (" + std::to_string(size) +
                         " bytes; not a plan)");
  if (!fb::SizePrefixedPlanBufferHasIdentifier(bytes)) {
    std::string id(reinterpret_cast<const char *>(bytes) + 8, 4);
    for (char &c : id)
      if (c < 32 || c > 126)
        c = '?';
    return Status::error("file identifier is '" + id + "', expected '" +
                         std::string(fb::PlanIdentifier()) +
                         "' (not an offload plan)");
  }
  // Then the FlatBuffer (prefix + 4 bytes) and the 4-byte CRC-32 trailer.
  // The format version is checked before the trailer, so that a plan of
  // another version (which may have none) gets the version error.
  uint64_t prefix = flatbuffers::ReadScalar<uint32_t>(bytes);
  uint64_t fbBytes = prefix + 4;
  if (fbBytes > size)
    return Status::error("plan is truncated: it declares " +
                         std::to_string(fbBytes + 4) + " bytes, the file has " +
                         std::to_string(size));
  flatbuffers::Verifier verifier(bytes, size_t(fbBytes));
  if (!fb::VerifySizePrefixedPlanBuffer(verifier))
    return Status::error("plan is truncated or corrupt (FlatBuffers "
                         "verification failed on " +
                         std::to_string(size) + " bytes)");
  const fb::Plan *p = fb::GetSizePrefixedPlan(bytes);
  if (p->format_version() != kPlanFormatVersion)
    return Status::error("plan format version " +
                         std::to_string(p->format_version()) +
                         " is not supported (this runtime reads version " +
                         std::to_string(kPlanFormatVersion) +
                         "); re-lower the model with a matching compiler");
  if (fbBytes + 4 > size)
    return Status::error("plan is truncated: it declares " +
                         std::to_string(fbBytes + 4) + " bytes (with its " +
                         "4-byte checksum), the file has " +
                         std::to_string(size));
  if (fbBytes + 4 < size)
    return Status::error(
        "plan is corrupt: " + std::to_string(size - fbBytes - 4) +
        " trailing bytes after the declared " + std::to_string(fbBytes + 4));
  uint32_t stored = flatbuffers::ReadScalar<uint32_t>(bytes + fbBytes);
  uint32_t actual = contentChecksum(bytes, size_t(fbBytes));
  if (stored != actual) {
    char buf[96];
    std::snprintf(buf, sizeof(buf),
                  "stored CRC-32 0x%08x, contents give 0x%08x", stored, actual);
    return Status::error(std::string("plan is corrupt: checksum mismatch (") +
                         buf + "); the file changed after it was written");
  }
  bool bad = false;
  if (p->buffers())
    for (const fb::Buffer *b : *p->buffers())
      bad |= misaligned(b->shape());
  if (p->instructions())
    for (const fb::Instruction *in : *p->instructions())
      if (in->attrs())
        for (const fb::Attr *a : *in->attrs())
          bad |= misaligned(a->ints()) || misaligned(a->floats());
  if (bad)
    return Status::error("plan is corrupt (misaligned 8-byte vector)");
  PlanData d;
  d.formatVersion = p->format_version();
  d.producer = str(p->producer());
  d.deviceCapacity = p->device_capacity();
  d.hostCapacity = p->host_capacity();
  d.predictedPeakDeviceBytes = p->predicted_peak_device_bytes();
  d.numEvents = p->num_events();
  d.workspaceBuffer = p->workspace_buffer();
  if (p->buffers())
    for (const fb::Buffer *b : *p->buffers()) {
      BufferDesc bd;
      bd.name = str(b->name());
      bd.dtype = DType(uint8_t(b->dtype()));
      bd.shape = toVec<int64_t>(b->shape());
      bd.space = MemorySpace(uint8_t(b->space()));
      bd.offset = b->offset();
      bd.size = b->size();
      bd.role = BufferRole(uint8_t(b->role()));
      bd.liveFirst = b->live_first();
      bd.liveLast = b->live_last();
      bd.aliasOf = b->alias_of();
      d.buffers.push_back(std::move(bd));
    }
  if (p->bindings())
    for (const fb::Binding *b : *p->bindings())
    {
      BindingDesc bd{str(b->name()), b->buffer(),
                     BufferRole(uint8_t(b->role())),
                     BindingDirection(uint8_t(b->direction()))};
      bd.sliceOf = str(b->slice_of());
      if (b->whole_shape())
        bd.wholeShape.assign(b->whole_shape()->begin(), b->whole_shape()->end());
      bd.sliceOffset = b->slice_offset();
      d.bindings.push_back(std::move(bd));
    }
  if (p->instructions())
    for (const fb::Instruction *in : *p->instructions()) {
      InstructionDesc id;
      id.op = str(in->op());
      id.inputs = toVec<int32_t>(in->inputs());
      id.outputs = toVec<int32_t>(in->outputs());
      if (in->attrs())
        for (const fb::Attr *a : *in->attrs()) {
          AttrValue v;
          v.kind = AttrValue::Kind(uint8_t(a->kind()));
          v.ints = toVec<int64_t>(a->ints());
          v.floats = toVec<double>(a->floats());
          v.str = str(a->str());
          id.attrs.set(str(a->name()), std::move(v));
        }
      id.stream = in->stream();
      id.waitEvents = toVec<int32_t>(in->wait_events());
      id.recordEvent = in->record_event();
      d.instructions.push_back(std::move(id));
    }
  if (p->phases())
    for (const fb::Phase *ph : *p->phases())
      d.phases.push_back({str(ph->name()), ph->first(), ph->last()});
  if (p->constants())
    for (const fb::ConstantData *c : *p->constants())
      d.constants.push_back({c->buffer(), toVec<uint8_t>(c->data())});
  return fromData(std::move(d));
}

Expected<std::shared_ptr<const Plan>> Plan::fromData(PlanData data) {
  if (Status s = validatePlan(data); !s.ok())
    return s;
  // Kernels see every attribute of their op: the ODS defaults of those an
  // instruction leaves out (a plan written by an older lowering).
  for (InstructionDesc &in : data.instructions)
    if (const OpSignature *sig = findOpSignature(in.op))
      fillDefaultAttrs(*sig, in.attrs);
  auto p = std::shared_ptr<Plan>(new Plan());
  p->data_ = std::move(data);
  return std::shared_ptr<const Plan>(std::move(p));
}

//===----------------------------------------------------------------------===//
// Validation
//===----------------------------------------------------------------------===//

uint64_t offload::rt::computePeakDeviceBytes(const PlanData &d) {
  int n = int(d.instructions.size());
  std::vector<int64_t> delta(size_t(std::max(n, 1)) + 1, 0);
  for (const BufferDesc &b : d.buffers) {
    if (b.space != MemorySpace::Device || b.aliasOf >= 0)
      continue;
    int f = std::max(0, b.liveFirst);
    int l = std::min(std::max(n, 1) - 1, b.liveLast);
    if (l < f)
      continue;
    delta[size_t(f)] += int64_t(b.size);
    delta[size_t(l) + 1] -= int64_t(b.size);
  }
  int64_t cur = 0, peak = 0;
  for (size_t i = 0; i + 1 < delta.size(); ++i) {
    cur += delta[i];
    peak = std::max(peak, cur);
  }
  return uint64_t(peak);
}

static std::string bufName(const PlanData &d, int id) {
  return "buffer " + std::to_string(id) + " '" + d.buffers[size_t(id)].name +
         "'";
}

static std::string instrName(const PlanData &d, int i) {
  return "instruction " + std::to_string(i) + " (" +
         d.instructions[size_t(i)].op + ")";
}

static bool isBoundInRole(BufferRole r) {
  return r == BufferRole::Parameter || r == BufferRole::State ||
         r == BufferRole::OptimizerState || r == BufferRole::Input;
}

Status offload::rt::validatePlan(const PlanData &d) {
  auto err = [](std::string m) { return Status::error(std::move(m)); };
  if (d.formatVersion != kPlanFormatVersion)
    return err("plan format version " + std::to_string(d.formatVersion) +
               " is not supported (expected " +
               std::to_string(kPlanFormatVersion) + ")");
  int n = int(d.instructions.size());
  int nb = int(d.buffers.size());
  int lastIdx = std::max(n, 1) - 1;
  if (d.numEvents < 0)
    return err("num_events is negative");
  if (d.workspaceBuffer < -1 || d.workspaceBuffer >= nb)
    return err("workspace_buffer " + std::to_string(d.workspaceBuffer) +
               " is not a buffer id (plan has " + std::to_string(nb) +
               " buffers) nor -1");

  // Buffers.
  for (int i = 0; i < nb; ++i) {
    const BufferDesc &b = d.buffers[size_t(i)];
    std::string bn = bufName(d, i);
    if (uint8_t(b.dtype) > kMaxDType)
      return err(bn + ": unknown dtype " + std::to_string(int(b.dtype)));
    if (uint8_t(b.space) > 1)
      return err(bn + ": unknown memory space");
    if (uint8_t(b.role) > uint8_t(BufferRole::Workspace))
      return err(bn + ": unknown role");
    if (b.role == BufferRole::Workspace && i != d.workspaceBuffer)
      return err(bn + ": has role workspace but is not the plan's "
                      "workspace_buffer (" +
                 std::to_string(d.workspaceBuffer) + ")");
    uint64_t numel = 1;
    for (int64_t dim : b.shape) {
      if (dim < 0)
        return err(bn + ": negative dimension in shape");
      // Each dimension is bounded too, not only the product: a zero
      // dimension must not let a corrupted 2^62 through to the kernels.
      if (uint64_t(dim) > (uint64_t(1) << 48) ||
          (dim != 0 && numel > (uint64_t(1) << 48) / uint64_t(dim)))
        return err(bn + ": shape too large");
      numel *= uint64_t(dim);
    }
    if (b.size < b.dataBytes())
      return err(bn + ": size " + std::to_string(b.size) +
                 " bytes is smaller than its " + std::to_string(b.dataBytes()) +
                 " data bytes");
    uint64_t cap =
        b.space == MemorySpace::Device ? d.deviceCapacity : d.hostCapacity;
    if (b.offset > cap || b.size > cap - b.offset)
      return err(bn + ": bytes [" + std::to_string(b.offset) + ", " +
                 std::to_string(b.offset + b.size) + ") lie outside the " +
                 memorySpaceName(b.space) + " arena of " + std::to_string(cap) +
                 " bytes");
    if (b.liveFirst < 0 || b.liveLast < b.liveFirst || b.liveLast > lastIdx)
      return err(bn + ": live interval [" + std::to_string(b.liveFirst) + ", " +
                 std::to_string(b.liveLast) +
                 "] is not inside the plan's instructions [0, " +
                 std::to_string(lastIdx) + "]");
    if (b.aliasOf >= 0) {
      if (b.aliasOf >= nb || b.aliasOf == i)
        return err(bn + ": alias_of " + std::to_string(b.aliasOf) +
                   " is not a buffer id");
      const BufferDesc &base = d.buffers[size_t(b.aliasOf)];
      if (base.aliasOf >= 0)
        return err(bn + ": aliases " + bufName(d, b.aliasOf) +
                   ", which is itself an alias");
      if (base.space != b.space || b.offset < base.offset ||
          b.offset + b.size > base.offset + base.size)
        return err(bn + ": alias bytes are not inside " +
                   bufName(d, b.aliasOf));
      if (b.liveFirst < base.liveFirst || b.liveLast > base.liveLast)
        return err(bn + ": alias live interval is not inside that of " +
                   bufName(d, b.aliasOf));
    } else if (b.aliasOf < -1) {
      return err(bn + ": alias_of must be -1 or a buffer id");
    }
  }

  // The workspace: a whole-step device buffer that only the backend uses.
  if (d.workspaceBuffer != -1) {
    int ws = d.workspaceBuffer;
    const BufferDesc &w = d.buffers[size_t(ws)];
    std::string wn = "workspace " + bufName(d, ws);
    if (w.space != MemorySpace::Device)
      return err(wn + ": must be in device memory, not " +
                 memorySpaceName(w.space));
    if (w.role != BufferRole::Workspace)
      return err(wn + ": must have role workspace, not " +
                 std::string(bufferRoleName(w.role)));
    if (w.aliasOf >= 0)
      return err(wn + ": must not be an alias");
    if (w.liveFirst != 0 || w.liveLast != lastIdx)
      return err(wn + ": live interval [" + std::to_string(w.liveFirst) +
                 ", " + std::to_string(w.liveLast) +
                 "] must be the whole step [0, " + std::to_string(lastIdx) +
                 "]");
    for (int i = 0; i < nb; ++i)
      if (d.buffers[size_t(i)].aliasOf == ws)
        return err(bufName(d, i) + ": aliases the " + wn);
    for (int i = 0; i < n; ++i) {
      const InstructionDesc &in = d.instructions[size_t(i)];
      for (const auto *ids : {&in.inputs, &in.outputs})
        for (int id : *ids)
          if (id == ws)
            return err(instrName(d, i) + " names the " + wn +
                       ", which only the backend uses");
    }
  }

  // Overlapping bytes of simultaneously live buffers.
  for (int space = 0; space < 2; ++space) {
    std::vector<int> ids;
    for (int i = 0; i < nb; ++i)
      if (uint8_t(d.buffers[size_t(i)].space) == space &&
          d.buffers[size_t(i)].aliasOf < 0 && d.buffers[size_t(i)].size > 0)
        ids.push_back(i);
    std::sort(ids.begin(), ids.end(), [&](int a, int b) {
      return d.buffers[size_t(a)].offset < d.buffers[size_t(b)].offset;
    });
    for (size_t x = 0; x < ids.size(); ++x) {
      const BufferDesc &a = d.buffers[size_t(ids[x])];
      for (size_t y = x + 1; y < ids.size(); ++y) {
        const BufferDesc &b = d.buffers[size_t(ids[y])];
        if (b.offset >= a.offset + a.size)
          break;
        if (a.liveLast >= b.liveFirst && b.liveLast >= a.liveFirst)
          return err(bufName(d, ids[x]) + " and " + bufName(d, ids[y]) +
                     " overlap in the " + memorySpaceName(a.space) +
                     " arena while both are live");
      }
    }
  }

  // Event recorders in program order.
  std::vector<bool> recorded(size_t(d.numEvents), false);
  for (int i = 0; i < n; ++i) {
    const InstructionDesc &in = d.instructions[size_t(i)];
    std::string inn = instrName(d, i);
    if (in.op.empty())
      return err("instruction " + std::to_string(i) + ": empty op name");
    if (in.stream < 0 || in.stream >= NumStreams)
      return err(inn + ": stream " + std::to_string(in.stream) +
                 " is not 0 (compute), 1 (h2d), 2 (d2h) or 3 (comm)");
    auto checkUse = [&](int id, const char *what) -> Status {
      if (id < 0 || id >= nb)
        return err(inn + ": " + what + " buffer id " + std::to_string(id) +
                   " out of range (plan has " + std::to_string(nb) +
                   " buffers)");
      const BufferDesc &b = d.buffers[size_t(id)];
      if (i < b.liveFirst || i > b.liveLast)
        return err(inn + " uses " + bufName(d, id) +
                   " outside its live interval [" +
                   std::to_string(b.liveFirst) + ", " +
                   std::to_string(b.liveLast) + "]");
      return Status::success();
    };
    for (int id : in.inputs)
      if (id != -1)
        if (Status s = checkUse(id, "input"); !s.ok())
          return s;
    for (int id : in.outputs)
      if (Status s = checkUse(id, "output"); !s.ok())
        return s;
    for (int e : in.waitEvents) {
      if (e < 0 || e >= d.numEvents)
        return err(inn + ": waits on event " + std::to_string(e) +
                   " out of range (plan has " + std::to_string(d.numEvents) +
                   " events)");
      if (!recorded[size_t(e)])
        return err(inn + ": waits on event " + std::to_string(e) +
                   " that no earlier instruction records");
    }
    if (in.recordEvent != -1) {
      if (in.recordEvent < 0 || in.recordEvent >= d.numEvents)
        return err(inn + ": records event " + std::to_string(in.recordEvent) +
                   " out of range");
      recorded[size_t(in.recordEvent)] = true;
    }
    bool toHost = in.op == kOpToHost, toDevice = in.op == kOpToDevice;
    if (toHost || toDevice) {
      if (in.inputs.size() != 1 || in.outputs.size() != 1 || in.inputs[0] < 0)
        return err(inn + ": a copy has exactly one input and one output");
      const BufferDesc &src = d.buffers[size_t(in.inputs[0])];
      const BufferDesc &dst = d.buffers[size_t(in.outputs[0])];
      MemorySpace want = toHost ? MemorySpace::Device : MemorySpace::Host;
      if (src.space != want || dst.space == want)
        return err(inn + ": copies " + memorySpaceName(src.space) + " to " +
                   memorySpaceName(dst.space) + ", expected " +
                   (toHost ? "device to host" : "host to device"));
      int64_t so = in.attrs.getInt("src_offset", 0);
      int64_t dof = in.attrs.getInt("dst_offset", 0);
      int64_t bytes = in.attrs.getInt("bytes", int64_t(src.dataBytes()));
      if (so < 0 || dof < 0 || bytes < 0 ||
          uint64_t(so) + uint64_t(bytes) > src.size ||
          uint64_t(dof) + uint64_t(bytes) > dst.size)
        return err(inn + ": copy of " + std::to_string(bytes) +
                   " bytes from offset " + std::to_string(so) + " of " +
                   bufName(d, in.inputs[0]) + " to offset " +
                   std::to_string(dof) + " of " + bufName(d, in.outputs[0]) +
                   " exceeds a buffer");
    } else if (in.op == kOpWait) {
      if (!in.inputs.empty() || !in.outputs.empty())
        return err(inn + ": offload.wait takes no buffers");
    } else if (in.op == kOpAllReduce) {
      if (in.inputs.empty() || in.inputs.size() != in.outputs.size())
        return err(inn + ": offload.all_reduce reads one buffer per buffer "
                         "it writes, at least one");
      if (in.stream != CommStream)
        return err(inn + ": offload.all_reduce runs on the communication "
                         "stream (3)");
      for (size_t k = 0; k < in.inputs.size(); ++k) {
        if (in.inputs[k] < 0)
          return err(inn + ": offload.all_reduce input " + std::to_string(k) +
                     " is absent");
        const BufferDesc &a = d.buffers[size_t(in.inputs[k])];
        const BufferDesc &b = d.buffers[size_t(in.outputs[k])];
        if (a.dtype != b.dtype || a.dataBytes() != b.dataBytes() ||
            a.space != MemorySpace::Device || b.space != MemorySpace::Device ||
            (a.dtype != DType::F32 && a.dtype != DType::F64))
          return err(inn + ": offload.all_reduce pair " + std::to_string(k) +
                     " (" + bufName(d, in.inputs[k]) + " -> " +
                     bufName(d, in.outputs[k]) +
                     ") is not two device buffers of one f32/f64 size");
      }
    } else if (in.op == kOpReduceScatter || in.op == kOpAllGather) {
      // ZeRO-1: reduce_scatter reads n gradients then n parameters and
      // writes two shards; all_gather reads one shard (then the n
      // parameters it replaces, not read) and writes the n parameters. All device buffers of one f32/f64 dtype, the shard
      // ceil(total / world_size) elements.
      bool rs = in.op == kOpReduceScatter;
      int64_t w = in.attrs.getInt("world_size", 0);
      if (w < 1)
        return err(inn + ": " + in.op + " needs a world_size attribute of at least 1");
      if (in.stream != CommStream)
        return err(inn + ": " + in.op + " runs on the communication stream (3)");
      if (rs ? (in.inputs.empty() || in.inputs.size() % 2 != 0 || in.outputs.size() != 2)
             : (in.outputs.empty() || in.inputs.size() != 1 + in.outputs.size()))
        return err(inn + ": " + in.op +
                   (rs ? " reads n gradients then n parameters (n >= 1) and writes two shards"
                       : " reads one shard and the n parameters it replaces, and writes n "
                         "parameters (n >= 1)"));
      std::vector<int> all(in.inputs.begin(), in.inputs.end());
      all.insert(all.end(), in.outputs.begin(), in.outputs.end());
      for (int id : all)
        if (id < 0)
          return err(inn + ": " + in.op + " has an absent buffer");
      DType dt = d.buffers[size_t(all[0])].dtype;
      for (int id : all) {
        const BufferDesc &b = d.buffers[size_t(id)];
        if (b.dtype != dt || b.space != MemorySpace::Device ||
            (dt != DType::F32 && dt != DType::F64))
          return err(inn + ": " + in.op + " buffer " + bufName(d, id) +
                     " is not a device buffer of the bucket's f32/f64 dtype");
      }
      const std::vector<int> &full = rs ? in.inputs : in.outputs;
      size_t nFull = rs ? full.size() / 2 : full.size();
      int64_t n = 0;
      for (size_t k = 0; k < nFull; ++k)
        n += d.buffers[size_t(full[k])].numel();
      if (rs)
        for (size_t k = 0; k < nFull; ++k)
          if (d.buffers[size_t(full[k])].numel() != d.buffers[size_t(full[nFull + k])].numel())
            return err(inn + ": offload.reduce_scatter gradient " + std::to_string(k) +
                       " and its parameter differ in size");
      int64_t s = (n + w - 1) / w;
      for (int id : rs ? in.outputs : std::vector<int32_t>{in.inputs[0]})
        if (d.buffers[size_t(id)].numel() != s)
          return err(inn + ": " + in.op + " shard " + bufName(d, id) + " has " +
                     std::to_string(d.buffers[size_t(id)].numel()) + " elements; " +
                     std::to_string(n) + " over " + std::to_string(w) + " ranks make " +
                     std::to_string(s));
    } else {
      if (in.stream != ComputeStream)
        return err(inn + ": compute ops must be on the compute stream (0)");
      // Ops of the dialect against the op-signature table (OpSignatures.h);
      // ops of other namespaces are extension kernels, checked by them.
      if (in.op.rfind("offload.", 0) == 0) {
        const OpSignature *sig = findOpSignature(in.op);
        if (!sig)
          return err(inn + ": unknown op '" + in.op +
                     "' (not a kernel op of the offload dialect)");
        if (std::string m = checkOpSignature(*sig, in.inputs.size(),
                                             in.outputs.size(), in.attrs);
            !m.empty())
          return err("instruction " + std::to_string(i) + ": " + m);
      }
      if (in.op == kOpReshape) {
        if (in.inputs.size() != 1 || in.outputs.size() != 1 ||
            in.inputs[0] < 0 ||
            d.buffers[size_t(in.inputs[0])].dataBytes() !=
                d.buffers[size_t(in.outputs[0])].dataBytes())
          return err(inn + ": reshape needs one input and one output of "
                           "equal byte size");
      }
    }
  }

  // Bindings.
  std::set<std::pair<std::string, int>> seen;
  for (size_t k = 0; k < d.bindings.size(); ++k) {
    const BindingDesc &bd = d.bindings[k];
    std::string bn = "binding '" + bd.name + "'";
    if (bd.name.empty())
      return err("binding " + std::to_string(k) + " has an empty name");
    if (bd.buffer < 0 || bd.buffer >= nb)
      return err(bn + ": buffer id " + std::to_string(bd.buffer) +
                 " out of range");
    if (uint8_t(bd.role) > uint8_t(BufferRole::Workspace) ||
        uint8_t(bd.direction) > 1)
      return err(bn + ": unknown role or direction");
    if (!seen.insert({bd.name, int(bd.direction)}).second)
      return err(bn + " appears twice with the same direction");
    const BufferDesc &b = d.buffers[size_t(bd.buffer)];
    if (bd.buffer == d.workspaceBuffer)
      return err(bn + ": binds the workspace " + bufName(d, bd.buffer) +
                 ", which only the backend uses");
    if (!bd.sliceOf.empty()) {
      uint64_t whole = dtypeSize(b.dtype);
      for (int64_t dim : bd.wholeShape) {
        if (dim < 0)
          return err(bn + ": negative dimension in the whole shape of '" +
                     bd.sliceOf + "'");
        whole *= uint64_t(dim);
      }
      if (bd.wholeShape.empty() || bd.sliceOffset + b.dataBytes() > whole)
        return err(bn + ": slice of " + std::to_string(b.dataBytes()) +
                   " bytes at offset " + std::to_string(bd.sliceOffset) +
                   " does not fit in '" + bd.sliceOf + "' (" +
                   std::to_string(whole) + " bytes)");
      if (bd.sliceOf == bd.name)
        return err(bn + " is a slice of itself");
    }
    if (bd.direction == BindingDirection::In) {
      if (!isBoundInRole(bd.role))
        return err(bn +
                   ": an input binding must have role parameter, "
                   "state, optimizer_state or input, not " +
                   std::string(bufferRoleName(bd.role)));
      if (b.liveFirst != 0)
        return err(bn + ": bound " + bufName(d, bd.buffer) +
                   " must be live from instruction 0");
    } else {
      if (bd.role == BufferRole::Temporary || bd.role == BufferRole::Input ||
          bd.role == BufferRole::Constant || bd.role == BufferRole::Workspace)
        return err(bn + ": an output binding cannot have role " +
                   std::string(bufferRoleName(bd.role)));
      if (b.liveLast != lastIdx)
        return err(bn + ": bound " + bufName(d, bd.buffer) +
                   " must be live until the last instruction (" +
                   std::to_string(lastIdx) + ")");
    }
  }
  for (const BindingDesc &bd : d.bindings)
    if (bd.direction == BindingDirection::Out &&
        (bd.role == BufferRole::Parameter || bd.role == BufferRole::State ||
         bd.role == BufferRole::OptimizerState) &&
        !seen.count({bd.name, int(BindingDirection::In)}))
      return err("binding '" + bd.name + "': new " + bufferRoleName(bd.role) +
                 " value has no input binding of the same name");

  // Phases.
  static const std::set<std::string> kPhases = {
      "forward", "backward", "backward_input", "backward_weight", "optimizer"};
  int prevEnd = 0;
  std::set<std::string> phaseNames;
  for (const PhaseDesc &p : d.phases) {
    // A micro-batch's phase (gradient accumulation) is "<phase>.<index>".
    std::string base = p.name;
    if (size_t dot = base.find('.'); dot != std::string::npos) {
      std::string index = base.substr(dot + 1);
      bool digits = !index.empty() && index.size() <= 9 &&
                    std::all_of(index.begin(), index.end(),
                                [](char c) { return c >= '0' && c <= '9'; });
      base = digits && base.compare(0, dot, "optimizer") != 0 ? base.substr(0, dot) : p.name;
    }
    if (!kPhases.count(base))
      return err("phase '" + p.name +
                 "': not one of forward, backward, backward_input, "
                 "backward_weight, optimizer (a micro-batch's forward or backward "
                 "phase: forward.<i>, backward.<i>)");
    if (!phaseNames.insert(p.name).second)
      return err("phase '" + p.name + "' appears twice");
    if (p.first < prevEnd || p.last < p.first || p.last > n)
      return err("phase '" + p.name + "': range [" + std::to_string(p.first) +
                 ", " + std::to_string(p.last) +
                 ") is out of order or outside [0, " + std::to_string(n) + ")");
    prevEnd = p.last;
  }

  // Constants.
  for (const ConstantDesc &c : d.constants) {
    if (c.buffer < 0 || c.buffer >= nb)
      return err("constant data for buffer id " + std::to_string(c.buffer) +
                 " out of range");
    const BufferDesc &b = d.buffers[size_t(c.buffer)];
    if (b.role != BufferRole::Constant || b.liveFirst != 0 ||
        c.data.size() != b.dataBytes())
      return err("constant data for " + bufName(d, c.buffer) + ": " +
                 std::to_string(c.data.size()) +
                 " bytes; needs role constant, live from 0 and " +
                 std::to_string(b.dataBytes()) + " bytes");
  }

  uint64_t peak = computePeakDeviceBytes(d);
  if (peak != d.predictedPeakDeviceBytes)
    return err("predicted peak device bytes " +
               std::to_string(d.predictedPeakDeviceBytes) +
               " differ from the " + std::to_string(peak) +
               " bytes that the buffers' live intervals give");
  return Status::success();
}

//===----------------------------------------------------------------------===//
// Queries and dump
//===----------------------------------------------------------------------===//

int Plan::findBinding(const std::string &name, BindingDirection dir) const {
  for (size_t i = 0; i < data_.bindings.size(); ++i)
    if (data_.bindings[i].name == name && data_.bindings[i].direction == dir)
      return int(i);
  return -1;
}

int Plan::findPhase(const std::string &name) const {
  for (size_t i = 0; i < data_.phases.size(); ++i)
    if (data_.phases[i].name == name)
      return int(i);
  return -1;
}

std::vector<std::string> Plan::opNames() const {
  std::vector<std::string> out;
  for (const InstructionDesc &in : data_.instructions)
    if (std::find(out.begin(), out.end(), in.op) == out.end())
      out.push_back(in.op);
  return out;
}

static std::string shapeStr(DType t, const std::vector<int64_t> &shape) {
  return typeString(t, shape);
}

static std::string attrStr(const AttrValue &v) {
  std::ostringstream os;
  if (v.kind == AttrValue::Kind::String)
    return "\"" + v.str + "\"";
  os << "[";
  if (v.kind == AttrValue::Kind::Ints)
    for (size_t i = 0; i < v.ints.size(); ++i)
      os << (i ? "," : "") << v.ints[i];
  else
    for (size_t i = 0; i < v.floats.size(); ++i)
      os << (i ? "," : "") << v.floats[i];
  os << "]";
  return os.str();
}

std::string Plan::dump() const {
  const PlanData &d = data_;
  std::ostringstream os;
  os << "plan format " << d.formatVersion << ", producer \"" << d.producer
     << "\"\n";
  os << "device arena " << d.deviceCapacity << " bytes, host arena "
     << d.hostCapacity << " bytes, predicted peak device "
     << d.predictedPeakDeviceBytes << " bytes, " << d.numEvents << " events";
  if (d.workspaceBuffer >= 0)
    os << ", workspace %" << d.workspaceBuffer << " ("
       << d.buffers[size_t(d.workspaceBuffer)].size << " bytes)";
  os << "\n";
  os << "buffers (" << d.buffers.size() << "):\n";
  for (size_t i = 0; i < d.buffers.size(); ++i) {
    const BufferDesc &b = d.buffers[i];
    os << "  %" << i << " \"" << b.name << "\" " << shapeStr(b.dtype, b.shape)
       << " " << memorySpaceName(b.space) << "@" << b.offset << "+" << b.size
       << " " << bufferRoleName(b.role) << " live [" << b.liveFirst << ","
       << b.liveLast << "]";
    if (b.aliasOf >= 0)
      os << " alias of %" << b.aliasOf;
    os << "\n";
  }
  os << "bindings (" << d.bindings.size() << "):\n";
  for (const BindingDesc &b : d.bindings)
    os << "  " << (b.direction == BindingDirection::In ? "in  " : "out ")
       << "\"" << b.name << "\" -> %" << b.buffer << " ("
       << bufferRoleName(b.role) << ")"
       << (b.sliceOf.empty() ? std::string()
                             : " slice of \"" + b.sliceOf + "\" at byte " +
                                   std::to_string(b.sliceOffset))
       << "\n";
  os << "instructions (" << d.instructions.size() << "):\n";
  for (size_t i = 0; i < d.instructions.size(); ++i) {
    const InstructionDesc &in = d.instructions[i];
    for (const PhaseDesc &p : d.phases)
      if (p.first == int(i) && p.last > p.first)
        os << " phase " << p.name << " [" << p.first << "," << p.last << "):\n";
    os << "  " << i << ": [" << streamName(in.stream) << "] ";
    for (size_t k = 0; k < in.outputs.size(); ++k)
      os << (k ? ", " : "") << "%" << in.outputs[k];
    if (!in.outputs.empty())
      os << " = ";
    os << in.op << "(";
    for (size_t k = 0; k < in.inputs.size(); ++k) {
      os << (k ? ", " : "");
      if (in.inputs[k] < 0)
        os << "none";
      else
        os << "%" << in.inputs[k];
    }
    os << ")";
    if (!in.attrs.entries().empty()) {
      os << " {";
      bool first = true;
      for (const auto &e : in.attrs.entries()) {
        os << (first ? "" : ", ") << e.first << " = " << attrStr(e.second);
        first = false;
      }
      os << "}";
    }
    if (!in.waitEvents.empty()) {
      os << " wait(";
      for (size_t k = 0; k < in.waitEvents.size(); ++k)
        os << (k ? "," : "") << "e" << in.waitEvents[k];
      os << ")";
    }
    if (in.recordEvent >= 0)
      os << " record(e" << in.recordEvent << ")";
    os << "\n";
  }
  if (!d.constants.empty()) {
    os << "constants (" << d.constants.size() << "):\n";
    for (const ConstantDesc &c : d.constants)
      os << "  %" << c.buffer << ": " << c.data.size() << " bytes\n";
  }
  return os.str();
}
