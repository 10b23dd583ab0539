#!/bin/sh
# ctest python-package.torch2: the package's pytest files under PyTorch 2.x
# (scripts/torch2-python, the venv of scripts/setup-torch2.sh).
#   run_torch2.sh SOURCE_DIR TEST_DIR
# Exit 77 (ctest SKIP_RETURN_CODE) when the venv does not exist (a setup with
# OFFLOAD_TORCH2=OFF); an error naming the fix when it lacks pytest.
src="$1"; tests="$2"
venv="${OFFLOAD_TORCH2_VENV:-$src/.venv-torch2}"
if [ ! -x "$venv/bin/python" ]; then
  echo "python-package.torch2: SKIP: no PyTorch 2.x environment at $venv" \
       "(scripts/setup-torch2.sh makes it; setup with OFFLOAD_TORCH2=OFF leaves it out)"
  exit 77
fi
if ! "$src/scripts/torch2-python" -c "import pytest, matplotlib" 2>/dev/null; then
  echo "python-package.torch2: $venv has no pytest or matplotlib; run scripts/setup-torch2.sh" >&2
  exit 1
fi
exec "$src/scripts/torch2-python" -m pytest -q -p no:cacheprovider "$tests"
