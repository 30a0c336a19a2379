"""The leader epochs a log's batches carry, read for its leader epoch cache.

Each v2 batch holds the epoch of the leader that wrote it (the partition leader
epoch field at byte 12); legacy batches hold none. :class:`~pylogq.storage.log.Log`
keeps its cache (:mod:`pylogq.storage.leader_epoch`) in step with the offsets;
this module reads the batches for it: every batch of the log when a checkpoint
must be rebuilt at open, and a follower's batches, by Kafka's appendAsFollower
rule, before they are appended. Functions of what they are given, no state.
"""

from __future__ import annotations

import struct
from typing import Iterator, List, Optional, Sequence, Tuple, Union

from ..records import BatchHeader
from ..records.default_records import PARTITION_LEADER_EPOCH_OFFSET
from .leader_epoch import EpochEntry
from .segment import LogSegment

__all__ = ["batch_epochs", "follower_epochs"]

_LEADER_EPOCH = struct.Struct(">i")  # at byte 12 of a v2 batch: the epoch of the leader that wrote it


def batch_epochs(segments: Sequence[LogSegment]) -> Iterator[Tuple[int, int]]:
    """(partition leader epoch, base offset) of every v2 batch, in offset order: what a leader
    epoch checkpoint that does not parse is rebuilt from (legacy batches carry no epoch)."""
    for segment in segments:
        reader = segment.reader()
        for header in reader.headers():
            if header.magic >= 2:
                raw = reader.read(header.position + PARTITION_LEADER_EPOCH_OFFSET, _LEADER_EPOCH.size)
                yield _LEADER_EPOCH.unpack(raw)[0], header.base_offset


def follower_epochs(buffer: Union[bytes, bytearray], headers: Sequence[BatchHeader],
                    latest: Optional[EpochEntry]) -> Tuple[List[Tuple[int, int]], bool, int]:
    """Kafka's appendAsFollower rule for a cache whose latest entry is ``latest``: -> (the
    (epoch, start offset) entries to add, whether to clear the cache first, the magic of the
    legacy batch that clears it, -1 for none).

    Each v2 batch's own epoch starts at its base offset (a batch without one adds nothing);
    a legacy batch carries none, so a cache that would not describe it is cleared (Kafka
    reverts to truncating by the high watermark then). Nothing to add when every batch is in
    the latest epoch.
    """
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
    return updates, clear, legacy
