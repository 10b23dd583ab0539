#!/usr/bin/python3
"""Train a classifier of handwritten digits under a device-memory budget.

The data: scikit-learn's digits (1,797 8x8 grey images of 0-9; no download),
read from the CSV file Debian's python3-sklearn ships (the file
sklearn.datasets.load_digits reads), so the PyTorch 2.x environment, which
has no scikit-learn, runs the example too. The model: an MLP 64-256-256-256-10 with ReLU.
The step: cross-entropy, SGD (lr 0.05, momentum 0.9), batch 64, compiled by
offload.compile for a budget of --budget-fraction (default 0.5) of the device
arena the unplanned step needs, and run on the host backend with a simulated
device of exactly the budget.

The same model from the same initial weights is trained by PyTorch's own loop
(torch.optim.SGD) on the same batches in the same order. The example checks,
and exits 1 otherwise:
  * the loss curves agree: |ours - torch| <= TOL * max(1, |torch|) at every
    step, TOL = 1e-5 (--tolerance). Both are fp32 with the same math in a
    possibly different summation order; measured here: at most 4.8e-7 over
    the 300 steps (the largest is printed), and the same test accuracy;
  * the budget holds: the measured peak device bytes equal the planned peak
    and are <= the budget (the host backend refuses a plan whose arena
    exceeds the device it was given, so a completed run proves the bound).
It writes loss_curves.png (both curves and their difference) and
memory.png (step.plot_memory()) into --out.

On PyTorch 1.13 the model is exported with torch.jit.trace (TorchScript), on
PyTorch 2.x with torch.export (a .pt2); --exporter overrides offload.compile's
choice ("auto").

Usage (from the build directory, or with PYTHONPATH=BUILD/python):
  PYTHONPATH=python /usr/bin/python3 ../examples/python/train_digits.py \
      [--steps 300] [--budget-fraction 0.5] [--out digits-out] [--progress]
  PYTHONPATH=python ../scripts/torch2-python ../examples/python/train_digits.py
"""
import argparse
import copy
import os
import sys
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

import offload


# Where Debian's python3-sklearn keeps the digits (scikit-learn's own copy is
# searched when it is importable and this file is not there).
DIGITS_CSV = "/usr/lib/python3/dist-packages/sklearn/datasets/data/digits.csv.gz"


def digits_csv():
    """The path of scikit-learn's digits.csv.gz: $OFFLOAD_DIGITS_CSV, Debian's
    python3-sklearn's, else the importable scikit-learn's. FileNotFoundError
    naming the places looked at."""
    candidates = [os.environ.get("OFFLOAD_DIGITS_CSV"), DIGITS_CSV]
    try:
        import sklearn.datasets
        candidates.append(os.path.join(os.path.dirname(sklearn.datasets.__file__), "data",
                                       "digits.csv.gz"))
    except ImportError:
        pass
    for path in candidates:
        if path and os.path.isfile(path):
            return path
    raise FileNotFoundError("scikit-learn's digits.csv.gz not found (looked at " +
                            ", ".join(p for p in candidates if p) + "); install Debian's "
                            "python3-sklearn or set OFFLOAD_DIGITS_CSV")


def digits(seed):
    """(x_train [N,64] f32, y_train [N] i64, x_test, y_test): pixels scaled to
    [0, 1], a fixed 80/20 split. The rows of digits.csv.gz are 64 pixels
    (0..16) and the class, as sklearn.datasets.load_digits reads them."""
    data = np.loadtxt(digits_csv(), delimiter=",")
    x = torch.tensor(data[:, :-1] / 16.0, dtype=torch.float32)
    y = torch.tensor(data[:, -1].astype(np.int64), dtype=torch.int64)
    perm = torch.randperm(len(x), generator=torch.Generator().manual_seed(seed))
    x, y = x[perm], y[perm]
    n = int(0.8 * len(x))
    return x[:n], y[:n], x[n:], y[n:]


def batches(x, y, batch, steps, seed):
    """`steps` batches of exactly `batch` rows, reshuffled every epoch (the
    compiled step has fixed shapes: the last partial batch is dropped)."""
    g = torch.Generator().manual_seed(seed)
    out = []
    while len(out) < steps:
        perm = torch.randperm(len(x), generator=g)
        for i in range(0, len(x) - batch + 1, batch):
            idx = perm[i:i + batch]
            out.append((x[idx].contiguous(), y[idx].contiguous()))
            if len(out) == steps:
                break
    return out


def progress(i, n, loss, width=30):
    done = (i + 1) * width // n
    sys.stderr.write(f"\r  [{'#' * done}{'.' * (width - done)}] step {i + 1}/{n} "
                     f"loss {loss:.4f}")
    if i + 1 == n:
        sys.stderr.write("\n")
    sys.stderr.flush()


def accuracy(model, x, y):
    model.eval()
    with torch.no_grad():
        acc = float((model(x).argmax(1) == y).float().mean())
    model.train()
    return acc


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--budget-fraction", type=float, default=0.5,
                    help="budget as a fraction of the unplanned step's device arena")
    ap.add_argument("--tolerance", type=float, default=1e-5)
    ap.add_argument("--out", default="digits-out")
    ap.add_argument("--progress", action="store_true", help="a progress bar over the steps")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--exporter", default="auto", choices=["auto", "export", "torchscript"],
                    help="offload.compile's exporter (auto: torch.export on PyTorch 2.x, "
                    "TorchScript on 1.x)")
    args = ap.parse_args()
    torch.set_num_threads(1)
    os.makedirs(args.out, exist_ok=True)

    xtr, ytr, xte, yte = digits(args.seed)
    torch.manual_seed(args.seed)
    model = nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(),
                          nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 10))
    reference = copy.deepcopy(model)
    data = batches(xtr, ytr, args.batch, args.steps, args.seed)
    opt = offload.SGD(lr=0.05, momentum=0.9)
    print(f"digits: {len(xtr)} training / {len(xte)} test images, {args.steps} steps of "
          f"batch {args.batch}, PyTorch {torch.__version__}")

    # The unplanned step's arena, then the step for a budget below it.
    free = offload.compile(copy.deepcopy(model), data[0], optimizer=opt,
                           exporter=args.exporter, verbose=False)
    unplanned = free.unplanned_arena_bytes
    print(f"compile without a budget ({free.exporter}, the process's first): " + ", ".join(
        f"{k} {v:.2f} s" for k, v in free.stage_seconds.items()) +
        f"; total {sum(free.stage_seconds.values()):.2f} s")
    del free
    budget = int(unplanned * args.budget_fraction)
    print(f"unplanned device arena: {unplanned} bytes; budget: {budget} bytes "
          f"({args.budget_fraction:.0%})")
    step = offload.compile(model, data[0], loss="cross_entropy", optimizer=opt,
                           budget=budget, target="h100-sxm", threads=1, exporter=args.exporter)
    print(f"compile with the budget ({step.exporter}): " + ", ".join(
        f"{k} {v:.2f} s" for k, v in step.stage_seconds.items()) +
        f"; total {sum(step.stage_seconds.values()):.2f} s")
    print("the planner's decisions:")
    print("\n".join("  " + line for line in step.report.rstrip().splitlines()))

    t0 = time.perf_counter()
    ours = []
    for i, (x, y) in enumerate(data):
        ours.append(step(x, y))
        if args.progress:
            progress(i, len(data), ours[-1])
    t_ours = time.perf_counter() - t0
    model.load_state_dict(step.state_dict())

    t0 = time.perf_counter()
    torch_opt = opt.torch(reference.parameters())
    theirs = []
    for i, (x, y) in enumerate(data):
        torch_opt.zero_grad()
        loss = F.cross_entropy(reference(x), y)
        loss.backward()
        torch_opt.step()
        theirs.append(float(loss))
    t_torch = time.perf_counter() - t0

    ours, theirs = np.array(ours), np.array(theirs)
    diff = np.abs(ours - theirs) / np.maximum(1.0, np.abs(theirs))
    worst = int(np.argmax(diff))
    print(f"loss: first {ours[0]:.5f} (torch {theirs[0]:.5f}), last {ours[-1]:.5f} "
          f"(torch {theirs[-1]:.5f})")
    print(f"largest |ours - torch| / max(1, |torch|): {diff[worst]:.2e} at step {worst} "
          f"(tolerance {args.tolerance:g}); last step |ours - torch|: "
          f"{abs(ours[-1] - theirs[-1]):.2e}")
    print(f"test accuracy: offload {accuracy(model, xte, yte):.4f}, "
          f"torch {accuracy(reference, xte, yte):.4f}")
    print(f"time for {len(data)} steps: offload host backend {t_ours:.2f} s, "
          f"PyTorch eager {t_torch:.2f} s")
    measured, planned = step.measured_peak_device_bytes, step.planned_peak_device_bytes
    print(f"peak device bytes: planned {planned}, measured {measured}, budget {budget}, "
          f"unplanned arena {unplanned}")

    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, (a, b) = plt.subplots(2, 1, figsize=(8, 6), sharex=True,
                               gridspec_kw={"height_ratios": [3, 1]})
    a.plot(theirs, label="PyTorch (torch.optim.SGD)", linewidth=2.5, alpha=0.6)
    a.plot(ours, label=f"offload, budget {budget} B ({args.budget_fraction:.0%})",
           linewidth=1)
    a.set_ylabel("cross-entropy")
    a.set_title("digits MLP: training loss")
    a.legend()
    b.semilogy(np.maximum(diff, 1e-12))
    b.axhline(args.tolerance, color="red", linestyle="--", label="tolerance")
    b.set_ylabel("relative difference")
    b.set_xlabel("step")
    b.legend()
    fig.tight_layout()
    fig.savefig(os.path.join(args.out, "loss_curves.png"), dpi=100)
    step.plot_memory(title=f"digits MLP step under a {budget}-byte budget").savefig(
        os.path.join(args.out, "memory.png"), dpi=100)
    print(f"figures: {args.out}/loss_curves.png, {args.out}/memory.png")

    ok = True
    if not diff.max() <= args.tolerance:
        print("FAIL: the loss curves differ beyond the tolerance")
        ok = False
    if not (measured == planned <= budget < unplanned):
        print("FAIL: the budget did not hold (or was not below the unplanned arena)")
        ok = False
    print("ok: curves match and the budget held" if ok else "example failed")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
