//===- ReliabilityTest.cpp - Corrupted plans and hostile kernel geometry ---===//
//
// Part of offload (issue 18). Every byte of a plan file is covered by its
// CRC-32, so a plan changed anywhere is refused at load; a plan of another
// format version still gets the version error; kernels refuse geometry that
// the buffers do not bound before they loop (a conv2d padding of 2^40 used to
// loop ~1e12 times) and never divide by an empty dimension.
//
//===----------------------------------------------------------------------===//

#include "TestPlans.h"

#include "offload/Runtime/Kernel.h"
#include "offload/Runtime/OpSignatures.h"
#include "offload/Runtime/Npz.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>

using namespace offload::rt;
using namespace offload::rt::test;

namespace {

#define EXPECT_CONTAINS(hay, needle)                                           \
  EXPECT_NE(std::string(hay).find(needle), std::string::npos)                  \
      << "message: " << (hay)

std::string loadError(const std::vector<uint8_t> &bytes) {
  auto p = Plan::fromBytes(bytes.data(), bytes.size());
  return p.ok() ? std::string() : p.message();
}

TEST(PlanChecksumTest, EveryChangedByteIsRefused) {
  std::vector<uint8_t> good = Plan::serialize(buildStepPlan());
  ASSERT_TRUE(loadError(good).empty()) << loadError(good);
  int checksum = 0;
  for (size_t i = 0; i < good.size(); ++i) {
    for (uint8_t flip : {uint8_t(0x01), uint8_t(0x80)}) {
      std::vector<uint8_t> b = good;
      b[i] ^= flip;
      std::string err = loadError(b);
      ASSERT_FALSE(err.empty()) << "byte " << i << " ^ " << int(flip)
                                << " was accepted";
      checksum += err.find("checksum mismatch") != std::string::npos;
    }
  }
  // Most single-bit changes leave a valid FlatBuffer: only the checksum
  // catches them (an lr of 0.1 read as 0.1000001, a buffer id moved).
  EXPECT_GT(checksum, int(good.size()) / 2);
}

TEST(PlanChecksumTest, ChangedAttributeValueNamesTheChecksum) {
  PlanData d = buildStepPlan();
  std::vector<uint8_t> a = Plan::serialize(d);
  // Change one float attribute of one instruction, then restore the old
  // trailer: a file edited after it was written.
  bool changed = false;
  for (InstructionDesc &in : d.instructions)
    for (auto &e : in.attrs.entries())
      if (!changed && e.second.kind == AttrValue::Kind::Floats &&
          !e.second.floats.empty()) {
        AttrValue v = e.second;
        v.floats[0] += 1.0;
        in.attrs.set(e.first, v);
        changed = true;
        break;
      }
  ASSERT_TRUE(changed) << "the test plan has no float attribute";
  std::vector<uint8_t> b = Plan::serialize(d);
  ASSERT_EQ(a.size(), b.size());
  std::copy(a.end() - 4, a.end(), b.end() - 4);
  EXPECT_CONTAINS(loadError(b), "checksum mismatch");
  EXPECT_CONTAINS(loadError(b), "the file changed after it was written");
}

TEST(PlanChecksumTest, OlderVersionWithoutTrailerGetsTheVersionError) {
  PlanData d = buildStepPlan();
  d.formatVersion = 3; // before the checksum: no trailer
  std::vector<uint8_t> b = Plan::serialize(d);
  b.resize(b.size() - 4);
  EXPECT_CONTAINS(loadError(b), "plan format version 3 is not supported "
                                "(this runtime reads version " +
                                    std::to_string(kPlanFormatVersion) + ")");
}

TEST(PlanChecksumTest, MissingTrailerIsTruncation) {
  std::vector<uint8_t> b = Plan::serialize(buildStepPlan());
  b.resize(b.size() - 4);
  EXPECT_CONTAINS(loadError(b), "plan is truncated");
  EXPECT_CONTAINS(loadError(b), "4-byte checksum");
  b = Plan::serialize(buildStepPlan());
  b.push_back(0);
  EXPECT_CONTAINS(loadError(b), "1 trailing bytes");
}

TEST(PlanValidationTest, HugeDimensionBehindAZeroIsRefused) {
  PlanData d = buildStepPlan();
  d.buffers[0].shape = {0, int64_t(1) << 62};
  Status s = validatePlan(d);
  ASSERT_FALSE(s.ok());
  EXPECT_CONTAINS(s.message(), "shape too large");
}

//===----------------------------------------------------------------------===//
// Kernel geometry
//===----------------------------------------------------------------------===//

AttrValue ints(std::vector<int64_t> v) {
  AttrValue a;
  a.kind = AttrValue::Kind::Ints;
  a.ints = std::move(v);
  return a;
}

std::string runKernel(const std::string &op, std::vector<TensorView> in,
                      std::vector<TensorView> out, const AttrMap &attrs,
                      int threads = 1) {
  registerAllHostKernels();
  Kernel fn = KernelRegistry::host().lookup(op);
  if (!fn)
    return "no kernel for " + op;
  KernelArgs args{in, out, attrs, threads};
  return fn(args);
}

TensorView view(std::vector<float> &v, std::vector<int64_t> shape) {
  TensorView t;
  t.data = v.data();
  t.dtype = DType::F32;
  t.shape = std::move(shape);
  return t;
}

double seconds(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
      .count();
}

TEST(KernelGeometryTest, ConvPaddingFarBeyondTheBuffersIsRefusedAtOnce) {
  // A plan whose conv2d padding was corrupted to 2^40: the output buffer
  // still says 1x1x6x6, the geometry says ~2^41; refused before any loop.
  std::vector<float> x(1 * 1 * 8 * 8, 1.f), w(9, 1.f), y(36, 0.f);
  AttrMap a;
  a.set("stride", ints({1, 1}));
  a.set("padding", ints({int64_t(1) << 40, 0}));
  a.set("dilation", ints({1, 1}));
  a.set("groups", ints({1}));
  auto t0 = std::chrono::steady_clock::now();
  std::string err = runKernel("offload.conv2d",
                              {view(x, {1, 1, 8, 8}), view(w, {1, 1, 3, 3}),
                               TensorView()},
                              {view(y, {1, 1, 6, 6})}, a);
  EXPECT_CONTAINS(err, "exceeds the supported maximum");
  // Within the limit but not what the output buffer holds: a shape error.
  a.set("padding", ints({int64_t(1) << 30, 0}));
  err = runKernel("offload.conv2d",
                  {view(x, {1, 1, 8, 8}), view(w, {1, 1, 3, 3}), TensorView()},
                  {view(y, {1, 1, 6, 6})}, a);
  EXPECT_CONTAINS(err, "offload.conv2d: y has shape [1,1,6,6], expected");
  err = runKernel("offload.conv2d_backward_input",
                  {view(y, {1, 1, 6, 6}), view(w, {1, 1, 3, 3})},
                  {view(x, {1, 1, 8, 8})}, a);
  EXPECT_CONTAINS(err, "dy has shape [1,1,6,6], expected");
  EXPECT_LT(seconds(t0), 1.0);
}

TEST(KernelGeometryTest, PoolWindowMostlyInThePaddingRunsWithoutSteppingIt) {
  // kernel 2^31 with padding 2^30 on a 4x4 plane: every window covers the
  // whole plane. The kernel used to step through the padding one element
  // at a time (2^30 steps per output element).
  std::vector<float> x(16), y(25, 0.f);
  for (int i = 0; i < 16; ++i)
    x[size_t(i)] = float(i % 7);
  std::vector<int64_t> ind(25, -1);
  TensorView iv;
  iv.data = ind.data();
  iv.dtype = DType::I64;
  iv.shape = {1, 1, 5, 1};
  AttrMap a;
  a.set("kernel_size", ints({int64_t(1) << 31, 4}));
  a.set("stride", ints({1, 4}));
  a.set("padding", ints({int64_t(1) << 30, 0}));
  a.set("dilation", ints({1, 1}));
  auto t0 = std::chrono::steady_clock::now();
  std::string err = runKernel("offload.max_pool2d", {view(x, {1, 1, 4, 4})},
                              {view(y, {1, 1, 5, 1}), iv}, a);
  ASSERT_EQ(err, "");
  EXPECT_LT(seconds(t0), 1.0);
  for (int i = 0; i < 5; ++i)
    EXPECT_EQ(y[size_t(i)], 6.f) << i;
  a.set("kernel_size", ints({int64_t(1) << 40, 4}));
  a.set("padding", ints({int64_t(1) << 39, 0}));
  err = runKernel("offload.max_pool2d", {view(x, {1, 1, 4, 4})},
                  {view(y, {1, 1, 5, 1}), iv}, a);
  EXPECT_CONTAINS(err, "exceeds the supported maximum 2147483648");
}

TEST(KernelGeometryTest, ReducingAnEmptyDimensionDividesByNothing) {
  // x [3, 0] reduced over dim 1: sums are 0, means NaN (ATen), no SIGFPE.
  std::vector<float> x(1), y(3, 7.f);
  AttrMap a;
  a.set("dims", ints({1}));
  ASSERT_EQ(runKernel("offload.reduce_sum", {view(x, {3, 0})},
                      {view(y, {3})}, a),
            "");
  for (float v : y)
    EXPECT_EQ(v, 0.f);
  ASSERT_EQ(runKernel("offload.reduce_mean", {view(x, {3, 0})},
                      {view(y, {3})}, a),
            "");
  for (float v : y)
    EXPECT_TRUE(std::isnan(v));
}

TEST(NpyTest, HugeShapeInATinyFileIsRefusedBeforeAllocating) {
  // Found by fuzz/FuzzNpz: a header claiming 46e9 float32 elements (184 GB)
  // in a 100-byte file was allocated before the data size was checked.
  std::string h("\x93NUMPY\x01\x00", 8);
  std::string dict = "{'descr': '<f4', 'fortran_order': False, 'shape': "
                     "(46116860184,), }";
  dict += std::string(63 - (10 + dict.size()) % 64, ' ') + "\n";
  h += char(dict.size() & 0xff);
  h += char(dict.size() >> 8);
  h += dict;
  h += std::string(16, '\0');
  auto t = parseNpy(reinterpret_cast<const uint8_t *>(h.data()), h.size());
  ASSERT_FALSE(t.ok());
  EXPECT_CONTAINS(t.message(), ".npy data truncated: 16 bytes for f32[46116860184]");
}

} // namespace

// Kernels no longer check their own operand counts: the registry's Kernel
// does, once per direct call, from the op-signature table (and a plan's
// instructions are checked when it is loaded).
TEST(KernelCallCheckTest, CountsComeFromTheOpSignatureTable) {
  std::vector<float> x(4, 1.f), y(4, 0.f), z(4, 0.f);
  AttrMap none;
  // relu: one input, one output.
  EXPECT_EQ(runKernel("offload.relu", {view(x, {4})}, {view(y, {4})}, none), "");
  EXPECT_EQ(runKernel("offload.relu", {view(x, {4}), view(x, {4})}, {view(y, {4})}, none),
            "offload.relu: expected 1 inputs and 1 outputs, got 2 and 1");
  EXPECT_EQ(runKernel("offload.relu", {view(x, {4})}, {}, none),
            "offload.relu: expected 1 inputs and 1 outputs, got 1 and 0");
  // linear: an optional bias (2 to 3 inputs).
  EXPECT_EQ(runKernel("offload.linear", {view(x, {1, 4})}, {view(y, {1, 1})}, none),
            "offload.linear: expected between 2 and 3 inputs and 1 outputs, got 1 and 1");
  // cat: variadic (the table allows no value; the kernel itself needs one).
  EXPECT_EQ(runKernel("offload.cat", {view(x, {4})}, {}, none),
            "offload.cat: expected at least 0 inputs and 1 outputs, got 1 and 0");
  EXPECT_EQ(runKernel("offload.cat", {}, {view(y, {4})}, none),
            "cat: expected at least one input and one output");
}

TEST(KernelCallCheckTest, ViewsAreCheckedBeforeTheKernelRuns) {
  std::vector<float> x(4, 1.f), y(4, 0.f);
  AttrMap none;
  TensorView neg = view(x, {4});
  neg.shape = {-4};
  EXPECT_EQ(runKernel("offload.relu", {neg}, {view(y, {4})}, none),
            "offload.relu: input 0 has a negative dimension [-4]");
  TensorView null = view(y, {4});
  null.data = nullptr;
  EXPECT_EQ(runKernel("offload.relu", {view(x, {4})}, {null}, none),
            "offload.relu: output 0 is null");
  // An empty view needs no data.
  TensorView empty = view(x, {0});
  empty.data = nullptr;
  TensorView emptyOut = empty;
  EXPECT_EQ(runKernel("offload.relu", {empty}, {emptyOut}, none), "");
  // Kernels registered with Absent::Allowed take an absent optional operand
  // (linear without bias) and check the rest themselves.
  std::vector<float> w(4, 1.f), out(1, 0.f);
  TensorView noBias;
  EXPECT_EQ(runKernel("offload.linear", {view(x, {1, 4}), view(w, {1, 4}), noBias},
                      {view(out, {1, 1})}, none),
            "");
  EXPECT_EQ(out[0], 4.f);
}

TEST(KernelCallCheckTest, BackendsCallTheBareFunction) {
  registerAllHostKernels();
  Kernel k = KernelRegistry::host().lookup("offload.relu");
  ASSERT_TRUE(k);
  EXPECT_NE(k.unchecked(), nullptr);
  EXPECT_EQ(KernelRegistry::host().lookup("offload.no_such_op"), nullptr);
  // Every host kernel of the dialect has a signature, so every direct call
  // has its counts checked.
  for (const std::string &n : KernelRegistry::host().names())
    if (n.rfind("offload.", 0) == 0)
      EXPECT_NE(findOpSignature(n), nullptr) << n;
}
