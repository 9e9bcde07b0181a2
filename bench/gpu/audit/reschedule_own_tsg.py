"""A tenant rescheduling its own channel group, on a real GPU (issue 11).

Under `gpuslice run --compute 30`, a PyTorch process learns its RM client,
descriptor and compute channel group from the library's own info log (what
a tenant watching its driver's ioctls would know), then asks RM for a 4 s
timeslice, which would let it hold the GPU against every other tenant:
  1. through libc's `ioctl` (ctypes), as any program does: the library
     should pass it on with the vGPU's slice in place of 4 s;
  2. GET_TIMESLICE: not the 4 s asked for;
  3. through the raw system call, which no library sees: RM takes it;
     GET right after;
  4. GET after SETTLE_S s: whether the library's verify pass has put the
     vGPU's slice back (it re-reads its channel groups' slices).
Also MAKE_REALTIME through libc (refused, NV_ERR_INSUFFICIENT_PERMISSIONS)
and, over the whole run, whether the library refused or rewrote anything
the driver sent as the application's (its two log lines must be the
tenant's). A training step runs between the steps, so the
channel group is busy.

    bash bench/gpu/with_bundle.sh env OUT=/tmp/out python3 bench/gpu/audit/reschedule_own_tsg.py

Writes $OUT/reschedule_own_tsg.json; PASS when 2 does not read 4 s,
MAKE_REALTIME is refused, and the library's two warnings are the tenant's
SET and MAKE_REALTIME.
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
OUT = Path(os.environ.get("OUT", "/tmp/gpuslice-reschedule"))
GPUSLICE = os.environ.get("GPUSLICE_CMD", os.environ.get("GPUSLICE_BIN", str(HERE.parents[2] / "build/bin/gpuslice")))
SETTLE_S = float(os.environ.get("SETTLE_S", "0.5"))

SET_TIMESLICE, GET_TIMESLICE, MAKE_REALTIME = 0xA06C0103, 0xA06C0104, 0xA06C0110
RM_CONTROL = (3 << 30) | (32 << 16) | (ord("F") << 8) | 0x2A  # _IOWR('F', NV_ESC_RM_CONTROL, NVOS54)
SYS_IOCTL = 16  # x86-64


class Nvos54(ctypes.Structure):
    _fields_ = [("hClient", ctypes.c_uint32), ("hObject", ctypes.c_uint32), ("cmd", ctypes.c_uint32),
                ("flags", ctypes.c_uint32), ("params", ctypes.c_uint64), ("paramsSize", ctypes.c_uint32),
                ("status", ctypes.c_uint32)]


def control(libc, raw, fd, client, tsg, cmd, value, size=8):
    v = ctypes.c_uint64(value)
    c = Nvos54(client, tsg, cmd, 0, ctypes.addressof(v), size, 0)
    rc = (libc.syscall(SYS_IOCTL, fd, ctypes.c_ulong(RM_CONTROL), ctypes.byref(c)) if raw
          else libc.ioctl(fd, ctypes.c_ulong(RM_CONTROL), ctypes.byref(c)))
    return {"rc": rc, "status": hex(c.status), "value": v.value}


def child():
    log = Path(os.environ["LOG_FILE"])
    os.dup2(os.open(log, os.O_WRONLY | os.O_APPEND), 2)  # the library's log, from here on
    import torch
    x = torch.randn(4096, 4096, device="cuda")
    step = lambda: (x @ x).sum().item()  # noqa: E731
    step()
    deadline = time.time() + 10
    found = None
    while time.time() < deadline and found is None:
        m = re.findall(r"timeslice of channel group (0x[0-9a-f]+) set to (\d+) us \(client (0x[0-9a-f]+), fd (\d+)\)",
                       log.read_text())
        found = m[-1] if m else None
        step()
    if found is None:
        return {"error": "the library never set a slice"}
    tsg, policy, client, fd = int(found[0], 16), int(found[1]), int(found[2], 16), int(found[3])
    libc = ctypes.CDLL(None, use_errno=True)
    r = {"tsg": hex(tsg), "client": hex(client), "fd": fd, "policy_us": policy}
    r["libc_set_4s"] = control(libc, False, fd, client, tsg, SET_TIMESLICE, 4_000_000)
    step()
    r["get_after_libc"] = control(libc, False, fd, client, tsg, GET_TIMESLICE, 0)
    r["libc_realtime"] = control(libc, False, fd, client, tsg, MAKE_REALTIME, 1, size=1)
    r["raw_set_4s"] = control(libc, True, fd, client, tsg, SET_TIMESLICE, 4_000_000)
    r["get_after_raw"] = control(libc, False, fd, client, tsg, GET_TIMESLICE, 0)
    end = time.time() + SETTLE_S
    while time.time() < end:
        step()
    r[f"get_after_{SETTLE_S}s"] = control(libc, False, fd, client, tsg, GET_TIMESLICE, 0)
    return r


def main():
    if os.environ.get("RESCHEDULE_CHILD"):
        print(json.dumps(child()))
        return
    OUT.mkdir(parents=True, exist_ok=True)
    log = OUT / "reschedule_own_tsg.log"
    log.write_text("")
    env = {**os.environ, "RESCHEDULE_CHILD": "1", "LOG_FILE": str(log), "GPUSLICE_LOG": "info"}
    state = tempfile.mkdtemp(prefix="gpuslice-reschedule-")
    env["GPUSLICE_STATE_DIR"] = state
    p = subprocess.run([*GPUSLICE.split(), "run", "--compute", "30", "--", sys.executable, __file__], env=env,
                       capture_output=True, text=True, timeout=300)
    result = {"rc": p.returncode, "stderr_tail": p.stderr[-2000:]}
    try:
        result.update(json.loads(p.stdout.strip().splitlines()[-1]))
    except (ValueError, IndexError):
        result["stdout"] = p.stdout[-2000:]
    text = log.read_text()
    result["refusals"] = [l for l in text.splitlines()
                          if "refused this process's RM control" in l or "this process set channel group" in l]
    result["verify_pass_lines"] = [l for l in text.splitlines() if "reads back" in l][-5:]
    ok = (result.get("get_after_libc", {}).get("value") not in (None, 4_000_000)
          and result.get("libc_realtime", {}).get("status") == "0x1b"
          and len(result["refusals"]) == 2 and "4000000 us; passed on as" in result["refusals"][0])
    result["ok"] = ok
    (OUT / "reschedule_own_tsg.json").write_text(json.dumps(result, indent=1))
    print(json.dumps(result, indent=1))
    print("PASS" if ok else "FAIL", "reschedule_own_tsg")


if __name__ == "__main__":
    main()
