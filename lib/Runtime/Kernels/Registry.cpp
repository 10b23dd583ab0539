//===- Registry.cpp - Host kernel registry ---------------------------------===//
//
// Part of offload. KernelRegistry storage and lookup, dtype names, and
// registerAllHostKernels(), which registers every kernel file of
// OffloadKernels.
//
//===----------------------------------------------------------------------===//

#include "Kernels.h"

#include <mutex>

namespace offload {
namespace rt {

const char *dtypeName(DType t) {
  switch (t) {
  case DType::F32: return "f32";
  case DType::F64: return "f64";
  case DType::I64: return "i64";
  case DType::I32: return "i32";
  case DType::Bool: return "i1";
  }
  return "unknown";
}

static std::mutex &registryMutex() {
  static std::mutex m;
  return m;
}

KernelRegistry &KernelRegistry::host() {
  static KernelRegistry r;
  return r;
}

void KernelRegistry::add(const std::string &opName, KernelFn fn) {
  std::lock_guard<std::mutex> lock(registryMutex());
  for (auto &e : table_)
    if (e.first == opName) {
      e.second = fn;
      return;
    }
  table_.emplace_back(opName, fn);
}

KernelFn KernelRegistry::lookup(const std::string &opName) const {
  std::lock_guard<std::mutex> lock(registryMutex());
  for (auto &e : table_)
    if (e.first == opName) return e.second;
  return nullptr;
}

std::vector<std::string> KernelRegistry::names() const {
  std::lock_guard<std::mutex> lock(registryMutex());
  std::vector<std::string> r;
  r.reserve(table_.size());
  for (auto &e : table_) r.push_back(e.first);
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
    kernels::registerConvKernels(r);
    kernels::registerPoolKernels(r);
    kernels::registerNormKernels(r);
  });
}

} // namespace rt
} // namespace offload
