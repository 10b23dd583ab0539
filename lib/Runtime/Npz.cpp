//===- Npz.cpp - numpy .npy/.npz reader and writer ------------------------===//
//
// Part of offload. See Npz.h for the supported subset.
//
//===----------------------------------------------------------------------===//

#include "offload/Runtime/Npz.h"

#include <algorithm>
#include <zip.h>

#include <cstring>
#include <memory>

using namespace offload::rt;

static const char *descrOf(DType t) {
  switch (t) {
  case DType::F32:
    return "<f4";
  case DType::F64:
    return "<f8";
  case DType::I64:
    return "<i8";
  case DType::I32:
    return "<i4";
  case DType::Bool:
    return "|b1";
  }
  return "?";
}

/// Value of key `key` in the header dict text, up to the next ',' or '}'
/// (or the matching ')' for tuples). Empty when absent.
static std::string dictValue(const std::string &h, const std::string &key) {
  size_t k = h.find("'" + key + "'");
  if (k == std::string::npos)
    return "";
  size_t c = h.find(':', k);
  if (c == std::string::npos)
    return "";
  size_t s = h.find_first_not_of(" ", c + 1);
  if (s == std::string::npos)
    return "";
  size_t e;
  if (h[s] == '(')
    e = h.find(')', s) + 1;
  else if (h[s] == '\'')
    e = h.find('\'', s + 1) + 1;
  else
    e = h.find_first_of(",}", s);
  if (e == std::string::npos || e == 0)
    return "";
  return h.substr(s, e - s);
}

Expected<Tensor> offload::rt::parseNpy(const uint8_t *p, size_t size) {
  if (size < 10 || std::memcmp(p, "\x93NUMPY", 6) != 0)
    return Status::error("not a .npy array (bad magic)");
  int major = p[6];
  size_t hlen, hstart;
  if (major == 1) {
    hlen = size_t(p[8]) | size_t(p[9]) << 8;
    hstart = 10;
  } else if (major == 2 || major == 3) {
    if (size < 12)
      return Status::error(".npy header truncated");
    hlen = size_t(p[8]) | size_t(p[9]) << 8 | size_t(p[10]) << 16 |
           size_t(p[11]) << 24;
    hstart = 12;
  } else {
    return Status::error(".npy format version " + std::to_string(major) +
                         " is not supported");
  }
  if (hstart + hlen > size)
    return Status::error(".npy header truncated");
  std::string h(reinterpret_cast<const char *>(p) + hstart, hlen);
  std::string descr = dictValue(h, "descr");
  std::string fortran = dictValue(h, "fortran_order");
  std::string shapeText = dictValue(h, "shape");
  if (descr.size() < 2 || shapeText.empty() || fortran.empty())
    return Status::error(".npy header is malformed: " + h);
  descr = descr.substr(1, descr.size() - 2);
  if (fortran != "False")
    return Status::error("fortran-order arrays are not supported (save a "
                         "C-contiguous array, e.g. np.ascontiguousarray)");
  DType dt;
  if (descr == "<f4")
    dt = DType::F32;
  else if (descr == "<f8")
    dt = DType::F64;
  else if (descr == "<i8")
    dt = DType::I64;
  else if (descr == "<i4")
    dt = DType::I32;
  else if (descr == "|b1" || descr == "<b1")
    dt = DType::Bool;
  else
    return Status::error("dtype '" + descr +
                         "' is not supported (use little-endian float32, "
                         "float64, int64, int32 or bool)");
  std::vector<int64_t> shape;
  std::string inner = shapeText.substr(1, shapeText.size() - 2);
  size_t pos = 0;
  uint64_t numel = 1;
  while (pos < inner.size()) {
    size_t e = inner.find(',', pos);
    std::string tok = inner.substr(pos, e == std::string::npos ? e : e - pos);
    size_t a = tok.find_first_not_of(" L"), b = tok.find_last_not_of(" L");
    if (a != std::string::npos) {
      tok = tok.substr(a, b - a + 1);
      char *end = nullptr;
      long long v = std::strtoll(tok.c_str(), &end, 10);
      if (*end != 0 || v < 0)
        return Status::error(".npy shape is malformed: " + shapeText);
      if (v != 0 && numel > (uint64_t(1) << 40) / uint64_t(v))
        return Status::error(".npy shape too large: " + shapeText);
      numel *= uint64_t(v);
      shape.push_back(v);
    }
    if (e == std::string::npos)
      break;
    pos = e + 1;
  }
  // The data must be there before anything is allocated: a header that
  // claims 46 billion elements in a 100-byte file is refused, not allocated
  // (found by fuzz/FuzzNpz).
  size_t dataStart = hstart + hlen;
  uint64_t dataBytes = numel * uint64_t(dtypeSize(dt));
  if (uint64_t(size - dataStart) < dataBytes)
    return Status::error(
        ".npy data truncated: " + std::to_string(size - dataStart) +
        " bytes for " + typeString(dt, shape));
  Tensor t(dt, shape);
  if (t.byteSize())
    std::memcpy(t.data(), p + dataStart, t.byteSize());
  return t;
}

std::vector<uint8_t> offload::rt::encodeNpy(const Tensor &t) {
  std::string h = "{'descr': '";
  h += descrOf(t.dtype());
  h += "', 'fortran_order': False, 'shape': (";
  for (size_t i = 0; i < t.shape().size(); ++i)
    h += std::to_string(t.shape()[i]) +
         (t.shape().size() == 1 ? "," : (i + 1 < t.shape().size() ? ", " : ""));
  h += "), }";
  // Pad with spaces so that magic + len + header + '\n' is a multiple of 64.
  size_t total = 10 + h.size() + 1;
  h.append((64 - total % 64) % 64, ' ');
  h += '\n';
  const uint8_t magic[10] = {0x93,
                             'N',
                             'U',
                             'M',
                             'P',
                             'Y',
                             1,
                             0,
                             uint8_t(h.size() & 0xFF),
                             uint8_t(h.size() >> 8)};
  std::vector<uint8_t> out(10 + h.size() + t.byteSize());
  std::memcpy(out.data(), magic, 10);
  std::memcpy(out.data() + 10, h.data(), h.size());
  if (t.byteSize())
    std::memcpy(out.data() + 10 + h.size(), t.data(), t.byteSize());
  return out;
}

Expected<NamedTensors> offload::rt::readNpz(const std::string &path) {
  int errc = 0;
  zip_t *z = zip_open(path.c_str(), ZIP_RDONLY, &errc);
  if (!z) {
    zip_error_t ze;
    zip_error_init_with_code(&ze, errc);
    std::string msg = zip_error_strerror(&ze);
    zip_error_fini(&ze);
    return Status::error("cannot read '" + path + "' as .npz: " + msg);
  }
  std::unique_ptr<zip_t, void (*)(zip_t *)> guard(
      z, [](zip_t *zz) { zip_discard(zz); });
  NamedTensors out;
  zip_int64_t n = zip_get_num_entries(z, 0);
  for (zip_int64_t i = 0; i < n; ++i) {
    zip_stat_t st;
    if (zip_stat_index(z, zip_uint64_t(i), 0, &st) != 0)
      return Status::error("'" + path + "': cannot stat member " +
                           std::to_string(i));
    std::string name = st.name;
    if (name.size() > 4 && name.compare(name.size() - 4, 4, ".npy") == 0)
      name.resize(name.size() - 4);
    zip_file_t *f = zip_fopen_index(z, zip_uint64_t(i), 0);
    if (!f)
      return Status::error("'" + path + "': cannot open member '" + name +
                           "': " + zip_strerror(z));
    // Read in pieces: the archive's declared size is not trusted for an
    // allocation (a 1 KB file declaring a 4 GB member was allocated at once;
    // found by fuzz/FuzzNpz), so memory grows only with data that arrives.
    std::vector<uint8_t> bytes;
    constexpr zip_uint64_t kPiece = zip_uint64_t(1) << 20;
    bool readError = false;
    while (zip_uint64_t(bytes.size()) < st.size) {
      size_t old = bytes.size();
      size_t want = size_t(std::min(kPiece, st.size - zip_uint64_t(old)));
      bytes.resize(old + want);
      zip_int64_t got = zip_fread(f, bytes.data() + old, want);
      bytes.resize(old + size_t(std::max<zip_int64_t>(got, 0)));
      if (got <= 0) {
        readError = got < 0;
        break;
      }
    }
    zip_fclose(f);
    if (readError || zip_uint64_t(bytes.size()) != st.size)
      return Status::error("'" + path + "': member '" + name +
                           "' is truncated or corrupt");
    Expected<Tensor> t = parseNpy(bytes.data(), bytes.size());
    if (!t)
      return t.status().withContext("'" + path + "' member '" + name + "': ");
    out.emplace_back(name, t.take());
  }
  return out;
}

Status offload::rt::writeNpz(const std::string &path,
                             const NamedTensors &arrays, bool compress) {
  int errc = 0;
  zip_t *z = zip_open(path.c_str(), ZIP_CREATE | ZIP_TRUNCATE, &errc);
  if (!z)
    return Status::error("cannot create '" + path + "'");
  // Encoded members must outlive zip_close.
  std::vector<std::vector<uint8_t>> keep;
  keep.reserve(arrays.size());
  for (const auto &a : arrays) {
    keep.push_back(encodeNpy(a.second));
    zip_source_t *src =
        zip_source_buffer(z, keep.back().data(), keep.back().size(), 0);
    if (!src) {
      zip_discard(z);
      return Status::error("'" + path + "': " + zip_strerror(z));
    }
    zip_int64_t idx = zip_file_add(z, (a.first + ".npy").c_str(), src,
                                   ZIP_FL_OVERWRITE | ZIP_FL_ENC_UTF_8);
    if (idx < 0) {
      zip_source_free(src);
      std::string msg = zip_strerror(z);
      zip_discard(z);
      return Status::error("'" + path + "': cannot add '" + a.first +
                           "': " + msg);
    }
    zip_set_file_compression(z, zip_uint64_t(idx),
                             compress ? ZIP_CM_DEFLATE : ZIP_CM_STORE, 0);
  }
  if (zip_close(z) != 0) {
    std::string msg = zip_strerror(z);
    zip_discard(z);
    return Status::error("cannot write '" + path + "': " + msg);
  }
  return Status::success();
}
