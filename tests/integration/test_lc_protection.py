"""The LC-protection invariant, end to end with real processes on the fake
driver and the fake RM device (which logs every SET_TIMESLICE with the
CLOCK_MONOTONIC time the "driver" took it):

    While a latency-critical vGPU has a live process on a GPU, no best-effort
    channel group on that GPU runs with a slice longer than the policy's slice
    beside LC (50 µs for one BE, its share of 2 ms for several).

It must hold whatever the join and leave order, whether the BE is paced, and
even when the node schedule never saw the LC: on an H100 a BE's slice went
back to 10 ms while an LC ran, because the schedule was recomputed without
it (issue 10). Every check here reads what the processes did (the SET log,
the ledger), never how long anything took."""
import json
import os
import time

import pytest

from conftest import CUDA_APP
from test_compute_rm import COMPUTE_TSG, Rm, timed_sets, wait_for

BESIDE_LC = 50  # core::kDefaultSliceBesideLcUs, one BE beside an LC
SEVERAL_BESIDE_LC = 2000  # several BE beside an LC split this period (policy::TimeslicePolicyConfig)


def compute_sets(rm, pid):
    """[(us, ns)] of the successful SETs on pid's compute channel group."""
    return [(us, ns) for p, o, us, st, ns in timed_sets(rm.log) if p == pid and o == COMPUTE_TSG and st == 0]


def lc_live_since(rm, lc_pid):
    """When the LC process took its own (long) slice: it is live from then."""
    return wait_for(lambda: next((ns for us, ns in compute_sets(rm, lc_pid) if us > 10000), None),
                    "the LC never set its slice")


def assert_never_longer_while_lc_lives(rm, be_pid, since_ns, until_ns, limit=BESIDE_LC):
    """No SET on the BE's compute group over `limit` in [since, until], and
    the BE's slice in force at `until` is within `limit`."""
    timeline = compute_sets(rm, be_pid)
    bad = [(us, ns) for us, ns in timeline if since_ns <= ns <= until_ns and us > limit]
    assert not bad, f"BE slices over {limit} us while the LC lived: {bad}; timeline {timeline}"
    in_force = [us for us, ns in timeline if ns <= until_ns]
    assert in_force and in_force[-1] <= limit, timeline


def be_reaches(rm, be_pid, limit=BESIDE_LC):
    """Waits until the BE's latest slice is within `limit`; returns when the
    driver took that SET (the invariant is checked from there on)."""
    def reached():
        timeline = compute_sets(rm, be_pid)
        return timeline[-1][1] if timeline and timeline[-1][0] <= limit else None
    return wait_for(reached, f"the BE never went to {limit} us: {compute_sets(rm, be_pid)}")


@pytest.mark.parametrize("be_flags", [[], ["--compute-cap", "60"]], ids=["be", "be-capped"])
def test_an_lc_joining_shrinks_the_be_and_it_stays_short_until_the_lc_leaves(world, be_flags):
    rm = Rm(world)
    be_pid, release_be = rm.hold("be", "--priority", "be", *be_flags)
    rm.wait_slice(be_pid, 10000)  # alone: the whole BE period
    lc_pid, release_lc = rm.hold("lc", "--priority", "lc")
    lc_live_since(rm, lc_pid)
    reached = be_reaches(rm, be_pid)
    # Another vGPU coming and going reschedules the node meanwhile.
    other_pid, release_other = rm.hold("other", "--compute", "40")
    release_other()
    before_lc_exit = time.monotonic_ns()
    assert_never_longer_while_lc_lives(rm, be_pid, reached, before_lc_exit, limit=SEVERAL_BESIDE_LC)
    release_lc()
    release_be()


def test_a_be_joining_an_lc_never_runs_a_long_slice(world):
    rm = Rm(world)
    lc_pid, release_lc = rm.hold("lc", "--priority", "lc")
    since = lc_live_since(rm, lc_pid)
    be_pid, release_be = rm.hold("be", "--priority", "be")
    be_reaches(rm, be_pid)
    assert_never_longer_while_lc_lives(rm, be_pid, since, time.monotonic_ns())
    release_lc()
    # Once the LC has gone (and its board entry timed out), the BE gets the
    # whole period back.
    rm.wait_slice(be_pid, 10000)
    release_be()


def test_lc_protection_holds_when_the_node_schedule_never_saw_the_lc(world):
    """The field failure: the schedule is recomputed without the LC (here the
    LC's vGPU is hidden from the store) and writes the BE's lone 10 ms slice
    into its limits. The BE must keep its short slice regardless."""
    rm = Rm(world)
    lc_pid, release_lc = rm.hold("lc", "--priority", "lc")
    since = lc_live_since(rm, lc_pid)
    be_pid, release_be = rm.hold("be", "--priority", "be")
    be_reaches(rm, be_pid)
    vgpus = os.path.join(world.env["GPUSLICE_STATE_DIR"], "vgpus")
    os.rename(os.path.join(vgpus, "lc"), os.path.join(vgpus, ".lc-hidden"))
    try:
        # Any change of the set reschedules every vGPU on the GPU.
        other_pid, release_other = rm.hold("other")
        release_other()
        ls = json.loads(world.gpuslice("ls", "--json").stdout)["vgpus"]
        be = next(v for v in ls if v["name"] == "be")
        assert be["devices"][0]["timeslice_us"] == 10000, "the schedule should not see the LC here"
        # While "other" lived the two BE split the period beside LC; alone
        # again, the BE is back at the lone BE's slice beside LC.
        assert_never_longer_while_lc_lives(rm, be_pid, since, time.monotonic_ns(), limit=SEVERAL_BESIDE_LC)
        be_reaches(rm, be_pid)
        be = next(v for v in json.loads(world.gpuslice("ls", "--json").stdout)["vgpus"] if v["name"] == "be")
        assert be["devices"][0]["applied_timeslice_us"] == BESIDE_LC, be
    finally:
        os.rename(os.path.join(vgpus, ".lc-hidden"), os.path.join(vgpus, "lc"))
    release_lc()
    release_be()


def test_ls_shows_an_lc_process_and_the_slices_applied_from_the_moment_it_joins(world):
    rm = Rm(world)
    be_pid, release_be = rm.hold("be", "--priority", "be")
    lc_pid, release_lc = rm.hold("lc", "--priority", "lc")
    lc_live_since(rm, lc_pid)
    be_reaches(rm, be_pid)

    def views():
        return {v["name"]: v for v in json.loads(world.gpuslice("ls", "--json").stdout)["vgpus"]}
    v = wait_for(lambda: (lambda x: x if x["lc"]["devices"][0]["applied_timeslice_us"] else None)(views()),
                 "ls never showed the LC's applied slice")
    assert [p["pid"] for p in v["lc"]["processes"]] == [lc_pid]
    assert v["lc"]["devices"][0]["applied_timeslice_us"] == 5000000
    assert v["be"]["devices"][0]["applied_timeslice_us"] == BESIDE_LC
    assert v["be"]["devices"][0]["timeslice_beside_lc_us"] == BESIDE_LC
    assert v["lc"]["gate_waits"] == 0
    table = world.gpuslice("ls").stdout
    assert "5000000us" in table and "50us" in table, table
    release_lc()
    release_be()


def test_a_slice_the_driver_forgets_is_read_back_and_set_again(world):
    """On an H100 a slice set right after the channel group was made read
    back as the driver's default soon after, and the GPU ran the default: an
    LC beside that BE waited as under stock slices. The fake RM device's
    FAKE_RM_FORGET_FIRST_SET models it; the library must read the slice back
    and set it again, so that the BE ends up running 50 us. (What the H100
    did was libcuda's own SET_TIMESLICE, which the library now rewrites, as
    the other tests here check; the fake's own set is off here, so that the
    read-back is tested on its own.)"""
    rm = Rm(world, FAKE_RM_FORGET_FIRST_SET="1", FAKE_RM_DRIVER_SLICE_US="")
    lc_pid, release_lc = rm.hold("lc", "--priority", "lc")
    lc_live_since(rm, lc_pid)
    be_pid, release_be = rm.hold("be", "--priority", "be")
    first = be_reaches(rm, be_pid)

    def read_back_in_force():
        gets = [us for p, o, us, st, ns in timed_sets(rm.log, "get")
                if p == be_pid and o == COMPUTE_TSG and st == 0 and ns > first]
        return gets if BESIDE_LC in gets else None
    gets = wait_for(read_back_in_force, "the BE's slice was never read back as 50 us after the driver forgot it")
    assert gets[0] == 2048, f"the fake forgot the first set, so the first read-back is the default: {gets}"
    assert len([us for us, ns in compute_sets(rm, be_pid) if us == BESIDE_LC]) >= 2, "set only once"
    release_lc()
    release_be()


def test_three_levels_never_put_two_channel_groups_at_the_tiny_slice(world):
    """critical and high (LC) and a BE on one GPU: the BE runs at the tiny
    slice beside LC, the lower LC level at the floor of a slice beside LC,
    never at the tiny one too. On an H100 a lower LC and a BE both at 50 us
    beside a higher LC made no progress at all (docs/benchmarks.md,
    "Priority levels"); the lower LC got 50 us from the policy, and again as
    a backfiller of the BE's turns."""
    rm = Rm(world)
    top_pid, release_top = rm.hold("top", "--priority", "critical")
    lc_live_since(rm, top_pid)
    be_pid, release_be = rm.hold("be", "--priority", "be")
    be_reaches(rm, be_pid)
    high_pid, release_high = rm.hold("high", "--priority", "high")
    rm.wait_slice(high_pid, 250)  # TimeslicePolicyConfig::be_min_slice_with_lc_us
    # Another vGPU coming and going reschedules the node and moves turns.
    other_pid, release_other = rm.hold("other", "--priority", "be")
    release_other()
    be_reaches(rm, be_pid)
    reached = next(ns for us, ns in compute_sets(rm, high_pid) if us == 250)
    tiny = [(us, ns) for us, ns in compute_sets(rm, high_pid) if ns >= reached and us <= BESIDE_LC]
    assert not tiny, f"the lower LC level went to the tiny slice: {compute_sets(rm, high_pid)}"
    assert compute_sets(rm, high_pid)[-1][0] == 250
    release_high()
    release_be()
    release_top()


COPY_TSGS = ("5c000002", "5c000003", "5c000004")  # the fake's copy-engine groups of a first context
DEFAULT_COPY_SLICE = 1024  # FakeRmDevice::kDefaultCopySliceUs, as an H200 reads


def copy_sets(rm, pid):
    """{object: [(us, ns)]} of the successful SETs on pid's copy-engine groups."""
    timeline = {o: [] for o in COPY_TSGS}
    for p, o, us, st, ns in timed_sets(rm.log):
        if p == pid and o in timeline and st == 0:
            timeline[o].append((us, ns))
    return timeline


def copies_reach(rm, pid, us):
    """Waits until every copy group of pid was last set to `us`; returns the
    time of the last of those SETs."""
    def reached():
        timeline = copy_sets(rm, pid)
        if all(t and t[-1][0] == us for t in timeline.values()):
            return max(t[-1][1] for t in timeline.values())
        return None
    return wait_for(reached, f"pid {pid}'s copy groups never all went to {us} us: {copy_sets(rm, pid)}")


def test_an_lcs_copies_are_protected_as_its_kernels_are(world):
    """Copy engines have runlists of their own. On an H200 an LC that copied
    each request's input in and output out, beside a BE streaming copies,
    waited 2.9x its p50 alone, as under stock, while every compute slice was
    as it should be (docs/benchmarks.md, "Copy engines"). So beside a live LC
    a BE's copy groups run the slice beside LC, the LC's run its own slice,
    and a BE that meets no LC keeps the driver's copy slices untouched."""
    rm = Rm(world)
    be_pid, release_be = rm.hold("be", "--priority", "be")
    rm.wait_slice(be_pid, 10000)
    assert copy_sets(rm, be_pid) == {o: [] for o in COPY_TSGS}, "a BE alone has its copy groups touched"
    lc_pid, release_lc = rm.hold("lc", "--priority", "lc")
    lc_live_since(rm, lc_pid)
    reached = copies_reach(rm, be_pid, BESIDE_LC)
    copies_reach(rm, lc_pid, 5000000)
    # Another vGPU coming and going reschedules the node meanwhile.
    other_pid, release_other = rm.hold("other", "--priority", "be")
    release_other()
    before_lc_exit = time.monotonic_ns()
    for o, timeline in copy_sets(rm, be_pid).items():
        bad = [(us, ns) for us, ns in timeline if reached <= ns <= before_lc_exit and us > SEVERAL_BESIDE_LC]
        assert not bad, f"BE copy group {o} over the slice beside LC while the LC lived: {timeline}"
    release_lc()
    # Once the LC has gone, the BE's copy groups get the driver's default back.
    copies_reach(rm, be_pid, DEFAULT_COPY_SLICE)
    release_be()


CO_BUSY_BESIDE_LC = 1000  # timeslice_applier.cc: kCoBusySliceUs


def test_busy_processes_of_one_be_vgpu_beside_an_lc_never_share_the_tiny_slice(world):
    """The slice beside an LC is the tiny one when one BE vGPU shares the GPU
    with the LC. Two busy processes of that vGPU each have channel groups of
    their own, and two busy groups at 50 us do little but switch: on an H200
    two copies of a GPU-bound training in one BE vGPU beside an LC never
    finished their warm-up (docs/benchmarks.md, "Several best-effort
    processes beside an LC"). So while both have work queued their groups
    get the slice two BE vGPUs would get, and the tiny one again once they
    stop."""
    rm = Rm(world, FAKE_KERNEL_US="200")
    lc_pid, release_lc = rm.hold("lc", "--priority", "lc")
    since = lc_live_since(rm, lc_pid)
    go, done = world.path("go"), world.path("done")
    procs = []
    for i in range(2):
        ready, idle = world.path(f"be{i}.ready"), world.path(f"be{i}.idle")
        p = world.start("run", "--name", "be", "--priority", "be", "--", CUDA_APP, "init", "ready", ready, "await", go,
                        "spin", "6", world.path(f"be{i}.runs"), "ready", idle, "await", done, env=rm.env)
        procs.append((p, int(world.wait_for_file(ready)), idle))
    for _, pid, _ in procs:
        be_reaches(rm, pid)  # one BE vGPU beside the LC: the tiny slice while its processes are idle
    open(go, "w").close()
    for _, pid, _ in procs:
        wait_for(lambda: any(us == CO_BUSY_BESIDE_LC for us, ns in compute_sets(rm, pid)),
                 f"two busy processes of one BE vGPU stayed at the tiny slice: {compute_sets(rm, pid)}", timeout=30)
    for _, pid, idle in procs:
        world.wait_for_file(idle, timeout=30)
    for _, pid, _ in procs:
        be_reaches(rm, pid)  # idle again: the tiny slice comes back
        assert_never_longer_while_lc_lives(rm, pid, since, time.monotonic_ns(), limit=CO_BUSY_BESIDE_LC)
    open(done, "w").close()
    for p, _, _ in procs:
        out, err = p.communicate(timeout=30)
        assert p.returncode == 0 and "spin ok" in out, err
    release_lc()


def test_two_be_processes_holding_memory_get_the_co_busy_slice_from_the_lcs_vgpu_until_its_count_is_trusted(world):
    """Work is counted from launches the gate tracks, which begin only once
    an LC makes the BE vGPU paced: processes blocked behind work queued
    before show none. On an H200 two such training processes launched
    nothing for the 6 s of an LC, starving at the tiny slice; and the node
    schedule gives the tiny slice as soon as the LC's vGPU exists, before its
    process has started. So from then until a second after the LC is live,
    two processes of one BE vGPU that hold memory on the GPU get the co-busy
    slice; idle, they go to the tiny slice after that."""
    rm = Rm(world)
    done = world.path("done")
    procs = []
    for i in range(2):  # each holds 1 MiB, and launches nothing
        ready = world.path(f"be{i}.ready")
        p = world.start("run", "--name", "be", "--priority", "be", "--", CUDA_APP, "init", "alloc", "1M", "ready", ready,
                        "await", done, env=rm.env)
        procs.append((p, int(world.wait_for_file(ready))))
    for _, pid in procs:
        rm.wait_slice(pid, 10000)
    # The LC's vGPU exists (the node schedule has given the BE its slice
    # beside an LC), and its process waits before it touches CUDA.
    lc_go, lc_ready, lc_done = world.path("lc.go"), world.path("lc.ready"), world.path("lc.done")
    lc_made = time.monotonic_ns()
    lc = world.start("run", "--name", "lc", "--priority", "lc", "--", CUDA_APP, "await", lc_go, "init", "ready", lc_ready,
                     "await", lc_done, env=rm.env)

    def since_lc_made(pid):
        """The BE's SETs since the LC's vGPU was made, after the lone BE's
        slice (the library sets a new slice again at its first checks)."""
        sets = [us for us, ns in compute_sets(rm, pid) if ns >= lc_made]
        while sets and sets[0] == 10000:
            sets.pop(0)
        return sets

    for _, pid in procs:
        moved = wait_for(lambda: since_lc_made(pid)[:1], f"pid {pid} never left the lone BE's slice: "
                         f"{compute_sets(rm, pid)}")
        assert moved == [CO_BUSY_BESIDE_LC], compute_sets(rm, pid)
    open(lc_go, "w").close()
    lc_pid = int(world.wait_for_file(lc_ready))
    since = lc_live_since(rm, lc_pid)
    for _, pid in procs:
        be_reaches(rm, pid)  # nothing busy once the count is trusted: the tiny slice
        sets = since_lc_made(pid)  # the co-busy slice, then the tiny one (each maybe set again)
        tiny = sets.index(BESIDE_LC)
        assert tiny > 0 and set(sets[:tiny]) == {CO_BUSY_BESIDE_LC} and set(sets[tiny:]) == {BESIDE_LC}, \
            compute_sets(rm, pid)
        assert_never_longer_while_lc_lives(rm, pid, since, time.monotonic_ns(), limit=CO_BUSY_BESIDE_LC)
    open(done, "w").close()
    for p, _ in procs:
        out, err = p.communicate(timeout=30)
        assert p.returncode == 0 and "alloc ok" in out, err
    open(lc_done, "w").close()
    out, err = lc.communicate(timeout=30)
    assert lc.returncode == 0, err


LC_SLICE = 5000000  # policy::TimeslicePolicyConfig::lc_slice_us
SHARED_LC = 2048  # policy::TimeslicePolicyConfig::lc_shared_slice_us (core::kDefaultSharedLcSliceUs)


def test_processes_of_one_lc_vgpu_share_the_gpu_at_the_shared_lc_slice_while_two_are_on_it(world):
    """Each process has its own channel groups, and a busy group at the LC's
    5 s slice keeps the GPU for seconds against another at 5 s: one worker of
    an LC service would wait for the other's whole slice, where stock would
    switch in 2 ms. So while two processes of one LC vGPU have channel groups
    on the GPU, both take the shared LC slice, compute and copy groups alike;
    the one left alone takes the LC slice back; and the BE beside them keeps
    the slice beside LC throughout. The workers hold no memory while this is
    checked: on an H200 a second worker's context creation waited behind the
    first's 5 s slices, before it had allocated anything."""
    rm = Rm(world)

    def worker(i):
        """A process of the LC vGPU that makes a context and waits, holding no
        memory until released; returns (pid, release)."""
        ready, done = world.path(f"lc{i}.ready"), world.path(f"lc{i}.done")
        p = world.start("run", "--name", "lc", "--priority", "lc", "--", CUDA_APP, "init", "ready", ready, "await",
                        done, "alloc", "1M", env=rm.env)

        def release():
            open(done, "w").close()
            out, err = p.communicate(timeout=30)
            assert p.returncode == 0 and "alloc ok" in out, err
        return int(world.wait_for_file(ready)), release

    be_pid, release_be = rm.hold("be", "--priority", "be")
    first, release_first = worker(0)
    lc_live_since(rm, first)
    rm.wait_slice(first, LC_SLICE)
    since = be_reaches(rm, be_pid)
    second, release_second = worker(1)
    for pid in (first, second):
        rm.wait_slice(pid, SHARED_LC)
        copies_reach(rm, pid, SHARED_LC)
    release_second()
    rm.wait_slice(first, LC_SLICE)
    copies_reach(rm, first, LC_SLICE)
    assert_never_longer_while_lc_lives(rm, be_pid, since, time.monotonic_ns())
    release_first()
    release_be()


def test_two_contexts_of_one_process_count_as_two_processes_on_the_gpu(world):
    """A process with two contexts on one GPU has two compute groups there,
    and they hold each other off as two processes' groups would: an LC
    process's both take the shared LC slice, and a BE process's both get at
    least the co-busy slice beside the LC, not the tiny one (two groups at
    50 us starve each other). The board counts a process's work as one, so
    the library counts its groups."""
    rm = Rm(world)

    def two_contexts(name, *flags):
        ready, done = world.path(f"{name}.ready"), world.path(f"{name}.done")
        p = world.start("run", "--name", name, *flags, "--", CUDA_APP, "init", "ctxcreate", "ready", ready, "await",
                        done, env=rm.env)

        def release():
            open(done, "w").close()
            out, err = p.communicate(timeout=30)
            assert p.returncode == 0 and "ctxcreate ok" in out, err
        return int(world.wait_for_file(ready)), release

    def compute_groups(pid):
        """{object: last slice} of pid's two compute groups (the fake RM
        client's first object of each context)."""
        last = {}
        for p, o, us, st, ns in timed_sets(rm.log):
            if p == pid and st == 0 and o in (COMPUTE_TSG, "5c000005"):
                last[o] = us
        return last

    lc_pid, release_lc = two_contexts("lc", "--priority", "lc")
    wait_for(lambda: len(compute_groups(lc_pid)) == 2 and set(compute_groups(lc_pid).values()) == {SHARED_LC},
             f"the LC process's two compute groups never both took {SHARED_LC} us: {timed_sets(rm.log)}")
    be_pid, release_be = two_contexts("be", "--priority", "be")
    wait_for(lambda: len(compute_groups(be_pid)) == 2 and set(compute_groups(be_pid).values()) == {CO_BUSY_BESIDE_LC},
             f"the BE process's two compute groups never both took {CO_BUSY_BESIDE_LC} us: {timed_sets(rm.log)}")
    release_be()
    release_lc()
