//===- GradCheckTest.cpp - Finite-difference checks of every VJP ----------===//
//
// Part of offload. For each differentiable op: a step computing
// loss = sum(op(params...) * r) with a fixed random r, differentiated by
// --offload-autodiff (optimizer=none), lowered to a plan and run on the host
// backend in double precision; every parameter gradient is compared with
// central finite differences of the same plan's loss:
//   g_i ~= (L(x + h e_i) - L(x - h e_i)) / 2h,  h = 1e-6,
// with |analytic - numeric| <= 1e-6 * max(1, |numeric|). (Truncation error
// is O(h^2) and rounding O(eps/h) ~ 1e-10 in f64.)
//
//===----------------------------------------------------------------------===//

#include "offload/Conversion/OffloadToPlan.h"
#include "offload/Dialect/Offload/IR/OffloadDialect.h"
#include "offload/Dialect/Offload/IR/OffloadOps.h"
#include "offload/Dialect/Offload/Transforms/Passes.h"
#include "offload/Runtime/Runtime.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "gtest/gtest.h"

#include <cmath>
#include <random>
#include <sstream>

using namespace mlir;
namespace rt = ::offload::rt;

namespace {

enum class Fill { Normal, Positive, Index, Bool, Seed };

struct Arg {
  std::string name;
  std::string type; // e.g. "tensor<3x4xf64>"
  bool param;       // parameter (checked) or input (fixed)
  Fill fill = Fill::Normal;
  int64_t indexBound = 0; // Fill::Index: values in [0, indexBound)
};

struct Case {
  std::string name;
  std::vector<Arg> args;
  std::string body;  // MLIR defining %y from the arguments
  std::string yType; // type of %y
  // Finite-difference step and tolerance; larger for cases whose values pass
  // through f32 (rounding error ~6e-8 / h), where the function is linear or
  // smooth enough for the truncation error O(h^2) to stay below `tol`.
  double h = 1e-6;
  double tol = 1e-6;
};

std::vector<int64_t> shapeOf(const std::string &type) {
  // tensor<3x4xf64> -> {3, 4}; tensor<f64> -> {}
  std::vector<int64_t> shape;
  std::string inner = type.substr(7, type.size() - 8);
  std::stringstream ss(inner);
  std::string tok;
  while (std::getline(ss, tok, 'x')) {
    if (!tok.empty() && std::isdigit((unsigned char)tok[0]))
      shape.push_back(std::stoll(tok));
  }
  return shape;
}

/// Whether a type string such as "tensor<3x4xf32>" has f32 elements.
bool isF32(const std::string &type) {
  return type.size() > 5 && type.compare(type.size() - 4, 4, "f32>") == 0;
}

/// Element `i` of a float tensor as a double; `add` adds to it in place.
double floatAt(const rt::Tensor &t, int64_t i) {
  return t.dtype() == rt::DType::F32 ? double(t.as<float>()[i]) : t.as<double>()[i];
}
void addAt(rt::Tensor &t, int64_t i, double d) {
  if (t.dtype() == rt::DType::F32)
    t.as<float>()[i] += float(d);
  else
    t.as<double>()[i] += d;
}

rt::Tensor makeTensor(const Arg &a, std::mt19937 &gen) {
  std::vector<int64_t> shape = shapeOf(a.type);
  bool f32 = isF32(a.type);
  rt::DType dt = a.fill == Fill::Index || a.fill == Fill::Seed ? rt::DType::I64
                 : a.fill == Fill::Bool                        ? rt::DType::Bool
                 : f32                                         ? rt::DType::F32
                                                               : rt::DType::F64;
  rt::Tensor t(dt, shape);
  std::uniform_real_distribution<double> u(-1.5, 1.5);
  auto setFloat = [&](int64_t i, double v) {
    if (f32)
      t.as<float>()[i] = float(v);
    else
      t.as<double>()[i] = v;
  };
  for (int64_t i = 0; i < t.numel(); ++i) {
    switch (a.fill) {
    case Fill::Normal: setFloat(i, u(gen)); break;
    case Fill::Positive: setFloat(i, 0.5 + std::abs(u(gen))); break;
    case Fill::Index: t.as<int64_t>()[i] = int64_t(gen() % a.indexBound); break;
    case Fill::Bool: t.as<uint8_t>()[i] = uint8_t(gen() % 2); break;
    case Fill::Seed: t.as<int64_t>()[i] = 1234; break;
    }
  }
  return t;
}

std::string buildModule(const Case &c) {
  std::ostringstream os;
  os << "func.func @step(";
  for (const Arg &a : c.args)
    os << "%" << a.name << ": " << a.type << " {offload.name = \"" << a.name
       << "\", offload.role = #offload.role<" << (a.param ? "parameter" : "input") << ">}, ";
  os << "%r: " << c.yType << " {offload.name = \"r\", offload.role = #offload.role<input>})"
     << " -> (tensor<f64> {offload.name = \"loss\", offload.role = #offload.role<loss>})"
     << " attributes {offload.step} {\n"
     << c.body << "\n"
     << "  %p = offload.mul %y, %r : " << c.yType << ", " << c.yType << "\n"
     << "  %l = offload.reduce_sum %p : " << c.yType << "\n"
     << "  return %l : tensor<f64>\n}\n";
  return os.str();
}

class GradCheck : public ::testing::TestWithParam<Case> {};

TEST_P(GradCheck, MatchesFiniteDifferences) {
  const Case &c = GetParam();
  MLIRContext ctx;
  ctx.loadDialect<mlir::offload::OffloadDialect, func::FuncDialect>();
  std::string text = buildModule(c);
  OwningOpRef<ModuleOp> module = parseSourceString<ModuleOp>(text, &ctx);
  ASSERT_TRUE(module) << "does not parse:\n" << text;
  PassManager pm(&ctx);
  mlir::offload::AutodiffOptions opts;
  opts.optimizer = mlir::offload::OptimizerKind::None;
  pm.addPass(mlir::offload::createAutodiff(opts));
  ASSERT_TRUE(succeeded(pm.run(*module))) << text;
  func::FuncOp fn = *module->getOps<func::FuncOp>().begin();
  FailureOr<rt::PlanData> data = mlir::offload::lowerStepToPlan(fn);
  ASSERT_TRUE(succeeded(data));
  auto plan = rt::Plan::fromData(std::move(*data));
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  auto session = rt::Session::create(*plan, "host");
  ASSERT_TRUE(session.ok()) << session.status().message();
  rt::Session &s = **session;

  std::mt19937 gen(42);
  std::map<std::string, rt::Tensor> values;
  for (const Arg &a : c.args)
    values[a.name] = makeTensor(a, gen);
  values["r"] = makeTensor(Arg{"r", c.yType, false}, gen);
  for (auto &[name, t] : values)
    ASSERT_TRUE(s.bind(name, t).ok()) << name;
  rt::Status st = s.step();
  ASSERT_TRUE(st.ok()) << st.message();

  auto lossAt = [&](const std::string &name, const rt::Tensor &t) {
    EXPECT_TRUE(s.bind(name, t).ok());
    rt::Status st = s.step();
    EXPECT_TRUE(st.ok()) << st.message();
    return *s.loss();
  };

  // All gradients of the unperturbed step, before any probe runs.
  std::map<std::string, rt::Tensor> grads;
  for (const Arg &a : c.args) {
    if (!a.param)
      continue;
    auto grad = s.output("grad:" + a.name);
    ASSERT_TRUE(grad.ok()) << grad.status().message();
    grads[a.name] = *grad;
  }

  const double h = c.h;
  for (const Arg &a : c.args) {
    if (!a.param)
      continue;
    const rt::Tensor &g = grads[a.name];
    rt::Tensor x = values[a.name];
    int64_t n = x.numel();
    int64_t stride = std::max<int64_t>(1, n / 24); // at most ~24 probes
    double largestNumeric = 0;
    for (int64_t i = 0; i < n; i += stride) {
      rt::Tensor xp = x, xm = x;
      addAt(xp, i, h);
      addAt(xm, i, -h);
      // The step actually taken (x + h may round in f32).
      double step = floatAt(xp, i) - floatAt(xm, i);
      double numeric = (lossAt(a.name, xp) - lossAt(a.name, xm)) / step;
      double analytic = floatAt(g, i);
      largestNumeric = std::max(largestNumeric, std::abs(numeric));
      EXPECT_NEAR(analytic, numeric, c.tol * std::max(1.0, std::abs(numeric)))
          << c.name << ": d loss / d " << a.name << "[" << i << "]";
    }
    // A case whose probed gradient is zero everywhere could not tell a
    // correct VJP from one that drops the cotangent.
    EXPECT_GT(largestNumeric, 1e-3)
        << c.name << ": the probed gradient of " << a.name
        << " is zero; the case cannot catch a zero cotangent";
    ASSERT_TRUE(s.bind(a.name, x).ok());
  }
}

Arg P(const std::string &n, const std::string &t, Fill f = Fill::Normal) {
  return Arg{n, t, true, f};
}
Arg In(const std::string &n, const std::string &t, Fill f = Fill::Normal,
       int64_t bound = 0) {
  return Arg{n, t, false, f, bound};
}

const char *T34 = "tensor<3x4xf64>";

std::string unary(const std::string &op, const std::string &attrs = "") {
  return "  %y = offload." + op + " %x" + attrs + " : tensor<3x4xf64>";
}

std::vector<Case> cases() {
  std::vector<Case> cs;
  for (std::string op : {"relu", "hardswish", "silu", "sigmoid", "tanh", "exp", "neg", "sin", "cos"})
    cs.push_back({op, {P("x", T34)}, unary(op), T34});
  cs.push_back({"hardtanh", {P("x", T34)},
                unary("hardtanh", " {min_val = -0.5 : f64, max_val = 0.5 : f64}"), T34});
  cs.push_back({"gelu", {P("x", T34)}, unary("gelu"), T34});
  cs.push_back({"gelu_tanh", {P("x", T34)}, unary("gelu", " approximate tanh"), T34});
  cs.push_back({"sqrt", {P("x", T34, Fill::Positive)}, unary("sqrt"), T34});
  cs.push_back({"rsqrt", {P("x", T34, Fill::Positive)}, unary("rsqrt"), T34});
  cs.push_back({"add_scalar", {P("x", T34)}, unary("add_scalar", " {value = 2.0 : f64}"), T34});
  cs.push_back({"mul_scalar", {P("x", T34)}, unary("mul_scalar", " {value = -3.0 : f64}"), T34});
  for (std::string op : {"add", "sub", "mul", "div"})
    cs.push_back({op + "_broadcast",
                  {P("x", T34), P("w", "tensor<4xf64>", Fill::Positive)},
                  "  %y = offload." + op + " %x, %w : tensor<3x4xf64>, tensor<4xf64>", T34});
  cs.push_back({"masked_fill", {P("x", T34), In("m", "tensor<3x4xi1>", Fill::Bool)},
                "  %y = offload.masked_fill %x, %m {value = -7.0 : f64} : tensor<3x4xf64>, tensor<3x4xi1>",
                T34});
  cs.push_back({"where", {In("m", "tensor<3x4xi1>", Fill::Bool), P("x", T34), P("w", "tensor<4xf64>")},
                "  %y = offload.where %m, %x, %w : tensor<3x4xi1>, tensor<3x4xf64>, tensor<4xf64>",
                T34});
  cs.push_back({"reduce_sum", {P("x", "tensor<2x3x4xf64>")},
                "  %y = offload.reduce_sum %x {dims = array<i64: 0, 2>} : tensor<2x3x4xf64>",
                "tensor<3xf64>"});
  cs.push_back({"reduce_mean_keepdim", {P("x", "tensor<2x3x4xf64>")},
                "  %y = offload.reduce_mean %x {dims = array<i64: 1>, keepdim = true} : tensor<2x3x4xf64>",
                "tensor<2x1x4xf64>"});
  cs.push_back({"broadcast_to", {P("x", "tensor<3x1xf64>")},
                "  %y = offload.broadcast_to %x : tensor<3x1xf64> -> tensor<2x3x4xf64>",
                "tensor<2x3x4xf64>"});
  cs.push_back({"reshape_transpose", {P("x", T34)},
                "  %a = offload.reshape %x : tensor<3x4xf64> -> tensor<2x6xf64>\n"
                "  %y = offload.transpose %a {perm = array<i64: 1, 0>} : tensor<2x6xf64>",
                "tensor<6x2xf64>"});
  cs.push_back({"cat_slice", {P("x", T34), P("w", "tensor<3x2xf64>")},
                "  %a = offload.cat %x, %w {dim = 1 : i64} : tensor<3x4xf64>, tensor<3x2xf64>\n"
                "  %y = offload.slice %a {dim = 1 : i64, start = 1 : i64, end = 6 : i64, step = 2 : i64} : tensor<3x6xf64>",
                "tensor<3x3xf64>"});
  cs.push_back({"linear_3d", {P("x", "tensor<2x3x4xf64>"), P("w", "tensor<5x4xf64>"), P("b", "tensor<5xf64>")},
                "  %y = offload.linear %x, %w, %b : tensor<2x3x4xf64>, tensor<5x4xf64>, tensor<5xf64>",
                "tensor<2x3x5xf64>"});
  cs.push_back({"linear_nobias", {P("x", T34), P("w", "tensor<5x4xf64>")},
                "  %y = offload.linear %x, %w : tensor<3x4xf64>, tensor<5x4xf64>", "tensor<3x5xf64>"});
  for (auto [ta, tb] : std::vector<std::pair<bool, bool>>{{false, false}, {true, false}, {false, true}, {true, true}}) {
    std::string at = ta ? "tensor<2x4x3xf64>" : "tensor<2x3x4xf64>";
    std::string bt = tb ? "tensor<5x4xf64>" : "tensor<4x5xf64>";
    cs.push_back({std::string("matmul_") + (ta ? "T" : "N") + (tb ? "T" : "N"),
                  {P("a", at), P("b", bt)},
                  "  %y = offload.matmul %a, %b {transpose_a = " + std::string(ta ? "true" : "false") +
                      ", transpose_b = " + (tb ? "true" : "false") + "} : " + at + ", " + bt,
                  "tensor<2x3x5xf64>"});
  }
  cs.push_back({"conv2d_groups_stride_dilation",
                {P("x", "tensor<2x4x7x7xf64>"), P("w", "tensor<6x2x3x3xf64>"), P("b", "tensor<6xf64>")},
                "  %y = offload.conv2d %x, %w, %b {stride = array<i64: 2, 2>, padding = array<i64: 1, 1>, "
                "dilation = array<i64: 2, 2>, groups = 2 : i64} : tensor<2x4x7x7xf64>, tensor<6x2x3x3xf64>, tensor<6xf64>",
                "tensor<2x6x3x3xf64>"});
  // conv_transpose2d(x [2,4,3,3], w [4,3,3,3], stride 2, padding 1,
  // output_padding 1, groups 2, dilation 1): 2*2 - 2 + 2 + 1 + 1 = 6.
  cs.push_back({"conv2d_backward_input_as_conv_transpose",
                {P("x", "tensor<2x4x3x3xf64>"), P("w", "tensor<4x3x3x3xf64>")},
                "  %y = offload.conv2d_backward_input %x, %w {stride = array<i64: 2, 2>, "
                "padding = array<i64: 1, 1>, dilation = array<i64: 1, 1>, groups = 2 : i64} "
                ": tensor<2x4x3x3xf64>, tensor<4x3x3x3xf64> -> tensor<2x6x6x6xf64>",
                "tensor<2x6x6x6xf64>"});
  cs.push_back({"max_pool2d", {P("x", "tensor<2x3x6x6xf64>")},
                "  %y, %i = offload.max_pool2d %x {kernel_size = array<i64: 3, 3>, stride = array<i64: 2, 2>, "
                "padding = array<i64: 1, 1>, dilation = array<i64: 1, 1>} : tensor<2x3x6x6xf64>",
                "tensor<2x3x3x3xf64>"});
  cs.push_back({"avg_pool2d", {P("x", "tensor<2x3x6x6xf64>")},
                "  %y = offload.avg_pool2d %x {kernel_size = array<i64: 3, 3>, stride = array<i64: 2, 2>, "
                "padding = array<i64: 1, 1>, count_include_pad = false, ceil_mode = true} : tensor<2x3x6x6xf64>",
                "tensor<2x3x4x4xf64>"});
  cs.push_back({"adaptive_avg_pool2d", {P("x", "tensor<2x3x5x5xf64>")},
                "  %y = offload.adaptive_avg_pool2d %x {output_size = array<i64: 2, 2>} : tensor<2x3x5x5xf64>",
                "tensor<2x3x2x2xf64>"});
  cs.push_back({"batch_norm",
                {P("x", "tensor<4x3x2x2xf64>"), P("w", "tensor<3xf64>"), P("b", "tensor<3xf64>"),
                 In("rm", "tensor<3xf64>"), In("rv", "tensor<3xf64>", Fill::Positive)},
                "  %y, %m, %is, %nrm, %nrv = offload.batch_norm %x, %w, %b, %rm, %rv "
                "{momentum = 0.1 : f64, eps = 1.0e-5 : f64} : tensor<4x3x2x2xf64>, tensor<3xf64>",
                "tensor<4x3x2x2xf64>"});
  cs.push_back({"layer_norm",
                {P("x", "tensor<2x3x4xf64>"), P("w", "tensor<4xf64>"), P("b", "tensor<4xf64>")},
                "  %y, %m, %rs = offload.layer_norm %x, %w, %b {normalized_ndim = 1 : i64, eps = 1.0e-5 : f64} "
                ": tensor<2x3x4xf64>, tensor<4xf64>",
                "tensor<2x3x4xf64>"});
  cs.push_back({"softmax", {P("x", T34)}, unary("softmax", " {dim = 1 : i64}"), T34});
  cs.push_back({"log_softmax", {P("x", T34)}, unary("log_softmax", " {dim = 0 : i64}"), T34});
  cs.push_back({"embedding", {P("w", "tensor<5x3xf64>"), In("i", "tensor<2x4xi64>", Fill::Index, 5)},
                "  %y = offload.embedding %w, %i : tensor<5x3xf64>, tensor<2x4xi64>",
                "tensor<2x4x3xf64>"});
  cs.push_back({"dropout", {P("x", T34), In("seed", "tensor<i64>", Fill::Seed)},
                "  %y = offload.dropout %x, %seed {p = 0.3 : f64, offset = 5 : i64} : tensor<3x4xf64>, tensor<i64>",
                T34});
  // Fused attention: q, k and v are parameters; masks and the seed inputs.
  {
    const char *q = "tensor<2x4x3x4xf64>", *kv = "tensor<2x2x5x4xf64>",
               *v3 = "tensor<2x2x5x3xf64>", *y = "tensor<2x4x3x3xf64>";
    auto attn = [&](const std::string &extras, const std::string &attrs,
                    const std::string &extraTypes, const char *kt, const char *vt) {
      return std::string("  %y, %lse = offload.attention %q, %k, %v") + extras + " {" + attrs +
             "} : " + q + ", " + kt + ", " + vt + extraTypes;
    };
    const char *k4 = "tensor<2x4x5x4xf64>", *v4 = "tensor<2x4x5x3xf64>";
    cs.push_back({"attention", {P("q", q), P("k", k4), P("v", v4)},
                  attn("", "scale = 6.0e-01 : f64", "", k4, v4), y});
    cs.push_back({"attention_causal_bool_mask_gqa",
                  {P("q", q), P("k", kv), P("v", v3), In("m", "tensor<2x1x1x5xi1>", Fill::Bool)},
                  attn(", %m", "scale = 5.0e-01 : f64, is_causal = true, has_mask = true",
                       ", tensor<2x1x1x5xi1>", kv, v3),
                  y});
    cs.push_back({"attention_additive_mask_mqa",
                  {P("q", q), P("k", "tensor<2x1x5x4xf64>"), P("v", "tensor<2x1x5x3xf64>"),
                   In("m", "tensor<3x5xf64>")},
                  attn(", %m", "scale = 7.0e-01 : f64, has_mask = true", ", tensor<3x5xf64>",
                       "tensor<2x1x5x4xf64>", "tensor<2x1x5x3xf64>"),
                  y});
    // A float mask that is a parameter (a learned bias, as timm's Swin
    // passes its relative-position bias): its gradient is checked too.
    cs.push_back({"attention_learned_bias_causal_gqa",
                  {P("q", q), P("k", kv), P("v", v3), P("m", "tensor<4x3x5xf64>")},
                  attn(", %m", "scale = 5.0e-01 : f64, is_causal = true, has_mask = true",
                       ", tensor<4x3x5xf64>", kv, v3),
                  y});
    cs.push_back({"attention_learned_bias_dropout",
                  {P("q", q), P("k", kv), P("v", v3), P("m", "tensor<2x1x3x5xf64>"),
                   In("seed", "tensor<i64>", Fill::Seed)},
                  attn(", %m, %seed",
                       "scale = 5.0e-01 : f64, has_mask = true, dropout_p = 2.0e-01 : f64, "
                       "offset = 7 : i64",
                       ", tensor<2x1x3x5xf64>, tensor<i64>", kv, v3),
                  y});
    cs.push_back({"attention_dropout",
                  {P("q", q), P("k", kv), P("v", v3), In("seed", "tensor<i64>", Fill::Seed)},
                  attn(", %seed", "scale = 5.0e-01 : f64, dropout_p = 3.0e-01 : f64, offset = 3 : i64",
                       ", tensor<i64>", kv, v3),
                  y});
    // The token layout (layout blhd: q [N, L, Hq, E], k and v [N, S, Hkv, .],
    // the output [N, L, Hq, Ev]), and a learned bias with dropout in it (its
    // gradient composed in the head layout through transposes).
    const char *qT = "tensor<2x3x4x4xf64>", *kvT = "tensor<2x5x2x4xf64>",
               *v3T = "tensor<2x5x2x3xf64>", *yT = "tensor<2x3x4x3xf64>";
    cs.push_back({"attention_tokens_causal_bool_mask_gqa",
                  {P("q", qT), P("k", kvT), P("v", v3T),
                   In("m", "tensor<2x1x1x5xi1>", Fill::Bool)},
                  std::string("  %y, %lse = offload.attention %q, %k, %v, %m layout blhd "
                              "{scale = 5.0e-01 : f64, is_causal = true, has_mask = true} : ") +
                      qT + ", " + kvT + ", " + v3T + ", tensor<2x1x1x5xi1>",
                  yT});
    cs.push_back({"attention_tokens_learned_bias_dropout",
                  {P("q", qT), P("k", kvT), P("v", v3T), P("m", "tensor<2x1x3x5xf64>"),
                   In("seed", "tensor<i64>", Fill::Seed)},
                  std::string("  %y, %lse = offload.attention %q, %k, %v, %m, %seed layout blhd "
                              "{scale = 5.0e-01 : f64, has_mask = true, dropout_p = 2.0e-01 : f64, "
                              "offset = 7 : i64} : ") +
                      qT + ", " + kvT + ", " + v3T + ", tensor<2x1x3x5xf64>, tensor<i64>",
                  yT});
  }
  cs.push_back({"cross_entropy", {P("z", "tensor<5x4xf64>"), In("t", "tensor<5xi64>", Fill::Index, 4)},
                "  %y = offload.cross_entropy %z, %t : tensor<5x4xf64>, tensor<5xi64>", "tensor<f64>"});
  cs.push_back({"cross_entropy_smoothing_sum",
                {P("z", "tensor<5x4xf64>"), In("t", "tensor<5xi64>", Fill::Index, 4)},
                "  %y = offload.cross_entropy %z, %t reduction sum {label_smoothing = 0.2 : f64} "
                ": tensor<5x4xf64>, tensor<5xi64>",
                "tensor<f64>"});
  cs.push_back({"nll_loss", {P("z", "tensor<5x4xf64>"), In("t", "tensor<5xi64>", Fill::Index, 4)},
                "  %ls = offload.log_softmax %z {dim = 1 : i64} : tensor<5x4xf64>\n"
                "  %y = offload.nll_loss %ls, %t : tensor<5x4xf64>, tensor<5xi64>",
                "tensor<f64>"});
  cs.push_back({"mse_loss", {P("x", T34), P("w", T34)},
                "  %y = offload.mse_loss %x, %w : tensor<3x4xf64>, tensor<3x4xf64>", "tensor<f64>"});
  // Dtype changes (issue 16: `.double().float()` dropped the gradient). The
  // values pass through f32, so the step is larger and the bound looser; a
  // dropped cotangent gives an error of ~1, far above it.
  Case roundTrip{"copy_f64_f32_f64", {P("x", T34)},
                 "  %a = offload.copy %x : tensor<3x4xf64> -> tensor<3x4xf32>\n"
                 "  %t = offload.tanh %a : tensor<3x4xf32>\n"
                 "  %y = offload.copy %t : tensor<3x4xf32> -> tensor<3x4xf64>",
                 T34};
  roundTrip.h = 1e-3;
  roundTrip.tol = 2e-4;
  cs.push_back(roundTrip);
  Case fromF32{"copy_f32_param_to_f64",
               {P("x", "tensor<3x4xf32>"), P("w", "tensor<4xf64>")},
               "  %a = offload.copy %x : tensor<3x4xf32> -> tensor<3x4xf64>\n"
               "  %y = offload.mul %a, %w : tensor<3x4xf64>, tensor<4xf64>",
               T34};
  fromF32.h = 1e-2;
  fromF32.tol = 1e-4;
  cs.push_back(fromF32);
  cs.push_back({"copy_same_type", {P("x", T34)},
                "  %y = offload.copy %x : tensor<3x4xf64> -> tensor<3x4xf64>", T34});
  return cs;
}

// Every op of the dialect with a VJP (DifferentiableOpInterface) is the
// subject of at least one case above, so a new differentiable op cannot be
// added without a finite-difference check.
TEST(GradCheckCoverage, EveryDifferentiableOpHasACase) {
  MLIRContext ctx;
  ctx.loadDialect<mlir::offload::OffloadDialect>();
  std::string bodies;
  for (const Case &c : cases())
    bodies += c.body + "\n";
  std::vector<std::string> missing;
  int differentiable = 0;
  for (RegisteredOperationName name : ctx.getRegisteredOperations()) {
    if (name.getDialectNamespace() != "offload" ||
        !name.hasInterface<mlir::offload::DifferentiableOpInterface>())
      continue;
    ++differentiable;
    if (bodies.find(" " + name.getStringRef().str() + " ") == std::string::npos)
      missing.push_back(name.getStringRef().str());
  }
  EXPECT_GT(differentiable, 40);
  std::string list;
  for (const std::string &m : missing)
    list += " " + m;
  EXPECT_TRUE(missing.empty()) << missing.size()
                               << " differentiable ops have no gradient check:" << list;
}

// Readable test parameter in gtest's output.
void PrintTo(const Case &c, std::ostream *os) { *os << c.name; }

INSTANTIATE_TEST_SUITE_P(AllOps, GradCheck, ::testing::ValuesIn(cases()),
                         [](const ::testing::TestParamInfo<Case> &info) {
                           return info.param.name;
                         });

} // namespace
