"""Reading a topic to its end with confluent-kafka, in an isolation level: the transaction
tests' check of what read_committed and read_uncommitted consumers see."""

from __future__ import annotations

import time
import uuid
from typing import List, Optional


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
