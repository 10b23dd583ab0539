//===- Search.cpp - The planner's search over real checks -----------------===//
//
// Part of offload. See Search.h and docs/planner.md ("Formulation and
// algorithm").
//
//===----------------------------------------------------------------------===//

#include "offload/Planner/Search.h"

#include "llvm/ADT/STLExtras.h"

#include <algorithm>
#include <limits>

using namespace offload::planner;

CheckedPlan::~CheckedPlan() = default;
PlanChecker::~PlanChecker() = default;

namespace {

using Plan = std::unique_ptr<CheckedPlan>;

/// The search's mutable context: the planner, the checker, the state the
/// algorithms move, and what it has found so far.
struct Searcher {
  Planner &p;
  PlanChecker &checker;
  PlanState state;
  SearchResult &out;

  /// What the search holds against PlanProblem::checkedBudgetBytes: the plan's
  /// device arena, or with a saved budget its decisions' kept saved bytes.
  int64_t measure(const CheckedPlan &plan, const PlanState &decisions) const {
    return p.problem.hasSavedBudget() ? keptSavedBytes(decisions) : plan.arenaBytes;
  }
  /// Bytes over the budget (fits at <= 0): the arena over the budget, and
  /// with a saved budget the kept saved bytes over it too (the arena must
  /// still fit).
  int64_t over(const CheckedPlan &plan, const PlanState &decisions) const {
    int64_t arenaOver = plan.arenaBytes - p.problem.budgetBytes;
    if (!p.problem.hasSavedBudget())
      return arenaOver;
    return std::max(arenaOver, keptSavedBytes(decisions) - p.problem.savedBudgetBytes);
  }

  /// The smallest measure seen that does not fit, for the error, with the
  /// decisions that built it.
  void keepSmallest(Plan plan, const PlanState &decisions) {
    if (!out.smallest || measure(*plan, decisions) < measure(*out.smallest, *out.smallestState)) {
      out.smallest = std::move(plan);
      out.smallestState = decisions;
    }
  }

  /// The link calibration's trigger and weight for the current decisions
  /// and their plan's simulated time: the stall (compute waiting for
  /// copies) over the unhidden link seconds the prices assumed, when that
  /// is over options.stallTrigger and the stall over options.stallShare of
  /// the step; else 0.
  double stallRatio(const SimulatedTime &tl) const {
    double assumed = state.linkWaits(p.linkWeight);
    if (!(tl.stallSeconds > p.options.stallTrigger * assumed &&
          tl.stallSeconds > p.options.stallShare * tl.stepSeconds))
      return 0.0;
    return assumed > 0 ? tl.stallSeconds / assumed : std::numeric_limits<double>::infinity();
  }

  /// The first aim: the problem's, less the base step's packing
  /// fragmentation in proportion on a large step (options).
  int64_t firstAim() const {
    const PlanProblem &pr = p.problem;
    if (p.small() || !p.options.predictFragmentation || pr.basePackedBytes <= 0 ||
        pr.baseLive.empty())
      return pr.aimBytes;
    int64_t peak = *std::max_element(pr.baseLive.begin(), pr.baseLive.end());
    if (peak <= 0 || peak >= pr.basePackedBytes)
      return pr.aimBytes;
    return int64_t(double(pr.aimBytes) * double(peak) / double(pr.basePackedBytes));
  }
  bool decideJudged(int64_t aimBytes, HostMoves moves);
  llvm::FailureOr<std::optional<Plan>> runRounds(HostMoves moves);
  llvm::FailureOr<bool> bisect(HostMoves moves, Plan &fit, int64_t lo, int64_t hi);
  llvm::LogicalResult runAgain(HostMoves moves, const PlanState &initial, SimulatedTime &chosenTime,
                               size_t &keptRun);
  llvm::LogicalResult replanChosen(SimulatedTime &chosenTime, size_t &keptRun);
  void keepFaster(std::optional<Plan> other, PlanState keptState, SimulatedTime &chosenTime,
                  size_t &keptRun);
  llvm::LogicalResult fallback();
  llvm::LogicalResult giveBack();
  llvm::LogicalResult reach();
};

} // namespace

// One aim's decisions (decide). Where the links are timed (a large step),
// the greedy runs twice from the same start: with the timed queues' prices
// and with the per-phase windows' (every copy anywhere in its phase; the
// planner before the queues), and the decisions the timed queues price
// lower are kept (one that reaches the aim over one that does not). The
// greedy is myopic: taking the copies that queue least first, with the
// timed prices, it took host parameters where offloads had saturated the
// link, and GPT-2 1.5B at 23 GB (fp32, h100-sxm) came out at 2.891 s where
// the windows' decisions, which the queues price 0.1 s lower, simulate at
// 2.823 s; with the windows' prices alone, at 42.7 GB, 2.215 s where the
// timed greedy's give 2.174 s.
bool Searcher::decideJudged(int64_t aimBytes, HostMoves moves) {
  if (!state.timedLinks || !p.options.windowGreedyToo)
    return decide(p, state, aimBytes, moves);
  PlanState start = state;
  bool reached = decide(p, state, aimBytes, moves);
  double timedPrice = p.decisionsSeconds(state);
  PlanState timed = state;
  p.restore(state, std::move(start));
  state.setTimedLinks(false);
  bool windowReached = decide(p, state, aimBytes, moves);
  state.setTimedLinks(true);
  double windowPrice = p.decisionsSeconds(state);
  if (windowReached > reached || (windowReached == reached && windowPrice < timedPrice))
    return windowReached;
  p.restore(state, std::move(timed));
  return reached;
}

// The greedy, then the real check; aim lower by the overshoot until it fits
// (at most options.maxRounds checks). On a small step the aim is then
// bisected (bisect). An empty optional when nothing fit.
llvm::FailureOr<std::optional<Plan>> Searcher::runRounds(HostMoves moves) {
  int64_t roundAim = firstAim(), overAim = -1;
  std::optional<Plan> fit;
  out.runs.push_back(RunLog{moves, p.linkWeight, p.checkpointReplan, {}, -1, 0, false});
  out.runs.back().perturbSeed = p.perturbSeed;
  out.runs.back().knapsack = p.useKnapsack;
  for (int round = 1; round <= p.options.maxRounds; ++round) {
    ++out.checks;
    bool reached = decideJudged(roundAim, moves);
    llvm::FailureOr<Plan> plan = checker.build(state, Refetch::Auto);
    if (llvm::failed(plan))
      return llvm::failure();
    out.runs.back().checks.push_back({roundAim, measure(**plan, state)});
    int64_t overshoot = over(**plan, state);
    if (overshoot <= 0) {
      fit = std::move(*plan);
      break;
    }
    keepSmallest(std::move(*plan), state);
    if (!reached)
      break;
    // The model met the aim but the real arena did not meet the budget
    // (fragmentation, prefetch placement): aim below the model's peak by
    // the overshoot.
    overAim = roundAim;
    roundAim = std::min(roundAim, state.profile.max().first) -
               std::max<int64_t>(overshoot, p.problem.arenaAlignment);
  }
  if (!fit || !p.small())
    return fit;
  if (llvm::failed(bisect(moves, *fit, roundAim, overAim)))
    return llvm::failure();
  return fit;
}

// Aiming lower by the overshoot lands below the budget by as much again
// where the real arena tracks the model's peak loosely (the Transformer
// example at 46% of its arena: a 705,708-byte model peak was a 773,892-byte
// arena, and the plan at the aim 68 KB lower fit with 33 KB to spare, each
// byte of it paid for in recomputes and host parameters). So the aim is
// bisected between the last aim that fit (`lo`) and the one that did not
// (`hi`), from the fitting state, and the plan with the shortest simulated
// step is kept. Where no aim overshot (hi < 0), the aim first climbs by the
// real arena's slack under the budget (resnet18 at 31% of its arena: a
// model peak of 44.9 MB was a 38.6 MB arena under a 44.7 MB budget). Ends
// with `state` at `fit`'s decisions.
llvm::FailureOr<bool> Searcher::bisect(HostMoves moves, Plan &fit, int64_t lo, int64_t hi) {
  double fitSeconds = checker.simulate(*fit).stepSeconds;
  PlanState fitState = state, lastFit = fitState;
  int64_t resolution =
      std::max<int64_t>(2 * p.problem.arenaAlignment, p.problem.checkedBudgetBytes() / p.options.aimResolutionDivisor);
  int64_t lastSlack = -over(*fit, state);
  for (int k = 0; k < p.options.reclaimChecks; ++k) {
    int64_t mid;
    if (hi < 0) {
      int64_t slack = lastSlack;
      if (slack <= resolution)
        break;
      mid = lo + slack;
    } else {
      if (hi - lo <= resolution)
        break;
      mid = lo + (hi - lo) / 2;
    }
    ++out.checks;
    decide(p, state, mid, moves);
    llvm::FailureOr<Plan> plan = checker.build(state, Refetch::Auto);
    if (llvm::failed(plan))
      return llvm::failure();
    out.runs.back().checks.push_back({mid, measure(**plan, state)});
    if (over(**plan, state) > 0) {
      hi = mid;
      p.restore(state, lastFit);
      continue;
    }
    lo = mid;
    lastSlack = -over(**plan, state);
    lastFit = state;
    double seconds = checker.simulate(**plan).stepSeconds;
    if (seconds < fitSeconds) {
      fit = std::move(*plan);
      fitSeconds = seconds;
      fitState = lastFit;
    }
  }
  p.restore(state, std::move(fitState));
  return true;
}

// One more run of the rounds from the same start; its plan is kept when it
// fits and simulates faster.
llvm::LogicalResult Searcher::runAgain(HostMoves moves, const PlanState &initial,
                                       SimulatedTime &chosenTime, size_t &keptRun) {
  PlanState keptState = state;
  p.restore(state, initial);
  llvm::FailureOr<std::optional<Plan>> other = runRounds(moves);
  if (llvm::failed(other))
    return llvm::failure();
  keepFaster(std::move(*other), std::move(keptState), chosenTime, keptRun);
  return llvm::success();
}

// The last run's plan (none: nothing fit) against the chosen one: logged,
// and kept, with `state` at its decisions, where it simulates faster both
// untuned and tuned; otherwise `state` goes back to `keptState`. A plan
// faster untuned can tune slower: ViT-B/16 bf16-mixed at 1.99 GB on
// h100-sxm, a restart's plan 0.1543 s untuned against 0.1598 s, tuned
// 0.1534 s against 0.1442 s. (The chosen plan is tuned after the search in
// any case.)
void Searcher::keepFaster(std::optional<Plan> other, PlanState keptState,
                          SimulatedTime &chosenTime, size_t &keptRun) {
  SimulatedTime time = other ? checker.simulate(**other) : SimulatedTime();
  if (other) {
    RunLog &run = out.runs.back();
    run.seconds = time.stepSeconds;
    run.arena = (*other)->arenaBytes;
    run.stallRatio = stallRatio(time);
  }
  if (other && time.stepSeconds < chosenTime.stepSeconds &&
      checker.tuned(**other).stepSeconds < checker.tuned(*out.chosen).stepSeconds) {
    out.chosen = std::move(*other);
    chosenTime = time;
    keptRun = out.runs.size() - 1;
  } else {
    p.restore(state, std::move(keptState));
  }
}

// On a larger step the rounds run once, so the host-parameter moves that a
// small step's search runs again from the start are tried from the chosen
// plan instead: `decide` with the re-plan at the aim that plan fit at,
// starting from its decisions (the greedy then has nothing to take, the
// re-plan covers each host parameter it puts back with a few takes), one
// more plan built, kept where it fits and simulates faster. GPT-2 1.5B at
// 23.0 GB on h100-sxm: 4 host parameters (0.49 GB, 0.072 s of host AdamW)
// where the exact oracle's plan, built with the real passes, offloads
// 0.44 GB more instead, 2.724 s against our 2.823 s; re-planned, 2.760 s.
llvm::LogicalResult Searcher::replanChosen(SimulatedTime &chosenTime, size_t &keptRun) {
  if (out.runs[keptRun].checks.empty())
    return llvm::success();
  int64_t aim = out.runs[keptRun].checks.back().first;
  PlanState keptState = state;
  out.runs.push_back(RunLog{HostMoves::ExchangeAndReplan, p.linkWeight, p.checkpointReplan, {},
                            -1, 0, false});
  ++out.checks;
  decide(p, state, aim, HostMoves::ExchangeAndReplan);
  llvm::FailureOr<Plan> plan = checker.build(state, Refetch::Auto);
  if (llvm::failed(plan))
    return llvm::failure();
  out.runs.back().checks.push_back({aim, measure(**plan, state)});
  std::optional<Plan> fit;
  if (over(**plan, state) <= 0)
    fit = std::move(*plan);
  keepFaster(std::move(fit), std::move(keptState), chosenTime, keptRun);
  return llvm::success();
}

// Nothing the rounds found fits: the most the mechanisms can do, two ways
// (every saved value offloaded, or recomputed where it can be), with every
// parameter on the host, on top of the rounds' decisions and from scratch;
// parameters fetched again for backward rather than kept on the device in
// between (the fewest bytes, whatever the link costs). The smallest arena
// of these and of the rounds' attempts is the smallest reachable.
llvm::LogicalResult Searcher::fallback() {
  for (int variant = 0; variant < 4; ++variant) {
    bool preferRecompute = variant % 2, fromScratch = variant >= 2;
    PlanState all = state;
    for (auto [i, c] : llvm::enumerate(all.saved))
      if (fromScratch || c.decision == Decision::Keep) {
        c.decision = preferRecompute && p.problem.saved[i].recomputable ? Decision::Recompute
                                                                        : Decision::Offload;
        c.why = "the smallest reachable arena";
      }
    for (ParamChoice &q : all.params)
      if (fromScratch || q.decision == Decision::Keep) {
        q.decision = Decision::Host;
        q.why = "the smallest reachable arena";
      }
    all.relink(); // the price of the plan (problem= file, the give-back)
    llvm::FailureOr<Plan> plan = checker.build(all, Refetch::Always);
    if (llvm::failed(plan))
      return llvm::failure();
    bool fits = over(**plan, all) <= 0;
    if (fits && (!out.chosen || measure(**plan, all) < measure(*out.chosen, state))) {
      // Later variants start from the decisions of the one kept.
      out.chosen = std::move(*plan);
      state = std::move(all);
    } else if (!fits) {
      keepSmallest(std::move(*plan), all);
    }
  }
  out.fallback = bool(out.chosen);
  if (out.chosen)
    return giveBack();
  return llvm::success();
}

// The fallback's plan takes every decision there is, whatever it costs;
// the real arena it packs into can lie well under the budget, and the
// live-bytes model cannot say which decisions it could do without (its
// offloads count from their prefetch, which a tight arena places later:
// ResNet-50 at its 3.96 GB floor, a model peak of 7.35 GB). So decisions
// are relaxed against the real arena instead, in two passes: offloads of
// recomputable values switched to recomputes, cheapest cone per byte first
// (the link is what the all-offload plan waits for); then decisions given
// back, dearest per byte first (a host parameter's update and copies, an
// offload's two copies, a recompute's cone, over the bytes it frees). In
// each pass the longest prefix whose plan still fits is found by
// bisection, then again on what is left past the change that broke it,
// within options.giveBackChecks real checks in all. A plan is kept when it
// fits and its simulated step is shorter.
llvm::LogicalResult Searcher::giveBack() {
  struct Change {
    bool param;
    unsigned index;
    Decision to;
    double key; // larger first
  };
  double bestSeconds = checker.simulate(*out.chosen).stepSeconds;
  PlanState best = state;
  int checksLeft = int(std::clamp<int64_t>(
      p.options.giveBackWork / std::max<int64_t>(1, p.problem.numPoints()),
      std::min(p.options.giveBackMinChecks, p.options.giveBackChecks), p.options.giveBackChecks));
  auto apply = [&](const std::vector<Change> &order, size_t from, size_t k) {
    PlanState t = best;
    for (size_t i = from; i < from + k; ++i) {
      const Change &c = order[i];
      if (c.param) {
        t.params[c.index].decision = c.to;
        t.params[c.index].why.clear();
      } else {
        t.saved[c.index].decision = c.to;
        t.saved[c.index].why = c.to == Decision::Recompute ? "the smallest reachable arena" : "";
      }
    }
    t.relink(); // the queues' copies follow the decisions set here
    return t;
  };
  auto pass = [&](std::vector<Change> order) -> llvm::LogicalResult {
    llvm::stable_sort(order, [](const Change &a, const Change &b) { return a.key > b.key; });
    size_t from = 0;
    while (from < order.size() && checksLeft > 0) {
      // The longest prefix of order[from, end) whose plan fits: lo fits
      // (nothing changed), hi does not (or is past the end).
      size_t lo = 0, hi = order.size() - from + 1;
      std::unique_ptr<CheckedPlan> fit;
      PlanState fitState = best;
      while (hi - lo > 1 && checksLeft > 0) {
        size_t mid = lo + (hi - lo) / 2;
        PlanState t = apply(order, from, mid);
        --checksLeft;
        ++out.checks;
        llvm::FailureOr<Plan> plan = checker.build(t, Refetch::Always);
        if (llvm::failed(plan))
          return llvm::failure();
        if (over(**plan, t) <= 0) {
          lo = mid;
          fit = std::move(*plan);
          fitState = std::move(t);
        } else {
          hi = mid;
        }
      }
      if (fit) {
        double seconds = checker.simulate(*fit).stepSeconds;
        if (seconds < bestSeconds) {
          bestSeconds = seconds;
          out.chosen = std::move(fit);
          best = std::move(fitState);
        } else {
          // Fits, but slower: what follows in this order is dearer still.
          return llvm::success();
        }
      }
      from += lo + 1; // past the prefix taken and the change that broke it
    }
    return llvm::success();
  };
  std::vector<Change> toRecompute;
  p.cones.sync(best);
  for (auto [i, c] : llvm::enumerate(best.saved)) {
    const SavedFacts &f = p.problem.saved[i];
    if (c.decision != Decision::Offload || !f.recomputable || f.bytes <= 0)
      continue;
    std::optional<Cone> cone = p.cones.coneOf(unsigned(i));
    if (cone)
      toRecompute.push_back({false, unsigned(i), Decision::Recompute,
                             -cone->seconds / double(f.bytes)});
  }
  if (llvm::failed(pass(std::move(toRecompute))))
    return llvm::failure();
  std::vector<Change> toKeep;
  p.cones.sync(best);
  for (auto [i, c] : llvm::enumerate(best.saved)) {
    const SavedFacts &f = p.problem.saved[i];
    if (c.decision == Decision::Keep || f.bytes <= 0)
      continue;
    double seconds = f.toHostSeconds + f.toDeviceSeconds;
    if (c.decision == Decision::Recompute) {
      std::optional<Cone> cone = p.cones.coneOf(unsigned(i));
      seconds = cone ? cone->seconds : c.seconds;
    }
    toKeep.push_back({false, unsigned(i), Decision::Keep, seconds / double(f.bytes)});
  }
  for (auto [j, q] : llvm::enumerate(best.params)) {
    const ParamFacts &f = p.problem.params[j];
    if (q.decision != Decision::Host || f.bytes + f.stateBytes <= 0)
      continue;
    double seconds = f.hostUpdateSeconds + f.toDeviceSeconds + f.toHostSeconds;
    toKeep.push_back({true, unsigned(j), Decision::Keep, seconds / double(f.bytes + f.stateBytes)});
  }
  if (llvm::failed(pass(std::move(toKeep))))
    return llvm::failure();
  state = std::move(best);
  p.cones.sync(state);
  return llvm::success();
}

// Nothing fits even the most the mechanisms can do from this search's
// decisions. The rounds' aims and the fallback's start depend on the
// budget, so the smallest arena this search built is not one a search at
// that arena's budget builds again (the gpt example, AdamW, fp16-mixed: a
// refusal at budget=1 named 2,372,868 bytes, and the search at budget
// 2,372,868 reached 2,373,124 at best). The smallest reachable arena is
// therefore defined by one search, the search at budget 1 byte (where
// nothing fits, so it tries everything the rounds and the fallback try):
// it is run here and its smallest arena replaces this search's; when it
// fits the budget, it is the plan (a fallback plan), so that every budget
// from the figure a refusal names up plans. Only where this search found
// nothing: plans at budgets that fit before are unchanged.
llvm::LogicalResult Searcher::reach() {
  PlanProblem reachProblem = p.problem;
  if (reachProblem.hasSavedBudget()) {
    // The fewest kept saved bytes, in a device arena that fits.
    reachProblem.savedBudgetBytes = reachProblem.aimBytes = 0;
  } else {
    reachProblem.aimBytes -= reachProblem.budgetBytes - kReachBudgetBytes;
    reachProblem.budgetBytes = kReachBudgetBytes;
  }
  Planner rp{reachProblem, p.cones, p.options};
  PlanState initial(reachProblem, p.timedLinks());
  p.cones.sync(initial);
  llvm::FailureOr<SearchResult> r = search(rp, checker, std::move(initial));
  if (llvm::failed(r))
    return llvm::failure();
  out.checks += r->checks;
  if (r->chosen) {
    // With a saved budget, a plan keeping no saved bytes at all fits the
    // search at 0 (at a budget of 1 byte, nothing does).
    out.chosen = std::move(r->chosen);
    state = std::move(r->state);
    state.problem = &p.problem;
    out.fallback = true;
    p.cones.sync(state);
    return llvm::success();
  }
  if (!r->smallest)
    return llvm::success();
  out.smallest = std::move(r->smallest);
  out.smallestState = std::move(r->smallestState);
  out.smallestState->problem = &p.problem;
  if (over(*out.smallest, *out.smallestState) <= 0) {
    out.chosen = std::move(out.smallest);
    state = std::move(*out.smallestState);
    out.smallestState.reset();
    out.fallback = true;
  }
  p.cones.sync(state);
  return llvm::success();
}

llvm::FailureOr<SearchResult> offload::planner::search(Planner &p, PlanChecker &checker,
                                                       PlanState initial) {
  SearchResult out(p.problem);
  Searcher s{p, checker, std::move(initial), out};
  if (p.problem.baseArenaBytes <= p.problem.budgetBytes &&
      (!p.problem.hasSavedBudget() ||
       totalSavedBytes(p.problem) <= p.problem.savedBudgetBytes)) {
    // Early updates alone fit.
    llvm::FailureOr<Plan> plan = checker.build(s.state, Refetch::Auto);
    if (llvm::failed(plan))
      return llvm::failure();
    out.chosen = std::move(*plan);
    out.state = s.state;
    return out;
  }
  std::optional<PlanState> start;
  if (p.small())
    start = s.state;
  llvm::FailureOr<std::optional<Plan>> first = s.runRounds(HostMoves::None);
  if (llvm::failed(first))
    return llvm::failure();
  SimulatedTime chosenTime;
  size_t keptRun = 0;
  if (*first) {
    out.chosen = std::move(**first);
    chosenTime = checker.simulate(*out.chosen);
    RunLog &run = out.runs.back();
    run.seconds = chosenTime.stepSeconds;
    run.arena = out.chosen->arenaBytes;
    run.stallRatio = s.stallRatio(chosenTime);
  }
  // A larger step runs the rounds once; where its plan keeps host
  // parameters, the re-plan (replanHostParameters: each host parameter,
  // the costliest first, put back and the greedy run again around it) from
  // that plan's decisions at its aim, the faster plan kept (replanChosen),
  // on steps of up to options.replanChosenPoints points.
  if (!start && out.chosen && s.state.anyHost() &&
      p.problem.numPoints() <= p.options.replanChosenPoints)
    if (llvm::failed(s.replanChosen(chosenTime, keptRun)))
      return llvm::failure();
  // The rounds again from the same start with more host-parameter moves
  // (the exchange, then the exchange and the re-plan), when the first plan
  // has host parameters; the plan with the shortest simulated step is kept.
  // (The moves are judged in the model at one aim, and the rounds after
  // them may aim elsewhere, so a gain in the model does not always survive
  // the simulator: with the exchange, the Transformer example at 46% of its
  // arena simulated 8% slower and resnet18 at 54% 22% faster.)
  if (start && out.chosen && s.state.anyHost())
    for (HostMoves moves : {HostMoves::Exchange, HostMoves::ExchangeAndReplan})
      if (llvm::failed(s.runAgain(moves, *start, chosenTime, keptRun)))
        return llvm::failure();
  // Link calibration: the fastest run whose plan's simulated stall is well
  // above the unhidden link time its prices assumed runs once more with
  // unhidden link seconds weighted by the ratio (at most
  // options.maxLinkWeight), and the exchange alone after it if that run
  // also re-planned. (resnet18 at 54% of its arena: 1174% -> 1153%; the gpt
  // example at 60%: 106% -> 57%.)
  if (start && out.chosen) {
    std::optional<size_t> calibrate;
    for (auto [i, run] : llvm::enumerate(out.runs))
      if (run.seconds >= 0 && run.stallRatio > 0 &&
          (!calibrate || run.seconds < out.runs[*calibrate].seconds))
        calibrate = i;
    if (calibrate) {
      p.linkWeight = std::min(p.options.maxLinkWeight, out.runs[*calibrate].stallRatio);
      HostMoves uncalibrated = out.runs[*calibrate].moves;
      llvm::LogicalResult ran = s.runAgain(uncalibrated, *start, chosenTime, keptRun);
      if (llvm::succeeded(ran) && uncalibrated == HostMoves::ExchangeAndReplan)
        ran = s.runAgain(HostMoves::Exchange, *start, chosenTime, keptRun);
      p.linkWeight = 1;
      if (llvm::failed(ran))
        return llvm::failure();
    }
  }
  // Checkpoints re-planned (Checkpoints.cpp, replanCheckpoints): each run
  // that found a plan once more, with the checkpoints whose bytes do not fit
  // as the decisions stand each tried with the greedy again around it; a
  // plan kept where it simulates faster (resnet18 at 45% of its arena on
  // h100-sxm: 6.905 -> 6.475 ms; the 44-row reference set 0.9978x in
  // geomean, bench/planner/refset.py). As part of every run instead, it made
  // the gpt example at 60% slower: 17.18 -> 18.20 us.
  if (start && out.chosen && !p.problem.checkpoints.empty() &&
      p.options.checkpointReplans > 0) {
    llvm::SmallVector<std::pair<HostMoves, double>> runs;
    for (const RunLog &run : out.runs)
      if (run.seconds >= 0)
        runs.push_back({run.moves, run.linkWeight});
    p.checkpointReplan = true;
    for (auto [moves, weight] : runs) {
      p.linkWeight = weight;
      if (llvm::failed(s.runAgain(moves, *start, chosenTime, keptRun))) {
        p.checkpointReplan = false;
        return llvm::failure();
      }
    }
    p.checkpointReplan = false;
    p.linkWeight = 1;
  }
  // Randomised restarts (`restarts=`, options.perturbedRuns): the fastest
  // run's moves, link weight and checkpoint re-plan again, with the greedy's
  // prices and ties perturbed per candidate (Planner::perturbSeed), as a
  // GRASP-style search restarts a greedy; a plan kept where it simulates
  // faster. The greedy's order decides which values a later peak leaves it
  // to recompute, and where many choices cost nothing (memory traffic
  // free) it ties: resnet18 at 0.4 of PyTorch's saved bytes on the
  // FLOPs-priced target, 61.6 -> 42.9 us. On the 44-row reference set
  // (refset.py), with runAgain comparing tuned plans: 0.9882x in geomean,
  // 11 rows faster (gpt at 30, 35, 45 and 50%: -7 to -11%; resnet18 on
  // rtx-4090 at 40%: -8%), none slower; planning 8.7 -> 13.1 s for the 44.
  {
    size_t restarts = p.options.perturbedRuns;
    if (start && out.chosen && restarts > 0) {
      const RunLog &fastest = out.runs[keptRun];
      HostMoves moves = fastest.moves;
      p.linkWeight = fastest.linkWeight;
      p.checkpointReplan = fastest.checkpoints;
      for (size_t k = 1; k <= restarts; ++k) {
        p.perturbSeed = k;
        if (llvm::failed(s.runAgain(moves, *start, chosenTime, keptRun))) {
          p.perturbSeed = 0;
          return llvm::failure();
        }
      }
      p.perturbSeed = 0;
      p.checkpointReplan = false;
      p.linkWeight = 1;
    }
  }
  // Under a saved budget, the knapsack's runs (Knapsack.cpp): the first
  // decisions by the knapsack's dynamic program instead of the greedy, with
  // and without the checkpoint re-plan; a plan kept where it simulates
  // faster. The transformer and gpt examples and resnet18 at PyTorch's saved
  // bytes on the FLOPs-priced target (bench/planner/pytorch_partitioner.py,
  // 44 points): see docs/planner.md, "A saved budget".
  if (start && out.chosen && p.problem.hasSavedBudget()) {
    p.useKnapsack = true;
    for (bool replan : {false, true}) {
      if (replan && p.problem.checkpoints.empty())
        continue;
      p.checkpointReplan = replan;
      if (llvm::failed(s.runAgain(HostMoves::None, *start, chosenTime, keptRun))) {
        p.useKnapsack = p.checkpointReplan = false;
        return llvm::failure();
      }
    }
    p.useKnapsack = p.checkpointReplan = false;
  }
  if (out.chosen) {
    out.runs[keptRun].kept = true;
    out.smallest.reset();
    out.state = s.state;
    return out;
  }
  if (llvm::failed(s.fallback()))
    return llvm::failure();
  bool reachSearch = p.problem.hasSavedBudget() ? p.problem.savedBudgetBytes == 0
                                                : p.problem.budgetBytes <= kReachBudgetBytes;
  if (!out.chosen && !reachSearch && llvm::failed(s.reach()))
    return llvm::failure();
  if (out.chosen) {
    out.smallest.reset();
    out.smallestState.reset();
  }
  out.state = s.state;
  return out;
}
