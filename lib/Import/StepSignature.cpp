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

  Location fileLoc = FileLineColLoc::get(&ctx, model.path, 0, 0);
  OwningOpRef<ModuleOp> module = ModuleOp::create(fileLoc);
  b.setInsertionPointToEnd(module->getBody());
  func = func::FuncOp::create(b, fileLoc, "forward", b.getFunctionType({}, {}));
  body = func.addEntryBlock();
  b.setInsertionPointToEnd(body);

  // Parameters, then buffers, as arguments with their qualified names.
  auto addArg = [&](const std::string &name, const at::Tensor &t,
                    const std::string &role) {
    Type et = elementType(t.scalar_type(), "'" + name + "'");
    auto type = RankedTensorType::get(t.sizes().vec(), et);
    argIndex[name] = body->getNumArguments();
    current[name] = body->addArgument(type, NameLoc::get(b.getStringAttr(name)));
    argNameRole.push_back({name, role});
  };
  for (const auto &p : m.named_parameters(true))
    addArg(p.name, p.value, p.value.requires_grad() ? "parameter" : "state");
  for (const auto &buf : m.named_buffers(true)) {
    addArg(buf.name, buf.value, "state");
    bufferNames.push_back(buf.name);
  }

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
    inputVals.push_back(body->addArgument(s.type,
                                          NameLoc::get(b.getStringAttr(s.name))));
    argNameRole.push_back({s.name, "input"});
  }
  Val self;
  self.kind = Val::Module;
  self.iv = m._ivalue();
  vals[gin[0]] = self;
  for (size_t i = 0; i < nFwd; ++i)
    vals[gin[i + 1]] = Val::tensor(inputVals[i]);

  PhaseOp::create(b, fileLoc, Phase::forward);
  convertBlock(graph->block());

  // Every problem of the walk in one message: op kinds without a conversion
  // and uses a conversion refused, each with its count and locations. A
  // single refused use keeps its own message (location first).
  if (!unsupported.empty()) {
    if (unsupported.size() == 1 && unsupported.begin()->second.count == 1 &&
        !unsupported.begin()->second.message.empty())
      throw ConvError{unsupported.begin()->second.message};
    std::string msg = "unsupported op";
    msg += unsupported.size() > 1 ? "s: " : ": ";
    bool first = true;
    for (auto &[kind, info] : unsupported) {
      msg += (first ? "" : "; ") + kind + " (" + std::to_string(info.count) + "x at ";
      for (size_t i = 0; i < info.at.size(); ++i)
        msg += (i ? ", " : "") + info.at[i];
      msg += ")";
      first = false;
    }
    throw ConvError{msg};
  }

  // The loss.
  tj::Node *ret = graph->return_node();
  Val out = vals[ret->input(0)];
  while (out.kind == Val::List && !out.elems.empty())
    out = out.elems[0];
  if (out.kind != Val::Tensor)
    throw ConvError{"the forward's first output is not a tensor computed from the inputs"};
  auto ot = tt(out.value);
  mlir::Value loss;
  bool hasTarget = nGiven == nFwd + 1;
  bool stage = opts.lossGiven && opts.loss == LossKind::None;
  if (stage && hasTarget)
    throw ConvError{"--loss none builds a pipeline stage, which takes no loss target: "
                    "drop the last --input"};
  if (stage) {
    if (!isa<FloatType>(ot.getElementType()))
      throw ConvError{"a pipeline stage's output must be f32 or f64"};
    loss = out.value;
  } else if (ot.getRank() == 0 && isa<FloatType>(ot.getElementType()) && !hasTarget) {
    loss = out.value;
  } else {
    if (!hasTarget)
      throw ConvError{"the forward returns a tensor of shape " +
                      [&] {
                        std::string s;
                        llvm::raw_string_ostream os(s);
                        os << ot;
                        return os.str();
                      }() +
                      ", not a scalar loss: pass the loss target as one more --input "
                      "and choose --loss cross_entropy|nll|mse"};
    mlir::Value target = inputVals.back();
    tj::Node *rn = ret;
    std::string what;
    {
      llvm::raw_string_ostream os(what);
      os << "the loss ("
         << (opts.loss == LossKind::Mse ? "mse"
             : opts.loss == LossKind::Nll ? "nll" : "cross_entropy")
         << ") on the forward's output " << ot << " and target '"
         << opts.inputs.back().name << "' " << target.getType();
    }
    try {
    mlir::Value z = out.value;
    auto tt0 = tt(target);
    if (opts.loss == LossKind::Mse) {
      loss = emit1<MseLossOp>(rn, {z, target});
    } else {
      // Class-index losses over [N, C]: flatten leading dims as PyTorch
      // users do (logits.reshape(-1, C), target.reshape(-1)).
      if (ot.getRank() > 2) {
        z = reshape(rn, z, {ot.getNumElements() / ot.getShape().back(), ot.getShape().back()});
        if (tt0.getRank() > 1)
          target = reshape(rn, target, {tt0.getNumElements()});
      }
      if (!tt0.getElementType().isInteger(64))
        throw ConvError{"prim::Return: the target must be i64 class indices"};
      if (opts.loss == LossKind::CrossEntropy)
        loss = emit1<CrossEntropyOp>(rn, {z, target});
      else
        loss = emit1<NllLossOp>(rn, {z, target});
    }
    } catch (const ConvError &e) {
      std::string m = e.message;
      size_t p = m.find("prim::Return: ");
      if (p == 0)
        m = m.substr(14);
      throw ConvError{what + ": " + m};
    }
  }
  // f32 or f64 end to end (the dialect's float ops and the runtime's
  // kernels take both); f64 gives the tests an exact oracle.
  if (!tt(loss).getElementType().isF32() && !tt(loss).getElementType().isF64())
    throw ConvError{"the loss must be f32 or f64"};

  // Results: loss, then every buffer the step updated.
  SmallVector<mlir::Value> results = {loss};
  SmallVector<std::pair<std::string, std::string>> resNameRole = {
      stage ? std::pair<std::string, std::string>{"output", "output"}
            : std::pair<std::string, std::string>{"loss", "loss"}};
  for (const std::string &name : bufferNames) {
    mlir::Value now = current[name];
    if (now != body->getArgument(argIndex[name])) {
      results.push_back(now);
      resNameRole.push_back({name, "new_state"});
    }
  }
  func::ReturnOp::create(b, fileLoc, results);

  // Transposes of the last two dims feeding a matmul fold into its flags
  // (MatmulOp's canonicalization; no other pattern or folder runs here).
  {
    RewritePatternSet patterns(&ctx);
    MatmulOp::getCanonicalizationPatterns(patterns, &ctx);
    walkAndApplyPatterns(func, FrozenRewritePatternSet(std::move(patterns)));
  }

  // Drop ops whose results nothing reads (unused chunks, transposes folded
  // into matmul), newest first.
  for (Operation &op : llvm::make_early_inc_range(llvm::reverse(*body)))
    if (isOpTriviallyDead(&op))
      op.erase();

  // Parameters and buffers the graph never reads are left out (see
  // ImportOptions::keepUnused).
  if (!opts.keepUnused)
    for (unsigned i = body->getNumArguments(); i-- > 0;) {
      const std::string &role = argNameRole[i].second;
      if ((role == "parameter" || role == "state") && body->getArgument(i).use_empty()) {
        if (opts.unusedOut)
          opts.unusedOut->insert(opts.unusedOut->begin(), argNameRole[i].first);
        body->eraseArgument(i);
        argNameRole.erase(argNameRole.begin() + i);
      }
    }

  SmallVector<Type> argTypes(body->getArgumentTypes());
  SmallVector<Type> resTypes;
  for (mlir::Value v : results)
    resTypes.push_back(v.getType());
  func.setFunctionType(b.getFunctionType(argTypes, resTypes));
  auto setAttrs = [&](auto setter, unsigned i, const std::pair<std::string, std::string> &nr) {
    setter(i, OffloadDialect::kNameAttrName, b.getStringAttr(nr.first));
    setter(i, OffloadDialect::kRoleAttrName, getRoleAttr(b.getContext(), nr.second));
  };
  for (unsigned i = 0; i < argNameRole.size(); ++i)
    setAttrs([&](unsigned j, StringRef k, Attribute a) { func.setArgAttr(j, k, a); }, i,
             argNameRole[i]);
  for (unsigned i = 0; i < resNameRole.size(); ++i)
    setAttrs([&](unsigned j, StringRef k, Attribute a) { func.setResultAttr(j, k, a); }, i,
             resNameRole[i]);
  func->setAttr(OffloadDialect::kStepAttrName, b.getUnitAttr());

  diagnostics.clear();
  if (failed(mlir::verify(*module))) {
    err = {2, "internal error: the imported module does not verify: " +
                  (diagnostics.empty() ? std::string("?") : diagnostics.front())};
    return nullptr;
  }
  return module;
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
