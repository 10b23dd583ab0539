#!/usr/bin/env python3
"""fp16 loss scaling in the step (GradScaler's rule, issue 29).

    OFFLOAD_TORCH2_VENV=... scripts/torch2-python test/drivers/check_loss_scaling.py
        --model mlp --bin build/bin --work DIR [--optimizer adamw|sgd]
        [--micro-batches K]

Two checks on a step built with `--offload-autodiff="precision=fp16-mixed"`:

1. skip: after a few normal steps, amp.scale is set to 2^40 in the store, so
   the f16 backward overflows. That step must leave every parameter and
   every optimizer state (momentum or moments, optimizer.step) bit for bit
   as it was, halve amp.scale, reset amp.growth_tracker, count one more
   amp.skipped_steps, and offload-run must say SKIPPED. Then the scale backs
   off step by step until the gradients are finite, and the steps after
   that train (parameters change, the loss stays finite).

2. against PyTorch: N steps from init-scale 2^24 with growth-interval 3
   (so both backoff and growth happen), ours against
   torch.autocast("cpu", float16) + torch.amp.GradScaler("cpu",
   init_scale=2^24, growth_interval=3) with the same optimizer. The scale
   after every step must be the same; the parameters' change over the N
   steps is judged by check_precision.py's rule against a float64 run that
   steps where PyTorch's scaler stepped: per tensor, ours <= k x
   max(autocast's error, 2^-12), error = max|d - d64| / max(max|d64|,
   1e-3 x the model's largest |d64|).

With --micro-batches K both checks run on the step with gradient
accumulation (micro-batches=K), and PyTorch's reference is GradScaler's
accumulation loop: `scaler.scale(loss_i / K).backward()` for each of the K
slices of the batch, then one `scaler.step`, `scaler.update` (one inf/NaN
check over the accumulated gradients).
"""
import argparse
import os
import re
import sys

import numpy as np
import torch

import export_models as em
from check_precision import FLOOR_F16, eager, judge_change
from pipeline import compile_step, export_and_import, run


def run_steps(bin_dir, plan, state, inputs, steps, dump):
    out = run([os.path.join(bin_dir, "offload-run"), plan, "--threads", "1",
               "--params", state, "--inputs", inputs, "--steps", str(steps), "--dump", dump])
    scales, skipped, losses = [], [], []
    for line in out.splitlines():
        m = re.match(r"step \d+: loss (\S+) .* loss scale (\S+)", line)
        if m:
            losses.append(float(m.group(1)))
            scales.append(float(m.group(2)))
            skipped.append("SKIPPED" in line)
    return out, np.load(dump), scales, skipped, losses


def store_of(dump):
    return {k: dump[k] for k in dump.files if k != "loss" and not k.startswith("grad:")}


def same_bits(a, b):
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="mlp")
    ap.add_argument("--bin", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--optimizer", default="adamw", choices=["adamw", "sgd"])
    ap.add_argument("--steps", type=int, default=12)
    ap.add_argument("--k", type=float, default=4.0)
    ap.add_argument("--micro-batches", type=int, default=1)
    ap.add_argument("--host-parameters", action="store_true",
                    help="check 1 with every parameter and its optimizer state on the host "
                         "(--offload-host-parameters: the updates, and their skip, run there)")
    args = ap.parse_args(argv)
    m, w = args.model, (lambda name: os.path.join(args.work, name))
    export_and_import(m, args.work, args.bin)
    prefix = w(m)
    inputs = prefix + ".inputs.npz"
    opt = (f"optimizer=adamw lr=1e-3" if args.optimizer == "adamw"
           else "optimizer=sgd lr=0.05 momentum=0.9")
    k = args.micro_batches
    if k > 1:
        opt += f" micro-batches={k}"
    failed = []

    def check(name, ok, detail=""):
        print(f"{m} {args.optimizer} {name}: {detail}{': ' if detail else ''}"
              + ("ok" if ok else "FAIL"))
        if not ok:
            failed.append(name)

    # 1. A forced overflow is skipped.
    plan = w(f"{m}.{args.optimizer}.fp16.oflp")
    compile_step(args.bin, [w(m + ".mlir"), f"--offload-autodiff={opt} precision=fp16-mixed"]
                 + (["--offload-host-parameters"] if args.host_parameters else []),
                 w(m + ".fp16.step.mlir"), plan)
    if args.host_parameters:
        step_text = open(w(m + ".fp16.step.mlir")).read()
        on_host = len(re.findall(r"_update [^\n]*skip_if [^\n]*!offload.host<tensor<i1>>",
                                 step_text))
        nparams = len(em.load_params(prefix))
        check("updates on the host", on_host == nparams,
              f"{on_host} of {nparams} updates with skip_if over host values")
    _, d0, _, _, _ = run_steps(args.bin, plan, prefix + ".params.npz", inputs, 3, w("d0.npz"))
    s0 = store_of(d0)
    check("three clean steps", int(s0["amp.skipped_steps"]) == 0
          and float(s0["amp.scale"]) == 65536.0 and int(s0["amp.growth_tracker"]) == 3,
          f"scale {float(s0['amp.scale']):g}, tracker {int(s0['amp.growth_tracker'])}")
    over = dict(s0)
    over["amp.scale"] = np.array(2.0 ** 40, dtype=np.float32)
    np.savez(w("over.npz"), **over)
    out, d1, scales, skipped, _ = run_steps(args.bin, plan, w("over.npz"), inputs, 1, w("d1.npz"))
    s1 = store_of(d1)
    kept = [k for k in s0 if not k.startswith("amp.")]
    changed = [k for k in kept if not same_bits(s0[k], s1[k])]
    check("overflowing step", skipped == [True] and not changed,
          f"{len(kept)} parameters and optimizer states bit-identical"
          + (f" except {changed[:4]}" if changed else "") + ", offload-run says SKIPPED"
          if skipped == [True] else "offload-run did not say SKIPPED")
    check("its scale and counters", float(s1["amp.scale"]) == 2.0 ** 39
          and int(s1["amp.growth_tracker"]) == 0 and int(s1["amp.skipped_steps"]) == 1,
          f"scale 2^40 -> 2^{np.log2(float(s1['amp.scale'])):g}, tracker "
          f"{int(s1['amp.growth_tracker'])}, skipped_steps {int(s1['amp.skipped_steps'])}")
    np.savez(w("s1.npz"), **s1)
    out, d2, scales, skipped, losses = run_steps(args.bin, plan, w("s1.npz"), inputs, 40,
                                                 w("d2.npz"))
    s2 = store_of(d2)
    nskip = sum(skipped)
    first_clean = skipped.index(False) if False in skipped else -1
    trained = first_clean >= 0 and all(not s for s in skipped[first_clean:]) and \
        all(not same_bits(s1[k], s2[k]) for k in kept if k in dict(em.load_params(prefix))) and \
        all(np.isfinite(losses))
    check("backoff, then training", trained,
          f"{nskip} more steps skipped (scale {scales[first_clean - 1] if first_clean > 0 else 0:g}"
          f" at the first clean step), then {40 - nskip} clean steps changed every parameter, "
          f"loss {losses[first_clean]:.4f} -> {losses[-1]:.4f}")

    # 2. Against torch.autocast + GradScaler.
    n = args.steps
    plan2 = w(f"{m}.{args.optimizer}.fp16.g3.oflp")
    compile_step(args.bin, [w(m + ".mlir"),
                            f"--offload-autodiff={opt} precision=fp16-mixed init-scale=16777216 growth-interval=3"],
                 w(m + ".fp16g3.step.mlir"), plan2)
    _, d3, ours_scales, ours_skipped, _ = run_steps(args.bin, plan2, prefix + ".params.npz",
                                                    inputs, n, w("d3.npz"))
    p0 = em.load_params(prefix)

    def torch_run(dtype, scaler_steps=None):
        model, loss_of = eager(prefix, dtype)
        params = list(model.parameters())
        o = (torch.optim.AdamW(params, lr=1e-3, weight_decay=0.0) if args.optimizer == "adamw"
             else torch.optim.SGD(params, lr=0.05, momentum=0.9))
        scaler = torch.amp.GradScaler("cpu", init_scale=2.0 ** 24, growth_interval=3) \
            if scaler_steps is None else None
        scales, stepped = [], []
        # One slice per micro-batch (the whole batch for k = 1).
        parts = [None] if k == 1 else [(j, k) for j in range(k)]
        for i in range(n):
            o.zero_grad()
            if scaler is not None:
                before = scaler.get_scale()
                for part in parts:
                    with torch.autocast("cpu", dtype=torch.float16):
                        loss = loss_of(part)
                    scaler.scale(loss.float() / k if k > 1 else loss.float()).backward()
                scaler.step(o)
                scaler.update()
                scales.append(scaler.get_scale())
                stepped.append(scaler.get_scale() >= before)
            else:
                for part in parts:
                    loss = loss_of(part)
                    (loss / k if k > 1 else loss).backward()
                if scaler_steps[i]:
                    o.step()
        ps = {k: v.detach().double().numpy() for k, v in model.named_parameters()}
        return ps, scales, stepped

    pac, torch_scales, torch_stepped = torch_run(torch.float32)
    p64, _, _ = torch_run(torch.float64, scaler_steps=torch_stepped)
    check(f"scale over {n} steps", ours_scales == torch_scales,
          "ours " + " ".join(f"{s:g}" for s in ours_scales)
          + " / torch " + " ".join(f"{s:g}" for s in torch_scales))
    check("skipped steps", [not s for s in torch_stepped] == ours_skipped,
          f"{sum(ours_skipped)} of {n} ours, {n - sum(torch_stepped)} torch")
    bad, worst = judge_change(p0, {k: d3[k] for k in p0}, pac, p64, FLOOR_F16, args.k)
    check(f"parameter change over {n} steps", not bad,
          f"{len(p0)} tensors, worst ratio to max(autocast, 2^-12) {worst[0]:.2f} ({worst[1]}), "
          f"rule <= {args.k:g}")
    print(f"{m} {args.optimizer} loss scaling: " + ("ok" if not failed else
                                                   "FAIL (" + ", ".join(failed) + ")"))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
