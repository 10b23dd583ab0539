"""Optimizers of offload.compile, with torch.optim's meaning of every field.

The update runs inside the compiled step (its optimizer phase); the state
(momentum buffers, AdamW moments, the step counter) lives in the runtime's
parameter store and starts at zero, as torch.optim's does.
"""


class Optimizer:
    """Base class; `pass_options()` is the --offload-autodiff option string."""

    def pass_options(self):  # pragma: no cover - abstract
        raise NotImplementedError


def _number(name, value, low=None):
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"{name}: expected a number, got {value!r}")
    if low is not None and value < low:
        raise ValueError(f"{name}: must be >= {low}, got {value!r}")
    return float(value)


class SGD(Optimizer):
    """torch.optim.SGD: lr, momentum, dampening, weight_decay (L2), nesterov."""

    def __init__(self, lr, momentum=0.0, dampening=0.0, weight_decay=0.0, nesterov=False):
        self.lr = _number("lr", lr, 0.0)
        self.momentum = _number("momentum", momentum, 0.0)
        self.dampening = _number("dampening", dampening)
        self.weight_decay = _number("weight_decay", weight_decay, 0.0)
        self.nesterov = bool(nesterov)
        if self.nesterov and (self.momentum <= 0 or self.dampening != 0):
            raise ValueError("SGD: nesterov needs momentum > 0 and dampening 0 (as torch.optim)")

    def pass_options(self):
        return (f"optimizer=sgd lr={self.lr!r} momentum={self.momentum!r} "
                f"dampening={self.dampening!r} weight-decay={self.weight_decay!r} "
                f"nesterov={'true' if self.nesterov else 'false'}")

    def torch(self, params):
        """The same optimizer in torch.optim, over `params` (for comparisons)."""
        import torch
        return torch.optim.SGD(params, lr=self.lr, momentum=self.momentum,
                               dampening=self.dampening, weight_decay=self.weight_decay,
                               nesterov=self.nesterov)

    def __repr__(self):
        return (f"SGD(lr={self.lr}, momentum={self.momentum}, dampening={self.dampening}, "
                f"weight_decay={self.weight_decay}, nesterov={self.nesterov})")


class AdamW(Optimizer):
    """torch.optim.AdamW: lr, betas, eps, weight_decay (decoupled).

    moments: "f32" (default, as torch.optim keeps them for f32 parameters)
    or "bf16": exp_avg and exp_avg_sq stored in bf16, computed in f32 and
    rounded to nearest even after each update (DeepSpeed's and torchtitan's
    option; 4 bytes less per parameter; docs/precision.md). Step.
    optimizer_state() then gives them as numpy uint16 (their bits). torch()
    is still torch.optim.AdamW (whose moments are the parameters' type);
    offload.testing.adamw_bf16_moments is the bf16-moment reference."""

    def __init__(self, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2,
                 moments="f32"):
        self.lr = _number("lr", lr, 0.0)
        if len(betas) != 2:
            raise ValueError(f"betas: expected two numbers, got {betas!r}")
        self.betas = (_number("betas[0]", betas[0], 0.0), _number("betas[1]", betas[1], 0.0))
        self.eps = _number("eps", eps, 0.0)
        self.weight_decay = _number("weight_decay", weight_decay, 0.0)
        if moments not in ("f32", "bf16"):
            raise ValueError(f"moments: expected 'f32' or 'bf16', got {moments!r}")
        self.moments = moments

    def pass_options(self):
        return (f"optimizer=adamw lr={self.lr!r} beta1={self.betas[0]!r} "
                f"beta2={self.betas[1]!r} eps={self.eps!r} weight-decay={self.weight_decay!r} "
                f"moments={self.moments}")

    def torch(self, params):
        import torch
        return torch.optim.AdamW(params, lr=self.lr, betas=self.betas, eps=self.eps,
                                 weight_decay=self.weight_decay)

    def __repr__(self):
        return (f"AdamW(lr={self.lr}, betas={self.betas}, eps={self.eps}, "
                f"weight_decay={self.weight_decay}"
                + (f", moments={self.moments!r})" if self.moments != "f32" else ")"))
