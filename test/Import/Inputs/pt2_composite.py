"""tiny_models.py's `composite` model exported with torch.export (PyTorch 2.x).

Usage: pt2_composite.py OUT.pt2 [REFERENCE_DIR [MODEL]]   (scripts/torch2-python)

MODEL is `composite` (the default; x [2, 3, 4, 4]) or `norm_at_zero`
(tiny_models.NormAtZero; x [2, 4] with x[0] all zero, so every norm in the
model sees a zero vector in row 0).

With REFERENCE_DIR, also writes there the step's inputs (inputs.npz: x
float32, y [2] int64 class indices) and PyTorch's own training
step on the exported parameters (reference.npz: `loss`, the mean
cross-entropy of the model's [2, C] output against y, and `grad:NAME` for
every parameter by its PyTorch name), for check_pt2_grads.py.
"""
import importlib.util
import os
import sys
import warnings

import numpy as np
import torch
import torch.nn.functional as F

warnings.simplefilter("ignore")
spec = importlib.util.spec_from_file_location(
    "tiny_models", os.path.join(os.path.dirname(os.path.abspath(__file__)), "tiny_models.py"))
tiny = importlib.util.module_from_spec(spec)
spec.loader.exec_module(tiny)
torch.manual_seed(0)
which = sys.argv[3] if len(sys.argv) > 3 else "composite"
if which == "composite":
    model = tiny.Composite().train()
    x = torch.randn(2, 3, 4, 4)
elif which == "norm_at_zero":
    model = tiny.NormAtZero().train()
    x = torch.randn(2, 4)
    x[0] = 0.0
else:
    raise SystemExit("unknown model " + which)
ep = torch.export.export(model, (x,))
torch.export.save(ep, sys.argv[1])
if len(sys.argv) > 2:
    out = model(x)
    y = torch.arange(2, dtype=torch.int64) % out.shape[1]
    loss = F.cross_entropy(out, y)
    loss.backward()
    np.savez(os.path.join(sys.argv[2], "inputs.npz"), x=x.numpy(), y=y.numpy())
    ref = {"loss": np.array(loss.item(), dtype=np.float32)}
    for name, p in model.named_parameters():
        ref["grad:" + name] = p.grad.numpy()
    np.savez(os.path.join(sys.argv[2], "reference.npz"), **ref)
print("ok")
