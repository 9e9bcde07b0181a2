"""Stand-ins for gpuslice and every child of run_matrix.py, for FAKE=1 runs
without a GPU: they keep the children's contracts (arguments, READY_FILE,
GO_FILE, STOP_FILE, result files, CLOCK_MONOTONIC times, the library's info
log lines) and make up plausible figures, so the driver's plumbing, windows,
tables and merge can be exercised anywhere. Nothing here measures anything.

    fake.py gpuslice run --gpu G --name N [flags] -- CMD...   (runs CMD)
    fake.py lctf OUT.json                                       (lc_tf.py)
    fake.py tiny SECONDS OUT.json                               (lc_be lc)
    fake.py be KIND SECONDS OUT.json                            (train.py, be_load.py)

The figures depend on FAKE_VGPU (the flags the fake gpuslice was given),
FAKE_CONTEXT (the cell's name) and FAKE_TENANTS (background loads in the cell).
"""
import json
import os
import random
import sys
import time

now = time.monotonic
BASE_US = {"graph": 450.0, "eager": 1600.0, "tiny": 60.0}
BASE_SPS = {"gpu": 10.0, "launch": 180.0, "mem": 60.0, "copy": 90.0}


def touch(path):
    if path:
        open(path, "w").close()


def wait_go():
    go = os.environ.get("GO_FILE")
    while go and not os.path.exists(go):
        time.sleep(0.005)


def context():
    vgpu = os.environ.get("FAKE_VGPU", "").split()
    ctx = os.environ.get("FAKE_CONTEXT", "")
    return vgpu, ctx


def lc_factor():
    """(p50 factor, p99 factor) for the LC in this cell."""
    vgpu, ctx = context()
    if "alone" in ctx:
        return 1.0, 1.0
    if "lc" in vgpu:
        return 1.04, 1.12
    return 1.5, 2.6  # stock


def percentiles(base, f50, f99, n, rng):
    lat = sorted(base * (f50 + (f99 - f50) * rng.random() ** 8) for _ in range(n))
    return lat


def fake_lctf(out):
    rng = random.Random(1)
    phase_s = float(os.environ.get("PHASE_S", "10"))
    phases = [p for p in os.environ.get("LC_PHASES", "graph,eager").split(",") if p]
    time.sleep(0.5)  # "start-up"
    period = float(os.environ.get("EAGER_PERIOD_MS") or 15)
    res = {"model": "fake encoder", "torch": "fake", "graph_gpu_us": 380.0, "eager_alone_us": 1600.0,
           "eager_period_ms": period, "eager_period_source": "given" if os.environ.get("EAGER_PERIOD_MS") else "measured",
           "phases": {}, "complete": False}
    touch(os.environ.get("READY_FILE"))
    wait_go()
    f50, f99 = lc_factor()
    for p in phases:
        rate = float(os.environ.get("GRAPH_RATE", "100")) if p == "graph" else 1000 / period
        t0 = now()
        time.sleep(phase_s)
        lat = percentiles(BASE_US[p], f50, f99, int(rate * phase_s * 0.95), rng)
        res["phases"][p] = {"n": len(lat), "rate": rate, "period_ms": 1000 / rate, "behind": 0,
                            "p50_us": lat[len(lat) // 2], "p90_us": lat[int(.9 * len(lat))],
                            "p99_us": lat[int(.99 * len(lat))], "max_us": lat[-1], "mean_us": sum(lat) / len(lat),
                            "arr_p50_us": lat[len(lat) // 2] + 5, "arr_p99_us": lat[int(.99 * len(lat))] + 20,
                            "t_start": t0 + phase_s / 20, "t_end": now(), "lat_us": lat[:5], "arr_us": lat[:5]}
    res["complete"] = True
    with open(out, "w") as f:
        json.dump(res, f)


def fake_tiny(seconds, out):
    rng = random.Random(2)
    time.sleep(0.2)
    t0 = now()
    time.sleep(seconds)
    f50, f99 = lc_factor()
    lat = percentiles(BASE_US["tiny"], f50, f99, int(200 * seconds), rng)
    with open(out, "w") as f:
        json.dump({"mode": "lc", "iters": int(os.environ.get("LC_ITERS", "4321")), "kernel_us": 50.0, "n": len(lat),
                   "p50_us": lat[len(lat) // 2], "p90_us": lat[int(.9 * len(lat))], "p99_us": lat[int(.99 * len(lat))],
                   "max_us": lat[-1], "t_start": t0 + seconds / 20, "t_end": now()}, f)


def fake_be(kind, seconds, out):
    vgpu, ctx = context()
    tenants = int(os.environ.get("FAKE_TENANTS", "1"))
    if "--compute-cap" in vgpu:
        factor = int(vgpu[vgpu.index("--compute-cap") + 1]) / 100 * 1.02
    elif "--compute" in vgpu:
        factor = int(vgpu[vgpu.index("--compute") + 1]) / 100 * (1.1 if kind == "launch" else 0.98)
    elif "be" in vgpu:
        factor = 0.93
    elif ctx.startswith("lcbe"):
        factor = 0.85
    else:
        factor = 1.0 / tenants
    rate = BASE_SPS[kind] * min(1.0, factor)
    time.sleep(0.3)
    touch(os.environ.get("READY_FILE"))
    stop = os.environ.get("STOP_FILE")
    ends, deadline = [], now() + seconds
    while now() < deadline and not (stop and os.path.exists(stop)):
        time.sleep(1 / rate)
        ends.append(now())
    with open(out, "w") as f:
        json.dump({"kind": kind, "fake": True, "step_ends": ends}, f)


def fake_gpuslice(args):
    # run --gpu G --name N [flags] -- CMD...
    sep = args.index("--")
    flags, cmd = args[:sep], args[sep + 1:]
    name = flags[flags.index("--name") + 1]
    print(f"gpuslice: info: joined vGPU '{name}' (/tmp/fake)", file=sys.stderr, flush=True)
    print("gpuslice: info: timeslice of channel group 0xcafe set to 2000 us", file=sys.stderr, flush=True)
    os.environ["FAKE_VGPU"] = " ".join(flags[flags.index("--name") + 2:])
    os.execvp(cmd[0], cmd)


def main():
    role, args = sys.argv[1], sys.argv[2:]
    if role == "gpuslice":
        fake_gpuslice(args[1:])
    elif role == "lctf":
        fake_lctf(args[0])
    elif role == "tiny":
        fake_tiny(float(args[0]), args[1])
    elif role == "be":
        fake_be(args[0], float(args[1]), args[2])
    else:
        sys.exit(f"fake.py: unknown role {role!r}")


if __name__ == "__main__":
    main()
