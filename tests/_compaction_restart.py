"""A broker's data directory for the tests of compaction after a restart: a compacted topic
without transactions whose older values the cleaner may drop, and a group's committed offset
in ``__consumer_offsets`` followed by a TxnOffsetCommit of the same group and partition whose
transaction is still open when the broker stops (as an application's consume-transform-produce
loop leaves it in a crash). After the restart the cleaner, which starts with the log manager
before the partitions open, must clean both logs and keep the committed offset: once the
transaction aborts, it is the group's offset again."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Dict, List, Tuple

from pylogq import Broker, records
from pylogq.cluster.broker.broker import OFFSETS_TOPIC
from pylogq.cluster.broker.in_process import InProcessTransport
from pylogq.cluster.contract import TxnOffset
from pylogq.storage.checkpoint import CLEANER_CHECKPOINT, OffsetCheckpoint

TS = 1_700_000_000_000
#: The compacted topic: every batch in a segment of its own.
TOPIC = "compacted"
TOPIC_CONFIG = {"cleanup.policy": "compact", "segment.bytes": 100}
GROUP, TRANSACTIONAL_ID = "g", "tx"
COMMITTED, PENDING = 5, 9
#: The broker's settings: one offsets partition, every write to it in a segment of its own.
SETTINGS: Dict[str, object] = {"group.initial.rebalance.delay.ms": 0, "offsets.topic.num.partitions": 1,
                               "offsets.topic.segment.bytes": 200}
#: A restarted broker's cleaner: it looks again soon after finding nothing to clean.
CLEANER: Dict[str, object] = {"log.cleaner.backoff.ms": 20}


def write_history(data_dir: Path) -> Tuple[int, int]:
    """Write the history on a broker whose cleaner is off; -> the transactional producer's id and epoch."""
    with Broker(str(data_dir), log_cleaner_enable=False, **SETTINGS) as broker:
        broker.create_topic(TOPIC, 1, config=TOPIC_CONFIG)
        for i in range(4):
            broker.produce(TOPIC, 0, bytes(records.build_batch([b"v%d" % i], keys=[b"K"], timestamps=TS)))
        transport = InProcessTransport(broker)
        tp = (TOPIC, 0)
        assert transport.commit_offsets(GROUP, -1, "", {tp: (COMMITTED, None)}) == {tp: 0}
        pid, epoch = transport.init_producer_id(TRANSACTIONAL_ID, transaction_timeout_ms=600_000)
        transport.add_offsets_to_txn(TRANSACTIONAL_ID, pid, epoch, GROUP)
        assert transport.txn_offset_commit(TRANSACTIONAL_ID, GROUP, pid, epoch, -1, "", None,
                                           {tp: TxnOffset(PENDING)}) == {tp: 0}
        # Another group's commit: the open transaction's record is no longer in the active segment.
        assert transport.commit_offsets("other", -1, "", {tp: (1, None)}) == {tp: 0}
        assert broker.partition(OFFSETS_TOPIC, 0).last_stable_offset < broker.partition(OFFSETS_TOPIC, 0).high_watermark
        return pid, epoch


def cleaned(data_dir: Path) -> Dict[Tuple[str, int], int]:
    """The first dirty offsets the cleaner checkpointed (one entry per log it cleaned)."""
    path = os.path.join(str(data_dir), CLEANER_CHECKPOINT)
    return OffsetCheckpoint(path).read() if os.path.exists(path) else {}


def wait_until_cleaned(data_dir: Path, timeout_s: float = 30.0) -> Dict[Tuple[str, int], int]:
    """:func:`cleaned` once it holds both logs of the history."""
    deadline = time.monotonic() + timeout_s
    while True:
        found = cleaned(data_dir)
        if (TOPIC, 0) in found and (OFFSETS_TOPIC, 0) in found:
            return found
        assert time.monotonic() < deadline, "the cleaner cleaned only %s" % found
        time.sleep(0.02)


def check_cleaned_history(found: Dict[Tuple[str, int], int]) -> None:
    """The cleaner's first pass after the restart: the compacted topic up to its active segment,
    ``__consumer_offsets`` up to the segment of the open transaction (offset 1), not past it."""
    assert found[(TOPIC, 0)] == 3
    assert found[(OFFSETS_TOPIC, 0)] == 1


def abort_and_check(data_dir: Path, pid: int, epoch: int) -> None:
    """Abort the open transaction, then, once the group's offsets are loaded again from the log,
    find the committed offset; the compacted topic holds its latest values only."""
    with Broker(str(data_dir), log_cleaner_enable=False, **SETTINGS) as broker:
        transport = InProcessTransport(broker)
        transport.end_txn(TRANSACTIONAL_ID, pid, epoch, committed=False)
        offsets = broker.partition(OFFSETS_TOPIC, 0)
        deadline = time.monotonic() + 30
        while offsets.last_stable_offset < offsets.high_watermark:  # until the ABORT marker is written
            assert time.monotonic() < deadline, "the transaction's ABORT marker was not written"
            time.sleep(0.01)
        assert transport.fetch_offsets(GROUP)[(TOPIC, 0)][0] == COMMITTED
    with Broker(str(data_dir), log_cleaner_enable=False, **SETTINGS) as broker:
        assert InProcessTransport(broker).fetch_offsets(GROUP)[(TOPIC, 0)][0] == COMMITTED
        values: List[bytes] = []
        offset, end = 0, broker.partition(TOPIC, 0).high_watermark
        while offset < end:  # a fetch reads within one segment
            got = broker.fetch([(TOPIC, 0, offset, 1 << 20)], max_wait_ms=0)[(TOPIC, 0)]
            batches = _batches(got.records.read())
            assert batches, "nothing at offset %d of %s-0" % (offset, TOPIC)
            values += [r.value for b in batches for r in b.records() if r.offset >= offset]
            offset = batches[-1].last_offset + 1
        assert values == [b"v2", b"v3"], values


def _batches(data: bytes) -> List[records.RecordBatch]:
    return [records.RecordBatch(data, info.position) for info in records.iter_batches(data)]
