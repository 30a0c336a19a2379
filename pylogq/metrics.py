"""A broker's metrics, named as Kafka's are once the Prometheus JMX exporter has renamed them.

Kafka publishes its metrics as JMX MBeans; operators usually export them to Prometheus
with the JMX exporter and its conventional rules for Kafka, which turn
``kafka.server:type=BrokerTopicMetrics,name=BytesInPerSec,topic=t`` (its ``Count``)
into ``kafka_server_brokertopicmetrics_bytesin_total{topic="t"}`` and a gauge such as
``kafka.server:type=ReplicaManager,name=UnderReplicatedPartitions`` into
``kafka_server_replicamanager_underreplicatedpartitions``. The dashboards and alerts
people run against Kafka are written in those names, so pylogq serves the same ones
(:data:`DEFINITIONS` lists every metric), and consumer lag as kafka-exporter publishes
it (``kafka_consumergroup_lag``).

Two kinds of value:

- events, counted where they happen: :meth:`MetricsRegistry.inc` for counters and
  :meth:`MetricsRegistry.observe` for durations (milliseconds, into fixed histogram
  buckets). Both are a lock and a dictionary update, so the hot paths pay next to
  nothing and a broker that nobody scrapes imports nothing for them;
- state, read when scraped: collectors (:meth:`MetricsRegistry.add_collector`) yield
  ``(name, labels, value)`` for gauges such as log sizes, leader counts and lag.

``prometheus-client`` builds the metric families and the text format, and serves them
over HTTP (:meth:`MetricsRegistry.serve`); it is imported on the first scrape only
(its import costs more than the rest of a broker's start).
"""

from __future__ import annotations

import bisect
import threading
from typing import Any, Callable, Dict, Iterable, Iterator, List, NamedTuple, Optional, Sequence, Tuple

from .errors import ConfigError

__all__ = ["BUCKETS_MS", "DEFINITIONS", "Definition", "MetricsRegistry", "MetricsServer", "parse_listener"]

#: Histogram buckets of request and flush times, in milliseconds (upper bounds; +Inf after).
BUCKETS_MS: Tuple[float, ...] = (0.5, 1, 2.5, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 30000)

Labels = Tuple[str, ...]
Reading = Tuple[str, Labels, float]


class Definition(NamedTuple):
    """A metric: its Prometheus type, help text and label names (a counter's samples end in
    ``_total``; a sample may leave its labels out: the all-topics value of a topic metric)."""

    kind: str
    help: str
    labels: Labels = ()


def _c(help_text: str, *labels: str) -> Definition:
    return Definition("counter", help_text, labels)


def _g(help_text: str, *labels: str) -> Definition:
    return Definition("gauge", help_text, labels)


def _h(help_text: str, *labels: str) -> Definition:
    return Definition("histogram", help_text, labels)


_TOPIC = "topic"
_TP = ("topic", "partition")

#: Every metric a broker serves, by name (without a counter's ``_total``).
DEFINITIONS: Dict[str, Definition] = {
    # BrokerTopicMetrics: per topic, and without the label for all topics.
    "kafka_server_brokertopicmetrics_messagesin": _c("Records appended by produce requests", _TOPIC),
    "kafka_server_brokertopicmetrics_bytesin": _c("Record bytes appended by produce requests", _TOPIC),
    "kafka_server_brokertopicmetrics_bytesout": _c("Record bytes sent to consumers", _TOPIC),
    "kafka_server_brokertopicmetrics_bytesrejected": _c("Record bytes of produce requests refused", _TOPIC),
    "kafka_server_brokertopicmetrics_failedproducerequests": _c("Partition produce requests that failed", _TOPIC),
    "kafka_server_brokertopicmetrics_failedfetchrequests": _c("Partition fetch requests that failed", _TOPIC),
    "kafka_server_brokertopicmetrics_totalproducerequests": _c("Partition produce requests", _TOPIC),
    "kafka_server_brokertopicmetrics_totalfetchrequests": _c("Partition fetch requests of consumers", _TOPIC),
    "kafka_server_brokertopicmetrics_replicationbytesout": _c("Record bytes sent to followers"),
    # RequestMetrics, per request type (Fetch is FetchConsumer or FetchFollower, as in Kafka).
    "kafka_network_requestmetrics_requests": _c("Requests answered", "request", "version"),
    "kafka_network_requestmetrics_errors": _c("Error codes in responses (NONE included)", "request", "error"),
    "kafka_network_requestmetrics_totaltimems": _h("From a request's arrival to its response sent", "request"),
    "kafka_network_requestmetrics_requestqueuetimems": _h("Waiting for a queued.max.requests slot", "request"),
    "kafka_network_requestmetrics_localtimems": _h("In its handler on the event loop", "request"),
    "kafka_network_requestmetrics_remotetimems": _h(
        "Waiting after its handler returned (long polls, acks=all, work off the loop)", "request"),
    "kafka_network_requestmetrics_responsequeuetimems": _h("Ready, behind earlier responses of its connection",
                                                           "request"),
    "kafka_network_requestmetrics_responsesendtimems": _h("Writing the response to the socket", "request"),
    "kafka_network_requestchannel_requestqueuesize": _g("Requests being worked on (holding a slot)"),
    # SocketServer (Kafka's socket-server-metrics, per listener).
    "kafka_server_socket_server_metrics_connection_count": _g("Open client connections", "listener"),
    "kafka_server_socket_server_metrics_connection_creation": _c("Connections accepted", "listener"),
    "kafka_server_socket_server_metrics_connection_close": _c("Connections closed", "listener"),
    # KIP-612 (socket-server-metrics, per listener) and SASL sessions (KIP-368).
    "kafka_server_socket_server_metrics_connection_creation_rate": _g(
        "Connections accepted per second (the rate max.connection.creation.rate bounds)", "listener"),
    "kafka_server_socket_server_metrics_connection_accept_throttle_time": _g(
        "Average delay (ms) of the connections accepted late by a connection creation rate", "listener"),
    "kafka_server_socket_server_metrics_expired_connections_killed_count": _c(
        "Connections closed for a request after their SASL session expired"),
    "kafka_server_socket_server_metrics_successful_reauthentication": _c("SASL re-authentications"),
    # Client quotas, per sensor (Kafka's user and client-id tags: the level of the quota applied).
    "kafka_server_produce_byte_rate": _g("Produce request bytes per second", "user", "client_id"),
    "kafka_server_produce_throttle_time": _g("Average produce throttle time (ms)", "user", "client_id"),
    "kafka_server_fetch_byte_rate": _g("Fetch response bytes per second", "user", "client_id"),
    "kafka_server_fetch_throttle_time": _g("Average fetch throttle time (ms)", "user", "client_id"),
    "kafka_server_request_request_time": _g("Request handling time, percent of one thread", "user", "client_id"),
    "kafka_server_request_throttle_time": _g("Average request-time throttle time (ms)", "user", "client_id"),
    "kafka_server_controllermutation_mutation_rate": _g("Partitions created or deleted per second", "user",
                                                        "client_id"),
    "kafka_server_controllermutation_tokens": _g("Tokens left in the controller mutation bucket", "user",
                                                 "client_id"),
    "kafka_server_controllermutation_throttle_time": _g("Average controller mutation throttle time (ms)", "user",
                                                        "client_id"),
    # Log, per partition.
    "kafka_log_log_size": _g("Bytes of a partition's log on disk", *_TP),
    "kafka_log_log_logendoffset": _g("A partition's log end offset", *_TP),
    "kafka_log_log_logstartoffset": _g("A partition's log start offset", *_TP),
    "kafka_log_log_numlogsegments": _g("Segments of a partition's log", *_TP),
    "kafka_log_logflushstats_logflushrateandtimems": _h("Time of each log flush (fsync)"),
    # Log cleaner.
    "kafka_log_logcleaner_max_clean_time_secs": _g("Longest cleaning of the last cleanings (seconds)"),
    "kafka_log_logcleaner_cleaner_recopy_percent": _g("Bytes written over bytes read by the last cleaning (%)"),
    "kafka_log_logcleaner_cleaned_bytes": _c("Bytes of segments read by the cleaner"),
    "kafka_log_logcleaner_cleanings": _c("Cleanings done"),
    "kafka_log_logcleanermanager_max_dirty_percent": _g("Dirty ratio of the dirtiest compacted log (%)"),
    # Group coordinator.
    "kafka_coordinator_group_groupmetadatamanager_numgroups": _g("Groups this broker coordinates"),
    "kafka_coordinator_group_groupmetadatamanager_numgroupsstable": _g("Groups in the Stable state"),
    "kafka_coordinator_group_groupmetadatamanager_numgroupspreparingrebalance": _g(
        "Groups in the PreparingRebalance state"),
    "kafka_coordinator_group_groupmetadatamanager_numgroupscompletingrebalance": _g(
        "Groups in the CompletingRebalance state"),
    "kafka_coordinator_group_groupmetadatamanager_numgroupsempty": _g("Groups in the Empty state"),
    "kafka_coordinator_group_groupmetadatamanager_numgroupsdead": _g("Groups in the Dead state"),
    "kafka_coordinator_group_groupmetadatamanager_numoffsets": _g("Committed offsets held"),
    "kafka_server_group_coordinator_metrics_group_completed_rebalance": _c("Rebalances completed"),
    # Replication.
    "kafka_server_replicamanager_partitioncount": _g("Partitions on this broker"),
    "kafka_server_replicamanager_leadercount": _g("Partitions this broker leads"),
    "kafka_server_replicamanager_underreplicatedpartitions": _g("Led partitions whose ISR lacks a replica"),
    "kafka_server_replicamanager_underminisrpartitioncount": _g("Led partitions with fewer in-sync replicas "
                                                                "than min.insync.replicas"),
    "kafka_server_replicamanager_offlinereplicacount": _g("Replicas whose log cannot be served"),
    "kafka_server_replicamanager_isrshrinks": _c("ISR shrinks written"),
    "kafka_server_replicamanager_isrexpands": _c("ISR expansions written"),
    "kafka_server_leaderreplication_throttledbytes": _c("Bytes sent as a leader to throttled replicas"),
    "kafka_server_followerreplication_throttledbytes": _c("Bytes fetched as a follower for throttled replicas"),
    "kafka_server_leaderreplication_byte_rate": _g("Throttled bytes per second sent as a leader (the measured "
                                                   "rate leader.replication.throttled.rate bounds)"),
    "kafka_server_followerreplication_byte_rate": _g("Throttled bytes per second fetched as a follower (the "
                                                     "measured rate follower.replication.throttled.rate bounds)"),
    "kafka_cluster_partition_underreplicated": _g("1 for a led partition whose ISR lacks a replica", *_TP),
    "kafka_controller_kafkacontroller_activecontrollercount": _g("1 on the controller"),
    "kafka_controller_kafkacontroller_offlinepartitionscount": _g("Partitions without a leader (the controller's "
                                                                  "view)"),
    "kafka_controller_kafkacontroller_globalpartitioncount": _g("Partitions in the cluster (the controller's view)"),
    "kafka_controller_kafkacontroller_globaltopiccount": _g("Topics in the cluster (the controller's view)"),
    # kafka-exporter's names for offsets and lag.
    "kafka_brokers": _g("Brokers in the cluster"),
    "kafka_topic_partitions": _g("Partitions of a topic", _TOPIC),
    "kafka_topic_partition_current_offset": _g("High watermark of a partition this broker leads", *_TP),
    "kafka_topic_partition_oldest_offset": _g("Log start offset of a partition this broker leads", *_TP),
    "kafka_consumergroup_current_offset": _g("A group's committed offset", "consumergroup", *_TP),
    "kafka_consumergroup_lag": _g("High watermark minus a group's committed offset", "consumergroup", *_TP),
    "kafka_consumergroup_lag_sum": _g("A group's lag over a topic's partitions", "consumergroup", _TOPIC),
    "kafka_consumergroup_members": _g("Members of a group", "consumergroup"),
}


class _Histogram:
    __slots__ = ("counts", "sum", "count")

    def __init__(self) -> None:
        self.counts = [0] * (len(BUCKETS_MS) + 1)
        self.sum = 0.0
        self.count = 0


Collector = Callable[[], Iterable[Reading]]


class MetricsRegistry:
    """One broker's metrics: its counters and histograms, and the collectors read at a
    scrape. Thread-safe; ``collect()`` has prometheus-client's collector interface.

    ``definitions`` names what the registry serves (a broker's :data:`DEFINITIONS` by
    default; a mirror maker serves its own, :mod:`pylogq.mirror.metrics`).
    """

    def __init__(self, definitions: Optional[Dict[str, Definition]] = None) -> None:
        self.definitions: Dict[str, Definition] = DEFINITIONS if definitions is None else dict(definitions)
        self._lock = threading.Lock()
        self._counters: Dict[str, Dict[Labels, float]] = {}
        self._histograms: Dict[str, Dict[Labels, _Histogram]] = {}
        self._collectors: List[Collector] = []

    # -- recording ------------------------------------------------------------------

    def inc(self, name: str, labels: Labels = (), amount: float = 1) -> None:
        """Add ``amount`` to a counter (``labels`` in its definition's order, or empty)."""
        self.inc_all(((name, labels, amount),))

    def inc_all(self, items: Iterable[Tuple[str, Labels, float]]) -> None:
        """:meth:`inc` for several ``(name, labels, amount)`` under one lock."""
        with self._lock:
            counters = self._counters
            for name, labels, amount in items:
                series = counters.get(name)
                if series is None:
                    series = counters[name] = {}
                series[labels] = series.get(labels, 0) + amount

    def count_topic(self, topic: str, items: Iterable[Tuple[str, float]], own: bool = True) -> None:
        """Add to topic metrics for all topics (the unlabelled sample) and, when ``own``, for
        ``topic`` itself (a name no partition here has gets no series: clients choose names)."""
        key = (topic,)
        self.inc_all(item for name, amount in items
                     for item in (((name, (), amount), (name, key, amount)) if own else ((name, (), amount),)))

    def forget_topic(self, topic: str) -> None:
        """Drop a deleted topic's own samples of the topic metrics (all topics' stay)."""
        key = (topic,)
        with self._lock:
            for name, series in self._counters.items():
                if self.definitions[name].labels == ("topic",):
                    series.pop(key, None)

    def observe(self, name: str, labels: Labels, value_ms: float) -> None:
        """Count a duration (milliseconds) into a histogram."""
        self.observe_all(((name, labels, value_ms),))

    def observe_all(self, items: Iterable[Tuple[str, Labels, float]]) -> None:
        """:meth:`observe` for several ``(name, labels, ms)`` under one lock."""
        with self._lock:
            histograms = self._histograms
            for name, labels, value_ms in items:
                series = histograms.get(name)
                if series is None:
                    series = histograms[name] = {}
                h = series.get(labels)
                if h is None:
                    h = series[labels] = _Histogram()
                h.counts[bisect.bisect_left(BUCKETS_MS, value_ms)] += 1
                h.sum += value_ms
                h.count += 1

    def add_collector(self, collector: Collector) -> None:
        """Read ``collector()`` at every scrape: it yields ``(name, labels, value)`` of gauges
        (and of counters kept by their owner, such as the cleaner's)."""
        with self._lock:
            self._collectors.append(collector)

    def remove_collector(self, collector: Collector) -> None:
        with self._lock:
            if collector in self._collectors:
                self._collectors.remove(collector)

    # -- reading --------------------------------------------------------------------

    def readings(self) -> Iterator[Tuple[str, Definition, str, Dict[str, str], float]]:
        """(family, definition, sample name, labels, value) of every sample, families in
        :attr:`definitions` order."""
        with self._lock:
            counters = {name: dict(series) for name, series in self._counters.items()}
            histograms = {name: {labels: (list(h.counts), h.sum, h.count) for labels, h in series.items()}
                          for name, series in self._histograms.items()}
            collectors = list(self._collectors)
        gauges: Dict[str, Dict[Labels, float]] = {}
        for collector in collectors:
            for name, labels, value in collector():
                series = gauges.setdefault(name, {})
                series[labels] = series.get(labels, 0) + value
        for name, definition in self.definitions.items():
            names = definition.labels
            if definition.kind == "counter":
                # A counter of the whole broker (or of all topics) is there from the start, at 0.
                merged: Dict[Labels, float] = {(): 0.0} if names in ((), (_TOPIC,)) else {}
                merged.update(counters.get(name, {}))
                for labels, value in gauges.get(name, {}).items():  # counted by their owner, read here
                    merged[labels] = merged.get(labels, 0) + value
                for labels, value in sorted(merged.items()):
                    yield name, definition, name + "_total", _label_dict(names, labels), value
            elif definition.kind == "gauge":
                for labels, value in sorted(gauges.get(name, {}).items()):
                    yield name, definition, name, _label_dict(names, labels), value
            else:
                # A histogram of the whole broker (the log flush time) is there from the start,
                # empty, as Kafka registers its timers: a broker that has not flushed yet (with
                # Kafka's defaults, until a segment rolls) shows no flushes, not no data.
                observed: Dict[Labels, Tuple[List[int], float, int]] = (
                    {(): ([0] * (len(BUCKETS_MS) + 1), 0.0, 0)} if not names else {})
                observed.update(histograms.get(name, {}))
                for labels, (counts, total, count) in sorted(observed.items()):
                    base = _label_dict(names, labels)
                    running = 0
                    for bound, n in zip(BUCKETS_MS + (float("inf"),), counts):
                        running += n
                        yield name, definition, name + "_bucket", dict(base, le=_bound(bound)), running
                    yield name, definition, name + "_sum", base, total
                    yield name, definition, name + "_count", base, count

    def samples(self) -> Dict[str, float]:
        """Every sample as the text format shows it: ``'name{label="v",...}'`` -> value."""
        out: Dict[str, float] = {}
        for _, _, sample, labels, value in self.readings():
            out[sample_key(sample, labels)] = value
        return out

    def collect(self) -> List[Any]:
        """prometheus-client's metric families (its ``Collector`` interface)."""
        from prometheus_client.metrics_core import Metric

        families: Dict[str, Any] = {}
        for name, definition, sample, labels, value in self.readings():
            family = families.get(name)
            if family is None:
                family = families[name] = Metric(name, definition.help, definition.kind)
            family.add_sample(sample, labels, value)
        return list(families.values())

    def exposition(self) -> bytes:
        """The Prometheus text format of every metric."""
        from prometheus_client.exposition import generate_latest

        return generate_latest(self)

    def serve(self, listener: str, setting: str = "metrics.listener") -> "MetricsServer":
        """Serve ``/metrics`` on ``listener`` (``http://host:port``; port 0 picks one); an
        error names ``setting``."""
        host, port = parse_listener(listener, setting)
        return MetricsServer(self, host, port, setting)


class MetricsServer:
    """prometheus-client's HTTP server for one registry, in a daemon thread of its own.

    ``metrics.listener`` in an error is the broker's setting; a tool serving its own
    registry names its option (``--metrics-listener``) with ``setting``."""

    def __init__(self, registry: MetricsRegistry, host: str, port: int, setting: str = "metrics.listener") -> None:
        from prometheus_client.exposition import start_http_server

        try:
            self._httpd, self._thread = start_http_server(port, host, registry=registry)
        except OSError as exc:
            raise ConfigError("%s: cannot listen on %s:%d: %s" % (setting, host, port, exc.strerror)) from None
        self.host = host
        self.port = int(self._httpd.server_port)

    @property
    def url(self) -> str:
        host = "[%s]" % self.host if ":" in self.host else self.host
        return "http://%s:%d/metrics" % (host, self.port)

    def close(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(5)


def parse_listener(text: str, setting: str = "metrics.listener") -> Tuple[str, int]:
    """(host, port) of a ``metrics.listener`` value: ``http://host:port``; an error names ``setting``."""
    from urllib.parse import urlsplit  # only when a listener is configured

    parts = urlsplit(text.strip())
    try:
        port = parts.port
    except ValueError:
        port = None
    if parts.scheme != "http" or not parts.hostname or port is None or parts.path not in ("", "/"):
        raise ConfigError("%s must be http://host:port (for example http://127.0.0.1:9404), got %r"
                          % (setting, text))
    return parts.hostname, port


def sample_key(name: str, labels: Dict[str, str]) -> str:
    if not labels:
        return name
    return "%s{%s}" % (name, ",".join('%s="%s"' % (k, _escape(v)) for k, v in sorted(labels.items())))


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _label_dict(names: Sequence[str], values: Labels) -> Dict[str, str]:
    if len(values) != len(names):
        return {}  # the all-topics sample of a topic metric
    return dict(zip(names, values))


def _bound(bound: float) -> str:
    if bound == float("inf"):
        return "+Inf"
    return repr(float(bound))
