"""The LC-protection invariant through the daemon (tests/integration/
test_lc_protection.py checks it standalone): while a latency-critical vGPU
has a live process, no best-effort channel group on its GPU runs a longer
slice than the policy's beside LC, whatever the daemon's schedule writes.
Read from the fake RM device's log of every SET_TIMESLICE (with its
CLOCK_MONOTONIC time), never from how long anything took."""
import os
import time

from conftest import CUDA_APP, poll

FAKE_RM = os.path.join(os.environ.get("GPUSLICE_BUILD_DIR", os.path.join(os.path.dirname(__file__), "..", "..",
                                                                          "build")), "fake_driver", "libfake_rm.so")
COMPUTE_TSG = "5c000001"
BESIDE_LC = 50
SEVERAL_BESIDE_LC = 2000
CO_BUSY = 1000  # src/interposer/timeslice_applier.cc: kCoBusySliceUs


def compute_sets(log, pid):
    if not os.path.exists(log):
        return []
    with open(log) as f:
        rows = [l.split() for l in f if l.strip()]
    return [(int(us), int(ns)) for k, p, o, us, st, ns in rows
            if k == "set" and int(p) == pid and o == COMPUTE_TSG and st == "0"]


def hold(dworld, log, name, *flags, alloc=None, env=None, tag=""):
    ready, done = dworld.path(name + tag + ".ready"), dworld.path(name + tag + ".done")
    app = [CUDA_APP, "init", *(["alloc", alloc] if alloc else []), "ready", ready, "await", done]
    p = dworld.start("run", "--name", name, *flags, "--", *app,
                     env={"LD_PRELOAD": FAKE_RM, "FAKE_RM_LOG": log, **(env or {})})
    pid = int(dworld.wait_for_file(ready))

    def release():
        open(done, "w").close()
        p.communicate(timeout=30)
        assert p.returncode == 0
    return pid, release


def test_the_daemons_reschedules_never_lengthen_a_be_slice_beside_a_live_lc(dworld):
    dworld.daemon()
    log = dworld.path("rm.log")
    lc_pid, release_lc = hold(dworld, log, "lc", "--priority", "lc")
    since = poll(lambda: next((ns for us, ns in compute_sets(log, lc_pid) if us > 10000), None),
                 what="the LC set its slice")
    be_pid, release_be = hold(dworld, log, "be", "--priority", "be")
    poll(lambda: compute_sets(log, be_pid)[-1:] and compute_sets(log, be_pid)[-1][0] <= BESIDE_LC,
         what="the BE took its slice beside LC")
    # The daemon reschedules: a resize, a vGPU coming and going, and one with
    # the LC hidden from the store (the schedule then writes the lone BE's
    # 10 ms slice into the BE's limits).
    assert dworld.gpuslice("set", "be", "--compute", "40").returncode == 0
    other_pid, release_other = hold(dworld, log, "other")
    release_other()
    vgpus = os.path.join(dworld.state, "vgpus")
    os.rename(os.path.join(vgpus, "lc"), os.path.join(vgpus, ".lc-hidden"))
    try:
        assert dworld.gpuslice("set", "be", "--compute", "60").returncode == 0
        poll(lambda: dworld.ls()["be"]["devices"][0]["timeslice_us"] == 10000, what="the schedule lost the LC")
        poll(lambda: dworld.ls()["be"]["devices"][0]["compute_share_pct"] == 60, what="the resize")
        until = time.monotonic_ns()
    finally:
        os.rename(os.path.join(vgpus, ".lc-hidden"), os.path.join(vgpus, "lc"))
    timeline = compute_sets(log, be_pid)
    bad = [(us, ns) for us, ns in timeline if since <= ns <= until and us > SEVERAL_BESIDE_LC]
    assert not bad, timeline
    assert [us for us, ns in timeline if ns <= until][-1] == BESIDE_LC, timeline
    assert dworld.ls()["be"]["devices"][0]["applied_timeslice_us"] == BESIDE_LC
    release_lc()
    release_be()


def test_beside_an_lc_a_be_vgpu_with_no_process_on_the_gpu_is_no_contender(dworld):
    """The daemon counts a best-effort vGPU as contending for a GPU only
    while the driver lists a process of it there (src/daemon/occupancy_watch.h):
    beside an LC, the lone busy BE keeps the tiny slice while its neighbour
    idles, and both split the period once the neighbour has a process there."""
    procs = dworld.path("gpu-processes")
    os.makedirs(procs)
    busy = dworld.path("busy-processes")  # what NVML's per-process samples say ran
    env = {"FAKE_GPU_PROCESS_DIR": procs, "FAKE_NVML_PROCESS_UTILIZATION_FILE": busy}
    dworld.daemon(env=env)
    log = dworld.path("rm.log")
    # An idle neighbour: a vGPU whose process never touches the GPU.
    idle_ready, idle_done = dworld.path("idle.ready"), dworld.path("idle.done")
    idle = dworld.start("run", "--name", "idle", "--priority", "be", "--", "sh", "-c",
                        f'touch {idle_ready}; while [ ! -e {idle_done} ]; do sleep 0.1; done')
    dworld.wait_for_file(idle_ready)
    _, release_lc = hold(dworld, log, "lc", "--priority", "lc", alloc="1M", env=env)
    be_pid, release_be = hold(dworld, log, "be", "--priority", "be", alloc="1M", env=env)
    with open(busy, "w") as f:
        f.write(f"{be_pid} 90\n")

    def be_slices():
        d = dworld.ls()["be"]["devices"][0]
        return d["timeslice_us"], d["timeslice_beside_lc_us"]
    poll(lambda: be_slices() == (BESIDE_LC, BESIDE_LC), 20, "the lone BE's tiny slice beside the idle vGPU")
    poll(lambda: compute_sets(log, be_pid)[-1:] == [(BESIDE_LC, compute_sets(log, be_pid)[-1][1])], 20,
         "the BE applied it")
    # The neighbour's process comes onto the GPU: both split the period.
    _, release_neighbour = hold(dworld, log, "idle", "--priority", "be", alloc="1M", env=env, tag="-cuda")
    poll(lambda: be_slices() == (SEVERAL_BESIDE_LC // 2, SEVERAL_BESIDE_LC // 2), 20, "the split")
    poll(lambda: compute_sets(log, be_pid)[-1][0] == SEVERAL_BESIDE_LC // 2, 20, "the BE applied the split")
    assert dworld.ls()["idle"]["devices"][0]["timeslice_us"] == SEVERAL_BESIDE_LC // 2
    release_neighbour()
    open(idle_done, "w").close()
    assert idle.wait(timeout=30) == 0
    release_be()
    release_lc()


def test_beside_an_lc_a_be_process_that_runs_nothing_stops_contending(dworld):
    """A neighbour whose process holds a CUDA context and runs nothing (a
    notebook after `import torch`) is listed by the driver, but its SMs are
    never seen busy: after idle_after_ms it no longer contends, and the lone
    busy BE takes the tiny slice beside the LC. Once it runs, it contends at
    the next pass."""
    procs = dworld.path("gpu-processes")
    os.makedirs(procs)
    busy = dworld.path("busy-processes")
    env = {"FAKE_GPU_PROCESS_DIR": procs, "FAKE_NVML_PROCESS_UTILIZATION_FILE": busy}
    cfg = dworld.path("config.yaml")
    with open(cfg, "w") as f:
        f.write("version: 1\ntimeslices:\n  best_effort:\n    idle_after_ms: 2500\n")
    dworld.daemon(["--config", cfg], env=env)
    log = dworld.path("rm.log")

    def say_busy(*pids):
        with open(busy + ".tmp", "w") as f:
            f.write("".join(f"{p} 90\n" for p in pids))
        os.rename(busy + ".tmp", busy)

    def be_sets():
        return [us for us, ns in compute_sets(log, be_pid)]
    _, release_lc = hold(dworld, log, "lc", "--priority", "lc", alloc="1M", env=env)
    be_pid, release_be = hold(dworld, log, "be", "--priority", "be", alloc="1M", env=env)
    say_busy(be_pid)
    poll(lambda: be_sets()[-1:] == [BESIDE_LC], 60, "the lone BE's tiny slice")
    seen = len(be_sets())
    idle_pid, release_idle = hold(dworld, log, "idle", "--priority", "be", alloc="1M", env=env)
    # Newly listed, the neighbour contends (the split), then, having run
    # nothing for idle_after_ms, no longer (the tiny slice again).
    poll(lambda: SEVERAL_BESIDE_LC // 2 in be_sets()[seen:], 60, "the split while the neighbour is new")
    split_at = seen + be_sets()[seen:].index(SEVERAL_BESIDE_LC // 2)
    poll(lambda: be_sets()[split_at:][-1] == BESIDE_LC, 60, "the tiny slice once the neighbour is idle")
    assert dworld.ls()["be"]["devices"][0]["timeslice_beside_lc_us"] == BESIDE_LC
    # The neighbour runs: both split the period.
    say_busy(be_pid, idle_pid)
    poll(lambda: be_sets()[-1] == SEVERAL_BESIDE_LC // 2, 60, "the split once the neighbour runs")
    release_idle()
    release_be()
    release_lc()


def test_a_lone_be_beside_an_lc_leaves_the_tiny_slice_when_a_neighbour_starts_running(dworld):
    """The daemon counts a neighbour only once the driver shows it running,
    at its next pass; meanwhile the neighbour runs its own slice against the
    lone BE's 50 us. So the lone BE's processes, seeing the neighbour's work
    queued on the GPU's board, take the co-busy slice by themselves. The
    neighbour here is never listed by the fake NVML (it holds no memory), so
    only the board can tell."""
    procs = dworld.path("gpu-processes")
    os.makedirs(procs)
    busy = dworld.path("busy-processes")
    env = {"FAKE_GPU_PROCESS_DIR": procs, "FAKE_NVML_PROCESS_UTILIZATION_FILE": busy, "FAKE_KERNEL_US": "200"}
    dworld.daemon(env=env)
    log = dworld.path("rm.log")
    _, release_lc = hold(dworld, log, "lc", "--priority", "lc", alloc="1M", env=env)
    be_pid, release_be = hold(dworld, log, "be", "--priority", "be", alloc="1M", env=env)
    with open(busy, "w") as f:
        f.write(f"{be_pid} 90\n")
    poll(lambda: dworld.ls()["be"]["devices"][0]["timeslice_beside_lc_us"] == BESIDE_LC, 20, "the lone BE's slice")
    poll(lambda: compute_sets(log, be_pid)[-1][0] == BESIDE_LC, 20, "the BE applied it")
    seen = len(compute_sets(log, be_pid))
    ready, go, runs, idle, done = (dworld.path("nb." + n) for n in ("ready", "go", "runs", "idle", "done"))
    nb = dworld.start("run", "--name", "neighbour", "--priority", "be", "--", CUDA_APP, "init", "ready", ready,
                      "await", go, "spin", "6", runs, "ready", idle, "await", done,
                      env={"LD_PRELOAD": FAKE_RM, "FAKE_RM_LOG": log, **env})
    dworld.wait_for_file(ready)
    open(go, "w").close()
    poll(lambda: CO_BUSY in [us for us, ns in compute_sets(log, be_pid)[seen:]], 30,
         "the lone BE's co-busy slice while the neighbour runs")
    assert dworld.ls()["be"]["devices"][0]["timeslice_beside_lc_us"] == BESIDE_LC, "the schedule never saw it"
    dworld.wait_for_file(idle, timeout=30)
    poll(lambda: compute_sets(log, be_pid)[-1][0] == BESIDE_LC, 20, "the tiny slice once the neighbour stops")
    open(done, "w").close()
    out, err = nb.communicate(timeout=30)
    assert nb.returncode == 0 and "spin ok" in out, err
    release_be()
    release_lc()
