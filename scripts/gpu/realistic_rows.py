#!/usr/bin/python3
"""Simulated against measured step time on rows of the realistic table (issue 32, docs/gpu.md).

On the build machine (scripts/gpu/bundle.sh):

    PYTHONPATH=python:bench/planner /usr/bin/python3 scripts/gpu/realistic_rows.py build --bin build/bin \
        --out DIR [--work TMP] [--rows gpt2-124m@80,...]

writes DIR/realistic-WORKLOAD-BUDGET/ (kind "realistic") for every row of
ROWS: a row of bench/planner/realistic.py's table (docs/planner.md,
"Realistic workloads") that fits one H200, built the way that script builds
it (the same shape-only step, AdamW, the same h100-sxm target file with the
table's host AdamW rate, the planner at the row's budget with slice=never):

  step.oflp        the planned step (or the step itself where it fits unplanned)
  spec.json        how to generate its parameters and batch (gen.py; uniform
                   weights of bound 0.02, token batches, labels); AdamW state
                   starts at zero in offload-run
  cost-h100-sxm.txt, cost-h200.txt  --offload-cost-report per op of that plan
                   on the row's target and on H200_TARGET (below)
  meta.json        the row, arenas, the planner's decisions, both simulated
                   step times

H200_TARGET describes the lent machine for the simulator: h100-sxm's
arithmetic (the H200 is the same GH100 die and clocks: NVIDIA H200 datasheet,
67 TFLOPS fp32, 989 TFLOPS dense bf16), its HBM3e at 4.8 TB/s (datasheet),
and the pinned copy rate the kit's `copy` part measured on it, 55.2 GB/s per
direction (docs/gpu.md). The row's own figure is h100-sxm's; the comparison
that judges the simulator is the same plan simulated on the machine it ran on.

On the GPU machine the kit's `realistic` part (scripts/gpu/kit.py) calls
`check(row_dir, meta, exe, env, work, timeout, parse_run, parse_profile)`:
it generates the weights and batch, runs STEPS steps with offload-run on the
CUDA backend, takes the median `instructions` time of the steps after the
first (the plan's instructions without the uploads at the step's start and
the commit to the parameter store, which the simulator does not model;
docs/planner.md, "Simulated vs measured"), and judges
|simulated on H200_TARGET - measured| / measured <= TOLERANCE (the issue's
20%) on the fp32 rows; the bf16-mixed row is recorded, not judged (meta
"judged": our bf16 kernels run well below the cost model's tensor-core rates). Measured peak must equal planned peak. With time left, a --profile run
records where the measured time went (per op), to set beside the cost
reports.
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time


TOLERANCE = 0.20
STEPS = 5
WORKSPACE_BYTES = 64 << 20
# The table's host AdamW rate (docs/planner.md, "Realistic workloads": the
# quiet figure measured on the build machine); no row below updates on the
# host, so it does not enter these plans' times.
HOST_ADAMW_RATE = 1.59e10
H200_TARGET = {"base": "h100-sxm", "name": "h200",
               "source": "NVIDIA H200 SXM datasheet: 141 GB HBM3e at 4.8 TB/s, h100-sxm's "
                         "arithmetic; pinned copies 55.2 GB/s per direction measured by the "
                         "kit's copy part on the lent H200",
               "memory_bytes": 141000000000, "memory_bytes_per_second": 4.8e12,
               "host_to_device_bytes_per_second": 55.2e9, "device_to_host_bytes_per_second": 55.2e9,
               "host_update_bytes_per_second": HOST_ADAMW_RATE}
# (workload, target, budget bytes): rows of docs/planner.md's table on
# h100-sxm, each workload at the target's memory (it fits unplanned) and at a
# budget where the planner recomputes and offloads.
# And GPT-2 124M in bf16-mixed (autocast, fp32 master weights and AdamW
# state; the table's "bf16-mixed" rows) at 80 GB, where it fits unplanned.
ROWS = [("gpt2-124m", "h100-sxm", 80000000000), ("gpt2-124m", "h100-sxm", 10340000000),
        ("vit-b16", "h100-sxm", 80000000000), ("vit-b16", "h100-sxm", 6610000000),
        ("gpt2-124m", "h100-sxm", 80000000000, "bf16-mixed")]
# The batch of each workload: inputs by binding name.
INPUTS = {"gpt2-124m": lambda shape: [
              {"name": "x", "shape": shape["x"], "dtype": "i64", "init": "tokens", "high": 50257,
               "part": "x"},
              {"name": "y", "shape": shape["y"], "dtype": "i64", "init": "tokens", "high": 50257,
               "part": "y"}],
          "vit-b16": lambda shape: [
              {"name": "x", "shape": shape["x"], "dtype": "f32", "init": "uniform", "bound": 1.0},
              {"name": "y", "shape": shape["y"], "dtype": "i64", "init": "randint", "high": 1000}]}
SEED = 20261127


def row_name(workload, budget, precision="fp32"):
    return "realistic-%s%s-%.2f" % (workload, "" if precision == "fp32" else "-" + precision,
                                    budget / 1e9)


def run(cmd, **kw):
    """Runs `cmd` (a build step); exits with its output when it fails."""
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, **kw)
    if r.returncode != 0:
        sys.exit("realistic_rows: %s failed:\n%s" % (" ".join(cmd), r.stdout[-3000:]))
    return r.stdout


BUF_RE = re.compile(r'^\s+%\d+ "([^"]+)" (\w+)\[([0-9,]*)\] \S+ (parameter|input) ')


def bindings(bin_dir, plan, env=None):
    """{name: (kind, dtype, shape)} of the plan's parameters and inputs."""
    out = {}
    for line in run([os.path.join(bin_dir, "offload-run"), plan, "--dump-plan"], env=env).splitlines():
        m = BUF_RE.match(line)
        if m:
            shape = [int(d) for d in m.group(3).split(",") if d]
            out[m.group(1)] = (m.group(4), m.group(2), shape)
    return out


def build(bin_dir, out_root, work, rows):
    import realistic  # bench/planner (on PYTHONPATH: bundle.sh): the table's own builder
    os.makedirs(work, exist_ok=True)
    h200 = os.path.join(work, "h200.json")
    json.dump(H200_TARGET, open(h200, "w"))
    opt = os.path.join(bin_dir, "offload-opt")
    for row in rows:
        workload, target, budget = row[:3]
        precision = row[3] if len(row) > 3 else "fp32"
        t0 = time.time()
        step, arena, _, nparams = realistic.build_workload(workload, work, bin_dir, precision)
        tfile = realistic.target_file(target, HOST_ADAMW_RATE, work)
        name = row_name(workload, budget, precision)
        out = os.path.join(out_root, name)
        os.makedirs(out, exist_ok=True)
        planned = os.path.join(work, name + ".mlir")
        rep = run([opt, step, "--offload-plan-memory=budget=%d target=%s slice=never report=-"
                   % (budget, tfile), "-o", planned])
        decisions = re.search(r"decisions: (.*)", rep)
        plan = os.path.join(out, "step.oflp")
        run([os.path.join(bin_dir, "offload-translate"), "--offload-to-plan", planned, "-o", plan])
        sim = {}
        for tname, tf in ((target, tfile), ("h200", h200)):
            cost = os.path.join(out, "cost-%s.txt" % tname)
            run([opt, planned, "--offload-cost-report=per-op=true target=%s report=%s" % (tf, cost),
                 "-o", os.devnull])
            m = re.search(r"simulated step time on \S+: ([0-9.eE+-]+) s \(compute ([0-9.eE+-]+) s",
                          open(cost).read())
            sim[tname] = {"step": float(m.group(1)), "compute": float(m.group(2))}
        # The arena; the CUDA kernels' coverage is the kit's to check (a
        # build without CUDA has no backend to ask).
        check = run([os.path.join(bin_dir, "offload-run"), plan, "--check"])
        ma = re.search(r"device arena (\d+) bytes", check)
        b = bindings(bin_dir, plan)
        shapes = {n: s for n, (_, _, s) in b.items()}
        spec = {"model": name, "kind": "realistic", "seed": SEED,
                "params": [{"name": n, "shape": s, "dtype": d, "init": "uniform", "bound": 0.02}
                           for n, (k, d, s) in b.items() if k == "parameter"],
                "inputs": INPUTS[workload](shapes)}
        json.dump(spec, open(os.path.join(out, "spec.json"), "w"), indent=1)
        meta = {"model": name, "kind": "realistic", "workload": workload, "target": target,
                "precision": precision,
                "budget_bytes": budget, "parameters": nparams, "unplanned_arena_bytes": arena,
                "planned_arena_bytes": int(ma.group(1)) if ma else None,
                "workspace_bytes": WORKSPACE_BYTES, "steps": STEPS,
                "decisions": decisions.group(1).strip() if decisions else "fits unplanned",
                "simulated_seconds": sim, "h200_target": H200_TARGET, "tolerance": TOLERANCE,
                "host_adamw_rate": HOST_ADAMW_RATE,
                # bf16 rows are recorded, not judged: our bf16 attention and
                # GEMMs run 2.5-12x below the cost model's tensor-core rates
                # (docs/gpu.md, the realistic rows), so the simulator's bf16
                # figure is a target for the kernels, not a prediction yet.
                "judged": precision == "fp32"}
        json.dump(meta, open(os.path.join(out, "meta.json"), "w"), indent=1)
        print("realistic_rows: %-28s %5.1f s  arena %s  %s  simulated %s %.4f s, h200 %.4f s" % (
            name, time.time() - t0, meta["planned_arena_bytes"], meta["decisions"][:60], target,
            sim[target]["step"], sim["h200"]["step"]), flush=True)


def check(row_dir, meta, exe, env, work, timeout, parse_run, parse_profile, backend="cuda"):
    """One row on the GPU: returns a dict with the times, the error and `ok`."""
    import statistics
    import gen  # scripts/gpu, the folder of kit.py (the caller)
    t0 = time.time()
    os.makedirs(work, exist_ok=True)
    row = {"row": meta["model"], "workload": meta["workload"], "budget": meta["budget_bytes"],
           "decisions": meta["decisions"], "simulated_h200": meta["simulated_seconds"]["h200"]["step"],
           "simulated_row": meta["simulated_seconds"][meta["target"]]["step"],
           "row_target": meta["target"]}
    spec = gen.load_spec(os.path.join(row_dir, "spec.json"))
    p, i = os.path.join(work, "params.npz"), os.path.join(work, "inputs.npz")
    gen.generate(spec, p, i)
    row["generate_seconds"] = round(time.time() - t0, 1)
    base = [exe, os.path.join(row_dir, "step.oflp"), "--backend", backend, "--threads", "8",
            "--params", p, "--inputs", i, "--workspace-bytes", str(meta["workspace_bytes"])]
    left = timeout - (time.time() - t0)
    r = subprocess.run(base + ["--steps", str(meta["steps"])], stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True, env=env, timeout=max(10, left * 0.7))
    got = parse_run(r.stdout)
    steps = got["steps"]
    if r.returncode != 0 or not steps:
        row.update(ok=False, error=r.stdout[-1500:])
        return row
    later = steps[1:] or steps
    row["measured"] = statistics.median(s["instructions_seconds"] for s in later)
    row["measured_step"] = statistics.median(s["seconds"] for s in later)
    row["instructions_each"] = [s["instructions_seconds"] for s in steps]
    row["loss"] = [s["loss"] for s in steps]
    row["peak"], row["planned_peak"] = got["measured_peak"], got["planned_peak"]
    row["error"] = None
    row["sim_error"] = (row["simulated_h200"] - row["measured"]) / row["measured"]
    row["row_error"] = (row["simulated_row"] - row["measured"]) / row["measured"]
    row["judged"] = meta.get("judged", True)
    row["ok"] = (abs(row["sim_error"]) <= TOLERANCE or not row["judged"]) and \
        got["measured_peak"] == got["planned_peak"]
    if got["measured_peak"] != got["planned_peak"]:
        row["error"] = "peak: planned %s measured %s" % (got["planned_peak"], got["measured_peak"])
    left = timeout - (time.time() - t0)
    if left > 20:
        try:
            r2 = subprocess.run(base + ["--steps", "2", "--profile"], stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True, env=env, timeout=left - 5)
            row["profile"] = parse_profile(r2.stdout)
        except subprocess.TimeoutExpired:
            row["profile"] = {"error": "timeout"}
    return row


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("build", help="write the rows' plans and specs (build machine)")
    b.add_argument("--bin", required=True)
    b.add_argument("--out", required=True)
    b.add_argument("--work", default=None, help="scratch folder (default: a new one, removed)")
    b.add_argument("--rows", default=None,
                   help="subset, WORKLOAD[:PRECISION]@GB,... (default: every row of ROWS)")
    a = ap.parse_args(argv)
    rows = ROWS
    if a.rows:
        want = {tuple(x.split("@")) for x in a.rows.split(",") if x}
        key = lambda r: (r[0] + ("" if len(r) < 4 else ":" + r[3]), "%g" % (r[2] / 1e9))
        rows = [r for r in ROWS if key(r) in want]
        if len(rows) != len(want):
            ap.error("--rows: known rows are %s (WORKLOAD[:PRECISION]@GB)" % ", ".join(
                "%s@%s" % key(r) for r in ROWS))
    import tempfile
    work = a.work or tempfile.mkdtemp(prefix="offload-realistic-rows.")
    try:
        build(a.bin, a.out, work, rows)
    finally:
        if not a.work:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
