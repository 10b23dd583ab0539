#!/usr/bin/python3
"""Tiny TorchScript models for the importer's lit tests.

Usage: tiny_models.py NAME OUT.pt
  unsupported  traced; torch.logcumsumexp on two lines and torch.erf on a third
               (ops offload-import does not support)
  mixed        traced; an op without a conversion (torch.erf) and two uses
               a conversion refuses (avg_pool2d with divisor_override)
  conv         traced Conv2d(3,4,3)+BatchNorm2d+ReLU+mean+Linear; x [2,3,8,8]
  scripted_mlp torch.jit.script of Linear(16,8)-ReLU-Dropout(0.25)-Linear(8,3)
  mobilenet_v2, mobilenet_v3_small, squeezenet1_1, densenet121, vgg11
               torchvision classifiers (num_classes=10) traced on [2,3,32,32]
  composite    traced; ConvTranspose2d, bilinear Upsample, GRU, einsum,
               F.normalize and an in-place zero_ on a slice of a cloned bias
               (the conversions of ConvertComposite/ConvertRecurrent);
               x [2,3,4,4]
  refused      traced; an einsum with an ellipsis (twice) and a 1-norm, which
               those conversions refuse; x [2,3,4,4]
  decoder      nn.TransformerDecoder (2 layers, d_model 32, 4 heads, dropout
               0.1, batch_first) with a causal tgt_mask, forward(x [2,8,32],
               mem [2,5,32]) returns the sum of its output (a scalar loss)
"""
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F


class Unsupported(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 4)

    def forward(self, x):
        # unsupported.test checks the error against this comment's line:
        # UNSUP: unsupported ops: aten::erf (1x at {{.*}}tiny_models.py:[[@LINE+3]]); aten::logcumsumexp (2x at {{.*}}tiny_models.py:[[@LINE+1]], {{.*}}tiny_models.py:[[@LINE+2]]){{$}}
        a = torch.logcumsumexp(x, 1)
        b = torch.logcumsumexp(a, 0)
        c = torch.erf(b)
        return self.fc(c)


class Mixed(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(3, 4)

    def forward(self, x):
        # unsupported.test checks the error against this comment's line:
        # MIXED: unsupported ops: aten::avg_pool2d: avg_pool2d with divisor_override is not supported (2x at {{.*}}tiny_models.py:[[@LINE+1]], {{.*}}tiny_models.py:[[@LINE+2]]); aten::erf (1x at {{.*}}tiny_models.py:[[@LINE+3]]){{$}}
        a = torch.nn.functional.avg_pool2d(x, 2, divisor_override=3)
        b = torch.nn.functional.avg_pool2d(x, 2, divisor_override=5)
        c = torch.erf(x)
        return self.fc((a + b).mean(dim=(2, 3)) + c.mean(dim=(2, 3)))


class Conv(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1, bias=False)
        self.bn = nn.BatchNorm2d(4)
        self.fc = nn.Linear(4, 5)

    def forward(self, x):
        h = torch.relu(self.bn(self.conv(x)))
        return self.fc(h.mean(dim=(2, 3)))


class Composite(nn.Module):
    def __init__(self):
        super().__init__()
        self.up = nn.ConvTranspose2d(3, 4, 3, stride=2, padding=1, output_padding=1)
        self.gru = nn.GRU(8, 6, batch_first=True)
        self.fc = nn.Linear(6, 5)

    def forward(self, x):
        h = self.up(x)                                           # [2, 4, 8, 8]
        h = F.interpolate(h, scale_factor=2, mode="bilinear")    # [2, 4, 16, 16]
        s = h.mean(dim=3).reshape(2, 8, 8)                       # [2, 8 steps, 8]
        o = self.gru(s)[0]                                       # [2, 8, 6]
        a = torch.einsum("bid,bjd->bij", F.normalize(o, dim=-1), o)
        b = self.fc.bias.clone()
        b[1:3].zero_()
        return F.linear(torch.einsum("bij,bjd->bd", a, o), self.fc.weight, b)


class NormAtZero(nn.Module):
    """Norms of exact zero vectors: h's row b is zero where x[b, 0] == 0, and
    torch.norm, linalg.vector_norm and F.normalize all see it. PyTorch's
    gradient there is finite (norm's is 0); the step's must be too, or the
    fc gradients turn NaN (NaN * 0 stays NaN)."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 6)
        self.out = nn.Linear(6, 5)

    def forward(self, x):
        h = self.fc(x) * x[:, :1]
        n = torch.linalg.vector_norm(h, dim=-1, keepdim=True)
        return self.out(F.normalize(h, dim=-1) + n + h.norm(dim=-1, keepdim=True))


class Refused(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 5)

    def forward(self, x):
        # unsupported.test checks the error against this comment's line:
        # REFUSED: unsupported ops: aten::einsum: einsum with an ellipsis is not supported (2x at {{.*}}functional.py:{{[0-9]+}}); aten::linalg_vector_norm: vector norm with ord other than 2 is not supported (1x at {{.*}}tiny_models.py:[[@LINE+3]]){{$}}
        a = torch.einsum("...ij,...jk->...ik", x, x)
        b = torch.einsum("...ij,...kj->...ik", x, x)
        n = torch.linalg.vector_norm(x, 1, dim=-1, keepdim=True)
        return self.fc((a + b + n).mean(dim=(1, 2)))


class Decoder(nn.Module):
    def __init__(self):
        super().__init__()
        layer = nn.TransformerDecoderLayer(32, 4, 64, 0.1, batch_first=True)
        self.dec = nn.TransformerDecoder(layer, 2)

    def forward(self, x, mem):
        mask = nn.Transformer.generate_square_subsequent_mask(x.shape[1])
        return self.dec(x, mem, tgt_mask=mask).sum()


def main():
    name, out = sys.argv[1], sys.argv[2]
    torch.manual_seed(0)
    if name == "unsupported":
        m = torch.jit.trace(Unsupported().train(), torch.randn(2, 8))
    elif name == "mixed":
        m = torch.jit.trace(Mixed().train(), torch.randn(2, 3, 8, 8))
    elif name == "conv":
        model = Conv().train()
        state = {k: v.clone() for k, v in model.state_dict().items()}
        m = torch.jit.trace(model, torch.randn(2, 3, 8, 8))
        model.load_state_dict(state)  # undo the trace's running-stat update
    elif name == "scripted_mlp":
        m = torch.jit.script(nn.Sequential(nn.Linear(16, 8), nn.ReLU(),
                                           nn.Dropout(0.25), nn.Linear(8, 3)).train())
    elif name in ("mobilenet_v2", "mobilenet_v3_small", "squeezenet1_1",
                  "densenet121", "vgg11"):
        import torchvision
        import warnings
        warnings.simplefilter("ignore")
        model = getattr(torchvision.models, name)(num_classes=10).train()
        m = torch.jit.trace(model, torch.randn(2, 3, 32, 32), check_trace=False)
    elif name == "composite":
        m = torch.jit.trace(Composite().train(), torch.randn(2, 3, 4, 4))
    elif name == "refused":
        m = torch.jit.trace(Refused().train(), torch.randn(2, 3, 4, 4))
    elif name == "decoder":
        import warnings
        warnings.simplefilter("ignore")
        m = torch.jit.trace(Decoder().train(),
                            (torch.randn(2, 8, 32), torch.randn(2, 5, 32)),
                            check_trace=False)
    else:
        raise SystemExit("unknown model " + name)
    m.save(out)


if __name__ == "__main__":
    main()
