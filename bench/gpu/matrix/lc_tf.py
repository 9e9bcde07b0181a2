"""Latency-critical transformer inference for the workload matrix (run_matrix.py).

A small transformer encoder (TF_LAYERS 6, d_model TF_DMODEL 512, TF_HEADS 8
heads, feed-forward 4 x d_model, pre-LayerNorm, attention written out as
matmul/softmax/matmul), batch 1, sequence TF_SEQ 128, in TF_DTYPE (bf16),
random weights. One request is one forward pass followed by
torch.cuda.synchronize(). The process runs the phases named in LC_PHASES
(default "graph,eager"), PHASE_S seconds each:

  graph   the forward pass captured ONCE as a torch.cuda.CUDAGraph and
          replayed: one launch per request; GRAPH_RATE (100) requests/s
  eager   the same model called eagerly: ~100 small kernels per request,
          launch-bound (the GPU idles between them); one request every
          EAGER_PERIOD_MS, or, when that is unset, every
          max(EAGER_MIN_PERIOD_MS (15), EAGER_FACTOR (2) x the eager request's
          median time alone, measured at start-up), so it leaves idle time

    python3 lc_tf.py OUT.json

Requests are open-loop at fixed arrival times (t0 + i x period): a request
whose arrival passed while the previous one ran is submitted at once, and the
schedule is not shifted. Latency is taken from submission (the forward call)
to completion (`p50_us`, `p99_us`, ... and `lat_us`), like the other LC loads;
`arr_p50_us` / `arr_p99_us` (and `arr_us`) count from the scheduled arrival,
so they include any queueing behind a late request. The first 5% of each
phase are warm-up and are dropped.

Start-up (not timed): model, warm-up on a side stream, capture, then with the
GPU to itself (so run it alone for these to mean anything) `graph_gpu_us`
(median GPU time of one replay, CUDA events) and `eager_alone_us` (median
submission-to-completion of an eager request).

With LC_IO=1 a request is what an inference server does with each input:
copy the input from pinned host memory to the GPU (batch 1 x TF_SEQ x
TF_DMODEL, 128 KiB in bf16), run the forward pass, copy its output back to
pinned host memory, then synchronise: the request then needs the copy
engines too (LC_IO=0, the default: inputs stay on the GPU, as in the runs
before 2026-11-28).

Env: LC_GC (freeze: Python's cyclic collector off during the phases, see
below; on: left as it is). READY_FILE is created once start-up is done; with GO_FILE set, the
phases start only once it exists (the parent starts this process beside a
best-effort load's warm-up and releases it when that load is ready; waits at
most GO_WAIT_S, 600). Output (rewritten after every phase): {"model", "torch",
"graph_gpu_us", "eager_alone_us", "eager_period_ms", "eager_period_source", "gc",
"phases": {NAME: {"n", "rate", "period_ms", "behind", "p50_us", "p90_us",
"p99_us", "max_us", "mean_us", "arr_p50_us", "arr_p99_us", "t_start",
"t_end" (time.monotonic(), the first counted request's arrival and the last
completion), "lat_us", "arr_us"}}, "complete"}.
"""
import gc
import json
import math
import os
import sys
import time

import torch
import torch.nn.functional as F
from torch import nn


def env_f(name, default):
    v = os.environ.get(name, "")
    return float(v) if v.strip() else float(default)


class Block(nn.Module):
    """Pre-LN encoder block. Attention is written out (not SDPA, not
    nn.TransformerEncoderLayer, whose inference fast path fuses the layer):
    the eager request should be the many small launches of a plain model."""

    def __init__(self, d, heads, ff):
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.fc1, self.fc2 = nn.Linear(d, ff), nn.Linear(ff, d)

    def forward(self, x):
        b, t, d = x.shape
        h = self.heads
        q, k, v = self.qkv(self.ln1(x)).view(b, t, 3, h, d // h).permute(2, 0, 3, 1, 4)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(d // h))
        y = (att.softmax(-1) @ v).transpose(1, 2).reshape(b, t, d)
        x = x + self.proj(y)
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))


class Encoder(nn.Module):
    def __init__(self, layers, d, heads):
        super().__init__()
        self.blocks = nn.ModuleList(Block(d, heads, 4 * d) for _ in range(layers))
        self.ln = nn.LayerNorm(d)

    def forward(self, x):
        for blk in self.blocks:
            x = blk(x)
        return self.ln(x)


def pct(s, q):
    return s[min(len(s) - 1, int(q * len(s)))] if s else 0.0


def median(v):
    return sorted(v)[len(v) // 2]


def main():
    out = sys.argv[1]
    phase_s = env_f("PHASE_S", 10)
    phases = [p.strip() for p in os.environ.get("LC_PHASES", "graph,eager").split(",") if p.strip()]
    for p in phases:
        if p not in ("graph", "eager"):
            raise SystemExit(f"lc_tf: unknown phase {p!r}")
    layers, d, heads, seq = (int(env_f("TF_LAYERS", 6)), int(env_f("TF_DMODEL", 512)), int(env_f("TF_HEADS", 8)),
                             int(env_f("TF_SEQ", 128)))
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}[os.environ.get("TF_DTYPE", "bf16")]

    torch.manual_seed(0)
    model = Encoder(layers, d, heads).cuda().to(dtype).eval()
    x = torch.randn(1, seq, d, device="cuda", dtype=dtype)
    io = os.environ.get("LC_IO", "0") == "1"
    host_in = torch.randn(1, seq, d, dtype=dtype).pin_memory() if io else None
    host_out = torch.empty(1, seq, d, dtype=dtype).pin_memory() if io else None
    sync = torch.cuda.synchronize
    now = time.monotonic

    with torch.no_grad():
        # Warm-up on a side stream, as CUDA graph capture requires; then capture once.
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(5):
                model(x)
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            y_graph = model(x)

        def with_io(forward):
            """One request: the forward pass, between the copies when LC_IO=1."""
            if not io:
                return forward

            def request():
                x.copy_(host_in, non_blocking=True)
                host_out.copy_(forward(), non_blocking=True)
            return request

        run_graph = with_io(lambda: (graph.replay(), y_graph)[1])
        run_eager = with_io(lambda: model(x))
        for _ in range(20):
            run_eager()
            run_graph()
        sync()
        # One replay's GPU time, alone: the LC busy fraction is this x the rate.
        gpu_us = []
        for _ in range(20):
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            run_graph()
            b.record()
            b.synchronize()
            gpu_us.append(a.elapsed_time(b) * 1000)
        eager_us = []
        for _ in range(30):
            t0 = now()
            run_eager()
            sync()
            eager_us.append((now() - t0) * 1e6)

    eager_alone_us = median(eager_us)
    if os.environ.get("EAGER_PERIOD_MS", "").strip():
        eager_period_ms, source = env_f("EAGER_PERIOD_MS", 15), "given"
    else:
        eager_period_ms = max(env_f("EAGER_MIN_PERIOD_MS", 15), env_f("EAGER_FACTOR", 2) * eager_alone_us / 1000)
        source = "measured"
    rates = {"graph": env_f("GRAPH_RATE", 100), "eager": 1000.0 / eager_period_ms}
    result = {"model": f"encoder {layers}x{d} heads {heads} seq {seq} batch 1 {os.environ.get('TF_DTYPE', 'bf16')}",
              "torch": torch.__version__, "graph_gpu_us": round(median(gpu_us), 1),
              "eager_alone_us": round(eager_alone_us, 1), "eager_period_ms": round(eager_period_ms, 3),
              "eager_period_source": source, "io": io, "phase_s": phase_s, "phases": {}, "complete": False}

    def write():
        tmp = out + ".tmp"
        with open(tmp, "w") as f:
            json.dump(result, f)
        os.replace(tmp, out)

    # LC_GC=freeze (default): no cyclic garbage collection while requests run.
    # A full collection walks every object torch has created and stalls the
    # request it lands in by milliseconds; reference counting still frees the
    # requests' tensors, and a latency-critical server would do the same.
    # LC_GC=on leaves Python's collector as it is.
    result["gc"] = os.environ.get("LC_GC", "freeze")
    if result["gc"] == "freeze":
        gc.collect()
        gc.freeze()
        gc.disable()
    write()
    ready, go = os.environ.get("READY_FILE"), os.environ.get("GO_FILE")
    if ready:
        open(ready, "w").close()
    if go:
        give_up = now() + env_f("GO_WAIT_S", 600)
        while not os.path.exists(go):
            if now() > give_up:
                raise SystemExit("lc_tf: no GO_FILE in time")
            time.sleep(0.005)

    with torch.no_grad():
        for name in phases:
            run = run_graph if name == "graph" else run_eager
            period = 1.0 / rates[name]
            lat, arr, arrivals = [], [], []
            behind = 0
            t_done = start = now()
            i = 0
            while True:
                due = start + i * period
                if due >= start + phase_s:
                    break
                while now() < due:  # spin: a sleep would add its wake-up to the request
                    pass
                t0 = now()
                if t0 > due + period:  # a whole period late: the previous request ran past the next arrival
                    behind += 1
                run()
                sync()
                t_done = now()
                lat.append(t_done - t0)
                arr.append(t_done - due)
                arrivals.append(due)
                i += 1
            skip = len(lat) // 20  # warm-up
            lat, arr = lat[skip:], arr[skip:]
            ls, as_ = sorted(lat), sorted(arr)
            us = 1e6
            result["phases"][name] = {
                "n": len(lat), "rate": round(rates[name], 3), "period_ms": round(period * 1000, 3), "behind": behind,
                "p50_us": round(pct(ls, .5) * us, 1), "p90_us": round(pct(ls, .9) * us, 1),
                "p99_us": round(pct(ls, .99) * us, 1), "max_us": round(pct(ls, 1.0) * us, 1),
                "mean_us": round(sum(ls) / max(1, len(ls)) * us, 1),
                "arr_p50_us": round(pct(as_, .5) * us, 1), "arr_p99_us": round(pct(as_, .99) * us, 1),
                "t_start": arrivals[skip] if len(arrivals) > skip else t_done, "t_end": t_done,
                "lat_us": [round(v * us, 1) for v in lat], "arr_us": [round(v * us, 1) for v in arr],
            }
            write()
    result["complete"] = True
    write()


if __name__ == "__main__":
    main()
