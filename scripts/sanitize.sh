#!/usr/bin/env bash
#===- scripts/sanitize.sh - the test suite under ASan+UBSan and TSan -------===#
#
# Two separate build trees, both with clang-22:
#   build-fuzz: the whole project under AddressSanitizer + UndefinedBehavior-
#               Sanitizer (-fno-sanitize-recover: any report fails the test),
#               the tree scripts/fuzz.sh fuzzes in; runs ctest (unit tests,
#               lit, the zoo smoke subset).
#   build-tsan: the runtime under ThreadSanitizer: the kernel thread pool,
#               the host backend's copy-stream threads and poison mode; runs
#               the runtime unit tests (sessions at several thread counts,
#               poison mode, multi-plan stores, the executor) and the
#               offload-run tests.
#               The kernel tests against LibTorch are left out: LibTorch is
#               not instrumented.
#
#   scripts/sanitize.sh [asan|tsan|all] [CTEST_REGEX]
#
# Slow (a full build per tree on this machine's 2 cores), so not part of
# scripts/run-tests.sh; figures and coverage in docs/reliability.md.
# LibTorch is not instrumented: the kernel tests that compare with it run,
# but its own code is not checked.
#===----------------------------------------------------------------------===#
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
WHICH="${1:-all}"
REGEX="${2:-}"
CLANG=clang-22
CLANGXX=clang++-22
command -v "$CLANGXX" >/dev/null || {
  echo "sanitize: $CLANGXX not found; install clang-22 libclang-rt-22-dev (scripts/setup.sh)" >&2
  exit 1
}

configure() { # dir flags
  local dir="$1" flags="$2"
  if [[ ! -f "$dir/build.ninja" ]]; then
    cmake -S "$ROOT" -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
      -DCMAKE_C_COMPILER=$CLANG -DCMAKE_CXX_COMPILER=$CLANGXX \
      -DCMAKE_C_FLAGS="$flags" -DCMAKE_CXX_FLAGS="$flags" \
      -DCMAKE_EXE_LINKER_FLAGS="$flags" -DCMAKE_SHARED_LINKER_FLAGS="$flags" \
      -DMLIR_DIR=/usr/lib/llvm-22/lib/cmake/mlir \
      -DLLVM_EXTERNAL_LIT=/usr/lib/llvm-22/bin/lit -DOFFLOAD_ENABLE_CUDA=OFF
  fi
}

status=0
if [[ "$WHICH" == asan || "$WHICH" == all ]]; then
  # One instrumented tree serves this script and scripts/fuzz.sh (the same
  # directory and flags): ASan+UBSan everywhere, plus libFuzzer's coverage
  # counters (fuzzer-no-link), which change no behaviour.
  dir="${ASAN_BUILD_DIR:-${FUZZ_BUILD_DIR:-$ROOT/build-fuzz}}"
  flags="-fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer -g -O1"
  if [[ ! -f "$dir/build.ninja" ]]; then
    cmake -S "$ROOT" -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
      -DCMAKE_C_COMPILER=$CLANG -DCMAKE_CXX_COMPILER=$CLANGXX \
      -DCMAKE_C_FLAGS="$flags" -DCMAKE_CXX_FLAGS="$flags" \
      -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=address,undefined" \
      -DMLIR_DIR=/usr/lib/llvm-22/lib/cmake/mlir \
      -DLLVM_EXTERNAL_LIT=/usr/lib/llvm-22/bin/lit -DOFFLOAD_ENABLE_CUDA=OFF -DOFFLOAD_FUZZ=ON
  fi
  cmake --build "$dir"
  # Leaks are not errors here: MLIR and LibTorch keep process-lifetime
  # singletons. allow_user_poisoning=0: LLVM's header-only allocators
  # (BumpPtrAllocator) poison and unpoison their slabs when compiled with
  # ASan, and Debian's libMLIR (not instrumented) has its own copies that do
  # not unpoison, so an MLIR memmove into a slab that our code poisoned was
  # reported as use-after-poison (a false positive of the mixed build; real
  # heap, stack and global errors are still reported).
  # Left out: the fuzzing runs (label fuzz, scripts/fuzz.sh), the full zoo
  # (label zoo, hours), the Python package and examples (a sanitized
  # extension module cannot load into an uninstrumented python3) and the
  # installed-example build (it links our instrumented libraries without
  # the sanitizer runtimes).
  (cd "$dir" && ASAN_OPTIONS=detect_leaks=0:abort_on_error=1:allow_user_poisoning=0 \
     UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
     ctest --output-on-failure -j "$(nproc)" --timeout 3000 -LE '^(fuzz|zoo)$' \
       -E '^(python-package.*|example\.python\..*|example\.train_step\.installed)$' \
       ${REGEX:+-R "$REGEX"}) || status=1
fi
if [[ "$WHICH" == tsan || "$WHICH" == all ]]; then
  dir="${TSAN_BUILD_DIR:-$ROOT/build-tsan}"
  configure "$dir" "-fsanitize=thread -fno-omit-frame-pointer -g -O1"
  cmake --build "$dir" --target OffloadRuntimeTests offload-run offload-mlp-plan-gen
  (cd "$dir" && TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1 \
     ctest --output-on-failure -j 1 --timeout 3000 \
       -R "${REGEX:-^(PlanTest|SessionTest|ExecutorTest|MlpTest|WorkspaceTest|CoverageTest|KernelGeometry|PlanChecksum|PlanValidation|runtime\\.offload-run)}") || status=1
fi
exit $status
