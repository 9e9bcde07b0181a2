"""Shared plumbing for the GPU checks in bench/gpu/foundation/.

Every check is one script with two roles. The parent runs outside gpuslice: it
starts children (most of them under `gpuslice run`), meets them through files in
a sync directory, reads the GPU's real usage with nvidia-smi while they hold
their memory, and prints one JSON result. A child does the CUDA work, posts what
it measured in a "ready" file and holds its memory until the parent posts "done".

Standard library only: torch and cupy are imported by the children alone.
"""

import json
import os
import shlex
import signal
import subprocess
import sys
import time
import traceback
from pathlib import Path

MiB = 1 << 20
GiB = 1 << 30
REPO = Path(__file__).resolve().parents[2]
GPU_INDEX = os.environ.get("BENCH_GPU", "0")

# Bounds every wait, so that a lost child or parent never hangs the suite.
WAIT_S = 180.0
POLL_S = 0.02


# --- results ----------------------------------------------------------------


def emit(check, ok, **fields):
    """Prints the check's result; run_all.sh collects it from BENCH_RESULT_FILE."""
    record = {"check": os.environ.get("BENCH_CHECK_ID", check), "ok": bool(ok)}
    record.update(fields)
    text = json.dumps(record, sort_keys=False, default=str)
    path = os.environ.get("BENCH_RESULT_FILE")
    if path:
        write_atomic(Path(path), text)
    print(text, flush=True)
    return record


def run_check(check, body):
    """Runs body() -> (ok, fields) and emits it; an exception is a failed check."""
    # SIGTERM (run_all's timeout) must unwind, so that `finally` kills children.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    try:
        ok, fields = body()
    except Exception as e:  # noqa: BLE001 - a check reports, never crashes the suite
        emit(check, False, error=f"{type(e).__name__}: {e}", traceback=traceback.format_exc())
        return 1
    emit(check, ok, **fields)
    return 0


def write_atomic(path, text):
    tmp = path.with_name(path.name + ".tmp")
    tmp.parent.mkdir(parents=True, exist_ok=True)
    tmp.write_text(text)
    os.replace(tmp, path)


def median(values):
    s = sorted(values)
    n = len(s)
    return None if n == 0 else (s[n // 2] if n % 2 else (s[n // 2 - 1] + s[n // 2]) / 2)


# --- commands ---------------------------------------------------------------


def gpuslice_bin():
    return os.environ.get("GPUSLICE_BIN") or str(REPO / "build/bin/gpuslice")


def under_gpuslice(cmd, memory="4GiB", name=None, inject="preload", flags=()):
    """The command line that runs cmd inside a vGPU (more `run` flags in flags).
    GPUSLICE_CMD (with_bundle.sh: the loader prefix that finds the bundle's
    libraries) comes first; a bare GPUSLICE_BIN from a bundle exits 127."""
    prefix = shlex.split(os.environ["GPUSLICE_CMD"]) if os.environ.get("GPUSLICE_CMD") else [gpuslice_bin()]
    args = [*prefix, "run", "--memory", memory, *flags]
    if "BENCH_GPU" in os.environ:  # else every GPU, as a plain `gpuslice run` has
        args += ["--gpu", GPU_INDEX]
    if name:
        args += ["--name", name]
    if inject:
        args += ["--inject", inject]
    return args + ["--"] + list(cmd)


def child_cmd(script, sync_dir, tag, *extra):
    return [sys.executable, str(Path(script).resolve()), "--child", "--sync", str(sync_dir),
            "--tag", tag, *map(str, extra)]


def work_dir(name):
    """A fresh directory under the suite's scratch space."""
    base = Path(os.environ.get("BENCH_WORK") or "/tmp/gpuslice-bench")
    path = base / f"{name}-{os.getpid()}-{time.monotonic_ns()}"
    path.mkdir(parents=True)
    return path


# --- file handshake ---------------------------------------------------------


class ChildGone(RuntimeError):
    pass


class Sync:
    """Named events as files in one directory; a payload travels as JSON."""

    def __init__(self, path):
        self.path = Path(path)
        self.path.mkdir(parents=True, exist_ok=True)

    def post(self, name, payload=None):
        write_atomic(self.path / name, json.dumps(payload if payload is not None else {}))

    def wait(self, name, timeout=WAIT_S, procs=(), parent_pid=None):
        """Polls for the file. Fails when a watched child exits first, or, in a
        child, when its parent is gone (parent_pid no longer our parent)."""
        deadline = time.monotonic() + timeout
        target = self.path / name
        while True:
            if target.exists():
                return json.loads(target.read_text())
            for p in procs:
                if p.poll() is not None:
                    raise ChildGone(f"child {p.pid} exited with {p.returncode} before '{name}'")
            if parent_pid is not None and os.getppid() != parent_pid:
                raise ChildGone(f"parent exited before '{name}'")
            if time.monotonic() > deadline:
                raise TimeoutError(f"no '{name}' after {timeout:.0f}s")
            time.sleep(POLL_S)


# --- child side -------------------------------------------------------------


def child_args(argv=None):
    """Parses the common child flags: --child --sync DIR --tag T, rest as list."""
    import argparse

    ap = argparse.ArgumentParser()
    ap.add_argument("--child", action="store_true")
    ap.add_argument("--sync")
    ap.add_argument("--tag", default="c")
    args, rest = ap.parse_known_args(argv)
    return args, rest


def check_main(check, work, parent, barrier=False):
    """The entry point of a check script that runs `work` in children under
    `gpuslice run`: as a child, serves `work`; as the parent, parses
    --inject and runs parent(inject) as check CHECK."""
    import argparse

    args, rest = child_args()
    if args.child:
        return serve_child(args.sync, args.tag, work, barrier=barrier)
    ap = argparse.ArgumentParser()
    ap.add_argument("--inject", default="preload", choices=["preload", "libpath"])
    opts = ap.parse_args(rest)
    return run_check(check, lambda: parent(opts.inject))


def serve_child(sync_dir, tag, work, barrier=False):
    """Runs work(held, go) in a child and holds what it allocated.

    work appends every object it must keep alive to `held` and returns a dict.
    go() marks the point where a parent coordinating several children starts
    them together (after CUDA is initialised, before the measured work); with
    barrier=False it does nothing. The child posts "ready-TAG" with the dict
    (or the error), waits for "done" and exits 0 either way: the parent judges.
    """
    sync = Sync(sync_dir)
    parent = os.getppid()
    held = []

    def go():
        if barrier:
            sync.post(f"inited-{tag}", {"pid": os.getpid()})
            sync.wait("go", parent_pid=parent)

    try:
        payload = work(held, go)
    except Exception as e:  # noqa: BLE001 - reported to the parent
        payload = {"error": f"{type(e).__name__}: {e}", "traceback": traceback.format_exc()}
        if barrier:  # the parent may still be waiting for this one
            sync.post(f"inited-{tag}", {"pid": os.getpid()})
    payload["pid"] = os.getpid()
    payload["gpuslice_mapped"] = mapped_gpuslice()
    sync.post(f"ready-{tag}", payload)
    try:
        sync.wait("done", parent_pid=parent)
    except (ChildGone, TimeoutError) as e:
        print(f"child {tag}: {e}", file=sys.stderr)
    return 0


def mapped_gpuslice():
    """Which gpuslice and libcuda files this process has mapped (proves injection)."""
    seen = set()
    try:
        with open("/proc/self/maps") as f:
            for line in f:
                parts = line.split(maxsplit=5)
                path = parts[5].strip() if len(parts) == 6 else ""
                if "gpuslice" in path or "libcuda.so" in path:
                    seen.add(path)
    except OSError:
        pass
    return sorted(seen)


# --- parent side ------------------------------------------------------------


def spawn(cmd, env=None):
    """Starts a child in its own process group, so that it can be ended whole."""
    full_env = dict(os.environ)
    full_env.update(env or {})
    print("+ " + " ".join("<inline script>" if "\n" in a else a for a in cmd), flush=True)
    return subprocess.Popen(cmd, env=full_env, start_new_session=True)


def stop(procs, grace=20.0):
    """Waits for children to exit, then kills the process groups we started."""
    deadline = time.monotonic() + grace
    codes = []
    for p in procs:
        try:
            codes.append(p.wait(timeout=max(0.1, deadline - time.monotonic())))
        except subprocess.TimeoutExpired:
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            codes.append(p.wait())
    return codes


def run_children(children, sync, barrier=False, while_holding=None, timeout=WAIT_S):
    """Starts children [(tag, cmd, env)], optionally releases them together,
    waits until each is ready, measures real GPU usage while they hold their
    memory, calls while_holding(), then releases and reaps them.

    Returns dict(payloads={tag: payload}, real=..., holding=..., exit_codes=...).
    """
    baseline = device_used_mib()
    baseline_pids = set(compute_apps())
    procs = []
    try:
        for _, cmd, env in children:
            procs.append(spawn(cmd, env))
        if barrier:
            for tag, _, _ in children:
                sync.wait(f"inited-{tag}", timeout, procs)
            sync.post("go")
        payloads = {tag: sync.wait(f"ready-{tag}", timeout, procs) for tag, _, _ in children}
        pids = [p.get("pid") for p in payloads.values()]
        real = real_usage(pids, baseline, baseline_pids)
        holding = while_holding(payloads) if while_holding else None
        sync.post("done")
        codes = stop(procs)
    finally:
        sync.post("done")
        stop(procs, grace=5.0)
    after = device_used_mib()
    return {"payloads": payloads, "real": real, "holding": holding, "exit_codes": codes,
            "device_used_mib_before": baseline, "device_used_mib_after": after}


# --- nvidia-smi -------------------------------------------------------------


def smi(*args, env=None, cmd_prefix=()):
    """Runs nvidia-smi with a CSV query; returns rows of stripped fields."""
    cmd = list(cmd_prefix) + ["nvidia-smi", *args, "--format=csv,noheader,nounits"]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=60, env=env,
                         check=True).stdout
    return [[f.strip() for f in line.split(",")] for line in out.splitlines() if line.strip()]


def device_used_mib():
    return int(smi("-i", GPU_INDEX, "--query-gpu=memory.used")[0][0])


def compute_apps():
    """{pid: used MiB or None} for the processes on the GPU, as the driver sees them."""
    apps = {}
    for row in smi("-i", GPU_INDEX, "--query-compute-apps=pid,used_memory"):
        try:
            pid = int(row[0])
        except ValueError:
            continue
        try:
            apps[pid] = int(row[1])
        except (ValueError, IndexError):
            apps[pid] = None  # "[N/A]" where the driver hides per-process usage
    return apps


def real_usage(pids, baseline_used_mib, baseline_pids=()):
    """Real device memory of the given processes, in MiB.

    Per-process figures (nvidia-smi --query-compute-apps) are preferred. Inside
    some containers nvidia-smi reports host PIDs or no figures; then the growth of
    the device's memory.used since the baseline, taken before the children
    started, stands in for their sum.
    """
    apps = compute_apps()
    by_pid = {pid: apps.get(pid) for pid in pids}
    new = {pid: mib for pid, mib in apps.items() if pid not in baseline_pids}
    delta = device_used_mib() - baseline_used_mib
    if pids and all(v is not None for v in by_pid.values()):
        total, method = sum(by_pid.values()), "compute_apps_by_pid"
    elif new and all(v is not None for v in new.values()):
        total, method = sum(new.values()), "compute_apps_new_processes"
    else:
        total, method = delta, "device_memory_used_delta"
    return {"total_mib": total, "method": method, "by_pid_mib": by_pid,
            "new_processes_mib": new, "device_delta_mib": delta}


# --- CUDA context size ------------------------------------------------------

_CONTEXT_CHILD = r"""
import sys
sys.path.insert(0, %r)
import common
def work(held, go):
    import torch
    torch.cuda.init()
    held.append(torch.zeros(1, device="cuda"))
    torch.cuda.synchronize()
    return {"torch_reserved": torch.cuda.memory_reserved()}
common.serve_child(sys.argv[1], "ctx", work)
"""


def context_mib():
    """Real usage of a bare PyTorch process (context plus its first block),
    measured outside gpuslice once per suite and cached under BENCH_WORK."""
    cache = Path(os.environ.get("BENCH_WORK") or "/tmp") / "context-cache.json"
    if cache.exists():
        return json.loads(cache.read_text())
    sync = Sync(work_dir("context"))
    cmd = [sys.executable, "-c", _CONTEXT_CHILD % str(Path(__file__).parent), str(sync.path)]
    res = run_children([("ctx", cmd, None)], sync)
    payload = res["payloads"]["ctx"]
    if "error" in payload:
        raise RuntimeError(f"context child failed: {payload['error']}")
    real = res["real"]["total_mib"]
    reserved_mib = payload["torch_reserved"] / MiB
    info = {"context_mib": real - reserved_mib, "process_real_mib": real,
            "torch_reserved_mib": reserved_mib, "method": res["real"]["method"]}
    write_atomic(cache, json.dumps(info))
    return info


# --- allocate until failure (child side) ------------------------------------


def fill(held, alloc, expected_type, cap_bytes, chunks):
    """Calls alloc(size) for each chunk size in turn until it raises (the small
    chunks fill what the large ones left), stopping at cap_bytes in case no
    limit is enforced. Returns what was allocated and how it failed."""
    allocated, phases = 0, []
    for size in chunks:
        count, failure = 0, None
        while allocated + size <= cap_bytes:
            try:
                held.append(alloc(size))
            except Exception as e:  # noqa: BLE001 - the failure is the measurement
                failure = describe_failure(e, expected_type)
                break
            count += 1
            allocated += size
        phases.append({"chunk_bytes": size, "count": count, "failure": failure})
        if failure is None:
            break  # the cap, not the limit, stopped us
    return {"allocated_bytes": allocated, "phases": phases,
            "first_failure": phases[0]["failure"], "cap_reached": phases[-1]["failure"] is None}


def fill_torch(held, go, cap_bytes, chunks=(64 * MiB, 1 * MiB)):
    """fill() with PyTorch's caching allocator (1 MiB tensors come from its
    small pool, carved from 2 MiB segments)."""
    import torch

    free0, total0 = torch.cuda.mem_get_info()  # creates the context
    go()
    result = fill(held, lambda n: torch.empty(n, dtype=torch.uint8, device="cuda"),
                  torch.cuda.OutOfMemoryError, cap_bytes, chunks)
    torch.cuda.synchronize()
    free1, total1 = torch.cuda.mem_get_info()
    result.update(torch_memory_allocated=torch.cuda.memory_allocated(),
                  torch_memory_reserved=torch.cuda.memory_reserved(),
                  mem_get_info_before=[free0, total0], mem_get_info_at_failure=[free1, total1],
                  alloc_conf=os.environ.get("PYTORCH_CUDA_ALLOC_CONF", ""))
    return result


def describe_failure(exc, expected_type):
    return {"type": f"{type(exc).__module__}.{type(exc).__qualname__}",
            "expected_type": isinstance(exc, expected_type),
            "message": str(exc).strip().splitlines()[0][:300] if str(exc).strip() else ""}
