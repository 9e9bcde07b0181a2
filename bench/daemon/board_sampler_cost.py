#!/usr/bin/env python3
"""What the daemon's board sampler (daemon/board_sampler.h) costs it, on
the fake driver: over a window while two vGPUs' applications wait idle (no
turn held: the sampler looks every 50 ms) and while they contend (turns
held: it looks every millisecond), the sampler thread's wake-ups and CPU
time, and the whole daemon's CPU time (/proc/<pid>/task/*/schedstat, in
nanoseconds, not clock ticks).

    bench/daemon/board_sampler_cost.py [--build build] [--window 10]
"""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time



def threads(pid):
    """{thread name: (CPU ns, voluntary context switches)} of a process."""
    out = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        base = f"/proc/{pid}/task/{tid}"
        try:
            name = open(f"{base}/comm").read().strip()
            cpu = int(open(f"{base}/schedstat").read().split()[0])
            switches = int(next(l for l in open(f"{base}/status") if l.startswith("voluntary_ctxt_switches")).split()[1])
        except (OSError, StopIteration):
            continue
        prev = out.get(name, (0, 0))
        out[name] = (prev[0] + cpu, prev[1] + switches)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.environ.get("GPUSLICE_BUILD_DIR", "build"))
    ap.add_argument("--window", type=float, default=10)
    a = ap.parse_args()
    gpuslice, app = os.path.join(a.build, "bin", "gpuslice"), os.path.join(a.build, "bin", "cuda_app")
    fake = os.path.join(a.build, "fake_driver")
    work = tempfile.mkdtemp(prefix="gs-sampler-", dir="/tmp")
    env = {k: v for k, v in os.environ.items() if not k.startswith("GPUSLICE_")}
    env.update({"GPUSLICE_STATE_DIR": os.path.join(work, "state"),
                "GPUSLICE_REAL_DRIVER": os.path.join(fake, "libcuda.so.1"),
                "GPUSLICE_REAL_NVML": os.path.join(fake, "libnvidia-ml.so.1"), "LD_LIBRARY_PATH": fake,
                "FAKE_KERNEL_US": "100"})
    daemon = subprocess.Popen([gpuslice, "daemon", "--no-metrics", "--log-level", "warn"], env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    runs = []
    try:
        while subprocess.run([gpuslice, "ls"], env=env, capture_output=True).returncode != 0:
            time.sleep(0.1)
        go = os.path.join(work, "go")
        for name, share in (("a", "30"), ("b", "70")):
            ready = os.path.join(work, name + ".ready")
            runs.append((subprocess.Popen([gpuslice, "run", "--name", name, "--compute", share, "--", app, "init",
                                           "ready", ready, "await", go, "spin", str(a.window + 5),
                                           os.path.join(work, name + ".runs")], env=env,
                                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL), ready))
        for _, ready in runs:
            while not os.path.exists(ready):
                time.sleep(0.05)
        for phase in ("idle", "contending"):
            if phase == "contending":
                open(go, "w").close()
                time.sleep(2)
            s0, t0 = threads(daemon.pid), time.monotonic()
            time.sleep(a.window)
            s1, t1 = threads(daemon.pid), time.monotonic()
            dt = t1 - t0
            sampler = [s1["board-sampler"][k] - s0["board-sampler"][k] for k in (0, 1)]
            daemon_ns = sum(v[0] for v in s1.values()) - sum(v[0] for v in s0.values())
            print(f"two vGPUs {phase}: board sampler {sampler[1] / dt:.0f} wake-ups/s, {sampler[0] / dt / 1e6:.2f} ms "
                  f"CPU/s ({sampler[0] / max(sampler[1], 1) / 1e3:.1f} us each); whole daemon "
                  f"{daemon_ns / dt / 1e6:.2f} ms CPU/s", flush=True)
        for p, _ in runs:
            p.wait(timeout=60)
    finally:
        for p, _ in runs:
            if p.poll() is None:
                p.terminate()
                p.wait(timeout=30)
        daemon.terminate()
        daemon.wait(timeout=30)
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
