"""Compares a step's dump (offload-run --dump: loss, grad:NAME) with PyTorch's
(pt2_composite.py's reference.npz). Every reference gradient must be in the
dump and agree within |ours - torch| <= ATOL + RTOL * |torch| elementwise
(float32 steps: atol 1e-5, rtol 1e-4, a few ulps of the sums involved), and
the loss likewise. Prints `grads ok: N tensors, worst abs error E` or names
each tensor that disagrees and exits 1.

Usage: check_pt2_grads.py OURS.npz REFERENCE.npz
"""
import sys

import numpy as np

ATOL, RTOL = 1e-5, 1e-4
ours, ref = np.load(sys.argv[1]), np.load(sys.argv[2])
bad, worst = [], 0.0
for name in ref.files:
    if name not in ours.files:
        bad.append(f"{name}: missing from the step's dump")
        continue
    a, b = ours[name].astype(np.float64), ref[name].astype(np.float64)
    if a.shape != b.shape:
        bad.append(f"{name}: shape {a.shape}, PyTorch's {b.shape}")
        continue
    err = np.abs(a - b)
    worst = max(worst, float(err.max(initial=0.0)))
    if not np.all(err <= ATOL + RTOL * np.abs(b)):
        bad.append(f"{name}: worst abs error {err.max():.3e} (|torch| max {np.abs(b).max():.3e})")
    if name.startswith("grad:") and np.all(a == 0) and not np.all(b == 0):
        bad.append(f"{name}: all zero, PyTorch's is not")
for line in bad:
    print("MISMATCH", line)
if bad:
    sys.exit(1)
print(f"grads ok: {len(ref.files) - 1} tensors, worst abs error {worst:.3e}")
