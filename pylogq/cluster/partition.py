"""One topic partition as its leader sees it: the log, the high watermark and producer state.

Kafka's Partition (with the leader's part of ReplicaManager.appendRecords).
The log end offset (LEO) is where the next append goes; the high watermark
(HW) is the offset below which records are committed, the end of what
consumers may read. With one replica a record is committed once it is in the
log, so an append moves the HW to the LEO. They stay two numbers so that
replication can hold the HW back until followers have caught up
(:meth:`Partition.update_high_watermark`).

Idempotent producers: once the log has validated an append's batches (one
pass over the buffer, which also reads each header), the producer id, epoch
and sequence of each v2 batch are checked by the
:class:`~pylogq.cluster.producer_state.ProducerStateManager` before anything
is written; a retried batch gets its original offsets back and is not
written again. The result is :class:`~pylogq.records.AppendResult`, the one
shape an append has from the log to the wire.
"""

from __future__ import annotations

import threading
import time
from typing import Callable, List, Optional, Tuple, Union

from ..errors import (
    InvalidRequiredAcksError,
    NotLeaderOrFollowerError,
    OffsetOutOfRangeError,
)
from ..records import AppendResult
from ..storage.log import (
    EARLIEST_LOCAL_TIMESTAMP,
    EARLIEST_TIMESTAMP,
    LATEST_TIERED_TIMESTAMP,
    LATEST_TIMESTAMP,
    MAX_TIMESTAMP,
    Log,
)
from ..storage.segment import FileRegion
from .contract import ProducerDescription
from .producer_state import ProducerStateManager

__all__ = ["ISOLATION_LEVELS", "ORIGINS", "Partition"]

ISOLATION_LEVELS = ("read_uncommitted", "read_committed")
ORIGINS = ("client", "coordinator")


class Partition:
    """A partition led by this broker: appends with producer checks, reads up to the high watermark.

    Invariant: ``log_start_offset <= high_watermark <= log_end_offset``.
    Thread-safe: appends, high watermark changes and producer state are
    serialized by one lock;
    reads take no lock (the log's reads are lock-free snapshots and the high
    watermark is one attribute). The partition does not own its log: closing
    it leaves the log to whoever opened it (the LogManager).
    """

    def __init__(self, topic: str, index: int, log: Log, leader_epoch: int = 0, *,
                 high_watermark: Optional[int] = None, single_replica: bool = True) -> None:
        """``high_watermark`` defaults to the log end (everything on disk is committed with
        one replica); ``single_replica=False`` leaves the HW to :meth:`update_high_watermark`."""
        self.topic = topic
        self.index = index
        self.log = log
        self._leader_epoch = leader_epoch
        self.single_replica = single_replica
        self._lock = threading.RLock()
        #: Called (outside the lock) when the high watermark moves forward (an append with
        #: one replica, or :meth:`update_high_watermark`): the broker checks the requests
        #: waiting on this partition.
        self.on_high_watermark_advanced: Optional[Callable[[], None]] = None
        self.closed = False
        self.producer_state = ProducerStateManager()
        with log.lock:
            self.producer_state.load_from_log(log)
            end = log.log_end_offset
        hw = end if high_watermark is None else high_watermark
        self._high_watermark = max(min(hw, end), log.log_start_offset)

    # -- state -------------------------------------------------------------------------

    @property
    def high_watermark(self) -> int:
        return self._high_watermark

    @property
    def log_end_offset(self) -> int:
        return self.log.log_end_offset

    @property
    def log_start_offset(self) -> int:
        return self.log.log_start_offset

    @property
    def leader_epoch(self) -> int:
        return self._leader_epoch

    @leader_epoch.setter
    def leader_epoch(self, epoch: int) -> None:
        with self._lock:
            if epoch < self._leader_epoch:
                raise ValueError("leader epoch cannot go back from %d to %d" % (self._leader_epoch, epoch))
            self._leader_epoch = epoch

    def update_high_watermark(self, offset: int) -> bool:
        """Set the high watermark (replication's commit point); -> whether it moved.

        It may move back (a new leader's HW can be lower) but never past the
        log end or below the log start. Waiters wake when it advances.
        """
        with self._lock:
            end = self.log.log_end_offset
            if not self.log.log_start_offset <= offset <= end:
                raise OffsetOutOfRangeError(
                    "high watermark %d of %s-%d must lie between the log start %d and the log end %d"
                    % (offset, self.topic, self.index, self.log.log_start_offset, end))
            old = self._high_watermark
            self._high_watermark = offset
        if offset > old and self.on_high_watermark_advanced is not None:
            self.on_high_watermark_advanced()
        return offset != old

    # -- appending -----------------------------------------------------------------------

    def append(self, data: Union[bytes, bytearray, memoryview], required_acks: int = 1,
               origin: str = "client") -> AppendResult:
        """Append a producer's batches; -> their offsets (the original ones for a retried batch).

        ``required_acks`` is 0, 1 or -1 (all in-sync replicas); with one replica
        they are the same here: the append returns once the log has it (in the
        page cache; fsync follows ``flush.messages``/``flush.ms``), which is
        also when every in-sync replica has it. Other values raise
        InvalidRequiredAcksError. For ``origin="client"`` idempotent batches are
        checked (duplicate, OutOfOrderSequenceNumberError,
        InvalidProducerEpochError, UnknownProducerIdError) once the log has
        validated them and before anything is written; the broker's own
        writers (``"coordinator"``) are not checked, and only they may write
        control batches (a client's get InvalidRecordError). Log.append's errors
        (CorruptRecordError, MessageTooLargeError, ...) pass through, with
        nothing written. A retry's result has ``duplicate`` set.
        """
        if required_acks not in (0, 1, -1) or isinstance(required_acks, bool):
            raise InvalidRequiredAcksError(
                "required_acks must be 0, 1 or -1 (all in-sync replicas), got %r" % (required_acks,))
        if origin not in ORIGINS:
            raise ValueError("origin must be one of %s, got %r" % (", ".join(ORIGINS), origin))
        buffer = bytearray(data)  # Log.append patches offsets into it in place
        with self._lock:
            self._check_open()
            producers = self.producer_state
            result = self.log.append(buffer, self._leader_epoch,
                                     check_producers=producers.check_append if origin == "client" else None,
                                     producers_appended=producers.appended, allow_control=origin != "client")
            advanced = self.single_replica and not result.duplicate
            if advanced:
                self._high_watermark = self.log.log_end_offset
        if advanced and self.on_high_watermark_advanced is not None:
            self.on_high_watermark_advanced()
        return result

    # -- reading ---------------------------------------------------------------------------

    def read(self, offset: int, max_bytes: int, isolation_level: str = "read_uncommitted",
             min_one_batch: bool = True) -> FileRegion:
        """Whole batches from the one holding ``offset``, none at or past the high watermark.

        ``read_committed`` is bounded by the high watermark too: without
        transactions the last stable offset is the high watermark. An offset
        between the HW and the log end gives an empty region; below the log
        start or past the log end, OffsetOutOfRangeError.
        """
        _check_isolation(isolation_level)
        self._check_open()
        return self.log.read(offset, max_bytes, max_offset=self._high_watermark, min_one_batch=min_one_batch)

    def offset_for_timestamp(self, timestamp: int,
                             isolation_level: str = "read_uncommitted") -> Optional[Tuple[int, int]]:
        """Kafka's ListOffsets: -> (offset, timestamp), or None when no committed record is that late.

        -1 (latest) answers the high watermark, as Kafka does for consumers
        (they may not read past it); -2 (earliest) and -4 (earliest local: there
        is no tiered storage) the log start; -3 the first record holding the
        largest timestamp (KIP-734); -5 (latest tiered) None, nothing being
        tiered. Another value finds the first batch whose max timestamp is at
        least ``timestamp``, among the batches below the high watermark.
        """
        _check_isolation(isolation_level)
        self._check_open()
        hw = self._high_watermark
        if timestamp == LATEST_TIMESTAMP:
            return hw, -1
        if timestamp in (EARLIEST_TIMESTAMP, EARLIEST_LOCAL_TIMESTAMP):
            return self.log.log_start_offset, -1
        if timestamp == MAX_TIMESTAMP:
            return self.log.offset_of_max_timestamp(below=hw)
        if timestamp == LATEST_TIERED_TIMESTAMP:
            return None
        if timestamp < 0:
            raise ValueError("timestamp must be -1 (latest), -2 (earliest), -3 (max timestamp), -4 (earliest "
                             "local), -5 (latest tiered) or a time in ms, got %d" % timestamp)
        found = self.log.offset_for_timestamp(timestamp)
        if found is None or found[0] >= hw:
            return None
        return found

    def legacy_offsets_before(self, timestamp: int, max_count: int) -> List[int]:
        """ListOffsets v0's offsets (:meth:`Log.legacy_offsets_before`), the high watermark
        standing for the log end."""
        self._check_open()
        return self.log.legacy_offsets_before(timestamp, max_count, int(time.time() * 1000),
                                              below=self._high_watermark)

    # -- deletion and lifecycle -------------------------------------------------------------

    def delete_records_before(self, offset: int) -> int:
        """Kafka's DeleteRecords: make records below ``offset`` unreadable; -> the new log start.

        ``offset`` may not pass the high watermark (OffsetOutOfRangeError):
        uncommitted records are not the client's to delete.
        """
        with self._lock:
            self._check_open()
            if offset < 0 or offset > self._high_watermark:
                raise OffsetOutOfRangeError(
                    "cannot delete records of %s-%d before offset %d: it must lie between 0 and the "
                    "high watermark %d" % (self.topic, self.index, offset, self._high_watermark))
            return self.log.delete_records_before(offset)

    def active_producers(self) -> List[ProducerDescription]:
        """Kafka's DescribeProducers for this partition: each idempotent producer's epoch,
        last sequence and last batch's timestamp, by producer id."""
        with self._lock:
            self._check_open()
            table = self.producer_state.snapshot()
        return [ProducerDescription(pid, epoch, batches[-1].last_seq, batches[-1].timestamp)
                for pid, (epoch, batches) in sorted(table.items())]

    def truncate_to(self, offset: int) -> bool:
        """Remove records at ``offset`` and beyond (a follower diverging from its leader);
        the high watermark and producer state follow. -> whether anything was removed."""
        with self._lock:
            self._check_open()
            removed = self.log.truncate_to(offset)
            if removed:
                self.producer_state.truncate_to(offset, self.log)
                self._high_watermark = min(self._high_watermark, self.log.log_end_offset)
            return removed

    def _check_open(self) -> None:
        if self.closed:
            raise NotLeaderOrFollowerError("partition %s-%d is closed on this broker" % (self.topic, self.index))

    def close(self) -> None:
        """Stop serving: later calls raise NotLeaderOrFollowerError. The log stays open."""
        with self._lock:
            self.closed = True

    def __repr__(self) -> str:
        return "Partition(%s-%d, start=%d, hw=%d, end=%d, leader_epoch=%d)" % (
            self.topic, self.index, self.log.log_start_offset, self._high_watermark,
            self.log.log_end_offset, self._leader_epoch)


def _check_isolation(level: str) -> None:
    if level not in ISOLATION_LEVELS:
        raise ValueError("isolation_level must be 'read_uncommitted' or 'read_committed', got %r" % (level,))
