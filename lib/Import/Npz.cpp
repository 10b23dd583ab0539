//===- Npz.cpp - Minimal uncompressed .npz writer -------------------------===//
//
// Part of offload. Format: numpy's NEP 1 .npy v1.0 (magic "\x93NUMPY", version
// 1.0, little-endian uint16 header length, a Python dict literal padded with
// spaces to a multiple of 64 bytes ending in '\n', then the data), stored
// uncompressed in a zip archive as numpy.savez does.
//
//===----------------------------------------------------------------------===//
#include "Npz.h"

#include <zip.h>

#include <cstdio>
#include <memory>

using namespace offload::import;

static std::vector<char> npyBytes(const NamedArray &a) {
  std::string dict = "{'descr': '" + a.descr + "', 'fortran_order': False, 'shape': (";
  for (size_t i = 0; i < a.shape.size(); ++i)
    dict += std::to_string(a.shape[i]) + (a.shape.size() == 1 ? ",)" : (i + 1 == a.shape.size() ? ")" : ", "));
  if (a.shape.empty())
    dict += ")";
  dict += ", }";
  size_t total = 10 + dict.size() + 1;
  size_t padded = (total + 63) / 64 * 64;
  dict.append(padded - total, ' ');
  dict += '\n';
  std::vector<char> out = {'\x93', 'N', 'U', 'M', 'P', 'Y', 1, 0};
  uint16_t len = static_cast<uint16_t>(dict.size());
  out.push_back(static_cast<char>(len & 0xff));
  out.push_back(static_cast<char>(len >> 8));
  out.insert(out.end(), dict.begin(), dict.end());
  out.insert(out.end(), a.bytes.begin(), a.bytes.end());
  return out;
}

std::string offload::import::writeNpz(const std::string &path,
                                      const std::vector<NamedArray> &arrays) {
  std::string tmp = path + ".tmp";
  int zerr = 0;
  zip_t *za = zip_open(tmp.c_str(), ZIP_CREATE | ZIP_TRUNCATE, &zerr);
  if (!za)
    return "cannot create '" + path + "'";
  // libzip reads the buffers at zip_close, so they must outlive it.
  std::vector<std::vector<char>> files;
  files.reserve(arrays.size());
  for (const NamedArray &a : arrays) {
    files.push_back(npyBytes(a));
    zip_source_t *src = zip_source_buffer(za, files.back().data(),
                                          files.back().size(), 0);
    zip_int64_t idx = src ? zip_file_add(za, (a.name + ".npy").c_str(), src,
                                         ZIP_FL_OVERWRITE | ZIP_FL_ENC_UTF_8)
                          : -1;
    if (idx < 0) {
      if (src)
        zip_source_free(src);
      zip_discard(za);
      std::remove(tmp.c_str());
      return "cannot add '" + a.name + "' to '" + path + "'";
    }
    zip_set_file_compression(za, static_cast<zip_uint64_t>(idx), ZIP_CM_STORE, 0);
  }
  if (zip_close(za) != 0) {
    zip_discard(za);
    std::remove(tmp.c_str());
    return "cannot write '" + path + "'";
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    return "cannot write '" + path + "'";
  }
  return "";
}
