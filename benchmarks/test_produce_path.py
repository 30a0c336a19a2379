"""The produce path through an in-process broker: ``Broker.produce`` of prebuilt batches, plain and compacted.

What one append costs from the broker's call down to the segment file: the
partition's copy of the request buffer, validation (CRC-32C, framing, every
record's structure), offset assignment, the producer checks, the key check of a
compacted topic (every record has a key), the write and the index entries.
The records carry 16-byte keys on both topics, so the plain and compacted
cases differ only by the key check.

Groups:
- "produce path 1MB plain" / "... compacted": one ~1 MB batch (8,000 records
  of a 16-byte key and a 100-byte value, below max.message.bytes) per round.
- "produce path 1000 small plain" / "... compacted": 1,000 batches of 10 such
  records, each its own ``Broker.produce`` call, per round.
Target: not slower than the previous tree of pylogq anywhere (this file run
against it, alternating); the single pass over the buffer shows most on the
compacted topic (no second decode for the key check).

The reference row of each group (the ratio's) is the bare append built from a
peer's parts: the request buffer copied, checked with aiokafka 0.14's Cython
reader (the CRC, every record parsed, and on the compacted topic every record's
key), its base offset written, and the batch written with ``os.pwrite`` at the
end of one file, recycled like the log (below). It keeps no index, no producer
state and no partition state: the same append done with a peer's checks and a
bare write, not a competing broker.

``pylogq.Broker`` is looked up through the package facade, so the file runs
unchanged against trees where the broker lives in ``pylogq.broker`` or in
``pylogq.cluster.broker.broker``. Batches are built outside the timed region; each
topic's segments are 1 GB, so no round rolls a segment. Between rounds, outside
the timed region, a log past 32 MB is truncated to empty: the page cache then
hands the next appends pages it has used before. Otherwise the writes land on
never-touched memory, which on a virtual machine costs about ten times as much
(2.3 ms instead of 0.15 ms per MB for a bare ``os.pwrite``, varying from run to
run) and would be what the benchmark measured. In a smoke run (``--quick``,
``--benchmark-disable`` or ``PYLOGQ_NO_EXTENSIONS=1``) the rounds are few. Both rows of a group run the same
rounds and warm-up rounds.
"""

from __future__ import annotations

import os
import shutil
import struct
from typing import Any, Dict, Iterator, List

import pytest
from aiokafka.record._crecords.default_records import DefaultRecordBatch as AioBatch
from summary import info, smoke

import pylogq
from pylogq import records

TS = 1_700_000_000_000
KEY = 16
VALUE = 100
BIG_RECORDS = 8000  # ~1.05 MB with record framing: below max.message.bytes (1,048,588)
SMALL_RECORDS = 10
SMALL_BATCHES = 1000
POLICIES = ["plain", "compacted"]


def _full(request: Any) -> bool:
    return not smoke(request.config)


def _big_rounds(request: Any) -> int:
    return 200 if _full(request) else 3


def _small_rounds(request: Any) -> int:
    return 30 if _full(request) else 2


def _batch(n: int, first: int) -> bytes:
    """One uncompressed v2 batch of ``n`` keyed records, as a producer sends it (base offset 0)."""
    keys = [b"key-%012d" % (first + i) for i in range(n)]
    values = [(b"%08d" % (first + i)) * (VALUE // 8) + b"v" * (VALUE % 8) for i in range(n)]
    assert all(len(k) == KEY for k in keys)
    return bytes(records.build_batch(values, keys=keys, timestamps=TS))


@pytest.fixture(scope="module")
def broker(tmp_path_factory: Any) -> Iterator[Any]:
    root = str(tmp_path_factory.mktemp("produce-path"))
    b = pylogq.Broker(root)
    yield b
    b.close()
    shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="module")
def big_batch() -> bytes:
    data = _batch(BIG_RECORDS, 0)
    assert 0.9e6 < len(data) < 1048588
    return data


@pytest.fixture(scope="module")
def small_batches() -> List[bytes]:
    return [_batch(SMALL_RECORDS, i * SMALL_RECORDS) for i in range(SMALL_BATCHES)]


RECYCLE_BYTES = 32 << 20


def _topic(broker: Any, name: str, policy: str) -> str:
    config = {"cleanup.policy": "compact" if policy == "compacted" else "delete", "segment.bytes": str(1 << 30)}
    broker.create_topic(name, 1, 1, config)
    return name


def _recycler(broker: Any, topic: str) -> Any:
    """A pedantic ``setup``: empty the topic's log once it passes RECYCLE_BYTES (see the module docstring)."""
    partition = broker.partition(topic, 0)

    def setup() -> Any:
        if partition.log.size_in_bytes > RECYCLE_BYTES:
            partition.truncate_to(0)
        return (), {}

    return setup


@pytest.mark.parametrize("policy", POLICIES)
def test_produce_1mb_batch(benchmark: Any, request: Any, broker: Any, big_batch: bytes, policy: str) -> None:
    info(benchmark, "produce path 1MB %s" % policy, len(big_batch), "B", target="not slower than before")
    topic = _topic(broker, "big-%s" % policy, policy)
    produce = broker.produce

    def run() -> Any:
        return produce(topic, 0, big_batch, 1)

    rounds = _big_rounds(request)
    result = benchmark.pedantic(run, setup=_recycler(broker, topic), rounds=rounds, iterations=1,
                                warmup_rounds=min(rounds, 10))
    assert result.record_count == BIG_RECORDS and result.base_offset % BIG_RECORDS == 0


@pytest.mark.parametrize("policy", POLICIES)
def test_produce_1000_small_batches(benchmark: Any, request: Any, broker: Any, small_batches: List[bytes],
                                    policy: str) -> None:
    items = SMALL_BATCHES * SMALL_RECORDS
    info(benchmark, "produce path 1000 small %s" % policy, items, "records", target="not slower than before")
    topic = _topic(broker, "small-%s" % policy, policy)
    produce = broker.produce

    def run() -> Any:
        first = last = produce(topic, 0, small_batches[0], 1)
        for batch in small_batches[1:]:
            last = produce(topic, 0, batch, 1)
        return first, last

    rounds = _small_rounds(request)
    first, last = benchmark.pedantic(run, setup=_recycler(broker, topic), rounds=rounds, iterations=1,
                                     warmup_rounds=min(rounds, 2))
    assert last.base_offset - first.base_offset == items - SMALL_RECORDS


# -- the reference: a peer's checks and a bare write ------------------------------------------------

#: The v2 batch header's first fields: base offset, length.
_BASE_OFFSET_LENGTH = struct.Struct(">qi")


class _BareAppend:
    """The reference append: copy, check with aiokafka's reader, assign the base offset, ``os.pwrite``.

    One file, written end to end; emptied once it passes RECYCLE_BYTES, as the
    broker's log is. Not thread-safe.
    """

    def __init__(self, path: str, require_keys: bool) -> None:
        self.fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
        self.require_keys = require_keys
        self.position = 0
        self.next_offset = 0

    def append(self, request: bytes) -> Dict[str, int]:
        buf = bytearray(request)  # the broker's copy of the request buffer
        batch = AioBatch(buf)
        if not batch.validate_crc():
            raise AssertionError("crc")
        records = 0
        for record in batch:  # aiokafka's reader checks each record's framing as it parses it
            if self.require_keys and record.key is None:
                raise AssertionError("a record without a key on a compacted topic")
            records += 1
        base_offset = self.next_offset
        _, length = _BASE_OFFSET_LENGTH.unpack_from(buf, 0)
        _BASE_OFFSET_LENGTH.pack_into(buf, 0, base_offset, length)
        self.position += os.pwrite(self.fd, buf, self.position)
        self.next_offset += records
        return {"base_offset": base_offset, "record_count": records}

    def recycle(self) -> Any:
        """A pedantic ``setup``: empty the file once it passes RECYCLE_BYTES."""
        if self.position > RECYCLE_BYTES:
            os.ftruncate(self.fd, 0)
            self.position = 0
        return (), {}

    def close(self) -> None:
        os.close(self.fd)


@pytest.fixture
def bare(request: Any, tmp_path: Any) -> Iterator[_BareAppend]:
    append = _BareAppend(str(tmp_path / "bare.log"), request.param == "compacted")
    yield append
    append.close()


@pytest.mark.parametrize("bare", POLICIES, indirect=True)
def test_produce_1mb_batch_bare_append(benchmark: Any, request: Any, bare: _BareAppend, big_batch: bytes) -> None:
    policy = "compacted" if bare.require_keys else "plain"
    info(benchmark, "produce path 1MB %s" % policy, len(big_batch), "B", peer=True)
    rounds = _big_rounds(request)
    result = benchmark.pedantic(lambda: bare.append(big_batch), setup=bare.recycle, rounds=rounds, iterations=1,
                                warmup_rounds=min(rounds, 10))
    assert result["record_count"] == BIG_RECORDS and result["base_offset"] % BIG_RECORDS == 0


@pytest.mark.parametrize("bare", POLICIES, indirect=True)
def test_produce_1000_small_batches_bare_append(benchmark: Any, request: Any, bare: _BareAppend,
                                                small_batches: List[bytes]) -> None:
    policy = "compacted" if bare.require_keys else "plain"
    items = SMALL_BATCHES * SMALL_RECORDS
    info(benchmark, "produce path 1000 small %s" % policy, items, "records", peer=True)
    append = bare.append

    def run() -> Any:
        first = last = append(small_batches[0])
        for batch in small_batches[1:]:
            last = append(batch)
        return first, last

    rounds = _small_rounds(request)
    first, last = benchmark.pedantic(run, setup=bare.recycle, rounds=rounds, iterations=1,
                                     warmup_rounds=min(rounds, 2))
    assert last["base_offset"] - first["base_offset"] == items - SMALL_RECORDS
