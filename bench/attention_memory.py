#!/usr/bin/env python3
"""The unplanned device arena of a GPT-2-shaped step, fused attention against
spelled-out attention, side by side (issue 28's peak-memory target).

    OFFLOAD_BIN=build/bin PYTHONPATH=build/python scripts/torch2-python \\
        bench/attention_memory.py [--layers 2] [--seq 1024] [--batch 1]

The model is HuggingFace's GPT2LMHeadModel at GPT-2 small's width (768, 12
heads) with `--layers` blocks, a 1,024-token vocabulary and the sequence
length `--seq`, built from its config class (no download), dropout 0, its
own loss from `labels`. With attn_implementation="sdpa" the importer makes
each block's attention one offload.attention (saving q, k, v, out and the
row log-sum-exp); with "eager" GPT-2 spells it out (matmul, mask, softmax,
matmul), and the step saves the probabilities. Each is compiled with
offload.compile (torch.export, SGD, no budget: the unplanned step); the
printed figures are the unplanned device arenas in bytes, their
difference, and the bytes of the attention matrices (layers x batch x
heads x T x T x 4), which the difference must exceed.
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


def arena(attn, layers, seq, batch):
    import transformers as T
    torch.manual_seed(0)
    cfg = T.GPT2Config(n_layer=layers, n_embd=768, n_head=12, vocab_size=1024,
                       n_positions=seq, resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0,
                       use_cache=False, bos_token_id=0, eos_token_id=0,
                       attn_implementation=attn)
    model = Loss(T.GPT2LMHeadModel(cfg))
    ids = torch.randint(0, 1024, (batch, seq))
    with tempfile.TemporaryDirectory() as d:
        step = offload.compile(model, (ids, ids.clone()), loss=None, verbose=False, workdir=d)
        return step.unplanned_arena_bytes


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--seq", type=int, default=1024)
    ap.add_argument("--batch", type=int, default=1)
    a = ap.parse_args()
    fused = arena("sdpa", a.layers, a.seq, a.batch)
    unfused = arena("eager", a.layers, a.seq, a.batch)
    matrices = a.layers * a.batch * 12 * a.seq * a.seq * 4
    print(f"GPT-2 width 768, 12 heads, {a.layers} layers, batch {a.batch}, T = {a.seq}, fp32")
    print(f"  unplanned arena, spelled-out attention: {unfused:>14,} bytes")
    print(f"  unplanned arena, fused attention:       {fused:>14,} bytes")
    print(f"  difference:                             {unfused - fused:>14,} bytes")
    print(f"  attention matrices (L x B x H x T x T): {matrices:>14,} bytes")
    print(f"  difference / matrices: {(unfused - fused) / matrices:.2f} "
          f"({'meets' if unfused - fused >= matrices else 'misses'} issue 28's target)")


if __name__ == "__main__":
    main()
