"""Opening a partition's log: what :class:`~pylogq.storage.log.Log` does once, at open, before anyone sees it.

Kafka's LogLoader. The directory is tidied of the leftovers of interrupted work,
its segments are opened, compaction swaps interrupted after the point of no
return are completed, the segments that may hold unflushed data (or whose indexes
cannot be trusted) are recovered batch by batch, the transaction indexes of those
recovered are written again, and the leader epoch cache is loaded and cut to what
recovery kept. The result, :class:`LoadedLog`, is what the log starts from.

A transaction index entry needs the state of every producer's transaction when
its ABORT marker was written, which the recovered segment alone does not hold.
pylogq keeps no producer snapshots, so the loader replays the transactions of
the log from its first segment up to the last recovered segment that holds a
marker (:meth:`LogLoader._rebuild_txn_indexes`), as the appends did, and writes
the entries of the recovered segments; a log whose recovered segments hold no
marker is not read again.
"""

from __future__ import annotations

import logging
import os
import re
from typing import Dict, List, Mapping, NamedTuple, Optional, Sequence, Tuple

from ..errors import CorruptRecordError, InvalidRecordError
from ..records import CONTROL_MASK, TRANSACTIONAL_MASK, BatchHeader
from ..records.control import end_txn_marker
from .checkpoint import LEADER_EPOCH_CHECKPOINT
from ..config import LogConfig
from .leader_epoch import LeaderEpochFileCache
from .log_epochs import batch_epochs
from .segment import (
    CLEANED_SUFFIX,
    DELETED_SUFFIX,
    END,
    LOG_SUFFIX,
    SWAP_SUFFIX,
    LogSegment,
    offset_from_filename,
)
from .transaction_index import AbortedTxn
from .unstable_txns import UnstableTxns

__all__ = ["LoadedLog", "LogLoader"]

log = logging.getLogger("pylogq.storage")

# The files of a segment: the base offset in 20 digits, the kind, a suffix while in transit.
_SEGMENT_FILE = re.compile(
    r"^(?P<base>\d{20})(?P<kind>\.log|\.index|\.timeindex|\.snapshot|\.txnindex)"
    r"(?P<suffix>\.deleted|\.cleaned|\.swap)?$")
# Kafka's producer snapshots: a partition directory copied from Kafka has them; pylogq
# neither reads nor removes them (it replays the log instead).
_UNUSED_KINDS = (".snapshot",)
# The other files a partition directory holds (the second one Kafka's).
_KNOWN_FILES = frozenset([LEADER_EPOCH_CHECKPOINT, "partition.metadata"])
_TMP_SUFFIX = ".tmp"


def _end_of(segment: LogSegment) -> int:
    """One past the last offset of the whole batches at the start of a segment not loaded yet
    (its base offset when it has none): every header is read, none of the indexes."""
    end = segment.base_offset
    for header in segment.reader().headers():
        end = max(end, header.last_offset + 1)
    return end


def segments_end(segments: Sequence[LogSegment]) -> int:
    """The log end offset of loaded segments: one past the active segment's last offset."""
    if not segments:
        return 0
    active = segments[-1]
    return max(active.next_offset if active.size else active.base_offset, active.base_offset)


class LoadedLog(NamedTuple):
    """What a log starts from: its segments (at least one, the active last), its offsets, the
    bytes recovery truncated and its leader epoch cache, cut to the segments."""

    segments: Tuple[LogSegment, ...]
    end_offset: int
    log_start_offset: int
    recovery_point: int
    recovered_bytes: int
    epochs: LeaderEpochFileCache


class LogLoader:
    """Loads one partition directory, once (:meth:`load`). Not thread-safe: it runs while the log
    is being opened, before any other thread can reach it."""

    def __init__(self, directory: str, config: LogConfig, *, recovery_point: int, clean_shutdown: bool,
                 log_start_offset: Optional[int]) -> None:
        self.directory = directory
        self.config = config
        self.recovery_point = recovery_point
        self.clean_shutdown = clean_shutdown
        self.log_start_offset = log_start_offset
        self.recovered_bytes = 0  # bytes truncated by recovery
        self._recovered: Dict[int, LogSegment] = {}  # id -> the segments recovered (their txn indexes emptied)

    def load(self) -> LoadedLog:
        """Tidy, open and check the directory's segments (a new empty one when none is kept)."""
        clean_shutdown, log_start_offset = self.clean_shutdown, self.log_start_offset
        segments, swaps = self._open_segments()
        # A .swap file is compaction output whose swap was interrupted after the point of
        # no return: it replaces the segments it covers, once it is shown to be whole.
        for name in swaps:
            self._complete_swap(name, segments)
        ordered = [segments[b] for b in sorted(segments)]
        kept = self._check_segments(ordered, clean_shutdown)
        end = segments_end(kept)
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
        self._rebuild_txn_indexes(kept)
        loaded = tuple(kept)
        end_offset = segments_end(kept)
        first = kept[0].base_offset
        if log_start_offset is not None and log_start_offset > end_offset:
            # Kafka deletes every segment here and starts the log at the checkpoint; a
            # checkpoint that contradicts the files must not hide or delete what they hold.
            log.warning("%s: the log start offset %d (log-start-offset-checkpoint) is past the log end %d; "
                        "ignored: the log starts at %d", self.directory, log_start_offset, end_offset, first)
            log_start_offset = None
        start_offset = max(first, log_start_offset or 0)
        recovery_point = end_offset if clean_shutdown else min(max(self.recovery_point, 0), end_offset)
        epochs = LeaderEpochFileCache(os.path.join(self.directory, LEADER_EPOCH_CHECKPOINT),
                                      lambda: batch_epochs(loaded))
        # An epoch's start is written before its records, so a crash (or recovery cutting a torn
        # tail) can leave entries past the end; retention that ran after the cache's last write
        # leaves entries below the start. Neither describes a record of this log.
        epochs.truncate_from_end(end_offset)
        epochs.truncate_from_start(start_offset)
        return LoadedLog(loaded, end_offset, start_offset, recovery_point, self.recovered_bytes, epochs)

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
                continue  # Kafka's producer snapshots: pylogq keeps none
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
        ``.log`` cut or damaged after the shutdown). A transaction index that
        cannot be trusted has its segment recovered too.
        """
        kept: List[LogSegment] = []
        for i, segment in enumerate(ordered):
            unflushed = not clean_shutdown and self._after_recovery_point(i, ordered)
            if not unflushed and self._index_sane(segment, full=True) and (
                    i + 1 < len(ordered) or self._tail_agrees(segment)):
                segment.load_state()
                if self._txn_index_sane(segment):
                    kept.append(segment)
                    continue
            truncated = segment.recover(self.config.max_message_bytes)
            self._recovered[id(segment)] = segment
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

    def _txn_index_sane(self, segment: LogSegment) -> bool:
        """Whether a loaded segment's transaction index can be trusted: whole, sound entries,
        none past the segment's last offset (:meth:`TransactionIndex.sanity_check`)."""
        try:
            segment.txn_index.sanity_check(segment.next_offset)
        except CorruptRecordError as exc:
            log.warning("%s: recovering segment %d to rebuild its transaction index: %s", self.directory,
                        segment.base_offset, exc)
            return False
        return True

    def _rebuild_txn_indexes(self, kept: Sequence[LogSegment]) -> None:
        """Write again the transaction index entries of the recovered segments that hold markers.

        The transactions are replayed from the first segment's first batch, as the
        appends saw them (:class:`UnstableTxns`): a producer's transactional batch
        opens its transaction, its marker ends it, and an ABORT's entry takes the
        last stable offset of that moment. Only the recovered segments' indexes are
        written; a marker that does not decode is warned about and marks nothing.
        """
        rebuilt = [i for i, s in enumerate(kept) if id(s) in self._recovered and s.recovered_txn_markers]
        if not rebuilt:
            return
        targets = set(id(kept[i]) for i in rebuilt)
        txns = UnstableTxns()
        written = 0
        for segment in kept[: rebuilt[-1] + 1]:
            write = id(segment) in targets
            for batch in segment.reader().batches():
                header = batch.header
                if header.magic < 2 or header.producer_id < 0:
                    continue
                if header.attributes & CONTROL_MASK:
                    try:
                        marker = end_txn_marker(batch.data)
                    except (CorruptRecordError, InvalidRecordError) as exc:
                        log.warning("%s: the control batch at offset %d of segment %d is no transaction marker: %s",
                                    self.directory, header.base_offset, segment.base_offset, exc)
                        continue
                    if marker is None:
                        continue
                    completed = txns.end(header.producer_id, header.base_offset, marker.is_abort)
                    if completed is None:
                        continue
                    if completed.is_aborted and write:
                        segment.txn_index.append(AbortedTxn(completed.producer_id, completed.first_offset,
                                                            completed.last_offset, txns.last_stable_offset(completed)))
                        written += 1
                    txns.complete(completed, completed.last_offset + 1)
                elif header.attributes & TRANSACTIONAL_MASK:
                    txns.begin(header.producer_id, header.base_offset)
        log.info("%s: rebuilt the transaction indexes of %d recovered segment(s): %d aborted transaction(s)",
                 self.directory, len(rebuilt), written)

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
        self._recovered[id(swap)] = swap  # its indexes, the transaction index too, are rebuilt
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
