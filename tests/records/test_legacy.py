"""Tests of the legacy v0/v1 message sets: golden bytes, peers, corruption, offsets."""

from __future__ import annotations

import struct
import zlib

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pylogq.errors import CorruptRecordError, InvalidRecordError, MessageTooLargeError, UnsupportedCodecError
from pylogq.records import codecs
from pylogq.records.legacy import (
    LegacyMessage,
    LegacyRecord,
    LegacyRecordBatchBuilder,
    assign_offsets_legacy,
    first_keyless_offset,
    iter_legacy_messages,
    iter_legacy_records,
    valid_prefix_length,
    validate_legacy,
)

CODECS = [codecs.NONE, codecs.GZIP, codecs.SNAPPY, codecs.LZ4]
MAGICS = [0, 1]


# -- helpers: an independent encoder written from the layout, hashed with zlib


def raw_message(
    offset,
    magic,
    key,
    value,
    attributes=0,
    timestamp=-1,
    size=None,
    key_len=None,
    value_len=None,
    crc=None,
    trailer=b"",
):
    """One message-set entry; any field may be forced to a wrong value, the CRC stays right unless given."""
    k = b"" if key is None else key
    v = b"" if value is None else value
    key_len = (-1 if key is None else len(key)) if key_len is None else key_len
    value_len = (-1 if value is None else len(value)) if value_len is None else value_len
    body = struct.pack(">bb", magic, attributes)
    if magic == 1:
        body += struct.pack(">q", timestamp)
    body += struct.pack(">i", key_len) + k + struct.pack(">i", value_len) + v + trailer
    if crc is None:
        crc = zlib.crc32(body)
    if size is None:
        size = 4 + len(body)
    return struct.pack(">qiI", offset, size, crc) + body


def wrapper_message(offset, magic, codec, inner, timestamp=-1, attributes=None):
    attrs = codec if attributes is None else attributes
    return raw_message(offset, magic, None, codecs.compress(codec, inner, magic), attrs, timestamp)


def summary(records):
    return [(r.offset, r.timestamp, r.timestamp_type, r.key, r.value) for r in records]


def build(magic, codec, items, first_offset=0):
    builder = LegacyRecordBatchBuilder(magic, codec)
    for i, (ts, key, value) in enumerate(items):
        assert builder.append(first_offset + i, ts, key, value) is not None
    return builder.build()


def expected(magic, items, first_offset=0):
    if magic == 0:
        return [(first_offset + i, -1, -1, k, v) for i, (_, k, v) in enumerate(items)]
    return [(first_offset + i, ts, 0, k, v) for i, (ts, k, v) in enumerate(items)]


ITEMS = [(1_500_000_000_000 + i, b"key-%d" % i if i % 3 else None, b"value-%d" % i * i) for i in range(7)] + [
    (1_500_000_000_100, b"", None)
]


# -- golden bytes ----------------------------------------------------------

GOLDEN_V0 = bytes.fromhex("0000000000000005000000162356c1370000000000036b65790000000576616c7565")
GOLDEN_V1 = bytes.fromhex("00000000000000070000001bca1882f401000000015d3ef79800ffffffff0000000568656c6c6f")


def test_golden_v0_message():
    body = b"\x00\x00" + struct.pack(">i", 3) + b"key" + struct.pack(">i", 5) + b"value"
    assert zlib.crc32(body) == 0x2356C137
    assert GOLDEN_V0 == struct.pack(">qiI", 5, 4 + len(body), 0x2356C137) + body
    builder = LegacyRecordBatchBuilder(0)
    meta = builder.append(5, 123, b"key", b"value")
    assert meta == (5, len(GOLDEN_V0), -1, 0x2356C137)
    assert builder.build() == GOLDEN_V0
    [rec] = iter_legacy_records(GOLDEN_V0)
    assert rec == LegacyRecord(5, -1, -1, b"key", b"value", 0x2356C137, 0, 0, 0)
    assert rec.headers == []


def test_golden_v1_message():
    body = b"\x01\x00" + struct.pack(">q", 1_500_000_000_000) + struct.pack(">i", -1) + struct.pack(">i", 5) + b"hello"
    assert zlib.crc32(body) == 0xCA1882F4
    assert GOLDEN_V1 == struct.pack(">qiI", 7, 4 + len(body), 0xCA1882F4) + body
    builder = LegacyRecordBatchBuilder(1)
    builder.append(7, 1_500_000_000_000, None, b"hello")
    assert builder.build() == GOLDEN_V1
    [msg] = iter_legacy_messages(GOLDEN_V1)
    assert (msg.offset, msg.position, msg.size, msg.crc, msg.magic, msg.attributes, msg.timestamp) == (
        7,
        0,
        len(GOLDEN_V1),
        0xCA1882F4,
        1,
        0,
        1_500_000_000_000,
    )
    assert msg.key is None and msg.value == b"hello" and not msg.is_wrapper
    assert msg.timestamp_type == 0 and msg.compression_type == 0
    assert summary(msg.records()) == [(7, 1_500_000_000_000, 0, None, b"hello")]


def test_log_append_time_bit_on_plain_message():
    entry = raw_message(3, 1, b"k", b"v", attributes=0x08, timestamp=42)
    [rec] = iter_legacy_records(entry)
    assert (rec.timestamp, rec.timestamp_type, rec.attributes) == (42, 1, 0x08)


@pytest.mark.parametrize("magic", MAGICS)
@pytest.mark.parametrize("codec", CODECS[1:])
def test_wrapper_layout(magic, codec):
    data = build(magic, codec, ITEMS, first_offset=10)
    [msg] = iter_legacy_messages(data)
    last = 10 + len(ITEMS) - 1
    assert msg.offset == last and msg.key is None and msg.compression_type == codec and msg.is_wrapper
    assert msg.size == len(data)
    inner = msg.inner_messages()
    if magic == 1:
        assert [m.offset for m in inner] == list(range(len(ITEMS)))
        assert msg.timestamp == max(ts for ts, _, _ in ITEMS)
    else:
        assert [m.offset for m in inner] == list(range(10, last + 1))
        assert msg.timestamp == -1
    records = list(iter_legacy_records(data))
    assert summary(records) == expected(magic, ITEMS, 10)
    assert all(r.compression_type == codec and r.attributes == 0 and r.magic == magic for r in records)
    assert [r.checksum for r in records] == [m.crc for m in inner]


def test_v1_log_append_time_wrapper_overrides_inner_timestamps():
    inner = b"".join(raw_message(i, 1, None, b"v%d" % i, timestamp=100 + i) for i in range(3))
    data = wrapper_message(52, 1, codecs.GZIP, inner, timestamp=999, attributes=codecs.GZIP | 0x08)
    assert summary(iter_legacy_records(data)) == [(50 + i, 999, 1, None, b"v%d" % i) for i in range(3)]


def test_v1_wrapper_below_its_relative_offsets_keeps_them():
    # A producer's set before the broker assigned offsets: Kafka reads the inner offsets as they are.
    inner = b"".join(raw_message(i, 1, None, b"v", timestamp=1) for i in range(3))
    data = wrapper_message(0, 1, codecs.SNAPPY, inner, timestamp=1)
    assert [r.offset for r in iter_legacy_records(data)] == [0, 1, 2]


def test_snappy_raw_payload_is_read():
    inner = raw_message(0, 0, b"k", b"v")
    data = raw_message(0, 0, None, codecs.snappy_encode(inner, xerial=False), attributes=codecs.SNAPPY)
    assert summary(iter_legacy_records(data)) == [(0, -1, -1, b"k", b"v")]


# -- builder ---------------------------------------------------------------


def test_builder_rejects_bad_arguments():
    with pytest.raises(ValueError):
        LegacyRecordBatchBuilder(2)
    with pytest.raises(UnsupportedCodecError):
        LegacyRecordBatchBuilder(1, codecs.ZSTD)
    with pytest.raises(UnsupportedCodecError):
        LegacyRecordBatchBuilder(1, 7)
    with pytest.raises(ValueError):
        LegacyRecordBatchBuilder(1, 0, batch_size=0)
    builder = LegacyRecordBatchBuilder(1)
    with pytest.raises(ValueError, match="headers"):
        builder.append(0, 1, b"k", b"v", headers=[("h", b"x")])
    with pytest.raises(TypeError):
        builder.append(0, 1, "text", b"v")
    with pytest.raises(TypeError):
        builder.append(0, 1, b"k", 12)
    with pytest.raises(TypeError):
        builder.append(0, 1.5, b"k", b"v")
    with pytest.raises(TypeError):
        builder.append("0", 1, b"k", b"v")
    with pytest.raises(ValueError):
        builder.append(-1, 1, b"k", b"v")
    with pytest.raises(ValueError):
        builder.append(0, -2, b"k", b"v")
    assert builder.append(0, 1, b"k", b"v", headers=[]) is not None
    with pytest.raises(ValueError, match="previous offset 0"):
        builder.append(0, 1, b"k", b"v")
    assert builder.record_count() == 1


def test_builder_accepts_codec_names_and_buffers():
    builder = LegacyRecordBatchBuilder(1, "gzip")
    assert builder.compression_type == codecs.GZIP
    builder.append(0, 5, bytearray(b"k"), memoryview(b"value"))
    assert summary(iter_legacy_records(builder.build())) == [(0, 5, 0, b"k", b"value")]


def test_builder_v0_ignores_timestamp_and_v1_defaults_to_now():
    v0 = LegacyRecordBatchBuilder(0)
    assert v0.append(0, 12345, None, b"x").timestamp == -1
    v1 = LegacyRecordBatchBuilder(1)
    meta = v1.append(0, None, None, b"x")
    [rec] = iter_legacy_records(v1.build())
    assert rec.timestamp == meta.timestamp > 1_500_000_000_000


@pytest.mark.parametrize("codec", [codecs.NONE, codecs.GZIP])
def test_builder_batch_size(codec):
    size = LegacyRecordBatchBuilder.size_in_bytes(1, b"k", b"v" * 100)
    builder = LegacyRecordBatchBuilder(1, codec, batch_size=10)
    assert builder.append(0, 1, b"k", b"v" * 100).size == size  # the first record always fits
    assert builder.append(1, 1, b"k", b"v") is None
    assert builder.size() == size
    builder = LegacyRecordBatchBuilder(1, codec, batch_size=3 * size + (0 if codec == codecs.NONE else 34))
    assert all(builder.append(i, 1, b"k", b"v" * 100) is not None for i in range(3))
    assert builder.append(3, 1, b"k", b"v" * 100) is None
    assert len(list(iter_legacy_records(builder.build()))) == 3


def test_builder_build_is_repeatable_and_empty_is_empty():
    builder = LegacyRecordBatchBuilder(1, codecs.LZ4)
    assert builder.build() == b""
    builder.append(0, 1, None, b"a")
    first = builder.build()
    assert summary(iter_legacy_records(first)) == [(0, 1, 0, None, b"a")]
    builder.append(1, 2, None, b"b")
    assert summary(iter_legacy_records(builder.build())) == [(0, 1, 0, None, b"a"), (1, 2, 0, None, b"b")]


# -- peers -----------------------------------------------------------------


def _kafka_python_records(data):
    from kafka.record.memory_records import MemoryRecords

    out = []
    records = MemoryRecords(bytes(data))
    while records.has_next():
        batch = records.next_batch()
        for rec in batch:
            assert rec.validate_crc()
            ts = -1 if rec.timestamp is None else rec.timestamp
            ts_type = -1 if rec.timestamp_type is None else rec.timestamp_type
            out.append((rec.offset, ts, ts_type, rec.key, rec.value))
    return out


def _aiokafka_records(data):
    from aiokafka.record.memory_records import MemoryRecords

    out = []
    records = MemoryRecords(bytes(data))
    while records.has_next():
        batch = records.next_batch()
        for rec in batch:
            ts = -1 if rec.timestamp is None else rec.timestamp
            ts_type = -1 if rec.timestamp_type is None else rec.timestamp_type
            out.append((rec.offset, ts, ts_type, rec.key, rec.value))
    return out


@pytest.mark.parametrize("magic", MAGICS)
@pytest.mark.parametrize("codec", CODECS)
def test_kafka_python_builder_output_decodes_here(magic, codec):
    from kafka.record.legacy_records import LegacyRecordBatchBuilder as Peer

    peer = Peer(magic, codec, 2**31 - 1)
    for i, (ts, key, value) in enumerate(ITEMS):
        assert peer.append(i, ts, key, value) is not None
    data = bytes(peer.build())
    assert summary(iter_legacy_records(data)) == expected(magic, ITEMS)
    assert validate_legacy(data) == len(ITEMS)
    if codec == codecs.NONE:
        assert build(magic, codec, ITEMS) == data


@pytest.mark.parametrize("magic", MAGICS)
@pytest.mark.parametrize("codec", CODECS)
def test_our_output_decodes_in_kafka_python(magic, codec):
    data = build(magic, codec, ITEMS)
    assert _kafka_python_records(data) == expected(magic, ITEMS)


@pytest.mark.parametrize("magic", MAGICS)
@pytest.mark.parametrize("codec", CODECS)
def test_aiokafka_interop(magic, codec):
    from aiokafka.record.legacy_records import LegacyRecordBatchBuilder as Peer

    if magic == 0 and codec == codecs.LZ4:
        # aiokafka neither writes nor reads Kafka 0.8's lz4 frames; kafka-python covers them.
        with pytest.raises(Exception, match="LZ4"):
            _aiokafka_records(build(magic, codec, ITEMS))
        return
    peer = Peer(magic, codec, 2**31 - 1)
    for i, (ts, key, value) in enumerate(ITEMS):
        assert peer.append(i, ts, key, value) is not None
    data = bytes(peer.build())
    assert summary(iter_legacy_records(data)) == expected(magic, ITEMS)
    if codec == codecs.NONE:
        assert build(magic, codec, ITEMS) == data
    assert _aiokafka_records(build(magic, codec, ITEMS)) == expected(magic, ITEMS)


# -- properties ------------------------------------------------------------

maybe_bytes = st.one_of(st.none(), st.binary(max_size=40))
timestamps = st.one_of(st.just(-1), st.integers(min_value=0, max_value=2**63 - 1))
item_lists = st.lists(st.tuples(timestamps, maybe_bytes, maybe_bytes), min_size=1, max_size=8)


@settings(max_examples=150, deadline=None)
@given(
    items=item_lists,
    magic=st.sampled_from(MAGICS),
    codec=st.sampled_from(CODECS),
    first=st.integers(min_value=0, max_value=2**40),
)
def test_build_then_parse_round_trip(items, magic, codec, first):
    data = build(magic, codec, items, first)
    assert summary(iter_legacy_records(data)) == expected(magic, items, first)
    assert validate_legacy(data) == len(items)
    assert valid_prefix_length(data) == len(data)
    assert summary(iter_legacy_records(data, validate_crc=False)) == expected(magic, items, first)


def _entries(data):
    """(start, end) of each outer entry, from the framing."""
    out = []
    pos = 0
    while pos + 12 <= len(data):
        (size,) = struct.unpack_from(">i", data, pos + 8)
        if pos + 12 + size > len(data):
            break
        out.append((pos, pos + 12 + size))
        pos += 12 + size
    return out


def _records_per_entry(data):
    return [summary(iter_legacy_records(data[a:b])) for a, b in _entries(data)]


@st.composite
def message_sets(draw):
    """A set of several outer messages (plain and wrappers), maybe ending in a partial message."""
    magic = draw(st.sampled_from(MAGICS))
    parts = []
    offset = 0
    for _ in range(draw(st.integers(1, 4))):
        codec = draw(st.sampled_from(CODECS))
        items = draw(st.lists(st.tuples(timestamps, maybe_bytes, maybe_bytes), min_size=1, max_size=3))
        parts.append(bytes(build(magic, codec, items, offset)))
        offset += len(items)
    whole = b"".join(parts)
    extra = bytes(build(magic, draw(st.sampled_from(CODECS)), [(5, b"tail-key", b"tail-value")], offset))
    cut = draw(st.integers(0, len(extra) - 1))
    return whole, extra[:cut]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(sets=message_sets(), data=st.data())
def test_any_flipped_byte_is_detected(sets, data):
    whole, partial = sets
    pos = data.draw(st.integers(0, len(whole + partial) - 1), label="position")
    mask = data.draw(st.integers(1, 255), label="xor")
    check_flip(whole, partial, pos, mask)


@pytest.mark.parametrize("magic", MAGICS)
def test_every_flipped_byte_of_a_mixed_set_is_detected(magic):
    whole = b"".join(
        [
            build(magic, codecs.NONE, ITEMS[:2]),
            build(magic, codecs.GZIP, ITEMS[2:4], 2),
            build(magic, codecs.LZ4, ITEMS[4:5], 4),
            build(magic, codecs.SNAPPY, ITEMS[5:], 5),
        ]
    )
    partial = bytes(build(magic, codecs.NONE, ITEMS[:1], 8))[:-3]
    for pos in range(len(whole) + len(partial)):
        for mask in (0x01, 0x80, 0xFF):
            check_flip(whole, partial, pos, mask)


def check_flip(whole, partial, pos, mask):
    """What flipping byte ``pos`` of ``whole + partial`` with ``mask`` must do, by the field it hits."""
    buf = whole + partial
    flipped = bytearray(buf)
    flipped[pos] ^= mask
    flipped = bytes(flipped)
    per_entry = _records_per_entry(whole)
    original = [r for recs in per_entry for r in recs]

    if pos >= len(whole):
        # Inside the trailing partial: ignored, unless it makes the size impossible or the message whole.
        try:
            got = summary(iter_legacy_records(flipped))
        except CorruptRecordError:
            return
        assert got == original
        return

    index = next(i for i, (a, b) in enumerate(_entries(whole)) if a <= pos < b)
    start = _entries(whole)[index][0]
    field = pos - start
    if field >= 8:
        # A producer's set has no partial message, so even a size flip is an error there.
        with pytest.raises(CorruptRecordError):
            validate_legacy(flipped[: len(whole)])
    if field < 8:
        # The offset field is not covered by the CRC: the same records, offsets aside.
        got = summary(iter_legacy_records(flipped))
        assert [r[1:] for r in got] == [r[1:] for r in original]
        before = [r for recs in per_entry[:index] for r in recs]
        after = [r for recs in per_entry[index + 1 :] for r in recs]
        assert got[: len(before)] == before
        assert got[len(got) - len(after) :] == after
    elif field < 12:
        # The size field is not covered either: a size running past the end reads as a
        # partial message (what a fetch response ends with); any other size is caught.
        try:
            got = summary(iter_legacy_records(flipped))
        except CorruptRecordError:
            return
        (size,) = struct.unpack_from(">i", flipped, start + 8)
        assert start + 12 + size > len(flipped)
        assert got == [r for recs in per_entry[:index] for r in recs]
    else:
        with pytest.raises(CorruptRecordError, match="offset"):
            list(iter_legacy_records(flipped))


def test_flipped_offset_field_is_not_an_error_in_validate():
    data = bytearray(build(1, codecs.NONE, ITEMS))
    data[3] ^= 0x40
    assert validate_legacy(data) == len(ITEMS)


@settings(max_examples=60, deadline=None)
@given(sets=message_sets())
def test_truncation_gives_exactly_the_whole_messages(sets):
    whole, partial = sets
    buf = whole + partial
    entries = _entries(whole)
    per_entry = _records_per_entry(whole)
    for k in range(len(buf) + 1):
        n = sum(1 for _, b in entries if b <= k)
        prefix = entries[n - 1][1] if n else 0
        assert valid_prefix_length(buf[:k]) == prefix
        assert summary(iter_legacy_records(buf[:k])) == [r for recs in per_entry[:n] for r in recs]
        assert [m.position for m in iter_legacy_messages(buf[:k])] == [a for a, _ in entries[:n]]
        if k != prefix:
            with pytest.raises(CorruptRecordError):
                validate_legacy(buf[:k])


# -- structural errors -----------------------------------------------------

V0 = raw_message(9, 0, b"k", b"v")
PLAIN_INNER_V1 = b"".join(raw_message(i, 1, None, b"v", timestamp=1) for i in range(2))


STRUCTURAL = [
    (raw_message(9, 0, b"k", b"v", size=-1), "size -1"),
    (raw_message(9, 0, b"k", b"v", size=13), "size 13"),
    (raw_message(9, 1, b"k", b"v", size=20), "size 20"),
    (raw_message(9, 2, b"k", b"v"), "magic 2"),
    (raw_message(9, -1, b"k", b"v"), "magic -1"),
    (raw_message(9, 0, b"k", b"v", key_len=50), "key of 50 bytes"),
    (raw_message(9, 0, b"k", b"v", key_len=-2), "key length -2"),
    (raw_message(9, 0, b"k", b"v", value_len=2), "value of 2 bytes"),
    (raw_message(9, 0, b"k", b"v", value_len=-7), "value length -7"),
    (raw_message(9, 0, b"k", b"v", value_len=0), "end 1 bytes earlier"),
    (raw_message(9, 0, b"k", b"v", trailer=b"xyz"), "end 3 bytes earlier"),
    (raw_message(9, 1, b"k", b"v", crc=0), "CRC-32"),
    (raw_message(9, 1, b"k", b"v", attributes=codecs.ZSTD), "codec 4"),
    (raw_message(9, 0, b"k", b"v", attributes=6), "codec 6"),
    (raw_message(9, 0, None, None, attributes=codecs.GZIP), "compressed value is null"),
    (raw_message(9, 0, None, b"", attributes=codecs.GZIP), "empty"),
    (raw_message(9, 0, None, codecs.gzip_encode(b""), attributes=codecs.GZIP), "empty"),
    (raw_message(9, 1, None, b"not snappy at all", attributes=codecs.SNAPPY), "does not decompress"),
    (raw_message(9, 1, None, b"\x04\x22\x4d\x18garbage", attributes=codecs.LZ4), "does not decompress"),
    (wrapper_message(9, 0, codecs.GZIP, V0[:-1]), "inner message at offset 9"),
    (wrapper_message(9, 0, codecs.GZIP, V0 + b"\x00" * 5), "fewer than an offset and a size"),
    (wrapper_message(9, 0, codecs.GZIP, raw_message(9, 0, b"k", b"v", crc=1)), "inner message at offset 9 fails"),
    (wrapper_message(9, 1, codecs.GZIP, V0), "magic 0, the wrapper magic 1"),
    (wrapper_message(9, 0, codecs.GZIP, wrapper_message(9, 0, codecs.GZIP, V0)), "itself compressed"),
    (wrapper_message(9, 1, codecs.LZ4, PLAIN_INNER_V1, timestamp=1, attributes=codecs.ZSTD), "codec 4"),
]


@pytest.mark.parametrize("entry, problem", STRUCTURAL, ids=["%d-%s" % (i, p) for i, (_, p) in enumerate(STRUCTURAL)])
def test_structural_problems_raise_naming_offset_and_problem(entry, problem):
    for buffer in (entry, V0 + entry):
        with pytest.raises(CorruptRecordError, match="offset 9") as info:
            list(iter_legacy_records(buffer))
        assert problem in str(info.value)
        with pytest.raises(CorruptRecordError):
            validate_legacy(buffer)
        with pytest.raises(CorruptRecordError):
            assign_offsets_legacy(bytearray(buffer), 0)


def test_partial_message_with_impossible_size_raises():
    with pytest.raises(CorruptRecordError, match="size -5"):
        list(iter_legacy_records(V0 + struct.pack(">qi", 10, -5)))
    with pytest.raises(CorruptRecordError, match="size -5"):
        valid_prefix_length(V0 + struct.pack(">qi", 10, -5))
    assert valid_prefix_length(V0 + struct.pack(">qi", 10, 500)) == len(V0)


def test_validate_crc_false_still_checks_structure():
    bad_crc = raw_message(9, 1, b"k", b"v", crc=0)
    assert summary(iter_legacy_records(bad_crc, validate_crc=False)) == [(9, -1, 0, b"k", b"v")]
    with pytest.raises(CorruptRecordError):
        list(iter_legacy_records(raw_message(9, 0, b"k", b"v", key_len=50, crc=0), validate_crc=False))


def test_partial_not_allowed_for_producer_sets():
    with pytest.raises(CorruptRecordError, match="only 2 bytes follow"):
        list(iter_legacy_records(V0 + V0[:14], allow_partial=False))
    assert summary(iter_legacy_records(V0 + V0[:14])) == [(9, -1, -1, b"k", b"v")]


def test_messages_and_records_accept_any_buffer():
    data = build(1, codecs.NONE, ITEMS)
    for buffer in (bytes(data), data, memoryview(data), memoryview(bytes(data)).cast("c")):
        assert summary(iter_legacy_records(buffer)) == expected(1, ITEMS)
    assert isinstance(next(iter_legacy_messages(data)), LegacyMessage)


# -- offsets ---------------------------------------------------------------


def _offsets(data):
    return [r.offset for r in iter_legacy_records(data)]


@pytest.mark.parametrize("magic", MAGICS)
def test_assign_offsets_uncompressed_patches_in_place(magic):
    data = build(magic, codecs.NONE, ITEMS)
    original = bytes(data)
    out, last = assign_offsets_legacy(data, 1000)
    assert out is data and last == 1000 + len(ITEMS) - 1
    assert _offsets(out) == list(range(1000, 1000 + len(ITEMS)))
    assert validate_legacy(out) == len(ITEMS)
    entries = _entries(original)
    for a, b in entries:  # only the offset fields changed; CRCs untouched
        assert out[a + 8 : b] == original[a + 8 : b]
    copy, last = assign_offsets_legacy(original, 7)
    assert isinstance(copy, bytearray) and _offsets(copy) == list(range(7, 7 + len(ITEMS)))
    assert bytes(original) == original


@pytest.mark.parametrize("codec", CODECS[1:])
def test_assign_offsets_v1_wrapper_patches_the_wrapper_offset(codec):
    data = build(1, codec, ITEMS)
    original = bytes(data)
    out, last = assign_offsets_legacy(data, 500)
    assert out is data and last == 500 + len(ITEMS) - 1
    assert out[8:] == original[8:] and struct.unpack_from(">q", out)[0] == last
    assert summary(iter_legacy_records(out)) == expected(1, ITEMS, 500)


@pytest.mark.parametrize("codec", CODECS[1:])
def test_assign_offsets_v0_wrapper_recompresses(codec):
    data = build(0, codec, ITEMS)
    out, last = assign_offsets_legacy(data, 500)
    assert last == 500 + len(ITEMS) - 1
    assert validate_legacy(out) == len(ITEMS)
    [msg] = iter_legacy_messages(out)
    assert msg.offset == last and msg.compression_type == codec
    assert [m.offset for m in msg.inner_messages()] == list(range(500, last + 1))
    assert summary(iter_legacy_records(out)) == expected(0, ITEMS, 500)
    assert _kafka_python_records(out) == expected(0, ITEMS, 500)


def test_assign_offsets_v1_wrapper_with_odd_relative_offsets_is_renumbered():
    inner = b"".join(raw_message(i * 3, 1, None, b"v%d" % i, timestamp=i) for i in range(3))
    out, last = assign_offsets_legacy(wrapper_message(0, 1, codecs.GZIP, inner, timestamp=2), 40)
    assert last == 42
    [msg] = iter_legacy_messages(out)
    assert msg.offset == 42 and [m.offset for m in msg.inner_messages()] == [0, 1, 2]
    assert summary(iter_legacy_records(out)) == [(40 + i, i, 0, None, b"v%d" % i) for i in range(3)]


@pytest.mark.parametrize("magic", MAGICS)
def test_assign_offsets_mixed_set_and_peer_sets(magic):
    from kafka.record.legacy_records import LegacyRecordBatchBuilder as Peer

    parts = []
    for codec in CODECS:
        peer = Peer(magic, codec, 2**31 - 1)
        for i, (ts, key, value) in enumerate(ITEMS[:3]):
            peer.append(i, ts, key, value)
        parts.append(bytes(peer.build()))
    out, last = assign_offsets_legacy(b"".join(parts), 10)
    assert last == 10 + 4 * 3 - 1
    assert _offsets(out) == list(range(10, last + 1))
    assert _kafka_python_records(out) == [
        (10 + i, r[1], r[2], r[3], r[4]) for i, r in enumerate(expected(magic, ITEMS[:3]) * 4)
    ]


def test_assign_offsets_log_append_time():
    data = build(1, codecs.NONE, ITEMS[:2]) + build(1, codecs.GZIP, ITEMS[2:4]) + build(1, codecs.LZ4, ITEMS[:1], 5)
    out, last = assign_offsets_legacy(data, 0, log_append_time=777)
    assert last == 4
    assert [(r.offset, r.timestamp, r.timestamp_type) for r in iter_legacy_records(out)] == [
        (i, 777, 1) for i in range(5)
    ]
    assert validate_legacy(out) == 5
    v0 = build(0, codecs.NONE, ITEMS[:2])
    out, _ = assign_offsets_legacy(v0, 3, log_append_time=777)
    assert summary(iter_legacy_records(out)) == expected(0, ITEMS[:2], 3)


def test_assign_offsets_checks_everything_before_patching():
    data = bytearray(build(1, codecs.NONE, ITEMS) + raw_message(9, 1, b"k", b"v", crc=1))
    original = bytes(data)
    with pytest.raises(CorruptRecordError):
        assign_offsets_legacy(data, 100)
    assert data == original
    with pytest.raises(InvalidRecordError):
        assign_offsets_legacy(b"", 0)
    with pytest.raises(CorruptRecordError):
        assign_offsets_legacy(V0 + V0[:20], 0)
    with pytest.raises(ValueError):
        assign_offsets_legacy(V0, -1)
    with pytest.raises(ValueError):
        assign_offsets_legacy(V0 + V0, 2**63 - 1)
    with pytest.raises(TypeError):
        assign_offsets_legacy(V0, 1.0)


def test_assign_offsets_writable_memoryview_in_place():
    data = build(1, codecs.NONE, ITEMS[:2])
    view = memoryview(data)
    out, last = assign_offsets_legacy(view, 3)
    assert out is view and last == 4 and _offsets(data) == [3, 4]


@settings(max_examples=60, deadline=None)
@given(sets=message_sets(), base=st.integers(0, 2**40))
def test_assign_offsets_property(sets, base):
    whole, _ = sets
    count = validate_legacy(whole)
    out, last = assign_offsets_legacy(whole, base)
    assert last == base + count - 1
    got = summary(iter_legacy_records(out))
    assert [r[0] for r in got] == list(range(base, last + 1))
    assert [r[1:] for r in got] == [r[1:] for r in summary(iter_legacy_records(whole))]
    assert validate_legacy(out) == count


# -- arbitrary bytes -------------------------------------------------------


def _parse_or_corrupt(buffer):
    try:
        return summary(iter_legacy_records(buffer))
    except CorruptRecordError:
        return None


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=120))
def test_arbitrary_bytes_parse_or_raise_corrupt(blob):
    _parse_or_corrupt(blob)
    _parse_or_corrupt(V0 + blob)
    try:
        valid_prefix_length(blob)
    except CorruptRecordError:
        pass


@settings(max_examples=300, deadline=None)
@given(blob=st.binary(max_size=120), magic=st.sampled_from(MAGICS), codec=st.sampled_from(CODECS[1:]))
def test_arbitrary_payloads_behind_a_good_crc_raise_corrupt(blob, magic, codec):
    # The CRC matches, so the decompressor and the inner-set parser see the garbage.
    _parse_or_corrupt(raw_message(3, magic, None, blob, attributes=codec, timestamp=1))
    _parse_or_corrupt(wrapper_message(3, magic, codec, blob, timestamp=1))
    _parse_or_corrupt(wrapper_message(3, magic, codec, raw_message(0, magic, None, b"v", timestamp=1) + blob))


def test_inner_messages_of_a_plain_message_is_a_usage_error():
    [msg] = iter_legacy_messages(V0)
    with pytest.raises(ValueError):
        msg.inner_messages()
    assert summary(msg.records()) == [(9, -1, -1, b"k", b"v")]


# -- a producer's wrappers are bounded ---------------------------------------------


@pytest.mark.parametrize("magic", MAGICS)
@pytest.mark.parametrize("codec", CODECS[1:])
def test_assign_offsets_refuses_a_wrapper_larger_than_the_window(monkeypatch, magic, codec):
    """The inner set is decompressed (and for v0 recompressed) whole, so it is bounded by the window."""
    inner = b"".join(raw_message(i, magic, b"k", bytes(3000), timestamp=i) for i in range(10))
    data = wrapper_message(9, magic, codec, inner, timestamp=9)
    monkeypatch.setattr(codecs, "DECOMPRESS_WINDOW", len(inner))
    out, last = assign_offsets_legacy(bytearray(data), 100)
    assert last == 109 and _offsets(out) == list(range(100, 110))
    monkeypatch.setattr(codecs, "DECOMPRESS_WINDOW", len(inner) - 1)
    # (snappy says it of its one block)
    with pytest.raises(MessageTooLargeError, match="wrapper at offset 9: .* more than( the)? %d" % (len(inner) - 1)):
        assign_offsets_legacy(bytearray(data), 100)


@settings(max_examples=60, deadline=None)
@given(sets=message_sets(), base=st.integers(0, 2**40))
def test_first_keyless_offset_is_the_first_record_without_a_key(sets, base):
    out, _ = assign_offsets_legacy(sets[0], base)
    keyless = [r.offset for r in iter_legacy_records(out) if r.key is None]
    assert first_keyless_offset(out) == (keyless[0] if keyless else -1)
