//===- AttentionTest.cpp - offload.attention and its backward vs float64 --===//
//
// Part of offload. The fused attention kernels against a float64 reference
// composed from ATen ops (LibTorch 1.13 has no scaled_dot_product_attention):
// q kᵀ · scale, the causal / boolean / additive mask, a safe softmax (a row
// with no key left gives 0), the dropout keep mask of offload.dropout over
// the [N, Hq, L, S] index space, P v; key and value repeated per query head
// for grouped-query attention; gradients by autograd.
//
// Tolerances: f64 kernels within 1e-12 of the reference (relative to the
// tensor's largest magnitude); f32 kernels within max(1e-6, ATen fp32's own
// error) of the float64 reference on the same (f32-rounded) inputs.
//
//===----------------------------------------------------------------------===//

#include "ElementMath.h"
#include "KernelTestUtil.h"

#include <chrono>
#include <cmath>
#include <limits>

using namespace atest;

namespace {

struct Cfg {
  std::string name;
  int64_t n = 2, hq = 4, hkv = 4, l = 5, s = 7, e = 8, ev = 6;
  bool causal = false;
  double scale = 0; // 0: 1/sqrt(E)
  at::Tensor mask;  // bool (keep) or additive float64, broadcastable
  double p = 0;
  int64_t seed = 1234, offset = 0;
  double sc() const { return scale != 0 ? scale : 1.0 / std::sqrt(double(e)); }
};

struct Result {
  at::Tensor out, lse, dq, dk, dv;
};

struct Inputs {
  at::Tensor q, k, v, dout; // float64
};

Inputs makeInputs(const Cfg &c, uint64_t seed) {
  auto g = at::detail::createCPUGenerator(seed);
  auto o = at::TensorOptions().dtype(at::kDouble);
  Inputs in;
  in.q = at::randn({c.n, c.hq, c.l, c.e}, g, o);
  in.k = at::randn({c.n, c.hkv, c.s, c.e}, g, o);
  in.v = at::randn({c.n, c.hkv, c.s, c.ev}, g, o);
  in.dout = at::randn({c.n, c.hq, c.l, c.ev}, g, o);
  return in;
}

at::Tensor maskAs(const Cfg &c, at::ScalarType t) {
  if (!c.mask.defined() || c.mask.scalar_type() == at::kBool)
    return c.mask;
  return c.mask.to(t).contiguous();
}

Attrs attrsOf(const Cfg &c) {
  Attrs a;
  a.f("scale", c.sc())
      .i("is_causal", {c.causal ? 1 : 0})
      .i("has_mask", {c.mask.defined() ? 1 : 0})
      .f("dropout_p", c.p)
      .i("offset", {c.offset});
  return a;
}

at::Tensor seedTensor(const Cfg &c) { return torch::full({}, c.seed, torch::kLong); }

/// offload.attention then offload.attention_backward in dtype `t`. With
/// `tokens`, in the token layout (layout = blhd): q, k, v and dout are
/// passed as [N, L, H, E] (transposed copies) and out, dq, dk, dv come back
/// transposed to the head layout, so that results compare element for
/// element with the head layout's.
Result runOurs(const Cfg &c, const Inputs &in, at::ScalarType t, int threads,
               bool tokens = false) {
  Result r;
  at::Tensor q = in.q.to(t), k = in.k.to(t), v = in.v.to(t), dout = in.dout.to(t);
  auto lay = [&](const at::Tensor &x) { return tokens ? x.transpose(1, 2).contiguous() : x; };
  q = lay(q), k = lay(k), v = lay(v), dout = lay(dout);
  Attrs at = attrsOf(c);
  if (tokens)
    at.s("layout", "blhd");
  r.out = lay(at::empty({c.n, c.hq, c.l, c.ev}, q.options()));
  r.lse = at::empty({c.n, c.hq, c.l}, q.options());
  std::vector<at::Tensor> extras;
  if (c.mask.defined())
    extras.push_back(maskAs(c, t));
  if (c.p > 0)
    extras.push_back(seedTensor(c));
  std::vector<at::Tensor> ins = {q, k, v};
  ins.insert(ins.end(), extras.begin(), extras.end());
  EXPECT_EQ(runKernel("attention", ins, {r.out, r.lse}, at.m, threads), "") << c.name;
  r.dq = at::empty_like(q);
  r.dk = at::empty_like(k);
  r.dv = at::empty_like(v);
  std::vector<at::Tensor> bins = {dout, q, k, v, r.out, r.lse};
  bins.insert(bins.end(), extras.begin(), extras.end());
  EXPECT_EQ(runKernel("attention_backward", bins, {r.dq, r.dk, r.dv}, at.m, threads), "")
      << c.name;
  if (tokens)
    for (at::Tensor *x : {&r.out, &r.dq, &r.dk, &r.dv})
      *x = x->transpose(1, 2).contiguous();
  return r;
}

/// The dropout factor of every probability: offload.dropout applied to ones
/// of shape [N, Hq, L, S] (0 or 1/(1-p) in dtype `t`), or undefined.
at::Tensor keepFactor(const Cfg &c, at::ScalarType t) {
  if (c.p == 0)
    return at::Tensor();
  at::Tensor ones = at::ones({c.n, c.hq, c.l, c.s}, at::TensorOptions().dtype(t));
  at::Tensor y = at::empty_like(ones);
  Attrs a;
  a.f("p", c.p).i("offset", {c.offset});
  EXPECT_EQ(run("dropout", {ones, seedTensor(c)}, {y}, a), "");
  return y;
}

/// The reference in dtype `t` (ATen ops, autograd for the gradients).
Result runRef(const Cfg &c, const Inputs &in, at::ScalarType t) {
  torch::AutoGradMode on(true);
  at::Tensor q = in.q.to(t).detach().requires_grad_(true);
  at::Tensor k = in.k.to(t).detach().requires_grad_(true);
  at::Tensor v = in.v.to(t).detach().requires_grad_(true);
  int64_t rep = c.hq / c.hkv;
  at::Tensor kr = k.repeat_interleave(rep, 1), vr = v.repeat_interleave(rep, 1);
  at::Tensor s = at::matmul(q, kr.transpose(-2, -1)) * c.sc();
  if (c.causal) {
    at::Tensor upper = at::ones({c.l, c.s}, at::TensorOptions().dtype(at::kBool)).triu(1);
    s = s.masked_fill(upper, -std::numeric_limits<double>::infinity());
  }
  if (c.mask.defined()) {
    if (c.mask.scalar_type() == at::kBool)
      s = s.masked_fill(c.mask.logical_not(), -std::numeric_limits<double>::infinity());
    else
      s = s + c.mask.to(t);
  }
  at::Tensor dead = std::get<0>(s.max(-1, true)) == -std::numeric_limits<double>::infinity();
  at::Tensor lse = at::logsumexp(s, -1);
  at::Tensor safe = s.masked_fill(dead, 0.0);
  at::Tensor p = at::softmax(safe, -1).masked_fill(dead, 0.0);
  if (c.p > 0)
    p = p * keepFactor(c, t);
  at::Tensor out = at::matmul(p, vr);
  out.backward(in.dout.to(t));
  return {out.detach(), lse.detach(), q.grad(), k.grad(), v.grad()};
}

/// max|got - ref| / max|ref| over the finite entries of ref; infinite
/// entries must match exactly.
double err(const at::Tensor &got, const at::Tensor &ref, const std::string &what) {
  at::Tensor g = got.to(at::kDouble), r = ref.to(at::kDouble);
  at::Tensor inf = r.isinf();
  EXPECT_TRUE(at::equal(g.masked_select(inf), r.masked_select(inf))) << what;
  at::Tensor fin = inf.logical_not();
  if (fin.sum().item<int64_t>() == 0)
    return 0;
  at::Tensor gf = g.masked_select(fin), rf = r.masked_select(fin);
  EXPECT_FALSE(gf.isnan().any().item<bool>()) << what << ": NaN";
  double scale = rf.abs().max().item<double>();
  return (gf - rf).abs().max().item<double>() / std::max(scale, 1e-300);
}

/// Runs case `c` in f64 and f32 and compares with the references.
void check(const Cfg &c) {
  SCOPED_TRACE(c.name);
  // Inputs rounded to f32 once, so that the f64 reference is exact for them.
  Inputs in = makeInputs(c, 7);
  for (at::Tensor *t : {&in.q, &in.k, &in.v, &in.dout})
    *t = t->to(at::kFloat).to(at::kDouble);
  Result ref = runRef(c, in, at::kDouble);
  Result r32 = runRef(c, in, at::kFloat);
  Result ours64 = runOurs(c, in, at::kDouble, 3);
  Result ours32 = runOurs(c, in, at::kFloat, 3);
  const char *names[] = {"out", "lse", "dq", "dk", "dv"};
  at::Tensor Result::*fields[] = {&Result::out, &Result::lse, &Result::dq, &Result::dk,
                                  &Result::dv};
  for (int f = 0; f < 5; ++f) {
    std::string w = c.name + " " + names[f];
    double e64 = err(ours64.*fields[f], ref.*fields[f], w + " f64");
    EXPECT_LE(e64, 1e-12) << w << " f64";
    double e32 = err(ours32.*fields[f], ref.*fields[f], w + " f32");
    double t32 = err(r32.*fields[f], ref.*fields[f], w + " ATen f32");
    std::cout << "[attention] " << w << ": f64 " << e64 << ", f32 " << e32 << ", ATen f32 "
              << t32 << "\n";
    EXPECT_LE(e32, std::max(1e-6, t32)) << w << " f32 vs ATen fp32 " << t32;
  }
  // One thread gives the same bits.
  Result one = runOurs(c, in, at::kFloat, 1);
  for (int f = 0; f < 5; ++f)
    EXPECT_TRUE(at::equal(one.*fields[f], ours32.*fields[f]))
        << c.name << " " << names[f] << ": thread count changed the result";
}

TEST(Attention, NoMask) {
  Cfg c;
  c.name = "plain";
  check(c);
  c.name = "long rows, several blocks";
  c.n = 1, c.hq = 2, c.hkv = 2, c.l = 150, c.s = 130, c.e = 16, c.ev = 16;
  check(c);
}

TEST(Attention, CausalWithLNotS) {
  Cfg c;
  c.causal = true;
  c.name = "causal L < S";
  c.l = 5, c.s = 9;
  check(c);
  c.name = "causal L > S";
  c.l = 9, c.s = 5;
  check(c);
  c.name = "causal, blocks";
  c.n = 1, c.hq = 2, c.hkv = 1, c.l = 140, c.s = 140;
  check(c);
}

TEST(Attention, BoolMaskBroadcast) {
  auto g = at::detail::createCPUGenerator(3);
  Cfg c;
  c.name = "bool [L, S]";
  c.mask = at::rand({c.l, c.s}, g) < 0.7;
  c.mask.select(1, 0).fill_(true); // no row fully masked here
  check(c);
  c.name = "bool [N, 1, 1, S]";
  c.mask = at::rand({c.n, 1, 1, c.s}, g) < 0.6;
  c.mask.select(3, 1).fill_(true);
  check(c);
  c.name = "bool [N, Hq, L, S] with causal";
  c.causal = true;
  c.mask = at::rand({c.n, c.hq, c.l, c.s}, g) < 0.8;
  c.mask.select(3, 0).fill_(true);
  check(c);
}

TEST(Attention, AdditiveMask) {
  auto g = at::detail::createCPUGenerator(4);
  Cfg c;
  c.name = "additive [N, 1, L, S]";
  c.mask = at::randn({c.n, 1, c.l, c.s}, g, at::TensorOptions().dtype(at::kDouble));
  check(c);
  c.name = "additive with -inf, [L, S]";
  at::Tensor m = at::randn({c.l, c.s}, g, at::TensorOptions().dtype(at::kDouble));
  m.select(1, 3).fill_(-std::numeric_limits<double>::infinity());
  c.mask = m;
  check(c);
}

TEST(Attention, GroupedQuery) {
  Cfg c;
  c.name = "GQA Hq 4 Hkv 2";
  c.hkv = 2;
  check(c);
  c.name = "MQA Hq 4 Hkv 1, causal";
  c.hkv = 1;
  c.causal = true;
  check(c);
  c.name = "GQA Hq 4 Hkv 2, one batch (fewer tasks than threads)";
  c.hkv = 2;
  c.n = 1;
  c.l = 70;
  c.s = 70;
  check(c);
}

TEST(Attention, Scale) {
  Cfg c;
  c.name = "scale 0.9";
  c.scale = 0.9;
  check(c);
  c.name = "scale 3 (sharp rows)";
  c.scale = 3;
  check(c);
}

TEST(Attention, Dropout) {
  Cfg c;
  c.name = "dropout 0.3";
  c.p = 0.3;
  c.offset = 11;
  check(c);
  c.name = "dropout, GQA, causal, bool mask";
  c.hkv = 2;
  c.causal = true;
  auto g = at::detail::createCPUGenerator(5);
  c.mask = at::rand({c.n, 1, 1, c.s}, g) < 0.7;
  c.mask.select(3, 0).fill_(true);
  check(c);
}

TEST(Attention, DropoutMaskIsOffloadDropoutsOverTheProbabilityIndexSpace) {
  // With v the one-hot key index (Ev = S), out[n, h, i, j] = p~[n, h, i, j]:
  // zero exactly where offload.dropout over [N, Hq, L, S] (same seed and
  // offset) drops element ((n Hq + h) L + i) S + j.
  Cfg c;
  c.p = 0.4;
  c.offset = 1000;
  c.ev = c.s;
  c.hkv = c.hq;
  Inputs in = makeInputs(c, 9);
  in.v = at::eye(c.s, at::TensorOptions().dtype(at::kDouble))
             .expand({c.n, c.hkv, c.s, c.s})
             .contiguous();
  for (at::ScalarType t : floatTypes()) {
    Result r = runOurs(c, in, t, 2);
    at::Tensor keep = keepFactor(c, t) != 0;
    EXPECT_TRUE(at::equal(r.out != 0, keep)) << tname(t);
  }
}

TEST(Attention, FullyMaskedRow) {
  Cfg c;
  c.name = "fully masked rows";
  at::Tensor m = at::ones({c.n, 1, c.l, c.s}, at::TensorOptions().dtype(at::kBool));
  m[0][0][2].fill_(false);
  m[1][0][4].fill_(false);
  c.mask = m;
  check(c);
  Inputs in = makeInputs(c, 7);
  for (at::ScalarType t : floatTypes()) {
    Result r = runOurs(c, in, t, 1);
    EXPECT_TRUE(r.out.select(0, 0).select(1, 2).eq(0).all().item<bool>()) << tname(t);
    EXPECT_TRUE(r.lse.select(0, 0).select(1, 2).isneginf().all().item<bool>()) << tname(t);
    EXPECT_TRUE(r.dq.select(0, 1).select(1, 4).eq(0).all().item<bool>()) << tname(t);
  }
  // Every key masked: zero gradients everywhere.
  Cfg all = c;
  all.name = "all masked";
  all.mask = at::zeros({1, 1, 1, 1}, at::TensorOptions().dtype(at::kBool));
  Result r = runOurs(all, in, at::kFloat, 1);
  for (const at::Tensor &t : {r.out, r.dq, r.dk, r.dv})
    EXPECT_TRUE(t.eq(0).all().item<bool>());
  EXPECT_TRUE(r.lse.isneginf().all().item<bool>());
}

TEST(Attention, NoKeysOrNoQueries) {
  // S = 0: every row has no key (out 0, lse -inf, zero gradients); L = 0:
  // nothing to compute, zero key/value gradients.
  for (int64_t s : {0, 5}) {
    Cfg c;
    c.s = s;
    c.l = s == 0 ? 3 : 0;
    Inputs in = makeInputs(c, 2);
    Result r = runOurs(c, in, at::kFloat, 2);
    EXPECT_TRUE(r.out.eq(0).all().item<bool>());
    EXPECT_TRUE(r.lse.isneginf().all().item<bool>());
    for (const at::Tensor &t : {r.dq, r.dk, r.dv})
      EXPECT_TRUE(t.eq(0).all().item<bool>());
  }
}

TEST(Attention, RejectsBadOperands) {
  Cfg c;
  Inputs in = makeInputs(c, 1);
  at::Tensor out = at::empty({c.n, c.hq, c.l, c.ev}, at::kDouble);
  at::Tensor lse = at::empty({c.n, c.hq, c.l}, at::kDouble);
  Attrs a = attrsOf(c);
  // Hq not a multiple of Hkv.
  at::Tensor k3 = at::randn({c.n, 3, c.s, c.e}, at::kDouble);
  at::Tensor v3 = at::randn({c.n, 3, c.s, c.ev}, at::kDouble);
  EXPECT_NE(run("attention", {in.q, k3, v3}, {out, lse}, a).find("multiple"),
            std::string::npos);
  // A mask that does not broadcast.
  Attrs am = a;
  am.i("has_mask", {1});
  at::Tensor bad = at::ones({c.l, c.s + 1}, at::TensorOptions().dtype(at::kBool));
  EXPECT_NE(run("attention", {in.q, in.k, in.v, bad}, {out, lse}, am).find("broadcast"),
            std::string::npos);
  // has_mask without the operand.
  EXPECT_NE(run("attention", {in.q, in.k, in.v}, {out, lse}, am).find("extra operand"),
            std::string::npos);
  // A mask of another float type.
  at::Tensor m32 = at::zeros({c.l, c.s}, at::kFloat);
  EXPECT_NE(run("attention", {in.q, in.k, in.v, m32}, {out, lse}, am).find("mask must be"),
            std::string::npos);
  // Wrong lse shape.
  at::Tensor lseBad = at::empty({c.n, c.hq, c.l + 1}, at::kDouble);
  EXPECT_NE(run("attention", {in.q, in.k, in.v}, {out, lseBad}, a).find("lse"),
            std::string::npos);
}

// The host backend runs real models in CI: a [2, 4, 128, 64] attention's
// forward and backward on one thread, timed (best of 5).
// The token layout (layout = blhd: q, k, v, out and the gradients
// [N, L, H, E]) gives the head layout's results bit for bit: the kernels
// gather a head's rows into the same packed buffers and run the same GEMMs.
// Every feature (masks, causal, grouped heads, dropout, several row blocks,
// a fully masked row, L != S, E != Ev), both dtypes, 1 and 3 threads.
TEST(Attention, TokenLayoutIsBitIdenticalToHeadLayout) {
  std::vector<Cfg> cfgs;
  Cfg c;
  c.name = "plain";
  cfgs.push_back(c);
  c.name = "causal, L != S, several blocks";
  c.n = 2, c.hq = 3, c.hkv = 3, c.l = 150, c.s = 70, c.e = 16, c.ev = 8, c.causal = true;
  cfgs.push_back(c);
  c = Cfg();
  c.name = "grouped query, bool mask with a fully masked row";
  c.hq = 4, c.hkv = 2, c.l = 9, c.s = 11;
  at::Tensor m = at::rand({c.n, 1, c.l, c.s}) < 0.7;
  m[1][0][3].fill_(false);
  c.mask = m;
  cfgs.push_back(c);
  c = Cfg();
  c.name = "multi-query, additive mask, dropout";
  c.hq = 4, c.hkv = 1, c.l = 70, c.s = 66, c.p = 0.25, c.offset = 11;
  c.mask = at::randn({c.n, 1, 1, c.s}, at::kDouble);
  cfgs.push_back(c);
  for (const Cfg &cfg : cfgs) {
    SCOPED_TRACE(cfg.name);
    Inputs in = makeInputs(cfg, 5);
    for (at::ScalarType t : floatTypes())
      for (int threads : {1, 3}) {
        Result head = runOurs(cfg, in, t, threads);
        Result tok = runOurs(cfg, in, t, threads, true);
        const char *names[] = {"out", "lse", "dq", "dk", "dv"};
        at::Tensor Result::*fields[] = {&Result::out, &Result::lse, &Result::dq, &Result::dk,
                                        &Result::dv};
        for (int f = 0; f < 5; ++f)
          EXPECT_TRUE((head.*fields[f]).equal(tok.*fields[f]))
              << names[f] << " " << tname(t) << " threads " << threads
              << ": token layout differs from head layout";
      }
  }
  // Shapes are checked in the layout: a head-layout value among token-layout
  // query and key is refused, and a bad layout name too.
  Cfg b;
  b.hq = 4, b.hkv = 2, b.l = 5, b.s = 7;
  Inputs in = makeInputs(b, 1);
  at::Tensor qt = in.q.transpose(1, 2).contiguous(), kt = in.k.transpose(1, 2).contiguous();
  at::Tensor out = at::empty({b.n, b.l, b.hq, b.ev}, at::kDouble);
  at::Tensor lse = at::empty({b.n, b.hq, b.l}, at::kDouble);
  Attrs a = attrsOf(b);
  a.s("layout", "blhd");
  EXPECT_EQ(run("attention", {qt, kt, in.v.transpose(1, 2).contiguous()}, {out, lse}, a), "");
  EXPECT_NE(run("attention", {qt, kt, in.v}, {out, lse}, a).find("(layout blhd)"),
            std::string::npos);
  a.s("layout", "bshd");
  EXPECT_NE(run("attention", {in.q, in.k, in.v}, {out, lse}, a).find("layout must be"),
            std::string::npos);
}

TEST(Attention, HostKernelTime) {
  Cfg c;
  c.n = 2, c.hq = 4, c.hkv = 4, c.l = 128, c.s = 128, c.e = 64, c.ev = 64;
  Inputs in = makeInputs(c, 3);
  for (bool causal : {false, true}) {
    c.causal = causal;
    double best = 1e9, bestFwd = 1e9;
    for (int rep = 0; rep < 5; ++rep) {
      at::Tensor q = in.q.to(at::kFloat), k = in.k.to(at::kFloat), v = in.v.to(at::kFloat),
                 dout = in.dout.to(at::kFloat);
      at::Tensor out = at::empty({c.n, c.hq, c.l, c.ev}, q.options());
      at::Tensor lse = at::empty({c.n, c.hq, c.l}, q.options());
      at::Tensor dq = at::empty_like(q), dk = at::empty_like(k), dv = at::empty_like(v);
      auto t0 = std::chrono::steady_clock::now();
      ASSERT_EQ(runKernel("attention", {q, k, v}, {out, lse}, attrsOf(c).m, 1), "");
      auto t1 = std::chrono::steady_clock::now();
      ASSERT_EQ(runKernel("attention_backward", {dout, q, k, v, out, lse}, {dq, dk, dv},
                          attrsOf(c).m, 1),
                "");
      auto t2 = std::chrono::steady_clock::now();
      bestFwd = std::min(bestFwd, std::chrono::duration<double, std::milli>(t1 - t0).count());
      best = std::min(best, std::chrono::duration<double, std::milli>(t2 - t0).count());
    }
    std::cout << "[attention] [2,4,128,64] f32 " << (causal ? "causal" : "full")
              << ", 1 thread: forward " << bestFwd << " ms, forward + backward " << best
              << " ms\n";
    // A generous bound (the machine is shared): catches a pathological
    // regression, not a few percent.
    EXPECT_LT(best, 200.0);
  }
}

} // namespace
