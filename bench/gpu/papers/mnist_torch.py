"""MNIST-shaped PyTorch training for the papers' experiments (run_papers.py).

The classic PyTorch MNIST example's network: conv 1->32 3x3, conv 32->64 3x3,
max-pool 2, dropout, fc 9216->128, dropout, fc 128->10, log-softmax + NLL,
SGD with momentum; synthetic data of MNIST's shape (1 x 28 x 28, 10 classes),
made on the GPU once (nothing is downloaded). Every step ends in
torch.cuda.synchronize().

    python3 mnist_torch.py phases OUT.json     PHASES="64:3,2048:3" (batch:seconds, in turn)
    python3 mnist_torch.py train OUT.json      BATCH (2048), SECONDS (600): step_ends until STOP_FILE

Env: READY_FILE (created after warm-up), GO_FILE (measure only once it
exists), STOP_FILE (train: stop after the current step), GRAB_GIB (train:
before anything else, allocate 256 MiB blocks until OutOfMemoryError or
GRAB_GIB GiB, record how much, hold it GRAB_HOLD_S (1.5) s, free it all). A batch that runs out of
memory at warm-up is halved (recorded as batch_used).
Output: {"pid", "torch", "phases": {batch: {"steps_per_s", "steps", "seconds",
"median_step_ms"}}} or {"pid", "step_ends", "batch", "grab": {...},
"max_reserved_bytes", "mem_total_bytes"}.
"""
import json
import os
import sys
import time

import torch
import torch.nn.functional as F
from torch import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1, self.conv2 = nn.Conv2d(1, 32, 3, 1), nn.Conv2d(32, 64, 3, 1)
        self.drop1, self.drop2 = nn.Dropout(0.25), nn.Dropout(0.5)
        self.fc1, self.fc2 = nn.Linear(9216, 128), nn.Linear(128, 10)

    def forward(self, x):
        x = F.relu(self.conv2(F.relu(self.conv1(x))))
        x = self.drop1(torch.flatten(F.max_pool2d(x, 2), 1))
        return F.log_softmax(self.fc2(self.drop2(F.relu(self.fc1(x)))), dim=1)


def write(out, obj):
    with open(out + ".tmp", "w") as f:
        json.dump(obj, f)
    os.replace(out + ".tmp", out)


def wait_go():
    go = os.environ.get("GO_FILE")
    give_up = time.monotonic() + float(os.environ.get("GO_WAIT_S", "600"))
    while go and not os.path.exists(go):
        if time.monotonic() > give_up:
            raise SystemExit("mnist_torch: no GO_FILE in time")
        time.sleep(0.01)


def grab(gib):
    """Allocate 256 MiB blocks until OutOfMemoryError or gib GiB."""
    blocks, oom, err = [], False, ""
    while len(blocks) * 256 < gib * 1024:
        try:
            blocks.append(torch.empty(256 << 20, dtype=torch.uint8, device="cuda"))
        except torch.cuda.OutOfMemoryError as e:
            oom, err = True, str(e).splitlines()[0][:200]
            break
    got = len(blocks) * (256 << 20)
    free, total = torch.cuda.mem_get_info()
    time.sleep(float(os.environ.get("GRAB_HOLD_S", "1.5")))  # held long enough for the parent's samplers to see it
    del blocks
    torch.cuda.empty_cache()
    return {"asked_gib": gib, "got_bytes": got, "oom": oom, "error": err, "mem_total_bytes": total,
            "free_at_peak_bytes": free}


def make(batch):
    model = Net().cuda().train()
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    x = torch.randn(batch, 1, 28, 28, device="cuda")
    y = torch.randint(0, 10, (batch,), device="cuda")

    def step():
        loss = F.nll_loss(model(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        torch.cuda.synchronize()

    return step


def warm(batch, n):
    """(step, batch) after n warm-up steps; the batch halved on OOM."""
    while True:
        try:
            step = make(batch)
            for _ in range(n):
                step()
            return step, batch
        except torch.cuda.OutOfMemoryError:
            if batch <= 16:
                raise
            batch //= 2
            torch.cuda.empty_cache()


def main():
    mode, out = sys.argv[1], sys.argv[2]
    torch.manual_seed(0)
    torch.backends.cudnn.benchmark = True
    res = {"pid": os.getpid(), "torch": torch.__version__, "mode": mode}
    if mode == "phases":
        phases = [(int(b), float(s)) for b, s in (p.split(":") for p in os.environ.get("PHASES", "64:3,2048:3").split(","))]
        steps = {b: warm(b, 30)[0] for b, _ in phases}
        if os.environ.get("READY_FILE"):
            open(os.environ["READY_FILE"], "w").close()
        wait_go()
        res["phases"] = {}
        for b, secs in phases:
            step = steps[b]
            for _ in range(5):
                step()
            times, t_end = [], time.monotonic() + secs
            t0 = time.monotonic()
            while time.monotonic() < t_end:
                a = time.monotonic()
                step()
                times.append(time.monotonic() - a)
            el = time.monotonic() - t0
            times.sort()
            res["phases"][str(b)] = {"steps": len(times), "seconds": round(el, 4),
                                     "steps_per_s": round(len(times) / el, 3),
                                     "median_step_ms": round(1000 * times[len(times) // 2], 4)}
        write(out, res)
        return
    if os.environ.get("GRAB_GIB"):
        res["grab"] = grab(float(os.environ["GRAB_GIB"]))
        write(out, res)
    step, batch = warm(int(os.environ.get("BATCH", "2048")), 10)
    res.update(batch=int(os.environ.get("BATCH", "2048")), batch_used=batch)
    if os.environ.get("READY_FILE"):
        open(os.environ["READY_FILE"], "w").close()
    wait_go()
    stop, ends = os.environ.get("STOP_FILE"), []
    deadline = time.monotonic() + float(os.environ.get("SECONDS", "600"))
    while time.monotonic() < deadline and not (stop and os.path.exists(stop)):
        step()
        ends.append(time.monotonic())
    res.update(step_ends=ends, max_reserved_bytes=torch.cuda.max_memory_reserved(),
               mem_total_bytes=torch.cuda.mem_get_info()[1])
    write(out, res)


if __name__ == "__main__":
    main()
