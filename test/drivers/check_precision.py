#!/usr/bin/env python3
"""bf16-mixed / fp16-mixed steps against PyTorch's autocast, both judged by float64 (issue 29).

    PYTHONPATH=python /usr/bin/python3 test/drivers/check_precision.py
        --model mlp --bin build/bin --work DIR [--precision bf16-mixed] [--k 4]

Exports the example model (export_models.py), imports it, builds its step
with `offload-autodiff="optimizer=none precision=..."` (gradients only),
runs one step on the host backend and compares its loss and every parameter
gradient with PyTorch's float64 step from the same parameters and inputs.
Next to ours, PyTorch's own mixed precision: the fp32 model under
`torch.autocast("cpu", dtype=torch.bfloat16)` (float16 for fp16-mixed), its
gradients on the fp32 parameters, against the same float64 step.

Error of one tensor (the zoo's measure): max|g - g64| / max(max|g64|,
1e-3 x the model's largest |g64|). The rule, per tensor:
    ours <= k x max(autocast's error, 2^-9)
with k = 4 (the zoo's multiple) and 2^-9 a floor of half a bf16 ulp (an
autocast that happens to be nearly exact on a tensor must not demand more
of ours than bf16 storage allows); the loss the same way. Prints one line
per tensor and a verdict; exits 1 if any tensor fails.

PyTorch's CPU autocast is not CUDA's: on the CPU, softmax, log_softmax,
layer_norm and gelu run in bf16 when their input is bf16; our policy
follows the CUDA lists (those in f32). So our step is at least as accurate
where the two differ, and the rule is one-sided.

Where a GPU is present (pipeline.py: cuda_runnable) the same plan also runs
on --backend cuda (the CUDA backend's bf16/f16 kernels, docs/precision.md)
and its loss and gradients are judged by the same rule.
"""
import argparse
import os
import sys

import numpy as np
import torch
import torch.nn.functional as F

import export_models as em
from pipeline import compile_step, cuda_run_args, cuda_runnable, export_and_import, run

FLOOR_BF16 = 2.0 ** -9
FLOOR_F16 = 2.0 ** -12
K = 4.0
# The ops that must compute in the low type (the rule is one-sided: an fp32
# step would pass it).
LOW_OPS = ("linear", "matmul", "conv2d", "attention")


def low_type(precision):
    """(torch dtype, MLIR element type, floor) of bf16-mixed / fp16-mixed."""
    if precision == "bf16-mixed":
        return torch.bfloat16, "bf16", FLOOR_BF16
    if precision == "fp16-mixed":
        return torch.float16, "f16", FLOOR_F16
    raise ValueError(f"not a mixed precision: {precision!r}")


def low_op_count(step_text, precision):
    """How many linear/matmul/conv2d/attention ops of a step's MLIR text
    produce the low type of `precision`."""
    lowname = low_type(precision)[1]
    return sum(1 for line in step_text.splitlines()
               if any(f"offload.{op} " in line for op in LOW_OPS)
               and f"x{lowname}>" in line.split(":")[-1])


def ratio(e_ours, e_autocast, precision):
    """Our error over what the rule scales: max(autocast's error, the floor)."""
    return e_ours / max(e_autocast, low_type(precision)[2])


def within_rule(e_ours, e_autocast, precision, k=K):
    """The rule, per tensor (and for the loss): ours <= k x max(autocast's
    error, half an ulp of the low type)."""
    return ratio(e_ours, e_autocast, precision) <= k


def eager(prefix, dtype):
    """The exported example model as PyTorch eager in `dtype` (train mode)
    and a function giving the loss of one forward on its batch (part=(i, k):
    on the i-th of k equal slices of it, a micro-batch)."""
    cfg, model = em.load_eager(prefix)
    x, y = em.load_inputs(prefix)
    model = model.to(dtype).train()
    if x.is_floating_point():
        x = x.to(dtype)

    def loss_of(part=None):
        xs, ys = (x, y) if part is None else (torch.chunk(x, part[1])[part[0]],
                                              torch.chunk(y, part[1])[part[0]])
        out = model(*em.forward_args(cfg["model"], xs, ys))
        return out if cfg["returns_loss"] else F.cross_entropy(out, ys)
    return model, loss_of


def torch_step(prefix, dtype, autocast=None):
    """Loss and {param: grad} of one step of the eager model in `dtype`
    (optionally under CPU autocast to `autocast`), as float64 numpy."""
    model, loss_of = eager(prefix, dtype)
    ctx = torch.autocast("cpu", dtype=autocast) if autocast is not None else _Null()
    with ctx:
        loss = loss_of()
    loss.float().backward() if autocast is not None else loss.backward()
    grads = {n: (p.grad if p.grad is not None else torch.zeros_like(p)).double().numpy()
             for n, p in model.named_parameters()}
    return float(loss.double()), grads


class _Null:
    def __enter__(self):
        return self

    def __exit__(self, *a):
        return False


def rel_err(a, b, floor):
    return float(np.max(np.abs(a - b))) / max(float(np.max(np.abs(b))), floor)


def judge(m, precision, ours, lossac, loss64, gac, g64, floor, floor_low, k, tag):
    """Prints the loss line, one line per gradient and the verdict for one
    of our runs (`tag`: "" for the host backend, " cuda"); returns the names
    that break the rule."""
    failed = []
    e_ours = abs(float(ours["loss"]) - loss64) / abs(loss64)
    e_ac = abs(lossac - loss64) / abs(loss64)
    print(f"{m} {precision}{tag} loss: ours {float(ours['loss']):.6f} autocast {lossac:.6f} "
          f"float64 {loss64:.6f}; error ours {e_ours:.2e} autocast {e_ac:.2e}: "
          + ("ok" if within_rule(e_ours, e_ac, precision, k) else "FAIL"))
    if not within_rule(e_ours, e_ac, precision, k):
        failed.append("loss")
    worst = (0.0, 0.0, "")
    for n, ref in g64.items():
        key = "grad:" + n
        if key not in ours.files:
            print(f"{m} {precision}{tag} {n}: no gradient in our dump: FAIL")
            failed.append(n)
            continue
        g = ours[key].astype(np.float64)
        eo, ea = rel_err(g, ref, floor), rel_err(gac[n], ref, floor)
        ok = within_rule(eo, ea, precision, k)
        if not ok:
            failed.append(n)
        if ratio(eo, ea, precision) > worst[0]:
            worst = (ratio(eo, ea, precision), eo, n)
        print(f"  {n}: ours {eo:.2e} autocast {ea:.2e}" + ("" if ok else "  FAIL"))
    print(f"{m} {precision}{tag} gradients: {len(g64)} tensors, worst ratio to "
          f"max(autocast, {floor_low:.2g}) {worst[0]:.2f} ({worst[2]}), rule <= {k:g}: "
          + ("ok" if not failed else "FAIL (" + ", ".join(failed[:5]) + ")"))
    return failed


def judge_change(p0, ours, ref, p64, floor_low, k):
    """The parameters' change over some steps, judged by the rule above:
    per tensor, error = max|d - d64| / max(max|d64|, 1e-3 x the largest
    |d64| of all), d = final - p0 (float64); ours <= k x max(ref's error,
    floor_low). p0, ours, ref, p64: {name: array}. Prints one line per
    tensor; returns (the names that fail, (worst ratio, its name))."""
    delta = lambda ps: {n: ps[n].astype(np.float64) - p0[n].astype(np.float64) for n in p0}
    dours, dref, d64 = delta(ours), delta(ref), delta(p64)
    floor = 1e-3 * max(float(np.max(np.abs(d))) for d in d64.values())
    worst, bad = (0.0, ""), []
    for n in p0:
        eo, er = rel_err(dours[n], d64[n], floor), rel_err(dref[n], d64[n], floor)
        ok = eo <= k * max(er, floor_low)
        if eo / max(er, floor_low) > worst[0]:
            worst = (eo / max(er, floor_low), n)
        if not ok:
            bad.append(n)
        print(f"  {n}: ours {eo:.2e} reference {er:.2e}" + ("" if ok else "  FAIL"))
    return bad, worst


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--bin", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--precision", default="bf16-mixed", choices=["bf16-mixed", "fp16-mixed"])
    ap.add_argument("--k", type=float, default=K)
    ap.add_argument("--batch", type=int, default=0)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args(argv)

    m = args.model
    w = lambda name: os.path.join(args.work, name)
    export_and_import(m, args.work, args.bin, batch=args.batch)
    prefix = w(m)
    plan = w(m + "." + args.precision + ".oflp")
    compile_step(args.bin, [w(m + ".mlir"), f"--offload-autodiff=optimizer=none precision={args.precision}"],
                 w(m + ".step.mlir"), plan)
    # The step must compute in the low type (the rule is one-sided: an fp32
    # step would pass it).
    low, lowname, floor_low = low_type(args.precision)
    nlow = low_op_count(open(w(m + ".step.mlir")).read(), args.precision)
    print(f"{m} {args.precision}: {nlow} linear/matmul/conv2d/attention ops in {lowname}: "
          + ("ok" if nlow else "FAIL"))
    dump = w(m + "." + args.precision + ".npz")
    run([os.path.join(args.bin, "offload-run"), plan, "--threads", str(args.threads),
         "--params", prefix + ".params.npz", "--inputs", prefix + ".inputs.npz",
         "--dump", dump])
    ours = np.load(dump)

    loss64, g64 = torch_step(prefix, torch.float64)
    lossac, gac = torch_step(prefix, torch.float32, autocast=low)
    floor = 1e-3 * max(float(np.max(np.abs(g))) for g in g64.values())

    failed = [] if nlow else ["no low-type op"]
    failed += judge(m, args.precision, ours, lossac, loss64, gac, g64, floor, floor_low, args.k, "")
    if cuda_runnable(args.bin, plan):
        cdump = w(m + "." + args.precision + ".cuda.npz")
        run([os.path.join(args.bin, "offload-run"), plan] + cuda_run_args() +
            ["--params", prefix + ".params.npz", "--inputs", prefix + ".inputs.npz", "--dump", cdump])
        failed += ["cuda " + n for n in judge(m, args.precision, np.load(cdump), lossac, loss64, gac,
                                              g64, floor, floor_low, args.k, " cuda")]
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
