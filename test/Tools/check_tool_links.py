#!/usr/bin/env python3
"""The compiler's tools link no BLAS, no GPU library and no runtime code.

usage: check_tool_links.py --tool BIN [--tool BIN ...] --forbid-archive LIB.a [...]
                           [--link-closure FILE --forbid-target NAME [...]]

--link-closure FILE holds one line per tool, "TOOL: TARGET TARGET ...", the
CMake targets it links directly or transitively (test/Tools/CMakeLists.txt
writes it at configure time); none may be a --forbid-target, whether or not
the linker would keep anything of it. For every --tool binary:
  * its dynamic section's NEEDED entries (readelf -d) name no BLAS, LAPACK,
    CUDA, cuBLAS, cuDNN, NCCL or LibTorch library;
  * it defines none of the global functions and objects that the
    --forbid-archive static libraries define (nm: the kernels, the sessions
    and backends, the host calibration), so a link that pulls any object of
    them in (directly, or through a library that links them) fails here, by
    construction, whatever the symbol's name.
Exits 1 naming each offending library or symbol (at most 20 per tool), 0
otherwise. Needs binutils (readelf, nm), which the build uses anyway.
"""
import argparse
import re
import subprocess
import sys

# Libraries the compiler must not load: BLAS and LAPACK (any flavour),
# the CUDA runtime and its math and communication libraries, LibTorch.
FORBIDDEN_NEEDED = re.compile(
    r"(openblas|blas|lapack|mkl|cudart|cublas|cudnn|cufft|curand|cusparse|nccl|libcuda\.|"
    r"torch|c10)", re.IGNORECASE)


def run(cmd):
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if r.returncode != 0:
        sys.exit(f"check_tool_links: '{' '.join(cmd)}' failed: {r.stderr.strip()}")
    return r.stdout


def needed(binary):
    return re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", run(["readelf", "-d", binary]))


def strong_definitions(path):
    """Mangled names of the global, non-weak functions and data `path`
    defines (T, D, B, R): inline functions and template instances (W, V) are
    emitted wherever they are used and prove nothing."""
    names = set()
    for line in run(["nm", "--defined-only", "-g", path]).splitlines():
        parts = line.split()
        if len(parts) >= 3 and parts[-2] in ("T", "D", "B", "R"):
            names.add(parts[-1])
    return names


def demangle(names):
    return run(["c++filt"] + names).splitlines() if names else []


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tool", action="append", required=True)
    ap.add_argument("--forbid-archive", action="append", default=[])
    ap.add_argument("--link-closure")
    ap.add_argument("--forbid-target", action="append", default=[])
    args = ap.parse_args()
    failed = False
    if args.link_closure:
        for line in open(args.link_closure):
            tool, _, targets = line.partition(":")
            bad = [t for t in targets.split() if t in args.forbid_target]
            for t in bad:
                print(f"FAIL: {tool} links the CMake target {t} (its link graph, "
                      f"{args.link_closure}): the compiler must not link the runtime")
            failed |= bool(bad)
            if not bad:
                print(f"ok: {tool}: none of {', '.join(args.forbid_target)} among the "
                      f"{len(targets.split())} targets it links")
    forbidden = {}
    for a in args.forbid_archive:
        defs = strong_definitions(a)
        if not defs:
            sys.exit(f"check_tool_links: {a} defines no symbol; is it the right archive?")
        for d in defs:
            forbidden.setdefault(d, a)
    for tool in args.tool:
        bad_libs = [n for n in needed(tool) if FORBIDDEN_NEEDED.search(n)]
        for n in bad_libs:
            print(f"FAIL: {tool} loads {n} (readelf -d NEEDED): the compiler must not link "
                  "BLAS, GPU libraries or LibTorch")
        # Every symbol the binary holds (nm without -g: an executable's
        # functions may be local after linking).
        present = set()
        for line in run(["nm", "--defined-only", tool]).splitlines():
            parts = line.split()
            if len(parts) >= 3:
                present.add(parts[-1])
        hits = sorted(present & forbidden.keys())
        for name, pretty in zip(hits[:20], demangle(hits[:20])):
            print(f"FAIL: {tool} defines {pretty} (from {forbidden[name]})")
        if len(hits) > 20:
            print(f"FAIL: ... and {len(hits) - 20} more runtime symbols")
        if bad_libs or hits:
            failed = True
        else:
            print(f"ok: {tool}: no BLAS/GPU/LibTorch library among {len(needed(tool))} NEEDED "
                  f"entries, none of {len(forbidden)} runtime symbols defined")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
