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
"""

from __future__ import annotations

import bisect
import logging
import os
import re
import struct
import threading
import time
from typing import Callable, Dict, Iterator, List, Mapping, NamedTuple, Optional, Sequence, Tuple, Union

from .. import records
from ..errors import (
    CorruptRecordError,
    InvalidRecordError,
    InvalidTimestampError,
    KafkaStorageError,
    MessageTooLargeError,
    OffsetOutOfRangeError,
    RecordListTooLargeError,
)
from ..records import AppendResult, BatchHeader
from ..records.default_records import PARTITION_LEADER_EPOCH_OFFSET, iter_record_times
from ..records.legacy import is_legacy, up_convert
from .checkpoint import LEADER_EPOCH_CHECKPOINT
from .config import LogConfig
from .leader_epoch import LeaderEpochFileCache
from .scheduler import Scheduler
from .segment import (
    CLEANED_SUFFIX,
    DELETED_SUFFIX,
    END,
    LOG_SUFFIX,
    NO_TIMESTAMP,
    SWAP_SUFFIX,
    FileRegion,
    LogSegment,
    offset_from_filename,
)

__all__ = ["CheckProducers", "EARLIEST_LOCAL_TIMESTAMP", "EARLIEST_TIMESTAMP", "LATEST_TIERED_TIMESTAMP", "LATEST_TIMESTAMP",
           "MAX_TIMESTAMP", "Log", "ProducersAppended", "parse_dir_name"]

log = logging.getLogger("pylogq.storage")

# Kafka's rule for a partition directory: the topic, a dash, the partition number.
_DIR_NAME = re.compile(r"^(?P<topic>[a-zA-Z0-9._-]+)-(?P<partition>\d+)$")
# The files of a segment: the base offset in 20 digits, the kind, a suffix while in transit.
_SEGMENT_FILE = re.compile(
    r"^(?P<base>\d{20})(?P<kind>\.log|\.index|\.timeindex|\.snapshot|\.txnindex)"
    r"(?P<suffix>\.deleted|\.cleaned|\.swap)?$")
# Kafka's producer snapshots and transaction indexes: a partition directory copied from
# Kafka has them; pylogq neither reads nor removes them.
_UNUSED_KINDS = (".snapshot", ".txnindex")
# The other files a partition directory holds (the second one Kafka's).
_KNOWN_FILES = frozenset([LEADER_EPOCH_CHECKPOINT, "partition.metadata"])
_TMP_SUFFIX = ".tmp"
LATEST_TIMESTAMP = -1
EARLIEST_TIMESTAMP = -2
MAX_TIMESTAMP = -3  # the record with the largest timestamp (KIP-734)
EARLIEST_LOCAL_TIMESTAMP = -4  # the local log's start (KIP-405): the log start without tiered storage
LATEST_TIERED_TIMESTAMP = -5  # the last offset in tiered storage (KIP-1005): none here


def parse_dir_name(path: str) -> Tuple[str, int]:
    """(topic, partition) of a partition directory; ValueError naming the rule otherwise."""
    name = os.path.basename(os.path.normpath(path))
    m = _DIR_NAME.match(name)
    if not m:
        raise ValueError(
            "a log directory is named <topic>-<partition> (e.g. events-0), "
            "with a topic of letters, digits, '.', '_' or '-': got %r" % name
        )
    return m.group("topic"), int(m.group("partition"))


def _end_of(segment: LogSegment) -> int:
    """One past the last offset of the whole batches at the start of a segment not loaded yet
    (its base offset when it has none): every header is read, none of the indexes."""
    end = segment.base_offset
    for header in segment.reader().headers():
        end = max(end, header.last_offset + 1)
    return end


#: ``Log.append``'s idempotence check: the validated batches -> None, or a retry's original
#: (first offset, last offset, timestamp). The partition's producer state gives it.
CheckProducers = Callable[[Sequence[BatchHeader]], Optional[Tuple[int, int, int]]]
#: ``Log.append``'s report of the batches as written (their offsets and max timestamps).
ProducersAppended = Callable[[Sequence[BatchHeader]], None]


_BATCH_LENGTH = struct.Struct(">i")  # at byte 8 of a batch: its size after the offset and this field
_LEADER_EPOCH = struct.Struct(">i")  # at byte 12 of a v2 batch: the epoch of the leader that wrote it
_LOG_OVERHEAD = 12


def _check_batch_sizes(buffer: Union[bytes, bytearray], limit: int) -> None:
    """``max.message.bytes`` from the batches' length fields alone, before any batch is read
    (Kafka checks sizes first too): an oversized compressed batch is refused without being
    decompressed. Framing faults are left to the validation that follows."""
    pos, end = 0, len(buffer)
    while pos + _LOG_OVERHEAD <= end:
        size = _BATCH_LENGTH.unpack_from(buffer, pos + 8)[0] + _LOG_OVERHEAD
        if size <= _LOG_OVERHEAD:
            return
        if size > limit + _LOG_OVERHEAD:
            raise MessageTooLargeError("batch of %d bytes at byte %d of the append exceeds max.message.bytes=%d"
                                       % (size, pos, limit))
        pos += size


def _offset_of(headers: Sequence[BatchHeader], i: int, first_offset: Optional[int]) -> int:
    """The offset batch ``i`` gets: its own (already assigned), or counted on from ``first_offset``."""
    if first_offset is None:
        return headers[i].base_offset
    return first_offset + sum(h.last_offset - h.base_offset + 1 for h in headers[:i])


_LONG_MAX = 2**63 - 1
_CLIENT_CONTROL = "Clients are not allowed to write control records"


def _refuse_control(headers: Sequence[BatchHeader]) -> None:
    """A client may not write control batches (Kafka answers INVALID_RECORD with its message).

    Every record of the first control batch is listed (each is a control record); Kafka
    names none, which its clients read the same way: the whole batch failed.
    """
    for h in headers:
        if h.attributes & records.CONTROL_MASK:
            raise InvalidRecordError(
                "%s (the record batch at byte %d is a control batch, attributes 0x%x)"
                % (_CLIENT_CONTROL, h.position, h.attributes),
                record_errors=[(i, _CLIENT_CONTROL) for i in range(h.last_offset - h.base_offset + 1)])


def _rejected(record_errors: Sequence[Tuple[int, str]], timestamps: bool) -> Exception:
    """Kafka's LogValidator.processRecordErrors: the error for the records of a batch that failed."""
    if timestamps:
        return InvalidTimestampError("One or more records have been rejected due to invalid timestamp",
                                     record_errors=record_errors)
    shown = ", ".join("RecordError(batchIndex=%d, message='%s')" % e for e in record_errors[:3])
    return InvalidRecordError("One or more records have been rejected due to %d record errors in total, and only "
                              "showing the first three errors at most: [%s]" % (len(record_errors), shown),
                              record_errors=record_errors)


def _max_timestamp(headers: Sequence[BatchHeader]) -> Tuple[int, int]:
    """(the largest max timestamp, the last offset of the first batch with it); (-1, -1) for none."""
    max_ts, max_ts_offset = -1, -1
    for h in headers:
        if h.max_timestamp > max_ts:
            max_ts, max_ts_offset = h.max_timestamp, h.last_offset
    return max_ts, max_ts_offset


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
        self._epochs: LeaderEpochFileCache  # loaded once the segments are
        # The leader epoch an append may be in without touching the epoch cache (None: look).
        # Any change of the cache resets it, so the hot path is one comparison.
        self._append_epoch: Optional[int] = None
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
        segments, swaps = self._open_segments()
        # A .swap file is compaction output whose swap was interrupted after the point of
        # no return: it replaces the segments it covers, once it is shown to be whole.
        for name in swaps:
            self._complete_swap(name, segments)
        ordered = [segments[b] for b in sorted(segments)]
        kept = self._check_segments(ordered, clean_shutdown)
        end = self._segments_end(kept)
        if self.recovery_point > end:
            # The checkpoint says more was flushed than the files hold: they changed since
            # it was written. Nothing it said is trusted: every segment is checked.
            log.warning("%s: the recovery point %d (recovery-point-offset-checkpoint) is past the log end %d; "
                        "ignored: every segment is checked", self.directory, self.recovery_point, end)
            self.recovery_point = 0
            kept = self._check_segments(kept, clean_shutdown=False)
        if not kept:
            start = log_start_offset or 0
            kept = [LogSegment(self.directory, start, self.config)]
        for segment in kept[:-1]:
            segment.offset_index.trim_to_valid_size()
            segment.time_index.trim_to_valid_size()
        self._publish(tuple(kept))
        active = kept[-1]
        self._end = _End(self._segments_end(kept), active, active.size)
        first = kept[0].base_offset
        if log_start_offset is not None and log_start_offset > self._end.offset:
            # Kafka deletes every segment here and starts the log at the checkpoint; a
            # checkpoint that contradicts the files must not hide or delete what they hold.
            log.warning("%s: the log start offset %d (log-start-offset-checkpoint) is past the log end %d; "
                        "ignored: the log starts at %d", self.directory, log_start_offset, self._end.offset, first)
            log_start_offset = None
        self.log_start_offset = max(first, log_start_offset or 0)
        self.recovery_point = self._end.offset if clean_shutdown else min(max(self.recovery_point, 0), self._end.offset)
        self._epochs = LeaderEpochFileCache(os.path.join(self.directory, LEADER_EPOCH_CHECKPOINT), self._batch_epochs)
        # An epoch's start is written before its records, so a crash (or recovery cutting a torn
        # tail) can leave entries past the end; retention that ran after the cache's last write
        # leaves entries below the start. Neither describes a record of this log.
        self._epochs.truncate_from_end(self._end.offset)
        self._epochs.truncate_from_start(self.log_start_offset)

    def _batch_epochs(self) -> Iterator[Tuple[int, int]]:
        """(partition leader epoch, base offset) of every v2 batch, in offset order: what a leader
        epoch checkpoint that does not parse is rebuilt from (legacy batches carry no epoch)."""
        for segment in self._view[1]:
            reader = segment.reader()
            for header in reader.headers():
                if header.magic >= 2:
                    raw = reader.read(header.position + PARTITION_LEADER_EPOCH_OFFSET, _LEADER_EPOCH.size)
                    yield _LEADER_EPOCH.unpack(raw)[0], header.base_offset

    def _open_segments(self) -> Tuple[Dict[int, LogSegment], List[str]]:
        """Tidy the directory and open its segments; -> {base offset: segment}, the ``.log.swap`` names.

        Leftovers of interrupted work go: temp files, unswapped compaction output,
        segments already renamed for deletion, indexes whose ``.log`` is gone. A
        file that is none of a partition directory's is warned about and left alone.
        """
        bases: List[int] = []
        swaps: List[str] = []
        indexes: List[Tuple[int, str]] = []
        for name in sorted(os.listdir(self.directory)):
            path = os.path.join(self.directory, name)
            m = _SEGMENT_FILE.match(name)
            if m is None or not os.path.isfile(path):
                if name in _KNOWN_FILES:
                    continue
                if name.endswith(_TMP_SUFFIX) and os.path.isfile(path) and (
                        name[: -len(_TMP_SUFFIX)] in _KNOWN_FILES or _SEGMENT_FILE.match(name[: -len(_TMP_SUFFIX)])):
                    os.unlink(path)  # a checkpoint or segment file being written when the process stopped
                    continue
                log.warning("%s: %s is not a segment or checkpoint file; left alone", self.directory, name)
                continue
            kind, suffix = m.group("kind"), m.group("suffix")
            if suffix in (CLEANED_SUFFIX, DELETED_SUFFIX):
                os.unlink(path)  # a clean that did not finish; a deletion that did not finish
            elif kind in _UNUSED_KINDS:
                continue  # Kafka's producer snapshots and transaction indexes: pylogq keeps none
            elif suffix == SWAP_SUFFIX:
                if kind == LOG_SUFFIX:
                    swaps.append(name)
                else:
                    os.unlink(path)  # the indexes of a swap are rebuilt
            elif kind == LOG_SUFFIX:
                bases.append(int(m.group("base")))
            else:
                indexes.append((int(m.group("base")), path))
        for base, path in indexes:
            if base not in bases:
                os.unlink(path)  # an index without its log
        return {b: LogSegment.open(self.directory, b, self.config) for b in bases}, swaps

    def _check_segments(self, ordered: Sequence[LogSegment], clean_shutdown: bool) -> List[LogSegment]:
        """Load or recover each segment; -> the segments kept (those after a truncated one are deleted).

        After a crash, every segment that may hold unflushed data is checked batch
        by batch; after a clean shutdown only the indexes' sanity is checked, and
        the last segment's tail against its index (one cheap check that catches a
        ``.log`` cut or damaged after the shutdown).
        """
        kept: List[LogSegment] = []
        for i, segment in enumerate(ordered):
            unflushed = not clean_shutdown and self._after_recovery_point(i, ordered)
            if not unflushed and self._index_sane(segment, full=True) and (
                    i + 1 < len(ordered) or self._tail_agrees(segment)):
                segment.load_state()
                kept.append(segment)
                continue
            truncated = segment.recover(self.config.max_message_bytes)
            kept.append(segment)
            if truncated:
                self.recovered_bytes += truncated
                log.warning("%s: recovery truncated %d invalid bytes from segment %d",
                            self.directory, truncated, segment.base_offset)
                for later in ordered[i + 1 :]:
                    log.warning("%s: deleting segment %d after a truncated one", self.directory, later.base_offset)
                    later.delete()
                break
        return kept

    @staticmethod
    def _segments_end(segments: Sequence[LogSegment]) -> int:
        """The log end offset of loaded segments: one past the active segment's last offset."""
        if not segments:
            return 0
        active = segments[-1]
        return max(active.next_offset if active.size else active.base_offset, active.base_offset)

    def _after_recovery_point(self, i: int, ordered: Sequence[LogSegment]) -> bool:
        """Whether segment ``i`` may hold unflushed data: its range reaches the recovery point."""
        next_base = ordered[i + 1].base_offset if i + 1 < len(ordered) else None
        return next_base is None or next_base > self.recovery_point

    def _index_sane(self, segment: LogSegment, full: bool) -> bool:
        """Whether a segment's indexes can be trusted; ``full`` checks every entry (after a
        crash an index may still hold its preallocated, zero-filled tail)."""
        try:
            segment.offset_index.sanity_check(full=full)
            segment.time_index.sanity_check(full=full)
        except CorruptRecordError as exc:
            log.warning("%s: rebuilding the indexes of segment %d: %s", self.directory, segment.base_offset, exc)
            return False
        if not segment.indexes_existed:
            log.warning("%s: rebuilding the missing indexes of segment %d", self.directory, segment.base_offset)
            return False
        if segment.offset_index.entries == 0 and segment.size > 2 * self.config.index_interval_bytes:
            return False  # an emptied index on a segment that must have entries
        return True

    def _tail_agrees(self, segment: LogSegment) -> bool:
        """Whether a segment's ``.log`` ends where its indexes say: the last offset index entry
        points at a whole batch inside the file, the batches from there are whole up to the
        end of the file, the last one passes its CRC, and neither index points past it.

        Reads the few batch headers after the last index entry and the last batch, as
        loading does anyway. A ``.log`` cut or overwritten after a clean shutdown fails it.
        """
        problem = self._tail_problem(segment)
        if problem is not None:
            log.warning("%s: recovering segment %d: %s", self.directory, segment.base_offset, problem)
        return problem is None

    @staticmethod
    def _tail_problem(segment: LogSegment) -> Optional[str]:
        """What :meth:`_tail_agrees` finds wrong, in words; None when nothing is."""
        reader = segment.reader()
        index_offset, position = segment.offset_index.last_entry
        indexed = segment.offset_index.entries > 0
        if indexed:
            header = reader.header_at(position)
            if header is None or index_offset < header.base_offset:
                return ("the last offset index entry (offset %d at byte %d) points at no whole batch holding it "
                        "in the %d-byte .log file" % (index_offset, position, segment.size))
        walk = reader.headers(position)
        last: Optional[BatchHeader] = None
        for last in walk:
            pass
        stop = walk.stop
        if stop is not None and stop.reason != END:
            return stop.detail
        if last is not None:
            check = reader.batches(last.position, check_crc=True)
            for _ in check:
                pass
            if check.stop is not None and check.stop.reason != END:
                return "its last batch: %s" % check.stop.detail
        last_offset = last.last_offset if last is not None else segment.base_offset - 1
        if indexed and index_offset > last_offset:
            return "the last offset index entry (offset %d) is past the last batch (offset %d)" % (
                index_offset, last_offset)
        ts, ts_offset = segment.time_index.last_entry
        if segment.time_index.entries and ts_offset > last_offset:
            return "the last time index entry points at offset %d, past the last offset %d" % (ts_offset, last_offset)
        return None

    def _complete_swap(self, swap_name: str, segments: Dict[int, LogSegment]) -> None:
        """Put a ``.log.swap`` segment in place of the segments it covers, once it is shown
        to be compaction output for them; otherwise remove it and keep them."""
        base = offset_from_filename(swap_name)
        swap = LogSegment.open(self.directory, base, self.config, suffix=SWAP_SUFFIX)
        problem = self._swap_problem(swap, segments)
        if problem is not None:
            log.warning("%s: removing %s, an interrupted compaction swap that cannot replace anything: %s; "
                        "the live segments are kept", self.directory, swap_name, problem)
            swap.delete()
            return
        end = swap.next_offset
        for old_base in [b for b in segments if base <= b < end]:
            segments.pop(old_base).delete()
        swap.change_suffix(SWAP_SUFFIX, "")
        segments[base] = swap
        log.info("%s: completed an interrupted compaction swap of segment %d", self.directory, base)

    def _swap_problem(self, swap: LogSegment, segments: Mapping[int, LogSegment]) -> Optional[str]:
        """Why a ``.swap`` segment must not replace anything, or None.

        Compaction output is whole batches that pass their CRCs, with offsets from
        the segments it replaces: it starts after the segment before them ends,
        ends within the last of them still there, and never reaches the last
        segment (compaction never touches the active one). Recovers ``swap``
        (rebuilding its indexes) as it checks it.
        """
        base = swap.base_offset
        truncated = swap.recover(self.config.max_message_bytes)
        if truncated:
            return "%d of its %d bytes are not whole, valid batches" % (truncated, truncated + swap.size)
        if swap.size == 0:
            return "it holds no batch"
        end = swap.next_offset
        before = [b for b in segments if b < base]
        replaced = sorted(b for b in segments if base <= b < end)
        if not any(b >= end for b in segments):
            return "its offsets %d..%d reach the last segment" % (base, end - 1)
        if before:
            previous_end = _end_of(segments[max(before)])
            if previous_end > base:
                return "it starts at offset %d, inside segment %d (which ends at %d)" % (
                    base, max(before), previous_end - 1)
        if replaced:
            last_end = _end_of(segments[replaced[-1]])
            if end > last_end:
                return "its last offset %d is past the last offset %d of the segments it would replace" % (
                    end - 1, last_end - 1)
        return None

    def _publish(self, segments: Tuple[LogSegment, ...]) -> None:
        # One assignment of a tuple pair: a reader sees the old or the new list, whole.
        self._view = (tuple(s.base_offset for s in segments), segments)
        self._bases, self._segments = self._view

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
                raise ValueError("leader epoch %d cannot start at offset %d, past the log end offset %d of %s-%d"
                                 % (leader_epoch, start_offset, self._end.offset, self.topic, self.partition))
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
        """Kafka's appendAsFollower rule: each v2 batch's own epoch starts at its base offset (a
        batch without one adds nothing); a legacy batch carries none, so a cache that would not
        describe it is cleared (Kafka reverts to truncating by the high watermark then). One
        checkpoint write at most, and none when every batch is in the latest epoch."""
        latest = self._epochs.latest_entry
        updates: List[Tuple[int, int]] = []
        clear = False
        legacy = -1
        for h in headers:
            if h.magic < 2:
                if updates or (latest is not None and not clear):
                    clear, updates, legacy = True, [], h.magic
                continue
            epoch = _LEADER_EPOCH.unpack_from(buffer, h.position + PARTITION_LEADER_EPOCH_OFFSET)[0]
            if epoch >= 0 and (updates or clear or latest is None or epoch != latest.epoch
                               or h.base_offset < latest.start_offset):
                updates.append((epoch, h.base_offset))
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

        The partition's idempotence checks come in as two callables (the log
        knows no producers): ``check_producers`` sees the validated batches
        before anything is checked against the log's settings and may answer
        that they are a retry (the original first offset, last offset and
        timestamp): nothing is written and the result says ``duplicate``.
        ``producers_appended`` sees the batches as written (their offsets, the
        log append time) once they are in the segment.

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
        _check_batch_sizes(buffer, self.config.max_message_bytes)
        if is_legacy(buffer):
            buffer = up_convert(buffer)
        batches, record_count, keyless = records.validate_batches(buffer, self.config.compact)
        if not allow_control:
            _refuse_control(batches)
        with self._lock:
            self._check_open()
            now = self._now_ms()
            lat = now if self.config.log_append_time else None
            if check_producers is not None:
                duplicate = check_producers(batches)
                if duplicate is not None:
                    first, last, timestamp = duplicate
                    return AppendResult(0, first, timestamp if lat is not None else -1, self.log_start_offset,
                                        last - first + 1, last, 1, timestamp, last, True)
            first_offset = self._end.offset
            self._check_sizes(batches, len(buffer), first_offset)
            self._check_records(buffer, batches, keyless, None if lat is not None else now)
            if leader_epoch != self._append_epoch:
                self._epoch_for_append(leader_epoch, first_offset)
            written = records.patch_offsets(buffer, batches, first_offset, leader_epoch, lat)
            max_ts, max_ts_offset = _max_timestamp(written)
            last_offset = written[-1].last_offset
            self._write(buffer, written, last_offset, max_ts)
            if producers_appended is not None:
                producers_appended(written)
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
        headers once written, as with :meth:`append`.
        """
        buffer = bytes(data)  # no copy of the usual bytes; a caller's bytearray may not change under the write
        self._check_open()
        result = records.scan(buffer)
        if result.error is not None or result.valid_bytes != len(buffer):
            raise CorruptRecordError(result.error or "the data ends with a partial batch")
        headers = list(records.iter_batches(buffer))
        with self._lock:
            self._check_open()
            if not headers:
                return AppendResult(0, -1, -1, self.log_start_offset, 0)
            expected = self._end.offset
            for h in headers:
                if h.base_offset < expected:
                    raise CorruptRecordError(
                        "batch at offset %d is below the next offset %d: offsets must increase"
                        % (h.base_offset, expected))
                expected = h.last_offset + 1
            self._check_sizes(headers, len(buffer), None)
            max_ts, max_ts_offset = _max_timestamp(headers)
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
                producers_appended(headers)
            self._flush_if_due_by_messages()
            return AppendResult(0, headers[0].base_offset, -1, self.log_start_offset, -1, headers[-1].last_offset,
                                len(headers), max_ts, max_ts_offset)

    def _check_sizes(self, headers: Sequence[BatchHeader], total: int, first_offset: Optional[int]) -> None:
        limit = self.config.max_message_bytes
        for i, h in enumerate(headers):
            if h.size > limit + 12:
                raise MessageTooLargeError(
                    "batch of %d bytes at offset %d exceeds max.message.bytes=%d"
                    % (h.size, _offset_of(headers, i, first_offset), limit))
        if total > self.config.segment_bytes:
            raise RecordListTooLargeError(
                "append of %d bytes exceeds segment.bytes=%d" % (total, self.config.segment_bytes))

    def _check_records(self, buffer: Union[bytes, bytearray], headers: Sequence[BatchHeader], keyless: int,
                       now: Optional[int]) -> None:
        """Kafka's per-record checks (LogValidator.validateRecord): a key on a compacted topic, a
        CreateTime timestamp within ``message.timestamp.before.max.ms`` / ``after.max.ms`` of ``now``
        (None: the topic stamps LogAppendTime, nothing to check).

        Raises for the first batch with a bad record, listing every bad record of it with Kafka's
        message (its place in the batch, which Produce v8+ names, KIP-467): InvalidTimestampError
        when a timestamp is among them, else InvalidRecordError. The validation pass found the
        first keyless record (``keyless``, an offset delta from the first batch, -1 for none);
        the batches from its are read again for the others, so an append of keyed records on a
        compacted topic reads its records once. Timestamps are read only when a limit is set.
        """
        before, after = self._timestamp_limits()
        times = now is not None and (before < _LONG_MAX or after < _LONG_MAX)
        if keyless < 0 and not times:
            return
        assert now is not None or not times
        at = 0
        for h in headers:
            count = h.last_offset - h.base_offset + 1
            keys = 0 <= keyless < at + count
            at += count
            check_times = times and not h.attributes & records.TIMESTAMP_TYPE_MASK
            if h.attributes & records.CONTROL_MASK or not (keys or check_times):
                continue
            bad: Dict[int, str] = {}
            if keys:
                message = "Compacted topic cannot accept message without key in topic partition %s-%d." % (
                    self.topic, self.partition)
                for i, record in enumerate(records.RecordBatch(buffer, h.position, check_crc=False)):
                    if record.key is None:
                        bad[i] = message
            timestamps = False
            if check_times:
                assert now is not None
                for i, (offset, timestamp) in enumerate(iter_record_times(buffer, h.position)):
                    if i in bad or timestamp == NO_TIMESTAMP:
                        continue
                    if timestamp - now > after or now - timestamp > before:
                        bad[i] = ("Timestamp %d of message with offset %d is out of range. The timestamp should be "
                                  "within [%d, %d]" % (timestamp, offset, now - before, now + after))
                        timestamps = True
            if bad:
                raise _rejected(sorted(bad.items()), timestamps)

    def _timestamp_limits(self) -> Tuple[int, int]:
        """(before, after) in ms: ``message.timestamp.before.max.ms`` and ``after.max.ms``, each
        ``message.timestamp.difference.max.ms`` while unset (Long.MAX_VALUE), as Kafka reads them."""
        config = self.config
        difference = config.message_timestamp_difference_max_ms
        before = config.message_timestamp_before_max_ms
        after = config.message_timestamp_after_max_ms
        return (before if before != _LONG_MAX else difference, after if after != _LONG_MAX else difference)

    def _write(self, buffer: Union[bytes, bytearray], headers: List[BatchHeader], last_offset: int, max_timestamp: int) -> None:
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
        """The KafkaStorageError (56) for a failed write; logged once until a write succeeds again."""
        if not self._write_failed:
            self._write_failed = True
            log.error("%s: could not %s: %s; appends to this partition fail with KAFKA_STORAGE_ERROR "
                      "until a write succeeds (free space on the disk)", self.directory, what, exc)
        return KafkaStorageError("%s-%d: could not %s: %s" % (self.topic, self.partition, what,
                                                              exc.strerror or exc))

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
            self.scheduler.schedule(lambda: self.flush(base_offset), name="flush-on-roll")
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
                        limit = self._position_of(segment, max_offset, max_position)
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

    @staticmethod
    def _position_of(segment: LogSegment, offset: int, max_position: Optional[int]) -> int:
        """The file position where batches at or after ``offset`` start in ``segment``."""
        header = segment.translate_offset(offset)
        if header is None or (max_position is not None and header.position >= max_position):
            return segment.size if max_position is None else max_position
        if header.base_offset < offset:
            return header.position + header.size  # the batch holding offset-1 stays readable
        return header.position

    def offset_for_timestamp(self, timestamp: int) -> Optional[Tuple[int, int]]:
        """Kafka's ListOffsets: -> (offset, timestamp) of the first batch with max
        timestamp >= ``timestamp``; -2 gives the log start, -1 the log end; None
        when no batch is that late."""
        if timestamp == EARLIEST_TIMESTAMP:
            return self.log_start_offset, -1
        if timestamp == LATEST_TIMESTAMP:
            return self._end.offset, -1
        start = self.log_start_offset
        for segment in self._view[1]:
            if segment.largest_timestamp < timestamp or segment.next_offset <= start:
                continue
            found = segment.find_offset_by_timestamp(timestamp, start)
            if found is not None:
                ts, offset = found
                return offset, ts
        return None

    def offset_of_max_timestamp(self, below: Optional[int] = None) -> Optional[Tuple[int, int]]:
        """Kafka's ListOffsets by max timestamp (-3): -> (offset, timestamp) of the first
        record holding the log's largest timestamp, or None when no record has one or, as
        Kafka answers, when that record is at or past ``below`` (the high watermark)."""
        start = self.log_start_offset
        best: Optional[Tuple[int, int]] = None
        for segment in self._view[1]:
            if segment.next_offset <= start or segment.max_timestamp_so_far == NO_TIMESTAMP:
                continue
            if best is not None and segment.max_timestamp_so_far <= best[1]:
                continue  # an earlier segment holds a record as late: the first one wins
            found = segment.find_max_timestamp(start)
            if found is not None and (best is None or found[0] > best[1]):
                best = found[1], found[0]
        if best is None or (below is not None and best[0] >= below):
            return None
        return best

    def legacy_offsets_before(self, timestamp: int, max_count: int, now_ms: int,
                              below: Optional[int] = None) -> List[int]:
        """ListOffsets v0's answer (Kafka's fetchOffsetsBefore): the base offsets of the
        segments last modified at or before ``timestamp``, newest first, with the log end
        (``below``, default the log end offset) standing for a non-empty active segment;
        -1 starts from the end, -2 gives the log start; at most ``max_count`` offsets."""
        start = self.log_start_offset
        segments = self._view[1]
        pairs = [(max(s.base_offset, start), s.last_modified_ms) for s in segments]
        end = self._end.offset if below is None else below
        if segments and segments[-1].size > 0:
            pairs.append((end, now_ms))
        if timestamp == LATEST_TIMESTAMP:
            index = len(pairs) - 1
        elif timestamp == EARLIEST_TIMESTAMP:
            index = 0 if pairs else -1
        else:
            index = len(pairs) - 1
            while index >= 0 and pairs[index][1] > timestamp:
                index -= 1
        count = max(0, min(max_count, index + 1))
        return sorted((pairs[index - j][0] for j in range(count)), reverse=True)

    # -- truncation and deletion -------------------------------------------------------

    def truncate_to(self, offset: int) -> bool:
        """Remove every record at ``offset`` or beyond (a follower diverging from its
        leader); -> whether anything was removed."""
        with self._lock:
            self._check_open()
            if offset < 0:
                raise ValueError("cannot truncate to a negative offset %d" % offset)
            if offset >= self._end.offset:
                # As Kafka does: an epoch given its start at the log end by a leader that wrote
                # nothing before it lost the leadership conflicts with what a new leader sends.
                self._trim_epochs("truncate it from offset %d" % self._end.offset,
                                  lambda: self._epochs.truncate_from_end(self._end.offset))
                return False
            if offset < self.log_start_offset:
                self.truncate_fully_and_start_at(offset)
                return True
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
            for s in self._view[1]:
                self._delete_segment(s, asynchronous=False)
            new = LogSegment(self.directory, offset, self.config, created_ms=self._now_ms())
            self._publish((new,))
            self._end = _End(offset, new, 0)
            self.log_start_offset = offset
            self.recovery_point = offset
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
                deleted = self._delete_retention_ms() + self._delete_retention_bytes()
            return deleted + self._delete_segments(
                lambda s, nxt: nxt is not None and nxt <= self.log_start_offset, "log start offset")

    def _delete_retention_ms(self) -> int:
        retention = self.config.retention_ms
        if retention < 0:
            return 0
        now = self._now_ms()
        return self._delete_segments(lambda s, nxt: now - s.largest_timestamp > retention, "retention.ms")

    def _delete_retention_bytes(self) -> int:
        limit = self.config.retention_bytes
        if limit < 0:
            return 0
        excess = [self.size_in_bytes - limit]

        def over(segment: LogSegment, nxt: Optional[int]) -> bool:
            if excess[0] - segment.size >= 0:
                excess[0] -= segment.size
                return True
            return False

        return self._delete_segments(over, "retention.bytes")

    def _delete_segments(self, predicate: Callable[[LogSegment, Optional[int]], bool], reason: str) -> int:
        """Delete the oldest segments while ``predicate`` holds; never the active segment."""
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
            raise ValueError("log %s is closed" % self.directory)

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
