"""One partition's log: an ordered list of segments, appended to at the end.

Kafka's Log. The directory is named ``<topic>-<partition>`` and holds the
segments' files (see :mod:`pylogq.storage.segment`) and the log's leader epoch
cache, ``leader-epoch-checkpoint`` (see :mod:`pylogq.storage.leader_epoch`):
where each leader epoch's records start. The log keeps it in step with its
offsets: an append in a new epoch records the epoch's start before the
records are written, a truncation cuts it, the log start moving up trims it,
and opening the log cuts it to what recovery kept.

Readers never block: the segment list is copy-on-write. Every change (roll,
retention, truncation, compaction swap) builds a new tuple and publishes it
with one assignment, so a reader works on an immutable snapshot while the
writer goes on. The end of the log is published the same way, after the bytes
are written, so a reader never sees a batch that is still being written.
Segments leaving the log are renamed ``.deleted`` and removed after
``file.delete.delay.ms``; a reader still holding a region of one keeps reading
it (the file stays open).

Transactions: an append that completes an aborted transaction (its ABORT
marker) has the producer state record it in the transaction index of the
segment the append went to (:mod:`pylogq.storage.transaction_index`);
:meth:`Log.collect_aborted_transactions` reads them back for a range. The
first unstable offset (the first offset of the oldest transaction not yet
decided and replicated) is the partition's to say, from its producer state
(:mod:`pylogq.storage.unstable_txns`); the log keeps it beside its offsets
and answers the last stable offset for a high watermark. Until a partition
has said it (a log opened before its partition, or one no partition
replicates), the log replays the transactions of its own batches to know it,
so that it is right from the moment the log opens: a log's records are never
taken as committed because no partition has looked at them yet. The partition
also gives the log a copy of its high watermark (:meth:`Log.update_high_watermark`),
so that the log cleaner, which knows logs and not partitions, stops at the last
stable offset (:attr:`Log.stable_offset`).

What the log does once, at open, is :mod:`~pylogq.storage.log_loader`'s; the checks
an append's batches pass, :mod:`~pylogq.storage.log_validator`'s; the retention
policies, :mod:`~pylogq.storage.log_retention`'s; ListOffsets' searches,
:mod:`~pylogq.storage.log_search`'s; reading the epochs batches carry,
:mod:`~pylogq.storage.log_epochs`'s. The log holds the state and the lock; they
are functions of what it hands them.
"""

from __future__ import annotations

import bisect
import errno
import logging
import os
import re
import threading
import time
from typing import Callable, List, NamedTuple, Optional, Sequence, Tuple, Union

from .. import records
from ..errors import (
    CorruptRecordError,
    InvalidArgumentError,
    KafkaStorageError,
    LogClosedError,
    OffsetOutOfRangeError,
    RecordProblem,
)
from ..records import AppendResult, BatchHeader
from ..records.legacy import is_legacy
from ..records.upconvert import up_convert
from .checkpoint import LEADER_EPOCH_CHECKPOINT
from ..config import LogConfig
from .leader_epoch import LeaderEpochFileCache
from .log_epochs import follower_epochs
from .log_loader import LogLoader
from .log_retention import Breached, retention_bytes_breached, retention_ms_breached
from .log_search import (
    EARLIEST_LOCAL_TIMESTAMP,
    EARLIEST_TIMESTAMP,
    LATEST_TIERED_TIMESTAMP,
    LATEST_TIMESTAMP,
    MAX_TIMESTAMP,
    legacy_offsets_before,
    offset_after_timestamp,
    offset_of_max_timestamp,
    position_of,
)
from .log_validator import (
    check_batch_sizes,
    check_follower_offsets,
    check_records,
    check_sizes,
    max_timestamp_of,
    refuse_control,
)
from .scheduler import Scheduler
from .segment import CLEANED_SUFFIX, DELETED_SUFFIX, SWAP_SUFFIX, FileRegion, LogSegment
from .transaction_index import AbortedTxn
from .unstable_txns import UnstableTxns

__all__ = ["CheckProducers", "EARLIEST_LOCAL_TIMESTAMP", "EARLIEST_TIMESTAMP", "IndexAborted", "LATEST_TIERED_TIMESTAMP",
           "LATEST_TIMESTAMP", "MAX_TIMESTAMP", "Log", "ProducersAppended", "is_resource_exhausted", "parse_dir_name"]

log = logging.getLogger("pylogq.storage")

# Kafka's rule for a partition directory: the topic, a dash, the partition number.
_DIR_NAME = re.compile(r"^(?P<topic>[a-zA-Z0-9._-]+)-(?P<partition>\d+)$")
#: A future log's directory (a replica being moved to another log directory, Kafka's
#: ``<topic>-<partition>.<id>-future``).
_FUTURE_NAME = re.compile(r"^(?P<topic>[a-zA-Z0-9._-]+)-(?P<partition>\d+)\.[0-9a-f]{32}-future$")


#: The errors of a resource running out, which pass once it is freed: space (ENOSPC), a
#: quota (EDQUOT), file descriptors (EMFILE, ENFILE), memory (ENOMEM). Any other I/O error
#: is a fault of the file system itself.
_EXHAUSTED = frozenset((errno.ENOSPC, errno.EDQUOT, errno.EMFILE, errno.ENFILE, errno.ENOMEM))


def is_resource_exhausted(exc: OSError) -> bool:
    """Whether an I/O error is a resource running out (a full disk, no descriptor left), which
    passes once it is freed, rather than a fault of the file system itself (EIO, EROFS, ...),
    which takes its log directory offline."""
    return exc.errno in _EXHAUSTED


def parse_dir_name(path: str) -> Tuple[str, int]:
    """(topic, partition) of a partition directory; ValueError naming the rule otherwise."""
    name = os.path.basename(os.path.normpath(path))
    m = _DIR_NAME.match(name) or _FUTURE_NAME.match(name)
    if not m:
        raise InvalidArgumentError(
            "a log directory is named <topic>-<partition> (e.g. events-0), "
            "with a topic of letters, digits, '.', '_' or '-', not %r" % (name,)
        )
    return m.group("topic"), int(m.group("partition"))


Buffer = Union[bytes, bytearray, memoryview]
#: ``Log.append``'s producer check: the validated batches' headers and the buffer holding them
#: (a transaction marker's control record is read from it) -> None, or a retry's original
#: (first offset, last offset, timestamp). The partition's producer state gives it.
CheckProducers = Callable[[Sequence[BatchHeader], Buffer], Optional[Tuple[int, int, int]]]
#: Where an aborted transaction an append completed is recorded: the transaction index of the
#: segment the append went to. Raises KafkaStorageError when it cannot be written.
IndexAborted = Callable[[AbortedTxn], None]
#: ``Log.append``'s report of the batches as written (their headers, with their offsets and max
#: timestamps, and the buffer holding them), with where to record the aborted transactions
#: their markers complete.
ProducersAppended = Callable[[Sequence[BatchHeader], Buffer, IndexAborted], None]


#: How much of the log one read of a replay of its transactions takes (as a partition's replay).
_REPLAY_CHUNK = 1 << 20


class _Replay:
    """A log's own replay of its transactions (:meth:`Log._replayed_first_unstable`): the
    transactions of its batches below ``end``, as of the log's ``truncations``-th truncation."""

    __slots__ = ("txns", "end", "truncations")

    def __init__(self, start: int, truncations: int) -> None:
        self.txns = UnstableTxns()
        self.end = start
        self.truncations = truncations


class _End(NamedTuple):
    """The published end of the log: read up to ``position`` of ``segment``."""

    offset: int
    segment: LogSegment
    position: int


class Log:
    """A partition's log on disk. Appends, truncation and roll are serialized by a
    lock; reads run concurrently on copy-on-write snapshots (see the module docstring)."""

    def __init__(
        self,
        directory: str,
        config: Optional[LogConfig] = None,
        *,
        recovery_point: int = 0,
        log_start_offset: Optional[int] = None,
        clean_shutdown: bool = False,
        scheduler: Optional[Scheduler] = None,
        clock: Callable[[], float] = time.time,
        on_flush: Optional[Callable[[float], None]] = None,
    ) -> None:
        self.directory = os.path.abspath(directory)
        #: Told the duration (ms) of each flush that synced segments (the flush metric).
        self.on_flush = on_flush
        self.topic, self.partition = parse_dir_name(self.directory)
        self.config = config or LogConfig()
        self._clock = clock
        self._lock = threading.RLock()
        self._own_scheduler = scheduler is None
        self.scheduler = scheduler or Scheduler("pylogq-log-%s-%d" % (self.topic, self.partition))
        os.makedirs(self.directory, exist_ok=True)
        self.recovery_point = recovery_point
        self._unflushed = 0
        self._last_flush_ms = self._now_ms()
        self.closed = False
        self._segments: Tuple[LogSegment, ...] = ()
        self._bases: Tuple[int, ...] = ()
        self.recovered_bytes = 0  # bytes truncated by recovery on this open (for tests and logs)
        self._write_failed = False  # the last append failed to write (logged once until one succeeds)
        self._close_hook: Optional[Callable[["Log"], None]] = None  # set by a standalone log's manager
        #: Told of a write's I/O error other than a full disk (set by the log manager, whose
        #: failure channel takes the log's directory offline, as Kafka's LogDirFailureChannel).
        self.on_io_error: Optional[Callable[[OSError], None]] = None
        self._epochs: LeaderEpochFileCache  # loaded once the segments are
        # The leader epoch an append may be in without touching the epoch cache (None: look).
        # Any change of the cache resets it, so the hot path is one comparison.
        self._append_epoch: Optional[int] = None
        # The first unstable offset the partition's producer state last gave (None: none), once
        # one gave it (``_first_unstable_given``); until then the log replays its own batches.
        self._first_unstable: Optional[int] = None
        self._first_unstable_given = False
        self._replay: Optional[_Replay] = None  # the log's own replay so far (under _replay_lock)
        self._replay_lock = threading.Lock()
        self._truncations = 0  # truncations so far: a replay that read across one reads again
        # The high watermark the partition last gave (None: no partition keeps one; the log end).
        self._high_watermark: Optional[int] = None
        self._record_aborted: IndexAborted = self._index_aborted  # bound once: appends hand it on
        self._load(clean_shutdown, log_start_offset)

    # -- construction -----------------------------------------------------------

    @classmethod
    def open(cls, path: str, **config: object) -> "Log":
        """Open (or create) a standalone log at ``path`` (a ``<topic>-<partition>`` directory).

        Config keys are Kafka's, as snake_case keywords or a ``config=`` LogConfig.
        The log is managed by a :class:`~pylogq.storage.manager.LogManager` for the
        parent directory (shared by every standalone log opened there in this
        process), which keeps Kafka's checkpoint files and clean-shutdown marker.
        """
        from .manager import LogManager

        return LogManager.standalone_log(path, config)

    def _now_ms(self) -> int:
        return int(self._clock() * 1000)

    def _load(self, clean_shutdown: bool, log_start_offset: Optional[int]) -> None:
        """Open the directory's segments, recovering what needs it (:class:`LogLoader`), and start from them."""
        loaded = LogLoader(self.directory, self.config, recovery_point=self.recovery_point,
                           clean_shutdown=clean_shutdown, log_start_offset=log_start_offset).load()
        self.recovered_bytes = loaded.recovered_bytes
        self._publish(loaded.segments)
        active = loaded.segments[-1]
        self._end = _End(loaded.end_offset, active, active.size)
        self.log_start_offset = loaded.log_start_offset
        self.recovery_point = loaded.recovery_point
        self._epochs = loaded.epochs

    def _publish(self, segments: Tuple[LogSegment, ...]) -> None:
        # One assignment of a tuple pair: a reader sees the old or the new list, whole.
        self._view = (tuple(s.base_offset for s in segments), segments)
        self._bases, self._segments = self._view
        # Whether a read_committed fetch has aborted transactions to look for at all: set on
        # each new segment list and by each aborted transaction indexed (a truncation that
        # empties an index leaves it set, which only costs a look).
        self._has_aborted = any(s.txn_index.size for s in segments)

    # -- state --------------------------------------------------------------------

    @property
    def lock(self) -> "threading.RLock":
        """The lock that serializes changes to this log (reentrant). A caller that must
        see the segments unchanged while it acts on them (the cleaner's swap) holds it."""
        return self._lock

    @property
    def clock(self) -> Callable[[], float]:
        """The log's time source in seconds (``time.time`` unless a test gave another)."""
        return self._clock

    @property
    def log_end_offset(self) -> int:
        return self._end.offset

    @property
    def segments(self) -> Tuple[LogSegment, ...]:
        return self._view[1]

    @property
    def active_segment(self) -> LogSegment:
        return self._view[1][-1]

    @property
    def size_in_bytes(self) -> int:
        return sum(s.size for s in self._view[1])

    @property
    def num_segments(self) -> int:
        return len(self._view[1])

    # -- leader epochs ---------------------------------------------------------------

    @property
    def leader_epoch_cache(self) -> LeaderEpochFileCache:
        """Where each leader epoch's records start (``leader-epoch-checkpoint``). Read it freely;
        change it only through the log, which keeps it in step with the offsets."""
        return self._epochs

    @property
    def latest_epoch(self) -> Optional[int]:
        """The latest leader epoch that wrote to the log (or was given its start); None when
        none is known (an empty log, or one written before epochs were kept)."""
        return self._epochs.latest_epoch

    def end_offset_for_epoch(self, leader_epoch: int) -> Tuple[int, int]:
        """Kafka's endOffsetForEpoch (OffsetsForLeaderEpoch): -> (epoch, end offset), the largest
        known epoch not above ``leader_epoch`` and the offset its records stop at (the log end
        offset for the latest epoch); (-1, -1) when the cache cannot say (see
        :meth:`LeaderEpochFileCache.end_offset_for`). Under the log's lock, so the answer and
        the log end offset it may give are of the same moment."""
        with self._lock:
            return self._epochs.end_offset_for(leader_epoch, self._end.offset)

    def assign_epoch_start_offset(self, leader_epoch: int, start_offset: int) -> None:
        """Record that ``leader_epoch`` starts at ``start_offset`` (Kafka's
        maybeAssignEpochStartOffset: a replica becoming leader gives its epoch the log end
        offset before it appends), by the cache's rule (:meth:`LeaderEpochFileCache.assign`).
        ValueError past the log end offset, which no record holds yet."""
        with self._lock:
            self._check_open()
            if start_offset > self._end.offset:
                raise InvalidArgumentError("leader epoch %d cannot start at offset %d, past the log end offset %d "
                                           "of %s-%d" % (leader_epoch, start_offset, self._end.offset, self.topic,
                                                         self.partition))
            self._change_epochs("record leader epoch %d from offset %d" % (leader_epoch, start_offset),
                                lambda: self._epochs.assign(leader_epoch, start_offset))

    def _epoch_for_append(self, leader_epoch: int, first_offset: int) -> None:
        """Before a leader's append at ``first_offset`` in an epoch the last append was not in (or
        after the cache changed): record the epoch's start there if it is new, and write a cache
        whose last write failed, so no record is written whose epoch the file lacks. A negative
        epoch (none) records nothing."""
        if leader_epoch >= 0:
            self._change_epochs("record leader epoch %d from offset %d" % (leader_epoch, first_offset),
                                lambda: self._epochs.assign(leader_epoch, first_offset))
        self._append_epoch = leader_epoch

    def _change_epochs(self, what: str, change: Callable[[], bool]) -> None:
        """Run a change of the epoch cache (lock held); a checkpoint write that fails raises
        KafkaStorageError, the cache left dirty (right in memory; written again before the
        next records are)."""
        self._append_epoch = None
        try:
            change()
        except OSError as exc:
            raise self._storage_error("%s (writing %s)" % (what, LEADER_EPOCH_CHECKPOINT), exc) from exc

    def _trim_epochs(self, what: str, change: Callable[[], bool]) -> None:
        """A change of the epoch cache after records went (a truncation, the log start moving;
        lock held). A checkpoint write that fails is warned about, not raised: the records are
        gone either way, memory is right, and the file, behind only by entries that describe
        no record any more (which loading cuts), is written again before the next records are."""
        self._append_epoch = None
        try:
            change()
        except OSError as exc:
            log.warning("%s: could not write %s to %s: %s; it is written again before the next append",
                        self.directory, LEADER_EPOCH_CHECKPOINT, what, exc)

    def _follow_epochs(self, buffer: bytes, headers: Sequence[BatchHeader]) -> None:
        """Record the epochs of a follower's batches by Kafka's appendAsFollower rule
        (:func:`~pylogq.storage.log_epochs.follower_epochs`). One checkpoint write at most, and
        none when every batch is in the latest epoch."""
        updates, clear, legacy = follower_epochs(buffer, headers, self._epochs.latest_entry)
        if not clear and not updates:
            if self._epochs.dirty:
                self._change_epochs("write the leader epochs", self._epochs.flush)
            return
        if clear:
            log.warning("%s: clearing the leader epoch cache after a v%d batch (no leader epoch) was appended "
                        "from offset %d", self.directory, legacy, headers[0].base_offset)
        self._change_epochs("record the leader epochs of offsets %d..%d" % (headers[0].base_offset,
                                                                           headers[-1].last_offset),
                            lambda: self._epochs.assign_all(updates, clear=clear))

    # -- transactions ---------------------------------------------------------------

    @property
    def first_unstable_offset(self) -> Optional[int]:
        """The first offset of the oldest transaction not yet decided and replicated (Kafka's
        firstUnstableOffset), never below the log start; None when every transaction is.

        The partition's once it gave one (:meth:`update_first_unstable_offset`): then one
        attribute read, no lock. Before, the log's own (:meth:`_replayed_first_unstable`),
        which reads the batches appended since it last looked."""
        first = self._first_unstable if self._first_unstable_given else self._replayed_first_unstable()
        if first is None:
            return None
        start = self.log_start_offset
        return first if first >= start else start

    def update_first_unstable_offset(self, offset: Optional[int]) -> None:
        """Take the first unstable offset the partition's producer state computed (when it
        rebuilt itself from the log, and after an append, a move of the high watermark, a
        truncation): from now on the log answers it and replays nothing itself."""
        self._first_unstable = offset
        if not self._first_unstable_given:
            self._first_unstable_given = True
            self._replay = None  # a replay under way finds the flag and keeps nothing

    def _replayed_first_unstable(self) -> Optional[int]:
        """The first unstable offset by the log's own batches, for a log no partition has given
        one yet (Kafka's log rebuilds its producer state when it loads, so its last stable
        offset is right from the start; here the partition rebuilds it when it opens, which
        may come later, or never for a log no partition replicates).

        The transactions are replayed as the partition's producer state replays them
        (:meth:`UnstableTxns.replay`), from where the last replay stopped to the log end: from
        the log start on the first, after a truncation, or once the log start passed the last
        one's end (a transaction whose first batches went unseen then opens at the first one
        left, as in a partition opened then). Those whose marker is below the high watermark
        (the log end without one) are decided. Replays take a lock of their own, one at a
        time, and not the log's: appends go on, and a caller may hold the log's lock. A
        truncation meanwhile has the batches read again; a partition that gives the offset
        meanwhile has the last word. LogClosedError on a closed log; KafkaStorageError when
        the files cannot be read."""
        with self._replay_lock:
            for _ in range(100):
                if self._first_unstable_given:
                    return self._first_unstable
                self._check_open()
                # Single reads of what the writers publish: the truncations first, so a
                # truncation after it makes this replay's result one that is not kept.
                truncations = self._truncations
                end = self._end.offset
                hw = self._high_watermark
                replay, self._replay = self._replay, None  # kept again only whole
                if replay is None or replay.truncations != truncations or replay.end < self.log_start_offset:
                    replay = _Replay(self.log_start_offset, truncations)
                decided = end if hw is None or hw > end else hw
                offset = replay.end
                try:
                    while offset < end:
                        data = self.read(offset, _REPLAY_CHUNK, max_offset=end).read()
                        after = replay.txns.replay(data, offset, end, decided)
                        if after <= offset:
                            break  # nothing whole there (cannot happen below the end): stop
                        offset = after
                except OffsetOutOfRangeError:
                    continue  # the log start passed it meanwhile, or a truncation: again
                if self._truncations != truncations:
                    continue
                replay.txns.on_high_watermark(decided)
                replay.end = offset
                if self._first_unstable_given:
                    return self._first_unstable
                self._replay = replay
                return replay.txns.first_unstable_offset
            raise KafkaStorageError("the transactions of %s-%d could not be replayed: the log kept changing under "
                                    "100 replays" % (self.topic, self.partition))

    def last_stable_offset(self, high_watermark: int) -> int:
        """Kafka's lastStableOffset: the first unstable offset when it is below
        ``high_watermark``, else ``high_watermark``; read_committed consumers read below it."""
        first = self.first_unstable_offset
        return first if first is not None and first < high_watermark else high_watermark

    @property
    def high_watermark(self) -> Optional[int]:
        """The high watermark the partition last gave (:meth:`update_high_watermark`), or one read
        from the log directory's ``replication-offset-checkpoint`` when the log was loaded; None
        when neither did (a log no partition replicates: every record counts as committed)."""
        return self._high_watermark

    def update_high_watermark(self, offset: Optional[int]) -> None:
        """Take the partition's high watermark (it keeps and moves it; this is a copy for the
        log's other readers: the cleaner cleans nothing at or above the last stable offset,
        :meth:`stable_offset`). One attribute store: the append path gives it."""
        self._high_watermark = offset

    @property
    def stable_offset(self) -> int:
        """The last stable offset for :attr:`high_watermark` (the log end when there is none,
        never past the log end): below it every record is replicated and every transaction
        decided. The bound of compaction (Kafka's cleaner stops at the log's lastStableOffset).
        Takes no lock once a partition gave the first unstable offset; before, replays the
        batches appended since the last look (:attr:`first_unstable_offset`)."""
        end = self._end.offset
        hw = self._high_watermark
        return self.last_stable_offset(end if hw is None or hw > end else hw)

    @property
    def has_aborted_transactions(self) -> bool:
        """False when no segment indexes an aborted transaction (a read_committed read then has
        none to look for); True may linger after a truncation emptied the indexes."""
        return self._has_aborted

    def collect_aborted_transactions(self, start_offset: int, upper_bound_offset: int) -> List[AbortedTxn]:
        """The aborted transactions overlapping [``start_offset``, ``upper_bound_offset``) (Kafka's
        collectAbortedTransactions): the transaction indexes from the segment holding
        ``start_offset`` on, until one says no later segment can hold more (its search is
        complete). Empty below the first segment, as in Kafka. Takes no lock.

        Costs one attribute look when no segment has an aborted transaction indexed (a
        partition that never saw an aborted transaction, the common case)."""
        if not self._has_aborted:
            return []
        for _ in range(1000):
            bases, segments = self._view
            i = bisect.bisect_right(bases, start_offset) - 1
            if i < 0:
                return []
            found: List[AbortedTxn] = []
            try:
                for segment in segments[i:]:
                    result = segment.txn_index.collect_aborted_txns(start_offset, upper_bound_offset)
                    found.extend(result.aborted_transactions)
                    if result.is_complete:
                        break
            except (ValueError, FileNotFoundError):
                continue  # a segment was deleted or swapped under this snapshot: look again
            except OSError as exc:
                raise self._read_error("read the transaction indexes from offset %d" % start_offset, exc) from exc
            return found
        raise OffsetOutOfRangeError("the segments of %s-%d from offset %d were removed while their aborted "
                                    "transactions were read" % (self.topic, self.partition, start_offset))

    def segment_upper_bound(self, base_offset: int) -> int:
        """The base offset of the segment after the one based at ``base_offset``; the log end
        offset when that one is the last (the bound of a fetch within it). Takes no lock."""
        bases, _ = self._view
        i = bisect.bisect_right(bases, base_offset)
        return bases[i] if i < len(bases) else self._end.offset

    def _index_aborted(self, txn: AbortedTxn) -> None:
        """Record an aborted transaction an append completed in the transaction index of the
        segment the append went to (the active one; lock held)."""
        segment = self._end.segment
        self._has_aborted = True  # before the write: a reader may look once it is there
        try:
            segment.txn_index.append(txn)
        except OSError as exc:
            raise self._storage_error("write the aborted transaction of producer %d (offsets %d..%d) to the "
                                      "transaction index of segment %d" % (txn.producer_id, txn.first_offset,
                                                                           txn.last_offset, segment.base_offset),
                                      exc) from exc

    # -- appending ----------------------------------------------------------------

    def append(self, data: Union[bytes, bytearray, memoryview], leader_epoch: int = 0, *,
               check_producers: Optional[CheckProducers] = None,
               producers_appended: Optional[ProducersAppended] = None,
               allow_control: bool = True) -> AppendResult:
        """Validate a producer's batches, give them the next offsets and write them.

        A ``bytearray`` is validated and patched in place (a produce request's
        buffer need not be copied); other buffers are copied first. v2 batches
        are read once (:func:`~pylogq.records.validate_batches`): framing, CRC,
        every record, and on a compacted topic every record's key; what that
        pass collects (each batch's header) serves every check after it, the
        offsets, the segment's index entries and the producer state.
        Raises CorruptRecordError for bad bytes, InvalidRecordError for batches a
        producer may not send (and, on a compacted topic, for a record without
        a key), MessageTooLargeError for a batch over ``max.message.bytes``,
        RecordListTooLargeError for more than a segment holds,
        InvalidTimestampError for a CreateTime timestamp further from now than
        ``message.timestamp.difference.max.ms``. Nothing is written then.

        The partition's producer checks come in as two callables (the log
        knows no producers): ``check_producers`` sees the validated batches
        (and the buffer, for transaction markers) before anything is checked
        against the log's settings; it may refuse them (a fenced producer, a
        sequence out of order, a stale marker) or answer that they are a retry
        (the original first offset, last offset and timestamp): nothing is
        written and the result says ``duplicate``. ``producers_appended`` sees
        the batches as written (their offsets, the log append time) once they
        are in the segment, and records each aborted transaction they complete
        in that segment's transaction index through the writer it is handed;
        when that write fails the append raises KafkaStorageError, the batches
        written.

        ``allow_control=False`` (a client's append, Kafka's origin CLIENT)
        refuses control batches with InvalidRecordError: transaction markers
        are the broker's to write.

        ``leader_epoch`` is stamped on every v2 batch. An append that starts a
        new epoch records it at its first offset in the leader epoch cache
        before the batches are written (the only time the append path writes
        ``leader-epoch-checkpoint``); a negative epoch records nothing. When
        that file cannot be written the append raises KafkaStorageError with
        nothing written.

        The pass over the records reads nothing of the log, so it runs before
        the log's lock is taken: a compressed batch may take long to walk
        (docs/operations.md, "Compressed batches"), and flushes, retention and
        other appends need not wait for it.
        """
        buffer = data if type(data) is bytearray else bytearray(data)  # patched in place
        self._check_open()
        check_batch_sizes(buffer, self.config.max_message_bytes)
        if is_legacy(buffer):
            buffer = up_convert(buffer)
        batches, record_count, keyless = records.validate_batches(buffer, self.config.compact)
        if not allow_control:
            refuse_control(batches)
        with self._lock:
            self._check_open()
            now = self._now_ms()
            lat = now if self.config.log_append_time else None
            if check_producers is not None:
                duplicate = check_producers(batches, buffer)
                if duplicate is not None:
                    first, last, timestamp = duplicate
                    return AppendResult(0, first, timestamp if lat is not None else -1, self.log_start_offset,
                                        last - first + 1, last, 1, timestamp, last, True)
            first_offset = self._end.offset
            check_sizes(self.config, batches, len(buffer), first_offset)
            check_records(self.config, self.topic, self.partition, buffer, batches, keyless,
                          None if lat is not None else now)
            if leader_epoch != self._append_epoch:
                self._epoch_for_append(leader_epoch, first_offset)
            written = records.patch_offsets(buffer, batches, first_offset, leader_epoch, lat)
            max_ts, max_ts_offset = max_timestamp_of(written)
            last_offset = written[-1].last_offset
            self._write(buffer, written, last_offset, max_ts)
            if producers_appended is not None:
                producers_appended(written, buffer, self._record_aborted)
            self._flush_if_due_by_messages()
            return AppendResult(0, first_offset, lat if lat is not None else -1, self.log_start_offset,
                                record_count, last_offset, len(written), max_ts, max_ts_offset)

    def append_as_follower(self, data: Union[bytes, bytearray, memoryview], *,
                           producers_appended: Optional[ProducersAppended] = None) -> AppendResult:
        """Append batches that already carry offsets (a replica's fetch, a copy of a log).

        Kafka's appendAsFollower: the leader validated the batches and gave them their
        offsets, so no record is read again. What keeps this log whole is checked:
        each batch's framing and CRC (bytes damaged in transit or on the leader's
        disk are not copied), offsets that start at the log end offset or later and
        increase (bytes that do not continue this log), and the sizes; all raise
        with nothing written. The framing and CRC pass reads only the buffer, so it
        runs before the log's lock is taken. Each v2 batch's leader epoch is recorded
        at its base offset when it starts a new epoch; a legacy batch clears the
        epoch cache (:meth:`_follow_epochs`). ``producers_appended`` sees the
        headers once written, as with :meth:`append` (the aborted transactions
        the batches complete go to this log's transaction index as on the
        leader's).
        """
        buffer = bytes(data)  # no copy of the usual bytes; a caller's bytearray may not change under the write
        self._check_open()
        result = records.scan(buffer)
        if result.error is not None or result.valid_bytes != len(buffer):
            raise CorruptRecordError(result.error or "the data ends with a partial batch",
                                     kind=result.problem if result.error is not None else RecordProblem.BAD_LENGTH)
        headers = list(records.iter_batches(buffer))
        with self._lock:
            self._check_open()
            if not headers:
                return AppendResult(0, -1, -1, self.log_start_offset, 0)
            check_follower_offsets(headers, self._end.offset)
            check_sizes(self.config, headers, len(buffer), None)
            max_ts, max_ts_offset = max_timestamp_of(headers)
            self._follow_epochs(buffer, headers)
            if headers[0].base_offset > self._end.offset and headers[0].magic >= 2:
                # A gap (compacted source or a fresh replica): the next segment starts there. A
                # legacy wrapper's offset is its last record's, so it tells no gap.
                try:
                    self._roll_locked(headers[0].base_offset)
                except OSError as exc:
                    raise self._storage_error("roll a segment at offset %d" % headers[0].base_offset, exc) from exc
            self._write(buffer, headers, headers[-1].last_offset, max_ts)
            if producers_appended is not None:
                producers_appended(headers, buffer, self._record_aborted)
            self._flush_if_due_by_messages()
            return AppendResult(0, headers[0].base_offset, -1, self.log_start_offset, -1, headers[-1].last_offset,
                                len(headers), max_ts, max_ts_offset)

    def _write(self, buffer: Union[bytes, bytearray], headers: List[BatchHeader], last_offset: int,
               max_timestamp: int) -> None:
        """Write validated batches at the end, rolling first when due.

        A failure to write (a full disk: ENOSPC; an I/O error) raises
        KafkaStorageError with the log as it was: the segment cut back to its
        last whole batch, its indexes and the log end offset unchanged, so the
        log takes the next append once the cause is gone.
        """
        segment = self._end.segment
        try:
            if self._should_roll(segment, len(buffer), last_offset, max_timestamp):
                segment = self._roll_locked(headers[0].base_offset)
            segment.append(buffer, headers)
        except OSError as exc:
            raise self._storage_error("append offsets %d..%d" % (headers[0].base_offset, last_offset), exc) from exc
        self._end = _End(last_offset + 1, segment, segment.size)
        self._unflushed += sum(h.last_offset - h.base_offset + 1 for h in headers)
        if self._write_failed:
            self._write_failed = False
            log.warning("%s: appends succeed again from offset %d", self.directory, headers[0].base_offset)

    def _flush_if_due_by_messages(self) -> None:
        """``flush.messages``: fsync once that many records were appended since the last flush."""
        if self._unflushed >= self.config.flush_messages:
            try:
                self._flush_locked(self._end.offset)
            except OSError as exc:
                raise self._storage_error("flush (the records were written, not fsynced)", exc) from exc

    def _storage_error(self, what: str, exc: OSError) -> KafkaStorageError:
        """The KafkaStorageError (56) for a failed write; logged once until a write succeeds again.

        A full disk is passing: appends fail until space is freed, then succeed again. Any
        other I/O error (a read-only or failing file system) is reported to ``on_io_error``:
        the log manager takes the whole directory offline (Kafka's log directory failure).
        """
        transient = is_resource_exhausted(exc)
        if not self._write_failed:
            self._write_failed = True
            log.error("%s: could not %s: %s; appends to this partition fail with KAFKA_STORAGE_ERROR %s",
                      self.directory, what, exc, "until a write succeeds (free space on the disk)" if transient
                      else "and its log directory goes offline")
        if not transient:
            self._report_io_error(exc)
        return KafkaStorageError("%s-%d: could not %s: %s" % (self.topic, self.partition, what,
                                                              exc.strerror or exc))

    def _report_io_error(self, exc: OSError) -> bool:
        """Hand an I/O error that is not a resource running out to ``on_io_error`` (the log
        manager takes the directory offline); -> whether it did."""
        if is_resource_exhausted(exc) or self.on_io_error is None:
            return False
        self.on_io_error(exc)
        return True

    def _read_error(self, what: str, exc: OSError) -> KafkaStorageError:
        """The KafkaStorageError (56) for a failed read; one that is not a resource running out
        is reported to ``on_io_error`` (the log manager takes the directory offline)."""
        if self._report_io_error(exc):
            log.error("%s: could not %s: %s; its log directory goes offline", self.directory, what, exc)
        return KafkaStorageError("%s-%d: could not %s: %s" % (self.topic, self.partition, what, exc.strerror or exc))

    def _should_roll(self, segment: LogSegment, size: int, last_offset: int, max_timestamp: int) -> bool:
        if segment.is_full_for(size, last_offset):
            return True
        if segment.size == 0:
            return False
        reference = segment.rolling_timestamp
        waited = (max_timestamp - reference) if reference is not None and reference >= 0 and max_timestamp >= 0 \
            else self._now_ms() - segment.created_ms
        return waited > self.config.segment_ms - self._jitter()

    def _jitter(self) -> int:
        jitter = self.config.segment_jitter_ms
        if jitter <= 0:
            return 0
        # Deterministic per partition, as Kafka draws it once per segment.
        return hash((self.topic, self.partition)) % jitter

    def roll(self) -> LogSegment:
        """Start a new active segment at the log end offset (no-op on an empty active segment)."""
        with self._lock:
            self._check_open()
            if self._end.segment.size == 0:
                return self._end.segment
            return self._roll_locked(self._end.offset)

    def _roll_locked(self, base_offset: int) -> LogSegment:
        old = self._end.segment
        if old.size == 0 and old.base_offset == base_offset:
            return old
        segments = self._view[1]
        if old.size == 0:
            # An empty active segment is replaced rather than kept.
            old.delete()
            segments = segments[:-1]
        else:
            old.on_become_inactive()
        new = LogSegment(self.directory, base_offset, self.config, created_ms=self._now_ms())
        self._publish(segments + (new,))
        self._end = _End(max(self._end.offset, base_offset), new, 0)
        # Flush the finished segment in the background, as Kafka does on roll.
        if old.size and not self.closed:
            self.scheduler.schedule(lambda: self._flush_on_roll(base_offset), name="flush-on-roll")
        return new

    # -- flushing ------------------------------------------------------------------

    def flush(self, offset: Optional[int] = None) -> None:
        """fsync every segment holding offsets below ``offset`` (default: everything)."""
        with self._lock:
            if self.closed:
                return
            self._flush_locked(self._end.offset if offset is None else offset)

    def _flush_locked(self, offset: int) -> None:
        if offset <= self.recovery_point:
            return
        bases, segments = self._view
        started = time.monotonic()
        for segment in segments:
            if segment.next_offset > self.recovery_point and segment.base_offset < offset:
                segment.flush()
        if self.on_flush is not None:
            self.on_flush((time.monotonic() - started) * 1000.0)
        self.recovery_point = min(offset, self._end.offset)
        self._unflushed = 0 if self.recovery_point >= self._end.offset else self._unflushed
        self._last_flush_ms = self._now_ms()

    def _flush_on_roll(self, offset: int) -> None:
        """The flush a roll schedules; a failure that is not a resource running out goes to
        ``on_io_error`` (the directory goes offline), a full disk is raised (the scheduler
        logs it; the next flush tries again)."""
        try:
            self.flush(offset)
        except OSError as exc:
            if not self._report_io_error(exc):
                raise
            log.error("%s: could not flush: %s; its log directory goes offline", self.directory, exc)

    def flush_if_due(self) -> None:
        """Flush when ``flush.ms`` has passed since the last flush (the manager calls this)."""
        if self.config.flush_ms < 2**63 - 1 and self._now_ms() - self._last_flush_ms >= self.config.flush_ms:
            self.flush()

    # -- reading -------------------------------------------------------------------

    def read(self, offset: int, max_bytes: int = 1048576, max_offset: Optional[int] = None,
             min_one_batch: bool = True) -> FileRegion:
        """Whole batches from the one holding ``offset``: at most ``max_bytes`` (but at
        least one batch with ``min_one_batch``), none at or past ``max_offset``.

        An offset below the log start or above the log end raises
        OffsetOutOfRangeError; at the log end the region is empty.
        """
        try:
            return self._read(offset, max_bytes, max_offset, min_one_batch)
        except OSError as exc:  # the file system failed under the read: its directory goes offline
            raise self._read_error("read offset %d" % offset, exc) from exc

    def _read(self, offset: int, max_bytes: int, max_offset: Optional[int], min_one_batch: bool) -> FileRegion:
        # A snapshot can go stale under a reader (a segment deleted by retention or
        # swapped by the cleaner): retry on the fresh one while the offset is still in range.
        for _ in range(1000):
            end = self._end
            bases, segments = self._view
            start = self.log_start_offset
            if offset < start or offset > end.offset:
                raise OffsetOutOfRangeError(
                    "offset %d is out of range for %s-%d: log start %d, log end %d"
                    % (offset, self.topic, self.partition, start, end.offset))
            if offset == end.offset or (max_offset is not None and offset >= max_offset):
                return FileRegion.empty(end.segment.base_offset, end.position)
            i = max(bisect.bisect_right(bases, offset) - 1, 0)
            try:
                while i < len(segments):
                    segment = segments[i]
                    max_position = end.position if segment is end.segment else None
                    if max_offset is not None:
                        limit = position_of(segment, max_offset, max_position)
                        max_position = limit if max_position is None else min(limit, max_position)
                    region = segment.read(offset, max_bytes, max_position, min_one_batch)
                    if region is not None:
                        return region
                    if segment is end.segment:
                        break
                    i += 1
            except ValueError:
                # A segment was deleted or truncated under this snapshot: look again.
                continue
            return FileRegion.empty(end.segment.base_offset, end.position)
        raise OffsetOutOfRangeError(
            "offset %d of %s-%d was removed while being read" % (offset, self.topic, self.partition))

    def offset_for_timestamp(self, timestamp: int) -> Optional[Tuple[int, int]]:
        """Kafka's ListOffsets: -> (offset, timestamp) of the first batch with max
        timestamp >= ``timestamp``; -2 gives the log start, -1 the log end; None
        when no batch is that late."""
        if timestamp == EARLIEST_TIMESTAMP:
            return self.log_start_offset, -1
        if timestamp == LATEST_TIMESTAMP:
            return self._end.offset, -1
        try:
            return offset_after_timestamp(self.log_start_offset, self._view[1], timestamp)
        except OSError as exc:
            raise self._read_error("search timestamp %d" % timestamp, exc) from exc

    def offset_of_max_timestamp(self, below: Optional[int] = None) -> Optional[Tuple[int, int]]:
        """Kafka's ListOffsets by max timestamp (-3): -> (offset, timestamp) of the first
        record holding the log's largest timestamp, or None when no record has one or, as
        Kafka answers, when that record is at or past ``below`` (the high watermark)."""
        try:
            return offset_of_max_timestamp(self.log_start_offset, self._view[1], below)
        except OSError as exc:
            raise self._read_error("search the largest timestamp", exc) from exc

    def legacy_offsets_before(self, timestamp: int, max_count: int, now_ms: int,
                              below: Optional[int] = None) -> List[int]:
        """ListOffsets v0's answer (Kafka's fetchOffsetsBefore): the base offsets of the
        segments last modified at or before ``timestamp``, newest first, with the log end
        (``below``, default the log end offset) standing for a non-empty active segment;
        -1 starts from the end, -2 gives the log start; at most ``max_count`` offsets."""
        return legacy_offsets_before(self.log_start_offset, self._view[1],
                                     lambda: self._end.offset if below is None else below, timestamp, max_count, now_ms)

    # -- truncation and deletion -------------------------------------------------------

    def truncate_to(self, offset: int) -> bool:
        """Remove every record at ``offset`` or beyond (a follower diverging from its
        leader); -> whether anything was removed."""
        with self._lock:
            self._check_open()
            if offset < 0:
                raise InvalidArgumentError("truncation offset must be >= 0, not %r" % (offset,))
            if offset >= self._end.offset:
                # As Kafka does: an epoch given its start at the log end by a leader that wrote
                # nothing before it lost the leadership conflicts with what a new leader sends.
                self._trim_epochs("truncate it from offset %d" % self._end.offset,
                                  lambda: self._epochs.truncate_from_end(self._end.offset))
                return False
            if offset < self.log_start_offset:
                self.truncate_fully_and_start_at(offset)
                return True
            self._truncations += 1
            segments = self._view[1]
            keep = [s for s in segments if s.base_offset < offset or s is segments[0]]
            for s in segments:
                if s not in keep:
                    self._delete_segment(s, asynchronous=False)
            active = keep[-1]
            active.truncate_to(offset)
            active.offset_index.resize(self.config.segment_index_bytes)
            active.time_index.resize(self.config.segment_index_bytes)
            self._publish(tuple(keep))
            new_end = max(active.next_offset, active.base_offset) if active.size else active.base_offset
            self._end = _End(new_end, active, active.size)
            self.recovery_point = min(self.recovery_point, new_end)
            # After the records, as Kafka does: a crash in between leaves entries past the end,
            # which loading cuts; the other order could leave records whose epoch is gone. From
            # the new end, which the batch holding ``offset`` may have pulled below it.
            self._trim_epochs("truncate it from offset %d" % new_end, lambda: self._epochs.truncate_from_end(new_end))
            return True

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Delete every segment and start an empty log at ``offset``; the epoch cache is cleared."""
        with self._lock:
            self._check_open()
            self._truncations += 1
            for s in self._view[1]:
                self._delete_segment(s, asynchronous=False)
            new = LogSegment(self.directory, offset, self.config, created_ms=self._now_ms())
            self._publish((new,))
            self._end = _End(offset, new, 0)
            self.log_start_offset = offset
            self.recovery_point = offset
            self._first_unstable = None
            if self._high_watermark is not None:
                self._high_watermark = offset
            self._trim_epochs("clear it", self._epochs.clear)

    def delete_records_before(self, offset: int) -> int:
        """Advance the log start offset to ``offset`` (Kafka's DeleteRecords); -> the new log start.

        Segments wholly below it are deleted now; records below it in the first
        remaining segment become unreadable at once.
        """
        with self._lock:
            self._check_open()
            if offset > self._end.offset:
                raise OffsetOutOfRangeError(
                    "cannot delete records before %d: the log ends at %d" % (offset, self._end.offset))
            if offset > self.log_start_offset:
                self.log_start_offset = offset
                self._delete_segments(lambda s, nxt: nxt is not None and nxt <= offset, "log start offset")
                self._epochs_start_moved()
            return self.log_start_offset

    def delete_old_segments(self) -> int:
        """Apply retention (time, size, log start offset); -> segments deleted. Never the active one."""
        with self._lock:
            if self.closed or not self.config.delete:
                deleted = 0
            else:
                deleted = self._delete_segments(retention_ms_breached(self.config, self._now_ms), "retention.ms")
                deleted += self._delete_segments(retention_bytes_breached(self.config, lambda: self.size_in_bytes),
                                                 "retention.bytes")
            return deleted + self._delete_segments(
                lambda s, nxt: nxt is not None and nxt <= self.log_start_offset, "log start offset")

    def _delete_segments(self, predicate: Optional[Breached], reason: str) -> int:
        """Delete the oldest segments while ``predicate`` holds (None: none); never the active segment."""
        if predicate is None:
            return 0
        segments = self._view[1]
        doomed = []
        for i, segment in enumerate(segments[:-1]):
            if not predicate(segment, segments[i + 1].base_offset):
                break
            doomed.append(segment)
        if not doomed:
            return 0
        remaining = segments[len(doomed):]
        self._publish(remaining)
        if remaining[0].base_offset > self.log_start_offset:
            self.log_start_offset = remaining[0].base_offset
            self._epochs_start_moved()
        for segment in doomed:
            log.info("%s: deleting segment %d (%s)", self.directory, segment.base_offset, reason)
            self._delete_segment(segment, asynchronous=True)
        return len(doomed)

    def _epochs_start_moved(self) -> None:
        """Trim the epoch cache to the new log start (lock held)."""
        if self.closed:
            return  # a closed log may be on its way out (its directory renamed); loading trims it
        start = self.log_start_offset
        self._trim_epochs("trim it to the log start offset %d" % start, lambda: self._epochs.truncate_from_start(start))

    def _delete_segment(self, segment: LogSegment, asynchronous: bool) -> None:
        """Rename to .deleted now, remove the files later (file.delete.delay.ms)."""
        if os.path.exists(segment.log_path):
            segment.change_suffix("", DELETED_SUFFIX)
        delay = self.config.file_delete_delay_ms / 1000.0
        if asynchronous and delay > 0 and not self.closed:
            self.scheduler.schedule(segment.delete, delay=delay, name="delete-segment")
        else:
            segment.delete()

    def replace_segments(self, new_segments: Sequence[LogSegment], old_segments: Sequence[LogSegment]) -> None:
        """Swap compacted segments (files ending ``.cleaned``) in for ``old_segments``.

        Crash-safe in Kafka's order: the new files are renamed ``.cleaned`` ->
        ``.swap`` (from here on recovery completes the swap), the old segments
        are renamed ``.deleted``, then the new ones lose the ``.swap`` suffix.
        A crash before the first step leaves the old segments live; after it,
        recovery finishes the swap.
        """
        with self._lock:
            self._check_open()
            for seg in new_segments:
                seg.flush()
                seg.change_suffix(CLEANED_SUFFIX, SWAP_SUFFIX)
            current = self._view[1]
            old = set(id(s) for s in old_segments)
            survivors = [s for s in current if id(s) not in old]
            # Readers switch to the new list before the old segments close, so no
            # reader is left retrying on segments that are going away.
            self._publish(tuple(sorted(survivors + list(new_segments), key=lambda s: s.base_offset)))
            for seg in old_segments:
                self._delete_segment(seg, asynchronous=True)
            for seg in new_segments:
                seg.change_suffix(SWAP_SUFFIX, "")


    # -- lifecycle ------------------------------------------------------------------

    def _check_open(self) -> None:
        if self.closed:
            raise LogClosedError("log %s is closed" % self.directory)

    def close(self, flush: bool = True) -> None:
        """Flush everything, trim the indexes and close the files (no recovery needed next time).

        ``flush=False`` skips the fsync: for a log about to be deleted, whose
        data nobody will read again.
        """
        if self._own_scheduler:
            # Outside the lock: a queued flush or deletion may be waiting for it.
            self.scheduler.shutdown(run_pending=True)
        with self._lock:
            if self.closed:
                return
            if flush:
                self._flush_locked(self._end.offset)
                if self._epochs.dirty:
                    try:
                        self._epochs.flush()
                    except OSError as exc:
                        # Behind memory only in ways loading repairs: no record lacks its epoch.
                        log.warning("%s: could not write %s on close: %s", self.directory,
                                    LEADER_EPOCH_CHECKPOINT, exc)
            self.closed = True
            for segment in self._view[1]:
                segment.close()
            hook, self._close_hook = self._close_hook, None
        if hook is not None:
            hook(self)

    def copy_epochs_from(self, other: "Log") -> None:
        """Take ``other``'s leader epoch cache as this log's (a future log replacing ``other``,
        whose records it copied: the epochs given a start at the log end without records yet
        come with it)."""
        with self._lock:
            self._check_open()
            entries = [(e.epoch, e.start_offset) for e in other.leader_epoch_cache.entries]
            self._change_epochs("copy the leader epochs of %s" % other.directory,
                                lambda: self._epochs.assign_all(entries, clear=True))

    def close_handlers(self) -> None:
        """Let go of the files without writing anything (no flush, no index trimming): the
        log's directory failed, and nothing more may be asked of it (Kafka's closeHandlers)."""
        if self._own_scheduler:
            self.scheduler.shutdown(run_pending=False)
        with self._lock:
            if self.closed:
                return
            self.closed = True
            for segment in self._view[1]:
                segment.close_handlers()
            hook, self._close_hook = self._close_hook, None
        if hook is not None:
            hook(self)

    def delete(self) -> None:
        """Close the log and remove its directory with every file in it."""
        if self._own_scheduler:
            self.scheduler.shutdown(run_pending=True)
        with self._lock:
            if not self.closed:
                self.closed = True
                for segment in self._view[1]:
                    segment.close()
            for name in os.listdir(self.directory):
                os.unlink(os.path.join(self.directory, name))
            os.rmdir(self.directory)

    def __enter__(self) -> "Log":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return "Log(%s-%d, start=%d, end=%d, segments=%d)" % (
            self.topic, self.partition, self.log_start_offset, self._end.offset, len(self._view[1]))
