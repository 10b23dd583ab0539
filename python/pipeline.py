"""Shared steps of the end-to-end check scripts (check_model.py,
check_memory_pass.py): run a tool, export a model, import it."""
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
PY = "/usr/bin/python3"


def run(cmd):
    """Runs `cmd`; on failure prints it with its output and exits 1."""
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if r.returncode != 0:
        print("command failed: " + " ".join(cmd))
        print(r.stdout)
        sys.exit(1)
    return r.stdout


def export_and_import(model, work, bin_dir, batch=0, dropout=None):
    """Exports `model` into `work` and imports it to work/<model>.mlir.
    Returns the export's metadata (work/<model>.json)."""
    os.makedirs(work, exist_ok=True)
    export = [PY, os.path.join(HERE, "export_models.py"), "--out", work, "--models", model]
    if batch:
        export += ["--batch", str(batch)]
    if dropout is not None:
        export += ["--dropout", str(dropout)]
    run(export)
    prefix = os.path.join(work, model)
    meta = json.load(open(prefix + ".json"))
    imp = [os.path.join(bin_dir, "offload-import"), prefix + ".pt", "-o", prefix + ".mlir"]
    for k, v in meta["inputs"].items():
        imp += ["--input", f"{k}={v}"]
    if not meta.get("returns_loss"):
        imp += ["--loss", meta["loss"]]
    run(imp)
    return meta
