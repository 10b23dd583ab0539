//===- PlanProblemBuilder.cpp - A training step as a PlanProblem ----------===//
//
// Part of offload. Reads the planner's candidates and their static facts
// off a training step (with early optimizer updates) and its memory plan:
// each saved device buffer with its last forward and first backward use
// and where offloading frees it, each parameter that may move to the host
// with the ranges that frees, and their copy and compute seconds on the
// target. The release point, the prefetch point and the keep-through rule
// are the mechanisms' own (Prefetch.h, HostOffload.h, HostParameters.h).
// Also the recompute cones of the candidates on the step.
//
//===----------------------------------------------------------------------===//

#include "PlanMemoryIR.h"

#include "offload/Dialect/Offload/Analysis/Timeline.h"
#include "offload/Dialect/Offload/IR/OffloadDialect.h"
#include "offload/Dialect/Offload/Transforms/Autodiff.h"
#include "offload/Dialect/Offload/Transforms/Prefetch.h"
#include "offload/Dialect/Offload/Transforms/Recompute.h"

#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/StringMap.h"

using namespace mlir;
using namespace mlir::offload;
using namespace mlir::offload::planning;
using ::offload::planner::Freed;
using ::offload::planner::ParamFacts;
using ::offload::planner::SavedFacts;

//===----------------------------------------------------------------------===//
// Recompute cones
//===----------------------------------------------------------------------===//

StepConeModel::StepConeModel(const StepCandidates &candidates, const TargetModel &model,
                             size_t maxConeOps)
    : candidates(candidates), model(model), maxConeOps(maxConeOps),
      readBy(candidates.valuesOf.size()), passedBy(candidates.valuesOf.size()),
      recomputed(candidates.valuesOf.size(), 0),
      readByCheckpoint(candidates.checkpointValues.size()),
      passedByCheckpoint(candidates.checkpointValues.size()),
      checkpointSaved(candidates.checkpointValues.size(), 0) {
  for (SaveOp s : candidates.saves)
    available.insert(s.getValue());
  for (auto [i, values] : llvm::enumerate(candidates.valuesOf))
    for (Value v : values)
      candidateOf[v] = unsigned(i);
  for (auto [k, v] : llvm::enumerate(candidates.checkpointValues))
    checkpointOf[v] = unsigned(k);
}

void StepConeModel::setCheckpoint(unsigned k, bool saved) {
  if (checkpointSaved[k] == char(saved))
    return;
  checkpointSaved[k] = char(saved);
  Value v = candidates.checkpointValues[k];
  if (saved) {
    available.insert(v);
    drop(passedByCheckpoint[k]); // their cones now stop at it
    drop(tooLong);               // and may fit now
  } else {
    available.erase(v);
    drop(readByCheckpoint[k]); // their cones now go on through it
  }
}

void StepConeModel::drop(SmallVectorImpl<unsigned> &dependents) {
  for (unsigned j : dependents)
    memo.erase(j);
  dependents.clear();
}

void StepConeModel::setRecomputed(unsigned i, bool isRecomputed) {
  if (recomputed[i] == char(isRecomputed))
    return;
  recomputed[i] = char(isRecomputed);
  for (Value v : candidates.valuesOf[i])
    if (isRecomputed)
      available.erase(v);
    else
      available.insert(v);
  if (isRecomputed) {
    drop(readBy[i]); // their cones now go on through i
  } else {
    drop(passedBy[i]); // their cones now stop at i
    drop(tooLong);     // and may fit now
  }
}

std::optional<Cone> StepConeModel::coneOf(unsigned i) {
  if (auto it = memo.find(i); it != memo.end())
    return it->second;
  std::optional<Cone> cone = walk(i);
  if (!cone) {
    tooLong.push_back(i);
  } else {
    for (unsigned c : cone->reads)
      readBy[c].push_back(i);
    for (unsigned c : cone->through)
      passedBy[c].push_back(i);
    for (unsigned k : cone->checkpointsRead)
      readByCheckpoint[k].push_back(i);
    for (unsigned k : cone->checkpointsThrough)
      passedByCheckpoint[k].push_back(i);
  }
  memo[i] = cone;
  return cone;
}

/// The most bytes of the cone's intermediates (results not in `own`) live
/// at once while it runs in order: each lives from its op to its last use
/// inside the cone, as the memory plan frees it. (The sum of every
/// intermediate's bytes made a recompute chained through k others look k
/// values larger than the real plan finds; on the gpt example at 60% of its
/// arena that phantom peak put the token embedding on the host: +253%.)
static int64_t coneTransientPeak(const llvm::SetVector<Operation *> &cone, ArrayRef<Value> own) {
  llvm::DenseMap<Operation *, size_t> index;
  for (auto [k, op] : llvm::enumerate(cone))
    index[op] = k;
  SmallVector<size_t> lastUse(cone.size());
  for (auto [k, op] : llvm::enumerate(cone)) {
    lastUse[k] = k;
    for (Value operand : op->getOperands())
      if (Operation *def = operand.getDefiningOp())
        if (auto it = index.find(def); it != index.end())
          lastUse[it->second] = k;
  }
  auto bytesOf = [&](Operation *op) {
    int64_t b = 0;
    for (Value res : op->getResults())
      if (!llvm::is_contained(own, res))
        b += std::max<int64_t>(0, mlir::offload::detail::tensorBytes(res.getType()));
    return b;
  };
  SmallVector<int64_t> freedAfter(cone.size(), 0);
  for (auto [k, op] : llvm::enumerate(cone))
    freedAfter[lastUse[k]] += bytesOf(op);
  int64_t live = 0, peak = 0;
  for (auto [k, op] : llvm::enumerate(cone)) {
    live += bytesOf(op);
    peak = std::max(peak, live);
    live -= freedAfter[k];
  }
  return peak;
}

std::optional<Cone> StepConeModel::coneWithOps(unsigned i) {
  if (opIndex.empty() && !candidates.saves.empty()) {
    int64_t k = 0;
    for (Operation &op : *candidates.saves.front()->getBlock())
      opIndex[&op] = k++;
  }
  return walk(i, /*withOps=*/true);
}

std::optional<Cone> StepConeModel::walk(unsigned i, bool withOps) {
  ArrayRef<Value> values = candidates.valuesOf[i];
  // The candidate's own values are what the cone produces, not inputs.
  SmallVector<Value> own;
  for (Value v : values)
    if (available.erase(v))
      own.push_back(v);
  llvm::SetVector<Operation *> cone;
  llvm::SetVector<Value> inputs;
  LogicalResult found = computeRecomputeCone(values, available, cone, inputs, maxConeOps);
  available.insert(own.begin(), own.end());
  if (failed(found))
    return std::nullopt;
  Cone r;
  r.numOps = cone.size();
  for (Operation *op : cone) {
    double seconds = model.opSeconds(op);
    r.seconds += seconds;
    if (withOps) {
      Operation *top = op;
      while (top && !opIndex.count(top))
        top = top->getParentOp();
      r.ops.push_back({top ? opIndex.lookup(top) : -1 - int64_t(r.ops.size()), seconds, {}});
    }
  }
  if (withOps && !checkpointOf.empty()) {
    // The checkpoint candidates downstream of each op (the cone is in
    // post-order: an op's users in the cone come after it).
    llvm::DenseMap<Operation *, size_t> at;
    for (auto [k, op] : llvm::enumerate(cone))
      at[op] = k;
    for (size_t k = cone.size(); k-- > 0;) {
      Operation *op = cone[k];
      llvm::SmallVector<unsigned, 2> &set = r.ops[k].checkpoints;
      for (Value res : op->getResults()) {
        if (auto it = checkpointOf.find(res); it != checkpointOf.end())
          set.push_back(it->second);
        for (Operation *user : res.getUsers())
          if (auto u = at.find(user); u != at.end() && u->second > k)
            llvm::append_range(set, r.ops[u->second].checkpoints);
      }
      llvm::sort(set);
      set.erase(std::unique(set.begin(), set.end()), set.end());
    }
  }
  r.transientBytes = coneTransientPeak(cone, values);
  for (Value in : inputs)
    if (auto it = candidateOf.find(in);
        it != candidateOf.end() && !llvm::is_contained(r.reads, it->second))
      r.reads.push_back(it->second);
  for (Operation *op : cone)
    for (Value res : op->getResults())
      if (auto it = candidateOf.find(res);
          it != candidateOf.end() && !llvm::is_contained(values, res) &&
          !llvm::is_contained(r.through, it->second))
        r.through.push_back(it->second);
  if (!checkpointOf.empty()) {
    for (Value in : inputs)
      if (auto it = checkpointOf.find(in); it != checkpointOf.end())
        r.checkpointsRead.push_back(it->second);
    for (Operation *op : cone)
      for (Value res : op->getResults())
        if (auto it = checkpointOf.find(res); it != checkpointOf.end())
          r.checkpointsThrough.push_back(it->second);
  }
  return r;
}

//===----------------------------------------------------------------------===//
// The problem
//===----------------------------------------------------------------------===//

namespace {

/// Program points of the base step and the estimated seconds before each.
struct Points {
  Block *body;
  llvm::DenseMap<Operation *, int64_t> point;
  SmallVector<Operation *> ops;
  /// secondsBefore[i]: the estimated seconds of the ops before point i.
  SmallVector<double> secondsBefore;
  int64_t forwardPoint = 0, backwardPoint = 0;
  /// Gradient accumulation: the point of each micro-batch's first
  /// backward-or-later marker, in order (one entry for one micro-batch), and
  /// the compute seconds of all forward phases.
  SmallVector<int64_t> backwardPoints;
  double forwardSeconds = 0;
  int64_t numMicroBatches = 1;

  Points(func::FuncOp base, const TargetModel &model) : body(&base.getBody().front()) {
    for (Operation &op : *body) {
      point[&op] = int64_t(ops.size());
      ops.push_back(&op);
    }
    secondsBefore.assign(ops.size() + 1, 0);
    for (size_t i = 0; i < ops.size(); ++i)
      secondsBefore[i + 1] = secondsBefore[i] + model.opSeconds(ops[i]);
    for (Operation *op : ops)
      if (auto mk = dyn_cast<PhaseOp>(op); mk && mk.getPhase() != Phase::forward) {
        backwardPoint = point[op];
        break;
      }
    for (Operation *op : ops)
      if (auto mk = dyn_cast<PhaseOp>(op); mk && mk.getPhase() == Phase::forward) {
        forwardPoint = point[op];
        break;
      }
    bool inForward = true;
    for (size_t i = 0; i < ops.size(); ++i) {
      if (auto mk = dyn_cast<PhaseOp>(ops[i])) {
        bool forward = mk.getPhase() == Phase::forward;
        if (inForward && !forward)
          backwardPoints.push_back(int64_t(i));
        inForward = forward;
        numMicroBatches = std::max(numMicroBatches, mk.getMicroBatchIndex() + 1);
      }
      if (inForward)
        forwardSeconds += secondsBefore[i + 1] - secondsBefore[i];
    }
    if (backwardPoints.empty())
      backwardPoints.push_back(backwardPoint);
  }
  /// The backward marker that ends the forward phase of point `p` (its
  /// micro-batch's; the step's backward marker for one micro-batch).
  int64_t backwardPointAfter(int64_t p) const {
    auto it = llvm::upper_bound(backwardPoints, p);
    return it == backwardPoints.end() ? backwardPoints.back() : *it;
  }
  /// The top-level op's point of `user` (-1 outside the body).
  int64_t topPoint(Operation *user) const {
    Operation *t = body->findAncestorOpInBlock(*user);
    return t ? point.lookup(t) : -1;
  }
  /// The point at which a copy of `seconds` issued before `use` finishes in
  /// time: the mechanism's rule (latestCoveringPoint, Prefetch.h) over the
  /// points in [floor, use], with the link free (the queue behind earlier
  /// copies is the mechanism's; each check builds it).
  int64_t prefetchPoint(int64_t use, double seconds, int64_t floor) const {
    return latestCoveringPoint([&](int64_t p) { return secondsBefore[size_t(p)]; }, floor, use,
                               secondsBefore[size_t(use)], seconds);
  }
  double between(int64_t from, int64_t to) const { return secondsBefore[to] - secondsBefore[from]; }
  /// The estimated compute seconds before point `p` (clamped to the step).
  double at(int64_t p) const {
    return secondsBefore[size_t(std::clamp<int64_t>(p, 0, int64_t(ops.size())))];
  }
};

/// The saved candidates: one per device buffer of saved values.
void addSavedCandidates(const ProblemInputs &in, const Points &pts, PlanProblem &problem,
                        StepCandidates &candidates) {
  const MemoryPlan &mp = *in.baseMp;
  const TargetModel &model = *in.model;
  SmallVector<SaveOp> &saves = candidates.saves;
  for (Operation &op : *pts.body)
    if (auto s = dyn_cast<SaveOp>(op))
      saves.push_back(s);
  struct Pending {
    SavedFacts facts;
    SmallVector<unsigned> saves;
    SmallVector<Value> values;
  };
  SmallVector<Pending, 0> pending;
  llvm::MapVector<unsigned, unsigned> candidateOfBuffer;
  for (auto [i, s] : llvm::enumerate(saves)) {
    if (s.getResult().use_empty())
      continue;
    unsigned buf = mp.bufferOf.lookup(s.getValue());
    auto [it, inserted] = candidateOfBuffer.try_emplace(buf, pending.size());
    if (inserted)
      pending.emplace_back();
    Pending &c = pending[it->second];
    c.saves.push_back(unsigned(i));
    c.values.push_back(s.getValue());
    c.facts.copyBytes += mlir::offload::detail::tensorBytes(s.getValue().getType());
  }
  for (auto [buf, ci] : candidateOfBuffer) {
    Pending &p = pending[ci];
    SavedFacts &c = p.facts;
    const PlannedBuffer &pb = mp.buffers[buf];
    if (pb.persistent || pb.space != MemorySpace::Device)
      continue;
    c.bytes = pb.bytes;
    c.numSaves = unsigned(p.saves.size());
    Operation *producer = p.values.front().getDefiningOp();
    c.name = (producer ? producer->getName().stripDialect().str() : std::string("arg")) + " " +
             getLayerName(producer ? producer->getLoc() : saves[p.saves.front()].getLoc());
    // Last forward use of the buffer, first backward use of a restore.
    c.lastForward = pts.point.lookup(saves[p.saves.front()]);
    // Its micro-batch's backward (the step's with one micro-batch).
    int64_t backwardPoint = pts.backwardPointAfter(c.lastForward);
    Operation *backwardOp = pts.ops[backwardPoint];
    for (Value v : pb.values)
      for (Operation *u : v.getUsers())
        if (int64_t q = pts.topPoint(u); q >= 0 && q < backwardPoint)
          c.lastForward = std::max(c.lastForward, q);
    c.firstBackward = INT64_MAX;
    for (unsigned i : p.saves)
      for (Operation *u : saves[i].getResult().getUsers())
        c.firstBackward = std::min(c.firstBackward, pts.topPoint(u));
    // Offload: the device copy is released `waitDistance` compute ops after
    // the last forward use, and prefetched in time for the first backward
    // use (Prefetch.h).
    Operation *release = advanceComputeOps(pts.ops[c.lastForward], in.waitDistance, backwardOp);
    int64_t releasePoint = release ? pts.point.lookup(release) : backwardPoint;
    c.toHostSeconds = model.copyToHostSeconds(c.copyBytes);
    c.toDeviceSeconds = model.copySeconds(c.copyBytes);
    int64_t fetch =
        pts.prefetchPoint(c.firstBackward, c.toDeviceSeconds, backwardPoint + 1);
    c.offloadFreed = {releasePoint, fetch - 1, c.bytes};
    // The part of the prefetch the compute between the start of backward
    // and the first use cannot hide, and the part of the copy to the host
    // the compute before its release cannot hide (compute waits for the
    // copy there, HostOffload.cpp: a softmax output of the gpt example,
    // used last just before forward ends, was priced at 0.4% of the step
    // without it and cost 21% in the simulator).
    c.prefetchNotHidden =
        std::max(0.0, c.toDeviceSeconds - pts.between(backwardPoint, c.firstBackward));
    c.releaseNotHidden =
        std::max(0.0, c.toHostSeconds - pts.between(c.lastForward + 1, c.offloadFreed.lo));
    // The copies' times on their links (the planner's queues, State.h): the
    // copy to the host from right after the last forward use to the release,
    // the prefetch from its prefetch point (placePrefetches issues each copy
    // as late as it covers its use, Prefetch.h; earlier ones queue ahead of
    // it on the link, which the queue models) to the first backward use.
    // With gradient accumulation the phases interleave and the copies may
    // use any compute of their phase.
    if (pts.numMicroBatches == 1) {
      c.toHostIssue = pts.at(c.lastForward + 1);
      c.toHostDue = pts.at(c.offloadFreed.lo);
      c.toDeviceIssue = pts.at(fetch);
      c.toDeviceDue = pts.at(c.firstBackward);
    }
    // Recompute: every value of the buffer must be recomputable.
    c.recomputable = llvm::all_of(p.values, [](Value v) {
      Operation *def = v.getDefiningOp();
      return def && isRecomputable(def);
    });
  }
  // Candidates that can free nothing are dropped.
  llvm::erase_if(pending, [](const Pending &c) { return c.facts.bytes == 0; });
  // Names are unique: where several candidates share one (two saved values
  // of one layer), each gets the program point of its first save, so that a
  // decisions file of another step is refused rather than matched by name.
  llvm::StringMap<unsigned> uses;
  for (const Pending &c : pending)
    ++uses[c.facts.name];
  for (Pending &c : pending) {
    if (uses.lookup(c.facts.name) > 1)
      c.facts.name += " @" + std::to_string(pts.point.lookup(saves[c.saves.front()]));
    problem.saved.push_back(std::move(c.facts));
    candidates.savesOf.push_back(std::move(c.saves));
    candidates.valuesOf.push_back(std::move(c.values));
  }
}

/// The checkpoint candidates: forward values of recomputable producers
/// that no save keeps (and that share no device buffer with one), which a
/// recompute cone may stop at once saved (--offload-recompute's
/// offload.checkpoint). Not with gradient accumulation (the forward phases
/// interleave with backward ones).
void addCheckpointCandidates(const ProblemInputs &in, const Points &pts, PlanProblem &problem,
                             StepCandidates &candidates) {
  if (!in.checkpoints || pts.numMicroBatches > 1 ||
      llvm::none_of(problem.saved, [](const SavedFacts &c) { return c.recomputable; }))
    return;
  const MemoryPlan &mp = *in.baseMp;
  llvm::DenseSet<Value> saved;
  llvm::DenseSet<unsigned> savedBuffers;
  for (SaveOp s : candidates.saves) {
    saved.insert(s.getValue());
    if (auto it = mp.bufferOf.find(s.getValue()); it != mp.bufferOf.end())
      savedBuffers.insert(it->second);
  }
  llvm::StringMap<unsigned> uses;
  size_t first = problem.checkpoints.size();
  for (int64_t q = 0; q < pts.backwardPoint; ++q) {
    Operation *op = pts.ops[q];
    if (!isRecomputable(op))
      continue;
    for (OpResult r : op->getResults()) {
      if (!isa<RankedTensorType>(r.getType()) || saved.contains(r) || r.use_empty())
        continue;
      auto it = mp.bufferOf.find(r);
      if (it == mp.bufferOf.end() || savedBuffers.contains(it->second))
        continue;
      const PlannedBuffer &pb = mp.buffers[it->second];
      if (pb.persistent || pb.space != MemorySpace::Device)
        continue;
      ::offload::planner::CheckpointFacts c;
      c.bytes = pb.bytes;
      c.point = q;
      c.lastForward = q;
      for (Operation *u : r.getUsers())
        if (int64_t t = pts.topPoint(u); t >= 0 && t < pts.backwardPoint)
          c.lastForward = std::max(c.lastForward, t);
      c.producerSeconds = in.model->opSeconds(op);
      c.name = op->getName().stripDialect().str() + " " + getLayerName(op->getLoc());
      if (op->getNumResults() > 1)
        c.name += "#" + std::to_string(r.getResultNumber());
      ++uses[c.name];
      problem.checkpoints.push_back(std::move(c));
      candidates.checkpointValues.push_back(r);
    }
  }
  for (size_t k = first; k < problem.checkpoints.size(); ++k)
    if (uses.lookup(problem.checkpoints[k].name) > 1)
      problem.checkpoints[k].name += " @" + std::to_string(problem.checkpoints[k].point);
}

/// The parameter candidates: parameters not returned, with an optimizer
/// state of their own.
void addParamCandidates(const ProblemInputs &in, const Points &pts, PlanProblem &problem) {
  // Gradient accumulation: a parameter is read by every micro-batch's
  // forward and backward, and its gradient accumulator lives across them;
  // the host-parameter mechanism (HostParameters.cpp) moves one forward and
  // one backward range. Parameters stay on the device.
  if (pts.numMicroBatches > 1)
    return;
  const MemoryPlan &mp = *in.baseMp;
  const TargetModel &model = *in.model;
  func::FuncOp base = in.base;
  Block &bb = *pts.body;
  Operation *ret = bb.getTerminator();
  int64_t lastPoint = int64_t(pts.ops.size()) - 1;
  for (BlockArgument arg : bb.getArguments()) {
    unsigned i = arg.getArgNumber();
    if (getArgRole(base, i) != Role::parameter || !isa<RankedTensorType>(arg.getType()))
      continue;
    ParamFacts p;
    p.arg = i;
    auto nameAttr = base.getArgAttrOfType<StringAttr>(i, OffloadDialect::kNameAttrName);
    p.name = nameAttr ? nameAttr.getValue().str() : ("arg" + std::to_string(i));
    p.bytes = mlir::offload::detail::tensorBytes(arg.getType());
    Operation *update = nullptr;
    int64_t firstFwd = -1, lastFwd = -1, firstBwd = -1, lastBwd = -1;
    bool returned = false;
    for (OpOperand &use : arg.getUses()) {
      Operation *t = bb.findAncestorOpInBlock(*use.getOwner());
      if (t == ret) {
        returned = true;
      } else if (isa<SgdUpdateOp, AdamWUpdateOp>(t) && use.getOperandNumber() == 0) {
        update = t;
      } else {
        int64_t q = pts.point.lookup(t);
        if (q < pts.backwardPoint) {
          firstFwd = firstFwd < 0 ? q : std::min(firstFwd, q);
          lastFwd = std::max(lastFwd, q);
        } else {
          firstBwd = firstBwd < 0 ? q : std::min(firstBwd, q);
          lastBwd = std::max(lastBwd, q);
        }
      }
    }
    if (returned)
      continue; // --offload-host-parameters keeps it (and says so)
    bool ownState = true;
    if (update)
      for (Value v : getUpdateOperands(update).state) {
        auto s = dyn_cast<BlockArgument>(v);
        ownState &= s && s.hasOneUse();
        if (s)
          p.stateBytes += mlir::offload::detail::tensorBytes(s.getType());
      }
    if (!ownState)
      continue;
    double copy = model.copySeconds(p.bytes);
    // Device ranges after the move (HostParameters.cpp): prefetched for its
    // forward uses, again for backward unless the gap is short.
    SmallVector<std::pair<int64_t, int64_t>> onDevice;
    bool keepThrough = firstFwd >= 0 && firstBwd >= 0 &&
                       keepParameterThrough(pts.between(lastFwd + 1, firstBwd), copy);
    if (firstFwd >= 0) {
      int64_t pf = pts.prefetchPoint(firstFwd, copy, pts.forwardPoint + 1);
      onDevice.push_back({pf, keepThrough ? lastBwd : lastFwd});
      p.toDeviceSeconds += copy;
      p.toDeviceForwardSeconds = copy;
      p.forwardFetchIssue = pts.at(pf);
      p.forwardFetchDue = pts.at(firstFwd);
    }
    if (firstBwd >= 0 && !keepThrough) {
      int64_t pb = pts.prefetchPoint(firstBwd, copy, pts.backwardPoint + 1);
      onDevice.push_back({pb, lastBwd});
      p.toDeviceSeconds += copy;
      p.backwardFetchIssue = pts.at(pb);
      p.backwardFetchDue = pts.at(firstBwd);
    }
    int64_t cursor = 0;
    for (auto [lo, hi] : onDevice) {
      if (lo > cursor)
        p.freed.push_back({cursor, lo - 1, p.bytes});
      cursor = std::max(cursor, hi + 1);
    }
    if (cursor <= lastPoint)
      p.freed.push_back({cursor, lastPoint, p.bytes});
    if (p.stateBytes)
      p.freed.push_back({0, lastPoint, p.stateBytes});
    // The gradient leaves the device `waitDistance` compute ops after it is
    // computed.
    if (update) {
      Value g = update->getOperand(1);
      auto it = mp.bufferOf.find(g);
      if (it != mp.bufferOf.end() && g.getDefiningOp()) {
        const PlannedBuffer &gb = mp.buffers[it->second];
        Operation *def = bb.findAncestorOpInBlock(*g.getDefiningOp());
        Operation *release = advanceComputeOps(def, in.waitDistance, update);
        int64_t rp = release ? pts.point.lookup(release) : pts.point.lookup(update);
        if (!gb.persistent)
          p.freed.push_back({rp, gb.end, gb.bytes});
        p.toHostSeconds = model.copyToHostSeconds(gb.bytes);
        p.gradientIssue = pts.at(pts.point.lookup(def) + 1);
        p.gradientDue = pts.at(rp);
      }
      // The update runs on the host: its bytes at the host's rate.
      if (auto cost = dyn_cast<CostOpInterface>(update))
        p.hostUpdateSeconds = double(cost.getBytesRead() + cost.getBytesWritten()) /
                              in.spec->hostUpdateBytesPerSecond;
    }
    problem.params.push_back(std::move(p));
  }
}

} // namespace

PlanProblem mlir::offload::planning::buildPlanProblem(const ProblemInputs &in,
                                                      StepCandidates &candidates) {
  PlanProblem problem;
  const TargetSpec &spec = *in.spec;
  func::FuncOp base = in.base;
  problem.step = base.getName().str();
  problem.target = spec.name;
  problem.budgetBytes = in.budgetBytes;
  problem.aimBytes = in.budgetBytes - spec.workspaceBytes;
  problem.baseLive.assign(in.baseMp->liveDeviceBytes.begin(), in.baseMp->liveDeviceBytes.end());
  problem.baseArenaBytes =
      deviceBytesWithWorkspace(in.baseMp->deviceArenaBytes, spec.workspaceBytes);
  problem.arenaAlignment = kArenaAlignment;
  problem.basePackedBytes = in.baseMp->deviceArenaBytes;
  problem.movedUpdates = in.movedUpdates;
  Points pts(base, *in.model);
  problem.opNames.reserve(pts.ops.size());
  for (Operation *op : pts.ops)
    problem.opNames.push_back(op->getName().getStringRef().str());
  problem.computeSeconds = pts.secondsBefore.back();
  problem.forwardSeconds = pts.numMicroBatches > 1 ? pts.forwardSeconds
                                                   : pts.secondsBefore[pts.backwardPoint];
  problem.backwardSeconds = problem.computeSeconds - problem.forwardSeconds;
  addSavedCandidates(in, pts, problem, candidates);
  problem.numSaves = unsigned(candidates.saves.size());
  addCheckpointCandidates(in, pts, problem, candidates);
  addParamCandidates(in, pts, problem);
  return problem;
}

void mlir::offload::planning::addStandaloneCones(PlanProblem &problem, StepConeModel &cones) {
  for (auto [i, c] : llvm::enumerate(problem.saved))
    if (c.recomputable)
      c.standaloneCone = cones.coneWithOps(unsigned(i));
  // With every checkpoint candidate saved: the fewest ops a region runs.
  for (unsigned k = 0; k < problem.checkpoints.size(); ++k)
    cones.setCheckpoint(k, true);
  for (auto [i, c] : llvm::enumerate(problem.saved))
    if (c.recomputable && c.standaloneCone)
      if (std::optional<Cone> minimal = cones.coneWithOps(unsigned(i)))
        c.minimalConeOps = std::move(minimal->ops);
  for (unsigned k = 0; k < problem.checkpoints.size(); ++k)
    cones.setCheckpoint(k, false);
}
