"""Differential fuzzing of the record kernels: mutated buffers through every entry point.

Valid buffers are mutated (flipped bytes, overwritten length and count
fields with the CRC recomputed so the damage reaches the record parser,
truncation, insertion, deletion) and fed to each entry point with the CRC
check on and off. Every call must return normally or raise CorruptRecordError
or InvalidRecordError: never another exception, never a crash. When the
compiled kernel is built, it and its pure twin must agree on every input:
the same records or columns, or the same error class.

Compressed batches of every codec are damaged before compression (behind a
good CRC, so the damage reaches the record walk) or cut after it, and
validated with the default chunk and window and with tiny ones, which make
the streaming walk gather most records across chunks and check long ones
field by field: its verdicts must be the whole walk's. Valid batches of
extreme ratio (a few KB for tens of MB) must be accepted by both twins.
"""

from __future__ import annotations

import importlib
import os
import random
import struct
import zlib

import crc32c as crc32c_peer
import lz4.frame
import pytest
import zstandard

from pylogq import _speedups
from pylogq.errors import CorruptRecordError, InvalidRecordError, MessageTooLargeError
from pylogq.records import codecs, default_records
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
    valid, n, error, _ = twin.scan_entries(data, 0, check_crc)
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


# -- compressed batches: damage that reaches the records after decompression -----------

EXPECTED_COMPRESSED = EXPECTED + (MessageTooLargeError,)
CODECS = (codecs.GZIP, codecs.SNAPPY, codecs.LZ4, codecs.ZSTD)
# (window, chunk) of the streaming walk: the default, then small enough that most records
# cross a chunk's end and many are longer than the window (walked field by field).
WINDOWS = {"default": (None, None), "window-256": (256, 16), "window-40": (40, 1)}


def _with_section(batch: bytes, section: bytes, codec: int) -> bytes:
    """``batch``'s header around another records section compressed with ``codec``, length and CRC fixed."""
    out = bytearray(batch[:61]) + codecs.compress(codec, section)
    struct.pack_into(">i", out, 8, len(out) - 12)
    struct.pack_into(">h", out, 21, (struct.unpack_from(">h", out, 21)[0] & ~7) | codec)
    struct.pack_into(">I", out, 17, crc32c_peer.crc32c(bytes(out[21:])))
    return bytes(out)


def _plain_batch(rng: random.Random) -> bytes:
    builder = default_records.RecordBatchBuilder(0)
    large = rng.random() < 0.3  # records longer than the small windows
    for i in range(rng.randint(1, 10)):
        headers = [("h%d" % j, None if j % 2 else rng.randbytes(rng.randint(0, 300 if large else 5)))
                   for j in range(rng.randint(0, 3))]
        key = None if rng.random() < 0.2 else rng.randbytes(rng.randint(0, 200 if large else 9))
        value = None if rng.random() < 0.1 else rng.randbytes(rng.randint(0, 600 if large else 40))
        builder.append(i, 1_700_000_000_000 + i, key, value, headers)
    return bytes(builder.build())


def _damaged_compressed(rng: random.Random, codec: int) -> bytes:
    """A producer's batch whose records section was damaged before compression (so the codec
    is happy and the record walk meets the damage), or whose compressed bytes were cut."""
    batch = _plain_batch(rng)
    section = bytearray(batch[61:])
    kind = rng.randrange(7)
    if kind == 0:
        for _ in range(rng.randint(1, 3)):
            section[rng.randrange(len(section))] = rng.getrandbits(8)
    elif kind == 1:
        del section[rng.randrange(len(section)):]
    elif kind == 2:
        pos = rng.randrange(len(section) + 1)
        section[pos:pos] = rng.randbytes(rng.randint(1, 5))
    elif kind == 3:
        pos = rng.randrange(len(section))
        del section[pos:pos + rng.randint(1, 5)]
    elif kind == 4:
        section += rng.randbytes(rng.randint(1, 30))
    elif kind == 5:  # the compressed payload cut short (a partial frame of the codec)
        data = bytearray(_with_section(batch, bytes(section), codec))
        del data[rng.randrange(61, len(data)):]
        struct.pack_into(">i", data, 8, len(data) - 12)
        struct.pack_into(">I", data, 17, crc32c_peer.crc32c(bytes(data[21:])))
        return bytes(data)
    return _with_section(batch, bytes(section), codec)


def _validate_outcome(twin, data):
    try:
        return ("ok", twin.validate_batches(data, True))
    except EXPECTED_COMPRESSED as exc:
        return ("error", type(exc).__name__)


@pytest.mark.parametrize("window", sorted(WINDOWS))
def test_damaged_compressed_batches_fail_cleanly_and_twins_agree(window, monkeypatch):
    """Every codec; with small windows the streaming walk (records gathered across chunks, long
    ones field by field) must accept and refuse exactly what the walk of a whole section does."""
    size, chunk = WINDOWS[window]
    rng = random.Random("compressed-" + window)
    oks = 0
    for _ in range(ROUNDS // 3):
        codec = rng.choice(CODECS if size is None else (codecs.GZIP, codecs.LZ4, codecs.ZSTD))
        data = _damaged_compressed(rng, codec)
        whole = [_validate_outcome(twin, data) for twin in TWINS]
        if size is not None:
            with monkeypatch.context() as patch:
                patch.setattr(codecs, "DECOMPRESS_WINDOW", size)
                patch.setattr(codecs, "STREAM_CHUNK", chunk)
                streamed = [_validate_outcome(twin, data) for twin in TWINS]
            assert streamed == whole, data.hex()
        assert all(outcome == whole[0] for outcome in whole), data.hex()
        oks += whole[0][0] == "ok"
    assert 0 < oks < ROUNDS // 3


def _zeros_pieces(n: int) -> list:
    return [bytes(min(n - i, 1 << 20)) for i in range(0, n, 1 << 20)]


def _varint(value: int) -> bytes:
    out = bytearray()
    default_records.encode_varint(value, out)
    return bytes(out)


def _extreme_batch(codec: int, shapes) -> bytes:
    """A valid batch of records whose key, value and header values are ``shapes``' sizes of zero
    bytes ((key or None, value, [header value sizes])), compressed as a stream: a few KB that
    stand for tens of megabytes."""
    pieces = []
    for delta, (key, value, headers) in enumerate(shapes):
        fields = [b"\x00" + _varint(0) + _varint(delta)]
        for part in (key, value):
            fields.append(_varint(-1 if part is None else part))
            fields += _zeros_pieces(part or 0)
        fields.append(_varint(len(headers)))
        for h in headers:
            fields.append(_varint(1) + b"h" + _varint(h))
            fields += _zeros_pieces(h)
        pieces.append(_varint(sum(len(f) for f in fields)))
        pieces += fields
    if codec == codecs.GZIP:
        c = zlib.compressobj(6, zlib.DEFLATED, 31)
        section = b"".join([c.compress(p) for p in pieces] + [c.flush()])
    elif codec == codecs.ZSTD:
        z = zstandard.ZstdCompressor(level=3).compressobj()
        section = b"".join([z.compress(p) for p in pieces] + [z.flush()])
    elif codec == codecs.LZ4:
        f = lz4.frame.LZ4FrameCompressor(block_size=lz4.frame.BLOCKSIZE_MAX64KB, block_linked=False)
        section = b"".join([f.begin()] + [f.compress(p) for p in pieces] + [f.flush()])
    else:
        section = codecs.snappy_encode(b"".join(pieces))
    n = len(shapes)
    head = struct.pack(">qiibIhiqqqhii", 0, 49 + len(section), 0, 2, 0, codec, n - 1, 1_700_000_000_000,
                       1_700_000_000_000, -1, -1, -1, n)
    out = bytearray(head + section)
    struct.pack_into(">I", out, 17, crc32c_peer.crc32c(bytes(out[21:])))
    return bytes(out)


MiB = 1 << 20
EXTREME = {
    # name: (records' shapes, offset delta of the first without a key)
    "one 40 MiB value": ([(1, 40 * MiB, [])], -1),
    "40 values of 1 MiB, one keyless": ([(1, MiB, [])] * 25 + [(None, MiB, [])] + [(1, MiB, [])] * 14, 25),
    "a 12 MiB key and 12 MiB headers": ([(1, 10, []), (12 * MiB, 0, [6 * MiB, 0, 6 * MiB])], -1),
    "tiny records then a huge one": ([(1, 0, [])] * 5000 + [(None, 20 * MiB, [1])], 5000),
}


@pytest.mark.parametrize("codec", CODECS, ids=[codecs.NAMES[c] for c in CODECS])
@pytest.mark.parametrize("shape", sorted(EXTREME))
def test_valid_batches_of_extreme_ratio_are_accepted_by_both_twins(codec, shape):
    """Past the window the section is walked as it decompresses, never held whole."""
    shapes, keyless = EXTREME[shape]
    if codec == codecs.SNAPPY:  # snappy's ratio is about 20: smaller records, still past the window
        many = len(shapes) > 100
        cap = 9 * MiB if many else MiB // 4
        shapes = [(k if k is None else min(k, cap), min(v, cap), [min(h, cap) for h in hs]) for k, v, hs in shapes]
        if not many:
            shapes = shapes * (10 * MiB // sum((k or 0) + v + sum(hs) for k, v, hs in shapes) + 1)
        keyless = next((i for i, (k, _, _) in enumerate(shapes) if k is None), -1)
    data = _extreme_batch(codec, shapes)
    assert len(data) < 1 << 20
    for twin in TWINS:
        headers, count, found = twin.validate_batches(data, True)
        assert (count, found) == (len(shapes), keyless)
        assert headers[0][1] == len(data)


def test_a_batch_past_the_decompression_bound_is_too_large(monkeypatch):
    monkeypatch.setattr(codecs, "MAX_DECOMPRESSED", 30 * MiB)
    data = _extreme_batch(codecs.ZSTD, [(1, 31 * MiB, [])])
    for twin in TWINS:
        with pytest.raises(MessageTooLargeError, match="more than 31457280 bytes"):
            twin.validate_batches(data)
