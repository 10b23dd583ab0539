#!/usr/bin/python3
"""Saved-tensor bytes that PyTorch keeps alive across a B/W-split backward.

A pipeline stage with a split backward (zero-bubble schedules) first computes
the input gradient (B):

    g_in = torch.autograd.grad(loss, stage_input, retain_graph=True)

and later the weight gradients (W). retain_graph=True keeps every saved tensor
of the graph alive between the two calls, although W reads only part of them.
This script measures, on the eager module rebuilt from DIR/<name>.json and
DIR/<name>.params.npz (train mode, loss as in saved_tensor_bytes.py):

  forward   every saved storage of the forward (counted as in
            saved_tensor_bytes.py: distinct storages, full storage bytes,
            first saving module, kinds activation/param/buffer/input). The
            stage input requires grad here, so layers that save their weight
            only for the input gradient (the first Linear/Conv) do so.
  retained  storages of saved tensors still alive after the B call, i.e.
            between B and W: what retain_graph keeps (weak references to the
            packed tensors tell whether they are alive).
  B read    storages unpacked by the backward nodes that ran in B.
  W read    storages unpacked by the backward nodes that ran in W.
  B only    retained activation/input bytes that W does not read: what an
            ideal split could free when B ends (activation and input kinds).
  dY held   bytes of the module-output gradients captured in B and handed to
            W (the "grad_outputs" of W), distinct storages.

The stage input is x (float inputs: a leaf copy with requires_grad) or, for
the gpt (integer tokens), the output of its `drop` module (the embeddings'
sum entering the blocks).

W is computed per parameter-owning module the way PyTorch's pipelining does
it: a forward hook records each module's output tensors; B captures their
gradients with tensor hooks; W calls
    torch.autograd.grad(module_outputs, module_params, grad_outputs=captured,
                        retain_graph=True)
per module, so it runs only the module's own backward nodes. Parameters of a
module whose forward hook never fires (MultiheadAttention's out_proj, used via
F.linear) go to the nearest ancestor module that has one. If a module's output
was later modified in place (ResNet: bn -> relu_), the hook sits on the
modified value, so its W also runs the in-place op's backward (ReLU reads its
result, which the next conv's W reads anyway). Parameters upstream of the
stage input take their W from (stage_input, g_in). The W gradients are checked
against torch.autograd.grad(loss, params) (rtol 1e-4, atol 1e-6) and the
result is printed.

Usage: bw_split_bytes.py --model DIR/<name> [--json]
"""

import argparse
import collections
import json
import os
import sys

import torch
import torch.nn.functional as F

import export_models as em
import savedtensors as st

# Stage input for models whose input x is integer tokens: a module's output.
STAGE_INPUT_MODULE = {"gpt": "drop"}


def _tensors(out):
    if isinstance(out, torch.Tensor):
        return [out]
    if isinstance(out, (tuple, list)):
        return [t for o in out for t in _tensors(o)]
    return []


def _sum_bytes(records, kinds=st.KINDS):
    return sum(r["nbytes"] for r in records if r["kind"] in kinds)


def measure(prefix):
    cfg, model = em.load_eager(prefix)
    model.train()
    x, y = em.load_inputs(prefix)
    name = cfg["model"]

    # Module outputs (and the stage input for token models) via forward hooks.
    mods = dict(model.named_modules())
    outs = collections.defaultdict(list)   # module name -> output tensors
    order = []                             # modules in first-call order
    stage = {}
    handles = []

    def out_hook(qual):
        def hook(module, args, out):
            ts = [t for t in _tensors(out) if t.requires_grad]
            if qual not in outs:
                order.append(qual)
            outs[qual].extend(ts)
            if STAGE_INPUT_MODULE.get(name) == qual and "t" not in stage and ts:
                stage["t"] = ts[0]
        return hook

    for qual, m in mods.items():
        handles.append(m.register_forward_hook(out_hook(qual)))

    if x.dtype.is_floating_point:
        x = x.clone().requires_grad_(True)
        stage["t"] = x

    rec = st.Recorder(model, [x, y])
    torch.manual_seed(0)
    with rec.hooks():
        loss = model(x, y) if cfg["returns_loss"] else F.cross_entropy(model(x), y)
        for h in handles:
            h.remove()
        rec.remove()
        if "t" not in stage:
            raise RuntimeError("no stage input found for %s" % name)
        stage_in = stage["t"]

        # Owner of every parameter: its module if the forward hook fired there,
        # else the nearest ancestor whose hook did.
        owner_params = collections.OrderedDict()
        for qual, m in mods.items():
            own = list(m.named_parameters(recurse=False))
            if not own:
                continue
            o = qual
            while o not in outs or not outs[o]:
                if o == "":
                    o = None
                    break
                o = o.rsplit(".", 1)[0] if "." in o else ""
            for pn, p in own:
                owner_params.setdefault(o, []).append(((qual + "." if qual else "") + pn, p))

        # Capture module-output gradients during B.
        grads = {}
        hooked = []
        for qual in owner_params:
            if qual is None:
                continue
            for i, t in enumerate(outs[qual]):
                def cap(g, key=(qual, i)):
                    grads[key] = g
                t.register_hook(cap)
                hooked.append((qual, i))

        # --- B: input gradient --------------------------------------------
        rec.phase = "B"
        (g_in,) = torch.autograd.grad(loss, [stage_in], retain_graph=True)
        rec.phase = None
        retained_keys = rec.alive_keys()
        dy_storages = {}
        for g in list(grads.values()) + [g_in]:
            k, nb = st.storage_key(g)
            dy_storages[k] = nb

        # --- W: weight gradients, module by module --------------------------
        rec.phase = "W"
        wgrads = {}
        leftovers = []
        for qual in reversed(order):
            if qual not in owner_params:
                continue
            params = owner_params[qual]
            pairs = [(t, grads.get((qual, i))) for i, t in enumerate(outs[qual])]
            pairs = [(t, g) for t, g in pairs if g is not None]
            if not pairs:
                leftovers.extend(params)
                continue
            res = torch.autograd.grad([t for t, _ in pairs], [p for _, p in params],
                                      grad_outputs=[g for _, g in pairs],
                                      retain_graph=True, allow_unused=True)
            for (pn, p), g in zip(params, res):
                if g is None:
                    leftovers.append((pn, p))
                else:
                    wgrads[pn] = g
        leftovers.extend(owner_params.get(None, []))
        if leftovers and stage_in.grad_fn is not None:
            res = torch.autograd.grad([stage_in], [p for _, p in leftovers],
                                      grad_outputs=[g_in], retain_graph=True,
                                      allow_unused=True)
            rest = []
            for (pn, p), g in zip(leftovers, res):
                if g is None:
                    rest.append((pn, p))
                else:
                    wgrads[pn] = g
            leftovers = rest
        if leftovers:  # not reachable per module: the plain call
            res = torch.autograd.grad(loss, [p for _, p in leftovers],
                                      retain_graph=True, allow_unused=True)
            for (pn, p), g in zip(leftovers, res):
                wgrads[pn] = g if g is not None else torch.zeros_like(p)
        rec.phase = None

        # --- Check W against a plain backward ------------------------------
        names = [pn for pn, _ in model.named_parameters()]
        ref = torch.autograd.grad(loss, [p for _, p in model.named_parameters()],
                                  allow_unused=True)
    worst = 0.0
    ok = True
    for pn, r in zip(names, ref):
        r = r if r is not None else torch.zeros_like(wgrads[pn])
        g = wgrads[pn]
        if not torch.allclose(g, r, rtol=1e-4, atol=1e-6):
            ok = False
        worst = max(worst, float((g - r).abs().max()))

    fwd = rec.distinct()
    retained = [r for r in fwd if r["key"] in retained_keys]
    b_read = [r for r in fwd if r["key"] in rec.unpacked["B"]]
    w_read = [r for r in fwd if r["key"] in rec.unpacked["W"]]
    b_only = [r for r in retained if r["key"] not in rec.unpacked["W"]
              and r["kind"] in ("activation", "input")]

    def per_kind(rs):
        return {k: _sum_bytes(rs, (k,)) for k in st.KINDS}

    by_module = collections.OrderedDict()
    for m in rec.module_order():
        by_module[m] = {"forward": 0, "retained": 0, "w_read": 0, "b_only": 0}
    for label, rs in (("forward", fwd), ("retained", retained),
                      ("w_read", w_read), ("b_only", b_only)):
        for r in rs:
            by_module[r["module"]][label] += r["nbytes"]
    by_module = collections.OrderedDict(
        (m, v) for m, v in by_module.items() if v["forward"] > 0)

    return {
        "model": name,
        "stage_input": "x" if stage_in is x else STAGE_INPUT_MODULE[name] + " output",
        "forward_bytes": _sum_bytes(fwd),
        "forward_by_kind": per_kind(fwd),
        "retained_bytes": _sum_bytes(retained),
        "retained_by_kind": per_kind(retained),
        "b_read_bytes": _sum_bytes(b_read),
        "w_read_bytes": _sum_bytes(w_read),
        "w_read_by_kind": per_kind(w_read),
        "b_only_bytes": _sum_bytes(b_only),
        "dy_held_bytes": sum(dy_storages.values()),
        "w_grads_match": ok,
        "w_grads_max_abs_diff": worst,
        "by_module": by_module,
    }


def print_table(res):
    cols = ["forward", "retained", "w_read", "b_only"]
    w = max([len(m) for m in res["by_module"]] + [len("module")]) + 2
    print("B/W split of %s (stage input: %s); saved-tensor bytes, distinct storages"
          % (res["model"], res["stage_input"]))
    print("%-*s %14s %14s %14s %14s" % (w, "module", "forward", "retained",
                                        "W reads", "B only"))
    for m, row in res["by_module"].items():
        print("%-*s %14s %14s %14s %14s" % (w, m, *[st.fmt_bytes(row[c]) for c in cols]))
    print("%-*s %14s %14s %14s %14s" % (
        w, "TOTAL", st.fmt_bytes(res["forward_bytes"]),
        st.fmt_bytes(res["retained_bytes"]), st.fmt_bytes(res["w_read_bytes"]),
        st.fmt_bytes(res["b_only_bytes"])))
    rk = res["retained_by_kind"]
    print("retained by retain_graph between B and W: %s bytes (activation %s, "
          "input %s, param %s, buffer %s)" % (
              st.fmt_bytes(res["retained_bytes"]), st.fmt_bytes(rk["activation"]),
              st.fmt_bytes(rk["input"]), st.fmt_bytes(rk["param"]),
              st.fmt_bytes(rk["buffer"])))
    print("W reads %s bytes; B reads %s bytes; activation/input bytes only B needs "
          "(freeable after B): %s; output gradients held for W: %s bytes"
          % (st.fmt_bytes(res["w_read_bytes"]), st.fmt_bytes(res["b_read_bytes"]),
             st.fmt_bytes(res["b_only_bytes"]), st.fmt_bytes(res["dy_held_bytes"])))
    print("W gradients vs plain backward: %s (max |diff| %.3g)" % (
        "match" if res["w_grads_match"] else "MISMATCH", res["w_grads_max_abs_diff"]))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", required=True, help="DIR/<name> (export prefix)")
    ap.add_argument("--json", action="store_true", help="print JSON instead of a table")
    a = ap.parse_args(argv)
    prefix = a.model[:-3] if a.model.endswith(".pt") else a.model
    for suffix in (".json", ".params.npz", ".inputs.npz"):
        if not os.path.exists(prefix + suffix):
            ap.error("missing %s%s (run export_models.py first)" % (prefix, suffix))
    res = measure(prefix)
    if a.json:
        print(json.dumps(res, indent=2))
    else:
        print_table(res)
    return 0 if res["w_grads_match"] else 1


if __name__ == "__main__":
    sys.exit(main())
