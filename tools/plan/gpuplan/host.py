"""A process's host side: runs a workload generator against the GPU, through
the launch gate when paced, and its compute thread's periodic tick.

Host follows interposer/hooks_launch.cc and pacer.cc (EnterGate,
AfterLaunch, PollDrain, Tick):
  - a paced launch asks the board (TryEnter) and, told to wait, checks
    again every GATE_POLL_US (kSleepNs), polling its own drain each time;
    it goes after MAX_WAIT_US anyway (fail open). A go is reused for
    DECISION_REUSE_US, and launches are noted on the board at most that
    often;
  - busy is noted at the launch that finds the process idle, but a drain
    only when marker events are polled: at the compute thread's tick or in
    the gate's wait loop. Until then the board sees the process busy (it
    demands, and its turn is charged as used);
  - an LC process stamps its launches on the board (lc_activity.cc);
  - the compute thread (compute_thread.cc, timeslice_applier.cc) ticks
    every 1 ms while paced and 250 µs while its vGPU holds the turn: it
    polls the drain, advances the turn and sets its channel group's slice
    from its role; a SET_TIMESLICE takes SET_US to land.

Not thread-safe (the simulation's single thread).
"""
from . import board as bd

GATE_POLL_US = 30.0       # pacer.cc kSleepNs
MAX_WAIT_US = 2_000_000.0  # pacer.cc kMaxWaitNs
PACED_TICK_US = 1_000.0   # kPacedTickNs
HOLDER_TICK_US = 250.0    # kHolderTickNs
SET_US = 300.0            # one SET_TIMESLICE: 160-440 µs (docs/gpu-facts.md)
DECISION_REUSE_US = 20.0  # kDecisionReuseNs


class Host:
    def __init__(self, sim, gpu, tsg, board=None, member=-1, linger_us=0.0):
        self.sim, self.gpu, self.tsg = sim, gpu, tsg
        self.board, self.member, self.linger_us = board, member, linger_us
        self.gate_waits = 0
        self.gate_wait_us = 0.0
        self._gen = None
        self._go_until = -1.0
        self._launch_noted = -1e18
        self._busy_noted = False  # what the board was told (pacer's work bit)

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
        if waited == 0 and now < self._go_until:
            return True
        if waited >= MAX_WAIT_US or b.try_enter(self.member, now, waited):
            self._go_until = now + DECISION_REUSE_US
            if waited > 0:
                self.gate_wait_us += waited
            return True
        if waited == 0:
            self.gate_waits += 1
        b.note_waiting(self.member, now)
        self.poll_drain()
        self.sim.after(GATE_POLL_US, self._retry, kernel_us, waited + GATE_POLL_US)
        return False

    def poll_drain(self):
        """PollDrain: the board learns of a drain only when someone looks."""
        if self._busy_noted and not self.tsg.queue:
            self._busy_noted = False
            self.board.note_busy(self.member, False, self.sim.now)

    def _retry(self, kernel_us, waited):
        if self._gate(kernel_us, waited):
            self._submit(kernel_us)
            self._resume(None)

    def _submit(self, kernel_us):
        self.gpu.submit(self.tsg, kernel_us)
        b = self.board
        if b is None or self.member < 0 or b.members[self.member].lc:
            return
        now = self.sim.now
        if not self._busy_noted:  # AfterLaunch
            self._busy_noted = True
            b.note_busy(self.member, True, now)
        if now >= self._launch_noted + DECISION_REUSE_US:
            self._launch_noted = now
            b.note_launch(self.member, now)


class ComputeThread:
    """A best-effort process's periodic tick: the turn and its slice."""

    def __init__(self, sim, gpu, tsg, board, member, slice_for_role, host):
        self.sim, self.gpu, self.tsg, self.host = sim, gpu, tsg, host
        self.board, self.member = board, member
        self.slice_for_role = slice_for_role  # (holds_turn: bool) -> slice µs
        self.applied = tsg.slice_us
        self.sets = 0

    def start(self, at=0.0):
        self.sim.at(at, self._tick)

    def _tick(self):
        now = self.sim.now
        b = self.board
        self.host.poll_drain()
        b.advance_turn(now)
        holds = b.holder == self.member
        want = self.slice_for_role(holds)
        if want != self.applied:
            self.applied = want
            self.sets += 1
            self.sim.after(SET_US, self.gpu.set_slice, self.tsg, want)
        self.sim.after(HOLDER_TICK_US if holds else PACED_TICK_US, self._tick)


__all__ = ["Host", "ComputeThread", "bd"]
