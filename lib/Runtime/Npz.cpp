//===- Npz.cpp - numpy .npy/.npz reader and writer ------------------------===//
//
// Part of offload. See Npz.h for the supported subset.
//
//===----------------------------------------------------------------------===//

#include "offload/Runtime/Npz.h"
#include "offload/Support/InputFiles.h"

#include <algorithm>
#include <zip.h>

#include <cstdio>
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
  case DType::BF16:
    return "<u2"; // raw bits: numpy has no bfloat16 (Npz.h)
  case DType::F16:
    return "<f2";
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

static int64_t numelOf(const std::vector<int64_t> &shape) {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

/// Largest .npy header accepted (numpy writes well under 4 KiB; version 2
/// allows 4 GiB, which would be an allocation on the reader's word).
constexpr size_t kMaxNpyHeader = size_t(1) << 20;

/// Bytes of the fixed part of a .npy header (magic, version, header length)
/// for the version byte at p[6]: 10 (1.0) or 12 (2.0, 3.0); 0 if unsupported.
static size_t npyPrefixBytes(uint8_t major) {
  return major == 1 ? 10 : (major == 2 || major == 3) ? 12 : 0;
}

/// Parses the header of a .npy file whose first `size` bytes are at `p`
/// (at least the whole header): the dtype, the shape and where the data
/// starts. Does not look at the data.
static Status parseNpyHeader(const uint8_t *p, size_t size, DType &dt,
                             std::vector<int64_t> &shape, size_t &dataStart) {
  if (size < 10 || std::memcmp(p, "\x93NUMPY", 6) != 0)
    return Status::error("not a .npy array (bad magic)");
  int major = p[6];
  size_t hstart = npyPrefixBytes(uint8_t(major)), hlen;
  if (hstart == 0)
    return Status::error(".npy format version " + std::to_string(major) +
                         " is not supported");
  if (size < hstart)
    return Status::error(".npy header truncated");
  if (major == 1)
    hlen = size_t(p[8]) | size_t(p[9]) << 8;
  else
    hlen = size_t(p[8]) | size_t(p[9]) << 8 | size_t(p[10]) << 16 |
           size_t(p[11]) << 24;
  if (hlen > kMaxNpyHeader)
    return Status::error(".npy header of " + std::to_string(hlen) +
                         " bytes is larger than the " +
                         std::to_string(kMaxNpyHeader) + " accepted");
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
  else if (descr == "<f2")
    dt = DType::F16;
  else if (descr == "<u2")
    dt = DType::BF16; // bfloat16 bits (Npz.h)
  else
    return Status::error("dtype '" + descr +
                         "' is not supported (use little-endian float32, "
                         "float64, float16, int64, int32, bool, or uint16 "
                         "holding bfloat16 bits)");
  shape.clear();
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
  dataStart = hstart + hlen;
  return Status::success();
}

Expected<Tensor> offload::rt::parseNpy(const uint8_t *p, size_t size) {
  DType dt;
  std::vector<int64_t> shape;
  size_t dataStart = 0;
  if (Status st = parseNpyHeader(p, size, dt, shape, dataStart); !st.ok())
    return st;
  // The data must be there before anything is allocated: a header that
  // claims 46 billion elements in a 100-byte file is refused, not allocated
  // (found by fuzz/FuzzNpz).
  uint64_t dataBytes = uint64_t(numelOf(shape)) * uint64_t(dtypeSize(dt));
  if (uint64_t(size - dataStart) < dataBytes)
    return Status::error(
        ".npy data truncated: " + std::to_string(size - dataStart) +
        " bytes for " + typeString(dt, shape));
  Tensor t(dt, shape);
  if (t.byteSize())
    std::memcpy(t.data(), p + dataStart, t.byteSize());
  return t;
}

std::vector<uint8_t> offload::rt::npyHeader(DType dtype,
                                           const std::vector<int64_t> &shape) {
  std::string h = "{'descr': '";
  h += descrOf(dtype);
  h += "', 'fortran_order': False, 'shape': (";
  for (size_t i = 0; i < shape.size(); ++i)
    h += std::to_string(shape[i]) +
         (shape.size() == 1 ? "," : (i + 1 < shape.size() ? ", " : ""));
  h += "), }";
  // Pad with spaces so that magic + len + header + '\n' is a multiple of 64.
  size_t total = 10 + h.size() + 1;
  h.append((64 - total % 64) % 64, ' ');
  h += '\n';
  std::vector<uint8_t> out(10 + h.size());
  const uint8_t magic[10] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0,
                             uint8_t(h.size() & 0xFF), uint8_t(h.size() >> 8)};
  std::memcpy(out.data(), magic, 10);
  std::memcpy(out.data() + 10, h.data(), h.size());
  return out;
}

std::vector<uint8_t> offload::rt::encodeNpy(const Tensor &t) {
  std::vector<uint8_t> out = npyHeader(t.dtype(), t.shape());
  size_t h = out.size();
  out.resize(h + t.byteSize());
  if (t.byteSize())
    std::memcpy(out.data() + h, t.data(), t.byteSize());
  return out;
}

//===----------------------------------------------------------------------===//
// Reading
//===----------------------------------------------------------------------===//

/// Reads exactly `n` bytes of member `f` into `dst`; false when the member
/// ends early or libzip reports an error (a CRC mismatch at its end).
static bool readFully(zip_file_t *f, void *dst, uint64_t n) {
  auto *d = static_cast<uint8_t *>(dst);
  while (n > 0) {
    zip_uint64_t want = std::min<uint64_t>(n, uint64_t(1) << 30);
    zip_int64_t got = zip_fread(f, d, want);
    if (got <= 0)
      return false;
    d += got;
    n -= uint64_t(got);
  }
  return true;
}

/// Largest ratio of uncompressed to compressed bytes deflate can reach.
constexpr uint64_t kMaxDeflateRatio = 1032;

Status offload::rt::forEachNpzArray(
    const std::string &path,
    const std::function<Status(std::string name, Tensor value)> &fn) {
  return forEachNpzArray(
      path, [](const std::string &) { return true; }, fn);
}

Status offload::rt::forEachNpzArray(
    const std::string &path,
    const std::function<bool(const std::string &name)> &want,
    const std::function<Status(std::string name, Tensor value)> &fn) {
  // A regular file only: libzip would wait on a FIFO without a writer.
  if (std::string e = ::offload::checkInputFile(path, ".npz file");
      !e.empty())
    return Status::error(e);
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
  uint64_t fileBytes = 0;
  if (FILE *fp = std::fopen(path.c_str(), "rb")) {
    if (std::fseek(fp, 0, SEEK_END) == 0)
      fileBytes = uint64_t(std::max<long>(std::ftell(fp), 0));
    std::fclose(fp);
  }
  zip_int64_t n = zip_get_num_entries(z, 0);
  for (zip_int64_t i = 0; i < n; ++i) {
    zip_stat_t st;
    if (zip_stat_index(z, zip_uint64_t(i), 0, &st) != 0)
      return Status::error("'" + path + "': cannot stat member " +
                           std::to_string(i));
    std::string name = st.name;
    if (name.size() > 4 && name.compare(name.size() - 4, 4, ".npy") == 0)
      name.resize(name.size() - 4);
    // Skipped before anything is inflated or checked.
    if (!want(name))
      continue;
    auto corrupt = [&](const std::string &why) {
      return Status::error("'" + path + "': member '" + name + "' " + why);
    };
    const zip_uint64_t need = ZIP_STAT_SIZE | ZIP_STAT_COMP_SIZE |
                              ZIP_STAT_COMP_METHOD;
    if ((st.valid & need) != need)
      return corrupt("has no recorded size");
    // The declared size is trusted only as far as the file's bytes can hold
    // it (a 1 KB file declaring a 4 GB member; found by fuzz/FuzzNpz).
    uint64_t bound = st.comp_method == ZIP_CM_STORE
                         ? uint64_t(st.comp_size)
                         : uint64_t(st.comp_size) * kMaxDeflateRatio + 64;
    if (st.comp_size > fileBytes || st.size > bound)
      return corrupt("is truncated or corrupt (it declares " +
                     std::to_string(st.size) + " bytes in " +
                     std::to_string(st.comp_size) + " compressed bytes of a " +
                     std::to_string(fileBytes) + "-byte file)");
    zip_file_t *f = zip_fopen_index(z, zip_uint64_t(i), 0);
    if (!f)
      return Status::error("'" + path + "': cannot open member '" + name +
                           "': " + zip_strerror(z));
    std::unique_ptr<zip_file_t, int (*)(zip_file_t *)> fguard(f, zip_fclose);
    // The header: its fixed part, then the dict it announces.
    std::vector<uint8_t> head(std::min<uint64_t>(st.size, 12));
    if (!readFully(f, head.data(), head.size()))
      return corrupt("is truncated or corrupt");
    size_t prefix = head.size() >= 7 ? npyPrefixBytes(head[6]) : 0;
    if (prefix && head.size() >= prefix) {
      size_t hlen = size_t(head[8]) | size_t(head[9]) << 8;
      if (prefix == 12)
        hlen |= size_t(head[10]) << 16 | size_t(head[11]) << 24;
      if (hlen <= kMaxNpyHeader && prefix + hlen <= st.size) {
        size_t had = head.size();
        head.resize(prefix + hlen);
        if (head.size() > had &&
            !readFully(f, head.data() + had, head.size() - had))
          return corrupt("is truncated or corrupt");
      }
    }
    DType dt;
    std::vector<int64_t> shape;
    size_t dataStart = 0;
    if (Status hs = parseNpyHeader(head.data(), head.size(), dt, shape,
                                   dataStart);
        !hs.ok())
      return hs.withContext("'" + path + "' member '" + name + "': ");
    uint64_t dataBytes = uint64_t(numelOf(shape)) * uint64_t(dtypeSize(dt));
    if (st.size - dataStart < dataBytes)
      return Status::error("'" + path + "' member '" + name +
                           "': .npy data truncated: " +
                           std::to_string(st.size - dataStart) +
                           " bytes for " + typeString(dt, shape));
    // Straight into the tensor's allocation.
    Tensor t(dt, shape);
    if (!readFully(f, t.data(), t.byteSize()))
      return corrupt("is truncated or corrupt");
    // Read to the end (libzip checks the CRC there); trailing bytes after
    // the array are ignored, as numpy does.
    uint8_t rest[4096];
    uint64_t left = st.size - dataStart - dataBytes;
    while (left > 0) {
      size_t k = size_t(std::min<uint64_t>(left, sizeof(rest)));
      if (!readFully(f, rest, k))
        return corrupt("is truncated or corrupt");
      left -= k;
    }
    if (zip_fread(f, rest, 1) != 0)
      return corrupt("is truncated or corrupt");
    fguard.reset();
    if (Status s = fn(std::move(name), std::move(t)); !s.ok())
      return s;
  }
  return Status::success();
}

Expected<NamedTensors> offload::rt::readNpz(const std::string &path) {
  NamedTensors out;
  Status st = forEachNpzArray(path, [&](std::string name, Tensor t) {
    out.emplace_back(std::move(name), std::move(t));
    return Status::success();
  });
  if (!st.ok())
    return st;
  return out;
}

//===----------------------------------------------------------------------===//
// Writing
//===----------------------------------------------------------------------===//

NpzSource offload::rt::npzSource(const std::string &name, const Tensor &t) {
  const Tensor *tp = &t;
  return {name, t.dtype(), t.shape(),
          [tp](uint64_t offset, void *dst, size_t bytes) {
            std::memcpy(dst, static_cast<const uint8_t *>(tp->data()) + offset,
                        bytes);
            return Status::success();
          }};
}

namespace {
/// A libzip source function streaming one array: its .npy header, then its
/// data pulled from the NpzSource in pieces.
struct StreamState {
  const NpzSource *src = nullptr;
  std::vector<uint8_t> header;
  uint64_t dataBytes = 0;
  uint64_t pos = 0; ///< bytes of header + data handed out
  std::string error;
  zip_error_t zerr;
};

zip_int64_t streamCallback(void *ud, void *data, zip_uint64_t len,
                           zip_source_cmd_t cmd) {
  auto *s = static_cast<StreamState *>(ud);
  switch (cmd) {
  case ZIP_SOURCE_OPEN:
    s->pos = 0;
    return 0;
  case ZIP_SOURCE_READ: {
    uint64_t total = s->header.size() + s->dataBytes;
    uint64_t n = std::min<uint64_t>(len, total - s->pos);
    n = std::min<uint64_t>(n, uint64_t(1) << 20);
    auto *out = static_cast<uint8_t *>(data);
    uint64_t done = 0;
    if (s->pos < s->header.size()) {
      uint64_t k = std::min<uint64_t>(n, s->header.size() - s->pos);
      std::memcpy(out, s->header.data() + s->pos, size_t(k));
      done = k;
    }
    if (done < n) {
      uint64_t off = s->pos + done - s->header.size();
      if (Status st = s->src->read(off, out + done, size_t(n - done));
          !st.ok()) {
        s->error = st.message();
        zip_error_set(&s->zerr, ZIP_ER_READ, 0);
        return -1;
      }
    }
    s->pos += n;
    return zip_int64_t(n);
  }
  case ZIP_SOURCE_CLOSE:
    return 0;
  case ZIP_SOURCE_STAT: {
    auto *st = static_cast<zip_stat_t *>(data);
    zip_stat_init(st);
    st->size = s->header.size() + s->dataBytes;
    st->valid |= ZIP_STAT_SIZE;
    return sizeof(*st);
  }
  case ZIP_SOURCE_ERROR:
    return zip_error_to_data(&s->zerr, data, len);
  case ZIP_SOURCE_FREE:
    return 0;
  case ZIP_SOURCE_SUPPORTS:
    return zip_source_make_command_bitmap(
        ZIP_SOURCE_OPEN, ZIP_SOURCE_READ, ZIP_SOURCE_CLOSE, ZIP_SOURCE_STAT,
        ZIP_SOURCE_ERROR, ZIP_SOURCE_FREE, -1);
  default:
    zip_error_set(&s->zerr, ZIP_ER_OPNOTSUPP, 0);
    return -1;
  }
}
} // namespace

Status offload::rt::writeNpzSources(const std::string &path,
                                    const std::vector<NpzSource> &arrays,
                                    bool compress) {
  int errc = 0;
  zip_t *z = zip_open(path.c_str(), ZIP_CREATE | ZIP_TRUNCATE, &errc);
  if (!z)
    return Status::error("cannot create '" + path + "'");
  // The sources' states must outlive zip_close, which reads them.
  std::vector<std::unique_ptr<StreamState>> states;
  states.reserve(arrays.size());
  auto failWith = [&](const std::string &msg) {
    zip_discard(z);
    for (auto &st : states)
      zip_error_fini(&st->zerr);
    return Status::error(msg);
  };
  for (const NpzSource &a : arrays) {
    auto state = std::make_unique<StreamState>();
    state->src = &a;
    state->header = npyHeader(a.dtype, a.shape);
    state->dataBytes = uint64_t(numelOf(a.shape)) * dtypeSize(a.dtype);
    zip_error_init(&state->zerr);
    states.push_back(std::move(state));
    zip_source_t *src = zip_source_function(z, streamCallback,
                                            states.back().get());
    if (!src)
      return failWith("'" + path + "': " + zip_strerror(z));
    zip_int64_t idx = zip_file_add(z, (a.name + ".npy").c_str(), src,
                                   ZIP_FL_OVERWRITE | ZIP_FL_ENC_UTF_8);
    if (idx < 0) {
      zip_source_free(src);
      return failWith("'" + path + "': cannot add '" + a.name +
                      "': " + zip_strerror(z));
    }
    zip_set_file_compression(z, zip_uint64_t(idx),
                             compress ? ZIP_CM_DEFLATE : ZIP_CM_STORE, 0);
  }
  if (zip_close(z) != 0) {
    std::string msg = zip_strerror(z);
    for (size_t k = 0; k < states.size(); ++k)
      if (!states[k]->error.empty())
        msg = "reading array '" + arrays[k].name + "': " + states[k]->error;
    return failWith("cannot write '" + path + "': " + msg);
  }
  for (auto &st : states)
    zip_error_fini(&st->zerr);
  return Status::success();
}

Status offload::rt::writeNpz(const std::string &path,
                             const NamedTensors &arrays, bool compress) {
  std::vector<NpzSource> sources;
  sources.reserve(arrays.size());
  for (const auto &a : arrays)
    sources.push_back(npzSource(a.first, a.second));
  return writeNpzSources(path, sources, compress);
}
