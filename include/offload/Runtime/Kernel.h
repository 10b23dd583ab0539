//===- Kernel.h - Kernel interface shared by runtime backends ---*- C++ -*-===//
//
// Part of offload. The contract between a plan instruction and the code that
// executes it: an instruction names a dialect op ("offload.linear"), lists
// input and output buffers, and carries the op's attributes. A kernel reads
// TensorViews and the attributes and writes its outputs; it never allocates
// device memory (outputs are pre-assigned arena slots) and never throws.
//
// This header has no MLIR, LLVM or CUDA dependency: the runtime library
// (lib/Runtime) must not link MLIR.
//
//===----------------------------------------------------------------------===//
#ifndef OFFLOAD_RUNTIME_KERNEL_H
#define OFFLOAD_RUNTIME_KERNEL_H

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace offload {
namespace rt {

/// Element types a plan buffer can hold. Sizes in bytes: F32 4, F64 8, I64 8,
/// I32 4, Bool 1 (0 or 1).
enum class DType : uint8_t { F32 = 0, F64 = 1, I64 = 2, I32 = 3, Bool = 4 };

/// Size of one element of `t`, in bytes.
inline size_t dtypeSize(DType t) {
  switch (t) {
  case DType::F32: return 4;
  case DType::F64: return 8;
  case DType::I64: return 8;
  case DType::I32: return 4;
  case DType::Bool: return 1;
  }
  return 0;
}

const char *dtypeName(DType t);

/// A dense, row-major (C-contiguous) tensor in memory the kernel may access.
/// `data` points into the device arena (or host arena for host ops); the view
/// does not own it. A rank-0 tensor (shape {}) holds one element.
struct TensorView {
  void *data = nullptr;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;

  int64_t numel() const {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    return n;
  }
  size_t bytes() const { return size_t(numel()) * dtypeSize(dtype); }
  int64_t rank() const { return int64_t(shape.size()); }
  template <typename T> T *as() const { return static_cast<T *>(data); }
};

/// One attribute value of an instruction: an integer list, a float list, or a
/// string. Scalars are lists of length one.
struct AttrValue {
  enum class Kind : uint8_t { Ints, Floats, String } kind = Kind::Ints;
  std::vector<int64_t> ints;
  std::vector<double> floats;
  std::string str;
};

/// Named attributes of an instruction, as lowered from the op's MLIR
/// attributes (bool attributes become Ints {0|1}).
class AttrMap {
public:
  void set(std::string name, AttrValue v) {
    for (auto &e : entries_)
      if (e.first == name) { e.second = std::move(v); return; }
    entries_.emplace_back(std::move(name), std::move(v));
  }
  const AttrValue *find(const std::string &name) const {
    for (auto &e : entries_)
      if (e.first == name) return &e.second;
    return nullptr;
  }
  bool has(const std::string &name) const { return find(name) != nullptr; }
  int64_t getInt(const std::string &name, int64_t dflt) const {
    const AttrValue *v = find(name);
    return v && !v->ints.empty() ? v->ints[0] : dflt;
  }
  std::vector<int64_t> getInts(const std::string &name) const {
    const AttrValue *v = find(name);
    return v ? v->ints : std::vector<int64_t>{};
  }
  double getFloat(const std::string &name, double dflt) const {
    const AttrValue *v = find(name);
    if (!v) return dflt;
    if (!v->floats.empty()) return v->floats[0];
    if (!v->ints.empty()) return double(v->ints[0]);
    return dflt;
  }
  std::vector<double> getFloats(const std::string &name) const {
    const AttrValue *v = find(name);
    return v ? v->floats : std::vector<double>{};
  }
  std::string getString(const std::string &name, std::string dflt) const {
    const AttrValue *v = find(name);
    return v && v->kind == AttrValue::Kind::String ? v->str : dflt;
  }
  const std::vector<std::pair<std::string, AttrValue>> &entries() const {
    return entries_;
  }

private:
  std::vector<std::pair<std::string, AttrValue>> entries_;
};

/// What a kernel sees. Inputs and outputs are in the op's operand and result
/// order; an optional operand that is absent has a view with data == nullptr.
struct KernelArgs {
  const std::vector<TensorView> &inputs;
  const std::vector<TensorView> &outputs;
  const AttrMap &attrs;
  /// Threads the kernel may use (host backend); >= 1.
  int numThreads = 1;
};

/// A kernel returns an empty string on success, otherwise a one-line message
/// saying what is wrong (unsupported dtype, shape mismatch, ...). It must not
/// throw and must not write outside its outputs.
using KernelFn = std::string (*)(const KernelArgs &args);

/// Whether a kernel accepts an absent operand or result (a view with
/// data == nullptr) in place of a tensor.
enum class Absent : uint8_t {
  /// Every input and output must have data unless it has no elements.
  Rejected,
  /// The kernel checks presence itself (optional bias, running statistics,
  /// gradients it may skip).
  Allowed,
};

/// The checks every kernel call needs, done once here instead of in each
/// kernel: the operand and result counts of the op's signature (the
/// op-signature table, OpSignatures.h; ops outside the dialect have none),
/// no negative dimension and, with Absent::Rejected, data for every
/// non-empty view. A plan gets these guarantees when it is loaded
/// (validatePlan), so the backends call kernels unchecked; direct callers
/// (unit tests, embedders) get them through Kernel::operator(). Returns ""
/// or one line that names the op and the offending operand.
std::string checkKernelArgs(const std::string &op, const KernelArgs &args,
                            Absent absent);

/// A registered kernel: calling it checks the arguments (checkKernelArgs)
/// and then runs it; `unchecked()` is the bare function, for a backend that
/// runs instructions of a validated plan.
class Kernel {
public:
  Kernel() = default;
  Kernel(std::string op, KernelFn fn, Absent absent)
      : op_(std::move(op)), fn_(fn), absent_(absent) {}
  std::string operator()(const KernelArgs &args) const;
  KernelFn unchecked() const { return fn_; }
  explicit operator bool() const { return fn_ != nullptr; }
  friend bool operator==(const Kernel &k, std::nullptr_t) { return !k.fn_; }
  friend bool operator!=(const Kernel &k, std::nullptr_t) { return k.fn_ != nullptr; }

private:
  std::string op_;
  KernelFn fn_ = nullptr;
  Absent absent_ = Absent::Rejected;
};

/// Process-wide registry of host kernels, keyed by op name
/// ("offload.linear"). Registration happens from static initializers in the
/// kernel library (see OFFLOAD_REGISTER_KERNEL) and from registerAllKernels().
class KernelRegistry {
public:
  static KernelRegistry &host();
  /// Registers `fn` for `opName`; `absent` says whether it takes views
  /// without data (checkKernelArgs).
  void add(const std::string &opName, KernelFn fn,
           Absent absent = Absent::Rejected);
  /// The kernel of `opName` (an empty Kernel, == nullptr, when none).
  Kernel lookup(const std::string &opName) const;
  std::vector<std::string> names() const;

private:
  struct Entry {
    std::string name;
    KernelFn fn;
    Absent absent;
  };
  std::vector<Entry> table_;
};

/// Registers every host kernel of the kernel library. Call once before use;
/// idempotent. (Explicit registration survives static-library linking, where
/// unreferenced static initializers would be dropped.)
void registerAllHostKernels();

} // namespace rt
} // namespace offload

#endif // OFFLOAD_RUNTIME_KERNEL_H
