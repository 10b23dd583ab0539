//===- DataParallelTest.cpp - offload.all_reduce over gloo ----------------===//
//
// Part of offload. Two ranks in one process (one thread each, each with its
// own gloo communicator over loopback and a FileStore rendezvous in a fresh
// directory) run a plan whose gradient goes through offload.all_reduce on
// the communication stream: both ranks get the mean gradient, bit for bit;
// one rank alone gets its own; a rank that leaves (or hangs past the
// collective timeout) makes the other's step fail naming the rank and the
// collective, its parameters unchanged.
//
//===----------------------------------------------------------------------===//

#include "TestPlans.h"

#include "offload/Runtime/Communicator.h"

#include <gtest/gtest.h>

#include <chrono>
#include <map>
#include <cstdlib>
#include <thread>

using namespace offload::rt;
using namespace offload::rt::test;

namespace {

constexpr int64_t kN = 64;
constexpr float kLr = 0.125f;

/// w*x -> loss = sum (w x)^2; grad = 2 (w x) x, averaged across ranks;
/// new w = w - lr * mean grad.
PlanData buildReducePlan() {
  PlanBuilder b;
  b.setProducer("unittest");
  int w = b.buffer("w", DType::F32, {kN}, BufferRole::Parameter);
  int x = b.buffer("x", DType::F32, {kN}, BufferRole::Input);
  int y = b.buffer("y", DType::F32, {kN}, BufferRole::Temporary);
  int loss = b.buffer("loss", DType::F32, {}, BufferRole::Output);
  int dy = b.buffer("dy", DType::F32, {kN}, BufferRole::Temporary);
  int gw = b.buffer("gw", DType::F32, {kN}, BufferRole::Temporary);
  int gm = b.buffer("grad:w", DType::F32, {kN}, BufferRole::Gradient);
  int t = b.buffer("t", DType::F32, {kN}, BufferRole::Temporary);
  int nw = b.buffer("new_w", DType::F32, {kN}, BufferRole::Parameter);
  b.bindIn("w", w);
  b.bindIn("x", x);
  b.bindOut("loss", loss);
  b.bindOut("grad:w", gm);
  b.bindOut("w", nw);
  b.instr("test.mul", {w, x}, {y});
  b.instr("test.sumsq", {y}, {loss});
  b.endPhase("forward");
  b.instr("test.scale", {y}, {dy}, scaleBy(2.0));
  b.instr("test.mul", {dy, x}, {gw});
  int made = b.event(), reduced = b.event();
  b.instr(kOpWait, {}, {}, {}, ComputeStream, {}, made);
  AttrMap bucket;
  bucket.set("bucket", attrInt(0));
  b.instr(kOpAllReduce, {gw}, {gm}, bucket, CommStream, {made}, reduced);
  b.instr(kOpWait, {}, {}, {}, ComputeStream, {reduced});
  b.endPhase("backward");
  b.instr("test.scale", {gm}, {t}, scaleBy(kLr));
  b.instr("test.sub", {w, t}, {nw});
  b.endPhase("optimizer");
  return b.finish();
}

std::vector<float> w0() { return ramp(kN, 0.5f, 0.25f); }
std::vector<float> xOf(int rank) { return ramp(kN, -1.0f + 0.5f * float(rank), 0.375f); }

std::unique_ptr<Session> makeSession(const std::shared_ptr<Communicator> &comm,
                                     std::shared_ptr<ParameterStore> store, int rank,
                                     std::string &error) {
  auto plan = Plan::fromData(buildReducePlan());
  if (!plan) {
    error = plan.message();
    return nullptr;
  }
  SessionOptions o;
  o.communicator = comm;
  auto s = Session::create(*plan, "host", o, std::move(store));
  if (!s) {
    error = s.message();
    return nullptr;
  }
  auto session = s.take();
  if (!session->bind("w", Tensor::fromVector(DType::F32, {kN}, w0())).ok() ||
      !session->bind("x", Tensor::fromVector(DType::F32, {kN}, xOf(rank))).ok())
    error = "bind failed";
  return session;
}

/// Rank `r` of a two-rank job meeting at `dir` (gloo, `timeoutSeconds`),
/// with a session over a parameter store of its own; a null session, with
/// `error` set, when joining or creating the session fails.
struct RankSession {
  std::unique_ptr<Session> session;
  std::shared_ptr<ParameterStore> store;
};
/// Rank `r` of `worldSize` joined through gloo in `dir`; null, with `error`
/// set, when joining fails.
std::shared_ptr<Communicator> joinWorld(const std::string &dir, int r, int worldSize,
                                        double timeoutSeconds, std::string &error) {
  CommunicatorOptions co;
  co.rank = r;
  co.worldSize = worldSize;
  co.rendezvous = "file:" + dir;
  co.timeoutSeconds = timeoutSeconds;
  auto comm = createGlooCommunicator(co);
  if (!comm) {
    error = comm.message();
    return nullptr;
  }
  return *comm;
}

RankSession joinRank(const std::string &dir, int r, double timeoutSeconds, std::string &error) {
  auto comm = joinWorld(dir, r, 2, timeoutSeconds, error);
  if (!comm)
    return {};
  auto store = std::make_shared<ParameterStore>();
  auto session = makeSession(comm, store, r, error);
  return {std::move(session), store};
}

std::string freshDir(const std::string &name) {
  std::string dir = tempPath(name);
  std::string cmd = "rm -rf '" + dir + "'";
  EXPECT_EQ(std::system(cmd.c_str()), 0);
  return dir;
}

class DataParallelTest : public ::testing::Test {
protected:
  void SetUp() override { registerTestKernels(); }
};

TEST_F(DataParallelTest, OneRankCopiesTheBucket) {
  std::string error;
  auto s = makeSession(nullptr, nullptr, 0, error);
  ASSERT_TRUE(s) << error;
  ASSERT_TRUE(s->step().ok());
  std::vector<float> g, nw;
  referenceStep(w0(), xOf(0), kLr, g, nw);
  auto grad = s->output("grad:w");
  ASSERT_TRUE(grad);
  for (int64_t i = 0; i < kN; ++i)
    EXPECT_EQ(grad->as<float>()[i], g[size_t(i)]) << i;
}

TEST_F(DataParallelTest, OneRankThroughGlooIsBitIdentical) {
  std::string dir = freshDir("dp-one");
  CommunicatorOptions co;
  co.rendezvous = "file:" + dir;
  co.timeoutSeconds = 30;
  auto comm = createGlooCommunicator(co);
  ASSERT_TRUE(comm) << comm.message();
  std::string error;
  auto viaGloo = makeSession(*comm, nullptr, 0, error);
  ASSERT_TRUE(viaGloo) << error;
  auto plain = makeSession(nullptr, nullptr, 0, error);
  ASSERT_TRUE(plain) << error;
  for (int step = 0; step < 2; ++step) {
    ASSERT_TRUE(viaGloo->step().ok());
    ASSERT_TRUE(plain->step().ok());
    EXPECT_TRUE(viaGloo->output("grad:w")->bitEqual(*plain->output("grad:w")));
    EXPECT_TRUE(viaGloo->output("loss")->bitEqual(*plain->output("loss")));
  }
}

TEST_F(DataParallelTest, TwoRanksGetTheMeanBitForBit) {
  std::string dir = freshDir("dp-mean");
  std::vector<Tensor> grads(2), params(2);
  std::vector<std::string> errors(2);
  auto rank = [&](int r) {
    RankSession rs = joinRank(dir, r, 30, errors[size_t(r)]);
    if (!rs.session)
      return;
    auto &s = rs.session;
    auto &store = rs.store;
    if (Status st = s->step(); !st.ok()) {
      errors[size_t(r)] = st.message();
      return;
    }
    grads[size_t(r)] = *s->output("grad:w");
    params[size_t(r)] = *store->get("w");
  };
  std::thread t0(rank, 0), t1(rank, 1);
  t0.join();
  t1.join();
  ASSERT_EQ(errors[0], "");
  ASSERT_EQ(errors[1], "");
  std::vector<float> g0, g1, nw;
  referenceStep(w0(), xOf(0), kLr, g0, nw);
  referenceStep(w0(), xOf(1), kLr, g1, nw);
  for (int64_t i = 0; i < kN; ++i) {
    // (a + b) * 0.5: exact as float, so the mean is checked bit for bit.
    float mean = (g0[size_t(i)] + g1[size_t(i)]) * 0.5f;
    EXPECT_EQ(grads[0].as<float>()[i], mean) << i;
    EXPECT_EQ(grads[1].as<float>()[i], mean) << i;
  }
  EXPECT_TRUE(params[0].bitEqual(params[1]));
}

TEST_F(DataParallelTest, RankThatLeavesFailsTheOtherAndKeepsItsParameters) {
  std::string dir = freshDir("dp-leave");
  Tensor before, after;
  std::string error, error1;
  bool secondFailed = false;
  auto rank = [&](int r) {
    RankSession rs = joinRank(dir, r, 20, r ? error1 : error);
    if (!rs.session)
      return;
    auto &s = rs.session;
    auto &store = rs.store;
    if (Status st = s->step(); !st.ok()) {
      (r ? error1 : error) = st.message();
      return;
    }
    if (r == 1)
      return; // leaves: its session and communicator close their sockets
    before = *store->get("w");
    Status st = s->step();
    secondFailed = !st.ok();
    error = st.message();
    after = *store->get("w");
  };
  std::thread t0(rank, 0), t1(rank, 1);
  t0.join();
  t1.join();
  ASSERT_EQ(error1, "");
  ASSERT_TRUE(secondFailed);
  EXPECT_NE(error.find("offload.all_reduce of bucket 0"), std::string::npos) << error;
  EXPECT_NE(error.find("rank 1 did not complete it"), std::string::npos) << error;
  EXPECT_NE(error.find("parameters and state unchanged"), std::string::npos) << error;
  EXPECT_TRUE(after.bitEqual(before));
}

TEST_F(DataParallelTest, ThreeRanksNameTheRankThatLeft) {
  // gloo's error names a peer's address; with more than two ranks the
  // survivors name the rank that did not reach the failure (the probe in
  // the rendezvous directory, GlooCommunicator::ranksThatDidNotFail).
  std::string dir = freshDir("dp-three-leave");
  constexpr double kTimeout = 2;
  std::vector<std::string> errors(3);
  std::vector<double> seconds(3, -1);
  auto rank = [&](int r) {
    auto comm = joinWorld(dir, r, 3, kTimeout, errors[size_t(r)]);
    if (!comm)
      return;
    if (r == 2)
      return; // leaves after the rendezvous: its sockets close
    Tensor g(DType::F32, {4}), mean(DType::F32, {4});
    for (int64_t i = 0; i < 4; ++i)
      g.as<float>()[i] = float(r + i);
    TensorView in{g.data(), DType::F32, {4}}, out{mean.data(), DType::F32, {4}};
    auto t0 = std::chrono::steady_clock::now();
    Status st = comm->allReduceMean({in}, {out}, "offload.all_reduce of bucket 0");
    seconds[size_t(r)] =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    errors[size_t(r)] = st.ok() ? "" : st.message();
  };
  std::thread t0(rank, 0), t1(rank, 1), t2(rank, 2);
  t0.join();
  t1.join();
  t2.join();
  EXPECT_EQ(errors[2], "");
  for (int r = 0; r < 2; ++r) {
    EXPECT_NE(errors[size_t(r)].find("offload.all_reduce of bucket 0 failed on rank " +
                                     std::to_string(r) + " of 3"),
              std::string::npos)
        << errors[size_t(r)];
    EXPECT_NE(errors[size_t(r)].find("rank 2 did not complete it"), std::string::npos)
        << errors[size_t(r)];
    // The collective's timeout, then at most two more for the probe.
    EXPECT_LT(seconds[size_t(r)], 3 * kTimeout + 2) << r;
  }
}

TEST_F(DataParallelTest, HungRankFailsTheOtherWithinTheTimeout) {
  std::string dir = freshDir("dp-hung");
  constexpr double kTimeout = 1.5;
  Tensor before, after;
  std::string error, error1;
  double seconds = -1;
  auto rank = [&](int r) {
    RankSession rs = joinRank(dir, r, r == 0 ? kTimeout : 30, r ? error1 : error);
    if (!rs.session)
      return;
    auto &s = rs.session;
    auto &store = rs.store;
    if (r == 1) {
      // Joined, then never reaches the collective while rank 0 waits.
      std::this_thread::sleep_for(std::chrono::duration<double>(2 * kTimeout));
      return;
    }
    before = *store->get("w");
    auto t0 = std::chrono::steady_clock::now();
    Status st = s->step();
    seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    error = st.ok() ? "" : st.message();
    after = *store->get("w");
  };
  std::thread t0(rank, 0), t1(rank, 1);
  t0.join();
  t1.join();
  ASSERT_EQ(error1, "");
  ASSERT_NE(error, "");
  EXPECT_NE(error.find("offload.all_reduce of bucket 0"), std::string::npos) << error;
  EXPECT_NE(error.find("rank 1 did not complete it"), std::string::npos) << error;
  EXPECT_NE(error.find("timeout 1.5 s"), std::string::npos) << error;
  // Within the timeout plus scheduling slack on a loaded machine.
  EXPECT_GE(seconds, kTimeout * 0.9);
  EXPECT_LT(seconds, kTimeout + 5);
  EXPECT_TRUE(after.bitEqual(before));
}

/// ZeRO-1's collectives alone: a bucket of two gradients (5 and 2 elements,
/// 7 in all: shards of ceil(7 / W)) reduce-scattered with their parameters,
/// then this rank's gradient shard all-gathered into two outputs.
PlanData buildShardPlan(int64_t world) {
  const int64_t s = (7 + world - 1) / world;
  PlanBuilder b;
  b.setProducer("unittest");
  int g0 = b.buffer("g0", DType::F32, {5}, BufferRole::Input);
  int g1 = b.buffer("g1", DType::F32, {2}, BufferRole::Input);
  int p0 = b.buffer("p0", DType::F32, {5}, BufferRole::Input);
  int p1 = b.buffer("p1", DType::F32, {2}, BufferRole::Input);
  int gs = b.buffer("gs", DType::F32, {s}, BufferRole::Output);
  int ps = b.buffer("ps", DType::F32, {s}, BufferRole::Output);
  int o0 = b.buffer("o0", DType::F32, {5}, BufferRole::Output);
  int o1 = b.buffer("o1", DType::F32, {2}, BufferRole::Output);
  for (auto [n, id] : {std::pair{"g0", g0}, {"g1", g1}, {"p0", p0}, {"p1", p1}})
    b.bindIn(n, id);
  for (auto [n, id] : {std::pair{"gs", gs}, {"ps", ps}, {"o0", o0}, {"o1", o1}})
    b.bindOut(n, id);
  AttrMap attrs;
  attrs.set("bucket", attrInt(0));
  attrs.set("world_size", attrInt(world));
  int made = b.event(), done = b.event();
  b.instr(kOpWait, {}, {}, {}, ComputeStream, {}, made);
  b.instr(kOpReduceScatter, {g0, g1, p0, p1}, {gs, ps}, attrs, CommStream, {made});
  b.instr(kOpAllGather, {gs, p0, p1}, {o0, o1}, attrs, CommStream, {}, done);
  b.instr(kOpWait, {}, {}, {}, ComputeStream, {done});
  b.endPhase("optimizer");
  return b.finish();
}

std::vector<float> gradOf(int rank) { return ramp(7, 1.0f + float(rank), 0.5f); }
std::vector<float> paramsOf() { return ramp(7, -2.0f, 0.25f); }

std::unique_ptr<Session> makeShardSession(int64_t world, const std::shared_ptr<Communicator> &comm,
                                          int rank, std::string &error) {
  auto plan = Plan::fromData(buildShardPlan(world));
  if (!plan) {
    error = plan.message();
    return nullptr;
  }
  SessionOptions o;
  o.communicator = comm;
  auto s = Session::create(*plan, "host", o);
  if (!s) {
    error = s.message();
    return nullptr;
  }
  auto session = s.take();
  std::vector<float> g = gradOf(rank), p = paramsOf();
  auto part = [](const std::vector<float> &v, size_t from, size_t to) {
    return Tensor::fromVector(DType::F32, {int64_t(to - from)},
                              std::vector<float>(v.begin() + long(from), v.begin() + long(to)));
  };
  if (!session->bind("g0", part(g, 0, 5)).ok() ||
      !session->bind("g1", part(g, 5, 7)).ok() ||
      !session->bind("p0", part(p, 0, 5)).ok() ||
      !session->bind("p1", part(p, 5, 7)).ok())
    error = "bind failed";
  return session;
}

TEST_F(DataParallelTest, ZeroOneRankShardIsTheBucket) {
  std::string error;
  auto s = makeShardSession(1, nullptr, 0, error);
  ASSERT_TRUE(s) << error;
  ASSERT_TRUE(s->step().ok());
  std::vector<float> g = gradOf(0), p = paramsOf();
  for (int64_t i = 0; i < 7; ++i) {
    EXPECT_EQ(s->output("gs")->as<float>()[i], g[size_t(i)]) << i;
    EXPECT_EQ(s->output("ps")->as<float>()[i], p[size_t(i)]) << i;
  }
  for (int64_t i = 0; i < 5; ++i)
    EXPECT_EQ(s->output("o0")->as<float>()[i], g[size_t(i)]) << i;
  for (int64_t i = 0; i < 2; ++i)
    EXPECT_EQ(s->output("o1")->as<float>()[i], g[size_t(5 + i)]) << i;
}

TEST_F(DataParallelTest, ZeroPlanOfAnotherWorldSizeIsRefused) {
  std::string error;
  auto s = makeShardSession(2, nullptr, 0, error);
  ASSERT_FALSE(s);
  EXPECT_NE(error.find("for world size 2, but the job has 1 rank"), std::string::npos) << error;
  EXPECT_NE(error.find("offload.reduce_scatter"), std::string::npos) << error;
}

TEST_F(DataParallelTest, ZeroTwoRanksShardTheMeanAndGatherEveryShard) {
  std::string dir = freshDir("dp-zero");
  std::vector<std::map<std::string, Tensor>> outs(2);
  std::vector<std::string> errors(2);
  auto rank = [&](int r) {
    auto comm = joinWorld(dir, r, 2, 30, errors[size_t(r)]);
    if (!comm)
      return;
    auto s = makeShardSession(2, comm, r, errors[size_t(r)]);
    if (!s)
      return;
    if (Status st = s->step(); !st.ok()) {
      errors[size_t(r)] = st.message();
      return;
    }
    for (const char *n : {"gs", "ps", "o0", "o1"})
      outs[size_t(r)][n] = *s->output(n);
  };
  std::thread t0(rank, 0), t1(rank, 1);
  t0.join();
  t1.join();
  ASSERT_EQ(errors[0], "");
  ASSERT_EQ(errors[1], "");
  // 7 elements, shards of 4: rank 1's last element is padding (zero).
  std::vector<float> a = gradOf(0), c = gradOf(1), p = paramsOf();
  for (int r = 0; r < 2; ++r)
    for (int64_t k = 0; k < 4; ++k) {
      size_t i = size_t(r * 4 + k);
      float mean = i < 7 ? (a[i] + c[i]) * 0.5f : 0.0f;
      EXPECT_EQ(outs[size_t(r)]["gs"].as<float>()[k], mean) << r << " " << k;
      EXPECT_EQ(outs[size_t(r)]["ps"].as<float>()[k], i < 7 ? p[i] : 0.0f) << r << " " << k;
    }
  // The all-gather of the gradient shards: the whole mean, on both ranks.
  for (int r = 0; r < 2; ++r) {
    for (int64_t i = 0; i < 5; ++i)
      EXPECT_EQ(outs[size_t(r)]["o0"].as<float>()[i], (a[size_t(i)] + c[size_t(i)]) * 0.5f) << i;
    for (int64_t i = 0; i < 2; ++i)
      EXPECT_EQ(outs[size_t(r)]["o1"].as<float>()[i],
                (a[size_t(5 + i)] + c[size_t(5 + i)]) * 0.5f) << i;
  }
}

TEST_F(DataParallelTest, ZeroThreeRanksRingReduceScatter) {
  // Three ranks: the ring's two steps. 7 elements, shards of 3, two
  // padding elements; the sums of these values are exact in any order.
  std::string dir = freshDir("dp-zero3");
  std::vector<std::map<std::string, Tensor>> outs(3);
  std::vector<std::string> errors(3);
  auto rank = [&](int r) {
    auto comm = joinWorld(dir, r, 3, 30, errors[size_t(r)]);
    if (!comm)
      return;
    auto s = makeShardSession(3, comm, r, errors[size_t(r)]);
    if (!s)
      return;
    for (int step = 0; step < 2; ++step)
      if (Status st = s->step(); !st.ok()) {
        errors[size_t(r)] = st.message();
        return;
      }
    for (const char *n : {"gs", "o0", "o1"})
      outs[size_t(r)][n] = *s->output(n);
  };
  std::thread t0(rank, 0), t1(rank, 1), t2(rank, 2);
  t0.join();
  t1.join();
  t2.join();
  for (int r = 0; r < 3; ++r)
    ASSERT_EQ(errors[size_t(r)], "") << r;
  std::vector<float> a = gradOf(0), b = gradOf(1), c = gradOf(2);
  auto mean = [&](size_t i) { return i < 7 ? (a[i] + b[i] + c[i]) * (1.0f / 3.0f) : 0.0f; };
  for (int r = 0; r < 3; ++r) {
    for (int64_t k = 0; k < 3; ++k)
      EXPECT_EQ(outs[size_t(r)]["gs"].as<float>()[k], mean(size_t(r * 3 + k))) << r << " " << k;
    for (int64_t i = 0; i < 5; ++i)
      EXPECT_EQ(outs[size_t(r)]["o0"].as<float>()[i], mean(size_t(i))) << r << " " << i;
    for (int64_t i = 0; i < 2; ++i)
      EXPECT_EQ(outs[size_t(r)]["o1"].as<float>()[i], mean(size_t(5 + i))) << r << " " << i;
  }
}

TEST_F(DataParallelTest, ZeroHungRankFailsTheRingWithinTheTimeout) {
  // The reduce-scatter's ring waits with the collective timeout.
  std::string dir = freshDir("dp-zero-hung");
  constexpr double kTimeout = 1.5;
  std::string error, error1;
  double seconds = -1;
  auto rank = [&](int r) {
    std::string &err = r ? error1 : error;
    auto comm = joinWorld(dir, r, 2, r == 0 ? kTimeout : 30, err);
    if (!comm)
      return;
    auto s = makeShardSession(2, comm, r, err);
    if (!s)
      return;
    if (r == 1) {
      std::this_thread::sleep_for(std::chrono::duration<double>(2 * kTimeout));
      return;
    }
    auto t0 = std::chrono::steady_clock::now();
    Status st = s->step();
    seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    error = st.ok() ? "" : st.message();
  };
  std::thread t0(rank, 0), t1(rank, 1);
  t0.join();
  t1.join();
  ASSERT_EQ(error1, "");
  ASSERT_NE(error, "");
  EXPECT_NE(error.find("offload.reduce_scatter of bucket 0"), std::string::npos) << error;
  EXPECT_NE(error.find("rank 1 did not complete it"), std::string::npos) << error;
  EXPECT_GE(seconds, kTimeout * 0.9);
  EXPECT_LT(seconds, kTimeout + 5);
}

TEST_F(DataParallelTest, ZeroPlanChecksShardSizesAndWorldSize) {
  // A plan whose shard is not ceil(7 / 2) = 4 elements, or without a world
  // size, is refused when it is loaded, naming what is wrong.
  PlanData d = buildShardPlan(2);
  for (BufferDesc &b : d.buffers)
    if (b.name == "gs")
      b.shape = {3};
  auto plan = Plan::fromData(d);
  ASSERT_FALSE(plan);
  EXPECT_NE(plan.message().find("has 3 elements; 7 over 2 ranks make 4"), std::string::npos)
      << plan.message();
  PlanData e = buildShardPlan(2);
  for (InstructionDesc &in : e.instructions)
    if (in.op == kOpAllGather)
      in.attrs.set("world_size", attrInt(0));
  plan = Plan::fromData(e);
  ASSERT_FALSE(plan);
  EXPECT_NE(plan.message().find("offload.all_gather needs a world_size attribute of at least 1"),
            std::string::npos)
      << plan.message();
}

TEST_F(DataParallelTest, BadOptionsAreRefused) {
  CommunicatorOptions co;
  co.rank = 2;
  co.worldSize = 2;
  co.rendezvous = "file:/tmp/x";
  auto c = createGlooCommunicator(co);
  ASSERT_FALSE(c);
  EXPECT_NE(c.message().find("outside a world of size 2"), std::string::npos);
  co.rank = 0;
  co.rendezvous = "tcp://127.0.0.1:1";
  c = createGlooCommunicator(co);
  ASSERT_FALSE(c);
  EXPECT_NE(c.message().find("is not file:DIR"), std::string::npos);
}

} // namespace
