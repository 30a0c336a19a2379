"""The log cleaner: compaction of logs whose ``cleanup.policy`` includes ``compact``.

Kafka's LogCleaner and Cleaner; which logs are being cleaned, aborted or paused
is kept in the log manager's
:class:`~pylogq.storage.cleaner_manager.CleaningRegistry` (Kafka's
LogCleanerManager), so every cleaner of its logs respects it. A compacted log
keeps, for every key, at least its latest committed record. Each log is split at its
*first dirty offset*, kept per partition in ``cleaner-offset-checkpoint`` in the log's log
directory (``<topic> <partition> <offset>`` lines, see
:mod:`pylogq.storage.checkpoint`)::

    log start            first dirty offset          first uncleanable     log end
    |---- clean section ----|----- dirty (cleanable) -----|-- uncleanable --|
                                                   the segment holding the least of:
                                                   the last stable offset, the active
                                                   segment's base, the first segment
                                                   younger than min.compaction.lag.ms

The first uncleanable offset is the base offset of the segment holding the
least of the log's last stable offset (:attr:`Log.stable_offset`: the first
offset of the oldest transaction not yet decided and replicated, else the high
watermark its partition gives the log), the active segment's base offset and
the first segment younger than ``min.compaction.lag.ms``, as Kafka's
cleanableOffsets and calculateCleanableBytes bound it. So nothing at or after
an open transaction, nor any record a new leader could lack, is cleaned: that
segment is left whole. A log no partition replicates has no high watermark
(every record counts as replicated) until one is read from the log directory's
``replication-offset-checkpoint`` at load or given by its partition; until its
partition gives it the first unstable offset (the cleaner starts with the log
manager, before a broker opens its partitions), the log replays its own
transactions to know it, so an open transaction is never taken as committed.

A clean builds an :class:`~pylogq.storage.offset_map.OffsetMap` (key digest ->
latest offset) over the committed records of the dirty section, segment by
segment: control records and the records of aborted transactions (known from
the transaction indexes, :meth:`Log.collect_aborted_transactions`) are not
mapped, so an aborted record never hides the committed record of its key from
read_committed readers. When the map is full it stops there, and that offset
ends the section cleaned this round (the rest waits for the next round). Then
every segment from the log start up to that end is recopied, in groups that fit
one segment (``segment.bytes``, ``segment.index.bytes``), into new segments with
the suffix ``.cleaned``, which :meth:`Log.replace_segments` swaps in
crash-safely. Offsets never change. A record of a data batch is copied when it
is not in an aborted transaction and:

* it lies at or past the end of the mapped section (it is not cleaned yet:
  Kafka keeps records past the map's latest offset), or
* its key is not null (a compacted log holds no null keys; a log that changed
  policy loses them here), its offset is >= the map's offset for its key (the
  map holds no entry for a key seen only outside the mapped section: such
  records stay), and it is not a tombstone (null value) past the delete horizon.

Delete horizon (Kafka's rule before KIP-534): ``largest timestamp of the last
segment of the clean section - delete.retention.ms``; a segment whose largest
timestamp (its max batch timestamp, or file mtime when it has none) is at or
below the horizon is *past the horizon*: its tombstones are dropped, and so are
its transaction markers that mark nothing left (as Kafka 2.x kept both with
``retainDeletesAndTxnMarkers``). A log with no clean section yet keeps every
tombstone and marker. So a tombstone or marker survives at least
``delete.retention.ms`` after newer data was cleaned behind it.

Transactions are followed over the whole clean by one tracker (Kafka's
CleanedTransactionMetadata, :class:`_TxnTracker`), batch by batch in offset order:

* records of aborted transactions are dropped (their batches go, but for the
  producers' last batches below);
* a COMMIT marker marks nothing left once no data batch of its transaction was
  met in this clean; an ABORT marker once no data batch of its transaction (nor
  of its producer since the producer's previous marker) was. Such a marker is
  dropped when its segment is past the delete horizon; every other marker, and
  every control record that is no transaction marker, is kept. So a
  transaction's marker outlives its records by one clean at least, and a replay
  of the log never finds a transaction left open;
* the cleaned segment's transaction index holds exactly the aborted
  transactions whose ABORT marker it keeps and of which a data batch stays (an
  emptied last batch of the producer), each with its original entry (Kafka's
  cleanedIndex, which keeps an entry one clean longer, while its marker stays
  for the batches it just dropped). An entry goes with the last of its
  batches: read_committed readers have nothing left to skip.

Batches (magic v2) are copied byte for byte when every record stays. With
drops, the batch is rebuilt with the same base offset, partition leader
epoch, producer id/epoch, base sequence, transactional flag, timestamp type
and codec, and its original last offset delta is written back (Kafka: "magic
v2 preserves the first and last offset/sequence of the original batch"), so a
producer's last sequence survives. So that a replay of the log (the partition
rebuilds its producer state from it) finds every producer's last sequence and
epoch, as Kafka keeps its active producers' last records: the last data batch
of each producer among the segments being cleaned stays, as an empty batch (61
bytes, no records; transactional when it was) when it loses every record, and
its transaction's marker with it; the producer's last control batch stays too
when it comes after that data batch (it may carry a newer producer epoch, from
a fencing abort, and the coordinator epoch that fences stale coordinators).
Other emptied batches are dropped. Legacy (v0/v1)
entries are kept whole or dropped: an uncompressed message is one record; a
compressed wrapper stays whole when any of its inner records stays.

Cleaning never blocks reads or appends: it reads inactive, immutable segments
without the log's lock and takes it only to check that the segments it
cleaned are still the log's (a truncation, retention or another change during
the clean aborts it and the ``.cleaned`` files are deleted) and to swap.
"""

from __future__ import annotations

import logging
import os
import struct
import threading
import time
from typing import TYPE_CHECKING, Callable, Dict, Iterable, List, NamedTuple, Optional, Sequence, Set, Tuple

from .. import records
from ..errors import CleaningAbortedError, CorruptRecordError, InvalidRecordError, KafkaStorageError, PylogqError
from ..records.control import ABORT, COMMIT, end_txn_marker
from ..records.crc import crc32c
from ..records.default_records import (
    ATTRIBUTES_OFFSET,
    BATCH_HEADER,
    CONTROL_MASK,
    CRC_OFFSET,
    ENTRY_HEAD,
    HEADER_SIZE,
    LAST_OFFSET_DELTA_OFFSET,
    LOG_APPEND_TIME,
    LOG_OVERHEAD,
    MAX_TIMESTAMP_OFFSET,
    NO_PRODUCER_ID,
    TIMESTAMP_TYPE_MASK,
    TRANSACTIONAL_MASK,
)
from .checkpoint import CLEANER_CHECKPOINT, OffsetCheckpoint
from .cleaner_manager import CleaningProgress, CleaningRegistry
from .log import Log
from .offset_map import SLOT_SIZE, OffsetMap
from .segment import CLEANED_SUFFIX, BatchHeader, FileRegion, LogSegment
from .transaction_index import AbortedTxn

if TYPE_CHECKING:
    import numpy as np

log = logging.getLogger("pylogq.storage.cleaner")

__all__ = ["LogCleaner", "CleanerStats", "Throttler", "LogToClean", "group_segments_by_size"]

_INT32 = struct.Struct(">i")
_UINT32 = struct.Struct(">I")
_INT64 = struct.Struct(">q")
_LEGACY_ATTRIBUTES = 17  # v0/v1: offset 8, size 4, crc 4, magic 1, attributes 1
_LEGACY_TIMESTAMP = 18
_INT32_MAX = 2**31 - 1
_NEVER = 2**63 - 1


class CleanerStats:
    """What one clean did: Kafka's CleanerStats, plus the offsets it covered."""

    def __init__(self, topic: str = "", partition: int = -1) -> None:
        self.topic = topic
        self.partition = partition
        self.first_dirty_offset = -1
        self.end_offset = -1  # the first offset not cleaned; the next first dirty offset
        self.map_bytes_read = 0
        self.map_records_read = 0
        self.map_utilization = 0.0
        self.bytes_read = 0
        self.bytes_written = 0
        self.records_read = 0
        self.records_kept = 0
        self.tombstones_dropped = 0
        self.batches_copied = 0
        self.batches_rebuilt = 0
        self.batches_dropped = 0
        self.empty_batches_kept = 0
        self.aborted_records_dropped = 0  # records of aborted transactions
        self.markers_dropped = 0  # COMMIT and ABORT markers removed
        self.segments_cleaned = 0
        self.aborted = False
        self.started = time.monotonic()
        self.map_done = self.started
        self.elapsed = 0.0

    @property
    def records_dropped(self) -> int:
        return self.records_read - self.records_kept

    def summary(self) -> str:
        """One line in the spirit of Kafka's cleaner summary."""
        mb = 1024.0 * 1024.0
        elapsed = max(self.elapsed, 1e-9)
        map_s = max(self.map_done - self.started, 1e-9)
        reduction = 100.0 * (1 - self.bytes_written / self.bytes_read) if self.bytes_read else 0.0
        fewer = 100.0 * (1 - self.records_kept / self.records_read) if self.records_read else 0.0
        return (
            "cleaned log %s-%d (dirty section [%d, %d)): %.1f MB processed in %.3f s (%.1f MB/s); "
            "indexed %.1f MB in %.3f s (%.1f MB/s), buffer utilization %.1f%%; "
            "start size %.1f MB (%d records), end size %.1f MB (%d records), "
            "%.1f%% size reduction (%.1f%% fewer records), %d tombstones dropped%s%s"
            % (self.topic, self.partition, self.first_dirty_offset, self.end_offset,
               (self.bytes_read + self.map_bytes_read) / mb, elapsed,
               (self.bytes_read + self.map_bytes_read) / mb / elapsed,
               self.map_bytes_read / mb, map_s, self.map_bytes_read / mb / map_s,
               100.0 * self.map_utilization,
               self.bytes_read / mb, self.records_read, self.bytes_written / mb, self.records_kept,
               reduction, fewer, self.tombstones_dropped,
               ", %d records of aborted transactions and %d transaction markers dropped"
               % (self.aborted_records_dropped, self.markers_dropped)
               if self.aborted_records_dropped or self.markers_dropped else "",
               " (aborted)" if self.aborted else "")
        )

    def __repr__(self) -> str:
        return "CleanerStats(%s-%d, [%d, %d), read=%d, written=%d, records %d -> %d%s)" % (
            self.topic, self.partition, self.first_dirty_offset, self.end_offset, self.bytes_read,
            self.bytes_written, self.records_read, self.records_kept, ", aborted" if self.aborted else "")


class Throttler:
    """Limits a rate of bytes (Kafka's Throttler): callers report bytes, it sleeps when ahead.

    Every ``check_interval`` seconds it compares the bytes seen in the period
    with ``rate`` and sleeps off the excess. The sleep is ``wait(seconds)``,
    by default a :class:`threading.Event`'s wait, so setting the event (a
    shutdown) ends it at once. Thread-safe.
    """

    def __init__(self, rate: float, wait: Callable[[float], object], *, check_interval: float = 0.3,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.rate = rate
        self._wait: Callable[[float], object] = wait
        self._interval = check_interval
        self._clock = clock
        self._lock = threading.Lock()
        self._period_start = clock()
        self._observed = 0.0
        self.slept = 0.0  # seconds asked of wait() so far

    @property
    def enabled(self) -> bool:
        return 0 < self.rate < float("inf")

    def maybe_throttle(self, observed: int) -> None:
        if not self.enabled:
            return
        with self._lock:
            self._observed += observed
            now = self._clock()
            elapsed = now - self._period_start
            if elapsed < self._interval or self._observed <= 0:
                return
            sleep = self._observed / self.rate - elapsed
            self._period_start = now
            self._observed = 0.0
        if sleep > 0:
            self.slept += sleep
            self._wait(sleep)
            with self._lock:
                self._period_start = self._clock()


class CleanerTotals(NamedTuple):
    """The cleaner's metrics: Kafka's max-clean-time-secs (over the last cleaning of each
    thread), cleaner-recopy-percent (of the last cleaning) and max-dirty-percent (the
    dirtiest log due a cleaning when the cleaner last looked), with counts since start."""

    cleanings: int
    bytes_read: int
    max_clean_time_s: float
    recopy_percent: float
    max_dirty_percent: float


class LogToClean(NamedTuple):
    """A compacted log's cleanable range and its dirtiness (Kafka's LogToClean). The first
    uncleanable offset is a segment's base offset; it lies below the first dirty offset when
    the last stable offset went back below that (nothing is cleanable then)."""

    log: Log
    first_dirty_offset: int
    first_uncleanable_offset: int
    clean_bytes: int
    cleanable_bytes: int
    needs_compaction_now: bool  # max.compaction.lag.ms was exceeded

    @property
    def dirty_ratio(self) -> float:
        total = self.clean_bytes + self.cleanable_bytes
        return self.cleanable_bytes / total if total else 0.0


class _Batch(NamedTuple):
    """One entry of a segment file, as the cleaner needs it."""

    position: int
    size: int
    magic: int
    base_offset: int
    last_offset: int
    attributes: int
    producer_id: int
    producer_epoch: int
    max_timestamp: int


def group_segments_by_size(segments: Sequence[LogSegment], max_size: int,
                           max_index_size: int) -> List[List[LogSegment]]:
    """Consecutive segments in groups whose summed file and index sizes fit one segment.

    Kafka's groupSegmentsBySize: the cleaned output of a group is no larger
    than its input, so it fits a segment and its indexes; a group also spans
    fewer than 2**31 offsets (relative offsets in the index are 32 bits).
    """
    groups: List[List[LogSegment]] = []
    i = 0
    while i < len(segments):
        first = segments[i]
        group = [first]
        size = first.size
        index_size = first.offset_index.size_in_bytes
        time_size = first.time_index.size_in_bytes
        i += 1
        while i < len(segments):
            s = segments[i]
            if (size + s.size > max_size or index_size + s.offset_index.size_in_bytes > max_index_size
                    or time_size + s.time_index.size_in_bytes > max_index_size
                    or (s.size and s.last_offset - first.base_offset > _INT32_MAX)):
                break
            group.append(s)
            size += s.size
            index_size += s.offset_index.size_in_bytes
            time_size += s.time_index.size_in_bytes
            i += 1
        groups.append(group)
    return groups


def _walk(data: bytes) -> List[_Batch]:
    """Every whole entry of a segment's bytes (v0, v1, v2), in order."""
    out: List[_Batch] = []
    end = len(data)
    pos = 0
    unpack_v2 = BATCH_HEADER.unpack_from
    while pos + 17 <= end:
        base, length = ENTRY_HEAD.unpack_from(data, pos)
        size = LOG_OVERHEAD + length
        if length < 14 or pos + size > end:
            break
        magic = data[pos + 16]
        if magic == 2:
            if size < HEADER_SIZE:
                break
            (_, _, _, _, _, attrs, delta, _, max_ts, pid, pepoch, _, _) = unpack_v2(data, pos)
            out.append(_Batch(pos, size, 2, base, base + delta, attrs, pid, pepoch, max_ts))
        else:
            attrs = data[pos + _LEGACY_ATTRIBUTES]
            ts = _INT64.unpack_from(data, pos + _LEGACY_TIMESTAMP)[0] if magic == 1 and size >= 26 else -1
            out.append(_Batch(pos, size, magic, base, base, attrs, NO_PRODUCER_ID, -1, ts))
        pos += size
    return out


def _empty_batch(data: bytes, batch: _Batch) -> bytearray:
    """The header of ``batch`` with no records (Kafka's writeEmptyHeader): offsets and sequence kept."""
    (base, _, epoch, magic, _, attrs, delta, _, max_ts, pid, pepoch, seq, _) = BATCH_HEADER.unpack_from(
        data, batch.position)
    out = bytearray(HEADER_SIZE)
    attrs &= TIMESTAMP_TYPE_MASK | TRANSACTIONAL_MASK | CONTROL_MASK
    BATCH_HEADER.pack_into(out, 0, base, HEADER_SIZE - LOG_OVERHEAD, epoch, magic, 0, attrs, delta, -1,
                         max_ts, pid, pepoch, seq, 0)
    _UINT32.pack_into(out, CRC_OFFSET, crc32c(memoryview(out)[ATTRIBUTES_OFFSET:]))
    return out


def _rebuild(data: bytes, batch: _Batch, keep: np.ndarray) -> bytearray:
    """``batch`` with only the records where ``keep`` is set, offsets and last sequence unchanged."""
    original = records.RecordBatch(data, batch.position)
    lat = original.timestamp_type == LOG_APPEND_TIME
    builder = records.RecordBatchBuilder(
        original.compression_type,
        base_offset=original.base_offset,
        partition_leader_epoch=original.partition_leader_epoch,
        producer_id=original.producer_id,
        producer_epoch=original.producer_epoch,
        base_sequence=original.base_sequence,
        is_transactional=original.is_transactional,
        timestamp_type=original.timestamp_type,
        batch_size=_INT32_MAX,
    )
    base = original.base_offset
    for record, kept in zip(original.records(), keep.tolist()):
        if kept:
            timestamp = original.max_timestamp if lat else record.timestamp
            builder.append(record.offset - base, timestamp, record.key, record.value, record.headers)
    out = builder.build()
    if _INT32.unpack_from(out, LAST_OFFSET_DELTA_OFFSET)[0] != original.last_offset_delta:
        _INT32.pack_into(out, LAST_OFFSET_DELTA_OFFSET, original.last_offset_delta)
        _UINT32.pack_into(out, CRC_OFFSET, crc32c(memoryview(out)[ATTRIBUTES_OFFSET:]))
    return out


def _read_segment(segment: LogSegment, size: int) -> bytes:
    """The first ``size`` bytes of a segment's file (a truncated file raises OffsetOutOfRangeError)."""
    return FileRegion(segment.file, 0, size, segment.base_offset).read()


_EMPTIED = -1  # a control batch with no record left: it marks nothing
_NOT_A_MARKER = -2  # a control record of another type (Kafka's UNKNOWN): always kept


def _control_type(data: bytes, batch: _Batch) -> int:
    """ABORT or COMMIT for a transaction marker's control batch; _EMPTIED or _NOT_A_MARKER."""
    try:
        marker = end_txn_marker(data, batch.position)
    except (CorruptRecordError, InvalidRecordError):
        return _NOT_A_MARKER
    return _EMPTIED if marker is None else marker.control_type


class _TxnTracker:
    """What a walk of a log's batches in offset order knows of transactions (Kafka's
    CleanedTransactionMetadata): which data batches hold aborted records, and which markers
    mark nothing left in the log.

    It starts from the aborted transactions of the range walked (the transaction indexes')
    and then sees every v2 batch in offset order: data batches through :meth:`data_batch`,
    control batches through :meth:`marker`. An aborted transaction is entered once the walk
    reaches its first offset; from there every transactional batch of its producer is
    aborted data, until the producer's ABORT marker. Any other transactional batch is
    committed data: the cleaner walks nothing at or past the last stable offset's segment,
    so every transaction it meets is decided. Not thread-safe: one clean owns it.
    """

    __slots__ = ("_pending", "_next", "_aborting", "_committing")

    def __init__(self, aborted: Iterable[AbortedTxn]) -> None:
        # By first offset, each once (two segments' searches may both list a transaction).
        self._pending = sorted(set(aborted), key=lambda txn: (txn.first_offset, txn.last_offset))
        self._next = 0
        #: producer id -> [its aborted transaction entered, whether a data batch of it was seen,
        #: whether one stays in the cleaned log]
        self._aborting: Dict[int, list] = {}
        #: producers with a data batch of a transaction not listed as aborted seen since their last marker
        self._committing: Set[int] = set()

    def _enter_up_to(self, offset: int) -> None:
        pending = self._pending
        i = self._next
        while i < len(pending) and pending[i].first_offset <= offset:
            txn = pending[i]
            self._aborting.setdefault(txn.producer_id, [txn, False, False])
            i += 1
        self._next = i

    def data_batch(self, batch: _Batch, stays: bool = False) -> bool:
        """A data batch: -> whether it holds records of an aborted transaction. Only a
        transactional batch can: a walk may skip the others. ``stays``: the batch stays in the
        cleaned log (emptied when aborted) whatever its records."""
        self._enter_up_to(batch.last_offset)
        if not batch.attributes & TRANSACTIONAL_MASK:
            return False
        aborting = self._aborting.get(batch.producer_id)
        if aborting is not None:
            aborting[1] = True
            aborting[2] = aborting[2] or stays
            return True
        self._committing.add(batch.producer_id)
        return False

    def marker(self, batch: _Batch, control_type: int) -> Tuple[bool, Optional[AbortedTxn]]:
        """A control batch: -> (whether no batch of its transaction was seen, so that it marks
        nothing left in the log and may go once past the delete horizon; the aborted
        transaction it ends when a batch of that stays in the cleaned log, to be kept in the
        transaction index with the marker).

        A COMMIT goes once no data batch of its transaction was seen (Kafka's rule); an ABORT
        once no data batch of its producer was seen since the producer's previous marker, be
        it listed as aborted (Kafka's rule) or not (a transaction index that lost the entry:
        its records are kept as committed, and so must the marker that ends them be, or a
        replay of the log would find the transaction open). An emptied control batch marks
        nothing; a control record of another type is kept.
        """
        self._enter_up_to(batch.last_offset)
        pid = batch.producer_id
        if control_type == ABORT:
            aborting = self._aborting.pop(pid, None)
            committing = pid in self._committing
            self._committing.discard(pid)
            if aborting is not None and aborting[1]:
                # Its records are all dropped but in a batch that stays (emptied): the entry
                # goes with them, the marker one clean later.
                return False, aborting[0] if aborting[2] else None
            return not committing, None
        if control_type == COMMIT:
            if pid in self._committing:
                self._committing.discard(pid)
                return False, None
            return True, None
        return control_type == _EMPTIED, None


class _CleanedGroup:
    """The ``.cleaned`` segment a group of segments is recopied into, with buffered writes."""

    def __init__(self, log_: Log, base_offset: int, io_buffer: int) -> None:
        prefix = os.path.join(log_.directory, "%020d" % base_offset)
        for suffix in (".log", ".index", ".timeindex", ".txnindex"):
            try:
                os.unlink(prefix + suffix + CLEANED_SUFFIX)  # a leftover of an aborted clean
            except FileNotFoundError:
                pass
        self.segment = LogSegment(log_.directory, base_offset, log_.config, suffix=CLEANED_SUFFIX)
        self._io_buffer = max(io_buffer, 1)
        self._pending: List[bytes] = []
        self._headers: List[BatchHeader] = []
        self._pending_bytes = 0
        self.written = 0
        self.changed = False  # a batch was dropped or rewritten
        #: The aborted transactions the cleaned segment's transaction index keeps, in marker order.
        self.aborted: List[AbortedTxn] = []

    def add(self, chunk, header: BatchHeader, changed: bool = False) -> None:
        self.changed = self.changed or changed
        self._pending.append(chunk)
        self._headers.append(header)
        self._pending_bytes += header.size
        if self._pending_bytes >= self._io_buffer:
            self.flush_buffer()

    def flush_buffer(self) -> None:
        if not self._pending:
            return
        data = b"".join(self._pending)
        self.segment.append(data, self._headers)
        self.written += len(data)
        self._pending, self._headers, self._pending_bytes = [], [], 0


class LogCleaner:
    """Compacts the manager's compacted logs on ``log.cleaner.threads`` background threads.

    ``clean_once()`` (the dirtiest log) and ``clean_log(log)`` clean
    synchronously in the caller's thread. Each thread owns an offset map of
    ``log.cleaner.dedupe.buffer.size / threads`` bytes; reads and writes share
    one throttle of ``log.cleaner.io.max.bytes.per.second``. A log is cleaned
    by one thread at a time across every cleaner of the manager: each claims
    its logs in the manager's :class:`~pylogq.storage.cleaner_manager.CleaningRegistry`.
    Thread-safe.
    """

    def __init__(self, manager, *, clock: Optional[Callable[[], float]] = None) -> None:
        cfg = manager.config
        self.manager = manager
        self.num_threads = cfg.log_cleaner_threads
        self.map_memory = max(cfg.log_cleaner_dedupe_buffer_size // max(self.num_threads, 1), SLOT_SIZE)
        self.io_buffer_size = cfg.log_cleaner_io_buffer_size
        self.backoff = cfg.log_cleaner_backoff_ms / 1000.0
        self._clock = clock
        self._stop = threading.Event()
        self.throttler = Throttler(cfg.log_cleaner_io_max_bytes_per_second, self._stop.wait)
        self.cleaning: CleaningRegistry = manager.cleaning  # shared by every cleaner of the manager
        self._checkpoint_lock = threading.Lock()
        self._local = threading.local()
        self._threads: List[threading.Thread] = []
        self.last_stats: Optional[CleanerStats] = None
        self._totals_lock = threading.Lock()
        self._cleanings = 0
        self._bytes_read = 0
        self._recent_times: List[float] = []  # the last cleanings' durations (one per thread at most)
        self._max_dirty_ratio = 0.0

    def totals(self) -> "CleanerTotals":
        """What the cleaner did since it started (its metrics)."""
        with self._totals_lock:
            last = self.last_stats
            recopy = 100.0 * last.bytes_written / last.bytes_read if last is not None and last.bytes_read else 0.0
            return CleanerTotals(self._cleanings, self._bytes_read, max(self._recent_times, default=0.0), recopy,
                                 100.0 * self._max_dirty_ratio)

    # -- lifecycle ------------------------------------------------------------

    def start(self) -> None:
        """Start the cleaner threads (none when log.cleaner.threads is 0)."""
        if self._threads:
            return
        self._stop.clear()
        for i in range(self.num_threads):
            t = threading.Thread(target=self._run, name="pylogq-log-cleaner-%d" % i, daemon=True)
            self._threads.append(t)
            t.start()

    def shutdown(self) -> None:
        """Stop the threads: a clean in progress is aborted (its ``.cleaned`` files removed)."""
        self._stop.set()
        for t in self._threads:
            t.join()
        self._threads = []

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                stats = self.clean_once()
            except Exception:
                log.exception("log cleaner failed; backing off")
                stats = None
            if stats is None or stats.aborted:
                self._stop.wait(self.backoff)

    def abort(self, log_: Log) -> None:
        """Stop cleaning ``log_`` now, by this or any other cleaner of the manager; returns once a
        clean of it in another thread has stopped."""
        self.cleaning.abort(log_)

    # -- choosing -------------------------------------------------------------

    def _now_ms(self, log_: Log) -> int:
        clock = self._clock if self._clock is not None else log_.clock
        return int(clock() * 1000)

    def _checkpoint_file(self, log_: Log) -> OffsetCheckpoint:
        return OffsetCheckpoint(os.path.join(os.path.dirname(log_.directory), CLEANER_CHECKPOINT))

    def checkpointed_offset(self, log_: Log) -> Optional[int]:
        """The first dirty offset recorded for ``log_``, or None."""
        return self._checkpoint_file(log_).read().get((log_.topic, log_.partition))

    def _write_checkpoint(self, log_: Log, offset: int) -> None:
        with self._checkpoint_lock:
            cp = self._checkpoint_file(log_)
            entries = cp.read()
            entries[(log_.topic, log_.partition)] = offset
            cp.write(entries)

    def cleanable(self, log_: Log) -> LogToClean:
        """The log's clean and cleanable sections now (Kafka's cleanableOffsets and dirty ratio).

        The first uncleanable offset is the base offset of the segment holding the least of
        the log's last stable offset (:attr:`Log.stable_offset`), the active segment's base
        offset and the first segment younger than ``min.compaction.lag.ms`` (as Kafka's
        calculateCleanableBytes rounds it): the segment holding an undecided transaction, or
        records not yet replicated, is left whole. It lies below the first dirty offset when
        the last stable offset went back below it (then nothing is cleanable).
        """
        segments = log_.segments
        stable = log_.stable_offset
        start, end = log_.log_start_offset, log_.log_end_offset
        first_dirty = self.checkpointed_offset(log_)
        if first_dirty is None or first_dirty < start or first_dirty > end:
            first_dirty = start
        active = segments[-1]
        limit = min(active.base_offset, stable)
        cfg = log_.config
        now = self._now_ms(log_)
        if cfg.min_compaction_lag_ms > 0:
            for s in segments[:-1]:
                if s.next_offset > first_dirty and s.largest_timestamp > now - cfg.min_compaction_lag_ms:
                    limit = min(limit, s.base_offset)
                    break
        uncleanable = active.base_offset
        for s in segments[:-1]:
            if s.next_offset > limit or s.base_offset >= limit:  # the segment holding it
                uncleanable = s.base_offset
                break
        dirty = [s for s in segments[:-1] if s.next_offset > first_dirty and s.base_offset < uncleanable]
        clean = [s for s in segments if s.base_offset < first_dirty and s.next_offset > start]
        clean_bytes = sum(s.size for s in clean)
        cleanable_bytes = sum(s.size for s in dirty)
        needs_now = False
        if cfg.max_compaction_lag_ms < _NEVER and dirty:
            firsts = [s.rolling_timestamp for s in dirty if s.rolling_timestamp is not None
                      and s.rolling_timestamp >= 0]
            earliest = min(firsts) if firsts else min(s.largest_timestamp for s in dirty)
            needs_now = now - earliest > cfg.max_compaction_lag_ms
        return LogToClean(log_, first_dirty, uncleanable, clean_bytes, cleanable_bytes, needs_now)

    def _due(self, log_: Log) -> Optional[LogToClean]:
        """``log_``'s cleanable range if it is due a clean (dirty enough, or past max.compaction.lag.ms)."""
        if log_.closed or not log_.config.compact:
            return None
        try:
            candidate = self.cleanable(log_)
        except (ValueError, OSError, KafkaStorageError):
            # Closed or deleted meanwhile, or its files could not be read as its last stable
            # offset was looked for (its directory then goes offline): the other logs go on.
            return None
        if candidate.cleanable_bytes == 0:
            return None
        if not (candidate.needs_compaction_now or candidate.dirty_ratio > log_.config.min_cleanable_dirty_ratio):
            return None
        return candidate

    def _grab_filthiest(self) -> Optional[Tuple[LogToClean, CleaningProgress]]:
        """Claim the dirtiest due log that no cleaner is cleaning.

        No lock is held while the manager lists its logs (its lock comes before
        the registry's), and nothing is called while the registry's lock is held.
        """
        candidates = []
        for log_ in self.manager.all_logs():
            if self.cleaning.progress(log_) is None:
                candidate = self._due(log_)
                if candidate is not None:
                    candidates.append(candidate)
        candidates.sort(key=lambda c: c.dirty_ratio, reverse=True)  # stable: ties keep the manager's order
        self._max_dirty_ratio = candidates[0].dirty_ratio if candidates else 0.0
        for candidate in candidates:
            progress = self.cleaning.try_begin(candidate.log)
            if progress is None:
                continue  # taken by another cleaner meanwhile, or paused, or closed
            # Measured again under the claim: another cleaner may have cleaned it since.
            claimed = self._due(candidate.log)
            if claimed is not None:
                return claimed, progress
            self.cleaning.end(progress)
        return None

    # -- cleaning -------------------------------------------------------------

    def clean_once(self) -> Optional[CleanerStats]:
        """Clean the dirtiest log over its min.cleanable.dirty.ratio (or past max.compaction.lag.ms).

        -> its stats, or None when no log needs cleaning.
        """
        grabbed = self._grab_filthiest()
        if grabbed is None:
            return None
        target, progress = grabbed
        try:
            return self._clean(target, progress)
        finally:
            self.cleaning.end(progress)

    def clean_log(self, log_: Log) -> CleanerStats:
        """Clean ``log_`` now, whatever its dirty ratio (waits for a clean of it in another thread,
        by this or any other cleaner of the manager)."""
        progress = self.cleaning.begin(log_)
        try:
            return self._clean(self.cleanable(log_), progress)
        finally:
            self.cleaning.end(progress)

    def _offset_map(self):
        m = getattr(self._local, "offset_map", None)
        if m is None:
            m = OffsetMap(self.map_memory)
            self._local.offset_map = m
        return m

    def _check_done(self, progress: CleaningProgress) -> None:
        if progress.aborted.is_set() or self._stop.is_set():
            raise CleaningAbortedError("cleaning of %s-%d was aborted" % (progress.log.topic, progress.log.partition))

    def _clean(self, target: LogToClean, progress: CleaningProgress) -> CleanerStats:
        log_ = target.log
        stats = CleanerStats(log_.topic, log_.partition)
        created: List[LogSegment] = []
        try:
            self._do_clean(target, progress, stats, created)
        except CleaningAbortedError as exc:
            stats.aborted = True
            log.info("%s", exc)
        finally:
            for segment in created:
                if segment.log_path.endswith(CLEANED_SUFFIX):
                    segment.delete()  # lets go of its file too
        stats.elapsed = time.monotonic() - stats.started
        self.last_stats = stats
        with self._totals_lock:
            self._cleanings += 1
            self._bytes_read += stats.bytes_read
            self._recent_times = (self._recent_times + [stats.elapsed])[-max(self.num_threads, 1):]
        log.info("%s", stats.summary())
        return stats

    def _do_clean(self, target: LogToClean, progress: CleaningProgress, stats: CleanerStats,
                  created: List[LogSegment]) -> None:
        log_ = target.log
        segments = log_.segments
        first_dirty, uncleanable = target.first_dirty_offset, target.first_uncleanable_offset
        stats.first_dirty_offset = first_dirty
        clean_section = [s for s in segments[:-1] if s.base_offset < first_dirty]
        delete_horizon = (clean_section[-1].largest_timestamp - log_.config.delete_retention_ms
                          if clean_section else None)
        offset_map = self._offset_map()
        end = self._build_offset_map(log_, segments, first_dirty, max(uncleanable, first_dirty), offset_map,
                                     progress, stats)
        stats.end_offset = end
        stats.map_utilization = offset_map.utilization
        stats.map_done = time.monotonic()
        # Nothing of the segment holding the first uncleanable offset, nor after it, is recopied
        # (it lies below the first dirty offset only when the last stable offset went back).
        to_clean = [s for s in segments[:-1] if s.base_offset < min(end, uncleanable)]
        if to_clean:
            keep = self._producer_batches_to_keep(to_clean)
            # One tracker for the whole clean: a transaction may span groups.
            txns = _TxnTracker(log_.collect_aborted_transactions(to_clean[0].base_offset, to_clean[-1].next_offset))
            cfg = log_.config
            for group in group_segments_by_size(to_clean, cfg.segment_bytes, cfg.segment_index_bytes):
                self._check_done(progress)
                self._clean_group(log_, group, offset_map, end, delete_horizon, keep, txns, progress, stats, created)
        self._write_checkpoint(log_, end)

    def _build_offset_map(self, log_: Log, segments: Sequence[LogSegment], first_dirty: int, uncleanable: int,
                          offset_map, progress: CleaningProgress, stats: CleanerStats) -> int:
        """Map the committed records of the dirty section until the map is full; -> the first
        offset not mapped.

        Control records and the records of aborted transactions are not mapped (Kafka's
        buildOffsetMap): a key mapped at an aborted record would make the cleaner drop the
        older committed record of the key, which read_committed readers then lose.
        """
        import numpy as np  # not at import: a broker starting up needs none of it

        offset_map.clear()
        end = first_dirty
        aborted = log_.collect_aborted_transactions(first_dirty, uncleanable) if uncleanable > first_dirty else []
        txns = _TxnTracker(aborted) if aborted else None  # none: no record of the section is aborted
        for segment in segments[:-1]:
            if segment.next_offset <= first_dirty:
                continue
            if segment.base_offset >= uncleanable:
                break
            self._check_done(progress)
            size = segment.size
            data = self._read(segment, size, progress)
            stats.map_bytes_read += size
            columns = records.decode_columns(data, start_offset=first_dirty, end_offset=uncleanable)
            stats.map_records_read += len(columns)
            key_length = columns.key_length
            if txns is not None:
                batches = _walk(data)
                aborted_batch = self._walk_transactions(data, batches, txns)
                if any(aborted_batch) and len(columns):
                    last_offsets = np.fromiter((b.last_offset for b in batches), dtype=np.int64, count=len(batches))
                    rows = np.searchsorted(last_offsets, columns.offsets, side="left")
                    key_length = key_length.copy()
                    key_length[np.asarray(aborted_batch, dtype=bool)[rows]] = -1  # a null key is not mapped
            consumed = offset_map.put_columns(columns.data, columns.key_start, key_length, columns.offsets)
            if consumed < len(columns):
                end = int(columns.offsets[consumed])
                if end <= first_dirty:
                    raise PylogqError(
                        "the offset map of %d bytes (capacity %d keys) is too small to clean %s-%d from offset %d"
                        % (offset_map.memory, offset_map.capacity, log_.topic, log_.partition, first_dirty))
                return end
            end = min(max(segment.next_offset, end), uncleanable)
        return max(end, first_dirty)

    @staticmethod
    def _walk_transactions(data: bytes, batches: Sequence[_Batch], txns: _TxnTracker) -> List[bool]:
        """Walk ``batches`` through ``txns``; -> per batch, whether it holds aborted records."""
        out = [False] * len(batches)
        for i, batch in enumerate(batches):
            if batch.magic != 2 or not batch.attributes & (CONTROL_MASK | TRANSACTIONAL_MASK):
                continue  # only transactional batches can be aborted
            if batch.attributes & CONTROL_MASK:
                txns.marker(batch, _control_type(data, batch))
            else:
                out[i] = txns.data_batch(batch)
        return out

    def _read(self, segment: LogSegment, size: int, progress: CleaningProgress) -> bytes:
        try:
            data = _read_segment(segment, size)
        except (ValueError, OSError) as exc:  # closed, or truncated under the clean
            raise CleaningAbortedError("segment %d changed while being cleaned: %s"
                                       % (segment.base_offset, exc)) from None
        self.throttler.maybe_throttle(size)
        return data

    @staticmethod
    def _producer_batches_to_keep(segments: Sequence[LogSegment]) -> Set[int]:
        """The base offsets of the batches kept, emptied if need be, so that a replay of the log
        (the partition rebuilds its producer state from it) finds each producer as it was
        (Kafka's lastRecordsOfActiveProducers): each producer's last data batch in
        ``segments`` (its last sequence and epoch) and, when the producer has none or its last
        control batch comes after it, that control batch (a newer epoch, as a coordinator's
        fencing abort writes, and the coordinator epoch that fences zombie coordinators; Kafka
        keeps the first in its producer snapshots, pylogq has none)."""
        last_data: Dict[int, int] = {}  # producer id -> base offset
        last_control: Dict[int, int] = {}
        for segment in segments:
            file = segment.file  # held: the file cache may let go of it, this read keeps it open
            for header in segment.iter_headers():
                if header.magic != 2:
                    continue
                head = BATCH_HEADER.unpack(os.pread(file.fileno(), HEADER_SIZE, header.position))
                pid = head[9]
                if pid != NO_PRODUCER_ID:
                    (last_control if head[5] & CONTROL_MASK else last_data)[pid] = header.base_offset
        keep = set(last_data.values())
        for pid, base in last_control.items():
            if base > last_data.get(pid, -1):
                keep.add(base)
        return keep

    def _clean_group(self, log_: Log, group: List[LogSegment], offset_map, end: int, delete_horizon: Optional[int],
                     keep: Set[int], txns: _TxnTracker, progress: CleaningProgress, stats: CleanerStats,
                     created: List[LogSegment]) -> None:
        sizes = [s.size for s in group]
        out = _CleanedGroup(log_, group[0].base_offset, self.io_buffer_size)
        created.append(out.segment)
        for segment, size in zip(group, sizes):
            self._check_done(progress)
            # Past the delete horizon, tombstones go, and so do markers that mark nothing left
            # (Kafka before KIP-534 kept both with retainDeletesAndTxnMarkers).
            past_horizon = delete_horizon is not None and segment.largest_timestamp <= delete_horizon
            data = self._read(segment, size, progress)
            written = out.written + out._pending_bytes
            self._clean_segment(data, offset_map, end, past_horizon, keep, txns, out, stats)
            stats.bytes_read += size
            stats.segments_cleaned += 1
            self.throttler.maybe_throttle(out.written + out._pending_bytes - written)
        out.flush_buffer()
        stats.bytes_written += out.written
        if len(group) == 1 and not out.changed and out.aborted == self._aborted_txns(group[0]):
            return  # the copy would be the segment byte for byte: keep the original, swap nothing
        cleaned = out.segment
        for txn in out.aborted:
            cleaned.txn_index.append(txn)
        cleaned.flush()
        cleaned.on_become_inactive()
        mtime = max(s.last_modified_ms for s in group) / 1000.0
        os.utime(cleaned.log_path, (mtime, mtime))
        self._check_done(progress)
        with log_.lock:
            current = log_.segments
            ids = set(id(s) for s in current[:-1])
            if log_.closed or not all(id(s) in ids and s.size == n for s, n in zip(group, sizes)):
                raise CleaningAbortedError("the segments of %s-%d changed during the clean; it will be retried"
                                           % (log_.topic, log_.partition))
            log_.replace_segments([cleaned], group)

    @staticmethod
    def _aborted_txns(segment: LogSegment) -> List[AbortedTxn]:
        try:
            return segment.txn_index.all_aborted_txns()
        except (ValueError, FileNotFoundError) as exc:  # closed or deleted under the clean
            raise CleaningAbortedError("segment %d changed while being cleaned: %s"
                                       % (segment.base_offset, exc)) from None

    def _clean_segment(self, data: bytes, offset_map, end: int, past_horizon: bool, keep_batches: Set[int],
                       txns: _TxnTracker, out: _CleanedGroup, stats: CleanerStats) -> None:
        """Recopy the retained part of one segment's bytes into ``out``.

        Records at or past ``end`` (the first offset the map does not cover) are kept, as
        Kafka keeps records past the map's latest offset, unless aborted.
        """
        import numpy as np  # not at import: a broker starting up needs none of it

        batches = _walk(data)
        if not batches:
            return
        nb = len(batches)
        # The transactions, batch by batch in offset order: aborted data, and the fate of markers.
        aborted_batch = [False] * nb
        marker_fate: Dict[int, Tuple[bool, Optional[AbortedTxn]]] = {}  # batch index -> (removable, entry)
        for i, batch in enumerate(batches):
            if batch.magic != 2:
                continue
            if batch.attributes & CONTROL_MASK:
                marker_fate[i] = txns.marker(batch, _control_type(data, batch))
            elif batch.attributes & TRANSACTIONAL_MASK:  # only those can be aborted
                aborted_batch[i] = txns.data_batch(batch, batch.base_offset in keep_batches)
        columns = records.decode_columns(data)
        n = len(columns)
        stats.records_read += n
        if n:
            last_offsets = np.fromiter((b.last_offset for b in batches), dtype=np.int64, count=nb)
            batch_of_row = np.searchsorted(last_offsets, columns.offsets, side="left")
            latest = offset_map.get_columns(columns.data, columns.key_start, columns.key_length)
            keep = (columns.key_length >= 0) & (columns.offsets >= latest)
            past_end = columns.offsets >= end
            if past_horizon:
                tombstones = keep & (columns.value_length < 0) & ~past_end
                keep &= ~tombstones
            else:
                tombstones = None
            keep |= past_end
            if any(aborted_batch):
                aborted_rows = np.asarray(aborted_batch, dtype=bool)[batch_of_row]
                stats.aborted_records_dropped += int(np.count_nonzero(aborted_rows))
                keep &= ~aborted_rows
                if tombstones is not None:
                    tombstones &= ~aborted_rows
            if tombstones is not None:
                stats.tombstones_dropped += int(np.count_nonzero(tombstones))
            rows = np.bincount(batch_of_row, minlength=nb)[:nb].tolist()
            kept = np.bincount(batch_of_row[keep], minlength=nb)[:nb].tolist()
            stats.records_kept += int(np.count_nonzero(keep))
        else:
            keep = np.zeros(0, dtype=bool)
            rows = kept = [0] * nb
        view = memoryview(data)
        row = 0
        for i, (batch, n_rows, n_kept) in enumerate(zip(batches, rows, kept)):
            first_row = row
            row += n_rows
            is_v2 = batch.magic == 2
            if is_v2 and batch.attributes & CONTROL_MASK:
                removable, txn = marker_fate[i]
                if removable and past_horizon and batch.base_offset not in keep_batches:
                    stats.markers_dropped += 1
                    out.changed = True
                    continue
                if txn is not None:
                    out.aborted.append(txn)
                self._copy(view, batch, out, stats)
            elif not is_v2:
                if n_kept:
                    self._copy(view, batch, out, stats)
                else:
                    stats.batches_dropped += 1
                    out.changed = True
            elif n_kept == n_rows and n_rows:
                self._copy(view, batch, out, stats)
            elif n_kept:
                rebuilt = _rebuild(data, batch, keep[first_row:row])
                max_ts = _INT64.unpack_from(rebuilt, MAX_TIMESTAMP_OFFSET)[0]
                out.add(rebuilt, BatchHeader(0, len(rebuilt), 2, batch.base_offset, batch.last_offset, max_ts), True)
                stats.batches_rebuilt += 1
            elif batch.producer_id != NO_PRODUCER_ID and batch.base_offset in keep_batches:
                if n_rows:
                    empty = _empty_batch(data, batch)
                    out.add(empty, BatchHeader(0, len(empty), 2, batch.base_offset, batch.last_offset,
                                               batch.max_timestamp), True)
                else:
                    self._copy(view, batch, out, stats)
                stats.empty_batches_kept += 1
            else:
                stats.batches_dropped += 1
                out.changed = True

    @staticmethod
    def _copy(view: memoryview, batch: _Batch, out: _CleanedGroup, stats: CleanerStats) -> None:
        out.add(view[batch.position : batch.position + batch.size],
                BatchHeader(0, batch.size, batch.magic, batch.base_offset, batch.last_offset, batch.max_timestamp))
        stats.batches_copied += 1

    def __repr__(self) -> str:
        return "LogCleaner(threads=%d, map_memory=%d, running=%s)" % (
            self.num_threads, self.map_memory, bool(self._threads))

