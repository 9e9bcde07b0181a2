#!/usr/bin/env python3
"""What memory overcommit's service (daemon/memory_pressure_service.h) costs
the daemon while nothing waits: V vGPUs, one application each, idle; the
daemon's CPU time over a window with `memory_pressure.wait_ms` off and on.

    bench/daemon/pressure_cost.py [--build build] [--vgpus 100] [--window 10]

Prints one line per setting: the daemon's CPU seconds per second (user +
system, from /proc/<pid>/stat), fake driver.
"""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def measure(build, vgpus, window, wait_ms):
    gpuslice = os.path.join(build, "bin", "gpuslice")
    app = os.path.join(build, "bin", "cuda_app")
    fake = os.path.join(build, "fake_driver")
    work = tempfile.mkdtemp(prefix="gs-pressure-", dir="/tmp")
    env = {k: v for k, v in os.environ.items() if not k.startswith("GPUSLICE_")}
    env.update({"GPUSLICE_STATE_DIR": os.path.join(work, "state"),
                "GPUSLICE_REAL_DRIVER": os.path.join(fake, "libcuda.so.1"),
                "GPUSLICE_REAL_NVML": os.path.join(fake, "libnvidia-ml.so.1"), "LD_LIBRARY_PATH": fake})
    config = os.path.join(work, "config.yaml")
    with open(config, "w") as f:
        f.write(f"version: 1\nmemory_pressure:\n  wait_ms: {wait_ms}\n")
    daemon = subprocess.Popen([gpuslice, "daemon", "--no-metrics", "--log-level", "warn", "--config", config],
                              env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    runs = []
    try:
        while subprocess.run([gpuslice, "ls"], env=env, capture_output=True).returncode != 0:
            time.sleep(0.1)
        end = os.path.join(work, "end")
        for k in range(vgpus):
            ready = os.path.join(work, f"ready{k}")
            runs.append((subprocess.Popen([gpuslice, "run", "--name", f"v{k}", "--memory", "64MiB", "--", app, "init",
                                           "alloc", "1M", "ready", ready, "await", end], env=env,
                                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL), ready))
        for _, ready in runs:
            while not os.path.exists(ready):
                time.sleep(0.05)
        time.sleep(2)
        c0, t0 = cpu_seconds(daemon.pid), time.monotonic()
        time.sleep(window)
        c1, t1 = cpu_seconds(daemon.pid), time.monotonic()
        open(end, "w").close()
        for p, _ in runs:
            p.wait(timeout=60)
        return (c1 - c0) / (t1 - t0)
    finally:
        for p, _ in runs:
            if p.poll() is None:
                p.kill()
        daemon.terminate()
        daemon.wait(timeout=30)
        shutil.rmtree(work, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.environ.get("GPUSLICE_BUILD_DIR", "build"))
    ap.add_argument("--vgpus", type=int, default=100)
    ap.add_argument("--window", type=float, default=10)
    a = ap.parse_args()
    for wait_ms in (0, 30000):
        cost = measure(a.build, a.vgpus, a.window, wait_ms)
        print(f"{a.vgpus} idle vGPUs, memory_pressure.wait_ms {wait_ms}: daemon {cost:.3f} CPU s/s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
