"""Model patterns of issue 28 trained one step with offload.compile and
compared with PyTorch's float64 step (the project's rule, offload.testing:
our error against float64 at most 4x PyTorch fp32's, or 1e-5 for the loss
and 1e-5 for the gradients when PyTorch fp32 is almost exact).

Usage: check_patterns.py MODEL EXPORTER   (PYTHONPATH=BUILD/python)

MODEL:
  unet_ce          a tiny conv U-Net-like net whose forward returns
                   F.cross_entropy(logits [N, C, H, W], target [N, H, W])
  unet_ce_ignore   the same with ignore_index=-100 on some pixels, label
                   smoothing 0.1
  unet_ce_sum      reduction='sum', ignore_index=-100 on some pixels
  unet_nll         F.nll_loss(log_softmax(logits, 1), target), ignored pixels
  seq_ce           F.cross_entropy(logits [N, C, T], target [N, T])
  vec_ce           F.cross_entropy(logits [C], target []) (rank 1)
  decoder_mask     a tiny decoder whose causal mask is ~mask (mask built in
                   the forward: ones(T, T, bool).tril())
  decoder_buffer   the same with the mask a registered bool buffer and the
                   padding mask a bool input: ~(causal & keep) | eye,
                   bitwise_not/and/or on step values
EXPORTER: torchscript or export (PyTorch 2.x).

Prints `ok MODEL: loss ..., grads ...` or the verdict that failed and exits 1.
"""
import copy
import sys
import warnings

import torch
import torch.nn as nn
import torch.nn.functional as F

import offload
from offload.testing import judge_errors, judge_tensors, trajectory_errors

warnings.simplefilter("ignore")
torch.manual_seed(0)


class TinyUNet(nn.Module):
    def __init__(self, classes=3, ignore_index=-100, label_smoothing=0.0, reduction="mean"):
        super().__init__()
        self.enc1 = nn.Conv2d(2, 4, 3, padding=1)
        self.enc2 = nn.Conv2d(4, 8, 3, padding=1)
        self.up = nn.ConvTranspose2d(8, 4, 2, stride=2)
        self.dec = nn.Conv2d(8, 4, 3, padding=1)
        self.head = nn.Conv2d(4, classes, 1)
        self.ignore_index, self.label_smoothing = ignore_index, label_smoothing
        self.reduction = reduction

    def forward(self, x, target):
        e1 = F.relu(self.enc1(x))
        e2 = F.relu(self.enc2(F.max_pool2d(e1, 2)))
        d = F.relu(self.dec(torch.cat([self.up(e2), e1], dim=1)))
        logits = self.head(d)
        if self.reduction == "nll":
            return F.nll_loss(F.log_softmax(logits, dim=1), target)
        return F.cross_entropy(logits, target, ignore_index=self.ignore_index,
                               label_smoothing=self.label_smoothing, reduction=self.reduction)


class SeqCE(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(6, 5)

    def forward(self, x, target):  # x [N, T, 6] -> logits [N, 5, T]
        return F.cross_entropy(self.fc(x).transpose(1, 2), target, ignore_index=-100)


class VecCE(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(6, 5)

    def forward(self, x, target):  # x [6] -> logits [5], target []
        return F.cross_entropy(self.fc(x.unsqueeze(0)).squeeze(0), target)


class TinyDecoder(nn.Module):
    def __init__(self, T, buffer_mask=False, vocab=7, d=8):
        super().__init__()
        self.emb = nn.Linear(vocab, d)
        self.qkv = nn.Linear(d, 3 * d)
        self.out = nn.Linear(d, vocab)
        self.d = d
        self.buffer_mask = buffer_mask
        if buffer_mask:
            self.register_buffer("mask", torch.ones(T, T, dtype=torch.bool).tril())
            self.register_buffer("diag", torch.eye(T, dtype=torch.bool))

    def attend(self, x, keep, target):
        T = x.shape[1]
        q, k, v = self.qkv(self.emb(x)).split(self.d, dim=-1)
        scores = q @ k.transpose(-2, -1) / self.d ** 0.5
        if self.buffer_mask:
            # [B, 1, T] padding mask from an input: masked = not (causal and
            # kept), the diagonal always attended.
            allowed = (self.mask & keep.unsqueeze(1)) | self.diag
            scores = scores.masked_fill(~allowed, float("-inf"))
        else:
            mask = torch.ones(T, T, dtype=torch.bool).tril()
            scores = scores.masked_fill(~mask, float("-inf"))
        h = F.softmax(scores, dim=-1) @ v
        logits = self.out(h)
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), target.reshape(-1))


class MaskDecoder(TinyDecoder):
    def forward(self, x, target):
        return self.attend(x, None, target)


class BufferDecoder(TinyDecoder):
    def forward(self, x, keep, target):
        return self.attend(x, keep, target)


def build(which):
    g = torch.Generator().manual_seed(1)
    if which.startswith("unet_"):
        N, C, H, W = 2, 3, 4, 4
        kw = {}
        if which == "unet_ce_ignore":
            kw = {"label_smoothing": 0.1}
        elif which == "unet_ce_sum":
            kw = {"reduction": "sum"}
        elif which == "unet_nll":
            kw = {"reduction": "nll"}
        model = TinyUNet(C, **kw)
        x = torch.randn(N, 2, H, W, generator=g)
        y = torch.randint(0, C, (N, H, W), generator=g)
        if which != "unet_ce":
            y[0, 0, :3] = -100
            y[1, 2:, 1] = -100
        return model, (x, y)
    if which == "seq_ce":
        y = torch.randint(0, 5, (2, 4), generator=g)
        y[1, 3] = -100
        return SeqCE(), (torch.randn(2, 4, 6, generator=g), y)
    if which == "vec_ce":
        return VecCE(), (torch.randn(6, generator=g), torch.tensor(3))
    if which.startswith("decoder"):
        B, T, V = 2, 5, 7
        x = torch.randn(B, T, V, generator=g)
        y = torch.randint(0, V, (B, T), generator=g)
        if which == "decoder_mask":
            return MaskDecoder(T, vocab=V), (x, y)
        keep = torch.ones(B, T, dtype=torch.bool)
        keep[1, 3:] = False
        return BufferDecoder(T, buffer_mask=True, vocab=V), (x, keep, y)
    raise SystemExit("unknown model " + which)


def torch_step(model, inputs, dtype):
    m = copy.deepcopy(model).to(dtype)
    args = [a.to(dtype) if a.is_floating_point() else a for a in inputs]
    loss = m(*args)
    loss.backward()
    return float(loss), {n: p.grad.detach().clone() for n, p in m.named_parameters()}


def main():
    which, exporter = sys.argv[1], sys.argv[2]
    model, inputs = build(which)
    l64, g64 = torch_step(model, inputs, torch.float64)
    l32, g32 = torch_step(model, inputs, torch.float32)
    step = offload.compile(copy.deepcopy(model), inputs, loss=None, return_gradients=True,
                           exporter=exporter, verbose=False)
    loss = step(*inputs)
    grads = step.gradients()
    vl = judge_errors(trajectory_errors([loss], [l64]), trajectory_errors([l32], [l64]), 1e-5)
    vg = judge_tensors(grads, g32, g64, floor=1e-5)
    print(f"{which} ({exporter}): loss {loss:.6f} (float64 {l64:.6f}): {vl}; grads: {vg}")
    if not (vl.ok and vg.ok):
        sys.exit(1)
    print(f"ok {which}")


if __name__ == "__main__":
    main()
