#!/usr/bin/python3
"""The planner against an exact oracle and against baselines, on the example models.

    /usr/bin/python3 bench/planner/oracle.py --bin build/bin
        [--models mlp,resnet18,transformer,gpt] [--target h100-sxm]
        [--points 5] [--time-limit 60] [--work DIR]
    /usr/bin/python3 bench/planner/oracle.py --bin build/bin --step STEP.mlir
        [--budget-pcts 20,30,40,50,60]

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
options <= the peak the planner's own decisions reach in this model. The
planner's decisions are priced with the same objective (column `priced`,
next to the simulator's `overhead`), so `gap` is (planner - oracle) in
percent of the unplanned step time: how much overhead exact optimisation
would remove. A solve that hits --time-limit is reported as "timeout", not
as a gap. `LP bound` is the same program's LP relaxation (every x in
[0, 1]): a lower bound on the model's optimum that solves at any size
(--step plans a given step, of thousands of ops, against it alone); --check
also fails when it lies above the MILP's optimum.

Recompute chains are modelled as the Recompute pass runs them: each
recompute option lists the candidates its standalone cone reads (`reads`);
when one of those is recomputed too, the region reruns its cone as well,
transitively. z[v,w] >= (v, w and a reads-path between them recomputed)
adds w's recompute seconds, and T[v] >= m_w z[v,w] bounds the bytes v's
region holds at its use (m_w: w's value and its own cone's intermediates).
(Until November 2026 the oracle priced every cone standalone, as if every
other saved value were kept: chains were free, and the "gap" at tight
budgets compared the planner with a plan no pass can run.)
Shared regions (the planner's SharedRegions.cpp: a recomputed value computed
once by the region of a reader that reruns its cone, and held from there to
its own uses) are in the problem file (`shared_into`, `held_from`): the
planner's choice is priced with them (planner_held), and the LP relaxation
may share too (y[v,w] <= z[v,w]: w's own seconds back, its bytes held from
v's region), on direct reads and on the planner's pairs; the MILP does not
(its optimum is replayed from a decisions file, which cannot share).

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
import shutil
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


# Memory rows and the chains' T variables in MB, not bytes: with byte-sized
# coefficients (up to 1e9) next to objective terms of 1e-2, HiGHS returned
# "optimal" LP objectives above a feasible point's (ResNet-50 bf16-mixed at
# 8.53 GB: 1.651e-3 s, or 1.735e-3 s without presolve, where the planner's
# own decisions are feasible at 1.545e-3 s), which no bound may do.
BYTE_SCALE = 1e-6
# The valid bound leaves the chains' transient memory (z, T below) out where
# a step has more chain terms than this: a relaxation (less memory charged;
# the chains cost no seconds there, the union of ops does). Llama-2-7B
# bf16-mixed has 231,015 and its LP took 538 s with them; ResNet-50 and GPT-2
# 124M (18-22 thousand) bound the same without them, ViT-B/16 (25 thousand)
# up to 2% lower.
VALID_CHAIN_TERMS = 100_000

WINDOWS = ("to_host_forward", "to_host_backward", "to_device_forward", "to_device_backward")


def check_version(problem, path):
    if problem.get("format") != "offload-plan-problem" or problem.get("version") != 3:
        sys.exit(f"oracle: {path}: expected an offload-plan-problem of version 3 (per-phase link "
                 f"windows, recompute chains), got {problem.get('format')!r} version {problem.get('version')!r}; "
                 "rebuild offload-opt")


def recompute_options(problem):
    """{candidate index: option index (into options_of)} of every recompute
    option."""
    return {ci: k for k, (ci, o) in enumerate(options_of(problem))
            if o["decision"] == "recompute"}


def chain_terms(problem):
    """The recompute chains as the Recompute pass runs them: a region reruns
    its cone back to values that stay available, so when a value its cone
    reads (`reads`) is recomputed too, the region reruns that value's cone as
    well, and so on. Returns [(v, w, via)]: candidate v's region includes
    w's cone when v, w and every candidate on some reads-path between them
    are recomputed; `via` is the candidate on that path next to w (v itself
    for a direct read). Each term adds w's recompute seconds, and w's value
    plus its own cone's intermediates (m_w) as a bound on v's transient
    bytes at its use."""
    rec = recompute_options(problem)
    opts = options_of(problem)
    reads = {ci: [u for u in opts[k][1].get("reads", []) if u in rec] for ci, k in rec.items()}
    terms = []
    for v in rec:
        seen, stack = set(), [v]
        while stack:
            u = stack.pop()
            for w in reads[u]:
                terms.append((v, w, u))
                if w not in seen and w != v:
                    seen.add(w)
                    stack.append(w)
    return terms


def chain_extra(problem, chosen):
    """(added seconds, {at point: added bytes}) of the chains among the chosen
    recomputes (the exact closure the MILP's z variables bound)."""
    opts = options_of(problem)
    rec = recompute_options(problem)
    chosen_rec = {opts[k][0] for k in chosen if opts[k][1]["decision"] == "recompute"}
    reads = {ci: [u for u in opts[k][1].get("reads", []) if u in chosen_rec]
             for ci, k in rec.items() if ci in chosen_rec}
    secs, at_bytes = 0.0, {}
    m = member_bytes(problem)
    for v in chosen_rec:
        seen, stack = set(), [v]
        while stack:
            u = stack.pop()
            for w in reads[u]:
                if w not in seen and w != v:
                    seen.add(w)
                    stack.append(w)
        ov = opts[rec[v]][1]
        peak = max((m[w] for w in seen), default=0)
        secs += sum(opts[rec[w]][1]["seconds"] for w in seen)
        at_bytes[ov["at"]] = at_bytes.get(ov["at"], 0) + peak
    return secs, at_bytes


def member_bytes(problem):
    """{w: m_w} for every candidate with a recompute option: w's value and
    its own cone's intermediates, held while a chained region computes it."""
    opts = options_of(problem)
    return {w: problem["candidates"][w]["bytes"] + sum(b for _, _, b in opts[k][1]["added"])
            for w, k in recompute_options(problem).items()}


def planner_held(problem):
    """{w: (v, from point)} of the planner's shared regions: recomputed
    candidate w is computed once by the region of candidate v (which reruns
    its cone) and held from v's region to its own uses, instead of a region
    of its own (SharedRegions.cpp; the problem file's shared_into and
    held_from)."""
    return {ci: (c["shared_into"], c["held_from"]) for ci, c in enumerate(problem["candidates"])
            if "shared_into" in c}


def held_extra(problem, held):
    """(seconds given back, [(lo, hi, bytes)] added) of shared regions `held`
    (planner_held): each held value's own region does not run, and its bytes
    stay from the sharing region to its own use."""
    opts = options_of(problem)
    rec = recompute_options(problem)
    secs, ranges = 0.0, []
    for w, (_, start) in (held or {}).items():
        o = opts[rec[w]][1]
        secs += o["seconds"]
        ranges.append((start, o["at"] - 1, problem["candidates"][w]["bytes"]))
    return secs, ranges


def price(problem, chosen, held=None):
    """Objective of a set of chosen option indices (into options_of), with
    the shared regions `held` (planner_held) when given."""
    opts = options_of(problem)
    secs = (sum(opts[k][1]["seconds"] for k in chosen) + chain_extra(problem, chosen)[0]
            - held_extra(problem, held)[0])
    for w in WINDOWS:
        used = sum(opts[k][1]["link"].get(w, 0.0) for k in chosen)
        secs += max(0.0, used - problem["link_windows"][w])
    return secs


def live_after(problem, chosen, held=None):
    live = np.array(problem["base_live_bytes"], dtype=np.int64)
    for lo, hi, b in held_extra(problem, held)[1]:
        live[lo:hi + 1] += b
    opts = options_of(problem)
    for k in chosen:
        for lo, hi, b in opts[k][1]["freed"]:
            live[lo:hi + 1] -= b
        for lo, hi, b in opts[k][1]["added"]:
            live[lo:hi + 1] += b
    for at, b in chain_extra(problem, chosen)[1].items():
        live[at] += b
    return live


def planner_choice(problem):
    chosen = []
    for k, (ci, o) in enumerate(options_of(problem)):
        if problem["candidates"][ci]["chosen"] == o["decision"]:
            chosen.append(k)
    return chosen


def solve(problem, limit_bytes, time_limit, relax=False, shared=None, valid=False):
    """Returns (status, objective, chosen option indices, seconds). With
    `relax`, the LP relaxation (every x in [0, 1]) with shared regions (y
    below; `shared`: planner_held's pairs, offered too): its objective is a
    lower bound on the MILP's, and no options are chosen.

    `valid` (with `relax`): the copies priced as a relaxation of every real
    schedule rather than with the planner's per-phase windows, so that the
    objective bounds the simulated step of any plan at that peak, not only
    the model's optimum (the realistic table's bound): compute stalls for
    copies at least as long as the largest of (i) each link's copy seconds
    less all the step's compute (the unplanned step's, the recomputes' and
    the host updates': a link carries its copies one at a time within the
    step, whatever compute they overlap), and (ii) the sum of the offloads'
    own unhidden parts (each a wait at its own program point: the copy to
    the host before its release, and the prefetch between the start of
    backward, where the prefetch tuning keeps it, and its first use); the
    planner's tie-break share of copy seconds (not a cost) is left out. The
    per-phase windows summed over phases and directions are not a
    relaxation: the prefetch tuning hides copies they count (GPT-2 124M
    bf16-mixed at 9.01 GB on h100-sxm: the model's bound 3.4% above the
    simulated plan)."""
    opts = options_of(problem)
    n_opt = len(opts)
    rec = recompute_options(problem)
    # Chain variables: z[(v, w)] (v's region reruns w's cone) and T[v] (the
    # largest chained member v's region holds), after x and the exposures.
    terms = chain_terms(problem)
    if valid and relax and len(terms) > VALID_CHAIN_TERMS:
        terms = []
    z_index, t_index = {}, {}
    for v, w, _ in terms:
        z_index.setdefault((v, w), None)
    base_z = n_opt + len(WINDOWS)
    for j, key in enumerate(z_index):
        z_index[key] = base_z + j
    base_t = base_z + len(z_index)
    for v, _ in z_index:
        t_index.setdefault(v, base_t + len(t_index))
    n = base_t + len(t_index)
    # Shared regions, in the relaxation (the bound): y[(v, w)] is w computed
    # by v's region, which reruns its cone (z), and held from there to w's
    # own use instead of rerun by a region of its own (SharedRegions.cpp;
    # only where v's region comes first): w's recompute seconds back, w's
    # bytes from v's region to its use. Offered for the pairs where v's
    # cone reads w directly and for the pairs `shared` names (the
    # planner's, planner_held), so that the planner's plan is one of the
    # relaxation's: every chain pair made GPT-2 124M's LP take 55 s
    # instead of 0.7 s for the same bound. The MILP leaves them out, since
    # its optimum is built with the real passes from a decisions file,
    # which has no sharing.
    y_index = {}
    if relax:
        direct = {(v, w) for v, w, via in terms if via == v}
        for v, w in z_index:
            if opts[rec[v]][1]["at"] < opts[rec[w]][1]["at"] and (
                    (v, w) in direct or (shared is not None and shared.get(w, (None,))[0] == v)):
                y_index[(v, w)] = n + len(y_index)
        n += len(y_index)
    # The valid bound's op variables: u[o] >= x[k] for every recompute option
    # k whose standalone cone runs op o (`ops` in the problem file), less the
    # checkpoint candidates downstream of o in that cone, s[c] (a region
    # skips o only where one of them is saved; ops in `min_ops`, which run
    # whatever is saved, have none): u[o] >= x[k] - sum s[c]. Each op's
    # seconds counted once; each s[c] holds its bytes from its last forward
    # use to the first region that could read it (at least that long in any
    # plan that saves it). Options without `ops` keep their seconds.
    u_index, u_seconds, u_of, s_index, s_until = {}, {}, {}, {}, {}
    if valid and relax:
        # A file without the checkpoint candidates (before 7 December 2026's
        # last change) counts `min_ops` alone: checkpoints then cost nothing.
        key = "ops" if "checkpoints" in problem else "min_ops"
        for k, (_, o) in enumerate(opts):
            if o["decision"] != "recompute" or key not in o:
                continue
            must = {e[0] for e in o.get("min_ops", [])}
            mine = {}
            for e in o[key]:
                sec_cps = mine.setdefault(e[0], [0.0, set()])
                sec_cps[0] += e[1]
                if len(e) > 2:
                    sec_cps[1].update(e[2])
            u_of[k] = []
            for op, (sec, cps) in mine.items():
                if op not in u_index:
                    u_index[op] = n + len(u_index)
                u_seconds[op] = max(u_seconds.get(op, 0.0), sec)
                cps = [] if op in must else sorted(cps)
                u_of[k].append((op, cps))
                for c in cps:
                    s_until[c] = min(s_until.get(c, o["at"]), o["at"])
        n += len(u_index)
        for c in sorted(s_until):
            s_index[c] = n + len(s_index)
        n += len(s_index)
    base = np.array(problem["base_live_bytes"], dtype=np.float64)
    points = len(base)
    # The objective in percent of the unplanned step (HiGHS's absolute
    # optimality gap, 1e-6, would swallow differences of microseconds).
    scale = 100.0 / problem["unplanned_step_seconds"]
    cost = np.zeros(n)
    cost[:n_opt] = [o["seconds"] * scale for _, o in opts]
    cost[n_opt:base_z] = 1.0  # e_w, in percent of the step too
    valid = valid and relax
    tie = problem.get("tie_break", 0.01)
    if valid:
        # Offloads' own unhidden parts go to the stall (row (ii) below); host
        # parameters pay their update (compute) without the tie-break share.
        for k, (_, o) in enumerate(opts):
            if o["decision"] == "offload":
                cost[k] = 0.0
            elif o["decision"] == "host":
                cost[k] = max(0.0, o["seconds"] - tie * (o.get("to_host_seconds", 0.0)
                                                         + o.get("to_device_seconds", 0.0))) * scale
        # The stall S (the first exposure variable) is the objective's; the
        # second and third are the two links' exposures, the fourth unused.
        cost[n_opt + 1:base_z] = 0.0
        # Recomputes: each op of the union of the recomputed cones once (a
        # region reruns at least its standalone cone, and chains and shared
        # regions only add ops to it or hold what it computed), so the
        # chains' z and the sharing's y cost nothing here.
        for k in u_of:
            cost[k] = 0.0
        for op, j in u_index.items():
            cost[j] = u_seconds[op] * scale
    for (v, w), j in z_index.items():
        cost[j] = opts[rec[w]][1]["seconds"] * scale
    for (v, w), j in y_index.items():
        cost[j] = -opts[rec[w]][1]["seconds"] * scale
    if u_index:
        for (v, w), j in z_index.items():
            cost[j] = 0.0
        for j in y_index.values():
            cost[j] = 0.0
    # Memory: only points that can exceed the limit constrain.
    added = np.zeros(points)
    for _, o in opts:
        for lo, hi, b in o["added"]:
            added[lo:hi + 1] += b
    m = member_bytes(problem)
    t_bound = {}
    for v, w in z_index:
        t_bound[v] = max(t_bound.get(v, 0), m[w])
    for v, b in t_bound.items():
        added[opts[rec[v]][1]["at"]] += b
    held_range = {key: (opts[rec[key[0]]][1]["at"], opts[rec[key[1]]][1]["at"] - 1,
                        problem["candidates"][key[1]]["bytes"]) for key in y_index}
    for lo, hi, b in held_range.values():
        added[lo:hi + 1] += b
    checkpoint_range = {c: (problem["checkpoints"][c]["last_forward"] + 1, s_until[c] - 1,
                            problem["checkpoints"][c]["bytes"]) for c in s_index}
    for lo, hi, b in checkpoint_range.values():
        added[lo:hi + 1] += b
    hot = np.nonzero(base + added > limit_bytes)[0]
    # Memory in difference form: every contribution is a range of points
    # (an option's freed and added bytes, a chain's T_v at its region, a held
    # value's or a saved checkpoint's bytes over their ranges), and the net
    # bytes they remove are one variable D per segment between consecutive
    # range ends, D_i = D_(i-1) + (ranges starting at segment i) - (ranges
    # that ended just before it), bounded by the tightest hot point in the
    # segment. The same constraints as a row per hot point, with two
    # nonzeros per range instead of one per point covered: Llama-2-7B's
    # memory rows had 13.7 M nonzeros, and HiGHS did not solve its LP in
    # 600 s.
    ranges = []  # (variable, lo, hi, coefficient in MB)
    for k, (_, o) in enumerate(opts):
        for lo, hi, b in o["freed"]:
            ranges.append((k, lo, hi, -float(b) * BYTE_SCALE))
        for lo, hi, b in o["added"]:
            ranges.append((k, lo, hi, float(b) * BYTE_SCALE))
    for v, j in t_index.items():
        at = opts[rec[v]][1]["at"]
        ranges.append((j, at, at, 1.0))
    # Held values (y) and saved checkpoints (s): their bytes over their ranges.
    for j, (lo, hi, b) in [(j, held_range[key]) for key, j in y_index.items()] + \
            [(j, checkpoint_range[c]) for c, j in s_index.items()]:
        ranges.append((j, lo, hi, float(b) * BYTE_SCALE))
    ranges = [(j, max(lo, 0), min(hi, points - 1), c) for j, lo, hi, c in ranges
              if c and max(lo, 0) <= min(hi, points - 1)]
    events = np.array(sorted({0} | {lo for _, lo, _, _ in ranges} |
                             {hi + 1 for _, _, hi, _ in ranges if hi + 1 < points}))
    slack = np.full(points, np.inf)
    slack[hot] = (limit_bytes - base[hot]) * BYTE_SCALE
    segment_of = np.searchsorted(events, np.arange(points), side="right") - 1
    segment_ub = np.full(len(events), np.inf)
    np.minimum.at(segment_ub, segment_of, slack)
    n_seg = len(events) if len(hot) else 0
    base_d = n
    n += n_seg
    cost = np.concatenate([cost, np.zeros(n_seg)])
    mem_rows, mem_cols, mem_vals = [], [], []
    if n_seg:
        index_of = {int(e): i for i, e in enumerate(events)}
        for i in range(n_seg):
            mem_rows.append(i)
            mem_cols.append(base_d + i)
            mem_vals.append(1.0)
            if i:
                mem_rows.append(i)
                mem_cols.append(base_d + i - 1)
                mem_vals.append(-1.0)
        for j, lo, hi, c in ranges:
            mem_rows.append(index_of[lo])
            mem_cols.append(j)
            mem_vals.append(-c)
            if hi + 1 < points:
                mem_rows.append(index_of[hi + 1])
                mem_cols.append(j)
                mem_vals.append(c)
    constraints = []
    # Chains: z >= (both ends and the path recomputed) - ..., T_v >= m_w z.
    cr, cc, cv, hi_ = [], [], [], []
    for v, w, via in terms:
        r = len(hi_)
        first = rec[v] if via == v else z_index[(v, via)]
        cr += [r, r, r]
        cc += [first, rec[w], z_index[(v, w)]]
        cv += [1.0, 1.0, -1.0]
        hi_.append(1.0)
    for (v, w), j in z_index.items():
        r = len(hi_)
        cr += [r, r]
        cc += [j, t_index[v]]
        cv += [float(m[w]) * BYTE_SCALE, -1.0]
        hi_.append(0.0)
    # y <= z (the sharing region reruns w's cone); each w shared at most
    # once, and only when recomputed.
    shared_by = {}
    for (v, w), j in y_index.items():
        r = len(hi_)
        cr += [r, r]
        cc += [j, z_index[(v, w)]]
        cv += [1.0, -1.0]
        hi_.append(0.0)
        shared_by.setdefault(w, []).append(j)
    for w, js in shared_by.items():
        r = len(hi_)
        cr += [r] * (len(js) + 1)
        cc += js + [rec[w]]
        cv += [1.0] * len(js) + [-1.0]
        hi_.append(0.0)
    for k, ops_k in u_of.items():
        for op, cps in ops_k:
            r = len(hi_)
            cr += [r, r] + [r] * len(cps)
            cc += [k, u_index[op]] + [s_index[c] for c in cps]
            cv += [1.0, -1.0] + [-1.0] * len(cps)
            hi_.append(0.0)
    if hi_:
        constraints.append(LinearConstraint(coo_matrix((cv, (cr, cc)), shape=(len(hi_), n)),
                                            -np.inf, np.array(hi_)))
    if n_seg:
        a = coo_matrix((mem_vals, (mem_rows, mem_cols)), shape=(n_seg, n))
        constraints.append(LinearConstraint(a, 0.0, 0.0))
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
    if not valid:
        for j, key in enumerate(WINDOWS):
            row = np.zeros(n)
            row[:n_opt] = [o["link"].get(key, 0.0) * scale for _, o in opts]
            row[n_opt + j] = -1.0
            constraints.append(LinearConstraint(row.reshape(1, -1), -np.inf,
                                                problem["link_windows"][key] * scale))
    else:
        # Compute that hides copies beyond the unplanned step's: the
        # recomputes (their own cones and the chains' z) and host updates.
        hide = np.zeros(n)
        for k, (_, o) in enumerate(opts):
            if o["decision"] == "recompute" and k not in u_of:
                hide[k] = o["seconds"] * scale
            elif o["decision"] == "host":
                hide[k] = cost[k]
        for op, j in u_index.items():
            hide[j] = cost[j]
        if not u_index:
            for (v, w), j in z_index.items():
                hide[j] = opts[rec[w]][1]["seconds"] * scale
        compute = problem.get("compute_seconds", 0.0) * scale
        for j, keys in ((1, ("to_host_forward", "to_host_backward")),
                        (2, ("to_device_forward", "to_device_backward"))):
            row = -hide.copy()
            row[:n_opt] += [sum(o["link"].get(key, 0.0) for key in keys) * scale
                            for _, o in opts]
            row[n_opt + j] = -1.0
            constraints.append(LinearConstraint(row.reshape(1, -1), -np.inf, compute))
            row = np.zeros(n)
            row[n_opt + j] = 1.0
            row[n_opt] = -1.0
            constraints.append(LinearConstraint(row.reshape(1, -1), -np.inf, 0.0))
        row = np.zeros(n)
        for k, (_, o) in enumerate(opts):
            if o["decision"] == "offload":
                row[k] = max(0.0, o["seconds"] - tie * (o.get("to_host_seconds", 0.0)
                                                        + o.get("to_device_seconds", 0.0))) * scale
        row[n_opt] = -1.0
        constraints.append(LinearConstraint(row.reshape(1, -1), -np.inf, 0.0))
    integrality = np.zeros(n)
    if not relax:
        integrality[:n_opt] = 1
    lb = np.zeros(n)
    ub = np.ones(n)
    ub[n_opt:base_z] = np.inf
    ub[base_t:] = np.inf
    for j in y_index.values():
        ub[j] = 1.0
    for j in list(u_index.values()) + list(s_index.values()):
        ub[j] = 1.0
    # The net bytes removed per segment: free, at most the segment's slack.
    lb[base_d:base_d + n_seg] = -np.inf
    ub[base_d:base_d + n_seg] = segment_ub[:n_seg]
    t0 = time.perf_counter()
    options = {"time_limit": time_limit, "disp": False, "mip_rel_gap": 1e-9}
    res = milp(cost, constraints=constraints, integrality=integrality, bounds=Bounds(lb, ub),
               options=options)
    if relax and res.status == 4:
        # HiGHS's presolve can end an LP with the sharing variables in an
        # unknown model status (ResNet-50 on a100-40g at 6.63 GB: "HiGHS
        # Status 15"); without presolve it solves.
        res = milp(cost, constraints=constraints, integrality=integrality, bounds=Bounds(lb, ub),
                   options=dict(options, presolve=False))
    secs = time.perf_counter() - t0
    if res.status == 0 and relax:
        # The objective is in percent of the unplanned step: back to seconds.
        return "optimal", res.fun / scale, [], secs
    if res.status == 0:
        chosen = [k for k in range(n_opt) if res.x[k] > 0.5]
        return "optimal", price(problem, chosen), chosen, secs
    if res.status == 1:
        return "timeout", None, [], secs
    return "infeasible" if res.status == 2 else f"status {res.status}", None, [], secs


# --- The pipeline -------------------------------------------------------------

def planned_figures(out):
    """The planned arena and the unplanned and planned simulated step seconds
    from the planner's report (None where it does not print them)."""
    res = {}
    m = re.search(r"device arena: (\d+) -> (\d+) bytes", out)
    res["arena"] = int(m.group(2)) if m else None
    m = re.search(r"simulated step time on \S+: ([0-9.e+-]+) s -> ([0-9.e+-]+) s", out)
    res["t0"], res["t"] = (float(m.group(1)), float(m.group(2))) if m else (None, None)
    return res


def no_plan_fits(output):
    """Whether offload-opt's failed output is the planner's answer that no
    plan fits the budget (PlanMemory.cpp's noPlanFits / noPlanKeepsSaved),
    as opposed to a run that broke (a full disk, a crash, a bad option)."""
    return ("offload-plan-memory: no plan fits the budget" in output
            or "offload-plan-memory: no plan keeps at most" in output)


def plan(bin_dir, step, budget, target, work, tag, extra="", timeout=None):
    """Plans `step` at `budget`; `extra`: more --offload-plan-memory options
    (e.g. "slice=never"); `timeout`: seconds (subprocess.TimeoutExpired).
    On failure {"error": the output, "ask": the smallest budget the planner
    asks for or None, "no_fit": whether the failure is the planner's answer
    about the budget (no_plan_fits) rather than a broken run}."""
    problem = os.path.join(work, tag + ".problem.json")
    r = run([os.path.join(bin_dir, "offload-opt"), step,
             f"--offload-plan-memory=budget={budget} target={target} report=- problem={problem}"
             + (f" {extra}" if extra else ""),
             "-o", os.path.join(work, tag + ".planned.mlir")], ok=False, timeout=timeout)
    if r.returncode != 0:
        m = re.search(r"Ask for budget=(\d+)", r.stdout)
        return {"error": r.stdout, "ask": int(m.group(1)) if m else None,
                "no_fit": no_plan_fits(r.stdout)}
    out = r.stdout
    res = {"problem": problem}
    res.update(planned_figures(out))
    m = re.search(r"planning took ([0-9.]+) s", out)
    res["plan_s"] = float(m.group(1)) if m else 0.0
    if "fits unplanned" in out:
        m = re.search(r"device arena (\d+) bytes", out)
        res["arena"] = int(m.group(1))
        res["problem"] = None
    return res


def replay(bin_dir, step, budget, target, problem, chosen, work, tag):
    """Builds the decisions `chosen` (option indices) with the real passes:
    offload-opt's planner replays them (decisions=FILE) and checks the plan
    against `budget`. Returns (device arena bytes, simulated step seconds),
    the seconds None when the arena is over the budget."""
    opts = options_of(problem)
    path = os.path.join(work, tag + ".decisions.json")
    with open(path, "w") as f:
        json.dump({"format": "offload-plan-decisions", "version": 1,
                   "decisions": [{"candidate": opts[k][0],
                                  "name": problem["candidates"][opts[k][0]]["name"],
                                  "decision": opts[k][1]["decision"]} for k in chosen]}, f)
    r = run([os.path.join(bin_dir, "offload-opt"), step,
             f"--offload-plan-memory=budget={budget} target={target} report=- decisions={path}",
             "-o", "/dev/null"], ok=False)
    if r.returncode != 0:
        m = re.search(r"need a device arena of (\d+) bytes", r.stdout)
        if not m:
            sys.exit(f"replaying {path} failed:\n{r.stdout[-2000:]}")
        return int(m.group(1)), None
    figures = planned_figures(r.stdout)
    return figures["arena"], figures["t"]


def oracle_plan(bin_dir, step, budget, target, problem, limit, first, time_limit, work, tag):
    """The oracle's optimum built with the real passes and fitting `budget`.
    `first` is solve()'s result at `limit` (bytes in the exported model);
    it is replayed, and while its real arena is over the budget (the model
    does not see fragmentation, prefetch placement or region order), solved
    again with the limit lowered by the overshoot (at most 6 solves). Once
    one fits, the limit is bisected between it and the last limit that did
    not fit (6 more solves; while none overshot, it climbs by the arena's
    slack under the budget), keeping the fastest plan that fits, as the
    planner's own rounds do. Returns (status, solve seconds after `first`,
    step seconds of the fitting plan or None, its limit)."""
    total = 0.0

    def attempt(at, solved=None):
        """(status, arena, step seconds or None) of the optimum at `at`."""
        nonlocal total
        status, _, chosen, secs = solved or solve(problem, at, time_limit)
        total += 0.0 if solved else secs
        if status != "optimal":
            return status, None, None
        arena, t = replay(bin_dir, step, budget, target, problem, chosen, work, tag)
        return status, arena, t

    over, fit = None, None
    status, arena, t = attempt(limit, first)
    for _ in range(5):
        if status != "optimal" or t is not None:
            break
        over = limit
        limit -= max(arena - budget, 256)
        status, arena, t = attempt(limit)
    if t is None:
        return status, total, None, limit
    fit = (t, limit)

    def keep_best():
        # The fastest fitting plan's decisions, for offload-opt's decisions=.
        shutil.copyfile(os.path.join(work, tag + ".decisions.json"),
                        os.path.join(work, tag + ".oracle.decisions.json"))

    keep_best()
    # As the planner does (runRounds): the limit bisected between the last
    # that fit and the last that did not, 6 times, the fastest plan kept;
    # while none has overshot, the limit climbs by the real arena's slack
    # under the budget instead (the model's peak can lie above the arena).
    lo, hi = limit, over
    for _ in range(6):
        if hi is None:
            if budget - arena <= 512:
                break
            mid = lo + (budget - arena)
        else:
            if hi - lo <= 512:
                break
            mid = (lo + hi) // 2
        status, mid_arena, t = attempt(mid)
        if status != "optimal":
            break
        if t is None:
            hi = mid
            continue
        lo, arena = mid, mid_arena
        if t < fit[0]:
            fit = (t, mid)
            keep_best()
    return "optimal", total, fit[0], fit[1]


def measure_baseline(bin_dir, step, passes, target):
    out = run([os.path.join(bin_dir, "offload-opt"), step] + passes +
              ["--offload-memory-report", f"--offload-cost-report=per-op=false target={target}",
               "-o", "/dev/null"]).stdout
    arena = int(re.search(r"device arena bytes: (\d+)", out).group(1))
    t = float(re.search(r"simulated step time on \S+: ([0-9.e+-]+) s", out).group(1))
    return arena, t


def lp_rows(args):
    """--step: the planner against the LP relaxation's lower bound on a step
    of any size (thousands of ops, where the MILP does not solve in
    minutes)."""
    os.makedirs(args.work, exist_ok=True)
    out = run([os.path.join(args.bin, "offload-opt"), args.step, "--offload-memory-report",
               "-o", os.devnull]).stdout
    unplanned = int(re.search(r"device arena bytes: (\d+)", out).group(1))
    print(f"{args.step}: unplanned arena {unplanned} bytes, target {args.target}")
    print(f"  {'budget':>12} {'arena':>12} {'overhead':>9} {'priced':>8} {'LP bound':>8} "
          f"{'gap':>7} {'plan s':>7} {'LP s':>6}  candidates")
    for pct in [float(x) for x in args.budget_pcts.split(",") if x]:
        budget = int(unplanned * pct / 100)
        r = plan(args.bin, args.step, budget, args.target, args.work, f"step.{pct:g}")
        if "error" in r:
            print(f"  {budget:>12} planner: {r['error'].strip().splitlines()[0][:100]}")
            continue
        if not r["problem"]:
            print(f"  {budget:>12} {r['arena']:>12} fits unplanned")
            continue
        problem = json.load(open(r["problem"]))
        check_version(problem, r["problem"])
        mine = planner_choice(problem)
        base_t = problem["unplanned_step_seconds"]
        ovh = 100.0 * (r["t"] - r["t0"]) / r["t0"] if r.get("t0") else 0.0
        held = planner_held(problem)  # our shared regions, which the LP may take too
        limit = int(live_after(problem, mine, held).max()) if mine else problem["achieved_bytes"]
        status, lp_obj, _, secs = solve(problem, limit, args.time_limit, relax=True, shared=held)
        mp = 100.0 * price(problem, mine, held) / base_t
        lp = f"{100.0 * lp_obj / base_t:.1f}%" if status == "optimal" else status
        gap = f"{mp - 100.0 * lp_obj / base_t:.2f}%" if status == "optimal" else "-"
        print(f"  {budget:>12} {r['arena']:>12} {ovh:>8.1f}% {mp:>7.1f}% {lp:>8} {gap:>7} "
              f"{r['plan_s']:>7.3f} {secs:>6.2f}  {len(problem['candidates'])}"
              + ("; the planner's all-in fallback" if problem["fallback"] else ""))
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bin", default=os.path.join(ROOT, "build", "bin"),
                    help="folder of offload-import and offload-opt (default: build/bin)")
    ap.add_argument("--models", default="mlp,resnet18,transformer,gpt",
                    help="comma-separated example models (default %(default)s)")
    ap.add_argument("--target", default="h100-sxm", help="target GPU of the cost model: h100-sxm, h100-pcie, a100-80g, a100-40g, l4, rtx-4090, or a target JSON file (default %(default)s)")
    ap.add_argument("--points", type=int, default=5,
                    help="budgets per model, from the smallest reachable arena to the unplanned "
                         "one (default %(default)s)")
    ap.add_argument("--time-limit", type=float, default=60.0,
                    help="seconds per MILP solve; a solve that hits it is reported as timeout "
                         "(default %(default)s)")
    ap.add_argument("--work", default="/tmp/offload-planner-oracle",
                    help="folder for the exported models, steps, problems and decisions "
                         "(default %(default)s)")
    ap.add_argument("--no-baselines", action="store_true", help="skip the hand-policy baselines")
    ap.add_argument("--check", action="store_true",
                    help="exit 1 unless every planned row's oracle solved and no gap is below "
                         "-0.5%% (an optimum worse than the planner's feasible choice would mean "
                         "the MILP and the planner's price disagree); the ctest bench.oracle")
    ap.add_argument("--step", default="",
                    help="a training step file (offload-opt's output after --offload-autodiff) "
                         "of any size: plan it at --budget-pcts and print, per row, the "
                         "planner's price and the LP relaxation's bound (no MILP, no replay): "
                         "the distance to the model's optimum where the MILP cannot solve")
    ap.add_argument("--budget-pcts", default="20,30,40,50,60",
                    help="with --step: budgets in percent of its unplanned arena")
    args = ap.parse_args()
    if args.step:
        return lp_rows(args)
    failures = []
    os.makedirs(args.work, exist_ok=True)
    worst_gap = worst_sim_gap = 0.0
    for model in args.models.split(","):
        step, unplanned, _ = build_step(model, args.work, args.bin)
        probe = plan(args.bin, step, 1, args.target, args.work, model + ".probe")
        smallest = probe.get("ask")
        if smallest is None:
            sys.exit(f"{model}: the planner did not name the smallest reachable arena:\n"
                     + probe.get("error", "")[-2000:])
        print(f"\n{model}: unplanned arena {unplanned} bytes, smallest reachable {smallest} "
              f"bytes ({100.0 * smallest / unplanned:.1f}%), target {args.target}")
        print(f"  {'budget':>12} {'arena':>12} {'step s':>11} {'overhead':>9} {'priced':>8} "
              f"{'oracle ovh':>10} {'LP bound':>8} {'gap':>7} {'oracle sim':>10} {'sim gap':>8} "
              f"{'plan s':>7} {'oracle s':>8}  decisions")
        budgets = [int(smallest + (unplanned - smallest) * k / (args.points - 1))
                   for k in range(args.points)]
        for k, budget in enumerate(budgets):
            r = plan(args.bin, step, budget, args.target, args.work, f"{model}.{k}")
            if "error" in r:
                print(f"  {budget:>12} planner failed: {r['error'].strip().splitlines()[0][:120]}")
                continue
            ovh = 100.0 * (r["t"] - r["t0"]) / r["t0"] if r.get("t0") else 0.0
            oracle_ovh, gap, osecs, note = "-", "-", 0.0, "fits unplanned"
            lp_col = "-"
            oracle_sim, sim_gap = "-", "-"
            priced = "-"
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
                    solved = solve(problem, limit, args.time_limit)
                    status, obj, _, osecs = solved
                    base_t = problem["unplanned_step_seconds"]
                    priced = f"{100.0 * price(problem, mine) / base_t:.1f}%"
                    if status != "optimal":
                        failures.append(f"{model} at {budget}: oracle {status}")
                    lp_status, lp_obj, _, _ = solve(problem, limit, args.time_limit, relax=True)
                    if lp_status == "optimal":
                        lp_col = f"{100.0 * lp_obj / base_t:.1f}%"
                        if status == "optimal" and lp_obj > obj * (1 + 1e-6) + 1e-12:
                            failures.append(f"{model} at {budget}: the LP bound is above the "
                                            "MILP's optimum")
                    if status == "optimal":
                        g = 100.0 * (price(problem, mine) - obj) / base_t
                        worst_gap = max(worst_gap, g)
                        if g < -0.5:
                            failures.append(f"{model} at {budget}: gap {g:.2f}%, the oracle's "
                                            "optimum is worse than the planner's choice")
                        oracle_ovh = f"{100.0 * obj / base_t:.1f}%"
                        gap = f"{g:.2f}%"
                        over = int(live_after(problem, mine).max()) - limit
                        if over > 0:
                            note += f"; planner's decisions {over} bytes over at oracle prices"
                        # The same optimum built and simulated, at the
                        # real budget.
                        st2, s2, t2, lim2 = oracle_plan(
                            args.bin, step, budget, args.target, problem, limit, solved,
                            args.time_limit, args.work, f"{model}.{k}")
                        osecs += s2
                        if t2 is None:
                            oracle_sim = st2 if st2 != "optimal" else "no fit"
                        else:
                            o_sim = 100.0 * (t2 - r["t0"]) / r["t0"]
                            oracle_sim = f"{o_sim:.1f}%"
                            sg = ovh - o_sim
                            worst_sim_gap = max(worst_sim_gap, sg)
                            sim_gap = f"{sg:.2f}%"
                            if lim2 < limit:
                                note += f"; oracle limit lowered {limit - lim2} bytes to fit"
                            elif lim2 > limit:
                                note += f"; oracle limit raised {lim2 - limit} bytes (arena slack)"
                    else:
                        oracle_ovh, gap = status, "-"
            step_s = f"{r['t']:.4e}" if r.get("t") else "unchanged"
            print(f"  {budget:>12} {r['arena']:>12} {step_s:>11} {ovh:>8.1f}% {priced:>8} "
                  f"{oracle_ovh:>10} {lp_col:>8} {gap:>7} {oracle_sim:>10} {sim_gap:>8} "
                  f"{r['plan_s']:>7.3f} {osecs:>8.2f}  {note}")
        if args.no_baselines:
            continue
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
    print(f"\nworst gap to the oracle: {worst_gap:.2f}% of the unplanned step time in the model, "
          f"{worst_sim_gap:.2f}% simulated (both plans built, at the budget)")
    if args.check:
        for f in failures:
            print("CHECK FAILED:", f)
        if failures:
            sys.exit(1)
        print("check ok: every oracle solved, no negative gap")


if __name__ == "__main__":
    main()
