#!/usr/bin/python3
"""Export the example models used by offload's tests as traced TorchScript.

For every model NAME this writes, under --out DIR:

  NAME.pt          torch.jit.trace(model.train(), example) saved with .save();
                   the model is traced in train mode, so dropout and
                   batch-norm appear as their training-mode ops.
  NAME.inputs.npz  the example inputs: `x` (model input) and `y` (target);
                   generated from fixed seeds, so they are the same on every
                   run and machine.
  NAME.params.npz  every parameter and buffer by qualified name (as
                   named_parameters()/named_buffers() spell it), float32;
                   num_batches_tracked is int64. The values are those *before*
                   tracing (tracing a train-mode batch-norm updates its running
                   statistics; they are restored before the .pt is saved, so
                   the .pt and the .npz hold identical values).
  NAME.json        metadata, see `describe()` below:
                   {"model": NAME,
                    "inputs": {"x": "32x64xf32", "y": "32xi64"},
                    "forward_args": ["x"],      # what the traced forward takes
                    "loss": "cross_entropy",     # mean reduction
                    "returns_loss": false,       # forward returns the scalar loss
                    "dropout": 0.0, "batch": 32, "seed": 0}

Models (all built after torch.manual_seed(0)):
  mlp          Linear(64,128)-ReLU-Linear(128,128)-ReLU-Linear(128,10); x [32,64]
               f32, y [32] i64 in [0,10); forward returns logits.
  resnet18     torchvision resnet18(num_classes=10); x [B,3,32,32] f32 (B from
               --batch, default 32), y [B]; forward returns logits.
  transformer  TransformerEncoder(2 x TransformerEncoderLayer(d_model=64,
               nhead=4, dim_feedforward=128, dropout=P, batch_first=True)),
               mean over the sequence, Linear(64,10); x [8,16,64] f32, y [8].
  roundtrip    Linear(8,8) -> .double().float() -> Linear(8,4); x [16,8] f32,
               y [16] i64 in [0,4): a dtype round trip whose gradient must
               reach the first layer (issue 16's silent zero gradient).
  gpt          small pre-LayerNorm GPT decoder (vocab 256, 32 positions,
               d_model 64, 2 blocks, 4 heads, GELU MLP 4x); x [4,32] i64 tokens,
               y [4,32] i64 next tokens; forward(x, y) returns the scalar
               cross-entropy over the flattened logits.

The loss for models that return logits is F.cross_entropy(logits, y) with mean
reduction. Each trace is checked before saving: the traced and the eager module
run on the example inputs from the same parameter state and RNG seed, and their
outputs and buffers must be equal (exactly; both run the same ATen ops).

Usage: export_models.py --out DIR [--models mlp,resnet18,transformer,gpt]
                        [--dropout P] [--batch B]
"""

import argparse
import copy
import json
import math
import os
import sys
import warnings

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

ALL_MODELS = ["mlp", "resnet18", "transformer", "gpt", "roundtrip", "classifier"]
# What --models exports by default: the example models of the docs.
DEFAULT_MODELS = ["mlp", "resnet18", "transformer", "gpt"]
SEED = 0


# ---------------------------------------------------------------------------
# Model definitions
# ---------------------------------------------------------------------------
class MLP(nn.Module):
    """Linear(64,128)-ReLU-Linear(128,128)-ReLU-Linear(128,10)."""

    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(64, 128)
        self.relu1 = nn.ReLU()
        self.fc2 = nn.Linear(128, 128)
        self.relu2 = nn.ReLU()
        self.fc3 = nn.Linear(128, 10)

    def forward(self, x):
        return self.fc3(self.relu2(self.fc2(self.relu1(self.fc1(x)))))


class EncoderClassifier(nn.Module):
    """nn.TransformerEncoder (2 layers) + mean over the sequence + Linear head."""

    def __init__(self, dropout):
        super().__init__()
        layer = nn.TransformerEncoderLayer(d_model=64, nhead=4,
                                           dim_feedforward=128,
                                           dropout=dropout, batch_first=True)
        # enable_nested_tensor only matters in eval mode; keep the trace plain.
        self.encoder = nn.TransformerEncoder(layer, num_layers=2,
                                             enable_nested_tensor=False)
        self.head = nn.Linear(64, 10)

    def forward(self, x):
        h = self.encoder(x)  # [B, S, 64]
        return self.head(h.mean(dim=1))  # [B, 10]


class CausalSelfAttention(nn.Module):
    """Multi-head causal self-attention from nn.Linear + matmul + mask."""

    def __init__(self, d_model, n_head, dropout):
        super().__init__()
        assert d_model % n_head == 0
        self.n_head = n_head
        self.head_dim = d_model // n_head
        self.q = nn.Linear(d_model, d_model)
        self.k = nn.Linear(d_model, d_model)
        self.v = nn.Linear(d_model, d_model)
        self.proj = nn.Linear(d_model, d_model)
        self.attn_drop = nn.Dropout(dropout)
        self.resid_drop = nn.Dropout(dropout)

    def forward(self, x):
        b, t, c = x.shape
        h, d = self.n_head, self.head_dim
        q = self.q(x).view(b, t, h, d).transpose(1, 2)  # [B,H,T,D]
        k = self.k(x).view(b, t, h, d).transpose(1, 2)
        v = self.v(x).view(b, t, h, d).transpose(1, 2)
        att = torch.matmul(q, k.transpose(-2, -1)) * (1.0 / math.sqrt(d))
        mask = torch.triu(torch.ones(t, t, dtype=torch.bool, device=x.device),
                          diagonal=1)  # True above the diagonal = future
        att = att.masked_fill(mask, float("-inf"))
        att = F.softmax(att, dim=-1)
        att = self.attn_drop(att)
        y = torch.matmul(att, v)  # [B,H,T,D]
        y = y.transpose(1, 2).contiguous().view(b, t, c)
        return self.resid_drop(self.proj(y))


class GPTBlock(nn.Module):
    """Pre-LayerNorm block: x + attn(ln1(x)), then x + mlp(ln2(x))."""

    def __init__(self, d_model, n_head, dropout):
        super().__init__()
        self.ln1 = nn.LayerNorm(d_model)
        self.attn = CausalSelfAttention(d_model, n_head, dropout)
        self.ln2 = nn.LayerNorm(d_model)
        self.fc = nn.Linear(d_model, 4 * d_model)
        self.gelu = nn.GELU()
        self.fc_proj = nn.Linear(4 * d_model, d_model)
        self.mlp_drop = nn.Dropout(dropout)

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        x = x + self.mlp_drop(self.fc_proj(self.gelu(self.fc(self.ln2(x)))))
        return x


class GPT(nn.Module):
    """Small GPT decoder; forward(x, y) returns the scalar LM loss."""

    def __init__(self, vocab=256, n_pos=32, d_model=64, n_layer=2, n_head=4,
                 dropout=0.0):
        super().__init__()
        self.vocab = vocab
        self.tok_emb = nn.Embedding(vocab, d_model)
        self.pos_emb = nn.Embedding(n_pos, d_model)
        self.drop = nn.Dropout(dropout)
        self.blocks = nn.ModuleList(
            [GPTBlock(d_model, n_head, dropout) for _ in range(n_layer)])
        self.ln_f = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, vocab)

    def forward(self, x, y):
        t = x.shape[1]
        pos = torch.arange(t, dtype=torch.long, device=x.device)
        h = self.drop(self.tok_emb(x) + self.pos_emb(pos))
        for block in self.blocks:
            h = block(h)
        logits = self.head(self.ln_f(h))  # [B,T,V]
        return F.cross_entropy(logits.reshape(-1, self.vocab), y.reshape(-1))


# ---------------------------------------------------------------------------
# Model registry
# ---------------------------------------------------------------------------
class RoundTrip(nn.Module):
    """Linear(8,8) -> .double().float() -> Linear(8,4)."""

    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(8, 8)
        self.fc2 = nn.Linear(8, 4)

    def forward(self, x):
        return self.fc2(self.fc1(x).double().float())


class WideClassifier(nn.Module):
    """Linear(64,64)-ReLU-Linear(64,4096): a classifier whose 1 MiB weight
    dominates the step (the planner must slice it below that footprint)."""

    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(64, 64)
        self.fc2 = nn.Linear(64, 4096)

    def forward(self, x):
        return self.fc2(F.relu(self.fc1(x)))


def build_model(name, dropout=0.0):
    """Returns the eager nn.Module NAME built after torch.manual_seed(SEED)."""
    torch.manual_seed(SEED)
    if name == "mlp":
        return MLP()
    if name == "resnet18":
        import torchvision
        return torchvision.models.resnet18(num_classes=10)
    if name == "transformer":
        return EncoderClassifier(dropout)
    if name == "gpt":
        return GPT(dropout=dropout)
    if name == "roundtrip":
        return RoundTrip()
    if name == "classifier":
        return WideClassifier()
    raise ValueError("unknown model '%s' (known: %s)" % (name, ", ".join(ALL_MODELS)))


def make_inputs(name, batch=None):
    """Returns (x, y) example inputs from a fixed seed (CPU tensors)."""
    g = torch.Generator().manual_seed(SEED + 1)
    if name == "mlp":
        b = batch or 32
        return (torch.randn(b, 64, generator=g),
                torch.randint(0, 10, (b,), generator=g))
    if name == "resnet18":
        b = batch or 32
        return (torch.randn(b, 3, 32, 32, generator=g),
                torch.randint(0, 10, (b,), generator=g))
    if name == "transformer":
        b = batch or 8
        return (torch.randn(b, 16, 64, generator=g),
                torch.randint(0, 10, (b,), generator=g))
    if name == "roundtrip":
        b = batch or 16
        return (torch.randn(b, 8, generator=g),
                torch.randint(0, 4, (b,), generator=g))
    if name == "classifier":
        b = batch or 8
        return (torch.randn(b, 64, generator=g),
                torch.randint(0, 4096, (b,), generator=g))
    if name == "gpt":
        b = batch or 4
        seq = torch.randint(0, 256, (b, 33), generator=g)
        return seq[:, :32].contiguous(), seq[:, 1:].contiguous()
    raise ValueError("unknown model '%s'" % name)


def returns_loss(name):
    return name == "gpt"


def forward_args(name, x, y):
    """The positional arguments of the model's forward (and of the trace)."""
    return (x, y) if returns_loss(name) else (x,)


def compute_loss(name, out, y):
    """The scalar training loss from the forward's output."""
    if returns_loss(name):
        return out
    return F.cross_entropy(out, y)


_DTYPE_SUFFIX = {torch.float32: "f32", torch.float64: "f64", torch.int64: "i64",
                 torch.int32: "i32", torch.bool: "i1", torch.float16: "f16",
                 torch.bfloat16: "bf16"}


def type_string(t):
    """'32x3x32x32xf32' (shape dims, then the element type), importer syntax."""
    return "x".join([str(d) for d in t.shape] + [_DTYPE_SUFFIX[t.dtype]])


def state_arrays(model):
    """Parameters and buffers by qualified name as numpy arrays (fp32/int64)."""
    out = {}
    for n, p in model.named_parameters():
        out[n] = p.detach().to(torch.float32).cpu().numpy().copy()
    for n, b in model.named_buffers():
        if b.dtype.is_floating_point:
            out[n] = b.detach().to(torch.float32).cpu().numpy().copy()
        else:
            out[n] = b.detach().to(torch.int64).cpu().numpy().copy()
    return out


def load_state_arrays(model, arrays):
    """Copies arrays (from state_arrays or a params.npz) into model in place."""
    with torch.no_grad():
        named = dict(model.named_parameters())
        named.update(dict(model.named_buffers()))
        missing = [n for n in named if n not in arrays]
        if missing:
            raise KeyError("params file lacks: %s" % ", ".join(missing))
        for n, t in named.items():
            t.copy_(torch.from_numpy(np.asarray(arrays[n])).to(t.dtype))


def load_config(prefix):
    """Reads PREFIX.json (PREFIX = DIR/<name>)."""
    with open(prefix + ".json") as f:
        return json.load(f)


def load_inputs(prefix):
    with np.load(prefix + ".inputs.npz") as z:
        return torch.from_numpy(z["x"].copy()), torch.from_numpy(z["y"].copy())


def load_params(prefix):
    with np.load(prefix + ".params.npz") as z:
        return {k: z[k].copy() for k in z.files}


def load_eager(prefix):
    """Rebuilds the eager module described by PREFIX.json with PREFIX.params.npz."""
    cfg = load_config(prefix)
    model = build_model(cfg["model"], cfg.get("dropout", 0.0))
    load_state_arrays(model, load_params(prefix))
    return cfg, model


def describe(name, x, y, dropout, batch):
    return {
        "model": name,
        "inputs": {"x": type_string(x), "y": type_string(y)},
        "forward_args": ["x", "y"] if returns_loss(name) else ["x"],
        "loss": "cross_entropy",
        "loss_reduction": "mean",
        "returns_loss": returns_loss(name),
        "dropout": dropout,
        "batch": int(x.shape[0]),
        "seed": SEED,
        "torch_version": torch.__version__,
    }


# ---------------------------------------------------------------------------
# Export
# ---------------------------------------------------------------------------
def _run_from(model, args, state, seed):
    load_state_arrays(model, state)
    torch.manual_seed(seed)
    out = model(*args)
    return out.detach().clone(), state_arrays(model)


def export_one(name, out_dir, dropout, batch):
    model = build_model(name, dropout).train()
    x, y = make_inputs(name, batch)
    args = forward_args(name, x, y)
    state0 = state_arrays(model)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # TracerWarnings on shape arithmetic
        # check_trace=False: with dropout > 0 the built-in check re-runs with
        # fresh random numbers; our own check below fixes the seed instead.
        traced = torch.jit.trace(model, args, check_trace=False)

    # Trace check: same starting state and RNG seed for both; the outputs and
    # the buffers (batch-norm running statistics) after the step must match.
    eager_out, eager_state = _run_from(model, args, state0, 1234)
    traced_out, traced_state = _run_from(traced, args, state0, 1234)
    if eager_out.shape != traced_out.shape or not torch.equal(eager_out, traced_out):
        diff = (eager_out - traced_out).abs().max().item() \
            if eager_out.shape == traced_out.shape else float("nan")
        raise RuntimeError("%s: traced output differs from eager (max |diff| %g)"
                           % (name, diff))
    for k in eager_state:
        if not np.array_equal(eager_state[k], traced_state[k]):
            raise RuntimeError("%s: buffer %s differs after traced step" % (name, k))

    # Restore the pre-trace state (the .pt shares its tensors with `model`).
    load_state_arrays(model, state0)
    prefix = os.path.join(out_dir, name)
    traced.save(prefix + ".pt")
    np.savez(prefix + ".inputs.npz", x=x.numpy(), y=y.numpy())
    np.savez(prefix + ".params.npz", **state0)
    with open(prefix + ".json", "w") as f:
        json.dump(describe(name, x, y, dropout, batch), f, indent=2)
        f.write("\n")
    nparams = sum(int(p.numel()) for p in model.parameters())
    print("wrote %s.pt: inputs x=%s y=%s, %d parameters, %s" % (
        prefix, type_string(x), type_string(y), nparams,
        "forward returns loss" if returns_loss(name) else "forward returns logits"))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True, help="output directory")
    ap.add_argument("--models", default=",".join(DEFAULT_MODELS),
                    help="comma-separated subset of " + ",".join(ALL_MODELS))
    ap.add_argument("--dropout", type=float, default=0.0,
                    help="dropout probability for transformer and gpt (default 0)")
    ap.add_argument("--batch", type=int, default=None,
                    help="batch size (default: mlp 32, resnet18 32, transformer 8, gpt 4)")
    a = ap.parse_args(argv)
    names = [m.strip() for m in a.models.split(",") if m.strip()]
    bad = [m for m in names if m not in ALL_MODELS]
    if bad:
        ap.error("unknown model(s): %s (known: %s)" % (", ".join(bad), ", ".join(ALL_MODELS)))
    if not 0.0 <= a.dropout < 1.0:
        ap.error("--dropout must be in [0, 1)")
    if a.batch is not None and a.batch <= 0:
        ap.error("--batch must be positive")
    os.makedirs(a.out, exist_ok=True)
    torch.set_num_threads(max(1, min(2, torch.get_num_threads())))
    for n in names:
        export_one(n, a.out, a.dropout, a.batch)
    return 0


if __name__ == "__main__":
    sys.exit(main())
