"""An LC's measured latency histogram, read from gpuslice's Prometheus
exposition (`gpuslice_vgpu_lc_latency_seconds`, docs/metrics.md), as the
simulator's latency distribution alone (workloads.Quantiles).

Within a bucket the latency is taken as uniform, as Prometheus's
histogram_quantile() does; the +Inf bucket is capped at the last finite
bound, as there. Pure functions.
"""
import re

from .workloads import Quantiles

METRIC = "gpuslice_vgpu_lc_latency_seconds_bucket"
_LINE = re.compile(r'^%s\{(?P<labels>[^}]*)\}\s+(?P<value>\S+)' % METRIC)
_LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')


def buckets_from_exposition(text, vgpu):
    """{upper bound in seconds (inf for +Inf): cumulative count} of one vGPU."""
    out = {}
    for line in text.splitlines():
        m = _LINE.match(line.strip())
        if not m:
            continue
        labels = dict(_LABEL.findall(m.group("labels")))
        if labels.get("vgpu") != vgpu or "le" not in labels:
            continue
        le = float("inf") if labels["le"] in ("+Inf", "Inf") else float(labels["le"])
        out[le] = out.get(le, 0.0) + float(m.group("value"))
    return out


def quantiles_from_buckets(buckets):
    """Cumulative Prometheus buckets -> Quantiles in µs."""
    if not buckets:
        raise ValueError("no %s samples for that vGPU: is it latency-critical, and did it record "
                         "requests (a span, or gpuslice_lc_request)?" % METRIC)
    bounds = sorted(buckets)
    total = buckets[bounds[-1]]
    if total <= 0:
        raise ValueError("the vGPU's LC latency histogram is empty: it has recorded no request yet")
    finite = [b for b in bounds if b != float("inf")]
    if not finite:
        raise ValueError("the histogram has only a +Inf bucket; nothing to read a distribution from")
    points = [(0.0, 0.0)]
    for b in finite:
        points.append((min(1.0, buckets[b] / total), b * 1e6))
    points.append((1.0, finite[-1] * 1e6))  # +Inf: the last finite bound
    # keep the first bound reached at each probability (no mass in between)
    clean = [points[0]]
    for p, v in points[1:]:
        if p < clean[-1][0]:
            raise ValueError("bucket counts fall as the bound rises: not a cumulative histogram")
        if p == clean[-1][0] and p > 0:
            continue
        clean.append((p, v))
    if clean[-1][0] != 1.0:
        clean.append((1.0, clean[-1][1]))
    return Quantiles(clean)


def read_exposition(path, vgpu):
    with open(path) as f:
        return quantiles_from_buckets(buckets_from_exposition(f.read(), vgpu))
