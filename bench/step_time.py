#!/usr/bin/env python3
"""Training-step time: offload's host backend vs LibTorch CPU, side by side.

    PYTHONPATH=python /usr/bin/python3 bench/step_time.py [--models resnet18,transformer] [--threads T]
        [--steps N] [--rounds R] [--bin build/bin]

For each model: exports it, builds the step (SGD with momentum: forward,
backward, update), runs N steps with offload-run --backend host and N steps
of the same model with torch.optim in this process (torch.set_num_threads(T),
the same T for both), and prints the median step time of each (first step
of every run excluded, it warms caches) and the ratio offload / LibTorch.
Target: <= 1.5. The two alternate R times (offload, LibTorch, offload, ...),
so that a slow spell of a shared machine lands on both sides alike.
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np
import torch
import torch.nn.functional as F

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
import export_models as em  # python/, on PYTHONPATH


def run(cmd):
    return subprocess.run(cmd, check=True, stdout=subprocess.PIPE, text=True).stdout


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default="resnet18,transformer")
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--bin", default=os.path.join(ROOT, "build", "bin"))
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    work = tempfile.mkdtemp(prefix="offload-bench-")
    print(f"threads {a.threads}, {a.rounds} alternating rounds of {a.steps} steps, "
          f"median of steps 2..{a.steps} of every round")
    print(f"{'model':12s} {'offload host':>14s} {'LibTorch CPU':>14s} {'ratio':>7s}")
    for m in a.models.split(","):
        run([sys.executable, os.path.join(ROOT, "python", "export_models.py"), "--out", work, "--models", m])
        prefix = os.path.join(work, m)
        meta = json.load(open(prefix + ".json"))
        imp = [os.path.join(a.bin, "offload-import"), prefix + ".pt", "-o", prefix + ".mlir"]
        for k, v in meta["inputs"].items():
            imp += ["--input", f"{k}={v}"]
        if not meta.get("returns_loss"):
            imp += ["--loss", meta["loss"]]
        run(imp)
        run([os.path.join(a.bin, "offload-opt"), prefix + ".mlir",
             "--offload-autodiff=optimizer=sgd lr=0.01 momentum=0.9",
             "-o", prefix + ".step.mlir"])
        run([os.path.join(a.bin, "offload-translate"), "--offload-to-plan", prefix + ".step.mlir",
             "-o", prefix + ".oflp"])
        ours, ref = [], []
        module = torch.jit.load(prefix + ".pt")
        em.load_state_arrays(module, em.load_params(prefix))
        x, y = em.load_inputs(prefix)
        module.train()
        opt = torch.optim.SGD(module.parameters(), lr=0.01, momentum=0.9)
        for _ in range(a.rounds):
            out = run([os.path.join(a.bin, "offload-run"), prefix + ".oflp", "--steps", str(a.steps),
                       "--threads", str(a.threads), "--params", prefix + ".params.npz",
                       "--inputs", prefix + ".inputs.npz"])
            ours += [float(t) for t in re.findall(r"time (\S+) s", out)][1:]
            times = []
            # The profiling executor re-optimizes the graph during the first
            # runs; run the plain interpreter, as reference.py does.
            ctx = torch.jit.optimized_execution(False)
            ctx.__enter__()
            for _ in range(a.steps):
                t0 = time.perf_counter()
                opt.zero_grad(set_to_none=True)
                loss = module(x, y) if meta["returns_loss"] else F.cross_entropy(module(x), y)
                loss.backward()
                opt.step()
                times.append(time.perf_counter() - t0)
            ctx.__exit__(None, None, None)
            ref += times[1:]
            if os.environ.get("OFFLOAD_BENCH_VERBOSE"):
                print(f"  round: offload {statistics.median(ours[-(a.steps - 1):]) * 1e3:.1f} ms, "
                      f"LibTorch {statistics.median(times[1:]) * 1e3:.1f} ms")
        o, r = statistics.median(ours), statistics.median(ref)
        print(f"{m:12s} {o * 1e3:11.1f} ms {r * 1e3:11.1f} ms {o / r:7.2f}")


if __name__ == "__main__":
    main()
