"""Suspend and resume on a real GPU (issue 17; docs/operations.md, `gpuslice
suspend`): a daemon, and for each size in SIZES_GIB a vGPU whose PyTorch
process(es) hold that much device memory, filled with a known pattern and
computing on it; `gpuslice suspend`, a pause, `gpuslice resume`; then each
process checks its data against the checksum it took before.

Per case ($OUT/suspend_resume.json): the bytes the vGPU held (its ledger),
the daemon's suspend and resume durations (`ls --json` `suspend`) and the
CLI's wall time for each, the GPU's used memory (nvidia-smi) before, while
suspended and after, and whether every process found its data intact and
kept computing. PASS when every case's data is intact and the GPU's memory
fell by at least 90% of what the vGPU held while it was suspended.

    bash bench/gpu/with_bundle.sh env OUT=/tmp/out python3 bench/gpu/daemon/suspend_resume.py
"""
import json
import os
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from power_cap import start_daemon  # noqa: E402
from usage_energy import wait_for  # noqa: E402

HERE = Path(__file__).resolve().parent
OUT = Path(os.environ.get("OUT", "/tmp/gpuslice-suspend"))
GPUSLICE = os.environ.get("GPUSLICE_CMD", str(HERE.parents[2] / "build/bin/gpuslice")).split()
GPU = os.environ.get("BENCH_GPU", "0")
PYTHON = os.environ.get("PYTHON", "python3")
# (GiB per process, processes): one process of each size, and a vGPU of two.
CASES = [tuple(float(x) for x in c.split("x")) for c in os.environ.get("CASES", "1x1,4x1,16x1,4x2").split(",")]
PAUSE_S = float(os.environ.get("PAUSE_S", "2"))

# The tenant: fills `size` bytes with a pattern, keeps a small matmul going,
# and at `release` checks its data and says how many matmuls it did.
HOLDER = r"""
import json, os, sys, time, torch
size, ready, release, result = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
data = torch.empty(size, device="cuda", dtype=torch.uint8)
chunk = 1 << 26  # the pattern in pieces: an index tensor of the whole would hold 8 bytes per byte
for i in range(0, size, chunk):
    n = min(chunk, size - i)
    data[i:i + n] = (torch.arange(i, i + n, device="cuda", dtype=torch.int64) % 251).to(torch.uint8)
def checksum():  # in pieces too: a sum to int64 converts its input whole
    return sum(int(data[i:i + chunk].sum(dtype=torch.int64)) for i in range(0, size, chunk))
before = checksum()
torch.cuda.empty_cache()  # hold the data, not the allocator's spare blocks
a = torch.randn(1024, 1024, device="cuda")
torch.cuda.synchronize()
open(ready, "w").close()
steps = 0
while not os.path.exists(release):
    a = torch.tanh(a @ a)
    torch.cuda.synchronize()
    steps += 1
    time.sleep(0.01)
after = checksum()
json.dump({"intact": after == before, "checksum": before, "steps": steps, "finite": bool(torch.isfinite(a).all())},
          open(result, "w"))
"""


def gpu_used_mib():
    r = subprocess.run(["nvidia-smi", "-i", GPU, "--query-gpu=memory.used", "--format=csv,noheader,nounits"],
                       capture_output=True, text=True)
    return float(r.stdout.strip().splitlines()[0]) if r.returncode == 0 else None


def cli(env, *args):
    t = time.monotonic()
    r = subprocess.run([*GPUSLICE, *args], env=env, capture_output=True, text=True, timeout=300)
    return r, time.monotonic() - t


def run_case(env, work, gib, procs, n):
    name = f"susp{n}"
    size = int(gib * (1 << 30))
    case = {"gib_per_process": gib, "processes": int(procs)}
    ready = [work / f"{name}-ready{i}" for i in range(int(procs))]
    results = [work / f"{name}-result{i}" for i in range(int(procs))]
    release = work / f"{name}-release"
    apps = [subprocess.Popen([*GPUSLICE, "run", "--gpu", GPU, "--name", name, "--", PYTHON, "-c", HOLDER, str(size),
                              str(ready[i]), str(release), str(results[i])], env=env,
                             stdout=open(OUT / f"{name}-{i}.log", "w"), stderr=subprocess.STDOUT)
            for i in range(int(procs))]
    try:
        for r in ready:
            wait_for(r, 180, f"{r.name}", apps)
        time.sleep(1)
        ls, _ = cli(env, "ls", "--json", name)
        view = json.loads(ls.stdout)["vgpus"][0]
        case["held_bytes"] = sum(d["memory_used_bytes"] for d in view["devices"])
        case["gpu_used_mib_before"] = gpu_used_mib()
        r, case["suspend_wall_s"] = cli(env, "suspend", name, "--json")
        if r.returncode != 0:
            case["error"] = "suspend: " + r.stderr.strip()[-400:]
            return case
        s = json.loads(r.stdout)["suspend"]
        case["suspend_s"], case["suspended_bytes"] = s["last_suspend_seconds"], s["suspended_bytes"]
        time.sleep(PAUSE_S / 2)
        case["gpu_used_mib_suspended"] = gpu_used_mib()
        time.sleep(PAUSE_S / 2)
        r, case["resume_wall_s"] = cli(env, "resume", name, "--json")
        if r.returncode != 0:
            case["error"] = "resume: " + r.stderr.strip()[-400:]
            return case
        case["resume_s"] = json.loads(r.stdout)["suspend"]["last_resume_seconds"]
        time.sleep(1)
        case["gpu_used_mib_after"] = gpu_used_mib()
        release.touch()
        for a in apps:
            a.wait(timeout=120)
        case["exit_codes"] = [a.returncode for a in apps]
        case["results"] = [json.loads(p.read_text()) if p.exists() else None for p in results]
        freed_mib = case["gpu_used_mib_before"] - case["gpu_used_mib_suspended"]
        case["freed_fraction"] = round(freed_mib * (1 << 20) / case["held_bytes"], 3) if case["held_bytes"] else None
        case["ok"] = (all(x is not None and x["intact"] and x["finite"] and x["steps"] > 0 for x in case["results"])
                      and all(c == 0 for c in case["exit_codes"]) and (case["freed_fraction"] or 0) >= 0.9)
        return case
    finally:
        release.touch()
        for a in apps:
            if a.poll() is None:
                a.kill()
                a.wait()


def main():
    OUT.mkdir(parents=True, exist_ok=True)
    work, env, daemon = start_daemon("gs-suspend-", OUT / "daemon.log")
    result = {"cases": [], "ok": False}
    try:
        wait_for(work / "state" / "gpuslice.sock", 30, "daemon socket", [daemon])
        time.sleep(1)
        for n, (gib, procs) in enumerate(CASES):
            try:
                case = run_case(env, work, gib, procs, n)
            except (Exception, SystemExit) as e:  # a case's failure is a result (wait_for exits)
                case = {"gib_per_process": gib, "processes": int(procs), "error": f"{type(e).__name__}: {e}"}
            result["cases"].append(case)
            print(json.dumps(case), flush=True)
            (OUT / "suspend_resume.json").write_text(json.dumps(result, indent=1))
        result["ok"] = all(c.get("ok") for c in result["cases"])
    finally:
        daemon.terminate()
        daemon.wait(timeout=30)
        (OUT / "suspend_resume.json").write_text(json.dumps(result, indent=1))
    print("PASS" if result["ok"] else "FAIL")
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
