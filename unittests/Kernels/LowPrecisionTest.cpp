//===- LowPrecisionTest.cpp - bf16/f16 host kernels (issue 29) -------------===//
//
// Part of offload. The host backend emulates bf16 and f16 storage exactly:
// an op widens its bf16/f16 operands to f32, computes as its f32 kernel
// does, and rounds each bf16/f16 result to nearest even (docs/precision.md).
// So for every op family, on inputs representable in the low type:
//
//   kernel(low inputs) == round_to_low(kernel_f32(widened inputs))
//
// bit for bit, with the rounding done by ATen (`Tensor::to(kBFloat16)`,
// c10's round-to-nearest-even), independently of Float16.h. Mixed types are
// checked where mixed precision uses them (a bf16 batch norm with f32
// parameters and statistics, f32 statistics of layer norm and attention).
// The casts of offload.copy match ATen's `to` bit for bit. A kernel without
// bf16/f16 support refuses them by name (the optimizer updates).
//
//===----------------------------------------------------------------------===//

#include "KernelTestUtil.h"

using namespace atest;

namespace {

at::TensorOptions f32() { return at::TensorOptions().dtype(at::kFloat); }

/// A view that maps bf16/f16 ATen tensors to the runtime's dtypes.
TensorView lowView(const at::Tensor &t) { return t.defined() ? view(t) : TensorView(); }

std::string runLow(const std::string &op, const std::vector<at::Tensor> &ins,
                   const std::vector<at::Tensor> &outs, const AttrMap &attrs,
                   int threads = 2) {
  offload::rt::registerAllHostKernels();
  auto k = KernelRegistry::host().lookup("offload." + op);
  if (!k)
    return "no kernel";
  std::vector<TensorView> in, out;
  for (auto &t : ins) in.push_back(lowView(t));
  for (auto &t : outs) out.push_back(lowView(t));
  KernelArgs args{in, out, attrs, threads};
  return k(args);
}

bool isLow(const at::Tensor &t) {
  return t.defined() && (t.scalar_type() == at::kBFloat16 || t.scalar_type() == at::kHalf);
}

/// Runs `op` on `ins` (some bf16/f16) into outputs of `outTypes` and
/// `outShapes`, then on the f32-widened inputs into f32 outputs, and expects
/// the low results to be the f32 results rounded by ATen, and the other
/// results equal.
void expectEmulated(const std::string &op, const std::vector<at::Tensor> &ins,
                    const std::vector<std::vector<int64_t>> &outShapes,
                    const std::vector<at::ScalarType> &outTypes, const Attrs &attrs) {
  SCOPED_TRACE(op);
  std::vector<at::Tensor> wide, outs, wideOuts;
  for (const at::Tensor &t : ins)
    wide.push_back(isLow(t) ? t.to(at::kFloat) : t);
  for (size_t k = 0; k < outShapes.size(); ++k) {
    outs.push_back(at::empty(outShapes[k], at::TensorOptions().dtype(outTypes[k])));
    at::ScalarType wt = (outTypes[k] == at::kBFloat16 || outTypes[k] == at::kHalf)
                            ? at::kFloat
                            : outTypes[k];
    wideOuts.push_back(at::empty(outShapes[k], at::TensorOptions().dtype(wt)));
  }
  ASSERT_EQ(runLow(op, ins, outs, attrs.m), "");
  ASSERT_EQ(runLow(op, wide, wideOuts, attrs.m), "");
  for (size_t k = 0; k < outs.size(); ++k) {
    at::Tensor want = wideOuts[k].to(outTypes[k]);
    // Bitwise: compare the raw 16-bit patterns (NaN == NaN).
    bool same = outs[k].scalar_type() == want.scalar_type() &&
                (isLow(want) ? at::equal(outs[k].view(at::kShort), want.view(at::kShort))
                             : at::equal(outs[k], want));
    EXPECT_TRUE(same) << "result " << k << ": max diff "
                      << (outs[k].to(at::kDouble) - want.to(at::kDouble)).abs().max().item<double>();
  }
}

/// Random values representable in `t`.
at::Tensor rnd(std::vector<int64_t> shape, at::ScalarType t, double scale = 1.0,
               uint64_t seed = 1) {
  auto g = at::detail::createCPUGenerator(seed);
  return (at::randn(shape, g, f32()) * scale).to(t);
}

class LowPrecision : public ::testing::TestWithParam<at::ScalarType> {};

TEST_P(LowPrecision, ElementwiseAndBinary) {
  at::ScalarType t = GetParam();
  at::Tensor x = rnd({3, 5, 7}, t, 2.0, 1), y = rnd({5, 7}, t, 2.0, 2);
  for (const char *op : {"relu", "silu", "gelu", "sigmoid", "tanh", "exp", "neg", "sin",
                         "cos", "hardswish"})
    expectEmulated(op, {x}, {{3, 5, 7}}, {t}, Attrs());
  expectEmulated("sqrt", {x.abs()}, {{3, 5, 7}}, {t}, Attrs());
  expectEmulated("rsqrt", {x.abs()}, {{3, 5, 7}}, {t}, Attrs());
  expectEmulated("hardtanh", {x}, {{3, 5, 7}}, {t},
                 Attrs().f("min_val", -1).f("max_val", 1));
  expectEmulated("mul_scalar", {x}, {{3, 5, 7}}, {t}, Attrs().f("value", 0.3));
  expectEmulated("add_scalar", {x}, {{3, 5, 7}}, {t}, Attrs().f("value", 0.3));
  for (const char *op : {"relu_backward", "gelu_backward", "tanh_backward", "silu_backward"})
    expectEmulated(op, {x, rnd({3, 5, 7}, t, 1.0, 3)}, {{3, 5, 7}}, {t}, Attrs());
  for (const char *op : {"add", "sub", "mul", "div"})
    expectEmulated(op, {x, y}, {{3, 5, 7}}, {t}, Attrs());
  // Byte moves and fills (native): exact.
  expectEmulated("transpose", {x}, {{7, 3, 5}}, {t}, Attrs().i("perm", {2, 0, 1}));
  expectEmulated("broadcast_to", {y}, {{3, 5, 7}}, {t}, Attrs());
  expectEmulated("slice", {x}, {{3, 2, 7}}, {t},
                 Attrs().i("dim", {1}).i("start", {1}).i("end", {5}).i("step", {2}));
  expectEmulated("cat", {x, x}, {{3, 10, 7}}, {t}, Attrs().i("dim", {1}));
  at::Tensor mask = at::rand({5, 7}) < 0.5;
  expectEmulated("masked_fill", {x, mask}, {{3, 5, 7}}, {t}, Attrs().f("value", -1e4));
  expectEmulated("where", {mask, x, y}, {{3, 5, 7}}, {t}, Attrs());
  at::Tensor fill = at::empty({4}, at::TensorOptions().dtype(t));
  ASSERT_EQ(runLow("fill", {}, {fill}, Attrs().f("value", 0.1).m), "");
  EXPECT_TRUE(at::equal(fill.view(at::kShort),
                        at::full({4}, 0.1f, f32()).to(t).view(at::kShort)));
}

TEST_P(LowPrecision, ReductionsSoftmaxLosses) {
  at::ScalarType t = GetParam();
  at::Tensor x = rnd({6, 300}, t, 3.0, 4);
  expectEmulated("reduce_sum", {x}, {{6}}, {t}, Attrs().i("dims", {1}).i("keepdim", {0}));
  expectEmulated("reduce_mean", {x}, {{300}}, {t}, Attrs().i("dims", {0}).i("keepdim", {0}));
  expectEmulated("softmax", {x}, {{6, 300}}, {t}, Attrs().i("dim", {1}));
  expectEmulated("log_softmax", {x}, {{6, 300}}, {t}, Attrs().i("dim", {1}));
  at::Tensor p = rnd({6, 300}, t, 1.0, 5);
  expectEmulated("softmax_backward", {p, x.to(at::kFloat).softmax(1).to(t)}, {{6, 300}}, {t},
                 Attrs().i("dim", {1}));
  at::Tensor target = at::randint(0, 300, {6}, at::TensorOptions().dtype(at::kLong));
  // Cross entropy reading low-type logits; its scalar in the logits' type.
  expectEmulated("cross_entropy", {x, target}, {{}}, {t},
                 Attrs().s("reduction", "mean").i("ignore_index", {-100}));
  expectEmulated("cross_entropy_backward", {rnd({}, t, 1.0, 6), x, target}, {{6, 300}}, {t},
                 Attrs().s("reduction", "mean").i("ignore_index", {-100}));
  expectEmulated("mse_loss", {x, p}, {{}}, {t}, Attrs().s("reduction", "mean"));
}

TEST_P(LowPrecision, LinearMatmulConv) {
  at::ScalarType t = GetParam();
  // K = 300: the f32 accumulation is what makes a long dot product right.
  at::Tensor x = rnd({8, 300}, t, 1.0, 7), w = rnd({16, 300}, t, 0.1, 8),
             b = rnd({16}, t, 0.1, 9);
  expectEmulated("linear", {x, w, b}, {{8, 16}}, {t}, Attrs());
  expectEmulated("linear", {x, w, at::Tensor()}, {{8, 16}}, {t}, Attrs());
  expectEmulated("matmul", {x, w}, {{8, 16}}, {t}, Attrs().i("transpose_b", {1}));
  at::Tensor img = rnd({2, 3, 9, 9}, t, 1.0, 10), k = rnd({4, 3, 3, 3}, t, 0.3, 11);
  Attrs c;
  c.i("stride", {2, 2}).i("padding", {1, 1}).i("dilation", {1, 1}).i("groups", {1});
  expectEmulated("conv2d", {img, k, at::Tensor()}, {{2, 4, 5, 5}}, {t}, c);
  at::Tensor dy = rnd({2, 4, 5, 5}, t, 1.0, 12);
  expectEmulated("conv2d_backward_input", {dy, k}, {{2, 3, 9, 9}}, {t}, c);
  expectEmulated("conv2d_backward_weight", {dy, img}, {{4, 3, 3, 3}}, {t}, c);
  Attrs pool;
  pool.i("kernel_size", {2, 2}).i("stride", {2, 2}).i("padding", {0, 0}).i("dilation", {1, 1});
  expectEmulated("max_pool2d", {img}, {{2, 3, 4, 4}, {2, 3, 4, 4}}, {t, at::kLong}, pool);
  expectEmulated("adaptive_avg_pool2d", {img}, {{2, 3, 1, 1}}, {t},
                 Attrs().i("output_size", {1, 1}));
}

TEST_P(LowPrecision, NormsWithF32Statistics) {
  at::ScalarType t = GetParam();
  // Batch norm as mixed precision runs it: low input and result, f32
  // affine parameters, running and saved statistics.
  at::Tensor x = rnd({4, 3, 5, 5}, t, 2.0, 13);
  at::Tensor w = at::randn({3}, f32()), b = at::randn({3}, f32());
  at::Tensor rm = at::zeros({3}, f32()), rv = at::ones({3}, f32());
  Attrs bn;
  bn.f("momentum", 0.1).f("eps", 1e-5);
  expectEmulated("batch_norm", {x, w, b, rm, rv}, {{4, 3, 5, 5}, {3}, {3}, {3}, {3}},
                 {t, at::kFloat, at::kFloat, at::kFloat, at::kFloat}, bn);
  at::Tensor dy = rnd({4, 3, 5, 5}, t, 1.0, 14);
  at::Tensor sm = x.to(at::kFloat).mean({0, 2, 3}), si = at::ones({3}, f32());
  expectEmulated("batch_norm_backward", {dy, x, w, sm, si}, {{4, 3, 5, 5}, {3}, {3}},
                 {t, at::kFloat, at::kFloat}, bn);
  // Layer norm: low input, weight and result; f32 mean and rstd.
  at::Tensor h = rnd({2, 6, 32}, t, 3.0, 15), lw = rnd({32}, t, 1.0, 16),
             lb = rnd({32}, t, 1.0, 17);
  Attrs ln;
  ln.i("normalized_ndim", {1}).f("eps", 1e-5);
  expectEmulated("layer_norm", {h, lw, lb}, {{2, 6, 32}, {2, 6, 1}, {2, 6, 1}},
                 {t, at::kFloat, at::kFloat}, ln);
  at::Tensor mean = h.to(at::kFloat).mean(-1, true),
             rstd = (h.to(at::kFloat).var(-1, false, true) + 1e-5).rsqrt();
  expectEmulated("layer_norm_backward", {rnd({2, 6, 32}, t, 1.0, 18), h, lw, mean, rstd},
                 {{2, 6, 32}, {32}, {32}}, {t, t, t}, ln);
}

TEST_P(LowPrecision, EmbeddingDropoutAttention) {
  at::ScalarType t = GetParam();
  at::Tensor table = rnd({10, 8}, t, 1.0, 19);
  at::Tensor ids = at::randint(0, 10, {3, 4}, at::TensorOptions().dtype(at::kLong));
  expectEmulated("embedding", {table, ids}, {{3, 4, 8}}, {t}, Attrs().i("padding_idx", {-1}));
  expectEmulated("embedding_backward", {rnd({3, 4, 8}, t, 1.0, 20), ids}, {{10, 8}}, {t},
                 Attrs().i("padding_idx", {-1}));
  at::Tensor seed = at::full({}, 7, at::TensorOptions().dtype(at::kLong));
  expectEmulated("dropout", {rnd({4, 64}, t, 1.0, 21), seed}, {{4, 64}}, {t},
                 Attrs().f("p", 0.25).i("offset", {3}));
  // Attention: low q, k, v and out; the log-sum-exp in f32.
  at::Tensor q = rnd({1, 2, 5, 8}, t, 1.0, 22), k = rnd({1, 2, 6, 8}, t, 1.0, 23),
             v = rnd({1, 2, 6, 8}, t, 1.0, 24);
  Attrs at;
  at.f("scale", 0.35).i("is_causal", {0}).i("has_mask", {0}).f("dropout_p", 0).i("offset", {0});
  expectEmulated("attention", {q, k, v}, {{1, 2, 5, 8}, {1, 2, 5}}, {t, at::kFloat}, at);
  at::Tensor out = at::empty({1, 2, 5, 8}, at::TensorOptions().dtype(t)),
             lse = at::empty({1, 2, 5}, f32());
  ASSERT_EQ(runLow("attention", {q, k, v}, {out, lse}, at.m), "");
  expectEmulated("attention_backward", {rnd({1, 2, 5, 8}, t, 1.0, 25), q, k, v, out, lse},
                 {{1, 2, 5, 8}, {1, 2, 6, 8}, {1, 2, 6, 8}}, {t, t, t}, at);
}

INSTANTIATE_TEST_SUITE_P(Types, LowPrecision, ::testing::Values(at::kBFloat16, at::kHalf),
                         [](const auto &info) {
                           return info.param == at::kBFloat16 ? "bf16" : "f16";
                         });

/// offload.copy converts as ATen's `to` does, bit for bit, in every
/// direction between f32, f64, bf16, f16, i64 and bool (values chosen to
/// include ties, overflow, subnormals and NaN).
TEST(LowPrecisionCopy, CastsMatchATen) {
  auto g = at::detail::createCPUGenerator(30);
  at::Tensor base = at::cat({at::randn({200}, g, f32()) * 1000,
                             at::randn({200}, g, f32()) * 1e-6,
                             at::tensor({1.00390625f, 1.01171875f, 65504.0f, 65520.0f,
                                         7e4f, -7e4f, 3e38f, 5.96e-8f, 2.98e-8f, 0.0f,
                                         -0.0f, 1e-40f, std::nanf(""), INFINITY, -INFINITY,
                                         0.1f, -2.5f, 3.0f})});
  std::vector<at::ScalarType> types = {at::kFloat, at::kDouble, at::kBFloat16, at::kHalf};
  for (at::ScalarType from : types)
    for (at::ScalarType to : types) {
      if (from != at::kBFloat16 && from != at::kHalf && to != at::kBFloat16 && to != at::kHalf)
        continue;
      at::Tensor x = base.to(from);
      at::Tensor y = at::empty(x.sizes(), at::TensorOptions().dtype(to));
      ASSERT_EQ(runLow("copy", {x}, {y}, AttrMap()), "");
      at::Tensor want = x.to(to);
      at::Tensor a = y.to(at::kDouble), b = want.to(at::kDouble);
      EXPECT_TRUE(at::equal(a.isnan(), b.isnan())) << from << " -> " << to;
      EXPECT_TRUE(at::equal(a.nan_to_num(0), b.nan_to_num(0))) << from << " -> " << to;
      // Signed zeros too. (A NaN's sign is free: ATen 1.13 makes every
      // bf16 NaN 0x7FC0, Float16.h keeps the sign.)
      EXPECT_TRUE(at::equal(a.signbit().logical_and(b.isnan().logical_not()),
                            b.signbit().logical_and(b.isnan().logical_not())))
          << from << " -> " << to;
    }
  // To and from integers and bool.
  at::Tensor ints = at::tensor({-3, 0, 7, 300, 65505}, at::TensorOptions().dtype(at::kLong));
  for (at::ScalarType low : {at::kBFloat16, at::kHalf}) {
    at::Tensor y = at::empty({5}, at::TensorOptions().dtype(low));
    ASSERT_EQ(runLow("copy", {ints}, {y}, AttrMap()), "");
    EXPECT_TRUE(at::equal(y.to(at::kDouble), ints.to(low).to(at::kDouble)));
    at::Tensor back = at::empty({5}, at::TensorOptions().dtype(at::kLong));
    ASSERT_EQ(runLow("copy", {y}, {back}, AttrMap()), "");
    EXPECT_TRUE(at::equal(back, y.to(at::kLong)));
    at::Tensor flags = at::empty({5}, at::TensorOptions().dtype(at::kBool));
    ASSERT_EQ(runLow("copy", {y}, {flags}, AttrMap()), "");
    EXPECT_TRUE(at::equal(flags, y.to(at::kBool)));
  }
}

/// A kernel without bf16/f16 support refuses them, naming the op and the
/// type: no silent upcast. (compare on bf16/f16 values has no kernel.)
TEST(LowPrecisionCopy, KernelsWithoutLowTypesRefuseThem) {
  at::Tensor p = at::randn({4}).to(at::kBFloat16);
  at::Tensor out = at::empty({4}, at::TensorOptions().dtype(at::kBool));
  Attrs a;
  a.s("predicate", "lt");
  EXPECT_EQ(runLow("compare", {p, p}, {out}, a.m),
            "offload.compare: the host backend has no bf16 kernel for this op");
  at::Tensor h = at::randn({4}).to(at::kHalf);
  EXPECT_EQ(runLow("compare", {h, h}, {out}, a.m),
            "offload.compare: the host backend has no f16 kernel for this op");
}

} // namespace
