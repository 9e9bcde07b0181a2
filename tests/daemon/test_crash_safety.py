"""kill -9 of applications and of the daemon loses no accounting, and a
restarted daemon re-adopts the vGPUs that kept running without it."""
import os
import signal

from conftest import MiB, poll


def used(dworld, name):
    return dworld.ls(name)[name]["devices"][0]["memory_used_bytes"]


def test_kill_9_of_an_app_returns_its_memory(dworld):
    dworld.daemon()
    victim_ready, survivor_ready, go = dworld.path("v"), dworld.path("s"), dworld.path("go")
    victim = dworld.start("run", "--name", "k9", "--memory", "64MiB", "--",
                          *dworld.app_cmd(["init", "alloc", "40M", "ready", victim_ready, "hold"]))
    victim_pid = int(dworld.wait_for_file(victim_ready))
    survivor = dworld.start("run", "--name", "k9", "--", *dworld.app_cmd(
        ["init", "alloc", "8M", "ready", survivor_ready, "await", go, "alloc", "56M"]))
    dworld.wait_for_file(survivor_ready)
    assert used(dworld, "k9") == 48 * MiB
    os.kill(victim_pid, signal.SIGKILL)
    victim.communicate(timeout=30)
    # Reaped by the daemon within its 200 ms interval (5 s allows for a loaded CI machine).
    poll(lambda: used(dworld, "k9") == 8 * MiB, 5, "dead process reaped")
    v = dworld.ls("k9")["k9"]
    assert [p["pid"] for p in v["processes"]] != [victim_pid] and len(v["processes"]) == 1
    assert v["reaped_processes"] == 1
    open(go, "w").close()
    out, err = survivor.communicate(timeout=30)
    assert survivor.returncode == 0, err
    assert "alloc ok" in out.splitlines()[-1]


def test_kill_9_of_the_daemon_loses_nothing_and_a_restart_readopts(dworld):
    d = dworld.daemon()
    a_ready, b_ready, b_go = dworld.path("a"), dworld.path("b"), dworld.path("b-go")
    a = dworld.start("run", "--name", "keep", "--memory", "64MiB", "--",
                     *dworld.app_cmd(["init", "alloc", "40M", "ready", a_ready, "hold"]))
    a_pid = int(dworld.wait_for_file(a_ready))
    b = dworld.start("run", "--name", "keep", "--", *dworld.app_cmd(
        ["init", "alloc", "8M", "ready", b_ready, "await", b_go, "alloc", "20M", "alloc", "16M", "watchinfo",
         dworld.path("b-watching"), "meminfo"]))
    dworld.wait_for_file(b_ready)
    before = dworld.ls("keep")["keep"]

    d.kill9()
    # Without any daemon, limits and accounting still hold: B may take 16
    # of the 64 MiB that are left, not 20.
    open(b_go, "w").close()
    dworld.wait_for_file(dworld.path("b-watching"))
    # A dies while no daemon runs.
    os.kill(a_pid, signal.SIGKILL)
    a.communicate(timeout=30)

    d2 = dworld.daemon()
    assert "adopted vGPU 'keep' (ephemeral" in d2.text()
    after = dworld.ls("keep")["keep"]
    assert after["devices"][0]["memory_limit_bytes"] == before["devices"][0]["memory_limit_bytes"] == 64 * MiB
    # A's 40 MiB were reclaimed (by B's run or the new daemon); B's 8 + 16 remain.
    poll(lambda: used(dworld, "keep") == 24 * MiB, 5, "A reaped")
    assert [p["pid"] for p in dworld.ls("keep")["keep"]["processes"]] == \
        [p["pid"] for p in before["processes"] if p["pid"] != a_pid]
    # The re-adopted vGPU is fully managed: a live resize reaches B.
    r = dworld.gpuslice("set", "keep", "--memory", "80MiB")
    assert r.returncode == 0, r.stderr
    out, err = b.communicate(timeout=30)
    assert b.returncode == 0, err
    allocs = [l.split()[1] for l in out.splitlines() if l.startswith("alloc")]
    assert allocs == ["ok", "oom", "ok"], out
    assert [l.split()[1] for l in out.splitlines() if l.startswith("changed")] == [str(80 * MiB)]
    # And with B gone, the new daemon removes the ephemeral vGPU.
    poll(lambda: not os.path.exists(dworld.vgpu_dir("keep")), 15, "vGPU collected")
