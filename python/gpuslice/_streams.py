"""One PyTorch CUDA stream per level, for work that shares one process.

Tasks of one process share one CUDA context, so the GPU's timeslices cannot
part them, and kernels issued to one stream run in issue order: an
inference request waited behind the training step queued before it
(docs/benchmarks.md, "The task API's service"). With
``Scheduler(cuda_streams=True)`` each level's tasks run on their own stream,
and latency-critical levels get higher stream priorities than best-effort
ones, so the GPU starts a latency-critical kernel's thread blocks ahead of
best-effort blocks still waiting for SMs (blocks already running finish).

Priorities follow the levels' order: the lowest latency-critical level gets
-1, the next -2, and so on up; best-effort levels get 0, the least. PyTorch
maps a priority beyond the device's range to the nearest one it has.

Ordering is the same as on one stream, for what crosses a task's edges:
- a task sees the GPU work its submitter issued before ``submit`` (an event
  recorded on the submitter's current stream, which the task's stream waits
  for);
- its Future resolves only after its stream has drained, so the results are
  complete when ``result()`` returns. A tensor a task returns belongs to its
  stream's memory pool: code that goes on using it on another stream after
  the task dropped it calls ``tensor.record_stream(stream)``, as for any
  PyTorch side stream.

Thread-safety: ``ready`` and ``run`` may be called from any thread at once.
"""
from __future__ import annotations

import sys
import threading
from typing import Any, Callable, Iterable, Tuple


class LevelStreams:
    """The streams of one scheduler, made on first use per (level, device)."""

    def __init__(self, levels: Iterable[Tuple[str, bool]]) -> None:
        try:
            import torch
        except ImportError as e:
            raise ValueError("cuda_streams=True runs tasks on PyTorch CUDA streams, and PyTorch is not "
                             "importable here: install torch, or leave cuda_streams off") from e
        self._torch = torch
        levels = list(levels)  # highest first
        lc = [name for name, latency_critical in levels if latency_critical]
        self.priority = {name: 0 for name, _ in levels}
        for rank, name in enumerate(lc):
            self.priority[name] = -(len(lc) - rank)
        self._streams: dict[tuple[str, int], Any] = {}
        self._lock = threading.Lock()

    def ready(self) -> Any:
        """On the submitting thread: marks the work it has issued so far."""
        return self._torch.cuda.current_stream().record_event()

    def run(self, level: str, ready: Any, call: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """On a worker: runs ``call`` on ``level``'s stream after ``ready``,
        and returns once that stream has drained."""
        stream = self._stream(level)
        stream.wait_event(ready)
        with self._torch.cuda.stream(stream):
            try:
                return call(*args, **kwargs)
            finally:
                stream.synchronize()

    def _stream(self, level: str) -> Any:
        key = (level, self._torch.cuda.current_device())
        with self._lock:
            stream = self._streams.get(key)
            if stream is None:
                stream = self._torch.cuda.Stream(priority=self.priority[level])
                self._streams[key] = stream
            return stream


def level_streams(levels: Iterable[Tuple[str, bool]]) -> "LevelStreams | None":
    """LevelStreams, or None (and a line on stderr) where PyTorch has no GPU:
    the tasks then run as they would without cuda_streams."""
    streams = LevelStreams(levels)
    if not streams._torch.cuda.is_available():
        print("gpuslice: cuda_streams=True, but PyTorch sees no CUDA device: tasks run on the "
              "default stream", file=sys.stderr)
        return None
    return streams
