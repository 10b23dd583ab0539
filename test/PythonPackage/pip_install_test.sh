#!/bin/sh
# `pip install` of the checkout into a fresh venv (ctest python-package.pip-install).
# usage: pip_install_test.sh PYTHON SOURCE_DIR BUILD_DIR WORK_DIR
# Makes a venv with --system-site-packages (Debian's torch and numpy), installs
# the checkout with --no-build-isolation (Debian's setuptools; no network),
# then, from a folder outside the checkout and without PYTHONPATH, imports the
# installed package and compiles and runs two steps of a small MLP with the
# tools the wheel carries (offload/bin).
set -eu
py=$1 src=$2 build=$3 work=$4
rm -rf "$work" && mkdir -p "$work"
"$py" -m venv --system-site-packages "$work/venv"
OFFLOAD_BUILD_DIR="$build" "$work/venv/bin/pip" install -q --no-build-isolation "$src"
cd "$work"
env -u PYTHONPATH -u OFFLOAD_BIN "$work/venv/bin/python" - <<'PY'
import os, sys
import offload, _offload_runtime, torch, torch.nn as nn
venv = os.path.join(os.getcwd(), "venv")
for what, path in (("offload", offload.__file__), ("_offload_runtime", _offload_runtime.__file__),
                   ("tools", offload._tools.bin_dir())):
    assert os.path.realpath(path).startswith(os.path.realpath(venv)), (what, path)
torch.manual_seed(0)
m = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3))
x, y = torch.randn(5, 4), torch.randint(0, 3, (5,))
step = offload.compile(m, (x, y), loss="cross_entropy", optimizer=offload.SGD(lr=0.1))
l0, l1 = step(x, y), step(x, y)
assert l1 < l0, (l0, l1)
print("installed in", os.path.dirname(offload.__file__), "losses", l0, l1)
PY
