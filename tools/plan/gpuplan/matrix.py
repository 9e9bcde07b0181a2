"""Calibration from, and validation against, the measured workload matrix
(bench/gpu/matrix/results-*.json; docs/benchmarks.md, "Workload matrix").

Calibration reads ONLY a run's alone cells (lc_alone, lc_alone_end,
be_alone_*) and one stock cell (the switch cost from an idle GPU, below);
the gpuslice cells are then predicted and compared, every one, misses
included. Stock cells are simulated too and shown apart, as a check of the
calibration, not as validation.

Not thread-safe; deterministic for a given seed.
"""
import json
import os
import random
from dataclasses import dataclass, replace

from . import scenario as sc
from .workloads import BeModel, LcModel, Quantiles

# docs/gpu-facts.md, "What the hardware scheduler does with slices": a busy
# TSG is off the GPU for the other's slice plus ~350 µs, "about 170-180 µs"
# per switch. Used for switching away from a TSG that still has work.
PREEMPT_US = 175.0

# Assumptions about the BE kinds, where no alone cell measures them
# (bench/gpu/matrix/README.md, "Workloads"; docs/plan.md says why):
# kernels per step, the GPU's busy fraction alone, and the launch-to-launch
# host time.
BE_SHAPES = {
    # 6-layer d1024 transformer, batch 64: GPU-bound; the host launches far
    # ahead, the GPU idles only across the step's synchronisation.
    "gpu": dict(kernels=[("launch", 1.0)] * 100, busy=0.98, gap_us=10.0, jitter=0.1),
    # resnet18 at batch 32 of 32x32: "200+ small kernels", "the GPU ~25% busy".
    "launch": dict(kernels=[("launch", 1.0)] * 200, busy=0.25, gap_us=None, jitter=1.0),
    # 8 x (addcmul over 4 GiB of traffic, then a 2 GiB copy): DRAM-bound; the
    # copy is a cuMemcpyAsync (not gated).
    "mem": dict(kernels=[("launch", 2.0), ("copy", 1.0)] * 8, busy=0.98, gap_us=10.0, jitter=0.1),
}


def load(path):
    with open(path) as f:
        d = json.load(f)
    if not isinstance(d, dict) or "cells" not in d or "meta" not in d:
        raise ValueError("%s: not a workload-matrix result (no 'meta' and 'cells'); pass a "
                         "bench/gpu/matrix/results-*.json file" % path)
    return d


# --- calibration ---------------------------------------------------------
def _alone_lc(cells):
    """Per LC kind, the alone percentiles: the mean of lc_alone and
    lc_alone_end where both were measured (as the matrix's × alone)."""
    runs = [cells[k]["lc"] for k in ("lc_alone", "lc_alone_end") if k in cells and "lc" in cells[k]]
    if not runs:
        raise ValueError("no lc_alone cell: the LC models are calibrated from it")
    out = {}
    for kind in runs[0]:
        keys = ("p50_us", "p90_us", "p99_us", "max_us")
        out[kind] = {k: sum(r[kind][k] for r in runs if kind in r) / sum(1 for r in runs if kind in r) for k in keys}
    return out


def lc_models(d):
    cells, knobs = d["cells"], d["meta"].get("knobs", {})
    alone = _alone_lc(cells)
    la = cells["lc_alone"]

    def q(kind):
        a = alone[kind]
        return Quantiles.from_percentiles(a["p50_us"], a["p99_us"], p90=a["p90_us"], pmax=a["max_us"])

    return {
        "tiny": LcModel("tiny", knobs.get("PERIOD_US", 5000.0), q("tiny"), la["tiny_kernel_us"]),
        "graph": LcModel("graph", 1e6 / knobs.get("GRAPH_RATE", 100.0), q("graph"), la["graph_gpu_us"]),
        # the same model eagerly: ~100 launches (README), the graph's GPU time
        "eager": LcModel("eager", la["eager_period_ms"] * 1000.0, q("eager"), la["graph_gpu_us"], n_kernels=100),
    }


def gpu_params(d):
    """preempt: docs/gpu-facts.md. load (a switch from an idle TSG): stock
    tiny beside the launch-bound BE, whose queue is empty most of the time,
    less tiny alone: p50 stock - p50 alone (a stock cell, never gpuslice)."""
    cells = d["cells"]
    alone = _alone_lc(cells)["tiny"]["p50_us"]
    stock = cells["lcbe_launch_stock"]["lc"]["tiny"]["p50_us"]
    return sc.GpuParams(preempt_us=PREEMPT_US, load_us=round(stock - alone, 1))


def alone_rate(model, gp, seconds=2.0, seed=5):
    """A BE model's simulated steps/s alone (no gpuslice, nothing beside it)."""
    out = sc.simulate([sc.Tenant("be", model)], sc.STOCK, gp, seconds=seconds, warmup=0.3, seed=seed)
    return out.steps_per_s["be"]


def be_models(d, gp):
    """Each BE kind's shape (BE_SHAPES) scaled to its measured alone steps/s:
    three fixed-point passes of a simulated alone run."""
    cells = d["cells"]
    out = {}
    for kind, shape in BE_SHAPES.items():
        key = "be_alone_" + kind
        if key not in cells or "steps_per_s" not in cells[key]:
            continue
        rate = cells[key]["steps_per_s"]
        step = 1e6 / rate
        units = sum(w for _, w in shape["kernels"])
        gpu_total = shape["busy"] * step
        kernels = [(k, gpu_total * w / units) for k, w in shape["kernels"]]
        n = len(kernels)
        if shape["gap_us"] is None:  # host-bound: the host's launches set the pace
            gap, tail = (step - gpu_total / n) / n, 0.0
        else:
            gap, tail = shape["gap_us"], max(0.0, step * (1 - shape["busy"]) - shape["gap_us"])
        m = BeModel(kind, kernels, gap, tail, jitter=shape["jitter"])
        for _ in range(3):
            r = alone_rate(m, gp)
            m = m.scaled(gpu=r / rate, host=r / rate)
        m.source = {"alone_steps_per_s": rate, "busy": shape["busy"]}
        out[kind] = m
    return out


# --- the runs and what each predicts --------------------------------------
MATRIX_DIR = "bench/gpu/matrix"
VALIDATION_SECONDS = 6.0  # simulated seconds per cell
# The builds these runs measured started a capped turn with 1 ms of tokens
# (min_quantum_us; 10 ms since run 45).
RUN1 = sc.Policy("gpuslice, run-1 build", gpuslice=True, backfill=False, beside_lc_us=sc.DEFAULT_SLICE_US,
                 min_quantum_us=1000.0)
RUN2 = sc.Policy("gpuslice", gpuslice=True, min_quantum_us=1000.0)
# (file, label, policy of its gpuslice cells, only cells measured in that call)
RUNS = [
    ("results-2026-11-23-h100-run1.json", "run 1 (9928368: exclusive turns; BE slice reverted to 2048 µs)", RUN1,
     False),
    ("results-2026-11-23-h100-run2.json", "run 2 (9b433aa: backfill turns, slices read back)", RUN2, False),
    ("results-2026-11-23-h100-run2-holdoff.json", "run 2, GPUSLICE_LC_HOLD=off",
     replace(RUN2, name="hold off", auto_hold=False), True),
    ("results-2026-11-23-h100-run2-backfill500.json", "run 2, backfill slice 500 µs",
     replace(RUN2, name="backfill 500", backfill_slice_us=500.0), True),
    ("results-2026-11-23-h100-run2-backfill2048.json", "run 2, backfill slice 2048 µs",
     replace(RUN2, name="backfill 2048", backfill_slice_us=2048.0), True),
    ("results-2026-11-23-h100-run2-capmin5ms.json", "run 2, shortest capped turn 5 ms",
     replace(RUN2, name="cap min 5 ms", min_quantum_us=5000.0), True),
]


@dataclass
class Row:
    run: str
    cell: str
    setting: str  # stock | gpuslice
    figure: str
    measured: float
    predicted: float
    unit: str  # "us" or "%"
    note: str = ""  # why nothing was measured (measured is None)

    @property
    def error(self):
        """Latencies: relative error (%). Fractions: percentage points.
        None where the cell was not measured."""
        if self.measured is None:
            return None
        if self.unit == "us":
            return 100.0 * (self.predicted - self.measured) / self.measured
        return self.predicted - self.measured


def predict(d, label, policy, only_new=False, seconds=4.0, seed=1):
    cells = d["cells"]
    gp = gpu_params(d)
    lcs = lc_models(d)
    bes = be_models(d, gp)
    alone_sim = {k: alone_rate(m, gp, seconds=seconds, seed=seed) for k, m in bes.items()}
    rows = []

    def wanted(key):
        c = cells.get(key)
        return isinstance(c, dict) and not c.get("error") and not c.get("skipped") and (
            not only_new or "from_prior" not in c)

    for be in ("gpu", "launch", "mem"):
        for setting, pol in (("stock", sc.STOCK), ("gpuslice", policy)):
            key = "lcbe_%s_%s" % (be, setting)
            if not wanted(key) or be not in bes:
                continue
            for lc in ("tiny", "graph", "eager"):
                meas = cells[key]["lc"].get(lc)
                if not meas:
                    continue
                out = sc.simulate([sc.Tenant("lc", lcs[lc], lc=True), sc.Tenant("be", bes[be])], pol, gp,
                                  seconds=seconds, seed=seed)
                cell = "%s + %s" % (lc, be)
                rows.append(Row(label, cell, setting, "LC p50", meas["p50_us"], out.p("lc", 50), "us"))
                rows.append(Row(label, cell, setting, "LC p99", meas["p99_us"], out.p("lc", 99), "us"))
                rows.append(Row(label, cell, setting, "BE kept", 100 * meas["be_kept"],
                                100 * out.steps_per_s["be"] / alone_sim[be], "%"))
    for key, c in cells.items():
        if not key.startswith("mix_") or not isinstance(c, dict) or (only_new and "from_prior" in c):
            continue
        # a mix that failed or was skipped is predicted all the same, and
        # shown as not measured
        note = "" if wanted(key) else ("failed" if c.get("error") else "not run: %s" % c.get("skipped", "?"))
        kinds, targets, setting = _mix_of(key, c)
        pol = sc.STOCK if setting == "stock" else policy
        tenants = [sc.Tenant("t%d-%s" % (i, k), bes[k], weight=w) for i, (k, w) in enumerate(zip(kinds, targets))]
        out = sc.simulate(tenants, pol, gp, seconds=seconds, seed=seed)
        cell = "+".join("%s:%d" % kw for kw in zip(kinds, targets))
        total = 0.0
        for i, t in enumerate(tenants):
            frac = 100 * out.steps_per_s[t.name] / alone_sim[kinds[i]]
            total += frac
            meas = None if note else 100 * c["frac"][i]
            rows.append(Row(label, cell, setting, "%s %% of alone" % kinds[i], meas, frac, "%", note))
        rows.append(Row(label, cell, setting, "total", None if note else 100 * c["total"], total, "%", note))
    for key, c in cells.items():
        if not key.startswith("cap30_") or not wanted(key) or "achieved_pct" not in c:
            continue
        out = sc.simulate([sc.Tenant("be", bes[c["be"]], cap_pct=c["cap_pct"])], policy, gp, seconds=seconds,
                          seed=seed)
        rows.append(Row(label, "cap %d%%: %s" % (c["cap_pct"], c["be"]), "gpuslice", "% of alone",
                        c["achieved_pct"], 100 * out.steps_per_s["be"] / alone_sim[c["be"]], "%"))
    return rows


# docs/gpu-facts.md, "What the hardware scheduler does with slices" (H200):
# LC a 50 µs kernel every 5 ms (alone 53/74 µs p50/p99), BE back-to-back
# 20 ms kernels; BE slice -> LC p50, p99 (µs); BE throughput 95% in each.
GPU_FACTS_SLICES = [(2048.0, 996.0, 2319.0), (1000.0, 589.0, 1208.0), (200.0, 306.0, 432.0), (50.0, 242.0, 300.0),
                    (10.0, 230.0, 256.0)]
GPU_FACTS_BE_KEPT = 95.0
GPU_FACTS_RUN = "gpu-facts (H200, the scheduler alone)"


def gpu_facts_rows(gp, seconds=VALIDATION_SECONDS, seed=1):
    """The scheduler core alone against the measured slice table: no
    workload model but a fixed kernel, so only the GPU model is tested."""
    lc = LcModel("lc", 5000.0, Quantiles.from_percentiles(53.0, 74.0), 50.0)
    be = BeModel("be", [("launch", 20_000.0)] * 4, gap_us=1.0, tail_us=0.0)
    alone = alone_rate(be, gp, seconds=seconds, seed=seed)
    rows = []
    for slice_us, p50, p99 in GPU_FACTS_SLICES:
        pol = sc.Policy("BE slice %g" % slice_us, gpuslice=True, beside_lc_us=slice_us, auto_hold=False)
        out = sc.simulate([sc.Tenant("lc", lc, lc=True), sc.Tenant("be", be)], pol, gp, seconds=seconds, seed=seed)
        cell = "BE slice %g µs" % slice_us
        rows.append(Row(GPU_FACTS_RUN, cell, "gpuslice", "LC p50", p50, out.p("lc", 50), "us"))
        rows.append(Row(GPU_FACTS_RUN, cell, "gpuslice", "LC p99", p99, out.p("lc", 99), "us"))
        rows.append(Row(GPU_FACTS_RUN, cell, "gpuslice", "BE kept", GPU_FACTS_BE_KEPT,
                        100 * out.steps_per_s["be"] / alone, "%"))
    return rows


def _mix_of(key, cell):
    """(kinds, targets, setting) of a mix cell; from its name
    (mix_gpu30_mem70_gpuslice) when it failed before recording them."""
    if "kinds" in cell and "targets" in cell and "setting" in cell:
        return cell["kinds"], cell["targets"], cell["setting"]
    parts = key.split("_")[1:]
    setting = parts.pop()
    kinds = [p.rstrip("0123456789") for p in parts]
    targets = [int(p[len(k):]) for p, k in zip(parts, kinds)]
    return kinds, targets, setting


def all_rows(root, seconds=VALIDATION_SECONDS, seed=1):
    rows = []
    for name, label, policy, only_new in RUNS:
        d = load(os.path.join(root, MATRIX_DIR, name))
        rows += predict(d, label, policy, only_new, seconds=seconds, seed=seed)
    # the H100 run 2's switch costs: the table's GPU is an H200 (docs/plan.md)
    d = load(os.path.join(root, MATRIX_DIR, RUNS[1][0]))
    rows += gpu_facts_rows(gpu_params(d), seconds=seconds, seed=seed)
    return rows


def calibration_text(root):
    """The calibrated parameters of each main run, for the doc."""
    lines = []
    for name, label, _, only_new in RUNS:
        if only_new:
            continue
        d = load(os.path.join(root, MATRIX_DIR, name))
        gp = gpu_params(d)
        lines.append("- %s: switch %.0f µs from a busy TSG (docs/gpu-facts.md), %.1f µs from an idle one "
                     "(stock tiny + launch p50 − tiny alone p50)" % (label, gp.preempt_us, gp.load_us))
        for k, m in be_models(d, gp).items():
            n = len(m.kernels)
            lines.append("  - BE `%s`: %d kernels a step, %.0f µs of GPU time, host gap %.1f µs before each "
                         "launch, %.0f µs after the step's sync (alone %.2f steps/s)"
                         % (k, n, m.gpu_us_per_step(), m.gap_us, m.tail_us, m.source["alone_steps_per_s"]))
    return "\n".join(lines)


def _fmt(v, unit):
    return "%.0f" % v if unit == "us" else "%.1f" % v


def markdown(rows):
    """The predicted-against-measured tables: gpuslice cells (the
    validation), stock cells (the calibration's check), the scheduler alone
    against docs/gpu-facts.md, then the summary."""
    out = []
    sections = (("Predicted: every gpuslice cell", lambda r: r.setting == "gpuslice" and r.run != GPU_FACTS_RUN),
                ("Calibration check: every stock cell", lambda r: r.setting == "stock"),
                ("The scheduler alone: docs/gpu-facts.md's slice table (H200; H100 switch costs)",
                 lambda r: r.run == GPU_FACTS_RUN))
    for title, keep in sections:
        out.append("#### %s\n" % title)
        out.append("| run | cell | figure | measured | predicted | error |")
        out.append("|---|---|---|---|---|---|")
        for r in rows:
            if not keep(r):
                continue
            unit = " µs" if r.unit == "us" else "%"
            if r.measured is None:
                measured, err = "— (%s)" % r.note, "—"
            else:
                measured = _fmt(r.measured, r.unit) + unit
                err = ("%+.0f%%" % r.error) if r.unit == "us" else ("%+.1f pp" % r.error)
            out.append("| %s | %s | %s | %s | %s%s | %s |" % (r.run, r.cell, r.figure, measured,
                                                            _fmt(r.predicted, r.unit), unit, err))
        out.append("")
    out.append(summary(rows))
    return "\n".join(out)


FAMILIES = [
    ("LC p50, tiny and graph (%)", lambda r: r.figure == "LC p50" and not r.cell.startswith("eager")),
    ("LC p99, tiny and graph (%)", lambda r: r.figure == "LC p99" and not r.cell.startswith("eager")),
    ("LC p50, eager (%)", lambda r: r.figure == "LC p50" and r.cell.startswith("eager")),
    ("LC p99, eager (%)", lambda r: r.figure == "LC p99" and r.cell.startswith("eager")),
    ("BE kept beside LC, gpu and mem (pp)", lambda r: r.figure == "BE kept" and not r.cell.endswith("launch")),
    ("BE kept beside LC, launch (pp)", lambda r: r.figure == "BE kept" and r.cell.endswith("launch")),
    ("share mixes, gpu and mem tenants (pp)",
     lambda r: r.figure in ("gpu % of alone", "mem % of alone") and not r.cell.startswith("cap")),
    ("share mixes, launch tenants (pp)", lambda r: r.figure == "launch % of alone"),
    ("share mixes, total (pp)", lambda r: r.figure == "total"),
    ("caps (pp)", lambda r: r.cell.startswith("cap")),
]


def _stats(values):
    v = sorted(abs(x) for x in values if x is not None)
    if not v:
        return "—"
    n = len(v)
    med = v[n // 2] if n % 2 else (v[n // 2 - 1] + v[n // 2]) / 2
    return "%d, median %.1f, worst %.1f" % (n, med, v[-1])


def _run_to_run(rows, keep):
    """The measurement against itself: the same cell and figure measured in
    run 1 and in run 2 (stock cells; caps: gpuslice, the same turns in both)."""
    first, second = RUNS[0][1], RUNS[1][1]
    by = {}
    for r in rows:
        if keep(r) and (r.setting == "stock" or r.cell.startswith("cap")) and r.run in (first, second):
            by.setdefault((r.setting, r.cell, r.figure), {})[r.run] = r
    out = []
    for pair in by.values():
        if first in pair and second in pair and None not in (pair[first].measured, pair[second].measured):
            a, b = pair[first].measured, pair[second].measured
            out.append(100.0 * (a - b) / b if pair[first].unit == "us" else a - b)
    return out


def summary(rows):
    """Per figure family: the absolute error of the gpuslice predictions and
    of the stock fits, and how far the same cell moved between runs 1 and 2
    (the measurement's own reproducibility)."""
    lines = ["| figure | gpuslice cells: predicted − measured (cells, median, worst) | stock cells (the fit) "
             "| measured run 1 − run 2, same cell |", "|---|---|---|---|"]
    facts = [r for r in rows if r.run == GPU_FACTS_RUN]
    rows = [r for r in rows if r.run != GPU_FACTS_RUN]
    for name, keep in FAMILIES:
        g = [r.error for r in rows if r.setting == "gpuslice" and keep(r)]
        s = [r.error for r in rows if r.setting == "stock" and keep(r)]
        lines.append("| %s | %s | %s | %s |" % (name, _stats(g), _stats(s), _stats(_run_to_run(rows, keep))))
    if facts:
        for fig, unit in (("LC p50", "%"), ("LC p99", "%"), ("BE kept", "pp")):
            sel = [r.error for r in facts if r.figure == fig]
            lines.append("| scheduler alone (gpu-facts), %s (%s) | %s | — | — |" % (fig, unit, _stats(sel)))
    return "\n".join(lines) + "\n"
