//===- MlpPlan.h - A two-layer MLP training-step plan and reference -*- C++
//-*-===//
//
// Part of offload. linear -> relu -> linear -> cross_entropy (mean), the
// backward written with matmul/reduce_sum/relu_backward/
// cross_entropy_backward, and torch.optim.SGD (momentum) per parameter; the
// reference is the same math in double precision in plain C++.
//
//===----------------------------------------------------------------------===//
#ifndef OFFLOAD_UNITTESTS_RUNTIME_MLPPLAN_H
#define OFFLOAD_UNITTESTS_RUNTIME_MLPPLAN_H

#include "offload/Runtime/Runtime.h"

#include <cmath>
#include <map>
#include <string>
#include <vector>

namespace offload {
namespace rt {
namespace test {

struct MlpDims {
  int64_t N = 8, D = 5, H = 16, C = 4;
  double lr = 0.05, momentum = 0.9;
  /// AdamW (torch defaults but lr 0.01, weight_decay 0.1) instead of SGD.
  bool adamw = false;
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weightDecay = 0.1;
  /// Split the backward into backward_input (B) and backward_weight (W).
  bool splitBW = false;
};

inline PlanData buildMlpPlan(const MlpDims &m) {
  PlanBuilder b;
  b.setProducer("unittest mlp");
  auto P = BufferRole::Parameter;
  auto T = BufferRole::Temporary;
  int x = b.buffer("x", DType::F32, {m.N, m.D}, BufferRole::Input);
  int t = b.buffer("target", DType::I64, {m.N}, BufferRole::Input);
  struct Param {
    std::string name;
    std::vector<int64_t> shape;
    int id;
  };
  std::vector<Param> ps = {{"fc1.weight", {m.H, m.D}, 0},
                           {"fc1.bias", {m.H}, 0},
                           {"fc2.weight", {m.C, m.H}, 0},
                           {"fc2.bias", {m.C}, 0}};
  for (Param &p : ps) {
    p.id = b.buffer(p.name, DType::F32, p.shape, P);
    b.bindIn(p.name, p.id);
  }
  b.bindIn("x", x);
  b.bindIn("target", t);
  int h = b.buffer("h", DType::F32, {m.N, m.H}, T);
  int a = b.buffer("a", DType::F32, {m.N, m.H}, T);
  int z = b.buffer("z", DType::F32, {m.N, m.C}, T);
  int loss = b.buffer("loss", DType::F32, {}, BufferRole::Output);
  b.bindOut("loss", loss);
  AttrMap ce;
  ce.set("reduction", attrString("mean"));
  ce.set("ignore_index", attrInt(-100));
  ce.set("label_smoothing", attrFloat(0.0));
  b.instr("offload.linear", {x, ps[0].id, ps[1].id}, {h});
  b.instr("offload.relu", {h}, {a});
  b.instr("offload.linear", {a, ps[2].id, ps[3].id}, {z});
  b.instr("offload.cross_entropy", {z, t}, {loss});
  b.endPhase("forward");
  int one = b.buffer("one", DType::F32, {}, T);
  int dz = b.buffer("dz", DType::F32, {m.N, m.C}, T);
  int da = b.buffer("da", DType::F32, {m.N, m.H}, T);
  int dh = b.buffer("dh", DType::F32, {m.N, m.H}, T);
  std::vector<int> grads;
  for (Param &p : ps) {
    grads.push_back(
        b.buffer("grad:" + p.name, DType::F32, p.shape, BufferRole::Gradient));
    b.bindOut("grad:" + p.name, grads.back());
  }
  AttrMap fill;
  fill.set("value", attrFloat(1.0));
  AttrMap ta, none, dims0;
  ta.set("transpose_a", attrInt(1));
  ta.set("transpose_b", attrInt(0));
  none.set("transpose_a", attrInt(0));
  none.set("transpose_b", attrInt(0));
  dims0.set("dims", attrInts({0}));
  dims0.set("keepdim", attrInt(0));
  b.instr("offload.fill", {}, {one}, fill);
  b.instr("offload.cross_entropy_backward", {one, z, t}, {dz}, ce);
  if (m.splitBW) {
    // B: input gradients only; W: weight gradients, right after B.
    b.instr("offload.matmul", {dz, ps[2].id}, {da}, none);
    b.instr("offload.relu_backward", {da, a}, {dh});
    b.endPhase("backward_input");
    b.instr("offload.matmul", {dz, a}, {grads[2]}, ta);
    b.instr("offload.reduce_sum", {dz}, {grads[3]}, dims0);
    b.instr("offload.matmul", {dh, x}, {grads[0]}, ta);
    b.instr("offload.reduce_sum", {dh}, {grads[1]}, dims0);
    b.endPhase("backward_weight");
  } else {
    b.instr("offload.matmul", {dz, a}, {grads[2]}, ta);
    b.instr("offload.reduce_sum", {dz}, {grads[3]}, dims0);
    b.instr("offload.matmul", {dz, ps[2].id}, {da}, none);
    b.instr("offload.relu_backward", {da, a}, {dh});
    b.instr("offload.matmul", {dh, x}, {grads[0]}, ta);
    b.instr("offload.reduce_sum", {dh}, {grads[1]}, dims0);
    b.endPhase("backward");
  }
  AttrMap opt;
  opt.set("lr", attrFloat(m.lr));
  if (m.adamw) {
    opt.set("beta1", attrFloat(m.beta1));
    opt.set("beta2", attrFloat(m.beta2));
    opt.set("eps", attrFloat(m.eps));
    opt.set("weight_decay", attrFloat(m.weightDecay));
  } else {
    opt.set("momentum", attrFloat(m.momentum));
    opt.set("dampening", attrFloat(0.0));
    opt.set("weight_decay", attrFloat(0.0));
    opt.set("nesterov", attrInt(0));
  }
  auto OS = BufferRole::OptimizerState;
  for (size_t k = 0; k < ps.size(); ++k) {
    const Param &p = ps[k];
    std::vector<std::string> names =
        m.adamw ? std::vector<std::string>{".exp_avg", ".exp_avg_sq"}
                : std::vector<std::string>{".momentum_buffer"};
    std::vector<int32_t> ins = {p.id, grads[k]}, outs;
    int np = b.buffer("new:" + p.name, DType::F32, p.shape, P);
    b.bindOut(p.name, np);
    outs.push_back(np);
    for (const std::string &sfx : names) {
      int in = b.buffer(p.name + sfx, DType::F32, p.shape, OS);
      int out = b.buffer("new:" + p.name + sfx, DType::F32, p.shape, OS);
      b.bindIn(p.name + sfx, in);
      b.bindOut(p.name + sfx, out);
      ins.push_back(in);
      outs.push_back(out);
    }
    int step = b.buffer(p.name + ".step", DType::I64, {}, OS);
    int ns = b.buffer("new:" + p.name + ".step", DType::I64, {}, OS);
    b.bindIn(p.name + ".step", step);
    b.bindOut(p.name + ".step", ns);
    ins.push_back(step);
    outs.push_back(ns);
    b.instr(m.adamw ? "offload.adamw_update" : "offload.sgd_update", ins, outs,
            opt);
  }
  b.endPhase("optimizer");
  return b.finish();
}

/// Deterministic inputs and parameters for the MLP.
inline std::map<std::string, Tensor> mlpValues(const MlpDims &m) {
  std::map<std::string, Tensor> v;
  auto fill = [](int64_t n, double a, double s) {
    std::vector<float> out(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i)
      out[size_t(i)] = float(a * std::sin(s * double(i) + 0.3));
    return out;
  };
  v["x"] =
      Tensor::fromVector(DType::F32, {m.N, m.D}, fill(m.N * m.D, 1.0, 0.7));
  std::vector<int64_t> tg(static_cast<size_t>(m.N));
  for (int64_t i = 0; i < m.N; ++i)
    tg[size_t(i)] = (i * 3 + 1) % m.C;
  v["target"] = Tensor::fromVector(DType::I64, {m.N}, tg);
  v["fc1.weight"] =
      Tensor::fromVector(DType::F32, {m.H, m.D}, fill(m.H * m.D, 0.4, 1.3));
  v["fc1.bias"] = Tensor::fromVector(DType::F32, {m.H}, fill(m.H, 0.1, 2.1));
  v["fc2.weight"] =
      Tensor::fromVector(DType::F32, {m.C, m.H}, fill(m.C * m.H, 0.3, 0.9));
  v["fc2.bias"] = Tensor::fromVector(DType::F32, {m.C}, fill(m.C, 0.1, 1.7));
  for (const char *p : {"fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"}) {
    if (m.adamw) {
      v[std::string(p) + ".exp_avg"] = Tensor(DType::F32, v[p].shape());
      v[std::string(p) + ".exp_avg_sq"] = Tensor(DType::F32, v[p].shape());
    } else {
      v[std::string(p) + ".momentum_buffer"] = Tensor(DType::F32, v[p].shape());
    }
    v[std::string(p) + ".step"] = Tensor(DType::I64, {});
  }
  return v;
}

/// Reference step in double: returns loss; writes gradients ("grad:NAME")
/// and updated parameters/state (NAME) into `out`, updating `state`.
inline double mlpReference(const MlpDims &m,
                           std::map<std::string, std::vector<double>> &st,
                           const std::vector<double> &x,
                           const std::vector<int64_t> &t,
                           std::map<std::string, std::vector<double>> &grads) {
  auto &w1 = st["fc1.weight"], &b1 = st["fc1.bias"], &w2 = st["fc2.weight"],
       &b2 = st["fc2.bias"];
  int64_t N = m.N, D = m.D, H = m.H, C = m.C;
  std::vector<double> a(size_t(N * H)), z(size_t(N * C)), dz(size_t(N * C));
  for (int64_t n = 0; n < N; ++n)
    for (int64_t j = 0; j < H; ++j) {
      double s = b1[size_t(j)];
      for (int64_t d = 0; d < D; ++d)
        s += x[size_t(n * D + d)] * w1[size_t(j * D + d)];
      a[size_t(n * H + j)] = s > 0 ? s : 0;
    }
  for (int64_t n = 0; n < N; ++n)
    for (int64_t c = 0; c < C; ++c) {
      double s = b2[size_t(c)];
      for (int64_t j = 0; j < H; ++j)
        s += a[size_t(n * H + j)] * w2[size_t(c * H + j)];
      z[size_t(n * C + c)] = s;
    }
  double loss = 0;
  for (int64_t n = 0; n < N; ++n) {
    double mx = -1e300, se = 0;
    for (int64_t c = 0; c < C; ++c)
      mx = std::max(mx, z[size_t(n * C + c)]);
    for (int64_t c = 0; c < C; ++c)
      se += std::exp(z[size_t(n * C + c)] - mx);
    double lse = mx + std::log(se);
    loss += lse - z[size_t(n * C + t[size_t(n)])];
    for (int64_t c = 0; c < C; ++c)
      dz[size_t(n * C + c)] = (std::exp(z[size_t(n * C + c)] - lse) -
                               (c == t[size_t(n)] ? 1.0 : 0.0)) /
                              double(N);
  }
  loss /= double(N);
  auto &gw1 = grads["grad:fc1.weight"], &gb1 = grads["grad:fc1.bias"],
       &gw2 = grads["grad:fc2.weight"], &gb2 = grads["grad:fc2.bias"];
  gw1.assign(size_t(H * D), 0);
  gb1.assign(size_t(H), 0);
  gw2.assign(size_t(C * H), 0);
  gb2.assign(size_t(C), 0);
  std::vector<double> dh(size_t(N * H), 0);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t c = 0; c < C; ++c) {
      double g = dz[size_t(n * C + c)];
      gb2[size_t(c)] += g;
      for (int64_t j = 0; j < H; ++j) {
        gw2[size_t(c * H + j)] += g * a[size_t(n * H + j)];
        dh[size_t(n * H + j)] += g * w2[size_t(c * H + j)];
      }
    }
  for (int64_t n = 0; n < N; ++n)
    for (int64_t j = 0; j < H; ++j) {
      double g = a[size_t(n * H + j)] > 0 ? dh[size_t(n * H + j)] : 0;
      gb1[size_t(j)] += g;
      for (int64_t d = 0; d < D; ++d)
        gw1[size_t(j * D + d)] += g * x[size_t(n * D + d)];
    }
  for (const char *p : {"fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"}) {
    auto &w = st[p];
    auto &step = st[std::string(p) + ".step"];
    const auto &g = grads[std::string("grad:") + p];
    if (m.adamw) {
      // torch.optim.AdamW (amsgrad false), docs/op-semantics.md.
      auto &ma = st[std::string(p) + ".exp_avg"];
      auto &va = st[std::string(p) + ".exp_avg_sq"];
      double tt = step[0] + 1;
      double bc1 = 1 - std::pow(m.beta1, tt), bc2 = 1 - std::pow(m.beta2, tt);
      for (size_t i = 0; i < w.size(); ++i) {
        w[i] *= 1 - m.lr * m.weightDecay;
        ma[i] = m.beta1 * ma[i] + (1 - m.beta1) * g[i];
        va[i] = m.beta2 * va[i] + (1 - m.beta2) * g[i] * g[i];
        w[i] -=
            (m.lr / bc1) * ma[i] / (std::sqrt(va[i]) / std::sqrt(bc2) + m.eps);
      }
    } else {
      auto &buf = st[std::string(p) + ".momentum_buffer"];
      for (size_t i = 0; i < w.size(); ++i) {
        double bb = step[0] == 0 ? g[i] : m.momentum * buf[i] + g[i];
        buf[i] = bb;
        w[i] -= m.lr * bb;
      }
    }
    step[0] += 1;
  }
  return loss;
}

} // namespace test
} // namespace rt
} // namespace offload

#endif
