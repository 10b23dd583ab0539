#!/usr/bin/env python3
"""AdamW with bf16 moments (`--offload-autodiff="moments=bf16"`, issue 29) against PyTorch.

    PYTHONPATH=python /usr/bin/python3 test/drivers/check_bf16_moments.py
        --model mlp --bin build/bin --work DIR [--steps 8] [--k 4]

N AdamW steps of the fp32 example model whose exp_avg and exp_avg_sq are
stored in bf16 (the update computes in f32 and rounds each stored moment to
nearest even), ours on the host backend, against a PyTorch reference that
does the same (offload.testing.adamw_bf16_moments: the AdamW loop of
torch.optim 1.13, single tensor, in f32, with each moment kept as
`.to(torch.bfloat16)` between steps).
Both are judged against PyTorch's float64 AdamW run from the same
parameters (torch.optim.AdamW), by check_precision.py's rule on the
parameters' change over the N steps: per tensor ours <= k x max(the
reference's error, 2^-9).

Also checked: our stored moments are bf16 (numpy uint16 bits in the dump).
"""
import argparse
import os
import sys

import numpy as np
import torch

import export_models as em
from check_precision import FLOOR_BF16, eager, judge_change
from offload.testing import adamw_bf16_moments
from pipeline import compile_step, export_and_import, run

LR, WD, BETAS, EPS = 1e-3, 1e-2, (0.9, 0.999), 1e-8


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--bin", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--k", type=float, default=4.0)
    args = ap.parse_args(argv)
    m, n = args.model, args.steps
    w = lambda name: os.path.join(args.work, name)
    export_and_import(m, args.work, args.bin)
    prefix = w(m)
    failed = []

    def check(name, ok, detail):
        print(f"{m} moments=bf16 {name}: {detail}: " + ("ok" if ok else "FAIL"))
        if not ok:
            failed.append(name)

    opt = f"optimizer=adamw lr={LR} weight-decay={WD} beta1={BETAS[0]} beta2={BETAS[1]} eps={EPS}"
    plan = w(f"{m}.moments-bf16.oflp")
    compile_step(args.bin, [w(m + ".mlir"), f"--offload-autodiff={opt} moments=bf16"],
                 w(f"{m}.moments-bf16.mlir"), plan)
    dump = w(f"{m}.moments-bf16.npz")
    run([os.path.join(args.bin, "offload-run"), plan, "--threads", "1",
         "--params", prefix + ".params.npz", "--inputs", prefix + ".inputs.npz",
         "--steps", str(n), "--dump", dump])
    ours = np.load(dump)
    p0 = em.load_params(prefix)
    moments = [k for k in ours.files if k.endswith((".exp_avg", ".exp_avg_sq"))]
    bf16 = [k for k in moments if ours[k].dtype == np.uint16]
    check("stored moments", len(moments) == 2 * len(p0) and len(bf16) == len(moments),
          f"{len(bf16)} of {len(moments)} moments bf16 (uint16 bits) for {len(p0)} parameters")
    def torch_run(dtype, reference):
        model, loss_of = eager(prefix, dtype)
        params = list(model.parameters())
        if reference:
            adamw_bf16_moments(params, n, loss_of, model.zero_grad, lr=LR, betas=BETAS, eps=EPS,
                               weight_decay=WD)
        else:
            o = torch.optim.AdamW(params, lr=LR, betas=BETAS, eps=EPS, weight_decay=WD)
            for _ in range(n):
                o.zero_grad()
                loss_of().backward()
                o.step()
        return {k: v.detach().double().numpy() for k, v in model.named_parameters()}

    ref, p64 = torch_run(torch.float32, True), torch_run(torch.float64, False)
    bad, worst = judge_change(p0, {k: ours[k] for k in p0}, ref, p64, FLOOR_BF16, args.k)
    check(f"parameter change over {n} steps", not bad,
          f"{len(p0)} tensors, worst ratio to max(reference, 2^-9) {worst[0]:.2f} ({worst[1]}), "
          f"rule <= {args.k:g}")
    print(f"{m} moments=bf16: " + ("ok" if not failed else "FAIL (" + ", ".join(failed) + ")"))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
