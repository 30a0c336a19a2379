"""Columnar decode: every record of a buffer of batches into numpy columns, on both implementations."""

from __future__ import annotations

import importlib

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.conftest import IMPLEMENTATIONS
from pylogq import records
from pylogq.errors import CorruptRecordError
from pylogq.records import columnar, default_records
from pylogq.records.legacy import LegacyRecordBatchBuilder, iter_legacy_records

TS = 1_700_000_000_000


@pytest.fixture(params=IMPLEMENTATIONS)
def decode(request):
    module = default_records if request.param == "pure" else importlib.import_module("pylogq._core._records")

    def run(buffer, **kwargs):
        lo = kwargs.pop("start_offset", None)
        hi = kwargs.pop("end_offset", None)
        check_crc = kwargs.pop("check_crc", True)
        skip_control = kwargs.pop("skip_control", True)
        assert not kwargs
        return columnar.RecordColumns(*module.decode_columns(buffer, check_crc, skip_control, lo, hi))

    return run


def batch(rows, codec=0, base_offset=0, **kwargs):
    builder = default_records.RecordBatchBuilder(codec, base_offset=base_offset, **kwargs)
    for i, (ts, key, value, headers) in enumerate(rows):
        builder.append(i, ts, key, value, headers)
    return bytes(builder.build())


def reference_rows(buffer):
    """What record-by-record iteration sees, as columnar rows."""
    out = []
    for info in records.iter_batches(buffer):
        entry = buffer[info.position : info.position + info.size]
        if info.magic == 2:
            b = default_records.RecordBatch(entry)
            if b.is_control_batch:
                continue
            recs = b.records()
        else:
            recs = list(iter_legacy_records(entry))
        out += [(r.offset, r.timestamp, r.timestamp_type, r.key, r.value, list(r.headers)) for r in recs]
    return out


rows_st = st.lists(
    st.tuples(
        st.integers(0, 2**41),
        st.one_of(st.none(), st.binary(max_size=40)),
        st.one_of(st.none(), st.binary(max_size=200)),
        st.lists(st.tuples(st.text(max_size=8), st.one_of(st.none(), st.binary(max_size=8))), max_size=3),
    ),
    min_size=1,
    max_size=20,
)


@settings(max_examples=100, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(batches=st.lists(st.tuples(rows_st, st.sampled_from([0, 1, 2, 3, 4])), min_size=1, max_size=5))
def test_columns_equal_record_iteration(decode, batches):
    buf = b""
    offset = 0
    for rows, codec in batches:
        buf += batch(rows, codec, base_offset=offset)
        offset += len(rows)
    cols = decode(buf)
    assert len(cols) == offset
    assert list(cols.rows()) == reference_rows(buf)
    assert cols.offsets.dtype == np.int64 and cols.key_length.dtype == np.int32


def test_uncompressed_input_is_not_copied(decode):
    buf = batch([(TS, b"k", b"value", [])] * 3) + batch([(TS, None, b"v2", [])], base_offset=3)
    cols = decode(buf)
    assert cols.data is buf or bytes(cols.data) == buf
    view = cols.data_array()
    start, n = int(cols.value_start[0]), int(cols.value_length[0])
    assert view[start : start + n].tobytes() == b"value"
    assert bytes(buf[start : start + n]) == b"value"
    assert cols.key_null.tolist() == [False, False, False, True]
    assert cols.value_null.tolist() == [False] * 4


def test_compressed_and_legacy_entries_share_one_data_buffer(decode):
    legacy = LegacyRecordBatchBuilder(1, 1)
    for i in range(3):
        legacy.append(i, TS + i, None if i == 1 else b"lk", b"legacy-%d" % i)
    buf = batch([(TS, b"a", b"plain", [])], base_offset=0) + batch([(TS, b"b", b"zipped", [("h", b"1")])], 4, 1)
    from pylogq.records.legacy import assign_offsets_legacy

    leg, _ = assign_offsets_legacy(bytearray(legacy.build()), 2)
    buf += bytes(leg)
    cols = decode(buf)
    assert list(cols.rows()) == [
        (0, TS, 0, b"a", b"plain", []),
        (1, TS, 0, b"b", b"zipped", [("h", b"1")]),
        (2, TS, 0, b"lk", b"legacy-0", []),
        (3, TS + 1, 0, None, b"legacy-1", []),
        (4, TS + 2, 0, b"lk", b"legacy-2", []),
    ]
    assert isinstance(cols.data, bytearray)


def test_offset_bounds_select_records(decode):
    buf = batch([(TS + i, None, b"%d" % i, []) for i in range(10)], base_offset=100)
    buf += batch([(TS, None, b"x", [])] * 5, codec=3, base_offset=110)
    cols = decode(buf, start_offset=105, end_offset=112)
    assert cols.offsets.tolist() == list(range(105, 112))
    assert [cols.value(i) for i in range(len(cols))] == [b"5", b"6", b"7", b"8", b"9", b"x", b"x"]
    assert len(decode(buf, start_offset=200)) == 0
    assert len(decode(buf, end_offset=100)) == 0


def test_control_batches_are_skipped_unless_asked(decode):
    import struct

    control = batch([(TS, struct.pack(">hh", 0, 1), b"\x00\x00\x00\x00\x00\x00", [])], base_offset=2,
                    is_control=True, is_transactional=True, producer_id=1, producer_epoch=0)
    buf = batch([(TS, None, b"a", [])] * 2) + control + batch([(TS, None, b"b", [])], base_offset=3)
    assert decode(buf).offsets.tolist() == [0, 1, 3]
    assert decode(buf, skip_control=False).offsets.tolist() == [0, 1, 2, 3]


def test_log_append_time_and_partial_tail(decode):
    b = batch([(TS, None, b"a", []), (TS + 50, None, b"b", [])], timestamp_type=1)
    cols = decode(b + b[:30])
    assert cols.timestamps.tolist() == [TS + 50, TS + 50]
    assert cols.timestamp_types.tolist() == [1, 1]


def test_corruption_raises(decode):
    buf = bytearray(batch([(TS, None, b"abc", [])] * 4))
    buf[70] ^= 0x01
    with pytest.raises(CorruptRecordError, match="CRC"):
        decode(bytes(buf))
    # Damage behind a good frame, with the CRC check off, is caught by the structure check.
    good = bytearray(batch([(TS, None, b"abc", [])] * 4))
    good[61] = 0x7F  # first record's length varint: far past the batch
    with pytest.raises(CorruptRecordError):
        decode(bytes(good), check_crc=False)


def test_empty_buffer(decode):
    cols = decode(b"")
    assert len(cols) == 0 and cols.offsets.shape == (0,)


def test_public_decode_columns_matches():
    buf = batch([(TS, b"k", b"v", [("a", b"b")])] * 3)
    cols = records.decode_columns(buf)
    assert list(cols.rows()) == [(i, TS, 0, b"k", b"v", [("a", b"b")]) for i in range(3)]
    assert cols.headers(0) == [("a", b"b")]


if len(IMPLEMENTATIONS) == 2:  # the pure-Python run has no compiled kernel to compare with

    def test_compiled_and_pure_lay_out_the_same_columns():
        compiled = importlib.import_module("pylogq._core._records")
        legacy = LegacyRecordBatchBuilder(0, 2)
        for i in range(4):
            legacy.append(i, TS, b"k", b"old %d" % i)
        buf = (batch([(TS + i, b"k%d" % i, b"v" * i, [("h", b"%d" % i)]) for i in range(20)])
               + batch([(TS, None, b"z" * 300, [])] * 7, codec=4, base_offset=20) + bytes(legacy.build()))
        for lo, hi in ((None, None), (5, 24), (-(2**63), 2**63 - 1)):
            a = compiled.decode_columns(buf, True, True, lo, hi)
            b = default_records.decode_columns(buf, True, True, lo, hi)
            assert bytes(a[0]) == bytes(b[0]) and a[1] == b[1]
            for x, y in zip(a[2:], b[2:]):
                assert x.dtype == y.dtype and x.tolist() == y.tolist()
