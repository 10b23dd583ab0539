#!/usr/bin/env python3
"""A two-task model trained with one plan per task on one shared parameter store.

    PYTHONPATH=python /usr/bin/python3 test/drivers/check_multitask.py --bin build/bin --work DIR
        [--optimizer sgd|adamw] [--steps 4] [--pipeline "--offload-host-parameters"]
        [--reference-order 0,1]

The model: a shared trunk (Linear 16->32, ReLU, Linear 32->32, ReLU) and two
heads, heads.0 (10 classes) and heads.1 (5 classes). Each task is exported as
its own TorchScript module reading the trunk and its head only, with the
parameter names of the whole model; offload-import leaves the other head out,
so each task's plan binds (and brings to the device) only the trunk and its
own head. The steps are built with per-parameter optimizer step counters
(--offload-autodiff step-counters=per-parameter), then the given memory
passes (default: parameters and optimizer state on the host).

offload-run trains plan 0, plan 1, plan 0, ... on one parameter store. The
reference is PyTorch alternating the tasks in --reference-order with ONE
optimizer over all parameters and zero_grad(set_to_none=True), so that the
idle head is skipped, as torch.optim skips a parameter whose gradient is
None. PyTorch runs the steps in fp32 and in float64; the float64 run is the
oracle (it does not depend on the CPU's BLAS kernels, whose summation order
two fp32 runs over several steps may not share). Compared with it: each
step's loss, and after the last step every parameter and every piece of
optimizer state of the trunk and both heads, relative to max(max|ref|,
1e-6), within 1e-5 or 4 x PyTorch fp32's own error against float64,
whichever is larger (python/offload/testing.py). Exits 1 on any failure; a
wrong --reference-order makes it fail.
"""
import argparse
import copy
import importlib.util
import os
import re
import shlex
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

from pipeline import check_cuda_run, compile_step, run


def load_testing():
    """python/offload/testing.py, the float64-oracle rule, loaded by path from
    the package that PYTHONPATH finds (found, not imported: the package's
    __init__ needs the built runtime extension, this script does not)."""
    package = importlib.util.find_spec("offload")
    if package is None:
        raise SystemExit("check_multitask.py: the package offload is not on PYTHONPATH "
                         "(PYTHONPATH=python; lit sets it)")
    spec = importlib.util.spec_from_file_location(
        "offload_testing", os.path.join(package.submodule_search_locations[0], "testing.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod

RTOL = 1e-5
FLOOR = 1e-6
FEATURES, HIDDEN, CLASSES, BATCH = 16, 32, (10, 5), 8


class TwoTask(nn.Module):
    def __init__(self):
        super().__init__()
        self.trunk = nn.Sequential(nn.Linear(FEATURES, HIDDEN), nn.ReLU(),
                                   nn.Linear(HIDDEN, HIDDEN), nn.ReLU())
        self.heads = nn.ModuleList([nn.Linear(HIDDEN, c) for c in CLASSES])

    def forward(self, x, task: int):
        return self.heads[task](self.trunk(x))


class TaskView(nn.Module):
    """Task `task` of a TwoTask: the same submodules, so the same names."""

    def __init__(self, model, task):
        super().__init__()
        self.trunk = model.trunk
        self.heads = model.heads
        self.task = task

    def forward(self, x):
        return self.heads[self.task](self.trunk(x))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bin", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--optimizer", default="sgd", choices=["sgd", "adamw"])
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--pipeline", default="--offload-host-parameters")
    ap.add_argument("--reference-order", default="0,1",
                    help="task order PyTorch alternates (0,1 matches offload-run)")
    ap.add_argument("--threads", type=int, default=2)
    a = ap.parse_args(argv)
    os.makedirs(a.work, exist_ok=True)
    w = lambda n: os.path.join(a.work, n)
    torch.manual_seed(0)
    model = TwoTask().train()
    xs = [torch.randn(BATCH, FEATURES) for _ in CLASSES]
    ys = [torch.randint(0, c, (BATCH,)) for c in CLASSES]
    np.savez(w("params.npz"), **{k: v.detach().numpy() for k, v in model.state_dict().items()})
    if a.optimizer == "sgd":
        ad = "optimizer=sgd lr=0.1 momentum=0.9 weight-decay=0.001"
        make_opt = lambda ps: torch.optim.SGD(ps, lr=0.1, momentum=0.9, weight_decay=0.001)
    else:
        ad = "optimizer=adamw lr=0.01 weight-decay=0.01"
        make_opt = lambda ps: torch.optim.AdamW(ps, lr=0.01, weight_decay=0.01)

    plans = []
    for t in range(len(CLASSES)):
        torch.jit.trace(TaskView(model, t), (xs[t],)).save(w(f"task{t}.pt"))
        np.savez(w(f"inputs{t}.npz"), x=xs[t].numpy(), y=ys[t].numpy())
        out = run([os.path.join(a.bin, "offload-import"), w(f"task{t}.pt"), "-o", w(f"task{t}.mlir"),
                   "--input", f"x={BATCH}x{FEATURES}xf32", "--input", f"y={BATCH}xi64"])
        sys.stdout.write(out)
        plan = w(f"task{t}.oflp")
        out = compile_step(a.bin, [w(f"task{t}.mlir"),
                                   f"--offload-autodiff={ad} step-counters=per-parameter"]
                           + shlex.split(a.pipeline), w(f"task{t}.step.mlir"), plan)
        sys.stdout.write(out)
        plans.append(plan)

    failed = False
    # Each task's plan binds the trunk and its own head only.
    for t, plan in enumerate(plans):
        listing = run([os.path.join(a.bin, "offload-run"), "--dump-plan", plan])
        bound = sorted(set(re.findall(r'^  in  "([^"\[]+)', listing, re.M)))
        params = [n for n in bound if n.startswith(("trunk.", "heads.")) and
                  not n.endswith((".momentum_buffer", ".exp_avg", ".exp_avg_sq", ".step"))]
        other = [n for n in params if n.startswith("heads.") and not n.startswith(f"heads.{t}.")]
        failed |= bool(other)
        print(f"multitask: plan {t} binds parameters {', '.join(params)}"
              + (f": FAIL (binds the other head: {other})" if other else ""))

    runner = ([os.path.join(a.bin, "offload-run")] + plans +
              ["--params", w("params.npz"), "--inputs", w("inputs0.npz"), "--inputs", w("inputs1.npz"),
               "--steps", str(a.steps), "--threads", str(a.threads), "--dump", w("out.npz")])
    out = run(runner)
    sys.stdout.write(out)
    # Where a GPU is present, the same steps on the CUDA backend.
    failed |= check_cuda_run("multitask:", a.bin, plans[0], runner, w("out.npz"))
    losses = [float(v) for v in re.findall(r"^step \d+ \[plan \d+ [^\]]*\]: loss (\S+)", out, re.M)]
    for m in re.finditer(r"peak device bytes: planned (\d+) measured (\d+)", out):
        failed |= m.group(1) != m.group(2)

    # PyTorch: one optimizer over every parameter, the tasks alternating, in
    # fp32 and in float64 (the oracle), each on its own copy.
    order = [int(t) for t in a.reference_order.split(",")]

    def reference(dtype):
        """(losses, {store name: tensor}) of PyTorch's loop in `dtype`."""
        m = copy.deepcopy(model).to(dtype)
        opt = make_opt(m.parameters())
        losses = []
        for k in range(a.steps):
            t = order[k % len(order)]
            opt.zero_grad(set_to_none=True)
            loss = F.cross_entropy(m(xs[t].to(dtype), t), ys[t])
            loss.backward()
            opt.step()
            losses.append(float(loss))
        store = {}
        for name, p in m.named_parameters():
            store[name] = p.detach()
            for key, v in opt.state[p].items():
                suffix = {"momentum_buffer": ".momentum_buffer", "exp_avg": ".exp_avg",
                          "exp_avg_sq": ".exp_avg_sq", "step": ".step"}[key]
                store[name + suffix] = v
        return losses, store

    testing = load_testing()
    l32, s32 = reference(torch.float32)
    l64, s64 = reference(torch.float64)
    e32 = testing.trajectory_errors(l32, l64, FLOOR) if len(losses) == a.steps else None
    for k, (l, r) in enumerate(zip(losses, l64)):
        err = abs(l - r) / max(abs(r), FLOOR)
        print(f"multitask: step {k} (task {k % 2}) loss {l:.7g} PyTorch float64 {r:.9g} "
              f"(fp32 {l32[k]:.7g}) relative error {err:.2e}, PyTorch fp32's {e32[k]:.2e}"
              if e32 is not None else f"multitask: step {k} loss {l:.7g}")
    if len(losses) != a.steps:
        failed = True
        print(f"multitask: {len(losses)} losses, expected {a.steps}: FAIL")
    else:
        v = testing.judge_trajectory(losses, l32, l64, floor=RTOL, scale=FLOOR)
        failed |= not v.ok
        print(f"multitask: losses: {v}")
    got = np.load(w("out.npz"))
    missing = [n for n in s64 if n not in got.files]
    for n in missing:
        failed = True
        print(f"multitask: {n} missing from the store: FAIL")
    names = [n for n in s64 if n not in missing]
    v = testing.judge_tensors({n: got[n] for n in names}, s32, {n: s64[n] for n in names},
                              floor=RTOL, scale=FLOOR)
    failed |= not v.ok
    print(f"multitask: {len(names)} store tensors compared with PyTorch float64: {v}")
    print(f"multitask: {'FAIL' if failed else 'PASS'}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
