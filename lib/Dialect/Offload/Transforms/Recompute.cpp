//===- Recompute.cpp - Rematerialize saved values in backward -------------===//
//
// Part of offload. Implements --offload-recompute and
// --offload-inline-recompute. See Passes.td for the policies.
//
//===----------------------------------------------------------------------===//

#include "offload/Dialect/Offload/Transforms/PassReport.h"
#include "offload/Dialect/Offload/Transforms/Passes.h"
#include "offload/Dialect/Offload/Transforms/Recompute.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/GlobPattern.h"
#include "llvm/Support/raw_ostream.h"

#include <cmath>

#define DEBUG_TYPE "offload-recompute"

namespace mlir {
namespace offload {
#define GEN_PASS_DEF_RECOMPUTE
#define GEN_PASS_DEF_INLINERECOMPUTE
#include "offload/Dialect/Offload/Transforms/Passes.h.inc"
} // namespace offload
} // namespace mlir

using namespace mlir;
using namespace mlir::offload;

bool mlir::offload::isRecomputable(Operation *op) {
  return isa<OffloadDialect>(op->getDialect()) && isPure(op) &&
         op->getNumRegions() == 0 && !isa<SaveOp, RestoreOp>(op);
}

LogicalResult mlir::offload::computeRecomputeCone(ArrayRef<Value> values,
                                                  const llvm::DenseSet<Value> &available,
                                                  llvm::SetVector<Operation *> &cone,
                                                  llvm::SetVector<Value> &inputs,
                                                  size_t maxOps) {
  bool ok = true;
  std::function<void(Value)> visit = [&](Value v) {
    if (!ok)
      return;
    if (isa<BlockArgument>(v) || available.contains(v)) {
      inputs.insert(v);
      return;
    }
    Operation *def = v.getDefiningOp();
    if (cone.contains(def))
      return;
    if (!isRecomputable(def) || (maxOps && cone.size() >= maxOps)) {
      ok = false;
      return;
    }
    for (Value o : def->getOperands())
      visit(o);
    cone.insert(def); // post-order: operands' producers first
  };
  for (Value v : values)
    visit(v);
  return success(ok);
}

namespace {
struct Group {
  SmallVector<SaveOp> saves; // chosen saves, forward order
};

struct RecomputePass : public offload::impl::RecomputeBase<RecomputePass> {
  using RecomputeBase::RecomputeBase;

  void runOnOperation() override {
    if (failed(out.run(report, "offload-recompute", getOperation().getLoc(), [&] { runPass(); })))
      signalPassFailure();
  }
  /// The report (report=, PassReport.h).
  PassReport out;
  void runPass() {
    // policy= is checked by the option parser (cl::values, Passes.td).
    if (policy == RecomputePolicy::EveryK && k < 1) {
      mlir::emitError(getOperation().getLoc(), "offload-recompute: k must be >= 1");
      return signalPassFailure();
    }
    if (policy == RecomputePolicy::Names && names.empty()) {
      mlir::emitError(getOperation().getLoc(),
                      "offload-recompute: policy=names needs names=GLOB (the layers "
                      "to recompute, e.g. names=layer1.*); use policy=all for every "
                      "saved value");
      return signalPassFailure();
    }
    auto glob = llvm::GlobPattern::create(names);
    if (!glob) {
      mlir::emitError(getOperation().getLoc()) << "offload-recompute: bad glob '" << names
                                 << "': " << llvm::toString(glob.takeError());
      return signalPassFailure();
    }
    SmallVector<llvm::GlobPattern> checkpointGlobs;
    for (const std::string &g : checkpoints) {
      auto pattern = llvm::GlobPattern::create(g);
      if (!pattern) {
        mlir::emitError(getOperation().getLoc())
            << "offload-recompute: bad glob '" << g
            << "' in checkpoints=: " << llvm::toString(pattern.takeError());
        return signalPassFailure();
      }
      checkpointGlobs.push_back(std::move(*pattern));
    }
    bool changed = false;
    getOperation().walk([&](func::FuncOp fn) {
      if (!fn->hasAttr(OffloadDialect::kStepAttrName))
        return;
      if (!hasBackwardPhase(fn)) {
        mlir::emitError(fn.getLoc())
            << "offload-recompute: step '" << fn.getName()
            << "' has no backward phase, so no saved values to recompute; run "
               "--offload-autodiff first";
        return signalPassFailure();
      }
      changed |= rewrite(fn, *glob, checkpointGlobs);
    });
    // Nothing chosen: the step, and so its memory plan, is unchanged.
    if (!changed)
      markAllAnalysesPreserved();
  }

  /// Rewrites `fn`; false when it chose no saved value (IR unchanged).
  /// `checkpointGlobs`: the checkpoints= option.
  bool rewrite(func::FuncOp fn, const llvm::GlobPattern &glob,
               ArrayRef<llvm::GlobPattern> checkpointGlobs);
};
} // namespace

/// The checkpoints of `body` beyond its saved values: the tensor results of
/// forward ops marked offload.checkpoint or whose layer matches one of
/// `checkpointGlobs`, except values that have a save already (kept ones are
/// checkpoints as they are; chosen ones are recomputed: the policy wins).
/// Each gets a save right after its op; returns those saves. The attribute
/// is removed.
static SmallVector<SaveOp> addCheckpointSaves(Block &body, ArrayRef<SaveOp> saves,
                                              ArrayRef<llvm::GlobPattern> checkpointGlobs) {
  llvm::DenseSet<Value> saved;
  for (SaveOp s : saves)
    saved.insert(s.getValue());
  SmallVector<SaveOp> added;
  for (Operation &op : llvm::make_early_inc_range(body)) {
    if (auto phase = dyn_cast<PhaseOp>(op); phase && phase.getPhase() != Phase::forward)
      break; // forward ops only
    bool marked = op.hasAttr(OffloadDialect::kCheckpointAttrName);
    op.removeAttr(OffloadDialect::kCheckpointAttrName);
    if (!marked) {
      if (checkpointGlobs.empty() || !isRecomputable(&op))
        continue;
      std::string layer = getLayerName(op.getLoc());
      if (llvm::none_of(checkpointGlobs,
                        [&](const llvm::GlobPattern &g) { return g.match(layer); }))
        continue;
    }
    OpBuilder b(op.getContext());
    b.setInsertionPointAfter(&op);
    for (Value r : op.getResults())
      if (isa<RankedTensorType>(r.getType()) && !saved.contains(r))
        added.push_back(SaveOp::create(b, r.getLoc(), r));
  }
  return added;
}

bool RecomputePass::rewrite(func::FuncOp fn, const llvm::GlobPattern &glob,
                            ArrayRef<llvm::GlobPattern> checkpointGlobs) {
  Block &body = fn.getBody().front();
  SmallVector<SaveOp> saves;
  for (Operation &op : body)
    if (auto s = dyn_cast<SaveOp>(op))
      saves.push_back(s);
  if (saves.empty())
    return false;

  // 1. Choose. The segment policies count activations only: per-channel
  // statistics (rank <= 1, e.g. batch norm's saved mean and inverse std)
  // are tiny, are always kept, and are no use as checkpoints.
  auto isActivation = [](SaveOp s) {
    return cast<RankedTensorType>(s.getValue().getType()).getRank() >= 2;
  };
  bool segmentPolicy = policy == RecomputePolicy::EveryK || policy == RecomputePolicy::Sqrt;
  size_t numActivations = llvm::count_if(saves, isActivation);
  llvm::DenseSet<Operation *> chosen;
  unsigned segment = k;
  if (policy == RecomputePolicy::Sqrt)
    segment = std::max(1u, unsigned(std::lround(std::sqrt(double(numActivations)))));
  size_t activationIndex = 0;
  for (SaveOp s : saves) {
    Operation *producer = s.getValue().getDefiningOp();
    bool activation = isActivation(s);
    size_t i = activation ? activationIndex++ : 0;
    if (!producer || !isRecomputable(producer))
      continue;
    // Statistics are recomputed only with everything else (all, marked).
    if (!activation && policy != RecomputePolicy::All && policy != RecomputePolicy::Marked)
      continue;
    bool pick = false;
    if (policy == RecomputePolicy::Ops)
      pick = llvm::is_contained(ops, producer->getName().stripDialect().str());
    else if (policy == RecomputePolicy::Names)
      pick = glob.match(getLayerName(producer->getLoc()));
    else if (policy == RecomputePolicy::All)
      pick = true;
    else if (policy == RecomputePolicy::Marked)
      pick = s->hasAttr("offload.recompute");
    else // every-k, sqrt: keep every segment-th activation as a checkpoint
      pick = (i + 1) % segment != 0;
    if (pick)
      chosen.insert(s);
  }
  if (chosen.empty()) {
    for (Operation &op : body)
      op.removeAttr(OffloadDialect::kCheckpointAttrName);
    if (out)
      *out.stream() << "recompute @" << fn.getName() << " (policy " << stringifyOption(policy)
                   << "): no saved value chosen\n";
    return false;
  }

  // 2. Group: consecutive chosen saves form one segment for the segment
  // policies; one value per group otherwise.
  bool segments = segmentPolicy || policy == RecomputePolicy::All;
  SmallVector<Group> groups;
  // policy=marked: saves with one integer group id share a region.
  llvm::DenseMap<int64_t, unsigned> groupOfId;
  bool open = false;
  for (SaveOp s : saves) {
    if (policy == RecomputePolicy::Marked) {
      if (!chosen.count(s))
        continue;
      auto id = dyn_cast<IntegerAttr>(s->getAttr(OffloadDialect::kRecomputeAttrName));
      if (!id) {
        groups.emplace_back();
      } else {
        auto [it, inserted] = groupOfId.try_emplace(id.getInt(), groups.size());
        if (inserted)
          groups.emplace_back();
        groups[it->second].saves.push_back(s);
        continue;
      }
      groups.back().saves.push_back(s);
      continue;
    }
    if (!chosen.count(s)) {
      // A kept statistic does not end a segment; a kept activation does.
      if (!segmentPolicy || isActivation(s))
        open = false;
      continue;
    }
    if (!segments || !open)
      groups.emplace_back();
    groups.back().saves.push_back(s);
    open = true;
  }

  // Saved values that stay kept, and the checkpoints beyond them: a
  // recompute region may restore them.
  SmallVector<SaveOp> checkpointSaves = addCheckpointSaves(body, saves, checkpointGlobs);
  llvm::DenseMap<Value, SaveOp> keptSave;
  llvm::DenseSet<Value> keptValues;
  for (SaveOp s : llvm::concat<SaveOp>(saves, checkpointSaves))
    if (!chosen.count(s)) {
      keptSave[s.getValue()] = s;
      keptValues.insert(s.getValue());
    }

  // Positions of the step's ops before any region is inserted (O(1) order
  // comparisons while insertions invalidate the block's op order).
  llvm::DenseMap<Operation *, int64_t> position;
  for (Operation &op : body)
    position[&op] = int64_t(position.size());

  int64_t flopsAdded = 0, bytesNoLongerSaved = 0, values = 0;
  OpBuilder b(fn.getContext());
  for (Group &g : groups) {
    // The cone: forward ops producing the group's values from block
    // arguments and kept saved values.
    llvm::SetVector<Operation *> cone;
    llvm::SetVector<Value> inputs;
    SmallVector<Value> groupValues;
    for (SaveOp s : g.saves)
      groupValues.push_back(s.getValue());
    if (failed(computeRecomputeCone(groupValues, keptValues, cone, inputs)))
      continue;
    // Selective recomputation recomputes cheap ops only: when the value's
    // producers include an op kind not listed (its input is not saved, so
    // a matmul or conv would run again), the value stays saved.
    if (policy == RecomputePolicy::Ops && llvm::any_of(cone, [&](Operation *op) {
          return !isa<ReshapeOp>(op) &&
                 !llvm::is_contained(ops, op->getName().stripDialect().str());
        }))
      continue;

    // Where: before the first restore of any group value.
    Operation *first = nullptr;
    for (SaveOp s : g.saves)
      for (Operation *u : s.getResult().getUsers())
        if (!first || position.lookup(u) < position.lookup(first))
          first = u;
    if (!first)
      continue;

    // Inputs as the region sees them: arguments directly, kept saved values
    // restored right before the region.
    b.setInsertionPoint(first);
    SmallVector<Value> operands;
    for (Value in : inputs) {
      if (isa<BlockArgument>(in))
        operands.push_back(in);
      else
        operands.push_back(RestoreOp::create(b, in.getLoc(), keptSave[in].getResult()));
    }
    SmallVector<Type> resultTypes;
    for (SaveOp s : g.saves)
      resultTypes.push_back(s.getValue().getType());
    auto region = RecomputeOp::create(b, g.saves.front().getLoc(), resultTypes, operands,
                                      b.getStringAttr(stringifyOption(policy)));
    Block *block = new Block();
    region.getBody().push_back(block);
    IRMapping map;
    for (Value in : inputs)
      map.map(in, block->addArgument(in.getType(), in.getLoc()));
    OpBuilder rb = OpBuilder::atBlockEnd(block);
    for (Operation *op : cone) {
      Operation *clone = rb.clone(*op, map);
      if (auto cost = dyn_cast<CostOpInterface>(clone))
        flopsAdded += std::max<int64_t>(0, cost.getFlops());
    }
    SmallVector<Value> yielded;
    for (SaveOp s : g.saves)
      yielded.push_back(map.lookup(s.getValue()));
    YieldOp::create(rb, region.getLoc(), yielded);

    // Replace the restores and drop the saves.
    for (auto [i, s] : llvm::enumerate(g.saves)) {
      for (Operation *u : llvm::make_early_inc_range(s.getResult().getUsers())) {
        auto restore = cast<RestoreOp>(u);
        restore.getResult().replaceAllUsesWith(region.getResult(i));
        restore.erase();
      }
      bytesNoLongerSaved += mlir::offload::detail::tensorBytes(s.getValue().getType());
      ++values;
      s.erase();
    }
  }
  // Checkpoints no region reads are not saved.
  int64_t checkpointsSaved = 0, checkpointBytes = 0;
  for (SaveOp s : checkpointSaves) {
    if (s.getResult().use_empty()) {
      s.erase();
      continue;
    }
    ++checkpointsSaved;
    checkpointBytes += mlir::offload::detail::tensorBytes(s.getValue().getType());
  }
  numRecomputed += values;
  numCheckpoints += checkpointsSaved;
  bytesFreed += bytesNoLongerSaved;
  int64_t regions = 0;
  for (Operation &op : body)
    regions += isa<RecomputeOp>(op) && cast<RecomputeOp>(op).getPolicy() == stringifyOption(policy);
  if (out)
    *out.stream() << llvm::format("recompute @%s (policy %s): %lld of %zu saved values "
                                 "recomputed in %zu regions, %lld bytes no longer "
                                 "saved, %lld FLOPs added\n",
                                 fn.getName().str().c_str(), stringifyOption(policy).str().c_str(),
                                 (long long)values, saves.size(), (size_t)regions,
                                 (long long)bytesNoLongerSaved, (long long)flopsAdded);
  if (out && !checkpointSaves.empty())
    *out.stream() << llvm::format("recompute @%s: %lld of %zu checkpoints read by a region "
                                 "and saved (%lld bytes)\n",
                                 fn.getName().str().c_str(), (long long)checkpointsSaved,
                                 checkpointSaves.size(), (long long)checkpointBytes);
  return values > 0;
}

namespace {
struct InlineRecomputePass
    : public offload::impl::InlineRecomputeBase<InlineRecomputePass> {
  void runOnOperation() override {
    getOperation().walk([](func::FuncOp fn) {
      if (!fn.isExternal())
        inlineRecomputeRegions(fn.getBody().front());
    });
  }
};
} // namespace
