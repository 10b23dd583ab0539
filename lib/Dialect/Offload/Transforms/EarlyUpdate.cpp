//===- EarlyUpdate.cpp - Optimizer updates as soon as gradients are final -===//
//
// Part of offload. Implements --offload-early-update. See Passes.td.
//
//===----------------------------------------------------------------------===//

#include "offload/Dialect/Offload/Transforms/PassReport.h"
#include "offload/Dialect/Offload/Transforms/EarlyUpdate.h"
#include "offload/Dialect/Offload/Transforms/Passes.h"

#include "llvm/Support/raw_ostream.h"

#define DEBUG_TYPE "offload-early-update"

namespace mlir {
namespace offload {
#define GEN_PASS_DEF_EARLYUPDATE
#include "offload/Dialect/Offload/Transforms/Passes.h.inc"
} // namespace offload
} // namespace mlir

using namespace mlir;
using namespace mlir::offload;

/// The `offload.wait` ops (top-level in `body`) that cover `token`, directly
/// or through a joining wait.
static void waitsCovering(Value token, Block &body, SmallVectorImpl<Operation *> &out) {
  for (Operation *user : token.getUsers()) {
    auto wait = dyn_cast<WaitOp>(user);
    if (!wait)
      continue;
    out.push_back(body.findAncestorOpInBlock(*wait));
    if (Value joined = wait.getAsyncToken())
      waitsCovering(joined, body, out);
  }
}

/// The async token of `op` when it is an async copy or a reduction across
/// ranks.
static Value asyncTokenOf(Operation *op) {
  if (isa<AllReduceOp, ReduceScatterOp, AllGatherOp>(op))
    return op->getResults().back();
  if (auto c = dyn_cast<ToDeviceOp>(op))
    return c.getAsyncToken();
  if (auto c = dyn_cast<ToHostOp>(op))
    return c.getAsyncToken();
  return Value();
}

unsigned mlir::offload::moveOptimizerUpdatesEarly(func::FuncOp step) {
  Block &body = step.getBody().front();
  SmallVector<Operation *> updates;
  for (Operation &op : body)
    if (isa<SgdUpdateOp, AdamWUpdateOp>(op))
      updates.push_back(&op);
  // Never above the first backward-or-later phase marker: an update belongs
  // after forward even when its operands are ready before. With gradient
  // accumulation, the last micro-batch's backward: every micro-batch before
  // it reads the parameters.
  Operation *floor = nullptr, *lastForward = nullptr;
  for (Operation &op : body)
    if (auto m = dyn_cast<PhaseOp>(op); m && m.getPhase() == Phase::forward)
      lastForward = m;
  for (Operation &op : body)
    if (auto m = dyn_cast<PhaseOp>(op); m && m.getPhase() != Phase::forward &&
                                        (!lastForward || lastForward->isBeforeInBlock(m))) {
      floor = m;
      break;
    }
  // Program order as numbers with gaps, kept up to date as updates move
  // (Operation::isBeforeInBlock renumbers the whole block after most moves:
  // O(n) per update).
  constexpr int64_t kStride = int64_t(1) << 20;
  llvm::DenseMap<Operation *, int64_t> pos;
  auto renumber = [&] {
    int64_t p = 0;
    for (Operation &op : body)
      pos[&op] = p += kStride;
  };
  renumber();
  auto before = [&](Operation *a, Operation *b) { return pos.lookup(a) < pos.lookup(b); };
  unsigned moved = 0;
  for (Operation *update : updates) {
    // The ops the update must follow.
    SmallVector<Operation *> after;
    auto follow = [&](Operation *op) {
      if (!op || op == update)
        return;
      after.push_back(op);
      if (Value tok = asyncTokenOf(op))
        waitsCovering(tok, body, after);
    };
    for (Value operand : update->getOperands()) {
      if (Operation *def = operand.getDefiningOp())
        follow(body.findAncestorOpInBlock(*def));
      // The new parameter and state overwrite their arguments in place
      // (MemoryPlan.h): every other reader of an argument operand comes
      // first. Another update reading a shared step counter does not write
      // it, so it does not order the two.
      if (isa<BlockArgument>(operand))
        for (Operation *user : operand.getUsers()) {
          Operation *top = body.findAncestorOpInBlock(*user);
          if (top && top != update && !isa<SgdUpdateOp, AdamWUpdateOp>(top))
            follow(top);
        }
    }
    Operation *last = nullptr;
    for (Operation *op : after)
      if (op && op->getBlock() == &body && (!last || before(last, op)))
        last = op;
    if (floor && (!last || before(last, floor)))
      last = floor;
    if (!last || last->getNextNode() == update || !before(last, update))
      continue;
    Operation *next = last->getNextNode();
    update->moveAfter(last);
    if (pos.lookup(next) - pos.lookup(last) > 1)
      pos[update] = pos.lookup(last) + (pos.lookup(next) - pos.lookup(last)) / 2;
    else
      renumber();
    ++moved;
  }
  return moved;
}

namespace {
struct EarlyUpdatePass : public offload::impl::EarlyUpdateBase<EarlyUpdatePass> {
  using EarlyUpdateBase::EarlyUpdateBase;
  void runOnOperation() override {
    if (failed(out.run(report, "offload-early-update", getOperation().getLoc(), [&] { runPass(); })))
      signalPassFailure();
  }
  /// The report (report=, PassReport.h).
  PassReport out;
  void runPass() {
    getOperation().walk([&](func::FuncOp fn) {
      if (!fn->hasAttr(OffloadDialect::kStepAttrName))
        return;
      unsigned moved = moveOptimizerUpdatesEarly(fn);
      numMoved += moved;
      if (out)
        *out.stream() << "early update @" << fn.getName() << ": " << moved
                     << " optimizer updates moved into backward\n";
    });
  }
};
} // namespace
