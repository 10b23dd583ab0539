//===- offload-opt.cpp - The offload optimizer driver ---------------------===//
//
// Part of offload. `offload-opt` parses MLIR with the offload dialect, runs
// the passes named on the command line (`--help` lists them with their
// options), and prints the result. Built on MlirOptMain, with its own input
// and output handling: the input is a regular file (or `-`, stdin), `-o` a
// regular file is staged and renamed into place with the passes' files
// when the whole command succeeded (OutputFiles.h), `-o` a device or a pipe
// (/dev/null, /dev/stdout) is written in place, and a write error is an
// error, not an abort.
//
//===----------------------------------------------------------------------===//

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/ControlFlow/IR/ControlFlowOps.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "mlir/Transforms/Passes.h"

#include "offload/Conversion/Passes.h"
#include "offload/Dialect/Offload/IR/OffloadDialect.h"
#include "offload/Dialect/Offload/Transforms/Passes.h"
#include "offload/Support/OutputFiles.h"
#include "offload/Support/ToolHandlers.h"
#include "offload/Support/ToolIO.h"

#include "mlir/Pass/PassRegistry.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/raw_ostream.h"


static int fail(const std::string &msg) {
  offload::OutputFiles::process().discard();
  llvm::errs() << "offload-opt: error: " << msg << "\n";
  return 1;
}

int main(int argc, char **argv) {
  llvm::InitLLVM initLLVM(argc, argv);
  offload::installToolHandlers("offload-opt");
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
  auto [inputFile, outputFile] = mlir::registerAndParseCLIOptions(
      argc, argv,
      "offload optimizer: memory planning passes for training steps\n"
      "(recompute, host offload, weight-gradient split). See docs/.\n",
      registry);
  // A pass option that does not parse is named with its pass here, before
  // MLIR builds the pipeline and reports it without a location
  // ("<unknown>:0: error: <Pass-Options-Parser>: no such option ...").
  for (int i = 1; i < argc; ++i) {
    llvm::StringRef arg(argv[i]);
    if (!arg.consume_front("--") && !arg.consume_front("-"))
      continue;
    auto [name, passOptions] = arg.split('=');
    const mlir::PassInfo *info = mlir::PassInfo::lookup(name);
    if (!info || passOptions.empty())
      continue;
    mlir::OpPassManager pm("builtin.module");
    std::string why;
    if (mlir::succeeded(info->addToPipeline(pm, passOptions, [&](const llvm::Twine &msg) {
          why = msg.str();
          return mlir::failure();
        })))
      continue;
    // An unknown option comes here as "<Pass-Options-Parser>: ..."; a value
    // an enum option does not take is printed by the option parser itself.
    llvm::StringRef text = llvm::StringRef(why).trim();
    text.consume_front("<Pass-Options-Parser>:");
    text = text.trim();
    return fail("--" + name.str() + "=" + passOptions.str() + ": " +
                (text.empty() ? std::string("an option value it does not take (above)")
                              : text.str()) +
                "; offload-opt --help lists the pass's options");
  }
  mlir::MlirOptMainConfig config = mlir::MlirOptMainConfig::createFromCLOptions();
  if (config.shouldShowDialects()) {
    llvm::outs() << "Available Dialects: ";
    llvm::interleave(registry.getDialectNames(), llvm::outs(), ",");
    llvm::outs() << "\n";
    return 0;
  }
  if (config.shouldListPasses()) {
    mlir::printRegisteredPasses();
    return 0;
  }

  // Files that passes write (the plan of --convert-offload-to-plan, reports)
  // and -o appear only if the whole command succeeds, and none of them may
  // be the input or another output (include/offload/Support/OutputFiles.h).
  offload::OutputFiles &outputs = offload::OutputFiles::process();
  outputs.deferUntilCommit();

  // The input and -o (ToolIO.h).
  std::unique_ptr<llvm::MemoryBuffer> input;
  if (std::string e = offload::readToolInput(inputFile, outputs, input); !e.empty())
    return fail(e);
  std::unique_ptr<llvm::raw_fd_ostream> file;
  if (std::string e = offload::openToolOutput(outputFile, outputs, file); !e.empty())
    return fail(e);
  llvm::raw_ostream *os = file ? static_cast<llvm::raw_ostream *>(file.get()) : &llvm::outs();

  mlir::LogicalResult result = mlir::MlirOptMain(*os, std::move(input), registry, config);
  std::string writeError = offload::closeToolOutput(file, outputFile, "the output");
  if (mlir::failed(result)) {
    // A documented outcome (no plan fits the budget: 3) keeps the outputs
    // that state it; any other failure leaves nothing behind (OutputFiles.h).
    int code = outputs.failureExitCode();
    if (code != 1) {
      if (std::string e = outputs.commitKeptOnFailure(); !e.empty())
        llvm::errs() << "offload-opt: error: " << e << "\n";
      return code;
    }
    outputs.discard();
    return 1;
  }
  if (!writeError.empty())
    return fail(writeError);
  if (std::string e = outputs.commit(); !e.empty())
    return fail(e);
  return 0;
}
