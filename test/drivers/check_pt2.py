#!/usr/bin/python3
"""The same model imported from TorchScript (.pt) and from torch.export (.pt2)
must give the same training step.

For each model: export_models.py (Debian's torch 1.13) writes NAME.pt, the
initial parameters NAME.params.npz and the example inputs; export_pt2.py
(PyTorch 2.x, scripts/torch2-python) loads exactly those parameters and inputs
and writes NAME.pt2. Both are imported with offload-import (--params-out), and
this checks:
  params   the two --params-out files hold the same names, dtypes and bytes
           (and equal the exporter's NAME.params.npz);
  mlir     the two steps after --canonicalize, without locations, are
           identical or differ (reported; the transformer's attention is
           offload.attention over [N, H, L, E] from PyTorch 2.x's
           scaled_dot_product_attention, over [1, N*H, L, E] from
           TorchScript 1.13's spelled-out bmm, softmax, dropout, bmm, which
           the importer fuses: same values, other reshapes);
  step     offload-opt --offload-autodiff (SGD, gradients returned) and one
           offload-run step on the host backend, each from its own
           --params-out file: the loss and every gradient bit-identical;
           for the models of --fused (default: none), whose two imports
           compute attention differently (e.g. one of them imported with
           offload-import --no-fuse-attention), within 1e-4 of each other
           instead (max |a - b| / max |b| per tensor, the fp32 tolerance of
           docs/op-semantics.md).
It also prints each import's time (offload-import --time).

Usage: PYTHONPATH=python:test/drivers /usr/bin/python3 test/drivers/check_pt2.py
           --bin BUILD/bin --work DIR [--models resnet18,transformer,gpt]
           [--torch2 scripts/torch2-python] [--fused transformer]
(export_models and export_pt2 run as modules found on PYTHONPATH, under both
PyTorch versions.)
"""

import argparse
import os
import re
import subprocess
import sys

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def run(cmd):
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if r.returncode != 0:
        sys.stdout.write(r.stdout)
        raise SystemExit("command failed (%d): %s" % (r.returncode, " ".join(cmd)))
    return r.stdout


def same_npz(a, b):
    """'' when a and b hold the same arrays bit for bit, else what differs."""
    with np.load(a) as za, np.load(b) as zb:
        if sorted(za.files) != sorted(zb.files):
            return "names differ: %s" % sorted(set(za.files) ^ set(zb.files))
        for k in za.files:
            x, y = za[k], zb[k]
            if x.dtype != y.dtype or x.shape != y.shape:
                return "%s: %s%s vs %s%s" % (k, x.dtype, x.shape, y.dtype, y.shape)
            if x.tobytes() != y.tobytes():
                return "%s: values differ (max |diff| %g)" % (
                    k, float(np.max(np.abs(x.astype(np.float64) - y.astype(np.float64)))))
    return ""


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bin", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--models", default="resnet18,transformer,gpt")
    ap.add_argument("--torch2", default=os.path.join(ROOT, "scripts", "torch2-python"))
    ap.add_argument("--fused", default="",
                    help="models whose .pt2 step uses the fused attention op: compared "
                         "within 1e-4, not bit for bit")
    a = ap.parse_args(argv)
    os.makedirs(a.work, exist_ok=True)
    w = lambda *p: os.path.join(a.work, *p)
    models = [m for m in a.models.split(",") if m]
    b = lambda t: os.path.join(a.bin, t)

    run([sys.executable, "-m", "export_models", "--out", a.work,
         "--models", ",".join(models), "--batch", "2"])
    run([a.torch2, "-m", "export_pt2", "--out", a.work, "--models",
         ",".join(models), "--params-dir", a.work])

    failed = False
    for m in models:
        import json
        with open(w(m + ".json")) as f:
            cfg = json.load(f)
        ins = []
        for k in ["x", "y"]:
            ins += ["--input", "%s=%s" % (k, cfg["inputs"][k])]
        times = {}
        for ext, extra in [("pt", ins), ("pt2", [])]:
            out = run([b("offload-import"), w(m + "." + ext), "--time", "--no-locations",
                       "-o", w(m + "." + ext + ".mlir"), "--params-out",
                       w(m + "." + ext + ".params.npz")] + extra)
            mt = re.search(r"load ([0-9.]+) ms.*import ([0-9.]+) ms", out)
            times[ext] = (float(mt.group(1)), float(mt.group(2))) if mt else (0, 0)
            run([b("offload-opt"), w(m + "." + ext + ".mlir"), "--canonicalize", "-o",
                 w(m + "." + ext + ".canon.mlir")])
            run([b("offload-opt"), w(m + "." + ext + ".mlir"),
                 "--offload-autodiff=optimizer=sgd lr=0.1 momentum=0.9 return-gradients=true",
                 "-o", w(m + "." + ext + ".step.mlir")])
            run([b("offload-translate"), "--offload-to-plan", w(m + "." + ext + ".step.mlir"),
                 "-o", w(m + "." + ext + ".oflp")])
            run([b("offload-run"), w(m + "." + ext + ".oflp"), "--threads", "1",
                 "--params", w(m + "." + ext + ".params.npz"), "--inputs",
                 w(m + ".inputs.npz"), "--steps", "1", "--dump", w(m + "." + ext + ".step.npz")])
        print("%s import time: .pt load %.1f ms + import %.1f ms; .pt2 read %.1f ms + import "
              "%.1f ms" % (m, times["pt"][0], times["pt"][1], times["pt2"][0], times["pt2"][1]))

        d = same_npz(w(m + ".pt.params.npz"), w(m + ".pt2.params.npz")) or \
            same_npz(w(m + ".pt2.params.npz"), w(m + ".params.npz"))
        print("%s params: %s" % (m, "identical" if not d else "FAIL " + d))
        failed |= bool(d)

        with open(w(m + ".pt.canon.mlir")) as f1, open(w(m + ".pt2.canon.mlir")) as f2:
            same = f1.read() == f2.read()
        print("%s mlir after canonicalize: %s" % (m, "identical" if same else "differs"))

        with np.load(w(m + ".pt.step.npz")) as z1, np.load(w(m + ".pt2.step.npz")) as z2:
            names = ["loss"] + sorted(k for k in z1.files if k.startswith("grad:"))
            fused = m in a.fused.split(",")

            def rel(k):
                x, y = z2[k].astype(np.float64), z1[k].astype(np.float64)
                return float(np.max(np.abs(x - y)) / max(np.max(np.abs(y)), 1e-30))
            worst = 0.0
            bad = []
            for k in names:
                if k not in z2.files:
                    bad.append(k)
                elif fused:
                    worst = max(worst, rel(k))
                    if rel(k) > 1e-4:
                        bad.append(k)
                elif z1[k].tobytes() != z2[k].tobytes():
                    bad.append(k)
            extra = sorted(k for k in z2.files if k.startswith("grad:") and k not in z1.files)
            ok = not bad and not extra and len(names) > 1
            verdict = ("within 1e-4 (largest %.1e)" % worst if fused else "bit-identical")
            print("%s step: loss %.9g, %d gradients: %s" % (
                m, float(z1["loss"]), len(names) - 1,
                verdict if ok else "FAIL (%s)" % ", ".join((bad + extra)[:5])))
            failed |= not ok
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
