//===- PrecisionTest.cpp - fp32 kernels as accurate as ATen's, vs float64 ---===//
//
// Part of offload. Differential precision tests (issue 28): each op runs in
// fp32 on adversarial inputs (large common offsets, long reduction axes,
// near-cancelling sums, size-1 softmax axes); its error against ATen's
// float64 result must be within kMultiple times ATen fp32's own error on the
// same inputs, or kFloor, whichever is larger (the model zoo's rule,
// test/drivers/zoo.py, applied per op).
//
// Error measure: max|a - ref| / max|ref - mean(ref)|. Centring the scale
// matters for inputs with a large common offset: an output of ~1000 +- 1
// that then feeds a normalization needs its deviations right, and the
// plain max|ref| would call an error of 1e-4 (the deviations' fourth digit)
// 1e-7.
//
//===----------------------------------------------------------------------===//

#include "KernelTestUtil.h"

#include <cmath>
#include <functional>
#include <tuple>

using namespace atest;

namespace {

constexpr double kMultiple = 4.0;
constexpr double kFloor = 4.0 * 5.96e-8; // four fp32 unit roundoffs

double centredErr(const at::Tensor &got, const at::Tensor &ref) {
  at::Tensor r = ref.to(at::kDouble);
  double scale = (r - r.mean()).abs().max().item<double>();
  double err = (got.to(at::kDouble) - r).abs().max().item<double>();
  return err / std::max(scale, 1e-300);
}

/// Expects ours (fp32) within max(kFloor, kMultiple x aten32's error) of
/// ref64, and prints both.
void expectAsPrecise(const std::string &what, const at::Tensor &ours,
                     const at::Tensor &aten32, const at::Tensor &ref64) {
  ASSERT_EQ(ours.sizes(), ref64.sizes()) << what;
  double e = centredErr(ours, ref64), t = centredErr(aten32, ref64);
  double bound = std::max(kFloor, kMultiple * t);
  std::cout << "[precision] " << what << ": ours " << e << ", ATen fp32 " << t
            << ", bound " << bound << "\n";
  EXPECT_LE(e, bound) << what << ": ours " << e << " vs ATen fp32 " << t;
}

at::Tensor randn(std::vector<int64_t> s, uint64_t seed) {
  auto g = at::detail::createCPUGenerator(seed);
  return at::randn(s, g, at::TensorOptions().dtype(at::kFloat));
}

//===----------------------------------------------------------------------===//
// conv2d: a common offset on the input (un-normalized images, MobileViT v2's
// stem on x + 1000), with zero padding.
//===----------------------------------------------------------------------===//

void convCase(const std::string &what, at::Tensor x, at::Tensor w,
              std::vector<int64_t> stride, std::vector<int64_t> pad,
              int64_t groups, int threads) {
  at::Tensor ref = at::conv2d(x.to(at::kDouble), w.to(at::kDouble), {}, stride, pad, {1, 1}, groups);
  at::Tensor t32 = at::conv2d(x, w, {}, stride, pad, {1, 1}, groups);
  at::Tensor ours = at::empty_like(t32);
  Attrs a;
  a.i("stride", stride).i("padding", pad).i("dilation", {1, 1}).i("groups", {groups});
  ASSERT_EQ(run("conv2d", {x, w, at::Tensor()}, {ours}, a, threads), "");
  expectAsPrecise(what, ours, t32, ref);
}

TEST(Precision, Conv2dOffsetInput) {
  at::Tensor w = randn({16, 3, 3, 3}, 2) * 0.2;
  for (double off : {100.0, 1000.0})
    for (int threads : {1, 3}) {
      at::Tensor x = randn({4, 3, 64, 64}, 1) + off;
      convCase("conv2d 3x3 s2 p1, x + " + std::to_string(int(off)) + ", threads " +
                   std::to_string(threads), x, w, {2, 2}, {1, 1}, 1, threads);
    }
  // 1x1 over 256 channels with an offset (a long reduction axis).
  at::Tensor w1 = randn({32, 256, 1, 1}, 4) * 0.1;
  convCase("conv2d 1x1 K=256, x + 100", randn({2, 256, 8, 8}, 3) + 100, w1, {1, 1}, {0, 0}, 1, 1);
}

//===----------------------------------------------------------------------===//
// softmax / log_softmax: offsets, a long axis, a size-1 axis (MobileViT v2's
// separable attention at 64x64: softmax over one patch).
//===----------------------------------------------------------------------===//

TEST(Precision, SoftmaxFamily) {
  struct Case { std::vector<int64_t> shape; int64_t dim; double off, scale; };
  std::vector<Case> cases = {{{4, 1, 4, 1}, 3, 0, 1},  {{8, 4096}, 1, 1000, 1},
                             {{8, 65536}, 1, 0, 1},    {{4, 1, 4, 16}, 3, 50, 20}};
  for (const Case &c : cases)
    for (bool isLog : {false, true}) {
      at::Tensor x = randn(c.shape, 5) * c.scale + c.off;
      at::Tensor ref = isLog ? at::log_softmax(x.to(at::kDouble), c.dim) : at::softmax(x.to(at::kDouble), c.dim);
      at::Tensor t32 = isLog ? at::log_softmax(x, c.dim) : at::softmax(x, c.dim);
      at::Tensor ours = at::empty_like(t32);
      ASSERT_EQ(run(isLog ? "log_softmax" : "softmax", {x}, {ours}, Attrs().i("dim", {c.dim})), "");
      std::string what = std::string(isLog ? "log_softmax " : "softmax ") + std::to_string(x.numel()) +
                         " elements, axis " + std::to_string(c.shape[size_t(c.dim)]) + ", offset " +
                         std::to_string(int(c.off));
      // The backward on a near-cancelling dy (a common offset).
      at::Tensor dy = randn(c.shape, 6) + 10;
      at::Tensor y64 = ref, y32 = t32;
      at::Tensor dref = isLog ? at::_log_softmax_backward_data(dy.to(at::kDouble), y64, c.dim, at::kDouble)
                              : at::_softmax_backward_data(dy.to(at::kDouble), y64, c.dim, at::kDouble);
      at::Tensor d32 = isLog ? at::_log_softmax_backward_data(dy, y32, c.dim, at::kFloat)
                             : at::_softmax_backward_data(dy, y32, c.dim, at::kFloat);
      at::Tensor dours = at::empty_like(d32);
      ASSERT_EQ(run(isLog ? "log_softmax_backward" : "softmax_backward", {dy, ours}, {dours},
                    Attrs().i("dim", {c.dim})), "");
      expectAsPrecise(what, ours, t32, ref);
      if (dref.abs().max().item<double>() > 0)
        expectAsPrecise(what + " backward", dours, d32, dref);
      else // a size-1 softmax axis: the gradient is exactly zero, in ATen fp32 too
        EXPECT_EQ(dours.abs().max().item<double>(), d32.abs().max().item<double>()) << what;
    }
}

//===----------------------------------------------------------------------===//
// reduce_sum / reduce_mean: a long axis, a near-cancelling sum.
//===----------------------------------------------------------------------===//

TEST(Precision, ReduceLongAndCancelling) {
  at::Tensor x = randn({4, 1 << 18}, 7) + 1000;
  at::Tensor y = randn({4, 1 << 18}, 8);
  at::Tensor cancel = at::cat({y, -y + randn({4, 1 << 18}, 9) * 1e-3}, 1);
  for (auto [nm, in] : {std::pair<std::string, at::Tensor>{"x + 1000", x}, {"near-cancelling", cancel}})
    for (bool mean : {false, true}) {
      at::Tensor ref = mean ? in.to(at::kDouble).mean({1}) : in.to(at::kDouble).sum({1});
      at::Tensor t32 = mean ? in.mean({1}) : in.sum({1});
      at::Tensor ours = at::empty_like(t32);
      ASSERT_EQ(run(mean ? "reduce_mean" : "reduce_sum", {in}, {ours},
                    Attrs().i("dims", {1}).i("keepdim", {0})), "");
      // Scale: max|ref| (the outputs are the sums themselves).
      double e = (ours.to(at::kDouble) - ref).abs().max().item<double>() / ref.abs().max().item<double>();
      double t = (t32.to(at::kDouble) - ref).abs().max().item<double>() / ref.abs().max().item<double>();
      std::cout << "[precision] " << (mean ? "reduce_mean " : "reduce_sum ") << nm << ": ours " << e
                << ", ATen fp32 " << t << "\n";
      EXPECT_LE(e, std::max(kFloor, kMultiple * t)) << nm;
    }
}

//===----------------------------------------------------------------------===//
// batch norm and layer norm, forward and backward: a large common offset on
// the input (activations whose mean is far from zero next to their spread),
// and on the incoming gradient.
//===----------------------------------------------------------------------===//

TEST(Precision, NormsOffsetInput) {
  double mom = 0.1, eps = 1e-5;
  for (double off : {10.0, 1000.0}) {
    std::string tag = " x + " + std::to_string(int(off));
    at::Tensor x = randn({8, 4, 16, 16}, 11) * 0.5 + off;
    at::Tensor w = randn({4}, 12), b = randn({4}, 13);
    at::Tensor dy = randn({8, 4, 16, 16}, 14) + 3.0;
    // batch_norm (training statistics).
    at::Tensor x64 = x.to(at::kDouble), w64 = w.to(at::kDouble), b64 = b.to(at::kDouble);
    auto r64 = at::native_batch_norm(x64, w64, b64, {}, {}, true, mom, eps);
    auto r32 = at::native_batch_norm(x, w, b, {}, {}, true, mom, eps);
    at::Tensor y = at::empty_like(x), sm = at::empty({4}), si = at::empty({4}), none;
    Attrs a;
    a.f("momentum", mom).f("eps", eps);
    ASSERT_EQ(run("offload.batch_norm", {x, w, b, none, none}, {y, sm, si, none, none}, a.m, 2), "");
    expectAsPrecise("batch_norm forward" + tag, y, std::get<0>(r32), std::get<0>(r64));
    auto g64 = at::native_batch_norm_backward(dy.to(at::kDouble), x64, w64, {}, {}, std::get<1>(r64),
                                              std::get<2>(r64), true, eps, {true, true, true});
    auto g32 = at::native_batch_norm_backward(dy, x, w, {}, {}, std::get<1>(r32), std::get<2>(r32),
                                              true, eps, {true, true, true});
    at::Tensor dx = at::empty_like(x), dw = at::empty({4}), db = at::empty({4});
    ASSERT_EQ(run("offload.batch_norm_backward", {dy, x, w, sm, si}, {dx, dw, db}, a.m, 2), "");
    expectAsPrecise("batch_norm backward dx" + tag, dx, std::get<0>(g32), std::get<0>(g64));
    expectAsPrecise("batch_norm backward dweight" + tag, dw, std::get<1>(g32), std::get<1>(g64));

    // layer_norm over the last two dims (16 x 16 = 256 features).
    at::Tensor lw = randn({16, 16}, 15), lb = randn({16, 16}, 16);
    std::vector<int64_t> ns = {16, 16};
    auto l64 = at::native_layer_norm(x64, ns, lw.to(at::kDouble), lb.to(at::kDouble), eps);
    auto l32 = at::native_layer_norm(x, ns, lw, lb, eps);
    at::Tensor ly = at::empty_like(x), lm = at::empty({8, 4, 1, 1}), lr = at::empty({8, 4, 1, 1});
    Attrs la;
    la.i("normalized_ndim", {2}).f("eps", eps);
    ASSERT_EQ(run("offload.layer_norm", {x, lw, lb}, {ly, lm, lr}, la.m, 2), "");
    expectAsPrecise("layer_norm forward" + tag, ly, std::get<0>(l32), std::get<0>(l64));
    auto lg64 = at::native_layer_norm_backward(dy.to(at::kDouble), x64, ns, std::get<1>(l64),
                                               std::get<2>(l64), lw.to(at::kDouble),
                                               lb.to(at::kDouble), {true, true, true});
    auto lg32 = at::native_layer_norm_backward(dy, x, ns, std::get<1>(l32), std::get<2>(l32), lw, lb,
                                               {true, true, true});
    at::Tensor ldx = at::empty_like(x), ldw = at::empty({16, 16}), ldb = at::empty({16, 16});
    ASSERT_EQ(run("offload.layer_norm_backward", {dy, x, lw, lm, lr}, {ldx, ldw, ldb}, la.m, 2), "");
    expectAsPrecise("layer_norm backward dx" + tag, ldx, std::get<0>(lg32), std::get<0>(lg64));
    expectAsPrecise("layer_norm backward dweight" + tag, ldw, std::get<1>(lg32), std::get<1>(lg64));
  }
}

//===----------------------------------------------------------------------===//
// cross entropy (forward and backward) on logits with a large common offset
// and a long class axis, mean over many rows; linear over a long reduction
// axis with an offset input (the bias then cancels most of the output).
//===----------------------------------------------------------------------===//

TEST(Precision, CrossEntropyAndLinear) {
  for (auto [rows, classes, off] : {std::tuple<int64_t, int64_t, double>{4096, 16, 200.0},
                                    {64, 32768, 50.0}}) {
    std::string tag = " [" + std::to_string(rows) + ", " + std::to_string(classes) +
                      "] + " + std::to_string(int(off));
    at::Tensor z = randn({rows, classes}, 17) * 2 + off;
    auto tg = at::detail::createCPUGenerator(18);
    at::Tensor t = at::randint(0, classes, {rows}, tg, at::TensorOptions().dtype(at::kLong));
    at::Tensor z64 = z.to(at::kDouble).requires_grad_(true), z32 = z.clone().requires_grad_(true);
    at::Tensor l64 = at::cross_entropy_loss(z64, t, {}, 1, -100, 0.0);
    at::Tensor l32 = at::cross_entropy_loss(z32, t, {}, 1, -100, 0.0);
    Attrs a;
    a.s("reduction", "mean").i("ignore_index", {-100}).f("label_smoothing", 0.0);
    at::Tensor loss = at::empty({});
    ASSERT_EQ(run("cross_entropy", {z, t}, {loss}, a.m, 2), "");
    // A scalar: relative to its own size.
    double e = std::abs(loss.item<double>() - l64.item<double>()) / std::abs(l64.item<double>());
    double e32 = std::abs(l32.item<double>() - l64.item<double>()) / std::abs(l64.item<double>());
    std::cout << "[precision] cross_entropy" << tag << ": ours " << e << ", ATen fp32 " << e32
              << "\n";
    EXPECT_LE(e, std::max(kFloor, kMultiple * e32)) << tag;
    at::Tensor dloss = at::full({}, 1.0);
    at::Tensor g64 = torch::autograd::grad({l64}, {z64}, {dloss.to(at::kDouble)})[0];
    at::Tensor g32 = torch::autograd::grad({l32}, {z32}, {dloss})[0];
    at::Tensor dz = at::empty_like(z);
    ASSERT_EQ(run("cross_entropy_backward", {dloss, z, t}, {dz}, a.m, 2), "");
    expectAsPrecise("cross_entropy backward" + tag, dz, g32, g64);
  }
  // linear: K = 4096 with x + 10, the bias set to cancel the mean output.
  at::Tensor x = randn({32, 4096}, 19) + 10.0;
  at::Tensor w = randn({64, 4096}, 20) * 0.02;
  at::Tensor b = -(w.sum(1) * 10.0);
  at::Tensor ref = at::linear(x.to(at::kDouble), w.to(at::kDouble), b.to(at::kDouble));
  at::Tensor t32 = at::linear(x, w, b);
  at::Tensor y = at::empty_like(t32);
  ASSERT_EQ(run("offload.linear", {x, w, b}, {y}, AttrMap(), 2), "");
  expectAsPrecise("linear K=4096, x + 10, cancelling bias", y, t32, ref);
}

} // namespace
