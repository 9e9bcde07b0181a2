#!/usr/bin/env python3
"""Check 6: a small CNN trains for STEPS SGD steps (batch 64 of 3x64x64, 10
classes, synthetic data) inside a 4 GiB vGPU, with finite losses."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import common  # noqa: E402
import training  # noqa: E402

STEPS = 300
LIMIT = 4 * common.GiB


def work(held, go):
    result = training.train("small_cnn", batch=64, steps=STEPS, warmup=0)
    result["median_step_ms"] = common.median(result.pop("step_s")) * 1e3
    return result


def parent(inject):
    sync = common.Sync(common.work_dir("train_small"))
    cmd = common.under_gpuslice(common.child_cmd(__file__, sync.path, "a"), inject=inject)
    res = common.run_children([("a", cmd, None)], sync)
    child = res["payloads"]["a"]
    fields = {"inject": inject, "child": child, "real": res["real"],
              "exit_codes": res["exit_codes"]}
    if "error" in child:
        return False, dict(fields, error=f"child: {child['error']}")
    asserts = {
        "completed_all_steps": child["steps"] == STEPS,
        "losses_finite": child["losses_finite"],
        "ran_in_vgpu": child["mem_get_info"][1] == LIMIT,
    }
    fields.update(asserts=asserts, loss_decreased=child["last_loss"] < child["first_loss"])
    return all(asserts.values()), fields


def main():
    return common.check_main("train_small", work, parent)


if __name__ == "__main__":
    sys.exit(main())
