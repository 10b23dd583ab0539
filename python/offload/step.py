"""offload.Step: a compiled training step bound to a runtime session."""
import collections

import numpy as np

from .errors import InputError

# Plan buffer roles -> the categories of the memory figure.
_CATEGORIES = [
    ("parameters and state", ("parameter", "state")),
    ("optimizer state", ("optimizer_state",)),
    ("gradients", ("gradient",)),
    ("activations and temporaries", ("temporary",)),
    ("inputs, outputs, constants", ("input", "output", "constant")),
    ("workspace", ("workspace",)),
]


def _numpy(value, what):
    """A CPU numpy view of a torch tensor (no copy for a contiguous CPU
    tensor), or the array itself. A bfloat16 tensor becomes its bits as
    uint16 (numpy has no bfloat16; the bindings read uint16 as bf16)."""
    try:
        import torch
        if isinstance(value, torch.Tensor):
            t = value.detach().cpu()
            if t.dtype == torch.bfloat16:
                return t.contiguous().view(torch.int16).numpy().view(np.uint16)
            return t.numpy()
    except ImportError:  # pragma: no cover
        pass
    if isinstance(value, np.ndarray):
        return value
    raise InputError(f"{what}: expected a torch.Tensor or numpy array, got {type(value).__name__}")


def _torch_view(arr):
    """A torch tensor sharing the memory of `arr` (a runtime view or copy;
    torch warns about non-writable arrays; a view is documented as
    read-only). uint16 arrays are bf16 bits (the bindings' convention) and
    come back as torch.bfloat16."""
    import torch
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        if arr.dtype == np.uint16:
            return torch.from_numpy(arr.view(np.int16)).view(torch.bfloat16)
        return torch.from_numpy(arr)


class Step:
    """One compiled training step (made by offload.compile).

    step(*inputs) -> float     runs forward, backward and the optimizer update
                               on the runtime; parameters stay in its store.
    state_dict()               the trained parameters and buffers as torch
                               tensors under their PyTorch names.
    load_state_dict(sd)        replaces them (e.g. to restart from a checkpoint).
    report                     the planner's decision table (str).
    memory_timeline()          live device bytes per instruction, by category.
    plot_memory()              that timeline as a matplotlib figure.
    """

    def __init__(self, model, session, plan, input_names, initial_state, seed, report,
                 budget_bytes, unplanned_arena_bytes, device_bytes, times, workdir, tmpdir,
                 log, target, optimizer, loss, extra_state=None, tied=None, exporter=None,
                 keywords=False):
        """initial_state: the model's state_dict (its keys and order are
        state_dict()'s); extra_state: non-persistent buffers (bound when the
        step reads them, never in state_dict()); tied: {key: [keys of the
        same tensor]} for tied weights (compiler._tied_names)."""
        self._model_keys = list(initial_state.keys())
        self._initial = initial_state
        self._extra = dict(extra_state or {})
        self.exporter = exporter
        self.session = session
        self.plan = plan
        self.input_names = list(input_names)
        self.report = report
        self.budget_bytes = budget_bytes
        self.unplanned_arena_bytes = unplanned_arena_bytes
        self.device_bytes = device_bytes
        self.stage_seconds = dict(times)
        self.workdir = workdir
        self._tmpdir = tmpdir  # removed with the Step
        self.log = log
        self.target = target
        self.optimizer = optimizer
        self.loss_name = loss
        # Compiled from keyword inputs: step() takes them by keyword.
        self.keywords = keywords
        self.steps_run = 0
        roles = dict(session.input_bindings())
        self._store_names = [n for n, r in roles.items()
                             if r in ("parameter", "state", "optimizer_state")]
        self._inputs = [n for n, r in roles.items() if r == "input"]
        missing_inputs = [n for n in self.input_names if n not in roles]
        if missing_inputs:
            raise InputError("the compiled step has no input named " +
                             ", ".join(repr(n) for n in missing_inputs) +
                             f" (its inputs: {', '.join(self._inputs)})")
        # Tied weights: one tensor under several state_dict keys. The step
        # must hold it once (the importers keep one name); state_dict()
        # gives its trained value under every key. Two step parameters of
        # one tensor would train apart: refused rather than silently wrong.
        tied = tied or {}
        store = set(self._store_names)
        self._alias = {}
        for k, group in tied.items():
            held = [g for g in group if g in store]
            if len(held) > 1:
                raise InputError("tied weights " + " and ".join(repr(g) for g in held) +
                                 " (one tensor under several names) are separate parameters "
                                 "of the compiled step, which would train them apart")
            if held and k not in store:
                self._alias[k] = held[0]
        for name, role in roles.items():
            if role in ("parameter", "state"):
                if name in initial_state:
                    self._bind_value(name, initial_state[name])
                elif name in self._extra:
                    self._bind_value(name, self._extra[name])
                else:
                    raise InputError(f"the compiled step needs '{name}', which the model's "
                                     "state_dict and buffers do not have")
            elif role == "optimizer_state":
                session.bind_zeros(name)
            elif name == "rng_seed":
                session.bind(name, np.array(seed, dtype=np.int64))

    # -- running ------------------------------------------------------------
    def _bind_value(self, name, value, what=None):
        arr = _numpy(value, what or name)
        dtype, shape = self.session.input_type(name)
        if arr.dtype != np.dtype(dtype) or tuple(arr.shape) != tuple(shape):
            raise InputError(f"{what or name}: got {arr.dtype}{list(arr.shape)}, the compiled "
                             f"step takes {dtype}{list(shape)}" +
                             (" (compile again for another shape)" if what else ""))
        self.session.bind(name, arr)

    def __call__(self, *inputs, **kw_inputs):
        """Runs one training step on `inputs` (same count, dtypes and shapes
        as compile's example_inputs; torch tensors or numpy arrays), or on
        keyword inputs (`step(input_ids=..., labels=...)`, or a dict as the
        one argument) for a step compiled from keyword inputs, and returns
        the loss as a float. InputError for a wrong count, name, dtype or
        shape; OffloadError when the runtime fails the step (the parameters
        are then unchanged)."""
        if len(inputs) == 1 and not kw_inputs and isinstance(inputs[0], dict):
            kw_inputs, inputs = dict(inputs[0]), ()
        if kw_inputs:
            if inputs:
                raise InputError("step() takes its inputs by position or by keyword, not both")
            if set(kw_inputs) != set(self.input_names):
                missing = [n for n in self.input_names if n not in kw_inputs]
                extra = [n for n in kw_inputs if n not in self.input_names]
                raise InputError(f"step() takes the keyword inputs "
                                 f"{', '.join(self.input_names)}" +
                                 (f"; missing {', '.join(missing)}" if missing else "") +
                                 (f"; unexpected {', '.join(extra)}" if extra else ""))
            inputs = tuple(kw_inputs[n] for n in self.input_names)
        if len(inputs) != len(self.input_names):
            raise InputError(f"step() takes {len(self.input_names)} inputs "
                             f"({', '.join(self.input_names)}), got {len(inputs)}")
        for i, (name, value) in enumerate(zip(self.input_names, inputs)):
            self._bind_value(name, value, what=f"step() input {i} ('{name}')")
        self.session.step()
        self.steps_run += 1
        return self.session.loss

    @property
    def measured_peak_device_bytes(self):
        """Peak live device bytes the runtime measured over all steps."""
        return self.session.measured_peak_device_bytes

    @property
    def planned_peak_device_bytes(self):
        """Peak live device bytes the plan predicts (equals the measured peak)."""
        return self.plan.predicted_peak_device_bytes

    # -- parameters ---------------------------------------------------------
    def state_dict(self, copy=True):
        """An OrderedDict of torch tensors in the model's state_dict order and
        names (PyTorch's fully qualified names, e.g. fc1.weight,
        bn.running_mean, on both exporters): the store's committed values for
        what the step trains or updates (under every name of a tied weight),
        the model's values (as at compile) for the rest.

        copy=False: the store's values are not copied; each tensor views the
        runtime's parameter store (read-only memory: do not write to it).
        Lifetime rule: a view is valid memory for as long as it exists, but
        its values are those of the store only until the next step() or
        load_state_dict(); on the host backend the next step writes the new
        values into the same memory (the view follows them), a
        load_state_dict replaces it (the view keeps the old bytes). Clone a
        tensor to keep a snapshot."""
        import torch
        out = collections.OrderedDict()
        store = set(self._store_names)
        for k in self._model_keys:
            name = self._alias.get(k, k)
            if name in store and not copy:
                out[k] = _torch_view(self.session.get_view(name))
            elif name in store:
                out[k] = _torch_view(self.session.get(name))
            else:
                out[k] = self._initial[k].clone()
        return out

    def load_state_dict(self, state_dict, strict=True):
        """Binds new values to the step's parameters and state (torch tensors
        or numpy arrays under the model's names). strict: the keys must be
        exactly the model's (InputError lists missing and unexpected ones).
        A tied weight takes the value under the name the step holds it by.
        Optimizer state is kept."""
        keys = set(state_dict.keys())
        model = set(self._model_keys)
        if strict and keys != model:
            raise InputError("load_state_dict: missing keys: " +
                             (", ".join(sorted(model - keys)) or "none") +
                             "; unexpected keys: " + (", ".join(sorted(keys - model)) or "none"))
        unknown = keys - model
        if unknown:
            raise InputError("load_state_dict: unexpected keys: " + ", ".join(sorted(unknown)))
        store = set(self._store_names)
        for k, v in state_dict.items():
            if k in store:
                self._bind_value(k, v, what=f"load_state_dict['{k}']")
            elif k in self._alias:
                if self._alias[k] not in state_dict:  # else that value is bound
                    self._bind_value(self._alias[k], v, what=f"load_state_dict['{k}']")
            else:
                self._initial[k] = v.clone() if hasattr(v, "clone") else v

    def gradients(self, copy=True):
        """The parameter gradients of the last step as torch tensors by
        parameter name (float32, the parameter's shape): the gradient of the
        mean loss, before the optimizer used it. Needs
        compile(..., return_gradients=True); InputError otherwise.

        copy=False: the tensors view the runtime's copies of the gradients
        (read-only; no copy); each step reads its gradients into new memory,
        so a view keeps the values of the step it came from for as long as
        it exists. A tied weight's gradient is given under each of its
        names (one tensor, as named_parameters() gives it once under either)."""
        import torch
        names = [n for n in self.session.output_names() if n.startswith("grad:")]
        if not names:
            raise InputError("gradients(): compile with return_gradients=True to get them")
        if not self.steps_run:
            raise InputError("gradients(): no step has run yet")
        if not copy:
            out = collections.OrderedDict(
                (n[len("grad:"):], _torch_view(self.session.output_view(n))) for n in names)
        else:
            out = collections.OrderedDict(
                (n[len("grad:"):], _torch_view(self.session.output(n))) for n in names)
        for k, held in self._alias.items():
            if held in out and k not in out:
                out[k] = out[held]
        return out

    @property
    def skipped_steps(self):
        """Steps whose update was skipped because their gradients held an inf
        or NaN (fp16-mixed's loss scaling, docs/precision.md); the store's
        `amp.skipped_steps`. 0 for a step without loss scaling."""
        roles = dict(self.session.input_bindings())
        if "amp.skipped_steps" not in roles:
            return 0
        return int(self.session.get("amp.skipped_steps"))

    @property
    def loss_scale(self):
        """The current fp16 loss scale (GradScaler.get_scale()), or None for a
        step without loss scaling. A fresh store holds 0, which stands for
        the initial scale (2^16)."""
        roles = dict(self.session.input_bindings())
        if "amp.scale" not in roles:
            return None
        s = float(self.session.get("amp.scale"))
        return s if s != 0.0 else 65536.0

    def optimizer_state(self):
        """The optimizer state (momentum buffers, moments, step counter) as
        numpy arrays by the store's names."""
        roles = dict(self.session.input_bindings())
        return {n: self.session.get(n) for n, r in roles.items() if r == "optimizer_state"}

    # -- memory -------------------------------------------------------------
    def memory_timeline(self):
        """Live device bytes at every instruction of the plan, by category.

        Returns a dict: "points" (int array [n], instruction indices),
        "categories" (dict name -> int64 array [n], bytes), "total" (int64
        [n]), "phases" [(name, first, last)], "peak" (bytes). A buffer counts
        from its first to its last instruction (inclusive) as the runtime
        allocates it, so max(total) is the plan's predicted peak, which the
        runtime measures. (The planner's JSON timeline will replace this
        figure's source with its own categories, saved values included.)"""
        n = max(self.plan.num_instructions, 1)
        cats = {name: np.zeros(n, dtype=np.int64) for name, _ in _CATEGORIES}
        role_cat = {r: name for name, roles in _CATEGORIES for r in roles}
        buffers = self.plan.buffers
        # A device copy of a host buffer (a prefetched host parameter, its
        # optimizer state, an offloaded activation) counts as what it copies.
        copied_role = {}
        for ins in self.plan.instructions:
            if ins["op"] == "offload.to_device":
                src = buffers[ins["inputs"][0]]
                for o in ins["outputs"]:
                    copied_role[o] = src["role"]
        for b in buffers:
            if b["space"] != "device" or b["alias_of"] >= 0:
                continue
            role = b["role"]
            if role == "temporary" and b["id"] in copied_role:
                role = copied_role[b["id"]]
            cat = role_cat.get(role, "activations and temporaries")
            cats[cat][b["live_first"]:b["live_last"] + 1] += b["size"]
        total = sum(cats.values())
        return {"points": np.arange(n), "categories": cats, "total": total,
                "phases": self.plan.phases, "peak": int(total.max())}

    def plot_memory(self, ax=None, title=None):
        """A stacked plot of memory_timeline() (matplotlib), with the budget,
        the planned peak and the measured peak; returns the Figure."""
        if ax is None:
            import matplotlib.pyplot as plt
            fig, ax = plt.subplots(figsize=(10, 4.5))
        else:
            fig = ax.figure
        t = self.memory_timeline()
        mib = float(1 << 20)
        labels = [k for k in t["categories"] if t["categories"][k].any()]
        ax.stackplot(t["points"], *[t["categories"][k] / mib for k in labels], labels=labels,
                     step="post", alpha=0.8)
        if self.budget_bytes is not None:
            ax.axhline(self.budget_bytes / mib, color="red", linestyle="--",
                       label=f"budget {self.budget_bytes / mib:.2f} MiB")
        if self.unplanned_arena_bytes:
            ax.axhline(self.unplanned_arena_bytes / mib, color="gray", linestyle=":",
                       label=f"unplanned arena {self.unplanned_arena_bytes / mib:.2f} MiB")
        if self.steps_run:
            ax.axhline(self.measured_peak_device_bytes / mib, color="black", linewidth=0.8,
                       label=f"measured peak {self.measured_peak_device_bytes / mib:.2f} MiB")
        for name, first, _ in t["phases"]:
            ax.axvline(first, color="k", alpha=0.2)
            ax.text(first, ax.get_ylim()[1] * 0.98, " " + name, va="top", fontsize=8)
        ax.set_xlabel("instruction (program order)")
        ax.set_ylabel("live device MiB")
        ax.set_title(title or "device memory per instruction")
        ax.legend(loc="upper right", fontsize=8)
        return fig

    def __repr__(self):
        return (f"<offload.Step inputs={self.input_names} budget={self.budget_bytes} "
                f"planned_peak={self.planned_peak_device_bytes} backend={self.session.backend}>")
