"""1-D convolution as torch.export writes it (aten.conv1d.default; Whisper's
encoder front end, issue 28): Whisper's two convolutions (kernel 3,
padding 1, the second with stride 2, both with a bias), and one with
dilation 2, two groups and no bias; a cross-entropy loss on the mean over
time. Exported with torch.export (PyTorch 2.x).

Usage: pt2_conv1d.py OUT_DIR   (scripts/torch2-python)

Writes OUT_DIR/conv1d.pt2 (inputs x [2, 6, 16] float32, y [2] int64; the
output is the loss), inputs.npz and PyTorch's own step on the exported
parameters (reference.npz: `loss` and `grad:NAME`, for check_pt2_grads.py).
"""
import os
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


class Conv1dNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv1d(6, 8, kernel_size=3, padding=1)
        self.conv2 = nn.Conv1d(8, 8, kernel_size=3, stride=2, padding=1)
        self.conv3 = nn.Conv1d(8, 4, kernel_size=3, dilation=2, groups=2, bias=False)
        self.head = nn.Linear(4, 3)

    def forward(self, x, y):
        h = F.gelu(self.conv1(x))
        h = F.gelu(self.conv2(h))            # [2, 8, 8]
        h = self.conv3(h)                    # [2, 4, 4]
        return F.cross_entropy(self.head(h.mean(dim=2)), y)


out = sys.argv[1]
torch.manual_seed(0)
model = Conv1dNet().train()
x, y = torch.randn(2, 6, 16), torch.tensor([0, 2])
ep = torch.export.export(model, (x, y))
torch.export.save(ep, os.path.join(out, "conv1d.pt2"))
ops = {str(n.target) for n in ep.graph.nodes if n.op == "call_function"}
if "aten.conv1d.default" not in ops:
    raise SystemExit(f"the export has no aten.conv1d.default (PyTorch {torch.__version__}): "
                     f"{sorted(ops)}")
np.savez(os.path.join(out, "inputs.npz"), x=x.numpy(), y=y.numpy())
loss = model(x, y)
loss.backward()
ref = {"loss": np.array(loss.item(), dtype=np.float32)}
for name, p in model.named_parameters():
    ref["grad:" + name] = p.grad.numpy()
np.savez(os.path.join(out, "reference.npz"), **ref)
print("ok")
