"""Does the runlist's interleave level shorten an LC's wait beside several
busy best-effort vGPUs? A probe, on a real GPU.

Beside one busy BE, an LC waits for the rest of the BE's slice and a switch.
Beside two or more, the policy gives each BE a longer slice (two busy groups
at the tiny slice starve each other, docs/gpu-facts.md), and the LC's p99
was about two BE slices (2.6 ms beside two GPU-bound BEs at 1000 us: runs
32-38). If the GPU walks its runlist in order, the LC waits for every busy
group ahead of it, not just the running one. RM's SET_INTERLEAVE_LEVEL puts a
HIGH channel group in the runlist once per lower one; it needs privilege,
which RM reads from the caller at each ioctl, so a root process may set it on
a tenant's group through a duplicate of the tenant's descriptor (pidfd_getfd),
as the daemon's slice audit reads slices.

BE_COUNT (2) `lc_be be` loads (back-to-back ~20 ms kernels), each in its own
BE vGPU (`gpuslice run --priority be`); then, one after the other, the tiny
LC (`lc_be lc`: a ~50 us kernel every 5 ms) in an LC vGPU for LC_S (6) s per
variant of VARIANTS ("none,high,none,high,below,below"):
  none   nothing set: every group at the driver's default level
  high   this process sets the LC's compute group HIGH
  below  this process sets every BE's compute group LOW (the LC untouched)
Each LC is made, its compute group set as its variant says and read back
(GET_INTERLEAVE_LEVEL), and only then does it start its requests (GO_FILE).
Also read: every group's level before anything is set.

    bash bench/gpu/with_bundle.sh env OUT=/tmp/out python3 bench/gpu/compute/interleave_probe.py

Writes $OUT/interleave_probe.json.
"""
import ctypes
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "audit"))
from reschedule_own_tsg import GPUSLICE, control  # noqa: E402

OUT = Path(os.environ.get("OUT", "/tmp/gpuslice-interleave"))
LC_BE = os.environ.get("LC_BE", str(HERE.parents[2] / "build/bench-compute/lc_be"))
BE_COUNT = int(os.environ.get("BE_COUNT", "2"))
LC_S = float(os.environ.get("LC_S", "6"))
VARIANTS = os.environ.get("VARIANTS", "none,high,none,high,below,below").split(",")

GET_TIMESLICE = 0xA06C0104
SET_LEVEL, GET_LEVEL = 0xA06C0107, 0xA06C0108  # NVA06C_CTRL_CMD_{SET,GET}_INTERLEAVE_LEVEL
LOW, MEDIUM, HIGH = 0, 1, 2
SYS_PIDFD_GETFD = 438  # x86-64
COMPUTE_LINE = re.compile(r"gpuslice\[(\d+)\] info: timeslice of channel group (0x[0-9a-f]+) set to (\d+) us "
                          r"\(client (0x[0-9a-f]+), fd (\d+)\)")


class Group:
    """A process's compute channel group, reached through a duplicate of its
    RM descriptor."""

    def __init__(self, libc, log, deadline):
        m = None
        while m is None and time.time() < deadline:
            m = COMPUTE_LINE.search(log.read_text())
            time.sleep(0.05)
        if m is None:
            raise RuntimeError(f"{log} never logged a compute channel group")
        self.pid, self.tsg, self.client = int(m[1]), int(m[2], 16), int(m[4], 16)
        self.libc = libc
        self.fd = libc.syscall(SYS_PIDFD_GETFD, os.pidfd_open(self.pid), int(m[5]), 0)
        if self.fd < 0:
            raise RuntimeError(f"pidfd_getfd: errno {ctypes.get_errno()}")

    def level(self):
        r = control(self.libc, True, self.fd, self.client, self.tsg, GET_LEVEL, 0, size=4)
        return r["value"] & 0xFFFFFFFF if r["status"] == "0x0" else r["status"]

    def set_level(self, level):
        return control(self.libc, True, self.fd, self.client, self.tsg, SET_LEVEL, level, size=4)["status"]

    def slice_us(self):
        r = control(self.libc, True, self.fd, self.client, self.tsg, GET_TIMESLICE, 0)
        return r["value"] if r["status"] == "0x0" else r["status"]


def main():
    OUT.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="gpuslice-interleave-"))
    env = {**os.environ, "GPUSLICE_LOG": "info", "GPUSLICE_STATE_DIR": str(work / "state")}
    libc = ctypes.CDLL(None, use_errno=True)
    stop = work / "stop"
    bes, result = [], {"be_count": BE_COUNT, "lc_s": LC_S, "variants": [], "driver": smi("driver_version"),
                       "gpu": smi("name")}
    try:
        # Alone first: its kernel's length (LC_ITERS) for every later LC, and
        # the latency to hold the others against.
        alone = run_lc(libc, env, work, "alone", "none", [], {})
        result["alone"] = alone
        print(json.dumps(alone), flush=True)
        env["LC_ITERS"] = str(alone["iters"])
        for i in range(BE_COUNT):
            log, ready = work / f"be{i}.log", work / f"be{i}.ready"
            p = subprocess.Popen([*GPUSLICE.split(), "run", "--priority", "be", "--name", f"be{i}", "--", LC_BE, "be",
                                  "600", str(work / f"be{i}.json")],
                                 env={**env, "READY_FILE": str(ready), "STOP_FILE": str(stop)},
                                 stdout=subprocess.DEVNULL, stderr=open(log, "w"))
            bes.append((p, log, ready))
        deadline = time.time() + 60
        for _, _, ready in bes:
            while not ready.exists() and time.time() < deadline:
                time.sleep(0.05)
        be_groups = [Group(libc, log, deadline) for _, log, _ in bes]
        defaults = [g.level() for g in be_groups]
        result["be_default_levels"] = defaults
        for n, variant in enumerate(VARIANTS):
            result["variants"].append(run_lc(libc, env, work, n, variant, be_groups, defaults))
            print(json.dumps(result["variants"][-1]), flush=True)
    finally:
        stop.touch()
        for p, _, _ in bes:
            try:
                p.wait(timeout=60)
            except subprocess.TimeoutExpired:
                p.kill()
        (OUT / "interleave_probe.json").write_text(json.dumps(result, indent=1))


def run_lc(libc, env, work, n, variant, be_groups, be_defaults):
    log, ready, go, out = (work / f"lc{n}.{x}" for x in ("log", "ready", "go", "json"))
    p = subprocess.Popen([*GPUSLICE.split(), "run", "--priority", "lc", "--name", f"lc{n}", "--", LC_BE, "lc",
                          str(LC_S), str(out)],
                         env={**env, "READY_FILE": str(ready), "GO_FILE": str(go)},
                         stdout=subprocess.DEVNULL, stderr=open(log, "w"))
    r = {"variant": variant}
    try:
        deadline = time.time() + 60
        while not ready.exists() and time.time() < deadline:
            time.sleep(0.01)
        lc = Group(libc, log, deadline)
        time.sleep(0.5)  # past libcuda's own slice set and the BEs' move to their slice beside the LC
        r["lc_default_level"] = lc.level()
        if variant == "high":
            r["set"] = lc.set_level(HIGH)
        elif variant == "below":
            r["set"] = [g.set_level(LOW) for g in be_groups]
        r["lc_level"] = lc.level()
        r["be_levels"] = [g.level() for g in be_groups]
        r["be_slices_us"] = [g.slice_us() for g in be_groups]
        r["lc_slice_us"] = lc.slice_us()
        go.touch()
        p.wait(timeout=LC_S + 60)
        r.update({k: v for k, v in json.loads(out.read_text()).items() if k in ("n", "p50_us", "p90_us", "p99_us",
                                                                              "max_us", "kernel_us", "iters")})
    finally:
        if p.poll() is None:
            p.kill()
    if variant == "below":  # back to the default (MEDIUM where GET is not supported) for what follows
        r["reset"] = [g.set_level(level if isinstance(level, int) else MEDIUM) for g, level in zip(be_groups, be_defaults)]
    return r


def smi(field):
    try:
        return subprocess.run(["nvidia-smi", f"--query-gpu={field}", "--format=csv,noheader"], capture_output=True,
                              text=True, timeout=30).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None


if __name__ == "__main__":
    main()
