"""The segment reader: read-only walks over a segment file that stop at the valid prefix and say why.

Every walk is checked against the records walker over the same bytes
(``records.iter_batches`` for the headers, ``records.scan`` for the valid
prefix), on whichever kernels this run uses (compiled, or the pure twins
under ``PYLOGQ_NO_EXTENSIONS=1``).
"""

from __future__ import annotations

import io
import os
import struct
from typing import List

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pylogq import records
from pylogq.records import codecs
from pylogq.records.legacy import LegacyRecordBatchBuilder
from pylogq.config import LogConfig
from pylogq.storage.log import Log
from pylogq.storage.segment import (
    CORRUPT,
    END,
    PARTIAL,
    TRUNCATED,
    SegmentReader,
    WalkStop,
)

TS = 1_700_000_000_000


def _v2(base: int, n: int, codec: int = codecs.NONE, value: bytes = b"v" * 40) -> bytes:
    builder = records.RecordBatchBuilder(codec, base_offset=base)
    for i in range(n):
        builder.append(i, TS + base + i, b"k%d" % i, value)
    return bytes(builder.build())


def _legacy(magic: int, offset: int, n: int = 1, codec: int = codecs.NONE) -> bytes:
    builder = LegacyRecordBatchBuilder(magic, codec)
    for i in range(n):
        builder.append(offset + i, TS + offset + i, b"lk", b"legacy %d" % i)
    return bytes(builder.build())


def _entries() -> List[bytes]:
    """v2 batches (several codecs), then v0 and v1 messages, a v1 compressed wrapper and v2 again."""
    return [_v2(0, 3), _v2(3, 5, codecs.GZIP), _v2(8, 2, codecs.LZ4), _legacy(0, 10), _legacy(1, 11),
            _legacy(1, 12, 3, codecs.GZIP), _v2(15, 4, codecs.ZSTD), _v2(19, 1)]


def _write(tmp_path, data: bytes, name: str = "%020d.log" % 0) -> str:
    path = str(tmp_path / name)
    with open(path, "wb") as f:
        f.write(data)
    return path


def _walk_all(reader: SegmentReader, **kwargs):
    """(headers, batches, chunks) walks run to their ends."""
    walks = (reader.headers(**kwargs), reader.batches(**kwargs), reader.chunks(**kwargs))
    items = [list(w) for w in walks]
    return walks, items


# -- a valid segment ------------------------------------------------------------------------


def test_a_valid_segment_walks_to_its_end(tmp_path):
    data = b"".join(_entries())
    path = _write(tmp_path, data)
    expected = list(records.iter_batches(data))
    with SegmentReader.open(path) as reader:
        assert reader.size == len(data)
        (headers, batches, chunks), (hs, bs, cs) = _walk_all(reader)
        assert hs == expected  # one header type: the segment reader's and the records walker's
        assert [b.header for b in bs] == hs
        assert [bytes(b.data) for b in bs] == _entries()
        assert b"".join(bytes(c.data) for c in cs) == data and cs[0].position == 0
        for walk in (headers, batches, chunks):
            assert walk.stop == WalkStop(len(data), END, None)
            assert walk.position == len(data)


def test_legacy_headers_carry_their_offsets_and_timestamps(tmp_path):
    data = b"".join(_entries())
    with SegmentReader.open(_write(tmp_path, data)) as reader:
        legacy = [h for h in reader.headers() if h.magic < 2]
    v0, v1, wrapper = legacy
    assert (v0.magic, v0.base_offset, v0.last_offset, v0.max_timestamp) == (0, 10, 10, -1)
    assert (v1.magic, v1.base_offset, v1.last_offset, v1.max_timestamp) == (1, 11, 11, TS + 11)
    assert wrapper.magic == 1 and wrapper.size == len(_entries()[5])


def test_chunks_hold_whole_entries_and_a_larger_entry_comes_alone(tmp_path):
    entries = _entries()
    data = b"".join(entries)
    with SegmentReader.open(_write(tmp_path, data)) as reader:
        small = list(reader.chunks(chunk_bytes=100))  # smaller than most entries
        assert b"".join(bytes(c.data) for c in small) == data
        for chunk in small:
            assert records.scan(chunk.data, 0, True).valid_bytes == len(chunk.data)
        positions = [c.position for c in small]
        assert positions == sorted(positions) and positions[0] == 0
        big = list(reader.chunks(chunk_bytes=len(data)))
        assert len(big) == 1 and bytes(big[0].data) == data


def test_a_reusing_chunk_walk_reads_the_same_chunks_into_one_buffer(tmp_path):
    entries = _entries()
    data = b"".join(entries)
    assert max(len(e) for e in entries) < 700
    with SegmentReader.open(_write(tmp_path, data)) as reader:
        for chunk_bytes in (100, 700, len(data)):
            fresh = [(c.position, bytes(c.data)) for c in reader.chunks(chunk_bytes=chunk_bytes)]
            seen = []
            buffers = set()
            for chunk in reader.chunks(chunk_bytes=chunk_bytes, reuse=True):
                # Each chunk's bytes are taken as it comes: the next read writes over them.
                assert isinstance(chunk.data, memoryview)
                seen.append((chunk.position, bytes(chunk.data)))
                buffers.add(id(chunk.data.obj))
            assert seen == fresh
            if chunk_bytes > 100:
                assert len(buffers) == 1
            # (With 100, the entries larger than that come alone, each read into a buffer grown to fit it.)


def test_a_reusing_walk_overwrites_the_chunk_before(tmp_path):
    # Two entries of the same size: with chunks of one entry each, the second read lands
    # where the first was, so a caller keeping a chunk past the next read sees the next's bytes.
    entries = [_v2(0, 3), _v2(3, 3, value=b"w" * 40)]
    assert len(entries[0]) == len(entries[1])
    with SegmentReader.open(_write(tmp_path, b"".join(entries))) as reader:
        kept = list(reader.chunks(chunk_bytes=len(entries[0]), reuse=True))
        assert [bytes(c.data) for c in kept] == [entries[1], entries[1]]
        assert [c.position for c in kept] == [0, len(entries[0])]
        assert [bytes(c.data) for c in reader.chunks(chunk_bytes=len(entries[0]))] == entries


def test_a_walk_starts_at_a_given_entry_and_stops_at_a_given_end(tmp_path):
    entries = _entries()
    data = b"".join(entries)
    start = len(entries[0])
    end = start + len(entries[1]) + len(entries[2]) + 15  # 15 bytes into the fourth entry
    with SegmentReader.open(_write(tmp_path, data)) as reader:
        for walk in (reader.headers(start, end), reader.batches(start, end)):
            assert [getattr(h, "header", h).base_offset for h in walk] == [3, 8]
            stop = walk.stop
            assert stop is not None and (stop.position, stop.reason) == (end - 15, PARTIAL)
            assert stop.detail == "the entry at position %d declares %d bytes, 15 remain" % (end - 15, len(entries[3]))
        header = reader.header_at(start, end)
        assert header is not None and header.base_offset == 3
        assert reader.header_at(end - 15, end) is None


def test_a_walk_left_early_has_no_stop(tmp_path):
    with SegmentReader.open(_write(tmp_path, b"".join(_entries()))) as reader:
        walk = reader.batches()
        first = next(iter(walk))
        assert walk.stop is None and walk.position == first.header.size


def test_bytes_appended_after_the_reader_opened_are_not_seen(tmp_path):
    entries = _entries()
    path = _write(tmp_path, entries[0])
    with SegmentReader.open(path) as reader:
        with open(path, "ab") as f:
            f.write(entries[1])
        assert [h.base_offset for h in reader.headers()] == [0]
        assert reader.chunks().stop is None  # not walked yet
        walk = reader.chunks()
        assert [bytes(c.data) for c in walk] == [entries[0]]
        assert walk.stop == WalkStop(len(entries[0]), END, None)
    with SegmentReader.open(path) as later:
        assert [h.base_offset for h in later.headers()] == [0, 3]


def test_the_reader_only_reads(tmp_path):
    data = b"".join(_entries())
    path = _write(tmp_path, data)
    before = os.stat(path)
    with SegmentReader.open(path) as reader:
        assert reader.file.readable() and not reader.file.writable()
        _walk_all(reader)
        list(reader.batches(check_crc=True))
    after = os.stat(path)
    assert (after.st_size, after.st_mtime_ns) == (before.st_size, before.st_mtime_ns)
    assert reader.file.closed
    assert open(path, "rb").read() == data


def test_a_borrowed_file_stays_open(tmp_path):
    path = _write(tmp_path, b"".join(_entries()))
    f = io.FileIO(path, "r")
    with SegmentReader(f) as reader:
        assert len(list(reader.headers())) == len(_entries())
    assert not f.closed
    f.close()
    with pytest.raises(ValueError):
        SegmentReader(f, 100).header_at(0)  # a closed file raises; never a reused descriptor


# -- an empty file, a torn tail --------------------------------------------------------------


def test_an_empty_file(tmp_path):
    with SegmentReader.open(_write(tmp_path, b"")) as reader:
        assert reader.size == 0 and reader.header_at(0) is None
        walks, items = _walk_all(reader)
        assert items == [[], [], []]
        assert all(w.stop == WalkStop(0, END, None) for w in walks)


@pytest.mark.parametrize("keep", [1, 11, 12, 16, 17, 40, 61, -1])
def test_a_torn_tail_stops_the_walk_before_it(tmp_path, keep):
    entries = _entries()
    good = b"".join(entries[:-2])
    torn = entries[-2][:keep] if keep > 0 else entries[-2][:-1]
    data = good + torn
    with SegmentReader.open(_write(tmp_path, data)) as reader:
        walks, (hs, bs, cs) = _walk_all(reader)
        assert len(hs) == len(bs) == len(entries) - 2
        assert b"".join(bytes(c.data) for c in cs) == good
        assert records.scan(data, 0, True).valid_bytes == len(good)
        for walk in walks:
            stop = walk.stop
            assert stop is not None and (stop.position, stop.reason) == (len(good), PARTIAL)
            if len(torn) >= 12:
                assert stop.detail == "the entry at position %d declares %d bytes, %d remain" % (
                    len(good), len(entries[-2]), len(torn))
            else:
                assert stop.detail == "%d bytes at position %d, too few for an entry header" % (len(torn), len(good))


def test_a_preallocated_zero_tail_is_not_an_entry(tmp_path):
    good = b"".join(_entries())
    with SegmentReader.open(_write(tmp_path, good + bytes(4096))) as reader:
        walk = reader.batches(check_crc=True)
        assert len(list(walk)) == len(_entries())
        stop = walk.stop
        assert stop is not None and (stop.position, stop.reason) == (len(good), CORRUPT)
        assert "at byte %d claims length 0" % len(good) in (stop.detail or "")


def test_a_file_truncated_under_the_reader(tmp_path):
    entries = _entries()
    data = b"".join(entries)
    path = _write(tmp_path, data)
    cut = len(data) - len(entries[-1]) - 10  # into the last but one entry
    last_but_one = cut - len(entries[-2]) + 10
    with SegmentReader.open(path) as reader:
        os.truncate(path, cut)  # a replica truncating its log under a reader sized before
        for walk in (reader.batches(), reader.chunks(), reader.batches(chunk_bytes=50)):
            list(walk)
            stop = walk.stop
            assert stop is not None and (stop.position, stop.reason) == (last_but_one, TRUNCATED)
            assert stop.detail == "the file ends after %d of the %d bytes of the entry at position %d" % (
                len(entries[-2]) - 10, len(entries[-2]), last_but_one)
        # A walk of headers reads no bodies: it notices the cut at the first header missing.
        headers = reader.headers()
        assert len(list(headers)) == len(entries) - 1
        assert headers.stop == WalkStop(len(data) - len(entries[-1]), TRUNCATED,
                                        "the file ends at position %d, before the end of the walk at %d"
                                        % (cut, len(data)))


# -- corruption ----------------------------------------------------------------------------


def _flip(data: bytes, at: int) -> bytes:
    return data[:at] + bytes([data[at] ^ 0x01]) + data[at + 1:]


def test_a_corrupt_crc_in_the_middle_stops_a_checked_walk(tmp_path):
    entries = _entries()
    data = b"".join(entries)
    where = sum(map(len, entries[:2]))  # the third entry, a v2 batch
    bad = _flip(data, where + len(entries[2]) - 3)  # inside its records
    with SegmentReader.open(_write(tmp_path, bad)) as reader:
        for walk in (reader.batches(check_crc=True), reader.chunks(check_crc=True),
                     reader.batches(check_crc=True, chunk_bytes=64)):
            items = list(walk)
            stop = walk.stop
            assert stop is not None and (stop.position, stop.reason) == (where, CORRUPT)
            assert "record batch at byte %d (offset 8) failed its CRC-32C check" % where in (stop.detail or "")
            assert sum(len(getattr(i, "data")) for i in items) == where
        # A CRC is no framing: walks that do not check it go on to the end.
        walks, (hs, _, _) = _walk_all(reader)
        assert len(hs) == len(entries) and all(w.stop == WalkStop(len(bad), END, None) for w in walks)


def test_a_corrupt_legacy_crc_stops_a_checked_walk(tmp_path):
    entries = _entries()
    where = sum(map(len, entries[:4]))  # the v1 message
    bad = _flip(b"".join(entries), where + len(entries[4]) - 1)
    with SegmentReader.open(_write(tmp_path, bad)) as reader:
        walk = reader.batches(check_crc=True)
        assert len(list(walk)) == 4
        stop = walk.stop
        assert stop is not None and (stop.position, stop.reason) == (where, CORRUPT)
        assert "message at byte %d (offset 11) failed its CRC-32 check" % where in (stop.detail or "")


def test_a_bad_magic_in_the_middle_stops_every_walk(tmp_path):
    entries = _entries()
    where = sum(map(len, entries[:3]))
    data = bytearray(b"".join(entries))
    data[where + 16] = 7
    with SegmentReader.open(_write(tmp_path, bytes(data))) as reader:
        walks, (hs, bs, cs) = _walk_all(reader)
        assert len(hs) == len(bs) == 3
        for walk in walks:
            stop = walk.stop
            assert stop is not None and (stop.position, stop.reason) == (where, CORRUPT)
            assert "entry at byte %d has unknown magic 7" % where in (stop.detail or "")
        assert reader.header_at(where) is None
        assert reader.stop_at(where) == walks[0].stop


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(cut=st.integers(0, 10_000), flip=st.one_of(st.none(), st.integers(0, 10_000)),
       chunk=st.sampled_from([1, 50, 300, 1 << 20]))
def test_the_valid_prefix_is_the_records_walkers(tmp_path, cut, flip, chunk):
    data = b"".join(_entries())
    data = data[: cut % (len(data) + 1)]
    if flip is not None and data:
        data = _flip(data, flip % len(data))
    expected = records.scan(data, 0, True)
    path = _write(tmp_path, data, "%020d.log" % (cut + 1))
    try:
        with SegmentReader.open(path) as reader:
            walk = reader.batches(check_crc=True, chunk_bytes=chunk)
            got = [bytes(b.data) for b in walk]
            stop = walk.stop
            assert stop is not None and stop.position == expected.valid_bytes == sum(map(len, got))
            assert (stop.reason == CORRUPT) == (expected.error is not None)
            assert stop.reason in (END, PARTIAL, CORRUPT)
            unchecked = reader.headers()
            framed = records.scan(data, 0, False)
            assert sum(h.size for h in unchecked) == framed.valid_bytes
    finally:
        os.unlink(path)


def test_headers_match_what_the_log_reads(tmp_path):
    """The log's own lookups walk through the reader: a LogSegment's headers equal the reader's."""
    log = Log(str(tmp_path / "t-0"), LogConfig(index_interval_bytes=0))
    try:
        for entry in (_v2(0, 3), _v2(0, 2, codecs.SNAPPY), _v2(0, 4)):
            log.append(bytearray(entry))
        segment = log.active_segment
        with SegmentReader.open(segment.log_path) as reader:
            assert list(segment.iter_headers()) == list(reader.headers())
            assert [h.last_offset for h in reader.headers()] == [2, 4, 8]
            assert struct.unpack(">q", reader.read(0, 8))[0] == 0
    finally:
        log.close()
