"""PNG plots of a workload-matrix run (run_matrix.py's matrix.json).

    python3 bench/gpu/matrix/plot.py OUT/matrix.json [PLOT_DIR]

PLOT_DIR defaults to a `plots` folder beside the json. Writes, for what the
run has:
  matrix_lc.png      heatmaps, LC kind x BE kind: LC p99 over alone for stock
                     and gpuslice (eager: p50 over alone, its target), and BE
                     kept (throughput in the LC's window over alone) for
                     stock and gpuslice; gpuslice cells marked pass / MISS
  matrix_shares.png  per mix: each tenant's target, gpuslice split and stock
                     split (% of the sum of fractions of alone), the totals;
                     and the caps (achieved % of alone, target band)
Needs matplotlib (Agg backend; no display). The figures and verdicts come from
run_matrix.py's own table code (imported), so plot and matrix.md agree.
"""
import json
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
import run_matrix as rm  # noqa: E402


def heat(ax, rows, lcs, bes, value, title, vmin, vmax, cmap, fmt, verdict=None, ylabels=True):
    grid = [[None] * len(bes) for _ in lcs]
    for r in rows:
        grid[lcs.index(r["lc"])][bes.index(r["be"])] = r
    data = [[(value(r) if r else None) for r in line] for line in grid]
    masked = [[float("nan") if v is None else v for v in line] for line in data]
    im = ax.imshow(masked, cmap=cmap, vmin=vmin, vmax=vmax, aspect="auto")
    for i, line in enumerate(grid):
        for j, r in enumerate(line):
            v = data[i][j]
            text = "not run" if v is None else fmt(v)
            if verdict and r is not None and v is not None:
                p = verdict(r)
                text += "" if p is None else ("\npass" if p else "\nMISS")
            ax.text(j, i, text, ha="center", va="center", fontsize=8)
    ax.set_xticks(range(len(bes)))
    ax.set_xticklabels([f"BE {b}" for b in bes])
    ax.set_yticks(range(len(lcs)))
    ax.set_yticklabels([f"LC {k}" + (" (p50)" if k == "eager" and "×" in title else "") for k in lcs]
                       if ylabels else [])
    ax.set_title(title, fontsize=10)
    return im


def plot_lc(res, spec, d):
    lcs, bes = spec["lc_kinds"], spec["be_kinds"]
    rows = rm.lc_rows(res["cells"], lcs, bes)
    if not rows:
        return False

    def lat_x(setting):
        """Gpuslice's or stock's latency over alone: p50 for eager (its target), else p99."""
        def value(r):
            q = "p50" if r["lc"] == "eager" else "p99"
            return rm.ratio(r[f"{q}_{setting}"], r[f"{q}_alone"])
        return value

    fig, axes = plt.subplots(2, 2, figsize=(4 + 2.6 * len(bes), 2 + 2.2 * len(lcs)))
    im = heat(axes[0][0], rows, lcs, bes, lat_x("stock"), "stock: LC p99 × alone (eager p50)", 1.0, 2.0,
              "RdYlGn_r", lambda v: f"{v:.2f}×")
    heat(axes[0][1], rows, lcs, bes, lat_x("gpuslice"), "gpuslice: LC p99 × alone (eager p50)", 1.0, 2.0,
         "RdYlGn_r", lambda v: f"{v:.2f}×", verdict=lambda r: r["lc_pass"], ylabels=False)
    fig.colorbar(im, ax=axes[0], shrink=0.8, label="× alone")
    im = heat(axes[1][0], rows, lcs, bes, lambda r: r["be_kept_stock"], "stock: BE kept (of alone)", 0.5, 1.0,
              "RdYlGn", lambda v: f"{100 * v:.0f}%")
    heat(axes[1][1], rows, lcs, bes, lambda r: r["be_kept_gpuslice"], "gpuslice: BE kept (of alone)", 0.5, 1.0,
         "RdYlGn", lambda v: f"{100 * v:.0f}%", verdict=lambda r: r["be_pass"], ylabels=False)
    fig.colorbar(im, ax=axes[1], shrink=0.8, label="BE kept")
    fig.suptitle(f"LC × BE: targets p99 ≤ {rm.LC_P99_X}× alone (eager p50 ≤ {rm.EAGER_P50_X}× alone and ≤ stock), "
                 f"BE kept ≥ {100 * rm.BE_KEPT_MIN:.0f}%", fontsize=10)
    fig.savefig(d / "matrix_lc.png", dpi=120, bbox_inches="tight")
    plt.close(fig)
    return True


def plot_shares(res, spec, d):
    mrows = rm.mix_rows(res["cells"], rm.parse_mixes(",".join(spec["mixes"])))
    crows = rm.cap_rows(res["cells"], spec["cap_kinds"], spec["cap_pct"])
    if not mrows and not crows:
        return False
    n = sum(len(r["kinds"]) for r in mrows)
    fig, axes = plt.subplots(1, 2, figsize=(4 + 0.9 * n + 1.2 * len(crows), 4.8),
                             gridspec_kw={"width_ratios": [max(1, n), max(1, len(crows))]})
    ax = axes[0]
    x, ticks, labels, w = 0.0, [], [], 0.27
    for r in mrows:
        for i, k in enumerate(r["kinds"]):
            bars = [(x - w, r["targets"][i], "#bbbbbb", "target"),
                    (x, r["gpuslice_split"] and r["gpuslice_split"][i], "#1f77b4", "gpuslice split"),
                    (x + w, r["stock_split"] and r["stock_split"][i], "#d62728", "stock split")]
            for bx, v, c, lab in bars:
                if v is not None:
                    b = ax.bar(bx, v, w, color=c, label=lab if x == 0 else None)
                    ax.bar_label(b, fmt="%.0f", fontsize=7)
            ticks.append(x)
            labels.append(k)
            x += 1
        tot = (f"total gs {100 * r['gpuslice_total']:.0f}% / stock {100 * r['stock_total']:.0f}%"
               if r["gpuslice_total"] is not None and r["stock_total"] is not None else "total: not run")
        mid = x - len(r["kinds"]) / 2 - 0.5
        ax.text(mid, -8, "+".join(r["kinds"]) + " " + "/".join(map(str, r["targets"])), ha="center", fontsize=7)
        ax.text(mid, -14, tot, ha="center", fontsize=7)
        x += 0.5
    ax.set_xticks(ticks)
    ax.set_xticklabels(labels, fontsize=7)
    ax.set_ylim(-18, 105)
    ax.axhline(0, color="black", linewidth=0.5)
    ax.set_ylabel("% of the sum of fractions of alone")
    ax.set_title(f"--compute shares (target: split within {rm.SPLIT_PP:g} pp, total ≥ {100 * rm.TOTAL_MIN:.0f}% "
                 "of stock)", fontsize=9)
    if mrows:
        ax.legend(fontsize=7, loc="upper right")
    ax = axes[1]
    if crows:
        vals = [r["achieved_pct"] if r["achieved_pct"] is not None else 0 for r in crows]
        b = ax.bar(range(len(crows)), vals, color=["#1f77b4" if r["pass"] else "#d62728" for r in crows])
        ax.bar_label(b, fmt="%.1f", fontsize=8)
        t = spec["cap_pct"]
        ax.axhspan(t - rm.CAP_PP, t + rm.CAP_PP, color="#2ca02c", alpha=0.2, label=f"{t} ± {rm.CAP_PP:g}")
        ax.set_xticks(range(len(crows)))
        ax.set_xticklabels([r["be"] for r in crows])
        ax.set_ylim(0, max(60, max(vals) * 1.15))
        ax.set_ylabel("% of alone throughput")
        ax.legend(fontsize=7)
    ax.set_title(f"--compute-cap {spec['cap_pct']}, alone", fontsize=9)
    fig.savefig(d / "matrix_shares.png", dpi=120, bbox_inches="tight")
    plt.close(fig)
    return True


def main():
    if len(sys.argv) < 2:
        sys.exit("usage: plot.py OUT/matrix.json [PLOT_DIR]")
    src = Path(sys.argv[1])
    d = Path(sys.argv[2]) if len(sys.argv) > 2 else src.parent / "plots"
    d.mkdir(parents=True, exist_ok=True)
    res = json.loads(src.read_text())
    spec = res.get("meta", {}).get("table") or rm.table_spec({"lc", "cap", "share"})
    made = [name for name, fn in (("matrix_lc.png", plot_lc), ("matrix_shares.png", plot_shares)) if fn(res, spec, d)]
    print("wrote", ", ".join(str(d / m) for m in made) if made else "nothing (no cells with figures)")


if __name__ == "__main__":
    main()
