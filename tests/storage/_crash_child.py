"""A writer process for the crash tests: appends to a log until it is killed.

Run as ``python _crash_child.py <log dir> <seed>``. It imports everything,
prints ``ready`` and waits for a line on stdin (so the parent can start the
next child while it checks the last one's log), then opens the log dir with a
:class:`~pylogq.storage.manager.LogManager` (no background threads), prints
``open <log start> <log end>`` and appends batches in a loop. Before each
append it prints ``append <first offset> <bytes>`` (so the parent can aim a
kill at the append itself); after the append returns it prints
``ack <first> <last>``. Every line is flushed at once: every offset on an
``ack`` line was acknowledged and must survive a SIGKILL.

Record contents are a pure function of the offset (:func:`value_for`,
:func:`key_for`), so the parent can check every record it reads back without
knowing what the child wrote; batch sizes, codecs and how many batches go in
one append are drawn from ``seed``.
"""

from __future__ import annotations

import random
import struct
import sys
import zlib
from typing import List, Optional

TOPIC = "crash"
PARTITION = 0
SEGMENT_BYTES = 64 * 1024
CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
MAX_APPENDS = 100_000  # a child left running by a dead parent stops on its own

_VALUE_HEAD = struct.Struct(">qI")  # the record's own offset, the CRC-32 of the payload


def _payload(offset: int) -> bytes:
    rng = random.Random(offset * 2654435761 & 0xFFFFFFFF)
    n = rng.randrange(0, 400)
    if offset % 3 == 0:  # compressible
        return bytes([offset & 0xFF]) * n
    return rng.randbytes(n)


def value_for(offset: int) -> Optional[bytes]:
    """The value written at ``offset``: the offset, a CRC of the payload, the payload; None for every 97th."""
    if offset % 97 == 13:
        return None
    payload = _payload(offset)
    return _VALUE_HEAD.pack(offset, zlib.crc32(payload)) + payload


def key_for(offset: int) -> Optional[bytes]:
    """The key written at ``offset`` (None for one offset in five)."""
    if offset % 5 == 0:
        return None
    return b"key-%d" % (offset % 50)


def check_value(offset: int, value: Optional[bytes]) -> None:
    """Raise AssertionError unless ``value`` is what the child writes at ``offset``."""
    expected = value_for(offset)
    if value == expected:
        return
    if value is None or expected is None or len(value) < _VALUE_HEAD.size:
        raise AssertionError("offset %d: value %r, expected %r" % (offset, value, expected))
    own, crc = _VALUE_HEAD.unpack_from(value)
    payload = value[_VALUE_HEAD.size:]
    raise AssertionError(
        "offset %d: value names offset %d, payload CRC %s, %d bytes (expected %d)"
        % (offset, own, "ok" if zlib.crc32(payload) == crc else "BAD", len(value), len(expected)))


def build_batches(records_mod, rng: random.Random, first_offset: int) -> List[bytes]:
    """One to three batches for the offsets from ``first_offset``, as a producer would send them."""
    out = []
    offset = first_offset
    for _ in range(rng.choice((1, 1, 1, 2, 3))):
        count = rng.choice((1, 2, 5, 10, 20, 40))  # at most ~50 KB an append: below segment.bytes
        offsets = range(offset, offset + count)
        out.append(bytes(records_mod.build_batch(
            [value_for(o) for o in offsets],
            keys=[key_for(o) for o in offsets],
            timestamps=[1_700_000_000_000 + o for o in offsets],
            compression_type=rng.choice(CODECS),
        )))
        offset += count
    return out


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
    config = LogConfig(segment_bytes=SEGMENT_BYTES, flush_messages=rng.choice((1, 1, 1, 50, 2**62)))
    # The manager loads the log left by the last child at start: with the topic's config, so
    # every reopen (not only the first open) runs with this flush policy and segment size.
    manager = LogManager([directory], background=False, topic_config=lambda topic: config)
    log = manager.get_or_create_log(TOPIC, PARTITION, config)
    if log.config is not config:
        out.write("error log opened with %r, expected %r\n" % (log.config, config))
        out.flush()
        return 1
    out.write("open %d %d\n" % (log.log_start_offset, log.log_end_offset))
    out.flush()
    for _ in range(MAX_APPENDS):
        expected = log.log_end_offset
        data = b"".join(build_batches(records, rng, expected))
        out.write("append %d %d\n" % (expected, len(data)))
        out.flush()
        info = log.append(data)
        if info.first_offset != expected:
            out.write("error first offset %d, expected %d\n" % (info.first_offset, expected))
            out.flush()
            return 1
        out.write("ack %d %d\n" % (info.first_offset, info.last_offset))
        out.flush()
        if rng.random() < 0.05:
            manager.checkpoint()  # a recovery-point checkpoint mid-run, as the manager writes periodically
    manager.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
