"""Can a node daemon read and set a tenant's channel-group slices from
outside the tenant's process? (Issue 11: the raw-syscall bypass needs an
audit the tenant cannot stop.) A probe, on a real GPU:

  1. a PyTorch process runs under `gpuslice run --compute 30`, keeps the GPU
     busy, and its library logs its compute channel group, RM client and
     descriptor;
  2. this process (root) duplicates that descriptor with pidfd_getfd and
     issues GET_TIMESLICE on the tenant's client and channel group;
  3. the tenant sets a 4 s slice with the raw system call; GET from outside
     again;
  4. SET_TIMESLICE from outside, back to the vGPU's slice; GET again.

    bash bench/gpu/with_bundle.sh env OUT=/tmp/out python3 bench/gpu/audit/pidfd_slice_probe.py

Writes $OUT/pidfd_slice_probe.json.
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

sys.path.insert(0, str(Path(__file__).resolve().parent))
from reschedule_own_tsg import GET_TIMESLICE, GPUSLICE, SET_TIMESLICE, control  # noqa: E402

OUT = Path(os.environ.get("OUT", "/tmp/gpuslice-pidfd-probe"))
SYS_PIDFD_GETFD = 438  # x86-64


HANDLES = re.compile(r"gpuslice\[(\d+)\] info: timeslice of channel group (0x[0-9a-f]+) set to (\d+) us "
                     r"\(client (0x[0-9a-f]+), fd (\d+)\)")


def tenant():
    """Keeps the GPU busy; on request, sets its own 4 s slice with the raw
    system call (handles from its library's log line, as the tenant of
    reschedule_own_tsg.py learns them)."""
    import torch
    x = torch.randn(4096, 4096, device="cuda")
    go, done, log = Path(os.environ["PROBE_GO"]), Path(os.environ["PROBE_DONE"]), Path(os.environ["PROBE_LOG"])
    libc = ctypes.CDLL(None, use_errno=True)
    while not done.exists():
        (x @ x).sum().item()
        if go.exists():
            m = HANDLES.search(log.read_text())
            r = control(libc, True, int(m[5]), int(m[4], 16), int(m[2], 16), SET_TIMESLICE, 4_000_000)
            go.unlink()
            Path(str(go) + ".done").write_text(json.dumps(r))


def main():
    if os.environ.get("PROBE_TENANT"):
        tenant()
        return
    OUT.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="gpuslice-probe-"))
    log = OUT / "pidfd_slice_probe.log"
    go, done = work / "go", work / "done"
    env = {**os.environ, "PROBE_TENANT": "1", "PROBE_GO": str(go), "PROBE_DONE": str(done), "PROBE_LOG": str(log),
           "GPUSLICE_LOG": "info", "GPUSLICE_STATE_DIR": str(work / "state")}
    p = subprocess.Popen([*GPUSLICE.split(), "run", "--compute", "30", "--", sys.executable, __file__], env=env,
                         stdout=subprocess.PIPE, stderr=open(log, "w"), text=True)
    result = {}
    try:
        m = None
        deadline = time.time() + 60
        while m is None and time.time() < deadline:
            m = HANDLES.search(log.read_text())
            time.sleep(0.2)
        if m is None:
            result["error"] = "the tenant never logged its channel group"
            return
        pid, tsg, policy, client, fd = int(m[1]), int(m[2], 16), int(m[3]), int(m[4], 16), int(m[5])
        result.update({"pid": pid, "tsg": hex(tsg), "client": hex(client), "fd": fd, "policy_us": policy})
        time.sleep(1.0)  # past libcuda's own set
        libc = ctypes.CDLL(None, use_errno=True)
        pidfd = os.pidfd_open(pid)
        dup = libc.syscall(SYS_PIDFD_GETFD, pidfd, fd, 0)
        result["pidfd_getfd"] = dup if dup >= 0 else f"errno {ctypes.get_errno()}"
        if dup < 0:
            return
        result["outside_get"] = control(libc, True, dup, client, tsg, GET_TIMESLICE, 0)
        go.touch()
        while not Path(str(go) + ".done").exists() and time.time() < deadline + 30:
            time.sleep(0.001)
        result["tenant_raw_set_4s"] = json.loads(Path(str(go) + ".done").read_text())
        result["outside_get_after_raw"] = control(libc, True, dup, client, tsg, GET_TIMESLICE, 0)
        result["outside_set_policy"] = control(libc, True, dup, client, tsg, SET_TIMESLICE, policy)
        result["outside_get_after_set"] = control(libc, True, dup, client, tsg, GET_TIMESLICE, 0)
    finally:
        done.touch()
        try:
            p.wait(timeout=30)
        except subprocess.TimeoutExpired:
            p.kill()
        result["rc"] = p.returncode
        (OUT / "pidfd_slice_probe.json").write_text(json.dumps(result, indent=1))
        print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
