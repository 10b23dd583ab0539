//===- Npz.h - Read and write numpy .npy / .npz files ----------*- C++ -*-===//
//
// Part of offload. .npz is a zip archive of .npy members (numpy's format,
// https://numpy.org/doc/stable/reference/generated/numpy.lib.format.html).
// Supported: .npy versions 1.0, 2.0 and 3.0 headers; little-endian f32 (<f4),
// f64 (<f8), f16 (<f2), i64 (<i8), i32 (<i4) and bool (|b1); C order; stored
// or deflated members. Fortran order, big-endian and other dtypes are errors.
//
// bfloat16: numpy has no such dtype, so a bf16 array is stored as its raw
// bits, little-endian uint16 (<u2), and a <u2 array reads back as bf16 (the
// runtime has no uint16 type for it to mean anything else). From PyTorch:
// `t.view(torch.int16).numpy().view(np.uint16)`; back:
// `torch.from_numpy(a.view(np.int16)).view(torch.bfloat16)`; with ml_dtypes,
// `a.view(ml_dtypes.bfloat16)`. docs/precision.md, "Files".
// Library target OffloadNpz (depends on libzip only).
//
//===----------------------------------------------------------------------===//
#ifndef OFFLOAD_RUNTIME_NPZ_H
#define OFFLOAD_RUNTIME_NPZ_H

#include "offload/Runtime/Status.h"
#include "offload/Runtime/Tensor.h"

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace offload {
namespace rt {

using NamedTensors = std::vector<std::pair<std::string, Tensor>>;

/// Parses one .npy file held in memory (`size` bytes at `data`) into a new
/// tensor (one copy of the data). Errors: bad magic, truncated header or
/// data, unsupported version/dtype/order, malformed shape.
Expected<Tensor> parseNpy(const uint8_t *data, size_t size);
/// The .npy version 1.0 header of an array of `dtype` and `shape`: magic,
/// header length and the padded dict, so that header + data is the file.
/// Its size is a multiple of 64 bytes.
std::vector<uint8_t> npyHeader(DType dtype, const std::vector<int64_t> &shape);
/// Encodes a tensor as a version 1.0 .npy file (header + a copy of the data;
/// for small arrays and tests: writeNpz streams instead).
std::vector<uint8_t> encodeNpy(const Tensor &t);

/// Reads every array of an .npz file, in archive order; names drop ".npy".
/// Each array's data is read straight from its zip member into the tensor
/// (forEachNpzArray), so the result holds one copy of the data and nothing
/// else. Errors name the file and member.
Expected<NamedTensors> readNpz(const std::string &path);

/// Reads the arrays of an .npz file one at a time, in archive order, and
/// hands each to `fn` (name without ".npy", the tensor by value: the callee
/// keeps it, e.g. moves it into a ParameterStore, or drops it). Each array is
/// read from its member directly into the tensor's own allocation: no buffer
/// of the member, no buffer of the archive, and an array the callee drops is
/// freed before the next is read. A member's declared size is trusted for
/// the allocation only up to what its compressed bytes can hold (stored: the
/// same size; deflated: 1032 times, deflate's largest ratio) and the file's
/// size, so a tiny file cannot claim gigabytes. The member's CRC-32 is
/// checked (the stream is read to its end). Stops at the first error, of the
/// archive or returned by `fn`, and returns it.
Status forEachNpzArray(const std::string &path,
                       const std::function<Status(std::string name,
                                                  Tensor value)> &fn);
/// The same, for the members `want` accepts (by name, without ".npy"): the
/// others are skipped before anything of them is inflated (a 2 GiB member a
/// plan does not bind costs nothing). The file must be a regular file (a
/// FIFO or a device is refused by name, InputFiles.h).
Status forEachNpzArray(
    const std::string &path, const std::function<bool(const std::string &name)> &want,
    const std::function<Status(std::string name, Tensor value)> &fn);

/// An array to write to an .npz file, pulled in pieces from where it lives
/// (a tensor, a device buffer, a session's output) instead of being encoded
/// into a buffer first.
struct NpzSource {
  std::string name; ///< the member is "<name>.npy"
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  /// Copies `bytes` bytes of the array's row-major data, starting `offset`
  /// bytes in, to `dst`. Called with consecutive ranges of at most 1 MiB.
  std::function<Status(uint64_t offset, void *dst, size_t bytes)> read;
};

/// A source reading the tensor `t`, which must outlive the write.
NpzSource npzSource(const std::string &name, const Tensor &t);

/// Writes an .npz file, member "<name>.npy" per array in order; `compress`
/// deflates. Arrays are streamed: the memory used is a 1 MiB piece per
/// array being written, whatever the arrays' sizes (zip64 for members over
/// 4 GiB). Errors: the file cannot be created or written, or a source's read
/// failed (its message, with the array's name).
Status writeNpzSources(const std::string &path,
                       const std::vector<NpzSource> &arrays,
                       bool compress = false);
/// Writes tensors: writeNpzSources with npzSource of each (no copy of the
/// data).
Status writeNpz(const std::string &path, const NamedTensors &arrays,
                bool compress = false);

} // namespace rt
} // namespace offload

#endif
