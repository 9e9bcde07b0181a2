"""An inference service with a latency-critical endpoint and a best-effort
training loop, on gpuslice's task API (docs/task-api.md).

One process, both halves on one gpuslice.Scheduler:
    gpuslice run --name svc --priority lc -- python3 torch_service.py --mode both
Two processes, one vGPU each:
    gpuslice run --name infer --priority lc -- python3 torch_service.py --mode serve &
    gpuslice run --name train --priority be -- python3 torch_service.py --mode train

Requests arrive at --rate per second (open loop: on time, whether or not the
previous one is done) and run `infer` as a latency-critical task with an SLO;
training steps run back to back as best-effort tasks. At the end it prints one
JSON line: the endpoint's p50/p99 and SLO misses (from sched.metrics()) and
the training's steps per second.

The models are built from a config with random weights and fed synthetic
data. --backend python replaces PyTorch with a pure-Python stand-in, so that
CI (no PyTorch, no GPU) runs the service's structure end to end.
"""
import argparse
import json
import sys
import threading
import time

import gpuslice

try:
    import torch
except ImportError:  # CI: no PyTorch; the structure runs with --backend python
    torch = None


def torch_backend(device):
    if torch is None:
        sys.exit("torch_service: --backend torch needs PyTorch (pip install torch), or use --backend python")
    torch.manual_seed(0)
    infer_model = torch.nn.Sequential(torch.nn.Linear(1024, 4096), torch.nn.GELU(),
                                      torch.nn.Linear(4096, 1024)).to(device).eval()
    train_model = torch.nn.TransformerEncoder(
        torch.nn.TransformerEncoderLayer(d_model=1024, nhead=16, dim_feedforward=4096, batch_first=True),
        num_layers=6).to(device)
    optimizer = torch.optim.AdamW(train_model.parameters(), lr=1e-4)
    request = torch.randn(8, 1024, device=device)
    batch = torch.randn(16, 256, 1024, device=device)

    def infer():
        with torch.inference_mode():
            return infer_model(request).sum().item()  # .item() waits for the GPU

    def train_step():
        loss = train_model(batch).pow(2).mean()
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        return loss.item()

    return infer, train_step


def python_backend():
    def infer():
        return sum(i * i for i in range(2000))

    def train_step():
        return sum(i * i for i in range(20000))

    return infer, train_step


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mode", choices=("both", "serve", "train"), default="both")
    ap.add_argument("--backend", choices=("torch", "python"), default="torch")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--rate", type=float, default=100.0, help="requests per second")
    ap.add_argument("--slo-ms", type=float, default=10.0)
    ap.add_argument("--warmup", type=int, default=10, help="requests and steps run before measuring")
    ap.add_argument("--no-slo-reaction", action="store_true", help="measure SLO pressure but do not react to it")
    ap.add_argument("--no-streams", action="store_true",
                    help="run every task on PyTorch's default stream (no per-level CUDA streams)")
    args = ap.parse_args(argv)
    if args.seconds <= 0 or args.rate <= 0 or args.slo_ms <= 0:
        ap.error("--seconds, --rate and --slo-ms must be above 0")

    infer_fn, train_fn = torch_backend(args.device) if args.backend == "torch" else python_backend()
    for _ in range(args.warmup):  # compile kernels, fill caches: not measured
        if args.mode != "train":
            infer_fn()
        if args.mode != "serve":
            train_fn()

    # One CUDA stream per level (PyTorch's), so that inside one process the
    # endpoint's kernels need not queue behind the training's.
    streams = args.backend == "torch" and not args.no_streams
    with gpuslice.Scheduler(workers=3, slo_reaction=not args.no_slo_reaction, cuda_streams=streams) as sched:
        infer = sched.latency_critical(priority="high", slo_ms=args.slo_ms)(infer_fn)
        train_step = sched.best_effort(priority="low")(train_fn)
        stop = threading.Event()
        steps = 0

        def train_loop():
            nonlocal steps
            while not stop.is_set():
                sched.submit(train_step).result()
                steps += 1

        trainer = threading.Thread(target=train_loop) if args.mode != "serve" else None
        if trainer:
            trainer.start()
        start = time.monotonic()
        pending = []
        if args.mode != "train":
            period = 1.0 / args.rate
            next_at = start
            while next_at < start + args.seconds:
                time.sleep(max(0.0, next_at - time.monotonic()))
                pending.append(sched.submit(infer))
                next_at += period
            for f in pending:
                f.result()
        else:
            time.sleep(args.seconds)
        elapsed = time.monotonic() - start
        stop.set()
        if trainer:
            trainer.join()
        m = sched.metrics()

    out = {"mode": args.mode, "backend": args.backend, "seconds": round(elapsed, 3),
           "in_vgpu_library": gpuslice.library_loaded()}
    if args.mode != "train":
        out.update(requests=m["high"].count, p50_ms=m["high"].p50_ms, p99_ms=m["high"].p99_ms,
                   slo_ms=args.slo_ms, slo_misses=m["high"].slo_misses, failed=m["high"].failed,
                   slo_reaction=not args.no_slo_reaction, cuda_streams=streams)
    if args.mode != "serve":
        out.update(train_steps=steps, train_steps_per_s=round(steps / elapsed, 2))
    print(json.dumps(out), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
