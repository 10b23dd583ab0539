#!/usr/bin/python3
"""ctest `bench.plan-failures`: the planner benches tell the planner's answer
about a budget from a run that broke.

    PYTHONPATH=python /usr/bin/python3 bench/planner/check_plan_failures.py --bin build/bin
        --work DIR

A failed offload-opt run reads as "no fit" in realistic.py's table only when
it is the planner's answer that no plan fits the budget (oracle.no_plan_fits);
any other failure (here: an output folder that does not exist, a step file
that does not exist, standing for a full disk or a crash) stops the table with
offload-opt's output. Checks, on the mlp example's training step:
  * oracle.plan at budget=1: no_fit, and the smallest budget it asks for;
  * oracle.plan writing into a missing folder: an error that is not no_fit;
  * realistic.plan_row there: exits (SystemExit), where it returned
    {"fits": False} before;
  * realistic.smallest_reachable and realistic.run_baseline on a missing step
    file: exit; run_baseline with strict=False (the PyTorch partitioner's
    fractions) returns (None, None, the error's last line).
"""
import argparse
import os
import sys

import oracle
import realistic
from example_steps import ROOT, run


def expect_exit(what, fn, *args):
    try:
        fn(*args)
    except SystemExit as e:
        if not str(e.code or ""):
            sys.exit(f"FAIL: {what} exited without saying why")
        print(f"ok: {what} stops: {str(e.code).splitlines()[0][:100]}")
        return
    sys.exit(f"FAIL: {what} did not stop")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bin", required=True)
    ap.add_argument("--work", required=True)
    args = ap.parse_args()
    os.makedirs(args.work, exist_ok=True)
    step = os.path.join(args.work, "mlp-step.mlir")
    run([os.path.join(args.bin, "offload-opt"),
         os.path.join(ROOT, "test", "Inputs", "mlp-forward.mlir"), "--offload-autodiff",
         "-o", step])
    missing_dir = os.path.join(args.work, "no-such-folder")
    missing_step = os.path.join(args.work, "no-such-step.mlir")

    r = oracle.plan(args.bin, step, 1, "h100-sxm", args.work, "budget1")
    if "error" not in r or not r["no_fit"] or not isinstance(r["ask"], int):
        sys.exit(f"FAIL: budget=1 should be the planner's no-fit answer: {r}")
    print(f"ok: budget=1 is a no-fit answer, asks for budget={r['ask']}")

    r = oracle.plan(args.bin, step, r["ask"], "h100-sxm", missing_dir, "broken")
    if "error" not in r or r["no_fit"]:
        sys.exit(f"FAIL: a run writing into a missing folder should be a broken run: {r}")
    print("ok: a run writing into a missing folder is not a no-fit answer")

    expect_exit("plan_row writing into a missing folder", realistic.plan_row, args.bin, step,
                1 << 40, "h100-sxm", missing_dir, "broken", None)
    expect_exit("smallest_reachable on a missing step", realistic.smallest_reachable, args.bin,
                missing_step, "h100-sxm", None)
    expect_exit("a baseline on a missing step", realistic.run_baseline, args.bin, missing_step,
                ["--offload-early-update"], "h100-sxm")
    a, t, e = realistic.run_baseline(args.bin, missing_step, ["--offload-early-update"],
                                     "h100-sxm", strict=False)
    if a is not None or t is not None or not e:
        sys.exit(f"FAIL: a soft baseline should return its error: {(a, t, e)}")
    print(f"ok: a soft baseline returns its error: {e[:100]}")
    print("plan failures: all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
