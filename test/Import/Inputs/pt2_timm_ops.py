"""A small model with the ops torch.export writes for timm models (issue 28),
exported with torch.export (PyTorch 2.x):
  aten.alias             a full slice of a value later written in place
                         (GhostNet's `out[:, :self.out_chs] += ...`);
  aten.index.Tensor      an attention-bias table gathered by an index buffer
                         (LeViT, MaxViT, CoAtNet, EfficientViT:
                         `biases[:, idxs]`);
  aten.reshape_as;
  aten._assert_tensor_metadata, aten.to.dtype, to.device, to.dtype_layout
                         (what `.to(...)` becomes in the training IR);
  aten.addcmul           ResMLP's affine layers (`torch.addcmul(beta, alpha, x)`);
  aten.batch_norm        without running statistics (NF-RegNet's
                         weight-standardized convolution,
                         `F.batch_norm(w.reshape(1, C, -1), None, None, training=True)`);
  aten.stack, type_as    EVA-02's rotary embedding;
  higher_order.wrap_with_autocast
                         a `with torch.autocast(..., enabled=False)` block
                         (EfficientViT's LiteMLA), its subgraph inlined.

Usage: pt2_timm_ops.py OUT_DIR   (scripts/torch2-python)

Writes OUT_DIR/timm-ops.pt2, its step's inputs (inputs.npz: x [2, 8]
float32, y [2] int64) and PyTorch's own training step on the exported
parameters (reference.npz: `loss` and `grad:NAME`, for check_pt2_grads.py),
two damaged copies whose first _assert_tensor_metadata disagrees with the
value it checks: bad-assert-dtype.pt2 (asserts float64 of a float32 value)
and bad-assert-size.pt2 (asserts size [3, 3] of a [2, 4] value), and
autocast-on.pt2, whose wrap_with_autocast says enabled=True to float64
(autocast's dtype must be bfloat16 or float16).
"""
import json
import os
import sys
import warnings
import zipfile

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

warnings.simplefilter("ignore")


class TimmOps(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 4)
        self.biases = nn.Parameter(torch.randn(2, 5))
        # timm registers its index buffers non-persistent; offload.compile
        # exports them as persistent buffers, as here.
        self.register_buffer("idxs", torch.tensor([[0, 1, 4], [3, 3, 2]]))
        self.alpha = nn.Parameter(torch.rand(4) + 0.5)
        self.std_w = nn.Parameter(torch.randn(4, 2, 3))

    def forward(self, x):
        h = self.fc(x)                                          # [2, 4]
        h = h.to(torch.float64).to(torch.float32)               # to.dtype
        h = h.to(dtype=torch.float32, device=x.device)          # to.device
        h = h * torch.full((2, 4), 2.0).to(x.dtype).to(x.device)  # to.dtype_layout
        h = h.reshape_as(x[:, :4].t()).reshape(2, 4)            # reshape_as
        c = torch.cat([h, torch.tanh(h)], 1)[:, :8]             # alias
        c += x
        b = self.biases[:, self.idxs]                           # index.Tensor: [2, 2, 3]
        c = torch.addcmul(c[:, 4:], self.alpha, c[:, :4])      # addcmul: [2, 4]
        w = F.batch_norm(self.std_w.reshape(1, 4, -1), None, None, training=True,
                         momentum=0.0, eps=1e-5).reshape(4, 6)  # batch_norm, no statistics
        s = torch.stack([c, torch.sigmoid(c)], -1).reshape(2, 8).type_as(x)  # stack, type_as
        with torch.autocast(device_type="cpu", enabled=False):  # wrap_with_autocast
            s = torch.tanh(s.float()) * 2.0
        return (s @ w.t().reshape(8, 3))[:, :3].sum(1, keepdim=True) * c + \
            b.sum(2).reshape(4, 1).t().reshape(2, 2).sum(1, keepdim=True)


out = sys.argv[1]
torch.manual_seed(0)
model = TimmOps().train()
x = torch.randn(2, 8)
ep = torch.export.export(model, (x,))
path = os.path.join(out, "timm-ops.pt2")
torch.export.save(ep, path)
ops = {str(n.target) for n in ep.graph.nodes if n.op == "call_function"}
for op in ("aten.alias.default", "aten.index.Tensor", "aten.reshape_as.default",
           "aten._assert_tensor_metadata.default", "aten.to.dtype_layout",
           "aten.to.device", "aten.addcmul.default", "aten.batch_norm.default",
           "aten.stack.default", "aten.type_as.default",
           "wrap_with_autocast"):
    if op not in ops:
        raise SystemExit(f"the export has no {op} (PyTorch {torch.__version__}): {sorted(ops)}")

y = torch.tensor([0, 3])
loss = F.cross_entropy(model(x), y)
loss.backward()
np.savez(os.path.join(out, "inputs.npz"), x=x.numpy(), y=y.numpy())
ref = {"loss": np.array(loss.item(), dtype=np.float32)}
for name, p in model.named_parameters():
    ref["grad:" + name] = p.grad.numpy()
np.savez(os.path.join(out, "reference.npz"), **ref)

# The damaged copies: the first _assert_tensor_metadata node edited.
with zipfile.ZipFile(path) as z:
    members = {n: z.read(n) for n in z.namelist()}
model_json = next(n for n in members if n.endswith("models/model.json"))


def damaged(name, edit):
    doc = json.loads(members[model_json])
    node = next(n for n in doc["graph_module"]["graph"]["nodes"]
                if n["target"] == "torch.ops.aten._assert_tensor_metadata.default")
    edit({i["name"]: i for i in node["inputs"]}, node)
    with zipfile.ZipFile(os.path.join(out, name), "w", zipfile.ZIP_STORED) as z:
        for n, data in members.items():
            z.writestr(n, json.dumps(doc).encode() if n == model_json else data)


def wrong_dtype(inputs, node):
    inputs["dtype"]["arg"] = {"as_scalar_type": 8}  # float64 (the value is float32)


def wrong_size(inputs, node):
    node["inputs"].append({"name": "size", "arg": {"as_ints": [3, 3]},
                           "kind": 1})


def autocast_on(doc):
    node = next(n for n in doc["graph_module"]["graph"]["nodes"]
                if n["target"] == "torch.ops.higher_order.wrap_with_autocast")
    node["inputs"][2]["arg"] = {"as_bool": True}
    node["inputs"][1]["arg"] = {"as_scalar_type": 8}  # float64: not a low-precision type


with zipfile.ZipFile(os.path.join(out, "autocast-on.pt2"), "w", zipfile.ZIP_STORED) as z:
    for n, data in members.items():
        if n == model_json:
            doc = json.loads(data)
            autocast_on(doc)
            data = json.dumps(doc).encode()
        z.writestr(n, data)

damaged("bad-assert-dtype.pt2", wrong_dtype)
damaged("bad-assert-size.pt2", wrong_size)
print("ok")
