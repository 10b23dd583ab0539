#!/usr/bin/env python3
"""Checks that a memory pass changes memory, not results.

    PYTHONPATH=python /usr/bin/python3 test/drivers/check_memory_pass.py
        --model mlp --bin build/bin --work DIR
        --pipeline "--offload-recompute=policy=sqrt" [--optimizer sgd|adamw]
        [--dropout P] [--threads T] [--steps N]
        [--pre-pipeline "--offload-slice-parameters=slice-bytes=4096" --rtol R]
        [--micro-batches K]

Builds the training step of an exported model twice, without and with the
given offload-opt passes (inserted between --offload-autodiff and the
lowering), runs both plans on the host backend from the same weights and
inputs, and requires every output (loss, gradients, updated parameters,
state, optimizer state) to be bit-identical. Prints the planned and measured
peak device bytes of both plans; the measured peak must equal the planned
one for both. Exits 1 on any difference.

--micro-batches K builds both variants with gradient accumulation over K
micro-batches (--offload-autodiff micro-batches=K).

--pre-pipeline gives passes that run before --offload-autodiff (on the
forward step) in the rewritten variant. A pass that changes the order of a
sum (slicing a weight splits the input gradient's sum over its rows) is
checked with --rtol R instead: every element within R of the baseline,
relative to the tensor's largest magnitude.

Where a GPU is present (pipeline.py: cuda_runnable) every plan also
runs on --backend cuda: the two variants must agree there as on the host
(bit-identical, or within --rtol), the CUDA baseline's loss and gradients
must be within 1e-5 relative of the host's, and the measured peaks must
equal the planned ones. Without a GPU nothing of this runs or prints.
"""
import argparse
import os
import re
import shlex
import sys

import numpy as np

from pipeline import compile_step, cuda_run_args, cuda_runnable, export_and_import, max_rel_diff, run


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--bin", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--pipeline", default="")
    ap.add_argument("--pre-pipeline", default="")
    ap.add_argument("--rtol", type=float, default=0.0)
    ap.add_argument("--reuse-export", action="store_true",
                    help="skip the export and import when --work already holds them")
    ap.add_argument("--optimizer", default="sgd", choices=["sgd", "adamw"])
    ap.add_argument("--precision", default="fp32", choices=["fp32", "bf16-mixed", "fp16-mixed"],
                    help="the step's precision policy (--offload-autodiff precision=)")
    ap.add_argument("--dropout", type=float, default=0.0)
    ap.add_argument("--batch", type=int, default=0)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--steps", type=int, default=1)
    ap.add_argument("--micro-batches", type=int, default=1,
                    help="gradient accumulation over K micro-batches (--offload-autodiff)")
    ap.add_argument("--by-phase", action="store_true",
                    help="run the rewritten plan phase by phase (offload-run --by-phase)")
    args = ap.parse_args(argv)

    os.makedirs(args.work, exist_ok=True)
    w = lambda n: os.path.join(args.work, n)
    m = args.model
    if not (args.reuse_export and all(os.path.exists(w(m + ext))
                                      for ext in (".mlir", ".params.npz", ".inputs.npz"))):
        export_and_import(m, args.work, args.bin, batch=args.batch, dropout=args.dropout)
    ad = ("optimizer=sgd lr=0.1 momentum=0.9" if args.optimizer == "sgd"
          else "optimizer=adamw lr=1e-3 weight-decay=0.01")
    ad += f" precision={args.precision}"
    if args.micro_batches > 1:
        ad += f" micro-batches={args.micro_batches}"

    # Two plans per variant: with gradients as outputs (compared bit for bit)
    # and without (the step as trained, whose peak is what the pass changes:
    # returned gradients would stay alive to the end of the step).
    results, cuda_results = {}, {}
    use_cuda = None
    variants = (("baseline", [], []),
                ("rewritten", shlex.split(args.pre_pipeline), shlex.split(args.pipeline)))
    for label, pre, extra in variants:
        for grads in (True, False):
            tag = f"{label}{'' if grads else '.nograd'}"
            plan = w(f"{m}.{tag}.oflp")
            out = compile_step(args.bin, [w(m + ".mlir")] + pre +
                               [f"--offload-autodiff={ad} return-gradients={'true' if grads else 'false'}"]
                               + extra, w(f"{m}.{tag}.mlir"), plan)
            if label == "rewritten" and grads:
                # The reports the pipeline asked for (report=-).
                for line in out.strip().splitlines():
                    print(line)
            runner = [os.path.join(args.bin, "offload-run"), plan, "--threads", str(args.threads),
                      "--params", w(m + ".params.npz"), "--inputs", w(m + ".inputs.npz"),
                      "--steps", str(args.steps), "--dump", w(f"{tag}.npz"), "--seed", "1234"]
            if args.by_phase and label == "rewritten":
                runner.append("--by-phase")
            out = run(runner)
            mm = re.search(r"peak device bytes: planned (\d+) measured (\d+)", out)
            results[tag] = (int(mm.group(1)), int(mm.group(2)))
            if use_cuda is None:
                use_cuda = cuda_runnable(args.bin, plan)
            if use_cuda:
                out = run([a if a != w(f"{tag}.npz") else w(f"{tag}.cuda.npz") for a in runner]
                          + cuda_run_args())
                mm = re.search(r"peak device bytes: planned (\d+) measured (\d+)", out)
                cuda_results[tag] = (int(mm.group(1)), int(mm.group(2)))

    def differs(a, b, n):
        if n not in a.files or n not in b.files or a[n].shape != b[n].shape:
            return True
        if args.rtol == 0:
            return a[n].tobytes() != b[n].tobytes()
        x, y = a[n].astype(np.float64), b[n].astype(np.float64)
        scale = max(float(np.max(np.abs(x))) if x.size else 0.0, 1e-30)
        return bool(np.max(np.abs(x - y)) > args.rtol * scale) if x.size else False

    failed = False
    how = "bit-identical" if args.rtol == 0 else f"equal within {args.rtol:g} relative"
    backends = [("", "", results)] + ([(" cuda", ".cuda", cuda_results)] if use_cuda else [])
    for label_b, suffix, res in backends:
        a, b = np.load(w(f"baseline{suffix}.npz")), np.load(w(f"rewritten{suffix}.npz"))
        names = sorted(set(a.files) | set(b.files))
        diff = [n for n in names if differs(a, b, n)]
        print(f"{m}{label_b}: {len(names)} outputs compared, {len(diff)} differ"
              + (f" (first: {diff[0]})" if diff else "") + (": FAIL" if diff else ": " + how))
        failed |= bool(diff)
        for label, (planned, measured) in res.items():
            ok = planned == measured
            failed |= not ok
            print(f"{m}{label_b} {label}: peak device bytes planned {planned} measured {measured}"
                  + ("" if ok else ": FAIL"))
    if use_cuda:
        a, b = np.load(w("baseline.cuda.npz")), np.load(w("baseline.npz"))
        names = ["loss"] + [n for n in b.files if n.startswith("grad:")]
        err, name = max_rel_diff(a, b, names)
        ok = err <= 1e-5
        failed |= not ok
        print(f"{m}: cuda vs host loss and gradients: max relative error {err:.3e}"
              + (f" ({name})" if name else "") + (": ok" if ok else ": FAIL"))
    pa, pb = results["baseline.nograd"][0], results["rewritten.nograd"][0]
    print(f"{m}: peak {pa} -> {pb} bytes ({100.0 * (pa - pb) / pa:.1f}% lower)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
