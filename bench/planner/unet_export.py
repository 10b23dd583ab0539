#!/usr/bin/env python3
"""diffusers' UNet2DModel as a realistic workload (issue 32): export it with
torch.export for bench/planner/realistic.py, under PyTorch 2 (run it with
scripts/torch2-python; diffusers is in that environment's packages).

    scripts/torch2-python bench/planner/unet_export.py --out DIR [--batch 8] [--size 256]

Writes DIR/unet2d.pt2: the train-mode forward of UNet2DModel(sample_size=SIZE)
in its default configuration (the DDPM UNet: block_out_channels 224, 448, 672,
896; attention in the three lower-resolution down blocks and their up blocks)
with the DDPM objective as the loss: mse_loss(unet(x_t, t).sample, noise),
inputs x [B, 3, S, S] f32, t [B] i64, noise [B, 3, S, S] f32. torch.export
traces with fake tensors, so the batch costs nothing here; the archive holds
the weights (1.1 GB for the default configuration), which realistic.py deletes
after the import.

Also writes DIR/unet2d.export.json: the parameter count and the shapes.
"""

import argparse
import json
import os

import torch
import torch.nn.functional as F


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--size", type=int, default=256)
    a = ap.parse_args()
    from diffusers import UNet2DModel

    torch.manual_seed(0)
    unet = UNet2DModel(sample_size=a.size, in_channels=3, out_channels=3)

    class DenoisingLoss(torch.nn.Module):
        def __init__(self, unet):
            super().__init__()
            self.unet = unet

        def forward(self, x, t, noise):
            return F.mse_loss(self.unet(x, t).sample, noise)

    model = DenoisingLoss(unet).train()
    b, s = a.batch, a.size
    args = (torch.randn(b, 3, s, s), torch.randint(0, 1000, (b,)), torch.randn(b, 3, s, s))
    os.makedirs(a.out, exist_ok=True)
    torch.export.save(torch.export.export(model, args), os.path.join(a.out, "unet2d.pt2"))
    json.dump({"params": sum(p.numel() for p in unet.parameters()), "batch": b, "size": s,
               "inputs": {"x": [b, 3, s, s], "t": [b], "noise": [b, 3, s, s]}},
              open(os.path.join(a.out, "unet2d.export.json"), "w"), indent=1)


if __name__ == "__main__":
    main()
