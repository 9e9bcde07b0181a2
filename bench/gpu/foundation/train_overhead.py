#!/usr/bin/env python3
"""Check 7: the cost of gpuslice on a training step. ResNet-18 on 128x3x64x64
trains in fresh processes, in ROUNDS rounds of three runs: WITHOUT gpuslice (A),
WITH it (B, a 4 GiB vGPU), and without it again (A2, the noise floor). The
order rotates each round so that no arm always runs first. Each run warms up,
then times STEPS steps, each ending with torch.cuda.synchronize().
Reported: the median over rounds of B/A (target <= 1.005) and of A2/A, which
says how large a difference the machine's own noise makes."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import common  # noqa: E402
import training  # noqa: E402

ROUNDS = int(__import__("os").environ.get("TRAIN_OVERHEAD_ROUNDS", "6"))
WARMUP = 30
STEPS = 150
BATCH = 128
TARGET_RATIO = 1.005
LIMIT = 4 * common.GiB


def work(held, go):
    return training.train("resnet18", batch=BATCH, steps=STEPS, warmup=WARMUP)


def one_run(arm, index, inject):
    sync = common.Sync(common.work_dir(f"train_overhead-{arm}{index}"))
    cmd = common.child_cmd(__file__, sync.path, "a")
    if arm == "B":
        cmd = common.under_gpuslice(cmd, inject=inject)
    child = common.run_children([("a", cmd, None)], sync)["payloads"]["a"]
    if "error" in child:
        raise RuntimeError(f"run {arm}{index}: {child['error']}")
    steps = child.pop("step_s")
    print(f"  {arm}{index}: median step {common.median(steps) * 1e3:.3f} ms", flush=True)
    return steps, child


def parent(inject):
    arms = ("A", "B", "A2")
    runs = {arm: [] for arm in arms}
    for i in range(ROUNDS):
        for k in range(len(arms)):
            arm = arms[(i + k) % len(arms)]
            runs[arm].append(one_run(arm, i, inject))

    def run_medians(arm):
        return [common.median(s) * 1e3 for s, _ in runs[arm]]

    a, b, a2 = run_medians("A"), run_medians("B"), run_medians("A2")
    ratio = common.median([y / x for x, y in zip(a, b)])
    noise = common.median([y / x for x, y in zip(a, a2)])
    totals = {arm: [c["mem_get_info"][1] for _, c in runs[arm]] for arm in runs}
    asserts = {
        "ratio_within_target": ratio <= TARGET_RATIO,
        "b_ran_in_vgpu": all(t == LIMIT for t in totals["B"]),
        "a_ran_outside": all(t != LIMIT for t in totals["A"] + totals["A2"]),
        "losses_finite": all(c["losses_finite"] for arm in runs for _, c in runs[arm]),
    }
    fields = {"inject": inject, "model": "resnet18", "batch": BATCH, "warmup": WARMUP,
              "steps": STEPS, "rounds": ROUNDS,
              "run_median_ms": {"without": a, "with": b, "without_again": a2},
              "ratio": ratio, "overhead_pct": (ratio - 1) * 100,
              "noise_ratio": noise, "noise_pct": (noise - 1) * 100, "target_ratio": TARGET_RATIO,
              "round_ratios": [y / x for x, y in zip(a, b)], "asserts": asserts}
    return all(asserts.values()), fields


def main():
    return common.check_main("train_overhead", work, parent)


if __name__ == "__main__":
    sys.exit(main())
