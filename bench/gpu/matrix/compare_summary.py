#!/usr/bin/env python3
"""One table from compare_builds.sh's runs: for each LC x BE cell, LC p50 /
p99 (µs) and BE kept, alone and stock (from the first run) and under each
build's gpuslice cells, in the order the builds ran.

    compare_summary.py SCRATCH    (the directories SCRATCH/<i>-<name>/matrix.json)
"""
import json
import sys
from pathlib import Path


def load(run_dir):
    try:
        return json.loads((run_dir / "matrix.json").read_text())
    except (OSError, ValueError) as e:
        return {"error": str(e), "cells": {}}


def cell_lc(cells, name, kind, own=False):
    c = cells.get(name) or {}
    if "error" in c or "skipped" in c or (own and c.get("from_prior")):
        return None
    return (c.get("lc") or {}).get(kind)


def fmt(v):
    if not v or "p50_us" not in v:
        return "—"
    kept = v.get("be_kept")
    return f"{v['p50_us']:.0f} / {v['p99_us']:.0f}" + (f" / {100 * kept:.1f}%" if kept is not None else "")


def main(scratch):
    runs = sorted((p for p in Path(scratch).iterdir() if p.is_dir() and (p / "matrix.json").exists()),
                  key=lambda p: int(p.name.split("-", 1)[0]))
    if not runs:
        print("no runs")
        return 1
    data = [(p.name.split("-", 1)[1], load(p)) for p in runs]
    base = data[0][1]
    meta = base.get("meta", {})
    print(f"# Builds compared on the matrix's LC x BE cells\n\nGPU: {meta.get('gpu', '?')}; "
          f"date {meta.get('date', '?')}; runs in order: {', '.join(n for n, _ in data)}\n")
    print("Each cell: LC p50 / p99 µs / BE kept. Alone and stock come from the first run.\n")
    kinds = [k for k in ("tiny", "graph", "eager") if cell_lc(base["cells"], "lc_alone", k)]
    bes = sorted({n.split("_")[1] for n in base["cells"] if n.startswith("lcbe_")})
    head = ["LC", "BE", "alone", "stock"] + [f"{i + 1}. {n}" for i, (n, _) in enumerate(data)]
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for kind in kinds:
        for be in bes:
            row = [kind, be, fmt(cell_lc(base["cells"], "lc_alone", kind)),
                   fmt(cell_lc(base["cells"], f"lcbe_{be}_stock", kind))]
            row += [fmt(cell_lc(d["cells"], f"lcbe_{be}_gpuslice", kind, own=True)) for _, d in data]
            print("| " + " | ".join(row) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
