#!/usr/bin/env python3
"""Check 8: nanoseconds gpuslice adds to cuLaunchKernel (target <= 50) and to a
2 MiB cuMemAlloc_v2 + cuMemFree_v2 pair (recorded), measured in one process
by build/bench-gpu/launch_overhead (bench/gpu/launch_overhead.cu) running in an
8 GiB vGPU. libpath injection by default: nothing is preloaded, so the process
holds exactly the two libraries it dlopens (the real driver, then gpuslice's).

--paced measures a paced launch (the gate, its mark and its marker) beside an
idle best-effort vGPU on the same GPU, under GPUSLICE_TURNS=--turns
(`backfill`, the default: an uncapped vGPU never reads the turn; `exclusive`:
every launch looks at the turn word once its process is marked; the idle
neighbour never asks for the turn, so no launch waits); --lc-beside HOLD a
latency-critical one beside an idle best-effort vGPU on the same GPU, with
GPUSLICE_LC_HOLD=HOLD: `off` (no activity noted), `auto` or a number of µs
(the launch noted, and stamped on the board at most every 25 µs:
interposer/lc_activity.h)."""

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import common  # noqa: E402

TARGET_LAUNCH_NS = 50.0
BINARY = common.REPO / "build/bench-gpu/launch_overhead"
LIBRARY = common.REPO / "build/lib/libgpuslice-cuda.so"
DRIVER_DIRS = ("/usr/lib/x86_64-linux-gnu", "/usr/local/nvidia/lib64", "/usr/lib64",
               "/usr/local/nvidia/lib", "/usr/lib")


def real_libcuda():
    """The real libcuda.so.1: $REAL_LIBCUDA or $GPUSLICE_REAL_DRIVER, else the
    loader cache, else the usual directories; never gpuslice's shim."""
    for var in ("REAL_LIBCUDA", "GPUSLICE_REAL_DRIVER"):
        if os.environ.get(var):
            return os.environ[var]
    out = subprocess.run(["ldconfig", "-p"], capture_output=True, text=True).stdout
    found = [line.split("=>")[1].strip() for line in out.splitlines()
             if "libcuda.so.1 " in line and "=>" in line]
    found += [f"{d}/libcuda.so.1" for d in DRIVER_DIRS]
    for path in found:
        if os.path.isfile(path) and "gpuslice" not in path and "/shim/" not in path:
            return path
    raise FileNotFoundError("no libcuda.so.1 found; set REAL_LIBCUDA")


# An idle best-effort vGPU's process: joins its GPU's board (cuInit starts
# its compute thread), says so, and waits to be killed.
IDLE_BE = ("import ctypes, sys, time\n"
           "assert ctypes.CDLL('libcuda.so.1').cuInit(0) == 0\n"
           "print('ready', flush=True)\n"
           "time.sleep(600)\n")


def body(inject, paced, lc_hold, turns):
    if not BINARY.exists():  # not carried: build it here if this machine has nvcc
        subprocess.run(["bash", str(common.REPO / "bench/gpu/build.sh")], check=True)
    real = real_libcuda()
    # Paced beside an idle vGPU. (A cap of 100% did not pace it: a cap of
    # 100% is no cap, and a vGPU alone without one is not paced.)
    flags = ["--priority", "lc"] if lc_hold else []
    cmd = common.under_gpuslice([str(BINARY), "--gpuslice-lib", str(LIBRARY)],
                                memory="8GiB", inject=inject, flags=flags)
    print("+ " + " ".join(cmd), flush=True)
    env = dict(os.environ, REAL_LIBCUDA=real)
    be = None
    if paced:
        env["GPUSLICE_TURNS"] = turns  # the neighbour's too: every vGPU of a GPU uses one mode
        env["GPUSLICE_LOG"] = "info"   # to see that it was paced ("GPU turns on")
    if lc_hold:
        env["GPUSLICE_LC_HOLD"] = lc_hold
    if paced or lc_hold:
        be = subprocess.Popen(common.under_gpuslice([sys.executable, "-c", IDLE_BE], memory="1GiB",
                                                    name="idle-be", inject="libpath"),
                              stdout=subprocess.PIPE, text=True, env=env)
        if be.stdout.readline().strip() != "ready":
            be.kill()
            raise RuntimeError("the idle best-effort vGPU did not start")
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=240, env=env)
    finally:
        if be is not None:
            be.kill()
            be.wait()
    sys.stderr.write(proc.stderr)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    if not lines:
        raise RuntimeError(f"exit {proc.returncode}, no JSON; stdout: {proc.stdout[-2000:]!r}")
    result = json.loads(lines[-1])
    fields = {"inject": inject, "paced": paced, "turns": turns if paced else None, "lc_hold": lc_hold,
              "real_libcuda_found": real,
              "exit_code": proc.returncode,
              "target_launch_added_ns": TARGET_LAUNCH_NS, **result}
    if paced:
        fields["turns_on_logged"] = "GPU turns on" in proc.stderr
    if "error" in result:
        return False, fields
    failures = sum(result[s][arm]["failures"] for s in ("launch", "alloc_free")
                   for arm in ("direct", "gpuslice", "direct_again"))
    asserts = {
        # The target is for launches that are not paced nor an LC's beside
        # others; their cost is recorded.
        "launch_added_within_target": paced or bool(lc_hold) or result["launch"]["added_ns"] <= TARGET_LAUNCH_NS,
        "no_call_failed": failures == 0,
        "ran_in_vgpu": result.get("vgpu_dir") is not None,
    }
    if paced:
        asserts["was_paced"] = fields["turns_on_logged"]
    fields["asserts"] = asserts
    return all(asserts.values()), fields


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--inject", default="libpath", choices=["preload", "libpath"])
    ap.add_argument("--paced", action="store_true", help="run the vGPU paced, beside an idle one")
    ap.add_argument("--turns", default="backfill", choices=["backfill", "exclusive"],
                    help="GPUSLICE_TURNS of both vGPUs with --paced")
    ap.add_argument("--lc-beside", metavar="HOLD", help="run as an LC vGPU beside an idle BE one, with "
                    "GPUSLICE_LC_HOLD=HOLD (off, auto or microseconds)")
    opts = ap.parse_args()
    name = f"launch_overhead_paced_{opts.turns}" if opts.paced else f"launch_overhead_lc_{opts.lc_beside}" if opts.lc_beside \
        else "launch_overhead"
    return common.run_check(name, lambda: body(opts.inject, opts.paced, opts.lc_beside, opts.turns))


if __name__ == "__main__":
    sys.exit(main())
