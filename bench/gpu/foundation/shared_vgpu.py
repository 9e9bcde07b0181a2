#!/usr/bin/env python3
"""Check 4: two processes joined to one 4 GiB vGPU (gpuslice run --name), released
together, each allocate until torch.cuda.OutOfMemoryError. One memory account
means: what torch allocated in both sums to at most 4 GiB, and their summed real
usage minus two CUDA contexts is at most 4 GiB."""

import argparse
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import common  # noqa: E402
from oom_torch import CAP, LIMIT, judge  # noqa: E402

TAGS = ("a", "b")


def parent(inject):
    context = common.context_mib()
    name = f"shared-{os.getpid()}"
    sync = common.Sync(common.work_dir("shared_vgpu"))
    children = [(tag, common.under_gpuslice(common.child_cmd(__file__, sync.path, tag),
                                            name=name, inject=inject), None) for tag in TAGS]
    res = common.run_children(children, sync, barrier=True)
    payloads = res["payloads"]
    fields = {"inject": inject, "vgpu": name, "limit_bytes": LIMIT, "children": payloads,
              "real": res["real"], "context": context, "exit_codes": res["exit_codes"]}
    errors = {tag: p["error"] for tag, p in payloads.items() if "error" in p}
    if errors:
        return False, dict(fields, error=f"children: {errors}")
    asserts, figures = judge(list(payloads.values()), res["real"]["total_mib"],
                             context["context_mib"], contexts=len(TAGS))
    figures["allocated_bytes_each"] = {t: p["allocated_bytes"] for t, p in payloads.items()}
    fields.update(figures, asserts=asserts)
    return all(asserts.values()), fields


def main():
    args, rest = common.child_args()
    if args.child:
        return common.serve_child(args.sync, args.tag,
                                  lambda held, go: common.fill_torch(held, go, CAP), barrier=True)
    ap = argparse.ArgumentParser()
    ap.add_argument("--inject", default="preload", choices=["preload", "libpath"])
    opts = ap.parse_args(rest)
    return common.run_check("shared_vgpu", lambda: parent(opts.inject))


if __name__ == "__main__":
    sys.exit(main())
