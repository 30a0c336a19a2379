"""Validating a producer's compressed batch: ``validate_batches`` (decompress, then check every record).

What one compressed append costs before its write: the CRC, the decompression
and the walk over every record. Since issue 14 a section is decompressed whole
only up to ``codecs.STREAM_CHUNK`` (256 KiB) and walked a chunk at a time as it
decompresses beyond it, never held whole; this file shows that ordinary batches
kept (and gained) speed, and what a section past the 8 MiB window costs (it
also takes one of the large-stream turns).

Groups:
- "validate <codec> 1MB section": one batch of 10,000 records of a 16-byte key
  and a 100-byte value (about 1.2 MB before compression, as a producer's
  ``batch.size`` of 1 MB gives), for gzip, snappy, lz4 and zstd.
- "validate zstd 15MB section": 120,000 such records of a more repetitive
  value in one batch (about 15 MB decompressed from under 1 MB): past the
  window, walked in steps.
The peer in every group (the ratio's reference) does the same task with
aiokafka 0.14's Cython reader: the CRC check, then every record parsed out of
the decompressed section (its reader raises on a record whose framing is off),
counted. aiokafka decompresses a section whole, whatever its size.
Throughput is decompressed bytes per second. Target: not slower than the
previous tree of pylogq (this file run against it) for the 1 MB sections; the
15 MB one shows the streaming walk. Inputs are built outside the timed region.
"""

from __future__ import annotations

import importlib
from typing import Any, Dict, Tuple

import pytest
from aiokafka.record._crecords.default_records import DefaultRecordBatch as AioBatch
from summary import info

from pylogq import _speedups
from pylogq.records import codecs, default_records

IMPLS = [("pure", default_records)]
if not _speedups.NO_EXTENSIONS:
    IMPLS.insert(0, ("compiled", importlib.import_module("pylogq._core._records")))

TS = 1_700_000_000_000
CODEC_NAMES = ["gzip", "snappy", "lz4", "zstd"]
WORDS = [b"alpha", b"bravo", b"charlie", b"delta", b"echo", b"foxtrot", b"golf", b"hotel", b"india", b"juliet"]


def _values(n: int, varied: bool) -> list:
    """100-byte values: a counter, then words (log lines, JSON keys: what producers compress)."""
    out = []
    for i in range(n):
        words = b" ".join(WORDS[(i * 7 + j * (3 if varied else 1)) % len(WORDS)] for j in range(16))
        out.append((b"%012d " % (i * 7919 % 1000003) + words)[:100].ljust(100, b"."))
    return out


def _batch(codec: str, n: int, varied: bool) -> Tuple[bytes, int]:
    """A producer's batch and its decompressed section size."""
    keys = [b"key-%012d" % i for i in range(n)]
    data = bytes(default_records.build_batch(_values(n, varied), keys=keys, timestamps=TS, compression_type=codec))
    plain = default_records.build_batch(_values(n, varied), keys=keys, timestamps=TS)
    return data, len(plain) - default_records.HEADER_SIZE


_BATCHES: Dict[Tuple[str, int], Tuple[bytes, int]] = {}


def _cached(codec: str, n: int, varied: bool) -> Tuple[bytes, int]:
    key = (codec, n)
    if key not in _BATCHES:
        _BATCHES[key] = _batch(codec, n, varied)
    return _BATCHES[key]


@pytest.mark.parametrize("name, impl", IMPLS, ids=[n for n, _ in IMPLS])
@pytest.mark.parametrize("codec", CODEC_NAMES)
def test_validate_1mb_section(benchmark: Any, name: str, impl: Any, codec: str) -> None:
    data, section = _cached(codec, 10_000, True)
    assert section < getattr(codecs, "DECOMPRESS_WINDOW", 8 << 20)
    info(benchmark, "validate %s 1MB section" % codec, section, "B", target="not slower than before")
    headers, count, _ = benchmark(impl.validate_batches, data, True)
    assert count == 10_000 and headers[0][1] == len(data)


@pytest.mark.parametrize("name, impl", IMPLS, ids=[n for n, _ in IMPLS])
def test_validate_section_past_the_window(benchmark: Any, name: str, impl: Any) -> None:
    data, section = _cached("zstd", 120_000, False)
    assert len(data) < 1 << 20 and section > 8 << 20
    info(benchmark, "validate zstd 15MB section", section, "B")
    headers, count, _ = benchmark.pedantic(impl.validate_batches, (data, True), rounds=5 if name == "pure" else 20,
                                           iterations=1)
    assert count == 120_000


def _aiokafka_validate(data: bytes) -> int:
    """The CRC and every record of one compressed batch, with aiokafka's reader: -> the record count."""
    batch = AioBatch(data)
    if not batch.validate_crc():
        raise AssertionError("crc")
    return sum(1 for _ in batch)


@pytest.mark.parametrize("codec", CODEC_NAMES)
def test_validate_1mb_section_aiokafka(benchmark: Any, codec: str) -> None:
    data, section = _cached(codec, 10_000, True)
    info(benchmark, "validate %s 1MB section" % codec, section, "B", peer=True)
    assert benchmark(_aiokafka_validate, data) == 10_000


def test_validate_section_past_the_window_aiokafka(benchmark: Any) -> None:
    data, section = _cached("zstd", 120_000, False)
    info(benchmark, "validate zstd 15MB section", section, "B", peer=True)
    assert benchmark.pedantic(_aiokafka_validate, (data,), rounds=20, iterations=1) == 120_000
