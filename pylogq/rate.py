"""Rates measured over sampled windows, and the throttle times of quotas (Kafka's ``Rate``,
``SimpleRate``, ``TokenBucket`` and ``QuotaUtils``).

The client quotas and the connection creation rates (:mod:`pylogq.server.quotas`) measure
with :class:`Rate`; the replication throttles
(:mod:`pylogq.cluster.broker.replication_quota`) with :class:`SimpleRate`, as Kafka's
replication quota manager does.

A :class:`Rate` keeps what was recorded in samples of ``window_s`` seconds each, as Kafka's
``SampledStat`` does: a new sample starts at the first record after the current one's
window has passed, at most ``samples + 1`` are kept, and a sample whose last record is
``samples`` windows old no longer counts. The rate is the sum of the samples kept over the
time since the oldest one started, with the whole windows missing from ``samples - 1``
added (Kafka's ``Rate.windowSize``): the first record of a quiet client is spread over the
whole window rather than measured as a burst. With Kafka's default of eleven one-second
windows, a client's rate is its last ten to eleven seconds; with one window (Kafka allows
it), no whole window is added and a rate is measured over the time since its sample
started, at least 1 ms.

A :class:`SimpleRate` keeps its samples as a :class:`Rate` does but measures over the time
since the oldest one started, or one window if that is longer: its first burst counts
whole. A client quota can let a quiet client's first request through; a replication
throttle must not let the first ten seconds' worth of a reassignment go at once.

A quota is an upper bound on a rate. Recording past it yields a throttle time:
``(rate - bound) / bound * window``, the delay after which the rate over the grown window
is back at the bound if nothing more is recorded (:func:`throttle_time_ms`).

A :class:`TokenBucket` (KIP-599's controller mutations) holds up to ``samples * window_s *
rate`` tokens, refilled at the rate; a mutation takes its tokens, and a bucket below zero
is throttled for the time the refill takes to bring it back to zero.

None of the classes is thread-safe: their owners record and measure under their own lock.
"""

from __future__ import annotations

from typing import List

from .errors import InvalidArgumentError

__all__ = ["Rate", "SimpleRate", "TokenBucket", "throttle_time_ms"]


class Rate:
    """A windowed rate (units per second) of the values recorded. Not thread-safe."""

    __slots__ = ("samples", "window_s", "_kept")

    def __init__(self, samples: int = 11, window_s: float = 1.0) -> None:
        if int(samples) < 1:
            raise InvalidArgumentError("a rate's samples must be at least 1, not %r" % (samples,))
        #: How many windows are measured over (Kafka's MetricConfig.samples, at least one).
        self.samples = int(samples)
        self.window_s = float(window_s)
        #: [start, last record, total] of the samples not yet expired, oldest first.
        self._kept: List[List[float]] = []

    def record(self, value: float, now: float) -> None:
        """Add ``value`` at time ``now`` (seconds on a monotonic clock); a negative value takes
        back what was recorded (Kafka's unrecord of a throttled fetch)."""
        kept = self._kept
        if kept and now - kept[-1][0] < self.window_s:
            sample = kept[-1]
            sample[1] = now
            sample[2] += value
        else:
            kept.append([now, now, float(value)])
            if len(kept) > self.samples + 1:  # Kafka's ring of samples + 1 reuses the oldest
                del kept[0]

    def total(self, now: float) -> float:
        """The sum of the samples kept at ``now``."""
        self._expire(now)
        return sum(sample[2] for sample in self._kept)

    def window_size(self, now: float) -> float:
        """The time the rate is measured over (Kafka's ``Rate.windowSize``): since the oldest
        sample started, plus the whole windows missing from ``samples - 1``."""
        self._expire(now)
        elapsed = now - self._kept[0][0] if self._kept else 0.0
        full = int(elapsed // self.window_s)
        if full < self.samples - 1:
            elapsed += (self.samples - 1 - full) * self.window_s
        return max(elapsed, 0.001)

    def measure(self, now: float) -> float:
        """The rate at ``now``: the samples' sum over :meth:`window_size`."""
        total = self.total(now)
        return total / self.window_size(now) if total else 0.0

    def samples_kept(self, now: float) -> List[List[float]]:
        """The samples at ``now``, oldest first, as [start, last record, total] (a copy)."""
        self._expire(now)
        return [list(sample) for sample in self._kept]

    def _expire(self, now: float) -> None:
        """Drop the samples whose last record is ``samples`` windows old (Kafka's purge)."""
        age = self.window_s * self.samples
        kept = self._kept
        if kept and now - kept[0][1] >= age:
            self._kept = [sample for sample in kept if now - sample[1] < age]


class SimpleRate(Rate):
    """A windowed rate measured over at least one window (Kafka's ``SimpleRate``). Not
    thread-safe."""

    __slots__ = ()

    def window_size(self, now: float) -> float:
        """The time since the oldest sample started, at least one window."""
        self._expire(now)
        elapsed = now - self._kept[0][0] if self._kept else 0.0
        return max(elapsed, self.window_s)


def throttle_time_ms(rate: Rate, bound: float, now: float) -> int:
    """How long (ms) a client over ``bound`` is throttled (Kafka's ``QuotaUtils.throttleTime``):
    0 when the rate is within the bound."""
    value = rate.measure(now)
    if value <= bound:
        return 0
    if bound <= 0:
        return int(round(rate.window_size(now) * 1000))
    return int(round((value - bound) / bound * rate.window_size(now) * 1000))


class TokenBucket:
    """Kafka's ``TokenBucket``: ``rate`` tokens a second, at most ``burst`` held; starts full.
    Not thread-safe."""

    __slots__ = ("rate", "burst", "_tokens", "_updated")

    def __init__(self, rate: float, samples: int = 11, window_s: float = 1.0) -> None:
        self.rate = float(rate)
        self.burst = max(1, int(samples)) * float(window_s) * self.rate
        self._tokens = self.burst
        self._updated: float = float("nan")

    def set_rate(self, rate: float, samples: int, window_s: float) -> None:
        self.rate = float(rate)
        self.burst = max(1, int(samples)) * float(window_s) * self.rate
        self._tokens = min(self._tokens, self.burst)

    def tokens(self, now: float) -> float:
        """The tokens held at ``now`` (negative: owed)."""
        self._refill(now)
        return self._tokens

    def take(self, tokens: float, now: float) -> None:
        self._refill(now)
        self._tokens = min(self.burst, self._tokens - tokens)

    def throttle_time_ms(self, now: float) -> int:
        """The time (ms) until the bucket is back at zero tokens (Kafka's controller mutation
        throttle time: ``-tokens / rate``); 0 when it holds any."""
        tokens = self.tokens(now)
        if tokens >= 0:
            return 0
        if self.rate <= 0:
            return 2 ** 31 - 1
        return int(round(-tokens / self.rate * 1000))

    def _refill(self, now: float) -> None:
        if self._updated == self._updated:  # not NaN: refilled before
            self._tokens = min(self.burst, self._tokens + self.rate * max(0.0, now - self._updated))
        self._updated = now
