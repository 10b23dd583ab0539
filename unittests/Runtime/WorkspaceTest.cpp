//===- WorkspaceTest.cpp - The plan's workspace buffer --------------------===//
//
// Part of offload. Plan format version 3's workspace (BufferRole::Workspace,
// PlanData::workspaceBuffer): PlanBuilder::workspace, the file round trip,
// every validation rule, and the host backend, which allocates it for the
// whole step so that the measured peak counts it (and results do not
// change).
//
//===----------------------------------------------------------------------===//

#include "TestPlans.h"

#include <gtest/gtest.h>

using namespace offload::rt;
using namespace offload::rt::test;

namespace {

#define EXPECT_CONTAINS(hay, needle)                                           \
  EXPECT_NE(std::string(hay).find(needle), std::string::npos)                  \
      << "message: " << (hay)

std::string validateError(const PlanData &d) {
  Status s = validatePlan(d);
  return s.ok() ? std::string() : s.message();
}

/// The step plan with a workspace of `bytes` (none when 0).
PlanData stepPlanWithWorkspace(uint64_t bytes) {
  PlanBuilder b;
  PlanData base = buildStepPlan();
  // Rebuild through the builder: same buffers, bindings and instructions,
  // plus the workspace.
  for (const BufferDesc &buf : base.buffers)
    b.buffer(buf.name, buf.dtype, buf.shape, buf.role, buf.space);
  for (const BindingDesc &bd : base.bindings) {
    if (bd.direction == BindingDirection::In)
      b.bindIn(bd.name, bd.buffer);
    else
      b.bindOut(bd.name, bd.buffer);
  }
  for (const InstructionDesc &in : base.instructions)
    b.instr(in.op, in.inputs, in.outputs, in.attrs, in.stream, in.waitEvents,
            in.recordEvent);
  for (const PhaseDesc &p : base.phases)
    b.phase(p.name, p.first, p.last);
  b.workspace(bytes);
  return b.finish();
}

TEST(WorkspaceTest, BuilderAddsAWholeStepDeviceBuffer) {
  PlanData d = stepPlanWithWorkspace(4096);
  ASSERT_GE(d.workspaceBuffer, 0);
  const BufferDesc &w = d.buffers[size_t(d.workspaceBuffer)];
  EXPECT_EQ(w.role, BufferRole::Workspace);
  EXPECT_EQ(w.space, MemorySpace::Device);
  EXPECT_EQ(w.size, 4096u);
  EXPECT_EQ(w.liveFirst, 0);
  EXPECT_EQ(w.liveLast, int(d.instructions.size()) - 1);
  EXPECT_EQ(w.offset % 256, 0u);
  EXPECT_TRUE(validatePlan(d).ok()) << validateError(d);
  // It is live throughout: the predicted peak grows by exactly its size.
  PlanData none = stepPlanWithWorkspace(0);
  EXPECT_EQ(none.workspaceBuffer, -1);
  EXPECT_EQ(d.predictedPeakDeviceBytes, none.predictedPeakDeviceBytes + 4096);
  // A second call resizes the same buffer.
  PlanBuilder b;
  int x = b.buffer("x", DType::F32, {4}, BufferRole::Input);
  int y = b.buffer("y", DType::F32, {4}, BufferRole::Output);
  b.bindIn("x", x);
  b.bindOut("y", y);
  b.instr("test.scale", {x}, {y}, scaleBy(2));
  int w1 = b.workspace(100);
  int w2 = b.workspace(300);
  EXPECT_EQ(w1, w2);
  EXPECT_EQ(b.workspace(0), w1);
  PlanData d2 = b.finish();
  EXPECT_EQ(d2.buffers[size_t(d2.workspaceBuffer)].size, 300u);
  EXPECT_TRUE(validatePlan(d2).ok()) << validateError(d2);
}

TEST(WorkspaceTest, RoundTripThroughFileAndDump) {
  PlanData d = stepPlanWithWorkspace(1000);
  std::string path = tempPath("workspace.oflp");
  ASSERT_TRUE(Plan::save(d, path).ok());
  auto p = Plan::load(path);
  ASSERT_TRUE(p.ok()) << p.message();
  EXPECT_EQ((*p)->data().workspaceBuffer, d.workspaceBuffer);
  EXPECT_EQ((*p)->data().formatVersion, kPlanFormatVersion);
  EXPECT_EQ(Plan::serialize((*p)->data()), Plan::serialize(d));
  std::string dump = (*p)->dump();
  EXPECT_CONTAINS(dump, "workspace %" + std::to_string(d.workspaceBuffer) +
                            " (1000 bytes)");
  EXPECT_CONTAINS(dump, "\"workspace\" bool[1000] device@");
  EXPECT_CONTAINS(dump, " workspace live [0,");
  std::remove(path.c_str());
  // A plan without one stores -1.
  PlanData none = buildStepPlan();
  ASSERT_TRUE(Plan::save(none, path).ok());
  auto q = Plan::load(path);
  ASSERT_TRUE(q.ok()) << q.message();
  EXPECT_EQ((*q)->data().workspaceBuffer, -1);
  std::remove(path.c_str());
}

TEST(WorkspaceTest, ValidationNamesTheProblem) {
  PlanData good = stepPlanWithWorkspace(512);
  int ws = good.workspaceBuffer;
  ASSERT_TRUE(validatePlan(good).ok()) << validateError(good);
  {
    PlanData d = good;
    d.workspaceBuffer = int(d.buffers.size());
    EXPECT_CONTAINS(validateError(d), "workspace_buffer " +
                                          std::to_string(d.buffers.size()) +
                                          " is not a buffer id");
  }
  {
    PlanData d = good;
    d.workspaceBuffer = -2;
    EXPECT_CONTAINS(validateError(d), "workspace_buffer -2 is not a buffer id");
  }
  {
    // The Workspace role on a buffer that is not the workspace.
    PlanData d = good;
    d.workspaceBuffer = -1;
    EXPECT_CONTAINS(validateError(d),
                    "has role workspace but is not the plan's "
                    "workspace_buffer (-1)");
  }
  {
    PlanData d = good;
    d.buffers[size_t(ws)].role = BufferRole::Temporary;
    EXPECT_CONTAINS(validateError(d), "must have role workspace, not temporary");
  }
  {
    PlanData d = good;
    d.buffers[size_t(ws)].space = MemorySpace::Host;
    d.hostCapacity = d.deviceCapacity;
    EXPECT_CONTAINS(validateError(d), "must be in device memory, not host");
  }
  {
    PlanData d = good;
    d.buffers[size_t(ws)].liveLast = 0;
    EXPECT_CONTAINS(validateError(d), "must be the whole step [0, ");
  }
  {
    PlanData d = good;
    d.instructions[0].inputs.push_back(ws);
    EXPECT_CONTAINS(validateError(d), "names the workspace buffer " +
                                          std::to_string(ws) +
                                          " 'workspace', which only the "
                                          "backend uses");
  }
  {
    PlanData d = good;
    d.bindings.push_back({"ws", ws, BufferRole::Output, BindingDirection::Out});
    EXPECT_CONTAINS(validateError(d), "binding 'ws': binds the workspace");
  }
}

TEST(WorkspaceTest, HostBackendCountsItAndResultsDoNotChange) {
  registerAllHostKernels();
  registerTestKernels();
  auto run = [](uint64_t bytes, Tensor &grad, uint64_t &planned,
                uint64_t &measured) {
    auto plan = Plan::fromData(stepPlanWithWorkspace(bytes));
    ASSERT_TRUE(plan.ok()) << plan.message();
    for (bool poison : {false, true}) {
      SessionOptions o;
      o.poison = poison;
      auto s = Session::create(*plan, "host", o);
      ASSERT_TRUE(s.ok()) << s.message();
      ASSERT_TRUE((*s)->bind("w", Tensor::fromVector(DType::F32, {64},
                                                     ramp(64, 0.5f, 0.25f)))
                      .ok());
      ASSERT_TRUE((*s)->bind("x", Tensor::fromVector(DType::F32, {64},
                                                     ramp(64, -1.f, 0.375f)))
                      .ok());
      Status st = (*s)->step();
      ASSERT_TRUE(st.ok()) << st.message();
      grad = *(*s)->output("grad:w");
      planned = (*s)->plannedPeakDeviceBytes();
      measured = (*s)->measuredPeakDeviceBytes();
    }
  };
  Tensor g0, g1;
  uint64_t p0 = 0, m0 = 0, p1 = 0, m1 = 0;
  run(0, g0, p0, m0);
  run(1 << 20, g1, p1, m1);
  EXPECT_EQ(m0, p0);
  EXPECT_EQ(m1, p1);
  EXPECT_EQ(p1, p0 + (1u << 20));
  EXPECT_TRUE(g0.bitEqual(g1));
}

TEST(WorkspaceTest, AddWorkspaceAppendsToTheDeviceArena) {
  PlanData d = buildStepPlan();
  uint64_t cap = d.deviceCapacity, peak = d.predictedPeakDeviceBytes;
  ASSERT_TRUE(addWorkspace(d, 5000).ok());
  ASSERT_GE(d.workspaceBuffer, 0);
  const BufferDesc &w = d.buffers[size_t(d.workspaceBuffer)];
  EXPECT_EQ(w.offset, (cap + 255) / 256 * 256);
  EXPECT_EQ(d.deviceCapacity, w.offset + 5000);
  EXPECT_EQ(d.predictedPeakDeviceBytes, peak + 5000);
  EXPECT_TRUE(validatePlan(d).ok()) << validateError(d);
  // A plan with a workspace keeps it.
  int id = d.workspaceBuffer;
  ASSERT_TRUE(addWorkspace(d, 1 << 20).ok());
  EXPECT_EQ(d.workspaceBuffer, id);
  EXPECT_EQ(d.buffers[size_t(id)].size, 5000u);
  PlanData bad = buildStepPlan();
  bad.predictedPeakDeviceBytes += 1;
  EXPECT_FALSE(addWorkspace(bad, 100).ok());
}

TEST(WorkspaceTest, DeviceLimitCountsTheWorkspace) {
  registerTestKernels();
  PlanData d = stepPlanWithWorkspace(1 << 20);
  auto plan = Plan::fromData(d);
  ASSERT_TRUE(plan.ok()) << plan.message();
  SessionOptions o;
  o.deviceMemoryBytes = d.deviceCapacity - 1;
  auto s = Session::create(*plan, "host", o);
  ASSERT_FALSE(s.ok());
  EXPECT_CONTAINS(s.message(), "plan's device arena needs " +
                                   std::to_string(d.deviceCapacity));
}

} // namespace
