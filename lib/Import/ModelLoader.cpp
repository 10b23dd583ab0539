//===- ModelLoader.cpp - Loading a .pt and writing its parameters ---------===//
//
// Part of offload. torch::jit::load on the CPU, with every LibTorch failure
// turned into a one-line message, and the parameter export through the
// runtime's npz writer (offload/Runtime/Npz.h).
//
//===----------------------------------------------------------------------===//
#include "offload/Support/InputFiles.h"
#include "Importer.h"

using namespace mlir;
using namespace mlir::offload;
using namespace ::offload::import;
using namespace ::offload::import::ts;

#include "offload/Runtime/Npz.h"

#include <torch/csrc/jit/serialization/import.h>

#include <cstring>
#include <fstream>

//===----------------------------------------------------------------------===//
// Loading
//===----------------------------------------------------------------------===//

void LoadedModelDeleter::operator()(LoadedModel *m) const { delete m; }

std::string ts::firstLine(const std::string &s) {
  // The first line with text: some LibTorch messages start with a newline
  // (a TorchScript file using an op LibTorch 1.13 lacks: "\nUnknown builtin
  // op: ...").
  size_t start = s.find_first_not_of(" \r\n");
  if (start == std::string::npos)
    return "";
  std::string line = s.substr(start, s.find('\n', start) - start);
  while (!line.empty() && (line.back() == ' ' || line.back() == '\r'))
    line.pop_back();
  return line;
}

std::string ts::torchMessage(const std::exception &e) {
  if (auto *ce = dynamic_cast<const c10::Error *>(&e))
    return firstLine(ce->what_without_backtrace());
  return firstLine(e.what());
}

auto ::offload::import::loadModel(const std::string &path, ImportError &err)
    -> LoadedModelPtr {
  // A regular file only: a FIFO, /dev/zero or a directory is refused by
  // name before LibTorch opens it (InputFiles.h).
  if (std::string e = ::offload::checkInputFile(path, "model file"); !e.empty()) {
    err = {1, e};
    return nullptr;
  }
  try {
    auto m = std::make_unique<LoadedModel>();
    m->module = tj::load(path, c10::Device(c10::kCPU));
    m->path = path;
    if (!m->module.find_method("forward")) {
      err = {1, "'" + path + "' has no forward method"};
      return nullptr;
    }
    return LoadedModelPtr(m.release());
  } catch (const std::exception &e) {
    err = {1, "cannot load '" + path + "' as TorchScript: " + torchMessage(e)};
    return nullptr;
  } catch (...) {
    err = {2, "cannot load '" + path + "': unknown exception"};
    return nullptr;
  }
}

//===----------------------------------------------------------------------===//
// Parameter export
//===----------------------------------------------------------------------===//

/// A parameter or buffer as the runtime's tensor: floating tensors keep
/// f64, bf16 or f16 or become f32, bool stays bool, other integers become i64 (as
/// python/export_models.py writes them).
static ::offload::rt::Tensor toTensor(const at::Tensor &t0) {
  namespace rt = ::offload::rt;
  at::Tensor t = t0.detach().contiguous().cpu();
  rt::DType dt;
  if (t.scalar_type() == at::kBFloat16 || t.scalar_type() == at::kHalf) {
    // bf16-true models keep their bf16/f16 weights (the bits, 2 bytes).
    dt = t.scalar_type() == at::kBFloat16 ? rt::DType::BF16 : rt::DType::F16;
  } else if (t.is_floating_point()) {
    if (t.scalar_type() != at::kDouble)
      t = t.to(at::kFloat);
    dt = t.scalar_type() == at::kDouble ? rt::DType::F64 : rt::DType::F32;
  } else if (t.scalar_type() == at::kBool) {
    dt = rt::DType::Bool;
  } else {
    t = t.to(at::kLong);
    dt = rt::DType::I64;
  }
  rt::Tensor r(dt, t.sizes().vec());
  std::memcpy(r.data(), t.data_ptr(), size_t(t.numel()) * t.element_size());
  return r;
}

auto ::offload::import::writeParams(LoadedModel &model, const std::string &path)
    -> std::string {
  try {
    ::offload::rt::NamedTensors arrays;
    for (const auto &p : model.module.named_parameters(true))
      arrays.emplace_back(p.name, toTensor(p.value));
    for (const auto &b : model.module.named_buffers(true))
      arrays.emplace_back(b.name, toTensor(b.value));
    ::offload::rt::Status st = ::offload::rt::writeNpz(path, arrays);
    return st.ok() ? std::string() : "cannot write parameters: " + st.message();
  } catch (const std::exception &e) {
    return "cannot write parameters: " + torchMessage(e);
  }
}
