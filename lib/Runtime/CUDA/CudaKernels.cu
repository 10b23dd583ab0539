//===- CudaKernels.cu - Kernel table and shared helpers -------------------===//
//
// Part of offload. The CUDA backend's kernel table (assembled from the
// entries of CudaElementwise.cu, CudaData.cu, CudaLossOpt.cu, CudaDnn.cu
// and CudaNormPool.cu), error texts of the CUDA, cuBLAS and cuDNN libraries, and the
// operand checks shared by the kernel files.
//
//===----------------------------------------------------------------------===//

#include "CudaCommon.cuh"

namespace offload {
namespace rt {
namespace cuda {

std::string cudaErrorText(const char *call, cudaError_t err) {
  return std::string(call) + ": " + cudaGetErrorString(err) + " (" +
         cudaGetErrorName(err) + ")";
}

std::string cublasErrorText(const char *call, cublasStatus_t st) {
  return std::string(call) + ": " + cublasGetStatusName(st) + " (" +
         cublasGetStatusString(st) + ")";
}

std::string cudnnErrorText(const char *call, cudnnStatus_t st) {
  return std::string(call) + ": " + cudnnGetErrorString(st);
}

const char *deviceErrorText(int code) {
  switch (code) {
  case kDeviceErrorIndexRange:
    return "an index operand (class target, embedding index or max-pool "
           "index) is out of range";
  default:
    return "unknown device error";
  }
}

std::string shapeStr(const std::vector<int64_t> &s) {
  std::string r = "[";
  for (size_t i = 0; i < s.size(); ++i)
    r += (i ? "," : "") + std::to_string(s[i]);
  return r + "]";
}

std::string needFloat(const TensorView &t, const char *op, const char *what) {
  if (t.dtype != DType::F32 && t.dtype != DType::F64)
    return std::string(op) + ": " + what + " must be f32 or f64, got " +
           dtypeName(t.dtype);
  return "";
}

std::string needSame(const TensorView &a, const TensorView &b, const char *op,
                     const char *an, const char *bn) {
  if (a.dtype != b.dtype)
    return std::string(op) + ": " + an + " is " + dtypeName(a.dtype) +
           " but " + bn + " is " + dtypeName(b.dtype);
  if (a.shape != b.shape)
    return std::string(op) + ": " + an + " has shape " + shapeStr(a.shape) +
           " but " + bn + " has shape " + shapeStr(b.shape);
  return "";
}

std::string needDType(const TensorView &t, DType d, const char *op,
                      const char *what) {
  if (t.dtype != d)
    return std::string(op) + ": " + what + " must be " + dtypeName(d) +
           ", got " + dtypeName(t.dtype);
  return "";
}

namespace {
const std::vector<Entry> &table() {
  static const std::vector<Entry> t = [] {
    std::vector<Entry> all;
    for (const std::vector<Entry> *part :
         {&elementwiseEntries(), &dataEntries(), &lossOptEntries(),
          &dnnEntries(), &normPoolEntries(), &attentionEntries()})
      all.insert(all.end(), part->begin(), part->end());
    return all;
  }();
  return t;
}
} // namespace

CudaKernelFn lookupKernel(const std::string &op) {
  for (const Entry &e : table())
    if (op == e.name)
      return e.fn;
  return nullptr;
}

LowFloat kernelLowFloat(const std::string &op) {
  for (const Entry &e : table())
    if (op == e.name)
      return e.lowFloat;
  return LowFloat::Rejected;
}

std::vector<std::string> kernelNames() {
  std::vector<std::string> out;
  for (const Entry &e : table())
    out.push_back(e.name);
  return out;
}

bool isConvOp(const std::string &op) {
  return op == "offload.conv2d" || op == "offload.conv2d_backward_input" ||
         op == "offload.conv2d_backward_weight";
}

} // namespace cuda
} // namespace rt
} // namespace offload
