//===- Status.h - Error values of the offload runtime -----------*- C++ -*-===//
//
// Part of offload. The runtime never lets an exception escape: every fallible
// call returns a Status (success or a one-line message) or an Expected<T>
// (a value or a Status). Header-only; no dependencies.
//
//===----------------------------------------------------------------------===//
#ifndef OFFLOAD_RUNTIME_STATUS_H
#define OFFLOAD_RUNTIME_STATUS_H

#include <cassert>
#include <optional>
#include <string>
#include <utility>

// nvcc warns about [[nodiscard]] types on plain assignment; keep the
// attribute for host compilers only.
#if defined(__CUDACC__)
#define OFFLOAD_NODISCARD
#else
#define OFFLOAD_NODISCARD [[nodiscard]]
#endif

namespace offload {
namespace rt {

/// Success, or an error with a human-readable message.
class OFFLOAD_NODISCARD Status {
public:
  Status() = default;
  static Status success() { return Status(); }
  static Status error(std::string message) {
    Status s;
    s.failed_ = true;
    s.message_ = std::move(message);
    return s;
  }
  bool ok() const { return !failed_; }
  explicit operator bool() const { return ok(); }
  /// Empty on success.
  const std::string &message() const { return message_; }
  /// Prefix the message with context ("loading plan.oflp: ").
  Status withContext(const std::string &ctx) const {
    return ok() ? *this : error(ctx + message_);
  }

private:
  bool failed_ = false;
  std::string message_;
};

/// A T or an error Status.
template <typename T> class OFFLOAD_NODISCARD Expected {
public:
  Expected(T value) : value_(std::move(value)) {}
  Expected(Status status) : status_(std::move(status)) {
    assert(!status_.ok() && "Expected built from a success Status");
    if (status_.ok())
      status_ = Status::error("internal error: empty Expected");
  }
  bool ok() const { return value_.has_value(); }
  explicit operator bool() const { return ok(); }
  const Status &status() const { return status_; }
  const std::string &message() const { return status_.message(); }
  T &operator*() { return *value_; }
  const T &operator*() const { return *value_; }
  T *operator->() { return &*value_; }
  const T *operator->() const { return &*value_; }
  T take() { return std::move(*value_); }

private:
  std::optional<T> value_;
  Status status_;
};

} // namespace rt
} // namespace offload

#endif // OFFLOAD_RUNTIME_STATUS_H
