//===- PlanMaterialize.cpp - Decisions built with the real mechanisms -----===//
//
// Part of offload. The planner owns no rewrite of its own: a plan of some
// decisions is the base step, copied into a scratch module of its own,
// marked (offload.recompute, offload.host_offload, offload.host_parameter)
// and rewritten by the mechanisms' passes with policy=marked; its memory
// plan is the real check of the search (Search.h).
//
//===----------------------------------------------------------------------===//

#include "PlanMemoryIR.h"

#include "offload/Dialect/Offload/Analysis/Timeline.h"
#include "offload/Dialect/Offload/IR/OffloadDialect.h"
#include "offload/Dialect/Offload/Transforms/Passes.h"
#include "offload/Dialect/Offload/Transforms/Prefetch.h"

#include "mlir/Pass/PassManager.h"

using namespace mlir;
using namespace mlir::offload;
using namespace mlir::offload::planning;
using ::offload::planner::Decision;

StepPlan::~StepPlan() {
  if (holder)
    holder.erase();
}

void StepPlan::replace(func::FuncOp replaced) {
  fn->moveBefore(replaced);
  replaced.erase();
  holder.erase();
  holder = nullptr;
}

/// The decisions a plan is built from, as a string: each saved
/// candidate's decision and recompute group, each parameter's decision, the
/// refetch mode.
static std::string decisionsKey(const ::offload::planner::PlanState &state,
                                ::offload::planner::Refetch refetch) {
  std::string key;
  llvm::raw_string_ostream os(key);
  for (const auto &c : state.saved) {
    os << char('0' + int(c.decision));
    if (c.decision == Decision::Recompute && c.group >= 0)
      os << c.group << ',';
  }
  os << '|';
  for (const auto &p : state.params)
    os << char('0' + int(p.decision));
  os << '|' << int(refetch);
  if (state.anyCheckpoint()) {
    os << '|';
    for (const auto &c : state.checkpoints)
      os << char('0' + int(c.saved));
  }
  return key;
}

llvm::FailureOr<std::unique_ptr<::offload::planner::CheckedPlan>>
StepChecker::build(const ::offload::planner::PlanState &state,
                   ::offload::planner::Refetch refetch) {
  std::string key = decisionsKey(state, refetch);
  if (auto it = cache.find(key); it != cache.end()) {
    ++reused;
    auto plan = std::make_unique<StepPlan>(ModuleOp(), func::FuncOp());
    plan->arenaBytes = it->second.arenaBytes;
    plan->peakBytes = it->second.peakBytes;
    plan->key = key;
    plan->decisions.emplace(state);
    plan->refetch = refetch;
    return std::unique_ptr<::offload::planner::CheckedPlan>(std::move(plan));
  }
  llvm::FailureOr<std::unique_ptr<StepPlan>> plan = buildStep(state, refetch);
  if (failed(plan))
    return failure();
  ++built;
  (*plan)->key = key;
  cache[key] = Figures{(*plan)->arenaBytes, (*plan)->peakBytes, std::nullopt};
  return std::unique_ptr<::offload::planner::CheckedPlan>(std::move(*plan));
}

LogicalResult StepChecker::ensureStep(StepPlan &plan) {
  if (plan.fn)
    return success();
  llvm::FailureOr<std::unique_ptr<StepPlan>> built = buildStep(*plan.decisions, plan.refetch);
  if (failed(built))
    return failure();
  ++this->built;
  plan.holder = (*built)->holder;
  plan.fn = (*built)->fn;
  (*built)->holder = nullptr;
  (*built)->fn = nullptr;
  return success();
}

llvm::FailureOr<std::unique_ptr<StepPlan>>
StepChecker::buildStep(const ::offload::planner::PlanState &state,
                       ::offload::planner::Refetch refetch) {
  OpBuilder topBuilder = OpBuilder::atBlockEnd(top.getBody());
  auto scratch = ModuleOp::create(topBuilder, base.getLoc());
  // The mechanisms price with the planner's own target (Target.h,
  // kTargetAttrName): one cost model for prediction and placement.
  scratch->setAttr(kTargetAttrName, targetSpecToAttr(scratch.getContext(), spec));
  OpBuilder b = OpBuilder::atBlockEnd(scratch.getBody());
  auto fn = cast<func::FuncOp>(b.clone(*base));
  // From here the scratch module is the plan's: erased with it.
  auto plan = std::make_unique<StepPlan>(scratch, fn);
  SmallVector<SaveOp> saves;
  for (Operation &op : fn.getBody().front())
    if (auto s = dyn_cast<SaveOp>(op))
      saves.push_back(s);
  bool anyRecompute = false, anyOffload = false, anyHost = false;
  for (auto [ci, c] : llvm::enumerate(state.saved))
    for (unsigned i : candidates.savesOf[ci]) {
      if (c.decision == Decision::Recompute) {
        saves[i]->setAttr(OffloadDialect::kRecomputeAttrName,
                          c.group >= 0 ? Attribute(b.getI64IntegerAttr(c.group))
                                       : Attribute(b.getUnitAttr()));
        anyRecompute = true;
      } else if (c.decision == Decision::Offload) {
        saves[i]->setAttr(kHostOffloadAttrName, b.getUnitAttr());
        anyOffload = true;
      }
    }
  // Checkpoints: their producers marked (a recompute region stops there;
  // the pass saves each result a region reads). The scratch step is a
  // clone, so the producer is at the base step's program point.
  if (anyRecompute && state.anyCheckpoint()) {
    SmallVector<Operation *> ops;
    for (Operation &op : fn.getBody().front())
      ops.push_back(&op);
    for (auto [k, c] : llvm::enumerate(state.checkpoints))
      if (c.saved)
        ops[size_t(problem.checkpoints[k].point)]->setAttr(OffloadDialect::kCheckpointAttrName,
                                                            b.getUnitAttr());
  }
  SmallVector<unsigned> hostArgs;
  for (auto [pi, p] : llvm::enumerate(state.params))
    if (p.decision == Decision::Host)
      hostArgs.push_back(unsigned(problem.params[pi].arg));
  setArgAttrs(fn, hostArgs, kHostParameterAttrName, b.getUnitAttr());
  anyHost = !hostArgs.empty();

  // The mechanisms, in the order they compose (host parameters last:
  // Passes.td), each pricing with the scratch module's target.
  OpPassManager pm(ModuleOp::getOperationName());
  if (anyRecompute) {
    RecomputeOptions o;
    o.policy = RecomputePolicy::Marked;
    pm.addPass(createRecompute(o));
  }
  if (anyOffload) {
    HostOffloadOptions o;
    o.policy = HostOffloadPolicy::Marked;
    o.waitDistance = waitDistance;
    pm.addPass(createHostOffload(o));
  }
  if (anyHost) {
    HostParametersOptions o;
    o.policy = HostParametersPolicy::Marked;
    o.refetch = refetch == ::offload::planner::Refetch::Always ? RefetchMode::Always
                                                               : RefetchMode::Auto;
    o.waitDistance = waitDistance;
    pm.addPass(createHostParameters(o));
  }
  if ((anyRecompute || anyOffload || anyHost) && failed(runPipeline(pm, scratch)))
    return failure();
  FailureOr<MemoryPlan> mp = computeMemoryPlanInPlace(fn);
  if (failed(mp))
    return failure();
  // The lowering puts the workspace above the arena, aligned.
  plan->arenaBytes = deviceBytesWithWorkspace(mp->deviceArenaBytes, spec.workspaceBytes);
  plan->peakBytes = mp->peakDeviceBytes;
  return plan;
}

::offload::planner::SimulatedTime
StepChecker::simulate(::offload::planner::CheckedPlan &checked) {
  auto &plan = static_cast<StepPlan &>(checked);
  Figures &figures = cache[plan.key];
  if (figures.time)
    return *figures.time;
  // A cached plan simulated for the first time: its step is built now (an
  // error there was already reported when the same decisions were built).
  if (failed(ensureStep(plan)))
    return {};
  Timeline tl = simulateTimeline(plan.step(), model);
  figures.time = ::offload::planner::SimulatedTime{tl.stepSeconds, tl.stallSeconds};
  return *figures.time;
}

::offload::planner::SimulatedTime
StepChecker::tuned(::offload::planner::CheckedPlan &checked) {
  auto &plan = static_cast<StepPlan &>(checked);
  if (plan.tuning)
    return plan.tunedTime;
  ::offload::planner::SimulatedTime time = simulate(plan);
  plan.tunedTime = time;
  if (failed(ensureStep(plan))) {
    plan.tuning = failure();
    return time;
  }
  int64_t tunedArena = plan.arenaBytes, tunedPeak = plan.peakBytes;
  FailureOr<PrefetchTuning> result = tunePrefetches(
      plan.step(), model,
      [&] {
        FailureOr<MemoryPlan> mp = computeMemoryPlanInPlace(plan.step());
        if (failed(mp))
          return false;
        int64_t arena = deviceBytesWithWorkspace(mp->deviceArenaBytes, spec.workspaceBytes);
        if (arena > problem.budgetBytes || mp->peakDeviceBytes > plan.peakBytes)
          return false;
        tunedArena = arena;
        tunedPeak = mp->peakDeviceBytes;
        return true;
      },
      options.prefetchTuningSweeps, options.prefetchTuningWorkPerOp);
  plan.tuning = result;
  if (succeeded(result) && result->moved) {
    plan.arenaBytes = tunedArena;
    plan.peakBytes = tunedPeak;
    Timeline t = simulateTimeline(plan.step(), model);
    plan.tunedTime = {t.stepSeconds, t.stallSeconds};
  }
  return plan.tunedTime;
}
