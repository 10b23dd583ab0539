//===- SliceParameters.cpp - Large linear weights as streamed row slices --===//
//
// Part of offload. Implements --offload-slice-parameters. See Passes.td.
//
//===----------------------------------------------------------------------===//

#include "offload/Dialect/Offload/Transforms/PassReport.h"
#include "offload/Dialect/Offload/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/raw_ostream.h"

#define DEBUG_TYPE "offload-slice-parameters"

namespace mlir {
namespace offload {
#define GEN_PASS_DEF_SLICEPARAMETERS
#include "offload/Dialect/Offload/Transforms/Passes.h.inc"
} // namespace offload
} // namespace mlir

using namespace mlir;
using namespace mlir::offload;

namespace {
struct SliceParametersPass
    : public offload::impl::SliceParametersBase<SliceParametersPass> {
  using SliceParametersBase::SliceParametersBase;
  void runOnOperation() override {
    if (failed(out.run(report, "offload-slice-parameters", getOperation().getLoc(), [&] { runPass(); })))
      signalPassFailure();
  }
  /// The report (report=, PassReport.h).
  PassReport out;
  void runPass() {
    if (sliceBytes <= 0) {
      mlir::emitError(getOperation().getLoc(), "offload-slice-parameters: slice-bytes must be > 0");
      return signalPassFailure();
    }
    getOperation().walk([&](func::FuncOp fn) {
      if (fn->hasAttr(OffloadDialect::kStepAttrName) && failed(rewrite(fn)))
        signalPassFailure();
    });
  }
  LogicalResult rewrite(func::FuncOp fn);
};
} // namespace

LogicalResult SliceParametersPass::rewrite(func::FuncOp fn) {
  MLIRContext *ctx = fn.getContext();
  Block &body = fn.getBody().front();
  for (Operation &op : body)
    if (isa<PhaseOp>(op) && cast<PhaseOp>(op).getPhase() != Phase::forward)
      return op.emitOpError("offload-slice-parameters runs on the forward step, before "
                            "--offload-autodiff");
  auto strAttr = [&](unsigned i, StringRef n) {
    auto a = fn.getArgAttrOfType<StringAttr>(i, n);
    return a ? a.getValue().str() : std::string();
  };
  // Argument attributes, kept in step with the block's arguments while they
  // are appended and erased (the signature is rebuilt at the end).
  SmallVector<DictionaryAttr> argAttrs;
  for (unsigned i = 0; i < body.getNumArguments(); ++i)
    argAttrs.push_back(fn.getArgAttrDict(i) ? fn.getArgAttrDict(i) : DictionaryAttr::get(ctx));
  SmallVector<unsigned> toErase;
  OpBuilder b(ctx);
  int slicedWeights = 0, slices = 0;

  unsigned numArgs = body.getNumArguments();
  for (unsigned i = 0; i < numArgs; ++i) {
    BlockArgument w = body.getArgument(i);
    auto wt = dyn_cast<RankedTensorType>(w.getType());
    if (getArgRole(fn, i) != Role::parameter || !wt ||
        wt.getRank() != 2 || !wt.hasStaticShape())
      continue;
    int64_t bytes = mlir::offload::detail::tensorBytes(wt);
    if (bytes <= sliceBytes)
      continue;
    std::string name = strAttr(i, OffloadDialect::kNameAttrName);
    int64_t n = wt.getDimSize(0), k = wt.getDimSize(1);
    int64_t rowBytes = bytes / n;
    int64_t rows = std::max<int64_t>(1, sliceBytes / rowBytes);
    // Rows [a, e) of `whole` (of n) as a new step argument of `shape`, named
    // NAME[a:e], with the slice attributes, appended to `out`.
    auto addSlice = [&](BlockArgument whole, int64_t a, int64_t e, ArrayRef<int64_t> shape,
                        SmallVectorImpl<Value> &out) {
      unsigned wi = whole.getArgNumber();
      std::string wholeName = strAttr(wi, OffloadDialect::kNameAttrName);
      auto t = RankedTensorType::get(shape, cast<RankedTensorType>(whole.getType()).getElementType());
      NamedAttrList attrs(argAttrs[wi]);
      attrs.set(OffloadDialect::kNameAttrName,
                StringAttr::get(ctx, wholeName + "[" + std::to_string(a) + ":" +
                                         std::to_string(e) + "]"));
      attrs.set(OffloadDialect::kSliceOfAttrName, StringAttr::get(ctx, wholeName));
      attrs.set(OffloadDialect::kSliceAttrName, DenseI64ArrayAttr::get(ctx, {a, e, n}));
      out.push_back(body.addArgument(t, whole.getLoc()));
      argAttrs.push_back(attrs.getDictionary(ctx));
    };
    // Under mixed precision (--offload-autocast, or the planner's rebuild of
    // a step built with precision=bf16-mixed/fp16-mixed) a linear reads the
    // weight through its cast (offload.copy to bf16/f16): the master is
    // sliced and each slice cast, and the readers of the cast read the
    // concatenation of the cast slices. Each cast element is the same
    // rounding of the same master element, so the step computes bit for bit
    // what it computed unsliced; the master, its gradient and its optimizer
    // state are the slices (what --offload-host-parameters and the
    // planner's offloading move), the low-type copy is whole (2 bytes a
    // parameter, transient or saved like any other value).
    if (!w.use_empty() && llvm::all_of(w.getUsers(), [&](Operation *u) {
          auto c = dyn_cast<CopyOp>(u);
          auto ct = c ? dyn_cast<RankedTensorType>(c.getType()) : RankedTensorType();
          return ct && ct.getShape() == wt.getShape() && isa<FloatType>(ct.getElementType());
        })) {
      SmallVector<std::pair<int64_t, int64_t>> ranges;
      SmallVector<Value> wSlices;
      for (int64_t a = 0; a < n; a += rows) {
        int64_t e = std::min(n, a + rows);
        ranges.push_back({a, e});
        addSlice(w, a, e, {e - a, k}, wSlices);
      }
      SmallVector<CopyOp> casts;
      for (Operation *u : w.getUsers())
        casts.push_back(cast<CopyOp>(u));
      Type low;
      for (CopyOp c : casts) {
        low = cast<RankedTensorType>(c.getType()).getElementType();
        b.setInsertionPoint(c);
        SmallVector<Value> parts;
        for (auto [s, ws] : llvm::enumerate(wSlices)) {
          auto st = RankedTensorType::get({ranges[s].second - ranges[s].first, k}, low);
          parts.push_back(CopyOp::create(b, c.getLoc(), st, ws).getResult());
        }
        auto cat = CatOp::create(b, c.getLoc(), parts, b.getI64IntegerAttr(0));
        c.getResult().replaceAllUsesWith(cat.getResult());
        c.erase();
      }
      toErase.push_back(i);
      ++slicedWeights;
      slices += int(wSlices.size());
      if (out) {
        std::string lowName;
        llvm::raw_string_ostream(lowName) << low;
        *out.stream() << llvm::format("slice parameters @%s: '%s' (%lld bytes) in %zu slices "
                                     "of up to %lld rows (%lld bytes), each cast to %s; the "
                                     "casts concatenated\n",
                                     fn.getName().str().c_str(), name.c_str(),
                                     (long long)bytes, wSlices.size(), (long long)rows,
                                     (long long)(rows * rowBytes), lowName.c_str());
      }
      continue;
    }
    // Only the weight operand of linear ops, with one bias argument (or none).
    SmallVector<LinearOp> linears;
    Value bias;
    bool ok = !w.use_empty(), biasSet = false;
    for (OpOperand &use : w.getUses()) {
      auto lin = dyn_cast<LinearOp>(use.getOwner());
      if (!lin || use.getOperandNumber() != 1) {
        use.getOwner()->emitWarning() << "offload-slice-parameters: '" << name
                                      << "' is read by " << use.getOwner()->getName()
                                      << ", not as a linear weight; not sliced";
        ok = false;
        break;
      }
      if (biasSet && lin.getBias() != bias) {
        lin.emitWarning() << "offload-slice-parameters: '" << name
                          << "' is used with different biases; not sliced";
        ok = false;
        break;
      }
      bias = lin.getBias();
      biasSet = true;
      linears.push_back(lin);
    }
    BlockArgument biasArg = bias ? dyn_cast<BlockArgument>(bias) : BlockArgument();
    if (ok && bias &&
        (!biasArg || getArgRole(fn, biasArg.getArgNumber()) != Role::parameter ||
         llvm::any_of(biasArg.getUsers(), [&](Operation *u) {
           return !llvm::is_contained(linears, dyn_cast<LinearOp>(u));
         }))) {
      linears.front().emitWarning() << "offload-slice-parameters: the bias of '" << name
                                    << "' is not a parameter read only by its linear "
                                       "ops; not sliced";
      ok = false;
    }
    if (!ok)
      continue;

    SmallVector<Value> wSlices, bSlices;
    for (int64_t a = 0; a < n; a += rows) {
      int64_t e = std::min(n, a + rows);
      addSlice(w, a, e, {e - a, k}, wSlices);
      if (biasArg)
        addSlice(biasArg, a, e, {e - a}, bSlices);
    }
    for (LinearOp lin : linears) {
      b.setInsertionPoint(lin);
      SmallVector<Value> parts;
      for (auto [s, ws] : llvm::enumerate(wSlices)) {
        Value bs = biasArg ? bSlices[s] : Value();
        auto part = LinearOp::create(b, lin.getLoc(), lin.getInput(), ws, bs);
        for (NamedAttribute na : lin->getDiscardableAttrs())
          part->setAttr(na.getName(), na.getValue());
        parts.push_back(part.getResult());
      }
      int64_t dim = cast<RankedTensorType>(lin.getType()).getRank() - 1;
      auto cat = CatOp::create(b, lin.getLoc(), parts, b.getI64IntegerAttr(dim));
      lin.getResult().replaceAllUsesWith(cat.getResult());
      lin.erase();
    }
    toErase.push_back(i);
    if (biasArg)
      toErase.push_back(biasArg.getArgNumber());
    ++slicedWeights;
    slices += int(wSlices.size());
    if (out)
      *out.stream() << llvm::format("slice parameters @%s: '%s' (%lld bytes) in %zu slices "
                                   "of up to %lld rows (%lld bytes)\n",
                                   fn.getName().str().c_str(), name.c_str(), (long long)bytes,
                                   wSlices.size(), (long long)rows,
                                   (long long)(rows * rowBytes));
  }
  // Erase the whole arguments, highest index first.
  llvm::sort(toErase, std::greater<unsigned>());
  toErase.erase(std::unique(toErase.begin(), toErase.end()), toErase.end());
  for (unsigned i : toErase) {
    body.eraseArgument(i);
    argAttrs.erase(argAttrs.begin() + i);
  }
  fn.setFunctionType(FunctionType::get(ctx, body.getArgumentTypes(),
                                       fn.getFunctionType().getResults()));
  fn.setAllArgAttrs(argAttrs);
  if (out && slicedWeights == 0)
    *out.stream() << "slice parameters @" << fn.getName() << ": no weight above "
                 << sliceBytes << " bytes to slice\n";
  return success();
}
