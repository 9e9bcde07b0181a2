"""PNG plots of a compute benchmark run (run_compute.py's compute.json).

    python3 bench/gpu/compute/plot.py OUT/compute.json [PLOT_DIR]

PLOT_DIR defaults to a `plots` folder beside the json. Writes, for what the
run has (a figure whose scenarios are all missing is left out):
  lc_synthetic.png   LC p50/p99 of the 50 µs kernel at 200 req/s, alone /
                     stock / gpuslice / MPS, and of the same request after
                     400 µs of host preparation, without and with the hint
  lc_resnet50.png    ResNet-50 batch-1 LC p50 and p99 per phase (eager,
                     eager+span, graph, eager+prep, eager+hint), for alone /
                     stock / gpuslice / MPS
  be_throughput.png  BE throughput beside the LC as a fraction of what the LC
                     leaves idle (target >= 0.9)
  shares.png         --compute shares: target vs measured (normalised to the
                     total, and against running alone), per vGPU
  lc_holder.png      pre-preemption and residency (holder.h): the prepared
                     LC with and without a holder (stream, grace), and the
                     eager LC with spans, holders and none
  cap.png            --compute-cap 30 achieved (target 30 +- 3 pp) for small
                     kernels, CUDA graphs and training; elasticity of a
                     --compute 30 vGPU alone
Needs matplotlib (Agg backend; no display).
"""
import json
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

COLORS = {"alone": "#7f7f7f", "stock": "#d62728", "gpuslice": "#1f77b4", "gpuslice+hint": "#17becf",
          "gpuslice+holder": "#9467bd", "mps": "#2ca02c"}


def ok(s, name):
    r = s.get(name)
    return r if isinstance(r, dict) and "error" not in r and "skipped" not in r else None


def setting_of(name):
    if name.endswith("_alone"):
        return "alone"
    if name.endswith("_hint"):
        return "gpuslice+hint"
    for k in ("stock", "gpuslice", "mps"):
        if k in name:
            return k
    return name


def label_bars(ax, bars, fmt):
    for b in bars:
        h = b.get_height()
        if h > 0:
            ax.annotate(fmt(h), (b.get_x() + b.get_width() / 2, h), ha="center", va="bottom", fontsize=7,
                        xytext=(0, 2), textcoords="offset points")


def lc_panel(ax, s, names, title, labels=None):
    """p50/p99 bars of the scenarios `names` that the run has; `labels` names
    the bars (else their setting: alone, stock, gpuslice...)."""
    label = (lambda n: labels.get(n, n)) if labels else setting_of
    rows = [(n, ok(s, n)) for n in names]
    rows = [(n, r) for n, r in rows if r and "p50_us" in r]
    if not rows:
        ax.set_axis_off()
        ax.set_title(title + " (no data)")
        return False
    x = range(len(rows))
    w = 0.38
    p50 = [r["p50_us"] for _, r in rows]
    p99 = [r["p99_us"] for _, r in rows]
    colors = [COLORS.get(setting_of(n), "#999999") for n, _ in rows]
    b1 = ax.bar([i - w / 2 for i in x], p50, w, color=colors, alpha=0.55, label="p50")
    b2 = ax.bar([i + w / 2 for i in x], p99, w, color=colors, label="p99", edgecolor="black", linewidth=0.5)
    label_bars(ax, b1, lambda v: f"{v:.0f}")
    label_bars(ax, b2, lambda v: f"{v:.0f}")
    ax.set_xticks(list(x))
    ax.set_xticklabels([label(n) for n, _ in rows], fontsize=8 if labels else None)
    ax.set_ylabel("LC latency (µs)")
    if max(p99) / max(1e-9, min(p50)) > 30:
        ax.set_yscale("log")
    ax.set_title(title)
    ax.legend(handles=[plt.Rectangle((0, 0), 1, 1, color="#555", alpha=0.55),
                       plt.Rectangle((0, 0), 1, 1, color="#555")], labels=["p50 (light)", "p99 (dark)"], fontsize=8)
    return True


def plot_lc_synthetic(s, d):
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.5))
    a = lc_panel(axes[0], s, ["lc_alone", "lc_be_stock", "lc_be_gpuslice", "lc_be_mps"],
                 "50 µs kernel at 200 req/s beside a saturating BE")
    b = lc_panel(axes[1], s, ["lchint_alone", "lchint_be_stock", "lchint_be_gpuslice", "lchint_be_gpuslice_hint"],
                 "same, after 400 µs host preparation (from submission)")
    return save(fig, d / "lc_synthetic.png", a or b)


HINT_LABELS = {"lchint_alone": "alone", "lc_alone": "alone\n(no prep)", "lchint_be_stock": "stock",
               "lchint_be_gpuslice": "gpuslice\nno hint", "lchint_be_gpuslice_hint": "hint:\nholder",
               "lchint_be_gpuslice_hint_grace0": "holder\ngrace 0", "lchint_be_gpuslice_hint_grace10":
               "holder\ngrace 10 µs", "lchint_be_gpuslice_hint_grace100": "holder\ngrace 100 µs",
               "lchint_be_gpuslice_app_same": "app holder\nsame stream",
               "lchint_be_gpuslice_app_other": "app holder\nother stream"}
# The holder runs of 2026-11-21 (results-*-holder-run*.json) predate
# GPUSLICE_LC_HOLDER: their `lce_be_gpuslice_span` had the span holder on,
# `_span_noholder` was the span alone, `_span_relay` a variant since removed.
EAGER_LABELS = {"lce_alone": "alone", "lce_be_stock": "stock", "lce_be_gpuslice": "gpuslice", "lce_be_gpuslice_span":
                "span", "lce_be_gpuslice_span_holder": "span:\n+holder", "lce_be_gpuslice_span_noholder":
                "span:\nBE hold", "lce_be_gpuslice_span_relay": "span:\nrelay holder", "lce_be_gpuslice_always":
                "always\nholder", "lce_be_gpuslice_app_same": "app relay\nsame stream"}


def plot_holder(s, d):
    """Pre-preemption and residency experiments (holder.h)."""
    fig, axes = plt.subplots(1, 2, figsize=(14, 4.8))
    a = lc_panel(axes[0], s, list(HINT_LABELS), "50 µs LC after 400 µs prep: hints and holders", HINT_LABELS)
    b = lc_panel(axes[1], s, list(EAGER_LABELS), "eager LC: 100 × 20 µs kernels, 30 µs host gaps", EAGER_LABELS)
    return save(fig, d / "lc_holder.png", a or b)


RN_SETTINGS = [("rn50_alone", "alone"), ("rn50_be_stock", "stock"), ("rn50_be_gpuslice", "gpuslice"),
               ("rn50_be_gpuslice_always", "gpuslice+holder"), ("rn50_be_mps", "mps")]


def plot_resnet(s, d):
    runs = [(lab, ok(s, n)) for n, lab in RN_SETTINGS]
    runs = [(lab, r) for lab, r in runs if r and r.get("phases")]
    if not runs:
        return False
    phases = []
    for _, r in runs:
        phases += [p for p in r["phases"] if p not in phases]
    fig, axes = plt.subplots(1, 2, figsize=(13, 4.5))
    w = 0.8 / len(runs)
    for ax, key in zip(axes, ("p50_us", "p99_us")):
        for j, (lab, r) in enumerate(runs):
            xs = [i + (j - (len(runs) - 1) / 2) * w for i, p in enumerate(phases) if p in r["phases"]]
            ys = [r["phases"][p].get(key, 0) / 1000 for p in phases if p in r["phases"]]
            bars = ax.bar(xs, ys, w, color=COLORS[lab], label=lab)
            label_bars(ax, bars, lambda v: f"{v:.1f}")
        ax.set_xticks(range(len(phases)))
        ax.set_xticklabels(phases, fontsize=8)
        ax.set_ylabel(f"LC latency {key[:3]} (ms)")
        ax.set_title(f"ResNet-50 batch 1, {key[:3]}, beside PyTorch training")
        ax.legend(fontsize=8)
    return save(fig, d / "lc_resnet50.png", True)


def plot_be(s, d):
    labels, vals, colors = [], [], []
    for n in ("lc_be_stock", "lc_be_gpuslice", "lc_be_mps", "lchint_be_stock", "lchint_be_gpuslice",
              "lchint_be_gpuslice_hint"):
        r = ok(s, n)
        if r and "be_vs_idle_left" in r:
            labels.append(n.replace("_be_", "\n"))
            vals.append(r["be_vs_idle_left"])
            colors.append(COLORS.get(setting_of(n), "#999"))
    for n, lab in RN_SETTINGS[1:]:
        r = ok(s, n)
        for p, row in (r or {}).get("phases", {}).items():
            if "be_vs_idle_left" in row:
                labels.append(f"rn50 {lab}\n{p}")
                vals.append(row["be_vs_idle_left"])
                colors.append(COLORS[lab])
    if not vals:
        return False
    fig, ax = plt.subplots(figsize=(max(6, 0.8 * len(vals) + 2), 4.5))
    bars = ax.bar(range(len(vals)), vals, color=colors)
    label_bars(ax, bars, lambda v: f"{v:.2f}")
    ax.axhline(0.9, color="black", linestyle="--", linewidth=1, label="target 0.9")
    ax.set_xticks(range(len(vals)))
    ax.set_xticklabels(labels, fontsize=7)
    ax.set_ylabel("BE throughput / (BE alone x (1 - LC busy))")
    ax.set_ylim(0, max(1.1, max(vals) * 1.1))
    ax.set_title("BE throughput beside the LC, of what the LC leaves idle")
    ax.legend(fontsize=8)
    return save(fig, d / "be_throughput.png", True)


def plot_shares(s, d):
    names = [n for n in ("share_30_70", "share_10_90", "share_20_30_50", "share_stock") if ok(s, n)]
    if not names:
        return False
    fig, ax = plt.subplots(figsize=(11, 4.5))
    x, ticks, labels = 0.0, [], []
    w = 0.27
    for n in names:
        r = s[n]
        targets = r.get("target") or [None] * len(r["share_of_total_pct"])
        for i, (t, tot, alone) in enumerate(zip(targets, r["share_of_total_pct"], r["share_vs_alone_pct"])):
            if t is not None:
                label_bars(ax, ax.bar(x - w, t, w, color="#bbbbbb", label="target" if x == 0 else None),
                           lambda v: f"{v:.0f}")
            label_bars(ax, ax.bar(x, tot, w, color="#1f77b4", label="of total" if x == 0 else None),
                       lambda v: f"{v:.1f}")
            label_bars(ax, ax.bar(x + w, alone, w, color="#ff7f0e", label="vs alone" if x == 0 else None),
                       lambda v: f"{v:.1f}")
            ticks.append(x)
            labels.append(f"{n.replace('share_', '')}\nvGPU {'abc'[i]}")
            x += 1
        x += 0.5
    ax.set_xticks(ticks)
    ax.set_xticklabels(labels, fontsize=8)
    ax.set_ylabel("share (%)")
    ax.set_title("--compute shares, PyTorch training in each vGPU")
    ax.legend(fontsize=8)
    return save(fig, d / "shares.png", True)


def plot_cap(s, d):
    rows = [(lab, ok(s, n)) for n, lab in (("small_cap30", "small kernels"), ("graph_cap30", "CUDA graphs"),
                                           ("train_cap_30", "training"))]
    rows = [(lab, r["cap_pct"]) for lab, r in rows if r and "cap_pct" in r]
    el = ok(s, "train_alone_30")
    if not rows and not el:
        return False
    fig, axes = plt.subplots(1, 2, figsize=(10, 4.2), gridspec_kw={"width_ratios": [3, 1]})
    ax = axes[0]
    if rows:
        bars = ax.bar(range(len(rows)), [v for _, v in rows], color="#1f77b4")
        label_bars(ax, bars, lambda v: f"{v:.1f}")
        ax.set_xticks(range(len(rows)))
        ax.set_xticklabels([lab for lab, _ in rows])
    ax.axhspan(27, 33, color="green", alpha=0.15, label="30 ± 3 pp")
    ax.axhline(30, color="green", linewidth=1)
    ax.set_ylim(0, max([40] + [v * 1.15 for _, v in rows]))
    ax.set_ylabel("throughput vs alone (%)")
    ax.set_title("--compute-cap 30, alone")
    ax.legend(fontsize=8)
    ax = axes[1]
    if el and "vs_stock_alone" in el:
        v = 100 * el["vs_stock_alone"]
        label_bars(ax, ax.bar([0], [v], color="#2ca02c"), lambda v: f"{v:.1f}")
        ax.axhline(97, color="black", linestyle="--", linewidth=1, label="target 97")
        ax.legend(fontsize=8)
    ax.set_xticks([0])
    ax.set_xticklabels(["--compute 30\nalone"])
    ax.set_ylim(0, 110)
    ax.set_title("elasticity")
    return save(fig, d / "cap.png", True)


def save(fig, path, any_data):
    if any_data:
        fig.tight_layout()
        fig.savefig(path, dpi=120)
        print("wrote", path)
    plt.close(fig)
    return any_data


def main():
    if len(sys.argv) < 2:
        sys.exit("usage: plot.py compute.json [PLOT_DIR]")
    src = Path(sys.argv[1])
    d = Path(sys.argv[2]) if len(sys.argv) > 2 else src.parent / "plots"
    d.mkdir(parents=True, exist_ok=True)
    data = json.loads(src.read_text())
    s = data.get("scenarios", {})
    made = [f(s, d) for f in (plot_lc_synthetic, plot_resnet, plot_be, plot_shares, plot_cap, plot_holder)]
    gpu = data.get("meta", {}).get("gpu", "")
    print(f"{sum(made)} plots in {d}" + (f" ({gpu})" if gpu else ""))


if __name__ == "__main__":
    main()
