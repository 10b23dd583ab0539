#!/usr/bin/env python3
"""Checks the planner (--offload-plan-memory) on an exported model.

    PYTHONPATH=python /usr/bin/python3 test/drivers/check_planner.py
        --model resnet18 --bin build/bin --work DIR
        [--target h100-sxm] [--points 4] [--optimizer sgd|adamw] [--dropout P]
        [--threads T] [--batch B] [--micro-batches K]

For two variants of the training step -- as trained (`step`), and with every
gradient also returned (`grads`, whose gradients stay alive to the end of the
step, so its smallest reachable arena is larger) -- it:
1. builds the unplanned step, runs it, and reads its device arena;
2. asks the planner for a budget of 1 byte, which must be refused with the
   smallest device arena the planner can reach ("Ask for budget=N") and no
   output file written;
3. plans the step at --points budgets from that smallest arena N (the
   budget the error names must then succeed) up to one byte below the
   unplanned arena, lowers it, and runs it with offload-run --device-bytes
   BUDGET, which refuses a plan whose device arena exceeds the budget. Every
   output (loss, new parameters, optimizer state, batch-norm statistics, and
   the gradients of `grads`) must be bit-identical to the unplanned step's,
   and the measured peak must equal the planned peak, which must be <= the
   budget. A plan in which the planner sliced a weight (its report says
   `slicing:`) sums each linear's input gradient slice by slice, so there
   every output must instead match to rounding: max |planned - unplanned|
   <= 1e-5 x max |unplanned| per output array (fp32 has 2^-24 ~ 6e-8
   relative precision; a sum of a few dozen slices reordered stays far
   below 1e-5).
With --micro-batches K the step accumulates gradients over K micro-batches
(--offload-autodiff micro-batches=K), planned the same way.
Prints one line per run; exits 1 on any failure.
"""
import argparse
import os
import re
import subprocess
import sys

import numpy as np

from pipeline import compile_step, export_and_import, run


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--bin", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--target", default="h100-sxm")
    ap.add_argument("--points", type=int, default=4)
    ap.add_argument("--optimizer", default="sgd", choices=["sgd", "adamw"])
    ap.add_argument("--precision", default="fp32", choices=["fp32", "bf16-mixed", "fp16-mixed"],
                    help="the step's precision policy (--offload-autodiff precision=)")
    ap.add_argument("--dropout", type=float, default=None)
    ap.add_argument("--batch", type=int, default=0)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--variants", default="step,grads")
    ap.add_argument("--micro-batches", type=int, default=1,
                    help="gradient accumulation over K micro-batches (--offload-autodiff)")
    args = ap.parse_args(argv)

    m = args.model
    os.makedirs(args.work, exist_ok=True)
    w = lambda n: os.path.join(args.work, n)
    export_and_import(m, args.work, args.bin, batch=args.batch, dropout=args.dropout)
    opt = os.path.join(args.bin, "offload-opt")
    ad = ("optimizer=sgd lr=0.1 momentum=0.9" if args.optimizer == "sgd"
          else "optimizer=adamw lr=1e-3 weight-decay=0.01")
    ad += f" precision={args.precision}"
    if args.micro_batches > 1:
        ad += f" micro-batches={args.micro_batches}"

    def offload_run(plan, dump, device_bytes=None):
        cmd = [os.path.join(args.bin, "offload-run"), plan, "--threads", str(args.threads),
               "--params", w(m + ".params.npz"), "--inputs", w(m + ".inputs.npz"),
               "--dump", dump, "--seed", "1234"]
        if device_bytes:
            cmd += ["--device-bytes", str(device_bytes)]
        out = run(cmd)
        mm = re.search(r"peak device bytes: planned (\d+) measured (\d+)", out)
        return int(mm.group(1)), int(mm.group(2))

    failed = False
    for variant in args.variants.split(","):
        grads = "true" if variant == "grads" else "false"
        tag = f"{m}.{variant}"
        step = w(tag + ".step.mlir")
        out = compile_step(args.bin, [w(m + ".mlir"), f"--offload-autodiff={ad} return-gradients={grads}",
                                      "--offload-memory-report"], step, w(tag) + ".oflp")
        unplanned = int(re.search(r"device arena bytes: (\d+)", out).group(1))
        base_peak, base_measured = offload_run(w(tag) + ".oflp", w(tag) + ".npz")
        base = np.load(w(tag) + ".npz")

        refused = w(tag + ".refused.mlir")
        if os.path.exists(refused):
            os.remove(refused)
        r = subprocess.run([opt, step, f"--offload-plan-memory=budget=1 target={args.target}",
                            "-o", refused], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           text=True)
        mm = re.search(r"smallest device arena reachable is (\d+) bytes.*Ask for budget=(\d+)",
                       r.stdout, re.S)
        if r.returncode == 0 or not mm or os.path.exists(refused):
            print(f"{tag}: budget=1 was not refused as expected: FAIL\n{r.stdout}")
            failed = True
            continue
        smallest = int(mm.group(2))
        print(f"{tag}: unplanned device arena {unplanned} bytes, peak {base_peak} (measured "
              f"{base_measured}); budget=1 refused with smallest reachable {smallest} bytes "
              f"({100.0 * smallest / unplanned:.1f}%), nothing written")
        budgets = [smallest + (unplanned - 1 - smallest) * k // (args.points - 1)
                   for k in range(args.points)]
        for b in budgets:
            plan = w(f"{tag}.{b}.oflp")
            out = compile_step(args.bin, [step, f"--offload-plan-memory=budget={b} target={args.target} report=-"],
                               w(f"{tag}.{b}.mlir"), plan)
            decisions = re.search(r"decisions: (.*)", out).group(1)
            overhead = re.search(r"simulated step time on \S+: .*\(([-+0-9.]+%)\)", out)
            planned, measured = offload_run(plan, w(f"{tag}.{b}.npz"), device_bytes=b)
            got = np.load(w(f"{tag}.{b}.npz"))
            names = sorted(set(base.files) | set(got.files))
            sliced = "  slicing:" in out
            worst = 0.0

            def differs(n):
                nonlocal worst
                if n not in base.files or n not in got.files:
                    return True
                if not sliced:
                    return base[n].tobytes() != got[n].tobytes()
                x, y = base[n].astype(np.float64), got[n].astype(np.float64)
                if x.shape != y.shape:
                    return True
                scale = max(float(np.abs(x).max(initial=0.0)), 1e-30)
                err = float(np.abs(x - y).max(initial=0.0)) / scale
                worst = max(worst, err)
                return not err <= 1e-5
            diff = [n for n in names if differs(n)]
            ok = not diff and planned == measured and planned <= b
            if sliced:
                print(f"    sliced: {re.search(r'slicing: (.*)', out).group(1)}")
                print(f"    sliced: worst relative difference {worst:.2e} (tolerance 1e-5)")
            failed |= not ok
            print(f"{tag} budget {b} ({100.0 * b / unplanned:.1f}%): peak planned {planned} "
                  f"measured {measured} <= budget: {planned <= b}; {len(names)} outputs, "
                  f"{len(diff)} differ" + (f" (first: {diff[0]})" if diff else "")
                  + f"; simulated overhead {overhead.group(1) if overhead else '?'}"
                  + (": ok" if ok else ": FAIL"))
            print(f"    {decisions}")
            tuned = re.search(r"prefetches tuned against the simulation: (\d+) moved", out)
            if tuned:
                print(f"    prefetches tuned: {tuned.group(1)} moved")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
