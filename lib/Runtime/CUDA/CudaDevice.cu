//===- CudaDevice.cu - CUDA backend: arenas, streams, libraries -----------===//
//
// Part of offload. The CUDA backend's Device (../Device.h). One cudaMalloc
// for the device arena, cudaHostAlloc'd (pinned) memory for the host arena,
// three non-blocking streams, one CUDA event per plan event
// (cudaStreamWaitEvent / cudaEventRecord), cudaMemcpyAsync for copies, and
// the kernel table of CudaKernels.h for launches (cuBLAS, cuDNN and own
// kernels). The executor issues commands in program order; the measured
// peak is the executor's, so the plan's workspace buffer counts like any
// buffer.
//
// Session creation, in order: the op coverage (one error listing every op
// without a kernel, checked without a device), the device, the cuBLAS and
// cuDNN handles, the free-memory check (bytes needed vs free, before any
// allocation of the arena), the arenas, and (prepare) one cuDNN algorithm
// per convolution launch (the fastest deterministic one whose workspace
// fits in the plan's workspace, over the whole batch or else in batch
// slices; failing that, an error naming the instruction and the bytes it
// needs). A failed step leaves nothing
// committed (Session), and its message names the instruction, the op and
// the failing CUDA / cuBLAS / cuDNN call; bad input seen by a kernel on the
// device (an index out of range) fails the step after its synchronisation.
//
//===----------------------------------------------------------------------===//

#include "../Device.h"
#include "CudaKernels.h"
#include "offload/Runtime/Communicator.h"

#include <nccl.h>

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

class CudaDevice final : public Device {
public:
  ~CudaDevice() override;
  const char *name() const override { return "cuda"; }
  std::vector<std::string> ops() const override { return kernelNames(); }
  std::vector<std::string> missingOps(const PlanData &d) const override;
  Status open(std::shared_ptr<const Plan> plan,
              const SessionOptions &options) override;
  uint8_t *arenaBase(MemorySpace space) const override {
    return space == MemorySpace::Device ? device_ : host_;
  }
  Status prepare(const Launch &launch) override;
  Status upload(MemorySpace space, uint8_t *dst, const void *src,
                size_t bytes) override;
  Status download(MemorySpace space, void *dst, const uint8_t *src,
                  size_t bytes) override;
  bool keepsBuffersBetweenSteps() const override { return true; }
  Tensor hostTensor(DType dtype, std::vector<int64_t> shape) override;
  bool isHostTensor(const Tensor &t) const override;

  Status beginStep() override;
  Status waitEvent(int stream, int event, int instruction) override;
  Status copy(const Copy &copy) override;
  Status launch(const Launch &launch) override;
  Status collective(const Collective &c) override;
  std::string shardCollective(const Collective &c, cudaStream_t s);
  Status recordEvent(int stream, int event, int instruction) override;
  Status synchronize(int first, int last) override;
  std::array<double, NumStreams> busySeconds() const override { return busy_; }

private:
  /// Whether instruction `in` runs the host kernel (all its buffers are
  /// host buffers: optimizer updates of parameters kept on the host).
  static bool onHost(const PlanData &d, const InstructionDesc &in);
  /// Looks up each instruction's kernel; an error for an instruction that
  /// computes on a host buffer but not only on host buffers.
  Status resolveKernels();
  /// Creates the streams, library handles and error flag.
  Status createContext();
  /// Checks the free device memory and allocates the arenas and events.
  Status allocateArenas();
  /// Data parallel: joins the NCCL communicator of the session's
  /// Communicator's ranks (NCCL's unique id made by rank 0 and all-gathered
  /// through the host engine), one GPU per rank.
  Status joinNccl();
  /// Binds the libraries to the compute stream and the plan's workspace.
  Status configureLibraries();
  /// The device error flag's report, or success.
  Status deviceErrors();
  /// "instruction 5 (offload.linear): <what>".
  Status failed(int instruction, const std::string &what) const {
    return Status::error(instructionName(plan_->data(), instruction) + ": " +
                         what);
  }
  /// Records the timing event pair around the command of instruction i.
  void timeStart(int i, cudaStream_t s);
  void timeStop(int i, cudaStream_t s);

  std::shared_ptr<const Plan> plan_;
  SessionOptions opts_;
  std::vector<CudaKernelFn> kernels_;
  /// Instructions whose buffers are all in host memory (optimizer updates
  /// of parameters kept on the host) run the host kernel, in stream order,
  /// through cudaLaunchHostFunc; their results land in hostCalls_.
  std::vector<KernelFn> hostKernels_;
  struct HostCall {
    KernelFn fn;
    const Launch *launch;
    int threads;
    std::string error;
  };
  std::vector<std::unique_ptr<HostCall>> hostCalls_;
  uint8_t *device_ = nullptr, *host_ = nullptr;
  cudaStream_t streams_[NumStreams] = {};
  std::vector<cudaEvent_t> events_;
  std::vector<cudaEvent_t> timing_; ///< start/stop per instruction
  /// Instructions timed since the last synchronize, with their stream.
  std::vector<std::pair<int, int>> timed_;
  cublasHandle_t cublas_ = nullptr;
  cudnnHandle_t cudnn_ = nullptr;
  /// What the kernels share: stream, handles, workspace, error flag.
  CudaContext ctx_;
  /// Per instruction: the chosen convolution algorithm (convolutions only).
  std::vector<ConvChoice> conv_;
  int *errorFlag_ = nullptr; ///< two device ints (CudaContext::errorFlag)
  double *partials_ = nullptr; ///< CudaContext::partials
  bool deviceSet_ = false;
  std::array<double, NumStreams> busy_{};
  ncclComm_t nccl_ = nullptr;
};

CudaDevice::~CudaDevice() {
  if (!deviceSet_)
    return;
  for (cudaStream_t s : streams_)
    if (s)
      cudaStreamSynchronize(s);
  if (nccl_)
    ncclCommDestroy(nccl_);
  if (cublas_)
    cublasDestroy(cublas_);
  if (cudnn_)
    cudnnDestroy(cudnn_);
  if (errorFlag_)
    cudaFree(errorFlag_);
  if (partials_)
    cudaFree(partials_);
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

bool CudaDevice::onHost(const PlanData &d, const InstructionDesc &in) {
  if (in.outputs.empty())
    return false;
  for (const auto *ids : {&in.inputs, &in.outputs})
    for (int id : *ids)
      if (id >= 0 && d.buffers[size_t(id)].space != MemorySpace::Host)
        return false;
  return true;
}

std::vector<std::string> CudaDevice::missingOps(const PlanData &d) const {
  registerAllHostKernels();
  std::vector<std::string> missing;
  for (const InstructionDesc &in : d.instructions) {
    if (isRuntimeOp(in.op))
      continue;
    bool host = onHost(d, in);
    Kernel hostKernel = host ? KernelRegistry::host().lookup(in.op) : Kernel();
    bool have = host ? hostKernel != nullptr : lookupKernel(in.op) != nullptr;
    std::string name = host ? in.op + " (host)" : in.op;
    // bf16/f16: the host kernels that take them (emulated in f32) and the
    // CUDA kernels whose table entry says so (f32 compute, one rounding per
    // result: docs/precision.md); any other is refused by name and dtype.
    DType low = lowFloatOf(d, in);
    if (have && isLowFloat(low) &&
        (host ? hostKernel.lowFloat() == LowFloat::Rejected
              : !kernelTakesLowFloat(in.op))) {
      have = false;
      name = in.op + " (" + dtypeName(low) + (host ? ", host)" : ")");
    }
    if (!have && std::find(missing.begin(), missing.end(), name) == missing.end())
      missing.push_back(name);
  }
  return missing;
}

Status CudaDevice::resolveKernels() {
  const PlanData &d = plan_->data();
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
  return Status::success();
}

Status CudaDevice::createContext() {
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
  OFFLOAD_CUDA_TRY(cudaMalloc(reinterpret_cast<void **>(&partials_),
                              kPartialSlots * sizeof(double)));
  return Status::success();
}

Status CudaDevice::allocateArenas() {
  const PlanData &d = plan_->data();
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
  return Status::success();
}

Status CudaDevice::configureLibraries() {
  const PlanData &d = plan_->data();
  // The libraries work on the compute stream, in the plan's workspace
  // (cuBLAS's own default workspace pool is not used: cublasSetStream
  // resets it, so the workspace is set after the stream).
  ctx_.stream = streams_[ComputeStream];
  ctx_.cublas = cublas_;
  ctx_.cudnn = cudnn_;
  ctx_.errorFlag = errorFlag_;
  ctx_.partials = partials_;
  if (d.workspaceBuffer >= 0) {
    const BufferDesc &w = d.buffers[size_t(d.workspaceBuffer)];
    uintptr_t raw = reinterpret_cast<uintptr_t>(device_ + w.offset);
    uintptr_t aligned = (raw + 255) / 256 * 256;
    if (aligned - raw < w.size) {
      ctx_.workspace = reinterpret_cast<void *>(aligned);
      ctx_.workspaceBytes = size_t(w.size - (aligned - raw));
    }
  }
  cublasStatus_t st = cublasSetStream(cublas_, ctx_.stream);
  if (st != CUBLAS_STATUS_SUCCESS)
    return Status::error(cublasErrorText("cublasSetStream", st));
  st = cublasSetWorkspace(cublas_, ctx_.workspace, ctx_.workspaceBytes);
  // Without a workspace buffer, cuBLAS gets none (nullptr, 0 bytes). Should
  // a cuBLAS version refuse that, it keeps its default pool (outside the
  // plan, as the context is) rather than failing every such plan.
  if (st != CUBLAS_STATUS_SUCCESS && ctx_.workspaceBytes != 0)
    return Status::error(cublasErrorText("cublasSetWorkspace", st));
  // FP32 products in FP32 (no TF32), no atomics: reproducible results.
  // bf16/f16 products (cublasGemmEx, CUBLAS_COMPUTE_32F) reduce in f32, not
  // in their output type, also across split-K slices.
  st = cublasSetMathMode(
      cublas_, cublasMath_t(CUBLAS_DEFAULT_MATH |
                            CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION));
  if (st != CUBLAS_STATUS_SUCCESS)
    return Status::error(cublasErrorText("cublasSetMathMode", st));
  st = cublasSetAtomicsMode(cublas_, CUBLAS_ATOMICS_NOT_ALLOWED);
  if (st != CUBLAS_STATUS_SUCCESS)
    return Status::error(cublasErrorText("cublasSetAtomicsMode", st));
  cudnnStatus_t ds = cudnnSetStream(cudnn_, ctx_.stream);
  if (ds != CUDNN_STATUS_SUCCESS)
    return Status::error(cudnnErrorText("cudnnSetStream", ds));
  conv_.assign(d.instructions.size(), ConvChoice());
  return Status::success();
}

Status CudaDevice::open(std::shared_ptr<const Plan> plan,
                        const SessionOptions &options) {
  plan_ = std::move(plan);
  opts_ = options;
  // Ops first, so that a plan the backend cannot run fails with one list
  // even on a machine without a GPU.
  std::vector<std::string> missing = missingOps(plan_->data());
  if (!missing.empty())
    return Status::error("no CUDA kernel for: " + joinNames(missing));
  if (Status s = resolveKernels(); !s.ok())
    return s;
  if (Status s = createContext(); !s.ok())
    return s;
  if (Status s = allocateArenas(); !s.ok())
    return s;
  // Any communicator, one rank included (the NCCL path's check on one GPU:
  // offload-run --world-size 1 --rank 0 --rendezvous file:DIR).
  if (opts_.communicator)
    if (Status s = joinNccl(); !s.ok())
      return s;
  return configureLibraries();
}

Status CudaDevice::joinNccl() {
  Communicator &comm = *opts_.communicator;
  ncclUniqueId id;
  std::memset(&id, 0, sizeof(id));
  if (comm.rank() == 0) {
    ncclResult_t r = ncclGetUniqueId(&id);
    if (r != ncclSuccess)
      return Status::error(std::string("ncclGetUniqueId: ") + ncclGetErrorString(r));
  }
  auto all = comm.allGather(std::string(reinterpret_cast<const char *>(&id), sizeof(id)),
                            "the exchange of NCCL's unique id (an all-gather)");
  if (!all)
    return all.status();
  std::memcpy(&id, (*all)[0].data(), sizeof(id));
  ncclResult_t r = ncclCommInitRank(&nccl_, comm.worldSize(), id, comm.rank());
  if (r != ncclSuccess)
    return Status::error(std::string("ncclCommInitRank (rank ") + std::to_string(comm.rank()) +
                         " of " + std::to_string(comm.worldSize()) +
                         "): " + ncclGetErrorString(r));
  return Status::success();
}

/// Calls f(part, partOffset, rangeOffset, count) for each piece of
/// elements [begin, begin + count) of the concatenation of `parts` (ZeRO-1's
/// shard layout, Device.h's gatherRange); the padding past their end has
/// none.
template <typename F>
static void forEachPiece(const std::vector<TensorView> &parts, int64_t begin, int64_t count,
                         F f) {
  int64_t off = 0;
  for (size_t i = 0; i < parts.size(); ++i) {
    int64_t n = parts[i].numel();
    int64_t lo = std::max(begin, off), hi = std::min(begin + count, off + n);
    if (lo < hi)
      f(i, lo - off, lo - begin, hi - lo);
    off += n;
  }
}

/// ZeRO-1 on NCCL, without a staging buffer: the reduce-scatter is one
/// group of ncclReduce(ncclAvg) calls, one per piece of each rank's chunk
/// with that rank as root; the all-gather one group of ncclBroadcast calls
/// from each chunk's rank. One rank: device-to-device copies. Compiled,
/// not run (docs/data_parallel.md).
std::string CudaDevice::shardCollective(const Collective &c, cudaStream_t s) {
  int rank = 0, world = 1;
  if (nccl_) {
    ncclCommUserRank(nccl_, &rank);
    ncclCommCount(nccl_, &world);
  }
  std::string err;
  auto cuda = [&](cudaError_t e, const char *what) {
    if (e != cudaSuccess && err.empty())
      err = cudaErrorText(what, e);
  };
  auto nccl = [&](ncclResult_t r) {
    if (r != ncclSuccess && err.empty())
      err = c.what + " (NCCL): " + ncclGetErrorString(r);
  };
  const TensorView &shardView =
      c.kind == Collective::ReduceScatter ? c.outputs[0] : c.inputs[0];
  size_t es = dtypeSize(shardView.dtype);
  ncclDataType_t dt = shardView.dtype == DType::F64 ? ncclDouble : ncclFloat;
  int64_t S = shardView.numel();
  auto at = [&](const TensorView &v, int64_t k) {
    return static_cast<void *>(static_cast<uint8_t *>(v.data) + size_t(k) * es);
  };
  if (c.kind == Collective::ReduceScatter) {
    size_t n = c.inputs.size() / 2;
    std::vector<TensorView> grads(c.inputs.begin(), c.inputs.begin() + long(n));
    std::vector<TensorView> params(c.inputs.begin() + long(n), c.inputs.end());
    // Zeros first: the padding of the last chunk.
    cuda(cudaMemsetAsync(c.outputs[0].data, 0, c.outputs[0].bytes(), s), "cudaMemsetAsync");
    cuda(cudaMemsetAsync(c.outputs[1].data, 0, c.outputs[1].bytes(), s), "cudaMemsetAsync");
    forEachPiece(params, int64_t(rank) * S, S, [&](size_t i, int64_t po, int64_t ro, int64_t m) {
      cuda(cudaMemcpyAsync(at(c.outputs[1], ro), at(params[i], po), size_t(m) * es,
                           cudaMemcpyDeviceToDevice, s),
           "cudaMemcpyAsync");
    });
    if (!nccl_) {
      forEachPiece(grads, 0, S, [&](size_t i, int64_t po, int64_t ro, int64_t m) {
        cuda(cudaMemcpyAsync(at(c.outputs[0], ro), at(grads[i], po), size_t(m) * es,
                             cudaMemcpyDeviceToDevice, s),
             "cudaMemcpyAsync");
      });
      return err;
    }
    nccl(ncclGroupStart());
    for (int r = 0; r < world && err.empty(); ++r)
      forEachPiece(grads, int64_t(r) * S, S, [&](size_t i, int64_t po, int64_t ro, int64_t m) {
        // recvbuff is written on the root only.
        nccl(ncclReduce(at(grads[i], po), at(c.outputs[0], ro), size_t(m), dt, ncclAvg, r,
                        nccl_, s));
      });
    nccl(ncclGroupEnd());
    return err;
  }
  if (!nccl_) {
    forEachPiece(c.outputs, 0, S, [&](size_t i, int64_t po, int64_t ro, int64_t m) {
      cuda(cudaMemcpyAsync(at(c.outputs[i], po), at(c.inputs[0], ro), size_t(m) * es,
                           cudaMemcpyDeviceToDevice, s),
           "cudaMemcpyAsync");
    });
    return err;
  }
  nccl(ncclGroupStart());
  for (int r = 0; r < world && err.empty(); ++r)
    forEachPiece(c.outputs, int64_t(r) * S, S, [&](size_t i, int64_t po, int64_t ro, int64_t m) {
      // sendbuff is read on the root only: there, this rank's shard.
      nccl(ncclBroadcast(at(c.inputs[0], ro), at(c.outputs[i], po), size_t(m), dt, r, nccl_,
                         s));
    });
  nccl(ncclGroupEnd());
  return err;
}

Status CudaDevice::collective(const Collective &c) {
  cudaStream_t s = streams_[c.stream];
  timeStart(c.instruction, s);
  std::string err;
  if (c.kind != Collective::AllReduce) {
    err = shardCollective(c, s);
  } else if (nccl_) {
    // One group: NCCL runs the bucket's reductions as one operation.
    ncclResult_t r = ncclGroupStart();
    for (size_t k = 0; r == ncclSuccess && k < c.inputs.size(); ++k)
      r = ncclAllReduce(c.inputs[k].data, c.outputs[k].data, size_t(c.inputs[k].numel()),
                        c.inputs[k].dtype == DType::F64 ? ncclDouble : ncclFloat, ncclAvg,
                        nccl_, s);
    ncclResult_t g = ncclGroupEnd();
    if (r == ncclSuccess)
      r = g;
    if (r != ncclSuccess)
      err = c.what + " (NCCL): " + ncclGetErrorString(r);
  } else {
    // One rank: the mean is the bucket itself.
    for (size_t k = 0; err.empty() && k < c.inputs.size(); ++k)
      if (c.inputs[k].data != c.outputs[k].data) {
        cudaError_t e = cudaMemcpyAsync(c.outputs[k].data, c.inputs[k].data,
                                        c.inputs[k].bytes(), cudaMemcpyDeviceToDevice, s);
        if (e != cudaSuccess)
          err = cudaErrorText("cudaMemcpyAsync", e);
      }
  }
  timeStop(c.instruction, s);
  if (!err.empty())
    return failed(c.instruction, err);
  return Status::success();
}

Status CudaDevice::prepare(const Launch &l) {
  int i = l.instruction;
  if (!kernels_[size_t(i)] || !isConvOp(l.desc->op))
    return Status::success();
  size_t needed = 0;
  std::string err = chooseConvAlgorithm(l.desc->op, l.inputs, l.outputs,
                                        l.desc->attrs, ctx_, conv_[size_t(i)],
                                        &needed);
  if (err.empty())
    return Status::success();
  return failed(i, err + (needed ? " (give the plan a workspace buffer of at "
                                   "least " + std::to_string(needed) +
                                       " bytes)"
                                 : std::string()));
}

Status CudaDevice::upload(MemorySpace space, uint8_t *dst, const void *src,
                          size_t bytes) {
  if (space == MemorySpace::Host) {
    std::memcpy(dst, src, bytes);
    return Status::success();
  }
  OFFLOAD_CUDA_TRY(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice));
  return Status::success();
}

Status CudaDevice::download(MemorySpace space, void *dst, const uint8_t *src,
                            size_t bytes) {
  if (space == MemorySpace::Host) {
    std::memcpy(dst, src, bytes);
    return Status::success();
  }
  OFFLOAD_CUDA_TRY(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost));
  return Status::success();
}

Tensor CudaDevice::hostTensor(DType dtype, std::vector<int64_t> shape) {
  size_t bytes = dtypeSize(dtype);
  for (int64_t d : shape)
    bytes *= size_t(d);
  if (bytes < (size_t(1) << 16)) // small: pinning would not pay
    return Tensor(dtype, std::move(shape));
  void *p = nullptr;
  if (cudaMallocHost(&p, bytes) != cudaSuccess) {
    cudaGetLastError(); // clear it: pageable memory works, only slower
    return Tensor(dtype, std::move(shape));
  }
  std::memset(p, 0, bytes);
  return Tensor::borrow(dtype, std::move(shape), p,
                        std::shared_ptr<void>(p, [](void *q) {
                          cudaFreeHost(q);
                        }));
}

bool CudaDevice::isHostTensor(const Tensor &t) const {
  if (t.byteSize() < (size_t(1) << 16))
    return true;
  cudaPointerAttributes attr;
  if (cudaPointerGetAttributes(&attr, t.data()) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  return attr.type == cudaMemoryTypeHost;
}

Status CudaDevice::deviceErrors() {
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

Status CudaDevice::beginStep() {
  busy_ = {};
  OFFLOAD_CUDA_TRY(cudaMemset(errorFlag_, 0, 2 * sizeof(int)));
  return Status::success();
}

void CudaDevice::timeStart(int i, cudaStream_t s) {
  cudaEventRecord(timing_[2 * size_t(i)], s);
}

void CudaDevice::timeStop(int i, cudaStream_t s) {
  cudaEventRecord(timing_[2 * size_t(i) + 1], s);
  timed_.push_back({i, plan_->data().instructions[size_t(i)].stream});
}

Status CudaDevice::waitEvent(int stream, int event, int instruction) {
  cudaError_t e = cudaStreamWaitEvent(streams_[stream], events_[size_t(event)], 0);
  if (e != cudaSuccess)
    return failed(instruction, cudaErrorText("cudaStreamWaitEvent", e));
  return Status::success();
}

Status CudaDevice::copy(const Copy &c) {
  cudaStream_t s = streams_[c.stream];
  cudaMemcpyKind kind = c.kind == CopyKind::HostToDevice ? cudaMemcpyHostToDevice
                        : c.kind == CopyKind::DeviceToHost
                            ? cudaMemcpyDeviceToHost
                            : cudaMemcpyDeviceToDevice;
  timeStart(c.instruction, s);
  cudaError_t e = cudaMemcpyAsync(c.dst, c.src, size_t(c.bytes), kind, s);
  timeStop(c.instruction, s);
  if (e != cudaSuccess)
    return failed(c.instruction, cudaErrorText("cudaMemcpyAsync", e));
  return Status::success();
}

Status CudaDevice::launch(const Launch &l) {
  int i = l.instruction;
  cudaStream_t s = streams_[l.stream];
  std::string err;
  timeStart(i, s);
  if (KernelFn fn = hostKernels_[size_t(i)]) {
    // Host compute in stream order: the callback runs once the work
    // before it on this stream (and the events it waits on) completed.
    auto call = std::make_unique<HostCall>();
    call->fn = fn;
    call->launch = &l;
    call->threads = std::max(1, opts_.numThreads);
    cudaError_t ce = cudaLaunchHostFunc(
        s,
        [](void *p) {
          auto *c = static_cast<HostCall *>(p);
          KernelArgs args{c->launch->inputs, c->launch->outputs,
                          c->launch->desc->attrs, c->threads};
          c->error = c->fn(args);
        },
        call.get());
    if (ce != cudaSuccess)
      err = cudaErrorText("cudaLaunchHostFunc", ce);
    hostCalls_.push_back(std::move(call));
  } else {
    CudaKernelArgs args{l.inputs, l.outputs, l.desc->attrs, ctx_, i,
                        conv_[size_t(i)]};
    err = kernels_[size_t(i)](args);
  }
  timeStop(i, s);
  if (!err.empty())
    return failed(i, err);
  return Status::success();
}

Status CudaDevice::recordEvent(int stream, int event, int instruction) {
  cudaError_t e = cudaEventRecord(events_[size_t(event)], streams_[stream]);
  if (e != cudaSuccess)
    return failed(instruction, cudaErrorText("cudaEventRecord", e));
  return Status::success();
}

Status CudaDevice::synchronize(int first, int last) {
  // Wait for every stream; asynchronous kernel faults surface here.
  Status sync;
  for (cudaStream_t s : streams_) {
    cudaError_t e = cudaStreamSynchronize(s);
    if (e != cudaSuccess && sync.ok())
      sync = Status::error(cudaErrorText("cudaStreamSynchronize(s)", e));
  }
  Status hostCall;
  for (const auto &c : hostCalls_)
    if (!c->error.empty() && hostCall.ok())
      hostCall = Status::error("host-side kernel: " + c->error);
  hostCalls_.clear();
  std::vector<std::pair<int, int>> timed;
  timed.swap(timed_);
  if (!hostCall.ok())
    return hostCall;
  if (!sync.ok())
    return sync.withContext(
        "instructions [" + std::to_string(first) + ", " +
        std::to_string(last) +
        "): an asynchronous CUDA error (set CUDA_LAUNCH_BLOCKING=1 to "
        "attribute it to an op): ");
  if (Status s = deviceErrors(); !s.ok())
    return s;
  for (const auto &[i, stream] : timed) {
    float ms = 0;
    if (cudaEventElapsedTime(&ms, timing_[2 * size_t(i)],
                             timing_[2 * size_t(i) + 1]) == cudaSuccess)
      busy_[size_t(stream)] += double(ms) * 1e-3;
  }
  cudaGetLastError(); // clear a sticky "not ready" from elapsed-time queries
  return Status::success();
}

} // namespace

std::unique_ptr<Device> offload::rt::createCudaDevice() {
  return std::make_unique<CudaDevice>();
}
