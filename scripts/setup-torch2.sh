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
# Idempotent: an environment whose torch imports at the pinned version and
# whose test packages import is kept as it is; one with the right torch but
# without the test packages only gets those installed.
#
# Model libraries: torchvision, timm (no dependencies) and transformers,
# diffusers (with theirs: huggingface-hub, tokenizers, safetensors, ...; not
# torch), pinned, for the model zoo's timm and HF sets (test/drivers/zoo.py).
#
# Test packages (PIP_TEST): pytest for the Python package's tests under
# PyTorch 2.x (ctest python-package.torch2) and matplotlib for Step.plot_memory
# and examples/python/train_digits.py's figures. The digits data that example
# reads is Debian's python3-sklearn's CSV file (no scikit-learn here).
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
# timm for the timm models of issue 28 (timm.create_model(..., pretrained=False)
# needs none of its other dependencies: huggingface_hub, safetensors and pyyaml
# are imported only to download or read pretrained weights).
PIP_EXTRAS_NO_DEPS=("torchvision==0.29.2" "pillow==13.0.0" "timm==1.0.31")
# transformers and diffusers for the HuggingFace models of issue 28 (built from
# their config classes, no download). Installed with their dependencies (none
# of them is torch; numpy is already there), the HF libraries pinned.
PIP_HF=("transformers==5.23.0" "diffusers==0.42.1" "huggingface-hub==2.4.0" "tokenizers==0.23.3" "safetensors==0.8.0")
PIP_DEPS=(filelock "typing-extensions>=4.13.0" "sympy>=1.13.3" "networkx>=2.5.1" jinja2 "fsspec>=0.8.5" numpy)
PIP_TEST=("pytest==9.2.0" "matplotlib==3.11.2")
TEST_IMPORTS="import pytest, matplotlib"

install_quietly() {  # pip install ARGS..., its output shown only on failure
  local log
  log="$(mktemp)"
  if ! "$VENV/bin/pip" install -q --disable-pip-version-check "$@" >"$log" 2>&1; then
    cat "$log" >&2; rm -f "$log"; exit 1
  fi
  rm -f "$log"
}

ensure_extras() {
  if ! "$ROOT/scripts/torch2-python" -c "import torchvision, PIL, timm" 2>/dev/null; then
    echo "setup-torch2: adding ${PIP_EXTRAS_NO_DEPS[*]} to $VENV"
    "$VENV/bin/pip" install -q --disable-pip-version-check --no-deps "${PIP_EXTRAS_NO_DEPS[@]}"
  fi
  if ! "$ROOT/scripts/torch2-python" -c "import transformers, diffusers" 2>/dev/null; then
    echo "setup-torch2: adding ${PIP_HF[*]} to $VENV"
    install_quietly "${PIP_HF[@]}"
  fi
}

if "$ROOT/scripts/torch2-python" -c "import torch, sys; sys.exit(torch.__version__.split('+')[0] != '$TORCH_VERSION')" 2>/dev/null; then
  ensure_extras
  if "$ROOT/scripts/torch2-python" -c "$TEST_IMPORTS" 2>/dev/null; then
    echo "setup-torch2: PyTorch $TORCH_VERSION, pytest and matplotlib present in $VENV"
    exit 0
  fi
  echo "setup-torch2: PyTorch $TORCH_VERSION present in $VENV; adding ${PIP_TEST[*]}"
  install_quietly "${PIP_TEST[@]}"
  "$ROOT/scripts/torch2-python" -c "$TEST_IMPORTS"
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
install_quietly "${PIP_DEPS[@]}" "${PIP_TEST[@]}"
ensure_extras
"$ROOT/scripts/torch2-python" -c "import torch; print('setup-torch2: torch', torch.__version__, 'imports')"
"$ROOT/scripts/torch2-python" -c "$TEST_IMPORTS"
