"""The log when a write fails: a full disk (a real one, a small tmpfs) and an index that cannot grow.

An append that cannot be written raises KafkaStorageError (Kafka's code 56) and leaves
the log as it was: the segment file cut back to its last whole batch, the indexes and
the log end offset unchanged. Once the cause is gone the log takes appends again, and
every acknowledged record reads back, before and after a restart (clean or not).
"""

from __future__ import annotations

import errno
import os
from typing import List, Tuple

import pytest

from pylogq import records
from pylogq.errors import KafkaStorageError
from pylogq.config import LogConfig
from pylogq.storage.log import Log

from .._filesystem import fill, fill_inodes, small_tmpfs

TS = 1_700_000_000_000
DISK_BYTES = 4 * 1024 * 1024


def batch(start: int, n: int, size: int) -> bytes:
    values = [b"%08d" % (start + i) + b"v" * size for i in range(n)]
    return bytes(records.build_batch(values, keys=[b"k%d" % (start + i) for i in range(n)],
                                     timestamps=[TS + start + i for i in range(n)]))


def read_all(lg: Log) -> List[Tuple[int, bytes]]:
    offset, out = lg.log_start_offset, []
    while offset < lg.log_end_offset:
        data = lg.read(offset, 1 << 20).read()
        assert list(records.iter_batches(data, check_crc=True))
        cols = records.decode_columns(data, start_offset=offset)
        out += [(int(o), bytes(cols.value(i) or b"")) for i, o in enumerate(cols.offsets)]
        offset = int(cols.offsets[-1]) + 1
    return out


def state(lg: Log) -> Tuple[int, int, int, int, int]:
    """What a failed append must leave alone: the end offset, segments, file size, index entries."""
    active = lg.active_segment
    return (lg.log_end_offset, lg.num_segments, os.path.getsize(active.log_path),
            active.offset_index.entries, active.time_index.entries)


def expect(appended: List[Tuple[int, int, int]]) -> List[Tuple[int, bytes]]:
    """The records of the acknowledged appends (first offset, count, value size), in offset order."""
    out = []
    for first, n, size in appended:
        out += [(first + i, b"%08d" % (first + i) + b"v" * size) for i in range(n)]
    return out


@pytest.mark.parametrize("restart", ["clean", "crash"])
def test_a_full_disk_fails_appends_with_a_storage_error_and_the_log_takes_them_again(tmp_path, restart):
    with small_tmpfs(tmp_path / "disk", DISK_BYTES) as disk:
        directory = str(disk / "t-0")
        cfg = LogConfig(segment_bytes=1 << 20, index_interval_bytes=512)
        lg = Log(directory, cfg)
        acked: List[Tuple[int, int, int]] = []
        for _ in range(20):
            result = lg.append(batch(lg.log_end_offset, 20, 50))
            acked.append((result.first_offset, 20, 50))
        fill(disk / "filler")
        before = state(lg)
        for n, size in ((1, 20_000), (50, 1_000), (200, 500)):  # each larger than a page: never fits
            with pytest.raises(KafkaStorageError) as raised:
                lg.append(batch(lg.log_end_offset, n, size))
            assert raised.value.code == 56 and "No space left on device" in str(raised.value)
            assert state(lg) == before
        assert read_all(lg) == expect(acked)
        os.unlink(disk / "filler")
        for _ in range(30):  # writes again, across a roll
            result = lg.append(batch(lg.log_end_offset, 100, 500))
            acked.append((result.first_offset, 100, 500))
        assert acked[20][0] == before[0]  # no offset was used up by the failed appends
        assert lg.num_segments > 1
        assert read_all(lg) == expect(acked)
        lg.close()
        # Clean: the files are trusted as closed; crash: every segment is recovered batch by batch.
        lg = Log(directory, cfg, clean_shutdown=True) if restart == "clean" else Log(directory, cfg, recovery_point=0)
        try:
            assert lg.recovered_bytes == 0
            assert read_all(lg) == expect(acked)
        finally:
            lg.close()


def _index_write_fails(monkeypatch) -> List[int]:
    """Make the next write to an index file fail with ENOSPC, as on a full disk; -> its log of failures."""
    failed: List[int] = []
    real = os.pwrite

    def pwrite(fd, data, offset):
        target = os.readlink("/proc/self/fd/%d" % fd)
        if not failed and target.endswith((".index", ".timeindex")):
            failed.append(fd)
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real(fd, data, offset)

    monkeypatch.setattr(os, "pwrite", pwrite)
    return failed


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="needs /proc/self/fd to tell index files apart")
def test_an_index_that_cannot_grow_fails_the_append_and_takes_back_its_batches(tmp_path, monkeypatch):
    """The batches are in the file when the index write fails: they are cut off again."""
    directory = str(tmp_path / "t-0")
    cfg = LogConfig(index_interval_bytes=0)
    lg = Log(directory, cfg)
    lg.append(batch(0, 5, 10))  # the first batch adds no index entry; the next one does
    before = state(lg)
    failed = _index_write_fails(monkeypatch)
    with pytest.raises(KafkaStorageError):
        lg.append(batch(5, 5, 10) + batch(10, 5, 10))
    assert failed and state(lg) == before
    again = lg.append(batch(5, 5, 10) + batch(10, 5, 10))
    assert again.first_offset == 5
    assert lg.active_segment.offset_index.entries == 2
    assert read_all(lg) == expect([(0, 5, 10), (5, 5, 10), (10, 5, 10)])
    lg.close()
    lg = Log(directory, cfg, clean_shutdown=True)
    try:
        assert lg.recovered_bytes == 0
        assert read_all(lg) == expect([(0, 5, 10), (5, 5, 10), (10, 5, 10)])
        assert [o for o, _ in lg.active_segment.offset_index.all_entries()] == [9, 14]
    finally:
        lg.close()


def test_a_shutdown_that_cannot_write_its_checkpoints_leaves_no_clean_marker_and_the_next_start_recovers(
        tmp_path, caplog):
    """Here the file system has no inode left for the checkpoints' new files (a close frees
    blocks as it trims the indexes, so a disk out of blocks may have room again by then)."""
    import shutil

    from pylogq.storage.checkpoint import CLEAN_SHUTDOWN_FILE
    from pylogq.storage.manager import LogManager

    with small_tmpfs(tmp_path / "disk", DISK_BYTES, inodes=64) as disk:
        root = str(disk / "data")
        manager = LogManager([root], background=False)
        lg = manager.get_or_create_log("t", 0, LogConfig(segment_bytes=1 << 20))
        acked = []
        for _ in range(10):
            result = lg.append(batch(lg.log_end_offset, 20, 50))
            acked.append((result.first_offset, 20, 50))
        assert fill_inodes(disk / "filler") > 0
        manager.close()  # logged, not raised
        assert not os.path.exists(os.path.join(root, CLEAN_SHUTDOWN_FILE))
        assert any("could not write the checkpoints" in r.getMessage() for r in caplog.records
                   if r.levelname == "ERROR")
        shutil.rmtree(disk / "filler")
        with LogManager([root], background=False) as again:
            lg = again.get_log("t", 0)
            assert read_all(lg) == expect(acked)
        assert os.path.exists(os.path.join(root, CLEAN_SHUTDOWN_FILE))
