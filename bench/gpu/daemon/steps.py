"""A PyTorch training load for the daemon's GPU checks (set_share.py).

A 6-layer transformer encoder (d_model 1024, bf16 autocast, AdamW) on
synthetic data, enough to keep an H100/H200 busy. After warm-up it posts
READY (an empty file), trains until STOP exists (or SECONDS pass), and writes
the CLOCK_MONOTONIC time at which each step completed to OUT as JSON.

    python3 steps.py OUT.json READY STOP SECONDS
"""
import json
import os
import sys
import time

import torch


def main():
    out, ready, stop, seconds = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4])
    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(d_model=1024, nhead=16, dim_feedforward=4096, batch_first=True)
    model = torch.nn.TransformerEncoder(layer, num_layers=6).cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    x = torch.randn(8, 512, 1024, device="cuda")

    def step():
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = model(x).float().pow(2).mean()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        torch.cuda.synchronize()

    for _ in range(5):
        step()
    open(ready, "w").close()
    ends = []
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and not os.path.exists(stop):
        step()
        ends.append(time.monotonic())
    with open(out + ".tmp", "w") as f:
        json.dump({"step_ends": ends}, f)
    os.replace(out + ".tmp", out)


if __name__ == "__main__":
    main()
