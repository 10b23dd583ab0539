#!/usr/bin/python3
"""The fused attention against PyTorch's SDPA on the same GPU (docs/gpu.md).

On the build machine (scripts/gpu/bundle.sh):

    /usr/bin/python3 scripts/gpu/attention.py build --bin build/bin --out DIR

writes DIR/attention-NAME/step.oflp and meta.json (kind "attention") for
every case of CASES (bundle.sh puts them beside the models):
a step whose parameters are q, k, v and `dout` and whose loss is
sum(attention(q, k, v) * dout), so that the gradients of q, k and v are
the attention's backward from grad_out = dout and the gradient of `dout` is
the attention's output itself (optimizer none, gradients returned).

On the GPU machine the kit's `sdpa` part (scripts/gpu/kit.py) calls
`check(case_dir, meta, exe, env, work, timeout)`: it draws q, k, v and dout
from a seeded normal distribution, runs the step with offload-run on the
CUDA backend (loss and gradients, then --profile for the two ops' times),
and computes the same loss and gradients with
torch.nn.functional.scaled_dot_product_attention in float64 (the
reference) and in float32 (PyTorch's own error; TF32 off), on the same
GPU. The verdict: for the output and each gradient, our error
max|ours - f64| / max|f64| is at most SDPA_FACTOR times PyTorch fp32's (the
issue's "within its own fp32-vs-f64 error", with a stated factor for a
different summation order), or below 1e-6 (a floor: both at rounding).
The loss (a sum of 10^6-10^7 products of either sign, so its relative
error mostly measures cancellation) is recorded, not judged.
"""
import argparse
import json
import math
import os
import subprocess
import sys
import time

SDPA_FACTOR = 4.0
FLOOR = 1e-6

# name: batch, query heads, key/value heads, L (= S), head size, causal,
# mask ("" or "padding": a boolean [N, 1, 1, S] mask whose last quarter of
# keys is masked out for every second sequence).
CASES = {
    "gpt2-small": dict(n=8, hq=12, hkv=12, t=1024, e=64, causal=True, mask=""),
    "llama3-8b": dict(n=1, hq=32, hkv=8, t=4096, e=128, causal=True, mask=""),
    "bert-padding": dict(n=4, hq=12, hkv=12, t=512, e=64, causal=False, mask="padding"),
    # The token layout [N, L, H, E] (layout blhd), as the importer folds
    # HF's and nanoGPT's transposes: our side gets q, k, v and dout with
    # dims 1 and 2 swapped, and its results are swapped back.
    "gpt2-small-blhd": dict(n=8, hq=12, hkv=12, t=1024, e=64, causal=True, mask="",
                            layout="blhd"),
}
SEED = 20261127


def mlir(c):
    """The step's forward function in the offload dialect."""
    tokens = c.get("layout") == "blhd"
    shape = lambda h: ((c["n"], c["t"], h, c["e"]) if tokens else (c["n"], h, c["t"], c["e"]))
    q = "tensor<%dx%dx%dx%dxf32>" % shape(c["hq"])
    kv = "tensor<%dx%dx%dx%dxf32>" % shape(c["hkv"])
    mask_arg, mask_use, mask_type, has_mask = "", "", "", ""
    if c["mask"]:
        mt = "tensor<%dx1x1x%dxi1>" % (c["n"], c["t"])
        mask_arg = (",\n    %%m: %s {offload.name = \"mask\", offload.role = #offload.role<input>}"
                    % mt)
        mask_use, mask_type, has_mask = ", %m", ", " + mt, "has_mask = true, "
    role = lambda name, kind: ('{offload.name = "%s", offload.role = #offload.role<%s>}'
                               % (name, kind))
    return (
        "func.func @forward(%%q: %s %s,\n    %%k: %s %s,\n    %%v: %s %s,\n"
        "    %%g: %s %s%s)\n"
        "    -> (tensor<f32> {offload.name = \"loss\", offload.role = #offload.role<loss>})"
        " attributes {offload.step} {\n"
        "  offload.phase forward\n"
        "  %%o, %%lse = offload.attention %%q, %%k, %%v%s%s {%sis_causal = %s, scale = %r : f64}"
        " : %s, %s, %s%s\n"
        "  %%p = offload.mul %%o, %%g : %s, %s\n"
        "  %%l = offload.reduce_sum %%p : %s\n"
        "  return %%l : tensor<f32>\n}\n"
        % (q, role("q", "parameter"), kv, role("k", "parameter"), kv, role("v", "parameter"),
           q, role("dout", "parameter"), mask_arg, mask_use, " layout blhd" if tokens else "",
           has_mask,
           "true" if c["causal"] else "false", 1.0 / math.sqrt(c["e"]), q, kv, kv, mask_type,
           q, q, q))


def build(bin_dir, out):
    for name, c in CASES.items():
        d = os.path.join(out, "attention-" + name)
        os.makedirs(d, exist_ok=True)
        src = os.path.join(d, "forward.mlir")
        with open(src, "w") as f:
            f.write(mlir(c))
        step = os.path.join(d, "step.mlir")
        for cmd in ([os.path.join(bin_dir, "offload-opt"), src,
                     "--offload-autodiff=optimizer=none return-gradients=true", "-o", step],
                    [os.path.join(bin_dir, "offload-translate"), "--offload-to-plan", step,
                     "-o", os.path.join(d, "step.oflp")]):
            r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            if r.returncode != 0:
                sys.exit("attention.py: %s failed:\n%s" % (" ".join(cmd), r.stdout))
        os.remove(step)
        with open(os.path.join(d, "meta.json"), "w") as f:
            json.dump(dict(c, name=name, model="attention-" + name, kind="attention", seed=SEED,
                           scale=1.0 / math.sqrt(c["e"])), f, indent=1)
        print("attention.py: %s: %s" % (name, d))


def inputs(c, np):
    """q, k, v, dout (float32, seeded normal) and the boolean mask or None."""
    r = np.random.default_rng(c["seed"])
    f = lambda *s: r.standard_normal(s, dtype=np.float32)
    q = f(c["n"], c["hq"], c["t"], c["e"])
    k = f(c["n"], c["hkv"], c["t"], c["e"])
    v = f(c["n"], c["hkv"], c["t"], c["e"])
    dout = f(c["n"], c["hq"], c["t"], c["e"])
    mask = None
    if c["mask"] == "padding":
        mask = np.ones((c["n"], 1, 1, c["t"]), dtype=bool)
        mask[1::2, ..., c["t"] * 3 // 4:] = False
    return q, k, v, dout, mask


def torch_side(c, q, k, v, dout, mask, dtype, device="cuda"):
    """Loss and gradients of q, k, v from PyTorch's SDPA in `dtype` on the
    GPU, and its forward + backward seconds (median of 5 after 2 warm-ups)."""
    import torch
    import torch.nn.functional as F
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    dev = torch.device(device)
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    t = {n: torch.tensor(a, dtype=dtype, device=dev, requires_grad=True)
         for n, a in (("q", q), ("k", k), ("v", v))}
    g = torch.tensor(dout, dtype=dtype, device=dev)
    m = torch.tensor(mask, device=dev) if mask is not None else None

    def once():
        for x in t.values():
            x.grad = None
        o = F.scaled_dot_product_attention(t["q"], t["k"], t["v"], attn_mask=m,
                                           is_causal=c["causal"], scale=c["scale"],
                                           enable_gqa=c["hkv"] != c["hq"])
        loss = (o * g).sum()
        loss.backward()
        return loss, o

    loss, o = once()
    res = {"loss": loss.detach().double().cpu().numpy(), "out": o.detach().double().cpu().numpy()}
    res.update({"grad:" + n: x.grad.double().cpu().numpy() for n, x in t.items()})
    secs = []
    for i in range(7):
        sync()
        t0 = time.perf_counter()
        once()
        sync()
        if i >= 2:
            secs.append(time.perf_counter() - t0)
    secs.sort()
    del t, g, m
    if device == "cuda":
        torch.cuda.empty_cache()
    return res, secs[len(secs) // 2]


def rel_err(a, ref, np):
    a = np.asarray(a, dtype=np.float64)
    ref = np.asarray(ref, dtype=np.float64)
    return float(np.max(np.abs(a - ref)) / max(float(np.max(np.abs(ref))), 1e-30))


def check(case_dir, meta, exe, env, work, timeout, parse_profile, backend="cuda", device="cuda"):
    """One case on the GPU (or, to try this code, on `backend` host and
    PyTorch's `device` cpu): returns a dict with errors, times and `ok`."""
    import numpy as np
    os.makedirs(work, exist_ok=True)
    q, k, v, dout, mask = inputs(meta, np)
    p, i, dump = (os.path.join(work, x) for x in ("p.npz", "i.npz", "d.npz"))
    tokens = meta.get("layout") == "blhd"
    ours_side = lambda a: np.ascontiguousarray(np.swapaxes(a, 1, 2)) if tokens else a
    np.savez(p, q=ours_side(q), k=ours_side(k), v=ours_side(v), dout=ours_side(dout))
    np.savez(i, **({"mask": mask} if mask is not None else {}))
    plan = os.path.join(case_dir, "step.oflp")
    row = {"case": meta["name"], "shape": "[%d,%d/%d,%d,%d]%s%s%s" % (
        meta["n"], meta["hq"], meta["hkv"], meta["t"], meta["e"],
        " causal" if meta["causal"] else "", " " + meta["mask"] if meta["mask"] else "",
        " blhd" if tokens else "")}
    t0 = time.time()
    r = subprocess.run([exe, plan, "--backend", backend, "--params", p, "--inputs", i, "--dump", dump],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
                       timeout=timeout)
    if r.returncode != 0:
        row.update(ok=False, error=r.stdout[-1500:])
        return row
    r2 = subprocess.run([exe, plan, "--backend", backend, "--params", p, "--inputs", i, "--steps", "3",
                         "--profile"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                        env=env, timeout=max(10, timeout - (time.time() - t0)))
    ours = dict(np.load(dump))
    prof = parse_profile(r2.stdout) if r2.returncode == 0 else {}
    row["ours_ms"] = {o["op"][len("offload."):]: round(o["seconds"] * 1e3, 3)
                      for o in prof.get("ops", [])
                      if o["op"] in ("offload.attention", "offload.attention_backward")}
    if r2.returncode != 0:
        row["profile_error"] = r2.stdout[-500:]
    import torch
    ref, _ = torch_side(meta, q, k, v, dout, mask, torch.float64, device)
    t32, secs32 = torch_side(meta, q, k, v, dout, mask, torch.float32, device)
    row["pytorch_fp32_fwd_bwd_ms"] = round(secs32 * 1e3, 3)
    row["errors"] = {}
    ok = True
    ours["out"] = ours.pop("grad:dout")
    for name in ("out", "grad:q", "grad:k", "grad:v"):
        ours[name] = np.swapaxes(ours[name], 1, 2) if tokens else ours[name]
    for name in ("out", "grad:q", "grad:k", "grad:v", "loss"):
        e_ours, e_torch = rel_err(ours[name], ref[name], np), rel_err(t32[name], ref[name], np)
        good = e_ours <= max(SDPA_FACTOR * e_torch, FLOOR)
        row["errors"][name] = {"ours": e_ours, "pytorch_fp32": e_torch}
        if name != "loss":
            row["errors"][name]["ok"] = good
            ok &= good
    row["ok"] = ok
    return row


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("build", help="write the attention plans (build machine)")
    b.add_argument("--bin", required=True)
    b.add_argument("--out", required=True)
    a = ap.parse_args(argv)
    if a.cmd == "build":
        build(a.bin, a.out)


if __name__ == "__main__":
    main()
