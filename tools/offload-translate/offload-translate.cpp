//===- offload-translate.cpp - Exporters of the offload dialect -----------===//
//
// Part of offload. `offload-translate --offload-to-plan step.mlir -o
// step.plan` writes a training step as the runtime's plan file. The IR is
// read, never changed; `--help` lists the options. Its own driver rather
// than mlirTranslateMain (one translation), so that its files follow the
// tools' rules: the input is a regular file (or `-`, stdin), `-o` a regular
// file is staged and renamed into place only when the plan was written
// whole, `-o` a device or a pipe is written in place, and a write error
// (`-o /dev/full`) is an error, not an abort (OutputFiles.h, InputFiles.h).
//
//===----------------------------------------------------------------------===//

#include "offload/Conversion/OffloadToPlan.h"
#include "offload/Dialect/Offload/IR/OffloadDialect.h"
#include "offload/Support/OutputFiles.h"
#include "offload/Support/ToolHandlers.h"
#include "offload/Support/ToolIO.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/ControlFlow/IR/ControlFlowOps.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/AsmState.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/raw_ostream.h"


namespace cl = llvm::cl;

static cl::OptionCategory translateCategory("offload-translate options");
static cl::opt<std::string> inputFile(cl::Positional, cl::desc("<step.mlir>"), cl::init("-"),
                                      cl::cat(translateCategory));
static cl::opt<std::string> outputFile("o", cl::desc("Output file ('-' for stdout)"),
                                       cl::value_desc("file"), cl::init("-"),
                                       cl::cat(translateCategory));
static cl::opt<bool> toPlan(
    "offload-to-plan",
    cl::desc("Write the training step (the function with 'offload.step') as the runtime's "
             "plan file (FlatBuffers, include/offload/Runtime/Plan.fbs)"),
    cl::init(false), cl::cat(translateCategory));

static cl::opt<bool> forwardOnly(
    "forward-only",
    cl::desc("With --offload-to-plan: lower a step that has parameters but no backward phase "
             "(an inference plan); without it such a step is refused, since the plan would "
             "compute the loss and train nothing"),
    cl::init(false), cl::cat(translateCategory));
static cl::opt<std::string> report(
    "report",
    cl::desc("With --offload-to-plan: where the plan's summary goes (instructions, buffers, "
             "peak device bytes, device and host arenas): - or true (stderr), FILE, or false "
             "(none, the default)"),
    cl::value_desc("where"), cl::init(""), cl::cat(translateCategory));

static int fail(const std::string &msg) {
  offload::OutputFiles::process().discard();
  llvm::errs() << "offload-translate: error: " << msg << "\n";
  return 1;
}

int main(int argc, char **argv) {
  llvm::InitLLVM initLLVM(argc, argv);
  offload::installToolHandlers("offload-translate");
  mlir::registerAsmPrinterCLOptions();
  mlir::registerMLIRContextCLOptions();
  cl::HideUnrelatedOptions(translateCategory);
  cl::ParseCommandLineOptions(argc, argv,
                              "offload exporters: the runtime plan of a training step\n");
  if (!toPlan)
    return fail("give the translation: --offload-to-plan (see --help)");

  offload::OutputFiles &outputs = offload::OutputFiles::process();
  outputs.deferUntilCommit();
  std::unique_ptr<llvm::MemoryBuffer> input;
  if (std::string e = offload::readToolInput(inputFile, outputs, input); !e.empty())
    return fail(e);
  std::unique_ptr<llvm::raw_fd_ostream> file;
  if (std::string e = offload::openToolOutput(outputFile, outputs, file); !e.empty())
    return fail(e);
  llvm::raw_ostream *os = file ? static_cast<llvm::raw_ostream *>(file.get()) : &llvm::outs();

  mlir::DialectRegistry registry;
  registry.insert<mlir::offload::OffloadDialect, mlir::func::FuncDialect,
                  mlir::cf::ControlFlowDialect, mlir::arith::ArithDialect,
                  mlir::tensor::TensorDialect>();
  mlir::MLIRContext ctx(registry);
  llvm::SourceMgr sourceMgr;
  sourceMgr.AddNewSourceBuffer(std::move(input), llvm::SMLoc());
  mlir::SourceMgrDiagnosticHandler diagnostics(sourceMgr, &ctx);
  mlir::OwningOpRef<mlir::ModuleOp> module =
      mlir::parseSourceFile<mlir::ModuleOp>(sourceMgr, &ctx);
  bool ok = module && mlir::succeeded(mlir::offload::exportPlan(
                               *module, *os, {forwardOnly, report, outputFile}));

  std::string writeError = offload::closeToolOutput(file, outputFile, "the plan");
  if (!ok) {
    outputs.discard();
    return 1;
  }
  if (!writeError.empty())
    return fail(writeError);
  if (std::string e = outputs.commit(); !e.empty())
    return fail(e);
  return 0;
}
