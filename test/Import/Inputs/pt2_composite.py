"""tiny_models.py's `composite` model exported with torch.export (PyTorch 2.x).

Usage: pt2_composite.py OUT.pt2   (run with scripts/torch2-python)
"""
import importlib.util
import os
import sys
import warnings

import torch

warnings.simplefilter("ignore")
spec = importlib.util.spec_from_file_location(
    "tiny_models", os.path.join(os.path.dirname(os.path.abspath(__file__)), "tiny_models.py"))
tiny = importlib.util.module_from_spec(spec)
spec.loader.exec_module(tiny)
torch.manual_seed(0)
ep = torch.export.export(tiny.Composite().train(), (torch.randn(2, 3, 4, 4),))
torch.export.save(ep, sys.argv[1])
print("ok")
