#!/usr/bin/python3
"""Model zoo: import, train and check gradients of real models against PyTorch.

    /usr/bin/python3 python/zoo.py --bin build/bin --work DIR
        [--set smoke|torchvision|blocks|all] [--models a,b,...] [--require-all]

For each model (train mode, batch 2, the smallest input it accepts, every
dropout and stochastic depth set to p = 0): trace it with torch.jit.trace,
import it (offload-import, cross-entropy on the logits), build the step
(offload-opt --offload-autodiff optimizer=none), run one step on the host
backend (offload-run) and compare every parameter gradient with PyTorch's
float64 step from the same parameters and inputs. The error of one gradient
tensor is max|g - g64| / max(max|g64|, 1e-3 x the model's largest |g64|)
(the floor keeps gradients that are zero in exact arithmetic, such as a conv
bias under batch norm, from dividing by rounding noise); a model's error is
the worst over its tensors. Next to ours the table prints PyTorch fp32's own error against the
same float64 reference.

Verdict (column `grads`):
  ok       our worst error <= max(1e-4, 4 x PyTorch fp32's worst error);
  ok(med)  for ill-conditioned models, where PyTorch fp32's own worst error
           exceeds 1e-3 (batch norm over a handful of values makes fp32
           chaotic): the median over tensors of our error / PyTorch fp32's
           error is <= 4 (the median-ratio rule);
  FAIL     otherwise.
Columns import/train say `ok` or the first line of the error.

Prints one table row per model as it finishes, then the table in Markdown.
Exits 1 when a model fails with --require-all (the smoke set's ctest uses it).
"""
import argparse
import os
import subprocess
import sys
import time
import warnings

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

PY = "/usr/bin/python3"
BATCH = 2
NUM_CLASSES = 10


# ---------------------------------------------------------------------------
# Models
# ---------------------------------------------------------------------------
class RoundTrip(nn.Module):
    """Linear(8,8) -> .double().float() -> Linear(8,4) (issue 16)."""

    def __init__(self):
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(8, 8), nn.Linear(8, NUM_CLASSES)

    def forward(self, x):
        # .to(x.dtype): the float64 reference runs the same model in f64.
        return self.fc2(self.fc1(x).double().to(x.dtype))


class Pool(nn.Module):
    """Mean over the sequence then a linear head: [B, S, D] -> [B, classes]."""

    def __init__(self, d):
        super().__init__()
        self.head = nn.Linear(d, NUM_CLASSES)

    def forward(self, h):
        return self.head(h.mean(dim=1))


class Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        layer = nn.TransformerEncoderLayer(32, 4, 64, 0.0, batch_first=True)
        self.enc, self.pool = nn.TransformerEncoder(layer, 2), Pool(32)

    def forward(self, x):
        return self.pool(self.enc(x))


class Decoder(nn.Module):
    """nn.TransformerDecoder with a causal mask, memory = the input."""

    def __init__(self):
        super().__init__()
        layer = nn.TransformerDecoderLayer(32, 4, 64, 0.0, batch_first=True)
        self.dec, self.pool = nn.TransformerDecoder(layer, 2), Pool(32)

    def forward(self, x):
        mask = nn.Transformer.generate_square_subsequent_mask(x.shape[1])
        return self.pool(self.dec(x, x, tgt_mask=mask))


class MHA(nn.Module):
    def __init__(self):
        super().__init__()
        self.mha, self.pool = nn.MultiheadAttention(32, 4, batch_first=True), Pool(32)

    def forward(self, x):
        return self.pool(self.mha(x, x, x, need_weights=False)[0])


class Recurrent(nn.Module):
    def __init__(self, cell):
        super().__init__()
        self.rnn, self.head = cell(16, 32, batch_first=True), nn.Linear(32, NUM_CLASSES)

    def forward(self, x):
        return self.head(self.rnn(x)[0][:, -1])


class ConvBlock(nn.Module):
    """Conv2d(3, 8) -> LAYER -> ReLU -> global mean -> Linear."""

    def __init__(self, layer, channels=8):
        super().__init__()
        self.conv, self.layer = nn.Conv2d(3, 8, 3, padding=1), layer
        self.head = nn.Linear(channels, NUM_CLASSES)

    def forward(self, x):
        return self.head(torch.relu(self.layer(self.conv(x))).mean(dim=(2, 3)))


class MlpF64(nn.Module):
    """An all-float64 MLP: the step runs in f64 end to end (issue 16)."""

    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(16, 32), nn.Tanh(), nn.Linear(32, NUM_CLASSES))

    def forward(self, x):
        return self.net(x)


BLOCKS = {
    "roundtrip": (RoundTrip, (8,)),
    "mlp_f64": (lambda: MlpF64().double(), (16,)),
    "transformer_encoder": (Encoder, (8, 32)),
    "transformer_decoder": (Decoder, (8, 32)),
    "multihead_attention": (MHA, (8, 32)),
    "lstm": (lambda: Recurrent(nn.LSTM), (6, 16)),
    "gru": (lambda: Recurrent(nn.GRU), (6, 16)),
    "conv_transpose2d": (lambda: ConvBlock(nn.ConvTranspose2d(8, 8, 3, stride=2)), (3, 8, 8)),
    "group_norm": (lambda: ConvBlock(nn.GroupNorm(4, 8)), (3, 8, 8)),
    "instance_norm2d": (lambda: ConvBlock(nn.InstanceNorm2d(8, affine=True)), (3, 8, 8)),
    "upsample_nearest": (lambda: ConvBlock(nn.Upsample(scale_factor=2, mode="nearest")), (3, 8, 8)),
    "upsample_bilinear": (lambda: ConvBlock(nn.Upsample(scale_factor=2, mode="bilinear")), (3, 8, 8)),
    "pixel_shuffle": (lambda: ConvBlock(nn.PixelShuffle(2), channels=2), (3, 8, 8)),
}

# The smallest square input each torchvision family accepts (32 otherwise).
_MIN_SIZE = [("inception", 75), ("googlenet", 32), ("alexnet", 63), ("vit_", 224),
             ("swin", 32), ("maxvit", 224), ("squeezenet", 32)]

# What CI runs (ctest label `smoke`): small, fast, and each a different path.
SMOKE = ["roundtrip", "mlp_f64", "group_norm", "pixel_shuffle", "upsample_nearest",
         "mobilenet_v3_small", "squeezenet1_1"]


def torchvision_models():
    import torchvision.models as m
    return m.list_models(module=m)


def build(name):
    """(eager model in train mode, example input) from fixed seeds."""
    torch.manual_seed(0)
    if name in BLOCKS:
        ctor, shape = BLOCKS[name]
        model = ctor()
    else:
        import torchvision.models as m
        kwargs = {"num_classes": NUM_CLASSES}
        if name == "googlenet" or name.startswith("inception"):
            kwargs["aux_logits"] = False
            kwargs["init_weights"] = False
        model = m.get_model(name, **kwargs)
        size = next((s for p, s in _MIN_SIZE if name.startswith(p)), 32)
        shape = (3, size, size)
    for mod in model.modules():  # dropout p = 0: deterministic steps
        if isinstance(mod, nn.modules.dropout._DropoutNd):
            mod.p = 0.0
        if type(mod).__name__ == "StochasticDepth":
            mod.p = 0.0
        if isinstance(mod, (nn.TransformerEncoderLayer, nn.TransformerDecoderLayer,
                            nn.MultiheadAttention)):
            mod.dropout = 0.0 if isinstance(mod, nn.MultiheadAttention) else mod.dropout
    g = torch.Generator().manual_seed(1)
    x = torch.randn((BATCH,) + tuple(shape), generator=g)
    y = torch.randint(0, NUM_CLASSES, (BATCH,), generator=g)
    if name.endswith("_f64"):
        x = x.double()
    return model.train(), x, y


def type_string(t):
    suffix = {torch.float32: "f32", torch.float64: "f64", torch.int64: "i64"}[t.dtype]
    return "x".join([str(d) for d in t.shape] + [suffix])


def reference_grads(model, state, x, y, dtype):
    """Parameter gradients of one cross-entropy step from `state`."""
    m = model.to(dtype)
    m.load_state_dict({k: v.to(dtype) if v.is_floating_point() else v for k, v in state.items()})
    m.zero_grad()
    loss = F.cross_entropy(m(x.to(dtype)), y)
    loss.backward()
    return {n: p.grad.detach().to(torch.float64).numpy()
            for n, p in m.named_parameters() if p.grad is not None}


def rel_err(a, b, floor):
    return float(np.max(np.abs(a - b))) / max(float(np.max(np.abs(b))), floor)


def first_line(text):
    for line in text.splitlines():
        if "error" in line:
            return line.strip()[:160]
    lines = [l for l in text.splitlines() if l.strip()]
    return (lines[-1] if lines else "failed")[:160]


def run_model(name, bin_dir, work, timeout):
    row = {"model": name, "import": "", "train": "", "ours": None, "torch32": None,
           "grads": "", "seconds": 0.0}
    t0 = time.time()
    d = os.path.join(work, name)
    os.makedirs(d, exist_ok=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model, x, y = build(name)
        state = {k: v.clone() for k, v in model.state_dict().items()}
        traced = torch.jit.trace(model, (x,), check_trace=False)
        model.load_state_dict(state)  # undo the trace's batch-norm update
    traced.save(os.path.join(d, "model.pt"))
    np.savez(os.path.join(d, "inputs.npz"), x=x.numpy(), y=y.numpy())

    def tool(cmd):
        try:
            r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               text=True, timeout=timeout)
            return r.returncode, r.stdout
        except subprocess.TimeoutExpired:
            return 124, f"timed out after {timeout} s"

    rc, out = tool([os.path.join(bin_dir, "offload-import"), os.path.join(d, "model.pt"),
                    "--input", "x=" + type_string(x), "--input", "y=" + type_string(y),
                    "--loss", "cross_entropy", "--params-out", os.path.join(d, "params.npz"),
                    "-o", os.path.join(d, "model.mlir")])
    row["import"] = "ok" if rc == 0 else first_line(out)
    if rc == 0:
        rc, out = tool([os.path.join(bin_dir, "offload-opt"), os.path.join(d, "model.mlir"),
                        "--offload-autodiff=optimizer=none",
                        f"--convert-offload-to-plan=output={os.path.join(d, 'step.oflp')}",
                        "-o", os.devnull])
        if rc == 0:
            rc, out = tool([os.path.join(bin_dir, "offload-run"), os.path.join(d, "step.oflp"),
                            "--params", os.path.join(d, "params.npz"),
                            "--inputs", os.path.join(d, "inputs.npz"),
                            "--steps", "1", "--dump", os.path.join(d, "ours.npz")])
        row["train"] = "ok" if rc == 0 else first_line(out)
    if row["train"] == "ok":
        ours = np.load(os.path.join(d, "ours.npz"))
        g64 = reference_grads(model, state, x, y, torch.float64)
        g32 = reference_grads(model, state, x, y, torch.float32)
        errs, errs32, missing = [], [], []
        # A gradient that is zero in exact arithmetic (a conv bias under batch
        # norm) is measured against 1e-3 of the model's largest gradient.
        floor = 1e-3 * max(float(np.max(np.abs(g))) for g in g64.values())
        for n, ref in g64.items():
            key = "grad:" + n
            if key not in ours.files:
                if np.any(ref != 0):
                    missing.append(n)
                continue
            errs.append(rel_err(ours[key].astype(np.float64), ref, floor))
            errs32.append(rel_err(g32[n], ref, floor))
        if missing or not errs:
            row["grads"] = "FAIL (no gradient for %s)" % (", ".join(missing[:3]) or "any")
        else:
            row["ours"], row["torch32"] = max(errs), max(errs32)
            if row["ours"] <= max(1e-4, 4 * row["torch32"]):
                row["grads"] = "ok"
            elif row["torch32"] > 1e-3:
                ratios = [e / max(e32, 1e-12) for e, e32 in zip(errs, errs32)]
                row["grads"] = "ok(med)" if float(np.median(ratios)) <= 4 else "FAIL"
            else:
                row["grads"] = "FAIL"
    row["seconds"] = time.time() - t0
    return row


def fmt(v):
    return "" if v is None else f"{v:.1e}"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bin", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--set", default="smoke", choices=["smoke", "torchvision", "blocks", "all"])
    ap.add_argument("--models", default="")
    ap.add_argument("--timeout", type=int, default=900, help="seconds per tool call")
    ap.add_argument("--require-all", action="store_true",
                    help="exit 1 unless every model imports, trains and has ok gradients")
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    if args.models:
        names = args.models.split(",")
    elif args.set == "smoke":
        names = SMOKE
    elif args.set == "blocks":
        names = list(BLOCKS)
    elif args.set == "torchvision":
        names = torchvision_models()
    else:
        names = torchvision_models() + list(BLOCKS)
    known = set(BLOCKS) | set(torchvision_models())
    bad = [n for n in names if n not in known]
    if bad:
        ap.error("unknown model(s): " + ", ".join(bad))
    rows = []
    for name in names:
        row = run_model(name, args.bin, args.work, args.timeout)
        rows.append(row)
        print(f"{row['model']}: import {row['import']}; train {row['train'] or '-'}; "
              f"grads {row['grads'] or '-'} (ours {fmt(row['ours'])}, "
              f"pytorch fp32 {fmt(row['torch32'])}); {row['seconds']:.0f} s", flush=True)
    print()
    print("| model | import | train | worst grad error vs PyTorch f64 | PyTorch fp32's own | grads |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['model']} | {r['import']} | {r['train'] or '-'} | {fmt(r['ours'])} | "
              f"{fmt(r['torch32'])} | {r['grads'] or '-'} |")
    good = sum(1 for r in rows if r["grads"].startswith("ok"))
    print(f"\n{good} of {len(rows)} models train with gradients that agree with PyTorch")
    return 1 if args.require_all and good != len(rows) else 0


if __name__ == "__main__":
    sys.exit(main())
