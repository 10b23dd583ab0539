//===- ExecutorTest.cpp - The executor over a recording device ------------===//
//
// Part of offload. Drives lib/Runtime's Executor over a Device that runs
// nothing and writes down every call: the order of the waits, copies,
// launches and events it issues for a small plan with an offload, the
// addresses and byte counts it resolves, program-order live-byte
// accounting and its peak, the out-of-memory error, fault injection and
// which error wins when a command or the drain fails.
//
//===----------------------------------------------------------------------===//

#include "Executor.h"
#include "TestPlans.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>

using namespace offload::rt;
using namespace offload::rt::test;

namespace {

/// What a RecordingDevice does besides recording.
struct Script {
  /// Index (0-based, over waits, copies, launches and events) of the
  /// command that fails, or -1.
  int failCommand = -1;
  /// What synchronize() returns.
  Status syncResult;
  /// Device memory in bytes: open() fails for a larger device arena.
  uint64_t memoryBytes = ~uint64_t(0);
  /// Whether allocated() calls are recorded too.
  bool logAllocations = false;
};

/// A device that executes nothing: each call appends a line to `log`.
class RecordingDevice final : public Device {
public:
  RecordingDevice(std::vector<std::string> *log, Script script)
      : log_(log), script_(std::move(script)) {}
  const char *name() const override { return "recording"; }
  std::vector<std::string> ops() const override { return {}; }
  std::vector<std::string> missingOps(const PlanData &) const override {
    return {};
  }
  Status open(std::shared_ptr<const Plan> plan,
              const SessionOptions &) override {
    const PlanData &d = plan->data();
    if (d.deviceCapacity > script_.memoryBytes)
      return Status::error("recording device has " +
                           std::to_string(script_.memoryBytes) +
                           " bytes, the plan's device arena needs " +
                           std::to_string(d.deviceCapacity));
    device_.assign(std::max<uint64_t>(d.deviceCapacity, 1), 0);
    host_.assign(std::max<uint64_t>(d.hostCapacity, 1), 0);
    log_->push_back("open");
    return Status::success();
  }
  uint8_t *arenaBase(MemorySpace space) const override {
    return const_cast<uint8_t *>(space == MemorySpace::Device ? device_.data()
                                                              : host_.data());
  }
  Status prepare(const Launch &l) override {
    log_->push_back("prepare " + std::to_string(l.instruction));
    return Status::success();
  }
  Status upload(MemorySpace, uint8_t *dst, const void *src,
                size_t bytes) override {
    std::memcpy(dst, src, bytes);
    return Status::success();
  }
  Status download(MemorySpace, void *dst, const uint8_t *src,
                  size_t bytes) override {
    std::memcpy(dst, src, bytes);
    return Status::success();
  }
  bool keepsBuffersBetweenSteps() const override { return true; }
  Status beginStep() override {
    log_->push_back("begin");
    return Status::success();
  }
  Status allocated(int buffer) override {
    if (script_.logAllocations)
      log_->push_back("alloc " + std::to_string(buffer));
    return Status::success();
  }
  Status waitEvent(int stream, int event, int instruction) override {
    return command("wait e" + std::to_string(event) + " s" +
                   std::to_string(stream) + " i" + std::to_string(instruction));
  }
  Status copy(const Copy &c) override {
    copies.push_back(&c);
    const char *kind = c.kind == CopyKind::HostToDevice   ? "h2d"
                       : c.kind == CopyKind::DeviceToHost ? "d2h"
                                                          : "within";
    return command("copy i" + std::to_string(c.instruction) + " s" +
                   std::to_string(c.stream) + " " + kind + " " +
                   std::to_string(c.bytes));
  }
  Status launch(const Launch &l) override {
    launches.push_back(&l);
    return command("launch i" + std::to_string(l.instruction) + " s" +
                   std::to_string(l.stream) + " " + l.desc->op);
  }
  Status recordEvent(int stream, int event, int instruction) override {
    return command("record e" + std::to_string(event) + " s" +
                   std::to_string(stream) + " i" + std::to_string(instruction));
  }
  Status synchronize(int first, int last) override {
    log_->push_back("sync " + std::to_string(first) + " " +
                    std::to_string(last));
    return script_.syncResult;
  }
  std::array<double, NumStreams> busySeconds() const override {
    return {0, 0, 0};
  }

  std::vector<const Copy *> copies;
  std::vector<const Launch *> launches;

private:
  Status command(const std::string &line) {
    log_->push_back(line);
    if (commands_++ == script_.failCommand)
      return Status::error("recording device: command " + line + " failed");
    return Status::success();
  }

  std::vector<std::string> *log_;
  Script script_;
  int commands_ = 0;
  std::vector<uint8_t> device_, host_;
};

std::shared_ptr<const Plan> offloadPlan() {
  StepPlanOptions o;
  o.offload = true;
  auto plan = Plan::fromData(buildStepPlan(o));
  EXPECT_TRUE(plan.ok()) << plan.message();
  return *plan;
}

/// An executor over a RecordingDevice writing to `log`; `device` is set to
/// it (owned by the executor).
std::unique_ptr<Executor> makeExecutor(std::shared_ptr<const Plan> plan,
                                       std::vector<std::string> &log,
                                       Script script = {},
                                       SessionOptions options = {},
                                       RecordingDevice **device = nullptr) {
  auto dev = std::make_unique<RecordingDevice>(&log, std::move(script));
  if (device)
    *device = dev.get();
  auto ex = std::make_unique<Executor>(std::move(dev));
  Status s = ex->init(std::move(plan), options);
  EXPECT_TRUE(s.ok()) << s.message();
  return ex;
}

/// The lines of `log` after its last "begin": the current step's.
std::vector<std::string> afterBegin(const std::vector<std::string> &log) {
  auto it = std::find(log.rbegin(), log.rend(), "begin");
  return it == log.rend() ? std::vector<std::string>()
                          : std::vector<std::string>(it.base(), log.end());
}

TEST(ExecutorTest, IssuesWaitsThenTheCommandThenTheEventInProgramOrder) {
  // buildStepPlan with an offload: mul, sumsq, wait (records e2), to_host
  // on the d2h stream (waits e2, records e0), to_device on the h2d stream
  // (waits e0, records e1), scale (waits e1), mul, scale, sub.
  std::vector<std::string> log;
  auto plan = offloadPlan();
  auto ex = makeExecutor(plan, log);
  ASSERT_TRUE(ex->beginStep().ok());
  int n = int(plan->data().instructions.size());
  ASSERT_TRUE(ex->run(0, n).ok());
  std::vector<std::string> expected = {
      "launch i0 s0 test.mul",
      "launch i1 s0 test.sumsq",
      "record e2 s0 i2",
      "wait e2 s2 i3",
      "copy i3 s2 d2h 256",
      "record e0 s2 i3",
      "wait e0 s1 i4",
      "copy i4 s1 h2d 256",
      "record e1 s1 i4",
      "wait e1 s0 i5",
      "launch i5 s0 test.scale",
      "launch i6 s0 test.mul",
      "launch i7 s0 test.scale",
      "launch i8 s0 test.sub",
      "sync 0 9",
  };
  EXPECT_EQ(afterBegin(log), expected);
}

TEST(ExecutorTest, PhasesIssueTheirRangeAndSynchroniseEach) {
  std::vector<std::string> log;
  auto plan = offloadPlan();
  auto ex = makeExecutor(plan, log);
  ASSERT_TRUE(ex->beginStep().ok());
  ASSERT_TRUE(ex->run(0, 2).ok());
  ASSERT_TRUE(ex->run(2, 9).ok());
  std::vector<std::string> got = afterBegin(log);
  ASSERT_EQ(got.size(), 16u);
  EXPECT_EQ(got[2], "sync 0 2");
  EXPECT_EQ(got[3], "record e2 s0 i2");
  EXPECT_EQ(got.back(), "sync 2 9");
}

TEST(ExecutorTest, ResolvesArgumentsAndCopiesOnceAtCreation) {
  std::vector<std::string> log;
  auto plan = offloadPlan();
  const PlanData &d = plan->data();
  RecordingDevice *dev = nullptr;
  auto ex = makeExecutor(plan, log, {}, {}, &dev);
  // Every kernel instruction is prepared once, in program order; the
  // runtime ops (wait, to_host, to_device) are not launches.
  std::vector<std::string> expected = {"open",      "prepare 0", "prepare 1",
                                       "prepare 5", "prepare 6", "prepare 7",
                                       "prepare 8"};
  EXPECT_EQ(log, expected);
  for (int step = 0; step < 2; ++step) {
    ASSERT_TRUE(ex->beginStep().ok());
    ASSERT_TRUE(ex->run(0, int(d.instructions.size())).ok());
  }
  // The same Launch and Copy objects each step (recorded once).
  ASSERT_EQ(dev->launches.size(), 12u);
  ASSERT_EQ(dev->copies.size(), 4u);
  EXPECT_EQ(dev->launches[0], dev->launches[6]);
  EXPECT_EQ(dev->copies[0], dev->copies[2]);
  // Operand views point at arena base + offset, with the buffer's type.
  for (const Launch *l : {dev->launches[0], dev->launches[4]}) {
    const InstructionDesc &in = d.instructions[size_t(l->instruction)];
    ASSERT_EQ(l->inputs.size(), in.inputs.size());
    for (size_t k = 0; k < in.inputs.size(); ++k) {
      const BufferDesc &b = d.buffers[size_t(in.inputs[k])];
      EXPECT_EQ(l->inputs[k].data,
                dev->arenaBase(b.space) + b.offset);
      EXPECT_EQ(l->inputs[k].shape, b.shape);
    }
    const BufferDesc &out = d.buffers[size_t(in.outputs[0])];
    EXPECT_EQ(l->outputs[0].data, dev->arenaBase(out.space) + out.offset);
  }
  // to_host: device bytes of y to the host arena.
  const Copy &toHost = *dev->copies[0];
  const InstructionDesc &th = d.instructions[3];
  const BufferDesc &y = d.buffers[size_t(th.inputs[0])];
  const BufferDesc &yh = d.buffers[size_t(th.outputs[0])];
  EXPECT_EQ(toHost.kind, CopyKind::DeviceToHost);
  EXPECT_EQ(toHost.src, dev->arenaBase(MemorySpace::Device) + y.offset);
  EXPECT_EQ(toHost.dst, dev->arenaBase(MemorySpace::Host) + yh.offset);
  EXPECT_EQ(toHost.bytes, y.dataBytes());
}

/// dev: a (2 KiB) -> scale -> b (2 KiB, reshaped into its alias bv) ->
/// reshape into a fresh buffer c -> scale -> out; `keep` is a host buffer.
std::shared_ptr<const Plan> reshapePlan() {
  PlanBuilder b;
  int a = b.buffer("a", DType::F32, {512}, BufferRole::Input);
  int bb = b.buffer("b", DType::F32, {512}, BufferRole::Temporary);
  int bv = b.alias("b.view", bb, {2, 256});
  int c = b.buffer("c", DType::F32, {512}, BufferRole::Temporary);
  int out = b.buffer("out", DType::F32, {512}, BufferRole::Output);
  int keep = b.buffer("keep", DType::F32, {1024}, BufferRole::Temporary,
                      MemorySpace::Host);
  b.bindIn("a", a);
  b.bindOut("out", out);
  b.instr("test.scale", {a}, {bb}, scaleBy(2));       // 0
  b.instr(kOpReshape, {bb}, {bv});                    // 1: alias
  b.instr(kOpReshape, {bv}, {c});                     // 2: moves bytes
  b.instr("test.scale", {c}, {out}, scaleBy(2));      // 3
  b.instr(kOpToHost, {c}, {keep}, {}, ComputeStream); // 4
  PlanData d = b.finish();
  auto plan = Plan::fromData(d);
  EXPECT_TRUE(plan.ok()) << plan.message();
  return *plan;
}

TEST(ExecutorTest, LiveBytesFollowTheLiveIntervalsAndThePeakIsThePlans) {
  std::vector<std::string> log;
  auto plan = reshapePlan();
  const PlanData &d = plan->data();
  Script script;
  script.logAllocations = true;
  auto ex = makeExecutor(plan, log, script);
  // Expected live device bytes after instruction i: non-alias device
  // buffers with liveFirst <= i < liveLast (host and alias bytes excluded).
  auto liveAfter = [&](int i) {
    uint64_t n = 0;
    for (const BufferDesc &b : d.buffers)
      if (b.space == MemorySpace::Device && b.aliasOf < 0 &&
          b.liveFirst <= i && i < b.liveLast)
        n += b.size;
    return n;
  };
  for (int step = 0; step < 2; ++step) {
    ASSERT_TRUE(ex->beginStep().ok());
    for (int i = 0; i < int(d.instructions.size()); ++i) {
      ASSERT_TRUE(ex->run(i, i + 1).ok());
      EXPECT_EQ(ex->liveDeviceBytes(), liveAfter(i)) << "after " << i;
    }
    ex->endStep();
  }
  EXPECT_EQ(ex->peakDeviceBytes(), computePeakDeviceBytes(d));
  EXPECT_EQ(ex->peakDeviceBytes(), d.predictedPeakDeviceBytes);
  // a, b, c and out (2 KiB each) are never all live: the peak is below
  // their sum.
  EXPECT_LT(ex->peakDeviceBytes(), uint64_t(8 * 1024));
  // Each buffer is allocated once per step, just before the first command
  // of its first instruction; the aliasing reshape issues nothing, the
  // other one a copy within the arena.
  std::vector<std::string> got = afterBegin(log);
  auto at = [&](const std::string &line) {
    return std::find(got.begin(), got.end(), line) - got.begin();
  };
  for (size_t id = 0; id < d.buffers.size(); ++id) {
    std::string line = "alloc " + std::to_string(id);
    EXPECT_EQ(std::count(got.begin(), got.end(), line), 1) << line;
  }
  EXPECT_LT(at("alloc 3"), at("copy i2 s0 within 2048")); // c
  EXPECT_GT(at("alloc 3"), at("sync 1 2"));
  EXPECT_EQ(std::count_if(got.begin(), got.end(),
                          [](const std::string &l) {
                            return l.find(" i1 ") != std::string::npos;
                          }),
            0);
}

TEST(ExecutorTest, OutOfMemoryFailsCreationBeforeAnyCommand) {
  auto plan = offloadPlan();
  std::vector<std::string> log;
  Script script;
  script.memoryBytes = plan->data().deviceCapacity - 1;
  Executor ex(std::make_unique<RecordingDevice>(&log, script));
  Status s = ex.init(plan, {});
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.message(), "recording device has " +
                             std::to_string(script.memoryBytes) +
                             " bytes, the plan's device arena needs " +
                             std::to_string(plan->data().deviceCapacity));
  EXPECT_TRUE(log.empty());
  // The host device's own words, through a session (the Python package
  // pins the same message).
  registerTestKernels();
  SessionOptions o;
  o.deviceMemoryBytes = plan->data().deviceCapacity - 1;
  auto session = Session::create(plan, "host", o);
  ASSERT_FALSE(session.ok());
  EXPECT_EQ(session.message(),
            "host backend: device has " +
                std::to_string(o.deviceMemoryBytes) +
                " bytes but the plan's device arena needs " +
                std::to_string(plan->data().deviceCapacity) + " bytes");
}

TEST(ExecutorTest, InjectedFailureStopsTheIssueAtItsInstruction) {
  auto plan = offloadPlan();
  const PlanData &d = plan->data();
  int n = int(d.instructions.size());
  std::vector<std::string> full;
  {
    auto ex = makeExecutor(plan, full);
    ASSERT_TRUE(ex->beginStep().ok());
    ASSERT_TRUE(ex->run(0, n).ok());
  }
  std::vector<std::string> reference = afterBegin(full);
  for (int k = 0; k < n; ++k) {
    std::vector<std::string> log;
    SessionOptions o;
    o.failAtInstruction = k;
    auto ex = makeExecutor(plan, log, {}, o);
    ASSERT_TRUE(ex->beginStep().ok());
    Status s = ex->run(0, n);
    ASSERT_FALSE(s.ok());
    EXPECT_EQ(s.message(), "instruction " + std::to_string(k) + " (" +
                               d.instructions[size_t(k)].op +
                               "): injected failure "
                               "(SessionOptions::failAtInstruction)");
    // Exactly the commands of instructions before k, then the drain.
    std::vector<std::string> got = afterBegin(log);
    std::vector<std::string> expected;
    for (const std::string &line : reference) {
      size_t p = line.find(" i");
      if (p != std::string::npos && std::stoi(line.substr(p + 2)) < k)
        expected.push_back(line);
    }
    expected.push_back("sync 0 " + std::to_string(n));
    EXPECT_EQ(got, expected) << "failure at " << k;
    // The next step starts from the buffers live at 0 again.
    ex->endStep();
    ASSERT_TRUE(ex->beginStep().ok());
    uint64_t atZero = 0;
    for (const BufferDesc &b : d.buffers)
      if (b.space == MemorySpace::Device && b.aliasOf < 0 && b.liveFirst == 0)
        atZero += b.size;
    EXPECT_EQ(ex->liveDeviceBytes(), atZero);
  }
}

TEST(ExecutorTest, ACommandErrorStopsTheIssueAndWinsOverTheDrain) {
  auto plan = offloadPlan();
  std::vector<std::string> log;
  Script script;
  script.failCommand = 4; // "copy i3 s2 d2h 256"
  script.syncResult = Status::error("late error");
  auto ex = makeExecutor(plan, log, script);
  ASSERT_TRUE(ex->beginStep().ok());
  Status s = ex->run(0, 9);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.message(), "recording device: command copy i3 s2 d2h 256 failed");
  std::vector<std::string> got = afterBegin(log);
  ASSERT_EQ(got.size(), 6u);
  EXPECT_EQ(got[4], "copy i3 s2 d2h 256");
  EXPECT_EQ(got[5], "sync 0 9");
}

TEST(ExecutorTest, TheDrainsErrorFailsARunThatIssuedEverything) {
  auto plan = offloadPlan();
  std::vector<std::string> log;
  Script script;
  script.syncResult = Status::error("a kernel fault found on the device");
  auto ex = makeExecutor(plan, log, script);
  ASSERT_TRUE(ex->beginStep().ok());
  Status s = ex->run(0, 9);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.message(), "a kernel fault found on the device");
  EXPECT_EQ(afterBegin(log).size(), 15u);
}

TEST(ExecutorTest, ReadsAndWritesNeedALiveBuffer) {
  auto plan = offloadPlan();
  const PlanData &d = plan->data();
  std::vector<std::string> log;
  auto ex = makeExecutor(plan, log);
  ASSERT_TRUE(ex->beginStep().ok());
  auto id = [&](const std::string &name) {
    for (size_t b = 0; b < d.buffers.size(); ++b)
      if (d.buffers[b].name == name)
        return int(b);
    return -1;
  };
  std::vector<float> v(64, 1.5f), back(64, 0.0f);
  EXPECT_TRUE(ex->write(id("w"), v.data(), 256).ok());
  Status early = ex->write(id("dy"), v.data(), 256);
  EXPECT_EQ(early.message(), "buffer 'dy' is not live at the start of the step");
  ASSERT_TRUE(ex->run(0, 9).ok());
  // Outputs stay live; temporaries and inputs died with their interval.
  EXPECT_TRUE(ex->read(id("grad:w"), nullptr, 0).ok());
  EXPECT_EQ(ex->read(id("y"), back.data(), 256).message(),
            "buffer 'y' is not live at the end of the step");
  ex->endStep();
  EXPECT_FALSE(ex->read(id("grad:w"), nullptr, 0).ok());
  // After the step, outputs can still be read, in range only.
  EXPECT_TRUE(ex->readAfterStep(id("grad:w"), 0, back.data(), 256).ok());
  EXPECT_FALSE(ex->readAfterStep(id("grad:w"), 4, back.data(), 256).ok());
  EXPECT_EQ(ex->readAfterStep(id("y"), 0, back.data(), 4).message(),
            "buffer 'y' is not an output or the range is outside it");
}

} // namespace
