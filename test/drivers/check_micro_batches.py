#!/usr/bin/env python3
"""Gradient accumulation (micro-batches=K) against PyTorch's accumulation loop.

    PYTHONPATH=python /usr/bin/python3 test/drivers/check_micro_batches.py
        --model mlp --bin build/bin --work DIR
        [--optimizer sgd|adamw] [--k 2,4] [--steps 3] [--threads T] [--batch B]

For each K: exports and imports the example model, builds its training step
with `--offload-autodiff="... micro-batches=K return-gradients=true"`, lowers
it, and runs it on the host backend for one step (loss, the accumulated
gradients) and for --steps steps (parameters and optimizer state). The
reference is PyTorch's accumulation loop on the same weights and batch
(reference.py --micro-batches K: `(loss_i / K).backward()` for each of the K
slices of the batch, then `optimizer.step()`; the loss is the mean of the
slice losses), run twice: in fp32 and in float64.

The verdict is the zoo's float64-oracle rule (zoo.py): the error of a tensor
is max|t - t64| / max(max|t64|, 1e-3 x the largest |t64| of its group), for
the first step's loss, every gradient of the first step, and every
parameter's change over the --steps steps (p_N - p_0: the update itself, not
the parameter, which would hide it); a group's error is its worst tensor's.
Ours must be within max(1e-4, 4 x PyTorch fp32's own error) of float64, per
group. A micro-batch left out, counted twice, the gradients not divided by K
or the wrong rows sliced give errors near 1.

Also checks that the runtime's measured peak device bytes equal the plan's,
and prints the unplanned peak per K (docs/training.md's figure).

AdamW runs with eps = 1e-3 (check_model.py says why: the update is then
linear in the gradient, so it measures the gradients, not the sign of the
gradient elements near zero).

Prints one line per check; exits 1 if any fails.
"""
import argparse
import os
import sys

import numpy as np

from pipeline import PY, check_peaks, export_and_import, run


def rel_errors(ours, ref, names, floor_frac=1e-3):
    """{name: max|ours - ref| / max(max|ref|, floor_frac x largest |ref|)}."""
    largest = max((float(np.abs(ref[n]).max(initial=0.0)) for n in names), default=0.0)
    floor = max(floor_frac * largest, 1e-30)
    out = {}
    for n in names:
        a, b = np.asarray(ours[n], np.float64), np.asarray(ref[n], np.float64)
        if a.shape != b.shape:
            out[n] = float("inf")
            continue
        scale = max(float(np.abs(b).max(initial=0.0)), floor)
        out[n] = float(np.abs(a - b).max(initial=0.0)) / scale
    return out


def worst(errs):
    if not errs:
        return 0.0, ""
    n = max(errs, key=errs.get)
    return errs[n], n


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--bin", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--optimizer", default="sgd", choices=["sgd", "adamw"])
    ap.add_argument("--k", default="2,4", help="micro-batch counts, comma-separated")
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--batch", type=int, default=0)
    args = ap.parse_args(argv)

    m = args.model
    os.makedirs(args.work, exist_ok=True)
    w = lambda name: os.path.join(args.work, name)
    export_and_import(m, args.work, args.bin, batch=args.batch)
    if args.optimizer == "sgd":
        ad = "optimizer=sgd lr=0.1 momentum=0.9"
        ref_opt = ["--optimizer", "sgd", "--lr", "0.1", "--momentum", "0.9"]
    else:
        ad = "optimizer=adamw lr=1e-3 weight-decay=0.01 eps=1e-3"
        ref_opt = ["--optimizer", "adamw", "--lr", "1e-3", "--weight-decay", "0.01",
                   "--eps", "1e-3"]
    params0 = np.load(w(m + ".params.npz"))

    failed = False
    for k in [int(s) for s in args.k.split(",")]:
        tag = f"{m}.k{k}"
        opt = [os.path.join(args.bin, "offload-opt"), w(m + ".mlir"),
               f"--offload-autodiff={ad} micro-batches={k} return-gradients=true",
               f"--convert-offload-to-plan=output={w(tag + '.oflp')}", "-o", w(tag + ".step.mlir")]
        run(opt)
        runner = [os.path.join(args.bin, "offload-run"), w(tag + ".oflp"),
                  "--threads", str(args.threads),
                  "--params", w(m + ".params.npz"), "--inputs", w(m + ".inputs.npz")]
        out1 = run(runner + ["--steps", "1", "--dump", w(tag + ".ours1.npz")])
        outn = run(runner + ["--steps", str(args.steps), "--dump", w(tag + ".ours.npz")])
        ref = [PY, "-m", "reference", "--model", w(m), "--threads", str(args.threads),
               "--micro-batches", str(k), "--steps", str(args.steps)] + ref_opt
        run(ref + ["--out", w(tag + ".ref32.npz")])
        run(ref + ["--double", "--out", w(tag + ".ref64.npz")])
        ours1, ours = np.load(w(tag + ".ours1.npz")), np.load(w(tag + ".ours.npz"))
        r32, r64 = np.load(w(tag + ".ref32.npz")), np.load(w(tag + ".ref64.npz"))

        grads = sorted(n for n in r64.files if n.startswith("grad:"))
        params = sorted(n for n in r64.files if not n.startswith(("grad:", "loss"))
                        and n in params0.files and params0[n].dtype.kind == "f")
        missing = [n for n in grads + params + ["loss"] if n not in ours1.files]
        if missing:
            print(f"{tag}: outputs missing from our step: {', '.join(missing[:5])}: FAIL")
            failed = True
            continue

        def delta(d):
            return {n: np.asarray(d[n], np.float64) - params0[n] for n in params}

        groups = [
            ("loss (step 1)", ours1, r32, r64, ["loss"]),
            ("gradients (step 1)", ours1, r32, r64, grads),
            (f"parameter updates after {args.steps} steps", delta(ours), delta(r32), delta(r64),
             params),
        ]
        for label, a, b32, b64, names in groups:
            e_ours, n_ours = worst(rel_errors(a, b64, names))
            e_ref, _ = worst(rel_errors(b32, b64, names))
            bound = max(1e-4, 4 * e_ref)
            ok = e_ours <= bound
            failed |= not ok
            print(f"{m} {args.optimizer} K={k} {label}: ours vs float64 {e_ours:.2e}"
                  + (f" ({n_ours})" if n_ours and len(names) > 1 else "")
                  + f", PyTorch fp32 vs float64 {e_ref:.2e}, bound {bound:.2e}: "
                  + ("ok" if ok else "FAIL"))
        failed |= not check_peaks(f"{m} K={k}", (out1, outn))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
