#!/usr/bin/env python3
"""Checks 2 and 3: in a 4 GiB vGPU, PyTorch allocating 64 MiB tensors (then
1 MiB ones) until failure gets torch.cuda.OutOfMemoryError, has allocated at
most 4 GiB, and the process's real device usage, read by nvidia-smi while it
holds that memory, is at most 4 GiB plus one CUDA context. --expandable runs
the same with PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True, the allocator
path that maps memory with cuMemCreate/cuMemMap."""

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import common  # noqa: E402

LIMIT = 4 * common.GiB
# If no limit is enforced the child stops here instead of filling the GPU.
CAP = 2 * LIMIT
# A working limit lets the process fill most of it; well under this means the
# limit (or its accounting of the context) is off.
MIN_FILL = 0.75


def judge(allocs, real_mib, context_mib, contexts=1):
    """The figures and assertions shared by the single- and two-process checks."""
    allocated = sum(a["allocated_bytes"] for a in allocs)
    real_minus_ctx = real_mib - contexts * context_mib
    asserts = {
        "raised_out_of_memory": all(a["first_failure"] and a["first_failure"]["expected_type"]
                                    for a in allocs),
        "cap_not_reached": not any(a["cap_reached"] for a in allocs),
        "allocated_within_limit": allocated <= LIMIT,
        "allocated_fills_limit": allocated >= MIN_FILL * LIMIT,
        "real_within_limit_plus_context": real_minus_ctx <= LIMIT / common.MiB,
    }
    figures = {"allocated_bytes": allocated, "allocated_mib": allocated / common.MiB,
               "real_mib": real_mib, "context_mib": context_mib,
               "real_minus_context_mib": real_minus_ctx,
               "limit_plus_context_mib": LIMIT / common.MiB + contexts * context_mib}
    return asserts, figures


def parent(inject, expandable):
    context = common.context_mib()
    sync = common.Sync(common.work_dir("oom_torch"))
    env = {"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"} if expandable else None
    cmd = common.under_gpuslice(common.child_cmd(__file__, sync.path, "a"), inject=inject)
    res = common.run_children([("a", cmd, env)], sync)
    child = res["payloads"]["a"]
    fields = {"inject": inject, "expandable_segments": expandable, "limit_bytes": LIMIT,
              "child": child, "real": res["real"], "context": context,
              "exit_codes": res["exit_codes"]}
    if "error" in child:
        return False, dict(fields, error=f"child: {child['error']}")
    asserts, figures = judge([child], res["real"]["total_mib"], context["context_mib"])
    fields.update(figures, asserts=asserts)
    return all(asserts.values()), fields


def main():
    args, rest = common.child_args()
    if args.child:
        return common.serve_child(args.sync, args.tag,
                                  lambda held, go: common.fill_torch(held, go, CAP))
    ap = argparse.ArgumentParser()
    ap.add_argument("--inject", default="preload", choices=["preload", "libpath"])
    ap.add_argument("--expandable", action="store_true")
    opts = ap.parse_args(rest)
    name = "oom_torch_expandable" if opts.expandable else "oom_torch"
    return common.run_check(name, lambda: parent(opts.inject, opts.expandable))


if __name__ == "__main__":
    sys.exit(main())
