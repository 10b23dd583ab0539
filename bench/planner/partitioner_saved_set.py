#!/usr/bin/env -S scripts/torch2-python
"""The saved set of PyTorch's min-cut partitioner on realistic.py's workloads.

    PYTHONPATH=python scripts/torch2-python bench/planner/partitioner_saved_set.py
        --workloads gpt2-124m,llama2-7b,resnet50,vit-b16 [--fractions 1.0,0.8,0.6,0.4,0.2,0.0]
        --out FILE.json

Runs under the PyTorch 2.x virtual environment (scripts/setup-torch2.sh);
bench/planner/realistic.py runs it as a subprocess for its `pt-partitioner`
column and maps what it writes onto our step's saved values.

Each workload is built at realistic.py's full shape under
torch._subclasses.FakeTensorMode (parameters, inputs and every intermediate
are fake tensors: shapes and dtypes only, nothing of their size is
allocated), wrapped as forward(x, y) -> (loss,), and traced by AOTAutograd
(torch._functorch.aot_autograd.aot_module_simplified) with
partition_fn=min_cut_rematerialization_partition at each fraction of
torch._functorch.config.activation_memory_budget (the runtime estimator and
the knapsack solver at their defaults). No graph runs: the partition happens
while AOTAutograd traces. Dynamo is not used (it cannot take fake inputs);
the graph it would hand AOTAutograd is the same single graph, since these
models have no graph breaks.

Models:
  gpt2-124m  llm_shapes.GPT2 (the example GPT's blocks, python/export_models.py),
             tied embedding, batch 16, T 1024, fp32. The block's attention core
             (matmul, causal mask, softmax, matmul) is replaced by
             F.scaled_dot_product_attention(is_causal=True), which is what our
             importer's --offload-fuse-attention makes of it in our step (the
             fused op that saves q, k, v, the output and the log-sum-exp, never
             the probabilities); on fake CPU tensors PyTorch dispatches it to its
             fused flash kernel (_scaled_dot_product_flash_attention_for_cpu),
             which saves the same.
  llama2-7b, llama3-8b
             llm_shapes.Llama (RMSNorm, rotary positions, SwiGLU FFN; llama3-8b
             with grouped-query attention, 8 key/value heads), batch 1, T 4096
             and 8192, fp32. The attention core (matmul, causal mask, softmax,
             matmul; llama3-8b's key/value heads repeated before it, as HF's
             repeat_kv) is replaced by F.scaled_dot_product_attention(
             is_causal=True, enable_gqa=True where the heads differ) on the
             un-repeated key/value heads: our importer fuses the original into
             the same op and folds the repeat into grouped-query attention, so
             both sides save q, the un-repeated k and v, the output and the
             log-sum-exp. RMSNorm, the rotary embedding and SiLU stay as
             written (decomposed ops: mul, mean, add, rsqrt, cat, neg, ...).
             ~14 s per trace here, under 1 GB of memory.
  resnet50   torchvision's resnet50(), batch 256, 224x224, cross-entropy.
  vit-b16    torchvision's vit_b_16(), batch 128, 224x224, cross-entropy
             (its nn.MultiheadAttention takes the scaled-dot-product path,
             need_weights=False).

Written per workload and fraction: the forward graph's saved tensors (the
backward graph's placeholders that are not tangents), in the forward-graph
order of the ops that made them (views and detaches looked through),
each with its FX node name, aten op, `kind` (the op that made it, looked
through views and tuple indexing: "native_layer_norm.0", "convolution", ...),
shape, dtype and bytes, and on the Llamas its `segment`, the number of
rsqrt ops (RMSNorms) at or before the op that made it in the forward graph,
which realistic.py's map matches against the same count on our side;
tensors that are parameters, inputs or views of them
(saved by reference, not activations) are counted apart ("by_ref"), and
saved symbolic integers are skipped.
"""
import argparse
import json
import os
import sys
import time

# Imports its neighbours from its own folder and the model definitions of
# python/ from PYTHONPATH (realistic.py sets it when it runs this script).

import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

_VIEW_OPS = {"t", "view", "_unsafe_view", "permute", "transpose", "expand", "alias", "slice",
             "select", "unsqueeze", "squeeze", "reshape", "as_strided", "detach"}


def _op_name(node):
    if node.op != "call_function":
        return node.op
    packet = getattr(node.target, "overloadpacket", None)
    if packet is not None:
        return packet.__name__
    return getattr(node.target, "__name__", str(node.target))


def _kind(node):
    """(kind, by_ref, base): the op that made NODE, through views and
    getitem; by_ref when that is a placeholder (a parameter or an input);
    base: that op's node."""
    index = None
    while node.op == "call_function":
        name = _op_name(node)
        if name == "getitem":
            index = node.args[1]
            node = node.args[0]
            continue
        if name in _VIEW_OPS and node.args:
            node = node.args[0]
            continue
        return (name if index is None else f"{name}.{index}"), False, node
    return node.op, node.op == "placeholder", node


def _sdpa_forward(self, x):
    """CausalSelfAttention.forward with the attention core fused (what our
    importer fuses the matmul-mask-softmax-matmul of the original into)."""
    b, t, c = x.shape
    h, d = self.n_head, self.head_dim
    q = self.q(x).view(b, t, h, d).transpose(1, 2)
    k = self.k(x).view(b, t, h, d).transpose(1, 2)
    v = self.v(x).view(b, t, h, d).transpose(1, 2)
    y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    y = y.transpose(1, 2).contiguous().view(b, t, c)
    return self.resid_drop(self.proj(y))


def _llama_sdpa_forward(self, x, cos, sin, mask):
    """llm_shapes.LlamaAttention.forward with the attention core fused: the
    rotary embedding as there, then F.scaled_dot_product_attention
    (is_causal=True) on the un-repeated key/value heads (enable_gqa where
    there are fewer key/value heads than query heads), which is what our
    importer makes of it (--offload-fuse-attention, then the HF-style
    repeat_kv folded into grouped-query attention: the fused op saves q, the
    un-repeated k and v, the output and the log-sum-exp). `mask` (the causal
    mask of the original) is not read."""
    import llm_shapes
    b, t, c = x.shape
    h, hk, d = self.n_head, self.n_kv_head, self.head_dim
    q = self.q_proj(x).view(b, t, h, d).transpose(1, 2)
    k = self.k_proj(x).view(b, t, hk, d).transpose(1, 2)
    v = self.v_proj(x).view(b, t, hk, d).transpose(1, 2)
    q = q * cos + llm_shapes.rotate_half(q) * sin
    k = k * cos + llm_shapes.rotate_half(k) * sin
    y = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=hk != h)
    y = y.transpose(1, 2).contiguous().view(b, t, c)
    return self.o_proj(y)


def build(name):
    """(module returning (loss,), x, y), built under the caller's fake mode."""
    if name.startswith(("gpt2", "llama")):
        import export_models
        import llm_shapes
        export_models.CausalSelfAttention.forward = _sdpa_forward
        llm_shapes.LlamaAttention.forward = _llama_sdpa_forward
        ctor, batch, seq, vocab, _ = llm_shapes.MODELS[name]
        model = ctor()
        x = torch.zeros(batch, seq, dtype=torch.long)
        y = torch.zeros(batch, seq, dtype=torch.long)

        def loss(m, x, y):
            return m(x, y)
    else:
        import torchvision
        ctor, batch, size = {"resnet50": ("resnet50", 256, 224),
                             "vit-b16": ("vit_b_16", 128, 224)}[name]
        # Under fake tensors, nn.init.trunc_normal_ (ViT's initialisation)
        # asks a tensor's value; the values do not matter here.
        saved_init = nn.init.trunc_normal_
        nn.init.trunc_normal_ = lambda t, *a, **k: t
        try:
            model = getattr(torchvision.models, ctor)()
        finally:
            nn.init.trunc_normal_ = saved_init
        x = torch.zeros(batch, 3, size, size)
        y = torch.zeros(batch, dtype=torch.long)

        def loss(m, x, y):
            return F.cross_entropy(m(x), y)

    class WithLoss(nn.Module):
        def __init__(self, m):
            super().__init__()
            self.m = m

        def forward(self, x, y):
            return (loss(self.m, x, y),)

    return WithLoss(model.train()), x, y


def saved_set(name, fraction):
    from torch._functorch.aot_autograd import aot_module_simplified
    from torch._functorch.partitioners import min_cut_rematerialization_partition
    from torch._subclasses.fake_tensor import FakeTensorMode
    import torch._functorch.config as fcfg

    graphs = []

    def partition(joint, inputs, **kw):
        fw, bw = min_cut_rematerialization_partition(joint, inputs, **kw)
        graphs.append((fw, bw))
        return fw, bw

    def compiler(gm, example_inputs):
        return gm.forward

    fcfg.activation_memory_budget = fraction
    t0 = time.perf_counter()
    with FakeTensorMode():
        model, x, y = build(name)
        aot_module_simplified(model, (x, y), fw_compiler=compiler, bw_compiler=compiler,
                              partition_fn=partition)
    secs = time.perf_counter() - t0
    if len(graphs) != 1:
        sys.exit(f"{name}: expected one partition, got {len(graphs)}")
    fw, bw = graphs[0]
    order = {n.name: i for i, n in enumerate(fw.graph.nodes)}
    fw_nodes = {n.name: n for n in fw.graph.nodes}
    # Llama: the segment of each forward node, the number of rsqrt ops (one
    # per RMSNorm, two per block) at or before it in the forward graph.
    segment, seen = {}, 0
    for n in fw.graph.nodes:
        seen += _op_name(n) == "rsqrt"
        segment[n.name] = seen
    saved, by_ref, by_ref_n = [], 0, 0
    for n in bw.graph.nodes:
        if n.op != "placeholder" or n.name.startswith("tangents"):
            continue
        v = n.meta.get("val")
        if not isinstance(v, torch.Tensor):
            continue  # a saved symbolic int
        src = fw_nodes.get(n.name)
        if src is None:
            sys.exit(f"{name}: backward input {n.name} is not a forward node")
        b = v.numel() * v.element_size()
        kind, ref, base = _kind(src)
        if ref:
            by_ref += b
            by_ref_n += 1
            continue
        saved.append({"node": n.name, "op": _op_name(src), "kind": kind,
                      "shape": list(v.shape), "dtype": str(v.dtype).replace("torch.", ""),
                      "bytes": b, "order": (order[base.name], order[n.name])})
        if name.startswith("llama"):
            saved[-1]["segment"] = segment[base.name]
    # In forward order of the ops that made them: the partitioner puts some
    # saved views (detach of the attention's output) at the graph's end.
    saved.sort(key=lambda s: s["order"])
    return {"saved": saved, "saved_bytes": sum(s["bytes"] for s in saved),
            "by_ref_bytes": by_ref, "by_ref_count": by_ref_n, "seconds": round(secs, 2)}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workloads", default="gpt2-124m,resnet50,vit-b16")
    ap.add_argument("--fractions", default="1.0,0.8,0.6,0.4,0.2,0.0")
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    torch.set_num_threads(1)
    res = {"torch": torch.__version__, "workloads": {}}
    for name in args.workloads.split(","):
        res["workloads"][name] = {}
        for f in args.fractions.split(","):
            r = saved_set(name, float(f))
            res["workloads"][name][f"{float(f):.2f}"] = r
            print(f"{name} at activation_memory_budget {float(f):.2f}: {len(r['saved'])} saved "
                  f"tensors, {r['saved_bytes'] / 1e9:.2f} GB ({r['by_ref_count']} by reference), "
                  f"traced and partitioned in {r['seconds']:.1f} s", flush=True)
    tmp = args.out + ".tmp"
    json.dump(res, open(tmp, "w"), indent=1)
    os.replace(tmp, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
