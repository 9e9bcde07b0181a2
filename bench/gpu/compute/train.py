"""A PyTorch training load for the compute benchmarks (run_compute.py).

A 6-layer transformer encoder (d_model 1024, bf16 autocast, AdamW) on
synthetic data, enough to keep an H100/H200 busy on its own. It trains for
SECONDS after warm-up and writes the CLOCK_MONOTONIC time at which each step
completed, so the parent can compare processes over the window in which they
all ran.

    python3 train.py SECONDS OUT.json

Env: READY_FILE is created once the warm-up steps are done (the parent starts
an LC beside this training only then); STOP_FILE, once it exists, ends the
training early (checked after every step), so a background training lasts
exactly as long as the foreground work beside it.
"""
import json
import os
import sys
import time

import torch


def main():
    seconds, out = float(sys.argv[1]), sys.argv[2]
    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(d_model=1024, nhead=16, dim_feedforward=4096, batch_first=True)
    model = torch.nn.TransformerEncoder(layer, num_layers=6).cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    # Batch 64: one step (~75 ms on an H200) leaves the GPU idle only for the
    # few launches after each step's synchronisation, so a training alone
    # saturates the GPU and shares are not padded by its idle gaps.
    x = torch.randn(64, 512, 1024, device="cuda")

    def step():
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = model(x).float().pow(2).mean()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        torch.cuda.synchronize()

    for _ in range(5):
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
        json.dump({"step_ends": ends}, f)


if __name__ == "__main__":
    main()
