"""pytest tests of the Python package `offload` (python/offload) and its
runtime bindings (_offload_runtime). Run by ctest (test/PythonPackage) with
PYTHONPATH=BUILD/python under two interpreters: /usr/bin/python3 (Debian's
PyTorch 1.13: ctest python-package) and scripts/torch2-python (PyTorch 2.15
from PyPI: ctest python-package.torch2). The tests that compile a model run
once per exporter the running PyTorch has (EXPORTERS: TorchScript on 1.13;
torch.export and TorchScript on 2.x); a few are 2.x-only (torch.export's own
errors, the .pt2 in the workdir).

Reference: PyTorch's own eager training loop (torch.nn.functional losses,
torch.optim) from the same initial weights. Tolerances (fp32, same math in a
possibly different summation order): after one step, the loss relative 1e-5
and gradients 1e-4 relative to max|ref grad| of PyTorch's fp32 step. Over
several steps two fp32 runs need not agree to a fixed tolerance (a rounding
difference that depends on the CPU's BLAS kernels grows with every step), so
multi-step losses and parameters are judged against PyTorch's float64 run of
the same steps: our error at most 4 x PyTorch fp32's own error against it, or
1e-5 (losses) / 1e-4 (parameters, relative to max(|ref|, 1e-2)), whichever is
larger (offload.testing; issue 27).
"""
import copy
import os
import re

import numpy as np
import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import offload
from offload.compiler import resolve_exporter, torch_version
from offload.testing import judge_tensors, judge_trajectory

torch.set_num_threads(1)

TORCH2 = torch_version()[0] >= 2
# "export": torch.export -> .pt2 -> the .pt2 importer (PyTorch 2.x only);
# "torchscript": torch.jit.trace -> .pt -> the TorchScript importer (both).
EXPORTERS = ["export", "torchscript"] if TORCH2 else ["torchscript"]
needs_torch2 = pytest.mark.skipif(not TORCH2, reason="torch.export needs PyTorch 2.x")


@pytest.fixture(params=EXPORTERS)
def exporter(request):
    return request.param


def mlp(seed=0, hidden=32):
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(16, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU(),
                         nn.Linear(hidden, 4))


def batch(seed, n=8):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(n, 16, generator=g), torch.randint(0, 4, (n,), generator=g)


def rel_err(a, b, floor=1e-2):
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    return float(np.max(np.abs(a - b)) / max(float(np.max(np.abs(b))), floor))


def torch_losses(model, opt_spec, batches, loss_fn=F.cross_entropy, dtype=torch.float32,
                 micro_batches=1):
    """Losses of PyTorch's own loop on `batches` with `model` and the batches'
    floating-point tensors in `dtype`; `model` is converted and trained in place.
    loss_fn None: the model returns its loss from (x, y). micro_batches K > 1:
    PyTorch's gradient accumulation loop, `(loss_i / K).backward()` over K
    equal slices of each batch, then `step()`; the loss is the slices' mean."""
    model.to(dtype)
    opt = opt_spec.torch(model.parameters())
    model.train()
    out = []
    for x, y in batches:
        x, y = (t.to(dtype) if t.is_floating_point() else t for t in (x, y))
        opt.zero_grad()
        losses = []
        for xi, yi in zip(torch.chunk(x, micro_batches), torch.chunk(y, micro_batches)):
            loss = model(xi, yi) if loss_fn is None else loss_fn(model(xi), yi)
            (loss / micro_batches if micro_batches > 1 else loss).backward()
            losses.append(float(loss))
        opt.step()
        out.append(losses[0] if micro_batches == 1 else sum(losses) / micro_batches)
    return out


def torch_runs(model, opt_spec, batches, loss_fn=F.cross_entropy, micro_batches=1):
    """PyTorch's loop on copies of `model` in fp32 and in float64: ((losses,
    trained copy) in fp32, (losses, trained copy) in float64)."""
    runs = []
    for dtype in (torch.float32, torch.float64):
        ref = copy.deepcopy(model)
        runs.append((torch_losses(ref, opt_spec, batches, loss_fn, dtype, micro_batches), ref))
    return runs


def assert_like_float64(ours_losses, ours_state, runs):
    """Our losses and floating-point state (name -> tensor) judged against the
    float64 run of `runs` (torch_runs) by offload.testing's rule."""
    (l32, r32), (l64, r64) = runs
    v = judge_trajectory(ours_losses, l32, l64, floor=1e-5)
    assert v.ok, f"losses: {v} (ours {ours_losses}, fp32 {l32}, f64 {l64})"
    sd32, sd64 = r32.state_dict(), r64.state_dict()
    names = [n for n, p in sd64.items() if p.dtype.is_floating_point]
    v = judge_tensors(ours_state, sd32, {n: sd64[n] for n in names}, floor=1e-4)
    assert v.ok, f"state after {len(ours_losses)} steps: {v}"


def train_like_torch(model, batches, opt, exporter, loss="cross_entropy",
                     loss_fn=F.cross_entropy):
    """Compiles `model` on batches[0], trains it on `batches` beside PyTorch's
    own loop on copies in fp32 and float64, and checks the losses and the
    floating-point tensors of state_dict() against the float64 run
    (assert_like_float64), that state_dict() has PyTorch's names in PyTorch's
    order, and that the others (batch norm's num_batches_tracked) are equal.
    Returns (step, its state_dict, PyTorch's fp32 trained copy)."""
    runs = torch_runs(model, opt, batches, loss_fn)
    step = offload.compile(model, batches[0], loss=loss, optimizer=opt, exporter=exporter,
                           verbose=False)
    ours = [step(x, y) for x, y in batches]
    sd = step.state_dict()
    ref = runs[0][1]
    assert list(sd) == list(ref.state_dict())
    assert_like_float64(ours, sd, runs)
    for name, p in ref.state_dict().items():
        if not p.dtype.is_floating_point:
            assert torch.equal(sd[name], p), (name, sd[name], p)
    return step, sd, ref


@pytest.fixture(scope="module", params=EXPORTERS)
def sgd_step(request):
    model = mlp()
    ref = copy.deepcopy(model)
    x, y = batch(0)
    step = offload.compile(model, (x, y), loss="cross_entropy",
                           optimizer=offload.SGD(lr=0.1, momentum=0.9), return_gradients=True,
                           exporter=request.param, verbose=False)
    assert step.exporter == request.param
    return model, ref, step


def test_first_step_loss_and_gradients_match_torch(sgd_step):
    model, ref, step = sgd_step
    x, y = batch(0)
    loss = step(x, y)
    assert isinstance(loss, float)
    r = copy.deepcopy(ref)
    ref_loss = F.cross_entropy(r(x), y)
    ref_loss.backward()
    assert abs(loss - float(ref_loss)) <= 1e-5 * max(abs(float(ref_loss)), 1e-2)
    grads = step.gradients()
    ref_grads = dict(r.named_parameters())
    assert set(grads) == set(ref_grads)
    for name, g in grads.items():
        assert g.shape == ref_grads[name].grad.shape, name
        assert rel_err(g, ref_grads[name].grad, 1e-5) <= 1e-4, name
    # Four more steps on other batches: losses and parameters follow torch.optim
    # (judged against its float64 run).
    batches = [batch(0)] + [batch(s) for s in range(1, 5)]
    runs = torch_runs(ref, offload.SGD(lr=0.1, momentum=0.9), batches)
    ours = [loss] + [step(bx, by) for bx, by in batches[1:]]
    assert_like_float64(ours, step.state_dict(), runs)


def test_adamw_matches_torch(exporter):
    train_like_torch(mlp(seed=1), [batch(s) for s in range(4)],
                     offload.AdamW(lr=1e-2, weight_decay=0.05), exporter)


def test_batch_norm_state_and_mse_match_torch(exporter):
    """Running statistics are state: the step updates them as PyTorch does."""
    torch.manual_seed(2)
    model = nn.Sequential(nn.Linear(16, 24), nn.BatchNorm1d(24), nn.ReLU(), nn.Linear(24, 3))
    g = torch.Generator().manual_seed(3)
    batches = [(torch.randn(8, 16, generator=g), torch.randn(8, 3, generator=g))
               for _ in range(3)]
    # num_batches_tracked counts the steps, as in PyTorch (compared exactly).
    _, sd, _ = train_like_torch(model, batches, offload.SGD(lr=0.05), exporter, loss="mse",
                                loss_fn=F.mse_loss)
    assert int(sd["1.num_batches_tracked"]) == len(batches)
    model.load_state_dict(sd)  # PyTorch's names, dtypes and shapes


def test_state_dict_round_trip(exporter):
    model = mlp(seed=4)
    initial = copy.deepcopy(model.state_dict())
    x, y = batch(7)
    step = offload.compile(model, (x, y), optimizer=offload.SGD(lr=0.1), exporter=exporter,
                           verbose=False)
    first = step(x, y)
    for _ in range(3):
        step(x, y)
    trained = step.state_dict()
    assert list(trained) == list(initial)
    assert all(isinstance(v, torch.Tensor) for v in trained.values())
    assert not torch.equal(trained["0.weight"], initial["0.weight"])  # it trained
    # Into the torch module and back out: the same bits.
    fresh = mlp(seed=99)
    fresh.load_state_dict(trained)
    for k, v in fresh.state_dict().items():
        assert torch.equal(v, trained[k]), k
    # Reloading the initial weights reproduces the first loss exactly (SGD
    # without momentum: the loss depends on the parameters only).
    step.load_state_dict(initial)
    assert step(x, y) == first
    # Returned tensors are copies: a later step does not change them.
    before = step.state_dict()["0.weight"].clone()
    snapshot = step.state_dict()["0.weight"]
    step(x, y)
    assert torch.equal(snapshot, before)


def test_load_state_dict_errors(exporter):
    model = mlp(seed=5)
    x, y = batch(0)
    step = offload.compile(model, (x, y), exporter=exporter, verbose=False)
    sd = model.state_dict()
    with pytest.raises(offload.InputError, match="missing keys: 0.bias"):
        step.load_state_dict({k: v for k, v in sd.items() if k != "0.bias"})
    bad = dict(sd)
    bad["0.weight"] = torch.zeros(3, 3)
    with pytest.raises(offload.InputError, match=r"load_state_dict\['0.weight'\].*float32\[3, 3\]"
                       r".*float32\[32, 16\]"):
        step.load_state_dict(bad)


def test_budget_below_unplanned_holds_and_is_bit_identical():
    """A budget below the unplanned arena: the planner rewrites the step, the
    host backend with exactly the budget runs it, the measured peak equals the
    planned one and stays within the budget, and the losses are bit-identical
    to the unplanned step's (recompute and offload move or rerun the same ops)."""
    torch.manual_seed(6)
    model = nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(),
                          nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 10))
    g = torch.Generator().manual_seed(6)
    batches = [(torch.randn(64, 64, generator=g), torch.randint(0, 10, (64,), generator=g))
               for _ in range(3)]
    opt = offload.SGD(lr=0.05, momentum=0.9)
    free = offload.compile(copy.deepcopy(model), batches[0], optimizer=opt, verbose=False)
    unplanned = free.unplanned_arena_bytes
    assert unplanned and unplanned == free.plan.device_capacity
    with pytest.raises(offload.BudgetError) as info:
        offload.compile(copy.deepcopy(model), batches[0], optimizer=opt, budget=unplanned // 20,
                        verbose=False)
    smallest = info.value.smallest_reachable_bytes
    assert unplanned // 20 < smallest < unplanned
    budget = (smallest + unplanned) // 2
    planned = offload.compile(copy.deepcopy(model), batches[0], optimizer=opt, budget=budget,
                              verbose=False)
    assert planned.device_bytes == budget
    assert planned.plan.device_capacity <= budget < unplanned
    assert "budget %d bytes" % budget in planned.report
    a = [free(x, y) for x, y in batches]
    b = [planned(x, y) for x, y in batches]
    assert a == b
    assert planned.measured_peak_device_bytes == planned.planned_peak_device_bytes <= budget
    assert free.measured_peak_device_bytes > budget
    for k, v in free.state_dict().items():
        assert torch.equal(v, planned.state_dict()[k]), k


def test_budget_error_names_smallest_reachable(exporter):
    x, y = batch(0)
    with pytest.raises(offload.BudgetError) as info:
        offload.compile(mlp(), (x, y), budget="1000B", exporter=exporter, verbose=False)
    e = info.value
    assert isinstance(e, offload.CompileError) and e.stage == "plan"
    assert e.budget_bytes == 1000
    assert e.smallest_reachable_bytes > 1000
    assert "Ask for budget=%d" % e.smallest_reachable_bytes in str(e)
    # Asking for that number succeeds, and the budget holds.
    step = offload.compile(mlp(), (x, y), budget=e.smallest_reachable_bytes, exporter=exporter,
                           verbose=False)
    step(x, y)
    assert step.measured_peak_device_bytes <= e.smallest_reachable_bytes


def test_saved_budget_bounds_saved_bytes_and_is_bit_identical():
    """saved_budget= (PyTorch's activation_memory_budget in bytes, or "P%"): with 0 the
    planner keeps no saved activation on the device (it recomputes or offloads
    each), plans without a `budget` (the target's memory), and the losses and
    parameters stay bit-identical to the unplanned step's; bad values are
    InputErrors naming saved_budget."""
    x, y = batch(0)
    free = offload.compile(mlp(), (x, y), verbose=False)
    planned = offload.compile(mlp(), (x, y), saved_budget=0, verbose=False)
    assert "saved budget 0 bytes (0 B): kept saved bytes" in planned.report
    assert re.search(r"kept saved bytes \d+ -> 0 ", planned.report), planned.report
    batches = [batch(k) for k in range(3)]
    assert [free(a, b) for a, b in batches] == [planned(a, b) for a, b in batches]
    for k, v in free.state_dict().items():
        assert torch.equal(v, planned.state_dict()[k]), k
    assert planned.measured_peak_device_bytes == planned.planned_peak_device_bytes
    # A percentage of the step's saved bytes (PyTorch's activation_memory_budget=0.5).
    half = offload.compile(mlp(), (x, y), saved_budget="50%", verbose=False)
    m = re.search(r"saved budget (\d+) bytes .*kept saved bytes (\d+) -> (\d+) ", half.report)
    assert m, half.report
    budget, total, kept = (int(g) for g in m.groups())
    assert budget == total // 2 and kept <= budget, half.report
    again = offload.compile(mlp(), (x, y), verbose=False)
    assert [again(a, b) for a, b in batches] == [half(a, b) for a, b in batches]
    for bad, match in ((-1, "saved_budget: must be >= 0"),
                       ("lots", "saved_budget: cannot read 'lots'"), (True, "saved_budget"),
                       ("150%", "saved_budget: cannot read '150%' as a percentage")):
        with pytest.raises(offload.InputError, match=match):
            offload.compile(mlp(), (x, y), saved_budget=bad, verbose=False)


class WithLoss(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(16, 4)

    def forward(self, x, y):
        return F.cross_entropy(self.fc(x), y)


def test_model_returning_its_loss(exporter):
    torch.manual_seed(8)
    model = WithLoss()
    ref = copy.deepcopy(model)
    x, y = batch(8)
    step = offload.compile(model, (x, y), loss=None, optimizer=offload.SGD(lr=0.1),
                           exporter=exporter, verbose=False)
    assert step.input_names == ["x", "y"]
    ours = [step(x, y) for _ in range(3)]
    runs = torch_runs(ref, offload.SGD(lr=0.1), [(x, y)] * 3, loss_fn=None)
    assert_like_float64(ours, step.state_dict(), runs)
    with pytest.raises(offload.CompileError, match="not a scalar loss.*give the target as the "
                       "last example input"):
        offload.compile(nn.Linear(16, 4), (x,), loss=None, exporter=exporter, verbose=False)


def test_cross_entropy_takes_the_class_dim_from_the_target_shape(exporter):
    """loss="cross_entropy" on an output of rank > 2: classes at dim 1 when the
    target is the output without dim 1 (F.cross_entropy's meaning, a
    segmentation output [N, C, H, W]; here W == C, which the old flattening
    of the last dim trained on the wrong classes without a word), at the last
    dim when it is the output without the last dim (a language model's
    [B, T, V]); a shape that fits both is refused."""
    torch.manual_seed(21)
    model = nn.Conv2d(3, 4, 3, padding=1)
    g = torch.Generator().manual_seed(21)
    x, y = torch.randn(2, 3, 5, 4, generator=g), torch.randint(0, 4, (2, 5, 4), generator=g)
    ref = copy.deepcopy(model)
    step = offload.compile(model, (x, y), loss="cross_entropy", optimizer=offload.SGD(lr=0.1),
                           return_gradients=True, exporter=exporter, verbose=False)
    loss = step(x, y)
    grads = step.gradients()
    r = copy.deepcopy(ref).double()
    l64 = F.cross_entropy(r(x.double()), y)
    l64.backward()
    assert abs(loss - float(l64)) <= 1e-5 * abs(float(l64))
    for name, p in r.named_parameters():
        assert rel_err(grads[name], p.grad, 1e-5) <= 1e-4, name

    # [B, T, V] with [B, T]: the last dim, as logits.reshape(-1, V) does.
    torch.manual_seed(22)
    lm = nn.Linear(8, 5)
    xs, ys = torch.randn(2, 3, 8, generator=g), torch.randint(0, 5, (2, 3), generator=g)
    ref = copy.deepcopy(lm).double()
    step = offload.compile(lm, (xs, ys), loss="cross_entropy", optimizer=offload.SGD(lr=0.1),
                           exporter=exporter, verbose=False)
    want = float(F.cross_entropy(ref(xs.double()).reshape(-1, 5), ys.reshape(-1)))
    assert abs(step(xs, ys) - want) <= 1e-5 * abs(want)

    # [2, 4, 4] with [2, 4]: classes at dim 1 or at the last dim? Refused.
    sq = nn.Linear(4, 4)
    with pytest.raises(offload.CompileError, match="fits classes at dim 1"):
        offload.compile(sq, (torch.randn(2, 4, 4), torch.randint(0, 4, (2, 4))),
                        loss="cross_entropy", exporter=exporter, verbose=False)


class OneSample(nn.Module):
    """nn.Linear on one sample without a batch dim ([K] -> [N])."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(6, 3)

    def forward(self, x, y):
        return F.cross_entropy(self.fc(x).unsqueeze(0), y)


def test_linear_on_one_sample_without_a_batch_dim(exporter):
    # nn.Linear accepts [K] for [1, K]; the step and its VJP must too.
    torch.manual_seed(23)
    model = OneSample()
    ref = copy.deepcopy(model).double()
    x, y = torch.randn(6), torch.tensor([2])
    step = offload.compile(model, (x, y), loss=None, optimizer=offload.SGD(lr=0.1),
                           return_gradients=True, exporter=exporter, verbose=False)
    loss = step(x, y)
    l64 = ref(x.double(), y)
    l64.backward()
    assert abs(loss - float(l64)) <= 1e-5 * abs(float(l64))
    grads = step.gradients()
    for name, p in ref.named_parameters():
        assert rel_err(grads[name], p.grad, 1e-5) <= 1e-4, name


def test_conv_batchnorm_pool_matches_torch(exporter):
    torch.manual_seed(9)
    model = nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(),
                          nn.MaxPool2d(2), nn.Flatten(), nn.Linear(4 * 4 * 4, 10))
    g = torch.Generator().manual_seed(9)
    batches = [(torch.randn(8, 1, 8, 8, generator=g), torch.randint(0, 10, (8,), generator=g))
               for _ in range(3)]
    _, sd, _ = train_like_torch(model, batches, offload.SGD(lr=0.1, momentum=0.9), exporter)
    model.load_state_dict(sd)


def test_example_inputs_that_do_not_fit_the_model(exporter):
    x, y = batch(0)
    # PyTorch's message: eager (tracing) or its shape propagation (export).
    message = (r"torch.export.export failed: RuntimeError: a and b must have same reduction dim, "
               r"but got \[8, 5\] X \[16, 32\]" if exporter == "export" else
               r"torch.jit.trace failed: .*mat1 and mat2 shapes cannot be multiplied "
               r"\(8x5 and 16x32\)")
    with pytest.raises(offload.CompileError, match=message) as info:
        offload.compile(mlp(), (torch.randn(8, 5), y), exporter=exporter, verbose=False)
    assert info.value.stage == "export"


class Cumsum(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(16, 4)

    def forward(self, x):
        return torch.cumsum(self.fc(x), 1)  # CUMSUM-LINE


def test_unsupported_op_names_op_and_source_line(exporter):
    line = next(i for i, text in enumerate(open(__file__), 1) if "# CUMSUM-LINE" in text
                and "next(" not in text)
    x, y = batch(0)
    with pytest.raises(offload.CompileError) as info:
        offload.compile(Cumsum(), (x, y), exporter=exporter, verbose=False)
    assert info.value.stage == "import"
    assert "aten::cumsum" in str(info.value)
    assert f"{os.path.basename(__file__)}:{line}" in str(info.value)


def test_exporter_choice(monkeypatch):
    assert resolve_exporter("auto") == ("export" if TORCH2 else "torchscript")
    assert resolve_exporter("torchscript") == "torchscript"
    x, y = batch(0)
    with pytest.raises(offload.InputError, match="exporter: expected one of 'auto', "
                       "'torchscript', 'export', got 'onnx'"):
        offload.compile(mlp(), (x, y), exporter="onnx", verbose=False)
    # exporter="export" on PyTorch 1.x: an error naming the version.
    monkeypatch.setattr(torch, "__version__", "1.13.1")
    with pytest.raises(offload.CompileError) as info:
        offload.compile(mlp(), (x, y), exporter="export", verbose=False)
    assert info.value.stage == "export"
    assert "needs torch.export (PyTorch 2.x); this is PyTorch 1.13.1" in str(info.value)


def test_export_leaves_the_model_unchanged(exporter):
    """Exporting runs the train-mode forward once (batch norm updates its
    running statistics then); compile restores every parameter and buffer
    and the module's mode."""
    torch.manual_seed(11)
    model = nn.Sequential(nn.Conv2d(1, 4, 3), nn.BatchNorm2d(4), nn.ReLU(), nn.Flatten(),
                          nn.Dropout(0.2), nn.Linear(4 * 6 * 6, 10)).eval()
    before = copy.deepcopy(model.state_dict())
    x, y = torch.randn(8, 1, 8, 8), torch.randint(0, 10, (8,))
    step = offload.compile(model, (x, y), exporter=exporter, verbose=False)
    assert not model.training
    after = model.state_dict()
    for k, v in before.items():
        assert torch.equal(after[k], v), k
    # The step itself trains in train mode: batch statistics, dropout on.
    assert step(x, y) > 0 and int(step.state_dict()["1.num_batches_tracked"]) == 1


class TiedAndScaled(nn.Module):
    """Tied weights (b.weight is a.weight) and a non-persistent buffer."""

    def __init__(self):
        super().__init__()
        self.a = nn.Linear(16, 16)
        self.b = nn.Linear(16, 16)
        self.b.weight = self.a.weight
        self.c = nn.Linear(16, 4)
        self.register_buffer("scale", torch.linspace(0.5, 1.5, 16), persistent=False)

    def forward(self, x):
        return self.c(torch.relu(self.b(torch.relu(self.a(x)) * self.scale)))


def test_tied_weights_and_non_persistent_buffers_match_torch(exporter):
    torch.manual_seed(12)
    model = TiedAndScaled()
    # The names checked include no "scale": it is not in state_dict.
    _, sd, _ = train_like_torch(model, [batch(s) for s in range(4)],
                                offload.SGD(lr=0.1, momentum=0.9), exporter)
    assert torch.equal(sd["a.weight"], sd["b.weight"])
    model.load_state_dict(sd)


@needs_torch2
def test_torch_export_failure_is_a_compile_error():
    class DataDependent(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(16, 4)

        def forward(self, x):
            if x.sum() > 0:  # control flow on a value: torch.export refuses it  # IF-LINE
                return self.fc(x)
            return -self.fc(x)

    x, y = batch(0)
    with pytest.raises(offload.CompileError) as info:
        offload.compile(DataDependent(), (x, y), exporter="export", verbose=False)
    assert info.value.stage == "export"
    # One line: what, where (the source line and its code) and PyTorch's reason.
    assert "\n" not in info.value.message
    assert f"data at {__file__}:{source_line('# IF-LINE')} (`if x.sum() > 0:" in str(info.value)
    assert "torch.export: Could not guard on data-dependent expression" in str(info.value)


def source_line(marker):
    """The line of this file that holds `marker` (and is not this lookup)."""
    return next(i for i, text in enumerate(open(__file__), 1)
                if marker in text and "source_line(" not in text)


class GenerationLoop(nn.Module):
    """Greedy decoding in the forward: a data-dependent stopping test."""

    def __init__(self):
        super().__init__()
        self.emb, self.head = nn.Embedding(10, 8), nn.Linear(8, 10)

    def forward(self, ids):
        while ids.shape[1] < 6:
            nxt = self.head(self.emb(ids)[:, -1]).argmax(-1, keepdim=True)
            if (nxt == 0).all():  # STOP-LINE
                break
            ids = torch.cat([ids, nxt], 1)
        return self.head(self.emb(ids)).logsumexp(-1).mean()


class DynamicPadding(nn.Module):
    """Padding trimmed to the batch's longest sequence: a data-dependent size."""

    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(10, 8)

    def forward(self, ids, mask):
        n = int(mask.sum(1).max())  # TRIM-LINE
        return self.emb(ids[:, :n]).pow(2).mean()


class MaskedSelect(nn.Module):
    """x[mask]: a result whose size torch.export leaves symbolic."""

    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(10, 8)

    def forward(self, ids):
        return self.emb(ids[ids != 0]).pow(2).mean()  # SELECT-LINE


@needs_torch2
@pytest.mark.parametrize("model, marker, what", [
    (GenerationLoop, "# STOP-LINE", "Could not guard on data-dependent expression"),
    (DynamicPadding, "# TRIM-LINE", "Could not extract specialized integer from data-dependent "
                                    "expression"),
])
def test_data_dependent_forward_names_the_construct_and_line(model, marker, what):
    ids = torch.randint(1, 10, (2, 4))
    inputs = (ids[:, :2],) if model is GenerationLoop else (ids, torch.ones_like(ids))
    with pytest.raises(offload.CompileError) as info:
        offload.compile(model(), inputs, loss=None, verbose=False)
    assert info.value.stage == "export"
    assert "\n" not in info.value.message
    code = open(__file__).read().splitlines()[source_line(marker) - 1].strip()
    assert (f"from a tensor's data at {__file__}:{source_line(marker)} (`{code}`): "
            f"torch.export: {what}") in str(info.value)
    assert "offload compiles one static graph for every batch" in str(info.value)


@needs_torch2
def test_data_dependent_shape_names_the_op_at_import():
    with pytest.raises(offload.CompileError) as info:
        offload.compile(MaskedSelect(), (torch.randint(0, 10, (2, 4)),), loss=None,
                        verbose=False)
    assert info.value.stage == "import"
    assert (f"{__file__}:{source_line('# SELECT-LINE')}: aten::index.Tensor: its result's "
            "shape depends on the tensor's data (dim 0 is u0") in str(info.value)


def tiny_hf(kind, use_cache=False):
    """A transformers model from its config (no download): GPT-2 or BERT,
    1 layer, width 32."""
    T = pytest.importorskip("transformers")
    torch.manual_seed(0)
    if kind == "gpt2":
        cfg = T.GPT2Config(n_layer=1, n_embd=32, n_head=2, vocab_size=40, n_positions=16,
                           resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, use_cache=use_cache,
                           bos_token_id=0, eos_token_id=0)
        return T.GPT2LMHeadModel(cfg)
    cfg = T.BertConfig(num_hidden_layers=1, hidden_size=32, intermediate_size=64,
                       num_attention_heads=2, vocab_size=40, max_position_embeddings=16,
                       hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0, num_labels=3)
    return T.BertForSequenceClassification(cfg)


def padded_batch():
    g = torch.Generator().manual_seed(5)
    ids = torch.randint(1, 40, (2, 8), generator=g)
    mask = torch.ones_like(ids)
    mask[1, -3:] = 0
    labels = ids.masked_fill(mask == 0, -100)
    return {"input_ids": ids, "attention_mask": mask, "labels": labels}


@needs_torch2
def test_hf_model_output_loss_from_keyword_inputs_without_a_wrapper():
    """GPT2LMHeadModel called with input_ids, a padding attention_mask and
    labels returns a ModelOutput whose .loss is the step's loss: compiled and
    run by keyword, judged against PyTorch's float64 step (the project's
    rule)."""
    model = tiny_hf("gpt2")
    kw = padded_batch()

    def reference(dtype):
        m = copy.deepcopy(model).to(dtype)
        out = m(**kw)
        out.loss.backward()
        return float(out.loss), {n: p.grad for n, p in m.named_parameters()}
    l64, g64 = reference(torch.float64)
    l32, g32 = reference(torch.float32)
    step = offload.compile(model, kw, return_gradients=True, verbose=False)
    assert step.loss_name is None and step.input_names == list(kw)
    loss = step(**kw)
    assert judge_trajectory([loss], [l32], [l64]).ok
    grads = step.gradients()
    assert judge_tensors(grads, g32, g64, floor=1e-5).ok
    assert isinstance(step(kw), float)  # the dict itself, too
    with pytest.raises(offload.InputError, match="missing labels; unexpected label"):
        step(input_ids=kw["input_ids"], attention_mask=kw["attention_mask"],
             label=kw["labels"])


@needs_torch2
def test_hf_decoder_with_its_default_key_value_cache_compiles():
    """GPT-2's config has use_cache=True by default: its forward then also
    returns a DynamicCache, which torch.export cannot return. compile
    exports without the cache (a training step never reads it), trains as
    without it, and leaves the model's config as it was."""
    kw = padded_batch()
    plain = offload.compile(tiny_hf("gpt2"), kw, verbose=False)
    model = tiny_hf("gpt2", use_cache=True)
    step = offload.compile(model, kw, verbose=False)
    assert model.config.use_cache is True
    assert step(**kw) == plain(**kw)


@needs_torch2
def test_hf_model_output_without_a_loss_names_the_output_and_line():
    model = tiny_hf("gpt2")
    kw = padded_batch()
    del kw["labels"]
    with pytest.raises(offload.CompileError) as info:
        offload.compile(model, kw, verbose=False)
    assert info.value.stage == "export"
    text = str(info.value)
    assert "the forward returns a CausalLMOutputWithCrossAttentions without a loss (its " \
        "fields: logits) (GPT2LMHeadModel.forward at " in text
    assert "modeling_gpt2.py:" in text and "pass the labels among the inputs" in text


@needs_torch2
def test_attention_mask_of_the_wrong_rank_names_the_op_and_line():
    """A [B, 1, T] attention_mask: HF's mask code cannot expand it; the error
    names the line of transformers' code and the op (expand)."""
    model = tiny_hf("bert")
    kw = padded_batch()
    kw["attention_mask"] = kw["attention_mask"][:, None, :]
    kw["labels"] = torch.tensor([0, 2])
    with pytest.raises(offload.CompileError) as info:
        offload.compile(model, kw, verbose=False)
    assert info.value.stage == "export"
    assert "masking_utils.py:" in str(info.value)
    assert "attention_mask.expand(" in str(info.value)
    assert "expand: the requested shape has too few dimensions" in str(info.value)


@needs_torch2
def test_keyword_inputs_argument_errors():
    kw = {"ids": torch.randint(1, 10, (2, 4))}
    with pytest.raises(offload.InputError, match="loss='cross_entropy' with keyword inputs"):
        offload.compile(MaskedSelect(), kw, loss="cross_entropy", verbose=False)
    with pytest.raises(offload.InputError, match="keyword inputs need exporter='export'"):
        offload.compile(MaskedSelect(), kw, exporter="torchscript", verbose=False)


class Attention(nn.Module):
    def __init__(self):
        super().__init__()
        self.qkv = nn.Linear(16, 48)
        self.out = nn.Linear(16, 4)

    def forward(self, x):
        q, k, v = self.qkv(x).reshape(8, 1, 3, 16).unbind(2)
        return self.out(F.scaled_dot_product_attention(q, k, v).reshape(8, 16))


@needs_torch2
def test_torchscript_on_torch2_with_an_op_libtorch_113_lacks():
    """TorchScript written by PyTorch 2.x loads in the importer's LibTorch
    1.13 only when it uses 1.13's ops: otherwise a CompileError naming the op
    (torch.export is the path for such models)."""
    x, y = batch(0)
    with pytest.raises(offload.CompileError, match="cannot load .*model.pt' as TorchScript: "
                       "Unknown builtin op: aten::scaled_dot_product_attention") as info:
        offload.compile(Attention(), (x, y), exporter="torchscript", verbose=False)
    assert info.value.stage == "import"


@needs_torch2
def test_auto_exports_a_pt2_on_torch2(tmp_path):
    x, y = batch(0)
    step = offload.compile(mlp(), (x, y), workdir=str(tmp_path), verbose=False)
    assert step.exporter == "export"
    assert (tmp_path / "model.pt2").is_file() and not (tmp_path / "model.pt").exists()
    assert any("offload-import" in line and "model.pt2" in line for line in step.log)
    assert step.input_names == ["input", "target"]
    assert set(step.stage_seconds) == {"export", "import", "autodiff", "lower"}


def test_dropout_trains_in_train_mode(exporter):
    """Dropout is on in the step (masks from `seed`, not PyTorch's
    generator): the loss differs from the same model without dropout, and
    two seeds give two losses."""
    torch.manual_seed(13)
    base = nn.Sequential(nn.Linear(16, 64), nn.ReLU(), nn.Dropout(0.5), nn.Linear(64, 4))
    x, y = batch(1)
    losses = [offload.compile(copy.deepcopy(base), (x, y), seed=s, exporter=exporter,
                              verbose=False)(x, y) for s in (1, 2)]
    no_dropout = float(F.cross_entropy(base.eval()(x), y))
    assert losses[0] != losses[1]
    assert all(abs(v - no_dropout) > 1e-4 for v in losses), (losses, no_dropout)


def test_wrong_inputs_raise_and_leave_parameters(sgd_step):
    _, _, step = sgd_step
    x, y = batch(0)
    before = step.state_dict()
    with pytest.raises(offload.InputError, match=r"input 0 \('input'\): got float32\[4, 16\], "
                       r"the compiled step takes float32\[8, 16\]"):
        step(torch.randn(4, 16), y)
    with pytest.raises(ValueError, match=r"int32\[8\].*int64\[8\]"):
        step(x, y.int())
    with pytest.raises(offload.InputError, match="takes 2 inputs"):
        step(x)
    with pytest.raises(offload.InputError, match="expected a torch.Tensor or numpy array"):
        step(x, [1, 2])
    after = step.state_dict()
    for k in before:
        assert torch.equal(before[k], after[k]), k
    step(x, y)  # still usable


def test_bf16_mixed_is_as_close_to_float64_as_torch_autocast(exporter):
    """precision="bf16-mixed" (issue 29): one step's loss and gradients
    against PyTorch's float64 step, within 4 x the error of PyTorch's own
    torch.autocast("cpu", torch.bfloat16) step on fp32 parameters, per tensor
    (floor: half a bf16 ulp, 2^-9); parameters and gradients stay fp32."""
    model = mlp(seed=4, hidden=64)
    x, y = batch(7, n=16)
    ref64 = copy.deepcopy(model).double()
    loss64 = F.cross_entropy(ref64(x.double()), y)
    loss64.backward()
    refac = copy.deepcopy(model)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        lossac = F.cross_entropy(refac(x), y)
    lossac.backward()
    step = offload.compile(model, (x, y), optimizer=offload.SGD(lr=0.1), return_gradients=True,
                           precision="bf16-mixed", exporter=exporter, verbose=False)
    loss = step(x, y)
    floor = 2.0 ** -9

    def err(a, b):
        return rel_err(a, b, 1e-3)
    assert abs(loss - float(loss64)) <= 4 * max(abs(float(lossac) - float(loss64)), floor)
    grads = step.gradients()
    g64 = dict(ref64.named_parameters())
    gac = dict(refac.named_parameters())
    for name, g in grads.items():
        assert g.dtype == torch.float32, name
        eo = err(g, g64[name].grad)
        ea = err(gac[name].grad, g64[name].grad)
        assert eo <= 4 * max(ea, floor), (name, eo, ea)
    sd = step.state_dict()
    assert all(t.dtype == torch.float32 for t in sd.values())


class AutocastInside(nn.Module):
    """A model that runs its own mixed precision: a block under
    torch.autocast (bf16 or f16) holding a region with autocast disabled,
    as users write it (issue 29: "a model exported under torch.autocast
    imports as it is")."""

    def __init__(self, dtype):
        super().__init__()
        torch.manual_seed(6)
        self.dtype = dtype
        self.fc1, self.fc2, self.fc3 = nn.Linear(16, 64), nn.Linear(64, 64), nn.Linear(64, 4)
        self.norm = nn.LayerNorm(64)

    def forward(self, x):
        own = self.fc1.weight.dtype  # f32; f64 in the float64 reference
        with torch.autocast("cpu", dtype=self.dtype):
            h = torch.relu(self.fc1(x))
            with torch.autocast("cpu", enabled=False):
                h = self.norm(h.to(own))  # in f32, by hand
            h = torch.relu(self.fc2(h)) + h
            out = self.fc3(h)
        return out.to(own)


@pytest.mark.skipif(torch_version() < (2, 5), reason="torch.export (PyTorch 2.x)")
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=["bf16", "f16"])
def test_model_under_torch_autocast_imports_as_it_is(dtype):
    """A .pt2 whose forward runs under torch.autocast (wrap_with_autocast)
    imports with autocast's casts in the graph (the policy of
    --offload-autocast, applied to the block's ops; the disabled region
    stays f32) and trains with precision="fp32" (nothing added): its loss
    and gradients are as close to PyTorch's float64 step as PyTorch's own
    step of the same module (its autocast) is, per tensor within 4x,
    floor half an ulp of the type. Without the import of enabled
    autocast, compile fails (unsupported op)."""
    model = AutocastInside(dtype)
    x, y = batch(8, n=16)
    ref64 = copy.deepcopy(model).double()  # autocast leaves f64 alone
    loss64 = F.cross_entropy(ref64(x.double()), y)
    loss64.backward()
    refac = copy.deepcopy(model)
    lossac = F.cross_entropy(refac(x), y)
    lossac.backward()
    step = offload.compile(model, (x, y), optimizer=offload.SGD(lr=0.1), return_gradients=True,
                           exporter="export", verbose=False)
    loss = step(x, y)
    floor = 2.0 ** -9 if dtype == torch.bfloat16 else 2.0 ** -12
    assert abs(loss - float(loss64)) <= 4 * max(abs(float(lossac) - float(loss64)), floor)
    g64 = dict(ref64.named_parameters())
    gac = dict(refac.named_parameters())
    grads = step.gradients()
    assert set(grads) == set(g64)
    for name, g in grads.items():
        assert g.dtype == torch.float32, name
        eo = rel_err(g, g64[name].grad, 1e-3)
        ea = rel_err(gac[name].grad, g64[name].grad, 1e-3)
        assert eo <= 4 * max(ea, floor), (name, eo, ea)
    # The step really computes in the low type: PyTorch's own step differs
    # from the float64 one by more than an f32 step would.
    assert max(rel_err(gac[n].grad, g64[n].grad, 1e-3) for n in g64) > 1e-4
    # ... and so does ours: its imported graph has low-type linears.
    low = "bf16" if dtype == torch.bfloat16 else "f16"
    graphs = [open(os.path.join(step.workdir, f)).read() for f in os.listdir(step.workdir)
              if f.endswith(".mlir")]
    assert any(f"offload.linear" in g and f"x{low}>" in g for g in graphs), os.listdir(step.workdir)

@pytest.mark.parametrize("opt_spec", [offload.SGD(lr=0.1, momentum=0.9, weight_decay=0.01),
                                      offload.AdamW(lr=0.01, weight_decay=0.01)],
                         ids=["sgd", "adamw"])
def test_bf16_true_is_as_close_to_float64_as_torch_bf16(exporter, opt_spec):
    """bf16-true (issue 29): offload.compile(model.to(torch.bfloat16), bf16
    inputs) trains the bf16 parameters as they are; one step's loss and each
    parameter's change against PyTorch's float64 step from the same bf16
    values, within 4 x the error of PyTorch's own bf16 step (torch.optim on
    the bf16 parameters), floor 2^-9; state_dict() and the loss's inputs stay
    bf16 torch tensors."""
    model = mlp(seed=6, hidden=64).to(torch.bfloat16)
    x, y = batch(8, n=16)
    x = x.to(torch.bfloat16)
    p0 = {k: v.detach().double().clone() for k, v in model.named_parameters()}

    def torch_step(dtype):
        m = copy.deepcopy(model).to(dtype)
        loss = F.cross_entropy(m(x.to(dtype)), y)
        o = opt_spec.torch(m.parameters())
        o.zero_grad()
        loss.backward()
        o.step()
        return float(loss.double()), {k: v.detach().double() for k, v in m.named_parameters()}

    lossb, pb = torch_step(torch.bfloat16)
    loss64, p64 = torch_step(torch.float64)
    step = offload.compile(model, (x, y), optimizer=opt_spec, exporter=exporter, verbose=False)
    loss = step(x, y)
    floor = 2.0 ** -9
    assert abs(loss - loss64) <= 4 * max(abs(lossb - loss64), floor) * abs(loss64)
    sd = step.state_dict()
    assert all(sd[k].dtype == torch.bfloat16 for k in p0)
    d64 = {k: p64[k] - p0[k] for k in p0}
    scale = 1e-3 * max(float(d.abs().max()) for d in d64.values())
    for k in p0:
        eo = rel_err(sd[k].double() - p0[k], d64[k], scale)
        eb = rel_err(pb[k] - p0[k], d64[k], scale)
        assert eo <= 4 * max(eb, floor), (k, eo, eb)


def test_adamw_bf16_moments_match_a_bf16_moment_reference():
    """offload.AdamW(moments="bf16") (issue 29): the moments are stored in
    bf16 (optimizer_state() gives their bits as uint16), and 5 steps of the
    fp32 mlp are within 4 x the error of PyTorch's bf16-moment loop
    (offload.testing.adamw_bf16_moments) against float64 torch.optim.AdamW,
    per parameter on its change, floor 2^-9. A bad moments value is a
    ValueError."""
    from offload.testing import adamw_bf16_moments
    with pytest.raises(ValueError, match="moments: expected 'f32' or 'bf16', got 'fp8'"):
        offload.AdamW(moments="fp8")
    model = mlp(seed=9, hidden=64)
    x, y = batch(9, n=16)
    spec = offload.AdamW(lr=1e-2, weight_decay=0.01, moments="bf16")
    p0 = {k: v.detach().double().clone() for k, v in model.named_parameters()}
    ref = copy.deepcopy(model)
    adamw_bf16_moments(list(ref.parameters()), 5, lambda: F.cross_entropy(ref(x), y),
                       ref.zero_grad, lr=1e-2, weight_decay=0.01)
    m64 = copy.deepcopy(model).double()
    o64 = torch.optim.AdamW(m64.parameters(), lr=1e-2, weight_decay=0.01)
    for _ in range(5):
        o64.zero_grad()
        F.cross_entropy(m64(x.double()), y).backward()
        o64.step()
    step = offload.compile(model, (x, y), optimizer=spec, verbose=False)
    for _ in range(5):
        step(x, y)
    state = step.optimizer_state()
    moments = [k for k in state if k.endswith((".exp_avg", ".exp_avg_sq"))]
    assert len(moments) == 2 * len(p0) and all(state[k].dtype == np.uint16 for k in moments)
    sd = step.state_dict()
    d64 = {k: v.detach().double() - p0[k] for k, v in m64.named_parameters()}
    scale = 1e-3 * max(float(d.abs().max()) for d in d64.values())
    refp = dict(ref.named_parameters())
    for k in p0:
        eo = rel_err(sd[k].double() - p0[k], d64[k], scale)
        er = rel_err(refp[k].detach().double() - p0[k], d64[k], scale)
        assert eo <= 4 * max(er, 2.0 ** -9), (k, eo, er)


def test_fp16_mixed_skips_an_overflowing_step():
    """precision="fp16-mixed" scales the loss as torch.amp.GradScaler does
    (issue 29): a step whose f16 backward overflows (the scale forced to
    2^40) leaves parameters and optimizer state bit-identical, halves the
    scale and counts in Step.skipped_steps; the next steps train."""
    model = mlp(seed=5, hidden=32)
    x, y = batch(3, n=16)
    step = offload.compile(model, (x, y), optimizer=offload.AdamW(lr=1e-3),
                           precision="fp16-mixed", verbose=False)
    assert step.loss_scale == 65536.0 and step.skipped_steps == 0
    step(x, y)
    assert step.skipped_steps == 0 and step.loss_scale == 65536.0
    before_sd = {k: v.clone() for k, v in step.state_dict().items()}
    before_opt = {k: np.array(v, copy=True) for k, v in step.optimizer_state().items()}
    step.session.bind("amp.scale", np.array(2.0 ** 40, dtype=np.float32))
    step(x, y)
    assert step.skipped_steps == 1
    assert step.loss_scale == 2.0 ** 39
    for k, v in step.state_dict().items():
        assert torch.equal(v, before_sd[k]), k
    for k, v in step.optimizer_state().items():
        if not k.startswith("amp."):
            assert np.array_equal(v, before_opt[k]) and v.tobytes() == before_opt[k].tobytes(), k
    for _ in range(30):  # backs off to a finite scale, then trains
        step(x, y)
    assert step.loss_scale < 2.0 ** 39
    after = step.state_dict()
    assert any(not torch.equal(after[k], before_sd[k]) for k in after)
    assert step.skipped_steps < 31


def test_compile_argument_errors():
    x, y = batch(0)
    with pytest.raises(offload.InputError, match="loss: expected one of"):
        offload.compile(mlp(), (x, y), loss="hinge", verbose=False)
    with pytest.raises(offload.InputError, match="budget: cannot read '12 parsecs'"):
        offload.compile(mlp(), (x, y), budget="12 parsecs", verbose=False)
    with pytest.raises(offload.InputError, match="uint8"):
        offload.compile(mlp(), (x.to(torch.uint8), y), verbose=False)
    # float16 is a dtype the step takes (bf16-true/f16 models), but not into
    # an f32 model: PyTorch's own trace refuses the mixed product.
    with pytest.raises(offload.CompileError, match="same dtype"):
        offload.compile(mlp(), (x.half(), y), exporter="torchscript", verbose=False)
    with pytest.raises(offload.InputError, match="torch.nn.Module"):
        offload.compile(lambda t: t, (x, y), verbose=False)
    with pytest.raises(offload.InputError,
                       match="precision: expected one of fp32, bf16-mixed, fp16-mixed, got 'bf16'"):
        offload.compile(mlp(), (x, y), precision="bf16", verbose=False)


def test_compile_validates_arguments_as_the_tools_do(tmp_path):
    """Issue 34: a user string never becomes an option of its own, and every
    argument is checked as offload-run / offload-opt check it, before any
    work, with one of the documented exception classes."""
    x, y = batch(0)
    timeline = tmp_path / "x.json"
    with pytest.raises(offload.InputError, match="neither a built-in target"):
        offload.compile(mlp(), (x, y), budget="1MiB", target=f"h100-sxm timeline={timeline}",
                        workdir=str(tmp_path / "w"), verbose=False)
    assert not timeline.exists()
    for threads in (0, -1, 10**6, 2.5, True):
        with pytest.raises(offload.InputError, match="threads"):
            offload.compile(mlp(), (x, y), threads=threads, verbose=False)
    for device_bytes in (0, -1, "0GiB", 1 << 60):
        with pytest.raises(offload.InputError, match="device_bytes"):
            offload.compile(mlp(), (x, y), device_bytes=device_bytes, verbose=False)
    with pytest.raises(offload.InputError, match="seed"):
        offload.compile(mlp(), (x, y), seed=-1, verbose=False)
    with pytest.raises(offload.InputError, match="backend"):
        offload.compile(mlp(), (x, y), backend="tpu", verbose=False)
    afile = tmp_path / "file"
    afile.write_text("")
    with pytest.raises(offload.InputError, match="workdir: .* is not a folder"):
        offload.compile(mlp(), (x, y), workdir=str(afile), verbose=False)
    with pytest.raises(offload.InputError, match="example_inputs"):
        offload.compile(mlp(), 3, verbose=False)
    # A FIFO named as the target file blocked offload-opt in open().
    fifo = tmp_path / "fifo.json"
    os.mkfifo(fifo)
    with pytest.raises(offload.InputError, match="neither a built-in target"):
        offload.compile(mlp(), (x, y), budget="1MiB", target=str(fifo), verbose=False)
    # A target file whose path has spaces and an option-like name is one
    # quoted value, not an extra option.
    odd = tmp_path / "my dir" / "a timeline=t.json"
    odd.parent.mkdir()
    odd.write_text('{"base": "h100-sxm"}')
    step = offload.compile(mlp(), (x, y), budget=1 << 30, target=str(odd),
                           workdir=str(tmp_path / "w2"), verbose=False)
    assert step.budget_bytes == 1 << 30
    assert not (tmp_path / "my dir" / "t.json").exists()


def test_lower_runs_offload_translate_and_its_errors_are_compile_errors(tmp_path):
    """The lower stage writes the plan with offload-translate --offload-to-plan
    (not offload-opt's deprecated --convert-offload-to-plan); when it fails,
    its own message is the CompileError's, with stage "lower"."""
    x, y = batch(0)
    step = offload.compile(mlp(), (x, y), workdir=str(tmp_path / "ok"), verbose=False)
    commands = [line for line in step.log if line.startswith("$ ")]
    assert os.path.basename(commands[-1].split()[1]) == "offload-translate", commands
    assert "--offload-to-plan" in commands[-1].split()
    assert not any("--convert-offload-to-plan" in c for c in commands), commands
    # A folder where the plan file goes: the exporter refuses to replace it.
    (tmp_path / "bad" / "step.oflp").mkdir(parents=True)
    with pytest.raises(offload.CompileError) as e:
        offload.compile(mlp(), (x, y), workdir=str(tmp_path / "bad"), verbose=False)
    assert e.value.stage == "lower"
    assert e.value.message.startswith("offload-translate: error: "), e.value.message
    assert "is a directory, not a regular file" in e.value.message, e.value.message
    assert (tmp_path / "bad" / "step.oflp").is_dir()


def test_target_host_calibrates_once_into_its_file(tmp_path, monkeypatch, capfd):
    """Issue 31: target="host" reads this machine's calibrated host target
    file (offload.compiler.host_target_path()); a missing one is calibrated
    once by offload-run --calibrate, said on stderr, and the next compile
    reads the same file: the same plan, byte for byte."""
    path = tmp_path / "cache" / "offload" / "host-target.json"
    monkeypatch.setenv("OFFLOAD_HOST_TARGET", str(path))
    assert offload.compiler.host_target_path() == str(path)
    x, y = batch(0)
    free = offload.compile(mlp(), (x, y), workdir=str(tmp_path / "free"), verbose=False)
    budget = free.unplanned_arena_bytes * 3 // 4
    capfd.readouterr()
    first = offload.compile(mlp(), (x, y), budget=budget, target="host", threads=1,
                            workdir=str(tmp_path / "w1"), verbose=False)
    assert "no host target file at %s: calibrating this machine once" % path in \
        capfd.readouterr().err
    assert '"calibration_threads": 1' in path.read_text()
    second = offload.compile(mlp(), (x, y), budget=budget, target="host", threads=1,
                             workdir=str(tmp_path / "w2"), verbose=False)
    assert "calibrating" not in capfd.readouterr().err
    # (Their debug locations name each workdir.)
    planned = [open(os.path.join(s.workdir, "planned.mlir"), "rb").read()
               .replace(os.fsencode(s.workdir), b"WORKDIR") for s in (first, second)]
    assert planned[0] == planned[1]
    # XDG_CACHE_HOME, else ~/.cache, when OFFLOAD_HOST_TARGET is not set.
    monkeypatch.delenv("OFFLOAD_HOST_TARGET")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert offload.compiler.host_target_path() == str(tmp_path / "xdg" / "offload" /
                                                     "host-target.json")
    monkeypatch.setenv("XDG_CACHE_HOME", "relative")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert offload.compiler.host_target_path() == str(tmp_path / "home" / ".cache" / "offload" /
                                                     "host-target.json")


def test_non_finite_parameters_warn_as_offload_run_does():
    x, y = batch(0)
    model = mlp()
    with torch.no_grad():
        model[0].weight[1, 2] = float("nan")
    with pytest.warns(RuntimeWarning, match=r"'0.weight' holds 1 non-finite value "
                                            r"\(first: nan at element 18\)"):
        offload.compile(model, (x, y), verbose=False)


class _Branchy(nn.Module):
    """A forward that branches on a tensor's value."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(16, 4)

    def forward(self, x):
        h = self.fc(x)
        if h.sum() > 0:
            return h * 2
        return h


def test_torchscript_trace_of_value_dependent_control_flow_is_refused():
    """Issue 34: the trace kept the branch the example took and trained it
    whatever the data (loss 3.439 where PyTorch's was 1.894)."""
    x, y = batch(0)
    with pytest.raises(offload.CompileError, match="branches on a tensor's value") as e:
        offload.compile(_Branchy(), (x, y), exporter="torchscript", verbose=False)
    assert e.value.stage == "export"
    assert "torch.export" in str(e.value)


def test_parse_bytes():
    assert offload.parse_bytes("12GiB") == 12 << 30
    assert offload.parse_bytes("1.5 MiB") == 3 << 19
    assert offload.parse_bytes("2GB") == 2 * 10**9
    assert offload.parse_bytes(4096) == 4096
    for bad in ("", "-1", "0", "1 furlong", 0, -5, True):
        with pytest.raises(offload.InputError):
            offload.parse_bytes(bad)


def test_runtime_errors_are_exceptions(sgd_step, tmp_path):
    rt = offload.runtime
    with pytest.raises(offload.OffloadError, match="cannot open plan file"):
        rt.Plan.load(str(tmp_path / "missing.oflp"))
    junk = tmp_path / "junk.oflp"
    junk.write_bytes(b"\x10\x00\x00\x00not a plan at all")
    with pytest.raises(offload.OffloadError):
        rt.Plan.load(str(junk))
    _, _, step = sgd_step
    need = step.plan.device_capacity
    with pytest.raises(offload.OffloadError, match=f"device has {need - 1} bytes but the plan's "
                       f"device arena needs {need} bytes"):
        rt.Session(step.plan, "host", device_bytes=need - 1)
    with pytest.raises(offload.OffloadError):
        rt.Session(step.plan, "no-such-backend")
    s = rt.Session(step.plan, "host")
    with pytest.raises(offload.OffloadError, match="nosuch"):
        s.bind("nosuch", np.zeros(3, np.float32))
    with pytest.raises(TypeError, match="uint8"):
        s.bind("input", np.zeros((8, 16), np.uint8))
    # float16 is the runtime's f16 (uint16: bf16 bits), refused here by type.
    with pytest.raises(offload.OffloadError, match=r"expects f32\[8,16\], got f16\[8,16\]"):
        s.bind("input", np.zeros((8, 16), np.float16))
    with pytest.raises(offload.OffloadError):
        s.step()  # parameters not bound: an error, not a crash
    with pytest.raises(offload.OffloadError):
        s.loss  # no successful step yet


def test_session_emulate_link(sgd_step):
    """Session(emulate_link=B): bad rates are OffloadErrors; a valid one only delays (same loss)."""
    rt = offload.runtime
    _, _, step = sgd_step
    for bad in (-1.0, float("nan"), float("inf")):
        with pytest.raises(offload.OffloadError, match="emulatedLinkBytesPerSecond"):
            rt.Session(step.plan, "host", emulate_link=bad)
    x, y = batch(0)
    losses = []
    for link in (0.0, 1e9):
        s = rt.Session(step.plan, "host", emulate_link=link)
        for name, role in step.session.input_bindings():
            if role != "input":
                s.bind(name, step.session.get(name))
        s.bind("input", x.numpy())
        s.bind("target", y.numpy())
        s.step()
        losses.append(s.loss)
    assert losses[0] == losses[1]


def test_bindings_non_contiguous_input_is_copied_correctly(sgd_step):
    """A transposed (non-C-contiguous) array binds with its logical values."""
    _, _, step = sgd_step
    x, y = batch(0)
    xt = np.ascontiguousarray(x.numpy().T).T  # same values, Fortran order
    assert not xt.flags["C_CONTIGUOUS"]
    step.session.bind("input", xt)
    step.session.bind("target", y.numpy())
    a = step.session.bind("input", x.numpy())  # noqa: F841
    step2 = offload.runtime.Session(step.plan, "host")
    for name, role in step.session.input_bindings():
        if role != "input":
            step2.bind(name, step.session.get(name))
    step2.bind("input", xt)
    step2.bind("target", y.numpy())
    step2.step()
    step3 = offload.runtime.Session(step.plan, "host")
    for name, role in step.session.input_bindings():
        if role != "input":
            step3.bind(name, step.session.get(name))
    step3.bind("input", x.numpy())
    step3.bind("target", y.numpy())
    step3.step()
    assert step2.loss == step3.loss


def test_memory_timeline_and_plot(sgd_step):
    import matplotlib
    matplotlib.use("Agg")
    _, _, step = sgd_step
    t = step.memory_timeline()
    assert len(t["total"]) == step.plan.num_instructions
    # Summed from the plan's buffers here; the runtime measures the same peak.
    assert t["peak"] == step.planned_peak_device_bytes == step.measured_peak_device_bytes
    assert t["categories"]["parameters and state"].min() > 0
    assert [p[0] for p in t["phases"]][0] == "forward"
    fig = step.plot_memory()
    ax = fig.axes[0]
    assert ax.get_ylabel() == "live device MiB"
    assert any("measured peak" in text.get_text() for text in ax.get_legend().get_texts())


def test_session_used_from_two_threads_raises_instead_of_racing():
    """step() runs without the GIL; another thread touching the same session
    meanwhile gets an OffloadError ('another thread'), never a data race."""
    import threading
    torch.manual_seed(10)
    model = nn.Sequential(nn.Linear(512, 1024), nn.ReLU(), nn.Linear(1024, 1024), nn.ReLU(),
                          nn.Linear(1024, 10))
    x, y = torch.randn(256, 512), torch.randint(0, 10, (256,))
    step = offload.compile(model, (x, y), threads=1, verbose=False)
    step(x, y)
    s = step.session
    done, worker_errors = threading.Event(), []

    def worker():
        try:
            k = 0
            while k < 4:
                try:
                    s.step()
                    k += 1
                except offload.OffloadError as e:
                    if "another thread" not in str(e):
                        raise
        except Exception as e:  # reported below
            worker_errors.append(e)
        finally:
            done.set()

    t = threading.Thread(target=worker)
    t.start()
    busy = 0
    while not done.is_set():
        try:
            s.get("0.bias")
        except offload.OffloadError as e:
            assert "another thread" in str(e)
            busy += 1
    t.join()
    assert not worker_errors, worker_errors
    assert busy > 0
    assert isinstance(step(x, y), float)


def test_zero_copy_inputs_and_views():
    """Issue 17: contiguous inputs are borrowed (the runtime uploads from the
    caller's memory), views share the runtime's memory, copies do not."""
    model = mlp(seed=3)
    x, y = batch(5)
    step = offload.compile(model, (x, y), loss="cross_entropy", optimizer=offload.SGD(lr=0.1),
                           return_gradients=True)
    s = step.session
    # Inputs: a contiguous torch tensor reaches the runtime without a copy
    # (torch -> numpy shares memory; the binding borrows the array).
    loss0 = step(x, y)
    assert s.input_data_ptr("input") == x.data_ptr()
    assert s.input_data_ptr("target") == y.data_ptr()
    # The borrowed array is read at each step: changed in place, the next
    # step sees it (the same as binding the new values).
    x2 = x * 0.5
    x.mul_(0.5)
    ref = offload.runtime.Session(step.plan, "host")
    for name, role in s.input_bindings():
        if role != "input":
            ref.bind(name, s.get(name))
    ref.bind("input", x2.numpy().copy())
    ref.bind("target", y.numpy().copy())
    s.step()
    ref.step()
    assert s.loss == ref.loss and s.loss != loss0
    # A non-contiguous input is copied (the runtime needs C order).
    xt = np.asfortranarray(x2.numpy())
    s.bind("input", xt)
    assert s.input_data_ptr("input") != xt.ctypes.data
    # A parameter is copied into the store (the store owns its values).
    w = s.get("0.weight")
    s.bind("0.weight", w)
    assert not np.shares_memory(s.get_view("0.weight"), w)
    # Views: no copy; get() is a copy.
    v = s.get_view("0.weight")
    assert np.shares_memory(v, s.get_view("0.weight"))
    assert not np.shares_memory(v, s.get("0.weight"))
    assert not v.flags["WRITEABLE"]
    sd = step.state_dict(copy=False)
    assert sd["0.weight"].data_ptr() == v.ctypes.data
    sd_copy = step.state_dict()
    assert sd_copy["0.weight"].data_ptr() != v.ctypes.data
    # The view follows the store: the next step commits in place (host).
    before = np.array(v)
    s.bind("input", x2.numpy())
    s.step()
    assert np.array_equal(v, s.get("0.weight")) and not np.array_equal(v, before)
    # Gradient views keep their step's values; they stay valid after the
    # session is gone.
    g = step.gradients(copy=False)["0.weight"]
    g_copy = step.gradients()["0.weight"]
    assert g.data_ptr() == s.output_view("grad:0.weight").ctypes.data
    assert torch.equal(g, g_copy)
    s.step()
    assert torch.equal(g, g_copy)
    del step, s, sd
    import gc
    gc.collect()
    assert torch.equal(g, g_copy) and np.isfinite(v).all()


# A rank of test_data_parallel_two_ranks: run by a subprocess with RANK,
# WORLD_SIZE and OFFLOAD_RENDEZVOUS set, as torchrun would (its argument: the
# output file).
DATA_PARALLEL_RANK = r"""
import sys, os, numpy as np, torch, offload
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))
g = torch.Generator().manual_seed(1)
x, y = torch.randn(16, 16, generator=g), torch.randint(0, 4, (16,), generator=g)
r = int(os.environ["RANK"])
xs, ys = x[8 * r:8 * (r + 1)], y[8 * r:8 * (r + 1)]
step = offload.compile(model, (xs, ys), optimizer=offload.SGD(lr=0.1, momentum=0.9),
                       data_parallel=True, bucket_bytes=256, exporter="torchscript", verbose=False,
                       zero=int(os.environ.get("ZERO", "0")))
losses = [step(xs, ys) for _ in range(2)]
np.savez(sys.argv[1], losses=np.array(losses),
         **{k: v.numpy() for k, v in step.state_dict().items()})
"""


def test_data_parallel_one_rank_is_bit_identical():
    """data_parallel=True without a launcher's RANK: one rank, every bucket's
    mean is itself, the steps bit-identical to data_parallel=False."""
    model = mlp(3)
    x, y = batch(3)
    opt = offload.SGD(lr=0.1, momentum=0.9)
    plain = offload.compile(copy.deepcopy(model), (x, y), optimizer=opt, verbose=False)
    dp = offload.compile(copy.deepcopy(model), (x, y), optimizer=opt, data_parallel=True,
                         bucket_bytes=512, verbose=False)
    assert [plain(x, y) for _ in range(3)] == [dp(x, y) for _ in range(3)]
    for k, v in plain.state_dict().items():
        assert torch.equal(v, dp.state_dict()[k]), k
    assert dp.measured_peak_device_bytes == dp.planned_peak_device_bytes
    with pytest.raises(offload.InputError):
        offload.compile(copy.deepcopy(model), (x, y), optimizer=opt, data_parallel=True,
                        bucket_bytes=0, verbose=False)


def test_zero1_one_rank_is_bit_identical():
    """zero=1 without a launcher: world size 1, the losses and parameters
    bit-identical to data_parallel=False; the optimizer state is this rank's
    (here the whole) shards, "zero1.bucket<K>.momentum_buffer"."""
    model = mlp(3)
    x, y = batch(3)
    opt = offload.SGD(lr=0.1, momentum=0.9)
    plain = offload.compile(copy.deepcopy(model), (x, y), optimizer=opt, verbose=False)
    z = offload.compile(copy.deepcopy(model), (x, y), optimizer=opt, data_parallel=True,
                        bucket_bytes=512, zero=1, verbose=False)
    assert [plain(x, y) for _ in range(3)] == [z(x, y) for _ in range(3)]
    for k, v in plain.state_dict().items():
        assert torch.equal(v, z.state_dict()[k]), k
    state = z.optimizer_state()
    assert any(k.startswith("zero1.bucket") and k.endswith(".momentum_buffer") for k in state)
    assert z.measured_peak_device_bytes == z.planned_peak_device_bytes
    for bad in (dict(zero=2, data_parallel=True), dict(zero=1), dict(zero=True, data_parallel=True)):
        with pytest.raises(offload.InputError):
            offload.compile(copy.deepcopy(model), (x, y), optimizer=opt, verbose=False, **bad)


@pytest.mark.parametrize("zero", [0, 1])
def test_data_parallel_two_ranks(tmp_path, zero):
    """Two processes with RANK/WORLD_SIZE (as torchrun sets them), each
    compiling the model at its half of the batch with data_parallel=True:
    both end with the same parameters, bit for bit, and with the mean of the
    two halves' gradients, i.e. PyTorch's step on the whole batch (judged by
    the float64-oracle rule; docs/data_parallel.md has the DDP oracle)."""
    import subprocess
    import sys
    procs = []
    for r in range(2):
        env = dict(os.environ, RANK=str(r), WORLD_SIZE="2", ZERO=str(zero),
                   OFFLOAD_RENDEZVOUS="file:" + str(tmp_path / "rdzv"),
                   OFFLOAD_COLLECTIVE_TIMEOUT="60")
        procs.append(subprocess.Popen([sys.executable, "-c", DATA_PARALLEL_RANK,
                                       str(tmp_path / f"rank{r}.npz")], env=env,
                                      stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
    outs = [p.communicate(timeout=300)[0] for p in procs]
    assert all(p.returncode == 0 for p in procs), "\n".join(outs)
    a, b = (dict(np.load(tmp_path / f"rank{r}.npz")) for r in range(2))
    for k in a:
        if k != "losses":
            assert np.array_equal(a[k], b[k]), k
    # The whole batch in one process: mean loss over 16 = the mean of the
    # two ranks' mean losses over 8, and the same update.
    refs = {}
    for dtype in (torch.float32, torch.float64):
        torch.manual_seed(0)
        model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4)).to(dtype)
        g = torch.Generator().manual_seed(1)
        x, y = torch.randn(16, 16, generator=g).to(dtype), torch.randint(0, 4, (16,), generator=g)
        o = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
        for _ in range(2):
            o.zero_grad()
            F.cross_entropy(model(x), y).backward()
            o.step()
        refs[dtype] = {k: v.detach().numpy() for k, v in model.state_dict().items()}
    v = judge_tensors({k: a[k] for k in refs[torch.float64]}, refs[torch.float32],
                      refs[torch.float64])
    assert v.ok, str(v)


@pytest.mark.parametrize("k, opt", [(2, "sgd"), (4, "adamw")])
def test_micro_batches_match_torch_accumulation_loop(exporter, k, opt):
    """offload.compile(micro_batches=K): each step is PyTorch's accumulation
    loop over K slices of the batch, judged against its float64 run."""
    model = mlp(seed=5)
    spec = (offload.SGD(lr=0.1, momentum=0.9) if opt == "sgd"
            else offload.AdamW(lr=1e-2, weight_decay=0.05))
    batches = [batch(s, n=16) for s in range(3)]
    runs = torch_runs(model, spec, batches, micro_batches=k)
    step = offload.compile(model, batches[0], loss="cross_entropy", optimizer=spec,
                           exporter=exporter, micro_batches=k, verbose=False)
    ours = [step(x, y) for x, y in batches]
    assert_like_float64(ours, step.state_dict(), runs)


def test_micro_batches_refusals(exporter):
    x, y = batch(0, n=6)
    with pytest.raises(offload.InputError, match="micro_batches: expected an int >= 1"):
        offload.compile(mlp(), (x, y), micro_batches=0, exporter=exporter, verbose=False)
    with pytest.raises(offload.CompileError, match="is 6, not divisible by 4"):
        offload.compile(mlp(), (x, y), micro_batches=4, exporter=exporter, verbose=False)
    torch.manual_seed(2)
    bn = nn.Sequential(nn.Linear(16, 24), nn.BatchNorm1d(24), nn.ReLU(), nn.Linear(24, 4))
    with pytest.raises(offload.CompileError, match="batch norm in training mode"):
        offload.compile(bn, (x, y), micro_batches=2, exporter=exporter, verbose=False)
