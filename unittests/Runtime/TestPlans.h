//===- TestPlans.h - Test kernels and hand-built plans ----------*- C++ -*-===//
//
// Part of offload. Small f32 kernels registered under "test.*" names and
// plans built with PlanBuilder, with plain-C++ references for their results.
//
//===----------------------------------------------------------------------===//
#ifndef OFFLOAD_UNITTESTS_RUNTIME_TESTPLANS_H
#define OFFLOAD_UNITTESTS_RUNTIME_TESTPLANS_H

#include "offload/Runtime/Runtime.h"

#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <unistd.h>
#include <vector>

namespace offload {
namespace rt {
namespace test {

inline std::string kMul(const KernelArgs &a) {
  if (a.inputs.size() != 2 || a.outputs.size() != 1)
    return "test.mul arity";
  const TensorView &x = a.inputs[0], &y = a.inputs[1], &z = a.outputs[0];
  if (x.numel() != y.numel() || x.numel() != z.numel())
    return "shape";
  for (int64_t i = 0; i < z.numel(); ++i)
    z.as<float>()[i] = x.as<float>()[i] * y.as<float>()[i];
  return "";
}
inline std::string kSub(const KernelArgs &a) {
  const TensorView &x = a.inputs[0], &y = a.inputs[1], &z = a.outputs[0];
  for (int64_t i = 0; i < z.numel(); ++i)
    z.as<float>()[i] = x.as<float>()[i] - y.as<float>()[i];
  return "";
}
inline std::string kScale(const KernelArgs &a) {
  float v = float(a.attrs.getFloat("value", 1.0));
  const TensorView &x = a.inputs[0], &z = a.outputs[0];
  for (int64_t i = 0; i < z.numel(); ++i)
    z.as<float>()[i] = x.as<float>()[i] * v;
  return "";
}
inline std::string kSumSq(const KernelArgs &a) {
  const TensorView &x = a.inputs[0];
  float s = 0;
  for (int64_t i = 0; i < x.numel(); ++i)
    s += x.as<float>()[i] * x.as<float>()[i];
  a.outputs[0].as<float>()[0] = s;
  return "";
}
inline std::string kFail(const KernelArgs &) {
  return "test.fail always fails";
}

/// test.maybe_fail fails while this is set (a fault a test can toggle).
inline std::atomic<bool> &failSwitch() {
  static std::atomic<bool> f{false};
  return f;
}
inline std::string kMaybeFail(const KernelArgs &) {
  return failSwitch() ? "test.maybe_fail: switched on" : "";
}

inline void registerTestKernels() {
  KernelRegistry &r = KernelRegistry::host();
  r.add("test.mul", kMul);
  r.add("test.sub", kSub);
  r.add("test.scale", kScale);
  r.add("test.sumsq", kSumSq);
  r.add("test.fail", kFail);
  r.add("test.maybe_fail", kMaybeFail);
}

inline AttrMap scaleBy(double v) {
  AttrMap m;
  m.set("value", attrFloat(v));
  return m;
}

/// One training step of loss = sum((w*x)^2) with SGD (lr):
///   fwd: y = w*x; loss = sumsq(y)
///   bwd: dy = 2*y; gw = dy*x
///   opt: t = lr*gw; new_w = w - t
/// With `offload`, y is moved to the host after the forward (stream 2) and
/// back before dy (stream 1) with events; `dropWait` removes the wait of the
/// consumer on the h2d copy (a plan bug). `failOp` puts test.fail in the
/// optimizer phase after new_w is computed.
struct StepPlanOptions {
  bool offload = false;
  bool dropWait = false;
  bool failOp = false;
  /// test.maybe_fail in the optimizer phase, after new_w is computed.
  bool switchableFail = false;
  float lr = 0.125f;
  int64_t n = 64;
};

inline PlanData buildStepPlan(const StepPlanOptions &o = {}) {
  PlanBuilder b;
  b.setProducer("unittest");
  int w = b.buffer("w", DType::F32, {o.n}, BufferRole::Parameter);
  int x = b.buffer("x", DType::F32, {o.n}, BufferRole::Input);
  int y = b.buffer("y", DType::F32, {o.n}, BufferRole::Temporary);
  int loss = b.buffer("loss", DType::F32, {}, BufferRole::Output);
  int dy = b.buffer("dy", DType::F32, {o.n}, BufferRole::Temporary);
  int gw = b.buffer("grad:w", DType::F32, {o.n}, BufferRole::Gradient);
  int t = b.buffer("t", DType::F32, {o.n}, BufferRole::Temporary);
  int nw = b.buffer("new_w", DType::F32, {o.n}, BufferRole::Parameter);
  b.bindIn("w", w);
  b.bindIn("x", x);
  b.bindOut("loss", loss);
  b.bindOut("grad:w", gw);
  b.bindOut("w", nw);
  b.instr("test.mul", {w, x}, {y});
  b.instr("test.sumsq", {y}, {loss});
  b.endPhase("forward");
  int yIn = y;
  if (o.offload) {
    int yh = b.buffer("y.host", DType::F32, {o.n}, BufferRole::Temporary,
                      MemorySpace::Host);
    yIn = b.buffer("y.back", DType::F32, {o.n}, BufferRole::Temporary);
    int e0 = b.event(), e1 = b.event(), e2 = b.event();
    // The forward's last compute records e2 so the d2h copy follows it.
    b.instr(kOpWait, {}, {}, {}, ComputeStream, {}, e2);
    b.instr(kOpToHost, {y}, {yh}, {}, DeviceToHostStream, {e2}, e0);
    b.instr(kOpToDevice, {yh}, {yIn}, {}, HostToDeviceStream, {e0}, e1);
    std::vector<int32_t> waits;
    if (!o.dropWait)
      waits.push_back(e1);
    b.instr("test.scale", {yIn}, {dy}, scaleBy(2.0), ComputeStream, waits);
  } else {
    b.instr("test.scale", {yIn}, {dy}, scaleBy(2.0));
  }
  b.instr("test.mul", {dy, x}, {gw});
  b.endPhase("backward");
  b.instr("test.scale", {gw}, {t}, scaleBy(o.lr));
  b.instr("test.sub", {w, t}, {nw});
  if (o.failOp)
    b.instr("test.fail", {t}, {t});
  if (o.switchableFail)
    b.instr("test.maybe_fail", {t}, {t});
  b.endPhase("optimizer");
  return b.finish();
}

/// Reference for buildStepPlan: returns loss, fills grad and new w.
inline float referenceStep(const std::vector<float> &w,
                           const std::vector<float> &x, float lr,
                           std::vector<float> &grad, std::vector<float> &newW) {
  float loss = 0;
  grad.resize(w.size());
  newW.resize(w.size());
  for (size_t i = 0; i < w.size(); ++i) {
    float y = w[i] * x[i];
    loss += y * y;
    float dy = y * 2.0f;
    grad[i] = dy * x[i];
    newW[i] = w[i] - grad[i] * lr;
  }
  return loss;
}

inline std::vector<float> ramp(int64_t n, float a, float b) {
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i)
    v[size_t(i)] = a + b * float(i % 7) - 0.01f * float(i);
  return v;
}

inline std::string tempPath(const std::string &name) {
  const char *dir = std::getenv("TMPDIR");
  return std::string(dir ? dir : "/tmp") + "/offload-rt-" +
         std::to_string(::getpid()) + "-" + name;
}

} // namespace test
} // namespace rt
} // namespace offload

#endif
