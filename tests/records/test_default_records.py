"""Magic v2 record batches: golden bytes, real-client interop, properties, corruption.

Every test runs against the compiled kernel and its pure-Python twin (the
``impl`` fixture), so both are held to the same behaviour.
"""

from __future__ import annotations

import importlib
import struct
import sys
import types

import crc32c as crc32c_peer
import pytest
from aiokafka.record.default_records import DefaultRecordBatch as AioBatch
from aiokafka.record.default_records import DefaultRecordBatchBuilder as AioBuilder
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka.record.default_records import DefaultRecordBatch as KpBatch
from kafka.record.default_records import DefaultRecordBatchBuilder as KpBuilder

from tests.conftest import IMPLEMENTATIONS
from pylogq import records
from pylogq.errors import CorruptRecordError, IllegalStateError, InvalidRecordError, UnsupportedCodecError
from pylogq.records import codecs, default_records

CODECS = [codecs.NONE, codecs.GZIP, codecs.SNAPPY, codecs.LZ4, codecs.ZSTD]
TS = 1_700_000_000_000

# kafka-python 3.0.12's bytes for two records, the second with two headers.
GOLDEN = bytes.fromhex(
    "0000000000000000000000530000000002f57d6e130000000000010000018bcfe568000000018bcfe56805"
    "ffffffffffffffffffffffffffff0000000218000000026b0a68656c6c6f0028000a02010a776f726c6404"
    "046831027604683201"
)
GOLDEN_RECORDS = [
    (0, TS, b"k", b"hello", []),
    (1, TS + 5, None, b"world", [("h1", b"v"), ("h2", None)]),
]


@pytest.fixture(params=IMPLEMENTATIONS)
def impl(request):
    if request.param == "pure":
        return default_records
    # A compiled module that does not import fails here: never a skip.
    return importlib.import_module("pylogq._core._records")


def build(impl, rows, codec=0, **kwargs):
    builder = impl.RecordBatchBuilder(codec, **kwargs)
    for i, (ts, key, value, headers) in enumerate(rows):
        assert builder.append(i, ts, key, value, headers)
    return bytes(builder.build())


def as_tuples(recs):
    return [(r.offset, r.timestamp, r.key, r.value, list(r.headers)) for r in recs]


# -- golden bytes and byte identity -------------------------------------------


def test_public_names_are_the_compiled_kernel_unless_disabled():
    from pylogq import _speedups

    expected = default_records if _speedups.NO_EXTENSIONS else importlib.import_module("pylogq._core._records")
    assert records.RecordBatch is expected.RecordBatch
    assert records.RecordBatchBuilder is expected.RecordBatchBuilder


def test_golden_batch_builds_byte_for_byte(impl):
    rows = [(ts, k, v, h) for _, ts, k, v, h in GOLDEN_RECORDS]
    assert build(impl, rows) == GOLDEN


def test_golden_batch_parses(impl):
    batch = impl.RecordBatch(GOLDEN)
    assert batch.base_offset == 0
    assert batch.batch_length == len(GOLDEN) - 12
    assert batch.magic == 2
    assert batch.crc == crc32c_peer.crc32c(GOLDEN[21:])
    assert batch.validate_crc()
    assert batch.records_count == 2 and batch.last_offset_delta == 1
    assert batch.base_timestamp == TS and batch.max_timestamp == TS + 5
    assert batch.producer_id == -1 and batch.producer_epoch == -1 and batch.base_sequence == -1
    assert not batch.is_transactional and not batch.is_control_batch
    assert batch.compression_type == 0 and batch.timestamp_type == 0
    assert as_tuples(batch) == GOLDEN_RECORDS


values_st = st.one_of(st.none(), st.binary(max_size=300))
headers_st = st.lists(st.tuples(st.text(max_size=20), st.one_of(st.none(), st.binary(max_size=50))), max_size=4)
ts_st = st.integers(min_value=0, max_value=2**41)
rows_st = st.lists(st.tuples(ts_st, values_st, values_st, headers_st), min_size=1, max_size=30)


@settings(max_examples=150, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rows=rows_st)
def test_uncompressed_batch_is_byte_identical_to_kafka_python(impl, rows):
    kp = KpBuilder(2, 0, False, -1, -1, -1, 2**30)
    for i, (ts, key, value, headers) in enumerate(rows):
        kp.append(i, ts, key, value, headers)
    assert build(impl, rows) == bytes(kp.build())


@settings(max_examples=50, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rows=rows_st, pid=st.integers(0, 2**40), epoch=st.integers(0, 2**15 - 1), seq=st.integers(0, 2**30))
def test_uncompressed_batch_is_byte_identical_to_aiokafka(impl, rows, pid, epoch, seq):
    # aiokafka, like the Java producer, leaves the partition leader epoch at -1.
    aio = AioBuilder(2, 0, 0, pid, epoch, seq, 2**30)
    for i, (ts, key, value, headers) in enumerate(rows):
        aio.append(i, ts, key, value, headers)
    ours = build(impl, rows, partition_leader_epoch=-1, producer_id=pid, producer_epoch=epoch, base_sequence=seq)
    assert ours == bytes(aio.build())


if len(IMPLEMENTATIONS) == 2:  # the pure-Python run has no compiled kernel to compare with

    def test_compiled_and_pure_build_the_same_bytes():
        compiled = importlib.import_module("pylogq._core._records")
        rows = [(TS + i, b"k%d" % i, b"v" * i, [("x", b"y")] * (i % 3)) for i in range(100)]
        for codec in CODECS:
            a = build(compiled, rows, codec)
            b = build(default_records, rows, codec)
            assert a == b


# -- interop with real clients ----------------------------------------------------


@pytest.mark.parametrize("codec", CODECS, ids=[codecs.NAMES[c] for c in CODECS])
@pytest.mark.parametrize("client", ["kafka-python", "aiokafka"])
def test_client_batches_decode_to_the_same_records(impl, client, codec):
    rows = [(TS + i * 7, None if i % 4 == 0 else b"key-%d" % i, b"value-%d" % i * 10, [("h", b"%d" % i)] if i % 3 == 0 else [])
            for i in range(200)]
    builder = (KpBuilder if client == "kafka-python" else AioBuilder)(2, codec, 0, 12345, 3, 77, 2**30)
    for i, (ts, k, v, h) in enumerate(rows):
        builder.append(i, ts, k, v, h)
    data = bytes(builder.build())
    batch = impl.RecordBatch(data)
    assert batch.compression_type == codec
    assert batch.producer_id == 12345 and batch.producer_epoch == 3 and batch.base_sequence == 77
    assert as_tuples(batch) == [(i, ts, k, v, h) for i, (ts, k, v, h) in enumerate(rows)]
    columns = records.decode_columns(data)
    assert list(columns.rows()) == [(i, ts, 0, k, v, h) for i, (ts, k, v, h) in enumerate(rows)]


@pytest.mark.parametrize("codec", CODECS, ids=[codecs.NAMES[c] for c in CODECS])
def test_pylogq_batches_decode_in_kafka_python_and_aiokafka(impl, codec):
    rows = [(TS + i, None if i % 5 == 0 else b"key-%d" % i, b"v%d" % i * 20, [("a", None), ("b", b"c")] if i % 2 else [])
            for i in range(300)]
    data = build(impl, rows, codec, producer_id=9, producer_epoch=1, base_sequence=5)
    expected = [(i, ts, k, v, h) for i, (ts, k, v, h) in enumerate(rows)]
    kp = KpBatch(data)
    assert kp.validate_crc() and kp.compression_type == codec
    assert [(r.offset, r.timestamp, r.key, r.value, list(r.headers)) for r in kp] == expected
    aio = AioBatch(data)
    assert aio.validate_crc()
    assert [(r.offset, r.timestamp, r.key, r.value, list(r.headers)) for r in aio] == expected


def test_java_style_xerial_snappy_batch_decodes(impl):
    # The Java client frames snappy with xerial's stream header; kafka-python does too.
    builder = KpBuilder(2, codecs.SNAPPY, 0, -1, -1, -1, 2**30)
    builder.append(0, TS, None, b"x" * 100_000, [])
    data = bytes(builder.build())
    assert data[61:69] == b"\x82SNAPPY\x00"
    assert as_tuples(impl.RecordBatch(data)) == [(0, TS, None, b"x" * 100_000, [])]


# -- round trip properties ------------------------------------------------------------


@settings(max_examples=200, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rows=rows_st, codec=st.sampled_from(CODECS), base=st.integers(0, 2**62))
def test_build_then_parse_returns_the_inputs(impl, rows, codec, base):
    data = build(impl, rows, codec, base_offset=base)
    batch = impl.RecordBatch(data)
    assert batch.base_offset == base
    assert batch.max_timestamp == max(r[0] for r in rows)
    assert as_tuples(batch) == [(base + i, ts, k, v, h) for i, (ts, k, v, h) in enumerate(rows)]
    assert batch.validate() == len(rows)


@settings(max_examples=50, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rows=rows_st)
def test_bulk_build_equals_record_by_record(impl, rows):
    keys = [k for _, k, _, _ in rows]
    values = [v if v is not None else b"" for _, _, v, _ in rows]
    ts = [t for t, _, _, _ in rows]
    headers = [h for _, _, _, h in rows]
    one_by_one = build(impl, [(t, k, v, h) for t, k, v, h in zip(ts, keys, values, headers)])
    assert bytes(impl.build_batch(values, keys=keys, timestamps=ts, headers=headers)) == one_by_one


def test_bulk_build_with_one_timestamp_and_no_keys(impl):
    data = impl.build_batch([b"a", b"bb", bytearray(b"ccc"), memoryview(b"dddd")], timestamps=TS)
    assert as_tuples(impl.RecordBatch(data)) == [
        (0, TS, None, b"a", []), (1, TS, None, b"bb", []), (2, TS, None, b"ccc", []), (3, TS, None, b"dddd", [])
    ]


def test_bulk_build_while_another_thread_is_still_importing_numpy(impl, monkeypatch):
    # numpy is loaded lazily, maybe by another thread: half imported, it has no ndarray yet
    # (and so no arrays to be given), which must not break a build with plain sequences.
    monkeypatch.setitem(sys.modules, "numpy", types.ModuleType("numpy"))
    for timestamps in (None, TS, [TS, TS + 1]):
        data = impl.build_batch([b"a", b"b"], keys=[b"k", None], timestamps=timestamps)
        assert [(r.offset, r.key, r.value) for r in impl.RecordBatch(data)] == [(0, b"k", b"a"), (1, None, b"b")]


def test_bulk_build_rejects_mismatched_lengths(impl):
    with pytest.raises(ValueError, match="keys has 1 items, values 2"):
        impl.build_batch([b"a", b"b"], keys=[b"k"])
    with pytest.raises(ValueError, match="timestamps has 3 items"):
        impl.build_batch([b"a", b"b"], timestamps=[1, 2, 3])


def test_timestamp_none_means_now(impl):
    import time

    before = int(time.time() * 1000)
    builder = impl.RecordBatchBuilder()
    builder.append(0, None, None, b"v")
    after = int(time.time() * 1000)
    (rec,) = impl.RecordBatch(bytes(builder.build())).records()
    assert before <= rec.timestamp <= after


# -- builder limits and argument checks ----------------------------------------------------


def test_builder_reports_full_but_first_record_always_fits(impl):
    builder = impl.RecordBatchBuilder(batch_size=100)
    assert builder.append(0, TS, None, b"x" * 500) > 0
    assert builder.append(1, TS, None, b"y") == 0
    assert builder.record_count == 1
    batch = impl.RecordBatch(bytes(builder.build()))
    assert [r.value for r in batch] == [b"x" * 500]


def test_builder_fills_up_to_batch_size_exactly(impl):
    builder = impl.RecordBatchBuilder(batch_size=1000)
    n = 0
    while builder.append(n, TS, None, b"z" * 50):
        n += 1
        assert builder.size() <= 1000
    assert builder.size() + 52 > 1000
    assert len(bytes(builder.build())) == builder.size() <= 1000


@pytest.mark.parametrize(
    "args, error",
    [
        ((0, TS, "str key", b"v"), TypeError),
        ((0, TS, None, 12), TypeError),
        ((0, 1.5, None, b"v"), TypeError),
        ((0, TS, None, b"v", [(1, b"x")]), TypeError),
        ((0, TS, None, b"v", [("k", "not bytes")]), TypeError),
        ((-1, TS, None, b"v"), ValueError),
        ((2**31, TS, None, b"v"), ValueError),
    ],
)
def test_builder_rejects_bad_arguments(impl, args, error):
    builder = impl.RecordBatchBuilder()
    with pytest.raises(error):
        builder.append(*args)
    assert builder.record_count == 0


def test_builder_rejects_offsets_that_do_not_increase(impl):
    builder = impl.RecordBatchBuilder()
    builder.append(5, TS, None, b"a")
    with pytest.raises(ValueError, match="offset delta 5"):
        builder.append(5, TS, None, b"b")


def test_builder_is_spent_after_build(impl):
    builder = impl.RecordBatchBuilder()
    builder.append(0, TS, None, b"a")
    builder.build()
    with pytest.raises(IllegalStateError, match="already built"):
        builder.build()
    with pytest.raises(IllegalStateError, match="already built"):
        builder.append(1, TS, None, b"b")


@pytest.mark.parametrize("bad", ["brotli", 7, -1])
def test_builder_rejects_unknown_codecs(impl, bad):
    with pytest.raises(UnsupportedCodecError):
        impl.RecordBatchBuilder(bad)


def test_codec_names_are_accepted(impl):
    data = bytes(impl.build_batch([b"v" * 100] * 10, compression_type="zstd", timestamps=TS))
    assert impl.RecordBatch(data).compression_type == codecs.ZSTD


def test_offset_gaps_as_compaction_leaves_them(impl):
    builder = impl.RecordBatchBuilder(base_offset=1000)
    for delta in (0, 3, 9):
        builder.append(delta, TS + delta, b"k%d" % delta, b"v")
    batch = impl.RecordBatch(bytes(builder.build()))
    assert batch.last_offset_delta == 9 and batch.records_count == 3
    assert [r.offset for r in batch] == [1000, 1003, 1009]
    assert batch.next_offset == 1010


# -- attributes: control, transactional, log append time -------------------------------------


def test_control_batch_and_transactional_bits(impl):
    builder = impl.RecordBatchBuilder(is_control=True, is_transactional=True, producer_id=7, producer_epoch=2)
    builder.append(0, TS, struct.pack(">hh", 0, 1), struct.pack(">hi", 0, 42))
    batch = impl.RecordBatch(bytes(builder.build()))
    assert batch.is_control_batch and batch.is_transactional
    assert batch.attributes == 0x30
    (rec,) = batch.records()
    assert rec.is_control and rec.control_type == 1


def test_control_batches_from_kafka_python_bytes(impl):
    builder = KpBuilder(2, 0, True, 7, 2, 0, 2**20)
    builder.append(0, TS, b"k", b"v", [])
    data = bytearray(builder.build())
    # kafka-python never writes control batches (only brokers do): set bit 5 and re-CRC.
    data[22] |= 0x20
    struct.pack_into(">I", data, 17, crc32c_peer.crc32c(bytes(data[21:])))
    batch = impl.RecordBatch(bytes(data))
    assert batch.is_control_batch and batch.is_transactional
    assert KpBatch(bytes(data)).is_control_batch


def test_log_append_time_batches_report_the_max_timestamp(impl):
    data = build(impl, [(TS, None, b"a", []), (TS + 10, None, b"b", [])], timestamp_type=1)
    batch = impl.RecordBatch(data)
    assert batch.timestamp_type == 1
    assert [(r.timestamp, r.timestamp_type) for r in batch] == [(TS + 10, 1), (TS + 10, 1)]


def test_last_sequence_wraps_like_kafka(impl):
    data = build(impl, [(TS, None, b"a", []), (TS, None, b"b", [])], producer_id=1, producer_epoch=0,
                 base_sequence=2**31 - 1)
    assert impl.RecordBatch(data).last_sequence == 0
    assert impl.RecordBatch(GOLDEN).last_sequence == -1


# -- corruption: every byte -----------------------------------------------------------------

# Bytes 0-7 (base offset) and 12-15 (partition leader epoch) are outside the
# CRC by design: the broker patches them without re-hashing. A flip there
# changes the reported offsets or epoch but no record content.
UNCOVERED = set(range(0, 8)) | set(range(12, 16))


def _sample_batch(impl, codec):
    rows = [(TS + i, b"key%d" % i if i % 2 else None, b"value %d" % i * 3, [("h%d" % i, b"x")] if i % 3 == 0 else [])
            for i in range(6)]
    return build(impl, rows, codec), rows


@pytest.mark.parametrize("codec", CODECS, ids=[codecs.NAMES[c] for c in CODECS])
def test_every_single_flipped_byte_is_caught(impl, codec):
    data, rows = _sample_batch(impl, codec)
    expected = [(k, v, h, ts) for ts, k, v, h in rows]
    for pos in range(len(data)):
        for mask in (0x01, 0x80, 0xFF):
            bad = bytearray(data)
            bad[pos] ^= mask
            if pos in UNCOVERED:
                batch = impl.RecordBatch(bytes(bad))
                recs = batch.records()
                assert [(r.key, r.value, list(r.headers), r.timestamp) for r in recs] == expected
                continue
            with pytest.raises(CorruptRecordError):
                impl.RecordBatch(bytes(bad)).records()


@pytest.mark.parametrize("codec", CODECS, ids=[codecs.NAMES[c] for c in CODECS])
def test_every_truncation_is_caught(impl, codec):
    data, _ = _sample_batch(impl, codec)
    for cut in range(len(data)):
        with pytest.raises(CorruptRecordError):
            impl.RecordBatch(data[:cut]).records()


@settings(max_examples=300, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_structure_is_checked_even_without_the_crc(impl, data):
    # With the CRC off, damaged record sections must still never crash or
    # overrun: they raise CorruptRecordError or decode to some records.
    rows = data.draw(rows_st)
    raw = bytearray(build(impl, rows))
    for _ in range(data.draw(st.integers(1, 4))):
        pos = data.draw(st.integers(61, len(raw) - 1)) if len(raw) > 61 else 60
        raw[pos] = data.draw(st.integers(0, 255))
    try:
        recs = impl.RecordBatch(bytes(raw), check_crc=False).records()
    except CorruptRecordError:
        return
    assert len(recs) == len(rows)


def test_garbage_claims_are_bounded(impl):
    data = bytearray(build(impl, [(TS, None, b"v", [])]))
    struct.pack_into(">i", data, 57, 2**31 - 1)  # records count
    struct.pack_into(">I", data, 17, crc32c_peer.crc32c(bytes(data[21:])))
    with pytest.raises(CorruptRecordError, match="claims 2147483647 records"):
        impl.RecordBatch(bytes(data)).records()
    with pytest.raises(CorruptRecordError, match="magic 1"):
        impl.RecordBatch(bytes(data[:16]) + b"\x01" + bytes(data[17:]))


def test_unknown_codec_bits_are_corruption(impl):
    data = bytearray(build(impl, [(TS, None, b"v", [])]))
    data[22] |= 0x07
    struct.pack_into(">I", data, 17, crc32c_peer.crc32c(bytes(data[21:])))
    with pytest.raises(CorruptRecordError, match="codec 7"):
        impl.RecordBatch(bytes(data)).records()


def test_varints_longer_than_allowed_are_rejected():
    with pytest.raises(CorruptRecordError, match="longer than 5 bytes"):
        default_records.decode_varint(b"\xff\xff\xff\xff\xff\x01", 0, 6)
    with pytest.raises(CorruptRecordError, match="overflows 32 bits"):
        default_records.decode_varint(b"\xff\xff\xff\xff\x7f", 0, 5)
    assert default_records.decode_varint(b"\xfe\xff\xff\xff\x0f", 0, 5) == (2**31 - 1, 5)


@given(st.integers(-(2**63), 2**63 - 1))
def test_varint_round_trip(value):
    out = bytearray()
    default_records.encode_varint(value, out)
    assert len(out) == default_records.size_of_varint(value)
    assert default_records.decode_varint(out, 0, len(out), 10) == (value, len(out))


def test_a_batch_view_reads_from_an_offset_in_a_larger_buffer(impl):
    data = GOLDEN + GOLDEN
    second = impl.RecordBatch(data, len(GOLDEN))
    assert second.position == len(GOLDEN) and second.end == 2 * len(GOLDEN)
    assert as_tuples(second) == GOLDEN_RECORDS
    with pytest.raises(ValueError):
        impl.RecordBatch(data, len(data) + 1)


def test_decode_headers_reads_the_columnar_headers(impl):
    data = build(impl, [(TS, None, b"v", [("ké", b"\x00"), ("n", None)])])
    cols = records.decode_columns(data)
    assert impl.decode_headers(data, int(cols.headers_start[0]), 2) == [("ké", b"\x00"), ("n", None)]
    with pytest.raises(CorruptRecordError):
        impl.decode_headers(data, len(data) - 2, 5)


def test_header_keys_that_are_not_utf8_round_trip(impl):
    # Kafka does not enforce UTF-8 header keys; the bytes survive decode and re-encode.
    data = build(impl, [(TS, None, b"v", [(b"\xff\xfe", b"x")])])
    (rec,) = impl.RecordBatch(data).records()
    (key, value), = rec.headers
    assert key.encode("utf-8", "surrogateescape") == b"\xff\xfe" and value == b"x"
    assert build(impl, [(TS, None, b"v", rec.headers)]) == data


def test_record_equality_and_repr(impl):
    (a,) = impl.RecordBatch(build(impl, [(TS, b"k", b"v", [("h", b"1")])])).records()
    b = impl.Record(0, TS, 0, b"k", b"v", [("h", b"1")])
    assert a == b and not (a != b)
    assert "key=b'k'" in repr(a)
    assert a.control_type == -1


def test_invalid_record_error_is_not_corruption():
    assert not issubclass(InvalidRecordError, CorruptRecordError)



def test_both_twins_satisfy_the_protocols(impl):
    from pylogq.records import protocols

    builder = impl.RecordBatchBuilder()
    assert isinstance(builder, protocols.RecordBatchBuilderProtocol)
    builder.append(0, TS, b"k", b"v")
    batch = impl.RecordBatch(bytes(builder.build()))
    assert isinstance(batch, protocols.RecordBatchProtocol)
    assert all(isinstance(r, protocols.RecordProtocol) for r in batch)
