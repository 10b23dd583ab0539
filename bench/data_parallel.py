#!/usr/bin/env python3
"""Figures of docs/data_parallel.md: data parallel on the host backend.

    PYTHONPATH=python /usr/bin/python3 bench/data_parallel.py --bin build/bin --work DIR
        [--models mlp,transformer,resnet18] [--steps 6]

Per model, at a local batch B (export_models' default batch):
  peak device bytes of the step without data parallel, with it (DDP's 25 MiB
  buckets), and with it after --offload-early-update at 25 MiB and 1 MiB
  buckets (planned = measured is checked by offload-run on every run);
  host step time (median of the steps after the first) of 1 rank x the full
  batch 2B against 2 ranks x B each (2 offload-run processes over loopback,
  gloo; early updates, each bucket size), and per rank the all-reduce
  (communication stream) busy seconds and
  the share of them spent while the compute stream was busy (hidden under
  backward), from offload-run's per-step line.
The machine's cores are shared with other work: read the times as this
machine's, not as a benchmark.
"""
import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile

import numpy as np

import export_models as em

BATCH = {"mlp": 32, "transformer": 8, "resnet18": 16}


def run(cmd, **kw):
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                       timeout=600, **kw)
    if r.returncode != 0:
        sys.exit("command failed: " + " ".join(cmd) + "\n" + r.stdout)
    return r.stdout


def step_stats(log):
    """(median step seconds after the first, comm busy, comm under compute)."""
    t = [float(v) for v in re.findall(r"^step \d+: loss \S+\s+time (\S+) s", log, re.M)]
    comm = [(float(a), float(b)) for a, b in
            re.findall(r"comm (\S+) s \((\S+) s under compute\)", log)]
    med = statistics.median(t[1:] if len(t) > 1 else t)
    busy = statistics.median([c[0] for c in comm[1:]]) if len(comm) > 1 else 0.0
    hidden = statistics.median([c[1] for c in comm[1:]]) if len(comm) > 1 else 0.0
    return med, busy, hidden


def peak(log):
    m = re.search(r"peak device bytes: planned (\d+) measured (\d+)", log)
    assert m and m.group(1) == m.group(2), log
    return int(m.group(1))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bin", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--models", default="mlp,transformer,resnet18")
    ap.add_argument("--steps", type=int, default=6)
    a = ap.parse_args()
    os.makedirs(a.work, exist_ok=True)
    tool = lambda n: os.path.join(a.bin, n)
    print("| model | local batch B | buckets | peak, no DP | peak, DP (25 MiB) | "
          "peak, DP + early update | 1 rank x 2B step | 2 ranks x B step | all-reduce busy "
          "| hidden under compute |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for model in a.models.split(","):
        B = BATCH[model]
        w = lambda n: os.path.join(a.work, f"{model}-{n}")
        plans = {}
        for batch in (B, 2 * B):
            d = w(f"b{batch}")
            os.makedirs(d, exist_ok=True)
            run([sys.executable, "-m", "export_models", "--out", d, "--models", model,
                 "--batch", str(batch)])
            x, y = em.make_inputs(model, batch)
            imp = [tool("offload-import"), os.path.join(d, model + ".pt"), "-o",
                   os.path.join(d, "m.mlir"), "--loss", "cross_entropy",
                   "--input", "x=" + em.type_string(x), "--input", "y=" + em.type_string(y)]
            run(imp)
            variants = {"single": []} if batch == 2 * B else {
                "single": [], "dp": ["--offload-data-parallel"],
                "dp-early": ["--offload-early-update", "--offload-data-parallel"],
                "dp-early-1m": ["--offload-early-update",
                                "--offload-data-parallel=bucket-bytes=1048576"]}
            for name, passes in variants.items():
                run([tool("offload-opt"), os.path.join(d, "m.mlir"),
                     "--offload-autodiff=optimizer=sgd lr=0.01 momentum=0.9"] + passes
                    + ["-o", os.path.join(d, name + ".mlir")])
                run([tool("offload-translate"), "--offload-to-plan", os.path.join(d, name + ".mlir"),
                     "-o", os.path.join(d, name + ".oflp")])
                plans[(batch, name)] = os.path.join(d, name + ".oflp")
        xg, yg = em.make_inputs(model, 2 * B)
        np.savez(w("full.npz"), x=xg.numpy(), y=yg.numpy())
        for r in range(2):
            np.savez(w(f"half{r}.npz"), x=xg[r * B:(r + 1) * B].numpy(),
                     y=yg[r * B:(r + 1) * B].numpy())
        params = os.path.join(w(f"b{B}"), model + ".params.npz")
        base = [tool("offload-run"), "--params", params, "--steps", str(a.steps)]
        peaks = {n: peak(run(base + [plans[(B, n)], "--steps", "1", "--inputs", w("half0.npz")]))
                 for n in ("single", "dp", "dp-early", "dp-early-1m")}
        one = step_stats(run(base + [plans[(2 * B, "single")], "--inputs", w("full.npz")]))
        for variant, label in (("dp-early", "25 MiB"), ("dp-early-1m", "1 MiB")):
            rdzv = tempfile.mkdtemp(prefix="rdzv-", dir=a.work)
            procs = [subprocess.Popen(base + [plans[(B, variant)], "--inputs", w(f"half{r}.npz"),
                                              "--world-size", "2", "--rank", str(r),
                                              "--rendezvous", "file:" + rdzv],
                                      stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
                     for r in range(2)]
            logs = [p.communicate(timeout=600)[0] for p in procs]
            if any(p.returncode for p in procs):
                sys.exit("\n".join(logs))
            two = [step_stats(l) for l in logs]
            step2 = max(t[0] for t in two)
            busy = statistics.mean(t[1] for t in two)
            hidden = statistics.mean(t[2] for t in two)
            print(f"| {model} | {B} | {label} | {peaks['single']} | {peaks['dp']} | "
                  f"{peaks[variant]} | {one[0] * 1e3:.2f} ms | {step2 * 1e3:.2f} ms | "
                  f"{busy * 1e3:.2f} ms | {100 * hidden / busy if busy else 0:.0f}% |")
            shutil.rmtree(rdzv, ignore_errors=True)


if __name__ == "__main__":
    main()
