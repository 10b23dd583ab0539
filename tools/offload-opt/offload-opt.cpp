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
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "mlir/Transforms/Passes.h"

#include "offload/Conversion/Passes.h"
#include "offload/Dialect/Offload/IR/OffloadDialect.h"
#include "offload/Dialect/Offload/Transforms/Passes.h"
#include "offload/Support/InputFiles.h"
#include "offload/Support/OutputFiles.h"
#include "offload/Support/ToolHandlers.h"

#include "mlir/Pass/PassRegistry.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/raw_ostream.h"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

static int fail(const std::string &msg) {
  offload::OutputFiles::process().discard();
  llvm::errs() << "offload-opt: error: " << msg << "\n";
  return 1;
}

/// Opens `-o PATH` when PATH exists and is not a regular file: a character
/// device or a FIFO is written in place (a FIFO without a reader is an
/// error, not a wait); -1 and `error` for anything else. `fd` stays -1 when
/// PATH is a regular file or does not exist (then it is staged).
static int openStreamOutput(const std::string &path, std::string &error) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0 || S_ISREG(st.st_mode))
    return -1;
  if (!S_ISCHR(st.st_mode) && !S_ISFIFO(st.st_mode)) {
    error = offload::checkOutputPath(path);
    return -1;
  }
  int fd = ::open(path.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) {
    error = "cannot write '" + path + "': " +
            (errno == ENXIO ? std::string("a FIFO that nobody reads")
                            : std::string(std::strerror(errno)));
    return -1;
  }
  int flags = ::fcntl(fd, F_GETFL);
  if (flags >= 0)
    (void)::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
  return fd;
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

  // The input: a regular file (a FIFO, a device, a directory are refused
  // before they are opened for good), mapped; or `-`, stdin.
  std::unique_ptr<llvm::MemoryBuffer> input;
  if (inputFile == "-") {
    auto buffer = llvm::MemoryBuffer::getSTDIN();
    if (!buffer)
      return fail("cannot read stdin: " + buffer.getError().message());
    input = std::move(*buffer);
  } else {
    int fd;
    uint64_t size;
    if (std::string e = offload::openRegularFile(inputFile, "input file", fd, size);
        !e.empty())
      return fail(e);
    auto buffer = llvm::MemoryBuffer::getOpenFile(
        llvm::sys::fs::convertFDToNativeFile(fd), inputFile, size);
    ::close(fd);
    if (!buffer)
      return fail("cannot read input file '" + inputFile + "': " + buffer.getError().message());
    input = std::move(*buffer);
    if (std::string e = outputs.addInput(inputFile, "the input"); !e.empty())
      return fail(e);
  }

  // -o: stdout, a device or pipe written in place, or a regular file staged.
  std::unique_ptr<llvm::raw_fd_ostream> file;
  llvm::raw_ostream *os = &llvm::outs();
  if (outputFile != "-") {
    std::string error;
    int fd = openStreamOutput(outputFile, error);
    if (!error.empty())
      return fail(error);
    if (fd < 0) {
      std::string tmp;
      if (std::string e = outputs.stage(outputFile, tmp, "the output (-o)"); !e.empty())
        return fail(e);
      std::error_code ec;
      file = std::make_unique<llvm::raw_fd_ostream>(tmp, ec);
      if (ec)
        return fail("cannot write '" + outputFile + "': " + ec.message());
    } else {
      file = std::make_unique<llvm::raw_fd_ostream>(fd, /*shouldClose=*/true);
    }
    os = file.get();
  }

  mlir::LogicalResult result = mlir::MlirOptMain(*os, std::move(input), registry, config);
  // A failed write (a full disk, /dev/full) is an error, never LLVM's abort
  // on a stream destroyed with an error pending.
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
      writeError = "cannot write the output to stdout: " + llvm::outs().error().message();
      llvm::outs().clear_error();
    }
  }
  if (mlir::failed(result)) {
    outputs.discard();
    return 1;
  }
  if (!writeError.empty())
    return fail(writeError);
  if (std::string e = outputs.commit(); !e.empty())
    return fail(e);
  return 0;
}
