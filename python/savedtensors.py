"""Shared machinery of saved_tensor_bytes.py and bw_split_bytes.py.

A `Recorder` installs torch.autograd.graph.saved_tensors_hooks and module
forward hooks. Every tensor autograd saves during the forward passes through
the pack hook, which records:
  - the innermost module whose forward is running (module forward pre-hooks
    push the module's qualified name, forward hooks pop it; ops outside any
    module, such as the loss computed outside the model, go to "(loss)"),
  - its storage key: (device, storage data_ptr), and the storage's size in
    bytes (storage().nbytes(): the whole storage, not only the view's
    elements, because that is what staying alive costs),
  - its kind: "param" (storage of a parameter, e.g. the W^T view linear saves),
    "buffer", "input" (storage of a model input or target) or "activation"
    (everything else, including the loss's own saved values).
Counting rule: each distinct storage is counted once, attributed to the first
module that saved it (a ReLU output saved by the ReLU and again by the next
Linear counts once, under the ReLU). Zero-byte storages are ignored.

The pack hook returns (index, tensor), so the unpack hook knows which record a
backward node reads; `phase` names the phase that unpacks are recorded under.
"""

import collections
import weakref

import torch

OUTSIDE = "(loss)"
KINDS = ("activation", "param", "buffer", "input")


def storage_key(t):
    s = t.storage()
    return (str(t.device), s.data_ptr()), s.nbytes()


class Recorder:
    def __init__(self, model, inputs, root_name="(model)", module_hooks=True):
        self.model = model
        self.stack = []
        self.records = []            # one per pack call
        self.first = {}              # storage key -> index of first record
        self.unpacked = collections.defaultdict(set)  # phase -> storage keys
        self.phase = None
        self.kind_of = {}
        for _, p in model.named_parameters():
            self.kind_of[storage_key(p)[0]] = "param"
        for _, b in model.named_buffers():
            self.kind_of.setdefault(storage_key(b)[0], "buffer")
        for t in inputs:
            self.kind_of.setdefault(storage_key(t)[0], "input")
        self.root_name = root_name
        self.handles = []
        for name, m in (model.named_modules() if module_hooks else []):
            qual = name if name else root_name
            self.handles.append(m.register_forward_pre_hook(self._pre(qual)))
            self.handles.append(m.register_forward_hook(self._post(qual)))

    # -- module hooks --------------------------------------------------------
    def _pre(self, qual):
        def hook(module, args):
            self.stack.append(qual)
        return hook

    def _post(self, qual):
        def hook(module, args, out):
            # Pop our own entry (the stack is LIFO for well-nested forwards).
            if self.stack and self.stack[-1] == qual:
                self.stack.pop()
        return hook

    def remove(self):
        for h in self.handles:
            h.remove()
        self.handles = []

    # -- saved-tensor hooks ----------------------------------------------------
    def pack(self, t):
        key, nbytes = storage_key(t)
        idx = len(self.records)
        self.records.append({
            "module": self.stack[-1] if self.stack else OUTSIDE,
            "key": key, "nbytes": nbytes,
            "kind": self.kind_of.get(key, "activation"),
            "shape": tuple(t.shape), "dtype": str(t.dtype).replace("torch.", ""),
            "ref": weakref.ref(t),
        })
        if nbytes > 0:
            self.first.setdefault(key, idx)
        return (idx, t)

    def unpack(self, packed):
        idx, t = packed
        if self.phase is not None:
            self.unpacked[self.phase].add(self.records[idx]["key"])
        return t

    def hooks(self):
        return torch.autograd.graph.saved_tensors_hooks(self.pack, self.unpack)

    # -- accounting ------------------------------------------------------------
    def distinct(self, keys=None):
        """[(record of the first save, nbytes)] per distinct storage in keys."""
        out = []
        for key, idx in self.first.items():
            if keys is None or key in keys:
                out.append(self.records[idx])
        return out

    def alive_keys(self):
        """Storage keys with at least one saved tensor still alive."""
        return {r["key"] for r in self.records if r["nbytes"] > 0 and r["ref"]() is not None}

    def module_order(self):
        order = []
        seen = set()
        for r in self.records:
            if r["module"] not in seen:
                seen.add(r["module"])
                order.append(r["module"])
        return order


def summarize(records):
    """{'total': bytes, 'by_kind': {kind: bytes}, 'by_module': {m: {kind: bytes}},
    'count': distinct storages} over records (one per distinct storage)."""
    by_kind = {k: 0 for k in KINDS}
    by_module = collections.OrderedDict()
    for r in records:
        by_kind[r["kind"]] += r["nbytes"]
        m = by_module.setdefault(r["module"], {k: 0 for k in KINDS})
        m[r["kind"]] += r["nbytes"]
    return {"total": sum(by_kind.values()), "by_kind": by_kind,
            "by_module": by_module, "count": len(records)}


def fmt_bytes(n):
    return "{:,}".format(int(n))
