"""Models that call F.scaled_dot_product_attention, exported with
torch.export, imported (one offload.attention per call, no softmax), trained
one step with offload.compile on the host backend and compared with
PyTorch's float64 step by the project's rule (offload.testing: our fp32
error against float64 at most 4x PyTorch fp32's, or 1e-5 for the loss and
1e-5 for the gradients when PyTorch fp32 is almost exact).

Usage: check_attention.py MODEL [WORKDIR]   (PYTHONPATH=BUILD/python)

MODEL:
  decoder_bool   a causal decoder block whose mask is boolean: tril(T, T) and
                 a padding keep mask [B, 1, 1, T] (attn_mask, is_causal off)
  gqa            grouped-query attention, 4 query heads on 2 key/value heads,
                 enable_gqa=True, is_causal=True
  additive       an additive float mask [B, 1, T, T] given as an input (HF's
                 large negative values on padding, small biases elsewhere),
                 scale=0.3
  input3d        q, k, v of rank 3 [B, T, E] (no head dim), is_causal
  rank5          q, k, v [B, 2, 2, T, E] (two batch dims before the heads) with
                 a boolean mask [B, 1, 1, T, T]
  repeat_kv      HF's repeat_kv (x[:, :, None].expand(...).reshape(...)) on 2
                 key/value heads for 4 query heads: imported as GQA, the
                 repeated copies never computed
  learned_bias   a learned relative-position bias [H, T, T] passed as the
                 float attn_mask (timm's Swin does): the bias gets its gradient
  encoder_layer  nn.TransformerEncoderLayer (dropout 0), whose self-attention
                 PyTorch 2.x runs through scaled_dot_product_attention

Prints `ok MODEL` or the verdict that failed and exits 1. With WORKDIR the
intermediate files (model.mlir, step.mlir, ...) stay there.

`check_attention.py layouts DIR` compiles decoder_bool, gqa, learned_bias,
repeat_kv and dropout (SDPA's own dropout_p = 0.3, causal) twice, with
attention_layout "blhd" (the default: the block's transposes fold into the
token-layout op) and "bhld" (head layout, transposes kept), checks that
the first imported `layout blhd` and no transpose and the second no
`layout blhd`, runs one step of each from the same parameters and inputs
on the host backend, and requires the loss and every gradient bit-identical.

`check_attention.py bad_masks DIR` exports the additive model to DIR/good.pt2
and writes copies whose mask input torch.export would never let through:
int-mask.pt2 (the mask int64), rank5-mask.pt2 (rank 5 against rank-4
scores), wide-mask.pt2 ([2, 1, 6, 5] against [2, 4, 6, 6]).
"""
import copy
import os
import sys
import warnings

import torch
import torch.nn as nn
import torch.nn.functional as F

import offload
from offload.testing import judge_errors, judge_tensors, trajectory_errors

warnings.simplefilter("ignore")
torch.manual_seed(0)

V, D, T, B = 11, 16, 6, 2


def repeat_kv(h, n_rep):
    b, nkv, s, d = h.shape
    if n_rep == 1:
        return h
    h = h[:, :, None, :, :].expand(b, nkv, n_rep, s, d)
    return h.reshape(b, nkv * n_rep, s, d)


class Block(nn.Module):
    """Embedding, one attention block (q, k, v projections, SDPA, output
    projection, residual, LayerNorm, MLP), a vocabulary head and
    cross-entropy. `mode` picks how attention is called."""

    def __init__(self, mode, hq=4, hkv=4):
        super().__init__()
        self.mode, self.hq, self.hkv, self.hd = mode, hq, hkv, D // hq
        self.emb = nn.Embedding(V, D)
        self.q = nn.Linear(D, hq * self.hd)
        self.k = nn.Linear(D, hkv * self.hd)
        self.v = nn.Linear(D, hkv * self.hd)
        self.o = nn.Linear(hq * self.hd, D)
        self.ln = nn.LayerNorm(D)
        self.mlp = nn.Sequential(nn.Linear(D, 2 * D), nn.GELU(), nn.Linear(2 * D, D))
        self.head = nn.Linear(D, V)
        if mode == "learned_bias":
            self.bias = nn.Parameter(0.5 * torch.randn(hq, T, T))
        if mode in ("decoder_bool", "rank5"):
            self.register_buffer("causal", torch.ones(T, T, dtype=torch.bool).tril())

    def attend(self, h, extra):
        Bn, Tn, _ = h.shape
        q = self.q(h).view(Bn, Tn, self.hq, self.hd).transpose(1, 2)
        k = self.k(h).view(Bn, Tn, self.hkv, self.hd).transpose(1, 2)
        v = self.v(h).view(Bn, Tn, self.hkv, self.hd).transpose(1, 2)
        m = self.mode
        if m == "decoder_bool":
            mask = self.causal & extra[:, None, None, :]
            y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        elif m == "gqa":
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
        elif m == "additive":
            y = F.scaled_dot_product_attention(q, k, v, attn_mask=extra, scale=0.3)
        elif m == "repeat_kv":
            rep = self.hq // self.hkv
            y = F.scaled_dot_product_attention(q, repeat_kv(k, rep), repeat_kv(v, rep),
                                               is_causal=True)
        elif m == "dropout":
            y = F.scaled_dot_product_attention(q, k, v, dropout_p=0.3, is_causal=True)
        elif m == "learned_bias":
            y = F.scaled_dot_product_attention(q, k, v, attn_mask=self.bias)
        elif m == "rank5":
            # Heads split into two batch dims [B, 2, 2, T, hd]; the boolean
            # mask [B, 1, 1, T, T] broadcasts along the second.
            def five(x):
                return x.transpose(1, 2).reshape(Bn, Tn, 2, 2, self.hd).permute(0, 2, 3, 1, 4)
            mask = self.causal & extra[:, None, None, None, :]
            y = F.scaled_dot_product_attention(five(q), five(k), five(v), attn_mask=mask)
            return self.o(y.permute(0, 3, 1, 2, 4).reshape(Bn, Tn, -1))
        elif m == "input3d":
            # One head, no head dim: [B, T, E].
            y = F.scaled_dot_product_attention(q.transpose(1, 2).reshape(Bn, Tn, -1),
                                               k.transpose(1, 2).reshape(Bn, Tn, -1),
                                               v.transpose(1, 2).reshape(Bn, Tn, -1),
                                               is_causal=True)
            return self.o(y)
        else:
            raise SystemExit("unknown mode " + m)
        return self.o(y.transpose(1, 2).reshape(Bn, Tn, -1))

    def forward(self, x, extra, target):
        h = self.emb(x)
        h = self.ln(h + self.attend(h, extra))
        h = h + self.mlp(h)
        return F.cross_entropy(self.head(h).reshape(-1, V), target.reshape(-1))


class NoExtra(nn.Module):
    def __init__(self, inner):
        super().__init__()
        self.inner = inner

    def forward(self, x, target):
        return self.inner(x, None, target)


class EncoderLayer(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(V, D)
        self.layer = nn.TransformerEncoderLayer(D, 4, 2 * D, dropout=0.0, batch_first=True)
        self.head = nn.Linear(D, V)

    def forward(self, x, target):
        return F.cross_entropy(self.head(self.layer(self.emb(x))).reshape(-1, V),
                               target.reshape(-1))


def build(which):
    g = torch.Generator().manual_seed(1)
    x = torch.randint(0, V, (B, T), generator=g)
    y = torch.randint(0, V, (B, T), generator=g)
    if which in ("decoder_bool", "rank5"):
        keep = torch.ones(B, T, dtype=torch.bool)
        keep[1, 4:] = False
        return Block(which), (x, keep, y)
    if which == "additive":
        mask = 0.3 * torch.randn(B, 1, T, T, generator=g)
        mask[1, :, :, 4:] = torch.finfo(torch.float32).min
        return Block(which), (x, mask, y)
    if which in ("gqa", "repeat_kv"):
        return NoExtra(Block(which, hq=4, hkv=2)), (x, y)
    if which in ("input3d", "learned_bias", "dropout"):
        return NoExtra(Block(which, hq=1 if which == "input3d" else 4,
                             hkv=1 if which == "input3d" else 4)), (x, y)
    if which == "encoder_layer":
        return EncoderLayer(), (x, y)
    raise SystemExit("unknown model " + which)


def torch_step(model, inputs, dtype):
    m = copy.deepcopy(model).to(dtype)
    args = [a.to(dtype) if a.is_floating_point() else a for a in inputs]
    loss = m(*args)
    loss.backward()
    return float(loss), {n: p.grad.detach().clone() for n, p in m.named_parameters()}


def bad_masks(out):
    import json
    import zipfile
    model, inputs = build("additive")
    ep = torch.export.export(model, inputs)
    good = os.path.join(out, "good.pt2")
    torch.export.save(ep, good)
    with zipfile.ZipFile(good) as z:
        members = {n: z.read(n) for n in z.namelist()}
    key = next(n for n in members if n.endswith("models/model.json"))

    def write(name, edit):
        d = json.loads(members[key])
        edit(d["graph_module"]["graph"]["tensor_values"]["extra"])
        m = dict(members)
        m[key] = json.dumps(d).encode()
        with zipfile.ZipFile(os.path.join(out, name), "w", zipfile.ZIP_STORED) as z:
            for n, data in m.items():
                z.writestr(n, data)

    def sizes(s):
        def edit(t):
            t["sizes"] = [{"as_int": d} for d in s]
            st, acc = [], 1
            for d in reversed(s):
                st.insert(0, {"as_int": acc})
                acc *= d
            t["strides"] = st
        return edit

    write("int-mask.pt2", lambda t: t.update(dtype=5))  # torch.int64
    write("rank5-mask.pt2", sizes([1, 2, 1, 6, 6]))
    write("wide-mask.pt2", sizes([2, 1, 6, 5]))
    print("ok bad_masks")


def layouts(out):
    ok = True
    for which in ("decoder_bool", "gqa", "learned_bias", "repeat_kv", "dropout"):
        model, inputs = build(which)
        got = {}
        for layout in ("blhd", "bhld"):
            wd = os.path.join(out, f"{which}-{layout}")
            os.makedirs(wd, exist_ok=True)
            step = offload.compile(copy.deepcopy(model), inputs, loss=None,
                                   return_gradients=True, exporter="export", verbose=False,
                                   workdir=wd, attention_layout=layout)
            loss = step(*inputs)
            got[layout] = (loss, step.gradients())
            with open(os.path.join(wd, "model.mlir")) as f:
                text = f.read()
            folded = "layout blhd" in text and "offload.transpose" not in text
            if folded != (layout == "blhd"):
                print(f"{which}: attention_layout={layout} imported "
                      f"{'the token layout' if folded else 'no token layout'}")
                ok = False
        (lt, gt), (lh, gh) = got["blhd"], got["bhld"]
        diff = [n for n in gh if not torch.equal(gt[n], gh[n])]
        same = lt == lh and not diff and set(gt) == set(gh)
        print(f"{which}: token layout vs head layout: loss {lt!r} vs {lh!r}, "
              f"{len(gh)} gradients, {'bit-identical' if same else 'differ: ' + ', '.join(diff)}")
        ok &= same
    if not ok:
        sys.exit(1)
    print("ok layouts")


def main():
    which = sys.argv[1]
    if which == "bad_masks":
        bad_masks(sys.argv[2])
        return
    if which == "layouts":
        layouts(sys.argv[2])
        return
    workdir = sys.argv[2] if len(sys.argv) > 2 else None
    model, inputs = build(which)
    l64, g64 = torch_step(model, inputs, torch.float64)
    l32, g32 = torch_step(model, inputs, torch.float32)
    step = offload.compile(copy.deepcopy(model), inputs, loss=None, return_gradients=True,
                           exporter="export", verbose=False, workdir=workdir)
    loss = step(*inputs)
    grads = step.gradients()
    vl = judge_errors(trajectory_errors([loss], [l64]), trajectory_errors([l32], [l64]), 1e-5)
    vg = judge_tensors(grads, g32, g64, floor=1e-5)
    print(f"{which}: loss {loss:.6f} (float64 {l64:.6f}): {vl}; grads: {vg}")
    ok = vl.ok and vg.ok
    if workdir:
        with open(os.path.join(workdir, "model.mlir")) as f:
            text = f.read()
        if "offload.attention" not in text or "offload.softmax" in text:
            print(f"{which}: the imported step does not run attention as one op")
            ok = False
    if not ok:
        sys.exit(1)
    print(f"ok {which}")


if __name__ == "__main__":
    main()
