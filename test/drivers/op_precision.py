#!/usr/bin/env python3
"""Differential precision test of the ops: our fp32 against PyTorch's float64
reference on adversarial inputs, next to PyTorch fp32's own error (issue 28).

    test/drivers/op_precision.py --bin build/bin --work DIR [--family F,...]
                                 [--require-all] [--json FILE]

Each case is a small torch module: its parameters hold the adversarial
values, and it returns one tensor y = f(params, targets). The cases of a
family are compiled together with offload.compile (torch.export, our
importer, autodiff, the host backend) as one step whose loss is

    one * sum_i sum(y_i * w_i)

with w_i a parameter of y_i's shape drawn from a standard normal and `one`
an input equal to 1.0: then the gradient of w_i is y_i itself (our forward
op, exactly) and the gradients of case i's parameters are its ops' VJPs of
grad_out = w_i (our backward ops, exactly). PyTorch computes the same y_i
and gradients per case in float64 (the reference) and in float32, on the
same fp32 values.

For every tensor (y and each parameter's gradient) the error is
max|x - ref| / max|ref|. A case passes when, for each of its tensors,

    ours <= FACTOR x PyTorch fp32's + 2^-24

(FACTOR = 4; the 2^-24 is one fp32 rounding of the tensor's largest value,
so that an op PyTorch computes exactly may still be off by a rounding). The
families are the issue's adversarial inputs:

  offset    large common offsets: softmax / log-softmax / cross entropy of
            logits near 1e4, layer and batch norm of values near 1e3
  long      long reduction axes: sums and means over 2^20 values, matmul and
            linear with K = 16384, convolutions with K = 4608 and 32768
            positions, softmax and layer norm over 65536, cross entropy
            over 32768 classes, an embedding row hit 65536 times
  cancel    near-cancelling sums: alternating +-1e4 plus noise, products
            that cancel in a dot product, differences of close values
  size1     size-1 axes: softmax, log-softmax, layer norm over one element,
            cross entropy with one class, a sum over a size-1 dim
  plain     every other op at ordinary inputs (N(0, 1), tails to |x| = 20)

At the end the driver checks that every differentiable op of the dialect
appeared in some case's step (forward and backward ops alike), from the
steps' MLIR; the ops listed in NOT_COVERED are named with the reason.

Exits 1 when a case fails (or an op is not covered) and --require-all is
given; 77 when PyTorch 2.x is missing.
"""
import argparse
import copy
import glob
import json
import math
import os
import re
import sys
import time

try:
    import torch
    import torch.nn.functional as F
except ImportError:  # pragma: no cover
    print("SKIP: PyTorch is not importable")
    sys.exit(77)
if int(torch.__version__.split(".")[0]) < 2:
    print("SKIP: needs PyTorch 2.x (torch.export), found " + torch.__version__)
    sys.exit(77)

import numpy as np

FACTOR = 4.0
FLOOR = 2.0 ** -24

# Dialect ops a case cannot reach from a PyTorch module, with the reason.
NOT_COVERED = {
    "dropout": "random: PyTorch's and our Philox streams differ (CudaTest and the zoo check it)",
    "dropout_backward": "random, as dropout",
    "fill": "no PyTorch op imports to it alone (zeros/ones fold at import)",
    "constant": "constants; no arithmetic",
    "sgd_update": "optimizer: check_model.py compares whole SGD steps with LibTorch",
    "adamw_update": "optimizer: check_model.py compares whole AdamW steps with LibTorch",
    "copy": "a memory pass's copy (recompute, host offload); exact by construction",
    "logical_not": "bool only: no rounding",
    "logical_and": "bool only: no rounding",
    "logical_or": "bool only: no rounding",
    "nll_loss": "log_softmax + nll_loss import as cross_entropy",
    "nll_loss_backward": "as nll_loss",
}
STRUCTURAL = {"phase", "save", "restore", "recompute", "yield", "to_host", "to_device", "wait"}


class Fn(torch.nn.Module):
    """A case: parameters from numpy arrays (rounded to float32), constant
    tensors as non-persistent buffers, and y = fn(self, *targets)."""

    def __init__(self, fn, params, consts=None):
        super().__init__()
        self.fn = fn
        for k, v in params.items():
            self.register_parameter(k, torch.nn.Parameter(torch.tensor(np.asarray(v, dtype=np.float32))))
        for k, v in (consts or {}).items():
            self.register_buffer(k, torch.as_tensor(v), persistent=False)

    def forward(self, *targets):
        return self.fn(self, *targets)


class Case:
    def __init__(self, name, family, fn, params, consts=None, targets=()):
        self.name, self.family = name, family
        self.module = Fn(fn, params, consts)
        self.targets = [torch.as_tensor(t) for t in targets]


def rng(seed):
    return np.random.default_rng(seed)


def cases():
    """Every case, by family."""
    out = []
    r = rng(20261127)
    N = lambda *s: r.standard_normal(s)
    add = lambda name, fam, fn, params, consts=None, targets=(): out.append(
        Case(name, fam, fn, params, consts, targets))

    # --- offset: large common offsets -----------------------------------
    add("softmax +1e4", "offset", lambda m: F.softmax(m.x, -1), {"x": 1e4 + N(16, 1000)})
    add("log_softmax +1e4", "offset", lambda m: F.log_softmax(m.x, -1), {"x": 1e4 + N(16, 1000)})
    add("cross_entropy +1e4", "offset", lambda m, t: F.cross_entropy(m.x, t).reshape(1),
        {"x": 1e4 + N(64, 100)}, targets=[r.integers(0, 100, 64)])
    add("layer_norm +1e3", "offset",
        lambda m: F.layer_norm(m.x, (256,), m.g, m.b),
        {"x": 1e3 + N(32, 256), "g": 1 + 0.1 * N(256), "b": 0.1 * N(256)})
    add("batch_norm +1e3", "offset",
        lambda m: F.batch_norm(m.x, None, None, m.g, m.b, training=True),
        {"x": 1e3 + N(32, 16, 6, 6), "g": 1 + 0.1 * N(16), "b": 0.1 * N(16)})
    add("mse_loss near target", "offset",
        lambda m: F.mse_loss(m.x, m.y).reshape(1), {"x": 1e3 + 1e-2 * N(4096)},
        {"y": torch.full((4096,), 1e3)})
    add("attention scores +30", "offset",
        lambda m: F.scaled_dot_product_attention(m.q, m.k, m.v, is_causal=True),
        {"q": 3 + N(2, 2, 64, 16), "k": 3 + N(2, 2, 64, 16), "v": N(2, 2, 64, 16)})

    # --- long reduction axes ---------------------------------------------
    add("reduce_sum 2^20", "long", lambda m: m.x.sum().reshape(1), {"x": 1 + 1e-3 * N(1 << 20)})
    add("reduce_mean rows of 2^18", "long", lambda m: m.x.mean(1), {"x": 1 + N(4, 1 << 18)})
    add("sum across 2^16 rows", "long", lambda m: m.x.sum(0), {"x": 1 + N(1 << 16, 8)})
    add("matmul K=16384", "long", lambda m: m.a @ m.b, {"a": N(8, 16384), "b": N(16384, 8)})
    add("linear K=16384", "long", lambda m: F.linear(m.x, m.w, m.b),
        {"x": N(16, 16384), "w": N(8, 16384), "b": N(8)})
    add("conv2d K=4608", "long", lambda m: F.conv2d(m.x, m.w, padding=1),
        {"x": N(2, 512, 6, 6), "w": 0.05 * N(8, 512, 3, 3)})
    add("conv2d 32768 positions", "long", lambda m: F.conv2d(m.x, m.w, stride=1),
        {"x": N(32, 2, 32, 32), "w": N(4, 2, 1, 1)})
    add("softmax over 65536", "long", lambda m: F.softmax(m.x, -1), {"x": 3 * N(2, 65536)})
    add("layer_norm over 65536", "long", lambda m: F.layer_norm(m.x, (65536,)),
        {"x": 5 + N(2, 65536)})
    add("batch_norm over 65536", "long",
        lambda m: F.batch_norm(m.x, None, None, training=True), {"x": 5 + N(64, 4, 32, 32)})
    add("cross_entropy 32768 classes", "long", lambda m, t: F.cross_entropy(m.x, t).reshape(1),
        {"x": 3 * N(4, 32768)}, targets=[r.integers(0, 32768, 4)])
    add("embedding row hit 65536 times", "long", lambda m: F.embedding(m.i, m.w),
        {"w": N(4, 8)}, {"i": torch.tensor(np.r_[np.zeros(65535, dtype=np.int64), [3]])})
    add("adaptive_avg_pool2d over 128x128", "long",
        lambda m: F.adaptive_avg_pool2d(m.x, 1), {"x": 1 + N(2, 3, 128, 128)})
    add("avg_pool2d 8x8", "long", lambda m: F.avg_pool2d(m.x, 8), {"x": 1 + N(2, 3, 64, 64)})

    # --- near-cancelling sums --------------------------------------------
    alt = lambda n: np.where(np.arange(n) % 2 == 0, 1e4, -1e4) + N(n)
    add("reduce_sum alternating 1e4", "cancel", lambda m: m.x.sum(-1), {"x": alt(1 << 16).reshape(4, -1)})
    add("reduce_mean alternating 1e4", "cancel", lambda m: m.x.mean(-1), {"x": alt(1 << 16).reshape(4, -1)})
    big = N(8, 1024)
    add("matmul cancelling products", "cancel", lambda m: m.a @ m.b,
        {"a": np.concatenate([1e3 * big, 1e3 * big + N(8, 1024)], 1),
         "b": np.concatenate([np.ones((1024, 4)), -np.ones((1024, 4))], 0)})
    x0 = 1e3 + N(4096)
    add("sub of close values", "cancel", lambda m: m.x - m.y, {"x": x0, "y": x0 + 1e-3 * N(4096)})
    add("add of opposite values", "cancel", lambda m: m.x + m.y, {"x": x0, "y": -x0 + 1e-3 * N(4096)})
    add("layer_norm of near-constant rows", "cancel", lambda m: F.layer_norm(m.x, (512,)),
        {"x": 100 + 1e-3 * N(8, 512)})

    # --- size-1 axes -----------------------------------------------------
    add("softmax over size 1", "size1", lambda m: F.softmax(m.x, -1), {"x": 1e3 * N(16, 1)})
    add("log_softmax over size 1", "size1", lambda m: F.log_softmax(m.x, -1), {"x": 1e3 * N(16, 1)})
    add("layer_norm over size 1", "size1", lambda m: F.layer_norm(m.x, (1,), m.g, m.b),
        {"x": N(16, 1), "g": N(1), "b": N(1)})
    add("cross_entropy one class", "size1", lambda m, t: F.cross_entropy(m.x, t).reshape(1),
        {"x": 1e3 * N(16, 1)}, targets=[np.zeros(16, dtype=np.int64)])
    add("sum over size-1 dim", "size1", lambda m: m.x.sum(1), {"x": N(16, 1, 4)})
    add("attention one key", "size1",
        lambda m: F.scaled_dot_product_attention(m.q, m.k, m.v),
        {"q": N(2, 2, 8, 16), "k": N(2, 2, 1, 16), "v": N(2, 2, 1, 16)})

    # --- every other op at ordinary inputs -------------------------------
    tails = lambda *s: 20 * np.tanh(N(*s) / 2)  # spread to |x| near 20
    for name, fn in [("relu", F.relu), ("sigmoid", torch.sigmoid), ("tanh", torch.tanh),
                     ("silu", F.silu), ("gelu", F.gelu),
                     ("gelu tanh", lambda x: F.gelu(x, approximate="tanh")),
                     ("hardtanh", F.hardtanh), ("hardswish", F.hardswish),
                     ("sin", torch.sin), ("cos", torch.cos), ("neg", torch.neg),
                     ("exp", lambda x: torch.exp(x / 4)),
                     ("add_scalar", lambda x: x + 0.1), ("mul_scalar", lambda x: x * 0.3)]:
        add(name, "plain", (lambda f: lambda m: f(m.x))(fn), {"x": tails(64, 64)})
    add("sqrt", "plain", lambda m: torch.sqrt(m.x), {"x": 0.01 + np.abs(N(64, 64)) * 10})
    add("rsqrt", "plain", lambda m: torch.rsqrt(m.x), {"x": 0.01 + np.abs(N(64, 64)) * 10})
    add("div", "plain", lambda m: m.x / m.y, {"x": N(64, 64), "y": np.sign(N(64, 64)) * (0.1 + np.abs(N(64, 64)))})
    add("mul broadcast", "plain", lambda m: m.x * m.y, {"x": N(16, 64), "y": N(64)})
    add("where", "plain", lambda m: torch.where(m.c, m.x, m.y), {"x": N(64, 64), "y": N(64, 64)},
        {"c": torch.tensor(N(64, 64) > 0)})
    add("masked_fill", "plain", lambda m: m.x.masked_fill(m.c, -3.0), {"x": N(64, 64)},
        {"c": torch.tensor(N(64, 64) > 0)})
    add("max_pool2d", "plain", lambda m: F.max_pool2d(m.x, 3, 2, 1), {"x": N(2, 3, 16, 16)})
    add("transpose reshape cat slice", "plain",
        lambda m: torch.cat([m.x.transpose(0, 1), m.y], 0)[2:40].reshape(-1, 8) * 1.0,
        {"x": N(16, 32), "y": N(8, 16)})
    add("expand", "plain", lambda m: m.x.expand(4, 16, 32) * m.y, {"x": N(16, 1), "y": N(4, 16, 32)})
    # Integer and boolean values computed at run time (compare, cumsum,
    # gather): exact, here so that their kernels run inside a step.
    ti = r.integers(0, 4, (8, 16))
    add("compare", "plain", lambda m: torch.where(m.x > 0.3, m.x, m.y), {"x": N(8, 16), "y": N(8, 16)})
    add("cumsum of ints", "plain", lambda m, t: m.x * torch.cumsum(t, 1).to(m.x.dtype),
        {"x": N(8, 16)}, targets=[ti])
    add("gather of ints", "plain",
        lambda m, t: m.x * torch.gather(t, 1, m.i).to(m.x.dtype), {"x": N(8, 5)},
        {"i": torch.tensor(r.integers(0, 16, (8, 5)))}, targets=[ti])
    add("mse_loss", "plain", lambda m: F.mse_loss(m.x, m.y).reshape(1), {"x": N(256)},
        {"y": torch.tensor(N(256), dtype=torch.float32)})
    add("attention mask gqa", "plain",
        lambda m: F.scaled_dot_product_attention(m.q, m.k, m.v, attn_mask=m.a, enable_gqa=True),
        {"q": N(2, 4, 16, 8), "k": N(2, 2, 20, 8), "v": N(2, 2, 20, 8)},
        {"a": torch.tensor(N(16, 20), dtype=torch.float32)})
    return out


class Batch(torch.nn.Module):
    """The cases of a family as one step: loss = one * sum_i sum(y_i * w_i)."""

    def __init__(self, cs, ws):
        super().__init__()
        self.cases = torch.nn.ModuleList([c.module for c in cs])
        self.nt = [len(c.targets) for c in cs]
        for i, w in enumerate(ws):
            self.register_parameter("w%d" % i, torch.nn.Parameter(w))

    def forward(self, one, *targets):
        total, k = None, 0
        for i, m in enumerate(self.cases):
            y = m(*targets[k:k + self.nt[i]])
            k += self.nt[i]
            term = (y * getattr(self, "w%d" % i)).sum()
            total = term if total is None else total + term
        return total * one


def torch_side(case, w, dtype):
    """y and the parameters' gradients of one case in `dtype`."""
    m = copy.deepcopy(case.module).to(dtype)
    for b in m._buffers:  # bool/int constants keep their dtype
        if m._buffers[b].is_floating_point():
            m._buffers[b] = m._buffers[b].to(dtype)
    y = m(*case.targets)
    (y * w.to(dtype)).sum().backward()
    res = {"y": y.detach().double()}
    res.update({"grad:" + n: p.grad.double() if p.grad is not None else torch.zeros_like(p).double()
                for n, p in m.named_parameters()})
    return res


def rel_err(a, ref, scale):
    """max|a - ref| / max(max|ref|, scale)."""
    a, ref = a.double(), ref.double()
    if a.shape != ref.shape:
        return math.inf
    if not torch.isfinite(a).all():
        return math.inf
    return float((a - ref).abs().max() / max(float(ref.abs().max()), scale)) if ref.numel() else 0.0


def run_family(fam, cs, work, bin_dir):
    import offload
    r = rng(7)
    ws = []
    for c in cs:
        with torch.no_grad():
            y = c.module(*c.targets)
        ws.append(torch.tensor(r.standard_normal(tuple(y.shape)), dtype=torch.float32))
    model = Batch(cs, ws)
    one = torch.ones(())
    targets = [t for c in cs for t in c.targets]
    wd = os.path.join(work, fam)
    os.makedirs(wd, exist_ok=True)
    t0 = time.time()
    step = offload.compile(model, (one, *targets), loss=None, return_gradients=True,
                           verbose=False, optimizer=offload.SGD(lr=0.0), workdir=wd, threads=1)
    step(one, *targets)
    grads = step.gradients()
    secs = time.time() - t0
    ops = set()
    for p in glob.glob(os.path.join(wd, "**", "*.mlir"), recursive=True):
        ops |= set(re.findall(r"\boffload\.([a-z_0-9]+)\b", open(p).read()))
    rows = []
    for i, c in enumerate(cs):
        ref = torch_side(c, ws[i], torch.float64)
        f32 = torch_side(c, ws[i], torch.float32)
        ours = {"y": grads["w%d" % i]}
        for n, _ in c.module.named_parameters():
            ours["grad:" + n] = grads["cases.%d.%s" % (i, n)]
        tensors = []
        # A gradient that is exactly zero in exact arithmetic (a layer norm
        # over one element, a softmax over one key) is rounding noise in
        # every precision: errors are relative to at least 1e-6 of the
        # case's largest reference value.
        scale = max(1e-300, 1e-6 * max(float(v.abs().max()) if v.numel() else 0.0
                                       for v in ref.values()))
        for k in ref:
            eo, et = rel_err(ours[k], ref[k], scale), rel_err(f32[k], ref[k], scale)
            tensors.append({"tensor": k, "ours": eo, "pytorch_fp32": et,
                            "ok": eo <= FACTOR * et + FLOOR})
        rows.append({"case": c.name, "family": fam, "tensors": tensors,
                     "ok": all(t["ok"] for t in tensors)})
    return rows, ops, secs


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bin", required=True, help="BUILD/bin (the offload tools)")
    ap.add_argument("--work", required=True)
    ap.add_argument("--family", default="", help="comma-separated families (default: all)")
    ap.add_argument("--require-all", action="store_true")
    ap.add_argument("--json", default="")
    a = ap.parse_args(argv)
    os.environ["OFFLOAD_BIN"] = os.path.abspath(a.bin)
    torch.manual_seed(0)
    allc = cases()
    fams = [f for f in dict.fromkeys(c.family for c in allc)
            if not a.family or f in a.family.split(",")]
    rows, ops, failed = [], set(), []
    print("%-36s %-10s %-9s %-9s %-6s %s" % ("case", "tensor", "ours", "pytorch", "ratio", ""))
    for fam in fams:
        cs = [c for c in allc if c.family == fam]
        try:
            fr, fo, secs = run_family(fam, cs, a.work, a.bin)
        except Exception as e:  # noqa: BLE001 (reported, the next family runs)
            msg = str(e).strip().splitlines()
            print("%s: the family's step failed: %s" % (fam, "\n  ".join(msg[-12:])))
            failed.append("family " + fam)
            continue
        ops |= fo
        print("# %s: %d cases, %.1f s" % (fam, len(cs), secs))
        for row in fr:
            for t in row["tensors"]:
                ratio = t["ours"] / max(t["pytorch_fp32"], FLOOR)
                print("%-36s %-10s %-9.2e %-9.2e %-6.2f %s" % (
                    row["case"][:36], t["tensor"][:10], t["ours"], t["pytorch_fp32"], ratio,
                    "" if t["ok"] else "FAIL"))
            if not row["ok"]:
                failed.append(row["case"])
        rows += fr
    if not a.family:
        src = open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "include",
                                "offload", "Dialect", "Offload", "IR", "OffloadComputeOps.td")).read()
        dialect = set(re.findall(r'^def Offload_\w+Op : \w+<"([a-z_0-9]+)"', src, re.M))
        missing = sorted(dialect - ops - set(NOT_COVERED) - STRUCTURAL)
        print("ops exercised: %d of the dialect's %d compute ops; not reachable here: %s" % (
            len(dialect & ops), len(dialect), ", ".join(sorted(set(NOT_COVERED) & dialect))))
        if missing:
            print("ops no case exercised: " + ", ".join(missing))
            failed.append("coverage: " + ", ".join(missing))
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"factor": FACTOR, "floor": FLOOR, "rows": rows, "ops": sorted(ops)}, f, indent=1)
    print("%d cases, %d failed%s" % (len(rows), len(failed), (": " + "; ".join(failed)) if failed else ""))
    return 1 if failed and a.require_all else 0


if __name__ == "__main__":
    sys.exit(main())
