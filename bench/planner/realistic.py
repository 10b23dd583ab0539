#!/usr/bin/python3
"""The planner against the policies users run, on realistic training steps (issue 32).

    PYTHONPATH=python /usr/bin/python3 bench/planner/realistic.py --bin build/bin
        [--workloads gpt2-124m,gpt2-1.5b,llama2-7b,llama3-8b,resnet50,vit-b16]
        [--targets h100-sxm,a100-40g,rtx-4090,l4] [--work DIR] [--check]
        [--host-adamw-rate BYTES_PER_S] [--known-losses FILE] [--precision fp32,bf16-mixed]
        [--timeout S] [--reuse] [--json FILE]
    /usr/bin/python3 bench/planner/realistic.py --markdown A.json[,B.json...]

Workloads, shape-only (every parameter one element expanded to its shape, as
bench/planner/llm_shapes.py builds them; no weights are ever materialised),
fp32, AdamW (lr 1e-4), each step built by offload-import and
--offload-autodiff:
  gpt2-124m   GPT-2 small (embedding tied to the output), batch 16, T 1024
  gpt2-1.5b   GPT-2 XL (tied), batch 8, T 1024
  llama2-7b   Llama-2-7B, batch 1, T 4096
  llama3-8b   Llama-3-8B (GQA: 8 key/value heads), batch 1, T 8192
  resnet50    torchvision's ResNet-50 (1000 classes), batch 256, 224x224
  vit-b16     torchvision's ViT-B/16 (1000 classes), batch 128, 224x224
  unet2d      diffusers' UNet2DModel (default configuration, 274 M parameters),
              batch 8, 256x256, the DDPM loss; exported with torch.export by
              bench/planner/unet_export.py under scripts/torch2-python (real
              weights there: torch.export traces with fake tensors)
Attention is the fused op (the importer's --offload-fuse-attention): q, k, v,
the output and the log-sum-exp are saved, never the probabilities.

Targets: the cost model's built-in GPUs, each as a target file
{"base": T, "host_update_bytes_per_second": R} where R is the host's AdamW
rate MEASURED on this machine (torch.optim.AdamW(foreach=True) over 32 M
fp32 parameters in 8 tensors, fastest of 20 steps, under PyTorch 2.x when
scripts/torch2-python exists, else this Python's torch), in the cost model's
convention for offload.adamw_update: 28 bytes per parameter (param, grad,
exp_avg, exp_avg_sq read; param and both moments written). The planner and
every baseline are priced and simulated with the same file. The host update
runs on the compute stream in the simulator (Timeline.h), as ZeRO-Offload's
CPU step sits between backward and the next forward.

Baselines: fixed policies, each built with our own passes on the same step and
judged by the same simulator (--offload-memory-report's device arena,
--offload-cost-report's simulated step time on the target). Every baseline
first runs --offload-early-update (the optimizer step fused into backward, as
PyTorch documents with register_post_accumulate_grad_hook; the planner does
the same), so the comparison is with the strongest form of each policy.
  none            no activation checkpointing
  full-ac         torch.utils.checkpoint around each transformer block /
                  ResNet bottleneck: every saved value of a block except its
                  input is recomputed, one region per block
                  (--offload-recompute=policy=marked, a group id per block);
                  on the UNet, around each ResnetBlock2D and attention, as
                  diffusers' gradient checkpointing does, with the block
                  outputs as checkpoints (offload.checkpoint on their ops: a
                  block's input is not a saved value there; mark_unet_blocks)
  selective       Megatron-LM's selective recompute, the attention core only
                  (--offload-recompute=policy=ops ops=attention: the fused
                  attention's output is recomputed from the saved q, k, v);
                  transformers only
  zero-offload    ZeRO-Offload: parameters' fp32 copy, gradients and AdamW
                  state on the host, update on the host CPU, each parameter
                  uploaded once per step and kept through backward
                  (--offload-host-parameters=policy=all refetch=never)
  fsdp2-offload   FSDP2's CPUOffloadPolicy on one GPU: parameters, gradients
                  and state on the host, each parameter fetched before its
                  forward use and again before its backward use
                  (--offload-host-parameters=policy=all refetch=always)
  zero-offload+ac, fsdp2-offload+ac: the same with full-ac first (how both
                  are used on models whose activations do not fit)
  pt-partitioner  PyTorch's min-cut rematerialization partitioner with
                  torch._functorch.config.activation_memory_budget swept
                  (--pt-fractions, default 1.0, 0.9, ..., 0.0): its forward
                  graph's saved tensors (partitioner_saved_set.py under
                  scripts/torch2-python, fake tensors, the workload at its full
                  shape) mapped onto our saved values (map_saved: an
                  order-preserving alignment by bytes and op kind); ours that
                  have a counterpart stay saved, every other one is recomputed,
                  one region per maximal run of consecutive recomputed saves
                  (--offload-recompute=policy=marked, a group id per run: each
                  op once, before the first backward use of any, as PyTorch's
                  backward graph recomputes each node once, before its first
                  use, and holds it to its last). A row takes the fastest
                  fraction whose arena fits its budget (the JSON names it).
                  gpt2-124m, gpt2-1.5b, llama2-7b, llama3-8b, resnet50 and
                  vit-b16 in fp32 only (the Llamas' RMSNorm, rotary and
                  SwiGLU ops mapped by PT_KINDS_BY_FAMILY, each pair within
                  one RMSNorm segment); n/a elsewhere (unet2d, bf16-mixed)
                  and when scripts/torch2-python does not work (the reason
                  printed). --pt-partitioner off leaves it out.

Budgets per workload and target: the target's memory and 3 lower points, from
the lower of it and the unplanned arena (above which every method fits as it
is) down to the smallest arena any method reaches (the planner's smallest reachable
arena without slicing, named by its error at budget=1 slice=never, or a
baseline's arena; with slicing tried, the probe took minutes and 8 GB on
GPT-2 124M, since at budget 1 every slice size is searched). The planner runs
with slice=never at every budget too: slicing is a last resort the baselines
do not have, and its search does not fit this machine's 23 GB on the LLM steps. Also the smallest
arena any baseline reaches, where the strongest fixed policy just fits (the
budget index in the known-losses list counts it). A method fits a budget when
its device arena is at most the budget.

The lower bound: the LP relaxation of the planner's exported decision problem
(bench/planner/oracle.py's solve(relax=True), HiGHS through scipy), at the
peak the planner's own decisions reach in that model (with its shared
recompute regions: oracle.planner_held; the LP may share too), with the
copies priced as a relaxation of every real schedule (solve(valid=True):
the stall at least each link's copy seconds less all the step's compute, and
at least the offloads' own unhidden parts; not the planner's per-phase
windows, which the prefetch tuning beats); the bound on the step time is the
unplanned simulated step plus the LP's optimum. gap = (ours - bound) /
bound, ours simulated; `priced` is the unplanned step plus ours priced in
the planner's model (the per-phase windows), so it may lie above ours and
below or above the bound. (Until 7 December 2026 the bound used the
per-phase windows too, and fell above the simulated plan on three rows:
GPT-2 124M bf16-mixed at 9.01 GB by 3.4%.)

--check exits 1 when a row where ours is planned has no bound or a bound
above ours (by more than 0.1%: the step times are read to 4 digits), or ours does
not fit a budget that a baseline fits, or ours is slower than the fastest
baseline that fits (by more than 0.1%), unless the row is in the known-losses
list (--known-losses FILE: lines "workload target budget-index [precision]",
printed as expected failures; a listed row that wins is printed too).
"""
import argparse
import json
import os
import re
import subprocess
import sys
import time

from example_steps import ROOT, run
import llm_shapes
import oracle

TARGET_MEMORY = {"h100-sxm": 80e9, "h100-pcie": 80e9, "a100-80g": 80e9, "a100-40g": 40e9,
                 "rtx-4090": 24e9, "l4": 24e9}

# --- Workloads ----------------------------------------------------------------

VISION = {
    # name: (torchvision constructor, batch, image size)
    "resnet50": ("resnet50", 256, 224),
    "vit-b16": ("vit_b_16", 128, 224),
}

# Block boundaries for full-ac, from the saved values' locations (the
# saved-value report's file:line of the Python source, in forward order): a
# boundary is a block's input, which stays saved; the saved values after it,
# up to the next boundary, are that block's and are recomputed by one region.
# The last boundary is the last block's output; what follows it (final norm,
# head, loss) stays saved, as torch.utils.checkpoint around the blocks leaves it.


def _lines(func, text):
    """{"file.py:N"} of the lines of `func`'s source containing `text` (the
    saved-value report's locations name the Python source line that made a
    value; found here, so that an edit above them changes nothing)."""
    import inspect
    src, start = inspect.getsourcelines(func)
    name = os.path.basename(inspect.getsourcefile(func))
    found = {f"{name}:{start + i}" for i, line in enumerate(src) if text in line}
    if not found:
        sys.exit(f"realistic.py: no line with {text!r} in {func.__qualname__}")
    return found


def _boundaries(kind, locs):
    L = [re.sub(r'^"?([^"]*/)?([^/"]+)"?:(\d+):\d+$', r"\2:\3", x) for x in locs]
    if kind == "gpt":  # the embedding sum, then each block's output
        import export_models
        marks = (_lines(llm_shapes.GPT2.forward, "self.wte(x) + self.wpe(pos)")
                 | _lines(export_models.GPTBlock.forward, "x = x + self.mlp_drop"))
        return [i for i, x in enumerate(L) if x in marks]
    if kind == "vit":  # the encoder's input (x + pos_embedding), each block's output
        from torchvision.models import vision_transformer as vt
        marks = (_lines(vt.Encoder.forward, "input + self.pos_embedding")
                 | _lines(vt.EncoderBlock.forward, "return x + y"))
        return [i for i, x in enumerate(L) if x in marks]
    if kind == "llama":  # the embedding, then each block's output (x + down_proj(...)),
        # the save at the block's last line that its successor's RMSNorm reads
        norm = _lines(llm_shapes.RMSNorm.forward, "return x * torch.rsqrt")
        out = _lines(llm_shapes.LlamaBlock.forward, "return x + self.down_proj")
        return [0] + [i for i in range(1, len(L) - 1) if L[i] in out and L[i + 1] in norm]
    if kind == "unet":  # from the block outputs' ops, not the saves: mark_unet_blocks
        return []
    if kind == "resnet":  # the stem's max-pool output, each bottleneck's output ReLU
        import torch.nn.functional as F
        pool = _lines(F._max_pool2d, "return torch.max_pool2d(")
        relu = _lines(F.relu, "torch.relu")
        pools = [i for i, x in enumerate(L) if x in pool]
        if not pools:
            return []
        relus = [i for i, x in enumerate(L) if x in relu and i > pools[-1]]
        return [pools[-1]] + relus[2::3]
    return []


WORKLOADS = {
    "gpt2-124m": ("gpt", "gpt2-124m"),
    "gpt2-1.5b": ("gpt", "gpt2-1.5b"),
    "llama2-7b": ("llama", "llama2-7b"),
    "llama3-8b": ("llama", "llama3-8b"),
    "resnet50": ("resnet", None),
    "vit-b16": ("vit", None),
    "unet2d": ("unet", None),
}

UNET = {"batch": 8, "size": 256}


def export_unet(work, bin_dir):
    """diffusers' UNet2DModel through torch.export (unet_export.py under
    scripts/torch2-python), imported; the archive is removed after."""
    py = os.path.join(ROOT, "scripts", "torch2-python")
    run([py, os.path.join(ROOT, "bench", "planner", "unet_export.py"), "--out", work,
         "--batch", str(UNET["batch"]), "--size", str(UNET["size"])])
    meta = json.load(open(os.path.join(work, "unet2d.export.json")))
    pt2, fwd = os.path.join(work, "unet2d.pt2"), os.path.join(work, "unet2d.mlir")
    run([os.path.join(bin_dir, "offload-import"), pt2, "-o", fwd])
    os.remove(pt2)
    print(f"unet2d: {meta['params'] / 1e6:.1f} M parameters, batch {meta['batch']}, "
          f"{meta['size']}x{meta['size']}", flush=True)
    return fwd, meta["params"]


def export_vision(name, work, bin_dir):
    """torchvision's model, shape-only (llm_shapes.shape_only), traced at batch
    1 and imported at the workload's batch with the cross-entropy loss."""
    import torch
    import torchvision
    ctor, batch, size = VISION[name]
    model, nparams = llm_shapes.shape_only(lambda: getattr(torchvision.models, ctor)())
    model.train()
    pt = os.path.join(work, name + ".pt")
    with torch.no_grad():
        torch.jit.trace(model, torch.zeros(1, 3, size, size), check_trace=False).save(pt)
    fwd = os.path.join(work, name + ".mlir")
    run([os.path.join(bin_dir, "offload-import"), pt, "--input", f"x={batch}x3x{size}x{size}xf32",
         "--input", f"y={batch}xi64", "--loss", "cross_entropy", "-o", fwd])
    print(f"{name}: {nparams / 1e6:.1f} M parameters, batch {batch}, {size}x{size}", flush=True)
    return fwd, nparams


def autodiff_options(precision):
    """--offload-autodiff's options for every workload's step: AdamW, lr
    1e-4, and `precision` (fp32, or bf16-mixed's autocast)."""
    return "optimizer=adamw lr=1e-4" + ("" if precision == "fp32" else f" precision={precision}")


def build_workload(name, work, bin_dir, precision="fp32", reuse=False):
    """Returns (step path, unplanned arena bytes, saved-value locations in
    forward order, parameter count). `precision`: fp32, or bf16-mixed
    (--offload-autodiff's autocast: fp32 master weights and AdamW state).
    `reuse`: take the files an earlier run left in `work` instead of
    exporting and building again."""
    kind, llm = WORKLOADS[name]
    os.makedirs(work, exist_ok=True)
    tag = name if precision == "fp32" else f"{name}.{precision}"
    step = os.path.join(work, tag + ".step.mlir")
    meta = os.path.join(work, tag + ".meta.json")
    if reuse and os.path.exists(step) and os.path.exists(meta):
        m = json.load(open(meta))
        return step, m["arena"], m["locations"], m["params"]
    fwd = os.path.join(work, name + ".mlir")
    fwd_meta = os.path.join(work, name + ".params.json")
    if reuse and os.path.exists(fwd) and os.path.exists(fwd_meta):
        nparams = json.load(open(fwd_meta))["params"]
    else:
        if llm:
            fwd, nparams = llm_shapes.export(llm, work, bin_dir)
        elif kind == "unet":
            fwd, nparams = export_unet(work, bin_dir)
        else:
            fwd, nparams = export_vision(name, work, bin_dir)
        json.dump({"params": nparams}, open(fwd_meta, "w"))
    out = run([os.path.join(bin_dir, "offload-opt"), fwd,
               f"--offload-autodiff={autodiff_options(precision)}", "--offload-memory-report",
               "--offload-saved-value-report", "-o", step]).stdout
    arena = int(re.search(r"device arena bytes: (\d+)", out).group(1))
    locs = [m.group(1) for m in re.finditer(r"^\s+\d+\s+\d+\s+\S+\s+\S+\s+loc\((.*)\)\s*$", out,
                                            re.M)]
    saves = sum(1 for line in open(step) if " = offload.save " in line)
    if len(locs) != saves:
        sys.exit(f"{name}: {len(locs)} saved values in the report, {saves} saves in the step")
    json.dump({"arena": arena, "locations": locs, "params": nparams}, open(meta, "w"))
    return step, arena, locs, nparams


def _op_locations(path):
    """[(line index, line, (file basename, line) or None)] of the op lines of
    the MLIR file `path` printed with its locations, and the lines."""
    lines = open(path).read().splitlines(keepends=True)
    alias = {}
    for line in lines:
        m = re.match(r"^(#loc\d*) = loc\((.*)\)\s*$", line)
        if m:
            alias[m.group(1)] = m.group(2)
    res = []
    for i, line in enumerate(lines):
        m = re.search(r"loc\((#loc\d*|\"[^\"]*\":\d+:\d+)\)\s*$", line)
        if not m or line.startswith("#loc"):
            continue
        where = alias.get(m.group(1), "") if m.group(1).startswith("#") else m.group(1)
        f = re.match(r'"([^"]*)":(\d+):\d+', where)
        res.append((i, line, (os.path.basename(f.group(1)), int(f.group(2))) if f else None))
    return res, lines


# An op line of the step: `%r = offload.op %a, %b {attrs} : types loc(...)`.
_OP_LINE = re.compile(r"^(\s*(%[\w.#]+) = offload\.(\w+) (?:%[\w.#]+(?:, )?)+ )(\{(.*?)\} )?(: .*)$",
                      re.S)


def _with_checkpoint(line):
    """`line` (an op) with the unit attribute offload.checkpoint added."""
    m = _OP_LINE.match(line)
    if not m:
        sys.exit(f"realistic.py: cannot mark {line.strip()[:120]!r}")
    attrs = "offload.checkpoint" + (", " + m.group(5) if m.group(4) else "")
    return f"{m.group(1)}{{{attrs}}} {m.group(6)}"


def mark_unet_blocks(fwd, bin_dir, work, tag, precision):
    """Full activation checkpointing on the UNet, as diffusers' gradient
    checkpointing does it (torch.utils.checkpoint around every ResnetBlock2D
    and attention): the block outputs unet_export.py named (and conv_in's,
    the first convolution: the first block's input) become checkpoints
    (`offload.checkpoint` on their ops: --offload-recompute saves them where
    a block's region reads them, although autodiff did not), and every save
    between two of them is the later block's, recomputed by one region per
    block. Saves before the first (the time embedding) and after the last
    (the output norm and convolution, the loss) stay saved, as do saves of
    a block output itself. The step is built again from the forward with
    its locations printed (the step file has none). Returns (path, blocks,
    saves recomputed) or None."""
    blocks = json.load(open(os.path.join(work, "unet2d.export.json"))).get("blocks")
    if not blocks:
        return None
    wanted = {(b["file"], b["line"], b["op"]) for b in blocks}
    with_locs = os.path.join(work, tag + ".locs.mlir")
    run([os.path.join(bin_dir, "offload-opt"), fwd, f"--offload-autodiff={autodiff_options(precision)}",
         "--mlir-print-debuginfo", "-o", with_locs])
    ops, lines = _op_locations(with_locs)
    os.remove(with_locs)
    backward = next(i for i, ln, _ in ops if "offload.phase backward" in ln)
    boundary, first_conv = [], True
    for i, ln, where in ops:
        if i >= backward:
            break
        m = _OP_LINE.match(ln)
        if not m:
            continue
        if (m.group(3) == "conv2d" and first_conv) or (where and (*where, m.group(3)) in wanted):
            boundary.append((i, m.group(2)))
        first_conv &= m.group(3) != "conv2d"
    values = {v for _, v in boundary}
    at = {i for i, _ in boundary}
    seen, recomputed = 0, 0
    for i, ln, _ in ops:
        if i >= backward:
            break
        if i in at:
            seen += 1
            lines[i] = _with_checkpoint(ln)
            continue
        m = re.match(r"^(\s*%[\w.#]+ = offload\.save (%[\w.#]+)) :", ln)
        if m and m.group(2) not in values and 0 < seen < len(boundary):
            lines[i] = ln.replace(m.group(1), f"{m.group(1)} {{offload.recompute = {seen} : i64}}", 1)
            recomputed += 1
    path = os.path.join(work, tag + ".blocks.mlir")
    open(path, "w").writelines(lines)
    return path, len(boundary) - 1, recomputed


def mark_blocks(name, step, locs, work, tag, bin_dir=None, precision="fp32"):
    """The step with every save of a block marked with the block's recompute
    group (full activation checkpointing per block); None when no block was
    found."""
    if WORKLOADS[name][0] == "unet":
        return mark_unet_blocks(os.path.join(work, name + ".mlir"), bin_dir, work, tag, precision)
    b = _boundaries(WORKLOADS[name][0], locs)
    if len(b) < 2:
        return None
    group = {}
    for k in range(len(b) - 1):
        for i in range(b[k] + 1, b[k + 1]):
            group[i] = k
    path = write_marked(step, group, os.path.join(work, tag + ".blocks.mlir"))
    return path, len(b) - 1, len(group)


def write_marked(step, group, path):
    """Writes `step` to `path` with the k-th offload.save (forward order)
    marked `offload.recompute = group[k]` for every k in `group` (the
    regions of --offload-recompute=policy=marked); returns `path`."""
    out, i = [], 0
    for line in open(step):
        if " = offload.save " in line:
            if i in group:
                line = re.sub(r"(= offload\.save %[\w.#]+) :",
                              rf"\1 {{offload.recompute = {group[i]} : i64}} :", line, count=1)
            i += 1
        out.append(line)
    open(path, "w").writelines(out)
    return path


# --- PyTorch's partitioner, its saved set mapped onto our step ------------------

PT_WORKLOADS = ("gpt2-124m", "gpt2-1.5b", "llama2-7b", "llama3-8b", "resnet50", "vit-b16")
PT_FRACTIONS = "1.0,0.9,0.8,0.7,0.6,0.5,0.4,0.3,0.2,0.1,0.0"

# PyTorch's kind of a saved tensor (the op that made it, through views and
# tuple indexing; partitioner_saved_set.py) -> the producers of our saved
# values it may stand for. Our reshape and transpose saves are views of
# whatever made them, so they take any kind of equal bytes. Kinds not listed
# (batch norm's running statistics, the position embedding's lookup, the
# position iota) have no counterpart among our saved values.
PT_KINDS = {
    "add": {"add"},
    "native_layer_norm": {"layer_norm"},
    "_native_batch_norm_legit_functional.0": {"batch_norm"},
    "_native_batch_norm_legit_functional.1": {"batch_norm"},
    "_native_batch_norm_legit_functional.2": {"batch_norm"},
    "native_batch_norm": {"batch_norm"},
    "convolution": {"conv2d"},
    "relu": {"relu"},
    "gelu": {"gelu"},
    "addmm": {"linear", "matmul"},
    "mm": {"linear", "matmul"},
    "_scaled_dot_product_flash_attention_for_cpu": {"attention"},
    "_scaled_dot_product_efficient_attention": {"attention"},
    "_scaled_dot_product_flash_attention": {"attention"},
    "max_pool2d_with_indices": {"max_pool2d"},
    # The loss: PyTorch saves the log-softmax, our cross_entropy the logits.
    "_log_softmax": {"linear", "matmul"},
}

# The Llama steps' further kinds (added to PT_KINDS for the workloads of
# kind "llama" only, so that the other workloads' maps stay as they were).
# RMSNorm, x * rsqrt(mean(x * x) + eps) * w, is decomposed on both sides:
# PyTorch saves the rsqrt and the scaled output (the projections' input),
# ours the rsqrt, x * rsqrt and the scaled output; SwiGLU's product
# silu(gate) * up is a mul on both sides; the token embedding's lookup is
# saved on both sides. A projection's output (mm) may stand for the
# elementwise op that it feeds and that our autodiff saves in its place:
# q_proj/k_proj's output for q, k after the rotary embedding (mul, add of
# cos/sin terms), o_proj's and down_proj's for the residual sum (add): one
# elementwise op away, with the same bytes. The rotary table (cat of the
# frequencies, from which PyTorch recomputes cos and sin) has no
# counterpart: our importer folds cos and sin into constants at the full
# shape.
PT_KINDS_BY_FAMILY = {
    "llama": {
        "mm": {"linear", "matmul", "add"},
        "rsqrt": {"rsqrt"},
        "mul": {"mul"},
        "silu": {"silu"},
        "embedding": {"embedding"},
    },
}

# Tensors below this many bytes are aligned apart from the larger ones: the
# two sides order a norm's statistics and the attention's log-sum-exp
# differently against the large values next to them.
PT_SMALL = 1 << 22


def _pt_compatible(pt_kind, ours, kinds=PT_KINDS):
    """0: not a counterpart; 2: the same kind of op (by `kinds`, PT_KINDS or
    a workload family's map); 1: our save is a view (reshape, transpose) of
    what made it."""
    allowed = kinds.get(pt_kind)
    if allowed is None and not pt_kind.startswith("_native_batch_norm_legit_functional."):
        allowed = kinds.get(pt_kind.split(".")[0])
    if allowed and ours in allowed:
        return 2
    return 1 if ours in ("reshape", "transpose") else 0


def pt_saved_sets(names, work, fractions):
    """{name: {fraction: {...}} or a string saying why not} of PyTorch's
    partitioner on the workloads NAMES (bench/planner/partitioner_saved_set.py
    under scripts/torch2-python, one run for those not cached; cached in
    WORK/NAME.pt-saved-set.json)."""
    res, todo = {}, []
    for name in names:
        path = os.path.join(work, f"{name}.pt-saved-set.json")
        d = json.load(open(path)) if os.path.exists(path) else {}
        if d.get("fractions") == fractions:
            res[name] = d
        else:
            todo.append(name)
    if not todo:
        return res
    py = os.path.join(ROOT, "scripts", "torch2-python")
    probe = subprocess.run([py, "-c", "import torch, torchvision"], capture_output=True, text=True)
    if probe.returncode != 0:
        why = ("the PyTorch 2.x environment (scripts/setup-torch2.sh) is missing: "
               + (probe.stderr.strip().splitlines() or ["?"])[-1][:120])
        return dict(res, **{n: why for n in todo})
    t0 = time.perf_counter()
    out = os.path.join(work, "pt-saved-set.json")
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        [os.path.join(ROOT, "python")] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
    r = subprocess.run([py, os.path.join(ROOT, "bench", "planner", "partitioner_saved_set.py"),
                        "--workloads", ",".join(todo), "--fractions", fractions, "--out", out],
                       capture_output=True, text=True, env=env)
    if r.returncode != 0:
        why = ("partitioner_saved_set.py failed: "
               + (r.stderr.strip().splitlines() or ["?"])[-1][:160])
        return dict(res, **{n: why for n in todo})
    d = json.load(open(out))
    os.remove(out)
    for name in todo:
        res[name] = {"torch": d["torch"], "fractions": fractions,
                     "workloads": {name: d["workloads"][name]}}
        json.dump(res[name], open(os.path.join(work, f"{name}.pt-saved-set.json"), "w"))
    print(f"PyTorch {d['torch']}'s partitioner traced on {', '.join(todo)} at "
          f"activation_memory_budget {fractions} in {time.perf_counter() - t0:.1f} s", flush=True)
    return res


def our_saved_values(bin_dir, step):
    """[(bytes, producer kind)] of the step's saved values in forward order."""
    out = run([os.path.join(bin_dir, "offload-opt"), step, "--offload-saved-value-report",
               "-o", os.devnull]).stdout
    return [(int(m.group(1)), m.group(2)) for m in
            re.finditer(r"^\s+\d+\s+(\d+)\s+offload\.(\w+)\s+\S+\s+loc\(", out, re.M)]


def _align(ours, pt, kinds=PT_KINDS):
    """Order-preserving matching of (index, bytes, kind, segment) lists:
    pairs of equal bytes, compatible kinds and equal segments (None on
    either side: any), the most matched bytes, then the most same-kind
    pairs, then the most pairs (dynamic programming). Returns the matched
    (our index, PyTorch index) pairs."""
    n, m = len(ours), len(pt)
    W = [[(0, 0, 0)] * (m + 1) for _ in range(n + 1)]

    def pair(i, j):
        _, ob, ok, os_ = ours[i]
        _, pb, pk, ps = pt[j]
        if os_ is not None and ps is not None and os_ != ps:
            return None
        c = _pt_compatible(pk, ok, kinds) if pb == ob else 0
        if not c:
            return None
        w = W[i + 1][j + 1]
        return (w[0] + ob, w[1] + (c == 2), w[2] + 1)

    for i in range(n - 1, -1, -1):
        for j in range(m - 1, -1, -1):
            best = max(W[i + 1][j], W[i][j + 1])
            p = pair(i, j)
            W[i][j] = max(best, p) if p else best
    res, i, j = [], 0, 0
    while i < n and j < m:
        if W[i][j] == pair(i, j):
            res.append((ours[i][0], pt[j][0]))
            i, j = i + 1, j + 1
        elif W[i][j] == W[i + 1][j]:
            i += 1
        else:
            j += 1
    return res


def map_saved(ours, pt, kinds=PT_KINDS):
    """Maps PyTorch's saved tensors (forward order) onto our saved values
    (forward order): _align on the tensors of at least PT_SMALL bytes, then
    on the smaller ones, op kinds compatible by `kinds`. Where PyTorch's
    tensors carry a `segment` (the Llamas: the number of RMSNorms' rsqrt ops
    at or before the op that made it), a pair must also lie in the same
    segment, ours counted the same way (our saved rsqrt values at or before
    it: autodiff saves every RMSNorm's rsqrt), so that a block's tensors map
    onto that block's and not onto a neighbour's of the same size. Returns
    (our kept indices, fidelity stats)."""
    pairs = []
    segmented = any("segment" in t for t in pt)
    seg, ours_seg = 0, []
    for _, k in ours:
        seg += k == "rsqrt"
        ours_seg.append(seg if segmented else None)
    for big in (True, False):
        o = [(i, b, k, ours_seg[i]) for i, (b, k) in enumerate(ours) if (b >= PT_SMALL) == big]
        p = [(j, t["bytes"], t["kind"], t.get("segment")) for j, t in enumerate(pt)
             if (t["bytes"] >= PT_SMALL) == big]
        pairs += _align(o, p, kinds)
    kept = {i for i, _ in pairs}
    matched = {j for _, j in pairs}
    unmatched = [t for j, t in enumerate(pt) if j not in matched]
    kinds = {}
    for t in unmatched:
        kinds[t["kind"]] = kinds.get(t["kind"], 0) + t["bytes"]
    stats = {"pt_saved": len(pt), "pt_bytes": sum(t["bytes"] for t in pt),
             "mapped": len(kept), "mapped_bytes": sum(ours[k][0] for k in kept),
             "unmapped": len(unmatched), "unmapped_bytes": sum(t["bytes"] for t in unmatched),
             "unmapped_kinds": kinds, "ours_saved": len(ours),
             "ours_bytes": sum(b for b, _ in ours)}
    return kept, stats


def mark_kept(step, kept, n, work, tag, cuts=()):
    """The step with every save not in `kept` marked for recompute, one group
    per maximal run of consecutive recomputed saves (forward order), a run
    also cut before each index of `cuts`; returns (path, groups)."""
    group, g, prev = {}, -1, False
    for i in range(n):
        if i in kept:
            prev = False
            continue
        if not prev or i in cuts:
            g += 1
        group[i], prev = g, True
    return write_marked(step, group, os.path.join(work, tag + ".mlir")), g + 1


# The two region layouts of one mapped saved set: "run", PyTorch's (one
# region per run of recomputed saves: each op once, before the first backward
# use of any, held to its uses, as PyTorch's backward graph recomputes a node
# once before its first use and frees it after its last), and "blocks", the
# runs also cut at the block boundaries of full-ac (_boundaries): a chain
# through several blocks is recomputed block by block (more FLOPs, a lower
# peak). A row takes the better, so that the layout is not what loses.
PT_LAYOUTS = ("run", "blocks")


def pt_partitioner_points(name, step, bin_dir, sets, work, tag, locs):
    """[(fraction, layout, marked step path or None, fidelity stats)] of
    PyTorch's sweep mapped onto our step (None: nothing recomputed, the step
    itself; the "blocks" layout only where it differs from "run")."""
    ours = our_saved_values(bin_dir, step)
    family = WORKLOADS[name][0]
    cuts = set(_boundaries(family, locs))
    kinds = dict(PT_KINDS, **PT_KINDS_BY_FAMILY.get(family, {}))
    res = []
    for frac, r in sorted(sets["workloads"][name].items(), key=lambda kv: -float(kv[0])):
        kept, stats = map_saved(ours, r["saved"], kinds)
        stats["recomputed_bytes"] = stats["ours_bytes"] - stats["mapped_bytes"]
        if len(kept) == len(ours):
            res.append((frac, "run", None, dict(stats, groups=0)))
            continue
        path, groups = mark_kept(step, kept, len(ours), work, f"{tag}.pt-{frac}")
        res.append((frac, "run", path, dict(stats, groups=groups)))
        path_b, groups_b = mark_kept(step, kept, len(ours), work, f"{tag}.pt-{frac}-blocks", cuts)
        if groups_b != groups:
            res.append((frac, "blocks", path_b, dict(stats, groups=groups_b)))
        else:
            os.remove(path_b)
    return res


# --- Host AdamW rate ------------------------------------------------------------

ADAMW_PROBE = """
import time, torch
n = 1 << 25
ps = [torch.zeros(n // 8, requires_grad=True) for _ in range(8)]
for p in ps:
    p.grad = torch.full_like(p, 1e-3)
opt = torch.optim.AdamW(ps, lr=1e-4, foreach=True)
opt.step()
best = 1e9
for _ in range(20):
    t = time.perf_counter(); opt.step(); best = min(best, time.perf_counter() - t)
print(28 * n / best, torch.__version__, torch.get_num_threads())
"""


def host_adamw_rate(work):
    """Measured bytes/s of torch.optim.AdamW(foreach=True) on this machine,
    28 bytes per parameter (cached in WORK/host-adamw.json)."""
    path = os.path.join(work, "host-adamw.json")
    if os.path.exists(path):
        return json.load(open(path))
    py = os.path.join(ROOT, "scripts", "torch2-python")
    venv_ok = os.path.exists(py) and subprocess.run(
        [py, "-c", "import torch"], capture_output=True).returncode == 0
    out = run([py if venv_ok else sys.executable, "-c", ADAMW_PROBE]).stdout.split()
    res = {"bytes_per_second": float(out[0]), "torch": out[1], "threads": int(out[2]),
           "source": "torch.optim.AdamW(foreach=True), 32M fp32 parameters in 8 tensors, "
                     "fastest of 20 steps (other load only slows a step down), 28 bytes per parameter"}
    json.dump(res, open(path, "w"))
    return res


def target_file(target, rate, work):
    path = os.path.join(work, f"target-{target}.json")
    json.dump({"base": target, "name": target, "host_update_bytes_per_second": rate},
              open(path, "w"))
    return path


# --- Methods ----------------------------------------------------------------------

def baselines(kind, blocks):
    """(name, passes) of each fixed policy; passes run on `blocks` (the step
    with its blocks marked) when the name has 'ac'."""
    early = ["--offload-early-update"]
    ac = ["--offload-recompute=policy=marked"]
    zero = ["--offload-host-parameters=policy=all refetch=never"]
    fsdp = ["--offload-host-parameters=policy=all refetch=always"]
    res = [("none", early)]
    if blocks:
        res.append(("full-ac", ac + early))
    if kind in ("gpt", "llama", "vit", "unet"):
        res.append(("selective", ["--offload-recompute=policy=ops ops=attention"] + early))
    res += [("zero-offload", early + zero), ("fsdp2-offload", early + fsdp)]
    if blocks:
        res += [("zero-offload+ac", ac + early + zero), ("fsdp2-offload+ac", ac + early + fsdp)]
    return res


BASELINE_NAMES = ["none", "full-ac", "selective", "zero-offload", "fsdp2-offload",
                  "zero-offload+ac", "fsdp2-offload+ac"]


def run_baseline(bin_dir, step, passes, tfile, strict=True):
    """A baseline's (device arena bytes, simulated step seconds, None), or
    with `strict` off (PyTorch's partitioner's mapped saved sets, which a
    fraction may fail to build) (None, None, the error's last line)."""
    r = run([os.path.join(bin_dir, "offload-opt"), step] + passes +
            ["--offload-memory-report", f"--offload-cost-report=per-op=false target={tfile}",
             "-o", os.devnull], ok=False)
    if r.returncode != 0:
        if not strict:
            return None, None, (r.stdout.strip().splitlines()[-1][:160] if r.stdout.strip()
                                else "failed")
        # A baseline has no budget to miss: any failure is a broken run.
        sys.exit(f"baseline {' '.join(passes)} on {step} failed:\n{r.stdout[-2000:]}")
    arena = int(re.search(r"device arena bytes: (\d+)", r.stdout).group(1))
    t = float(re.search(r"simulated step time on \S+: ([0-9.e+-]+) s", r.stdout).group(1))
    return arena, t, None


def smallest_reachable(bin_dir, step, tfile, timeout):
    """The planner's smallest reachable arena (its error at budget=1);
    "timeout" when the search ran past `timeout` seconds. Exits with
    offload-opt's output when the run fails otherwise."""
    try:
        r = run([os.path.join(bin_dir, "offload-opt"), step,
                 f"--offload-plan-memory=budget=1 target={tfile} slice=never", "-o", os.devnull],
                ok=False, timeout=timeout)
    except subprocess.TimeoutExpired:
        return "timeout"
    m = re.search(r"Ask for budget=(\d+)", r.stdout)
    if not m:
        # budget=1 never fits: without the planner's answer the run broke,
        # and the table would lose its smallest point without a word.
        sys.exit(f"the smallest reachable arena of {step} on {tfile}: offload-opt failed:\n"
                 f"{r.stdout[-2000:]}")
    return int(m.group(1))


def plan_row(bin_dir, step, budget, tfile, work, tag, timeout, milp_seconds=0.0):
    """Ours at `budget`: arena, simulated step, planning seconds (the whole
    offload-opt run, wall), the LP bound's step time and its solve seconds.
    With `milp_seconds`, also the MILP's optimum of the exported model built
    with the real passes (oracle.oracle_plan: solved at the peak our
    decisions reach, replayed, the limit lowered by the real arena's
    overshoot and bisected, the fastest plan that fits the budget kept):
    res["milp"] its simulated step, or res["milp_status"] why there is none
    (the solve ran past `milp_seconds`, or no solution built by the real
    passes fits the budget)."""
    t0 = time.perf_counter()
    try:
        r = oracle.plan(bin_dir, step, budget, tfile, work, tag, extra="slice=never",
                        timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"fits": False, "timeout": True, "plan_s": time.perf_counter() - t0}
    wall = time.perf_counter() - t0
    if "error" in r:
        if not r["no_fit"]:
            # Not the planner's answer about the budget (a crash, a full disk,
            # a bad option): the row would read "no fit" and be wrong.
            sys.exit(f"planning {step} at budget={budget} on {tfile} failed:\n"
                     f"{r['error'][-2000:]}")
        return {"fits": False, "plan_s": wall}
    res = {"fits": True, "arena": r["arena"], "plan_s": wall, "t": r.get("t")}
    if not r.get("problem"):  # fits unplanned: the bound is the unplanned step itself
        res["fits_unplanned"] = True
        return res
    problem = json.load(open(r["problem"]))
    oracle.check_version(problem, r["problem"])
    mine = oracle.planner_choice(problem)
    limit = int(oracle.live_after(problem, mine).max()) if mine else problem["achieved_bytes"]
    # The bound and our price with our shared regions (oracle.planner_held),
    # which the LP relaxation may take too; the MILP below without them.
    held = oracle.planner_held(problem)
    lp_limit = int(oracle.live_after(problem, mine, held).max()) if mine else limit
    status, lp, _, secs = oracle.solve(problem, lp_limit, 600.0, relax=True, shared=held,
                                       valid=True)
    res["lp_s"] = secs
    if status == "optimal":
        res["bound"] = r["t0"] + lp
    res["t0"] = r["t0"]
    res["priced"] = r["t0"] + oracle.price(problem, mine, held)
    res["decisions"] = sum(c["chosen"] != "keep" for c in problem["candidates"])
    res["fallback"] = problem["fallback"]
    if milp_seconds > 0:
        first = oracle.solve(problem, limit, milp_seconds)
        res["milp_s"] = first[3]
        if first[0] != "optimal":
            res["milp_status"] = ("past %g s" % milp_seconds if first[0] == "timeout"
                                  else first[0])
            return res
        status, secs, t, _ = oracle.oracle_plan(bin_dir, step, budget, tfile, problem, limit, first,
                                                milp_seconds, work, tag)
        res["milp_s"] += secs
        if t is None:
            res["milp_status"] = ("does not fit" if status in ("optimal", "infeasible")
                                  else "past %g s" % milp_seconds if status == "timeout"
                                  else status)
        else:
            res["milp"] = t
    return res


# --- The table --------------------------------------------------------------------

# The bound may lie above ours by this much before --check calls it broken:
# the report states step times to 4 significant digits.
BOUND_TOLERANCE = 1e-3

# The "within 3% of the MILP where it solves": ours against the
# MILP optimum's plan built with the same passes and simulated the same way.
MILP_TOLERANCE = 0.03


def pt_tag(x):
    """A pt-partitioner point: its fraction, "b" when its regions are cut at
    the blocks."""
    return f"{x['fraction']:.1f}" + ("b" if x.get("layout") == "blocks" else "")


def fmt_s(t):
    return "-" if t is None else f"{t:.3f}"


def gb(b):
    return f"{b / 1e9:.1f}"


def milp_cells(r, ours):
    """The MILP column and ours against it ("-": not run, or the step fits
    unplanned)."""
    if r.get("milp") is not None:
        vs = f"{100 * (ours / r['milp'] - 1):+.1f}%" if ours else "-"
        return f"{r['milp']:.3f} | {vs}"
    return f"{r.get('milp_status', '-')} | -"


def markdown(paths):
    """The rows of --json files as one markdown table (docs/planner.md)."""
    cols = ["none", "full-ac", "selective", "zero-offload", "fsdp2-offload", "zero-offload+ac",
            "fsdp2-offload+ac", "pt-partitioner"]
    print("| workload | target | budget GB | " + " | ".join(cols)
          + " | ours | plan s | priced | bound | gap | MILP | vs MILP | verdict |")
    print("|" + "---|" * (len(cols) + 11))
    # A later file's rows of a workload, precision and target replace an
    # earlier file's.
    groups = {}
    for path in paths:
        fresh = {}
        for row in json.load(open(path))["rows"]:
            fresh.setdefault((row["workload"], row.get("precision", "fp32"), row["target"]),
                             []).append(row)
        groups.update(fresh)
    order = list(WORKLOADS)
    last = None
    for _, rows in sorted(groups.items(), key=lambda kv: (
            order.index(kv[0][0]) if kv[0][0] in order else len(order), kv[0][1])):
        for row in rows:
            key = (row["workload"], row["target"])
            cells = []
            for c in cols:
                b = row["baselines"].get(c)
                if b is None:
                    cells.append("n/a")
                elif b["arena"] is None or b["arena"] > row["budget"]:
                    cells.append("-")
                else:
                    cells.append(f"{b['seconds']:.3f}" + (f" ({pt_tag(b)})"
                                                          if b.get("fraction") is not None else ""))
            r = row["ours"]
            if r["fits"] and r.get("fits_unplanned"):
                ours = row["bound"]
            else:
                ours = r.get("t") if r["fits"] else None
            bound = row["bound"]
            gap = f"{100 * (ours - bound) / bound:.1f}%" if ours and bound else "-"
            name = (f"{row['workload']}" + ("" if row.get("precision", "fp32") == "fp32"
                                             else f" ({row['precision']})"), row["target"])
            head = name if key != last else ("", "")
            last = key
            o = (f"{ours:.3f}" if ours is not None else
                 "timeout" if r.get("timeout") else "no fit")
            print(f"| {head[0]} | {head[1]} | {row['budget'] / 1e9:.2f} | " + " | ".join(cells)
                  + f" | **{o}** | {r['plan_s']:.1f} | {fmt_s(r.get('priced', ours))} | "
                  f"{fmt_s(bound)} | {gap} | {milp_cells(r, ours)} | {row['verdict']} |")


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "--markdown":
        markdown(sys.argv[2].split(","))
        return 0
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bin", default=os.path.join(ROOT, "build", "bin"))
    ap.add_argument("--workloads", default=",".join(WORKLOADS))
    ap.add_argument("--targets", default="h100-sxm,a100-40g,rtx-4090,l4")
    ap.add_argument("--points", type=int, default=4,
                    help="budgets per workload and target: the target's memory and points-1 "
                         "lower ones down to the smallest any method reaches (default 4)")
    ap.add_argument("--work", default="/tmp/offload-realistic")
    ap.add_argument("--host-adamw-rate", type=float, default=0.0,
                    help="host AdamW bytes/s (28 per parameter) instead of measuring it")
    ap.add_argument("--known-losses", default="",
                    help="file of rows expected to fail --check: 'workload target budget-index' "
                         "per line (# comments)")
    ap.add_argument("--precision", default="fp32",
                    help="the steps' precisions, comma-separated: fp32 (default), bf16-mixed "
                         "(autocast with fp32 master weights and AdamW state)")
    ap.add_argument("--reuse", action="store_true",
                    help="reuse the steps an earlier run left in --work (no export, no autodiff)")
    ap.add_argument("--timeout", type=float, default=300.0,
                    help="seconds per planner run (offload-opt killed after; default %(default)s)")
    ap.add_argument("--milp", type=float, default=0.0, metavar="SECONDS",
                    help="also solve the exported model's MILP on every planned row (HiGHS, at "
                         "most SECONDS per solve) and build its optimum with the real passes; "
                         "--check then also fails a row where ours is more than 3%% slower "
                         "than that plan (default 0: not run)")
    ap.add_argument("--json", default="", help="also write every row as JSON to this file")
    ap.add_argument("--pt-partitioner", choices=("auto", "off"), default="auto",
                    help="the pt-partitioner column (PyTorch's min-cut partitioner, its saved set "
                         "mapped onto our step): auto (default) runs it on "
                         + ", ".join(PT_WORKLOADS) + " in fp32 when scripts/torch2-python works, "
                         "off leaves it out")
    ap.add_argument("--pt-fractions", default=PT_FRACTIONS,
                    help="the activation_memory_budget values of the pt-partitioner sweep "
                         "(default %(default)s)")
    ap.add_argument("--check", action="store_true")
    args = ap.parse_args()
    os.makedirs(args.work, exist_ok=True)
    if args.host_adamw_rate:
        host = {"bytes_per_second": args.host_adamw_rate, "source": "--host-adamw-rate"}
    else:
        host = host_adamw_rate(args.work)
    print(f"host AdamW: {host['bytes_per_second'] / 1e9:.2f} GB/s "
          f"({host['bytes_per_second'] / 28e6:.0f} M parameters/s; {host['source']}"
          + (f"; PyTorch {host['torch']}, {host['threads']} threads" if "torch" in host else "")
          + ")", flush=True)
    known = set()
    if args.known_losses:
        for line in open(args.known_losses):
            line = line.split("#")[0].split()
            if line:
                known.add((line[0], line[1], int(line[2]), line[3] if len(line) > 3 else "fp32"))
    precisions = args.precision.split(",")
    for p in precisions:
        if p not in ("fp32", "bf16-mixed"):
            ap.error(f"--precision: {p!r} is neither fp32 nor bf16-mixed")
    failures, expected, rows, unknown_wins = [], [], [], []
    pt_names = [n for n in args.workloads.split(",") if n in PT_WORKLOADS]
    pt_sets = (pt_saved_sets(pt_names, args.work, args.pt_fractions)
               if args.pt_partitioner != "off" and "fp32" in precisions and pt_names else {})
    for precision, name in [(p, n) for p in precisions for n in args.workloads.split(",")]:
        step, unplanned, locs, nparams = build_workload(name, args.work, args.bin,
                                                        precision, args.reuse)
        tag = name if precision == "fp32" else f"{name}.{precision}"
        marked = mark_blocks(name, step, locs, args.work, tag, args.bin, precision)
        kind = WORKLOADS[name][0]
        print(f"\n{name} ({precision}): {nparams / 1e9:.3f} B parameters, unplanned arena {gb(unplanned)} GB, "
              f"{len(locs)} saved values"
              + (f"; full-ac: {marked[1]} blocks, {marked[2]} saved values recomputed"
                 if marked else "; full-ac: no blocks found"), flush=True)
        pt, pt_why = None, None
        if args.pt_partitioner == "off":
            pt_why = "--pt-partitioner off"
        elif name not in PT_WORKLOADS:
            pt_why = "not built on the PyTorch side"
        elif precision != "fp32":
            pt_why = "fp32 only"
        else:
            sets = pt_sets.get(name)
            if isinstance(sets, str):
                pt_why = sets
            else:
                pt = pt_partitioner_points(name, step, args.bin, sets, args.work, tag, locs)
        if pt_why:
            print(f"  pt-partitioner: n/a ({pt_why})", flush=True)
        else:
            print("  pt-partitioner: PyTorch's saved set per activation_memory_budget, mapped onto "
                  "our saved values (PyTorch saved GB / tensors; mapped onto ours; not mapped; "
                  "ours kept GB / recomputed GB in regions):", flush=True)
            for frac, layout, _, st in pt:
                if layout != "run":
                    continue
                print(f"    {frac}: {gb(st['pt_bytes'])} GB / {st['pt_saved']}; {st['mapped']} mapped; "
                      f"{st['unmapped']} not ({gb(st['unmapped_bytes'])} GB: "
                      + (", ".join(f"{k} {v / 1e6:.1f} MB" for k, v in st["unmapped_kinds"].items())
                         or "-")
                      + f"); ours {gb(st['mapped_bytes'])} / {gb(st['recomputed_bytes'])} GB "
                      f"in {st['groups']} regions", flush=True)
        for target in args.targets.split(","):
            tfile = target_file(target, host["bytes_per_second"], args.work)
            base = {}
            for bname, passes in baselines(kind, marked is not None):
                src = marked[0] if "ac" in bname.split("+")[-1] or bname == "full-ac" else step
                base[bname] = run_baseline(args.bin, src, passes, tfile)
            # PyTorch's partitioner: each fraction's mapped saved set, built
            # and simulated as the other baselines; a row takes the fastest
            # fraction that fits its budget.
            sweep = []
            for frac, layout, path, st in (pt or []):
                a, t, e = run_baseline(args.bin, path or step,
                                       (["--offload-recompute=policy=marked"] if path else [])
                                       + ["--offload-early-update"], tfile, strict=False)
                sweep.append({"fraction": float(frac), "layout": layout, "arena": a,
                              "seconds": t, "error": e, "mapping": st})
            pt_arenas = [x["arena"] for x in sweep if x["arena"]]
            smallest = smallest_reachable(args.bin, step, tfile, args.timeout)
            reach = [a for a, _, _ in base.values()] + pt_arenas + (
                [smallest] if isinstance(smallest, int) else [])
            low = min(reach)
            mem = int(TARGET_MEMORY[target])
            # The target's memory, then points-1 budgets from the lower of it
            # and the unplanned arena (above it every method fits as is) down
            # to the smallest arena any method reaches.
            top = min(mem, unplanned)
            n = args.points - 1
            budgets = [mem] + ([int(low + (top - low) * j / n) for j in range(n - 1, -1, -1)]
                               if low < top else [])
            # And the smallest arena a baseline reaches, where the strongest
            # fixed policy just fits.
            base_low = min([a for a, _, _ in base.values()] + pt_arenas)
            if base_low and base_low < mem and base_low not in budgets:
                budgets = sorted(budgets + [base_low], reverse=True)
            budgets = sorted(set(budgets), reverse=True)
            ours_low = (f"{gb(smallest)} GB" if isinstance(smallest, int) else
                        f"search past {args.timeout:g} s")
            print(f"  {target} (memory {gb(mem)} GB): smallest reachable: ours {ours_low}; baselines: "
                  + ", ".join(f"{b} {gb(a)} GB / {t:.3f} s" for b, (a, t, _) in base.items())
                  + ("; pt-partitioner " + ", ".join(
                      f"{pt_tag(x)}: {gb(x['arena'])} GB / {x['seconds']:.3f} s" if x["arena"]
                      else f"{pt_tag(x)}: failed ({x['error']})" for x in sweep)
                     if sweep else ""), flush=True)
            hdr = (f"    {'budget GB':>9} | " + " | ".join(f"{b:>16}" for b in base)
                   + (f" | {'pt-partitioner':>16}" if sweep else "")
                   + f" | {'ours':>7} | {'plan s':>6} | {'priced':>7} | {'bound':>7} | {'gap':>6}"
                   + (f" | {'MILP, vs MILP':>16}" if args.milp else "") + " | verdict")
            print(hdr)
            for k, budget in enumerate(budgets):
                r = plan_row(args.bin, step, budget, tfile, args.work, f"{tag}.{target}.{k}",
                             args.timeout, args.milp)
                fit = {b: t for b, (a, t, _) in base.items() if a <= budget}
                pt_fit = min((x for x in sweep if x["arena"] is not None and x["arena"] <= budget),
                             key=lambda x: x["seconds"], default=None)
                if pt_fit:
                    fit["pt-partitioner"] = pt_fit["seconds"]
                best = min(fit.items(), key=lambda kv: kv[1]) if fit else None
                ours = r.get("t") if r["fits"] else None
                if r["fits"] and r.get("fits_unplanned"):
                    ours = base["none"][1]
                    bound = ours
                else:
                    bound = r.get("bound")
                gap = f"{100 * (ours - bound) / bound:.1f}%" if ours and bound else "-"
                why = []
                if r.get("timeout"):
                    why.append(f"planning past {args.timeout:g} s")
                if best and not r["fits"]:
                    why.append(f"does not fit where {best[0]} does")
                elif best and ours is not None and ours > best[1] * 1.001:
                    why.append(f"{best[0]} faster by {100 * (ours / best[1] - 1):.1f}%")
                if r["fits"] and bound is None:
                    why.append("no bound")
                elif ours is not None and bound is not None and \
                        bound > ours * (1 + BOUND_TOLERANCE):
                    # The bound is a relaxation of every plan (solve(valid=True)):
                    # above a simulated plan, a term of it is not.
                    why.append(f"bound {100 * (bound / ours - 1):.1f}% above ours")
                if ours is not None and r.get("milp") is not None and \
                        ours > r["milp"] * (1 + MILP_TOLERANCE):
                    why.append(f"{100 * (ours / r['milp'] - 1):.1f}% over the MILP's plan")
                verdict = "ok" if not why else "; ".join(why)
                key = (name, target, k, precision)
                if why:
                    (expected if key in known else failures).append(
                        f"{name} {target} {k} {precision} ({gb(budget)} GB): {verdict}")
                    if key in known:
                        verdict += " (known)"
                elif key in known:
                    unknown_wins.append(f"{name} {target} {k} {precision} ({gb(budget)} GB)")
                cells = []
                for b, (a, t, _) in base.items():
                    cells.append(f"{t:>16.3f}" if a <= budget
                                 else f"{'does not fit':>16}")
                if sweep:
                    cells.append(f"{pt_fit['seconds']:.3f} ({pt_tag(pt_fit)})".rjust(16) if pt_fit
                                 else f"{'does not fit':>16}")
                print(f"    {budget / 1e9:>9.2f} | " + " | ".join(cells)
                      + f" | {fmt_s(ours) if r['fits'] else 'timeout' if r.get('timeout') else 'no fit':>7}"
                      f" | {r['plan_s']:>6.1f}"
                      f" | {fmt_s(r.get('priced', ours if r['fits'] else None)):>7}"
                      f" | {fmt_s(bound):>7} | {gap:>6}"
                      + (f" | {milp_cells(r, ours).replace(' | ', ' '):>16}" if args.milp else "")
                      + f" | {verdict}", flush=True)
                row = {"workload": name, "precision": precision, "target": target, "index": k,
                       "budget": budget,
                       "baselines": {b: {"arena": a, "seconds": t}
                                     for b, (a, t, _) in base.items()},
                       "ours": r, "bound": bound, "verdict": verdict}
                if sweep:
                    row["baselines"]["pt-partitioner"] = (
                        {"arena": pt_fit["arena"], "seconds": pt_fit["seconds"],
                         "fraction": pt_fit["fraction"], "layout": pt_fit["layout"]} if pt_fit else
                        {"arena": min(pt_arenas, default=None), "seconds": None, "fraction": None})
                    if k == 0:
                        row["pt_partitioner_sweep"] = sweep
                elif pt_why:
                    row["pt_partitioner_na"] = pt_why
                rows.append(row)
                if args.json:
                    json.dump({"host_adamw": host, "rows": rows}, open(args.json, "w"), indent=1)
    if args.json:
        json.dump({"host_adamw": host, "rows": rows}, open(args.json, "w"), indent=1)
    if expected:
        print("\nexpected failures (known losses):")
        for f in expected:
            print("  " + f)
    if unknown_wins:
        print("\nlisted as known losses but won now (take them off the list):")
        for f in unknown_wins:
            print("  " + f)
    if args.check:
        for f in failures:
            print("CHECK FAILED:", f)
        if failures:
            return 1
        print("check ok: no row loses to a baseline that fits, lacks its bound or has a bound "
              "above ours"
              + (f" ({len(expected)} known losses)" if expected else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
