"""Replication throttles (Kafka's ReplicationQuotaManager): a bound on the bytes per second
that replicas being moved copy, on the leader's side and on the follower's.

Two dynamic broker configs set the bounds, ``leader.replication.throttled.rate`` (what this
broker sends as a leader) and ``follower.replication.throttled.rate`` (what it fetches as
a follower); absent, a side is unbounded. Two topic configs say which replicas each bound
applies to: ``leader.replication.throttled.replicas`` and
``follower.replication.throttled.replicas``, lists of ``partition:broker`` pairs (or ``*``,
every replica). A broker takes the pairs that name it: as a leader it throttles what it
sends for the partitions listed with its id, as a follower what it fetches for those
listed with its id. ``kafka-reassign-partitions --throttle`` (``pylogq reassign-partitions``)
sets all four, on the brokers and topics of the partitions it moves.

Only replicas out of the ISR are throttled: a follower in sync is never held back, so a
throttle never slows acks=all writes. Each side keeps the bytes it copied for throttled
partitions in one-second samples (``replication.quota.window.size.seconds``, eleven of them,
``replication.quota.window.num``) and measures the rate as Kafka's ``SimpleRate`` does
(:class:`pylogq.rate.SimpleRate`): over the time since the oldest sample started, at least
one window. Once the rate passes the bound, a leader answers a throttled partition with no
records, its fetch waiting at most until the rate is back at the bound
(:meth:`ReplicationQuota.wait_s`, which counts the samples that expire meanwhile), and a
follower leaves throttled partitions out of its fetches for as long.
"""

from __future__ import annotations

import threading
import time
from typing import Callable, Optional, Sequence

from ...rate import SimpleRate

__all__ = ["ReplicationQuota", "is_throttled_replica"]

#: The topic config value that throttles every replica of the topic.
ALL_REPLICAS = "*"


def is_throttled_replica(throttled: Sequence[str], partition: int, broker_id: int) -> bool:
    """Whether a ``*.replication.throttled.replicas`` list names ``partition`` on ``broker_id``."""
    if not throttled:
        return False
    return ALL_REPLICAS in throttled or "%d:%d" % (partition, broker_id) in throttled


class ReplicationQuota:
    """One side's bound (bytes per second, None for none) and the rate it measures.

    Thread-safe: the leader's side is read and recorded by fetch requests on the server's
    threads, the follower's by the fetcher threads.
    """

    def __init__(self, side: str, samples: int = 11, window_s: float = 1.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.side = side
        self._clock = clock
        self._lock = threading.Lock()
        self._bound: Optional[float] = None
        self._rate = SimpleRate(samples, window_s)
        #: Every throttled byte recorded (the metric).
        self.throttled_bytes = 0

    @property
    def bound(self) -> Optional[float]:
        """The bytes per second allowed (None: unbounded)."""
        return self._bound

    def set_bound(self, bytes_per_s: Optional[float]) -> None:
        """A new bound (None or Kafka's Long.MAX_VALUE: unbounded)."""
        with self._lock:
            self._bound = None if bytes_per_s is None or bytes_per_s >= 2 ** 63 - 1 else float(bytes_per_s)

    def record(self, n: int) -> None:
        """``n`` bytes of throttled replicas were copied."""
        if n <= 0:
            return
        now = self._clock()
        with self._lock:
            self.throttled_bytes += n
            self._rate.record(n, now)

    def rate(self) -> float:
        """Bytes per second over the samples kept."""
        now = self._clock()
        with self._lock:
            return self._rate.measure(now)

    def exceeded(self) -> bool:
        """Whether the rate is past the bound (never, unbounded: answered without the lock or
        the clock, as a fetch asks it every time)."""
        if self._bound is None:
            return False
        now = self._clock()
        with self._lock:
            return self._bound is not None and self._rate.measure(now) > self._bound

    def wait_s(self) -> float:
        """How long until the rate is back at the bound if nothing more is copied (0 when it is)."""
        now = self._clock()
        with self._lock:
            if self._bound is None:
                return 0.0
            rate = self._rate
            kept = rate.samples_kept(now)
            total = sum(sample[2] for sample in kept)
            if not total:
                return 0.0
            if self._bound <= 0:
                return rate.window_s * rate.samples
            # The rate is the samples' bytes over max(since the oldest started, one window),
            # and a sample expires ``samples`` windows after its last record: between two
            # expiries, it is back at the bound once the time since the oldest left reaches
            # its bytes / bound (at once when that is within one window).
            start = now
            for oldest, last, bytes_ in kept:
                needed = total / self._bound
                at = start if needed <= rate.window_s else max(start, oldest + needed)
                expires = last + rate.window_s * rate.samples
                if at < expires:
                    return at - now
                start = expires
                total -= bytes_
            return start - now
