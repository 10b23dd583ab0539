//===- Pt2Archive.cpp - Reading a torch.export archive without LibTorch ---===//
//
// Part of offload. A `.pt2` written by `torch.export.save` (PyTorch 2.15) is a
// zip of `<name>/...` members (checked here):
//   archive_format                  "pt2"
//   byteorder                       "little"
//   models/model.json               the serialized ExportedProgram (JSON):
//                                   schema_version {major, minor}, graph_module
//                                   {graph, signature}, opset_version, ...
//   data/weights/model_weights_config.json
//                                   {"config": {FQN: {path_name, is_param,
//                                   use_pickle, tensor_meta {dtype, sizes,
//                                   strides, storage_offset, requires_grad}}}}
//   data/weights/<path_name>        the storage's raw bytes
//   data/constants/model_constants_config.json, data/constants/<path_name>
//                                   the same for lifted tensor constants and
//                                   non-persistent buffers (when present)
// Members are read in 1 MiB pieces (a declared size is never allocated up
// front), after their declared size was checked against what deflate can
// reach from their compressed bytes and, for the JSON members, against
// OFFLOAD_MAX_PT2_JSON_BYTES (BoundedJson.h); every member is read to its
// end, so that libzip checks its CRC-32 (a weight whose bytes changed after
// the archive was written is refused); every weight's bytes are checked
// against its description and gathered into a dense row-major copy.
//
//===----------------------------------------------------------------------===//
#include "Pt2.h"

#include "offload/Runtime/Npz.h"
#include "offload/Support/BoundedJson.h"
#include "offload/Support/InputFiles.h"

#include <zip.h>

#include <algorithm>
#include <cstring>
#include <memory>

using namespace ::offload::import;
namespace json = llvm::json;

/// The largest dense copy of a strided (non-contiguous) weight, in bytes,
/// and the variable that raises it.
static constexpr const char *kExpandedVariable = "OFFLOAD_MAX_PT2_EXPANDED_BYTES";
static constexpr uint64_t kExpandedDefault = uint64_t(1) << 30;

namespace {

struct Pt2Error {
  std::string message;
};

std::string pt2DtypeNameImpl(int64_t code) {
  switch (code) {
  case kPt2Byte: return "uint8";
  case kPt2Char: return "int8";
  case kPt2Short: return "int16";
  case kPt2Int: return "int32";
  case kPt2Long: return "int64";
  case kPt2Half: return "float16";
  case kPt2Float: return "float32";
  case kPt2Double: return "float64";
  case kPt2Bool: return "bool";
  case kPt2BFloat16: return "bfloat16";
  default: return "dtype code " + std::to_string(code);
  }
}

class Zip {
public:
  Zip(zip_t *z, std::string path) : z(z), path(std::move(path)) {}
  ~Zip() {
    if (z)
      zip_discard(z);
  }
  bool has(const std::string &name) const {
    return zip_name_locate(z, name.c_str(), 0) >= 0;
  }
  std::vector<std::string> names() const {
    std::vector<std::string> r;
    zip_int64_t n = zip_get_num_entries(z, 0);
    for (zip_int64_t i = 0; i < n; ++i)
      if (const char *s = zip_get_name(z, zip_uint64_t(i), 0))
        r.push_back(s);
    return r;
  }
  /// The member's bytes; `limit` caps what is kept (a weight member larger
  /// than its tensor needs is kept only as far as needed), but the member is
  /// read to its end, where libzip checks its CRC-32. `maxSize` bounds the
  /// declared (inflated) size, checked before anything is inflated, with
  /// `maxHint` saying how to raise it.
  std::vector<uint8_t> read(const std::string &name, uint64_t limit = UINT64_MAX,
                            uint64_t maxSize = UINT64_MAX,
                            const std::string &maxHint = "") const {
    zip_int64_t idx = zip_name_locate(z, name.c_str(), 0);
    if (idx < 0)
      throw Pt2Error{"'" + path + "' has no member '" + name + "'"};
    zip_stat_t st = checkedStat(name, zip_uint64_t(idx));
    if (st.size > maxSize)
      throw Pt2Error{"'" + path + "': member '" + name + "' inflates to " +
                     std::to_string(st.size) + " bytes, more than the limit of " +
                     std::to_string(maxSize) + " bytes" +
                     (maxHint.empty() ? "" : " (" + maxHint + ")")};
    zip_file_t *f = zip_fopen_index(z, zip_uint64_t(idx), 0);
    if (!f)
      throw Pt2Error{"'" + path + "': cannot open member '" + name + "': " + zip_strerror(z)};
    uint64_t want = std::min<uint64_t>(st.size, limit);
    std::vector<uint8_t> bytes;
    constexpr uint64_t kPiece = uint64_t(1) << 20;
    bool readError = false;
    while (bytes.size() < want) {
      size_t old = bytes.size();
      size_t n = size_t(std::min<uint64_t>(kPiece, want - old));
      bytes.resize(old + n);
      zip_int64_t got = zip_fread(f, bytes.data() + old, n);
      bytes.resize(old + size_t(std::max<zip_int64_t>(got, 0)));
      if (got <= 0) {
        readError = got < 0;
        break;
      }
    }
    // The rest, to the end of the member: libzip checks the CRC-32 when the
    // last byte is read (a read of 0 bytes at the end).
    std::vector<uint8_t> rest;
    if (!readError && bytes.size() == want) {
      rest.resize(size_t(std::min<uint64_t>(kPiece, std::max<uint64_t>(st.size - want, 1))));
      uint64_t left = st.size - want;
      for (;;) {
        zip_int64_t got = zip_fread(f, rest.data(), rest.size());
        if (got < 0) {
          readError = true;
          break;
        }
        if (got == 0)
          break;
        if (uint64_t(got) > left) { // more bytes than declared
          readError = true;
          break;
        }
        left -= uint64_t(got);
      }
      if (!readError && left != 0)
        readError = true;
    }
    std::string why = readError ? std::string(zip_file_strerror(f)) : std::string();
    zip_fclose(f);
    if (readError || bytes.size() != want)
      throw Pt2Error{"'" + path + "': member '" + name + "' is truncated or corrupt" +
                     (why.find("CRC") != std::string::npos
                          ? ": its bytes do not match its CRC-32 (the archive changed after "
                            "it was written)"
                          : why.empty() || why == "No error" ? std::string() : " (" + why + ")")};
    return bytes;
  }
  uint64_t size(const std::string &name) const {
    zip_int64_t idx = zip_name_locate(z, name.c_str(), 0);
    if (idx < 0)
      throw Pt2Error{"'" + path + "' has no member '" + name + "'"};
    return checkedStat(name, zip_uint64_t(idx)).size;
  }

private:
  /// The member's stat, its declared size checked against what its
  /// compressed bytes can inflate to (a 2 MB archive declaring gigabytes).
  zip_stat_t checkedStat(const std::string &name, zip_uint64_t idx) const {
    zip_stat_t st;
    const zip_uint64_t need = ZIP_STAT_SIZE | ZIP_STAT_COMP_SIZE | ZIP_STAT_COMP_METHOD;
    if (zip_stat_index(z, idx, 0, &st) != 0 || (st.valid & need) != need)
      throw Pt2Error{"'" + path + "': cannot read the size of member '" + name + "'"};
    // Largest ratio of uncompressed to compressed bytes deflate reaches.
    constexpr uint64_t kMaxDeflateRatio = 1032;
    uint64_t bound = st.comp_method == ZIP_CM_STORE
                         ? uint64_t(st.comp_size)
                         : uint64_t(st.comp_size) * kMaxDeflateRatio + 64;
    if (uint64_t(st.size) > bound)
      throw Pt2Error{"'" + path + "': member '" + name + "' is truncated or corrupt (it declares " +
                     std::to_string(st.size) + " bytes in " + std::to_string(st.comp_size) +
                     " compressed bytes)"};
    return st;
  }

public:
private:
  zip_t *z;
  std::string path;
};

std::string trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r' || s.back() == ' '))
    s.pop_back();
  return s;
}

/// A JSON member, through the bounded reader (BoundedJson.h): its inflated
/// size within OFFLOAD_MAX_PT2_JSON_BYTES before it is inflated, its nesting
/// checked before it is parsed.
json::Value parseJson(const Zip &zip, const std::string &member, const std::string &path,
                      ::offload::JsonKind kind) {
  std::string limitError;
  uint64_t limit = ::offload::jsonSizeLimit(kind, limitError);
  if (!limitError.empty())
    throw Pt2Error{limitError};
  std::vector<uint8_t> bytes = zip.read(member, UINT64_MAX, limit, ::offload::jsonLimitHint(kind));
  std::string error;
  llvm::FailureOr<json::Value> v = ::offload::parseBoundedJson(
      llvm::StringRef(reinterpret_cast<const char *>(bytes.data()), bytes.size()),
      "'" + path + "': member '" + member + "'", error);
  if (failed(v))
    throw Pt2Error{error};
  return std::move(*v);
}

/// An integer of a SymInt ({"as_int": N}); a symbolic one is an error.
int64_t symInt(const json::Value *v, const std::string &what) {
  const json::Object *o = v ? v->getAsObject() : nullptr;
  if (!o)
    throw Pt2Error{what + " is not a SymInt object"};
  if (auto i = o->getInteger("as_int"))
    return *i;
  if (o->get("as_expr"))
    throw Pt2Error{what + " is symbolic (a dynamic shape); offload needs static shapes: "
                          "export without dynamic_shapes"};
  throw Pt2Error{what + " is not an integer"};
}

std::vector<int64_t> symInts(const json::Object &o, const char *key, const std::string &what) {
  const json::Array *a = o.getArray(key);
  if (!a)
    throw Pt2Error{what + " has no '" + key + "' list"};
  std::vector<int64_t> r;
  for (size_t i = 0; i < a->size(); ++i)
    r.push_back(symInt(&(*a)[i], what + " " + key + "[" + std::to_string(i) + "]"));
  return r;
}

/// Reads the tensors a config member (`data/<dir>/model_<dir>_config.json`)
/// describes into `out`: data/weights (parameters and persistent buffers) or
/// data/constants (lifted tensor constants, non-persistent buffers).
void readTensors(Pt2Archive &ar, const Zip &zip, const std::string &dir,
                 std::map<std::string, Pt2Weight> &out) {
  std::string cfgName = ar.prefix + "data/" + dir + "/model_" + dir + "_config.json";
  json::Value cfgV = parseJson(zip, cfgName, ar.path, ::offload::JsonKind::Pt2WeightsConfig);
  const json::Object *cfgTop = cfgV.getAsObject();
  const json::Object *cfg = cfgTop ? cfgTop->getObject("config") : nullptr;
  if (!cfg)
    throw Pt2Error{"'" + ar.path + "': " + cfgName + " has no \"config\" object"};
  for (const auto &kv : *cfg) {
    std::string fqn = kv.first.str();
    std::string what = "'" + ar.path + "': " + (dir == "weights" ? "weight" : "constant") +
                       " '" + fqn + "'";
    const json::Object *e = kv.second.getAsObject();
    if (!e)
      throw Pt2Error{what + ": its config entry is not an object"};
    auto pathName = e->getString("path_name");
    if (!pathName || pathName->empty() || pathName->contains('/') || pathName->contains(".."))
      throw Pt2Error{what + ": bad or missing path_name"};
    if (e->getBoolean("use_pickle").value_or(false))
      throw Pt2Error{what + " is stored pickled (use_pickle), which this reader does not read"};
    const json::Object *meta = e->getObject("tensor_meta");
    if (!meta)
      throw Pt2Error{what + " has no tensor_meta"};
    Pt2Weight w;
    w.member = ar.prefix + "data/" + dir + "/" + pathName->str();
    w.isParam = e->getBoolean("is_param").value_or(false);
    w.requiresGrad = meta->getBoolean("requires_grad").value_or(false);
    auto dt = meta->getInteger("dtype");
    if (!dt)
      throw Pt2Error{what + " has no dtype"};
    w.dtype = *dt;
    size_t es = pt2DtypeSize(w.dtype);
    if (es == 0)
      throw Pt2Error{what + " has dtype " + pt2DtypeNameImpl(w.dtype) +
                     ", which offload does not support (float32, float64, bfloat16, float16, "
                     "int64, int32, bool)"};
    w.shape = symInts(*meta, "sizes", what);
    std::vector<int64_t> strides = symInts(*meta, "strides", what);
    int64_t offset = symInt(meta->get("storage_offset"), what + " storage_offset");
    if (strides.size() != w.shape.size())
      throw Pt2Error{what + ": " + std::to_string(strides.size()) + " strides for " +
                     std::to_string(w.shape.size()) + " dims"};
    // The extent of storage the tensor touches, in elements, with overflow
    // checks (a tensor over 2^40 elements is refused).
    const int64_t kMax = int64_t(1) << 40;
    int64_t numel = 1, last = offset;
    if (offset < 0 || offset > kMax)
      throw Pt2Error{what + ": storage_offset " + std::to_string(offset) +
                     " outside [0, 2^40]"};
    for (size_t d = 0; d < w.shape.size(); ++d) {
      if (w.shape[d] < 0 || strides[d] < 0 || w.shape[d] > kMax || strides[d] > kMax)
        throw Pt2Error{what + ": bad size or stride at dim " + std::to_string(d)};
      numel *= w.shape[d];
      if (numel > kMax)
        throw Pt2Error{what + ": too many elements"};
    }
    if (numel > 0)
      for (size_t d = 0; d < w.shape.size(); ++d) {
        // Each term is at most 2^40 * 2^40: checked, not wrapped.
        int64_t reach;
        if (__builtin_mul_overflow(w.shape[d] - 1, strides[d], &reach) ||
            __builtin_add_overflow(last, reach, &last) || last > kMax)
          throw Pt2Error{what + ": strides reach past 2^40 elements"};
      }
    uint64_t needed = numel == 0 ? 0 : uint64_t(last + 1) * es;
    if (!zip.has(w.member))
      throw Pt2Error{what + ": the archive has no member '" + w.member + "'"};
    uint64_t have = zip.size(w.member);
    std::string shapeText;
    for (size_t d = 0; d < w.shape.size(); ++d)
      shapeText += (d ? ", " : "") + std::to_string(w.shape[d]);
    if (have < needed || have % es != 0)
      throw Pt2Error{what + " (" + w.member + "): " + std::to_string(have) +
                     " bytes do not hold its description, " + pt2DtypeNameImpl(w.dtype) + "[" +
                     shapeText + "] (strides and offset need " + std::to_string(needed) +
                     " bytes of " + std::to_string(es) + "-byte elements)"};
    if (numel == 0) { // no elements: no bytes, whatever the offset says
      out[fqn] = std::move(w);
      continue;
    }
    std::vector<uint8_t> raw = zip.read(w.member, needed);
    // Dense row-major storage is copied as it is; other strides gathered.
    bool dense = true;
    int64_t expect = 1;
    for (size_t d = w.shape.size(); d-- > 0;) {
      if (w.shape[d] != 1 && strides[d] != expect)
        dense = false;
      expect *= w.shape[d];
    }
    if (dense) {
      w.bytes.assign(raw.begin() + size_t(offset) * es,
                     raw.begin() + size_t(offset) * es + size_t(numel) * es);
      out[fqn] = std::move(w);
      continue;
    }
    // A strided view (a broadcast weight: stride 0) is gathered into dense
    // bytes, which a few bytes of storage can make any size: bounded, as
    // the archive's JSON is (issue 34; found by FuzzJson).
    std::string limitError;
    uint64_t limit = ::offload::limitFromEnv(kExpandedVariable, kExpandedDefault, limitError);
    if (!limitError.empty())
      throw Pt2Error{limitError};
    if (uint64_t(numel) * es > limit)
      throw Pt2Error{what + ": a strided view of " + std::to_string(needed) +
                     " bytes of storage that expands to " + std::to_string(uint64_t(numel) * es) +
                     " bytes, over the limit of " + std::to_string(limit) + " (set " +
                     kExpandedVariable + "=BYTES to raise it)"};
    w.bytes.resize(size_t(numel) * es);
    std::vector<int64_t> idx(w.shape.size(), 0);
    for (int64_t k = 0; k < numel; ++k) {
      int64_t src = offset;
      for (size_t d = 0; d < idx.size(); ++d)
        src += idx[d] * strides[d];
      std::memcpy(w.bytes.data() + size_t(k) * es, raw.data() + size_t(src) * es, es);
      for (size_t d = idx.size(); d-- > 0;) {
        if (++idx[d] < w.shape[d])
          break;
        idx[d] = 0;
      }
    }
    out[fqn] = std::move(w);
  }
}

void readArchive(Pt2Archive &ar, const Zip &zip) {
  // The archive's one model: `<prefix>models/model.json`.
  std::vector<std::string> modelJsons;
  for (const std::string &n : zip.names()) {
    const std::string suffix = "models/model.json";
    if (n.size() >= suffix.size() && n.compare(n.size() - suffix.size(), suffix.size(), suffix) == 0 &&
        (n.size() == suffix.size() || n[n.size() - suffix.size() - 1] == '/'))
      modelJsons.push_back(n);
  }
  if (modelJsons.empty())
    throw Pt2Error{"'" + ar.path + "' has no member '<name>/models/model.json': not an archive "
                   "written by torch.export.save"};
  if (modelJsons.size() > 1)
    throw Pt2Error{"'" + ar.path + "' holds " + std::to_string(modelJsons.size()) +
                   " models (" + modelJsons[0] + ", " + modelJsons[1] + ", ...); offload imports "
                   "archives with one"};
  ar.prefix = modelJsons[0].substr(0, modelJsons[0].size() - std::string("models/model.json").size());
  if (zip.has(ar.prefix + "archive_format")) {
    std::vector<uint8_t> f = zip.read(ar.prefix + "archive_format", 64);
    std::string s = trim(std::string(f.begin(), f.end()));
    if (s != "pt2")
      throw Pt2Error{"'" + ar.path + "': archive_format is '" + s + "', not 'pt2'"};
  }
  if (zip.has(ar.prefix + "byteorder")) {
    std::vector<uint8_t> f = zip.read(ar.prefix + "byteorder", 64);
    std::string s = trim(std::string(f.begin(), f.end()));
    if (s != "little")
      throw Pt2Error{"'" + ar.path + "': byteorder is '" + s +
                     "'; offload reads little-endian archives"};
  }
  ar.model = parseJson(zip, modelJsons[0], ar.path, ::offload::JsonKind::Pt2Model);
  const json::Object *top = ar.model.getAsObject();
  if (!top)
    throw Pt2Error{"'" + ar.path + "': " + modelJsons[0] + " is not a JSON object"};
  const json::Object *ver = top->getObject("schema_version");
  std::optional<int64_t> major = ver ? ver->getInteger("major") : std::nullopt;
  std::optional<int64_t> minor = ver ? ver->getInteger("minor") : std::nullopt;
  if (!major || !minor)
    throw Pt2Error{"'" + ar.path + "': " + modelJsons[0] +
                   " has no schema_version {major, minor}: not a serialized ExportedProgram"};
  ar.schemaMajor = int(*major);
  ar.schemaMinor = int(*minor);
  if (*major != kPt2SchemaMajor || *minor < 0 || *minor > kPt2SchemaMaxMinor)
    throw Pt2Error{"'" + ar.path + "' has export schema version " + std::to_string(*major) + "." +
                   std::to_string(*minor) + "; offload reads version " +
                   std::to_string(kPt2SchemaMajor) + ".0 to " + std::to_string(kPt2SchemaMajor) +
                   "." + std::to_string(kPt2SchemaMaxMinor) + " (what PyTorch 2.15's "
                   "torch.export.save writes)"};
  readTensors(ar, zip, "weights", ar.weights);
  // An archive without lifted constants may have no constants member.
  if (zip.has(ar.prefix + "data/constants/model_constants_config.json"))
    readTensors(ar, zip, "constants", ar.constants);
}

Pt2ArchivePtr readFrom(zip_source_t *src, const std::string &path, ImportError &err) {
  zip_error_t ze;
  zip_error_init(&ze);
  zip_t *z = zip_open_from_source(src, ZIP_RDONLY | ZIP_CHECKCONS, &ze);
  if (!z) {
    std::string msg = zip_error_strerror(&ze);
    zip_error_fini(&ze);
    zip_source_free(src);
    err = {1, "cannot read '" + path + "' as a .pt2 (zip) archive: " + msg};
    return nullptr;
  }
  zip_error_fini(&ze);
  Zip zip(z, path);
  Pt2ArchivePtr ar(new Pt2Archive);
  ar->path = path;
  try {
    readArchive(*ar, zip);
  } catch (const Pt2Error &e) {
    err = {1, e.message};
    return nullptr;
  } catch (const std::bad_alloc &) {
    err = {1, "'" + path + "': out of memory while reading the archive"};
    return nullptr;
  }
  return ar;
}

} // namespace

std::string offload::import::pt2DtypeName(int64_t code) { return pt2DtypeNameImpl(code); }

size_t offload::import::pt2DtypeSize(int64_t code) {
  switch (code) {
  case kPt2Float: case kPt2Int: return 4;
  case kPt2Double: case kPt2Long: return 8;
  case kPt2BFloat16: case kPt2Half: return 2;
  case kPt2Bool: return 1;
  default: return 0;
  }
}

/// The name of a node's first input when it is a tensor, else "".
static std::string firstTensorInput(const json::Object &node) {
  const json::Array *ins = node.getArray("inputs");
  if (!ins || ins->empty())
    return "";
  const json::Object *io = (*ins)[0].getAsObject();
  const json::Object *a = io ? io->getObject("arg") : nullptr;
  const json::Object *tn = a ? a->getObject("as_tensor") : nullptr;
  auto nm = tn ? tn->getString("name") : std::nullopt;
  return nm ? nm->str() : "";
}

/// `op` of a `torch.ops.aten.<op>.<overload>` target, else "".
static std::string atenOp(const json::Object &node) {
  auto t = node.getString("target");
  llvm::StringRef r = t ? *t : llvm::StringRef();
  if (!r.consume_front("torch.ops.aten."))
    return "";
  return r.rsplit('.').first.str();
}

/// The ATen ops whose result views their first operand.
static const std::set<std::string> &viewOps() {
  static const std::set<std::string> views = {
      "slice", "select", "view", "reshape", "narrow", "unsqueeze", "squeeze",
      "flatten", "transpose", "permute", "alias", "unflatten", "t"};
  return views;
}

void offload::import::pt2ViewSources(const json::Array &nodes,
                                     std::map<std::string, std::string> &viewOf) {
  for (const json::Value &nv : nodes) {
    const json::Object *node = nv.getAsObject();
    if (!node || !viewOps().count(atenOp(*node)))
      continue;
    std::string self = firstTensorInput(*node);
    if (const json::Array *outs = node->getArray("outputs"))
      for (const json::Value &o : *outs)
        if (const json::Object *oo = o.getAsObject())
          if (const json::Object *tn = oo->getObject("as_tensor"))
            if (auto nm = tn->getString("name"))
              if (!self.empty())
                viewOf[nm->str()] = self;
  }
}

void offload::import::pt2WrittenInPlace(const json::Array &nodes, std::set<std::string> &written) {
  const std::set<std::string> &views = viewOps();
  // Views come before the in-place ops that write through them: one pass
  // from the end propagates a target to the value it views.
  for (size_t i = nodes.size(); i-- > 0;) {
    const json::Object *node = nodes[i].getAsObject();
    if (!node)
      continue;
    std::string op = atenOp(*node), self = firstTensorInput(*node);
    if (op.empty() || self.empty())
      continue;
    bool inplace = op.size() > 1 && op.back() == '_' && op[op.size() - 2] != '_' &&
                   op != "detach_";
    bool viewOfTarget = false;
    if (views.count(op))
      if (const json::Array *outs = node->getArray("outputs"))
        for (const json::Value &o : *outs)
          if (const json::Object *oo = o.getAsObject())
            if (const json::Object *tn = oo->getObject("as_tensor"))
              if (auto nm = tn->getString("name"))
                viewOfTarget |= written.count(nm->str()) != 0;
    if (inplace || viewOfTarget)
      written.insert(self);
  }
}

std::set<std::string> offload::import::pt2MutatedBuffers(const Pt2Archive &ar) {
  std::set<std::string> r;
  const json::Object *top = ar.model.getAsObject();
  const json::Object *gm = top ? top->getObject("graph_module") : nullptr;
  const json::Object *sig = gm ? gm->getObject("signature") : nullptr;
  if (!sig)
    return r;
  if (const json::Array *specs = sig->getArray("output_specs"))
    for (const json::Value &s : *specs)
      if (const json::Object *o = s.getAsObject())
        if (const json::Object *bm = o->getObject("buffer_mutation"))
          if (auto n = bm->getString("buffer_name"))
            r.insert(n->str());
  std::set<std::string> written;
  if (const json::Object *g = gm->getObject("graph"))
    if (const json::Array *nodes = g->getArray("nodes"))
      pt2WrittenInPlace(*nodes, written);
  if (const json::Array *specs = sig->getArray("input_specs"))
    for (const json::Value &s : *specs)
      if (const json::Object *o = s.getAsObject())
        if (const json::Object *bu = o->getObject("buffer"))
          if (const json::Object *a = bu->getObject("arg"))
            if (auto arg = a->getString("name"))
              if (written.count(arg->str()))
                if (auto n = bu->getString("buffer_name"))
                  r.insert(n->str());
  return r;
}

bool offload::import::pt2IsConstantBuffer(const Pt2Archive &ar, const json::Object &buffer,
                                          const std::set<std::string> &mutated) {
  auto n = buffer.getString("buffer_name");
  return n && !buffer.getBoolean("persistent").value_or(true) && !mutated.count(n->str()) &&
         !ar.weights.count(n->str()) && ar.constants.count(n->str());
}

void offload::import::Pt2ArchiveDeleter::operator()(Pt2Archive *a) const { delete a; }

bool offload::import::isPt2Path(const std::string &path) {
  return path.size() >= 4 && path.compare(path.size() - 4, 4, ".pt2") == 0;
}

Pt2ArchivePtr offload::import::readPt2(const std::string &path, ImportError &err) {
  zip_error_t ze;
  zip_error_init(&ze);
  // A regular file only: a FIFO, /dev/zero or a directory is refused by
  // name before libzip opens it (InputFiles.h).
  if (std::string e = ::offload::checkInputFile(path, "model file"); !e.empty()) {
    zip_error_fini(&ze);
    err = {1, e};
    return nullptr;
  }
  zip_source_t *src = zip_source_file_create(path.c_str(), 0, -1, &ze);
  if (!src) {
    err = {1, "cannot open '" + path + "': " + zip_error_strerror(&ze)};
    zip_error_fini(&ze);
    return nullptr;
  }
  zip_error_fini(&ze);
  return readFrom(src, path, err);
}

Pt2ArchivePtr offload::import::readPt2Buffer(const void *data, size_t size, const std::string &name,
                                             ImportError &err) {
  zip_error_t ze;
  zip_error_init(&ze);
  zip_source_t *src = zip_source_buffer_create(data, size, 0, &ze);
  zip_error_fini(&ze);
  if (!src) {
    err = {1, "cannot read '" + name + "'"};
    return nullptr;
  }
  return readFrom(src, name, err);
}

std::string offload::import::writePt2Params(Pt2Archive &ar, const std::string &path) {
  namespace rt = ::offload::rt;
  rt::NamedTensors arrays;
  // Parameters, then buffers, in the signature's order (the weights map is
  // by name; the signature order is what importPt2 uses for arguments).
  std::vector<std::string> order;
  std::set<std::string> mutated = pt2MutatedBuffers(ar);
  if (const json::Object *top = ar.model.getAsObject())
    if (const json::Object *gm = top->getObject("graph_module"))
      if (const json::Object *sig = gm->getObject("signature"))
        if (const json::Array *specs = sig->getArray("input_specs"))
          for (const json::Value &s : *specs)
            if (const json::Object *o = s.getAsObject()) {
              if (const json::Object *p = o->getObject("parameter"))
                if (auto n = p->getString("parameter_name"))
                  order.push_back(n->str());
              // A non-persistent buffer the program does not update is a
              // constant of the step, not one of its arguments.
              if (const json::Object *p = o->getObject("buffer"))
                if (auto n = p->getString("buffer_name"))
                  if (!pt2IsConstantBuffer(ar, *p, mutated))
                    order.push_back(n->str());
            }
  for (const std::string &name : order) {
    auto it = ar.weights.find(name);
    const Pt2Weight *found = it == ar.weights.end() ? nullptr : &it->second;
    if (!found) { // a non-persistent buffer the step updates
      auto c = ar.constants.find(name);
      found = c == ar.constants.end() ? nullptr : &c->second;
    }
    if (!found)
      return "cannot write parameters: '" + name + "' has no weight in the archive";
    const Pt2Weight &w = *found;
    size_t n = w.bytes.size() / std::max<size_t>(pt2DtypeSize(w.dtype), 1);
    rt::Tensor t;
    switch (w.dtype) {
    case kPt2Float:
      t = rt::Tensor(rt::DType::F32, w.shape);
      std::memcpy(t.data(), w.bytes.data(), w.bytes.size());
      break;
    case kPt2Double:
      t = rt::Tensor(rt::DType::F64, w.shape);
      std::memcpy(t.data(), w.bytes.data(), w.bytes.size());
      break;
    case kPt2BFloat16: // bf16-true: the bits, as the TorchScript path writes them
    case kPt2Half:
      t = rt::Tensor(w.dtype == kPt2BFloat16 ? rt::DType::BF16 : rt::DType::F16, w.shape);
      std::memcpy(t.data(), w.bytes.data(), w.bytes.size());
      break;
    case kPt2Bool:
      t = rt::Tensor(rt::DType::Bool, w.shape);
      std::memcpy(t.data(), w.bytes.data(), w.bytes.size());
      break;
    case kPt2Long:
      t = rt::Tensor(rt::DType::I64, w.shape);
      std::memcpy(t.data(), w.bytes.data(), w.bytes.size());
      break;
    default: { // int32 -> int64, as the TorchScript path writes integers
      t = rt::Tensor(rt::DType::I64, w.shape);
      const int32_t *src = reinterpret_cast<const int32_t *>(w.bytes.data());
      int64_t *dst = static_cast<int64_t *>(t.data());
      for (size_t i = 0; i < n; ++i)
        dst[i] = src[i];
    }
    }
    arrays.emplace_back(name, std::move(t));
  }
  rt::Status st = rt::writeNpz(path, arrays);
  return st.ok() ? std::string() : "cannot write parameters: " + st.message();
}
