//===- Pt2.h - The .pt2 archive in memory (private) -------------*- C++ -*-===//
//
// Part of offload. What Pt2Archive.cpp reads from a torch.export archive and
// Pt2Importer.cpp converts: the model JSON and the weights, validated.
//
//===----------------------------------------------------------------------===//
#ifndef OFFLOAD_LIB_IMPORT_PT2_H
#define OFFLOAD_LIB_IMPORT_PT2_H

#include "OpBuilder.h"
#include "offload/Import/Pt2Importer.h"

#include "llvm/Support/JSON.h"

#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

namespace offload {
namespace import {

/// The export schema's ScalarType codes (torch/_export/serde/schema.py),
/// not c10's: FLOAT is 7 there.
enum Pt2Dtype : int64_t {
  kPt2Byte = 1, kPt2Char = 2, kPt2Short = 3, kPt2Int = 4, kPt2Long = 5, kPt2Half = 6,
  kPt2Float = 7, kPt2Double = 8, kPt2Bool = 12, kPt2BFloat16 = 13
};
/// `float32`, `int64`, ... (`dtype code N` for codes offload does not know).
std::string pt2DtypeName(int64_t code);
/// Bytes per element of the dtypes offload reads (f32, f64, i64, i32, bool);
/// 0 for the others.
size_t pt2DtypeSize(int64_t code);

/// One parameter or buffer: dense row-major bytes of `shape` in `dtype`.
struct Pt2Weight {
  std::string member; // zip member it came from
  int64_t dtype = 0;
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes;
  bool isParam = false;
  bool requiresGrad = false;
};

/// One argument of an ATen overload's schema: its name and default.
struct Pt2ArgSpec {
  std::string name;
  bool hasDefault = false;
  ts::Arg dflt;
};
/// The argument list of `op.overload` (e.g. `mean.dim`), or null when the
/// .pt2 importer does not know the overload (Pt2Schemas.cpp).
const std::vector<Pt2ArgSpec> *pt2Schema(const std::string &opOverload);

class Pt2Archive {
public:
  std::string path;   // for messages
  std::string prefix; // `<name>/` of the members
  int schemaMajor = 0, schemaMinor = 0;
  llvm::json::Value model = nullptr; // models/model.json
  std::map<std::string, Pt2Weight> weights; // by qualified name
  /// data/constants: tensors torch.export lifted out of forward
  /// (`lifted_tensor_N`, a `torch.tensor(...)` in the code) and
  /// non-persistent buffers, by their name in the signature.
  std::map<std::string, Pt2Weight> constants;
};

/// Adds to `written` the tensors that an in-place op of `nodes` (a graph's
/// node list; torch.export's training IR keeps `x[a:b].zero_()`,
/// `buf.add_(1)`) targets, directly or through views (`detach_` excepted:
/// it changes no value).
void pt2WrittenInPlace(const llvm::json::Array &nodes, std::set<std::string> &written);
/// Adds to `viewOf` each output of a view op of `nodes` (slice, select,
/// view, unsqueeze, ...) with the tensor it views.
void pt2ViewSources(const llvm::json::Array &nodes, std::map<std::string, std::string> &viewOf);
/// The buffers the exported program updates: buffer_mutation outputs (a
/// functional graph) and targets of in-place ops (the training IR).
std::set<std::string> pt2MutatedBuffers(const Pt2Archive &ar);
/// Whether the signature's input spec `buffer` (its JSON object) is a
/// non-persistent buffer that the program does not update: its value comes
/// from data/constants and the importer treats it as a constant of the
/// step (Pt2Importer.cpp).
bool pt2IsConstantBuffer(const Pt2Archive &ar, const llvm::json::Object &buffer,
                         const std::set<std::string> &mutated);

//===----------------------------------------------------------------------===//
// Import-time evaluation (Pt2Fold.cpp)
//===----------------------------------------------------------------------===//

/// A tensor known at import time: built by arange/ones/full/..., lifted by
/// torch.export as a constant, or computed from such tensors by the folder.
/// Elements are held as doubles (integers exactly up to 2^53), each already
/// rounded to `elemType` (f32 values are floats).
struct ConstTensor {
  std::vector<int64_t> shape;
  mlir::Type elemType;
  std::vector<double> data;
  int64_t numel() const {
    int64_t n = 1;
    for (int64_t d : shape)
      n *= d;
    return n;
  }
};
using ConstPtr = std::shared_ptr<const ConstTensor>;

/// The constant an argument holds, or null (a tensor of the step, a number).
using ConstLookup = std::function<ConstPtr(const ts::Arg &)>;

/// Whether the folder evaluates `op` (an ATen name without its namespace
/// and overload: `add`, `cumsum`, ...).
bool pt2Foldable(const std::string &op);
/// Evaluates ATen `op.overload` of `call` at import time when every tensor
/// it reads is a constant (`lookup`); ops that build a tensor from a shape
/// (`new_ones`, `full_like`) need only their operand's type. Returns null
/// when some tensor operand is not a constant; a constant the op cannot
/// take (a bad dim, a mismatched shape) fails `call` through `sb`.
ConstPtr pt2Fold(ts::StepBuilder &sb, ts::Call &call, const std::string &op,
                 const std::string &overload, const ConstLookup &lookup);
/// The bytes of a weight or constant as a ConstTensor; null when its dtype
/// is not one offload reads or its bytes are short.
ConstPtr pt2ConstOf(mlir::MLIRContext &ctx, const Pt2Weight &w);

} // namespace import
} // namespace offload

#endif // OFFLOAD_LIB_IMPORT_PT2_H
