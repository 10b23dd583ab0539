//===- ElementwiseShapeTest.cpp - Elementwise, reduction, shape kernels ---===//
//
// Part of offload. Each kernel runs on random inputs (fixed seed) and is
// compared with the ATen function it implements. Tolerances: f32 1e-5
// relative (+1e-6 absolute), f64 1e-12 relative (+1e-13 absolute), unless a
// test states otherwise; data-movement ops must be exact.
//
//===----------------------------------------------------------------------===//

#include "KernelTestUtil.h"

using namespace atest;

namespace {

at::Tensor randn(std::vector<int64_t> s, at::ScalarType t) {
  return torch::randn(s, torch::dtype(t));
}

TEST(Elementwise, UnaryActivations) {
  torch::manual_seed(1);
  for (auto t : floatTypes()) {
    at::Tensor x = randn({37, 53}, t) * 4;
    x.view(-1)[0] = 0; // edge values
    x.view(-1)[1] = 3;
    x.view(-1)[2] = -3;
    x.view(-1)[3] = 6;
    struct Case {
      const char *op;
      Attrs attrs;
      at::Tensor ref;
    };
    std::vector<Case> cases = {
        {"relu", Attrs(), at::relu(x)},
        {"hardtanh", Attrs().f("min_val", 0).f("max_val", 6), at::hardtanh(x, 0, 6)},
        {"hardtanh", Attrs().f("min_val", -1.5).f("max_val", 2), at::hardtanh(x, -1.5, 2)},
        {"hardswish", Attrs(), at::hardswish(x)},
        {"silu", Attrs(), at::silu(x)},
        {"gelu", Attrs().s("approximate", "none"), at::gelu(x, "none")},
        {"gelu", Attrs().s("approximate", "tanh"), at::gelu(x, "tanh")},
        {"sigmoid", Attrs(), at::sigmoid(x)},
        {"tanh", Attrs(), at::tanh(x)},
        {"exp", Attrs(), at::exp(x)},
        {"neg", Attrs(), at::neg(x)},
        {"sqrt", Attrs(), at::sqrt(x)}, // NaN for negatives, as ATen
        {"rsqrt", Attrs(), at::rsqrt(x)},
        {"add_scalar", Attrs().f("value", 2.5), at::add(x, 2.5)},
        {"mul_scalar", Attrs().f("value", -0.3), at::mul(x, -0.3)},
    };
    for (auto &c : cases) {
      at::Tensor y = at::empty_like(x);
      ASSERT_EQ(run(c.op, {x}, {y}, c.attrs), "") << c.op;
      expectNear(y, c.ref, std::string(c.op) + " " + tname(t));
    }
  }
}

TEST(Elementwise, BackwardActivations) {
  torch::manual_seed(2);
  for (auto t : floatTypes()) {
    at::Tensor x = randn({41, 29}, t) * 4;
    x.view(-1)[0] = 3;
    x.view(-1)[1] = -3;
    x.view(-1)[2] = 0;
    at::Tensor dy = randn({41, 29}, t);
    at::Tensor yRelu = at::relu(x), ySig = at::sigmoid(x), yTanh = at::tanh(x);
    struct Case {
      const char *op;
      at::Tensor saved;
      Attrs attrs;
      at::Tensor ref;
    };
    std::vector<Case> cases = {
        {"relu_backward", yRelu, Attrs(), at::threshold_backward(dy, yRelu, 0)},
        {"hardtanh_backward", x, Attrs().f("min_val", -1).f("max_val", 1),
         at::hardtanh_backward(dy, x, -1, 1)},
        {"hardtanh_backward", x, Attrs().f("min_val", 0).f("max_val", 6),
         at::hardtanh_backward(dy, x, 0, 6)},
        {"hardswish_backward", x, Attrs(), at::hardswish_backward(dy, x)},
        {"silu_backward", x, Attrs(), at::silu_backward(dy, x)},
        {"gelu_backward", x, Attrs().s("approximate", "none"),
         at::gelu_backward(dy, x, "none")},
        {"gelu_backward", x, Attrs().s("approximate", "tanh"),
         at::gelu_backward(dy, x, "tanh")},
        {"sigmoid_backward", ySig, Attrs(), at::sigmoid_backward(dy, ySig)},
        {"tanh_backward", yTanh, Attrs(), at::tanh_backward(dy, yTanh)},
    };
    for (auto &c : cases) {
      at::Tensor dx = at::empty_like(x);
      ASSERT_EQ(run(c.op, {dy, c.saved}, {dx}, c.attrs), "") << c.op;
      std::string what = std::string(c.op) + " " + tname(t);
      if (t == at::kFloat && std::string(c.op) == "gelu_backward")
        // For x < -5, 1 + tanh(inner) cancels in f32: ATen's vectorized path
        // returns 0 where the exact value is ~1e-6, so allow 1e-5 absolute.
        expectClose(dx, c.ref, 1e-5, 1e-5, what);
      else
        expectNear(dx, c.ref, what);
    }
  }
}

TEST(Elementwise, BinaryBroadcast) {
  torch::manual_seed(3);
  struct Shapes {
    std::vector<int64_t> a, b;
  };
  std::vector<Shapes> shapes = {
      {{4, 3, 5}, {4, 3, 5}}, {{4, 1, 5}, {3, 1}}, {{}, {2, 3}},
      {{6, 1}, {1, 7}},       {{5}, {2, 3, 5}},    {{2, 1, 3, 1}, {4, 1, 6}}};
  for (auto t : floatTypes())
    for (auto &s : shapes) {
      at::Tensor a = randn(s.a, t), b = randn(s.b, t) + 3;
      at::Tensor refs[4] = {a + b, a - b, a * b, a / b};
      const char *ops[4] = {"add", "sub", "mul", "div"};
      for (int k = 0; k < 4; ++k) {
        at::Tensor c = at::empty(refs[k].sizes(), torch::dtype(t));
        ASSERT_EQ(run(ops[k], {a, b}, {c}), "") << ops[k];
        // Exact: one IEEE operation per element.
        expectClose(c, refs[k], 0, 0, std::string(ops[k]) + " " + tname(t));
      }
    }
  // Integers.
  at::Tensor ia = torch::randint(-50, 50, {3, 4}, torch::kLong);
  at::Tensor ib = torch::randint(-50, 50, {4}, torch::kLong);
  at::Tensor ic = at::empty({3, 4}, torch::kLong);
  ASSERT_EQ(run("mul", {ia, ib}, {ic}), "");
  EXPECT_TRUE(at::equal(ic, ia * ib));
  // Many elements with several threads: same as one thread and as ATen.
  at::Tensor a = randn({300, 1, 400}, at::kFloat), b = randn({7, 1}, at::kFloat);
  at::Tensor c1 = at::empty({300, 7, 400}), c4 = at::empty({300, 7, 400});
  ASSERT_EQ(run("add", {a, b}, {c1}, Attrs(), 1), "");
  ASSERT_EQ(run("add", {a, b}, {c4}, Attrs(), 4), "");
  EXPECT_TRUE(at::equal(c1, c4));
  expectClose(c4, a + b, 0, 0, "add threaded");
}

TEST(Elementwise, MaskedFillWhereFillCopy) {
  torch::manual_seed(4);
  for (auto t : floatTypes()) {
    at::Tensor x = randn({4, 5, 6}, t);
    at::Tensor mask = torch::rand({5, 1}) > 0.5;
    at::Tensor y = at::empty_like(x);
    ASSERT_EQ(run("masked_fill", {x, mask}, {y}, Attrs().f("value", -1e9)), "");
    expectClose(y, x.masked_fill(mask, -1e9), 0, 0, "masked_fill");

    at::Tensor cond = torch::rand({4, 1, 6}) > 0.5;
    at::Tensor a = randn({5, 6}, t), b = randn({4, 5, 1}, t);
    at::Tensor c = at::empty({4, 5, 6}, torch::dtype(t));
    ASSERT_EQ(run("where", {cond, a, b}, {c}), "");
    expectClose(c, at::where(cond, a, b), 0, 0, "where");

    at::Tensor f = at::empty({3, 7}, torch::dtype(t));
    ASSERT_EQ(run("fill", {}, {f}, Attrs().f("value", 0.1)), "");
    expectClose(f, at::full({3, 7}, 0.1, torch::dtype(t)), 0, 0, "fill");
  }
  at::Tensor fi = at::empty({5}, torch::kLong);
  ASSERT_EQ(run("fill", {}, {fi}, Attrs().f("value", 7)), "");
  EXPECT_TRUE(at::equal(fi, at::full({5}, 7, torch::kLong)));

  // copy with casts, reference Tensor::to.
  at::Tensor x = randn({6, 7}, at::kFloat) * 10;
  x.view(-1)[0] = 0;
  std::vector<at::ScalarType> types = {at::kFloat, at::kDouble, at::kLong,
                                       at::kInt, at::kBool};
  for (auto from : types)
    for (auto to : types) {
      at::Tensor src = x.to(from);
      at::Tensor dst = at::empty({6, 7}, torch::dtype(to));
      ASSERT_EQ(run("copy", {src}, {dst}), "");
      EXPECT_TRUE(at::equal(dst, src.to(to)))
          << "copy " << c10::toString(from) << " -> " << c10::toString(to);
    }
}

// The integer and boolean values of ids and masks (HF's position ids from
// input ids, padding masks): comparisons of every dtype, i32/i64
// arithmetic, where and masked_fill on integers, cumsum and gather, each
// equal to ATen's.
TEST(Elementwise, IntegerAndMaskOps) {
  torch::manual_seed(5);
  const char *preds[6] = {"eq", "ne", "lt", "le", "gt", "ge"};
  std::vector<at::ScalarType> types = {at::kFloat, at::kDouble, at::kLong, at::kInt,
                                       at::kBool};
  for (auto t : types) {
    // Small integers so that every predicate sees ties.
    at::Tensor a = torch::randint(0, 3, {4, 1, 5}).to(t), b = torch::randint(0, 3, {3, 1}).to(t);
    if (t == at::kFloat || t == at::kDouble)
      a.view(-1)[0] = std::numeric_limits<double>::quiet_NaN();
    at::Tensor refs[6] = {a.eq(b), a.ne(b), a.lt(b), a.le(b), a.gt(b), a.ge(b)};
    for (int k = 0; k < 6; ++k) {
      at::Tensor c = at::empty({4, 3, 5}, torch::kBool);
      ASSERT_EQ(run("compare", {a, b}, {c}, Attrs().s("predicate", preds[k])), "");
      EXPECT_TRUE(at::equal(c, refs[k])) << preds[k] << " " << c10::toString(t);
    }
  }
  at::Tensor x = torch::randint(-5, 5, {3, 4}, torch::kInt), y = torch::randint(-5, 5, {4}, torch::kInt);
  for (const char *op : {"add", "sub", "mul"}) {
    at::Tensor c = at::empty({3, 4}, torch::kInt);
    ASSERT_EQ(run(op, {x, y}, {c}), "");
    at::Tensor ref = std::string(op) == "add" ? x + y : std::string(op) == "sub" ? x - y : x * y;
    EXPECT_TRUE(at::equal(c, ref)) << op;
  }
  at::Tensor cond = torch::rand({3, 1}) > 0.5, ids = torch::randint(0, 100, {3, 4}, torch::kLong);
  at::Tensor w = at::empty({3, 4}, torch::kLong);
  ASSERT_EQ(run("where", {cond, ids, torch::full({}, -7, torch::kLong)}, {w}), "");
  EXPECT_TRUE(at::equal(w, at::where(cond, ids, torch::full({}, -7, torch::kLong))));
  ASSERT_EQ(run("masked_fill", {ids, cond}, {w}, Attrs().f("value", -100)), "");
  EXPECT_TRUE(at::equal(w, ids.masked_fill(cond, -100)));
  // cumsum over every dim of a 3-D tensor, i64 and i32, one and three threads.
  at::Tensor m = torch::randint(0, 3, {5, 70, 3}, torch::kLong);
  for (int64_t d = 0; d < 3; ++d)
    for (auto t : {at::kLong, at::kInt}) {
      at::Tensor src = m.to(t), out = at::empty_like(src);
      AttrMap am = Attrs().i("dim", {d}).m;
      ASSERT_EQ(run("cumsum", {src}, {out}, am), "");
      EXPECT_TRUE(at::equal(out, src.cumsum(d).to(t))) << "cumsum dim " << d;
    }
  // gather along each dim, with an index smaller than the input elsewhere.
  at::Tensor table = torch::randint(0, 1000, {4, 6, 5}, torch::kLong);
  for (int64_t d = 0; d < 3; ++d) {
    std::vector<int64_t> is = {3, 5, 4};
    at::Tensor idx = torch::randint(0, table.size(d), is, torch::kLong);
    at::Tensor out = at::empty(is, torch::kLong);
    ASSERT_EQ(run("gather", {table, idx}, {out}, Attrs().i("dim", {d})), "");
    EXPECT_TRUE(at::equal(out, table.gather(d, idx))) << "gather dim " << d;
    at::Tensor bits = table.remainder(2).to(at::kBool), bout = at::empty(is, torch::kBool);
    ASSERT_EQ(run("gather", {bits, idx}, {bout}, Attrs().i("dim", {d})), "");
    EXPECT_TRUE(at::equal(bout, bits.gather(d, idx))) << "bool gather dim " << d;
  }
  // An index out of range is an error naming it, not a read past the end.
  at::Tensor bad = torch::full({1, 2}, 6, torch::kLong), out = at::empty({1, 2}, torch::kLong);
  std::string e = run("gather", {table.select(2, 0).contiguous(), bad}, {out}, Attrs().i("dim", {1}));
  EXPECT_NE(e.find("index 6 out of range [0, 6)"), std::string::npos) << e;
  EXPECT_NE(run("gather", {table.to(at::kFloat), torch::zeros({1, 1, 1}, torch::kLong)},
                {at::empty({1, 1, 1})}, Attrs().i("dim", {0})),
            "");
  at::Tensor two = torch::zeros({2});
  EXPECT_NE(run("compare", {two, two}, {at::empty({2}, torch::kBool)}, Attrs().s("predicate", "lt2")),
            "");
}

TEST(Elementwise, Errors) {
  at::Tensor a = torch::randn({3, 4}), b = torch::randn({5});
  at::Tensor c = at::empty({3, 4});
  std::string e = run("add", {a, b}, {c});
  EXPECT_NE(e, "");
  EXPECT_EQ(e.find('\n'), std::string::npos);
  EXPECT_NE(run("add", {a, torch::randn({4}, torch::kDouble)}, {c}), "");
  EXPECT_NE(run("add", {a, torch::randn({4})}, {at::empty({2, 3, 4})}), "");
  EXPECT_NE(run("div", {a.to(at::kLong), a.to(at::kLong)}, {c.to(at::kLong)}), "");
  EXPECT_NE(run("relu", {a}, {at::empty({3, 4}, torch::kDouble)}), "");
  EXPECT_NE(run("relu", {a}, {at::empty({4, 3})}), "");
  EXPECT_NE(run("relu", {a.to(at::kLong)}, {c.to(at::kLong)}), "");
  EXPECT_NE(run("relu", {a, a}, {c}), "");
  EXPECT_NE(run("relu_backward", {a, torch::randn({3, 5})}, {c}), "");
  EXPECT_NE(run("gelu", {a}, {c}, Attrs().s("approximate", "erf")), "");
  EXPECT_NE(run("masked_fill", {a, a}, {c}), ""); // mask must be Bool
  EXPECT_NE(run("where", {a > 0, a, b}, {c}), "");
  EXPECT_NE(run("copy", {a}, {at::empty({4, 3})}), "");
}

TEST(Elementwise, RankZeroAndEmpty) {
  at::Tensor x = torch::full({}, -2.0), y = at::empty({});
  ASSERT_EQ(run("relu", {x}, {y}), "");
  EXPECT_EQ(y.item<float>(), 0.0f);
  at::Tensor b = torch::randn({3}), c = at::empty({3});
  ASSERT_EQ(run("add", {x, b}, {c}), "");
  EXPECT_TRUE(at::equal(c, x + b));
  at::Tensor e = at::empty({0, 4}), ec = at::empty({0, 4});
  ASSERT_EQ(run("mul", {e, torch::randn({4})}, {ec}), "");
  at::Tensor s = at::empty({});
  ASSERT_EQ(run("reduce_sum", {x}, {s}), "");
  EXPECT_EQ(s.item<float>(), -2.0f);
  ASSERT_EQ(run("reduce_sum", {e}, {s}), "");
  EXPECT_EQ(s.item<float>(), 0.0f);
  // A negative dimension is an error, not a crash.
  offload::rt::registerAllHostKernels();
  auto fn = KernelRegistry::host().lookup("offload.relu");
  std::vector<TensorView> in(1), out(1);
  in[0].shape = {-1, 2};
  out[0].shape = {-1, 2};
  AttrMap am;
  KernelArgs args{in, out, am, 1};
  EXPECT_NE(fn(args), "");
}

// --- Reductions -----------------------------------------------------------------

TEST(Reduction, SumMean) {
  torch::manual_seed(5);
  struct Case {
    std::vector<int64_t> dims;
    bool keep;
  };
  std::vector<Case> cases = {{{}, false}, {{0}, false},     {{1, -1}, true},
                             {{0, 2, 3}, false}, {{3}, true}, {{0, 1, 2, 3}, true},
                             {{2}, false}};
  for (auto t : floatTypes())
    for (auto &c : cases) {
      at::Tensor x = randn({4, 3, 5, 6}, t);
      for (bool mean : {false, true}) {
        at::Tensor ref;
        if (c.dims.empty())
          ref = mean ? x.mean() : x.sum();
        else
          ref = mean ? x.mean(c.dims, c.keep) : x.sum(c.dims, c.keep);
        at::Tensor y = at::empty(ref.sizes(), torch::dtype(t));
        ASSERT_EQ(run(mean ? "reduce_mean" : "reduce_sum", {x}, {y},
                      Attrs().i("dims", c.dims).i("keepdim", {c.keep})),
                  "");
        expectNear(y, ref, std::string(mean ? "mean" : "sum") + " " + tname(t));
      }
    }
}

TEST(Reduction, LargeDeterministic) {
  torch::manual_seed(6);
  at::Tensor x = torch::randn({1000, 300});
  at::Tensor ref = x.to(at::kDouble).sum().to(at::kFloat);
  at::Tensor y1 = at::empty({}), y4 = at::empty({}), y4b = at::empty({});
  ASSERT_EQ(run("reduce_sum", {x}, {y1}, Attrs(), 1), "");
  ASSERT_EQ(run("reduce_sum", {x}, {y4}, Attrs(), 4), "");
  ASSERT_EQ(run("reduce_sum", {x}, {y4b}, Attrs(), 4), "");
  EXPECT_TRUE(at::equal(y1, y4));
  EXPECT_TRUE(at::equal(y4, y4b));
  expectClose(y4, ref, 1e-6, 1e-6, "large sum vs f64 reference");
  // Reduction over the leading dim (bias gradient), threaded.
  at::Tensor z1 = at::empty({300}), z4 = at::empty({300});
  ASSERT_EQ(run("reduce_sum", {x}, {z1}, Attrs().i("dims", {0}), 1), "");
  ASSERT_EQ(run("reduce_sum", {x}, {z4}, Attrs().i("dims", {0}), 4), "");
  EXPECT_TRUE(at::equal(z1, z4));
  expectClose(z4, x.sum(0), 1e-5, 1e-5, "column sum");
}

TEST(Reduction, BroadcastTo) {
  torch::manual_seed(7);
  for (auto t : floatTypes()) {
    at::Tensor x = randn({3, 1, 5}, t);
    at::Tensor y = at::empty({2, 3, 4, 5}, torch::dtype(t));
    ASSERT_EQ(run("broadcast_to", {x}, {y}), "");
    EXPECT_TRUE(at::equal(y, x.expand({2, 3, 4, 5}).contiguous()));
    at::Tensor x2 = randn({4, 1}, t);
    at::Tensor y2 = at::empty({3, 4, 6}, torch::dtype(t));
    ASSERT_EQ(run("broadcast_to", {x2}, {y2}), "");
    EXPECT_TRUE(at::equal(y2, x2.expand({3, 4, 6}).contiguous()));
  }
  at::Tensor x = torch::randn({3, 2});
  EXPECT_NE(run("broadcast_to", {x}, {at::empty({3, 4})}), "");
  EXPECT_NE(run("reduce_sum", {x}, {at::empty({2})}, Attrs().i("dims", {1})), "");
  EXPECT_NE(run("reduce_sum", {x}, {at::empty({3})}, Attrs().i("dims", {2})), "");
}

// --- Shape ----------------------------------------------------------------------

TEST(Shape, ReshapeTransposeCat) {
  torch::manual_seed(8);
  for (auto t : {at::kFloat, at::kDouble, at::kLong}) {
    at::Tensor x = (torch::randn({3, 4, 5}) * 100).to(t);
    at::Tensor r = at::empty({12, 5}, torch::dtype(t));
    ASSERT_EQ(run("reshape", {x}, {r}), "");
    EXPECT_TRUE(at::equal(r, x.reshape({12, 5})));
    for (std::vector<int64_t> perm :
         {std::vector<int64_t>{2, 0, 1}, {1, 0, 2}, {0, 2, 1}, {-1, 1, 0}}) {
      at::Tensor ref = x.permute(perm).contiguous();
      at::Tensor y = at::empty(ref.sizes(), torch::dtype(t));
      ASSERT_EQ(run("transpose", {x}, {y}, Attrs().i("perm", perm)), "");
      EXPECT_TRUE(at::equal(y, ref));
    }
    at::Tensor a = (torch::randn({3, 2, 5}) * 10).to(t),
               b = (torch::randn({3, 4, 5}) * 10).to(t);
    at::Tensor ref = at::cat({a, x, b}, 1);
    at::Tensor y = at::empty(ref.sizes(), torch::dtype(t));
    ASSERT_EQ(run("cat", {a, x, b}, {y}, Attrs().i("dim", {1})), "");
    EXPECT_TRUE(at::equal(y, ref));
    at::Tensor ref0 = at::cat({x, x}, -1);
    at::Tensor y0 = at::empty(ref0.sizes(), torch::dtype(t));
    ASSERT_EQ(run("cat", {x, x}, {y0}, Attrs().i("dim", {-1})), "");
    EXPECT_TRUE(at::equal(y0, ref0));
  }
  // Large transpose with threads.
  at::Tensor big = torch::randn({64, 300, 17});
  at::Tensor ref = big.permute({2, 0, 1}).contiguous();
  at::Tensor y = at::empty(ref.sizes());
  ASSERT_EQ(run("transpose", {big}, {y}, Attrs().i("perm", {2, 0, 1}), 4), "");
  EXPECT_TRUE(at::equal(y, ref));
  // Errors.
  at::Tensor x = torch::randn({3, 4});
  EXPECT_NE(run("reshape", {x}, {at::empty({5, 2})}), "");
  EXPECT_NE(run("transpose", {x}, {at::empty({4, 3})}, Attrs().i("perm", {0, 0})), "");
  EXPECT_NE(run("transpose", {x}, {at::empty({3, 4})}, Attrs().i("perm", {1, 0})), "");
  EXPECT_NE(run("cat", {x, torch::randn({2, 5})}, {at::empty({5, 4})}, Attrs().i("dim", {0})), "");
  EXPECT_NE(run("cat", {x, x}, {at::empty({7, 4})}, Attrs().i("dim", {0})), "");
}

TEST(Shape, SliceAndBackward) {
  torch::manual_seed(9);
  struct Case {
    int64_t dim, start, end, step;
  };
  std::vector<Case> cases = {{1, 1, 7, 2}, {0, 0, 2, 1},  {2, -3, INT64_MAX, 1},
                             {-1, 0, 5, 3}, {1, 2, 100, 4}, {1, 5, 3, 1},
                             {0, -100, -1, 1}};
  for (auto t : floatTypes())
    for (auto &c : cases) {
      at::Tensor x = randn({3, 8, 5}, t);
      at::Tensor ref = x.slice(c.dim, c.start, c.end, c.step).contiguous();
      at::Tensor y = at::empty(ref.sizes(), torch::dtype(t));
      Attrs at_;
      at_.i("dim", {c.dim}).i("start", {c.start}).i("end", {c.end}).i("step", {c.step});
      ASSERT_EQ(run("slice", {x}, {y}, at_), "");
      EXPECT_TRUE(at::equal(y, ref));
      at::Tensor dy = randn(ref.sizes().vec(), t);
      at::Tensor dref =
          at::slice_backward(dy, x.sizes(), c.dim, c.start, c.end, c.step);
      at::Tensor dx = at::empty_like(x);
      ASSERT_EQ(run("slice_backward", {dy}, {dx}, at_), "");
      EXPECT_TRUE(at::equal(dx, dref));
    }
  at::Tensor x = torch::randn({3, 8});
  Attrs bad;
  bad.i("dim", {1}).i("start", {0}).i("end", {4}).i("step", {1});
  EXPECT_NE(run("slice", {x}, {at::empty({3, 5})}, bad), "");
  EXPECT_NE(run("slice_backward", {torch::randn({3, 5})}, {at::empty({3, 8})}, bad), "");
  bad.i("step", {0});
  EXPECT_NE(run("slice", {x}, {at::empty({3, 4})}, bad), "");
}

} // namespace
