"""Shared steps of the end-to-end check scripts (check_model.py,
check_memory_pass.py): run a tool, export a model, import it, and decide
whether plans also run on the CUDA backend (only where a GPU is present)."""
import json
import os
import re
import subprocess
import sys

PY = "/usr/bin/python3"


def run(cmd):
    """Runs `cmd`; on failure prints it with its output and exits 1."""
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if r.returncode != 0:
        print("command failed: " + " ".join(cmd))
        print(r.stdout)
        sys.exit(1)
    return r.stdout


def compile_step(bin_dir, opt_args, step, plan, summary=False):
    """Builds a training step with offload-opt (`opt_args`: its input and
    passes) into the file `step`, then lowers that to the runtime plan file
    `plan` with offload-translate --offload-to-plan (printing the plan's
    summary line when `summary`). Exits as run() does when either fails;
    returns both tools' output."""
    out = run([os.path.join(bin_dir, "offload-opt")] + list(opt_args) + ["-o", step])
    return out + run([os.path.join(bin_dir, "offload-translate"), "--offload-to-plan", step,
                      "-o", plan] + (["--report=-"] if summary else []))


def export_and_import(model, work, bin_dir, batch=0, dropout=None):
    """Exports `model` into `work` and imports it to work/<model>.mlir.
    Returns the export's metadata (work/<model>.json)."""
    os.makedirs(work, exist_ok=True)
    export = [PY, "-m", "export_models", "--out", work, "--models", model]
    if batch:
        export += ["--batch", str(batch)]
    if dropout is not None:
        export += ["--dropout", str(dropout)]
    run(export)
    prefix = os.path.join(work, model)
    meta = json.load(open(prefix + ".json"))
    imp = [os.path.join(bin_dir, "offload-import"), prefix + ".pt", "-o", prefix + ".mlir"]
    for k, v in meta["inputs"].items():
        imp += ["--input", f"{k}={v}"]
    if not meta.get("returns_loss"):
        imp += ["--loss", meta["loss"]]
    run(imp)
    return meta


def check_peaks(label, outs):
    """Whether every offload-run output in `outs` reports a measured peak
    of device bytes equal to the plan's; prints `LABEL peak device bytes:
    planned P measured M: ok` (the last run's figures) or FAIL."""
    ok, shown = True, "not reported"
    for out in outs:
        mm = re.search(r"peak device bytes: planned (\d+) measured (\d+)", out)
        ok &= bool(mm) and mm.group(1) == mm.group(2)
        if mm:
            shown = f"planned {mm.group(1)} measured {mm.group(2)}"
    print(f"{label} peak device bytes: {shown}: {'ok' if ok else 'FAIL'}")
    return ok


# The workspace that CUDA runs give a plan without one (offload-run
# --workspace-bytes): cuDNN's deterministic convolution algorithms and
# cuBLAS work in it. Until the lowering reserves it, 64 MiB.
CUDA_WORKSPACE_BYTES = 64 << 20


def cuda_run_args():
    """offload-run arguments of a CUDA run."""
    return ["--backend", "cuda", "--workspace-bytes", str(CUDA_WORKSPACE_BYTES)]


def cuda_device_present():
    """Whether this machine has an NVIDIA GPU: `nvidia-smi -L` lists one.
    OFFLOAD_TEST_CUDA=1 or 0 in the environment overrides the probe."""
    forced = os.environ.get("OFFLOAD_TEST_CUDA")
    if forced is not None:
        return forced == "1"
    try:
        r = subprocess.run(["nvidia-smi", "-L"], stdout=subprocess.PIPE,
                           stderr=subprocess.DEVNULL, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return False
    return r.returncode == 0 and "GPU" in r.stdout


def cuda_runnable(bin_dir, plan):
    """True when plans should also run on the CUDA backend: a GPU is present
    and offload-run has the backend. Without a GPU it is False and prints
    nothing (the scripts then behave as they always did); with a GPU but a
    runtime built without CUDA it says so and is False. A plan with ops the
    CUDA backend lacks is not hidden: the CUDA run then fails."""
    if not cuda_device_present():
        return False
    r = subprocess.run([os.path.join(bin_dir, "offload-run"), plan, "--check",
                        "--backend", "cuda"], stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True)
    if "built without CUDA" in r.stdout:
        print("note: a GPU is present but offload-run was built without CUDA: "
              "the CUDA comparison is skipped")
        return False
    return True


def max_rel_diff(a, b, names):
    """Largest max|a - b| / max(max|b|, 1e-5) over the arrays `names` of two
    npz files (inf for a missing or misshaped array), and its name."""
    import numpy as np
    worst, worst_name = 0.0, ""
    for n in names:
        if n not in a.files or n not in b.files or a[n].shape != b[n].shape:
            return float("inf"), n
        x, y = a[n].astype(np.float64), b[n].astype(np.float64)
        if not y.size:
            continue
        err = float(np.max(np.abs(x - y))) / max(float(np.max(np.abs(y))), 1e-5)
        if not err <= worst:
            worst, worst_name = err, n
    return worst, worst_name


def check_cuda_run(label, bin_dir, plan, host_cmd, host_dump, names=None, rtol=1e-5):
    """Where a GPU is present: reruns `host_cmd` (an offload-run command
    line whose --dump is `host_dump`) on the CUDA backend and requires its
    dumped arrays `names` (default: all) within `rtol` relative of the host
    run's, and planned == measured peak. Prints one line per check and
    returns True when something failed; without a GPU returns False and
    prints nothing."""
    if not cuda_runnable(bin_dir, plan):
        return False
    import re
    import numpy as np
    cuda_dump = host_dump[:-len(".npz")] + ".cuda.npz"
    cmd = [cuda_dump if a == host_dump else a for a in host_cmd] + cuda_run_args()
    out = run(cmd)
    a, b = np.load(cuda_dump), np.load(host_dump)
    err, name = max_rel_diff(a, b, names if names is not None else b.files)
    ok = err <= rtol
    print(f"{label} cuda vs host: max relative error {err:.3e}" + (f" ({name})" if name else "")
          + (": ok" if ok else ": FAIL"))
    failed = not ok
    for m in re.finditer(r"peak device bytes: planned (\d+) measured (\d+)", out):
        ok = m.group(1) == m.group(2)
        failed |= not ok
        print(f"{label} cuda {m.group(0)}" + (": ok" if ok else ": FAIL"))
    return failed
