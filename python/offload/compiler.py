"""offload.compile: a torch.nn.Module and example inputs -> a training Step.

Stages (one progress line each, with its wall time):
  export    PyTorch 2.x: torch.export.export(model.train(), forward inputs) and
            torch.export.save -> model.pt2; PyTorch 1.x (or exporter="torchscript"):
            torch.jit.trace(model.train(), forward inputs) -> model.pt
  import    offload-import model.pt2|model.pt --input NAME=DIMSxDTYPE ... --loss LOSS
  autodiff  offload-opt --offload-autodiff=OPTIMIZER --offload-memory-report
  plan      offload-opt --offload-plan-memory="budget=B target=T report=..."
            (only when a budget is given)
  lower     offload-translate --offload-to-plan -> step.oflp, loaded by the runtime
The plan and the intermediate files stay in Step.workdir.
"""
import contextlib
import copy
import inspect
import logging
import json
import os
import math
import re
import subprocess
import sys
import tempfile
import time
import warnings

from . import _tools
from .errors import BudgetError, CompileError, InputError
from .optim import SGD, AdamW, Optimizer

LOSSES = ("cross_entropy", "nll", "mse")
# offload-autodiff precision= (Lightning's names; docs/precision.md).
PRECISIONS = ("fp32", "bf16-mixed", "fp16-mixed")
# compile's default loss: "cross_entropy" for positional inputs (the last is
# the target), the model's own (None) for keyword inputs.
AUTO_LOSS = "auto"
# The planner's built-in targets (offload-opt --offload-plan-memory target=).
TARGETS = ("h100-sxm", "h100-pcie", "a100-80g", "a100-40g", "l4", "rtx-4090", "host")
# offload-run's bounds: --threads 1..1024, byte counts up to 2^48.
MAX_THREADS = 1024
MAX_BYTES = 1 << 48


def _option_value(what, value):
    """`value` as one value of a pass option (key="value"): the tools'
    options are a space-separated list, so a value is always quoted, and one
    that cannot be quoted (a double quote, a control character) is refused.
    User strings are never pasted into the option list as they are."""
    if not isinstance(value, str) or not value:
        raise InputError(f"{what}: expected a non-empty string, got {value!r}")
    if '"' in value or any(ord(c) < 32 for c in value):
        raise InputError(f"{what}: {value!r} holds a double quote or a control character, "
                         "which the tools' option syntax cannot carry")
    return '"' + value + '"'


def _check_target(target):
    """A built-in target name, or the path of an existing regular .json file
    (the planner's target file). InputError otherwise: a string such as
    "h100-sxm timeline=x.json" is neither."""
    if isinstance(target, os.PathLike):
        target = os.fspath(target)
    if not isinstance(target, str):
        raise InputError(f"target: expected a target name or a .json file, got {target!r}")
    if target in TARGETS:
        return target
    if target.endswith(".json") and os.path.isfile(target):
        _option_value("target", target)
        return target
    raise InputError(f"target: {target!r} is neither a built-in target ({', '.join(TARGETS)}) "
                     "nor an existing .json target file (docs/planner.md)")


def host_target_path():
    """Where offload-opt's target=host reads this machine's calibrated host
    target (docs/planner.md, "The host target"), as the compiler looks for it:
    $OFFLOAD_HOST_TARGET when set and not empty, else
    $XDG_CACHE_HOME/offload/host-target.json (an absolute XDG_CACHE_HOME),
    else ~/.cache/offload/host-target.json."""
    env = os.environ.get("OFFLOAD_HOST_TARGET")
    if env:
        return env
    cache = os.environ.get("XDG_CACHE_HOME", "")
    if not cache.startswith("/"):
        cache = os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(cache, "offload", "host-target.json")


def ensure_host_target(threads=None, log=None):
    """The host target file's path (host_target_path()), calibrated first when
    it does not exist: `offload-run --calibrate PATH --threads THREADS` (a few
    seconds, said on stderr; the folder is created). Later compiles, and
    offload-opt target=host from the shell, read the same file, so plans for
    target=host are the same on every run. CompileError("plan", ...) when the
    calibration fails."""
    path = host_target_path()
    if os.path.isfile(path):
        return path
    threads = _check_threads(threads)
    print(f"offload: no host target file at {path}: calibrating this machine once with "
          f"{threads} thread(s) (offload-run --calibrate; a few seconds)", file=sys.stderr)
    folder = os.path.dirname(os.path.abspath(path))
    try:
        os.makedirs(folder, exist_ok=True)
    except OSError as e:
        raise CompileError("plan", f"cannot create {folder} for the host target file: {e}; "
                                   "set OFFLOAD_HOST_TARGET to a writable path") from None
    _run("plan", [_tools.tool("offload-run"), "--calibrate", path, "--threads", str(threads)],
         log if log is not None else [])
    return path


def _check_threads(threads):
    """None (all cores, at most MAX_THREADS) or an int in [1, MAX_THREADS],
    as offload-run --threads."""
    if threads is None:
        return min(os.cpu_count() or 1, MAX_THREADS)
    if isinstance(threads, bool) or not isinstance(threads, int):
        raise InputError(f"threads: expected an int in [1, {MAX_THREADS}], got {threads!r}")
    if not 1 <= threads <= MAX_THREADS:
        raise InputError(f"threads: {threads} is not in [1, {MAX_THREADS}] (offload-run's "
                         "--threads bounds)")
    return threads


def _check_seed(seed):
    """An int in [0, 2^63 - 1], as offload-run --seed."""
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < (1 << 63):
        raise InputError(f"seed: expected an int in [0, 2^63 - 1], got {seed!r}")
    return seed


def _check_workdir(workdir):
    """None, or a folder path (made when missing): InputError when it names a
    file or cannot be made."""
    if workdir is None:
        return None
    if isinstance(workdir, os.PathLike):
        workdir = os.fspath(workdir)
    if not isinstance(workdir, str) or not workdir:
        raise InputError(f"workdir: expected a folder path, got {workdir!r}")
    _option_value("workdir", workdir)
    if os.path.exists(workdir) and not os.path.isdir(workdir):
        raise InputError(f"workdir: {workdir!r} exists and is not a folder")
    try:
        os.makedirs(workdir, exist_ok=True)
    except OSError as e:
        raise InputError(f"workdir: cannot make {workdir!r}: {e}") from None
    return workdir


def _warn_non_finite(state):
    """Warns about every floating tensor of `state` that holds NaN or
    infinity, as offload-run does for a --params array."""
    import torch
    for name, t in state.items():
        if isinstance(t, torch.Tensor) and t.is_floating_point():
            bad = ~torch.isfinite(t.detach())
            count = int(bad.sum())
            if count:
                first = int(bad.flatten().nonzero()[0])
                v = float(t.detach().flatten()[first])
                kind = "nan" if math.isnan(v) else ("inf" if v > 0 else "-inf")
                warnings.warn(f"offload.compile: '{name}' holds {count} non-finite value"
                              f"{'' if count == 1 else 's'} (first: {kind} at element {first})",
                              RuntimeWarning, stacklevel=3)

_UNITS = {"": 1, "b": 1, "kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30, "tib": 1 << 40,
          "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12}


def parse_bytes(value, what="budget", minimum=1):
    """Bytes as an int from an int or a string such as "12GiB", "1.5GiB",
    "512MB" (KiB/MiB/GiB/TiB are powers of 1024, kB/MB/GB/TB of 1000), the
    planner's syntax. InputError (naming `what`) for anything else, zero,
    negative, or more than 2^48 (the largest buffer a plan holds); zero is
    allowed with minimum=0 (the saved budget)."""
    if isinstance(value, bool):
        raise InputError(f"{what}: expected bytes (an int or a string like '12GiB'), got {value!r}")
    if isinstance(value, int):
        n = value
    elif isinstance(value, float) and math.isfinite(value) and value.is_integer():
        n = int(value)
    elif isinstance(value, str):
        m = re.fullmatch(r"\s*([0-9]+(?:\.[0-9]*)?)\s*([A-Za-z]*)\s*", value)
        if not m or m.group(2).lower() not in _UNITS:
            raise InputError(f"{what}: cannot read {value!r} as bytes (expected a number with "
                             "an optional unit: B, KiB, MiB, GiB, TiB, kB, MB, GB, TB)")
        n = int(float(m.group(1)) * _UNITS[m.group(2).lower()])
    else:
        raise InputError(f"{what}: expected bytes (an int or a string like '12GiB'), got {value!r}")
    if n < minimum:
        raise InputError(f"{what}: must be " + ("positive" if minimum == 1 else f">= {minimum}")
                         + f", got {value!r}")
    if n > MAX_BYTES:
        raise InputError(f"{what}: {value!r} is more than 2^48 bytes, the largest a plan holds")
    return n


def parse_saved_budget(value):
    """The saved budget as the planner's saved-budget= text: bytes (as
    parse_bytes, 0 allowed), or a string "P%" with P in [0, 100], a
    percentage of the step's saved bytes (PyTorch's
    activation_memory_budget=0.5 is "50%"). InputError otherwise."""
    if isinstance(value, str) and value.strip().endswith("%"):
        m = re.fullmatch(r"\s*([0-9]+(?:\.[0-9]*)?)\s*%\s*", value)
        if not m or not 0.0 <= float(m.group(1)) <= 100.0:
            raise InputError(f"saved_budget: cannot read {value!r} as a percentage of the saved "
                             "bytes (expected 0% to 100%, e.g. '50%')")
        return f"{float(m.group(1)):g}%"
    return str(parse_bytes(value, "saved_budget", minimum=0))


# torch dtype name -> the importer's element type
_DTYPES = {"float32": "f32", "float64": "f64", "bfloat16": "bf16", "float16": "f16",
           "int64": "i64", "int32": "i32", "bool": "i1"}


def _type_spec(name, t):
    """The importer's NAME=DIMSxDTYPE of tensor `t` (InputError otherwise)."""
    import torch
    if not isinstance(t, torch.Tensor):
        raise InputError(f"example input '{name}': expected a torch.Tensor, got {type(t).__name__}")
    dt = str(t.dtype).replace("torch.", "")
    if dt not in _DTYPES:
        raise InputError(f"example input '{name}': dtype {t.dtype} is not supported "
                         f"(float32, float64, bfloat16, float16, int64, int32, bool)")
    dims = "x".join(str(d) for d in t.shape)
    return f"{name}={dims + 'x' if dims else ''}{_DTYPES[dt]}"


def _forward_names(model, count):
    """Names of the forward's first `count` arguments (its signature's, else x0, x1...)."""
    try:
        params = [p for p in inspect.signature(model.forward).parameters.values()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        names = [p.name for p in params[:count]]
    except (TypeError, ValueError):
        names = []
    if len(names) < count:
        names = [f"x{i}" for i in range(count)]
    return names


def _run(stage, cmd, log):
    """Runs a tool; CompileError(stage, its output) when it fails."""
    log.append("$ " + " ".join(cmd))
    try:
        r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    except OSError as e:
        raise CompileError(stage, f"cannot run {cmd[0]}: {e}") from None
    log.append(r.stdout + r.stderr)
    if r.returncode != 0:
        msg = (r.stderr.strip() or r.stdout.strip() or f"{cmd[0]} exited with {r.returncode}")
        err = CompileError(stage, msg)
        # The tools' exit codes (docs/design.md, "Exit codes"): 3 is "no
        # plan fits the budget", with the planner's JSON report written.
        err.returncode = r.returncode
        raise err
    return r.stdout, r.stderr


# offload-opt's exit code when no plan fits the budget (OutputFiles.h).
EXIT_NO_PLAN_FITS = 3


def _read_json_report(path, fmt):
    """The JSON report a pass wrote (report=json:FILE), checked to be `fmt`;
    None when it is missing or not that format."""
    try:
        with open(path) as f:
            doc = json.load(f)
    except (OSError, ValueError):
        return None
    return doc if isinstance(doc, dict) and doc.get("format") == fmt else None


EXPORTERS = ("auto", "torchscript", "export")


def torch_version():
    """(major, minor) of the running PyTorch, e.g. (1, 13) or (2, 15)."""
    import torch
    m = re.match(r"(\d+)\.(\d+)", torch.__version__)
    return (int(m.group(1)), int(m.group(2))) if m else (0, 0)


def resolve_exporter(exporter):
    """The exporter `exporter` means on the running PyTorch: "torchscript"
    (torch.jit.trace -> .pt, the TorchScript importer) or "export"
    (torch.export.export -> .pt2, the .pt2 importer). "auto" is "export" on
    PyTorch >= 2 and "torchscript" on 1.x. InputError for another value;
    CompileError (stage "export") for "export" on a PyTorch without
    torch.export, naming its version."""
    import torch
    if exporter not in EXPORTERS:
        raise InputError(f"exporter: expected one of {', '.join(map(repr, EXPORTERS))}, "
                         f"got {exporter!r}")
    major = torch_version()[0]
    if exporter == "auto":
        exporter = "export" if major >= 2 else "torchscript"
    if exporter == "export" and (major < 2 or not hasattr(torch, "export")):
        raise CompileError(
            "export", f"exporter='export' needs torch.export (PyTorch 2.x); this is PyTorch "
            f"{torch.__version__}: use exporter='torchscript' (or 'auto'), or run a PyTorch 2.x "
            "(scripts/torch2-python)")
    return exporter


def _snapshot(model):
    """Copies of every parameter and buffer tensor of `model` (persistent or
    not), for _restore."""
    import torch
    with torch.no_grad():
        return [(t, t.detach().clone()) for t in
                list(model.parameters()) + list(model.buffers())]


def _restore(saved):
    import torch
    with torch.no_grad():
        for t, v in saved:
            t.copy_(v)


def _export_torchscript(model, forward_inputs, path):
    """torch.jit.trace of the train-mode model, saved as TorchScript to `path`."""
    import torch
    try:
        # With autograd on, as training runs (some modules take other paths
        # under no_grad); check_trace=False: the check would rerun dropout
        # with fresh random numbers. The tracer's warnings are recorded: one
        # that a tensor became a Python boolean means the forward branched on
        # a tensor's value, and the trace holds only the branch taken.
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", torch.jit.TracerWarning)
            traced = torch.jit.trace(model, tuple(forward_inputs), check_trace=False)
        # PyTorch's own modules' tracer warnings are ignored, as by default.
        torch_dir = os.path.dirname(torch.__file__) + os.sep
        for w in caught:
            tracer = issubclass(w.category, torch.jit.TracerWarning)
            if tracer and (w.filename or "").startswith(torch_dir):
                continue
            if tracer and "Python boolean" in str(w.message):
                where = f" ({os.path.basename(w.filename)}:{w.lineno})" if w.filename else ""
                raise CompileError(
                    "export", "the forward branches on a tensor's value" + where + ": a "
                    "TorchScript trace keeps only the branch the example inputs took, so the "
                    "step would train that branch whatever the data (the tracer's warning: "
                    f"{str(w.message).splitlines()[0]}); use torch.export (exporter='export', "
                    "PyTorch 2.x), which refuses or handles such control flow, or make the "
                    "forward not depend on tensor values")
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
        traced.save(path)
    except CompileError:
        raise
    except Exception as e:  # tracing runs the user's code: report, do not crash
        raise CompileError("export", f"torch.jit.trace failed: {type(e).__name__}: {e}") from e
    return None


# torch.export's messages run to pages of debugging advice; the exception
# keeps this many characters of it (the whole text is in Step.log / the
# exception's __cause__).
_MAX_EXPORT_MESSAGE = 4000


@contextlib.contextmanager
def _quiet_logger(name):
    """Silences logger `name` (and its children without their own level)
    for the duration."""
    logger = logging.getLogger(name)
    level = logger.level
    logger.setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        logger.setLevel(level)


def _source_of(fn):
    """`file:line` of a function's definition, or "" when unknown."""
    try:
        fn = inspect.unwrap(fn)
        return f"{inspect.getsourcefile(fn)}:{inspect.getsourcelines(fn)[1]}"
    except (TypeError, OSError):
        return ""


# torch.export's message for a value the graph would branch on or size by:
# "Could not guard on data-dependent expression Eq(u0, 1) ..." or "Could not
# extract specialized integer from data-dependent expression u0 ...", then
# "The following call raised this error:" and the user's frame.
_DATA_DEPENDENT = re.compile(r"(Could not (?:guard on|extract specialized integer from) "
                             r"data-dependent expression [^\n]*?)\s*\(unhinted")
_RAISED_AT = re.compile(r'The following call raised this error:\s*\n\s*File "([^"]+)", '
                        r'line (\d+), in [^\n]*\n\s*([^\n]*)')


def _data_dependent_error(text):
    """One line for torch.export's error on a data-dependent value (a
    generation loop's stopping test, padding trimmed to the batch's longest
    sequence, `int(mask.sum())`), naming the construct and the source line;
    None for any other error."""
    m = _DATA_DEPENDENT.search(text)
    if not m:
        return None
    at = _RAISED_AT.search(text)
    where = f" at {at.group(1)}:{at.group(2)} (`{at.group(3).strip()}`)" if at else ""
    return ("the forward computes a Python value, a branch or a shape from a tensor's "
            f"data{where}: torch.export: {m.group(1).strip()}. offload compiles one static "
            "graph for every batch: a generation loop, a stopping test on the data or padding "
            "trimmed to a batch's longest sequence cannot be compiled; train on fixed shapes "
            "(pad every batch to one length and pass the attention mask)")


def _model_frame(exc):
    """`file:line` and the source text of the innermost frame of `exc`'s
    traceback that is the model's code (not PyTorch's own nor offload's):
    where a torch.export failure happened in the user's or a library's
    model (transformers' modeling files included). None when there is none."""
    import traceback
    import torch
    skip = (os.path.dirname(torch.__file__) + os.sep, os.path.dirname(__file__) + os.sep)
    found = None
    for fs in traceback.extract_tb(exc.__traceback__):
        name = fs.filename or ""
        if name.startswith(skip) or name.startswith("<"):
            continue
        found = fs
    if found is None:
        return None
    return f"{found.filename}:{found.lineno}", (found.line or "").strip()


def _model_output_check(model, out_spec, own_loss):
    """With the model's own loss (loss=None): a forward that returns a
    transformers ModelOutput (or another dict of outputs) must hold a
    `loss`, first. CompileError naming the output class, its fields and the
    forward's source line otherwise. No check for other output kinds."""
    try:
        from torch.utils import _pytree as pytree
    except ImportError:  # pragma: no cover
        return
    if out_spec is None or not own_loss:
        return
    # A tuple of one structure (torch.export's outputs) holds the forward's.
    spec = out_spec
    while spec.type in (tuple, list) and spec.num_children == 1:
        spec = spec.children_specs[0]
    keys = spec.context if isinstance(spec.context, (list, tuple)) else None
    if keys is None or not all(isinstance(k, str) for k in keys):
        return
    kind = getattr(spec.type, "__name__", str(spec.type))
    where = _source_of(type(model).forward)
    where = f" ({type(model).__name__}.forward at {where})" if where else ""
    if "loss" not in keys:
        raise CompileError(
            "export", f"the forward returns a {kind} without a loss (its fields: "
            f"{', '.join(keys)}){where}, and loss=None takes the model's own loss: pass the "
            "labels among the inputs (e.g. {'input_ids': ids, 'labels': labels}) so that the "
            "model computes its loss, or give a loss ('cross_entropy', 'nll', 'mse') with the "
            "target as the last positional input")
    if keys[0] != "loss":
        raise CompileError(
            "export", f"the forward returns a {kind} whose loss is not its first field "
            f"(fields: {', '.join(keys)}){where}; offload trains the first output")


def _export_pt2(model, forward_inputs, path, kwargs=None):
    """torch.export.export of the train-mode model (PyTorch 2.x; the training
    IR: dropout and batch norm as in training, buffer updates in the graph),
    saved with torch.export.save to `path`; `kwargs`: keyword inputs of the
    forward. Returns the ExportedProgram's graph signature: its user-input
    names, the fully qualified names of the parameters and buffers it
    lifted, and the output's pytree spec."""
    import warnings
    import torch
    # torch.export stores non-persistent buffers (not in the state_dict:
    # rotary tables, HF's position_ids) with the archive's constants; the
    # importer makes those the step never updates constants of the step and
    # the others state (the Step binds them from the model's values).
    # An HF model's key/value cache (config.use_cache, on by default for
    # decoders) is an inference output that a training step never reads, and
    # its DynamicCache is no tensor torch.export can return: export without
    # it, as HF's Trainer does when it checkpoints. The config is restored.
    config = getattr(model, "config", None)
    cache = getattr(config, "use_cache", None)
    if cache:
        config.use_cache = False
    try:
        # torch's loggers print warnings (with graph dumps) on the way to an
        # export error; the error itself is what the CompileError reports.
        with warnings.catch_warnings(), _quiet_logger("torch"):
            warnings.simplefilter("ignore")
            ep = torch.export.export(model, tuple(forward_inputs), kwargs or None)
            torch.export.save(ep, path)
    except Exception as e:  # export runs the user's code: report, do not crash
        text = f"{type(e).__name__}: {e}".strip()
        clear = _data_dependent_error(text)
        if clear is not None:
            raise CompileError("export", clear) from e
        if len(text) > _MAX_EXPORT_MESSAGE:
            text = text[:_MAX_EXPORT_MESSAGE] + " [...]"
        # Where in the model's code it failed (an attention mask of a rank
        # the model's mask code cannot expand, say).
        frame = _model_frame(e)
        at = f" at {frame[0]}" + (f" (`{frame[1]}`)" if frame[1] else "") if frame else ""
        raise CompileError("export", f"torch.export.export failed{at}: {text}") from e
    finally:
        if cache:
            config.use_cache = cache
    sig = ep.graph_signature
    spec = getattr(ep, "call_spec", None)
    return {"user_inputs": list(sig.user_inputs),
            "parameters": list(sig.inputs_to_parameters.values()),
            "buffers": list(sig.inputs_to_buffers.values()),
            "out_spec": getattr(spec, "out_spec", None)}


def _export(model, forward_inputs, path, exporter, kwargs=None):
    """Exports `model` in train mode with `exporter` ("torchscript": a .pt,
    "export": a .pt2) to `path`; `kwargs`: keyword inputs (torch.export
    only). The model's parameters and buffers are left as they were
    (tracing a train-mode batch norm updates its running statistics; every
    tensor is restored) and so is its train/eval mode. Returns None
    (TorchScript) or the .pt2's signature (_export_pt2)."""
    saved = _snapshot(model)
    was_training = model.training
    model.train()
    try:
        if exporter == "export":
            return _export_pt2(model, forward_inputs, path, kwargs)
        return _export_torchscript(model, forward_inputs, path)
    finally:
        _restore(saved)
        model.train(was_training)


def _tied_names(model):
    """{state_dict key: [every state_dict key of the same tensor]} for the
    tensors a model holds under more than one name (tied weights)."""
    groups = {}
    for k, v in model.state_dict(keep_vars=True).items():
        groups.setdefault(id(v), []).append(k)
    return {k: g for g in groups.values() if len(g) > 1 for k in g}


def compile(model, example_inputs, loss=AUTO_LOSS, optimizer=None, budget=None,
            target="h100-sxm", backend="host", device_bytes=None, threads=None,
            seed=0, exporter="auto", workdir=None, verbose=True, return_gradients=False,
            precision="fp32", attention_layout="blhd", fuse_attention=True, micro_batches=1,
            data_parallel=False, bucket_bytes=25 * 2**20, zero=0, saved_budget=None):
    """Compiles one training step of `model` for the runtime.

    model           a torch.nn.Module (trained in train mode).
    example_inputs  a tuple of torch tensors with the exact shapes and dtypes of
                    every batch: with a `loss`, the forward's inputs then the
                    target (e.g. (x [N, ...] float32, y [N] int64) for
                    cross_entropy); with loss=None, the forward's inputs and
                    the forward returns the scalar loss itself. Or a dict of
                    the forward's keyword inputs (torch.export only), e.g. a
                    HuggingFace model's {"input_ids": ids, "attention_mask":
                    mask, "labels": labels}: the model computes its own loss
                    (a ModelOutput's `.loss`, which must be set); the step is
                    then called with the same keywords.
    loss            "auto" (default: "cross_entropy" for positional inputs,
                    None for keyword inputs), "cross_entropy" (mean, target
                    int64 class indices), "nll", "mse" (mean), or None (the
                    forward returns its loss: a scalar, or a ModelOutput
                    whose `.loss` is set). For outputs of rank > 2 the
                    target's shape says where the classes are: dim 1 for
                    [N, C, H, W] with [N, H, W] (as F.cross_entropy), the
                    last dim for [B, T, V] with [B, T] (a language model's
                    reshape(-1, V)); a shape that fits both is a
                    CompileError (docs/import.md).
    optimizer       offload.SGD(...) or offload.AdamW(...) (default SGD(lr=0.01)).
    budget          device-memory budget in bytes (int or "12GiB"); None = no
                    planning (the step as autodiff builds it).
    saved_budget    also bound the saved activations (bytes, int or "200MiB"; 0
                    allowed; or "P%" of the step's saved bytes, as PyTorch's
                    activation_memory_budget=P/100): the saved values left on
                    the device, neither recomputed nor offloaded, at most this
                    many; the arena must still fit `budget`
                    (default: the target's memory). Plans even without a
                    budget. None (default): no saved budget (docs/planner.md,
                    "A saved budget"). BudgetError when no plan keeps that few.
    target          the planner's cost model: h100-sxm, h100-pcie, a100-80g,
                    a100-40g, l4, rtx-4090, host, or a target .json (docs/planner.md).
                    host reads this machine's calibrated host target file
                    (host_target_path()); when it is missing it is calibrated
                    once, with `threads` threads, and said so on stderr.
    backend         "host" (default) or "cuda" (a runtime built with CUDA, a GPU).
    device_bytes    device memory the session gets, bytes; default: the budget
                    (host: a simulated device of exactly that size), else the
                    plan's arena.
    threads         kernel threads of the host backend (default: all cores).
    seed            the dropout seed (rng_seed input) when the model has dropout.
    exporter        "auto" (default): torch.export (.pt2) on PyTorch >= 2,
                    torch.jit.trace (TorchScript .pt) on 1.x; "export" forces
                    torch.export (CompileError on 1.x); "torchscript" forces
                    tracing.
    workdir         folder for the intermediate files (default: a temporary one,
                    removed with the Step).
    verbose         print one line per stage with its time (to stderr).
    return_gradients  also output every parameter gradient (Step.gradients());
                    they then stay alive to the end of the step (more memory).
    precision       "fp32" (default), "bf16-mixed" or "fp16-mixed" (Lightning's
                    names): matmul, linear, conv and attention compute in
                    bf16/f16 from casts of the fp32 parameters, autocast's
                    fp32 ops stay fp32, gradients and optimizer state are fp32
                    (docs/precision.md). Parameters, state_dict() and
                    gradients() stay fp32. fp16-mixed scales the loss as
                    torch.amp.GradScaler does (Step.skipped_steps, Step.loss_scale).
                    The host backend emulates bf16/f16 exactly; the CUDA
                    backend's bf16/f16 kernels (f32 compute, one rounding)
                    ran on an H200 (docs/gpu.md).
    attention_layout  "blhd": attention that the model wraps in transpose(1, 2)s
                    (HF, nanoGPT) takes the token layout [N, L, H, E] without
                    those copies (offload-import --attention-layout); "bhld":
                    every attention in the head layout [N, H, L, E]. Default:
                    "blhd".
    fuse_attention  False: attention the model spells out (matmul, softmax,
                    matmul) stays as written instead of becoming one
                    offload.attention (offload-import --no-fuse-attention).
    micro_batches   K >= 1 (default 1): gradient accumulation. Each step runs
                    the batch as K equal micro-batches (every input sliced
                    along dim 0, the batch must be divisible by K), sums the
                    gradients in fp32 and updates once: PyTorch's loop
                    `(loss_i / K).backward()` K times, then `step()`. The
                    step returns the mean of the micro-batch losses. Only
                    one micro-batch's activations are alive at a time
                    (docs/training.md). A model with batch norm in training
                    mode is refused (batch statistics differ per micro-batch).
    data_parallel   True: this process is one rank of a data-parallel job
                    started by a launcher (torchrun: RANK, WORLD_SIZE,
                    MASTER_ADDR, MASTER_PORT; docs/data_parallel.md). Compile
                    with the LOCAL batch; each step averages the gradients
                    across the ranks (gloo over TCP) in buckets of
                    `bucket_bytes` (default 25 MiB, DDP's) before the update.
                    Without a launcher's RANK, one rank (the same results as
                    data_parallel=False, bit for bit). The session's creation
                    fails (OffloadError) when the ranks' plans differ.
    zero            0 (default) or 1: with data_parallel=True, ZeRO-1 shards
                    the optimizer state across the ranks (each keeps 1/W of
                    it: a reduce-scatter of each bucket's gradients, the
                    update of this rank's shard, an all-gather of the
                    parameters; the same results as zero=0). The world size
                    W is the launcher's WORLD_SIZE (1 without one) and is
                    fixed in the plan. Step.optimizer_state() then holds
                    this rank's shards, "zero1.bucket<K>.<state>" (1-D).

    Returns an offload.Step. Raises CompileError (stage and the tool's message:
    unsupported ops with their source lines, ...), BudgetError (the budget is
    below the smallest reachable arena, which it names), InputError (bad
    arguments), OffloadError (the runtime refuses the plan, e.g. device_bytes
    below the plan's arena).
    """
    import torch
    from .step import Step

    if not isinstance(model, torch.nn.Module):
        raise InputError(f"model: expected a torch.nn.Module, got {type(model).__name__}")
    if isinstance(example_inputs, torch.Tensor):
        example_inputs = (example_inputs,)
    keywords = None
    if isinstance(example_inputs, dict):
        # Keyword inputs: the model's own loss (labels among them).
        if not example_inputs or not all(isinstance(k, str) for k in example_inputs):
            raise InputError("example_inputs: a dict of keyword inputs needs at least one "
                             "entry, each named by a string")
        if loss not in (AUTO_LOSS, None):
            raise InputError(f"loss={loss!r} with keyword inputs: the model computes its own "
                             "loss from keyword inputs (pass its labels among them); give "
                             "positional inputs and the target last to use a loss")
        loss = None
        keywords = list(example_inputs)
        example_inputs = tuple(example_inputs.values())
    if not isinstance(example_inputs, (tuple, list)):
        raise InputError(f"example_inputs: expected a tuple of torch.Tensors or a dict of "
                         f"keyword inputs, got {type(example_inputs).__name__}")
    example_inputs = tuple(example_inputs)
    if loss == AUTO_LOSS:
        loss = "cross_entropy"
    if loss is not None and loss not in LOSSES:
        raise InputError(f"loss: expected one of {', '.join(LOSSES)} or None, got {loss!r}")
    n_forward = len(example_inputs) - (1 if loss is not None else 0)
    if n_forward < 1:
        raise InputError(f"example_inputs: with loss={loss!r} give the forward's inputs and then "
                         f"the target; got {len(example_inputs)} tensor(s)")
    if optimizer is None:
        optimizer = SGD(lr=0.01)
    if not isinstance(optimizer, Optimizer):
        raise InputError(f"optimizer: expected offload.SGD(...) or offload.AdamW(...), "
                         f"got {type(optimizer).__name__}")
    if precision not in PRECISIONS:
        raise InputError(f"precision: expected one of {', '.join(PRECISIONS)}, got {precision!r}")
    exporter = resolve_exporter(exporter)
    if keywords is not None and exporter != "export":
        raise InputError("example_inputs: keyword inputs need exporter='export' (torch.export, "
                         "PyTorch 2.x); a TorchScript trace takes positional inputs")
    budget_bytes = parse_bytes(budget) if budget is not None else None
    saved_budget_text = None
    if saved_budget is not None:
        saved_budget_text = parse_saved_budget(saved_budget)
    if device_bytes is not None:
        device_bytes = parse_bytes(device_bytes, "device_bytes")
    if data_parallel and (isinstance(bucket_bytes, bool) or not isinstance(bucket_bytes, int)
                          or bucket_bytes < 1):
        raise InputError(f"bucket_bytes={bucket_bytes!r}: give a number of bytes >= 1")
    if isinstance(zero, bool) or zero not in (0, 1):
        raise InputError(f"zero={zero!r}: give 0 (off) or 1 (ZeRO-1, optimizer state sharded)")
    if zero and not data_parallel:
        raise InputError("zero=1 shards optimizer state across data-parallel ranks; "
                         "it needs data_parallel=True")
    zero_options = ""
    if zero:
        world = os.environ.get("WORLD_SIZE", "1")
        if not world.isdigit() or int(world) < 1:
            raise InputError(f"zero=1: the launcher's WORLD_SIZE={world!r} is not a number >= 1")
        zero_options = f" zero=1 world-size={int(world)}"
    # Validated as offload-run and offload-opt validate them, before any work.
    target = _check_target(target)
    threads = _check_threads(threads)
    seed = _check_seed(seed)
    if backend not in ("host", "cuda"):
        raise InputError(f"backend: expected 'host' or 'cuda', got {backend!r}")
    if isinstance(micro_batches, bool) or not isinstance(micro_batches, int) or micro_batches < 1:
        raise InputError(f"micro_batches: expected an int >= 1, got {micro_batches!r}")
    if attention_layout not in ("blhd", "bhld"):
        raise InputError(f"attention_layout: expected 'blhd' or 'bhld', got {attention_layout!r}")
    workdir = _check_workdir(workdir)
    names = keywords if keywords is not None else _forward_names(model, n_forward)
    if loss is not None:
        target_name = "target" if "target" not in names else "target_"
        names = names + [target_name]
    for n, t in zip(names, example_inputs):  # dtypes checked before exporting
        _type_spec(n, t)

    tmp = None
    if workdir is None:
        tmp = tempfile.TemporaryDirectory(prefix="offload-")
        workdir = tmp.name
    log, times = [], {}

    def stage(name, fn):
        t0 = time.perf_counter()
        out = fn()
        times[name] = time.perf_counter() - t0
        if verbose:
            print(f"offload: {name:<8} {times[name]:7.2f} s", file=sys.stderr, flush=True)
        return out

    pt = os.path.join(workdir, "model.pt2" if exporter == "export" else "model.pt")
    mlir = os.path.join(workdir, "model.mlir")
    step_mlir = os.path.join(workdir, "step.mlir")
    planned = os.path.join(workdir, "planned.mlir")
    plan_path = os.path.join(workdir, "step.oflp")
    plan_report = os.path.join(workdir, "plan-report.json")
    memory_json = os.path.join(workdir, "memory-report.json")

    # The values the step starts from, under the model's state_dict names
    # (the importers name parameters and buffers by these fully qualified
    # names on both paths), plus non-persistent buffers, which state_dict
    # leaves out but the forward may read.
    initial = copy.deepcopy(model.state_dict())
    extra = {k: v.detach().clone() for k, v in model.named_buffers() if k not in initial}
    _warn_non_finite(initial)
    _warn_non_finite(extra)
    if keywords is not None:
        signature = stage("export", lambda: _export(model, (), pt, exporter,
                                                    dict(zip(keywords, example_inputs))))
    else:
        signature = stage("export", lambda: _export(model, example_inputs[:n_forward], pt,
                                                    exporter))
    if signature is not None:
        _model_output_check(model, signature.get("out_spec"), loss is None)
        # A .pt2 names its inputs itself (the forward's argument names; a
        # *rest parameter's become rest_0, rest_1, ...); the importer checks
        # --input against them.
        names = list(signature["user_inputs"]) + (
            [] if loss is None else
            ["target" if "target" not in signature["user_inputs"] else "target_"])
        if keywords is not None and list(signature["user_inputs"]) != keywords:
            # torch.export names keyword inputs by their keywords, in order.
            raise CompileError("export", "torch.export named the keyword inputs " +
                               ", ".join(signature["user_inputs"]) + ", not " +
                               ", ".join(keywords))
        if len(names) != len(example_inputs):
            raise CompileError("export", f"torch.export made {len(signature['user_inputs'])} "
                               f"user inputs ({', '.join(signature['user_inputs'])}) of the "
                               f"{n_forward} forward inputs given")
    specs = [_type_spec(n, t) for n, t in zip(names, example_inputs)]

    imp = [_tools.tool("offload-import"), pt, "-o", mlir]
    for s in specs:
        imp += ["--input", s]
    imp += ["--loss", loss if loss is not None else "cross_entropy"]
    imp += ["--attention-layout=" + attention_layout]
    if not fuse_attention:
        imp += ["--no-fuse-attention"]
    no_loss_hint = (" (offload.compile: the forward returns no scalar loss; give the target as "
                    "the last example input and loss='cross_entropy', 'nll' or 'mse')")

    def do_import():
        try:
            _run("import", imp, log)
        except CompileError as e:
            if loss is None and "not a scalar loss" in e.message:
                raise CompileError("import", e.message + no_loss_hint) from None
            raise
        if loss is None:
            # The .pt2 importer adds a loss target input (and the loss) when
            # the output is not a scalar, where TorchScript's refuses.
            with open(mlir) as f:
                step_inputs = re.findall(r'offload\.name = "([^"]*)", '
                                         r'offload\.role = #offload\.role<input>', f.read())
            added = [n for n in step_inputs if n not in names and n != "rng_seed"]
            if added:
                raise CompileError("import", "the forward's first output is not a scalar loss "
                                   "(the importer added a loss target input " +
                                   ", ".join(repr(n) for n in added) + ")" + no_loss_hint)
    stage("import", do_import)

    opt = _tools.tool("offload-opt")
    # The memory report's JSON form: its figures, and its text for
    # Step.report.
    stage("autodiff", lambda: _run(
        "autodiff", [opt, mlir, f"--offload-autodiff={optimizer.pass_options()}" +
                     (" return-gradients=true" if return_gradients else "") +
                     (f" micro-batches={micro_batches}" if micro_batches > 1 else "") +
                     f" precision={precision}"] +
                    ([f"--offload-data-parallel=bucket-bytes={bucket_bytes}{zero_options}"]
                     if data_parallel else []) +
                    ["--offload-memory-report=top=5 report=" +
                     _option_value("workdir", "json:" + memory_json),
                     "--mlir-print-debuginfo", "-o", step_mlir], log))
    memory = _read_json_report(memory_json, "offload-memory-report") or {}
    functions = memory.get("functions") or [{}]
    unplanned = functions[0].get("device_arena_bytes")
    report = memory.get("text", "")

    lower_input = step_mlir
    if budget_bytes is not None or saved_budget_text is not None:
        budget_option = "" if budget_bytes is None else f"budget={budget_bytes} "
        if saved_budget_text is not None:
            budget_option += f"saved-budget={saved_budget_text} "

        def plan():
            if target == "host":
                ensure_host_target(threads, log)
            try:
                # Each value quoted (_option_value): a user string never adds
                # an option of its own.
                _run("plan", [opt, step_mlir,
                              f"--offload-plan-memory={budget_option}"
                              f"target={_option_value('target', target)} "
                              f"report={_option_value('workdir', 'json:' + plan_report)}",
                              "--mlir-print-debuginfo", "-o", planned], log)
            except CompileError as e:
                if getattr(e, "returncode", None) == EXIT_NO_PLAN_FITS:
                    doc = _read_json_report(plan_report, "offload-plan-report") or {}
                    smallest = [s.get("smallest_arena_bytes") for s in doc.get("steps", [])
                                if s.get("status") == "no-plan"]
                    raise BudgetError(e.message, budget_bytes,
                                      smallest[-1] if smallest else None) from None
                raise
        stage("plan", plan)
        lower_input = planned
        doc = _read_json_report(plan_report, "offload-plan-report")
        if doc is None:
            raise CompileError("plan", f"the planner wrote no JSON report to {plan_report}")
        report = doc.get("text", "")

    def lower():
        # The exporter takes the plan file as -o, a plain argument: no option
        # list to quote it into. It writes the file whole or not at all.
        _run("lower", [_tools.tool("offload-translate"), "--offload-to-plan", lower_input,
                       "-o", plan_path], log)
        return _tools.runtime.Plan.load(plan_path)
    plan = stage("lower", lower)

    if device_bytes is None:
        device_bytes = budget_bytes if budget_bytes is not None else plan.device_capacity
    session = _tools.runtime.Session(plan, backend, device_bytes=device_bytes, threads=threads,
                                     data_parallel=bool(data_parallel))
    return Step(model=model, session=session, plan=plan, input_names=names,
                initial_state=initial, extra_state=extra, tied=_tied_names(model),
                exporter=exporter, seed=seed, report=report, budget_bytes=budget_bytes,
                unplanned_arena_bytes=unplanned, device_bytes=device_bytes, times=times,
                workdir=workdir, tmpdir=tmp, log=log, target=target, optimizer=optimizer,
                loss=loss, keywords=keywords is not None)
