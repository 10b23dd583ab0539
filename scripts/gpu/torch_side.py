#!/usr/bin/env python3
"""PyTorch's side of the GPU bring-up kit (docs/gpu.md), on the same GPU.

    torch_side.py sbs --model NAME --params P.npz --inputs I.npz --steps N --out OUT.json
    torch_side.py sbs --model NAME --dry-run --out OUT.json
    torch_side.py amp --model NAME --params P.npz --inputs I.npz --steps N [--ours D.npz]
                      --device cuda|cpu --out OUT.json
    torch_side.py amp --model NAME --dry-run --out OUT.json
    torch_side.py copy --out OUT.json [--mib 256] [--reps 5]

sbs: trains scripts/gpu/models.py's module NAME (the module the plans were
compiled from) with torch.optim.SGD(lr 0.1, momentum 0.9), from the weights
and batch that gen.py generated for our runs, in two variants: eager, and
eager with torch.utils.checkpoint around every block (resnet18's 8
BasicBlocks, the GPT's decoder blocks; use_reentrant=False). fp32 with TF32
off for cuDNN and cuBLAS (our backend uses no TF32), cudnn.benchmark off.
Per variant: each step's wall time (synchronised), its loss, and the peak
of torch.cuda.max_memory_allocated over the steps (parameters, gradients,
momentum, activations and cuBLAS workspace: what our measured peak counts)
and of max_memory_reserved. Each variant starts from the same weights.
--dry-run builds the model at its tiny trace shapes on the CPU with
PyTorch's default weights, one step per variant: it checks the code, not
the figures (what the kit's rehearsal runs without a GPU).

amp: one bf16-mixed step (forward and backward, no optimizer) of the module
NAME under torch.autocast(device, torch.bfloat16) from the generated weights
and batch, --steps times (each step's wall time, synchronised, and the peak
of torch.cuda.max_memory_allocated over them), then the same step in
float64 (a deep copy of the module in double) as the reference. With --ours
(offload-run's --dump of our bf16-mixed plan: loss and grad:NAME), per
tensor: error = max|g - g64| / max(max|g64|, 1e-3 x the model's largest
|g64|) for ours and for autocast's (test/drivers/check_precision.py's
measure), and the loss's relative error; the kit judges them. --dry-run:
the trace shapes on the CPU, PyTorch's default weights, one step.

copy: pinned host <-> device copy throughput with torch (a pinned uint8
tensor of --mib MiB, cudaMemcpyAsync through .copy_(non_blocking=True),
timed with CUDA events; best and median of --reps), both directions alone
and at once on two streams; with the PCIe link that nvidia-smi reports and
its published per-direction rate (2.0/3.9/7.9/15.8/31.5/63.0 GB/s per x16 for
generations 1-6... scaled by width), and the h100-sxm target's 45 GB/s.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time


def write(path, data):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(data, f, indent=1)
    os.replace(tmp, path)


def wrap_checkpoint(container, j):
    import torch.utils.checkpoint as cp
    import torch.nn as nn
    inner = container[j]

    class Checkpointed(nn.Module):
        def __init__(self, m):
            super().__init__()
            self.m = m

        def forward(self, *args, **kwargs):
            return cp.checkpoint(self.m, *args, use_reentrant=False, **kwargs)

    container[j] = Checkpointed(inner)


def batch_and_params(a, dev):
    """The batch (x, y on `dev`), the parameters ({name: array}, None in a
    dry run: the model's own initialisation) and the steps to run: from
    the bundle's inputs.npz and params.npz, or one generated batch and one
    step with --dry-run."""
    import numpy as np
    import torch
    import gen
    import models

    if a.dry_run:
        xs = [torch.from_numpy(gen.make(e, 1)) for e in models.input_specs(a.model, trace=True)]
        arrays, steps = None, 1
    else:
        with np.load(a.inputs) as z:
            xs = [torch.from_numpy(z["x"].copy()), torch.from_numpy(z["y"].copy())]
        with np.load(a.params) as z:
            arrays = {k: z[k] for k in z.files}
        steps = a.steps
    return xs[0].to(dev), xs[1].to(dev), arrays, steps


def sbs(a):
    import numpy as np
    import torch
    import torch.nn.functional as F
    import models

    dev = torch.device("cpu" if a.dry_run else a.device)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cudnn.benchmark = False
    try:
        cudnn = torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None
    except Exception as e:  # noqa: BLE001 (e.g. "cuDNN version incompatibility")
        cudnn = "error: %s" % str(e)[:200]
    try:
        device = torch.cuda.get_device_name(0) if dev.type == "cuda" else "cpu"
    except Exception as e:  # noqa: BLE001 (recorded; the variants then fail on their own)
        device = "error: %s" % str(e)[:200]
    info = {"torch": torch.__version__, "cuda": torch.version.cuda, "cudnn": cudnn,
            "device": device,
            "threads": torch.get_num_threads(),
            "tf32": False, "model": a.model}
    out = {"torch": info, "variants": {}}
    write(a.out, out)
    x, y, arrays, steps = batch_and_params(a, dev)
    for variant in ("eager", "checkpoint"):
        rec = {"steps": []}
        out["variants"][variant] = rec
        try:
            model = models.build(a.model)
            if arrays is not None:
                models.load_arrays(model, arrays)
            if variant == "checkpoint":
                for container, _, j in models.blocks(a.model, model):
                    wrap_checkpoint(container, j)
            model = model.to(dev).train()
            opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
            if dev.type == "cuda":
                torch.cuda.synchronize()
                torch.cuda.reset_peak_memory_stats()
            for _ in range(steps):
                t0 = time.perf_counter()
                opt.zero_grad(set_to_none=True)
                if models.returns_loss(a.model):
                    loss = model(x, y)
                else:
                    loss = F.cross_entropy(model(x), y)
                loss.backward()
                opt.step()
                if dev.type == "cuda":
                    torch.cuda.synchronize()
                rec["steps"].append({"seconds": time.perf_counter() - t0, "loss": float(loss.item())})
                write(a.out, out)
            if dev.type == "cuda":
                rec["peak"] = int(torch.cuda.max_memory_allocated())
                rec["reserved_peak"] = int(torch.cuda.max_memory_reserved())
            del model, opt, loss
        except Exception as e:  # noqa: BLE001 (recorded; the next variant still runs)
            rec["error"] = "%s: %s" % (type(e).__name__, str(e)[:500])
        if dev.type == "cuda":
            torch.cuda.empty_cache()
        write(a.out, out)
    bad = [v for v, r in out["variants"].items() if r.get("error")]
    for v, r in out["variants"].items():
        print("%s %s: %s" % (a.model, v, r.get("error") or "%d steps, first loss %.6f, peak %s" % (
            len(r["steps"]), r["steps"][0]["loss"], r.get("peak"))))
    return 1 if bad else 0


def amp(a):
    import numpy as np
    import torch
    import torch.nn.functional as F
    import models

    dev = torch.device("cpu" if a.dry_run else a.device)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cudnn.benchmark = False
    cuda = dev.type == "cuda"
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    out = {"torch": {"torch": torch.__version__, "cuda": torch.version.cuda,
                     "device": torch.cuda.get_device_name(0) if cuda else "cpu",
                     "autocast": "torch.autocast(%r, torch.bfloat16)" % dev.type},
           "model": a.model, "autocast": {"steps": []}}
    write(a.out, out)
    x, y, arrays, steps = batch_and_params(a, dev)
    model = models.build(a.model)
    if arrays is not None:
        models.load_arrays(model, arrays)
    model = model.to(dev).train()

    def loss_of(m, xx):
        if models.returns_loss(a.model):
            return m(xx, y)
        return F.cross_entropy(m(xx), y)

    rec = out["autocast"]
    grads = None
    try:
        if cuda:
            sync()
            torch.cuda.reset_peak_memory_stats()
        for s in range(steps):
            t0 = time.perf_counter()
            for p in model.parameters():
                p.grad = None
            with torch.autocast(device_type=dev.type, dtype=torch.bfloat16):
                loss = loss_of(model, x)
            loss.backward()
            sync()
            rec["steps"].append({"seconds": time.perf_counter() - t0, "loss": float(loss.item())})
            if s == 0:
                grads = {n: p.grad.detach().float() for n, p in model.named_parameters()
                         if p.grad is not None}
            write(a.out, out)
        if cuda:
            rec["peak"] = int(torch.cuda.max_memory_allocated())
            rec["reserved_peak"] = int(torch.cuda.max_memory_reserved())
    except Exception as e:  # noqa: BLE001 (recorded)
        rec["error"] = "%s: %s" % (type(e).__name__, str(e)[:500])
        write(a.out, out)
        return 1
    del model
    if cuda:
        torch.cuda.empty_cache()
    try:
        # Built after the timed steps (so PyTorch's peak is autocast's alone),
        # from the same weights (models.build seeds PyTorch's default init
        # for --dry-run).
        model64 = models.build(a.model)
        if arrays is not None:
            models.load_arrays(model64, arrays)
        model64 = model64.double().to(dev).train()
        x64 = x.double() if x.is_floating_point() else x
        loss64 = loss_of(model64, x64)
        loss64.backward()
        g64 = {n: p.grad.detach() for n, p in model64.named_parameters() if p.grad is not None}
        out["f64"] = {"loss": float(loss64.item())}
    except Exception as e:  # noqa: BLE001 (recorded)
        out["f64"] = {"error": "%s: %s" % (type(e).__name__, str(e)[:500])}
        write(a.out, out)
        return 1
    # Errors against float64, per tensor (check_precision.py's measure).
    largest = max(float(g.abs().max()) for g in g64.values()) if g64 else 0.0
    floor = 1e-3 * largest

    def err(g, r):
        g = torch.as_tensor(g, device=r.device).to(torch.float64)
        return float((g - r).abs().max()) / max(float(r.abs().max()), floor, 1e-30)

    l64 = out["f64"]["loss"]
    errs = {"loss": {"autocast": abs(rec["steps"][0]["loss"] - l64) / max(abs(l64), 1e-30)}}
    ours = None
    if a.ours:
        ours = np.load(a.ours)
        lo = float(np.asarray(ours["loss"]).reshape(-1)[0]) if "loss" in ours.files else None
        out["ours_loss"] = lo
        errs["loss"]["ours"] = None if lo is None else abs(lo - l64) / max(abs(l64), 1e-30)
    missing = []
    for n, r in g64.items():
        e = {"autocast": err(grads[n], r)}
        if ours is not None:
            if "grad:" + n in ours.files:
                e["ours"] = err(np.asarray(ours["grad:" + n]).reshape(tuple(r.shape)), r)
            else:
                missing.append(n)
        errs[n] = e
    out["errors"] = errs
    out["missing_in_ours"] = missing
    out["largest_f64_grad"] = largest
    write(a.out, out)
    print("%s amp: %d steps, first loss %.6f (f64 %.6f), peak %s, %d tensors compared" % (
        a.model, len(rec["steps"]), rec["steps"][0]["loss"], l64, rec.get("peak"), len(errs)))
    return 0


# Per-lane rate of PCIe generations 1-6 in GB/s per direction (after line
# encoding): 2.5 GT/s 8b/10b, 5 GT/s 8b/10b, 8/16/32 GT/s 128b/130b, 64 GT/s.
PCIE_LANE_GBPS = {1: 0.25, 2: 0.5, 3: 0.985, 4: 1.969, 5: 3.938, 6: 7.563}


def link_info():
    try:
        r = subprocess.run(["nvidia-smi", "--query-gpu=pcie.link.gen.current,pcie.link.gen.max,"
                            "pcie.link.width.current,pcie.link.width.max", "--format=csv,noheader"],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=30)
        gc, gm, wc, wm = [v.strip() for v in r.stdout.strip().splitlines()[0].split(",")]
        d = {"gen_current": gc, "gen_max": gm, "width_current": wc, "width_max": wm}
        try:
            gen, width = int(gm), int(wm)
            d["published_gbps_per_direction"] = round(PCIE_LANE_GBPS[gen] * width, 1)
            d["link"] = "PCIe gen%d x%d" % (gen, width)
        except (ValueError, KeyError):
            d["link"] = "PCIe gen %s x%s" % (gm, wm)
        return d
    except (OSError, subprocess.SubprocessError, ValueError, IndexError) as e:
        return {"link": "unknown (%s)" % e}


def copy(a):
    import torch
    n = a.mib << 20
    host = torch.empty(n, dtype=torch.uint8, pin_memory=True)
    host2 = torch.empty(n, dtype=torch.uint8, pin_memory=True)
    host.fill_(1)
    dev = torch.empty(n, dtype=torch.uint8, device="cuda")
    dev2 = torch.empty(n, dtype=torch.uint8, device="cuda")

    def timed(fn, stream=None):
        s = stream or torch.cuda.current_stream()
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        e0.record(s)
        fn()
        e1.record(s)
        e1.synchronize()
        return e0.elapsed_time(e1) / 1e3

    res = {"bytes": n, "reps": a.reps, "method": "torch .copy_(non_blocking=True), pinned, CUDA events"}
    for name, fn in (("h2d", lambda: dev.copy_(host, non_blocking=True)),
                     ("d2h", lambda: host2.copy_(dev, non_blocking=True))):
        fn()
        torch.cuda.synchronize()
        ts = [timed(fn) for _ in range(a.reps)]
        res[name + "_gbps"] = round(n / min(ts) / 1e9, 2)
        res[name + "_median_gbps"] = round(n / statistics.median(ts) / 1e9, 2)
    # Both directions at once, on two streams.
    s1, s2 = torch.cuda.Stream(), torch.cuda.Stream()
    torch.cuda.synchronize()
    best = None
    for _ in range(a.reps):
        t0 = time.perf_counter()
        with torch.cuda.stream(s1):
            dev.copy_(host, non_blocking=True)
        with torch.cuda.stream(s2):
            host2.copy_(dev2, non_blocking=True)
        torch.cuda.synchronize()
        t = time.perf_counter() - t0
        best = t if best is None else min(best, t)
    res["both_directions_gbps_each"] = round(n / best / 1e9, 2)
    res.update(link_info())
    res["h100_sxm_target_gbps"] = 45.0
    write(a.out, res)
    print(json.dumps(res))
    return 0


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog=__doc__.split("\n", 2)[2])
    sub = ap.add_subparsers(dest="cmd", required=True)
    # The options of both training parts (batch_and_params reads them).
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--model", required=True)
    common.add_argument("--params")
    common.add_argument("--inputs")
    common.add_argument("--steps", type=int, default=5)
    common.add_argument("--dry-run", action="store_true")
    common.add_argument("--device", default="cuda", choices=["cuda", "cpu"],
                        help="cpu: the kit's rehearsal (no peak figures)")
    common.add_argument("--out", required=True)
    sub.add_parser("sbs", parents=[common], help="eager and checkpointed training steps")
    m = sub.add_parser("amp", parents=[common],
                       help="a bf16-mixed step under torch.autocast and in float64")
    m.add_argument("--ours", help="offload-run --dump of our bf16-mixed step (loss, grad:NAME)")
    c = sub.add_parser("copy", help="pinned copy throughput")
    c.add_argument("--mib", type=int, default=256)
    c.add_argument("--reps", type=int, default=5)
    c.add_argument("--out", required=True)
    a = ap.parse_args(argv)
    if a.cmd == "sbs":
        if not a.dry_run and not (a.params and a.inputs):
            ap.error("sbs needs --params and --inputs (or --dry-run)")
        return sbs(a)
    if a.cmd == "amp":
        if not a.dry_run and not (a.params and a.inputs):
            ap.error("amp needs --params and --inputs (or --dry-run)")
        return amp(a)
    return copy(a)


if __name__ == "__main__":
    sys.exit(main())
