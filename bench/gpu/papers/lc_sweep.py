"""LC latency as the LC load rises (GPreempt's experiment, run_papers.py).

The LC is the workload matrix's `graph` LC (bench/gpu/matrix/lc_tf.py's
encoder, 6 x d_model 512, batch 1, seq 128, bf16, captured once as a CUDA
graph), replayed open-loop at each rate of LC_RATES (50,100,200,400 req/s),
PHASE_S seconds each, one phase after the other in this one process.

    python3 lc_sweep.py sweep OUT.json    the LC alone in this process (a BE, if any, is another process)
    python3 lc_sweep.py seq OUT.json      the sequential baseline: the BE (compute/train.py's
                                          transformer, batch BE_BATCH 64) trains in THIS process, one
                                          step at a time, and an LC request is served only between two
                                          BE steps (LC first when one is due): LC and BE serialised

Latency per request: submission to completion (`p50_us`, `p99_us`) and
arrival to completion (`arr_p50_us`, `arr_p99_us`: includes any wait behind
a BE step or a late request). The first 5% of each phase are dropped.
READY_FILE / GO_FILE as lc_tf.py. Output per phase (key: the rate): n,
percentiles, t_start / t_end (time.monotonic()), and in `seq` mode
be_steps_per_s over the phase; top level `graph_gpu_us` (one replay's GPU
time, CUDA events) and `be_step_ends` (seq).
"""
import gc
import json
import os
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "matrix"))
from lc_tf import Encoder, median, pct  # noqa: E402 - the matrix's LC model, unchanged


def env_f(name, default):
    v = os.environ.get(name, "")
    return float(v) if v.strip() else float(default)


def build_lc():
    torch.manual_seed(0)
    model = Encoder(6, 512, 8).cuda().to(torch.bfloat16).eval()
    x = torch.randn(1, 128, 512, device="cuda", dtype=torch.bfloat16)
    with torch.no_grad():
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(5):
                model(x)
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            model(x)
        for _ in range(20):
            graph.replay()
        torch.cuda.synchronize()
        gpu_us = []
        for _ in range(20):
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            graph.replay()
            b.record()
            b.synchronize()
            gpu_us.append(a.elapsed_time(b) * 1000)
    return graph, model, median(gpu_us)


def build_be():
    """compute/train.py's training, one step per call (synchronised)."""
    layer = torch.nn.TransformerEncoderLayer(d_model=1024, nhead=16, dim_feedforward=4096, batch_first=True)
    model = torch.nn.TransformerEncoder(layer, num_layers=6).cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    x = torch.randn(int(env_f("BE_BATCH", 64)), 512, 1024, device="cuda")

    def step():
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = model(x).float().pow(2).mean()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        torch.cuda.synchronize()

    for _ in range(5):
        step()
    return step


def main():
    mode, out = sys.argv[1], sys.argv[2]
    rates = [float(r) for r in os.environ.get("LC_RATES", "50,100,200,400").split(",") if r.strip()]
    phase_s = env_f("PHASE_S", 4)
    graph, _, gpu_us = build_lc()
    be_step = build_be() if mode == "seq" else None
    be_ends = []
    res = {"mode": mode, "model": "encoder 6x512 heads 8 seq 128 batch 1 bf16, CUDA graph", "graph_gpu_us": round(gpu_us, 1),
           "torch": torch.__version__, "rates": rates, "phase_s": phase_s, "phases": {}, "pid": os.getpid()}

    def write():
        if be_step is not None:
            res["be_step_ends"] = be_ends
        with open(out + ".tmp", "w") as f:
            json.dump(res, f)
        os.replace(out + ".tmp", out)

    gc.collect()
    gc.freeze()
    gc.disable()
    write()
    if os.environ.get("READY_FILE"):
        open(os.environ["READY_FILE"], "w").close()
    go = os.environ.get("GO_FILE")
    give_up = time.monotonic() + 600
    while go and not os.path.exists(go):
        if time.monotonic() > give_up:
            raise SystemExit("lc_sweep: no GO_FILE in time")
        time.sleep(0.005)
    now, sync = time.monotonic, torch.cuda.synchronize
    with torch.no_grad():
        for rate in rates:
            period = 1.0 / rate
            lat, arr, arrivals = [], [], []
            start = t_done = now()
            be0 = len(be_ends)
            i = 0
            while True:
                due = start + i * period
                if due >= start + phase_s:
                    break
                while now() < due:
                    if be_step is None:
                        continue  # spin: a sleep would add its wake-up to the request
                    with torch.enable_grad():
                        be_step()
                    be_ends.append(now())
                t0 = now()
                graph.replay()
                sync()
                t_done = now()
                lat.append(t_done - t0)
                arr.append(t_done - due)
                arrivals.append(due)
                i += 1
            skip = len(lat) // 20
            ls, as_ = sorted(lat[skip:]), sorted(arr[skip:])
            us = 1e6
            ph = {"rate": rate, "n": len(ls), "p50_us": round(pct(ls, .5) * us, 1), "p99_us": round(pct(ls, .99) * us, 1),
                  "max_us": round(pct(ls, 1.0) * us, 1), "arr_p50_us": round(pct(as_, .5) * us, 1),
                  "arr_p99_us": round(pct(as_, .99) * us, 1), "mean_us": round(sum(ls) / max(1, len(ls)) * us, 1),
                  "t_start": arrivals[skip] if len(arrivals) > skip else start, "t_end": t_done}
            if be_step is not None:
                inside = [e for e in be_ends[be0:] if ph["t_start"] <= e <= t_done]
                ph["be_steps"] = len(inside)
                ph["be_steps_per_s"] = round(len(inside) / max(1e-9, t_done - ph["t_start"]), 4)
            res["phases"][f"{rate:g}"] = ph
            write()
    res["complete"] = True
    write()


if __name__ == "__main__":
    main()
