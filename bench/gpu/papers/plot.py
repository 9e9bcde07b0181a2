"""Tables and plots from run_papers.py's papers.json, each beside the
paper's claim.

    python3 bench/gpu/papers/plot.py papers.json [OUTDIR]
    python3 bench/gpu/papers/plot.py call1/papers.json call2/papers.json OUTDIR   (merged: OUTDIR/papers-merged.json)

Writes OUTDIR/papers.md (the tables; also written by run_papers.py after
every cell) and, where matplotlib imports, OUTDIR/gaia_overhead.png,
gaia_split.png, gaia_isolation.png, gaia_elastic.png, gpreempt.png.
OUTDIR defaults to the JSON's folder. render_md() needs only the standard
library.
"""
import json
import sys
from pathlib import Path

CLAIMS = {
    "a": "GaiaGPU: intercepting the CUDA driver API to share a GPU costs little: a framework's training runs "
         "at nearly the speed it has without the interposer.",
    "b": "GaiaGPU: a GPU split into vGPUs gives each one throughput in proportion to the compute share it was "
         "given (here: each tenant's fraction of its alone throughput against its share, 100/N %).",
    "c": "GaiaGPU: tenants are isolated: none can use more device memory than its limit, however hard it tries, "
         "and each gets its own share of GPU time whatever its neighbours do.",
    "d": "GaiaGPU: allocation is elastic: a vGPU may use compute its neighbours leave idle, gives it back when they "
         "need it, and its share can be changed while it runs.",
    "g": "GPreempt: with preemptive priority, a latency-critical (LC) task keeps a latency close to running alone "
         "as its load rises, while best-effort (BE) work keeps most of its throughput; stock time-slicing, MPS and "
         "running the two one after the other do worse on one or the other.",
}


def cells(res, part):
    return res.get("parts", {}).get(part, {}).get("cells", {})


def good(c):
    return isinstance(c, dict) and "error" not in c and "skipped" not in c


def why(c):
    if c is None:
        return "not run"
    if "skipped" in c:
        return "skipped: " + str(c["skipped"])
    return "error: " + c.get("error", "").splitlines()[0][:120]


def f(v, fmt="{:.2f}"):
    return "—" if v is None else fmt.format(v)


def gib(b):
    return "—" if b is None else f"{b / (1 << 30):.2f}"


def render_md(res):
    meta = res.get("meta", {})
    L = ["# The papers' experiments on gpuslice (issue 16)", "",
         f"GPU: {meta.get('gpu', '?')}; date {meta.get('date', '?')}; git {meta.get('git', '?')}; "
         f"parts {','.join(meta.get('parts', []))}; {meta.get('seconds', '?')} s" + (" **[FAKE: made-up figures]**"
                                                                                  if meta.get("fake") else ""), ""]
    # a
    if "a" in res.get("parts", {}):
        L += ["## GaiaGPU (a): overhead, MNIST-shaped training", "", "*Claim:* " + CLAIMS["a"], "",
              "Steps/s, median of the runs of each arm (runs taken one at a time, order ABBA); ratio = gpuslice / stock; "
              "spread = (max − min) / median of the stock runs (the noise floor).", "",
              "| framework | batch | stock steps/s | gpuslice steps/s | ratio | overhead | pair ratios | stock spread |",
              "|---|---|---|---|---|---|---|---|"]
        for name, c in cells(res, "a").items():
            if not good(c):
                L.append(f"| {name[2:]} | — | — | — | — | {why(c)} | — | — |")
                continue
            for b, x in c["by_batch"].items():
                L.append(f"| {c['framework']} | {b} | {x['stock_median']:.1f} | {x['gpuslice_median']:.1f} | {x['ratio']:.4f} "
                         f"| {x['overhead_pct']:+.2f}% | {', '.join(f'{r:.3f}' for r in x['pair_ratios'])} "
                         f"| {f(x['stock_spread'], '{:.1%}')} |")
        L.append("")
    # b
    if "b" in res.get("parts", {}):
        cb = cells(res, "b")
        alone = cb.get("b_alone")
        L += ["## GaiaGPU (b): one GPU split into N vGPUs", "", "*Claim:* " + CLAIMS["b"], "",
              f"Alone (no gpuslice): {f(alone.get('steps_per_s'))} steps/s" if good(alone) else f"Alone: {why(alone)}", "",
              "Each tenant: the same training, `--compute 100/N`, `--memory 0.9 × GPU / N`. fraction = its steps/s ÷ alone; "
              "÷ share = fraction ÷ (share/100) (1.00 = exactly proportional); GPU busy = its GPU-seconds per second "
              "(daemon).", "",
              "| N | share % | fraction of alone per tenant | ÷ share (min–max) | sum of fractions | GPU busy per tenant |",
              "|---|---|---|---|---|---|"]
        for n in sorted(int(k[3:]) for k in cb if k.startswith("b_n")):
            c = cb[f"b_n{n}"]
            if not good(c):
                L.append(f"| {n} | {100 // n} | {why(c)} | — | — | — |")
                continue
            fr = [t.get("frac_of_alone") for t in c["tenants"]]
            busy = [t.get("gpu_busy") for t in c["tenants"]]
            L.append(f"| {n} | {c['share_pct']} | {', '.join(f(x, '{:.3f}') for x in fr)} "
                     f"| {f(c.get('min_frac_over_share'))}–{f(c.get('max_frac_over_share'))} | {f(c.get('sum_frac'), '{:.3f}')} "
                     f"| {', '.join(f(x, '{:.2f}') for x in busy)} |")
        L.append("")
    # c
    if "c" in res.get("parts", {}):
        L += ["## GaiaGPU (c): isolation", "", "*Claim:* " + CLAIMS["c"], "",
              "Each tenant first allocates 256 MiB blocks towards 1.5 × its limit, frees them, then trains (`-2x`: twice "
              "the batch). Ledger peak: the vGPU's charged bytes (`gpuslice ls --json`, sampled); nvidia-smi peak: the "
              "process's real usage, context included. GPU busy: GPU-seconds per second; GPU % = its part of the "
              "tenants' sum (equal shares: 100/N each).", ""]
        for name, c in cells(res, "c").items():
            if not good(c):
                L += [f"{name}: {why(c)}", ""]
                continue
            L += [f"**{c['n']} tenants**, `--compute {c['share_pct']}`, `--memory {c['memory_gib']}GiB` each "
                  f"(GPU {c['gpu_total_gib']} GiB); GPU time from {c['gpu_time_source']}.", "",
                  "| tenant | batch | limit GiB | tried GiB | got GiB | refused | ledger peak GiB | nvidia-smi peak MiB "
                  "| ≤ limit | steps/s | GPU busy | GPU % of sum |", "|---|---|---|---|---|---|---|---|---|---|---|---|"]
            for t in c["tenants"]:
                L.append(f"| {t['tenant']} | {t.get('batch_used') or t['batch']} | {gib(t['limit_bytes'])} "
                         f"| {gib(t['grab_asked_bytes'])} | {gib(t['grab_got_bytes'])} | {t['grab_oom']} "
                         f"| {gib(t['ledger_peak_bytes'])} | {f(t['smi_peak_mib'], '{:.0f}')} | {t['within_limit']} "
                         f"| {t['steps_per_s']:.1f} | {f(t['gpu_busy'])} | {f(t.get('gpu_share_of_sum_pct'), '{:.1f}')} |")
            L.append("")
    # d
    if "d" in res.get("parts", {}):
        c = cells(res, "d").get("d_elastic")
        L += ["## GaiaGPU (d): elastic allocation over time", "", "*Claim:* " + CLAIMS["d"], ""]
        if not good(c):
            L += [f"d_elastic: {why(c)}", ""]
        else:
            L += [f"Fractions of alone ({c['reference']}, {f(c['alone_steps_per_s'])} steps/s). `gpuslice set` took "
                  + ", ".join(f"{s['seconds']} s (exit {s['exit']})" for s in c["sets"])
                  + f"; A's throughput crossed the midpoint within {f(c['set_effect_s'])} s of the set.", "",
                  "| phase | share A / B | A fraction | B fraction | A + B |", "|---|---|---|---|---|"]
            for p in c["phases"]:
                L.append(f"| {p['phase']} | {p['share_A']} / {p['share_B'] or '—'} | {f(p['A_frac'], '{:.3f}')} "
                         f"| {f(p['B_frac'], '{:.3f}')} | {f((p['A_frac'] or 0) + (p['B_frac'] or 0), '{:.3f}')} |")
            L.append("")
    # g
    if "g" in res.get("parts", {}):
        cg = cells(res, "g")
        L += ["## GPreempt: LC latency and BE throughput as LC load rises", "", "*Claim:* " + CLAIMS["g"], "",
              "LC: the matrix's CUDA-graph encoder (batch 1), open-loop; latency from the request's arrival to its "
              "completion (µs; it includes any wait behind BE work), p50 / p99; × alone = p99 over alone's p99 at that "
              "rate. BE: compute/train.py's transformer training; kept = its steps/s over the LC's window ÷ alone.", ""]
        alone = cg.get("g_lc_alone")
        be = cg.get("g_be_alone")
        L.append(f"BE alone: {f(be.get('be_steps_per_s'))} steps/s." if good(be) else f"BE alone: {why(be)}.")
        L.append("")
        settings = [k for k in ("g_lc_alone", "g_stock", "g_mps", "g_seq", "g_gpuslice") if k in cg]
        rates = sorted({float(r) for k in settings if good(cg[k]) for r in cg[k]["rates"]})
        L += ["| setting | " + " | ".join(f"{r:g} req/s: p50 / p99 (× alone), BE kept" for r in rates) + " |",
              "|---|" + "---|" * len(rates)]
        for k in settings:
            c = cg[k]
            if not good(c):
                L.append(f"| {k[2:]} | {why(c)} |" + " |" * (len(rates) - 1))
                continue
            row = []
            for r in rates:
                x = c["rates"].get(f"{r:g}")
                if not x:
                    row.append("—")
                    continue
                a = good(alone) and alone["rates"].get(f"{r:g}")
                xa = f" ({x['arr_p99_us'] / a['arr_p99_us']:.1f}×)" if a and k != "g_lc_alone" and a.get("arr_p99_us") else ""
                kept = f", {100 * x['be_kept']:.0f}%" if x.get("be_kept") is not None else ""
                row.append(f"{x['arr_p50_us']:.0f} / {x['arr_p99_us']:.0f}{xa}{kept}")
            L.append(f"| {c.get('setting', k[2:])} | " + " | ".join(row) + " |")
        L.append("")
    return "\n".join(L)


def plots(res, outdir):
    import matplotlib  # noqa: PLC0415 - optional

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415

    made = []
    ca = {k: c for k, c in cells(res, "a").items() if good(c)}
    if ca:
        fig, ax = plt.subplots(figsize=(6, 3.5))
        labels, vals = [], []
        for c in ca.values():
            for b, x in c["by_batch"].items():
                labels.append(f"{c['framework']}\nbatch {b}")
                vals.append(x["ratio"])
        ax.bar(labels, vals, color="tab:blue")
        ax.axhline(1.0, color="k", lw=0.8)
        ax.set_ylim(min(0.9, min(vals) - 0.02), max(1.02, max(vals) + 0.01))
        ax.set_ylabel("steps/s with gpuslice ÷ without")
        ax.set_title("GaiaGPU (a): overhead, MNIST-shaped training")
        fig.tight_layout()
        fig.savefig(outdir / "gaia_overhead.png", dpi=120)
        made.append("gaia_overhead.png")
    cb = cells(res, "b")
    ns = sorted(int(k[3:]) for k, c in cb.items() if k.startswith("b_n") and good(c) and "sum_frac" in c)
    if ns:
        fig, ax = plt.subplots(figsize=(6, 3.8))
        for n in ns:
            c = cb[f"b_n{n}"]
            fr = [t["frac_of_alone"] for t in c["tenants"]]
            ax.scatter([n] * len(fr), fr, s=18, color="tab:blue", zorder=3, label="each tenant" if n == ns[0] else None)
            ax.hlines(c["share_pct"] / 100, n - 0.3, n + 0.3, color="tab:red", label="its share" if n == ns[0] else None)
        ax.set_xticks(ns)
        ax.set_ylim(bottom=0)
        ax.set_xlabel("vGPUs on the GPU (N), --compute 100/N each")
        ax.set_ylabel("throughput ÷ alone")
        ax.set_title("GaiaGPU (b): throughput against share")
        ax.legend()
        fig.tight_layout()
        fig.savefig(outdir / "gaia_split.png", dpi=120)
        made.append("gaia_split.png")
    cc = [c for c in cells(res, "c").values() if good(c)]
    if cc:
        fig, axes = plt.subplots(2, len(cc), figsize=(4 * len(cc), 6), squeeze=False)
        for i, c in enumerate(cc):
            ts = c["tenants"]
            x = range(len(ts))
            ax = axes[0][i]
            ax.bar([j - 0.27 for j in x], [t["limit_bytes"] / (1 << 30) for t in ts], 0.27, label="limit", color="tab:gray")
            ax.bar(list(x), [(t["grab_got_bytes"] or 0) / (1 << 30) for t in ts], 0.27, label="got (its own count)",
                   color="tab:cyan")
            ax.bar([j + 0.27 for j in x], [(t["ledger_peak_bytes"] or 0) / (1 << 30) for t in ts], 0.27,
                   label="ledger peak", color="tab:blue")
            ax.scatter(list(x), [(t["grab_asked_bytes"] or 0) / (1 << 30) for t in ts], marker="x", color="tab:red",
                       label="tried", zorder=3)
            ax.set_title(f"{c['n']} tenants: memory (GiB)")
            ax.set_xticks(list(x), [t["tenant"] for t in ts], fontsize=7)
            if i == 0:
                ax.legend(fontsize=7)
            ax = axes[1][i]
            busy = [t.get("gpu_share_of_sum_pct") for t in ts]
            if all(b is not None for b in busy):
                ax.bar(list(x), busy, color="tab:green")
                ax.axhline(100 / c["n"], color="tab:red", lw=1, label="equal share")
                ax.set_title("GPU time, % of the tenants' sum")
            else:
                ax.bar(list(x), [t["steps_per_s"] for t in ts], color="tab:green")
                ax.set_title("steps/s (no GPU time recorded)")
            ax.set_xticks(list(x), [t["tenant"] for t in ts], fontsize=7)
        fig.suptitle("GaiaGPU (c): isolation")
        fig.tight_layout()
        fig.savefig(outdir / "gaia_isolation.png", dpi=120)
        made.append("gaia_isolation.png")
    cd = cells(res, "d").get("d_elastic")
    if good(cd):
        fig, ax = plt.subplots(figsize=(7, 3.5))
        tl = cd["timeline"]
        ax.plot(tl["t"], tl["A"], label="A", color="tab:blue")
        ax.plot(tl["t"], tl["B"], label="B", color="tab:orange")
        for k, lab in (("B_go", "B joins"), ("set", "set A 70 / B 30"), ("B_stop", "B stops")):
            if k in cd["marks"]:
                ax.axvline(cd["marks"][k], color="k", ls=":", lw=0.8)
                ax.text(cd["marks"][k], 1.05, lab, fontsize=7, rotation=0)
        ax.set_ylim(0, max([1.2] + [1.1 * v for v in tl["A"] + tl["B"] if v is not None]))
        ax.set_xlabel("seconds")
        ax.set_ylabel("throughput ÷ alone")
        ax.set_title("GaiaGPU (d): elastic allocation (A 30 → 70, B 70 → 30)")
        ax.legend(loc="lower left")
        fig.tight_layout()
        fig.savefig(outdir / "gaia_elastic.png", dpi=120)
        made.append("gaia_elastic.png")
    cg = {k: c for k, c in cells(res, "g").items() if good(c) and "rates" in c}
    if cg:
        fig, (a1, a2) = plt.subplots(1, 2, figsize=(10, 3.8))
        colors = {"g_lc_alone": "tab:gray", "g_stock": "tab:orange", "g_mps": "tab:purple", "g_seq": "tab:red",
                  "g_gpuslice": "tab:green"}
        kept_max = 100.0
        for k, c in cg.items():
            rs = sorted(c["rates"].values(), key=lambda x: x["rate"])
            col = colors.get(k)
            a1.plot([x["rate"] for x in rs], [x["arr_p99_us"] / 1000 for x in rs], marker="o", color=col,
                    label=c.get("setting", k))
            if any(x.get("be_kept") is not None for x in rs):
                kept = [100 * (x.get("be_kept") or 0) for x in rs]
                kept_max = max([kept_max] + kept)
                a2.plot([x["rate"] for x in rs], kept, marker="o", color=col, label=c.get("setting", k))
        a1.set_yscale("log")
        a1.set_xlabel("LC load (req/s)")
        a1.set_ylabel("LC p99, arrival to completion (ms)")
        a1.legend(fontsize=7)
        a2.set_xlabel("LC load (req/s)")
        a2.set_ylabel("BE throughput, % of alone")
        a2.set_ylim(0, 1.1 * kept_max)
        a2.legend(fontsize=7)
        fig.suptitle("GPreempt: LC latency and BE throughput as LC load rises")
        fig.tight_layout()
        fig.savefig(outdir / "gpreempt.png", dpi=120)
        made.append("gpreempt.png")
    return made


def merge(paths):
    """Several runs' papers.json (e.g. --parts a,b,d and --parts c,g) as one:
    a later file's part replaces an earlier one's; meta lists the runs."""
    res = {"meta": {}, "parts": {}}
    for p in paths:
        d = json.loads(Path(p).read_text())
        res["parts"].update(d.get("parts", {}))
        m = d.get("meta", {})
        res["meta"].setdefault("runs", []).append({k: m.get(k) for k in ("gpu", "date", "git", "parts", "seconds", "fake")})
        for k, v in m.items():
            res["meta"].setdefault(k, v)
    if len(paths) > 1:
        res["meta"]["parts"] = list(res["parts"])
        res["meta"]["seconds"] = " + ".join(str(r.get("seconds")) for r in res["meta"]["runs"])
    return res


def main():
    args = sys.argv[1:]
    if not args:
        sys.exit("usage: plot.py papers.json [more.json ...] [OUTDIR]")
    jsons = [a for a in args if a.endswith(".json")]
    rest = [a for a in args if not a.endswith(".json")]
    res = merge(jsons)
    outdir = Path(rest[0]) if rest else Path(jsons[0]).parent
    if len(jsons) > 1:
        outdir.mkdir(parents=True, exist_ok=True)
        (outdir / "papers-merged.json").write_text(json.dumps(res, indent=1))
    outdir.mkdir(parents=True, exist_ok=True)
    (outdir / "papers.md").write_text(render_md(res))
    try:
        made = plots(res, outdir)
    except ImportError as e:
        print(f"plot.py: no plots ({e}); tables in {outdir / 'papers.md'}")
        return
    print(f"plot.py: {outdir / 'papers.md'}, " + ", ".join(str(outdir / m) for m in made))


if __name__ == "__main__":
    main()
