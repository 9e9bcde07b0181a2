"""Stand-ins for run_papers.py's children in --fake runs (no GPU, no torch):
they keep the children's contracts (arguments, READY_FILE, GO_FILE,
STOP_FILE, result files, CLOCK_MONOTONIC step ends) and make up figures,
so the orchestration, the real gpuslice CLI and daemon (against the fake
driver) and the tables and plots can be exercised anywhere. With
FAKE_CUDA=1 a `train` child also allocates device memory through
libcuda.so.1 (the fake driver, behind gpuslice's library) so that the
ledger shows it. Nothing here measures anything.

    fake_child.py mnist phases|train OUT.json
    fake_child.py lc sweep|seq OUT.json
    fake_child.py be SECONDS OUT.json          (compute/train.py)
"""
import ctypes
import json
import os
import random
import sys
import time

now = time.monotonic


def write(out, obj):
    with open(out + ".tmp", "w") as f:
        json.dump(obj, f)
    os.replace(out + ".tmp", out)


def ready_go():
    if os.environ.get("READY_FILE"):
        open(os.environ["READY_FILE"], "w").close()
    go = os.environ.get("GO_FILE")
    while go and not os.path.exists(go):
        time.sleep(0.01)


def cuda_grab(gib):
    """Allocate 256 MiB blocks through the driver API until it refuses."""
    cu = ctypes.CDLL("libcuda.so.1")
    dev, ctx = ctypes.c_int(), ctypes.c_void_p()
    if cu.cuInit(0) or cu.cuDeviceGet(ctypes.byref(dev), 0) or \
            cu.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev) or cu.cuCtxSetCurrent(ctx):
        return {"asked_gib": gib, "got_bytes": 0, "oom": False, "error": "fake driver: no context"}
    ptrs, err = [], 0
    while len(ptrs) * 256 < gib * 1024:
        p = ctypes.c_uint64()
        err = cu.cuMemAlloc_v2(ctypes.byref(p), ctypes.c_size_t(256 << 20))
        if err:
            break
        ptrs.append(p)
    got = len(ptrs) * (256 << 20)
    time.sleep(float(os.environ.get("GRAB_HOLD_S", "1.5")))
    for p in ptrs[len(ptrs) // 2:]:
        cu.cuMemFree_v2(p)  # keep half: the ledger shows a live charge
    return {"asked_gib": gib, "got_bytes": got, "oom": err == 2, "error": f"CUresult {err}" if err else ""}


def mnist(mode, out):
    rng = random.Random(os.getpid())
    factor = float(os.environ.get("FAKE_FACTOR", "1"))
    res = {"pid": os.getpid(), "torch": "fake", "mode": mode}
    time.sleep(0.3)
    if mode == "phases":
        phases = [(int(b), float(s)) for b, s in (p.split(":") for p in os.environ.get("PHASES", "64:3,2048:3").split(","))]
        ready_go()
        res["phases"] = {}
        for b, s in phases:
            time.sleep(s)
            sps = (900.0 if b < 512 else 150.0) * factor * (1 + rng.uniform(-0.01, 0.01))
            res["phases"][str(b)] = {"steps": int(sps * s), "seconds": s, "steps_per_s": round(sps, 3),
                                     "median_step_ms": round(1000 / sps, 4)}
        write(out, res)
        return
    if os.environ.get("GRAB_GIB"):
        res["grab"] = cuda_grab(float(os.environ["GRAB_GIB"])) if os.environ.get("FAKE_CUDA") == "1" else \
            {"asked_gib": float(os.environ["GRAB_GIB"]), "got_bytes": 0, "oom": False, "error": "not tried"}
    res.update(batch=int(os.environ.get("BATCH", "2048")), batch_used=int(os.environ.get("BATCH", "2048")))
    ready_go()
    stop, ends = os.environ.get("STOP_FILE"), []
    rate = 150.0 * factor
    deadline = now() + float(os.environ.get("SECONDS", "600"))
    while now() < deadline and not (stop and os.path.exists(stop)):
        time.sleep(1 / rate)
        ends.append(now())
    res.update(step_ends=ends, max_reserved_bytes=1 << 30, mem_total_bytes=8 << 30)
    write(out, res)


def lc(mode, out):
    rates = [float(r) for r in os.environ.get("LC_RATES", "50,100,200,400").split(",") if r.strip()]
    phase_s = float(os.environ.get("PHASE_S", "4"))
    f50, f99 = (float(x) for x in os.environ.get("FAKE_LC", "1,1").split(","))
    res = {"mode": mode, "model": "fake", "graph_gpu_us": 300.0, "torch": "fake", "rates": rates, "phase_s": phase_s,
           "phases": {}, "pid": os.getpid()}
    time.sleep(0.3)
    ready_go()
    ends = []
    for rate in rates:
        t0 = now()
        if mode == "seq":
            while now() < t0 + phase_s:
                time.sleep(0.07)
                ends.append(now())
        else:
            time.sleep(phase_s)
        base = 300.0 * (1 + rate / 2000)
        ph = {"rate": rate, "n": int(rate * phase_s), "p50_us": base * f50, "p99_us": base * f99, "max_us": base * f99 * 1.2,
              "arr_p50_us": base * f50 * (30 if mode == "seq" else 1), "arr_p99_us": base * f99 * (60 if mode == "seq" else 1),
              "mean_us": base * f50, "t_start": t0 + phase_s / 20, "t_end": now()}
        if mode == "seq":
            inside = [e for e in ends if ph["t_start"] <= e <= ph["t_end"]]
            ph["be_steps"], ph["be_steps_per_s"] = len(inside), len(inside) / (ph["t_end"] - ph["t_start"])
        res["phases"][f"{rate:g}"] = ph
    if mode == "seq":
        res["be_step_ends"] = ends
    res["complete"] = True
    write(out, res)


def be(seconds, out):
    factor = float(os.environ.get("FAKE_FACTOR", "1"))
    time.sleep(0.3)
    if os.environ.get("READY_FILE"):
        open(os.environ["READY_FILE"], "w").close()
    stop, ends = os.environ.get("STOP_FILE"), []
    deadline = now() + seconds
    while now() < deadline and not (stop and os.path.exists(stop)):
        time.sleep(1 / (15.0 * factor))
        ends.append(now())
    write(out, {"step_ends": ends})


def main():
    role, args = sys.argv[1], sys.argv[2:]
    if role == "mnist":
        mnist(args[0], args[1])
    elif role == "lc":
        lc(args[0], args[1])
    elif role == "be":
        be(float(args[0]), args[1])
    else:
        sys.exit(f"fake_child: unknown role {role!r}")


if __name__ == "__main__":
    main()
