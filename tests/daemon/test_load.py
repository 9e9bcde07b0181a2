"""Many processes joining vGPUs at once through one daemon: every one is
registered exactly once, the accounting is exact, and everything is
collected when they leave. (The 500-process timing is bench/daemon/.)"""
import os
import signal
import subprocess
import time

from conftest import CUDA_APP, GPUSLICE, MiB, poll

PROCESSES, VGPUS = 100, 10


def test_a_burst_of_runs_is_registered_exactly_once(dworld):
    d = dworld.daemon(["--log-level", "warn"])
    runs = []
    try:
        for i in range(PROCESSES):
            runs.append(subprocess.Popen(
                [GPUSLICE, "run", "--name", f"load-{i % VGPUS}", "--memory", "256MiB", "--", CUDA_APP,
                 "--lookup=procaddress", "init", "alloc", "1M", "ready", dworld.path(f"ready-{i}"), "hold"],
                env=dworld.env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE))

        def all_registered():
            for r in runs:
                assert r.poll() is None, r.stderr.read().decode()
            listing = dworld.ls()
            return sum(len(v["processes"]) for v in listing.values()) == PROCESSES and listing

        started = time.monotonic()
        listing = poll(all_registered, 120, f"{PROCESSES} processes registered")
        print(f"{PROCESSES} processes registered in {time.monotonic() - started:.2f} s")
        app_pids = sorted(int(dworld.wait_for_file(dworld.path(f"ready-{i}"))) for i in range(PROCESSES))
        pids = sorted(p["pid"] for v in listing.values() for p in v["processes"])
        assert pids == app_pids  # none lost, none twice
        assert len(listing) == VGPUS
        for v in listing.values():
            assert len(v["processes"]) == PROCESSES // VGPUS
            assert v["devices"][0]["memory_used_bytes"] == len(v["processes"]) * MiB
    finally:
        for r in runs:
            if r.poll() is None:
                r.send_signal(signal.SIGTERM)  # forwarded to the application
        codes = [r.wait(timeout=60) for r in runs]
    assert [c for c in codes if c != 128 + signal.SIGTERM] == []
    poll(lambda: not os.listdir(os.path.join(dworld.state, "vgpus")), 30, "every vGPU collected")
    assert d.proc.poll() is None
