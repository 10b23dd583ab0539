"""Shared by the planner benchmarks (oracle.py, sim_vs_measured.py,
pytorch_partitioner.py): running the tools, and building an example model's
training step. Needs only the standard library, so PyTorch 2.x's environment
(scripts/torch2-python, without scipy) can import it too."""
import json
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# Debian's python3 with PyTorch 1.13: what python/export_models.py and the
# TorchScript importer need.
DEBIAN_PY = "/usr/bin/python3"


def run(cmd, ok=True, timeout=None):
    """Runs `cmd`, stdout and stderr together; exits naming it (with the last
    3,000 characters of its output) when it fails and `ok` is set. With
    `timeout` (seconds), subprocess.TimeoutExpired when it runs longer (the
    command is killed)."""
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                       timeout=timeout)
    if ok and r.returncode != 0:
        sys.exit("command failed: " + " ".join(cmd) + "\n" + r.stdout[-3000:])
    return r


def build_step(model, work, bin_dir, batch=None, reports=()):
    """Exports example `model` (python/export_models.py, at `batch` or the
    model's default batch), imports it and builds its SGD-momentum step
    (lr 0.1, momentum 0.9) into WORK/MODEL.step.mlir, printing the memory
    report and the extra report passes `reports` (offload-opt options).
    Returns (step path, unplanned device arena in bytes, the reports' text)."""
    export = [DEBIAN_PY, os.path.join(ROOT, "python", "export_models.py"), "--out", work,
              "--models", model]
    if batch is not None:
        export += ["--batch", str(batch)]
    run(export)
    meta = json.load(open(os.path.join(work, model + ".json")))
    args = []
    for k, v in meta["inputs"].items():
        args += ["--input", f"{k}={v}"]
    if not meta.get("returns_loss"):
        args += ["--loss", meta["loss"]]
    fwd = os.path.join(work, model + ".mlir")
    run([os.path.join(bin_dir, "offload-import"), os.path.join(work, model + ".pt")] + args +
        ["-o", fwd])
    step = os.path.join(work, model + ".step.mlir")
    out = run([os.path.join(bin_dir, "offload-opt"), fwd,
               "--offload-autodiff=optimizer=sgd lr=0.1 momentum=0.9",
               "--offload-memory-report"] + list(reports) + ["-o", step]).stdout
    return step, int(re.search(r"device arena bytes: (\d+)", out).group(1)), out
