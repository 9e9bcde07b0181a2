"""A capped tenant that escapes its own library, through the daemon: the
compute-cap audit (src/daemon/cap_audit.h) against it, and against honest
capped trainings that must never be touched.

The escaping tenant joins its vGPU as any PyTorch process does (a tensor on
the GPU, through the library), then takes cuLaunchKernel and the rest from
the libcuda it already loaded, through libc's own dlopen and dlsym, which no
hook sees, and runs spin kernels of SPIN_US (1000), ten per synchronisation. Its library
paces nothing of that; its memory stays within the audit's allowance.

Cases, each on a fresh daemon (audit.over_cap in its config), CAP_PCT (30):
  honest_gpu, honest_mem, honest_launch
              the workload matrix's trainings, capped: their library holds
              the cap; the audit must not act (none of its lines)
  honest_spin spin kernels through the library, SPIN_LONG_US (20000) each,
              BATCH_LONG (16) queued per synchronisation: a queue far longer
              than a turn, which the library's overrun charge must hold to
              the cap (the spin's GPU time is its kernels' length)
  honest_spin_report
              the same, the audit only reporting: what the library alone does
  honest_spin_stream
              honest_spin_report on a stream created for each batch and
              destroyed with the batch still queued, before the
              synchronisation: the drain poll queries streams, and must never
              query a dead one (interposer/event_markers.h)
  escape_off  the escaping tenant, the audit off: what the hole gives it
  escape      the same, the default (throttle): held to its cap from outside
  escape_kill the same, audit.over_cap: kill
  escape_sigcont
              escape, with a sibling process of the tenant's sending its
              process SIGCONT every millisecond: killed as tampering
  beside_honest, beside_escape
              a 1 ms spin capped through the library, or escaping, beside an
              uncapped GPU-bound training (compute/train.py): where nothing
              is measured, what the escape gains
Each runs CASE_S (25) s. For the escaping tenant: spin kernels per second,
second by second, so its rate before and after the throttle can be read
against escape_off's within one call.

    bash bench/gpu/with_bundle.sh env OUT=/tmp/out python3 bench/gpu/audit/cap_escape.py

Writes $OUT/cap_escape.json and $OUT/CASE.log (the daemon's log and the
tenant's); works in $SCRATCH.
"""
import ctypes
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
OUT = Path(os.environ.get("OUT", "/tmp/gpuslice-cap-escape"))
SCRATCH = Path(os.environ.get("SCRATCH", "/tmp/gpuslice-cap-escape-work"))
GPUSLICE = os.environ.get("GPUSLICE_CMD", os.environ.get("GPUSLICE_BIN", str(HERE.parents[2] / "build/bin/gpuslice")))
GPUSLICE_BIN = os.environ.get("GPUSLICE_BIN", str(HERE.parents[2] / "build/bin/gpuslice"))
DEPS = HERE.parents[2] / ".device/bundle/deps"
MATRIX = HERE.parent / "matrix"
COMPUTE = HERE.parent / "compute"
CASES = os.environ.get("CASES", "honest_gpu,honest_mem,honest_launch,honest_spin,escape_off,escape,escape_kill").split(",")
CASE_S = float(os.environ.get("CASE_S", "25"))
CAP_PCT = int(os.environ.get("CAP_PCT", "30"))
SPIN_US = int(os.environ.get("SPIN_US", "1000"))
SPIN_LONG_US = int(os.environ.get("SPIN_LONG_US", "20000"))
BATCH_LONG = int(os.environ.get("BATCH_LONG", "16"))

SPIN_PTX = b"""
.version 7.8
.target sm_80
.address_size 64
.visible .entry spin(.param .u64 ns)
{
  .reg .pred %p<2>;
  .reg .b64 %rd<6>;
  ld.param.u64 %rd1, [ns];
  mov.u64 %rd2, %globaltimer;
LOOP:
  mov.u64 %rd3, %globaltimer;
  sub.s64 %rd4, %rd3, %rd2;
  setp.lt.u64 %p1, %rd4, %rd1;
  @%p1 bra LOOP;
  ret;
}
"""


def real_libcuda():
    """The real driver's path, as this process mapped it through the library."""
    with open("/proc/self/maps") as f:
        for line in f:
            path = line.split()[-1] if len(line.split()) >= 6 else ""
            if re.search(r"/libcuda\.so(\.\d+)*$", path) and "gpuslice" not in path and "/shim/" not in path:
                return path
    return os.environ.get("GPUSLICE_REAL_DRIVER", "/usr/lib/x86_64-linux-gnu/libcuda.so.1")


def mapping_of(addr):
    """The file mapped at `addr` in this process."""
    with open("/proc/self/maps") as f:
        for line in f:
            parts = line.split()
            lo, hi = (int(x, 16) for x in parts[0].split("-"))
            if lo <= addr < hi:
                return parts[-1] if len(parts) >= 6 else "anonymous"
    return "unmapped"


def spinner(private):
    """Joins through the library, then spins: straight through the real
    driver's entry points (`private`, the escape), or through the library
    (honest)."""
    import torch
    torch.zeros(1, device="cuda")
    torch.cuda.synchronize()
    V = ctypes.c_void_p
    if private:
        # libc's own dlopen and dlsym (not whatever a library put in front
        # of them), asked for the driver this process already loaded.
        libc6 = ctypes.CDLL("libc.so.6")
        real_dlopen = ctypes.CFUNCTYPE(V, ctypes.c_char_p, ctypes.c_int)(ctypes.cast(libc6.dlopen, V).value)
        real_dlsym = ctypes.CFUNCTYPE(V, V, ctypes.c_char_p)(ctypes.cast(libc6.dlsym, V).value)
        path = real_libcuda()
        handle = real_dlopen(path.encode(), 2 | 4)  # RTLD_NOW | RTLD_NOLOAD: the one loaded
        if not handle:
            raise SystemExit(f"{path} is not loaded")
        lookup = lambda name: real_dlsym(handle, name.encode())  # noqa: E731
    else:
        path = "libcuda.so.1, as the application sees it"
        cuda = ctypes.CDLL("libcuda.so.1")
        lookup = lambda name: ctypes.cast(getattr(cuda, name), V).value  # noqa: E731

    def fn(name, *args):
        addr = lookup(name)
        if not addr:
            raise SystemExit(f"no {name} in {path}")
        call = ctypes.CFUNCTYPE(ctypes.c_int, *args)(addr)

        def checked(*a):
            r = call(*a)
            if r != 0:
                raise SystemExit(f"{name}: CUDA error {r}")
        return checked
    P = ctypes.c_void_p
    fn("cuInit", ctypes.c_uint)(0)
    dev, ctx, mod, func = ctypes.c_int(), P(), P(), P()
    fn("cuDeviceGet", P, ctypes.c_int)(ctypes.byref(dev), 0)
    fn("cuDevicePrimaryCtxRetain", P, ctypes.c_int)(ctypes.byref(ctx), dev)
    fn("cuCtxSetCurrent", P)(ctx)
    fn("cuModuleLoadData", P, ctypes.c_char_p)(ctypes.byref(mod), SPIN_PTX)
    fn("cuModuleGetFunction", P, P, ctypes.c_char_p)(ctypes.byref(func), mod, b"spin")
    launch = fn("cuLaunchKernel", P, ctypes.c_uint, ctypes.c_uint, ctypes.c_uint, ctypes.c_uint, ctypes.c_uint,
                ctypes.c_uint, ctypes.c_uint, P, P, P)
    sync = fn("cuCtxSynchronize")
    # SPIN_STREAM=destroyed: each batch on a new non-blocking stream,
    # destroyed with the batch queued; else the legacy stream.
    per_batch_stream = os.environ.get("SPIN_STREAM") == "destroyed"
    stream_create = fn("cuStreamCreate", P, ctypes.c_uint)
    stream_destroy = fn("cuStreamDestroy_v2", P)
    launch_in = mapping_of(lookup("cuLaunchKernel"))
    per_batch = int(os.environ.get("BATCH", "10"))
    ns = ctypes.c_uint64(SPIN_US * 1000)
    params = (P * 1)(ctypes.cast(ctypes.pointer(ns), P))
    ready, stop = Path(os.environ["READY_FILE"]), Path(os.environ["STOP_FILE"])
    ends = []
    ready.write_text(str(os.getpid()))
    while not stop.exists():
        stream = P()
        if per_batch_stream:
            stream_create(ctypes.byref(stream), 1)  # CU_STREAM_NON_BLOCKING
        for _ in range(per_batch):
            launch(func, 132, 1, 1, 32, 1, 1, 0, stream, params, None)
        if per_batch_stream:
            stream_destroy(stream)
        sync()
        ends.append(time.monotonic())
    Path(os.environ["RESULT_FILE"]).write_text(json.dumps({"batch_ends": ends, "kernels_per_batch": per_batch,
                                                           "spin_us": SPIN_US, "driver": path,
                                                           "launch_in": launch_in}))


def per_second(ends, t0, n):
    """Batches finished in each whole second after t0."""
    counts = [0] * n
    for e in ends:
        i = int(e - t0)
        if 0 <= i < n:
            counts[i] += 1
    return counts


def run_case(case):
    work = SCRATCH / case
    work.mkdir(parents=True, exist_ok=True)
    state = tempfile.mkdtemp(prefix="gpuslice-cap-escape-")
    cfg = work / "config.yaml"
    action = {"escape_off": "off", "escape_kill": "kill", "honest_spin_report": "report",
              "honest_spin_stream": "report"}.get(case, "throttle")
    sibling_done = threading.Event()
    cfg.write_text(f"version: 1\naudit:\n  over_cap: {action}\n")
    denv = {**os.environ, "GPUSLICE_STATE_DIR": state + "/state"}
    if DEPS.is_dir():
        denv["LD_LIBRARY_PATH"] = str(DEPS)
    daemon = subprocess.Popen([GPUSLICE_BIN, "daemon", "--config", str(cfg)], env=denv,
                              stdout=open(work / "daemon.log", "w"), stderr=subprocess.STDOUT)
    env = {**os.environ, "GPUSLICE_STATE_DIR": state + "/state", "CUDA_VISIBLE_DEVICES": "0"}
    result = {"case": case, "action": action, "cap_pct": CAP_PCT}
    tenant = be = None
    ready, stop, res = work / "ready", work / "stop", work / "result.json"
    for f in (ready, stop, res):
        f.unlink(missing_ok=True)
    try:
        sock = Path(state) / "state/gpuslice.sock"
        for _ in range(300):
            if sock.exists():
                break
            time.sleep(0.1)
        tenv = {**env, "READY_FILE": str(ready), "STOP_FILE": str(stop), "RESULT_FILE": str(res)}
        spin_library = case.startswith("honest_spin") or case == "beside_honest"
        if case.startswith("beside_"):
            # An uncapped GPU-bound training on the GPU first, busy throughout.
            be_ready = work / "be.ready"
            be_ready.unlink(missing_ok=True)
            be = subprocess.Popen([*GPUSLICE.split(), "run", "--name", "be", "--", sys.executable,
                                   str(COMPUTE / "train.py"), str(CASE_S + 120), str(work / "be.json")],
                                  env={**env, "READY_FILE": str(be_ready), "STOP_FILE": str(stop)},
                                  stdout=subprocess.DEVNULL, stderr=open(work / "be.log", "w"))
            end = time.monotonic() + 120
            while not be_ready.exists() and be.poll() is None and time.monotonic() < end:
                time.sleep(0.05)
        if case.startswith("honest_") and not spin_library:
            kind = case.split("_", 1)[1]
            cmd = ([sys.executable, str(COMPUTE / "train.py")] if kind == "gpu"
                   else [sys.executable, str(MATRIX / "be_load.py"), kind])
            cmd += [str(CASE_S + 120), str(res)]
        else:
            # honest_spin: the same spin through the library, long kernels
            # queued deep (SPIN_LONG_US x BATCH_LONG per synchronisation).
            tenv["SPINNER"] = "library" if spin_library else "private"
            if case.startswith("honest_spin"):
                tenv["SPIN_US"], tenv["BATCH"] = str(SPIN_LONG_US), str(BATCH_LONG)
            if case == "honest_spin_stream":
                tenv["SPIN_STREAM"] = "destroyed"
            cmd = [sys.executable, __file__]
        tenant = subprocess.Popen([*GPUSLICE.split(), "run", "--name", "t", "--compute-cap", str(CAP_PCT), "--",
                                   *cmd], env=tenv, stdout=open(work / "tenant.out", "w"),
                                  stderr=open(work / "tenant.log", "w"))
        end = time.monotonic() + 120
        while not ready.exists() and tenant.poll() is None and time.monotonic() < end:
            time.sleep(0.05)
        if not ready.exists():
            result["error"] = f"the tenant did not start (rc {tenant.poll()})"
            return result
        t0 = time.monotonic()
        if case == "escape_sigcont":
            # A process of the tenant's own, not on the GPU, undoes every stop.
            app_pid = int(ready.read_text())

            def sibling():
                while not sibling_done.is_set():
                    try:
                        os.kill(app_pid, signal.SIGCONT)
                    except ProcessLookupError:
                        return
                    time.sleep(0.001)
            threading.Thread(target=sibling, daemon=True).start()
        while time.monotonic() - t0 < CASE_S and tenant.poll() is None:
            time.sleep(0.1)  # a benchmark's length, not a synchronisation
        r = subprocess.run([*GPUSLICE.split(), "ls", "--json", "t"], env=env, capture_output=True, text=True)
        try:
            dev = json.loads(r.stdout)["vgpus"][0]["devices"][0]
            result["measured_ratio_at_end"] = dev.get("compute_measured_ratio")
        except (ValueError, IndexError, KeyError):
            pass
        stop.touch()
        if be is not None:
            try:
                be.wait(timeout=60)
            except subprocess.TimeoutExpired:
                be.kill()
        try:
            tenant.wait(timeout=60)
        except subprocess.TimeoutExpired:
            tenant.kill()
        result["tenant_rc"] = tenant.returncode
        if (work / "be.json").exists():
            be_ends = json.loads((work / "be.json").read_text()).get("step_ends", [])
            result["be_steps_per_s"] = sum(per_second(be_ends, t0, int(CASE_S))) / int(CASE_S)
        if res.exists():
            data = json.loads(res.read_text())
            ends = data.get("batch_ends") or data.get("step_ends") or []
            secs = per_second(ends, t0, int(CASE_S))
            result["per_second"] = secs
            result["first_5s_rate"] = sum(secs[:5]) / 5
            result["last_10s_rate"] = sum(secs[-10:]) / 10
            result["launch_in"] = data.get("launch_in")
            if "batch_ends" in data:
                # Spin kernels take exactly their length: the GPU time used.
                kernel_s = data["kernels_per_batch"] * data["spin_us"] / 1e6
                result["unit"] = f"batches of {data['kernels_per_batch']} x {data['spin_us']} us spin kernels"
                result["last_10s_gpu_fraction"] = result["last_10s_rate"] * kernel_s
                result["first_5s_gpu_fraction"] = result["first_5s_rate"] * kernel_s
                # Whole batches between two batch ends after the first 10 s:
                # the steady state of a cap whose cycle is seconds long
                # (one batch per cycle), which counts per second miss.
                steady = [e for e in ends if t0 + 10 <= e <= t0 + CASE_S]
                if len(steady) >= 2:
                    result["steady_gpu_fraction"] = (len(steady) - 1) * kernel_s / (steady[-1] - steady[0])
                    result["steady_batches"] = len(steady) - 1
            else:
                result["unit"] = "steps"
    finally:
        sibling_done.set()
        for p in (tenant, be):
            if p is not None and p.poll() is None:
                p.kill()
        daemon.terminate()
        daemon.wait(timeout=20)
        subprocess.run(["rm", "-rf", state])
        text = (work / "daemon.log").read_text(errors="replace")
        tenant_log = (work / "tenant.log").read_text(errors="replace") if (work / "tenant.log").exists() else ""
        (OUT / f"{case}.log").write_text(f"== daemon\n{text}\n== tenant (last 4000 characters)\n{tenant_log[-4000:]}")
    lines = [l for l in text.splitlines() if "compute-cap audit" in l]
    result["audit_lines"] = lines[:4]
    result["acted"] = bool(lines)
    return result


def main():
    if os.environ.get("SPINNER"):
        spinner(private=os.environ["SPINNER"] == "private")
        return
    OUT.mkdir(parents=True, exist_ok=True)
    smi = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"],
                         capture_output=True, text=True)
    results = {"gpu": smi.stdout.strip(), "date": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
               "case_s": CASE_S, "cap_pct": CAP_PCT, "spin_us": SPIN_US, "cases": []}
    for case in CASES:
        results["cases"].append(run_case(case))
        (OUT / "cap_escape.json").write_text(json.dumps(results, indent=1))
        print(json.dumps({k: v for k, v in results["cases"][-1].items() if k != "per_second"}), flush=True)
    free = next((c for c in results["cases"] if c["case"] == "escape_off" and "last_10s_rate" in c), None)
    held = next((c for c in results["cases"] if c["case"] == "escape" and "last_10s_rate" in c), None)
    if free and held and free["last_10s_rate"]:
        results["escape_held_fraction"] = held["last_10s_rate"] / free["last_10s_rate"]
        print(f"escaping tenant, throttled, last 10 s: {results['escape_held_fraction']:.1%} of its free rate")
    (OUT / "cap_escape.json").write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
