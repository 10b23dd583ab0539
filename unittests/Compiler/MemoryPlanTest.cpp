//===- MemoryPlanTest.cpp - the memory plan with regions read in place ----===//
//
// Part of offload. computeMemoryPlanInPlace (MemoryPlan.h) reads a step's
// recompute regions where they are; computeMemoryPlan inlines them into a
// copy first. The planner's checks, prefetch placement and tuning take the
// first, the lowering the second, so the two must give the same plan: the
// same buffers in the same order (bytes, live interval, offset, space), the
// same schedule (op by op), peak, peak point, arenas and live bytes per
// point. Checked on planned steps that hold regions (shared ones,
// checkpoints, offloads and host parameters beside them), with and without
// the arena packing.
//
//===----------------------------------------------------------------------===//

#include "offload/Dialect/Offload/Analysis/MemoryPlan.h"
#include "offload/Dialect/Offload/IR/OffloadDialect.h"
#include "offload/Dialect/Offload/IR/OffloadOps.h"
#include "offload/Dialect/Offload/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/MLIRContext.h"
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
constexpr const char *kInputs = OFFLOAD_SOURCE_DIR "/test/Inputs/";

class MemoryPlanInPlace : public ::testing::Test {
protected:
  void SetUp() override {
    registry.insert<OffloadDialect, func::FuncDialect>();
    registerOffloadPasses();
    ctx = std::make_unique<MLIRContext>(registry);
  }
  void TearDown() override { module = OwningOpRef<ModuleOp>(); }

  /// Parses test/Inputs/`name` and runs `pipeline` on it (none when empty).
  func::FuncOp load(const std::string &name, const std::string &pipeline) {
    module = parseSourceFile<ModuleOp>(std::string(kInputs) + name, ctx.get());
    EXPECT_TRUE(module) << name;
    if (!module)
      return {};
    if (!pipeline.empty() && !run(pipeline))
      return {};
    return *module->getOps<func::FuncOp>().begin();
  }
  bool run(const std::string &pipeline) {
    PassManager pm(ctx.get());
    EXPECT_TRUE(succeeded(parsePassPipeline(pipeline, pm))) << pipeline;
    bool ok = succeeded(pm.run(*module));
    EXPECT_TRUE(ok) << pipeline;
    return ok;
  }

  /// Both plans of `fn`, compared field by field.
  void expectSamePlans(func::FuncOp fn, bool placeBuffers) {
    size_t regions = 0;
    for (Operation &op : fn.getBody().front())
      regions += isa<RecomputeOp>(op);
    ASSERT_GT(regions, 0u) << "the step has no recompute region: nothing is tested";
    FailureOr<MemoryPlan> inlined = computeMemoryPlan(fn, placeBuffers);
    FailureOr<MemoryPlan> inPlace = computeMemoryPlanInPlace(fn, placeBuffers);
    ASSERT_TRUE(succeeded(inlined));
    ASSERT_TRUE(succeeded(inPlace));
    EXPECT_TRUE(inlined->regionsExpanded());
    EXPECT_TRUE(inPlace->regionsExpanded());
    EXPECT_TRUE(inPlace->regionsInPlace);
    EXPECT_EQ(inPlace->function, fn);
    ASSERT_EQ(inlined->schedule.size(), inPlace->schedule.size());
    for (size_t p = 0; p < inlined->schedule.size(); ++p)
      ASSERT_EQ(inlined->schedule[p]->getName(), inPlace->schedule[p]->getName()) << "point " << p;
    ASSERT_EQ(inlined->buffers.size(), inPlace->buffers.size());
    for (size_t i = 0; i < inlined->buffers.size(); ++i) {
      const PlannedBuffer &a = inlined->buffers[i], &b = inPlace->buffers[i];
      EXPECT_EQ(a.bytes, b.bytes) << "buffer " << i;
      EXPECT_EQ(a.begin, b.begin) << "buffer " << i;
      EXPECT_EQ(a.end, b.end) << "buffer " << i;
      EXPECT_EQ(a.offset, b.offset) << "buffer " << i;
      EXPECT_EQ(a.space, b.space) << "buffer " << i;
      EXPECT_EQ(a.persistent, b.persistent) << "buffer " << i;
      EXPECT_EQ(a.values.size(), b.values.size()) << "buffer " << i;
    }
    EXPECT_EQ(inlined->peakDeviceBytes, inPlace->peakDeviceBytes);
    EXPECT_EQ(inlined->peakPoint, inPlace->peakPoint);
    EXPECT_EQ(inlined->deviceArenaBytes, inPlace->deviceArenaBytes);
    EXPECT_EQ(inlined->hostArenaBytes, inPlace->hostArenaBytes);
    EXPECT_EQ(inlined->liveDeviceBytes, inPlace->liveDeviceBytes);
  }

  DialectRegistry registry;
  std::unique_ptr<MLIRContext> ctx;
  OwningOpRef<ModuleOp> module;
};

// A planned Transformer encoder step (regions beside host parameters and
// their prefetches), as the planner wrote it.
TEST_F(MemoryPlanInPlace, PlannedTransformer) {
  func::FuncOp fn = load("transformer-planned-packing.mlir", "");
  ASSERT_TRUE(fn);
  expectSamePlans(fn, /*placeBuffers=*/true);
  expectSamePlans(fn, /*placeBuffers=*/false);
}

// The GPT-style decoder (AdamW, in-place updates) planned at 45% and 60% of
// its unplanned arena: shared regions, offloads and host parameters.
TEST_F(MemoryPlanInPlace, GptPlannedByThePlanner) {
  for (int pct : {45, 60}) {
    func::FuncOp fn = load("gpt-forward.mlir", "offload-autodiff{optimizer=adamw lr=0.001}");
    ASSERT_TRUE(fn);
    FailureOr<MemoryPlan> unplanned = computeMemoryPlan(fn);
    ASSERT_TRUE(succeeded(unplanned));
    int64_t budget = unplanned->deviceArenaBytes * pct / 100;
    ASSERT_TRUE(run("offload-plan-memory{budget=" + std::to_string(budget) +
                    " target=h100-sxm}"));
    fn = *module->getOps<func::FuncOp>().begin();
    SCOPED_TRACE("gpt at " + std::to_string(pct) + "%");
    expectSamePlans(fn, /*placeBuffers=*/true);
    expectSamePlans(fn, /*placeBuffers=*/false);
  }
}

// Every saved value of the MLP recomputed, with a region that reads the
// parameters, and the parameters on the host (their prefetches feed the
// regions).
TEST_F(MemoryPlanInPlace, RegionsReadingHostParameters) {
  func::FuncOp fn = load("mlp-forward.mlir",
                         "offload-autodiff{optimizer=sgd lr=0.1 momentum=0.9},"
                         "offload-recompute{policy=all},"
                         "offload-host-parameters{policy=all target=h100-sxm}");
  ASSERT_TRUE(fn);
  expectSamePlans(fn, /*placeBuffers=*/true);
  expectSamePlans(fn, /*placeBuffers=*/false);
}

} // namespace
