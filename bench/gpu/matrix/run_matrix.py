"""The workload matrix (issue 10): compute and priority on any workload mix.

One run measures, on one GPU, every latency-critical (LC) kind beside every
best-effort (BE) kind, with and without gpuslice, plus compute shares between
different trainings and compute caps, and writes ONE table:
$OUT/matrix.json (rewritten after every cell, so a run cut short keeps what
it got) and $OUT/matrix.md (the tables, also rewritten after every cell).

    bash bench/gpu/with_bundle.sh env OUT=/tmp/out MATRIX_GROUPS=lc python3 bench/gpu/matrix/run_matrix.py
    bash bench/gpu/with_bundle.sh env OUT=/tmp/out MATRIX_GROUPS=share,cap python3 bench/gpu/matrix/run_matrix.py
    OUT=/tmp/all python3 bench/gpu/matrix/run_matrix.py merge lc/matrix.json sharecap/matrix.json

Workloads (children; `tiny` and `gpu` are bench/gpu/compute's):
  LC  tiny   lc_be lc: a ~50 us GPU-filling kernel at 200 req/s (PERIOD_US)
      graph  lc_tf.py: a 6-layer d_model 512 encoder, batch 1, seq 128, bf16,
             captured once as a CUDA graph, replayed at GRAPH_RATE (100) req/s
      eager  lc_tf.py: the same model eagerly (~100 small kernels), one request
             every max(15 ms, 2 x its time alone)
  BE  gpu    compute/train.py: 6-layer d_model 1024 transformer, batch 64
      launch be_load.py launch: resnet18, batch 32 of 32x32, AdamW
      mem    be_load.py mem: addcmul + copy over 1 GiB fp32 tensors

Cells (group: name):
  alone  lc_alone            the torch LC (phases graph, eager) then tiny, no BE
         be_alone_<be>       each BE alone, no gpuslice: the reference
  lc     lcbe_<be>_stock     one BE in the background; the torch LC (phases
                             graph then eager, PHASE = MATRIX_SECONDS each),
                             then tiny (MATRIX_SECONDS); no gpuslice
         lcbe_<be>_gpuslice  the same, LC in vGPUs with --priority lc (torch
                             LC and tiny each their own), BE with --priority be
         lc_alone_end        lc_alone again, after those (LC_ALONE_END=0: not):
                             the x alone figures use the mean of both runs,
                             and the two show how far alone moves by itself
  cap    cap<N>_<be>         each BE alone in a vGPU with --compute-cap N (30)
  (end)  be_alone_<be>_end   BE_ALONE_END kinds alone again, last (no verdict)
  share  mix_<k><t>_..._stock / _gpuslice
                             trainings together (MIXES), without gpuslice /
                             each in a vGPU with --compute t
MATRIX_GROUPS=lc,cap,share (the default: all) picks groups (not GROUPS:
bash ignores assignments to that name); the alone cells the chosen cells need
are added. CELLS / SKIP_CELLS pick or leave out cells by name. One LC x BE cell of the table is one LC kind inside an lcbe_<be>_<setting>
run: one background BE serves all LC kinds one after the other, so the BE
starts once per (BE, setting), and each LC kind's BE throughput is counted
over that kind's own window.

Sequence of an LC x BE run: the BE and the torch LC start together; the
torch LC initialises (model, capture, warm-up) and waits at a GO file; once
the BE has posted READY_FILE (its warm-up done) and the torch LC is ready,
SETTLE_S later, GO: the torch LC runs its phases and exits; then the tiny LC
runs; then the BE is stopped (STOP_FILE). The torch LC's eager period and
tiny's kernel length come from lc_alone (measured alone: under a BE they
would measure the wait).

Figures (per cell; `matrix.md` shows them with pass/miss):
  LC p50/p99    submission to completion, warm-up 5% dropped; lc_tf.py also
                records from-arrival latency (`arr_p50_us`, `arr_p99_us`)
  x alone / x stock   the gpuslice figure over alone's / stock's
  BE kept       BE steps/s over the LC kind's window / BE alone's steps/s
  be_vs_idle_left   BE steps/s / (alone x (1 - LC busy)); LC busy = tiny's
                kernel time x 200/s; graph: one replay's GPU time alone x
                rate; eager: the same replay time x eager rate (the same
                kernels, the GPU idles in the launch gaps)
  share         per tenant: steps/s over the window when all ran / alone
                (`frac`); split = frac / sum(frac), against the target in pp;
                total = sum(frac); gpuslice's total over stock's
  cap           steps/s in the capped vGPU / alone x 100 (target N +- 3)
Targets: LC p99 <= 1.2 x alone (eager: p50 <= 1.1 x alone and <= stock);
BE kept >= 90%; split within 2 pp; total >= 95% of stock's; cap within 3 pp.

Env knobs: OUT (/tmp/gpuslice-matrix), SCRATCH (where logs/ and work/ go;
default OUT), PACK_LOGS=1 (tar SCRATCH's logs/ and work/ into
OUT/matrix-logs.tgz at the end), GPUSLICE_CMD / GPUSLICE_BIN, LC_BE, PYTHON,
BENCH_GPU (0), BENCH_BUDGET_S (540: a cell whose estimate does not fit in
what is left is recorded as skipped), MATRIX_GROUPS, CELLS, SKIP_CELLS, LC_KINDS
(tiny,graph,eager), BE_KINDS (gpu,launch,mem; copy when named: be_load.py; groups gpu+mem, two BE
vGPUs, and gpu*2, two processes in one BE vGPU: be_members), CAP_KINDS (= BE_KINDS' plain kinds),
CAP_PCT (30), CAP_PRIORITY (be; lc: the capped vGPU is latency-critical), LC_FLAGS (more flags
for the gpuslice LC vGPUs, e.g. "--compute-cap 30"), MIXES ("gpu:25+launch:75,launch:50+mem:50,gpu:30+mem:70,
gpu:20+launch:30+mem:50"), MATRIX_SECONDS (10: each LC phase and BE alone
window), SHARE_S (15), CAP_S (10), SETTLE_S (0.5), GRAPH_RATE (100),
EAGER_MIN_PERIOD_MS (15), EAGER_FACTOR (2), PERIOD_US (5000, tiny),
LC_GC (freeze: lc_tf.py's Python collector off while it serves; on), LC_IO (0; 1: each
torch LC request copies its input in and its output out, lc_tf.py),
LC_ALONE_END (1), BE_ALONE_END (launch: BE kinds measured alone again at
the end of a run that measured them, be_alone_<be>_end), SMI_MS (0: sample GPU clocks etc. with nvidia-smi every
SMI_MS ms during each run, recorded per window as `gpu`), PRIOR (a previous matrix.json: its cells are kept unless re-run; with
REUSE_ALONE=1 its alone cells serve as references instead of re-running
them), GPUSLICE_STATE_DIR (a fresh temporary one unless set), DRY_RUN=1 (the
plan, with estimates per cell and group; runs nothing), FAKE=1 (fake.py
stands in for gpuslice and every child: exercises this driver without a GPU).

Standard library only (the children import torch).
"""
import contextlib
import json
import os
import re
import platform
import shutil
import signal
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
COMPUTE = HERE.parent / "compute"
sys.path.insert(0, str(COMPUTE))
import run_compute as rc  # noqa: E402 - its plumbing: wrap, kill_group, log_tail, rate_between, applied_slices

OUT = Path(os.environ.get("OUT", "/tmp/gpuslice-matrix"))
SCRATCH = Path(os.environ.get("SCRATCH", str(OUT)))
rc.OUT = SCRATCH  # rc's helpers read logs from rc.OUT / "logs"
FAKE = os.environ.get("FAKE") == "1"
FAKE_PY = HERE / "fake.py"
if FAKE:
    rc.GPUSLICE = f"{sys.executable} {FAKE_PY} gpuslice"
PYTHON = rc.PYTHON


def env_f(name, default):
    v = os.environ.get(name, "")
    return float(v) if v.strip() else float(default)


def env_list(name, default):
    return [t.strip() for t in os.environ.get(name, default).split(",") if t.strip()]


LC_KINDS_ALL, BE_KINDS_ALL = ("tiny", "graph", "eager"), ("gpu", "launch", "mem", "copy")
LC_KINDS = env_list("LC_KINDS", ",".join(LC_KINDS_ALL))
BE_KINDS = env_list("BE_KINDS", "gpu,launch,mem")  # copy: only when asked; groups: be_members


def be_members(token):
    """The BE processes of one BE_KINDS token, as (kind, vGPU index):
    `gpu` one process; `gpu+mem` one process of each kind, each in its own BE
    vGPU (equal shares); `gpu*2` two processes of one kind in ONE BE vGPU.
    None when the token is none of these."""
    if "*" in token:
        kind, _, n = token.partition("*")
        return [(kind, 0)] * int(n) if kind in BE_KINDS_ALL and n.isdigit() and 2 <= int(n) <= 8 else None
    kinds = token.split("+")
    return [(k, i) for i, k in enumerate(kinds)] if all(k in BE_KINDS_ALL for k in kinds) else None


def be_kinds_of(tokens):
    """The plain BE kinds that the tokens name (what their alone cells are)."""
    return list(dict.fromkeys(k for t in tokens for k, _ in (be_members(t) or [])))


CAP_KINDS = env_list("CAP_KINDS", ",".join(k for k in BE_KINDS if k in BE_KINDS_ALL))
TORCH_LC = [k for k in LC_KINDS if k in ("graph", "eager")]
S = env_f("MATRIX_SECONDS", 10)
SHARE_S = env_f("SHARE_S", 15)
CAP_S = env_f("CAP_S", 10)
CAP_PCT = int(env_f("CAP_PCT", 30))
CAP_PRIORITY = os.environ.get("CAP_PRIORITY", "be")  # the capped vGPU's --priority (lc: first, within its cap)
LC_FLAGS = os.environ.get("LC_FLAGS", "").split()  # more flags for the LC's vGPU (e.g. --compute-cap 30)
SETTLE_S = env_f("SETTLE_S", 0.5)
GRAPH_RATE = env_f("GRAPH_RATE", 100)
PERIOD_US = env_f("PERIOD_US", 5000)
BUDGET_S = env_f("BENCH_BUDGET_S", 540)
MIXES_TEXT = os.environ.get("MIXES", "gpu:25+launch:75,launch:50+mem:50,gpu:30+mem:70,gpu:20+launch:30+mem:50")
# Start-up estimates (s), for the budget, a bit pessimistic on purpose: a
# torch process (import, model, warm-up; the processes of one run start
# together) and lc_be; then what a run adds (settle, stop, reap).
# (An H100 smoke run: train.py's run alone took 12-14 s besides its window.)
TORCH_UP, C_UP, RUN_OVERHEAD = (1.0, 0.3, 0.5) if FAKE else (11.0, 2.0, 2.0)
STARTED = time.monotonic()

# Targets
LC_P99_X = 1.2
EAGER_P50_X = 1.1
BE_KEPT_MIN = 0.90
SPLIT_PP = 2.0
TOTAL_MIN = 0.95
CAP_PP = 3.0

results = {"meta": {}, "cells": {}}


def left():
    return BUDGET_S - (time.monotonic() - STARTED)


def dash(name):
    """A vGPU name from a cell's: [A-Za-z0-9_.-]{1,63} (vgpu_layout.h); the
    end (which names the tenant) is kept when a long mix needs cutting."""
    return re.sub(r"[^A-Za-z0-9.-]", "-", name)[-63:]


# ---------------------------------------------------------------- children

def cmd_be(kind, seconds=600):
    if FAKE:
        return [sys.executable, str(FAKE_PY), "be", kind, str(seconds), "{out}"]
    if kind == "gpu":
        return [PYTHON, str(COMPUTE / "train.py"), str(seconds), "{out}"]
    return [PYTHON, str(HERE / "be_load.py"), kind, str(seconds), "{out}"]


def cmd_lctf():
    if FAKE:
        return [sys.executable, str(FAKE_PY), "lctf", "{out}"]
    return [PYTHON, str(HERE / "lc_tf.py"), "{out}"]


def cmd_tiny():
    if FAKE:
        return [sys.executable, str(FAKE_PY), "tiny", f"{S:g}", "{out}"]
    return [rc.LC_BE, "lc", f"{S:g}", "{out}"]


def missing_tools(need_gpuslice):
    """Why a run cannot start (a binary that is not there), or None."""
    if FAKE:
        return None
    # GPUSLICE_CMD (a loader prefix, a wrapper) is taken as given; a plain
    # GPUSLICE_BIN must exist, else every gpuslice cell would fail at start.
    if need_gpuslice and not os.environ.get("GPUSLICE_CMD"):
        exe = rc.GPUSLICE
        if not (Path(exe).is_file() or shutil.which(exe)):
            return f"no gpuslice binary at {exe} (GPUSLICE_BIN / GPUSLICE_CMD)"
    return None


def tiny_missing():
    if FAKE or Path(rc.LC_BE).is_file():
        return None
    return f"no lc_be binary at {rc.LC_BE} (bash bench/gpu/compute/build.sh; LC_BE)"


class Load:
    """One child process of a run. role:
      bg     background: starts at once, creates READY_FILE once warm, stops
             once STOP_FILE exists (train.py, be_load.py)
      gated  foreground, starts at once, creates READY_FILE once initialised
             and waits for GO_FILE (lc_tf.py)
      seq    foreground, started after the gated ones have exited, one after
             the other (lc_be lc)
    cmd: "{out}" stands for its result file. vgpu: (name, flags...) to run it
    in a vGPU (rc.wrap), else None. env: added (a None value removes it)."""

    def __init__(self, tag, cmd, role, vgpu=None, env=None):
        self.tag, self.cmd, self.role, self.vgpu, self.env = tag, cmd, role, vgpu, env or {}


class Smi:
    """GPU clocks, utilisation and power sampled by nvidia-smi every
    SMI_MS ms (0: off, the default) during a run, each sample stamped with the parent's
    time.monotonic() on arrival, so a window (an LC phase, a BE window) gets
    its own means. Why: an LC alone leaves the GPU idle between requests and
    its clocks may drop there, while a BE beside it keeps them up; these
    figures say whether a latency moved with the clock. Off by default: a
    query may itself stall the GPU's clients (not settled; see the README).
    Never in FAKE runs or without nvidia-smi."""

    FIELDS = ("sm_mhz", "mem_mhz", "util_pct", "power_w")

    def __init__(self, path):
        self.samples, self.p = [], None
        ms = int(env_f("SMI_MS", 0))
        if FAKE or ms <= 0 or not shutil.which("nvidia-smi"):
            return
        self.log = open(path, "w")
        self.p = subprocess.Popen(["nvidia-smi", "-i", rc.GPU, "--query-gpu=clocks.sm,clocks.mem,utilization.gpu,"
                                   "power.draw", "--format=csv,noheader,nounits", f"-lms={ms}"],
                                  stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                                  start_new_session=True)
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self):
        for line in self.p.stdout:
            self.log.write(line)
            with contextlib.suppress(ValueError):
                self.samples.append((time.monotonic(), *(float(x) for x in line.split(","))))

    def stop(self):
        if self.p is not None:
            rc.kill_group(self.p)
            self.thread.join(timeout=5)
            self.log.close()

    def window(self, t0, t1):
        """Means over [t0, t1] (and the SM clock's min and max), or None."""
        inside = [x for x in self.samples if t0 <= x[0] <= t1]
        if not inside:
            return None
        out = {f: round(sum(x[i + 1] for x in inside) / len(inside), 1) for i, f in enumerate(self.FIELDS)}
        out.update(sm_mhz_min=min(x[1] for x in inside), sm_mhz_max=max(x[1] for x in inside), samples=len(inside))
        return out


def run_cell(label, loads, limit_s, hold_s=0.0):
    """Runs one cell's loads (see Load): bg and gated start together; once all
    of them are ready, SETTLE_S later, GO; the gated ones run to their end,
    then each seq one, then hold_s more seconds; then STOP. Everything is
    killed at limit_s (cut to the budget). Returns ({tag: parsed result file,
    with "error" and "log_tail" when it failed}, {"t_go", "t_stop", "smi": the
    run's Smi sampler, stopped}).

    Unlike rc.run_all, which starts every foreground child at once after the
    background ones are ready, this lets several LC programs take turns beside
    one background load, and lets an LC initialise during the BE's warm-up."""
    logs, work = SCRATCH / "logs", SCRATCH / "work"
    logs.mkdir(parents=True, exist_ok=True)
    work.mkdir(parents=True, exist_ok=True)
    deadline = time.monotonic() + min(limit_s, max(5.0, left() + 10))
    stop, go = work / f"{label}.stop", work / f"{label}.go"
    stop.unlink(missing_ok=True)
    go.unlink(missing_ok=True)
    running = []  # (load, out, ready, popen)
    times = {"smi": Smi(logs / f"{label}-smi.csv")}

    def start(ld):
        out, ready = work / f"{label}-{ld.tag}.json", work / f"{label}-{ld.tag}.ready"
        out.unlink(missing_ok=True)
        ready.unlink(missing_ok=True)
        env = dict(os.environ, GPUSLICE_LOG="info", CUDA_VISIBLE_DEVICES=rc.GPU, READY_FILE=str(ready))
        if ld.role == "bg":
            env["STOP_FILE"] = str(stop)
        if ld.role == "gated":
            env["GO_FILE"] = str(go)
        if FAKE:
            env.update(FAKE_CONTEXT=label, FAKE_TENANTS=str(sum(1 for x in loads if x.role == "bg")))
        for k, v in ld.env.items():
            if v is None:
                env.pop(k, None)
            else:
                env[k] = f"{v:g}" if isinstance(v, float) else str(v)
        with open(logs / f"{label}-{ld.tag}.log", "w") as log:
            full = rc.wrap([str(out) if c == "{out}" else c for c in ld.cmd], ld.vgpu)
            p = subprocess.Popen(full, env=env, stdout=log, stderr=log, start_new_session=True)
        running.append((ld, out, ready, p))
        return ready, p

    def wait(p, until):
        try:
            p.wait(timeout=max(0.1, until - time.monotonic()))
        except subprocess.TimeoutExpired:
            rc.kill_group(p)

    try:
        first = [start(ld) for ld in loads if ld.role in ("bg", "gated")]
        while not all(r.exists() for r, _ in first):
            if any(p.poll() is not None for _, p in first) or time.monotonic() > deadline:
                raise RuntimeError("a load did not get ready: " + " | ".join(
                    f"{ld.tag}: {rc.log_tail(logs / f'{label}-{ld.tag}.log', 300)}"
                    for ld, _, _, _ in running))
            time.sleep(0.02)
        if first:
            time.sleep(SETTLE_S)
        times["t_go"] = time.monotonic()
        go.touch()
        for ld, _, _, p in list(running):
            if ld.role == "gated":
                wait(p, deadline)
        for ld in loads:
            if ld.role == "seq" and time.monotonic() < deadline:
                wait(start(ld)[1], deadline)
        if hold_s > 0:
            time.sleep(max(0.0, min(hold_s, deadline - time.monotonic())))
        times["t_stop"] = time.monotonic()
        stop.touch()
        for ld, _, _, p in running:
            if ld.role == "bg":
                wait(p, min(deadline, time.monotonic() + 30))
    finally:
        for _, _, _, p in running:
            if p.poll() is None:
                rc.kill_group(p)
        times["smi"].stop()
    parsed = {}
    for ld, out, _, p in running:
        try:
            parsed[ld.tag] = json.loads(out.read_text())
        except (OSError, ValueError):
            parsed[ld.tag] = {}
        if p.returncode != 0:
            parsed[ld.tag]["error"] = f"exit status {p.returncode}"
            parsed[ld.tag]["log_tail"] = rc.log_tail(logs / f"{label}-{ld.tag}.log")
    return parsed, times


def check(r, *tags):
    for t in tags:
        if "error" in r.get(t, {"error": "did not run"}):
            raise RuntimeError(f"{t}: {r.get(t, {}).get('error', 'did not run')}: "
                               f"{r.get(t, {}).get('log_tail', '')[-300:]}")


# Library log lines worth counting per child (lower case): gate / GPU-turn
# waits and switches, the LC hold, residency. Optional: counted where printed.
LOG_PATTERNS = ("gate", "gpu turn", "hold", "residency")


def log_facts(label, tag):
    """What the library logged (GPUSLICE_LOG=info) for one child: the
    timeslices it set (rc.applied_slices), whether it joined a vGPU, and how
    many lines matched each of LOG_PATTERNS, with the last few of them."""
    text = rc.log_tail(SCRATCH / "logs" / f"{label}-{tag}.log", 1 << 22)
    lines = text.splitlines()
    matched = [ln.strip() for ln in lines if any(p in ln.lower() for p in LOG_PATTERNS)]
    return {"joined": "joined vGPU" in text, "slices_set": rc.applied_slices(label, tag),
            "log_counts": {p: sum(1 for ln in lines if p in ln.lower()) for p in LOG_PATTERNS},
            "log_last": [ln[:200] for ln in matched[-4:]]}


def need(name):
    """An alone cell's result (this run's or PRIOR's), or an error."""
    r = results["cells"].get(name)
    if not r or "error" in r or "skipped" in r:
        raise RuntimeError(f"reference cell '{name}' missing: it failed or was skipped")
    return r


def lat(d):
    return {k: d[k] for k in ("n", "p50_us", "p90_us", "p99_us", "max_us", "mean_us", "arr_p50_us", "arr_p99_us",
                              "behind", "rate", "period_ms") if k in d}


def window_rate(ends, t0, t1):
    try:
        return rc.rate_between(ends, t0, t1), None
    except RuntimeError as e:
        return None, str(e)


def spread(ends, t0, t1):
    """Min and max of the completions per whole second of [t0, t1]: how
    steady a load was (a launch-bound Python training varies with the host)."""
    n = int(t1 - t0)
    if n < 2:
        return None
    counts = [0] * n
    for e in ends:
        if t0 <= e < t0 + n:
            counts[int(e - t0)] += 1
    return {"per_s_min": min(counts), "per_s_max": max(counts)}


def with_gpu(d, smi, t0, t1):
    """d plus the GPU's clocks etc. over [t0, t1] (Smi), where sampled."""
    w = smi.window(t0, t1)
    if w:
        d["gpu"] = w
    return d


# ---------------------------------------------------------------- cells

def lc_loads(label, alone, vgpu_lc=None):
    """The LC programs of a run: the torch LC (gated) then tiny (seq). alone:
    lc_alone's result, or None in lc_alone itself (which measures)."""
    loads = []
    if TORCH_LC:
        env = {"LC_PHASES": ",".join(TORCH_LC), "PHASE_S": S, "GRAPH_RATE": GRAPH_RATE,
               "EAGER_MIN_PERIOD_MS": env_f("EAGER_MIN_PERIOD_MS", 15), "EAGER_FACTOR": env_f("EAGER_FACTOR", 2)}
        if alone is not None and "eager_period_ms" in alone:
            env["EAGER_PERIOD_MS"] = alone["eager_period_ms"]
        loads.append(Load("lctf", cmd_lctf(), "gated", vgpu_lc and vgpu_lc(f"{label}-tf"), env))
    if "tiny" in LC_KINDS and not tiny_missing() and (alone is None or "tiny_iters" in alone):
        env = {"PERIOD_US": PERIOD_US}
        if alone is not None:
            env["LC_ITERS"] = alone["tiny_iters"]
        loads.append(Load("lctiny", cmd_tiny(), "seq", vgpu_lc and vgpu_lc(f"{label}-tiny"), env))
    return loads


def lc_results(r, alone):
    """{kind: latency figures + window (t_start, t_end)} of one run's LC programs."""
    out = {}
    tf = r.get("lctf")
    for k in TORCH_LC:
        if tf is None:
            out[k] = {"error": "not run"}
        elif k in tf.get("phases", {}):
            ph = tf["phases"][k]
            out[k] = {**lat(ph), "t_start": ph["t_start"], "t_end": ph["t_end"]}
            if "error" in tf:  # a later phase failed; this one completed
                out[k]["note"] = "process " + tf["error"]
        else:
            out[k] = {"error": tf.get("error", "phase missing"), "log_tail": tf.get("log_tail", "")[-400:]}
    if "tiny" in LC_KINDS:
        t = r.get("lctiny")
        if t is None:
            out["tiny"] = {"error": tiny_missing() or "not run (no tiny reference from lc_alone)"}
        elif "error" in t or "p99_us" not in t:
            out["tiny"] = {"error": t.get("error", "no result"), "log_tail": t.get("log_tail", "")[-400:]}
        else:
            out["tiny"] = {**lat(t), "t_start": t["t_start"], "t_end": t["t_end"]}
    return out


def busy_fractions(alone):
    """LC busy fraction per kind, from lc_alone (see the module doc)."""
    busy = {}
    if "tiny_kernel_us" in alone:
        busy["tiny"] = alone["tiny_kernel_us"] * 1e-6 * (1e6 / PERIOD_US)
    g = alone.get("graph_gpu_us")
    if g:
        busy["graph"] = g * 1e-6 * GRAPH_RATE
        if alone.get("eager_period_ms"):
            busy["eager"] = g * 1e-6 * (1000 / alone["eager_period_ms"])
    return {k: round(v, 4) for k, v in busy.items()}


def s_lc_alone(label):
    r, t = run_cell(label, lc_loads(label, None), 3 * est_lc(True) + 30)
    res = {"type": "lc_alone", "lc": lc_results(r, None)}
    tf, tiny = r.get("lctf", {}), r.get("lctiny", {})
    for k in ("graph_gpu_us", "eager_alone_us", "eager_period_ms", "eager_period_source", "model", "torch"):
        if k in tf:
            res[k] = tf[k]
    if "error" not in tiny and "iters" in tiny:
        res["tiny_iters"], res["tiny_kernel_us"] = tiny["iters"], tiny["kernel_us"]
    res["busy"] = busy_fractions(res)
    for v in res["lc"].values():
        if "t_start" in v:
            with_gpu(v, t["smi"], v.pop("t_start"), v.pop("t_end"))
    if all("error" in v for v in res["lc"].values()):
        raise RuntimeError("no LC kind ran: " + "; ".join(f"{k}: {v['error']}" for k, v in res["lc"].items()))
    return res


def s_lc_alone_end(label):
    """The LC programs alone again, at the end of the lc group, with
    lc_alone's eager period and tiny kernel: alone against alone says how
    much an LC's latency moves between runs with nothing beside it (the eager
    request is host-bound, and the host's speed wanders)."""
    r, t = run_cell(label, lc_loads(label, need("lc_alone")), 3 * est_lc(True) + 30)
    res = {"type": "lc_alone_end", "lc": lc_results(r, need("lc_alone"))}
    for v in res["lc"].values():
        if "t_start" in v:
            with_gpu(v, t["smi"], v.pop("t_start"), v.pop("t_end"))
    if all("error" in v for v in res["lc"].values()):
        raise RuntimeError("no LC kind ran: " + "; ".join(f"{k}: {v['error']}" for k, v in res["lc"].items()))
    return res


def s_be_alone(kind):
    def fn(label):
        r, t = run_cell(label, [Load("be", cmd_be(kind), "bg")], 3 * est_be_alone() + 30, hold_s=S)
        check(r, "be")
        rate, err = window_rate(r["be"]["step_ends"], t["t_go"], t["t_stop"])
        if rate is None:
            raise RuntimeError(err)
        info = {k: v for k, v in r["be"].items() if k != "step_ends"}
        return with_gpu({"type": "be_alone", "be": kind, "steps_per_s": round(rate, 4),
                         "window_s": round(t["t_stop"] - t["t_go"], 2),
                         "spread": spread(r["be"]["step_ends"], t["t_go"], t["t_stop"]), "info": info},
                        t["smi"], t["t_go"], t["t_stop"])
    return fn


def s_lcbe(be, setting):
    """One LC x BE run. A BE group (be_members) runs several BE processes:
    each one's fraction of its kind alone is `be_frac`, and `be_kept` is
    their sum (for one BE, its fraction)."""
    members = be_members(be)

    def fn(label):
        alone = need("lc_alone")
        refs = [need(f"be_alone_{k}")["steps_per_s"] for k, _ in members]
        gs = setting == "gpuslice"
        vgpu_lc = (lambda name: (dash(name), "--priority", "lc", *LC_FLAGS)) if gs else None
        tags = ["be"] if len(members) == 1 else [f"be{i}-{k}" for i, (k, _) in enumerate(members)]
        bes = [Load(tag, cmd_be(k), "bg", (dash(f"{label}-be{v}"), "--priority", "be") if gs else None)
               for tag, (k, v) in zip(tags, members)]
        loads = bes + lc_loads(label, alone, vgpu_lc)
        r, t = run_cell(label, loads, 3 * est_lcbe() + 30)
        check(r, *tags)
        busy = alone.get("busy", {})
        lc = lc_results(r, alone)
        for k, v in lc.items():
            if "error" in v:
                continue
            t0, t1 = v.pop("t_start"), v.pop("t_end")
            with_gpu(v, t["smi"], t0, t1)
            rates = [window_rate(r[tag]["step_ends"], t0, t1) for tag in tags]
            errs = [err for rate, err in rates if rate is None]
            if errs:
                v["be_error"] = errs[0]
                continue
            frac = [rate / ref for (rate, _), ref in zip(rates, refs)]
            v.update(be_steps_per_s=[round(rate, 4) for rate, _ in rates] if len(tags) > 1 else round(rates[0][0], 4),
                     be_kept=round(sum(frac), 4))
            if len(tags) > 1:
                v["be_frac"] = [round(f, 4) for f in frac]
            elif k in busy:
                v.update(lc_busy=busy[k], be_vs_idle_left=round(rates[0][0] / (refs[0] * (1 - busy[k])), 4))
        res = {"type": "lcbe", "be": be, "setting": setting, "lc": lc,
               "ref": {"be_alone_steps_per_s": refs[0] if len(refs) == 1 else refs,
                       "lc_alone_p50_us": {k: v.get("p50_us") for k, v in alone["lc"].items()},
                       "lc_alone_p99_us": {k: v.get("p99_us") for k, v in alone["lc"].items()}}}
        if gs:
            res["gpuslice"] = {ld.tag: log_facts(label, ld.tag) for ld in loads}
        return res
    return fn


def parse_mixes(text):
    mixes = []
    for tok in (t.strip() for t in text.split(",")):
        if not tok:
            continue
        kinds, targets = [], []
        for part in tok.split("+"):
            k, _, pct = part.partition(":")
            if k.strip() not in BE_KINDS_ALL or not pct.strip().isdigit():
                sys.exit(f"run_matrix: bad mix {tok!r} (want kind:pct+kind:pct, kinds {', '.join(BE_KINDS_ALL)})")
            kinds.append(k.strip())
            targets.append(int(pct))
        if len(kinds) < 2 or sum(targets) > 100:
            sys.exit(f"run_matrix: mix {tok!r} needs two or more tenants and targets summing to at most 100")
        mixes.append(("mix_" + "_".join(f"{k}{t}" for k, t in zip(kinds, targets)), kinds, targets))
    return mixes


def s_mix(kinds, targets, setting):
    def fn(label):
        alone = [need(f"be_alone_{k}")["steps_per_s"] for k in kinds]
        gs = setting == "gpuslice"
        tags = [f"t{i}-{k}" for i, k in enumerate(kinds)]
        loads = [Load(tag, cmd_be(k), "bg", (dash(f"{label}-{tag}"), "--compute", str(t)) if gs else None)
                 for tag, k, t in zip(tags, kinds, targets)]
        r, t = run_cell(label, loads, 3 * est_mix(len(kinds)) + 30, hold_s=SHARE_S)
        check(r, *tags)
        rates = []
        for tag in tags:
            rate, err = window_rate(r[tag]["step_ends"], t["t_go"], t["t_stop"])
            if rate is None:
                raise RuntimeError(f"{tag}: {err}")
            rates.append(rate)
        frac = [x / a for x, a in zip(rates, alone)]
        split = [100 * f / sum(frac) for f in frac]
        res = {"type": "mix", "setting": setting, "kinds": kinds, "targets": targets,
               "steps_per_s": [round(x, 4) for x in rates], "alone_steps_per_s": alone,
               "frac": [round(f, 4) for f in frac], "split_pct": [round(s, 2) for s in split],
               "split_err_pp": [round(s - tg, 2) for s, tg in zip(split, targets)],
               "total": round(sum(frac), 4), "window_s": round(t["t_stop"] - t["t_go"], 2),
               "spread": [spread(r[tag]["step_ends"], t["t_go"], t["t_stop"]) for tag in tags]}
        with_gpu(res, t["smi"], t["t_go"], t["t_stop"])
        if gs:
            res["gpuslice"] = {tag: log_facts(label, tag) for tag in tags}
        return res
    return fn


def s_cap(kind):
    def fn(label):
        alone = need(f"be_alone_{kind}")["steps_per_s"]
        flags = (dash(label), "--compute-cap", str(CAP_PCT), "--priority", CAP_PRIORITY)
        r, t = run_cell(label, [Load("a", cmd_be(kind), "bg", flags)],
                        3 * est_cap() + 30, hold_s=CAP_S)
        check(r, "a")
        rate, err = window_rate(r["a"]["step_ends"], t["t_go"], t["t_stop"])
        if rate is None:
            raise RuntimeError(err)
        pct = 100 * rate / alone
        return {"type": "cap", "be": kind, "cap_pct": CAP_PCT, "priority": CAP_PRIORITY, "steps_per_s": round(rate, 4),
                "alone_steps_per_s": alone, "achieved_pct": round(pct, 2), "err_pp": round(pct - CAP_PCT, 2),
                "spread": spread(r["a"]["step_ends"], t["t_go"], t["t_stop"]),
                "gpu": t["smi"].window(t["t_go"], t["t_stop"]), "gpuslice": {"a": log_facts(label, "a")}}
    return fn


# ---------------------------------------------------------------- plan

def est_lc(alone=False):
    e = (TORCH_UP + len(TORCH_LC) * S + (2 if alone else 0)) if TORCH_LC else 0
    if "tiny" in LC_KINDS:
        e += C_UP + S
    return e + RUN_OVERHEAD


def est_lcbe():
    return TORCH_UP + SETTLE_S + est_lc() - (TORCH_UP if TORCH_LC else 0)  # the torch LC starts with the BE


def est_be_alone():
    return TORCH_UP + SETTLE_S + S + RUN_OVERHEAD


def est_mix(n):
    return TORCH_UP + SETTLE_S + SHARE_S + RUN_OVERHEAD + 2 + (n - 2)  # +2: several torch processes start at once


def est_cap():
    return TORCH_UP + SETTLE_S + CAP_S + RUN_OVERHEAD


def all_cells():
    """(name, group, fn, estimate, needs) in run order: alone, lc, cap, share."""
    cells = [("lc_alone", "alone", s_lc_alone, est_lc(True), ())]
    cells += [(f"be_alone_{b}", "alone", s_be_alone(b), est_be_alone(), ()) for b in BE_KINDS_ALL]
    for b in BE_KINDS:
        for setting in ("stock", "gpuslice"):
            cells.append((f"lcbe_{b}_{setting}", "lc", s_lcbe(b, setting), est_lcbe(),
                          ("lc_alone", *(f"be_alone_{k}" for k in be_kinds_of([b])))))
    if os.environ.get("LC_ALONE_END", "1") == "1":
        cells.append(("lc_alone_end", "lc", s_lc_alone_end, est_lc(), ("lc_alone",)))
    cells += [(f"cap{CAP_PCT}_{b}", "cap", s_cap(b), est_cap(), (f"be_alone_{b}",)) for b in CAP_KINDS]
    for name, kinds, targets in parse_mixes(MIXES_TEXT):
        for setting in ("stock", "gpuslice"):
            cells.append((f"{name}_{setting}", "share", s_mix(kinds, targets, setting), est_mix(len(kinds)),
                          tuple(f"be_alone_{k}" for k in dict.fromkeys(kinds))))
    # The noisy BE kinds alone once more at the end of a run that measured
    # them (BE_ALONE_END): how far "alone" drifts within the run.
    cells += [(f"be_alone_{b}_end", "end", s_be_alone(b), est_be_alone(), (f"be_alone_{b}",))
              for b in env_list("BE_ALONE_END", "launch") if b in BE_KINDS_ALL]
    return cells


def select(cells):
    groups = set(env_list("MATRIX_GROUPS", "lc,cap,share"))
    known = {"alone", "lc", "cap", "share"}
    if groups - known:
        sys.exit(f"run_matrix: unknown group(s) {sorted(groups - known)}; groups: {', '.join(sorted(known))}")
    for k in LC_KINDS:
        if k not in LC_KINDS_ALL:
            sys.exit(f"run_matrix: unknown LC kind {k!r}")
    for k in BE_KINDS:
        if be_members(k) is None:
            sys.exit(f"run_matrix: unknown BE kind {k!r} (kinds {', '.join(BE_KINDS_ALL)}; groups like gpu+mem, "
                     "two vGPUs, or gpu*2, two processes in one vGPU)")
    for k in CAP_KINDS:
        if k not in BE_KINDS_ALL:
            sys.exit(f"run_matrix: unknown BE kind {k!r} in CAP_KINDS")
    names = {c[0] for c in cells}
    picked, skipped = set(env_list("CELLS", "")), set(env_list("SKIP_CELLS", ""))
    for n in picked | skipped:
        if n not in names:
            sys.exit(f"run_matrix: unknown cell {n!r}; cells: {', '.join(c[0] for c in cells)}")
    wanted = {c[0] for c in cells if c[1] in groups and (not picked or c[0] in picked)} - skipped
    needs = {c[0]: c[4] for c in cells}
    reuse = os.environ.get("REUSE_ALONE") == "1"
    todo = list(wanted)
    while todo:
        for n in needs[todo.pop()]:
            prior = results["cells"].get(n, {})
            if reuse and prior.get("from_prior") and "error" not in prior and "skipped" not in prior:
                continue  # PRIOR's reference serves
            if n not in wanted:
                wanted.add(n)
                todo.append(n)
    wanted |= {c[0] for c in cells if c[1] == "end" and c[4][0] in wanted and c[0] not in skipped}
    return [c for c in cells if c[0] in wanted]


# ---------------------------------------------------------------- output

def save():
    OUT.mkdir(parents=True, exist_ok=True)
    tmp = OUT / "matrix.json.tmp"
    tmp.write_text(json.dumps(results, indent=1))
    os.replace(tmp, OUT / "matrix.json")
    tmp = OUT / "matrix.md.tmp"
    tmp.write_text(render(results))
    os.replace(tmp, OUT / "matrix.md")


def ok(cells, name):
    r = cells.get(name)
    return r if isinstance(r, dict) and "error" not in r and "skipped" not in r else None


def why_not(cells, name):
    r = cells.get(name)
    if r is None:
        return "not run"
    if "skipped" in r:
        return "skipped: " + r["skipped"]
    if "error" in r:
        return "error: " + r["error"].splitlines()[0][:80]
    return ""


def f_us(v):
    return "—" if v is None else f"{v:.0f}"


def f_x(v):
    return "—" if v is None else f"{v:.2f}×"


def f_pct(v):
    return "—" if v is None else f"{100 * v:.1f}%"


def ratio(a, b):
    return a / b if a is not None and b else None


def table_spec(groups):
    """What matrix.md shows for this run's groups: the LC and BE kinds of the
    LC x BE table, the mixes, the capped kinds and the cap."""
    return {"lc_kinds": LC_KINDS if "lc" in groups else [], "be_kinds": BE_KINDS if "lc" in groups else [],
            "mixes": [t.strip() for t in MIXES_TEXT.split(",") if t.strip()] if "share" in groups else [],
            "cap_kinds": CAP_KINDS if "cap" in groups else [], "cap_pct": CAP_PCT}


def union_spec(*specs):
    """The tables of several runs together (PRIOR, merge)."""
    out = {"cap_pct": CAP_PCT}
    order = {k: i for i, k in enumerate(LC_KINDS_ALL + BE_KINDS_ALL)}  # the kinds in their usual order
    for key in ("lc_kinds", "be_kinds", "mixes", "cap_kinds"):
        out[key] = list(dict.fromkeys(x for sp in specs for x in sp.get(key, [])))
        if key != "mixes":
            out[key].sort(key=lambda k: order.get(k, len(order)))
    for sp in specs:
        if sp.get("cap_kinds"):
            out["cap_pct"] = sp.get("cap_pct", CAP_PCT)
    return out


def alone_lc(cells, kind):
    """An LC kind's figures alone: the mean of lc_alone and lc_alone_end
    where both have them (each run's in "runs"), else lc_alone's."""
    runs = [c["lc"][kind] for c in (ok(cells, "lc_alone"), ok(cells, "lc_alone_end"))
            if c and "p50_us" in c.get("lc", {}).get(kind, {})]
    if not runs:
        return {}
    d = {q: sum(r[q] for r in runs) / len(runs) for q in ("p50_us", "p99_us")}
    d["runs"] = [{"p50_us": r["p50_us"], "p99_us": r["p99_us"]} for r in runs]
    d["gpu"] = runs[0].get("gpu", {})
    return d


def lc_rows(cells, lc_kinds, be_kinds):
    """One dict per LC x BE cell with its figures and verdict (also for plot.py)."""
    rows = []
    for lk in lc_kinds:
        a = alone_lc(cells, lk)
        for bk in be_kinds:
            st = (ok(cells, f"lcbe_{bk}_stock") or {}).get("lc", {}).get(lk, {})
            gsc = ok(cells, f"lcbe_{bk}_gpuslice")
            g = (gsc or {}).get("lc", {}).get(lk, {})
            row = {"lc": lk, "be": bk, "alone_runs": a.get("runs")}
            for tag, d in (("alone", a), ("stock", st), ("gpuslice", g)):
                row[f"p50_{tag}"], row[f"p99_{tag}"] = d.get("p50_us"), d.get("p99_us")
                row[f"sm_mhz_{tag}"] = d.get("gpu", {}).get("sm_mhz")
            row.update(be_kept_stock=st.get("be_kept"), be_kept_gpuslice=g.get("be_kept"),
                       be_idle_left_stock=st.get("be_vs_idle_left"), be_idle_left_gpuslice=g.get("be_vs_idle_left"),
                       p50_x_alone=ratio(row["p50_gpuslice"], row["p50_alone"]),
                       p99_x_alone=ratio(row["p99_gpuslice"], row["p99_alone"]),
                       p50_x_stock=ratio(row["p50_gpuslice"], row["p50_stock"]),
                       p99_x_stock=ratio(row["p99_gpuslice"], row["p99_stock"]),
                       p99_x_alone_stock=ratio(row["p99_stock"], row["p99_alone"]),
                       p50_x_alone_stock=ratio(row["p50_stock"], row["p50_alone"]))
            if lk == "eager":
                row["lc_target"] = f"p50 ≤ {EAGER_P50_X}× alone and ≤ stock"
                lc_pass = (None if row["p50_x_alone"] is None or row["p50_x_stock"] is None
                           else row["p50_x_alone"] <= EAGER_P50_X and row["p50_x_stock"] <= 1.0)
            else:
                row["lc_target"] = f"p99 ≤ {LC_P99_X}× alone"
                lc_pass = None if row["p99_x_alone"] is None else row["p99_x_alone"] <= LC_P99_X
            if len(be_members(bk) or ()) > 1:
                # Several BE share the GPU among themselves too: their total
                # is held against stock's total beside the same LC.
                row.update(be_frac_stock=st.get("be_frac"), be_frac_gpuslice=g.get("be_frac"),
                           be_target=f"total ≥ {BE_KEPT_MIN:.0%} of stock's")
                be_pass = (None if row["be_kept_gpuslice"] is None or not row["be_kept_stock"]
                           else row["be_kept_gpuslice"] >= BE_KEPT_MIN * row["be_kept_stock"])
            else:
                be_pass = None if row["be_kept_gpuslice"] is None else row["be_kept_gpuslice"] >= BE_KEPT_MIN
            row["lc_pass"], row["be_pass"] = lc_pass, be_pass
            missing = [f"{tag} {why}" for tag, cell in (("alone", "lc_alone"), ("stock", f"lcbe_{bk}_stock"),
                                                         ("gpuslice", f"lcbe_{bk}_gpuslice"))
                       for why in [lc_missing(cells, cell, lk)] if why]
            row["missing"] = "; ".join(missing)
            if gsc:
                row["joined"] = all(v.get("joined") for v in gsc.get("gpuslice", {}).values())
            rows.append(row)
    return rows


def lc_missing(cells, cell, kind):
    """Why a cell has no figures for LC kind `kind` ("" when it has them)."""
    why = why_not(cells, cell)
    if why:
        return why
    d = cells[cell].get("lc", {}).get(kind)
    if d is None:
        return "not measured"
    return ("LC " + d["error"].splitlines()[0][:80]) if "error" in d else ""


def verdict(*passes, missing=""):
    if any(p is False for p in passes):
        return "**miss**" + (f" ({missing})" if missing else "")
    if all(p is True for p in passes):
        return "pass"
    return "not run" + (f": {missing}" if missing else "")


def mix_rows(cells, mixes):
    rows = []
    for name, kinds, targets in mixes:
        st, g = ok(cells, f"{name}_stock"), ok(cells, f"{name}_gpuslice")
        row = {"mix": name, "kinds": kinds, "targets": targets,
               "stock_frac": st and st["frac"], "stock_total": st and st["total"],
               "gpuslice_frac": g and g["frac"], "gpuslice_split": g and g["split_pct"],
               "gpuslice_err_pp": g and g["split_err_pp"], "gpuslice_total": g and g["total"],
               "stock_split": st and st["split_pct"]}
        row["total_vs_stock"] = ratio(row["gpuslice_total"], row["stock_total"])
        row["split_pass"] = None if not g else max(abs(e) for e in g["split_err_pp"]) <= SPLIT_PP
        row["total_pass"] = None if row["total_vs_stock"] is None else row["total_vs_stock"] >= TOTAL_MIN
        row["missing"] = "; ".join(f"{s} {why_not(cells, f'{name}_{s}')}" for s, r in (("stock", st), ("gpuslice", g))
                                   if not r)
        if g:
            row["joined"] = all(v.get("joined") for v in g.get("gpuslice", {}).values())
        rows.append(row)
    return rows


def cap_rows(cells, kinds, cap_pct):
    rows = []
    for k in kinds:
        name = f"cap{cap_pct}_{k}"
        c = ok(cells, name)
        rows.append({"be": k, "cell": name, "alone": c and c["alone_steps_per_s"], "capped": c and c["steps_per_s"],
                     "achieved_pct": c and c["achieved_pct"], "target": cap_pct,
                     "pass": None if not c else abs(c["achieved_pct"] - cap_pct) <= CAP_PP,
                     "missing": "" if c else why_not(cells, name), "joined": c and c["gpuslice"]["a"]["joined"]})
    return rows


def fl(v, fmt="{:.1f}"):
    return "—" if v is None else "/".join(fmt.format(x) for x in v) if isinstance(v, list) else fmt.format(v)


def be_group_text(row):
    """For a BE group's row: each BE's share of the kept total, and its target."""
    if "be_target" not in row:
        return ""
    frac = " + ".join(f"{100 * f:.1f}" for f in row.get("be_frac_gpuslice") or [])
    return f" ({frac}; {row['be_target']})"


def render(res):
    """matrix.md: the LC x BE table, the shares table and the caps table."""
    cells, meta = res["cells"], res.get("meta", {})
    lines = ["# gpuslice workload matrix", ""]
    if meta:
        lines += [f"GPU: {meta.get('gpu', '?')}; date {meta.get('date', '?')}; git {meta.get('git', '?')}; "
                  f"MATRIX_SECONDS {meta.get('knobs', {}).get('MATRIX_SECONDS', '?')}; "
                  f"groups {meta.get('groups', '?')}" + (f"; merged from {', '.join(meta['merged'])}"
                                                          if meta.get("merged") else ""), ""]
    spec = meta.get("table") or table_spec({"lc", "cap", "share"})
    rows = lc_rows(cells, spec["lc_kinds"], spec["be_kinds"])
    counts = {"pass": 0, "miss": 0, "not run": 0}
    lines += ["## LC × BE", ""]
    if not rows:
        lines += ["No LC × BE cells in this run."]
    clocks = any(r[f"sm_mhz_{t}"] is not None for r in rows for t in ("alone", "stock", "gpuslice"))
    lines += [] if not rows else [
              "LC latency in µs, submission to completion (alone / stock / gpuslice); × = gpuslice over alone / "
              "over stock; BE kept = BE throughput in the LC's window / BE alone (stock / gpuslice); idle left = "
              "gpuslice BE / (alone × (1 − LC busy))" + ("; SM MHz = mean SM clock (nvidia-smi) in the LC's window."
                                                         if clocks else "."), "",
              "| LC | BE | p50 alone / stock / gpuslice | p99 alone / stock / gpuslice | p50 × alone / × stock "
              "| p99 × alone / × stock | BE kept stock / gpuslice | idle left | "
              + ("SM MHz alone / stock / gpuslice | " if clocks else "") + "LC target | LC | BE ≥ 90% |",
              "|---|---|---|---|---|---|---|---|" + ("---|" if clocks else "") + "---|---|---|"]
    for r in rows:
        lc_v, be_v = verdict(r["lc_pass"], missing=r["missing"]), verdict(r["be_pass"], missing=r["missing"])
        if r.get("joined") is False:
            lc_v += " (a child did not join its vGPU)"
        for v in (lc_v, be_v):
            counts["pass" if v == "pass" else "miss" if v.startswith("**miss") else "not run"] += 1
        lines.append(
            f"| {r['lc']} | {r['be']} | {f_us(r['p50_alone'])} / {f_us(r['p50_stock'])} / {f_us(r['p50_gpuslice'])} "
            f"| {f_us(r['p99_alone'])} / {f_us(r['p99_stock'])} / {f_us(r['p99_gpuslice'])} "
            f"| {f_x(r['p50_x_alone'])} / {f_x(r['p50_x_stock'])} | {f_x(r['p99_x_alone'])} / {f_x(r['p99_x_stock'])} "
            f"| {f_pct(r['be_kept_stock'])} / {f_pct(r['be_kept_gpuslice'])}{be_group_text(r)} "
            f"| {f_pct(r['be_idle_left_gpuslice'])} "
            + (f"| {f_us(r['sm_mhz_alone'])} / {f_us(r['sm_mhz_stock'])} / {f_us(r['sm_mhz_gpuslice'])} "
               if clocks else "")
            + f"| {r['lc_target']} | {lc_v} | {be_v} |")
    alone = ok(cells, "lc_alone")
    if alone:
        facts = [alone.get("model", ""),
                 alone.get("graph_gpu_us") and f"graph replay GPU time alone {alone['graph_gpu_us']} µs",
                 alone.get("eager_alone_us") and f"eager request back to back at start-up {alone['eager_alone_us']} µs,"
                 f" one every {alone.get('eager_period_ms')} ms ({alone.get('eager_period_source')})",
                 alone.get("tiny_kernel_us") and f"tiny kernel {alone['tiny_kernel_us']} µs",
                 f"LC busy fraction {alone.get('busy')}"]
        lines += ["", "LC alone: " + "; ".join(f for f in facts if f) + "."]
    if ok(cells, "lc_alone_end"):
        lines += ["", "Alone twice (lc_alone at the start, lc_alone_end at the end; the × alone figures use their "
                  "mean), p50 / p99 µs: " + "; ".join(
                      f"{k} " + ", ".join(f"{r['p50_us']:.0f} / {r['p99_us']:.0f}" for r in alone_lc(cells, k)["runs"])
                      for k in spec["lc_kinds"] if alone_lc(cells, k)) + "."]
    used = set(be_kinds_of(spec["be_kinds"]) + spec["cap_kinds"]) | {k for _, ks, _ in parse_mixes(",".join(spec["mixes"]))
                                                         for k in ks}
    bes = [(b, ok(cells, f"be_alone_{b}")) for b in BE_KINDS_ALL if b in used]
    if bes:
        def alone_text(b, c):
            if not c:
                return f"{b} {why_not(cells, f'be_alone_{b}')}"
            end = ok(cells, f"be_alone_{b}_end")
            return f"{b} {c['steps_per_s']:.2f}" + (
                f" (again at the end of the run: {end['steps_per_s']:.2f}, "
                f"{100 * (end['steps_per_s'] / c['steps_per_s'] - 1):+.1f}%)" if end else "")
        lines += ["", "BE alone (steps/s): " + ", ".join(alone_text(b, c) for b, c in bes)
                  + ". Each cell's BE figures use the BE alone measured at the start of its own run (`ref` in "
                  "matrix.json); the figure again at the end shows how far alone drifted by itself."]

    mrows = mix_rows(cells, parse_mixes(",".join(spec["mixes"])))
    lines += ["", "## Shares", ""] + (["No shares in this run."] if not mrows else [
              "Each tenant's steps/s over the window when all ran, over its steps/s alone (% of alone); split = "
              "that over the sum, against the target (pp); total = sum of the fractions.", "",
              "| mix | target % | stock: % of alone | stock total | gpuslice: % of alone | gpuslice split % "
              "(error pp) | gpuslice total | total vs stock | split ≤ 2 pp | total ≥ 95% of stock |",
              "|---|---|---|---|---|---|---|---|---|---|"])
    for r in mrows:
        err = "—" if r["gpuslice_err_pp"] is None else ", ".join(f"{e:+.1f}" for e in r["gpuslice_err_pp"])
        sv, tv = verdict(r["split_pass"], missing=r["missing"]), verdict(r["total_pass"], missing=r["missing"])
        if r.get("joined") is False:
            sv += " (a child did not join its vGPU)"
        for v in (sv, tv):
            counts["pass" if v == "pass" else "miss" if v.startswith("**miss") else "not run"] += 1
        lines.append(
            f"| {'+'.join(r['kinds'])} | {'/'.join(map(str, r['targets']))} "
            f"| {fl(r['stock_frac'] and [100 * x for x in r['stock_frac']])} | {f_pct(r['stock_total'])} "
            f"| {fl(r['gpuslice_frac'] and [100 * x for x in r['gpuslice_frac']])} "
            f"| {fl(r['gpuslice_split'])} ({err}) | {f_pct(r['gpuslice_total'])} | {f_pct(r['total_vs_stock'])} "
            f"| {sv} | {tv} |")

    crows = cap_rows(cells, spec["cap_kinds"], spec["cap_pct"])
    lines += ["", f"## Caps (--compute-cap {spec['cap_pct']}, alone)", ""] + (["No caps in this run."] if not crows else [
        "| BE | alone steps/s | capped steps/s | achieved % of alone | target | within 3 pp |",
        "|---|---|---|---|---|---|"])
    for r in crows:
        v = verdict(r["pass"], missing=r["missing"])
        if r.get("joined") is False:
            v += " (did not join its vGPU)"
        counts["pass" if v == "pass" else "miss" if v.startswith("**miss") else "not run"] += 1
        lines.append(f"| {r['be']} | {fl(r['alone'], '{:.2f}')} | {fl(r['capped'], '{:.2f}')} "
                     f"| {fl(r['achieved_pct'])} | {r['target']} ± {CAP_PP:g} | {v} |")
    lines += ["", f"Verdicts: {counts['pass']} pass, {counts['miss']} miss, {counts['not run']} not run.", ""]
    return "\n".join(lines)


def summary(name, r):
    if "error" in r or "skipped" in r:
        return r.get("error") or "skipped: " + r["skipped"]
    t = r.get("type")
    if t in ("lc_alone", "lc_alone_end", "lcbe"):
        parts = []
        for k, v in r["lc"].items():
            if "error" in v:
                parts.append(f"{k}: {v['error'][:60]}")
            else:
                s = f"{k} {v['p50_us']:.0f}/{v['p99_us']:.0f} us"
                if "be_kept" in v:
                    s += f" BE {100 * v['be_kept']:.0f}%"
                parts.append(s)
        return "; ".join(parts)
    if t == "be_alone":
        return f"{r['steps_per_s']:.2f} steps/s"
    if t == "mix":
        return f"frac {r['frac']} split {r['split_pct']} (target {r['targets']}) total {r['total']:.3f}"
    if t == "cap":
        return f"{r['achieved_pct']:.1f}% of alone (target {r['cap_pct']})"
    return ""


def run_one(name, fn, est):
    if left() < est:
        results["cells"][name] = {"skipped": "budget", "estimate_s": round(est), "left_s": round(left())}
        print(f"{name}: skipped (budget: {left():.0f} s left, needs ~{est:.0f})", flush=True)
        save()
        return
    t0 = time.monotonic()
    try:
        results["cells"][name] = fn(name)
    except Exception as e:  # noqa: BLE001 - record and go on
        results["cells"][name] = {"error": f"{type(e).__name__}: {e}"}
    results["cells"][name]["seconds"] = round(time.monotonic() - t0, 1)
    results["meta"]["seconds"] = round(time.monotonic() - STARTED, 1)
    save()
    print(f"{name}: {summary(name, results['cells'][name])}  [{results['cells'][name]['seconds']} s, est {est:.0f}]",
          flush=True)


def load_prior(path):
    prior = json.loads(Path(path).read_text())
    for name, cell in prior.get("cells", {}).items():
        cell = dict(cell)
        cell.setdefault("from_prior", str(path))
        results["cells"][name] = cell
    return prior.get("meta", {})


def git_head():
    # The bundle's own record first (scripts/bundle-for-gpu.sh): the GPU
    # machine's copy of the repository may hold an older HEAD than the build.
    stamp = HERE.parent.parent.parent / ".device" / "bundle" / "GIT"
    if stamp.is_file() and stamp.read_text().strip():
        return stamp.read_text().strip()
    try:
        return subprocess.run(["git", "-C", str(HERE), "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True, timeout=10).stdout.strip() or "?"
    except (OSError, subprocess.SubprocessError):
        return "?"


def knobs():
    return {"MATRIX_SECONDS": S, "SHARE_S": SHARE_S, "CAP_S": CAP_S, "CAP_PCT": CAP_PCT, "SETTLE_S": SETTLE_S,
            "GRAPH_RATE": GRAPH_RATE, "PERIOD_US": PERIOD_US, "BENCH_BUDGET_S": BUDGET_S, "MIXES": MIXES_TEXT,
            "EAGER_MIN_PERIOD_MS": env_f("EAGER_MIN_PERIOD_MS", 15), "EAGER_FACTOR": env_f("EAGER_FACTOR", 2),
            "CAP_PRIORITY": CAP_PRIORITY, "LC_FLAGS": " ".join(LC_FLAGS), "FAKE": FAKE}


def pack_logs():
    if os.environ.get("PACK_LOGS") != "1":
        return
    OUT.mkdir(parents=True, exist_ok=True)
    with tarfile.open(OUT / "matrix-logs.tgz", "w:gz") as tar:
        for d in ("logs", "work"):
            if (SCRATCH / d).is_dir():
                tar.add(SCRATCH / d, arcname=d)


def merge(paths):
    """`run_matrix.py merge A.json B.json ...`: one matrix.json + matrix.md in
    $OUT from several runs; a later file's cell replaces an earlier one's
    unless it is an error or skip and the earlier one is not."""
    metas = []
    for p in paths:
        data = json.loads(Path(p).read_text())
        metas.append(data.get("meta", {}))
        for name, cell in data.get("cells", {}).items():
            old = results["cells"].get(name)
            bad = "error" in cell or "skipped" in cell
            if old is None or not bad or "error" in old or "skipped" in old:
                results["cells"][name] = dict(cell, source=str(p))
    base = dict(metas[-1]) if metas else {}
    base["merged"] = [str(p) for p in paths]
    base["groups"] = sorted({g for m in metas for g in m.get("groups", [])})
    base["table"] = union_spec(*(m.get("table", {}) for m in metas))
    base["runs"] = metas
    results["meta"] = base
    save()
    print(render(results))


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "merge":
        if len(sys.argv) < 3:
            sys.exit("usage: run_matrix.py merge A.json [B.json ...]   (writes $OUT/matrix.json and matrix.md)")
        return merge(sys.argv[2:])
    prior_meta = load_prior(os.environ["PRIOR"]) if os.environ.get("PRIOR") else None
    chosen = select(all_cells())
    by_group = {}
    for c in chosen:
        by_group[c[1]] = by_group.get(c[1], 0) + c[3]
    total = sum(by_group.values())
    print(f"{len(chosen)} cells, estimated {total:.0f} s (" + ", ".join(f"{g} {v:.0f} s" for g, v in by_group.items())
          + f"), budget {BUDGET_S:.0f} s" + (" [FAKE]" if FAKE else ""), flush=True)
    if os.environ.get("DRY_RUN") == "1":
        for name, group, _, est, needs in chosen:
            print(f"  {name:34s} {group:6s} ~{est:4.0f} s" + (f"  needs {', '.join(needs)}" if needs else ""))
        for name in sorted(n for n, c in results["cells"].items() if c.get("from_prior")):
            print(f"  {name:34s} from PRIOR")
        if total > BUDGET_S:
            print(f"  (over the budget: the last cells would be skipped; split with MATRIX_GROUPS=...)")
        return
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # unwind: kill the children, keep the results
    try:
        smi = subprocess.run(["nvidia-smi", "-i", rc.GPU, "--query-gpu=name,driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=30).stdout.strip()
    except (OSError, subprocess.SubprocessError) as e:
        smi = f"nvidia-smi: {e}"
    results["meta"] = {
        "gpu": smi, "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"), "host": platform.node(), "git": git_head(),
        "groups": env_list("MATRIX_GROUPS", "lc,cap,share"), "cells": [c[0] for c in chosen],
        "table": union_spec(table_spec(set(env_list("MATRIX_GROUPS", "lc,cap,share"))),
                            (prior_meta or {}).get("table", {})), "knobs": knobs(), "estimate_s": round(total),
        "estimate_by_group_s": {g: round(v) for g, v in by_group.items()}, "gpuslice": rc.GPUSLICE,
        "lc_be": rc.LC_BE, "python": PYTHON}
    if prior_meta is not None:
        results["meta"]["prior"] = {"path": os.environ["PRIOR"], "meta": prior_meta}
    save()
    own_state = "GPUSLICE_STATE_DIR" not in os.environ
    if own_state:
        os.environ["GPUSLICE_STATE_DIR"] = tempfile.mkdtemp(prefix="gpuslice-state-")
    try:
        for name, group, fn, est, _ in chosen:
            why = missing_tools("gpuslice" in name or group == "cap")
            if why:
                results["cells"][name] = {"error": why}
                save()
                print(f"{name}: {why}", flush=True)
                continue
            run_one(name, fn, est)
    finally:
        if own_state:
            shutil.rmtree(os.environ["GPUSLICE_STATE_DIR"], ignore_errors=True)
        results["meta"]["seconds"] = round(time.monotonic() - STARTED, 1)
        save()
        pack_logs()
    print()
    print(render(results))


if __name__ == "__main__":
    main()
