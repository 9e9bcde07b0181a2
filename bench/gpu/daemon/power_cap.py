"""A power cap on a real GPU (issue 15; docs/design.md, "Power caps"): a
daemon, one GPU-bound job (lc_be be: back-to-back ~20 ms kernels) in vGPU
`hot`, uncapped for WINDOW_S; then `gpuslice set hot --power-cap W` with W half
the watts attributed to it uncapped, SETTLE_S for the controller, and WINDOW_S
capped; then `--power-cap none` and WINDOW_S again.

Per window ($OUT/power_cap.json): the vGPU's attributed watts (the growth of
gpuslice_vgpu_energy_joules_total over the window), the device's watts
(gpuslice_gpu_energy_joules_total) and nvidia-smi's power.draw mean, the
budget in force (gpuslice_vgpu_power_budget_ratio), and the job's kernels/s.
PASS when the capped window's attributed watts are at most the cap plus 5%
and at least 70% of it (the controller holds the cap without starving the
job), and the uncapped ones come back.

    bash bench/gpu/with_bundle.sh env OUT=/tmp/out python3 bench/gpu/daemon/power_cap.py
"""
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from usage_energy import PowerLog, wait_for  # noqa: E402

HERE = Path(__file__).resolve().parent
OUT = Path(os.environ.get("OUT", "/tmp/gpuslice-power-cap"))
GPUSLICE = os.environ.get("GPUSLICE_CMD", str(HERE.parents[2] / "build/bin/gpuslice")).split()
LC_BE = os.environ.get("LC_BE", str(HERE.parents[2] / "build/bench-compute/lc_be"))
GPU = os.environ.get("BENCH_GPU", "0")
WINDOW_S = float(os.environ.get("WINDOW_S", "10"))
SETTLE_S = float(os.environ.get("SETTLE_S", "15"))


def scrape(port):
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
        text = r.read().decode()
    out = {}
    for line in text.splitlines():
        m = re.match(r"(gpuslice_[a-z_]+)\{(.*)\} (\S+)$", line)
        if m:
            labels = dict(re.findall(r'(\w+)="([^"]*)"', m.group(2)))
            out[(m.group(1), labels.get("vgpu", "-"))] = float(m.group(3))
    return out


def daemon_command():
    """The daemon as its own binary (it re-executes itself to start its state
    keeper, which the loader prefix of GPUSLICE_CMD would break), with the
    bundle's libraries when there is one."""
    binary = os.environ.get("GPUSLICE_BIN")
    deps = HERE.parents[2] / ".device/bundle/deps"
    if binary and deps.is_dir():
        return [binary, "daemon", "--metrics-address", "127.0.0.1:0"], {"LD_LIBRARY_PATH": str(deps)}
    return [*GPUSLICE, "daemon", "--metrics-address", "127.0.0.1:0"], {}


def start_daemon(prefix, log_path, args=()):
    """A daemon on GPU in a fresh state directory, with `args` added to its
    command line: (work dir, the env its clients need, the process). Its log
    goes to `log_path`; wait for its socket, work / "state" /
    "gpuslice.sock", before using it."""
    work = Path(tempfile.mkdtemp(prefix=prefix, dir="/tmp"))
    env = dict(os.environ, GPUSLICE_STATE_DIR=str(work / "state"), CUDA_VISIBLE_DEVICES=GPU)
    command, extra = daemon_command()
    log = open(log_path, "w")
    return work, env, subprocess.Popen([*command, *args], env={**env, **extra}, stdout=log, stderr=log)


def metrics_port(work, daemon, log_path):
    """Waits for the daemon of `work` (start_daemon) to serve; its metrics
    port, from the line it logs (`--metrics-address 127.0.0.1:0`)."""
    wait_for(work / "state" / "gpuslice.sock", 30, f"daemon socket ({log_path})", [daemon])
    time.sleep(1)  # the socket answers before the last log line is written
    found = re.search(r"metrics on http://127\.0\.0\.1:(\d+)/", Path(log_path).read_text())
    if not found:
        sys.exit(f"no metrics port in {log_path}")
    return int(found.group(1))


def main():
    OUT.mkdir(parents=True, exist_ok=True)
    work, env, daemon = start_daemon("gs-power-", OUT / "daemon.log")
    power = PowerLog()
    power.start()
    job, result = None, {"ok": False}
    try:
        port = metrics_port(work, daemon, OUT / "daemon.log")
        job = subprocess.Popen([*GPUSLICE, "run", "--gpu", GPU, "--name", "hot", "--", LC_BE, "be", "600",
                                str(work / "be.json")],
                               env={**env, "STOP_FILE": str(work / "stop")}, stdout=open(OUT / "job.log", "w"),
                               stderr=subprocess.STDOUT)
        time.sleep(8)  # start-up and calibration

        def window(name):
            t0, m0 = time.monotonic(), scrape(port)
            time.sleep(WINDOW_S)
            t1, m1 = time.monotonic(), scrape(port)
            dt = t1 - t0
            d = {k: m1[k] - m0.get(k, 0.0) for k in m1}
            smi = [w for t, w, _ in power.samples if t0 <= t <= t1]
            result[name] = {
                "wall_s": round(dt, 2),
                "vgpu_watts": round(d.get(("gpuslice_vgpu_energy_joules_total", "hot"), 0) / dt, 1),
                "device_watts": round(sum(v for (n, _), v in d.items() if n == "gpuslice_gpu_energy_joules_total")
                                      / dt, 1),
                "smi_watts": round(sum(smi) / len(smi), 1) if smi else None,
                "gpu_seconds_per_s": round(d.get(("gpuslice_vgpu_gpu_seconds_total", "hot"), 0) / dt, 3),
                "budget_ratio": m1.get(("gpuslice_vgpu_power_budget_ratio", "hot")),
                "t0": t0, "t1": t1}
            print(name, json.dumps(result[name]), flush=True)

        window("uncapped")
        cap = max(1, round(result["uncapped"]["vgpu_watts"] / 2))
        result["cap_watts"] = cap
        set_out = subprocess.run([*GPUSLICE, "set", "hot", "--power-cap", str(cap)], env=env, capture_output=True,
                                 text=True)
        result["set"] = (set_out.stdout + set_out.stderr).strip()[-300:]
        time.sleep(SETTLE_S)
        window("capped")
        subprocess.run([*GPUSLICE, "set", "hot", "--power-cap", "none"], env=env, capture_output=True)
        time.sleep(SETTLE_S / 3)
        window("uncapped_again")
        open(work / "stop", "w").close()
        job.wait(timeout=60)
        ends = json.load(open(work / "be.json"))["ends"]
        for name in ("uncapped", "capped", "uncapped_again"):
            w = result[name]
            # lc_be's `ends` are its kernels' completion times, CLOCK_MONOTONIC seconds as time.monotonic().
            w["kernels_per_s"] = round(sum(1 for e in ends if w["t0"] <= e <= w["t1"]) / w["wall_s"], 2)
        capped = result["capped"]["vgpu_watts"]
        result["capped_over_cap"] = round(capped / cap, 3)
        result["ok"] = bool(0.7 * cap <= capped <= 1.05 * cap and
                            result["uncapped_again"]["vgpu_watts"] > 1.5 * cap)
    finally:
        if job is not None and job.poll() is None:
            job.kill()
        power.proc.kill()
        daemon.send_signal(signal.SIGTERM)
        daemon.wait(timeout=30)
        (OUT / "power_cap.json").write_text(json.dumps(result, indent=1))
    print(("PASS" if result["ok"] else "FAIL") + " power_cap: " + json.dumps(result))
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
