#!/usr/bin/env python3
"""End-to-end check of one example model against LibTorch.

    PYTHONPATH=python /usr/bin/python3 test/drivers/check_model.py
        --model mlp --bin build/bin --work DIR
        [--optimizer sgd|adamw] [--steps N] [--rtol 1e-4] [--threads T]
        [--opt-pipeline "--offload-..."]

Exports the model (export_models.py), imports it (offload-import), builds the
training step (offload-opt --offload-autodiff ...; offload-translate --offload-to-plan),
runs N steps on the host backend (offload-run), runs the same N steps with
torch.optim (reference.py), and compares: the first-step loss and every
parameter gradient, then every parameter and buffer (batch-norm statistics
included) after N steps. It also checks that the runtime's measured peak
device bytes equal the plan's prediction. Prints one line per check and
exits 1 if any fails. --opt-pipeline inserts extra offload-opt passes
(memory passes) between autodiff and the lowering.

Tolerance: max|ours - ref| / max|ref| per tensor <= rtol (fp32; default
1e-4 as the project's oracle states).

Where a GPU is present (pipeline.py: cuda_runnable) the plan also
runs on --backend cuda: its first-step loss and gradients must be within
1e-5 relative of the host backend's, and its measured peak must equal the
plan's. Without a GPU nothing of this runs or prints.
"""
import argparse
import os
import re
import subprocess
import sys

from pipeline import (PY, check_peaks, compile_step, cuda_run_args, cuda_runnable,
                      export_and_import, max_rel_diff, run)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--bin", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--optimizer", default="sgd", choices=["sgd", "adamw"])
    ap.add_argument("--steps", type=int, default=1)
    ap.add_argument("--rtol", type=float, default=1e-4)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--batch", type=int, default=0)
    ap.add_argument("--adamw-eps", type=float, default=1e-8)
    ap.add_argument("--reference-f64", action="store_true",
                    help="compute the LibTorch reference in float64 (reference.py --double)")
    ap.add_argument("--opt-pipeline", default="")
    args = ap.parse_args(argv)

    os.makedirs(args.work, exist_ok=True)
    w = lambda name: os.path.join(args.work, name)
    m = args.model
    export_and_import(m, args.work, args.bin, batch=args.batch)

    if args.optimizer == "sgd":
        ad = "optimizer=sgd lr=0.1 momentum=0.9 return-gradients=true"
        ref_opt = ["--optimizer", "sgd", "--lr", "0.1", "--momentum", "0.9"]
    else:
        # AdamW's first update is lr * g / (|g| + eps), i.e. lr * sign(g)
        # wherever |g| >> eps: it maps a gradient element's *own* relative
        # rounding error (large for elements near zero, e.g. a bias under
        # softmax or a batch norm over 8 samples) to a full-size parameter
        # error. --adamw-eps larger than the gradients (1e-3) puts the update
        # in its linear regime, where the comparison measures the optimizer
        # arithmetic (moments, bias correction, decoupled weight decay) at the
        # gradients' accuracy; the kernel tests compare AdamW bit-exactly
        # with torch::optim::AdamW at the default eps.
        ad = f"optimizer=adamw lr=1e-3 weight-decay=0.01 eps={args.adamw_eps} return-gradients=true"
        ref_opt = ["--optimizer", "adamw", "--lr", "1e-3", "--weight-decay", "0.01",
                   "--eps", str(args.adamw_eps)]
    opt = [w(m + ".mlir"), f"--offload-autodiff={ad}"] + args.opt_pipeline.split()
    print(compile_step(args.bin, opt, w(m + ".step.mlir"), w(m + ".oflp"),
                       summary=True).strip().splitlines()[-1])

    runner = [os.path.join(args.bin, "offload-run"), w(m + ".oflp"), "--threads", str(args.threads),
              "--params", w(m + ".params.npz"), "--inputs", w(m + ".inputs.npz")]
    out1 = run(runner + ["--steps", "1", "--dump", w("ours.step1.npz")])
    outn = run(runner + ["--steps", str(args.steps), "--dump", w("ours.npz")])
    ref = [PY, "-m", "reference", "--model", w(m), "--threads", str(args.threads)] + ref_opt
    if args.reference_f64:
        ref.append("--double")
    run(ref + ["--steps", "1", "--out", w("ref.step1.npz")])
    run(ref + ["--steps", str(args.steps), "--out", w("ref.npz")])

    failed = False
    cmp = [PY, "-m", "compare", "--quiet", "--rtol", str(args.rtol)]
    for label, files, extra in [
        # The forward's loss: 1e-5 relative (the importer's acceptance bound).
        ("loss (step 1)", ("ours.step1.npz", "ref.step1.npz"),
         ["--prefix", "loss", "--require", "loss", "--rtol", "1e-5"]),
        ("gradients (step 1)", ("ours.step1.npz", "ref.step1.npz"), ["--prefix", "grad:"]),
        # Parameters are compared relative to max(max|p|, 1e-2): a bias that
        # starts at zero has moved by only ~lr after one step.
        (f"parameters and state after {args.steps} steps", ("ours.npz", "ref.npz"),
         ["--skip", "grad:", "loss", "--floor", "1e-2"]),
    ]:
        r = subprocess.run(cmp + [w(files[0]), w(files[1])] + extra, stdout=subprocess.PIPE, text=True)
        line = r.stdout.strip().splitlines()[-1] if r.stdout.strip() else "no output"
        status = "ok" if r.returncode == 0 else "FAIL"
        failed |= r.returncode != 0
        print(f"{m} {args.optimizer} {label}: {line}: {status}")

    if cuda_runnable(args.bin, w(m + ".oflp")):
        import numpy as np
        outc = run(runner + cuda_run_args() + ["--steps", "1", "--dump", w("ours.cuda.step1.npz")])
        a, b = np.load(w("ours.cuda.step1.npz")), np.load(w("ours.step1.npz"))
        names = ["loss"] + [n for n in b.files if n.startswith("grad:")]
        err, name = max_rel_diff(a, b, names)
        ok = err <= 1e-5
        failed |= not ok
        print(f"{m} {args.optimizer} cuda vs host loss and gradients (step 1): max relative "
              f"error {err:.3e}" + (f" ({name})" if name else "") + f": {'ok' if ok else 'FAIL'}")
        mc = re.search(r"peak device bytes: planned (\d+) measured (\d+)", outc)
        okc = bool(mc) and mc.group(1) == mc.group(2)
        failed |= not okc
        print(f"{m} cuda {mc.group(0) if mc else 'peak device bytes not reported'}: "
              f"{'ok' if okc else 'FAIL'}")

    failed |= not check_peaks(m, (out1, outn))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
