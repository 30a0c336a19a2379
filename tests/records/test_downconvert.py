"""Down-conversion of v2 batches (and legacy sets) to the magic 0/1 messages of old Fetch versions.

For random logs of v2 batches (every legacy codec, compaction gaps, both timestamp
types, headers) the converted set decodes, with pylogq's legacy readers and with
kafka-python's as an independent decoder, to the same offsets, keys, values and (magic
1) timestamps; a bounded conversion is a prefix of the whole one that stops only
where the next message would not fit, and reads the records one entry at a time.
"""

from __future__ import annotations

from typing import Any, List, NamedTuple, Optional, Tuple

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pylogq.errors import UnsupportedCompressionTypeError
from pylogq.records import RecordBatch, RecordBatchBuilder, iter_batches
from pylogq.records.default_records import LOG_APPEND_TIME
from pylogq.records.downconvert import down_convert, down_convert_buffer, target_magic
from pylogq.records.legacy import LegacyRecordBatchBuilder, iter_legacy_messages, iter_legacy_records

kafka_record = pytest.importorskip("kafka.record")

LEGACY_CODECS = ("none", "gzip", "snappy", "lz4")


class Rec(NamedTuple):
    offset: int
    key: Optional[bytes]
    value: Optional[bytes]
    timestamp: int


def v2_batch(base_offset: int, deltas: List[int], codec: str = "none", timestamp_type: int = 0,
             keys: Optional[List[Optional[bytes]]] = None, values: Optional[List[Optional[bytes]]] = None,
             timestamps: Optional[List[int]] = None, is_control: bool = False) -> bytes:
    builder = RecordBatchBuilder(codec, base_offset=base_offset, timestamp_type=timestamp_type,
                                 is_control=is_control)
    for i, delta in enumerate(deltas):
        builder.append(delta, 1000 + i if timestamps is None else timestamps[i],
                       b"k%d" % delta if keys is None else keys[i],
                       b"v%d" % delta if values is None else values[i],
                       [("h", b"x")])
    return bytes(builder.build())


def v2_records(log: bytes) -> List[Rec]:
    """What the v2 log holds, as records: LogAppendTime batches stamp each record with the
    batch's max timestamp; control batches are not records."""
    out = []
    for header in iter_batches(log):
        batch = RecordBatch(log[header.position:header.position + header.size])
        if batch.is_control_batch:
            continue
        for r in batch:
            ts = batch.max_timestamp if batch.timestamp_type == LOG_APPEND_TIME else r.timestamp
            out.append(Rec(r.offset, r.key, r.value, ts))
    return out


def pylogq_read(data: bytes, magic: int) -> List[Rec]:
    out = []
    for m in iter_legacy_messages(data, True, False):
        assert m.magic == magic
        for r in m.records():
            out.append(Rec(r.offset, r.key, r.value, r.timestamp))
    return out


def kafka_python_read(data: bytes, magic: int) -> List[Rec]:
    records = kafka_record.MemoryRecords(data)
    out = []
    while True:
        batch = records.next_batch()
        if batch is None:
            break
        assert isinstance(batch, kafka_record.legacy_records.LegacyRecordBatch)
        assert batch.magic == magic and batch.validate_crc()
        for r in batch:
            out.append(Rec(r.offset, r.key, r.value, -1 if r.timestamp is None else r.timestamp))
    return out


def as_magic(records: List[Rec], magic: int) -> List[Rec]:
    return records if magic else [r._replace(timestamp=-1) for r in records]


# -- random logs --------------------------------------------------------------------------

blob = st.one_of(st.none(), st.binary(max_size=40))


@st.composite
def v2_logs(draw: Any) -> bytes:
    """Batches with increasing offsets, gaps between and inside them (a compacted log)."""
    out = bytearray()
    offset = draw(st.integers(0, 1 << 40))
    for _ in range(draw(st.integers(1, 5))):
        n = draw(st.integers(1, 8))
        gaps = draw(st.lists(st.integers(0, 3), min_size=n, max_size=n))
        deltas = []
        delta = 0
        for g in gaps:
            deltas.append(delta)
            delta += 1 + g
        codec = draw(st.sampled_from(LEGACY_CODECS))
        ts_type = draw(st.sampled_from([0, 1]))
        keys = draw(st.lists(blob, min_size=n, max_size=n))
        values = draw(st.lists(blob, min_size=n, max_size=n))
        stamps = draw(st.lists(st.integers(0, 1 << 45), min_size=n, max_size=n))
        out += v2_batch(offset, deltas, codec, ts_type, keys, values, stamps)
        offset += deltas[-1] + 1 + draw(st.integers(0, 5))
    return bytes(out)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(log=v2_logs(), magic=st.sampled_from([0, 1]))
def test_converted_records_decode_to_the_originals(log: bytes, magic: int) -> None:
    converted = down_convert_buffer(log, magic)
    want = as_magic(v2_records(log), magic)
    assert pylogq_read(converted, magic) == want
    assert kafka_python_read(converted, magic) == want


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(log=v2_logs(), magic=st.sampled_from([0, 1]), max_bytes=st.integers(0, 3000))
def test_a_bounded_conversion_is_a_maximal_prefix(log: bytes, magic: int, max_bytes: int) -> None:
    full = down_convert_buffer(log, magic)
    bounded = down_convert_buffer(log, magic, max_bytes=max_bytes)
    assert full.startswith(bounded)
    entries = [m.size for m in iter_legacy_messages(full)]
    assert bounded, "the first message always comes back"
    ends = [sum(entries[:i + 1]) for i in range(len(entries))]
    assert len(bounded) in ends
    taken = ends.index(len(bounded)) + 1
    assert len(bounded) <= max_bytes or taken == 1
    if taken < len(entries):
        assert ends[taken] > max_bytes  # the next one would not have fitted


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(log=v2_logs(), magic=st.sampled_from([0, 1]), max_bytes=st.integers(0, 2000))
def test_entries_are_read_one_at_a_time_and_no_further_than_needed(log: bytes, magic: int,
                                                                   max_bytes: int) -> None:
    reads: List[Tuple[int, int]] = []

    def read_at(position: int, n: int) -> bytes:
        reads.append((position, n))
        return log[position:position + n]

    converted = down_convert(read_at, len(log), magic, 0, max_bytes)
    sizes = [h.size for h in iter_batches(log)]
    assert max(n for _, n in reads) <= max(sizes)
    # Entries past the one that filled the limit are not read.
    read_entries = {p for p, n in reads if n > 17}
    starts = [sum(sizes[:i]) for i in range(len(sizes))]
    converted_ends = [down_convert_buffer(log[:s + size], magic) for s, size in zip(starts, sizes)]
    needed = next((i + 1 for i, c in enumerate(converted_ends) if len(c) > max_bytes), len(sizes))
    assert read_entries <= set(starts[:needed + 1])
    assert converted == down_convert_buffer(log, magic, max_bytes=max_bytes)


# -- the rules, one at a time -------------------------------------------------------------


@pytest.mark.parametrize("codec", LEGACY_CODECS)
def test_a_compressed_batch_becomes_one_wrapper_of_its_codec(codec: str) -> None:
    log = v2_batch(100, [0, 2, 5], codec)
    for magic in (0, 1):
        converted = down_convert_buffer(log, magic)
        messages = list(iter_legacy_messages(converted))
        if codec == "none":
            assert [m.offset for m in messages] == [100, 102, 105]
            continue
        [wrapper] = messages
        assert wrapper.offset == 105 and wrapper.compression_type == LEGACY_CODECS.index(codec)
        inner = [m.offset for m in wrapper.inner_messages()]
        # magic 1: offsets relative to the first record; magic 0: absolute.
        assert inner == ([0, 2, 5] if magic else [100, 102, 105])
        assert [r.offset for r in wrapper.records()] == [100, 102, 105]
        if magic:
            assert wrapper.timestamp == 1002  # the largest inner timestamp


def test_log_append_time_is_kept_for_magic_1() -> None:
    log = v2_batch(0, [0, 1], "none", LOG_APPEND_TIME) + v2_batch(2, [0, 1], "gzip", LOG_APPEND_TIME)
    records = list(iter_legacy_records(down_convert_buffer(log, 1)))
    assert [r.timestamp_type for r in records] == [1, 1, 1, 1]
    stamps = [RecordBatch(log[h.position:h.position + h.size]).max_timestamp for h in iter_batches(log)]
    assert [r.timestamp for r in records] == [stamps[0], stamps[0], stamps[1], stamps[1]]


def test_headers_are_dropped_and_control_batches_skipped() -> None:
    control = v2_batch(3, [0], "none", keys=[b"\x00\x00\x00\x01"], values=[b"\x00\x00\x00\x00\x00\x00"],
                       is_control=True)
    log = v2_batch(0, [0, 1, 2]) + control + v2_batch(4, [0])
    records = list(iter_legacy_records(down_convert_buffer(log, 1)))
    assert [r.offset for r in records] == [0, 1, 2, 4]
    assert all(r.headers == [] for r in records)


def test_an_uncompressed_batch_starts_at_the_fetch_offset_a_compressed_one_does_not() -> None:
    log = v2_batch(10, [0, 1, 2, 3]) + v2_batch(14, [0, 1, 2], "gzip")
    assert [r.offset for r in iter_legacy_records(down_convert_buffer(log, 1, fetch_offset=12))] == \
        [12, 13, 14, 15, 16]
    assert [r.offset for r in iter_legacy_records(down_convert_buffer(log[len(v2_batch(10, [0, 1, 2, 3])):], 1,
                                                                      fetch_offset=15))] == [14, 15, 16]


def test_zstd_cannot_be_converted() -> None:
    zstd = v2_batch(5, [0, 1], "zstd")
    with pytest.raises(UnsupportedCompressionTypeError):
        down_convert_buffer(zstd, 1)
    # After other batches, the conversion ends before it.
    log = v2_batch(0, [0, 1, 2, 3, 4], "gzip") + zstd + v2_batch(7, [0])
    assert [r.offset for r in iter_legacy_records(down_convert_buffer(log, 0))] == [0, 1, 2, 3, 4]


@pytest.mark.parametrize("codec", LEGACY_CODECS)
def test_legacy_entries_pass_through_or_go_down_to_magic_0(codec: str) -> None:
    v0 = LegacyRecordBatchBuilder(0, codec)
    v1 = LegacyRecordBatchBuilder(1, codec)
    for i in range(3):
        v0.append(i, None, b"k%d" % i, b"a%d" % i)
        v1.append(3 + i, 5000 + i, b"k%d" % (3 + i), b"b%d" % i)
    # The offsets are the log's already: a v1 wrapper carries its last absolute offset.
    legacy0, legacy1 = bytes(v0.build()), bytes(v1.build())
    log = legacy0 + legacy1 + v2_batch(6, [0, 1], codec)
    # magic 1: both legacy sets unchanged, the v2 batch converted.
    to_v1 = down_convert_buffer(log, 1)
    assert to_v1.startswith(legacy0 + legacy1)
    assert [m.magic for m in iter_legacy_messages(to_v1[len(legacy0 + legacy1):])] in ([1], [1, 1])
    # magic 0: the magic 0 set unchanged, the magic 1 set and the batch converted.
    to_v0 = down_convert_buffer(log, 0)
    assert to_v0.startswith(legacy0)
    assert all(m.magic == 0 for m in iter_legacy_messages(to_v0))
    want = [(i, b"k%d" % i) for i in range(6)] + [(6, b"k0"), (7, b"k1")]
    assert [(r.offset, r.key) for r in iter_legacy_records(to_v0)] == want
    assert [(r.offset, r.key) for r in iter_legacy_records(to_v1)] == want
    assert [r.offset for r in kafka_python_read_any(to_v0)] == [o for o, _ in want]


def kafka_python_read_any(data: bytes) -> List[Rec]:
    records = kafka_record.MemoryRecords(data)
    out = []
    while True:
        batch = records.next_batch()
        if batch is None:
            break
        out += [Rec(r.offset, r.key, r.value, -1 if r.timestamp is None else r.timestamp) for r in batch]
    return out


def test_target_magic_per_fetch_version() -> None:
    assert [target_magic(v) for v in range(6)] == [0, 0, 1, 1, 2, 2]


def test_a_partial_entry_at_the_end_is_left_out() -> None:
    log = v2_batch(0, [0, 1]) + v2_batch(2, [0, 1])
    assert [r.offset for r in iter_legacy_records(down_convert_buffer(log[:-5], 1))] == [0, 1]


def test_only_magic_0_and_1_are_targets() -> None:
    with pytest.raises(ValueError):
        down_convert_buffer(v2_batch(0, [0]), 2)
