"""A power cap held by a standalone `gpuslice run` (no daemon) on a real GPU
(issue 15; docs/design.md, "Power caps", its last paragraph): the idle GPU's
power for IDLE_S; one GPU-bound job (lc_be be) in `gpuslice run --name hot`
uncapped for WINDOW_S; then `gpuslice set hot --power-cap W`, W half its
attributed watts uncapped, SETTLE_S for the run's supervisor, and WINDOW_S
capped.

With no daemon there is no /metrics, so the vGPU's attributed watts are
worked out as the meter splits them for a vGPU alone on its GPU: the
device's power (nvidia-smi's power.draw) less the idle line, the idle power
times the part of the window in which nothing ran (1 - utilization.gpu).
The budget in force is read from `gpuslice ls --json`.

$OUT/power_cap_standalone.json. PASS when the capped window's attributed
watts are at most the cap plus 5% and at least 70% of it.

    bash bench/gpu/with_bundle.sh env OUT=/tmp/out python3 bench/gpu/daemon/power_cap_standalone.py
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from power_cap import GPU, GPUSLICE, LC_BE, SETTLE_S, WINDOW_S  # noqa: E402  (the daemon's version's knobs)
from usage_energy import PowerLog  # noqa: E402

OUT = Path(os.environ.get("OUT", "/tmp/gpuslice-power-cap-standalone"))
IDLE_S = float(os.environ.get("IDLE_S", "4"))


def main():
    OUT.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="gs-pcap-", dir="/tmp"))
    env = dict(os.environ, GPUSLICE_STATE_DIR=str(work / "state"), CUDA_VISIBLE_DEVICES=GPU,
               GPUSLICE_SOCKET=str(work / "no-daemon.sock"))
    power = PowerLog()
    power.start()
    job, result = None, {"ok": False}

    def window(name, seconds):
        t0 = time.monotonic()
        time.sleep(seconds)
        t1 = time.monotonic()
        pts = [(w, u) for t, w, u in power.samples if t0 <= t <= t1]
        watts = sum(w for w, _ in pts) / len(pts) if pts else None
        util = sum(u for _, u in pts) / len(pts) / 100 if pts else None
        result[name] = {"t0": t0, "t1": t1, "smi_watts": None if watts is None else round(watts, 1),
                        "utilization": None if util is None else round(util, 3)}
        return result[name]

    def budget():
        r = subprocess.run([*GPUSLICE, "ls", "--json", "hot"], env=env, capture_output=True, text=True)
        try:
            v = json.loads(r.stdout)["vgpus"][0]
            dev = v["devices"][0]
            return {"power_cap_watts": v.get("power_cap_watts"),
                    **{k: dev.get(k) for k in ("effective_compute_cap_pct", "power_budget_pct")}}
        except (ValueError, LookupError):
            return {"ls": (r.stdout + r.stderr)[-300:]}

    try:
        time.sleep(1)
        idle = window("idle", IDLE_S)["smi_watts"]
        job = subprocess.Popen([*GPUSLICE, "run", "--gpu", GPU, "--name", "hot", "--", LC_BE, "be", "600",
                                str(work / "be.json")], env={**env, "STOP_FILE": str(work / "stop")},
                               stdout=open(OUT / "standalone_job.log", "w"), stderr=subprocess.STDOUT)
        time.sleep(8)  # start-up and calibration

        def attributed(w):
            return round(w["smi_watts"] - idle * (1 - w["utilization"]), 1)

        unc = window("uncapped", WINDOW_S)
        unc["attributed_watts"] = attributed(unc)
        cap = max(1, round(unc["attributed_watts"] / 2))
        result["cap_watts"] = cap
        s = subprocess.run([*GPUSLICE, "set", "hot", "--power-cap", str(cap)], env=env, capture_output=True,
                           text=True)
        result["set"] = (s.stdout + s.stderr).strip()[-300:]
        time.sleep(SETTLE_S)
        cap_w = window("capped", WINDOW_S)
        cap_w["attributed_watts"] = attributed(cap_w)
        cap_w["budget"] = budget()
        open(work / "stop", "w").close()
        job.wait(timeout=60)
        ends = json.load(open(work / "be.json"))["ends"]
        for name in ("uncapped", "capped"):
            w = result[name]
            w["kernels_per_s"] = round(sum(1 for e in ends if w["t0"] <= e <= w["t1"]) / (w["t1"] - w["t0"]), 2)
        result["capped_over_cap"] = round(cap_w["attributed_watts"] / cap, 3)
        result["ok"] = 0.7 * cap <= cap_w["attributed_watts"] <= 1.05 * cap
    finally:
        if job is not None and job.poll() is None:
            job.kill()
            job.wait(timeout=10)
        power.proc.kill()
        (OUT / "power_cap_standalone.json").write_text(json.dumps(result, indent=1))
        shutil.rmtree(work, ignore_errors=True)
    print(("PASS" if result["ok"] else "FAIL") + " power_cap_standalone: " + json.dumps(result))
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
