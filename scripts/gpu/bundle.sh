#!/usr/bin/env bash
#===- scripts/gpu/bundle.sh - build the GPU bring-up kit's bundle ---------===#
#
# Builds, on this machine, everything the GPU machine needs that its checkout
# lacks, into one ignored folder (default gpu-bundle/, at most 50 MiB): see
# docs/gpu.md. Then run it there with scripts/gpu/run.sh.
#
#   gpu-bundle/binaries.tar.gz  bin/offload-run, bin/OffloadRuntimeTests (CUDA
#                               for sm_90, built here), lib/ (the shared
#                               libraries they need that the GPU machine
#                               lacks: libzip, OpenBLAS, libgfortran, ...),
#                               lib-fallback/ (libcudart, libz, libbz2,
#                               libcrypto: used there only when it has none)
#   gpu-bundle/models.tar.gz    models/NAME/: plans, specs, planner reports,
#                               host references (scripts/gpu/prepare.py)
#   gpu-bundle/MANIFEST.json    what is inside: commit, sizes, sha256, libraries
#
# Never carried: the C library, libstdc++, libgcc_s (the GPU machine's own,
# newer ones serve), cuBLAS, cuDNN and NCCL (located there, in PyTorch's pip
# packages), weights and batches (generated there from a seed: gen.py).
#===----------------------------------------------------------------------===#
set -euo pipefail

usage() {
  cat <<'EOF'
usage: scripts/gpu/bundle.sh [--build-dir DIR] [--out DIR] [--no-build]
                             [--models LIST] [--max-mib N]

Builds offload-run and OffloadRuntimeTests (target of unittests/Runtime) in
the build directory, then assembles the GPU kit's bundle.

  --build-dir DIR  the CMake build directory (default: $BUILD_DIR or build/)
  --out DIR        the bundle folder (default: gpu-bundle/ in the checkout);
                   replaced whole
  --no-build       use the binaries as built (fail if one is missing)
  --models LIST    comma-separated subset of resnet18,transformer,gpt,
                   resnet18-224,gpt2-small,resnet18-amp,gpt2-amp,
                   resnet18-amp-mini,gpt-amp-mini (default: all)
  --max-mib N      fail when the bundle is larger (default 50)
  --help           this text

Needs: the build (CUDA enabled: OFFLOAD_ENABLE_CUDA, default when nvcc is
found), /usr/bin/python3 with Debian's PyTorch 1.13 (the importer reads its
TorchScript), ldd, tar, gzip.
EOF
}

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
BUILD_DIR="${BUILD_DIR:-$ROOT/build}"
OUT="$ROOT/gpu-bundle"
BUILD=1
MODELS=""
MAX_MIB=50
while (($#)); do
  case "$1" in
    --build-dir) BUILD_DIR="$2"; shift 2 ;;
    --out) OUT="$2"; shift 2 ;;
    --no-build) BUILD=0; shift ;;
    --models) MODELS="$2"; shift 2 ;;
    --max-mib) MAX_MIB="$2"; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    *) echo "bundle.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
BUILD_DIR="$(cd "$BUILD_DIR" 2>/dev/null && pwd)" || {
  echo "bundle.sh: error: no build directory (run scripts/setup.sh first)" >&2; exit 1; }
die() { echo "bundle.sh: error: $*" >&2; exit 1; }
t0=$(date +%s)

TARGETS=(offload-run OffloadRuntimeTests offload-import offload-opt offload-translate)
if ((BUILD)); then
  echo "bundle.sh: building ${TARGETS[*]} in $BUILD_DIR"
  nice -n 5 cmake --build "$BUILD_DIR" --target "${TARGETS[@]}" | tail -3
fi
for t in "${TARGETS[@]}"; do
  [[ -x "$BUILD_DIR/bin/$t" ]] || die "$BUILD_DIR/bin/$t is missing (build it, or drop --no-build)"
done
CUDA_BUILD=false
if grep -q '^OFFLOAD_ENABLE_CUDA:BOOL=ON' "$BUILD_DIR/CMakeCache.txt" 2>/dev/null; then
  CUDA_BUILD=true
else
  echo "bundle.sh: warning: $BUILD_DIR is built without CUDA: the bundle can only rehearse" >&2
fi

# Everything goes to a scratch folder first; OUT is replaced at the end.
SCRATCH="$(mktemp -d "${TMPDIR:-/tmp}/offload-bundle.XXXXXX")"
trap 'rm -rf "$SCRATCH"' EXIT
STAGE="$SCRATCH/stage"
NEW="$SCRATCH/bundle"
mkdir -p "$STAGE/bin" "$STAGE/lib" "$STAGE/lib-fallback" "$NEW"

# 1. Binaries and the shared libraries they resolve to here (ldd lists the
#    transitive ones).
for b in offload-run OffloadRuntimeTests; do cp "$BUILD_DIR/bin/$b" "$STAGE/bin/"; done
declare -A CARRIED=()
while read -r so path; do
  case "$so" in
    linux-vdso*|ld-linux*|libc.so*|libm.so*|libdl.so*|libpthread.so*|librt.so*|libstdc++.so*|libgcc_s.so*)
      continue ;;   # the GPU machine's own (newer) ones
    libcublas.so*|libcublasLt.so*|libcudnn*.so*|libnccl.so*)
      continue ;;   # located there (PyTorch's pip packages); hundreds of MB (NCCL: 218 MB)
    libcudart.so*|libz.so*|libbz2.so*|libcrypto.so*|liblzma.so*|libzstd.so*)
      dest=lib-fallback ;;   # common: the GPU machine's own when it has them
    *) dest=lib ;;
  esac
  [[ "$path" == "not" ]] && die "ldd: $so not found here"
  cp -L "$path" "$STAGE/$dest/$so"
  CARRIED[$so]="$dest"
done < <(for b in "$STAGE"/bin/*; do ldd "$b"; done | awk '$2 == "=>" {print $1, $3}' | sort -u)

LIBS_JSON=$(for so in "${!CARRIED[@]}"; do echo "${CARRIED[$so]}/$so"; done | sort |
  /usr/bin/python3 -c 'import json,sys; print(json.dumps([l.strip() for l in sys.stdin]))')
tar -C "$STAGE" -czf "$NEW/binaries.tar.gz" bin lib lib-fallback
UNPACKED=$(du -sb "$STAGE" | cut -f1)
echo "bundle.sh: binaries and ${#CARRIED[@]} libraries: $UNPACKED bytes unpacked," \
  "$(stat -c %s "$NEW/binaries.tar.gz") in binaries.tar.gz"
rm -rf "$STAGE"

# 2. Plans, specs, host references (scripts/gpu/prepare.py).
PREP=(env PYTHONPATH="$ROOT/python" /usr/bin/python3 "$ROOT/scripts/gpu/prepare.py" --bin "$BUILD_DIR/bin" --out "$NEW/models"
      --work "$SCRATCH/work")
[[ -n "$MODELS" ]] && PREP+=(--models "$MODELS")
nice -n 5 "${PREP[@]}"
rm -rf "$SCRATCH/work"
# The fused attention's steps for the sdpa part (scripts/gpu/attention.py).
/usr/bin/python3 "$ROOT/scripts/gpu/attention.py" build --bin "$BUILD_DIR/bin" --out "$NEW/models"
# Rows of the realistic planner table for the realistic part
# (scripts/gpu/realistic_rows.py: plans, specs and cost reports, ~3 MB).
env PYTHONPATH="$ROOT/python:$ROOT/bench/planner" /usr/bin/python3 "$ROOT/scripts/gpu/realistic_rows.py" build \
  --bin "$BUILD_DIR/bin" --out "$NEW/models"
# The plans hold their constants (gpt2-small's causal masks: 13 and 26 MB),
# which compress well.
tar -C "$NEW" -czf "$SCRATCH/models.tar.gz" models
rm -rf "$NEW/models"
mv "$SCRATCH/models.tar.gz" "$NEW/"

# 3. The manifest, then OUT replaced whole.
COMMIT=$(git -C "$ROOT" rev-parse HEAD 2>/dev/null || echo unknown)
DIRTY=$( [[ -n "$(git -C "$ROOT" status --porcelain 2>/dev/null)" ]] && echo true || echo false)
/usr/bin/python3 - "$NEW" "$COMMIT" "$DIRTY" "$CUDA_BUILD" "$LIBS_JSON" "$UNPACKED" "$ROOT" <<'EOF'
import glob, hashlib, json, os, platform, sys, time
new, commit, dirty, cuda, libs, unpacked, root = sys.argv[1:]
# The scripts stay in the checkout (the device tool copies tracked files);
# their sums let run.sh say when they changed after the bundle was made.
scripts = {os.path.relpath(p, root): hashlib.sha256(open(p, "rb").read()).hexdigest()
           for p in sorted(glob.glob(os.path.join(root, "scripts/gpu/*")) +
                           [os.path.join(root, "python/export_models.py")])
           if os.path.isfile(p)}  # not __pycache__/, which importing the scripts leaves
files = {}
for dp, _, fns in os.walk(new):
    for fn in sorted(fns):
        p = os.path.join(dp, fn)
        files[os.path.relpath(p, new)] = {"bytes": os.path.getsize(p),
                                          "sha256": hashlib.sha256(open(p, "rb").read()).hexdigest()}
import tarfile
with tarfile.open(os.path.join(new, "models.tar.gz")) as t:
    models = sorted({n.split("/")[1] for n in t.getnames() if n.count("/") >= 2})
m = {"created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "git_commit": commit,
     "git_dirty": dirty == "true", "cuda_build": cuda == "true", "cuda_arch": "sm_90",
     "host": platform.platform(), "carried_libraries": json.loads(libs),
     "binaries_unpacked_bytes": int(unpacked), "models": models, "files": files,
     "scripts": scripts, "host_env": {"OPENBLAS_CORETYPE": "Haswell"},
     "bundle_bytes": sum(f["bytes"] for f in files.values())}
json.dump(m, open(os.path.join(new, "MANIFEST.json"), "w"), indent=1)
EOF
SIZE=$(du -sb "$NEW" | cut -f1)
(( SIZE <= MAX_MIB * 1048576 )) || die "the bundle is $SIZE bytes, over ${MAX_MIB} MiB"
rm -rf "$OUT"
mkdir -p "$(dirname "$OUT")"
cp -r "$NEW" "$OUT"
echo "bundle.sh: wrote $OUT: $SIZE bytes ($(( SIZE / 1048576 )) MiB) in $(( $(date +%s) - t0 )) s;" \
  "commit ${COMMIT:0:10}$([[ $DIRTY == true ]] && echo ' (uncommitted changes)'), CUDA build: $CUDA_BUILD"
