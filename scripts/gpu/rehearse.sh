#!/usr/bin/env bash
#===- scripts/gpu/rehearse.sh - rehearse the GPU kit on this machine ------===#
#
# Does here what the GPU machine will do, as far as a machine without a GPU
# can: copies the checkout's files as the device tool does (tracked files and
# untracked ones git does not ignore) and the bundle into an empty folder,
# and runs scripts/gpu/run.sh there with the host backend in a stripped
# environment (env -i; PATH=/usr/bin:/bin, without the build tree; no
# LD_LIBRARY_PATH but the one run.sh gives our binaries: the bundle's
# libraries and the CUDA libraries it locates), so a file or library missing
# from the bundle shows here, not there. Then checks what came back: the
# parts' statuses and the device tool's limits on $OUT (at most 8 files of
# at most 16 MiB, no deeper than OUT/a/b/file, names of [A-Za-z0-9._-]).
# The ctest gpu-kit.rehearsal runs `rehearse.sh --make-bundle --no-build`.
#===----------------------------------------------------------------------===#
set -euo pipefail

usage() {
  cat <<'EOF'
usage: scripts/gpu/rehearse.sh [--bundle DIR | --make-bundle [--no-build]]
                               [--build-dir DIR] [--keep] [--deadline S]

  --bundle DIR     rehearse this bundle (default: gpu-bundle/ of the checkout)
  --make-bundle    build a fresh bundle into the scratch folder first
                   (scripts/gpu/bundle.sh; --no-build: from the binaries as
                   built)
  --build-dir DIR  the build directory for --make-bundle (default: build/)
  --keep           keep the scratch folder (printed) instead of removing it
  --deadline S     run.sh's --deadline (default 420)
  --help           this text

Exit status 0 when the rehearsal passed: run.sh exited 0, the parts that can
run without a GPU passed (versions, gtests, plans), the others reported
themselves skipped, and the results folder keeps to the device tool's limits.
EOF
}

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
BUNDLE="$ROOT/gpu-bundle"
MAKE=0
NOBUILD=()
BUILD_DIR="${BUILD_DIR:-$ROOT/build}"
KEEP=0
DEADLINE=420
while (($#)); do
  case "$1" in
    --bundle) BUNDLE="$2"; shift 2 ;;
    --make-bundle) MAKE=1; shift ;;
    --no-build) NOBUILD=(--no-build); shift ;;
    --build-dir) BUILD_DIR="$2"; shift 2 ;;
    --keep) KEEP=1; shift ;;
    --deadline) DEADLINE="$2"; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    *) echo "rehearse.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
t0=$(date +%s)
SCRATCH="$(mktemp -d "${TMPDIR:-/tmp}/offload-rehearsal.XXXXXX")"
cleanup() { if ((KEEP)); then echo "rehearse.sh: kept $SCRATCH"; else rm -rf "$SCRATCH"; fi; }
trap cleanup EXIT
fail() { echo "rehearse.sh: FAIL: $*" >&2; exit 1; }

if ((MAKE)); then
  BUNDLE="$SCRATCH/bundle-made"
  "$ROOT/scripts/gpu/bundle.sh" --build-dir "$BUILD_DIR" --out "$BUNDLE" "${NOBUILD[@]}"
fi
[[ -f "$BUNDLE/MANIFEST.json" ]] || fail "no bundle at $BUNDLE (run scripts/gpu/bundle.sh, or --make-bundle)"
t_bundle=$(date +%s)

# The device tool's copy: the checkout's tracked and unignored files, then the
# carried bundle.
CO="$SCRATCH/checkout"
mkdir -p "$CO" "$SCRATCH/out" "$SCRATCH/home" "$SCRATCH/tmp"
if git -C "$ROOT" rev-parse --git-dir >/dev/null 2>&1; then
  (cd "$ROOT" && git ls-files -z --cached --others --exclude-standard) |
    /usr/bin/python3 -c '
import os, shutil, sys
root, dest = sys.argv[1], sys.argv[2]
for rel in sys.stdin.buffer.read().decode().split("\0"):
    src = os.path.join(root, rel)
    if rel and os.path.isfile(src) and not rel.startswith("gpu-bundle/"):
        os.makedirs(os.path.dirname(os.path.join(dest, rel)), exist_ok=True)
        shutil.copy2(src, os.path.join(dest, rel))' "$ROOT" "$CO"
else
  cp -r "$ROOT/scripts" "$ROOT/python" "$CO/"
fi
cp -r "$BUNDLE" "$CO/gpu-bundle"
echo "rehearse.sh: checkout copy $(du -sb "$CO" | cut -f1) bytes, bundle $(du -sb "$BUNDLE" | cut -f1) bytes"

set +e
(cd "$CO" && env -i HOME="$SCRATCH/home" TMPDIR="$SCRATCH/tmp" PATH=/usr/bin:/bin LANG=C.UTF-8 \
  KIT_FORCE_FALLBACK=1 bash scripts/gpu/run.sh --bundle gpu-bundle --out "$SCRATCH/out" \
  --backend host --deadline "$DEADLINE")
rc=$?
set -e
t_run=$(date +%s)

# What came back, against the device tool's limits.
/usr/bin/python3 - "$SCRATCH/out" "$rc" <<'EOF' || fail "see above"
import json, os, re, sys
out, rc = sys.argv[1], int(sys.argv[2])
problems = []
files = []
for dp, dns, fns in os.walk(out):
    for fn in fns:
        p = os.path.join(dp, fn)
        rel = os.path.relpath(p, out)
        files.append(rel)
        if os.path.getsize(p) > 16 << 20:
            problems.append("%s is over 16 MiB" % rel)
        if rel.count("/") > 2:
            problems.append("%s is deeper than OUT/a/b/file" % rel)
        if not all(re.fullmatch(r"[A-Za-z0-9._-]+", c) for c in rel.split("/")):
            problems.append("%s has a name the device tool does not bring back" % rel)
if len(files) > 8:
    problems.append("%d files in OUT (at most 8 come back): %s" % (len(files), ", ".join(files)))
for need in ("results.json", "results.md", "run.log", "details.tar.gz"):
    if need not in files:
        problems.append("OUT lacks " + need)
if rc != 0:
    problems.append("run.sh exited %d" % rc)
res = json.load(open(os.path.join(out, "results.json"))) if "results.json" in files else {"parts": {}}
want = {"versions": "ok", "gtests": "ok", "plans": "ok", "memcheck": "skipped", "sbs": "skipped",
        "copy": "skipped", "amp": "skipped"}
for part, status in want.items():
    got = res["parts"].get(part, {}).get("status")
    if got != status:
        problems.append("part %s: %s, expected %s (%s)" % (part, got, status,
                        res["parts"].get(part, {}).get("reason", "")))
    elif status == "skipped" and not res["parts"][part].get("reason"):
        problems.append("part %s skipped without a reason" % part)
g = res["parts"].get("gtests", {}).get("counts", {})
if not g.get("passed"):
    problems.append("no Cuda* gtest ran and passed on the host")
for m in res["parts"].get("plans", {}).get("models", []):
    if not m.get("ok"):
        problems.append("plans: %s failed" % m["model"])
if len(res["parts"].get("plans", {}).get("models", [])) != 3:
    problems.append("plans: expected the 3 example models")
amp = res["parts"].get("amp", {})
if len(amp.get("self_test_rows", [])) != 2:
    problems.append("amp: expected the self-test of the 2 small amp models")
log = open(os.path.join(out, "run.log")).read() if "run.log" in files else ""
if "offload GPU kit summary" not in log[-12000:]:
    problems.append("the summary is not in the last 12,000 characters of the output")
sizes = ", ".join("%s %d" % (f, os.path.getsize(os.path.join(out, f))) for f in sorted(files))
print("rehearse.sh: OUT: %s" % sizes)
for p in problems:
    print("rehearse.sh: problem: " + p)
sys.exit(1 if problems else 0)
EOF
echo "rehearse.sh: passed: bundle $((t_bundle - t0)) s, run.sh $((t_run - t_bundle)) s, total $(( $(date +%s) - t0 )) s"
