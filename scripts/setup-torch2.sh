#!/usr/bin/env bash
#===- scripts/setup-torch2.sh - a current PyTorch from PyPI, beside Debian's --===#
#
# Debian 12 ships PyTorch 1.13 (python3-torch), which has TorchScript but no
# torch.export. The .pt2 importer, its tests and the PyTorch 2.x path of the
# Python package need a current PyTorch; it lives in its own virtual
# environment so Debian's stays the default for everything else.
#
#   scripts/setup-torch2.sh            create or check $ROOT/.venv-torch2
#   scripts/torch2-python ARGS...      run its python (sets the library path)
#
# Idempotent: an environment whose torch imports at the pinned version is kept.
#
# Only the CPU side of PyTorch is used, but PyPI's Linux wheel links against
# CUDA 13 libraries. Most of them come from this machine's CUDA 13 toolkit
# (/usr/local/cuda/lib64); the four it lacks (cuFile, cuSPARSELt, NVSHMEM and a
# newer NCCL) are installed from PyPI. This keeps the download at about 1 GB
# instead of the ~4 GB of the wheel's full dependency set.
#===----------------------------------------------------------------------------===#
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${OFFLOAD_TORCH2_VENV:-$ROOT/.venv-torch2}"
TORCH_VERSION=2.15.0

PIP_NO_DEPS=(
  "torch==$TORCH_VERSION"
  "nvidia-cufile==1.17.1.22.*"
  "nvidia-cusparselt-cu13==0.8.1"
  "nvidia-nvshmem-cu13==3.7.2"
  "nvidia-nccl-cu13==2.30.7"
)
# torchvision for resnet18 in bench/planner/pytorch_partitioner.py (its model
# definitions only); 0.29.2 is the newest on PyPI, built against torch 2.14, and
# its ops load against 2.15. Without deps: its torch pin would replace ours.
PIP_EXTRAS_NO_DEPS=("torchvision==0.29.2" "pillow==13.0.0")
PIP_DEPS=(filelock "typing-extensions>=4.13.0" "sympy>=1.13.3" "networkx>=2.5.1" jinja2 "fsspec>=0.8.5" numpy)

ensure_extras() {
  if ! "$ROOT/scripts/torch2-python" -c "import torchvision, PIL" 2>/dev/null; then
    echo "setup-torch2: adding ${PIP_EXTRAS_NO_DEPS[*]} to $VENV"
    "$VENV/bin/pip" install -q --disable-pip-version-check --no-deps "${PIP_EXTRAS_NO_DEPS[@]}"
  fi
}

if "$ROOT/scripts/torch2-python" -c "import torch, sys; sys.exit(torch.__version__.split('+')[0] != '$TORCH_VERSION')" 2>/dev/null; then
  echo "setup-torch2: PyTorch $TORCH_VERSION present in $VENV"
  ensure_extras
  exit 0
fi

if [[ ! -d /usr/local/cuda/lib64 ]]; then
  echo "setup-torch2: error: /usr/local/cuda/lib64 not found; PyPI's torch wheel needs the CUDA 13 runtime libraries" >&2
  exit 1
fi

echo "setup-torch2: creating $VENV with PyTorch $TORCH_VERSION from PyPI (about 1 GB)"
rm -rf "$VENV"
/usr/bin/python3 -m venv "$VENV"
"$VENV/bin/pip" install -q --disable-pip-version-check --no-deps "${PIP_NO_DEPS[@]}"
# pip's resolver then lists the CUDA packages deliberately left out above; show its output only on failure.
log="$(mktemp)"
if ! "$VENV/bin/pip" install -q --disable-pip-version-check "${PIP_DEPS[@]}" >"$log" 2>&1; then
  cat "$log" >&2; rm -f "$log"; exit 1
fi
rm -f "$log"
ensure_extras
"$ROOT/scripts/torch2-python" -c "import torch; print('setup-torch2: torch', torch.__version__, 'imports')"
