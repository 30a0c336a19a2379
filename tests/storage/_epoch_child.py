"""A writer process for the leader epoch crash test: appends, changes epochs and truncates until killed.

Run as ``python _epoch_child.py <log dir> <seed>``. It prints ``ready``, waits
for a line on stdin, opens the log dir with a
:class:`~pylogq.storage.manager.LogManager` (no background threads), prints
``open <log end> <latest epoch or -1>`` and then loops. Each round it prints
``op <n>`` and does one thing: appends in the current epoch, starts a new
epoch (a new leadership: the epoch's start at the log end, then an append in
it), or truncates the tail as a follower would and appends in a new epoch.
Every epoch change writes ``leader-epoch-checkpoint``, so a kill at a random
round lands in checkpoint writes as often as in segment writes.
"""

from __future__ import annotations

import random
import sys
from typing import List

TOPIC = "epochs"
PARTITION = 0
SEGMENT_BYTES = 16 * 1024
MAX_ROUNDS = 100_000  # a child left running by a dead parent stops on its own


def main(argv: List[str]) -> int:
    directory, seed = argv[1], int(argv[2])
    from pylogq import records
    from pylogq.config import LogConfig
    from pylogq.storage.manager import LogManager

    rng = random.Random(seed)
    out = sys.stdout
    out.write("ready\n")
    out.flush()
    if not sys.stdin.readline():
        return 0
    config = LogConfig(segment_bytes=SEGMENT_BYTES)
    manager = LogManager([directory], background=False, topic_config=lambda topic: config)
    log = manager.get_or_create_log(TOPIC, PARTITION, config)
    latest = log.latest_epoch
    out.write("open %d %d\n" % (log.log_end_offset, -1 if latest is None else latest))
    out.flush()
    epoch = (latest if latest is not None else -1) + 1  # this run is a new leadership
    log.assign_epoch_start_offset(epoch, log.log_end_offset)
    for n in range(MAX_ROUNDS):
        out.write("op %d\n" % n)
        out.flush()
        choice = rng.random()
        if choice < 0.25:
            epoch += 1
            log.assign_epoch_start_offset(epoch, log.log_end_offset)
        elif choice < 0.35 and log.log_end_offset > 0:
            end = log.log_end_offset
            log.truncate_to(rng.randrange(max(0, end - 60), end))
            epoch += 1
        count = rng.choice((1, 3, 10))
        values = [b"%d-%d" % (epoch, i) * rng.randrange(1, 20) for i in range(count)]
        log.append(bytes(records.build_batch(values, timestamps=1_700_000_000_000 + n)), epoch)
    manager.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
