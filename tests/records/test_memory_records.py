"""Buffers of batches: the walker's valid prefix and offset assignment, on both implementations."""

from __future__ import annotations

import importlib
import struct

import crc32c as crc32c_peer
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka.record.default_records import DefaultRecordBatchBuilder as KpBuilder

from tests.conftest import IMPLEMENTATIONS
from pylogq import records
from pylogq.errors import CorruptRecordError, InvalidRecordError
from pylogq.records import default_records
from pylogq.records.legacy import LegacyRecordBatchBuilder

TS = 1_700_000_000_000


@pytest.fixture(params=IMPLEMENTATIONS)
def impl(request):
    if request.param == "pure":
        return default_records
    return importlib.import_module("pylogq._core._records")


def v2(n, codec=0, value=b"v" * 40, ts=TS):
    return bytes(default_records.build_batch([value] * n, keys=[b"k%d" % i for i in range(n)],
                                             timestamps=[ts + i for i in range(n)], compression_type=codec))


def legacy(magic, n, codec=0):
    builder = LegacyRecordBatchBuilder(magic, codec)
    for i in range(n):
        builder.append(i, TS + i, b"k", b"legacy %d" % i)
    return bytes(builder.build())


def mixed_entries():
    # Each item is one entry: an uncompressed legacy set has one entry per message.
    return [v2(3), v2(5, codec=1), legacy(0, 1), legacy(1, 1), legacy(1, 4, codec=2), v2(1, codec=4), v2(2)]


# -- the walker ---------------------------------------------------------------------


def test_scan_of_whole_entries(impl):
    entries = mixed_entries()
    data = b"".join(entries)
    assert impl.scan_entries(data, 0, True) == (len(data), len(entries), None)
    assert records.scan(data) == records.ScanResult(len(data), len(entries), None)


def test_scan_from_a_position(impl):
    entries = mixed_entries()
    data = b"".join(entries)
    start = len(entries[0])
    assert impl.scan_entries(data, start, True) == (len(data) - start, len(entries) - 1, None)
    with pytest.raises(ValueError):
        impl.scan_entries(data, len(data) + 1, True)


@settings(max_examples=100, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(sizes=st.lists(st.tuples(st.integers(1, 20), st.sampled_from([0, 1, 2, 3, 4])), min_size=1, max_size=6),
       data=st.data())
def test_valid_prefix_of_a_truncated_buffer_is_exact(impl, sizes, data):
    entries = [v2(n, codec) for n, codec in sizes]
    buf = b"".join(entries)
    cut = data.draw(st.integers(0, len(buf)))
    boundaries = [0]
    for e in entries:
        boundaries.append(boundaries[-1] + len(e))
    expected = max(b for b in boundaries if b <= cut)
    valid, n, error = impl.scan_entries(buf[:cut], 0, True)
    assert (valid, error) == (expected, None)
    assert n == boundaries.index(expected)


def test_every_truncation_of_mixed_formats_gives_whole_entries(impl):
    entries = mixed_entries()
    buf = b"".join(entries)
    boundaries = [0]
    for e in entries:
        boundaries.append(boundaries[-1] + len(e))
    for cut in range(len(buf) + 1):
        valid, _, error = impl.scan_entries(buf[:cut], 0, True)
        assert error is None
        assert valid == max(b for b in boundaries if b <= cut)


def test_a_corrupt_entry_ends_the_valid_prefix_with_a_reason(impl):
    entries = mixed_entries()
    buf = bytearray(b"".join(entries))
    second = len(entries[0])
    buf[second + 40] ^= 0x10  # inside the second batch's CRC-covered bytes
    valid, n, error = impl.scan_entries(bytes(buf), 0, True)
    assert (valid, n) == (second, 1)
    assert "CRC-32C" in error and "byte %d" % second in error
    # Without the CRC the damage is not visible to the walker (framing is intact).
    assert impl.scan_entries(bytes(buf), 0, False)[0] == len(buf)


def test_a_corrupt_legacy_message_ends_the_valid_prefix(impl):
    entries = [v2(2), legacy(1, 1)]
    buf = bytearray(b"".join(entries))
    buf[-1] ^= 0x01
    valid, n, error = impl.scan_entries(bytes(buf), 0, True)
    assert (valid, n) == (len(entries[0]), 1) and "CRC-32" in error


@pytest.mark.parametrize(
    "patch, reason",
    [
        (lambda b: b.__setitem__(16, 3), "unknown magic 3"),
        (lambda b: struct.pack_into(">i", b, 8, 10), "too small for magic 2"),
        (lambda b: struct.pack_into(">i", b, 8, -5), "claims length -5"),
    ],
)
def test_malformed_frames_are_reported(impl, patch, reason):
    first = bytearray(v2(2))
    patch(first)
    valid, n, error = impl.scan_entries(bytes(first) + v2(1), 0, True)
    assert (valid, n) == (0, 0)
    assert reason in error


def test_garbage_after_valid_entries(impl):
    good = v2(4) + v2(2, codec=3)
    valid, n, error = impl.scan_entries(good + b"\x00" * 100, 0, True)
    assert valid == len(good) and n == 2
    assert error is not None  # zero length is too small for any magic
    assert impl.scan_entries(good + b"\xff" * 5, 0, True) == (len(good), 2, None)  # too short to frame


def test_iter_batches_describes_each_entry():
    entries = mixed_entries()
    buf = b"".join(entries) + entries[0][:20]
    infos = list(records.iter_batches(buf, check_crc=True))
    assert [i.size for i in infos] == [len(e) for e in entries]
    assert [i.magic for i in infos] == [2, 2, 0, 1, 1, 2, 2]
    first = infos[0]
    assert (first.position, first.base_offset, first.last_offset, first.records_count) == (0, 0, 2, 3)
    assert first.max_timestamp == TS + 2
    bad = bytearray(buf)
    bad[len(entries[0]) + 30] ^= 1
    with pytest.raises(CorruptRecordError, match="byte %d" % len(entries[0])):
        list(records.iter_batches(bytes(bad), check_crc=True))


def test_valid_prefix_length_public_function():
    data = v2(3) + v2(4)
    assert records.valid_prefix_length(data + data[:10]) == len(data)


# -- assigning offsets --------------------------------------------------------------


def test_assign_offsets_patches_base_offset_and_epoch_without_rehash(impl):
    a, b = v2(3), v2(5, codec=2)
    buf = bytearray(a + b)
    info = impl.assign_offsets(buf, 1000, 7, None)
    assert info == (1000, 1007, 8, 2, TS + 4, 1007)
    assert records.AppendInfo(*info).last_offset == 1007
    assert buf[21:len(a)] == a[21:]  # CRC-covered bytes untouched
    first = impl.RecordBatch(bytes(buf))
    second = impl.RecordBatch(bytes(buf), len(a))
    assert first.partition_leader_epoch == 7 and second.partition_leader_epoch == 7
    assert [r.offset for r in first] + [r.offset for r in second] == list(range(1000, 1008))
    assert first.validate_crc() and second.validate_crc()


def test_assign_offsets_with_log_append_time_rewrites_the_crc(impl):
    buf = bytearray(v2(3))
    info = impl.assign_offsets(buf, 5, 0, TS + 999)
    assert info[4] == TS + 999
    batch = impl.RecordBatch(bytes(buf))
    assert batch.validate_crc() and batch.timestamp_type == 1
    assert [r.timestamp for r in batch] == [TS + 999] * 3
    assert crc32c_peer.crc32c(bytes(buf[21:])) == batch.crc


def test_assign_offsets_on_a_writable_memoryview(impl):
    backing = bytearray(b"xx" + v2(2))
    info = impl.assign_offsets(memoryview(backing)[2:], 50, 0, None)
    assert info[:2] == (50, 51)
    assert backing[:2] == b"xx"


def test_assign_offsets_needs_a_writable_buffer(impl):
    with pytest.raises(TypeError, match="writable"):
        impl.assign_offsets(v2(2), 0, 0, None)


def test_assign_offsets_changes_nothing_when_any_batch_is_bad(impl):
    good = v2(3)
    bad = bytearray(v2(2))
    bad[70] ^= 0x40
    buf = bytearray(good + bytes(bad))
    before = bytes(buf)
    with pytest.raises(CorruptRecordError, match="CRC"):
        impl.assign_offsets(buf, 100, 0, None)
    assert bytes(buf) == before


def _recrc(buf):
    struct.pack_into(">I", buf, 17, crc32c_peer.crc32c(bytes(buf[21:])))
    return buf


@pytest.mark.parametrize(
    "mutate, error, match",
    [
        (lambda b: struct.pack_into(">i", b, 23, 5), InvalidRecordError, "last offset delta 5"),
        (lambda b: struct.pack_into(">i", b, 57, 0), InvalidRecordError, "has 0 records"),
        (lambda b: b.extend(b"\x00" * 10), CorruptRecordError, "fewer than a batch header"),
    ],
)
def test_assign_offsets_rejects_what_a_producer_may_not_send(impl, mutate, error, match):
    buf = bytearray(v2(3))
    mutate(buf)
    if len(buf) == len(v2(3)):
        _recrc(buf)
    with pytest.raises(error, match=match):
        impl.assign_offsets(buf, 0, 0, None)


def test_assign_offsets_rejects_offset_delta_gaps(impl):
    builder = default_records.RecordBatchBuilder()
    builder.append(0, TS, None, b"a")
    builder.append(2, TS, None, b"b")
    buf = bytearray(builder.build())
    struct.pack_into(">i", buf, 23, 1)  # last delta consistent with the count, deltas are 0 and 2
    _recrc(buf)
    with pytest.raises(CorruptRecordError):
        impl.assign_offsets(buf, 0, 0, None)


def test_assign_offsets_rejects_an_empty_or_partial_buffer(impl):
    with pytest.raises(InvalidRecordError, match="no record batch"):
        impl.assign_offsets(bytearray(), 0, 0, None)
    whole = v2(3)
    with pytest.raises(CorruptRecordError, match="only"):
        impl.assign_offsets(bytearray(whole + whole[:70]), 0, 0, None)


def test_assign_offsets_checks_compressed_records(impl):
    builder = KpBuilder(2, 1, False, -1, -1, -1, 2**20)
    for i in range(10):
        builder.append(i, TS, None, b"x" * 50, [])
    buf = bytearray(builder.build())
    assert impl.assign_offsets(buf, 10, 0, None)[:3] == (10, 19, 10)
    # A compressed payload that does not decompress, behind a valid CRC.
    bad = bytearray(buf[:61]) + bytearray(b"\x1f\x8b\x08\x00garbage")
    struct.pack_into(">i", bad, 8, len(bad) - 12)
    _recrc(bad)
    with pytest.raises(CorruptRecordError, match="gzip"):
        impl.assign_offsets(bad, 0, 0, None)


def test_public_assign_offsets_returns_append_info():
    buf = bytearray(v2(4))
    info = records.assign_offsets(buf, 42)
    assert info == records.AppendInfo(42, 45, 4, 1, TS + 3, 45)
