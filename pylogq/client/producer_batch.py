"""A producer batch and the futures of its records: what the accumulator, the sender and ``send()`` share.

A :class:`ProducerBatch` is opened by the record accumulator
(:mod:`pylogq.client.accumulator`), sent and completed by the sender
(:mod:`pylogq.client.sender`); each record ``send()`` queues gets a
:class:`FutureRecordMetadata` on its batch, which resolves to a
:class:`RecordMetadata` once the batch is acknowledged (Kafka's
``ProducerBatch``, ``FutureRecordMetadata`` and ``RecordMetadata``).
"""

from __future__ import annotations

import logging
import threading
from typing import Any, Callable, Dict, List, NamedTuple, Optional, Tuple

from ..errors import KafkaTimeoutError

__all__ = ["FutureRecordMetadata", "ProducerBatch", "RecordMetadata"]

# The producer's logger, as before the producer was split into modules.
log = logging.getLogger("pylogq.client.producer")

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
