"""The seed papers' experiments, regenerated on one GPU (issue 16).

GaiaGPU (parts a-d) and GPreempt (part g), each cell written to
$OUT/papers.json (and the tables to $OUT/papers.md) as soon as it ends, so a
run cut short keeps what it got. README.md says what each part measures.

    python3 bench/gpu/papers/run_papers.py [--parts a,b,c,d,g] [--dry-run] [--fake]

  a  overhead: MNIST-shaped training, PyTorch and CuPy (JAX where it is
     installed with a GPU backend), without and with gpuslice, in turns
  b  one GPU split into 1, 2, 3, 4, 5 and 8 vGPUs, --compute 100/N each,
     each tenant's throughput against its share (fraction of alone)
  c  isolation, 2, 4 and 8 tenants: each tries to take 1.5x its memory
     limit, then trains (every other tenant at twice the batch): memory
     limit against the peak (ledger and nvidia-smi), GPU time per tenant
  d  elastic allocation: A (--compute 30) alone, B (--compute 70) joins,
     `gpuslice set` swaps the shares, B leaves: a throughput timeline
  g  GPreempt: LC (CUDA-graph encoder) latency p50/p99 and BE (transformer
     training) throughput at LC 50/100/200/400 req/s: alone, stock
     time-slicing, MPS (a private daemon, client priorities), sequential
     (one process, LC between BE steps), gpuslice (--priority lc / be)

Env: OUT (/tmp/gpuslice-papers), SCRATCH (logs/ and work/; default OUT),
PACK_LOGS=1 (tar them into OUT/papers-logs.tgz), GPUSLICE_CMD / GPUSLICE_BIN,
PYTHON, BENCH_GPU (0), BENCH_BUDGET_S (520: the parts share it in
proportion to their estimates; a cell whose estimate does not fit in its
part's time left is recorded as skipped; every child is killed at its
cell's limit), PARTS (= --parts), and the windows: OVH_PAIRS (2), OVH_S (3,
seconds per batch size per run), OVH_BATCHES (64,2048), GAIA_BATCH (2048),
SPLIT_NS (1,2,4,8,3,5), SPLIT_S (6), ISO_NS (2,4,8), ISO_S (8), ISO_GRAB (1.5),
ELASTIC_PHASE_S (6), ELASTIC_BIN_S (0.5), GP_RATES (50,100,200,400),
GP_PHASE_S (3.5), GP_SETTINGS (stock,gpuslice,seq,mps), SAMPLE_S (0.5),
GPU_TOTAL_GIB (from nvidia-smi), NO_MPS=1.
Never changes clocks, power, compute mode or MIG; never resets the GPU.
Standard library only (the children import torch / cupy / jax).
"""
import argparse
import atexit
import contextlib
import json
import os
import platform
import re
import shutil
import signal
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[2]
sys.path.insert(0, str(HERE))
import plot  # noqa: E402 - tables (plot.py imports matplotlib only to draw)


def env_f(name, default):
    v = os.environ.get(name, "")
    return float(v) if v.strip() else float(default)


def env_list(name, default):
    return [t.strip() for t in os.environ.get(name, default).split(",") if t.strip()]


OUT = Path(os.environ.get("OUT", "/tmp/gpuslice-papers"))
SCRATCH = Path(os.environ.get("SCRATCH", str(OUT)))
GPUSLICE = os.environ.get("GPUSLICE_CMD", os.environ.get("GPUSLICE_BIN", str(REPO / "build/bin/gpuslice")))
PYTHON = os.environ.get("PYTHON", sys.executable)
GPU = os.environ.get("BENCH_GPU", "0")
BUDGET_S = env_f("BENCH_BUDGET_S", 520)
OVH_PAIRS = int(env_f("OVH_PAIRS", 2))
OVH_S = env_f("OVH_S", 3)
OVH_BATCHES = [int(b) for b in env_list("OVH_BATCHES", "64,2048")]
GAIA_BATCH = int(env_f("GAIA_BATCH", 2048))
SPLIT_NS = [int(n) for n in env_list("SPLIT_NS", "1,2,4,8,3,5")]
SPLIT_S = env_f("SPLIT_S", 6)
ISO_NS = [int(n) for n in env_list("ISO_NS", "2,4,8")]
ISO_S = env_f("ISO_S", 8)
ISO_GRAB = env_f("ISO_GRAB", 1.5)
EL_PHASE_S = env_f("ELASTIC_PHASE_S", 6)
EL_BIN_S = env_f("ELASTIC_BIN_S", 0.5)
GP_RATES = [float(r) for r in env_list("GP_RATES", "50,100,200,400")]
GP_PHASE_S = env_f("GP_PHASE_S", 3.5)
GP_SETTINGS = env_list("GP_SETTINGS", "stock,gpuslice,seq,mps")
SAMPLE_S = env_f("SAMPLE_S", 0.5)
SETTLE_S = 0.5
STARTED = time.monotonic()
FAKE = False
DRY = False
MNIST_UP, CUPY_UP, TORCH_UP = 8.0, 6.0, 11.0  # start-up estimates (s): MNIST torch / CuPy child, lc_sweep or train.py; pessimistic

results = {"meta": {}, "parts": {}}
LIVE = []  # every child Popen (own session), killed on exit


def left():
    return BUDGET_S - (time.monotonic() - STARTED)


# ---------------------------------------------------------------- plumbing

def kill_group(p):
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(p.pid, signal.SIGKILL)
    with contextlib.suppress(Exception):
        p.wait(timeout=10)


def kill_all():
    for p in LIVE:
        if p.poll() is None:
            kill_group(p)


def log_tail(path, n=600):
    try:
        return Path(path).read_text(errors="replace")[-n:]
    except OSError:
        return ""


def gs(*args):
    return [*GPUSLICE.split(), *args]


def base_env():
    env = dict(os.environ, CUDA_VISIBLE_DEVICES=GPU, GPUSLICE_LOG="info")
    env.pop("GPUSLICE_SOCKET", None)
    return env


def cli(args, env, timeout=20):
    try:
        r = subprocess.run(gs(*args), env=env, capture_output=True, text=True, timeout=timeout)
        return r.returncode, r.stdout, r.stderr
    except (OSError, subprocess.SubprocessError) as e:
        return -1, "", str(e)


def save():
    OUT.mkdir(parents=True, exist_ok=True)
    results["meta"]["seconds"] = round(time.monotonic() - STARTED, 1)
    tmp = OUT / "papers.json.tmp"
    tmp.write_text(json.dumps(results, indent=1))
    os.replace(tmp, OUT / "papers.json")
    try:
        text = plot.render_md(results)
    except Exception as e:  # noqa: BLE001 - the JSON is what matters
        text = f"# papers\n\nrender failed: {type(e).__name__}: {e}\n"
    tmp = OUT / "papers.md.tmp"
    tmp.write_text(text)
    os.replace(tmp, OUT / "papers.md")


class Child:
    """One child process. cmd: "{out}" stands for its result file. vgpu:
    (name, flags...) to run it through `gpuslice run`, else None. env: added
    (None removes). Files: READY (it creates), GO and STOP (the parent's;
    own per child unless shared_go / shared_stop)."""

    def __init__(self, tag, cmd, vgpu=None, env=None):
        self.tag, self.cmd, self.vgpu, self.env = tag, cmd, vgpu, env or {}
        self.p = self.out = self.ready = self.go = self.stop = self.log = None


class Cell:
    def __init__(self, label, limit_s, env=None):
        self.label, self.env = label, env or base_env()
        self.deadline = time.monotonic() + min(limit_s, max(5.0, left() + 10))
        self.logs, self.work = SCRATCH / "logs", SCRATCH / "work"
        self.logs.mkdir(parents=True, exist_ok=True)
        self.work.mkdir(parents=True, exist_ok=True)
        self.children = []
        self.go_all, self.stop_all = self.work / f"{label}.go", self.work / f"{label}.stop"
        for f in (self.go_all, self.stop_all):
            f.unlink(missing_ok=True)

    def start(self, ch, own_go=False, own_stop=False, gated=True):
        w = self.work
        ch.out, ch.ready = w / f"{self.label}-{ch.tag}.json", w / f"{self.label}-{ch.tag}.ready"
        ch.go = w / f"{self.label}-{ch.tag}.go" if own_go else self.go_all
        ch.stop = w / f"{self.label}-{ch.tag}.stop" if own_stop else self.stop_all
        for f in (ch.out, ch.ready, ch.go, ch.stop):
            if f not in (self.go_all, self.stop_all):
                f.unlink(missing_ok=True)
        env = dict(self.env, READY_FILE=str(ch.ready), STOP_FILE=str(ch.stop))
        if gated:
            env["GO_FILE"] = str(ch.go)
        for k, v in ch.env.items():
            if v is None:
                env.pop(k, None)
            else:
                env[k] = str(v)
        cmd = [str(ch.out) if c == "{out}" else c for c in ch.cmd]
        if ch.vgpu is not None:
            name, *flags = ch.vgpu
            cmd = gs("run", "--gpu", GPU, "--name", name, *flags, "--", *cmd)
        ch.log = self.logs / f"{self.label}-{ch.tag}.log"
        with open(ch.log, "w") as log:
            ch.p = subprocess.Popen(cmd, env=env, stdout=log, stderr=log, start_new_session=True)
        LIVE.append(ch.p)
        self.children.append(ch)
        return ch

    def wait_ready(self, chs=None):
        chs = self.children if chs is None else chs
        while not all(c.ready.exists() for c in chs):
            dead = [c for c in chs if c.p.poll() is not None and not c.ready.exists()]
            if dead or time.monotonic() > self.deadline:
                raise RuntimeError("not ready: " + " | ".join(
                    f"{c.tag}: exit {c.p.poll()}: {log_tail(c.log, 300)}" for c in (dead or chs)))
            time.sleep(0.02)

    def sleep(self, s):
        time.sleep(max(0.0, min(s, self.deadline - time.monotonic())))

    def wait_exit(self, chs, grace=30):
        for c in chs:
            try:
                c.p.wait(timeout=max(0.1, min(self.deadline, time.monotonic() + grace) - time.monotonic()))
            except subprocess.TimeoutExpired:
                kill_group(c.p)

    def finish(self):
        for c in self.children:
            if c.p.poll() is None:
                kill_group(c.p)
        out = {}
        for c in self.children:
            try:
                out[c.tag] = json.loads(c.out.read_text())
            except (OSError, ValueError):
                out[c.tag] = {}
            if c.p.returncode != 0:
                out[c.tag]["error"] = f"exit status {c.p.returncode}"
                out[c.tag]["log_tail"] = log_tail(c.log)
        return out


def need_ok(r, *tags):
    for t in tags:
        if "error" in r.get(t, {"error": "did not run"}):
            raise RuntimeError(f"{t}: {r.get(t, {}).get('error', 'did not run')}: {r.get(t, {}).get('log_tail', '')[-400:]}")


def rate(ends, t0, t1):
    n = sum(1 for e in ends if t0 <= e < t1)
    return n / (t1 - t0) if t1 > t0 else None


def find_key(obj, key):
    """Every number under `key` anywhere in obj (ls --json's gpu_seconds may
    sit on the vGPU or on each of its devices)."""
    found = []
    if isinstance(obj, dict):
        for k, v in obj.items():
            if k == key and isinstance(v, (int, float)) and not isinstance(v, bool):
                found.append(float(v))
            else:
                found += find_key(v, key)
    elif isinstance(obj, list):
        for v in obj:
            found += find_key(v, key)
    return found


def vgpu_gpu_seconds(v):
    """A vGPU's GPU time from its `ls --json` object: its own gpu_seconds,
    else the sum over its devices', else None (an ls without the field)."""
    if isinstance(v.get("gpu_seconds"), (int, float)):
        return float(v["gpu_seconds"])
    per_dev = [d["gpu_seconds"] for d in v.get("devices", []) if isinstance(d.get("gpu_seconds"), (int, float))]
    if per_dev:
        return float(sum(per_dev))
    found = find_key(v, "gpu_seconds")
    return float(found[0]) if len(found) == 1 else None


def ls_json(env):
    rc_, out, _ = cli(["ls", "--json"], env, timeout=10)
    if rc_ != 0:
        return None
    with contextlib.suppress(ValueError):
        return {v["name"]: v for v in json.loads(out).get("vgpus", [])}
    return None


def smi_apps():
    """{pid: used MiB} from nvidia-smi, or None."""
    if FAKE or not shutil.which("nvidia-smi"):
        return None
    try:
        r = subprocess.run(["nvidia-smi", "--query-compute-apps=pid,used_memory", "--format=csv,noheader,nounits"],
                           capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    out = {}
    for line in r.stdout.splitlines():
        with contextlib.suppress(ValueError):
            pid, mib = (x.strip() for x in line.split(","))
            out[int(pid)] = float(mib)
    return out


class Sampler(threading.Thread):
    """Every SAMPLE_S: `gpuslice ls --json` (memory used, gpu_seconds, measured
    ratio per vGPU) and nvidia-smi's per-process memory; keeps the peaks and
    the series."""

    def __init__(self, env, metrics_port=None, smi=False):
        super().__init__(daemon=True)
        self.env, self.port, self.halt, self.want_smi = env, metrics_port, threading.Event(), smi
        self.ls, self.smi, self.metrics = [], [], []

    def run(self):
        while not self.halt.is_set():
            t = time.monotonic()
            v = ls_json(self.env)
            if v is not None:
                self.ls.append((t, {n: {"mem": sum(d.get("memory_used_bytes", 0) for d in x.get("devices", [])),
                                        "gpu_seconds": vgpu_gpu_seconds(x),
                                        "ratio": [d.get("compute_measured_ratio") for d in x.get("devices", [])]}
                                    for n, x in v.items()}))
            s = smi_apps() if self.want_smi else None
            if s is not None:
                self.smi.append((t, s))
            if self.port:
                m = scrape_gpu_seconds(self.port)
                if m is not None:
                    self.metrics.append((time.monotonic(), m))
            self.halt.wait(max(0.05, SAMPLE_S - (time.monotonic() - t)))

    def stop(self):
        self.halt.set()
        self.join(timeout=15)

    def mem_peak(self, name):
        vals = [s[name]["mem"] for _, s in self.ls if name in s]
        return max(vals) if vals else None

    def smi_peak(self, pid):
        vals = [s[pid] for _, s in self.smi if pid in s]
        return max(vals) if vals else None

    def gpu_seconds(self, name, t0, t1):
        """(seconds of GPU time over [t0, t1], source) from ls --json, else the
        daemon's /metrics; the samples nearest inside the window's ends."""
        for series, src in ((self.ls, "ls --json gpu_seconds"), (self.metrics, "/metrics gpuslice_vgpu_gpu_seconds_total")):
            pts = [(t, (s[name]["gpu_seconds"] if src.startswith("ls") else s.get(name)))
                   for t, s in series if name in s and t0 - SAMPLE_S <= t <= t1 + SAMPLE_S]
            pts = [(t, v) for t, v in pts if v is not None]
            if len(pts) >= 2 and pts[-1][0] > pts[0][0] and pts[-1][1] > pts[0][1]:
                (ta, va), (tb, vb) = pts[0], pts[-1]
                return (vb - va) / (tb - ta), src  # GPU-seconds per second of wall time
        return None, None  # no source, or it never moved (NVML gave the daemon no process samples)

    def ratio(self, name, t0, t1):
        vals = [r for t, s in self.ls if t0 <= t <= t1 and name in s for r in s[name]["ratio"] if r is not None]
        return round(sum(vals) / len(vals), 4) if vals else None


def scrape_gpu_seconds(port):
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
            text = r.read().decode()
    except OSError:
        return None
    out = {}
    for line in text.splitlines():
        m = re.match(r"gpuslice_vgpu_gpu_seconds_total\{(.*)\} (\S+)$", line)
        if m:
            labels = dict(re.findall(r'(\w+)="([^"]*)"', m.group(1)))
            out[labels.get("vgpu", "")] = out.get(labels.get("vgpu", ""), 0.0) + float(m.group(2))
    return out


class Skip(Exception):
    """A cell that cannot run here, for a stated reason (recorded as skipped)."""


class Daemon:
    """A `gpuslice daemon` on its own state directory, for parts b-d (`set`,
    GPU time). The children's env points at it."""

    def __init__(self):
        self.dir = Path(tempfile.mkdtemp(prefix="gpuslice-papers-d-"))
        self.env = dict(base_env(), GPUSLICE_STATE_DIR=str(self.dir / "state"))
        (SCRATCH / "logs").mkdir(parents=True, exist_ok=True)
        self.logpath = SCRATCH / "logs" / "daemon.log"
        self.log = open(self.logpath, "a")
        self.p = subprocess.Popen(gs("daemon", "--metrics-address", "127.0.0.1:0"), env=self.env, stdout=self.log,
                                  stderr=self.log, start_new_session=True)
        LIVE.append(self.p)
        deadline = time.monotonic() + 30
        while not (self.dir / "state" / "gpuslice.sock").exists():
            if self.p.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("daemon did not start: " + log_tail(self.logpath, 400))
            time.sleep(0.05)
        self.port = None
        for _ in range(40):
            m = re.search(r"metrics on http://127\.0\.0\.1:(\d+)/", log_tail(self.logpath, 1 << 20))
            if m:
                self.port = int(m.group(1))
                break
            time.sleep(0.05)

    def stop(self):
        with contextlib.suppress(ProcessLookupError):
            self.p.send_signal(signal.SIGTERM)
        try:
            self.p.wait(timeout=30)
        except subprocess.TimeoutExpired:
            kill_group(self.p)
        self.log.close()
        shutil.rmtree(self.dir, ignore_errors=True)


DAEMON = None


def daemon():
    global DAEMON
    if DAEMON is None:
        DAEMON = Daemon()
    return DAEMON


# ---------------------------------------------------------------- children

def mnist_cmd(fw, mode):
    if FAKE:
        return [sys.executable, str(HERE / "fake_child.py"), "mnist", mode, "{out}"]
    return [PYTHON, str(HERE / f"mnist_{fw}.py"), mode, "{out}"]


def lc_cmd(mode):
    if FAKE:
        return [sys.executable, str(HERE / "fake_child.py"), "lc", mode, "{out}"]
    return [PYTHON, str(HERE / "lc_sweep.py"), mode, "{out}"]


def be_cmd():
    if FAKE:
        return [sys.executable, str(HERE / "fake_child.py"), "be", "600", "{out}"]
    return [PYTHON, str(HERE.parent / "compute" / "train.py"), "600", "{out}"]


def gpu_total_gib():
    if os.environ.get("GPU_TOTAL_GIB"):
        return env_f("GPU_TOTAL_GIB", 80)
    if FAKE:
        return 16.0
    with contextlib.suppress(Exception):
        r = subprocess.run(["nvidia-smi", "-i", GPU, "--query-gpu=memory.total", "--format=csv,noheader,nounits"],
                           capture_output=True, text=True, timeout=20)
        return float(r.stdout.strip().splitlines()[0]) / 1024
    return 80.0


def frameworks():
    """[(framework, None or why it is skipped)]."""
    out = []
    for fw, mod in (("torch", "torch"), ("cupy", "cupy"), ("jax", "jax")):
        if FAKE:
            out.append((fw, None if fw != "jax" else "JAX: not tried in --fake runs"))
            continue
        r = subprocess.run([PYTHON, "-c", f"import importlib.util,sys; sys.exit(0 if importlib.util.find_spec('{mod}') else 3)"],
                           capture_output=True, text=True)
        why = None if r.returncode == 0 else f"{mod} is not installed for {PYTHON}"
        if why is None and fw == "jax" and not DRY:  # installed: does it have a GPU backend?
            try:
                q = subprocess.run([PYTHON, "-c", "import jax; print(sorted({d.platform for d in jax.devices()}))"],
                                   capture_output=True, text=True, timeout=90,
                                   env=dict(os.environ, CUDA_VISIBLE_DEVICES=GPU, XLA_PYTHON_CLIENT_PREALLOCATE="false"))
                if q.returncode != 0 or not ("gpu" in q.stdout or "cuda" in q.stdout):
                    why = f"jax has no GPU backend here: {(q.stdout + q.stderr).strip()[-200:]}"
            except subprocess.TimeoutExpired:
                why = "jax: listing its devices took over 90 s"
        out.append((fw, why))
    return out


# ---------------------------------------------------------------- part a: overhead

def est_a(fw):
    up = MNIST_UP if fw != "cupy" else CUPY_UP
    return up + 2 * OVH_PAIRS * (len(OVH_BATCHES) * (OVH_S + 0.5) + 1) + 2


def cell_a(fw):
    def fn(label):
        phases = ",".join(f"{b}:{OVH_S:g}" for b in OVH_BATCHES)
        cell = Cell(label, 3 * est_a(fw) + 60)
        env = {"PHASES": phases, "XLA_PYTHON_CLIENT_PREALLOCATE": "false", "FAKE_FACTOR": 1}
        order = []
        for i in range(OVH_PAIRS):  # ABBA...: a linear drift cancels
            arms = ("stock", "gpuslice") if i % 2 == 0 else ("gpuslice", "stock")
            order += [f"{arm}{i}" for arm in arms]
        try:
            chs = {}
            for tag in order:
                vg = (f"{label}-{tag}".replace("_", "-"), "--memory", "8GiB") if tag.startswith("gpuslice") else None
                e = dict(env, FAKE_FACTOR=0.995 if vg else 1.0)
                chs[tag] = cell.start(Child(tag, mnist_cmd(fw, "phases"), vg, e), own_go=True)
            cell.wait_ready()
            for tag in order:  # one at a time: the others wait, idle, at their GO file
                chs[tag].go.touch()
                cell.wait_exit([chs[tag]], grace=len(OVH_BATCHES) * OVH_S * 3 + 30)
        finally:
            r = cell.finish()
        need_ok(r, *order)
        by_batch = {}
        for b in OVH_BATCHES:
            k = str(b)
            arms = {arm: [r[t]["phases"][k]["steps_per_s"] for t in order if t.startswith(arm)] for arm in ("stock", "gpuslice")}
            med = {arm: sorted(v)[len(v) // 2] if len(v) % 2 else sum(sorted(v)[len(v) // 2 - 1:len(v) // 2 + 1]) / 2
                   for arm, v in arms.items()}
            ratio = med["gpuslice"] / med["stock"]
            pair_ratios = [r[f"gpuslice{i}"]["phases"][k]["steps_per_s"] / r[f"stock{i}"]["phases"][k]["steps_per_s"]
                           for i in range(OVH_PAIRS)]
            spread = (max(arms["stock"]) - min(arms["stock"])) / med["stock"] if len(arms["stock"]) > 1 else None
            by_batch[k] = {"stock_steps_per_s": arms["stock"], "gpuslice_steps_per_s": arms["gpuslice"],
                           "stock_median": round(med["stock"], 3), "gpuslice_median": round(med["gpuslice"], 3),
                           "ratio": round(ratio, 4), "overhead_pct": round(100 * (1 - ratio), 2),
                           "pair_ratios": [round(x, 4) for x in pair_ratios],
                           "stock_spread": None if spread is None else round(spread, 4),
                           "median_step_ms": {t: r[t]["phases"][k]["median_step_ms"] for t in order}}
        info = {k: v for k, v in r[order[0]].items() if k in ("torch", "cupy", "jax", "model")}
        return {"framework": fw, "order": order, "batches": OVH_BATCHES, "seconds_per_phase": OVH_S,
                "by_batch": by_batch, "info": info}
    return fn


# ---------------------------------------------------------------- part b: split

def est_b(n):
    return MNIST_UP + 1 + 0.7 * n + SETTLE_S + SPLIT_S + 3


def train_child(tag, vg, batch=None, extra=None):
    e = {"BATCH": batch or GAIA_BATCH, "SECONDS": 600}
    e.update(extra or {})
    return Child(tag, mnist_cmd("torch", "train"), vg, e)


def cell_b_alone(label):
    cell = Cell(label, 3 * est_b(1) + 30)
    try:
        ch = cell.start(train_child("alone", None))
        cell.wait_ready()
        cell.sleep(SETTLE_S)
        t0 = time.monotonic()
        cell.go_all.touch()
        cell.sleep(SPLIT_S + 1.0)  # the same window as the tenants': SPLIT_S from 1 s after GO
        t1 = time.monotonic()
        cell.stop_all.touch()
        cell.wait_exit([ch])
    finally:
        r = cell.finish()
    need_ok(r, "alone")
    sps = rate(r["alone"]["step_ends"], t0 + 1, t1)
    return {"steps_per_s": round(sps, 3), "batch": GAIA_BATCH, "batch_used": r["alone"].get("batch_used"),
            "window_s": round(t1 - t0 - 1, 2), "max_reserved_bytes": r["alone"].get("max_reserved_bytes")}


def alone_ref():
    c = results["parts"].get("b", {}).get("cells", {}).get("b_alone")
    return c["steps_per_s"] if c and "steps_per_s" in c else None


def run_tenants(label, tenants, window_s, est, grab=None, extra_env=None, smi=False):
    """tenants: [(tag, vgpu flags, batch)]; all start together in the
    daemon's state dir; GO once all are ready; window; STOP. Returns (r,
    t0, t1, sampler, names)."""
    d = daemon()
    cell = Cell(label, 3 * est + 30, env=d.env)
    sampler = Sampler(d.env, d.port, smi=smi)  # nvidia-smi only where memory is the point (part c)
    names = {}
    try:
        chs = []
        for tag, flags, batch, fake_factor in tenants:
            name = f"{label}-{tag}".replace("_", "-")
            names[tag] = name
            extra = dict(extra_env or {}, FAKE_FACTOR=fake_factor)
            if grab:
                extra["GRAB_GIB"] = grab[tag]
            chs.append(cell.start(train_child(tag, (name, *flags), batch, extra)))
        sampler.start()
        cell.wait_ready()
        cell.sleep(SETTLE_S)
        cell.go_all.touch()
        t0 = time.monotonic() + 1.0  # the first second after GO: every tenant in its stride
        cell.sleep(window_s + 1.0)
        t1 = time.monotonic()
        cell.stop_all.touch()
        cell.wait_exit(chs)
    finally:
        sampler.stop()
        r = cell.finish()
    need_ok(r, *[t[0] for t in tenants])
    return r, t0, t1, sampler, names


def cell_b(n):
    def fn(label):
        share = 100 // n
        mem = max(1, int(0.9 * gpu_total_gib() / n))
        tenants = [(f"t{i}", ("--compute", str(share), "--memory", f"{mem}GiB"), GAIA_BATCH, share / 100) for i in range(n)]
        r, t0, t1, smp, names = run_tenants(label, tenants, SPLIT_S, est_b(n))
        alone = alone_ref()
        rows = []
        for tag, *_ in tenants:
            sps = rate(r[tag]["step_ends"], t0, t1)
            gsec, src = smp.gpu_seconds(names[tag], t0, t1)
            row = {"tenant": tag, "vgpu": names[tag], "share_pct": share, "steps_per_s": round(sps, 3),
                   "batch_used": r[tag].get("batch_used"), "gpu_busy": None if gsec is None else round(gsec, 4),
                   "gpu_time_source": src, "measured_ratio": smp.ratio(names[tag], t0, t1)}
            if alone:
                row["frac_of_alone"] = round(sps / alone, 4)
                row["frac_over_share"] = round(sps / alone / (share / 100), 4)
            rows.append(row)
        res = {"n": n, "share_pct": share, "memory_gib": mem, "window_s": round(t1 - t0, 2), "alone_steps_per_s": alone,
               "tenants": rows, "sum_steps_per_s": round(sum(x["steps_per_s"] for x in rows), 3)}
        if alone:
            res["sum_frac"] = round(sum(x["frac_of_alone"] for x in rows), 4)
            res["min_frac_over_share"] = min(x["frac_over_share"] for x in rows)
            res["max_frac_over_share"] = max(x["frac_over_share"] for x in rows)
        return res
    return fn


# ---------------------------------------------------------------- part c: isolation

def est_c(n):
    return MNIST_UP + 3 + 0.7 * n + SETTLE_S + ISO_S + 4


def cell_c(n):
    def fn(label):
        share = 100 // n
        total = gpu_total_gib()
        mem = max(1, int(0.9 * total / n))
        tenants, grab = [], {}
        for i in range(n):
            heavy = i % 2 == 1
            tag = f"t{i}" + ("-2x" if heavy else "")
            tenants.append((tag, ("--compute", str(share), "--memory", f"{mem}GiB"), GAIA_BATCH * (2 if heavy else 1),
                            share / 100 * (0.5 if heavy else 1)))
            grab[tag] = round(ISO_GRAB * mem, 2)
        r, t0, t1, smp, names = run_tenants(label, tenants, ISO_S, est_c(n), grab=grab, extra_env={"FAKE_CUDA": 1},
                                             smi=True)
        rows, src_used = [], None
        for tag, _, batch, _ in tenants:
            g = r[tag].get("grab", {})
            pid = r[tag].get("pid")
            gsec, src = smp.gpu_seconds(names[tag], t0, t1)
            src_used = src_used or src
            peak = smp.mem_peak(names[tag])
            smi = smp.smi_peak(pid) if pid else None
            rows.append({"tenant": tag, "vgpu": names[tag], "batch": batch, "batch_used": r[tag].get("batch_used"),
                         "limit_bytes": mem << 30, "grab_asked_bytes": int(grab[tag] * (1 << 30)),
                         "grab_got_bytes": g.get("got_bytes"), "grab_oom": g.get("oom"), "grab_error": g.get("error"),
                         "ledger_peak_bytes": peak, "smi_peak_mib": smi, "pid": pid,
                         "within_limit": None if peak is None else peak <= (mem << 30),
                         "steps_per_s": round(rate(r[tag]["step_ends"], t0, t1), 3),
                         "gpu_busy": None if gsec is None else round(gsec, 4), "share_pct": share,
                         "measured_ratio": smp.ratio(names[tag], t0, t1)})
        busy = [x["gpu_busy"] for x in rows if x["gpu_busy"] is not None]
        if len(busy) == len(rows) and sum(busy) > 0:
            for x in rows:
                x["gpu_share_of_sum_pct"] = round(100 * x["gpu_busy"] / sum(busy), 2)
        return {"n": n, "share_pct": share, "memory_gib": mem, "gpu_total_gib": round(total, 1), "window_s": round(t1 - t0, 2),
                "gpu_time_source": src_used or "none (no gpu_seconds in ls --json nor /metrics): steps/s only",
                "tenants": rows, "smi_samples": len(smp.smi), "ls_samples": len(smp.ls)}
    return fn


# ---------------------------------------------------------------- part d: elastic

def est_d():
    return MNIST_UP + 1 + SETTLE_S + 4 * EL_PHASE_S + 5


def cell_d(label):
    d = daemon()
    cell = Cell(label, 3 * est_d() + 30, env=d.env)
    sampler = Sampler(d.env, d.port)
    names = {t: f"{label}-{t}".replace("_", "-") for t in ("A", "B")}
    marks, sets = {}, []
    try:
        a = cell.start(train_child("A", (names["A"], "--compute", "30"), extra={"FAKE_FACTOR": 1}), own_go=True, own_stop=True)
        b = cell.start(train_child("B", (names["B"], "--compute", "70"), extra={"FAKE_FACTOR": 0.5}), own_go=True,
                       own_stop=True)
        sampler.start()
        cell.wait_ready()
        cell.sleep(SETTLE_S)
        marks["A_go"] = time.monotonic()
        a.go.touch()
        cell.sleep(EL_PHASE_S)
        marks["B_go"] = time.monotonic()
        b.go.touch()
        cell.sleep(EL_PHASE_S)
        marks["set"] = time.monotonic()
        for name, share in ((names["B"], "30"), (names["A"], "70")):  # the shrink first: the shares never sum over 100
            t = time.monotonic()
            code, out, err = cli(["set", name, "--compute", share], d.env)
            sets.append({"vgpu": name, "compute": int(share), "exit": code, "seconds": round(time.monotonic() - t, 3),
                         "output": (out.strip() or err.strip())[-300:]})
        marks["set_done"] = time.monotonic()
        cell.sleep(EL_PHASE_S)
        marks["B_stop"] = time.monotonic()
        b.stop.touch()
        cell.wait_exit([b])
        marks["B_gone"] = time.monotonic()
        cell.sleep(EL_PHASE_S)
        marks["end"] = time.monotonic()
        a.stop.touch()
        cell.wait_exit([a])
    finally:
        sampler.stop()
        r = cell.finish()
    need_ok(r, "A", "B")
    alone = alone_ref()
    ea, eb = r["A"]["step_ends"], r["B"]["step_ends"]
    phases = [("A alone (A 30, B idle)", marks["A_go"] + 1, marks["B_go"], 30, None),
              ("B joins (A 30, B 70)", marks["B_go"] + 1, marks["set"], 30, 70),
              ("after set (A 70, B 30)", marks["set_done"] + 1, marks["B_stop"], 70, 30),
              ("B left (A 70)", marks["B_gone"] + 1, marks["end"], 70, None)]
    ref = alone or rate(ea, *phases[0][1:3])
    rows = []
    for name, t0, t1, sa, sb in phases:
        ra, rb = rate(ea, t0, t1), (rate(eb, t0, t1) if sb else 0.0)
        ga, _ = sampler.gpu_seconds(names["A"], t0, t1)
        gb, _ = sampler.gpu_seconds(names["B"], t0, t1)
        rows.append({"phase": name, "t0": round(t0 - marks["A_go"], 2), "t1": round(t1 - marks["A_go"], 2),
                     "share_A": sa, "share_B": sb, "A_steps_per_s": round(ra, 3), "B_steps_per_s": round(rb, 3),
                     "A_frac": round(ra / ref, 4) if ref else None, "B_frac": round(rb / ref, 4) if ref else None,
                     "A_gpu_busy": ga, "B_gpu_busy": gb})
    t, tl = marks["A_go"], {"t": [], "A": [], "B": []}
    while t + EL_BIN_S <= marks["end"]:
        tl["t"].append(round(t + EL_BIN_S / 2 - marks["A_go"], 3))
        tl["A"].append(round(rate(ea, t, t + EL_BIN_S) / ref, 4) if ref else rate(ea, t, t + EL_BIN_S))
        tl["B"].append(round(rate(eb, t, t + EL_BIN_S) / ref, 4) if ref else rate(eb, t, t + EL_BIN_S))
        t += EL_BIN_S
    # the first bin after the set in which A is above the midpoint of its two phases' fractions
    effect = None
    if rows[1]["A_frac"] is not None and rows[2]["A_frac"] is not None:
        mid = (rows[1]["A_frac"] + rows[2]["A_frac"]) / 2
        for tt, fa in zip(tl["t"], tl["A"]):
            if tt - EL_BIN_S / 2 >= marks["set_done"] - marks["A_go"] and fa >= mid:
                effect = round(tt + EL_BIN_S / 2 - (marks["set_done"] - marks["A_go"]), 3)
                break
    return {"reference": "b_alone" if alone else "A alone in phase 1", "alone_steps_per_s": ref, "phases": rows,
            "timeline": tl, "bin_s": EL_BIN_S, "sets": sets,
            "marks": {k: round(v - marks["A_go"], 3) for k, v in marks.items()}, "set_effect_s": effect}


# ---------------------------------------------------------------- part g: GPreempt

def est_g(kind):
    lc = len(GP_RATES) * GP_PHASE_S
    return {"lc_alone": TORCH_UP + lc + 2, "be_alone": TORCH_UP + 2 + SETTLE_S + 2 * GP_PHASE_S + 2,
            "seq": TORCH_UP + 4 + lc + 2, "mps": TORCH_UP + 4 + lc + 6}.get(kind, TORCH_UP + 2 + lc + 3)


@contextlib.contextmanager
def mps_daemon(label):
    """A private MPS control daemon (pipe and log dirs in a temp dir); the
    GPU's compute mode is left as it is. Yields the clients' env."""
    exe = shutil.which("nvidia-cuda-mps-control")
    if FAKE or exe is None or os.environ.get("NO_MPS") == "1":
        raise Skip("MPS: " + ("not tried in --fake runs" if FAKE else "NO_MPS=1" if os.environ.get("NO_MPS") == "1"
                                               else "no nvidia-cuda-mps-control on PATH"))
    d = Path(tempfile.mkdtemp(prefix="gpuslice-papers-mps-"))
    dirs = {"CUDA_MPS_PIPE_DIRECTORY": str(d / "pipe"), "CUDA_MPS_LOG_DIRECTORY": str(d / "log")}
    for v in dirs.values():
        Path(v).mkdir()
    env = dict(os.environ, CUDA_VISIBLE_DEVICES=GPU, **dirs)
    subprocess.run([exe, "-d"], env=env, check=True, timeout=30)
    try:
        yield dict(dirs, CUDA_VISIBLE_DEVICES=None)  # the clients see the daemon's GPU as device 0
    finally:
        with contextlib.suppress(Exception):
            subprocess.run([exe], input="quit\n", text=True, env=env, timeout=30, capture_output=True)
        time.sleep(1)
        for f in (d / "log").glob("*.log"):
            with contextlib.suppress(OSError):
                shutil.copy(f, SCRATCH / "logs" / f"{label}-mps-{f.name}")
        shutil.rmtree(d, ignore_errors=True)


def g_ref(name):
    c = results["parts"].get("g", {}).get("cells", {}).get(name)
    return c if c and "error" not in c and "skipped" not in c else None


def lc_env():
    return {"LC_RATES": ",".join(f"{r:g}" for r in GP_RATES), "PHASE_S": GP_PHASE_S}


def lc_rows(lc, be_ends=None, be_alone=None, seq=False):
    rows = {}
    for k, ph in lc.get("phases", {}).items():
        row = {f: ph.get(f) for f in ("rate", "n", "p50_us", "p99_us", "arr_p50_us", "arr_p99_us", "max_us")}
        sps = ph.get("be_steps_per_s") if seq else (rate(be_ends, ph["t_start"], ph["t_end"]) if be_ends is not None else None)
        if sps is not None:
            row["be_steps_per_s"] = round(sps, 3)
            if be_alone:
                row["be_kept"] = round(sps / be_alone, 4)
        rows[k] = row
    return rows


def cell_g(kind):
    def fn(label):
        if kind == "lc_alone":
            cell = Cell(label, 3 * est_g(kind) + 30)
            try:
                lc = cell.start(Child("lc", lc_cmd("sweep"), None, lc_env()))
                cell.wait_ready()
                cell.go_all.touch()
                cell.wait_exit([lc], grace=len(GP_RATES) * GP_PHASE_S + 60)
            finally:
                r = cell.finish()
            need_ok(r, "lc")
            return {"setting": "alone", "graph_gpu_us": r["lc"].get("graph_gpu_us"), "rates": lc_rows(r["lc"])}
        if kind == "be_alone":
            cell = Cell(label, 3 * est_g(kind) + 30)
            try:
                be = cell.start(Child("be", be_cmd(), None, {"FAKE_FACTOR": 1}), gated=False)
                cell.wait_ready()
                cell.sleep(SETTLE_S + 1)
                t0 = time.monotonic()
                cell.sleep(2 * GP_PHASE_S)
                t1 = time.monotonic()
                cell.stop_all.touch()
                cell.wait_exit([be])
            finally:
                r = cell.finish()
            need_ok(r, "be")
            return {"setting": "alone", "be_steps_per_s": round(rate(r["be"]["step_ends"], t0, t1), 4),
                    "window_s": round(t1 - t0, 2)}
        be_ref = g_ref("g_be_alone")
        be_alone = be_ref and be_ref["be_steps_per_s"]
        if kind == "seq":
            cell = Cell(label, 3 * est_g(kind) + 30)
            try:
                lc = cell.start(Child("seq", lc_cmd("seq"), None, lc_env()))
                cell.wait_ready()
                cell.go_all.touch()
                cell.wait_exit([lc], grace=len(GP_RATES) * GP_PHASE_S + 90)
            finally:
                r = cell.finish()
            need_ok(r, "seq")
            return {"setting": "sequential", "be_alone_steps_per_s": be_alone, "rates": lc_rows(r["seq"], None, be_alone, seq=True)}
        with contextlib.ExitStack() as stack:
            extra = {}
            if kind == "mps":
                extra = stack.enter_context(mps_daemon(label))
            gsl = kind == "gpuslice"
            cell = Cell(label, 3 * est_g(kind) + 30)
            be_env = dict(extra, FAKE_FACTOR=0.9 if gsl else 0.85)
            lc_e = dict(lc_env(), **extra)
            if kind == "mps":
                be_env["CUDA_MPS_CLIENT_PRIORITY"], lc_e["CUDA_MPS_CLIENT_PRIORITY"] = "1", "0"
            if FAKE:
                lc_e["FAKE_LC"] = "1.05,1.15" if gsl else "1.6,3"
            try:
                be = cell.start(Child("be", be_cmd(), (f"{label}-be".replace("_", "-"), "--priority", "be") if gsl else None,
                                      be_env), gated=False)
                lc = cell.start(Child("lc", lc_cmd("sweep"), (f"{label}-lc".replace("_", "-"), "--priority", "lc") if gsl
                                      else None, lc_e))
                cell.wait_ready()
                cell.sleep(SETTLE_S)
                cell.go_all.touch()
                cell.wait_exit([lc], grace=len(GP_RATES) * GP_PHASE_S + 60)
                cell.stop_all.touch()
                cell.wait_exit([be])
            finally:
                r = cell.finish()
            need_ok(r, "be", "lc")
            res = {"setting": {"stock": "stock time-slicing", "gpuslice": "gpuslice lc/be", "mps": "MPS, client priorities"}[kind],
                   "be_alone_steps_per_s": be_alone, "rates": lc_rows(r["lc"], r["be"]["step_ends"], be_alone)}
            if kind == "mps":
                res["mps_clients_seen"] = sum(1 for ln in log_tail(SCRATCH / "logs" / f"{label}-mps-control.log", 1 << 20)
                                              .splitlines() if "new client" in ln.lower())
            return res
    return fn


# ---------------------------------------------------------------- plan and run

def plan(parts):
    """{part: [(cell, fn, estimate)]} in run order."""
    out = {}
    if "a" in parts:
        out["a"] = []
        for fw, why in frameworks():
            if DRY and why and fw != "jax":
                print(f"  (here: {why}; the plan assumes the GPU machine has it)")
                why = None
            out["a"].append((f"a_{fw}", why or cell_a(fw), est_a(fw) if why is None else 0))
    if "b" in parts:
        out["b"] = [("b_alone", cell_b_alone, est_b(1))] + [(f"b_n{n}", cell_b(n), est_b(n)) for n in SPLIT_NS]
    if "c" in parts:
        out["c"] = [(f"c_n{n}", cell_c(n), est_c(n)) for n in ISO_NS]
    if "d" in parts:
        out["d"] = [("d_elastic", cell_d, est_d())]
    if "g" in parts:
        out["g"] = [("g_lc_alone", cell_g("lc_alone"), est_g("lc_alone")), ("g_be_alone", cell_g("be_alone"), est_g("be_alone"))]
        out["g"] += [(f"g_{k}", cell_g(k), est_g(k)) for k in GP_SETTINGS if k in ("stock", "gpuslice", "seq", "mps")]
    return out


def git_head():
    try:
        return subprocess.run(["git", "-C", str(HERE), "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                              timeout=10).stdout.strip() or "?"
    except (OSError, subprocess.SubprocessError):
        return "?"


def knobs():
    return {"BENCH_BUDGET_S": BUDGET_S, "OVH_PAIRS": OVH_PAIRS, "OVH_S": OVH_S, "OVH_BATCHES": OVH_BATCHES,
            "GAIA_BATCH": GAIA_BATCH, "SPLIT_NS": SPLIT_NS, "SPLIT_S": SPLIT_S, "ISO_NS": ISO_NS, "ISO_S": ISO_S,
            "ISO_GRAB": ISO_GRAB, "ELASTIC_PHASE_S": EL_PHASE_S, "ELASTIC_BIN_S": EL_BIN_S, "GP_RATES": GP_RATES,
            "GP_PHASE_S": GP_PHASE_S, "GP_SETTINGS": GP_SETTINGS, "SAMPLE_S": SAMPLE_S, "FAKE": FAKE}


def summary(c):
    if "skipped" in c:
        return "skipped: " + c["skipped"]
    if "error" in c:
        return "error: " + c["error"][:300]
    return json.dumps({k: v for k, v in c.items() if k in ("by_batch", "steps_per_s", "sum_frac", "min_frac_over_share",
                                                              "max_frac_over_share", "gpu_time_source", "set_effect_s",
                                                              "setting")})[:400]


def pack_logs():
    if os.environ.get("PACK_LOGS") != "1":
        return
    with tarfile.open(OUT / "papers-logs.tgz", "w:gz") as tar:
        for d in ("logs", "work"):
            if (SCRATCH / d).is_dir():
                tar.add(SCRATCH / d, arcname=d)


def main():
    global FAKE, TORCH_UP, CUPY_UP, MNIST_UP, DAEMON, DRY
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--parts", default=os.environ.get("PARTS", "a,b,c,d,g"), help="comma-separated: a,b,c,d,g")
    ap.add_argument("--dry-run", action="store_true", help="print the plan (cells, estimates, budgets) and run nothing")
    ap.add_argument("--fake", action="store_true",
                    help="stand-in children (fake_child.py), the real gpuslice CLI and daemon against the fake driver")
    args = ap.parse_args()
    parts = [p.strip() for p in args.parts.split(",") if p.strip()]
    bad = [p for p in parts if p not in "abcdg" or len(p) != 1]
    if bad:
        sys.exit(f"run_papers: unknown part(s) {bad}; parts: a,b,c,d,g")
    FAKE, DRY = args.fake, args.dry_run
    if FAKE:
        TORCH_UP, CUPY_UP, MNIST_UP = 1.0, 1.0, 1.0
        fd = REPO / "build" / "fake_driver"
        os.environ.update(GPUSLICE_REAL_DRIVER=str(fd / "libcuda.so.1"), GPUSLICE_REAL_NVML=str(fd / "libnvidia-ml.so.1"),
                          LD_LIBRARY_PATH=f"{fd}:{os.environ.get('LD_LIBRARY_PATH', '')}".rstrip(":"))
        if not os.environ.get("GPUSLICE_CMD") and not Path(GPUSLICE).exists():
            sys.exit(f"run_papers --fake: needs the gpuslice binary ({GPUSLICE}) and build/fake_driver")
    chosen = plan(parts)
    est = {p: sum(e for _, _, e in cells) for p, cells in chosen.items()}
    total = sum(est.values())
    print(f"parts {','.join(chosen)}: estimated {total:.0f} s, budget {BUDGET_S:.0f} s" + (" [FAKE]" if FAKE else ""), flush=True)
    if args.dry_run:
        for p, cells in chosen.items():
            share = BUDGET_S * est[p] / total if total else 0
            print(f"  part {p}: ~{est[p]:.0f} s, budget ~{share:.0f} s (its share of BENCH_BUDGET_S; time a part leaves "
                  f"goes to the next)")
            for name, fn, e in cells:
                print(f"    {name:14s} ~{e:4.0f} s" + ("" if callable(fn) else f"  (skipped: {fn})"))
        if total > BUDGET_S:
            print(f"  over the budget by {total - BUDGET_S:.0f} s: the last cells of each part would be skipped; "
                  f"split with --parts (e.g. a,b,d then c,g)")
        return 0
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    atexit.register(kill_all)
    try:
        smi = subprocess.run(["nvidia-smi", "-i", GPU, "--query-gpu=name,driver_version,memory.total",
                              "--format=csv,noheader"], capture_output=True, text=True, timeout=30).stdout.strip()
    except (OSError, subprocess.SubprocessError) as e:
        smi = f"nvidia-smi: {e}"
    results["meta"] = {"gpu": smi, "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"), "host": platform.node(),
                       "git": git_head(), "parts": list(chosen), "knobs": knobs(), "estimate_s": round(total),
                       "estimate_by_part_s": {p: round(v) for p, v in est.items()}, "gpuslice": GPUSLICE,
                       "python": PYTHON, "fake": FAKE}
    save()
    own_state = "GPUSLICE_STATE_DIR" not in os.environ
    if own_state:
        os.environ["GPUSLICE_STATE_DIR"] = tempfile.mkdtemp(prefix="gpuslice-papers-state-")
    try:
        remaining = dict(est)
        for p, cells in chosen.items():
            rest = sum(remaining.values())
            budget = max(0.0, left()) * (est[p] / rest if rest else 1)
            p_start = time.monotonic()
            part = results["parts"].setdefault(p, {"cells": {}})
            part["budget_s"] = round(budget)
            print(f"part {p}: budget {budget:.0f} s (estimate {est[p]:.0f} s, {left():.0f} s left in all)", flush=True)
            for name, fn, e in cells:
                if not callable(fn):
                    part["cells"][name] = {"skipped": fn}
                    print(f"{name}: skipped ({fn})", flush=True)
                    save()
                    continue
                p_left = budget - (time.monotonic() - p_start)
                if e > 1.15 * p_left or e > left():  # 15%: the estimates are pessimistic
                    part["cells"][name] = {"skipped": "budget", "estimate_s": round(e), "part_left_s": round(p_left),
                                           "left_s": round(left())}
                    print(f"{name}: skipped (budget: part has {p_left:.0f} s, needs ~{e:.0f})", flush=True)
                    save()
                    continue
                t0 = time.monotonic()
                try:
                    part["cells"][name] = fn(name)
                except Skip as ex:
                    part["cells"][name] = {"skipped": str(ex)}
                except Exception as ex:  # noqa: BLE001 - record and go on
                    part["cells"][name] = {"error": f"{type(ex).__name__}: {ex}"}
                part["cells"][name]["seconds"] = round(time.monotonic() - t0, 1)
                part["cells"][name]["estimate_s"] = round(e)
                save()
                print(f"{name}: {summary(part['cells'][name])}  [{part['cells'][name]['seconds']} s, est {e:.0f}]", flush=True)
            part["seconds"] = round(time.monotonic() - p_start, 1)
            remaining.pop(p)
            if p == "d" or (p in "bc" and not any(q in remaining for q in "bcd")):
                if DAEMON is not None:
                    DAEMON.stop()
                    DAEMON = None
            save()
    finally:
        if DAEMON is not None:
            DAEMON.stop()  # gracefully (SIGTERM) before anything left is killed
        kill_all()
        if own_state:
            shutil.rmtree(os.environ["GPUSLICE_STATE_DIR"], ignore_errors=True)
        save()
        pack_logs()
    print()
    print((OUT / "papers.md").read_text())
    return 0


if __name__ == "__main__":
    sys.exit(main())
