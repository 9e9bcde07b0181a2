"""The compute path end to end, in CI: real processes, the real CLI and
library, the fake CUDA driver allocating channel groups through RM ioctls,
and the fake RM device (tests/rm, libfake_rm.so) recording every
SET_TIMESLICE it receives.

Each context of the fake driver has four channel groups; the first (handle
0x5c000001 in a process's first context) is the compute one (engine type 1),
the others are copy engines, whose slices gpuslice leaves alone unless an
LC is live on the GPU (test_lc_protection.py)."""
import os
import struct
import subprocess
import time

import pytest

from conftest import BUILD, CUDA_APP, FAKE_DIR

FAKE_RM = os.path.join(FAKE_DIR, "libfake_rm.so")
LIBRARY = os.path.join(BUILD, "lib", "libgpuslice-cuda.so")
COMPUTE_TSG = "5c000001"


def timed_sets(log, kind="set"):
    """[(pid, object, us, status, CLOCK_MONOTONIC ns)] of every SET_TIMESLICE
    (or, kind="get", GET_TIMESLICE and the value it read) so far."""
    if not os.path.exists(log):
        return []
    with open(log) as f:
        return [(int(p), o, int(us), int(st, 16), int(ns)) for k, p, o, us, st, ns in
                (l.split() for l in f if l.strip()) if k == kind]


def sets(log):
    """[(pid, object, us, status)] of every SET_TIMESLICE so far."""
    return [s[:4] for s in timed_sets(log)]


def wait_for(predicate, what, timeout=10.0):
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise TimeoutError(what)
        time.sleep(0.005)


def ledger_counters(world, name):
    with open(os.path.join(world.env["GPUSLICE_STATE_DIR"], "vgpus", name, "ledger"), "rb") as f:
        data = f.read(64)
    reaped, denied, applications, failures = struct.unpack_from("<QQQQ", data, 24)
    return {"applications": applications, "failures": failures}


class Rm:
    """The world, with the fake RM device preloaded into every process."""

    def __init__(self, world, inject="preload", **env):
        self.world = world
        self.log = world.path("rm.log")
        self.inject = inject
        # The fake driver sets its compute group's slice itself while it
        # makes a context, as libcuda 580 does (docs/gpu-facts.md).
        self.env = {"LD_PRELOAD": FAKE_RM, "FAKE_RM_LOG": self.log, "FAKE_RM_DRIVER_SLICE_US": "2048", **env}

    def hold(self, name, *flags):
        """`gpuslice run` of an app that makes a context and waits; returns (pid, release)."""
        ready, done = self.world.path(name + ".ready"), self.world.path(name + ".done")
        p = self.world.start("run", "--inject", self.inject, "--name", name, *flags, "--", CUDA_APP, "init",
                             "ready", ready, "await", done, "alloc", "1M", env=self.env)
        pid = int(self.world.wait_for_file(ready))

        def release():
            open(done, "w").close()
            out, err = p.communicate(timeout=30)
            assert p.returncode == 0, err
            assert "alloc ok" in out
            return err
        return pid, release

    def slices(self, pid):
        return [us for p, o, us, st in sets(self.log) if p == pid and o == COMPUTE_TSG and st == 0]

    def wait_slice(self, pid, us):
        return wait_for(lambda: self.slices(pid)[-1:] == [us], f"pid {pid} never got a {us} us slice: "
                        f"{sets(self.log)}")


@pytest.mark.parametrize("inject", ["preload", "libpath"])
def test_the_compute_group_gets_the_vgpus_slice_in_both_load_modes(world, inject):
    rm = Rm(world, inject)
    pid, release = rm.hold("a", "--compute", "30")
    rm.wait_slice(pid, 10000)  # alone: the whole BE period
    # Only the compute group is touched: with no LC, copy engines keep their own slices.
    assert {o for p, o, us, st in sets(rm.log) if p == pid} == {COMPUTE_TSG}
    release()


def test_a_second_vgpu_joining_and_leaving_changes_the_first_ones_slice(world):
    # The node schedule's slices for contending BE vGPUs are what they run
    # when the node shares GPUs by slices, the default (shares by turns set
    # the turn's slices instead).
    rm = Rm(world)
    pid_a, release_a = rm.hold("a", "--compute", "30")
    rm.wait_slice(pid_a, 10000)
    joined = time.monotonic()
    pid_b, release_b = rm.hold("b", "--compute", "70")
    rm.wait_slice(pid_a, 3000)
    rm.wait_slice(pid_b, 7000)
    # Generous for CI; the thread polls every 20 ms.
    assert time.monotonic() - joined < 5
    release_b()
    rm.wait_slice(pid_a, 10000)
    release_a()


def test_latency_critical_takes_a_long_slice_and_shrinks_the_best_effort_one(world):
    rm = Rm(world)
    pid_be, release_be = rm.hold("be", "--priority", "be")
    rm.wait_slice(pid_be, 10000)
    pid_lc, release_lc = rm.hold("lc", "--priority", "lc")
    rm.wait_slice(pid_lc, 5000000)
    rm.wait_slice(pid_be, 50)
    release_lc()
    rm.wait_slice(pid_be, 10000)
    release_be()


def test_every_process_of_a_vgpu_applies_it_and_counts_in_the_ledger(world):
    rm = Rm(world)
    pid1, release1 = rm.hold("shared", "--compute", "50")
    pid2, release2 = rm.hold("shared")
    rm.wait_slice(pid1, 10000)
    rm.wait_slice(pid2, 10000)
    wait_for(lambda: ledger_counters(world, "shared")["applications"] >= 2, "applications not counted")
    assert ledger_counters(world, "shared")["failures"] == 0
    release2()
    release1()


def test_parameter_size_of_another_driver_build_is_detected(world):
    rm = Rm(world, FAKE_RM_PARAMS_SIZE="16")
    pid, release = rm.hold("a")
    rm.wait_slice(pid, 10000)
    release()


def test_refusal_falls_back_visibly_and_the_app_runs_on(world):
    # A driver that refuses every SET_TIMESLICE cannot set its own either.
    rm = Rm(world, FAKE_RM_REFUSE="0x1b", GPUSLICE_LOG="warn", FAKE_RM_DRIVER_SLICE_US="")
    pid, release = rm.hold("a", "--compute", "30")
    wait_for(lambda: ledger_counters(world, "a")["failures"] >= 1, "refusal not counted")
    assert ledger_counters(world, "a")["applications"] == 0
    # A second vGPU changes the target: refused again, still counted, app unharmed.
    _, release_b = rm.hold("b", "--compute", "70")
    wait_for(lambda: ledger_counters(world, "a")["failures"] >= 2, "second refusal not counted")
    release_b()
    err = release()
    refusals = [l for l in err.splitlines() if "refused" in l]
    assert len(refusals) == 1, err  # one line, not one per attempt
    assert "RM status 0x1b" in refusals[0] and "NOT enforced" in refusals[0]


def test_a_process_outside_any_vgpu_is_left_alone(world):
    env = {**world.env, "LD_PRELOAD": LIBRARY + ":" + FAKE_RM, "FAKE_RM_LOG": world.path("rm.log")}
    r = subprocess.run([CUDA_APP, "init", "alloc", "1M"], env=env, capture_output=True, text=True, timeout=30)
    assert r.returncode == 0 and "alloc ok" in r.stdout, r.stderr
    assert sets(world.path("rm.log")) == []


@pytest.mark.parametrize("what,value", [("slice", "4000000"), ("realtime", "1"), ("interleave", "2")])
def test_a_tenant_cannot_reschedule_its_own_channel_groups(world, what, value):
    """A tenant that knows its channel groups' handles asks RM, through
    libc's ioctl, for a 4 s slice, realtime or a high interleave level: more
    of the GPU than its vGPU's share. The slice goes to the driver as the
    vGPU's slice instead; the other two are answered
    NV_ERR_INSUFFICIENT_PERMISSIONS and never reach the driver. Without
    gpuslice the same calls reach the driver. The driver's own call passes:
    like libcuda 580, the fake (Rm) sets its compute group's slice while it
    makes a context, and fails the context if refused."""
    rm = Rm(world, GPUSLICE_LOG="warn")
    r = world.gpuslice("run", "--inject", "preload", "--name", "t", "--compute", "30", "--", CUDA_APP, "init",
                       "rmcontrol", what, value, env=rm.env)
    assert r.returncode == 0, r.stderr
    assert "init ok" in r.stdout, r.stdout + r.stderr  # the driver's own set passed
    assert not [s for s in sets(rm.log) if s[2] == 4000000], sets(rm.log)
    if what == "slice":
        assert "rmcontrol slice 0" in r.stdout, r.stdout + r.stderr
        assert "this process set channel group 0x5c000001's timeslice to 4000000 us; passed on as" in r.stderr
    else:
        assert f"rmcontrol {what} 1b" in r.stdout, r.stdout + r.stderr
        assert "refused this process's RM control" in r.stderr

    # The control: the same program with only the fake RM device.
    env = {**world.env, "LD_PRELOAD": FAKE_RM, "FAKE_RM_LOG": rm.log}
    r = subprocess.run([CUDA_APP, "init", "rmcontrol", what, value], env=env, capture_output=True, text=True,
                       timeout=30)
    assert r.returncode == 0, r.stderr
    assert f"rmcontrol {what} 1b" not in r.stdout, r.stdout
    if what == "slice":
        assert f"rmcontrol {what} 0" in r.stdout and [s for s in sets(rm.log) if s[2] == 4000000]
