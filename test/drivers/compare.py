#!/usr/bin/env python3
"""Compares offload's results with PyTorch's reference, name by name.

    /usr/bin/python3 test/drivers/compare.py OURS.npz REF.npz [--prefix grad:] [--rtol 1e-4]
        [--require NAME ...] [--json]

For every array name present in both files (optionally only names starting
with --prefix) it prints the largest relative error
    max|ours - ref| / max(max|ref|, floor)
(relative to the tensor's scale, so that near-zero elements of a large
tensor do not dominate; the scale is at least --floor, default 1e-5, so a
tensor that vanishes in exact arithmetic -- e.g. the gradient of an
attention key bias, which softmax cancels -- is compared in absolute
terms, not as ratios of rounding noise), and exits 1 if any exceeds --rtol or if a name
given with --require is missing from either file. The last line is
`max relative error E over N arrays`.
"""
import argparse
import json
import sys

import numpy as np


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("ours")
    ap.add_argument("ref")
    ap.add_argument("--prefix", default="")
    ap.add_argument("--rtol", type=float, default=1e-4)
    ap.add_argument("--require", nargs="*", default=[])
    ap.add_argument("--skip", nargs="*", default=[],
                    help="leave out names starting with any of these prefixes")
    ap.add_argument("--rename", nargs="*", default=[],
                    help="OURS=REF pairs: compare ours[OURS] with ref[REF]")
    ap.add_argument("--floor", type=float, default=1e-5,
                    help="smallest reference scale (absolute)")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--quiet", action="store_true", help="print only the summary")
    args = ap.parse_args(argv)

    ours = np.load(args.ours)
    ref = np.load(args.ref)
    pairs = [(n, n) for n in sorted(set(ours.files) & set(ref.files))
             if n.startswith(args.prefix) and not any(n.startswith(p) for p in args.skip)]
    for r in args.rename:
        a, b = r.split("=", 1)
        pairs.append((a, b))
    missing = [n for n in args.require if n not in ours.files or n not in ref.files]
    worst, worst_name, rows = 0.0, "", []
    for a, b in pairs:
        x = np.asarray(ours[a], dtype=np.float64)
        y = np.asarray(ref[b], dtype=np.float64)
        if x.shape != y.shape:
            rows.append((a, float("inf"), f"shape {x.shape} vs {y.shape}"))
            worst, worst_name = float("inf"), a
            continue
        scale = max(float(np.max(np.abs(y))) if y.size else 0.0, args.floor)
        err = float(np.max(np.abs(x - y))) / scale if y.size else 0.0
        rows.append((a, err, ""))
        if err > worst:
            worst, worst_name = err, a
    ok = worst <= args.rtol and not missing and pairs
    if args.json:
        print(json.dumps({"max_rel_error": worst, "worst": worst_name, "arrays": len(pairs),
                          "missing": missing, "ok": bool(ok)}))
    else:
        if not args.quiet:
            for name, err, note in rows:
                flag = "" if err <= args.rtol else "  <-- exceeds rtol"
                print(f"  {name:50s} {err:.3e}{flag} {note}")
        for n in missing:
            print(f"  missing: {n}")
        print(f"max relative error {worst:.3e} over {len(pairs)} arrays"
              + (f" (worst: {worst_name})" if worst_name else ""))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
