#!/usr/bin/python3
"""The planner's simulated step time against the measured one, on the host target.

    /usr/bin/python3 bench/planner/sim_vs_measured.py [--bin build/bin]
        [--models mlp,transformer,gpt,resnet18] [--link 2e9] [--threads 1]
        [--steps 20] [--repeats 3] [--work DIR]

Issue 13: validation of the simulator (lib/Dialect/Offload/Analysis/Timeline.cpp
and the cost model in Target.cpp) against real execution. The host backend
runs the plan with an emulated host<->device link (offload-run --emulate-link
LINK: each copy takes at least bytes / LINK seconds on its copy thread), and
the planner plans for the same machine behind the same link: a target file

    {"base": "host", "calibration_threads": T,
     "host_to_device_bytes_per_second": LINK, "device_to_host_bytes_per_second": LINK}

over the host target file WORK/host-target.json (OFFLOAD_HOST_TARGET), which
`offload-run --calibrate WORK/host-target.json --threads T` measures with the
thread count offload-run then runs with.

For every model (python/export_models.py, at the batches in BATCH: steps of
tens of milliseconds, so that microsecond overheads stay small): the unplanned
step, then the planner at budgets from the smallest reachable device arena
(budget=1 is refused naming it) towards the unplanned arena (--fractions),
which force host parameters, offload with prefetch and recompute. Each point is
lowered (offload-translate --offload-to-plan) and run with offload-run --steps N
--threads T --emulate-link LINK.

Measured: the step's `instructions` time (the plan's instructions, without the
uploads at the step's start and the commit of new parameters to the store,
which the simulator does not describe), after two warm-up steps per run.
Simulated: the cost report's simulated step time of the planned module on the
target (the same simulator and figures the planner reports), with the host
calibrated anew (offload-run --calibrate) before each simulation.
Calibrations and runs alternate --repeats times, so both
sample the same spells of load on a shared machine, and each keeps its least
disturbed figure: the smallest simulated time (load only slows the calibration
kernels) and the fastest step. The median step is printed too.

Prints per model and budget: decisions, simulated s, measured s, error %
(simulated - measured, in percent of measured), and the largest |error|;
exits 1 when it exceeds --tolerance (default 20%).
"""
import argparse
import json
import os
import re
import statistics
import sys

from example_steps import ROOT, build_step, run
# Batch per model: steps of tens of milliseconds, so that the runtime's
# per-instruction overhead and thread hand-offs (microseconds) stay small.
BATCH = {"mlp": 1024, "transformer": 64, "gpt": 32, "resnet18": 4}


def smallest_budget(bin_dir, step, target):
    r = run([os.path.join(bin_dir, "offload-opt"), step,
             f"--offload-plan-memory=budget=1 target={target}", "-o", os.devnull], ok=False)
    m = re.search(r"Ask for budget=(\d+)", r.stdout)
    if r.returncode == 0 or not m:
        sys.exit("budget=1 was not refused with the smallest reachable arena:\n" + r.stdout[-2000:])
    return int(m.group(1))


def calibrate(bin_dir, path, threads):
    """Measures this machine into the host target file `path` (offload-run
    --calibrate), which the tools read through OFFLOAD_HOST_TARGET."""
    run([os.path.join(bin_dir, "offload-run"), "--calibrate", path, "--threads", str(threads)])


def simulate(bin_dir, module, target):
    """The cost report's simulated step time of `module` on `target` (with the
    host target file as last calibrated)."""
    out = run([os.path.join(bin_dir, "offload-opt"), module,
               f"--offload-cost-report=per-op=false target={target} report=-",
               "-o", os.devnull]).stdout
    return float(re.search(r"simulated step time on \S+: ([0-9.e+-]+) s", out).group(1))


def lower(bin_dir, step, budget, target, plan, planned):
    """Plans at `budget` (None: unplanned) into `planned` (MLIR) and lowers it to `plan`;
    returns (the planner's simulated s or None, decisions, budget used)."""
    opt = os.path.join(bin_dir, "offload-opt")
    translate = [os.path.join(bin_dir, "offload-translate"), "--offload-to-plan", planned,
                 "-o", plan]
    if budget is None:
        run([opt, step, "-o", planned])
        run(translate)
        return None, "unplanned", None
    for _ in range(3):
        r = run([opt, step, f"--offload-plan-memory=budget={budget} target={target} report=-",
                 "-o", planned], ok=False)
        # The host is calibrated anew between runs, so the smallest
        # reachable arena moves a little: take the budget the planner asks
        # for.
        ask = re.search(r"Ask for budget=(\d+)", r.stdout)
        if r.returncode == 0 or not ask:
            break
        budget = int(ask.group(1))
    if r.returncode != 0:
        sys.exit("planning failed:\n" + r.stdout[-3000:])
    run(translate)
    out = r.stdout
    m = re.search(r"simulated step time on \S+: ([0-9.e+-]+) s -> ([0-9.e+-]+) s", out)
    if not m:
        sys.exit("no simulated step time in the planner's report:\n" + out[-2000:])
    d = re.search(r"decisions: (\d+) saved values recomputed, (\d+) offloaded, \d+ kept; "
                  r"(\d+) parameters on the host", out)
    decisions = (f"recompute {d.group(1)}, offload {d.group(2)}, host params {d.group(3)}"
                 if d else "fits unplanned")
    return float(m.group(2)), decisions, budget


def measure_once(bin_dir, plan, model, work, args):
    """Step times (the plan's instructions) of one offload-run of --steps steps after two
    warm-up steps."""
    out = run([os.path.join(bin_dir, "offload-run"), plan, "--threads", str(args.threads),
               "--emulate-link", repr(args.link), "--steps", str(args.steps + 2),
               "--params", os.path.join(work, model + ".params.npz"),
               "--inputs", os.path.join(work, model + ".inputs.npz")]).stdout
    got = [float(t) for t in re.findall(r"instructions ([0-9.]+) s", out)][2:]
    if not got:
        sys.exit("offload-run printed no step times:\n" + out[-2000:])
    return got


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bin", default=os.path.join(ROOT, "build", "bin"))
    ap.add_argument("--models", default="mlp,transformer,gpt,resnet18")
    ap.add_argument("--link", type=float, default=2e9,
                    help="emulated link, bytes per second per direction (default 2e9)")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--steps", type=int, default=20, help="timed steps per run (after 2 warm-up)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--fractions", default="0,0.25,0.5",
                    help="planned budgets: smallest + f * (unplanned - 1 - smallest) per f")
    ap.add_argument("--tolerance", type=float, default=20.0, help="percent")
    ap.add_argument("--work", default="/tmp/offload-sim-vs-measured")
    args = ap.parse_args()
    if not args.link >= 1:
        sys.exit("--link must be >= 1 bytes per second")
    os.makedirs(args.work, exist_ok=True)
    host = os.path.join(args.work, "host-target.json")
    os.environ["OFFLOAD_HOST_TARGET"] = host
    calibrate(args.bin, host, args.threads)
    target = os.path.join(args.work, "host-link.json")
    with open(target, "w") as f:
        json.dump({"base": "host", "name": "host-link", "calibration_threads": args.threads,
                   "host_to_device_bytes_per_second": args.link,
                   "device_to_host_bytes_per_second": args.link}, f)
    print(f"target: this machine (host, calibrated with {args.threads} thread(s)) behind an "
          f"emulated {args.link / 1e9:g} GB/s link; offload-run --threads {args.threads} "
          f"--emulate-link {args.link:g}; {args.steps} timed steps, best of {args.repeats} runs")
    print(f"load: {open('/proc/loadavg').read().split()[:3]} (1/5/15-minute load average), "
          f"{os.cpu_count()} CPUs")
    print()
    print("| model | budget (bytes) | decisions | simulated s | measured s (fastest) | "
          "measured s (median) | error |")
    print("|---|---|---|---|---|---|---|")
    worst = 0.0
    for model in args.models.split(","):
        step, unplanned, _ = build_step(model, args.work, args.bin, batch=BATCH.get(model, 4))
        smallest = smallest_budget(args.bin, step, target)
        budgets = [None] + sorted({smallest + int(float(f) * (unplanned - 1 - smallest))
                                   for f in args.fractions.split(",")})
        for b in budgets:
            tag = os.path.join(args.work, f"{model}.{b or 'unplanned'}")
            plan, planned = tag + ".oflp", tag + ".planned.mlir"
            _, decisions, b = lower(args.bin, step, b, target, plan, planned)
            # Calibration and runs interleaved, so both sample the same spells of
            # load; each keeps its least disturbed figure (other load only ever
            # slows the kernels, making the calibration's rates lower and the
            # simulated time longer, and the measured steps longer).
            sims, times = [], []
            for _ in range(args.repeats):
                calibrate(args.bin, host, args.threads)
                sims.append(simulate(args.bin, planned, target))
                times += measure_once(args.bin, plan, model, args.work, args)
            sim, meas, med = min(sims), min(times), statistics.median(times)
            err = 100.0 * (sim - meas) / meas
            worst = max(worst, abs(err))
            label = f"{unplanned} (unplanned)" if b is None else str(b)
            print(f"| {model} | {label} | {decisions} | {sim:.3e} | {meas:.3e} | {med:.3e} | {err:+.1f}% |",
                  flush=True)
    print(f"\nlargest |error|: {worst:.1f}% (tolerance {args.tolerance:g}%)")
    return 0 if worst <= args.tolerance else 1


if __name__ == "__main__":
    sys.exit(main())
