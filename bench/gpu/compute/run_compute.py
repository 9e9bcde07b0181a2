"""Compute shares, elasticity and LC latency on a real GPU, in one run.

Each table compares, in the same run: running alone, stock time-slicing (no
gpuslice), and gpuslice. Results go to $OUT/compute.json (rewritten after
every scenario, so a run cut short keeps what it got), the children's stderr
(GPUSLICE_LOG=info) to $OUT/logs/, and a summary table to stdout.

    OUT=/tmp/out GPUSLICE_BIN=build/bin/gpuslice LC_BE=build/bench-compute/lc_be \
        python3 bench/gpu/compute/run_compute.py

Scenarios:
  train_alone_stock   one PyTorch training, no gpuslice: the reference throughput
  train_alone_30      the same inside a vGPU with --compute 30, alone: elasticity
  share_30_70, share_10_90
                      two trainings in two vGPUs with those shares, together;
                      each one's share is its throughput against running alone
  share_stock         two trainings without gpuslice, together
  lc_alone, lc_be_stock, lc_be_gpuslice
                      a 50 us kernel at 200 req/s (lc_be.cu) alone, beside a
                      saturating best-effort load without gpuslice, and with
                      --priority lc / --priority be
Standard library only (the children import torch).
"""
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
OUT = Path(os.environ.get("OUT", "/tmp/gpuslice-compute"))
# GPUSLICE_CMD may carry a loader prefix, e.g. "/lib64/ld-linux-x86-64.so.2
# --library-path DEPS BIN", so that the CLI's own libraries stay out of the
# children's environment (set GPUSLICE_LIBRARY_DIR with it).
GPUSLICE = os.environ.get("GPUSLICE_CMD", os.environ.get("GPUSLICE_BIN", str(HERE.parents[2] / "build/bin/gpuslice")))
LC_BE = os.environ.get("LC_BE", str(HERE.parents[2] / "build/bench-compute/lc_be"))
PYTHON = os.environ.get("PYTHON", sys.executable)
GPU = os.environ.get("BENCH_GPU", "0")
TRAIN_S = float(os.environ.get("TRAIN_S", "14"))
SHARE_S = float(os.environ.get("SHARE_S", "20"))
LC_S = float(os.environ.get("LC_S", "8"))
BUDGET_S = float(os.environ.get("BENCH_BUDGET_S", "270"))
STARTED = time.monotonic()

results = {"meta": {}, "scenarios": {}}


def save():
    OUT.mkdir(parents=True, exist_ok=True)
    tmp = OUT / "compute.json.tmp"
    tmp.write_text(json.dumps(results, indent=1))
    os.replace(tmp, OUT / "compute.json")


def left():
    return BUDGET_S - (time.monotonic() - STARTED)


def wrap(cmd, vgpu):
    """cmd, run inside a vGPU when vgpu is (name, flags...), else as it is."""
    if vgpu is None:
        return cmd
    name, *flags = vgpu
    return [*GPUSLICE.split(), "run", "--gpu", GPU, "--name", name, *flags, "--", *cmd]


def run_all(label, procs, stagger_s=0.0, extra_env=None):
    """Starts [(tag, cmd, vgpu)], waits for all; returns {tag: parsed output}."""
    logs = OUT / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, GPUSLICE_LOG="info", CUDA_VISIBLE_DEVICES=GPU, **(extra_env or {}))
    running = []
    for i, (tag, cmd, vgpu) in enumerate(procs):
        if i and stagger_s:
            time.sleep(stagger_s)  # the BE must be running before the LC measures
        out = OUT / "work" / f"{label}-{tag}.json"
        out.parent.mkdir(parents=True, exist_ok=True)
        err = open(logs / f"{label}-{tag}.log", "w")
        full = wrap([c if c != "{out}" else str(out) for c in cmd], vgpu)
        running.append((tag, out, subprocess.Popen(full, env=env, stdout=err, stderr=err)))
    parsed = {}
    for tag, out, p in running:
        try:
            p.wait(timeout=max(10, left()))
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
        parsed[tag] = json.loads(out.read_text()) if p.returncode == 0 and out.exists() else {"error": p.returncode}
    return parsed


def window_throughput(runs):
    """Steps/s of each run over the window in which all of them were training."""
    ends = {t: r["step_ends"] for t, r in runs.items()}
    w0 = max(e[0] for e in ends.values()) + 1.0
    w1 = min(e[-1] for e in ends.values()) - 0.5
    if w1 - w0 < 2:
        raise RuntimeError(f"common window only {w1 - w0:.1f} s")
    return {t: sum(1 for x in e if w0 < x <= w1) / (w1 - w0) for t, e in ends.items()}, w1 - w0


def applied_slices(label, tag):
    """The timeslices the library reports having set, from its info log."""
    text = (OUT / "logs" / f"{label}-{tag}.log").read_text(errors="replace")
    return [int(l.rsplit(" ", 2)[-2]) for l in text.splitlines() if "timeslice of channel group" in l]


def scenario(name, fn):
    if left() < 30:
        results["scenarios"][name] = {"skipped": "budget"}
        save()
        return
    t0 = time.monotonic()
    try:
        results["scenarios"][name] = fn(name)
    except Exception as e:  # noqa: BLE001 - record and go on
        results["scenarios"][name] = {"error": f"{type(e).__name__}: {e}"}
    results["scenarios"][name]["seconds"] = round(time.monotonic() - t0, 1)
    save()
    print(name, json.dumps(results["scenarios"][name]), flush=True)


def train(seconds):
    return [PYTHON, str(HERE / "train.py"), str(seconds), "{out}"]


def main():
    try:
        smi = subprocess.run(["nvidia-smi", "-i", GPU, "--query-gpu=name,driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=30).stdout.strip()
    except OSError as e:
        smi = f"nvidia-smi: {e}"
    results["meta"] = {"gpu": smi, "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"), "host": platform.node()}
    save()
    state = tempfile.mkdtemp(prefix="gpuslice-state-")
    os.environ["GPUSLICE_STATE_DIR"] = state
    alone = {}

    def train_alone_stock(label):
        r = run_all(label, [("a", train(TRAIN_S), None)])
        thr, _ = window_throughput(r)
        alone["steps_per_s"] = thr["a"]
        return {"steps_per_s": thr["a"]}

    def train_alone_30(label):
        r = run_all(label, [("a", train(TRAIN_S), ("alone30", "--compute", "30"))])
        thr, _ = window_throughput(r)
        return {"steps_per_s": thr["a"], "vs_stock_alone": thr["a"] / alone["steps_per_s"],
                "slices_set": applied_slices(label, "a")}

    def shares(a, b):
        def fn(label):
            procs = [("a", train(SHARE_S), (f"s{a}", "--compute", str(a))),
                     ("b", train(SHARE_S), (f"s{b}", "--compute", str(b)))]
            thr, window = window_throughput(run_all(label, procs))
            sa, sb = thr["a"] / alone["steps_per_s"], thr["b"] / alone["steps_per_s"]
            return {"target": [a, b], "share_vs_alone_pct": [round(100 * sa, 2), round(100 * sb, 2)],
                    "share_of_total_pct": [round(100 * sa / (sa + sb), 2), round(100 * sb / (sa + sb), 2)],
                    "gpu_used_pct": round(100 * (sa + sb), 2), "window_s": round(window, 1),
                    "slices_set": {"a": applied_slices(label, "a"), "b": applied_slices(label, "b")}}
        return fn

    def share_stock(label):
        thr, window = window_throughput(run_all(label, [("a", train(SHARE_S), None), ("b", train(SHARE_S), None)]))
        sa, sb = thr["a"] / alone["steps_per_s"], thr["b"] / alone["steps_per_s"]
        return {"share_vs_alone_pct": [round(100 * sa, 2), round(100 * sb, 2)], "window_s": round(window, 1)}

    lc_iters = {}

    def lc(label, be_vgpu=None, lc_vgpu=None, with_be=True):
        procs = []
        if with_be:
            procs.append(("be", [LC_BE, "be", str(LC_S + 6), "{out}"], be_vgpu))
        procs.append(("lc", [LC_BE, "lc", str(LC_S), "{out}"], lc_vgpu))
        r = run_all(label, procs, stagger_s=2.5, extra_env=lc_iters)
        if not with_be and "iters" in r["lc"]:
            lc_iters["LC_ITERS"] = str(r["lc"]["iters"])
        if with_be:
            r["be_slices_set"] = applied_slices(label, "be")
            r["lc_slices_set"] = applied_slices(label, "lc")
        return r

    scenario("train_alone_stock", train_alone_stock)
    scenario("train_alone_30", train_alone_30)
    scenario("share_30_70", shares(30, 70))
    scenario("share_10_90", shares(10, 90))
    scenario("share_stock", share_stock)
    scenario("lc_alone", lambda label: lc(label, with_be=False))
    scenario("lc_be_stock", lambda label: lc(label))
    scenario("lc_be_gpuslice", lambda label: lc(label, ("be", "--priority", "be"), ("lc", "--priority", "lc")))
    shutil.rmtree(state, ignore_errors=True)
    results["meta"]["seconds"] = round(time.monotonic() - STARTED, 1)
    save()
    print(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
