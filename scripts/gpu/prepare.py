#!/usr/bin/python3
"""Builds the models part of the GPU bring-up kit's bundle (docs/gpu.md).

    /usr/bin/python3 scripts/gpu/prepare.py --bin build/bin --out gpu-bundle/models
        --work TMPDIR [--models resnet18,transformer,gpt,resnet18-224,gpt2-small]
        [--budget-pct 40] [--workspace-bytes 67108864] [--seed 20261127]

Runs on the build machine with Debian's PyTorch 1.13 (TorchScript for
offload-import). For every model of scripts/gpu/models.py it writes
OUT/NAME/:

  spec.json     how to generate its parameters, state and inputs (gen.py):
                names, shapes, dtypes, init; nothing large is carried
  unplanned.oflp  the SGD-momentum training step as autodiff builds it
  planned.oflp  the same step planned by --offload-plan-memory for a budget
                of BUDGET_PCT% of the unplanned device arena plus the
                library workspace, on h100-sxm with that workspace reserved
                (a target file {"base": "h100-sxm", "workspace_bytes": W})
  plan-report.txt, cost-report.txt  the planner's decisions and simulated
                step times on h100-sxm (planned and unplanned)
  meta.json     budget, arenas, simulated times, generator digests and, for
                the example models, the host backend's own run
  ref.npz       example models only: the host backend's loss and gradients
                of the first step (unplanned plan; the planned plan's are
                checked bit-identical here), every element of tensors up to
                65536 elements and every k-th element of larger ones, with
                each tensor's max |g| and L2 norm in meta.json

Example models (resnet18, transformer, gpt) return their gradients
(return-gradients=true) so that they can be compared; the side-by-side
models (resnet18-224, gpt2-small) are the step as trained.

Exits 1 with a message when a tool fails or the host run breaks an
invariant (measured != planned peak, peak > budget, planned results not
bit-identical to the unplanned ones).
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time

import numpy as np

import gen
import models  # needs python/ on PYTHONPATH (export_models): bundle.sh sets it

SAMPLE_FULL = 65536   # tensors up to this many elements are carried whole
SAMPLE_TARGET = 16384  # larger ones: about this many elements, every k-th



def finish(out, meta, log, work, keep_work):
    """Writes a model's meta.json into its bundle folder `out`, closes its
    log and removes its work folder unless --keep-work."""
    with open(os.path.join(out, "meta.json"), "w") as f:
        json.dump(meta, f, indent=1)
        f.write("\n")
    log.close()
    if not keep_work:
        shutil.rmtree(work, ignore_errors=True)

def die(msg):
    print("prepare: error: " + msg, file=sys.stderr)
    sys.exit(1)


# OpenBLAS picks its kernels by the CPU it finds (here an AVX-512 EPYC), and
# kernels of other CPU types round differently (gpt's gradients by up to
# 1e-4 relative). The references are made with the Haswell (AVX2) kernels,
# which every x86-64 GPU host has, and kit.py runs our binaries with the same.
BLAS_ENV = {"OPENBLAS_CORETYPE": "Haswell"}


def tool_env():
    e = {k: v for k, v in os.environ.items() if not k.startswith("OPENBLAS_")}
    e.update(BLAS_ENV)
    return e


def run(cmd, log=None):
    t0 = time.time()
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                       env=tool_env())
    if log is not None:
        log.write("$ " + " ".join(cmd) + "\n" + r.stdout + "\n")
    if r.returncode != 0:
        die("command failed (exit %d): %s\n%s" % (r.returncode, " ".join(cmd), r.stdout[-4000:]))
    return r.stdout, time.time() - t0


def trace(name, path):
    """Traces models.build(name) in train mode at its trace shapes and saves
    the TorchScript to `path` (offload-import takes the real shapes)."""
    import warnings
    import torch
    torch.set_num_threads(max(1, min(2, torch.get_num_threads())))
    model = models.build(name).train()
    specs = models.input_specs(name, trace=True)
    x, y = [torch.from_numpy(gen.make(e, 1)) for e in specs]
    args = (x, y) if models.returns_loss(name) else (x,)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        traced = torch.jit.trace(model, args, check_trace=False)
    # offload-import reads the parameters' names, dtypes and shapes, not their
    # values (the GPU side generates those): each is saved as a zero expanded
    # to its shape, whose storage is one element, so gpt2-small's .pt is
    # 0.3 MB instead of 652 MB (the imported module is the same, checked).
    with torch.no_grad():
        for _, t in list(traced.named_parameters()) + list(traced.named_buffers()):
            t.data = torch.zeros((), dtype=t.dtype).expand(t.shape)
    traced.save(path)
    return model


def sample(a):
    """(carried array, stride): the whole tensor or every k-th element."""
    flat = np.ascontiguousarray(a).reshape(-1)
    if flat.size <= SAMPLE_FULL:
        return flat, 1
    k = -(-flat.size // SAMPLE_TARGET)
    return flat[::k].copy(), k


def prepare(name, a, target_file, out_root, work):
    cfg = models.MODELS[name]
    out = os.path.join(out_root, name)
    os.makedirs(out, exist_ok=True)
    w = os.path.join(work, name)
    os.makedirs(w, exist_ok=True)
    bin_ = lambda t: os.path.join(a.bin, t)
    log = open(os.path.join(w, "log.txt"), "w")
    t_start = time.time()
    example = cfg["kind"] == "example"

    model = trace(name, os.path.join(w, "model.pt"))
    spec = {"model": name, "kind": cfg["kind"], "seed": a.seed,
            "config": {k: v for k, v in cfg.items() if k not in ("kind",)},
            "params": models.param_specs(model),
            "inputs": models.input_specs(name)}
    del model
    with open(os.path.join(out, "spec.json"), "w") as f:
        json.dump(spec, f, indent=1)
        f.write("\n")
    nparams = sum(int(np.prod(e["shape"])) for e in spec["params"])

    imp = [bin_("offload-import"), os.path.join(w, "model.pt"), "-o", os.path.join(w, "m.mlir")]
    for e in spec["inputs"]:
        imp += ["--input", "%s=%s" % (e["name"], models.type_string(e))]
    if not models.returns_loss(name):
        imp += ["--loss", "cross_entropy"]
    run(imp, log)
    os.remove(os.path.join(w, "model.pt"))
    if cfg["kind"] in ("amp", "amp-mini"):
        return prepare_amp(name, a, spec, nparams, w, out, log, t_start)

    grads = "true" if example else "false"
    out_txt, _ = run([bin_("offload-opt"), os.path.join(w, "m.mlir"),
                      "--offload-autodiff=optimizer=sgd lr=0.1 momentum=0.9 return-gradients=" + grads,
                      "--offload-memory-report=top=0", "-o", os.path.join(w, "step.mlir")], log)
    m = re.search(r"device arena bytes: (\d+)", out_txt)
    if not m:
        die(name + ": no 'device arena bytes' in the memory report")
    unplanned_arena = int(m.group(1))
    budget = unplanned_arena * a.budget_pct // 100 + a.workspace_bytes

    run([bin_("offload-translate"), "--offload-to-plan", os.path.join(w, "step.mlir"),
         "-o", os.path.join(out, "unplanned.oflp")], log)
    if example:
        # The nccl part's plan: the unplanned step with its gradients averaged
        # in 64 KiB buckets (offload.all_reduce; several buckets per model).
        run([bin_("offload-opt"), os.path.join(w, "step.mlir"),
             "--offload-data-parallel=bucket-bytes=65536", "-o", os.path.join(w, "dp.mlir")], log)
        run([bin_("offload-translate"), "--offload-to-plan", os.path.join(w, "dp.mlir"),
             "-o", os.path.join(out, "dp.oflp")], log)
        # And ZeRO-1 at world size 1 (offload.reduce_scatter / all_gather:
        # NCCL's ncclReduce / ncclBroadcast groups on cuda).
        run([bin_("offload-opt"), os.path.join(w, "step.mlir"),
             "--offload-data-parallel=bucket-bytes=65536 zero=1 world-size=1",
             "-o", os.path.join(w, "zero1.mlir")], log)
        run([bin_("offload-translate"), "--offload-to-plan", os.path.join(w, "zero1.mlir"),
             "-o", os.path.join(out, "zero1.oflp")], log)
    cost = os.path.join(out, "cost-report.txt")
    run([bin_("offload-opt"), os.path.join(w, "step.mlir"),
         "--offload-cost-report=target=%s report=%s" % (target_file, cost), "-o", os.devnull], log)
    mc = re.search(r"simulated step time on \S+: ([0-9.eE+-]+) s", open(cost).read())
    report = os.path.join(out, "plan-report.txt")
    plan_cmd = lambda b: [bin_("offload-opt"), os.path.join(w, "step.mlir"),
                          "--offload-plan-memory=budget=%d target=%s report=%s" % (b, target_file, report),
                          "-o", os.path.join(w, "planned.mlir")]
    budget_note = "%d%% of the unplanned arena plus the workspace" % a.budget_pct
    r = subprocess.run(plan_cmd(budget), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                       env=tool_env())
    log.write("$ " + " ".join(plan_cmd(budget)) + "\n" + r.stdout + "\n")
    mr = re.search(r"smallest device arena reachable is (\d+) bytes", r.stdout)
    if r.returncode != 0 and mr and not example:
        # A side-by-side model whose 40% is out of reach: the smallest arena
        # the planner can reach, plus 1%.
        reachable = int(mr.group(1))
        budget = reachable + reachable // 100
        budget_note = ("%d%% (%d bytes) is out of reach; the smallest reachable arena %d bytes "
                       "plus 1%%" % (a.budget_pct, unplanned_arena * a.budget_pct // 100
                                      + a.workspace_bytes, reachable))
        print("prepare: %s: %s" % (name, budget_note), flush=True)
    elif r.returncode != 0:
        die("%s: the planner failed at %d bytes:\n%s" % (name, budget, r.stdout[-3000:]))
    _, plan_s = run(plan_cmd(budget), log)
    run([bin_("offload-translate"), "--offload-to-plan", os.path.join(w, "planned.mlir"),
         "-o", os.path.join(out, "planned.oflp")], log)
    rep = open(report).read()
    ms = re.search(r"simulated step time on \S+: ([0-9.eE+-]+) s -> ([0-9.eE+-]+) s", rep)

    def arena(plan):
        txt, _ = run([bin_("offload-run"), plan, "--check"], log)
        mm = re.search(r"device arena (\d+) bytes, workspace (\d+) bytes", txt)
        return (int(mm.group(1)), int(mm.group(2))) if mm else (None, None)

    meta = {"model": name, "kind": cfg["kind"], "parameters": nparams,
            "inputs": {e["name"]: models.type_string(e) for e in spec["inputs"]},
            "optimizer": "sgd lr=0.1 momentum=0.9", "return_gradients": example,
            "host_env": BLAS_ENV,
            "unplanned_arena_bytes": unplanned_arena, "workspace_bytes": a.workspace_bytes,
            "budget_pct": a.budget_pct, "budget_bytes": budget, "budget_rule": budget_note,
            "target": "h100-sxm",
            "planning_seconds": round(plan_s, 3),
            "simulated_seconds": {
                "unplanned": float(mc.group(1)) if mc else None,
                "planned": float(ms.group(2)) if ms else None},
            "plans": {}}
    for p in ("unplanned", "planned"):
        ar, ws = arena(os.path.join(out, p + ".oflp"))
        meta["plans"][p] = {"device_arena_bytes": ar, "workspace_in_plan_bytes": ws}

    if example:
        params, inputs = os.path.join(w, "params.npz"), os.path.join(w, "inputs.npz")
        meta["digest"] = gen.generate(spec, params, inputs)
        dumps, host = {}, {}
        for p in ("unplanned", "planned"):
            cmd = [bin_("offload-run"), os.path.join(out, p + ".oflp"), "--backend", "host",
                   "--threads", "1", "--steps", "1", "--params", params, "--inputs", inputs,
                   "--dump", os.path.join(w, p + ".npz")]
            cmd += ["--workspace-bytes", str(a.workspace_bytes)] if p == "unplanned" \
                else ["--device-bytes", str(budget)]
            txt, secs = run(cmd, log)
            mp = re.search(r"peak device bytes: planned (\d+) measured (\d+)", txt)
            ml = re.search(r"loss (\S+)\s+time (\S+) s", txt)
            host[p] = {"planned_peak": int(mp.group(1)), "measured_peak": int(mp.group(2)),
                       "loss": float(ml.group(1)), "step_seconds": float(ml.group(2))}
            if host[p]["planned_peak"] != host[p]["measured_peak"]:
                die("%s %s: host measured peak %d != planned %d" % (
                    name, p, host[p]["measured_peak"], host[p]["planned_peak"]))
            dumps[p] = np.load(os.path.join(w, p + ".npz"))
        if host["planned"]["measured_peak"] > budget:
            die("%s: planned peak %d > budget %d" % (name, host["planned"]["measured_peak"], budget))
        a0, b0 = dumps["unplanned"], dumps["planned"]
        differ = [n for n in a0.files if n not in b0.files or a0[n].tobytes() != b0[n].tobytes()]
        if differ or set(a0.files) != set(b0.files):
            die("%s: the planned plan's host results differ from the unplanned ones: %s"
                % (name, ", ".join(differ[:5]) or "different outputs"))
        names = ["loss"] + sorted(n for n in a0.files if n.startswith("grad:"))
        ref, ref_meta = {}, {}
        for n in names:
            arr = a0[n]
            s, k = sample(arr)
            ref[n] = s
            f64 = arr.astype(np.float64)
            ref_meta[n] = {"shape": list(arr.shape), "stride": k, "elements": int(arr.size),
                           "max_abs": float(np.max(np.abs(f64))) if arr.size else 0.0,
                           "l2": float(np.sqrt(np.sum(f64 * f64)))}
        np.savez(os.path.join(out, "ref.npz"), **ref)
        meta["host"] = host
        meta["reference"] = ref_meta
        meta["outputs"] = len(a0.files)
    finish(out, meta, log, w, a.keep_work)
    print("prepare: %-13s %6.1f s  %10d params  unplanned arena %d  budget %d  planned arena %s  "
          "simulated %s -> %s s" % (name, time.time() - t_start, nparams, unplanned_arena, budget,
                                    meta["plans"]["planned"]["device_arena_bytes"],
                                    meta["simulated_seconds"]["unplanned"],
                                    meta["simulated_seconds"]["planned"]), flush=True)


def prepare_amp(name, a, spec, nparams, w, out, log, t_start):
    """A bf16-mixed model (kind amp or amp-mini): OUT/NAME/amp.oflp, the step
    that --offload-autodiff builds with precision=bf16-mixed, optimizer none
    and its gradients returned (forward and backward: what the kit's amp part
    times against PyTorch's autocast step and checks against its float64
    step), and meta.json. No planning, no host reference (the reference is
    PyTorch's float64 step on the GPU). offload-run --check must find a
    kernel for every op on the build's chosen backend (CUDA when it has it)."""
    bin_ = lambda t: os.path.join(a.bin, t)
    out_txt, _ = run([bin_("offload-opt"), os.path.join(w, "m.mlir"),
                      "--offload-autodiff=precision=bf16-mixed optimizer=none return-gradients=true",
                      "--offload-memory-report=top=0", "-o", os.path.join(w, "step.mlir")], log)
    m = re.search(r"device arena bytes: (\d+)", out_txt)
    arena = int(m.group(1)) if m else None
    step_txt = open(os.path.join(w, "step.mlir")).read()
    low_ops = len(re.findall(r"offload\.(?:linear|matmul|conv2d\w*|attention\w*) [^\n]*bf16", step_txt))
    if low_ops == 0:
        die(name + ": the bf16-mixed step has no bf16 linear/matmul/conv2d/attention op")
    plan = os.path.join(out, "amp.oflp")
    run([bin_("offload-translate"), "--offload-to-plan", os.path.join(w, "step.mlir"), "-o", plan], log)
    txt, _ = run([bin_("offload-run"), plan, "--check"], log)
    mm = re.search(r"device arena (\d+) bytes, workspace (\d+) bytes", txt)
    meta = {"model": name, "kind": spec["kind"], "parameters": nparams,
            "inputs": {e["name"]: models.type_string(e) for e in spec["inputs"]},
            "precision": "bf16-mixed", "optimizer": "none (gradients returned)",
            "bf16_compute_ops": low_ops, "unplanned_arena_bytes": arena,
            "workspace_bytes": a.workspace_bytes,
            "plans": {"amp": {"device_arena_bytes": int(mm.group(1)) if mm else None,
                              "workspace_in_plan_bytes": int(mm.group(2)) if mm else None}}}
    finish(out, meta, log, w, a.keep_work)
    print("prepare: %-13s %6.1f s  %10d params  bf16-mixed step, arena %s, %d bf16 GEMM/conv/attention "
          "ops" % (name, time.time() - t_start, nparams, arena, low_ops), flush=True)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog=__doc__.split("\n", 2)[2])
    ap.add_argument("--bin", required=True, help="the build's bin/ (offload-import, -opt, -translate, -run)")
    ap.add_argument("--out", required=True, help="the bundle's models/ folder")
    ap.add_argument("--work", required=True, help="scratch folder (removed model by model)")
    ap.add_argument("--models", default=",".join(models.MODELS))
    ap.add_argument("--budget-pct", type=int, default=40)
    ap.add_argument("--workspace-bytes", type=int, default=64 << 20)
    ap.add_argument("--seed", type=int, default=20261127)
    ap.add_argument("--keep-work", action="store_true", help="keep the scratch files")
    a = ap.parse_args(argv)
    names = [n for n in a.models.split(",") if n]
    bad = [n for n in names if n not in models.MODELS]
    if bad:
        ap.error("unknown model(s): %s (known: %s)" % (", ".join(bad), ", ".join(models.MODELS)))
    os.makedirs(a.out, exist_ok=True)
    os.makedirs(a.work, exist_ok=True)
    target_file = os.path.join(a.out, "h100-sxm-workspace.json")
    with open(target_file, "w") as f:
        json.dump({"base": "h100-sxm", "name": "h100-sxm", "workspace_bytes": a.workspace_bytes}, f)
        f.write("\n")
    for n in names:
        prepare(n, a, target_file, a.out, a.work)
    return 0


if __name__ == "__main__":
    sys.exit(main())
