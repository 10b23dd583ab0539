//===- LossOptimizerRandomTest.cpp - Losses, optimizers, dropout, ... ----===//
//
// Part of offload. Loss, optimizer, dropout, embedding and softmax kernels
// and the kernel registry. Kernels compared with ATen / LibTorch autograd /
// torch::optim on random inputs (fixed seed). Tolerances: f32 1e-5 relative
// (+1e-6 absolute), f64 1e-12 relative (+1e-13 absolute), unless a test
// states otherwise. Philox is checked against the Random123 known-answer
// vectors.
//
//===----------------------------------------------------------------------===//

#include "KernelTestUtil.h"
#include "KernelSupport.h"

#include <algorithm>
#include <cstring>
#include <set>

using namespace atest;
namespace k = offload::rt::kernels;

namespace {

at::Tensor randn(std::vector<int64_t> s, at::ScalarType t) {
  return torch::randn(s, torch::dtype(t));
}

at::Tensor scalar(double v, at::ScalarType t) {
  return torch::full({}, v, torch::dtype(t));
}

// --- Registry -------------------------------------------------------------------

TEST(Registry, NamesLookupIdempotent) {
  offload::rt::registerAllHostKernels();
  auto names = KernelRegistry::host().names();
  offload::rt::registerAllHostKernels();
  EXPECT_EQ(KernelRegistry::host().names().size(), names.size());
  std::set<std::string> have(names.begin(), names.end());
  EXPECT_EQ(have.size(), names.size()) << "duplicate registrations";
  for (const char *op :
       {"relu", "relu_backward", "hardtanh", "hardtanh_backward", "hardswish",
        "hardswish_backward", "silu", "silu_backward", "gelu", "gelu_backward",
        "sigmoid", "sigmoid_backward", "tanh", "tanh_backward", "exp", "neg",
        "sqrt", "rsqrt", "add", "sub", "mul", "div", "add_scalar", "mul_scalar",
        "masked_fill", "where", "fill", "copy", "reduce_sum", "reduce_mean",
        "broadcast_to", "reshape", "transpose", "cat", "slice",
        "slice_backward", "cross_entropy", "cross_entropy_backward",
        "nll_loss", "nll_loss_backward", "mse_loss", "mse_loss_backward",
        "sgd_update", "adamw_update", "dropout", "dropout_backward",
        "embedding", "embedding_backward", "softmax", "softmax_backward",
        "log_softmax", "log_softmax_backward"}) {
    std::string n = std::string("offload.") + op;
    EXPECT_TRUE(have.count(n)) << n;
    EXPECT_NE(KernelRegistry::host().lookup(n), nullptr) << n;
  }
  EXPECT_EQ(KernelRegistry::host().lookup("offload.no_such_op"), nullptr);
  EXPECT_STREQ(offload::rt::dtypeName(DType::F32), "f32");
  EXPECT_STREQ(offload::rt::dtypeName(DType::I64), "i64");
}

// --- Losses ---------------------------------------------------------------------

int64_t atenReduction(const std::string &r) {
  return r == "mean" ? at::Reduction::Mean : at::Reduction::Sum;
}

TEST(Loss, CrossEntropyAndBackward) {
  torch::manual_seed(11);
  for (auto t : floatTypes())
    for (std::string red : {"mean", "sum"})
      for (double ls : {0.0, 0.1})
        for (bool withIgnore : {false, true}) {
          int64_t n = 13, c = 7;
          at::Tensor logits = randn({n, c}, t) * 3;
          at::Tensor target = torch::randint(0, c, {n}, torch::kLong);
          int64_t ignore = withIgnore ? 2 : -100;
          if (withIgnore) target[0] = 2, target[5] = 2;
          std::string what = "cross_entropy " + tname(t) + " " + red +
                             " ls=" + std::to_string(ls) +
                             (withIgnore ? " ignore" : "");
          at::Tensor lg = logits.clone().requires_grad_(true);
          at::Tensor ref = at::cross_entropy_loss(lg, target, {}, atenReduction(red),
                                                  ignore, ls);
          Attrs attrs;
          attrs.s("reduction", red).i("ignore_index", {ignore}).f("label_smoothing", ls);
          at::Tensor loss = at::empty({}, torch::dtype(t));
          ASSERT_EQ(run("cross_entropy", {logits, target}, {loss}, attrs), "") << what;
          expectNear(loss, ref.detach(), what);

          at::Tensor dloss = scalar(0.7, t);
          at::Tensor dref = torch::autograd::grad({ref}, {lg}, {dloss})[0];
          at::Tensor dl = at::empty_like(logits);
          ASSERT_EQ(run("cross_entropy_backward", {dloss, logits, target}, {dl}, attrs), "")
              << what;
          expectNear(dl, dref, what + " backward");
        }
}

TEST(Loss, NllAndMse) {
  torch::manual_seed(12);
  for (auto t : floatTypes())
    for (std::string red : {"mean", "sum"}) {
      int64_t n = 11, c = 5;
      at::Tensor logp = at::log_softmax(randn({n, c}, t), 1);
      at::Tensor target = torch::randint(0, c, {n}, torch::kLong);
      target[3] = -100;
      Attrs attrs;
      attrs.s("reduction", red).i("ignore_index", {-100});
      at::Tensor lp = logp.clone().requires_grad_(true);
      at::Tensor ref = at::nll_loss(lp, target, {}, atenReduction(red), -100);
      at::Tensor loss = at::empty({}, torch::dtype(t));
      ASSERT_EQ(run("nll_loss", {logp, target}, {loss}, attrs), "");
      expectNear(loss, ref.detach(), "nll_loss " + red);
      at::Tensor dloss = scalar(-1.3, t);
      at::Tensor dref = torch::autograd::grad({ref}, {lp}, {dloss})[0];
      at::Tensor d = at::empty_like(logp);
      ASSERT_EQ(run("nll_loss_backward", {dloss, logp, target}, {d}, attrs), "");
      expectNear(d, dref, "nll_loss_backward " + red);

      at::Tensor x = randn({4, 6, 3}, t), y = randn({4, 6, 3}, t);
      at::Tensor xr = x.clone().requires_grad_(true);
      at::Tensor mref = at::mse_loss(xr, y, atenReduction(red));
      at::Tensor ml = at::empty({}, torch::dtype(t));
      ASSERT_EQ(run("mse_loss", {x, y}, {ml}, Attrs().s("reduction", red)), "");
      expectNear(ml, mref.detach(), "mse_loss " + red);
      at::Tensor mdref = torch::autograd::grad({mref}, {xr}, {dloss})[0];
      at::Tensor md = at::empty_like(x);
      ASSERT_EQ(run("mse_loss_backward", {dloss, x, y}, {md}, Attrs().s("reduction", red)), "");
      expectNear(md, mdref, "mse_loss_backward " + red);
    }
}

TEST(Loss, Errors) {
  at::Tensor logits = torch::randn({4, 3});
  at::Tensor loss = at::empty({});
  at::Tensor target = torch::tensor({0, 1, 2, 3}, torch::kLong); // 3 out of range
  EXPECT_NE(run("cross_entropy", {logits, target}, {loss}), "");
  at::Tensor good = torch::tensor({0, 1, 2, 1}, torch::kLong);
  EXPECT_EQ(run("cross_entropy", {logits, good}, {loss}), "");
  EXPECT_NE(run("cross_entropy", {logits, good.to(at::kInt)}, {loss}), "");
  EXPECT_NE(run("cross_entropy", {logits, good.slice(0, 0, 3)}, {loss}), "");
  EXPECT_NE(run("cross_entropy", {logits, good}, {at::empty({4})}), "");
  EXPECT_NE(run("cross_entropy", {logits, good}, {loss}, Attrs().s("reduction", "none")), "");
  EXPECT_NE(run("nll_loss", {logits.reshape({12}), good}, {loss}), "");
  EXPECT_NE(run("mse_loss", {logits, torch::randn({3, 4})}, {loss}), "");
}

// --- Optimizers -------------------------------------------------------------------

/// f32 optimizer results must match torch::optim to within 2 ulp (relative
/// 2.4e-7) of the larger of the result and the operands it was computed from
/// (`scale`: the previous parameter, gradient and state, elementwise; see
/// expectClose); f64 within 1e-15 relative. With ATen's vectorized (AVX2 or
/// AVX-512, FMA) kernels the results are bit-identical here; its scalar
/// path (ATEN_CPU_CAPABILITY=default) rounds p - lr * d without FMA, which
/// differs by an ulp of p where the update cancels most of p (issue 27).
void expectUlp(const at::Tensor &got, const at::Tensor &ref, const std::string &what,
               const at::Tensor &scale = at::Tensor()) {
  if (ref.scalar_type() == at::kFloat)
    expectClose(got, ref, 2.4e-7, 1e-12, what, scale);
  else
    expectClose(got, ref, 1e-15, 1e-18, what, scale);
}

/// Elementwise max(|a|, |b|, |c|): the operand magnitude of an update.
at::Tensor operandScale(const at::Tensor &a, const at::Tensor &b, const at::Tensor &c) {
  return at::maximum(at::maximum(a.abs(), b.abs()), c.abs());
}

TEST(Optimizer, SgdMatchesTorchOptim) {
  torch::manual_seed(13);
  struct Cfg {
    double lr, mom, damp, wd;
    bool nesterov;
  };
  std::vector<Cfg> cfgs = {{0.1, 0.9, 0.1, 0.01, false},
                           {0.05, 0.9, 0.0, 1e-4, true},
                           {0.2, 0.0, 0.0, 0.0, false},
                           {0.01, 0.5, 0.0, 0.0, false}};
  for (auto t : floatTypes())
    for (auto &c : cfgs) {
      at::Tensor p0 = randn({17, 9}, t);
      at::Tensor tp = p0.clone().requires_grad_(true);
      torch::optim::SGD opt({tp}, torch::optim::SGDOptions(c.lr)
                                      .momentum(c.mom)
                                      .dampening(c.damp)
                                      .weight_decay(c.wd)
                                      .nesterov(c.nesterov));
      at::Tensor p = p0.clone(), buf = at::zeros_like(p0);
      at::Tensor step = torch::zeros({}, torch::kLong);
      Attrs attrs;
      attrs.f("lr", c.lr).f("momentum", c.mom).f("dampening", c.damp)
          .f("weight_decay", c.wd).i("nesterov", {c.nesterov});
      for (int s = 0; s < 3; ++s) {
        at::Tensor g = randn({17, 9}, t);
        tp.mutable_grad() = g.clone();
        opt.step();
        at::Tensor np = at::empty_like(p), nb = at::empty_like(p);
        at::Tensor ns = torch::zeros({}, torch::kLong);
        ASSERT_EQ(run("sgd_update", {p, g, buf, step}, {np, nb, ns}, attrs), "");
        std::string what = "sgd " + tname(t) + " step " + std::to_string(s);
        at::Tensor scale = operandScale(p, g, buf);
        expectUlp(np, tp.detach(), what + " param", scale);
        if (c.mom != 0) {
          auto &st = static_cast<torch::optim::SGDParamState &>(
              *opt.state().at(c10::guts::to_string(tp.unsafeGetTensorImpl())));
          expectUlp(nb, st.momentum_buffer(), what + " buffer", scale);
        }
        EXPECT_EQ(ns.item<int64_t>(), s + 1);
        p = np, buf = nb, step = ns;
      }
    }
}

TEST(Optimizer, AdamWMatchesTorchOptim) {
  torch::manual_seed(14);
  struct Cfg {
    double lr, b1, b2, eps, wd;
  };
  std::vector<Cfg> cfgs = {{1e-3, 0.9, 0.999, 1e-8, 1e-2},
                           {3e-2, 0.8, 0.99, 1e-6, 0.1},
                           {1e-2, 0.9, 0.999, 1e-8, 0.0}};
  for (auto t : floatTypes())
    for (auto &c : cfgs) {
      at::Tensor p0 = randn({33, 7}, t);
      at::Tensor tp = p0.clone().requires_grad_(true);
      torch::optim::AdamW opt({tp}, torch::optim::AdamWOptions(c.lr)
                                        .betas({c.b1, c.b2})
                                        .eps(c.eps)
                                        .weight_decay(c.wd));
      at::Tensor p = p0.clone(), m = at::zeros_like(p0), v = at::zeros_like(p0);
      at::Tensor step = torch::zeros({}, torch::kLong);
      Attrs attrs;
      attrs.f("lr", c.lr).f("beta1", c.b1).f("beta2", c.b2).f("eps", c.eps)
          .f("weight_decay", c.wd);
      for (int s = 0; s < 3; ++s) {
        at::Tensor g = randn({33, 7}, t);
        tp.mutable_grad() = g.clone();
        opt.step();
        at::Tensor np = at::empty_like(p), nm = at::empty_like(p),
                   nv = at::empty_like(p), ns = torch::zeros({}, torch::kLong);
        ASSERT_EQ(run("adamw_update", {p, g, m, v, step}, {np, nm, nv, ns}, attrs), "");
        auto &st = static_cast<torch::optim::AdamWParamState &>(
            *opt.state().at(c10::guts::to_string(tp.unsafeGetTensorImpl())));
        std::string what = "adamw " + tname(t) + " step " + std::to_string(s);
        // p (1 - lr wd) - lr m^/(sqrt(v^) + eps): the update is at most ~lr.
        expectUlp(np, tp.detach(), what + " param",
                  at::maximum(p.abs(), at::full_like(p, c.lr)));
        // The moments carry three steps of their own rounding, each at the
        // operands' magnitude: judged against the tensor's largest operand.
        expectUlp(nm, st.exp_avg(), what + " exp_avg",
                  at::full_like(m, operandScale(m, g, m).max().item<double>()));
        expectUlp(nv, st.exp_avg_sq(), what + " exp_avg_sq",
                  at::full_like(v, operandScale(v, g * g, v).max().item<double>()));
        EXPECT_EQ(ns.item<int64_t>(), st.step());
        p = np, m = nm, v = nv, step = ns;
      }
    }
}

TEST(Optimizer, SgdEqualsItsFormulaBitForBit) {
  // The kernel's vector loop (8 lanes) and its scalar tail must give exactly
  // the formula of the op description, evaluated here with std::fma in the
  // same order; 1003 elements cover both, updated in place and not, with and
  // without weight decay, Nesterov, and on the first step.
  torch::manual_seed(16);
  const int64_t n = 1003;
  struct Cfg {
    double lr, mom, damp, wd;
    bool nesterov;
    int64_t step;
  };
  for (Cfg c : {Cfg{0.1, 0.9, 0.1, 0.01, false, 3}, Cfg{0.05, 0.9, 0.0, 1e-4, true, 1},
                Cfg{0.2, 0.9, 0.0, 0.0, false, 0}, Cfg{0.3, 0.0, 0.0, 0.5, false, 2}})
    for (bool inPlace : {false, true}) {
      at::Tensor p = torch::randn({n}), g = torch::randn({n}), buf = torch::randn({n});
      at::Tensor step = torch::full({}, c.step, torch::kLong);
      Attrs attrs;
      attrs.f("lr", c.lr).f("momentum", c.mom).f("dampening", c.damp)
          .f("weight_decay", c.wd).i("nesterov", {c.nesterov});
      std::vector<float> refP(n), refB(n);
      const float *pp = p.data_ptr<float>(), *gp = g.data_ptr<float>(),
                  *bp = buf.data_ptr<float>();
      for (int64_t i = 0; i < n; ++i) {
        float d = gp[i];
        if (c.wd != 0)
          d = std::fma(pp[i], float(c.wd), d);
        float b = bp[i];
        if (c.mom != 0) {
          b = c.step == 0 ? d : std::fma(d, float(1 - c.damp), bp[i] * float(c.mom));
          d = c.nesterov ? std::fma(b, float(c.mom), d) : b;
        }
        refB[size_t(i)] = b;
        refP[size_t(i)] = std::fma(d, float(-c.lr), pp[i]);
      }
      at::Tensor np = inPlace ? p : at::empty_like(p), nb = inPlace ? buf : at::empty_like(buf);
      at::Tensor ns = torch::zeros({}, torch::kLong);
      ASSERT_EQ(run("sgd_update", {p, g, buf, step}, {np, nb, ns}, attrs), "");
      for (int64_t i = 0; i < n; ++i) {
        ASSERT_EQ(np.data_ptr<float>()[i], refP[size_t(i)]) << "param " << i;
        ASSERT_EQ(nb.data_ptr<float>()[i], refB[size_t(i)]) << "buffer " << i;
      }
    }
}

TEST(Optimizer, AdamWEqualsItsFormulaBitForBit) {
  // As for SGD: vector lanes and tail against the op's formula in scalar
  // code (the kernel's float32 constants, std::fma where it fuses).
  torch::manual_seed(17);
  const int64_t n = 1003;
  const double lr = 1e-2, b1 = 0.9, b2 = 0.999, eps = 1e-8, wd = 1e-2;
  for (int64_t t0 : {0, 5}) {
    at::Tensor p = torch::randn({n}), g = torch::randn({n}), m = torch::randn({n}),
               v = torch::rand({n}), step = torch::full({}, t0, torch::kLong);
    Attrs attrs;
    attrs.f("lr", lr).f("beta1", b1).f("beta2", b2).f("eps", eps).f("weight_decay", wd);
    int64_t t = t0 + 1;
    double bc1 = 1 - std::pow(b1, double(t)), bc2 = 1 - std::pow(b2, double(t));
    float decay = float(1 - lr * wd), a1 = float(1 - b1), a2 = float(1 - b2),
          bc2s = float(std::sqrt(bc2)), negStep = float(-(lr / bc1));
    at::Tensor np = at::empty_like(p), nm = at::empty_like(p), nv = at::empty_like(p),
               ns = torch::zeros({}, torch::kLong);
    ASSERT_EQ(run("adamw_update", {p, g, m, v, step}, {np, nm, nv, ns}, attrs), "");
    for (int64_t i = 0; i < n; ++i) {
      float gi = g.data_ptr<float>()[i];
      float pi = p.data_ptr<float>()[i] * decay;
      float mi = std::fma(gi, a1, m.data_ptr<float>()[i] * float(b1));
      float vi = std::fma(a2 * gi, gi, v.data_ptr<float>()[i] * float(b2));
      float denom = std::sqrt(vi) / bc2s + float(eps);
      ASSERT_EQ(np.data_ptr<float>()[i], pi + (negStep * mi) / denom) << "param " << i;
      ASSERT_EQ(nm.data_ptr<float>()[i], mi) << "exp_avg " << i;
      ASSERT_EQ(nv.data_ptr<float>()[i], vi) << "exp_avg_sq " << i;
    }
  }
}

TEST(Optimizer, AdamWBf16MomentsRoundOnceToNearestEven) {
  // moments=bf16: the kernel reads bf16 moments widened to f32, computes the
  // f32 formula (as AdamWEqualsItsFormulaBitForBit) and stores each new
  // moment rounded by ATen's f32 -> bf16 cast (independent of Float16.h);
  // the parameter's step uses the unrounded moments. In place too.
  torch::manual_seed(23);
  const int64_t n = 1003;
  const double lr = 1e-2, b1 = 0.9, b2 = 0.999, eps = 1e-8, wd = 1e-2;
  at::Tensor p = torch::randn({n}), g = torch::randn({n}),
             m = torch::randn({n}).to(at::kBFloat16), v = torch::rand({n}).to(at::kBFloat16),
             step = torch::full({}, 3, torch::kLong);
  Attrs attrs;
  attrs.f("lr", lr).f("beta1", b1).f("beta2", b2).f("eps", eps).f("weight_decay", wd);
  double bc1 = 1 - std::pow(b1, 4.0), bc2 = 1 - std::pow(b2, 4.0);
  float decay = float(1 - lr * wd), a1 = float(1 - b1), a2 = float(1 - b2),
        bc2s = float(std::sqrt(bc2)), negStep = float(-(lr / bc1));
  at::Tensor mf = m.to(at::kFloat), vf = v.to(at::kFloat);
  at::Tensor refP = at::empty_like(p), refM = at::empty_like(p), refV = at::empty_like(p);
  for (int64_t i = 0; i < n; ++i) {
    float gi = g.data_ptr<float>()[i];
    float pi = p.data_ptr<float>()[i] * decay;
    float mi = std::fma(gi, a1, mf.data_ptr<float>()[i] * float(b1));
    float vi = std::fma(a2 * gi, gi, vf.data_ptr<float>()[i] * float(b2));
    refP.data_ptr<float>()[i] = pi + (negStep * mi) / (std::sqrt(vi) / bc2s + float(eps));
    refM.data_ptr<float>()[i] = mi;
    refV.data_ptr<float>()[i] = vi;
  }
  at::Tensor bitsM = refM.to(at::kBFloat16), bitsV = refV.to(at::kBFloat16);
  auto same = [](const at::Tensor &a, const at::Tensor &b) {
    return a.nbytes() == b.nbytes() &&
           std::memcmp(a.data_ptr(), b.data_ptr(), size_t(a.nbytes())) == 0;
  };
  for (bool inPlace : {false, true}) {
    SCOPED_TRACE(inPlace ? "in place" : "out of place");
    at::Tensor p2 = p.clone(), m2 = m.clone(), v2 = v.clone(), s2 = step.clone();
    at::Tensor np = inPlace ? p2 : at::empty_like(p), nm = inPlace ? m2 : at::empty_like(m),
               nv = inPlace ? v2 : at::empty_like(v),
               ns = inPlace ? s2 : torch::zeros({}, torch::kLong);
    ASSERT_EQ(run("adamw_update", {p2, g, m2, v2, s2}, {np, nm, nv, ns}, attrs), "");
    EXPECT_TRUE(same(np, refP));
    EXPECT_TRUE(same(nm, bitsM));
    EXPECT_TRUE(same(nv, bitsV));
    EXPECT_EQ(ns.item<int64_t>(), 4);
  }
  // bf16 moments need an f32 param (or a bf16 one); an integer param is
  // refused by name.
  at::Tensor pd = p.to(at::kDouble), o1 = at::empty_like(pd), o2 = at::empty_like(m),
             o3 = at::empty_like(m), os = torch::zeros({}, torch::kLong);
  EXPECT_EQ(run("adamw_update", {pd, g.to(at::kDouble), m, v, step}, {o1, o2, o3, os}, attrs),
            "adamw_update: exp_avg is bf16 for a f64 param; the moments must be the param's "
            "dtype, or bf16 for an f32 param");
  at::Tensor pi = p.to(at::kLong), oi = at::empty_like(pi);
  EXPECT_EQ(run("adamw_update", {pi, pi, m, v, step}, {oi, o2, o3, os}, attrs),
            "adamw_update: param must be f32, f64, bf16 or f16, got i64");
}

TEST(Optimizer, Bf16AndF16ParamsRoundOnce) {
  // bf16-true: a bf16/f16 parameter, its gradient and its state are widened
  // to f32, the f32 formula runs (as the ...EqualsItsFormulaBitForBit tests
  // write it), and each stored result is rounded once by ATen's cast
  // (independent of Float16.h). SGD with momentum and weight decay; AdamW
  // with its moments in the parameter's type.
  torch::manual_seed(29);
  const int64_t n = 517;
  auto same = [](const at::Tensor &a, const at::Tensor &b) {
    return a.scalar_type() == b.scalar_type() && a.nbytes() == b.nbytes() &&
           std::memcmp(a.data_ptr(), b.data_ptr(), size_t(a.nbytes())) == 0;
  };
  for (at::ScalarType lowType : {at::kBFloat16, at::kHalf}) {
    SCOPED_TRACE(lowType == at::kHalf ? "f16" : "bf16");
    at::Tensor p = torch::randn({n}).to(lowType), g = torch::randn({n}).to(lowType),
               b = torch::randn({n}).to(lowType), m = torch::randn({n}).to(lowType),
               v = torch::rand({n}).to(lowType), step = torch::full({}, 2, torch::kLong);
    at::Tensor pf = p.to(at::kFloat), gf = g.to(at::kFloat), bf = b.to(at::kFloat),
               mf = m.to(at::kFloat), vf = v.to(at::kFloat);
    // SGD: lr 0.1, momentum 0.9, dampening 0.1, weight decay 0.01, step 2.
    {
      const double lr = 0.1, mom = 0.9, damp = 0.1, wd = 0.01;
      at::Tensor refP = at::empty_like(pf), refB = at::empty_like(pf);
      for (int64_t i = 0; i < n; ++i) {
        float d = std::fma(pf.data_ptr<float>()[i], float(wd), gf.data_ptr<float>()[i]);
        float bi = std::fma(d, float(1 - damp), bf.data_ptr<float>()[i] * float(mom));
        refB.data_ptr<float>()[i] = bi;
        refP.data_ptr<float>()[i] = std::fma(bi, float(-lr), pf.data_ptr<float>()[i]);
      }
      Attrs attrs;
      attrs.f("lr", lr).f("momentum", mom).f("dampening", damp).f("weight_decay", wd);
      at::Tensor np = at::empty_like(p), nb = at::empty_like(p),
                 ns = torch::zeros({}, torch::kLong);
      ASSERT_EQ(run("sgd_update", {p, g, b, step}, {np, nb, ns}, attrs), "");
      EXPECT_TRUE(same(np, refP.to(lowType)));
      EXPECT_TRUE(same(nb, refB.to(lowType)));
      EXPECT_EQ(ns.item<int64_t>(), 3);
    }
    // AdamW: t = 3.
    {
      const double lr = 1e-2, b1 = 0.9, b2 = 0.999, eps = 1e-8, wd = 1e-2;
      double bc1 = 1 - std::pow(b1, 3.0), bc2 = 1 - std::pow(b2, 3.0);
      float decay = float(1 - lr * wd), a1 = float(1 - b1), a2 = float(1 - b2),
            bc2s = float(std::sqrt(bc2)), negStep = float(-(lr / bc1));
      at::Tensor refP = at::empty_like(pf), refM = at::empty_like(pf), refV = at::empty_like(pf);
      for (int64_t i = 0; i < n; ++i) {
        float gi = gf.data_ptr<float>()[i];
        float pi = pf.data_ptr<float>()[i] * decay;
        float mi = std::fma(gi, a1, mf.data_ptr<float>()[i] * float(b1));
        float vi = std::fma(a2 * gi, gi, vf.data_ptr<float>()[i] * float(b2));
        refP.data_ptr<float>()[i] = pi + (negStep * mi) / (std::sqrt(vi) / bc2s + float(eps));
        refM.data_ptr<float>()[i] = mi;
        refV.data_ptr<float>()[i] = vi;
      }
      Attrs attrs;
      attrs.f("lr", lr).f("beta1", b1).f("beta2", b2).f("eps", eps).f("weight_decay", wd);
      // In place, as the memory plan runs it.
      at::Tensor p2 = p.clone(), m2 = m.clone(), v2 = v.clone(), s2 = step.clone();
      ASSERT_EQ(run("adamw_update", {p2, g, m2, v2, s2}, {p2, m2, v2, s2}, attrs), "");
      EXPECT_TRUE(same(p2, refP.to(lowType)));
      EXPECT_TRUE(same(m2, refM.to(lowType)));
      EXPECT_TRUE(same(v2, refV.to(lowType)));
      EXPECT_EQ(s2.item<int64_t>(), 3);
      // Mixed storage is refused by name: f32 moments for a bf16 param, a
      // gradient of another type.
      at::Tensor o1 = at::empty_like(p), o2 = at::empty_like(pf), o3 = at::empty_like(pf),
                 os = torch::zeros({}, torch::kLong);
      EXPECT_NE(run("adamw_update", {p, g, mf, vf, step}, {o1, o2, o3, os}, attrs), "");
      EXPECT_NE(run("adamw_update", {p, gf, m, v, step}, {o1, at::empty_like(m),
                                                           at::empty_like(v), os}, attrs), "");
    }
  }
}

TEST(Optimizer, InPlaceAndErrors) {
  torch::manual_seed(15);
  at::Tensor p = torch::randn({5}), g = torch::randn({5}), m = torch::zeros({5}),
             v = torch::zeros({5}), step = torch::zeros({}, torch::kLong);
  at::Tensor p2 = p.clone(), m2 = m.clone(), v2 = v.clone(), s2 = step.clone();
  Attrs attrs;
  attrs.f("lr", 0.1).f("beta1", 0.9).f("beta2", 0.999).f("eps", 1e-8).f("weight_decay", 0.1);
  at::Tensor np = at::empty_like(p), nm = at::empty_like(p), nv = at::empty_like(p),
             ns = torch::zeros({}, torch::kLong);
  ASSERT_EQ(run("adamw_update", {p, g, m, v, step}, {np, nm, nv, ns}, attrs), "");
  // Outputs aliasing inputs (in-place update) give the same result.
  ASSERT_EQ(run("adamw_update", {p2, g, m2, v2, s2}, {p2, m2, v2, s2}, attrs), "");
  EXPECT_TRUE(at::equal(np, p2));
  EXPECT_TRUE(at::equal(nv, v2));
  EXPECT_EQ(s2.item<int64_t>(), 1);
  EXPECT_NE(run("adamw_update", {p, torch::randn({4}), m, v, step}, {np, nm, nv, ns}, attrs), "");
  EXPECT_NE(run("adamw_update", {p, g, m, v, step.to(at::kFloat)}, {np, nm, nv, ns}, attrs), "");
  EXPECT_NE(run("sgd_update", {p, g, m, step}, {np, nm}, attrs), "");
  EXPECT_NE(run("sgd_update", {p, g, m.to(at::kDouble), step}, {np, nm, ns}, attrs), "");
}

TEST(Optimizer, SkipIfKeepsEveryValueBitForBit) {
  // skip_if (fp16 loss scaling's found_inf): a true flag leaves every result
  // equal to its operand bit for bit (NaN payloads and signed zeros too),
  // out of place and in place, and new_step = step; a false one updates as
  // without the flag.
  torch::manual_seed(21);
  const int64_t n = 37;
  at::Tensor p = torch::randn({n}), g = torch::randn({n}), m = torch::randn({n}),
             v = torch::rand({n});
  uint32_t nanBits = 0x7fc00123u;
  std::memcpy(p.data_ptr<float>() + 3, &nanBits, 4);
  p.data_ptr<float>()[4] = -0.0f;
  at::Tensor step = torch::full({}, 7, torch::kLong);
  at::Tensor yes = torch::ones({}, torch::kBool), no = torch::zeros({}, torch::kBool);
  Attrs adam, sgd;
  adam.f("lr", 0.1).f("beta1", 0.9).f("beta2", 0.999).f("eps", 1e-8).f("weight_decay", 0.1);
  sgd.f("lr", 0.1).f("momentum", 0.9).f("dampening", 0.0).f("weight_decay", 0.1);
  auto same = [](const at::Tensor &a, const at::Tensor &b) {
    return std::memcmp(a.data_ptr(), b.data_ptr(), size_t(a.nbytes())) == 0;
  };
  for (bool inPlace : {false, true}) {
    SCOPED_TRACE(inPlace ? "in place" : "out of place");
    at::Tensor p2 = p.clone(), m2 = m.clone(), v2 = v.clone(), s2 = step.clone();
    at::Tensor np = inPlace ? p2 : torch::full({n}, 5.0f), nm = inPlace ? m2 : torch::full({n}, 5.0f),
               nv = inPlace ? v2 : torch::full({n}, 5.0f),
               ns = inPlace ? s2 : torch::zeros({}, torch::kLong);
    ASSERT_EQ(run("adamw_update", {p2, g, m2, v2, s2, yes}, {np, nm, nv, ns}, adam), "");
    EXPECT_TRUE(same(np, p) && same(nm, m) && same(nv, v));
    EXPECT_EQ(ns.item<int64_t>(), 7);
    at::Tensor nb = inPlace ? m2 : torch::full({n}, 5.0f);
    ASSERT_EQ(run("sgd_update", {p2, g, m2, s2, yes}, {np, nb, ns}, sgd), "");
    EXPECT_TRUE(same(np, p) && same(nb, m));
    EXPECT_EQ(ns.item<int64_t>(), 7);
  }
  // A false flag: the update without the flag, bit for bit.
  at::Tensor a1 = at::empty_like(p), a2 = at::empty_like(p), a3 = at::empty_like(p),
             as = torch::zeros({}, torch::kLong);
  at::Tensor b1 = at::empty_like(p), b2 = at::empty_like(p), b3 = at::empty_like(p),
             bs = torch::zeros({}, torch::kLong);
  ASSERT_EQ(run("adamw_update", {p, g, m, v, step, no}, {a1, a2, a3, as}, adam), "");
  ASSERT_EQ(run("adamw_update", {p, g, m, v, step}, {b1, b2, b3, bs}, adam), "");
  EXPECT_TRUE(same(a1, b1) && same(a2, b2) && same(a3, b3));
  EXPECT_EQ(as.item<int64_t>(), 8);
  EXPECT_FALSE(same(a2, m));
  // The flag must be a one-element i1; the other operands stay required.
  at::Tensor o1 = at::empty_like(p), o2 = at::empty_like(p), o3 = at::empty_like(p),
             os = torch::zeros({}, torch::kLong);
  EXPECT_EQ(run("adamw_update", {p, g, m, v, step, torch::ones({})}, {o1, o2, o3, os}, adam),
            "adamw_update: found_inf must be i1, got f32");
  EXPECT_EQ(run("sgd_update", {p, g, m, step, torch::ones({2}, torch::kBool)}, {o1, o2, os}, sgd),
            "sgd_update: found_inf must hold one element, got 2");
  EXPECT_EQ(run("sgd_update", {p, at::Tensor(), m, step, yes}, {o1, o2, os}, sgd),
            "sgd_update: input 1 is null");
}

// --- Philox and dropout -------------------------------------------------------------

TEST(Random, PhiloxKnownAnswers) {
  // Random123 kat_vectors, "philox4x32 10": counter[4] key[2] -> output[4].
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
    k::philox4x32_10(kat.ctr, kat.key, out);
    for (int i = 0; i < 4; ++i) EXPECT_EQ(out[i], kat.out[i]) << "word " << i;
  }
  // philoxUniform(0, 0) is the first word of the all-zero block, >> 8, / 2^24.
  EXPECT_EQ(k::philoxUniform(0, 0), float(0x6627e8d5u >> 8) / 16777216.0f);
  // Seed split into (lo, hi) key words, counter into (lo, hi, 0, 0).
  uint32_t ctr[4] = {0x243f6a88, 0x85a308d3, 0, 0}, key[2] = {0xa4093822, 0x299f31d0};
  uint32_t out[4];
  k::philox4x32_10(ctr, key, out);
  EXPECT_EQ(k::philoxUniform(0x299f31d0a4093822ull, 0x85a308d3243f6a88ull),
            float(out[0] >> 8) / 16777216.0f);
}

TEST(Random, UniformStatistics) {
  double sum = 0;
  int64_t n = 200000;
  float lo = 1, hi = 0;
  for (int64_t i = 0; i < n; ++i) {
    float u = k::philoxUniform(1234, uint64_t(i));
    sum += u;
    lo = std::min(lo, u);
    hi = std::max(hi, u);
  }
  EXPECT_GE(lo, 0.0f);
  EXPECT_LT(hi, 1.0f);
  // Mean 0.5, sd of the mean sqrt(1/12/n) ~ 6.5e-4: 5 sigma.
  EXPECT_NEAR(sum / double(n), 0.5, 3.3e-3);
}

TEST(Random, DropoutMask) {
  torch::manual_seed(16);
  for (auto t : floatTypes()) {
    at::Tensor x = randn({400, 500}, t) + 5; // no zeros in x
    at::Tensor seed = torch::full({}, int64_t(987654321987), torch::kLong);
    double p = 0.3;
    Attrs attrs;
    attrs.f("p", p).i("offset", {1000});
    at::Tensor y1 = at::empty_like(x), y2 = at::empty_like(x), y3 = at::empty_like(x);
    ASSERT_EQ(run("dropout", {x, seed}, {y1}, attrs, 1), "");
    ASSERT_EQ(run("dropout", {x, seed}, {y2}, attrs, 4), "");
    EXPECT_TRUE(at::equal(y1, y2)) << "same seed/offset, any thread count";
    at::Tensor kept = y1 != 0;
    double rate = kept.to(at::kDouble).mean().item<double>();
    // 200000 Bernoulli(0.7): sd 1e-3; allow 5 sigma.
    EXPECT_NEAR(rate, 1 - p, 5e-3);
    // Kept values scaled by 1/(1-p) (in the tensor's dtype).
    at::Tensor scaled = x * scalar(1.0 / (1 - p), t);
    EXPECT_TRUE(at::equal(y1.masked_select(kept), scaled.masked_select(kept)));
    // The mask is the documented philox_uniform >= p rule.
    auto kacc = kept.reshape(-1);
    int64_t mismatches = 0;
    for (int64_t i = 0; i < 2000; ++i)
      mismatches += (double(k::philoxUniform(987654321987ull, 1000 + uint64_t(i))) >= p) !=
                    kacc[i].item<bool>();
    EXPECT_EQ(mismatches, 0);
    // Different seed or offset: a different mask.
    at::Tensor seed2 = torch::full({}, int64_t(987654321988), torch::kLong);
    ASSERT_EQ(run("dropout", {x, seed2}, {y3}, attrs), "");
    EXPECT_FALSE(at::equal(y3 != 0, kept));
    Attrs shifted;
    shifted.f("p", p).i("offset", {1007});
    ASSERT_EQ(run("dropout", {x, seed}, {y3}, shifted), "");
    EXPECT_FALSE(at::equal(y3 != 0, kept));
    // Offset shift by 7 = same stream shifted by 7 elements.
    at::Tensor m3 = (y3 != 0).reshape(-1);
    EXPECT_TRUE(at::equal(m3.slice(0, 0, 1000), kacc.slice(0, 7, 1007)));
    // dropout_backward regenerates the mask.
    at::Tensor dy = randn({400, 500}, t) + 5, dx = at::empty_like(dy);
    ASSERT_EQ(run("dropout_backward", {dy, seed}, {dx}, attrs, 3), "");
    EXPECT_TRUE(at::equal(dx != 0, kept));
    EXPECT_TRUE(at::equal(dx, at::where(kept, dy * scalar(1.0 / (1 - p), t),
                                        at::zeros_like(dy))));
    // p = 0 identity, p = 1 zeros.
    ASSERT_EQ(run("dropout", {x, seed}, {y3}, Attrs().f("p", 0.0)), "");
    EXPECT_TRUE(at::equal(y3, x));
    ASSERT_EQ(run("dropout", {x, seed}, {y3}, Attrs().f("p", 1.0)), "");
    EXPECT_TRUE(at::equal(y3, at::zeros_like(x)));
  }
  at::Tensor x = torch::randn({4});
  EXPECT_NE(run("dropout", {x, torch::zeros({2}, torch::kLong)}, {at::empty({4})}), "");
  EXPECT_NE(run("dropout", {x, torch::zeros({}, torch::kLong)}, {at::empty({4})},
                Attrs().f("p", 1.5)), "");
  EXPECT_NE(run("dropout", {x, torch::zeros({})}, {at::empty({4})}), "");
}

// --- Embedding --------------------------------------------------------------------

TEST(Embedding, ForwardBackward) {
  torch::manual_seed(17);
  for (auto t : floatTypes()) {
    at::Tensor w = randn({50, 16}, t);
    at::Tensor idx = torch::randint(0, 50, {6, 9}, torch::kLong);
    idx[0][0] = 3, idx[0][1] = 3, idx[1][0] = 3; // repeated rows accumulate
    at::Tensor y = at::empty({6, 9, 16}, torch::dtype(t));
    ASSERT_EQ(run("embedding", {w, idx}, {y}), "");
    EXPECT_TRUE(at::equal(y, at::embedding(w, idx)));
    at::Tensor wr = w.clone().requires_grad_(true);
    at::Tensor out = at::embedding(wr, idx);
    at::Tensor dy = randn({6, 9, 16}, t);
    at::Tensor dref = torch::autograd::grad({out}, {wr}, {dy})[0];
    at::Tensor dw1 = at::empty_like(w), dw4 = at::empty_like(w);
    ASSERT_EQ(run("embedding_backward", {dy, idx}, {dw1}, Attrs(), 1), "");
    ASSERT_EQ(run("embedding_backward", {dy, idx}, {dw4}, Attrs(), 4), "");
    expectNear(dw1, dref, "embedding_backward " + tname(t));
    EXPECT_TRUE(at::equal(dw1, dw4));
    // padding_idx: ATen's embedding_backward leaves that row zero.
    at::Tensor dpad = at::embedding_backward(dy, idx, 50, 3, false, false);
    at::Tensor dwp = at::empty_like(w);
    ASSERT_EQ(run("embedding_backward", {dy, idx}, {dwp}, Attrs().i("padding_idx", {3}), 4), "");
    expectNear(dwp, dpad, "embedding_backward padding_idx " + tname(t));
    EXPECT_TRUE(at::equal(dwp[3], at::zeros_like(dwp[3])));
  }
  at::Tensor w = torch::randn({5, 3});
  EXPECT_NE(run("embedding", {w, torch::tensor({0, 5}, torch::kLong)}, {at::empty({2, 3})}), "");
  EXPECT_NE(run("embedding", {w, torch::tensor({0, 1}, torch::kLong)}, {at::empty({2, 4})}), "");
  EXPECT_NE(run("embedding", {w, torch::tensor({0, 1}, torch::kInt)}, {at::empty({2, 3})}), "");
  EXPECT_NE(run("embedding_backward", {torch::randn({2, 3}), torch::tensor({0, -1}, torch::kLong)},
                {at::empty({5, 3})}),
            "");
}

// --- Softmax ------------------------------------------------------------------------

TEST(Softmax, ForwardBackward) {
  torch::manual_seed(18);
  for (auto t : floatTypes())
    for (int64_t dim : {-1, 0, 1, 2}) {
      at::Tensor x = randn({4, 7, 5}, t) * 3;
      at::Tensor dy = randn({4, 7, 5}, t);
      std::string what = tname(t) + " dim " + std::to_string(dim);
      Attrs attrs;
      attrs.i("dim", {dim});
      at::Tensor y = at::empty_like(x), ly = at::empty_like(x);
      ASSERT_EQ(run("softmax", {x}, {y}, attrs), "");
      ASSERT_EQ(run("log_softmax", {x}, {ly}, attrs), "");
      at::Tensor yr = at::_softmax(x, dim, false), lyr = at::_log_softmax(x, dim, false);
      expectNear(y, yr, "softmax " + what);
      expectNear(ly, lyr, "log_softmax " + what);
      at::Tensor dx = at::empty_like(x), ldx = at::empty_like(x);
      ASSERT_EQ(run("softmax_backward", {dy, yr}, {dx}, attrs), "");
      ASSERT_EQ(run("log_softmax_backward", {dy, lyr}, {ldx}, attrs), "");
      expectNear(dx, at::_softmax_backward_data(dy, yr, dim, t), "softmax_backward " + what);
      expectNear(ldx, at::_log_softmax_backward_data(dy, lyr, dim, t),
                 "log_softmax_backward " + what);
    }
  // Large, threaded: same as one thread.
  at::Tensor x = torch::randn({512, 300});
  at::Tensor y1 = at::empty_like(x), y4 = at::empty_like(x);
  ASSERT_EQ(run("softmax", {x}, {y1}, Attrs().i("dim", {0}), 1), "");
  ASSERT_EQ(run("softmax", {x}, {y4}, Attrs().i("dim", {0}), 4), "");
  EXPECT_TRUE(at::equal(y1, y4));
  EXPECT_NE(run("softmax", {x}, {at::empty({512, 300})}, Attrs().i("dim", {2})), "");
  EXPECT_NE(run("softmax_backward", {x, torch::randn({300, 512})}, {at::empty_like(x)},
                Attrs().i("dim", {1})),
            "");
}

} // namespace
