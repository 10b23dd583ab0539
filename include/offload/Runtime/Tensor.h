//===- Tensor.h - Owning host tensor ---------------------------*- C++ -*-===//
//
// Part of offload. A dense, row-major tensor in host memory that owns its
// bytes: what the user binds to a session and reads back from it. Header-only.
//
//===----------------------------------------------------------------------===//
#ifndef OFFLOAD_RUNTIME_TENSOR_H
#define OFFLOAD_RUNTIME_TENSOR_H

#include "offload/Runtime/Kernel.h"

#include <cstring>
#include <string>
#include <vector>

namespace offload {
namespace rt {

class Tensor {
public:
  Tensor() = default;
  /// Zero-filled tensor of `shape` (rank 0 = one element).
  Tensor(DType dtype, std::vector<int64_t> shape)
      : dtype_(dtype), shape_(std::move(shape)),
        bytes_(size_t(numel()) * dtypeSize(dtype), 0) {}

  /// A tensor holding `values` (numel(shape) elements of T, which must match
  /// dtype's element size).
  template <typename T>
  static Tensor fromVector(DType dtype, std::vector<int64_t> shape,
                           const std::vector<T> &values) {
    Tensor t(dtype, std::move(shape));
    if (sizeof(T) == dtypeSize(dtype) &&
        values.size() * sizeof(T) == t.bytes_.size() && !values.empty())
      std::memcpy(t.bytes_.data(), values.data(), t.bytes_.size());
    return t;
  }

  DType dtype() const { return dtype_; }
  const std::vector<int64_t> &shape() const { return shape_; }
  int64_t numel() const {
    int64_t n = 1;
    for (int64_t d : shape_)
      n *= d;
    return n;
  }
  /// Bytes of data (numel * element size).
  size_t byteSize() const { return bytes_.size(); }
  void *data() { return bytes_.data(); }
  const void *data() const { return bytes_.data(); }
  template <typename T> T *as() { return reinterpret_cast<T *>(bytes_.data()); }
  template <typename T> const T *as() const {
    return reinterpret_cast<const T *>(bytes_.data());
  }
  /// Element i as double (any dtype).
  double at(int64_t i) const {
    switch (dtype_) {
    case DType::F32:
      return as<float>()[i];
    case DType::F64:
      return as<double>()[i];
    case DType::I64:
      return double(as<int64_t>()[i]);
    case DType::I32:
      return as<int32_t>()[i];
    case DType::Bool:
      return as<uint8_t>()[i];
    }
    return 0;
  }
  bool sameTypeAndShape(DType dt, const std::vector<int64_t> &shape) const {
    return dtype_ == dt && shape_ == shape;
  }
  bool bitEqual(const Tensor &o) const {
    return dtype_ == o.dtype_ && shape_ == o.shape_ && bytes_ == o.bytes_;
  }

private:
  DType dtype_ = DType::F32;
  std::vector<int64_t> shape_;
  std::vector<uint8_t> bytes_;
};

/// "f32[2,3]": dtype and shape in the runtime's error messages.
inline std::string typeString(DType dt, const std::vector<int64_t> &shape) {
  static const char *names[] = {"f32", "f64", "i64", "i32", "bool"};
  std::string s = uint8_t(dt) <= 4 ? names[uint8_t(dt)] : "?";
  s += "[";
  for (size_t i = 0; i < shape.size(); ++i)
    s += (i ? "," : "") + std::to_string(shape[i]);
  return s + "]";
}

} // namespace rt
} // namespace offload

#endif // OFFLOAD_RUNTIME_TENSOR_H
