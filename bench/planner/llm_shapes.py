#!/usr/bin/python3
"""Plans LLM-sized training steps without their weights (issue #13, scale).

    PYTHONPATH=python /usr/bin/python3 bench/planner/llm_shapes.py --bin build/bin --work DIR
        [--models llama2-7b,gpt2-xl] [--trace-seq 8]

Each model is built on PyTorch's meta device and every parameter is then
replaced by a one-element tensor expanded to the parameter's shape (stride
0): every shape is kept, almost no bytes are held, and torch.jit.save writes
a TorchScript file of a few hundred kilobytes. The model is traced at a short
sequence (--trace-seq; the graph does not depend on it: sizes are read from
the input with aten::size, and the causal mask and positions are computed
from them) and imported at the real shape with offload-import --input, which
folds shape-dependent values again at that shape. No parameter file is
written (--params-out is not given), so nothing of the weights' size is ever
materialised.

Then: --offload-autodiff (AdamW, as these models are trained), the unplanned
memory report, and --offload-plan-memory at each budget on h100-sxm. Prints
per model and budget: the unplanned peak and arena, the planned arena, the
decisions by kind, the simulated step time and its overhead, and the
planning time (wall and CPU of the whole offload-opt run).

Models (fp32, as the issue asks):
  llama2-7b  32 layers, d_model 4096, 32 heads, SwiGLU FFN 11008, vocab 32000,
             RMSNorm, rotary positions, causal attention; batch 1, seq 4096;
             budgets 80 GB and 40 GB.
  gpt2-xl    48 layers, d_model 1600, 25 heads, FFN 6400, vocab 50257,
             1024 positions, LayerNorm, GELU; batch 8, seq 1024; budget 80 GB.
For bench/planner/realistic.py (which imports export()): gpt2-124m and
gpt2-1.5b (GPT-2 small and XL with the embedding tied to the output, batch 16
and 8 at seq 1024) and llama3-8b (grouped-query attention, 8 key/value heads,
vocab 128256, batch 1 at seq 8192).
"""
import argparse
import math
import os
import re
import resource
import subprocess
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

from export_models import GPTBlock  # the example GPT's block (python/, on PYTHONPATH)


class RMSNorm(nn.Module):
    def __init__(self, d, eps=1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d))

    def forward(self, x):
        return x * torch.rsqrt((x * x).mean(-1, keepdim=True) + self.eps) * self.weight


def rotate_half(x):
    h = x.shape[-1] // 2
    return torch.cat([-x[..., h:], x[..., :h]], dim=-1)


class LlamaAttention(nn.Module):
    """Llama's attention; n_kv_head < n_head is grouped-query attention
    (Llama 3), whose key and value heads are repeated as HF's repeat_kv does."""

    def __init__(self, d, n_head, n_kv_head=None):
        super().__init__()
        self.n_head, self.head_dim = n_head, d // n_head
        self.n_kv_head = n_kv_head or n_head
        kv = self.n_kv_head * self.head_dim
        self.q_proj = nn.Linear(d, d, bias=False)
        self.k_proj = nn.Linear(d, kv, bias=False)
        self.v_proj = nn.Linear(d, kv, bias=False)
        self.o_proj = nn.Linear(d, d, bias=False)

    def forward(self, x, cos, sin, mask):
        b, t, c = x.shape
        h, hk, d = self.n_head, self.n_kv_head, self.head_dim
        q = self.q_proj(x).view(b, t, h, d).transpose(1, 2)
        k = self.k_proj(x).view(b, t, hk, d).transpose(1, 2)
        v = self.v_proj(x).view(b, t, hk, d).transpose(1, 2)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        if hk != h:
            k = k[:, :, None].expand(b, hk, h // hk, t, d).reshape(b, h, t, d)
            v = v[:, :, None].expand(b, hk, h // hk, t, d).reshape(b, h, t, d)
        att = torch.matmul(q, k.transpose(-2, -1)) * (1.0 / math.sqrt(d))
        att = F.softmax(att.masked_fill(mask, float("-inf")), dim=-1)
        y = torch.matmul(att, v).transpose(1, 2).contiguous().view(b, t, c)
        return self.o_proj(y)


class LlamaBlock(nn.Module):
    def __init__(self, d, n_head, ffn, n_kv_head=None):
        super().__init__()
        self.input_layernorm = RMSNorm(d)
        self.self_attn = LlamaAttention(d, n_head, n_kv_head)
        self.post_attention_layernorm = RMSNorm(d)
        self.gate_proj = nn.Linear(d, ffn, bias=False)
        self.up_proj = nn.Linear(d, ffn, bias=False)
        self.down_proj = nn.Linear(ffn, d, bias=False)

    def forward(self, x, cos, sin, mask):
        x = x + self.self_attn(self.input_layernorm(x), cos, sin, mask)
        h = self.post_attention_layernorm(x)
        return x + self.down_proj(F.silu(self.gate_proj(h)) * self.up_proj(h))


class Llama(nn.Module):
    """A Llama-2-shaped decoder; forward(x, y) returns the scalar LM loss."""

    def __init__(self, vocab, d, n_layer, n_head, ffn, n_kv_head=None, rope_theta=10000.0):
        super().__init__()
        self.vocab, self.head_dim, self.rope_theta = vocab, d // n_head, rope_theta
        self.embed_tokens = nn.Embedding(vocab, d)
        self.layers = nn.ModuleList([LlamaBlock(d, n_head, ffn, n_kv_head)
                                     for _ in range(n_layer)])
        self.norm = RMSNorm(d)
        self.lm_head = nn.Linear(d, vocab, bias=False)

    def forward(self, x, y):
        t = x.shape[1]
        pos = torch.arange(t, dtype=torch.float32)
        inv = 1.0 / (self.rope_theta ** (torch.arange(0, self.head_dim, 2, dtype=torch.float32)
                                  / self.head_dim))
        freqs = pos.unsqueeze(1) * inv.unsqueeze(0)
        emb = torch.cat([freqs, freqs], dim=-1)
        cos, sin = emb.cos(), emb.sin()
        mask = torch.triu(torch.ones(t, t, dtype=torch.bool), diagonal=1)
        h = self.embed_tokens(x)
        for layer in self.layers:
            h = layer(h, cos, sin, mask)
        logits = self.lm_head(self.norm(h))
        return F.cross_entropy(logits.reshape(-1, self.vocab), y.reshape(-1))


class GPT2(nn.Module):
    """A GPT-2-shaped decoder from the example GPT's blocks. `tied`: the
    output projection is the token embedding's weight, without a bias, as in
    GPT-2 itself (HF's GPT2LMHeadModel)."""

    def __init__(self, vocab, n_pos, d, n_layer, n_head, tied=False):
        super().__init__()
        self.vocab, self.tied = vocab, tied
        self.wte = nn.Embedding(vocab, d)
        self.wpe = nn.Embedding(n_pos, d)
        self.h = nn.ModuleList([GPTBlock(d, n_head, 0.0) for _ in range(n_layer)])
        self.ln_f = nn.LayerNorm(d)
        if not tied:
            self.lm_head = nn.Linear(d, vocab)

    def forward(self, x, y):
        t = x.shape[1]
        pos = torch.arange(t, dtype=torch.long)
        h = self.wte(x) + self.wpe(pos)
        for block in self.h:
            h = block(h)
        h = self.ln_f(h)
        logits = F.linear(h, self.wte.weight) if self.tied else self.lm_head(h)
        return F.cross_entropy(logits.reshape(-1, self.vocab), y.reshape(-1))


MODELS = {
    # name: (constructor, batch, seq, vocab, budgets)
    "llama2-7b": (lambda: Llama(32000, 4096, 32, 32, 11008), 1, 4096, 32000,
                  ["80GB", "40GB"]),
    "gpt2-xl": (lambda: GPT2(50257, 1024, 1600, 48, 25), 8, 1024, 50257, ["80GB"]),
    # bench/planner/realistic.py's workloads (the budgets are its own).
    # GPT-2 small (124 M parameters; 12 layers, d 768, 12 heads) and GPT-2
    # XL (1.56 B) with the embedding tied to the output, as released.
    "gpt2-124m": (lambda: GPT2(50257, 1024, 768, 12, 12, tied=True), 16, 1024, 50257, ["80GB"]),
    "gpt2-1.5b": (lambda: GPT2(50257, 1024, 1600, 48, 25, tied=True), 8, 1024, 50257, ["80GB"]),
    # Llama-3-8B: 32 layers, d 4096, 32 query and 8 key/value heads (GQA),
    # SwiGLU FFN 14336, vocab 128256, rope theta 500000; batch 1 at its
    # 8192-token context.
    "llama3-8b": (lambda: Llama(128256, 4096, 32, 32, 14336, n_kv_head=8, rope_theta=500000.0),
                  1, 8192, 128256, ["80GB"]),
}


def shape_only(build):
    """The model with every parameter a stride-0 view of one element."""
    with torch.device("meta") if hasattr(torch, "device") and hasattr(torch.device, "__enter__") \
            else _MetaDefault():
        model = build()
    n = 0
    for mod in model.modules():
        for name, p in list(mod.named_parameters(recurse=False)):
            setattr(mod, name, nn.Parameter(torch.full((), 0.01).expand(p.shape)))
            n += p.numel()
    return model, n


class _MetaDefault:
    """torch 1.13 has no `with torch.device(...)`: build modules with
    device='meta' by patching the default tensor factory for parameters."""

    def __enter__(self):
        self.saved = nn.Parameter.__new__

        def meta_param(cls, data=None, requires_grad=True):
            if data is not None and data.device.type != "meta":
                data = torch.empty(data.shape, dtype=data.dtype, device="meta")
            return self.saved(cls, data, requires_grad)
        nn.Parameter.__new__ = meta_param
        return self

    def __exit__(self, *a):
        nn.Parameter.__new__ = self.saved


def run(cmd, **kw):
    t0 = time.time()
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, **kw)
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
    if p.returncode != 0:
        sys.stderr.write(f"command failed ({p.returncode}): {' '.join(cmd)}\n{p.stdout[-4000:]}\n")
        sys.exit(1)
    return p.stdout, time.time() - t0, cpu


def export(name, work, bin_dir, trace_seq=8, batch=None, seq=None):
    """Traces shape-only model `name` of MODELS at sequence `trace_seq` into
    WORK/NAME.pt and imports it at its full shape (or `batch`, `seq`) into
    WORK/NAME.mlir (the forward step, no weights). Prints what it built and
    returns (the .mlir path, the number of parameters). Also used by
    bench/planner/realistic.py."""
    build, b0, s0, vocab, _ = MODELS[name]
    batch, seq = batch or b0, seq or s0
    w = lambda s: os.path.join(work, name + s)
    t0 = time.time()
    model, nparams = shape_only(build)
    model.train()
    x = torch.zeros(1, trace_seq, dtype=torch.long)
    with torch.no_grad():
        traced = torch.jit.trace(model, (x, x), check_trace=False)
    traced.save(w(".pt"))
    print(f"{name}: {nparams / 1e9:.2f} B parameters ({nparams * 4 / 1e9:.1f} GB fp32), "
          f"traced at seq {trace_seq} in {time.time() - t0:.1f} s, "
          f"{os.path.getsize(w('.pt')) / 1e3:.0f} kB on disk", flush=True)
    _, t_imp, _ = run([os.path.join(bin_dir, "offload-import"), w(".pt"),
                       "--input", f"x={batch}x{seq}xi64", "--input", f"y={batch}x{seq}xi64",
                       "-o", w(".mlir")])
    print(f"{name}: batch {batch}, seq {seq}: imported in {t_imp:.1f} s", flush=True)
    return w(".mlir"), nparams


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bin", required=True, help="folder of offload-import and offload-opt")
    ap.add_argument("--work", required=True, help="folder for the shape-only models and steps")
    ap.add_argument("--models", default="llama2-7b,gpt2-xl",
                    help="comma-separated shape-only models of MODELS (default %(default)s; "
                         "also gpt2-124m, llama3-8b)")
    ap.add_argument("--trace-seq", type=int, default=8,
                    help="sequence length of the trace; the step is imported at the model's "
                         "full length (default %(default)s)")
    ap.add_argument("--target", default="h100-sxm", help="target GPU of the cost model: h100-sxm, h100-pcie, a100-80g, a100-40g, l4, rtx-4090, or a target JSON file (default %(default)s)")
    args = ap.parse_args()
    os.makedirs(args.work, exist_ok=True)
    opt = os.path.join(args.bin, "offload-opt")
    for name in args.models.split(","):
        build, batch, seq, vocab, budgets = MODELS[name]
        w = lambda s: os.path.join(args.work, name + s)
        export(name, args.work, args.bin, args.trace_seq)
        out, t_ad, _ = run([opt, w(".mlir"), "--offload-autodiff=optimizer=adamw lr=1e-4",
                            "--offload-memory-report", "-o", w(".step.mlir")])
        ops = sum(1 for line in open(w(".step.mlir")) if re.match(r"\s+(%\S+ = )?offload\.", line))
        peak = int(re.search(r"peak device bytes: (\d+)", out).group(1))
        arena = int(re.search(r"device arena bytes: (\d+)", out).group(1))
        print(f"{name}: training step "
              f"(AdamW) with ~{ops} ops built in {t_ad:.1f} s; unplanned peak {peak / 1e9:.1f} GB, "
              f"device arena {arena / 1e9:.1f} GB", flush=True)
        for budget in budgets:
            out, wall, cpu = run([opt, w(".step.mlir"),
                                  f"--offload-plan-memory=budget={budget} target={args.target} report=-",
                                  "-o", w(f".{budget}.mlir")])
            dec = re.search(r"decisions: (.*)", out).group(1)
            ar = re.search(r"device arena: (\d+) -> (\d+) bytes", out)
            st = re.search(r"simulated step time on \S+: (\S+) s -> (\S+) s \(([-+0-9.]+%)\)", out)
            sl = re.search(r"slicing: (.*)", out)
            print(f"{name} @ {budget} on {args.target}: device arena {int(ar.group(1)) / 1e9:.1f} -> "
                  f"{int(ar.group(2)) / 1e9:.1f} GB; simulated step {st.group(1)} s -> {st.group(2)} s "
                  f"({st.group(3)}); planning: offload-opt {wall:.1f} s wall, {cpu:.1f} s CPU", flush=True)
            print(f"    {dec}" + (f"\n    slicing: {sl.group(1)}" if sl else ""), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
