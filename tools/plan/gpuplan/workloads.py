"""Workload models: latency histograms, LC request streams, BE trainings.

A workload is a generator of host actions run by a Host (host.py):
  ("host", us)       the host thread works (or sleeps) for us
  ("launch", us)     a kernel of us GPU time, through the gate if paced
  ("copy", us)       device work submitted without the gate (cuMemcpyAsync
                     is not a launch hook; docs/benchmarks.md, run 1 shares)
  ("sync",)          wait until this process's queue has drained
  ("now",)           the generator is sent the current time
and it reports what it measured through the callbacks it was given.

Not thread-safe; every random draw comes from the random.Random passed in.
"""
import math
from dataclasses import dataclass, field


class Quantiles:
    """A distribution given by percentiles, piecewise linear between them
    (how a measured latency histogram is read: p50, p90, p99, max)."""

    def __init__(self, points):
        pts = sorted((float(p), float(v)) for p, v in points)
        if not pts or pts[0][0] != 0.0 or pts[-1][0] != 1.0:
            raise ValueError("Quantiles needs points at probability 0 and 1 (e.g. min and max); got %r" % (pts,))
        for (_, a), (_, b) in zip(pts, pts[1:]):
            if b < a:
                raise ValueError("Quantiles: values must not fall as the probability rises: %r" % (pts,))
        self.points = pts

    def __eq__(self, other):
        return isinstance(other, Quantiles) and self.points == other.points

    def __repr__(self):
        return "Quantiles(%r)" % (self.points,)

    @classmethod
    def from_percentiles(cls, p50, p99, p90=None, pmax=None, pmin=None):
        p90 = p90 if p90 is not None else p50 + 0.6 * (p99 - p50)
        pmax = pmax if pmax is not None else p99 + (p99 - p90)
        pmin = pmin if pmin is not None else max(0.0, p50 - (p90 - p50))
        return cls([(0.0, min(pmin, p50)), (0.5, p50), (0.9, max(p90, p50)), (0.99, max(p99, p90)),
                    (1.0, max(pmax, p99))])

    @classmethod
    def constant(cls, v):
        return cls([(0.0, v), (1.0, v)])

    def at(self, q):
        pts = self.points
        for (p0, v0), (p1, v1) in zip(pts, pts[1:]):
            if q <= p1:
                return v0 if p1 == p0 else v0 + (v1 - v0) * (q - p0) / (p1 - p0)
        return pts[-1][1]

    def sample(self, rng):
        return self.at(rng.random())


def percentile(values, q):
    """The q-th percentile (0..100), linear between order statistics (numpy's default)."""
    if not values:
        return float("nan")
    s = sorted(values)
    pos = (len(s) - 1) * q / 100.0
    lo = math.floor(pos)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


# --- latency-critical ----------------------------------------------------
@dataclass
class LcModel:
    """An open-loop LC: a request every period_us; each request's latency
    alone (submission to completion) is drawn from `alone`; gpu_us of it is
    GPU time in n_kernels equal kernels, the rest host time split into
    n_kernels gaps (one before each launch; exponential weights when
    n_kernels > 1, the irregular gaps of eager PyTorch)."""
    name: str
    period_us: float
    alone: Quantiles
    gpu_us: float
    n_kernels: int = 1
    poisson: bool = False  # arrivals: fixed period (the matrix) or Poisson
    from_arrival: bool = False  # latency from the scheduled arrival (queueing included)
    # A sleeping host thread wakes late by up to Linux's default timer slack
    # (50 µs, prctl(2) PR_SET_TIMERSLACK): arrivals are not a perfect grid.
    wake_slack_us: float = 50.0

    def gaps(self, rng, host_us):
        if self.n_kernels == 1:
            return [host_us]
        w = [rng.expovariate(1.0) for _ in range(self.n_kernels)]
        s = sum(w)
        return [host_us * x / s for x in w]

    def run(self, rng, record):
        """record(latency_us, start_us) for every request completed."""
        k = self.gpu_us / self.n_kernels
        t_next = rng.random() * self.period_us
        while True:
            now = yield ("now",)
            if now < t_next:
                yield ("host", t_next - now + rng.random() * self.wake_slack_us)
                now = yield ("now",)
            # submission (the matrix's p50_us): the arrival, or later when
            # behind; or the arrival itself (arr_p50_us, a queue's response)
            start = t_next if self.from_arrival else now
            host = max(0.0, self.alone.sample(rng) - self.gpu_us)
            for g in self.gaps(rng, host):
                if g > 0:
                    yield ("host", g)
                yield ("launch", k)
            yield ("sync",)
            end = yield ("now",)
            record(end - start, start)
            t_next += rng.expovariate(1.0 / self.period_us) if self.poisson else self.period_us

    def intra_gaps(self, rng, requests=50):
        """Gaps between consecutive launches, for the linger (lc_activity.cc)."""
        gaps = []
        for _ in range(requests):
            host = max(0.0, self.alone.sample(rng) - self.gpu_us)
            gaps.extend(self.gaps(rng, host)[1:])
            gaps.append(self.period_us - host)  # to the next request's first launch
        return gaps


def learn_linger(gaps_us):
    """The automatic hold's linger, as LearnLinger in lc_activity.cc: twice
    the upper bound of the power-of-two bucket holding the 95th percentile of
    gaps under 2048 µs; 500 µs until 16 gaps are seen; clamped to 300..2000."""
    buckets = [0] * 11
    for g in gaps_us:
        if g < 2048:
            b = 0 if g < 1 else int(math.log2(g))
            buckets[min(b, 10)] += 1
    total = sum(buckets)
    if total < 16:
        return 500.0
    below, k = 0, 0
    for k in range(10):
        below += buckets[k]
        if below >= 0.95 * total:
            break
    return float(min(2000, max(300, 2 << (k + 1))))


# --- best-effort -----------------------------------------------------------
@dataclass
class BeModel:
    """A training loop: each step launches kernels (host gap, then launch),
    synchronises, then does host work (tail) before the next step.

    kernels: list of (kind, mean_us) per step, kind "launch" or "copy".
    gap_us: host time before each launch. tail_us: host time after the
    step's synchronisation. jitter: the coefficient of variation of every
    kernel length and host time: 0 exact, 1 exponential (many unlike small
    kernels), between: uniform around the mean. A little jitter matters: a
    fully periodic BE phase-locks with a periodic LC, which no real host
    does."""
    name: str
    kernels: list
    gap_us: float
    tail_us: float
    jitter: float = 0.0
    notes: str = ""
    source: dict = field(default_factory=dict)

    def gpu_us_per_step(self):
        return sum(m for _, m in self.kernels)

    def scaled(self, gpu=1.0, host=1.0):
        return BeModel(self.name, [(k, m * gpu) for k, m in self.kernels], self.gap_us * host,
                       self.tail_us * host, self.jitter, self.notes, dict(self.source))

    def _draw(self, rng, mean):
        cv = self.jitter
        if cv <= 0 or mean <= 0:
            return mean
        if cv >= 1:
            return rng.expovariate(1.0 / mean)
        a = cv * math.sqrt(3.0)  # uniform on mean * [1 - a, 1 + a] has this cv
        return mean * (1.0 + a * (2.0 * rng.random() - 1.0))

    def run(self, rng, record):
        """record(t_us) at every step's end."""
        while True:
            for kind, mean in self.kernels:
                if self.gap_us > 0:
                    yield ("host", self._draw(rng, self.gap_us))
                yield (kind, self._draw(rng, mean))
            yield ("sync",)
            now = yield ("now",)
            record(now)
            if self.tail_us > 0:
                yield ("host", self._draw(rng, self.tail_us))
