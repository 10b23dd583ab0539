#!/usr/bin/python3
"""The planner against an exact oracle and against baselines, on the example models.

    /usr/bin/python3 bench/planner/oracle.py --bin build/bin
        [--models mlp,resnet18,transformer,gpt] [--target h100-sxm]
        [--points 5] [--time-limit 60] [--work DIR]

For every model: exports it (python/export_models.py), imports it and builds
the SGD-with-momentum step, finds the smallest reachable device arena (the
planner's error at budget=1 names it) and plans at --points budgets from
there to the unplanned arena. Each row gives: the budget, the planned arena,
the simulated step time on the target and its overhead over the unplanned
step, the planning time, and the exact oracle at the same budget.

The oracle. The planner writes the problem it solved (problem=FILE.json:
the live-bytes profile of the step with early updates, every candidate's
options with their seconds and the byte ranges they free or add, and its
decisions). The oracle solves the same problem as a mixed-integer program
with HiGHS (scipy.optimize.milp, Debian's python3-scipy): binary x[c,o] for
option o of candidate c, at most one per candidate; minimize
sum x*seconds + sum_w e_w over four link windows w (device-to-host and
host-to-device, in forward and in backward), where e_w >= sum x*link_w -
window_w is the copy time that window's compute cannot hide (the planner
prices copies the same way); subject to, at every program point, live bytes after the
options <= the planner's own modelled peak. The planner's decisions are
priced with the same objective, so `gap` is (planner - oracle) in percent
of the unplanned step time: how much simulated overhead exact optimisation
would remove. A recompute is priced with every other saved value kept (its
cheapest cone), for both. A solve that hits --time-limit is reported as
"timeout", not as a gap.

Baselines (the hand policies a user has): recompute everything
(--offload-recompute=policy=all), Chen et al.'s sqrt(n) segments
(policy=sqrt), offload every saved value (--offload-host-offload=policy=all).
Each gives one device arena and simulated step time; the planner is then
run at exactly that arena as its budget, and both times are printed.

PyTorch's own partitioner (AOTAutograd's min-cut rematerialization with
torch._functorch.config.activation_memory_budget swept) is compared with the
planner at matched saved-activation bytes by bench/planner/pytorch_partitioner.py,
which runs under scripts/torch2-python (PyTorch 2.x from PyPI; Debian's 1.13
lacks it); its tables are in docs/planner.md.
"""
import argparse
import json
import os
import re
import sys
import time

import numpy as np
from scipy.optimize import Bounds, LinearConstraint, milp
from scipy.sparse import coo_matrix

from example_steps import ROOT, build_step, run


# --- The oracle -------------------------------------------------------------

def options_of(problem):
    """(candidate index, option dict) for every option of every candidate."""
    return [(ci, o) for ci, c in enumerate(problem["candidates"]) for o in c["options"]]


WINDOWS = ("to_host_forward", "to_host_backward", "to_device_forward", "to_device_backward")


def check_version(problem, path):
    if problem.get("format") != "offload-plan-problem" or problem.get("version") != 2:
        sys.exit(f"oracle: {path}: expected an offload-plan-problem of version 2 (per-phase link "
                 f"windows), got {problem.get('format')!r} version {problem.get('version')!r}; "
                 "rebuild offload-opt")


def price(problem, chosen):
    """Objective of a set of chosen option indices (into options_of)."""
    opts = options_of(problem)
    secs = sum(opts[k][1]["seconds"] for k in chosen)
    for w in WINDOWS:
        used = sum(opts[k][1]["link"].get(w, 0.0) for k in chosen)
        secs += max(0.0, used - problem["link_windows"][w])
    return secs


def live_after(problem, chosen):
    live = np.array(problem["base_live_bytes"], dtype=np.int64)
    opts = options_of(problem)
    for k in chosen:
        for lo, hi, b in opts[k][1]["freed"]:
            live[lo:hi + 1] -= b
        for lo, hi, b in opts[k][1]["added"]:
            live[lo:hi + 1] += b
    return live


def planner_choice(problem):
    chosen = []
    for k, (ci, o) in enumerate(options_of(problem)):
        if problem["candidates"][ci]["chosen"] == o["decision"]:
            chosen.append(k)
    return chosen


def solve(problem, limit_bytes, time_limit):
    """Returns (status, objective, chosen option indices, seconds)."""
    opts = options_of(problem)
    n_opt = len(opts)
    n = n_opt + len(WINDOWS)  # + one exposure per link window
    base = np.array(problem["base_live_bytes"], dtype=np.float64)
    points = len(base)
    # The objective in percent of the unplanned step (HiGHS's absolute
    # optimality gap, 1e-6, would swallow differences of microseconds).
    scale = 100.0 / problem["unplanned_step_seconds"]
    cost = np.zeros(n)
    cost[:n_opt] = [o["seconds"] * scale for _, o in opts]
    cost[n_opt:] = 1.0  # e_w, in percent of the step too
    rows, cols, vals = [], [], []
    # Memory rows: only points that can exceed the limit.
    added = np.zeros(points)
    for _, o in opts:
        for lo, hi, b in o["added"]:
            added[lo:hi + 1] += b
    hot = np.nonzero(base + added > limit_bytes)[0]
    row_of = {int(p): r for r, p in enumerate(hot)}
    for k, (_, o) in enumerate(opts):
        coef = {}
        for lo, hi, b in o["freed"]:
            for p in range(lo, hi + 1):
                if p in row_of:
                    coef[p] = coef.get(p, 0) - b
        for lo, hi, b in o["added"]:
            for p in range(lo, hi + 1):
                if p in row_of:
                    coef[p] = coef.get(p, 0) + b
        for p, v in coef.items():
            if v:
                rows.append(row_of[p])
                cols.append(k)
                vals.append(v)
    constraints = []
    if len(hot):
        a = coo_matrix((vals, (rows, cols)), shape=(len(hot), n))
        constraints.append(LinearConstraint(a, -np.inf, limit_bytes - base[hot]))
    # At most one option per candidate.
    cand = sorted({ci for ci, _ in opts})
    r2, c2 = [], []
    for r, ci in enumerate(cand):
        for k, (cj, _) in enumerate(opts):
            if cj == ci:
                r2.append(r)
                c2.append(k)
    if cand:
        constraints.append(LinearConstraint(coo_matrix((np.ones(len(r2)), (r2, c2)),
                                                       shape=(len(cand), n)), -np.inf, 1))
    # e_w >= sum x * link_w - window_w, in percent of the step
    # (in seconds, 1e-6-sized coefficients fall under HiGHS's feasibility
    # tolerance).
    for j, key in enumerate(WINDOWS):
        row = np.zeros(n)
        row[:n_opt] = [o["link"].get(key, 0.0) * scale for _, o in opts]
        row[n_opt + j] = -1.0
        constraints.append(LinearConstraint(row.reshape(1, -1), -np.inf,
                                            problem["link_windows"][key] * scale))
    integrality = np.zeros(n)
    integrality[:n_opt] = 1
    lb = np.zeros(n)
    ub = np.ones(n)
    ub[n_opt:] = np.inf
    t0 = time.perf_counter()
    res = milp(cost, constraints=constraints, integrality=integrality, bounds=Bounds(lb, ub),
               options={"time_limit": time_limit, "disp": False, "mip_rel_gap": 1e-9})
    secs = time.perf_counter() - t0
    if res.status == 0:
        chosen = [k for k in range(n_opt) if res.x[k] > 0.5]
        return "optimal", price(problem, chosen), chosen, secs
    if res.status == 1:
        return "timeout", None, [], secs
    return "infeasible" if res.status == 2 else f"status {res.status}", None, [], secs


# --- The pipeline -------------------------------------------------------------

def plan(bin_dir, step, budget, target, work, tag):
    problem = os.path.join(work, tag + ".problem.json")
    r = run([os.path.join(bin_dir, "offload-opt"), step,
             f"--offload-plan-memory=budget={budget} target={target} report=- problem={problem}",
             "-o", os.path.join(work, tag + ".planned.mlir")], ok=False)
    if r.returncode != 0:
        m = re.search(r"Ask for budget=(\d+)", r.stdout)
        return {"error": r.stdout, "ask": int(m.group(1)) if m else None}
    out = r.stdout
    res = {"problem": problem}
    m = re.search(r"device arena: (\d+) -> (\d+) bytes", out)
    res["arena"] = int(m.group(2)) if m else None
    m = re.search(r"simulated step time on \S+: ([0-9.e+-]+) s -> ([0-9.e+-]+) s", out)
    res["t0"], res["t"] = (float(m.group(1)), float(m.group(2))) if m else (None, None)
    m = re.search(r"planning took ([0-9.]+) s", out)
    res["plan_s"] = float(m.group(1)) if m else 0.0
    if "fits unplanned" in out:
        m = re.search(r"device arena (\d+) bytes", out)
        res["arena"] = int(m.group(1))
        res["problem"] = None
    return res


def measure_baseline(bin_dir, step, passes, target):
    out = run([os.path.join(bin_dir, "offload-opt"), step] + passes +
              ["--offload-memory-report", f"--offload-cost-report=per-op=false target={target}",
               "-o", "/dev/null"]).stdout
    arena = int(re.search(r"device arena bytes: (\d+)", out).group(1))
    t = float(re.search(r"simulated step time on \S+: ([0-9.e+-]+) s", out).group(1))
    return arena, t


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bin", default=os.path.join(ROOT, "build", "bin"))
    ap.add_argument("--models", default="mlp,resnet18,transformer,gpt")
    ap.add_argument("--target", default="h100-sxm")
    ap.add_argument("--points", type=int, default=5)
    ap.add_argument("--time-limit", type=float, default=60.0)
    ap.add_argument("--work", default="/tmp/offload-planner-oracle")
    args = ap.parse_args()
    os.makedirs(args.work, exist_ok=True)
    worst_gap = 0.0
    for model in args.models.split(","):
        step, unplanned, _ = build_step(model, args.work, args.bin)
        probe = plan(args.bin, step, 1, args.target, args.work, model + ".probe")
        smallest = probe.get("ask")
        if smallest is None:
            sys.exit(f"{model}: the planner did not name the smallest reachable arena:\n"
                     + probe.get("error", "")[-2000:])
        print(f"\n{model}: unplanned arena {unplanned} bytes, smallest reachable {smallest} "
              f"bytes ({100.0 * smallest / unplanned:.1f}%), target {args.target}")
        print(f"  {'budget':>12} {'arena':>12} {'step s':>11} {'overhead':>9} "
              f"{'oracle ovh':>10} {'gap':>7} {'plan s':>7} {'oracle s':>8}  decisions")
        budgets = [int(smallest + (unplanned - smallest) * k / (args.points - 1))
                   for k in range(args.points)]
        for k, budget in enumerate(budgets):
            r = plan(args.bin, step, budget, args.target, args.work, f"{model}.{k}")
            if "error" in r:
                print(f"  {budget:>12} planner failed: {r['error'].strip().splitlines()[0][:120]}")
                continue
            ovh = 100.0 * (r["t"] - r["t0"]) / r["t0"] if r.get("t0") else 0.0
            oracle_ovh, gap, osecs, note = "-", "-", 0.0, "fits unplanned"
            if r["problem"]:
                problem = json.load(open(r["problem"]))
                check_version(problem, r["problem"])
                mine = planner_choice(problem)
                # The limit: the peak the planner's own decisions reach in the
                # exported model (each recompute with its standalone cone), so
                # both are priced and bounded in one model. (The planner's
                # achieved_bytes counts chained cones' intermediates, which
                # the exported model does not: a looser limit there.)
                limit = int(live_after(problem, mine).max()) if mine else problem["achieved_bytes"]
                note = (f"{sum(c['chosen'] != 'keep' for c in problem['candidates'])} of "
                        f"{len(problem['candidates'])} candidates changed")
                if problem["fallback"]:
                    note += "; the planner's all-in fallback (no oracle)"
                elif not mine:
                    note = "early updates only"
                    oracle_ovh, gap = "0.0%", "0.00%"
                else:
                    status, obj, _, osecs = solve(problem, limit, args.time_limit)
                    base_t = problem["unplanned_step_seconds"]
                    if status == "optimal":
                        g = 100.0 * (price(problem, mine) - obj) / base_t
                        worst_gap = max(worst_gap, g)
                        oracle_ovh = f"{100.0 * obj / base_t:.1f}%"
                        gap = f"{g:.2f}%"
                        over = int(live_after(problem, mine).max()) - limit
                        if over > 0:
                            note += f"; planner's decisions {over} bytes over at oracle prices"
                    else:
                        oracle_ovh, gap = status, "-"
            step_s = f"{r['t']:.4e}" if r.get("t") else "unchanged"
            print(f"  {budget:>12} {r['arena']:>12} {step_s:>11} {ovh:>8.1f}% "
                  f"{oracle_ovh:>10} {gap:>7} {r['plan_s']:>7.3f} {osecs:>8.2f}  {note}")
        print(f"  baselines (each run by hand; then the planner at the baseline's arena):")
        for name, passes in (("recompute all", ["--offload-recompute=policy=all report=false"]),
                             ("sqrt(n) segments", ["--offload-recompute=policy=sqrt report=false"]),
                             ("offload all", ["--offload-host-offload=policy=all report=false"])):
            arena, t = measure_baseline(args.bin, step, passes, args.target)
            r = plan(args.bin, step, arena, args.target, args.work, f"{model}.baseline")
            if "error" in r:
                mine = "planner cannot reach it"
            elif not r.get("t"):
                mine = f"the step fits unplanned at arena {r['arena']}"
            else:
                mine = f"planner {r['t']:.4e} s at arena {r['arena']}"
                mine += " (not slower)" if r["t"] <= t * (1 + 1e-9) else " (SLOWER)"
            print(f"    {name:<17} arena {arena:>11} step {t:.4e} s | {mine}")
    print(f"\nworst gap to the oracle: {worst_gap:.2f}% of the unplanned step time")


if __name__ == "__main__":
    main()
