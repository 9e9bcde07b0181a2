#!/usr/bin/env python3
"""An honest program that shares CUDA tensors between processes, as
torch.multiprocessing does (legacy IPC with the default allocator; VMM
descriptors with PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True), run
inside one vGPU: does it still work, and what does the vGPU charge for
memory it exported and then freed?

Memory a process exports stays charged to it past its free while it may
live on (docs/design.md, "Known limits"): until the process exits for a
descriptor (expandable segments), while a process of the vGPU has the handle
open for legacy IPC. This measures what a producer that frees its shared
segments (empty_cache) is charged, and whether the consumer reads every
tensor right.

    gpuslice run --memory 8GiB -- python3 bench/gpu/foundation/torch_ipc.py
    ROUNDS=4 TENSOR_MIB=512 EMPTY_CACHE=1 (defaults)
Prints one JSON line: per round the vGPU's used memory as the producer sees
it (cuMemGetInfo), then whether a large allocation still fits.
"""

import json
import os

import torch
import torch.multiprocessing as mp

MiB = 1 << 20


def consumer(tensors, acks):
    while True:
        t = tensors.get()
        if t is None:
            return
        seen = (float(t[0].item()), float(t[-1].item()), t.numel())
        del t  # lets go of the producer's memory before saying so
        acks.put(seen)


def main():
    rounds = int(os.environ.get("ROUNDS", "4"))
    numel = int(os.environ.get("TENSOR_MIB", "512")) * MiB // 4
    empty_cache = os.environ.get("EMPTY_CACHE", "1") == "1"
    ctx = mp.get_context("spawn")
    tensors, acks = ctx.Queue(), ctx.Queue()
    reader = ctx.Process(target=consumer, args=(tensors, acks))
    reader.start()
    out = {"allocator": os.environ.get("PYTORCH_CUDA_ALLOC_CONF", "default"), "rounds": []}
    for i in range(rounds):
        t = torch.full((numel,), float(i), device="cuda")
        tensors.put(t)
        first, last, n = acks.get(timeout=120)
        del t
        torch.cuda.synchronize()
        if empty_cache:
            torch.cuda.empty_cache()
        free, total = torch.cuda.mem_get_info()
        out["rounds"].append({"read_right": first == last == float(i) and n == numel,
                              "vgpu_used_mib": (total - free) // MiB,
                              "reserved_mib": torch.cuda.memory_reserved() // MiB})
    tensors.put(None)
    reader.join(60)
    out["consumer_exit"] = reader.exitcode
    free, total = torch.cuda.mem_get_info()
    out["free_mib"], out["total_mib"] = free // MiB, total // MiB
    try:
        big = torch.empty(int(free * 0.9), dtype=torch.uint8, device="cuda")
        out["alloc_90pct_of_free"] = "ok"
        del big
    except RuntimeError as e:
        out["alloc_90pct_of_free"] = str(e).splitlines()[0][:160]
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
