#!/usr/bin/env bash
#===- scripts/fuzz.sh - build the libFuzzer targets and fuzz them ----------===#
#
# Builds fuzz/ with clang (libFuzzer, ASan+UBSan) in its own build directory
# and runs each target for SECONDS from the seed corpus (fuzz/CMakeLists.txt).
#
#   scripts/fuzz.sh [SECONDS] [TARGET...]     # default 60 s, every target
#   scripts/fuzz.sh 3600                      # the hour-per-target run
#   scripts/fuzz.sh 30 FuzzPlan               # one target
#
# Environment: FUZZ_BUILD_DIR (default build-fuzz), CLANGXX (default
# clang++-22, from Debian's clang-22; libclang-rt-22-dev has libFuzzer).
# Crashes are written to $FUZZ_BUILD_DIR/fuzz/work-<target>/artifacts; the
# script exits non-zero if any target found one. Figures: docs/reliability.md.
#===----------------------------------------------------------------------===#
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="${FUZZ_BUILD_DIR:-$ROOT/build-fuzz}"
CLANGXX="${CLANGXX:-clang++-22}"
SECONDS_PER_TARGET="${1:-60}"
shift || true
TARGETS=("$@")
if ((${#TARGETS[@]} == 0)); then TARGETS=(FuzzPlan FuzzNpz FuzzMlir FuzzPt2 FuzzJson); fi

if ! command -v "$CLANGXX" >/dev/null; then
  echo "fuzz: $CLANGXX not found; install clang-22 and libclang-rt-22-dev (scripts/setup.sh)" >&2
  exit 1
fi
CLANG="${CLANGXX/clang++/clang}"
SAN="-fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer -g -O1"
if [[ ! -f "$BUILD/build.ninja" ]]; then
  cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_C_COMPILER="$CLANG" -DCMAKE_CXX_COMPILER="$CLANGXX" \
    -DCMAKE_C_FLAGS="$SAN" -DCMAKE_CXX_FLAGS="$SAN" \
    -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=address,undefined" \
    -DMLIR_DIR=/usr/lib/llvm-22/lib/cmake/mlir \
    -DLLVM_EXTERNAL_LIT=/usr/lib/llvm-22/bin/lit \
    -DOFFLOAD_ENABLE_CUDA=OFF -DOFFLOAD_FUZZ=ON \
    -DOFFLOAD_FUZZ_SECONDS="$SECONDS_PER_TARGET"
else
  cmake "$BUILD" -DOFFLOAD_FUZZ_SECONDS="$SECONDS_PER_TARGET" >/dev/null
fi
cmake --build "$BUILD" --target "${TARGETS[@]}" offload-mlp-plan-gen
cd "$BUILD"
regex="^fuzz-seeds.generate$"
for t in "${TARGETS[@]}"; do regex="$regex|^fuzz\\.$t\$"; done
ctest --output-on-failure -R "$regex" --timeout $((SECONDS_PER_TARGET + 600))
