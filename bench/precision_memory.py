#!/usr/bin/python3
"""Unplanned device arena of fp32 against bf16-mixed steps, and where the bytes went (issue 29).

    PYTHONPATH=python /usr/bin/python3 bench/precision_memory.py --bin build/bin
        --work DIR [--models resnet18,gpt] [--batch B] [--optimizer adamw]

For each example model: export (export_models.py), import, then build its
step with offload-opt --offload-autodiff="optimizer=... precision=P
moments=M" (P = fp32, bf16-mixed; with AdamW also M = bf16, the moments
stored in bf16, for both) and read the memory plan (--offload-memory-report:
the device arena the lowering would allocate without any memory pass, its
peak and the persistent bytes) and the saved values from the step's IR:

  persistent      step arguments and results: f32 master weights, optimizer
                  state, inputs (the same under both precisions; moments=bf16
                  halves AdamW's two moments: 4 bytes less per parameter)
  saved, f32/int  forward values kept for backward, stored in f32 (or
                  integers: max-pool indices, token ids)
  saved, act low  the same, stored in bf16
  saved, weights  bf16 copies of parameters that a low-type op saves
                  (linear/conv keep their cast weight for backward: the
                  planner may recompute them, one read of the master each)
  saved, total    all saved values

Prints one table; bytes are exact (from the types), the arena is the memory
plan's (the runtime measures the same peak).
"""
import argparse
import json
import os
import re
import subprocess
import sys

PY = "/usr/bin/python3"


def run(cmd):
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if r.returncode != 0:
        sys.exit("command failed: %s\n%s" % (" ".join(cmd), r.stdout))
    return r.stdout


def tensor_elements(ty):
    """Elements and element type of 'tensor<4x8xbf16>'."""
    m = re.match(r"tensor<((?:\d+x)*)(\w+)>", ty)
    n = 1
    for d in m.group(1).split("x"):
        if d:
            n *= int(d)
    return n, m.group(2)


def tensor_bytes(ty):
    """Bytes of 'tensor<4x8xbf16>' (i1 one byte)."""
    n, elt = tensor_elements(ty)
    width = {"f32": 4, "f64": 8, "bf16": 2, "f16": 2, "i64": 8, "i32": 4, "i1": 1}[elt]
    return n * width, elt


def saved_breakdown(step_text):
    """Saved bytes by kind from the step's IR (generic enough for our printer)."""
    params = set()
    header = step_text[step_text.index("func.func"):step_text.index("attributes {offload.autodiff")]
    for m in re.finditer(r"(%arg\d+): tensor<[^>]*> \{[^}]*role<parameter>", header):
        params.add(m.group(1))
    defs = {}
    for m in re.finditer(r"^\s*(%[\w#]+) = offload\.copy (%\w+) ", step_text, re.M):
        defs[m.group(1)] = m.group(2)
    out = {"act f32": 0, "act low": 0, "weights": 0, "total": 0}  # act f32: f32 or int
    for m in re.finditer(r"^\s*%[\w#]+ = offload\.save (%[\w#]+) : (tensor<[^>]*>)", step_text, re.M):
        b, elt = tensor_bytes(m.group(2))
        out["total"] += b
        if defs.get(m.group(1)) in params:
            out["weights"] += b
        elif elt in ("bf16", "f16"):
            out["act low"] += b
        else:
            out["act f32"] += b
    return out


def parameter_elements(step_text):
    """Elements of the step's parameters (role parameter), from its header."""
    header = step_text[step_text.index("func.func"):step_text.index("attributes {offload.autodiff")]
    return sum(tensor_elements(m.group(1))[0]
               for m in re.finditer(r"%arg\d+: (tensor<[^>]*>) \{[^}]*role<parameter>", header))


def memory(report):
    get = lambda key: int(re.search(key + r": (\d+)", report).group(1))
    peak_op = re.search(r"peak device bytes: \d+ at op #\d+ \(([\w.]+)\)", report).group(1)
    return {"arena": get("device arena bytes"), "peak": get("peak device bytes"),
            "persistent": get(r"persistent device bytes \(arguments, results\)"),
            "peak op": peak_op}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bin", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--models", default="resnet18,gpt")
    ap.add_argument("--batch", type=int, default=0)
    ap.add_argument("--optimizer", default="adamw", choices=["sgd", "adamw"])
    a = ap.parse_args(argv)
    os.makedirs(a.work, exist_ok=True)
    rows = []
    for m in a.models.split(","):
        export = [PY, "-m", "export_models", "--out", a.work, "--models", m]
        if a.batch:
            export += ["--batch", str(a.batch)]
        run(export)
        prefix = os.path.join(a.work, m)
        meta = json.load(open(prefix + ".json"))
        imp = [os.path.join(a.bin, "offload-import"), prefix + ".pt", "-o", prefix + ".mlir"]
        for k, v in meta["inputs"].items():
            imp += ["--input", f"{k}={v}"]
        if not meta.get("returns_loss"):
            imp += ["--loss", meta["loss"]]
        run(imp)
        variants = [(p, "f32") for p in ("fp32", "bf16-mixed")]
        if a.optimizer == "adamw":
            variants += [(p, "bf16") for p in ("fp32", "bf16-mixed")]
        for p, mom in variants:
            step = prefix + "." + p + "." + mom + ".step.mlir"
            out = run([os.path.join(a.bin, "offload-opt"), prefix + ".mlir",
                       f"--offload-autodiff=optimizer={a.optimizer} precision={p} moments={mom}",
                       "--offload-memory-report=report=-", "-o", step])
            text = open(step).read()
            row = {"model": m, "batch": meta["batch"], "precision": p, "moments": mom,
                   "param elements": parameter_elements(text)}
            row.update(memory(out))
            row.update(saved_breakdown(text))
            rows.append(row)
    cols = [("model", "%-9s"), ("batch", "%5s"), ("precision", "%-10s"), ("moments", "%7s"),
            ("arena", "%11s"),
            ("peak", "%11s"), ("persistent", "%11s"), ("total", "%11s"), ("act f32", "%12s"),
            ("act low", "%11s"), ("weights", "%11s"), ("peak op", "%-30s")]
    names = {"total": "saved", "act f32": "saved f32/i", "act low": "saved low",
             "weights": "wt copies"}
    print(" ".join(f % names.get(c, c) for c, f in cols))
    for r in rows:
        print(" ".join(f % r[c] for c, f in cols))
    pick = lambda m, p, mom: next((r for r in rows if r["model"] == m and r["precision"] == p
                                   and r["moments"] == mom), None)
    for m in a.models.split(","):
        f32, b16 = pick(m, "fp32", "f32"), pick(m, "bf16-mixed", "f32")
        for p in ("fp32", "bf16-mixed"):
            full, half = pick(m, p, "f32"), pick(m, p, "bf16")
            if half:
                saved = full["persistent"] - half["persistent"]
                print(f"{m} {p}: moments=bf16 persistent {half['persistent']} bytes, "
                      f"{saved} less = {saved / half['param elements']:.2f} per parameter "
                      f"element; arena {half['arena']} ({half['arena'] / full['arena']:.3f} "
                      f"of f32 moments)")
        print(f"{m}: arena bf16-mixed / fp32 = {b16['arena'] / f32['arena']:.3f}, "
              f"saved {b16['total'] / f32['total']:.3f}, activations saved "
              f"{(b16['act f32'] + b16['act low']) / f32['total']:.3f}, weight copies "
              f"{b16['weights']} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
