"""Differential fuzzing of the record kernels: mutated buffers through every entry point.

Valid buffers are mutated (flipped bytes, overwritten length and count
fields with the CRC recomputed so the damage reaches the record parser,
truncation, insertion, deletion) and fed to each entry point with the CRC
check on and off. Every call must return normally or raise CorruptRecordError
or InvalidRecordError: never another exception, never a crash. When the
compiled kernel is built, it and its pure twin must agree on every input:
the same records or columns, or the same error class.
"""

from __future__ import annotations

import importlib
import os
import random
import struct
import zlib

import crc32c as crc32c_peer
import pytest

from pylogq import _speedups
from pylogq.errors import CorruptRecordError, InvalidRecordError
from pylogq.records import default_records
from pylogq.records.legacy import LegacyRecordBatchBuilder

TWINS = [default_records]
if not _speedups.NO_EXTENSIONS:
    TWINS.append(importlib.import_module("pylogq._core._records"))

EXPECTED = (CorruptRecordError, InvalidRecordError)
ROUNDS = int(os.environ.get("PYLOGQ_FUZZ_ROUNDS", "1500"))  # more for a deeper local run


def _seeds():
    rng = random.Random(11)
    seeds = []
    for codec in (0, 0, 0, 1, 2, 3, 4):
        n = rng.randint(1, 12)
        builder = default_records.RecordBatchBuilder(codec, base_offset=rng.randint(0, 1000))
        for i in range(n):
            headers = [("h%d" % j, None if j % 2 else b"x" * j) for j in range(rng.randint(0, 2))]
            key = None if rng.random() < 0.3 else bytes(rng.getrandbits(8) for _ in range(rng.randint(0, 9)))
            value = None if rng.random() < 0.1 else bytes(rng.getrandbits(8) for _ in range(rng.randint(0, 40)))
            builder.append(i, 1_700_000_000_000 + rng.randint(-5, 5000), key, value, headers)
        seeds.append(bytes(builder.build()))
    for magic, codec in ((0, 0), (1, 1), (1, 0)):
        legacy = LegacyRecordBatchBuilder(magic, codec)
        for i in range(rng.randint(1, 4)):
            legacy.append(i, 1_700_000_000_000 + i, b"k" if i % 2 else None, b"legacy %d" % i)
        seeds.append(bytes(legacy.build()))
    return seeds


def _recrc(buf: bytearray) -> None:
    """Make the first entry's CRC match its (damaged) bytes, so the parser sees the damage."""
    if len(buf) >= 61 and buf[16] == 2:
        struct.pack_into(">I", buf, 17, crc32c_peer.crc32c(bytes(buf[21:])))
    elif len(buf) >= 26 and buf[16] < 2:
        end = min(len(buf), 12 + max(0, struct.unpack_from(">i", buf, 8)[0]))
        struct.pack_into(">I", buf, 12, zlib.crc32(bytes(buf[16:end])))


def _mutate(rng: random.Random, seed: bytes) -> bytes:
    buf = bytearray(seed)
    kind = rng.randrange(7)
    if kind == 0:  # flip bytes in the records section, CRC fixed so the parser sees them
        for _ in range(rng.randint(1, 4)):
            pos = rng.randrange(61, len(buf)) if len(buf) > 61 else rng.randrange(len(buf))
            buf[pos] = rng.getrandbits(8)
        _recrc(buf)
    elif kind == 1:  # any byte, CRC left as it was
        buf[rng.randrange(len(buf))] ^= 1 << rng.randrange(8)
    elif kind == 2:  # a header field overwritten with an extreme or random value
        field = rng.choice([(8, ">i"), (23, ">i"), (57, ">i"), (21, ">h"), (27, ">q"), (35, ">q")])
        value = rng.choice([0, -1, 1, 2**31 - 1, -(2**31), rng.randint(-100, 100)])
        if field[1] == ">h":
            value = max(-(2**15), min(2**15 - 1, value))
        struct.pack_into(field[1], buf, field[0], value)
        _recrc(buf)
    elif kind == 3:  # truncation
        del buf[rng.randrange(len(buf)) :]
    elif kind == 4:  # bytes inserted inside, length field kept
        pos = rng.randrange(61, len(buf) + 1) if len(buf) > 61 else len(buf)
        buf[pos:pos] = bytes(rng.getrandbits(8) for _ in range(rng.randint(1, 5)))
        _recrc(buf)
    elif kind == 5:  # bytes deleted inside, length field fixed up
        if len(buf) > 62:
            pos = rng.randrange(61, len(buf))
            del buf[pos : pos + rng.randint(1, 5)]
            struct.pack_into(">i", buf, 8, len(buf) - 12)
            _recrc(buf)
    else:  # two batches glued, the second damaged
        other = bytearray(seed)
        other[rng.randrange(len(other))] = rng.getrandbits(8)
        buf += other
    return bytes(buf)


def _outcome(fn):
    try:
        return ("ok", fn())
    except EXPECTED as exc:
        return ("error", type(exc).__name__)


def _records(twin, data, check_crc):
    recs = twin.RecordBatch(data, check_crc=check_crc).records()
    return [(r.offset, r.timestamp, r.key, r.value, list(r.headers), r.attributes) for r in recs]


def _columns(twin, data, check_crc):
    data_buf, n, *cols = twin.decode_columns(data, check_crc, True, None, None)
    return (bytes(data_buf), n, [c.tolist() for c in cols])


def _scan(twin, data, check_crc):
    valid, n, error = twin.scan_entries(data, 0, check_crc)
    if error is not None:  # the walker reports a bad entry instead of raising
        raise CorruptRecordError(error)
    return valid, n


def _assign(twin, data):
    buf = bytearray(data)
    info = twin.assign_offsets(buf, 77, 3, None)
    return (info, bytes(buf))


def _validate(twin, data):
    """The one pass of an append (keys required, as on a compacted topic), then the patch from its headers."""
    headers, count, keyless = twin.validate_batches(data, True)
    buf = bytearray(data)
    written = twin.patch_offsets(buf, headers, 77, 3, None)
    return (headers, count, keyless, written, bytes(buf))


ENTRY_POINTS = {
    "records": lambda twin, data: _records(twin, data, False),
    "records+crc": lambda twin, data: _records(twin, data, True),
    "scan": lambda twin, data: _scan(twin, data, False),
    "scan+crc": lambda twin, data: _scan(twin, data, True),
    "columns": lambda twin, data: _columns(twin, data, False),
    "columns+crc": lambda twin, data: _columns(twin, data, True),
    "assign": _assign,
    "validate": _validate,
}


@pytest.mark.parametrize("entry", sorted(ENTRY_POINTS))
def test_mutated_batches_fail_cleanly_and_twins_agree(entry):
    call = ENTRY_POINTS[entry]
    rng = random.Random(entry)
    seeds = _seeds()
    errors = 0
    for _ in range(ROUNDS):
        data = _mutate(rng, rng.choice(seeds))
        outcomes = [_outcome(lambda twin=twin: call(twin, data)) for twin in TWINS]
        if len(outcomes) == 2:
            assert outcomes[0] == outcomes[1], data.hex()
        errors += outcomes[0][0] == "error"
    # The mutations must actually reach the error paths (and not only them).
    assert 0 < errors < ROUNDS
