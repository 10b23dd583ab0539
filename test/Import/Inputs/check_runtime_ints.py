"""Integer and boolean tensor arithmetic computed from the step's inputs, as
HuggingFace models write it (issue 28), exported with torch.export, imported
as values of the step (not evaluated at import: they depend on the inputs),
trained one step with offload.compile from keyword inputs on the host
backend, and judged against PyTorch's float64 step by the project's rule
(offload.testing: our fp32 error at most 4x PyTorch fp32's own, or 1e-5).

The model (class RuntimeInts) has what HF's embeddings and mask utilities
do with `input_ids` and a padding `attention_mask` [B, T] int64 of 0/1:
  - RoBERTa's create_position_ids_from_input_ids: (ids != pad).int(),
    cumsum, type_as, + 0, * mask, .long() + pad (ne.Scalar, i32 arithmetic,
    cumsum, casts);
  - token types gathered from a non-persistent buffer (alternating 0/1, so a
    wrong index shows) by those position ids (gather with an index computed
    in the step);
  - a boolean attention mask: mask.to(bool) read as mask[batch_idx, kv_idx]
    with constant index tensors (index.Tensor of a value of the step) & a
    causal tril, into scaled_dot_product_attention;
  - an additive float mask, the older HF way: (1 - m[:, None, None, ::-1]
    .to(float32)) * finfo.min (rsub of an int, a reversed index: a gather with
    non-identity offsets), added to the scores of a spelled-out attention;
  - where on ints (padding ids replaced by pad), comparisons of tensors
    (gt.Tensor), of a float number with an int tensor (compares in float32),
    bool & and ~, masked_fill of the labels to -100 where the mask is 0
    (cross entropy with ignore_index averages over the kept tokens);
  - T5's _shift_right of the labels (new_zeros, a copy into a slice of it, a
    fill of a select, masked_fill of -100: in-place writes through views of
    a value evaluated at import).

Usage: check_runtime_ints.py WORKDIR   (PYTHONPATH=BUILD/python)
       check_runtime_ints.py oob WORKDIR
Prints `ok runtime_ints` (WORKDIR keeps model.mlir) or the verdict that
failed and exits 1. `oob`: a gather whose index (ids + 100) is out of range
must fail the step with the kernel's message, as PyTorch fails; prints
`ok oob: <message>`.
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

V, D, T, B, PAD, MAXPOS = 13, 16, 8, 2, 1, 24


class RuntimeInts(nn.Module):
    def __init__(self):
        super().__init__()
        self.tok = nn.Embedding(V, D, padding_idx=PAD)
        self.pos = nn.Embedding(MAXPOS, D, padding_idx=PAD)
        self.typ = nn.Embedding(2, D)
        self.dec = nn.Embedding(V, D)
        self.qkv = nn.Linear(D, 3 * D)
        self.qkv2 = nn.Linear(D, 3 * D)
        self.flag = nn.Linear(1, D)
        self.head = nn.Linear(D, V)
        self.register_buffer("types", torch.arange(MAXPOS) % 2, persistent=False)

    def forward(self, input_ids, attention_mask, labels):
        # RoBERTa's position ids from the input ids.
        m32 = input_ids.ne(PAD).int()
        incremental = (torch.cumsum(m32, dim=1).type_as(m32) + 0) * m32
        position_ids = incremental.long() + PAD
        # Token types gathered from a buffer by them.
        types = torch.gather(self.types.expand(input_ids.shape[0], -1), 1, position_ids)
        h = self.tok(input_ids) + self.pos(position_ids) + self.typ(types)
        # HF's boolean padding mask: mask[batch_idx, kv_idx] & causal.
        pad = attention_mask.to(torch.bool)
        bidx = torch.arange(B)[:, None, None, None]
        kidx = torch.arange(T)[None, None, None, :]
        keep = pad[bidx, kidx] & torch.ones(T, T, dtype=torch.bool).tril()[None, None]
        q, k, v = self.qkv(h)[:, None].chunk(3, dim=-1)
        h = h + F.scaled_dot_product_attention(q, k, v, attn_mask=keep)[:, 0]
        # The older additive mask: (1 - m.float()) * finfo.min, read reversed.
        rev = attention_mask[:, None, None, torch.arange(T - 1, -1, -1)]
        add = (1 - rev).to(h.dtype) * torch.finfo(h.dtype).min
        q, k, v = self.qkv2(h)[:, None].chunk(3, dim=-1)
        s = q @ k.transpose(-1, -2) / 4.0 + add
        h = h + (s.softmax(-1) @ v)[:, 0]
        # where on ints, comparisons of tensors and with a float number.
        ids = torch.where(attention_mask.bool(), input_ids, torch.full_like(input_ids, PAD))
        later = (ids > position_ids) & ~(ids > 6.5)
        h = h + self.flag(later[..., None].to(h.dtype))
        # T5's _shift_right of the labels into decoder ids.
        shifted = labels.new_zeros(labels.shape)
        shifted[..., 1:] = labels[..., :-1].clone()
        shifted[..., 0] = 3
        shifted.masked_fill_(shifted == -100, PAD)
        h = h + self.dec(shifted)
        # Labels ignored where the mask is 0.
        target = labels.masked_fill(attention_mask == 0, -100)
        return F.cross_entropy(self.head(h).reshape(-1, V), target.reshape(-1))


def inputs():
    g = torch.Generator().manual_seed(3)
    ids = torch.randint(2, V, (B, T), generator=g)
    mask = torch.ones(B, T, dtype=torch.long)
    mask[1, -3:] = 0
    ids[1, -3:] = PAD
    labels = torch.randint(0, V, (B, T), generator=g)
    labels[0, 2] = -100
    return {"input_ids": ids, "attention_mask": mask, "labels": labels}


def torch_step(model, kw, dtype):
    m = copy.deepcopy(model).to(dtype)
    loss = m(**kw)
    loss.backward()
    return float(loss), {n: p.grad.detach().clone() for n, p in m.named_parameters()
                         if p.grad is not None}


class OutOfRange(nn.Module):
    def __init__(self):
        super().__init__()
        self.e = nn.Embedding(MAXPOS, D)
        self.register_buffer("types", torch.arange(MAXPOS) % 2, persistent=False)

    def forward(self, input_ids):
        idx = torch.gather(self.types.expand(input_ids.shape[0], -1), 1, input_ids + 100)
        return self.e(idx).sum()


def out_of_range(workdir):
    ids = inputs()["input_ids"]
    step = offload.compile(OutOfRange(), {"input_ids": ids}, verbose=False, workdir=workdir)
    try:
        step(input_ids=ids)
    except offload.OffloadError as e:
        print(f"ok oob: {e}")
        return
    print("oob: the step ran with an out-of-range gather index")
    sys.exit(1)


def main():
    if sys.argv[1] == "oob":
        out_of_range(sys.argv[2])
        return
    workdir = sys.argv[1]
    model, kw = RuntimeInts(), inputs()
    l64, g64 = torch_step(model, kw, torch.float64)
    l32, g32 = torch_step(model, kw, torch.float32)
    step = offload.compile(copy.deepcopy(model), kw, return_gradients=True, verbose=False,
                           workdir=workdir)
    loss = step(**kw)
    grads = step.gradients()
    vl = judge_errors(trajectory_errors([loss], [l64]), trajectory_errors([l32], [l64]), 1e-5)
    vg = judge_tensors(grads, g32, g64, floor=1e-5)
    print(f"runtime_ints: loss {loss:.6f} (float64 {l64:.6f}): {vl}; grads: {vg}")
    if not (vl.ok and vg.ok):
        sys.exit(1)
    print("ok runtime_ints")


if __name__ == "__main__":
    main()
