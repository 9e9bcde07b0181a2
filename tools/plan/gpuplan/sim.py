"""The event loop and the GPU's timeslice scheduler.

What it models (docs/gpu-facts.md, "What the hardware scheduler does with
slices"): each process has one compute channel group (TSG) with a queue of
kernels run in order. The GPU runs one TSG at a time. The resident TSG runs
until its queue is empty or its slice expires while another TSG has work;
then the GPU switches, round-robin, to the next TSG with work. A lone busy
TSG whose slice ends is not switched out (it starts a new slice). A switch
leaves the GPU doing nothing for its cost:
  - preempt_us, when the outgoing TSG still has work (a running kernel is
    saved at slice expiry and resumed later, nothing is lost);
  - load_us, when the outgoing TSG is idle (its queue ran dry), or the GPU
    was idle with another TSG's context loaded.
Kernels are never preempted except at slice expiry. Copy engines, clocks
and memory-bandwidth interference are not modelled (docs/plan.md, "Limits").

Not thread-safe; one simulation per thread. Times are float µs.
"""
import heapq
import itertools
from collections import deque


class Sim:
    """A discrete-event loop: callbacks ordered by time, ties by insertion."""

    def __init__(self):
        self.now = 0.0
        self._heap = []
        self._seq = itertools.count()

    def at(self, t, fn, *args):
        heapq.heappush(self._heap, (t, next(self._seq), fn, args))

    def after(self, dt, fn, *args):
        self.at(self.now + dt, fn, *args)

    def run(self, until):
        heap = self._heap
        while heap and heap[0][0] <= until:
            t, _, fn, args = heapq.heappop(heap)
            self.now = t
            fn(*args)
        self.now = until


class Tsg:
    """One channel group: a slice and a FIFO of [remaining_us, on_done]."""

    def __init__(self, name, slice_us):
        self.name = name
        self.slice_us = float(slice_us)
        self.queue = deque()
        self.busy_us = 0.0  # GPU time its kernels ran
        self.on_drain = []  # callbacks run once when the queue empties


class Gpu:
    """The timeslice scheduler over a fixed list of TSGs."""

    def __init__(self, sim, preempt_us, load_us):
        self.sim = sim
        self.preempt_us = float(preempt_us)
        self.load_us = float(load_us)
        self.tsgs = []
        self.resident = None
        self.state = "idle"  # idle | run | switch
        self.run_start = 0.0
        self.slice_start = 0.0
        self._token = 0  # invalidates a stale completion or expiry event
        self._expiry_at = None
        self.switches = 0
        self.switch_us = 0.0

    def add(self, tsg):
        self.tsgs.append(tsg)
        return tsg

    # --- the host side -------------------------------------------------
    def submit(self, tsg, kernel_us, on_done=None):
        tsg.queue.append([float(kernel_us), on_done])
        if len(tsg.queue) > 1 and self.resident is tsg:
            return
        if self.state == "idle":
            if self.resident is tsg:
                self._start_run(new_slice=True)
            else:
                self._switch_to(tsg, self.load_us)
        elif self.state == "run" and tsg is not self.resident:
            self._arm_expiry()

    def set_slice(self, tsg, slice_us):
        """A SET_TIMESLICE: the running slice is re-timed from its start."""
        tsg.slice_us = float(slice_us)
        if tsg is self.resident and self.state == "run" and self._expiry_at is not None:
            self._expiry_at = None
            self._arm_expiry()

    # --- the scheduler ---------------------------------------------------
    def _others_runnable(self):
        return any(t.queue for t in self.tsgs if t is not self.resident)

    def _next_runnable(self):
        n = len(self.tsgs)
        start = self.tsgs.index(self.resident) if self.resident in self.tsgs else -1
        for k in range(1, n + 1):
            t = self.tsgs[(start + k) % n]
            if t is not self.resident and t.queue:
                return t
        return None

    def _arm_expiry(self):
        if self._expiry_at is not None:
            return
        s = self.resident.slice_us
        now = self.sim.now
        # A lone TSG renews its slice at every expiry: the one running now
        # ends at the next multiple of the slice since it started running.
        k = int((now - self.slice_start) // s) + 1
        self._expiry_at = self.slice_start + k * s
        self.sim.at(self._expiry_at, self._on_expiry, self._token)

    def _start_run(self, new_slice):
        self.state = "run"
        now = self.sim.now
        if new_slice:
            self.slice_start = now
        self.run_start = now
        self._token += 1
        self._expiry_at = None
        head = self.resident.queue[0]
        self.sim.at(now + head[0], self._on_complete, self._token)
        if self._others_runnable():
            self._arm_expiry()

    def _switch_to(self, tsg, cost):
        self.state = "switch"
        self._token += 1
        self._expiry_at = None
        self.switches += 1
        self.switch_us += cost
        self.sim.after(cost, self._on_switched, tsg, self._token)

    def _on_switched(self, tsg, token):
        if token != self._token:
            return
        self.resident = tsg
        if tsg.queue:
            self._start_run(new_slice=True)
        else:
            self.state = "idle"
            nxt = self._next_runnable()
            if nxt is not None:
                self._switch_to(nxt, self.load_us)

    def _on_complete(self, token):
        if token != self._token:
            return
        tsg = self.resident
        now = self.sim.now
        ran, on_done = tsg.queue.popleft()
        tsg.busy_us += now - self.run_start
        if on_done is not None:
            on_done()
        if tsg.queue:
            self.run_start = now
            head = tsg.queue[0]
            self.sim.at(now + head[0], self._on_complete, self._token)
            return
        drains, tsg.on_drain = tsg.on_drain, []
        for fn in drains:
            fn()
        if tsg.queue:  # a drain callback launched more
            self.run_start = now
            self.sim.at(now + tsg.queue[0][0], self._on_complete, self._token)
            return
        nxt = self._next_runnable()
        if nxt is None:
            self.state = "idle"
            self._token += 1
            self._expiry_at = None
        else:
            self._switch_to(nxt, self.load_us)

    def _on_expiry(self, token):
        if token != self._token:
            return
        self._expiry_at = None
        now = self.sim.now
        nxt = self._next_runnable()
        if nxt is None:
            return  # alone: keeps the GPU; its next expiry is armed when needed
        tsg = self.resident
        head = tsg.queue[0]
        done = now - self.run_start
        head[0] -= done
        tsg.busy_us += done
        self._switch_to(nxt, self.preempt_us)
