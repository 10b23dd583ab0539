#!/bin/sh
# `pip install` of the checkout into a fresh venv (ctest python-package.pip-install).
# usage: pip_install_test.sh PYTHON SOURCE_DIR BUILD_DIR WORK_DIR
# Makes a venv with --system-site-packages (Debian's torch and numpy), installs
# the checkout with --no-build-isolation (Debian's setuptools; no network),
# then, from a folder outside the checkout and without PYTHONPATH, imports the
# installed package, checks that the wheel's record (the dist-info RECORD)
# lists the four tools in offload/bin and that the package resolves each of
# them there, and compiles and runs two steps of a small MLP with those tools
# (its lower stage runs offload-translate).
set -eu
py=$1 src=$2 build=$3 work=$4
rm -rf "$work" && mkdir -p "$work"
"$py" -m venv --system-site-packages "$work/venv"
OFFLOAD_BUILD_DIR="$build" "$work/venv/bin/pip" install -q --no-build-isolation "$src"
cd "$work"
env -u PYTHONPATH -u OFFLOAD_BIN "$work/venv/bin/python" - <<'PY'
import os, sys
from importlib import metadata
import offload, _offload_runtime, torch, torch.nn as nn
venv = os.path.join(os.getcwd(), "venv")
tools = ("offload-import", "offload-opt", "offload-translate", "offload-run")
for what, path in (("offload", offload.__file__), ("_offload_runtime", _offload_runtime.__file__),
                   ("tools", offload._tools.bin_dir())) + tuple(
                       (t, offload._tools.tool(t)) for t in tools):
    assert os.path.realpath(path).startswith(os.path.realpath(venv)), (what, path)
record = {str(f) for f in metadata.files("offload")}
missing = [t for t in tools if "offload/bin/" + t not in record]
assert not missing, ("the wheel lacks", missing, sorted(record))
torch.manual_seed(0)
m = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3))
x, y = torch.randn(5, 4), torch.randint(0, 3, (5,))
step = offload.compile(m, (x, y), loss="cross_entropy", optimizer=offload.SGD(lr=0.1))
l0, l1 = step(x, y), step(x, y)
assert l1 < l0, (l0, l1)
lowered = [c for c in step.log if c.startswith("$ ")][-1].split()
assert lowered[1:3] == [offload._tools.tool("offload-translate"), "--offload-to-plan"], lowered
print("installed in", os.path.dirname(offload.__file__), "losses", l0, l1)
PY
