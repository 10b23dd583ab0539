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

Also writes DIR/unet2d.export.json: the parameter count, the shapes, and
the block boundaries for realistic.py's full-ac baseline ("blocks": the
source lines, as the importer's locations name them, file basename and
line, and the op there whose result is a block's output): each
ResnetBlock2D's output (the residual add's division by
output_scale_factor), each Attention's (the processor's output, the
division by rescale_output_factor, located at Attention.forward's call of
its processor) and each up block's concatenation of the skip connection:
what diffusers' gradient checkpointing keeps (it wraps every resnet and
attention in torch.utils.checkpoint).
"""

import argparse
import inspect
import json
import os

import torch
import torch.nn.functional as F


def source_line(func, text):
    """(file basename, line) of the line of `func`'s source containing `text`."""
    src, start = inspect.getsourcelines(func)
    hits = [start + i for i, line in enumerate(src) if text in line]
    if len(hits) != 1:
        raise SystemExit(f"unet_export.py: {len(hits)} lines with {text!r} in {func.__qualname__}")
    return os.path.basename(inspect.getsourcefile(func)), hits[0]


def block_boundaries():
    """The source lines and ops of the UNet's block outputs (module docstring)."""
    from diffusers.models import attention_processor, resnet
    from diffusers.models.unets import unet_2d_blocks
    res = []
    for func, text, op in [
            (resnet.ResnetBlock2D.forward, "output_tensor = (input_tensor + hidden_states)", "div"),
            (attention_processor.Attention.forward, "return self.processor(", "div"),
            (unet_2d_blocks.UpBlock2D.forward, "torch.cat([hidden_states, res_hidden_states]", "cat"),
            (unet_2d_blocks.AttnUpBlock2D.forward, "torch.cat([hidden_states, res_hidden_states]",
             "cat")]:
        f, line = source_line(func, text)
        res.append({"file": f, "line": line, "op": op})
    return res


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
               "inputs": {"x": [b, 3, s, s], "t": [b], "noise": [b, 3, s, s]},
               "blocks": block_boundaries()},
              open(os.path.join(a.out, "unet2d.export.json"), "w"), indent=1)


if __name__ == "__main__":
    main()
