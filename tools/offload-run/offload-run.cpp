//===- offload-run.cpp - Run training steps of a plan ---------------------===//
//
// Part of offload. Loads a plan, binds parameters/state/inputs from .npz
// files, runs N steps on the host or CUDA backend and reports the loss per
// step, planned vs measured peak device bytes, step time and per-stream busy
// time; --dump writes the last step's outputs to an .npz file.
//
//===----------------------------------------------------------------------===//

#include "offload/Runtime/Npz.h"
#include "offload/Runtime/Runtime.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

using namespace offload::rt;

static const char *kHelp =
    "usage: offload-run PLAN [options]\n"
    "\n"
    "Runs training steps of an offload plan file (.oflp).\n"
    "\n"
    "options:\n"
    "  --backend host|cuda  backend to run on (default host). host enforces\n"
    "                       the plan's device capacity and runs copies on\n"
    "                       their own threads; cuda needs a GPU.\n"
    "  --steps N            training steps to run (default 1)\n"
    "  --params FILE.npz    parameters, state and optimizer state, one array\n"
    "                       per input binding name (e.g. fc1.weight);\n"
    "                       optimizer state not given starts as zeros\n"
    "  --inputs FILE.npz    per-step inputs (e.g. x, target), bound every "
    "step\n"
    "  --dump FILE.npz      write the last step's outputs (loss, grad:NAME,\n"
    "                       updated NAME) under their binding names\n"
    "  --threads N          threads host kernels may use (default 1)\n"
    "  --poison             host debug mode: dead/not-yet-arrived bytes hold\n"
    "                       NaN, copies run only when waited for, so a\n"
    "                       missing wait fails the step\n"
    "  --no-race-check      skip the static check of the plan's events\n"
    "  --device-bytes N     device memory available (host backend: simulate\n"
    "                       a smaller device; creation fails if the plan "
    "needs\n"
    "                       more)\n"
    "  --seed N             value of the plan's rng_seed input (dropout's\n"
    "                       Philox key) when --inputs does not give one\n"
    "                       (default 0)\n"
    "  --strict-params      fail on a --params array the plan does not bind\n"
    "                       (default: skip it with a note, so one parameter\n"
    "                       file can serve plans that use part of a model)\n"
    "  --by-phase           run each step phase by phase (forward, backward or\n"
    "                       backward_input then backward_weight, optimizer)\n"
    "                       through Session::runPhase, as a pipeline\n"
    "                       schedule would, instead of in one call\n"
    "  --dump-plan          print a readable listing of the plan and exit\n"
    "  --help               this text\n";

static int fail(const std::string &msg) {
  std::fprintf(stderr, "offload-run: error: %s\n", msg.c_str());
  return 1;
}

int main(int argc, char **argv) {
  std::string planPath, backend = "host", paramsPath, inputsPath, dumpPath;
  int steps = 1;
  bool dumpPlan = false, strictParams = false, byPhase = false;
  long long seed = 0;
  SessionOptions opts;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&](const char *flag) -> const char * {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "offload-run: error: %s needs a value\n", flag);
        std::exit(1);
      }
      return argv[++i];
    };
    auto number = [&](const char *flag) -> long long {
      const char *v = value(flag);
      char *end = nullptr;
      long long n = std::strtoll(v, &end, 10);
      if (!*v || *end || n < 0) {
        std::fprintf(stderr,
                     "offload-run: error: %s: '%s' is not a "
                     "non-negative integer\n",
                     flag, v);
        std::exit(1);
      }
      return n;
    };
    if (a == "--help" || a == "-h") {
      std::fputs(kHelp, stdout);
      return 0;
    } else if (a == "--backend") {
      backend = value("--backend");
    } else if (a == "--steps") {
      steps = int(number("--steps"));
    } else if (a == "--params") {
      paramsPath = value("--params");
    } else if (a == "--inputs") {
      inputsPath = value("--inputs");
    } else if (a == "--dump") {
      dumpPath = value("--dump");
    } else if (a == "--threads") {
      opts.numThreads = std::max(1, int(number("--threads")));
    } else if (a == "--seed") {
      seed = number("--seed");
    } else if (a == "--by-phase") {
      byPhase = true;
    } else if (a == "--strict-params") {
      strictParams = true;
    } else if (a == "--poison") {
      opts.poison = true;
    } else if (a == "--no-race-check") {
      opts.checkRaces = false;
    } else if (a == "--device-bytes") {
      opts.deviceMemoryBytes = uint64_t(number("--device-bytes"));
    } else if (a == "--dump-plan") {
      dumpPlan = true;
    } else if (!a.empty() && a[0] == '-') {
      return fail("unknown option '" + a + "' (see --help)");
    } else if (planPath.empty()) {
      planPath = a;
    } else {
      return fail("more than one plan given ('" + planPath + "', '" + a + "')");
    }
  }
  if (planPath.empty())
    return fail("no plan file given (see --help)");

  auto plan = Plan::load(planPath);
  if (!plan)
    return fail(plan.message());
  if (dumpPlan) {
    std::fputs((*plan)->dump().c_str(), stdout);
    return 0;
  }
  auto session = Session::create(*plan, backend, opts);
  if (!session)
    return fail(session.message());
  Session &s = **session;

  for (const std::string *path : {&paramsPath, &inputsPath}) {
    if (path->empty())
      continue;
    auto arrays = readNpz(*path);
    if (!arrays)
      return fail(arrays.message());
    for (auto &a : *arrays) {
      DType dt;
      std::vector<int64_t> shape;
      if (path == &paramsPath && !strictParams &&
          !s.inputType(a.first, dt, shape).ok()) {
        std::printf("note: %s: '%s' is not an input of this plan; skipped\n",
                    path->c_str(), a.first.c_str());
        continue;
      }
      if (Status st = s.bind(a.first, a.second); !st.ok())
        return fail(*path + ": " + st.message());
    }
  }
  // The dropout seed, unless the inputs gave one.
  for (const std::string &name : s.missingBindings())
    if (name == "rng_seed") {
      Tensor t(DType::I64, {});
      t.as<int64_t>()[0] = seed;
      if (Status st = s.bind(name, t); !st.ok())
        return fail(st.message());
    }
  // Optimizer state starts as zeros (as torch.optim does).
  for (const auto &b : s.inputBindings())
    if (b.second == BufferRole::OptimizerState && !s.store().has(b.first))
      (void)s.bindZeros(b.first);

  for (int step = 0; step < steps; ++step) {
    if (byPhase) {
      for (const PhaseDesc &ph : s.plan().data().phases)
        if (Status st = s.runPhase(ph.name); !st.ok())
          return fail("step " + std::to_string(step) + ", phase " + ph.name + ": " +
                      st.message());
      if (Status st = s.finishStep(); !st.ok())
        return fail("step " + std::to_string(step) + ": " + st.message());
    } else if (Status st = s.step(); !st.ok()) {
      return fail("step " + std::to_string(step) + ": " + st.message());
    }
    auto loss = s.loss();
    auto busy = s.streamBusySeconds();
    std::printf("step %d: loss %.9g  time %.6f s  busy compute %.6f s h2d "
                "%.6f s d2h %.6f s",
                step, loss ? *loss : 0.0 / 0.0, s.lastStepSeconds(), busy[0],
                busy[1], busy[2]);
    double overlap = s.copyComputeOverlapSeconds();
    if (overlap >= 0 && busy[1] + busy[2] > 0)
      std::printf("  copies overlapping compute %.6f s", overlap);
    std::printf("\n");
  }
  std::printf("peak device bytes: planned %llu measured %llu%s\n",
              (unsigned long long)s.plannedPeakDeviceBytes(),
              (unsigned long long)s.measuredPeakDeviceBytes(),
              steps == 0 ? " (no step run)" : "");
  if (!dumpPath.empty()) {
    NamedTensors outs;
    for (const std::string &name : s.outputNames()) {
      auto t = s.output(name);
      if (!t)
        return fail(t.message());
      outs.emplace_back(name, t.take());
    }
    if (Status st = writeNpz(dumpPath, outs); !st.ok())
      return fail(st.message());
    std::printf("wrote %zu arrays to %s\n", outs.size(), dumpPath.c_str());
  }
  return 0;
}
