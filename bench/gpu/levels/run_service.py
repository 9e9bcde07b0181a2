"""The task API's example service on the GPU (issue 12): the LC endpoint of
examples/python/torch_service.py beside a training, alone, under stock
time-slicing and under gpuslice, and SLO attainment with and without the
scheduler's SLO reaction.

Cells (two processes each but alone: `--mode serve` and `--mode train`):
  alone             the endpoint alone, no gpuslice
  stock             endpoint + training, no gpuslice
  gpuslice          endpoint in `run --priority high`, training in `--priority low`
  gpuslice_noreact  the same with the endpoint's --no-slo-reaction
  both_gpuslice     one process, both halves (`--mode both`) in `run --priority high`
  both_noreact      the same with --no-slo-reaction
  both_stock        one process, both halves, no gpuslice
  both_nostreams    both_gpuslice on PyTorch's default stream (--no-streams);
                    the other both_ cells use one CUDA stream per level

The gpuslice cells also record what `gpuslice ls --json` shows of each
vGPU's task levels (the vGPU's shared task metrics, docs/task-api.md
section 10), last seen before the vGPU ended, beside the endpoint's own
figures. Writes $OUT/service.json after every cell. Needs the task API's Python
package: GPUSLICE_PYTHONPATH (with_bundle.sh sets it) or build/python.

    bash bench/gpu/with_bundle.sh timeout 590 python3 bench/gpu/levels/run_service.py
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
SERVICE = ROOT / "examples" / "python" / "torch_service.py"
OUT = Path(os.environ.get("OUT", "/tmp/gpuslice-service"))
PYTHON = os.environ.get("PYTHON", "python3")
GPUSLICE = os.environ.get("GPUSLICE_CMD", str(ROOT / "build" / "bin" / "gpuslice")).split()
PYPATH = os.environ.get("GPUSLICE_PYTHONPATH", str(ROOT / "build" / "python"))
PYDEPS = os.environ.get("GPUSLICE_PYTHON_DEPS", "")
SECONDS = float(os.environ.get("SERVICE_SECONDS", 15))
RATE = float(os.environ.get("SERVICE_RATE", 100))
SLO_MS = float(os.environ.get("SERVICE_SLO_MS", 2))
BACKEND = os.environ.get("SERVICE_BACKEND", "torch")  # python: the example's CPU stand-in, for a dry run
BUDGET_S = float(os.environ.get("BENCH_BUDGET_S", 560))
STARTED = time.monotonic()
RESULTS = {"meta": {"seconds": SECONDS, "rate": RATE, "slo_ms": SLO_MS}, "cells": {}}


def save():
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "service.json").write_text(json.dumps(RESULTS, indent=1))


def env():
    e = dict(os.environ, PYTHONPATH=PYPATH + (":" + os.environ["PYTHONPATH"] if "PYTHONPATH" in os.environ else ""))
    if PYDEPS:
        e["LD_LIBRARY_PATH"] = PYDEPS + (":" + e["LD_LIBRARY_PATH"] if e.get("LD_LIBRARY_PATH") else "")
    return e


def service(mode, seconds, extra=()):
    return [PYTHON, str(SERVICE), "--mode", mode, "--seconds", f"{seconds:g}", "--rate", f"{RATE:g}",
            "--slo-ms", f"{SLO_MS:g}", "--backend", BACKEND, *extra]


def wrap(cmd, vgpu):
    return cmd if vgpu is None else [*GPUSLICE, "run", "--gpu", "0", "--name", vgpu[0], "--priority", vgpu[1], "--",
                                     *cmd]


def last_json(text):
    for line in reversed(text.splitlines()):
        if line.startswith("{"):
            try:
                return json.loads(line)
            except ValueError:
                pass
    return None


def run_cell(name, procs):
    """procs: [(tag, cmd)]; the 'train' one (if any) starts first and is
    given a head start, the others run to their end; all are then ended."""
    limit = max(10.0, min(3 * SECONDS + 90, BUDGET_S - (time.monotonic() - STARTED)))
    logs = OUT / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    running, out = [], {}
    ledger, done = {}, threading.Event()

    def watch_task_levels():
        while not done.wait(0.5):
            r = subprocess.run([*GPUSLICE, "ls", "--json"], capture_output=True, text=True)
            try:
                for v in json.loads(r.stdout)["vgpus"]:
                    if v.get("task_levels"):
                        ledger[v["name"]] = v["task_levels"]
            except (ValueError, KeyError):
                pass
    watcher = threading.Thread(target=watch_task_levels, daemon=True)
    if any(cmd[0] != PYTHON for _, cmd in procs):
        watcher.start()
    try:
        for tag, cmd in sorted(procs, key=lambda p: p[0] != "train"):
            log = open(logs / f"{name}-{tag}.log", "w")
            running.append((tag, subprocess.Popen(cmd, env=env(), stdout=subprocess.PIPE, stderr=log, text=True,
                                                  start_new_session=True), log))
            if tag == "train":
                time.sleep(8)  # import, model and warm-up before the endpoint measures
        for tag, p, log in running:
            try:
                stdout, _ = p.communicate(timeout=limit)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, 9)
                stdout, _ = p.communicate()
            r = last_json(stdout or "")
            out[tag] = r if r is not None else {"error": f"exit {p.returncode}, no result",
                                                "log_tail": (logs / f"{name}-{tag}.log").read_text()[-400:]}
    finally:
        done.set()
        if watcher.is_alive():
            watcher.join()
        for _, p, log in running:
            if p.poll() is None:
                os.killpg(p.pid, 9)
                p.wait()
            log.close()
    if ledger:
        out["ledger_task_levels"] = ledger
    return out


def main():
    own_state = "GPUSLICE_STATE_DIR" not in os.environ
    if own_state:
        os.environ["GPUSLICE_STATE_DIR"] = tempfile.mkdtemp(prefix="gs-service-")
    probe = "import gpuslice, sys; print(sys.version.split()[0])" if BACKEND == "python" else \
        "import gpuslice, torch, sys; print(sys.version.split()[0], torch.__version__)"
    check = subprocess.run([PYTHON, "-c", probe],
                           env=env(), capture_output=True, text=True)
    RESULTS["meta"]["python_torch"] = check.stdout.strip() or check.stderr.strip()[-400:]
    if check.returncode != 0:
        RESULTS["error"] = "the gpuslice Python package or torch does not import here"
        save()
        print(json.dumps(RESULTS, indent=1))
        return 1
    train_s = SECONDS + 20  # outlasts the endpoint's warm-up and run
    cells = {
        "alone": [("serve", service("serve", SECONDS))],
        "stock": [("train", service("train", train_s)), ("serve", service("serve", SECONDS))],
        "gpuslice": [("train", wrap(service("train", train_s), ("svc-train", "low"))),
                     ("serve", wrap(service("serve", SECONDS), ("svc-serve", "high")))],
        "gpuslice_noreact": [("train", wrap(service("train", train_s), ("svc-train2", "low"))),
                             ("serve", wrap(service("serve", SECONDS, ["--no-slo-reaction"]), ("svc-serve2", "high")))],
        "both_gpuslice": [("both", wrap(service("both", SECONDS), ("svc-both", "high")))],
        "both_noreact": [("both", wrap(service("both", SECONDS, ["--no-slo-reaction"]), ("svc-both2", "high")))],
        "both_stock": [("both", service("both", SECONDS))],
        "both_nostreams": [("both", wrap(service("both", SECONDS, ["--no-streams"]), ("svc-both3", "high")))],
    }
    only = [c for c in os.environ.get("SERVICE_CELLS", "").split(",") if c]
    try:
        for name, procs in cells.items():
            if only and name not in only:
                continue
            if BUDGET_S - (time.monotonic() - STARTED) < SECONDS + 40:
                RESULTS["cells"][name] = {"error": "skipped: out of time budget"}
                continue
            t = time.monotonic()
            try:
                RESULTS["cells"][name] = run_cell(name, procs)
            except Exception as e:  # a cell's failure is a result
                RESULTS["cells"][name] = {"error": f"{type(e).__name__}: {e}"}
            RESULTS["cells"][name]["seconds"] = round(time.monotonic() - t, 1)
            save()
            print(name, json.dumps(RESULTS["cells"][name])[:500], flush=True)
    finally:
        if own_state:
            shutil.rmtree(os.environ["GPUSLICE_STATE_DIR"], ignore_errors=True)
        save()
    return 0


if __name__ == "__main__":
    sys.exit(main())
