"""The producer's sender: the background thread that drains ready batches and sends them, and its metrics.

Kafka's ``Sender`` and ``SenderMetrics``. The sender thread takes the batches
the record accumulator (:mod:`pylogq.client.accumulator`) has ready, builds
each one (a v2 record batch, compressed as configured) and hands it to the
transport, one batch per produce call, a partition's batches strictly in
order. A retriable error puts the batch back at the head of its partition's
queue for another try after ``retry_backoff_ms``, up to ``retries`` and
``delivery_timeout_ms``; a retried batch is re-sent byte for byte (same
sequence numbers, so an idempotent producer's retry is not written twice).

A transactional producer's sender first adds the partitions it is about to
send to for the first time in the transaction to it (one AddPartitionsToTxn
for all of them, through the transaction manager); while the producer is in
an error state, or aborting, it sends no batch that was never sent and fails
them instead, as Kafka's sender does.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Callable, Dict, List, Optional, Tuple

from ..errors import BrokerError, KafkaTimeoutError, error_for_code
from ..records import codecs
from .accumulator import RecordAccumulator
from .metrics import AVG, MAX, PRODUCE_API_KEY, RATE, TOTAL, MetricName, Metrics, NetworkSensors, Sensor
from .producer_batch import ProducerBatch
from .transport import Transport

if TYPE_CHECKING:
    from .transaction_manager import TransactionManager

__all__ = ["Sender", "SenderMetrics"]

# The producer's logger, as before the producer was split into modules.
log = logging.getLogger("pylogq.client.producer")


class SenderMetrics:
    """The producer's own metrics (Kafka's ``SenderMetrics``): recorded per batch, never per record.

    The sender records a batch each time it sends it (a retry again, as
    Kafka), before the request: its bytes, records, compression, the time since
    it opened and its largest record; a retry and a failure count the batch's
    records. Groups ``producer-metrics`` and ``producer-topic-metrics.<topic>``;
    the request metrics of ``producer-metrics`` and
    ``producer-node-metrics.node-<id>`` are the transport's
    (:class:`~pylogq.client.metrics.NetworkSensors`).
    """

    def __init__(self, metrics: Metrics, network: NetworkSensors, buffer_memory: int,
                 used: Callable[[], int]) -> None:
        """``buffer_memory`` and ``used()``: the accumulator's, for the buffer gauges."""
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
              lambda now: float(buffer_memory))
        m.add(MetricName("buffer-available-bytes", group, "The total amount of buffer memory that is not being used."),
              lambda now: float(buffer_memory - used()))
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


class Sender:
    """Sends the accumulator's ready batches through the transport; its :meth:`run` is the sender thread.

    One thread runs :meth:`run` until the producer closes; :meth:`finish`
    completes a batch once, whichever thread (this one, or a closing one)
    gets there first. It waits for work on the accumulator's ``wakeup``
    condition and keeps no state of its own beyond its settings: what it
    sends and when it stops is the accumulator's, under the accumulator's lock.
    """

    def __init__(self, accumulator: RecordAccumulator, transport: Transport, sensors: SenderMetrics, codec: int,
                 acks: int, retries: int, retry_backoff_ms: int, delivery_timeout_ms: int) -> None:
        self._accumulator = accumulator
        self._transport = transport
        self._sensors = sensors
        self._codec = codec
        self._acks = acks
        self._retries = retries
        self._backoff = retry_backoff_ms / 1000.0
        self._delivery_timeout_ms = delivery_timeout_ms
        self.transaction: Optional["TransactionManager"] = None

    def run(self) -> None:
        acc = self._accumulator
        while True:
            with acc.lock:
                while True:
                    now = time.monotonic()
                    ready, wake = acc.drain(now)
                    if ready:
                        break
                    if acc.stopping and (acc.abort or not acc.incomplete):
                        return
                    acc.sender_waiting = True
                    acc.wakeup.wait(None if wake is None else max(0.0, wake - now))
                    acc.sender_waiting = False
            if self.transaction is not None:
                ready = self._transactional(ready)
            for batches in ready:
                self._send_partition(batches)

    def _transactional(self, ready: List[List[ProducerBatch]]) -> List[List[ProducerBatch]]:
        """A transactional producer's drained batches that may go: their partitions added to
        the transaction first; the others failed (never-sent ones taken back, so their
        sequence numbers go to the next batches)."""
        txn = self.transaction
        assert txn is not None
        error = txn.unsendable()
        if error is None:
            deadline = min(b.deadline for batches in ready for b in batches)
            error = txn.add_partitions([(b[0].topic, b[0].partition) for b in ready], deadline)
        if error is None:
            return ready
        acc = self._accumulator
        out: List[List[ProducerBatch]] = []
        failed: List[ProducerBatch] = []
        for batches in ready:
            sent = 0
            while sent < len(batches) and batches[sent].attempts:
                sent += 1
            if sent:
                if txn.fatal:
                    failed.extend(batches[:sent])
                else:  # a retry: the broker may have the batch already, its answer says
                    out.append(batches[:sent])
            with acc.lock:
                failed.extend(acc.take_unsent([(batches[0].topic, batches[0].partition)], batches[sent:]))
        for batch in failed:
            self.finish(batch, -1, -1, -1, error)
        return out

    def _send_partition(self, batches: List[ProducerBatch]) -> None:
        """Send one partition's batches in order; on a retry, requeue the rest behind the failed one."""
        for i, batch in enumerate(batches):
            if not self._send_one(batch):
                self._accumulator.requeue(batches[i:])
                return
            txn = self.transaction
            if txn is not None and batch.error is not None and i + 1 < len(batches):
                # The transaction cannot commit now: the partition's later batches would only
                # be refused out of sequence. Take them back instead.
                acc = self._accumulator
                with acc.lock:
                    rest = acc.take_unsent([(batch.topic, batch.partition)], batches[i + 1:])
                error = txn.unsendable() or batch.error
                for later in rest:
                    self.finish(later, -1, -1, -1, error)
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
            self._failed(batch, KafkaTimeoutError(
                "%d records for %s-%d expired after delivery_timeout_ms=%d (%d attempts)"
                % (batch.count, batch.topic, batch.partition, self._delivery_timeout_ms, batch.attempts)))
            return True
        batch.attempts += 1
        self._sensors.batch_sent(batch, self._codec, now)
        error: Optional[BaseException] = None
        try:
            if self.transaction is None:
                result = self._transport.produce(batch.topic, batch.partition, batch.data, self._acks)
            else:
                result = self._transport.produce(batch.topic, batch.partition, batch.data, self._acks,
                                                 transactional_id=self.transaction.transactional_id)
            code = getattr(result, "error_code", 0)
            if code:
                cls = error_for_code(code)
                assert cls is not None
                error = cls("produce to %s-%d failed" % (batch.topic, batch.partition))
        except Exception as exc:
            error = exc
        if error is None:
            if self._acks == 0:
                self.finish(batch, -1, -1, -1, None)
            else:
                self.finish(batch, result.base_offset, result.log_append_time, result.log_start_offset, None)
            return True
        if (isinstance(error, BrokerError) and error.retriable and self._acks != 0
                and batch.attempts <= self._retries and not self._accumulator.abort
                and time.monotonic() + self._backoff < batch.deadline):
            log.debug("retrying %s-%d after %r (attempt %d)", batch.topic, batch.partition, error, batch.attempts)
            self._sensors.retried(batch)
            batch.retry_at = time.monotonic() + self._backoff
            return False
        self._failed(batch, error)
        return True

    def _failed(self, batch: ProducerBatch, error: BaseException) -> None:
        """A batch failed for good; a transactional producer's transaction with it."""
        if self.transaction is not None:
            self.transaction.batch_failed(error)
        self.finish(batch, -1, -1, -1, error)

    def finish(self, batch: ProducerBatch, base_offset: int, log_append_time: int, log_start_offset: int,
               error: Optional[BaseException]) -> None:
        """Complete a batch once (the sender and a closing thread may both try) and free its memory."""
        if not self._accumulator.deallocate(batch):
            return
        if error is not None:
            self._sensors.failed(batch)
        batch.complete(base_offset, log_append_time, log_start_offset, error)
