//===- FuzzMlir.cpp - libFuzzer target: offload-opt's entry ---------------===//
//
// Part of offload (issue 18). What offload-opt does with a file: parse it
// with the offload, func, arith, cf and tensor dialects, verify it, and run
// the memory passes on it (autodiff, recompute, host offload, split, the
// memory plan through the memory report). Diagnostics are swallowed: the
// input is expected to be mostly invalid. A crash, hang, fatal error or
// sanitizer report is a bug.
//
//===----------------------------------------------------------------------===//

#include "offload/Conversion/Passes.h"
#include "offload/Dialect/Offload/IR/OffloadDialect.h"
#include "offload/Dialect/Offload/Transforms/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/ControlFlow/IR/ControlFlowOps.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdint>

using namespace mlir;

namespace {
struct Setup {
  DialectRegistry registry;
  Setup() {
    registry.insert<offload::OffloadDialect, func::FuncDialect, cf::ControlFlowDialect,
                    arith::ArithDialect, tensor::TensorDialect>();
    offload::registerOffloadPasses();
    offload::registerOffloadConversionPasses();
    registerCanonicalizerPass();
    registerCSEPass();
  }
};
} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static Setup setup;
  // Keep inputs small: the fuzzer looks for crashes, not for slow parses of
  // megabytes of text.
  if (size > 64 * 1024)
    return 0;
  MLIRContext ctx(setup.registry, MLIRContext::Threading::DISABLED);
  ctx.allowUnregisteredDialects(false);
  ScopedDiagnosticHandler quiet(&ctx, [](Diagnostic &) { return success(); });
  llvm::SourceMgr sm;
  sm.AddNewSourceBuffer(
      llvm::MemoryBuffer::getMemBufferCopy(
          llvm::StringRef(reinterpret_cast<const char *>(data), size), "fuzz"),
      llvm::SMLoc());
  OwningOpRef<ModuleOp> module = parseSourceFile<ModuleOp>(sm, &ctx);
  if (!module || failed(verify(*module)))
    return 0;
  // Each pipeline on its own copy, so that one pass's failure does not hide
  // the others.
  static const char *const pipelines[] = {
      "builtin.module(offload-autodiff{optimizer=sgd lr=0.1 momentum=0.9},"
      "offload-recompute{policy=all report=false},offload-memory-report)",
      "builtin.module(offload-autodiff{optimizer=adamw},"
      "offload-host-offload{policy=all report=false},"
      "offload-split-weight-grad{report=false})",
      "builtin.module(offload-saved-value-report,offload-cost-report{per-op=false},canonicalize,cse)",
  };
  std::string sink;
  for (const char *p : pipelines) {
    OwningOpRef<ModuleOp> copy = cast<ModuleOp>((*module)->clone());
    PassManager pm(&ctx);
    std::string err;
    llvm::raw_string_ostream es(err);
    if (failed(parsePassPipeline(p, pm, es))) {
      llvm::errs() << "FuzzMlir: pipeline does not parse: " << err << "\n";
      __builtin_trap(); // a pipeline of this file no longer parses
    }
    (void)pm.run(*copy);
  }
  return 0;
}
