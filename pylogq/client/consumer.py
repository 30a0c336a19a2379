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

The parts, split as Kafka's Java client and aiokafka split theirs, with
``Consumer`` the facade over them that keeps the public methods:
:class:`~pylogq.client.subscription_state.SubscriptionState` (the
subscription, the assignment, positions and pauses),
:class:`~pylogq.client.fetcher.Fetcher` (fetches, buffered records, offset
resets and lookups) and
:class:`~pylogq.client.consumer_coordinator.ConsumerCoordinator` (join,
sync, heartbeats, leave, commits and the metadata following above).
"""

from __future__ import annotations

import collections
import concurrent.futures
import math
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
    Optional,
    Sequence,
    Set,
    Union,
)

from ..errors import (
    ConfigError,
    IllegalStateError,
    InvalidArgumentError,
)
from ..records import decode_columns
from ..cluster.names import validate_topic_name
from .assignors import (
    PartitionAssignor,
    RangeAssignor,
    RoundRobinAssignor,
    assignor_for_name,
)
from ..cluster.contract import TopicPartition
from .consumer_coordinator import (
    ConsumerCoordinator,
    ConsumerGroupMetadata,
    ConsumerRebalanceListener,
    CoordinatorMetrics,
    OffsetAndMetadata,
)
from .fetcher import EARLIEST, LATEST, ConsumerRecord, FetchManagerMetrics, Fetcher, OffsetAndTimestamp
from .metrics import Metrics, NetworkSensors
from .subscription_state import SubscriptionState, as_tp
from .transport import TCP_OPTIONS, Transport, connect

__all__ = ["Consumer", "ConsumerGroupMetadata", "ConsumerRebalanceListener", "ConsumerRecord", "OffsetAndMetadata",
           "OffsetAndTimestamp", "TopicPartition"]


_AUTO_OFFSET_RESET = ("earliest", "latest", "none")
_ISOLATION_LEVELS = ("read_uncommitted", "read_committed")
# kafka-python keys accepted for compatibility whose behaviour is fixed in-process.
_COMPAT_KEYS = frozenset((
    "request_timeout_ms", "retry_backoff_ms", "reconnect_backoff_ms", "reconnect_backoff_max_ms",
    "max_in_flight_requests_per_connection", "check_crcs", "allow_auto_create_topics",
    "api_version", "connections_max_idle_ms", "enable_incremental_fetch_sessions", "group_instance_id",
    "default_offset_commit_callback", "metrics_enabled", "metrics_num_samples", "metrics_sample_window_ms",
)) | frozenset(TCP_OPTIONS)  # the TCP transport's: security_protocol and its SASL and SSL keys


def _ms(name: str, value: Any, minimum: int = 0) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ConfigError("Invalid value %r for configuration %s: expected an integer >= %d" % (value, name, minimum))
    return value


class Consumer:
    """Reads records from assigned or group-subscribed partitions; see the module docstring.

    ``Consumer(*topics, broker=..., group_id=..., ...)``: keyword arguments are
    kafka-python's, with its defaults; an unknown one raises ConfigError.
    ``metadata_max_age_ms`` (300000, Kafka's) is how often a subscription's
    metadata is read again to follow created, deleted and grown topics.
    ``client_rack`` (Kafka's ``client.rack``, kafka-python's ``client_rack``) names the
    consumer's rack: over TCP, a leader whose brokers set ``replica.selector.class``
    may send its fetches of a partition to a replica in that rack (KIP-392), for
    ``metadata_max_age_ms`` or until that replica answers an error (see
    :mod:`pylogq.client.tcp`). A consumer given ``broker=`` reads from that broker alone.
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
        client_rack: Optional[str] = None,
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
        if isinstance(client_rack, int) and not isinstance(client_rack, bool):
            client_rack = str(client_rack)  # a properties file's client.rack=1 (the tools type it an int)
        if client_rack is not None and not isinstance(client_rack, str):
            raise ConfigError("Invalid value %r for configuration client_rack: expected a string" % (client_rack,))
        self.client_rack = client_rack
        commit_callback = configs.get("default_offset_commit_callback")
        self.assignors: List[PartitionAssignor] = [self._make_assignor(a) for a in partition_assignment_strategy]
        if not self.assignors:
            raise ConfigError("partition_assignment_strategy must name at least one assignor")
        self._metrics = Metrics(_ms("metrics_num_samples", configs.get("metrics_num_samples", 2), 1),
                                _ms("metrics_sample_window_ms", configs.get("metrics_sample_window_ms", 30000), 1),
                                enabled=bool(configs.get("metrics_enabled", True)))
        network = NetworkSensors(self._metrics, "consumer")
        # Partitions, positions and pauses (touched only by the polling thread).
        self._subscriptions = SubscriptionState()
        fetch_sensors = FetchManagerMetrics(self._metrics, network)
        group_sensors = CoordinatorMetrics(self._metrics, self._subscriptions)
        self._transport: Transport = connect(broker=broker, bootstrap_servers=bootstrap_servers, client_id=client_id,
                                             metrics=network, client_rack=client_rack,
                                             metadata_max_age_ms=self.metadata_max_age_ms,
                                             **{k: configs[k] for k in TCP_OPTIONS if k in configs})
        # Group membership, commits and the subscription's metadata; its heartbeat thread and the
        # polling thread share the membership under the coordinator's group lock.
        self._coordinator = ConsumerCoordinator(
            self._transport, self._subscriptions, group_sensors, self._set_assignment, group_id=group_id,
            client_id=client_id, assignors=self.assignors, session_timeout_ms=self.session_timeout_ms,
            max_poll_interval_ms=self.max_poll_interval_ms, heartbeat_interval_ms=self.heartbeat_interval_ms,
            enable_auto_commit=self.enable_auto_commit, auto_commit_interval_ms=self.auto_commit_interval_ms,
            commit_callback=commit_callback, metadata_max_age_ms=self.metadata_max_age_ms,
            retry_backoff_s=self.retry_backoff_s, exclude_internal_topics=self.exclude_internal_topics)
        # decode_columns is looked up here, in this module, so a caller that swaps this module's
        # decode_columns (the consumer benchmark's kernels) swaps the fetcher's.
        self._fetcher = Fetcher(
            self._transport, self._subscriptions, fetch_sensors, self._coordinator.request_metadata_update,
            group_id=group_id, auto_offset_reset=self.auto_offset_reset, isolation_level=self.isolation_level,
            fetch_min_bytes=self.fetch_min_bytes, fetch_max_wait_ms=self.fetch_max_wait_ms,
            fetch_max_bytes=self.fetch_max_bytes, max_partition_fetch_bytes=self.max_partition_fetch_bytes,
            check_crcs=self.check_crcs, retry_backoff_s=self.retry_backoff_s,
            key_deserializer=self.key_deserializer, value_deserializer=self.value_deserializer,
            decode=decode_columns)
        self._iter_records: Deque[ConsumerRecord] = collections.deque()
        self._iter_final: Dict[TopicPartition, int] = {}
        self._closed = False

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
        self._subscriptions.subscribe(topics, pattern, listener)
        self._coordinator.forget_metadata(due=0.0)
        self._coordinator.set_rejoin_needed(True)

    def subscription(self) -> Optional[Set[str]]:
        """The subscribed topics (for a pattern, the topics it matched at the last rebalance); None if none."""
        if not self._subscriptions.subscribed():
            return None
        return set(self._subscriptions.subscription)

    def unsubscribe(self) -> None:
        """Drop the subscription (or manual assignment) and leave the group."""
        self._check_open()
        if self._subscriptions.assignment and not self._subscriptions.manual:
            self._coordinator.revoke()
        self._coordinator.leave_group()
        self._subscriptions.unsubscribe()
        self._coordinator.forget_metadata(due=math.inf)
        self._set_assignment([])
        self._coordinator.set_rejoin_needed(False)

    def assign(self, partitions: Iterable[Any]) -> None:
        """Read exactly these partitions (no group rebalancing); replaces any previous assignment.

        An illegal topic name raises InvalidTopicError naming it and the rule it breaks.
        """
        self._check_open()
        tps = [as_tp(tp) for tp in partitions]
        for tp in tps:
            validate_topic_name(tp.topic)
        if self._subscriptions.subscribed():
            raise IllegalStateError("subscription to topics and manual assignment are mutually exclusive")
        self._subscriptions.manual = bool(tps)
        self._set_assignment(tps)

    def assignment(self) -> Set[TopicPartition]:
        """The partitions this consumer reads now."""
        return set(self._subscriptions.assignment)

    def _set_assignment(self, tps: Sequence[TopicPartition]) -> None:
        """Assign ``tps``: positions and pauses of partitions kept stay, buffered records of the others go."""
        new = list(dict.fromkeys(tps))
        keep = set(new)
        self._fetcher.forget(self._subscriptions.assigned - keep)
        self._reset_iteration()
        self._subscriptions.set_assignment(new)
        self._fetcher.retain(keep)

    # -- positions --------------------------------------------------------------------------

    def seek(self, partition: Any, offset: int) -> None:
        """Make ``offset`` the next offset the consumer reads from ``partition``."""
        tp = self._subscriptions.require_assigned(partition)
        if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
            raise InvalidArgumentError("offset must be an integer >= 0, not %r" % (offset,))
        self._set_position(tp, offset)

    def _set_position(self, tp: TopicPartition, offset: Optional[int]) -> None:
        self._reset_iteration()
        self._fetcher.discard(tp)
        self._subscriptions.positions[tp] = offset

    def seek_to_beginning(self, *partitions: Any) -> None:
        """Seek to the log start offset of each partition (all assigned ones when none given)."""
        for tp in self._seek_targets(partitions):
            self._set_position(tp, self._fetcher.list_offset(tp, EARLIEST))

    def seek_to_end(self, *partitions: Any) -> None:
        """Seek to the end (the high watermark) of each partition (all assigned ones when none given)."""
        for tp in self._seek_targets(partitions):
            self._set_position(tp, self._fetcher.list_offset(tp, LATEST))

    def _seek_targets(self, partitions: Sequence[Any]) -> List[TopicPartition]:
        if not partitions:
            return list(self._subscriptions.assignment)
        return [self._subscriptions.require_assigned(tp) for tp in partitions]

    def position(self, partition: Any) -> int:
        """The offset of the next record the consumer returns for ``partition``."""
        tp = self._subscriptions.require_assigned(partition)
        if self._subscriptions.positions.get(tp) is None:
            self._fetcher.resolve_positions([tp])
        position = self._subscriptions.positions[tp]
        assert position is not None
        return position

    def highwater(self, partition: Any) -> Optional[int]:
        """The high watermark seen in the last fetch of ``partition`` (None before one)."""
        return self._fetcher.highwater(self._subscriptions.require_assigned(partition))

    # -- pause / resume ---------------------------------------------------------------------

    def pause(self, *partitions: Any) -> None:
        """Stop returning and fetching records of these partitions until resumed."""
        for tp in partitions:
            self._subscriptions.paused.add(self._subscriptions.require_assigned(tp))

    def resume(self, *partitions: Any) -> None:
        """Resume partitions paused with :meth:`pause`."""
        for tp in partitions:
            self._subscriptions.paused.discard(as_tp(tp))

    def paused(self) -> Set[TopicPartition]:
        return set(self._subscriptions.paused)

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
            raise InvalidArgumentError("timeout_ms must be a number >= 0, not %r" % (timeout_ms,))
        limit = self.max_poll_records if max_records is None else max_records
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            raise InvalidArgumentError("max_records must be an integer >= 1, not %r" % (max_records,))
        deadline = time.monotonic() + timeout_ms / 1000.0
        while True:
            self._coordinator.maybe_refresh_metadata()
            self._coordinator.poll(deadline)
            if self.enable_auto_commit:
                self._coordinator.maybe_auto_commit()
            records = self._drain(limit, update_offsets)
            if records:
                return records
            # An idle wait ends in time for the next metadata refresh.
            wake = min(deadline, self._coordinator.metadata_due) if self._coordinator.watching_metadata() else deadline
            self._fetch(max(0, math.ceil((wake - time.monotonic()) * 1000)))
            records = self._drain(limit, update_offsets)
            if records or time.monotonic() >= deadline:
                return records

    def _fetch(self, max_wait_ms: int) -> None:
        """One fetch over every fetchable partition; waits asleep up to ``max_wait_ms`` for data."""
        idle_s = self._fetcher.fetch(max_wait_ms)
        if idle_s > 0:
            self._coordinator.wait_idle(idle_s)

    def _drain(self, limit: int, update_offsets: bool) -> Dict[TopicPartition, List[ConsumerRecord]]:
        """Up to ``limit`` buffered records, partition by partition in turn."""
        return self._fetcher.drain(limit, None if update_offsets else self._iter_final)

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
        positions = self._subscriptions.positions
        positions[tp] = record.offset + 1
        if not self._iter_records:
            for final_tp, position in self._iter_final.items():
                if final_tp in self._subscriptions.assigned:
                    positions[final_tp] = position
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
            self._fetcher.clear()

    # -- offsets ---------------------------------------------------------------------------------

    def committed(self, partition: Any, metadata: bool = False) -> Union[int, OffsetAndMetadata, None]:
        """The group's committed offset (the next to read) for ``partition``; None if none."""
        return self._coordinator.committed(partition, metadata)

    def commit(self, offsets: Optional[Mapping[Any, Any]] = None) -> None:
        """Commit ``offsets`` ({tp: OffsetAndMetadata or int}; default: every position) for the group."""
        self._coordinator.commit(offsets)

    def commit_async(self, offsets: Optional[Mapping[Any, Any]] = None,
                     callback: Optional[Callable[[Any, Any], Any]] = None) -> "concurrent.futures.Future[Any]":
        """Commit as :meth:`commit` does; -> a completed Future; ``callback(offsets, exception or None)``."""
        return self._coordinator.commit_async(offsets, callback)

    def beginning_offsets(self, partitions: Iterable[Any]) -> Dict[TopicPartition, int]:
        """The log start offset of each partition."""
        return self._fetcher.beginning_offsets(partitions)

    def end_offsets(self, partitions: Iterable[Any]) -> Dict[TopicPartition, int]:
        """The end offset of each partition: the high watermark (the offset of the next record
        written), or the last stable offset for a read_committed consumer, as Kafka's consumer."""
        return self._fetcher.end_offsets(partitions)

    def offsets_for_times(self, timestamps: Mapping[Any, int]) -> Dict[TopicPartition, Optional[OffsetAndTimestamp]]:
        """The first offset whose timestamp is >= the given one (ms), per partition; None if none is that late."""
        return self._fetcher.offsets_for_times(timestamps)

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

    def consumer_group_metadata(self) -> ConsumerGroupMetadata:
        """The group membership a transactional producer's ``send_offsets_to_transaction``
        takes (Kafka's ``groupMetadata()``, confluent-kafka's name): the group id, and the
        generation and member id of the last join, so the coordinator refuses the offsets
        once this consumer is no longer the partitions' owner. Needs a ``group_id``."""
        self._check_open()
        return self._coordinator.group_metadata()

    # -- group membership, as tests and tools see it -------------------------------------------------

    @property
    def _member_id(self) -> str:
        """The member id of the last join ("" outside the group)."""
        return self._coordinator.member_id

    @property
    def _generation(self) -> int:
        """The generation of the last join (-1 outside the group)."""
        return self._coordinator.generation

    # -- lifecycle ---------------------------------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise IllegalStateError("this consumer is closed")

    def close(self, autocommit: bool = True) -> None:
        """Commit (with ``enable_auto_commit`` and ``autocommit``), leave the group, release the transport."""
        if self._closed:
            return
        try:
            if (autocommit and self.enable_auto_commit and self.group_id is not None
                    and self._subscriptions.assignment):
                self._coordinator.auto_commit()
        finally:
            self._closed = True
            self._coordinator.leave_group()
            self._transport.close()

    def __enter__(self) -> "Consumer":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return "Consumer(group_id=%r, client_id=%r, assignment=%d partitions)" % (
            self.group_id, self.client_id, len(self._subscriptions.assignment))
