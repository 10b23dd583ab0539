#!/usr/bin/env python3
"""Host memory of offload-run (issue 16), run by ctest as runtime.host-memory.

usage: host_memory_test.py OFFLOAD_RUN PLAN_GEN WORKDIR

Generates an MLP whose parameters are a known, large size (batch 8, 2048
inputs, 4096 hidden units, 1024 classes: 12.6 M parameters, 50 MB, and as
much SGD momentum), then runs two SGD steps with `offload-run
--report-host-memory`, once without and once with `--dump`. offload-run
prints its peak resident memory (VmHWM), its resident memory at start (the
binary and shared libraries) and what the run has to hold: the plan arenas
in host memory, the parameter store and the session's own tensors. The test
requires

    peak - start <= arenas + store + session tensors + ALLOWANCE

with ALLOWANCE = 16 MiB: what is neither arena nor store and does not grow
with the model -- pages of the shared libraries first touched after start
(OpenBLAS's GEMM buffers, kernel scratch), thread stacks of the copy streams,
malloc's arenas, the plan's in-memory form (a few KB here), the 1 MiB pieces
of the npz reader and writer, and a 64 KiB step of page-granular noise.
Every copy that issue 16 removed is larger than the allowance: a second copy
of the parameters (50 MB) or of the gradients (50 MB), the spare tensors of
the commit (100 MB), a buffer of the whole params.npz member or file, the
dump's per-array encodings (150 MB). So the test fails if one comes back.

It also checks that the store holds exactly parameters, momentum and step
counters, that the arenas are the plan's, and that the dump holds every
output with its shape. Exits 77 (skip) where /proc/self/status is missing.
"""
import os
import re
import shutil
import subprocess
import sys

import numpy as np

ALLOWANCE = 16 << 20
N, D, H, C = 8, 2048, 4096, 1024

run, gen, work = sys.argv[1:4]
shutil.rmtree(work, ignore_errors=True)
os.makedirs(work)
subprocess.check_call([gen, work, str(N), str(D), str(H), str(C)])
plan = os.path.join(work, "mlp.oflp")
params = os.path.join(work, "params.npz")
inputs = os.path.join(work, "inputs.npz")
dump = os.path.join(work, "out.npz")

param_bytes = 4 * (H * D + H + C * H + C)
# Parameters, momentum (same size) and four int64 step counters.
store_expected = 2 * param_bytes + 4 * 8


def fail(msg, out=""):
    print("FAIL:", msg)
    if out:
        print(out)
    sys.exit(1)


def report(*extra):
    p = subprocess.run([run, plan, "--params", params, "--inputs", inputs,
                        "--steps", "2", "--report-host-memory", *extra],
                       capture_output=True, text=True)
    out = p.stdout + p.stderr
    if p.returncode != 0:
        fail("offload-run " + " ".join(extra) + " exited " + str(p.returncode), out)
    if "host memory: unavailable" in out:
        print("SKIP: no /proc/self/status")
        sys.exit(77)
    m = re.search(r"host memory: peak resident (\d+) bytes, at start (\d+) bytes, "
                  r"growth (-?\d+) bytes; held: plan arenas (\d+) bytes, "
                  r"parameter store (\d+) bytes, session tensors (\d+) bytes", out)
    if not m:
        fail("no host memory line", out)
    peak, start, growth, arenas, store, held = map(int, m.groups())
    return peak, start, growth, arenas, store, held, out


arena_line = subprocess.run([run, plan, "--check"], capture_output=True,
                            text=True).stdout
device_arena = int(re.search(r"device arena (\d+) bytes", arena_line).group(1))

for extra in ([], ["--dump", dump]):
    peak, start, growth, arenas, store, held, out = report(*extra)
    what = "offload-run " + (" ".join(extra) or "(no --dump)")
    if growth != peak - start:
        fail(what + ": growth is not peak - start", out)
    if arenas != device_arena:
        fail(what + ": arenas %d bytes, the plan's device arena is %d" %
             (arenas, device_arena), out)
    if store != store_expected:
        fail(what + ": parameter store %d bytes, expected %d" %
             (store, store_expected), out)
    bound = arenas + store + held + ALLOWANCE
    print("%s: peak %d, start %d, growth %d bytes <= arenas %d + store %d + "
          "session %d + allowance %d = %d: %s" %
          (what, peak, start, growth, arenas, store, held, ALLOWANCE, bound,
           "ok" if growth <= bound else "FAIL"))
    if growth > bound:
        fail(what + ": the run grew by %d bytes, %d more than its arenas, "
             "parameter store and session tensors plus the %d-byte allowance: "
             "a copy of a model-sized array is back" %
             (growth, growth - bound + ALLOWANCE, ALLOWANCE), out)

z = np.load(dump)
want = {"loss": ()}
for name, shape in (("fc1.weight", (H, D)), ("fc1.bias", (H,)),
                    ("fc2.weight", (C, H)), ("fc2.bias", (C,))):
    want[name] = shape
    want[name + ".momentum_buffer"] = shape
    want["grad:" + name] = shape
for name, shape in want.items():
    if name not in z.files or z[name].shape != shape:
        fail("--dump: %s missing or misshaped (files: %s)" % (name, z.files))
if not np.isfinite(z["loss"]) or not np.all(np.isfinite(z["fc1.weight"])):
    fail("--dump: non-finite values")
print("ok")
