//===- Kernel.h - Kernel interface shared by runtime backends ---*- C++ -*-===//
//
// Part of offload. The contract between a plan instruction and the code that
// executes it: an instruction names a dialect op ("offload.linear"), lists
// input and output buffers, and carries the op's attributes. A kernel reads
// TensorViews and the attributes and writes its outputs; it never allocates
// device memory (outputs are pre-assigned arena slots) and never throws.
//
// The element types and attributes themselves are the plan format's
// (PlanFormat.h), which the compiler includes instead of this header. This
// header has no MLIR, LLVM or CUDA dependency: the runtime library
// (lib/Runtime) must not link MLIR.
//
//===----------------------------------------------------------------------===//
#ifndef OFFLOAD_RUNTIME_KERNEL_H
#define OFFLOAD_RUNTIME_KERNEL_H

#include "offload/Runtime/PlanFormat.h"

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace offload {
namespace rt {

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

/// Whether a kernel takes bf16/f16 views (isLowFloat, PlanFormat.h). A plan
/// that gives a bf16 or f16 buffer to a kernel that does not fails when a
/// session is created, naming the op and the type (Device::missingOps:
/// "offload.adamw_update (bf16)"); a direct call fails with the same words.
/// Never a silent upcast.
enum class LowFloat : uint8_t {
  /// Only f32/f64 floats.
  Rejected,
  /// The kernel itself handles them (byte moves, casts, fills).
  Native,
  /// Through the emulation (lib/Runtime/Kernels/KernelSupport.h,
  /// emulateLowFloat): bf16/f16 operands are widened to f32 (exactly), the
  /// f32 kernel runs, and each bf16/f16 result is rounded to its type, to
  /// nearest even (Float16.h). Host results are therefore those of the f32
  /// kernel on the same (representable) inputs, rounded once.
  Emulated,
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
  Kernel(std::string op, KernelFn fn, Absent absent,
         LowFloat lowFloat = LowFloat::Rejected)
      : op_(std::move(op)), fn_(fn), absent_(absent), lowFloat_(lowFloat) {}
  /// Checks the arguments (checkKernelArgs, and no bf16/f16 view unless
  /// the kernel takes them), then runs the kernel.
  std::string operator()(const KernelArgs &args) const;
  KernelFn unchecked() const { return fn_; }
  LowFloat lowFloat() const { return lowFloat_; }
  explicit operator bool() const { return fn_ != nullptr; }
  friend bool operator==(const Kernel &k, std::nullptr_t) { return !k.fn_; }
  friend bool operator!=(const Kernel &k, std::nullptr_t) { return k.fn_ != nullptr; }

private:
  std::string op_;
  KernelFn fn_ = nullptr;
  Absent absent_ = Absent::Rejected;
  LowFloat lowFloat_ = LowFloat::Rejected;
};

/// Process-wide registry of host kernels, keyed by op name
/// ("offload.linear"). Registration happens from static initializers in the
/// kernel library (see OFFLOAD_REGISTER_KERNEL) and from registerAllKernels().
class KernelRegistry {
public:
  static KernelRegistry &host();
  /// Registers `fn` for `opName`; `absent` says whether it takes views
  /// without data (checkKernelArgs), `lowFloat` whether and how it takes
  /// bf16/f16 views.
  void add(const std::string &opName, KernelFn fn,
           Absent absent = Absent::Rejected,
           LowFloat lowFloat = LowFloat::Rejected);
  /// The kernel of `opName` (an empty Kernel, == nullptr, when none).
  Kernel lookup(const std::string &opName) const;
  std::vector<std::string> names() const;

private:
  struct Entry {
    std::string name;
    KernelFn fn;
    Absent absent;
    LowFloat lowFloat;
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
