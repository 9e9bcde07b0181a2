#!/usr/bin/env python3
"""Load benchmark: N processes join vGPUs at once on one daemon.

Starts `gpuslice daemon` on a fresh state directory (fake driver), then
launches N `gpuslice run --name vgpu-K -- cuda_app init alloc 1M ready F hold`
at the same instant, spread over V vGPUs (the applications then block in
pause(), so they cost nothing while the others start). Measures how long until every application
is registered (holds its ledger slot with its 1 MiB charged), then checks
the accounting through the daemon (`gpuslice ls --json`): exactly the N
application pids, each once, and each vGPU's usage equal to its process
count in MiB. Then stops them all (SIGTERM to each run, which forwards it)
and checks that every vGPU is collected.

    bench/daemon/load_bench.py [--build build] [--processes 500] [--vgpus 20] [--deadline 5]
                               [--mode runs|apps]

--mode runs (default): each process is its own `gpuslice run`, which asks the
daemon to create or join its vGPU (N clients of the control API at once).
--mode apps: one `gpuslice run` per vGPU starts its share of the N
applications itself (as a container's processes do): the daemon handles V
joins, and the N processes register in the ledgers on their own.

Exit status 0 when all were registered within the deadline with exact
accounting; prints one summary line (and --json writes the figures).
"""
import argparse
import json
import mmap
import os
import resource
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time

MiB = 1 << 20
# struct Ledger / ProcessSlot offsets (src/core/vgpu_layout.h), as the
# integration tests read them.
LEDGER_HIGH_WATER, LEDGER_SLOTS, SLOT_SIZE, SLOT_USED = 16, 256, 576, 24  # vgpu_layout.h v2: slots at 256


def parse_ledger(data):
    """(live slots, device-0 bytes) of one ledger's bytes, read as a reaper would."""
    high_water = struct.unpack_from("<I", data, LEDGER_HIGH_WATER)[0]
    live, used = 0, 0
    for i in range(high_water):
        base = LEDGER_SLOTS + i * SLOT_SIZE
        owner = struct.unpack_from("<Q", data, base)[0]
        if owner not in (0, 0xFFFFFFFFFFFFFFFF):
            live += 1
            used += struct.unpack_from("<Q", data, base + SLOT_USED)[0]
    return live, used


_handed_out = {}  # vGPU dir -> mmap of its sealed ledger


def ledger_bytes(vgpu_dir):
    """The vGPU's ledger: its file (standalone), or the sealed memory its
    state.sock hands out (daemon-made vGPUs, src/core/state_handout.h: the
    first descriptor is the ledger). Raises OSError while it does not exist."""
    path = os.path.join(vgpu_dir, "ledger")
    if os.path.exists(path):
        with open(path, "rb") as f:
            return f.read()
    if vgpu_dir not in _handed_out:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(2)
            s.connect(os.path.join(vgpu_dir, "state.sock"))
            _, fds, _, _ = socket.recv_fds(s, 4096, 16)
        if not fds:
            raise OSError("no descriptors handed out")
        _handed_out[vgpu_dir] = mmap.mmap(fds[0], 0, mmap.MAP_SHARED, mmap.PROT_READ)
        for fd in fds:
            os.close(fd)
    return _handed_out[vgpu_dir][:]


def registered(state, vgpus):
    total_live = total_used = 0
    for k in range(vgpus):
        try:
            live, used = parse_ledger(ledger_bytes(os.path.join(state, "vgpus", f"vgpu-{k}")))
        except OSError:
            continue
        total_live += live
        total_used += used
    return total_live, total_used


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.environ.get("GPUSLICE_BUILD_DIR", "build"))
    ap.add_argument("--processes", type=int, default=500)
    ap.add_argument("--vgpus", type=int, default=20)
    ap.add_argument("--deadline", type=float, default=5.0)
    ap.add_argument("--mode", choices=["runs", "apps"], default="runs")
    ap.add_argument("--json", help="write the figures here")
    args = ap.parse_args()

    build = os.path.abspath(args.build)
    gpuslice = os.path.join(build, "bin", "gpuslice")
    cuda_app = os.path.join(build, "bin", "cuda_app")
    fake = os.path.join(build, "fake_driver")
    work = tempfile.mkdtemp(prefix="gsl-", dir="/tmp")
    state = os.path.join(work, "state")
    env = dict(os.environ)
    for key in ("LD_PRELOAD", "CUDA_VISIBLE_DEVICES", "GPUSLICE_VGPU_DIR", "GPUSLICE_SOCKET"):
        env.pop(key, None)
    env.update({"GPUSLICE_STATE_DIR": state, "GPUSLICE_REAL_DRIVER": os.path.join(fake, "libcuda.so.1"),
                "GPUSLICE_REAL_NVML": os.path.join(fake, "libnvidia-ml.so.1"), "LD_LIBRARY_PATH": fake,
                "FAKE_GPU_MEMORY": str(64 << 30)})
    daemon_log = open(os.path.join(work, "daemon.log"), "w")
    daemon = subprocess.Popen([gpuslice, "daemon", "--no-metrics", "--log-level", "warn"], env=env,
                              stdout=daemon_log, stderr=daemon_log)
    runs = []
    ok = False
    figures = {}
    try:
        socket_path = os.path.join(state, "gpuslice.sock")
        deadline = time.monotonic() + 15
        while subprocess.run([gpuslice, "ls"], env=env, capture_output=True).returncode != 0 or \
                not os.path.exists(socket_path):
            if time.monotonic() > deadline or daemon.poll() is not None:
                sys.exit("daemon did not start:\n" + open(os.path.join(work, "daemon.log")).read())
            time.sleep(0.05)
        n, v = args.processes, args.vgpus
        start = time.monotonic()
        app = [cuda_app, "--lookup=procaddress", "init", "alloc", "1M", "ready"]
        if args.mode == "runs":
            for i in range(n):
                runs.append(subprocess.Popen(
                    [gpuslice, "run", "--name", f"vgpu-{i % v}", "--memory", f"{n}MiB", "--", *app,
                     os.path.join(work, f"ready-{i}"), "hold"],
                    env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE))
        else:
            # Each run's command starts its applications at once and waits;
            # SIGTERM (forwarded by the run) reaches them through the shell's trap.
            for k in range(v):
                mine = [i for i in range(n) if i % v == k]
                script = "trap 'kill $(jobs -p); wait; exit 143' TERM; " + " ".join(
                    f"{' '.join(app)} {os.path.join(work, f'ready-{i}')} hold >/dev/null &" for i in mine) + " wait"
                runs.append(subprocess.Popen(
                    [gpuslice, "run", "--name", f"vgpu-{k}", "--memory", f"{n}MiB", "--", "/bin/bash", "-c", script],
                    env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE))
        spawned = time.monotonic() - start
        all_registered = None
        while time.monotonic() - start < max(60.0, args.deadline * 4):
            live, used = registered(state, v)
            if live == n and used == n * MiB:
                all_registered = time.monotonic() - start
                break
            failed = [r for r in runs if r.poll() is not None]
            if failed:
                sys.exit(f"{len(failed)} runs exited early; first: {failed[0].stderr.read().decode()}")
            time.sleep(0.005)
        live, used = registered(state, v)
        figures.update({"mode": args.mode, "processes": n, "vgpus": v, "spawn_seconds": round(spawned, 3),
                        "all_registered_seconds": round(all_registered, 3) if all_registered else None})
        # The daemon's own account: every application pid exactly once.
        listing = json.loads(subprocess.run([gpuslice, "ls", "--json"], env=env, capture_output=True,
                                            text=True, check=True).stdout)["vgpus"]
        pids = [p["pid"] for vg in listing for p in vg["processes"]]
        app_pids = []
        for i in range(n):
            with open(os.path.join(work, f"ready-{i}")) as f:
                app_pids.append(int(f.read()))
        exact = sorted(pids) == sorted(app_pids) and len(set(pids)) == n and len(listing) == v and all(
            vg["devices"][0]["memory_used_bytes"] == len(vg["processes"]) * MiB for vg in listing)
        figures["accounting_exact"] = exact
        figures["daemon_rss_kib"] = int(open(f"/proc/{daemon.pid}/status").read().split("VmRSS:")[1].split()[0])
        stat = open(f"/proc/{daemon.pid}/stat").read().rsplit(")", 1)[1].split()
        figures["daemon_cpu_seconds"] = round((int(stat[11]) + int(stat[12])) / os.sysconf("SC_CLK_TCK"), 2)
        # Release them all (`gpuslice run` forwards SIGTERM to its command);
        # every ephemeral vGPU must be collected.
        release = time.monotonic()
        for r in runs:
            r.send_signal(signal.SIGTERM)
        codes = [r.wait(timeout=120) for r in runs]
        deadline = time.monotonic() + 30
        while os.listdir(os.path.join(state, "vgpus")) and time.monotonic() < deadline:
            time.sleep(0.02)
        figures["all_exited_and_collected_seconds"] = round(time.monotonic() - release, 3)
        figures["left_over_vgpus"] = len(os.listdir(os.path.join(state, "vgpus")))
        figures["unexpected_exits"] = sum(1 for c in codes if c != 128 + signal.SIGTERM)
        # CPU of every run and application (waited for, so counted here).
        usage = resource.getrusage(resource.RUSAGE_CHILDREN)
        figures["clients_cpu_seconds"] = round(usage.ru_utime + usage.ru_stime, 2)
        figures["cpus"] = os.cpu_count()
        figures["load_average_1m_at_end"] = os.getloadavg()[0]
        ok = (all_registered is not None and all_registered <= args.deadline and exact and
              figures["left_over_vgpus"] == 0 and figures["unexpected_exits"] == 0)
    finally:
        # Every run and application names the work directory in its argv;
        # an application outlives a killed run, so kill them by it.
        subprocess.run(["pkill", "-9", "-f", work], check=False)
        daemon.send_signal(signal.SIGTERM)
        daemon.wait(timeout=30)
        daemon_log.close()
        shutil.rmtree(work, ignore_errors=True)
    print(("PASS" if ok else "FAIL") + ": " + ", ".join(f"{k}={val}" for k, val in figures.items()))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(figures, f, indent=2)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
