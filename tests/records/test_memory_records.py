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
    assert impl.scan_entries(data, 0, True) == (len(data), len(entries), None, None)
    assert records.scan(data) == records.ScanResult(len(data), len(entries), None)


def test_scan_from_a_position(impl):
    entries = mixed_entries()
    data = b"".join(entries)
    start = len(entries[0])
    assert impl.scan_entries(data, start, True) == (len(data) - start, len(entries) - 1, None, None)
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
    valid, n, error, _ = impl.scan_entries(buf[:cut], 0, True)
    assert (valid, error) == (expected, None)
    assert n == boundaries.index(expected)


def test_every_truncation_of_mixed_formats_gives_whole_entries(impl):
    entries = mixed_entries()
    buf = b"".join(entries)
    boundaries = [0]
    for e in entries:
        boundaries.append(boundaries[-1] + len(e))
    for cut in range(len(buf) + 1):
        valid, _, error, _ = impl.scan_entries(buf[:cut], 0, True)
        assert error is None
        assert valid == max(b for b in boundaries if b <= cut)


def test_a_corrupt_entry_ends_the_valid_prefix_with_a_reason(impl):
    entries = mixed_entries()
    buf = bytearray(b"".join(entries))
    second = len(entries[0])
    buf[second + 40] ^= 0x10  # inside the second batch's CRC-covered bytes
    valid, n, error, _ = impl.scan_entries(bytes(buf), 0, True)
    assert (valid, n) == (second, 1)
    assert "CRC-32C" in error and "byte %d" % second in error
    # Without the CRC the damage is not visible to the walker (framing is intact).
    assert impl.scan_entries(bytes(buf), 0, False)[0] == len(buf)


def test_a_corrupt_legacy_message_ends_the_valid_prefix(impl):
    entries = [v2(2), legacy(1, 1)]
    buf = bytearray(b"".join(entries))
    buf[-1] ^= 0x01
    valid, n, error, _ = impl.scan_entries(bytes(buf), 0, True)
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
    valid, n, error, _ = impl.scan_entries(bytes(first) + v2(1), 0, True)
    assert (valid, n) == (0, 0)
    assert reason in error


def test_garbage_after_valid_entries(impl):
    good = v2(4) + v2(2, codec=3)
    valid, n, error, _ = impl.scan_entries(good + b"\x00" * 100, 0, True)
    assert valid == len(good) and n == 2
    assert error is not None  # zero length is too small for any magic
    assert impl.scan_entries(good + b"\xff" * 5, 0, True) == (len(good), 2, None, None)  # too short to frame


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


def test_public_assign_offsets_returns_the_append_result():
    buf = bytearray(v2(4))
    info = records.assign_offsets(buf, 42)
    assert info == records.AppendResult(0, 42, -1, -1, 4, last_offset=45, batch_count=1, max_timestamp=TS + 3,
                                        offset_of_max_timestamp=45)
    assert info.first_offset == 42


# -- the one pass of an append: validate_batches, then patch_offsets --------------------------


def _keyed(n, keys, codec=0, ts=TS, **kwargs):
    """A producer's batch of ``n`` records; ``keys[i]`` False gives record i no key."""
    return bytes(default_records.build_batch([b"value %d" % i for i in range(n)],
                                             keys=[b"key %d" % i if keys[i] else None for i in range(n)],
                                             timestamps=[ts + i for i in range(n)], compression_type=codec,
                                             **kwargs))


def _control(ts=TS):
    """A commit marker: a control batch whose one record has no key (the key check passes over it)."""
    builder = default_records.RecordBatchBuilder(is_control=True, producer_id=9, producer_epoch=2)
    builder.append(0, ts, None, b"\x00\x00\x00\x00\x00\x00")
    return bytes(builder.build())


def _golden_buffer():
    a = _keyed(3, [True] * 3, producer_id=9, producer_epoch=2, base_sequence=40)
    c = _control(TS + 5)
    b = _keyed(2, [True, False], codec=1, ts=TS + 10)
    return a, c, b


def test_validate_batches_golden(impl):
    a, c, b = _golden_buffer()
    buf = a + c + b
    headers, count, keyless = impl.validate_batches(buf, True)
    assert headers == [
        (0, len(a), 2, 0, 2, TS + 2, 3, 0x00, 9, 2, 40),
        (len(a), len(c), 2, 0, 0, TS + 5, 1, 0x20, 9, 2, -1),
        (len(a) + len(c), len(b), 2, 0, 1, TS + 11, 2, 0x01, -1, -1, -1),
    ]
    # The gzip batch's second record has no key: offset delta 3 + 1 + 1 from the buffer's first.
    assert (count, keyless) == (6, 5)
    assert impl.validate_batches(buf, False)[1:] == (6, -1)
    assert impl.validate_batches(a + c, True)[2] == -1  # the control record's missing key is no violation
    assert [tuple(h) for h in records.iter_batches(buf)] == headers  # the walker reads the same headers


def _expected_patch(data, bases, epoch, lat):
    """The bytes an append writes, patched field by field here (independent of both twins)."""
    out = bytearray(data)
    pos = 0
    for base in bases:
        size = 12 + struct.unpack_from(">i", out, pos + 8)[0]
        struct.pack_into(">q", out, pos, base)
        struct.pack_into(">i", out, pos + 12, epoch)
        if lat is not None:
            struct.pack_into(">h", out, pos + 21, struct.unpack_from(">h", out, pos + 21)[0] | 0x08)
            struct.pack_into(">q", out, pos + 35, lat)
            struct.pack_into(">I", out, pos + 17, crc32c_peer.crc32c(bytes(out[pos + 21 : pos + size])))
        pos += size
    return bytes(out)


@pytest.mark.parametrize("lat", [None, TS + 999], ids=["create-time", "log-append-time"])
def test_patch_offsets_golden(impl, lat):
    a, c, b = _golden_buffer()
    data = a + c + b
    headers, _, _ = impl.validate_batches(data, False)
    buf = bytearray(data)
    written = impl.patch_offsets(buf, headers, 1000, 7, lat)
    assert bytes(buf) == _expected_patch(data, [1000, 1003, 1004], 7, lat)
    max_ts = [TS + 2, TS + 5, TS + 11] if lat is None else [lat] * 3
    attrs = [0x00, 0x20, 0x01] if lat is None else [0x08, 0x28, 0x09]
    assert written == [
        (0, len(a), 2, 1000, 1002, max_ts[0], 3, attrs[0], 9, 2, 40),
        (len(a), len(c), 2, 1003, 1003, max_ts[1], 1, attrs[1], 9, 2, -1),
        (len(a) + len(c), len(b), 2, 1004, 1005, max_ts[2], 2, attrs[2], -1, -1, -1),
    ]
    assert written == [tuple(h) for h in records.iter_batches(bytes(buf), check_crc=True)]


def test_patch_offsets_refuses_headers_that_do_not_describe_the_buffer(impl):
    a, c, b = _golden_buffer()
    data = a + c + b
    headers, _, _ = impl.validate_batches(data, False)
    other, _, _ = impl.validate_batches(b + a, False)
    shifted = [tuple(h[:1]) + (h[1] + 1,) + tuple(h[2:]) for h in headers]
    for bad in (headers[:2], headers[1:], other, shifted, headers + headers[:1]):
        buf = bytearray(data)
        with pytest.raises(ValueError):
            impl.patch_offsets(buf, bad, 0, 0, None)
        assert bytes(buf) == data  # checked whole before the first write
    with pytest.raises(TypeError, match="writable"):
        impl.patch_offsets(data, headers, 0, 0, None)


_batch_specs = st.lists(
    st.tuples(
        st.lists(st.booleans(), min_size=1, max_size=8),  # per record: has a key
        st.sampled_from([0, 0, 1, 2, 3, 4]),  # codec
        st.booleans(),  # a control batch
        st.integers(-1, 5),  # producer id (-1: not idempotent)
        st.integers(0, 2**31 - 1),  # base sequence
        st.integers(-1, 10_000),  # timestamp delta from TS (-1 gives a max timestamp below TS)
    ),
    min_size=1,
    max_size=5,
)


def _build(specs):
    out = []
    for keys, codec, control, pid, seq, dts in specs:
        idempotent = dict(producer_id=pid, producer_epoch=1, base_sequence=seq) if pid >= 0 else {}
        out.append(_keyed(len(keys), keys, codec=codec, ts=TS + dts, is_control=control, **idempotent))
    return out


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(specs=_batch_specs, require_keys=st.booleans(), base=st.integers(0, 2**40), epoch=st.integers(0, 50),
       lat=st.one_of(st.none(), st.integers(0, 2**41)))
def test_the_one_pass_agrees_with_the_separate_walks(impl, specs, require_keys, base, epoch, lat):
    """What the one pass collects is what the walks it replaced found (headers, counts, keys, offsets)."""
    batches = _build(specs)
    data = b"".join(batches)
    headers, count, keyless = impl.validate_batches(data, require_keys)
    assert [tuple(h) for h in records.iter_batches(data, check_crc=True)] == headers
    assert count == sum(len(keys) for keys, *_ in specs)
    # The key check it replaced: every row of the columnar decode (control batches skipped), offsets from 0.
    numbered = bytearray(data)
    default_records.assign_offsets(numbered, 0)
    columns = records.decode_columns(bytes(numbered))
    missing = [int(o) for o, k in zip(columns.offsets, columns.key_length) if k < 0]
    assert keyless == (missing[0] if require_keys and missing else -1)
    # Patching from the headers writes what assigning offsets field by field would.
    bases, offset = [], base
    for keys, *_ in specs:
        bases.append(offset)
        offset += len(keys)
    buf = bytearray(data)
    written = impl.patch_offsets(buf, headers, base, epoch, lat)
    assert bytes(buf) == _expected_patch(data, bases, epoch, lat)
    assert [tuple(h) for h in records.iter_batches(bytes(buf), check_crc=True)] == written
    # And the compiled kernel is the twin's double.
    if impl is not default_records:
        assert default_records.validate_batches(data, require_keys) == (headers, count, keyless)
        twin_buf = bytearray(data)
        assert default_records.patch_offsets(twin_buf, headers, base, epoch, lat) == written
        assert twin_buf == buf


@pytest.mark.parametrize(
    "mutate, error, match",
    [
        (lambda b: b.__setitem__(70, b[70] ^ 0x40), CorruptRecordError, "CRC-32C"),
        (lambda b: _recrc(_set_last_delta(b, 5)), InvalidRecordError, "last offset delta 5"),
        (lambda b: b.extend(legacy(1, 4)), CorruptRecordError, "magic 1, expected 2"),
        (lambda b: b.extend(b"\x00" * 10), CorruptRecordError, "fewer than a batch header"),
    ],
)
def test_validate_batches_raises_what_assign_offsets_raised(impl, mutate, error, match):
    buf = bytearray(v2(3))
    mutate(buf)
    with pytest.raises(error, match=match):
        impl.validate_batches(bytes(buf), True)
    with pytest.raises(error, match=match):
        impl.assign_offsets(bytearray(buf), 0, 0, None)


def _set_last_delta(buf, delta):
    struct.pack_into(">i", buf, 23, delta)
    return buf


def test_public_validate_and_patch_give_batch_headers():
    a, c, b = _golden_buffer()
    buf = bytearray(a + c + b)
    headers, count, keyless = records.validate_batches(buf, require_keys=True)
    assert all(type(h) is records.BatchHeader for h in headers) and (count, keyless) == (6, 5)
    assert headers[0].producer_id == 9 and headers[0].base_sequence == 40 and headers[1].attributes == 0x20
    written = records.patch_offsets(buf, headers, 10)
    assert all(type(h) is records.BatchHeader for h in written)
    assert [(h.base_offset, h.last_offset) for h in written] == [(10, 12), (13, 13), (14, 15)]


# -- which produce data the server appends on its event loop -------------------------------


def test_uncompressed_v2_is_true_only_for_plain_v2_batches():
    plain = v2(3)
    assert records.uncompressed_v2(plain) and records.uncompressed_v2(plain + v2(2))
    assert records.uncompressed_v2(bytearray(plain)) and records.uncompressed_v2(memoryview(plain))
    for codec in (1, 2, 3, 4):
        assert not records.uncompressed_v2(v2(3, codec)), codec
        assert not records.uncompressed_v2(plain + v2(3, codec)), codec  # any batch of the buffer
    for magic in (0, 1):
        assert not records.uncompressed_v2(legacy(magic, 2))  # checked message by message: off the loop
        assert not records.uncompressed_v2(legacy(magic, 2, 1))
    # Malformed buffers answer either way; their validation is cheap and refuses them.
    assert records.uncompressed_v2(b"") and records.uncompressed_v2(plain[:20]) and records.uncompressed_v2(plain[:-1])
