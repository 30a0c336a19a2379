"""Idempotent and transactional producer bookkeeping for one partition: Kafka's ProducerStateManager, reduced.

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

Transactions (KIP-98), as Kafka's ProducerAppendInfo keeps them: a
transactional batch (attribute bit 4) opens a transaction for its producer at
its base offset, unless one is open; while it is, the producer's batches must
be transactional (InvalidTxnStateError otherwise). A control batch carrying a
COMMIT or ABORT marker (:mod:`pylogq.records.control`), written by the
transaction coordinator, ends it: a marker whose producer epoch is older than
the producer's is refused with InvalidProducerEpochError, and one whose
coordinator epoch is older than the last marker's with
TransactionCoordinatorFencedError (a zombie coordinator); a newer producer
epoch on a marker becomes the producer's (its retained batches go). A
transaction that ended in an ABORT is recorded, with the last stable offset
of that moment, in the transaction index of the segment the marker went to.
Which transactions keep offsets unstable, ongoing or decided above the high
watermark, is :attr:`ProducerStateManager.txns`
(:class:`~pylogq.storage.unstable_txns.UnstableTxns`): the partition's first
unstable and last stable offsets come from it. Followers' appends and the
replay below apply the same steps without refusing anything: the log is the
truth.

The state is rebuilt from the log when a partition opens (Kafka also writes
snapshots; pylogq rereads the batch headers, and a marker's control record,
which costs a scan of the log's headers): the producers, their open
transactions and which are ongoing. The transaction indexes are the log's: the
replay writes none (the log's loader rewrote those of the segments it
recovered). Producer ids do not expire (``producer.id.expiration.ms`` is not
implemented): the table grows with the number of distinct producers.
"""

from __future__ import annotations

from collections import deque
from typing import (TYPE_CHECKING, Deque, Dict, Iterable, List, NamedTuple, Optional, Sequence, Tuple,
                    Union)

from ...errors import (
    CorruptRecordError,
    InvalidProducerEpochError,
    InvalidRecordError,
    InvalidTxnStateError,
    OutOfOrderSequenceNumberError,
    TransactionCoordinatorFencedError,
    UnknownProducerIdError,
)
from ...records import CONTROL_MASK, TRANSACTIONAL_MASK, BatchHeader, iter_batches
from ...records.control import EndTxnMarker, end_txn_marker
from ...records.default_records import INT32_MAX, NO_PRODUCER_EPOCH, NO_SEQUENCE
from ...storage.transaction_index import AbortedTxn, CompletedTxn
from ...storage.unstable_txns import UnstableTxns

__all__ = [
    "NUM_BATCHES_TO_RETAIN", "BatchMetadata", "DuplicateBatch", "ProducerEntry", "last_sequence",
    "in_sequence", "producer_batches", "ProducerStateManager"
]

if TYPE_CHECKING:
    from ...storage.log import IndexAborted, Log

Buffer = Union[bytes, bytearray, memoryview]

#: Batches kept per producer for duplicate detection (Kafka's NUM_BATCHES_TO_RETAIN).
NUM_BATCHES_TO_RETAIN = 5

_SEQUENCE_SPACE = INT32_MAX + 1
# A batch with either bit takes the transactional path (a control batch is a marker).
_TXN_BITS = TRANSACTIONAL_MASK | CONTROL_MASK


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


class ProducerEntry(NamedTuple):
    """One producer's state as DescribeProducers reports it (Kafka's ProducerStateEntry)."""

    producer_id: int
    epoch: int
    last_seq: int  # -1 when no batch of this epoch is retained
    last_timestamp: int
    coordinator_epoch: int  # of the last marker; -1 before any
    current_txn_first_offset: int  # -1 without an open transaction
    batches: Tuple[BatchMetadata, ...]


def last_sequence(first_seq: int, last_offset_delta: int) -> int:
    """The sequence of a batch's last record, wrapping after Int32.MAX as the producer does."""
    return (first_seq + last_offset_delta) % _SEQUENCE_SPACE


def in_sequence(last_seq: int, next_seq: int) -> bool:
    """Whether ``next_seq`` directly follows ``last_seq`` (0 follows Int32.MAX, and starts a
    producer or epoch with no sequence yet, -1)."""
    return next_seq == last_seq + 1 or (next_seq == 0 and last_seq == INT32_MAX)


def producer_batches(buffer: Union[bytes, bytearray]) -> List[BatchHeader]:
    """The headers of the idempotent (producer id >= 0) v2 batches of a buffer of batches, in order.

    Framing errors raise CorruptRecordError (from the walker); CRCs are not
    checked here.
    """
    return [h for h in iter_batches(buffer) if h.magic == 2 and h.producer_id >= 0]


class _Entry:
    """One producer's state: its epoch, its last batches (oldest first), the coordinator epoch of
    its last marker and the time of its last batch or marker."""

    __slots__ = ("epoch", "batches", "coordinator_epoch", "last_timestamp")

    def __init__(self, epoch: int) -> None:
        self.epoch = epoch
        self.batches: Deque[BatchMetadata] = deque(maxlen=NUM_BATCHES_TO_RETAIN)
        self.coordinator_epoch = -1
        self.last_timestamp = -1

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else NO_SEQUENCE

    def set_epoch(self, epoch: int) -> None:
        """A batch or marker in ``epoch``: another epoch's batches are no retry's any more."""
        if epoch != self.epoch:
            self.batches.clear()
            self.epoch = epoch

    def find(self, first_seq: int, last_seq: int) -> Optional[BatchMetadata]:
        for b in self.batches:
            if b.first_seq == first_seq and b.last_seq == last_seq:
                return b
        return None


class ProducerStateManager:
    """Per-partition producer id -> (epoch, last 5 batches, coordinator epoch), and the
    transactions open and unstable; decides duplicate / in sequence / error.

    Invariant: a producer's retained batches are all of its current epoch, their
    sequences and offsets increasing (an entry may hold none: a marker was its last
    word, or bumped its epoch); :attr:`txns` holds each producer's open transaction.
    Not thread-safe: it is used under the partition's lock, which hands
    :meth:`check_append` (or :meth:`check_coordinator_append`) and :meth:`appended`
    to ``Log.append`` (checking between validation and the write, updating after it).
    """

    def __init__(self) -> None:
        self._producers: Dict[int, _Entry] = {}
        #: The transactions open, ongoing and decided above the high watermark.
        self.txns = UnstableTxns()

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
        """The last sequence written by ``producer_id`` in its epoch (-1: none); None for an unknown producer."""
        entry = self._producers.get(producer_id)
        return None if entry is None else entry.last_seq

    def batches(self, producer_id: int) -> Tuple[BatchMetadata, ...]:
        """The retained batches of ``producer_id``, oldest first (empty for an unknown producer)."""
        entry = self._producers.get(producer_id)
        return () if entry is None else tuple(entry.batches)

    def coordinator_epoch(self, producer_id: int) -> Optional[int]:
        """The coordinator epoch of ``producer_id``'s last marker (-1: none yet); None for an unknown producer."""
        entry = self._producers.get(producer_id)
        return None if entry is None else entry.coordinator_epoch

    def entries(self) -> List[ProducerEntry]:
        """Every producer's state, by producer id."""
        out = []
        for pid in sorted(self._producers):
            e = self._producers[pid]
            txn = self.txns.first_offset_of(pid)
            out.append(ProducerEntry(pid, e.epoch, e.last_seq, e.last_timestamp, e.coordinator_epoch,
                                     -1 if txn is None else txn, tuple(e.batches)))
        return out

    @property
    def first_unstable_offset(self) -> Optional[int]:
        """The first offset of the oldest transaction ongoing, or decided with its marker at or above
        the high watermark last given (:meth:`on_high_watermark`); None when there is none."""
        return self.txns.first_unstable_offset

    def on_high_watermark(self, high_watermark: int) -> None:
        """The partition's high watermark is now ``high_watermark``: transactions decided below it
        are stable (Kafka's onHighWatermarkUpdated)."""
        self.txns.on_high_watermark(high_watermark)

    # -- validation -------------------------------------------------------------

    def check(self, producer_id: int, epoch: int, first_seq: int, last_seq: int) -> Optional[DuplicateBatch]:
        """Validate one batch before it is appended.

        -> None when it is new and in sequence, the original outcome when it is
        a duplicate of a retained batch. Raises InvalidProducerEpochError,
        OutOfOrderSequenceNumberError or UnknownProducerIdError (see the
        module docstring). Changes nothing.
        """
        return self.check_batches([(producer_id, epoch, first_seq, last_seq)])

    def check_append(self, batches: Sequence[BatchHeader], buffer: Optional[Buffer] = None) -> Optional[DuplicateBatch]:
        """A client's append (Kafka's origin CLIENT): :meth:`check_batches` for its validated batch
        headers (non-idempotent ones pass), then the transactions: a producer with a transaction
        open may only send transactional batches (InvalidTxnStateError).

        What ``Log.append`` calls between validating and writing (its ``check_producers``);
        a client's append holds no control batch (the log refused it), so ``buffer`` is not read.
        """
        duplicate = self.check_batches(
            (h.producer_id, h.producer_epoch, h.base_sequence,
             last_sequence(h.base_sequence, h.last_offset - h.base_offset))
            for h in batches if h.producer_id >= 0)
        if duplicate is None and not self.txns.empty:
            self._check_txn_state(batches)
        return duplicate

    def check_coordinator_append(self, batches: Sequence[BatchHeader], buffer: Buffer) -> None:
        """The broker's own append (Kafka's origin COORDINATOR: transaction markers, transactional
        offset commits): no sequences, but the epochs. A batch or marker with a producer epoch
        older than the producer's raises InvalidProducerEpochError; a marker whose coordinator
        epoch is older than the producer's last marker's, TransactionCoordinatorFencedError;
        a control batch of a producer that is no COMMIT or ABORT marker, InvalidRecordError;
        a non-transactional batch of a producer with a transaction open, InvalidTxnStateError.
        Changes nothing (``Log.append``'s ``check_producers``; never a duplicate)."""
        pending: Dict[int, Tuple[int, int, bool]] = {}  # producer id -> (epoch, coordinator epoch, txn open)
        for h in batches:
            pid = h.producer_id
            if pid < 0:
                continue
            if pid in pending:
                epoch, coordinator_epoch, is_open = pending[pid]
            else:
                entry = self._producers.get(pid)
                epoch = NO_PRODUCER_EPOCH if entry is None else entry.epoch
                coordinator_epoch = -1 if entry is None else entry.coordinator_epoch
                is_open = self.txns.first_offset_of(pid) is not None
            if h.producer_epoch < epoch:
                raise InvalidProducerEpochError(
                    "%s of producer %d has epoch %d, older than its current epoch %d: it was fenced"
                    % ("the transaction marker" if h.attributes & CONTROL_MASK else "a batch", pid,
                       h.producer_epoch, epoch))
            if h.attributes & CONTROL_MASK:
                marker = end_txn_marker(buffer, h.position)
                if marker is None:
                    continue
                if coordinator_epoch > marker.coordinator_epoch:
                    raise TransactionCoordinatorFencedError(
                        "the transaction marker of producer %d carries coordinator epoch %d, older than the "
                        "coordinator epoch %d of its last marker: it comes from a fenced (zombie) coordinator"
                        % (pid, marker.coordinator_epoch, coordinator_epoch))
                pending[pid] = (h.producer_epoch, marker.coordinator_epoch, False)
                continue
            transactional = bool(h.attributes & TRANSACTIONAL_MASK)
            if is_open and not transactional:
                raise self._not_transactional(pid)
            pending[pid] = (h.producer_epoch, coordinator_epoch, is_open or transactional)
        return None

    def _check_txn_state(self, batches: Sequence[BatchHeader]) -> None:
        """InvalidTxnStateError for a non-transactional batch of a producer whose transaction is open
        (opened before this append or by an earlier batch of it)."""
        opened: Dict[int, bool] = {}
        for h in batches:
            pid = h.producer_id
            if pid < 0:
                continue
            is_open = opened[pid] if pid in opened else self.txns.first_offset_of(pid) is not None
            if h.attributes & TRANSACTIONAL_MASK:
                opened[pid] = True
            elif is_open:
                raise self._not_transactional(pid)

    def _not_transactional(self, producer_id: int) -> InvalidTxnStateError:
        first = self.txns.first_offset_of(producer_id)
        return InvalidTxnStateError(
            "producer %d sent a non-transactional batch while its transaction%s is open: its batches must be "
            "transactional until the transaction coordinator ends it"
            % (producer_id, "" if first is None else " (from offset %d)" % first))

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
                    "producer %d epoch %d sent sequence %d, expected %d (%s)"
                    % (producer_id, epoch, first_seq, (known_last + 1) % _SEQUENCE_SPACE,
                       "the last written is %d" % known_last if known_last >= 0 else "none written in this epoch"))
            pending[producer_id] = (epoch, last_seq)
        return None

    # -- changes ----------------------------------------------------------------

    def update(self, producer_id: int, epoch: int, first_seq: int, last_seq: int,
               first_offset: int, last_offset: int, timestamp: int) -> None:
        """Record a batch just written; a new epoch forgets the older epoch's batches."""
        entry = self._producers.get(producer_id)
        if entry is None:
            entry = self._producers[producer_id] = _Entry(epoch)
        else:
            entry.set_epoch(epoch)
        entry.batches.append(BatchMetadata(first_seq, last_seq, first_offset, last_offset, timestamp))
        entry.last_timestamp = timestamp

    def appended(self, batches: Sequence[BatchHeader], buffer: Optional[Buffer] = None,
                 index_aborted: Optional["IndexAborted"] = None) -> None:
        """Record an append's producer batches as written (their offsets; the max timestamp
        field holds the log append time on LogAppendTime topics). ``Log.append``'s
        ``producers_appended``: ``buffer`` holds the batches (a marker's control record is
        read from it) and ``index_aborted`` records an aborted transaction in the
        transaction index of the segment the append went to.

        As Kafka's append: every batch updates its producer first (transactions open
        and end), then each transaction a marker ended is, in order, indexed when
        aborted and completed; a transaction whose index entry could not be written
        (``index_aborted`` raised) stays ongoing. An entry's last stable offset is the
        one at its marker's offset: the transactions opened by earlier batches and not
        ended by earlier markers, as the log's recovery replays them, so a follower
        that fetched many batches at once indexes what its leader did.
        """
        ended: Optional[List[Tuple[CompletedTxn, int]]] = None
        for h in batches:
            pid = h.producer_id
            if pid < 0:
                continue
            if h.attributes & _TXN_BITS:
                completed = self._apply_transactional(h, buffer)
                if completed is not None:
                    if ended is None:
                        ended = []
                    decided = [c.first_offset for c, _ in ended]
                    ended.append((completed, self.txns.last_stable_offset(completed, decided)))
            else:
                self.update(pid, h.producer_epoch, h.base_sequence,
                            last_sequence(h.base_sequence, h.last_offset - h.base_offset),
                            h.base_offset, h.last_offset, h.max_timestamp)
        if ended is not None:
            txns = self.txns
            for completed, last_stable_offset in ended:
                if completed.is_aborted and index_aborted is not None:
                    index_aborted(AbortedTxn(completed.producer_id, completed.first_offset, completed.last_offset,
                                             last_stable_offset))
                txns.complete(completed)

    def _apply_transactional(self, h: BatchHeader, buffer: Optional[Buffer]) -> Optional[CompletedTxn]:
        """Apply a written transactional batch or control batch of a producer, unrefused (Kafka's
        ProducerAppendInfo for an append already checked, or replicated); -> the transaction a
        marker ended, not yet completed."""
        pid = h.producer_id
        if not h.attributes & CONTROL_MASK:
            self.update(pid, h.producer_epoch, h.base_sequence,
                        last_sequence(h.base_sequence, h.last_offset - h.base_offset),
                        h.base_offset, h.last_offset, h.max_timestamp)
            self.txns.begin(pid, h.base_offset)
            return None
        marker = self._marker(h, buffer)
        if marker is None:
            return None
        entry = self._producers.get(pid)
        if entry is None:
            entry = self._producers[pid] = _Entry(h.producer_epoch)
        else:
            entry.set_epoch(h.producer_epoch)
        entry.coordinator_epoch = marker.coordinator_epoch
        entry.last_timestamp = h.max_timestamp
        return self.txns.end(pid, h.base_offset, marker.is_abort)

    @staticmethod
    def _marker(h: BatchHeader, buffer: Optional[Buffer]) -> Optional[EndTxnMarker]:
        """The marker of a written control batch; None for an emptied one, or one that is no
        marker (a follower or a replay cannot refuse it: it marks nothing)."""
        if buffer is None:
            return None
        try:
            return end_txn_marker(buffer, h.position)
        except (CorruptRecordError, InvalidRecordError):
            return None

    def clear(self) -> None:
        """Forget every producer and transaction."""
        self._producers.clear()
        self.txns.clear()

    def load_from_log(self, log: "Log", max_offset: Optional[int] = None,
                      chunk_bytes: int = 1 << 20, high_watermark: Optional[int] = None) -> int:
        """Rebuild the table and the transactions from ``log``'s batches (below ``max_offset`` if given).

        -> the number of producer batches seen. Batches are replayed as they were
        written, without validation: the log is the truth. Transactions whose marker
        is below ``high_watermark`` are stable at once; the others stay unstable until
        :meth:`on_high_watermark`. No transaction index is written.
        """
        self.clear()
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
                seen += 1
                if h.attributes & _TXN_BITS:
                    completed = self._apply_transactional(h, data)
                    if completed is not None:
                        self.txns.complete(completed, high_watermark)
                    continue
                # The max timestamp field holds the log append time on LogAppendTime batches.
                self.update(h.producer_id, h.producer_epoch, h.base_sequence,
                            last_sequence(h.base_sequence, h.last_offset - h.base_offset),
                            h.base_offset, h.last_offset, h.max_timestamp)
            if last < offset:
                break  # no progress: nothing more below ``end``
            offset = last + 1
        return seen

    def truncate_to(self, offset: int, log: Optional["Log"] = None, high_watermark: Optional[int] = None) -> None:
        """Forget the batches at or after ``offset`` (the log was truncated there).

        With ``log`` the table and the transactions are rebuilt from the batches below
        ``offset`` (exact: older batches of a producer come back). Without, retained
        batches at or after ``offset`` are dropped, a producer left with none is
        forgotten, and so are the transactions started there; one whose marker went is
        open again.
        """
        if log is not None:
            self.load_from_log(log, max_offset=offset, high_watermark=high_watermark)
            return
        for pid in list(self._producers):
            entry = self._producers[pid]
            kept = [b for b in entry.batches if b.last_offset < offset]
            if not kept:
                del self._producers[pid]
            elif len(kept) != len(entry.batches):
                entry.batches.clear()
                entry.batches.extend(kept)
        self.txns.truncate_to(offset)

    def snapshot(self) -> Dict[int, Tuple[int, Sequence[BatchMetadata]]]:
        """A copy of the table: producer id -> (epoch, retained batches oldest first)."""
        return {pid: (e.epoch, tuple(e.batches)) for pid, e in self._producers.items()}
