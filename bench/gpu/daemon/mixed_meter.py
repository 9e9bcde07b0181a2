"""The meter on a GPU shared by *different* jobs (issue 15): a daemon; each
job alone in its vGPU for ALONE_S s; then all of them together at their
shares (SHARES) for PHASE_S s, with `gpuslice top --json` every second.

Different jobs have no common steps/s, so the reference for each job's GPU
time together is what it did: its steps together times its GPU time per step
alone (nvidia-smi's busy fraction alone over its steps/s alone): `implied`.
That reference assumes a step costs the same GPU time shared as alone, which
it does not quite (sharing adds context switches and cold caches: three
copies of one training took 15.1 ms of busy time per step together against
11.3 alone, docs/benchmarks.md). So the implied split is a yardstick, and
both figures are reported.

Figures ($OUT/mixed_meter.json; top's frames in $OUT/share_meter_top.jsonl):
per job, alone: steps/s, busy fraction, the meter's GPU-seconds over busy
time; together: steps/s, % of alone, implied GPU-s and split, the meter's
GPU-s and split, top's MEASURED split, and their errors in points; the
window's GPU-s sum over busy time.

    bash bench/gpu/with_bundle.sh env OUT=/tmp/out python3 bench/gpu/daemon/mixed_meter.py

Knobs: OUT, GPUSLICE_CMD/GPUSLICE_BIN, PYTHON, BENCH_GPU (0), KINDS
("gpu,launch,mem": the workload matrix's BE jobs, bench/gpu/matrix), SHARES
("20,30,50"), ALONE_S (10), PHASE_S (20). About 3 minutes at the defaults.
"""
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from power_cap import metrics_port, start_daemon  # noqa: E402
from share_meter import TopLog, scrape, usage  # noqa: E402
from usage_energy import PowerLog, wait_for  # noqa: E402

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[2]
OUT = Path(os.environ.get("OUT", "/tmp/gpuslice-mixed-meter"))
GPUSLICE = os.environ.get("GPUSLICE_CMD", os.environ.get("GPUSLICE_BIN", str(ROOT / "build/bin/gpuslice"))).split()
PYTHON = os.environ.get("PYTHON", sys.executable)
GPU = os.environ.get("BENCH_GPU", "0")
KINDS = [k.strip() for k in os.environ.get("KINDS", "gpu,launch,mem").split(",")]
SHARES = [s.strip() for s in os.environ.get("SHARES", "20,30,50").split(",")]
ALONE_S = float(os.environ.get("ALONE_S", "10"))
PHASE_S = float(os.environ.get("PHASE_S", "20"))
SETTLE_S = 3.0


def job_command(kind, out):
    if kind == "gpu":
        return [PYTHON, str(ROOT / "bench/gpu/compute/train.py"), "900", str(out)]
    return [PYTHON, str(ROOT / "bench/gpu/matrix/be_load.py"), kind, "900", str(out)]


def main():
    if len(KINDS) != len(SHARES):
        sys.exit("KINDS and SHARES must name as many jobs")
    OUT.mkdir(parents=True, exist_ok=True)
    power = PowerLog()
    power.start()
    work, env, daemon = start_daemon("gs-mixed-", OUT / "mixed_meter_daemon.log")
    jobs = [f"{k}-{i}" for i, k in enumerate(KINDS)]
    procs, top, result = {}, None, {"kinds": dict(zip(jobs, KINDS)), "shares": dict(zip(jobs, SHARES)),
                                    "wall_minus_monotonic": time.time() - time.monotonic()}

    def start(job, kind, share, tag):
        files = {n: work / f"{job}.{tag}.{n}" for n in ("json", "ready", "stop")}
        p = subprocess.Popen([*GPUSLICE, "run", "--gpu", GPU, "--name", job, "--compute", share, "--",
                              *job_command(kind, files["json"])],
                             env={**env, "READY_FILE": str(files["ready"]), "STOP_FILE": str(files["stop"])},
                             stdout=open(OUT / f"mixed_meter_{job}.{tag}.log", "w"), stderr=subprocess.STDOUT,
                             start_new_session=True)
        return p, files

    def stop(started):
        for _, files in started.values():
            open(files["stop"], "w").close()
        ends = {}
        for job, (p, files) in started.items():
            p.wait(timeout=120)
            if p.returncode != 0:
                sys.exit(f"{job} exited with {p.returncode} ({OUT}/mixed_meter_{job}.*.log)")
            ends[job] = json.loads(files["json"].read_text())["step_ends"]
        return ends

    def rate(ends, w):
        return sum(1 for e in ends if w["t0"] <= e <= w["t1"]) / (w["t1"] - w["t0"])

    try:
        port = metrics_port(work, daemon, OUT / "mixed_meter_daemon.log")

        def window(seconds):
            t0, m0 = time.monotonic(), scrape(port)
            time.sleep(seconds)
            return usage(power, t0, m0, time.monotonic(), scrape(port))

        alone = {}
        for job, kind, share in zip(jobs, KINDS, SHARES):
            procs = {job: start(job, kind, share, "alone")}
            wait_for(procs[job][1]["ready"], 180, f"{job} warm-up", [procs[job][0], daemon])
            time.sleep(SETTLE_S)
            w = window(ALONE_S)
            ends = stop(procs)[job]
            procs = {}
            steps = rate(ends, w)
            busy = w["smi_utilization_gpu"]
            alone[job] = {"steps_per_s": round(steps, 3), "busy": busy,
                          "gpu_s_per_step": busy / steps if steps and busy is not None else None,
                          "meter_gpu_seconds": w["gpu_seconds"].get(job), "busy_s": w["busy_s"],
                          "meter_over_busy": round(w["gpu_seconds"].get(job, 0) / w["busy_s"], 3) if w["busy_s"] else None}
            print("alone", job, json.dumps(alone[job]), flush=True)
            time.sleep(2)  # the next window begins with no GPU time of this job left in the meter's recent frames
        result["alone"] = alone

        procs = {job: start(job, kind, share, "shared") for job, kind, share in zip(jobs, KINDS, SHARES)}
        for job in jobs:
            wait_for(procs[job][1]["ready"], 180, f"{job} warm-up", [p for p, _ in procs.values()] + [daemon])
        top = TopLog(env)
        top.start()
        time.sleep(SETTLE_S)
        sh = window(PHASE_S)
        ends = stop(procs)
        procs = {}
        shared = {}
        for job in jobs:
            steps = rate(ends[job], sh)
            a = alone[job]
            implied = steps * (sh["t1"] - sh["t0"]) * a["gpu_s_per_step"] if a["gpu_s_per_step"] else None
            m, frames = top.mean(job, sh["t0"] + SETTLE_S, sh["t1"])
            shared[job] = {"steps_per_s": round(steps, 3),
                           "pct_of_alone": round(100 * steps / a["steps_per_s"], 1) if a["steps_per_s"] else None,
                           "implied_gpu_seconds": None if implied is None else round(implied, 2),
                           "meter_gpu_seconds": sh["gpu_seconds"].get(job), "measured": None if m is None else round(m, 1),
                           "measured_frames": frames}

        def split(key):
            vals = {j: s[key] for j, s in shared.items() if s[key] is not None}
            total = sum(vals.values())
            return {j: round(100 * v / total, 1) for j, v in vals.items()} if total else {}

        implied_split, meter_split, top_split = split("implied_gpu_seconds"), split("meter_gpu_seconds"), split("measured")
        for job in jobs:
            s = shared[job]
            s["implied_split"], s["meter_split"], s["measured_split"] = (
                implied_split.get(job), meter_split.get(job), top_split.get(job))
            s["meter_split_error_pp"] = (None if s["meter_split"] is None or s["implied_split"] is None
                                         else round(s["meter_split"] - s["implied_split"], 1))
            s["measured_split_error_pp"] = (None if s["measured_split"] is None or s["implied_split"] is None
                                            else round(s["measured_split"] - s["implied_split"], 1))
        result["shared"] = shared
        result["shared_window"] = sh
        total_implied = sum(s["implied_gpu_seconds"] or 0 for s in shared.values())
        result["implied_over_busy"] = round(total_implied / sh["busy_s"], 3) if sh["busy_s"] else None

        print("| job | share | alone steps/s | busy alone | together % of alone | implied split | meter split | "
              "MEASURED split | meter err pp | MEASURED err pp |")
        print("|---|---|---|---|---|---|---|---|---|---|")
        for job, share in zip(jobs, SHARES):
            a, s = alone[job], shared[job]
            print(f"| {job} | {share} | {a['steps_per_s']} | {a['busy']:.2f} | {s['pct_of_alone']} | "
                  f"{s['implied_split']} | {s['meter_split']} | {s['measured_split']} | {s['meter_split_error_pp']} | "
                  f"{s['measured_split_error_pp']} |")
        print(f"shared window: GPU-s sum {sh['gpu_seconds_sum']} / busy {sh['busy_s']} = {sh['gpu_seconds_over_busy']};"
              f" implied GPU-s / busy {result['implied_over_busy']}")
    finally:
        (OUT / "mixed_meter.json").write_text(json.dumps(result, indent=1))
        for p, _ in procs.values():
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except OSError:
                pass
        for p in [*([top.proc] if top else []), power.proc]:
            if p.poll() is None:
                p.kill()
        daemon.send_signal(signal.SIGTERM)
        try:
            daemon.wait(timeout=30)
        except subprocess.TimeoutExpired:
            daemon.kill()
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
