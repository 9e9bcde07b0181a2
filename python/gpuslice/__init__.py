"""gpuslice's task API for Python: say which work is latency-critical, submit
it, get a ``concurrent.futures.Future`` back, and read your latencies.

::

    sched = gpuslice.Scheduler()                 # or Scheduler(config="gpuslice.yaml")
    @sched.latency_critical(priority="high", slo_ms=10)
    def infer(x): ...
    @sched.best_effort()
    def train_step(batch): ...
    f = sched.submit(infer, x)                   # a concurrent.futures.Future
    y = f.result(timeout=0.1)
    m = sched.metrics()                          # p50/p99, SLO misses, per level

Submitted work runs on the scheduler's worker threads (C++ threads that take
the GIL to run Python), highest level first. A latency-critical task runs in
a gpuslice request span, so that in a vGPU run with ``gpuslice run --priority
lc`` best-effort work on the same GPU waits while it runs. Outside gpuslice
everything works the same, without gpuslice's holds, and says so once on
stderr. docs/task-api.md is the guide.

Thread-safety: every method may be called from any thread.
"""
from __future__ import annotations

import atexit
import concurrent.futures
import contextlib
import dataclasses
import functools
import os
import weakref
from typing import Any, Callable, Generic, Iterator, Optional, ParamSpec, TypeVar, Union

from . import _gpuslice
from ._streams import LevelStreams, level_streams

__all__ = ["Scheduler", "Task", "LevelMetrics", "request", "hint", "hint_for", "library_loaded"]

P = ParamSpec("P")
R = TypeVar("R")

# Statuses of gpuslice's C API (include/gpuslice/gpuslice.h).
OK: int = _gpuslice.OK
NOT_IN_VGPU: int = _gpuslice.NOT_IN_VGPU
NOT_LATENCY_CRITICAL: int = _gpuslice.NOT_LATENCY_CRITICAL


@dataclasses.dataclass(frozen=True)
class LevelMetrics:
    """One level's tasks since the scheduler started.

    Latency is from ``submit`` to the task's end, queueing included; ``p50_ms``
    and ``p99_ms`` are over the level's last 1024 tasks (0 before any).
    ``slo_pressure`` is the SLO reaction: on when the recent p99 of latency
    over SLO reaches 80%, off below 60%.
    """

    level: str
    latency_critical: bool
    count: int
    failed: int
    slo_misses: int
    queued: int
    p50_ms: float
    p99_ms: float
    slo_ms: float  # the level's configured SLO; 0: none
    slo_pressure: bool


class Task(Generic[P, R]):
    """A function with its task class, made by ``Scheduler.latency_critical``
    or ``Scheduler.best_effort``. Calling it runs the function here and now;
    ``Scheduler.submit(task, ...)`` runs it on a worker, at its level."""

    def __init__(self, fn: Callable[P, R], level: str, latency_critical: bool, slo_ms: float) -> None:
        functools.update_wrapper(self, fn)
        self.__wrapped__: Callable[P, R] = fn
        self.level = level
        self.latency_critical = latency_critical
        self.slo_ms = slo_ms

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R:
        return self.__wrapped__(*args, **kwargs)

    def __repr__(self) -> str:
        kind = "latency_critical" if self.latency_critical else "best_effort"
        return f"<gpuslice.Task {self.__wrapped__!r} {kind} level={self.level!r} slo_ms={self.slo_ms}>"


_live: "weakref.WeakSet[Scheduler]" = weakref.WeakSet()


class Scheduler:
    """Runs tasks on worker threads, level by level.

    ``config`` is a YAML file with a ``levels:`` list (docs/task-api.md);
    without one the levels are ``critical`` and ``high`` (latency-critical),
    ``normal`` and ``low`` (best-effort), and always the built-in ``lc`` and
    ``be``. ``workers`` is the number of worker threads. ``slo_reaction=False``
    keeps measuring SLO pressure but turns its reaction off (docs/task-api.md,
    section 5). ``cuda_streams=True`` runs each level's tasks on its own
    PyTorch CUDA stream, latency-critical levels at higher stream priorities,
    and resolves a task's Future once its stream has drained (gpuslice/_streams.py:
    levels then order GPU work inside one process too). A bad config raises
    ValueError naming the problem.

    ``close()`` (or leaving a ``with`` block, or the interpreter's exit) waits
    for running tasks and cancels queued ones.
    """

    def __init__(self, config: Union[str, os.PathLike[str], None] = None, *, workers: int = 4,
                 slo_reaction: bool = True, cuda_streams: bool = False) -> None:
        self._core = _gpuslice._Scheduler(os.fspath(config) if config is not None else None, workers,
                                          bool(slo_reaction))
        self._streams: Optional[LevelStreams] = None
        if cuda_streams:
            try:
                self._streams = level_streams((name, lc) for name, lc, _ in self._core.levels())
            except ValueError:
                self._core.close()
                raise
        _live.add(self)

    # --- task classes ---------------------------------------------------------

    def latency_critical(self, priority: str = "lc", slo_ms: Optional[float] = None
                         ) -> Callable[[Callable[P, R]], Task[P, R]]:
        """Decorates a latency-critical task: ``priority`` is a latency-critical
        level's name, ``slo_ms`` its SLO (None: the level's from the config)."""
        slo = _slo(slo_ms)
        self._core.check(priority, slo, True)
        return lambda fn: Task(fn, priority, True, slo)

    def best_effort(self, priority: str = "be") -> Callable[[Callable[P, R]], Task[P, R]]:
        """Decorates a best-effort task: ``priority`` is a best-effort level's name."""
        self._core.check(priority, 0.0, False)
        return lambda fn: Task(fn, priority, False, 0.0)

    @property
    def levels(self) -> list[str]:
        """The levels' names, highest first."""
        return [name for name, _, _ in self._core.levels()]

    # --- work -----------------------------------------------------------------

    def submit(self, fn: Callable[P, R], /, *args: P.args, **kwargs: P.kwargs) -> concurrent.futures.Future[R]:
        """Runs ``fn(*args, **kwargs)`` on a worker at ``fn``'s level (a
        function not decorated runs at ``be``). The Future holds its result or
        its exception; cancelling it before it starts keeps it from running."""
        if isinstance(fn, Task):
            level, slo, call = fn.level, fn.slo_ms, fn.__wrapped__
        else:
            level, slo, call = "be", 0.0, fn
        if self._streams is not None:
            call = functools.partial(self._streams.run, level, self._streams.ready(), call)
        future: concurrent.futures.Future[R] = concurrent.futures.Future()
        self._core.submit(level, slo, call, args, kwargs, future)
        return future

    def metrics(self) -> dict[str, LevelMetrics]:
        """Every level's metrics, highest level first."""
        return {m["level"]: LevelMetrics(**m) for m in self._core.metrics()}

    # --- spans and hints --------------------------------------------------------

    def request(self) -> contextlib.AbstractContextManager[int]:
        """A request span around work done on this thread (see ``request``)."""
        return request()

    def hint(self) -> contextlib.AbstractContextManager[int]:
        """A pre-preemption hint while a request is prepared (see ``hint``)."""
        return hint()

    # --- lifetime ---------------------------------------------------------------

    def close(self) -> None:
        """Stops the scheduler: waits for running tasks, cancels queued ones.
        Closing again does nothing; closing from one of its own tasks raises
        RuntimeError (the task would wait for itself)."""
        self._core.close()  # releases the GIL while it waits

    def __enter__(self) -> "Scheduler":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _slo(slo_ms: Optional[float]) -> float:
    if slo_ms is None:
        return 0.0
    if isinstance(slo_ms, bool) or not isinstance(slo_ms, (int, float)) or not slo_ms > 0:
        raise ValueError(f"slo_ms={slo_ms!r}: give a number of milliseconds above 0, or None for the level's SLO")
    return float(slo_ms)


@contextlib.contextmanager
def request() -> Iterator[int]:
    """A gpuslice request span (gpuslice_span_begin/end) around the block, on
    this thread: in a latency-critical vGPU, best-effort vGPUs on the same GPUs
    launch nothing new until it ends, and its time goes into the vGPU's LC
    latency histogram. Yields the begin call's status: OK, or NOT_IN_VGPU
    outside gpuslice (then nothing happens)."""
    status = _gpuslice.span_begin()
    try:
        yield status
    finally:
        _gpuslice.span_end()


@contextlib.contextmanager
def hint() -> Iterator[int]:
    """A pre-preemption hint (gpuslice_hint_begin/end) around the block: say a
    request is coming while it is prepared, so best-effort work drains."""
    status = _gpuslice.hint_begin()
    try:
        yield status
    finally:
        _gpuslice.hint_end()


def hint_for(ms: float) -> int:
    """A hint that lapses by itself after ``ms`` milliseconds (gpuslice_hint)."""
    if isinstance(ms, bool) or not isinstance(ms, (int, float)) or not 0 < ms <= 4_000_000:
        raise ValueError(f"ms={ms!r}: give a number of milliseconds above 0")
    return _gpuslice.hint(max(1, int(ms * 1000)))


def library_loaded() -> bool:
    """Whether gpuslice's library is loaded in this process."""
    return _gpuslice.library_loaded()


@atexit.register
def _close_all() -> None:
    # Worker threads must be done with Python before the interpreter ends:
    # those of live schedulers, and those of schedulers dropped in one of
    # their own tasks, which a thread of their own is stopping.
    for sched in list(_live):
        sched.close()
    _gpuslice._wait_for_stoppers()
