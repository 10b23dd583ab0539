#!/usr/bin/env python3
"""Data parallel (--offload-data-parallel, offload-run --world-size) against DDP.

    PYTHONPATH=python:test/drivers /usr/bin/python3 test/drivers/check_data_parallel.py \\
        --bin build/bin --work DIR [--model mlp|transformer|gpt] [--steps 3] [--optimizer sgd|adamw]
        [--checks oracle,ws1,mismatch,leave] [--before --offload-early-update] [--zero1]

The model's global batch (export_models.make_inputs at twice the local batch)
is split between 2 ranks, rank r taking rows [r*B, (r+1)*B). Checks:

oracle    2 offload-run processes started by torchrun --no-python (RANK,
          WORLD_SIZE, MASTER_ADDR/PORT; loopback), the step built with
          --offload-data-parallel (small buckets, several per step), against
          PyTorch's DistributedDataParallel with the gloo backend, 2
          processes over loopback, the same split, --optimizer (SGD with
          momentum, or AdamW): every
          rank's loss per step and the parameters after the last step, judged
          by the float64-oracle rule (python/offload/testing.py, the zoo
          rule: our error against DDP in float64 at most 4x DDP fp32's own,
          or the floor), and both ranks' parameters bit-identical.
ws1       world size 1: the step with --offload-data-parallel gives every
          output bit for bit as the step without it.
mismatch  two ranks with plans of different budgets (one with
          --offload-recompute): both refuse before the first step, naming
          the difference.
leave     rank 1 runs one step and exits; rank 0's second step fails within
          its collective timeout, naming rank 1 and the collective.

With --zero1 the step is built with --offload-data-parallel="... zero=1
world-size=2" (optimizer state sharded across the 2 ranks; the same
averaged gradient and update, so the same DDP oracle applies, its optimizer
wrapped in torch.distributed.optim.ZeroRedundancyOptimizer), and:

oracle    also: both ranks' parameters and losses bit-identical to the plain
          (unsharded) data-parallel step's on 2 ranks (each element's sum
          is a + b in the reduce-scatter's ring and in the all-reduce).
ws1       the step built with zero=1 world-size=1 against the step without
          data parallel: losses, parameters and the step counter bit for
          bit, and each zero1.bucket<K>.<state> equal to the per-parameter
          state flattened in the shard order of the pass's report.
worldsize the world-size-2 plan run by one rank: refused before the first
          step, naming both world sizes.
micro     with --offload-autodiff micro-batches=2 (gradient accumulation),
          the ZeRO-1 step and the plain data-parallel step on 2 ranks:
          losses and parameters bit-identical.

Processes run with bounded timeouts (a hung rank fails the check). Exits 1
on any failure.
"""
import argparse
import importlib.util
import os
import re
import shlex
import shutil
import socket
import subprocess
import sys
import tempfile
import time

import numpy as np
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

import export_models as em
from pipeline import run

LOCAL_BATCH = {"mlp": 16, "transformer": 4, "gpt": 2}
LR, MOMENTUM = 0.1, 0.9
# Each optimizer as --offload-autodiff spells it and as torch.optim builds it.
OPTIMIZERS = {
    "sgd": (f"optimizer=sgd lr={LR} momentum={MOMENTUM}",
            torch.optim.SGD, dict(lr=LR, momentum=MOMENTUM)),
    "adamw": ("optimizer=adamw lr=0.001 weight-decay=0.01",
              torch.optim.AdamW, dict(lr=0.001, weight_decay=0.01)),
}
# The per-parameter optimizer state each ZeRO-1 shard concatenates.
STATE_KINDS = {"sgd": ["momentum_buffer"], "adamw": ["exp_avg", "exp_avg_sq"]}
PROC_TIMEOUT = 120


def load_testing():
    """python/offload/testing.py (the float64-oracle rule), loaded by path."""
    package = importlib.util.find_spec("offload")
    if package is None:
        raise SystemExit("check_data_parallel.py: the package offload is not on PYTHONPATH")
    spec = importlib.util.spec_from_file_location(
        "offload_testing", os.path.join(package.submodule_search_locations[0], "testing.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def ddp_worker(rank, world, init, model_name, params, xs, ys, steps, dtype, out, optimizer,
               zero=False):
    """One DDP rank: `steps` optimizer steps on its shard (with `zero`,
    through torch.distributed.optim.ZeroRedundancyOptimizer: the state
    sharded, the same step); writes losses and final parameters to
    out % rank."""
    os.environ["GLOO_SOCKET_IFNAME"] = "lo"
    dist.init_process_group("gloo", init_method=init, rank=rank, world_size=world)
    model = em.build_model(model_name)
    em.load_state_arrays(model, params)
    model = model.to(dtype).train()
    ddp = torch.nn.parallel.DistributedDataParallel(model)
    _, cls, kwargs = OPTIMIZERS[optimizer]
    if zero:
        from torch.distributed.optim import ZeroRedundancyOptimizer
        opt = ZeroRedundancyOptimizer(ddp.parameters(), optimizer_class=cls, **kwargs)
    else:
        opt = cls(ddp.parameters(), **kwargs)
    x, y = xs[rank], ys[rank]
    if x.is_floating_point():
        x = x.to(dtype)
    losses = []
    for _ in range(steps):
        opt.zero_grad()
        loss = em.compute_loss(model_name, ddp(*em.forward_args(model_name, x, y)), y)
        loss.backward()
        opt.step()
        losses.append(float(loss))
    arrays = {n: p.detach().to(torch.float64).numpy() for n, p in model.named_parameters()}
    np.savez(out % rank, losses=np.array(losses), **arrays)
    dist.destroy_process_group()


def ddp_reference(work, model_name, params, xs, ys, steps, dtype, optimizer, zero=False):
    tag = ("zero-" if zero else "") + ("f64" if dtype == torch.float64 else "f32")
    init = "file://" + os.path.join(work, f"ddp-{tag}-init")
    if os.path.exists(init[7:]):
        os.remove(init[7:])
    out = os.path.join(work, f"ddp-{tag}-rank%d.npz")
    # Forked, not spawned: the workers inherit the model code and tensors.
    ctx = mp.get_context("fork")
    procs = [ctx.Process(target=ddp_worker,
                         args=(r, 2, init, model_name, params, xs, ys, steps, dtype, out,
                               optimizer, zero))
             for r in range(2)]
    for p in procs:
        p.start()
    deadline = time.time() + PROC_TIMEOUT
    for p in procs:
        p.join(timeout=max(1, deadline - time.time()))
        if p.is_alive():
            p.kill()
            p.join()
    if any(p.exitcode != 0 for p in procs):
        raise SystemExit(f"DDP reference ({tag}) failed: exit codes {[p.exitcode for p in procs]}")
    return [dict(np.load(out % r)) for r in range(2)]


def torchrun_command():
    """torchrun of the PyTorch 2.x environment (scripts/torch2-python -m
    torch.distributed.run; Debian's 1.13 torchrun fails under Python 3.11),
    or None when that environment is missing."""
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    cmd = [os.path.join(root, "scripts", "torch2-python"), "-m", "torch.distributed.run"]
    try:
        r = subprocess.run(cmd + ["--help"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                           timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return cmd if r.returncode == 0 else None


def start(cmd, env=None, log=None):
    return subprocess.Popen(cmd, stdout=open(log, "w"), stderr=subprocess.STDOUT,
                            env=env, text=True)


def finish(procs, logs):
    """Waits (bounded) for every process; returns [(returncode, output)]."""
    deadline = time.time() + PROC_TIMEOUT
    results = []
    for p, log in zip(procs, logs):
        try:
            p.wait(timeout=max(1, deadline - time.time()))
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
        results.append((p.returncode, open(log).read()))
    return results


def build_plan(a, mlir, name, passes, autodiff_extra=""):
    plan = os.path.join(a.work, name + ".oflp")
    run([os.path.join(a.bin, "offload-opt"), mlir,
         f"--offload-autodiff={OPTIMIZERS[a.optimizer][0]}{autodiff_extra}"] + passes
        + ["-o", os.path.join(a.work, name + ".mlir")])
    run([os.path.join(a.bin, "offload-translate"), "--offload-to-plan",
         os.path.join(a.work, name + ".mlir"), "-o", plan])
    return plan


def names_of(dump):
    """The parameter names of an --dump file (its keys other than optimizer
    state: those with a '.' whose last part is not a state's)."""
    state = ("momentum_buffer", "exp_avg", "exp_avg_sq", "step")
    return [k for k in dump.keys() if k.rsplit(".", 1)[-1] not in state and k != "losses"]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bin", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--model", default="mlp", choices=sorted(LOCAL_BATCH))
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--optimizer", default="sgd", choices=sorted(OPTIMIZERS))
    ap.add_argument("--checks", default="oracle,ws1,mismatch,leave",
                    help="comma-separated; worldsize needs --zero1")
    ap.add_argument("--before", default="",
                    help="passes before --offload-data-parallel, e.g. --offload-early-update")
    ap.add_argument("--bucket-bytes", type=int, default=20000,
                    help="small, so that a step has several buckets")
    ap.add_argument("--zero1", action="store_true",
                    help="ZeRO-1: optimizer state sharded across the ranks")
    a = ap.parse_args(argv)
    checks = a.checks.split(",")
    shutil.rmtree(a.work, ignore_errors=True)
    os.makedirs(a.work)
    w = lambda n: os.path.join(a.work, n)
    testing = load_testing()
    B = LOCAL_BATCH[a.model]

    # Export at the local batch; the global batch split between the ranks.
    run([sys.executable, "-m", "export_models", "--out", a.work, "--models", a.model,
         "--batch", str(B)])
    imp = [os.path.join(a.bin, "offload-import"), w(a.model + ".pt"), "-o", w("model.mlir")]
    if not em.returns_loss(a.model):
        imp += ["--loss", "cross_entropy"]
    x, y = em.make_inputs(a.model, 2 * B)
    xs, ys = [x[r * B:(r + 1) * B] for r in range(2)], [y[r * B:(r + 1) * B] for r in range(2)]
    imp += ["--input", "x=" + em.type_string(xs[0]), "--input", "y=" + em.type_string(ys[0])]
    run(imp)
    for r in range(2):
        np.savez(w(f"in{r}.npz"), x=xs[r].numpy(), y=ys[r].numpy())
    params_npz = w(a.model + ".params.npz")
    params = dict(np.load(params_npz))
    before = shlex.split(a.before)
    zero = lambda ws: f" zero=1 world-size={ws}" if a.zero1 else ""
    dp = build_plan(a, w("model.mlir"), "dp",
                    before + [f"--offload-data-parallel=bucket-bytes={a.bucket_bytes}{zero(2)}"])
    buckets = len(re.findall(r"offload.(all_reduce|reduce_scatter) ", open(w("dp.mlir")).read()))
    print(f"data parallel: {a.model} ({a.optimizer}), local batch {B} x 2 ranks, "
          f"{buckets} buckets per step"
          + (", ZeRO-1 (optimizer state sharded)" if a.zero1 else "")
          + (f", after {a.before}" if a.before else ""))
    failed = False
    runner = [os.path.join(a.bin, "offload-run"), "--params", params_npz, "--threads", "1"]
    torchrun = torchrun_command()

    def two_ranks(plan, tag):
        """Runs `plan` on 2 ranks (torchrun --no-python when there is one);
        returns (exit codes, logs); dumps to {tag}$RANK.npz."""
        rdzv = tempfile.mkdtemp(prefix="rdzv-", dir=a.work)
        env = dict(os.environ, OFFLOAD_RENDEZVOUS="file:" + rdzv, OFFLOAD_COLLECTIVE_TIMEOUT="60")
        rank_cmd = " ".join(runner + [plan, "--steps", str(a.steps),
                                      "--inputs", w("in$RANK.npz"), "--dump", w(tag + "$RANK.npz")])
        if torchrun:
            cmd = torchrun + ["--nnodes", "1", "--nproc_per_node", "2", "--master_addr", "127.0.0.1",
                   "--master_port", str(free_port()), "--no_python",
                   "sh", "-c", f"exec {rank_cmd} > {w(tag + 'rank$RANK.log')} 2>&1"]
            (rc, out), = finish([start(cmd, env, w(tag + "torchrun.log"))], [w(tag + "torchrun.log")])
            logs = [open(w(f"{tag}rank{r}.log")).read()
                    if os.path.exists(w(f"{tag}rank{r}.log")) else "" for r in range(2)]
            rcs = [rc, rc]
            print("launcher: torchrun --no-python (PyTorch 2.x's)")
        else:
            procs = [start(["sh", "-c", "exec " + rank_cmd],
                           dict(env, RANK=str(r), WORLD_SIZE="2"), w(f"{tag}rank{r}.log"))
                     for r in range(2)]
            res = finish(procs, [w(f"{tag}rank0.log"), w(f"{tag}rank1.log")])
            rcs, logs = [r[0] for r in res], [r[1] for r in res]
            print("launcher: RANK/WORLD_SIZE set by this script (no PyTorch 2.x torchrun)")
        return rcs, logs

    step_losses = lambda log: [float(v) for v in re.findall(r"^step \d+: loss (\S+)", log, re.M)]
    if "oracle" in checks:
        rcs, logs = two_ranks(dp, "out")
        if any(rcs):
            print("oracle: FAIL: offload-run ranks exited with", rcs)
            print("\n".join(logs))
            return 1
        ours = [dict(np.load(w(f"out{r}.npz"))) for r in range(2)]
        # With --zero1 the reference is DDP with ZeroRedundancyOptimizer.
        ref64 = ddp_reference(a.work, a.model, params, xs, ys, a.steps, torch.float64, a.optimizer,
                              a.zero1)
        ref32 = ddp_reference(a.work, a.model, params, xs, ys, a.steps, torch.float32, a.optimizer,
                              a.zero1)
        names = [n for n in ref64[0] if n != "losses"]
        for r in range(2):
            losses = step_losses(logs[r])
            v = testing.judge_trajectory(losses, ref32[r]["losses"], ref64[r]["losses"])
            failed |= not v.ok
            print(f"oracle: rank {r} loss per step vs DDP"
                  f"{' + ZeroRedundancyOptimizer' if a.zero1 else ''}: {v}")
            for m in re.finditer(r"peak device bytes: planned (\d+) measured (\d+)", logs[r]):
                failed |= m.group(1) != m.group(2)
                print(f"oracle: rank {r} peak device bytes planned {m.group(1)} measured {m.group(2)}")
        v = testing.judge_tensors({n: ours[0][n] for n in names}, {n: ref32[0][n] for n in names},
                                  {n: ref64[0][n] for n in names})
        failed |= not v.ok
        print(f"oracle: parameters after {a.steps} steps vs DDP"
              f"{' + ZeroRedundancyOptimizer' if a.zero1 else ''}: {v}")
        same = all(np.array_equal(ours[0][n], ours[1][n]) for n in names)
        failed |= not same
        print(f"oracle: both ranks' parameters bit-identical: {'ok' if same else 'FAIL'}")
        if a.zero1:
            plain = build_plan(a, w("model.mlir"), "plain",
                               before + [f"--offload-data-parallel=bucket-bytes={a.bucket_bytes}"])
            prcs, plogs = two_ranks(plain, "plain")
            theirs = [dict(np.load(w(f"plain{r}.npz"))) for r in range(2)] if not any(prcs) else None
            same = (theirs is not None
                    and all(np.array_equal(ours[r][n], theirs[r][n]) for r in range(2) for n in names)
                    and all(step_losses(logs[r]) == step_losses(plogs[r]) for r in range(2)))
            failed |= not same
            print(f"oracle: ZeRO-1 losses and parameters bit-identical to plain data parallel "
                  f"(2 ranks): {'ok' if same else 'FAIL'}")
            if theirs is not None:
                state = lambda d: sum(v.nbytes for k, v in d.items() if k not in names
                                      and k != "losses")
                print(f"oracle: optimizer state bytes per rank: {state(ours[0])} with ZeRO-1, "
                      f"{state(theirs[0])} without")

    if "ws1" in checks:
        single = build_plan(a, w("model.mlir"), "single", before)
        dp1 = dp
        if a.zero1:
            dp1 = build_plan(a, w("model.mlir"), "dp1", before +
                             [f"--offload-data-parallel=bucket-bytes={a.bucket_bytes}{zero(1)} "
                              f"report={w('dp1.report')}"])
        r1 = run(runner + [dp1, "--steps", str(a.steps), "--inputs", w("in0.npz"),
                           "--dump", w("ws1-dp.npz")])
        r2 = run(runner + [single, "--steps", str(a.steps), "--inputs", w("in0.npz"),
                           "--dump", w("ws1-single.npz")])
        d, s = np.load(w("ws1-dp.npz")), np.load(w("ws1-single.npz"))
        if a.zero1:
            # The sharded state has its own names; everything else must match,
            # and the losses. At world size 1 each shard is its bucket's
            # per-parameter state, flattened in the report's shard order.
            keys = [k for k in s.keys() if k in d.keys()]
            same = (all(k in d.keys() for k in names_of(s)) and
                    all(np.array_equal(d[k], s[k]) for k in keys) and
                    step_losses(r1) == step_losses(r2) and len(step_losses(r1)) == a.steps)
            layout = re.findall(r"bucket (\d+): .*parameters in shard order: (.*)",
                                open(w("dp1.report")).read())
            shards = 0
            for k, params_in in layout:
                for kind in STATE_KINDS[a.optimizer]:
                    flat = np.concatenate([s[f"{p}.{kind}"].ravel() for p in params_in.split()])
                    same &= np.array_equal(d[f"zero1.bucket{k}.{kind}"], flat)
                    shards += 1
            same &= shards > 0
            print(f"ws1: {shards} state shards equal the per-parameter state in shard order: "
                  f"{'ok' if same else 'FAIL'}")
        else:
            same = sorted(d.keys()) == sorted(s.keys()) and all(np.array_equal(d[k], s[k]) for k in d)
        failed |= not same
        print(f"ws1: world size 1 bit-identical to no data parallel ({len(d.keys())} outputs): "
              f"{'ok' if same else 'FAIL'}")

    if "worldsize" in checks and a.zero1:
        p = subprocess.run(runner + [dp, "--inputs", w("in0.npz")], stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True, timeout=PROC_TIMEOUT)
        ok = (p.returncode != 0 and "for world size 2, but the job has 1 rank" in p.stdout
              and "step 0" not in p.stdout)
        failed |= not ok
        msg = re.search(r"error: (.*)", p.stdout)
        print(f"worldsize: the world-size-2 ZeRO-1 plan refused by one rank: {'ok' if ok else 'FAIL'}"
              f" ({msg.group(1) if msg else p.stdout.strip()[-300:]})")

    if "micro" in checks and a.zero1:
        plans = [build_plan(a, w("model.mlir"), f"micro-{tag}", before +
                            [f"--offload-data-parallel=bucket-bytes={a.bucket_bytes}{z}"],
                            " micro-batches=2")
                 for tag, z in (("zero", zero(2)), ("plain", ""))]
        (zrcs, zlogs), (prcs, plogs) = two_ranks(plans[0], "microz"), two_ranks(plans[1], "microp")
        ok = not any(zrcs) and not any(prcs)
        if ok:
            z0, p0 = dict(np.load(w("microz0.npz"))), dict(np.load(w("microp0.npz")))
            ok = (all(np.array_equal(z0[n], p0[n]) for n in names_of(p0) if n != "loss")
                  and all(step_losses(zlogs[r]) == step_losses(plogs[r]) for r in range(2)))
        failed |= not ok
        print(f"micro: micro-batches=2, ZeRO-1 bit-identical to plain data parallel (2 ranks): "
              f"{'ok' if ok else 'FAIL'}")

    if "mismatch" in checks:
        other = build_plan(a, w("model.mlir"), "other", before +
                           [f"--offload-data-parallel=bucket-bytes={a.bucket_bytes}{zero(2)}",
                            "--offload-recompute=policy=all"])
        rdzv = tempfile.mkdtemp(prefix="rdzv-", dir=a.work)
        procs = [start(runner + [plan, "--inputs", w(f"in{r}.npz"), "--world-size", "2",
                                 "--rank", str(r), "--rendezvous", "file:" + rdzv,
                                 "--collective-timeout", "30"], log=w(f"mismatch{r}.log"))
                 for r, plan in enumerate([dp, other])]
        res = finish(procs, [w("mismatch0.log"), w("mismatch1.log")])
        for r, (rc, out) in enumerate(res):
            ok = rc != 0 and "runs a different plan from rank 0's" in out and "step 0" not in out
            failed |= not ok
            msg = re.search(r"error: (.*)", out)
            print(f"mismatch: rank {r} refused before the first step: {'ok' if ok else 'FAIL'}"
                  f" ({msg.group(1) if msg else out.strip()[:300]})")

    if "leave" in checks:
        rdzv = tempfile.mkdtemp(prefix="rdzv-", dir=a.work)
        timeout = 20
        t0 = time.time()
        procs = [start(runner + [dp, "--inputs", w(f"in{r}.npz"), "--world-size", "2",
                                 "--rank", str(r), "--rendezvous", "file:" + rdzv,
                                 "--collective-timeout", str(timeout),
                                 "--steps", "3" if r == 0 else "1"], log=w(f"leave{r}.log"))
                 for r in range(2)]
        res = finish(procs, [w("leave0.log"), w("leave1.log")])
        seconds = time.time() - t0
        rc, out = res[0]
        ok = (rc != 0 and res[1][0] == 0 and "rank 1 did not complete it" in out
              and ("offload.reduce_scatter of bucket" if a.zero1 else "offload.all_reduce of bucket") in out
              and seconds < timeout + 30)
        failed |= not ok
        msg = re.search(r"error: (.*)", out)
        print(f"leave: rank 0 failed naming rank 1 and the collective in {seconds:.1f} s "
              f"(timeout {timeout} s): {'ok' if ok else 'FAIL'}"
              f" ({msg.group(1) if msg else out.strip()[-300:]})")

    print("data parallel:", "FAIL" if failed else "ok")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
