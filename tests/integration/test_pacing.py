"""GPU turns (core/pacing_board.h, interposer/pacer.h) end to end, in CI:
real processes, the real CLI and library, the fake CUDA driver.

Applications launch kernels back to back (`cuda_app spin`). The tests assert
what the code did, never what the wall clock saw between launches: a CI
machine is small and busy, a process holding the turn is descheduled for
milliseconds at a time, and the time it spends launching says nothing of the
GPU time it was charged. So they read
  - the pacing board's rows (`cuda_app board`): the GPU time the board
    charged each vGPU for its turns, and the turns it gave;
  - the vGPU ledger's gate-wait counter (`cuda_app gate_waits`);
  - the launch counts (`spin ok LAUNCHES`), and the fake driver's record of
    every process's launches (FAKE_GPU_RECORD: how often the GPU changed
    hands, and whether a vGPU's work was queued while another's had yet to
    finish, which needs kernels that take time: FAKE_KERNEL_US).
They hold with two CPU hogs beside them (scripts/ci-under-load.sh). The
board's own unit tests (src/core/pacing_board_test.cc) check shares to the
percent on a fake clock; the margins here are wider."""
import json
import os
import re
import signal
import subprocess
import time

import pytest

from conftest import BUILD, CUDA_APP
from test_compute_rm import COMPUTE_TSG, FAKE_RM, timed_sets

SECONDS = 2.0
BURST_NS = 20_000_000  # PacingConfig::cap_burst_ns: GPU time a capped vGPU may bank
HOLDER_SLICE_US, BACKFILL_SLICE_US = 10_000, 50  # core::kHolderSliceUs, kBackfillSliceUs


def runs(path):
    with open(path) as f:
        return [tuple(int(x) for x in line.split()) for line in f if line.strip()]


def lines_of(stdout, command):
    return [l.split() for l in stdout.splitlines() if l.split()[:1] == [command]]


def run_together(world, specs, env=None, stderr=None):
    """Starts one `gpuslice run --name NAME FLAGS -- cuda_app init ... COMMANDS`
    per (name, flags, commands), all released at the same moment; returns
    {name: stdout} once all have exited (and fills `stderr`, a dict, with
    {name: stderr} if given)."""
    go = world.path("go")
    procs = []
    for name, flags, commands in specs:
        ready = world.path(name + ".ready")
        p = world.start("run", "--name", name, *flags, "--", CUDA_APP, "init", "ready", ready, "await", go,
                        *commands, env=(env or {}).get(name))
        procs.append((name, p, ready))
    for _, _, ready in procs:
        world.wait_for_file(ready)
    open(go, "w").close()
    out = {}
    for name, p, _ in procs:
        stdout, err = p.communicate(timeout=60)
        assert p.returncode == 0 and ("spin ok" in stdout or "bursts ok" in stdout), err
        out[name] = stdout
        if stderr is not None:
            stderr[name] = err
    return out


def spin_together(world, specs, env=None):
    """Each (name, flags) spins SECONDS; returns {name: its gate waits} (the
    vGPU's ledger counter once its spin is over) and {name: its board
    snapshot then} as result["board"]."""
    out = run_together(world, [(name, flags, ["spin", str(SECONDS), world.path(name + ".runs"), "gate_waits",
                                              "board"]) for name, flags in specs], env)
    result = {name: int(lines_of(stdout, "gate_waits")[-1][1]) for name, stdout in out.items()}
    result["board"] = {name: boards(stdout)[-1] for name, stdout in out.items()}
    return result


def boards(stdout):
    """The `board` snapshots cuda_app printed, in order: each {"at": ns,
    "rows": [row]} with row {member, self, weight, cap, charged, turns}."""
    snaps = []
    for w in lines_of(stdout, "board"):
        assert w[1] != "none", "the vGPU is on no pacing board"
        at = int(w[8])
        if not snaps or snaps[-1]["at"] != at:
            snaps.append({"at": at, "rows": []})
        snaps[-1]["rows"].append(dict(member=int(w[2]), self=w[3] == "1", weight=int(w[4]), cap=int(w[5]),
                                      charged=int(w[6]), turns=int(w[7])))
    return snaps


def row(snap, **match):
    found = [r for r in snap["rows"] if all(r[k] == v for k, v in match.items())]
    assert len(found) == 1, f"no single row {match} in {snap}"
    return found[0]


def launches(stdout):
    """LAUNCHES of each `spin ok LAUNCHES`, in order."""
    return [int(w[2]) for w in lines_of(stdout, "spin")]


def gpu_records(stdout):
    """Each `gpu_record` cuda_app printed: the fake GPU's launch record
    (FAKE_GPU_RECORD, tests/fake_driver/launch.h) at that moment."""
    return [dict(launches=int(w[1]), hand_changes=int(w[2]), overlaps=int(w[3])) for w in lines_of(stdout, "gpu_record")]


def spin_beside(world, a_flags, b_flags, env=None, a_env=None):
    """B launches back to back throughout; A warms up, then launches back to
    back for SECONDS between two snapshots of the board and of the fake GPU's
    launch record. Returns A's board snapshots, A's launches between them,
    and what the GPU's record counted between them."""
    env = {**(env or {}), "FAKE_GPU_RECORD": world.path("gpu.record")}
    out = run_together(world, [
        ("b", b_flags, ["spin", str(SECONDS + 1.5), world.path("b.runs")]),
        ("a", a_flags, ["spin", "0.5", world.path("a.warm"), "board", "gpu_record", "spin", str(SECONDS),
                        world.path("a.runs"), "board", "gpu_record"]),
    ], env={"a": {**env, **(a_env or {})}, "b": env})
    first, last = boards(out["a"])
    b_runs = runs(world.path("b.runs"))
    # Ordering only (one boot's CLOCK_MONOTONIC): B's spin began before A's
    # window and ended after it, so both demanded the GPU all through it.
    assert b_runs[0][0] < first["at"] and b_runs[-1][1] > last["at"], "B did not spin all through A's window"
    r0, r1 = gpu_records(out["a"])
    return first, last, launches(out["a"])[1], {k: r1[k] - r0[k] for k in r0}


EXCLUSIVE = {"GPUSLICE_TURNS": "exclusive"}


def share_by_turns(world):
    """The node splits GPUs by turns (`timeslices.best_effort.shares: turns`),
    as a daemon with that config stores it for standalone commands."""
    state = world.env["GPUSLICE_STATE_DIR"]
    os.makedirs(state, exist_ok=True)
    with open(os.path.join(state, "policy"), "w") as f:
        f.write("be_shares turns\n")


def compute_slices_by_pid(log):
    """Every compute-group slice each process set, in order (the fake RM
    device's record)."""
    by_pid = {}
    for pid, obj, us, status, _ in timed_sets(log):
        if obj == COMPUTE_TSG and status == 0:
            by_pid.setdefault(pid, []).append(us)
    return by_pid


def test_two_vgpus_take_exclusive_turns_in_proportion_to_their_shares(world):
    # Kernels of 100 us, 64 queued at most: the holder's work runs on after
    # its launches stop, and the next vGPU may launch only once it is done.
    # (With kernels done the moment they are launched, a vGPU used the GPU
    # only while its process ran on a CPU, and the split followed the CPU
    # scheduler of a loaded machine, not the board: docs/benchmarks.md,
    # "Exclusive turns on a CPU-starved machine".)
    first, last, a_launches, record = spin_beside(world, ["--compute", "30"], ["--compute", "70"],
                                                  env={"FAKE_KERNEL_US": "100", **EXCLUSIVE})
    a0, a1 = row(first, self=True), row(last, self=True)
    b0, b1 = row(first, weight=70), row(last, weight=70)
    charged_a, charged_b = a1["charged"] - a0["charged"], b1["charged"] - b0["charged"]
    share_a = 100 * charged_a / (charged_a + charged_b)
    assert 25 <= share_a <= 35, f"the board charged a {share_a:.1f}% of the GPU time, wanted 30%"
    # The board charged A at least the GPU time its kernels took (less the
    # work of a turn still running at either snapshot).
    gpu_a = a_launches * 100_000
    assert charged_a >= gpu_a - 2 * 64 * 100_000 - 10_000_000, f"charged {charged_a} ns for {gpu_a} ns of kernels"
    # Turns, not a launch-by-launch interleaving: each of A's turns let it
    # launch many kernels, and the GPU changed hands about once a turn.
    turns_a = a1["turns"] - a0["turns"]
    assert 0 < turns_a and a_launches >= 20 * turns_a, f"{a_launches} launches of a in {turns_a} turns"
    turns = turns_a + b1["turns"] - b0["turns"]
    assert record["launches"] >= a_launches
    assert 0 < record["hand_changes"] <= turns + 2, f"the GPU changed hands {record['hand_changes']} times in {turns} turns"
    # Were the hand-over not to wait for the holder's work, nearly every hand
    # change would meet it.
    assert record["overlaps"] == 0, \
        f"{record['overlaps']} of {record['hand_changes']} hand changes met another vGPU's unfinished work"


def test_a_launch_stalled_past_the_gate_still_runs_in_its_vgpus_own_turn(world):
    # Every 50th launch of A stalls 20 ms after the gate let it through and
    # before it reaches the GPU, as a thread of a CPU-starved or throttled
    # container is descheduled there. Meanwhile A's queue drains and its
    # quantum ends with B waiting. Were A marked busy only once the launch
    # returned, the turn would pass to B during the stall, and A's launch
    # would reach the GPU in B's exclusive turn, with B's work queued.
    first, last, a_launches, record = spin_beside(world, ["--compute", "30"], ["--compute", "70"],
                                                  env={"FAKE_KERNEL_US": "100", **EXCLUSIVE},
                                                  a_env={"FAKE_LAUNCH_STALL": "50:20000"})
    assert a_launches >= 100, f"A launched {a_launches} kernels: too few stalls to tell"
    assert record["hand_changes"] > 0
    assert record["overlaps"] == 0, \
        f"{record['overlaps']} of {record['hand_changes']} hand changes met another vGPU's unfinished work"


def test_a_nodes_exclusive_turns_hold_every_tenant_whatever_its_environment(world):
    """A node that asks for exclusive turns (`timeslices.best_effort.turns:
    exclusive`, stored in the state directory's policy file as a daemon
    does) has every best-effort vGPU's launches wait for its own turn. A
    tenant cannot opt out by its environment: one that asks for backfill
    turns would run in the others' exclusive turns. Uncapped vGPUs under the
    default backfill turns never wait (the tests above and below)."""
    state = world.env["GPUSLICE_STATE_DIR"]
    os.makedirs(state, exist_ok=True)
    with open(os.path.join(state, "policy"), "w") as f:
        f.write("be_turns exclusive\n")
    slow = {"FAKE_KERNEL_US": "100"}
    waits = spin_together(world, [("a", ["--compute", "30"]), ("b", ["--compute", "70"])],
                          env={"a": {**slow, "GPUSLICE_TURNS": "backfill"}, "b": slow})
    assert waits["a"] > 0 and waits["b"] > 0, f"gate waits {waits}: a vGPU ran outside its turns"


def spin_30_70_recording_slices(world):
    """vGPUs a (30%) and b (70%) spin together, neither waiting at the gate;
    returns a's first and last board snapshots around its window and every
    compute-group slice each of the two processes set."""
    log = world.path("rm.log")
    env = {"LD_PRELOAD": FAKE_RM, "FAKE_RM_LOG": log, "FAKE_KERNEL_US": "100"}
    out = run_together(world, [
        (name, ["--compute", share], ["spin", "0.5", world.path(name + ".warm"), "board", "spin", str(SECONDS),
                                      world.path(name + ".runs"), "board", "gate_waits"])
        for name, share in (("a", "30"), ("b", "70"))], env={"a": env, "b": env})
    for name in ("a", "b"):
        assert int(lines_of(out[name], "gate_waits")[-1][1]) == 0, f"{name} waited at the gate"
    first, last = boards(out["a"])
    by_pid = compute_slices_by_pid(log)
    assert len(by_pid) == 2, by_pid
    return first, last, by_pid


ALONE_SLICE_US = 10000  # the policy's slice of a best-effort vGPU alone on its GPU


def test_shares_by_slices_give_each_vgpu_its_policy_slice_and_no_turn_slice(world):
    """Shares by slices (the node's default): neither uncapped vGPU waits at
    the gate, and each process's compute channel group keeps its vGPU's
    policy slice (30/70 of 10 ms) whoever holds the board's turn: never a
    turn's slice (the fake RM device's record of every SET_TIMESLICE)."""
    first, last, by_pid = spin_30_70_recording_slices(world)
    # Both were paced beside each other: the board gave turns meanwhile.
    assert row(last, weight=30)["turns"] + row(last, weight=70)["turns"] > 2
    # While both vGPUs existed each process set its policy slice and nothing
    # else: 10000 us, a vGPU alone's, may come before the other vGPU joined
    # and after it left (whichever process ends first leaves the other alone;
    # on a loaded machine the survivor is rescheduled before it exits).
    shared = {}
    for pid, slices in by_pid.items():
        core = list(slices)
        while core and core[0] == ALONE_SLICE_US:
            core.pop(0)
        while core and core[-1] == ALONE_SLICE_US:
            core.pop()
        assert core and len(set(core)) == 1, f"pid {pid} set {slices}"
        shared[pid] = core[0]
    assert sorted(shared.values()) == [3000, 7000], by_pid
    for pid, slices in by_pid.items():
        assert BACKFILL_SLICE_US not in slices, f"pid {pid} set {slices}"


def test_backfill_turns_let_both_vgpus_launch_and_give_the_holder_the_long_slice(world):
    """Shares by turns (`shares: turns`): neither uncapped vGPU ever waits at
    the gate, the board still charges turns 30/70, and each process's compute
    channel group follows its vGPU's turn: the holder's slice while it holds
    it, the backfiller's short one otherwise (the fake RM device's record of
    every SET_TIMESLICE)."""
    share_by_turns(world)
    first, last, by_pid = spin_30_70_recording_slices(world)
    charged = {w: row(last, weight=w)["charged"] - row(first, weight=w)["charged"] for w in (30, 70)}
    share_a = 100 * charged[30] / (charged[30] + charged[70])
    assert 25 <= share_a <= 35, f"the board charged a {share_a:.1f}% of the GPU time, wanted 30%"
    assert row(last, weight=30)["turns"] - row(first, weight=30)["turns"] > 2
    # Every compute-group slice either process set once its turns began (the
    # policy's before that): only the two slices of backfill turns, and each
    # process had both (it held and lost turns). Turns begin at the first
    # backfill slice: the policy's slice of a vGPU alone (10000 us) is the
    # holder's too, so it cannot mark the start.
    turn_slices = {HOLDER_SLICE_US, BACKFILL_SLICE_US}
    for pid, slices in by_pid.items():
        paced = slices[slices.index(BACKFILL_SLICE_US):]
        assert set(paced) == turn_slices, f"pid {pid} set {slices}"


def test_backfill_turns_still_make_a_capped_vgpu_wait(world):
    """Shares by turns: a capped vGPU never backfills: its launches outside its
    turns wait, and the uncapped one's never do."""
    share_by_turns(world)
    result = spin_together(world, [("capped", ["--compute-cap", "30"]), ("free", ["--compute", "50"])])
    assert result["capped"] > 0, "the capped vGPU never waited"
    assert result["free"] == 0, "the uncapped one waited"


def test_under_shares_by_slices_an_uncapped_vgpu_backfills_only_in_a_capped_ones_turns(world):
    """Shares by slices, a capped vGPU beside an uncapped one: the capped one
    waits for its turns and keeps its policy slice; the uncapped one never
    waits, and backfills (the short slice) while the capped one holds the
    turn, its policy slice otherwise. Without the backfill, the capped
    vGPU's turns, charged to its cap, would be shared with the other."""
    log = world.path("rm.log")
    env = {"LD_PRELOAD": FAKE_RM, "FAKE_RM_LOG": log, "FAKE_KERNEL_US": "100"}
    out = run_together(world, [
        (name, flags, ["spin", "0.5", world.path(name + ".warm"), "spin", str(SECONDS), world.path(name + ".runs"),
                       "gate_waits"])
        for name, flags in (("capped", ["--compute-cap", "30"]), ("free", ["--compute", "50"]))],
        env={"capped": env, "free": env})
    assert int(lines_of(out["capped"], "gate_waits")[-1][1]) > 0, "the capped vGPU never waited"
    assert int(lines_of(out["free"], "gate_waits")[-1][1]) == 0, "the uncapped one waited"
    by_pid = compute_slices_by_pid(log)
    assert len(by_pid) == 2, by_pid
    # Policy slices: the capped vGPU's share is 100 beside 50 (6666 / 3333 us).
    capped = [s for s in by_pid.values() if 6666 in s]
    free = [s for s in by_pid.values() if 3333 in s]
    assert len(capped) == 1 and len(free) == 1, by_pid
    assert BACKFILL_SLICE_US not in capped[0], f"the capped vGPU backfilled: {capped[0]}"
    # (Started before the capped one had joined, the uncapped one first set
    # the policy's slice of a vGPU alone: the whole 10 ms.)
    since_both = free[0][free[0].index(3333):]
    assert HOLDER_SLICE_US not in since_both, f"a turn's long slice under slices: {free[0]}"
    backfills = free[0].count(BACKFILL_SLICE_US)
    assert backfills >= 2 and 3333 in free[0][free[0].index(BACKFILL_SLICE_US):], \
        f"the uncapped vGPU did not move between backfill and its policy slice: {free[0]}"


def cap_window(world, env=None, priority="be"):
    """A vGPU capped at 30%, alone: its board rows before and after it
    launches back to back for SECONDS, its launches and its gate waits."""
    out = run_together(world, [("capped", ["--priority", priority, "--compute-cap", "30"],
                                ["board", "spin", str(SECONDS), world.path("capped.runs"), "board", "gate_waits"])],
                       env={"capped": env})["capped"]
    first, last = boards(out)
    charged = row(last, self=True)["charged"] - row(first, self=True)["charged"]
    return charged, last["at"] - first["at"], launches(out)[0], int(lines_of(out, "gate_waits")[-1][1])


@pytest.mark.parametrize("priority", ["be", "lc"])
def test_a_hard_cap_holds_alone(world, priority):
    # Latency-critical too: its cap bounds its GPU time as a best-effort
    # one's does (it was not paced at all, and ran at 100%).
    charged, window, _, waits = cap_window(world, priority=priority)
    # At most 30% of the window, plus the burst it had banked and one turn's
    # overrun (a turn ends at its holder's drain); the cap, not the CPU,
    # held it back: it waited at the gate, and was not far under the cap.
    assert charged <= 0.30 * window + BURST_NS + 20_000_000, f"charged {100 * charged / window:.1f}% under a 30% cap"
    assert charged >= 0.20 * window, f"charged {100 * charged / window:.1f}% under a 30% cap"
    assert waits > 0, "the cap never made it wait"


def test_a_capped_lc_is_held_to_its_cap_beside_a_be_and_still_holds_it(world):
    """An LC vGPU with --compute-cap 30 beside a BE, both launching back to
    back: the LC waits for its cap's tokens and is charged no more than its
    cap; while it runs, its automatic hold still keeps the BE waiting, and
    the BE gets the turns the LC may not take."""
    out = run_together(world, [
        ("be", ["--priority", "be"], ["spin", str(SECONDS + 1.0), world.path("be.runs"), "gate_waits", "board"]),
        ("lc", ["--priority", "lc", "--compute-cap", "30"],
         ["board", "spin", str(SECONDS), world.path("lc.runs"), "board", "gate_waits"]),
    ])
    first, last = boards(out["lc"])
    charged = row(last, self=True)["charged"] - row(first, self=True)["charged"]
    window = last["at"] - first["at"]
    assert 0.15 * window <= charged <= 0.30 * window + BURST_NS + 20_000_000, \
        f"LC charged {100 * charged / window:.1f}% under a 30% cap"
    assert int(lines_of(out["lc"], "gate_waits")[-1][1]) > 0, "the capped LC never waited for its tokens"
    assert int(lines_of(out["be"], "gate_waits")[-1][1]) > 0, "the LC held nothing"
    assert row(boards(out["be"])[-1], self=True)["turns"] > 0, "the BE had no turn"


def test_a_hard_cap_holds_gpu_time_alone(world):
    # With kernels that take 100 us, the GPU time the fake GPU gave the vGPU
    # is its launches times 100 us: the cap bounds that, and the board
    # charged at least that.
    charged, window, launched, waits = cap_window(world, env={"FAKE_KERNEL_US": "100"})
    gpu = launched * 100_000
    # (Its launches count the kernels still queued, at most 64, and the
    # turn that spent the last tokens ran on to its drain.)
    assert gpu <= 0.30 * window + BURST_NS + 64 * 100_000 + 10_000_000, \
        f"{100 * gpu / window:.1f}% of GPU time under a 30% cap"
    assert gpu >= 0.15 * window, f"{100 * gpu / window:.1f}% of GPU time under a 30% cap"
    # (Less a turn still running at the end: its last token and its queue.)
    assert charged >= gpu - 64 * 100_000 - 10_000_000, f"charged {charged} ns for {gpu} ns of kernels"
    assert waits > 0


def test_a_capped_queue_that_runs_on_for_seconds_is_charged_all_its_gpu_time(world):
    """A capped vGPU queues 48 kernels of 30 ms (1.44 s of GPU work) in one
    turn, then synchronises, twice. Its turn passes at the drain timeout
    (210 ms); the rest runs on, and is charged while it runs, past the
    board's 1 s bound on a run-on nobody vouches for. Its second batch then
    waits for its cap to pay that back (about 3.3 s at 30%), past the gate's
    2 s bound on a wait for others. Before, the run-on was charged only once
    drained, and at most 1 s of it (83% under a 30% cap with 50 ms kernels),
    and then the second batch went ahead at 2 s, outside any turn (36% with
    3.2 s queues)."""
    kernels, kernel_ns = 48, 30_000_000
    batch = [*["kernel"] * kernels, "ctxsync", "board"]
    p = world.start("run", "--name", "capped", "--compute-cap", "30", "--", CUDA_APP, "init", "board", *batch, *batch,
                    env={"FAKE_KERNEL_US": str(kernel_ns // 1000)})
    out, err = p.communicate(timeout=60)
    assert p.returncode == 0 and len(lines_of(out, "kernel")) == 2 * kernels, err
    assert all(w[1] == "ok" for w in lines_of(out, "kernel") + lines_of(out, "ctxsync")), out
    assert "launching anyway" not in err, err
    snaps = boards(out)
    gpu = kernels * kernel_ns
    for first, last in zip(snaps, snaps[1:]):
        charged = row(last, self=True)["charged"] - row(first, self=True)["charged"]
        # (The queue's last moments, between the process's last tick and its
        # drain, may still be uncharged; a late look at the drain charges a
        # little past it.)
        assert 0.8 * gpu <= charged <= 1.25 * gpu, \
            f"charged {charged / 1e6:.0f} ms for {gpu / 1e6:.0f} ms of GPU work: {snaps}"


def test_a_capped_queue_on_a_stream_destroyed_under_it_is_charged_all_its_gpu_time(world):
    """The drain poll asks each stream whether it has run dry
    (event_markers.h). A stream destroyed with work queued must not be asked
    again (its handle is dead: the fake answers CUDA_ERROR_INVALID_HANDLE,
    which a poll counts as done), so its destruction records one last event
    for that work. Without it the turn ended at the destruction and the
    queue ran on uncharged."""
    kernels, kernel_ns = 24, 30_000_000
    batch = ["stream", "0", *["kernelon"] * kernels, "streamdestroy", "ctxsync", "board"]
    p = world.start("run", "--name", "capped", "--compute-cap", "30", "--", CUDA_APP, "init", "board", *batch,
                    env={"FAKE_KERNEL_US": str(kernel_ns // 1000)})
    out, err = p.communicate(timeout=60)
    assert p.returncode == 0 and len(lines_of(out, "kernelon")) == kernels, err
    assert all(w[1] == "ok" for w in lines_of(out, "kernelon") + lines_of(out, "streamdestroy")), out
    first, last = boards(out)
    charged = row(last, self=True)["charged"] - row(first, self=True)["charged"]
    gpu = kernels * kernel_ns
    assert 0.8 * gpu <= charged <= 1.25 * gpu, f"charged {charged / 1e6:.0f} ms for {gpu / 1e6:.0f} ms of GPU work"


def test_a_paced_launch_records_no_event_but_on_a_per_thread_stream(world):
    """A paced launch only counts itself on its stream's marker; the drain
    poll asks the driver whether the stream ran dry. An event recorded after
    every launch cost 188-330 ns of a paced launch on an H200
    (docs/benchmarks.md, "What a paced launch costs"). A per-thread stream
    names the launching thread's own, which the poll cannot ask about, so
    its launches still record."""
    n = 200
    # Paced before anything is counted: on its board, and past a spin.
    p = world.start("run", "--name", "capped", "--compute-cap", "30", "--", CUDA_APP, "init", "board",
                    "spin", "0.3", world.path("warm.runs"), "ctxsync", "calls", "cuEventRecord", "cuStreamQuery",
                    "stream", "0", *["kernel", "kernelon"] * n, "ctxsync", "calls", "cuEventRecord", "cuStreamQuery",
                    *["kernelpt"] * n, "ctxsync", "calls", "cuEventRecord", "gate_waits",
                    env={"FAKE_KERNEL_US": "100"})
    out, err = p.communicate(timeout=60)
    assert p.returncode == 0, err
    assert all(w[1] == "ok" for w in lines_of(out, "kernel") + lines_of(out, "kernelon") + lines_of(out, "kernelpt"))
    calls = [(w[1], int(w[2])) for w in lines_of(out, "calls")]
    names = [name for name, _ in calls]
    assert names == ["cuEventRecord", "cuStreamQuery"] * 2 + ["cuEventRecord"], calls
    records = [count for name, count in calls if name == "cuEventRecord"]
    queries = [count for name, count in calls if name == "cuStreamQuery"]
    assert records[:2] == [0, 0], f"events recorded on the legacy or a created stream: {calls}"
    assert queries[1] > queries[0], "no drain poll asked a stream while the launches were queued"
    assert records[2] - records[1] == n, calls
    assert int(lines_of(out, "gate_waits")[-1][1]) > 0, "the capped vGPU was not paced"


def test_a_vgpu_alone_is_not_paced_whatever_its_share(world):
    result = spin_together(world, [("alone", ["--compute", "30"])])
    assert result["alone"] == 0, "the lone vGPU was paced"


def test_latency_critical_work_is_never_held_back(world):
    # The LC never waits at the gate, whatever it does. Its busy launching
    # holds the BE (the automatic hold), for at most one bounded burst.
    result = spin_together(world, [("be", ["--priority", "be"]), ("lc", ["--priority", "lc"])])
    assert result["lc"] == 0, "LC waited at the gate"
    assert result["be"] > 0, "an LC launching back to back held nothing"
    # When the LC's spin ended, the BE had had turns: it did not starve.
    assert row(result["board"]["lc"], self=False)["turns"] > 0, "the BE starved"


def test_without_the_automatic_hold_a_lone_be_beside_an_lc_never_waits(world):
    # GPUSLICE_LC_HOLD=off in the LC: nothing holds the BE, which as the only
    # best-effort vGPU always has the turn.
    result = spin_together(world, [("be", ["--priority", "be"]), ("lc", ["--priority", "lc"])],
                           env={"lc": {"GPUSLICE_LC_HOLD": "off"}})
    assert (result["be"], result["lc"]) == (0, 0)


def compute_thread_sleeps(pid):
    """How often the process's compute thread has slept so far: the kernel's
    count of its voluntary context switches."""
    for task in os.listdir(f"/proc/{pid}/task"):
        with open(f"/proc/{pid}/task/{task}/comm") as f:
            if f.read().strip() != "gpuslice-tick":  # compute_thread.cc names it
                continue
        with open(f"/proc/{pid}/task/{task}/status") as f:
            return next(int(l.split()[1]) for l in f if l.startswith("voluntary_ctxt_switches:"))
    raise AssertionError(f"process {pid} has no compute thread")


def test_an_idle_process_beside_another_vgpu_lets_its_compute_thread_sleep(world):
    # Each app launches once, so both are on the GPU's board and each is paced
    # beside the other, then idles. An idle paced process ticks as slowly as
    # an unpaced one (20 ms): before, it ticked every millisecond, and 500
    # idle apps took two cores. The window is wall-clock, but only as an upper
    # bound on the sleeps: load can only make the thread sleep less often.
    go = world.path("go")
    procs = []
    for name in ("a", "b"):
        procs.append(world.start("run", "--name", name, "--", CUDA_APP, "init", "ready", world.path(name + ".ready"),
                                 "await", go, "kernel", "ctxsync", "ready", world.path(name + ".idle"),
                                 "await", world.path("done"), "kernel", "ctxsync",
                                 env={"GPUSLICE_LOG": "info"}))
    for name in ("a", "b"):
        world.wait_for_file(world.path(name + ".ready"))
    open(go, "w").close()
    pid = int(world.wait_for_file(world.path("a.idle")))
    world.wait_for_file(world.path("b.idle"))
    before, start = compute_thread_sleeps(pid), time.monotonic()
    time.sleep(1.0)
    slept, seconds = compute_thread_sleeps(pid) - before, time.monotonic() - start
    open(world.path("done"), "w").close()
    for p in procs:
        stdout, stderr = p.communicate(timeout=60)
        assert p.returncode == 0 and stdout.count("kernel ok") == 2, stderr
        assert "GPU turns on on device slot 0" in stderr, "the two vGPUs never paced each other"
    assert slept <= seconds / 0.020 * 1.5 + 5, f"the idle compute thread slept {slept} times in {seconds:.2f} s"


def test_an_idle_capped_lc_lets_its_compute_thread_sleep(world):
    # A capped LC is paced even alone, and holds the turn while nobody else
    # wants it; idle, its thread ticks as a capped best-effort one's does
    # (20 ms), not at the holder's 250 us. Same bound as above.
    pid_file, done = world.path("lc.idle"), world.path("done")
    p = world.start("run", "--name", "lc", "--priority", "lc", "--compute-cap", "30", "--", CUDA_APP, "init",
                    "kernel", "ctxsync", "ready", pid_file, "await", done, "kernel", "ctxsync",
                    env={"GPUSLICE_LOG": "info"})
    pid = int(world.wait_for_file(pid_file))
    before, start = compute_thread_sleeps(pid), time.monotonic()
    time.sleep(1.0)
    slept, seconds = compute_thread_sleeps(pid) - before, time.monotonic() - start
    open(done, "w").close()
    stdout, stderr = p.communicate(timeout=60)
    assert p.returncode == 0 and stdout.count("kernel ok") == 2, stderr
    assert "GPU turns on on device slot 0" in stderr, "the capped LC was not paced"
    assert slept <= seconds / 0.020 * 1.5 + 5, f"the idle compute thread slept {slept} times in {seconds:.2f} s"


def app_pid(run_pid):
    """The command's pid under `gpuslice run` (its only child)."""
    for task in os.listdir(f"/proc/{run_pid}/task"):
        with open(f"/proc/{run_pid}/task/{task}/children") as f:
            kids = f.read().split()
        if kids:
            return int(kids[0])
    raise AssertionError(f"gpuslice run {run_pid} has no child")


def test_a_process_stopped_past_the_member_timeout_joins_again_and_leaves_the_newcomers_row_alone(world):
    # A row nobody heartbeat for a second goes to the next vGPU that joins.
    # A process stopped that long (SIGSTOP, as the audit's `deny` sends) must
    # not, once resumed, write the newcomer's weight into that row and launch
    # as it: it joins again (interposer/pacer.cc, SeatedMember).
    a_ready, b_ready, go_a, go_b = (world.path(n) for n in ("a.ready", "b.ready", "go.a", "go.b"))
    a = world.start("run", "--name", "a", "--compute", "70", "--", CUDA_APP, "init", "board", "ready", a_ready,
                    "await", go_a, "sleep", "100", "board")
    world.wait_for_file(a_ready)
    app = app_pid(a.pid)
    os.kill(app, signal.SIGSTOP)
    try:
        # Not synchronisation: the condition under test is a second without
        # a heartbeat (PacingConfig::member_timeout_ns), however busy the CPU.
        time.sleep(1.5)
        b = world.start("run", "--name", "b", "--compute", "30", "--", CUDA_APP, "init", "board", "ready", b_ready,
                        "await", go_b, "board")
        world.wait_for_file(b_ready)
    finally:
        os.kill(app, signal.SIGCONT)
    open(go_a, "w").close()
    a_out, a_err = a.communicate(timeout=60)
    open(go_b, "w").close()
    b_out, b_err = b.communicate(timeout=60)
    assert a.returncode == 0 and b.returncode == 0, a_err + b_err
    a_first, a_last = boards(a_out)[0], boards(a_out)[-1]
    b_first, b_last = boards(b_out)[0], boards(b_out)[-1]
    taken = row(b_first, self=True)["member"]
    assert taken == row(a_first, self=True)["member"], "the newcomer did not take the stopped process's row"
    mine = row(a_last, self=True)
    assert mine["member"] != taken and mine["weight"] == 70, a_out
    assert row(b_last, self=True)["weight"] == 30, "the resumed process wrote the newcomer's row"


def be_waits_beside_lc_bursts(world, per_burst, gap_us):
    """The BE's gate waits while it spins beside an LC making 300 requests of
    `per_burst` launches, 5 ms apart."""
    out = run_together(world, [
        ("be", ["--priority", "be"], ["spin", str(SECONDS), world.path("be.runs"), "gate_waits"]),
        ("lc", ["--priority", "lc"], ["bursts", "300", str(per_burst), str(gap_us), "5000", "gate_waits"]),
    ])
    assert int(lines_of(out["lc"], "gate_waits")[-1][1]) == 0, "LC waited at the gate"
    return int(lines_of(out["be"], "gate_waits")[-1][1])


def test_an_lc_of_one_launch_per_request_holds_nobody(world):
    # A tiny kernel or a CUDA graph replay per request: the BE work queued
    # before the launch stays queued whatever the BE does next, so holding
    # the BE after the request's only launch costs it and buys the LC
    # nothing (interposer/lc_activity.h).
    assert be_waits_beside_lc_bursts(world, 1, 0) == 0, "a one-launch request held the BE"


def test_an_lc_whose_requests_are_bursts_of_launches_holds_the_be(world):
    assert be_waits_beside_lc_bursts(world, 8, 100) > 0, "an eager-like LC held nothing"


def test_an_lc_tries_its_automatic_hold_on_its_own_requests(world):
    """Whether the automatic hold pays is tried (core/hold_trial.h): the LC
    measures each request from its first launch to the end of the
    synchronisation that ends it, in alternating epochs with the hold on and
    off, and says its verdict. Each request here is 8 kernels of 400 us
    launched 50 us apart: its launches take 0.35 ms, its GPU work 3.2 ms
    (the fake GPU's timeline), so a p50 of 3.2 ms or more was measured to
    the synchronisation's end, not to the last launch."""
    err = {}
    out = run_together(world, [
        ("be", ["--priority", "be"], ["spin", "8", world.path("be.runs"), "gate_waits"]),
        ("lc", ["--priority", "lc"], ["syncbursts", "420", "8", "50", "3000", "gate_waits"]),
    ], env={"lc": {"GPUSLICE_LOG": "info", "FAKE_KERNEL_US": "400"}}, stderr=err)
    assert int(lines_of(out["lc"], "gate_waits")[-1][1]) == 0, "LC waited at the gate"
    verdicts = re.findall(r"automatic hold tried: p50 (\d+) us held, (\d+) us not held \(median ratio ([\d.]+) "
                          r"over (\d+) pairs of epochs\); (holding|not holding)", err["lc"])
    # 2 x 8 epochs of 18 requests: 288 of the 420 (some may straddle an arm).
    assert verdicts, f"no verdict in the LC's log:\n{err['lc'][-3000:]}"
    held, unheld, _, pairs, _ = verdicts[0]
    assert int(pairs) == 8
    assert int(held) >= 3200 and int(unheld) >= 3200, verdicts


@pytest.mark.parametrize("requests", [["bursts", "300", "8", "100", "3000"], ["syncbursts", "420", "1", "0", "3000"]],
                         ids=["no-sync", "one-launch"])
def test_an_lc_whose_requests_are_not_measured_tries_nothing(world, requests):
    # Bursts without a synchronisation (the LC reads its results some other
    # way), or requests of one launch each, which no hold can change (a
    # request's first launch holds nobody): no request is measured, no trial
    # ends, and the hold stays as it was, on.
    err = {}
    out = run_together(world, [
        ("be", ["--priority", "be"], ["spin", str(SECONDS), world.path("be.runs"), "gate_waits"]),
        ("lc", ["--priority", "lc"], [*requests, "gate_waits"]),
    ], env={"lc": {"GPUSLICE_LOG": "info", "FAKE_KERNEL_US": "400"}}, stderr=err)
    assert "automatic hold tried" not in err["lc"]
    if requests[2] != "1":
        assert int(lines_of(out["be"], "gate_waits")[-1][1]) > 0, "the LC held nothing"


def test_an_lc_request_span_holds_best_effort_launches_and_is_timed(world):
    go = world.path("go")
    be_ready = world.path("be.ready")
    be = world.start("run", "--name", "be", "--priority", "be", "--", CUDA_APP, "init", "ready", be_ready,
                     "await", go, "spin", "1.5", world.path("be.runs"), "gate_waits", "hold_budget_spent", "board")
    lc_ready = world.path("lc.ready")
    lc = world.start("run", "--name", "lc", "--priority", "lc", "--", CUDA_APP, "init", "ready", lc_ready,
                     "await", go, "sleep", "400", "span_begin", "board", "sleep", "150", "board", "span_end",
                     "span_end", "ready", world.path("lc.done"), "await", world.path("lc.release"))
    world.wait_for_file(be_ready)
    world.wait_for_file(lc_ready)
    open(go, "w").close()
    world.wait_for_file(world.path("lc.done"), timeout=30)
    # The span's length is in the LC vGPU's latency histogram.
    ls = world.gpuslice("ls", "--json")
    assert ls.returncode == 0, ls.stderr
    lc_view = [v for v in json.loads(ls.stdout)["vgpus"] if v["name"] == "lc"][0]
    assert lc_view["lc_latency"]["requests"] == 1, lc_view
    assert 0.14 <= lc_view["lc_latency"]["sum_seconds"] < 0.5, lc_view
    open(world.path("lc.release"), "w").close()
    out, err = lc.communicate(timeout=60)
    assert lc.returncode == 0, err
    assert "span_begin 0" in out and "span_end 0" in out
    assert "span_end -1" in out, "an unmatched end is an error, not a crash"
    in_span, span_over = boards(out)
    be_out, err = be.communicate(timeout=60)
    assert be.returncode == 0 and "spin ok" in be_out, err
    # The BE takes a new turn every quantum while it launches: none in the
    # span (one may have begun as the span did), and it waited at the gate.
    be_turns = [row(s, self=False)["turns"] for s in (in_span, span_over)]
    assert be_turns[1] <= be_turns[0] + 1, f"BE took turns {be_turns} in the LC's 150 ms span"
    assert int(lines_of(be_out, "gate_waits")[-1][1]) > 0, "the span never made the BE wait"
    # A real LC's 150 ms span is within the BE's hold budget (half a second).
    assert int(lines_of(be_out, "hold_budget_spent")[-1][1]) == 0, "the span spent the BE's hold budget"
    # ... and went on launching after it.
    assert row(boards(be_out)[-1], self=True)["turns"] > be_turns[1] + 1, "BE launched nothing after the span"


def test_the_task_api_outside_a_vgpu_does_nothing(world):
    # The library loaded, but in no vGPU: every call says so and does nothing.
    env = {k: v for k, v in os.environ.items() if not k.startswith("GPUSLICE_")}
    env["LD_PRELOAD"] = os.path.join(BUILD, "lib", "libgpuslice-cuda.so")
    p = subprocess.run([CUDA_APP, "span_begin", "span_end", "hint_begin", "hint_end"], capture_output=True,
                       text=True, timeout=30, env=env)
    assert p.returncode == 0, p.stderr
    for call in ("span_begin", "span_end", "hint_begin", "hint_end"):
        assert f"{call} 1" in p.stdout, p.stdout  # GPUSLICE_NOT_IN_VGPU


def test_a_tenant_forging_latency_critical_rows_holds_nobody(world):
    # A hostile best-effort tenant writes, on its GPU's board, a row for an
    # id no manager made and its own row, both as the highest LC level
    # holding everyone, refreshed every millisecond (issue 11: this held a
    # victim's launches 20-fold). The victim believes rows only as the
    # node's roster says (core/board_roster.h): it never waits.
    out = run_together(world, [
        ("victim", ["--priority", "be"], ["spin", str(SECONDS), world.path("victim.runs"), "gate_waits"]),
        ("attacker", ["--priority", "be"], ["forge_lc", str(SECONDS + 1), "spin", "0.2", world.path("a.runs")]),
    ])
    assert int(lines_of(out["attacker"], "forge_lc")[-1][1]) >= 2, "the attacker wrote no rows"
    assert int(lines_of(out["victim"], "gate_waits")[-1][1]) == 0, "a forged row held the victim"


def test_a_tenant_writing_a_capped_neighbours_tokens_into_debt_holds_it_only_as_its_cap_explains(world):
    # A hostile tenant writes a capped neighbour's tokens on the board (its
    # row's cap_tokens_ns) 11 days into debt, every millisecond. Each of the
    # victim's launches then waited for tokens that never came, up to the
    # gate's last resort of a minute, and its run did not end within this
    # helper's 60 s.
    # Now its waits for its own cap end once they exceed what its cap
    # explains (core/gate_wait_budget.h), and it says so; its launches go on.
    err = {}
    out = run_together(world, [
        ("victim", ["--compute-cap", "50"], ["spin", str(SECONDS + 1), world.path("victim.runs")]),
        ("attacker", [], ["forge_cap_debt", str(SECONDS + 2), "spin", "0.05", world.path("a.runs")]),
    ], stderr=err)
    assert int(lines_of(out["attacker"], "forge_cap_debt")[-1][1]) >= 1, "the attacker found no row to write"
    assert "longer than its share explains" in err["victim"], err["victim"]
    assert launches(out["victim"])[0] >= 100, f"{launches(out['victim'])[0]} launches in {SECONDS + 1} s"


@pytest.mark.parametrize("victim_flags, node_turns", [
    # A capped vGPU waits for turns in either mode (here the default,
    # shares by slices) ...
    (["--compute-cap", "50"], None),
    # ... an uncapped one where the node asks for exclusive turns.
    ([], "exclusive"),
])
def test_a_tenant_holding_the_turn_holds_its_neighbour_only_as_its_share_explains(world, victim_flags, node_turns):
    # A hostile tenant writes itself into the GPU's turn in a loop. Each of
    # the victim's launches then waited for the gate's 2 s fail-open bound,
    # a handful of launches in the run. Now the victim's waits for others'
    # turns end once they exceed what its share of the turns explains (its
    # floor beside the forger, 50%; core/gate_wait_budget.h), and it says
    # so; its launches go on.
    if node_turns:
        state = world.env["GPUSLICE_STATE_DIR"]
        os.makedirs(state, exist_ok=True)
        with open(os.path.join(state, "policy"), "w") as f:
            f.write(f"be_turns {node_turns}\n")
    err = {}
    out = run_together(world, [
        # The first forged wait takes the buffer (about 2 s at the victim's
        # owed 25%) before the budget runs out: 3 s more than that.
        ("victim", victim_flags, ["spin", str(SECONDS + 3), world.path("victim.runs")]),
        # Its first launch gives it a row of its own to write into the turn.
        ("attacker", [], ["spin", "0.05", world.path("a.runs"), "forge_turns", str(SECONDS + 4)]),
    ], stderr=err)
    assert int(lines_of(out["attacker"], "forge_turns")[-1][1]) > 100, "the forger never found its row"
    assert "longer than its share explains" in err["victim"], err["victim"]
    assert launches(out["victim"])[0] >= 100, f"{launches(out['victim'])[0]} launches in {SECONDS + 3} s"


@pytest.mark.parametrize("shares, attacker_flags", [
    # Under turns every non-holder backfills; any tenant may forge the turn.
    ("turns", ["--compute", "40"]),
    # Under slices (the default) only a capped holder's turn makes the others
    # backfill (core::CappedTurnHeldByOther): the forger is capped.
    ("slices", ["--compute", "40", "--compute-cap", "40"]),
])
def test_a_vgpu_starved_of_its_turns_by_a_forger_keeps_the_policy_slice(world, shares, attacker_flags):
    # A hostile tenant keeps the GPU's turn (its own virtual time 0, the turn
    # word rewritten to it in a loop). Its victim, with work queued and
    # never the holder, would backfill at the 50 us slice for good; it finds
    # itself held under half its floor of turns (core/turn_floor.h) and puts
    # its channel group back on the policy's slice (the fake RM device's
    # record of every SET_TIMESLICE).
    if shares == "turns":
        share_by_turns(world)
    log = world.path("rm.log")
    env = {"LD_PRELOAD": FAKE_RM, "FAKE_RM_LOG": log, "FAKE_KERNEL_US": "100"}
    out = run_together(world, [
        # A verdict takes a window of 1000 compute-thread ticks with work
        # queued (about a second; longer on a loaded machine).
        ("victim", ["--compute", "60"], ["spin", "0.5", world.path("victim.warm"), "spin", "7",
                                         world.path("victim.runs")]),
        ("attacker", attacker_flags, ["spin", "0.5", world.path("attacker.warm"), "forge_turns", "8"]),
    ], env={"victim": env, "attacker": env})
    assert int(lines_of(out["attacker"], "forge_turns")[-1][1]) > 100, "the forger never found its row"
    by_pid = compute_slices_by_pid(log)
    # The victim's policy slice is 6000 us (as 30/70 gives 3000/7000); the
    # attacker's is 4000. The victim backfilled in the attacker's turns, and
    # ends on its policy slice, not on the backfill slice the forger keeps
    # it on.
    victims = [s for s in by_pid.values() if 6000 in s]
    assert len(victims) == 1, f"no single process with the victim's policy slice: {by_pid}"
    slices = victims[0]
    assert BACKFILL_SLICE_US in slices, f"the victim never backfilled: {slices}"
    assert slices[-1] == 6000, f"the victim ended on the backfill slice: {slices}"


def test_a_tenant_impersonating_a_listed_lc_vgpu_takes_at_most_the_hold_budget(world):
    # A hostile best-effort tenant writes the holds of a real LC vGPU's row:
    # the roster lists that vGPU as latency-critical, so every process
    # believes the row (board_roster.h cannot stop it). Before the hold
    # budget, each of the victim's launches waited out the gate's 2 s bound,
    # so it waited at the gate about once per launch. Now its launches obey
    # holds for at most half of each second (core/hold_budget.h) and go
    # ahead for the rest: it spends its budget, and launches far more often
    # than it waits.
    out = run_together(world, [
        ("lc", ["--priority", "lc"], ["spin", "0.05", world.path("lc.runs"), "sleep", str(int((SECONDS + 2) * 1000))]),
        ("victim", ["--priority", "be"], ["spin", str(SECONDS), world.path("victim.runs"), "gate_waits",
                                          "hold_budget_spent"]),
        ("attacker", ["--priority", "be"], ["forge_listed_lc", str(SECONDS + 1), "spin", "0.05", world.path("a.runs")]),
    ])
    assert int(lines_of(out["attacker"], "forge_listed_lc")[-1][1]) >= 1, "the attacker found no LC row"
    waits = int(lines_of(out["victim"], "gate_waits")[-1][1])
    assert waits >= 1, "the forged holds held nothing: the test no longer tests the budget"
    assert int(lines_of(out["victim"], "hold_budget_spent")[-1][1]) >= 1, "the victim never spent its hold budget"
    assert launches(out["victim"])[0] >= 50 * waits, f"{launches(out['victim'])[0]} launches, {waits} gate waits"
