//===- Executor.cpp - The instruction loop of every backend ---------------===//
//
// Part of offload. Program-order allocation and live-byte accounting, fault
// injection, argument assembly and the issue of each instruction's commands
// to a Device. The measured peak is the maximum of live device bytes with
// buffers allocated when their first instruction is issued and freed after
// their last one is issued, which equals the planned peak for every valid
// plan (docs/runtime.md, "Peak device bytes").
//
//===----------------------------------------------------------------------===//

#include "Executor.h"

#include <algorithm>
#include <chrono>

using namespace offload::rt;

/// The kernel's view of buffer `id` whose bytes start at `data`; an empty
/// view (data == nullptr) for an absent optional operand (id -1).
static TensorView bufferView(const PlanData &plan, int id, void *data) {
  TensorView v;
  if (id < 0)
    return v;
  const BufferDesc &b = plan.buffers[size_t(id)];
  v.data = data;
  v.dtype = b.dtype;
  v.shape = b.shape;
  return v;
}

Executor::Executor(std::unique_ptr<Device> device)
    : device_(std::move(device)) {}

uint8_t *Executor::address(int id) const {
  const BufferDesc &b = plan_->data().buffers[size_t(id)];
  return device_->arenaBase(b.space) + b.offset;
}

Status Executor::init(std::shared_ptr<const Plan> plan,
                      const SessionOptions &options) {
  plan_ = std::move(plan);
  opts_ = options;
  if (Status s = device_->open(plan_, opts_); !s.ok())
    return s;
  const PlanData &d = plan_->data();
  sched_ = LiveSchedule::build(d);
  boundOut_.assign(d.buffers.size(), 0);
  for (const BindingDesc &b : d.bindings)
    if (b.direction == BindingDirection::Out)
      boundOut_[size_t(b.buffer)] = 1;
  live_.assign(d.buffers.size(), 0);
  if (opts_.profile)
    seconds_.assign(d.instructions.size(), 0.0);
  return recordWork();
}

Status Executor::recordWork() {
  const PlanData &d = plan_->data();
  work_.assign(d.instructions.size(), Work());
  for (size_t k = 0; k < d.instructions.size(); ++k) {
    const InstructionDesc &in = d.instructions[k];
    Work &w = work_[k];
    int i = int(k);
    if (in.op == kOpToHost || in.op == kOpToDevice) {
      const BufferDesc &src = d.buffers[size_t(in.inputs[0])];
      int64_t srcOffset = in.attrs.getInt("src_offset", 0);
      int64_t dstOffset = in.attrs.getInt("dst_offset", 0);
      w.kind = Work::CopyBytes;
      w.copy.instruction = i;
      w.copy.stream = in.stream;
      w.copy.kind = in.op == kOpToHost ? CopyKind::DeviceToHost
                                       : CopyKind::HostToDevice;
      w.copy.src = address(in.inputs[0]) + srcOffset;
      w.copy.dst = address(in.outputs[0]) + dstOffset;
      w.copy.bytes =
          uint64_t(in.attrs.getInt("bytes", int64_t(src.dataBytes())));
    } else if (in.op == kOpReshape) {
      // An aliasing reshape moves no bytes.
      uint8_t *src = address(in.inputs[0]), *dst = address(in.outputs[0]);
      if (src == dst)
        continue;
      w.kind = Work::CopyBytes;
      w.copy.instruction = i;
      w.copy.stream = in.stream;
      w.copy.kind = CopyKind::WithinArena;
      w.copy.src = src;
      w.copy.dst = dst;
      w.copy.bytes = d.buffers[size_t(in.outputs[0])].dataBytes();
    } else if (in.op == kOpAllReduce || in.op == kOpReduceScatter || in.op == kOpAllGather) {
      w.kind = Work::Reduce;
      Collective &c = w.collective;
      c.kind = in.op == kOpAllReduce       ? Collective::AllReduce
               : in.op == kOpReduceScatter ? Collective::ReduceScatter
                                           : Collective::AllGather;
      c.instruction = i;
      c.stream = in.stream;
      c.what = in.op + " of bucket " +
               std::to_string(in.attrs.getInt("bucket", 0)) + " (instruction " +
               std::to_string(i) + ")";
      for (int id : in.inputs)
        c.inputs.push_back(bufferView(d, id, address(id)));
      for (int id : in.outputs)
        c.outputs.push_back(bufferView(d, id, address(id)));
    } else if (in.op != kOpWait) {
      w.kind = Work::LaunchKernel;
      Launch &l = w.launch;
      l.instruction = i;
      l.stream = in.stream;
      l.desc = &in;
      for (int id : in.inputs)
        l.inputs.push_back(bufferView(d, id, id >= 0 ? address(id) : nullptr));
      for (int id : in.outputs)
        l.outputs.push_back(bufferView(d, id, address(id)));
    }
  }
  // Per-launch resources after every command is recorded (the device may
  // keep pointers to them).
  for (const Work &w : work_)
    if (w.kind == Work::LaunchKernel)
      if (Status s = device_->prepare(w.launch); !s.ok())
        return s;
  return Status::success();
}

Status Executor::allocate(const std::vector<int> &ids) {
  const PlanData &d = plan_->data();
  for (int id : ids) {
    const BufferDesc &b = d.buffers[size_t(id)];
    if (Status s = device_->allocated(id); !s.ok())
      return s;
    live_[size_t(id)] = 1;
    if (b.space == MemorySpace::Device && b.aliasOf < 0) {
      cur_ += b.size;
      peak_ = std::max(peak_, cur_);
    }
  }
  return Status::success();
}

void Executor::release(const std::vector<int> &ids) {
  const PlanData &d = plan_->data();
  for (int id : ids) {
    const BufferDesc &b = d.buffers[size_t(id)];
    if (b.space == MemorySpace::Device && b.aliasOf < 0)
      cur_ -= b.size;
    if (!boundOut_[size_t(id)])
      live_[size_t(id)] = 0;
  }
}

Status Executor::beginStep() {
  if (Status s = device_->beginStep(); !s.ok())
    return s;
  std::fill(live_.begin(), live_.end(), 0);
  cur_ = 0;
  return allocate(sched_.allocAt[0]);
}

Status Executor::write(int id, const void *src, size_t bytes) {
  const BufferDesc &b = plan_->data().buffers[size_t(id)];
  if (!live_[size_t(id)])
    return Status::error("buffer '" + b.name +
                         "' is not live at the start of the step");
  if (!bytes)
    return Status::success();
  return device_->upload(b.space, address(id), src, bytes);
}

Status Executor::read(int id, void *dst, size_t bytes) {
  const BufferDesc &b = plan_->data().buffers[size_t(id)];
  if (!live_[size_t(id)])
    return Status::error("buffer '" + b.name +
                         "' is not live at the end of the step");
  if (!bytes)
    return Status::success();
  return device_->download(b.space, dst, address(id), bytes);
}

Status Executor::readAfterStep(int id, uint64_t offset, void *dst,
                               size_t bytes) {
  const BufferDesc &b = plan_->data().buffers[size_t(id)];
  if (!boundOut_[size_t(id)] || offset > b.size || bytes > b.size - offset)
    return Status::error("buffer '" + b.name +
                         "' is not an output or the range is outside it");
  if (!bytes)
    return Status::success();
  return device_->download(b.space, dst, address(id) + offset, bytes);
}

Status Executor::issue(int i) {
  const PlanData &d = plan_->data();
  const InstructionDesc &in = d.instructions[size_t(i)];
  // Every operand must be live now (a validated plan guarantees it).
  for (const auto *ids : {&in.inputs, &in.outputs})
    for (int id : *ids)
      if (id >= 0 && !live_[size_t(id)])
        return Status::error(instructionName(d, i) + " accesses buffer " +
                             std::to_string(id) + " '" +
                             d.buffers[size_t(id)].name +
                             "' outside its live interval");
  for (int e : in.waitEvents)
    if (Status s = device_->waitEvent(in.stream, e, i); !s.ok())
      return s;
  const Work &w = work_[size_t(i)];
  if (w.kind == Work::CopyBytes) {
    if (Status s = device_->copy(w.copy); !s.ok())
      return s;
  } else if (w.kind == Work::LaunchKernel) {
    if (Status s = device_->launch(w.launch); !s.ok())
      return s;
  } else if (w.kind == Work::Reduce) {
    if (Status s = device_->collective(w.collective); !s.ok())
      return s;
  }
  if (in.recordEvent >= 0)
    return device_->recordEvent(in.stream, in.recordEvent, i);
  return Status::success();
}

Status Executor::run(int first, int last) {
  Status failure;
  for (int i = first; i < last; ++i) {
    if (i > 0)
      if (failure = allocate(sched_.allocAt[size_t(i)]); !failure.ok())
        break;
    if (opts_.failAtInstruction == i) {
      failure = Status::error(instructionName(plan_->data(), i) +
                              ": injected failure "
                              "(SessionOptions::failAtInstruction)");
      break;
    }
    if (opts_.profile) {
      // One instruction at a time: issue it, then drain every stream.
      double t0 = steadySeconds();
      if (failure = issue(i); !failure.ok())
        break;
      if (failure = device_->synchronize(i, i + 1); !failure.ok())
        break;
      seconds_[size_t(i)] = steadySeconds() - t0;
    } else if (failure = issue(i); !failure.ok()) {
      break;
    }
    // Program-order accounting: the interval ends after instruction i.
    release(sched_.freeAfter[size_t(i)]);
  }
  // Every stream drains, also after a failure: nothing of this run may
  // still touch the arenas when the session looks at them.
  Status drained = device_->synchronize(first, last);
  return failure.ok() ? drained : failure;
}

void Executor::endStep() { std::fill(live_.begin(), live_.end(), 0); }
