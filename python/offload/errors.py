"""Exceptions of the offload package.

OffloadError          every error of the package and its runtime (a RuntimeError)
  CompileError        a compiler stage failed (export, import, autodiff, plan, lower);
                      .stage names it, the message carries the tool's own message
    BudgetError       the planner cannot fit the budget; .budget_bytes and
                      .smallest_reachable_bytes (the number to ask for instead)
  InputError          arguments of compile() or step() are wrong (also a ValueError):
                      the message names the argument, expected and given dtype/shape
"""
try:
    import _offload_runtime
except ImportError as e:  # pragma: no cover - depends on the build
    raise ImportError(
        "offload: the runtime extension _offload_runtime is not importable (" + str(e) +
        "); build it with scripts/setup.sh and put BUILD/python on PYTHONPATH "
        "(docs/python.md)") from e

# Raised by the runtime extension itself (bad plan, bind mismatch, failed step).
OffloadError = _offload_runtime.OffloadError


class CompileError(OffloadError):
    """A stage of offload.compile failed. `stage` is export, import, autodiff,
    plan or lower; `message` the tool's error text (unsupported ops with their
    source lines, the planner's smallest reachable arena, ...)."""

    def __init__(self, stage, message):
        self.stage = stage
        self.message = message
        super().__init__(f"offload.compile: {stage} failed: {message}")


class BudgetError(CompileError):
    """The budget is below the smallest device arena the planner can reach.
    `budget_bytes` is what was asked, `smallest_reachable_bytes` what the
    planner reached (a budget of that many bytes succeeds), or None when the
    planner's message did not give it."""

    def __init__(self, message, budget_bytes, smallest_reachable_bytes):
        self.budget_bytes = budget_bytes
        self.smallest_reachable_bytes = smallest_reachable_bytes
        super().__init__("plan", message)


class InputError(OffloadError, ValueError):
    """An argument has the wrong type, dtype or shape (message names which)."""
