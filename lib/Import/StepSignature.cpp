//===- StepSignature.cpp - The step's arguments, loss and results ---------===//
//
// Part of offload. Builds `func.func @forward`: parameters, then buffers,
// as arguments named by their qualified names; the `--input` tensors; the
// forward's graph (NodeImporter.cpp); the loss on its first output (or the
// output itself for a pipeline stage); every buffer the step updated as a
// result; names and roles on arguments and results. Also the library entry
// point importModel, which turns every exception into an ImportError.
//
//===----------------------------------------------------------------------===//
#include "Importer.h"

using namespace mlir;
using namespace mlir::offload;
using namespace ::offload::import;
using namespace ::offload::import::ts;

#include "mlir/IR/PatternMatch.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Rewrite/FrozenRewritePatternSet.h"
#include "mlir/Transforms/WalkPatternRewriteDriver.h"
#include "llvm/Support/raw_ostream.h"

#include <torch/csrc/jit/passes/inliner.h>

#include <set>

//===----------------------------------------------------------------------===//
// Driver
//===----------------------------------------------------------------------===//

OwningOpRef<ModuleOp> Importer::run(ImportError &err) {
  ScopedDiagnosticHandler handler(&ctx, [&](Diagnostic &d) {
    diagnostics.push_back(d.str());
    return success();
  });
  tj::Module &m = model.module;
  std::shared_ptr<tj::Graph> graph = m.get_method("forward").graph()->copy();
  tj::Inline(*graph);

  begin(model.path);
  // Parameters, then buffers, as arguments with their qualified names.
  auto addArg = [&](const std::string &name, const at::Tensor &t, const std::string &role,
                    bool isBuffer) {
    Type et = elementType(t.scalar_type(), "'" + name + "'");
    addStateArg(name, RankedTensorType::get(t.sizes().vec(), et), role, isBuffer);
  };
  for (const auto &p : m.named_parameters(true))
    addArg(p.name, p.value, p.value.requires_grad() ? "parameter" : "state", false);
  for (const auto &buf : m.named_buffers(true))
    addArg(buf.name, buf.value, "state", true);

  // Inputs: the forward's arguments after `self`, then an optional target.
  auto gin = graph->inputs();
  size_t nFwd = gin.size() - 1;
  size_t nGiven = opts.inputs.size();
  if (nGiven != nFwd && nGiven != nFwd + 1) {
    std::string names;
    for (size_t i = 1; i < gin.size(); ++i)
      names += (i > 1 ? ", " : "") + gin[i]->debugNameBase();
    throw ConvError{"the model's forward takes " + std::to_string(nFwd) +
                    " input(s) (" + names + ") [+ 1 loss target]; got " +
                    std::to_string(nGiven) + " --input"};
  }
  std::set<std::string> seen;
  std::vector<mlir::Value> inputVals;
  for (const InputSpec &s : opts.inputs) {
    if (!seen.insert(s.name).second || argIndex.count(s.name))
      throw ConvError{"--input name '" + s.name + "' is used twice or names a parameter"};
    inputVals.push_back(addInput(s.name, s.type));
  }
  Val self;
  self.kind = Val::Module;
  self.iv = m._ivalue();
  vals[gin[0]] = self;
  for (size_t i = 0; i < nFwd; ++i)
    vals[gin[i + 1]] = Val::tensor(inputVals[i]);

  PhaseOp::create(b, fileLoc, Phase::forward);
  convertBlock(graph->block());
  throwIfUnsupported();

  // The loss on the first output.
  tj::Node *ret = graph->return_node();
  Val out = vals[ret->input(0)];
  while (out.kind == Val::List && !out.elems.empty())
    out = out.elems[0];
  if (out.kind != Val::Tensor)
    throw ConvError{"the forward's first output is not a tensor computed from the inputs"};
  bool hasTarget = nGiven == nFwd + 1;
  return finish(out.value, hasTarget ? inputVals.back() : mlir::Value(),
                hasTarget ? opts.inputs.back().name : std::string(), err);
}

auto ::offload::import::importModel(LoadedModel &model, MLIRContext &ctx,
                                   const ImportOptions &options, ImportError &err)
    -> OwningOpRef<ModuleOp> {
  Importer im(model, ctx, options);
  try {
    return im.run(err);
  } catch (const ConvError &e) {
    err = {1, e.message};
  } catch (const std::exception &e) {
    err = {2, "internal error: " + torchMessage(e)};
  } catch (...) {
    err = {2, "internal error: unknown exception"};
  }
  return nullptr;
}
