//===- KernelRegistryFallback.cpp - KernelRegistry without the kernels ----===//
//
// Part of offload. Compiled only when lib/Runtime/Kernels/Registry.cpp does
// not exist (the kernel library is built separately): the registry itself,
// dtypeName, and a registerAllHostKernels() that registers nothing.
//
//===----------------------------------------------------------------------===//

#include "offload/Runtime/Kernel.h"

#include <mutex>

using namespace offload::rt;

static std::mutex &registryMutex() {
  static std::mutex m;
  return m;
}

KernelRegistry &KernelRegistry::host() {
  static KernelRegistry r;
  return r;
}

void KernelRegistry::add(const std::string &opName, KernelFn fn) {
  std::lock_guard<std::mutex> g(registryMutex());
  for (auto &e : table_)
    if (e.first == opName) {
      e.second = fn;
      return;
    }
  table_.emplace_back(opName, fn);
}

KernelFn KernelRegistry::lookup(const std::string &opName) const {
  std::lock_guard<std::mutex> g(registryMutex());
  for (auto &e : table_)
    if (e.first == opName)
      return e.second;
  return nullptr;
}

std::vector<std::string> KernelRegistry::names() const {
  std::lock_guard<std::mutex> g(registryMutex());
  std::vector<std::string> out;
  for (auto &e : table_)
    out.push_back(e.first);
  return out;
}

const char *offload::rt::dtypeName(DType t) {
  switch (t) {
  case DType::F32:
    return "f32";
  case DType::F64:
    return "f64";
  case DType::I64:
    return "i64";
  case DType::I32:
    return "i32";
  case DType::Bool:
    return "bool";
  }
  return "?";
}

void offload::rt::registerAllHostKernels() {}
