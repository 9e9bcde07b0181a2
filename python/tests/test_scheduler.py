"""gpuslice.Scheduler in a process without gpuslice's library: futures resolve,
exceptions propagate, timeouts, levels order the queue, metrics count, bad
input names the problem. No test depends on how long anything takes: gates
(threading.Event) order what happens."""
import concurrent.futures
import os
import subprocess
import sys
import threading
import time

import pytest

import gpuslice

from conftest import BUILD


@pytest.fixture
def sched():
    s = gpuslice.Scheduler()
    yield s
    s.close()


def gated(sched, level="be"):
    """Submits a task that holds its worker until the returned gate is set."""
    started, gate = threading.Event(), threading.Event()

    def hold():
        started.set()
        assert gate.wait(60)
        return "held"

    task = sched.best_effort(level)(hold) if level in ("be", "low", "normal") else \
        sched.latency_critical(level)(hold)
    f = sched.submit(task)
    assert started.wait(60)
    return f, gate


# Issue 12's example, verbatim.
ISSUE_EXAMPLE = """
sched = gpuslice.Scheduler()                 # or Scheduler(config="gpuslice.yaml")
@sched.latency_critical(priority="high", slo_ms=10)
def infer(x): ...
@sched.best_effort()
def train_step(batch): ...
f = sched.submit(infer, x)                   # a concurrent.futures.Future
y = f.result(timeout=0.1)
m = sched.metrics()                          # p50/p99, SLO misses, per level
"""


def test_the_issues_example_runs_verbatim():
    scope = {"gpuslice": gpuslice, "x": 1}
    exec(ISSUE_EXAMPLE, scope)
    try:
        assert isinstance(scope["f"], concurrent.futures.Future)
        assert scope["y"] is None  # what `def infer(x): ...` returns
        assert scope["m"]["high"].count == 1
    finally:
        scope["sched"].close()


def test_decorated_functions_run_at_their_level(sched):
    x = 20

    @sched.latency_critical(priority="high", slo_ms=10)
    def infer(x): return x + 1

    @sched.best_effort()
    def train_step(batch): return sum(batch)

    f = sched.submit(infer, x)
    assert isinstance(f, concurrent.futures.Future)
    assert f.result(timeout=10) == 21
    assert sched.submit(train_step, [1, 2, 3]).result(timeout=10) == 6
    m = sched.metrics()
    assert m["high"].count == 1 and m["be"].count == 1 and m["critical"].count == 0
    assert m["high"].p50_ms > 0 and m["high"].p99_ms >= m["high"].p50_ms
    assert infer(1) == 2, "a decorated function still runs when called"


def test_keyword_arguments_and_undecorated_functions(sched):
    f = sched.submit(lambda a, *, b: a * b, 6, b=7)
    assert f.result(timeout=10) == 42
    assert sched.metrics()["be"].count == 1, "an undecorated function runs at `be`"


def test_exceptions_propagate_with_their_type_and_traceback(sched):
    @sched.latency_critical(priority="critical")
    def bad(x):
        raise KeyError(x)

    f = sched.submit(bad, "missing")
    with pytest.raises(KeyError, match="missing") as info:
        f.result(timeout=10)
    assert any(entry.name == "bad" for entry in info.traceback), "the task's frame is in the traceback"
    m = sched.metrics()["critical"]
    assert m.count == 1 and m.failed == 1


def test_a_timeout_while_the_task_waits(sched):
    held, gate = gated(sched, "high")
    with pytest.raises(concurrent.futures.TimeoutError):
        held.result(timeout=0)
    gate.set()
    assert held.result(timeout=60) == "held"


def test_queued_tasks_start_highest_level_first():
    with gpuslice.Scheduler(workers=1) as sched:
        held, gate = gated(sched, "be")
        order = []
        futures = []
        for level in ("low", "normal", "be", "high", "critical", "lc"):
            task = (sched.latency_critical if level in ("high", "critical", "lc") else sched.best_effort)(level)(
                lambda level=level: order.append(level))
            futures.append(sched.submit(task))
        assert sched.metrics()["low"].queued == 1
        gate.set()
        concurrent.futures.wait(futures, timeout=60)
        assert order == ["critical", "high", "lc", "normal", "low", "be"]


def test_a_cancelled_future_never_runs():
    with gpuslice.Scheduler(workers=1) as sched:
        held, gate = gated(sched)
        ran = []
        f = sched.submit(ran.append, 1)
        assert f.cancel()
        gate.set()
        held.result(timeout=60)
        sched.submit(ran.append, 2).result(timeout=60)
        assert ran == [2]


def test_close_waits_for_running_tasks_and_cancels_queued_ones():
    sched = gpuslice.Scheduler(workers=1)
    held, gate = gated(sched)
    queued = sched.submit(lambda: "never")
    # close() takes the queue, then waits for the held task with the GIL
    # released: the task needs the GIL to return once the gate opens.
    closer = threading.Thread(target=sched.close)
    closer.start()
    while sched.metrics()["be"].queued:
        pass
    gate.set()
    closer.join(60)
    assert not closer.is_alive()
    assert held.result(timeout=0) == "held"
    assert queued.cancelled()
    with pytest.raises(RuntimeError, match="closed"):
        sched.submit(print)


def test_a_task_cannot_close_its_own_scheduler(sched):
    f = sched.submit(sched.close)
    with pytest.raises(RuntimeError, match="own tasks"):
        f.result(timeout=60)
    assert sched.submit(lambda: 1).result(timeout=60) == 1, "the scheduler still runs"


def test_a_scheduler_whose_last_reference_goes_in_its_own_task_stops_cleanly():
    script = """
import threading, gpuslice
def orphan():
    s = gpuslice.Scheduler(workers=1)
    box, gate = [s], threading.Event()
    def task():
        assert gate.wait(60)
        box.pop()  # the scheduler's last reference goes here, on its worker
        return "done"
    return s.submit(task), gate
f, gate = orphan()
gate.set()
print(f.result(60))
"""
    p = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60,
                       env={**os.environ, "PYTHONPATH": os.path.join(BUILD, "python")})
    assert p.returncode == 0 and p.stdout.strip() == "done", p.stderr


def test_slo_misses_count_against_each_tasks_slo(sched):
    gate = threading.Event()

    @sched.latency_critical(priority="high", slo_ms=0.001)  # 1 us: missed while it waits for the gate
    def slow():
        assert gate.wait(60)

    f = sched.submit(slow)
    gate.set()
    f.result(timeout=60)
    m = sched.metrics()["high"]
    assert m.count == 1 and m.slo_misses == 1


@pytest.mark.parametrize("make, message", [
    (lambda s: s.latency_critical(priority="urgent"), "unknown level `urgent`"),
    (lambda s: s.latency_critical(priority="normal"), "best-effort"),
    (lambda s: s.best_effort(priority="high"), "latency-critical"),
    (lambda s: s.latency_critical(priority="high", slo_ms=0), "slo_ms=0"),
    (lambda s: s.latency_critical(priority="high", slo_ms="10"), "slo_ms='10'"),
])
def test_bad_task_classes_name_the_problem(sched, make, message):
    with pytest.raises(ValueError, match=message):
        make(sched)


def test_a_config_gives_the_levels(tmp_path):
    config = tmp_path / "gpuslice.yaml"
    config.write_text("levels:\n  - {name: gold, class: lc, slo_ms: 3}\n  - {name: bronze, class: be}\n")
    with gpuslice.Scheduler(config=config, workers=2) as sched:
        assert sched.levels == ["gold", "lc", "bronze", "be"]
        task = sched.latency_critical(priority="gold")(lambda: 5)
        assert sched.submit(task).result(timeout=60) == 5
        assert sched.metrics()["gold"].slo_ms == 3


def test_a_bad_config_names_the_file_and_the_problem(tmp_path):
    config = tmp_path / "bad.yaml"
    config.write_text("levels:\n  - {name: gold, class: platinum}\n")
    with pytest.raises(ValueError, match=r"bad.yaml: levels\[0\]: class `platinum`"):
        gpuslice.Scheduler(config=config)
    with pytest.raises(ValueError, match="workers"):
        gpuslice.Scheduler(workers=0)


def test_outside_gpuslice_it_says_so_once_and_spans_do_nothing():
    script = """
import gpuslice
a, b = gpuslice.Scheduler(), gpuslice.Scheduler()
t = a.latency_critical(priority="high")(lambda: 1)
assert a.submit(t).result(60) == 1 and b.submit(t).result(60) == 1
with a.request() as status:
    assert status == gpuslice.NOT_IN_VGPU, status
with gpuslice.hint() as status:
    assert status == gpuslice.NOT_IN_VGPU, status
assert gpuslice.hint_for(5) == gpuslice.NOT_IN_VGPU
assert not gpuslice.library_loaded()
print("ok")
"""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GPUSLICE_") and k != "LD_PRELOAD"}
    env["PYTHONPATH"] = os.path.join(BUILD, "python")
    p = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60, env=env)
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == "ok"
    assert p.stderr.count("gpuslice:") == 1, p.stderr
    assert "not loaded" in p.stderr


def test_the_package_is_typed_and_documented():
    assert os.path.exists(os.path.join(os.path.dirname(gpuslice.__file__), "py.typed"))
    for name in ("Scheduler", "Task", "LevelMetrics", "request", "hint", "hint_for"):
        assert getattr(gpuslice, name).__doc__, name
    for name in ("latency_critical", "best_effort", "submit", "metrics", "request", "hint", "close"):
        assert getattr(gpuslice.Scheduler, name).__doc__, name
    assert gpuslice.Scheduler.submit.__annotations__["return"]


@pytest.mark.parametrize("reaction", [True, False])
def test_slo_pressure_is_reported_with_and_without_the_reaction(reaction):
    # Each task sleeps at least 2 ms against a 1 ms SLO: over 80% of it, always.
    with gpuslice.Scheduler(workers=1, slo_reaction=reaction) as sched:
        slow = sched.latency_critical("critical", slo_ms=1)(lambda: time.sleep(0.002))
        for _ in range(25):
            sched.submit(slow).result(timeout=60)
        m = sched.metrics()["critical"]
        assert m.slo_pressure and m.slo_misses == 25
