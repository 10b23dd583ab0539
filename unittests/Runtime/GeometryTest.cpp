//===- GeometryTest.cpp - The window and slice geometry of both backends --===//
//
// Part of offload. lib/Runtime/Kernels/Geometry.h is the one place the host
// and CUDA kernels compute conv and pooling output sizes, check window
// attributes and normalize slices; these tests pin its formulas to ATen's
// and its refusals to the words both backends print.
//
//===----------------------------------------------------------------------===//

#include "../../lib/Runtime/Kernels/Geometry.h"

#include <gtest/gtest.h>

using namespace offload::rt;
using namespace offload::rt::geom;

namespace {
AttrMap ints(std::initializer_list<std::pair<const char *, std::vector<int64_t>>> kv) {
  AttrMap m;
  for (auto &[k, v] : kv) {
    AttrValue a;
    a.ints = v;
    m.set(k, a);
  }
  return m;
}
} // namespace

TEST(GeometryTest, ConvOutputSizeIsATensFormula) {
  ConvWindow g;
  // resnet's stem: 7x7 stride 2 padding 3 on 224x224 -> 112x112.
  ASSERT_EQ(convWindow("conv", ints({{"stride", {2}}, {"padding", {3}}}),
                       {1, 3, 224, 224}, {64, 3, 7, 7}, g),
            "");
  EXPECT_EQ(g.oh, 112);
  EXPECT_EQ(g.ow, 112);
  // floor((H + 2p - d(k-1) - 1) / s) + 1 per side, with 2-value attributes.
  ASSERT_EQ(convWindow("conv",
                       ints({{"stride", {2, 1}}, {"padding", {0, 2}},
                             {"dilation", {1, 2}}, {"groups", {2}}}),
                       {2, 4, 9, 10}, {6, 2, 3, 3}, g),
            "");
  EXPECT_EQ(g.oh, (9 - 2 - 1) / 2 + 1);
  EXPECT_EQ(g.ow, (10 + 4 - 4 - 1) / 1 + 1);
  EXPECT_EQ(g.cg(), 2);
  EXPECT_EQ(g.og(), 3);
  EXPECT_EQ(g.l(), g.oh * g.ow);
}

TEST(GeometryTest, ConvRefusals) {
  ConvWindow g;
  EXPECT_EQ(convWindow("conv", AttrMap(), {1, 3, 8}, {4, 3, 3, 3}, g),
            "conv: input must be [N,C,H,W], got [1,3,8]");
  EXPECT_EQ(convWindow("conv", ints({{"stride", {0}}}), {1, 3, 8, 8}, {4, 3, 3, 3}, g),
            "conv: stride and dilation must be >= 1 and padding >= 0");
  EXPECT_EQ(convWindow("conv", ints({{"padding", {int64_t(1) << 40}}}), {1, 3, 8, 8},
                       {4, 3, 3, 3}, g),
            "conv: stride, padding or dilation value 1099511627776 exceeds the "
            "supported maximum " + std::to_string(em::kMaxWindowAttr));
  EXPECT_EQ(convWindow("conv", ints({{"groups", {2}}}), {1, 3, 8, 8}, {4, 3, 3, 3}, g),
            "conv: groups=2 must divide input channels 3 and output channels 4");
  EXPECT_EQ(convWindow("conv", AttrMap(), {1, 3, 8, 8}, {4, 2, 3, 3}, g),
            "conv: weight [4,2,3,3] expects 2 input channels with groups=1, input has 3");
  EXPECT_EQ(convWindow("conv", AttrMap(), {1, 3, 2, 2}, {4, 3, 3, 3}, g),
            "conv: kernel 3x3 (dilation 1,1) is larger than padded input 2x2");
  EXPECT_EQ(convWindow("conv", ints({{"stride", {1, 2, 3}}}), {1, 3, 8, 8}, {4, 3, 3, 3}, g),
            "conv: attribute stride must have 1 or 2 values, got 3");
}

TEST(GeometryTest, PoolWindowFollowsATensPoolingOutputShape) {
  em::PoolGeom g;
  g.h = 7;
  g.w = 7;
  // Stride defaults to the kernel size; ceil_mode keeps a last window that
  // starts inside the input.
  ASSERT_EQ(poolWindow("pool", ints({{"kernel_size", {2}}, {"ceil_mode", {1}}}), false, g), "");
  EXPECT_EQ(g.sh, 2);
  EXPECT_EQ(g.oh, 4);
  ASSERT_EQ(poolWindow("pool", ints({{"kernel_size", {2}}}), false, g), "");
  EXPECT_EQ(g.oh, 3);
  ASSERT_EQ(poolWindow("pool", ints({{"kernel_size", {3}}, {"stride", {2}}, {"padding", {1}},
                                     {"dilation", {2}}}),
                       true, g),
            "");
  EXPECT_EQ(g.oh, (7 + 2 - 2 * 2 - 1) / 2 + 1);
  EXPECT_TRUE(g.countPad);
}

TEST(GeometryTest, PoolRefusals) {
  em::PoolGeom g;
  g.h = g.w = 4;
  EXPECT_EQ(poolWindow("pool", AttrMap(), false, g), "pool: missing attribute kernel_size");
  EXPECT_EQ(poolWindow("pool", ints({{"kernel_size", {2}}, {"padding", {2}}}), false, g),
            "pool: padding (2,2) must be >= 0 and at most half the kernel size (2,2)");
  EXPECT_EQ(poolWindow("pool", ints({{"kernel_size", {0}}}), false, g),
            "pool: kernel_size, stride and dilation must be >= 1");
  g.h = g.w = 1;
  EXPECT_EQ(poolWindow("pool", ints({{"kernel_size", {3}}}), false, g),
            "pool: input plane 1x1 is too small for the pooling window (output 0x0)");
  int64_t planes = 0;
  EXPECT_EQ(planesOf("pool", "x", {2, 3, 4, 4}, planes), "");
  EXPECT_EQ(planes, 6);
  EXPECT_EQ(planesOf("pool", "x", {3, 4, 4}, planes), "");
  EXPECT_EQ(planes, 3);
  EXPECT_EQ(planesOf("pool", "x", {4, 4}, planes),
            "pool: x must be [N,C,H,W] or [C,H,W], got [4,4]");
}

TEST(GeometryTest, SliceFollowsATensRules) {
  SliceSpec s;
  // x[:, 1:7:2] of [4, 10]: 1, 3, 5.
  ASSERT_EQ(sliceSpec("slice", ints({{"dim", {1}}, {"start", {1}}, {"end", {7}}, {"step", {2}}}),
                      {4, 10}, s),
            "");
  EXPECT_EQ(s.dim, 1);
  EXPECT_EQ(s.start, 1);
  EXPECT_EQ(s.len, 3);
  // Negative bounds wrap, then clamp; an empty range has length 0.
  ASSERT_EQ(sliceSpec("slice", ints({{"dim", {-1}}, {"start", {-3}}}), {4, 10}, s), "");
  EXPECT_EQ(s.dim, 1);
  EXPECT_EQ(s.start, 7);
  EXPECT_EQ(s.len, 3);
  ASSERT_EQ(sliceSpec("slice", ints({{"start", {-100}}, {"end", {100}}}), {4, 10}, s), "");
  EXPECT_EQ(s.start, 0);
  EXPECT_EQ(s.len, 4);
  ASSERT_EQ(sliceSpec("slice", ints({{"start", {3}}, {"end", {1}}}), {4, 10}, s), "");
  EXPECT_EQ(s.len, 0);
  EXPECT_EQ(sliceSpec("slice", ints({{"dim", {2}}}), {4, 10}, s),
            "slice: dim out of range for rank 2");
  EXPECT_EQ(sliceSpec("slice", ints({{"step", {0}}}), {4, 10}, s), "slice: step must be >= 1");
}

TEST(GeometryTest, BroadcastStridesFollowNumpy) {
  int64_t st[4] = {-1, -1, -1, -1};
  // [3,1] against [2,3,4]: a missing leading dim and a size-1 dim read 0.
  ASSERT_TRUE(broadcastStrides({3, 1}, {2, 3, 4}, st));
  EXPECT_EQ(st[0], 0);
  EXPECT_EQ(st[1], 1);
  EXPECT_EQ(st[2], 0);
  ASSERT_TRUE(broadcastStrides({2, 3, 4}, {2, 3, 4}, st));
  EXPECT_EQ(st[0], 12);
  EXPECT_EQ(st[1], 4);
  EXPECT_EQ(st[2], 1);
  EXPECT_FALSE(broadcastStrides({3, 2}, {2, 3, 4}, st));
  EXPECT_FALSE(broadcastStrides({1, 2, 3, 4}, {2, 3, 4}, st));
}

TEST(GeometryTest, PermutationGivesTheInputStridesInOutputOrder) {
  std::vector<int64_t> st;
  // y = x.permute(2, 0, 1) of x [2,3,4]: y [4,2,3], y[i,j,k] = x[j,k,i].
  ASSERT_EQ(permutation("transpose", {2, 0, 1}, {2, 3, 4}, {4, 2, 3}, st), "");
  EXPECT_EQ(st, (std::vector<int64_t>{1, 12, 4}));
  ASSERT_EQ(permutation("transpose", {-1, 0, 1}, {2, 3, 4}, {4, 2, 3}, st), "");
  EXPECT_EQ(st, (std::vector<int64_t>{1, 12, 4}));
  EXPECT_EQ(permutation("transpose", {0, 0, 1}, {2, 3, 4}, {2, 2, 3}, st),
            "transpose: perm is not a permutation");
  EXPECT_EQ(permutation("transpose", {1, 0}, {2, 3, 4}, {3, 2, 4}, st),
            "transpose: perm has 2 entries for rank 3");
  EXPECT_EQ(permutation("transpose", {1, 0, 2}, {2, 3, 4}, {2, 3, 4}, st),
            "transpose: y has shape [2,3,4], expected [3,2,4]");
}

TEST(GeometryTest, CatChecksEveryInputAgainstTheResult) {
  auto v = [](std::vector<int64_t> s, DType t = DType::F32) {
    TensorView x;
    x.shape = std::move(s);
    x.dtype = t;
    return x;
  };
  int64_t dim = -1;
  EXPECT_EQ(catGeometry("cat", {v({2, 3}), v({2, 5})}, v({2, 8}), dim), "");
  EXPECT_EQ(dim, 1);
  dim = 0;
  EXPECT_EQ(catGeometry("cat", {v({2, 3}), v({2, 5})}, v({2, 8}), dim),
            "cat: input 0 shape [2,3] does not match result [2,8]");
  dim = 1;
  EXPECT_EQ(catGeometry("cat", {v({2, 3}), v({2, 4})}, v({2, 8}), dim),
            "cat: inputs sum to 7 along dim 1, result has 8");
  EXPECT_EQ(catGeometry("cat", {v({2, 3}), v({2, 5}, DType::F64)}, v({2, 8}), dim),
            "cat: input 1 is f64, result is f32");
  EXPECT_EQ(catGeometry("cat", {v({2, 3, 1})}, v({2, 8}), dim),
            "cat: input 0 has rank 3, result has rank 2");
  dim = 2;
  EXPECT_EQ(catGeometry("cat", {v({2, 8})}, v({2, 8}), dim),
            "cat: dim out of range for rank 2");
}
