#!/usr/bin/env bash
#===- scripts/gpu/run.sh - the GPU bring-up kit's one command -------------===#
#
# Runs on the GPU machine (docs/gpu.md), from the checkout's root:
#
#   bash scripts/gpu/run.sh --bundle gpu-bundle --out "$OUT"
#
# Unpacks the bundle (scripts/gpu/bundle.sh) into a scratch folder, locates
# the CUDA libraries, then runs the parts, each under its own time limit and
# each failing soft (a failure or a hang is recorded and the next part runs):
#
#   versions  device, driver, CUDA runtime, cuBLAS, cuDNN and PyTorch versions
#   gtests    every Cuda* gtest of OffloadRuntimeTests, one process each
#   plans     the example plans on the backend vs the host's carried results
#   copy      pinned host<->device copy throughput vs the link's figure
#   sbs       side by side with PyTorch eager and checkpointed, same GPU
#   sdpa      the fused attention vs PyTorch's SDPA (fp32 and f64), same GPU
#   memcheck  compute-sanitizer memcheck on a short gtest run (and a plan)
#   amp       bf16-mixed resnet18 and GPT-2-shaped steps vs PyTorch's
#             torch.autocast step (time, peak) and its float64 step (grads)
#   realistic rows of the realistic planner table (GPT-2 124M, ViT-B/16):
#             measured step vs the simulator's figure for the same plan
#   nccl      the example models' data-parallel plans with one rank through
#             NCCL (gloo on the host) vs no engine, bit for bit
#
# After every part, OUT/results.json and OUT/results.md are rewritten and the
# logs packed into OUT/details.tar.gz; OUT/run.log is this output. The
# summary table is printed last. Exit status: 0 when every part passed or was
# skipped with its reason, 1 otherwise.
#===----------------------------------------------------------------------===#
set -uo pipefail   # not -e: the parts fail soft

usage() {
  cat <<'EOF'
usage: bash scripts/gpu/run.sh --out DIR [--bundle DIR] [--backend cuda|host]
                               [--deadline SECONDS] [--parts LIST] [--keep-work]

  --bundle DIR      the bundle of scripts/gpu/bundle.sh (default: gpu-bundle)
  --out DIR         results: results.json, results.md, run.log,
                    details.tar.gz (created if missing)
  --backend B       cuda (default) on the GPU machine; host for the
                    rehearsal (scripts/gpu/rehearse.sh): the GPU-only parts
                    then report themselves skipped with the reason
  --deadline S      the whole run ends within S seconds (default 420); each
                    part's limit is what is left after the minimum of the
                    parts still to come
  --parts LIST      comma-separated subset, in this order:
                    versions,gtests,plans,copy,sbs,sdpa,memcheck,amp,nccl,realistic
                    (default: all)
  --work DIR        scratch folder (default: a new one under $TMPDIR or /tmp;
                    removed at the end unless --keep-work)
  --keep-work       keep the scratch folder
  --help            this text

Environment: PYTHON (default: python3 on PATH; it needs numpy, and torch for
the side-by-side and copy parts), KIT_FORCE_FALLBACK=1 (use the bundle's
copies of libcudart, libz, libbz2, libcrypto even where the system has them).
Our binaries get LD_LIBRARY_PATH (the bundle's libraries, then the located
CUDA libraries); python3 never does.
EOF
}

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
BUNDLE=gpu-bundle
OUT=""
BACKEND=cuda
DEADLINE=420
PARTS="versions,gtests,plans,copy,sbs,sdpa,memcheck,amp,nccl,realistic"
WORK=""
KEEP=0
while (($#)); do
  case "$1" in
    --bundle) BUNDLE="$2"; shift 2 ;;
    --out) OUT="$2"; shift 2 ;;
    --backend) BACKEND="$2"; shift 2 ;;
    --deadline) DEADLINE="$2"; shift 2 ;;
    --parts) PARTS="$2"; shift 2 ;;
    --work) WORK="$2"; shift 2 ;;
    --keep-work) KEEP=1; shift ;;
    -h|--help) usage; exit 0 ;;
    *) echo "run.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
[[ -n "$OUT" ]] || { echo "run.sh: error: --out DIR is required (see --help)" >&2; exit 2; }
[[ "$BACKEND" == cuda || "$BACKEND" == host ]] || { echo "run.sh: error: --backend cuda|host" >&2; exit 2; }
[[ "$DEADLINE" =~ ^[0-9]+$ ]] || { echo "run.sh: error: --deadline takes seconds" >&2; exit 2; }
mkdir -p "$OUT" || exit 2
OUT="$(cd "$OUT" && pwd)"
T0=$(date +%s)

# Per part: the most and the least seconds it gets.
declare -A MAX=([versions]=60 [gtests]=150 [plans]=150 [copy]=45 [sbs]=240 [sdpa]=120 [memcheck]=150 [amp]=150 [nccl]=60 [realistic]=200)
declare -A MIN=([versions]=10 [gtests]=20 [plans]=30 [copy]=10 [sbs]=45 [sdpa]=20 [memcheck]=30 [amp]=25 [nccl]=15 [realistic]=40)
ORDER=(versions gtests plans copy sbs sdpa memcheck amp nccl realistic)

main() {
  echo "run.sh: offload GPU kit, backend $BACKEND, deadline ${DEADLINE} s, $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  local bundle_abs
  if ! bundle_abs="$(cd "$BUNDLE" 2>/dev/null && pwd)"; then
    echo "run.sh: error: no bundle folder '$BUNDLE' (build it with scripts/gpu/bundle.sh and carry it)"
    fatal "no bundle folder '$BUNDLE'"; return 1
  fi
  for f in MANIFEST.json binaries.tar.gz models.tar.gz; do
    [[ -f "$bundle_abs/$f" ]] || { fatal "the bundle lacks $f"; return 1; }
  done
  # The first of $PYTHON, python3 on PATH, the GPU machine's PyTorch venv and
  # Debian's python3 that has numpy.
  PY=""
  local c
  for c in "${PYTHON:-}" "$(command -v python3 || true)" /opt/torch/.venv/bin/python3 /usr/bin/python3; do
    if [[ -n "$c" && -x "$c" ]] && "$c" -c 'import numpy' 2>/dev/null; then PY="$c"; break; fi
  done
  [[ -n "$PY" ]] || { fatal "no python3 with numpy (PYTHON=${PYTHON:-unset}, PATH=$PATH)"; return 1; }
  echo "run.sh: python: $PY ($("$PY" -c 'import sys, numpy; print(sys.version.split()[0], "numpy", numpy.__version__)'))"
  mkdir -p "$WORK/kit" "$WORK/parts" "$WORK/logs"

  # Unpack (tar, or Python's tarfile where tar is missing); check the sums.
  local t
  for t in binaries models; do
    tar -xzf "$bundle_abs/$t.tar.gz" -C "$WORK/kit" 2>/dev/null ||
      "$PY" -c 'import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])' \
        "$bundle_abs/$t.tar.gz" "$WORK/kit" || { fatal "cannot unpack $t.tar.gz"; return 1; }
  done
  cp "$bundle_abs/MANIFEST.json" "$WORK/kit/"
  "$PY" - "$bundle_abs" "$ROOT" <<'EOF' || echo "run.sh: warning: the bundle's files differ from its MANIFEST.json (see above)"
import hashlib, json, os, sys
b, root = sys.argv[1:]; m = json.load(open(os.path.join(b, "MANIFEST.json"))); bad = 0
changed = [rel for rel, h in m.get("scripts", {}).items() if not os.path.exists(os.path.join(root, rel))
           or hashlib.sha256(open(os.path.join(root, rel), "rb").read()).hexdigest() != h]
if changed:
    print("run.sh: note: changed since the bundle was made (the checkout's are used): " + ", ".join(changed))
for name, f in m["files"].items():
    if name == "MANIFEST.json": continue
    p = os.path.join(b, name)
    if not os.path.exists(p) or hashlib.sha256(open(p, "rb").read()).hexdigest() != f["sha256"]:
        print("run.sh: %s: missing or changed since bundle.sh wrote it" % name); bad = 1
print("run.sh: bundle of commit %s%s, made %s, CUDA build %s" % (
    m["git_commit"][:10], " (uncommitted changes)" if m.get("git_dirty") else "", m["created"], m["cuda_build"]))
sys.exit(bad)
EOF

  # The CUDA libraries: PyTorch's pip packages (site-packages/nvidia/*/lib),
  # then the toolkit's folders. The first folder that has a library wins.
  local -a cand=()
  mapfile -t cand < <("$PY" - <<'EOF' 2>/dev/null
import glob, os, site, sysconfig
roots = []
try: roots += site.getsitepackages()
except Exception: pass
try: roots.append(site.getusersitepackages())
except Exception: pass
for k in ("purelib", "platlib"):
    roots.append(sysconfig.get_paths().get(k, ""))
seen = set()
for r in roots:
    for d in sorted(glob.glob(os.path.join(r, "nvidia", "*", "lib"))):
        if d not in seen:
            seen.add(d); print(d)
EOF
  )
  cand+=(/usr/local/cuda/lib64 /usr/local/cuda/lib /usr/local/cuda/targets/x86_64-linux/lib)
  local -a ldp=("$WORK/kit/lib" "$WORK/kit/lib-extra")
  mkdir -p "$WORK/kit/lib-extra"
  local so d found
  # libnccl.so.2: the runtime links NCCL (data parallel on CUDA); PyTorch's
  # pip packages carry it (nvidia-nccl), too large for the bundle (218 MB).
  for so in libcudnn.so.9 libcublas.so.13 libcublasLt.so.13 libnccl.so.2 libcudart.so.13; do
    found=""
    for d in "${cand[@]}"; do
      if [[ -e "$d/$so" ]]; then found="$d"; break; fi
    done
    if [[ -n "$found" ]]; then
      echo "run.sh: $so from $found"
      [[ " ${ldp[*]} " == *" $found "* ]] || ldp+=("$found")
    elif [[ "$so" == libcudart.so.13 ]]; then
      echo "run.sh: $so: none found; the bundle's copy"
      ln -sf "$WORK/kit/lib-fallback/$so" "$WORK/kit/lib-extra/$so"
    else
      if [[ "$so" == libnccl.so.2 ]]; then
        echo "run.sh: warning: $so not found (looked in: ${cand[*]}); our binaries link it and will not start"
      else
        echo "run.sh: warning: $so not found (looked in: ${cand[*]}); CUDA runs will fail to start"
      fi
    fi
  done
  # Common libraries the bundle carries as a fallback: the system's own when
  # ldconfig lists them.
  local sys_libs
  sys_libs="$( (/sbin/ldconfig -p || ldconfig -p) 2>/dev/null)"
  for f in "$WORK"/kit/lib-fallback/*; do
    so="$(basename "$f")"
    [[ "$so" == libcudart.so.13 ]] && continue
    if [[ "${KIT_FORCE_FALLBACK:-0}" == 1 ]] || ! grep -qF "$so (" <<<"$sys_libs"; then
      echo "run.sh: $so: the bundle's copy"
      ln -sf "$f" "$WORK/kit/lib-extra/$so"
    fi
  done
  KIT_LD_PATH="$(IFS=:; echo "${ldp[*]}")"
  echo "run.sh: LD_LIBRARY_PATH of our binaries: $KIT_LD_PATH"

  export KIT_BUNDLE="$WORK/kit" KIT_BIN="$WORK/kit/bin" KIT_LD_PATH KIT_BACKEND="$BACKEND" \
    KIT_WORK="$WORK" KIT_PARTS="$WORK/parts" KIT_OUT="$OUT"
  "$PY" - "$WORK/parts/kit.json" "$T0" "$BACKEND" "$DEADLINE" "$WORK/kit/MANIFEST.json" "$KIT_LD_PATH" <<'EOF'
import json, sys, time
path, t0, backend, deadline, manifest, ldp = sys.argv[1:]
m = json.load(open(manifest))
json.dump({"t0": int(t0), "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(int(t0))),
           "backend": backend, "deadline_s": int(deadline), "bundle_commit": m["git_commit"][:10],
           "bundle_dirty": m.get("git_dirty"), "bundle_created": m["created"],
           "cuda_build": m["cuda_build"], "ld_library_path": ldp}, open(path, "w"), indent=1)
EOF

  local i p limit left reserve j start rc
  for ((i = 0; i < ${#ORDER[@]}; i++)); do
    p="${ORDER[$i]}"
    [[ ",$PARTS," == *",$p,"* ]] || continue
    reserve=0
    for ((j = i + 1; j < ${#ORDER[@]}; j++)); do
      [[ ",$PARTS," == *",${ORDER[$j]},"* ]] && reserve=$((reserve + MIN[${ORDER[$j]}]))
    done
    # What is left, less the least the parts still to come need; never less
    # than this part's own least (the earlier parts come first).
    left=$((DEADLINE - ($(date +%s) - T0) - 5))
    limit=$((left - reserve))
    ((limit < MIN[$p])) && limit=${MIN[$p]}
    ((limit > MAX[$p])) && limit=${MAX[$p]}
    if ((left < MIN[$p])); then
      echo "== $p: not run, out of time ($left s left, it needs ${MIN[$p]})"
      printf '{"exit": null, "seconds": 0, "limit": %d, "not_run": "out of time: %d s of the deadline left"}\n' \
        "$left" "$left" > "$WORK/parts/$p.status"
    else
      echo "== $p (limit $limit s, $(( $(date +%s) - T0 )) s elapsed)"
      start=$(date +%s)
      KIT_DEADLINE=$(( start + limit - 3 )) timeout -k 10 "$limit" "$PY" "$ROOT/scripts/gpu/kit.py" "$p" \
        > "$WORK/logs/part-$p.out" 2>&1
      rc=$?
      # A part prints only when it broke (a traceback): show its end.
      [[ -s "$WORK/logs/part-$p.out" ]] && tail -n 5 "$WORK/logs/part-$p.out" | cut -c1-300 | sed 's/^/   /'
      printf '{"exit": %d, "seconds": %d, "limit": %d}\n' "$rc" "$(( $(date +%s) - start ))" "$limit" \
        > "$WORK/parts/$p.status"
    fi
    "$PY" "$ROOT/scripts/gpu/kit.py" report > /dev/null 2>&1 || true
    "$PY" "$ROOT/scripts/gpu/kit.py" report --line "$p" 2>/dev/null | cut -c1-400 || true
    pack_details
  done
  "$PY" "$ROOT/scripts/gpu/kit.py" report --print
}

# What the GPU machine can bring back is 8 files of 16 MiB: the logs go into
# one archive, each log cut to its last 2 MiB.
pack_details() {
  [[ -n "${WORK:-}" && -d "$WORK/logs" ]] || return 0
  local f
  for f in "$WORK"/logs/*; do
    [[ -f "$f" ]] && (( $(stat -c %s "$f") > 2097152 )) && { tail -c 2097152 "$f" > "$f.cut"; mv "$f.cut" "$f"; }
  done
  tar -C "$WORK" -czf "$OUT/details.tar.gz.tmp" logs parts 2>/dev/null &&
    mv "$OUT/details.tar.gz.tmp" "$OUT/details.tar.gz"
}

# A failure before any part could run: still leave a results.json.
fatal() {
  echo "run.sh: error: $*"
  printf '{"kit": {"error": "%s", "backend": "%s"}, "parts": {}}\n' "$*" "$BACKEND" > "$OUT/results.json"
  printf '# GPU kit results\n\nThe run could not start: %s\n' "$*" > "$OUT/results.md"
}

if [[ -z "$WORK" ]]; then
  WORK="$(mktemp -d "${TMPDIR:-/tmp}/offload-gpu-kit.XXXXXX")" || exit 2
fi
mkdir -p "$WORK" && WORK="$(cd "$WORK" && pwd)" || exit 2
main 2>&1 | tee "$OUT/run.log"
status=${PIPESTATUS[0]}
if [[ -n "$WORK" && -d "$WORK" && $KEEP == 0 ]]; then rm -rf "$WORK"; fi
exit "$status"
