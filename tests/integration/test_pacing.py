"""GPU turns (core/pacing_board.h, interposer/pacer.h) end to end, in CI:
real processes, the real CLI and library, the fake CUDA driver.

Each application launches a kernel back to back (`cuda_app spin`) and writes
down every run of launches. The fake driver's kernels finish at once, so a
run is exactly a turn the board gave the process: the tests check that turns
are exclusive, that shares and caps come out of them, and that a vGPU alone
is not paced at all. CI machines are small and busy, so the margins here are
wider than the board's own unit tests (src/core/pacing_board_test.cc)."""
import json
import os
import subprocess

from conftest import BUILD, CUDA_APP

SECONDS = 2.0


def runs(path):
    with open(path) as f:
        return [tuple(int(x) for x in line.split()) for line in f if line.strip()]


def busy(rs, lo, hi):
    """Nanoseconds of [lo, hi) covered by runs."""
    return sum(max(0, min(e, hi) - max(s, lo)) for s, e, _ in rs)


def overlap(a, b):
    return sum(busy(b, s, e) for s, e, _ in a)


def spin_together(world, specs, env=None):
    """Starts one `gpuslice run` per (name, flags), all spinning from the same
    moment; returns {name: runs}, and {name: gate waits} (the vGPU's ledger
    counter once its spin is over) as result["gate_waits"]."""
    go = world.path("go")
    procs = []
    for name, flags in specs:
        ready, out = world.path(name + ".ready"), world.path(name + ".runs")
        p = world.start("run", "--name", name, *flags, "--", CUDA_APP, "init", "ready", ready, "await", go,
                        "spin", str(SECONDS), out, "gate_waits", env=(env or {}).get(name))
        procs.append((name, p, ready, out))
    for _, _, ready, _ in procs:
        world.wait_for_file(ready)
    open(go, "w").close()
    result, waits = {}, {}
    for name, p, _, out in procs:
        stdout, stderr = p.communicate(timeout=60)
        assert p.returncode == 0 and "spin ok" in stdout, stderr
        result[name] = runs(out)
        waits[name] = int(lines_of(stdout, "gate_waits")[-1][1])
    result["gate_waits"] = waits
    return result


def lines_of(stdout, command):
    return [l.split() for l in stdout.splitlines() if l.split()[:1] == [command]]


def common_window(result):
    spins = [rs for name, rs in result.items() if name != "gate_waits"]
    lo = max(rs[0][0] for rs in spins)
    hi = min(rs[-1][1] for rs in spins)
    assert hi - lo > 1e9, "the applications did not run together for a second"
    return lo, hi


def test_two_vgpus_take_exclusive_turns_in_proportion_to_their_shares(world):
    result = spin_together(world, [("a", ["--compute", "30"]), ("b", ["--compute", "70"])])
    lo, hi = common_window(result)
    a, b = busy(result["a"], lo, hi), busy(result["b"], lo, hi)
    assert overlap(result["a"], result["b"]) < 0.05 * (a + b), "turns must not overlap"
    share_a = 100 * a / (a + b)
    assert 25 <= share_a <= 35, f"a got {share_a:.1f}% of the turns, wanted 30%"
    # Turns, not a launch-by-launch interleaving: about one per 10 ms quantum.
    turns = sum(1 for s, e, _ in result["a"] if lo <= s < hi)
    assert turns < (hi - lo) / 1e6 / 5, f"{turns} turns of a in {(hi - lo) / 1e9:.1f} s"


def test_a_hard_cap_holds_alone(world):
    result = spin_together(world, [("capped", ["--compute-cap", "30"])])
    rs = result["capped"]
    lo, hi = rs[0][0], rs[-1][1]
    used = 100 * busy(rs, lo, hi) / (hi - lo)
    assert 25 <= used <= 35, f"a 30% cap ran {used:.1f}% of the time"


def test_a_vgpu_alone_is_not_paced_whatever_its_share(world):
    result = spin_together(world, [("alone", ["--compute", "30"])])
    assert result["gate_waits"]["alone"] == 0, "the lone vGPU was paced"


def test_latency_critical_work_is_never_held_back(world):
    # The LC never waits at the gate, whatever it does. Its busy launching
    # holds the BE (the automatic hold), for at most one bounded burst.
    result = spin_together(world, [("be", ["--priority", "be"]), ("lc", ["--priority", "lc"])])
    assert result["gate_waits"]["lc"] == 0, "LC waited at the gate"
    assert result["gate_waits"]["be"] > 0, "an LC launching back to back held nothing"
    lo, hi = common_window(result)
    assert busy(result["be"], lo, hi) > 0, "the BE starved"


def test_without_the_automatic_hold_a_lone_be_beside_an_lc_never_waits(world):
    # GPUSLICE_LC_HOLD=off in the LC: nothing holds the BE, which as the only
    # best-effort vGPU always has the turn.
    result = spin_together(world, [("be", ["--priority", "be"]), ("lc", ["--priority", "lc"])],
                           env={"lc": {"GPUSLICE_LC_HOLD": "off"}})
    assert result["gate_waits"] == {"be": 0, "lc": 0}


def test_an_lc_request_span_holds_best_effort_launches_and_is_timed(world):
    go = world.path("go")
    be_ready, be_runs = world.path("be.ready"), world.path("be.runs")
    be = world.start("run", "--name", "be", "--priority", "be", "--", CUDA_APP, "init", "ready", be_ready,
                     "await", go, "spin", "1.5", be_runs)
    lc_ready = world.path("lc.ready")
    lc = world.start("run", "--name", "lc", "--priority", "lc", "--", CUDA_APP, "init", "ready", lc_ready,
                     "await", go, "sleep", "400", "span_begin", "sleep", "150", "span_end", "span_end",
                     "ready", world.path("lc.done"), "await", world.path("lc.release"))
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
    out, err = be.communicate(timeout=60)
    assert be.returncode == 0 and "spin ok" in out, err
    rs = runs(be_runs)
    gaps = [rs[i + 1][0] - rs[i][1] for i in range(len(rs) - 1)]
    assert max(gaps) > 120e6, f"BE kept launching through the LC's 150 ms span (longest gap {max(gaps) / 1e6:.1f} ms)"
    assert max(gaps) < 400e6


def test_the_task_api_outside_a_vgpu_does_nothing(world):
    # The library loaded, but in no vGPU: every call says so and does nothing.
    env = {k: v for k, v in os.environ.items() if not k.startswith("GPUSLICE_")}
    env["LD_PRELOAD"] = os.path.join(BUILD, "lib", "libgpuslice-cuda.so")
    p = subprocess.run([CUDA_APP, "span_begin", "span_end", "hint_begin", "hint_end"], capture_output=True,
                       text=True, timeout=30, env=env)
    assert p.returncode == 0, p.stderr
    for call in ("span_begin", "span_end", "hint_begin", "hint_end"):
        assert f"{call} 1" in p.stdout, p.stdout  # GPUSLICE_NOT_IN_VGPU
