"""GPU time and energy per vGPU on a real GPU (docs/benchmarks.md, "GPU time
and energy"): a daemon, IDLE_S seconds of an idle GPU (it learns the idle
power), then two training jobs (steps.py) in vGPUs A (--compute 70) and B
(--compute 30) for PHASE_S seconds, then A alone for PHASE_S seconds.

Figures ($OUT/usage_energy.json), from /metrics scraped at each phase's ends:
  gpu_seconds[phase][vgpu]   gpuslice_vgpu_gpu_seconds_total's growth
  busy_fraction[phase]       the vGPUs' seconds over the phase's wall time
  joules[phase][vgpu|idle|device]  and whether the parts add up to the device
  smi_joules[phase]          nvidia-smi's power.draw integrated every 100 ms,
                             against the daemon's device energy
PASS when the parts add up (within 0.1%), both jobs got GPU time while
sharing, and the device energy is within 10% of nvidia-smi's integral.

    OUT=/tmp/out GPUSLICE_CMD=... python3 bench/gpu/daemon/usage_energy.py
"""
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

HERE = Path(__file__).resolve().parent
OUT = Path(os.environ.get("OUT", "/tmp/gpuslice-daemon-gpu"))
GPUSLICE = os.environ.get("GPUSLICE_CMD", os.environ.get("GPUSLICE_BIN", str(HERE.parents[2] / "build/bin/gpuslice")))
PYTHON = os.environ.get("PYTHON", sys.executable)
GPU = os.environ.get("BENCH_GPU", "0")
IDLE_S = float(os.environ.get("IDLE_S", "5"))
PHASE_S = float(os.environ.get("PHASE_S", "15"))
STEPS = str(HERE / "steps.py")


def wait_for(path, timeout, what, procs=()):
    deadline = time.monotonic() + timeout
    while not os.path.exists(path):
        for p in procs:
            if p.poll() is not None:
                sys.exit(f"{what}: a process exited early ({p.args})")
        if time.monotonic() > deadline:
            sys.exit(f"{what}: not within {timeout} s")
        time.sleep(0.05)


def scrape(port):
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
        text = r.read().decode()
    out = {}
    for line in text.splitlines():
        m = re.match(r"(gpuslice_(?:vgpu_gpu_seconds|vgpu_energy_joules|gpu_energy_joules|gpu_idle_energy_joules)"
                     r"_total)\{(.*)\} (\S+)$", line)
        if m:
            labels = dict(re.findall(r'(\w+)="([^"]*)"', m.group(2)))
            out[(m.group(1), labels.get("vgpu", "-"))] = float(m.group(3))
    return out


class PowerLog(threading.Thread):
    """nvidia-smi's power.draw and utilization.gpu every 100 ms."""

    def __init__(self):
        super().__init__(daemon=True)
        self.samples = []
        self.proc = subprocess.Popen(["nvidia-smi", "-i", GPU, "--query-gpu=power.draw,utilization.gpu",
                                      "--format=csv,noheader,nounits", "-lms", "100"], stdout=subprocess.PIPE,
                                     text=True)

    def run(self):
        for line in self.proc.stdout:
            try:
                watts, util = (float(f) for f in line.split(","))
                self.samples.append((time.monotonic(), watts, util))
            except ValueError:
                pass

    def joules(self, t0, t1):
        pts = [(t, w) for t, w, _ in self.samples if t0 <= t <= t1]
        return sum((b[0] - a[0]) * (a[1] + b[1]) / 2 for a, b in zip(pts, pts[1:]))

    def mean_util(self, t0, t1):
        u = [x for t, _, x in self.samples if t0 <= t <= t1]
        return sum(u) / len(u) / 100 if u else None


def delta(after, before):
    return {k: round(v - before.get(k, 0.0), 3) for k, v in after.items()}


def main():
    OUT.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="gsd-gpu-", dir="/tmp"))
    env = dict(os.environ, GPUSLICE_STATE_DIR=str(work / "state"), CUDA_VISIBLE_DEVICES=GPU)
    daemon_log = open(OUT / "usage_daemon.log", "w")
    daemon = subprocess.Popen([*GPUSLICE.split(), "daemon", "--metrics-address", "127.0.0.1:0"], env=env,
                              stdout=daemon_log, stderr=daemon_log)
    procs, result = [], {"ok": False}
    power = PowerLog()
    power.start()
    try:
        wait_for(work / "state" / "gpuslice.sock", 30, "daemon socket", [daemon])
        time.sleep(1)
        port = int(re.search(r"metrics on http://127\.0\.0\.1:(\d+)/", (OUT / "usage_daemon.log").read_text()).group(1))
        marks = {}
        t = time.monotonic()
        marks["start"] = (t, scrape(port))
        time.sleep(IDLE_S)  # a measurement window: the idle GPU
        marks["idle_end"] = (time.monotonic(), scrape(port))
        for name, share in (("A", "70"), ("B", "30")):
            cmd = [*GPUSLICE.split(), "run", "--gpu", GPU, "--name", f"job-{name}", "--compute", share, "--",
                   PYTHON, STEPS, str(work / f"{name}.json"), str(work / f"{name}.ready"), str(work / f"stop{name}"),
                   str(4 * PHASE_S + 120)]
            procs.append(subprocess.Popen(cmd, env=env, stdout=open(OUT / f"usage-job-{name}.log", "w"),
                                          stderr=subprocess.STDOUT))
        for name in ("A", "B"):
            wait_for(work / f"{name}.ready", 180, f"job {name} warm-up", procs)
        marks["both_start"] = (time.monotonic(), scrape(port))
        time.sleep(PHASE_S)  # a measurement window: both jobs
        marks["both_end"] = (time.monotonic(), scrape(port))
        open(work / "stopB", "w").close()
        procs[1].wait(timeout=120)
        marks["alone_start"] = (time.monotonic(), scrape(port))
        time.sleep(PHASE_S)  # a measurement window: A alone
        marks["alone_end"] = (time.monotonic(), scrape(port))
        open(work / "stopA", "w").close()
        procs[0].wait(timeout=120)
        phases = {"idle": ("start", "idle_end"), "both": ("both_start", "both_end"),
                  "alone": ("alone_start", "alone_end")}
        ok = True
        for phase, (a, b) in phases.items():
            (t0, m0), (t1, m1) = marks[a], marks[b]
            d = delta(m1, m0)
            secs = {v: s for (n, v), s in d.items() if n == "gpuslice_vgpu_gpu_seconds_total"}
            vj = {v: j for (n, v), j in d.items() if n == "gpuslice_vgpu_energy_joules_total"}
            idle = sum(j for (n, _), j in d.items() if n == "gpuslice_gpu_idle_energy_joules_total")
            device = sum(j for (n, _), j in d.items() if n == "gpuslice_gpu_energy_joules_total")
            smi = power.joules(t0, t1)
            adds_up = abs(sum(vj.values()) + idle - device) <= max(0.001 * device, 0.01)
            result[phase] = {"wall_s": round(t1 - t0, 2), "gpu_seconds": secs,
                             "busy_fraction": round(sum(secs.values()) / (t1 - t0), 3), "joules": vj,
                             "idle_joules": round(idle, 1), "device_joules": round(device, 1),
                             "smi_joules": round(smi, 1), "adds_up": adds_up,
                             "device_over_smi": round(device / smi, 3) if smi else None,
                             "smi_utilization_gpu": power.mean_util(t0, t1)}
            # The daemon's counters move once a second: a window's ends can
            # miss up to a second of the device's energy.
            one_second = smi / (t1 - t0) if t1 > t0 else 0
            ok &= adds_up and (smi == 0 or abs(device - smi) < 0.05 * smi + one_second)
        both = result["both"]["gpu_seconds"]
        ok &= both.get("job-A", 0) > 0 and both.get("job-B", 0) > 0
        result["ok"] = bool(ok)
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
        power.proc.kill()
        daemon.send_signal(signal.SIGTERM)
        daemon.wait(timeout=30)
        daemon_log.close()
        shutil.rmtree(work, ignore_errors=True)
        (OUT / "usage_energy.json").write_text(json.dumps(result, indent=1))
    print(("PASS" if result["ok"] else "FAIL") + " usage_energy: " + json.dumps(result))
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
