"""Scheduler(cuda_streams=True) against a stand-in for PyTorch's CUDA
streams (CI has no PyTorch and no GPU): each level's tasks run on its own
stream, latency-critical levels at higher priorities; a task's stream waits
for what its submitter issued before submit; the Future resolves after the
stream drained. What happened is read from the stand-in's log, in order."""
import contextlib
import sys
import threading
import types

import pytest

import gpuslice


class FakeCuda:
    """torch.cuda's stream calls that gpuslice/_streams.py makes, logged."""

    def __init__(self, available=True):
        self.available = available
        self.device = 0
        self.log = []
        self.lock = threading.Lock()
        self.current = threading.local()
        self.default = self.Stream(priority=0, name="default")
        self.streams = []  # made by gpuslice

    def note(self, *entry):
        with self.lock:
            self.log.append(entry)

    def is_available(self):
        return self.available

    def current_device(self):
        return self.device

    def current_stream(self):
        return getattr(self.current, "stream", None) or self.default

    @contextlib.contextmanager
    def stream(self, s):
        before = getattr(self.current, "stream", None)
        self.current.stream = s
        try:
            yield
        finally:
            self.current.stream = before

    def Stream(self, priority=0, name=None):  # noqa: N802 (torch's name)
        cuda = self

        class Stream:
            def __init__(self):
                self.priority, self.device = priority, cuda.device
                self.name = name or f"s{len(cuda.streams)}"

            def record_event(self):
                event = ("event", self.name, len(cuda.log))
                cuda.note("record", self.name, event)
                return event

            def wait_event(self, event):
                cuda.note("wait", self.name, event)

            def synchronize(self):
                cuda.note("sync", self.name)

        s = Stream()
        if name is None:
            self.streams.append(s)
        return s


@pytest.fixture
def cuda(monkeypatch):
    fake = FakeCuda()
    monkeypatch.setitem(sys.modules, "torch", types.SimpleNamespace(cuda=fake))
    return fake


def test_levels_get_streams_by_priority_and_tasks_run_on_them(cuda):
    with gpuslice.Scheduler(cuda_streams=True) as sched:
        seen = {}
        for level, lc in (("critical", True), ("high", True), ("normal", False), ("low", False)):
            deco = sched.latency_critical(level) if lc else sched.best_effort(level)
            task = deco(lambda level=level: seen.setdefault(level, cuda.current_stream()))
            sched.submit(task).result(timeout=60)
        plain = sched.submit(lambda: cuda.current_stream()).result(timeout=60)  # undecorated: be
    priority = {level: s.priority for level, s in seen.items()}
    # The default levels, highest first: critical, high, the built-in lc,
    # normal, low, the built-in be.
    assert priority == {"critical": -3, "high": -2, "normal": 0, "low": 0}
    assert len({id(s) for s in seen.values()}) == 4  # one stream per level, none the default
    assert all(s is not cuda.default for s in seen.values())
    assert plain.priority == 0 and plain is not cuda.default


def test_a_level_keeps_its_stream_per_device(cuda):
    with gpuslice.Scheduler(cuda_streams=True) as sched:
        task = sched.latency_critical("high")(lambda: cuda.current_stream())
        first = sched.submit(task).result(timeout=60)
        assert sched.submit(task).result(timeout=60) is first
        cuda.device = 1
        other = sched.submit(task).result(timeout=60)
    assert other is not first and other.device == 1 and other.priority == first.priority


def test_a_task_waits_for_its_submitter_and_resolves_after_its_stream_drained(cuda):
    submitter = cuda.Stream(priority=0, name="submitter")
    done = threading.Event()
    with gpuslice.Scheduler(cuda_streams=True) as sched:
        task = sched.latency_critical("high")(lambda: cuda.note("call", cuda.current_stream().name))
        with cuda.stream(submitter):
            future = sched.submit(task)
        future.add_done_callback(lambda f: (cuda.note("resolved"), done.set()))
        future.result(timeout=60)
        assert done.wait(60)
    kinds = [entry[0] for entry in cuda.log]
    assert kinds == ["record", "wait", "call", "sync", "resolved"], cuda.log
    record, wait, call, sync = cuda.log[:4]
    assert record[1] == "submitter"  # the event is on the submitter's stream
    assert wait[2] == record[2]  # the task's stream waited for that event
    assert wait[1] == call[1] == sync[1] != "submitter"  # and ran and drained on its own stream


def test_a_failing_task_still_drains_its_stream(cuda):
    with gpuslice.Scheduler(cuda_streams=True) as sched:
        def fail():
            raise KeyError("boom")
        future = sched.submit(sched.best_effort("low")(fail))
        with pytest.raises(KeyError):
            future.result(timeout=60)
    assert [entry[0] for entry in cuda.log][-1] == "sync"


def test_without_pytorch_cuda_streams_is_a_clear_error(monkeypatch):
    monkeypatch.setitem(sys.modules, "torch", None)  # `import torch` raises ImportError
    with pytest.raises(ValueError, match="install torch, or leave cuda_streams off"):
        gpuslice.Scheduler(cuda_streams=True)


def test_without_a_cuda_device_tasks_run_on_the_default_stream_and_say_so(monkeypatch, capfd):
    fake = FakeCuda(available=False)
    monkeypatch.setitem(sys.modules, "torch", types.SimpleNamespace(cuda=fake))
    with gpuslice.Scheduler(cuda_streams=True) as sched:
        assert sched.submit(lambda: fake.current_stream()).result(timeout=60) is fake.default
    assert "PyTorch sees no CUDA device" in capfd.readouterr().err
    assert fake.streams == [] and fake.log == []
