//===- LinAlgConvTest.cpp - linear, matmul, conv2d kernels vs ATen --------===//
//
// Part of offload. Runs the host kernels offload.linear, offload.matmul,
// offload.conv2d, offload.conv2d_backward_input and
// offload.conv2d_backward_weight through KernelRegistry::host() and compares
// them with ATen (at::linear, at::matmul, at::conv2d,
// at::convolution_backward) computed in the test from seeded random inputs.
//
// Error measure: max|got - ref| / max(max|ref|, 1e-30) (normwise relative
// error in the max norm). Tolerances: f32 1e-4 (GEMM-based ops: OpenBLAS and
// ATen sum in different orders), f64 1e-10.
//
//===----------------------------------------------------------------------===//

#include "KernelTestUtil.h"
#include "offload/Runtime/Kernel.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <string>
#include <vector>

using namespace offload::rt;
using namespace atest;

namespace {

double tolFor(at::ScalarType t) { return t == at::kFloat ? 1e-4 : 1e-10; }

at::TensorOptions opts(at::ScalarType t) { return at::TensorOptions().dtype(t); }

//===----------------------------------------------------------------------===//
// linear
//===----------------------------------------------------------------------===//

void checkLinear(std::vector<int64_t> xs, int64_t m, bool bias,
                 at::ScalarType dt, int threads) {
  torch::manual_seed(1);
  int64_t k = xs.back();
  at::Tensor x = at::randn(xs, opts(dt)), w = at::randn({m, k}, opts(dt));
  at::Tensor b = bias ? at::randn({m}, opts(dt)) : at::Tensor();
  at::Tensor ref = at::linear(x, w, b);
  at::Tensor y = at::full(ref.sizes(), 7.0, opts(dt));
  ASSERT_EQ(run("offload.linear", {x, w, b}, {y}, AttrMap(), threads), "");
  EXPECT_CLOSE(y, ref, tolFor(dt));
}

TEST(Linear, MatchesATen) {
  for (auto dt : {at::kFloat, at::kDouble}) {
    checkLinear({4, 7, 5}, 3, true, dt, 3);
    checkLinear({6, 5}, 9, false, dt, 1);
    checkLinear({5}, 4, true, dt, 2);
    checkLinear({64, 256}, 128, true, dt, 3);
  }
}

TEST(Linear, RejectsBadShapes) {
  at::Tensor x = at::randn({4, 5}), w = at::randn({3, 6}), y = at::empty({4, 3});
  EXPECT_NE(run("offload.linear", {x, w}, {y}, AttrMap()), "");
  w = at::randn({3, 5});
  at::Tensor b = at::randn({4});
  EXPECT_NE(run("offload.linear", {x, w, b}, {y}, AttrMap()), "");
  at::Tensor ybad = at::empty({4, 4});
  EXPECT_NE(run("offload.linear", {x, w}, {ybad}, AttrMap()), "");
  at::Tensor wd = at::randn({3, 5}, opts(at::kDouble));
  EXPECT_NE(run("offload.linear", {x, wd}, {y}, AttrMap()), "");
  std::string err = run("offload.linear", {x}, {y}, AttrMap());
  EXPECT_NE(err, "");
  EXPECT_EQ(err.find('\n'), std::string::npos);
}

//===----------------------------------------------------------------------===//
// matmul
//===----------------------------------------------------------------------===//

void checkMatmul(std::vector<int64_t> as, std::vector<int64_t> bs, bool ta,
                 bool tb, at::ScalarType dt, int threads) {
  torch::manual_seed(2);
  at::Tensor a = at::randn(as, opts(dt)), b = at::randn(bs, opts(dt));
  at::Tensor ra = ta ? a.transpose(-1, -2) : a;
  at::Tensor rb = tb ? b.transpose(-1, -2) : b;
  at::Tensor ref = at::matmul(ra, rb);
  at::Tensor c = at::full(ref.sizes(), 3.0, opts(dt));
  Attrs at_;
  at_.i("transpose_a", {ta}).i("transpose_b", {tb});
  ASSERT_EQ(run("offload.matmul", {a, b}, {c}, at_.m, threads), "");
  EXPECT_CLOSE(c, ref, tolFor(dt));
}

TEST(Matmul, MatchesATen) {
  for (auto dt : {at::kFloat, at::kDouble}) {
    checkMatmul({2, 3, 4, 5}, {5, 6}, false, false, dt, 3);   // folded batch
    checkMatmul({3, 1, 4, 5}, {2, 5, 6}, false, false, dt, 3); // broadcast
    checkMatmul({2, 5, 4}, {2, 5, 6}, true, false, dt, 2);
    checkMatmul({2, 4, 5}, {1, 6, 5}, false, true, dt, 2);
    checkMatmul({7, 5, 4}, {6, 5}, true, true, dt, 1);
    checkMatmul({4, 5}, {3, 2, 5, 6}, false, false, dt, 3);   // a shared
    checkMatmul({5}, {2, 5, 6}, false, false, dt, 1);         // vector @ batch
    checkMatmul({3, 5}, {5}, false, false, dt, 1);            // matrix @ vector
    checkMatmul({16, 8, 8}, {16, 8, 8}, false, true, dt, 4);  // many small
    checkMatmul({96, 128}, {128, 80}, false, false, dt, 3);
  }
}

TEST(Matmul, RejectsBadShapes) {
  at::Tensor a = at::randn({2, 4, 5}), b = at::randn({3, 5, 6});
  at::Tensor c = at::empty({2, 4, 6});
  EXPECT_NE(run("offload.matmul", {a, b}, {c}, AttrMap()), ""); // batch 2 vs 3
  b = at::randn({2, 4, 6});
  EXPECT_NE(run("offload.matmul", {a, b}, {c}, AttrMap()), ""); // K 5 vs 4
  b = at::randn({2, 5, 6});
  at::Tensor cbad = at::empty({2, 4, 7});
  EXPECT_NE(run("offload.matmul", {a, b}, {cbad}, AttrMap()), "");
  at::Tensor ai = at::ones({2, 4, 5}, opts(at::kLong));
  EXPECT_NE(run("offload.matmul", {ai, b}, {c}, AttrMap()), "");
  EXPECT_EQ(run("offload.matmul", {a, b}, {c}, AttrMap()), "");
}

//===----------------------------------------------------------------------===//
// conv2d
//===----------------------------------------------------------------------===//

struct ConvCase {
  int64_t n, c, h, w, o, kh, kw, sh, sw, ph, pw, dh, dw, g;
  bool bias;
};

std::ostream &operator<<(std::ostream &os, const ConvCase &k) {
  return os << "N" << k.n << " C" << k.c << " " << k.h << "x" << k.w << " O"
            << k.o << " k" << k.kh << "x" << k.kw << " s" << k.sh << "," << k.sw
            << " p" << k.ph << "," << k.pw << " d" << k.dh << "," << k.dw
            << " g" << k.g;
}

AttrMap convAttrs(const ConvCase &k) {
  Attrs a;
  a.i("stride", {k.sh, k.sw})
      .i("padding", {k.ph, k.pw})
      .i("dilation", {k.dh, k.dw})
      .i("groups", {k.g});
  return a.m;
}

void checkConv(const ConvCase &k, at::ScalarType dt, int threads) {
  SCOPED_TRACE(testing::Message() << k << (dt == at::kFloat ? " f32" : " f64")
                                  << " threads " << threads);
  torch::manual_seed(3);
  at::Tensor x = at::randn({k.n, k.c, k.h, k.w}, opts(dt));
  at::Tensor w = at::randn({k.o, k.c / k.g, k.kh, k.kw}, opts(dt));
  at::Tensor b = k.bias ? at::randn({k.o}, opts(dt)) : at::Tensor();
  std::vector<int64_t> st{k.sh, k.sw}, pd{k.ph, k.pw}, dl{k.dh, k.dw};
  at::Tensor ref = at::conv2d(x, w, b, st, pd, dl, k.g);
  AttrMap attrs = convAttrs(k);
  at::Tensor y = at::full(ref.sizes(), 5.0, opts(dt));
  ASSERT_EQ(run("offload.conv2d", {x, w, b}, {y}, attrs, threads), "");
  EXPECT_CLOSE(y, ref, tolFor(dt));

  at::Tensor dy = at::randn(ref.sizes(), opts(dt));
  auto grads = at::convolution_backward(dy, x, w, c10::nullopt, st, pd, dl,
                                        false, {0, 0}, k.g,
                                        {true, true, false});
  at::Tensor dx = at::full(x.sizes(), 9.0, opts(dt));
  ASSERT_EQ(run("offload.conv2d_backward_input", {dy, w}, {dx}, attrs,
                threads),
            "");
  EXPECT_CLOSE(dx, std::get<0>(grads), tolFor(dt));
  at::Tensor dw = at::full(w.sizes(), 9.0, opts(dt));
  ASSERT_EQ(run("offload.conv2d_backward_weight", {dy, x}, {dw}, attrs,
                threads),
            "");
  EXPECT_CLOSE(dw, std::get<1>(grads), tolFor(dt));
}

const std::vector<ConvCase> kConvCases = {
    {2, 3, 8, 8, 4, 3, 3, 1, 1, 1, 1, 1, 1, 1, true},
    {3, 4, 9, 7, 6, 3, 2, 2, 2, 1, 0, 1, 1, 2, false},  // groups 2, stride 2
    {2, 6, 10, 11, 6, 3, 3, 1, 1, 2, 2, 2, 2, 6, true}, // depthwise, dilation
    {2, 4, 7, 7, 8, 3, 3, 2, 2, 1, 1, 1, 1, 4, false},  // depthwise x2
    {2, 8, 13, 13, 8, 5, 5, 2, 2, 2, 2, 1, 1, 8, true}, // MobileNet-style
    {1, 5, 5, 5, 3, 1, 1, 1, 1, 0, 0, 1, 1, 1, true},   // 1x1
    {4, 8, 6, 6, 8, 5, 5, 3, 3, 2, 2, 1, 1, 1, false},  // stride 3
    {2, 6, 9, 8, 4, 3, 3, 1, 2, 0, 1, 2, 1, 2, true},   // mixed
    {3, 3, 11, 9, 6, 7, 7, 2, 2, 3, 3, 1, 1, 1, true},  // ResNet stem-like
    {2, 12, 5, 6, 6, 2, 3, 1, 1, 1, 1, 1, 1, 3, false}, // groups 3, even k
    // Output widths with their own im2col loops (1, 2, 4, 16), as in ResNet
    // on 32x32 images, with padding and stride.
    {2, 4, 1, 1, 5, 3, 3, 1, 1, 1, 1, 1, 1, 1, false},   // 1x1 map, 3x3 pad 1
    {2, 4, 2, 2, 5, 3, 3, 1, 1, 1, 1, 1, 1, 1, true},    // 2x2 map
    {2, 3, 8, 8, 4, 3, 3, 2, 2, 1, 1, 1, 1, 1, true},    // stride 2 to 4x4
    {2, 4, 4, 4, 6, 1, 1, 2, 2, 0, 0, 1, 1, 1, false},   // 1x1 downsample
    {1, 3, 16, 16, 4, 3, 3, 1, 1, 1, 1, 1, 1, 1, true},  // 16 wide
};

TEST(Conv2d, ForwardBackwardMatchATenF32) {
  for (const ConvCase &k : kConvCases)
    checkConv(k, at::kFloat, 3);
}

TEST(Conv2d, ForwardBackwardMatchATenF64) {
  for (const ConvCase &k : kConvCases)
    checkConv(k, at::kDouble, 2);
}

TEST(Conv2d, SingleThreadAndChunkedBatch) {
  checkConv(kConvCases[0], at::kFloat, 1);
  checkConv(kConvCases[2], at::kFloat, 1);
  // 13 samples of 16*9*96*96 im2col elements exceed one 2^24-element chunk.
  checkConv({13, 16, 96, 96, 4, 3, 3, 1, 1, 1, 1, 1, 1, 1, true}, at::kFloat,
            2);
}

TEST(Conv2d, DeterministicRunToRun) {
  ConvCase k{4, 8, 12, 12, 16, 3, 3, 1, 1, 1, 1, 1, 1, 1, true};
  torch::manual_seed(4);
  at::Tensor x = at::randn({k.n, k.c, k.h, k.w});
  at::Tensor w = at::randn({k.o, k.c, 3, 3});
  at::Tensor dy = at::randn({k.n, k.o, k.h, k.w});
  AttrMap attrs = convAttrs(k);
  at::Tensor dw1 = at::empty(w.sizes()), dw2 = at::empty(w.sizes());
  ASSERT_EQ(run("offload.conv2d_backward_weight", {dy, x}, {dw1}, attrs, 3), "");
  ASSERT_EQ(run("offload.conv2d_backward_weight", {dy, x}, {dw2}, attrs, 3), "");
  EXPECT_TRUE(at::equal(dw1, dw2));
}

TEST(Conv2d, RejectsBadShapes) {
  at::Tensor x = at::randn({2, 3, 8, 8});
  ConvCase k{2, 3, 8, 8, 4, 3, 3, 1, 1, 1, 1, 1, 1, 1, true};
  AttrMap attrs = convAttrs(k);
  at::Tensor y = at::empty({2, 4, 8, 8});
  // Weight expects 2 input channels.
  EXPECT_NE(run("offload.conv2d", {x, at::randn({4, 2, 3, 3})}, {y}, attrs), "");
  at::Tensor w = at::randn({4, 3, 3, 3});
  // Wrong output shape.
  EXPECT_NE(run("offload.conv2d", {x, w}, {at::empty({2, 4, 7, 8})}, attrs), "");
  // Wrong bias shape.
  EXPECT_NE(run("offload.conv2d", {x, w, at::randn({5})}, {y}, attrs), "");
  // Groups do not divide channels.
  Attrs g3;
  g3.i("groups", {3}).i("padding", {1, 1});
  EXPECT_NE(run("offload.conv2d", {x, at::randn({4, 1, 3, 3})}, {y}, g3.m), "");
  // Kernel larger than the input.
  EXPECT_NE(run("offload.conv2d", {at::randn({1, 3, 2, 2}), w},
                {at::empty({1, 4, 0, 0})}, Attrs().m),
            "");
  // Rank-3 input.
  EXPECT_NE(run("offload.conv2d", {at::randn({3, 8, 8}), w}, {y}, attrs), "");
  // Backward: dy does not match dx's geometry.
  EXPECT_NE(run("offload.conv2d_backward_input", {at::randn({2, 4, 7, 8}), w},
                {at::empty({2, 3, 8, 8})}, attrs),
            "");
  EXPECT_NE(run("offload.conv2d_backward_weight", {at::randn({2, 4, 8, 8}), x},
                {at::empty({4, 3, 5, 5})}, attrs),
            "");
  // Negative padding.
  Attrs neg;
  neg.i("padding", {-1, 0});
  EXPECT_NE(run("offload.conv2d", {x, w}, {y}, neg.m), "");
  // Sanity: the valid call succeeds.
  EXPECT_EQ(run("offload.conv2d", {x, w}, {y}, attrs), "");
}

} // namespace
