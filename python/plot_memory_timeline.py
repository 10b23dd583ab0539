#!/usr/bin/python3
"""Draws a memory timeline written by the planner as PNG and SVG.

    /usr/bin/python3 python/plot_memory_timeline.py TIMELINE.json [-o OUT_PREFIX]

TIMELINE.json comes from
`offload-opt step.mlir --offload-plan-memory="budget=... timeline=TIMELINE.json"`
(format "offload-memory-timeline", version 1; docs/planner.md). One panel per
plan in the file (unplanned, planned), side by side with one byte scale: live
device bytes per program point stacked by category (parameters, optimizer
state, inputs, copies in flight or prefetched, gradients, saved values,
temporaries), the budget as a horizontal line, each plan's arena bytes
(live bytes plus fragmentation) as a dashed line, and the phases (forward,
backward, optimizer) as shaded spans. Writes OUT_PREFIX.png and
OUT_PREFIX.svg (default: TIMELINE without .json) and prints their paths.
Exits 1 with a message on a file of another format or version.
"""
import argparse
import json
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

COLORS = {
    "parameters": "#4c72b0",
    "optimizer_state": "#8172b2",
    "inputs": "#937860",
    "copies": "#da8bc3",
    "gradients": "#c44e52",
    "saved": "#55a868",
    "temporaries": "#ccb974",
}
PHASE_SHADE = {"forward": "#f2f2f2", "backward": "#e6eef7", "backward_input": "#e6eef7",
               "backward_weight": "#e6f2ec", "optimizer": "#f7ece6"}


def load(path):
    try:
        with open(path) as f:
            doc = json.load(f)
    except (OSError, ValueError) as e:
        sys.exit(f"plot_memory_timeline: cannot read {path}: {e}")
    if doc.get("format") != "offload-memory-timeline" or doc.get("version") != 1:
        sys.exit(f"plot_memory_timeline: {path} is not an offload memory timeline of "
                 f"version 1 (format={doc.get('format')!r}, version={doc.get('version')!r})")
    return doc


def mib(x):
    return x / 2**20


def draw(doc, prefix):
    plans = doc["plans"]
    cats = doc["categories"]
    budget = doc["budget_bytes"]
    top = max([budget] + [p["arena_bytes"] for p in plans]) * 1.08
    fig, axes = plt.subplots(1, len(plans), figsize=(6.5 * len(plans), 4.2), sharey=True,
                             squeeze=False)
    for ax, plan in zip(axes[0], plans):
        n = plan["points"]
        xs = range(n)
        phases = plan["phases"]
        for k, ph in enumerate(phases):
            end = phases[k + 1]["point"] if k + 1 < len(phases) else n
            ax.axvspan(ph["point"], end, color=PHASE_SHADE.get(ph["phase"], "#eeeeee"), lw=0)
            ax.text((ph["point"] + end) / 2, mib(top) * 0.985, ph["phase"], ha="center",
                    va="top", fontsize=8, color="#555555")
        ys = [[mib(v) for v in plan["live_bytes"][c]] for c in cats]
        ax.stackplot(xs, ys, labels=[c.replace("_", " ") for c in cats],
                     colors=[COLORS.get(c, "#999999") for c in cats], lw=0)
        ax.axhline(mib(budget), color="black", lw=1.2, label="budget")
        ax.axhline(mib(plan["arena_bytes"]), color="black", lw=0.8, ls="--",
                   label="arena (with fragmentation)")
        ax.set_title(f"{plan['name']}: arena {mib(plan['arena_bytes']):.2f} MiB, "
                     f"peak {mib(plan['peak_bytes']):.2f} MiB", fontsize=10)
        ax.set_xlabel("program point (op)")
        ax.set_xlim(0, max(n - 1, 1))
        ax.set_ylim(0, mib(top))
    axes[0][0].set_ylabel("live device memory (MiB)")
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=5, fontsize=8, frameon=False)
    fig.suptitle(f"@{doc['step']} on {doc['target']}, budget {mib(budget):.2f} MiB "
                 f"({budget} bytes)", fontsize=11)
    fig.tight_layout(rect=(0, 0.1, 1, 0.95))
    out = []
    for ext in ("png", "svg"):
        path = f"{prefix}.{ext}"
        fig.savefig(path, dpi=120)
        out.append(path)
    plt.close(fig)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("timeline")
    ap.add_argument("-o", "--out", help="output prefix (default: the input without .json)")
    args = ap.parse_args()
    doc = load(args.timeline)
    prefix = args.out or (args.timeline[:-5] if args.timeline.endswith(".json")
                          else args.timeline)
    for path in draw(doc, prefix):
        print(path)


if __name__ == "__main__":
    main()
