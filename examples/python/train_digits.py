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
(torch.optim.SGD) on the same batches in the same order, in fp32 and in
float64. The example checks, and exits 1 otherwise:
  * every one of our steps is as exact as PyTorch's: from our state before
    the step, PyTorch's float64 step is the oracle, and our loss and our
    parameter update may be at most 4 x as far from it as PyTorch fp32's step
    from the same state, or 1e-5 (loss, --tolerance) / 1e-4 (update,
    relative to the update, --update-tolerance), whichever is larger
    (offload.testing, the model zoo's rule). Where a ReLU input lies within
    an fp32 rounding of zero, fp32 does not determine its derivative: such a
    step's update is judged against the nearest of the float64 steps taking
    each such ReLU either way;
  * the test accuracy is within 0.02 of the float64 model's;
  * the budget holds: the measured peak device bytes equal the planned peak
    and are <= the budget (the host backend refuses a plan whose arena
    exceeds the device it was given, so a completed run proves the bound).
The whole loss curves are printed and plotted, not judged: two correct fp32
runs need not agree over 300 steps. One rounding difference that puts a ReLU
input on the other side of zero (step 73 here with OpenBLAS's Haswell
kernels) parts the curves for good; on one machine ours and PyTorch 1.13's
(both OpenBLAS) end 3.4e-2 from float64 while PyTorch 2.15's (MKL) stays
within 6.4e-7, and float64 runs whose initial weights differ by four fp32
ulps part the same way (issue 27).
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
from offload.testing import float64_references, judge_errors, reference_step, update_error


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


def digits_model():
    """The example's MLP 64-256-256-256-10 with ReLU (initialized from torch's
    global generator; seed it first)."""
    return nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(),
                         nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 10))


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
    ap.add_argument("--tolerance", type=float, default=1e-5,
                    help="the smallest bound on a step's loss error against PyTorch's float64 "
                    "step (the bound is the larger of this and 4 x PyTorch fp32's error)")
    ap.add_argument("--update-tolerance", type=float, default=1e-4,
                    help="the same for a step's parameter update (relative to the update)")
    ap.add_argument("--accuracy-tolerance", type=float, default=0.02,
                    help="largest difference of test accuracy from the float64 model's")
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
    model = digits_model()
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

    # Our 300 steps; around each, our state before and after it, and the
    # same step from our state before it by PyTorch in float64 (the oracle)
    # and in fp32.
    t_ours = 0.0
    ours, local, kinks = [], {"loss": ([], []), "update": ([], [])}, 0
    for i, (x, y) in enumerate(data):
        before, momentum = step.state_dict(), step.optimizer_state()
        t0 = time.perf_counter()
        ours.append(step(x, y))
        t_ours += time.perf_counter() - t0
        after = step.state_dict()
        l64, refs64, n_kinks = float64_references(reference, before, opt, momentum, (x, y),
                                                  F.cross_entropy)
        l32, p32, _ = reference_step(reference, before, opt, momentum, (x, y), F.cross_entropy,
                                     torch.float32)
        kinks += n_kinks > 0
        local["loss"][0].append(abs(ours[-1] - l64) / max(1.0, abs(l64)))
        local["loss"][1].append(abs(l32 - l64) / max(1.0, abs(l64)))
        local["update"][0].append(min(update_error(before, after, p) for p in refs64))
        local["update"][1].append(min(update_error(before, p32, p) for p in refs64))
        if args.progress:
            progress(i, len(data), ours[-1])
    model.load_state_dict(step.state_dict())
    verdicts = {k: judge_errors(e, e32, floor) for (k, (e, e32)), floor in
                zip(local.items(), (args.tolerance, args.update_tolerance))}

    def torch_curve(net, dtype):
        """PyTorch's own loop over `data` with `net` in `dtype` (trained in place)."""
        net.to(dtype)
        torch_opt = opt.torch(net.parameters())
        curve = []
        for x, y in data:
            torch_opt.zero_grad()
            loss = F.cross_entropy(net(x.to(dtype)), y)
            loss.backward()
            torch_opt.step()
            curve.append(float(loss))
        return np.array(curve)

    reference64 = copy.deepcopy(reference).double()
    t0 = time.perf_counter()
    theirs = torch_curve(reference, torch.float32)
    t_torch = time.perf_counter() - t0
    exact = torch_curve(reference64, torch.float64)

    ours = np.array(ours)
    diff = np.abs(ours - theirs) / np.maximum(1.0, np.abs(theirs))
    err_ours = np.abs(ours - exact) / np.maximum(1.0, np.abs(exact))
    err_torch = np.abs(theirs - exact) / np.maximum(1.0, np.abs(exact))
    acc = {"offload": accuracy(model, xte, yte), "torch fp32": accuracy(reference, xte, yte),
           "torch float64": accuracy(reference64, xte.double(), yte)}
    print(f"loss: first {ours[0]:.5f} (torch {theirs[0]:.5f}), last {ours[-1]:.5f} "
          f"(torch {theirs[-1]:.5f}, float64 {exact[-1]:.5f})")
    print("each of the 300 steps against PyTorch's float64 step from our state before it "
          "(the oracle), beside PyTorch fp32's step from the same state:")
    print(f"  loss   (|l - l64| / max(1, |l64|)):           {verdicts['loss']}")
    print(f"  update (max|dp - dp64| / max|dp64| per tensor): {verdicts['update']}")
    print(f"  ({kinks} of the {len(data)} steps have ReLU inputs within an fp32 rounding of zero, "
          f"whose derivative fp32 does not determine: their update is judged against the nearest "
          f"of the float64 steps taking each such ReLU either way)")
    print("the whole curves (for information: one rounding difference can flip a ReLU and part "
          "two correct fp32 curves for good):")
    print(f"  largest |ours - float64| / max(1, |float64|): {err_ours.max():.2e} at step "
          f"{int(err_ours.argmax())}; PyTorch fp32's: {err_torch.max():.2e} at step "
          f"{int(err_torch.argmax())}; |ours - PyTorch fp32|: {diff.max():.2e}; identical "
          f"steps before the first difference: "
          f"{int(np.argmax(diff > 0)) if (diff > 0).any() else len(diff)}")
    print("test accuracy: " + ", ".join(f"{k} {v:.4f}" for k, v in acc.items()))
    print(f"time for {len(data)} steps: offload host backend {t_ours:.2f} s, "
          f"PyTorch eager {t_torch:.2f} s")
    measured, planned = step.measured_peak_device_bytes, step.planned_peak_device_bytes
    print(f"peak device bytes: planned {planned}, measured {measured}, budget {budget}, "
          f"unplanned arena {unplanned}")

    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, (a, b, c) = plt.subplots(3, 1, figsize=(8, 8), sharex=True,
                                  gridspec_kw={"height_ratios": [3, 1.2, 1.2]})
    a.plot(exact, label="PyTorch float64 (the oracle)", color="black", linewidth=4, alpha=0.25)
    a.plot(theirs, label="PyTorch fp32 (torch.optim.SGD)", linewidth=2.5, alpha=0.6)
    a.plot(ours, label=f"offload fp32, budget {budget} B ({args.budget_fraction:.0%})",
           linewidth=1)
    a.set_ylabel("cross-entropy")
    a.set_title("digits MLP: training loss")
    a.legend()
    b.semilogy(np.maximum(err_torch, 1e-12), label="PyTorch fp32", alpha=0.7)
    b.semilogy(np.maximum(err_ours, 1e-12), label="offload", alpha=0.7)
    b.set_ylabel("curve vs float64")
    b.legend(fontsize="small")
    c.semilogy(np.maximum(local["update"][1], 1e-12), label="PyTorch fp32", alpha=0.7)
    c.semilogy(np.maximum(local["update"][0], 1e-12), label="offload", alpha=0.7)
    c.axhline(verdicts["update"].bound, color="red", linestyle="--", label="bound (checked)")
    c.set_ylabel("each step's update\nvs float64 step")
    c.set_xlabel("step")
    c.legend(fontsize="small")
    fig.tight_layout()
    fig.savefig(os.path.join(args.out, "loss_curves.png"), dpi=100)
    step.plot_memory(title=f"digits MLP step under a {budget}-byte budget").savefig(
        os.path.join(args.out, "memory.png"), dpi=100)
    np.savez(os.path.join(args.out, "loss_curves.npz"), offload=ours, torch_fp32=theirs,
             torch_fp64=exact)
    print(f"figures: {args.out}/loss_curves.png, {args.out}/memory.png; curves: "
          f"{args.out}/loss_curves.npz")

    ok = True
    for k, v in verdicts.items():
        if not v.ok:
            print(f"FAIL: our steps' {k} is further from PyTorch's float64 step than the bound")
            ok = False
    if not abs(acc["offload"] - acc["torch float64"]) <= args.accuracy_tolerance:
        print(f"FAIL: test accuracy {acc['offload']:.4f} is more than "
              f"{args.accuracy_tolerance} from float64's {acc['torch float64']:.4f}")
        ok = False
    if not (measured == planned <= budget < unplanned):
        print("FAIL: the budget did not hold (or was not below the unplanned arena)")
        ok = False
    print("ok: the curve is as exact as PyTorch's and the budget held" if ok else
          "example failed")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
