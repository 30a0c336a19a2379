"""Finding offsets in a snapshot of a log's segments: ListOffsets' answers and a read's stop.

Kafka's UnifiedLog.fetchOffsetByTimestamp and fetchOffsetsBefore, over the
segments :class:`~pylogq.storage.log.Log` publishes, with the special timestamps
ListOffsets takes. Functions of the segments and offsets they are given: the log
reads its published snapshot (lock-free) and passes it in, so they see one
snapshot whatever changes meanwhile.
"""

from __future__ import annotations

from typing import Callable, List, Optional, Sequence, Tuple

from .segment import NO_TIMESTAMP, LogSegment

__all__ = ["EARLIEST_LOCAL_TIMESTAMP", "EARLIEST_TIMESTAMP", "LATEST_TIERED_TIMESTAMP", "LATEST_TIMESTAMP",
           "MAX_TIMESTAMP", "legacy_offsets_before", "offset_after_timestamp", "offset_of_max_timestamp",
           "position_of"]

LATEST_TIMESTAMP = -1
EARLIEST_TIMESTAMP = -2
MAX_TIMESTAMP = -3  # the record with the largest timestamp (KIP-734)
EARLIEST_LOCAL_TIMESTAMP = -4  # the local log's start (KIP-405): the log start without tiered storage
LATEST_TIERED_TIMESTAMP = -5  # the last offset in tiered storage (KIP-1005): none here


def position_of(segment: LogSegment, offset: int, max_position: Optional[int]) -> int:
    """The file position where batches at or after ``offset`` start in ``segment``."""
    header = segment.translate_offset(offset)
    if header is None or (max_position is not None and header.position >= max_position):
        return segment.size if max_position is None else max_position
    if header.base_offset < offset:
        return header.position + header.size  # the batch holding offset-1 stays readable
    return header.position


def offset_after_timestamp(start: int, segments: Sequence[LogSegment], timestamp: int) -> Optional[Tuple[int, int]]:
    """(offset, timestamp) of the first batch at or after ``start`` with max timestamp >= ``timestamp``;
    None when no batch is that late."""
    for segment in segments:
        if segment.largest_timestamp < timestamp or segment.next_offset <= start:
            continue
        found = segment.find_offset_by_timestamp(timestamp, start)
        if found is not None:
            ts, offset = found
            return offset, ts
    return None


def offset_of_max_timestamp(start: int, segments: Sequence[LogSegment],
                            below: Optional[int]) -> Optional[Tuple[int, int]]:
    """(offset, timestamp) of the first record at or after ``start`` holding the largest timestamp;
    None when no record has one or that record is at or past ``below``."""
    best: Optional[Tuple[int, int]] = None
    for segment in segments:
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


def legacy_offsets_before(start: int, segments: Sequence[LogSegment], end_offset: Callable[[], int], timestamp: int,
                          max_count: int, now_ms: int) -> List[int]:
    """ListOffsets v0's answer (see :meth:`~pylogq.storage.log.Log.legacy_offsets_before`), the offset
    ``end_offset`` gives (asked once the segments are read) standing for a non-empty active segment."""
    pairs = [(max(s.base_offset, start), s.last_modified_ms) for s in segments]
    end = end_offset()
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
