"""The clients' metrics: Kafka's sensors and sampled stats, read as kafka-python's ``metrics()``.

A :class:`Sensor` records one quantity per event (a batch's bytes, a request's
latency in ms) into a few *samples*, each covering a time window: by default 2
of 30 s (kafka-python's ``metrics_num_samples`` and ``metrics_sample_window_ms``).
When the current sample's window has passed, the next event starts a new one in
the oldest sample's place; a sample older than all the windows together is
cleared when read. The metrics named after a sensor read those samples, as
Kafka's stats do:

- ``-avg``: the sum over the samples divided by their events (0.0 without any);
- ``-max``: the largest value over the samples (-inf without any, as kafka-python);
- ``-rate``: the sum over the samples per second of the time they cover (an
  event count per second for request, fetch and group rates). That time is at
  least all windows but the last, so a rate is not inflated in the first
  seconds: Kafka's ``Rate.windowSize``;
- ``-total``: the cumulative sum (or count) since the client started, Java's
  ``-total`` meters (KIP-187).

A client records per batch, per request and per poll, never per record: one
lock (a leaf: nothing is called under it but reads of the samples) and a few
float operations per event. This registry is the clients'; the broker's
Prometheus registry is :mod:`pylogq.metrics`.
"""

from __future__ import annotations

import threading
import time
from typing import Callable, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple, Union

from ..errors import ConfigError


__all__ = ["Metric", "MetricName", "Metrics", "NetworkSensors", "NodeSensors", "Sensor"]

#: kafka-python's defaults: 2 samples of 30 s.
DEFAULT_SAMPLES = 2
DEFAULT_WINDOW_MS = 30000

#: Kafka's API keys of the requests whose throttle times a client also keeps apart
#: (``produce-throttle-time-*``, ``fetch-throttle-time-*``); pylogq.protocol.ApiKey's values,
#: written here so an in-process client does not load the protocol tables.
PRODUCE_API_KEY = 0
FETCH_API_KEY = 1

_NEG_INF = float("-inf")
_monotonic = time.monotonic

#: A reading of a metric at a time (monotonic seconds).
Measure = Callable[[float], float]


class MetricName:
    """A metric's name, its group and its tags; equal when those are (kafka-python's ``MetricName``)."""

    __slots__ = ("name", "group", "description", "tags", "_key")

    def __init__(self, name: str, group: str, description: str = "", tags: Optional[Mapping[str, str]] = None) -> None:
        self.name = name
        self.group = group
        self.description = description
        self.tags: Dict[str, str] = dict(tags or {})
        self._key = (group, name, frozenset(self.tags.items()))

    def __hash__(self) -> int:
        return hash(self._key)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, MetricName) and self._key == other._key

    def __repr__(self) -> str:
        return "MetricName(name=%r, group=%r, tags=%r)" % (self.name, self.group, self.tags)


class Metric:
    """One named reading (kafka-python's ``KafkaMetric``): ``value()`` measures it now."""

    __slots__ = ("metric_name", "_measure", "_lock")

    def __init__(self, metric_name: MetricName, measure: Measure, lock: threading.Lock) -> None:
        self.metric_name = metric_name
        self._measure = measure
        self._lock = lock

    def value(self, time_ms: Optional[float] = None) -> float:
        """The metric at ``time_ms`` (monotonic ms, as kafka-python's; default: now)."""
        now = _monotonic() if time_ms is None else time_ms / 1000.0
        with self._lock:
            return float(self._measure(now))

    def __repr__(self) -> str:
        return "Metric(%r)" % (self.metric_name,)


class Sensor:
    """One recorded quantity, in sampled windows and in total; see the module docstring.

    Each sample is ``[start, sum, count, max]``. Recording updates this
    sensor and its parents (a broker's sensor feeds the client-wide one) under
    the registry's lock; the readings (``avg`` ...) expect that lock held.
    """

    __slots__ = ("_lock", "_parents", "_samples", "_current", "_n", "_window", "total", "count", "last")

    def __init__(self, lock: threading.Lock, samples: int, window_s: float, parents: Sequence["Sensor"] = ()) -> None:
        self._lock = lock
        self._parents = tuple(parents)
        self._samples: List[List[float]] = []
        self._current = 0
        self._n = samples
        self._window = window_s
        self.total = 0.0
        self.count = 0
        self.last = 0.0

    def record(self, value: float = 1.0, now: Optional[float] = None) -> None:
        """Record one event of ``value`` at ``now`` (monotonic seconds; default: now)."""
        if now is None:
            now = _monotonic()
        with self._lock:
            self._update(value, now)
            for parent in self._parents:
                parent._update(value, now)

    def record_locked(self, value: float, now: float) -> None:
        """:meth:`record` with the registry's lock (:attr:`Metrics.lock`) already held: several
        sensors recorded under one acquisition."""
        self._update(value, now)
        for parent in self._parents:
            parent._update(value, now)

    def _update(self, value: float, now: float) -> None:
        samples = self._samples
        if not samples:
            sample = [now, 0.0, 0, _NEG_INF]
            samples.append(sample)
        else:
            sample = samples[self._current]
            if now - sample[0] >= self._window:
                self._current = (self._current + 1) % self._n
                if self._current == len(samples):
                    sample = [now, 0.0, 0, _NEG_INF]
                    samples.append(sample)
                else:
                    sample = samples[self._current]
                    sample[0], sample[1], sample[2], sample[3] = now, 0.0, 0, _NEG_INF
        sample[1] += value
        sample[2] += 1
        if value > sample[3]:
            sample[3] = value
        self.total += value
        self.count += 1
        self.last = value

    def _purge(self, now: float) -> List[List[float]]:
        """The samples, those older than every window together cleared first."""
        expire = self._n * self._window
        for sample in self._samples:
            if now - sample[0] >= expire:
                sample[0], sample[1], sample[2], sample[3] = now, 0.0, 0, _NEG_INF
        return self._samples

    def _elapsed(self, samples: List[List[float]], now: float) -> float:
        """The seconds a rate divides by: since the oldest sample began, at least all windows but one."""
        elapsed = now - min(s[0] for s in samples) if samples else 0.0
        full = int(elapsed / self._window)
        if full < self._n - 1:
            elapsed += (self._n - 1 - full) * self._window
        return elapsed

    # The readings (registry lock held).

    def avg(self, now: float) -> float:
        samples = self._purge(now)
        count = sum(s[2] for s in samples)
        return sum(s[1] for s in samples) / count if count else 0.0

    def max(self, now: float) -> float:
        samples = self._purge(now)
        return max(s[3] for s in samples) if samples else _NEG_INF

    def rate(self, now: float) -> float:
        samples = self._purge(now)
        return sum(s[1] for s in samples) / self._elapsed(samples, now)

    def count_rate(self, now: float) -> float:
        samples = self._purge(now)
        return sum(s[2] for s in samples) / self._elapsed(samples, now)

    def sum_total(self, now: float) -> float:
        return self.total

    def count_total(self, now: float) -> float:
        return float(self.count)

    def value(self, now: float) -> float:
        return self.last


class _NullSensor(Sensor):
    """The sensor of a client with ``metrics_enabled=False``: records nothing."""

    def record(self, value: float = 1.0, now: Optional[float] = None) -> None:
        pass

    def record_locked(self, value: float, now: float) -> None:
        pass


#: What a metric reads of its sensor (an unbound reading: ``Sensor.avg``, ...).
Reading = Callable[[Sensor, float], float]
AVG: Reading = Sensor.avg
MAX: Reading = Sensor.max
RATE: Reading = Sensor.rate
COUNT_RATE: Reading = Sensor.count_rate
TOTAL: Reading = Sensor.sum_total
COUNT: Reading = Sensor.count_total
VALUE: Reading = Sensor.value


class Metrics:
    """One client's sensors and the metrics that read them. Thread-safe (one lock, a leaf).

    ``enabled=False`` (kafka-python's ``metrics_enabled``) keeps nothing:
    every sensor is a no-op and the snapshot is empty.
    """

    def __init__(self, samples: int = DEFAULT_SAMPLES, window_ms: int = DEFAULT_WINDOW_MS,
                 enabled: bool = True) -> None:
        if isinstance(samples, bool) or not isinstance(samples, int) or samples < 1:
            raise ConfigError("metrics_num_samples must be an integer >= 1, not %r" % (samples,))
        if isinstance(window_ms, bool) or not isinstance(window_ms, int) or window_ms < 1:
            raise ConfigError("metrics_sample_window_ms must be an integer >= 1, not %r" % (window_ms,))
        self.enabled = bool(enabled)
        self.samples = samples
        self.window_s = window_ms / 1000.0
        self._lock = threading.Lock()
        self._sensors: Dict[str, Sensor] = {}
        self._metrics: Dict[MetricName, Metric] = {}

    @property
    def lock(self) -> threading.Lock:
        """The one lock of every sensor here (for :meth:`Sensor.record_locked`)."""
        return self._lock

    def sensor(self, name: str, parents: Sequence[Sensor] = ()) -> Sensor:
        """The sensor called ``name``, made on first use (with ``parents``, which it also records into)."""
        with self._lock:
            found = self._sensors.get(name)
            if found is None:
                cls = Sensor if self.enabled else _NullSensor
                found = self._sensors[name] = cls(self._lock, self.samples, self.window_s, parents)
            return found

    def add(self, name: MetricName, measure: Measure) -> None:
        """Publish ``measure`` (called with the time, under the lock: it must take no lock) as ``name``."""
        if not self.enabled:
            return
        with self._lock:
            self._metrics[name] = Metric(name, measure, self._lock)

    def add_stats(self, sensor: Sensor, group: str, stats: Iterable[Tuple[str, Reading, str]],
                  tags: Optional[Mapping[str, str]] = None) -> Sensor:
        """Publish readings of ``sensor`` in ``group``: ``(name, reading, description)`` each; -> the sensor."""
        for name, reading, description in stats:
            self.add(MetricName(name, group, description, tags), _Bound(reading, sensor))
        return sensor

    def remove_sensor(self, name: str) -> None:
        """Drop a sensor and every metric that reads it (a partition no longer assigned)."""
        with self._lock:
            sensor = self._sensors.pop(name, None)
            if sensor is None:
                return
            for key in [k for k, m in self._metrics.items()
                        if isinstance(m._measure, _Bound) and m._measure.sensor is sensor]:
                del self._metrics[key]

    def snapshot(self, raw: bool = False) -> Union[Dict[str, Dict[str, float]], Dict[MetricName, Metric]]:
        """kafka-python's ``metrics()``: ``{group: {name: value}}``, or with ``raw`` ``{MetricName: Metric}``.

        A metric with tags is filed under its group and the tags' values,
        ``"<group>.<value>..."`` (kafka-python would let it overwrite the
        untagged metric of the same name in the group).
        """
        with self._lock:
            if raw:
                return dict(self._metrics)
            now = _monotonic()
            out: Dict[str, Dict[str, float]] = {}
            for key, metric in self._metrics.items():
                group = key.group if not key.tags else ".".join([key.group, *key.tags.values()])
                entries = out.get(group)
                if entries is None:
                    entries = out[group] = {}
                entries[key.name] = float(metric._measure(now))
            return out


class _Bound:
    """A reading of one sensor, as a metric's measure (the sensor is kept to find its metrics)."""

    __slots__ = ("reading", "sensor")

    def __init__(self, reading: Reading, sensor: Sensor) -> None:
        self.reading = reading
        self.sensor = sensor

    def __call__(self, now: float) -> float:
        return self.reading(self.sensor, now)


def _request_sensors(metrics: Metrics, prefix: str, group: str,
                     parents: Sequence[Sensor] = ()) -> Tuple[Sensor, Sensor, Sensor, Sensor]:
    """The request metrics of ``group``: (bytes sent, bytes received, latency, throttle),
    their sensors named ``<prefix>bytes-sent`` ..., each with its ``parents`` entry as a parent."""
    tables: Sequence[Tuple[str, List[Tuple[str, Reading, str]]]] = (
        ("bytes-sent", [
            ("outgoing-byte-rate", RATE, "The average number of outgoing bytes sent per second."),
            ("outgoing-byte-total", TOTAL, "The total number of outgoing bytes sent."),
            ("request-rate", COUNT_RATE, "The average number of requests sent per second."),
            ("request-total", COUNT, "The total number of requests sent."),
            ("request-size-avg", AVG, "The average size of all requests in the window."),
            ("request-size-max", MAX, "The maximum size of any request sent in the window."),
        ]),
        ("bytes-received", [
            ("incoming-byte-rate", RATE, "The average number of bytes read off the sockets per second."),
            ("incoming-byte-total", TOTAL, "The total number of bytes read off the sockets."),
            ("response-rate", COUNT_RATE, "The average number of responses received per second."),
            ("response-total", COUNT, "The total number of responses received."),
        ]),
        ("request-latency", [
            ("request-latency-avg", AVG, "The average request latency in ms."),
            ("request-latency-max", MAX, "The maximum request latency in ms."),
        ]),
        ("throttle-time", [
            ("throttle-time-avg", AVG, "The average throttle time in ms."),
            ("throttle-time-max", MAX, "The maximum throttle time in ms."),
        ]),
    )
    sent, received, latency, throttle = (
        metrics.add_stats(metrics.sensor(prefix + name, [parents[i]] if parents else []), group, stats)
        for i, (name, stats) in enumerate(tables))
    return sent, received, latency, throttle


class NodeSensors:
    """What one broker's connections record: requests sent, responses read, latency, throttling.

    Each sensor has the client-wide one as a parent, so a request counts in its
    broker's group (``<prefix>-node-metrics.node-<id>``) and in
    ``<prefix>-metrics``. Shared by the connections (channels) to that broker.
    """

    __slots__ = ("network", "sent", "received", "latency", "throttle")

    def __init__(self, network: "NetworkSensors", node: str) -> None:
        self.network = network
        self.sent, self.received, self.latency, self.throttle = _request_sensors(
            network.metrics, "node-%s." % node, "%s-node-metrics.node-%s" % (network.prefix, node),
            (network.sent, network.received, network.latency, network.throttle))

    def request_sent(self, nbytes: int, now: float) -> None:
        self.sent.record(nbytes, now)

    def response_read(self, api_key: int, nbytes: int, sent_at: float, throttle_ms: Optional[int]) -> None:
        """A response of ``nbytes`` (size prefix included) to a request sent at ``sent_at``."""
        now = _monotonic()
        api = self.network.api_throttle.get(api_key) if throttle_ms is not None else None
        with self.network.metrics.lock:
            self.received.record_locked(nbytes, now)
            self.latency.record_locked((now - sent_at) * 1000.0, now)
            if throttle_ms is not None:
                self.throttle.record_locked(throttle_ms, now)
                if api is not None:
                    api.record_locked(throttle_ms, now)


class NetworkSensors:
    """A client's requests in ``<prefix>-metrics``, kafka-python's connection metrics.

    Over TCP the connections record every request and response, per broker
    (:meth:`node`) and in total. In process there is no wire: each call the
    client makes through the transport counts as a request and its response,
    with its latency, and no bytes (:meth:`call`).
    """

    def __init__(self, metrics: Metrics, prefix: str) -> None:
        self.metrics = metrics
        self.prefix = prefix
        self.sent, self.received, self.latency, self.throttle = _request_sensors(metrics, "", prefix + "-metrics")
        #: API key -> the sensor its responses' throttle times also go to (Produce's, Fetch's).
        self.api_throttle: Dict[int, Sensor] = {}
        self._nodes: Dict[str, NodeSensors] = {}
        self._lock = threading.Lock()

    def node(self, node: str) -> Optional[NodeSensors]:
        """The sensors of broker ``node`` (``"1"``, or ``"bootstrap-0"`` before Metadata named it)."""
        if not self.metrics.enabled:
            return None
        with self._lock:
            found = self._nodes.get(node)
            if found is None:
                found = self._nodes[node] = NodeSensors(self, node)
            return found

    def call(self, started: float) -> None:
        """An in-process call that began at ``started`` (monotonic s) has returned."""
        now = _monotonic()
        with self.metrics.lock:
            self.sent.record_locked(0, now)
            self.received.record_locked(0, now)
            self.latency.record_locked((now - started) * 1000.0, now)
