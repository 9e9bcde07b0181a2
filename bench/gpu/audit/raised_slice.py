"""A hostile best-effort tenant beside an LC, through the daemon (issue 10):
the tenant raises its own compute channel group's slice to 4 s with the raw
system call every 20 ms, which the library's hook never sees and whose
read-back it outpaces. The daemon's slice audit (src/daemon/slice_audit.h)
sets the slice back through the tenant's own descriptor and kills the
process that raises it again.

Cases, each on a fresh daemon (audit.raised_slice in its config):
  honest  the same BE, not raising (audit on): the baseline
  honest_off  the same, the slice audit off: what its reads cost
  off     raising, audit off: what the hole costs the LC
  report  raising, the daemon sets the slice back every pass, acts on nothing
  kill    raising, the default: set back, then killed
The LC is lc_be's synthetic one (a ~50 µs kernel at 200 req/s, LC_S s),
started once the BE has begun raising; the BE a PyTorch loop of large
matmuls. Each case gives the LC's p50/p99, the BE's exit status, and how
long after its first raise the daemon killed it. RAISE_AFTER_S=S: the BE
starts raising S seconds into the LC's window instead, so that the LC's
figures include the whole exposure before the kill.

    bash bench/gpu/with_bundle.sh env OUT=/tmp/out python3 bench/gpu/audit/raised_slice.py

Writes $OUT/raised_slice.json and the daemons' and children's logs.
"""
import ctypes
import datetime
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
OUT = Path(os.environ.get("OUT", "/tmp/gpuslice-raised-slice"))
GPUSLICE = os.environ.get("GPUSLICE_CMD", os.environ.get("GPUSLICE_BIN", str(HERE.parents[2] / "build/bin/gpuslice")))
GPUSLICE_BIN = os.environ.get("GPUSLICE_BIN", str(HERE.parents[2] / "build/bin/gpuslice"))
DEPS = HERE.parents[2] / ".device/bundle/deps"
LC_BE = os.environ.get("LC_BE", str(HERE.parents[2] / "build/bench-compute/lc_be"))
LC_S = float(os.environ.get("LC_S", "8"))
CASES = os.environ.get("CASES", "honest,off,report,kill").split(",")
RAISED_US = 4_000_000
sys.path.insert(0, str(HERE))
from reschedule_own_tsg import RM_CONTROL, SET_TIMESLICE, SYS_IOCTL, Nvos54  # noqa: E402

RAISE_AFTER_S = float(os.environ["RAISE_AFTER_S"]) if os.environ.get("RAISE_AFTER_S") else None


def tenant():
    """The BE: large matmuls back to back; with RAISE=1, a thread raising the
    compute group's slice by the raw system call every 20 ms."""
    log = Path(os.environ["LOG_FILE"])
    os.dup2(os.open(log, os.O_WRONLY | os.O_APPEND), 2)  # the library's info log, from here on
    import torch
    x = torch.randn(8192, 8192, device="cuda", dtype=torch.float16)
    step = lambda: x @ x  # noqa: E731
    torch.cuda.synchronize()
    found, deadline = None, time.time() + 20
    while found is None and time.time() < deadline:
        m = re.findall(r"timeslice of channel group (0x[0-9a-f]+) set to \d+ us \(client (0x[0-9a-f]+), fd (\d+)\)",
                       log.read_text())
        found = m[0] if m else None
        step()
        torch.cuda.synchronize()
    stop = Path(os.environ["STOP_FILE"])
    raises = [0]
    if os.environ.get("RAISE") == "1" and found:
        tsg, client, fd = int(found[0], 16), int(found[1], 16), int(found[2])
        libc = ctypes.CDLL(None, use_errno=True)

        def raise_forever():
            go = Path(os.environ["GO_FILE"]) if os.environ.get("GO_FILE") else None
            while go is not None and not go.exists() and not stop.exists():
                time.sleep(0.005)
            while not stop.exists():
                v = ctypes.c_uint64(RAISED_US)
                c = Nvos54(client, tsg, SET_TIMESLICE, 0, ctypes.addressof(v), 8, 0)
                if libc.syscall(SYS_IOCTL, fd, ctypes.c_ulong(RM_CONTROL), ctypes.byref(c)) == 0 and c.status == 0:
                    if raises[0] == 0:
                        Path(os.environ["RAISED_FILE"]).write_text(f"{time.monotonic()} {time.time()}")
                    raises[0] += 1
                time.sleep(0.02)
        threading.Thread(target=raise_forever, daemon=True).start()
    Path(os.environ["READY_FILE"]).write_text(json.dumps({"group_found": found is not None}))
    steps, t0 = 0, time.monotonic()
    while not stop.exists():
        for _ in range(8):
            step()
        torch.cuda.synchronize()
        steps += 8
    print(json.dumps({"steps_per_s": steps / (time.monotonic() - t0), "raises": raises[0]}))


def wait_for(path, proc, timeout):
    end = time.monotonic() + timeout
    while not path.exists():
        if proc.poll() is not None or time.monotonic() > end:
            return False
        time.sleep(0.05)
    return True


def run_case(case):
    work = OUT / case
    work.mkdir(parents=True, exist_ok=True)
    state = tempfile.mkdtemp(prefix="gpuslice-raised-")
    cfg = work / "config.yaml"
    if case == "honest_off":  # the slice audit off: what reading every group each second costs an honest pair
        cfg.write_text("version: 1\naudit:\n  raised_slice: off\n  hidden_groups: off\n")
    else:
        cfg.write_text(f"version: 1\naudit:\n  raised_slice: {'kill' if case == 'honest' else case}\n")
    denv = {**os.environ, "GPUSLICE_STATE_DIR": state + "/state"}
    if DEPS.is_dir():
        denv["LD_LIBRARY_PATH"] = str(DEPS)
    daemon = subprocess.Popen([GPUSLICE_BIN, "daemon", "--config", str(cfg)], env=denv,
                              stdout=open(work / "daemon.log", "w"), stderr=subprocess.STDOUT)
    env = {**os.environ, "GPUSLICE_STATE_DIR": state + "/state", "GPUSLICE_LOG": "info", "CUDA_VISIBLE_DEVICES": "0"}
    result = {"case": case}
    be = lc = None
    try:
        sock = Path(state) / "state/gpuslice.sock"
        for _ in range(300):
            if sock.exists():
                break
            time.sleep(0.1)
        ready, stop, raised, go = work / "be.ready", work / "be.stop", work / "be.raised", work / "be.go"
        for f in (ready, stop, raised, go):
            f.unlink(missing_ok=True)
        benv = {**env, "TENANT": "1", "LOG_FILE": str(work / "be-library.log"), "READY_FILE": str(ready),
                "STOP_FILE": str(stop), "RAISED_FILE": str(raised), "RAISE": "0" if case.startswith("honest") else "1",
                "GO_FILE": str(go) if RAISE_AFTER_S is not None else ""}
        (work / "be-library.log").write_text("")
        be = subprocess.Popen([*GPUSLICE.split(), "run", "--name", "be", "--priority", "be", "--", sys.executable,
                               __file__], env=benv, stdout=subprocess.PIPE, stderr=open(work / "be.log", "w"),
                              text=True)
        if not wait_for(ready, be, 90):
            result["error"] = "the BE did not start"
            return result
        result["be_ready"] = json.loads(ready.read_text())
        t_lc = time.monotonic()
        lc_out = work / "lc.json"
        lc = subprocess.Popen([*GPUSLICE.split(), "run", "--name", "lc", "--priority", "lc", "--", LC_BE, "lc",
                               str(LC_S), str(lc_out)], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        if RAISE_AFTER_S is not None:
            time.sleep(RAISE_AFTER_S)  # a benchmark's pacing, not a synchronisation
            go.touch()
        result["lc_rc"] = lc.wait(timeout=LC_S + 60)
        if lc_out.exists():
            r = json.loads(lc_out.read_text())
            result["lc"] = {k: r.get(k) for k in ("n", "p50_us", "p90_us", "p99_us", "max_us")}
        stop.touch()
        out, _ = be.communicate(timeout=60)
        result["be_rc"] = be.returncode
        try:
            result["be"] = json.loads(out.strip().splitlines()[-1])
        except (ValueError, IndexError):
            pass
        if raised.exists():
            mono, wall = map(float, raised.read_text().split())
            result["first_raise_after_lc_start_s"] = mono - t_lc
            result["first_raise_wall"] = wall
    finally:
        for p in (be, lc):
            if p is not None and p.poll() is None:
                p.kill()
        daemon.terminate()
        daemon.wait(timeout=20)
        subprocess.run(["rm", "-rf", state])
    text = (work / "daemon.log").read_text(errors="replace")
    audit = [l for l in text.splitlines() if "slice audit" in l]
    result["audit_lines"] = len(audit)
    result["audit_first_lines"] = audit[:3]
    result["killed"] = any("kill (audit.raised_slice)" in l for l in audit)
    kills = [l for l in audit if "kill (audit.raised_slice)" in l]
    if kills and "first_raise_wall" in result:
        stamp = datetime.datetime.strptime(kills[0].split()[0], "%Y-%m-%dT%H:%M:%S.%f")
        result["killed_after_first_raise_s"] = stamp.timestamp() - result["first_raise_wall"]
    return result


def main():
    if os.environ.get("TENANT"):
        tenant()
        return
    OUT.mkdir(parents=True, exist_ok=True)
    smi = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"],
                         capture_output=True, text=True)
    results = {"gpu": smi.stdout.strip(), "date": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
               "lc_s": LC_S, "raised_us": RAISED_US, "raise_after_s": RAISE_AFTER_S, "cases": []}
    for case in CASES:
        results["cases"].append(run_case(case))
        (OUT / "raised_slice.json").write_text(json.dumps(results, indent=1))
        print(json.dumps(results["cases"][-1]), flush=True)


if __name__ == "__main__":
    main()
