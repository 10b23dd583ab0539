#!/usr/bin/env python3
"""The unplanned device arena of a GPT-2-shaped step, fused attention (in the
token layout and in the head layout) against spelled-out attention, side by
side (issue 28's peak-memory target).

    OFFLOAD_BIN=build/bin PYTHONPATH=build/python scripts/torch2-python \\
        bench/attention_memory.py [--layers 2] [--seq 1024] [--batch 1]

The model is HuggingFace's GPT2LMHeadModel at GPT-2 small's width (768, 12
heads) with `--layers` blocks, a 1,024-token vocabulary and the sequence
length `--seq`, built from its config class (no download), dropout 0, its
own loss from `labels`. With attn_implementation="sdpa" the importer makes
each block's attention one offload.attention (saving q, k, v, out and the
row log-sum-exp): in the token layout (layout blhd, offload.compile's
default on the host: GPT-2's q/k/v.view(B, T, H, E).transpose(1, 2) and
out.transpose(1, 2) folded into the op, so its output is the buffer the
output projection reads) and in the head layout (attention_layout="bhld":
the transposes kept, the output saved twice, as attention's [B, H, T, E]
and as c_proj's [B, T, H·E] input). With "eager" GPT-2 spells attention out
(matmul, mask, softmax, matmul), kept so (fuse_attention=False, else the
importer fuses it too), and the step saves the probabilities. Each is
compiled with offload.compile (torch.export, SGD, no budget: the unplanned
step); the printed figures are the unplanned device arenas in bytes, their
differences from the spelled-out step, and the bytes of the attention
matrices (layers x batch x heads x T x T x 4), which the difference must
exceed.
"""
import argparse
import tempfile
import warnings

import torch

import offload

warnings.simplefilter("ignore")


class Loss(torch.nn.Module):
    def __init__(self, model):
        super().__init__()
        self.m = model

    def forward(self, ids, labels):
        return self.m(input_ids=ids, labels=labels, return_dict=True).loss


def arena(attn, layers, seq, batch, layout="blhd", fuse=True):
    import transformers as T
    torch.manual_seed(0)
    cfg = T.GPT2Config(n_layer=layers, n_embd=768, n_head=12, vocab_size=1024,
                       n_positions=seq, resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0,
                       use_cache=False, bos_token_id=0, eos_token_id=0,
                       attn_implementation=attn)
    model = Loss(T.GPT2LMHeadModel(cfg))
    ids = torch.randint(0, 1024, (batch, seq))
    with tempfile.TemporaryDirectory() as d:
        step = offload.compile(model, (ids, ids.clone()), loss=None, verbose=False, workdir=d,
                               attention_layout=layout, fuse_attention=fuse)
        return step.unplanned_arena_bytes


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--seq", type=int, default=1024)
    ap.add_argument("--batch", type=int, default=1)
    a = ap.parse_args()
    unfused = arena("eager", a.layers, a.seq, a.batch, fuse=False)
    heads = arena("sdpa", a.layers, a.seq, a.batch, "bhld")
    tokens = arena("sdpa", a.layers, a.seq, a.batch, "blhd")
    matrices = a.layers * a.batch * 12 * a.seq * a.seq * 4
    print(f"GPT-2 width 768, 12 heads, {a.layers} layers, batch {a.batch}, T = {a.seq}, fp32")
    print(f"  attention matrices (L x B x H x T x T x 4): {matrices:>16,} bytes")
    print(f"  {'unplanned arena':<34} {'bytes':>16} {'spelled out - it':>16} {'/ matrices':>10}")
    for name, b in (("spelled-out attention", unfused),
                    ("fused, head layout (bhld)", heads),
                    ("fused, token layout (blhd)", tokens)):
        d = unfused - b
        print(f"  {name:<34} {b:>16,} {d:>16,} {d / matrices:>10.2f}")
    d = unfused - tokens
    print(f"  fused (token layout) saves {d / matrices:.2f}x the attention matrices: "
          f"{'meets' if d >= matrices else 'misses'} issue 28's target")


if __name__ == "__main__":
    main()
