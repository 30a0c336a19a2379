"""The kind of every decoding failure: ``CorruptRecordError.kind`` is a :class:`RecordProblem`.

One damaged input per kind (and per codec where the codec decides), read by
every decoding entry point that reaches the damage: the columnar decoder, the
batch view and walker, the legacy reader and the produce-path validation, on
both implementations of the v2 kernels. The kinds are the JVM reader's
(``CorruptRecordException.Kind``; tests/spark/test_jvm_entries.py holds the two
to the same kinds on one corpus).
"""

from __future__ import annotations

import gzip
import importlib
import pickle
import struct
import zlib
from typing import Callable, List, Optional

import pytest

from tests.conftest import IMPLEMENTATIONS
from tests.records.corpus.build import fix_legacy_crc, fix_v2_crc
from pylogq import records
from pylogq.errors import (
    CorruptRecordError,
    InvalidArgumentError,
    InvalidArgumentTypeError,
    InvalidRecordError,
    RecordProblem,
)
from pylogq.records import codecs, default_records
from pylogq.records.default_records import encode_varint
from pylogq.records.legacy import (
    LegacyRecordBatchBuilder,
    _append_message,
    assign_offsets_legacy,
    iter_legacy_records,
    validate_legacy,
)

T0 = 1_700_000_000_000
P = RecordProblem


@pytest.fixture(params=IMPLEMENTATIONS)
def impl(request):
    if request.param == "pure":
        return default_records
    return importlib.import_module("pylogq._core._records")


# -- building damaged bytes ------------------------------------------------------------------


def raw_v2(payload: bytes, codec: int = 0, count: int = 1, last_delta: int = 0, base_offset: int = 0) -> bytearray:
    """A v2 batch around any records section (compressed with ``codec`` or not), its CRC right."""
    header = struct.pack(">qiibIhiqqqhii", base_offset, 49 + len(payload), 0, 2, 0, codec, last_delta, T0, T0,
                         -1, -1, -1, count)
    return fix_v2_crc(bytearray(header) + payload)


def record(delta: int, key: Optional[bytes] = b"k", value: Optional[bytes] = b"value",
           key_length: Optional[int] = None, trailing: bytes = b"") -> bytes:
    """One v2 record; ``key_length`` overrides the key's length field (to damage it)."""
    body = bytearray(b"\x00")
    encode_varint(0, body)
    encode_varint(delta, body)
    encode_varint((-1 if key is None else len(key)) if key_length is None else key_length, body)
    body += key or b""
    encode_varint(-1 if value is None else len(value), body)
    body += value or b""
    encode_varint(0, body)
    body += trailing
    out = bytearray()
    encode_varint(len(body), out)
    return bytes(out + body)


def good_v2(n: int = 3, codec: int = 0) -> bytearray:
    return bytearray(default_records.build_batch([b"value %d" % i for i in range(n)],
                                                 keys=[b"k%d" % i for i in range(n)],
                                                 timestamps=[T0 + i for i in range(n)], compression_type=codec))


def legacy_set(magic: int, n: int = 2, codec: int = 0) -> bytearray:
    builder = LegacyRecordBatchBuilder(magic, codec)
    for i in range(n):
        builder.append(i, T0 + i, b"k", b"legacy %d" % i)
    return bytearray(builder.build())


def wrapper(magic: int, codec: int, value: Optional[bytes], offset: int = 1) -> bytearray:
    out = bytearray()
    _append_message(out, offset, magic, codec, T0 if magic else -1, None, value)
    return out


def message(magic: int, offset: int, key: Optional[bytes], value: Optional[bytes], attributes: int = 0) -> bytes:
    out = bytearray()
    _append_message(out, offset, magic, attributes, T0 if magic else -1, key, value)
    return bytes(out)


# -- damaged v2 batches: what each decoder says ---------------------------------------------------


def bad_crc() -> bytes:
    batch = good_v2()
    batch[-1] ^= 0xFF
    return bytes(batch)


def bad_magic() -> bytes:
    batch = good_v2()
    batch[16] = 3
    return bytes(batch)


def bad_length() -> bytes:
    batch = good_v2()
    struct.pack_into(">i", batch, 8, 20)  # below the 49 bytes after the length field of any v2 batch
    return bytes(batch)


def unknown_codec() -> bytes:
    batch = good_v2()
    struct.pack_into(">h", batch, 21, 6)
    return bytes(fix_v2_crc(batch))


def bad_record_delta() -> bytes:
    return bytes(raw_v2(record(0) + record(0), count=2, last_delta=1))


def bad_record_key() -> bytes:
    return bytes(raw_v2(record(0, key=b"k", key_length=60), count=1))


def bad_record_trailing_field() -> bytes:
    # The record's length covers a byte its fields do not use.
    return bytes(raw_v2(record(0, trailing=b"\x00"), count=1))


def too_many_records() -> bytes:
    return bytes(raw_v2(record(0) + record(1), count=1000, last_delta=999))


def bytes_after_records() -> bytes:
    return bytes(raw_v2(record(0) + record(1), count=1, last_delta=1))


def negative_count() -> bytes:
    return bytes(raw_v2(record(0), count=-1, last_delta=0))


def section(codec: int, payload: bytes, count: int = 20) -> bytes:
    return bytes(raw_v2(payload, codec, count, last_delta=count - 1))


def records_section(n: int = 20) -> bytes:
    return b"".join(record(i, value=b"value %d " % i * 8) for i in range(n))


def corrupt_gzip() -> bytes:
    return section(codecs.GZIP, codecs.gzip_encode(records_section())[:-9])


def corrupt_gzip_header_crc() -> bytes:
    data = records_section()
    head = bytearray(b"\x1f\x8b\x08\x02\0\0\0\0\0\xff")
    head += struct.pack("<H", (zlib.crc32(bytes(head)) + 1) & 0xFFFF)
    deflate = zlib.compressobj(6, zlib.DEFLATED, -15)
    body = deflate.compress(data) + deflate.flush()
    return section(codecs.GZIP, bytes(head) + body + struct.pack("<II", zlib.crc32(data), len(data)))


def corrupt_snappy_empty() -> bytes:
    return section(codecs.SNAPPY, b"", count=0)


def corrupt_snappy_xerial() -> bytes:
    payload = bytearray(codecs.snappy_encode(records_section()))
    struct.pack_into(">i", payload, 16, len(payload))  # the block runs past the payload
    return section(codecs.SNAPPY, bytes(payload))


def corrupt_lz4() -> bytes:
    return section(codecs.LZ4, codecs.lz4_encode(records_section())[:-9])


def corrupt_lz4_block_checksum() -> bytes:
    import lz4.frame

    payload = bytearray(lz4.frame.compress(records_section(), block_checksum=True, store_size=False))
    payload[-9] ^= 0xFF  # the block's checksum (the frame ends with it and a 4-byte end mark)
    return section(codecs.LZ4, bytes(payload))


def corrupt_zstd() -> bytes:
    return section(codecs.ZSTD, codecs.zstd_encode(records_section())[:-3])


V2_CASES = {
    "bad-crc": (bad_crc, P.BAD_CRC),
    "bad-magic": (bad_magic, P.BAD_MAGIC),
    "bad-length": (bad_length, P.BAD_LENGTH),
    "unknown-codec": (unknown_codec, P.UNKNOWN_CODEC),
    "record-delta": (bad_record_delta, P.BAD_RECORD),
    "record-key": (bad_record_key, P.BAD_RECORD),
    "record-trailing-field": (bad_record_trailing_field, P.BAD_RECORD),
    "too-many-records": (too_many_records, P.BAD_RECORD_COUNT),
    "bytes-after-records": (bytes_after_records, P.BAD_RECORD_COUNT),
    "negative-count": (negative_count, P.BAD_RECORD_COUNT),
    "gzip-truncated": (corrupt_gzip, P.BAD_COMPRESSED_DATA),
    "gzip-header-crc": (corrupt_gzip_header_crc, P.BAD_COMPRESSED_DATA),
    "snappy-empty": (corrupt_snappy_empty, P.BAD_COMPRESSED_DATA),
    "snappy-xerial-overrun": (corrupt_snappy_xerial, P.BAD_COMPRESSED_DATA),
    "lz4-truncated": (corrupt_lz4, P.BAD_COMPRESSED_DATA),
    "lz4-block-checksum": (corrupt_lz4_block_checksum, P.BAD_COMPRESSED_DATA),
    "zstd-truncated": (corrupt_zstd, P.BAD_COMPRESSED_DATA),
}


def kind_of(call: Callable[[], object]) -> RecordProblem:
    with pytest.raises(CorruptRecordError) as info:
        call()
    assert info.value.kind is not None, "no kind: %s" % info.value
    return info.value.kind


@pytest.mark.parametrize("name", list(V2_CASES))
def test_v2_kind_in_decode_columns(name: str, impl) -> None:
    build, kind = V2_CASES[name]
    data = build()
    assert kind_of(lambda: impl.decode_columns(data)) is kind
    if (impl is default_records) == (records._impl._kernel is default_records):
        assert kind_of(lambda: records.decode_columns(data)) is kind


@pytest.mark.parametrize("name", [n for n in V2_CASES if n not in ("bad-magic", "bad-length")])
def test_v2_kind_in_record_batch(name: str, impl) -> None:
    build, kind = V2_CASES[name]
    data = build()
    assert kind_of(lambda: impl.RecordBatch(data).records()) is kind


@pytest.mark.parametrize("name", ["bad-magic", "bad-length"])
def test_v2_frame_kind_in_record_batch(name: str, impl) -> None:
    build, kind = V2_CASES[name]
    data = build()
    assert kind_of(lambda: impl.RecordBatch(data)) is kind


def test_v2_record_batch_past_the_buffer(impl) -> None:
    batch = bytes(good_v2())
    assert kind_of(lambda: impl.RecordBatch(batch[:-1])) is P.BAD_LENGTH
    assert kind_of(lambda: impl.RecordBatch(batch[:40])) is P.BAD_LENGTH


@pytest.mark.parametrize("name", ["bad-crc", "bad-magic", "bad-length"])
def test_frame_kind_in_iter_batches(name: str) -> None:
    build, kind = V2_CASES[name]
    data = build()
    assert kind_of(lambda: list(records.iter_batches(data, check_crc=True))) is kind
    assert records.scan(data).valid_bytes == 0


@pytest.mark.parametrize("name", [n for n in V2_CASES if n != "negative-count"])
def test_v2_kind_in_produce_validation(name: str, impl) -> None:
    build, kind = V2_CASES[name]
    data = build()
    if name in ("bytes-after-records", "snappy-empty"):
        # A producer's count must match its last offset delta: checked first, on the batch's header.
        with pytest.raises(InvalidRecordError) as info:
            impl.validate_batches(data)
        assert info.value.kind is P.BAD_RECORD_COUNT
        return
    assert kind_of(lambda: impl.validate_batches(data)) is kind


def test_produce_validation_count_against_last_delta(impl) -> None:
    data = bytes(raw_v2(record(0) + record(1), count=2, last_delta=5))
    with pytest.raises(InvalidRecordError) as info:
        impl.validate_batches(data)
    assert info.value.kind is P.BAD_RECORD_COUNT


def test_produce_validation_truncated_and_short_buffers(impl) -> None:
    batch = bytes(good_v2())
    assert kind_of(lambda: impl.validate_batches(batch[:-1])) is P.BAD_LENGTH
    assert kind_of(lambda: impl.validate_batches(batch + batch[:30])) is P.BAD_LENGTH
    legacy = bytes(legacy_set(1))
    assert kind_of(lambda: impl.validate_batches(legacy + b"\0" * 40)) is P.BAD_MAGIC


def test_decode_headers_kind(impl) -> None:
    assert kind_of(lambda: impl.decode_headers(b"\x08ab", 0, 1)) is P.BAD_RECORD


@pytest.mark.compiled_pass
def test_compiled_and_pure_agree_on_every_case() -> None:
    kernel = importlib.import_module("pylogq._core._records")
    for name, (build, kind) in V2_CASES.items():
        data = build()
        assert kind_of(lambda: kernel.decode_columns(data)) is kind_of(lambda: default_records.decode_columns(data))


# -- codecs ------------------------------------------------------------------------------------


@pytest.mark.parametrize("codec", [codecs.GZIP, codecs.SNAPPY, codecs.LZ4, codecs.ZSTD])
def test_too_large_decompressed(codec: int) -> None:
    payload = codecs.compress(codec, b"x" * 100_000)
    assert kind_of(lambda: codecs.decompress(codec, payload, max_size=1000)) is P.TOO_LARGE_DECOMPRESSED


@pytest.mark.parametrize("codec", [codecs.GZIP, codecs.SNAPPY, codecs.LZ4, codecs.ZSTD])
def test_bad_compressed_data(codec: int) -> None:
    payload = codecs.compress(codec, records_section())
    damaged = payload[: len(payload) // 2] if codec != codecs.SNAPPY else b"\xff\xff\xff\xff\xff\xff"
    assert kind_of(lambda: codecs.decompress(codec, damaged)) is P.BAD_COMPRESSED_DATA


def test_unknown_codec_in_decompress() -> None:
    assert kind_of(lambda: codecs.decompress(5, b"abc")) is P.UNKNOWN_CODEC
    assert kind_of(lambda: codecs.DecompressStream(7, b"abc")) is P.UNKNOWN_CODEC


@pytest.mark.parametrize("codec", [codecs.GZIP, codecs.LZ4, codecs.ZSTD])
def test_decompress_stream_keeps_the_kind(codec: int) -> None:
    payload = codecs.compress(codec, records_section())[:-9]

    def read() -> None:
        with codecs.DecompressStream(codec, payload, what="record batch at byte 0") as stream:
            while stream.read(1 << 16):
                pass

    assert kind_of(read) is P.BAD_COMPRESSED_DATA


# -- legacy message sets ----------------------------------------------------------------------


def legacy_bad_crc() -> bytes:
    data = legacy_set(1)
    data[-1] ^= 0xFF
    return bytes(data)


def legacy_bad_magic() -> bytes:
    data = bytearray(message(1, 0, b"k", b"v"))
    data[16] = 5
    return bytes(data)


def legacy_bad_length() -> bytes:
    data = bytearray(message(0, 0, b"k", b"v"))
    struct.pack_into(">i", data, 8, 3)
    return bytes(data)


def legacy_unknown_codec() -> bytes:
    return bytes(wrapper(1, codecs.ZSTD, codecs.zstd_encode(bytes(legacy_set(1)))))


def legacy_key_overrun() -> bytes:
    entry = bytearray(message(1, 0, b"k", b"value"))
    struct.pack_into(">i", entry, 26, 40)
    return bytes(fix_legacy_crc(entry))


def legacy_bad_gzip() -> bytes:
    return bytes(wrapper(1, codecs.GZIP, codecs.gzip_encode(bytes(legacy_set(1, 3)))[:-6], offset=2))


def legacy_inner_magic() -> bytes:
    return bytes(wrapper(1, codecs.GZIP, gzip.compress(message(0, 0, b"k", b"v")), offset=0))


def legacy_null_value() -> bytes:
    return bytes(wrapper(1, codecs.GZIP, None))


def legacy_empty_inner() -> bytes:
    return bytes(wrapper(1, codecs.GZIP, gzip.compress(b"")))


def legacy_inner_compressed() -> bytes:
    inner = message(1, 0, None, gzip.compress(message(1, 0, b"k", b"v")), attributes=codecs.GZIP)
    return bytes(wrapper(1, codecs.GZIP, gzip.compress(inner), offset=0))


def legacy_inner_codec() -> bytes:
    inner = message(1, 0, None, b"x", attributes=6)
    return bytes(wrapper(1, codecs.GZIP, gzip.compress(inner), offset=0))


def legacy_inner_overrun() -> bytes:
    inner = bytes(legacy_set(1, 2))
    return bytes(wrapper(1, codecs.GZIP, gzip.compress(inner[:-4]), offset=1))


def legacy_inner_tail() -> bytes:
    inner = bytes(legacy_set(1, 2)) + b"\0" * 5
    return bytes(wrapper(1, codecs.GZIP, gzip.compress(inner), offset=1))


def legacy_inner_small_size() -> bytes:
    inner = bytearray(message(1, 0, b"k", b"v"))
    struct.pack_into(">i", inner, 8, -4)
    return bytes(wrapper(1, codecs.GZIP, gzip.compress(bytes(inner)), offset=0))


LEGACY_CASES = {
    "crc": (legacy_bad_crc, P.BAD_CRC),
    "magic": (legacy_bad_magic, P.BAD_MAGIC),
    "length": (legacy_bad_length, P.BAD_LENGTH),
    "zstd-in-v1": (legacy_unknown_codec, P.UNKNOWN_CODEC),
    "key-overrun": (legacy_key_overrun, P.BAD_RECORD),
    "gzip-truncated": (legacy_bad_gzip, P.BAD_COMPRESSED_DATA),
    "inner-magic": (legacy_inner_magic, P.BAD_MAGIC),
    "null-value": (legacy_null_value, P.BAD_WRAPPER),
    "empty-inner": (legacy_empty_inner, P.BAD_WRAPPER),
    "inner-compressed": (legacy_inner_compressed, P.BAD_WRAPPER),
    "inner-codec": (legacy_inner_codec, P.UNKNOWN_CODEC),
    "inner-overrun": (legacy_inner_overrun, P.BAD_WRAPPER),
    "inner-tail": (legacy_inner_tail, P.BAD_WRAPPER),
    "inner-small-size": (legacy_inner_small_size, P.BAD_LENGTH),
}


@pytest.mark.parametrize("name", list(LEGACY_CASES))
def test_legacy_kind(name: str, impl) -> None:
    build, kind = LEGACY_CASES[name]
    data = build()
    assert kind_of(lambda: impl.decode_columns(data)) is kind
    if name not in ("magic", "length"):  # those two are the walker's: the legacy reader sees no message
        assert kind_of(lambda: list(iter_legacy_records(data))) is kind
        assert kind_of(lambda: validate_legacy(data)) is kind
    if name in ("crc", "length", "key-overrun", "inner-magic", "null-value", "empty-inner", "inner-compressed",
                "inner-codec", "inner-overrun", "inner-tail", "inner-small-size"):
        assert kind_of(lambda: assign_offsets_legacy(bytearray(data), 100)) is kind


def test_legacy_partial_message_in_a_producer_set() -> None:
    data = bytes(legacy_set(1, 2))
    assert kind_of(lambda: validate_legacy(data[:-3])) is P.BAD_LENGTH
    assert kind_of(lambda: validate_legacy(data + b"\0" * 5)) is P.BAD_LENGTH


# -- the errors themselves ----------------------------------------------------------------------


def test_record_problem_values_are_names() -> None:
    assert [p.name for p in RecordProblem] == [
        "BAD_CRC", "BAD_MAGIC", "BAD_LENGTH", "UNKNOWN_CODEC", "BAD_COMPRESSED_DATA", "TOO_LARGE_DECOMPRESSED",
        "BAD_RECORD", "BAD_RECORD_COUNT", "BAD_WRAPPER"]
    for p in RecordProblem:
        assert RecordProblem(p.name) is p


def test_errors_with_a_kind_pickle() -> None:
    errors: List[Exception] = [
        CorruptRecordError("batch at offset 5 failed its CRC", kind=P.BAD_CRC),
        CorruptRecordError("no kind"),
        InvalidRecordError("2 records but last offset delta 5", kind=P.BAD_RECORD_COUNT),
        InvalidRecordError("bad record", record_errors=[(1, "why")]),
    ]
    for exc in errors:
        copy = pickle.loads(pickle.dumps(exc))
        assert type(copy) is type(exc)
        assert copy.args == exc.args and str(copy) == str(exc)
        assert copy.kind is exc.kind  # type: ignore[attr-defined]
    assert pickle.loads(pickle.dumps(errors[3])).record_errors == [(1, "why")]
    assert CorruptRecordError().kind is None and "CORRUPT_MESSAGE" in str(CorruptRecordError())


# -- bad arguments of the builders ----------------------------------------------------------------


def test_builder_argument_errors(impl) -> None:
    with pytest.raises(InvalidArgumentError, match="timestamp_type must be 0 or 1|timestamp_type must be 0"):
        impl.RecordBatchBuilder(0, timestamp_type=5)
    with pytest.raises(InvalidArgumentError, match="batch_size must be positive"):
        impl.RecordBatchBuilder(0, batch_size=0)
    builder = impl.RecordBatchBuilder(0)
    with pytest.raises(InvalidArgumentTypeError, match="header key must be str or bytes"):
        builder.append(0, T0, b"k", b"v", [(5, b"x")])
    with pytest.raises(InvalidArgumentTypeError):
        builder.append(0, T0, "not bytes", b"v")  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentError, match="keys has 1 items, values 2"):
        impl.build_batch([b"a", b"b"], keys=[b"k"])
    with pytest.raises(ValueError):  # still a ValueError for callers that catch the builtin
        impl.RecordBatchBuilder(0, batch_size=-1)
    with pytest.raises(InvalidArgumentTypeError):
        impl.patch_offsets(bytes(good_v2()), [], 0)


# -- walks that report, not raise: the scan, a follower's append, a segment walk ---------------------


def test_a_scan_reports_the_kind_it_stopped_at(impl) -> None:
    good = bytes(good_v2())
    damaged = bytearray(good_v2())
    damaged[-1] ^= 0x01
    valid, n, error, problem = impl.scan_entries(good + bytes(damaged), 0, True)
    assert (valid, n, problem) == (len(good), 1, P.BAD_CRC) and error is not None
    assert impl.scan_entries(good, 0, True) == (len(good), 1, None, None)
    result = records.scan(good + bytes(damaged))
    assert (result.valid_bytes, result.problem) == (len(good), P.BAD_CRC)


def test_a_followers_append_of_damaged_or_partial_data_names_the_kind(tmp_path) -> None:
    from pylogq.storage.log import Log

    log = Log.open(str(tmp_path / "t-0"))
    try:
        damaged = bytearray(good_v2())
        damaged[-1] ^= 0x01
        assert kind_of(lambda: log.append_as_follower(bytes(damaged))) is P.BAD_CRC
        assert kind_of(lambda: log.append_as_follower(bytes(good_v2())[:-3])) is P.BAD_LENGTH
    finally:
        log.close()
