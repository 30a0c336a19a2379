"""Helpers shared by the real-client tests: names, deadlines and the records they send.

Every test sends records built here, with keys, values, headers and timestamps all
distinct, and compares what a client reads back with ``Sent`` tuples, so "exactly
the records sent" means every field, in offset order.
"""

from __future__ import annotations

import struct
import time
import uuid
from pathlib import Path
from typing import Any, Callable, Dict, List, NamedTuple, Optional, Sequence, Tuple

from pylogq.records import iter_batches
from pylogq.records.default_records import ATTRIBUTES_OFFSET, PRODUCER_ID_OFFSET

# group.min.session.timeout.ms is 6000 by default: the shortest session a client may ask for.
SESSION_TIMEOUT_MS = 6000
HEARTBEAT_MS = 200
# CreateTime of the first record a test sends; later ones are a second apart.
BASE_TIMESTAMP = 1_700_000_000_000
CODECS = ("none", "gzip", "snappy", "lz4", "zstd")  # in the order of their ids in batch attributes


class Sent(NamedTuple):
    """One record as a client sees it: key, value, headers, CreateTime (ms)."""

    key: Optional[bytes]
    value: Optional[bytes]
    headers: Tuple[Tuple[str, bytes], ...]
    timestamp: int


def consumer_settings(bootstrap: str, **config: Any) -> Dict[str, Any]:
    """Keyword arguments for a kafka-python or aiokafka consumer (they share the names):
    read from the start, no auto commit, short waits; group timeouts when ``group_id`` is given."""
    settings: Dict[str, Any] = dict(bootstrap_servers=bootstrap, auto_offset_reset="earliest",
                                    enable_auto_commit=False, fetch_max_wait_ms=100, request_timeout_ms=10000)
    if config.get("group_id"):
        settings.update(session_timeout_ms=SESSION_TIMEOUT_MS, heartbeat_interval_ms=HEARTBEAT_MS,
                        max_poll_interval_ms=10000)
    settings.update(config)
    return settings


def unique(prefix: str) -> str:
    """A topic or group name no other test uses (the subprocess broker is shared)."""
    return "%s-%s" % (prefix, uuid.uuid4().hex[:10])


def records(count: int, tag: str = "r", start: int = 0) -> List[Sent]:
    """``count`` records tagged ``tag``: the first has a null key, every third no headers;
    values partly binary."""
    out = []
    for i in range(start, start + count):
        key = None if i == 0 else ("%s-key-%d" % (tag, i)).encode()
        headers: Tuple[Tuple[str, bytes], ...] = () if i % 3 == 2 else (
            ("trace", ("%s-%d" % (tag, i)).encode()), ("n", b"%d" % i))
        # Compressible, so that librdkafka compresses even a batch of one record: it sends
        # a batch uncompressed when compression would not make it smaller.
        value = ("%s-value-%d-" % (tag, i)).encode() + b"." * 100 + bytes(range(i % 7 * 10))
        out.append(Sent(key, value, headers, BASE_TIMESTAMP + i * 1000))
    return out


def wait_for(condition: Callable[[], Any], timeout: float = 15.0, what: str = "condition",
             step: Optional[Callable[[], None]] = None) -> Any:
    """Run ``step`` (one poll of a client, which itself waits for data) and check
    ``condition`` until it is truthy or ``timeout`` passes; -> the condition's value.

    Without ``step`` it re-checks every 10 ms: for state outside this process that
    nothing can wake us for (a broker-side group state, say); the deadline bounds it.
    """
    deadline = time.monotonic() + timeout
    while True:
        if step is not None:
            step()
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError("timed out after %.1f s waiting for %s" % (timeout, what))
        if step is None:
            time.sleep(0.01)


def by_offset(items: Sequence[Tuple[int, Sent]]) -> List[Sent]:
    """Records sorted by offset, checking the offsets have no duplicates."""
    offsets = [o for o, _ in items]
    assert len(set(offsets)) == len(offsets), "duplicate offsets %s" % offsets
    return [r for _, r in sorted(items, key=lambda item: item[0])]


_ATTRIBUTES = struct.Struct(">h")
_PRODUCER_ID = struct.Struct(">q")


class StoredBatch(NamedTuple):
    """The header of one batch as the broker stored it."""

    base_offset: int
    records_count: int
    codec: str
    producer_id: int


def stored_batches(data_dir: Path, topic: str, partition: int) -> List[StoredBatch]:
    """Every batch in a partition's segment files, to check what a client really sent
    (the broker keeps batches as they arrive, compressed or not)."""
    out = []
    for segment in sorted((data_dir / ("%s-%d" % (topic, partition))).glob("*.log")):
        data = segment.read_bytes()
        for info in iter_batches(data):
            assert info.magic == 2, "magic v%d batch at %s:%d" % (info.magic, segment, info.position)
            (attributes,) = _ATTRIBUTES.unpack_from(data, info.position + ATTRIBUTES_OFFSET)
            (producer_id,) = _PRODUCER_ID.unpack_from(data, info.position + PRODUCER_ID_OFFSET)
            out.append(StoredBatch(info.base_offset, info.records_count, CODECS[attributes & 7], producer_id))
    return out
