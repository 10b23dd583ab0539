//===- Problem.h - The planner's problem, free of IR ------------*- C++ -*-===//
//
// Part of offload. What the planner decides over, as plain data: the
// candidates (saved device buffers and parameters) with their static facts
// in program points, bytes and seconds, and the live device bytes of the
// step before any decision. PlanMemory.cpp builds it from a training step
// (PlanProblemBuilder.cpp); the algorithms (Algorithms.h) and the search
// (Search.h) never see IR, so unit tests drive them on synthetic problems
// (unittests/Planner). `writeProblemJson` is its serialization, the
// `problem=` file of --offload-plan-memory (format "offload-plan-problem",
// version 3; read by bench/planner/oracle.py).
//
// Units: bytes (int64_t), seconds (double), program points (the index of a
// top-level op of the step's body, int64_t).
//
//===----------------------------------------------------------------------===//

#ifndef OFFLOAD_PLANNER_PROBLEM_H
#define OFFLOAD_PLANNER_PROBLEM_H

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace offload::planner {

/// What happens to one candidate. Saved buffers: keep, recompute or
/// offload; parameters: keep (on the device) or host.
enum class Decision { Keep, Recompute, Offload, Host };

/// "keep", "recompute", "offload", "host" (the decisions file's names).
const char *decisionName(Decision d);
/// The decision named `name`, or none.
std::optional<Decision> parseDecision(llvm::StringRef name);

/// `bytes` no longer on the device over the program points [lo, hi]
/// (empty when lo > hi).
struct Freed {
  int64_t lo = 0, hi = -1, bytes = 0;
};

/// Bytes the ranges free at program point `point`.
int64_t bytesFreedAt(llvm::ArrayRef<Freed> freed, int64_t point);

/// One op of a standalone cone (the problem= file's `ops`): an id unique in
/// the step (its position in the step's body), its seconds, and the
/// checkpoint candidates (indices into PlanProblem::checkpoints) among the
/// results of the cone's ops downstream of it (its own included): a region
/// can skip the op only where one of them is saved.
struct ConeOp {
  int64_t id = 0;
  double seconds = 0;
  llvm::SmallVector<unsigned, 2> checkpoints;
};

/// A recompute region's cone against some decisions: what rerunning it
/// costs and which candidates it touches (candidate indices into
/// PlanProblem::saved).
struct Cone {
  /// Seconds of the cone's ops on the target (TargetModel::opSeconds).
  double seconds = 0;
  /// The most bytes of the cone's intermediates (its results other than the
  /// candidate's own values) live at once while it runs in order.
  int64_t transientBytes = 0;
  /// Candidates whose values the cone reads as inputs (first-read order,
  /// each once).
  llvm::SmallVector<unsigned> reads;
  /// Other candidates whose values the cone computes again (recomputed
  /// ones it chains through), in op order.
  llvm::SmallVector<unsigned> through;
  /// Ops in the cone.
  size_t numOps = 0;
  /// Checkpoint candidates (indices into PlanProblem::checkpoints) among
  /// the cone's inputs (saved: the cone stops there), and among the
  /// results of its ops (not saved: the cone reruns their producers).
  llvm::SmallVector<unsigned> checkpointsRead, checkpointsThrough;
  /// Each op of the cone (ConeOp); only for the standalone cones the
  /// problem= file states (the oracle's bound counts an op that several
  /// cones share once, and lets a saved checkpoint skip the ops behind it).
  std::vector<ConeOp> ops;
};

/// The static facts of one saved device buffer: the saves of a forward
/// value and its views (one buffer, so decided together).
struct SavedFacts {
  /// "<op> <layer>", unique in the problem (the program point of the first
  /// save is appended where two would share one).
  std::string name;
  int64_t bytes = 0;     // the device buffer
  int64_t copyBytes = 0; // what offloading moves (each save's value)
  unsigned numSaves = 1; // the step's save ops it covers
  /// Last forward use of the buffer, first backward use of a restore.
  int64_t lastForward = 0, firstBackward = 0;
  /// Where offloading frees the buffer: from its release (wait-distance
  /// compute ops after the last forward use) to just before its prefetch.
  Freed offloadFreed;
  bool recomputable = false;
  /// The copy seconds of `copyBytes` to the host and back (TargetModel).
  double toHostSeconds = 0, toDeviceSeconds = 0;
  /// The parts of those copies the compute around them cannot hide: before
  /// the release (to the host) and between the start of backward and the
  /// first backward use (to the device).
  double releaseNotHidden = 0, prefetchNotHidden = 0;
  /// When each copy is issued and when compute waits for it, in seconds of
  /// compute from the start of the step (forward is [0, forwardSeconds],
  /// backward the rest; LinkQueue, State.h): the copy to the host is issued
  /// after the last forward use and waited for at the release; the prefetch
  /// is issued at the prefetch point (offloadFreed.hi + 1: as late as it
  /// covers the use, as placePrefetches places it) and waited for at the
  /// first backward use. Negative: the phase's start or end (the copy may
  /// use any compute of its phase).
  double toHostIssue = -1, toHostDue = -1, toDeviceIssue = -1, toDeviceDue = -1;
  /// The recompute option's cone with every other saved value kept (only
  /// when the builder was asked for it: the problem= file states it).
  std::optional<Cone> standaloneCone;
  /// The ops of the recompute option's cone with every checkpoint candidate
  /// saved as well (the fewest ops any region that recomputes this value
  /// runs; the problem= file states it as `min_ops`, the oracle's valid
  /// bound counts them).
  std::vector<ConeOp> minimalConeOps;
};

/// The static facts of one parameter that may live on the host (its update
/// then runs on the host; HostParameters.cpp).
struct ParamFacts {
  unsigned arg = 0; // the step's argument number
  std::string name;
  int64_t bytes = 0, stateBytes = 0; // the parameter; its optimizer state
  /// Where moving it to the host frees bytes (parameter, state, gradient).
  llvm::SmallVector<Freed> freed;
  double hostUpdateSeconds = 0; // its update at the host's rate
  double toDeviceSeconds = 0;   // every host-to-device copy of it
  double toDeviceForwardSeconds = 0; // the part in forward
  double toHostSeconds = 0;     // its gradient to the host
  /// When each copy may start and when compute waits for it (seconds of
  /// compute from the start of the step; negative: the phase's start or
  /// end): each fetch from its prefetch point (as late as it covers the
  /// use) to its first use in its phase, the gradient from its last write
  /// to its release.
  double forwardFetchIssue = -1, forwardFetchDue = -1;
  double backwardFetchIssue = -1, backwardFetchDue = -1;
  double gradientIssue = -1, gradientDue = -1;
};

/// A checkpoint candidate: a forward value autodiff did not save (no save
/// op), produced by a recomputable op, that a recompute cone may stop at
/// when it is saved for that (--offload-recompute's `offload.checkpoint`),
/// as PyTorch's min-cut partitioner may save any intermediate and rerun
/// only the cheap ops after it. Saving it costs its bytes from its last
/// forward use to the last region that reads it (Checkpoints.cpp).
struct CheckpointFacts {
  /// "<op> <layer>" (the producer's), unique among the checkpoints.
  std::string name;
  int64_t bytes = 0;
  /// The program point of its producer (its op in the step's body), and
  /// its last forward use.
  int64_t point = 0, lastForward = 0;
  /// Its producer's seconds on the target (TargetModel::opSeconds): what a
  /// cone through it saves at least by stopping there, unless the cone
  /// needs another result of that op; the order in which checkpoints are
  /// tried (Checkpoints.cpp).
  double producerSeconds = 0;
};

/// The planner's problem for one step on one target under one budget.
struct PlanProblem {
  std::string step, target;
  int64_t budgetBytes = 0;
  /// The live-bytes level the decisions aim at: the budget less the
  /// target's workspace (bytes); with a saved budget, that budget.
  int64_t aimBytes = 0;
  /// The saved-bytes budget (`saved-budget=`; bytes), or -1: none. With
  /// one, the decisions aim at kept saved bytes -- the saved values left on
  /// the device plus the checkpoints saved, what PyTorch's
  /// `activation_memory_budget` bounds -- of at most this many, and the
  /// device arena need only fit `budgetBytes`; `baseLive` is then the saved
  /// values' bytes alone (withSavedBudget).
  int64_t savedBudgetBytes = -1;
  /// Live device bytes at every program point with every candidate kept
  /// (after early optimizer updates); with a saved budget, the saved
  /// values' bytes alone.
  std::vector<int64_t> baseLive;
  /// The device arena of the step with every candidate kept (bytes,
  /// workspace included), and the arena's alignment (bytes; the search
  /// lowers an aim by at least this much).
  int64_t baseArenaBytes = 0, arenaAlignment = 256;
  /// The base step's packed device arena (bytes, without the workspace):
  /// over its peak live bytes by the packing's fragmentation.
  int64_t basePackedBytes = 0;
  /// The op at each program point ("-" where none), for the decisions'
  /// reasons.
  std::vector<std::string> opNames;
  /// The step's estimated compute seconds: in all, in forward, in backward
  /// (the windows in which copies hide).
  double computeSeconds = 0, forwardSeconds = 0, backwardSeconds = 0;
  double unplannedStepSeconds = 0; // simulated, before any decision
  /// Early optimizer updates moved and save ops in the step (the report).
  unsigned movedUpdates = 0, numSaves = 0;
  std::vector<SavedFacts> saved;
  std::vector<ParamFacts> params;
  /// Forward values beyond the saved ones that a recompute cone may stop
  /// at (empty when the step has none, or the builder was not asked).
  std::vector<CheckpointFacts> checkpoints;

  int64_t numPoints() const { return int64_t(baseLive.size()); }
  /// A saved budget is set (savedBudgetBytes).
  bool hasSavedBudget() const { return savedBudgetBytes >= 0; }
  /// What the search holds its measure against: the saved budget where one
  /// is set (kept saved bytes), else the budget (the device arena).
  int64_t checkedBudgetBytes() const { return hasSavedBudget() ? savedBudgetBytes : budgetBytes; }
  llvm::StringRef opName(int64_t point) const {
    return point >= 0 && size_t(point) < opNames.size() ? llvm::StringRef(opNames[point])
                                                        : llvm::StringRef("-");
  }
};

/// Every saved value's bytes together, kept as autodiff saved them.
int64_t totalSavedBytes(const PlanProblem &problem);

/// Turns `problem` into the saved-bytes problem of `savedBudgetBytes`
/// (PyTorch's activation budget in bytes): the profile becomes the bytes of
/// the saved values alone, each from its last forward use to its first
/// backward use, and an offload or a recompute frees all of that span (no
/// region intermediates, no value held by a shared region: what a step
/// saves, not what its backward holds); parameters offer nothing (their
/// bytes are not saved bytes); the aim is the saved budget. The device
/// arena still has to fit `budgetBytes` (the search checks both).
void withSavedBudget(PlanProblem &problem, int64_t savedBudgetBytes);

/// An offload's own price as the problem file states it: its unhidden copy
/// ends and `tieBreak` of its copy time.
double offloadOwnSeconds(const SavedFacts &c, double tieBreak);
/// A host parameter's own price: its host update and `tieBreak` of its
/// copy time.
double hostOwnSeconds(const ParamFacts &p, double tieBreak);

struct PlanState;

/// Writes `problem` with the decisions of `state` ("chosen") as the
/// problem= JSON file (format "offload-plan-problem", version 3).
/// `fallback`: the plan is the smallest reachable arena's.
void writeProblemJson(llvm::raw_ostream &os, const PlanProblem &problem, const PlanState &state,
                      bool fallback, double tieBreak);

} // namespace offload::planner

#endif // OFFLOAD_PLANNER_PROBLEM_H
