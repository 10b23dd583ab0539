"""Checks offload-run outputs of one host-offload plan run without and with
--emulate-link RATE (and with --poison): identical losses, and every emulated
step at least as long as the plan's largest direction's copy bytes / RATE.

usage: emulate_link_check.py FAST.txt SLOW.txt POISON.txt PLAN-LISTING.txt RATE
(PLAN-LISTING.txt: offload-run PLAN --dump-plan)
"""
import re
import sys

fast, slow, poison, plan, rate = sys.argv[1:6]
rate = float(rate)


def steps(path):
    text = open(path).read()
    rows = re.findall(r"step \d+: loss (\S+)  time ([0-9.]+) s .*h2d ([0-9.]+) s d2h ([0-9.]+) s"
                      r".*instructions ([0-9.]+) s", text)
    if len(rows) != 2:
        sys.exit(f"{path}: expected 2 step lines with an instructions time, got:\n{text}")
    return [(r[0], *map(float, r[1:])) for r in rows]


# Bytes each copy stream moves per step, from the plan listing (--dump-plan):
# every to_device / to_host copies its output buffer's data.
DTYPE_BYTES = {"f32": 4, "f64": 8, "f16": 2, "bf16": 2, "i64": 8, "i32": 4, "i8": 1, "u8": 1,
               "bool": 1}
listing = open(plan).read()
sizes = {}
for m in re.finditer(r"^\s+%(\d+) \".*?\" (\w+)\[([0-9,]*)\]", listing, re.M):
    n = 1
    for d in filter(None, m.group(3).split(",")):
        n *= int(d)
    sizes[int(m.group(1))] = n * DTYPE_BYTES[m.group(2)]
moved = {"h2d": 0, "d2h": 0}
for m in re.finditer(r"\[(h2d|d2h)\] %(\d+) = offload\.to_(?:device|host)", listing):
    moved[m.group(1)] += sizes[int(m.group(2))]
if not moved["h2d"] or not moved["d2h"]:
    sys.exit(f"the plan copies nothing in one direction: {moved}")
f, s, p = steps(fast), steps(slow), steps(poison)
for a, b, c in zip(f, s, p):
    if not (a[0] == b[0] == c[0]):
        sys.exit(f"losses differ: {a[0]} (no emulation) {b[0]} (emulated) {c[0]} (poison)")
for name, rows in (("emulated", s), ("poison", p)):
    for loss, time, h2d, d2h, instr in rows:
        # Lower bounds only (other load can only lengthen a step): each
        # stream is busy for at least its bytes / rate, and the step lasts
        # at least as long as the busier stream.
        need = max(moved["h2d"], moved["d2h"]) / rate
        if instr < need or h2d < moved["h2d"] / rate or d2h < moved["d2h"] / rate:
            sys.exit(f"{name}: step took {instr:.6f} s (h2d busy {h2d:.6f}, d2h {d2h:.6f}) but "
                     f"the emulated link needs at least {need:.6f} s for {moved} bytes")
        if instr > time + 1e-6:
            sys.exit(f"{name}: instructions {instr} s exceed the step's {time} s")
print(f"ok: bytes per step {moved}, losses identical")
