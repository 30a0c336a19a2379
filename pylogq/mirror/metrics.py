"""A mirror's metrics: MirrorMaker 2's, named as the Prometheus JMX exporter names Kafka's.

Kafka's MirrorMaker publishes, per replicated partition (tags ``source``, ``target``,
``topic``: the remote topic's name, ``partition``), the MBean
``kafka.connect.mirror:type=MirrorSourceConnector`` with ``record-count``, ``record-rate``,
``record-age-ms`` (and ``-max``, ``-min``, ``-avg``), ``replication-latency-ms`` (and
``-max``, ``-min``, ``-avg``), ``byte-count`` and ``byte-rate``; and per group and
partition ``kafka.connect.mirror:type=MirrorCheckpointConnector`` with
``checkpoint-latency-ms`` (and ``-max``, ``-min``, ``-avg``). The JMX exporter's rules
turn them into ``kafka_connect_mirror_mirrorsourceconnector_record_count{source="A",
target="B",topic="A.orders",partition="0"}`` and so on, the names :data:`DEFINITIONS`
lists, all gauges as the exporter serves MBean attributes. pylogq adds one of its own,
``kafka_connect_mirror_mirrorsourceconnector_records_lag``: the records of a source
partition its task has not yet had acknowledged by the target (the source's high
watermark at the task's last fetch minus the next offset to acknowledge).

As in Kafka, a record's *age* is the time from its timestamp to when the task read it
(when its value's bytes are counted too), its *replication latency* the time from its
timestamp to when the task saw the target's acknowledgement of its copy (when the record
is counted), and a *checkpoint's latency* the time from reading a group's offsets to the
target acknowledging the checkpoint. The ``-max``, ``-min``, ``-avg`` and ``-rate``
readings cover Kafka's default two samples of 30 s; ``-count`` and the plain value
(the last event's) cover the whole run. A task records a whole poll's worth of records
at once (:meth:`PartitionMetrics.read`, :meth:`PartitionMetrics.acknowledged`), never one
record at a time.

:class:`MirrorMetrics` keeps them for one process (thread-safe, one lock, a leaf) and
serves them through :class:`pylogq.metrics.MetricsRegistry`
(:meth:`MirrorMetrics.registry`); :meth:`MirrorMetrics.flow_totals` is what the console's
progress line reads.
"""

from __future__ import annotations

import threading
import time
from typing import Dict, Iterator, List, NamedTuple, Optional, Tuple

from ..metrics import Definition, MetricsRegistry, Reading

__all__ = ["CHECKPOINT_PREFIX", "DEFINITIONS", "SOURCE_PREFIX", "FlowTotals", "MirrorMetrics", "PartitionMetrics"]

SOURCE_PREFIX = "kafka_connect_mirror_mirrorsourceconnector_"
CHECKPOINT_PREFIX = "kafka_connect_mirror_mirrorcheckpointconnector_"
_PARTITION = ("source", "target", "topic", "partition")
_GROUP_PARTITION = ("source", "target", "group", "topic", "partition")

#: Kafka's default sampling of its windowed stats: 2 samples of 30 s.
SAMPLES = 2
WINDOW_S = 30.0


def _g(help_text: str, labels: Tuple[str, ...] = _PARTITION) -> Definition:
    return Definition("gauge", help_text, labels)


def _timed(prefix: str, name: str, what: str, labels: Tuple[str, ...]) -> Dict[str, Definition]:
    return {
        prefix + name: _g("The %s (ms) of the last one" % what, labels),
        prefix + name + "_max": _g("The largest %s (ms)" % what, labels),
        prefix + name + "_min": _g("The smallest %s (ms)" % what, labels),
        prefix + name + "_avg": _g("The average %s (ms)" % what, labels),
    }


#: Every metric a mirror serves, by name.
DEFINITIONS: Dict[str, Definition] = {
    SOURCE_PREFIX + "record_count": _g("Source records replicated to the target cluster"),
    SOURCE_PREFIX + "record_rate": _g("Source records replicated to the target cluster per second"),
    **_timed(SOURCE_PREFIX, "record_age_ms", "age of a source record when the mirror read it", _PARTITION),
    **_timed(SOURCE_PREFIX, "replication_latency_ms", "time from a source record's timestamp to its copy's "
             "acknowledgement", _PARTITION),
    SOURCE_PREFIX + "byte_count": _g("Bytes of record values replicated to the target cluster"),
    SOURCE_PREFIX + "byte_rate": _g("Bytes replicated to the target cluster per second"),
    SOURCE_PREFIX + "records_lag": _g("Records of the source partition not yet acknowledged by the target"),
    **_timed(CHECKPOINT_PREFIX, "checkpoint_latency_ms", "time from reading a group's offsets to its checkpoint's "
             "acknowledgement", _GROUP_PARTITION),
}


class _Windowed:
    """Events of a quantity in ``SAMPLES`` windows of ``WINDOW_S`` (Kafka's SampledStat), and in total.

    Each sample is ``[start, sum, count, max, min]``. Not thread-safe: the owner's lock guards it.
    """

    __slots__ = ("samples", "current", "last", "total", "count")

    def __init__(self) -> None:
        self.samples: List[List[float]] = []
        self.current = 0
        self.last = 0.0
        self.total = 0.0
        self.count = 0

    def record(self, now: float, total: float, count: int, smallest: float, largest: float, last: float) -> None:
        """``count`` events summing to ``total``, between ``smallest`` and ``largest``, ``last`` the latest."""
        if count <= 0:
            return
        samples = self.samples
        if not samples:
            sample = [now, 0.0, 0, float("-inf"), float("inf")]
            samples.append(sample)
        else:
            sample = samples[self.current]
            if now - sample[0] >= WINDOW_S:
                self.current = (self.current + 1) % SAMPLES
                if self.current == len(samples):
                    sample = [now, 0.0, 0, float("-inf"), float("inf")]
                    samples.append(sample)
                else:
                    sample = samples[self.current]
                    sample[:] = [now, 0.0, 0, float("-inf"), float("inf")]
        sample[1] += total
        sample[2] += count
        sample[3] = max(sample[3], largest)
        sample[4] = min(sample[4], smallest)
        self.last = last
        self.total += total
        self.count += count

    def _live(self, now: float) -> List[List[float]]:
        return [s for s in self.samples if now - s[0] < SAMPLES * WINDOW_S]

    def max(self, now: float) -> float:
        live = [s[3] for s in self._live(now) if s[2]]
        return max(live) if live else float("nan")

    def min(self, now: float) -> float:
        live = [s[4] for s in self._live(now) if s[2]]
        return min(live) if live else float("nan")

    def avg(self, now: float) -> float:
        live = self._live(now)
        count = sum(s[2] for s in live)
        return sum(s[1] for s in live) / count if count else float("nan")

    def rate(self, now: float) -> float:
        """The sum per second over the live samples (Kafka's Rate: at least all windows but one long)."""
        live = self._live(now)
        if not live:
            return 0.0
        elapsed = now - min(s[0] for s in live)
        elapsed = max(elapsed, (SAMPLES - 1) * WINDOW_S)
        return sum(s[1] for s in live) / elapsed if elapsed > 0 else 0.0


class PartitionMetrics:
    """One replicated partition's metrics; the task copying it records into it. Thread-safe
    through its :class:`MirrorMetrics`' lock."""

    __slots__ = ("_lock", "labels", "records", "bytes", "age", "latency", "lag")

    def __init__(self, lock: threading.Lock, labels: Tuple[str, ...]) -> None:
        self._lock = lock
        self.labels = labels
        self.records = _Windowed()
        self.bytes = _Windowed()
        self.age = _Windowed()
        self.latency = _Windowed()
        self.lag: Optional[int] = None

    def read(self, count: int, nbytes: int, ages: Tuple[float, float, float, float],
             now: Optional[float] = None) -> None:
        """``count`` records whose values hold ``nbytes`` bytes were read from the source; ``ages``
        is ``(sum, min, max, last)`` of their ages in ms (Kafka records both when it polls)."""
        if count <= 0:
            return
        now = time.monotonic() if now is None else now
        with self._lock:
            self.bytes.record(now, nbytes, 1, nbytes, nbytes, nbytes)
            self.age.record(now, ages[0], count, ages[1], ages[2], ages[3])

    def acknowledged(self, count: int, latencies: Tuple[float, float, float, float],
                     now: Optional[float] = None) -> None:
        """The target acknowledged the copies of ``count`` records; ``latencies`` is ``(sum, min,
        max, last)`` of their replication latencies in ms."""
        if count <= 0:
            return
        now = time.monotonic() if now is None else now
        with self._lock:
            self.records.record(now, count, count, 1, 1, 1)
            self.latency.record(now, latencies[0], count, latencies[1], latencies[2], latencies[3])

    def set_lag(self, lag: Optional[int]) -> None:
        """The records of the source partition not yet acknowledged by the target (None: unknown)."""
        with self._lock:
            self.lag = lag


class FlowTotals(NamedTuple):
    """What a process has copied for one flow since it started, and its lag now."""

    records: int
    bytes: int
    lag: int
    partitions: int


class MirrorMetrics:
    """The metrics of every flow a process runs. Thread-safe (one lock, a leaf)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._partitions: Dict[Tuple[str, str, str, int], PartitionMetrics] = {}
        self._checkpoints: Dict[Tuple[str, str, str, str, int], _Windowed] = {}
        # What partitions that were forgotten had copied, so a flow's totals never go back.
        self._retired: Dict[Tuple[str, str], Tuple[int, int]] = {}

    def partition(self, source: str, target: str, topic: str, partition: int) -> PartitionMetrics:
        """The metrics of remote partition ``topic``/``partition`` of flow ``source->target``."""
        key = (source, target, topic, partition)
        with self._lock:
            found = self._partitions.get(key)
            if found is None:
                found = self._partitions[key] = PartitionMetrics(self._lock, (source, target, topic, str(partition)))
            return found

    def forget(self, source: str, target: str, topic: str, partition: int) -> None:
        """Stop publishing a partition this process no longer copies (its task moved or stopped)."""
        with self._lock:
            found = self._partitions.pop((source, target, topic, partition), None)
            if found is not None:
                records, nbytes = self._retired.get((source, target), (0, 0))
                self._retired[(source, target)] = (records + found.records.count, nbytes + int(found.bytes.total))

    def forget_checkpoints(self, source: str, target: str) -> None:
        """Stop publishing flow ``source->target``'s checkpoint latencies (its leader moved or stopped)."""
        with self._lock:
            for key in [k for k in self._checkpoints if k[0] == source and k[1] == target]:
                del self._checkpoints[key]

    def checkpoint_latency(self, source: str, target: str, group: str, topic: str, partition: int,
                           latency_ms: float, now: Optional[float] = None) -> None:
        """A checkpoint of ``group`` for remote partition ``topic``/``partition`` took ``latency_ms``."""
        now = time.monotonic() if now is None else now
        with self._lock:
            key = (source, target, group, topic, partition)
            stat = self._checkpoints.get(key)
            if stat is None:
                stat = self._checkpoints[key] = _Windowed()
            stat.record(now, latency_ms, 1, latency_ms, latency_ms, latency_ms)

    def flow_totals(self, source: str, target: str) -> FlowTotals:
        """The records and bytes this process copied for flow ``source->target``, the lag of the
        partitions it copies now, and how many those are."""
        with self._lock:
            records, nbytes = self._retired.get((source, target), (0, 0))
            lag = 0
            count = 0
            for (s, t, _, _), metrics in self._partitions.items():
                if (s, t) != (source, target):
                    continue
                count += 1
                records += metrics.records.count
                nbytes += int(metrics.bytes.total)
                lag += metrics.lag or 0
            return FlowTotals(records, nbytes, lag, count)

    def readings(self, now: Optional[float] = None) -> Iterator[Reading]:
        """``(name, labels, value)`` of every sample (a :class:`pylogq.metrics.MetricsRegistry` collector)."""
        now = time.monotonic() if now is None else now
        out: List[Reading] = []
        with self._lock:
            for metrics in self._partitions.values():
                labels = metrics.labels
                out.append((SOURCE_PREFIX + "record_count", labels, float(metrics.records.count)))
                out.append((SOURCE_PREFIX + "record_rate", labels, metrics.records.rate(now)))
                out.append((SOURCE_PREFIX + "byte_count", labels, metrics.bytes.total))
                out.append((SOURCE_PREFIX + "byte_rate", labels, metrics.bytes.rate(now)))
                for name, stat in (("record_age_ms", metrics.age), ("replication_latency_ms", metrics.latency)):
                    if stat.count:
                        out.append((SOURCE_PREFIX + name, labels, stat.last))
                        out.append((SOURCE_PREFIX + name + "_max", labels, stat.max(now)))
                        out.append((SOURCE_PREFIX + name + "_min", labels, stat.min(now)))
                        out.append((SOURCE_PREFIX + name + "_avg", labels, stat.avg(now)))
                if metrics.lag is not None:
                    out.append((SOURCE_PREFIX + "records_lag", labels, float(metrics.lag)))
            for (source, target, group, topic, partition), stat in self._checkpoints.items():
                labels = (source, target, group, topic, str(partition))
                name = CHECKPOINT_PREFIX + "checkpoint_latency_ms"
                out.append((name, labels, stat.last))
                out.append((name + "_max", labels, stat.max(now)))
                out.append((name + "_min", labels, stat.min(now)))
                out.append((name + "_avg", labels, stat.avg(now)))
        return iter(out)

    def registry(self) -> MetricsRegistry:
        """A Prometheus registry serving these metrics (``registry().serve(url)``)."""
        registry = MetricsRegistry(DEFINITIONS)
        registry.add_collector(lambda: self.readings())
        return registry
