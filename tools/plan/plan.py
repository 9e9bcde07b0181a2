#!/usr/bin/python3
"""gpuslice plan: predict an LC's p50/p99 and each BE's throughput on one GPU.

    plan.py predict --lc graph --be gpu [--be launch:75 ...] [--policy gpuslice|stock]
    plan.py predict --lc hist:P50,P90,P99,MAX --lc-gpu-us 250 --lc-rate 100 --be gpu
    plan.py predict --lc prom:metrics.txt:my-lc --lc-gpu-us 250 --be gpu
    plan.py sweep --lc graph --be gpu --rates 50,100,200,400   # as LC load rises
    plan.py validate [--markdown]      # every matrix cell, predicted against measured

Workload models are calibrated from a workload-matrix result's alone and stock
cells (default: run 2 on an H100, bench/gpu/matrix/). docs/plan.md explains the
model and its limits. Standard library only.
"""
import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from gpuplan import matrix as mx  # noqa: E402
from gpuplan import scenario as sc  # noqa: E402
from gpuplan.histogram import read_exposition  # noqa: E402
from gpuplan.workloads import LcModel, Quantiles  # noqa: E402

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
DEFAULT_CALIBRATION = os.path.join(ROOT, mx.MATRIX_DIR, "results-2026-11-23-h100-run2.json")


class UsageError(Exception):
    pass


def parse_lc(args, lcs):
    spec = args.lc
    if spec in lcs:
        m = lcs[spec]
    elif spec.startswith("hist:"):
        try:
            p50, p90, p99, pmax = (float(x) for x in spec[5:].split(","))
        except ValueError:
            raise UsageError("--lc hist:P50,P90,P99,MAX takes four latencies in µs, e.g. hist:280,300,420,600")
        if args.lc_gpu_us is None:
            raise UsageError("--lc hist:... needs --lc-gpu-us (the request's GPU time, µs)")
        m = LcModel("hist", 1e6 / 100.0, Quantiles.from_percentiles(p50, p99, p90=p90, pmax=pmax), args.lc_gpu_us)
    elif spec.startswith("prom:"):
        path, _, vgpu = spec[5:].rpartition(":")
        if not path or not vgpu:
            raise UsageError("--lc prom:FILE:VGPU takes a saved /metrics page and the LC vGPU's name")
        if args.lc_gpu_us is None:
            raise UsageError("--lc prom:... needs --lc-gpu-us (the request's GPU time, µs)")
        m = LcModel("prom", 1e6 / 100.0, read_exposition(path, vgpu), args.lc_gpu_us)
    else:
        raise UsageError("--lc %r: use one of %s, hist:P50,P90,P99,MAX or prom:FILE:VGPU"
                         % (spec, ", ".join(sorted(lcs))))
    if args.lc_rate is not None:
        if args.lc_rate <= 0:
            raise UsageError("--lc-rate must be > 0 requests/s")
        m.period_us = 1e6 / args.lc_rate
    if args.lc_gpu_us is not None:
        m.gpu_us = args.lc_gpu_us
    if args.lc_kernels is not None:
        m.n_kernels = max(1, args.lc_kernels)
    m.poisson = args.poisson
    return m


def parse_be(specs, bes):
    tenants = []
    for i, spec in enumerate(specs):
        kind, _, rest = spec.partition(":")
        if kind not in bes:
            raise UsageError("--be %r: kind must be one of %s (optionally :SHARE[:capCAP])" % (spec, ", ".join(bes)))
        weight, cap = 100, 0
        for part in filter(None, rest.split(":")):
            if part.startswith("cap"):
                cap = int(part[3:])
            else:
                weight = int(part)
        if not (1 <= weight <= 100) or not (0 <= cap <= 100):
            raise UsageError("--be %r: share must be 1..100 and cap 0..100" % spec)
        tenants.append(sc.Tenant("be%d-%s" % (i, kind), bes[kind], weight=weight, cap_pct=cap))
    return tenants


def cmd_predict(args):
    d = mx.load(args.calibration)
    gp = mx.gpu_params(d)
    if args.switch_us is not None:
        gp.preempt_us = args.switch_us
    if args.load_us is not None:
        gp.load_us = args.load_us
    bes = mx.be_models(d, gp)
    tenants = parse_be(args.be or [], bes)
    if args.lc:
        tenants.insert(0, sc.Tenant("lc", parse_lc(args, mx.lc_models(d)), lc=True))
    if not tenants:
        raise UsageError("nothing to simulate: give --lc and/or --be")
    policy = {"stock": sc.STOCK, "gpuslice": sc.GPUSLICE}[args.policy]
    out = sc.simulate(tenants, policy, gp, seconds=args.seconds, seed=args.seed)
    result = {"policy": policy.name, "switch_us": gp.preempt_us, "load_us": gp.load_us}
    if args.lc:
        result["lc"] = {"p50_us": round(out.p("lc", 50), 1), "p99_us": round(out.p("lc", 99), 1),
                        "n": len(out.latencies["lc"])}
        if args.slo_p99_us is not None:
            result["lc"]["meets_slo"] = result["lc"]["p99_us"] <= args.slo_p99_us
    result["be"] = {}
    for t in tenants:
        if t.lc:
            continue
        kind = t.name.split("-", 1)[1]
        alone = mx.alone_rate(bes[kind], gp, seconds=args.seconds, seed=args.seed)
        result["be"][t.name] = {"steps_per_s": round(out.steps_per_s[t.name], 2),
                                "fraction_of_alone": round(out.steps_per_s[t.name] / alone, 3)}
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        if "lc" in result:
            print("LC p50 %.0f µs, p99 %.0f µs (%d requests)" % (result["lc"]["p50_us"], result["lc"]["p99_us"],
                                                                 result["lc"]["n"]))
        for name, b in result["be"].items():
            print("%s: %.1f%% of alone (%.2f steps/s)" % (name, 100 * b["fraction_of_alone"], b["steps_per_s"]))
    return 0


def cmd_sweep(args):
    """LC latency and BE throughput as the LC's load rises, under each policy
    (the shape of GPreempt's figure), as a markdown table."""
    d = mx.load(args.calibration)
    gp = mx.gpu_params(d)
    bes = mx.be_models(d, gp)
    try:
        rates = [float(r) for r in args.rates.split(",")]
    except ValueError:
        raise UsageError("--rates takes requests/s separated by commas, e.g. 50,100,200")
    if any(r <= 0 for r in rates):
        raise UsageError("--rates must all be > 0")
    tenants_be = parse_be(args.be or ["gpu"], bes)
    alone = {t.name: mx.alone_rate(t.model, gp, seconds=args.seconds, seed=args.seed) for t in tenants_be}
    print("| policy | LC req/s | LC p50 µs | LC p99 µs | " + " | ".join("%s %% of alone" % t.name for t in tenants_be)
          + " |")
    print("|---|---|---|---|" + "---|" * len(tenants_be))
    for name in ("stock", "gpuslice"):
        policy = {"stock": sc.STOCK, "gpuslice": sc.GPUSLICE}[name]
        for rate in rates:
            args.lc_rate = rate
            lc = sc.Tenant("lc", parse_lc(args, mx.lc_models(d)), lc=True)
            out = sc.simulate([lc] + tenants_be, policy, gp, seconds=args.seconds, seed=args.seed)
            fr = " | ".join("%.1f" % (100 * out.steps_per_s[t.name] / alone[t.name]) for t in tenants_be)
            print("| %s | %g | %.0f | %.0f | %s |" % (name, rate, out.p("lc", 50), out.p("lc", 99), fr))
    return 0


def cmd_validate(args):
    rows = mx.all_rows(args.root, seconds=args.seconds, seed=args.seed)
    if args.markdown:
        print(mx.markdown(rows))
    else:
        print(mx.summary(rows))
    return 0


def main(argv=None):
    ap = argparse.ArgumentParser(prog="plan.py", description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("predict", help="predict one GPU's tenants")
    p.add_argument("--lc", help="tiny | graph | eager | hist:P50,P90,P99,MAX (alone latencies, µs) | "
                   "prom:FILE:VGPU (its gpuslice_vgpu_lc_latency_seconds histogram in a saved /metrics page)")
    p.add_argument("--lc-rate", type=float, help="LC requests per second")
    p.add_argument("--lc-gpu-us", type=float, help="GPU time of one LC request (µs)")
    p.add_argument("--lc-kernels", type=int, help="kernels per LC request (1 = one graph)")
    p.add_argument("--poisson", action="store_true", help="Poisson arrivals instead of a fixed period")
    p.add_argument("--slo-p99-us", type=float, help="report whether the predicted p99 meets this SLO")
    p.add_argument("--be", action="append", help="gpu | launch | mem, optionally :SHARE and :capCAP; repeat")
    p.add_argument("--policy", choices=("gpuslice", "stock"), default="gpuslice")
    p.add_argument("--calibration", default=DEFAULT_CALIBRATION, help="a workload-matrix results JSON")
    p.add_argument("--switch-us", type=float, help="switch cost from a busy channel group (µs)")
    p.add_argument("--load-us", type=float, help="switch cost from an idle channel group (µs)")
    p.add_argument("--seconds", type=float, default=5.0)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--json", action="store_true")
    p.set_defaults(fn=cmd_predict)
    w = sub.add_parser("sweep", help="LC latency and BE throughput as the LC's load rises")
    w.add_argument("--lc", default="graph", help="as for predict")
    w.add_argument("--lc-gpu-us", type=float)
    w.add_argument("--lc-kernels", type=int)
    w.add_argument("--poisson", action="store_true")
    w.add_argument("--rates", default="25,50,100,200,400", help="LC requests/s, comma-separated")
    w.add_argument("--be", action="append", help="as for predict (default: gpu)")
    w.add_argument("--calibration", default=DEFAULT_CALIBRATION)
    w.add_argument("--seconds", type=float, default=3.0)
    w.add_argument("--seed", type=int, default=1)
    w.set_defaults(fn=cmd_sweep, lc_rate=None)
    v = sub.add_parser("validate", help="predict every matrix cell and compare")
    v.add_argument("--root", default=ROOT)
    v.add_argument("--markdown", action="store_true")
    v.add_argument("--seconds", type=float, default=mx.VALIDATION_SECONDS)
    v.add_argument("--seed", type=int, default=1)
    v.set_defaults(fn=cmd_validate)
    args = ap.parse_args(argv)
    try:
        return args.fn(args)
    except (UsageError, ValueError, OSError) as e:
        print("plan.py: %s" % e, file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
