//===- PlanTest.cpp - Plan file verification and validation ---------------===//
//
// Part of offload. Round trip, truncated/corrupt files, identifier, format
// version, and the semantic checks (arena bounds, operands, live intervals,
// overlaps, events, bindings, phases, predicted peak).
//
//===----------------------------------------------------------------------===//

#include "TestPlans.h"

#include <gtest/gtest.h>

#include <fstream>
#include <random>

using namespace offload::rt;
using namespace offload::rt::test;

namespace {

std::string loadError(const std::vector<uint8_t> &bytes) {
  auto p = Plan::fromBytes(bytes.data(), bytes.size());
  return p.ok() ? std::string() : p.message();
}

std::string validateError(const PlanData &d) {
  Status s = validatePlan(d);
  return s.ok() ? std::string() : s.message();
}

#define EXPECT_CONTAINS(hay, needle)                                           \
  EXPECT_NE(std::string(hay).find(needle), std::string::npos)                  \
      << "message: " << (hay)

TEST(PlanTest, RoundTripThroughFile) {
  StepPlanOptions o;
  o.offload = true;
  PlanData d = buildStepPlan(o);
  AttrMap extra;
  extra.set("ints", attrInts({1, -2, 3}));
  extra.set("str", attrString("tanh"));
  d.instructions[0].attrs = extra;
  std::string path = tempPath("roundtrip.oflp");
  ASSERT_TRUE(Plan::save(d, path).ok());
  auto p = Plan::load(path);
  ASSERT_TRUE(p.ok()) << p.message();
  auto direct = Plan::fromData(d);
  ASSERT_TRUE(direct.ok()) << direct.message();
  EXPECT_EQ((*p)->dump(), (*direct)->dump());
  EXPECT_EQ((*p)->data().producer, "unittest");
  EXPECT_EQ((*p)->data().instructions[0].attrs.getInts("ints"),
            (std::vector<int64_t>{1, -2, 3}));
  EXPECT_EQ((*p)->data().instructions[0].attrs.getString("str", ""), "tanh");
  EXPECT_EQ(Plan::serialize((*p)->data()), Plan::serialize(d));
  std::string dump = (*p)->dump();
  EXPECT_CONTAINS(dump, "offload.to_host");
  EXPECT_CONTAINS(dump, "phase backward");
  EXPECT_CONTAINS(dump, "record(e1)");
  std::remove(path.c_str());
}

TEST(PlanTest, MissingFile) {
  auto p = Plan::load("/nonexistent/plan.oflp");
  ASSERT_FALSE(p.ok());
  EXPECT_CONTAINS(p.message(), "cannot open plan file");
}

TEST(PlanTest, TruncatedFile) {
  std::vector<uint8_t> bytes = Plan::serialize(buildStepPlan());
  std::string path = tempPath("trunc.oflp");
  for (size_t keep :
       {size_t(0), size_t(5), bytes.size() / 2, bytes.size() - 1}) {
    {
      std::ofstream os(path, std::ios::binary | std::ios::trunc);
      os.write(reinterpret_cast<const char *>(bytes.data()),
               std::streamsize(keep));
    }
    auto p = Plan::load(path);
    ASSERT_FALSE(p.ok()) << "kept " << keep;
    EXPECT_CONTAINS(p.message(), "truncated");
  }
  std::remove(path.c_str());
}

TEST(PlanTest, WrongIdentifier) {
  std::vector<uint8_t> bytes = Plan::serialize(buildStepPlan());
  bytes[8] = 'X'; // after the 4-byte size prefix
  EXPECT_CONTAINS(loadError(bytes), "file identifier is 'XFLP', expected "
                                    "'OFLP'");
}

TEST(PlanTest, OtherFormatVersion) {
  PlanData d = buildStepPlan();
  d.formatVersion = kPlanFormatVersion + 1;
  std::string err = loadError(Plan::serialize(d));
  EXPECT_CONTAINS(err, "plan format version " +
                           std::to_string(kPlanFormatVersion + 1) +
                           " is not supported");
}

TEST(PlanTest, CorruptBytesNeverCrash) {
  // Flip random bytes: loading either fails with a message or yields a plan
  // that passed validation. Run under sanitizers this also checks bounds.
  std::vector<uint8_t> good = Plan::serialize(buildStepPlan());
  std::mt19937 rng(1234);
  int rejected = 0;
  for (int iter = 0; iter < 2000; ++iter) {
    std::vector<uint8_t> b = good;
    int flips = 1 + int(rng() % 4);
    for (int k = 0; k < flips; ++k)
      b[rng() % b.size()] ^= uint8_t(1 + rng() % 255);
    auto p = Plan::fromBytes(b.data(), b.size());
    if (!p.ok()) {
      EXPECT_FALSE(p.message().empty());
      ++rejected;
    }
  }
  EXPECT_GT(rejected, 100);
}

TEST(PlanTest, BufferOutsideArena) {
  PlanData d = buildStepPlan();
  d.buffers[2].offset = d.deviceCapacity - 8;
  EXPECT_CONTAINS(validateError(d), "buffer 2 'y': bytes [");
  EXPECT_CONTAINS(validateError(d), "lie outside the device arena of " +
                                        std::to_string(d.deviceCapacity));
  d = buildStepPlan();
  d.buffers[0].offset = ~uint64_t(0) - 4; // overflow must not wrap
  EXPECT_CONTAINS(validateError(d), "lie outside the device arena");
}

TEST(PlanTest, OverlappingLiveBuffers) {
  PlanData d = buildStepPlan();
  d.buffers[1].offset = d.buffers[0].offset; // w and x, both live at 0
  EXPECT_CONTAINS(validateError(d), "buffer 0 'w' and buffer 1 'x' overlap");
}

TEST(PlanTest, LiveIntervalViolation) {
  PlanData d = buildStepPlan();
  // y is read by instruction 1 (sumsq); end its interval at 0.
  d.buffers[2].liveLast = 0;
  EXPECT_CONTAINS(validateError(d), "instruction 1 (test.sumsq) uses buffer "
                                    "2 'y' outside its live interval [0, 0]");
}

TEST(PlanTest, OperandOutOfRange) {
  PlanData d = buildStepPlan();
  d.instructions[3].inputs[1] = 99;
  EXPECT_CONTAINS(validateError(d), "instruction 3 (test.mul): input buffer "
                                    "id 99 out of range");
  d = buildStepPlan();
  d.instructions[0].outputs[0] = -1;
  EXPECT_CONTAINS(validateError(d), "output buffer id -1 out of range");
}

TEST(PlanTest, EventChecks) {
  StepPlanOptions o;
  o.offload = true;
  PlanData d = buildStepPlan(o);
  d.instructions[3].waitEvents = {7};
  EXPECT_CONTAINS(validateError(d), "waits on event 7 out of range");
  d = buildStepPlan(o);
  std::swap(d.instructions[3].recordEvent, d.instructions[4].recordEvent);
  EXPECT_CONTAINS(validateError(d), "that no earlier instruction records");
  d = buildStepPlan(o);
  d.instructions[0].stream = 5;
  EXPECT_CONTAINS(validateError(d), "stream 5 is not 0");
}

TEST(PlanTest, CopyDirectionChecked) {
  StepPlanOptions o;
  o.offload = true;
  PlanData d = buildStepPlan(o);
  d.instructions[3].op = kOpToDevice; // reads a device buffer
  EXPECT_CONTAINS(validateError(d), "expected host to device");
}

TEST(PlanTest, BindingChecks) {
  PlanData d = buildStepPlan();
  d.bindings[0].buffer = 42;
  EXPECT_CONTAINS(validateError(d), "binding 'w': buffer id 42 out of range");
  d = buildStepPlan();
  d.bindings.push_back(d.bindings[0]);
  EXPECT_CONTAINS(validateError(d), "binding 'w' appears twice");
  d = buildStepPlan();
  d.bindings[2].buffer = 2; // loss -> y, which dies early
  EXPECT_CONTAINS(validateError(d), "must be live until the last instruction");
}

TEST(PlanTest, PhaseChecks) {
  PlanData d = buildStepPlan();
  d.phases[1].first = 0;
  EXPECT_CONTAINS(validateError(d), "phase 'backward': range [0,");
  d = buildStepPlan();
  d.phases[0].name = "sideways";
  EXPECT_CONTAINS(validateError(d), "phase 'sideways': not one of");
  // Gradient accumulation: a micro-batch's phases are <phase>.<index>; the
  // optimizer runs once and takes no index.
  d = buildStepPlan();
  d.phases[0].name = "forward.0";
  d.phases[1].name = "backward.0";
  EXPECT_TRUE(validatePlan(d).ok()) << validatePlan(d).message();
  d.phases[1].name = "forward.0";
  EXPECT_CONTAINS(validateError(d), "phase 'forward.0' appears twice");
  for (const char *bad : {"forward.", "forward.x", "optimizer.1", "forward.1.2"}) {
    d = buildStepPlan();
    d.phases[0].name = bad;
    EXPECT_CONTAINS(validateError(d), "not one of");
  }
}

TEST(PlanTest, PredictedPeakMustMatchIntervals) {
  PlanData d = buildStepPlan();
  d.predictedPeakDeviceBytes += 4;
  EXPECT_CONTAINS(validateError(d), "predicted peak device bytes");
}

TEST(PlanTest, ConstantsChecked) {
  PlanBuilder b;
  int c = b.buffer("c", DType::F32, {4}, BufferRole::Constant);
  int l = b.buffer("loss", DType::F32, {}, BufferRole::Output);
  b.bindOut("loss", l);
  b.instr("test.sumsq", {c}, {l});
  b.constant(c, std::vector<uint8_t>(12, 0));
  EXPECT_CONTAINS(validateError(b.finish()), "constant data for buffer 0 "
                                             "'c': 12 bytes");
}

TEST(PlanTest, ConstantsAreUploaded) {
  registerTestKernels();
  PlanBuilder b;
  int c = b.buffer("c", DType::F32, {3}, BufferRole::Constant);
  int l = b.buffer("loss", DType::F32, {}, BufferRole::Output);
  b.bindOut("loss", l);
  b.instr("test.sumsq", {c}, {l});
  std::vector<float> v = {1.5f, -2.0f, 0.25f};
  std::vector<uint8_t> bytes(12);
  std::memcpy(bytes.data(), v.data(), 12);
  b.constant(c, bytes);
  auto plan = Plan::fromData(b.finish());
  ASSERT_TRUE(plan.ok()) << plan.message();
  auto s = Session::create(*plan, "host");
  ASSERT_TRUE(s.ok()) << s.message();
  ASSERT_TRUE((*s)->step().ok());
  EXPECT_FLOAT_EQ(float(*(*s)->loss()), 1.5f * 1.5f + 4.0f + 0.0625f);
}

} // namespace
