"""Memory overcommit on a real GPU (issue 17; docs/design.md, "Memory
overcommit"): a daemon with `memory_pressure.wait_ms`; two best-effort
PyTorch trainings (`--suspendable`) that each hold a share of the GPU's free
memory as data and train a small model; and a latency-critical service
whose bursts each allocate more than the GPU has left, compute, and free.
The limits add up to more than the GPU.

Each burst's allocation waits while the daemon suspends a training, then
succeeds; once the burst frees, the training is resumed. Reported
($OUT/overcommit.json): each burst's allocation wait and total time, which
vGPUs the daemon suspended and resumed and how long that took (its log and
`ls --json`), each training's steps and loss over time (the curve must go on
after each suspend), and whether its data was intact at the end. PASS when
every burst's allocation succeeded within the wait, every training ends
with its data intact and went on stepping after its last resume.

    bash bench/gpu/with_bundle.sh env OUT=/tmp/out python3 bench/gpu/daemon/overcommit.py
"""
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from power_cap import start_daemon  # noqa: E402
from usage_energy import wait_for  # noqa: E402

HERE = Path(__file__).resolve().parent
OUT = Path(os.environ.get("OUT", "/tmp/gpuslice-overcommit"))
GPUSLICE = os.environ.get("GPUSLICE_CMD", str(HERE.parents[2] / "build/bin/gpuslice")).split()
GPU = os.environ.get("BENCH_GPU", "0")
PYTHON = os.environ.get("PYTHON", "python3")
BE_FRACTION = float(os.environ.get("BE_FRACTION", "0.3"))    # of the free memory, per training
LC_FRACTION = float(os.environ.get("LC_FRACTION", "0.55"))  # of the free memory, per burst
BURSTS = int(os.environ.get("BURSTS", "3"))
GAP_S = float(os.environ.get("GAP_S", "8"))  # between bursts (the anti-thrash minimum is 5 s here)
WAIT_MS = int(os.environ.get("WAIT_MS", "120000"))

# A training: `size` bytes of data (a pattern, checksummed), a small MLP
# trained on a fixed regression task; one line per 20 steps to `log`
# ("t step loss"), until `release`; then checks the data.
TRAINING = r"""
import json, os, sys, time, torch
size, ready, release, log, result = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5]
data = torch.empty(size, device="cuda", dtype=torch.uint8)
chunk = 1 << 26
for i in range(0, size, chunk):
    n = min(chunk, size - i)
    data[i:i + n] = (torch.arange(i, i + n, device="cuda", dtype=torch.int64) % 251).to(torch.uint8)
def checksum():
    return sum(int(data[i:i + chunk].sum(dtype=torch.int64)) for i in range(0, size, chunk))
before = checksum()
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(512, 1024), torch.nn.ReLU(), torch.nn.Linear(1024, 1)).cuda()
opt = torch.optim.SGD(model.parameters(), lr=1e-3)
x = torch.randn(4096, 512, device="cuda")
y = x[:, :8].sum(dim=1, keepdim=True)
torch.cuda.synchronize()
torch.cuda.empty_cache()
open(ready, "w").close()
out = open(log, "w")
step = 0
while not os.path.exists(release):
    loss = torch.nn.functional.mse_loss(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    step += 1
    if step % 20 == 0:
        out.write(f"{time.time():.3f} {step} {loss.item():.6f}\n")
        out.flush()
after = checksum()
json.dump({"intact": after == before, "steps": step}, open(result, "w"))
"""

# The service: BURSTS times, allocate `size` bytes (timed: the wait), fill and
# reduce them, free them, wait `gap`; one JSON line per burst to `log`.
SERVICE = r"""
import json, sys, time, torch
size, bursts, gap, log = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3]), sys.argv[4]
torch.zeros(1, device="cuda")
out = open(log, "w")
for b in range(bursts):
    t0 = time.monotonic()
    try:
        buf = torch.empty(size, device="cuda", dtype=torch.uint8)
        t1 = time.monotonic()
        buf.fill_(7)
        total = int(buf[: 1 << 20].sum(dtype=torch.int64))
        torch.cuda.synchronize()
        ok = total == 7 << 20
    except RuntimeError as e:
        t1, ok = time.monotonic(), False
        print("burst failed:", str(e).splitlines()[0], flush=True)
    del buf
    torch.cuda.empty_cache()
    t2 = time.monotonic()
    out.write(json.dumps({"burst": b, "alloc_wait_s": round(t1 - t0, 3), "burst_s": round(t2 - t0, 3), "ok": ok,
                          "at": time.time()}) + "\n")
    out.flush()
    time.sleep(gap)
"""


def free_bytes():
    r = subprocess.run(["nvidia-smi", "-i", GPU, "--query-gpu=memory.free", "--format=csv,noheader,nounits"],
                       capture_output=True, text=True)
    return int(float(r.stdout.strip().splitlines()[0]) * (1 << 20))


def main():
    OUT.mkdir(parents=True, exist_ok=True)
    config = OUT / "config.yaml"
    config.write_text(f"version: 1\nmemory_pressure:\n  wait_ms: {WAIT_MS}\n  min_run_after_resume_s: 5\n"
                      "  max_suspends_per_minute: 10\n  resume_headroom: 1GiB\n")
    free = free_bytes()
    be_bytes, lc_bytes = int(free * BE_FRACTION), int(free * LC_FRACTION)
    work, env, daemon = start_daemon("gs-overcommit-", OUT / "daemon.log", ["--config", str(config)])
    result = {"gpu_free_bytes": free, "be_bytes": be_bytes, "lc_bytes": lc_bytes, "ok": False}
    apps = []
    try:
        wait_for(work / "state" / "gpuslice.sock", 30, "daemon socket", [daemon])
        time.sleep(1)
        release = work / "release"
        limit = f"{int((be_bytes >> 20) * 1.2)}MiB"
        for i in range(2):
            apps.append(subprocess.Popen(
                [*GPUSLICE, "run", "--gpu", GPU, "--name", f"train{i}", "--suspendable", "--memory", limit, "--",
                 PYTHON, "-c", TRAINING, str(be_bytes), str(work / f"ready{i}"), str(release),
                 str(OUT / f"train{i}.log"), str(work / f"result{i}.json")],
                env=env, stdout=open(OUT / f"train{i}.out", "w"), stderr=subprocess.STDOUT))
        for i in range(2):
            wait_for(work / f"ready{i}", 300, f"training {i}", apps)
        time.sleep(3)
        service = subprocess.Popen(
            [*GPUSLICE, "run", "--gpu", GPU, "--name", "service", "--priority", "lc", "--memory",
             f"{int((lc_bytes >> 20) * 1.1)}MiB", "--", PYTHON, "-c", SERVICE, str(lc_bytes), str(BURSTS),
             str(GAP_S), str(OUT / "service.log")],
            env=env, stdout=open(OUT / "service.out", "w"), stderr=subprocess.STDOUT)
        apps.append(service)
        service.wait(timeout=BURSTS * (GAP_S + WAIT_MS / 1000 + 60))
        time.sleep(GAP_S)  # the last resume
        ls = subprocess.run([*GPUSLICE, "ls", "--json"], env=env, capture_output=True, text=True)
        result["vgpus"] = {v["name"]: v.get("suspend") for v in json.loads(ls.stdout)["vgpus"]} if ls.returncode == 0 \
            else ls.stderr
        release.touch()
        for a in apps[:2]:
            a.wait(timeout=300)
        result["bursts"] = [json.loads(line) for line in (OUT / "service.log").read_text().splitlines()]
        result["trainings"] = []
        for i in range(2):
            rows = [tuple(float(x) for x in line.split()) for line in (OUT / f"train{i}.log").read_text().splitlines()]
            r = json.loads((work / f"result{i}.json").read_text()) if (work / f"result{i}.json").exists() else None
            result["trainings"].append({"result": r, "first": rows[0] if rows else None, "last": rows[-1] if rows else None,
                                        "rows": len(rows), "exit": apps[i].returncode})
        log = (OUT / "daemon.log").read_text()
        result["daemon_events"] = re.findall(r"((?:suspended|resumed|checkpointed|restored)[^\n]*vGPU 'train\d'[^\n]*)",
                                             log)
        result["ok"] = (len(result["bursts"]) == BURSTS and all(b["ok"] for b in result["bursts"])
                        and all(t["result"] and t["result"]["intact"] and t["exit"] == 0 for t in result["trainings"]))
    finally:
        for a in apps:
            if a.poll() is None:
                a.kill()
                a.wait()
        daemon.terminate()
        daemon.wait(timeout=60)
        (OUT / "overcommit.json").write_text(json.dumps(result, indent=1))
    print(json.dumps({k: result.get(k) for k in ("gpu_free_bytes", "be_bytes", "lc_bytes", "bursts", "daemon_events",
                                                 "trainings", "vgpus", "ok")}, indent=1))
    print("PASS" if result["ok"] else "FAIL")
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
