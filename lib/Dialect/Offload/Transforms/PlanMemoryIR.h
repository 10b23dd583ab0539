//===- PlanMemoryIR.h - The planner's seam to IR ----------------*- C++ -*-===//
//
// Part of offload. Private to --offload-plan-memory: building the IR-free
// PlanProblem from a training step (PlanProblemBuilder.cpp), the recompute
// cones of its candidates on that step, and the checker that builds a plan
// of some decisions with the real mechanisms on a scratch copy and measures
// it with the real memory plan (PlanMaterialize.cpp).
//
//===----------------------------------------------------------------------===//

#ifndef OFFLOAD_LIB_TRANSFORMS_PLANMEMORYIR_H
#define OFFLOAD_LIB_TRANSFORMS_PLANMEMORYIR_H

#include "offload/Dialect/Offload/Analysis/MemoryPlan.h"
#include "offload/Dialect/Offload/Analysis/Target.h"
#include "offload/Dialect/Offload/IR/OffloadOps.h"
#include "offload/Dialect/Offload/Transforms/Prefetch.h"
#include "offload/Planner/Search.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"

#include <functional>
#include <map>
#include <optional>

namespace mlir::offload::planning {

using ::offload::planner::Cone;
using ::offload::planner::PlanProblem;

/// The IR behind a problem's candidates, in the order of its saved list.
struct StepCandidates {
  SmallVector<SaveOp> saves;                 // every save op of the step
  SmallVector<SmallVector<unsigned>> savesOf; // per saved candidate
  SmallVector<SmallVector<Value>> valuesOf;   // its saved values
  /// Per checkpoint candidate (PlanProblem::checkpoints): its value.
  SmallVector<Value> checkpointValues;
};

/// What building a problem needs besides the step.
struct ProblemInputs {
  func::FuncOp base;       // the step with early updates, in a scratch module
  const MemoryPlan *baseMp; // its memory plan
  const TargetSpec *spec;
  const TargetModel *model;
  int64_t budgetBytes = 0;
  unsigned waitDistance = 1; // compute ops between a copy and its wait
  unsigned movedUpdates = 0;
  /// Offer checkpoint candidates (PlanProblem::checkpoints).
  bool checkpoints = true;
};

/// Recompute cones on the step (computeRecomputeCone, Recompute.h) against
/// the saved values still available as checkpoints.
///
/// Cones are memoized: a cone depends on the decisions only through the
/// candidates it reads (an input it stops at; recomputing one extends the
/// cone) and those it passes through (recomputed ones it computes again;
/// keeping one again cuts the cone there), so setRecomputed drops exactly
/// those cones, and every cone that hit maxConeOps when a candidate is kept
/// again. The greedy prices every recomputable candidate live at each peak,
/// each round; at a budget it cannot reach (the smallest-arena search at
/// budget=1) that re-walked the same cones thousands of times: ViT-B/16 on
/// h100-sxm took minutes, two thirds of them in these walks.
class StepConeModel : public ::offload::planner::ConeModel {
public:
  StepConeModel(const StepCandidates &candidates, const TargetModel &model, size_t maxConeOps);
  std::optional<Cone> coneOf(unsigned i) override;
  /// Candidate i's cone against the current availability, not memoized,
  /// with its ops (Cone::ops).
  std::optional<Cone> coneWithOps(unsigned i);
  void setRecomputed(unsigned i, bool recomputed) override;
  void setCheckpoint(unsigned k, bool saved) override;

private:
  std::optional<Cone> walk(unsigned i, bool withOps = false);
  void drop(SmallVectorImpl<unsigned> &dependents);

  const StepCandidates &candidates;
  const TargetModel &model;
  size_t maxConeOps;
  llvm::DenseSet<Value> available;
  llvm::DenseMap<Value, unsigned> candidateOf;
  /// The memo: each candidate's cone (nullopt: past maxConeOps) while valid.
  llvm::DenseMap<unsigned, std::optional<Cone>> memo;
  /// Per candidate, the memoized cones that read it / pass through it
  /// (may hold cones dropped since: dropping one again is harmless).
  std::vector<SmallVector<unsigned, 4>> readBy, passedBy;
  /// Memoized cones past maxConeOps.
  SmallVector<unsigned> tooLong;
  /// setRecomputed's state, so that a repeated call (ConeModel::sync) keeps
  /// the memo.
  std::vector<char> recomputed;
  /// The checkpoint candidates: by value; per checkpoint, the memoized
  /// cones that read it / pass through it; setCheckpoint's state.
  llvm::DenseMap<Value, unsigned> checkpointOf;
  std::vector<SmallVector<unsigned, 4>> readByCheckpoint, passedByCheckpoint;
  std::vector<char> checkpointSaved;
  /// Position of each op in the step's body (coneWithOps), built once.
  llvm::DenseMap<Operation *, int64_t> opIndex;
};

/// Builds the problem of `in.base` (its candidates into `candidates`).
PlanProblem buildPlanProblem(const ProblemInputs &in, StepCandidates &candidates);
/// Each recomputable candidate's cone with every other saved value kept
/// (what the problem= file states), from `cones` before any decision.
void addStandaloneCones(PlanProblem &problem, StepConeModel &cones);

/// A plan of some decisions: the rewritten step alone in a scratch module,
/// erased with it unless taken.
class StepPlan : public ::offload::planner::CheckedPlan {
public:
  StepPlan(ModuleOp holder, func::FuncOp fn) : holder(holder), fn(fn) {}
  ~StepPlan() override;
  StepPlan(const StepPlan &) = delete;
  StepPlan &operator=(const StepPlan &) = delete;
  /// The planned step; null for a plan whose figures came from the
  /// checker's cache until StepChecker::ensureStep builds it.
  func::FuncOp step() const { return fn; }
  /// Moves the planned step in place of `replaced` (erased), and erases
  /// the scratch module.
  void replace(func::FuncOp replaced);
  /// Its prefetch tuning, once StepChecker::tuned ran it (what moved, the
  /// step before and after); failure when the tuning failed (an error
  /// reported).
  std::optional<FailureOr<PrefetchTuning>> tuning;
  /// The simulated step after the tuning.
  ::offload::planner::SimulatedTime tunedTime;

private:
  friend class StepChecker;
  ModuleOp holder;
  func::FuncOp fn;
  /// The decisions it was built from (StepChecker's cache key), and, for a
  /// cached plan, the decisions themselves to build it from when needed.
  std::string key;
  std::optional<::offload::planner::PlanState> decisions;
  ::offload::planner::Refetch refetch = ::offload::planner::Refetch::Auto;
};

/// Builds plans by marking a copy of the base step and running the
/// mechanisms' passes on it (recompute, host offload, host parameters, in
/// the order they compose; Passes.td), then its memory plan.
class StepChecker : public ::offload::planner::PlanChecker {
public:
  /// Runs a pipeline nested in the planner's pass (Pass::runPipeline).
  using PipelineRunner = std::function<LogicalResult(OpPassManager &, Operation *)>;
  StepChecker(ModuleOp top, func::FuncOp base, const StepCandidates &candidates,
              const PlanProblem &problem, const TargetSpec &spec, const TargetModel &model,
              const ::offload::planner::PlannerOptions &options, unsigned waitDistance,
              PipelineRunner runPipeline)
      : top(top), base(base), candidates(candidates), problem(problem), spec(spec), model(model),
        options(options), waitDistance(waitDistance), runPipeline(std::move(runPipeline)) {}
  llvm::FailureOr<std::unique_ptr<::offload::planner::CheckedPlan>>
  build(const ::offload::planner::PlanState &state,
        ::offload::planner::Refetch refetch) override;
  ::offload::planner::SimulatedTime simulate(::offload::planner::CheckedPlan &plan) override;
  /// The plan's prefetches tuned against the simulation (tunePrefetches,
  /// the mechanism's own rule), kept only while the arena fits the budget
  /// and the peak does not rise; the plan's step, arena and peak follow
  /// what is kept, and `plan.tuning` says what moved. Once per plan.
  ::offload::planner::SimulatedTime tuned(::offload::planner::CheckedPlan &plan) override;
  /// Builds the step of a plan whose figures came from the cache.
  LogicalResult ensureStep(StepPlan &plan);
  /// Plans built, and checks answered from the cache (the same decisions
  /// checked again: a run of the search that repeats another's).
  unsigned built = 0, reused = 0;

private:
  /// The step built from `state`'s decisions, with its memory plan.
  llvm::FailureOr<std::unique_ptr<StepPlan>> buildStep(const ::offload::planner::PlanState &state,
                                                       ::offload::planner::Refetch refetch);
  /// The figures of each set of decisions built: a plan is a function of its
  /// decisions (and the refetch mode), so the same decisions are never built
  /// twice.
  struct Figures {
    int64_t arenaBytes = 0, peakBytes = 0;
    std::optional<::offload::planner::SimulatedTime> time;
  };
  std::map<std::string, Figures> cache;

  ModuleOp top;
  func::FuncOp base;
  const StepCandidates &candidates;
  const PlanProblem &problem;
  const TargetSpec &spec;
  const TargetModel &model;
  const ::offload::planner::PlannerOptions &options;
  unsigned waitDistance;
  PipelineRunner runPipeline;
};

} // namespace mlir::offload::planning

#endif // OFFLOAD_LIB_TRANSFORMS_PLANMEMORYIR_H
