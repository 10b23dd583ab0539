//===- FuzzPt2.cpp - libFuzzer target: the .pt2 reader and importer -------===//
//
// Part of offload (issues 16, 18). readPt2Buffer on the bytes (the zip
// directory, model.json, the weights config and every weight's bytes), then,
// when the archive reads, importPt2 (the graph walk into the op builders and
// the step's verification): an archive of any content must give a module or
// an error message, never a crash, a hang or an allocation its bytes do not
// justify.
//
//===----------------------------------------------------------------------===//

#include "offload/Dialect/Offload/IR/OffloadDialect.h"
#include "offload/Import/Pt2Importer.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/MLIRContext.h"

#include <cstdint>
#include <cstdlib>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  using namespace offload::import;
  static mlir::MLIRContext *ctx = [] {
    auto *c = new mlir::MLIRContext(mlir::MLIRContext::Threading::DISABLED);
    c->loadDialect<mlir::offload::OffloadDialect, mlir::func::FuncDialect>();
    return c;
  }();
  ImportError err;
  Pt2ArchivePtr archive = readPt2Buffer(data, size, "fuzz.pt2", err);
  if (!archive) {
    if (err.message.empty())
      std::abort();
    return 0;
  }
  ImportOptions opts;
  auto module = importPt2(*archive, *ctx, opts, err);
  if (!module && err.message.empty())
    std::abort();
  // An internal error (exit code 2) is a bug of the importer, not of the input.
  if (!module && err.exitCode == 2)
    std::abort();
  return 0;
}
