#!/usr/bin/python3
"""PyTorch's own saved-tensor bytes for one training forward of an exported model.

Runs one forward in train mode, plus the loss (F.cross_entropy(logits, y),
mean reduction, unless the model returns the loss itself), with
torch.autograd.graph.saved_tensors_hooks installed, and counts what autograd
saves for backward. The model inputs do not require grad (single-stage
training: no input gradient is asked for, so e.g. the first Linear does not
save its weight).

How it counts (see savedtensors.py):
  * every tensor passed to the pack hook is mapped to its storage, keyed by
    (device, storage data_ptr); each distinct storage is counted ONCE, with the
    storage's full size in bytes (storage().nbytes()), and attributed to the
    first module that saved it. A tensor saved twice (a ReLU output saved by
    the ReLU and by the next Linear) or a view of a saved tensor costs nothing
    extra. Zero-byte storages are ignored.
  * attribution: module forward pre-hooks/hooks keep a stack of running
    modules; a save goes to the innermost one (qualified name as in
    named_modules(); "(model)" is the root module's own code; "(loss)" is
    code outside the model, i.e. the loss).
  * kinds, reported separately: "activation" (produced by the forward,
    including the loss's saved values), "param" (storage of a parameter, such
    as the W^T view a Linear saves to compute its input gradient), "buffer",
    and "input" (storage of x or y; e.g. the first layer's saved input and the
    loss's target).
The "activation + input" total is what a training step must keep in memory
for backward in addition to the parameters it already holds.

Attribution needs Python module hooks, so the table is measured on the eager
module rebuilt by export_models.py from DIR/<name>.json and loaded with
DIR/<name>.params.npz; the same forward is then run on the traced DIR/<name>.pt
(torch.jit.optimized_execution(False), so every aten op goes through eager
autograd) and its total is reported as a cross-check ("traced total"). The
two save the same tensors; the totals can differ by a few bytes because eager
`tensor * python_float` wraps the float in a fresh 0-dim float64 tensor that
MulBackward saves (8 bytes per call), while the trace holds one constant
tensor shared by every call site (one storage, counted once).

Usage: saved_tensor_bytes.py --model DIR/<name> [--json]
"""

import argparse
import json
import os
import sys

import torch
import torch.nn.functional as F

import export_models as em
import savedtensors as st


def forward_loss(cfg, module, x, y):
    if cfg["returns_loss"]:
        return module(x, y)
    return F.cross_entropy(module(x), y)


def measure(prefix):
    """Returns a dict of results (see --json) for the export PREFIX."""
    cfg, model = em.load_eager(prefix)
    model.train()
    x, y = em.load_inputs(prefix)
    torch.manual_seed(0)
    rec = st.Recorder(model, [x, y])
    with rec.hooks():
        loss = forward_loss(cfg, model, x, y)
    rec.remove()
    summ = st.summarize(rec.distinct())

    traced = torch.jit.load(prefix + ".pt", map_location="cpu")
    em.load_state_arrays(traced, em.load_params(prefix))
    traced.train()
    trec = st.Recorder(traced, [x, y], module_hooks=False)
    torch.manual_seed(0)
    with torch.jit.optimized_execution(False), trec.hooks():
        tloss = forward_loss(cfg, traced, x, y)
    tsumm = st.summarize(trec.distinct())

    loss_row = summ["by_module"].get(st.OUTSIDE, {k: 0 for k in st.KINDS})
    return {
        "model": cfg["model"],
        "loss": float(loss.detach()),
        "traced_loss": float(tloss.detach()),
        "total_bytes": summ["total"],
        "activation_bytes": summ["by_kind"]["activation"],
        "param_bytes": summ["by_kind"]["param"],
        "buffer_bytes": summ["by_kind"]["buffer"],
        "input_bytes": summ["by_kind"]["input"],
        "loss_bytes": sum(loss_row.values()),
        "distinct_storages": summ["count"],
        "saved_tensors": len(rec.records),
        "traced_total_bytes": tsumm["total"],
        "by_module": summ["by_module"],
    }


def print_table(res):
    cols = ["activation", "param", "input", "buffer"]
    w = max([len(m) for m in res["by_module"]] + [len("module")]) + 2
    print("saved-tensor bytes for one training forward of %s (distinct storages)"
          % res["model"])
    print("%-*s %14s %14s %14s %14s %14s" % (w, "module", *cols, "total"))
    for m, row in res["by_module"].items():
        print("%-*s %14s %14s %14s %14s %14s" % (
            w, m, *[st.fmt_bytes(row[c]) for c in cols],
            st.fmt_bytes(sum(row.values()))))
    print("%-*s %14s %14s %14s %14s %14s" % (
        w, "TOTAL", st.fmt_bytes(res["activation_bytes"]),
        st.fmt_bytes(res["param_bytes"]), st.fmt_bytes(res["input_bytes"]),
        st.fmt_bytes(res["buffer_bytes"]), st.fmt_bytes(res["total_bytes"])))
    print("activation+input bytes: %s (of which the loss: %s); parameter bytes saved: %s"
          % (st.fmt_bytes(res["activation_bytes"] + res["input_bytes"]),
             st.fmt_bytes(res["loss_bytes"]), st.fmt_bytes(res["param_bytes"])))
    d = res["traced_total_bytes"] - res["total_bytes"]
    print("traced .pt total: %s (%s)" % (
        st.fmt_bytes(res["traced_total_bytes"]),
        "matches" if d == 0 else "%+d bytes vs eager" % d))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", required=True, help="DIR/<name> (export prefix)")
    ap.add_argument("--json", action="store_true", help="print JSON instead of a table")
    a = ap.parse_args(argv)
    prefix = a.model[:-3] if a.model.endswith(".pt") else a.model
    for suffix in (".pt", ".json", ".params.npz", ".inputs.npz"):
        if not os.path.exists(prefix + suffix):
            ap.error("missing %s%s (run export_models.py first)" % (prefix, suffix))
    res = measure(prefix)
    if a.json:
        print(json.dumps(res, indent=2))
    else:
        print_table(res)
    return 0


if __name__ == "__main__":
    sys.exit(main())
