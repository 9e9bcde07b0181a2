"""A process's host side: runs a workload generator against the GPU, through
the launch gate when paced, and its compute thread's periodic tick.

Host follows interposer/hooks_launch.cc and pacer.cc: a paced launch asks
the board (TryEnter) and, told to wait, checks again every GATE_POLL_US
(kSleepNs); it goes after MAX_WAIT_US anyway (fail open). An LC process
stamps its launches on the board (lc_activity.cc). The compute thread
(compute_thread.cc, timeslice_applier.cc) ticks every 1 ms while paced and
250 µs while its vGPU holds the turn: it advances the turn and sets its
channel group's slice from its role; a SET_TIMESLICE takes SET_US to land.

Not thread-safe (the simulation's single thread).
"""
from . import board as bd

GATE_POLL_US = 30.0       # pacer.cc kSleepNs
MAX_WAIT_US = 2_000_000.0  # pacer.cc kMaxWaitNs
PACED_TICK_US = 1_000.0   # kPacedTickNs
HOLDER_TICK_US = 250.0    # kHolderTickNs
SET_US = 300.0            # one SET_TIMESLICE: 160-440 µs (docs/gpu-facts.md)


class Host:
    def __init__(self, sim, gpu, tsg, board=None, member=-1, linger_us=0.0):
        self.sim, self.gpu, self.tsg = sim, gpu, tsg
        self.board, self.member, self.linger_us = board, member, linger_us
        self.gate_waits = 0
        self.gate_wait_us = 0.0
        self._gen = None

    def start(self, gen, at=0.0):
        self._gen = gen
        self.sim.at(at, self._resume, None)

    def _resume(self, value):
        gen = self._gen
        while True:
            act = gen.send(value)
            value = None
            op = act[0]
            if op == "now":
                value = self.sim.now
            elif op == "host":
                self.sim.after(act[1], self._resume, None)
                return
            elif op in ("launch", "copy"):
                if op == "launch" and not self._gate(act[1], 0.0):
                    return
                self._submit(act[1])
            elif op == "sync":
                if self.tsg.queue:
                    self.tsg.on_drain.append(lambda: self.sim.after(0.0, self._resume, None))
                    return
            else:
                raise ValueError("unknown host action %r" % (act,))

    def _gate(self, kernel_us, waited):
        b = self.board
        if b is None or self.member < 0:
            return True
        now = self.sim.now
        if b.members[self.member].lc:
            b.note_lc_launch(self.member, self.linger_us, now)
            return True
        if waited >= MAX_WAIT_US or b.try_enter(self.member, now, waited):
            b.note_launch(self.member, now)
            if waited > 0:
                self.gate_wait_us += waited
            return True
        if waited == 0:
            self.gate_waits += 1
        if not b.backfill or b.members[self.member].cap_pct:
            b.note_waiting(self.member, now)
        self.sim.after(GATE_POLL_US, self._retry, kernel_us, waited + GATE_POLL_US)
        return False

    def _retry(self, kernel_us, waited):
        if self._gate(kernel_us, waited):
            self._submit(kernel_us)
            self._resume(None)

    def _submit(self, kernel_us):
        was_idle = not self.tsg.queue
        self.gpu.submit(self.tsg, kernel_us)
        if was_idle and self.board is not None and self.member >= 0:
            b, i = self.board, self.member
            b.note_busy(i, True, self.sim.now)
            self.tsg.on_drain.append(lambda: b.note_busy(i, False, self.sim.now))


class ComputeThread:
    """A best-effort process's periodic tick: the turn and its slice."""

    def __init__(self, sim, gpu, tsg, board, member, slice_for_role):
        self.sim, self.gpu, self.tsg = sim, gpu, tsg
        self.board, self.member = board, member
        self.slice_for_role = slice_for_role  # (holds_turn: bool) -> slice µs
        self.applied = tsg.slice_us
        self.sets = 0

    def start(self, at=0.0):
        self.sim.at(at, self._tick)

    def _tick(self):
        now = self.sim.now
        b = self.board
        b.advance_turn(now)
        holds = b.holder == self.member
        want = self.slice_for_role(holds)
        if want != self.applied:
            self.applied = want
            self.sets += 1
            self.sim.after(SET_US, self.gpu.set_slice, self.tsg, want)
        self.sim.after(HOLDER_TICK_US if holds else PACED_TICK_US, self._tick)


__all__ = ["Host", "ComputeThread", "bd"]
