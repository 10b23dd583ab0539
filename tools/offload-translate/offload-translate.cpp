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
#include "offload/Support/InputFiles.h"
#include "offload/Support/OutputFiles.h"
#include "offload/Support/ToolHandlers.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/ControlFlow/IR/ControlFlowOps.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/AsmState.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/raw_ostream.h"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

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
  if (inputFile == "-") {
    auto buffer = llvm::MemoryBuffer::getSTDIN();
    if (!buffer)
      return fail("cannot read stdin: " + buffer.getError().message());
    input = std::move(*buffer);
  } else {
    int fd;
    uint64_t size;
    if (std::string e = offload::openRegularFile(inputFile, "input file", fd, size); !e.empty())
      return fail(e);
    auto buffer = llvm::MemoryBuffer::getOpenFile(llvm::sys::fs::convertFDToNativeFile(fd),
                                                  inputFile, size);
    ::close(fd);
    if (!buffer)
      return fail("cannot read input file '" + inputFile + "': " + buffer.getError().message());
    input = std::move(*buffer);
    if (std::string e = outputs.addInput(inputFile, "the input"); !e.empty())
      return fail(e);
  }

  // -o: stdout; a character device or a FIFO (with a reader) written in
  // place; else a regular file, staged.
  std::unique_ptr<llvm::raw_fd_ostream> file;
  llvm::raw_ostream *os = &llvm::outs();
  if (outputFile != "-") {
    struct stat st;
    bool exists = ::stat(outputFile.c_str(), &st) == 0;
    if (exists && (S_ISCHR(st.st_mode) || S_ISFIFO(st.st_mode))) {
      int fd = ::open(outputFile.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
      if (fd < 0)
        return fail("cannot write '" + outputFile + "': " +
                    (errno == ENXIO ? std::string("a FIFO that nobody reads")
                                    : std::string(std::strerror(errno))));
      int flags = ::fcntl(fd, F_GETFL);
      if (flags >= 0)
        (void)::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
      file = std::make_unique<llvm::raw_fd_ostream>(fd, /*shouldClose=*/true);
    } else {
      std::string tmp;
      if (std::string e = outputs.stage(outputFile, tmp, "the output (-o)"); !e.empty())
        return fail(e);
      std::error_code ec;
      file = std::make_unique<llvm::raw_fd_ostream>(tmp, ec);
      if (ec)
        return fail("cannot write '" + outputFile + "': " + ec.message());
    }
    os = file.get();
  }

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
  bool ok = module && mlir::succeeded(mlir::offload::exportPlan(*module, *os));

  std::string writeError;
  if (file) {
    file->close();
    if (file->has_error()) {
      writeError = "cannot write '" + outputFile + "': " + file->error().message();
      file->clear_error();
    }
  } else {
    llvm::outs().flush();
    if (llvm::outs().has_error()) {
      writeError = "cannot write the plan to stdout: " + llvm::outs().error().message();
      llvm::outs().clear_error();
    }
  }
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
