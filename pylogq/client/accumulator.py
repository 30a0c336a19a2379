"""The record accumulator: the producer's open batches per partition, their send queues, its buffer memory.

Kafka's ``RecordAccumulator``. ``send()`` appends each record to the open
batch of its partition (:meth:`RecordAccumulator.append`, after
``send()``'s own fast path); a batch is closed, moved to its partition's send
queue, when it is full, older than ``linger_ms`` or wanted by ``flush()``, and
the sender (:mod:`pylogq.client.sender`) drains the queues
(:meth:`RecordAccumulator.drain`). The bulk path (``send_batch()``) builds
whole batches and queues them here too (:meth:`RecordAccumulator.bulk_group`).

Memory: an open batch reserves 16 KiB of ``buffer_memory`` (or its first
record's size, when larger) and doubles its reservation each time it fills,
while memory is free, up to ``batch_size``; it holds what it reserved until
the broker acknowledges it (:meth:`RecordAccumulator.deallocate`).

Idempotence: the accumulator counts each partition's sequence numbers and
stamps each batch with the sequence of its first record when it opens it.

Transactions: a transactional producer's batches are marked transactional, a
batch opens only while the transaction manager allows a send
(:meth:`~pylogq.client.transaction_manager.TransactionManager.check_append`),
a commit seals the open batches (:meth:`RecordAccumulator.seal`) and an abort
takes back the batches never sent (:meth:`RecordAccumulator.take_unsent`),
handing their sequence numbers to the next batches.
"""

from __future__ import annotations

import collections
import threading
import time
from time import sleep as _yield_gil
from typing import TYPE_CHECKING, Any, Deque, Dict, Iterable, List, Optional, Sequence, Set, Tuple, cast

from .. import records
from ..cluster.partitioner import StickyPartitioner
from ..errors import BufferExhaustedError, IllegalStateError
from ..records import HEADER_SIZE, NO_SEQUENCE
from .metrics import Sensor
from .producer_batch import FutureRecordMetadata, ProducerBatch

if TYPE_CHECKING:
    from .transaction_manager import TransactionManager

__all__ = ["RecordAccumulator"]

_SEQUENCE_SPACE = 2**31

# An open batch's first reservation of buffer memory (Kafka's batch.size default);
# it doubles as the batch fills, up to batch_size (RecordAccumulator._grow).
_FIRST_RESERVATION = 16384


class RecordAccumulator:
    """The producer's batches between ``send()`` and the sender, and the buffer memory they hold.

    Invariant: a partition has at most one open batch (``open``), and its
    closed batches wait in ``queues`` in the order they were opened, so a
    partition's records reach the broker in the order they were sent; every
    batch not yet completed is in ``incomplete`` and holds ``reserved`` bytes
    of the ``used`` buffer memory.

    Thread-safety: every attribute is guarded by ``lock``, which the
    producer (``send()``'s fast path, ``flush()``, ``close()``) and the sender
    share; ``wakeup`` (the sender waits there for work, ``sender_waiting``
    while it does) and ``space`` (``send()`` waits there for buffer memory)
    are conditions on it. Methods documented "lock held" expect the caller to
    hold it; the others take it.
    """

    def __init__(self, codec: int, batch_limit: int, buffer_memory: int, linger_ms: int, max_block_ms: int,
                 max_request_size: int, delivery_timeout_ms: int, idempotent: bool, producer_id: int,
                 producer_epoch: int, partition_counts: Dict[str, int], buffer_wait: Sensor) -> None:
        self._codec = codec
        self._batch_limit = batch_limit  # min(batch_size, max_request_size)
        self._buffer_memory = buffer_memory
        self._linger = linger_ms / 1000.0
        self._max_block_ms = max_block_ms
        self._max_block = max_block_ms / 1000.0
        self._max_request_size = max_request_size
        self._delivery_timeout = delivery_timeout_ms / 1000.0
        self._idempotent = idempotent
        self._producer_id, self._producer_epoch = producer_id, producer_epoch
        self._partition_counts = partition_counts  # the producer's, read for a bulk batch's sticky partition
        self._buffer_wait = buffer_wait
        self._sequences: Dict[Tuple[str, int], int] = {}
        # A transactional producer's manager: batches open only while it allows a send.
        self.transaction: Optional["TransactionManager"] = None

        self.lock = threading.Lock()
        self.wakeup = threading.Condition(self.lock)  # the sender waits here for work
        self.space = threading.Condition(self.lock)  # senders wait here for buffer memory
        self.open: Dict[Tuple[str, int], ProducerBatch] = {}
        self.appendable: Dict[str, ProducerBatch] = {}  # topic -> the open batch of its sticky partition
        self.queues: Dict[Tuple[str, int], Deque[ProducerBatch]] = {}
        self.incomplete: Set[ProducerBatch] = set()
        self.used = 0
        self.flushing = 0
        self.sender_waiting = False
        self.closed = False
        self.stopping = False
        self.abort = False  # close() ran out of time: stop retrying, fail what is left
        self._sticky: Dict[str, int] = {}
        self._sticky_partitioner = StickyPartitioner()

    # -- append ----------------------------------------------------------------------

    def append(self, topic: str, partition: Optional[int], n: int, timestamp_ms: int, key: Any, value: Any,
               headers: Any, record_size: int, key_size: int, value_size: int,
               header_size: int) -> FutureRecordMetadata:
        """Append one checked record to its partition's open batch (``partition`` None: the
        topic's sticky partition, of ``n``), opening one if needed; -> the record's future."""
        sticky = partition is None
        with self.lock:
            if sticky:
                partition = self._sticky.get(topic)
                if partition is None:
                    partition = self._sticky[topic] = self._sticky_partitioner.partition(topic, n)
            assert partition is not None
            tp = (topic, partition)
            batch = self.open.get(tp)
            index = -1 if batch is None else self._try_append(tp, batch, timestamp_ms, key, value, headers,
                                                              record_size)
            if index < 0 and sticky:
                # KIP-480: a keyless record that needs a new batch moves the topic on.
                partition = self._sticky[topic] = self._sticky_partitioner.new_batch(topic, n, partition)
                tp = (topic, partition)
                batch = self.open.get(tp)
                if batch is not None:
                    index = self._try_append(tp, batch, timestamp_ms, key, value, headers, record_size)
            opened = False
            if index < 0 or batch is None:
                batch = self._new_batch(tp, record_size)
                opened = True
                index = batch.builder.append_next(timestamp_ms, key, value, headers)
                if index != 0:
                    raise AssertionError("an empty batch refused a record")
            if sticky:
                self.appendable[topic] = batch  # send()'s fast path appends here next
        if opened:
            # The batch before this one is the sender's to send now: let it have the GIL.
            # A thread sending in a tight loop holds the GIL for the switch interval
            # (5 ms) at a time, and the sender needs it several times per batch (drain,
            # build, request, response, completion): without this it fell behind by
            # 100+ ms in a burst of 300,000 records, though the loop ran no faster.
            _yield_gil(0)
        return FutureRecordMetadata(batch, index, timestamp_ms, key_size, value_size, header_size)

    def _try_append(self, tp: Tuple[str, int], batch: ProducerBatch, timestamp_ms: int, key: Any, value: Any,
                    headers: Any, record_size: int) -> int:
        """Append to an open batch, growing it if it is full; -> the record's index, or -1 (then
        the batch is closed, full). Lock held."""
        index: int = batch.builder.append_next(timestamp_ms, key, value, headers)
        if index < 0 and self._grow(batch, record_size):
            index = batch.builder.append_next(timestamp_ms, key, value, headers)
        if index < 0:
            self.close_batch(tp, batch)
        return index

    def _reserve(self, need: int, deadline: float) -> None:
        """Take ``need`` bytes of buffer memory, waiting for the sender to free some. Lock held."""
        if self.used and self.used + need > self._buffer_memory:
            started = time.monotonic()
            try:
                while self.used and self.used + need > self._buffer_memory:
                    if self.sender_waiting:
                        self.wakeup.notify()
                    remaining = deadline - time.monotonic()
                    if remaining <= 0:
                        raise BufferExhaustedError(
                            "no room for %d more bytes in buffer_memory=%d (%d in use) after max_block_ms=%d"
                            % (need, self._buffer_memory, self.used, self._max_block_ms))
                    self.space.wait(remaining)
                    if self.closed:
                        raise IllegalStateError("the producer was closed while send() waited for buffer memory")
            finally:
                self._buffer_wait.record(time.monotonic() - started)
        self.used += need

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
        if self.used + extra > self._buffer_memory:
            return False
        self.used += extra
        batch.reserved = want
        builder.batch_size = want
        return True

    def _new_batch(self, tp: Tuple[str, int], record_size: int) -> ProducerBatch:
        """Open a batch for ``tp`` (lock held): reserve its memory, stamp its producer fields."""
        now = time.monotonic()
        need = max(min(self._batch_limit, _FIRST_RESERVATION), record_size + HEADER_SIZE)
        self._reserve(need, now + self._max_block)
        if self.closed:
            self._release(need)
            raise IllegalStateError("the producer is closed")
        if self.transaction is not None:
            try:
                self.transaction.check_append()
            except BaseException:
                self._release(need)
                raise
        raced = self.open.get(tp)
        if raced is not None:  # opened by another thread while this one waited for memory
            self.close_batch(tp, raced)
        if self._idempotent:
            sequence = self._sequences.get(tp, 0)
            builder = records.RecordBatchBuilder(self._codec, producer_id=self._producer_id,
                                                 producer_epoch=self._producer_epoch, base_sequence=sequence,
                                                 is_transactional=self.transaction is not None,
                                                 batch_size=need)
        else:
            sequence = NO_SEQUENCE
            builder = records.RecordBatchBuilder(self._codec, batch_size=need)
        batch = ProducerBatch(tp[0], tp[1], builder, now, now + self._delivery_timeout, sequence, need)
        self.open[tp] = batch
        self.incomplete.add(batch)
        if self.sender_waiting:
            self.wakeup.notify()
        return batch

    def close_batch(self, tp: Tuple[str, int], batch: ProducerBatch) -> None:
        """Move an open batch to its partition's send queue; no record joins it after this. Lock held."""
        del self.open[tp]
        if self.appendable.get(tp[0]) is batch:
            del self.appendable[tp[0]]
        batch.count = batch.builder.record_count
        if self._idempotent:
            self._sequences[tp] = (batch.base_sequence + batch.count) % _SEQUENCE_SPACE
        self._enqueue(tp, batch)

    def _enqueue(self, tp: Tuple[str, int], batch: ProducerBatch) -> None:
        """Queue a closed batch for the sender and wake it if it waits (lock held)."""
        queue = self.queues.get(tp)
        if queue is None:
            queue = self.queues[tp] = collections.deque()
        queue.append(batch)
        if self.sender_waiting:
            self.wakeup.notify()

    def _release(self, nbytes: int) -> None:
        self.used -= nbytes
        self.space.notify_all()

    # -- bulk ------------------------------------------------------------------------

    def bulk_group(self, topic: str, partition: Optional[int], values: Sequence[Any], keys: Optional[Sequence[Any]],
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
        with self.lock:
            if partition is None:
                n = self._partition_counts[topic]
                current = self._sticky.get(topic)
                if current is None:
                    current = self._sticky_partitioner.partition(topic, n)
                partition = self._sticky[topic] = self._sticky_partitioner.new_batch(topic, n, current)
            tp = (topic, partition)
            batch = self.open.get(tp)
            if batch is not None:
                self.close_batch(tp, batch)
            return tp, self._sequences.get(tp, 0) if self._idempotent else NO_SEQUENCE

    def _build(self, args: Tuple[Any, ...], sequence: int) -> bytearray:
        values, keys, timestamps, headers = args
        if self._idempotent:
            return cast(bytearray, records.build_batch(
                values, keys, timestamps, headers, self._codec, producer_id=self._producer_id,
                producer_epoch=self._producer_epoch, base_sequence=sequence,
                is_transactional=self.transaction is not None))
        return cast(bytearray, records.build_batch(values, keys, timestamps, headers, self._codec))

    def _enqueue_built(self, tp: Tuple[str, int], data: bytearray, count: int, sequence: int,
                       args: Tuple[Any, ...]) -> ProducerBatch:
        """Queue a built batch for the sender behind everything already queued for ``tp``."""
        now = time.monotonic()
        with self.lock:
            self._reserve(len(data), now + self._max_block)
            if self.closed:
                self._release(len(data))
                raise IllegalStateError("the producer is closed")
            if self.transaction is not None:
                try:
                    self.transaction.check_append()
                except BaseException:
                    self._release(len(data))
                    raise
            open_batch = self.open.get(tp)
            if open_batch is not None:
                self.close_batch(tp, open_batch)
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
            self.incomplete.add(batch)
            self._enqueue(tp, batch)
            return batch

    # -- transactions ----------------------------------------------------------------

    def set_producer(self, producer_id: int, producer_epoch: int) -> None:
        """Stamp the batches opened from now on with this producer id and epoch, their
        sequences from 0 again (a transactional producer's new or bumped epoch). Called with
        no batch pending: every sequence of the old epoch is done with."""
        with self.lock:
            self._producer_id, self._producer_epoch = producer_id, producer_epoch
            self._sequences.clear()

    def seal(self) -> None:
        """Close every open batch (lock held): no record joins the transaction being
        committed, and a ``send()`` after it opens a batch, which the manager refuses."""
        for tp, batch in list(self.open.items()):
            self.close_batch(tp, batch)
        self.appendable.clear()
        if self.sender_waiting:
            self.wakeup.notify()

    def take_unsent(self, partitions: Optional[Iterable[Tuple[str, int]]] = None,
                    leading: Sequence[ProducerBatch] = ()) -> List[ProducerBatch]:
        """Take back the batches never sent of ``partitions`` (None: all), for the caller to
        fail (lock held); ``leading``: a partition's batches the sender drained and will not
        send, which come before its queue. A partition's next sequence is then the first taken
        batch's, as the broker never saw those sequences.

        A batch sent before (a retry due) stays queued: the broker may have written it, so
        its outcome is the broker's to tell. Such batches are only ever at the head of their
        queue (a retry is requeued in front), so what is taken is the tail of the partition's
        sequence, and the rewind leaves no gap.
        """
        tps = set(self.open) | set(self.queues) if partitions is None else set(partitions)
        taken: List[ProducerBatch] = []
        for tp in tps:
            batch = self.open.get(tp)
            if batch is not None:
                self.close_batch(tp, batch)
            queue = self.queues.get(tp)
            kept: List[ProducerBatch] = []
            dropped: List[ProducerBatch] = list(leading) if partitions is not None else []
            if queue is not None:
                for batch in queue:
                    (dropped if batch.attempts == 0 else kept).append(batch)
                if kept:
                    self.queues[tp] = collections.deque(kept)
                else:
                    del self.queues[tp]
            if dropped and self._idempotent and dropped[0].base_sequence >= 0:
                self._sequences[tp] = dropped[0].base_sequence
            taken.extend(dropped)
        self.appendable.clear()
        return taken

    # -- the sender's side -----------------------------------------------------------

    def drain(self, now: float) -> Tuple[List[List[ProducerBatch]], Optional[float]]:
        """Batches to send now, per partition in order, and when to look again. Lock held."""
        if self.open:
            urgent = self.flushing or self.stopping
            for tp, batch in list(self.open.items()):
                if urgent or now - batch.created >= self._linger:
                    self.close_batch(tp, batch)
        ready: List[List[ProducerBatch]] = []
        wake: Optional[float] = None
        for tp, queue in list(self.queues.items()):
            head = queue[0]
            if head.retry_at > now:
                wake = head.retry_at if wake is None else min(wake, head.retry_at)
                continue
            ready.append(list(queue))
            del self.queues[tp]
        for batch in self.open.values():
            due = batch.created + self._linger
            wake = due if wake is None else min(wake, due)
        return ready, wake

    def requeue(self, batches: List[ProducerBatch]) -> None:
        """Put a partition's unsent batches (the first to be retried) back at the head of its queue."""
        with self.lock:
            batch = batches[0]
            tp = (batch.topic, batch.partition)
            queue = self.queues.get(tp)
            rest = collections.deque(batches)
            if queue is not None:
                rest.extend(queue)
            self.queues[tp] = rest
            if self.sender_waiting:
                self.wakeup.notify()

    def deallocate(self, batch: ProducerBatch) -> bool:
        """Forget a batch being completed and free its memory; -> False when it was completed already."""
        with self.lock:
            if batch not in self.incomplete:
                return False
            self.incomplete.remove(batch)
            self._release(batch.reserved)
            if self.stopping and not self.incomplete and self.sender_waiting:
                self.wakeup.notify()
        return True
