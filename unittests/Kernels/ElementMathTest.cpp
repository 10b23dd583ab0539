//===- ElementMathTest.cpp - The shared element formulas ------------------===//
//
// Part of offload. lib/Runtime/Kernels/ElementMath.h holds the formulas that
// both the host kernels and the CUDA kernels evaluate. These tests check
// the functors themselves, on the host (where no GPU is needed):
//   * against LibTorch / ATen (forward ops, autograd for backward ops,
//     torch::optim for the optimizer steps, the losses and normalizations)
//     and against independent formulas, in f32 and f64;
//   * that every host kernel built on them returns exactly the functor's
//     value, bit for bit (including the hand-vectorised AVX2 optimizer
//     loops, for which the functor is the scalar reference);
//   * Philox4x32-10 known answers and the dropout rule;
//   * the pooling window geometry against ATen's output sizes and windows.
// Tolerances: f32 1e-5 relative (+1e-6 absolute), f64 1e-12 (+1e-13),
// unless stated.
//
//===----------------------------------------------------------------------===//

#include "ElementMath.h"
#include "KernelTestUtil.h"

#include <cstring>

using namespace atest;
namespace em = offload::rt::em;

namespace {

at::Tensor randn(std::vector<int64_t> s, at::ScalarType t) {
  return torch::randn(s, torch::dtype(t));
}

/// f applied to each element of x (contiguous), as a new tensor.
template <typename F> at::Tensor mapUnary(const at::Tensor &x, F f) {
  at::Tensor y = at::empty_like(x);
  if (x.scalar_type() == at::kFloat) {
    const float *p = x.data_ptr<float>();
    float *q = y.data_ptr<float>();
    for (int64_t i = 0; i < x.numel(); ++i)
      q[i] = f(p[i]);
  } else {
    const double *p = x.data_ptr<double>();
    double *q = y.data_ptr<double>();
    for (int64_t i = 0; i < x.numel(); ++i)
      q[i] = f(p[i]);
  }
  return y;
}

/// f(a[i], b[i]) for each element, as a new tensor.
template <typename F>
at::Tensor mapBinary(const at::Tensor &a, const at::Tensor &b, F f) {
  at::Tensor y = at::empty_like(a);
  if (a.scalar_type() == at::kFloat) {
    const float *p = a.data_ptr<float>(), *r = b.data_ptr<float>();
    float *q = y.data_ptr<float>();
    for (int64_t i = 0; i < a.numel(); ++i)
      q[i] = f(p[i], r[i]);
  } else {
    const double *p = a.data_ptr<double>(), *r = b.data_ptr<double>();
    double *q = y.data_ptr<double>();
    for (int64_t i = 0; i < a.numel(); ++i)
      q[i] = f(p[i], r[i]);
  }
  return y;
}

/// Inputs with the edge values of the piecewise formulas.
at::Tensor activationInput(at::ScalarType t) {
  at::Tensor x = randn({29, 31}, t) * 4;
  double edges[] = {0.0, 3.0, -3.0, 6.0, -6.0, 1.0, -1.0, 1e-8, -1e-8};
  for (size_t i = 0; i < sizeof(edges) / sizeof(edges[0]); ++i)
    x.view(-1)[int64_t(i)] = edges[i];
  return x;
}

/// d(sum(g * f(x)))/dx by autograd.
template <typename Fn>
at::Tensor autogradOf(const at::Tensor &x, const at::Tensor &g, Fn fn) {
  at::Tensor xr = x.clone().requires_grad_(true);
  at::Tensor y = fn(xr);
  y.backward(g);
  return xr.grad();
}

TEST(ElementMath, ActivationsMatchATen) {
  torch::manual_seed(31);
  for (auto t : floatTypes()) {
    at::Tensor x = activationInput(t);
    at::Tensor xp = x.abs() + 1e-3;
    std::string tn = " " + tname(t);
    expectNear(mapUnary(x, em::Relu()), at::relu(x), "relu" + tn);
    expectNear(mapUnary(x, em::Hardtanh{-1.5, 2.0}), at::hardtanh(x, -1.5, 2),
               "hardtanh" + tn);
    expectNear(mapUnary(x, em::Hardswish()), at::hardswish(x), "hardswish" + tn);
    expectNear(mapUnary(x, em::Silu()), at::silu(x), "silu" + tn);
    expectNear(mapUnary(x, em::Gelu()), at::gelu(x, "none"), "gelu" + tn);
    expectNear(mapUnary(x, em::GeluTanh()), at::gelu(x, "tanh"),
               "gelu tanh" + tn);
    expectNear(mapUnary(x, em::Sigmoid()), at::sigmoid(x), "sigmoid" + tn);
    expectNear(mapUnary(x, em::Tanh()), at::tanh(x), "tanh" + tn);
    expectNear(mapUnary(x, em::Exp()), at::exp(x), "exp" + tn);
    expectNear(mapUnary(x, em::Sin()), at::sin(x), "sin" + tn);
    expectNear(mapUnary(x, em::Cos()), at::cos(x), "cos" + tn);
    expectNear(mapUnary(x, em::Neg()), at::neg(x), "neg" + tn);
    expectNear(mapUnary(xp, em::Sqrt()), at::sqrt(xp), "sqrt" + tn);
    expectNear(mapUnary(xp, em::Rsqrt()), at::rsqrt(xp), "rsqrt" + tn);
    expectNear(mapUnary(x, em::AddScalar{2.5}), at::add(x, 2.5),
               "add_scalar" + tn);
    expectNear(mapUnary(x, em::MulScalar{-0.3}), at::mul(x, -0.3),
               "mul_scalar" + tn);
    // NaN propagates through relu and hardtanh, as in ATen.
    at::Tensor n = torch::full({1}, NAN, torch::dtype(t));
    EXPECT_TRUE(std::isnan(mapUnary(n, em::Relu()).item<double>()));
    EXPECT_TRUE(std::isnan(mapUnary(n, em::Hardtanh{0, 6}).item<double>()));
  }
}

TEST(ElementMath, BackwardActivationsMatchAutograd) {
  torch::manual_seed(32);
  for (auto t : floatTypes()) {
    at::Tensor x = activationInput(t);
    at::Tensor g = randn(x.sizes().vec(), t);
    std::string tn = " " + tname(t);
    at::Tensor yRelu = at::relu(x), ySig = at::sigmoid(x), yTanh = at::tanh(x);
    expectNear(mapBinary(g, yRelu, em::ReluBackward()),
               at::threshold_backward(g, yRelu, 0), "relu_backward" + tn);
    expectNear(mapBinary(g, x, em::HardtanhBackward{-1.0, 1.0}),
               at::hardtanh_backward(g, x, -1, 1), "hardtanh_backward" + tn);
    // ATen's own kernels disagree at exactly x == 3 (ElementMath.h): the
    // functor follows the vectorised CPU kernel, at::hardswish_backward.
    expectNear(mapBinary(g, x, em::HardswishBackward()),
               at::hardswish_backward(g, x), "hardswish_backward" + tn);
    expectNear(mapBinary(g, x, em::SiluBackward()),
               autogradOf(x, g, [](const at::Tensor &v) { return at::silu(v); }),
               "silu_backward" + tn);
    expectNear(mapBinary(g, x, em::GeluBackward()),
               autogradOf(x, g,
                          [](const at::Tensor &v) { return at::gelu(v, "none"); }),
               "gelu_backward" + tn);
    // The tanh form cancels in 1 + tanh(inner) for x < -5: in f32 both this
    // formula and ATen's keep only ~1e-6 of absolute accuracy there (ATen
    // rounds to -0 where this gives 1e-6), so f32 is compared with an
    // absolute 5e-6 (f64 with the default tolerance).
    at::Tensor geluTanhRef = autogradOf(
        x, g, [](const at::Tensor &v) { return at::gelu(v, "tanh"); });
    if (t == at::kFloat)
      expectClose(mapBinary(g, x, em::GeluTanhBackward()), geluTanhRef, 1e-5,
                  5e-6, "gelu tanh backward" + tn);
    else
      expectNear(mapBinary(g, x, em::GeluTanhBackward()), geluTanhRef,
                 "gelu tanh backward" + tn);
    expectNear(mapBinary(g, ySig, em::SigmoidBackward()),
               autogradOf(x, g, [](const at::Tensor &v) { return at::sigmoid(v); }),
               "sigmoid_backward" + tn);
    expectNear(mapBinary(g, yTanh, em::TanhBackward()),
               autogradOf(x, g, [](const at::Tensor &v) { return at::tanh(v); }),
               "tanh_backward" + tn);
  }
}

TEST(ElementMath, ConversionsAndBinaryOps) {
  EXPECT_EQ(em::fromDouble<uint8_t>(0.0), 0);
  EXPECT_EQ(em::fromDouble<uint8_t>(-0.5), 1);
  EXPECT_EQ(em::fromDouble<int64_t>(-2.75), -2);
  EXPECT_EQ(em::fromDouble<float>(0.1), 0.1f);
  EXPECT_EQ((em::castElem<uint8_t, float>(-0.0f)), 0);
  EXPECT_EQ((em::castElem<uint8_t, double>(1e-300)), 1);
  EXPECT_EQ((em::castElem<int32_t, double>(-7.9)), -7);
  EXPECT_EQ((em::castElem<float, int64_t>(int64_t(1) << 40)), 1099511627776.0f);
  EXPECT_EQ(em::Add()(2, 3), 5);
  EXPECT_EQ(em::Sub()(int64_t(2), int64_t(5)), -3);
  EXPECT_EQ(em::Mul()(2.5f, 4.0f), 10.0f);
  EXPECT_EQ(em::Div()(1.0, 4.0), 0.25);
}

/// Runs host kernel `op` on x (and s) and requires the functor's values bit
/// for bit.
template <typename F>
void expectKernelIsFunctor(const std::string &op, const at::Tensor &x, F f,
                           const Attrs &attrs = Attrs()) {
  at::Tensor y = at::empty_like(x);
  ASSERT_EQ(run(op, {x}, {y}, attrs, 3), "") << op;
  at::Tensor ref = mapUnary(x, f);
  EXPECT_EQ(std::memcmp(y.data_ptr(), ref.data_ptr(), y.nbytes()), 0)
      << op << " " << tname(x.scalar_type()) << " differs from its functor";
}
template <typename F>
void expectBackwardIsFunctor(const std::string &op, const at::Tensor &g,
                             const at::Tensor &s, F f,
                             const Attrs &attrs = Attrs()) {
  at::Tensor y = at::empty_like(g);
  ASSERT_EQ(run(op, {g, s}, {y}, attrs, 3), "") << op;
  at::Tensor ref = mapBinary(g, s, f);
  EXPECT_EQ(std::memcmp(y.data_ptr(), ref.data_ptr(), y.nbytes()), 0)
      << op << " " << tname(g.scalar_type()) << " differs from its functor";
}

TEST(ElementMath, HostKernelsAreTheFunctors) {
  torch::manual_seed(33);
  for (auto t : floatTypes()) {
    // Large enough for the kernels' parallel chunks.
    at::Tensor x = randn({300, 401}, t) * 4;
    at::Tensor g = randn({300, 401}, t);
    at::Tensor xp = x.abs() + 1e-3;
    expectKernelIsFunctor("relu", x, em::Relu());
    expectKernelIsFunctor("hardtanh", x, em::Hardtanh{-1.5, 2.0},
                          Attrs().f("min_val", -1.5).f("max_val", 2));
    expectKernelIsFunctor("hardswish", x, em::Hardswish());
    expectKernelIsFunctor("silu", x, em::Silu());
    expectKernelIsFunctor("gelu", x, em::Gelu(), Attrs().s("approximate", "none"));
    expectKernelIsFunctor("gelu", x, em::GeluTanh(),
                          Attrs().s("approximate", "tanh"));
    expectKernelIsFunctor("sigmoid", x, em::Sigmoid());
    expectKernelIsFunctor("tanh", x, em::Tanh());
    expectKernelIsFunctor("exp", x, em::Exp());
    expectKernelIsFunctor("sin", x, em::Sin());
    expectKernelIsFunctor("cos", x, em::Cos());
    expectKernelIsFunctor("neg", x, em::Neg());
    expectKernelIsFunctor("sqrt", xp, em::Sqrt());
    expectKernelIsFunctor("rsqrt", xp, em::Rsqrt());
    expectKernelIsFunctor("add_scalar", x, em::AddScalar{0.37},
                          Attrs().f("value", 0.37));
    expectKernelIsFunctor("mul_scalar", x, em::MulScalar{-1.7},
                          Attrs().f("value", -1.7));
    expectBackwardIsFunctor("relu_backward", g, at::relu(x), em::ReluBackward());
    expectBackwardIsFunctor("hardtanh_backward", g, x,
                            em::HardtanhBackward{-1.0, 2.0},
                            Attrs().f("min_val", -1).f("max_val", 2));
    expectBackwardIsFunctor("hardswish_backward", g, x, em::HardswishBackward());
    expectBackwardIsFunctor("silu_backward", g, x, em::SiluBackward());
    expectBackwardIsFunctor("gelu_backward", g, x, em::GeluBackward(),
                            Attrs().s("approximate", "none"));
    expectBackwardIsFunctor("gelu_backward", g, x, em::GeluTanhBackward(),
                            Attrs().s("approximate", "tanh"));
    expectBackwardIsFunctor("sigmoid_backward", g, at::sigmoid(x),
                            em::SigmoidBackward());
    expectBackwardIsFunctor("tanh_backward", g, at::tanh(x), em::TanhBackward());
    for (auto [op, fn] :
         {std::pair<const char *, int>{"add", 0}, {"sub", 1}, {"mul", 2}, {"div", 3}}) {
      at::Tensor c = at::empty_like(x);
      ASSERT_EQ(run(op, {x, g}, {c}, Attrs(), 3), "");
      at::Tensor ref = fn == 0   ? mapBinary(x, g, em::Add())
                       : fn == 1 ? mapBinary(x, g, em::Sub())
                       : fn == 2 ? mapBinary(x, g, em::Mul())
                                 : mapBinary(x, g, em::Div());
      EXPECT_TRUE(at::equal(c, ref)) << op << " " << tname(t);
    }
    // mse_loss_backward: em::MseGrad.
    at::Tensor tg = randn({300, 401}, t), dl = torch::full({}, 0.75, torch::dtype(t));
    at::Tensor dx = at::empty_like(x);
    ASSERT_EQ(run("mse_loss_backward", {dl, x, tg}, {dx}, Attrs(), 3), "");
    if (t == at::kFloat) {
      auto f = em::MseGrad<float>::make(true, x.numel(), 0.75f);
      EXPECT_TRUE(at::equal(dx, mapBinary(x, tg, [&](float a, float b) {
                                  return f(a, b);
                                })));
    } else {
      auto f = em::MseGrad<double>::make(true, x.numel(), 0.75);
      EXPECT_TRUE(at::equal(dx, mapBinary(x, tg, [&](double a, double b) {
                                  return f(a, b);
                                })));
    }
  }
}

//===----------------------------------------------------------------------===//
// Optimizers
//===----------------------------------------------------------------------===//

TEST(ElementMath, SgdStepIsTheFormulaAndTheKernel) {
  // The functor against an independent writing of torch.optim.SGD's
  // single-tensor update (Python-float factors rounded to float, add_ with
  // alpha as fma), bit for bit; then the kernel (AVX2 lanes + scalar tail,
  // n = 1003) against the functor, bit for bit, in place and not.
  torch::manual_seed(34);
  const int64_t n = 1003;
  struct Cfg {
    double lr, mom, damp, wd;
    bool nesterov;
    int64_t step;
  };
  for (Cfg c : {Cfg{0.1, 0.9, 0.1, 0.01, false, 3}, Cfg{0.05, 0.9, 0.0, 1e-4, true, 0},
                Cfg{0.2, 0.0, 0.0, 0.0, false, 5}, Cfg{0.3, 0.5, 0.0, 0.5, false, 0}})
    for (bool inPlace : {false, true}) {
      at::Tensor p = torch::randn({n}), g = torch::randn({n}), b = torch::randn({n});
      em::SgdStep<float> f =
          em::SgdStep<float>::make(c.lr, c.mom, c.damp, c.wd, c.nesterov, c.step == 0);
      std::vector<float> fp(n), fb(n);
      for (int64_t i = 0; i < n; ++i) {
        float pi = p.data_ptr<float>()[i], gi = g.data_ptr<float>()[i],
              bi = b.data_ptr<float>()[i];
        f(pi, gi, bi, fp[size_t(i)], fb[size_t(i)]);
        // Independent formula.
        float d = gi;
        if (c.wd != 0)
          d = std::fma(pi, float(c.wd), d);
        float nb = bi;
        if (c.mom != 0) {
          nb = c.step == 0 ? d : std::fma(d, float(1 - c.damp), bi * float(c.mom));
          d = c.nesterov ? std::fma(nb, float(c.mom), d) : nb;
        }
        ASSERT_EQ(fb[size_t(i)], nb) << "buffer " << i;
        ASSERT_EQ(fp[size_t(i)], std::fma(d, float(-c.lr), pi)) << "param " << i;
      }
      at::Tensor step = torch::full({}, c.step, torch::kLong);
      at::Tensor np = inPlace ? p : at::empty_like(p),
                 nb = inPlace ? b : at::empty_like(b),
                 ns = torch::zeros({}, torch::kLong);
      Attrs attrs;
      attrs.f("lr", c.lr).f("momentum", c.mom).f("dampening", c.damp)
          .f("weight_decay", c.wd).i("nesterov", {c.nesterov});
      ASSERT_EQ(run("sgd_update", {p, g, b, step}, {np, nb, ns}, attrs, 3), "");
      for (int64_t i = 0; i < n; ++i) {
        ASSERT_EQ(np.data_ptr<float>()[i], fp[size_t(i)]) << "kernel param " << i;
        ASSERT_EQ(nb.data_ptr<float>()[i], fb[size_t(i)]) << "kernel buffer " << i;
      }
    }
}

TEST(ElementMath, AdamWStepIsTheFormulaAndTheKernel) {
  torch::manual_seed(35);
  const int64_t n = 1003;
  const double lr = 2e-3, b1 = 0.9, b2 = 0.99, eps = 1e-6, wd = 0.05;
  for (int64_t t0 : {0, 9}) {
    at::Tensor p = torch::randn({n}), g = torch::randn({n}), m = torch::randn({n}),
               v = torch::rand({n});
    int64_t t = t0 + 1;
    em::AdamWStep<float> f = em::AdamWStep<float>::make(lr, b1, b2, eps, wd, t);
    // The factors, independently.
    double bc1 = 1 - std::pow(b1, double(t)), bc2 = 1 - std::pow(b2, double(t));
    EXPECT_EQ(f.decay, float(1 - lr * wd));
    EXPECT_EQ(f.a1, float(1 - b1));
    EXPECT_EQ(f.a2, float(1 - b2));
    EXPECT_EQ(f.bc2Sqrt, float(std::sqrt(bc2)));
    EXPECT_EQ(f.negStep, float(-(lr / bc1)));
    std::vector<float> fp(n), fm(n), fv(n);
    for (int64_t i = 0; i < n; ++i) {
      float pi = p.data_ptr<float>()[i], gi = g.data_ptr<float>()[i],
            mi = m.data_ptr<float>()[i], vi = v.data_ptr<float>()[i];
      f(pi, gi, mi, vi, fp[size_t(i)], fm[size_t(i)], fv[size_t(i)]);
      float mm = std::fma(gi, float(1 - b1), mi * float(b1));
      float vv = std::fma(float(1 - b2) * gi, gi, vi * float(b2));
      float denom = std::sqrt(vv) / float(std::sqrt(bc2)) + float(eps);
      ASSERT_EQ(fm[size_t(i)], mm);
      ASSERT_EQ(fv[size_t(i)], vv);
      ASSERT_EQ(fp[size_t(i)],
                pi * float(1 - lr * wd) + (float(-(lr / bc1)) * mm) / denom);
    }
    at::Tensor np = at::empty_like(p), nm = at::empty_like(p),
               nv = at::empty_like(p), ns = torch::zeros({}, torch::kLong);
    Attrs attrs;
    attrs.f("lr", lr).f("beta1", b1).f("beta2", b2).f("eps", eps).f("weight_decay", wd);
    ASSERT_EQ(run("adamw_update", {p, g, m, v, torch::full({}, t0, torch::kLong)},
                  {np, nm, nv, ns}, attrs, 3),
              "");
    for (int64_t i = 0; i < n; ++i) {
      ASSERT_EQ(np.data_ptr<float>()[i], fp[size_t(i)]) << i;
      ASSERT_EQ(nm.data_ptr<float>()[i], fm[size_t(i)]) << i;
      ASSERT_EQ(nv.data_ptr<float>()[i], fv[size_t(i)]) << i;
    }
  }
}

TEST(ElementMath, OptimizerStepsMatchTorchOptim) {
  // Three steps of the functors, elementwise, against torch::optim within
  // 2 ulp (f32) / 1e-15 (f64) of the operands' magnitude, as the kernel tests
  // allow (ATen's scalar path, ATEN_CPU_CAPABILITY=default, has no FMA).
  torch::manual_seed(36);
  for (auto t : floatTypes()) {
    double rtol = t == at::kFloat ? 2.4e-7 : 1e-15;
    at::Tensor p0 = randn({13, 7}, t);
    at::Tensor tp = p0.clone().requires_grad_(true), ta = p0.clone().requires_grad_(true);
    torch::optim::SGD sgd({tp}, torch::optim::SGDOptions(0.1).momentum(0.9).weight_decay(0.01));
    torch::optim::AdamW adamw({ta}, torch::optim::AdamWOptions(1e-2).weight_decay(0.1));
    at::Tensor ps = p0.clone(), buf = at::zeros_like(p0);
    at::Tensor pa = p0.clone(), m = at::zeros_like(p0), v = at::zeros_like(p0);
    for (int64_t s = 0; s < 3; ++s) {
      at::Tensor g = randn({13, 7}, t);
      // The operands' magnitudes before this step (expectClose: an update that
      // cancels most of p differs by ulps of p with and without FMA).
      at::Tensor scaleS = at::maximum(at::maximum(ps.abs(), g.abs()), buf.abs());
      at::Tensor scaleA = at::maximum(pa.abs(), at::full_like(pa, 1e-2));
      tp.mutable_grad() = g.clone();
      ta.mutable_grad() = g.clone();
      sgd.step();
      adamw.step();
      auto apply = [&](auto tag) {
        using T = decltype(tag);
        auto fs = em::SgdStep<T>::make(0.1, 0.9, 0.0, 0.01, false, s == 0);
        auto fa = em::AdamWStep<T>::make(1e-2, 0.9, 0.999, 1e-8, 0.1, s + 1);
        T *pp = ps.data_ptr<T>(), *bp = buf.data_ptr<T>(), *qa = pa.data_ptr<T>(),
          *mp = m.data_ptr<T>(), *vp = v.data_ptr<T>();
        const T *gp = g.data_ptr<T>();
        for (int64_t i = 0; i < g.numel(); ++i) {
          fs(pp[i], gp[i], bp[i], pp[i], bp[i]);
          fa(qa[i], gp[i], mp[i], vp[i], qa[i], mp[i], vp[i]);
        }
      };
      if (t == at::kFloat)
        apply(float());
      else
        apply(double());
      expectClose(ps, tp.detach(), rtol, 1e-12, "sgd " + tname(t), scaleS);
      expectClose(pa, ta.detach(), rtol, 1e-12, "adamw " + tname(t), scaleA);
    }
  }
}

//===----------------------------------------------------------------------===//
// Losses
//===----------------------------------------------------------------------===//

TEST(ElementMath, CrossEntropyFormulasMatchATen) {
  // Row sums computed here in double; the functors combine them into the
  // loss and the gradient, compared with ATen's cross_entropy (label
  // smoothing, ignore_index, both reductions) and its autograd.
  torch::manual_seed(37);
  for (auto t : floatTypes())
    for (double ls : {0.0, 0.2})
      for (bool mean : {true, false}) {
        const int64_t n = 11, c = 7, ignore = 3;
        at::Tensor x = randn({n, c}, t) * 2;
        at::Tensor target = torch::randint(0, c, {n}, torch::kLong);
        target[2] = ignore;
        target[5] = ignore;
        at::Tensor xd = x.to(at::kDouble);
        double nll = 0, sm = 0;
        int64_t count = 0;
        std::vector<double> lse(n);
        for (int64_t i = 0; i < n; ++i) {
          lse[size_t(i)] = at::logsumexp(xd[i], 0).item<double>();
          int64_t ti = target[i].item<int64_t>();
          if (ti == ignore)
            continue;
          ++count;
          nll += lse[size_t(i)] - xd[i][ti].item<double>();
          for (int64_t k = 0; k < c; ++k)
            sm += lse[size_t(i)] - xd[i][k].item<double>();
        }
        double loss = em::CrossEntropyLoss{ls, c, mean}(nll, sm, count);
        at::Tensor xr = x.clone().requires_grad_(true);
        auto opts = torch::nn::functional::CrossEntropyFuncOptions()
                        .ignore_index(ignore)
                        .label_smoothing(ls);
        if (mean)
          opts.reduction(torch::kMean);
        else
          opts.reduction(torch::kSum);
        at::Tensor ref = torch::nn::functional::cross_entropy(xr, target, opts);
        std::string what = "cross_entropy " + tname(t) + " ls " +
                           std::to_string(ls) + (mean ? " mean" : " sum");
        expectNear(torch::full({}, loss, torch::dtype(t)), ref.detach(), what);
        ref.backward(torch::full({}, 1.5, torch::dtype(t)));
        em::CrossEntropyGrad grad = em::CrossEntropyGrad::make(1.5, ls, c, mean, count);
        at::Tensor gx = at::zeros_like(x);
        for (int64_t i = 0; i < n; ++i) {
          int64_t ti = target[i].item<int64_t>();
          if (ti == ignore)
            continue;
          for (int64_t k = 0; k < c; ++k)
            gx[i][k] = grad(xd[i][k].item<double>(), lse[size_t(i)], k == ti);
        }
        expectNear(gx, xr.grad(), what + " gradient");
      }
}

TEST(ElementMath, NllAndMseFormulasMatchAutograd) {
  torch::manual_seed(38);
  for (auto t : floatTypes())
    for (bool mean : {true, false}) {
      at::Tensor lp = randn({9, 5}, t).log_softmax(1).detach().requires_grad_(true);
      at::Tensor target = torch::randint(0, 5, {9}, torch::kLong);
      target[1] = -100;
      auto nllOpts = torch::nn::functional::NLLLossFuncOptions();
      auto mseOpts = torch::nn::functional::MSELossFuncOptions();
      if (mean) {
        nllOpts.reduction(torch::kMean);
        mseOpts.reduction(torch::kMean);
      } else {
        nllOpts.reduction(torch::kSum);
        mseOpts.reduction(torch::kSum);
      }
      at::Tensor l = torch::nn::functional::nll_loss(lp, target, nllOpts);
      l.backward(torch::full({}, 2.0, torch::dtype(t)));
      double v = t == at::kFloat ? double(em::nllGradValue<float>(2.0, mean, 8))
                                 : em::nllGradValue<double>(2.0, mean, 8);
      EXPECT_NEAR(lp.grad()[0][target[0].item<int64_t>()].item<double>(), v,
                  1e-6 * std::fabs(v));
      at::Tensor x = randn({23}, t).requires_grad_(true), y = randn({23}, t);
      at::Tensor ml = torch::nn::functional::mse_loss(x, y, mseOpts);
      double s = 0;
      for (int64_t i = 0; i < 23; ++i)
        s += t == at::kFloat ? em::mseTerm(x[i].item<float>(), y[i].item<float>())
                             : em::mseTerm(x[i].item<double>(), y[i].item<double>());
      if (mean)
        s /= 23;
      expectNear(torch::full({}, s, torch::dtype(t)), ml.detach(), "mse " + tname(t));
      ml.backward(torch::full({}, 0.5, torch::dtype(t)));
      at::Tensor gx;
      if (t == at::kFloat) {
        auto f = em::MseGrad<float>::make(mean, 23, 0.5f);
        gx = mapBinary(x.detach(), y, [&](float a, float b) { return f(a, b); });
      } else {
        auto f = em::MseGrad<double>::make(mean, 23, 0.5);
        gx = mapBinary(x.detach(), y, [&](double a, double b) { return f(a, b); });
      }
      expectNear(gx, x.grad(), "mse gradient " + tname(t));
    }
}

//===----------------------------------------------------------------------===//
// Philox and dropout
//===----------------------------------------------------------------------===//

TEST(ElementMath, PhiloxKnownAnswersAndDropoutRule) {
  // Random123 kat_vectors, "philox4x32 10".
  struct Kat {
    uint32_t ctr[4], key[2], out[4];
  };
  const Kat kats[] = {
      {{0, 0, 0, 0}, {0, 0}, {0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}},
      {{0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff},
       {0xffffffff, 0xffffffff},
       {0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}},
      {{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344},
       {0xa4093822, 0x299f31d0},
       {0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}}};
  for (const Kat &kat : kats) {
    uint32_t out[4];
    em::philox4x32_10(kat.ctr, kat.key, out);
    for (int i = 0; i < 4; ++i)
      EXPECT_EQ(out[i], kat.out[i]) << "word " << i;
  }
  EXPECT_EQ(em::philoxUniform(0, 0), float(0x6627e8d5u >> 8) / 16777216.0f);
  // The dropout rule: kept iff u >= p, scaled by 1/(1-p) in T; the kernel
  // is this functor bit for bit.
  for (double p : {0.1, 0.5, 0.9}) {
    em::Dropout<float> f = em::Dropout<float>::make(p, 77, 1000);
    EXPECT_EQ(f.scale, float(1.0 / (1.0 - p)));
    int kept = 0;
    for (int64_t i = 0; i < 20000; ++i) {
      bool k = double(em::philoxUniform(77, 1000 + uint64_t(i))) >= p;
      EXPECT_EQ(f.keep(i), k);
      EXPECT_EQ(f(2.0f, i), k ? 2.0f * f.scale : 0.0f);
      kept += k;
    }
    EXPECT_NEAR(double(kept) / 20000, 1 - p, 0.02);
    at::Tensor x = torch::randn({5000});
    at::Tensor y = at::empty_like(x);
    ASSERT_EQ(run("dropout", {x, torch::full({}, 77, torch::kLong)}, {y},
                  Attrs().f("p", p).i("offset", {1000}), 3),
              "");
    for (int64_t i = 0; i < 5000; ++i)
      ASSERT_EQ(y.data_ptr<float>()[i], f(x.data_ptr<float>()[i], i)) << i;
  }
  EXPECT_FALSE(em::Dropout<double>::make(1.0, 1, 0).keep(0));
  EXPECT_EQ(em::Dropout<double>::make(1.0, 1, 0).scale, 0.0);
}

//===----------------------------------------------------------------------===//
// Normalization
//===----------------------------------------------------------------------===//

TEST(ElementMath, BatchNormFormulasMatchATen) {
  torch::manual_seed(39);
  for (auto t : floatTypes()) {
    const int64_t n = 4, c = 3, s = 10, cnt = n * s;
    at::Tensor x = randn({n, c, s}, t) * 2 + 1, w = randn({c}, t), b = randn({c}, t);
    at::Tensor rm = randn({c}, t), rv = torch::rand({c}, torch::dtype(t)) + 0.5;
    at::Tensor dy = randn({n, c, s}, t);
    at::Tensor rmRef = rm.clone(), rvRef = rv.clone();
    at::Tensor xr = x.clone().requires_grad_(true), wr = w.clone().requires_grad_(true),
               br = b.clone().requires_grad_(true);
    at::Tensor yRef = at::batch_norm(xr, wr, br, rmRef, rvRef, true, 0.1, 1e-5, false);
    yRef.backward(dy);
    at::Tensor xd = x.to(at::kDouble), dyd = dy.to(at::kDouble);
    at::Tensor y = at::empty_like(x), dx = at::empty_like(x);
    at::Tensor nrm = at::empty_like(rm), nrv = at::empty_like(rv), dw = at::empty_like(w),
               db = at::empty_like(b);
    for (int64_t ch = 0; ch < c; ++ch) {
      at::Tensor xc = xd.select(1, ch);
      double mean = xc.mean().item<double>();
      double sq = (xc - mean).pow(2).sum().item<double>();
      double invstd = em::bnInvStd(sq, cnt, 1e-5);
      nrm[ch] = em::bnRunningMean(rm[ch].item<double>(), mean, 0.1);
      nrv[ch] = em::bnRunningVar(rv[ch].item<double>(), sq, cnt, 0.1);
      em::BnAffine af = em::BnAffine::make(mean, invstd, w[ch].item<double>(),
                                           b[ch].item<double>());
      y.select(1, ch).copy_((xc - af.mean) * af.alpha + af.beta);
      at::Tensor gc = dyd.select(1, ch);
      double sum = gc.sum().item<double>();
      double dot = (gc * (xc - mean)).sum().item<double>();
      dw[ch] = dot * invstd;
      db[ch] = sum;
      em::BnBackward bw = em::BnBackward::make(sum, dot, mean, invstd,
                                               w[ch].item<double>(), double(cnt));
      dx.select(1, ch).copy_(gc * bw.s + xc * bw.t + bw.u);
    }
    std::string tn = " " + tname(t);
    expectNear(y, yRef.detach(), "batch_norm y" + tn);
    expectNear(nrm, rmRef, "running_mean" + tn);
    expectNear(nrv, rvRef, "running_var" + tn);
    expectNear(dx, xr.grad(), "batch_norm dx" + tn);
    expectNear(dw, wr.grad(), "batch_norm dweight" + tn);
    expectNear(db, br.grad(), "batch_norm dbias" + tn);
  }
}

TEST(ElementMath, LayerNormFormulasMatchATen) {
  torch::manual_seed(40);
  for (auto t : floatTypes()) {
    const int64_t m = 5, d = 12;
    at::Tensor x = randn({m, d}, t) * 3, w = randn({d}, t), b = randn({d}, t);
    at::Tensor dy = randn({m, d}, t);
    at::Tensor xr = x.clone().requires_grad_(true);
    at::Tensor yRef = at::layer_norm(xr, {d}, w, b, 1e-5);
    yRef.backward(dy);
    at::Tensor xd = x.to(at::kDouble), dyd = dy.to(at::kDouble), wd = w.to(at::kDouble);
    at::Tensor y = at::empty({m, d}, torch::kDouble), dx = at::empty({m, d}, torch::kDouble);
    for (int64_t r = 0; r < m; ++r) {
      at::Tensor xrw = xd[r];
      double mean = xrw.mean().item<double>();
      double sq = (xrw - mean).pow(2).sum().item<double>();
      double rstd = em::lnRstd(sq, d, 1e-5);
      for (int64_t j = 0; j < d; ++j)
        y[r][j] = em::lnNormalize(xrw[j].item<double>(), mean, rstd) *
                      wd[j].item<double>() +
                  b[j].item<double>();
      at::Tensor gw = dyd[r] * wd;
      em::LnBackward bw = em::LnBackward::make((gw * xrw).sum().item<double>(),
                                               gw.sum().item<double>(), mean, rstd, d);
      for (int64_t j = 0; j < d; ++j)
        dx[r][j] = em::lnBackwardApply(rstd, dyd[r][j].item<double>(),
                                       wd[j].item<double>(), bw.b,
                                       xrw[j].item<double>(), bw.c);
    }
    std::string tn = " " + tname(t);
    expectNear(y.to(t), yRef.detach(), "layer_norm y" + tn);
    expectNear(dx.to(t), xr.grad(), "layer_norm dx" + tn);
  }
}

//===----------------------------------------------------------------------===//
// Pooling geometry
//===----------------------------------------------------------------------===//

TEST(ElementMath, PoolingWindowsMatchATen) {
  // Output sizes (floor and ceil mode), average-pool divisors (with and
  // without padding counted) and adaptive windows, against ATen on inputs
  // whose pooled values reveal the window.
  for (int64_t h : {7, 8, 10, 13})
    for (int64_t k : {2, 3})
      for (int64_t s : {1, 2, 3})
        for (int64_t p : {int64_t(0), k / 2})
          for (bool ceil : {false, true})
            for (bool countPad : {false, true}) {
              at::Tensor x = torch::ones({1, 1, h, h}, torch::kDouble);
              at::Tensor ref = at::avg_pool2d(x, {k, k}, {s, s}, {p, p}, ceil, countPad);
              em::PoolGeom g;
              g.planes = 1;
              g.h = g.w = h;
              g.kh = g.kw = k;
              g.sh = g.sw = s;
              g.ph = g.pw = p;
              g.ceil = ceil;
              g.countPad = countPad;
              g.oh = em::poolOutSize(h, k, p, s, 1, ceil);
              g.ow = g.oh;
              ASSERT_EQ(ref.size(2), g.oh) << h << " " << k << " " << s << " " << p;
              for (int64_t oh = 0; oh < g.oh; ++oh)
                for (int64_t ow = 0; ow < g.ow; ++ow) {
                  int64_t h0, h1, w0, w1, div;
                  em::avgPoolWindow(g, oh, ow, h0, h1, w0, w1, div);
                  double v = div > 0 ? double((h1 - h0) * (w1 - w0)) / double(div) : 0;
                  ASSERT_DOUBLE_EQ(ref[0][0][oh][ow].item<double>(), v)
                      << "window " << oh << "," << ow;
                }
            }
  for (int64_t in : {5, 7, 8, 13})
    for (int64_t out : {1, 2, 3, 4, 5}) {
      // Adaptive pooling of 0, 1, 2, ...: the window's mean is (lo+hi-1)/2.
      at::Tensor x = torch::arange(in, torch::kDouble).reshape({1, 1, 1, in});
      at::Tensor ref = at::adaptive_avg_pool2d(x, {1, out});
      for (int64_t o = 0; o < out; ++o) {
        int64_t lo = em::adaptiveStart(o, out, in), hi = em::adaptiveEnd(o, out, in);
        ASSERT_DOUBLE_EQ(ref[0][0][0][o].item<double>(), double(lo + hi - 1) / 2)
            << in << " -> " << out << " window " << o;
      }
    }
}

} // namespace
