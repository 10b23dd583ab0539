#!/usr/bin/env python3
"""Times --offload-slice-parameters on a two-layer step with thousands of slices.

    slicing.py --bin build/bin [--n 1024 2048] [--work DIR]

The step (docs/reliability.md, "Measured"): x[32, 2048] -> linear w1[N, 2048]
-> relu -> linear w2[N, N] -> cross-entropy, sliced with slice-bytes=4096 (one
row a slice: N + N slices), then autodiff (SGD, momentum 0.9), host
parameters and the lowering to a plan. Prints the wall time of the whole
offload-opt run and MLIR's per-pass timing (-mlir-timing) for each N.
"""
import argparse
import os
import subprocess
import sys
import tempfile
import time


def step(n, k=2048, batch=32):
    return f"""func.func @forward(%w1: tensor<{n}x{k}xf32> {{offload.name = "fc1.weight", offload.role = #offload.role<parameter>}},
                   %w2: tensor<{n}x{n}xf32> {{offload.name = "fc2.weight", offload.role = #offload.role<parameter>}},
                   %x: tensor<{batch}x{k}xf32> {{offload.name = "x", offload.role = #offload.role<input>}},
                   %t: tensor<{batch}xi64> {{offload.name = "y", offload.role = #offload.role<input>}})
    -> (tensor<f32> {{offload.name = "loss", offload.role = #offload.role<loss>}}) attributes {{offload.step}} {{
  offload.phase forward
  %h = offload.linear %x, %w1 : tensor<{batch}x{k}xf32>, tensor<{n}x{k}xf32>
  %r = offload.relu %h : tensor<{batch}x{n}xf32>
  %z = offload.linear %r, %w2 : tensor<{batch}x{n}xf32>, tensor<{n}x{n}xf32>
  %l = offload.cross_entropy %z, %t : tensor<{batch}x{n}xf32>, tensor<{batch}xi64>
  return %l : tensor<f32>
}}
"""


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bin", required=True)
    ap.add_argument("--n", type=int, nargs="+", default=[1024, 2048])
    ap.add_argument("--work", default=None)
    ap.add_argument("--host-parameters", action="store_true",
                    help="also run --offload-host-parameters (streamed slices)")
    args = ap.parse_args()
    work = args.work or tempfile.mkdtemp()
    os.makedirs(work, exist_ok=True)
    for n in args.n:
        src = os.path.join(work, f"two-layer-{n}.mlir")
        with open(src, "w") as f:
            f.write(step(n))
        cmd = [os.path.join(args.bin, "offload-opt"), src,
               "--offload-slice-parameters=slice-bytes=4096 report=-",
               "--offload-autodiff=optimizer=sgd lr=0.1 momentum=0.9"]
        if args.host_parameters:
            cmd.append("--offload-host-parameters=report=-")
        stepfile = os.path.join(work, f"two-layer-{n}.step.mlir")
        cmd += ["-mlir-timing", "-o", stepfile]
        lower = [os.path.join(args.bin, "offload-translate"), "--offload-to-plan", stepfile,
                 "-o", os.path.join(work, f"two-layer-{n}.oflp"), "--report=-"]
        t0 = time.monotonic()
        r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        if r.returncode == 0:
            lowered = subprocess.run(lower, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                     text=True)
            r = subprocess.CompletedProcess(cmd, lowered.returncode, r.stdout + lowered.stdout)
        wall = time.monotonic() - t0
        print(f"== N={n}: {2 * n} slices, wall {wall:.2f} s, exit {r.returncode}")
        print(r.stdout)
        if r.returncode:
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
