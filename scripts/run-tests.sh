#!/usr/bin/env bash
#===- scripts/run-tests.sh - set up, build, and run the whole test suite --===#
#
# README command (2). Installs what is missing (scripts/setup.sh), builds, and
# runs every test through ctest: the lit suite (dialect, passes, importer,
# runtime tools), the C++ unit tests (kernels against LibTorch, runtime), and
# the Python script tests and the zoo smoke subset (the full zoo, label zoo,
# is left out: `ctest -L zoo`). ctest's closing summary is the last line printed.
#===----------------------------------------------------------------------===#
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD_DIR="${BUILD_DIR:-$ROOT/build}"
start=$(date +%s)
"$ROOT/scripts/setup.sh"
echo "run-tests: build ready after $(( $(date +%s) - start )) s"
cd "$BUILD_DIR"
ctest --output-on-failure -j "$(nproc)" --timeout 1500 -LE zoo
