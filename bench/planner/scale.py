#!/usr/bin/env python3
"""Planning time against step size: prints one row per step.

    /usr/bin/python3 bench/planner/scale.py --bin build/bin [--work DIR]
        [--layers 8,32,128] [--chain 1000,10000,100000] [--budget-pct 40]

Two families of steps:
* N-layer torch.nn.TransformerEncoder (d_model 64, 4 heads, FFN 128, batch
  2, sequence 16), exported by PyTorch and imported (the brief's 128-layer
  step has ~15k ops after autodiff);
* a synthetic chain of linear + relu layers written directly as MLIR, sized
  so the training step (forward, backward, SGD updates) has about 1k, 10k
  and 100k ops (8 step ops per layer).
For each: ops in the training step, the unplanned device arena, then the
wall time of the whole `offload-opt step.mlir --offload-plan-memory=...`
run (parse, plan, print; the plan is then lowered with offload-translate
--offload-to-plan, untimed, to show it lowers) and the
planner's own time from its report, at a budget of --budget-pct percent of
the unplanned arena on h100-sxm. The growth column is the time ratio to the
previous row divided by the ops ratio (1.0 = linear). `wall s` is the whole
offload-opt run's wall time and `cpu s` its CPU time (user + system), which
does not count time lost to other processes on a shared machine.
"""
import argparse
import os
import re
import resource
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def run(cmd):
    """Runs cmd; returns its output (stdout and stderr)."""
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if r.returncode != 0:
        sys.exit("command failed: " + " ".join(cmd) + "\n" + r.stdout[-3000:])
    return r.stdout


def export_transformer(layers, path):
    code = f"""
import torch
torch.manual_seed(0)
layer = torch.nn.TransformerEncoderLayer(64, 4, dim_feedforward=128, dropout=0.0, batch_first=True)
class M(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.enc = torch.nn.TransformerEncoder(layer, {layers}, enable_nested_tensor=False)
        self.head = torch.nn.Linear(64, 10)
    def forward(self, x):
        return self.head(self.enc(x).mean(1))
m = M().train()
torch.jit.trace(m, torch.randn(2, 16, 64)).save({path!r})
"""
    run(["/usr/bin/python3", "-c", code])


def chain_mlir(layers, width=64, batch=32):
    args = [f"%w{i}: tensor<{width}x{width}xf32> {{offload.name = \"l{i}.weight\", "
            f"offload.role = #offload.role<parameter>}}" for i in range(layers)]
    lines = ["func.func @forward(" + ", ".join(args) +
             f", %x: tensor<{batch}x{width}xf32> {{offload.name = \"x\", offload.role = #offload.role<input>}}"
             f", %y: tensor<{batch}xi64> {{offload.name = \"y\", offload.role = #offload.role<input>}})"
             " -> (tensor<f32> {offload.name = \"loss\", offload.role = #offload.role<loss>})"
             " attributes {offload.step} {", "  offload.phase forward"]
    prev = "%x"
    for i in range(layers):
        lines.append(f"  %h{i} = offload.linear {prev}, %w{i} : tensor<{batch}x{width}xf32>, "
                     f"tensor<{width}x{width}xf32>")
        lines.append(f"  %r{i} = offload.relu %h{i} : tensor<{batch}x{width}xf32>")
        prev = f"%r{i}"
    lines.append(f"  %l = offload.cross_entropy {prev}, %y : tensor<{batch}x{width}xf32>, "
                 f"tensor<{batch}xi64>")
    lines.append("  return %l : tensor<f32>")
    lines.append("}")
    return "\n".join(lines) + "\n"


def measure(name, forward, work, bin_dir, pct, rows):
    opt = os.path.join(bin_dir, "offload-opt")
    step = os.path.join(work, name + ".step.mlir")
    out = run([opt, forward, "--offload-autodiff=optimizer=sgd lr=0.1 momentum=0.9",
               "--offload-memory-report", "-o", step])
    arena = int(re.search(r"device arena bytes: (\d+)", out).group(1))
    ops = sum(1 for line in open(step) if re.match(r"\s+(%\S+ = )?offload\.", line))
    budget = arena * pct // 100
    t0 = time.perf_counter()
    cpu0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    out = run([opt, step, f"--offload-plan-memory=budget={budget} target=h100-sxm report=-",
               "-o", os.path.join(work, name + ".planned.mlir")])
    whole = time.perf_counter() - t0
    cpu1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    run([os.path.join(bin_dir, "offload-translate"), "--offload-to-plan",
         os.path.join(work, name + ".planned.mlir"), "-o", os.path.join(work, name + ".oflp")])
    cpu = (cpu1.ru_utime - cpu0.ru_utime) + (cpu1.ru_stime - cpu0.ru_stime)
    planning = float(re.search(r"planning took ([0-9.]+) s", out).group(1))
    arena_after = re.search(r"device arena: \d+ -> (\d+) bytes", out)
    prev = rows[-1] if rows else None
    growth = (whole / prev[3]) / (ops / prev[1]) if prev else float("nan")
    growth_cpu = (cpu / prev[5]) / (ops / prev[1]) if prev else float("nan")
    rows.append((name, ops, arena, whole, planning, cpu))
    print(f"{name:>18} {ops:>8} {arena:>14} {int(arena_after.group(1)) if arena_after else arena:>14} "
          f"{planning:>10.3f} {whole:>10.3f} {cpu:>10.3f} {growth:>8.2f} {growth_cpu:>8.2f}", flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bin", required=True, help="folder of offload-import and offload-opt")
    ap.add_argument("--work", default="/tmp/offload-planner-scale",
                    help="folder for the generated steps (default %(default)s)")
    ap.add_argument("--layers", default="8,32,128",
                    help="Transformer encoder depths to plan, comma-separated (default %(default)s)")
    ap.add_argument("--chain", default="1000,10000,100000",
                    help="synthetic chain lengths in ops, comma-separated (default %(default)s)")
    ap.add_argument("--budget-pct", type=int, default=40,
                    help="budget in percent of each step's unplanned arena (default %(default)s)")
    args = ap.parse_args()
    os.makedirs(args.work, exist_ok=True)
    print(f"{'step':>18} {'ops':>8} {'arena bytes':>14} {'planned arena':>14} "
          f"{'planner s':>10} {'wall s':>10} {'cpu s':>10} {'growth':>8} {'cpu grw':>8}")
    rows = []
    for n in [int(x) for x in args.layers.split(",") if x]:
        pt = os.path.join(args.work, f"encoder{n}.pt")
        export_transformer(n, pt)
        mlir = os.path.join(args.work, f"encoder{n}.mlir")
        run([os.path.join(args.bin, "offload-import"), pt, "--input", "x=2x16x64xf32",
             "--input", "y=2xi64", "--loss", "cross_entropy", "-o", mlir])
        measure(f"encoder-{n}-layers", mlir, args.work, args.bin, args.budget_pct, rows)
    rows = []
    for n in [int(x) for x in args.chain.split(",") if x]:
        mlir = os.path.join(args.work, f"chain{n}.mlir")
        with open(mlir, "w") as f:
            f.write(chain_mlir(max(1, n // 8)))
        measure(f"chain-{n // 1000}k", mlir, args.work, args.bin, args.budget_pct, rows)


if __name__ == "__main__":
    main()
