"""offload: train a PyTorch model under a device-memory budget in bytes.

    import offload
    step = offload.compile(model, (x, y), loss="cross_entropy",
                           optimizer=offload.SGD(lr=0.1, momentum=0.9),
                           budget="12GiB", target="h100-sxm")
    for x, y in loader:
        loss = step(x, y)
    model.load_state_dict(step.state_dict())

docs/python.md documents the API (shapes, dtypes, units, errors).
"""
from .errors import BudgetError, CompileError, InputError, OffloadError
from .compiler import compile, parse_bytes
from .optim import SGD, AdamW
from .step import Step
from . import _tools

runtime = _tools.runtime

__all__ = ["compile", "parse_bytes", "SGD", "AdamW", "Step", "OffloadError", "CompileError",
           "BudgetError", "InputError", "runtime"]
