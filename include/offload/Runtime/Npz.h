//===- Npz.h - Read and write numpy .npy / .npz files ----------*- C++ -*-===//
//
// Part of offload. .npz is a zip archive of .npy members (numpy's format,
// https://numpy.org/doc/stable/reference/generated/numpy.lib.format.html).
// Supported: .npy versions 1.0, 2.0 and 3.0 headers; little-endian f32 (<f4),
// f64 (<f8), i64 (<i8), i32 (<i4) and bool (|b1); C order; stored or
// deflated members. Fortran order, big-endian and other dtypes are errors.
// Library target OffloadNpz (depends on libzip only).
//
//===----------------------------------------------------------------------===//
#ifndef OFFLOAD_RUNTIME_NPZ_H
#define OFFLOAD_RUNTIME_NPZ_H

#include "offload/Runtime/Status.h"
#include "offload/Runtime/Tensor.h"

#include <string>
#include <utility>
#include <vector>

namespace offload {
namespace rt {

using NamedTensors = std::vector<std::pair<std::string, Tensor>>;

/// Parses one .npy file held in memory.
Expected<Tensor> parseNpy(const uint8_t *data, size_t size);
/// Encodes a tensor as a version 1.0 .npy file.
std::vector<uint8_t> encodeNpy(const Tensor &t);

/// Reads every array of an .npz file, in archive order; names drop ".npy".
Expected<NamedTensors> readNpz(const std::string &path);
/// Writes an .npz file (member "<name>.npy" per array); `compress` deflates.
Status writeNpz(const std::string &path, const NamedTensors &arrays,
                bool compress = false);

} // namespace rt
} // namespace offload

#endif
