"""``__consumer_offsets``: the compacted internal topic that holds the group coordinator's state.

The group coordinator does not know the broker: it gets ``append(partition, batch)``
and ``read_all(partition)`` from :class:`OffsetsTopic`, which writes through the
partition (acks=all: a commit is answered only once it is committed) and reads a
partition back in offset order, up to its high watermark, for the coordinator's load.
"""

from __future__ import annotations

from typing import Callable, Dict, Iterator, Optional, Tuple

from ....records import decode_columns
from ...state.partition import Partition

__all__ = ["OFFSETS_TOPIC", "OffsetsTopic"]

OFFSETS_TOPIC = "__consumer_offsets"
_READ_BYTES = 1 << 20


class OffsetsTopic:
    """The coordinator's storage calls over the partitions of ``__consumer_offsets``. Thread-safe."""

    def __init__(self, partition: Callable[[int], Partition]) -> None:
        self._partition = partition

    @staticmethod
    def config(segment_bytes: int) -> Dict[str, object]:
        """The topic's config (Kafka's): compacted, the broker's segment size, batches kept as sent."""
        return {"cleanup.policy": "compact", "segment.bytes": segment_bytes, "compression.type": "producer"}

    def append(self, partition: int, data: bytes) -> None:
        """Append one record batch to a partition of the topic, committed when it returns."""
        self._partition(partition).append(data, required_acks=-1)

    def read_all(self, partition: int) -> Iterator[Tuple[Optional[bytes], Optional[bytes]]]:
        """Every (key, value) of a partition, in offset order, up to its log end (a new leader's
        log holds everything committed, and what it holds past its high watermark will be
        committed by it: Kafka's coordinator loads to the log end too)."""
        part = self._partition(partition)
        offset = part.log_start_offset
        end = part.log_end_offset
        while offset < end:
            region = part.read_for_follower(offset, _READ_BYTES)
            if len(region) == 0:
                return
            columns = decode_columns(region.read(), start_offset=offset)
            if len(columns) == 0:
                return
            for i in range(len(columns)):
                yield columns.key(i), columns.value(i)
            offset = int(columns.offsets[-1]) + 1
