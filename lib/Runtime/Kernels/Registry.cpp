//===- Registry.cpp - Host kernel registry ---------------------------------===//
//
// Part of offload. KernelRegistry storage and lookup, and
// registerAllHostKernels(), which registers every kernel file of
// OffloadKernels.
//
//===----------------------------------------------------------------------===//

#include "Kernels.h"
#include "offload/Runtime/OpSignatures.h"

#include <mutex>
#include <sstream>

namespace offload {
namespace rt {

static std::mutex &registryMutex() {
  static std::mutex m;
  return m;
}

KernelRegistry &KernelRegistry::host() {
  static KernelRegistry r;
  return r;
}

void KernelRegistry::add(const std::string &opName, KernelFn fn, Absent absent,
                         LowFloat lowFloat) {
  std::lock_guard<std::mutex> lock(registryMutex());
  for (auto &e : table_)
    if (e.name == opName) {
      e.fn = fn;
      e.absent = absent;
      e.lowFloat = lowFloat;
      return;
    }
  table_.push_back({opName, fn, absent, lowFloat});
}

Kernel KernelRegistry::lookup(const std::string &opName) const {
  std::lock_guard<std::mutex> lock(registryMutex());
  for (auto &e : table_)
    if (e.name == opName) return Kernel(e.name, e.fn, e.absent, e.lowFloat);
  return Kernel();
}

std::string checkKernelArgs(const std::string &op, const KernelArgs &a,
                            Absent absent) {
  if (const OpSignature *sig = findOpSignature(op)) {
    size_t nIn = a.inputs.size(), nOut = a.outputs.size();
    if (nIn < size_t(sig->minInputs) ||
        (sig->maxInputs >= 0 && nIn > size_t(sig->maxInputs)) ||
        nOut != size_t(sig->numOutputs)) {
      std::ostringstream os;
      os << op << ": expected ";
      if (sig->maxInputs == sig->minInputs)
        os << sig->minInputs;
      else if (sig->maxInputs < 0)
        os << "at least " << sig->minInputs;
      else
        os << "between " << sig->minInputs << " and " << sig->maxInputs;
      os << " inputs and " << sig->numOutputs << " outputs, got " << nIn
         << " and " << nOut;
      return os.str();
    }
  }
  auto views = [&](const std::vector<TensorView> &v,
                   const char *what) -> std::string {
    for (size_t i = 0; i < v.size(); ++i) {
      for (int64_t d : v[i].shape)
        if (d < 0) {
          std::ostringstream os;
          os << op << ": " << what << " " << i << " has a negative dimension [";
          for (size_t k = 0; k < v[i].shape.size(); ++k)
            os << (k ? "," : "") << v[i].shape[k];
          os << "]";
          return os.str();
        }
      if (absent == Absent::Rejected && !v[i].data && v[i].numel() != 0)
        return op + ": " + what + " " + std::to_string(i) + " is null";
    }
    return "";
  };
  if (std::string e = views(a.inputs, "input"); !e.empty())
    return e;
  return views(a.outputs, "output");
}

std::string Kernel::operator()(const KernelArgs &args) const {
  if (!fn_)
    return op_ + ": no kernel";
  if (std::string e = checkKernelArgs(op_, args, absent_); !e.empty())
    return e;
  if (lowFloat_ == LowFloat::Rejected)
    for (const auto *views : {&args.inputs, &args.outputs})
      for (const TensorView &v : *views)
        if (isLowFloat(v.dtype))
          return op_ + ": the host backend has no " + dtypeName(v.dtype) +
                 " kernel for this op";
  return fn_(args);
}

std::vector<std::string> KernelRegistry::names() const {
  std::lock_guard<std::mutex> lock(registryMutex());
  std::vector<std::string> r;
  r.reserve(table_.size());
  for (auto &e : table_) r.push_back(e.name);
  return r;
}

void registerAllHostKernels() {
  static std::once_flag once;
  std::call_once(once, [] {
    KernelRegistry &r = KernelRegistry::host();
    kernels::registerElementwiseKernels(r);
    kernels::registerReductionKernels(r);
    kernels::registerShapeKernels(r);
    kernels::registerLossKernels(r);
    kernels::registerOptimizerKernels(r);
    kernels::registerRandomKernels(r);
    kernels::registerEmbeddingKernels(r);
    kernels::registerSoftmaxKernels(r);
    kernels::registerLinAlgKernels(r);
    kernels::registerAttentionKernels(r);
    kernels::registerConvKernels(r);
    kernels::registerPoolKernels(r);
    kernels::registerNormKernels(r);
  });
}

} // namespace rt
} // namespace offload
