"""What the meter gave before the boards split a shared GPU: NVML's raw
per-process samples (nvml_samples.py, run beside a meter benchmark)
integrated as the daemon's sampler did alone (each sample over the time since
the same process's previous one, at most 1 s), over the meter benchmark's
shared window, split by vGPU.

    python3 bench/gpu/daemon/samples_split.py NVML.json METER.json

METER.json: mixed_meter.json ("shared_window") or share_meter.json
("shared"), each with "wall_minus_monotonic" (NVML stamps samples with the
wall clock; the benchmarks time windows on CLOCK_MONOTONIC).
"""
import json
import sys
from collections import defaultdict


def main():
    nvml, meter = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
    w = meter.get("shared_window") or meter["shared"]
    offset = meter["wall_minus_monotonic"]
    t0, t1 = (w["t0"] + offset) * 1e6, (w["t1"] + offset) * 1e6
    previous, seconds = {}, defaultdict(float)
    for s in sorted((s for s in nvml["processes"] if "pid" in s), key=lambda s: s["ts"]):
        prev = previous.get(s["pid"])
        previous[s["pid"]] = s["ts"]
        if prev is None or not t0 <= s["ts"] <= t1:
            continue
        seconds[s["vgpu"]] += min(s["ts"] - prev, 1e6) / 1e6 * s["sm"] / 100
    busy = sum(min(b["ts"] - a["ts"], 1e6) / 1e6 * b["pct"] / 100
               for a, b in zip(nvml["device"], nvml["device"][1:]) if "ts" in a and "ts" in b and t0 <= b["ts"] <= t1)
    total = sum(seconds.values())
    out = {"window_s": round((t1 - t0) / 1e6, 2), "device_busy_s": round(busy, 2),
           "samples_gpu_seconds": {k: round(v, 2) for k, v in sorted(seconds.items())},
           "samples_sum_over_busy": round(total / busy, 3) if busy else None,
           "samples_split": {k: round(100 * v / total, 1) for k, v in sorted(seconds.items())} if total else {}}
    print(json.dumps(out))


if __name__ == "__main__":
    main()
