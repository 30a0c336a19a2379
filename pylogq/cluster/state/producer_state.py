"""Idempotent producer bookkeeping for one partition: Kafka's ProducerStateManager, reduced.

An idempotent producer stamps each v2 batch with its producer id, its epoch
and the sequence number of the batch's first record (``BaseSequence``, header
byte 53); the batch's last sequence is ``(BaseSequence + LastOffsetDelta) mod
2**31``, wrapping after Int32.MAX like the Java client. For each producer id
the partition keeps the epoch and the metadata of its last
:data:`NUM_BATCHES_TO_RETAIN` batches (the producer's
``max.in.flight.requests.per.connection`` limit for idempotence is 5, so a
retry is always of one of them). Then, per batch:

- same epoch, same first and last sequence as a retained batch: a retry of a
  batch already written; the partition answers with its original offsets and
  writes nothing;
- an epoch lower than the known one: a fenced (zombie) producer,
  InvalidProducerEpochError;
- a higher epoch: a producer that reset its sequences, which must restart at
  0 (OutOfOrderSequenceNumberError otherwise);
- the same epoch: the first sequence must follow the last one written
  (OutOfOrderSequenceNumberError for a gap or a stale retry);
- an unknown producer must start at sequence 0. Otherwise its state was lost
  (all its batches removed by retention or DeleteRecords before the partition
  reopened): UnknownProducerIdError, as Kafka 0.11 to 2.4 answered, so the
  producer resets its id instead of the broker silently accepting a gap.

The state is rebuilt from the log when a partition opens (Kafka also writes
snapshots; pylogq rereads the batch headers, which costs a scan of the log's
headers). Producer ids do not expire (``producer.id.expiration.ms`` is not
implemented): the table grows with the number of distinct producers.
"""

from __future__ import annotations

from collections import deque
from typing import TYPE_CHECKING, Deque, Dict, Iterable, List, NamedTuple, Optional, Sequence, Tuple, Union

from ...errors import InvalidProducerEpochError, OutOfOrderSequenceNumberError, UnknownProducerIdError
from ...records import BatchHeader, iter_batches
from ...records.default_records import INT32_MAX

__all__ = [
    "NUM_BATCHES_TO_RETAIN", "BatchMetadata", "DuplicateBatch", "last_sequence",
    "in_sequence", "producer_batches", "ProducerStateManager"
]

if TYPE_CHECKING:
    from ...storage.log import Log

#: Batches kept per producer for duplicate detection (Kafka's NUM_BATCHES_TO_RETAIN).
NUM_BATCHES_TO_RETAIN = 5

_SEQUENCE_SPACE = INT32_MAX + 1


class BatchMetadata(NamedTuple):
    """What is remembered of one written batch of a producer."""

    first_seq: int
    last_seq: int
    first_offset: int
    last_offset: int
    timestamp: int


class DuplicateBatch(NamedTuple):
    """The original outcome of a batch that was sent again: its offsets and timestamp."""

    first_offset: int
    last_offset: int
    timestamp: int


def last_sequence(first_seq: int, last_offset_delta: int) -> int:
    """The sequence of a batch's last record, wrapping after Int32.MAX as the producer does."""
    return (first_seq + last_offset_delta) % _SEQUENCE_SPACE


def in_sequence(last_seq: int, next_seq: int) -> bool:
    """Whether ``next_seq`` directly follows ``last_seq`` (0 follows Int32.MAX)."""
    return next_seq == last_seq + 1 or (next_seq == 0 and last_seq == INT32_MAX)


def producer_batches(buffer: Union[bytes, bytearray]) -> List[BatchHeader]:
    """The headers of the idempotent (producer id >= 0) v2 batches of a buffer of batches, in order.

    Framing errors raise CorruptRecordError (from the walker); CRCs are not
    checked here.
    """
    return [h for h in iter_batches(buffer) if h.magic == 2 and h.producer_id >= 0]


class _Entry:
    """One producer's state: its epoch and its last batches, oldest first."""

    __slots__ = ("epoch", "batches")

    def __init__(self, epoch: int) -> None:
        self.epoch = epoch
        self.batches: Deque[BatchMetadata] = deque(maxlen=NUM_BATCHES_TO_RETAIN)

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq

    def find(self, first_seq: int, last_seq: int) -> Optional[BatchMetadata]:
        for b in self.batches:
            if b.first_seq == first_seq and b.last_seq == last_seq:
                return b
        return None


class ProducerStateManager:
    """Per-partition producer id -> (epoch, last 5 batches); decides duplicate / in sequence / error.

    Invariant: every producer id in the table has at least one retained batch,
    and its batches' sequences and offsets increase. Not thread-safe: it is
    used under the partition's lock, which hands :meth:`check_append` and
    :meth:`appended` to ``Log.append`` (checking between validation and the
    write, updating after it).
    """

    def __init__(self) -> None:
        self._producers: Dict[int, _Entry] = {}

    # -- queries ---------------------------------------------------------------

    def __len__(self) -> int:
        return len(self._producers)

    def __contains__(self, producer_id: object) -> bool:
        return producer_id in self._producers

    def epoch(self, producer_id: int) -> Optional[int]:
        """The known epoch of ``producer_id``; None for an unknown producer."""
        entry = self._producers.get(producer_id)
        return None if entry is None else entry.epoch

    def last_sequence(self, producer_id: int) -> Optional[int]:
        """The last sequence written by ``producer_id``; None for an unknown producer."""
        entry = self._producers.get(producer_id)
        return None if entry is None else entry.last_seq

    def batches(self, producer_id: int) -> Tuple[BatchMetadata, ...]:
        """The retained batches of ``producer_id``, oldest first (empty for an unknown producer)."""
        entry = self._producers.get(producer_id)
        return () if entry is None else tuple(entry.batches)

    # -- validation -------------------------------------------------------------

    def check(self, producer_id: int, epoch: int, first_seq: int, last_seq: int) -> Optional[DuplicateBatch]:
        """Validate one batch before it is appended.

        -> None when it is new and in sequence, the original outcome when it is
        a duplicate of a retained batch. Raises InvalidProducerEpochError,
        OutOfOrderSequenceNumberError or UnknownProducerIdError (see the
        module docstring). Changes nothing.
        """
        return self.check_batches([(producer_id, epoch, first_seq, last_seq)])

    def check_append(self, batches: Sequence[BatchHeader]) -> Optional[DuplicateBatch]:
        """:meth:`check_batches` for an append's validated batch headers (non-idempotent ones pass).

        What ``Log.append`` calls between validating and writing (its ``check_producers``).
        """
        return self.check_batches(
            (h.producer_id, h.producer_epoch, h.base_sequence,
             last_sequence(h.base_sequence, h.last_offset - h.base_offset))
            for h in batches if h.producer_id >= 0)

    def check_batches(self, batches: Iterable[Tuple[int, int, int, int]]) -> Optional[DuplicateBatch]:
        """Validate the (producer id, epoch, first seq, last seq) of an append's batches, in order.

        A later batch of the same producer is checked against the earlier ones
        as if they were written. -> the first duplicate found (the append then
        writes nothing, as in Kafka), else None. Changes nothing.
        """
        pending: Dict[int, Tuple[int, int]] = {}  # producer id -> (epoch, last seq) of this append
        for producer_id, epoch, first_seq, last_seq in batches:
            entry = self._producers.get(producer_id)
            if producer_id not in pending and entry is not None and epoch == entry.epoch:
                found = entry.find(first_seq, last_seq)
                if found is not None:
                    return DuplicateBatch(found.first_offset, found.last_offset, found.timestamp)
            if producer_id in pending:
                known_epoch, known_last = pending[producer_id]
            elif entry is not None:
                known_epoch, known_last = entry.epoch, entry.last_seq
            else:
                if first_seq != 0:
                    raise UnknownProducerIdError(
                        "producer %d is unknown to this partition and its batch starts at sequence %d, not 0: "
                        "its state was lost (its batches were removed) or it never wrote here"
                        % (producer_id, first_seq))
                pending[producer_id] = (epoch, last_seq)
                continue
            if epoch < known_epoch:
                raise InvalidProducerEpochError(
                    "producer %d sent epoch %d, older than its current epoch %d: it was fenced"
                    % (producer_id, epoch, known_epoch))
            if epoch > known_epoch:
                if first_seq != 0:
                    raise OutOfOrderSequenceNumberError(
                        "producer %d started epoch %d at sequence %d; a new epoch starts at 0"
                        % (producer_id, epoch, first_seq))
            elif not in_sequence(known_last, first_seq):
                raise OutOfOrderSequenceNumberError(
                    "producer %d epoch %d sent sequence %d, expected %d (the last written is %d)"
                    % (producer_id, epoch, first_seq, (known_last + 1) % _SEQUENCE_SPACE, known_last))
            pending[producer_id] = (epoch, last_seq)
        return None

    # -- changes ----------------------------------------------------------------

    def update(self, producer_id: int, epoch: int, first_seq: int, last_seq: int,
               first_offset: int, last_offset: int, timestamp: int) -> None:
        """Record a batch just written; a higher epoch forgets the older epoch's batches."""
        entry = self._producers.get(producer_id)
        if entry is None or epoch != entry.epoch:
            entry = _Entry(epoch)
            self._producers[producer_id] = entry
        entry.batches.append(BatchMetadata(first_seq, last_seq, first_offset, last_offset, timestamp))

    def appended(self, batches: Sequence[BatchHeader]) -> None:
        """Record an append's idempotent batches as written (their offsets; the max timestamp
        field holds the log append time on LogAppendTime topics). ``Log.append``'s
        ``producers_appended``."""
        for h in batches:
            if h.producer_id >= 0:
                self.update(h.producer_id, h.producer_epoch, h.base_sequence,
                            last_sequence(h.base_sequence, h.last_offset - h.base_offset),
                            h.base_offset, h.last_offset, h.max_timestamp)

    def clear(self) -> None:
        """Forget every producer."""
        self._producers.clear()

    def load_from_log(self, log: "Log", max_offset: Optional[int] = None,
                      chunk_bytes: int = 1 << 20) -> int:
        """Rebuild the table from the headers of ``log``'s batches (below ``max_offset`` if given).

        -> the number of idempotent batches seen. Batches are replayed as they
        were written, without validation: the log is the truth.
        """
        self._producers.clear()
        end = log.log_end_offset if max_offset is None else min(max_offset, log.log_end_offset)
        offset = log.log_start_offset
        seen = 0
        while offset < end:
            data = log.read(offset, chunk_bytes, max_offset=end).read()
            if not data:
                break
            last = offset - 1
            for h in iter_batches(data):
                last = h.last_offset
                if h.magic != 2 or h.last_offset < offset or h.last_offset >= end:
                    continue  # an older format, already seen, or reaching past ``max_offset``
                if h.producer_id < 0:
                    continue
                # The max timestamp field holds the log append time on LogAppendTime batches.
                self.update(h.producer_id, h.producer_epoch, h.base_sequence,
                            last_sequence(h.base_sequence, h.last_offset - h.base_offset),
                            h.base_offset, h.last_offset, h.max_timestamp)
                seen += 1
            if last < offset:
                break  # no progress: nothing more below ``end``
            offset = last + 1
        return seen

    def truncate_to(self, offset: int, log: Optional["Log"] = None) -> None:
        """Forget the batches at or after ``offset`` (the log was truncated there).

        With ``log`` the table is rebuilt from the batches below ``offset``
        (exact: older batches of a producer come back). Without, retained
        batches at or after ``offset`` are dropped, and a producer left with
        none is forgotten.
        """
        if log is not None:
            self.load_from_log(log, max_offset=offset)
            return
        for pid in list(self._producers):
            entry = self._producers[pid]
            kept = [b for b in entry.batches if b.last_offset < offset]
            if not kept:
                del self._producers[pid]
            elif len(kept) != len(entry.batches):
                entry.batches.clear()
                entry.batches.extend(kept)

    def snapshot(self) -> Dict[int, Tuple[int, Sequence[BatchMetadata]]]:
        """A copy of the table: producer id -> (epoch, retained batches oldest first)."""
        return {pid: (e.epoch, tuple(e.batches)) for pid, e in self._producers.items()}
