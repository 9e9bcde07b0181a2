"""The training loop shared by checks 6 and 7 (child side; imports torch)."""

import math
import time

IMAGE = 64
CLASSES = 10
BATCHES = 4  # distinct synthetic batches, cycled


def make_model(kind):
    import torch.nn as nn

    if kind == "small_cnn":
        return nn.Sequential(
            nn.Conv2d(3, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(64, 128, 3, padding=1), nn.ReLU(),
            nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(128, CLASSES))
    if kind == "resnet18":
        import torchvision

        return torchvision.models.resnet18(num_classes=CLASSES)
    raise ValueError(kind)


def train(kind, batch, steps, warmup, seed=0):
    """Runs warmup + steps SGD steps on a fixed, learnable synthetic set (noise
    plus a per-class pattern); each step ends with torch.cuda.synchronize(), so
    its host-clock time covers its GPU work. Returns per-step times and losses."""
    import torch
    import torch.nn as nn

    torch.manual_seed(seed)
    dev = "cuda"
    model = make_model(kind).to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.02, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()
    labels = torch.randint(0, CLASSES, (BATCHES, batch), device=dev)
    patterns = torch.randn(CLASSES, 3, IMAGE, IMAGE, device=dev)
    images = torch.randn(BATCHES, batch, 3, IMAGE, IMAGE, device=dev) + patterns[labels]
    torch.cuda.synchronize()

    step_s, losses = [], []
    for i in range(warmup + steps):
        x, y = images[i % BATCHES], labels[i % BATCHES]
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        torch.cuda.synchronize()
        t1 = time.perf_counter()
        losses.append(loss.item())
        if i >= warmup:
            step_s.append(t1 - t0)
    free, total = torch.cuda.mem_get_info()
    return {"model": kind, "batch": batch, "warmup": warmup, "steps": len(step_s),
            "step_s": step_s, "first_loss": losses[0], "last_loss": sum(losses[-10:]) / 10,
            "losses_finite": all(math.isfinite(v) for v in losses),
            "max_memory_allocated": torch.cuda.max_memory_allocated(),
            "mem_get_info": [free, total], "torch": torch.__version__}
