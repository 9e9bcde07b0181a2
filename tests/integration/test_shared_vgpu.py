"""Several processes in one vGPU: one account, and kill -9 costs nothing."""
import os
import signal
import struct
import time

from conftest import CUDA_APP, MiB, lines, value


def test_two_runs_with_one_name_share_one_account(world):
    first_ready, second_done = world.path("first-ready"), world.path("second-done")
    first = world.start("run", "--name", "shared", "--memory", "64MiB", "--", *app_args(
        ["init", "alloc", "40M", "ready", first_ready, "await", second_done, "meminfo"]))
    world.wait_for_file(first_ready)
    second = world.app(["--name", "shared"], ["init", "fill", "1M", "meminfo"])
    open(second_done, "w").close()
    out, err = first.communicate(timeout=30)
    assert first.returncode == 0, err
    assert value(second, "fill") == 24 * MiB
    assert lines(second, "meminfo")[-1][1:] == ["0", str(64 * MiB)]


def test_memory_of_a_killed_process_is_reclaimed(world):
    victim_ready = world.path("victim-ready")
    victim = world.start("run", "--name", "k9", "--memory", "64MiB", "--", *app_args(
        ["init", "alloc", "40M", "ready", victim_ready, "hold"]))
    pid = int(world.wait_for_file(victim_ready))
    survivor_ready, killed = world.path("survivor-ready"), world.path("killed")
    survivor = world.start("run", "--name", "k9", "--", *app_args(
        ["init", "alloc", "8M", "ready", survivor_ready, "await", killed, "alloc", "56M", "meminfo"]))
    world.wait_for_file(survivor_ready)
    os.kill(pid, signal.SIGKILL)
    victim.communicate(timeout=30)
    assert victim.returncode == 128 + signal.SIGKILL
    open(killed, "w").close()
    out, err = survivor.communicate(timeout=30)
    assert survivor.returncode == 0, err
    # 56 MiB fits only with the dead process's 40 MiB back, and it came back at
    # once: no lock to wait on, no timeout.
    assert [l.split()[1] for l in out.splitlines() if l.startswith("alloc")] == ["ok", "ok"]


def test_a_killed_process_is_reaped_within_a_second_without_any_allocation(world):
    victim_ready, observer_ready, go = world.path("v"), world.path("o"), world.path("go")
    victim = world.start("run", "--name", "reap", "--memory", "64MiB", "--", *app_args(
        ["init", "alloc", "60M", "ready", victim_ready, "hold"]))
    pid = int(world.wait_for_file(victim_ready))
    # The observer's supervisor (gpuslice run) reaps the shared ledger.
    observer = world.start("run", "--name", "reap", "--", *app_args(["init", "ready", observer_ready, "await", go]))
    world.wait_for_file(observer_ready)
    os.kill(pid, signal.SIGKILL)
    victim.communicate(timeout=30)
    deadline = time.monotonic() + 1.0
    used = None
    while time.monotonic() < deadline:
        used = ledger_used(world, "reap")
        if used == 0:
            break
        time.sleep(0.02)
    open(go, "w").close()
    observer.communicate(timeout=30)
    assert used == 0


def test_the_vgpu_is_removed_when_its_last_member_leaves(world):
    r = world.app(["--name", "gone", "--memory", "64MiB"], ["init", "alloc", "1M"])
    assert r.returncode == 0, r.stderr
    assert not os.path.exists(os.path.join(world.env["GPUSLICE_STATE_DIR"], "vgpus", "gone"))


def app_args(commands):
    return [CUDA_APP, "--lookup=procaddress", *commands]


# Offsets from src/core/vgpu_layout.h (struct Ledger / ProcessSlot; layout 2,
# where the slots follow the LC latency histogram).
LEDGER_HIGH_WATER, LEDGER_SLOTS, SLOT_SIZE, SLOT_USED = 16, 256, 576, 24


def ledger_used(world, name):
    """Device-0 usage summed over the vGPU's ledger slots, read as a reaper would."""
    path = os.path.join(world.env["GPUSLICE_STATE_DIR"], "vgpus", name, "ledger")
    with open(path, "rb") as f:
        data = f.read()
    high_water = struct.unpack_from("<I", data, LEDGER_HIGH_WATER)[0]
    return sum(struct.unpack_from("<Q", data, LEDGER_SLOTS + i * SLOT_SIZE + SLOT_USED)[0]
               for i in range(high_water))
