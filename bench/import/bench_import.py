#!/usr/bin/python3
"""Import-time benchmark of offload-import.

Exports resnet18 (batch 32) and the transformer (batch 8) with
python/export_models.py, then runs `offload-import --time` REPEAT times on
each and prints the minimum and median of the import time that the tool
reports: graph inlining, conversion, verification and printing, excluding
torch::jit::load (reported separately) and process start-up.

Usage: bench_import.py --importer BIN --exporter export_models.py --work DIR
                       [--repeat N]
"""
import argparse
import os
import re
import statistics
import subprocess
import sys

MODELS = {
    "resnet18": ["x=32x3x32x32xf32", "y=32xi64"],
    "transformer": ["x=8x16x64xf32", "y=8xi64"],
}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--importer", required=True)
    ap.add_argument("--exporter", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--repeat", type=int, default=5)
    a = ap.parse_args()
    os.makedirs(a.work, exist_ok=True)
    subprocess.run([sys.executable, a.exporter, "--out", a.work, "--models",
                    ",".join(MODELS)], check=True, stdout=subprocess.DEVNULL)
    print("%-12s %10s %10s %10s %8s" % ("model", "load ms", "import ms",
                                         "(median)", "ops"))
    for name, inputs in MODELS.items():
        loads, imports = [], []
        out = os.path.join(a.work, name + ".mlir")
        for _ in range(a.repeat):
            cmd = [a.importer, os.path.join(a.work, name + ".pt"), "--time",
                   "--no-locations", "-o", out]
            for i in inputs:
                cmd += ["--input", i]
            r = subprocess.run(cmd, capture_output=True, text=True, check=True)
            m = re.search(r"load ([0-9.]+) ms .* import ([0-9.]+) ms", r.stderr)
            loads.append(float(m.group(1)))
            imports.append(float(m.group(2)))
        with open(out) as f:
            ops = sum(1 for line in f if "offload." in line and "=" in line
                      or line.strip().startswith("offload."))
        print("%-12s %10.1f %10.1f %10.1f %8d" % (
            name, min(loads), min(imports), statistics.median(imports), ops))


if __name__ == "__main__":
    main()
