//===- CudaUnavailable.cpp - createCudaDevice without CUDA ----------------===//
//
// Part of offload. Linked instead of the CUDA device when the library is
// built without CUDA (OFFLOAD_ENABLE_CUDA=OFF).
//
//===----------------------------------------------------------------------===//

#include "Device.h"

std::unique_ptr<offload::rt::Device> offload::rt::createCudaDevice() {
  return nullptr;
}
