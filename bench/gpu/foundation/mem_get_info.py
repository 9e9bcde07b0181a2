#!/usr/bin/env python3
"""Check 1: inside a 4 GiB vGPU, torch.cuda.mem_get_info() reports total = 4 GiB
and free = 4 GiB - usage, and NVML (nvidia-smi joined to the same vGPU) reports
the vGPU's total and usage, while the child holds a 1 GiB tensor."""

import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import common  # noqa: E402

LIMIT = 4 * common.GiB
HOLD = 1 * common.GiB
# cudaMalloc of 1 GiB takes exactly 1 GiB; the slack covers page rounding in
# whatever else the runtime allocates between the two readings.
SLACK = 4 * common.MiB


def work(held, go):
    import torch

    free0, total0 = torch.cuda.mem_get_info()
    held.append(torch.empty(HOLD, dtype=torch.uint8, device="cuda"))
    torch.cuda.synchronize()
    free1, total1 = torch.cuda.mem_get_info()
    return {"before": [free0, total0], "after": [free1, total1], "torch": torch.__version__}


def nvml_in_vgpu(name):
    """nvidia-smi joined to the vGPU. Always injected by preload: NVML's view is
    what is checked here, whichever way the CUDA child was injected."""
    prefix = common.under_gpuslice([], memory="4GiB", name=name, inject="preload")
    try:
        total, used = common.smi("-i", "0", "--query-gpu=memory.total,memory.used",
                                 cmd_prefix=prefix)[0]
        return {"total_mib": int(total), "used_mib": int(used)}
    except Exception as e:  # noqa: BLE001 - recorded; the torch figures still count
        return {"error": f"{type(e).__name__}: {e}", "total_mib": None, "used_mib": None}


def parent(inject):
    name = f"mgi-{os.getpid()}"
    sync = common.Sync(common.work_dir("mem_get_info"))
    cmd = common.under_gpuslice(common.child_cmd(__file__, sync.path, "a"), name=name,
                                inject=inject)
    res = common.run_children([("a", cmd, None)], sync, while_holding=lambda _: nvml_in_vgpu(name))
    child, nvml = res["payloads"]["a"], res["holding"]
    fields = {"inject": inject, "limit_bytes": LIMIT, "child": child, "nvml": nvml,
              "real": res["real"], "exit_codes": res["exit_codes"]}
    if "error" in child:
        return False, dict(fields, error=f"child: {child['error']}")
    (free0, total0), (free1, total1) = child["before"], child["after"]
    asserts = {
        "total_is_limit": total0 == LIMIT and total1 == LIMIT,
        "free_within_total": 0 < free0 <= total0,
        "free_drops_by_allocation": abs((free0 - free1) - HOLD) <= SLACK,
        "nvml_total_is_limit": nvml["total_mib"] == LIMIT // common.MiB,
        "nvml_used_covers_allocation":
            HOLD // common.MiB <= (nvml["used_mib"] or 0) <= LIMIT // common.MiB,
    }
    fields.update(asserts=asserts, vgpu_used_at_start_bytes=total0 - free0)
    return all(asserts.values()), fields


def main():
    return common.check_main("mem_get_info", work, parent)


if __name__ == "__main__":
    sys.exit(main())
