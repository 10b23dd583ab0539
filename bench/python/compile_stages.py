#!/usr/bin/python3
"""offload.compile's stage times for examples/python/train_digits.py's step,
with PyTorch 1.13 (TorchScript) and PyTorch 2.x (torch.export).

For each interpreter (default: /usr/bin/python3 with Debian's PyTorch 1.13 and
scripts/torch2-python with PyTorch 2.15) this runs --repeats fresh processes;
each compiles the digits MLP (64-256-256-256-10, batch 64, SGD momentum)
twice: without a budget (the process's first compile: "cold", PyTorch's
exporter warms up) and with the example's budget of half the unplanned arena
("warm"). It prints the median wall seconds per stage (export, import,
autodiff, plan, lower; plan only with a budget) as a table, and the start-up
time of the offload-import process alone (`--version`), which is most of the
import stage for a small model.

Usage (from the checkout, after the build):
  /usr/bin/python3 bench/python/compile_stages.py [--repeats 3] [--build build]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
STAGES = ["export", "import", "autodiff", "plan", "lower"]


def worker():
    """One process: the example's two compiles; prints one JSON line."""
    import copy
    import torch
    import torch.nn as nn
    import offload
    import train_digits as td  # examples/python, on the PYTHONPATH main() gives
    torch.set_num_threads(1)
    xtr, ytr, _, _ = td.digits(0)
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(),
                          nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 10))
    x, y = xtr[:64].contiguous(), ytr[:64].contiguous()
    opt = offload.SGD(lr=0.05, momentum=0.9)
    free = offload.compile(copy.deepcopy(model), (x, y), optimizer=opt, verbose=False)
    budget = free.unplanned_arena_bytes // 2
    planned = offload.compile(model, (x, y), optimizer=opt, budget=budget, target="h100-sxm",
                              threads=1, verbose=False)
    print(json.dumps({"torch": torch.__version__, "exporter": free.exporter,
                      "cold": free.stage_seconds, "warm": planned.stage_seconds}))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--interpreters", default="/usr/bin/python3," +
                    os.path.join(ROOT, "scripts", "torch2-python"))
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.worker:
        worker()
        return 0
    # The workers import offload (the build's python/) and the example
    # (examples/python) from PYTHONPATH.
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
                   [os.path.join(a.build, "python"), os.path.join(ROOT, "examples", "python")]),
               OFFLOAD_BIN=os.path.join(a.build, "bin"))
    rows = []
    for interp in a.interpreters.split(","):
        runs = []
        for _ in range(a.repeats):
            r = subprocess.run([interp, os.path.abspath(__file__), "--worker"], env=env,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            if r.returncode:
                print(f"{interp}: failed:\n{r.stderr[-2000:]}", file=sys.stderr)
                return 1
            runs.append(json.loads(r.stdout.strip().splitlines()[-1]))
        for which in ("cold", "warm"):
            med = {s: statistics.median(run[which].get(s, float("nan")) for run in runs)
                   for s in STAGES}
            total = statistics.median(sum(run[which].values()) for run in runs)
            rows.append((runs[0]["torch"], runs[0]["exporter"], which, med, total))
    starts = []
    for _ in range(a.repeats):
        t0 = time.perf_counter()
        subprocess.run([os.path.join(a.build, "bin", "offload-import"), "--version"],
                       stdout=subprocess.DEVNULL, check=True)
        starts.append(time.perf_counter() - t0)

    print(f"offload.compile stage times, digits MLP, median of {a.repeats} processes "
          f"(seconds; load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores)")
    print("| PyTorch | exporter | compile | " + " | ".join(STAGES) + " | total |")
    print("|---|---|---|" + "---:|" * (len(STAGES) + 1))
    for torch_v, exporter, which, med, total in rows:
        cells = ["-" if med[s] != med[s] else f"{med[s]:.2f}" for s in STAGES]
        label = "first (no budget)" if which == "cold" else "second (budget 50%)"
        print(f"| {torch_v} | {exporter} | {label} | " + " | ".join(cells) + f" | {total:.2f} |")
    print(f"offload-import process start alone (--version): "
          f"{statistics.median(starts):.2f} s (median)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
