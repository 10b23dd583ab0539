#!/usr/bin/env python3
"""Fused attention (offload.attention) against the unfused ops, side by side.

    OFFLOAD_BIN=build/bin PYTHONPATH=build/python scripts/torch2-python \\
        bench/attention_step.py [--lengths 256,2048] [--threads 1] [--rounds 5]

For each sequence length T: two one-layer steps whose parameters are q, k and
v [2, 4, T, 64] and whose loss is sum(attention(q, k, v) * w), causal. One
calls F.scaled_dot_product_attention (imported as one offload.attention and
its backward), the other spells attention out (matmul, masked_fill,
softmax, matmul: what the importer keeps of a model that writes it by hand).
Both are compiled with offload.compile (torch.export, SGD, host backend,
`--threads` kernel threads) and stepped; the best of `--rounds` step times
of each is printed, with the ratio fused / unfused (issue 28's targets:
<= 1.5 at T = 256, < 1 at T = 2048).
"""
import argparse
import time
import warnings

import torch
import torch.nn as nn
import torch.nn.functional as F

import offload

warnings.simplefilter("ignore")


class Attention(nn.Module):
    def __init__(self, T, fused, heads=4, e=64):
        super().__init__()
        g = torch.Generator().manual_seed(0)
        self.q, self.k, self.v = (nn.Parameter(torch.randn(2, heads, T, e, generator=g))
                                  for _ in range(3))
        self.fused, self.scale = fused, e ** -0.5

    def forward(self, w):
        if self.fused:
            y = F.scaled_dot_product_attention(self.q, self.k, self.v, is_causal=True)
        else:
            T = self.q.shape[2]
            a = (self.q @ self.k.transpose(-2, -1)) * self.scale
            a = a.masked_fill(~torch.ones(T, T, dtype=torch.bool).tril(), float("-inf"))
            y = torch.softmax(a, -1) @ self.v
        return (y * w).sum()


def best_step_ms(T, fused, threads, rounds):
    m = Attention(T, fused)
    w = torch.randn(2, 4, T, 64)
    step = offload.compile(m, (w,), loss=None, verbose=False, threads=threads,
                           exporter="export")
    step(w)  # warm caches
    times = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        step(w)
        times.append(time.perf_counter() - t0)
    return min(times) * 1e3


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lengths", default="256,2048")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=5)
    a = ap.parse_args()
    print("| T | unfused step | fused step | fused / unfused |")
    print("|---|---|---|---|")
    for T in [int(t) for t in a.lengths.split(",")]:
        unfused = best_step_ms(T, False, a.threads, a.rounds)
        fused = best_step_ms(T, True, a.threads, a.rounds)
        print(f"| {T} | {unfused:.1f} ms | {fused:.1f} ms | {fused / unfused:.2f} |", flush=True)


if __name__ == "__main__":
    main()
