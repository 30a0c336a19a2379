"""``pylogq.Consumer``: Kafka's consumer, shaped like kafka-python's ``KafkaConsumer``.

A consumer reads the partitions assigned to it, either by hand (``assign``)
or by its group (``subscribe`` with a ``group_id``: the group coordinator
splits the subscribed topics' partitions among the members with the
assignor they agree on). It talks to the broker only through a
:class:`~pylogq.client.transport.Transport`.

Positions and commits follow Kafka: a partition's position is the offset of
the next record ``poll`` returns, and a committed offset is the next offset
to read, so a restarted consumer resumes exactly after the last commit. A
partition without a position starts from the group's committed offset, or
else from ``auto_offset_reset`` (``earliest``, ``latest`` or ``none``, which
raises); a fetch answered OFFSET_OUT_OF_RANGE (retention deleted the range)
resets the same way.

Fetching: each ``poll`` sends at most one fetch per round over every
assigned, unpaused partition that has a position and no buffered records;
the broker holds the fetch until data arrives or the wait (bounded by the
poll's timeout) ends, so an idle poll sleeps. A fetched region is decoded
once into columns (:func:`pylogq.records.decode_columns`) and kept;
``ConsumerRecord`` tuples are built only for the records a poll returns
(at most ``max_poll_records``), the rest stay buffered.

Group membership runs from ``poll`` (join, the leader's assignment, sync)
with the poll's timeout, so a poll stays responsive while the other members
rejoin from their own polls; a heartbeat thread keeps the session alive and
flags the rebalances the coordinator announces. Not thread-safe, as Kafka's
consumer: one thread polls (the heartbeat thread touches only the group
generation, under a lock).

Following the cluster, as Kafka's consumer does: a subscription's metadata
(which topics exist, or match the pattern, and how many partitions each has)
is read again from ``poll`` every ``metadata_max_age_ms``, sooner after a
fetch or offset lookup fails with a retriable error, and every
``retry_backoff_ms`` doubling up to one second while a subscribed topic does
not exist (Kafka retries a topic its metadata does not know the same way).
Without a group the assignment is every partition of what the metadata
shows, so it follows topics created, deleted and grown. With a group, the
member that computed the assignment (the leader) compares the partition
counts of every member's topics with those it assigned from, and a member
whose pattern matches another set of topics compares that set with the one
it joined with; either change rejoins the group, which rebalances (Kafka's
``ConsumerCoordinator`` rejoins on the same two changes).
"""

from __future__ import annotations

import collections
import concurrent.futures
import logging
import math
import re
import threading
import time
from typing import (
    Any,
    Callable,
    Deque,
    Dict,
    Iterable,
    Iterator,
    List,
    Mapping,
    NamedTuple,
    Optional,
    Pattern,
    Sequence,
    Set,
    Tuple,
    Union,
)

from ..errors import (
    BrokerError,
    CommitFailedError,
    ConfigError,
    IllegalGenerationError,
    IllegalStateError,
    NoOffsetForPartitionError,
    OffsetOutOfRangeError,
    PylogqError,
    RebalanceInProgressError,
    RequestTimedOutError,
    UnknownMemberIdError,
    error_for_code,
)
from ..records import decode_columns, iter_batches
from ..cluster.names import validate_topic_name
from .assignors import (
    Assignment,
    PartitionAssignor,
    RangeAssignor,
    RoundRobinAssignor,
    assignor_for_name,
    decode_assignment,
    decode_subscription,
    encode_assignment,
)
from ..cluster.contract import TopicPartition
from .metrics import (
    AVG,
    COUNT,
    COUNT_RATE,
    FETCH_API_KEY,
    MAX,
    RATE,
    TOTAL,
    VALUE,
    MetricName,
    Metrics,
    NetworkSensors,
    Sensor,
)
from .transport import TCP_OPTIONS, Transport, connect

__all__ = [
    "CommitFailedError",
    "Consumer",
    "ConsumerRebalanceListener",
    "ConsumerRecord",
    "IllegalStateError",
    "NoOffsetForPartitionError",
    "OffsetAndMetadata",
    "OffsetAndTimestamp",
    "TopicPartition",
]

log = logging.getLogger("pylogq.consumer")

EARLIEST = -2
LATEST = -1
_REJOIN_CODES = (RebalanceInProgressError.code, UnknownMemberIdError.code, IllegalGenerationError.code)
# While a subscribed topic is missing, its metadata is asked for again after
# retry_backoff_ms, doubling up to this (Kafka's retry.backoff.max.ms default).
_METADATA_RETRY_MAX_S = 1.0


class OffsetAndMetadata(NamedTuple):
    """A committed offset (the next one to read) with its metadata string."""

    offset: int
    metadata: str
    leader_epoch: int


class OffsetAndTimestamp(NamedTuple):
    """The first offset whose timestamp is at or after a requested time, and that timestamp."""

    offset: int
    timestamp: int
    leader_epoch: int


class ConsumerRecord(NamedTuple):
    """One consumed record, with kafka-python's fields; key and value are deserialized.

    ``headers`` is a list of ``(key, value)`` pairs, or the shared empty tuple
    for a record without headers (a poll of many records then allocates no
    empty lists); ``leader_epoch`` is -1 and ``checksum`` None, as for v2 batches.
    """

    topic: str
    partition: int
    leader_epoch: int
    offset: int
    timestamp: int
    timestamp_type: int
    key: Any
    value: Any
    headers: Sequence[Tuple[str, Optional[bytes]]]  # a list; the shared () when the record has none
    checksum: Optional[int]
    serialized_key_size: int
    serialized_value_size: int
    serialized_header_size: int


class ConsumerRebalanceListener:
    """Callbacks around a group rebalance (kafka-python's shape); override either."""

    def on_partitions_revoked(self, revoked: Sequence[TopicPartition]) -> None:
        """Called before a rebalance, with the partitions this consumer gives up."""

    def on_partitions_assigned(self, assigned: Sequence[TopicPartition]) -> None:
        """Called after a rebalance, with this consumer's new partitions."""


class _Fetched:
    """One partition's decoded fetch: records ``index..count`` are not returned yet; ``size``
    bytes came over the wire."""

    __slots__ = ("columns", "data", "index", "count", "next_offset", "size")

    def __init__(self, columns: Any, data: bytes, next_offset: int, size: int) -> None:
        self.columns = columns
        self.data = data
        self.index = 0
        self.count = len(columns)
        self.next_offset = next_offset
        self.size = size


class _FetchManagerMetrics:
    """The consumer's fetch metrics (Kafka's ``FetchManagerMetrics``): per fetch and per poll.

    A fetch records its latency, bytes and records once its response is in;
    a poll records, per partition it returns records of, how many, their
    share of the fetched bytes, and the partition's lag behind the high
    watermark of its last fetch. Never per record.
    """

    GROUP = "consumer-fetch-manager-metrics"

    def __init__(self, metrics: Metrics, network: NetworkSensors) -> None:
        self.metrics = m = metrics
        group = self.GROUP
        self.latency = m.add_stats(m.sensor("fetch-latency"), group, [
            ("fetch-latency-avg", AVG, "The average time taken for a fetch request."),
            ("fetch-latency-max", MAX, "The max time taken for any fetch request."),
            ("fetch-rate", COUNT_RATE, "The number of fetch requests per second."),
            ("fetch-total", COUNT, "The total number of fetch requests."),
        ])
        self.bytes_fetched = m.add_stats(m.sensor("bytes-fetched"), group, [
            ("fetch-size-avg", AVG, "The average number of bytes fetched per request"),
            ("fetch-size-max", MAX, "The maximum number of bytes fetched per request"),
        ])
        self.records_fetched = m.add_stats(m.sensor("records-fetched"), group, [
            ("records-per-request-avg", AVG, "The average number of records in each request"),
        ])
        self.bytes_consumed = m.add_stats(m.sensor("bytes-consumed"), group, [
            ("bytes-consumed-rate", RATE, "The average number of bytes consumed per second"),
            ("bytes-consumed-total", TOTAL, "The total number of bytes consumed"),
        ])
        self.records_consumed = m.add_stats(m.sensor("records-consumed"), group, [
            ("records-consumed-rate", RATE, "The average number of records consumed per second"),
            ("records-consumed-total", TOTAL, "The total number of records consumed"),
        ])
        self.lag = m.add_stats(m.sensor("records-lag"), group, [
            ("records-lag-max", MAX, "The maximum lag in terms of number of records for any partition in this window"),
        ])
        self.throttle = m.add_stats(m.sensor("fetch-throttle-time"), group, [
            ("fetch-throttle-time-avg", AVG, "The average throttle time in ms"),
            ("fetch-throttle-time-max", MAX, "The maximum throttle time in ms"),
        ])
        network.api_throttle[FETCH_API_KEY] = self.throttle
        # topic -> bytes fetched, records fetched, bytes consumed, records consumed
        self._topics: Dict[str, Tuple[Sensor, Sensor, Sensor, Sensor]] = {}
        self._partitions: Dict[TopicPartition, Sensor] = {}

    def _topic(self, topic: str) -> Tuple[Sensor, Sensor, Sensor, Sensor]:
        found = self._topics.get(topic)
        if found is None:
            m = self.metrics
            tags = {"topic": topic}
            name = "topic." + topic + "."
            about = " for topic " + topic
            found = self._topics[topic] = (
                m.add_stats(m.sensor(name + "bytes-fetched"), self.GROUP, [
                    ("fetch-size-avg", AVG, "The average number of bytes fetched per request" + about),
                    ("fetch-size-max", MAX, "The maximum number of bytes fetched per request" + about)], tags),
                m.add_stats(m.sensor(name + "records-fetched"), self.GROUP, [
                    ("records-per-request-avg", AVG, "The average number of records in each request" + about)], tags),
                # A poll's records count here and, as parents, consumer-wide.
                m.add_stats(m.sensor(name + "bytes-consumed", [self.bytes_consumed]), self.GROUP, [
                    ("bytes-consumed-rate", RATE, "The average number of bytes consumed per second" + about),
                    ("bytes-consumed-total", TOTAL, "The total number of bytes consumed" + about)], tags),
                m.add_stats(m.sensor(name + "records-consumed", [self.records_consumed]), self.GROUP, [
                    ("records-consumed-rate", RATE, "The average number of records consumed per second" + about),
                    ("records-consumed-total", TOTAL, "The total number of records consumed" + about)], tags),
            )
        return found

    def _partition(self, tp: TopicPartition) -> Sensor:
        """The partition's lag sensor: Java's ``<topic>-<partition>.records-lag`` (and -max, -avg)."""
        found = self._partitions.get(tp)
        if found is None:
            m = self.metrics
            name = "%s-%d.records-lag" % tp
            found = self._partitions[tp] = m.add_stats(m.sensor(name), self.GROUP, [
                (name, VALUE, "The latest lag of the partition"),
                (name + "-max", MAX, "The max lag of the partition"),
                (name + "-avg", AVG, "The average lag of the partition")])
        return found

    def forget(self, tp: TopicPartition) -> None:
        """A partition left the assignment: its lag is no longer reported."""
        if self._partitions.pop(tp, None) is not None:
            self.metrics.remove_sensor("%s-%d.records-lag" % tp)

    def fetched(self, started: float, now: float, per_topic: Dict[str, List[int]]) -> None:
        """A fetch sent at ``started`` answered ``per_topic``: topic -> [bytes, records]."""
        topics = [(self._topic(topic), counts) for topic, counts in per_topic.items()]
        with self.metrics.lock:
            self.latency.record_locked((now - started) * 1000.0, now)
            self.bytes_fetched.record_locked(sum(c[0] for _, c in topics), now)
            self.records_fetched.record_locked(sum(c[1] for _, c in topics), now)
            for sensors, (nbytes, nrecords) in topics:
                sensors[0].record_locked(nbytes, now)
                sensors[1].record_locked(nrecords, now)

    def consumed(self, tp: TopicPartition, records: int, nbytes: int, lag: Optional[int]) -> None:
        """A poll returned ``records`` of ``tp`` (``nbytes`` of its fetch); ``lag`` records are left."""
        topic = self._topic(tp.topic)
        partition = self._partition(tp) if lag is not None else None
        now = time.monotonic()
        with self.metrics.lock:
            topic[2].record_locked(nbytes, now)
            topic[3].record_locked(records, now)
            if partition is not None:
                assert lag is not None
                self.lag.record_locked(lag, now)
                partition.record_locked(lag, now)


class _CoordinatorMetrics:
    """The consumer's group metrics (Kafka's ``ConsumerCoordinatorMetrics``): per request."""

    GROUP = "consumer-coordinator-metrics"

    def __init__(self, metrics: Metrics, consumer: "Consumer") -> None:
        m = metrics
        group = self.GROUP
        self.commit = m.add_stats(m.sensor("commit-latency"), group, [
            ("commit-latency-avg", AVG, "The average time taken for a commit request"),
            ("commit-latency-max", MAX, "The max time taken for a commit request"),
            ("commit-rate", COUNT_RATE, "The number of commit calls per second"),
            ("commit-total", COUNT, "The total number of commit calls"),
        ])
        self.heartbeat = m.add_stats(m.sensor("heartbeat-latency"), group, [
            ("heartbeat-response-time-max", MAX, "The max time taken to receive a response to a heartbeat request"),
            ("heartbeat-rate", COUNT_RATE, "The average number of heartbeats per second"),
            ("heartbeat-total", COUNT, "The total number of heartbeats"),
        ])
        self.join = m.add_stats(m.sensor("join-latency"), group, [
            ("join-time-avg", AVG, "The average time taken for a group rejoin"),
            ("join-time-max", MAX, "The max time taken for a group rejoin"),
            ("join-rate", COUNT_RATE, "The number of group joins per second"),
            ("join-total", COUNT, "The total number of group joins"),
        ])
        self.sync = m.add_stats(m.sensor("sync-latency"), group, [
            ("sync-time-avg", AVG, "The average time taken for a group sync"),
            ("sync-time-max", MAX, "The max time taken for a group sync"),
            ("sync-rate", COUNT_RATE, "The number of group syncs per second"),
            ("sync-total", COUNT, "The total number of group syncs"),
        ])
        m.add(MetricName("assigned-partitions", group, "The number of partitions currently assigned to this consumer"),
              lambda now: float(len(consumer._assignment)))
        m.add(MetricName("last-heartbeat-seconds-ago", group,
                         "The number of seconds since the last coordinator heartbeat was sent"),
              lambda now: now - consumer._last_heartbeat)


_AUTO_OFFSET_RESET = ("earliest", "latest", "none")
_ISOLATION_LEVELS = ("read_uncommitted", "read_committed")
# kafka-python keys accepted for compatibility whose behaviour is fixed in-process.
_COMPAT_KEYS = frozenset((
    "client_rack", "request_timeout_ms", "retry_backoff_ms", "reconnect_backoff_ms", "reconnect_backoff_max_ms",
    "max_in_flight_requests_per_connection", "check_crcs", "allow_auto_create_topics",
    "api_version", "connections_max_idle_ms", "enable_incremental_fetch_sessions", "group_instance_id",
    "default_offset_commit_callback", "metrics_enabled", "metrics_num_samples", "metrics_sample_window_ms",
    "security_protocol", "sasl_mechanism", "sasl_plain_username", "sasl_plain_password",
))


def _ms(name: str, value: Any, minimum: int = 0) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ConfigError("Invalid value %r for configuration %s: expected an integer >= %d" % (value, name, minimum))
    return value


def _as_tp(tp: Any) -> TopicPartition:
    if isinstance(tp, TopicPartition):
        return tp
    if isinstance(tp, tuple) and len(tp) == 2 and isinstance(tp[0], str) and isinstance(tp[1], int):
        return TopicPartition(tp[0], tp[1])
    raise TypeError("expected a TopicPartition (topic, partition), got %r" % (tp,))


class Consumer:
    """Reads records from assigned or group-subscribed partitions; see the module docstring.

    ``Consumer(*topics, broker=..., group_id=..., ...)``: keyword arguments are
    kafka-python's, with its defaults; an unknown one raises ConfigError.
    ``metadata_max_age_ms`` (300000, Kafka's) is how often a subscription's
    metadata is read again to follow created, deleted and grown topics.
    """

    def __init__(
        self,
        *topics: str,
        broker: Any = None,
        bootstrap_servers: Any = None,
        group_id: Optional[str] = None,
        client_id: str = "pylogq-consumer",
        key_deserializer: Optional[Callable[[bytes], Any]] = None,
        value_deserializer: Optional[Callable[[bytes], Any]] = None,
        auto_offset_reset: str = "latest",
        enable_auto_commit: bool = True,
        auto_commit_interval_ms: int = 5000,
        fetch_min_bytes: int = 1,
        fetch_max_wait_ms: int = 500,
        fetch_max_bytes: int = 52428800,
        max_partition_fetch_bytes: int = 1048576,
        max_poll_records: int = 500,
        max_poll_interval_ms: int = 300000,
        session_timeout_ms: int = 10000,
        heartbeat_interval_ms: int = 3000,
        partition_assignment_strategy: Sequence[Any] = (RangeAssignor, RoundRobinAssignor),
        isolation_level: str = "read_uncommitted",
        consumer_timeout_ms: float = float("inf"),
        exclude_internal_topics: bool = True,
        metadata_max_age_ms: int = 300000,
        **configs: Any,
    ) -> None:
        unknown = sorted(set(configs) - _COMPAT_KEYS)
        if unknown:
            raise ConfigError("Unrecognized consumer configuration: %s" % ", ".join(unknown))
        if auto_offset_reset in ("smallest", "largest"):
            auto_offset_reset = "earliest" if auto_offset_reset == "smallest" else "latest"
        if auto_offset_reset not in _AUTO_OFFSET_RESET:
            raise ConfigError("Invalid value %r for configuration auto_offset_reset: expected one of %s"
                              % (auto_offset_reset, ", ".join(_AUTO_OFFSET_RESET)))
        if isolation_level not in _ISOLATION_LEVELS:
            raise ConfigError("Invalid value %r for configuration isolation_level: expected one of %s"
                              % (isolation_level, ", ".join(_ISOLATION_LEVELS)))
        if group_id is not None and (not isinstance(group_id, str) or not group_id):
            raise ConfigError("Invalid value %r for configuration group_id: expected a non-empty string" % (group_id,))
        self.auto_offset_reset = auto_offset_reset
        self.isolation_level = isolation_level
        self.group_id = group_id
        self.client_id = client_id
        self.key_deserializer = key_deserializer
        self.value_deserializer = value_deserializer
        self.enable_auto_commit = bool(enable_auto_commit)
        self.auto_commit_interval_ms = _ms("auto_commit_interval_ms", auto_commit_interval_ms)
        self.fetch_min_bytes = _ms("fetch_min_bytes", fetch_min_bytes)
        self.fetch_max_wait_ms = _ms("fetch_max_wait_ms", fetch_max_wait_ms)
        self.fetch_max_bytes = _ms("fetch_max_bytes", fetch_max_bytes, 1)
        self.max_partition_fetch_bytes = _ms("max_partition_fetch_bytes", max_partition_fetch_bytes, 1)
        self.max_poll_records = _ms("max_poll_records", max_poll_records, 1)
        self.max_poll_interval_ms = _ms("max_poll_interval_ms", max_poll_interval_ms, 1)
        self.session_timeout_ms = _ms("session_timeout_ms", session_timeout_ms, 1)
        self.heartbeat_interval_ms = _ms("heartbeat_interval_ms", heartbeat_interval_ms, 1)
        if self.heartbeat_interval_ms >= self.session_timeout_ms:
            raise ConfigError("heartbeat_interval_ms (%d) must be lower than session_timeout_ms (%d)"
                              % (self.heartbeat_interval_ms, self.session_timeout_ms))
        if not (isinstance(consumer_timeout_ms, (int, float)) and consumer_timeout_ms >= 0):
            raise ConfigError("Invalid value %r for configuration consumer_timeout_ms" % (consumer_timeout_ms,))
        self.consumer_timeout_ms = consumer_timeout_ms
        self.exclude_internal_topics = bool(exclude_internal_topics)
        self.check_crcs = bool(configs.get("check_crcs", True))
        self.retry_backoff_s = _ms("retry_backoff_ms", configs.get("retry_backoff_ms", 100)) / 1000.0
        self.metadata_max_age_ms = _ms("metadata_max_age_ms", metadata_max_age_ms)
        self._commit_callback = configs.get("default_offset_commit_callback")
        self.assignors: List[PartitionAssignor] = [self._make_assignor(a) for a in partition_assignment_strategy]
        if not self.assignors:
            raise ConfigError("partition_assignment_strategy must name at least one assignor")
        self._metrics = Metrics(_ms("metrics_num_samples", configs.get("metrics_num_samples", 2), 1),
                                _ms("metrics_sample_window_ms", configs.get("metrics_sample_window_ms", 30000), 1),
                                enabled=bool(configs.get("metrics_enabled", True)))
        network = NetworkSensors(self._metrics, "consumer")
        self._fetch_sensors = _FetchManagerMetrics(self._metrics, network)
        self._group_sensors = _CoordinatorMetrics(self._metrics, self)
        self._last_heartbeat = float("-inf")  # monotonic; when the last heartbeat was sent
        self._join_started: Optional[float] = None  # the rejoin under way began (monotonic)
        self._sync_started: Optional[float] = None
        self._transport: Transport = connect(broker=broker, bootstrap_servers=bootstrap_servers, client_id=client_id,
                                             metrics=network, **{k: configs[k] for k in TCP_OPTIONS if k in configs})

        # Partitions and positions (touched only by the polling thread).
        self._assignment: List[TopicPartition] = []
        self._assigned: Set[TopicPartition] = set()
        self._manual = False
        self._positions: Dict[TopicPartition, Optional[int]] = {}
        self._paused: Set[TopicPartition] = set()
        self._buffered: "collections.OrderedDict[TopicPartition, _Fetched]" = collections.OrderedDict()
        self._highwater: Dict[TopicPartition, int] = {}
        self._backoff: Dict[TopicPartition, float] = {}
        self._subscription: Set[str] = set()
        self._pattern: Optional[Pattern[str]] = None
        # The subscription's metadata (see the module docstring): when to read it next (monotonic;
        # inf without a subscription), the wait after a refresh that found a topic missing, and
        # what the assignment was made from: without a group, topic -> partitions; in a group, the
        # topics this member joined with and, as the leader, the group's topics -> partitions.
        self._metadata_due = math.inf
        self._metadata_retry_s = 0.0
        self._metadata_snapshot: Optional[Dict[str, int]] = None
        self._joined_topics: Optional[Set[str]] = None
        self._group_topics: List[str] = []
        self._assignment_snapshot: Optional[Dict[str, int]] = None
        self._listener: Any = None
        self._iter_records: Deque[ConsumerRecord] = collections.deque()
        self._iter_final: Dict[TopicPartition, int] = {}
        self._next_auto_commit = time.monotonic() + self.auto_commit_interval_ms / 1000.0
        self._closed = False

        # Group membership: written by the polling thread, read and flagged by the heartbeat thread.
        self._group_lock = threading.Lock()
        self._wakeup = threading.Condition(self._group_lock)
        self._member_id = ""
        self._generation = -1
        self._rejoin_needed = False
        self._revoked = True
        self._pending_sync: Optional[Tuple[int, str, Optional[Dict[str, bytes]]]] = None
        self._heartbeat_thread: Optional[threading.Thread] = None
        self._stopping = False

        if topics:
            try:
                self.subscribe(topics)
            except BaseException:
                self.close()  # an illegal topic name: release the transport's connections
                raise

    @staticmethod
    def _make_assignor(spec: Any) -> PartitionAssignor:
        if isinstance(spec, PartitionAssignor):
            return spec
        if isinstance(spec, str):
            try:
                return assignor_for_name(spec)
            except ValueError as exc:
                raise ConfigError(str(exc)) from None
        if isinstance(spec, type) and issubclass(spec, PartitionAssignor):
            return spec()
        raise ConfigError("Invalid value %r for configuration partition_assignment_strategy: expected "
                          "PartitionAssignor classes or instances" % (spec,))

    # -- subscription and assignment -----------------------------------------------------

    def subscribe(self, topics: Iterable[str] = (), pattern: Optional[str] = None, listener: Any = None) -> None:
        """Subscribe to topics (or a regex ``pattern``); with a group_id the group assigns the partitions.

        Without a group_id every partition of the subscribed topics is assigned
        to this consumer. Topics that do not exist yet, or that a pattern will
        match later, and partitions added later are picked up as the metadata
        is refreshed (every ``metadata_max_age_ms``; see the module
        docstring). ``listener`` gets on_partitions_revoked /
        on_partitions_assigned around each rebalance. An illegal topic name
        raises InvalidTopicError naming it and the rule it breaks.
        """
        self._check_open()
        if isinstance(topics, str):
            topics = [topics]
        topic_list = list(topics)
        if self._manual:
            raise IllegalStateError("subscription to topics and manual assignment are mutually exclusive")
        if topic_list and pattern is not None:
            raise IllegalStateError("give topics or a pattern, not both")
        if not topic_list and pattern is None:
            raise IllegalStateError("give topics or a pattern to subscribe to")
        for topic in topic_list:
            if not isinstance(topic, str):
                raise TypeError("topic names must be strings, got %r" % (topic,))
            validate_topic_name(topic)
        if listener is not None and not (hasattr(listener, "on_partitions_revoked")
                                         and hasattr(listener, "on_partitions_assigned")):
            raise TypeError("listener must have on_partitions_revoked and on_partitions_assigned")
        self._pattern = re.compile(pattern) if pattern is not None else None
        self._subscription = set(topic_list)
        self._listener = listener
        self._forget_metadata(due=0.0)
        with self._group_lock:
            self._rejoin_needed = True

    def subscription(self) -> Optional[Set[str]]:
        """The subscribed topics (for a pattern, the topics it matched at the last rebalance); None if none."""
        if not self._subscription and self._pattern is None:
            return None
        return set(self._subscription)

    def unsubscribe(self) -> None:
        """Drop the subscription (or manual assignment) and leave the group."""
        self._check_open()
        if self._assignment and not self._manual:
            self._revoke()
        self._leave_group()
        self._subscription = set()
        self._pattern = None
        self._listener = None
        self._manual = False
        self._forget_metadata(due=math.inf)
        self._set_assignment([])
        with self._group_lock:
            self._rejoin_needed = False

    def assign(self, partitions: Iterable[Any]) -> None:
        """Read exactly these partitions (no group rebalancing); replaces any previous assignment.

        An illegal topic name raises InvalidTopicError naming it and the rule it breaks.
        """
        self._check_open()
        tps = [_as_tp(tp) for tp in partitions]
        for tp in tps:
            validate_topic_name(tp.topic)
        if self._subscription or self._pattern is not None:
            raise IllegalStateError("subscription to topics and manual assignment are mutually exclusive")
        self._manual = bool(tps)
        self._set_assignment(tps)

    def assignment(self) -> Set[TopicPartition]:
        """The partitions this consumer reads now."""
        return set(self._assignment)

    def _set_assignment(self, tps: Sequence[TopicPartition]) -> None:
        new = list(dict.fromkeys(tps))
        keep = set(new)
        for tp in self._assigned - keep:
            self._fetch_sensors.forget(tp)
        self._reset_iteration()
        self._positions = {tp: self._positions.get(tp) for tp in new}
        self._paused &= keep
        for tp in [tp for tp in self._buffered if tp not in keep]:
            del self._buffered[tp]
        self._assignment = new
        self._assigned = keep

    # -- positions --------------------------------------------------------------------------

    def _require_assigned(self, partition: Any) -> TopicPartition:
        tp = _as_tp(partition)
        if tp not in self._assigned:
            raise IllegalStateError("partition %s-%d is not assigned to this consumer" % tp)
        return tp

    def seek(self, partition: Any, offset: int) -> None:
        """Make ``offset`` the next offset the consumer reads from ``partition``."""
        tp = self._require_assigned(partition)
        if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
            raise ValueError("offset must be an integer >= 0, got %r" % (offset,))
        self._set_position(tp, offset)

    def _set_position(self, tp: TopicPartition, offset: Optional[int]) -> None:
        self._reset_iteration()
        self._buffered.pop(tp, None)
        self._positions[tp] = offset

    def seek_to_beginning(self, *partitions: Any) -> None:
        """Seek to the log start offset of each partition (all assigned ones when none given)."""
        for tp in self._seek_targets(partitions):
            self._set_position(tp, self._list_offset(tp, EARLIEST))

    def seek_to_end(self, *partitions: Any) -> None:
        """Seek to the end (the high watermark) of each partition (all assigned ones when none given)."""
        for tp in self._seek_targets(partitions):
            self._set_position(tp, self._list_offset(tp, LATEST))

    def _seek_targets(self, partitions: Sequence[Any]) -> List[TopicPartition]:
        if not partitions:
            return list(self._assignment)
        return [self._require_assigned(tp) for tp in partitions]

    def position(self, partition: Any) -> int:
        """The offset of the next record the consumer returns for ``partition``."""
        tp = self._require_assigned(partition)
        if self._positions.get(tp) is None:
            self._resolve_positions([tp])
        position = self._positions[tp]
        assert position is not None
        return position

    def highwater(self, partition: Any) -> Optional[int]:
        """The high watermark seen in the last fetch of ``partition`` (None before one)."""
        return self._highwater.get(self._require_assigned(partition))

    def _list_offset(self, tp: TopicPartition, timestamp: int) -> int:
        offset, _ = self._transport.list_offsets(tp.topic, tp.partition, timestamp)
        return offset

    def _reset_offset(self, tp: TopicPartition, cause: Optional[str] = None) -> None:
        """Apply ``auto_offset_reset`` to ``tp``."""
        if self.auto_offset_reset == "none":
            if cause is not None:
                raise OffsetOutOfRangeError(cause)
            raise NoOffsetForPartitionError(
                "partition %s-%d has no committed offset and auto_offset_reset is 'none'" % tp)
        self._positions[tp] = self._list_offset(tp, EARLIEST if self.auto_offset_reset == "earliest" else LATEST)

    def _resolve_positions(self, tps: Sequence[TopicPartition], defer_retriable: bool = False) -> None:
        """Give each partition without a position its committed offset, or reset it.

        With ``defer_retriable`` (the fetch path), a reset that fails with a
        retriable error (a topic just created whose leader is not known yet,
        say) leaves the partition without a position for a retry backoff and
        asks for fresh metadata, as Kafka's consumer retries its offset resets.
        """
        committed: Dict[Tuple[str, int], Tuple[int, Any, int]] = {}
        if self.group_id is not None:
            committed = self._transport.fetch_offsets(self.group_id, [(tp.topic, tp.partition) for tp in tps])
        for tp in tps:
            found = committed.get((tp.topic, tp.partition))
            if found is not None and found[0] >= 0:
                self._positions[tp] = found[0]
                continue
            try:
                self._reset_offset(tp)
            except BrokerError as exc:
                if not (defer_retriable and exc.retriable):
                    raise
                log.info("resetting the offset of %s-%d failed (%s); retrying after %.0f ms", tp.topic, tp.partition,
                         exc, self.retry_backoff_s * 1000)
                self._backoff[tp] = time.monotonic() + self.retry_backoff_s
                self._request_metadata_update()

    # -- pause / resume ---------------------------------------------------------------------

    def pause(self, *partitions: Any) -> None:
        """Stop returning and fetching records of these partitions until resumed."""
        for tp in partitions:
            self._paused.add(self._require_assigned(tp))

    def resume(self, *partitions: Any) -> None:
        """Resume partitions paused with :meth:`pause`."""
        for tp in partitions:
            self._paused.discard(_as_tp(tp))

    def paused(self) -> Set[TopicPartition]:
        return set(self._paused)

    # -- polling -------------------------------------------------------------------------------

    def poll(self, timeout_ms: float = 0, max_records: Optional[int] = None,
             update_offsets: bool = True) -> Dict[TopicPartition, List[ConsumerRecord]]:
        """Records per partition, at most ``max_records`` (default ``max_poll_records``) in all.

        Returns as soon as records are available, else after ``timeout_ms``
        (waiting asleep, in the broker's fetch or on the consumer's
        condition). Positions advance past the returned records unless
        ``update_offsets`` is false.
        """
        self._check_open()
        if isinstance(timeout_ms, bool) or not isinstance(timeout_ms, (int, float)) or timeout_ms < 0:
            raise ValueError("timeout_ms must be a number >= 0, got %r" % (timeout_ms,))
        limit = self.max_poll_records if max_records is None else max_records
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            raise ValueError("max_records must be an integer >= 1, got %r" % (max_records,))
        deadline = time.monotonic() + timeout_ms / 1000.0
        while True:
            self._maybe_refresh_metadata()
            self._poll_group(deadline)
            if self.enable_auto_commit:
                self._maybe_auto_commit()
            records = self._drain(limit, update_offsets)
            if records:
                return records
            # An idle wait ends in time for the next metadata refresh.
            wake = min(deadline, self._metadata_due) if self._watching_metadata() else deadline
            self._fetch(max(0, math.ceil((wake - time.monotonic()) * 1000)))
            records = self._drain(limit, update_offsets)
            if records or time.monotonic() >= deadline:
                return records

    def _fetch(self, max_wait_ms: int) -> None:
        """One fetch over every fetchable partition; waits asleep up to ``max_wait_ms`` for data."""
        now = time.monotonic()
        need = [tp for tp in self._assignment if self._positions.get(tp) is None and tp not in self._paused
                and self._backoff.get(tp, now) <= now]
        if need:
            self._resolve_positions(need, defer_retriable=True)
        now = time.monotonic()
        requests: List[Tuple[str, int, int, int]] = []
        backoff_until = None
        for tp in self._assignment:
            if tp in self._paused or tp in self._buffered:
                continue
            until = self._backoff.get(tp)
            if until is not None:
                if until > now:
                    backoff_until = until if backoff_until is None else min(backoff_until, until)
                    continue
                del self._backoff[tp]
            position = self._positions.get(tp)
            if position is None:  # its backoff ended after the offsets were looked up: look again now
                backoff_until = now
                continue
            requests.append((tp.topic, tp.partition, position, self.max_partition_fetch_bytes))
        if not requests:
            wait_s = max_wait_ms / 1000.0
            if backoff_until is not None:
                wait_s = min(wait_s, max(0.0, backoff_until - now))
            if wait_s > 0:
                with self._wakeup:
                    if not self._rejoin_needed:
                        self._wakeup.wait(wait_s)
            return
        wait_ms = min(max_wait_ms, self.fetch_max_wait_ms)
        started = time.monotonic()
        results = self._transport.fetch(requests, wait_ms, self.fetch_min_bytes, self.fetch_max_bytes,
                                        self.isolation_level)
        answered = time.monotonic()
        per_topic: Dict[str, List[int]] = {}  # topic -> [bytes, records] of this fetch
        try:
            for topic, index, offset, _ in requests:
                result = results.get((topic, index))
                tp = TopicPartition(topic, index)
                if result is None or self._positions.get(tp) != offset or tp not in self._assigned:
                    continue  # reassigned or seeked while the fetch was out
                if result.error_code:
                    self._on_fetch_error(tp, offset, result)
                    continue
                self._highwater[tp] = result.high_watermark
                counts = per_topic.get(topic)
                if counts is None:
                    counts = per_topic[topic] = [0, 0]
                region = result.records
                if region is None or len(region) == 0:
                    continue
                data = region.read()
                columns = decode_columns(data, check_crc=self.check_crcs, start_offset=offset)
                next_offset = offset
                for info in iter_batches(data):
                    next_offset = info.last_offset + 1
                counts[0] += len(data)
                counts[1] += len(columns)
                if len(columns):
                    buffer = columns.data
                    if not isinstance(buffer, bytes):
                        buffer = bytes(buffer)
                    self._buffered[tp] = _Fetched(columns, buffer, max(next_offset, offset), len(data))
                elif next_offset > offset:
                    self._positions[tp] = next_offset  # only control batches or compacted-away records
        finally:
            self._fetch_sensors.fetched(started, answered, per_topic)

    def _on_fetch_error(self, tp: TopicPartition, offset: int, result: Any) -> None:
        code = result.error_code
        if code == OffsetOutOfRangeError.code:
            log.info("fetch offset %d of %s-%d is out of range [%d, %d]; resetting (%s)", offset, tp.topic,
                     tp.partition, result.log_start_offset, result.high_watermark, self.auto_offset_reset)
            self._reset_offset(tp, cause="fetch offset %d of %s-%d is out of range (log start %d, high watermark "
                                          "%d) and auto_offset_reset is 'none'"
                               % (offset, tp.topic, tp.partition, result.log_start_offset, result.high_watermark))
            return
        cls = error_for_code(code)
        if cls is not None and cls.retriable:
            # A leader moved, the topic was deleted or is not known yet: back off and read
            # the metadata again (Kafka's consumer requests a metadata update on these errors).
            self._backoff[tp] = time.monotonic() + self.retry_backoff_s
            self._request_metadata_update()
            return
        raise (cls or BrokerError)("fetching %s-%d at offset %d" % (tp.topic, tp.partition, offset))

    def _drain(self, limit: int, update_offsets: bool) -> Dict[TopicPartition, List[ConsumerRecord]]:
        """Up to ``limit`` buffered records, partition by partition in turn."""
        out: Dict[TopicPartition, List[ConsumerRecord]] = {}
        if not self._buffered:
            return out
        for tp in list(self._buffered):
            if tp in self._paused:
                continue
            fetched = self._buffered[tp]
            lo = fetched.index
            hi = min(fetched.count, lo + limit)
            records = self._build(tp, fetched, lo, hi)
            fetched.index = hi
            if hi >= fetched.count:
                del self._buffered[tp]
                new_position = fetched.next_offset
            else:
                self._buffered.move_to_end(tp)  # the next poll starts with another partition
                new_position = records[-1].offset + 1
            if update_offsets:
                self._positions[tp] = new_position
            else:
                self._iter_final[tp] = new_position
            highwater = self._highwater.get(tp)
            size, count = fetched.size, fetched.count
            self._fetch_sensors.consumed(tp, hi - lo, size * hi // count - size * lo // count,
                                         None if highwater is None else highwater - new_position)
            out[tp] = records
            limit -= hi - lo
            if limit <= 0:
                break
        return out

    def _build(self, tp: TopicPartition, fetched: _Fetched, lo: int, hi: int) -> List[ConsumerRecord]:
        """ConsumerRecord tuples for rows ``lo..hi`` (at least one) of a decoded fetch.

        The common shape (no headers, no null values, one timestamp type, no
        deserializers) takes one comprehension per record; records without
        headers share the empty tuple, so a large poll allocates no empty
        lists for the collector to trace.
        """
        cols = fetched.columns
        data = fetched.data
        topic, partition = tp
        new = tuple.__new__
        record = ConsumerRecord
        offsets = cols.offsets[lo:hi].tolist()
        timestamps = cols.timestamps[lo:hi].tolist()
        key_len = cols.key_length[lo:hi]
        value_len = cols.value_length[lo:hi]
        value_sizes = value_len.tolist()
        value_starts = cols.value_start[lo:hi].tolist()
        header_counts = cols.headers_count[lo:hi]
        types = cols.timestamp_types[lo:hi]
        tt = int(types[0])
        if (self.key_deserializer is None and self.value_deserializer is None and not header_counts.any()
                and int(value_len.min()) >= 0 and int(types.max()) == tt == int(types.min())):
            if int(key_len.max()) < 0:
                return [new(record, (topic, partition, -1, o, t, tt, None, data[s:s + n], (), None, -1, n, -1))
                        for o, t, s, n in zip(offsets, timestamps, value_starts, value_sizes)]
            if int(key_len.min()) >= 0:
                return [new(record, (topic, partition, -1, o, t, tt, data[ks:ks + kn], data[s:s + n], (), None, kn,
                                     n, -1))
                        for o, t, ks, kn, s, n in zip(offsets, timestamps, cols.key_start[lo:hi].tolist(),
                                                       key_len.tolist(), value_starts, value_sizes)]
        key_sizes = key_len.tolist()
        key_starts = cols.key_start[lo:hi].tolist()
        keys: List[Any] = [None if k < 0 else data[s:s + k] for s, k in zip(key_starts, key_sizes)]
        values: List[Any] = [None if k < 0 else data[s:s + k] for s, k in zip(value_starts, value_sizes)]
        if header_counts.any():
            headers: List[Any] = [cols.headers(i) if c else () for i, c in zip(range(lo, hi), header_counts.tolist())]
            header_sizes: List[int] = [
                sum(len(k.encode("utf-8")) + (len(v) if v is not None else 0) for k, v in h) if h else -1
                for h in headers]
        else:
            headers = [()] * (hi - lo)
            header_sizes = [-1] * (hi - lo)
        if self.key_deserializer is not None:
            kd = self.key_deserializer
            keys = [None if k is None else kd(k) for k in keys]
        if self.value_deserializer is not None:
            vd = self.value_deserializer
            values = [None if v is None else vd(v) for v in values]
        return [new(record, (topic, partition, -1, o, t, y, k, v, h, None, ks, vs, hs))
                for o, t, y, k, v, h, ks, vs, hs in zip(offsets, timestamps, types.tolist(), keys, values, headers,
                                                         key_sizes, value_sizes, header_sizes)]

    # -- iteration --------------------------------------------------------------------------------

    def __iter__(self) -> Iterator[ConsumerRecord]:
        return self

    def __next__(self) -> ConsumerRecord:
        """The next record; StopIteration after ``consumer_timeout_ms`` without one.

        Positions advance record by record, so an auto commit never covers a
        record the iteration has not handed out.
        """
        if not self._iter_records:
            self._fill_iteration()
        record = self._iter_records.popleft()
        tp = TopicPartition(record.topic, record.partition)
        self._positions[tp] = record.offset + 1
        if not self._iter_records:
            for final_tp, position in self._iter_final.items():
                if final_tp in self._assigned:
                    self._positions[final_tp] = position
            self._iter_final.clear()
        return record

    def _fill_iteration(self) -> None:
        deadline = None
        if self.consumer_timeout_ms != float("inf"):
            deadline = time.monotonic() + self.consumer_timeout_ms / 1000.0
        while True:
            wait_ms: float = max(self.fetch_max_wait_ms, 1)
            if deadline is not None:
                remaining_s = deadline - time.monotonic()
                if remaining_s <= 0:
                    raise StopIteration
                wait_ms = min(wait_ms, remaining_s * 1000.0)
            polled = self.poll(timeout_ms=wait_ms, update_offsets=False)
            for records in polled.values():
                self._iter_records.extend(records)
            if self._iter_records:
                return

    def _reset_iteration(self) -> None:
        """Drop records polled for iteration but not handed out; their positions were not advanced."""
        if self._iter_records or self._iter_final:
            self._iter_records.clear()
            self._iter_final.clear()
            self._buffered.clear()

    # -- offsets ---------------------------------------------------------------------------------

    def _require_group(self) -> str:
        if self.group_id is None:
            raise IllegalStateError("committing and reading committed offsets need a group_id")
        return self.group_id

    def committed(self, partition: Any, metadata: bool = False) -> Union[int, OffsetAndMetadata, None]:
        """The group's committed offset (the next to read) for ``partition``; None if none."""
        group_id = self._require_group()
        tp = _as_tp(partition)
        found = self._transport.fetch_offsets(group_id, [(tp.topic, tp.partition)]).get((tp.topic, tp.partition))
        if found is None or found[0] < 0:
            return None
        if found[2]:
            raise (error_for_code(found[2]) or BrokerError)("reading the committed offset of %s-%d" % tp)
        return OffsetAndMetadata(found[0], found[1] or "", -1) if metadata else found[0]

    def _current_offsets(self) -> Dict[TopicPartition, OffsetAndMetadata]:
        return {tp: OffsetAndMetadata(pos, "", -1) for tp, pos in self._positions.items()
                if pos is not None and tp in self._assigned}

    def commit(self, offsets: Optional[Mapping[Any, Any]] = None) -> None:
        """Commit ``offsets`` ({tp: OffsetAndMetadata or int}; default: every position) for the group."""
        group_id = self._require_group()
        to_commit = self._current_offsets() if offsets is None else {
            _as_tp(tp): (v if isinstance(v, OffsetAndMetadata) else OffsetAndMetadata(int(v), "", -1))
            for tp, v in offsets.items()}
        if not to_commit:
            return
        with self._group_lock:
            generation, member_id = self._commit_identity()
        started = time.monotonic()
        codes = self._transport.commit_offsets(
            group_id, generation, member_id,
            {(tp.topic, tp.partition): (om.offset, om.metadata) for tp, om in to_commit.items()})
        self._group_sensors.commit.record((time.monotonic() - started) * 1000.0)
        failed = {tp: code for tp, code in codes.items() if code}
        if not failed:
            return
        code = next(iter(failed.values()))
        if code in _REJOIN_CODES:
            self._flag_rejoin(generation, reset_member=code == UnknownMemberIdError.code)
            raise CommitFailedError(
                "commit of %s failed: the group rebalanced (%s); the partitions may have been reassigned"
                % (sorted(failed), error_for_code(code).name))  # type: ignore[union-attr]
        raise (error_for_code(code) or BrokerError)("committing offsets of %s" % sorted(failed))

    def _commit_identity(self) -> Tuple[int, str]:
        if self._manual or self._generation < 0:
            return -1, ""
        return self._generation, self._member_id

    def commit_async(self, offsets: Optional[Mapping[Any, Any]] = None,
                     callback: Optional[Callable[[Any, Any], Any]] = None) -> "concurrent.futures.Future[Any]":
        """Commit as :meth:`commit` does; -> a completed Future; ``callback(offsets, exception or None)``."""
        future: "concurrent.futures.Future[Any]" = concurrent.futures.Future()
        snapshot = self._current_offsets() if offsets is None else dict(offsets)
        try:
            self.commit(snapshot)
        except PylogqError as exc:
            future.set_exception(exc)
            result: Any = exc
        else:
            future.set_result(None)
            result = None
        callback = callback or self._commit_callback
        if callback is not None:
            callback(snapshot, result)
        return future

    def _maybe_auto_commit(self) -> None:
        if self.group_id is None:
            return
        now = time.monotonic()
        if now < self._next_auto_commit:
            return
        self._next_auto_commit = now + self.auto_commit_interval_ms / 1000.0
        self._auto_commit()

    def _auto_commit(self) -> None:
        try:
            self.commit()
        except (CommitFailedError, BrokerError) as exc:
            log.warning("auto commit of group %s failed: %s", self.group_id, exc)

    def beginning_offsets(self, partitions: Iterable[Any]) -> Dict[TopicPartition, int]:
        """The log start offset of each partition."""
        return {tp: self._list_offset(tp, EARLIEST) for tp in map(_as_tp, partitions)}

    def end_offsets(self, partitions: Iterable[Any]) -> Dict[TopicPartition, int]:
        """The end offset (high watermark: the offset of the next record written) of each partition."""
        return {tp: self._list_offset(tp, LATEST) for tp in map(_as_tp, partitions)}

    def offsets_for_times(self, timestamps: Mapping[Any, int]) -> Dict[TopicPartition, Optional[OffsetAndTimestamp]]:
        """The first offset whose timestamp is >= the given one (ms), per partition; None if none is that late."""
        out: Dict[TopicPartition, Optional[OffsetAndTimestamp]] = {}
        for tp, ts in timestamps.items():
            tp = _as_tp(tp)
            if isinstance(ts, bool) or not isinstance(ts, int) or ts < 0:
                raise ValueError("timestamp for %s-%d must be an integer >= 0 (ms), got %r" % (tp + (ts,)))
            offset, found_ts = self._transport.list_offsets(tp.topic, tp.partition, ts)
            out[tp] = None if offset < 0 else OffsetAndTimestamp(offset, found_ts, -1)
        return out

    # -- metadata ----------------------------------------------------------------------------------

    def topics(self) -> Set[str]:
        """Every topic the broker has (internal ones excluded)."""
        return set(self._transport.list_topics())

    def partitions_for_topic(self, topic: str) -> Optional[Set[int]]:
        """The partition ids of ``topic``; None when it does not exist (InvalidTopicError for an illegal name)."""
        count = self._transport.partitions_for(validate_topic_name(topic))
        return None if count is None else set(range(count))

    def metrics(self, raw: bool = False) -> Dict[Any, Any]:
        """The consumer's metrics, kafka-python's ``KafkaConsumer.metrics()``: ``{group: {name: value}}``.

        With ``raw``, ``{MetricName: Metric}`` instead, each metric read when
        its ``value()`` is called (:mod:`pylogq.client.metrics`). Windowed
        stats cover ``metrics_num_samples`` samples of
        ``metrics_sample_window_ms`` (2 of 30 s): ``-avg`` and ``-max`` over
        the events in them, ``-rate`` per second; ``-total`` counts since the
        consumer started (Java's names). Sizes are bytes, times ms.

        ``consumer-fetch-manager-metrics``: per fetch (one per poll round,
        over every fetchable partition), ``fetch-latency-avg``/``-max``,
        ``fetch-rate``/``-total``, ``fetch-size-avg``/``-max`` (bytes of
        records fetched), ``records-per-request-avg``; per poll, as records
        are returned, ``records-consumed-rate``/``-total`` and
        ``bytes-consumed-rate``/``-total`` (the returned records' share of
        their fetch's bytes); ``records-lag-max``, and per assigned partition
        ``<topic>-<partition>.records-lag`` (the latest), ``...-max`` and
        ``...-avg``: the high watermark of the partition's last fetch minus
        the position after the records a poll returned (Java's per-partition
        names; kafka-python keeps only the max); ``fetch-throttle-time-avg``/``-max``
        (Fetch responses' throttle times). The same per topic, tagged
        ``{"topic": topic}``: ``fetch-size-avg``/``-max``,
        ``records-per-request-avg``, ``bytes-consumed-rate``/``-total``,
        ``records-consumed-rate``/``-total``, filed under
        ``consumer-fetch-manager-metrics.<topic>``.

        ``consumer-coordinator-metrics``: ``commit-latency-avg``/``-max``,
        ``commit-rate``/``-total`` (per commit request),
        ``heartbeat-response-time-max``, ``heartbeat-rate``/``-total``,
        ``join-time-avg``/``-max``, ``join-rate``/``-total`` (a rejoin timed
        from its first JoinGroup to the successful answer, across polls),
        ``sync-time-avg``/``-max``, ``sync-rate``/``-total``,
        ``assigned-partitions``, ``last-heartbeat-seconds-ago`` (inf before
        the first).

        ``consumer-metrics``, the transport's, per request:
        ``request-rate``/``-total``, ``request-size-avg``/``-max``,
        ``outgoing-byte-rate``/``-total``, ``response-rate``/``-total``,
        ``incoming-byte-rate``/``-total``, ``request-latency-avg``/``-max``,
        ``throttle-time-avg``/``-max``. Over TCP these count every request
        on the wire, and again per broker in ``consumer-node-metrics.node-<id>``;
        in process each call to the broker counts, timed around the call,
        with no bytes and no node groups.

        A max over windows without events is -inf, an average 0.0 (as
        kafka-python). ``metrics_enabled=False``: nothing is kept, ``{}``.
        """
        return self._metrics.snapshot(raw)

    # -- subscription metadata ---------------------------------------------------------------------

    def _group_managed(self) -> bool:
        return bool(self._subscription or self._pattern is not None) and not self._manual

    def _forget_metadata(self, due: float) -> None:
        """The subscription changed: nothing was assigned from metadata yet; refresh at ``due``."""
        self._metadata_due = due
        self._metadata_retry_s = 0.0
        self._metadata_snapshot = None
        self._joined_topics = None
        self._group_topics = []
        self._assignment_snapshot = None

    def _watching_metadata(self) -> bool:
        """Whether ``poll`` refreshes the metadata when it is due: for a subscription, and in a
        group only between rebalances (a join reads the metadata afresh, then restarts the timer)."""
        if not self._group_managed():
            return False
        if self.group_id is None:
            return True
        return self._joined_topics is not None and not self._rejoin_needed and self._pending_sync is None

    def _schedule_metadata(self, missing: bool) -> None:
        """Refresh next after ``metadata_max_age_ms``, or sooner, backing off, while a topic is ``missing``;
        never sooner than ``retry_backoff_ms`` (Kafka's refresh backoff)."""
        wait = self.metadata_max_age_ms / 1000.0
        if missing:
            self._metadata_retry_s = min(max(self._metadata_retry_s * 2, self.retry_backoff_s), _METADATA_RETRY_MAX_S)
            wait = min(wait, self._metadata_retry_s)
        else:
            self._metadata_retry_s = 0.0
        self._metadata_due = time.monotonic() + max(wait, self.retry_backoff_s)

    def _request_metadata_update(self) -> None:
        """An error says the metadata may be stale (Kafka's ``requestUpdate``): refresh after a backoff."""
        self._metadata_due = min(self._metadata_due, time.monotonic() + self.retry_backoff_s)

    def _maybe_refresh_metadata(self) -> None:
        """Read the subscription's metadata when due and follow it (see the module docstring).

        A retriable failure (no broker reachable, a leader being elected) is
        logged and retried after a backoff; any other (InvalidTopicError,
        an authorization error) is raised from ``poll``.
        """
        if time.monotonic() < self._metadata_due or not self._watching_metadata():
            return
        try:
            missing = self._refresh_metadata()
        except BrokerError as exc:
            if not exc.retriable:
                raise
            log.warning("reading the metadata of the subscribed topics failed (%s); retrying", exc)
            missing = True
        self._schedule_metadata(missing)

    def _matched_topics(self) -> List[str]:
        """The existing topics the subscription's pattern matches (internal ones only if allowed)."""
        pattern = self._pattern
        assert pattern is not None
        return sorted(t for t in self._transport.list_topics() if pattern.match(t)
                      and not (self.exclude_internal_topics and t.startswith("__")))

    def _partition_counts(self, topics: Iterable[str]) -> Dict[str, int]:
        """Topic -> partition count, for those of ``topics`` that exist."""
        counts: Dict[str, int] = {}
        for topic in topics:
            count = self._transport.partitions_for(topic)
            if count:
                counts[topic] = count
        return counts

    def _refresh_metadata(self) -> bool:
        """Compare the metadata with what the assignment was made from and follow a change:
        without a group, assign what it shows; in a group, rejoin. True when a topic
        subscribed by name (or, for the leader, by a member) does not exist."""
        topics = self._matched_topics() if self._pattern is not None else sorted(self._subscription)
        if self.group_id is None:
            counts = self._partition_counts(topics)
            if self._pattern is not None:
                self._subscription = set(topics)
            if counts != self._metadata_snapshot:
                if self._metadata_snapshot is not None:
                    log.info("subscribed topics changed from %s to %s (topic: partitions); reassigning",
                             self._metadata_snapshot, counts)
                self._metadata_snapshot = counts
                self._set_assignment([TopicPartition(t, p) for t in sorted(counts) for p in range(counts[t])])
            return self._pattern is None and len(counts) < len(topics)
        reason = None
        if self._pattern is not None and set(topics) != self._joined_topics:
            reason = "its pattern now matches %s" % topics
        missing = False
        if self._assignment_snapshot is not None:  # the leader watches every member's topics
            counts = self._partition_counts(self._group_topics)
            missing = len(counts) < len(self._group_topics)
            if counts != self._assignment_snapshot and reason is None:
                reason = "the group's topics changed from %s to %s (topic: partitions)" % (
                    self._assignment_snapshot, counts)
        if reason is not None:
            log.info("group %s: rejoining: %s", self.group_id, reason)
            with self._group_lock:
                self._rejoin_needed = True
        return missing

    # -- group membership --------------------------------------------------------------------------

    def _subscribed_topics(self) -> List[str]:
        """The topics to join with: the subscribed ones, or those the pattern matches now."""
        if self._pattern is None:
            return sorted(self._subscription)
        matched = self._matched_topics()
        self._subscription = set(matched)
        return matched

    def _poll_group(self, deadline: float) -> None:
        """Bring the assignment up to date: rejoin the group when a rebalance was flagged."""
        if not self._rejoin_needed and self._pending_sync is None:
            return
        if not self._group_managed():
            return
        if self.group_id is None:  # the metadata refresh assigns; nothing to join
            with self._group_lock:
                self._rejoin_needed = False
            return
        while True:
            if self._pending_sync is None:
                if not self._revoked:
                    self._revoke()
                if not self._join(deadline):
                    return
            if self._sync(deadline):
                return
            if time.monotonic() >= deadline:
                return

    def _revoke(self) -> None:
        """Before a rejoin: commit what was consumed, tell the listener, drop the partitions."""
        self._revoked = True
        revoked = list(self._assignment)
        if self.enable_auto_commit and self.group_id is not None:
            self._auto_commit()
        if self._listener is not None:
            try:
                self._listener.on_partitions_revoked(revoked)
            except Exception:
                log.exception("on_partitions_revoked of group %s failed", self.group_id)
        self._set_assignment([])

    def _join(self, deadline: float) -> bool:
        """Send JoinGroup (and, as the leader, compute the assignments); False when the poll's time ran out."""
        group_id = self._require_group()
        topics = self._subscribed_topics()
        protocols = [(a.name, a.metadata(topics)) for a in self.assignors]
        with self._group_lock:
            self._rejoin_needed = True
            member_id = self._member_id
        if self._join_started is None:
            self._join_started = time.monotonic()
        while True:
            remaining = max(0.0, deadline - time.monotonic())
            result = self._transport.join_group(
                group_id, member_id, self.client_id, self.session_timeout_ms, self.max_poll_interval_ms,
                "consumer", protocols, timeout_s=remaining)
            code = result.error_code
            if code == 0:
                break
            if code == UnknownMemberIdError.code and member_id:
                member_id = ""
                with self._group_lock:
                    self._member_id = ""
                continue
            if code == RequestTimedOutError.code:
                with self._group_lock:
                    self._member_id = result.member_id or member_id
                return False
            if code in (RebalanceInProgressError.code, IllegalGenerationError.code) and time.monotonic() < deadline:
                continue
            if code in _REJOIN_CODES:
                return False
            self._join_started = None
            raise (error_for_code(code) or BrokerError)("joining group %s" % group_id)
        self._group_sensors.join.record((time.monotonic() - self._join_started) * 1000.0)
        self._join_started = None
        assignments: Optional[Dict[str, bytes]] = None
        self._joined_topics = set(topics)
        self._assignment_snapshot = None
        if result.member_id == result.leader_id:
            assignments = self._leader_assign(result.protocol_name, result.members)
        self._schedule_metadata(self._assignment_snapshot is not None
                                and len(self._assignment_snapshot) < len(self._group_topics))
        with self._group_lock:
            self._member_id = result.member_id
            self._generation = result.generation_id
        self._pending_sync = (result.generation_id, result.protocol_name or "", assignments)
        return True

    def _assignor(self, name: str) -> PartitionAssignor:
        for a in self.assignors:
            if a.name == name:
                return a
        raise IllegalStateError("the group chose assignor %r, which this consumer does not have" % name)

    def _leader_assign(self, protocol: Optional[str], members: Sequence[Tuple[str, Optional[str], bytes]]
                       ) -> Dict[str, bytes]:
        assignor = self._assignor(protocol or "")
        subscriptions = {mid: decode_subscription(meta) for mid, _, meta in members}
        self._group_topics = sorted({t for s in subscriptions.values() for t in s.topics})
        cluster: Dict[str, int] = self._partition_counts(self._group_topics)
        self._assignment_snapshot = dict(cluster)
        result = assignor.assign(cluster, subscriptions)
        return {mid: encode_assignment(a.partitions, a.user_data) for mid, a in result.items()}

    def _sync(self, deadline: float) -> bool:
        """Send SyncGroup; on success take the assignment. True when done (or the poll's time ran out)."""
        assert self._pending_sync is not None
        generation, protocol, assignments = self._pending_sync
        remaining = max(0.0, deadline - time.monotonic())
        if self._sync_started is None:
            self._sync_started = time.monotonic()
        result = self._transport.sync_group(self._require_group(), generation, self._member_id, assignments,
                                            timeout_s=remaining)
        code = result.error_code
        if code == RequestTimedOutError.code:
            return True
        if code == 0:
            self._group_sensors.sync.record((time.monotonic() - self._sync_started) * 1000.0)
        self._sync_started = None
        self._pending_sync = None
        if code in _REJOIN_CODES:
            self._flag_rejoin(generation, reset_member=code == UnknownMemberIdError.code)
            return False
        if code:
            raise (error_for_code(code) or BrokerError)("syncing group %s" % self.group_id)
        assignment: Assignment = decode_assignment(result.assignment)
        self._assignor(protocol).on_assignment(assignment, generation)
        tps = [TopicPartition(t, p) for t, ps in sorted(assignment.partitions.items()) for p in ps]
        self._positions = {}
        self._set_assignment(tps)
        with self._group_lock:
            if self._generation == generation:
                self._rejoin_needed = False
            self._revoked = False
        self._ensure_heartbeat()
        if self._listener is not None:
            try:
                self._listener.on_partitions_assigned(list(tps))
            except Exception:
                log.exception("on_partitions_assigned of group %s failed", self.group_id)
        return True

    def _flag_rejoin(self, generation: int, reset_member: bool = False) -> None:
        with self._group_lock:
            if generation != self._generation:
                return
            self._rejoin_needed = True
            if reset_member:
                self._member_id = ""
                self._generation = -1
            self._wakeup.notify_all()

    def _ensure_heartbeat(self) -> None:
        if self._heartbeat_thread is None:
            self._heartbeat_thread = threading.Thread(
                target=self._run_heartbeat, name="pylogq-heartbeat-%s" % self.client_id, daemon=True)
            self._heartbeat_thread.start()

    def _run_heartbeat(self) -> None:
        interval = self.heartbeat_interval_ms / 1000.0
        group_id = self.group_id
        assert group_id is not None
        while True:
            with self._wakeup:
                if self._stopping:
                    return
                self._wakeup.wait(interval)
                if self._stopping:
                    return
                if self._rejoin_needed or not self._member_id or self._generation < 0:
                    continue
                generation, member_id = self._generation, self._member_id
            started = self._last_heartbeat = time.monotonic()
            code = self._transport.heartbeat(group_id, generation, member_id)
            self._group_sensors.heartbeat.record((time.monotonic() - started) * 1000.0)
            if code in _REJOIN_CODES:
                log.info("group %s: heartbeat answered %s; rejoining on the next poll", group_id,
                         error_for_code(code).name)  # type: ignore[union-attr]
                self._flag_rejoin(generation, reset_member=code == UnknownMemberIdError.code)
            elif code:
                log.warning("group %s: heartbeat failed with error code %d", group_id, code)

    def _leave_group(self) -> None:
        with self._wakeup:
            member_id = self._member_id
            self._member_id = ""
            self._generation = -1
            self._stopping = True
            self._wakeup.notify_all()
        thread = self._heartbeat_thread
        if thread is not None and thread is not threading.current_thread():
            thread.join()
        self._heartbeat_thread = None
        with self._wakeup:
            self._stopping = False
        self._pending_sync = None
        self._join_started = self._sync_started = None
        self._revoked = True
        if member_id and self.group_id is not None:
            code = self._transport.leave_group(self.group_id, member_id)
            if code and code != UnknownMemberIdError.code:
                log.warning("leaving group %s failed with error code %d", self.group_id, code)

    # -- lifecycle ---------------------------------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise IllegalStateError("this consumer is closed")

    def close(self, autocommit: bool = True) -> None:
        """Commit (with ``enable_auto_commit`` and ``autocommit``), leave the group, release the transport."""
        if self._closed:
            return
        try:
            if autocommit and self.enable_auto_commit and self.group_id is not None and self._assignment:
                self._auto_commit()
        finally:
            self._closed = True
            self._leave_group()
            self._transport.close()

    def __enter__(self) -> "Consumer":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return "Consumer(group_id=%r, client_id=%r, assignment=%d partitions)" % (
            self.group_id, self.client_id, len(self._assignment))
