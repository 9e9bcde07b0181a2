"""gpuslice.Scheduler inside a vGPU: `gpuslice run` with gpuslice's library and
the fake CUDA driver (tests/fake_driver). A latency-critical task's span
reaches the library: the vGPU's LC latency histogram counts it; every task
reaches the vGPU's task metrics per level."""
import json
import os
import subprocess
import sys
import time

import pytest

from conftest import BUILD

GPUSLICE = os.path.join(BUILD, "bin", "gpuslice")
FAKE_DIR = os.path.join(BUILD, "fake_driver")

SCRIPT = """
import os, sys, time
import gpuslice
ready, release = sys.argv[1], sys.argv[2]
sched = gpuslice.Scheduler(workers=2)
lc = sched.latency_critical(priority="high", slo_ms=50)(lambda: 1)
be = sched.best_effort(priority="low")(lambda: 2)
assert [sched.submit(lc).result(60) for _ in range(3)] == [1, 1, 1]
assert [sched.submit(be).result(60) for _ in range(2)] == [2, 2]
with sched.request() as status:
    print("request", status, flush=True)
print("loaded", gpuslice.library_loaded(), flush=True)
open(ready, "w").close()
while not os.path.exists(release):
    time.sleep(0.01)
"""

pytestmark = pytest.mark.skipif(not os.path.exists(os.path.join(FAKE_DIR, "libcuda.so.1")),
                                reason="the fake driver is not built")


def fake_driver_env(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("LD_PRELOAD", "CUDA_VISIBLE_DEVICES") and
           not k.startswith("GPUSLICE_")}
    env.update({
        "GPUSLICE_STATE_DIR": str(tmp_path / "state"),
        "GPUSLICE_REAL_DRIVER": os.path.join(FAKE_DIR, "libcuda.so.1"),
        "GPUSLICE_REAL_NVML": os.path.join(FAKE_DIR, "libnvidia-ml.so.1"),
        "LD_LIBRARY_PATH": FAKE_DIR,
        "FAKE_GPU_MEMORY": str(1 << 30),
        "PYTHONPATH": os.path.join(BUILD, "python"),
    })
    return env


TASKS_SCRIPT = """
import os, sys, time
import gpuslice
ready, release = sys.argv[1], sys.argv[2]
sched = gpuslice.Scheduler(workers=2)
fast = sched.latency_critical(priority="high", slo_ms=600000)(lambda: 1)
@sched.latency_critical(priority="high", slo_ms=1)
def slow():
    time.sleep(0.02)
@sched.best_effort(priority="low")
def broken():
    raise ValueError("no batch")
assert [sched.submit(fast).result(60) for _ in range(5)] == [1] * 5
sched.submit(slow).result(60)
for _ in range(2):
    assert isinstance(sched.submit(broken).exception(60), ValueError)
open(ready, "w").close()
while not os.path.exists(release):
    time.sleep(0.01)
"""


def run_in_vgpu(tmp_path, priority, script=SCRIPT):
    env = fake_driver_env(tmp_path)
    ready, release = tmp_path / "ready", tmp_path / "release"
    p = subprocess.Popen([GPUSLICE, "run", "--name", "svc", "--priority", priority, "--", sys.executable, "-c",
                          script, str(ready), str(release)], env=env, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while not ready.exists():
            assert p.poll() is None, p.communicate()
            assert time.monotonic() < deadline, "the script never got ready"
            time.sleep(0.01)
        ls = subprocess.run([GPUSLICE, "ls", "--json"], env=env, capture_output=True, text=True, timeout=30)
        assert ls.returncode == 0, ls.stderr
        view = [v for v in json.loads(ls.stdout)["vgpus"] if v["name"] == "svc"][0]
    finally:
        release.touch()
        out, err = p.communicate(timeout=60)
    assert p.returncode == 0, err
    return view, out, err


def test_latency_critical_tasks_are_request_spans_of_an_lc_vgpu(tmp_path):
    view, out, err = run_in_vgpu(tmp_path, "lc")
    assert "loaded True" in out
    assert "request 0" in out, out  # GPUSLICE_OK
    # 3 latency-critical tasks and 1 request; best-effort tasks are no spans.
    assert view["lc_latency"]["requests"] == 4, view
    assert "gpuslice: " not in err, err


def test_in_a_best_effort_vgpu_spans_only_time_and_it_is_said_once(tmp_path):
    view, out, err = run_in_vgpu(tmp_path, "be")
    assert "request 2" in out, out  # GPUSLICE_NOT_LATENCY_CRITICAL
    assert view["lc_latency"]["requests"] == 4, view
    assert err.count("vGPU is best-effort") == 1, err


def test_every_task_reaches_the_vgpus_metrics_under_its_level(tmp_path):
    view, _, err = run_in_vgpu(tmp_path, "lc", TASKS_SCRIPT)
    levels = {t["level"]: t for t in view["task_levels"]}
    assert list(levels) == ["high", "low"], view["task_levels"]
    high, low = levels["high"], levels["low"]
    assert high["latency"]["requests"] == 6 and high["slo_misses"] == 1 and high["failed"] == 0, high
    # The slow task took 20 ms or more: the top bucket is at 10 ms or above.
    assert high["latency"]["p99_seconds"] >= 0.01, high
    assert low["latency"]["requests"] == 2 and low["failed"] == 2 and low["slo_misses"] == 0, low
    assert "gpuslice: " not in err, err


def test_the_torch_service_example_runs_as_two_vgpus(tmp_path):
    # Its structure, with the pure-Python stand-in for PyTorch.
    env = fake_driver_env(tmp_path)
    example = os.path.join(os.path.dirname(__file__), "..", "..", "examples", "python", "torch_service.py")
    common = ["--backend", "python", "--seconds", "0.3", "--warmup", "1"]
    train = subprocess.Popen([GPUSLICE, "run", "--name", "train", "--priority", "be", "--", sys.executable, example,
                              "--mode", "train", *common], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True)
    serve = subprocess.run([GPUSLICE, "run", "--name", "infer", "--priority", "lc", "--", sys.executable, example,
                            "--mode", "serve", "--rate", "50", *common], env=env, capture_output=True, text=True,
                           timeout=120)
    out, err = train.communicate(timeout=120)
    assert serve.returncode == 0 and train.returncode == 0, serve.stderr + err
    served, trained = json.loads(serve.stdout), json.loads(out)
    assert served["in_vgpu_library"] and trained["in_vgpu_library"]
    assert served["requests"] >= 10 and served["failed"] == 0 and served["p99_ms"] > 0, served
    assert trained["train_steps"] > 0, trained
