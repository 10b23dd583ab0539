//===- PlanMemory.cpp - The planner: a device-memory budget in bytes ------===//
//
// Part of offload. Implements --offload-plan-memory. See Passes.td for what
// it decides and docs/planner.md for the formulation, the cost model and
// the guarantee.
//
// The planner owns no rewrite of its own. It decides on an abstract model
// of the step -- the live device bytes at every program point, from the
// memory plan, and for each candidate decision the program-point ranges
// where it frees bytes and the seconds it adds -- then marks the step and
// runs the passes that implement each decision (--offload-early-update,
// --offload-recompute policy=marked, --offload-host-offload policy=marked,
// --offload-host-parameters policy=marked) on a scratch copy, and checks
// the result with the real memory plan.
//
// The parts (docs/design.md, "The planner"): the IR-free problem, state,
// algorithms and search in include/offload/Planner (lib/Planner); the
// problem built from a step in PlanProblemBuilder.cpp; plans built by the
// mechanisms in PlanMaterialize.cpp; this file wires them, and slices
// large weights when nothing else fits.
//
//===----------------------------------------------------------------------===//

#include "PlanMemoryIR.h"

#include "offload/Dialect/Offload/Analysis/MemoryPlan.h"
#include "offload/Dialect/Offload/Analysis/MemoryTimeline.h"
#include "offload/Dialect/Offload/Analysis/Target.h"
#include "offload/Dialect/Offload/Analysis/Timeline.h"
#include "offload/Dialect/Offload/Transforms/Prefetch.h"
#include "offload/Dialect/Offload/Transforms/Autodiff.h"
#include "offload/Dialect/Offload/Transforms/EarlyUpdate.h"
#include "offload/Dialect/Offload/Transforms/Passes.h"
#include "offload/Dialect/Offload/Transforms/PassReport.h"
#include "offload/Planner/Report.h"
#include "offload/Planner/Search.h"
#include "offload/Support/BoundedJson.h"
#include "offload/Support/OutputFiles.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/ADT/ScopeExit.h"
#include "llvm/ADT/bit.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/raw_ostream.h"

#include <chrono>
#include <cmath>
#include <optional>

#include <queue>

#define DEBUG_TYPE "offload-plan-memory"

namespace mlir {
namespace offload {
#define GEN_PASS_DEF_PLANMEMORY
#include "offload/Dialect/Offload/Transforms/Passes.h.inc"
} // namespace offload
} // namespace mlir

using namespace mlir;
using namespace mlir::offload;

static constexpr llvm::StringLiteral kPlannedAttrName = OffloadDialect::kPlannedAttrName;
/// The smallest slice the planner tries (bytes): below it, a slice's
/// per-op overhead outweighs the bytes it saves.
static constexpr int64_t kMinSliceBytes = 64 * 1024;

//===----------------------------------------------------------------------===//
// Budget parsing
//===----------------------------------------------------------------------===//

/// Parses "12GiB", "1.5 GB", "4096": bytes, or a number with a binary
/// (KiB, MiB, GiB, TiB) or decimal (kB, MB, GB, TB) suffix; "B" is allowed.
/// `what` names the option in errors; at least `minBytes` (1, or 0 for the
/// saved budget).
static FailureOr<int64_t> parseBytes(StringRef text, std::string &error,
                                     StringRef what = "budget", int64_t minBytes = 1) {
  StringRef s = text.trim();
  if (s.empty()) {
    error = "the " + what.str() + " is empty";
    return failure();
  }
  size_t numberEnd = 0;
  while (numberEnd < s.size() &&
         (llvm::isDigit(s[numberEnd]) || s[numberEnd] == '.' || s[numberEnd] == '-' ||
          s[numberEnd] == '+' || s[numberEnd] == 'e' || s[numberEnd] == 'E')) {
    // 'e'/'E' only inside a number followed by a digit or a sign (1e9).
    if ((s[numberEnd] == 'e' || s[numberEnd] == 'E') &&
        !(numberEnd + 1 < s.size() &&
          (llvm::isDigit(s[numberEnd + 1]) || s[numberEnd + 1] == '-' || s[numberEnd + 1] == '+')))
      break;
    ++numberEnd;
  }
  StringRef number = s.take_front(numberEnd), suffix = s.drop_front(numberEnd).trim();
  double value = 0;
  if (number.empty() || number.getAsDouble(value) || !std::isfinite(value)) {
    error = "cannot parse the " + what.str() + " '" + text.str() +
            "'; expected bytes, or a number with KiB, MiB, GiB, TiB, kB, MB, GB or TB";
    return failure();
  }
  static const std::pair<const char *, double> units[] = {
      {"", 1},           {"B", 1},          {"KiB", 1024.0},   {"MiB", 1048576.0},
      {"GiB", 1073741824.0}, {"TiB", 1099511627776.0}, {"kB", 1e3}, {"KB", 1e3},
      {"MB", 1e6},       {"GB", 1e9},       {"TB", 1e12}};
  double scale = 0;
  for (auto &[name, factor] : units)
    if (suffix == name)
      scale = factor;
  if (scale == 0) {
    error = "unknown unit '" + suffix.str() + "' in the " + what.str() + " '" + text.str() +
            "'; expected KiB, MiB, GiB, TiB (powers of 1024) or kB, MB, GB, TB (powers of 1000)";
    return failure();
  }
  double bytes = value * scale;
  if (!(bytes >= double(minBytes))) {
    error = "the " + what.str() + " must be at least " + std::to_string(minBytes) + " byte" +
            (minBytes == 1 ? "" : "s") + ", got '" + text.str() + "'";
    return failure();
  }
  if (bytes > 9.0e18) {
    error = "the " + what.str() + " '" + text.str() + "' is too large";
    return failure();
  }
  return int64_t(std::floor(bytes));
}

using ::offload::planner::Decision;
using ::offload::planner::PlanProblem;
using ::offload::planner::PlanState;
using ::offload::planner::SearchResult;
using ::offload::planner::humanBytes;
using namespace mlir::offload::planning;

namespace {

/// One call of planStep: how it reports, and what it found when no plan fits.
struct PlanAttempt {
  /// When no plan fits: return failure without an error, with
  /// `smallestArena` set (an error is still emitted for anything else).
  bool quiet = false;
  int64_t smallestArena = -1;
  /// The step as the user gave it, when `fn` is a sliced rebuild of it: the
  /// report and the timeline compare against its unplanned arena and time.
  func::FuncOp unplannedOf;
  /// Slicing, for the report and the `offload.planned` attribute.
  int64_t sliceBytes = 0;
  std::string slicing;
  /// A note for the no-plan error (what slicing reached).
  std::string errorNote;
};

struct PlanMemoryPass : public mlir::offload::impl::PlanMemoryBase<PlanMemoryPass> {
  using PlanMemoryBase::PlanMemoryBase;
  void runOnOperation() override;

private:
  LogicalResult planStep(func::FuncOp fn, int64_t budgetBytes, const TargetSpec &spec,
                         llvm::raw_ostream *report, PlanAttempt &attempt);
  LogicalResult planWithSlicing(func::FuncOp fn, int64_t budgetBytes, const TargetSpec &spec,
                                llvm::raw_ostream *report, int64_t unslicedSmallest);
  LogicalResult markPlanned(func::FuncOp fn, func::FuncOp chosen, int64_t budgetBytes,
                            const TargetSpec &spec,
                            const std::optional<MemoryTimeline> &unplannedTimeline,
                            int64_t sliceBytes, llvm::raw_ostream *report);
  /// The decisions of decisions=FILE, built and checked: an error when the
  /// file does not fit the step or its plan does not fit the budget.
  FailureOr<::offload::planner::SearchResult>
  replayDecisions(func::FuncOp fn, const ::offload::planner::PlanProblem &problem,
                  StepChecker &checker, int64_t budgetBytes);
  /// The JSON report's entries, one per step (report=json:FILE); none
  /// when the report is text or off.
  std::optional<llvm::json::Array> jsonSteps;
  /// Set when a step failed because no plan fits its budget (not an error
  /// of the input): the tool exits with kExitNoPlanFits.
  bool noPlanFit = false;
  /// saved-budget= in bytes, or -1 (none); for a percentage, the step's
  /// bytes once its problem is built.
  int64_t savedBudgetBytes = -1;
  /// saved-budget=P% as a fraction of each step's saved bytes, or -1.
  double savedBudgetFraction = -1;
};
} // namespace

//===----------------------------------------------------------------------===//
// The pass
//===----------------------------------------------------------------------===//

//===----------------------------------------------------------------------===//
// The pass
//===----------------------------------------------------------------------===//

/// Reads an offload-plan-decisions file (version 1): {"format":
/// "offload-plan-decisions", "version": 1, "decisions": [{"candidate": i,
/// "name": ..., "decision": "keep" | "recompute" | "offload" | "host"}]},
/// candidates indexed as in the problem= file of the same step (saved
/// buffers, then parameters), each name checked against the step's, so a
/// file of another step or build is refused. Unlisted candidates are kept.
static LogicalResult readDecisions(StringRef path, const PlanProblem &problem, PlanState &state,
                                   std::string &error) {
  // A regular file within OFFLOAD_MAX_DECISIONS_JSON_BYTES, nested at most
  // 512 deep (BoundedJson.h).
  FailureOr<llvm::json::Value> parsed =
      ::offload::readJsonFile(path, ::offload::JsonKind::Decisions, error);
  if (failed(parsed))
    return failure();
  const llvm::json::Object *root = parsed->getAsObject();
  if (!root || root->getString("format") != "offload-plan-decisions" ||
      root->getInteger("version") != 1) {
    error = "not an offload-plan-decisions file of version 1";
    return failure();
  }
  const llvm::json::Array *list = root->getArray("decisions");
  if (!list) {
    error = "no \"decisions\" array";
    return failure();
  }
  size_t numSaved = problem.saved.size(), total = numSaved + problem.params.size();
  for (const llvm::json::Value &v : *list) {
    const llvm::json::Object *d = v.getAsObject();
    std::optional<int64_t> index = d ? d->getInteger("candidate") : std::nullopt;
    std::optional<StringRef> name = d ? d->getString("name") : std::nullopt;
    std::optional<StringRef> decision = d ? d->getString("decision") : std::nullopt;
    if (!index || !name || !decision || *index < 0 || size_t(*index) >= total) {
      error = "an entry without a candidate index below " + std::to_string(total) +
              ", a name and a decision";
      return failure();
    }
    size_t i = size_t(*index);
    bool isSaved = i < numSaved;
    StringRef own = isSaved ? StringRef(problem.saved[i].name)
                            : StringRef(problem.params[i - numSaved].name);
    if (own != *name) {
      error = "candidate " + std::to_string(i) + " is '" + own.str() + "' in this step, not '" +
              name->str() + "' (a file for another step?)";
      return failure();
    }
    std::optional<Decision> named = ::offload::planner::parseDecision(*decision);
    bool allowed =
        named && (*named == Decision::Keep ||
                  (*named == Decision::Recompute && isSaved && problem.saved[i].recomputable) ||
                  (*named == Decision::Offload && isSaved) ||
                  (*named == Decision::Host && !isSaved));
    if (!allowed) {
      error = "'" + decision->str() + "' is not a decision candidate " + std::to_string(i) +
              " ('" + own.str() + "') can take";
      return failure();
    }
    if (isSaved) {
      state.saved[i].decision = *named;
      state.saved[i].why = "replayed from the decisions file";
    } else {
      state.params[i - numSaved].decision = *named;
      state.params[i - numSaved].why = "replayed from the decisions file";
    }
  }
  return success();
}

void PlanMemoryPass::runOnOperation() {
  ModuleOp m = getOperation();
  std::string error;
  FailureOr<TargetSpec> spec = resolveTarget(target, error);
  if (failed(spec)) {
    mlir::emitError(m.getLoc()) << "offload-plan-memory: " << error;
    return signalPassFailure();
  }
  // The files this pass reads are inputs of the command: no output of it
  // (report=, -o, ...) may replace them (OutputFiles.h).
  // target=host reads the calibrated host file (hostTargetPath).
  std::string hostFile;
  if (target == "host") {
    std::string ignored;
    if (FailureOr<std::string> p = hostTargetPath(ignored); succeeded(p))
      hostFile = *p;
  }
  for (auto [path, role] : {std::pair<StringRef, const char *>{
                                StringRef(target).ends_with(".json") ? StringRef(target) : "",
                                "the target file (offload-plan-memory target=)"},
                            {hostFile, "the host target file (offload-plan-memory target=host)"},
                            {decisionsFile, "the decisions file (offload-plan-memory decisions=)"}})
    if (std::string e = ::offload::OutputFiles::process().addInput(path.str(), role); !e.empty()) {
      mlir::emitError(m.getLoc()) << "offload-plan-memory: " << e;
      return signalPassFailure();
    }
  int64_t budgetBytes = 0;
  if (budget.empty()) {
    if (spec->memoryBytes <= 0) {
      mlir::emitError(m.getLoc()) << "offload-plan-memory: give budget=BYTES (target '"
                                  << spec->name << "' has no memory size of its own)";
      return signalPassFailure();
    }
    budgetBytes = spec->memoryBytes;
  } else {
    FailureOr<int64_t> parsed = parseBytes(budget, error);
    if (failed(parsed)) {
      mlir::emitError(m.getLoc()) << "offload-plan-memory: " << error;
      return signalPassFailure();
    }
    budgetBytes = *parsed;
  }
  savedBudgetBytes = -1;
  savedBudgetFraction = -1;
  if (StringRef percent = StringRef(savedBudget).trim(); percent.ends_with("%")) {
    // PyTorch's activation_memory_budget as a percentage of the step's
    // saved bytes (as device buffers: totalSavedBytes), resolved per step.
    double value = 0;
    if (percent.drop_back().trim().getAsDouble(value) || !(value >= 0 && value <= 100)) {
      mlir::emitError(m.getLoc()) << "offload-plan-memory: cannot parse the saved budget '"
                                  << savedBudget
                                  << "'; expected bytes, or a percentage of the step's saved "
                                     "bytes from 0% to 100%";
      return signalPassFailure();
    }
    savedBudgetFraction = value / 100;
    savedBudgetBytes = 0; // set per step (planStep)
  } else if (!savedBudget.empty()) {
    FailureOr<int64_t> parsed = parseBytes(savedBudget, error, "saved budget", 0);
    if (failed(parsed)) {
      mlir::emitError(m.getLoc()) << "offload-plan-memory: " << error;
      return signalPassFailure();
    }
    savedBudgetBytes = *parsed;
  }
  if (spec->memoryBytes > 0 && budgetBytes > spec->memoryBytes)
    mlir::emitWarning(m.getLoc()) << "offload-plan-memory: the budget of " << budgetBytes
                                  << " bytes is more than " << spec->name << "'s "
                                  << spec->memoryBytes << " bytes of memory";

  // The decision table: off, stderr or a file (report=, PassReport.h).
  PassReport out;
  if (failed(out.open(report, "offload-plan-memory", m.getLoc(), /*hasJson=*/true)))
    return signalPassFailure();
  llvm::raw_ostream *reportOS = out.stream();
  if (out.json())
    jsonSteps.emplace();
  // The JSON report is written whether the steps plan or not: it states
  // the smallest reachable arena when no plan fits.
  auto closeReport = [&]() -> LogicalResult {
    if (jsonSteps)
      out.setJson(llvm::json::Object{{"format", "offload-plan-report"},
                                     {"version", 1},
                                     {"steps", std::move(*jsonSteps)}});
    jsonSteps.reset();
    return out.close(m.getLoc());
  };
  SmallVector<func::FuncOp> steps;
  m.walk([&](func::FuncOp fn) {
    if (fn->hasAttr(OffloadDialect::kStepAttrName))
      steps.push_back(fn);
  });
  if (steps.empty()) {
    mlir::emitError(m.getLoc()) << "offload-plan-memory: no training step (a function with "
                                   "'offload.step') in the module";
    return signalPassFailure();
  }
  for (func::FuncOp fn : steps) {
    PlanAttempt attempt;
    // Slicing frees parameter bytes, not saved bytes: with a saved budget
    // the error comes at once.
    attempt.quiet =
        slice == PlanSlicing::Auto && decisionsFile.empty() && savedBudgetBytes < 0;
    if (succeeded(planStep(fn, budgetBytes, *spec, reportOS, attempt)))
      continue;
    if (attempt.smallestArena < 0 ||
        failed(planWithSlicing(fn, budgetBytes, *spec, reportOS, attempt.smallestArena))) {
      if (succeeded(closeReport()) && noPlanFit) {
        // A documented outcome: exit code 3, and the report (which states
        // the smallest reachable arena) is written all the same.
        ::offload::OutputFiles::process().setFailureExitCode(::offload::kExitNoPlanFits);
        if (out.json())
          out.keepOnFailure();
      }
      return signalPassFailure();
    }
  }
  // The planned module records the figures it was planned for (Target.h):
  // the host-offload passes price with them when run on it later.
  m->setAttr(kTargetAttrName, targetSpecToAttr(m.getContext(), *spec));
  if (failed(closeReport()))
    return signalPassFailure();
}

/// Prints `fn` in generic form without locations (what two builds of one
/// step must agree on).
static std::string printedStep(func::FuncOp fn) {
  std::string text;
  llvm::raw_string_ostream os(text);
  fn->print(os, OpPrintingFlags().printGenericOpForm().useLocalScope());
  return text;
}

// No unsliced plan fits: slice large linear weights (the mechanism of
// --offload-slice-parameters, which runs on the forward step) and build the
// step again with the recorded autodiff options; plan each slice size from
// the largest down and keep the first that fits. Slicing is a last resort:
// it adds ops and sums the input gradient slice by slice (rounding), so it is
// not weighed against plans that fit without it.
LogicalResult PlanMemoryPass::planWithSlicing(func::FuncOp fn, int64_t budgetBytes,
                                              const TargetSpec &spec, llvm::raw_ostream *report,
                                              int64_t unslicedSmallest) {
  MLIRContext *ctx = fn.getContext();
  OpBuilder top = OpBuilder::atBlockEnd(getOperation().getBody());
  SmallVector<ModuleOp> scratches;
  llvm::scope_exit cleanup([&] {
    for (ModuleOp m : scratches)
      if (m)
        m.erase();
  });
  auto newScratch = [&]() {
    scratches.push_back(ModuleOp::create(top, fn.getLoc()));
    return scratches.back();
  };
  auto loudError = [&](func::FuncOp step, PlanAttempt attempt) {
    attempt.quiet = false;
    (void)planStep(step, budgetBytes, spec, report, attempt);
    return failure();
  };

  std::string why;
  ModuleOp fwdHolder = newScratch();
  func::FuncOp forward = cloneForwardOfStep(fn, fwdHolder, why);
  int64_t largest = 0;
  if (forward)
    for (BlockArgument a : forward.getArguments())
      if (auto t = dyn_cast<RankedTensorType>(a.getType());
          t && t.hasStaticShape() && t.getRank() == 2 &&
          getArgRole(forward, a.getArgNumber()) == Role::parameter)
        largest = std::max(largest, mlir::offload::detail::tensorBytes(t));
  if (forward && largest < 2 * kMinSliceBytes)
    why = "no two-dimensional parameter of at least " + std::to_string(2 * kMinSliceBytes) +
          " bytes to slice";
  // The rebuild must give back the step exactly (nothing rewrote it after
  // autodiff), or slicing would silently drop that rewrite.
  if (forward && why.empty()) {
    ModuleOp check = newScratch();
    OpBuilder cb = OpBuilder::atBlockEnd(check.getBody());
    cb.clone(*forward);
    OpPassManager pm(ModuleOp::getOperationName());
    if (failed(addRecordedAutodiff(fn, pm)) || failed(runPipeline(pm, check)))
      return failure();
    auto rebuilt = cast<func::FuncOp>(check.getBody()->front());
    if (printedStep(rebuilt) != printedStep(fn))
      why = "the step was rewritten after --offload-autodiff, and slicing rebuilds it from "
            "its forward";
  }
  if (!why.empty()) {
    PlanAttempt attempt;
    attempt.errorNote = "slicing was not tried: " + why;
    return loudError(fn, attempt);
  }

  // Slice sizes: powers of two below the largest weight, down to 64 KiB,
  // until kSlicingPatience sizes in a row reach no smaller arena than the
  // smallest so far (halving further slices more of the same weights; where
  // the floor is activations, each size only adds ops: ViT-B/16 at 1.2 GB
  // on h100-sxm tried 8 sizes, 28 s, each with a larger floor than the last).
  constexpr int kSlicingPatience = 2;
  int sinceSmaller = 0;
  int64_t stoppedBelow = 0;
  func::FuncOp best;
  PlanAttempt bestAttempt;
  int64_t bestArena = unslicedSmallest;
  for (int64_t sliceBytes = int64_t(llvm::bit_floor(uint64_t(largest - 1)));
       sliceBytes >= kMinSliceBytes; sliceBytes /= 2) {
    if (sinceSmaller >= kSlicingPatience) {
      stoppedBelow = sliceBytes * 2;
      break;
    }
    ModuleOp holder = newScratch();
    OpBuilder hb = OpBuilder::atBlockEnd(holder.getBody());
    auto sliced = cast<func::FuncOp>(hb.clone(*forward));
    unsigned argsBefore = sliced.getNumArguments();
    OpPassManager pm(ModuleOp::getOperationName());
    SliceParametersOptions so;
    so.sliceBytes = sliceBytes;
    pm.addPass(createSliceParameters(so));
    if (failed(addRecordedAutodiff(fn, pm)))
      return failure();
    {
      // A weight that cannot be sliced is a warning of the slicing pass,
      // not of the planner's trial of it.
      ScopedDiagnosticHandler quietWarnings(ctx, [](Diagnostic &d) {
        return success(d.getSeverity() == DiagnosticSeverity::Warning);
      });
      if (failed(runPipeline(pm, holder)))
        return failure();
    }
    if (sliced.getNumArguments() == argsBefore) // nothing above this size can be sliced
      continue;
    // What was sliced, for the report: slices per whole weight.
    llvm::MapVector<StringRef, std::pair<int64_t, int64_t>> wholes; // name -> slices, bytes
    for (unsigned i = 0; i < sliced.getNumArguments(); ++i)
      if (auto of = sliced.getArgAttrOfType<StringAttr>(i, OffloadDialect::kSliceOfAttrName);
          of && getArgRole(sliced, i) == Role::parameter) {
        auto &w = wholes[of.getValue()];
        w.first += 1;
        w.second += mlir::offload::detail::tensorBytes(sliced.getArgument(i).getType());
      }
    PlanAttempt attempt;
    attempt.quiet = true;
    attempt.unplannedOf = fn;
    attempt.sliceBytes = sliceBytes;
    llvm::raw_string_ostream so2(attempt.slicing);
    so2 << "no plan fits without slicing (smallest arena " << unslicedSmallest
        << " bytes); parameters above " << sliceBytes << " bytes sliced into rows:";
    for (auto &[name, w] : wholes)
      so2 << " '" << name << "' (" << w.second << " bytes) in " << w.first << " slices;";
    attempt.slicing.pop_back();
    if (succeeded(planStep(sliced, budgetBytes, spec, report, attempt))) {
      // planStep replaced `sliced` by the planned step, in `holder`.
      auto planned = cast<func::FuncOp>(holder.getBody()->front());
      planned->moveBefore(fn);
      fn.erase();
      numSlicedWeights += wholes.size();
      return success();
    }
    if (attempt.smallestArena < 0)
      return failure();
    if (attempt.smallestArena < bestArena) {
      bestArena = attempt.smallestArena;
      best = sliced;
      bestAttempt = attempt;
      sinceSmaller = 0;
    } else {
      ++sinceSmaller;
    }
  }
  if (!best) {
    PlanAttempt attempt;
    attempt.errorNote =
        stoppedBelow ? "slicing large weights did not reach a smaller arena (sizes down to " +
                           std::to_string(stoppedBelow) + " bytes; " +
                           std::to_string(kSlicingPatience) +
                           " sizes in a row reached none, so smaller ones were not tried)"
                     : "slicing large weights (sizes down to " + std::to_string(kMinSliceBytes) +
                           " bytes) did not reach a smaller arena";
    return loudError(fn, attempt);
  }
  bestAttempt.errorNote = "the smallest arena is reached by slicing: " + bestAttempt.slicing;
  return loudError(best, bestAttempt);
}

/// The step must be as --offload-autodiff built it: not planned, with a
/// backward phase, no memory rewrite and no argument on the host.
static LogicalResult checkPlannable(func::FuncOp fn) {
  Block &body = fn.getBody().front();
  if (auto planned = fn->getAttrOfType<StringAttr>(kPlannedAttrName))
    return mlir::emitError(fn.getLoc()) << "offload-plan-memory: the step is already planned ("
                                        << planned.getValue()
                                        << "); run the planner once, on the step as "
                                           "--offload-autodiff built it";
  if (!llvm::any_of(body, [](Operation &op) {
        auto mk = dyn_cast<PhaseOp>(op);
        return mk && mk.getPhase() != Phase::forward;
      }))
    return mlir::emitError(fn.getLoc(), "offload-plan-memory: the step has no backward phase; run "
                                        "--offload-autodiff first");
  for (Operation &op : body) {
    if (isa<RecomputeOp, ToHostOp, ToDeviceOp>(op))
      return mlir::emitError(op.getLoc())
             << "offload-plan-memory: the step already has a memory rewrite ('" << op.getName()
             << "'); the planner decides recompute and offload itself: run it on the step as "
                "--offload-autodiff built it, without --offload-recompute, "
                "--offload-host-offload or --offload-host-parameters";
  }
  for (BlockArgument a : body.getArguments())
    if (isa<HostType>(a.getType()))
      return mlir::emitError(fn.getLoc())
             << "offload-plan-memory: argument #" << a.getArgNumber()
             << " is already on the host; run the planner on the step as "
                "--offload-autodiff built it";
  return success();
}

/// The error when no plan fits: the smallest arena, what is live at its
/// peak, the budget to ask for.
static LogicalResult noPlanFits(func::FuncOp fn, func::FuncOp smallest, int64_t smallestArena,
                                int64_t budgetBytes, const TargetSpec &spec,
                                const std::string &note, llvm::json::Array *json) {
  FailureOr<MemoryPlan> mp = computeMemoryPlan(smallest);
  if (failed(mp))
    return failure();
  int64_t persistent = mp->persistentDeviceBytes();
  SmallVector<const PlannedBuffer *> live = mp->temporariesAtPeak();
  Operation *peakOp = mp->schedule.empty() ? nullptr : mp->schedule[mp->peakPoint];
  if (json)
    json->push_back(llvm::json::Object{
        {"step", fn.getName().str()},
        {"target", spec.name},
        {"budget_bytes", budgetBytes},
        {"status", "no-plan"},
        {"smallest_arena_bytes", smallestArena},
        {"suggested_budget_bytes", smallestArena},
        {"peak_bytes", mp->peakDeviceBytes},
        {"peak_point", mp->peakPoint},
        {"peak_op", peakOp ? peakOp->getName().getStringRef().str() : std::string("-")},
        {"persistent_device_bytes", persistent},
        {"note", note}});
  // At the step's location, without printing the step.
  auto diag = mlir::emitError(fn.getLoc());
  diag << "offload-plan-memory: no plan fits the budget of " << budgetBytes << " bytes ("
       << humanBytes(budgetBytes) << ") on " << spec.name
       << "; the smallest device arena reachable is " << smallestArena << " bytes ("
       << humanBytes(smallestArena)
       << ", with recompute, offload and host parameters wherever they free bytes). Its "
          "peak, "
       << mp->peakDeviceBytes << " live bytes, is at op #" << mp->peakPoint << " '"
       << (peakOp ? peakOp->getName().getStringRef() : StringRef("-")) << "', with "
       << persistent << " persistent device bytes (arguments, constants, results)";
  if (!live.empty()) {
    diag << "; the largest tensors live there:";
    for (unsigned k = 0; k < live.size() && k < 3; ++k) {
      Value v = live[k]->values.empty() ? Value() : live[k]->values.front();
      diag << (k ? "," : "") << " " << live[k]->bytes << " bytes ("
           << (v && v.getDefiningOp() ? v.getDefiningOp()->getName().getStringRef()
                                      : StringRef("argument"))
           << ")";
    }
  }
  diag << ". Ask for budget=" << smallestArena << " (" << humanBytes(smallestArena)
       << ") or more";
  if (peakOp)
    diag.attachNote(peakOp->getLoc()) << "the smallest arena's peak is here";
  if (!note.empty())
    diag.attachNote(fn.getLoc()) << note;
  return failure();
}

/// The error when no plan keeps at most the saved budget within the
/// budget: the fewest kept saved bytes reachable and its plan's arena, what
/// to ask for. (Parameters stay on the device under a saved budget, so the
/// smallest arena without one can be smaller.)
static LogicalResult noPlanKeepsSaved(func::FuncOp fn, const PlanProblem &problem,
                                      int64_t fewestKept, int64_t arenaBytes,
                                      const TargetSpec &spec, llvm::json::Array *json) {
  bool arenaOver = arenaBytes > problem.budgetBytes;
  if (json)
    json->push_back(llvm::json::Object{{"step", fn.getName().str()},
                                       {"target", spec.name},
                                       {"budget_bytes", problem.budgetBytes},
                                       {"saved_budget_bytes", problem.savedBudgetBytes},
                                       {"status", "no-plan"},
                                       {"saved_bytes", totalSavedBytes(problem)},
                                       {"fewest_kept_saved_bytes", fewestKept},
                                       {"fewest_kept_arena_bytes", arenaBytes},
                                       {"suggested_saved_budget_bytes", fewestKept}});
  auto diag = mlir::emitError(fn.getLoc());
  diag << "offload-plan-memory: no plan keeps at most " << problem.savedBudgetBytes
       << " saved bytes (" << humanBytes(problem.savedBudgetBytes) << ") on " << spec.name
       << " within the budget of " << problem.budgetBytes << " bytes ("
       << humanBytes(problem.budgetBytes) << "); the step saves " << totalSavedBytes(problem)
       << " bytes, and the plan keeping the fewest (" << fewestKept
       << ", every saved value recomputed or offloaded) needs a device arena of "
       << arenaBytes << " bytes (" << humanBytes(arenaBytes) << ")";
  if (arenaOver)
    diag << ". Ask for budget=" << arenaBytes
         << " or more, or plan without saved-budget= (parameters then may move to the host)";
  else
    diag << ". Ask for saved-budget=" << fewestKept << " or more";
  return failure();
}

FailureOr<SearchResult> PlanMemoryPass::replayDecisions(func::FuncOp fn,
                                                        const PlanProblem &problem,
                                                        StepChecker &checker,
                                                        int64_t budgetBytes) {
  SearchResult result(problem);
  std::string error;
  if (failed(readDecisions(decisionsFile, problem, result.state, error)))
    return mlir::emitError(fn.getLoc())
           << "offload-plan-memory: decisions=" << decisionsFile << ": " << error;
  // The links' queues of the replayed copies (the problem= file's price),
  // timed as the search's would be (Planner::timedLinks).
  ::offload::planner::PlannerOptions options;
  result.state.timedLinks =
      problem.numPoints() > options.finePoints || options.timedLinksOnSmallSteps;
  result.state.relink();
  auto plan = checker.build(result.state, ::offload::planner::Refetch::Auto);
  if (failed(plan))
    return failure();
  result.checks = 1;
  if ((*plan)->arenaBytes > budgetBytes)
    return mlir::emitError(fn.getLoc())
           << "offload-plan-memory: the decisions in " << decisionsFile
           << " need a device arena of " << (*plan)->arenaBytes << " bytes, over the budget of "
           << budgetBytes << " bytes";
  if (problem.hasSavedBudget() &&
      keptSavedBytes(result.state) > problem.savedBudgetBytes)
    return mlir::emitError(fn.getLoc())
           << "offload-plan-memory: the decisions in " << decisionsFile << " keep "
           << keptSavedBytes(result.state) << " saved bytes, over the saved budget of "
           << problem.savedBudgetBytes << " bytes";
  result.chosen = std::move(*plan);
  return result;
}

/// A JSON file of the planner's, through the tools' output files: staged
/// and renamed into place only when the whole command succeeds, and never
/// over something that is not a regular file (OutputFiles.h).
static LogicalResult writePlannerFile(func::FuncOp fn, const std::string &path,
                                      const std::string &text, StringRef what) {
  if (std::string e = ::offload::OutputFiles::process().write(path, text.data(), text.size());
      !e.empty())
    return mlir::emitError(fn.getLoc())
           << "offload-plan-memory: cannot write the " << what << " '" << path << "': " << e;
  return success();
}

/// The planned step `chosen` marked with what it was planned for, and the
/// memory timeline file (timeline=) when asked.
LogicalResult PlanMemoryPass::markPlanned(func::FuncOp fn, func::FuncOp chosen,
                                          int64_t budgetBytes, const TargetSpec &spec,
                                          const std::optional<MemoryTimeline> &unplannedTimeline,
                                          int64_t sliceBytes, llvm::raw_ostream *report) {
  MLIRContext *ctx = fn.getContext();
  if (unplannedTimeline) {
    FailureOr<MemoryPlan> plannedMp = computeMemoryPlan(chosen);
    if (failed(plannedMp))
      return failure();
    MemoryTimeline planned = computeMemoryTimeline(*plannedMp);
    std::string json;
    llvm::raw_string_ostream out(json);
    writeMemoryTimelineJson(out, fn.getName(), spec.name, budgetBytes,
                            {{"unplanned", &*unplannedTimeline}, {"planned", &planned}});
    if (failed(writePlannerFile(fn, timelineFile, json, "timeline")))
      return failure();
    if (report)
      *report << "plan-memory @" << fn.getName() << ": memory timeline written to "
              << timelineFile << "\n";
  }
  chosen->setAttr(kPlannedAttrName,
                  StringAttr::get(ctx, "budget=" + std::to_string(budgetBytes) +
                                           (savedBudgetBytes >= 0
                                                ? " saved-budget=" + std::to_string(savedBudgetBytes)
                                                : std::string()) +
                                           " target=" + spec.name +
                                           (sliceBytes ? " slice-bytes=" + std::to_string(sliceBytes)
                                                       : std::string())));
  if (spec.workspaceBytes > 0)
    chosen->setAttr(OffloadDialect::kWorkspaceBytesAttrName,
                    IntegerAttr::get(IntegerType::get(ctx, 64), spec.workspaceBytes));
  return success();
}

// The pass wires the parts: the problem built from the step
// (PlanProblemBuilder.cpp), the search over the IR-free state (Search.h)
// with plans built by the mechanisms (PlanMaterialize.cpp), then the
// problem file, the report and the planned step in place of `fn`.
LogicalResult PlanMemoryPass::planStep(func::FuncOp fn, int64_t budgetBytes,
                                       const TargetSpec &spec, llvm::raw_ostream *report,
                                       PlanAttempt &attempt) {
  auto clockStart = std::chrono::steady_clock::now();
  if (failed(checkPlannable(fn)))
    return failure();

  TargetModel model = TargetModel::fromSpec(spec);
  auto arenaOf = [&](const MemoryPlan &mp) {
    return deviceBytesWithWorkspace(mp.deviceArenaBytes, spec.workspaceBytes);
  };
  FailureOr<MemoryPlan> unplanned = computeMemoryPlan(fn);
  if (failed(unplanned))
    return failure();
  // What the report and the timeline compare with: the step as given (before
  // slicing, when `fn` is a sliced rebuild of it).
  func::FuncOp given = attempt.unplannedOf ? attempt.unplannedOf : fn;
  Timeline unplannedTime = simulateTimeline(given, model);
  FailureOr<MemoryPlan> slicedFrom = failure();
  if (attempt.unplannedOf && failed(slicedFrom = computeMemoryPlan(given)))
    return failure();
  const MemoryPlan &givenPlan = attempt.unplannedOf ? *slicedFrom : *unplanned;
  std::optional<MemoryTimeline> unplannedTimeline;
  if (!timelineFile.empty())
    unplannedTimeline = computeMemoryTimeline(givenPlan);
  int64_t unplannedArena = arenaOf(givenPlan);
  int64_t ownUnplannedArena = arenaOf(*unplanned);

  // The planned step (`plan`'s, or `fn` itself) marked and put in place.
  auto finish = [&](StepPlan *plan) -> LogicalResult {
    if (failed(markPlanned(fn, plan ? plan->step() : fn, budgetBytes, spec, unplannedTimeline,
                           attempt.sliceBytes, report)))
      return failure();
    if (plan)
      plan->replace(fn);
    return success();
  };

  // A decisions file is replayed (and so read and checked) even when the
  // step fits unplanned.
  if (ownUnplannedArena <= budgetBytes && decisionsFile.empty() && savedBudgetBytes < 0) {
    if (report)
      *report << llvm::format("plan-memory @%s: the step fits unplanned: device arena %lld "
                              "bytes (%s) <= budget %lld bytes (%s) on %s; nothing changed\n",
                              fn.getName().str().c_str(), (long long)unplannedArena,
                              humanBytes(unplannedArena).c_str(), (long long)budgetBytes,
                              humanBytes(budgetBytes).c_str(), spec.name.c_str());
    if (jsonSteps)
      jsonSteps->push_back(llvm::json::Object{{"step", fn.getName().str()},
                                              {"target", spec.name},
                                              {"budget_bytes", budgetBytes},
                                              {"status", "fits-unplanned"},
                                              {"arena_bytes", unplannedArena},
                                              {"unplanned_arena_bytes", unplannedArena}});
    return finish(nullptr);
  }

  // --- The base: optimizer updates as soon as their gradient is final ------
  // It lives in a scratch module of its own until the end.
  OpBuilder top = OpBuilder::atBlockEnd(getOperation().getBody());
  auto scratch = ModuleOp::create(top, fn.getLoc());
  llvm::scope_exit cleanup([&] { scratch.erase(); });
  OpBuilder sb = OpBuilder::atBlockEnd(scratch.getBody());
  auto base = cast<func::FuncOp>(sb.clone(*fn));
  unsigned movedUpdates = moveOptimizerUpdatesEarly(base);
  FailureOr<MemoryPlan> baseMp = computeMemoryPlan(base);
  if (failed(baseMp))
    return failure();

  // --- The problem, its cones, the checker ----------------------------------
  ::offload::planner::PlannerOptions options;
  options.perturbedRuns = restarts;
  StepCandidates candidates;
  PlanProblem problem = buildPlanProblem(
      ProblemInputs{base, &*baseMp, &spec, &model, budgetBytes, waitDistance, movedUpdates,
                    checkpoints},
      candidates);
  problem.unplannedStepSeconds = unplannedTime.stepSeconds;
  if (savedBudgetFraction >= 0)
    savedBudgetBytes =
        int64_t(std::floor(savedBudgetFraction * double(totalSavedBytes(problem))));
  if (savedBudgetBytes >= 0)
    ::offload::planner::withSavedBudget(problem, savedBudgetBytes);
  StepConeModel cones(candidates, model, options.maxConeOps);
  if (!problemFile.empty())
    addStandaloneCones(problem, cones);
  ::offload::planner::Planner planner{problem, cones, options};
  StepChecker checker(getOperation(), base, candidates, problem, spec, model, options,
                      waitDistance,
                      [this](OpPassManager &pm, Operation *op) { return runPipeline(pm, op); });

  // --- Decisions: replayed from a file, or searched --------------------------
  std::optional<SearchResult> result;
  if (!decisionsFile.empty()) {
    FailureOr<SearchResult> replayed = replayDecisions(fn, problem, checker, budgetBytes);
    if (failed(replayed))
      return failure();
    result.emplace(std::move(*replayed));
  } else {
    FailureOr<SearchResult> searched =
        ::offload::planner::search(planner, checker, PlanState(problem, planner.timedLinks()));
    if (failed(searched))
      return failure();
    result.emplace(std::move(*searched));
  }
  if (!result->chosen) {
    if (attempt.quiet) {
      attempt.smallestArena = result->smallest->arenaBytes;
      return failure();
    }
    noPlanFit = true;
    if (failed(checker.ensureStep(static_cast<StepPlan &>(*result->smallest))))
      return failure();
    if (savedBudgetBytes >= 0)
      return noPlanKeepsSaved(fn, problem, keptSavedBytes(*result->smallestState),
                              result->smallest->arenaBytes, spec,
                              jsonSteps ? &*jsonSteps : nullptr);
    return noPlanFits(fn, static_cast<StepPlan &>(*result->smallest).step(),
                      result->smallest->arenaBytes, budgetBytes, spec, attempt.errorNote,
                      jsonSteps ? &*jsonSteps : nullptr);
  }
  auto &chosen = static_cast<StepPlan &>(*result->chosen);
  // Its step built and its prefetches tuned (already, where the search
  // compared it with another run's plan); a failure there was reported.
  ::offload::planner::SimulatedTime plannedTime = checker.tuned(chosen);
  FailureOr<PrefetchTuning> tuned = *chosen.tuning;
  if (failed(tuned))
    return failure();

  // --- The decision problem, for the exact oracle (bench/planner) ----------
  if (!problemFile.empty()) {
    std::string json;
    llvm::raw_string_ostream out(json);
    ::offload::planner::writeProblemJson(out, problem, result->state, result->fallback,
                                         options.tieBreak);
    if (failed(writePlannerFile(fn, problemFile, json, "problem")))
      return failure();
  }

  // --- The report -------------------------------------------------------------
  ::offload::planner::ReportFigures figures;
  figures.planned = plannedTime;
  figures.prefetchesTuned = tuned->moved;
  figures.untunedStepSeconds = tuned->beforeSeconds;
  figures.plansBuilt = int(checker.built);
  figures.planningSeconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - clockStart).count();
  ::offload::planner::DecisionCounts counts =
      ::offload::planner::countDecisions(problem, result->state);
  numRecomputed += counts.recomputed;
  numOffloaded += counts.offloaded;
  numHostParameters += counts.hostParameters;
  figures.slicing = attempt.slicing;
  figures.reportKept = reportKept;
  figures.unplannedArenaBytes = unplannedArena;
  figures.unplannedStepSeconds = unplannedTime.stepSeconds;
  if (report)
    ::offload::planner::writePlanReport(*report, problem, *result, figures);
  if (jsonSteps)
    jsonSteps->push_back(::offload::planner::planReportJson(problem, *result, figures));
  return finish(&chosen);
}
