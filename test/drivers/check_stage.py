#!/usr/bin/env python3
"""Checks a pipeline stage (a model imported with --loss none) against PyTorch.

    PYTHONPATH=python /usr/bin/python3 test/drivers/check_stage.py
        --model mlp --bin build/bin --work DIR [--split]

Imports the exported model as a stage (its forward output is the result;
backward starts from the output's gradient, an input `grad:output`), builds
the gradients-only step (offload-autodiff optimizer=none; with --split also
offload-split-weight-grad, run phase by phase), runs it on the host backend
with a fixed random output gradient, and compares the output, the input's
gradient (`grad:x`) and every parameter gradient with
torch.autograd.grad(model(x), [x] + params, grad_outputs=g) on the same
weights: max|ours - ref| / max(max|ref|, 1e-5) <= 1e-4 per tensor (fp32).
"""
import argparse
import os
import sys

import numpy as np
import torch

import export_models as em
from pipeline import PY, check_cuda_run, compile_step, run


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--bin", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--split", action="store_true")
    ap.add_argument("--rtol", type=float, default=1e-4)
    ap.add_argument("--reference-f64", action="store_true",
                    help="compute PyTorch's reference in float64 (see reference.py --double)")
    args = ap.parse_args(argv)
    os.makedirs(args.work, exist_ok=True)
    w = lambda n: os.path.join(args.work, n)
    m = args.model
    run([PY, "-m", "export_models", "--out", args.work, "--models", m])
    cfg = em.load_config(w(m))
    if cfg["returns_loss"]:
        print(f"{m}: its forward returns the loss; not a stage")
        return 1
    spec = cfg["inputs"]["x"]
    run([os.path.join(args.bin, "offload-import"), w(m + ".pt"), "--input", f"x={spec}",
         "--loss", "none", "-o", w(m + ".stage.mlir")])
    opt = [w(m + ".stage.mlir"),
           "--offload-autodiff=optimizer=none"]
    if args.split:
        opt.append("--offload-split-weight-grad=report=false")
    compile_step(args.bin, opt, w(m + ".stage.step.mlir"), w("stage.oflp"))

    module = torch.jit.load(w(m + ".pt"))
    em.load_state_arrays(module, em.load_params(w(m)))
    module.train()
    x, _ = em.load_inputs(w(m))
    x32 = x.clone()
    if args.reference_f64:
        module = module.double()
        x = x.double()
    x = x.clone().requires_grad_(True)
    with torch.jit.optimized_execution(False):
        out = module(x)
    g32 = np.random.default_rng(0).standard_normal(tuple(out.shape)).astype(np.float32)
    g = torch.from_numpy(g32).to(out.dtype)
    names = [n for n, _ in module.named_parameters()]
    grads = torch.autograd.grad(out, [x] + [p for _, p in module.named_parameters()], grad_outputs=g)
    ref = {"output": out.detach().numpy(), "grad:x": grads[0].numpy()}
    ref.update({"grad:" + n: t.numpy() for n, t in zip(names, grads[1:])})
    np.savez(w("ref.npz"), **ref)
    np.savez(w("stage.inputs.npz"), x=x32.numpy(), **{"grad:output": g32})
    runner = [os.path.join(args.bin, "offload-run"), w("stage.oflp"), "--params", w(m + ".params.npz"),
              "--inputs", w("stage.inputs.npz"), "--dump", w("ours.npz")]
    if args.split:
        runner.append("--by-phase")
    run(runner)
    ours = np.load(w("ours.npz"))
    worst, worst_name = 0.0, ""
    for n, r in ref.items():
        if n not in ours.files:
            print(f"{m} stage: output '{n}' missing: FAIL")
            return 1
        err = float(np.abs(ours[n].astype(np.float64) - r).max()) / max(float(np.abs(r).max()), 1e-5)
        if err > worst:
            worst, worst_name = err, n
    ok = worst <= args.rtol
    print(f"{m} stage{' (split, by phase)' if args.split else ''}: output, input gradient and "
          f"{len(names)} parameter gradients: max relative error {worst:.3e} ({worst_name}): "
          f"{'ok' if ok else 'FAIL'}")
    # Where a GPU is present, the CUDA backend's outputs against the host's.
    ok &= not check_cuda_run(f"{m} stage", args.bin, w("stage.oflp"), runner, w("ours.npz"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
