"""The meter's compute shares against throughput, on a real GPU (issue 15,
"Must show"): a daemon; IDLE_S s idle; three identical trainings (steps.py)
in vGPUs job-A/B/C at --compute 20/30/50 (SHARES) for PHASE_S s, with
`gpuslice top --json` every second; then A and B stop and C runs alone (its
elastic share: the whole GPU) for PHASE_S s, after SETTLE_S s to settle.

Figures ($OUT/share_meter.json; top's frames in $OUT/share_meter_top.jsonl),
per job in the shared window: steps/s, pct_of_alone (over C's steps/s alone)
and split (over the jobs' sum); measured (top's MEASURED: the mean of
measured_recent_ratio over the frames that arrived in the window after its
first SETTLE_S s, % of the GPU) and its split; error_pp (measured -
pct_of_alone), split_error_pp; implied_pct (pct_of_alone times the GPU's
busy fraction with C alone) and implied_error_pp; gpu_seconds, joules, watts.
Per window (idle, shared, alone): the counters' growth per vGPU, busy_s
(nvidia-smi's mean utilization.gpu times the wall time), idle and device
joules, nvidia-smi's power.draw integral, and whether the joules add up.
PASS when every |split_error_pp| <= 3 (the splits: one training alone does
not keep the GPU busy, so error_pp is reported, not asserted), the shared window's gpu_seconds sum is within
5% of busy_s, and in every window the vGPUs' joules plus idle equal the
device's (within 0.1%).

    bash bench/gpu/with_bundle.sh env OUT=/tmp/out python3 bench/gpu/daemon/share_meter.py

Knobs: OUT, GPUSLICE_CMD/GPUSLICE_BIN, PYTHON, BENCH_GPU (0), IDLE_S (5),
PHASE_S (20), SHARES ("20,30,50"; the last runs alone), STEPS_SCRIPT (a
stand-in for a dry run without a GPU). About 2 minutes at the defaults.
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

sys.path.insert(0, str(Path(__file__).resolve().parent))
from power_cap import daemon_command, metrics_port  # noqa: E402
from usage_energy import PowerLog, delta, wait_for  # noqa: E402

HERE = Path(__file__).resolve().parent
OUT = Path(os.environ.get("OUT", "/tmp/gpuslice-share-meter"))
GPUSLICE = os.environ.get("GPUSLICE_CMD", os.environ.get("GPUSLICE_BIN", str(HERE.parents[2] / "build/bin/gpuslice")))
GPUSLICE = GPUSLICE.split()
PYTHON = os.environ.get("PYTHON", sys.executable)
GPU = os.environ.get("BENCH_GPU", "0")
IDLE_S = float(os.environ.get("IDLE_S", "5"))
PHASE_S = float(os.environ.get("PHASE_S", "20"))
SHARES = [s.strip() for s in os.environ.get("SHARES", "20,30,50").split(",")]
JOBS = [f"job-{chr(ord('A') + i)}" for i in range(len(SHARES))]  # the last runs alone
STEPS = os.environ.get("STEPS_SCRIPT", str(HERE / "steps.py"))
SETTLE_S = 3.0  # before a window, and top's frames skipped at its start
COUNTERS = ("gpuslice_vgpu_gpu_seconds_total", "gpuslice_vgpu_energy_joules_total",
            "gpuslice_gpu_energy_joules_total", "gpuslice_gpu_idle_energy_joules_total")


def scrape(port):
    """The four usage counters of GPU BENCH_GPU, keyed (name, vgpu or "-")."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
        text = r.read().decode()
    out = {}
    for m in re.finditer(r"^(gpuslice_[a-z_]+)\{(.*)\} (\S+)$", text, re.M):
        labels = dict(re.findall(r'(\w+)="([^"]*)"', m.group(2)))
        if m.group(1) in COUNTERS and labels.get("gpu") == GPU:
            out[(m.group(1), labels.get("vgpu", "-"))] = float(m.group(3))
    return out


class TopLog(threading.Thread):
    """`gpuslice top --json` every second: each frame's arrival time and, per
    vGPU, MEASURED as top shows it (measured_recent_ratio, else
    compute_measured_ratio; None when neither)."""

    def __init__(self, env):
        super().__init__(daemon=True)
        self.frames, self.out = [], open(OUT / "share_meter_top.jsonl", "w")
        self.proc = subprocess.Popen([*GPUSLICE, "top", "--json", "--interval-ms", "1000"], env=env,
                                     stdout=subprocess.PIPE, stderr=open(OUT / "share_meter_top.err", "w"), text=True)

    def run(self):
        for line in self.proc.stdout:
            t = time.monotonic()
            self.out.write(line)
            self.out.flush()
            try:
                vgpus = json.loads(line).get("vgpus", [])
            except ValueError:
                continue
            measured = {}
            for v in vgpus:
                r = [d.get("measured_recent_ratio") if d.get("measured_recent_ratio") is not None
                     else d.get("compute_measured_ratio") for d in v.get("devices", [])]
                r = [x for x in r if x is not None]
                measured[v.get("name")] = sum(r) if r else None
            self.frames.append((t, measured))

    def mean(self, name, t0, t1):
        """Mean MEASURED of NAME, in % of the GPU, over frames that arrived in [t0, t1]."""
        r = [m[name] for t, m in self.frames if t0 <= t <= t1 and m.get(name) is not None]
        return (100 * sum(r) / len(r), len(r)) if r else (None, 0)


def rnd(x, places=2):
    return None if x is None else round(x, places)


def diff(a, b):
    return None if a is None or b is None else round(a - b, 2)


def usage(power, t0, m0, t1, m1):
    """One window's counters, against nvidia-smi."""
    d, wall = delta(m1, m0), t1 - t0
    secs = {v: x for (n, v), x in d.items() if n == "gpuslice_vgpu_gpu_seconds_total"}
    joules = {v: x for (n, v), x in d.items() if n == "gpuslice_vgpu_energy_joules_total"}
    idle = d.get(("gpuslice_gpu_idle_energy_joules_total", "-"), 0.0)
    device = d.get(("gpuslice_gpu_energy_joules_total", "-"), 0.0)
    util = power.mean_util(t0, t1)
    busy = util * wall if util is not None else None
    total = sum(secs.values())
    return {"t0": t0, "t1": t1, "wall_s": round(wall, 2), "gpu_seconds": secs, "gpu_seconds_sum": round(total, 3),
            "smi_utilization_gpu": util, "busy_s": None if busy is None else round(busy, 3),
            "gpu_seconds_over_busy": round(total / busy, 3) if busy else None,
            "joules": joules, "watts": {v: round(j / wall, 1) for v, j in joules.items()},
            "idle_joules": round(idle, 1), "device_joules": round(device, 1),
            "smi_joules": round(power.joules(t0, t1), 1),
            "adds_up": abs(sum(joules.values()) + idle - device) <= max(0.001 * device, 0.01)}


def main():
    OUT.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="gs-meter-", dir="/tmp"))
    env = dict(os.environ, GPUSLICE_STATE_DIR=str(work / "state"), CUDA_VISIBLE_DEVICES=GPU)
    env.pop("GPUSLICE_SOCKET", None)
    power = PowerLog()
    power.start()
    command, extra = daemon_command()
    daemon_log = open(OUT / "share_meter_daemon.log", "w")
    daemon = subprocess.Popen(command, env={**env, **extra}, stdout=daemon_log, stderr=daemon_log)
    procs, top, result, table = {}, None, {"ok": False, "shares": dict(zip(JOBS, SHARES)),
                                           "wall_minus_monotonic": time.time() - time.monotonic()}, []
    try:
        port = metrics_port(work, daemon, OUT / "share_meter_daemon.log")

        def window(name, seconds):
            t0, m0 = time.monotonic(), scrape(port)
            time.sleep(seconds)  # a measurement window
            result[name] = usage(power, t0, m0, time.monotonic(), scrape(port))
            print(name, json.dumps(result[name]), flush=True)

        window("idle", IDLE_S)
        for job, share in zip(JOBS, SHARES):
            cmd = [*GPUSLICE, "run", "--gpu", GPU, "--name", job, "--compute", share, "--", PYTHON, STEPS,
                   str(work / f"{job}.json"), str(work / f"{job}.ready"), str(work / f"{job}.stop"),
                   str(3 * PHASE_S + 240)]
            procs[job] = subprocess.Popen(cmd, env=env, stdout=open(OUT / f"share_meter_{job}.log", "w"),
                                          stderr=subprocess.STDOUT, start_new_session=True)
        for job in JOBS:
            wait_for(work / f"{job}.ready", 180, f"{job} warm-up (logs: {OUT}/share_meter_job-*.log)",
                     [*procs.values(), daemon])
        top = TopLog(env)
        top.start()
        time.sleep(SETTLE_S)  # top's first frames; every job past its first steps
        window("shared", PHASE_S)
        for what, proc, log in [*((j, procs[j], f"share_meter_{j}.log") for j in JOBS),
                                ("top", top.proc, "share_meter_top.err"), ("daemon", daemon, "share_meter_daemon.log")]:
            if proc.poll() is not None:  # each ran the whole shared window
                sys.exit(f"{what} exited early, status {proc.returncode} ({OUT}/{log})")
        for job in JOBS[:-1]:
            open(work / f"{job}.stop", "w").close()
        for job in JOBS[:-1]:
            procs[job].wait(timeout=60)
        alone = JOBS[-1]
        if procs[alone].poll() is not None:
            sys.exit(f"{alone} exited early ({OUT}/share_meter_{alone}.log)")
        time.sleep(SETTLE_S)  # top's 5 s window and the meter leave the shared time behind
        window("alone", PHASE_S)
        open(work / f"{alone}.stop", "w").close()
        procs[alone].wait(timeout=60)
        for job, p in procs.items():
            if p.returncode != 0:
                sys.exit(f"{job} exited with {p.returncode} ({OUT}/share_meter_{job}.log)")

        ends = {job: json.loads((work / f"{job}.json").read_text())["step_ends"] for job in JOBS}
        sh, al = result["shared"], result["alone"]

        def rate(job, w):  # steps.py's step ends are CLOCK_MONOTONIC, as time.monotonic()
            return sum(1 for e in ends[job] if w["t0"] <= e <= w["t1"]) / (w["t1"] - w["t0"])

        alone_rate = rate(alone, al)
        alone_busy = al["smi_utilization_gpu"]
        rates = {job: rate(job, sh) for job in JOBS}
        measured = {job: top.mean(job, sh["t0"] + SETTLE_S, sh["t1"]) for job in JOBS}
        m_sum = sum(m for m, _ in measured.values() if m is not None)
        jobs = {}
        for job, share in zip(JOBS, SHARES):
            pct = 100 * rates[job] / alone_rate if alone_rate else None
            split = 100 * rates[job] / sum(rates.values()) if sum(rates.values()) else None
            m, frames = measured[job]
            m_split = 100 * m / m_sum if m is not None and m_sum else None
            implied = pct * alone_busy if pct is not None and alone_busy is not None else None
            jobs[job] = {"target_pct": int(share), "steps_per_s": rnd(rates[job], 3), "pct_of_alone": rnd(pct),
                         "split": rnd(split), "measured": rnd(m), "measured_frames": frames,
                         "measured_split": rnd(m_split), "error_pp": diff(m, pct),
                         "split_error_pp": diff(m_split, split), "implied_pct": rnd(implied),
                         "implied_error_pp": diff(m, implied), "gpu_seconds": sh["gpu_seconds"].get(job),
                         "joules": sh["joules"].get(job), "watts": sh["watts"].get(job)}
        result["jobs"] = jobs
        m_alone, _ = top.mean(alone, al["t0"] + SETTLE_S, al["t1"])
        result["alone_job"] = {"job": alone, "target_pct": int(SHARES[-1]), "steps_per_s": round(alone_rate, 3),
                               "pct_of_alone": 100.0, "measured": rnd(m_alone),
                               "implied_pct": rnd(None if alone_busy is None else 100 * alone_busy),
                               "gpu_seconds": al["gpu_seconds"].get(alone), "joules": al["joules"].get(alone),
                               "watts": al["watts"].get(alone)}
        over = sh["gpu_seconds_over_busy"]
        # The "MEASURED within 3 points of the steps/s shares": the
        # splits, since one training alone does not keep the GPU busy.
        asserts = {"measured_split_within_3pp": all(j["split_error_pp"] is not None and abs(j["split_error_pp"]) <= 3
                                                    for j in jobs.values()),
                   "gpu_seconds_within_5pct_of_busy": over is not None and abs(over - 1) <= 0.05,
                   "energy_adds_up": all(result[w]["adds_up"] for w in ("idle", "shared", "alone"))}
        result["asserts"] = asserts
        result["ok"] = all(asserts.values())

        f = (lambda x, p=1: "-" if x is None else f"{x:.{p}f}")
        cols = [("target %", "target_pct", 0), ("steps/s", "steps_per_s", 2), ("% of alone", "pct_of_alone", 1),
                ("split %", "split", 1), ("MEASURED %", "measured", 1), ("MEASURED split %", "measured_split", 1),
                ("error pp", "error_pp", 1), ("split err pp", "split_error_pp", 1), ("implied %", "implied_pct", 1),
                ("GPU-s", "gpu_seconds", 2), ("J", "joules", 0), ("W", "watts", 1)]
        table += ["| job | " + " | ".join(h for h, _, _ in cols) + " |", "|---" * (len(cols) + 1) + "|"]
        table += [f"| {job} | " + " | ".join(f(j.get(k), p) for _, k, p in cols) + " |"
                  for job, j in [*jobs.items(), (f"{alone} alone", result["alone_job"])]]
        for name in ("idle", "shared", "alone"):
            w, vj = result[name], sum(result[name]["joules"].values())
            table.append(f"{name} ({w['wall_s']} s): GPU-s sum {f(w['gpu_seconds_sum'], 2)} vs busy {f(w['busy_s'], 2)}"
                         f" (ratio {f(w['gpu_seconds_over_busy'], 3)}); vGPUs {f(vj, 1)} J + idle {w['idle_joules']} J"
                         f" = {f(vj + w['idle_joules'], 1)} J vs device {w['device_joules']} J (adds up: {w['adds_up']});"
                         f" nvidia-smi {w['smi_joules']} J")
    finally:
        (OUT / "share_meter.json").write_text(json.dumps(result, indent=1))
        for p in procs.values():
            try:
                os.killpg(p.pid, signal.SIGKILL)  # gpuslice run and its training, if still there
            except OSError:
                pass
        for p in [*procs.values(), *([top.proc] if top else []), power.proc]:
            if p.poll() is None:
                p.kill()
            p.wait(timeout=10)
        daemon.send_signal(signal.SIGTERM)
        try:
            daemon.wait(timeout=30)
        except subprocess.TimeoutExpired:
            daemon.kill()
            daemon.wait(timeout=10)
        daemon_log.close()
        shutil.rmtree(work, ignore_errors=True)
    print("\n".join(table))
    failed = [k for k, v in result.get("asserts", {}).items() if not v]
    print(("PASS" if result["ok"] else "FAIL") + " share_meter" + (": failed " + ", ".join(failed) if failed else ""))
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
