#!/usr/bin/env python3
"""Check 7: the cost of gpuslice on a training step. ResNet-18 on 128x3x64x64
trains WITHOUT gpuslice (A) and WITH it (B, a 4 GiB vGPU) in fresh processes,
alternating A/B over PAIRS pairs; each run warms up, then times STEPS steps,
each ending with torch.cuda.synchronize(). Target: median(B) / median(A) <= 1.005.
The spread of A's per-run medians is the noise floor to read the ratio against."""

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import common  # noqa: E402
import training  # noqa: E402

PAIRS = 3
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
    runs = {"A": [], "B": []}
    for i in range(PAIRS):
        for arm in ("A", "B"):
            runs[arm].append(one_run(arm, i, inject))

    def summary(arm):
        medians = [common.median(s) * 1e3 for s, _ in runs[arm]]
        pooled = common.median([t for s, _ in runs[arm] for t in s]) * 1e3
        return {"median_step_ms": pooled, "run_median_ms": medians,
                "run_spread": (max(medians) - min(medians)) / pooled}

    a, b = summary("A"), summary("B")
    ratio = b["median_step_ms"] / a["median_step_ms"]
    totals = {arm: [c["mem_get_info"][1] for _, c in runs[arm]] for arm in runs}
    asserts = {
        "ratio_within_target": ratio <= TARGET_RATIO,
        "b_ran_in_vgpu": all(t == LIMIT for t in totals["B"]),
        "a_ran_outside": all(t != LIMIT for t in totals["A"]),
        "losses_finite": all(c["losses_finite"] for arm in runs for _, c in runs[arm]),
    }
    fields = {"inject": inject, "model": "resnet18", "batch": BATCH, "warmup": WARMUP,
              "steps": STEPS, "pairs": PAIRS, "without_gpuslice": a, "with_gpuslice": b,
              "ratio": ratio, "overhead_pct": (ratio - 1) * 100, "target_ratio": TARGET_RATIO,
              "pair_ratios": [common.median(rb[0]) / common.median(ra[0])
                              for ra, rb in zip(runs["A"], runs["B"])],
              "asserts": asserts}
    return all(asserts.values()), fields


def main():
    args, rest = common.child_args()
    if args.child:
        return common.serve_child(args.sync, args.tag, work)
    ap = argparse.ArgumentParser()
    ap.add_argument("--inject", default="preload", choices=["preload", "libpath"])
    opts = ap.parse_args(rest)
    return common.run_check("train_overhead", lambda: parent(opts.inject))


if __name__ == "__main__":
    sys.exit(main())
