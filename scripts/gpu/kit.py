#!/usr/bin/env python3
"""The parts of the GPU bring-up kit's run (docs/gpu.md); run.sh calls them.

    kit.py versions | gtests | memcheck | plans | sbs | copy | sdpa | amp | report [--print]

Each part reads its context from the environment that run.sh sets:

  KIT_BUNDLE    the bundle folder (models/, MANIFEST.json)
  KIT_BIN       the unpacked binaries (offload-run, OffloadRuntimeTests)
  KIT_LD_PATH   LD_LIBRARY_PATH for those binaries only (never for python3)
  KIT_BACKEND   cuda | host
  KIT_WORK      scratch folder (generated weights, dumps)
  KIT_PARTS     where each part writes NAME.json (rewritten as it goes, so
                a part killed by its timeout still leaves what it found)
  KIT_DEADLINE  epoch seconds by which the part must be done
  KIT_OUT       the results folder (report writes results.json/results.md)

Needs only the standard library and numpy (torch_side.py is the part that
imports torch). Every part records a status: ok, fail (a check failed),
skipped (with the reason) or error (the part itself broke).
"""
import glob
import hashlib
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
# torch_side.py (through models.py) imports export_models from the checkout's
# python/: the processes started here find it on PYTHONPATH.
os.environ["PYTHONPATH"] = os.pathsep.join(
    p for p in (os.path.join(os.path.dirname(os.path.dirname(HERE)), "python"),
                os.environ.get("PYTHONPATH")) if p)

RTOL = 1e-5
ENV = os.environ.get


def env_path(name):
    v = ENV(name)
    if not v:
        sys.exit("kit.py: %s is not set (run.sh sets it)" % name)
    return v


def now():
    return time.time()


def remaining(reserve=0.0):
    """Seconds left before this part's deadline, less `reserve`."""
    return float(ENV("KIT_DEADLINE", now() + 3600)) - now() - reserve


class Part:
    """A part's JSON, written atomically after every change."""

    def __init__(self, name):
        self.name = name
        self.path = os.path.join(env_path("KIT_PARTS"), name + ".json")
        self.data = {"part": name, "status": "running", "started": now()}
        self.save()

    def set(self, **kw):
        self.data.update(kw)
        self.save()

    def save(self):
        tmp = self.path + ".tmp"
        with open(tmp, "w") as f:
            json.dump(self.data, f, indent=1, default=str)
        os.replace(tmp, self.path)

    def done(self, status, **kw):
        self.data.update(kw)
        self.data["status"] = status
        self.data["seconds"] = round(now() - self.data["started"], 2)
        self.save()
        return 0


# OpenBLAS's kernels for one CPU type on every machine: the host backend's
# results (the carried references, the host side of the gtests) then do not
# depend on the CPU they ran on (prepare.py made the references with these).
BLAS_ENV = {"OPENBLAS_CORETYPE": "Haswell"}


def bin_env():
    """The environment of our binaries: LD_LIBRARY_PATH = the bundle's
    libraries and the CUDA libraries run.sh located; OpenBLAS pinned."""
    e = {k: v for k, v in os.environ.items() if not k.startswith("OPENBLAS_")}
    e.update(BLAS_ENV)
    e["LD_LIBRARY_PATH"] = ENV("KIT_LD_PATH", "")
    return e


RUNNING = set()


def _on_term(signum, frame):
    """run.sh's `timeout` ended this part: end the commands it started (each
    runs in its own process group) and leave with 124."""
    for p in list(RUNNING):
        try:
            os.killpg(p.pid, 9)
        except OSError:
            pass
    os._exit(124)


def run_cmd(cmd, timeout, env=None, log=None):
    """(exit code, output, seconds); exit code 124 on a timeout (the process
    group is killed), 127 when the program does not exist."""
    t0 = now()
    timeout = max(1.0, timeout)
    try:
        p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env,
                             start_new_session=True)
    except OSError as e:
        return 127, "cannot run %s: %s" % (cmd[0], e), 0.0
    RUNNING.add(p)
    try:
        out, _ = p.communicate(timeout=timeout)
        rc = p.returncode
    except subprocess.TimeoutExpired:
        try:
            os.killpg(p.pid, 9)
        except OSError:
            pass
        out, _ = p.communicate()
        rc = 124
        out = (out or b"") + ("\n[kit: killed after %.0f s]\n" % timeout).encode()
    finally:
        RUNNING.discard(p)
    text = out.decode("utf-8", "replace") if out else ""
    secs = now() - t0
    if log:
        with open(log, "a") as f:
            f.write("$ %s\n[exit %d after %.2f s]\n%s\n" % (" ".join(cmd), rc, secs, text))
    return rc, text, secs


def tail(text, n=25):
    lines = text.strip().splitlines()
    return "\n".join(lines[-n:])


def log_path(name):
    d = os.path.join(env_path("KIT_WORK"), "logs")
    os.makedirs(d, exist_ok=True)
    return os.path.join(d, name + ".log")


def bundle_models(kind):
    root = os.path.join(env_path("KIT_BUNDLE"), "models")
    out = []
    for d in sorted(glob.glob(os.path.join(root, "*", "meta.json"))):
        meta = json.load(open(d))
        if meta["kind"] == kind:
            out.append((meta["model"], os.path.dirname(d), meta))
    order = {"resnet18": 0, "transformer": 1, "gpt": 2, "resnet18-224": 3, "gpt2-small": 4,
             "resnet18-amp": 5, "gpt2-amp": 6, "resnet18-amp-mini": 7, "gpt-amp-mini": 8}
    return sorted(out, key=lambda t: order.get(t[0], 9))


def bundle_check_backend():
    """The backend `offload-run --check` asks on a machine without a GPU:
    cuda, unless the bundle was built without CUDA (a rehearsal only), which
    has no CUDA backend to ask."""
    manifest = json.load(open(os.path.join(env_path("KIT_BUNDLE"), "MANIFEST.json")))
    return "cuda" if manifest.get("cuda_build") else "host"


def generate(model_dir, work):
    """Generates the model's parameters and inputs into `work`; returns
    (params path, inputs path, digests, seconds)."""
    import gen
    t0 = now()
    spec = gen.load_spec(os.path.join(model_dir, "spec.json"))
    os.makedirs(work, exist_ok=True)
    p, i = os.path.join(work, "params.npz"), os.path.join(work, "inputs.npz")
    d = gen.generate(spec, p, i)
    return p, i, d, now() - t0


def start_model_row(rows, row, need_seconds, model_dir, work):
    """Appends `row` to `rows`; then, with `need_seconds` left, generates the
    model's weights and batch (generate's tuple), else records why in
    row["error"] and returns None."""
    rows.append(row)
    if remaining() < need_seconds:
        row["error"] = "out of time"
        return None
    try:
        return generate(model_dir, work)
    except Exception as e:  # noqa: BLE001 (recorded, the part goes on)
        row["error"] = "generating the weights failed: %s" % e
        return None


STEP_RE = re.compile(r"^step (\d+)(?: \[[^\]]*\])?: loss (\S+)\s+time (\S+) s.*?instructions (\S+) s",
                     re.M)
PEAK_RE = re.compile(r"peak device bytes: planned (\d+) measured (\d+)")


def parse_run(text):
    steps = [{"loss": float(m.group(2)), "seconds": float(m.group(3)),
              "instructions_seconds": float(m.group(4))} for m in STEP_RE.finditer(text)]
    m = PEAK_RE.search(text)
    return {"steps": steps, "planned_peak": int(m.group(1)) if m else None,
            "measured_peak": int(m.group(2)) if m else None}


def error_line(text):
    for line in text.splitlines():
        if "error" in line.lower():
            return line.strip()[:400]
    return tail(text, 3)[:400]


# ---------------------------------------------------------------------------
# Part 1: device, driver and library versions
# ---------------------------------------------------------------------------
PROBE = r"""
import ctypes, json, sys
paths = json.loads(sys.argv[1]); out = {}
def lib(key):
    p = paths.get(key)
    if not p: return None
    try: return ctypes.CDLL(p, mode=ctypes.RTLD_GLOBAL)
    except OSError as e: out[key + "_error"] = str(e); return None
rt = lib("libcudart.so.13")
if rt:
    v = ctypes.c_int(0)
    rc = rt.cudaRuntimeGetVersion(ctypes.byref(v)); out["cudaRuntimeGetVersion"] = v.value if rc == 0 else "error %d" % rc
    rc = rt.cudaDriverGetVersion(ctypes.byref(v)); out["cudaDriverGetVersion"] = v.value if rc == 0 else "error %d" % rc
    n = ctypes.c_int(0); rc = rt.cudaGetDeviceCount(ctypes.byref(n))
    out["cudaGetDeviceCount"] = n.value if rc == 0 else "error %d" % rc
lib("libcublasLt.so.13")
cb = lib("libcublas.so.13")
if cb:
    parts = []
    for k in range(3):
        v = ctypes.c_int(0); cb.cublasGetProperty(k, ctypes.byref(v)); parts.append(str(v.value))
    out["cublas"] = ".".join(parts)
dn = lib("libcudnn.so.9")
if dn:
    dn.cudnnGetVersion.restype = ctypes.c_size_t; dn.cudnnGetCudartVersion.restype = ctypes.c_size_t
    out["cudnnGetVersion"] = dn.cudnnGetVersion(); out["cudnnGetCudartVersion"] = dn.cudnnGetCudartVersion()
nc = lib("libnccl.so.2")
if nc:
    v = ctypes.c_int(0); rc = nc.ncclGetVersion(ctypes.byref(v))
    out["ncclGetVersion"] = v.value if rc == 0 else "error %d" % rc
print(json.dumps(out))
"""

TORCH_PROBE = r"""
import json, torch
d = {"torch": torch.__version__, "torch_cuda": torch.version.cuda,
     "cuda_available": torch.cuda.is_available()}
try: d["torch_cudnn"] = torch.backends.cudnn.version()
except Exception as e: d["torch_cudnn"] = "error: %s" % e
if torch.cuda.is_available():
    p = torch.cuda.get_device_properties(0)
    d.update(device=p.name, capability="%d.%d" % (p.major, p.minor), total_memory=p.total_memory,
             multiprocessors=p.multi_processor_count, devices=torch.cuda.device_count())
print(json.dumps(d))
"""

# Libraries our binaries may take from the system: the C library family and
# the C++ runtime (never carried), plus the common ones the bundle carries
# only as a fallback (run.sh uses the system's when ldconfig lists them).
SYSTEM_OK = re.compile(r"^(linux-vdso|ld-linux|libc\.so|libm\.so|libdl\.so|libpthread\.so|librt\.so|"
                       r"libstdc\+\+\.so|libgcc_s\.so|libz\.so|libbz2\.so|libcrypto\.so|liblzma\.so|"
                       r"libzstd\.so)")
# NCCL: the runtime links it (data parallel on CUDA); 218 MB, located like cuBLAS.
CUDA_LIBS = ("libcudart.so.13", "libcublas.so.13", "libcublasLt.so.13", "libcudnn.so.9",
             "libnccl.so.2")


def ldd(binary):
    rc, out, _ = run_cmd(["ldd", binary], 30, env=bin_env())
    libs = {}
    for line in out.splitlines():
        m = re.match(r"\s*(\S+)\s+=>\s+(\S+|not found)", line)
        if m:
            libs[m.group(1)] = m.group(2) if m.group(2) != "not" else "not found"
        elif "not found" in line:
            libs[line.split()[0]] = "not found"
    # "version `GLIBCXX_3.4.30' not found (required by ...)": a C++ runtime
    # older than the one the binaries were built against.
    for line in out.splitlines():
        if "version `" in line and "not found" in line:
            libs["(version) " + line.strip()[:160]] = "not found"
    return rc, libs


def part_versions():
    part = Part("versions")
    bundle, kbin = env_path("KIT_BUNDLE"), env_path("KIT_BIN")
    info = {"backend": ENV("KIT_BACKEND"), "hostname": os.uname().nodename,
            "kernel": os.uname().release, "python3": sys.version.split()[0]}
    try:
        import numpy
        info["numpy"] = numpy.__version__
    except ImportError:
        info["numpy"] = None
    manifest = os.path.join(bundle, "MANIFEST.json")
    if os.path.exists(manifest):
        m = json.load(open(manifest))
        info["bundle"] = {k: m.get(k) for k in ("created", "git_commit", "git_dirty", "cuda_build",
                                                "bundle_bytes", "host")}
    try:
        with open("/etc/os-release") as f:
            info["os"] = dict(l.strip().split("=", 1) for l in f if "=" in l).get("PRETTY_NAME",
                                                                                 "").strip('"')
    except OSError:
        pass
    problems = []
    smi = shutil.which("nvidia-smi")
    if smi:
        q = "name,driver_version,memory.total,pcie.link.gen.current,pcie.link.gen.max," \
            "pcie.link.width.current,pcie.link.width.max,compute_cap"
        rc, out, _ = run_cmd([smi, "--query-gpu=" + q, "--format=csv,noheader"], 30)
        info["nvidia_smi"] = out.strip() if rc == 0 else "exit %d: %s" % (rc, tail(out, 3))
        rc, out, _ = run_cmd([smi], 30)
        m = re.search(r"CUDA Version:\s*([0-9.]+)", out)
        info["driver_cuda_version"] = m.group(1) if m else None
    else:
        info["nvidia_smi"] = "not found"
    # Where our binaries' libraries resolve, with the kit's LD_LIBRARY_PATH.
    resolved = {}
    for b in ("offload-run", "OffloadRuntimeTests"):
        rc, libs = ldd(os.path.join(kbin, b))
        resolved[b] = libs
        for so, path in libs.items():
            if path == "not found":
                problems.append("%s: %s not found" % (b, so))
            elif not (os.path.realpath(path).startswith(os.path.realpath(bundle) + os.sep) or
                      path.startswith(bundle + os.sep) or so in CUDA_LIBS or SYSTEM_OK.match(so)):
                problems.append("%s: %s resolves to the system's %s, which the GPU machine may lack "
                                "(not carried)" % (b, so, path))
    info["libraries"] = {so: p for so, p in resolved["offload-run"].items()
                         if so in CUDA_LIBS or "kit" in p or "bundle" in p}
    info["ld_library_path"] = ENV("KIT_LD_PATH")
    paths = {so: p for so, p in resolved["offload-run"].items() if so in CUDA_LIBS and p != "not found"}
    # cuBLAS's Lt library: beside cuBLAS.
    if "libcublas.so.13" in paths and "libcublasLt.so.13" not in paths:
        lt = os.path.join(os.path.dirname(paths["libcublas.so.13"]), "libcublasLt.so.13")
        if os.path.exists(lt):
            paths["libcublasLt.so.13"] = lt
    py = sys.executable
    rc, out, _ = run_cmd([py, "-c", PROBE, json.dumps(paths)], 60)
    try:
        info["loaded"] = json.loads(out.strip().splitlines()[-1])
    except (ValueError, IndexError):
        info["loaded"] = {"error": tail(out, 5)}
        problems.append("the library probe failed: " + tail(out, 2))
    rc, out, _ = run_cmd([py, "-c", TORCH_PROBE], 90)
    try:
        info["torch"] = json.loads(out.strip().splitlines()[-1])
    except (ValueError, IndexError):
        info["torch"] = {"error": tail(out, 3)}
    try:
        from importlib import metadata
        pk = {}
        for name in ("torch", "torchvision", "numpy", "nvidia-cublas", "nvidia-cudnn-cu13",
                     "nvidia-nccl-cu13",
                     "nvidia-cuda-runtime", "nvidia-cublas-cu13", "nvidia-cuda-runtime-cu13"):
            try:
                pk[name] = metadata.version(name)
            except metadata.PackageNotFoundError:
                pass
        info["pip"] = pk
    except ImportError:
        pass
    cuda = ENV("KIT_BACKEND") == "cuda"
    count = info.get("loaded", {}).get("cudaGetDeviceCount")
    if cuda and not (isinstance(count, int) and count > 0):
        problems.append("cudaGetDeviceCount through the kit's libcudart: %s" % count)
    return part.done("fail" if problems else "ok", info=info, problems=problems)


# ---------------------------------------------------------------------------
# Part 2: the Cuda* gtests, one process each
# ---------------------------------------------------------------------------
def part_gtests():
    part = Part("gtests")
    exe = os.path.join(env_path("KIT_BIN"), "OffloadRuntimeTests")
    log = log_path("gtests")
    rc, out, _ = run_cmd([exe, "--gtest_list_tests", "--gtest_filter=*Cuda*"], 60, env=bin_env(), log=log)
    if rc != 0:
        return part.done("error", reason="cannot list the tests: exit %d: %s" % (rc, tail(out, 5)))
    names, suite = [], None
    for line in out.splitlines():
        if not line.strip() or line.startswith("Note:"):
            continue
        if not line.startswith(" "):
            suite = line.strip().split()[0]
        else:
            names.append(suite + line.strip().split()[0])
    results = []
    part.set(tests=results, listed=len(names))
    cuda = ENV("KIT_BACKEND") == "cuda"
    for i, name in enumerate(names):
        left = remaining(reserve=2)
        if left < 5:
            results.append({"test": name, "result": "not run", "why": "out of time"})
            continue
        rc, out, secs = run_cmd([exe, "--gtest_filter=" + name, "--gtest_color=no"],
                                min(60, left), env=bin_env(), log=log)
        if "[  SKIPPED ]" in out and rc == 0:
            m = re.search(r"Skipped\n(.*)\n", out)
            res = {"result": "skipped", "why": (m.group(1) if m else "").strip()[:300]}
        elif rc == 0 and "[       OK ]" in out:
            res = {"result": "passed"}
        elif rc == 124:
            res = {"result": "timeout", "why": "no result after %.0f s" % secs}
        else:
            fails = [l for l in out.splitlines() if "Failure" in l or "error" in l.lower()
                     or "Expected" in l or "Which is" in l or "Value of" in l or "Actual" in l]
            res = {"result": "failed", "exit": rc, "why": "\n".join(fails[:12])[:1500] or tail(out, 12)}
        res.update(test=name, seconds=round(secs, 2))
        results.append(res)
        part.save()
    counts = {k: sum(1 for r in results if r["result"] == k)
              for k in ("passed", "failed", "skipped", "timeout", "not run")}
    bad = counts["failed"] + counts["timeout"] + counts["not run"]
    note = None
    # On a GPU a skip means the tests did not see the device: a failure.
    if cuda and counts["skipped"]:
        bad += counts["skipped"]
        note = "a skip on the GPU machine counts as a failure"
    return part.done("fail" if bad else "ok", counts=counts, note=note)


def find_sanitizer():
    cands = [shutil.which("compute-sanitizer")]
    cands += glob.glob("/usr/local/cuda*/bin/compute-sanitizer")
    cands += glob.glob("/usr/local/cuda*/compute-sanitizer/compute-sanitizer")
    cands += glob.glob("/opt/nvidia/*/compute-sanitizer/compute-sanitizer")
    for c in cands:
        if c and os.access(c, os.X_OK):
            return c
    return None


MEMCHECK_TESTS = "CudaTest.ConvNetStepMatchesHostAndRepeatsBitForBit:MlpTest.CudaMatchesReference"
# The fused attention's kernels (dynamic shared memory, masks, grouped heads).
MEMCHECK_ATTENTION = "CudaTest.AttentionMatchesFloat64Reference"
# The bf16/f16 kernels (every op the host takes in a low type, and a step).
MEMCHECK_LOW = "CudaTest.LowOpsMatchHostBf16:CudaTest.MixedPrecisionStepMatchesHost"


def part_memcheck():
    """compute-sanitizer memcheck: the short gtest run, then (time allowing)
    one step of the transformer example's planned plan."""
    part = Part("memcheck")
    san = find_sanitizer()
    if ENV("KIT_BACKEND") != "cuda":
        return part.done("skipped", reason="no GPU (host backend rehearsal); compute-sanitizer %s"
                         % ("found: " + san if san else "not found"))
    if not san:
        return part.done("skipped", reason="compute-sanitizer not found (PATH, /usr/local/cuda*/bin)")
    log = log_path("memcheck")
    runs = []
    part.set(sanitizer=san, runs=runs)
    base = [san, "--tool", "memcheck", "--error-exitcode", "86", "--print-limit", "30"]
    exe = os.path.join(env_path("KIT_BIN"), "OffloadRuntimeTests")
    todo = [("gtest " + MEMCHECK_TESTS, base + [exe, "--gtest_filter=" + MEMCHECK_TESTS], None),
            ("gtest " + MEMCHECK_ATTENTION, base + [exe, "--gtest_filter=" + MEMCHECK_ATTENTION],
             None),
            ("gtest " + MEMCHECK_LOW, base + [exe, "--gtest_filter=" + MEMCHECK_LOW], None)]
    tr = [(n, d, m) for n, d, m in bundle_models("example") if n == "transformer"]
    if tr:
        n, d, meta = tr[0]
        todo.append(("offload-run transformer planned", None, (d, meta)))
    for label, cmd, model in todo:
        left = remaining(reserve=2)
        if left < 15:
            runs.append({"run": label, "result": "not run", "why": "out of time"})
            part.save()
            continue
        if model:
            d, meta = model
            p, i, _, _ = generate(d, os.path.join(env_path("KIT_WORK"), "memcheck"))
            cmd = base + [os.path.join(env_path("KIT_BIN"), "offload-run"),
                          os.path.join(d, "planned.oflp"), "--backend", "cuda", "--steps", "1",
                          "--params", p, "--inputs", i, "--device-bytes", str(meta["budget_bytes"])]
        rc, out, secs = run_cmd(cmd, left - 1, env=bin_env(), log=log)
        m = re.search(r"ERROR SUMMARY: (\d+) error", out)
        errors = int(m.group(1)) if m else None
        ok = rc == 0 and errors == 0
        res = {"run": label, "exit": rc, "errors": errors, "seconds": round(secs, 1),
               "result": "passed" if ok else ("timeout" if rc == 124 else "failed")}
        if not ok:
            res["why"] = tail(out, 30)[-2500:]
        runs.append(res)
        part.save()
    first = runs[0]["result"] if runs else "not run"
    bad = any(r["result"] in ("failed",) for r in runs) or first != "passed"
    return part.done("fail" if bad else "ok")


# ---------------------------------------------------------------------------
# Part 3: the carried plans against the host backend's results
# ---------------------------------------------------------------------------
def dump_hashes(path):
    import numpy as np
    z = np.load(path)
    return {n: hashlib.sha256(np.ascontiguousarray(z[n]).tobytes()).hexdigest() for n in z.files}


# A gradient smaller than this fraction of the model's largest is compared
# as if it were that large: such a gradient is rounding noise around an exact
# zero (gpt's attention key biases: softmax does not change when a row of
# scores shifts, so d loss / d k.bias = 0 and the host's values are ~4e-10
# next to a largest gradient of 0.25). With the 1e-5 floor of
# test/drivers/pipeline.py's max_rel_diff alone, two host runs that differ only in
# OpenBLAS's kernels (AVX2 vs AVX-512) already differ by 9.6e-5 there, and by
# 3.9e-6 with this floor. The strict figure is reported beside it.
NOISE_FLOOR = 1e-3


def compare_ref(dump_path, model_dir, meta):
    """(largest max|ours - host| / max(max|host|, NOISE_FLOOR * the largest
    max|host| of the model's gradients), its name, missing names, the same
    with the floor 1e-5 of test/drivers/pipeline.py) over the carried loss and
    gradients, sampled as carried."""
    import numpy as np
    ours = np.load(dump_path)
    ref = np.load(os.path.join(model_dir, "ref.npz"))
    scale = max([rm["max_abs"] for n, rm in meta["reference"].items() if n.startswith("grad:")]
                or [0.0])
    worst, worst_name, missing, strict = 0.0, "", [], 0.0
    for n, rm in meta["reference"].items():
        if n not in ours.files:
            missing.append(n)
            continue
        a = ours[n].astype(np.float64).reshape(-1)
        if list(ours[n].shape) != rm["shape"]:
            missing.append(n + " (shape)")
            continue
        a = a[::rm["stride"]]
        r = ref[n].astype(np.float64).reshape(-1)
        if a.size != r.size:
            missing.append(n + " (size)")
            continue
        if not a.size:
            continue
        diff = float(np.max(np.abs(a - r)))
        floor = NOISE_FLOOR * scale if n.startswith("grad:") else 0.0
        err = diff / max(rm["max_abs"], floor, 1e-30)
        strict = max(strict, diff / max(rm["max_abs"], 1e-5))
        if not err <= worst:
            worst, worst_name = err, n
    return worst, worst_name, missing, strict


def compare_dumps(a_path, b_path, common_only=False):
    """(names that differ in any bit, max relative difference among them);
    with common_only, names in one dump only are left out (ZeRO-1's sharded
    optimizer state has names of its own)."""
    import numpy as np
    a, b = np.load(a_path), np.load(b_path)
    differ, worst = [], 0.0
    names = set(a.files) & set(b.files) if common_only else set(a.files) | set(b.files)
    for n in sorted(names):
        if n not in a.files or n not in b.files:
            differ.append(n)
            worst = float("inf")
            continue
        x, y = a[n], b[n]
        if x.shape != y.shape or x.dtype != y.dtype:
            differ.append(n)
            worst = float("inf")
        elif np.ascontiguousarray(x).tobytes() != np.ascontiguousarray(y).tobytes():
            differ.append(n)
            xf, yf = x.astype(np.float64), y.astype(np.float64)
            d = float(np.max(np.abs(xf - yf))) / max(float(np.max(np.abs(yf))), 1e-30)
            worst = max(worst, d)
    return differ, worst


def part_plans():
    part = Part("plans")
    backend = ENV("KIT_BACKEND")
    exe = os.path.join(env_path("KIT_BIN"), "offload-run")
    rows = []
    part.set(backend=backend, models=rows, rtol=RTOL,
             metric="per tensor max|ours - host| / max(max|host|, %g x the model's largest "
                    "gradient); rel_err_vs_host_strict: floor 1e-5 (test/drivers/pipeline.py)" % NOISE_FLOOR)
    failed = False
    for name, d, meta in bundle_models("example"):
        row = {"model": name, "budget": meta["budget_bytes"], "runs": {}, "checks": {}}
        work = os.path.join(env_path("KIT_WORK"), "plans", name)
        got = start_model_row(rows, row, 20, d, work)
        part.save()
        if not got:
            failed = True
            continue
        p, i, dig, gsecs = got
        row["generate_seconds"] = round(gsecs, 2)
        row["checks"]["generator bit-identical to the bundle's"] = dig == meta.get("digest")
        log = log_path("plans-" + name)
        base_dump = None
        for plan in ("unplanned", "planned"):
            for k in (1, 2):
                label = "%s-%d" % (plan, k)
                dump = os.path.join(work, label + ".npz")
                cmd = [exe, os.path.join(d, plan + ".oflp"), "--backend", backend, "--threads", "1",
                       "--steps", "1", "--params", p, "--inputs", i, "--dump", dump]
                cmd += ["--workspace-bytes", str(meta["workspace_bytes"])] if plan == "unplanned" \
                    else ["--device-bytes", str(meta["budget_bytes"])]
                rc, out, secs = run_cmd(cmd, min(120, remaining(reserve=1)), env=bin_env(), log=log)
                r = parse_run(out)
                r.update(exit=rc, seconds=round(secs, 2))
                if rc != 0:
                    r["error"] = error_line(out)
                    if backend == "cuda" and not row.get("rerun_blocking") and remaining() > 90:
                        # An asynchronous CUDA fault is seen at the step's end;
                        # with launches synchronous it names the instruction.
                        env = bin_env()
                        env["CUDA_LAUNCH_BLOCKING"] = "1"
                        rc2, out2, _ = run_cmd(cmd[:cmd.index("--dump")] + cmd[cmd.index("--dump") + 2:],
                                               min(60, remaining(reserve=30)), env=env, log=log)
                        row["rerun_blocking"] = {"run": label, "exit": rc2, "error": error_line(out2)
                                                 if rc2 else "passed with CUDA_LAUNCH_BLOCKING=1"}
                row["runs"][label] = r
                part.save()
                if rc != 0:
                    continue
                if k == 1:
                    err, worst, missing, strict = compare_ref(dump, d, meta)
                    row["checks"]["%s vs host within %g" % (plan, RTOL)] = err <= RTOL and not missing
                    r["rel_err_vs_host"] = err
                    r["rel_err_vs_host_strict"] = strict
                    r["worst"] = worst
                    if missing:
                        r["missing"] = missing[:10]
                if base_dump is None:
                    base_dump = dump
                else:
                    differ, worst = compare_dumps(base_dump, dump)
                    row["checks"]["%s bit-identical to unplanned-1" % label] = not differ
                    if differ:
                        r["differs_from_unplanned_1"] = {"names": differ[:8], "count": len(differ),
                                                         "max_rel": worst}
                    os.remove(dump)
                part.save()
        ok_runs = [r for r in row["runs"].values() if r.get("exit") == 0]
        row["checks"]["every run ran"] = len(ok_runs) == 4
        row["checks"]["measured peak = planned peak"] = bool(ok_runs) and all(
            r["measured_peak"] == r["planned_peak"] for r in ok_runs)
        pl = [r for k, r in row["runs"].items() if k.startswith("planned") and r.get("exit") == 0]
        row["checks"]["planned peak <= budget"] = bool(pl) and all(
            r["measured_peak"] <= meta["budget_bytes"] for r in pl)
        row["ok"] = all(row["checks"].values())
        failed |= not row["ok"]
        part.save()
        shutil.rmtree(work, ignore_errors=True)
    return part.done("fail" if failed or not rows else "ok")


def part_nccl():
    """The collective engine with one rank against no engine, bit for bit
    (docs/data_parallel.md, "The CUDA backend"): each example model's
    data-parallel plan (dp.oflp: offload.all_reduce in 64 KiB buckets) for 3
    steps without a communicator, then with --world-size 1 and a file
    rendezvous, which joins NCCL on cuda (gloo on the host rehearsal). A mean
    over one rank is the gradient itself, so every dumped array must be equal
    in every bit. Then the ZeRO-1 plan at world size 1 (zero1.oflp:
    offload.reduce_scatter / offload.all_gather) with the one-rank engine:
    its loss, parameters and step counter bit-identical to the no-engine run
    (the sharded state has other names)."""
    part = Part("nccl")
    backend = ENV("KIT_BACKEND")
    exe = os.path.join(env_path("KIT_BIN"), "offload-run")
    rows = []
    part.set(backend=backend, engine="nccl" if backend == "cuda" else "gloo", models=rows,
             rule="every dumped array bit-identical with and without the one-rank engine")
    failed = False
    for name, d, meta in bundle_models("example"):
        plan = os.path.join(d, "dp.oflp")
        if not os.path.exists(plan):
            continue
        row = {"model": name, "runs": {}}
        work = os.path.join(env_path("KIT_WORK"), "nccl", name)
        got = start_model_row(rows, row, 15, d, work)
        if not got:
            failed = True
            continue
        p, i, _, _ = got
        log = log_path("nccl-" + name)
        dumps = {}
        zero1 = os.path.join(d, "zero1.oflp")
        labels = ("no-engine", "one-rank") + (("zero1-one-rank",) if os.path.exists(zero1) else ())
        for label in labels:
            dump = os.path.join(work, label + ".npz")
            cmd = [exe, zero1 if label == "zero1-one-rank" else plan, "--backend", backend,
                   "--threads", "1", "--steps", "3", "--params", p, "--inputs", i, "--dump", dump,
                   "--workspace-bytes", str(meta["workspace_bytes"])]
            if label != "no-engine":
                rdzv = os.path.join(work, "rendezvous-" + label)
                os.makedirs(rdzv, exist_ok=True)
                cmd += ["--world-size", "1", "--rank", "0", "--rendezvous", "file:" + rdzv,
                        "--collective-timeout", "60"]
            rc, out, secs = run_cmd(cmd, min(90, remaining(reserve=1)), env=bin_env(), log=log)
            r = parse_run(out)
            r.update(exit=rc, seconds=round(secs, 2))
            if rc != 0:
                r["error"] = error_line(out)
            else:
                dumps[label] = dump
            row["runs"][label] = r
            part.save()
        if "no-engine" in dumps and "one-rank" in dumps:
            differ, worst = compare_dumps(dumps["no-engine"], dumps["one-rank"])
            row["bit_identical"] = not differ
            if differ:
                row["differs"] = {"names": differ[:8], "count": len(differ), "max_rel": worst}
        ok_zero1 = True
        if "zero1-one-rank" in labels:
            ok_zero1 = False
            if "no-engine" in dumps and "zero1-one-rank" in dumps:
                differ, worst = compare_dumps(dumps["no-engine"], dumps["zero1-one-rank"],
                                              common_only=True)
                row["zero1_bit_identical"] = ok_zero1 = not differ
                if differ:
                    row["zero1_differs"] = {"names": differ[:8], "count": len(differ),
                                            "max_rel": worst}
        row["ok"] = bool(row.get("bit_identical")) and ok_zero1
        failed |= not row["ok"]
        part.save()
        shutil.rmtree(work, ignore_errors=True)
    if not rows:
        return part.done("skipped", reason="the bundle has no dp.oflp (made before the nccl part)")
    return part.done("fail" if failed else "ok")


# ---------------------------------------------------------------------------
# Part 4: side by side with PyTorch on the same GPU
# ---------------------------------------------------------------------------
SBS_STEPS = 5


def parse_profile(text):
    """offload-run --profile's table: total seconds and the op rows
    (op, count, seconds), slowest first; the slowest instructions' lines."""
    ops, slow, total = [], [], None
    m = re.search(r"profile of the last step: (\d+) instructions, ([0-9.eE+-]+) s", text)
    if m:
        total = float(m.group(2))
    for line in text.splitlines():
        f = line.split()
        if len(f) == 5 and f[0].startswith("offload.") and f[3].endswith("%"):
            ops.append({"op": f[0], "count": int(f[1]), "seconds": float(f[2])})
        elif re.match(r"\s+[0-9.]+ s  %\d+ offload\.", line):
            slow.append(line.strip())
    return {"total_seconds": total, "ops": ops, "slowest": slow[:10]}


def median_after_first(steps, key):
    xs = [s[key] for s in steps[1:]] or [s[key] for s in steps]
    return statistics.median(xs) if xs else None


def sbs_model(name, d, meta, backend, device, steps, budget_s, rows, part):
    """Our two plans and PyTorch's two variants of one model; appends a row
    per variant to `rows`. Returns True when something failed."""
    exe = os.path.join(env_path("KIT_BIN"), "offload-run")
    t_model = now()
    failed = False
    work = os.path.join(env_path("KIT_WORK"), "sbs", name)
    try:
        p, i, _, gsecs = generate(d, work)
    except Exception as e:  # noqa: BLE001
        rows.append({"model": name, "variant": "-", "error": "generating failed: %s" % e})
        return True
    log = log_path("sbs-" + name)
    sim = meta["simulated_seconds"]
    for plan in ("unplanned", "planned"):
        row = {"model": name, "variant": "offload " + plan, "params": meta["parameters"]}
        rows.append(row)
        left = budget_s - (now() - t_model)
        if left < 15:
            row["error"] = "out of time"
            failed = True
            part.save()
            continue
        cmd = [exe, os.path.join(d, plan + ".oflp"), "--backend", backend, "--threads",
               "8" if backend == "cuda" else "1", "--steps", str(steps), "--params", p, "--inputs", i]
        cmd += ["--workspace-bytes", str(meta["workspace_bytes"])] if plan == "unplanned" \
            else ["--device-bytes", str(meta["budget_bytes"])]
        rc, out, secs = run_cmd(cmd, min(left * 0.3, 150), env=bin_env(), log=log)
        r = parse_run(out)
        row.update(exit=rc, wall_seconds=round(secs, 1),
                   budget=meta["budget_bytes"] if plan == "planned" else None,
                   peak=r["measured_peak"], planned_peak=r["planned_peak"],
                   step_seconds=median_after_first(r["steps"], "seconds"),
                   instructions_seconds=median_after_first(r["steps"], "instructions_seconds"),
                   loss_first=r["steps"][0]["loss"] if r["steps"] else None,
                   simulated_seconds=sim.get(plan), steps_run=len(r["steps"]))
        if rc != 0:
            row["error"] = error_line(out)
            failed = True
        elif r["measured_peak"] != r["planned_peak"] or (
                plan == "planned" and r["measured_peak"] > meta["budget_bytes"]):
            row["error"] = "peak: planned %s measured %s budget %s" % (
                r["planned_peak"], r["measured_peak"], meta["budget_bytes"])
            failed = True
        part.save()
    # Where the unplanned step's time goes: offload-run --profile (each
    # instruction alone), 2 steps, the last one's table.
    left = budget_s - (now() - t_model)
    if left > 40:
        cmd = [exe, os.path.join(d, "unplanned.oflp"), "--backend", backend, "--threads",
               "8" if backend == "cuda" else "1", "--steps", "2", "--profile", "--params", p,
               "--inputs", i, "--workspace-bytes", str(meta["workspace_bytes"])]
        rc, out, secs = run_cmd(cmd, min(left * 0.25, 90), env=bin_env(),
                                log=log_path("profile-" + name))
        prof = parse_profile(out)
        prof.update(exit=rc, wall_seconds=round(secs, 1))
        part.data.setdefault("profiles", {})[name] = prof
        part.save()
    left = budget_s - (now() - t_model)
    tjson = os.path.join(work, "torch.json")
    if left < 20:
        rows.append({"model": name, "variant": "pytorch", "error": "out of time"})
        failed = True
    else:
        rc, out, secs = run_cmd([sys.executable, os.path.join(HERE, "torch_side.py"), "sbs",
                                 "--model", name, "--params", p, "--inputs", i, "--steps", str(steps),
                                 "--device", device, "--out", tjson], left - 2, log=log)
        got = json.load(open(tjson)) if os.path.exists(tjson) else {}
        ours_loss = rows[-2].get("loss_first") if len(rows) >= 2 else None
        for v in ("eager", "checkpoint"):
            tv = got.get("variants", {}).get(v)
            row = {"model": name, "variant": "pytorch " + v, "params": meta["parameters"]}
            if tv and not tv.get("error") and tv.get("steps"):
                row.update(peak=tv.get("peak"), step_seconds=median_after_first(tv["steps"], "seconds"),
                           loss_first=tv["steps"][0]["loss"], reserved_peak=tv.get("reserved_peak"),
                           steps_run=len(tv["steps"]))
                if ours_loss is not None:
                    # Same weights, same batch: the first losses agree to
                    # rounding unless the plans compute another function.
                    row["loss_rel_diff_vs_offload"] = abs(row["loss_first"] - ours_loss) / max(
                        abs(ours_loss), 1e-30)
            else:
                row["error"] = ((tv or {}).get("error") or "exit %d: %s" % (rc, tail(out, 1)))[:500]
                failed = True
            rows.append(row)
        part.set(torch=got.get("torch"))
    shutil.rmtree(work, ignore_errors=True)
    part.save()
    return failed


def part_sbs():
    part = Part("sbs")
    backend = ENV("KIT_BACKEND")
    exe = os.path.join(env_path("KIT_BIN"), "offload-run")
    py = sys.executable
    torch_side = os.path.join(HERE, "torch_side.py")
    rows = []
    part.set(rows=rows, steps=SBS_STEPS)
    models = bundle_models("sbs")
    if backend == "cuda":
        failed = False
        for idx, (name, d, meta) in enumerate(models):
            budget_s = remaining(reserve=2) / (len(models) - idx)
            failed |= sbs_model(name, d, meta, "cuda", "cuda", SBS_STEPS, budget_s, rows, part)
        return part.done("fail" if failed else "ok")
    # No GPU. (1) The side-by-side plans load and the CUDA backend has a
    # kernel for every op; (2) the PyTorch script runs on the CPU at the tiny
    # trace shapes; (3) the whole side-by-side code path runs on the host
    # backend and the CPU with two example models (so a Python error shows
    # here, not there).
    checks = {}
    check_backend = bundle_check_backend()
    for name, d, meta in models:
        for plan in ("unplanned", "planned"):
            rc, out, _ = run_cmd([exe, os.path.join(d, plan + ".oflp"), "--check", "--backend",
                                  check_backend], 60, env=bin_env(), log=log_path("sbs"))
            checks["%s %s --check --backend %s" % (name, plan, check_backend)] = (
                "ok" if rc == 0 else "exit %d: %s" % (rc, tail(out, 2)))
    dry = {}
    for name, d, meta in models:
        if remaining() < 30:
            dry[name] = "not run: out of time"
            continue
        rc, out, secs = run_cmd([py, torch_side, "sbs", "--model", name, "--dry-run",
                                 "--out", os.path.join(env_path("KIT_WORK"), "dry-%s.json" % name)],
                                min(180, remaining(reserve=5)), log=log_path("sbs"))
        dry[name] = "ok (%.1f s)" % secs if rc == 0 else "exit %d: %s" % (rc, tail(out, 4))
    st_rows = []
    part.set(plan_checks=checks, dry_run=dry, self_test_rows=st_rows)
    self_test = [m for m in bundle_models("example") if m[0] in ("resnet18", "gpt")]
    failed = False
    for idx, (name, d, meta) in enumerate(self_test):
        budget_s = min(120.0, remaining(reserve=2) / (len(self_test) - idx))
        failed |= sbs_model(name, d, meta, "host", "cpu", 3, budget_s, st_rows, part)
    bad = [k for k, v in list(checks.items()) + list(dry.items()) if not v.startswith("ok")]
    bad += ["self-test %s %s: %s" % (r["model"], r["variant"], r["error"])
            for r in st_rows if r.get("error")]
    return part.done("fail" if bad else "skipped",
                     reason="no GPU (host backend): the side-by-side runs need CUDA; the plans "
                            "passed offload-run --check --backend cuda, the PyTorch script "
                            "dry-ran on the CPU, and the code path ran with resnet18 and gpt on "
                            "the host backend and the CPU",
                     problems=bad)


def part_copy():
    part = Part("copy")
    if ENV("KIT_BACKEND") != "cuda":
        return part.done("skipped", reason="no GPU (host backend rehearsal)")
    out_json = os.path.join(env_path("KIT_WORK"), "copy.json")
    rc, out, secs = run_cmd([sys.executable, os.path.join(HERE, "torch_side.py"), "copy", "--out",
                             out_json], remaining(reserve=1), log=log_path("copy"))
    got = json.load(open(out_json)) if os.path.exists(out_json) else {}
    if rc != 0 or not got:
        return part.done("error", reason="exit %d: %s" % (rc, tail(out, 1)), **got)
    return part.done("ok", **got)


def part_sdpa():
    """The fused attention against PyTorch's SDPA (scripts/gpu/attention.py)."""
    part = Part("sdpa")
    if ENV("KIT_BACKEND") != "cuda":
        return part.done("skipped", reason="no GPU (host backend rehearsal)")
    import attention
    rows = []
    part.set(rows=rows, rule="max|x - f64| / max|f64| of the output and each gradient: ours <= "
             "%g x PyTorch fp32 SDPA's, or <= %g" % (attention.SDPA_FACTOR, attention.FLOOR))
    failed = run_cases(part, rows, bundle_models("attention"), "case", "sdpa", 15, 10,
                       lambda d, meta, work, seconds: attention.check(
                           d, meta, os.path.join(env_path("KIT_BIN"), "offload-run"), bin_env(),
                           work, seconds, parse_profile))
    return part.done("fail" if failed or not rows else "ok")


def run_cases(part, rows, cases, key, folder, need_seconds, least_seconds, check):
    """Runs `check(model dir, meta, work dir, seconds)` for each bundle case
    (bundle_models' tuples), appending its row to `rows` (key: the case's
    name) and saving the part after each; a case with under `need_seconds`
    left, or whose check raises, is recorded as failed. Each case gets an
    equal share of the time left (at least `least_seconds`) and a work
    folder KIT_WORK/folder/NAME, removed after it. Returns True when a case
    failed."""
    failed = False
    for idx, (name, d, meta) in enumerate(cases):
        if remaining() < need_seconds:
            rows.append({key: name, "ok": False, "error": "out of time"})
            failed = True
            continue
        work = os.path.join(env_path("KIT_WORK"), folder, name)
        try:
            row = check(d, meta, work,
                        max(least_seconds, remaining(reserve=2) / (len(cases) - idx)))
        except Exception as e:  # noqa: BLE001 (recorded, the part goes on)
            row = {key: name, "ok": False, "error": "%s: %s" % (type(e).__name__, e)}
        rows.append(row)
        failed |= not row.get("ok")
        part.save()
        shutil.rmtree(work, ignore_errors=True)
    return failed


# ---------------------------------------------------------------------------
# Part 7: bf16-mixed steps against PyTorch's torch.autocast on the same GPU
# ---------------------------------------------------------------------------
AMP_STEPS = 5
# check_precision.py's rule (docs/precision.md, "The oracle"): per tensor,
# ours <= AMP_FACTOR x max(autocast's error, AMP_FLOOR), both against
# PyTorch's float64 step; the floor is half an ulp of bf16.
AMP_FACTOR = 4.0
AMP_FLOOR = 2.0 ** -9


def amp_model(name, d, meta, backend, device, steps, budget_s, rows, part):
    """Our bf16-mixed step and PyTorch's autocast step of one model, timed
    and checked against PyTorch's float64 step; appends one row to `rows`.
    Returns True when something failed (an error or the rule)."""
    exe = os.path.join(env_path("KIT_BIN"), "offload-run")
    t_model = now()
    row = {"model": name, "params": meta["parameters"], "inputs": meta.get("inputs")}
    rows.append(row)
    work = os.path.join(env_path("KIT_WORK"), "amp", name)
    try:
        p, i, _, gsecs = generate(d, work)
    except Exception as e:  # noqa: BLE001
        row["error"] = "generating failed: %s" % e
        return True
    log = log_path("amp-" + name)
    dump = os.path.join(work, "ours.npz")
    cmd = [exe, os.path.join(d, "amp.oflp"), "--backend", backend, "--threads",
           "8" if backend == "cuda" else "1", "--steps", str(steps), "--params", p, "--inputs", i,
           "--workspace-bytes", str(meta["workspace_bytes"]), "--dump", dump]
    left = budget_s - (now() - t_model)
    rc, out, secs = run_cmd(cmd, max(10, min(left * 0.4, 120)), env=bin_env(), log=log)
    r = parse_run(out)
    row.update(ours_exit=rc, ours_wall_seconds=round(secs, 1),
               ours_step_seconds=median_after_first(r["steps"], "seconds"),
               ours_instructions_seconds=median_after_first(r["steps"], "instructions_seconds"),
               ours_peak=r["measured_peak"], ours_planned_peak=r["planned_peak"],
               ours_loss=r["steps"][0]["loss"] if r["steps"] else None)
    failed = False
    if rc != 0:
        row["error"] = "ours: " + error_line(out)
        if backend == "cuda":
            e2 = dict(bin_env(), CUDA_LAUNCH_BLOCKING="1")
            rc2, out2, _ = run_cmd(cmd[:cmd.index("--steps") + 1] + ["1"] +
                                   cmd[cmd.index("--steps") + 2:], 60, env=e2, log=log)
            row["rerun_blocking"] = {"exit": rc2, "error": error_line(out2) if rc2 else ""}
        failed = True
    left = budget_s - (now() - t_model)
    tjson = os.path.join(work, "torch.json")
    if left < 10:
        row["error"] = (row.get("error", "") + "; pytorch: out of time").lstrip("; ")
        shutil.rmtree(work, ignore_errors=True)
        return True
    tcmd = [sys.executable, os.path.join(HERE, "torch_side.py"), "amp", "--model", name,
            "--params", p, "--inputs", i, "--steps", str(steps), "--device", device, "--out", tjson]
    if rc == 0 and os.path.exists(dump):
        tcmd += ["--ours", dump]
    rc3, out3, _ = run_cmd(tcmd, left - 2, log=log)
    got = json.load(open(tjson)) if os.path.exists(tjson) else {}
    ac = got.get("autocast", {})
    row.update(torch=got.get("torch"), torch_step_seconds=median_after_first(ac.get("steps", []), "seconds")
               if ac.get("steps") else None, torch_peak=ac.get("peak"),
               torch_loss=ac["steps"][0]["loss"] if ac.get("steps") else None,
               f64_loss=got.get("f64", {}).get("loss"))
    if rc3 != 0 or ac.get("error") or got.get("f64", {}).get("error"):
        row["error"] = (row.get("error", "") + "; pytorch: " + (
            ac.get("error") or got.get("f64", {}).get("error") or
            "exit %d: %s" % (rc3, tail(out3, 2)))[:500]).lstrip("; ")
        failed = True
    errs = got.get("errors", {})
    if errs and rc == 0:
        ratios = {}
        for n, e in errs.items():
            if e.get("ours") is None:
                continue
            ratios[n] = e["ours"] / max(e["autocast"], AMP_FLOOR)
        if ratios:
            worst = max(ratios, key=ratios.get)
            row.update(worst=worst, worst_ratio=ratios[worst], worst_ours=errs[worst]["ours"],
                       worst_autocast=errs[worst]["autocast"], tensors=len(ratios),
                       loss_err_ours=errs.get("loss", {}).get("ours"),
                       loss_err_autocast=errs.get("loss", {}).get("autocast"),
                       over=sorted(n for n, v in ratios.items() if v > AMP_FACTOR)[:10])
            row["ok"] = not row["over"] and not got.get("missing_in_ours")
            if got.get("missing_in_ours"):
                row["error"] = "ours lacks gradients: " + ", ".join(got["missing_in_ours"][:5])
        else:
            row["ok"] = False
            row["error"] = row.get("error") or "no gradient compared"
        failed |= not row["ok"]
    elif not failed:
        row["error"] = "no comparison (torch_side.py wrote no errors)"
        failed = True
    # Where our step's time goes: --profile (each instruction alone), 2
    # steps, the last one's table; after the checks, time allowing.
    left = budget_s - (now() - t_model)
    if rc == 0 and left > 15:
        pcmd = cmd[:cmd.index("--steps")] + ["--steps", "2", "--profile"] + \
            cmd[cmd.index("--steps") + 2:cmd.index("--dump")]
        rc4, out4, secs4 = run_cmd(pcmd, min(left - 5, 60), env=bin_env(),
                                   log=log_path("amp-profile-" + name))
        row["profile"] = parse_profile(out4)
        row["profile"].update(exit=rc4, wall_seconds=round(secs4, 1))
    row["seconds"] = round(now() - t_model, 1)
    shutil.rmtree(work, ignore_errors=True)
    part.save()
    return failed


def part_amp():
    """bf16-mixed resnet18 and GPT-2-shaped steps, ours (CUDA) against
    PyTorch eager under torch.autocast("cuda", torch.bfloat16): step time,
    peak memory, and gradients against PyTorch's float64 step."""
    part = Part("amp")
    backend = ENV("KIT_BACKEND")
    rows = []
    part.set(rows=rows, steps=AMP_STEPS,
             rule="per tensor, error = max|g - g64| / max(max|g64|, 1e-3 x the model's largest "
                  "|g64|); ours <= %g x max(autocast's error, 2^-9)" % AMP_FACTOR)
    amp_models = bundle_models("amp")
    if backend == "cuda":
        failed = not amp_models
        for idx, (name, d, meta) in enumerate(amp_models):
            budget_s = remaining(reserve=2) / (len(amp_models) - idx)
            failed |= amp_model(name, d, meta, "cuda", "cuda", AMP_STEPS, budget_s, rows, part)
        return part.done("fail" if failed else "ok")
    # No GPU: (1) the bf16-mixed plans have a CUDA kernel for every op; (2)
    # torch_side.py's amp runs on the CPU at the trace shapes; (3) the whole
    # code path (ours on the host backend, autocast on the CPU, float64, the
    # rule) with the two small amp models.
    check_backend = bundle_check_backend()
    exe = os.path.join(env_path("KIT_BIN"), "offload-run")
    checks, dry = {}, {}
    for name, d, meta in amp_models:
        rc, out, _ = run_cmd([exe, os.path.join(d, "amp.oflp"), "--check", "--backend", check_backend],
                             60, env=bin_env(), log=log_path("amp"))
        checks["%s --check --backend %s" % (name, check_backend)] = (
            "ok" if rc == 0 else "exit %d: %s" % (rc, tail(out, 2)))
    for name, d, meta in amp_models:
        if remaining() < 30:
            dry[name] = "not run: out of time"
            continue
        rc, out, secs = run_cmd([sys.executable, os.path.join(HERE, "torch_side.py"), "amp", "--model",
                                 name, "--dry-run", "--device", "cpu", "--out",
                                 os.path.join(env_path("KIT_WORK"), "amp-dry-%s.json" % name)],
                                min(120, remaining(reserve=5)), log=log_path("amp"))
        dry[name] = "ok (%.1f s)" % secs if rc == 0 else "exit %d: %s" % (rc, tail(out, 4))
    st_rows = []
    part.set(plan_checks=checks, dry_run=dry, self_test_rows=st_rows)
    minis = bundle_models("amp-mini")
    for idx, (name, d, meta) in enumerate(minis):
        budget_s = min(90.0, remaining(reserve=2) / (len(minis) - idx))
        amp_model(name, d, meta, "host", "cpu", 2, budget_s, st_rows, part)
    # The self-test judges the code path (errors), not the figures: on the
    # CPU, autocast runs PyTorch's CPU op lists, not the CUDA ones ours follow.
    bad = [k for k, v in list(checks.items()) + list(dry.items()) if not v.startswith("ok")]
    bad += ["self-test %s: %s" % (r["model"], r["error"]) for r in st_rows if r.get("error")]
    if not amp_models:
        bad.append("the bundle has no amp model")
    if len(st_rows) != len(minis) or not minis:
        bad.append("the self-test ran %d of %d small amp models" % (len(st_rows), len(minis)))
    return part.done("fail" if bad else "skipped",
                     reason="no GPU (host backend): the amp runs need CUDA; the bf16-mixed plans "
                            "passed offload-run --check --backend %s, the PyTorch side dry-ran on the "
                            "CPU, and the code path ran with two small amp models on the host backend "
                            "and the CPU" % check_backend,
                     problems=bad)


# ---------------------------------------------------------------------------
# Report: results.json, results.md and the summary printed last
# ---------------------------------------------------------------------------

# ---------------------------------------------------------------------------
# Part 9: simulated vs measured on rows of the realistic table (issue 32)
# ---------------------------------------------------------------------------
def part_realistic():
    """Rows of docs/planner.md's realistic table run on the GPU: the plan's
    measured instructions time against the simulator's figure for the same
    plan on this machine (scripts/gpu/realistic_rows.py)."""
    part = Part("realistic")
    import realistic_rows
    rows = []
    part.set(rows=rows, rule="|simulated on %s - measured instructions| / measured <= %g, "
             "measured peak = planned peak" % (realistic_rows.H200_TARGET["name"],
                                              realistic_rows.TOLERANCE))
    cases = bundle_models("realistic")
    if not cases:
        return part.done("fail", reason="the bundle has no realistic rows")
    if ENV("KIT_BACKEND") != "cuda":
        # No GPU: each plan must have a CUDA kernel for every op, and its
        # spec must name every binding of the plan (a missing one would
        # stop the run there).
        bad = []
        check_backend = bundle_check_backend()
        for name, d, meta in cases:
            rc, out, _ = run_cmd([os.path.join(env_path("KIT_BIN"), "offload-run"),
                                  os.path.join(d, "step.oflp"), "--check", "--backend", check_backend], 60,
                                 env=bin_env(), log=log_path("realistic"))
            if rc != 0:
                bad.append("%s: %s" % (name, tail(out, 2)))
            spec = json.load(open(os.path.join(d, "spec.json")))
            names = {e["name"] for e in spec["params"] + spec["inputs"]}
            want = set(realistic_rows.bindings(env_path("KIT_BIN"), os.path.join(d, "step.oflp"),
                                               env=bin_env()))
            if names != want:
                bad.append("%s: spec and plan bindings differ: %s" % (name, sorted(names ^ want)[:5]))
        return part.done("fail" if bad else "skipped", problems=bad,
                         reason="no GPU (host backend): the rows are GPU-sized; their plans passed "
                                "offload-run --check --backend %s and their specs name every binding"
                                % check_backend)
    failed = run_cases(part, rows, cases, "row", "realistic", 20, 20,
                       lambda d, meta, work, seconds: realistic_rows.check(
                           d, meta, os.path.join(env_path("KIT_BIN"), "offload-run"), bin_env(),
                           work, seconds, parse_run, parse_profile))
    return part.done("fail" if failed else "ok")

ORDER = ["versions", "gtests", "memcheck", "plans", "sbs", "copy", "sdpa", "amp", "nccl", "realistic"]  # the order
TITLES = {"versions": "1. device, driver, libraries", "gtests": "2. Cuda* gtests",
          "memcheck": "2. compute-sanitizer memcheck", "plans": "3. carried plans vs host",
          "sbs": "4. side by side with PyTorch", "copy": "5. pinned copy throughput",
          "sdpa": "6. attention vs PyTorch SDPA", "amp": "7. bf16-mixed vs torch.autocast",
          "nccl": "8. NCCL, one rank, bit for bit",
          "realistic": "9. realistic rows: simulated vs measured"}


def load_parts():
    parts = {}
    d = env_path("KIT_PARTS")
    for name in ORDER:
        js = os.path.join(d, name + ".json")
        st = os.path.join(d, name + ".status")
        data = json.load(open(js)) if os.path.exists(js) else None
        status = json.load(open(st)) if os.path.exists(st) else None
        if data is None and status is None:
            continue
        data = data or {"part": name}
        if status:
            data["exit"] = status.get("exit")
            data["wall_seconds"] = status.get("seconds")
            data["time_limit"] = status.get("limit")
            if status.get("exit") == 124:
                data["status"] = "timeout"
            elif status.get("not_run"):
                data["status"] = "not run"
                data.setdefault("reason", status.get("not_run"))
            elif data.get("status") in (None, "running"):
                data["status"] = "error"
                data.setdefault("reason", "the part ended (exit %s) before recording a result"
                                % status.get("exit"))
        parts[name] = data
    return parts


def gib(b):
    return "-" if b is None else "%.2f GiB" % (b / 2**30)


def ms(s):
    return "-" if s is None else "%.1f ms" % (s * 1e3)


def one_line(name, d):
    """The summary line of a part."""
    st = d.get("status", "?")
    if st in ("skipped", "error", "timeout", "not run") and d.get("reason"):
        return d["reason"][:160]
    if name == "versions":
        i = d.get("info", {})
        t = i.get("torch", {})
        lo = i.get("loaded", {})
        smi = (i.get("nvidia_smi") or "").split(",")[0]
        s = "%s; driver %s; cudart %s; cuBLAS %s; cuDNN %s; torch %s" % (
            "no nvidia-smi" if smi in ("", "not found") else smi,
            i.get("driver_cuda_version") or lo.get("cudaDriverGetVersion"),
            lo.get("cudaRuntimeGetVersion"), lo.get("cublas"), lo.get("cudnnGetVersion"),
            t.get("torch"))
        if d.get("problems"):
            s += "; PROBLEMS: " + "; ".join(d["problems"])[:200]
        return s
    if name == "gtests":
        c = d.get("counts") or {}
        s = ", ".join("%d %s" % (v, k) for k, v in c.items() if v)
        bad = [t["test"] for t in d.get("tests", []) if t["result"] not in ("passed", "skipped")]
        return s + ("; not passed: " + ", ".join(bad)[:200] if bad else "") + (
            " (%s)" % d["note"] if d.get("note") else "")
    if name == "memcheck":
        return "; ".join("%s: %s%s" % (r["run"][:40], r["result"],
                                       "" if r.get("errors") is None else " (%s errors)" % r["errors"])
                         for r in d.get("runs", []))
    if name == "plans":
        out = []
        for r in d.get("models", []):
            bad = [k for k, v in r.get("checks", {}).items() if not v]
            errs = [x.get("rel_err_vs_host") for x in r.get("runs", {}).values()
                    if x.get("rel_err_vs_host") is not None]
            failed_runs = ["%s: %s" % (k, x["error"][:100]) for k, x in r.get("runs", {}).items()
                           if x.get("error")]
            what = ("err %.1e" % max(errs)) if errs else "no comparison"
            if r.get("error"):
                what = r["error"][:100]
            elif failed_runs:
                what += "; " + failed_runs[0]
            out.append("%s %s (%s%s)" % (r["model"], "ok" if r.get("ok") else "FAIL", what,
                                         "; failed: " + ", ".join(bad)[:120] if bad else ""))
        return "; ".join(out)
    if name == "copy":
        pub = d.get("published_gbps_per_direction")
        pct = lambda v: " (%.0f%%)" % (100.0 * v / pub) if pub and v else ""
        return "pinned h2d %.1f GB/s%s, d2h %.1f GB/s%s, both at once %.1f GB/s each; %s: %s GB/s " \
               "per direction published; h100-sxm target 45" % (
                   d.get("h2d_gbps") or 0, pct(d.get("h2d_gbps")), d.get("d2h_gbps") or 0,
                   pct(d.get("d2h_gbps")), d.get("both_directions_gbps_each") or 0, d.get("link", "?"),
                   pub if pub else "?")
    if name == "sdpa":
        parts = []
        for r in d.get("rows", []):
            if r.get("error"):
                parts.append("%s: %s" % (r["case"], r["error"][:120]))
                continue
            o = r.get("ours_ms", {})
            worst = max([kv for kv in r.get("errors", {}).items() if kv[0] != "loss"],
                        key=lambda kv: kv[1]["ours"] /
                        max(kv[1]["pytorch_fp32"], 1e-30), default=None)
            parts.append("%s %s: ours %s+%s ms, PyTorch fp32 %s ms fwd+bwd; worst %s %.1e vs "
                         "PyTorch's %.1e%s" % (
                             r["case"], r.get("shape", ""), o.get("attention", "?"),
                             o.get("attention_backward", "?"), r.get("pytorch_fp32_fwd_bwd_ms"),
                             worst[0] if worst else "-", worst[1]["ours"] if worst else 0,
                             worst[1]["pytorch_fp32"] if worst else 0,
                             "" if r.get("ok") else " FAIL"))
        return "; ".join(parts)
    if name == "amp" and d.get("problems"):
        return "PROBLEMS: " + "; ".join(d["problems"])[:300]
    if name == "amp":
        return "; ".join(
            "%s: %s" % (r["model"], r["error"][:120]) if r.get("error") else
            "%s ours %s / %s, autocast %s / %s, worst %s %.2f of the rule's 1x%s" % (
                r["model"], ms(r.get("ours_step_seconds")), gib(r.get("ours_peak")),
                ms(r.get("torch_step_seconds")), gib(r.get("torch_peak")), r.get("worst"),
                (r.get("worst_ratio") or 0) / AMP_FACTOR, "" if r.get("ok") else " FAIL")
            for r in d.get("rows", []))
    if name == "nccl":
        return "%s: " % d.get("engine", "?") + "; ".join(
            "%s %s%s" % (r["model"], "bit-identical" if r.get("ok") else "FAIL (%s)" % (
                r.get("error") or next((x["error"] for x in r.get("runs", {}).values()
                                        if x.get("error")), None) or r.get("differs")
                or r.get("zero1_differs")),
                " (and ZeRO-1)" if r.get("zero1_bit_identical") else "")
            for r in d.get("models", []))
    if name == "realistic" and d.get("problems"):
        return "PROBLEMS: " + "; ".join(d["problems"])[:300]
    if name == "realistic":
        return "; ".join(
            "%s: %s" % (r["row"], (r.get("error") or "")[:120]) if r.get("measured") is None else
            "%s measured %s, simulated %s %+.1f%% (row's %s %s)%s" % (
                r["row"].replace("realistic-", ""), ms(r["measured"]), ms(r["simulated_h200"]),
                100 * r["sim_error"], r["row_target"], ms(r["simulated_row"]),
                (" not judged" if not r.get("judged", True) else "") + ("" if r.get("ok") else " FAIL"))
            for r in d.get("rows", []))
    if name == "sbs" and d.get("problems"):
        return "PROBLEMS: " + "; ".join(d["problems"])[:300]
    if name == "sbs":
        return "%d rows%s" % (len(d.get("rows", [])), "; errors in: " + ", ".join(
            "%s %s" % (r["model"], r["variant"]) for r in d.get("rows", []) if r.get("error"))
            if any(r.get("error") for r in d.get("rows", [])) else "")
    return ""


def markdown(parts, kit):
    L = ["# GPU bring-up kit results", ""]
    L.append("backend `%s`, started %s, bundle %s, %s" % (
        kit.get("backend"), kit.get("started"), kit.get("bundle_commit"), kit.get("elapsed", "")))
    L += ["", "| part | status | seconds | result |", "|---|---|---:|---|"]
    for n in ORDER:
        if n in parts:
            d = parts[n]
            L.append("| %s | %s | %s | %s |" % (TITLES[n], d.get("status"), d.get("wall_seconds", ""),
                                                one_line(n, d).replace("|", "/")))
    if "versions" in parts:
        L += ["", "## 1. Versions", "", "```", json.dumps(parts["versions"].get("info", {}), indent=1),
              "```"]
    if "gtests" in parts:
        L += ["", "## 2. Cuda* gtests", "", "| test | result | s | why |", "|---|---|---:|---|"]
        for t in parts["gtests"].get("tests", []):
            L.append("| %s | %s | %s | %s |" % (t["test"], t["result"], t.get("seconds", ""),
                                               (t.get("why") or "").replace("\n", " ").replace("|", "/")[:300]))
    if "memcheck" in parts:
        L += ["", "## 2. compute-sanitizer", ""]
        for r in parts["memcheck"].get("runs", []):
            L.append("- %s: %s, errors %s, %s s" % (r["run"], r["result"], r.get("errors"), r.get("seconds")))
            if r.get("why"):
                L += ["```", r["why"], "```"]
    if "plans" in parts:
        L += ["", "## 3. Carried plans (loss and gradients vs the host backend, rtol %g)" % RTOL, "",
              "Relative error per tensor: max|ours - host| / max(max|host|, %g x the model's largest "
              "gradient), the largest over the loss and the gradients (in parentheses: with the floor "
              "1e-5 of test/drivers/pipeline.py instead, and the worst tensor)." % NOISE_FLOOR, "",
              "| model | run | exit | loss | planned peak | measured peak | budget | rel err vs host | step s |",
              "|---|---|---:|---:|---:|---:|---:|---:|---:|"]
        for r in parts["plans"].get("models", []):
            for k, x in r.get("runs", {}).items():
                st = x.get("steps") or [{}]
                L.append("| %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
                    r["model"], k, x.get("exit"), st[0].get("loss"), x.get("planned_peak"),
                    x.get("measured_peak"), r["budget"] if k.startswith("planned") else "-",
                    "%.2e (%.2e, %s)" % (x["rel_err_vs_host"], x["rel_err_vs_host_strict"], x["worst"])
                    if "rel_err_vs_host" in x else "-",
                    st[0].get("seconds")))
            for c, v in r.get("checks", {}).items():
                L.append("| %s | check: %s | | %s | | | | | |" % (r["model"], c, "ok" if v else "**FAIL**"))
            for k, x in r.get("runs", {}).items():
                if x.get("error"):
                    L.append("| %s | %s error | | %s | | | | | |" % (r["model"], k,
                                                                    x["error"].replace("|", "/")))
            if r.get("rerun_blocking"):
                rb = r["rerun_blocking"]
                L.append("| %s | %s again, CUDA_LAUNCH_BLOCKING=1 | %s | %s | | | | | |" % (
                    r["model"], rb["run"], rb["exit"], rb["error"].replace("|", "/")))
            if r.get("error"):
                L.append("| %s | error | | %s | | | | | |" % (r["model"], r["error"].replace("|", "/")))
    if "sbs" in parts:
        d = parts["sbs"]
        L += ["", "## 4. Side by side (same GPU; median of steps 2-%d)" % d.get("steps", SBS_STEPS), ""]
        def table(rows):
            out = ["| model | variant | step | instructions | simulated h100-sxm | instructions / "
                   "simulated | peak | budget | loss step 1 | note |",
                   "|---|---|---:|---:|---:|---:|---:|---:|---:|---|"]
            for r in rows:
                note = r.get("error") or ""
                if r.get("loss_rel_diff_vs_offload") is not None:
                    note += "loss vs offload unplanned %.1e" % r["loss_rel_diff_vs_offload"]
                ratio = "-"
                if r.get("instructions_seconds") and r.get("simulated_seconds"):
                    ratio = "%.2f" % (r["instructions_seconds"] / r["simulated_seconds"])
                out.append("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
                    r["model"], r["variant"], ms(r.get("step_seconds")), ms(r.get("instructions_seconds")),
                    ms(r.get("simulated_seconds")), ratio, gib(r.get("peak")), gib(r.get("budget")),
                    r.get("loss_first", "-"), " ".join(note.replace("|", "/").split())[:200]))
            return out
        if d.get("rows"):
            L += table(d["rows"])
        else:
            L.append(d.get("reason", ""))
            for k, v in list(d.get("plan_checks", {}).items()) + list(d.get("dry_run", {}).items()):
                L.append("- %s: %s" % (k, v))
            if d.get("self_test_rows"):
                L += ["", "Self-test of the code path (host backend and PyTorch on the CPU; the "
                      "figures say nothing about a GPU):", ""] + table(d["self_test_rows"])
    if parts.get("sbs", {}).get("profiles"):
        L += ["", "## 4b. Where the unplanned step's time goes (offload-run --profile: each "
              "instruction alone, the second step)", ""]
        for name, pr in parts["sbs"]["profiles"].items():
            L += ["### %s: %s s in all (exit %s)" % (name, pr.get("total_seconds"), pr.get("exit")), "",
                  "| op | count | seconds |", "|---|---:|---:|"]
            L += ["| %s | %d | %.6f |" % (o["op"], o["count"], o["seconds"]) for o in pr.get("ops", [])]
            L += ["", "```"] + pr.get("slowest", []) + ["```", ""]
    if "amp" in parts:
        d = parts["amp"]
        L += ["", "## 7. bf16-mixed: ours (CUDA) against torch.autocast(\"cuda\", torch.bfloat16), "
              "same GPU", "", "Forward and backward, gradients returned, no optimizer; median of steps "
              "2-%d; peak: our measured arena peak, PyTorch's max_memory_allocated. Rule: %s." % (
                  d.get("steps", AMP_STEPS), d.get("rule", "")), ""]
        def amp_table(rows):
            out = ["| model | ours step | ours peak | autocast step | autocast peak | loss err ours / "
                   "autocast | worst tensor | its err ours / autocast | ratio (<= %g) | note |" % AMP_FACTOR,
                   "|---|---:|---:|---:|---:|---|---|---|---:|---|"]
            for r in rows:
                fmt = lambda v: "-" if v is None else "%.1e" % v
                out.append("| %s | %s | %s | %s | %s | %s / %s | %s | %s / %s | %s | %s |" % (
                    r["model"], ms(r.get("ours_step_seconds")), gib(r.get("ours_peak")),
                    ms(r.get("torch_step_seconds")), gib(r.get("torch_peak")),
                    fmt(r.get("loss_err_ours")), fmt(r.get("loss_err_autocast")), r.get("worst", "-"),
                    fmt(r.get("worst_ours")), fmt(r.get("worst_autocast")),
                    "-" if r.get("worst_ratio") is None else "%.2f" % r["worst_ratio"],
                    " ".join((r.get("error") or ("ok" if r.get("ok") else "")).replace("|", "/")
                             .split())[:200]))
            return out
        if d.get("rows"):
            L += amp_table(d["rows"])
        else:
            L.append(d.get("reason", ""))
            for k, v in list(d.get("plan_checks", {}).items()) + list(d.get("dry_run", {}).items()):
                L.append("- %s: %s" % (k, v))
            if d.get("self_test_rows"):
                L += ["", "Self-test of the code path (host backend and PyTorch's CPU autocast; the "
                      "figures say nothing about a GPU):", ""] + amp_table(d["self_test_rows"])
    if "copy" in parts:
        d = parts["copy"]
        L += ["", "## 5. Pinned host<->device copies", ""]
        L.append("```\n%s\n```" % json.dumps({k: v for k, v in d.items() if k not in ("part", "started")},
                                              indent=1))
    if "realistic" in parts:
        d = parts["realistic"]
        L += ["", "## 9. Realistic rows: simulated vs measured (median of steps 2-%d)" % (
            max([len(r.get("instructions_each") or []) for r in d.get("rows", [])] or [0])), "",
              "Rule: %s." % d.get("rule", ""), "",
              "| row | decisions | measured instructions | measured step | simulated (this GPU) | error | "
              "row's simulated | peak | note |", "|---|---|---:|---:|---:|---:|---:|---:|---|"]
        for r in d.get("rows", []):
            L.append("| %s | %s | %s | %s | %s | %s | %s %s | %s | %s |" % (
                r["row"], (r.get("decisions") or "")[:80], ms(r.get("measured")), ms(r.get("measured_step")),
                ms(r.get("simulated_h200")),
                "%+.1f%%" % (100 * r["sim_error"]) if r.get("sim_error") is not None else "-",
                r.get("row_target", ""), ms(r.get("simulated_row")), gib(r.get("peak")),
                (r.get("error") or ("not judged (bf16)" if not r.get("judged", True) else "ok"
                                    if r.get("ok") else "FAIL")).replace("|", "/")[:200]))
    return "\n".join(L) + "\n"


def summary_table(parts, kit):
    L = ["", "==== offload GPU kit summary (%s backend, %s) ====" % (kit.get("backend"), kit.get("elapsed", ""))]
    for n in ORDER:
        if n in parts:
            d = parts[n]
            L.append("%-31s %-8s %6s s  %s" % (TITLES[n], d.get("status"), d.get("wall_seconds", ""),
                                               one_line(n, d)))
    if "sbs" in parts and parts["sbs"].get("rows"):
        L.append("side by side: model / variant / step / instructions / simulated / peak")
        for r in parts["sbs"]["rows"]:
            L.append("  %-13s %-20s %10s %10s %10s %10s %s" % (
                r["model"], r["variant"], ms(r.get("step_seconds")), ms(r.get("instructions_seconds")),
                ms(r.get("simulated_seconds")), gib(r.get("peak")), (r.get("error") or "")[:80]))
    if "amp" in parts and parts["amp"].get("rows"):
        L.append("bf16-mixed: model / ours step / ours peak / autocast step / autocast peak / worst "
                 "ratio (<= %g)" % AMP_FACTOR)
        for r in parts["amp"]["rows"]:
            L.append("  %-13s %10s %10s %10s %10s %6s %s" % (
                r["model"], ms(r.get("ours_step_seconds")), gib(r.get("ours_peak")),
                ms(r.get("torch_step_seconds")), gib(r.get("torch_peak")),
                "-" if r.get("worst_ratio") is None else "%.2f" % r["worst_ratio"],
                (r.get("error") or "")[:80]))
    for r in (parts.get("amp", {}).get("rows") or []):
        pr = r.get("profile") or {}
        if pr.get("ops"):
            L.append("profile %s bf16-mixed (%s): %s" % (r["model"], ms(pr.get("total_seconds")), ", ".join(
                "%s %s/%d" % (o["op"].replace("offload.", ""), ms(o["seconds"]), o["count"])
                for o in pr["ops"][:10])))
    for r in (parts.get("realistic", {}).get("rows") or []):
        pr = r.get("profile") or {}
        if pr.get("ops"):
            L.append("profile %s (%s): %s" % (r["row"], ms(pr.get("total_seconds")), ", ".join(
                "%s %s/%d" % (o["op"].replace("offload.", ""), ms(o["seconds"]), o["count"])
                for o in pr["ops"][:10])))
    for name, pr in (parts.get("sbs", {}).get("profiles") or {}).items():
        top = ", ".join("%s %s/%d" % (o["op"].replace("offload.", ""), ms(o["seconds"]), o["count"])
                        for o in pr.get("ops", [])[:8])
        L.append("profile %s unplanned (%s): %s" % (name, ms(pr.get("total_seconds")), top))
    return "\n".join(L)


def part_report(print_summary):
    out = env_path("KIT_OUT")
    parts = load_parts()
    kit = json.load(open(os.path.join(env_path("KIT_PARTS"), "kit.json"))) \
        if os.path.exists(os.path.join(env_path("KIT_PARTS"), "kit.json")) else {}
    if kit.get("t0"):
        kit["elapsed"] = "%.0f s" % (now() - kit["t0"])
    res = {"kit": kit, "parts": parts}
    for fn, text in (("results.json", json.dumps(res, indent=1, default=str)),
                     ("results.md", markdown(parts, kit))):
        tmp = os.path.join(out, fn + ".tmp")
        with open(tmp, "w") as f:
            f.write(text)
        os.replace(tmp, os.path.join(out, fn))
    if print_summary:
        print(summary_table(parts, kit))
    bad = [n for n, d in parts.items() if d.get("status") not in ("ok", "skipped")]
    return 1 if bad else 0


def main(argv):
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__)
        return 0
    cmd = argv[0]
    table = {"versions": part_versions, "gtests": part_gtests, "memcheck": part_memcheck,
             "plans": part_plans, "sbs": part_sbs, "copy": part_copy, "sdpa": part_sdpa,
             "amp": part_amp, "nccl": part_nccl, "realistic": part_realistic}
    if cmd == "report" and "--line" in argv:
        name = argv[argv.index("--line") + 1]
        d = load_parts().get(name)
        if d:
            print("   %s: %s: %s" % (name, d.get("status"), one_line(name, d)))
        return 0
    if cmd == "report":
        return part_report("--print" in argv)
    if cmd not in table:
        print("kit.py: unknown part %r (see --help)" % cmd, file=sys.stderr)
        return 2
    import signal
    signal.signal(signal.SIGTERM, _on_term)
    try:
        return table[cmd]()
    except Exception as e:  # noqa: BLE001 (recorded: the run goes on with the next part)
        import traceback
        p = os.path.join(env_path("KIT_PARTS"), cmd + ".json")
        data = json.load(open(p)) if os.path.exists(p) else {"part": cmd}
        data.update(status="error", reason="%s: %s" % (type(e).__name__, e),
                    traceback=traceback.format_exc()[-3000:])
        with open(p, "w") as f:
            json.dump(data, f, indent=1, default=str)
        traceback.print_exc()
        return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
