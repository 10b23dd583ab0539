//===- SplitWeightGrad.cpp - Backward as B (input grads) then W -----------===//
//
// Part of offload. Implements --offload-split-weight-grad. See Passes.td.
//
//===----------------------------------------------------------------------===//

#include "offload/Dialect/Offload/Transforms/PassReport.h"
#include "offload/Dialect/Offload/Analysis/MemoryPlan.h"
#include "offload/Dialect/Offload/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/raw_ostream.h"

#include <map>

#define DEBUG_TYPE "offload-split-weight-grad"

namespace mlir {
namespace offload {
#define GEN_PASS_DEF_SPLITWEIGHTGRAD
#include "offload/Dialect/Offload/Transforms/Passes.h.inc"
} // namespace offload
} // namespace mlir

using namespace mlir;
using namespace mlir::offload;

namespace {
struct SplitWeightGradPass
    : public offload::impl::SplitWeightGradBase<SplitWeightGradPass> {
  using SplitWeightGradBase::SplitWeightGradBase;
  void runOnOperation() override {
    if (failed(out.run(report, "offload-split-weight-grad", getOperation().getLoc(), [&] { runPass(); })))
      signalPassFailure();
  }
  /// The report (report=, PassReport.h).
  PassReport out;
  void runPass() {
    changed = false;
    getOperation().walk([&](func::FuncOp fn) {
      if (fn->hasAttr(OffloadDialect::kStepAttrName) && failed(split(fn)))
        signalPassFailure();
    });
    // No weight-gradient-only op anywhere: the IR, and so the memory plan
    // (MemoryPlanAnalysis), is unchanged.
    if (!changed)
      markAllAnalysesPreserved();
  }
  LogicalResult split(func::FuncOp fn);
  bool changed = false;
};
} // namespace

LogicalResult SplitWeightGradPass::split(func::FuncOp fn) {
  Block &body = fn.getBody().front();
  if (int64_t k = getNumMicroBatches(fn); k > 1)
    return fn.emitOpError() << "offload-split-weight-grad: the step accumulates gradients over "
                            << k << " micro-batches; splitting each micro-batch's backward into "
                                    "B and W is not supported yet (a pipeline stage schedules "
                                    "its micro-batches itself)";
  PhaseOp backward, next;
  for (Operation &op : body)
    if (auto m = dyn_cast<PhaseOp>(op)) {
      if (m.getPhase() == Phase::backward)
        backward = m;
      else if (backward && !next)
        next = m;
      if (m.getPhase() == Phase::backward_input || m.getPhase() == Phase::backward_weight)
        return m.emitOpError("offload-split-weight-grad: this step is already split");
    }
  if (!backward)
    return fn.emitOpError("offload-split-weight-grad: the step has no backward "
                          "phase; run --offload-autodiff first");
  Operation *end = next ? next.getOperation() : body.getTerminator();
  SmallVector<Operation *> bwd;
  for (Operation *op = backward->getNextNode(); op != end; op = op->getNextNode())
    bwd.push_back(op);

  // B: the ops producing activations' gradients (tagged by autodiff) and,
  // transitively, the backward ops they read. W: the rest of backward.
  llvm::DenseSet<Operation *> inB;
  for (Operation *op : llvm::reverse(bwd)) {
    bool needed = op->hasAttr(OffloadDialect::kActivationGradAttrName) ||
                  op->getNumResults() == 0;
    if (!needed)
      for (Value r : op->getResults())
        for (Operation *user : r.getUsers())
          if (inB.count(body.findAncestorOpInBlock(*user)))
            needed = true;
    if (needed)
      inB.insert(op);
  }
  size_t numW = bwd.size() - inB.size();
  if (numW == 0) {
    if (out)
      *out.stream() << "split @" << fn.getName() << ": no weight-gradient-only op\n";
    return success();
  }

  // Reorder: B ops stay, W ops move after a backward_weight marker.
  changed = true;
  OpBuilder b(fn.getContext());
  backward.setPhase(Phase::backward_input);
  b.setInsertionPoint(end);
  PhaseOp::create(b, backward.getLoc(), Phase::backward_weight);
  for (Operation *op : bwd)
    if (!inB.count(op))
      op->moveBefore(end);

  if (!out)
    return success();
  // What is alive between B and W: live device bytes just before the
  // marker, without the step's persistent buffers (arguments, results).
  FailureOr<MemoryPlan> plan = computeMemoryPlan(fn);
  if (failed(plan))
    return failure();
  int64_t boundary = 0;
  for (auto [i, op] : llvm::enumerate(plan->schedule))
    if (auto m = dyn_cast<PhaseOp>(op); m && m.getPhase() == Phase::backward_weight)
      boundary = i;
  int64_t keptSaved = 0, keptOther = 0;
  std::map<std::string, int64_t> byLayer;
  for (const PlannedBuffer &pb : plan->buffers) {
    if (pb.persistent || pb.space != MemorySpace::Device || pb.begin > boundary ||
        pb.end <= boundary)
      continue;
    bool saved = llvm::any_of(pb.values, [](Value v) {
      return v.getDefiningOp<SaveOp>() || v.getDefiningOp<RestoreOp>();
    });
    (saved ? keptSaved : keptOther) += pb.bytes;
    byLayer[getLayerName(pb.values.front().getLoc())] += pb.bytes;
  }
  int64_t savedTotal = 0;
  for (Operation &op : plan->function.getBody().front())
    if (auto s = dyn_cast<SaveOp>(op))
      savedTotal += mlir::offload::detail::tensorBytes(s.getValue().getType());
  *out.stream() << llvm::format(
      "split @%s: %zu of %zu backward ops moved to W; alive between B and W: "
      "%lld bytes (saved values W reads: %lld of the step's %lld saved bytes; "
      "gradients W reads: %lld)\n",
      fn.getName().str().c_str(), numW, bwd.size(),
      (long long)(keptSaved + keptOther), (long long)keptSaved, (long long)savedTotal,
      (long long)keptOther);
  for (auto &[layer, bytes] : byLayer)
    *out.stream() << llvm::format("  W needs %12lld bytes from %s\n", (long long)bytes,
                                 layer.c_str());
  return success();
}
