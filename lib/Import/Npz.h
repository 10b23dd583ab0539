//===- Npz.h - Minimal uncompressed .npz writer (private) -------*- C++ -*-===//
//
// Part of offload. A private stop-gap until the shared runtime npz library
// (include/offload/Runtime/Npz.h) is merged; the importer only calls
// writeNpz, so switching is one call site.
//
//===----------------------------------------------------------------------===//
#ifndef OFFLOAD_LIB_IMPORT_NPZ_H
#define OFFLOAD_LIB_IMPORT_NPZ_H

#include <cstdint>
#include <string>
#include <vector>

namespace offload {
namespace import {

/// One array: numpy dtype descriptor ("<f4", "<f8", "<i8", "|b1"), C-order
/// shape, and the raw little-endian bytes (product(shape) * itemsize).
struct NamedArray {
  std::string name;
  std::string descr;
  std::vector<int64_t> shape;
  std::vector<char> bytes;
};

/// Writes `arrays` as an uncompressed .npz (a zip of NAME.npy files, .npy
/// format version 1.0) to `path`, via a temporary file renamed at the end.
/// Returns an empty string on success, else a one-line message.
std::string writeNpz(const std::string &path,
                     const std::vector<NamedArray> &arrays);

} // namespace import
} // namespace offload

#endif // OFFLOAD_LIB_IMPORT_NPZ_H
