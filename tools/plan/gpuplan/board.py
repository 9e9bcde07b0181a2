"""The pacing board's decisions, ported from src/core/pacing_board.cc.

One board per GPU: turns among best-effort members (start-time fair queueing
by virtual time, a 10 ms quantum, idle hand-over, caps as token buckets,
backfill or exclusive turns) and the latency-critical automatic hold. Each
function names the C++ function it follows; times are µs, not ns. Only one
priority level of best-effort members is modelled (no ranks, no level
starvation), and every member is one process, alive for the whole run.
Not ported: a capped member's charge for work that ran on past its turn, and
its earnings during a turn being unbounded by the burst (pacing_board.cc,
Overrun and CapTokens); they matter only for queues longer than a turn.

Not thread-safe; called from the simulation's single thread.
"""
from dataclasses import dataclass, field

# src/core/pacing_board.h, PacingConfig and constants (in µs).
QUANTUM_US = 10_000.0
MIN_QUANTUM_US = 10_000.0
IDLE_HANDOVER_US = 300.0
LONG_IDLE_US = 2_000.0
DEMAND_WINDOW_US = 3_000.0
PREEMPT_LEAD_US = 10_000.0
IDLE_RESET_US = 100_000.0
DRAIN_TIMEOUT_US = 200_000.0
CAP_BURST_US = 20_000.0
HOLDER_SLICE_US = 10_000.0    # kHolderSliceUs
BACKFILL_SLICE_US = 50.0      # kBackfillSliceUs (= kDefaultSliceBesideLcUs)
MAX_LINGER_US = 2_000.0       # kMaxLingerUs
MAX_AUTO_HOLD_US = 100_000.0  # kMaxAutoHoldNs


@dataclass
class Member:
    weight: int = 100
    cap_pct: int = 0
    lc: bool = False
    busy: bool = False
    demand: float = -1e18
    last_launch: float = -1e18
    drained: float = 0.0
    vtime: float = 0.0
    charged: float = 0.0
    cap_tokens: float = CAP_BURST_US
    cap_stamp: float = 0.0
    turns: int = 0
    lc_burst_start: float = -1e18
    lc_linger: float = 0.0


@dataclass
class Board:
    backfill: bool = True
    min_quantum_us: float = MIN_QUANTUM_US
    members: list = field(default_factory=list)
    holder: int = -1
    turn_start: float = 0.0
    vclock: float = 0.0

    def join(self, m):
        m.vtime = self.vclock
        self.members.append(m)
        return len(self.members) - 1

    # --- helpers (anonymous namespace of pacing_board.cc) ----------------
    @staticmethod
    def _scaled(us, weight):
        return us * 100.0 / (weight or 100)

    def _demanding(self, m, now):
        return (not m.lc) and (m.demand + DEMAND_WINDOW_US > now or (self.backfill and m.busy))

    @staticmethod
    def _cap_tokens(m, now):
        if m.cap_pct == 0:
            return float("inf")
        t = m.cap_tokens + max(0.0, now - m.cap_stamp) / 100.0 * m.cap_pct
        return min(t, CAP_BURST_US)

    def _cap_allows_more(self, m, now, used):
        return m.cap_pct == 0 or self._cap_tokens(m, now) - used > 0

    def _cap_allows_turn(self, m, now, pending):  # CapAllowsTurn
        return m.cap_pct == 0 or self._cap_tokens(m, now) - pending >= self.min_quantum_us

    def _charge(self, m, us, now):
        m.charged += us
        m.vtime += self._scaled(us, m.weight)
        if m.cap_pct:
            m.cap_tokens = self._cap_tokens(m, now) - us
            m.cap_stamp = now

    def _other_demand(self, i, now):
        return any(j != i and self._demanding(m, now) for j, m in enumerate(self.members))

    def _outrun(self, i, age, now):  # Outrun
        h = self.members[i]
        v = h.vtime + self._scaled(age, h.weight)
        for j, m in enumerate(self.members):
            if j == i or not self._demanding(m, now) or not self._cap_allows_turn(m, now, 0):
                continue
            if m.vtime + self._scaled(PREEMPT_LEAD_US, h.weight) < v:
                return True
        return False

    @staticmethod
    def _used_since(h, start, now):  # UsedSince
        if h.busy:
            return now - start
        end = min(max(h.drained, h.last_launch), now)
        return max(0.0, end - start)

    def _owed(self, i, age, now):  # Owed
        h = self.members[i]
        v = h.vtime + self._scaled(age, h.weight)
        for j, m in enumerate(self.members):
            if j != i and self._demanding(m, now) and m.vtime <= v:
                return False
        return True

    def _turn_over(self, i, now):  # TurnOver
        age = now - self.turn_start
        return age >= QUANTUM_US or not self._cap_allows_more(self.members[i], now, age) or self._outrun(i, age, now)

    def _best(self, now, extra, holder, pending):  # Best
        best, best_v = -1, None
        n = len(self.members)
        for k in range(1, n + 1):
            i = ((holder if holder >= 0 else -1) + k) % n
            m = self.members[i]
            if i == extra:
                if m.lc:
                    continue
            elif not self._demanding(m, now):
                continue
            p = pending if i == holder else 0.0
            if not self._cap_allows_turn(m, now, p):
                continue
            v = m.vtime + self._scaled(p, m.weight)
            if best < 0 or v < best_v:
                best, best_v = i, v
        return best

    def _switch_turn(self, nxt, charge, now):  # SwitchTurn
        if self.holder >= 0:
            self._charge(self.members[self.holder], charge, now)
        self.holder = nxt
        self.turn_start = now
        if nxt >= 0:
            self.vclock = max(self.vclock, self.members[nxt].vtime)
            self.members[nxt].turns += 1

    # --- the public functions -------------------------------------------
    def advance_turn(self, now):  # AdvanceTurn
        if self.holder < 0:
            nxt = self._best(now, -1, -1, 0.0)
            if nxt >= 0:
                self._switch_turn(nxt, 0.0, now)
            return
        i = self.holder
        h = self.members[i]
        start = self.turn_start
        age = now - start
        drained = not h.busy
        last = max(h.last_launch, start, h.drained)
        idle = drained and (now - last >= LONG_IDLE_US or
                            (now - last >= IDLE_HANDOVER_US and not self._owed(i, age, now)))
        capped_out = not self._cap_allows_more(h, now, age)
        if not idle and not self._turn_over(i, now):
            return
        if not capped_out and not self._other_demand(i, now):
            return
        wait_for_drain = (not self.backfill) or h.cap_pct != 0
        if wait_for_drain and not drained and age < QUANTUM_US + DRAIN_TIMEOUT_US:
            return
        charge = self._used_since(h, start, now)
        active_at = max(h.last_launch, h.drained)
        holder_active = h.busy or now - active_at < LONG_IDLE_US
        nxt = self._best(now, i if holder_active else -1, i, charge)
        self._switch_turn(nxt, charge, now)

    def note_waiting(self, i, now):  # NoteWaiting
        m = self.members[i]
        if max(m.demand, m.last_launch) + IDLE_RESET_US <= now:
            m.vtime = max(m.vtime, self.vclock)
        m.demand = max(m.demand, now)

    def _backfill(self, i, now):  # Backfill
        m = self.members[i]
        if not self.backfill or m.cap_pct != 0:
            return False
        if m.demand + DEMAND_WINDOW_US / 4 <= now:
            self.note_waiting(i, now)
        return True

    def try_enter(self, i, now, waited=0.0):  # TryEnter: True = go
        me = self.members[i]
        if self.launches_held(i, now, waited < MAX_AUTO_HOLD_US):
            return False
        if me.lc:
            return True
        for _ in range(3):
            self.advance_turn(now)
            if self.holder == i:
                age = now - self.turn_start
                if not self._turn_over(i, now):
                    return True
                if not self._cap_allows_more(me, now, age):
                    return False
                if self._other_demand(i, now):
                    return self._backfill(i, now)
                self._switch_turn(i, self._used_since(me, self.turn_start, now), now)
                return True
            if self.holder < 0:
                if self._best(now, i, -1, 0.0) != i:
                    return self._backfill(i, now)
                self._switch_turn(i, 0.0, now)
                return True
            return self._backfill(i, now)
        return self._backfill(i, now)

    def note_launch(self, i, now):
        m = self.members[i]
        m.last_launch = max(m.last_launch, now)

    def note_busy(self, i, busy, now):
        m = self.members[i]
        m.busy = busy
        if not busy:
            m.drained = max(m.drained, now)

    # --- LC automatic hold ----------------------------------------------
    def note_lc_launch(self, i, linger_us, now):  # NoteLcLaunch
        m = self.members[i]
        linger_us = min(linger_us, MAX_LINGER_US)
        if m.last_launch + m.lc_linger < now:
            m.lc_burst_start = now
        m.lc_linger = linger_us
        m.last_launch = max(m.last_launch, now)

    def launches_held(self, i, now, auto_hold=True):  # LaunchesHeld
        if self.members[i].lc:
            return False
        for m in self.members:
            if not m.lc or not auto_hold or m.lc_linger <= 0:
                continue
            if m.last_launch <= now < m.last_launch + m.lc_linger and now - m.lc_burst_start < MAX_AUTO_HOLD_US:
                return True
        return False

    def lc_live(self):
        return any(m.lc for m in self.members)
