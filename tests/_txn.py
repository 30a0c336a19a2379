"""The transaction tests' shared parts: a transactional producer's batches and markers written
with the partition-level API (as the transaction coordinator writes markers), and reading a
topic to its end with confluent-kafka in an isolation level (what read_committed and
read_uncommitted consumers see)."""

from __future__ import annotations

import time
import uuid
from typing import List, Optional

from pylogq import records
from pylogq.records.control import build_end_txn_marker

#: The records' timestamp.
TS = 1_700_000_000_000


class TxnBatches:
    """One transactional producer's batches (sequences kept), its records named pid-seq, and its
    markers (coordinator epoch 0)."""

    def __init__(self, pid: int) -> None:
        self.pid, self.seq = pid, 0

    def txn(self, n: int = 1) -> bytes:
        data = records.build_batch([b"%d-%d" % (self.pid, self.seq + i) for i in range(n)], timestamps=TS,
                                   producer_id=self.pid, producer_epoch=0, base_sequence=self.seq,
                                   is_transactional=True)
        self.seq += n
        return bytes(data)

    def marker(self, control_type: int) -> bytes:
        return bytes(build_end_txn_marker(self.pid, 0, control_type, 0, TS))


def confluent_values(bootstrap: str, topic: str, partitions: int, isolation: str, timeout_s: float = 30.0,
                     group: Optional[str] = None) -> List[bytes]:
    """Every record value a confluent-kafka consumer with ``isolation`` (read_committed or
    read_uncommitted) reads from the start of each of ``partitions`` to the end it sees, in
    the order read; AssertionError when a partition's end is not reached in ``timeout_s``."""
    from confluent_kafka import Consumer, KafkaError, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group or "read-%s-%s" % (isolation, uuid.uuid4().hex[:6]),
                  "isolation.level": isolation, "enable.partition.eof": True, "enable.auto.commit": False})
    try:
        c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        values: List[bytes] = []
        ends = set()
        deadline = time.monotonic() + timeout_s
        while len(ends) < partitions and time.monotonic() < deadline:
            m = c.poll(0.2)
            if m is None:
                continue
            if m.error():
                if m.error().code() == KafkaError._PARTITION_EOF:
                    ends.add(m.partition())
            else:
                values.append(m.value())
        assert len(ends) == partitions, "the end of %s was not reached within %.0f s" % (topic, timeout_s)
        return values
    finally:
        c.close()
