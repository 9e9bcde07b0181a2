"""Priority levels on the GPU (issue 12): three levels at once.

Cells (each vGPU a standalone `gpuslice run`, the node's default levels:
critical, high (lc), normal, low (be)):
  alone_tiny, alone_graph, alone_gpu, alone_launch   each load alone, no gpuslice
  stock3          tiny + graph + gpu training, no gpuslice (stock time-slicing)
  levels3         tiny@critical, graph@high, gpu training@low
  levels3_swapped graph@critical, tiny@high, gpu training@low: the level, not
                  the workload, decides who is protected
  lc_equal        tiny@lc, graph@lc, gpu training@be: two LCs of one level
  be_levels       gpu training@normal beside launch-bound training@low
  be_equal        both trainings @low: the reference for be_levels
  graph_high_be_low, tiny_critical_be_low   two of levels3's three loads

Every LC's p50/p99 is reported against its alone run, every training's
steps/s against its alone run (the BE rate over the LCs' common window).
The lowest level must keep making progress (not starve).

Reuses bench/gpu/matrix (children, fake stand-ins, helpers) and
bench/gpu/compute (lc_be, train.py). Writes $OUT/levels.json after every
cell. FAKE=1 runs the plumbing with bench/gpu/matrix/fake.py.

    bash bench/gpu/with_bundle.sh env SCRATCH=/tmp/levels timeout 590 python3 bench/gpu/levels/run_levels.py
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "matrix"))
import run_matrix as rm  # noqa: E402
from run_matrix import rc  # noqa: E402

OUT = Path(os.environ.get("OUT", "/tmp/gpuslice-levels"))
SCRATCH = Path(os.environ.get("SCRATCH", str(OUT)))
S = rm.env_f("LEVEL_SECONDS", 15)
BUDGET_S = rm.env_f("BENCH_BUDGET_S", 560)
DIAG = os.environ.get("LEVEL_DIAG") == "1"  # board dumps, and the logs packed into $OUT/levels-logs.tgz
STARTED = time.monotonic()
RESULTS = {"meta": {"seconds_per_phase": S, "graph_rate": rm.GRAPH_RATE, "tiny_period_us": rm.PERIOD_US,
                    "fake": rm.FAKE}, "cells": {}}


def left():
    return BUDGET_S - (time.monotonic() - STARTED)


def save():
    OUT.mkdir(parents=True, exist_ok=True)
    tmp = OUT / "levels.json.tmp"
    tmp.write_text(json.dumps(RESULTS, indent=1))
    tmp.replace(OUT / "levels.json")


def tiny():
    if rm.FAKE:
        return [sys.executable, str(rm.FAKE_PY), "tiny", f"{S:g}", "{out}"]
    return [rc.LC_BE, "lc", f"{S:g}", "{out}"]


def graph_env():
    return {"LC_PHASES": "graph", "PHASE_S": S, "GRAPH_RATE": rm.GRAPH_RATE}


def run(label, loads, hold_s=0.0):
    """loads: (tag, cmd, role, vgpu, env); role bg (READY/STOP), gated
    (READY, waits for GO) or go (started at GO). bg and gated start first;
    once all are ready, GO: the gated and go ones run together to their
    end, then hold_s, then STOP. Returns ({tag: result}, t_go, t_stop)."""
    logs, work = SCRATCH / "logs", SCRATCH / "work"
    logs.mkdir(parents=True, exist_ok=True)
    work.mkdir(parents=True, exist_ok=True)
    deadline = time.monotonic() + min(4 * S + 90, max(5.0, left()))
    stop, go = work / f"{label}.stop", work / f"{label}.go"
    stop.unlink(missing_ok=True)
    go.unlink(missing_ok=True)
    running = []

    def start(tag, cmd, role, vgpu, extra):
        out, ready = work / f"{label}-{tag}.json", work / f"{label}-{tag}.ready"
        out.unlink(missing_ok=True)
        ready.unlink(missing_ok=True)
        env = dict(os.environ, GPUSLICE_LOG="info", CUDA_VISIBLE_DEVICES=rc.GPU, READY_FILE=str(ready),
                   STOP_FILE=str(stop), GO_FILE=str(go))
        if rm.FAKE:
            env.update(FAKE_CONTEXT=label, FAKE_TENANTS=str(sum(1 for ld in loads if ld[2] == "bg")))
        env.update({k: f"{v:g}" if isinstance(v, float) else str(v) for k, v in extra.items()})
        with open(logs / f"{label}-{tag}.log", "w") as log:
            full = rc.wrap([str(out) if c == "{out}" else c for c in cmd], vgpu)
            p = subprocess.Popen(full, env=env, stdout=log, stderr=log, start_new_session=True)
        running.append((tag, role, out, p))
        return ready, p

    def wait(p, until):
        try:
            p.wait(timeout=max(0.1, until - time.monotonic()))
        except subprocess.TimeoutExpired:
            rc.kill_group(p)

    dump = None
    if DIAG and not rm.FAKE:  # every board row twice a second, for diagnosing turns and holds
        dump = subprocess.Popen([sys.executable, str(HERE.parent / "matrix" / "board_dump.py"),
                                 os.environ["GPUSLICE_STATE_DIR"], "0.25"],
                                stdout=open(logs / f"{label}-boards.log", "w"), stderr=subprocess.STDOUT)
    try:
        first = [start(*ld) for ld in loads if ld[2] in ("bg", "gated")]
        while not all(r.exists() for r, _ in first):
            if any(p.poll() is not None for _, p in first) or time.monotonic() > deadline:
                raise RuntimeError("a load did not get ready: " + " | ".join(
                    f"{t}: {rc.log_tail(logs / f'{label}-{t}.log', 300)}" for t, _, _, _ in running))
            time.sleep(0.02)
        time.sleep(0.5)
        t_go = time.monotonic()
        go.touch()
        for ld in loads:
            if ld[2] == "go":
                start(*ld)
        for _, role, _, p in list(running):
            if role in ("gated", "go"):
                wait(p, deadline)
        if hold_s:
            time.sleep(max(0.0, min(hold_s, deadline - time.monotonic())))
        t_stop = time.monotonic()
        stop.touch()
        for _, role, _, p in running:
            if role == "bg":
                wait(p, min(deadline, time.monotonic() + 30))
    finally:
        for _, _, _, p in running:
            if p.poll() is None:
                rc.kill_group(p)
        if dump is not None:
            dump.kill()
            dump.wait()
    parsed = {}
    for tag, _, out, p in running:
        try:
            parsed[tag] = json.loads(out.read_text())
        except (OSError, ValueError):
            parsed[tag] = {}
        if p.returncode != 0:
            parsed[tag]["error"] = f"exit status {p.returncode}"
            parsed[tag]["log_tail"] = rc.log_tail(logs / f"{label}-{tag}.log")
    return parsed, t_go, t_stop


def lc_figures(r, tag):
    d = r.get(tag, {})
    if tag == "graph":
        ph = d.get("phases", {}).get("graph")
        if ph is None:
            return {"error": d.get("error", "no graph phase"), "log_tail": d.get("log_tail", "")[-300:]}
        return {**rm.lat(ph), "t_start": ph["t_start"], "t_end": ph["t_end"]}
    if "p99_us" not in d:
        return {"error": d.get("error", "no result"), "log_tail": d.get("log_tail", "")[-300:]}
    return {**rm.lat(d), "t_start": d["t_start"], "t_end": d["t_end"]}


def vgpu(label, tag, level):
    return None if level is None else (rm.dash(f"{label}-{tag}"), "--priority", level)


def lc_cell(label, tiny_level, graph_level, be_level, gpuslice=True):
    """The GPU-bound training beside the tiny and/or graph LC; a level of
    None leaves that LC out (gpuslice=False: every load without gpuslice)."""
    lv = (lambda x: x) if gpuslice else (lambda x: None)
    loads = [("be", rm.cmd_be("gpu"), "bg", vgpu(label, "be", lv(be_level)), {})]
    if graph_level is not None:
        loads.append(("graph", rm.cmd_lctf(), "gated", vgpu(label, "graph", lv(graph_level)), graph_env()))
    if tiny_level is not None:
        loads.append(("tiny", tiny(), "go", vgpu(label, "tiny", lv(tiny_level)), {"PERIOD_US": rm.PERIOD_US}))
    r, t_go, _ = run(label, loads)
    out = {"levels": {"tiny": tiny_level, "graph": graph_level, "be_gpu": be_level} if gpuslice else "stock"}
    windows = []
    for tag in ("tiny", "graph"):
        if tag not in r:
            continue
        f = lc_figures(r, tag)
        if "t_start" in f:
            windows.append((f.pop("t_start"), f.pop("t_end")))
        out[tag] = f
    be = r.get("be", {})
    if "step_ends" not in be:
        out["be_gpu"] = {"error": be.get("error", "no steps"), "log_tail": be.get("log_tail", "")[-300:]}
    elif windows:
        t0, t1 = max(w[0] for w in windows), min(w[1] for w in windows)
        if t1 - t0 < 2:  # the LCs barely overlapped: take their union
            t0, t1 = min(w[0] for w in windows), max(w[1] for w in windows)
        rate, err = rm.window_rate(be["step_ends"], t0, t1)
        out["be_gpu"] = {"steps_per_s": round(rate, 4)} if rate is not None else {"error": err}
        out["lc_overlap_s"] = round(t1 - t0, 2)
    return out


def be_cell(label, levels):
    loads = [(kind, rm.cmd_be(kind), "bg", vgpu(label, kind, level), {}) for kind, level in levels.items()]
    r, t_go, t_stop = run(label, loads, hold_s=S)
    out = {"levels": levels}
    for kind in levels:
        d = r.get(kind, {})
        rate, err = rm.window_rate(d.get("step_ends", []), t_go, t_stop) if "step_ends" in d else (None, d.get(
            "error", "no steps"))
        out["be_" + kind] = {"steps_per_s": round(rate, 4)} if rate is not None else {"error": err}
    return out


def alone_lc(label, tag):
    if tag == "tiny":
        r, _, _ = run(label, [("tiny", tiny(), "go", None, {"PERIOD_US": rm.PERIOD_US})])
    else:
        r, _, _ = run(label, [("graph", rm.cmd_lctf(), "gated", None, graph_env())])
    f = lc_figures(r, tag)
    f.pop("t_start", None), f.pop("t_end", None)
    return {tag: f}


def alone_be(label, kind):
    return be_cell(label, {kind: None})


CELLS = [
    ("alone_tiny", lambda l: alone_lc(l, "tiny")),
    ("alone_graph", lambda l: alone_lc(l, "graph")),
    ("alone_gpu", lambda l: alone_be(l, "gpu")),
    ("alone_launch", lambda l: alone_be(l, "launch")),
    ("levels3", lambda l: lc_cell(l, "critical", "high", "low")),
    ("levels3_swapped", lambda l: lc_cell(l, "high", "critical", "low")),
    ("stock3", lambda l: lc_cell(l, "-", "-", "-", gpuslice=False)),
    ("lc_equal", lambda l: lc_cell(l, "lc", "lc", "be")),
    ("be_levels", lambda l: be_cell(l, {"gpu": "normal", "launch": "low"})),
    # Two loads at a time: which pair of the three makes levels3 what it is.
    ("graph_high_be_low", lambda l: lc_cell(l, None, "high", "low")),
    ("tiny_critical_be_low", lambda l: lc_cell(l, "critical", None, "low")),
    ("be_equal", lambda l: be_cell(l, {"gpu": "low", "launch": "low"})),
]


def ratios():
    """Each figure against its alone run: LC p50/p99 as x alone, BE as kept."""
    c = RESULTS["cells"]
    ref = {"tiny": c.get("alone_tiny", {}).get("tiny", {}), "graph": c.get("alone_graph", {}).get("graph", {}),
           "gpu": c.get("alone_gpu", {}).get("be_gpu", {}), "launch": c.get("alone_launch", {}).get("be_launch", {})}
    rows = []
    for name, cell in c.items():
        if name.startswith("alone") or "error" in cell:
            continue
        row = {"cell": name, "levels": cell.get("levels")}
        for tag in ("tiny", "graph"):
            f, a = cell.get(tag, {}), ref[tag]
            if "p99_us" in f and "p99_us" in a:
                row[tag] = {"p50_x": round(f["p50_us"] / a["p50_us"], 3), "p99_x": round(f["p99_us"] / a["p99_us"], 3)}
        for kind in ("gpu", "launch"):
            f, a = cell.get("be_" + kind, {}), ref[kind]
            if "steps_per_s" in f and a.get("steps_per_s"):
                row["be_" + kind + "_kept"] = round(f["steps_per_s"] / a["steps_per_s"], 3)
        rows.append(row)
    RESULTS["vs_alone"] = rows


def main():
    OUT.mkdir(parents=True, exist_ok=True)
    own_state = "GPUSLICE_STATE_DIR" not in os.environ
    if own_state:  # the default levels: no levels.yaml in a fresh state directory
        os.environ["GPUSLICE_STATE_DIR"] = tempfile.mkdtemp(prefix="gs-levels-")
    only = [c for c in os.environ.get("LEVEL_CELLS", "").split(",") if c]
    try:
        for name, fn in CELLS:
            if only and name not in only:
                continue
            if left() < 2 * S + 30:
                RESULTS["cells"][name] = {"error": "skipped: out of time budget"}
                continue
            t = time.monotonic()
            try:
                RESULTS["cells"][name] = fn(name)
            except Exception as e:  # a cell's failure is a result, never the end of the run
                RESULTS["cells"][name] = {"error": f"{type(e).__name__}: {e}"}
            RESULTS["cells"][name]["seconds"] = round(time.monotonic() - t, 1)
            ratios()
            save()
            print(name, json.dumps(RESULTS["cells"][name])[:400], flush=True)
    finally:
        if own_state:
            shutil.rmtree(os.environ["GPUSLICE_STATE_DIR"], ignore_errors=True)
        RESULTS["meta"]["seconds"] = round(time.monotonic() - STARTED, 1)
        ratios()
        save()
        if DIAG and (SCRATCH / "logs").is_dir():
            subprocess.run(["tar", "czf", str(OUT / "levels-logs.tgz"), "-C", str(SCRATCH), "logs"], check=False)
    print(json.dumps(RESULTS["vs_alone"], indent=1))


if __name__ == "__main__":
    main()
