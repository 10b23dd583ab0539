//===- SessionTest.cpp - Sessions on the host backend ---------------------===//
//
// Part of offload. Steps against a plain-C++ reference, bindings, capacity,
// missing waits, atomic failed steps, measured vs predicted peak, phases.
//
//===----------------------------------------------------------------------===//

#include "TestPlans.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstring>

using namespace offload::rt;
using namespace offload::rt::test;

namespace {

class SessionTest : public ::testing::Test {
protected:
  void SetUp() override { registerTestKernels(); }

  std::unique_ptr<Session> make(const PlanData &d, SessionOptions o = {},
                                std::shared_ptr<ParameterStore> store = {}) {
    auto plan = Plan::fromData(d);
    EXPECT_TRUE(plan.ok()) << plan.message();
    if (!plan)
      return nullptr;
    auto s = Session::create(*plan, "host", o, store);
    EXPECT_TRUE(s.ok()) << s.message();
    return s ? s.take() : nullptr;
  }

  void bindDefaults(Session &s, int64_t n = 64) {
    ASSERT_TRUE(s.bind("w", Tensor::fromVector(DType::F32, {n}, w0(n))).ok());
    ASSERT_TRUE(s.bind("x", Tensor::fromVector(DType::F32, {n}, x0(n))).ok());
  }
  static std::vector<float> w0(int64_t n) { return ramp(n, 0.5f, 0.25f); }
  static std::vector<float> x0(int64_t n) { return ramp(n, -1.0f, 0.375f); }
};

void expectFloatsEq(const Tensor &t, const std::vector<float> &ref,
                    float relTol) {
  ASSERT_EQ(size_t(t.numel()), ref.size());
  for (size_t i = 0; i < ref.size(); ++i)
    EXPECT_NEAR(t.as<float>()[i], ref[i], relTol * (1 + std::fabs(ref[i])))
        << "element " << i;
}

TEST_F(SessionTest, StepsMatchReference) {
  for (bool offload : {false, true}) {
    StepPlanOptions o;
    o.offload = offload;
    auto s = make(buildStepPlan(o));
    ASSERT_TRUE(s);
    bindDefaults(*s);
    std::vector<float> w = w0(64), x = x0(64), g, nw;
    for (int step = 0; step < 3; ++step) {
      float loss = referenceStep(w, x, o.lr, g, nw);
      ASSERT_TRUE(s->step().ok());
      // Same float operations in the same order: tolerance 1e-6 relative.
      EXPECT_NEAR(*s->loss(), loss, 1e-6 * std::fabs(loss));
      expectFloatsEq(*s->output("grad:w"), g, 1e-6f);
      expectFloatsEq(*s->output("w"), nw, 1e-6f);
      expectFloatsEq(*s->store().get("w"), nw, 1e-6f);
      w = nw;
    }
  }
}

TEST_F(SessionTest, OffloadIsBitIdenticalAndPeakMatches) {
  StepPlanOptions a, b;
  b.offload = true;
  auto s1 = make(buildStepPlan(a));
  auto s2 = make(buildStepPlan(b));
  ASSERT_TRUE(s1 && s2);
  bindDefaults(*s1);
  bindDefaults(*s2);
  ASSERT_TRUE(s1->step().ok());
  ASSERT_TRUE(s2->step().ok());
  EXPECT_TRUE(s1->output("grad:w")->bitEqual(*s2->output("grad:w")));
  EXPECT_TRUE(s1->output("w")->bitEqual(*s2->output("w")));
  for (Session *s : {s1.get(), s2.get()}) {
    EXPECT_GT(s->plannedPeakDeviceBytes(), 0u);
    EXPECT_EQ(s->measuredPeakDeviceBytes(), s->plannedPeakDeviceBytes());
  }
}

TEST_F(SessionTest, MeasuredPeakEqualsHandComputedPrediction) {
  // A chain of 1 KiB temporaries a -> c -> d with p used until d:
  //   instr 0: p a        instr 1: p a c      instr 2: p c d
  //   instr 3: d loss(4 bytes)
  // so the peak is three 1 KiB buffers.
  PlanBuilder b;
  int p = b.buffer("p", DType::F32, {256}, BufferRole::Parameter);
  int a = b.buffer("a", DType::F32, {256}, BufferRole::Temporary);
  int c = b.buffer("c", DType::F32, {256}, BufferRole::Temporary);
  int d = b.buffer("d", DType::F32, {256}, BufferRole::Temporary);
  int l = b.buffer("loss", DType::F32, {}, BufferRole::Output);
  b.bindIn("p", p);
  b.bindOut("loss", l);
  b.instr("test.scale", {p}, {a}, scaleBy(2));
  b.instr("test.scale", {a}, {c}, scaleBy(2));
  b.instr("test.mul", {c, p}, {d});
  b.instr("test.sumsq", {d}, {l});
  PlanData pd = b.finish();
  EXPECT_EQ(pd.predictedPeakDeviceBytes, 1024u * 3);
  auto s = make(pd);
  ASSERT_TRUE(s);
  ASSERT_TRUE(s->bind("p", Tensor(DType::F32, {256})).ok());
  ASSERT_TRUE(s->step().ok());
  EXPECT_EQ(s->measuredPeakDeviceBytes(), 1024u * 3);
  // The builder reused memory: the arena is smaller than the sum of buffers.
  EXPECT_LT(pd.deviceCapacity, 1024u * 4 + 4);
  // The builder's first-fit layout of this chain needs no more than the peak.
  EXPECT_EQ(pd.deviceCapacity, 1024u * 3);
}

TEST_F(SessionTest, MissingBindingIsAnError) {
  auto s = make(buildStepPlan());
  ASSERT_TRUE(s);
  Status st = s->step();
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("missing bindings: w, x"), std::string::npos)
      << st.message();
}

TEST_F(SessionTest, MisshapedBindingIsAnError) {
  auto s = make(buildStepPlan());
  ASSERT_TRUE(s);
  Status st = s->bind("w", Tensor(DType::F32, {63}));
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("expects f32[64], got f32[63]"),
            std::string::npos)
      << st.message();
  st = s->bind("x", Tensor(DType::F64, {64}));
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("got f64[64]"), std::string::npos);
  st = s->bind("nope", Tensor(DType::F32, {64}));
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("no input binding named 'nope'"),
            std::string::npos);
  // A misshaped value put directly into the store is caught at step start.
  s->store().set("w", Tensor(DType::F32, {2}));
  ASSERT_TRUE(s->bind("x", Tensor(DType::F32, {64})).ok());
  st = s->step();
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("the store has f32[2]"), std::string::npos);
}

TEST_F(SessionTest, DeviceSmallerThanPlanIsAnError) {
  PlanData d = buildStepPlan();
  auto plan = Plan::fromData(d);
  ASSERT_TRUE(plan.ok());
  SessionOptions o;
  o.deviceMemoryBytes = d.deviceCapacity - 1;
  auto s = Session::create(*plan, "host", o);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("bytes but the plan's device arena needs " +
                             std::to_string(d.deviceCapacity)),
            std::string::npos)
      << s.message();
  o.deviceMemoryBytes = d.deviceCapacity;
  EXPECT_TRUE(Session::create(*plan, "host", o).ok());
}

TEST_F(SessionTest, MissingWaitIsRejectedStatically) {
  StepPlanOptions o;
  o.offload = true;
  o.dropWait = true;
  auto plan = Plan::fromData(buildStepPlan(o));
  ASSERT_TRUE(plan.ok()) << plan.message();
  auto s = Session::create(*plan, "host");
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("missing wait: instruction 5 (test.scale, "
                             "compute stream) reads buffer"),
            std::string::npos)
      << s.message();
}

TEST_F(SessionTest, MissingWaitFailsInPoisonMode) {
  StepPlanOptions o;
  o.offload = true;
  o.dropWait = true;
  SessionOptions so;
  so.checkRaces = false;
  so.poison = true;
  auto s = make(buildStepPlan(o), so);
  ASSERT_TRUE(s);
  bindDefaults(*s);
  // Deterministic: in poison mode the h2d copy runs only when waited for.
  for (int rep = 0; rep < 5; ++rep) {
    Status st = s->step();
    ASSERT_FALSE(st.ok());
    EXPECT_NE(st.message().find("reads poisoned bytes of buffer"),
              std::string::npos)
        << st.message();
  }
  // With the wait the same plan succeeds in poison mode, bit-identical to
  // the non-poison run.
  o.dropWait = false;
  auto good = make(buildStepPlan(o), so);
  auto ref = make(buildStepPlan(o));
  ASSERT_TRUE(good && ref);
  bindDefaults(*good);
  bindDefaults(*ref);
  ASSERT_TRUE(good->step().ok());
  ASSERT_TRUE(ref->step().ok());
  EXPECT_TRUE(good->output("w")->bitEqual(*ref->output("w")));
}

/// The emulated link: each copy of N bytes occupies its stream for at least
/// N / rate seconds. Only lower bounds are checked (a loaded machine makes
/// copies slower, never faster), so the test cannot flake.
TEST_F(SessionTest, EmulatedLinkSlowsCopiesAndKeepsResults) {
  StepPlanOptions o;
  o.offload = true;
  o.n = 1 << 16;                            // y: 256 KiB, copied out and back
  const double bytes = double(o.n) * 4;
  const double rate = 16e6;                 // 16 MB/s: 16.4 ms per copy
  for (bool poison : {false, true}) {
    SessionOptions slow, fast;
    slow.emulatedLinkBytesPerSecond = rate;
    slow.poison = fast.poison = poison;
    auto s = make(buildStepPlan(o), slow);
    auto ref = make(buildStepPlan(o), fast);
    ASSERT_TRUE(s && ref);
    bindDefaults(*s, o.n);
    bindDefaults(*ref, o.n);
    for (int step = 0; step < 2; ++step) {
      auto t0 = std::chrono::steady_clock::now();
      ASSERT_TRUE(s->step().ok());
      double wall = std::chrono::duration<double>(
                        std::chrono::steady_clock::now() - t0)
                        .count();
      ASSERT_TRUE(ref->step().ok());
      // The device->host copy and the host->device copy that waits for it
      // run one after the other.
      EXPECT_GE(wall, 2 * bytes / rate) << "poison " << poison;
      EXPECT_GE(s->lastStepSeconds(), 2 * bytes / rate);
      EXPECT_GE(s->lastRunSeconds(), 2 * bytes / rate);
      EXPECT_LE(s->lastRunSeconds(), s->lastStepSeconds());
      auto busy = s->streamBusySeconds();
      EXPECT_GE(busy[HostToDeviceStream], bytes / rate);
      EXPECT_GE(busy[DeviceToHostStream], bytes / rate);
      // Copies are accounted as busy copy time, not as compute, so they do
      // not overlap compute here (compute waits for them).
      EXPECT_GE(s->copyComputeOverlapSeconds(), 0.0);
      EXPECT_LT(busy[ComputeStream], wall);
      // The emulation only delays: the results are bit-identical.
      EXPECT_TRUE(s->output("w")->bitEqual(*ref->output("w")));
      EXPECT_TRUE(s->output("grad:w")->bitEqual(*ref->output("grad:w")));
      EXPECT_TRUE(s->output("loss")->bitEqual(*ref->output("loss")));
    }
  }
}

TEST_F(SessionTest, EmulatedLinkRejectsBadRates) {
  auto plan = Plan::fromData(buildStepPlan());
  ASSERT_TRUE(plan.ok());
  for (double bad : {-1.0, std::nan(""), HUGE_VAL}) {
    SessionOptions so;
    so.emulatedLinkBytesPerSecond = bad;
    auto s = Session::create(*plan, "host", so);
    ASSERT_FALSE(s.ok()) << bad;
    EXPECT_NE(s.message().find("emulatedLinkBytesPerSecond"), std::string::npos)
        << s.message();
  }
}

TEST_F(SessionTest, FailedStepLeavesStoreBitIdentical) {
  auto store = std::make_shared<ParameterStore>();
  auto ok = make(buildStepPlan(), {}, store);
  ASSERT_TRUE(ok);
  bindDefaults(*ok);
  ASSERT_TRUE(ok->step().ok());
  Tensor before = *store->get("w");
  Tensor lossBefore = *ok->output("loss");

  // A kernel error in the optimizer phase, after new_w was written.
  StepPlanOptions fo;
  fo.failOp = true;
  auto bad = make(buildStepPlan(fo), {}, store);
  ASSERT_TRUE(bad);
  ASSERT_TRUE(
      bad->bind("x", Tensor::fromVector(DType::F32, {64}, x0(64))).ok());
  Status st = bad->step();
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("instruction 6 (test.fail): test.fail always "
                              "fails"),
            std::string::npos)
      << st.message();
  EXPECT_NE(st.message().find("parameters and state unchanged"),
            std::string::npos);
  EXPECT_TRUE(store->get("w")->bitEqual(before));

  // An injected failure at every instruction index.
  PlanData d = buildStepPlan();
  for (int i = 0; i < int(d.instructions.size()); ++i) {
    SessionOptions so;
    so.failAtInstruction = i;
    auto inj = make(d, so, store);
    ASSERT_TRUE(inj);
    ASSERT_TRUE(
        inj->bind("x", Tensor::fromVector(DType::F32, {64}, x0(64))).ok());
    Status s2 = inj->step();
    ASSERT_FALSE(s2.ok());
    EXPECT_NE(s2.message().find("injected failure"), std::string::npos);
    EXPECT_TRUE(store->get("w")->bitEqual(before)) << "failure at " << i;
    EXPECT_FALSE(inj->output("loss").ok());
  }
  // The session that succeeded still works and continues from `before`.
  ASSERT_TRUE(ok->step().ok());
  EXPECT_FALSE(store->get("w")->bitEqual(before));
  EXPECT_FALSE(ok->output("loss")->bitEqual(lossBefore));
}

TEST_F(SessionTest, FailedStepKeepsPreviousOutputsAndStateOfTheSameSession) {
  StepPlanOptions o;
  o.switchableFail = true;
  auto s = make(buildStepPlan(o));
  ASSERT_TRUE(s);
  bindDefaults(*s);
  ASSERT_TRUE(s->step().ok());
  Tensor w1 = *s->store().get("w"), loss1 = *s->output("loss"),
         g1 = *s->output("grad:w");
  failSwitch() = true;
  Status st = s->step();
  failSwitch() = false;
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("test.maybe_fail: switched on"),
            std::string::npos)
      << st.message();
  EXPECT_TRUE(s->store().get("w")->bitEqual(w1));
  EXPECT_TRUE(s->output("loss")->bitEqual(loss1));
  EXPECT_TRUE(s->output("grad:w")->bitEqual(g1));
  // The next step continues from w1 exactly as if the failure never was.
  auto ref = make(buildStepPlan());
  ASSERT_TRUE(ref);
  bindDefaults(*ref);
  ASSERT_TRUE(ref->step().ok());
  ASSERT_TRUE(ref->step().ok());
  ASSERT_TRUE(s->step().ok());
  EXPECT_TRUE(s->store().get("w")->bitEqual(*ref->store().get("w")));
}

TEST_F(SessionTest, PhasesRunSeparately) {
  auto whole = make(buildStepPlan());
  auto phased = make(buildStepPlan());
  ASSERT_TRUE(whole && phased);
  bindDefaults(*whole);
  bindDefaults(*phased);
  ASSERT_TRUE(whole->step().ok());
  ASSERT_TRUE(phased->runPhase("forward").ok());
  EXPECT_TRUE(phased->stepActive());
  ASSERT_TRUE(phased->runPhase("backward").ok());
  Status again = phased->runPhase("forward");
  EXPECT_FALSE(again.ok());
  EXPECT_NE(again.message().find("already ran"), std::string::npos);
  // The failed call aborted nothing: the step is still active.
  ASSERT_TRUE(phased->runPhase("optimizer").ok());
  ASSERT_TRUE(phased->finishStep().ok());
  EXPECT_TRUE(whole->output("w")->bitEqual(*phased->output("w")));
  Status unknown = phased->runPhase("backward_weight");
  EXPECT_FALSE(unknown.ok());
  EXPECT_NE(unknown.message().find("no phase 'backward_weight'"),
            std::string::npos);
}

TEST_F(SessionTest, MissingKernelsAreListedTogether) {
  PlanBuilder b;
  int p = b.buffer("p", DType::F32, {4}, BufferRole::Parameter);
  int q = b.buffer("q", DType::F32, {4}, BufferRole::Temporary);
  int l = b.buffer("loss", DType::F32, {}, BufferRole::Output);
  b.bindIn("p", p);
  b.bindOut("loss", l);
  b.instr("test.nokernel_a", {p}, {q});
  b.instr("test.nokernel_b", {q}, {l});
  b.instr("test.nokernel_a", {p}, {q});
  auto plan = Plan::fromData(b.finish());
  ASSERT_TRUE(plan.ok()) << plan.message();
  auto s = Session::create(*plan, "host");
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("no kernel for: test.nokernel_a, "
                             "test.nokernel_b"),
            std::string::npos)
      << s.message();
}

TEST_F(SessionTest, UnknownBackend) {
  auto plan = Plan::fromData(buildStepPlan());
  ASSERT_TRUE(plan.ok());
  auto s = Session::create(*plan, "tpu");
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("unknown backend 'tpu'"), std::string::npos);
}

TEST_F(SessionTest, HostResidentParameterAndHostOptimizer) {
  // w lives in the host arena: streamed to the device for the forward and
  // backward, the gradient comes back, and the update runs on host buffers.
  const int64_t n = 64;
  const float lr = 0.125f;
  PlanBuilder b;
  auto H = MemorySpace::Host;
  int wh = b.buffer("w", DType::F32, {n}, BufferRole::Parameter, H);
  int x = b.buffer("x", DType::F32, {n}, BufferRole::Input);
  int wd = b.buffer("w.dev", DType::F32, {n}, BufferRole::Temporary);
  int y = b.buffer("y", DType::F32, {n}, BufferRole::Temporary);
  int loss = b.buffer("loss", DType::F32, {}, BufferRole::Output);
  int dy = b.buffer("dy", DType::F32, {n}, BufferRole::Temporary);
  int gd = b.buffer("g.dev", DType::F32, {n}, BufferRole::Temporary);
  int gh = b.buffer("grad:w", DType::F32, {n}, BufferRole::Gradient, H);
  int th = b.buffer("t", DType::F32, {n}, BufferRole::Temporary, H);
  int nwh = b.buffer("new_w", DType::F32, {n}, BufferRole::Parameter, H);
  b.bindIn("w", wh);
  b.bindIn("x", x);
  b.bindOut("loss", loss);
  b.bindOut("grad:w", gh);
  b.bindOut("w", nwh);
  int e0 = b.event(), e1 = b.event(), e2 = b.event();
  b.instr(kOpToDevice, {wh}, {wd}, {}, HostToDeviceStream, {}, e0);
  b.instr("test.mul", {wd, x}, {y}, {}, ComputeStream, {e0});
  b.instr("test.sumsq", {y}, {loss});
  b.endPhase("forward");
  b.instr("test.scale", {y}, {dy}, scaleBy(2.0));
  b.instr("test.mul", {dy, x}, {gd}, {}, ComputeStream, {}, e1);
  b.instr(kOpToHost, {gd}, {gh}, {}, DeviceToHostStream, {e1}, e2);
  b.endPhase("backward");
  b.instr("test.scale", {gh}, {th}, scaleBy(lr), ComputeStream, {e2});
  b.instr("test.sub", {wh, th}, {nwh});
  b.endPhase("optimizer");
  PlanData d = b.finish();
  EXPECT_GT(d.hostCapacity, 0u);
  for (bool poison : {false, true}) {
    SessionOptions so;
    so.poison = poison;
    auto s = make(d, so);
    ASSERT_TRUE(s);
    bindDefaults(*s);
    std::vector<float> w = w0(n), xv = x0(n), g, nw;
    for (int step = 0; step < 2; ++step) {
      float ref = referenceStep(w, xv, lr, g, nw);
      Status st = s->step();
      ASSERT_TRUE(st.ok()) << st.message();
      EXPECT_NEAR(*s->loss(), ref, 1e-6 * std::fabs(ref));
      expectFloatsEq(*s->output("grad:w"), g, 1e-6f);
      expectFloatsEq(*s->store().get("w"), nw, 1e-6f);
      w = nw;
    }
    // Device peak counts only device buffers.
    EXPECT_EQ(s->measuredPeakDeviceBytes(), s->plannedPeakDeviceBytes());
  }
}

TEST_F(SessionTest, SliceBindingsBindAndAssembleTheWholeTensor) {
  // "w" (8 floats) is bound as two 4-float row slices; each is scaled into
  // a new slice, and the new "w" is assembled from both.
  PlanBuilder b;
  std::vector<int32_t> in, out;
  for (int k = 0; k < 2; ++k) {
    std::string name = "w[" + std::to_string(4 * k) + ":" + std::to_string(4 * k + 4) + "]";
    in.push_back(b.buffer(name, DType::F32, {4}, BufferRole::Parameter));
    b.bindIn(name, in.back());
    b.sliceLastBinding("w", {8}, uint64_t(16 * k));
    out.push_back(b.buffer(name + ".new", DType::F32, {4}, BufferRole::Parameter));
  }
  for (int k = 0; k < 2; ++k) {
    b.instr("test.scale", {in[size_t(k)]}, {out[size_t(k)]}, scaleBy(k + 2.0));
    std::string name = "w[" + std::to_string(4 * k) + ":" + std::to_string(4 * k + 4) + "]";
    b.bindOut(name, out[size_t(k)]);
    b.sliceLastBinding("w", {8}, uint64_t(16 * k));
  }
  PlanData d = b.finish();
  auto s = make(d);
  ASSERT_TRUE(s);
  // Users see one tensor "w".
  ASSERT_EQ(s->inputBindings().size(), 1u);
  EXPECT_EQ(s->inputBindings()[0].first, "w");
  Status bad = s->bind("w", Tensor::fromVector(DType::F32, {4}, ramp(4, 0, 1)));
  EXPECT_NE(bad.message().find("binding 'w' expects f32[8]"), std::string::npos)
      << bad.message();
  bad = s->bind("w[0:4]", Tensor::fromVector(DType::F32, {4}, ramp(4, 0, 1)));
  EXPECT_NE(bad.message().find("no input binding named 'w[0:4]' (the plan binds: w)"),
            std::string::npos)
      << bad.message();
  std::vector<float> w = ramp(8, 1.0f, 0.5f);
  ASSERT_TRUE(s->bind("w", Tensor::fromVector(DType::F32, {8}, w)).ok());
  ASSERT_TRUE(s->step().ok());
  std::vector<float> ref(8);
  for (int i = 0; i < 8; ++i)
    ref[size_t(i)] = w[size_t(i)] * (i < 4 ? 2.0f : 3.0f);
  expectFloatsEq(*s->store().get("w"), ref, 0);
  expectFloatsEq(*s->output("w"), ref, 0);

  // A slice that does not fit in the whole tensor is rejected on load.
  d.bindings[0].sliceOffset = 20;
  auto p = Plan::fromData(d);
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.message().find("binding 'w[0:4]': slice of 16 bytes at offset 20 does "
                             "not fit in 'w' (32 bytes)"),
            std::string::npos)
      << p.message();
}

TEST_F(SessionTest, InPlaceValuesStayResidentUntilTheStoreChanges) {
  // w is updated in place (its new value is bound out of its own buffer):
  // the next step finds it in the arena and skips the upload; a value set
  // in the store in between, by bind or by another session, is uploaded.
  PlanBuilder b;
  int w = b.buffer("w", DType::F32, {4}, BufferRole::Parameter);
  b.bindIn("w", w);
  b.instr("test.scale", {w}, {w}, scaleBy(2.0));
  b.bindOut("w", w);
  PlanData d = b.finish();
  auto store = std::make_shared<ParameterStore>();
  auto s = make(d, {}, store);
  auto other = make(d, {}, store);
  ASSERT_TRUE(s && other);
  std::vector<float> w0 = ramp(4, 1.0f, 1.0f);
  ASSERT_TRUE(s->bind("w", Tensor::fromVector(DType::F32, {4}, w0)).ok());
  auto scaled = [&](float k) {
    std::vector<float> v(w0);
    for (float &e : v)
      e *= k;
    return v;
  };
  ASSERT_TRUE(s->step().ok());
  expectFloatsEq(*store->get("w"), scaled(2), 0);
  ASSERT_TRUE(s->step().ok()); // resident: no upload, same result
  expectFloatsEq(*store->get("w"), scaled(4), 0);
  ASSERT_TRUE(s->bind("w", Tensor::fromVector(DType::F32, {4}, w0)).ok());
  ASSERT_TRUE(s->step().ok()); // rebound: uploaded again
  expectFloatsEq(*store->get("w"), scaled(2), 0);
  ASSERT_TRUE(other->step().ok()); // another session moves the store on
  expectFloatsEq(*store->get("w"), scaled(4), 0);
  ASSERT_TRUE(s->step().ok()); // so this one uploads it
  expectFloatsEq(*store->get("w"), scaled(8), 0);
}

TEST_F(SessionTest, SharedStoreBetweenSessions) {
  auto store = std::make_shared<ParameterStore>();
  auto a = make(buildStepPlan(), {}, store);
  auto b = make(buildStepPlan(), {}, store);
  ASSERT_TRUE(a && b);
  bindDefaults(*a);
  ASSERT_TRUE(b->bind("x", Tensor::fromVector(DType::F32, {64}, x0(64))).ok());
  ASSERT_TRUE(a->step().ok());
  ASSERT_TRUE(b->step().ok()); // continues from a's committed w
  std::vector<float> w = w0(64), x = x0(64), g, nw, nw2;
  referenceStep(w, x, 0.125f, g, nw);
  referenceStep(nw, x, 0.125f, g, nw2);
  expectFloatsEq(*store->get("w"), nw2, 1e-6f);
}

TEST_F(SessionTest, OutputsNotRetainedAreReadFromTheArenaUntilTheNextStep) {
  // Issue 16: with retainOutputs false the session holds no copy of the
  // gradient; it is read where the step left it, and only until the next
  // step starts.
  StepPlanOptions o;
  o.switchableFail = true;
  auto kept = make(buildStepPlan(o));
  SessionOptions lean;
  lean.retainOutputs = false;
  auto s = make(buildStepPlan(o), lean);
  ASSERT_TRUE(kept && s);
  bindDefaults(*kept);
  bindDefaults(*s);
  Expected<Tensor> before = s->output("grad:w");
  ASSERT_FALSE(before.ok());
  EXPECT_NE(before.message().find("no step has succeeded yet"), std::string::npos)
      << before.message();
  ASSERT_TRUE(kept->step().ok());
  ASSERT_TRUE(s->step().ok());
  EXPECT_EQ(s->heldTensorBytes(), 64u * 4 + 4); // x and the loss
  EXPECT_EQ(kept->heldTensorBytes(), 64u * 4 + 4 + 64 * 4);
  EXPECT_TRUE(s->output("grad:w")->bitEqual(*kept->output("grad:w")));
  EXPECT_TRUE(s->output("w")->bitEqual(*kept->output("w")));
  EXPECT_EQ(*s->loss(), *kept->loss());
  // readOutput: any byte range, from the arena, the store or the session.
  for (const char *name : {"grad:w", "w", "loss"}) {
    Tensor ref = *kept->output(name);
    std::vector<uint8_t> got(ref.byteSize(), 0);
    size_t half = got.size() / 2;
    ASSERT_TRUE(s->readOutput(name, 0, got.data(), half).ok()) << name;
    ASSERT_TRUE(s->readOutput(name, half, got.data() + half, got.size() - half).ok())
        << name;
    EXPECT_EQ(std::memcmp(got.data(), ref.data(), got.size()), 0) << name;
    Status out = s->readOutput(name, 1, got.data(), got.size());
    EXPECT_NE(out.message().find("are outside it"), std::string::npos)
        << out.message();
  }
  EXPECT_NE(s->readOutput("nope", 0, nullptr, 0).message().find(
                "no output binding named 'nope'"),
            std::string::npos);
  // A failed step: the gradient is gone (the arena was overwritten), the
  // loss and the parameters are those of the last successful step.
  Tensor w1 = *s->store().get("w");
  double loss1 = *s->loss();
  failSwitch() = true;
  Status st = s->step();
  failSwitch() = false;
  ASSERT_FALSE(st.ok());
  Expected<Tensor> gone = s->output("grad:w");
  ASSERT_FALSE(gone.ok());
  EXPECT_NE(gone.message().find("no longer available"), std::string::npos)
      << gone.message();
  EXPECT_TRUE(s->store().get("w")->bitEqual(w1));
  EXPECT_EQ(*s->loss(), loss1);
  ASSERT_TRUE(s->step().ok());
  ASSERT_TRUE(kept->step().ok());
  EXPECT_TRUE(s->output("grad:w")->bitEqual(*kept->output("grad:w")));
}

TEST_F(SessionTest, HostCommitWritesTheStoreInPlace) {
  // Issue 16: the host backend commits new values into the store's own
  // tensors (one copy of the store), and still bumps their versions.
  auto s = make(buildStepPlan());
  ASSERT_TRUE(s);
  bindDefaults(*s);
  const void *storage = s->store().get("w")->data();
  uint64_t version = s->store().version("w");
  std::vector<float> w = w0(64), x = x0(64), g, nw;
  for (int step = 0; step < 3; ++step) {
    referenceStep(w, x, 0.125f, g, nw);
    ASSERT_TRUE(s->step().ok());
    EXPECT_EQ(s->store().get("w")->data(), storage) << "step " << step;
    EXPECT_GT(s->store().version("w"), version);
    version = s->store().version("w");
    expectFloatsEq(*s->store().get("w"), nw, 1e-6f);
    w = nw;
  }
}

TEST_F(SessionTest, BorrowedInputsAreUsedWithoutACopy) {
  // A borrowed input is bound by reference: each step uploads the bytes as
  // they are then. A borrowed parameter is copied (the store owns it).
  auto s = make(buildStepPlan());
  auto ref = make(buildStepPlan());
  ASSERT_TRUE(s && ref);
  auto xs = std::make_shared<std::vector<float>>(x0(64));
  auto ws = std::make_shared<std::vector<float>>(w0(64));
  ASSERT_TRUE(s->bind("x", Tensor::borrow(DType::F32, {64}, xs->data(), xs)).ok());
  ASSERT_TRUE(s->bind("w", Tensor::borrow(DType::F32, {64}, ws->data(), ws)).ok());
  EXPECT_EQ(s->input("x")->data(), static_cast<void *>(xs->data()));
  EXPECT_TRUE(s->input("x")->borrowed());
  EXPECT_NE(s->store().get("w")->data(), static_cast<void *>(ws->data()));
  EXPECT_FALSE(s->store().get("w")->borrowed());
  EXPECT_EQ(s->heldTensorBytes(), 0u);
  bindDefaults(*ref);
  ASSERT_TRUE(s->step().ok());
  ASSERT_TRUE(ref->step().ok());
  EXPECT_EQ(*s->loss(), *ref->loss());
  EXPECT_EQ((*ws)[3], w0(64)[3]); // the commit did not write the caller's array
  // Changed in place: the next step sees it.
  for (float &v : *xs)
    v *= 2;
  std::vector<float> x2 = *xs;
  ASSERT_TRUE(ref->bind("x", Tensor::fromVector(DType::F32, {64}, x2)).ok());
  ASSERT_TRUE(s->step().ok());
  ASSERT_TRUE(ref->step().ok());
  EXPECT_EQ(*s->loss(), *ref->loss());
  // The session keeps the owner alive; a copy of a borrowed tensor owns.
  std::weak_ptr<std::vector<float>> weak = xs;
  Tensor copy = *s->input("x");
  EXPECT_FALSE(copy.borrowed());
  EXPECT_NE(copy.data(), static_cast<void *>(xs->data()));
  xs.reset();
  EXPECT_FALSE(weak.expired());
  ASSERT_TRUE(s->bind("x", copy).ok());
  EXPECT_TRUE(weak.expired());
}

} // namespace
