//===- offload-import.cpp - TorchScript to offload dialect ----------------===//
//
// Part of offload. `offload-import model.pt --input x=32x3x32x32xf32
// --input y=32xi64 --loss cross_entropy -o model.mlir [--params-out p.npz]`
// writes the model's forward as an offload training step (docs/import.md).
// Exit status: 0 success, 1 user error (bad file, bad inputs, unsupported
// model), 2 internal error. Nothing is written unless the import succeeded.
//
//===----------------------------------------------------------------------===//

#include "offload/Dialect/Offload/IR/OffloadDialect.h"
#include "offload/Import/Pt2Importer.h"
#include "offload/Import/TorchImporter.h"

#include "offload/Support/OutputFiles.h"
#include "offload/Support/ToolHandlers.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/OperationSupport.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include <chrono>

namespace cl = llvm::cl;
using namespace offload::import;

// --help lists these options only (cl::HideUnrelatedOptions): the LLVM
// libraries linked in register hundreds of backend options of their own.
static cl::OptionCategory importCategory("offload-import options");

static cl::opt<std::string> inputFile(cl::Positional,
                                      cl::desc("<model.pt | model.pt2>"),
                                      cl::Required, cl::cat(importCategory));
static cl::opt<std::string> outputFile("o", cl::desc("Output .mlir file ('-' for stdout)"),
                                       cl::value_desc("file"), cl::init("-"), cl::cat(importCategory));
static cl::list<std::string>
    inputSpecs("input",
               cl::desc("Forward input (then the loss target), NAME=DIMSxDTYPE, "
                        "e.g. x=32x3x32x32xf32; in the forward's argument order. A .pt2 "
                        "knows its inputs: an --input naming one is checked against it, "
                        "one more is the loss target"),
               cl::value_desc("spec"), cl::cat(importCategory));
static cl::opt<std::string>
    lossName("loss", cl::desc("Loss on the first output when it is not a scalar: "
                              "cross_entropy (default), nll or mse; none builds a pipeline "
                              "stage whose first output is the result"),
             cl::init(""), cl::cat(importCategory));
static cl::opt<std::string> paramsOut("params-out",
                                      cl::desc("Write initial parameters and buffers (.npz)"),
                                      cl::value_desc("file"), cl::init(""), cl::cat(importCategory));
static cl::opt<bool> keepUnused(
    "keep-unused",
    cl::desc("Keep parameters and buffers the forward never reads as step arguments "
             "(by default they are left out and listed: a step must not update a "
             "parameter the loss does not depend on)"),
    cl::init(false), cl::cat(importCategory));
static cl::opt<bool> noFuseAttention(
    "no-fuse-attention",
    cl::desc("Keep spelled-out attention (matmul, softmax, matmul) as imported instead of "
             "rewriting it into offload.attention (--offload-fuse-attention)"),
    cl::init(false), cl::cat(importCategory));
static cl::opt<std::string> attentionLayout(
    "attention-layout",
    cl::desc("blhd (default): attention between transpose(1, 2)s of its query, key, value "
             "and output (HF, nanoGPT) takes the token layout [N, L, H, E] without those "
             "copies; bhld: every attention stays in the head layout [N, H, L, E] (what "
             "the CUDA attention kernels take for now)"),
    cl::value_desc("blhd|bhld"), cl::init("blhd"), cl::cat(importCategory));
static cl::opt<bool> timeIt("time", cl::desc("Print load and import times to stderr"),
                            cl::init(false), cl::cat(importCategory));
static cl::opt<bool> noDebugInfo("no-locations",
                                 cl::desc("Do not print source locations"),
                                 cl::init(false), cl::cat(importCategory));

static int failWith(int code, const std::string &msg) {
  llvm::errs() << "offload-import: error: " << msg << "\n";
  return code;
}

int main(int argc, char **argv) {
  llvm::InitLLVM y(argc, argv);
  offload::installToolHandlers("offload-import");
  cl::HideUnrelatedOptions(importCategory);
  cl::ParseCommandLineOptions(argc, argv,
                              "offload importer: TorchScript (.pt) or torch.export (.pt2)\n");

  mlir::MLIRContext ctx;
  ctx.loadDialect<mlir::offload::OffloadDialect, mlir::func::FuncDialect>();
  ImportOptions opts;
  std::vector<std::string> unused;
  opts.keepUnused = keepUnused;
  opts.fuseAttention = !noFuseAttention;
  if (attentionLayout != "blhd" && attentionLayout != "bhld")
    return failWith(1, "--attention-layout must be blhd or bhld, got '" + attentionLayout + "'");
  opts.attentionTokenLayout = attentionLayout == "blhd";
  opts.unusedOut = &unused;
  for (const std::string &s : inputSpecs) {
    InputSpec spec;
    std::string e = parseInputSpec(s, ctx, spec);
    if (!e.empty())
      return failWith(1, e);
    opts.inputs.push_back(spec);
  }
  if (!lossName.empty()) {
    opts.lossGiven = true;
    if (lossName == "cross_entropy")
      opts.loss = LossKind::CrossEntropy;
    else if (lossName == "nll")
      opts.loss = LossKind::Nll;
    else if (lossName == "mse")
      opts.loss = LossKind::Mse;
    else if (lossName == "none")
      opts.loss = LossKind::None;
    else
      return failWith(1, "unknown --loss '" + lossName +
                             "' (expected cross_entropy, nll or mse)");
  }

  // Every output file is checked before any work and appears only when the
  // whole command succeeds (include/offload/Support/OutputFiles.h): a failed
  // import leaves --params-out and -o as they were.
  // Neither may be the model, nor each other (same path, or same device
  // and inode).
  offload::OutputFiles outputs;
  outputs.deferUntilCommit();
  std::string paramsTmp, outputTmp;
  if (std::string e = outputs.addInput(inputFile, "the input model"); !e.empty())
    return failWith(1, e);
  if (!paramsOut.empty())
    if (std::string e = outputs.stage(paramsOut, paramsTmp, "--params-out"); !e.empty())
      return failWith(1, e);
  if (outputFile != "-")
    if (std::string e = outputs.stage(outputFile, outputTmp, "the output (-o)"); !e.empty())
      return failWith(1, e);

  using Clock = std::chrono::steady_clock;
  auto t0 = Clock::now();
  ImportError err;
  bool pt2 = isPt2Path(inputFile);
  LoadedModelPtr model;
  Pt2ArchivePtr archive;
  mlir::OwningOpRef<mlir::ModuleOp> module;
  if (pt2) {
    archive = readPt2(inputFile, err);
    if (!archive)
      return failWith(err.exitCode, err.message);
  } else {
    model = loadModel(inputFile, err);
    if (!model)
      return failWith(err.exitCode, err.message);
  }
  auto t1 = Clock::now();
  module = pt2 ? importPt2(*archive, ctx, opts, err) : importModel(*model, ctx, opts, err);
  if (!module)
    return failWith(err.exitCode, err.message);
  if (!unused.empty()) {
    llvm::errs() << "offload-import: note: " << unused.size()
                 << " parameter(s)/buffer(s) the forward never reads are left out of the "
                    "step (--keep-unused keeps them):";
    for (const std::string &n : unused)
      llvm::errs() << " " << n;
    llvm::errs() << "\n";
  }
  std::string text;
  {
    llvm::raw_string_ostream os(text);
    mlir::OpPrintingFlags flags;
    if (!noDebugInfo)
      flags.enableDebugInfo(/*enable=*/true, /*prettyForm=*/false);
    module->print(os, flags);
  }
  auto t2 = Clock::now();

  if (!paramsOut.empty()) {
    std::string e = pt2 ? writePt2Params(*archive, paramsTmp) : writeParams(*model, paramsTmp);
    if (!e.empty())
      return failWith(1, e);
  }
  if (outputFile == "-") {
    llvm::outs() << text;
  } else {
    std::error_code ec;
    {
      llvm::raw_fd_ostream os(outputTmp, ec);
      if (!ec) {
        os << text;
        os.close();
        if (os.has_error())
          ec = os.error();
      }
    }
    if (ec)
      return failWith(1, "cannot write '" + outputFile + "': " + ec.message());
  }
  if (std::string e = outputs.commit(); !e.empty())
    return failWith(1, e);
  if (timeIt) {
    auto ms = [](auto d) {
      return std::chrono::duration<double, std::milli>(d).count();
    };
    llvm::errs() << "offload-import: " << llvm::sys::path::filename(inputFile)
                 << ": load " << llvm::format("%.1f", ms(t1 - t0))
                 << (pt2 ? " ms (reading the .pt2), import " : " ms (torch::jit::load), import ")
                 << llvm::format("%.1f", ms(t2 - t1)) << " ms\n";
  }
  return 0;
}
