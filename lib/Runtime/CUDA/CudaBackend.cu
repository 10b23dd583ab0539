//===- CudaBackend.cu - CUDA backend: a thin CUDA runtime wrapper ---------===//
//
// Part of offload. One cudaMalloc for the device arena, cudaHostAlloc'd
// (pinned) memory for the host arena, three non-blocking streams, one CUDA
// event per plan event, cudaMemcpyAsync for copies, cuBLAS for linear/matmul
// and own kernels for the rest (CudaKernels.cu). Instructions are enqueued in
// program order; the measured peak follows the same allocation rule as the
// host backend (buffers live from the issue of their first instruction to
// the issue of their last). Every CUDA error names the call and carries
// cudaGetErrorString.
//
//===----------------------------------------------------------------------===//

#include "../Backend.h"
#include "CudaKernels.h"

#include <algorithm>
#include <cstring>

using namespace offload::rt;
using namespace offload::rt::cuda;

namespace {

#define OFFLOAD_CUDA_TRY(call)                                                 \
  do {                                                                         \
    cudaError_t _e = (call);                                                   \
    if (_e != cudaSuccess)                                                     \
      return Status::error(cudaErrorText(#call, _e));                          \
  } while (0)

class CudaBackend final : public Backend {
public:
  ~CudaBackend() override;
  const char *name() const override { return "cuda"; }
  Status init(std::shared_ptr<const Plan> plan,
              const SessionOptions &options) override;
  Status beginStep() override;
  Status write(int id, const void *src, size_t bytes) override;
  Status read(int id, void *dst, size_t bytes) override;
  Status run(int first, int last) override;
  void endStep() override {}
  uint64_t peakDeviceBytes() const override { return peak_; }
  std::array<double, NumStreams> busySeconds() const override { return busy_; }
  bool keepsBuffersBetweenSteps() const override { return true; }

private:
  uint8_t *ptr(int id) const {
    const BufferDesc &b = plan_->data().buffers[size_t(id)];
    return (b.space == MemorySpace::Device ? device_ : host_) + b.offset;
  }
  Status syncAll();

  std::shared_ptr<const Plan> plan_;
  SessionOptions opts_;
  LiveSchedule sched_;
  std::vector<CudaKernelFn> kernels_;
  /// Instructions whose buffers are all in host memory (optimizer updates
  /// of parameters kept on the host) run the host kernel, in stream order,
  /// through cudaLaunchHostFunc; their results land in hostErrors_.
  std::vector<KernelFn> hostKernels_;
  struct HostCall {
    KernelFn fn;
    std::vector<TensorView> inputs, outputs;
    const AttrMap *attrs;
    int threads;
    std::string error;
  };
  std::vector<std::unique_ptr<HostCall>> hostCalls_;
  uint8_t *device_ = nullptr, *host_ = nullptr;
  cudaStream_t streams_[NumStreams] = {};
  std::vector<cudaEvent_t> events_;
  std::vector<cudaEvent_t> timing_; ///< start/stop per instruction
  cublasHandle_t cublas_ = nullptr;
  bool deviceSet_ = false;
  uint64_t cur_ = 0, peak_ = 0;
  std::array<double, NumStreams> busy_{0, 0, 0};
};

CudaBackend::~CudaBackend() {
  if (!deviceSet_)
    return;
  for (cudaStream_t s : streams_)
    if (s)
      cudaStreamSynchronize(s);
  if (cublas_)
    cublasDestroy(cublas_);
  for (cudaEvent_t e : events_)
    cudaEventDestroy(e);
  for (cudaEvent_t e : timing_)
    cudaEventDestroy(e);
  for (cudaStream_t s : streams_)
    if (s)
      cudaStreamDestroy(s);
  if (device_)
    cudaFree(device_);
  if (host_)
    cudaFreeHost(host_);
}

Status CudaBackend::init(std::shared_ptr<const Plan> plan,
                         const SessionOptions &options) {
  plan_ = std::move(plan);
  opts_ = options;
  const PlanData &d = plan_->data();
  // Ops first, so that a plan the backend cannot run fails with one list
  // even on a machine without a GPU.
  std::vector<std::string> missing;
  kernels_.assign(d.instructions.size(), nullptr);
  hostKernels_.assign(d.instructions.size(), nullptr);
  registerAllHostKernels();
  for (size_t i = 0; i < d.instructions.size(); ++i) {
    const InstructionDesc &in = d.instructions[i];
    if (in.op == kOpToHost || in.op == kOpToDevice || in.op == kOpWait ||
        in.op == kOpReshape)
      continue;
    bool allHost = true;
    for (const auto *ids : {&in.inputs, &in.outputs})
      for (int id : *ids)
        if (id >= 0 && d.buffers[size_t(id)].space != MemorySpace::Host)
          allHost = false;
    if (allHost && !in.outputs.empty()) {
      hostKernels_[i] = KernelRegistry::host().lookup(in.op);
      if (!hostKernels_[i] &&
          std::find(missing.begin(), missing.end(), in.op) == missing.end())
        missing.push_back(in.op + " (host)");
      continue;
    }
    kernels_[i] = lookupKernel(in.op);
    if (!kernels_[i] &&
        std::find(missing.begin(), missing.end(), in.op) == missing.end())
      missing.push_back(in.op);
  }
  if (!missing.empty()) {
    std::string list;
    for (const std::string &m : missing)
      list += (list.empty() ? "" : ", ") + m;
    return Status::error("no CUDA kernel for: " + list);
  }
  for (size_t i = 0; i < d.instructions.size(); ++i) {
    const InstructionDesc &in = d.instructions[i];
    if ((!kernels_[i] && in.op != kOpReshape) || hostKernels_[i])
      continue;
    for (const auto *ids : {&in.inputs, &in.outputs})
      for (int id : *ids)
        if (id >= 0 && d.buffers[size_t(id)].space != MemorySpace::Device)
          return Status::error(
              "instruction " + std::to_string(i) + " (" + in.op +
              ") computes on host buffer '" + d.buffers[size_t(id)].name +
              "': an instruction computes on the host only when all its "
              "buffers are host buffers");
  }

  int count = 0;
  cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess)
    return Status::error("no CUDA device: " +
                         cudaErrorText("cudaGetDeviceCount", e));
  if (opts_.cudaDevice < 0 || opts_.cudaDevice >= count)
    return Status::error("CUDA device " + std::to_string(opts_.cudaDevice) +
                         " does not exist (" + std::to_string(count) +
                         " found)");
  OFFLOAD_CUDA_TRY(cudaSetDevice(opts_.cudaDevice));
  deviceSet_ = true;
  size_t freeBytes = 0, totalBytes = 0;
  OFFLOAD_CUDA_TRY(cudaMemGetInfo(&freeBytes, &totalBytes));
  uint64_t avail = opts_.deviceMemoryBytes
                       ? std::min<uint64_t>(opts_.deviceMemoryBytes, freeBytes)
                       : freeBytes;
  if (avail < d.deviceCapacity)
    return Status::error("device has " + std::to_string(avail) +
                         " bytes available but the plan's device arena "
                         "needs " +
                         std::to_string(d.deviceCapacity) + " bytes");
  OFFLOAD_CUDA_TRY(cudaMalloc(reinterpret_cast<void **>(&device_),
                              std::max<uint64_t>(d.deviceCapacity, 1)));
  OFFLOAD_CUDA_TRY(cudaHostAlloc(reinterpret_cast<void **>(&host_),
                                 std::max<uint64_t>(d.hostCapacity, 1),
                                 cudaHostAllocDefault));
  OFFLOAD_CUDA_TRY(cudaMemset(device_, 0, d.deviceCapacity));
  std::memset(host_, 0, d.hostCapacity);
  for (cudaStream_t &s : streams_)
    OFFLOAD_CUDA_TRY(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  events_.assign(size_t(d.numEvents), nullptr);
  for (cudaEvent_t &ev : events_)
    OFFLOAD_CUDA_TRY(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
  timing_.assign(2 * d.instructions.size(), nullptr);
  for (cudaEvent_t &ev : timing_)
    OFFLOAD_CUDA_TRY(cudaEventCreate(&ev));
  cublasStatus_t st = cublasCreate(&cublas_);
  if (st != CUBLAS_STATUS_SUCCESS)
    return Status::error(cublasErrorText("cublasCreate", st));
  sched_ = LiveSchedule::build(d);
  return Status::success();
}

Status CudaBackend::beginStep() {
  busy_ = {0, 0, 0};
  cur_ = 0;
  for (int id : sched_.allocAt[0]) {
    const BufferDesc &b = plan_->data().buffers[size_t(id)];
    if (b.space == MemorySpace::Device && b.aliasOf < 0)
      cur_ += b.size;
  }
  peak_ = std::max(peak_, cur_);
  return Status::success();
}

Status CudaBackend::write(int id, const void *src, size_t bytes) {
  if (plan_->data().buffers[size_t(id)].space == MemorySpace::Host) {
    std::memcpy(ptr(id), src, bytes);
    return Status::success();
  }
  OFFLOAD_CUDA_TRY(cudaMemcpy(ptr(id), src, bytes, cudaMemcpyHostToDevice));
  return Status::success();
}

Status CudaBackend::read(int id, void *dst, size_t bytes) {
  if (plan_->data().buffers[size_t(id)].space == MemorySpace::Host) {
    std::memcpy(dst, ptr(id), bytes);
    return Status::success();
  }
  OFFLOAD_CUDA_TRY(cudaMemcpy(dst, ptr(id), bytes, cudaMemcpyDeviceToHost));
  return Status::success();
}

Status CudaBackend::syncAll() {
  for (cudaStream_t s : streams_)
    OFFLOAD_CUDA_TRY(cudaStreamSynchronize(s));
  return Status::success();
}

Status CudaBackend::run(int first, int last) {
  const PlanData &d = plan_->data();
  Status failure;
  for (int i = first; i < last && failure.ok(); ++i) {
    const InstructionDesc &in = d.instructions[size_t(i)];
    std::string where = "instruction " + std::to_string(i) + " (" + in.op + ")";
    if (i > 0)
      for (int id : sched_.allocAt[size_t(i)]) {
        const BufferDesc &b = d.buffers[size_t(id)];
        if (b.space == MemorySpace::Device && b.aliasOf < 0)
          cur_ += b.size;
      }
    peak_ = std::max(peak_, cur_);
    if (opts_.failAtInstruction == i) {
      failure = Status::error(where + ": injected failure "
                                      "(SessionOptions::failAtInstruction)");
      break;
    }
    cudaStream_t s = streams_[in.stream];
    for (int e : in.waitEvents) {
      cudaError_t err = cudaStreamWaitEvent(s, events_[size_t(e)], 0);
      if (err != cudaSuccess) {
        failure = Status::error(where + ": " +
                                cudaErrorText("cudaStreamWaitEvent", err));
        break;
      }
    }
    if (!failure.ok())
      break;
    cudaEventRecord(timing_[2 * size_t(i)], s);
    std::string err;
    if (in.op == kOpToHost || in.op == kOpToDevice) {
      const BufferDesc &src = d.buffers[size_t(in.inputs[0])];
      int64_t so = in.attrs.getInt("src_offset", 0);
      int64_t dof = in.attrs.getInt("dst_offset", 0);
      int64_t bytes = in.attrs.getInt("bytes", int64_t(src.dataBytes()));
      cudaError_t ce = cudaMemcpyAsync(
          ptr(in.outputs[0]) + dof, ptr(in.inputs[0]) + so, size_t(bytes),
          in.op == kOpToHost ? cudaMemcpyDeviceToHost : cudaMemcpyHostToDevice,
          s);
      if (ce != cudaSuccess)
        err = cudaErrorText("cudaMemcpyAsync", ce);
    } else if (in.op == kOpReshape) {
      uint8_t *src = ptr(in.inputs[0]), *dst = ptr(in.outputs[0]);
      if (src != dst) {
        cudaError_t ce = cudaMemcpyAsync(
            dst, src, d.buffers[size_t(in.outputs[0])].dataBytes(),
            cudaMemcpyDeviceToDevice, s);
        if (ce != cudaSuccess)
          err = cudaErrorText("cudaMemcpyAsync", ce);
      }
    } else if (hostKernels_[size_t(i)]) {
      // Host compute in stream order: the callback runs once the work
      // before it on this stream (and the events it waits on) completed.
      auto call = std::make_unique<HostCall>();
      call->fn = hostKernels_[size_t(i)];
      call->attrs = &in.attrs;
      call->threads = std::max(1, opts_.numThreads);
      for (int id : in.inputs)
        call->inputs.push_back(bufferView(d, id, id >= 0 ? ptr(id) : nullptr));
      for (int id : in.outputs)
        call->outputs.push_back(bufferView(d, id, ptr(id)));
      cudaError_t ce = cudaLaunchHostFunc(
          s,
          [](void *p) {
            auto *c = static_cast<HostCall *>(p);
            KernelArgs args{c->inputs, c->outputs, *c->attrs, c->threads};
            c->error = c->fn(args);
          },
          call.get());
      if (ce != cudaSuccess)
        err = cudaErrorText("cudaLaunchHostFunc", ce);
      hostCalls_.push_back(std::move(call));
    } else if (in.op != kOpWait) {
      std::vector<TensorView> ins, outs;
      for (int id : in.inputs)
        ins.push_back(bufferView(d, id, id >= 0 ? ptr(id) : nullptr));
      for (int id : in.outputs)
        outs.push_back(bufferView(d, id, ptr(id)));
      CudaKernelArgs args{ins, outs, in.attrs, s, cublas_};
      err = kernels_[size_t(i)](args);
    }
    cudaEventRecord(timing_[2 * size_t(i) + 1], s);
    if (!err.empty()) {
      failure = Status::error(where + ": " + err);
      break;
    }
    if (in.recordEvent >= 0) {
      cudaError_t ce = cudaEventRecord(events_[size_t(in.recordEvent)], s);
      if (ce != cudaSuccess)
        failure =
            Status::error(where + ": " + cudaErrorText("cudaEventRecord", ce));
    }
    for (int id : sched_.freeAfter[size_t(i)]) {
      const BufferDesc &b = d.buffers[size_t(id)];
      if (b.space == MemorySpace::Device && b.aliasOf < 0)
        cur_ -= b.size;
    }
  }
  // Wait for every stream; asynchronous kernel faults surface here.
  Status sync = syncAll();
  for (const auto &c : hostCalls_)
    if (!c->error.empty() && failure.ok())
      failure = Status::error("host-side kernel: " + c->error);
  hostCalls_.clear();
  if (!failure.ok())
    return failure;
  if (!sync.ok())
    return sync;
  for (int i = first; i < last; ++i) {
    float ms = 0;
    if (cudaEventElapsedTime(&ms, timing_[2 * size_t(i)],
                             timing_[2 * size_t(i) + 1]) == cudaSuccess)
      busy_[size_t(d.instructions[size_t(i)].stream)] += double(ms) * 1e-3;
  }
  cudaGetLastError(); // clear a sticky "not ready" from elapsed-time queries
  return Status::success();
}

} // namespace

std::unique_ptr<Backend> offload::rt::createCudaBackend() {
  return std::make_unique<CudaBackend>();
}
