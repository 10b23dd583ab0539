//===- PoolNormTest.cpp - pooling and normalization kernels vs ATen -------===//
//
// Part of offload. Runs the host kernels offload.max_pool2d(_backward),
// offload.avg_pool2d(_backward), offload.adaptive_avg_pool2d(_backward),
// offload.batch_norm(_backward) and offload.layer_norm(_backward) through
// KernelRegistry::host() and compares them with ATen computed in the test
// (at::max_pool2d_with_indices(_backward), at::avg_pool2d(_backward),
// at::adaptive_avg_pool2d, at::_adaptive_avg_pool2d_backward,
// at::native_batch_norm(_backward), at::native_layer_norm(_backward)).
//
// Error measure: max|got - ref| / max(max|ref|, 1e-30). Tolerances: f32 1e-5
// (no GEMM; sums are reordered and our statistics accumulate in double),
// f64 1e-10. Max pooling values and indices must match exactly.
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

double tolFor(at::ScalarType t) { return t == at::kFloat ? 1e-5 : 1e-10; }

at::TensorOptions opts(at::ScalarType t) { return at::TensorOptions().dtype(t); }

const at::ScalarType kTypes[] = {at::kFloat, at::kDouble};

//===----------------------------------------------------------------------===//
// max_pool2d
//===----------------------------------------------------------------------===//

struct PoolCase {
  std::vector<int64_t> shape;
  int64_t kh, kw, sh, sw, ph, pw, dh, dw;
  bool ceil;
  bool countPad;
};

std::ostream &operator<<(std::ostream &os, const PoolCase &k) {
  os << "x[";
  for (auto d : k.shape)
    os << d << ",";
  return os << "] k" << k.kh << "x" << k.kw << " s" << k.sh << "," << k.sw
            << " p" << k.ph << "," << k.pw << " d" << k.dh << "," << k.dw
            << " ceil " << k.ceil << " cip " << k.countPad;
}

const std::vector<PoolCase> kMaxCases = {
    {{2, 3, 8, 8}, 2, 2, 2, 2, 0, 0, 1, 1, false, true},
    {{2, 3, 9, 7}, 3, 3, 2, 2, 1, 1, 1, 1, true, true},
    {{1, 2, 11, 10}, 3, 3, 2, 2, 1, 1, 2, 2, false, true},
    {{2, 2, 10, 10}, 3, 2, 3, 2, 1, 1, 1, 2, true, true},
    {{1, 1, 5, 5}, 3, 3, 1, 1, 1, 1, 1, 1, false, true},
    {{3, 7, 7}, 2, 2, 2, 2, 0, 0, 1, 1, true, true}, // unbatched
    {{4, 8, 16, 16}, 3, 3, 2, 2, 1, 1, 1, 1, false, true}, // ResNet stem pool
};

TEST(MaxPool2d, ForwardBackwardMatchATen) {
  for (auto dt : kTypes)
    for (const PoolCase &k : kMaxCases) {
      SCOPED_TRACE(testing::Message() << k);
      torch::manual_seed(5);
      at::Tensor x = at::randn(k.shape, opts(dt));
      std::vector<int64_t> ks{k.kh, k.kw}, st{k.sh, k.sw}, pd{k.ph, k.pw},
          dl{k.dh, k.dw};
      auto ref = at::max_pool2d_with_indices(x, ks, st, pd, dl, k.ceil);
      at::Tensor ry = std::get<0>(ref), ri = std::get<1>(ref);
      at::Tensor y = at::full(ry.sizes(), 4.0, opts(dt));
      at::Tensor ind = at::full(ry.sizes(), -3, opts(at::kLong));
      Attrs a;
      a.i("kernel_size", ks).i("stride", st).i("padding", pd).i("dilation", dl)
          .i("ceil_mode", {k.ceil});
      ASSERT_EQ(run("offload.max_pool2d", {x}, {y, ind}, a.m), "");
      EXPECT_TRUE(at::equal(y, ry));
      EXPECT_TRUE(at::equal(ind, ri));

      at::Tensor dy = at::randn(ry.sizes(), opts(dt));
      at::Tensor rdx = at::max_pool2d_with_indices_backward(dy, x, ks, st, pd,
                                                            dl, k.ceil, ri);
      at::Tensor dx = at::full(x.sizes(), 8.0, opts(dt));
      ASSERT_EQ(run("offload.max_pool2d_backward", {dy, ind}, {dx}, AttrMap()),
                "");
      EXPECT_CLOSE(dx, rdx, tolFor(dt));
    }
}

TEST(MaxPool2d, RejectsBadInput) {
  at::Tensor x = at::randn({2, 3, 8, 8});
  Attrs a;
  a.i("kernel_size", {2, 2}).i("stride", {2, 2});
  at::Tensor y = at::empty({2, 3, 4, 4}), ind = at::empty({2, 3, 4, 4}, opts(at::kLong));
  EXPECT_EQ(run("offload.max_pool2d", {x}, {y, ind}, a.m), "");
  EXPECT_NE(run("offload.max_pool2d", {x}, {at::empty({2, 3, 4, 3}), ind}, a.m), "");
  EXPECT_NE(run("offload.max_pool2d", {x}, {y, at::empty({2, 3, 4, 4})}, a.m), "");
  Attrs bigPad;
  bigPad.i("kernel_size", {2, 2}).i("padding", {2, 2});
  EXPECT_NE(run("offload.max_pool2d", {x}, {y, ind}, bigPad.m), "");
  EXPECT_NE(run("offload.max_pool2d", {x}, {y, ind}, AttrMap()), "");
  // Out-of-range index in backward is reported, not written.
  at::Tensor dy = at::randn({2, 3, 4, 4});
  at::Tensor badInd = at::zeros({2, 3, 4, 4}, opts(at::kLong));
  badInd[1][2][3][3] = 64;
  EXPECT_NE(run("offload.max_pool2d_backward", {dy, badInd}, {at::empty({2, 3, 8, 8})},
                AttrMap()),
            "");
  EXPECT_NE(run("offload.max_pool2d_backward", {dy, ind}, {at::empty({2, 4, 8, 8})},
                AttrMap()),
            "");
}

//===----------------------------------------------------------------------===//
// avg_pool2d
//===----------------------------------------------------------------------===//

const std::vector<PoolCase> kAvgCases = {
    {{2, 3, 8, 8}, 2, 2, 2, 2, 0, 0, 1, 1, false, true},
    {{2, 3, 9, 7}, 3, 3, 2, 2, 1, 1, 1, 1, true, true},
    {{2, 3, 9, 7}, 3, 3, 2, 2, 1, 1, 1, 1, true, false},
    {{1, 2, 11, 10}, 3, 2, 2, 3, 1, 1, 1, 1, false, false},
    {{2, 2, 5, 6}, 4, 4, 3, 3, 2, 2, 1, 1, true, true},
    {{3, 6, 6}, 3, 3, 1, 1, 1, 1, 1, 1, false, false}, // unbatched
};

TEST(AvgPool2d, ForwardBackwardMatchATen) {
  for (auto dt : kTypes)
    for (const PoolCase &k : kAvgCases) {
      SCOPED_TRACE(testing::Message() << k);
      torch::manual_seed(6);
      at::Tensor x = at::randn(k.shape, opts(dt));
      std::vector<int64_t> ks{k.kh, k.kw}, st{k.sh, k.sw}, pd{k.ph, k.pw};
      at::Tensor ry = at::avg_pool2d(x, ks, st, pd, k.ceil, k.countPad);
      Attrs a;
      a.i("kernel_size", ks).i("stride", st).i("padding", pd)
          .i("ceil_mode", {k.ceil}).i("count_include_pad", {k.countPad});
      at::Tensor y = at::full(ry.sizes(), 4.0, opts(dt));
      ASSERT_EQ(run("offload.avg_pool2d", {x}, {y}, a.m), "");
      EXPECT_CLOSE(y, ry, tolFor(dt));
      at::Tensor dy = at::randn(ry.sizes(), opts(dt));
      at::Tensor rdx = at::avg_pool2d_backward(dy, x, ks, st, pd, k.ceil,
                                               k.countPad, c10::nullopt);
      at::Tensor dx = at::full(x.sizes(), 8.0, opts(dt));
      ASSERT_EQ(run("offload.avg_pool2d_backward", {dy}, {dx}, a.m), "");
      EXPECT_CLOSE(dx, rdx, tolFor(dt));
    }
}

TEST(AvgPool2d, RejectsBadShapes) {
  Attrs a;
  a.i("kernel_size", {2, 2});
  EXPECT_NE(run("offload.avg_pool2d", {at::randn({2, 3, 8, 8})},
                {at::empty({2, 3, 5, 4})}, a.m),
            "");
  EXPECT_NE(run("offload.avg_pool2d_backward", {at::randn({2, 3, 3, 4})},
                {at::empty({2, 3, 8, 8})}, a.m),
            "");
  EXPECT_NE(run("offload.avg_pool2d", {at::randn({8, 8})}, {at::empty({4, 4})},
                a.m),
            "");
}

//===----------------------------------------------------------------------===//
// adaptive_avg_pool2d
//===----------------------------------------------------------------------===//

TEST(AdaptiveAvgPool2d, ForwardBackwardMatchATen) {
  struct Case {
    std::vector<int64_t> shape;
    int64_t oh, ow;
  };
  const std::vector<Case> cases = {{{2, 3, 7, 9}, 3, 4},
                                   {{4, 8, 4, 4}, 1, 1},
                                   {{2, 2, 5, 5}, 7, 3},
                                   {{3, 10, 6}, 4, 5}};
  for (auto dt : kTypes)
    for (const Case &k : cases) {
      torch::manual_seed(7);
      at::Tensor x = at::randn(k.shape, opts(dt));
      at::Tensor ry = at::adaptive_avg_pool2d(x, {k.oh, k.ow});
      Attrs a;
      a.i("output_size", {k.oh, k.ow});
      at::Tensor y = at::full(ry.sizes(), 4.0, opts(dt));
      ASSERT_EQ(run("offload.adaptive_avg_pool2d", {x}, {y}, a.m), "");
      EXPECT_CLOSE(y, ry, tolFor(dt));
      at::Tensor dy = at::randn(ry.sizes(), opts(dt));
      at::Tensor rdx = at::_adaptive_avg_pool2d_backward(dy, x);
      at::Tensor dx = at::full(x.sizes(), 8.0, opts(dt));
      ASSERT_EQ(run("offload.adaptive_avg_pool2d_backward", {dy}, {dx},
                    AttrMap()),
                "");
      EXPECT_CLOSE(dx, rdx, tolFor(dt));
    }
  Attrs a;
  a.i("output_size", {2, 2});
  EXPECT_NE(run("offload.adaptive_avg_pool2d", {at::randn({1, 2, 6, 6})},
                {at::empty({1, 2, 3, 3})}, a.m),
            "");
  EXPECT_NE(run("offload.adaptive_avg_pool2d_backward",
                {at::randn({1, 3, 2, 2})}, {at::empty({1, 2, 6, 6})},
                AttrMap()),
            "");
}

//===----------------------------------------------------------------------===//
// batch_norm
//===----------------------------------------------------------------------===//

void checkBatchNorm(std::vector<int64_t> shape, bool affine, at::ScalarType dt,
                    int threads) {
  SCOPED_TRACE(testing::Message() << "batch_norm affine " << affine << " rank "
                                  << shape.size());
  torch::manual_seed(8);
  int64_t c = shape[1];
  at::Tensor x = at::randn(shape, opts(dt)) * 2 + 0.5;
  at::Tensor w = affine ? at::randn({c}, opts(dt)) : at::Tensor();
  at::Tensor b = affine ? at::randn({c}, opts(dt)) : at::Tensor();
  at::Tensor rm = at::randn({c}, opts(dt)), rv = at::rand({c}, opts(dt)) + 0.5;
  double mom = 0.1, eps = 1e-5;
  at::Tensor rmRef = rm.clone(), rvRef = rv.clone();
  auto ref = at::native_batch_norm(x, w, b, rmRef, rvRef, true, mom, eps);
  at::Tensor y = at::empty(x.sizes(), opts(dt));
  at::Tensor sm = at::empty({c}, opts(dt)), si = at::empty({c}, opts(dt));
  at::Tensor nrm = at::empty({c}, opts(dt)), nrv = at::empty({c}, opts(dt));
  Attrs a;
  a.f("momentum", mom).f("eps", eps);
  ASSERT_EQ(run("offload.batch_norm", {x, w, b, rm, rv}, {y, sm, si, nrm, nrv},
                a.m, threads),
            "");
  double tol = tolFor(dt);
  EXPECT_CLOSE(y, std::get<0>(ref), tol);
  EXPECT_CLOSE(sm, std::get<1>(ref), tol);
  EXPECT_CLOSE(si, std::get<2>(ref), tol);
  EXPECT_CLOSE(nrm, rmRef, tol);
  EXPECT_CLOSE(nrv, rvRef, tol);

  at::Tensor dy = at::randn(x.sizes(), opts(dt));
  auto g = at::native_batch_norm_backward(dy, x, w, rm, rv, std::get<1>(ref),
                                          std::get<2>(ref), true, eps,
                                          {true, true, true});
  at::Tensor dx = at::empty(x.sizes(), opts(dt));
  at::Tensor dw = at::empty({c}, opts(dt)), db = at::empty({c}, opts(dt));
  ASSERT_EQ(run("offload.batch_norm_backward", {dy, x, w, sm, si},
                {dx, dw, db}, a.m, threads),
            "");
  EXPECT_CLOSE(dx, std::get<0>(g), tol);
  EXPECT_CLOSE(dw, std::get<1>(g), tol);
  EXPECT_CLOSE(db, std::get<2>(g), tol);
}

TEST(BatchNorm, ForwardBackwardMatchATen) {
  for (auto dt : kTypes) {
    checkBatchNorm({4, 3, 5, 6}, true, dt, 3);
    checkBatchNorm({8, 5}, true, dt, 2);
    checkBatchNorm({3, 4, 7}, false, dt, 1);
    checkBatchNorm({32, 16, 8, 8}, true, dt, 3);
  }
}

TEST(BatchNorm, RejectsBadShapes) {
  at::Tensor x = at::randn({4, 3, 5, 5});
  auto c = [] { return at::zeros({3}); };
  Attrs a;
  a.f("momentum", 0.1).f("eps", 1e-5);
  std::vector<at::Tensor> outs{at::empty({4, 3, 5, 5}), c(), c(), c(), c()};
  EXPECT_EQ(run("offload.batch_norm", {x, c(), c(), c(), c()}, outs, a.m), "");
  EXPECT_NE(run("offload.batch_norm", {x, at::zeros({4}), c(), c(), c()}, outs,
                a.m),
            "");
  EXPECT_NE(run("offload.batch_norm", {x, c(), c(), c(), c()},
                {at::empty({4, 3, 5, 4}), c(), c(), c(), c()}, a.m),
            "");
  EXPECT_NE(run("offload.batch_norm", {at::randn({1, 3}), c(), c(), c(), c()},
                {at::empty({1, 3}), c(), c(), c(), c()}, a.m),
            "");
  EXPECT_NE(run("offload.batch_norm_backward",
                {at::randn({4, 3, 5, 4}), x, c(), c(), c()},
                {at::empty({4, 3, 5, 5}), c(), c()}, a.m),
            "");
  EXPECT_NE(run("offload.batch_norm_backward",
                {x, x, c(), at::zeros({2}), c()},
                {at::empty({4, 3, 5, 5}), c(), c()}, a.m),
            "");
}

//===----------------------------------------------------------------------===//
// layer_norm
//===----------------------------------------------------------------------===//

void checkLayerNorm(std::vector<int64_t> shape, int64_t nd, bool w_, bool b_,
                    at::ScalarType dt, int threads) {
  SCOPED_TRACE(testing::Message() << "layer_norm nd " << nd << " weight " << w_
                                  << " bias " << b_);
  torch::manual_seed(9);
  std::vector<int64_t> ns(shape.end() - nd, shape.end());
  at::Tensor x = at::randn(shape, opts(dt)) * 3 - 1;
  at::Tensor w = w_ ? at::randn(ns, opts(dt)) : at::Tensor();
  at::Tensor b = b_ ? at::randn(ns, opts(dt)) : at::Tensor();
  double eps = 1e-5;
  auto ref = at::native_layer_norm(x, ns, w, b, eps);
  at::Tensor rmean = std::get<1>(ref), rrstd = std::get<2>(ref);
  at::Tensor y = at::empty(x.sizes(), opts(dt));
  at::Tensor mean = at::empty(rmean.sizes(), opts(dt));
  at::Tensor rstd = at::empty(rrstd.sizes(), opts(dt));
  Attrs a;
  a.i("normalized_ndim", {nd}).f("eps", eps);
  ASSERT_EQ(run("offload.layer_norm", {x, w, b}, {y, mean, rstd}, a.m, threads),
            "");
  double tol = tolFor(dt);
  EXPECT_CLOSE(y, std::get<0>(ref), tol);
  EXPECT_CLOSE(mean, rmean, tol);
  EXPECT_CLOSE(rstd, rrstd, tol);

  at::Tensor dy = at::randn(x.sizes(), opts(dt));
  auto g = at::native_layer_norm_backward(dy, x, ns, rmean, rrstd, w, b,
                                          {true, w_, b_});
  at::Tensor dx = at::empty(x.sizes(), opts(dt));
  at::Tensor dw = w_ ? at::empty(ns, opts(dt)) : at::Tensor();
  at::Tensor db = b_ ? at::empty(ns, opts(dt)) : at::Tensor();
  ASSERT_EQ(run("offload.layer_norm_backward", {dy, x, w, mean, rstd},
                {dx, dw, db}, a.m, threads),
            "");
  EXPECT_CLOSE(dx, std::get<0>(g), tol);
  if (w_)
    EXPECT_CLOSE(dw, std::get<1>(g), tol);
  if (b_)
    EXPECT_CLOSE(db, std::get<2>(g), tol);
}

TEST(LayerNorm, ForwardBackwardMatchATen) {
  for (auto dt : kTypes) {
    checkLayerNorm({4, 6, 8}, 1, true, true, dt, 3);
    checkLayerNorm({3, 5, 4, 6}, 2, true, true, dt, 2);
    checkLayerNorm({7, 9}, 1, false, false, dt, 1);
    checkLayerNorm({5, 11}, 1, true, false, dt, 3);
    checkLayerNorm({32, 10, 256}, 1, true, true, dt, 3); // Transformer-like
  }
}

TEST(LayerNorm, RejectsBadShapes) {
  at::Tensor x = at::randn({4, 6, 8});
  Attrs a;
  a.i("normalized_ndim", {1}).f("eps", 1e-5);
  std::vector<at::Tensor> outs{at::empty({4, 6, 8}), at::empty({4, 6, 1}),
                               at::empty({4, 6, 1})};
  EXPECT_EQ(run("offload.layer_norm", {x, at::ones({8}), at::zeros({8})}, outs,
                a.m),
            "");
  EXPECT_NE(run("offload.layer_norm", {x, at::ones({6}), at::zeros({8})}, outs,
                a.m),
            "");
  EXPECT_NE(run("offload.layer_norm", {x, at::ones({8}), at::zeros({8})},
                {at::empty({4, 6, 8}), at::empty({4, 1, 1}), at::empty({4, 6, 1})},
                a.m),
            "");
  Attrs big;
  big.i("normalized_ndim", {4});
  EXPECT_NE(run("offload.layer_norm", {x, at::Tensor(), at::Tensor()}, outs,
                big.m),
            "");
  EXPECT_NE(run("offload.layer_norm_backward",
                {at::randn({4, 6, 7}), x, at::ones({8}), outs[1], outs[2]},
                {at::empty({4, 6, 8}), at::empty({8}), at::empty({8})}, a.m),
            "");
}

} // namespace
