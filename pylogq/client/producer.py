"""The producer: Kafka's KafkaProducer with kafka-python's names, over a :class:`Transport`.

``send()`` serializes a record, picks its partition and appends it to the open
batch of that partition (the *accumulator*); it returns at once with a
:class:`FutureRecordMetadata`. One sender thread drains batches that are full,
older than ``linger_ms``, or wanted by ``flush()``, builds each one (a v2
record batch, compressed as configured) and hands it to the transport, one
batch per produce call, a partition's batches strictly in order. A retriable
error puts the batch back at the head of its partition's queue for another
try after ``retry_backoff_ms``, up to ``retries`` and ``delivery_timeout_ms``.

Idempotence (the default with ``acks="all"``, as in kafka-python 3 and Kafka
3): the producer takes an id and epoch from ``init_producer_id()`` and stamps
each batch with the sequence number of its first record, counted per
partition. A retried batch is re-sent byte for byte, so a broker that already
wrote it answers with the original offsets instead of writing it twice.

Transactions (KIP-98): a producer given a ``transactional_id`` is idempotent
and writes in transactions, between ``begin_transaction()`` and
``commit_transaction()`` or ``abort_transaction()``, after one
``init_transactions()``; ``send_offsets_to_transaction()`` commits a
consumer group's offsets with the transaction. The state and the
coordinator's calls live in :mod:`pylogq.client.transaction_manager`.

``send_batch()`` is the bulk path: whole batches built in one call each
(:func:`pylogq.records.build_batch`), keys hashed in one vectorised pass, and
a compact result per batch instead of one future per record.

Memory: an open batch reserves 16 KiB of ``buffer_memory`` (or its first
record's size, when larger) and doubles its reservation each time it fills,
while memory is free, up to ``batch_size``; it holds what it reserved until
the broker acknowledges it. ``send`` blocks up to ``max_block_ms`` for room,
then raises :class:`BufferExhaustedError`. So ``buffer_memory`` bounds the
bytes batches hold (to within a factor of two) however large ``batch_size``
is and however many partitions have an open batch.

Defaults: kafka-python's, except two that cost nothing in correctness and buy
throughput. ``linger_ms`` is 5, Kafka 4.0's default (KIP-1030): a record waits
at most 5 ms for others to join its batch, and ``flush()`` does not wait at
all. ``batch_size`` is 1 MiB (librdkafka's is about the same, 1,000,000
bytes): a batch is one Produce request and one round trip, and with Kafka's
16 KiB a single partition's records wait behind a round trip per ~140 100-byte
records; memory is reserved as batches fill (above), and a batch never grows
past ``max_request_size``. Set ``linger_ms=0, batch_size=16384`` for
kafka-python's behaviour.

This module holds the public face (:class:`Producer`: configuration,
``send``, ``send_batch``, ``flush``, ``close``, ``partitions_for``,
``metrics``, and the transactional calls); the batches live in
:mod:`pylogq.client.accumulator`, the
sender thread in :mod:`pylogq.client.sender`, a batch and its records'
futures in :mod:`pylogq.client.producer_batch`.
"""

from __future__ import annotations

import logging
import threading
import time
from time import time_ns as _time_ns
from typing import Any, Callable, Dict, List, NamedTuple, Optional, Sequence, Set, Tuple, cast

import numpy as np

from ..cluster.partitioner import gather, murmur2, murmur2_many, partition_for_key
from ..errors import (
    ConfigError,
    IllegalStateError,
    InvalidArgumentError,
    InvalidArgumentTypeError,
    KafkaTimeoutError,
    MessageTooLargeError,
    PylogqError,
    TransactionAbortedError,
    UnknownTopicOrPartitionError,
)
from ..records import HEADER_SIZE, NO_PRODUCER_EPOCH, NO_PRODUCER_ID, codecs
from .accumulator import RecordAccumulator
from .metrics import Metrics, NetworkSensors
from .producer_batch import FutureRecordMetadata, ProducerBatch, RecordMetadata
from .sender import Sender, SenderMetrics
from .transaction_manager import TransactionManager, group_metadata_of, offsets_of
from .transport import TCP_OPTIONS, Transport, connect

__all__ = ["DEFAULT_CONFIG", "Producer", "FutureRecordMetadata", "ProducerBatch", "RecordMetadata", "BatchResult",
           "PreparedTransaction"]

log = logging.getLogger("pylogq.client.producer")


#: kafka-python 3.0's defaults, for the settings that mean something here, except
#: ``linger_ms`` (Kafka 4.0's, KIP-1030) and ``batch_size`` (as librdkafka's): see the module docstring.
DEFAULT_CONFIG: Dict[str, Any] = {
    "client_id": None,
    "key_serializer": None,
    "value_serializer": None,
    "enable_idempotence": True,
    "transactional_id": None,
    "transaction_timeout_ms": 60000,
    "delivery_timeout_ms": 120000,
    "acks": -1,
    "compression_type": None,
    "retries": 2147483647,
    "batch_size": 1048576,
    "linger_ms": 5,
    "partitioner": None,
    "max_block_ms": 60000,
    "max_request_size": 1048576,
    "allow_auto_create_topics": True,
    "retry_backoff_ms": 100,
    "request_timeout_ms": 30000,
    "buffer_memory": 33554432,
    # Accepted so kafka-python settings carry over; the in-process sender has
    # one request in flight per partition and no metadata cache to age.
    "max_in_flight_requests_per_connection": 5,
    "metadata_max_age_ms": 300000,
    # metrics(): kept unless disabled, over 2 samples of 30 s (kafka-python's).
    "metrics_enabled": True,
    "metrics_num_samples": 2,
    "metrics_sample_window_ms": 30000,
}
# The TCP transport's (bootstrap_servers=): security_protocol (PLAINTEXT, SSL, SASL_PLAINTEXT or
# SASL_SSL) and its SASL and SSL keys, with the transport's defaults.
DEFAULT_CONFIG.update((key, value) for key, value in TCP_OPTIONS.items() if key not in DEFAULT_CONFIG)

# A record's framing beyond its key, value and headers: length, attributes,
# timestamp and offset deltas, key and value lengths, header count (varints).
_RECORD_OVERHEAD = 5 + 1 + 10 + 5 + 5 + 5 + 5


class PreparedTransaction(NamedTuple):
    """An open transaction whose records are all written (:meth:`Producer.prepare_transaction`):
    EndTxn with these commits or aborts it. ``started``: False when it wrote nothing, so the
    coordinator has no transaction to end."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    started: bool


class BatchResult(NamedTuple):
    """One batch written by ``send_batch``: its records have offsets ``base_offset`` onwards, consecutive."""

    topic: str
    partition: int
    base_offset: int
    record_count: int


_new_future = object.__new__


def _serializer(obj: Any, name: str) -> Optional[Callable[[str, Any, Any], Any]]:
    """A ``(topic, headers, data) -> bytes`` function from a kafka-python serializer or a plain callable."""
    if obj is None:
        return None
    serialize = getattr(obj, "serialize", None)
    if serialize is not None:
        return cast(Callable[[str, Any, Any], Any], serialize)
    if callable(obj):
        return lambda topic, headers, data: obj(data)
    raise ConfigError("%s must be callable or have a serialize(topic, headers, data) method, not %r" % (name, obj))


def _int_setting(config: Dict[str, Any], key: str, minimum: int) -> int:
    value = config[key]
    if isinstance(value, float) and value == float("inf"):
        value = 2147483647
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ConfigError("%s must be an integer >= %d, not %r" % (key, minimum, value))
    return value


class Producer:
    """Publishes records to a pylogq (or Kafka) broker; kafka-python's ``KafkaProducer``.

    ``Producer(broker=pylogq.Broker(...), **configs)`` with kafka-python's
    keyword arguments (``acks``, ``linger_ms``, ``batch_size``,
    ``compression_type``, ``enable_idempotence``, ...); an unknown one raises
    ConfigError. Thread-safe: any number of threads may ``send`` at once.
    Keyed records go where Kafka's default partitioner sends them (murmur2);
    keyless ones follow the sticky partitioner (KIP-480). A custom
    ``partitioner`` is ``callable(key_bytes, all_partitions, available)`` as in
    kafka-python 2. Serializers are skipped for a None key or value, so a
    None value stays a tombstone. Defaults are kafka-python's but for
    ``linger_ms=5`` (Kafka 4.0's) and ``batch_size`` 1 MiB, whose memory is
    taken as batches fill (see the module docstring for why).
    """

    def __init__(self, broker: Any = None, bootstrap_servers: Any = None, **configs: Any) -> None:
        unknown = sorted(set(configs) - set(DEFAULT_CONFIG))
        if unknown:
            raise ConfigError("unknown producer configuration%s: %s" % ("s" if len(unknown) > 1 else "",
                                                                        ", ".join(unknown)))
        config = dict(DEFAULT_CONFIG)
        config.update(configs)
        transactional_id = config["transactional_id"]
        if transactional_id is not None:
            if not isinstance(transactional_id, str) or not transactional_id:
                raise ConfigError("transactional_id must be a non-empty str, not %r" % (transactional_id,))
            # Kafka: a transactional id requires idempotence, so it may not be turned off.
            if "enable_idempotence" in configs and not configs["enable_idempotence"]:
                raise ConfigError("Cannot set a transactional_id without also enabling idempotence "
                                  "(enable_idempotence=False)")
            config["enable_idempotence"] = True
        acks = config["acks"]
        if acks == "all":
            acks = -1
        if acks not in (0, 1, -1) or isinstance(acks, bool):
            raise ConfigError("acks must be 0, 1, -1 or 'all', not %r" % (config["acks"],))
        config["acks"] = acks
        for key, minimum in (("retries", 0), ("batch_size", 1), ("linger_ms", 0), ("buffer_memory", 1),
                             ("max_block_ms", 0), ("max_request_size", 1), ("retry_backoff_ms", 0),
                             ("request_timeout_ms", 1), ("delivery_timeout_ms", 1),
                             ("max_in_flight_requests_per_connection", 1), ("metadata_max_age_ms", 0),
                             ("metrics_num_samples", 1), ("metrics_sample_window_ms", 1),
                             ("transaction_timeout_ms", 1)):
            config[key] = _int_setting(config, key, minimum)
        # kafka-python 3: idempotence is on by default; a user's acks != all or
        # retries=0 turns it off, unless idempotence was asked for explicitly.
        if config["enable_idempotence"]:
            conflicts = []
            if "acks" in configs and acks != -1:
                conflicts.append("acks=%r" % (configs["acks"],))
            if "retries" in configs and config["retries"] == 0:
                conflicts.append("retries=0")
            if conflicts:
                if transactional_id is not None:
                    raise ConfigError("transactional_id=%r requires idempotence, which is incompatible with %s"
                                      % (transactional_id, ", ".join(conflicts)))
                if "enable_idempotence" in configs:
                    raise ConfigError("enable_idempotence=True is incompatible with %s" % ", ".join(conflicts))
                config["enable_idempotence"] = False
        try:
            self._codec = codecs.codec_id(config["compression_type"])
        except PylogqError as exc:
            raise ConfigError(str(exc)) from None
        if config["partitioner"] is not None and not callable(config["partitioner"]):
            raise ConfigError("partitioner must be callable(key_bytes, all_partitions, available), not %r"
                              % (config["partitioner"],))
        self.config = config
        self._key_serializer = _serializer(config["key_serializer"], "key_serializer")
        self._value_serializer = _serializer(config["value_serializer"], "value_serializer")
        self._acks: int = acks
        self._batch_size: int = config["batch_size"]
        self._buffer_memory: int = config["buffer_memory"]
        self._max_request_size: int = config["max_request_size"]
        self._retries: int = config["retries"]
        self._partitioner: Optional[Callable[..., int]] = config["partitioner"]
        self._create_topics = bool(config["allow_auto_create_topics"])
        # send()'s fast path applies: no serializer or partitioner to call.
        self._plain = (self._key_serializer is None and self._value_serializer is None
                       and self._partitioner is None)
        # No batch grows past one request: a record that fits an open batch fits max_request_size.
        self._batch_limit = min(self._batch_size, self._max_request_size)

        self._metrics = Metrics(config["metrics_num_samples"], config["metrics_sample_window_ms"],
                                enabled=bool(config["metrics_enabled"]))
        network = NetworkSensors(self._metrics, "producer")
        self._sensors = SenderMetrics(self._metrics, network, self._buffer_memory, lambda: self._accumulator.used)
        self._transport: Transport = connect(
            broker=broker, bootstrap_servers=bootstrap_servers, client_id=config["client_id"] or "pylogq-producer",
            metrics=network, **{k: config[k] for k in TCP_OPTIONS if k != "client_id"})
        self._idempotent = bool(config["enable_idempotence"])
        self._producer_id, self._producer_epoch = NO_PRODUCER_ID, NO_PRODUCER_EPOCH
        # A transactional producer takes its id and epoch in init_transactions(), from the
        # id's coordinator; an idempotent one takes a fresh id now.
        if self._idempotent and transactional_id is None:
            try:
                self._producer_id, self._producer_epoch = self._transport.init_producer_id()
            except BaseException:
                self._transport.close()
                raise
        self._partition_counts: Dict[str, int] = {}

        self._accumulator = accumulator = RecordAccumulator(
            self._codec, self._batch_limit, self._buffer_memory, config["linger_ms"], config["max_block_ms"],
            self._max_request_size, config["delivery_timeout_ms"], self._idempotent, self._producer_id,
            self._producer_epoch, self._partition_counts, self._sensors.buffer_wait)
        # The accumulator's lock and the dicts send()'s fast path reads, bound here so that
        # path reaches them in one step. The same objects: the accumulator never rebinds them.
        self._lock = accumulator.lock
        self._open = accumulator.open
        self._appendable = accumulator.appendable
        self._append = accumulator.append  # send()'s full path, bound once
        self._sender = Sender(accumulator, self._transport, self._sensors, self._codec, acks, self._retries,
                              config["retry_backoff_ms"], config["delivery_timeout_ms"])
        self._transaction: Optional[TransactionManager] = None
        if transactional_id is not None:
            self._transaction = TransactionManager(
                transactional_id, config["transaction_timeout_ms"], self._transport, config["max_block_ms"],
                config["retry_backoff_ms"], accumulator.set_producer)
            accumulator.transaction = self._sender.transaction = self._transaction
        self._io_thread = threading.Thread(target=self._sender.run, name="pylogq-producer-sender", daemon=True)
        self._io_thread.start()

    # -- metadata -------------------------------------------------------------------

    def _num_partitions(self, topic: str, refresh: bool = False) -> int:
        count = None if refresh else self._partition_counts.get(topic)
        if count is None:
            if not isinstance(topic, str) or not topic:
                raise InvalidArgumentTypeError("topic must be a non-empty str, not %r" % (topic,))
            count = self._transport.partitions_for(topic, create=self._create_topics)
            if count is None:
                raise UnknownTopicOrPartitionError(
                    "topic %r does not exist and allow_auto_create_topics is off (or the broker's "
                    "auto.create.topics.enable is false)" % (topic,))
            self._partition_counts[topic] = count
        return count

    def partitions_for(self, topic: str) -> Set[int]:
        """The partition ids of ``topic`` (created if auto-creation is on)."""
        return set(range(self._num_partitions(topic, refresh=True)))

    def _check_partition(self, topic: str, partition: int) -> None:
        if isinstance(partition, bool) or not isinstance(partition, int) or partition < 0:
            raise InvalidArgumentError("partition must be an int >= 0, not %r" % (partition,))
        if partition >= self._num_partitions(topic) and partition >= self._num_partitions(topic, refresh=True):
            raise InvalidArgumentError("unknown partition %d for topic %r (it has %d)"
                                       % (partition, topic, self._partition_counts[topic]))

    def _choose(self, topic: str, key: Any, n: int) -> int:
        if self._partitioner is not None:
            all_partitions = list(range(n))
            partition = self._partitioner(key, all_partitions, all_partitions)
            if not isinstance(partition, int) or not 0 <= partition < n:
                raise InvalidArgumentError("partitioner chose partition %r for topic %r, which has %d"
                                           % (partition, topic, n))
            return partition
        return partition_for_key(key, n)

    # -- send ------------------------------------------------------------------------

    def send(self, topic: str, value: Any = None, key: Any = None, headers: Optional[List[Tuple[str, bytes]]] = None,
             partition: Optional[int] = None, timestamp_ms: Optional[int] = None) -> FutureRecordMetadata:
        """Queue one record; -> its future. Serializer and argument errors raise here.

        A None ``value`` with a key is a tombstone. Blocks up to
        ``max_block_ms`` when ``buffer_memory`` is used up.
        """
        if headers is None and type(value) is bytes and self._plain:
            # The common records, keyless or with a bytes key: one append to an open batch
            # (the sticky partition's, the key's partition's, or the one given). Anything else
            # (no such batch, a full one, a topic not seen yet) takes the full path.
            if timestamp_ms is None:
                timestamp_ms = _time_ns() // 1000000
            if partition is not None:
                if type(partition) is int and (key is None or type(key) is bytes) \
                        and 0 <= partition < self._partition_counts.get(topic, 0):
                    with self._lock:
                        batch = self._open.get((topic, partition))
                        if batch is not None:
                            index = batch.builder.append_next(timestamp_ms, key, value)
                            if index >= 0:
                                future = _new_future(FutureRecordMetadata)
                                future.batch = batch
                                future._args = (index, timestamp_ms, -1 if key is None else len(key), len(value), -1)
                                return future
            elif key is None:
                with self._lock:
                    batch = self._appendable.get(topic)
                    if batch is not None:
                        index = batch.builder.append_next(timestamp_ms, None, value)
                        if index >= 0:
                            future = _new_future(FutureRecordMetadata)  # __init__'s work, without its call
                            future.batch = batch
                            future._args = (index, timestamp_ms, -1, len(value), -1)
                            return future
            elif type(key) is bytes:
                n = self._partition_counts.get(topic)
                if n is not None:
                    tp = (topic, (murmur2(key) & 0x7FFFFFFF) % n)  # partition_for_key, inlined
                    with self._lock:
                        batch = self._open.get(tp)
                        if batch is not None:
                            index = batch.builder.append_next(timestamp_ms, key, value)
                            if index >= 0:
                                future = _new_future(FutureRecordMetadata)
                                future.batch = batch
                                future._args = (index, timestamp_ms, len(key), len(value), -1)
                                return future
        if self._accumulator.closed:
            raise IllegalStateError("the producer is closed")
        if self._transaction is not None:
            self._transaction.check_append()
        if headers is not None and not isinstance(headers, list):
            raise InvalidArgumentTypeError("headers must be a list of (str, bytes) tuples, not %s"
                                           % type(headers).__name__)
        if self._key_serializer is not None and key is not None:
            key = self._key_serializer(topic, headers, key)
        if self._value_serializer is not None and value is not None:
            value = self._value_serializer(topic, headers, value)
        if key is not None and type(key) is not bytes and not isinstance(key, (bytearray, memoryview)):
            raise InvalidArgumentTypeError("the serialized key must be bytes, bytearray or memoryview, not %s"
                                           % type(key).__name__)
        if value is not None and type(value) is not bytes and not isinstance(value, (bytearray, memoryview)):
            raise InvalidArgumentTypeError("the serialized value must be bytes, bytearray or memoryview, not %s"
                                           % type(value).__name__)
        key_size = -1 if key is None else len(key)
        value_size = -1 if value is None else len(value)
        header_size = -1
        size = key_size + value_size + 2
        if headers:
            for item in headers:
                if not (isinstance(item, tuple) and len(item) == 2 and isinstance(item[0], str)
                        and (item[1] is None or isinstance(item[1], (bytes, bytearray, memoryview)))):
                    raise InvalidArgumentTypeError("headers must be (str, bytes) tuples, not %r" % (item,))
            header_size = sum(len(k.encode("utf-8") if isinstance(k, str) else k) + (0 if v is None else len(v))
                              for k, v in headers)
            size += header_size + 10 * len(headers)
        if size + HEADER_SIZE + _RECORD_OVERHEAD > self._max_request_size:
            raise MessageTooLargeError("the record is about %d bytes serialized, more than max_request_size=%d"
                                       % (size + HEADER_SIZE + _RECORD_OVERHEAD, self._max_request_size))
        n = self._partition_counts.get(topic)
        if n is None:
            n = self._num_partitions(topic)
        if timestamp_ms is None:
            timestamp_ms = _time_ns() // 1000000
        if partition is not None:
            if not (type(partition) is int and 0 <= partition < n):
                self._check_partition(topic, partition)
        elif key is not None or self._partitioner is not None:
            partition = self._choose(topic, key, n)
        # else partition None: the topic's sticky partition (KIP-480), the accumulator's to pick
        return self._append(topic, partition, n, timestamp_ms, key, value, headers, size + _RECORD_OVERHEAD,
                            key_size, value_size, header_size)

    # -- bulk ------------------------------------------------------------------------

    def send_batch(self, topic: str, values: Sequence[Any], keys: Optional[Sequence[Any]] = None,
                   partition: Optional[int] = None, headers: Optional[Sequence[Any]] = None,
                   timestamp_ms: Any = None) -> List[BatchResult]:
        """Send many records at once, waiting for the broker; -> one :class:`BatchResult` per batch written.

        The bulk path for pipelines: batches are built whole (one C call each,
        up to ``max_request_size`` bytes rather than ``batch_size``: all the
        records are at hand, so nothing is gained by lingering), and there is
        no per-record future. ``keys``, ``headers`` and ``timestamp_ms`` (one
        int for all, or one per record) are None or as long as ``values``.
        Keyed records are grouped by partition (the default partitioner's, or
        ``partition``); within a partition they keep their input order, so the
        j-th record of ``values`` sent to partition p has offset
        ``base_offset + rank`` of p's results, its rank counted among the
        records sent to p. Keyless records go to the sticky partition, which
        moves on after every batch. Raises the first failure once every batch
        is done (the others may have been written).
        """
        if self._accumulator.closed:
            raise IllegalStateError("the producer is closed")
        if self._transaction is not None:
            self._transaction.check_append()
        n = len(values)
        for name, column in (("keys", keys), ("headers", headers)):
            if column is not None and len(column) != n:
                raise InvalidArgumentError("%s has %d items, values %d" % (name, len(column), n))
        timestamps: Any = timestamp_ms
        if timestamps is None:
            timestamps = int(time.time() * 1000)
        elif not isinstance(timestamps, int):
            timestamps = np.asarray(timestamps, dtype=np.int64)
            if len(timestamps) != n:
                raise InvalidArgumentError("timestamp_ms has %d items, values %d" % (len(timestamps), n))
        if self._value_serializer is not None:
            ser = self._value_serializer
            values = [None if v is None else ser(topic, None, v) for v in values]
        if keys is not None and self._key_serializer is not None:
            kser = self._key_serializer
            keys = [None if k is None else kser(topic, None, k) for k in keys]
        if n == 0:
            return []
        count = self._num_partitions(topic)
        if partition is not None:
            self._check_partition(topic, partition)
        batches: List[ProducerBatch] = []
        if partition is not None or keys is None:
            self._accumulator.bulk_group(topic, partition, values, keys, headers, timestamps, batches)
        else:
            parts = self._partitions_of(topic, keys, count)
            order = np.argsort(parts, kind="stable")
            sorted_parts = parts[order]
            bounds = np.flatnonzero(np.diff(sorted_parts)) + 1
            starts = np.concatenate(([0], bounds))
            ends = np.concatenate((bounds, [n]))
            for s, e in zip(starts.tolist(), ends.tolist()):
                idx = order[s:e]
                p = int(sorted_parts[s])
                self._accumulator.bulk_group(topic, None if p < 0 else p, gather(values, idx), gather(keys, idx),
                                 None if headers is None else gather(headers, idx),
                                 timestamps if isinstance(timestamps, int) else timestamps[idx], batches)
        results: List[BatchResult] = []
        error: Optional[BaseException] = None
        for batch in batches:
            batch.event.wait()
            if batch.error is not None:
                error = error or batch.error
            else:
                results.append(BatchResult(batch.topic, batch.partition, batch.base_offset, batch.count))
        if error is not None:
            raise error
        return results

    def _partitions_of(self, topic: str, keys: Sequence[Any], count: int) -> np.ndarray:
        """Each key's partition (-1: a None key, for the sticky partition), vectorised for the default partitioner."""
        if self._partitioner is not None:
            return np.array([-1 if k is None else self._choose(topic, k, count) for k in keys], dtype=np.int64)
        nulls = [i for i, k in enumerate(keys) if k is None] if None in keys else []
        if nulls:
            present = np.ones(len(keys), dtype=bool)
            present[nulls] = False
            idx = np.flatnonzero(present)
            out = np.full(len(keys), -1, dtype=np.int64)
            if len(idx):
                out[idx] = (murmur2_many(gather(keys, idx)) & 0x7FFFFFFF) % count
            return out
        return (murmur2_many(keys) & 0x7FFFFFFF) % count

    # -- transactions ----------------------------------------------------------------

    def _transactional(self, operation: str) -> TransactionManager:
        if self._transaction is None:
            raise IllegalStateError("%s: this producer has no transactional_id" % operation)
        if self._accumulator.closed:
            raise IllegalStateError("the producer is closed")
        return self._transaction

    def init_transactions(self, timeout: Optional[float] = None) -> None:
        """Register the ``transactional_id`` with its transaction coordinator, once, before
        the first transaction: the coordinator fences every earlier producer with the same
        id (their later calls raise ProducerFencedError) and aborts any transaction one of
        them left open. Blocks up to ``timeout`` seconds (None: ``max_block_ms``); on
        KafkaTimeoutError call it again. TransactionalIdAuthorizationFailedError and
        ClusterAuthorizationFailedError leave the producer uninitialized: call it again once
        the permission is granted (also after they ended an ``abort_transaction``'s epoch bump).
        """
        self._transactional("init_transactions").init_transactions(timeout)

    def begin_transaction(self) -> None:
        """Start a transaction: the records sent until it commits or aborts belong to it.
        Needs no broker; the partitions are added as their first batch goes out."""
        self._transactional("begin_transaction").begin_transaction()

    def send_offsets_to_transaction(self, offsets: Any, group_metadata: Any = None, timeout: Optional[float] = None,
                                    consumer_group_id: Optional[str] = None) -> None:
        """Commit a consumer group's ``offsets`` as part of the transaction: the group sees
        them when, and only if, the transaction commits (consume-transform-produce).

        ``offsets``: ``{TopicPartition: OffsetAndMetadata or offset}``, each the next offset
        to read, or confluent-kafka's list of TopicPartition with offsets.
        ``group_metadata``: the consuming ``Consumer.consumer_group_metadata()``, so a
        consumer that left the group or missed a rebalance cannot commit (CommitFailedError),
        or just the group id (kafka-python's ``consumer_group_id``, also accepted by that
        name). Blocks up to ``timeout`` seconds (None: ``max_block_ms``); on
        KafkaTimeoutError the offsets not yet written stay with the transaction, and
        ``commit_transaction`` (or the next call for the group) sends them first.
        """
        txn = self._transactional("send_offsets_to_transaction")
        if group_metadata is None:
            group_metadata = consumer_group_id
        elif consumer_group_id is not None:
            raise InvalidArgumentError("give the group as group_metadata or consumer_group_id, not both")
        txn.send_offsets_to_transaction(offsets_of(offsets), group_metadata_of(group_metadata), timeout)

    def commit_transaction(self, timeout: Optional[float] = None) -> None:
        """Send every record of the transaction (as ``flush()``), then commit it: readers with
        ``isolation_level="read_committed"`` see its records, and its group offsets are
        committed. Raises the error of a record that failed (the transaction must then be
        aborted); blocks up to ``timeout`` seconds (None: ``max_block_ms``), and on
        KafkaTimeoutError it is to be called again.
        """
        txn = self._transactional("commit_transaction")
        with txn.op_lock():
            with self._lock:
                resumed = txn.begin_commit()
                if not resumed:
                    self._accumulator.seal()
            self._end_transaction(txn, True, timeout)

    def prepare_transaction(self, timeout: Optional[float] = None) -> "PreparedTransaction":
        """Send every record of the transaction (as ``flush()``) and hand out what commits it
        elsewhere: another process can end the transaction with EndTxn on its transactional
        id, producer id and epoch (as Kafka's KIP-939 prepareTransaction, for a coordinator
        of its own such as a Spark driver; pylogq.spark's exactly-once writes commit each
        task's transaction from the driver once the job succeeded). The transaction stays
        open here too: this producer may still commit or abort it, ``close()`` leaves it open
        (unlike a transaction not handed out), and a later ``init_transactions`` of its id, or
        the coordinator's transaction timeout, aborts it.
        Raises the error of a record that failed; blocks up to ``timeout`` seconds.
        """
        txn = self._transactional("prepare_transaction")
        with txn.op_lock():
            deadline = txn.deadline(timeout)
            self.flush(max(0.0, deadline - time.monotonic()))
            producer_id, producer_epoch, started = txn.prepared(deadline)
        return PreparedTransaction(txn.transactional_id, producer_id, producer_epoch, started)

    def abort_transaction(self, timeout: Optional[float] = None) -> None:
        """Abort the transaction: records not yet sent are dropped (their futures fail with
        TransactionAbortedError), those sent are marked aborted, so read_committed readers
        never see them, and its group offsets are discarded. Also how a transaction in error
        (a failed record, a refused offset) is ended. Blocks as :meth:`commit_transaction`.
        """
        txn = self._transactional("abort_transaction")
        with txn.op_lock():
            self._abort(txn, timeout)

    def _abort(self, txn: TransactionManager, timeout: Optional[float]) -> None:
        """abort_transaction() with the manager's op lock held."""
        with self._lock:
            resumed = txn.begin_abort()
            dropped = [] if resumed else self._accumulator.take_unsent()
        for batch in dropped:
            self._sender.finish(batch, -1, -1, -1, TransactionAbortedError(
                "failing %d records for %s-%d: their transaction was aborted"
                % (batch.count, batch.topic, batch.partition)))
        self._end_transaction(txn, False, timeout)

    def _end_transaction(self, txn: TransactionManager, committed: bool, timeout: Optional[float]) -> None:
        """Wait for the transaction's batches, then end it (EndTxn)."""
        deadline = txn.deadline(timeout)
        self.flush(max(0.0, deadline - time.monotonic()))
        txn.end_transaction(committed, deadline)

    # -- flush and close ---------------------------------------------------------------

    def flush(self, timeout: Optional[float] = None) -> None:
        """Send every record sent so far now (ignoring ``linger_ms``) and wait until each is done.

        Raises KafkaTimeoutError when ``timeout`` seconds pass first.
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        acc = self._accumulator
        with self._lock:
            pending = list(acc.incomplete)
            acc.flushing += 1
            if acc.sender_waiting:
                acc.wakeup.notify()
        try:
            for batch in pending:
                remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
                if not batch.event.wait(remaining):
                    raise KafkaTimeoutError("flush timed out after %s s with records still unsent" % (timeout,))
        finally:
            with self._lock:
                acc.flushing -= 1

    def close(self, timeout: Optional[float] = None) -> None:
        """Flush (up to ``timeout`` seconds), stop the sender, fail whatever was not sent, release the transport.

        A transactional producer first ends what it left under way, as Kafka's does: a
        transaction still open (or in an abortable error) is aborted, a commit or an abort
        that ran out of time is completed, within ``timeout`` (None: ``max_block_ms``), best
        effort (what fails is logged; the coordinator aborts the transaction when its
        ``transaction_timeout_ms`` passes). Not a transaction handed out by
        :meth:`prepare_transaction`, whose owner ends it, nor with ``timeout=0`` (Kafka's
        forced close). Idempotent. After close, ``send`` raises IllegalStateError.
        """
        acc = self._accumulator
        with self._lock:
            if acc.closed and not self._io_thread.is_alive():
                return
            acc.closed = True
            acc.appendable.clear()
            acc.space.notify_all()
        deadline = None if timeout is None else time.monotonic() + timeout
        self._end_left_open(deadline)
        abort = False
        try:
            self.flush(timeout)
        except KafkaTimeoutError:
            abort = True
        with self._lock:
            acc.stopping = True
            acc.abort = abort
            acc.wakeup.notify()
        if threading.current_thread() is not self._io_thread:
            remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
            self._io_thread.join(remaining)
        with self._lock:
            leftovers = list(acc.incomplete)
            for tp, batch in list(acc.open.items()):
                acc.close_batch(tp, batch)
            acc.queues.clear()
        for batch in leftovers:
            self._sender.finish(batch, -1, -1, -1, IllegalStateError(
                "the producer closed before %d records for %s-%d were acknowledged"
                % (batch.count, batch.topic, batch.partition)))
        self._transport.close()

    def _end_left_open(self, deadline: Optional[float]) -> None:
        """close()'s end of the transaction left under way (see :meth:`close`), by ``deadline``."""
        txn = self._transaction
        if txn is None or threading.current_thread() is self._io_thread:
            return  # (on the sender thread, nothing it waits for would be sent)

        def remaining() -> Optional[float]:
            return None if deadline is None else max(0.0, deadline - time.monotonic())

        left = remaining()
        if left == 0.0:
            return
        lock = txn.op_lock()
        if not lock.acquire(timeout=-1 if left is None else left):
            log.warning("closing the producer of transactional id %s: a transactional call still runs, its "
                        "transaction is left to the coordinator's timeout", txn.transactional_id)
            return
        try:
            ending = txn.left_open()
            if ending == "commit":
                try:
                    with self._lock:
                        txn.begin_commit()
                    self._end_transaction(txn, True, remaining())
                    return
                except Exception as exc:  # noqa: BLE001 - best effort: the close goes on
                    log.warning("closing the producer of transactional id %s: could not complete its commit: %r",
                                txn.transactional_id, exc)
                ending = txn.left_open()  # (a commit that failed leaves the transaction to abort)
            if ending == "abort":
                log.info("closing the producer of transactional id %s: aborting its incomplete transaction",
                         txn.transactional_id)
                try:
                    self._abort(txn, remaining())
                except Exception as exc:  # noqa: BLE001 - best effort: the close goes on
                    log.warning("closing the producer of transactional id %s: could not abort its transaction: %r",
                                txn.transactional_id, exc)
        finally:
            lock.release()

    def metrics(self, raw: bool = False) -> Dict[Any, Any]:
        """The producer's metrics, kafka-python's ``KafkaProducer.metrics()``: ``{group: {name: value}}``.

        With ``raw``, ``{MetricName: Metric}`` instead, each metric read when
        its ``value()`` is called (:mod:`pylogq.client.metrics`). Windowed
        stats cover ``metrics_num_samples`` samples of
        ``metrics_sample_window_ms`` (2 of 30 s): ``-avg`` and ``-max`` over
        the events in them, ``-rate`` per second; ``-total`` counts since the
        producer started (Java's names). Sizes are bytes, times ms.

        ``producer-metrics``, per batch sent (retries included, as Kafka):
        ``batch-size-avg``/``-max`` (bytes sent per partition per request: one
        batch), ``record-send-rate``/``-total``, ``records-per-request-avg``,
        ``byte-rate``/``-total``, ``compression-rate-avg`` (bytes sent over
        bytes before compression; a compressed ``send_batch`` batch is not
        counted), ``record-queue-time-avg``/``-max`` (from the batch's opening
        to its sending), ``record-size-max``/``-avg`` (each batch's largest
        record, encoded; not known for ``send_batch`` batches);
        ``record-retry-rate``/``-total`` and ``record-error-rate``/``-total``
        (records of batches retried, and failed for good);
        ``buffer-total-bytes``, ``buffer-available-bytes`` and
        ``bufferpool-wait-ratio`` (the fraction of time ``send`` waited for
        buffer memory); ``produce-throttle-time-avg``/``-max`` (Produce
        responses' throttle times). And the transport's, per request:
        ``request-rate``/``-total``, ``request-size-avg``/``-max``,
        ``outgoing-byte-rate``/``-total``, ``response-rate``/``-total``,
        ``incoming-byte-rate``/``-total``, ``request-latency-avg``/``-max``
        (from the request's writing to its response read whole),
        ``throttle-time-avg``/``-max``. Over TCP these count every request on
        the wire, and again per broker in ``producer-node-metrics.node-<id>``
        (``node-bootstrap-<i>`` for a bootstrap connection); in process each
        call to the broker counts, timed around the call, with no bytes and
        no node groups.

        ``producer-topic-metrics.<topic>``: ``record-send-rate``/``-total``,
        ``byte-rate``/``-total``, ``compression-rate``,
        ``record-retry-rate``/``-total``, ``record-error-rate``/``-total``.

        A max over windows without events is -inf, an average 0.0 (as
        kafka-python). ``metrics_enabled=False``: nothing is kept, ``{}``.
        """
        return self._metrics.snapshot(raw)

    def __enter__(self) -> "Producer":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        txn = "" if self._transaction is None else " transactional_id=%r %s" % (
            self._transaction.transactional_id, self._transaction.state.value)
        return "<pylogq.Producer acks=%s idempotent=%s%s%s>" % (self._acks, self._idempotent, txn,
                                                               " closed" if self._accumulator.closed else "")
