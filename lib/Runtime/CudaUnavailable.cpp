//===- CudaUnavailable.cpp - createCudaBackend without CUDA ---------------===//
//
// Part of offload. Built when OFFLOAD_ENABLE_CUDA is off.
//
//===----------------------------------------------------------------------===//

#include "Backend.h"

std::unique_ptr<offload::rt::Backend> offload::rt::createCudaBackend() {
  return nullptr;
}
