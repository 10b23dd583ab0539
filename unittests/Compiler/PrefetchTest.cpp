//===- PrefetchTest.cpp - tunePrefetches against the simulation -----------===//
//
// Part of offload. The tuning of placed prefetches (Prefetch.h) on the MLP
// step with every saved value and parameter on the host and each copy
// issued right at its use (prefetch-distance=0, so compute waits for all of
// them): the tuning shortens the simulated step, never raises the peak,
// keeps every copy between its operands and its wait, and puts every copy
// back when the caller's arena check fails.
//
//===----------------------------------------------------------------------===//

#include "offload/Dialect/Offload/Analysis/MemoryPlan.h"
#include "offload/Dialect/Offload/Analysis/Target.h"
#include "offload/Dialect/Offload/Analysis/Timeline.h"
#include "offload/Dialect/Offload/IR/OffloadDialect.h"
#include "offload/Dialect/Offload/IR/OffloadOps.h"
#include "offload/Dialect/Offload/Transforms/Passes.h"
#include "offload/Dialect/Offload/Transforms/Prefetch.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "gtest/gtest.h"

#include <string>

using namespace mlir;
using namespace mlir::offload;

namespace {

#ifndef OFFLOAD_SOURCE_DIR
#error "OFFLOAD_SOURCE_DIR must name the source tree (unittests/Compiler/CMakeLists.txt)"
#endif
constexpr const char *kMlp = OFFLOAD_SOURCE_DIR "/test/Inputs/mlp-forward.mlir";

class PrefetchTuningTest : public ::testing::Test {
protected:
  void SetUp() override {
    registry.insert<OffloadDialect, func::FuncDialect>();
    registerOffloadPasses();
    module = OwningOpRef<ModuleOp>(); // before the context it lives in
    ctx = std::make_unique<MLIRContext>(registry);
    module = parseSourceFile<ModuleOp>(kMlp, ctx.get());
    ASSERT_TRUE(module);
    PassManager pm(ctx.get());
    ASSERT_TRUE(succeeded(parsePassPipeline(
        "offload-autodiff{optimizer=sgd lr=0.1},"
        "offload-host-offload{policy=all prefetch-distance=0 target=h100-sxm},"
        "offload-host-parameters{policy=all prefetch-distance=0 target=h100-sxm}",
        pm)));
    ASSERT_TRUE(succeeded(pm.run(*module)));
    fn = *module->getOps<func::FuncOp>().begin();
    std::string error;
    FailureOr<TargetSpec> spec = resolveTarget("h100-sxm", error);
    ASSERT_TRUE(succeeded(spec)) << error;
    target = TargetModel::fromSpec(*spec);
  }

  std::string print() {
    std::string s;
    llvm::raw_string_ostream os(s);
    fn.print(os);
    return s;
  }

  DialectRegistry registry;
  std::unique_ptr<MLIRContext> ctx;
  OwningOpRef<ModuleOp> module;
  func::FuncOp fn;
  TargetModel target;
};

TEST_F(PrefetchTuningTest, ShortensTheStepWithoutRaisingThePeak) {
  Timeline before = simulateTimeline(fn, target);
  ASSERT_GT(before.stallSeconds, 0) << "every copy at its use must stall compute";
  FailureOr<MemoryPlan> mpBefore = computeMemoryPlan(fn);
  ASSERT_TRUE(succeeded(mpBefore));

  FailureOr<PrefetchTuning> tuned = tunePrefetches(fn, target, [] { return true; });
  ASSERT_TRUE(succeeded(tuned));
  EXPECT_GT(tuned->moved, 0u);
  EXPECT_DOUBLE_EQ(tuned->beforeSeconds, before.stepSeconds);
  EXPECT_LT(tuned->afterSeconds, tuned->beforeSeconds);
  // The figure it reports is the simulation of the IR it leaves.
  EXPECT_DOUBLE_EQ(simulateTimeline(fn, target).stepSeconds, tuned->afterSeconds);
  ASSERT_TRUE(succeeded(verify(fn)));
  FailureOr<MemoryPlan> mpAfter = computeMemoryPlan(fn);
  ASSERT_TRUE(succeeded(mpAfter));
  EXPECT_LE(mpAfter->peakDeviceBytes, mpBefore->peakDeviceBytes);

  // Every copy stays after its operands' definitions and before its wait,
  // in its phase, and its prefetch_distance counts the compute ops between.
  Operation *phase = nullptr;
  for (Operation &op : fn.getBody().front()) {
    if (isa<PhaseOp>(op))
      phase = &op;
    auto copy = dyn_cast<ToDeviceOp>(op);
    if (!copy)
      continue;
    for (Value v : copy->getOperands()) {
      if (Operation *def = v.getDefiningOp()) {
        EXPECT_TRUE(def->isBeforeInBlock(copy));
      }
    }
    Operation *wait = *copy.getAsyncToken().getUsers().begin();
    EXPECT_TRUE(copy->isBeforeInBlock(wait));
    ASSERT_NE(phase, nullptr);
    int64_t distance = 0;
    for (Operation *o = copy->getNextNode(); o != wait; o = o->getNextNode())
      distance += isComputeForDistance(o);
    EXPECT_EQ(copy.getPrefetchDistance().value_or(-1), distance);
  }
}

TEST_F(PrefetchTuningTest, PutsEveryCopyBackWhenTheArenaNoLongerFits) {
  std::string original = print();
  int checks = 0;
  FailureOr<PrefetchTuning> tuned = tunePrefetches(fn, target, [&] {
    ++checks;
    return false;
  });
  ASSERT_TRUE(succeeded(tuned));
  EXPECT_GT(checks, 0);
  EXPECT_EQ(tuned->moved, 0u);
  EXPECT_DOUBLE_EQ(tuned->afterSeconds, tuned->beforeSeconds);
  EXPECT_EQ(print(), original);
}

TEST_F(PrefetchTuningTest, KeepsTheMovesUpToTheLastThatFits) {
  // The arena check fails with every move in and passes with fewer: the
  // bisection keeps a shorter run of the first moves, and the IR simulates
  // as reported.
  FailureOr<PrefetchTuning> all = tunePrefetches(fn, target, [] { return true; });
  ASSERT_TRUE(succeeded(all));
  ASSERT_GT(all->moved, 1u) << "needs two moves or more";
  unsigned allMoved = all->moved;

  SetUp(); // the same step again, untuned
  int checks = 0;
  FailureOr<PrefetchTuning> some = tunePrefetches(fn, target, [&] {
    // The first call sees every move applied: refuse it; accept fewer.
    return ++checks > 1;
  });
  ASSERT_TRUE(succeeded(some));
  EXPECT_LT(some->moved, allMoved);
  EXPECT_GT(some->moved, 0u);
  EXPECT_LT(some->afterSeconds, some->beforeSeconds);
  EXPECT_DOUBLE_EQ(simulateTimeline(fn, target).stepSeconds, some->afterSeconds);
}

} // namespace
