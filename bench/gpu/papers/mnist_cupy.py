"""MNIST-shaped CuPy training for the overhead experiment (run_papers.py):
an MLP 784-512-512-10 (ReLU, softmax cross-entropy, SGD), forward and
backward written out in CuPy, on synthetic data of MNIST's shape made on
the GPU. Every step ends in a device synchronisation.

    python3 mnist_cupy.py phases OUT.json     PHASES="64:3,2048:3" (batch:seconds, in turn)

Env: READY_FILE, GO_FILE as for mnist_torch.py.
"""
import json
import os
import sys
import time

import cupy as cp


def make(batch):
    cp.random.seed(0)
    sizes = (784, 512, 512, 10)
    ws = [cp.random.standard_normal((a, b), dtype=cp.float32) * cp.float32((2.0 / a) ** 0.5)
          for a, b in zip(sizes, sizes[1:])]
    bs = [cp.zeros(b, dtype=cp.float32) for b in sizes[1:]]
    x = cp.random.standard_normal((batch, 784), dtype=cp.float32)
    y = cp.random.randint(0, 10, batch)
    onehot = cp.eye(10, dtype=cp.float32)[y]
    lr = cp.float32(0.01)
    dev = cp.cuda.Device()

    def step():
        acts = [x]
        for i, (w, b) in enumerate(zip(ws, bs)):
            z = acts[-1] @ w + b
            acts.append(cp.maximum(z, 0) if i < len(ws) - 1 else z)
        logits = acts[-1]
        e = cp.exp(logits - logits.max(axis=1, keepdims=True))
        g = (e / e.sum(axis=1, keepdims=True) - onehot) / batch
        for i in range(len(ws) - 1, -1, -1):
            gw, gb = acts[i].T @ g, g.sum(axis=0)
            if i > 0:
                g = (g @ ws[i].T) * (acts[i] > 0)
            ws[i] -= lr * gw
            bs[i] -= lr * gb
        dev.synchronize()

    return step


def main():
    mode, out = sys.argv[1], sys.argv[2]
    if mode != "phases":
        raise SystemExit("mnist_cupy: only the phases mode")
    phases = [(int(b), float(s)) for b, s in (p.split(":") for p in os.environ.get("PHASES", "64:3,2048:3").split(","))]
    steps = {}
    for b, _ in phases:
        steps[b] = make(b)
        for _ in range(30):
            steps[b]()
    if os.environ.get("READY_FILE"):
        open(os.environ["READY_FILE"], "w").close()
    go = os.environ.get("GO_FILE")
    give_up = time.monotonic() + 600
    while go and not os.path.exists(go):
        if time.monotonic() > give_up:
            raise SystemExit("mnist_cupy: no GO_FILE in time")
        time.sleep(0.01)
    res = {"pid": os.getpid(), "cupy": cp.__version__, "model": "MLP 784-512-512-10", "phases": {}}
    for b, secs in phases:
        step = steps[b]
        for _ in range(5):
            step()
        times, t0 = [], time.monotonic()
        while time.monotonic() < t0 + secs:
            a = time.monotonic()
            step()
            times.append(time.monotonic() - a)
        el = time.monotonic() - t0
        times.sort()
        res["phases"][str(b)] = {"steps": len(times), "seconds": round(el, 4), "steps_per_s": round(len(times) / el, 3),
                                 "median_step_ms": round(1000 * times[len(times) // 2], 4)}
    with open(out + ".tmp", "w") as f:
        json.dump(res, f)
    os.replace(out + ".tmp", out)


if __name__ == "__main__":
    main()
