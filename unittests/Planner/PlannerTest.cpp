//===- PlannerTest.cpp - The planner's parts on synthetic problems --------===//
//
// Part of offload. Drives each algorithm of include/offload/Planner on a
// small problem written by hand (no IR): the live profile, the greedy at
// the peak, the reverse delete, the host-parameter exchange (one for one,
// one for several), the re-plan, shared recompute regions, and the search
// with a checker whose arena is the model's peak plus a set overshoot.
//
//===----------------------------------------------------------------------===//

#include "offload/Planner/Search.h"

#include <gtest/gtest.h>

using namespace offload::planner;

namespace {

/// Cones fixed per candidate; records which candidates are recomputed.
class FixedCones : public ConeModel {
public:
  explicit FixedCones(size_t n) : cones(n), recomputed(n, false) {}
  std::optional<Cone> coneOf(unsigned i) override {
    ++calls;
    return cones[i];
  }
  void setRecomputed(unsigned i, bool r) override { recomputed[i] = r; }
  std::vector<std::optional<Cone>> cones;
  std::vector<bool> recomputed;
  int calls = 0;
};

/// A step of `points` program points at `level` live bytes everywhere,
/// forward over the first half; no link time hides anything unless set.
PlanProblem flatProblem(int64_t points, int64_t level, int64_t budget) {
  PlanProblem p;
  p.step = "synthetic";
  p.target = "test";
  p.budgetBytes = budget;
  p.aimBytes = budget;
  p.baseLive.assign(points, level);
  p.baseArenaBytes = level;
  p.arenaAlignment = 1;
  p.computeSeconds = 1;
  p.forwardSeconds = 0.5;
  p.backwardSeconds = 0.5;
  return p;
}

SavedFacts savedValue(std::string name, int64_t bytes, int64_t lastForward,
                      int64_t firstBackward, bool recomputable, double copySeconds) {
  SavedFacts c;
  c.name = std::move(name);
  c.bytes = c.copyBytes = bytes;
  c.lastForward = lastForward;
  c.firstBackward = firstBackward;
  c.offloadFreed = {lastForward + 1, firstBackward - 1, bytes};
  c.recomputable = recomputable;
  c.toHostSeconds = c.toDeviceSeconds = copySeconds;
  return c;
}

ParamFacts parameter(std::string name, int64_t bytes, int64_t lo, int64_t hi,
                     double updateSeconds) {
  ParamFacts p;
  p.name = std::move(name);
  p.bytes = bytes;
  p.freed.push_back({lo, hi, bytes});
  p.hostUpdateSeconds = updateSeconds;
  return p;
}

Cone cone(double seconds, size_t ops = 1) {
  Cone c;
  c.seconds = seconds;
  c.numOps = ops;
  return c;
}

struct Fixture {
  PlanProblem problem;
  PlannerOptions options;
  FixedCones cones{0};
  void start() { cones = FixedCones(problem.saved.size()); }
  Planner planner() { return Planner{problem, cones, options}; }
};

} // namespace

TEST(LiveProfile, RangeAddAndMax) {
  LiveProfile prof({5, 1, 7, 3});
  EXPECT_EQ(prof.max(), (std::pair<int64_t, int64_t>(7, 2)));
  prof.add(1, 2, -6);
  EXPECT_EQ(prof.max(), (std::pair<int64_t, int64_t>(5, 0)));
  prof.add(3, 10, 4); // clamped to the last point
  std::vector<int64_t> v;
  prof.values(v);
  EXPECT_EQ(v, (std::vector<int64_t>{5, -5, 1, 7}));
  prof.add(3, 2, 100); // empty range
  EXPECT_EQ(prof.max().first, 7);
}

// The links' queues (LinkQueue): with no times, a copy may use any compute
// of its phase (the per-phase window: two 0.4 s copies in a 1 s forward are
// hidden, a third exposes 0.2 s).
TEST(LinkQueue, WithoutTimesIsThePhaseWindow) {
  LinkQueue q(1.0, 1.0);
  LinkCopy fwd{0.4, -1, -1, false};
  q.add(fwd, +1);
  q.add(fwd, +1);
  EXPECT_NEAR(q.exposed(), 0.0, 1e-12);
  EXPECT_NEAR(q.exposedAdding({fwd}), 0.2, 1e-12);
  // Backward's compute does not hide forward's copies.
  EXPECT_NEAR(q.exposedAdding({fwd, LinkCopy{0.5, -1, -1, true}}), 0.2, 1e-12);
  q.add(fwd, -1);
  EXPECT_NEAR(q.exposedAdding({fwd}), 0.0, 1e-12);
}

// exposedAdding is the queue run again with the copies added: the same as
// adding them and reading exposed() (random copies, ties included).
TEST(LinkQueue, AddingMatchesTheRunWithTheCopies) {
  LinkQueue q(1.0, 1.0);
  unsigned seed = 12345;
  auto next = [&](int m) {
    seed = seed * 1103515245u + 12345u;
    return int((seed >> 16) % unsigned(m));
  };
  auto copy = [&] {
    LinkCopy c;
    c.backward = next(2);
    c.issue = next(5) == 0 ? -1 : next(20) / 10.0;
    c.due = next(5) == 0 ? -1 : c.issue + next(10) / 10.0;
    c.seconds = (1 + next(8)) / 20.0;
    return c;
  };
  for (int round = 0; round < 200; ++round) {
    LinkCopy a = copy(), b = copy();
    double before = q.exposed(), one = q.exposedAdding({a}), two = q.exposedAdding({a, b});
    q.add(a, +1);
    EXPECT_NEAR(q.exposed() - before, one, 1e-9);
    q.add(b, +1);
    EXPECT_NEAR(q.exposed() - before, two, 1e-9);
    if (next(3) == 0) {
      q.add(b, -1);
      EXPECT_NEAR(q.exposed() - before, one, 1e-9);
    }
  }
}

// A copy issued late in forward cannot use the compute before its issue,
// and copies queue on the link: two 0.4 s copies issued at 0.8 s and waited
// for at the end of a 1 s forward expose 0.6 s, where the window hid both;
// a prefetch due 0.1 s into backward exposes its last 0.2 s.
TEST(LinkQueue, LateCopiesAreExposed) {
  Fixture f;
  f.problem = flatProblem(10, 100, 70);
  f.problem.forwardSeconds = f.problem.backwardSeconds = 1.0;
  f.problem.computeSeconds = 2.0;
  for (const char *name : {"a", "b"}) {
    SavedFacts c = savedValue(name, 40, 1, 8, /*recomputable=*/false, 0.4);
    c.toHostIssue = 0.8;
    c.toHostDue = 1.0;
    f.problem.saved.push_back(c);
  }
  SavedFacts late = savedValue("c", 10, 1, 8, /*recomputable=*/false, 0.3);
  late.toDeviceIssue = 1.0;
  late.toDeviceDue = 1.1;
  f.problem.saved.push_back(late);
  f.start();
  Planner p = f.planner();
  PlanState s(f.problem);
  // The first alone: 0.4 s from 0.8 s to 1 s.
  EXPECT_NEAR(p.offloadSeconds(s, 0) - 0.01 * 0.8, 0.2, 1e-9);
  s.saved[0].decision = Decision::Offload;
  s.linkOfOffload(0, +1);
  // The second queues behind it: all of its 0.4 s are exposed.
  EXPECT_NEAR(p.offloadSeconds(s, 1) - 0.01 * 0.8, 0.4, 1e-9);
  s.saved[1].decision = Decision::Offload;
  s.linkOfOffload(1, +1);
  EXPECT_NEAR(s.linkExposed(1.0), 0.6, 1e-9);
  // The per-phase window would hide both: 0.8 s of copies in 1 s.
  EXPECT_GT(s.linkExposed(1.0), 0.5);
  // The prefetch: from the start of backward to 0.1 s into it.
  EXPECT_NEAR(p.offloadSeconds(s, 2) - 0.01 * 0.6, 0.2, 1e-9);
  EXPECT_NEAR(p.decisionsSeconds(s), 0.6 + 0.01 * 1.6, 1e-9);
}

// The cheapest per byte first: a recompute of 1 us frees as much as an
// offload whose copies (1 s each way) the half-second phases cannot hide,
// so the greedy recomputes and stops at the aim.
TEST(Greedy, TakesTheCheapestPerByteUntilTheAim) {
  Fixture f;
  f.problem = flatProblem(10, 100, 70);
  f.problem.baseLive = {50, 50, 100, 100, 100, 100, 100, 100, 50, 50};
  f.problem.saved.push_back(savedValue("a", 40, 1, 8, /*recomputable=*/true, 1.0));
  f.problem.saved.push_back(savedValue("b", 40, 1, 8, /*recomputable=*/false, 1.0));
  f.start();
  f.cones.cones[0] = cone(1e-6);
  Planner p = f.planner();
  PlanState s(f.problem);
  ASSERT_TRUE(greedy(p, s, 70));
  EXPECT_EQ(s.saved[0].decision, Decision::Recompute);
  EXPECT_EQ(s.saved[1].decision, Decision::Keep);
  EXPECT_TRUE(f.cones.recomputed[0]);
  EXPECT_EQ(s.profile.max().first, 60);
}

TEST(Greedy, ReportsAnUnreachableAim) {
  Fixture f;
  f.problem = flatProblem(10, 100, 50);
  f.problem.saved.push_back(savedValue("a", 30, -1, 10, false, 1e-6));
  f.start();
  Planner p = f.planner();
  PlanState s(f.problem);
  EXPECT_FALSE(greedy(p, s, 50));
  EXPECT_EQ(s.saved[0].decision, Decision::Offload);
}

// A switch from an offload to a recompute gives the offload's seconds back:
// a negative price. The lazy greedy's re-price compared prices relatively
// (now > seconds * (1 + 1e-12)), which holds for an unchanged negative
// price, and put the choice back into its queue forever (ViT-B/16 on
// h100-sxm at budget=1 never finished). The peak (point 7) is outside the
// points the offload frees (2-5) and inside those the recompute frees.
TEST(Greedy, TakesASwitchWithANegativePrice) {
  Fixture f;
  f.problem = flatProblem(10, 100, 1);
  f.problem.baseLive = {50, 50, 100, 100, 100, 100, 100, 120, 50, 50};
  SavedFacts a = savedValue("a", 40, 1, 8, /*recomputable=*/true, 1.0);
  a.offloadFreed = {2, 5, 40};
  f.problem.saved.push_back(a);
  f.start();
  f.cones.cones[0] = cone(1e-6);
  Planner p = f.planner();
  PlanState s(f.problem);
  s.saved[0].decision = Decision::Offload;
  s.saved[0].seconds = p.offloadSeconds(s, 0);
  ASSERT_GT(s.saved[0].seconds, 1e-6);
  s.linkOfOffload(0, +1);
  s.profileOfSaved(0, -1);
  EXPECT_FALSE(greedy(p, s, 1)); // the aim is out of reach: it must end
  EXPECT_EQ(s.saved[0].decision, Decision::Recompute);
  EXPECT_EQ(s.profile.max().first, 80); // points 2-7 freed: 120 -> 80 at point 7
}

// Reverse delete: of two decisions that each meet the aim alone, the more
// expensive is given back.
TEST(GiveBack, UndoesTheMostExpensiveUnneededDecision) {
  Fixture f;
  f.problem = flatProblem(10, 100, 70);
  f.problem.saved.push_back(savedValue("cheap", 40, -1, 10, true, 1));
  f.problem.saved.push_back(savedValue("dear", 40, -1, 10, true, 1));
  f.start();
  Planner p = f.planner();
  PlanState s(f.problem);
  for (unsigned i : {0u, 1u}) {
    s.saved[i].decision = Decision::Recompute;
    s.saved[i].seconds = i == 0 ? 1 : 5;
    s.profileOfSaved(i, -1);
    f.cones.setRecomputed(i, true);
  }
  giveBack(p, s, 70);
  EXPECT_EQ(s.saved[0].decision, Decision::Recompute);
  EXPECT_EQ(s.saved[1].decision, Decision::Keep);
  EXPECT_FALSE(f.cones.recomputed[1]);
  EXPECT_LE(s.profile.max().first, 70);
}

// One for one: a costly host parameter is exchanged for a cheaper one that
// frees the same peak.
TEST(HostMoves, ExchangesOneForACheaperOne) {
  Fixture f;
  f.problem = flatProblem(10, 100, 70);
  f.problem.params.push_back(parameter("dear", 40, 0, 9, 5e-3));
  f.problem.params.push_back(parameter("cheap", 40, 0, 9, 1e-3));
  f.start();
  Planner p = f.planner();
  PlanState s(f.problem);
  s.params[0].decision = Decision::Host;
  s.profileOfParam(0, -1);
  exchangeHostParameters(p, s, 70);
  EXPECT_EQ(s.params[0].decision, Decision::Keep);
  EXPECT_EQ(s.params[1].decision, Decision::Host);
  EXPECT_LE(s.profile.max().first, 70);
}

// One for several: a large parameter's bytes found among two small ones
// that together cost less (no single swap can do it).
TEST(HostMoves, ExchangesOneForSeveral) {
  Fixture f;
  f.problem = flatProblem(10, 100, 60);
  f.problem.params.push_back(parameter("large", 40, 0, 9, 10e-3));
  f.problem.params.push_back(parameter("small1", 20, 0, 9, 2e-3));
  f.problem.params.push_back(parameter("small2", 20, 0, 9, 2e-3));
  f.start();
  Planner p = f.planner();
  PlanState s(f.problem);
  s.params[0].decision = Decision::Host;
  s.profileOfParam(0, -1);
  exchangeHostParameters(p, s, 60);
  EXPECT_EQ(s.params[0].decision, Decision::Keep);
  EXPECT_EQ(s.params[1].decision, Decision::Host);
  EXPECT_EQ(s.params[2].decision, Decision::Host);
  EXPECT_EQ(s.profile.max().first, 60);
}

// Ruin and recreate: without the costly host parameter, the greedy covers
// the peak with a recompute for less; the cheaper plan is kept.
TEST(HostMoves, ReplanFindsACheaperCover) {
  Fixture f;
  f.problem = flatProblem(10, 100, 60);
  f.problem.params.push_back(parameter("dear", 40, 0, 9, 10e-3));
  f.problem.saved.push_back(savedValue("act", 40, -1, 10, true, 1));
  f.start();
  f.cones.cones[0] = cone(1e-3);
  Planner p = f.planner();
  PlanState s(f.problem);
  s.params[0].decision = Decision::Host;
  s.profileOfParam(0, -1);
  double before = p.decisionsSeconds(s);
  replanHostParameters(p, s, 60);
  EXPECT_EQ(s.params[0].decision, Decision::Keep);
  EXPECT_FALSE(s.params[0].banned);
  EXPECT_EQ(s.saved[0].decision, Decision::Recompute);
  EXPECT_LT(p.decisionsSeconds(s), before);
}

// Re-plan keeps the state (and the cones' availability) when nothing
// cheaper is found.
TEST(HostMoves, ReplanRestoresWhenNotCheaper) {
  Fixture f;
  f.problem = flatProblem(10, 100, 60);
  f.problem.params.push_back(parameter("cheap", 40, 0, 9, 1e-3));
  f.problem.saved.push_back(savedValue("act", 40, -1, 10, true, 1));
  f.start();
  f.cones.cones[0] = cone(10e-3);
  Planner p = f.planner();
  PlanState s(f.problem);
  s.params[0].decision = Decision::Host;
  s.profileOfParam(0, -1);
  replanHostParameters(p, s, 60);
  EXPECT_EQ(s.params[0].decision, Decision::Host);
  EXPECT_EQ(s.saved[0].decision, Decision::Keep);
  EXPECT_FALSE(f.cones.recomputed[0]);
}

// A recomputed value whose cone a region used earlier reruns is held from
// that region instead of recomputed again: one group.
TEST(SharedRegions, HoldsAValueFromTheRegionThatRerunsIt) {
  Fixture f;
  f.problem = flatProblem(12, 100, 100);
  f.problem.saved.push_back(savedValue("u", 10, 1, 9, true, 1));
  f.problem.saved.push_back(savedValue("j", 10, 2, 6, true, 1));
  f.start();
  Planner p = f.planner();
  PlanState s(f.problem);
  f.cones.cones[0] = cone(2e-6);
  for (unsigned i : {0u, 1u}) {
    s.saved[i].decision = Decision::Recompute;
    s.profileOfSaved(i, -1);
  }
  s.saved[1].through = {0}; // j's region reruns u
  s.registerReader(1);
  shareRecomputes(p, s, 100);
  EXPECT_EQ(s.saved[1].group, 1);
  EXPECT_EQ(s.saved[0].group, 1);
  EXPECT_EQ(s.saved[0].holdFrom, 6);
  // u is now live from j's region at 6 to its own use at 9; before, its
  // own region freed it up to 8.
  std::vector<int64_t> live;
  s.profile.values(live);
  EXPECT_EQ(live[7], 100);
  EXPECT_EQ(live[4], 100 - 20);
  unshareAll(s);
  EXPECT_EQ(s.saved[0].group, -1);
  s.profile.values(live);
  EXPECT_EQ(live[7], 100 - 10);
}

// A value that anchors a group of its own (a value merged into its region
// before its own merge came up) joins the region that reruns it, with the
// values it held: one region reruns the chain once. a (region at 9) is in
// b's cone (region at 7), b in c's (region at 5); a's merge has the larger
// saving, so it is taken first and b anchors {a} when b's merge comes up.
TEST(SharedRegions, AnAnchorJoinsTheRegionThatRerunsIt) {
  Fixture f;
  f.problem = flatProblem(12, 100, 100);
  f.problem.saved.push_back(savedValue("a", 10, 1, 9, true, 1));
  f.problem.saved.push_back(savedValue("b", 10, 2, 7, true, 1));
  f.problem.saved.push_back(savedValue("c", 10, 3, 5, true, 1));
  f.start();
  f.cones.cones[0] = cone(3e-6);
  f.cones.cones[1] = cone(1e-6);
  f.cones.cones[2] = cone(4e-6);
  Planner p = f.planner();
  PlanState s(f.problem);
  for (unsigned i : {0u, 1u, 2u}) {
    s.saved[i].decision = Decision::Recompute;
    s.profileOfSaved(i, -1);
  }
  s.saved[1].through = {0};    // b's region reruns a
  s.saved[2].through = {1, 0}; // c's region reruns b and a
  s.registerReader(1);
  s.registerReader(2);
  shareRecomputes(p, s, 100);
  for (unsigned i : {0u, 1u, 2u})
    EXPECT_EQ(s.saved[i].group, 2) << i;
  EXPECT_EQ(s.saved[0].holdFrom, 5);
  EXPECT_EQ(s.saved[1].holdFrom, 5);
  EXPECT_EQ(s.saved[2].holdFrom, -1);
  // Held from c's region at 5: a and b are live again from 5 on.
  std::vector<int64_t> live;
  s.profile.values(live);
  EXPECT_EQ(live[5], 100);
  EXPECT_EQ(live[4], 70);
  // Where the aim does not allow the holds, nothing moves: a stays in b's
  // group only if holding it from b's region fits.
  unshareAll(s);
  shareRecomputes(p, s, 95);
  for (unsigned i : {0u, 1u, 2u})
    EXPECT_EQ(s.saved[i].group, -1) << i;
}

// Under a saved budget, two regions that rerun a common recomputed value,
// neither rerunning the other's values (the merges by reader do not join
// them), become one region at the earlier one's point: w (region at 9) is
// in the cones of x (region at 5) and y (region at 7). By reader, w joins
// y's region, the last before its use; then y's region, which reruns w
// again, joins x's, and the chain through w runs once. Under an arena
// budget alone the second merge is not made.
TEST(SharedRegions, RegionsRerunningACommonValueMerge) {
  for (bool saved : {true, false}) {
    Fixture f;
    f.problem = flatProblem(12, 100, 100);
    f.problem.saved.push_back(savedValue("w", 10, 1, 9, true, 1));
    f.problem.saved.push_back(savedValue("x", 10, 2, 5, true, 1));
    f.problem.saved.push_back(savedValue("y", 10, 3, 7, true, 1));
    if (saved)
      withSavedBudget(f.problem, 0);
    f.start();
    for (unsigned i : {0u, 1u, 2u})
      f.cones.cones[i] = cone(1e-6);
    Planner p = f.planner();
    PlanState s(f.problem);
    for (unsigned i : {0u, 1u, 2u}) {
      s.saved[i].decision = Decision::Recompute;
      s.saved[i].seconds = 1e-6;
      s.profileOfSaved(i, -1);
    }
    s.saved[1].through = {0}; // x's region reruns w
    s.saved[2].through = {0}; // so does y's
    s.registerReader(1);
    s.registerReader(2);
    shareRecomputes(p, s, 100);
    if (saved) {
      for (unsigned i : {0u, 1u, 2u})
        EXPECT_EQ(s.saved[i].group, 1) << i;
      EXPECT_EQ(s.saved[0].holdFrom, 5);
      EXPECT_EQ(s.saved[1].holdFrom, -1);
      EXPECT_EQ(s.saved[2].holdFrom, 5);
    } else {
      EXPECT_EQ(s.saved[0].group, 2);
      EXPECT_EQ(s.saved[0].holdFrom, 7);
      EXPECT_EQ(s.saved[1].group, -1);
      EXPECT_EQ(s.saved[2].group, 2);
      EXPECT_EQ(s.saved[2].holdFrom, -1);
    }
  }
}

namespace {
/// Cones that run through checkpoint 0 (an intermediate of u's and j's
/// cones) until it is saved, then stop there: 1e-3 s each through it,
/// 2e-4 s from it.
class CheckpointCones : public ConeModel {
public:
  std::optional<Cone> coneOf(unsigned i) override {
    Cone c = cone(saved ? 2e-4 : 1e-3, saved ? 2 : 5);
    (saved ? c.checkpointsRead : c.checkpointsThrough).push_back(0);
    return c;
  }
  void setRecomputed(unsigned, bool) override {}
  void setCheckpoint(unsigned k, bool s) override { saved = s; }
  bool saved = false;
};

/// 12 points at 100 bytes, 80 from u's region at 9 on (where a checkpoint
/// is live too); u (20 bytes, last forward use 1, region at 9) and a
/// second saved value `second`; checkpoint 0 (15 bytes, made and last used
/// at 1) in u's cone.
PlanProblem checkpointProblem(SavedFacts second) {
  PlanProblem problem = flatProblem(12, 100, 100);
  for (int64_t q = 9; q < 12; ++q)
    problem.baseLive[size_t(q)] = 80;
  problem.saved.push_back(savedValue("u", 20, 1, 9, true, 1));
  problem.saved.push_back(std::move(second));
  CheckpointFacts c;
  c.name = "linear x";
  c.bytes = 15;
  c.point = c.lastForward = 1;
  c.producerSeconds = 8e-4;
  problem.checkpoints.push_back(c);
  return problem;
}
} // namespace

// Checkpoints beyond the saved values: a forward value both recomputed
// regions rerun is saved, and their cones stop there, when its bytes fit
// under the aim from its last forward use to the later region; else not.
TEST(Checkpoints, SavedWhereTheyFitAndSaveSeconds) {
  PlanProblem problem = checkpointProblem(savedValue("j", 10, 2, 7, true, 1));
  PlannerOptions options;
  CheckpointCones cones;
  Planner p{problem, cones, options};
  PlanState s(problem);
  for (unsigned i : {0u, 1u}) {
    s.saved[i].decision = Decision::Recompute;
    s.saved[i].seconds = 1e-3;
    s.profileOfSaved(i, -1);
  }
  // Room for it: u's 20 bytes freed over [2, 8] (and j's 10 over [3, 6]),
  // its 15 held over [2, 9].
  checkpointRecomputes(p, s, 100);
  ASSERT_TRUE(s.checkpoints[0].saved);
  EXPECT_EQ(s.checkpoints[0].holdTo, 9);
  EXPECT_NEAR(s.checkpoints[0].secondsSaved, 2 * 8e-4, 1e-12);
  EXPECT_NEAR(s.saved[0].seconds + s.saved[1].seconds, 4e-4, 1e-12);
  std::vector<int64_t> live;
  s.profile.values(live);
  EXPECT_EQ(live[2], 100 - 20 + 15);
  EXPECT_EQ(live[5], 100 - 30 + 15);
  EXPECT_EQ(live[9], 80 + 15);
  EXPECT_EQ(live[10], 80);
  EXPECT_TRUE(cones.saved);
  // Given back: the cones run through it again, the profile as before.
  uncheckpointAll(p, s);
  EXPECT_FALSE(s.checkpoints[0].saved);
  EXPECT_FALSE(cones.saved);
  EXPECT_NEAR(s.saved[0].seconds + s.saved[1].seconds, 2e-3, 1e-12);
  s.profile.values(live);
  EXPECT_EQ(live[5], 100 - 30);
  // An aim it does not fit under: nothing changes.
  checkpointRecomputes(p, s, 90);
  EXPECT_FALSE(s.checkpoints[0].saved);
  EXPECT_FALSE(cones.saved);
  EXPECT_NEAR(s.saved[0].seconds + s.saved[1].seconds, 2e-3, 1e-12);
  s.profile.values(live);
  EXPECT_EQ(live[5], 100 - 30);
}

// The checkpoint re-plan: a checkpoint whose bytes do not fit as the
// decisions stand is taken anyway, and the greedy frees them elsewhere (w,
// offloaded almost for free); kept since the price falls (the region stops
// at the checkpoint: 1e-3 -> 2e-4 s).
TEST(Checkpoints, ReplanMakesRoomWithTheGreedy) {
  PlanProblem problem = checkpointProblem(savedValue("w", 20, 1, 9, false, 1e-5));
  for (int64_t q = 2; q <= 8; ++q)
    problem.baseLive[size_t(q)] = 120;
  PlannerOptions options;
  CheckpointCones cones;
  Planner p{problem, cones, options};
  PlanState s(problem);
  s.saved[0].decision = Decision::Recompute;
  s.saved[0].seconds = 1e-3;
  s.profileOfSaved(0, -1);
  ASSERT_EQ(s.profile.max().first, 100);
  // As the decisions stand there is no room.
  checkpointRecomputes(p, s, 100);
  EXPECT_FALSE(s.checkpoints[0].saved);
  double before = p.decisionsSeconds(s);
  replanCheckpoints(p, s, 100);
  ASSERT_TRUE(s.checkpoints[0].saved);
  EXPECT_EQ(s.saved[1].decision, Decision::Offload);
  EXPECT_LE(s.profile.max().first, 100);
  EXPECT_LT(p.decisionsSeconds(s), before);
  EXPECT_NEAR(s.saved[0].seconds, 2e-4, 1e-12);
}

namespace {
/// A plan whose arena is the model's peak plus `overshoot` while the
/// profile is above `tightBelow` (the real plan fragments more at the top).
class FakePlan : public CheckedPlan {
public:
  double seconds = 0;
};
class FakeChecker : public PlanChecker {
public:
  FakeChecker(Planner &p, int64_t overshoot) : p(p), overshoot(overshoot) {}
  llvm::FailureOr<std::unique_ptr<CheckedPlan>> build(const PlanState &s, Refetch) override {
    ++builds;
    auto plan = std::make_unique<FakePlan>();
    plan->arenaBytes = s.profile.max().first + overshoot;
    plan->peakBytes = s.profile.max().first;
    plan->seconds = 1 + p.decisionsSeconds(s);
    return std::unique_ptr<CheckedPlan>(std::move(plan));
  }
  SimulatedTime simulate(CheckedPlan &plan) override {
    return {static_cast<FakePlan &>(plan).seconds, 0};
  }
  Planner &p;
  int64_t overshoot;
  int builds = 0;
};
} // namespace

// The real arena overshoots the model by 5 bytes: the search aims lower by
// the overshoot and finds a plan that fits.
TEST(Search, AimsLowerByTheOvershoot) {
  Fixture f;
  f.problem = flatProblem(10, 100, 70);
  for (int k = 0; k < 4; ++k)
    f.problem.saved.push_back(savedValue("v" + std::to_string(k), 10, -1, 10, true, 1));
  f.start();
  for (int k = 0; k < 4; ++k)
    f.cones.cones[k] = cone(1e-6 * (k + 1));
  Planner p = f.planner();
  FakeChecker checker(p, 5);
  llvm::FailureOr<SearchResult> r = search(p, checker, PlanState(f.problem));
  ASSERT_TRUE(llvm::succeeded(r));
  ASSERT_TRUE(r->chosen);
  EXPECT_LE(r->chosen->arenaBytes, 70);
  EXPECT_FALSE(r->fallback);
  EXPECT_GE(r->checks, 2);
  // The first run, then the randomised restarts (none faster here).
  ASSERT_EQ(r->runs.size(), 1u + f.options.perturbedRuns);
  EXPECT_TRUE(r->runs[0].kept);
  for (size_t k = 1; k < r->runs.size(); ++k)
    EXPECT_EQ(r->runs[k].perturbSeed, k);
  EXPECT_EQ(checker.builds, r->checks);
}

// The greedy's cost-effectiveness takes b (15 bytes for 1.4 s), then
// needs c (5 bytes for 1.0 s): 2.4 s in all, where a alone (20 bytes,
// 2.0 s) covers the excess, and the reverse delete cannot undo it (the
// weighted set-cover greedy's known gap). A randomised restart, whose
// perturbed prices take a first, finds it; without restarts the search
// keeps the greedy's cover. The restarts are reproducible.
TEST(Search, RestartsFindTheCoverTheGreedyMisses) {
  Fixture f;
  f.problem = flatProblem(10, 100, 80);
  f.problem.saved.push_back(savedValue("a", 20, -1, 10, true, 10));
  f.problem.saved.push_back(savedValue("b", 15, -1, 10, true, 10));
  f.problem.saved.push_back(savedValue("c", 5, -1, 10, true, 10));
  auto plan = [&](size_t restarts) {
    f.start();
    f.cones.cones[0] = cone(2.0);
    f.cones.cones[1] = cone(1.4);
    f.cones.cones[2] = cone(1.0);
    f.options.perturbedRuns = restarts;
    Planner p = f.planner();
    FakeChecker checker(p, 0);
    llvm::FailureOr<SearchResult> r = search(p, checker, PlanState(f.problem));
    EXPECT_TRUE(llvm::succeeded(r));
    return r;
  };
  auto decisions = [](const SearchResult &r) {
    std::string d;
    for (const SavedChoice &c : r.state.saved)
      d += c.decision == Decision::Recompute ? 'R' : c.decision == Decision::Keep ? 'k' : 'o';
    return d;
  };
  llvm::FailureOr<SearchResult> greedy = plan(0);
  ASSERT_TRUE(llvm::succeeded(greedy) && greedy->chosen);
  EXPECT_EQ(decisions(*greedy), "kRR");
  EXPECT_NEAR(static_cast<FakePlan &>(*greedy->chosen).seconds, 1 + 2.4, 1e-9);

  llvm::FailureOr<SearchResult> restarted = plan(4);
  ASSERT_TRUE(llvm::succeeded(restarted) && restarted->chosen);
  EXPECT_EQ(decisions(*restarted), "Rkk");
  EXPECT_NEAR(static_cast<FakePlan &>(*restarted->chosen).seconds, 1 + 2.0, 1e-9);
  const RunLog *kept = nullptr;
  for (const RunLog &run : restarted->runs)
    if (run.kept)
      kept = &run;
  ASSERT_TRUE(kept);
  EXPECT_NE(kept->perturbSeed, 0u);

  llvm::FailureOr<SearchResult> again = plan(4);
  ASSERT_TRUE(llvm::succeeded(again) && again->chosen);
  EXPECT_EQ(decisions(*again), decisions(*restarted));
}

// A run's plan faster before the prefetch tuning replaces the kept one only
// if it is faster tuned too: here the greedy's cover (3.4 s) tunes to 2.8 s,
// and the restart's (3.0 s) does not tune, so the greedy's is kept.
TEST(Search, RunsAreComparedTuned) {
  class TuningChecker : public FakeChecker {
  public:
    using FakeChecker::FakeChecker;
    SimulatedTime tuned(CheckedPlan &plan) override {
      ++tunings;
      double t = static_cast<FakePlan &>(plan).seconds;
      return {t > 3.2 ? t - 0.6 : t, 0};
    }
    int tunings = 0;
  };
  Fixture f;
  f.problem = flatProblem(10, 100, 80);
  f.problem.saved.push_back(savedValue("a", 20, -1, 10, true, 10));
  f.problem.saved.push_back(savedValue("b", 15, -1, 10, true, 10));
  f.problem.saved.push_back(savedValue("c", 5, -1, 10, true, 10));
  f.start();
  f.cones.cones[0] = cone(2.0);
  f.cones.cones[1] = cone(1.4);
  f.cones.cones[2] = cone(1.0);
  f.options.perturbedRuns = 4;
  Planner p = f.planner();
  TuningChecker checker(p, 0);
  llvm::FailureOr<SearchResult> r = search(p, checker, PlanState(f.problem));
  ASSERT_TRUE(llvm::succeeded(r) && r->chosen);
  EXPECT_NEAR(static_cast<FakePlan &>(*r->chosen).seconds, 1 + 2.4, 1e-9);
  EXPECT_EQ(r->state.saved[0].decision, Decision::Keep);
  EXPECT_TRUE(r->runs[0].kept);
  EXPECT_GE(checker.tunings, 2);
}

// Nothing fits: the fallback's smallest arena is reported.
TEST(Search, ReportsTheSmallestArenaWhenNothingFits) {
  Fixture f;
  f.problem = flatProblem(10, 100, 50);
  f.problem.saved.push_back(savedValue("v", 30, -1, 10, false, 1e-6));
  f.start();
  Planner p = f.planner();
  FakeChecker checker(p, 0);
  llvm::FailureOr<SearchResult> r = search(p, checker, PlanState(f.problem));
  ASSERT_TRUE(llvm::succeeded(r));
  EXPECT_FALSE(r->chosen);
  ASSERT_TRUE(r->smallest);
  EXPECT_EQ(r->smallest->arenaBytes, 70);
}

// The step fits once early updates run: one check, no decision.
TEST(Search, BaseThatFitsIsCheckedOnce) {
  Fixture f;
  f.problem = flatProblem(10, 100, 200);
  f.problem.baseArenaBytes = 150;
  f.start();
  Planner p = f.planner();
  FakeChecker checker(p, 0);
  llvm::FailureOr<SearchResult> r = search(p, checker, PlanState(f.problem));
  ASSERT_TRUE(llvm::succeeded(r));
  ASSERT_TRUE(r->chosen);
  EXPECT_EQ(checker.builds, 1);
  EXPECT_TRUE(r->runs.empty());
}

// A large step (no bisection) aims first below the budget by the base
// step's packing fragmentation (arena 125 over a peak of 100: 80%).
TEST(Search, LargeStepAimsBelowTheFragmentation) {
  Fixture f;
  f.options.finePoints = 4;
  f.problem = flatProblem(10, 100, 70);
  f.problem.basePackedBytes = 125;
  for (int k = 0; k < 5; ++k)
    f.problem.saved.push_back(savedValue("v" + std::to_string(k), 10, -1, 10, true, 1));
  f.start();
  for (int k = 0; k < 5; ++k)
    f.cones.cones[k] = cone(1e-6);
  Planner p = f.planner();
  FakeChecker checker(p, 0);
  llvm::FailureOr<SearchResult> r = search(p, checker, PlanState(f.problem));
  ASSERT_TRUE(llvm::succeeded(r));
  ASSERT_TRUE(r->chosen);
  ASSERT_FALSE(r->runs.empty());
  EXPECT_EQ(r->runs[0].checks.front().first, 56);
  f.options.predictFragmentation = false;
  FakeChecker again(p, 0);
  llvm::FailureOr<SearchResult> r2 = search(p, again, PlanState(f.problem));
  ASSERT_TRUE(llvm::succeeded(r2));
  EXPECT_EQ(r2->runs[0].checks.front().first, 70);
}

// A large step runs the rounds once; where its plan keeps a host parameter,
// the re-plan runs once more from that plan at its aim (replanChosen), up
// to options.replanChosenPoints points. Here the parameter is the cheapest
// cover (40 bytes at every point for 1 ms of host update, against a
// recompute of 2 ms), so the re-plan's plan is not kept.
TEST(Search, LargeStepReplansItsHostParameters) {
  auto runs = [](int64_t replanPoints) {
    Fixture f;
    f.options.finePoints = 4;
    f.options.predictFragmentation = false;
    f.options.replanChosenPoints = replanPoints;
    f.problem = flatProblem(10, 100, 60);
    f.problem.params.push_back(parameter("w", 40, 0, 9, 1e-3));
    f.problem.saved.push_back(savedValue("act", 40, -1, 10, true, 100));
    f.start();
    f.cones.cones[0] = cone(2e-3);
    Planner p = f.planner();
    FakeChecker checker(p, 0);
    llvm::FailureOr<SearchResult> r = search(p, checker, PlanState(f.problem));
    EXPECT_TRUE(llvm::succeeded(r));
    EXPECT_TRUE(r->chosen);
    EXPECT_EQ(r->state.params[0].decision, Decision::Host);
    EXPECT_EQ(checker.builds, r->checks);
    return r->runs;
  };
  llvm::SmallVector<RunLog> with = runs(8192);
  ASSERT_EQ(with.size(), 2u);
  EXPECT_EQ(with[0].moves, HostMoves::None);
  EXPECT_TRUE(with[0].kept);
  EXPECT_EQ(with[1].moves, HostMoves::ExchangeAndReplan);
  EXPECT_FALSE(with[1].kept);
  // Past replanChosenPoints (the 10k-op planning-time target), one run.
  EXPECT_EQ(runs(9).size(), 1u);
}

namespace {
/// A checker whose real arena is `base` less `freesEach` per decision that
/// is not keep, whatever the model says; its step is 1 s plus each
/// offload's copies and each recompute's cone.
class DecisionChecker : public PlanChecker {
public:
  DecisionChecker(FixedCones &cones, int64_t base, int64_t freesEach)
      : cones(cones), base(base), freesEach(freesEach) {}
  llvm::FailureOr<std::unique_ptr<CheckedPlan>> build(const PlanState &s, Refetch) override {
    ++builds;
    auto plan = std::make_unique<FakePlan>();
    plan->arenaBytes = base;
    plan->seconds = 1;
    for (auto [i, c] : llvm::enumerate(s.saved)) {
      if (c.decision == Decision::Keep)
        continue;
      plan->arenaBytes -= freesEach;
      plan->seconds += c.decision == Decision::Offload
                           ? s.problem->saved[i].toHostSeconds + s.problem->saved[i].toDeviceSeconds
                           : cones.cones[i]->seconds;
    }
    plan->peakBytes = plan->arenaBytes;
    return std::unique_ptr<CheckedPlan>(std::move(plan));
  }
  SimulatedTime simulate(CheckedPlan &plan) override {
    return {static_cast<FakePlan &>(plan).seconds, 0};
  }
  FixedCones &cones;
  int64_t base, freesEach;
  int builds = 0;
};
} // namespace

// The model sees no candidate freeing bytes at its peak, so only the
// fallback (every value offloaded) fits; the real arena then has room. The
// give-back switches the offloads to the cheaper recomputes, then gives
// back the dearest ones the budget does not need: two of four.
TEST(Search, FallbackGivesBackWhatTheRealArenaDoesNotNeed) {
  Fixture f;
  f.problem = flatProblem(10, 100, 70);
  for (int k = 6; k < 10; ++k)
    f.problem.baseLive[k] = 50;
  for (int k = 0; k < 4; ++k)
    f.problem.saved.push_back(savedValue("v" + std::to_string(k), 20, 6, 8, true, 1));
  f.start();
  for (int k = 0; k < 4; ++k)
    f.cones.cones[k] = cone(0.1 * (k + 1));
  Planner p = f.planner();
  DecisionChecker checker(f.cones, 100, 20);
  llvm::FailureOr<SearchResult> r = search(p, checker, PlanState(f.problem));
  ASSERT_TRUE(llvm::succeeded(r));
  ASSERT_TRUE(r->chosen);
  EXPECT_TRUE(r->fallback);
  EXPECT_LE(r->chosen->arenaBytes, 70);
  EXPECT_EQ(r->state.saved[0].decision, Decision::Recompute);
  EXPECT_EQ(r->state.saved[1].decision, Decision::Recompute);
  EXPECT_EQ(r->state.saved[2].decision, Decision::Keep);
  EXPECT_EQ(r->state.saved[3].decision, Decision::Keep);
  EXPECT_DOUBLE_EQ(static_cast<FakePlan &>(*r->chosen).seconds, 1.3);
}

// A saved budget (PlanProblem::savedBudgetBytes, withSavedBudget): the
// profile is the saved values' bytes alone, parameters offer nothing, and
// the search keeps the kept saved bytes at most the saved budget (the
// cheapest cones recomputed), with the arena checked against the budget.
TEST(Search, SavedBudgetBoundsKeptSavedBytes) {
  Fixture f;
  f.problem = flatProblem(10, 100, 1000);
  for (int k = 0; k < 4; ++k)
    f.problem.saved.push_back(savedValue("v" + std::to_string(k), 10, -1, 10, true, 1e-3));
  f.problem.params.push_back(parameter("w", 50, 0, 9, 1e-9));
  withSavedBudget(f.problem, 15);
  EXPECT_EQ(f.problem.aimBytes, 15);
  EXPECT_EQ(f.problem.baseLive[3], 40);
  EXPECT_TRUE(f.problem.params[0].freed.empty());
  EXPECT_EQ(totalSavedBytes(f.problem), 40);
  f.start();
  for (int k = 0; k < 4; ++k)
    f.cones.cones[k] = cone(1e-6 * (k + 1));
  Planner p = f.planner();
  FakeChecker checker(p, 0);
  llvm::FailureOr<SearchResult> r = search(p, checker, PlanState(f.problem));
  ASSERT_TRUE(llvm::succeeded(r));
  ASSERT_TRUE(r->chosen);
  EXPECT_EQ(keptSavedBytes(r->state), 10);
  for (int k = 0; k < 3; ++k)
    EXPECT_EQ(r->state.saved[k].decision, Decision::Recompute) << k;
  EXPECT_EQ(r->state.saved[3].decision, Decision::Keep);
  EXPECT_EQ(r->state.params[0].decision, Decision::Keep);
}

// A saved value whose first backward use directly follows its last forward
// use frees nothing in the profile, so the greedy never offers it; at saved
// budget 0 the fallback recomputes it (it is then not saved: rerun at its
// backward use). When the device arena cannot fit the budget, nothing fits
// and the smallest plan's kept saved bytes are what the error names.
TEST(Search, SavedBudgetZeroTakesTheFallback) {
  Fixture f;
  f.problem = flatProblem(10, 100, 1000);
  f.problem.saved.push_back(savedValue("free", 10, -1, 10, true, 1e-3));
  f.problem.saved.push_back(savedValue("stuck", 7, 4, 5, true, 1e-3));
  withSavedBudget(f.problem, 0);
  f.start();
  f.cones.cones[0] = f.cones.cones[1] = cone(1e-6);
  Planner p = f.planner();
  FakeChecker checker(p, 0);
  llvm::FailureOr<SearchResult> r = search(p, checker, PlanState(f.problem));
  ASSERT_TRUE(llvm::succeeded(r));
  ASSERT_TRUE(r->chosen);
  EXPECT_TRUE(r->fallback);
  EXPECT_EQ(keptSavedBytes(r->state), 0);
  EXPECT_EQ(r->state.saved[1].decision, Decision::Recompute);

  // The fake arena is the profile's peak plus 2000: over the budget always.
  FakeChecker over(p, 2000);
  f.cones = FixedCones(2);
  f.cones.cones[0] = f.cones.cones[1] = cone(1e-6);
  r = search(p, over, PlanState(f.problem));
  ASSERT_TRUE(llvm::succeeded(r));
  EXPECT_FALSE(r->chosen);
  ASSERT_TRUE(r->smallest);
  EXPECT_GT(r->smallest->arenaBytes, f.problem.budgetBytes);
}

// Under a saved budget the greedy's cheapest-per-byte order misses the
// cover a knapsack finds: 20 bytes to free from a (20 bytes, 2.0 s), b (15
// bytes, 1.4 s) and c (5 bytes, 1.0 s); the greedy takes b then c (2.4 s),
// the knapsack a alone (2.0 s). The search keeps the knapsack's run. (The
// copies take 100 s: no offload.)
TEST(Knapsack, CoversWithTheFewestSeconds) {
  Fixture f;
  f.problem = flatProblem(10, 100, 1000);
  f.problem.saved.push_back(savedValue("a", 20, -1, 10, true, 100));
  f.problem.saved.push_back(savedValue("b", 15, -1, 10, true, 100));
  f.problem.saved.push_back(savedValue("c", 5, -1, 10, true, 100));
  withSavedBudget(f.problem, 20);
  f.start();
  f.cones.cones[0] = cone(2.0);
  f.cones.cones[1] = cone(1.4);
  f.cones.cones[2] = cone(1.0);
  f.options.perturbedRuns = 0;
  Planner p = f.planner();
  {
    PlanState s(f.problem);
    ASSERT_TRUE(greedy(p, s, 20));
    EXPECT_EQ(s.saved[0].decision, Decision::Keep);
    EXPECT_EQ(s.saved[1].decision, Decision::Recompute);
    EXPECT_EQ(s.saved[2].decision, Decision::Recompute);
  }
  {
    PlanState s(f.problem);
    f.cones.sync(s);
    ASSERT_TRUE(knapsack(p, s, 20));
    EXPECT_EQ(s.saved[0].decision, Decision::Recompute);
    EXPECT_EQ(s.saved[1].decision, Decision::Keep);
    EXPECT_EQ(s.saved[2].decision, Decision::Keep);
    EXPECT_EQ(keptSavedBytes(s), 20);
  }
  f.cones.sync(PlanState(f.problem));
  FakeChecker checker(p, 0);
  llvm::FailureOr<SearchResult> r = search(p, checker, PlanState(f.problem));
  ASSERT_TRUE(llvm::succeeded(r));
  ASSERT_TRUE(r->chosen);
  EXPECT_EQ(r->state.saved[0].decision, Decision::Recompute);
  EXPECT_EQ(r->state.saved[1].decision, Decision::Keep);
  bool knapsackKept = false;
  for (const RunLog &run : r->runs)
    knapsackKept |= run.knapsack && run.kept;
  EXPECT_TRUE(knapsackKept);
}

// Bytes in exact units where the candidates' common divisor allows: 3000
// bytes to free from a, b and c (1000 bytes, 1 s each) or d (3000 bytes,
// 10 s). In units of demand / 1024 (3 bytes) each of a, b and c counted
// 333 units of the 1000 needed, so only d covered; in units of 1000 bytes
// a, b and c cover exactly.
TEST(Knapsack, CountsBytesExactlyWhereItCan) {
  Fixture f;
  f.problem = flatProblem(10, 100, 100000);
  for (const char *name : {"a", "b", "c"})
    f.problem.saved.push_back(savedValue(name, 1000, -1, 10, true, 100));
  f.problem.saved.push_back(savedValue("d", 3000, -1, 10, true, 100));
  withSavedBudget(f.problem, 3000);
  f.start();
  for (unsigned i : {0u, 1u, 2u})
    f.cones.cones[i] = cone(1.0);
  f.cones.cones[3] = cone(10.0);
  Planner p = f.planner();
  PlanState s(f.problem);
  f.cones.sync(s);
  ASSERT_TRUE(knapsack(p, s, 3000));
  for (unsigned i : {0u, 1u, 2u})
    EXPECT_EQ(s.saved[i].decision, Decision::Recompute) << i;
  EXPECT_EQ(s.saved[3].decision, Decision::Keep);
  EXPECT_EQ(keptSavedBytes(s), 3000);
}
