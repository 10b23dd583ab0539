//===- PlanBuilder.cpp - Build plans without FlatBuffers ------------------===//
//
// Part of offload. PlanBuilder fills a PlanData: explicit or derived live
// intervals, explicit or first-fit offsets, capacities and predicted peak.
//
//===----------------------------------------------------------------------===//

#include "offload/Runtime/Plan.h"

#include <algorithm>

using namespace offload::rt;

AttrValue offload::rt::attrInts(std::vector<int64_t> v) {
  AttrValue a;
  a.kind = AttrValue::Kind::Ints;
  a.ints = std::move(v);
  return a;
}
AttrValue offload::rt::attrInt(int64_t v) { return attrInts({v}); }
AttrValue offload::rt::attrFloats(std::vector<double> v) {
  AttrValue a;
  a.kind = AttrValue::Kind::Floats;
  a.floats = std::move(v);
  return a;
}
AttrValue offload::rt::attrFloat(double v) { return attrFloats({v}); }
AttrValue offload::rt::attrString(std::string s) {
  AttrValue a;
  a.kind = AttrValue::Kind::String;
  a.str = std::move(s);
  return a;
}

PlanBuilder::PlanBuilder() { data_.producer = "offload PlanBuilder"; }

int PlanBuilder::buffer(const std::string &name, DType dtype,
                        std::vector<int64_t> shape, BufferRole role,
                        MemorySpace space) {
  BufferDesc b;
  b.name = name;
  b.dtype = dtype;
  b.shape = std::move(shape);
  b.role = role;
  b.space = space;
  b.size = b.dataBytes();
  data_.buffers.push_back(std::move(b));
  offsetSet_.push_back(false);
  liveSet_.push_back(false);
  return int(data_.buffers.size()) - 1;
}

int PlanBuilder::alias(const std::string &name, int base,
                       std::vector<int64_t> shape) {
  const BufferDesc &b = data_.buffers[size_t(base)];
  int id = buffer(name, b.dtype, std::move(shape), b.role, b.space);
  data_.buffers[size_t(id)].aliasOf = base;
  data_.buffers[size_t(id)].role = BufferRole::Temporary;
  return id;
}

void PlanBuilder::setOffset(int id, uint64_t offset) {
  data_.buffers[size_t(id)].offset = offset;
  offsetSet_[size_t(id)] = true;
}

void PlanBuilder::setLive(int id, int first, int last) {
  data_.buffers[size_t(id)].liveFirst = first;
  data_.buffers[size_t(id)].liveLast = last;
  liveSet_[size_t(id)] = true;
}

void PlanBuilder::bindIn(const std::string &name, int id) {
  data_.bindings.push_back(
      {name, id, data_.buffers[size_t(id)].role, BindingDirection::In});
}

void PlanBuilder::bindOut(const std::string &name, int id) {
  data_.bindings.push_back(
      {name, id, data_.buffers[size_t(id)].role, BindingDirection::Out});
}

void PlanBuilder::sliceLastBinding(const std::string &wholeName,
                                   std::vector<int64_t> wholeShape,
                                   uint64_t offsetBytes) {
  BindingDesc &b = data_.bindings.back();
  b.sliceOf = wholeName;
  b.wholeShape = std::move(wholeShape);
  b.sliceOffset = offsetBytes;
}

int PlanBuilder::instr(const std::string &op, std::vector<int32_t> inputs,
                       std::vector<int32_t> outputs, AttrMap attrs, int stream,
                       std::vector<int32_t> waitEvents, int32_t recordEvent) {
  InstructionDesc in;
  in.op = op;
  in.inputs = std::move(inputs);
  in.outputs = std::move(outputs);
  in.attrs = std::move(attrs);
  in.stream = stream;
  in.waitEvents = std::move(waitEvents);
  in.recordEvent = recordEvent;
  data_.instructions.push_back(std::move(in));
  return int(data_.instructions.size()) - 1;
}

void PlanBuilder::phase(const std::string &name, int first, int last) {
  data_.phases.push_back({name, first, last});
}

void PlanBuilder::endPhase(const std::string &name) {
  int first = data_.phases.empty() ? 0 : data_.phases.back().last;
  phase(name, first, int(data_.instructions.size()));
}

int PlanBuilder::workspace(uint64_t bytes) {
  int id = data_.workspaceBuffer;
  if (bytes == 0)
    return id;
  if (id < 0) {
    id = buffer("workspace", DType::Bool, {int64_t(bytes)},
                BufferRole::Workspace, MemorySpace::Device);
    data_.workspaceBuffer = id;
  } else {
    data_.buffers[size_t(id)].shape = {int64_t(bytes)};
    data_.buffers[size_t(id)].size = bytes;
  }
  return id;
}

void PlanBuilder::constant(int id, std::vector<uint8_t> bytes) {
  data_.constants.push_back({id, std::move(bytes)});
}

PlanData PlanBuilder::finish() {
  PlanData d = data_;
  int n = int(d.instructions.size());
  int lastIdx = std::max(n, 1) - 1;
  size_t nb = d.buffers.size();

  // Live intervals from uses.
  std::vector<int> first(nb, -1), last(nb, -1);
  for (int i = 0; i < n; ++i) {
    auto use = [&](int id) {
      if (id < 0 || size_t(id) >= nb)
        return;
      if (first[size_t(id)] < 0)
        first[size_t(id)] = i;
      last[size_t(id)] = i;
    };
    for (int id : d.instructions[size_t(i)].inputs)
      use(id);
    for (int id : d.instructions[size_t(i)].outputs)
      use(id);
  }
  for (size_t id = 0; id < nb; ++id) {
    BufferRole r = d.buffers[id].role;
    if (r == BufferRole::Parameter || r == BufferRole::State ||
        r == BufferRole::OptimizerState || r == BufferRole::Input ||
        r == BufferRole::Constant)
      first[id] = 0;
  }
  // The workspace lives over the whole step.
  if (d.workspaceBuffer >= 0 && size_t(d.workspaceBuffer) < nb) {
    first[size_t(d.workspaceBuffer)] = 0;
    last[size_t(d.workspaceBuffer)] = lastIdx;
  }
  for (const BindingDesc &b : d.bindings) {
    if (b.buffer < 0 || size_t(b.buffer) >= nb)
      continue;
    if (b.direction == BindingDirection::In)
      first[size_t(b.buffer)] = 0;
    else
      last[size_t(b.buffer)] = lastIdx;
  }
  for (size_t id = 0; id < nb; ++id) {
    if (liveSet_[id])
      continue;
    int f = first[id] < 0 ? 0 : first[id];
    int l = std::max(f, last[id]);
    d.buffers[id].liveFirst = f;
    d.buffers[id].liveLast = l;
  }
  // A base buffer covers its aliases' intervals.
  for (size_t id = 0; id < nb; ++id) {
    int base = d.buffers[id].aliasOf;
    if (base < 0 || size_t(base) >= nb || liveSet_[size_t(base)])
      continue;
    BufferDesc &bb = d.buffers[size_t(base)];
    bb.liveFirst = std::min(bb.liveFirst, d.buffers[id].liveFirst);
    bb.liveLast = std::max(bb.liveLast, d.buffers[id].liveLast);
  }

  // First-fit offsets, 256-byte aligned.
  const uint64_t align = 256;
  std::vector<bool> placed(nb, false);
  for (size_t id = 0; id < nb; ++id)
    if (offsetSet_[id] && d.buffers[id].aliasOf < 0)
      placed[id] = true;
  for (size_t id = 0; id < nb; ++id) {
    BufferDesc &b = d.buffers[id];
    if (placed[id] || b.aliasOf >= 0)
      continue;
    uint64_t off = 0;
    bool moved = true;
    while (moved) {
      moved = false;
      for (size_t o = 0; o < nb; ++o) {
        const BufferDesc &p = d.buffers[o];
        if (!placed[o] || p.space != b.space)
          continue;
        if (p.liveLast < b.liveFirst || b.liveLast < p.liveFirst)
          continue;
        if (off < p.offset + p.size &&
            p.offset < off + std::max<uint64_t>(b.size, 1)) {
          off = (p.offset + p.size + align - 1) / align * align;
          moved = true;
        }
      }
    }
    b.offset = off;
    placed[id] = true;
  }
  for (size_t id = 0; id < nb; ++id) {
    BufferDesc &b = d.buffers[id];
    if (b.aliasOf >= 0 && size_t(b.aliasOf) < nb && !offsetSet_[id])
      b.offset = d.buffers[size_t(b.aliasOf)].offset;
  }

  uint64_t devEnd = 0, hostEnd = 0;
  for (const BufferDesc &b : d.buffers)
    (b.space == MemorySpace::Device ? devEnd : hostEnd) = std::max(
        b.space == MemorySpace::Device ? devEnd : hostEnd, b.offset + b.size);
  d.deviceCapacity = deviceCapacity_ ? deviceCapacity_ : devEnd;
  d.hostCapacity = hostCapacity_ ? hostCapacity_ : hostEnd;
  d.predictedPeakDeviceBytes =
      predictedPeak_ ? predictedPeak_ : computePeakDeviceBytes(d);
  return d;
}

Status offload::rt::addWorkspace(PlanData &d, uint64_t bytes) {
  if (bytes == 0 || d.workspaceBuffer >= 0)
    return Status::success();
  if (computePeakDeviceBytes(d) != d.predictedPeakDeviceBytes)
    return Status::error("addWorkspace: the plan's predicted peak differs "
                         "from its buffers' (an invalid plan)");
  BufferDesc w;
  w.name = "workspace";
  w.dtype = DType::Bool;
  w.shape = {int64_t(bytes)};
  w.space = MemorySpace::Device;
  w.offset = (d.deviceCapacity + 255) / 256 * 256;
  w.size = bytes;
  w.role = BufferRole::Workspace;
  w.liveFirst = 0;
  w.liveLast = std::max<int>(int(d.instructions.size()), 1) - 1;
  d.buffers.push_back(std::move(w));
  d.workspaceBuffer = int32_t(d.buffers.size()) - 1;
  d.deviceCapacity = d.buffers.back().offset + bytes;
  d.predictedPeakDeviceBytes = computePeakDeviceBytes(d);
  return Status::success();
}
