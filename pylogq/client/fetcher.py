"""The consumer's fetcher (Kafka's ``Fetcher`` and ``OffsetFetcher``): fetches, buffered records, offset lookups.

Each poll round sends at most one fetch over every assigned, unpaused
partition that has a position and no buffered records (see
:mod:`pylogq.client.consumer`). A fetched region is decoded once into
columns (:func:`pylogq.records.decode_columns`) and kept; ``ConsumerRecord``
tuples are built only for the records a poll returns (at most
``max_poll_records``), the rest stay buffered. A partition without a
position starts from the group's committed offset, or else from
``auto_offset_reset``; a fetch answered OFFSET_OUT_OF_RANGE resets the same
way, and one answered a retriable error backs the partition off and asks for
fresh metadata. Also here: the fetch metrics and the offset lookups by time
and to either end of a log.
"""

from __future__ import annotations

import collections
import logging
import time
from typing import AbstractSet, Any, Callable, Dict, Iterable, List, Mapping, NamedTuple, Optional, Sequence, Tuple

from ..cluster.contract import TopicPartition
from ..errors import BrokerError, InvalidArgumentError, NoOffsetForPartitionError, OffsetOutOfRangeError, error_for_code
from ..records import decode_columns, iter_batches

_TRANSACTIONAL, _CONTROL = 0x10, 0x20  # a v2 batch's attribute bits
from .metrics import (
    AVG,
    COUNT,
    COUNT_RATE,
    FETCH_API_KEY,
    MAX,
    RATE,
    TOTAL,
    VALUE,
    Metrics,
    NetworkSensors,
    Sensor,
)
from .subscription_state import SubscriptionState, as_tp
from .transport import Transport

__all__ = ["EARLIEST", "LATEST", "ConsumerRecord", "FetchManagerMetrics", "Fetcher", "OffsetAndTimestamp"]

log = logging.getLogger("pylogq.consumer")

EARLIEST = -2
LATEST = -1


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


def _without_aborted(data: bytes, aborted: Sequence[Tuple[int, int]]) -> bytes:
    """A read_committed fetch's batches without those of its aborted transactions, as Kafka's
    consumer drops them: a producer's transaction is aborted from the first offset the broker
    listed up to that producer's next control batch (its ABORT marker)."""
    pending = sorted(aborted, key=lambda txn: txn[1])  # (producer id, first offset)
    aborting: "set[int]" = set()
    kept: List[bytes] = []
    view = memoryview(data)
    i = 0
    for info in iter_batches(data):
        if not info.attributes & _TRANSACTIONAL:
            kept.append(view[info.position:info.position + info.size].tobytes())
            continue
        while i < len(pending) and pending[i][1] <= info.last_offset:
            aborting.add(pending[i][0])
            i += 1
        if info.attributes & _CONTROL:
            aborting.discard(info.producer_id)  # the marker ends the transaction (and is skipped anyway)
            kept.append(view[info.position:info.position + info.size].tobytes())
        elif info.producer_id not in aborting:
            kept.append(view[info.position:info.position + info.size].tobytes())
    return b"".join(kept)


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


class FetchManagerMetrics:
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


class Fetcher:
    """Builds the consumer's fetches, buffers their decoded records and looks offsets up.

    Invariant: a partition has buffered records only while it is assigned and
    its position is the offset its buffer's first unreturned record follows
    from (a seek or a reassignment drops the buffer); a partition with
    buffered records is not fetched again until they are returned.

    Not thread-safe: used only by the polling thread. It never takes the
    group lock; :meth:`fetch` returns how long to wait idle instead of
    waiting, and the consumer waits on its group condition.
    """

    def __init__(self, transport: Transport, subscriptions: SubscriptionState, sensors: FetchManagerMetrics,
                 request_metadata_update: Callable[[], None], *, group_id: Optional[str], auto_offset_reset: str,
                 isolation_level: str, fetch_min_bytes: int, fetch_max_wait_ms: int, fetch_max_bytes: int,
                 max_partition_fetch_bytes: int, check_crcs: bool, retry_backoff_s: float,
                 key_deserializer: Optional[Callable[[bytes], Any]],
                 value_deserializer: Optional[Callable[[bytes], Any]],
                 decode: Callable[..., Any] = decode_columns) -> None:
        self._transport = transport
        self._subscriptions = subscriptions
        self._sensors = sensors
        # An error says the metadata may be stale: the coordinator's refresh comes sooner.
        self._request_metadata_update = request_metadata_update
        self._decode = decode
        self.group_id = group_id
        self.auto_offset_reset = auto_offset_reset
        self.isolation_level = isolation_level
        self.fetch_min_bytes = fetch_min_bytes
        self.fetch_max_wait_ms = fetch_max_wait_ms
        self.fetch_max_bytes = fetch_max_bytes
        self.max_partition_fetch_bytes = max_partition_fetch_bytes
        self.check_crcs = check_crcs
        self.retry_backoff_s = retry_backoff_s
        self.key_deserializer = key_deserializer
        self.value_deserializer = value_deserializer
        self._buffered: "collections.OrderedDict[TopicPartition, _Fetched]" = collections.OrderedDict()
        self._highwater: Dict[TopicPartition, int] = {}
        self._backoff: Dict[TopicPartition, float] = {}

    # -- buffered records ----------------------------------------------------------------------------

    def forget(self, tps: Iterable[TopicPartition]) -> None:
        """These partitions left the assignment: their lag is no longer reported."""
        for tp in tps:
            self._sensors.forget(tp)

    def retain(self, keep: AbstractSet[TopicPartition]) -> None:
        """Drop the buffered records of every partition not in ``keep``."""
        for tp in [tp for tp in self._buffered if tp not in keep]:
            del self._buffered[tp]

    def discard(self, tp: TopicPartition) -> None:
        """Drop ``tp``'s buffered records (its position is about to change)."""
        self._buffered.pop(tp, None)

    def clear(self) -> None:
        """Drop every buffered record."""
        self._buffered.clear()

    def highwater(self, tp: TopicPartition) -> Optional[int]:
        """The high watermark seen in the last fetch of ``tp`` (None before one)."""
        return self._highwater.get(tp)

    # -- positions -------------------------------------------------------------------------------------

    def list_offset(self, tp: TopicPartition, timestamp: int) -> int:
        """The offset ListOffsets answers for ``timestamp`` (or EARLIEST, LATEST) in ``tp``."""
        offset, _ = self._transport.list_offsets(tp.topic, tp.partition, timestamp, self.isolation_level)
        return offset

    def _reset_offset(self, tp: TopicPartition, cause: Optional[str] = None) -> None:
        """Apply ``auto_offset_reset`` to ``tp``."""
        if self.auto_offset_reset == "none":
            if cause is not None:
                raise OffsetOutOfRangeError(cause)
            raise NoOffsetForPartitionError(
                "partition %s-%d has no committed offset and auto_offset_reset is 'none'" % tp)
        self._subscriptions.positions[tp] = self.list_offset(
            tp, EARLIEST if self.auto_offset_reset == "earliest" else LATEST)

    def resolve_positions(self, tps: Sequence[TopicPartition], defer_retriable: bool = False) -> None:
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
                self._subscriptions.positions[tp] = found[0]
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

    # -- fetching ----------------------------------------------------------------------------------------

    def fetch(self, max_wait_ms: int) -> float:
        """One fetch over every fetchable partition, held by the broker up to ``max_wait_ms`` for data.

        -> 0.0, or, when there was nothing to fetch, how long (seconds) to wait
        idle before the next round: the consumer waits on its group condition,
        which a flagged rebalance wakes.
        """
        state = self._subscriptions
        now = time.monotonic()
        need = [tp for tp in state.assignment if state.positions.get(tp) is None and tp not in state.paused
                and self._backoff.get(tp, now) <= now]
        if need:
            self.resolve_positions(need, defer_retriable=True)
        now = time.monotonic()
        requests: List[Tuple[str, int, int, int]] = []
        backoff_until = None
        for tp in state.assignment:
            if tp in state.paused or tp in self._buffered:
                continue
            until = self._backoff.get(tp)
            if until is not None:
                if until > now:
                    backoff_until = until if backoff_until is None else min(backoff_until, until)
                    continue
                del self._backoff[tp]
            position = state.positions.get(tp)
            if position is None:  # its backoff ended after the offsets were looked up: look again now
                backoff_until = now
                continue
            requests.append((tp.topic, tp.partition, position, self.max_partition_fetch_bytes))
        if not requests:
            wait_s = max_wait_ms / 1000.0
            if backoff_until is not None:
                wait_s = min(wait_s, max(0.0, backoff_until - now))
            return wait_s
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
                if result is None or state.positions.get(tp) != offset or tp not in state.assigned:
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
                next_offset = offset
                for info in iter_batches(data):
                    next_offset = info.last_offset + 1
                if result.aborted_transactions:
                    data = _without_aborted(data, result.aborted_transactions)
                columns = self._decode(data, check_crc=self.check_crcs, start_offset=offset)
                counts[0] += len(data)
                counts[1] += len(columns)
                if len(columns):
                    buffer = columns.data
                    if not isinstance(buffer, bytes):
                        buffer = bytes(buffer)
                    self._buffered[tp] = _Fetched(columns, buffer, max(next_offset, offset), len(data))
                elif next_offset > offset:
                    state.positions[tp] = next_offset  # only control batches or compacted-away records
        finally:
            self._sensors.fetched(started, answered, per_topic)
        return 0.0

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

    def drain(self, limit: int, deferred: Optional[Dict[TopicPartition, int]] = None
              ) -> Dict[TopicPartition, List[ConsumerRecord]]:
        """Up to ``limit`` buffered records, partition by partition in turn.

        Positions advance past the returned records; with ``deferred`` (the
        consumer's iteration) the new positions are put there instead.
        """
        out: Dict[TopicPartition, List[ConsumerRecord]] = {}
        if not self._buffered:
            return out
        for tp in list(self._buffered):
            if tp in self._subscriptions.paused:
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
            if deferred is None:
                self._subscriptions.positions[tp] = new_position
            else:
                deferred[tp] = new_position
            highwater = self._highwater.get(tp)
            size, count = fetched.size, fetched.count
            self._sensors.consumed(tp, hi - lo, size * hi // count - size * lo // count,
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

    # -- offset lookups ------------------------------------------------------------------------------------

    def beginning_offsets(self, partitions: Iterable[Any]) -> Dict[TopicPartition, int]:
        """The log start offset of each partition."""
        return {tp: self.list_offset(tp, EARLIEST) for tp in map(as_tp, partitions)}

    def end_offsets(self, partitions: Iterable[Any]) -> Dict[TopicPartition, int]:
        """The end offset of each partition: the high watermark (the offset of the next record
        written), or the last stable offset for a read_committed consumer, as Kafka's consumer."""
        return {tp: self.list_offset(tp, LATEST) for tp in map(as_tp, partitions)}

    def offsets_for_times(self, timestamps: Mapping[Any, int]) -> Dict[TopicPartition, Optional[OffsetAndTimestamp]]:
        """The first offset whose timestamp is >= the given one (ms), per partition; None if none is that late."""
        out: Dict[TopicPartition, Optional[OffsetAndTimestamp]] = {}
        for tp, ts in timestamps.items():
            tp = as_tp(tp)
            if isinstance(ts, bool) or not isinstance(ts, int) or ts < 0:
                raise InvalidArgumentError("timestamp for %s-%d must be an integer >= 0 (ms), not %r" % (tp + (ts,)))
            offset, found_ts = self._transport.list_offsets(tp.topic, tp.partition, ts, self.isolation_level)
            out[tp] = None if offset < 0 else OffsetAndTimestamp(offset, found_ts, -1)
        return out

