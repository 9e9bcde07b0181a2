"""Compute shares, hard caps, elasticity and LC latency on a real GPU, in one run.

Each comparison is made within one run: alone, stock time-slicing (no
gpuslice), gpuslice, and NVIDIA MPS with CUDA_MPS_CLIENT_PRIORITY (LC 0, BE 1)
where `nvidia-cuda-mps-control` is on PATH. Results go to $OUT/compute.json
(rewritten after every scenario, so a run cut short keeps what it got), the
children's stderr (GPUSLICE_LOG=info) to $OUT/logs/, and a summary to stdout.
`plot.py` turns compute.json into PNGs.

    OUT=/tmp/out GPUSLICE_BIN=build/bin/gpuslice LC_BE=build/bench-compute/lc_be \
        python3 bench/gpu/compute/run_compute.py

Scenarios (run in this order; SCENARIOS=name,group,... picks some, and what
they need is added; SKIP_SCENARIOS=... leaves some out):

 group `synthetic` — lc_be.cu: LC = a ~50 µs GPU-filling kernel at 200 req/s,
 BE = back-to-back 20 ms kernels
  lc_alone            LC alone (calibrates the LC kernel; its kernel time sets
                      the LC busy fraction = kernel time x rate)
  be_alone            BE alone: the reference BE throughput
  lc_be_stock         LC + BE, no gpuslice
  lc_be_gpuslice      LC + BE, --priority lc / --priority be
  lc_be_mps           LC + BE under MPS, client priority 0 / 1
 Each "+ BE" scenario reports LC p50/p99 and `be_vs_idle_left` = BE kernels/s
 over the LC's window / (BE alone x (1 - LC busy fraction)); target >= 0.9.

 group `hint` — lc_be lchint: the same LC request preceded by PREP_US (400) µs
 of host preparation; latency from the end of the preparation
  lchint_alone, lchint_be_stock, lchint_be_gpuslice
                      as above, without hints
  lchint_be_gpuslice_hint
                      LC_HINT=1: gpuslice_hint_begin() at the start of the
                      preparation (records whether the library exports it)

 group `workers` — two processes of one LC vGPU: the synthetic LC beside the
 synthetic BE's back-to-back kernels, both `--priority lc` in one vGPU (two
 workers of one service, one of them busy); against lc_be_stock
  lc_workers_gpuslice       the library's rule: while both are on the GPU,
                            both take the shared LC slice (2048 us)
  lc_workers_gpuslice_long  the node policy's lc_shared_slice_us at the LC's
                            own 5 s (a state directory's policy file): the
                            rule turned off, as before it existed
  lc_ctx_stock, lc_ctx_gpuslice, lc_ctx_gpuslice_long
                            the same two loads as two contexts of ONE process
                            (lc_be lcctx), no gpuslice / --priority lc / the
                            rule turned off

 group `idle` — lc_be_gpuslice_idle_be: lc_be_gpuslice beside a second BE
 vGPU whose process does nothing on the GPU; lc_be_gpuslice_idle_ctx_be: the
 same, its process holding a CUDA context and launching nothing (a notebook
 after `import torch`). Through a daemon (bench/gpu/with_daemon.sh) the
 schedule counts only vGPUs with a process on the GPU that has run something
 lately; standalone, every vGPU. lc_be_gpuslice_busy_be: beside a second,
 busy, BE vGPU (both contend: neither may be judged idle).
 lc_be_gpuslice_waking_be: beside one idle for IDLE_BEFORE_READY_S that
 starts running WAKE_AFTER_S into the LC's window

 group `holder` — holdercheck: the holder kernel (holder_kernel.ptx) alone:
 unreleased it ends at its bound, released it ends at once

 Scenarios that set GPUSLICE_LC_HOLDER need the library configured with
 -DGPUSLICE_EXPERIMENTAL_HOLDER=ON; without it they run with no holder (the
 library warns once per LC process).

 group `eager` — lc_be lce: 100 kernels of 20 µs with 30 µs of host work
 before each, every 10 ms (LCE_PERIOD_US), beside the synthetic BE
  lce_alone, lce_be_stock, lce_be_gpuslice
  lce_be_gpuslice_span          each request a span (best-effort launches held)
  lce_be_gpuslice_span_holder   + GPUSLICE_LC_HOLDER=span (residency holder)
  lce_be_gpuslice_always        GPUSLICE_LC_HOLDER=always, no span

 group `holderexp` — experiments on why hints with a holder lose:
  lchint_be_gpuslice_hint_holder   the hint with GPUSLICE_LC_HOLDER=hint
  lchint_be_gpuslice_app_same/_other
                      the application launches the holder itself (APP_HOLDER)
                      in the request's stream / another one, releasing it
                      right after submitting its kernel
  lce_be_gpuslice_app_same   the eager LC relaying its own holder after
                      every kernel, in the request's stream

 group `cap` — --compute-cap 30 must hold within +-3 pp
  small_alone, small_cap30
                      back-to-back ~10 µs kernels, deep queue: kernels/s
                      alone, and alone in a vGPU with --compute-cap 30
  graph_alone, graph_cap30
                      the same kernels as CUDA graphs of 50
  train_cap_30        PyTorch training alone with --compute-cap 30
 `cap_pct` = throughput under the cap / throughput alone x 100.

 group `train`
  train_alone_stock   one PyTorch training (train.py), no gpuslice: the
                      reference for shares, caps and the BE of `rn50`
  train_alone_30      the same alone in a vGPU with --compute 30: elasticity

 group `rn50` — ResNet-50 inference batch 1 (lc_torch.py, LC_RATE 50 req/s)
 as LC against train.py as BE; one LC process runs several phases of
 RN_PHASE_S seconds each beside one BE training
  rn50_alone          phases eager, graph, eager+prep (no BE)
  rn50_be_stock       the same phases beside a training, no gpuslice
  rn50_be_gpuslice    phases eager, eager+span (residency span), graph,
                      graph+span, eager+prep, eager+hint; --priority lc / be
  rn50_be_gpuslice_always
                      phases eager, graph with GPUSLICE_LC_HOLDER=always
  rn50_be_mps         phases eager, graph, under MPS priorities
 Each phase reports LC p50/p99, the BE's steps/s over the phase against
 training alone, and `be_vs_idle_left` with the LC busy fraction taken as the
 graph's GPU time alone x rate.

 group `share` — trainings together, each in a vGPU with --compute N
  share_stock         two trainings, no gpuslice
  share_30_70, share_10_90, share_20_30_50
 Share = steps/s over the common window / alone, also normalised to the sum.

Env knobs: OUT, GPUSLICE_CMD / GPUSLICE_BIN, LC_BE, PYTHON, BENCH_GPU (0),
BENCH_BUDGET_S (540: scenarios whose estimate does not fit in what is left are
skipped, and every child is killed at its scenario's limit), SCENARIOS,
SKIP_SCENARIOS, TRAIN_S (8), SHARE_S (12), LC_S (6), CAP_S (6), RN_PHASE_S (4),
LC_RATE (50, rn50), PREP_US (400), PERIOD_US (5000, synthetic LC),
GPUSLICE_STATE_DIR (used when set, e.g. a daemon's; else a fresh temporary
one), NO_MPS=1 (skip MPS even if present), DRY_RUN=1 (list the chosen
scenarios with their time estimates, run nothing).

Standard library only (the children import torch).
"""
import contextlib
import json
import os
import platform
import re
import shutil
import signal
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


def env_f(name, default):
    return float(os.environ.get(name, default))


TRAIN_S = env_f("TRAIN_S", 8)
SHARE_S = env_f("SHARE_S", 12)
LC_S = env_f("LC_S", 6)
LCE_PERIOD_US = env_f("LCE_PERIOD_US", 10000)
CAP_S = env_f("CAP_S", 6)
RN_PHASE_S = env_f("RN_PHASE_S", 4)
LC_RATE = env_f("LC_RATE", 50)
PREP_US = env_f("PREP_US", 400)
PERIOD_US = env_f("PERIOD_US", 5000)
BUDGET_S = env_f("BENCH_BUDGET_S", 540)
MPS_CONTROL = None if os.environ.get("NO_MPS") == "1" else shutil.which("nvidia-cuda-mps-control")
# Start-up estimates (s), for the budget: a torch process (import, model,
# warm-up) and a CUDA C++ one; a bit pessimistic on purpose.
TORCH_UP, C_UP = 9.0, 2.0
STARTED = time.monotonic()

results = {"meta": {}, "scenarios": {}}
ref = {}  # figures later scenarios need: lc_iters, be_kps, train_sps, ...


def save():
    OUT.mkdir(parents=True, exist_ok=True)
    tmp = OUT / "compute.json.tmp"
    tmp.write_text(json.dumps(results, indent=1))
    os.replace(tmp, OUT / "compute.json")


def left():
    return BUDGET_S - (time.monotonic() - STARTED)


def need(key):
    if key not in ref:
        raise RuntimeError(f"reference '{key}' missing: the scenario that measures it failed or was skipped")
    return ref[key]


# ---------------------------------------------------------------- processes

class Proc:
    """A child: cmd ("{out}" stands for its result file), run in a vGPU when
    vgpu is (name, flags...), with env added (a None value removes a
    variable). A background child (bg) must create READY_FILE once its load
    runs, and stop once STOP_FILE exists."""

    def __init__(self, tag, cmd, vgpu=None, env=None, bg=False):
        self.tag, self.cmd, self.vgpu, self.env, self.bg = tag, cmd, vgpu, env or {}, bg


def wrap(cmd, vgpu):
    """cmd, run inside a vGPU when vgpu is (name, flags...), else as it is."""
    if vgpu is None:
        return cmd
    name, *flags = vgpu
    return [*GPUSLICE.split(), "run", "--gpu", GPU, "--name", name, *flags, "--", *cmd]


def kill_group(p):
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(p.pid, signal.SIGKILL)
    p.wait()


def log_tail(path, n=600):
    try:
        return path.read_text(errors="replace")[-n:]
    except OSError:
        return ""


def run_all(label, procs, limit_s, settle_s=0.5):
    """Runs procs: the background ones first, until each has posted its ready
    file; then, settle_s later, the foreground ones. When the foreground ones
    have exited, the background ones are told to stop. Everything is killed
    at limit_s. Returns {tag: parsed result file, or {"error", "log_tail"}}."""
    logs, work = OUT / "logs", OUT / "work"
    logs.mkdir(parents=True, exist_ok=True)
    work.mkdir(parents=True, exist_ok=True)
    deadline = time.monotonic() + min(limit_s, max(5.0, left() + 10))
    stop = work / f"{label}.stop"
    stop.unlink(missing_ok=True)
    running = []

    def start(pr):
        out = work / f"{label}-{pr.tag}.json"
        out.unlink(missing_ok=True)
        env = dict(os.environ, GPUSLICE_LOG="info", CUDA_VISIBLE_DEVICES=GPU)
        ready = work / f"{label}-{pr.tag}.ready"
        ready.unlink(missing_ok=True)
        if pr.bg:
            env.update(READY_FILE=str(ready), STOP_FILE=str(stop))
        for k, v in pr.env.items():
            if v is None:
                env.pop(k, None)
            else:
                env[k] = f"{v:g}" if isinstance(v, float) else str(v)
        log = open(logs / f"{label}-{pr.tag}.log", "w")
        full = wrap([c if c != "{out}" else str(out) for c in pr.cmd], pr.vgpu)
        p = subprocess.Popen(full, env=env, stdout=log, stderr=log, start_new_session=True)
        log.close()
        running.append((pr, out, ready, p))
        return ready, p

    def wait(p, until):
        try:
            p.wait(timeout=max(0.1, until - time.monotonic()))
        except subprocess.TimeoutExpired:
            kill_group(p)

    try:
        bg = [start(pr) for pr in procs if pr.bg]
        while bg and not all(r.exists() for r, _ in bg):
            if any(p.poll() is not None for _, p in bg) or time.monotonic() > deadline:
                raise RuntimeError("a background load did not start: " + " | ".join(
                    f"{pr.tag}: {log_tail(logs / f'{label}-{pr.tag}.log', 300)}" for pr in procs if pr.bg))
            time.sleep(0.05)
        if bg:
            time.sleep(settle_s)
        for pr in procs:
            if not pr.bg:
                start(pr)
        for pr, _, _, p in running:
            if not pr.bg:
                wait(p, deadline)
        stop.touch()
        for pr, _, _, p in running:
            if pr.bg:
                wait(p, min(deadline, time.monotonic() + 30))
    finally:
        for _, _, _, p in running:
            if p.poll() is None:
                kill_group(p)
    parsed = {}
    for pr, out, _, p in running:
        try:
            parsed[pr.tag] = json.loads(out.read_text())
        except (OSError, ValueError):
            parsed[pr.tag] = {}
        if p.returncode != 0:
            parsed[pr.tag]["error"] = f"exit status {p.returncode}"
            parsed[pr.tag]["log_tail"] = log_tail(logs / f"{label}-{pr.tag}.log")
    return parsed


def check(r, *tags):
    for t in tags:
        if "error" in r[t]:
            raise RuntimeError(f"{t}: {r[t]['error']}: {r[t].get('log_tail', '')[-300:]}")


@contextlib.contextmanager
def mps(label):
    """A private MPS control daemon for one scenario; yields the clients' env."""
    if MPS_CONTROL is None:
        raise RuntimeError("no nvidia-cuda-mps-control on PATH (or NO_MPS=1)")
    d = Path(tempfile.mkdtemp(prefix="gpuslice-mps-"))
    dirs = {"CUDA_MPS_PIPE_DIRECTORY": str(d / "pipe"), "CUDA_MPS_LOG_DIRECTORY": str(d / "log")}
    for v in dirs.values():
        Path(v).mkdir()
    # The daemon sees only the benchmark's GPU; its clients then see it as
    # device 0, so they run without CUDA_VISIBLE_DEVICES (NVIDIA's advice).
    env = dict(os.environ, CUDA_VISIBLE_DEVICES=GPU, **dirs)
    subprocess.run([MPS_CONTROL, "-d"], env=env, check=True, timeout=30)
    try:
        yield dict(dirs, CUDA_VISIBLE_DEVICES=None)
    finally:
        with contextlib.suppress(Exception):
            subprocess.run([MPS_CONTROL], input="quit\n", text=True, env=env, timeout=30, capture_output=True)
        for f in (d / "log").glob("*.log"):
            with contextlib.suppress(OSError):
                shutil.copy(f, OUT / "logs" / f"{label}-mps-{f.name}")
        shutil.rmtree(d, ignore_errors=True)


def mps_clients_seen(label):
    """Lines of the MPS control log that announce a client (0: MPS unused?)."""
    text = log_tail(OUT / "logs" / f"{label}-mps-control.log", 1 << 20)
    return sum(1 for l in text.splitlines() if "new client" in l.lower())


# ---------------------------------------------------------------- figures

def rate_between(ends, t0, t1):
    """Events/s of the completion times `ends` that fall in [t0, t1], from the
    first to the last of them (unbiased for a steady rate)."""
    inside = [e for e in ends if t0 <= e <= t1]
    if len(inside) < 2 or inside[-1] <= inside[0]:
        raise RuntimeError(f"only {len(inside)} completions in a {t1 - t0:.1f} s window")
    return (len(inside) - 1) / (inside[-1] - inside[0])


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
    text = log_tail(OUT / "logs" / f"{label}-{tag}.log", 1 << 22)
    slices = []
    for l in text.splitlines():
        m = re.search(r"timeslice of channel group \S+ set to (\d+) us", l)
        if m:
            slices.append(int(m.group(1)))
    return slices


def lat_fields(d):
    return {k: d[k] for k in ("p50_us", "p90_us", "p99_us", "max_us", "n") if k in d}


# ---------------------------------------------------------------- scenarios

def train(seconds):
    return [PYTHON, str(HERE / "train.py"), str(seconds), "{out}"]


def lc_be_cmd(mode, seconds):
    return [LC_BE, mode, str(seconds), "{out}"]


def be_bg(vgpu=None, env=None):
    """The synthetic BE as a background load (it stops when the LC is done)."""
    return Proc("be", lc_be_cmd("be", 600), vgpu, env, bg=True)


def train_bg(vgpu=None, env=None):
    return Proc("be", train(600), vgpu, env, bg=True)


def s_lc_alone(label):
    r = run_all(label, [Proc("lc", lc_be_cmd("lc", LC_S), env={"PERIOD_US": PERIOD_US})], LC_S + 30)
    check(r, "lc")
    ref["lc_iters"], ref["lc_kernel_us"] = r["lc"]["iters"], r["lc"]["kernel_us"]
    return {"lc": r["lc"], **lat_fields(r["lc"])}


def s_be_alone(label):
    r = run_all(label, [Proc("be", lc_be_cmd("be", LC_S + 1))], LC_S + 30)
    check(r, "be")
    ends = r["be"].pop("ends")
    ref["be_kps"] = rate_between(ends, ends[0] + 0.5, ends[-1])
    return {"be_kernels_per_s": round(ref["be_kps"], 3), "be": r["be"]}


def lc_pair(mode, lc_vgpu=None, be_vgpu=None, lc_env=None, be_env=None, with_mps=False, extra=()):
    """The synthetic LC (`lc` or `lchint`) beside the synthetic BE (and the
    background Procs `extra`)."""
    def fn(label):
        iters, kernel_us, be_kps = need("lc_iters"), need("lc_kernel_us"), need("be_kps")
        lenv = {"LC_ITERS": iters, "PERIOD_US": PERIOD_US, "PREP_US": PREP_US, **(lc_env or {})}
        benv = dict(be_env or {})
        with mps(label) if with_mps else contextlib.nullcontext({}) as mps_env:
            if with_mps:
                lenv.update(mps_env, CUDA_MPS_CLIENT_PRIORITY=0)
                benv.update(mps_env, CUDA_MPS_CLIENT_PRIORITY=1)
            r = run_all(label, [be_bg(be_vgpu, benv), *extra, Proc("lc", lc_be_cmd(mode, LC_S), lc_vgpu, lenv)],
                        LC_S + 45)
        check(r, "lc", "be")
        lc = r["lc"]
        ends = r["be"].pop("ends")
        be_win = rate_between(ends, lc["t_start"], lc["t_end"])
        busy = kernel_us * 1e-6 * (1e6 / PERIOD_US)
        idle_ratio = be_win / (be_kps * (1 - busy))
        res = {**lat_fields(lc), "lc": lc, "be_kernels_per_s": round(be_win, 3),
               "be_vs_alone": round(be_win / be_kps, 4), "lc_busy_fraction": round(busy, 4),
               "be_vs_idle_left": round(idle_ratio, 4), "be_target_met": idle_ratio >= 0.9}
        if lc_vgpu or be_vgpu:
            res["slices_set"] = {"lc": applied_slices(label, "lc"), "be": applied_slices(label, "be")}
        if with_mps:
            res["mps_new_client_lines"] = mps_clients_seen(label)
        return res
    return fn


def long_lc_slice_state():
    """A state directory whose node policy gives LC processes that share a
    GPU the LC's own 5 s slice (src/node/policy_file.h)."""
    d = Path(tempfile.mkdtemp(prefix="gpuslice-state-long-"))
    (d / "policy").write_text("lc_shared_slice_us 5000000\n")
    return {"GPUSLICE_STATE_DIR": str(d)}


def lc_own_context(vgpu=None, env=None):
    """lc_be lcctx: the synthetic LC beside the synthetic BE's kernels in a
    second context of the same process."""
    def fn(label):
        be_out = OUT / "work" / f"{label}-bectx.json"
        be_out.unlink(missing_ok=True)
        lenv = {"LC_ITERS": need("lc_iters"), "PERIOD_US": PERIOD_US, "BE_OUT": str(be_out), **(env or {})}
        r = run_all(label, [Proc("lc", lc_be_cmd("lcctx", LC_S), vgpu, lenv)], LC_S + 45)
        check(r, "lc")
        lc = r["lc"]
        ends = json.loads(be_out.read_text())["ends"]
        be_win = rate_between(ends, lc["t_start"], lc["t_end"])
        res = {**lat_fields(lc), "lc": lc, "be_kernels_per_s": round(be_win, 3),
               "be_vs_alone": round(be_win / need("be_kps"), 4)}
        if vgpu:
            res["slices_set"] = applied_slices(label, "lc")
        return res
    return fn


def idle_be(label):
    """A second BE vGPU whose process does nothing on the GPU (a notebook, an
    inference service with no traffic): a shell that waits for STOP_FILE."""
    return Proc("idle", ["sh", "-c", 'touch "$READY_FILE"; while [ ! -e "$STOP_FILE" ]; do sleep 0.1; done'],
                vg(f"{label.replace('_', '-')}-idle", "--priority", "be"), bg=True)


def idle_ctx_be(label):
    """idle_be, its process holding a CUDA context (torch's) and launching
    nothing; it says it is ready IDLE_BEFORE_READY_S (default 0) after its
    last kernel, so that the cell can measure a neighbour idle for that long
    (the daemon's timeslices.best_effort.idle_after_ms)."""
    code = ("import os, time, torch; torch.zeros(1, device='cuda'); torch.cuda.synchronize(); "
            "time.sleep(float(os.environ.get('IDLE_BEFORE_READY_S', '0'))); "
            "open(os.environ['READY_FILE'], 'w').close()\n"
            "while not os.path.exists(os.environ['STOP_FILE']): time.sleep(0.1)")
    return Proc("idle", [PYTHON, "-c", code], vg(f"{label.replace('_', '-')}-idle", "--priority", "be"), bg=True)


def waking_be(label):
    """idle_ctx_be that starts running (back-to-back matmuls) WAKE_AFTER_S
    (default 2) after it says it is ready: a neighbour the daemon had judged
    idle waking up beside the LC and the lone BE."""
    code = ("import os, time, torch; x = torch.randn(4096, 4096, device='cuda'); torch.cuda.synchronize(); "
            "time.sleep(float(os.environ.get('IDLE_BEFORE_READY_S', '0'))); "
            "open(os.environ['READY_FILE'], 'w').close(); "
            "time.sleep(float(os.environ.get('WAKE_AFTER_S', '2')))\n"
            "while not os.path.exists(os.environ['STOP_FILE']):\n"
            "    for _ in range(20): y = x @ x\n"
            "    torch.cuda.synchronize()")
    return Proc("waking", [PYTHON, "-c", code], vg(f"{label.replace('_', '-')}-waking", "--priority", "be"), bg=True)


def busy_be(label):
    """A second synthetic BE, busy, in a vGPU of its own."""
    return Proc("be2", lc_be_cmd("be", 600), vg(f"{label.replace('_', '-')}-be2", "--priority", "be"), bg=True)


def s_lchint_alone(label):
    env = {"LC_ITERS": need("lc_iters"), "PERIOD_US": PERIOD_US, "PREP_US": PREP_US}
    r = run_all(label, [Proc("lc", lc_be_cmd("lchint", LC_S), env=env)], LC_S + 30)
    check(r, "lc")
    return {**lat_fields(r["lc"]), "lc": r["lc"]}


HOLDER_PTX = HERE.parent.parent.parent / "src" / "interposer" / "holder_kernel.ptx"


def s_holdercheck(label):
    r = run_all(label, [Proc("h", [LC_BE, "holdercheck", str(HOLDER_PTX), "{out}"])], 60)
    check(r, "h")
    return r["h"]


def lce_env():
    return {"LC_ITERS": need("lce_iters"), "PERIOD_US": LCE_PERIOD_US}


def s_lce_alone(label):
    r = run_all(label, [Proc("lc", lc_be_cmd("lce", LC_S), env={"PERIOD_US": LCE_PERIOD_US})], LC_S + 30)
    check(r, "lc")
    ref["lce_iters"], ref["lce_kernel_us"] = r["lc"]["iters"], r["lc"]["kernel_us"]
    return {"lc": r["lc"], **lat_fields(r["lc"])}


def lce_pair(lc_vgpu=None, be_vgpu=None, lc_env=None):
    """The eager synthetic LC beside the synthetic BE."""
    def fn(label):
        be_kps = need("be_kps")
        lc_env_all = {**lce_env(), **(lc_env or {})}
        r = run_all(label, [be_bg(be_vgpu), Proc("lc", lc_be_cmd("lce", LC_S), lc_vgpu, lc_env_all)], LC_S + 45)
        check(r, "lc", "be")
        lc = r["lc"]
        ends = r["be"].pop("ends")
        be_win = rate_between(ends, lc["t_start"], lc["t_end"])
        busy = lc["kernels"] * need("lce_kernel_us") / LCE_PERIOD_US
        return {**lat_fields(lc), "lc": lc, "be_kernels_per_s": round(be_win, 3),
                "be_vs_alone": round(be_win / be_kps, 4), "lc_busy_fraction": round(busy, 4),
                "be_vs_idle_left": round(be_win / (be_kps * (1 - busy)), 4)}
    return fn


def cap_alone(mode):
    def fn(label):
        r = run_all(label, [Proc("a", lc_be_cmd(mode, CAP_S))], CAP_S + 30)
        check(r, "a")
        ref[f"{mode}_iters"], ref[f"{mode}_kps"] = r["a"]["iters"], r["a"]["kernels_per_s"]
        return {"kernels_per_s": r["a"]["kernels_per_s"], "run": r["a"]}
    return fn


def cap_30(mode):
    def fn(label):
        iters, alone = need(f"{mode}_iters"), need(f"{mode}_kps")
        r = run_all(label, [Proc("a", lc_be_cmd(mode, CAP_S), (label.replace("_", "-"), "--compute-cap", "30"),
                                 {"SMALL_ITERS": iters})], CAP_S + 30)
        check(r, "a")
        cap = 100 * r["a"]["kernels_per_s"] / alone
        return {"target_pct": 30, "cap_pct": round(cap, 2), "within_3pp": abs(cap - 30) <= 3,
                "kernels_per_s": r["a"]["kernels_per_s"], "alone_kernels_per_s": alone, "run": r["a"],
                "slices_set": applied_slices(label, "a")}
    return fn


def s_train_alone_stock(label):
    r = run_all(label, [Proc("a", train(TRAIN_S))], TRAIN_S + 60)
    check(r, "a")
    thr, _ = window_throughput(r)
    ref["train_sps"] = thr["a"]
    return {"steps_per_s": round(thr["a"], 3)}


def train_in_vgpu(flags, kind):
    def fn(label):
        alone = need("train_sps")
        r = run_all(label, [Proc("a", train(TRAIN_S), (label.replace("_", "-"), *flags))], TRAIN_S + 60)
        check(r, "a")
        thr, _ = window_throughput(r)
        res = {"steps_per_s": round(thr["a"], 3), "vs_stock_alone": round(thr["a"] / alone, 4),
               "slices_set": applied_slices(label, "a")}
        if kind == "cap":
            cap = 100 * thr["a"] / alone
            res.update(target_pct=30, cap_pct=round(cap, 2), within_3pp=abs(cap - 30) <= 3)
        return res
    return fn


def shares(targets):
    """Trainings together, each in a vGPU with --compute t; targets=None: stock."""
    def fn(label):
        alone = need("train_sps")
        tags = "abc"[:len(targets or (0, 0))]
        procs = [Proc(t, train(SHARE_S), None if targets is None else (f"{label.replace('_', '-')}-{t}",
                                                                     "--compute", str(targets[i])))
                 for i, t in enumerate(tags)]
        r = run_all(label, procs, SHARE_S + 70)
        check(r, *tags)
        thr, window = window_throughput(r)
        s = [thr[t] / alone for t in tags]
        res = {"share_vs_alone_pct": [round(100 * x, 2) for x in s],
               "share_of_total_pct": [round(100 * x / sum(s), 2) for x in s],
               "gpu_used_pct": round(100 * sum(s), 2), "window_s": round(window, 1)}
        if targets is not None:
            res["target"] = list(targets)
            res["max_error_pp_of_total"] = round(max(abs(100 * x / sum(s) - t) for x, t in zip(s, targets)), 2)
            res["max_error_pp_vs_alone"] = round(max(abs(100 * x - t) for x, t in zip(s, targets)), 2)
            res["slices_set"] = {t: applied_slices(label, t) for t in tags}
        return res
    return fn


RN_STOCK_PHASES = "eager,graph,eager+prep"
RN_GPUSLICE_PHASES = "eager,eager+span,graph,graph+span,eager+prep,eager+hint"
RN_ALWAYS_PHASES = "eager,graph"
RN_MPS_PHASES = "eager,graph"


def lc_torch(phases, vgpu=None, env=None):
    e = {"LC_MODES": phases, "LC_RATE": LC_RATE, "PREP_US": PREP_US, **(env or {})}
    return Proc("lc", [PYTHON, str(HERE / "lc_torch.py"), str(RN_PHASE_S), "{out}"], vgpu, e)


def rn_est(phases, with_be=True):
    return (TORCH_UP + 3 if with_be else 0) + TORCH_UP + RN_PHASE_S * len(phases.split(","))


def s_rn50_alone(label):
    r = run_all(label, [lc_torch(RN_STOCK_PHASES)], rn_est(RN_STOCK_PHASES, False) * 2 + 30)
    check(r, "lc")
    ref["rn50_graph_gpu_us"] = r["lc"]["graph_gpu_us"]
    return {"phases": {k: lat_fields(v) for k, v in r["lc"]["phases"].items()}, "lc": r["lc"]}


def rn50_pair(phases, lc_vgpu=None, be_vgpu=None, with_mps=False, lc_env=None):
    def fn(label):
        alone = need("train_sps")
        gpu_us = ref.get("rn50_graph_gpu_us")
        lenv, benv = dict(lc_env or {}), {}
        with mps(label) if with_mps else contextlib.nullcontext({}) as mps_env:
            if with_mps:
                lenv.update(mps_env, CUDA_MPS_CLIENT_PRIORITY=0)
                benv.update(mps_env, CUDA_MPS_CLIENT_PRIORITY=1)
            r = run_all(label, [train_bg(be_vgpu, benv), lc_torch(phases, lc_vgpu, lenv)], rn_est(phases) * 2 + 30)
        check(r, "lc", "be")
        ends = r["be"]["step_ends"]
        busy = gpu_us * 1e-6 * LC_RATE if gpu_us else None
        out = {}
        for name, ph in r["lc"]["phases"].items():
            row = lat_fields(ph)
            row.update(late=ph["late"], span_used=ph["span_used"], hint_used=ph["hint_used"])
            with contextlib.suppress(RuntimeError):
                sps = rate_between(ends, ph["t_start"], ph["t_end"])
                row.update(be_steps_per_s=round(sps, 3), be_vs_alone=round(sps / alone, 4))
                if busy is not None:
                    row["be_vs_idle_left"] = round(sps / (alone * (1 - busy)), 4)
            out[name] = row
        res = {"phases": out, "lc_busy_fraction": None if busy is None else round(busy, 4),
               "span_available": r["lc"].get("span_available"), "hint_available": r["lc"].get("hint_available"),
               "lc": r["lc"]}
        if lc_vgpu or be_vgpu:
            res["slices_set"] = {"lc": applied_slices(label, "lc"), "be": applied_slices(label, "be")}
        if with_mps:
            res["mps_new_client_lines"] = mps_clients_seen(label)
        return res
    return fn


def vg(name, *flags):
    return (name, *flags)


LC_VG = lambda label: vg(f"{label.replace('_', '-')}-lc", "--priority", "lc")  # noqa: E731
BE_VG = lambda label: vg(f"{label.replace('_', '-')}-be", "--priority", "be")  # noqa: E731


def with_label(make):
    """A scenario function whose vGPU names depend on its label."""
    return lambda label: make(label)(label)


# name, group, function(label) -> dict, estimated seconds, needs (run first)
SCENARIOS = [
    ("lc_alone", "synthetic", s_lc_alone, LC_S + C_UP, ()),
    ("be_alone", "synthetic", s_be_alone, LC_S + C_UP, ()),
    ("lc_be_stock", "synthetic", lc_pair("lc"), LC_S + 2 * C_UP + 2, ("lc_alone", "be_alone")),
    ("lc_be_gpuslice", "synthetic",
     with_label(lambda l: lc_pair("lc", LC_VG(l), BE_VG(l))), LC_S + 2 * C_UP + 3, ("lc_alone", "be_alone")),
    ("lc_be_mps", "synthetic mps", lc_pair("lc", with_mps=True), LC_S + 2 * C_UP + 5, ("lc_alone", "be_alone")),
    ("lchint_alone", "hint", s_lchint_alone, LC_S + C_UP, ("lc_alone",)),
    ("lchint_be_stock", "hint", lc_pair("lchint"), LC_S + 2 * C_UP + 2, ("lc_alone", "be_alone")),
    ("lchint_be_gpuslice", "hint",
     with_label(lambda l: lc_pair("lchint", LC_VG(l), BE_VG(l))), LC_S + 2 * C_UP + 3, ("lc_alone", "be_alone")),
    ("lchint_be_gpuslice_hint", "hint",
     with_label(lambda l: lc_pair("lchint", LC_VG(l), BE_VG(l), lc_env={"LC_HINT": 1})), LC_S + 2 * C_UP + 3,
     ("lc_alone", "be_alone")),
    ("lc_workers_gpuslice", "workers", with_label(lambda l: lc_pair("lc", LC_VG(l), LC_VG(l))), LC_S + 2 * C_UP + 3,
     ("lc_alone", "be_alone")),
    ("lc_workers_gpuslice_long", "workers",
     with_label(lambda l: (lambda st: lc_pair("lc", LC_VG(l), LC_VG(l), lc_env=st, be_env=st))(long_lc_slice_state())),
     LC_S + 2 * C_UP + 3, ("lc_alone", "be_alone")),
    ("lc_be_gpuslice_idle_be", "idle",
     with_label(lambda l: lc_pair("lc", LC_VG(l), BE_VG(l), extra=[idle_be(l)])), LC_S + 2 * C_UP + 4,
     ("lc_alone", "be_alone")),
    ("lc_be_gpuslice_idle_ctx_be", "idle",
     with_label(lambda l: lc_pair("lc", LC_VG(l), BE_VG(l), extra=[idle_ctx_be(l)])),
     LC_S + 2 * C_UP + 8 + float(os.environ.get("IDLE_BEFORE_READY_S", "0")),
     ("lc_alone", "be_alone")),
    ("lc_be_gpuslice_waking_be", "idle",
     with_label(lambda l: lc_pair("lc", LC_VG(l), BE_VG(l), extra=[waking_be(l)])),
     LC_S + 2 * C_UP + 8 + float(os.environ.get("IDLE_BEFORE_READY_S", "0")),
     ("lc_alone", "be_alone")),
    ("lc_be_gpuslice_busy_be", "idle",
     with_label(lambda l: lc_pair("lc", LC_VG(l), BE_VG(l), extra=[busy_be(l)])), LC_S + 2 * C_UP + 4,
     ("lc_alone", "be_alone")),
    ("lc_ctx_stock", "workers", lc_own_context(), LC_S + C_UP + 3, ("lc_alone", "be_alone")),
    ("lc_ctx_gpuslice", "workers", with_label(lambda l: lc_own_context(LC_VG(l))), LC_S + C_UP + 3,
     ("lc_alone", "be_alone")),
    ("lc_ctx_gpuslice_long", "workers", with_label(lambda l: lc_own_context(LC_VG(l), long_lc_slice_state())),
     LC_S + C_UP + 3, ("lc_alone", "be_alone")),
    ("holdercheck", "holder", s_holdercheck, 10, ()),
    ("lce_alone", "eager", s_lce_alone, LC_S + C_UP, ()),
    ("lce_be_stock", "eager", lce_pair(), LC_S + 2 * C_UP + 2, ("lce_alone", "be_alone")),
    ("lce_be_gpuslice", "eager", with_label(lambda l: lce_pair(LC_VG(l), BE_VG(l))), LC_S + 2 * C_UP + 3,
     ("lce_alone", "be_alone")),
    ("lce_be_gpuslice_span", "eager", with_label(lambda l: lce_pair(LC_VG(l), BE_VG(l), {"LC_SPAN": 1})),
     LC_S + 2 * C_UP + 3, ("lce_alone", "be_alone")),
    ("lce_be_gpuslice_span_holder", "eager",
     with_label(lambda l: lce_pair(LC_VG(l), BE_VG(l), {"LC_SPAN": 1, "GPUSLICE_LC_HOLDER": "span"})),
     LC_S + 2 * C_UP + 3, ("lce_alone", "be_alone")),
    ("lce_be_gpuslice_always", "eager",
     with_label(lambda l: lce_pair(LC_VG(l), BE_VG(l), {"GPUSLICE_LC_HOLDER": "always"})),
     LC_S + 2 * C_UP + 3, ("lce_alone", "be_alone")),
    ("lce_be_gpuslice_app_same", "holderexp",
     with_label(lambda l: lce_pair(LC_VG(l), BE_VG(l), {"APP_HOLDER": "same", "HOLDER_PTX": str(HOLDER_PTX)})),
     LC_S + 2 * C_UP + 3, ("lce_alone", "be_alone")),
    ("lchint_be_gpuslice_app_same", "holderexp",
     with_label(lambda l: lc_pair("lchint", LC_VG(l), BE_VG(l), lc_env={"APP_HOLDER": "same",
                                                                        "HOLDER_PTX": str(HOLDER_PTX)})),
     LC_S + 2 * C_UP + 3, ("lc_alone", "be_alone")),
    ("lchint_be_gpuslice_app_other", "holderexp",
     with_label(lambda l: lc_pair("lchint", LC_VG(l), BE_VG(l), lc_env={"APP_HOLDER": "other",
                                                                        "HOLDER_PTX": str(HOLDER_PTX)})),
     LC_S + 2 * C_UP + 3, ("lc_alone", "be_alone")),
    ("lchint_be_gpuslice_hint_holder", "holderexp",
     with_label(lambda l: lc_pair("lchint", LC_VG(l), BE_VG(l), lc_env={"LC_HINT": 1, "GPUSLICE_LC_HOLDER": "hint"})),
     LC_S + 2 * C_UP + 3, ("lc_alone", "be_alone")),
    ("small_alone", "cap", cap_alone("small"), CAP_S + C_UP, ()),
    ("small_cap30", "cap", cap_30("small"), CAP_S + C_UP + 1, ("small_alone",)),
    ("graph_alone", "cap", cap_alone("graph"), CAP_S + C_UP, ()),
    ("graph_cap30", "cap", cap_30("graph"), CAP_S + C_UP + 1, ("graph_alone",)),
    ("train_alone_stock", "train", s_train_alone_stock, TRAIN_S + TORCH_UP + 1, ()),
    ("train_alone_30", "train", train_in_vgpu(("--compute", "30"), "elastic"), TRAIN_S + TORCH_UP + 2,
     ("train_alone_stock",)),
    ("train_cap_30", "cap", train_in_vgpu(("--compute-cap", "30"), "cap"), TRAIN_S + TORCH_UP + 2,
     ("train_alone_stock",)),
    ("rn50_alone", "rn50", s_rn50_alone, rn_est(RN_STOCK_PHASES, False), ()),
    ("rn50_be_stock", "rn50", rn50_pair(RN_STOCK_PHASES), rn_est(RN_STOCK_PHASES), ("train_alone_stock",
                                                                                    "rn50_alone")),
    ("rn50_be_gpuslice", "rn50", with_label(lambda l: rn50_pair(RN_GPUSLICE_PHASES, LC_VG(l), BE_VG(l))),
     rn_est(RN_GPUSLICE_PHASES) + 1, ("train_alone_stock", "rn50_alone")),
    ("rn50_be_gpuslice_always", "rn50",
     with_label(lambda l: rn50_pair(RN_ALWAYS_PHASES, LC_VG(l), BE_VG(l), lc_env={"GPUSLICE_LC_HOLDER": "always"})),
     rn_est(RN_ALWAYS_PHASES) + 1, ("train_alone_stock", "rn50_alone")),
    ("rn50_be_mps", "rn50 mps", rn50_pair(RN_MPS_PHASES, with_mps=True), rn_est(RN_MPS_PHASES) + 3,
     ("train_alone_stock", "rn50_alone")),
    ("share_stock", "share", shares(None), SHARE_S + TORCH_UP + 3, ("train_alone_stock",)),
    ("share_30_70", "share", shares((30, 70)), SHARE_S + TORCH_UP + 3, ("train_alone_stock",)),
    ("share_10_90", "share", shares((10, 90)), SHARE_S + TORCH_UP + 3, ("train_alone_stock",)),
    ("share_20_30_50", "share", shares((20, 30, 50)), SHARE_S + TORCH_UP + 5, ("train_alone_stock",)),
]


def select():
    """The scenarios to run, in SCENARIOS order: those named (or in a named
    group) in $SCENARIOS (all by default), less $SKIP_SCENARIOS, plus what
    they need."""
    names = [s[0] for s in SCENARIOS]
    groups = {g for s in SCENARIOS for g in s[1].split()}

    def expand(text):
        picked = set()
        for tok in (t.strip() for t in text.split(",")):
            if not tok:
                continue
            if tok in names:
                picked.add(tok)
            elif tok in groups:
                picked |= {s[0] for s in SCENARIOS if tok in s[1].split()}
            else:
                sys.exit(f"run_compute: unknown scenario or group {tok!r}; scenarios: {', '.join(names)}; "
                         f"groups: {', '.join(sorted(groups))}")
        return picked

    wanted = expand(os.environ.get("SCENARIOS", "")) or set(names)
    wanted -= expand(os.environ.get("SKIP_SCENARIOS", ""))
    needs = {s[0]: s[4] for s in SCENARIOS}
    todo = list(wanted)
    while todo:
        for n in needs[todo.pop()]:
            if n not in wanted:
                wanted.add(n)
                todo.append(n)
    return [s for s in SCENARIOS if s[0] in wanted]


def scenario(name, group, fn, est):
    if "mps" in group.split() and MPS_CONTROL is None:
        results["scenarios"][name] = {"skipped": "no nvidia-cuda-mps-control on PATH (or NO_MPS=1)"}
        save()
        return
    if left() < est:
        results["scenarios"][name] = {"skipped": "budget", "estimate_s": round(est), "left_s": round(left())}
        save()
        print(name, "skipped: budget", flush=True)
        return
    t0 = time.monotonic()
    try:
        results["scenarios"][name] = fn(name)
    except Exception as e:  # noqa: BLE001 - record and go on
        results["scenarios"][name] = {"error": f"{type(e).__name__}: {e}"}
    results["scenarios"][name]["seconds"] = round(time.monotonic() - t0, 1)
    save()
    print(name, summary(name, results["scenarios"][name]), flush=True)


def summary(name, r):
    """One line of headline figures."""
    if "error" in r or "skipped" in r:
        return r.get("error") or "skipped: " + r["skipped"]
    parts = []
    if "p50_us" in r:
        parts.append(f"LC p50/p99 {r['p50_us']:.0f}/{r['p99_us']:.0f} us")
    if "be_vs_idle_left" in r:
        parts.append(f"BE {r['be_vs_idle_left']:.3f} of idle left")
    if "phases" in r:
        for k, v in r["phases"].items():
            s = f"{k}: {v.get('p50_us', 0) / 1000:.2f}/{v.get('p99_us', 0) / 1000:.2f} ms"
            if "be_vs_alone" in v:
                s += f" (BE {100 * v['be_vs_alone']:.0f}%)"
            parts.append(s)
    if "unreleased_bound_2ms_us" in r:
        parts.append("holder ends: " + ", ".join(f"{k} p50 {v['p50']:.0f} max {v['max']:.0f} us"
                                                  for k, v in r.items() if k.endswith("_us")))
    if "cap_pct" in r:
        parts.append(f"cap {r['cap_pct']:.1f}% (target 30)")
    elif "steps_per_s" in r:
        parts.append(f"{r['steps_per_s']:.2f} steps/s" + (f" ({100 * r['vs_stock_alone']:.1f}% of alone)"
                                                           if "vs_stock_alone" in r else ""))
    elif "be_kernels_per_s" in r and "p50_us" not in r:
        parts.append(f"BE {r['be_kernels_per_s']:.2f} kernels/s")
    elif "kernels_per_s" in r:
        parts.append(f"{r['kernels_per_s']:.0f} kernels/s")
    if "share_vs_alone_pct" in r:
        parts.append(f"share vs alone {r['share_vs_alone_pct']}, of total {r['share_of_total_pct']}"
                     + (f", target {r['target']}" if "target" in r else ""))
    return "; ".join(parts) + f"  [{r.get('seconds', 0)} s]"


def main():
    chosen = select()
    try:
        smi = subprocess.run(["nvidia-smi", "-i", GPU, "--query-gpu=name,driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=30).stdout.strip()
    except (OSError, subprocess.SubprocessError) as e:
        smi = f"nvidia-smi: {e}"
    results["meta"] = {
        "gpu": smi, "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"), "host": platform.node(),
        "scenarios": [s[0] for s in chosen], "mps": MPS_CONTROL,
        "knobs": {"BENCH_BUDGET_S": BUDGET_S, "TRAIN_S": TRAIN_S, "SHARE_S": SHARE_S, "LC_S": LC_S, "CAP_S": CAP_S,
                  "RN_PHASE_S": RN_PHASE_S, "LC_RATE": LC_RATE, "PREP_US": PREP_US, "PERIOD_US": PERIOD_US},
        "estimate_s": round(sum(s[3] for s in chosen)),
    }
    print(f"{len(chosen)} scenarios, estimated {results['meta']['estimate_s']} s, budget {BUDGET_S:.0f} s", flush=True)
    if os.environ.get("DRY_RUN") == "1":
        for name, group, _, est, needs in chosen:
            print(f"  {name:26s} {group:14s} ~{est:4.0f} s" + (f"  needs {', '.join(needs)}" if needs else ""))
        return
    save()
    own_state = "GPUSLICE_STATE_DIR" not in os.environ
    if own_state:
        os.environ["GPUSLICE_STATE_DIR"] = tempfile.mkdtemp(prefix="gpuslice-state-")
    try:
        for name, group, fn, est, _ in chosen:
            scenario(name, group, fn, est)
    finally:
        if own_state:
            shutil.rmtree(os.environ["GPUSLICE_STATE_DIR"], ignore_errors=True)
    results["meta"]["seconds"] = round(time.monotonic() - STARTED, 1)
    save()
    print("\nsummary (all figures in", OUT / "compute.json", ")")
    for name, r in results["scenarios"].items():
        print(f"  {name:26s} {summary(name, r)}")


if __name__ == "__main__":
    main()
