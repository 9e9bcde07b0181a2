"""One GPU, a set of tenants, a policy: simulate and measure.

The policy's slices follow src/policy/timeslice_policy.cc and the board's
roles (src/core/pacing_board.h, "Backfill turns"); `stock` is the driver's
default time-slicing with no gpuslice at all.

Not thread-safe; each call builds and runs its own simulation.
"""
import random
from dataclasses import dataclass, field

from . import board as bd
from .host import ComputeThread, Host
from .sim import Gpu, Sim, Tsg
from .workloads import learn_linger, percentile

DEFAULT_SLICE_US = 2048.0   # a compute TSG's default (docs/gpu-facts.md)
LC_SLICE_US = 5_000_000.0   # the policy's LC slice beside BE
BE_ONLY_PERIOD_US = 10_000.0
BE_ONLY_MIN_US = 1_000.0
BESIDE_LC_PERIOD_US = 2_000.0
BESIDE_LC_MIN_US = 250.0


@dataclass
class GpuParams:
    """The switch costs (µs): preempting a TSG that has work, and loading
    one when the outgoing TSG (or the GPU) is idle (docs/plan.md)."""
    preempt_us: float = 175.0
    load_us: float = 175.0


@dataclass
class Policy:
    name: str
    gpuslice: bool
    backfill: bool = True       # PacingConfig::backfill (GPUSLICE_TURNS)
    auto_hold: bool = True      # GPUSLICE_LC_HOLD=auto
    beside_lc_us: float = bd.BACKFILL_SLICE_US  # a BE's slice beside an LC, as the GPU runs it
    default_slice_us: float = DEFAULT_SLICE_US
    backfill_slice_us: float = bd.BACKFILL_SLICE_US  # kBackfillSliceUs
    min_quantum_us: float = bd.MIN_QUANTUM_US        # a capped vGPU's shortest turn


STOCK = Policy("stock", gpuslice=False)
# This build's policy (matrix.py's RUN2 is the build of run 2).
GPUSLICE = Policy("gpuslice", gpuslice=True)


@dataclass
class Tenant:
    name: str
    model: object          # workloads.LcModel or workloads.BeModel
    lc: bool = False
    weight: int = 100      # --compute
    cap_pct: int = 0       # --compute-cap


@dataclass
class Outcome:
    latencies: dict = field(default_factory=dict)   # LC tenant -> [µs]
    steps_per_s: dict = field(default_factory=dict)  # BE tenant -> steps/s
    gate_waits: dict = field(default_factory=dict)   # tenant -> launches that waited at the gate
    switches: int = 0
    switch_us: float = 0.0
    seconds: float = 0.0

    def p(self, name, q):
        return percentile(self.latencies[name], q)


def _be_only_slices(tenants):
    """BE-only policy: a 10 ms period split by share, each at least 1 ms."""
    total = sum(t.weight for t in tenants) or 1
    return {t.name: max(BE_ONLY_MIN_US, BE_ONLY_PERIOD_US * t.weight / total) for t in tenants}


def simulate(tenants, policy, gpu_params=None, seconds=5.0, warmup=0.5, seed=1):
    """Runs the tenants together for warmup + seconds of simulated time."""
    gp = gpu_params or GpuParams()
    rng = random.Random(seed)
    sim = Sim()
    gpu = Gpu(sim, gp.preempt_us, gp.load_us)
    lcs = [t for t in tenants if t.lc]
    bes = [t for t in tenants if not t.lc]
    t0, t1 = warmup * 1e6, (warmup + seconds) * 1e6
    out = Outcome(seconds=seconds)
    hosts = {}

    board = None
    if policy.gpuslice and (len(tenants) > 1 or any(t.cap_pct for t in tenants)):
        board = bd.Board(backfill=policy.backfill, min_quantum_us=policy.min_quantum_us)
    be_only = _be_only_slices(bes) if bes else {}
    if lcs and len(bes) > 1:
        total = sum(t.weight for t in bes)
        beside = {t.name: max(BESIDE_LC_MIN_US, BESIDE_LC_PERIOD_US * t.weight / total) for t in bes}
    else:
        beside = {t.name: policy.beside_lc_us for t in bes}

    for t in tenants:
        if not policy.gpuslice:
            slice_us = policy.default_slice_us
        elif t.lc:
            # one LC beside BE: 5 s; several LCs: the default each, so that
            # no LC holds another off for seconds (timeslice_policy.cc)
            slice_us = LC_SLICE_US if bes and len(lcs) == 1 else policy.default_slice_us
        else:
            slice_us = min(be_only[t.name], beside[t.name]) if lcs else be_only[t.name]
        tsg = gpu.add(Tsg(t.name, slice_us))
        member, linger = -1, 0.0
        if board is not None:
            member = board.join(bd.Member(weight=t.weight, cap_pct=t.cap_pct, lc=t.lc))
            if t.lc and policy.auto_hold:
                linger = _linger(t.model, random.Random(seed + 7))
        host = Host(sim, gpu, tsg, board, member, linger)
        if t.lc:
            lat = out.latencies.setdefault(t.name, [])
            gen = t.model.run(random.Random(rng.random()),
                              lambda l, s, lat=lat: lat.append(l) if t0 <= s < t1 else None)
        else:
            ends = out.steps_per_s.setdefault(t.name, [])
            gen = t.model.run(random.Random(rng.random()),
                              lambda now, ends=ends: ends.append(now) if t0 <= now < t1 else None)
        host.start(gen, at=rng.random() * 100.0)
        hosts[t.name] = host
        if board is not None and not t.lc:
            ComputeThread(sim, gpu, tsg, board, member,
                          _role_slices(policy, t, bool(lcs), be_only, beside), host).start(at=rng.random() * 1000.0)

    sim.run(t1)
    out.steps_per_s = {k: _rate(v, seconds) for k, v in out.steps_per_s.items()}
    out.gate_waits = {k: h.gate_waits for k, h in hosts.items()}
    out.switches, out.switch_us = gpu.switches, gpu.switch_us
    return out


def _rate(ends, seconds):
    """Steps per second from the step ends in the window: between the first
    and the last end (a count over the window would be off by up to a step,
    6% of a 16 steps/s training in one second)."""
    if len(ends) < 2:
        return len(ends) / seconds
    return (len(ends) - 1) / ((ends[-1] - ends[0]) / 1e6)


def _role_slices(policy, tenant, lc_live, be_only, beside):
    """The slice a BE process sets from its role (timeslice_applier.cc):
    under backfill turns the holder's long slice, a backfiller's short one;
    a capped vGPU keeps the policy's; with an LC live, never above the
    slice beside LC."""
    def slice_for(holds):
        if policy.backfill and not tenant.cap_pct:
            s = bd.HOLDER_SLICE_US if holds else policy.backfill_slice_us
        else:
            s = be_only[tenant.name]
        return min(s, beside[tenant.name]) if lc_live else s
    return slice_for


def _linger(model, rng):
    return learn_linger(model.intra_gaps(rng))
