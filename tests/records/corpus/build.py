"""The record-format corpus: segment-like files with what every decoder must read from them.

Each case is a file of entries built with pylogq's builders (v2 batches with every codec
and framing variant pylogq reads, timestamp types, headers, offset gaps, control batches;
v0/v1 messages and compressed wrappers; damaged bytes of every kind; decompression bombs)
and a window of offsets. ``python -m tests.records.corpus.build`` writes the named cases
to ``tests/records/corpus/cases/<name>.log.gz`` (gzip only to keep the repository small:
a case is the uncompressed bytes) with ``manifest.json``: for each case its window, the
decompression bound, and either the :class:`~pylogq.errors.RecordProblem` the reading
fails with or what it reads (records, entries and where a scan stops), taken from
pylogq's decoder when the corpus was written and reviewed then. The Python decoders'
tests (``tests/records/test_corpus.py``, in both passes of the suite) and the JVM
reader's (``tests/spark/test_jvm_entries.py``) check every case against the manifest.

The random segments and random damage at the end are built from fixed seeds at test time
and compare the JVM reader with pylogq's decoder directly; they are not written out.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import random
import struct
import sys
import zlib
from typing import Any, Callable, Dict, List, NamedTuple, Optional, Sequence, Tuple

from pylogq.errors import CorruptRecordError
from pylogq.records import RecordBatchBuilder, codecs, decode_columns, iter_batches, scan
from pylogq.records.crc import crc32c
from pylogq.records.legacy import LegacyRecordBatchBuilder, _append_message, assign_offsets_legacy

HERE = os.path.dirname(os.path.abspath(__file__))
CASES_DIR = os.path.join(HERE, "cases")
MANIFEST = os.path.join(HERE, "manifest.json")
#: Values and keys longer than this are kept in the manifest as their digest and length.
INLINE_BYTES = 48

MAX_DECOMPRESSED = 1 << 30
SMALL_BOUND = 1 << 20  # the decompression bound of the bomb cases
BOMB_BYTES = 256 << 20
T0 = 1700000000000
INT64_MIN = -(2**63)
INT64_MAX = 2**63 - 1
ZERO_TAIL = 4096
RANDOM_SEGMENTS = 120
MUTATIONS = 300


class Case(NamedTuple):
    """One file and the window it is read in; what a reader must make of it."""

    data: bytes
    start: Optional[int] = None
    end: Optional[int] = None
    max_decompressed: int = MAX_DECOMPRESSED
    reference: Optional[bytes] = None  # what is decoded for the expectation (default: data)
    jvm_only: bool = False  # pylogq's decoders take no bound: only the JVM reader is checked
    kind: Optional[str] = None  # the reading fails with this RecordProblem (a name)


# -- building entries ----------------------------------------------------------------------------


def fix_v2_crc(batch: bytearray, pos: int = 0) -> bytearray:
    size = 12 + struct.unpack_from(">i", batch, pos + 8)[0]
    struct.pack_into(">I", batch, pos + 17, crc32c(bytes(batch[pos + 21 : pos + size])))
    return batch


def fix_legacy_crc(entry: bytearray, pos: int = 0) -> bytearray:
    size = 12 + struct.unpack_from(">i", entry, pos + 8)[0]
    struct.pack_into(">I", entry, pos + 12, zlib.crc32(bytes(entry[pos + 16 : pos + size])))
    return entry


Header = Tuple[object, Optional[bytes]]
Rec = Tuple[Optional[bytes], Optional[bytes], Sequence[Header]]


def sample_records(n: int, seed: int = 0) -> List[Rec]:
    """Keys and values of every shape: null, empty, short, long, compressible; headers with null values."""
    rng = random.Random(seed)
    out: List[Rec] = []
    for i in range(n):
        key = None if i % 4 == 0 else b"" if i % 7 == 0 else b"key-%d" % (i % 13)
        if i % 5 == 1:
            value: Optional[bytes] = None
        elif i % 9 == 2:
            value = b""
        elif i % 3 == 0:
            value = bytes(rng.getrandbits(8) for _ in range(rng.randrange(1, 300)))
        else:
            value = (b"value-%d-" % i) * rng.randrange(1, 40)
        headers: List[Header] = []
        if i % 3 == 1:
            headers = [("h", b"%d" % i), ("empty", b""), ("null", None)]
        if i % 11 == 3:
            headers.append((b"\xff\xfe-not-utf8", b"\x00"))
        out.append((key, value, headers))
    return out


def v2(records: Sequence[Rec], codec: int = 0, base_offset: int = 0, deltas: Optional[Sequence[int]] = None,
       timestamps: Optional[Sequence[int]] = None, **kwargs: object) -> bytearray:
    """A v2 batch built by pylogq; ``deltas`` (increasing) leave offset gaps, as a cleaned log has."""
    builder = RecordBatchBuilder(codec, base_offset=base_offset, **kwargs)
    for i, (key, value, headers) in enumerate(records):
        ts = timestamps[i] if timestamps is not None else T0 + 17 * i - (i % 3) * 5
        builder.append(deltas[i] if deltas is not None else i, ts, key, value, list(headers) or None)
    return bytearray(builder.build())


def log_append_time(batch: bytearray, when: int) -> bytearray:
    """The batch as a LogAppendTime topic's broker rewrites it: the type bit and the time in MaxTimestamp."""
    (attributes,) = struct.unpack_from(">h", batch, 21)
    struct.pack_into(">h", batch, 21, attributes | 0x08)
    struct.pack_into(">q", batch, 35, when)
    return fix_v2_crc(batch)


def control_batch(base_offset: int) -> bytearray:
    builder = RecordBatchBuilder(0, base_offset=base_offset, is_control=True, is_transactional=True,
                                 producer_id=7, producer_epoch=0)
    builder.append(0, T0, struct.pack(">hh", 0, 1), struct.pack(">hi", 0, 3))
    return bytearray(builder.build())


def recompressed(batch: bytearray, codec: int, compress: Callable[[bytes], bytes]) -> bytearray:
    """An uncompressed pylogq batch with its records section compressed by ``compress`` (a framing
    variant pylogq does not write), its codec bits, length and CRC set to match."""
    out = bytearray(batch[:61]) + compress(bytes(batch[61:]))
    struct.pack_into(">i", out, 8, len(out) - 12)
    (attributes,) = struct.unpack_from(">h", out, 21)
    struct.pack_into(">h", out, 21, (attributes & ~7) | codec)
    return fix_v2_crc(out)


def raw_v2(payload: bytes, codec: int, count: int = 1, base_offset: int = 0, last_delta: int = 0) -> bytearray:
    """A v2 batch around any records section, compressed or not."""
    header = struct.pack(">qiibIhiqqqhii", base_offset, 49 + len(payload), 0, 2, 0, codec, last_delta, T0, T0,
                         -1, -1, -1, count)
    return fix_v2_crc(bytearray(header) + payload)


def legacy(magic: int, codec: int, records: Sequence[Rec], base_offset: int,
           append_time: Optional[int] = None) -> bytearray:
    """A v0/v1 message set as a broker stores it: offsets assigned from ``base_offset``."""
    builder = LegacyRecordBatchBuilder(magic, codec)
    for i, (key, value, _) in enumerate(records):
        builder.append(i, T0 + 11 * i, key, value)
    out, _ = assign_offsets_legacy(bytearray(builder.build()), base_offset, append_time)
    return bytearray(out)


def legacy_set(magic: int, records: Sequence[Rec], first_offset: int = 0) -> bytes:
    """Plain messages (an inner set before compression) with offsets from ``first_offset``."""
    out = bytearray()
    for i, (key, value, _) in enumerate(records):
        _append_message(out, first_offset + i, magic, 0, T0 + i if magic else -1, key, value)
    return bytes(out)


def wrapper(magic: int, codec: int, value: Optional[bytes], offset: int, timestamp: int = T0,
            attributes: int = 0) -> bytearray:
    out = bytearray()
    _append_message(out, offset, magic, codec | attributes, timestamp if magic else -1, None, value)
    return out


def lz4_frame(**kwargs: object) -> Callable[[bytes], bytes]:
    import lz4.frame

    return lambda data: lz4.frame.compress(data, **kwargs)


def zstd_frame(content_size: bool) -> Callable[[bytes], bytes]:
    import zstandard

    return lambda data: zstandard.ZstdCompressor(write_content_size=content_size).compress(data)


def gzip_with_header_fields(data: bytes) -> bytes:
    """A gzip member with FEXTRA, FNAME, FCOMMENT and FHCRC, which no Kafka client writes but gzip allows."""
    head = bytearray(b"\x1f\x8b\x08" + bytes([0x02 | 0x04 | 0x08 | 0x10]) + b"\0\0\0\0\0\xff")
    head += struct.pack("<H", 3) + b"abc" + b"name\0" + b"comment\0"
    head += struct.pack("<H", zlib.crc32(bytes(head)) & 0xFFFF)
    deflate = zlib.compressobj(6, zlib.DEFLATED, -15)
    body = deflate.compress(data) + deflate.flush()
    return bytes(head) + body + struct.pack("<II", zlib.crc32(data), len(data) & 0xFFFFFFFF)


def halves(compress: Callable[[bytes], bytes]) -> Callable[[bytes], bytes]:
    """Two members or frames, one per half of the data."""
    return lambda data: compress(data[: len(data) // 2]) + compress(data[len(data) // 2 :])


def zero_stream(compressor: object, total: int) -> bytes:
    """``total`` zero bytes through a streaming compressor (``compress`` and ``flush``), in 1 MiB steps."""
    chunk = bytes(1 << 20)
    parts = [compressor.compress(chunk) for _ in range(total >> 20)]  # type: ignore[attr-defined]
    return b"".join(parts) + compressor.flush()  # type: ignore[attr-defined]


# -- the cases -------------------------------------------------------------------------------

CASES: Dict[str, Callable[[], Case]] = {}


def case(name: str) -> Callable[[Callable[[], Case]], Callable[[], Case]]:
    def register(build: Callable[[], Case]) -> Callable[[], Case]:
        CASES[name] = build
        return build

    return register


def mixed_segment() -> bytes:
    """One batch per codec, then a LogAppendTime batch, a control batch and a batch with offset gaps."""
    out = bytearray()
    offset = 1000
    for codec in range(5):
        recs = sample_records(12, seed=codec)
        out += v2(recs, codec, base_offset=offset)
        offset += len(recs)
    out += log_append_time(v2(sample_records(5, seed=9), 0, base_offset=offset), T0 + 999999)
    offset += 5
    out += control_batch(offset)
    offset += 1
    out += v2(sample_records(4, seed=10), 3, base_offset=offset, deltas=[0, 3, 4, 9])
    return bytes(out)


@case("v2-every-codec")
def _every_codec() -> Case:
    return Case(mixed_segment())


for _codec in range(5):

    def _one_codec(codec: int = _codec) -> Case:
        return Case(bytes(v2(sample_records(40, seed=codec), codec, base_offset=77)))

    case("v2-%s" % codecs.NAMES[_codec])(_one_codec)

for _name, _start, _end in [("inside-batches", 1005, 1031), ("one-record", 1020, 1021), ("empty", 1013, 1013),
                            ("before-all", 0, 1000), ("after-all", 2000, 3000), ("gap", 1067, 1070),
                            ("from-gap", 1068, None), ("up-to-gap", None, 1068)]:

    def _window(start: Optional[int] = _start, end: Optional[int] = _end) -> Case:
        return Case(mixed_segment(), start=start, end=end)

    case("window-" + _name)(_window)


@case("v2-log-append-time")
def _log_append_time() -> Case:
    batches = [log_append_time(v2(sample_records(6, seed=c), c, base_offset=6 * c), T0 + 5000 + c) for c in range(5)]
    return Case(b"".join(batches))


@case("v2-gaps-every-codec")
def _gaps() -> Case:
    deltas = [0, 2, 3, 10, 11, 40, 41, 42, 100]
    batches = [v2(sample_records(9, seed=c), c, base_offset=200 * c, deltas=deltas) for c in range(5)]
    return Case(b"".join(batches), start=3, end=841)


@case("v2-control-batches")
def _control() -> Case:
    data = v2(sample_records(3), 0, base_offset=0, is_transactional=True, producer_id=7, producer_epoch=0)
    data += control_batch(3)
    data += v2(sample_records(3), 4, base_offset=4)
    data += control_batch(7)
    return Case(bytes(data))


@case("v2-empty-records")
def _empty_records() -> Case:
    return Case(bytes(v2([(None, None, ())] * 3) + v2([(b"", b"", ())], 2, base_offset=3)))


@case("v2-large-records")
def _large() -> Case:
    rng = random.Random(5)
    recs = [(b"k" * 200, bytes(rng.getrandbits(8) for _ in range(64)) * 1100, [("h", b"x" * 300)]),
            (None, b"y" * 300000, ())]
    return Case(b"".join(bytes(v2(recs, c, base_offset=2 * c)) for c in range(5)))


@case("v2-zstd-large-declared-size")
def _zstd_large() -> Case:
    """A frame declaring 12 MB in a few KB: streamed into a growing array rather than trusted."""
    recs = [(b"k", bytes(1 << 20), [("h", b"v")]) for _ in range(12)]
    return Case(bytes(recompressed(v2(recs, base_offset=4), 4, zstd_frame(True))))


@case("v2-negative-timestamps")
def _negative_timestamps() -> Case:
    recs = sample_records(4)
    return Case(bytes(v2(recs, timestamps=[-1, 5, -70000000000, 2**62])))


def _framings() -> List[Tuple[str, int, Callable[[bytes], bytes]]]:
    import lz4.frame

    return [
        ("gzip-zlib", 1, zlib.compress),
        ("gzip-members", 1, halves(codecs.gzip_encode)),
        ("gzip-header-fields", 1, gzip_with_header_fields),
        ("gzip-level9", 1, lambda d: gzip.compress(d, 9)),
        ("snappy-raw", 2, lambda d: codecs.snappy_encode(d, xerial=False)),
        ("snappy-xerial", 2, codecs.snappy_encode),
        ("lz4-linked-checksums", 3, lz4_frame(block_linked=True, content_checksum=True, block_checksum=True,
                                              store_size=True)),
        ("lz4-linked-64k", 3, lz4_frame(block_linked=True, block_size=lz4.frame.BLOCKSIZE_MAX64KB)),
        ("lz4-4mb-blocks", 3, lz4_frame(block_size=lz4.frame.BLOCKSIZE_MAX4MB, store_size=True)),
        ("lz4-stored", 3, lz4_frame(block_linked=False, compression_level=0)),
        ("lz4-trailing-bytes", 3, lambda d: codecs.lz4_encode(d) + b"ignored"),
        ("zstd-content-size", 4, zstd_frame(True)),
        ("zstd-no-content-size", 4, zstd_frame(False)),
        ("zstd-frames", 4, halves(zstd_frame(False))),
        ("zstd-mixed-frames", 4, lambda d: zstd_frame(True)(d[:100]) + zstd_frame(False)(d[100:])),
        ("zstd-skippable", 4, lambda d: struct.pack("<II", 0x184D2A5E, 5) + b"skip!" + zstd_frame(False)(d)),
    ]


def framed_segment(codec: int, compress: Callable[[bytes], bytes]) -> bytes:
    rng = random.Random(codec)
    # Repetitive records over 250 KB, so blocks are many and linked blocks refer across them;
    # a batch of random values (36 KB), so some lz4 blocks stay uncompressed.
    many: List[Rec] = [(b"k%d" % i, (b"repeated value %d " % (i % 50)) * 40, ()) for i in range(400)]
    noise: List[Rec] = [(None, bytes(rng.getrandbits(8) for _ in range(3000)), ()) for _ in range(12)]
    out = bytearray()
    for i, recs in enumerate([sample_records(20, seed=codec), many, noise]):
        out += recompressed(v2(recs, base_offset=1000 * i), codec, compress)
    return bytes(out)


for _name, _codec, _compress in _framings():

    def _framing(codec: int = _codec, compress: Callable[[bytes], bytes] = _compress) -> Case:
        return Case(framed_segment(codec, compress))

    case("v2-" + _name)(_framing)


@case("v2-lz4-skippable-frame")
def _lz4_skippable() -> Case:
    """liblz4 reads a skippable frame where the frame should be as an empty payload; so does the JVM."""
    payload = struct.pack("<II", 0x184D2A51, 4) + b"skip" + codecs.lz4_encode(b"")
    empty = raw_v2(payload, 3, count=0)
    full = recompressed(v2(sample_records(2)), 3, lambda d: struct.pack("<II", 0x184D2A50, 0) + codecs.lz4_encode(d))
    return Case(bytes(empty + full), kind="BAD_RECORD_COUNT")


# Legacy message sets.

for _magic in (0, 1):
    for _codec in range(4):

        def _legacy(magic: int = _magic, codec: int = _codec) -> Case:
            recs = sample_records(25, seed=codec)
            data = legacy(magic, codec, recs[:10], 500) + legacy(magic, codec, recs[10:], 510)
            return Case(bytes(data), start=503)

        case("v%d-%s" % (_magic, codecs.NAMES[_codec]))(_legacy)


@case("v1-log-append-time")
def _v1_log_append_time() -> Case:
    recs = sample_records(8)
    data = legacy(1, 1, recs, 40, append_time=T0 + 123456) + legacy(1, 0, recs, 48, append_time=T0 + 7)
    return Case(bytes(data))


@case("v0-lz4-kafka-0.8-checksum")
def _v0_lz4() -> Case:
    """A v0 lz4 wrapper's frame has the header checksum Kafka 0.8 computed over the magic number too."""
    recs = sample_records(6)
    value = codecs.lz4_encode_v0(legacy_set(0, recs, 30))
    assert value != codecs.lz4_encode(legacy_set(0, recs, 30))
    return Case(bytes(wrapper(0, 3, value, 35)))


@case("v1-lz4-bad-header-checksum")
def _v1_lz4_bad() -> Case:
    """Only magic 0 may carry the broken checksum."""
    value = codecs.lz4_encode_v0(legacy_set(1, sample_records(3)))
    return Case(bytes(wrapper(1, 3, value, 2)), kind="BAD_COMPRESSED_DATA")


@case("v1-wrapper-unassigned")
def _v1_unassigned() -> Case:
    """A v1 wrapper whose offset is below its last relative inner offset keeps the inner offsets."""
    inner = legacy_set(1, sample_records(5), 0)
    return Case(bytes(wrapper(1, 2, codecs.snappy_encode(inner), 2)))


@case("v1-wrapper-relative-offsets")
def _v1_relative() -> Case:
    inner = legacy_set(1, sample_records(5), 3)  # relative 3..7: absolute = 100 - 7 + relative
    return Case(bytes(wrapper(1, 1, codecs.gzip_encode(inner), 100)))


@case("upgraded-log")
def _upgraded() -> Case:
    """A log written by three Kafka generations: v0, then v1, then v2 entries."""
    recs = sample_records(9)
    data = legacy(0, 1, recs, 0) + legacy(0, 0, recs[:2], 9) + legacy(1, 3, recs, 11) + legacy(1, 0, recs[:3], 20)
    data += v2(recs, 4, base_offset=23) + control_batch(32) + v2(recs, 0, base_offset=33)
    return Case(bytes(data), start=4, end=40)


# Where a segment's data ends.


@case("truncated-tail")
def _truncated() -> Case:
    data = mixed_segment()
    last = v2(sample_records(10), 1, base_offset=5000)
    return Case(data + bytes(last[: len(last) // 2]))


@case("truncated-tail-legacy")
def _truncated_legacy() -> Case:
    data = bytes(legacy(1, 0, sample_records(3), 0))
    return Case(data + data[:20])


@case("tail-shorter-than-a-frame")
def _short_tail() -> Case:
    return Case(mixed_segment() + b"\0\0\0\0\0\0\0\x09\0\0\x01\0\0\0\0\x02")


@case("zero-tail")
def _zero_tail() -> Case:
    """A preallocated segment: the data, then zeros to its end (pylogq's walker calls them corrupt)."""
    data = mixed_segment()
    return Case(data + bytes(ZERO_TAIL), reference=data)


@case("zero-tail-short")
def _zero_tail_short() -> Case:
    data = mixed_segment()
    return Case(data + bytes(40), reference=data)


# Bad bytes.


@case("v2-bad-crc")
def _bad_crc() -> Case:
    data = bytearray(mixed_segment())
    data[200] ^= 0x01
    return Case(bytes(data), kind="BAD_CRC")


@case("v2-bad-crc-outside-window")
def _bad_crc_outside() -> Case:
    """A batch with no offset in range is still CRC-checked, as pylogq checks it."""
    data = bytearray(v2(sample_records(3)) + v2(sample_records(3), base_offset=3))
    data[100] ^= 0x40
    return Case(bytes(data), start=3, kind="BAD_CRC")


@case("v2-bad-crc-control")
def _bad_crc_control() -> Case:
    data = bytearray(control_batch(0))
    data[-1] ^= 0x01
    return Case(bytes(data), kind="BAD_CRC")


@case("legacy-bad-crc")
def _legacy_bad_crc() -> Case:
    data = bytearray(legacy(1, 0, sample_records(3), 0))
    data[30] ^= 0x10
    return Case(bytes(data), kind="BAD_CRC")


for _bad in (5, 6, 7):

    def _unknown_codec(codec: int = _bad) -> Case:
        batch = v2(sample_records(3), base_offset=60)
        struct.pack_into(">h", batch, 21, codec)
        return Case(bytes(fix_v2_crc(batch)), kind="UNKNOWN_CODEC")

    case("v2-unknown-codec-%d" % _bad)(_unknown_codec)


@case("v1-zstd-wrapper")
def _v1_zstd() -> Case:
    value = codecs.zstd_encode(legacy_set(1, sample_records(2)))
    return Case(bytes(wrapper(1, 4, value, 1)), kind="UNKNOWN_CODEC")


@case("unknown-magic")
def _unknown_magic() -> Case:
    batch = v2(sample_records(2))
    batch[16] = 3
    return Case(bytes(batch), kind="BAD_MAGIC")


@case("length-too-small")
def _length_too_small() -> Case:
    batch = v2(sample_records(2), base_offset=8)
    struct.pack_into(">i", batch, 8, 48)
    return Case(bytes(batch), kind="BAD_LENGTH")


@case("zero-length-not-a-tail")
def _zero_length() -> Case:
    data = bytearray(20)
    data[7] = 1  # offset 1: not preallocated zeros
    return Case(bytes(data), kind="BAD_LENGTH")


@case("v2-count-too-large")
def _count() -> Case:
    batch = v2(sample_records(3))
    struct.pack_into(">i", batch, 57, 1000)
    return Case(bytes(fix_v2_crc(batch)), kind="BAD_RECORD_COUNT")


@case("v2-fewer-records-than-bytes")
def _trailing() -> Case:
    batch = v2(sample_records(3))
    struct.pack_into(">i", batch, 57, 2)
    return Case(bytes(fix_v2_crc(batch)), kind="BAD_RECORD_COUNT")


@case("v2-offset-delta-past-last")
def _delta() -> Case:
    batch = v2(sample_records(3), base_offset=10)
    struct.pack_into(">i", batch, 23, 1)
    return Case(bytes(fix_v2_crc(batch)), kind="BAD_RECORD")


@case("v2-truncated-lz4")
def _truncated_lz4() -> Case:
    payload = codecs.lz4_encode(bytes(v2(sample_records(20))[61:]))
    return Case(bytes(raw_v2(payload[:-9], 3, 20, last_delta=19)), kind="BAD_COMPRESSED_DATA")


@case("v2-truncated-zstd")
def _truncated_zstd() -> Case:
    payload = zstd_frame(False)(bytes(v2(sample_records(20))[61:]))
    return Case(bytes(raw_v2(payload[:-3], 4, 20, last_delta=19)), kind="BAD_COMPRESSED_DATA")


@case("v2-truncated-gzip")
def _truncated_gzip() -> Case:
    payload = codecs.gzip_encode(bytes(v2(sample_records(20))[61:]))
    return Case(bytes(raw_v2(payload[:-1], 1, 20, last_delta=19)), kind="BAD_COMPRESSED_DATA")


@case("v2-gzip-bad-data-check")
def _gzip_crc() -> Case:
    payload = bytearray(codecs.gzip_encode(bytes(v2(sample_records(20))[61:])))
    payload[-6] ^= 0xFF
    return Case(bytes(raw_v2(bytes(payload), 1, 20, last_delta=19)), kind="BAD_COMPRESSED_DATA")


@case("v2-gzip-trailing-garbage")
def _gzip_garbage() -> Case:
    payload = codecs.gzip_encode(bytes(v2(sample_records(20))[61:])) + b"\0\0"
    return Case(bytes(raw_v2(payload, 1, 20, last_delta=19)), kind="BAD_COMPRESSED_DATA")


@case("v2-snappy-raw-empty")
def _snappy_empty() -> Case:
    return Case(bytes(raw_v2(b"", 2, 0)), kind="BAD_COMPRESSED_DATA")


@case("v2-snappy-bad-block")
def _snappy_bad() -> Case:
    payload = bytearray(codecs.snappy_encode(bytes(v2(sample_records(20))[61:])))
    payload[20] ^= 0x01  # the first block's declared length, off by one
    return Case(bytes(raw_v2(bytes(payload), 2, 20, last_delta=19)), kind="BAD_COMPRESSED_DATA")


@case("v2-snappy-implausible-length")
def _snappy_claims() -> Case:
    """A 12-byte block that declares 50 MB: refused before anything is allocated."""
    declared = 50_000_000
    payload = bytes([0x80 | (declared >> 7 * i) & 0x7F for i in range(3)] + [declared >> 21]) + bytes(8)
    return Case(bytes(raw_v2(payload, 2, 1)), kind="BAD_COMPRESSED_DATA")


@case("v2-lz4-bad-block-checksum")
def _lz4_block_checksum() -> Case:
    payload = bytearray(lz4_frame(block_checksum=True)(bytes(v2(sample_records(20))[61:])))
    payload[-5] ^= 0x01  # the last block's checksum (then the 4-byte end mark)
    return Case(bytes(raw_v2(bytes(payload), 3, 20, last_delta=19)), kind="BAD_COMPRESSED_DATA")


@case("v2-lz4-bad-content-checksum")
def _lz4_content_checksum() -> Case:
    payload = bytearray(lz4_frame(content_checksum=True)(bytes(v2(sample_records(20))[61:])))
    payload[-1] ^= 0x01
    return Case(bytes(raw_v2(bytes(payload), 3, 20, last_delta=19)), kind="BAD_COMPRESSED_DATA")


@case("v2-lz4-content-size-lies")
def _lz4_content_size() -> Case:
    payload = bytearray(lz4_frame(store_size=True)(bytes(v2(sample_records(20))[61:])))
    struct.pack_into("<Q", payload, 6, struct.unpack_from("<Q", payload, 6)[0] - 1)
    payload[14] = (codecs._xxh32_short(bytes(payload[4:14])) >> 8) & 0xFF
    return Case(bytes(raw_v2(bytes(payload), 3, 20, last_delta=19)), kind="BAD_COMPRESSED_DATA")


@case("wrapper-inner-magic-differs")
def _inner_magic() -> Case:
    value = codecs.gzip_encode(legacy_set(0, sample_records(3)))
    return Case(bytes(wrapper(1, 1, value, 2)), kind="BAD_MAGIC")


@case("wrapper-nested")
def _nested() -> Case:
    inner = wrapper(1, 1, codecs.gzip_encode(legacy_set(1, sample_records(3))), 2)
    return Case(bytes(wrapper(1, 2, codecs.snappy_encode(bytes(inner)), 2)), kind="BAD_WRAPPER")


@case("wrapper-empty-inner-set")
def _empty_inner() -> Case:
    return Case(bytes(wrapper(0, 1, codecs.gzip_encode(b""), 0)), kind="BAD_WRAPPER")


@case("wrapper-null-value")
def _null_value() -> Case:
    return Case(bytes(wrapper(1, 3, None, 0)), kind="BAD_WRAPPER")


@case("wrapper-partial-inner-message")
def _partial_inner() -> Case:
    inner = legacy_set(1, sample_records(3))
    return Case(bytes(wrapper(1, 1, codecs.gzip_encode(inner[:-4]), 2)), kind="BAD_WRAPPER")


@case("legacy-key-overruns")
def _key_overruns() -> Case:
    entry = bytearray(legacy(1, 0, [(b"abc", b"v", ())], 0))
    struct.pack_into(">i", entry, 26, 40)
    return Case(bytes(fix_legacy_crc(entry)), kind="BAD_RECORD")


# Decompression bombs and the bound: refused while decompressing, in a heap smaller than the bomb.


def _bomb(name: str, payload: Callable[[], bytes], codec: int, magic: int = 2) -> None:
    def build() -> Case:
        body = payload()
        data = raw_v2(body, codec, 1) if magic == 2 else wrapper(magic, codec, body, 0)
        return Case(bytes(data), max_decompressed=SMALL_BOUND, jvm_only=True,
                    kind="TOO_LARGE_DECOMPRESSED")

    case("bomb-" + name)(build)


def _zstd_bomb(content_size: bool) -> bytes:
    import io

    import zstandard

    if content_size:
        sink = io.BytesIO()
        writer = zstandard.ZstdCompressor().stream_writer(sink, size=BOMB_BYTES, closefd=False)
        chunk = bytes(1 << 20)
        for _ in range(BOMB_BYTES >> 20):
            writer.write(chunk)
        writer.close()
        return sink.getvalue()
    return zero_stream(zstandard.ZstdCompressor(write_content_size=False).compressobj(), BOMB_BYTES)


def _lz4_bomb() -> bytes:
    import lz4.frame

    c = lz4.frame.LZ4FrameCompressor(block_size=lz4.frame.BLOCKSIZE_MAX64KB, block_linked=False)
    return c.begin() + zero_stream(c, BOMB_BYTES)


_bomb("zstd", lambda: _zstd_bomb(False), 4)
_bomb("zstd-content-size", lambda: _zstd_bomb(True), 4)
_bomb("gzip", lambda: zero_stream(zlib.compressobj(9, zlib.DEFLATED, 31), BOMB_BYTES), 1)
_bomb("lz4", _lz4_bomb, 3)
_bomb("lz4-linked", lambda: lz4_frame(block_linked=True)(bytes(8 << 20)), 3)
_bomb("snappy", lambda: codecs.snappy_encode(bytes(4 << 20)), 2)
_bomb("snappy-raw", lambda: codecs.snappy_encode(bytes(4 << 20), xerial=False), 2)
_bomb("v1-gzip-wrapper", lambda: zero_stream(zlib.compressobj(9, zlib.DEFLATED, 31), BOMB_BYTES), 1, magic=1)
_bomb("v0-lz4-wrapper", lambda: codecs.lz4_encode_v0(bytes(8 << 20)), 3, magic=0)


#: Records in the batches of the bound cases (a section of some KB: its exact size is the bound).
BOUND_RECORDS = 400


def _section(codec_records: int = BOUND_RECORDS) -> bytes:
    return bytes(v2([(b"k", b"bounded value %d" % i, ()) for i in range(codec_records)])[61:])


for _name, _codec, _compress in [("gzip", 1, codecs.gzip_encode), ("snappy", 2, codecs.snappy_encode),
                                 ("lz4", 3, codecs.lz4_encode), ("lz4-linked", 3, lz4_frame(block_linked=True)),
                                 ("zstd", 4, zstd_frame(False)), ("zstd-content-size", 4, zstd_frame(True))]:

    def _at_bound(codec: int = _codec, compress: Callable[[bytes], bytes] = _compress) -> Case:
        section = _section()
        data = raw_v2(compress(section), codec, BOUND_RECORDS, last_delta=BOUND_RECORDS - 1)
        return Case(bytes(data), max_decompressed=len(section))

    def _past_bound(codec: int = _codec, compress: Callable[[bytes], bytes] = _compress) -> Case:
        section = _section()
        data = raw_v2(compress(section), codec, BOUND_RECORDS, last_delta=BOUND_RECORDS - 1)
        return Case(bytes(data), max_decompressed=len(section) - 1, jvm_only=True,
                    kind="TOO_LARGE_DECOMPRESSED")

    case("bound-exact-" + _name)(_at_bound)
    case("bound-past-" + _name)(_past_bound)


# Random segments and random damage, from fixed seeds.


def random_entry(rng: random.Random, offset: int) -> Tuple[bytearray, int]:
    """A random entry of any magic and codec at ``offset``; -> (entry, next offset)."""
    n = rng.randrange(1, 12)
    recs = sample_records(n, seed=rng.randrange(1 << 30))
    magic = rng.choice((0, 1, 2, 2, 2, 2))
    if magic < 2:
        codec = rng.randrange(4)
        append_time = T0 + rng.randrange(10000) if magic == 1 and rng.random() < 0.3 else None
        return legacy(magic, codec, recs, offset, append_time), offset + n
    if rng.random() < 0.08:
        return control_batch(offset), offset + 1
    gaps = sorted(rng.sample(range(3 * n), n)) if rng.random() < 0.4 else list(range(n))
    deltas = [d - gaps[0] for d in gaps]
    codec = rng.randrange(5)
    timestamps = [T0 + rng.randrange(-10**6, 10**6) for _ in range(n)]
    batch = v2(recs, codec, base_offset=offset, deltas=deltas, timestamps=timestamps)
    if rng.random() < 0.2:
        batch = log_append_time(batch, T0 + rng.randrange(10**9))
    if codec and rng.random() < 0.3:
        variants = [v for v in _framings() if v[1] == codec]
        batch = recompressed(v2(recs, 0, base_offset=offset, deltas=deltas, timestamps=timestamps), codec,
                             rng.choice(variants)[2])
    return batch, offset + deltas[-1] + 1


def random_segment(seed: int) -> Case:
    rng = random.Random(seed)
    out = bytearray()
    offset = rng.randrange(0, 10**12)
    first = offset
    for _ in range(rng.randrange(1, 7)):
        entry, offset = random_entry(rng, offset)
        out += entry
        offset += rng.choice((0, 0, 0, 1, 5))
    start = rng.choice((None, first + rng.randrange(0, offset - first + 2)))
    end = rng.choice((None, (start or first) + rng.randrange(0, offset - first + 2)))
    reference = bytes(out)
    tail = rng.random()
    if tail < 0.15:
        entry, _ = random_entry(rng, offset)
        out += entry[: rng.randrange(1, len(entry))]
    elif tail < 0.25:
        out += bytes(rng.randrange(17, 200))
        return Case(bytes(out), start, end, reference=reference)
    return Case(bytes(out), start, end)


def tiny_records(rng: random.Random, n: int) -> List[Rec]:
    """Records of a few bytes each: most bytes of their batch are lengths, varints and headers."""
    out: List[Rec] = []
    for _ in range(n):
        key = rng.choice((None, b"", b"k", b"key"))
        value = rng.choice((None, b"", b"v", b"value", bytes(rng.randrange(130, 140))))
        headers: List[Header] = [("h%d" % j, rng.choice((None, b"", b"x"))) for j in range(rng.randrange(3))]
        out.append((key, value, headers))
    return out


def mutated_entry(seed: int) -> Case:
    """A valid entry with 1-3 bytes changed and its CRCs made right again: only the structure can catch it.

    Compressed entries are damaged before compression, so the damage reaches the record parser.
    """
    rng = random.Random(seed)
    recs = tiny_records(rng, rng.randrange(1, 8))
    kind = rng.choice(("v2", "v2", "v2-compressed", "legacy", "wrapper"))

    def damage(buf: bytearray, lo: int) -> None:
        for _ in range(rng.randrange(1, 4)):
            i = rng.randrange(lo, len(buf))
            buf[i] = rng.choice((0x00, 0xFF, 0x7F, 0x80, 0x01, buf[i] ^ (1 << rng.randrange(8)), rng.randrange(256)))

    if kind.startswith("v2"):
        batch = v2(recs, base_offset=rng.randrange(1000), deltas=None)
        damage(batch, 21 if rng.random() < 0.25 else 61)
        batch[22] &= 0xF8  # the codec stays none: damaged records, not a codec reading garbage
        if kind == "v2-compressed":
            codec = rng.randrange(1, 5)
            batch = recompressed(batch, codec, lambda d: codecs.compress(codec, d))
        return Case(bytes(fix_v2_crc(batch)))
    magic = rng.randrange(2)
    if kind == "legacy":
        entry = legacy(magic, 0, recs[:1], rng.randrange(1000))
        damage(entry, 17)
        return Case(bytes(fix_legacy_crc(entry)))
    codec = rng.randrange(1, 4)
    inner = bytearray(legacy_set(magic, recs, rng.randrange(3)))
    damage(inner, 0)
    pos = 0
    while len(inner) - pos >= 12:
        size = struct.unpack_from(">i", inner, pos + 8)[0]
        if size < 4 or pos + 12 + size > len(inner):
            break
        fix_legacy_crc(inner, pos)
        pos += 12 + size
    return Case(bytes(wrapper(magic, codec, codecs.compress(codec, bytes(inner), magic), 50 + len(recs))))


for _i in range(RANDOM_SEGMENTS):

    def _random(seed: int = 1000 + _i) -> Case:
        return random_segment(seed)

    case("random-%03d" % _i)(_random)

for _i in range(MUTATIONS):

    def _mutated(seed: int = 5000 + _i) -> Case:
        return mutated_entry(seed)

    case("mutated-%03d" % _i)(_mutated)




#: The cases written to the corpus (the random and mutated ones are generated at test time).
NAMED = [name for name in CASES if not name.startswith(("random-", "mutated-"))]


def blob(data: Optional[bytes]) -> Optional[str]:
    """Bytes as the manifest holds them: hex when short, else ``sha256:<digest's first 96 bits>:<length>``."""
    if data is None:
        return None
    if len(data) <= INLINE_BYTES:
        return data.hex()
    return "sha256:%s:%d" % (hashlib.sha256(data).hexdigest()[:24], len(data))


def read_by_pylogq(c: Case) -> Dict[str, Any]:
    """What pylogq's decoder reads from a case, in the manifest's form ({"kind": ...} on failure)."""
    data = c.data if c.reference is None else c.reference
    try:
        columns = decode_columns(data, start_offset=c.start, end_offset=c.end)
    except CorruptRecordError as exc:
        return {"kind": exc.kind.name if exc.kind is not None else None, "message": str(exc)}
    records = [[offset, ts, ts_type, blob(key), blob(value),
                [[blob(k.encode("utf-8", "surrogateescape")), blob(v)] for k, v in headers]]
               for offset, ts, ts_type, key, value, headers in columns.rows()]
    entries: List[List[Any]] = []
    for h in iter_batches(data):
        if h.magic == 2:
            entries.append([h.position, h.size, 2, h.base_offset, h.last_offset, h.records_count,
                            bool(h.attributes & 0x20)])
        else:
            entries.append([h.position, h.size, h.magic, h.base_offset, h.last_offset])
    return {"records": records, "entries": entries, "stop": scan(data).valid_bytes}


def manifest_entry(name: str, c: Case) -> Dict[str, Any]:
    entry: Dict[str, Any] = {"file": "cases/%s.log.gz" % name, "start": c.start, "end": c.end,
                             "max_decompressed": c.max_decompressed, "jvm_only": c.jvm_only}
    if c.kind is not None:
        entry["kind"] = c.kind
        return entry
    read = read_by_pylogq(c)
    if "kind" in read:
        raise AssertionError("case %s: pylogq fails (%s) but the case expects records" % (name, read["message"]))
    entry["read"] = read
    if c.reference is not None:
        # What the JVM's walker reads of the whole file (it stops at a preallocated zero tail, a
        # partial entry, garbage) is what pylogq's decoder reads of the bytes before that tail.
        assert c.data.startswith(c.reference)
        entry["reference_length"] = len(c.reference)
    return entry


def write() -> None:
    """Write every named case and the manifest (what pylogq reads now: review the diff)."""
    os.makedirs(CASES_DIR, exist_ok=True)
    manifest: Dict[str, Any] = {}
    for name in NAMED:
        c = CASES[name]()
        with open(os.path.join(CASES_DIR, name + ".log.gz"), "wb") as f:
            f.write(gzip.compress(c.data, 9, mtime=0))
        manifest[name] = manifest_entry(name, c)
    with open(MANIFEST, "w", encoding="utf-8") as f:  # a case per line: a change shows as one
        f.write("{\n")
        f.write(",\n".join("%s: %s" % (json.dumps(name), json.dumps(manifest[name], sort_keys=True,
                                                                        separators=(",", ":")))
                             for name in sorted(manifest)))
        f.write("\n}\n")


if __name__ == "__main__":
    write()
    sys.exit(0)
