#!/usr/bin/python3
"""Tiny TorchScript models for the importer's lit tests.

Usage: tiny_models.py NAME OUT.pt
  unsupported  traced; torch.cumsum on two lines and torch.erf on a third
               (ops offload-import does not support)
  conv         traced Conv2d(3,4,3)+BatchNorm2d+ReLU+mean+Linear; x [2,3,8,8]
  scripted_mlp torch.jit.script of Linear(16,8)-ReLU-Dropout(0.25)-Linear(8,3)
"""
import sys

import torch
import torch.nn as nn


class Unsupported(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 4)

    def forward(self, x):
        a = torch.cumsum(x, 1)
        b = torch.cumsum(a, 0)
        c = torch.erf(b)
        return self.fc(c)


class Conv(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1, bias=False)
        self.bn = nn.BatchNorm2d(4)
        self.fc = nn.Linear(4, 5)

    def forward(self, x):
        h = torch.relu(self.bn(self.conv(x)))
        return self.fc(h.mean(dim=(2, 3)))


def main():
    name, out = sys.argv[1], sys.argv[2]
    torch.manual_seed(0)
    if name == "unsupported":
        m = torch.jit.trace(Unsupported().train(), torch.randn(2, 8))
    elif name == "conv":
        model = Conv().train()
        state = {k: v.clone() for k, v in model.state_dict().items()}
        m = torch.jit.trace(model, torch.randn(2, 3, 8, 8))
        model.load_state_dict(state)  # undo the trace's running-stat update
    elif name == "scripted_mlp":
        m = torch.jit.script(nn.Sequential(nn.Linear(16, 8), nn.ReLU(),
                                           nn.Dropout(0.25), nn.Linear(8, 3)).train())
    else:
        raise SystemExit("unknown model " + name)
    m.save(out)


if __name__ == "__main__":
    main()
