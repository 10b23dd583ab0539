//===- Tensor.h - Owning host tensor ---------------------------*- C++ -*-===//
//
// Part of offload. A dense, row-major tensor in host memory: what the user
// binds to a session and reads back from it. It owns its bytes, or borrows
// them from an owner it keeps alive (Tensor::borrow: an input bound without
// a copy). Copies always own. Header-only.
//
//===----------------------------------------------------------------------===//
#ifndef OFFLOAD_RUNTIME_TENSOR_H
#define OFFLOAD_RUNTIME_TENSOR_H

#include "offload/Runtime/Kernel.h"
#include "offload/Runtime/Float16.h"

#include <cstring>
#include <memory>
#include <string>
#include <vector>

namespace offload {
namespace rt {

class Tensor {
public:
  Tensor() = default;
  /// Zero-filled tensor of `shape` (rank 0 = one element), owning its bytes.
  Tensor(DType dtype, std::vector<int64_t> shape)
      : dtype_(dtype), shape_(std::move(shape)) {
    size_ = size_t(numel()) * dtypeSize(dtype);
    if (size_)
      storage_ = std::shared_ptr<uint8_t>(new uint8_t[size_](),
                                          std::default_delete<uint8_t[]>());
  }
  /// A tensor viewing `size` = numel(shape) * dtypeSize(dtype) bytes at
  /// `data` that someone else owns: `owner` keeps them alive (it is
  /// released when the last tensor sharing the view is destroyed). No copy.
  /// The caller promises the bytes stay valid while `owner` lives. Copying a
  /// borrowed tensor copies its bytes into an owning one.
  static Tensor borrow(DType dtype, std::vector<int64_t> shape, void *data,
                       std::shared_ptr<void> owner) {
    Tensor t;
    t.dtype_ = dtype;
    t.shape_ = std::move(shape);
    t.size_ = size_t(t.numel()) * dtypeSize(dtype);
    t.storage_ =
        std::shared_ptr<uint8_t>(std::move(owner), static_cast<uint8_t *>(data));
    t.borrowed_ = true;
    return t;
  }
  /// Copies make an owning tensor with a copy of the bytes (a borrowed
  /// tensor's copy owns its bytes too).
  Tensor(const Tensor &o) : dtype_(o.dtype_), shape_(o.shape_), size_(o.size_) {
    if (size_) {
      storage_ = std::shared_ptr<uint8_t>(new uint8_t[size_],
                                          std::default_delete<uint8_t[]>());
      std::memcpy(storage_.get(), o.storage_.get(), size_);
    }
  }
  Tensor &operator=(const Tensor &o) {
    if (this != &o)
      *this = Tensor(o);
    return *this;
  }
  Tensor(Tensor &&o) noexcept
      : dtype_(o.dtype_), shape_(std::move(o.shape_)), size_(o.size_),
        storage_(std::move(o.storage_)), borrowed_(o.borrowed_) {
    o.size_ = 0;
    o.borrowed_ = false;
  }
  Tensor &operator=(Tensor &&o) noexcept {
    dtype_ = o.dtype_;
    shape_ = std::move(o.shape_);
    size_ = o.size_;
    storage_ = std::move(o.storage_);
    borrowed_ = o.borrowed_;
    o.size_ = 0;
    o.borrowed_ = false;
    return *this;
  }

  /// A tensor of `values` (numel(shape) elements of T, which must match
  /// dtype's element size).
  template <typename T>
  static Tensor fromVector(DType dtype, std::vector<int64_t> shape,
                           const std::vector<T> &values) {
    Tensor t(dtype, std::move(shape));
    if (sizeof(T) == dtypeSize(dtype) &&
        values.size() * sizeof(T) == t.size_ && !values.empty())
      std::memcpy(t.data(), values.data(), t.size_);
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
  size_t byteSize() const { return size_; }
  void *data() { return storage_.get(); }
  const void *data() const { return storage_.get(); }
  /// Whether the bytes belong to someone else (borrow()).
  bool borrowed() const { return borrowed_; }
  /// A reference that keeps this tensor's bytes alive, even after the tensor
  /// is destroyed or replaced (for views of them, e.g. numpy arrays).
  std::shared_ptr<void> keepAlive() const { return storage_; }
  template <typename T> T *as() { return reinterpret_cast<T *>(data()); }
  template <typename T> const T *as() const {
    return reinterpret_cast<const T *>(data());
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
    case DType::BF16:
      return bf16ToFloat(as<uint16_t>()[i]);
    case DType::F16:
      return f16ToFloat(as<uint16_t>()[i]);
    }
    return 0;
  }
  bool sameTypeAndShape(DType dt, const std::vector<int64_t> &shape) const {
    return dtype_ == dt && shape_ == shape;
  }
  bool bitEqual(const Tensor &o) const {
    return dtype_ == o.dtype_ && shape_ == o.shape_ && size_ == o.size_ &&
           (size_ == 0 || std::memcmp(data(), o.data(), size_) == 0);
  }

private:
  DType dtype_ = DType::F32;
  std::vector<int64_t> shape_;
  size_t size_ = 0;
  std::shared_ptr<uint8_t> storage_;
  bool borrowed_ = false;
};

} // namespace rt
} // namespace offload

#endif // OFFLOAD_RUNTIME_TENSOR_H
