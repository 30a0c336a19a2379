"""A writer process for the transactional crash test: transactions appended to a partition until it is killed.

Run as ``python _txn_crash_child.py <log dir> <seed>``. It prints ``ready`` and waits for a
line on stdin (so the parent can start the next child while it checks the last one's log),
then opens the log dir with a :class:`~pylogq.storage.manager.LogManager` (no background
threads) and a :class:`~pylogq.cluster.state.partition.Partition` over it (which replays
its producers and transactions), prints ``open <log end>`` and appends in a loop: a
producer's transactional batch, the COMMIT or ABORT marker that ends its transaction
(written as the broker's own, origin "coordinator"), or a plain batch. Before each
append it prints ``append <first offset>``, after it ``ack <first> <last>``, every line
flushed at once. It carries on the producers' sequences and open transactions from what
the partition rebuilt, so each child continues the last one's history.
"""

from __future__ import annotations

import random
import sys
from typing import List

TOPIC = "txn"
PARTITION = 0
SEGMENT_BYTES = 2048
PRODUCERS = (1, 2, 3)
MAX_APPENDS = 100_000  # a child left running by a dead parent stops on its own


def main(argv: List[str]) -> int:
    directory, seed = argv[1], int(argv[2])
    from pylogq import records
    from pylogq.cluster.state.partition import Partition
    from pylogq.config import LogConfig
    from pylogq.records.control import ABORT, COMMIT, build_end_txn_marker
    from pylogq.storage.manager import LogManager

    rng = random.Random(seed)
    out = sys.stdout
    out.write("ready\n")
    out.flush()
    if not sys.stdin.readline():
        return 0
    config = LogConfig(segment_bytes=SEGMENT_BYTES, flush_messages=rng.choice((1, 5, 2**62)))
    manager = LogManager([directory], background=False, topic_config=lambda topic: config)
    log = manager.get_or_create_log(TOPIC, PARTITION, config)
    part = Partition(TOPIC, PARTITION, log)
    out.write("open %d\n" % log.log_end_offset)
    out.flush()
    producers = part.producer_state
    for _ in range(MAX_APPENDS):
        pid = rng.choice(PRODUCERS)
        is_open = producers.txns.first_offset_of(pid) is not None
        epoch = producers.epoch(pid) or 0
        last = producers.last_sequence(pid)
        seq = 0 if last is None else last + 1
        origin = "client"
        roll = rng.random()
        if roll < 0.15:
            data = records.build_batch([b"plain"], timestamps=1_700_000_000_000)
        elif is_open and roll < 0.45:
            data = build_end_txn_marker(pid, epoch, rng.choice((ABORT, ABORT, COMMIT)), 0, 1_700_000_000_000)
            origin = "coordinator"
        else:
            count = rng.choice((1, 2, 5))
            data = records.build_batch([b"%d-%d" % (pid, seq + i) for i in range(count)],
                                       timestamps=1_700_000_000_000, producer_id=pid, producer_epoch=epoch,
                                       base_sequence=seq, is_transactional=True)
        expected = log.log_end_offset
        out.write("append %d\n" % expected)
        out.flush()
        info = part.append(data, origin=origin)
        out.write("ack %d %d\n" % (info.first_offset, info.last_offset))
        out.flush()
        if rng.random() < 0.05:
            manager.checkpoint()  # a recovery-point checkpoint mid-run, as the manager writes periodically
    manager.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
