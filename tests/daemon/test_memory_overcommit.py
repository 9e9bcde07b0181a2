"""Memory overcommit (issue 17): a vGPU whose allocation finds its GPU full
waits while the daemon suspends `--suspendable` vGPUs of lower levels
(node/memory_pressure.h, core/memory_wait.h), and they are resumed once
the memory frees. The fake GPUs share their memory between processes here
(FAKE_GPU_SHARED_CAPACITY), as a real GPU does, and model checkpoints
(FAKE_CHECKPOINT_DIR)."""
import os

from conftest import MiB, poll
from test_suspend_resume import sworld  # noqa: F401  (the fixture)


def overcommit_daemon(world, **pressure):
    world.env["FAKE_GPU_MEMORY"] = str(1024 * MiB)
    world.env["FAKE_GPU_SHARED_CAPACITY"] = "1"
    settings = {"wait_ms": 30000, "resume_headroom": "1MiB", **pressure}
    config = world.path("config.yaml")
    with open(config, "w") as f:
        f.write("version: 1\nmemory_pressure:\n" + "".join(f"  {k}: {v}\n" for k, v in settings.items()))
    return world.daemon(["--config", config])


def app(world, name, flags, before, after=()):
    """`gpuslice run --name NAME FLAGS -- cuda_app init BEFORE ready NAME.ready
    AFTER`; returns the process and its pid once it is ready."""
    ready = world.path(f"{name}.ready")
    proc = world.start("run", "--name", name, *flags, "--", *world.app_cmd(["init", *before, "ready", ready, *after]))
    try:
        world.wait_for_file(ready)
    except TimeoutError:
        proc.kill()
        out, err = proc.communicate(timeout=10)
        raise AssertionError(f"{name} never became ready:\n{out}\n{err}")
    with open(ready) as f:
        pid = int(f.read())
    world.app_pids = getattr(world, "app_pids", []) + [pid]
    return proc, pid


def test_an_lc_allocation_waits_for_a_best_effort_suspend_and_the_be_resumes_after(sworld):
    daemon = overcommit_daemon(sworld)
    # A suspendable BE holds 700 of the GPU's 1024 MiB.
    be_end, be_after = sworld.path("be.end"), sworld.path("be.after")
    be, be_pid = app(sworld, "be", ["--suspendable", "--memory", "900MiB"],
                     ["alloc", "700M"], ["await", be_end, "alloc", "1M", "ready", be_after])
    poll(lambda: os.path.exists(os.path.join(sworld.env["FAKE_CHECKPOINT_DIR"], f"{be_pid}.state")),
         what="checkpoint watcher started")
    assert sworld.ls("be")["be"]["suspendable"] is True
    # An LC asks for 600 MiB, within its limit: the GPU is full, so it waits,
    # the daemon suspends the BE, and the allocation succeeds.
    lc_end = sworld.path("lc.end")
    lc, _ = app(sworld, "lc", ["--priority", "lc", "--memory", "900MiB"], ["alloc", "600M"], ["await", lc_end])
    be_view = sworld.ls("be")["be"]
    assert be_view["suspend"]["state"] == "suspended", daemon.text()
    assert be_view["suspend"]["suspends"] == 1
    # Once the LC is gone, its memory is free, and the BE is resumed: its
    # next CUDA call (blocked while it was suspended) goes on.
    open(lc_end, "w").close()
    out, err = lc.communicate(timeout=30)
    assert lc.returncode == 0 and "alloc ok" in out, out + err
    assert "the GPU is full" in err, err  # it waited
    poll(lambda: sworld.ls("be")["be"]["suspend"]["state"] == "running", timeout=20, what="the BE resumed")
    assert sworld.ls("be")["be"]["suspend"]["resumes"] == 1
    open(be_end, "w").close()
    out, err = be.communicate(timeout=30)
    assert be.returncode == 0, err
    assert out.count("alloc ok") == 2, out
    assert "resumed vGPU 'be'" in daemon.text()


def test_with_nothing_suspendable_the_allocation_fails_at_once_and_nobody_is_suspended(sworld):
    daemon = overcommit_daemon(sworld)
    be_end = sworld.path("be.end")
    be, _ = app(sworld, "be", ["--memory", "900MiB"], ["alloc", "700M"], ["await", be_end])  # not --suspendable
    lc, _ = app(sworld, "lc", ["--priority", "lc", "--memory", "900MiB"], ["alloc", "600M"])
    out, err = lc.communicate(timeout=30)
    assert "alloc oom" in out, out
    # Answered by the daemon, not by the 30 s bound passing.
    assert "the node has nothing of a lower level to suspend" in err, err
    assert sworld.ls("be")["be"]["suspend"]["suspends"] == 0
    assert "asked for" in daemon.text()
    open(be_end, "w").close()
    be.communicate(timeout=30)


def test_a_latency_critical_vgpu_cannot_be_suspendable(sworld):
    overcommit_daemon(sworld)
    r = sworld.gpuslice("run", "--suspendable", "--priority", "lc", "--", "true")
    assert r.returncode == 2
    assert "cannot be suspendable" in r.stderr


def test_a_vgpu_resumed_moments_ago_is_not_suspended_again(sworld):
    # Anti-thrash: the LC's first burst suspends the BE; the BE is resumed once
    # the burst frees; a second burst within min_run_after_resume_s finds the
    # BE no candidate, waits out its own bound (not refused: room may come)
    # and fails; the BE was suspended once.
    daemon = overcommit_daemon(sworld, wait_ms=1500, min_run_after_resume_s=600)
    be_end = sworld.path("be.end")
    be, be_pid = app(sworld, "be", ["--suspendable", "--memory", "900MiB"], ["alloc", "700M"], ["await", be_end])
    poll(lambda: os.path.exists(os.path.join(sworld.env["FAKE_CHECKPOINT_DIR"], f"{be_pid}.state")),
         what="checkpoint watcher started")
    again = sworld.path("lc.again")
    lc, _ = app(sworld, "lc", ["--priority", "lc", "--memory", "900MiB"], ["alloc", "600M", "free"],
                ["await", again, "alloc", "600M"])
    poll(lambda: sworld.ls("be")["be"]["suspend"]["state"] == "running" and
         sworld.ls("be")["be"]["suspend"]["resumes"] == 1, timeout=20, what="the BE resumed after the first burst")
    open(again, "w").close()
    out, err = lc.communicate(timeout=30)
    assert out.count("alloc ok") == 1 and "alloc oom" in out, out + err
    assert "the wait's bound passed" in err, err
    v = sworld.ls("be")["be"]["suspend"]
    assert v["suspends"] == 1 and v["state"] == "running", (v, daemon.text())
    open(be_end, "w").close()
    be.communicate(timeout=30)


def test_a_restarted_daemon_resumes_what_the_last_one_suspended_for_memory(sworld):
    daemon = overcommit_daemon(sworld)
    be_end = sworld.path("be.end")
    be, be_pid = app(sworld, "be", ["--suspendable", "--memory", "900MiB"], ["alloc", "700M"],
                     ["await", be_end, "alloc", "1M"])
    poll(lambda: os.path.exists(os.path.join(sworld.env["FAKE_CHECKPOINT_DIR"], f"{be_pid}.state")),
         what="checkpoint watcher started")
    lc_end = sworld.path("lc.end")
    lc, _ = app(sworld, "lc", ["--priority", "lc", "--memory", "900MiB"], ["alloc", "600M"], ["await", lc_end])
    v = sworld.ls("be")["be"]["suspend"]
    assert v["state"] == "suspended" and v["by"] == "memory_pressure", v
    # The daemon dies with the BE suspended; the LC then frees its memory.
    daemon.kill9()
    open(lc_end, "w").close()
    lc.communicate(timeout=30)
    # The next daemon finds the BE suspended for memory, and resumes it.
    overcommit_daemon(sworld)
    poll(lambda: sworld.ls("be")["be"]["suspend"]["state"] == "running", timeout=20, what="the BE resumed")
    assert sworld.ls("be")["be"]["suspend"]["by"] == ""
    open(be_end, "w").close()
    out, err = be.communicate(timeout=30)
    assert be.returncode == 0 and out.count("alloc ok") == 2, out + err
