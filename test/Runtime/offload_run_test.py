#!/usr/bin/env python3
"""End-to-end tests of offload-run (run by ctest).

usage: offload_run_test.py OFFLOAD_RUN PLAN_GEN WORKDIR

Checks --help, --dump-plan, bad inputs (truncated plan, other format
version, misshaped binding, device smaller than the plan), and, when the host
kernel library is linked, three training steps of the test MLP whose --dump
is compared with a numpy float64 reference (max relative error 1e-4).
Exits 77 (ctest SKIP_RETURN_CODE) for the training part when offload-run has
no host kernels.
"""
import os
import shutil
import struct
import subprocess
import sys

import numpy as np

run, gen, work = sys.argv[1:4]
shutil.rmtree(work, ignore_errors=True)
os.makedirs(work)
subprocess.check_call([gen, work])
plan = os.path.join(work, "mlp.oflp")
params = os.path.join(work, "params.npz")
inputs = os.path.join(work, "inputs.npz")


def offload_run(*args):
    p = subprocess.run([run, *args], capture_output=True, text=True)
    return p.returncode, p.stdout + p.stderr


def expect(cond, msg, out=""):
    if not cond:
        print("FAIL:", msg, "\n", out)
        sys.exit(1)


rc, out = offload_run("--help")
expect(rc == 0 and "--backend host|cuda" in out and "--dump FILE.npz" in out,
       "--help", out)

rc, out = offload_run(plan, "--dump-plan")
expect(rc == 0 and "offload.linear" in out and "phase optimizer" in out,
       "--dump-plan", out)

# --check: op coverage per backend, nothing run (no GPU needed).
rc, out = offload_run("--help")
expect("--check" in out, "--help lists --check", out)
rc, out = offload_run(plan, "--check")
expect(rc == 0 and "plan " in out and "host (chosen): has a kernel for every op"
       in out, "--check host", out)
rc, out = offload_run(plan, "--check", "--backend", "cuda")
expect(("cuda (chosen): has a kernel for every op" in out and rc == 0) or
       ("built without CUDA" in out and rc == 1), "--check cuda", out)
rc, out = offload_run(plan, "--check", "--workspace-bytes", "4096")
expect(rc == 0 and "workspace 4096 bytes" in out, "--check --workspace-bytes", out)
rc, out = offload_run(plan, "--dump-plan", "--workspace-bytes", "1000")
expect(rc == 0 and "\"workspace\" bool[1000] device@" in out,
       "--dump-plan --workspace-bytes", out)
rc, out = offload_run(plan, "--check", "--backend", "tpu")
expect(rc == 1 and "unknown backend 'tpu'" in out, "--check unknown backend", out)

# Several plans on one store must agree on the names they share.
rc, out = offload_run(plan, os.path.join(work, "mlp-wide.oflp"), "--params", params)
expect(rc == 1 and "share the store name 'fc1.weight' but disagree on it: f32[16,5] vs f32[17,5]"
       in out, "plans disagreeing on a shared name", out)
rc, out = offload_run(plan, plan, "--inputs", inputs, "--inputs", inputs, "--inputs", inputs)
expect(rc == 1 and "--inputs given 3 times for 2 plans" in out, "--inputs count", out)

data = open(plan, "rb").read()
bad = os.path.join(work, "bad.oflp")
open(bad, "wb").write(data[: len(data) // 2])
rc, out = offload_run(bad)
expect(rc == 1 and "truncated" in out, "truncated plan", out)

# format_version is the first field of the root table; patch it via the
# vtable: root offset at [4:8] (after the size prefix), vtable at root -
# soffset, field 0 offset at vtable + 4.
buf = bytearray(data)
root = 4 + struct.unpack_from("<I", buf, 4)[0]
vt = root - struct.unpack_from("<i", buf, root)[0]
field = struct.unpack_from("<H", buf, vt + 4)[0]
expect(field != 0, "format_version present")
struct.pack_into("<I", buf, root + field, 99)
open(bad, "wb").write(bytes(buf))
rc, out = offload_run(bad)
expect(rc == 1 and "plan format version 99 is not supported" in out,
       "other format version", out)

rc, out = offload_run(plan, "--device-bytes", "16")
expect(rc == 1 and ("bytes but the plan's device arena needs" in out
                    or "no kernel for" in out), "small device", out)

z = dict(np.load(params))
z["fc1.weight"] = z["fc1.weight"][:, :-1]
badp = os.path.join(work, "bad_params.npz")
np.savez(badp, **z)
rc, out = offload_run(plan, "--params", badp, "--inputs", inputs)
expect(rc == 1 and ("binding 'fc1.weight' expects f32[16,5], got f32[16,4]"
                    in out or "no kernel for" in out), "misshaped binding",
       out)

# A workspace changes the peaks by its size, not the results.
dump = os.path.join(work, "out.npz")
rc, out = offload_run(plan, "--params", params, "--inputs", inputs,
                      "--steps", "3", "--dump", dump + ".ws.npz",
                      "--workspace-bytes", "65536")
ws_ok = rc == 0 or "no kernel for" in out
expect(ws_ok, "training run with a workspace", out)
ws_out = out
rc, out = offload_run(plan, "--params", params, "--inputs", inputs,
                      "--steps", "3", "--dump", dump)
if "no kernel for" in out:
    print("SKIP: host kernel library not linked:", out.strip())
    sys.exit(77)
expect(rc == 0, "training run", out)
expect(out.count("loss") >= 3 and "planned" in out and "measured" in out,
       "report", out)
peak = [l for l in out.splitlines() if l.startswith("peak device bytes")][0]
nums = [int(t) for t in peak.replace("planned", " ").replace("measured", " ")
        .split() if t.isdigit()]
expect(len(nums) == 2 and nums[0] == nums[1], "planned == measured", peak)
ws_peak = [l for l in ws_out.splitlines() if l.startswith("peak device bytes")][0]
ws_nums = [int(t) for t in ws_peak.replace("planned", " ").replace("measured", " ")
           .split() if t.isdigit()]
expect(ws_nums == [nums[0] + 65536, nums[0] + 65536],
       "the workspace is counted in both peaks", ws_peak)
a, b = np.load(dump), np.load(dump + ".ws.npz")
expect(all(a[n].tobytes() == b[n].tobytes() for n in a.files),
       "a workspace does not change results")

# numpy reference: the same MLP, SGD with momentum 0.9, lr 0.05, 3 steps.
p = {k: v.astype(np.float64) for k, v in np.load(params).items()}
i = np.load(inputs)
x, t = i["x"].astype(np.float64), i["target"]
N = x.shape[0]
for step in range(3):
    h = x @ p["fc1.weight"].T + p["fc1.bias"]
    a = np.maximum(h, 0)
    zz = a @ p["fc2.weight"].T + p["fc2.bias"]
    m = zz.max(axis=1, keepdims=True)
    lse = m[:, 0] + np.log(np.exp(zz - m).sum(axis=1))
    loss = np.mean(lse - zz[np.arange(N), t])
    dz = np.exp(zz - lse[:, None])
    dz[np.arange(N), t] -= 1
    dz /= N
    g = {"fc2.weight": dz.T @ a, "fc2.bias": dz.sum(0)}
    dh = (dz @ p["fc2.weight"]) * (a > 0)
    g["fc1.weight"] = dh.T @ x
    g["fc1.bias"] = dh.sum(0)
    for k in ["fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"]:
        buf = g[k] if step == 0 else 0.9 * p[k + ".momentum_buffer"] + g[k]
        p[k + ".momentum_buffer"] = buf
        p[k] = p[k] - 0.05 * buf
        p[k + ".step"] = p[k + ".step"] + 1

d = np.load(dump)
def close(name, ref):
    got = d[name].astype(np.float64)
    scale = max(1e-6, float(np.max(np.abs(ref))))
    err = float(np.max(np.abs(got - ref))) / scale if ref.size else 0.0
    expect(got.shape == ref.shape and err <= 1e-4,
           f"{name}: max rel error {err}")

close("loss", np.array(loss))
for k in ["fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"]:
    close("grad:" + k, g[k])
    close(k, p[k])
    close(k + ".momentum_buffer", p[k + ".momentum_buffer"])
expect(int(d["fc1.weight.step"]) == 3, "step counter")

# Poison mode and more threads change nothing in the results.
dump2 = os.path.join(work, "out_poison.npz")
rc, out = offload_run(plan, "--params", params, "--inputs", inputs,
                      "--steps", "3", "--dump", dump2, "--poison",
                      "--threads", "2")
expect(rc == 0, "poison run", out)
d2 = np.load(dump2)
for k in d.files:
    expect(np.array_equal(d[k], d2[k]), f"{k} differs in poison mode")
print("ok")
