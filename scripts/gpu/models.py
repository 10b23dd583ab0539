"""The models of the GPU bring-up kit, built the same way on both machines.

Imported by prepare.py (here, PyTorch 1.13: traced to TorchScript for
offload-import) and by torch_side.py (on the GPU machine, PyTorch 2.x: the
eager peer of the side-by-side run), so the two sides train the same
modules. The classes come from python/export_models.py (the project's
example models); nothing is defined twice.

  name          what                                              kind
  resnet18      torchvision resnet18, 10 classes, x [32,3,32,32]  example
  transformer   2-layer TransformerEncoder classifier, x [8,16,64] example
  gpt           small GPT decoder (vocab 256, 32 positions)       example
  resnet18-224  torchvision resnet18, 1000 classes, x [128,3,224,224]  side by side
  gpt2-small    GPT-2-small-shaped decoder: vocab 50257, 1024 positions,
                d_model 768, 12 blocks, 12 heads, MLP 4x, untied head
                (163 M parameters), x [8,1024] tokens              side by side
  resnet18-amp  torchvision resnet18, 100 classes, x [64,3,64,64]  amp
  gpt2-amp      GPT-2-small-shaped decoder, 4 blocks, 512 positions
                (vocab 50257, d_model 768, 12 heads), x [8,512]    amp
  resnet18-amp-mini, gpt-amp-mini  the same at the example models' sizes
                (the rehearsal's self-test of the amp code path)   amp-mini

"example" models are checked on the GPU against the host backend's results
carried in the bundle; "side by side" ones are timed against PyTorch; "amp"
ones are bf16-mixed steps (forward and backward, gradients returned, no
optimizer) timed and checked against PyTorch's torch.autocast step and its
float64 step (scripts/gpu/amp.py).
"""
import math

import export_models as em  # python/export_models.py, on PYTHONPATH (bundle.sh, kit.py set it)

# Per model: constructor arguments, the trained shapes (what offload-import is
# given and the GPU runs), the shapes it is traced at (the importer takes the
# shapes from the command line; big models are traced small), the loss.
MODELS = {
    "resnet18": dict(kind="example", arch="resnet18", classes=10,
                     x=[32, 3, 32, 32], trace_x=[32, 3, 32, 32]),
    "transformer": dict(kind="example", arch="transformer", classes=10,
                        x=[8, 16, 64], trace_x=[8, 16, 64]),
    "gpt": dict(kind="example", arch="gpt", vocab=256, n_pos=32, d_model=64, n_layer=2,
                n_head=4, x=[4, 32], trace_x=[4, 32]),
    "resnet18-224": dict(kind="sbs", arch="resnet18", classes=1000,
                         x=[128, 3, 224, 224], trace_x=[2, 3, 64, 64]),
    "gpt2-small": dict(kind="sbs", arch="gpt", vocab=50257, n_pos=1024, d_model=768,
                       n_layer=12, n_head=12, x=[8, 1024], trace_x=[1, 16]),
    "resnet18-amp": dict(kind="amp", arch="resnet18", classes=100,
                         x=[64, 3, 64, 64], trace_x=[2, 3, 64, 64]),
    "gpt2-amp": dict(kind="amp", arch="gpt", vocab=50257, n_pos=512, d_model=768,
                     n_layer=4, n_head=12, x=[8, 512], trace_x=[1, 16]),
    "resnet18-amp-mini": dict(kind="amp-mini", arch="resnet18", classes=10,
                              x=[4, 3, 32, 32], trace_x=[4, 3, 32, 32]),
    "gpt-amp-mini": dict(kind="amp-mini", arch="gpt", vocab=256, n_pos=32, d_model=64,
                         n_layer=2, n_head=4, x=[4, 32], trace_x=[4, 32]),
}
EXAMPLES = [m for m, c in MODELS.items() if c["kind"] == "example"]
SIDE_BY_SIDE = [m for m, c in MODELS.items() if c["kind"] == "sbs"]


def build(name):
    """The eager module `name` (weights: PyTorch's default init; the kit
    overwrites them with the generated ones)."""
    import torch
    c = MODELS[name]
    torch.manual_seed(0)
    if c["arch"] == "resnet18":
        import torchvision
        return torchvision.models.resnet18(num_classes=c["classes"])
    if c["arch"] == "transformer":
        return em.EncoderClassifier(0.0)
    if c["arch"] == "gpt":
        return em.GPT(vocab=c["vocab"], n_pos=c["n_pos"], d_model=c["d_model"],
                      n_layer=c["n_layer"], n_head=c["n_head"], dropout=0.0)
    raise ValueError(name)


def returns_loss(name):
    return MODELS[name]["arch"] == "gpt"


def input_specs(name, trace=False):
    """The spec entries (gen.py) of the model's inputs x and y."""
    c = MODELS[name]
    x = c["trace_x" if trace else "x"]
    if c["arch"] == "gpt":
        return [{"name": "x", "shape": x, "dtype": "i64", "init": "tokens", "high": c["vocab"],
                 "part": "x"},
                {"name": "y", "shape": x, "dtype": "i64", "init": "tokens", "high": c["vocab"],
                 "part": "y"}]
    # Unit-variance uniform features / pixels; class labels.
    return [{"name": "x", "shape": x, "dtype": "f32", "init": "uniform", "bound": math.sqrt(3.0)},
            {"name": "y", "shape": [x[0]], "dtype": "i64", "init": "randint",
             "high": c["classes"]}]


def type_string(entry):
    """offload-import's --input syntax: 32x3x32x32xf32."""
    return "x".join([str(d) for d in entry["shape"]] + [entry["dtype"]])


def param_specs(model):
    """The spec entries of every parameter and buffer, by qualified name (as
    named_parameters()/named_buffers() spell them, the plan's binding names).
    Weights of linear, convolution and attention projections: uniform in
    +-1/sqrt(fan_in) (PyTorch's default bound for Linear and Conv2d), their
    biases too; embeddings: uniform with standard deviation 0.02 (GPT-2's);
    norm weights 1, norm biases 0, running means 0, running variances 1,
    counters 0."""
    import torch.nn as nn
    specs = []
    for mod_name, mod in model.named_modules():
        own = [(n, p, True) for n, p in mod.named_parameters(recurse=False)]
        own += [(n, b, False) for n, b in mod.named_buffers(recurse=False)]
        weight = getattr(mod, "weight", None)
        if isinstance(mod, nn.MultiheadAttention):
            weight = mod.in_proj_weight
        fan_in = None
        if weight is not None and weight.dim() >= 2:
            fan_in = int(weight[0].numel())
        for n, t, is_param in own:
            full = (mod_name + "." if mod_name else "") + n
            shape = list(t.shape)
            if not t.dtype.is_floating_point:
                specs.append({"name": full, "shape": shape, "dtype": "i64", "init": "const",
                              "value": 0})
                continue
            e = {"name": full, "shape": shape, "dtype": "f32"}
            if isinstance(mod, (nn.BatchNorm2d, nn.LayerNorm)):
                one = n in ("weight", "running_var")
                e.update(init="const", value=1.0 if one else 0.0)
            elif isinstance(mod, nn.Embedding):
                e.update(init="uniform", bound=0.02 * math.sqrt(3.0))
            elif t.dim() >= 2:
                e.update(init="uniform", bound=1.0 / math.sqrt(int(t[0].numel())))
            elif fan_in:
                e.update(init="uniform", bound=1.0 / math.sqrt(fan_in))
            else:
                e.update(init="const", value=0.0)
            specs.append(e)
    return specs


def load_arrays(model, arrays):
    """Copies arrays (name -> numpy array, e.g. a generated params.npz) into
    the module's parameters and buffers."""
    import torch
    with torch.no_grad():
        named = dict(model.named_parameters())
        named.update(dict(model.named_buffers()))
        missing = [n for n in named if n not in arrays]
        if missing:
            raise KeyError("generated parameters lack: " + ", ".join(missing))
        for n, t in named.items():
            t.copy_(torch.from_numpy(arrays[n].copy()).to(t.dtype))


def blocks(name, model):
    """The modules checkpointed one by one in the side-by-side run
    (torch.utils.checkpoint per block): resnet18's 8 BasicBlocks, the GPT's
    decoder blocks. Returns (parent container, attribute, index) triples so
    the caller can wrap each in place."""
    c = MODELS[name]
    if c["arch"] == "resnet18":
        return [(getattr(model, "layer%d" % i), None, j) for i in range(1, 5)
                for j in range(len(getattr(model, "layer%d" % i)))]
    if c["arch"] == "gpt":
        return [(model.blocks, None, j) for j in range(len(model.blocks))]
    raise ValueError(name)
