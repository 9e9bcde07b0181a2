"""`gpuslice set` shrinking a running PyTorch job's compute share from 70 to
30, with the effect visible in its throughput within a second; and a
`gpuslice top` capture while two jobs share the GPU.

Starts a `gpuslice daemon` on a fresh state directory, then two training
jobs (steps.py) in two vGPUs through it: A with --compute 70, B with
--compute 30. After PHASE_S seconds of both running: `gpuslice set A
--compute 30` and `gpuslice set B --compute 70`. Runs PHASE_S more seconds.
Meanwhile `gpuslice top --iterations ... --interval-ms 1000` is captured to
$OUT/top.txt (and --json frames to $OUT/top.jsonl).

Figures ($OUT/set_share.json):
  a_share_before / a_share_after   A's fraction of the two jobs' steps per
                                   second (they run the same model), over
                                   the PHASE_S before and after the set
                                   (skipping 1 s after it)
  effect_seconds                   from `set` returning to the first 250 ms
                                   window in which A's share is below the
                                   midpoint of before and after
  set_seconds                      how long each `gpuslice set` took
PASS when A's share fell (before > after + 0.1) and effect_seconds <= 1.

    OUT=/tmp/out GPUSLICE_BIN=build/bin/gpuslice python3 bench/gpu/daemon/set_share.py

GPUSLICE_CMD may carry a loader prefix, as for bench/gpu/compute
(e.g. "/lib64/ld-linux-x86-64.so.2 --library-path DEPS BIN"); PYTHON,
BENCH_GPU (default 0), PHASE_S (default 10), STEPS_SCRIPT are knobs.
"""
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
OUT = Path(os.environ.get("OUT", "/tmp/gpuslice-daemon-gpu"))
GPUSLICE = os.environ.get("GPUSLICE_CMD", os.environ.get("GPUSLICE_BIN", str(HERE.parents[2] / "build/bin/gpuslice")))
PYTHON = os.environ.get("PYTHON", sys.executable)
GPU = os.environ.get("BENCH_GPU", "0")
PHASE_S = float(os.environ.get("PHASE_S", "10"))
# The training load; a stand-in with the same arguments allows a dry run of
# this orchestration without a GPU.
STEPS = os.environ.get("STEPS_SCRIPT", str(HERE / "steps.py"))
WINDOW_S = 0.25


def wait_for(path, timeout, what, procs=()):
    deadline = time.monotonic() + timeout
    while not os.path.exists(path):
        for p in procs:
            if p.poll() is not None:
                sys.exit(f"{what}: a process exited early ({p.args})")
        if time.monotonic() > deadline:
            sys.exit(f"{what}: not within {timeout} s")
        time.sleep(0.05)


def rate(ends, t0, t1):
    return sum(1 for t in ends if t0 <= t < t1) / (t1 - t0)


def main():
    OUT.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="gsd-gpu-", dir="/tmp"))
    env = dict(os.environ, GPUSLICE_STATE_DIR=str(work / "state"), CUDA_VISIBLE_DEVICES=GPU)
    env.pop("GPUSLICE_SOCKET", None)
    daemon_log = open(OUT / "daemon.log", "w")
    daemon = subprocess.Popen([*GPUSLICE.split(), "daemon", "--metrics-address", "127.0.0.1:0"], env=env,
                              stdout=daemon_log, stderr=daemon_log)
    procs, result = [], {"ok": False}
    try:
        wait_for(work / "state" / "gpuslice.sock", 30, "daemon socket", [daemon])
        (OUT / "devices.txt").write_text(subprocess.run([*GPUSLICE.split(), "devices"], env=env, capture_output=True,
                                                        text=True).stdout)
        (OUT / "devices.json").write_text(subprocess.run([*GPUSLICE.split(), "devices", "--json"], env=env,
                                                         capture_output=True, text=True).stdout)
        seconds = 2 * PHASE_S + 60
        for name, share in (("A", "70"), ("B", "30")):
            cmd = [*GPUSLICE.split(), "run", "--gpu", GPU, "--name", f"job-{name}", "--compute", share, "--",
                   PYTHON, STEPS, str(work / f"{name}.json"), str(work / f"{name}.ready"),
                   str(work / "stop"), str(seconds)]
            procs.append(subprocess.Popen(cmd, env=env, stdout=open(OUT / f"job-{name}.log", "w"),
                                          stderr=subprocess.STDOUT))
        for name in ("A", "B"):
            wait_for(work / f"{name}.ready", 180, f"job {name} warm-up", procs)
        top_frames = int(2 * PHASE_S + 2)
        top = subprocess.Popen([*GPUSLICE.split(), "top", "--iterations", str(top_frames), "--interval-ms", "1000"],
                               env=env, stdout=open(OUT / "top.txt", "w"), stderr=subprocess.STDOUT)
        top_json = subprocess.Popen([*GPUSLICE.split(), "top", "--json", "--iterations", str(top_frames),
                                     "--interval-ms", "1000"], env=env, stdout=open(OUT / "top.jsonl", "w"),
                                    stderr=subprocess.DEVNULL)
        both_running = time.monotonic()
        time.sleep(PHASE_S)  # the "before" phase: a measurement window, not a synchronisation
        set_started = time.monotonic()
        set_a = subprocess.run([*GPUSLICE.split(), "set", "job-A", "--compute", "30"], env=env, capture_output=True,
                               text=True)
        set_b = subprocess.run([*GPUSLICE.split(), "set", "job-B", "--compute", "70"], env=env, capture_output=True,
                               text=True)
        set_done = time.monotonic()
        result["set_output"] = [set_a.stdout.strip() or set_a.stderr.strip(), set_b.stdout.strip() or set_b.stderr.strip()]
        time.sleep(PHASE_S)  # the "after" phase
        open(work / "stop", "w").close()
        for p in procs:
            p.wait(timeout=120)
        top.wait(timeout=60)
        top_json.wait(timeout=60)
        a = json.loads((work / "A.json").read_text())["step_ends"]
        b = json.loads((work / "B.json").read_text())["step_ends"]

        def share(t0, t1):
            ra, rb = rate(a, t0, t1), rate(b, t0, t1)
            return ra / (ra + rb) if ra + rb > 0 else float("nan")

        before = share(both_running + 1, set_started)
        after = share(set_done + 1, set_done + PHASE_S)
        midpoint = (before + after) / 2
        effect = None
        t = set_started
        while t < set_done + PHASE_S:
            if share(t, t + WINDOW_S) < midpoint:
                effect = max(0.0, t + WINDOW_S - set_done)
                break
            t += WINDOW_S / 5
        result.update({
            "a_share_before": round(before, 3), "a_share_after": round(after, 3),
            "a_steps_per_s_before": round(rate(a, both_running + 1, set_started), 2),
            "a_steps_per_s_after": round(rate(a, set_done + 1, set_done + PHASE_S), 2),
            "effect_seconds": None if effect is None else round(effect, 3),
            "set_seconds": round(set_done - set_started, 3),
            "set_exit_codes": [set_a.returncode, set_b.returncode],
        })
        result["ok"] = (set_a.returncode == 0 and set_b.returncode == 0 and before > after + 0.1 and
                        effect is not None and effect <= 1.0)
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
        daemon.send_signal(signal.SIGTERM)
        daemon.wait(timeout=30)
        daemon_log.close()
        shutil.rmtree(work, ignore_errors=True)
        (OUT / "set_share.json").write_text(json.dumps(result, indent=1))
    print(("PASS" if result["ok"] else "FAIL") + " set_share: " + json.dumps(result))
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
