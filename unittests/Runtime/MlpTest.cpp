//===- MlpTest.cpp - A real MLP training step on host and CUDA ------------===//
//
// Part of offload. Runs buildMlpPlan for three steps and compares loss,
// gradients and updated parameters with a double-precision reference
// (max relative error 1e-4, f32 arithmetic). The host run needs the kernel
// library (OffloadKernels); the CUDA run needs a GPU: each skips with the
// reason otherwise.
//
//===----------------------------------------------------------------------===//

#include "MlpPlan.h"

#include <gtest/gtest.h>

#ifdef OFFLOAD_HAVE_CUDA
#include <cuda_runtime.h>
#endif

using namespace offload::rt;
using namespace offload::rt::test;

namespace {

std::vector<double> toDouble(const Tensor &t) {
  std::vector<double> v(static_cast<size_t>(t.numel()));
  for (int64_t i = 0; i < t.numel(); ++i)
    v[size_t(i)] = t.at(i);
  return v;
}

void expectClose(const std::vector<double> &got, const std::vector<double> &ref,
                 const std::string &what) {
  ASSERT_EQ(got.size(), ref.size()) << what;
  double scale = 1e-6;
  for (double r : ref)
    scale = std::max(scale, std::fabs(r));
  for (size_t i = 0; i < ref.size(); ++i)
    EXPECT_NEAR(got[i], ref[i], 1e-4 * scale) << what << "[" << i << "]";
}

void runMlp(const std::string &backend, MlpDims m = {}, bool phases = false) {
  auto plan = Plan::fromData(buildMlpPlan(m));
  ASSERT_TRUE(plan.ok()) << plan.message();
  auto s = Session::create(*plan, backend);
  ASSERT_TRUE(s.ok()) << s.message();
  auto values = mlpValues(m);
  std::map<std::string, std::vector<double>> state;
  for (auto &kv : values) {
    ASSERT_TRUE((*s)->bind(kv.first, kv.second).ok()) << kv.first;
    state[kv.first] = toDouble(kv.second);
  }
  std::vector<int64_t> target(values["target"].as<int64_t>(),
                              values["target"].as<int64_t>() + m.N);
  for (int step = 0; step < 3; ++step) {
    std::map<std::string, std::vector<double>> grads;
    double loss = mlpReference(m, state, state["x"], target, grads);
    Status st;
    if (phases) {
      for (const PhaseDesc &ph : (*plan)->data().phases) {
        st = (*s)->runPhase(ph.name);
        ASSERT_TRUE(st.ok()) << ph.name << ": " << st.message();
      }
      st = (*s)->finishStep();
    } else {
      st = (*s)->step();
    }
    ASSERT_TRUE(st.ok()) << st.message();
    EXPECT_NEAR(*(*s)->loss(), loss, 1e-4 * std::fabs(loss));
    for (auto &g : grads)
      expectClose(toDouble(*(*s)->output(g.first)), g.second, g.first);
    for (auto &kv : state)
      if (kv.first != "x" && kv.first != "target")
        expectClose(toDouble(*(*s)->store().get(kv.first)), kv.second,
                    kv.first);
    EXPECT_EQ((*s)->store().get("fc1.weight.step")->at(0), double(step + 1));
  }
  EXPECT_EQ((*s)->measuredPeakDeviceBytes(), (*s)->plannedPeakDeviceBytes());
}

bool haveHostKernels(std::string &missing) {
  registerAllHostKernels();
  for (const char *op :
       {"offload.linear", "offload.relu", "offload.relu_backward",
        "offload.cross_entropy", "offload.cross_entropy_backward",
        "offload.fill", "offload.matmul", "offload.reduce_sum",
        "offload.sgd_update", "offload.adamw_update"})
    if (!KernelRegistry::host().lookup(op)) {
      missing = op;
      return false;
    }
  return true;
}

TEST(MlpTest, HostMatchesReference) {
  std::string missing;
  if (!haveHostKernels(missing))
    GTEST_SKIP() << "host kernel library not linked: no kernel for " << missing;
  runMlp("host");
}

TEST(MlpTest, HostAdamWWithSplitBackwardPhases) {
  std::string missing;
  if (!haveHostKernels(missing))
    GTEST_SKIP() << "host kernel library not linked: no kernel for " << missing;
  MlpDims m;
  m.adamw = true;
  m.lr = 0.01;
  m.splitBW = true;
  runMlp("host", m, /*phases=*/true);
}

TEST(MlpTest, CudaMatchesReference) {
#ifdef OFFLOAD_HAVE_CUDA
  int n = 0;
  cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess)
    GTEST_SKIP() << "no CUDA device: cudaGetDeviceCount: "
                 << cudaGetErrorString(e);
  if (n == 0)
    GTEST_SKIP() << "no CUDA device: cudaGetDeviceCount found 0";
  runMlp("cuda");
  MlpDims m;
  m.adamw = true;
  m.lr = 0.01;
  m.splitBW = true;
  runMlp("cuda", m, /*phases=*/true);
#else
  GTEST_SKIP() << "runtime built without CUDA (OFFLOAD_ENABLE_CUDA=OFF)";
#endif
}

TEST(MlpTest, CudaRunsHostSideUpdatesOrIsUnavailable) {
  // An SGD update over host buffers only (a parameter kept on the host by
  // --offload-host-parameters) runs the host kernel on the CUDA backend.
  registerAllHostKernels();
  if (!KernelRegistry::host().lookup("offload.sgd_update"))
    GTEST_SKIP() << "host kernel library not linked";
  auto H = MemorySpace::Host;
  PlanBuilder b;
  int p = b.buffer("p", DType::F32, {4}, BufferRole::Parameter, H);
  int g = b.buffer("g", DType::F32, {4}, BufferRole::Input, H);
  int m = b.buffer("m", DType::F32, {4}, BufferRole::OptimizerState, H);
  int st = b.buffer("step", DType::I64, {}, BufferRole::OptimizerState, H);
  int np = b.buffer("p.new", DType::F32, {4}, BufferRole::Parameter, H);
  int nm = b.buffer("m.new", DType::F32, {4}, BufferRole::OptimizerState, H);
  int ns = b.buffer("step.new", DType::I64, {}, BufferRole::OptimizerState, H);
  for (auto [name, id] : {std::pair{"p", p}, {"g", g}, {"m", m}, {"step", st}})
    b.bindIn(name, id);
  AttrMap a;
  a.set("lr", attrFloat(0.5));
  a.set("momentum", attrFloat(0.0));
  a.set("dampening", attrFloat(0.0));
  a.set("weight_decay", attrFloat(0.0));
  a.set("nesterov", attrInt(0));
  b.instr("offload.sgd_update", {p, g, m, st}, {np, nm, ns}, a);
  b.bindOut("p", np);
  b.bindOut("m", nm);
  b.bindOut("step", ns);
  auto plan = Plan::fromData(b.finish());
  ASSERT_TRUE(plan.ok()) << plan.message();
  auto s = Session::create(*plan, "cuda");
#ifdef OFFLOAD_HAVE_CUDA
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
    ASSERT_FALSE(s.ok());
    // Accepted up to the device check: no missing kernel, no host error.
    EXPECT_NE(s.message().find("no CUDA device"), std::string::npos) << s.message();
    GTEST_SKIP() << "no CUDA device: " << s.message();
  }
  ASSERT_TRUE(s.ok()) << s.message();
  ASSERT_TRUE((*s)->bind("p", Tensor::fromVector(DType::F32, {4}, std::vector<float>{1, 2, 3, 4})).ok());
  ASSERT_TRUE((*s)->bind("g", Tensor::fromVector(DType::F32, {4}, std::vector<float>{2, 2, 2, 2})).ok());
  ASSERT_TRUE((*s)->bind("m", Tensor(DType::F32, {4})).ok());
  ASSERT_TRUE((*s)->bind("step", Tensor(DType::I64, {})).ok());
  Status r = (*s)->step();
  ASSERT_TRUE(r.ok()) << r.message();
  const Tensor *np2 = (*s)->store().get("p");
  for (int i = 0; i < 4; ++i)
    EXPECT_EQ(np2->as<float>()[i], float(i + 1) - 1.0f);
#else
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("built without CUDA"), std::string::npos) << s.message();
#endif
}

TEST(MlpTest, CudaListsMissingOpsOrIsUnavailable) {
  // Ops that no backend has (extension ops: an unknown op of the offload
  // dialect is refused when the plan is loaded): Session::create lists all
  // of them, once each, in first-use order, before it looks for a device.
  PlanBuilder b;
  int p = b.buffer("p", DType::F32, {4}, BufferRole::Parameter);
  int q = b.buffer("q", DType::F32, {4}, BufferRole::Temporary);
  int l = b.buffer("loss", DType::F32, {}, BufferRole::Output);
  b.bindIn("p", p);
  b.bindOut("loss", l);
  b.instr("ext.frobnicate", {p}, {q});
  b.instr("offload.relu", {q}, {q});
  b.instr("ext.frobnicate", {q}, {q});
  b.instr("ext.defrobnicate", {q}, {l});
  auto plan = Plan::fromData(b.finish());
  ASSERT_TRUE(plan.ok()) << plan.message();
  auto s = Session::create(*plan, "cuda");
  ASSERT_FALSE(s.ok());
#ifdef OFFLOAD_HAVE_CUDA
  EXPECT_NE(s.message().find("no CUDA kernel for: ext.frobnicate, "
                             "ext.defrobnicate"),
            std::string::npos)
      << s.message();
#else
  EXPECT_NE(s.message().find("built without CUDA"), std::string::npos)
      << s.message();
#endif
  auto h = Session::create(*plan, "host");
  ASSERT_FALSE(h.ok());
  EXPECT_NE(h.message().find("host backend has no kernel for: "
                             "ext.frobnicate, ext.defrobnicate"),
            std::string::npos)
      << h.message();
}

TEST(MlpTest, CudaCoversConvNetAndTransformerOps) {
  // The ops that the CUDA backend used to refuse (issue 14) are covered:
  // checked without a device.
  PlanBuilder b;
  int p = b.buffer("p", DType::F32, {2, 3, 4, 4}, BufferRole::Parameter);
  int w = b.buffer("w", DType::F32, {3, 3, 3, 3}, BufferRole::Parameter);
  int q = b.buffer("q", DType::F32, {2, 3, 4, 4}, BufferRole::Temporary);
  int l = b.buffer("loss", DType::F32, {2, 3, 4, 4}, BufferRole::Output);
  b.bindIn("p", p);
  b.bindIn("w", w);
  b.bindOut("loss", l);
  b.instr("offload.gelu", {p}, {q});
  AttrMap conv;
  conv.set("stride", attrInts({1, 1}));
  conv.set("padding", attrInts({1, 1}));
  conv.set("dilation", attrInts({1, 1}));
  conv.set("groups", attrInt(1));
  b.instr("offload.conv2d", {q, w, -1}, {l}, conv);
  auto plan = Plan::fromData(b.finish());
  ASSERT_TRUE(plan.ok()) << plan.message();
  auto m = missingOps(**plan, "cuda");
#ifdef OFFLOAD_HAVE_CUDA
  ASSERT_TRUE(m.ok()) << m.message();
  EXPECT_TRUE(m->empty());
#else
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.message().find("built without CUDA"), std::string::npos);
#endif
}

} // namespace
