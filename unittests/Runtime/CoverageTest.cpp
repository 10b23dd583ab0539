//===- CoverageTest.cpp - Which ops each backend can run ------------------===//
//
// Part of offload. backendOps / missingOps (Runtime.h): the CUDA backend's
// kernel table covers every op of the host kernel registry (checked without
// a GPU), missing ops are listed once each in first-use order, an
// instruction on host buffers needs a host kernel on the CUDA backend, and
// unknown or absent backends are errors.
//
//===----------------------------------------------------------------------===//

#include "TestPlans.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>

using namespace offload::rt;
using namespace offload::rt::test;

namespace {

TEST(CoverageTest, HostOpsAreTheKernelRegistry) {
  registerAllHostKernels();
  auto ops = backendOps("host");
  ASSERT_TRUE(ops.ok()) << ops.message();
  std::set<std::string> have(ops->begin(), ops->end());
  EXPECT_TRUE(std::is_sorted(ops->begin(), ops->end()));
  for (const std::string &n : KernelRegistry::host().names())
    EXPECT_TRUE(have.count(n)) << n;
  // The 77 ops of the kernel library (test kernels registered by other
  // tests of this binary may add test.* names).
  size_t offloadOps = 0;
  for (const std::string &n : *ops)
    offloadOps += n.rfind("offload.", 0) == 0;
  EXPECT_EQ(offloadOps, 77u);
}

TEST(CoverageTest, CudaCoversEveryHostOp) {
  auto cuda = backendOps("cuda");
#ifdef OFFLOAD_HAVE_CUDA
  ASSERT_TRUE(cuda.ok()) << cuda.message();
  std::set<std::string> have(cuda->begin(), cuda->end());
  auto host = backendOps("host");
  ASSERT_TRUE(host.ok()) << host.message();
  std::vector<std::string> lacking;
  for (const std::string &op : *host)
    if (op.rfind("offload.", 0) == 0 && !have.count(op))
      lacking.push_back(op);
  EXPECT_TRUE(lacking.empty()) << "the CUDA backend lacks " << lacking.size()
                               << " host ops, first " << lacking.front();
  // And nothing the host backend does not know.
  std::set<std::string> hostSet(host->begin(), host->end());
  for (const std::string &op : *cuda)
    EXPECT_TRUE(hostSet.count(op)) << op << " has no host kernel";
#else
  ASSERT_FALSE(cuda.ok());
  EXPECT_NE(cuda.message().find("built without CUDA"), std::string::npos);
  GTEST_SKIP() << "runtime built without CUDA (OFFLOAD_ENABLE_CUDA=OFF)";
#endif
}

PlanData planWithOps(const std::vector<std::string> &ops, bool onHost) {
  PlanBuilder b;
  MemorySpace sp = onHost ? MemorySpace::Host : MemorySpace::Device;
  int x = b.buffer("x", DType::F32, {4}, BufferRole::Input, sp);
  int y = b.buffer("y", DType::F32, {4}, BufferRole::Output, sp);
  b.bindIn("x", x);
  b.bindOut("y", y);
  for (const std::string &op : ops)
    b.instr(op, {x}, {y});
  return b.finish();
}

TEST(CoverageTest, MissingOpsInFirstUseOrderOnce) {
  auto plan = Plan::fromData(planWithOps(
      {"offload.relu", "x.one", "offload.reshape", "x.two", "x.one",
       "x.to_nowhere"},
      false));
  ASSERT_TRUE(plan.ok()) << plan.message();
  std::vector<std::string> want{"x.one", "x.two", "x.to_nowhere"};
  auto host = missingOps(**plan, "host");
  ASSERT_TRUE(host.ok()) << host.message();
  EXPECT_EQ(*host, want);
  auto s = Session::create(*plan, "host");
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("host backend has no kernel for: x.one, x.two, "
                             "x.to_nowhere"),
            std::string::npos)
      << s.message();
  auto cuda = missingOps(**plan, "cuda");
#ifdef OFFLOAD_HAVE_CUDA
  ASSERT_TRUE(cuda.ok()) << cuda.message();
  EXPECT_EQ(*cuda, want);
  auto c = Session::create(*plan, "cuda");
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.message().find("no CUDA kernel for: x.one, x.two, "
                             "x.to_nowhere"),
            std::string::npos)
      << c.message();
#else
  EXPECT_FALSE(cuda.ok());
#endif
}

TEST(CoverageTest, CudaRunsHostInstructionsWithHostKernels) {
  // All buffers on the host: the CUDA backend runs the host kernel, so it
  // needs one (and says "(host)" when there is none).
  registerAllHostKernels();
  registerTestKernels();
  auto plan =
      Plan::fromData(planWithOps({"test.scale", "offload.relu", "x.h"}, true));
  ASSERT_TRUE(plan.ok()) << plan.message();
  auto cuda = missingOps(**plan, "cuda");
#ifdef OFFLOAD_HAVE_CUDA
  ASSERT_TRUE(cuda.ok()) << cuda.message();
  EXPECT_EQ(*cuda, std::vector<std::string>{"x.h (host)"});
  // The same test kernel on device buffers has no CUDA kernel.
  auto dev = Plan::fromData(planWithOps({"test.scale"}, false));
  ASSERT_TRUE(dev.ok()) << dev.message();
  EXPECT_EQ(*missingOps(**dev, "cuda"), std::vector<std::string>{"test.scale"});
#else
  EXPECT_FALSE(cuda.ok());
#endif
}

TEST(CoverageTest, UnknownBackend) {
  auto plan = Plan::fromData(planWithOps({"offload.relu"}, false));
  ASSERT_TRUE(plan.ok()) << plan.message();
  auto m = missingOps(**plan, "tpu");
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.message().find("unknown backend 'tpu'"), std::string::npos);
  EXPECT_FALSE(backendOps("tpu").ok());
}

} // namespace
