"""A PyTorch latency-critical load for the compute benchmarks (run_compute.py).

ResNet-50 inference, batch 1 (3x224x224, fp16, random weights), requests at a
fixed rate (LC_RATE, default 50 req/s; a request that ends after the next one
was due starts the next one at once and counts as `late`). Each request is one
forward pass followed by torch.cuda.synchronize(); latency is from submission
to completion, seen by the host. The model is torchvision's resnet50 when
torchvision imports, else the same architecture written out below in plain
torch (`model_source` says which).

    python3 lc_torch.py PHASE_SECONDS OUT.json

The process runs the phases named in LC_MODES (default "eager,graph") one
after the other, PHASE_SECONDS each, so one process (and one background load
beside it) covers several ways of submitting the same request. A phase is a
base mode with optional "+flag"s:
  eager     the model called eagerly (~hundreds of small kernels, host gaps)
  graph     the forward pass captured once as a torch.cuda.CUDAGraph, replayed
  +span     each request wrapped in gpuslice_span_begin()/gpuslice_span_end()
            (the residency-span API of the preloaded gpuslice library)
  +prep     each request first spends PREP_US (default 400) µs of host
            preparation (a CPU busy-wait); latency still counts from the end
            of the preparation (submission), `total_*` from its start
  +hint     +prep, with gpuslice_hint_begin() called at the start of the
            preparation and gpuslice_hint_end() once the request completed
LC_SPAN=1 adds +span to every phase, LC_HINT=1 adds +hint to every phase.
The gpuslice functions are looked up with ctypes in the global scope
(LD_PRELOAD) and in libcuda.so.1 (the libpath shim); where they are missing
(no gpuslice, or a library without them) the phase runs without them and
`span_available` / `hint_available` say so.

Output (rewritten after every phase): {"model_source", "torch", "rate",
"graph_gpu_us" (one replay's GPU time alone at start-up, events), "phases":
{PHASE: {"n", "late", "p50_us", "p90_us", "p99_us", "max_us", "mean_us",
"total_p50_us", "total_p99_us", "t_start", "t_end" (time.monotonic(), for
the parent's window over a background load), "span_failures",
"hint_failures"}}, "complete"}. The first 5% of each phase is warm-up and is
not counted.
"""
import ctypes
import json
import os
import sys
import time

import torch
from torch import nn


class Bottleneck(nn.Module):
    """torchvision's ResNet-50 block (stride on the 3x3 conv, "v1.5")."""

    def __init__(self, inplanes, planes, stride):
        super().__init__()
        out = planes * 4
        self.conv1 = nn.Conv2d(inplanes, planes, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = nn.Conv2d(planes, planes, 3, stride, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.conv3 = nn.Conv2d(planes, out, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(out)
        self.relu = nn.ReLU(inplace=True)
        self.downsample = None
        if stride != 1 or inplanes != out:
            self.downsample = nn.Sequential(nn.Conv2d(inplanes, out, 1, stride, bias=False), nn.BatchNorm2d(out))

    def forward(self, x):
        identity = x if self.downsample is None else self.downsample(x)
        y = self.relu(self.bn1(self.conv1(x)))
        y = self.relu(self.bn2(self.conv2(y)))
        y = self.bn3(self.conv3(y))
        return self.relu(y + identity)


def handwritten_resnet50(num_classes=1000):
    layers = [nn.Conv2d(3, 64, 7, 2, 3, bias=False), nn.BatchNorm2d(64), nn.ReLU(inplace=True), nn.MaxPool2d(3, 2, 1)]
    inplanes = 64
    for planes, blocks, stride in ((64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2)):
        for i in range(blocks):
            layers.append(Bottleneck(inplanes, planes, stride if i == 0 else 1))
            inplanes = planes * 4
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(2048, num_classes)]
    return nn.Sequential(*layers)


def resnet50():
    try:
        import torchvision  # noqa: PLC0415 - optional

        return torchvision.models.resnet50(weights=None), f"torchvision {torchvision.__version__}"
    except Exception:  # noqa: BLE001 - any failure to import means: use ours
        return handwritten_resnet50(), "handwritten"


def find_export(name):
    """A gpuslice C function `int name(void)`, or None where it is not loaded."""
    for lib in (None, "libcuda.so.1"):  # None: the global scope, where LD_PRELOAD puts it
        try:
            fn = getattr(ctypes.CDLL(lib), name)
        except (OSError, AttributeError):
            continue
        fn.restype, fn.argtypes = ctypes.c_int, []
        return fn
    return None


def parse_phase(token):
    base, *flags = token.strip().split("+")
    flags = set(flags)
    if os.environ.get("LC_SPAN") == "1":
        flags.add("span")
    if os.environ.get("LC_HINT") == "1":
        flags.add("hint")
    if "hint" in flags:
        flags.add("prep")
    if base not in ("eager", "graph") or flags - {"span", "prep", "hint"}:
        raise SystemExit(f"lc_torch: unknown phase {token!r}")
    return base, flags


def pct(sorted_values, q):
    return sorted_values[min(len(sorted_values) - 1, int(q * len(sorted_values)))] if sorted_values else 0.0


def main():
    phase_s, out = float(sys.argv[1]), sys.argv[2]
    rate = float(os.environ.get("LC_RATE", "50"))
    prep_s = float(os.environ.get("PREP_US", "400")) / 1e6
    phases = [t for t in os.environ.get("LC_MODES", "eager,graph").split(",") if t.strip()]
    parsed = [parse_phase(t) for t in phases]

    torch.manual_seed(0)
    model, source = resnet50()
    model = model.cuda().half().eval()
    static_in = torch.randn(1, 3, 224, 224, device="cuda", dtype=torch.half)

    with torch.no_grad():
        # Warm-up on a side stream, as CUDA graph capture requires; then capture.
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(5):
                model(static_in)
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            model(static_in)
        for _ in range(20):
            model(static_in)
            graph.replay()
        torch.cuda.synchronize()
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        graph.replay()
        b.record()
        b.synchronize()
        graph_gpu_us = a.elapsed_time(b) * 1000

    span_begin, span_end = find_export("gpuslice_span_begin"), find_export("gpuslice_span_end")
    hint_begin, hint_end = find_export("gpuslice_hint_begin"), find_export("gpuslice_hint_end")
    result = {"model_source": source, "torch": torch.__version__, "dtype": "fp16", "batch": 1, "rate": rate,
              "prep_us": prep_s * 1e6, "graph_gpu_us": round(graph_gpu_us, 1),
              "span_available": bool(span_begin and span_end), "hint_available": bool(hint_begin and hint_end),
              "phases": {}, "complete": False}

    def write():
        tmp = out + ".tmp"
        with open(tmp, "w") as f:
            json.dump(result, f)
        os.replace(tmp, out)

    period = 1.0 / rate
    now = time.monotonic
    with torch.no_grad():
        for token, (base, flags) in zip(phases, parsed):
            run = graph.replay if base == "graph" else (lambda: model(static_in))
            span = "span" in flags and span_begin is not None and span_end is not None
            hint = "hint" in flags and hint_begin is not None and hint_end is not None
            prep = "prep" in flags
            lat, total, starts = [], [], []
            late = span_failures = hint_failures = 0
            t_done = 0.0
            next_t = now()
            end = next_t + phase_s
            while now() < end:
                while now() < next_t:  # spin: a sleep would add its wake-up to the request
                    pass
                t_prep = now()
                if hint and hint_begin() != 0:
                    hint_failures += 1
                if prep:
                    while now() < t_prep + prep_s:
                        pass
                t0 = now()
                if span and span_begin() != 0:
                    span_failures += 1
                run()
                torch.cuda.synchronize()
                t_done = now()
                if span and span_end() != 0:
                    span_failures += 1
                if hint and hint_end() != 0:
                    hint_failures += 1
                lat.append(t_done - t0)
                total.append(t_done - t_prep)
                starts.append(t_prep)
                next_t += period
                if next_t < now():
                    next_t = now()
                    late += 1
            skip = len(lat) // 20
            lat_s, total_s = sorted(lat[skip:]), sorted(total[skip:])
            us = 1e6
            result["phases"][token.strip()] = {
                "base": base, "flags": sorted(flags), "span_used": span, "hint_used": hint,
                "n": len(lat_s), "late": late,
                "p50_us": round(pct(lat_s, .5) * us, 1), "p90_us": round(pct(lat_s, .9) * us, 1),
                "p99_us": round(pct(lat_s, .99) * us, 1), "max_us": round(pct(lat_s, 1.0) * us, 1),
                "mean_us": round(sum(lat_s) / max(1, len(lat_s)) * us, 1),
                "total_p50_us": round(pct(total_s, .5) * us, 1), "total_p99_us": round(pct(total_s, .99) * us, 1),
                "span_failures": span_failures, "hint_failures": hint_failures,
                "t_start": starts[skip] if len(starts) > skip else t_done, "t_end": t_done,
            }
            write()
    result["complete"] = True
    write()


if __name__ == "__main__":
    main()
