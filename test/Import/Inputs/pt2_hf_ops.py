"""A small model with what torch.export writes for HuggingFace transformers
and diffusers models (issue 28), exported with torch.export (PyTorch 2.x):
  tensor_constant inputs  a `torch.tensor([...])` made in forward, lifted by
                          torch.export (data/constants);
  non-persistent buffers  HF's position_ids / token_type_ids and rotary
                          inv_freq (persistent=False, data/constants), one
                          of them updated in place (a call counter: state);
  integer arithmetic      position ids `arange(T) + 0`, relative positions
                          `pos[None] - pos[:, None]`, abs, log, truncation to
                          long, min.other, lt/ge/eq, where.self and
                          where.Scalar, bitwise_not, __and__, new_ones,
                          cumsum, diff, gather, index.Tensor, full_like (a
                          T5-style bucketed relative-position bias and an
                          HF-style causal mask): all evaluated at import;
  embedding padding_idx   the padding row gets no gradient;
  wrap_with_set_grad_enabled
                          a torch.no_grad() rotary table (sin/cos of a
                          buffer and positions), inlined and folded;
  pow.Tensor_Scalar       RMSNorm's x.pow(2) and GELU's x.pow(3);
  addmm                   GPT-2's Conv1D;
  softmax.int with dtype; sin/cos of values of the step; broadcast_tensors;
  upsample_nearest2d.vec; `timesteps * ones(batch)` on an int64 input;
  repeat of a value of the step (XCiT's positional encoding).

Usage: pt2_hf_ops.py OUT_DIR   (scripts/torch2-python)

Writes OUT_DIR/hf-ops.pt2 (inputs ids [2, 8] int64 with padding ids 0,
steps [2] int64; the output is the loss), inputs.npz, PyTorch's own step on
the exported parameters (reference.npz: `loss` and `grad:NAME`, for
check_pt2_grads.py), and two models the importer refuses: no-grad-param.pt2
(a torch.no_grad() block that reads a parameter) and cumsum-input.pt2 (a
cumsum of the step's input ids, which runs in the step, and the remainder of
it, which offload only evaluates at import).
"""
import math
import os
import sys
import warnings

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

warnings.simplefilter("ignore")
V, D, T, B = 16, 8, 8, 2


class HFOps(nn.Module):
    def __init__(self):
        super().__init__()
        self.tok = nn.Embedding(V, D, padding_idx=0)
        self.pos = nn.Embedding(T, D)
        self.typ = nn.Embedding(2, D)
        self.rel = nn.Embedding(4, 1)                      # T5-style bucket bias
        self.norm_w = nn.Parameter(torch.rand(D) + 0.5)
        self.w = nn.Parameter(torch.randn(D, 3 * D) * 0.3)  # Conv1D: x @ w + b
        self.b = nn.Parameter(torch.randn(3 * D) * 0.1)
        self.time = nn.Linear(4, D)
        self.head = nn.Linear(D, V)
        self.register_buffer("position_ids", torch.arange(T).unsqueeze(0), persistent=False)
        self.register_buffer("token_type_ids", torch.zeros(1, T, dtype=torch.long),
                             persistent=False)
        self.register_buffer("inv_freq", 1.0 / (100 ** (torch.arange(0, D, 2).float() / D)),
                             persistent=False)
        self.register_buffer("calls", torch.zeros((), dtype=torch.long), persistent=False)

    @torch.no_grad()
    def rotary(self, pos):                                 # wrap_with_set_grad_enabled
        freqs = pos[..., None].float() * self.inv_freq
        emb = torch.cat([freqs, freqs], -1)
        return emb.cos(), emb.sin()

    def forward(self, ids, steps):
        self.calls.add_(1)                                 # a non-persistent buffer updated
        scale = torch.tensor([0.5, 1.0, 2.0, 1.5, 1.0, 0.5, 2.0, 1.0])  # tensor_constant
        pos = torch.arange(T) + 0                          # add on int64
        types = torch.gather(self.token_type_ids.expand(B, -1), 1,
                             self.position_ids.expand(B, -1))           # gather of a buffer
        h = self.tok(ids) + self.pos(pos)[None] + self.typ(types)       # padding_idx
        cos, sin = self.rotary(self.position_ids)
        h = h * cos + torch.roll(h, 1, -1) * sin
        # RMSNorm (pow 2) and a GELU with pow 3.
        h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + 1e-6) * self.norm_w
        qkv = torch.addmm(self.b, h.view(-1, D), self.w).view(B, T, 3 * D)
        q, k, v = qkv.split(D, dim=2)
        s = q @ k.transpose(1, 2) / math.sqrt(D)          # [B, T, T]
        # T5-style buckets of relative positions: abs, log, long, min.other.
        rel = pos[None, :] - pos[:, None]
        n = rel.abs()
        large = 2 + (torch.log(n.float() / 2 + 1e-6) / math.log(4) * 2).to(torch.long)
        large = torch.min(large, torch.full_like(large, 3))
        bucket = torch.where(n < 2, n, large)
        s = s + self.rel(bucket)[..., 0]
        # An HF-style causal mask: le on indexed positions, ~, &, new_ones,
        # cumsum/diff, eq, ge.Scalar, where.Scalar.
        cum = torch.ones(1, T, dtype=torch.long).cumsum(-1) - 1
        same = torch.diff(cum, dim=-1, prepend=cum[:, :1] - 1).eq(1)     # all True
        causal = pos[None, :, None] >= pos[None, None, :]
        keep = same.new_ones(()) & causal & ~(pos[None, None, :] >= T) & same[:, :, None]
        s = s + torch.where(keep, 0.0, torch.finfo(torch.float32).min)
        p = torch.softmax(s, -1, dtype=torch.float32)
        a = (p @ v) * scale[None, :, None]
        g = 0.5 * a * (1 + torch.tanh(0.79788456 * (a + 0.044715 * a.pow(3))))
        # diffusers' timestep path: int64 * ones, float, sin/cos of the step's values.
        t = (steps * torch.ones(B, dtype=torch.long)).float()[:, None] * torch.tensor(
            [1.0, 0.5, 0.25, 0.125])
        temb = self.time(torch.cat([torch.sin(t[:, :2]), torch.cos(t[:, 2:])], -1))
        g = g + temb[:, None, :].repeat(1, T, 1)          # repeat of a value of the step
        up = F.interpolate(g[:, None], scale_factor=2.0, mode="nearest")  # upsample .vec
        g = up.mean(1)[:, ::2, ::2]
        logits = self.head(g)
        x1, x2 = torch.broadcast_tensors(logits, self.head.bias)
        return F.cross_entropy((x1 + 0 * x2).reshape(-1, V), ids.reshape(-1))


class NoGradParam(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        with torch.no_grad():
            w = self.fc.weight * 2
        return (x @ w).sum()


class CumsumInput(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(V, 4)

    def forward(self, ids):
        return self.emb(ids.cumsum(-1) % V).sum()


out = sys.argv[1]
torch.manual_seed(0)
model = HFOps().train()
ids = torch.randint(1, V, (B, T))
ids[:, -2:] = 0                                            # padding
steps = torch.tensor([3, 17])
ep = torch.export.export(model, (ids, steps))
torch.export.save(ep, os.path.join(out, "hf-ops.pt2"))
ops = {str(n.target) for n in ep.graph.nodes if n.op == "call_function"}
kinds = {s.kind.name for s in ep.graph_signature.input_specs}
for op in ("aten.gather.default", "aten.cumsum.default", "aten.diff.default",
           "aten.bitwise_not.default", "aten.new_ones.default", "aten.pow.Tensor_Scalar",
           "aten.addmm.default", "aten.min.other", "aten.log.default",
           "aten.where.Scalar", "wrap_with_set_grad_enabled",
           "aten.broadcast_tensors.default", "aten.upsample_nearest2d.vec",
           "aten.sin.default", "aten.cos.default", "aten.lift_fresh_copy.default"):
    if op not in ops and not any(op in o for o in ops):
        raise SystemExit(f"the export has no {op} (PyTorch {torch.__version__}): {sorted(ops)}")
if "CONSTANT_TENSOR" not in kinds:
    raise SystemExit(f"the export lifted no tensor constant: {kinds}")

np.savez(os.path.join(out, "inputs.npz"), ids=ids.numpy(), steps=steps.numpy())
model.calls.zero_()
loss = model(ids, steps)
loss.backward()
ref = {"loss": np.array(loss.item(), dtype=np.float32)}
for name, p in model.named_parameters():
    ref["grad:" + name] = p.grad.numpy()
if np.any(ref["grad:tok.weight"][0] != 0):
    raise SystemExit("PyTorch gave the padding row a gradient")
np.savez(os.path.join(out, "reference.npz"), **ref)

torch.export.save(torch.export.export(NoGradParam(), (torch.randn(2, 4),)),
                  os.path.join(out, "no-grad-param.pt2"))
torch.export.save(torch.export.export(CumsumInput(), (ids,)),
                  os.path.join(out, "cumsum-input.pt2"))
print("ok")
