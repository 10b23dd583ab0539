#!/bin/sh
# Runs scripts/torch2-python ARGS... (the venv of scripts/setup-torch2.sh,
# PyTorch 2.x) for the ctests python-package.torch2 and
# example.python.train_digits.torch2:
#   run_torch2.sh SOURCE_DIR ARGS...
# Exit 77 (ctest SKIP_RETURN_CODE) when the venv does not exist (a setup with
# OFFLOAD_TORCH2=OFF); an error naming the fix when it lacks pytest or
# matplotlib (setup-torch2.sh adds them).
src="$1"; shift
venv="${OFFLOAD_TORCH2_VENV:-$src/.venv-torch2}"
if [ ! -x "$venv/bin/python" ]; then
  echo "SKIP: no PyTorch 2.x environment at $venv" \
       "(scripts/setup-torch2.sh makes it; setup with OFFLOAD_TORCH2=OFF leaves it out)"
  exit 77
fi
if ! "$src/scripts/torch2-python" -c "import pytest, matplotlib" 2>/dev/null; then
  echo "error: $venv has no pytest or matplotlib; run scripts/setup-torch2.sh" >&2
  exit 1
fi
exec "$src/scripts/torch2-python" "$@"
