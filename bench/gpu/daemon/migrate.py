"""`gpuslice migrate` on a real two-GPU machine (issue 17; docs/design.md,
"Migration to another GPU"): a daemon; a vGPU on GPU 0 whose PyTorch
process holds SIZE_GIB of a checksummed pattern and keeps a small matmul
going; `gpuslice migrate NAME --gpu 1`; then the process checks its data.

Reported ($OUT/migrate.json): each GPU's used memory (nvidia-smi) before and
after, the command's answer and wall time, the daemon's checkpoint and
restore times, and whether the process found its data intact and went on
computing. PASS when the memory moved (GPU 1 gained at least 90% of what
the vGPU held, GPU 0 lost it) and the data is intact.

    bash bench/gpu/with_bundle.sh env OUT=/tmp/out python3 bench/gpu/daemon/migrate.py
"""
import json
import os
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
os.environ.setdefault("BENCH_GPU", "0,1")  # the daemon sees both GPUs (start_daemon's CUDA_VISIBLE_DEVICES)
from power_cap import start_daemon  # noqa: E402
from suspend_resume import HOLDER  # noqa: E402
from usage_energy import wait_for  # noqa: E402

HERE = Path(__file__).resolve().parent
OUT = Path(os.environ.get("OUT", "/tmp/gpuslice-migrate"))
GPUSLICE = os.environ.get("GPUSLICE_CMD", str(HERE.parents[2] / "build/bin/gpuslice")).split()
PYTHON = os.environ.get("PYTHON", "python3")
SIZE_GIB = float(os.environ.get("SIZE_GIB", "8"))
# APP_SEES_BOTH=1: the application is started seeing both GPUs
# (CUDA_VISIBLE_DEVICES=0,1 over what `run --gpu 0` sets), though its vGPU
# has GPU 0 only: can a process be restored onto a GPU it was not shown?
APP_SEES_BOTH = os.environ.get("APP_SEES_BOTH") == "1"


def used_mib():
    r = subprocess.run(["nvidia-smi", "--query-gpu=index,memory.used", "--format=csv,noheader,nounits"],
                       capture_output=True, text=True)
    return {int(i): float(m) for i, m in (line.split(",") for line in r.stdout.strip().splitlines())}


def main():
    OUT.mkdir(parents=True, exist_ok=True)
    work, env, daemon = start_daemon("gs-migrate-", OUT / "daemon.log")
    result = {"ok": False, "size_gib": SIZE_GIB}
    app = None
    try:
        wait_for(work / "state" / "gpuslice.sock", 30, "daemon socket", [daemon])
        time.sleep(1)
        ready, release, out = work / "ready", work / "release", work / "result.json"
        wrap = ["env", "CUDA_VISIBLE_DEVICES=0,1"] if APP_SEES_BOTH else []
        result["app_sees_both"] = APP_SEES_BOTH
        app = subprocess.Popen([*GPUSLICE, "run", "--gpu", "0", "--name", "mig", "--", *wrap, PYTHON, "-c", HOLDER,
                                str(int(SIZE_GIB * (1 << 30))), str(ready), str(release), str(out)],
                               env=env, stdout=open(OUT / "app.log", "w"), stderr=subprocess.STDOUT)
        wait_for(ready, 180, "the application", [app])
        time.sleep(1)
        result["used_mib_before"] = used_mib()
        t = time.monotonic()
        r = subprocess.run([*GPUSLICE, "migrate", "mig", "--gpu", "1", "--json"], env=env, capture_output=True,
                           text=True, timeout=600)
        result["migrate_wall_s"] = round(time.monotonic() - t, 3)
        result["migrate_rc"] = r.returncode
        if r.returncode != 0:
            result["error"] = r.stderr.strip()[-600:]
        else:
            v = json.loads(r.stdout)
            result["devices"] = [d["gpu"] for d in v["devices"]]
            result["checkpoint_s"] = v["suspend"]["last_suspend_seconds"]
            result["restore_s"] = v["suspend"]["last_resume_seconds"]
        time.sleep(2)
        result["used_mib_after"] = used_mib()
        release.touch()
        app.wait(timeout=180)
        result["exit"] = app.returncode
        result["app"] = json.loads(out.read_text()) if out.exists() else None
        held = SIZE_GIB * 1024
        b, a = result["used_mib_before"], result["used_mib_after"]
        result["moved"] = (a[1] - b[1]) >= 0.9 * held and (b[0] - a[0]) >= 0.9 * held
        result["ok"] = bool(result["moved"] and result["app"] and result["app"]["intact"] and result["exit"] == 0)
    finally:
        if app is not None and app.poll() is None:
            app.kill()
            app.wait()
        daemon.terminate()
        daemon.wait(timeout=60)
        (OUT / "migrate.json").write_text(json.dumps(result, indent=1))
    print(json.dumps(result, indent=1))
    print("PASS" if result["ok"] else "FAIL")
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
