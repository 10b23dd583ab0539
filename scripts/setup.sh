#!/usr/bin/env bash
#===- scripts/setup.sh - install offload's dependencies and build it ------===#
#
# Idempotent: a Debian package already present is not reinstalled, and the
# build directory is reused.  Usage:
#
#   scripts/setup.sh [--no-build]
#
# Environment: BUILD_DIR (default: build), OFFLOAD_CUDA=ON|OFF (default: ON
# when nvcc is found), CMAKE_BUILD_TYPE (default: Release).
#===----------------------------------------------------------------------===#
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD_DIR="${BUILD_DIR:-$ROOT/build}"

# Every Debian package the project uses, with why.
PACKAGES=(
  cmake ninja-build g++ lld-22          # build tools (lld links ~5x faster)
  libmlir-22-dev mlir-22-tools          # MLIR 22 (dialect, passes, offload-opt)
  llvm-22-dev llvm-22-tools             # LLVM support libraries, lit, FileCheck
  libzstd-dev                           # offload-tblgen links LLVM's static TableGen/Support
  libtorch-dev                          # LibTorch 1.13: importer and reference tests
  python3-torch python3-torchvision     # export test models (.pt) at test time
  python3-numpy                         # read/write .npz from the Python scripts
  libflatbuffers-dev flatbuffers-compiler  # versioned plan file format
  libopenblas-dev                       # matrix products on the host backend
  libzip-dev                            # .npz (zip) parameter/result files
  zlib1g-dev                            # CRC-32 checksum of plan files
  libgtest-dev                          # C++ unit tests
  libgloo-dev                           # data parallel on the host backend: gloo collectives (PyTorch's), docs/data_parallel.md
  ccache                                # reuse object files across rebuilds
  pybind11-dev python3-pybind11         # Python bindings of the runtime (python/offload)
  python3-pytest                        # tests of the Python package
  python3-matplotlib                    # step.plot_memory() and the example's loss curves
  python3-sklearn                       # the digits data set of examples/python
  python3-scipy                         # the planner's exact oracle (bench/planner/oracle.py: milp, HiGHS)
  clang-22 libclang-rt-22-dev           # libFuzzer, ASan/UBSan/TSan (scripts/fuzz.sh, scripts/sanitize.sh)
)

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if ((${#missing[@]})); then
  echo "setup: installing Debian packages: ${missing[*]}"
  SUDO=""
  if [[ $(id -u) -ne 0 ]]; then SUDO="sudo"; fi
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  if ! $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"; then
    echo "setup: error: could not install: ${missing[*]}" >&2
    echo "setup: these come from Debian 12 (bookworm) and bookworm-security; check apt sources" >&2
    exit 1
  fi
else
  echo "setup: all ${#PACKAGES[@]} Debian packages present"
fi

# A current PyTorch from PyPI in its own environment, for the .pt2 importer and its tests.
if [[ "${OFFLOAD_TORCH2:-ON}" != "OFF" ]]; then
  "$ROOT/scripts/setup-torch2.sh"
fi

if [[ "${1:-}" == "--no-build" ]]; then exit 0; fi

CUDA_FLAG=()
if [[ -n "${OFFLOAD_CUDA:-}" ]]; then CUDA_FLAG=(-DOFFLOAD_ENABLE_CUDA="$OFFLOAD_CUDA"); fi

if [[ ! -f "$BUILD_DIR/build.ninja" ]]; then
  cmake -S "$ROOT" -B "$BUILD_DIR" -G Ninja \
    -DCMAKE_BUILD_TYPE="${CMAKE_BUILD_TYPE:-Release}" \
    -DMLIR_DIR=/usr/lib/llvm-22/lib/cmake/mlir \
    -DLLVM_EXTERNAL_LIT=/usr/lib/llvm-22/bin/lit \
    "${CUDA_FLAG[@]}"
fi
cmake --build "$BUILD_DIR"
