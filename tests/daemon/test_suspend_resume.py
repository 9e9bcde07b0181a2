"""`gpuslice suspend` / `resume` (issue 17): every process of a vGPU
checkpointed together through the driver's checkpoint API, as the fake
driver models it across processes (FAKE_CHECKPOINT_DIR: tests/fake_driver/
checkpoint.h). What each process's driver holds is read from the fake's
per-process files (FAKE_GPU_PROCESS_DIR), its checkpoint state from
<pid>.state (CUprocessState: 0 running, 1 locked, 2 checkpointed, 3 failed).
"""
import os
import signal

import pytest

from conftest import MiB, poll

RUNNING, LOCKED, CHECKPOINTED, FAILED = 0, 1, 2, 3


@pytest.fixture
def sworld(dworld):
    for key, name in (("FAKE_CHECKPOINT_DIR", "checkpoint"), ("FAKE_GPU_PROCESS_DIR", "processes")):
        path = dworld.path(name)
        os.makedirs(path)
        dworld.env[key] = path
    yield dworld
    # The applications wait on files: kill them by pid (a locked one never
    # reaches its next command), then their `gpuslice run`s go too.
    for pid in getattr(dworld, "app_pids", []):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def held(world, pid):
    """Device memory the fake driver holds for `pid` (all devices)."""
    try:
        with open(os.path.join(world.env["FAKE_GPU_PROCESS_DIR"], str(pid))) as f:
            return sum(int(line.split()[1]) for line in f if line.strip())
    except FileNotFoundError:
        return 0


def state(world, pid):
    with open(os.path.join(world.env["FAKE_CHECKPOINT_DIR"], f"{pid}.state")) as f:
        return int(f.read().split()[0])


def inject(world, pid, what):
    with open(os.path.join(world.env["FAKE_CHECKPOINT_DIR"], f"{pid}.fail"), "a") as f:
        f.write(what + "\n")


def start_two(world, name="sus", flags=()):
    """Two processes of one vGPU, each holding 64 MiB, waiting on `go`;
    after it, each allocates 1 MiB more (a CUDA call, which blocks while
    it is locked) and says so in its `after` file."""
    go = world.path(f"{name}-go")
    end = world.path(f"{name}-end")
    apps = []
    for i in range(2):
        ready, after = world.path(f"{name}-ready{i}"), world.path(f"{name}-after{i}")
        proc = world.start("run", "--name", name, "--memory", "256MiB", *flags, "--", *world.app_cmd(
            ["init", "alloc", "64M", "ready", ready, "await", go, "alloc", "1M", "ready", after, "await", end]))
        apps.append({"proc": proc, "ready": ready, "after": after})
    for app in apps:
        world.wait_for_file(app["ready"])
        with open(app["ready"]) as f:
            app["pid"] = int(f.read())
        # The watcher publishes the process's state after cuInit.
        poll(lambda: os.path.exists(os.path.join(world.env["FAKE_CHECKPOINT_DIR"], f"{app['pid']}.state")),
             what="checkpoint watcher started")
    world.app_pids = getattr(world, "app_pids", []) + [a["pid"] for a in apps]
    poll(lambda: len(world.ls(name)[name]["processes"]) == 2, what="both processes in the vGPU")
    return apps, go, end


def finish(apps, end):
    open(end, "w").close()
    for app in apps:
        out, err = app["proc"].communicate(timeout=30)
        assert app["proc"].returncode == 0, err
        assert out.count("alloc ok") == 2, out


def test_suspend_and_resume_a_two_process_vgpu(sworld):
    sworld.daemon()
    apps, go, end = start_two(sworld)
    for app in apps:
        assert held(sworld, app["pid"]) == 64 * MiB

    r = sworld.gpuslice("suspend", "sus")
    assert r.returncode == 0, r.stderr
    assert "suspended, 2 process(es), 128 MiB checkpointed" in r.stdout
    v = sworld.ls("sus")["sus"]
    assert v["suspend"]["state"] == "suspended"
    assert v["suspend"]["suspended_bytes"] == 128 * MiB
    for app in apps:
        assert state(sworld, app["pid"]) == CHECKPOINTED
        assert held(sworld, app["pid"]) == 0  # the device memory is released
    table = sworld.gpuslice("ls")
    assert "sus (suspended)" in table.stdout

    # Their next CUDA call blocks while they are suspended: let them go,
    # and they get no further (a bounded look; resume below proves they were
    # only held).
    open(go, "w").close()
    with pytest.raises(TimeoutError):
        poll(lambda: any(os.path.exists(a["after"]) for a in apps), timeout=0.5, what="a call while suspended")

    r = sworld.gpuslice("resume", "sus")
    assert r.returncode == 0, r.stderr + sworld.daemons[0].text()
    assert "resumed, 2 process(es) running" in r.stdout
    for app in apps:
        sworld.wait_for_file(app["after"])  # the blocked call went on
        assert state(sworld, app["pid"]) == RUNNING
        poll(lambda: held(sworld, app["pid"]) == 65 * MiB, what="memory taken back")
    v = sworld.ls("sus")["sus"]
    assert v["suspend"]["state"] == "running"
    assert v["suspend"]["bytes_moved_total"] == 256 * MiB  # out and back
    assert v["suspend"]["suspends"] == 1 and v["suspend"]["resumes"] == 1
    assert v["suspend"]["suspended_seconds_total"] > 0

    if sworld.daemons[0].metrics_port:
        import urllib.request
        text = urllib.request.urlopen(f"http://127.0.0.1:{sworld.daemons[0].metrics_port}/metrics").read().decode()
        assert f'gpuslice_vgpu_suspend_bytes_moved_total{{vgpu="sus"}} {256 * MiB}' in text
        assert 'gpuslice_vgpu_suspended{vgpu="sus"} 0' in text
        assert 'gpuslice_vgpu_last_resume_duration_seconds{vgpu="sus"}' in text
    finish(apps, end)


def test_a_lock_timeout_leaves_every_process_running(sworld):
    sworld.daemon()
    apps, go, end = start_two(sworld)
    # The second process locked times out: the first, already locked, is unlocked again.
    second = sworld.ls("sus")["sus"]["processes"][1]["pid"]
    inject(sworld, second, "lock timeout")
    r = sworld.gpuslice("suspend", "sus", "--lock-timeout", "200")
    assert r.returncode == 2
    assert f"lock of pid {second} timed out after 200 ms" in r.stderr
    assert "every process left running" in r.stderr
    v = sworld.ls("sus")["sus"]
    assert v["suspend"]["state"] == "running"
    assert "timed out" in v["suspend"]["detail"]
    for app in apps:
        assert state(sworld, app["pid"]) == RUNNING
        assert held(sworld, app["pid"]) == 64 * MiB
    open(go, "w").close()
    for app in apps:
        sworld.wait_for_file(app["after"])
    finish(apps, end)


def test_a_failed_restore_is_reported_with_each_process_state(sworld):
    sworld.daemon()
    apps, go, end = start_two(sworld)
    r = sworld.gpuslice("suspend", "sus")
    assert r.returncode == 0, r.stderr
    order = [p["pid"] for p in sworld.ls("sus")["sus"]["processes"]]
    inject(sworld, order[1], "restore error")
    r = sworld.gpuslice("resume", "sus")
    assert r.returncode == 2
    assert "RESTORE FAILED" in r.stderr
    assert f"pid {order[0]}: locked, pid {order[1]}: failed" in r.stderr
    v = sworld.ls("sus")["sus"]
    assert v["suspend"]["state"] == "suspended"
    assert f"pid {order[1]}: failed" in v["suspend"]["detail"]
    assert state(sworld, order[0]) == LOCKED  # never half running
    assert state(sworld, order[1]) == FAILED
    assert "restore of pid" in sworld.daemons[0].text()


def test_a_suspend_that_would_not_fit_in_host_memory_is_refused(sworld):
    meminfo = sworld.path("meminfo")
    with open(meminfo, "w") as f:
        f.write("MemTotal: 1048576 kB\nMemAvailable: 65536 kB\n")  # 64 MiB, less than the 128 MiB held
    sworld.daemon(env={"GPUSLICE_MEMINFO": meminfo})
    apps, go, end = start_two(sworld)
    r = sworld.gpuslice("suspend", "sus")
    assert r.returncode == 2
    assert "holds 128 MiB of device memory, more than the host's 64 MiB available memory" in r.stderr
    assert sworld.ls("sus")["sus"]["suspend"]["state"] == "running"
    for app in apps:
        assert state(sworld, app["pid"]) == RUNNING
        assert held(sworld, app["pid"]) == 64 * MiB
    open(go, "w").close()
    finish(apps, end)


def test_a_daemon_killed_mid_suspend_is_recovered_at_restart(sworld):
    d = sworld.daemon()
    apps, go, end = start_two(sworld)
    order = [p["pid"] for p in sworld.ls("sus")["sus"]["processes"]]
    # The second lock hangs (for 30 s), with the first process locked.
    inject(sworld, order[1], "lock timeout")
    suspend = sworld.start("suspend", "sus", "--lock-timeout", "30000")
    poll(lambda: state(sworld, order[0]) == LOCKED, what="first process locked")
    with open(os.path.join(sworld.vgpu_dir("sus"), "suspend")) as f:
        assert "state suspending" in f.read()
    d.kill9()
    suspend.wait(timeout=30)
    assert state(sworld, order[0]) == LOCKED  # nobody left to unlock it

    d2 = sworld.daemon()
    assert "recovered 1 vGPU(s) from an interrupted suspend" in d2.text()
    assert state(sworld, order[0]) == RUNNING
    v = sworld.ls("sus")["sus"]
    assert v["suspend"]["state"] == "running"
    assert "recovered at daemon start" in v["suspend"]["detail"]
    open(go, "w").close()
    for app in apps:
        sworld.wait_for_file(app["after"])
    finish(apps, end)


def test_migrate_moves_a_vgpu_and_its_memory_to_another_gpu(sworld):
    # The fake driver restores a checkpoint onto the paired GPU
    # (tests/fake_driver/checkpoint.h): what each process holds moves there.
    sworld.env["FAKE_GPU_COUNT"] = "2"
    sworld.daemon()
    go, end = sworld.path("mig-go"), sworld.path("mig-end")
    ready, after = sworld.path("mig-ready"), sworld.path("mig-after")
    proc = sworld.start("run", "--name", "mig", "--gpu", "0", "--memory", "256MiB", "--", *sworld.app_cmd(
        ["init", "alloc", "64M", "ready", ready, "await", go, "alloc", "1M", "ready", after, "await", end]))
    sworld.wait_for_file(ready)
    with open(ready) as f:
        pid = int(f.read())
    sworld.app_pids = [pid]
    poll(lambda: os.path.exists(os.path.join(sworld.env["FAKE_CHECKPOINT_DIR"], f"{pid}.state")),
         what="checkpoint watcher started")
    poll(lambda: len(sworld.ls("mig")["mig"]["processes"]) == 1, what="the process in the vGPU")

    def held_on(gpu):
        with open(os.path.join(sworld.env["FAKE_GPU_PROCESS_DIR"], str(pid))) as f:
            return {int(g): int(b) for g, b in (line.split() for line in f if line.strip())}.get(gpu, 0)
    assert held_on(0) == 64 * MiB and held_on(1) == 0

    refused = sworld.gpuslice("migrate", "mig", "--gpu", "0")
    assert refused.returncode == 2 and "is on GPU 0 already" in refused.stderr
    r = sworld.gpuslice("migrate", "mig", "--gpu", "1")
    assert r.returncode == 0, r.stderr + sworld.daemons[0].text()
    assert "migrated to GPU 1, 1 process(es) running" in r.stdout
    assert held_on(0) == 0 and held_on(1) == 64 * MiB
    assert state(sworld, pid) == RUNNING
    v = sworld.ls("mig")["mig"]
    assert [d["gpu"] for d in v["devices"]] == [1]
    assert v["suspend"]["state"] == "running" and v["suspend"]["suspends"] == 1 and v["suspend"]["resumes"] == 1
    # The process goes on, charged in its vGPU as before.
    open(go, "w").close()
    sworld.wait_for_file(after)
    assert sworld.ls("mig")["mig"]["devices"][0]["memory_used_bytes"] >= 65 * MiB
    open(end, "w").close()
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0 and out.count("alloc ok") == 2, out + err


def test_a_failed_migration_puts_the_vgpu_back(sworld):
    # One process's restore onto the target fails (the fake leaves it
    # FAILED, as a driver may): the other is put back on GPU 0, running, the
    # limits are back on GPU 0, and the error gives each process's state.
    sworld.env["FAKE_GPU_COUNT"] = "2"
    sworld.daemon()
    apps, go, end = start_two(sworld, name="back", flags=("--gpu", "0"))
    inject(sworld, apps[1]["pid"], "restore error")
    r = sworld.gpuslice("migrate", "back", "--gpu", "1")
    assert r.returncode == 2
    assert "back on GPU 0" in r.stderr and f"pid {apps[1]['pid']}: failed" in r.stderr, r.stderr
    v = sworld.ls("back")["back"]
    assert [d["gpu"] for d in v["devices"]] == [0]
    assert v["suspend"]["state"] == "running"
    assert state(sworld, apps[0]["pid"]) == RUNNING
    assert held(sworld, apps[0]["pid"]) == 64 * MiB
    assert state(sworld, apps[1]["pid"]) == FAILED
    open(go, "w").close()
    sworld.wait_for_file(apps[0]["after"])
