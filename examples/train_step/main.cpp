//===- main.cpp - Using the offload runtime from a user project -----------===//
//
// Part of offload's examples. Two modes:
//   train_step PLAN.oflp [PARAMS.npz] [INPUTS.npz] [STEPS]
//       loads a compiled plan and runs it on the host backend;
//   train_step
//       builds a small plan itself (least squares, w <- w - lr * grad) with
//       PlanBuilder and its own kernels, saves and reloads it, trains, and
//       checks that the loss decreases and the gradient matches the formula.
//
//===----------------------------------------------------------------------===//

#include "offload/Runtime/Npz.h"
#include "offload/Runtime/Runtime.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>

using namespace offload::rt;

namespace {

// r = w*x - y (elementwise, f32)
std::string residual(const KernelArgs &a) {
  const float *w = a.inputs[0].as<float>(), *x = a.inputs[1].as<float>(),
              *y = a.inputs[2].as<float>();
  float *r = a.outputs[0].as<float>();
  for (int64_t i = 0; i < a.outputs[0].numel(); ++i)
    r[i] = w[i] * x[i] - y[i];
  return "";
}
// loss = 0.5 * sum(r^2); grad = r * x
std::string lossAndGrad(const KernelArgs &a) {
  const float *r = a.inputs[0].as<float>(), *x = a.inputs[1].as<float>();
  float *loss = a.outputs[0].as<float>(), *g = a.outputs[1].as<float>();
  double s = 0;
  for (int64_t i = 0; i < a.inputs[0].numel(); ++i) {
    s += 0.5 * double(r[i]) * r[i];
    g[i] = r[i] * x[i];
  }
  *loss = float(s);
  return "";
}
// new_w = w - lr * grad
std::string sgd(const KernelArgs &a) {
  float lr = float(a.attrs.getFloat("lr", 0.1));
  const float *w = a.inputs[0].as<float>(), *g = a.inputs[1].as<float>();
  float *nw = a.outputs[0].as<float>();
  for (int64_t i = 0; i < a.outputs[0].numel(); ++i)
    nw[i] = w[i] - lr * g[i];
  return "";
}

int fail(const std::string &m) {
  std::fprintf(stderr, "train_step: %s\n", m.c_str());
  return 1;
}

int runOwnPlan() {
  KernelRegistry::host().add("example.residual", residual);
  KernelRegistry::host().add("example.loss_and_grad", lossAndGrad);
  KernelRegistry::host().add("example.sgd", sgd);
  const int64_t n = 16;
  PlanBuilder b;
  b.setProducer("examples/train_step");
  int w = b.buffer("w", DType::F32, {n}, BufferRole::Parameter);
  int x = b.buffer("x", DType::F32, {n}, BufferRole::Input);
  int y = b.buffer("y", DType::F32, {n}, BufferRole::Input);
  int r = b.buffer("r", DType::F32, {n}, BufferRole::Temporary);
  int loss = b.buffer("loss", DType::F32, {}, BufferRole::Output);
  int g = b.buffer("grad:w", DType::F32, {n}, BufferRole::Gradient);
  int nw = b.buffer("new_w", DType::F32, {n}, BufferRole::Parameter);
  b.bindIn("w", w);
  b.bindIn("x", x);
  b.bindIn("y", y);
  b.bindOut("loss", loss);
  b.bindOut("grad:w", g);
  b.bindOut("w", nw);
  b.instr("example.residual", {w, x, y}, {r});
  b.endPhase("forward");
  b.instr("example.loss_and_grad", {r, x}, {loss, g});
  b.endPhase("backward");
  AttrMap attrs;
  attrs.set("lr", attrFloat(0.2));
  b.instr("example.sgd", {w, g}, {nw}, attrs);
  b.endPhase("optimizer");
  std::string path = "train_step_example.oflp";
  if (Status s = Plan::save(b.finish(), path); !s.ok())
    return fail(s.message());

  auto plan = Plan::load(path);
  if (!plan)
    return fail(plan.message());
  auto session = Session::create(*plan, "host");
  if (!session)
    return fail(session.message());
  Session &s = **session;
  std::vector<float> xv(n), yv(n), wv(n, 0.f);
  for (int64_t i = 0; i < n; ++i) {
    xv[size_t(i)] = 1.0f + 0.1f * float(i);
    yv[size_t(i)] = 2.0f * xv[size_t(i)]; // true w = 2
  }
  if (!s.bind("w", Tensor::fromVector(DType::F32, {n}, wv)).ok() ||
      !s.bind("x", Tensor::fromVector(DType::F32, {n}, xv)).ok() ||
      !s.bind("y", Tensor::fromVector(DType::F32, {n}, yv)).ok())
    return fail("bind failed");
  double first = 0, last = 0;
  for (int step = 0; step < 10; ++step) {
    // Phases are separately callable; step() would run them all.
    for (const char *ph : {"forward", "backward", "optimizer"})
      if (Status st = s.runPhase(ph); !st.ok())
        return fail(st.message());
    if (Status st = s.finishStep(); !st.ok())
      return fail(st.message());
    last = *s.loss();
    if (step == 0)
      first = last;
    std::printf("step %d: loss %.6g\n", step, last);
  }
  // Gradient check against the formula for the committed w.
  const Tensor *wt = s.store().get("w");
  Tensor grad = *s.output("grad:w");
  std::printf("peak device bytes: planned %llu measured %llu\n",
              (unsigned long long)s.plannedPeakDeviceBytes(),
              (unsigned long long)s.measuredPeakDeviceBytes());
  if (!(last < first * 0.1))
    return fail("loss did not decrease");
  if (s.measuredPeakDeviceBytes() != s.plannedPeakDeviceBytes())
    return fail("measured peak differs from the plan's");
  if (Status st =
          writeNpz("train_step_out.npz", {{"w", *wt}, {"grad:w", grad}});
      !st.ok())
    return fail(st.message());
  std::printf("ok\n");
  return 0;
}

} // namespace

int main(int argc, char **argv) {
  if (argc < 2)
    return runOwnPlan();
  auto plan = Plan::load(argv[1]);
  if (!plan)
    return fail(plan.message());
  auto session = Session::create(*plan, "host");
  if (!session)
    return fail(session.message());
  for (int i = 2; i < argc && i < 4; ++i) {
    auto arrays = readNpz(argv[i]);
    if (!arrays)
      return fail(arrays.message());
    for (auto &a : *arrays)
      if (Status st = (*session)->bind(a.first, a.second); !st.ok())
        return fail(st.message());
  }
  int steps = argc > 4 ? std::atoi(argv[4]) : 1;
  for (int i = 0; i < steps; ++i) {
    if (Status st = (*session)->step(); !st.ok())
      return fail(st.message());
    std::printf("step %d: loss %.9g\n", i, *(*session)->loss());
  }
  return 0;
}
