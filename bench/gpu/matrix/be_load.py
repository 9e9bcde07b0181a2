"""Best-effort loads of the workload matrix (run_matrix.py) besides train.py.

    python3 be_load.py KIND SECONDS OUT.json

KIND:
  launch  launch-bound small-model training: torchvision's resnet18 (10
          classes; a plain 8-conv net when torchvision does not import) at
          batch LAUNCH_BATCH (32) of 3 x LAUNCH_IMG (32) x LAUNCH_IMG images,
          fp32, AdamW, cross-entropy on synthetic data. Each step is some 200+
          small kernels (forward, backward, optimizer), so the GPU idles
          between them while the host launches.
  mem     memory-bandwidth-bound: one iteration is MEM_REPS (8) times
          `torch.addcmul(a, b, c, out=o)` then `x.copy_(y)` on fp32 tensors of
          MEM_GIB (1) GiB each (6 tensors: 6 GiB), ~6 GiB of DRAM traffic per
          repetition.
  copy    copy-engine-bound (a job that streams data through the host, an
          offloading trainer, a data loader's transfers): one iteration copies
          a COPY_MIB (256) MiB pinned host buffer to the GPU and back, one
          cudaMemcpyAsync each way; no kernels.

Like compute/train.py (the `gpu` kind): it trains (iterates) for SECONDS after
warm-up and writes the CLOCK_MONOTONIC time at which each step / iteration
completed (`step_ends`, synchronised), so the parent can count them over any
window. READY_FILE is created once warm-up is done; once STOP_FILE exists the
load ends after the current step.
"""
import json
import os
import sys
import time

import torch
from torch import nn


def env_f(name, default):
    v = os.environ.get(name, "")
    return float(v) if v.strip() else float(default)


def small_cnn(classes=10):
    """A plain conv net for when torchvision is missing (same spirit: many small kernels)."""
    layers, c_in = [], 3
    for c in (32, 32, 64, 64, 128, 128, 256, 256):
        layers += [nn.Conv2d(c_in, c, 3, padding=1, bias=False), nn.BatchNorm2d(c), nn.ReLU(inplace=True)]
        c_in = c
    return nn.Sequential(*layers, nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(c_in, classes))


def launch_step():
    batch, img = int(env_f("LAUNCH_BATCH", 32)), int(env_f("LAUNCH_IMG", 32))
    try:
        import torchvision  # noqa: PLC0415 - optional

        model, source = torchvision.models.resnet18(weights=None, num_classes=10), f"torchvision {torchvision.__version__} resnet18"
    except Exception:  # noqa: BLE001 - any failure to import means: use ours
        model, source = small_cnn(), "plain 8-conv net"
    model = model.cuda().train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    x = torch.randn(batch, 3, img, img, device="cuda")
    y = torch.randint(0, 10, (batch,), device="cuda")
    loss_fn = nn.CrossEntropyLoss()

    def step():
        loss = loss_fn(model(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        torch.cuda.synchronize()

    return step, {"model": source, "batch": batch, "img": img}


def mem_step():
    gib, reps = env_f("MEM_GIB", 1), int(env_f("MEM_REPS", 8))
    n = int(gib * (1 << 30)) // 4
    a, b, c, o, x, y = (torch.rand(n, device="cuda") for _ in range(6))

    def step():
        for _ in range(reps):
            torch.addcmul(a, b, c, out=o)  # reads 3, writes 1
            x.copy_(y)  # reads 1, writes 1
        torch.cuda.synchronize()

    return step, {"tensor_gib": gib, "reps": reps, "bytes_per_step": reps * 6 * n * 4}


def copy_step():
    n = int(env_f("COPY_MIB", 256) * (1 << 20))
    host = torch.empty(n, dtype=torch.uint8).pin_memory()
    dev = torch.empty(n, dtype=torch.uint8, device="cuda")

    def step():
        dev.copy_(host, non_blocking=True)
        host.copy_(dev, non_blocking=True)
        torch.cuda.synchronize()

    return step, {"bytes_per_step": 2 * n}


def main():
    kind, seconds, out = sys.argv[1], float(sys.argv[2]), sys.argv[3]
    torch.manual_seed(0)
    makers = {"launch": launch_step, "mem": mem_step, "copy": copy_step}
    if kind not in makers:
        raise SystemExit(f"be_load: unknown kind {kind!r}; kinds: {', '.join(makers)}")
    step, info = makers[kind]()
    for _ in range(20 if kind == "launch" else 5):
        step()
    ready, stop = os.environ.get("READY_FILE"), os.environ.get("STOP_FILE")
    if ready:
        open(ready, "w").close()
    ends = []
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and not (stop and os.path.exists(stop)):
        step()
        ends.append(time.monotonic())
    with open(out, "w") as f:
        json.dump({"kind": kind, **info, "torch": torch.__version__, "step_ends": ends}, f)


if __name__ == "__main__":
    main()
