#!/usr/bin/env python3
"""bf16-true: a model converted with model.to(torch.bfloat16), imported as it is (issue 29).

    PYTHONPATH=python /usr/bin/python3 test/drivers/check_bf16_true.py
        --model mlp --bin build/bin --work DIR [--optimizer sgd|adamw] [--k 4]
        [--exporter torchscript|export]

The example model (export_models.py) converted with `.to(torch.bfloat16)`
is traced (TorchScript; or, with --exporter export under PyTorch 2.x,
torch.export to a .pt2) with its bf16 inputs and imported: weights, inputs
and every op in bf16 (offload-import reads bf16 weights and writes them,
as their bits, with --params-out). One training step with torch.optim's
SGD (momentum) or AdamW, ours on the host backend (the updates compute in
f32 and round each stored value once) against PyTorch's own bf16-true
step (the bf16 model, torch.optim on its bf16 parameters), both against
PyTorch's float64 step from the same (bf16-valued) parameters and inputs.
The rule, per parameter tensor on its change over the step and on the
loss: ours <= k x max(PyTorch bf16's error, 2^-9) (check_precision.py's
measure). Also checked: the imported step's parameters are bf16.
"""
import argparse
import os
import sys

import numpy as np
import torch
import torch.nn.functional as F

import export_models as em
from check_precision import FLOOR_BF16, judge_change
from pipeline import compile_step, export_and_import, run

OPTIMIZERS = {
    "sgd": ("optimizer=sgd lr=0.1 momentum=0.9 weight-decay=0.01",
            lambda ps: torch.optim.SGD(ps, lr=0.1, momentum=0.9, weight_decay=0.01)),
    "adamw": ("optimizer=adamw lr=0.01 weight-decay=0.01",
              lambda ps: torch.optim.AdamW(ps, lr=0.01, weight_decay=0.01)),
}


def bits(t):
    """A bf16 torch tensor as numpy uint16 bits (the .npz convention)."""
    return t.contiguous().view(torch.int16).numpy().view(np.uint16)


def from_bits(a):
    return torch.from_numpy(np.ascontiguousarray(a).view(np.int16)).view(torch.bfloat16)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--bin", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--optimizer", default="sgd", choices=sorted(OPTIMIZERS))
    ap.add_argument("--k", type=float, default=4.0)
    ap.add_argument("--exporter", default="torchscript", choices=["torchscript", "export"])
    args = ap.parse_args(argv)
    m = args.model
    w = lambda name: os.path.join(args.work, name)
    meta = export_and_import(m, args.work, args.bin)
    prefix = w(m)
    failed = []

    def check(name, ok, detail):
        print(f"{m} bf16-true {args.optimizer} ({args.exporter}) {name}: {detail}: "
              + ("ok" if ok else "FAIL"))
        if not ok:
            failed.append(name)

    # The bf16 model, traced with its bf16 inputs.
    cfg, model = em.load_eager(prefix)
    model = model.to(torch.bfloat16).train()
    x, y = em.load_inputs(prefix)
    if x.is_floating_point():
        x = x.to(torch.bfloat16)
    fwd = tuple(em.forward_args(cfg["model"], x, y))
    if args.exporter == "export":
        src = w(m + ".bf16.pt2")
        torch.export.save(torch.export.export(model, fwd), src)
    else:
        src = w(m + ".bf16.pt")
        torch.jit.trace(model, fwd, check_trace=False).save(src)
    imp = [os.path.join(args.bin, "offload-import"), src, "-o", w(m + ".bf16.mlir"),
           "--params-out", w(m + ".bf16.params.npz")]
    if args.exporter == "torchscript":
        for k, v in meta["inputs"].items():
            imp += ["--input", f"{k}={v.replace('xf32', 'xbf16')}"]
    if not meta.get("returns_loss"):
        imp += ["--loss", meta["loss"]]
    run(imp)
    np.savez(w(m + ".bf16.inputs.npz"), x=bits(x) if x.dtype == torch.bfloat16 else x.numpy(),
             y=y.numpy())
    params = np.load(w(m + ".bf16.params.npz"))
    names = [n for n, _ in model.named_parameters()]
    low = [n for n in names if params[n].dtype == np.uint16]
    check("imported parameters", len(low) == len(names),
          f"{len(low)} of {len(names)} parameters bf16")

    opt, make = OPTIMIZERS[args.optimizer]
    plan = w(f"{m}.bf16.{args.optimizer}.oflp")
    compile_step(args.bin, [w(m + ".bf16.mlir"), f"--offload-autodiff={opt}"],
                 w(m + ".bf16.step.mlir"), plan)
    dump = w(f"{m}.bf16.{args.optimizer}.npz")
    run([os.path.join(args.bin, "offload-run"), plan, "--threads", "1",
         "--params", w(m + ".bf16.params.npz"), "--inputs", w(m + ".bf16.inputs.npz"),
         "--dump", dump])
    ours = np.load(dump)

    p0 = {n: from_bits(params[n]).double().numpy() for n in names}

    def torch_step(dtype):
        cfg2, model2 = em.load_eager(prefix)
        model2 = model2.to(torch.bfloat16).to(dtype).train()  # the bf16 values
        xx = x.to(dtype) if x.is_floating_point() else x
        out = model2(*em.forward_args(cfg2["model"], xx, y))
        loss = out if cfg2["returns_loss"] else F.cross_entropy(out, y)
        o = make(list(model2.parameters()))
        o.zero_grad()
        loss.backward()
        o.step()
        return float(loss.double()), {n: p.detach().double().numpy()
                                      for n, p in model2.named_parameters()}

    loss_b, pb = torch_step(torch.bfloat16)
    loss64, p64 = torch_step(torch.float64)
    loss_ours = float(from_bits(ours["loss"]).double()) if ours["loss"].dtype == np.uint16 \
        else float(ours["loss"])
    eo, eb = abs(loss_ours - loss64) / abs(loss64), abs(loss_b - loss64) / abs(loss64)
    check("loss", eo <= args.k * max(eb, FLOOR_BF16),
          f"ours {loss_ours:.6f} torch bf16 {loss_b:.6f} float64 {loss64:.6f}; error ours "
          f"{eo:.2e} torch {eb:.2e}")
    ours_p = {n: from_bits(ours[n]).double().numpy() if ours[n].dtype == np.uint16
              else ours[n].astype(np.float64) for n in names}
    bad, worst = judge_change(p0, ours_p, pb, p64, FLOOR_BF16, args.k)
    check("parameter change", not bad,
          f"{len(names)} tensors, worst ratio to max(torch bf16, 2^-9) {worst[0]:.2f} "
          f"({worst[1]}), rule <= {args.k:g}")
    print(f"{m} bf16-true {args.optimizer} ({args.exporter}): " + ("ok" if not failed else
                                               "FAIL (" + ", ".join(failed) + ")"))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
