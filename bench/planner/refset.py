#!/usr/bin/python3
"""The planner's reference set, two option sets side by side.

    PYTHONPATH=python /usr/bin/python3 bench/planner/refset.py --bin build/bin
        [--a "checkpoints=false"] [--b ""] [--bin-b OTHER_BUILD/bin]
        [--models mlp,resnet18,transformer,gpt] [--work DIR]

The reference set of docs/planner.md: the four example models
(python/export_models.py, SGD with momentum, built by example_steps.build_step)
at 10 budgets from 25% to 80% of their unplanned device arena on h100-sxm, and
at 40% and 60% on rtx-4090. Each row is planned twice by
--offload-plan-memory, with the extra options --a and then --b (e.g. a new
planner option off and on), and prints both simulated step times, their
ratio (b / a), both planning times (the planner's own, from its report) and
whether the plans differ. Rows where neither plans (below the smallest
reachable arena) are counted apart. Ends with the geometric mean of the
ratios over the rows both planned, rows faster and slower (by more than
0.05%), and the total planning seconds of each. With --bin-b the second plan
of each row is made by that build's offload-opt (e.g. a change meant to keep
every plan byte-identical: each row should say "same").
"""
import argparse
import math
import os
import re
import sys

from example_steps import build_step, run

ROWS = [("h100-sxm", p) for p in (25, 30, 35, 40, 45, 50, 55, 60, 70, 80)] + \
       [("rtx-4090", p) for p in (40, 60)]


def plan(bin_dir, step, budget, target, extra, out):
    """(simulated step seconds, planning seconds, planned file) or None."""
    opts = f"budget={budget} target={target} report=-" + (f" {extra}" if extra else "")
    r = run([os.path.join(bin_dir, "offload-opt"), step, f"--offload-plan-memory={opts}",
             "-o", out], ok=False)
    if r.returncode != 0:
        return None
    t = float(re.search(r"simulated step time on \S+: \S+ s -> ([0-9.e+-]+) s", r.stdout).group(1))
    ps = float(re.search(r"planning took ([0-9.]+) s", r.stdout).group(1))
    return t, ps, out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bin", required=True)
    ap.add_argument("--a", default="checkpoints=false", help="extra planner options, first")
    ap.add_argument("--b", default="", help="extra planner options, second")
    ap.add_argument("--bin-b", help="the build whose offload-opt makes the second plan "
                    "(default: --bin)")
    ap.add_argument("--models", default="mlp,resnet18,transformer,gpt")
    ap.add_argument("--work", default="/tmp/offload-refset")
    a = ap.parse_args()
    os.makedirs(a.work, exist_ok=True)
    bin_b = a.bin_b or a.bin
    print(f"a: {a.a or '(defaults)'} ({a.bin}); b: {a.b or '(defaults)'} ({bin_b})")
    print(f"{'model':<12} {'target':<9} {'%':>3} {'a s':>11} {'b s':>11} {'b/a':>7} "
          f"{'a plan s':>8} {'b plan s':>8}  plans")
    ratios, faster, slower, unplanned, plan_s = [], 0, 0, 0, [0.0, 0.0]
    for model in a.models.split(","):
        step, arena, _ = build_step(model, a.work, a.bin)
        for target, pct in ROWS:
            budget = arena * pct // 100
            res = [plan(d, step, budget, target, x,
                        os.path.join(a.work, f"{model}.{target}.{pct}.{k}.mlir"))
                   for k, x, d in (("a", a.a, a.bin), ("b", a.b, bin_b))]
            if not res[0] or not res[1]:
                unplanned += 1
                print(f"{model:<12} {target:<9} {pct:>3} "
                      + " ".join("-" if x is None else f"{x[0]:.4e}" for x in res))
                continue
            (ta, pa, fa), (tb, pb, fb) = res
            same = open(fa).read() == open(fb).read()
            ratio = tb / ta
            ratios.append(ratio)
            faster += ratio < 1 - 5e-4
            slower += ratio > 1 + 5e-4
            plan_s[0] += pa
            plan_s[1] += pb
            print(f"{model:<12} {target:<9} {pct:>3} {ta:>11.4e} {tb:>11.4e} {ratio:>7.4f} "
                  f"{pa:>8.3f} {pb:>8.3f}  {'same' if same else 'differ'}", flush=True)
    if not ratios:
        sys.exit("refset.py: no row planned")
    geo = math.exp(sum(math.log(r) for r in ratios) / len(ratios))
    print(f"{len(ratios)} rows planned ({unplanned} not): geomean b/a {geo:.4f}, {faster} faster, "
          f"{slower} slower; planning {plan_s[0]:.2f} s (a) vs {plan_s[1]:.2f} s (b)")


if __name__ == "__main__":
    main()
