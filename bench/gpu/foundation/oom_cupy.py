#!/usr/bin/env python3
"""Check 5: in a 4 GiB vGPU, CuPy with its stream-ordered pool
(cupy.cuda.MemoryAsyncPool, i.e. cudaMallocAsync on the device's default pool)
allocating 64 MiB arrays (then 2 MiB ones) until failure gets
cupy.cuda.memory.OutOfMemoryError, has allocated at most 4 GiB, and uses at
most 4 GiB plus one CUDA context of real device memory."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import common  # noqa: E402
from oom_torch import CAP, LIMIT, judge  # noqa: E402


def work(held, go):
    import cupy

    pool = cupy.cuda.MemoryAsyncPool()
    cupy.cuda.set_allocator(pool.malloc)
    free0, total0 = cupy.cuda.runtime.memGetInfo()  # creates the context
    go()
    result = common.fill(held, lambda n: cupy.empty(n, dtype=cupy.uint8),
                         cupy.cuda.memory.OutOfMemoryError, CAP,
                         (64 * common.MiB, 2 * common.MiB))
    cupy.cuda.get_current_stream().synchronize()
    free1, total1 = cupy.cuda.runtime.memGetInfo()
    result.update(pool_used_bytes=pool.used_bytes(), pool_reserved_bytes=pool.total_bytes(),
                  mem_get_info_before=[free0, total0], mem_get_info_at_failure=[free1, total1],
                  cupy=cupy.__version__)
    return result


def parent(inject):
    # The context is measured with PyTorch; CuPy's may differ by a few MiB (other
    # modules loaded), so the margin is recorded beside the verdict.
    context = common.context_mib()
    sync = common.Sync(common.work_dir("oom_cupy"))
    cmd = common.under_gpuslice(common.child_cmd(__file__, sync.path, "a"), inject=inject)
    res = common.run_children([("a", cmd, None)], sync)
    child = res["payloads"]["a"]
    fields = {"inject": inject, "limit_bytes": LIMIT, "child": child, "real": res["real"],
              "context": context, "exit_codes": res["exit_codes"]}
    if "error" in child:
        return False, dict(fields, error=f"child: {child['error']}")
    asserts, figures = judge([child], res["real"]["total_mib"], context["context_mib"])
    fields.update(figures, asserts=asserts)
    return all(asserts.values()), fields


def main():
    return common.check_main("oom_cupy", work, parent)


if __name__ == "__main__":
    sys.exit(main())
