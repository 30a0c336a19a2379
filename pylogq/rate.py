"""Rates measured over sampled windows, and the throttle times of quotas (Kafka's ``Rate``,
``TokenBucket`` and ``QuotaUtils``).

Every quota pylogq enforces measures with these: the replication throttles
(:mod:`pylogq.cluster.broker.replication_quota`), the client quotas and the connection
creation rates (:mod:`pylogq.server.quotas`).

A :class:`Rate` keeps what was recorded in samples of ``window_s`` seconds each, a new
sample starting at the first record after the current one's window has passed; a sample
counts until ``samples`` windows after its own window ended. The rate is the sum of the
samples kept over the elapsed time since the oldest one started, and that time is taken
as at least ``samples - 1`` whole windows, as Kafka takes it: the first record of a quiet
client is spread over the whole window rather than measured as a burst. With Kafka's
default of eleven one-second windows, a client's rate is its last ten to eleven seconds.

A quota is an upper bound on a rate. Recording past it yields a throttle time:
``(rate - bound) / bound * window``, the delay after which the rate over the grown window
is back at the bound if nothing more is recorded (:func:`throttle_time_ms`).

A :class:`TokenBucket` (KIP-599's controller mutations) holds up to ``samples * window_s *
rate`` tokens, refilled at the rate; a mutation takes its tokens, and a bucket below zero
is throttled for the time the refill takes to bring it back to zero.

Neither class is thread-safe: their owners record and measure under their own lock.
"""

from __future__ import annotations

from typing import List

__all__ = ["Rate", "TokenBucket", "throttle_time_ms"]


class Rate:
    """A windowed rate (units per second) of the values recorded. Not thread-safe."""

    __slots__ = ("samples", "window_s", "_kept")

    def __init__(self, samples: int = 11, window_s: float = 1.0) -> None:
        #: How many windows are kept (at least two: the current one and one whole one).
        self.samples = max(2, int(samples))
        self.window_s = float(window_s)
        #: [start, total] of the samples not yet expired, oldest first.
        self._kept: List[List[float]] = []

    def record(self, value: float, now: float) -> None:
        """Add ``value`` at time ``now`` (seconds on a monotonic clock); a negative value takes
        back what was recorded (Kafka's unrecord of a throttled fetch)."""
        self._expire(now)
        kept = self._kept
        if kept and now - kept[-1][0] < self.window_s:
            kept[-1][1] += value
        else:
            kept.append([now, float(value)])

    def total(self, now: float) -> float:
        """The sum of the samples kept at ``now``."""
        self._expire(now)
        return sum(total for _, total in self._kept)

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
        """The samples at ``now``, oldest first, as [start, total] (a copy)."""
        self._expire(now)
        return [list(sample) for sample in self._kept]

    def idle_since(self) -> float:
        """When the newest sample started (-inf when none): a rate nobody records expires."""
        return self._kept[-1][0] if self._kept else float("-inf")

    def _expire(self, now: float) -> None:
        horizon = now - self.window_s * self.samples
        kept = self._kept
        while kept and kept[0][0] + self.window_s <= horizon:
            kept.pop(0)


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

    def idle_since(self) -> float:
        return self._updated

    def _refill(self, now: float) -> None:
        if self._updated == self._updated:  # not NaN: refilled before
            self._tokens = min(self.burst, self._tokens + self.rate * max(0.0, now - self._updated))
        self._updated = now
