"""Small .pt2 archives for the .pt2 error tests (run with scripts/torch2-python).

OUT/mlp.pt2          Linear(8,16)-ReLU-Linear(16,4), x [2,8]: a good archive.
OUT/dynamic.pt2      the same exported with a dynamic batch dimension.
OUT/unsupported.pt2  a model using erf (twice), remainder and a linear.
OUT/tied.pt2         two Linear layers sharing one weight, and a BatchNorm1d.
"""
import os
import sys
import warnings

import torch
import torch.nn as nn

out = sys.argv[1]
os.makedirs(out, exist_ok=True)
torch.manual_seed(0)
warnings.simplefilter("ignore")


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(8, 16)
        self.fc2 = nn.Linear(16, 4)

    def forward(self, x):
        return self.fc2(torch.relu(self.fc1(x)))


class Unsupported(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 4)

    def forward(self, x):
        h = torch.erf(self.fc(x))
        h = torch.erf(h) + torch.remainder(h, 3.0)
        return h


class Tied(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(8, 8)
        self.b = nn.Linear(8, 8)
        self.b.weight = self.a.weight
        self.bn = nn.BatchNorm1d(8)

    def forward(self, x):
        return self.bn(self.b(torch.relu(self.a(x))))


x = torch.randn(2, 8)
m = MLP().train()
torch.export.save(torch.export.export(m, (x,)), os.path.join(out, "mlp.pt2"))
b = torch.export.Dim("batch", min=2, max=64)
torch.export.save(torch.export.export(m, (x,), dynamic_shapes=({0: b},)),
                  os.path.join(out, "dynamic.pt2"))
torch.export.save(torch.export.export(Unsupported().train(), (x,)),
                  os.path.join(out, "unsupported.pt2"))
torch.export.save(torch.export.export(Tied().train(), (x,)), os.path.join(out, "tied.pt2"))
print("ok")
