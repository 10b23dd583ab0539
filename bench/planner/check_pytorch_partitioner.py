#!/usr/bin/python3
"""ctest `bench.pytorch-partitioner`: runs pytorch_partitioner.py --quick and checks its table.

    PYTHONPATH=python /usr/bin/python3 bench/planner/check_pytorch_partitioner.py --bin build/bin
        [--work DIR]

Exits 77 (ctest's skip code, SKIP_RETURN_CODE) with the reason when the
PyTorch 2.x environment (scripts/setup-torch2.sh) is missing. Otherwise runs
the quick mode (mlp; activation_memory_budget 1.0, 0.5, 0.0) and checks, for
every row of its table:
  * PyTorch's saved bytes fall (weakly) as the fraction falls, and are 0 at
    fraction 0.0 only if nothing else is saved;
  * recomputed FLOPs are non-negative on both sides, and 0 on both at 1.0
    (PyTorch's partitioner does not recompute matmuls at the full budget; our
    step is not planned when PyTorch saves at least as much as we do);
  * PyTorch's recomputed FLOPs never exceed the forward's matmul FLOPs,
    2 * batch * sum(in * out) over mlp's three Linear layers (what
    recomputing everything costs), and equal them at 0.0;
  * each matched plan of ours (on each of the three targets) keeps at most
    PyTorch's saved bytes;
  * the "less" column names the side with fewer recomputed FLOPs.
"""
import argparse
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SKIP = 77


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bin", default=os.path.join(ROOT, "build", "bin"),
                    help="folder of offload-import and offload-opt (default: build/bin)")
    ap.add_argument("--work", default="/tmp/offload-pytorch-partitioner-check",
                    help="scratch folder (default %(default)s)")
    args = ap.parse_args()
    venv = os.environ.get("OFFLOAD_TORCH2_VENV", os.path.join(ROOT, ".venv-torch2"))
    if not os.access(os.path.join(venv, "bin", "python"), os.X_OK):
        print(f"SKIP: {venv} has no python; run scripts/setup-torch2.sh for PyTorch's partitioner")
        return SKIP
    r = subprocess.run([os.path.join(ROOT, "scripts", "torch2-python"),
                        os.path.join(ROOT, "bench", "planner", "pytorch_partitioner.py"),
                        "--quick", "--bin", args.bin, "--work", args.work],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    print(r.stdout)
    if r.returncode != 0:
        print(f"FAIL: pytorch_partitioner.py --quick exited {r.returncode}")
        return 1
    if "No module named 'torchvision'" in r.stdout:
        print("SKIP: torchvision missing; run scripts/setup-torch2.sh")
        return SKIP
    row = re.compile(r"^\s+(\d\.\d)\s+(\d+)\s+(-?\d+) \|(.*)$", re.M)
    cell = re.compile(r"^\s*(\d+)\*?\s+(\d+)\s+(-?\d+)\s+(\d+)\s+(ours|PYTORCH|=)\s*$")
    rows = row.findall(r.stdout)
    errors = []
    if [f for f, *_ in rows] != ["1.0", "0.5", "0.0"]:
        errors.append(f"expected rows for fractions 1.0, 0.5, 0.0, got {[f for f, *_ in rows]}")
    # mlp: Linear(64,128), Linear(128,128), Linear(128,10) at batch 32.
    forward_matmul = 2 * 32 * (64 * 128 + 128 * 128 + 128 * 10)
    prev = None
    for frac, saved, flops, rest in rows:
        saved, flops = int(saved), int(flops)
        if prev is not None and saved > prev:
            errors.append(f"{frac}: PyTorch saved bytes rose from {prev} to {saved}")
        prev = saved
        if not 0 <= flops <= forward_matmul:
            errors.append(f"{frac}: PyTorch recomputed FLOPs {flops} outside [0, {forward_matmul}]")
        if frac == "1.0" and flops != 0:
            errors.append(f"1.0: PyTorch recomputes {flops} matmul FLOPs at the full budget")
        if frac == "0.0" and flops != forward_matmul:
            errors.append(f"0.0: PyTorch recomputes {flops} FLOPs, not the forward's {forward_matmul}")
        cells = rest.split("  non-monotonic")[0].split("|")
        if len(cells) != 3:
            errors.append(f"{frac}: expected three targets of ours (h100-sxm, h100-slowlink, "
                          f"h100-flops), got {len(cells)}")
        for c in cells:
            m = cell.match(c)
            if not m:
                if "unmatched" not in c:
                    errors.append(f"{frac}: unreadable cell {c.strip()!r}")
                continue
            budget, kept, ours, off, less = m.groups()
            kept, ours = int(kept), int(ours)
            if kept > saved:
                errors.append(f"{frac}: our plan at {budget} keeps {kept} > PyTorch's {saved} bytes")
            if not 0 <= ours <= forward_matmul:
                errors.append(f"{frac}: our recomputed FLOPs {ours} outside [0, {forward_matmul}]")
            if frac == "1.0" and ours != 0:
                errors.append(f"1.0: we recompute {ours} FLOPs where PyTorch saves all")
            want = "ours" if ours < flops else "PYTORCH" if ours > flops else "="
            if less != want:
                errors.append(f"{frac}: 'less' says {less}, the FLOPs say {want}")
    for e in errors:
        print("FAIL:", e)
    if not errors:
        print(f"PASS: {len(rows)} rows checked")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
