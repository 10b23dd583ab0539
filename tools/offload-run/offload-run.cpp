//===- offload-run.cpp - Run training steps of a plan ---------------------===//
//
// Part of offload. Loads a plan, binds parameters/state/inputs from .npz
// files, runs N steps on the host or CUDA backend and reports the loss per
// step, planned vs measured peak device bytes, step time and per-stream busy
// time; --dump writes the last step's outputs to an .npz file; --check
// reports, without running anything, which ops each backend lacks;
// --calibrate measures this machine as the planner's `host` target and writes
// the target file that `offload-opt ... target=host` reads.
//
//===----------------------------------------------------------------------===//

#include "offload/Runtime/Calibration.h"
#include "offload/Runtime/Communicator.h"
#include "offload/Runtime/Npz.h"
#include "offload/Runtime/Runtime.h"
#include "offload/Support/OutputFiles.h"

#include <algorithm>

#include <cerrno>
#include <cmath>
#include <climits>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <new>
#include <string>
#include <system_error>
#include <thread>
#include <ctime>

using namespace offload::rt;

static const char *kHelp =
    "usage: offload-run PLAN [PLAN...] [options]\n"
    "       offload-run --calibrate FILE.json [--threads N]\n"
    "\n"
    "Runs training steps of an offload plan file (.oflp). With several\n"
    "plans (one per task of a multi-task model), step k runs plan k mod P,\n"
    "and all plans share one parameter store: parameters, state and\n"
    "optimizer state that several plans bind are the same tensors.\n"
    "\n"
    "options:\n"
    "  --backend host|cuda  backend to run on (default host). host enforces\n"
    "                       the plan's device capacity and runs copies on\n"
    "                       their own threads; cuda needs a GPU.\n"
    "  --steps N            training steps to run, 0 to 2147483647\n"
    "                       (default 1)\n"
    "  --params FILE.npz    parameters, state and optimizer state, one array\n"
    "                       per input binding name (e.g. fc1.weight);\n"
    "                       optimizer state not given starts as zeros\n"
    "  --inputs FILE.npz    per-step inputs (e.g. x, target), bound every "
    "step;\n"
    "                       with several plans give it once for all or once\n"
    "                       per plan, in plan order\n"
    "  --dump FILE.npz      write the last step's outputs (loss, grad:NAME,\n"
    "                       updated NAME) under their binding names; with\n"
    "                       several plans each plan's as planP/NAME, then\n"
    "                       every parameter store entry under its name\n"
    "  --threads N          threads host kernels may use, 1 to 1024\n"
    "                       (default 1); results may differ in the last bits\n"
    "                       between thread counts, never between runs\n"
    "  --poison             host debug mode: dead/not-yet-arrived bytes hold\n"
    "                       NaN, copies run only when waited for, so a\n"
    "                       missing wait fails the step\n"
    "  --no-race-check      skip the static check of the plan's events\n"
    "  --emulate-link B     host backend: emulate a host<->device link of B\n"
    "                       bytes per second per direction (a number >= 1,\n"
    "                       e.g. 2e9 for 2 GB/s): every copy then takes at\n"
    "                       least its bytes / B seconds on its copy thread,\n"
    "                       the two directions overlapping (default: copies\n"
    "                       run at memcpy speed)\n"
    "  --check-finite       stop at the first NaN or infinity: in a --params\n"
    "                       or --inputs array, or written by an instruction\n"
    "                       (named with its step, op and buffer; host backend,\n"
    "                       one extra read of every output). Without it a\n"
    "                       non-finite array or loss is a warning naming the\n"
    "                       array or the first step\n"
    "  --device-bytes N|auto  device memory available, N >= 1 bytes (host\n"
    "                       backend: simulate a smaller device; creation\n"
    "                       fails if the plan needs more); auto (the\n"
    "                       default): the plan's device arena on the host\n"
    "                       backend, free device memory on cuda\n"
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
    "  --workspace-bytes N  give a plan without a workspace buffer one of N\n"
    "                       bytes, appended to its device arena: the scratch\n"
    "                       that the CUDA backend hands to cuDNN and cuBLAS\n"
    "                       (the planned and measured peaks count it)\n"
    "  --report-host-memory  after the run, print the process's peak resident\n"
    "                       memory (VmHWM), its resident memory at start and\n"
    "                       what the run had to hold: the plan arenas kept in\n"
    "                       host memory, the parameter store and the\n"
    "                       session's own tensors, in bytes (Linux /proc)\n"
    "  --profile            run each instruction alone (every stream drained\n"
    "                       after it) and, after the run, print where the\n"
    "                       last step's time went: seconds per op and the 20\n"
    "                       slowest instructions with their shapes. Profiled\n"
    "                       steps are slower than plain ones: streams do not\n"
    "                       overlap, and each wait costs a synchronisation\n"
    "  --world-size N       data parallel (docs/data_parallel.md): this\n"
    "                       process is one of N ranks (1 to 65536) that\n"
    "                       average their gradients in the plan's\n"
    "                       offload.all_reduce buckets over gloo (TCP);\n"
    "                       with --rank R (0 <= R < N). Default: RANK and\n"
    "                       WORLD_SIZE from the launcher's environment\n"
    "                       (torchrun --no-python, or mpirun's\n"
    "                       OMPI_COMM_WORLD_*), else one rank, where every\n"
    "                       bucket's mean is itself (--world-size 1 with\n"
    "                       --rendezvous still runs the engine: gloo, or\n"
    "                       NCCL on cuda). A ZeRO-1 plan (--offload-data-\n"
    "                       parallel zero=1 world-size=W) runs only with N = W\n"
    "                       (refused otherwise, naming both); its optimizer\n"
    "                       state in --params / --dump is this rank's shards\n"
    "  --rank R             this process's rank (with --world-size)\n"
    "  --rendezvous file:DIR  where the ranks meet (a gloo FileStore in a\n"
    "                       directory every rank sees, fresh for each job;\n"
    "                       default $OFFLOAD_RENDEZVOUS, else\n"
    "                       file:$TMPDIR/offload-rdzv-MASTER_ADDR-MASTER_PORT)\n"
    "  --collective-timeout S  seconds the rendezvous and each collective wait\n"
    "                       for the other ranks before the step fails naming\n"
    "                       the collective (default\n"
    "                       $OFFLOAD_COLLECTIVE_TIMEOUT, else 60)\n"
    "  --dump-plan          print a readable listing of the plan and exit\n"
    "  --check              load the plan(s) and report, per backend, the ops\n"
    "                       it has no kernel for, without running a step\n"
    "                       (needs no GPU); exits 1 if the --backend one\n"
    "                       lacks any or is not available\n"
    "  --calibrate FILE.json  run no plan: measure this machine as the\n"
    "                       planner's `host` target (memory and copy rates,\n"
    "                       GEMM and convolution throughput, per-op rates of\n"
    "                       the host kernels, copy latency; 1-3 s) and write\n"
    "                       them as a target file (docs/planner.md). With\n"
    "                       --threads N the kernels run with N threads, as\n"
    "                       `offload-run --threads N` will run the plan\n"
    "                       (default: every hardware thread). The planner's\n"
    "                       target=host reads $OFFLOAD_HOST_TARGET, else\n"
    "                       ${XDG_CACHE_HOME:-~/.cache}/offload/host-target.json:\n"
    "                       calibrate into that path (its folder must exist)\n"
    "  --help               this text\n";

/// Largest --threads: far beyond any host (the pool starts one thread per
/// requested thread), small enough that a typo is an error.
constexpr unsigned long long kMaxThreads = 1024;
/// Largest --workspace-bytes: 2^48, the plan format's bound on a buffer.
constexpr unsigned long long kMaxWorkspaceBytes = 1ull << 48;

/// A field of /proc/self/status in bytes ("VmHWM", "VmRSS"), or -1 when
/// it cannot be read (not Linux).
static long long procStatusBytes(const char *field) {
  FILE *f = std::fopen("/proc/self/status", "r");
  if (!f)
    return -1;
  char line[256];
  long long kb = -1;
  size_t n = std::strlen(field);
  while (std::fgets(line, sizeof(line), f))
    if (std::strncmp(line, field, n) == 0 && line[n] == ':') {
      kb = std::atoll(line + n + 1);
      break;
    }
  std::fclose(f);
  return kb < 0 ? -1 : kb * 1024;
}

static int fail(const std::string &msg) {
  std::fprintf(stderr, "offload-run: error: %s\n", msg.c_str());
  return 1;
}

/// Where a float array holds NaN or infinity: "" when it holds none, else
/// "'NAME' holds N non-finite values (first: nan at element K)".
static std::string nonFinite(const std::string &name, const Tensor &t) {
  if (t.dtype() != DType::F32 && t.dtype() != DType::F64 && !isLowFloat(t.dtype()))
    return "";
  int64_t n = t.numel(), bad = 0, first = -1;
  for (int64_t i = 0; i < n; ++i)
    if (!std::isfinite(t.at(i)) && bad++ == 0)
      first = i;
  if (!bad)
    return "";
  double v = t.at(first);
  return "'" + name + "' holds " + std::to_string(bad) + " non-finite value" +
         (bad == 1 ? "" : "s") + " (first: " +
         (std::isnan(v) ? "nan" : v > 0 ? "inf" : "-inf") + " at element " +
         std::to_string(first) + ")";
}

/// Now in UTC, ISO 8601 ("2026-11-27T03:10:00Z").
static std::string utcNow() {
  std::time_t now = std::time(nullptr);
  std::tm tm{};
  char buf[32] = "unknown time";
  if (gmtime_r(&now, &tm))
    std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

/// --calibrate: measures this machine with `threads` kernel threads (0:
/// every hardware thread) and writes the host target file `path`, checked
/// before the 1-3 s of measuring and committed only when written whole.
static int calibrateMain(const std::string &path, int threads) {
  offload::OutputFiles outputs;
  outputs.deferUntilCommit();
  if (std::string e = outputs.claim(path, "--calibrate"); !e.empty())
    return fail("--calibrate: " + e);
  HostCalibration cal = calibrateHost(threads);
  unsigned hardware = std::max(1u, std::thread::hardware_concurrency());
  std::string source = "calibrated by offload-run --calibrate at " + utcNow() + " on " +
                       hostCpuName() + " (" + std::to_string(hardware) +
                       " hardware threads) with " + std::to_string(cal.threads) +
                       " kernel thread" + (cal.threads == 1 ? "" : "s");
  std::string json = hostTargetFileJson(cal, source);
  if (std::string e = outputs.write(path, json.data(), json.size(), "--calibrate"); !e.empty())
    return fail("--calibrate: " + e);
  if (std::string e = outputs.commit(); !e.empty())
    return fail("--calibrate: " + e);
  std::printf("wrote the host target (%s) to %s\n", source.c_str(), path.c_str());
  return 0;
}

/// "f32[8,1024,768]".
static std::string bufferShape(const PlanData &d, int id) {
  if (id < 0)
    return "-";
  const BufferDesc &b = d.buffers[size_t(id)];
  std::string out = std::string(dtypeName(b.dtype)) + "[";
  for (size_t k = 0; k < b.shape.size(); ++k)
    out += (k ? "," : "") + std::to_string(b.shape[k]);
  return out + "]";
}

/// --profile's table: seconds per op (summed over the step's instructions)
/// and the slowest instructions, from Session::instructionSeconds.
static void printProfile(const PlanData &d, const std::vector<double> &sec,
                         const std::string &tag) {
  struct OpRow {
    std::string op;
    int count = 0;
    double seconds = 0;
  };
  std::vector<OpRow> rows;
  std::map<std::string, size_t> index;
  double total = 0;
  for (size_t i = 0; i < sec.size(); ++i) {
    const std::string &op = d.instructions[i].op;
    auto [it, fresh] = index.try_emplace(op, rows.size());
    if (fresh)
      rows.push_back({op, 0, 0});
    rows[it->second].count++;
    rows[it->second].seconds += sec[i];
    total += sec[i];
  }
  std::stable_sort(rows.begin(), rows.end(), [](const OpRow &a,
                                                const OpRow &b) {
    return a.seconds > b.seconds;
  });
  std::printf("%sprofile of the last step: %zu instructions, %.6f s "
              "(each instruction alone)\n",
              tag.c_str(), sec.size(), total);
  std::printf("  %-34s %6s %12s %7s %12s\n", "op", "count", "seconds", "share",
              "mean s");
  for (const OpRow &r : rows)
    std::printf("  %-34s %6d %12.6f %6.1f%% %12.6f\n", r.op.c_str(), r.count,
                r.seconds, total > 0 ? 100 * r.seconds / total : 0.0,
                r.seconds / r.count);
  std::vector<size_t> order(sec.size());
  for (size_t i = 0; i < order.size(); ++i)
    order[i] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return sec[a] > sec[b]; });
  std::printf("  slowest instructions:\n");
  for (size_t k = 0; k < order.size() && k < 20; ++k) {
    const InstructionDesc &in = d.instructions[order[k]];
    std::string ins, outs;
    for (int id : in.inputs)
      ins += (ins.empty() ? "" : ", ") + bufferShape(d, id);
    for (int id : in.outputs)
      outs += (outs.empty() ? "" : ", ") + bufferShape(d, id);
    std::printf("  %12.6f s  %%%zu %s(%s) -> %s\n", sec[order[k]], order[k],
                in.op.c_str(), ins.c_str(), outs.c_str());
  }
}

static int runMain(int argc, char **argv) {
  // Resident memory before anything is loaded: the binary and its shared
  // libraries (the CUDA libraries alone are ~200 MB when linked).
  const long long startRss = procStatusBytes("VmRSS");
  std::vector<std::string> planPaths, inputsPaths;
  std::string backend = "host", paramsPath, dumpPath, calibratePath;
  bool threadsGiven = false;
  int steps = 1;
  bool dumpPlan = false, strictParams = false, byPhase = false, check = false;
  bool reportHostMemory = false;
  long long seed = 0;
  uint64_t workspaceBytes = 0;
  SessionOptions opts;
  long long worldSize = -1, rank = -1;
  std::string rendezvous;
  double collectiveTimeout = -1;
  // Outputs stay in the arena; --dump streams the last step's from there.
  opts.retainOutputs = false;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&](const char *flag) -> const char * {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "offload-run: error: %s needs a value\n", flag);
        std::exit(1);
      }
      return argv[++i];
    };
    // A decimal integer in [lo, hi]; anything else (a sign, a suffix, a
    // value that does not fit 64 bits) is an error naming the flag, never a
    // wrapped or saturated value.
    auto number = [&](const char *flag, unsigned long long lo,
                      unsigned long long hi) -> unsigned long long {
      const char *v = value(flag);
      char *end = nullptr;
      errno = 0;
      unsigned long long n = std::strtoull(v, &end, 10);
      bool digits = *v >= '0' && *v <= '9';
      if (!digits || *end || errno == ERANGE || n < lo || n > hi) {
        std::fprintf(stderr,
                     "offload-run: error: %s: '%s' is not an integer in "
                     "[%llu, %llu]\n",
                     flag, v, lo, hi);
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
      steps = int(number("--steps", 0, INT_MAX));
    } else if (a == "--params") {
      paramsPath = value("--params");
    } else if (a == "--inputs") {
      inputsPaths.push_back(value("--inputs"));
    } else if (a == "--dump") {
      dumpPath = value("--dump");
    } else if (a == "--threads") {
      opts.numThreads = int(number("--threads", 1, kMaxThreads));
      threadsGiven = true;
    } else if (a == "--calibrate") {
      calibratePath = value("--calibrate");
      if (calibratePath.empty())
        return fail("--calibrate needs the path of the target file to write");
    } else if (a == "--seed") {
      seed = (long long)number("--seed", 0, LLONG_MAX);
    } else if (a == "--profile") {
      opts.profile = true;
    } else if (a == "--by-phase") {
      byPhase = true;
    } else if (a == "--strict-params") {
      strictParams = true;
    } else if (a == "--poison") {
      opts.poison = true;
    } else if (a == "--check-finite") {
      opts.checkFinite = true;
    } else if (a == "--emulate-link") {
      // Bytes per second: a finite decimal number > 0 (2e9, 2000000000).
      const char *v = value("--emulate-link");
      char *end = nullptr;
      errno = 0;
      double rate = std::strtod(v, &end);
      if (end == v || *end || errno == ERANGE || !std::isfinite(rate) ||
          !(rate >= 1))
        return fail(std::string("--emulate-link: '") + v +
                    "' is not a link rate; give bytes per second as a "
                    "number >= 1 (e.g. 2e9 for 2 GB/s)");
      opts.emulatedLinkBytesPerSecond = rate;
    } else if (a == "--no-race-check") {
      opts.checkRaces = false;
    } else if (a == "--device-bytes") {
      // 0 is SessionOptions' "the backend's own"; on the command line that
      // is spelled `auto`, and 0 bytes is refused rather than read as it.
      if (i + 1 < argc && std::string(argv[i + 1]) == "auto") {
        ++i;
        opts.deviceMemoryBytes = 0;
      } else if (i + 1 < argc && std::string(argv[i + 1]) == "0") {
        return fail("--device-bytes 0: a device of 0 bytes holds no plan; "
                    "give the bytes available, or 'auto' for the backend's "
                    "own (the plan's device arena on the host backend)");
      } else {
        opts.deviceMemoryBytes = number("--device-bytes", 1, UINT64_MAX);
      }
    } else if (a == "--workspace-bytes") {
      workspaceBytes = number("--workspace-bytes", 0, kMaxWorkspaceBytes);
    } else if (a == "--report-host-memory") {
      reportHostMemory = true;
    } else if (a == "--world-size") {
      worldSize = (long long)number("--world-size", 1, 65536);
    } else if (a == "--rank") {
      rank = (long long)number("--rank", 0, 65535);
    } else if (a == "--rendezvous") {
      rendezvous = value("--rendezvous");
    } else if (a == "--collective-timeout") {
      const char *v = value("--collective-timeout");
      char *end = nullptr;
      collectiveTimeout = std::strtod(v, &end);
      if (end == v || *end || !(collectiveTimeout > 0) || collectiveTimeout > 86400)
        return fail(std::string("--collective-timeout: '") + v +
                    "' is not a number of seconds in (0, 86400]");
    } else if (a == "--dump-plan") {
      dumpPlan = true;
    } else if (a == "--check") {
      check = true;
    } else if (!a.empty() && a[0] == '-') {
      return fail("unknown option '" + a + "' (see --help)");
    } else {
      planPaths.push_back(a);
    }
  }
  if (!calibratePath.empty()) {
    if (!planPaths.empty())
      return fail("--calibrate measures this machine and runs no plan; give it without "
                  "plan files (" + planPaths[0] + ")");
    return calibrateMain(calibratePath, threadsGiven ? opts.numThreads : 0);
  }
  if (planPaths.empty())
    return fail("no plan file given (see --help)");
  // Data parallel: the flags, else the launcher's environment.
  {
    bool fromEnv = false;
    auto env = communicatorOptionsFromEnvironment(fromEnv);
    if (!env)
      return fail(env.message());
    CommunicatorOptions co = *env;
    if ((worldSize >= 0) != (rank >= 0))
      return fail("--world-size and --rank go together");
    if (worldSize >= 0) {
      co.worldSize = int(worldSize);
      co.rank = int(rank);
      if (co.rank >= co.worldSize)
        return fail("--rank " + std::to_string(rank) + " is not below --world-size " +
                    std::to_string(worldSize));
    }
    if (!rendezvous.empty())
      co.rendezvous = rendezvous;
    else if (const char *r = std::getenv("OFFLOAD_RENDEZVOUS"); r && *r)
      co.rendezvous = r;
    // An explicit --world-size 1 with a rendezvous still joins a one-rank
    // job: the collective engine runs (gloo; NCCL on cuda), bit-identical to
    // no engine.
    bool explicitOne = worldSize == 1 && !co.rendezvous.empty();
    if (co.worldSize > 1 && co.rendezvous.empty())
      return fail("--world-size " + std::to_string(co.worldSize) +
                  " needs --rendezvous file:DIR (or OFFLOAD_RENDEZVOUS): where the ranks meet");
    if (collectiveTimeout > 0)
      co.timeoutSeconds = collectiveTimeout;
    if (((worldSize >= 0 || fromEnv) && co.worldSize > 1) || explicitOne) {
      auto comm = createGlooCommunicator(co);
      if (!comm)
        return fail(comm.message());
      opts.communicator = *comm;
      // One GPU per rank: torchrun's LOCAL_RANK picks it (cuda backend).
      if (const char *lr = std::getenv("LOCAL_RANK"); lr && *lr) {
        char *end = nullptr;
        long v = std::strtol(lr, &end, 10);
        if (!end || *end || v < 0 || v > 1024)
          return fail(std::string("LOCAL_RANK='") + lr + "' is not a device ordinal");
        opts.cudaDevice = int(v);
      }
    }
  }
  // --dump is checked before any step runs and written only when every step
  // succeeded (include/offload/Support/OutputFiles.h).
  // It may be none of the input files (same path, or same device and
  // inode).
  offload::OutputFiles outputs;
  outputs.deferUntilCommit();
  for (const std::string &path : planPaths)
    (void)outputs.addInput(path, "a plan file");
  (void)outputs.addInput(paramsPath, "the --params file");
  for (const std::string &path : inputsPaths)
    (void)outputs.addInput(path, "an --inputs file");
  std::string dumpTmp;
  if (!dumpPath.empty())
    if (std::string e = outputs.stage(dumpPath, dumpTmp, "--dump"); !e.empty())
      return fail("--dump: " + e);
  size_t numPlans = planPaths.size();
  if (inputsPaths.size() > 1 && inputsPaths.size() != numPlans)
    return fail("--inputs given " + std::to_string(inputsPaths.size()) +
                " times for " + std::to_string(numPlans) +
                " plans: give it once for all plans or once per plan");

  std::vector<std::shared_ptr<const Plan>> plans;
  for (const std::string &path : planPaths) {
    auto plan = Plan::load(path);
    if (!plan)
      return fail(plan.message());
    if (workspaceBytes && (*plan)->data().workspaceBuffer < 0) {
      PlanData d = (*plan)->data();
      if (Status st = addWorkspace(d, workspaceBytes); !st.ok())
        return fail(path + ": " + st.message());
      plan = Plan::fromData(std::move(d));
      if (!plan)
        return fail(path + ": " + plan.message());
    }
    if (dumpPlan) {
      if (numPlans > 1)
        std::printf("== %s\n", path.c_str());
      std::fputs((*plan)->dump().c_str(), stdout);
    }
    plans.push_back(plan.take());
  }
  if (dumpPlan && !check)
    return 0;

  if (check) {
    // Op coverage per backend: those compiled in, and the chosen one.
    std::vector<std::string> backends = availableBackends();
    if (std::find(backends.begin(), backends.end(), backend) == backends.end())
      backends.push_back(backend);
    bool ok = true;
    for (size_t p = 0; p < numPlans; ++p) {
      const PlanData &d = plans[p]->data();
      uint64_t ws = d.workspaceBuffer >= 0
                        ? d.buffers[size_t(d.workspaceBuffer)].size
                        : 0;
      std::printf("plan %s: %zu instructions, %zu distinct ops, device arena "
                  "%llu bytes, workspace %llu bytes\n",
                  planPaths[p].c_str(), d.instructions.size(),
                  plans[p]->opNames().size(),
                  (unsigned long long)d.deviceCapacity,
                  (unsigned long long)ws);
      for (const std::string &b : backends) {
        auto missing = missingOps(*plans[p], b);
        std::string tag = b == backend ? " (chosen)" : "";
        if (!missing) {
          std::printf("  %s%s: %s\n", b.c_str(), tag.c_str(),
                      missing.message().c_str());
          ok &= b != backend;
        } else if (missing->empty()) {
          std::printf("  %s%s: has a kernel for every op\n", b.c_str(),
                      tag.c_str());
        } else {
          std::string list;
          for (const std::string &m : *missing)
            list += (list.empty() ? "" : ", ") + m;
          std::printf("  %s%s: no kernel for %zu op%s: %s\n", b.c_str(),
                      tag.c_str(), missing->size(),
                      missing->size() == 1 ? "" : "s", list.c_str());
          ok &= b != backend;
        }
      }
    }
    return ok ? 0 : 1;
  }

  // One session per plan, all on one parameter store.
  auto store = std::make_shared<ParameterStore>();
  std::vector<std::unique_ptr<Session>> sessions;
  for (size_t p = 0; p < numPlans; ++p) {
    auto session = Session::create(plans[p], backend, opts, store);
    if (!session)
      return fail((numPlans > 1 ? planPaths[p] + ": " : std::string()) +
                  session.message());
    sessions.push_back(session.take());
  }
  auto planTag = [&](size_t p) {
    return numPlans > 1 ? planPaths[p] + ": " : std::string();
  };
  // Plans that share a store must agree on what each shared name holds.
  for (size_t p = 0; p < numPlans; ++p)
    for (const auto &b : sessions[p]->inputBindings())
      for (size_t q = 0; q < p; ++q) {
        DType dp, dq;
        std::vector<int64_t> sp, sq;
        if (!sessions[q]->inputType(b.first, dq, sq).ok())
          continue;
        (void)sessions[p]->inputType(b.first, dp, sp);
        if (dp != dq || sp != sq)
          return fail("plans '" + planPaths[q] + "' and '" + planPaths[p] +
                      "' share the store name '" + b.first +
                      "' but disagree on it: " + typeString(dq, sq) + " vs " +
                      typeString(dp, sp));
      }

  // Parameters go to the shared store (through any plan that binds them).
  // Each array is read straight into the tensor that the store keeps (no
  // copy); one the plans do not bind is freed before the next is read.
  if (!paramsPath.empty()) {
    auto ownerOf = [&](const std::string &name) -> Session * {
      DType dt;
      std::vector<int64_t> shape;
      for (auto &s : sessions)
        if (s->inputType(name, dt, shape).ok())
          return s.get();
      return nullptr;
    };
    // An array no plan binds is skipped before it is inflated (a 2 GiB
    // member of another model's file costs nothing).
    std::string notBound;
    auto want = [&](const std::string &name) {
      if (ownerOf(name))
        return true;
      if (strictParams) {
        if (notBound.empty())
          notBound = name;
        return false;
      }
      std::printf("note: %s: '%s' is not an input of %s; skipped\n",
                  paramsPath.c_str(), name.c_str(),
                  numPlans > 1 ? "any of the plans" : "this plan");
      return false;
    };
    Status st = forEachNpzArray(paramsPath, want, [&](std::string name, Tensor t) {
      Session *owner = ownerOf(name);
      if (!owner)
        return Status::error(paramsPath + ": '" + name + "' is not bound");
      if (std::string nf = nonFinite(name, t); !nf.empty()) {
        if (opts.checkFinite)
          return Status::error(paramsPath + ": " + nf + " (--check-finite)");
        std::fprintf(stderr, "offload-run: warning: %s: %s\n",
                     paramsPath.c_str(), nf.c_str());
      }
      if (Status bs = owner->bind(name, std::move(t)); !bs.ok())
        return Status::error(paramsPath + ": " + bs.message());
      return Status::success();
    });
    if (!st.ok())
      return fail(st.message());
    if (!notBound.empty())
      return fail(paramsPath + ": '" + notBound + "' is not an input of " +
                  (numPlans > 1 ? "any of the plans" : "this plan"));
  }
  for (size_t p = 0; p < numPlans; ++p) {
    Session &s = *sessions[p];
    if (!inputsPaths.empty()) {
      const std::string &path = inputsPaths[inputsPaths.size() == 1 ? 0 : p];
      Status st = forEachNpzArray(path, [&](std::string name, Tensor t) {
        if (std::string nf = nonFinite(name, t);
            !nf.empty() && (p == 0 || inputsPaths.size() > 1)) {
          if (opts.checkFinite)
            return Status::error(path + ": " + nf + " (--check-finite)");
          std::fprintf(stderr, "offload-run: warning: %s: %s\n", path.c_str(),
                       nf.c_str());
        }
        if (Status bs = s.bind(name, std::move(t)); !bs.ok())
          return Status::error(planTag(p) + path + ": " + bs.message());
        return Status::success();
      });
      if (!st.ok())
        return fail(st.message());
    }
    // The dropout seed, unless the inputs gave one.
    for (const std::string &name : s.missingBindings())
      if (name == "rng_seed") {
        Tensor t(DType::I64, {});
        t.as<int64_t>()[0] = seed;
        if (Status st = s.bind(name, t); !st.ok())
          return fail(planTag(p) + st.message());
      }
    // Optimizer state starts as zeros (as torch.optim does).
    for (const auto &b : s.inputBindings())
      if (b.second == BufferRole::OptimizerState && !s.store().has(b.first))
        (void)s.bindZeros(b.first);
  }

  if (opts.checkFinite && backend != "host")
    return fail("--check-finite runs on the host backend only");
  bool warnedNonFinite = false;
  // fp16 loss scaling (--offload-autodiff precision=fp16-mixed): the step
  // counts its skipped updates in the store's amp.skipped_steps.
  auto storeI64 = [&](const char *name) -> long long {
    const Tensor *t = store->get(name);
    return t && t->dtype() == DType::I64 && t->numel() == 1 ? t->as<int64_t>()[0] : -1;
  };
  long long skippedBefore = storeI64("amp.skipped_steps");
  long long skippedAtStart = skippedBefore;
  for (int step = 0; step < steps; ++step) {
    size_t p = size_t(step) % numPlans;
    Session &s = *sessions[p];
    std::string where = "step " + std::to_string(step) +
                        (numPlans > 1 ? " [plan " + std::to_string(p) + " " +
                                            planPaths[p] + "]"
                                      : std::string());
    if (byPhase) {
      for (const PhaseDesc &ph : s.plan().data().phases)
        if (Status st = s.runPhase(ph.name); !st.ok())
          return fail(where + ", phase " + ph.name + ": " + st.message());
      if (Status st = s.finishStep(); !st.ok())
        return fail(where + ": " + st.message());
    } else if (Status st = s.step(); !st.ok()) {
      return fail(where + ": " + st.message());
    }
    auto loss = s.loss();
    if (loss && !std::isfinite(*loss) && !warnedNonFinite) {
      // The first step whose loss is not finite; --check-finite names the
      // instruction and tensor that first held such a value.
      warnedNonFinite = true;
      std::fflush(stdout); // keep the warning after the earlier step lines
      std::fprintf(stderr,
                   "offload-run: warning: %s: the loss is %s, the first "
                   "non-finite loss of this run; rerun with --check-finite to "
                   "stop at the instruction that wrote the first non-finite "
                   "value\n",
                   where.c_str(), std::isnan(*loss) ? "nan" : "infinite");
    }
    auto busy = s.streamBusySeconds();
    std::printf("%s: loss %.9g  time %.6f s  busy compute %.6f s h2d "
                "%.6f s d2h %.6f s",
                where.c_str(), loss ? *loss : 0.0 / 0.0, s.lastStepSeconds(),
                busy[0], busy[1], busy[2]);
    if (busy[CommStream] > 0) {
      std::printf("  comm %.6f s", busy[CommStream]);
      double hidden = s.commComputeOverlapSeconds();
      if (hidden >= 0)
        std::printf(" (%.6f s under compute)", hidden);
    }
    double overlap = s.copyComputeOverlapSeconds();
    if (overlap >= 0 && busy[1] + busy[2] > 0)
      std::printf("  copies overlapping compute %.6f s", overlap);
    // The plan's instructions alone (what the planner simulates), without
    // the step's uploads at its start and its commit to the store.
    std::printf("  instructions %.6f s", s.lastRunSeconds());
    if (long long skipped = storeI64("amp.skipped_steps"); skipped >= 0) {
      const Tensor *scale = store->get("amp.scale");
      std::printf("  loss scale %.9g", scale && scale->dtype() == DType::F32
                                           ? double(scale->as<float>()[0])
                                           : 0.0 / 0.0);
      if (skippedBefore >= 0 && skipped > skippedBefore)
        std::printf("  SKIPPED (inf/NaN gradients; parameters and optimizer state unchanged)");
      skippedBefore = skipped;
    }
    std::printf("\n");
  }
  if (long long skipped = storeI64("amp.skipped_steps"); skipped >= 0 && steps > 0) {
    const Tensor *scale = store->get("amp.scale");
    std::printf("loss scaling: %lld of %d steps skipped (inf/NaN gradients), %lld in the "
                "store's amp.skipped_steps; loss scale %g\n",
                skipped - std::max(skippedAtStart, 0LL), steps, skipped,
                scale && scale->dtype() == DType::F32 ? double(scale->as<float>()[0])
                                                      : 0.0 / 0.0);
  }
  if (opts.profile)
    for (size_t p = 0; p < numPlans && p < size_t(steps); ++p)
      printProfile(sessions[p]->plan().data(),
                   sessions[p]->instructionSeconds(), planTag(p));
  for (size_t p = 0; p < numPlans; ++p) {
    Session &s = *sessions[p];
    std::printf("%speak device bytes: planned %llu measured %llu%s\n",
                planTag(p).c_str(),
                (unsigned long long)s.plannedPeakDeviceBytes(),
                (unsigned long long)s.measuredPeakDeviceBytes(),
                size_t(steps) <= p ? " (no step run)" : "");
  }
  if (!dumpPath.empty()) {
    // One plan: its outputs by name. Several: each plan's outputs as
    // "planP/NAME" (plans that ran), then every store entry by name. Each
    // array is streamed from where it lives (the arena, the store) into the
    // file: nothing is copied whole.
    std::vector<NpzSource> outs;
    for (size_t p = 0; p < numPlans; ++p) {
      if (numPlans > 1 && size_t(steps) <= p)
        continue;
      Session *s = sessions[p].get();
      for (const std::string &name : s->outputNames()) {
        NpzSource src;
        src.name = numPlans > 1 ? "plan" + std::to_string(p) + "/" + name : name;
        if (Status st = s->outputType(name, src.dtype, src.shape); !st.ok())
          return fail(planTag(p) + st.message());
        // An output with no value (no successful step) fails here, before
        // the file is written, as output() used to.
        if (Status st = s->readOutput(name, 0, nullptr, 0); !st.ok())
          return fail(planTag(p) + st.message());
        src.read = [s, name](uint64_t off, void *dst, size_t n) {
          return s->readOutput(name, off, dst, n);
        };
        outs.push_back(std::move(src));
      }
    }
    if (numPlans > 1)
      for (const std::string &name : store->names())
        outs.push_back(npzSource(name, *store->get(name)));
    if (Status st = writeNpzSources(dumpTmp, outs); !st.ok())
      return fail(dumpPath + ": " + st.message());
    if (std::string e = outputs.commit(); !e.empty())
      return fail(e);
    std::printf("wrote %zu arrays to %s\n", outs.size(), dumpPath.c_str());
  }
  if (reportHostMemory) {
    // What the run had to hold: the arenas that live in host memory (both
    // on the host backend; the pinned host arena on cuda), the store, and
    // the sessions' own tensors (inputs, the loss).
    uint64_t arenas = 0, held = 0;
    for (size_t p = 0; p < numPlans; ++p) {
      const PlanData &d = plans[p]->data();
      arenas += d.hostCapacity + (backend == "host" ? d.deviceCapacity : 0);
      held += sessions[p]->heldTensorBytes();
    }
    long long peak = procStatusBytes("VmHWM");
    if (peak < 0 || startRss < 0)
      std::printf("host memory: unavailable (no /proc/self/status)\n");
    else
      std::printf("host memory: peak resident %lld bytes, at start %lld "
                  "bytes, growth %lld bytes; held: plan arenas %llu bytes, "
                  "parameter store %llu bytes, session tensors %llu bytes\n",
                  peak, startRss, peak - startRss, (unsigned long long)arenas,
                  (unsigned long long)store->totalBytes(),
                  (unsigned long long)held);
  }
  return 0;
}

int main(int argc, char **argv) {
  // Allocation and thread creation failures (a memory limit: ulimit -v) are
  // errors naming what failed, never std::terminate; the output files'
  // destructors remove their temporaries on the way out.
  try {
    return runMain(argc, argv);
  } catch (const std::bad_alloc &) {
    return fail("out of memory; give the process more memory (ulimit -v) or "
                "use a smaller plan or fewer --threads");
  } catch (const std::system_error &e) {
    return fail(std::string("cannot start a thread or use a system resource: ") +
                e.what() + "; give the process more memory or fewer --threads");
  } catch (const std::exception &e) {
    std::fprintf(stderr, "offload-run: internal error: %s\n", e.what());
    return 2;
  }
}
