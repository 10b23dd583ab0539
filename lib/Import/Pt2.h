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

#include <map>
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
};

} // namespace import
} // namespace offload

#endif // OFFLOAD_LIB_IMPORT_PT2_H
