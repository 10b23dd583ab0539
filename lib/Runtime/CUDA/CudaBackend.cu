//===- CudaBackend.cu - CUDA backend: arenas, streams, libraries ----------===//
//
// Part of offload. One cudaMalloc for the device arena, cudaHostAlloc'd
// (pinned) memory for the host arena, three non-blocking streams, one CUDA
// event per plan event, cudaMemcpyAsync for copies, and the kernel table of
// CudaKernels.h for compute (cuBLAS, cuDNN and own kernels). Instructions
// are enqueued in program order; the measured peak follows the same
// allocation rule as the host backend (buffers live from the issue of their
// first instruction to the issue of their last), so the plan's workspace
// buffer counts like any buffer.
//
// Session creation, in order: the op coverage (one error listing every op
// without a kernel, checked without a device), the device, the cuBLAS and
// cuDNN handles, the free-memory check (bytes needed vs free, before any
// allocation of the arena), the arenas, and one cuDNN algorithm per
// convolution instruction (the fastest deterministic one whose workspace
// fits in the plan's workspace; failing that, an error naming the
// instruction and the bytes it needs). A failed step leaves nothing
// committed (Session), and its message names the instruction, the op and
// the failing CUDA / cuBLAS / cuDNN call; bad input seen by a kernel on the
// device (an index out of range) fails the step after its synchronisation.
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
  std::vector<std::string> ops() const override { return kernelNames(); }
  std::vector<std::string> missingOps(const PlanData &d) const override;
  Status beginStep() override;
  Status write(int id, const void *src, size_t bytes) override;
  Status read(int id, void *dst, size_t bytes) override;
  Status readAfterStep(int id, uint64_t offset, void *dst,
                       size_t bytes) override;
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
  /// Whether instruction i runs the host kernel (all its buffers are host
  /// buffers: optimizer updates of parameters kept on the host).
  static bool onHost(const PlanData &d, const InstructionDesc &in);
  /// Picks each convolution's cuDNN algorithm (CudaKernels.h).
  Status chooseConvAlgorithms();
  /// The device error flag's report for instructions [first, last), or
  /// success.
  Status deviceErrors();

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
  cudnnHandle_t cudnn_ = nullptr;
  /// What the kernels share: stream, handles, workspace, error flag.
  CudaContext ctx_;
  /// Per instruction: the chosen convolution algorithm (convolutions only).
  std::vector<ConvChoice> conv_;
  int *errorFlag_ = nullptr; ///< two device ints (CudaContext::errorFlag)
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
  if (cudnn_)
    cudnnDestroy(cudnn_);
  if (errorFlag_)
    cudaFree(errorFlag_);
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

bool CudaBackend::onHost(const PlanData &d, const InstructionDesc &in) {
  if (in.outputs.empty())
    return false;
  for (const auto *ids : {&in.inputs, &in.outputs})
    for (int id : *ids)
      if (id >= 0 && d.buffers[size_t(id)].space != MemorySpace::Host)
        return false;
  return true;
}

std::vector<std::string> CudaBackend::missingOps(const PlanData &d) const {
  registerAllHostKernels();
  std::vector<std::string> missing;
  for (const InstructionDesc &in : d.instructions) {
    if (isRuntimeOp(in.op))
      continue;
    bool host = onHost(d, in);
    bool have = host ? KernelRegistry::host().lookup(in.op) != nullptr
                     : lookupKernel(in.op) != nullptr;
    std::string name = host ? in.op + " (host)" : in.op;
    if (!have && std::find(missing.begin(), missing.end(), name) == missing.end())
      missing.push_back(name);
  }
  return missing;
}

Status CudaBackend::init(std::shared_ptr<const Plan> plan,
                         const SessionOptions &options) {
  plan_ = std::move(plan);
  opts_ = options;
  const PlanData &d = plan_->data();
  // Ops first, so that a plan the backend cannot run fails with one list
  // even on a machine without a GPU.
  std::vector<std::string> missing = missingOps(d);
  if (!missing.empty())
    return Status::error("no CUDA kernel for: " + joinNames(missing));
  kernels_.assign(d.instructions.size(), nullptr);
  hostKernels_.assign(d.instructions.size(), nullptr);
  for (size_t i = 0; i < d.instructions.size(); ++i) {
    const InstructionDesc &in = d.instructions[i];
    if (isRuntimeOp(in.op))
      continue;
    if (onHost(d, in))
      hostKernels_[i] = KernelRegistry::host().lookup(in.op).unchecked();
    else
      kernels_[i] = lookupKernel(in.op);
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
  for (cudaStream_t &s : streams_)
    OFFLOAD_CUDA_TRY(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  // Library handles before the memory check: they hold device memory of
  // their own (outside the plan, like the CUDA context).
  cublasStatus_t st = cublasCreate(&cublas_);
  if (st != CUBLAS_STATUS_SUCCESS)
    return Status::error(cublasErrorText("cublasCreate", st));
  cudnnStatus_t ds = cudnnCreate(&cudnn_);
  if (ds != CUDNN_STATUS_SUCCESS)
    return Status::error(cudnnErrorText("cudnnCreate", ds));
  OFFLOAD_CUDA_TRY(cudaMalloc(reinterpret_cast<void **>(&errorFlag_),
                              2 * sizeof(int)));
  OFFLOAD_CUDA_TRY(cudaMemset(errorFlag_, 0, 2 * sizeof(int)));

  // Enough device memory for the plan, before allocating anything of it.
  size_t freeBytes = 0, totalBytes = 0;
  OFFLOAD_CUDA_TRY(cudaMemGetInfo(&freeBytes, &totalBytes));
  uint64_t avail = opts_.deviceMemoryBytes
                       ? std::min<uint64_t>(opts_.deviceMemoryBytes, freeBytes)
                       : freeBytes;
  if (avail < d.deviceCapacity)
    return Status::error(
        "the plan needs " + std::to_string(d.deviceCapacity) +
        " bytes of device memory (its device arena) but CUDA device " +
        std::to_string(opts_.cudaDevice) + " has " +
        std::to_string(freeBytes) + " bytes free (of " +
        std::to_string(totalBytes) + ")" +
        (opts_.deviceMemoryBytes
             ? ", limited to " + std::to_string(opts_.deviceMemoryBytes) +
                   " by SessionOptions::deviceMemoryBytes"
             : std::string()));
  OFFLOAD_CUDA_TRY(cudaMalloc(reinterpret_cast<void **>(&device_),
                              std::max<uint64_t>(d.deviceCapacity, 1)));
  OFFLOAD_CUDA_TRY(cudaHostAlloc(reinterpret_cast<void **>(&host_),
                                 std::max<uint64_t>(d.hostCapacity, 1),
                                 cudaHostAllocDefault));
  OFFLOAD_CUDA_TRY(cudaMemset(device_, 0, d.deviceCapacity));
  std::memset(host_, 0, d.hostCapacity);
  events_.assign(size_t(d.numEvents), nullptr);
  for (cudaEvent_t &ev : events_)
    OFFLOAD_CUDA_TRY(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
  timing_.assign(2 * d.instructions.size(), nullptr);
  for (cudaEvent_t &ev : timing_)
    OFFLOAD_CUDA_TRY(cudaEventCreate(&ev));

  // The libraries work on the compute stream, in the plan's workspace
  // (cuBLAS's own default workspace pool is not used: cublasSetStream
  // resets it, so the workspace is set after the stream).
  ctx_.stream = streams_[ComputeStream];
  ctx_.cublas = cublas_;
  ctx_.cudnn = cudnn_;
  ctx_.errorFlag = errorFlag_;
  if (d.workspaceBuffer >= 0) {
    const BufferDesc &w = d.buffers[size_t(d.workspaceBuffer)];
    uintptr_t raw = reinterpret_cast<uintptr_t>(device_ + w.offset);
    uintptr_t aligned = (raw + 255) / 256 * 256;
    if (aligned - raw < w.size) {
      ctx_.workspace = reinterpret_cast<void *>(aligned);
      ctx_.workspaceBytes = size_t(w.size - (aligned - raw));
    }
  }
  st = cublasSetStream(cublas_, ctx_.stream);
  if (st != CUBLAS_STATUS_SUCCESS)
    return Status::error(cublasErrorText("cublasSetStream", st));
  st = cublasSetWorkspace(cublas_, ctx_.workspace, ctx_.workspaceBytes);
  // Without a workspace buffer, cuBLAS gets none (nullptr, 0 bytes). Should
  // a cuBLAS version refuse that, it keeps its default pool (outside the
  // plan, as the context is) rather than failing every such plan.
  if (st != CUBLAS_STATUS_SUCCESS && ctx_.workspaceBytes != 0)
    return Status::error(cublasErrorText("cublasSetWorkspace", st));
  // FP32 products in FP32 (no TF32), no atomics: reproducible results.
  st = cublasSetMathMode(cublas_, CUBLAS_DEFAULT_MATH);
  if (st != CUBLAS_STATUS_SUCCESS)
    return Status::error(cublasErrorText("cublasSetMathMode", st));
  st = cublasSetAtomicsMode(cublas_, CUBLAS_ATOMICS_NOT_ALLOWED);
  if (st != CUBLAS_STATUS_SUCCESS)
    return Status::error(cublasErrorText("cublasSetAtomicsMode", st));
  ds = cudnnSetStream(cudnn_, ctx_.stream);
  if (ds != CUDNN_STATUS_SUCCESS)
    return Status::error(cudnnErrorText("cudnnSetStream", ds));
  if (Status s = chooseConvAlgorithms(); !s.ok())
    return s;
  sched_ = LiveSchedule::build(d);
  return Status::success();
}

Status CudaBackend::chooseConvAlgorithms() {
  const PlanData &d = plan_->data();
  conv_.assign(d.instructions.size(), ConvChoice());
  for (size_t i = 0; i < d.instructions.size(); ++i) {
    const InstructionDesc &in = d.instructions[i];
    if (!kernels_[i] || !isConvOp(in.op))
      continue;
    std::vector<TensorView> ins, outs;
    for (int id : in.inputs)
      ins.push_back(bufferView(d, id, id >= 0 ? ptr(id) : nullptr));
    for (int id : in.outputs)
      outs.push_back(bufferView(d, id, ptr(id)));
    size_t needed = 0;
    std::string err =
        chooseConvAlgorithm(in.op, ins, outs, in.attrs, ctx_, conv_[i], &needed);
    if (!err.empty())
      return Status::error(
          "instruction " + std::to_string(i) + " (" + in.op + "): " + err +
          (needed ? " (give the plan a workspace buffer of at least " +
                        std::to_string(needed) + " bytes)"
                  : std::string()));
  }
  return Status::success();
}

Status CudaBackend::deviceErrors() {
  int flag[2] = {0, 0};
  OFFLOAD_CUDA_TRY(cudaMemcpy(flag, errorFlag_, sizeof(flag),
                              cudaMemcpyDeviceToHost));
  if (flag[0] == 0)
    return Status::success();
  int i = flag[0] - 1;
  const PlanData &d = plan_->data();
  std::string op = i >= 0 && size_t(i) < d.instructions.size()
                       ? d.instructions[size_t(i)].op
                       : std::string("?");
  return Status::error("instruction " + std::to_string(i) + " (" + op +
                       "): " + deviceErrorText(flag[1]) +
                       " (found by the kernel on the device)");
}

Status CudaBackend::beginStep() {
  busy_ = {0, 0, 0};
  OFFLOAD_CUDA_TRY(cudaMemset(errorFlag_, 0, 2 * sizeof(int)));
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

Status CudaBackend::readAfterStep(int id, uint64_t offset, void *dst,
                                  size_t bytes) {
  const BufferDesc &b = plan_->data().buffers[size_t(id)];
  if (offset > b.size || bytes > b.size - offset)
    return Status::error("buffer '" + b.name + "': range outside it");
  if (b.space == MemorySpace::Host) {
    std::memcpy(dst, ptr(id) + offset, bytes);
    return Status::success();
  }
  OFFLOAD_CUDA_TRY(
      cudaMemcpy(dst, ptr(id) + offset, bytes, cudaMemcpyDeviceToHost));
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
      CudaKernelArgs args{ins, outs, in.attrs, ctx_, i, conv_[size_t(i)]};
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
    return sync.withContext(
        "instructions [" + std::to_string(first) + ", " +
        std::to_string(last) +
        "): an asynchronous CUDA error (set CUDA_LAUNCH_BLOCKING=1 to "
        "attribute it to an op): ");
  if (Status s = deviceErrors(); !s.ok())
    return s;
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
