//===- offload-opt.cpp - The offload optimizer driver ---------------------===//
//
// Part of offload. `offload-opt` parses MLIR with the offload dialect, runs
// the passes named on the command line (`--help` lists them with their
// options), and prints the result. Built on MlirOptMain.
//
//===----------------------------------------------------------------------===//

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/ControlFlow/IR/ControlFlowOps.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "mlir/Transforms/Passes.h"

#include "offload/Conversion/Passes.h"
#include "offload/Dialect/Offload/IR/OffloadDialect.h"
#include "offload/Dialect/Offload/Transforms/Passes.h"
#include "offload/Support/OutputFiles.h"

#include "llvm/Support/raw_ostream.h"

int main(int argc, char **argv) {
  mlir::DialectRegistry registry;
  registry.insert<mlir::offload::OffloadDialect, mlir::func::FuncDialect,
                  mlir::cf::ControlFlowDialect,
                  mlir::arith::ArithDialect, mlir::tensor::TensorDialect>();
  // Our passes, and the generic ones that are useful on training steps.
  mlir::offload::registerOffloadPasses();
  mlir::offload::registerOffloadConversionPasses();
  mlir::registerCanonicalizerPass();
  mlir::registerCSEPass();
  mlir::registerSymbolDCEPass();
  mlir::registerInlinerPass();
  mlir::registerSCCPPass();
  mlir::registerLoopInvariantCodeMotionPass();
  mlir::registerPrintOpStatsPass();
  mlir::registerViewOpGraphPass();
  // Files that passes write (the plan of --convert-offload-to-plan) appear
  // only if the whole command succeeds (include/offload/Support/OutputFiles.h).
  offload::OutputFiles &outputs = offload::OutputFiles::process();
  outputs.deferUntilCommit();
  mlir::LogicalResult result = mlir::MlirOptMain(
      argc, argv,
      "offload optimizer: memory planning passes for training steps\n"
      "(recompute, host offload, weight-gradient split). See docs/.\n",
      registry);
  if (mlir::failed(result)) {
    outputs.discard();
    return 1;
  }
  if (std::string e = outputs.commit(); !e.empty()) {
    llvm::errs() << "offload-opt: error: " << e << "\n";
    outputs.discard();
    return 1;
  }
  return 0;
}
