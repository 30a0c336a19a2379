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
"""

from __future__ import annotations

import collections
import logging
import threading
import time
from time import sleep as _yield_gil
from time import time_ns as _time_ns
from typing import Any, Callable, Deque, Dict, List, NamedTuple, Optional, Sequence, Set, Tuple, cast

import numpy as np

from .. import records
from ..cluster.partitioner import StickyPartitioner, gather, murmur2, murmur2_many, partition_for_key
from ..errors import (
    BrokerError,
    BufferExhaustedError,
    ConfigError,
    IllegalStateError,
    KafkaTimeoutError,
    MessageTooLargeError,
    PylogqError,
    UnknownTopicOrPartitionError,
    error_for_code,
)
from ..records import HEADER_SIZE, NO_PRODUCER_EPOCH, NO_PRODUCER_ID, NO_SEQUENCE, codecs
from .metrics import AVG, MAX, PRODUCE_API_KEY, RATE, TOTAL, MetricName, Metrics, NetworkSensors, Sensor
from .transport import TCP_OPTIONS, Transport, connect

__all__ = [
    "DEFAULT_CONFIG", "Producer", "FutureRecordMetadata", "ProducerBatch", "RecordMetadata", "BatchResult",
    "BufferExhaustedError", "IllegalStateError", "KafkaTimeoutError"
]

log = logging.getLogger(__name__)


#: kafka-python 3.0's defaults, for the settings that mean something here, except
#: ``linger_ms`` (Kafka 4.0's, KIP-1030) and ``batch_size`` (as librdkafka's): see the module docstring.
DEFAULT_CONFIG: Dict[str, Any] = {
    "client_id": None,
    "key_serializer": None,
    "value_serializer": None,
    "enable_idempotence": True,
    "transactional_id": None,
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
    # The TCP transport's (bootstrap_servers=): PLAINTEXT or SASL_PLAINTEXT with PLAIN.
    "security_protocol": "PLAINTEXT",
    "sasl_mechanism": None,
    "sasl_plain_username": None,
    "sasl_plain_password": None,
}

_SEQUENCE_SPACE = 2**31
# A record's framing beyond its key, value and headers: length, attributes,
# timestamp and offset deltas, key and value lengths, header count (varints).
_RECORD_OVERHEAD = 5 + 1 + 10 + 5 + 5 + 5 + 5

# An open batch's first reservation of buffer memory (Kafka's batch.size default);
# it doubles as the batch fills, up to batch_size (Producer._grow).
_FIRST_RESERVATION = 16384

_CALLBACK_LOCK = threading.Lock()


class RecordMetadata(NamedTuple):
    """Where the broker put one record (kafka-python's RecordMetadata, with ``log_start_offset``)."""

    topic: str
    partition: int
    topic_partition: Tuple[str, int]
    offset: int
    timestamp: int
    log_start_offset: int
    checksum: Optional[int]
    serialized_key_size: int
    serialized_value_size: int
    serialized_header_size: int


class BatchResult(NamedTuple):
    """One batch written by ``send_batch``: its records have offsets ``base_offset`` onwards, consecutive."""

    topic: str
    partition: int
    base_offset: int
    record_count: int


class ProducerBatch:
    """One producer batch on its way to a partition; completed once, by the sender thread.

    While open (in the accumulator) ``builder`` collects records under the
    producer's lock; once drained ``data`` holds the built bytes, which every
    retry re-sends unchanged (same sequence numbers).

    Its records are acknowledged together: code that follows many records
    (``pylogq perf``) can follow their batches instead, through
    ``FutureRecordMetadata.batch`` and :meth:`add_done_callback`. ``topic``,
    ``partition``, ``done``, ``error`` and ``base_offset`` are for reading;
    ``count`` is final once the batch is closed.
    """

    __slots__ = (
        "topic", "partition", "builder", "data", "count", "created", "deadline", "base_sequence",
        "reserved", "attempts", "retry_at", "done", "base_offset", "log_append_time",
        "log_start_offset", "error", "callbacks", "event", "uncompressed", "max_record_size",
    )

    def __init__(self, topic: str, partition: int, builder: Any, created: float, deadline: float,
                 base_sequence: int, reserved: int) -> None:
        self.topic = topic
        self.partition = partition
        self.builder = builder
        self.data: Any = None
        self.count = 0
        self.created = created
        self.deadline = deadline
        self.base_sequence = base_sequence
        self.reserved = reserved
        self.attempts = 0
        self.retry_at = 0.0
        self.done = False
        self.base_offset = -1
        self.log_append_time = -1
        self.log_start_offset = -1
        self.error: Optional[BaseException] = None
        # (future, fn, is_errback) of a record's callback; (None, fn, False) of add_done_callback's.
        self.callbacks: Optional[List[Tuple[Optional["FutureRecordMetadata"], Callable[..., Any], bool]]] = []
        self.event = threading.Event()
        # Known once built from a builder (0: not known, a send_batch batch): for the metrics.
        self.uncompressed = 0
        self.max_record_size = 0

    def complete(self, base_offset: int, log_append_time: int, log_start_offset: int,
                 error: Optional[BaseException]) -> None:
        """Record the outcome, run the callbacks (outside any lock), then wake waiters.

        Waiters wake last, as in kafka-python: once ``get()`` or ``flush()``
        returns, the record's callbacks have run.
        """
        with _CALLBACK_LOCK:
            if self.done:
                return
            self.base_offset = base_offset
            self.log_append_time = log_append_time
            self.log_start_offset = log_start_offset
            self.error = error
            self.done = True
            callbacks = self.callbacks
            self.callbacks = None
        self.data = None
        for future, fn, is_errback in callbacks or ():
            if future is not None:
                future._run(fn, is_errback)
            else:
                self._run(fn)
        self.event.set()

    def add_done_callback(self, fn: Callable[["ProducerBatch"], Any]) -> None:
        """Call ``fn(batch)`` once the batch is acknowledged or failed (see ``error``).

        On the sender thread, or at once when the batch is already done; an
        exception in ``fn`` is logged.
        """
        with _CALLBACK_LOCK:
            if not self.done:
                assert self.callbacks is not None
                self.callbacks.append((None, fn, False))
                return
        self._run(fn)

    def _run(self, fn: Callable[["ProducerBatch"], Any]) -> None:
        try:
            fn(self)
        except Exception:
            log.exception("error in a producer batch callback")


class FutureRecordMetadata:
    """The outcome of one ``send()``: resolves to a :class:`RecordMetadata` or fails.

    kafka-python's future: ``get(timeout)``, ``add_callback(fn)`` (called with
    the metadata), ``add_errback(fn)`` (called with the exception),
    ``succeeded()``, ``failed()``, ``is_done``, ``value``, ``exception``.
    Callbacks run on the sender thread (or at once, when already done); one
    that raises is logged and does not stop the others. The record's outcome
    is its batch's: the future holds the :class:`ProducerBatch` (``batch``, to
    read) and its index in it.
    """

    __slots__ = ("batch", "_args")

    def __init__(self, batch: ProducerBatch, index: int, timestamp: int, key_size: int, value_size: int,
                 header_size: int) -> None:
        self.batch = batch
        self._args = (index, timestamp, key_size, value_size, header_size)

    @property
    def is_done(self) -> bool:
        return self.batch.done

    @property
    def exception(self) -> Optional[BaseException]:
        return self.batch.error if self.batch.done else None

    @property
    def value(self) -> Optional[RecordMetadata]:
        batch = self.batch
        if not batch.done or batch.error is not None:
            return None
        index, timestamp, key_size, value_size, header_size = self._args
        offset = batch.base_offset
        if offset != -1:
            offset += index
        if batch.log_append_time != -1:
            timestamp = batch.log_append_time
        tp = (batch.topic, batch.partition)
        return RecordMetadata(batch.topic, batch.partition, tp, offset, timestamp, batch.log_start_offset,
                              None, key_size, value_size, header_size)

    def succeeded(self) -> bool:
        return self.batch.done and self.batch.error is None

    def failed(self) -> bool:
        return self.batch.done and self.batch.error is not None

    def retriable(self) -> bool:
        error = self.exception
        return bool(getattr(error, "retriable", False))

    def get(self, timeout: Optional[float] = None) -> RecordMetadata:
        """Wait up to ``timeout`` seconds (None: forever); -> the metadata, or raise the failure."""
        batch = self.batch
        if not batch.done and not batch.event.wait(timeout):
            raise KafkaTimeoutError("timed out after %s s waiting for the record to be acknowledged" % (timeout,))
        if batch.error is not None:
            raise batch.error
        value = self.value
        assert value is not None
        return value

    def add_callback(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> "FutureRecordMetadata":
        """Call ``fn(*args, metadata, **kwargs)`` when the record is acknowledged."""
        return self._add(fn, args, kwargs, False)

    def add_errback(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> "FutureRecordMetadata":
        """Call ``fn(*args, exception, **kwargs)`` when the record fails."""
        return self._add(fn, args, kwargs, True)

    def add_both(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> "FutureRecordMetadata":
        self._add(fn, args, kwargs, False)
        return self._add(fn, args, kwargs, True)

    def _add(self, fn: Callable[..., Any], args: Tuple[Any, ...], kwargs: Dict[str, Any],
             is_errback: bool) -> "FutureRecordMetadata":
        if args or kwargs:
            inner = fn

            def fn(result: Any) -> Any:
                return inner(*args, result, **kwargs)

        batch = self.batch
        with _CALLBACK_LOCK:
            if not batch.done:
                assert batch.callbacks is not None
                batch.callbacks.append((self, fn, is_errback))
                return self
        self._run(fn, is_errback)
        return self

    def _run(self, fn: Callable[..., Any], is_errback: bool) -> None:
        error = self.batch.error
        if (error is not None) != is_errback:
            return
        try:
            fn(error if is_errback else self.value)
        except Exception:
            log.exception("error in a producer %s", "errback" if is_errback else "callback")

    def __repr__(self) -> str:
        state = "pending" if not self.is_done else ("failed: %r" % self.exception if self.failed() else "done")
        return "<FutureRecordMetadata %s-%d #%d %s>" % (self.batch.topic, self.batch.partition,
                                                        self._args[0], state)


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


class _SenderMetrics:
    """The producer's own metrics (Kafka's ``SenderMetrics``): recorded per batch, never per record.

    The sender records a batch each time it sends it (a retry again, as
    Kafka), before the request: its bytes, records, compression, the time since
    it opened and its largest record; a retry and a failure count the batch's
    records. Groups ``producer-metrics`` and ``producer-topic-metrics.<topic>``;
    the request metrics of ``producer-metrics`` and
    ``producer-node-metrics.node-<id>`` are the transport's
    (:class:`~pylogq.client.metrics.NetworkSensors`).
    """

    def __init__(self, metrics: Metrics, network: NetworkSensors, producer: "Producer") -> None:
        self.metrics = m = metrics
        group = "producer-metrics"
        # A batch's bytes: its size and the producer's byte rate.
        self.bytes = m.add_stats(m.sensor("batch-size"), group, [
            ("batch-size-avg", AVG, "The average number of bytes sent per partition per-request."),
            ("batch-size-max", MAX, "The max number of bytes sent per partition per-request."),
            ("byte-rate", RATE, "The average number of bytes sent per second."),
            ("byte-total", TOTAL, "The total number of bytes sent."),
        ])
        self.compression = m.add_stats(m.sensor("compression-rate"), group, [
            ("compression-rate-avg", AVG, "The average compression rate of record batches."),
        ])
        self.queue_time = m.add_stats(m.sensor("queue-time"), group, [
            ("record-queue-time-avg", AVG, "The average time in ms record batches spent in the record accumulator."),
            ("record-queue-time-max", MAX, "The maximum time in ms record batches spent in the record accumulator."),
        ])
        self.records = m.add_stats(m.sensor("records-per-request"), group, [
            ("record-send-rate", RATE, "The average number of records sent per second."),
            ("record-send-total", TOTAL, "The total number of records sent."),
            ("records-per-request-avg", AVG, "The average number of records per request."),
        ])
        self.retries = m.add_stats(m.sensor("record-retries"), group, [
            ("record-retry-rate", RATE, "The average per-second number of retried record sends"),
            ("record-retry-total", TOTAL, "The total number of retried record sends"),
        ])
        self.errors = m.add_stats(m.sensor("errors"), group, [
            ("record-error-rate", RATE, "The average per-second number of record sends that resulted in errors"),
            ("record-error-total", TOTAL, "The total number of record sends that resulted in errors"),
        ])
        self.record_size = m.add_stats(m.sensor("record-size-max"), group, [
            ("record-size-max", MAX, "The maximum record size across all batches"),
            ("record-size-avg", AVG, "The average maximum record size per batch"),
        ])
        self.throttle = m.add_stats(m.sensor("produce-throttle-time"), group, [
            ("produce-throttle-time-avg", AVG, "The average throttle time in ms"),
            ("produce-throttle-time-max", MAX, "The maximum throttle time in ms"),
        ])
        network.api_throttle[PRODUCE_API_KEY] = self.throttle
        self.buffer_wait = m.add_stats(m.sensor("bufferpool-wait-time"), group, [
            ("bufferpool-wait-ratio", RATE, "The fraction of time an appender waits for space allocation."),
        ])
        m.add(MetricName("buffer-total-bytes", group, "The maximum amount of buffer memory the client can use."),
              lambda now: float(producer._buffer_memory))
        m.add(MetricName("buffer-available-bytes", group, "The total amount of buffer memory that is not being used."),
              lambda now: float(producer._buffer_memory - producer._used))
        self._topics: Dict[str, Tuple[Sensor, Sensor, Sensor, Sensor, Sensor]] = {}

    def _topic(self, topic: str) -> Tuple[Sensor, Sensor, Sensor, Sensor, Sensor]:
        """The topic's sensors: records, bytes, compression, retries, errors (made on first use)."""
        found = self._topics.get(topic)
        if found is None:
            m = self.metrics
            group = "producer-topic-metrics." + topic
            name = "topic." + topic + "."
            found = self._topics[topic] = (
                m.add_stats(m.sensor(name + "records-per-batch"), group, [
                    ("record-send-rate", RATE, "Records sent per second for topic " + topic),
                    ("record-send-total", TOTAL, "Records sent for topic " + topic)]),
                m.add_stats(m.sensor(name + "bytes"), group, [
                    ("byte-rate", RATE, "Bytes per second for topic " + topic),
                    ("byte-total", TOTAL, "Bytes sent for topic " + topic)]),
                m.add_stats(m.sensor(name + "compression-rate"), group, [
                    ("compression-rate", AVG, "Average Compression ratio for topic " + topic)]),
                m.add_stats(m.sensor(name + "record-retries"), group, [
                    ("record-retry-rate", RATE, "Record retries per second for topic " + topic),
                    ("record-retry-total", TOTAL, "Record retries for topic " + topic)]),
                m.add_stats(m.sensor(name + "record-errors"), group, [
                    ("record-error-rate", RATE, "Record errors per second for topic " + topic),
                    ("record-error-total", TOTAL, "Record errors for topic " + topic)]),
            )
        return found

    def batch_sent(self, batch: "ProducerBatch", codec: int, now: float) -> None:
        """The sender is about to send ``batch`` (built)."""
        size = len(batch.data)
        count = batch.count
        records, nbytes, compression, _, _ = self._topic(batch.topic)
        if batch.uncompressed:
            ratio: Optional[float] = size / batch.uncompressed
        else:  # built whole by send_batch: the size before compression is not known
            ratio = 1.0 if codec == codecs.NONE else None
        with self.metrics.lock:
            records.record_locked(count, now)
            nbytes.record_locked(size, now)
            self.records.record_locked(count, now)
            self.bytes.record_locked(size, now)
            self.queue_time.record_locked((now - batch.created) * 1000.0, now)
            if ratio is not None:
                compression.record_locked(ratio, now)
                self.compression.record_locked(ratio, now)
            if batch.max_record_size:
                self.record_size.record_locked(batch.max_record_size, now)

    def retried(self, batch: "ProducerBatch") -> None:
        topic = self._topic(batch.topic)[3]
        now = time.monotonic()
        with self.metrics.lock:
            topic.record_locked(batch.count, now)
            self.retries.record_locked(batch.count, now)

    def failed(self, batch: "ProducerBatch") -> None:
        topic = self._topic(batch.topic)[4]
        now = time.monotonic()
        with self.metrics.lock:
            topic.record_locked(batch.count, now)
            self.errors.record_locked(batch.count, now)


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
        if config["transactional_id"] is not None:
            raise ConfigError("transactional_id=%r: transactions are not supported" % (config["transactional_id"],))
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
                             ("metrics_num_samples", 1), ("metrics_sample_window_ms", 1)):
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
        self._linger = config["linger_ms"] / 1000.0
        self._buffer_memory: int = config["buffer_memory"]
        self._max_block = config["max_block_ms"] / 1000.0
        self._max_request_size: int = config["max_request_size"]
        self._retries: int = config["retries"]
        self._backoff = config["retry_backoff_ms"] / 1000.0
        self._delivery_timeout = config["delivery_timeout_ms"] / 1000.0
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
        self._sensors = _SenderMetrics(self._metrics, network, self)
        self._transport: Transport = connect(
            broker=broker, bootstrap_servers=bootstrap_servers, client_id=config["client_id"] or "pylogq-producer",
            metrics=network, **{k: config[k] for k in TCP_OPTIONS if k != "client_id"})
        self._idempotent = bool(config["enable_idempotence"])
        self._producer_id, self._producer_epoch = NO_PRODUCER_ID, NO_PRODUCER_EPOCH
        if self._idempotent:
            try:
                self._producer_id, self._producer_epoch = self._transport.init_producer_id()
            except BaseException:
                self._transport.close()
                raise
        self._sequences: Dict[Tuple[str, int], int] = {}

        self._lock = threading.Lock()
        self._wakeup = threading.Condition(self._lock)  # the sender waits here for work
        self._space = threading.Condition(self._lock)  # senders wait here for buffer memory
        self._open: Dict[Tuple[str, int], ProducerBatch] = {}
        self._appendable: Dict[str, ProducerBatch] = {}  # topic -> the open batch of its sticky partition
        self._queues: Dict[Tuple[str, int], Deque[ProducerBatch]] = {}
        self._incomplete: Set[ProducerBatch] = set()
        self._used = 0
        self._flushing = 0
        self._sender_waiting = False
        self._closed = False
        self._stopping = False
        self._abort = False  # close() ran out of time: stop retrying, fail what is left
        self._partition_counts: Dict[str, int] = {}
        self._sticky: Dict[str, int] = {}
        self._sticky_partitioner = StickyPartitioner()
        self._sender = threading.Thread(target=self._run, name="pylogq-producer-sender", daemon=True)
        self._sender.start()

    # -- metadata -------------------------------------------------------------------

    def _num_partitions(self, topic: str, refresh: bool = False) -> int:
        count = None if refresh else self._partition_counts.get(topic)
        if count is None:
            if not isinstance(topic, str) or not topic:
                raise TypeError("topic must be a non-empty str, not %r" % (topic,))
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
            raise ValueError("partition must be an int >= 0, not %r" % (partition,))
        if partition >= self._num_partitions(topic) and partition >= self._num_partitions(topic, refresh=True):
            raise ValueError("unknown partition %d for topic %r (it has %d)"
                             % (partition, topic, self._partition_counts[topic]))

    def _choose(self, topic: str, key: Any, n: int) -> int:
        if self._partitioner is not None:
            all_partitions = list(range(n))
            partition = self._partitioner(key, all_partitions, all_partitions)
            if not isinstance(partition, int) or not 0 <= partition < n:
                raise ValueError("partitioner chose partition %r for topic %r, which has %d" % (partition, topic, n))
            return partition
        return partition_for_key(key, n)

    # -- send ------------------------------------------------------------------------

    def send(self, topic: str, value: Any = None, key: Any = None, headers: Optional[List[Tuple[str, bytes]]] = None,
             partition: Optional[int] = None, timestamp_ms: Optional[int] = None) -> FutureRecordMetadata:
        """Queue one record; -> its future. Serializer and argument errors raise here.

        A None ``value`` with a key is a tombstone. Blocks up to
        ``max_block_ms`` when ``buffer_memory`` is used up.
        """
        if headers is None and partition is None and type(value) is bytes and self._plain:
            # The common records, keyless or with a bytes key: one append to an open batch
            # (the sticky partition's, or the key's partition's). Anything else (no such
            # batch, a full one, a topic not seen yet) takes the full path.
            if timestamp_ms is None:
                timestamp_ms = _time_ns() // 1000000
            if key is None:
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
        if self._closed:
            raise IllegalStateError("the producer is closed")
        if value is None and key is None:
            raise ValueError("a record needs a key or a value (or both)")
        if headers is not None and not isinstance(headers, list):
            raise TypeError("headers must be a list of (str, bytes) tuples, not %s" % type(headers).__name__)
        if self._key_serializer is not None and key is not None:
            key = self._key_serializer(topic, headers, key)
        if self._value_serializer is not None and value is not None:
            value = self._value_serializer(topic, headers, value)
        if key is not None and type(key) is not bytes and not isinstance(key, (bytearray, memoryview)):
            raise TypeError("the serialized key must be bytes, bytearray or memoryview, not %s"
                            % type(key).__name__)
        if value is not None and type(value) is not bytes and not isinstance(value, (bytearray, memoryview)):
            raise TypeError("the serialized value must be bytes, bytearray or memoryview, not %s"
                            % type(value).__name__)
        key_size = -1 if key is None else len(key)
        value_size = -1 if value is None else len(value)
        header_size = -1
        size = key_size + value_size + 2
        if headers:
            for item in headers:
                if not (isinstance(item, tuple) and len(item) == 2 and isinstance(item[0], str)
                        and (item[1] is None or isinstance(item[1], (bytes, bytearray, memoryview)))):
                    raise TypeError("headers must be (str, bytes) tuples, not %r" % (item,))
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
        sticky = False
        if partition is not None:
            if not (type(partition) is int and 0 <= partition < n):
                self._check_partition(topic, partition)
        elif key is None and self._partitioner is None:
            sticky = True
        else:
            partition = self._choose(topic, key, n)
        record_size = size + _RECORD_OVERHEAD
        with self._lock:
            if sticky:
                partition = self._sticky.get(topic)
                if partition is None:
                    partition = self._sticky[topic] = self._sticky_partitioner.partition(topic, n)
            assert partition is not None
            tp = (topic, partition)
            batch = self._open.get(tp)
            index = -1 if batch is None else self._append(tp, batch, timestamp_ms, key, value, headers, record_size)
            if index < 0 and sticky:
                # KIP-480: a keyless record that needs a new batch moves the topic on.
                partition = self._sticky[topic] = self._sticky_partitioner.new_batch(topic, n, partition)
                tp = (topic, partition)
                batch = self._open.get(tp)
                if batch is not None:
                    index = self._append(tp, batch, timestamp_ms, key, value, headers, record_size)
            opened = False
            if index < 0 or batch is None:
                batch = self._new_batch(tp, record_size)
                opened = True
                index = batch.builder.append_next(timestamp_ms, key, value, headers)
                if index != 0:
                    raise AssertionError("an empty batch refused a record")
            if sticky:
                self._appendable[topic] = batch  # send()'s fast path appends here next
        if opened:
            # The batch before this one is the sender's to send now: let it have the GIL.
            # A thread sending in a tight loop holds the GIL for the switch interval
            # (5 ms) at a time, and the sender needs it several times per batch (drain,
            # build, request, response, completion): without this it fell behind by
            # 100+ ms in a burst of 300,000 records, though the loop ran no faster.
            _yield_gil(0)
        return FutureRecordMetadata(batch, index, timestamp_ms, key_size, value_size, header_size)

    def _append(self, tp: Tuple[str, int], batch: ProducerBatch, timestamp_ms: int, key: Any, value: Any,
                headers: Any, record_size: int) -> int:
        """Append to an open batch, growing it if it is full; -> the record's index, or -1 (then
        the batch is closed, full). Lock held."""
        index: int = batch.builder.append_next(timestamp_ms, key, value, headers)
        if index < 0 and self._grow(batch, record_size):
            index = batch.builder.append_next(timestamp_ms, key, value, headers)
        if index < 0:
            self._close_batch(tp, batch)
        return index

    def _reserve(self, need: int, deadline: float) -> None:
        """Take ``need`` bytes of buffer memory, waiting for the sender to free some. Lock held."""
        if self._used and self._used + need > self._buffer_memory:
            started = time.monotonic()
            try:
                while self._used and self._used + need > self._buffer_memory:
                    if self._sender_waiting:
                        self._wakeup.notify()
                    remaining = deadline - time.monotonic()
                    if remaining <= 0:
                        raise BufferExhaustedError(
                            "no room for %d more bytes in buffer_memory=%d (%d in use) after max_block_ms=%d"
                            % (need, self._buffer_memory, self._used, self.config["max_block_ms"]))
                    self._space.wait(remaining)
                    if self._closed:
                        raise IllegalStateError("the producer was closed while send() waited for buffer memory")
            finally:
                self._sensors.buffer_wait.record(time.monotonic() - started)
        self._used += need

    def _grow(self, batch: ProducerBatch, record_size: int) -> bool:
        """Let an open batch that refused a record take more buffer memory, if free now. Lock held.

        A batch starts with a reservation of ``_FIRST_RESERVATION`` bytes and
        doubles it, up to ``batch_size``, each time it fills while buffer
        memory is free; so buffer memory counts what batches hold (to within a
        factor of two), not ``batch_size`` per partition, and a large
        ``batch_size`` costs nothing when many partitions each get a few
        records. -> False (the batch is full) when it is at ``batch_size`` or
        the memory is taken: the caller closes it, as a full batch.
        """
        builder = batch.builder
        limit = self._batch_limit
        if batch.reserved >= limit:
            return False
        want = min(limit, max(2 * batch.reserved, builder.size() + record_size))
        extra = want - batch.reserved
        if self._used + extra > self._buffer_memory:
            return False
        self._used += extra
        batch.reserved = want
        builder.batch_size = want
        return True

    def _new_batch(self, tp: Tuple[str, int], record_size: int) -> ProducerBatch:
        """Open a batch for ``tp`` (lock held): reserve its memory, stamp its producer fields."""
        now = time.monotonic()
        need = max(min(self._batch_limit, _FIRST_RESERVATION), record_size + HEADER_SIZE)
        self._reserve(need, now + self._max_block)
        if self._closed:
            self._release(need)
            raise IllegalStateError("the producer is closed")
        raced = self._open.get(tp)
        if raced is not None:  # opened by another thread while this one waited for memory
            self._close_batch(tp, raced)
        if self._idempotent:
            sequence = self._sequences.get(tp, 0)
            builder = records.RecordBatchBuilder(self._codec, producer_id=self._producer_id,
                                                 producer_epoch=self._producer_epoch, base_sequence=sequence,
                                                 batch_size=need)
        else:
            sequence = NO_SEQUENCE
            builder = records.RecordBatchBuilder(self._codec, batch_size=need)
        batch = ProducerBatch(tp[0], tp[1], builder, now, now + self._delivery_timeout, sequence, need)
        self._open[tp] = batch
        self._incomplete.add(batch)
        if self._sender_waiting:
            self._wakeup.notify()
        return batch

    def _close_batch(self, tp: Tuple[str, int], batch: ProducerBatch) -> None:
        """Move an open batch to its partition's send queue; no record joins it after this. Lock held."""
        del self._open[tp]
        if self._appendable.get(tp[0]) is batch:
            del self._appendable[tp[0]]
        batch.count = batch.builder.record_count
        if self._idempotent:
            self._sequences[tp] = (batch.base_sequence + batch.count) % _SEQUENCE_SPACE
        queue = self._queues.get(tp)
        if queue is None:
            queue = self._queues[tp] = collections.deque()
        queue.append(batch)
        if self._sender_waiting:
            self._wakeup.notify()

    def _release(self, nbytes: int) -> None:
        self._used -= nbytes
        self._space.notify_all()

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
        if self._closed:
            raise IllegalStateError("the producer is closed")
        n = len(values)
        for name, column in (("keys", keys), ("headers", headers)):
            if column is not None and len(column) != n:
                raise ValueError("%s has %d items, values %d" % (name, len(column), n))
        timestamps: Any = timestamp_ms
        if timestamps is None:
            timestamps = int(time.time() * 1000)
        elif not isinstance(timestamps, int):
            timestamps = np.asarray(timestamps, dtype=np.int64)
            if len(timestamps) != n:
                raise ValueError("timestamp_ms has %d items, values %d" % (len(timestamps), n))
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
            self._bulk_group(topic, partition, values, keys, headers, timestamps, batches)
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
                self._bulk_group(topic, None if p < 0 else p, gather(values, idx), gather(keys, idx),
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

    def _bulk_group(self, topic: str, partition: Optional[int], values: Sequence[Any], keys: Optional[Sequence[Any]],
                    headers: Optional[Sequence[Any]], timestamps: Any, out: List[ProducerBatch]) -> None:
        """Build and queue the batches of one partition's records (partition None: sticky)."""
        n = len(values)
        limit = self._max_request_size
        sample = values[: min(n, 64)]
        per_record = sum(0 if v is None else len(v) for v in sample) / len(sample) + 24
        if keys is not None:
            ksample = keys[: min(n, 64)]
            per_record += sum(0 if k is None else len(k) for k in ksample) / len(ksample)
        if headers is not None:
            per_record += 64
        step = max(1, int((limit - HEADER_SIZE) * 0.9 / per_record))
        start = 0
        while start < n:
            end = min(n, start + step)
            while True:
                chunk_ts = timestamps if isinstance(timestamps, int) else timestamps[start:end]
                args = (values[start:end], None if keys is None else keys[start:end],
                        chunk_ts, None if headers is None else headers[start:end])
                tp, sequence = self._bulk_target(topic, partition, end - start)
                data = self._build(args, sequence)
                if len(data) <= limit or end - start == 1:
                    break
                end = start + max(1, (end - start) // 2)
                step = end - start
            out.append(self._enqueue_built(tp, data, end - start, sequence, args))
            start = end

    def _bulk_target(self, topic: str, partition: Optional[int], count: int) -> Tuple[Tuple[str, int], int]:
        """The partition of the next bulk batch and the sequence it would start at."""
        with self._lock:
            if partition is None:
                n = self._partition_counts[topic]
                current = self._sticky.get(topic)
                if current is None:
                    current = self._sticky_partitioner.partition(topic, n)
                partition = self._sticky[topic] = self._sticky_partitioner.new_batch(topic, n, current)
            tp = (topic, partition)
            batch = self._open.get(tp)
            if batch is not None:
                self._close_batch(tp, batch)
            return tp, self._sequences.get(tp, 0) if self._idempotent else NO_SEQUENCE

    def _build(self, args: Tuple[Any, ...], sequence: int) -> bytearray:
        values, keys, timestamps, headers = args
        if self._idempotent:
            return cast(bytearray, records.build_batch(
                values, keys, timestamps, headers, self._codec, producer_id=self._producer_id,
                producer_epoch=self._producer_epoch, base_sequence=sequence))
        return cast(bytearray, records.build_batch(values, keys, timestamps, headers, self._codec))

    def _enqueue_built(self, tp: Tuple[str, int], data: bytearray, count: int, sequence: int, args: Tuple[Any, ...]) -> ProducerBatch:
        """Queue a built batch for the sender behind everything already queued for ``tp``."""
        now = time.monotonic()
        with self._lock:
            self._reserve(len(data), now + self._max_block)
            if self._closed:
                self._release(len(data))
                raise IllegalStateError("the producer is closed")
            open_batch = self._open.get(tp)
            if open_batch is not None:
                self._close_batch(tp, open_batch)
            if self._idempotent:
                current = self._sequences.get(tp, 0)
                if current != sequence:
                    # Another thread queued records for tp meanwhile: restamp (rare).
                    data = self._build(args, current)
                    sequence = current
                self._sequences[tp] = (sequence + count) % _SEQUENCE_SPACE
            batch = ProducerBatch(tp[0], tp[1], None, now, now + self._delivery_timeout, sequence, len(data))
            batch.data = data
            batch.count = count
            self._incomplete.add(batch)
            queue = self._queues.get(tp)
            if queue is None:
                queue = self._queues[tp] = collections.deque()
            queue.append(batch)
            if self._sender_waiting:
                self._wakeup.notify()
            return batch

    # -- the sender ------------------------------------------------------------------

    def _drain(self, now: float) -> Tuple[List[List[ProducerBatch]], Optional[float]]:
        """Batches to send now, per partition in order, and when to look again. Lock held."""
        if self._open:
            urgent = self._flushing or self._stopping
            for tp, batch in list(self._open.items()):
                if urgent or now - batch.created >= self._linger:
                    self._close_batch(tp, batch)
        ready: List[List[ProducerBatch]] = []
        wake: Optional[float] = None
        for tp, queue in list(self._queues.items()):
            head = queue[0]
            if head.retry_at > now:
                wake = head.retry_at if wake is None else min(wake, head.retry_at)
                continue
            ready.append(list(queue))
            del self._queues[tp]
        for batch in self._open.values():
            due = batch.created + self._linger
            wake = due if wake is None else min(wake, due)
        return ready, wake

    def _run(self) -> None:
        while True:
            with self._lock:
                while True:
                    now = time.monotonic()
                    ready, wake = self._drain(now)
                    if ready:
                        break
                    if self._stopping and (self._abort or not self._incomplete):
                        return
                    self._sender_waiting = True
                    self._wakeup.wait(None if wake is None else max(0.0, wake - now))
                    self._sender_waiting = False
            for batches in ready:
                self._send_partition(batches)

    def _send_partition(self, batches: List[ProducerBatch]) -> None:
        """Send one partition's batches in order; on a retry, requeue the rest behind the failed one."""
        for i, batch in enumerate(batches):
            if not self._send_one(batch):
                with self._lock:
                    tp = (batch.topic, batch.partition)
                    queue = self._queues.get(tp)
                    rest = collections.deque(batches[i:])
                    if queue is not None:
                        rest.extend(queue)
                    self._queues[tp] = rest
                    if self._sender_waiting:
                        self._wakeup.notify()
                return

    def _send_one(self, batch: ProducerBatch) -> bool:
        """One attempt; -> False when the batch must be retried later (its retry_at is set)."""
        if batch.data is None:
            builder = batch.builder
            batch.uncompressed = builder.size()
            batch.max_record_size = builder.max_record_size
            batch.data = builder.build()
            batch.builder = None
        now = time.monotonic()
        if now > batch.deadline:
            self._finish(batch, -1, -1, -1, KafkaTimeoutError(
                "%d records for %s-%d expired after delivery_timeout_ms=%d (%d attempts)"
                % (batch.count, batch.topic, batch.partition, self.config["delivery_timeout_ms"], batch.attempts)))
            return True
        batch.attempts += 1
        self._sensors.batch_sent(batch, self._codec, now)
        error: Optional[BaseException] = None
        try:
            result = self._transport.produce(batch.topic, batch.partition, batch.data, self._acks)
            code = getattr(result, "error_code", 0)
            if code:
                cls = error_for_code(code)
                assert cls is not None
                error = cls("produce to %s-%d failed" % (batch.topic, batch.partition))
        except Exception as exc:
            error = exc
        if error is None:
            if self._acks == 0:
                self._finish(batch, -1, -1, -1, None)
            else:
                self._finish(batch, result.base_offset, result.log_append_time, result.log_start_offset, None)
            return True
        if (isinstance(error, BrokerError) and error.retriable and self._acks != 0
                and batch.attempts <= self._retries and not self._abort
                and time.monotonic() + self._backoff < batch.deadline):
            log.debug("retrying %s-%d after %r (attempt %d)", batch.topic, batch.partition, error, batch.attempts)
            self._sensors.retried(batch)
            batch.retry_at = time.monotonic() + self._backoff
            return False
        self._finish(batch, -1, -1, -1, error)
        return True

    def _finish(self, batch: ProducerBatch, base_offset: int, log_append_time: int, log_start_offset: int,
                error: Optional[BaseException]) -> None:
        """Complete a batch once (the sender and a closing thread may both try) and free its memory."""
        with self._lock:
            if batch not in self._incomplete:
                return
            self._incomplete.remove(batch)
            self._release(batch.reserved)
            if self._stopping and not self._incomplete and self._sender_waiting:
                self._wakeup.notify()
        if error is not None:
            self._sensors.failed(batch)
        batch.complete(base_offset, log_append_time, log_start_offset, error)

    # -- flush and close ---------------------------------------------------------------

    def flush(self, timeout: Optional[float] = None) -> None:
        """Send every record sent so far now (ignoring ``linger_ms``) and wait until each is done.

        Raises KafkaTimeoutError when ``timeout`` seconds pass first.
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._lock:
            pending = list(self._incomplete)
            self._flushing += 1
            if self._sender_waiting:
                self._wakeup.notify()
        try:
            for batch in pending:
                remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
                if not batch.event.wait(remaining):
                    raise KafkaTimeoutError("flush timed out after %s s with records still unsent" % (timeout,))
        finally:
            with self._lock:
                self._flushing -= 1

    def close(self, timeout: Optional[float] = None) -> None:
        """Flush (up to ``timeout`` seconds), stop the sender, fail whatever was not sent, release the transport.

        Idempotent. After close, ``send`` raises IllegalStateError.
        """
        with self._lock:
            if self._closed and not self._sender.is_alive():
                return
            self._closed = True
            self._appendable.clear()
            self._space.notify_all()
        deadline = None if timeout is None else time.monotonic() + timeout
        abort = False
        try:
            self.flush(timeout)
        except KafkaTimeoutError:
            abort = True
        with self._lock:
            self._stopping = True
            self._abort = abort
            self._wakeup.notify()
        if threading.current_thread() is not self._sender:
            remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
            self._sender.join(remaining)
        with self._lock:
            leftovers = list(self._incomplete)
            for tp, batch in list(self._open.items()):
                self._close_batch(tp, batch)
            self._queues.clear()
        for batch in leftovers:
            self._finish(batch, -1, -1, -1, IllegalStateError(
                "the producer closed before %d records for %s-%d were acknowledged"
                % (batch.count, batch.topic, batch.partition)))
        self._transport.close()

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
        return "<pylogq.Producer acks=%s idempotent=%s%s>" % (self._acks, self._idempotent,
                                                             " closed" if self._closed else "")
