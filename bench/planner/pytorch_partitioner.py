#!/usr/bin/env -S scripts/torch2-python
"""The planner against PyTorch's own partitioner at matched saved-activation bytes.

    PYTHONPATH=python scripts/torch2-python bench/planner/pytorch_partitioner.py --bin build/bin
        [--models mlp,transformer,gpt,resnet18] [--fractions 1.0,0.9,...,0.0]
        [--target h100-sxm] [--work DIR] [--quick]

Runs under the PyTorch 2.x virtual environment (scripts/setup-torch2.sh;
`scripts/torch2-python`); the offload side shells out to Debian's
/usr/bin/python3 (python/export_models.py, TorchScript for LibTorch 1.13) and
to build/bin. --quick: mlp only, fractions 1.0, 0.5, 0.0.

PyTorch's side. Every example model of python/export_models.py (its module
definitions, batch sizes and loss, imported, not copied; dropout 0, train
mode) is wrapped as forward(x, y) -> scalar loss and compiled with
torch.compile(backend=aot_autograd(fw_compiler, bw_compiler,
partition_fn=min_cut_rematerialization_partition)): AOTAutograd traces the
joint forward-backward graph and the min-cut rematerialization partitioner
splits it; a wrapper around the partitioner records the forward and backward
FX graphs it returns, and the two "compilers" return the graphs' Python
callables (no Inductor, no C++ compiler). Only the forward runs (it triggers
the partitioning). One step runs
per fraction of torch._functorch.config.activation_memory_budget (default
sweep 1.0, 0.9, ..., 0.0; the runtime estimator and solver stay at their
defaults, "flops" and "dp"). From each partition:
  saved bytes   the tensors the forward graph hands to the backward graph
                (the backward graph's placeholders that are not tangents),
                numel x element size from their fake-tensor metadata. Inputs
                and parameters (primals) and views of them (aten.t of a
                weight, ...) are saved by reference and are not activations:
                they are excluded (and so are the model inputs x and y).
  recomputed    the backward graph's ops that recompute forward values: the
                partitioner copies a recomputed node from the joint graph
                into the backward graph under its forward name, so a
                call_function node of the backward graph whose name is also a
                call_function node of the forward graph is a recomputation.
With graph breaks the graphs of all compiled regions are summed.

Our side. The same model is exported with python/export_models.py, imported,
and its SGD-with-momentum step built (offload-autodiff); our saved values are
the step's offload.save values (all activations: parameters and inputs are
block arguments, never saved values). For each PyTorch point with S saved
bytes, our planner runs under PyTorch's own constraint: `saved-budget=S`
(--offload-plan-memory; docs/planner.md, "A saved budget"), which keeps the
saved bytes left on the device -- saved values neither recomputed nor
offloaded, plus the checkpoints saved, as device buffers (a value and its
views once, as the planner states them) -- at most S, with the device arena
within the target's memory. (Until 7 December 2026 this bench bisected on
the arena budget for the largest budget whose kept bytes were <= S: an arena
budget frees what is live at the peak, including recompute regions'
intermediates and values held by shared regions, which PyTorch's saved bytes
do not count, so it recomputed more than the saved bytes asked for, and it
counted a value and its views twice.) Our recomputed FLOPs are those of the
ops in the planned step's offload.recompute regions (read with
--offload-inline-recompute and the per-op --offload-cost-report, by the
regions' source lines); offloaded bytes are those of saved values the plan
moves to the host.

Three targets: `h100-sxm` (the planner may offload saved values and place
parameters on the host); `h100-slowlink`, a target file equal to h100-sxm
except for a 1 kB/s host link, so that every copy is priced out and the
planner only recomputes where it can (--offload-plan-memory has no option to
disable host offload; the slow link is how this bench switches it off); and
`h100-flops`, the slow link with PyTorch's cost model: matrix products,
convolutions and attention at h100-sxm's fp32 rate, every other op and all
memory traffic free (flops_per_second and memory_bytes_per_second 1e30, the
product ops' rates in op_flops_per_second), so that the planner's price of a
recompute is its FLOPs in flop_counter's convention, which is what the
partitioner minimises with its `flops` estimator (the default). Our planner
minimises simulated step time under an arena budget; on h100-flops that time
is FLOPs, and the comparison asks whether its candidates (the saved values
and, since the checkpoints, any intermediate of a recompute cone) reach what
a min-cut over the whole joint graph reaches.
Parameters on the host, early optimizer updates and the optimizer's own
memory belong to our step only; they change the budget, not the saved bytes
compared.

One FLOP convention on both sides: torch.utils.flop_counter's, i.e. matrix
products and convolutions only, 2 FLOPs per multiply-add, bias additions and
all other ops (elementwise, softmax, normalization, reductions) 0. PyTorch:
torch.utils.flop_counter.flop_registry's formula for each recomputed node
(aten.mm, addmm, bmm, convolution, scaled-dot-product attention, ...), from
the nodes' fake-tensor shapes. Ours: our cost model (lib/Dialect/Offload/IR/
OffloadCost.cpp) for offload.linear, offload.matmul and offload.conv2d, which
is the same 2*M*N*K, minus the bias term it adds (result elements) when the
op has a bias operand, and for the fused offload.attention, N*H*L*S*(2E + 2Ev),
flop_counter's formula for scaled-dot-product attention (until 7 December
2026 our side left the attention out, which undercounted our recompute on
the transformer and gpt wherever a region reran it).

Printed per model: PyTorch's budget fraction, saved bytes, recomputed FLOPs,
what it recomputes; then for each target our plan's device arena, kept saved
bytes, recomputed FLOPs and offloaded bytes, and who recomputes less ("=" when
equal); an arena marked * is the plan of the fewest kept saved bytes (every
saved value recomputed or offloaded, whatever the prices). Saved bytes that rise as the fraction falls are flagged "non-monotonic".
Kept bytes include the checkpoints a plan saves (forward values that
autodiff did not save, kept so that a recompute region stops there).
"""
import argparse
import json
import os
import re
import sys
from collections import Counter

from example_steps import ROOT, build_step, run
# Operator kinds whose FLOPs count (torch.utils.flop_counter's convention).
OUR_PRODUCTS = ("offload.linear", "offload.matmul", "offload.conv2d", "offload.attention")
SLOWLINK = {"name": "h100-slowlink", "memory_bytes": 80000000000,
            "memory_bytes_per_second": 3.35e12, "flops_per_second": 6.69e13,
            "host_to_device_bytes_per_second": 1e3, "device_to_host_bytes_per_second": 1e3}
# PyTorch's `flops` estimator as a target: the products (and the fused
# attention, whose FLOPs flop_counter counts as SDPA's) at the fp32 rate,
# everything else free; the slow link prices copies out.
FLOPS_ONLY = dict(SLOWLINK, name="h100-flops", memory_bytes_per_second=1e30,
                  flops_per_second=1e30,
                  op_flops_per_second={k: 6.69e13 for k in OUR_PRODUCTS})



# --- PyTorch's partitioner ----------------------------------------------------

_VIEW_OPS = {"t", "view", "_unsafe_view", "permute", "transpose", "expand", "alias", "slice",
             "select", "unsqueeze", "squeeze", "reshape", "as_strided", "detach"}


def _aliases_primal(node):
    """True when NODE (forward graph) is a placeholder or a chain of views of one."""
    while node.op == "call_function":
        name = getattr(getattr(node.target, "overloadpacket", None), "__name__", "")
        if name not in _VIEW_OPS or not node.args:
            return False
        node = node.args[0]
    return node.op == "placeholder"


def _node_flops(node):
    """torch.utils.flop_counter FLOPs of one FX node (0 for ops it does not count)."""
    import torch
    from torch.utils._pytree import tree_map
    from torch.utils.flop_counter import flop_registry
    packet = getattr(node.target, "overloadpacket", None)
    if packet not in flop_registry:
        return 0
    val = lambda a: a.meta["val"] if isinstance(a, torch.fx.Node) else a
    args = tree_map(val, node.args)
    kwargs = tree_map(val, node.kwargs)
    return int(flop_registry[packet](*args, **kwargs, out_val=node.meta["val"]))


def pytorch_partition(name, fraction):
    """One training step of NAME partitioned at activation_memory_budget=FRACTION.

    Returns {"saved": activation bytes handed to backward, "by_ref": bytes of
    primals and their views also handed over (not counted), "flops":
    recomputed matmul/conv FLOPs, "ops": Counter of recomputed op kinds,
    "graphs": number of compiled regions}."""
    import torch
    import torch._functorch.config as fcfg
    from torch._dynamo.backends.common import aot_autograd
    from torch._functorch.partitioners import min_cut_rematerialization_partition
    import export_models as em

    graphs = []

    def compiler(gm, example_inputs):
        return gm.forward

    def partition(joint, joint_inputs, **kwargs):
        fw, bw = min_cut_rematerialization_partition(joint, joint_inputs, **kwargs)
        graphs.append(("fw", fw))
        graphs.append(("bw", bw))
        return fw, bw

    class WithLoss(torch.nn.Module):
        def __init__(self, model):
            super().__init__()
            self.model = model

        def forward(self, x, y):
            return em.compute_loss(name, self.model(*em.forward_args(name, x, y)), y)

    model = WithLoss(em.build_model(name, 0.0).train())
    x, y = em.make_inputs(name)
    torch._dynamo.reset()
    fcfg.activation_memory_budget = fraction
    compiled = torch.compile(model, dynamic=False, backend=aot_autograd(
        fw_compiler=compiler, bw_compiler=compiler, partition_fn=partition))
    # Only the forward runs: AOTAutograd traces the joint graph and calls the
    # partitioner when the forward is compiled. (Running the backward is not
    # needed, and for resnet18 below fraction 1.0 PyTorch 2.15 cannot: the
    # recomputed batch norm reads the running statistics that the forward
    # updates in place, and autograd's saved-tensor version check refuses.)
    compiled(x, y)
    fws = [g for k, g in graphs if k == "fw"]
    bws = [g for k, g in graphs if k == "bw"]
    if not fws or len(fws) != len(bws):
        sys.exit(f"{name}: expected one backward graph per forward graph, got "
                 f"{len(fws)} forward and {len(bws)} backward")
    saved = by_ref = flops = 0
    ops = Counter()
    for fw, bw in zip(fws, bws):
        fw_nodes = {n.name: n for n in fw.graph.nodes}
        fw_calls = {n.name for n in fw.graph.nodes if n.op == "call_function"}
        for n in bw.graph.nodes:
            if n.op == "placeholder" and not n.name.startswith("tangents"):
                v = n.meta.get("val")
                if not isinstance(v, torch.Tensor):
                    continue  # a saved symbolic int
                b = v.numel() * v.element_size()
                src = fw_nodes.get(n.name)
                if src is None:
                    sys.exit(f"{name}: backward input {n.name} is not a forward node")
                if _aliases_primal(src):
                    by_ref += b
                else:
                    saved += b
            elif n.op == "call_function" and n.name in fw_calls:
                f = _node_flops(n)
                flops += f
                packet = getattr(n.target, "overloadpacket", n.target)
                kind = getattr(packet, "__name__", str(packet))
                if kind not in _VIEW_OPS:
                    ops[kind] += 1
    return {"saved": saved, "by_ref": by_ref, "flops": flops, "ops": ops, "graphs": len(fws)}


# --- Our planner ----------------------------------------------------------------

def prepare(model, work, bin_dir):
    """Exports, imports and builds the SGD-momentum step; returns (step, unplanned arena,
    total saved bytes)."""
    step, unplanned, out = build_step(model, work, bin_dir,
                                      reports=["--offload-saved-value-report=report=-"])
    total = int(re.search(r"total: (\d+) bytes in \d+ saved values", out).group(1))
    return step, unplanned, total


def recomputed_flops(bin_dir, planned):
    """(matmul/conv FLOPs, Counter of op kinds) of the ops in PLANNED's recompute regions."""
    lines = open(planned).read().splitlines()
    ranges, depth, start = [], 0, None
    for i, line in enumerate(lines, 1):
        if start is None and "offload.recompute(" in line:
            start, depth = i, 0
        if start is not None:
            depth += line.count("{") - line.count("}")
            if depth <= 0 and i > start:
                ranges.append((start, i))
                start = None
    if not ranges:
        return 0, Counter()
    out = run([os.path.join(bin_dir, "offload-opt"), planned, "--offload-inline-recompute",
               "--offload-cost-report=per-op=true report=-", "-o", "/dev/null"]).stdout
    flops, ops = 0, Counter()
    for m in re.finditer(r"^\s+(offload\.\w+)\s+flops=(-?\d+)\s+read=\d+\s+written=(\d+)\s+"
                         r"loc\(\"[^\"]*\":(\d+):\d+\)", out, re.M):
        op, f, written, line = m.group(1), int(m.group(2)), int(m.group(3)), int(m.group(4))
        if not any(lo < line < hi for lo, hi in ranges):
            continue
        if op != "offload.reshape":
            ops[op.split(".", 1)[1]] += 1
        if op not in OUR_PRODUCTS:
            continue
        if f < 0:
            sys.exit(f"{planned}:{line}: {op} has no static FLOP count")
        src = lines[line - 1]
        operands = src.split(op, 1)[1].split(":")[0].count("%")
        if op in ("offload.linear", "offload.conv2d") and operands == 3:
            elt = 8 if "xf64>" in src.split(":")[-1] else 4
            f -= written // elt  # the bias term our cost model adds
        flops += f
    return flops, ops


class Ours:
    """Our planner on one step and target; plans are cached by budget."""

    def __init__(self, bin_dir, step, unplanned, total, target, work, tag, options=""):
        self.bin, self.step, self.unplanned, self.total = bin_dir, step, unplanned, total
        self.target, self.work, self.tag = target, work, tag
        self.options = options  # extra --offload-plan-memory options
        self.cache = {}
        probe = self._run(1)
        m = re.search(r"Ask for budget=(\d+)", probe.stdout)
        if probe.returncode == 0 or not m:
            sys.exit(f"{tag}: the planner did not name its smallest reachable arena:\n"
                     + probe.stdout[-2000:])
        self.smallest = int(m.group(1))

    def _run(self, budget, saved=None):
        opts = (f"budget={budget}" if budget is not None else "") + \
               (f" saved-budget={saved}" if saved is not None else "")
        return run([os.path.join(self.bin, "offload-opt"), self.step,
                    f"--offload-plan-memory={opts} target={self.target} report=-"
                    + (f" {self.options}" if self.options else ""),
                    "-o", os.path.join(self.work, f"{self.tag}.planned.mlir")], ok=False)

    def _parse(self, r, what):
        if r.returncode != 0:
            sys.exit(f"{self.tag}: planning {what} failed:\n" + r.stdout[-2000:])
        rec = off = 0
        for m in re.finditer(r"^\s+saved\s+.*?\s(\d+) (recompute|offload)\s", r.stdout, re.M):
            if m.group(2) == "recompute":
                rec += int(m.group(1))
            else:
                off += int(m.group(1))
        # Checkpoints are saved too: forward values kept for the regions.
        ckpt = sum(int(m.group(1)) for m in
                   re.finditer(r"^\s+forward\s+.*?\s(\d+) checkpoint\s", r.stdout, re.M))
        flops, ops = (0, Counter()) if rec == 0 else recomputed_flops(
            self.bin, os.path.join(self.work, f"{self.tag}.planned.mlir"))
        arena = re.search(r"device arena: \d+ -> (\d+) bytes", r.stdout)
        # Under a saved budget the planner states its kept saved bytes: device buffers, a
        # value and its views (a reshape) counted once; the saved-value report's total
        # counts each save.
        stated = re.search(r"kept saved bytes \d+ -> (\d+)", r.stdout)
        return {"kept": int(stated.group(1)) if stated else self.total - rec - off + ckpt,
                "recomputed_bytes": rec,
                "offloaded": off, "flops": flops, "ops": ops,
                "arena": int(arena.group(1)) if arena else self.unplanned,
                "fallback": "(the smallest reachable arena's plan)" in r.stdout}

    def plan(self, budget):
        """{"budget", "kept", "recomputed_bytes", "offloaded", "flops", "ops"} at BUDGET."""
        if budget in self.cache:
            return self.cache[budget]
        if budget >= self.unplanned:
            res = {"budget": self.unplanned, "kept": self.total, "recomputed_bytes": 0,
                   "offloaded": 0, "flops": 0, "ops": Counter(), "fallback": False,
                   "arena": self.unplanned}
            self.cache[budget] = res
            return res
        res = self._parse(self._run(budget), f"at budget {budget}")
        res["budget"] = budget
        self.cache[budget] = res
        return res

    def match(self, saved):
        """Our plan under saved-budget=SAVED (kept saved bytes <= SAVED, PyTorch's constraint;
        the arena within the target's memory); None when no plan keeps that few."""
        key = ("saved", saved)
        if key not in self.cache:
            r = self._run(None, saved)
            if r.returncode != 0 and "Ask for saved-budget=" in r.stdout:
                self.cache[key] = None
            else:
                res = self._parse(r, f"at saved-budget {saved}")
                if res["kept"] > saved:
                    sys.exit(f"{self.tag}: saved-budget={saved} kept {res['kept']} saved bytes")
                res["budget"] = res["arena"]
                self.cache[key] = res
        return self.cache[key]

    def saved_buffers(self):
        """Our step's saved bytes as device buffers (the planner's count under a saved
        budget: a value and its views once)."""
        r = self._run(None, 10 ** 15)
        m = re.search(r"kept saved bytes (\d+) ->", r.stdout)
        return int(m.group(1)) if m else self.total

    def fewest_kept(self):
        """The fewest saved bytes our planner can keep (saved-budget=0, or what it names)."""
        r = self._run(None, 0)
        m = re.search(r"Ask for saved-budget=(\d+)", r.stdout)
        return int(m.group(1)) if m else 0


# --- Report -----------------------------------------------------------------------

def fmt_ops(ops, limit=4):
    if not ops:
        return "-"
    items = sorted(ops.items(), key=lambda kv: (-kv[1], kv[0]))
    s = " ".join(f"{k}x{v}" for k, v in items[:limit])
    return s + (" ..." if len(items) > limit else "")


def who(theirs, ours):
    if ours is None:
        return "unmatched"
    if ours["flops"] < theirs:
        return "ours"
    if ours["flops"] > theirs:
        return "PYTORCH"
    return "="


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bin", default=os.path.join(ROOT, "build", "bin"),
                    help="folder of offload-import and offload-opt (default: build/bin)")
    ap.add_argument("--models", default="mlp,transformer,gpt,resnet18",
                    help="comma-separated example models (default %(default)s)")
    ap.add_argument("--fractions", default=",".join(f"{k / 10:.1f}" for k in range(10, -1, -1)),
                    help="activation_memory_budget values to sweep, comma-separated "
                         "(default %(default)s)")
    ap.add_argument("--target", default="h100-sxm", help="target GPU of the cost model: h100-sxm, h100-pcie, a100-80g, a100-40g, l4, rtx-4090, or a target JSON file (default %(default)s)")
    ap.add_argument("--work", default="/tmp/offload-pytorch-partitioner",
                    help="scratch folder (default %(default)s)")
    ap.add_argument("--quick", action="store_true", help="mlp only, fractions 1.0, 0.5, 0.0")
    ap.add_argument("--planner-options", default="",
                    help="extra --offload-plan-memory options for our side (e.g. checkpoints=false)")
    args = ap.parse_args()
    if args.quick:
        args.models, args.fractions = "mlp", "1.0,0.5,0.0"
    try:
        fractions = [float(f) for f in args.fractions.split(",")]
    except ValueError:
        ap.error(f"--fractions: not a comma-separated list of numbers: {args.fractions!r}")
    if not fractions or any(not 0.0 <= f <= 1.0 for f in fractions):
        ap.error("--fractions must lie in [0, 1]")
    for tool in ("offload-import", "offload-opt"):
        if not os.access(os.path.join(args.bin, tool), os.X_OK):
            ap.error(f"--bin {args.bin}: no executable {tool}")
    import torch
    torch.set_num_threads(max(1, min(2, torch.get_num_threads())))
    os.makedirs(args.work, exist_ok=True)
    targets = [(args.target, args.target)]
    for spec in (SLOWLINK, FLOPS_ONLY):
        path = os.path.join(args.work, spec["name"] + ".json")
        with open(path, "w") as f:
            json.dump(spec, f)
        targets.append((spec["name"], path))

    print(f"PyTorch {torch.__version__}: min-cut rematerialization partitioner, "
          f"activation_memory_budget swept; FLOPs = matmul/conv only (torch.utils.flop_counter "
          f"convention, 2 per multiply-add) on both sides; saved bytes exclude parameters and "
          f"inputs (and views of them) saved by reference")
    for model in args.models.split(","):
        step, unplanned, total = prepare(model, args.work, args.bin)
        ours = {t: Ours(args.bin, step, unplanned, total, spec, args.work, f"{model}.{t}",
                        args.planner_options)
                for t, spec in targets}
        buffers = next(iter(ours.values())).saved_buffers()
        print(f"\n{model}: our step saves {total} bytes of activations ({buffers} bytes as "
              f"device buffers, a value and its views once: what kept counts); unplanned arena "
              f"{unplanned} bytes, smallest reachable "
              + ", ".join(f"{o.smallest} ({t})" for t, o in ours.items()))
        hdr = (f"  {'frac':>4} {'pt saved':>10} {'pt recomp FLOPs':>15} | "
               + " | ".join(f"{t + ': arena':>22} {'kept':>10} {'recomp FLOPs':>13} "
                            f"{'offloaded':>9} {'less':>9}" for t in ours))
        print(hdr)
        prev, rows = None, []
        for frac in fractions:
            pt = pytorch_partition(model, frac)
            cells = []
            for t, o in ours.items():
                m = o.match(pt["saved"])
                if m is None:
                    cells.append(f"{'(our fewest kept ' + str(o.fewest_kept()) + ')':>22} "
                                 f"{'-':>10} {'-':>13} {'-':>9} {'unmatched':>9}")
                else:
                    b = f"{m['budget']}{'*' if m['fallback'] else ''}"
                    cells.append(f"{b:>22} {m['kept']:>10} {m['flops']:>13} "
                                 f"{m['offloaded']:>9} {who(pt['flops'], m):>9}")
                rows.append((frac, t, pt, m))
            note = ""
            if prev is not None and pt["saved"] > prev:
                note = "  non-monotonic: more saved than at the larger fraction"
            prev = pt["saved"]
            print(f"  {frac:>4.1f} {pt['saved']:>10} {pt['flops']:>15} | " + " | ".join(cells)
                  + note)
        print("  arena: our plan's device arena under saved-budget=PyTorch's saved bytes; * the "
              "plan of the fewest kept saved bytes (every saved value recomputed or offloaded "
              "where it can be)")
        print("  what each side recomputes (op kinds x count; views omitted):")
        seen = set()
        for frac, t, pt, m in rows:
            key = (frac,)
            if key not in seen:
                seen.add(key)
                print(f"    {frac:.1f} PyTorch ({pt['graphs']} graph(s), {pt['by_ref']} bytes "
                      f"saved by reference): {fmt_ops(pt['ops'], 6)}")
            if m is not None:
                print(f"        ours on {t} (arena {m['budget']}): {fmt_ops(m['ops'], 6)}; "
                      f"{m['recomputed_bytes']} bytes recomputed, {m['offloaded']} offloaded")


if __name__ == "__main__":
    main()
