"""``__consumer_offsets``: the compacted internal topic that holds the group coordinator's state.

The group coordinator does not know the broker: it gets ``append(partition, batch)``
and ``read_batches(partition)`` from :class:`OffsetsTopic`, which writes through the
partition (acks=all: a commit is answered only once it is committed) and reads a
partition back batch by batch in offset order, up to its log end, for the coordinator's
load (with each batch's producer and transaction marker: transactional offset commits
are replayed from them). ``read_all`` gives the same records without their batches, for a
store that needs no more (the transaction coordinator's ``__transaction_state``).
"""

from __future__ import annotations

import logging
from bisect import bisect_right
from typing import Callable, Dict, Iterator, Optional, Tuple

from ....errors import InvalidRecordError
from ....records import CONTROL_MASK, TRANSACTIONAL_MASK, decode_columns, iter_batches
from ....records.control import ABORT, end_txn_marker
from ...state.partition import Partition
from .metadata_manager import StoredBatch

__all__ = ["OFFSETS_TOPIC", "OffsetsTopic"]

OFFSETS_TOPIC = "__consumer_offsets"
_READ_BYTES = 1 << 20

log = logging.getLogger(__name__)


class OffsetsTopic:
    """The coordinator's storage calls over the partitions of ``__consumer_offsets``. Thread-safe."""

    def __init__(self, partition: Callable[[int], Partition]) -> None:
        self._partition = partition

    @staticmethod
    def config(segment_bytes: int) -> Dict[str, object]:
        """The topic's config (Kafka's): compacted, the broker's segment size, batches kept as sent."""
        return {"cleanup.policy": "compact", "segment.bytes": segment_bytes, "compression.type": "producer"}

    def append(self, partition: int, data: bytes) -> None:
        """Append one record batch to a partition of the topic, as the coordinator's own write
        (Kafka's AppendOrigin.COORDINATOR: a transactional offset commit's epoch is checked,
        its sequence is not); acks=all (a cluster's caller waits for the replicas)."""
        self._partition(partition).append(data, required_acks=-1, origin="coordinator")

    def read_all(self, partition: int) -> Iterator[Tuple[Optional[bytes], Optional[bytes]]]:
        """Every (key, value) of a partition's data batches, in offset order, up to its log end
        (see :meth:`read_batches`)."""
        for batch in self.read_batches(partition):
            yield from batch.records

    def read_batches(self, partition: int) -> Iterator[StoredBatch]:
        """Every batch of a partition, in offset order, up to its log end (a new leader's log
        holds everything committed, and what it holds past its high watermark will be
        committed by it: Kafka's coordinator loads to the log end too), with its producer and
        its transaction marker: the loader replays transactional offset commits from them.

        A control record that is no transaction marker ends its producer's transaction
        without committing it, as Kafka's loader reads one."""
        part = self._partition(partition)
        offset = part.log_start_offset
        end = part.log_end_offset
        while offset < end:
            region = part.read_for_follower(offset, _READ_BYTES)
            if len(region) == 0:
                return
            data = region.read()
            # One columnar decode of the region (control records kept, to be stepped over), each
            # batch's records then found by offset: far quicker than a decode per small batch.
            columns = decode_columns(data, start_offset=offset, skip_control=False)
            offsets = columns.offsets.tolist()
            first = 0
            last = -1
            for h in iter_batches(data):
                if h.last_offset < offset:
                    continue
                last = h.last_offset
                after = bisect_right(offsets, last, first)
                rows, first = range(first, after), after
                if h.magic >= 2 and h.attributes & CONTROL_MASK:
                    try:
                        marker = end_txn_marker(data, h.position)
                    except InvalidRecordError as exc:
                        log.warning("__consumer_offsets-%d: %s; read as an abort", partition, exc)
                        yield StoredBatch((), h.producer_id, True, ABORT)
                        continue
                    yield StoredBatch((), h.producer_id, True, -1 if marker is None else marker.control_type)
                    continue
                yield StoredBatch([(columns.key(i), columns.value(i)) for i in rows], h.producer_id,
                                  h.magic >= 2 and bool(h.attributes & TRANSACTIONAL_MASK))
            if last < offset:
                return
            offset = last + 1
