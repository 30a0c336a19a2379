"""Retention: which of a log's oldest segments its settings let go.

Kafka's deleteRetentionMsBreachedSegments and deleteRetentionSizeBreachedSegments:
each policy is a predicate over a segment (and the base offset of the one after
it) that :class:`~pylogq.storage.log.Log` applies to its oldest segments, in order,
until it fails; the log never offers its active segment. None when the setting is
off (negative). A predicate is built for one pass, under the log's lock.
"""

from __future__ import annotations

from typing import Callable, List, Optional

from ..config import LogConfig
from .segment import LogSegment

__all__ = ["Breached", "retention_bytes_breached", "retention_ms_breached"]

#: Whether a segment may go: the segment and the base offset of the next one.
Breached = Callable[[LogSegment, Optional[int]], bool]


def retention_ms_breached(config: LogConfig, now_ms: Callable[[], int]) -> Optional[Breached]:
    """``retention.ms``: a segment whose largest timestamp is older than that (``now_ms`` asked once)."""
    retention = config.retention_ms
    if retention < 0:
        return None
    now = now_ms()
    return lambda s, nxt: now - s.largest_timestamp > retention


def retention_bytes_breached(config: LogConfig, size_in_bytes: Callable[[], int]) -> Optional[Breached]:
    """``retention.bytes``: the oldest segments while the log without them is still that large."""
    limit = config.retention_bytes
    if limit < 0:
        return None
    excess: List[int] = [size_in_bytes() - limit]

    def over(segment: LogSegment, nxt: Optional[int]) -> bool:
        if excess[0] - segment.size >= 0:
            excess[0] -= segment.size
            return True
        return False

    return over
