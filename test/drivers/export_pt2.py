#!/usr/bin/env python3
"""Export the example models as torch.export archives (.pt2), for PyTorch 2.x.

Run with scripts/torch2-python (PyTorch 2.15 from PyPI). For every model NAME
this writes, under --out DIR:

  NAME.pt2   torch.export.save(torch.export.export(model.train(), args)): the
             functional ATen graph of the train-mode forward, with every shape,
             and the parameters and buffers as raw bytes.

The models are export_models.py's (mlp, transformer, gpt, roundtrip) and, for
resnet18, the same network as torchvision's resnet18(num_classes=10) written in
plain torch below (this environment has no torchvision), with torchvision's
parameter and buffer names.

--params PREFIX loads PREFIX.params.npz and PREFIX.inputs.npz (what
export_models.py writes with Debian's torch 1.13) into the model before
exporting, so the .pt and the .pt2 hold bit-identical weights and were traced
with the same example inputs; without it the model is built from seed 0 and
the inputs from export_models.make_inputs.

--dynamic-batch marks dim 0 of every input dynamic (a symbolic dimension; the
importer refuses such archives: the tests use it for that).

Usage: PYTHONPATH=python scripts/torch2-python test/drivers/export_pt2.py
           --out DIR --models resnet18,transformer,gpt [--params-dir DIR]
           [--batch B] [--dropout P] [--dynamic-batch]
"""

import argparse
import os
import sys
import warnings

import numpy as np
import torch
import torch.nn as nn

import export_models as em  # model definitions and inputs (python/, on PYTHONPATH)


class BasicBlock(nn.Module):
    """torchvision.models.resnet.BasicBlock (expansion 1)."""

    def __init__(self, inplanes, planes, stride=1):
        super().__init__()
        self.conv1 = nn.Conv2d(inplanes, planes, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.relu = nn.ReLU(inplace=True)
        self.conv2 = nn.Conv2d(planes, planes, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.downsample = None
        if stride != 1 or inplanes != planes:
            self.downsample = nn.Sequential(
                nn.Conv2d(inplanes, planes, 1, stride, bias=False), nn.BatchNorm2d(planes))

    def forward(self, x):
        identity = x
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        if self.downsample is not None:
            identity = self.downsample(x)
        out += identity
        return self.relu(out)


class ResNet18(nn.Module):
    """torchvision.models.resnet18(num_classes) with the same names and forward."""

    def __init__(self, num_classes=10):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 64, 7, 2, 3, bias=False)
        self.bn1 = nn.BatchNorm2d(64)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(3, 2, 1)
        chans = [64, 128, 256, 512]
        inplanes = 64
        for i, c in enumerate(chans):
            stride = 1 if i == 0 else 2
            setattr(self, "layer%d" % (i + 1),
                    nn.Sequential(BasicBlock(inplanes, c, stride), BasicBlock(c, c)))
            inplanes = c
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(512, num_classes)

    def forward(self, x):
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        x = torch.flatten(self.avgpool(x), 1)
        return self.fc(x)


def build(name, dropout):
    if name == "resnet18":
        torch.manual_seed(em.SEED)
        return ResNet18(10)
    return em.build_model(name, dropout)


def export_one(name, out_dir, params_dir, batch, dropout, dynamic):
    model = build(name, dropout).train()
    if params_dir:
        prefix = os.path.join(params_dir, name)
        em.load_state_arrays(model, em.load_params(prefix))
        x, y = em.load_inputs(prefix)
    else:
        x, y = em.make_inputs(name, batch)
    args = em.forward_args(name, x, y)
    shapes = None
    if dynamic:
        b = torch.export.Dim("batch", min=2, max=1024)
        shapes = tuple({0: b} for _ in args)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ep = torch.export.export(model, args, dynamic_shapes=shapes)
    path = os.path.join(out_dir, name + ".pt2")
    torch.export.save(ep, path)
    print("wrote %s: %d graph nodes" % (path, len(ep.graph.nodes)))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--models", default="resnet18,transformer,gpt")
    ap.add_argument("--params-dir", default="",
                    help="directory with export_models.py's NAME.params.npz and NAME.inputs.npz")
    ap.add_argument("--batch", type=int, default=None)
    ap.add_argument("--dropout", type=float, default=0.0)
    ap.add_argument("--dynamic-batch", action="store_true")
    a = ap.parse_args(argv)
    os.makedirs(a.out, exist_ok=True)
    torch.set_num_threads(1)
    for n in [m.strip() for m in a.models.split(",") if m.strip()]:
        export_one(n, a.out, a.params_dir, a.batch, a.dropout, a.dynamic_batch)
    return 0


if __name__ == "__main__":
    sys.exit(main())
