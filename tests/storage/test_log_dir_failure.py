"""A failed log directory (JBOD): one of several ``log.dirs`` whose file system fails goes offline.

The failure is a real one: an ext4 file system on a loop device shut down under logs that were
writing to it, as a dying disk fails (root only; skipped with the reason otherwise, a failure
under ``PYLOGQ_REQUIRE_ALL=1``). A write there fails with EIO; the manager takes the directory offline: its logs leave, their
files let go without a write, listeners hear which partitions went, the other directory goes
on, and a log of the offline directory cannot be created again elsewhere. A full disk is not a
failed directory: its appends fail until space is freed. The manager's bookkeeping is also
driven directly (``report_io_error``), which needs no root.
"""

from __future__ import annotations

import errno
import threading
from pathlib import Path
from typing import Iterator, List, Tuple

import pytest

from pylogq import records
from pylogq.errors import KafkaStorageError
from pylogq.storage.config import LogManagerConfig
from pylogq.storage.manager import LogManager

from .._filesystem import FailingDisk, failing_disk, fill, small_tmpfs

TS = 1_700_000_000_000
Event = Tuple[str, List[Tuple[str, int]], int]


def batch(values: List[bytes]) -> bytes:
    return bytes(records.build_batch(values, timestamps=TS))


def values_of(manager: LogManager, topic: str, partition: int) -> List[bytes]:
    lg = manager.get_log(topic, partition)
    assert lg is not None
    data = lg.read(lg.log_start_offset, 1 << 20).read()
    return [r.value for info in records.iter_batches(data) for r in records.RecordBatch(data, info.position)]


class Listener:
    """A directory failure listener that a test waits on (an event, never a sleep)."""

    def __init__(self) -> None:
        self.events: List[Event] = []
        self.told = threading.Event()

    def __call__(self, path: str, tps: List[Tuple[str, int]], online: int) -> None:
        self.events.append((path, tps, online))
        self.told.set()

    def wait(self) -> Event:
        assert self.told.wait(10), "no directory went offline within 10 s"
        return self.events[-1]


def two_dirs(first: Path, second: Path) -> LogManager:
    """A manager of two directories holding a-0 (first) and b-0 (second), a record each."""
    manager = LogManager(config=LogManagerConfig(log_dirs=[str(first), str(second)]), background=False)
    for topic in ("a", "b"):
        manager.get_or_create_log(topic, 0).append(batch([b"%s-1" % topic.encode()]))
    assert manager.get_log("a", 0).directory.startswith(str(first))  # type: ignore[union-attr]
    assert manager.get_log("b", 0).directory.startswith(str(second))  # type: ignore[union-attr]
    return manager


@pytest.fixture
def disk(tmp_path: Path) -> Iterator[FailingDisk]:
    with failing_disk(tmp_path / "second", 16 * 1024 * 1024) as made:
        yield made


def test_a_failed_directory_goes_offline_and_the_other_goes_on(tmp_path: Path, disk: FailingDisk) -> None:
    first, mounted = tmp_path / "first", disk.path
    manager = two_dirs(first, mounted)
    manager.get_log("b", 0).flush()  # type: ignore[union-attr]  # on the disk before it dies
    listener = Listener()
    manager.add_dir_failure_listener(listener)
    try:
        disk.fail()
        with pytest.raises(KafkaStorageError, match="Input/output error"):
            manager.get_log("b", 0).append(batch([b"b-2"]))  # type: ignore[union-attr]
        path, tps, online = listener.wait()
        assert (path, tps, online) == (str(mounted), [("b", 0)], 1)
        assert manager.offline_dirs().keys() == {str(mounted)}
        assert "Input/output error" in manager.offline_dirs()[str(mounted)]
        assert manager.offline_partitions() == [("b", 0)]
        assert manager.get_log("b", 0) is None
        # The offline directory's log is not made again elsewhere, nor any log not loaded that
        # the caller counts as existing; a new one goes to the directory left.
        with pytest.raises(KafkaStorageError, match="offline log directory"):
            manager.get_or_create_log("b", 0)
        with pytest.raises(KafkaStorageError, match="may be in an offline log directory"):
            manager.get_or_create_log("c", 0, is_new=False)
        assert manager.get_or_create_log("c", 0).directory.startswith(str(first))
        # The other directory serves as before: appends, reads, checkpoints.
        manager.get_log("a", 0).append(batch([b"a-2"]))  # type: ignore[union-attr]
        assert values_of(manager, "a", 0) == [b"a-1", b"a-2"]
        manager.checkpoint()
        manager.checkpoint_high_watermarks({("a", 0): 2, ("c", 0): 0})
        assert [path for path, _ in manager.logs_by_dir()] == [str(first)]
        # Another failure of the same directory is no news.
        manager.report_io_error(str(mounted), OSError(errno.EIO, "again"))
        assert len(listener.events) == 1
    finally:
        manager.close()
    # Started again with the disk still failed, the directory is offline from the start.
    again = LogManager(config=LogManagerConfig(log_dirs=[str(first), str(mounted)]), background=False)
    try:
        assert again.offline_dirs().keys() == {str(mounted)}
        assert values_of(again, "a", 0) == [b"a-1", b"a-2"]
        with pytest.raises(KafkaStorageError):
            again.get_or_create_log("b", 0, is_new=False)
    finally:
        again.close()
    # The disk back: every record flushed before the failure is there.
    disk.repair()
    back = LogManager(config=LogManagerConfig(log_dirs=[str(first), str(mounted)]), background=False)
    try:
        assert back.offline_dirs() == {}
        assert values_of(back, "b", 0) == [b"b-1"]
        assert values_of(back, "a", 0) == [b"a-1", b"a-2"]
    finally:
        back.close()


def test_a_full_disk_fails_appends_without_taking_the_directory_offline(tmp_path: Path) -> None:
    with small_tmpfs(tmp_path / "second", 4 * 1024 * 1024) as second:
        manager = two_dirs(tmp_path / "first", second)
        try:
            filler = second / "filler"
            fill(filler)
            with pytest.raises(KafkaStorageError, match="No space left"):
                manager.get_log("b", 0).append(batch([b"x" * 200_000]))  # type: ignore[union-attr]
            assert manager.offline_dirs() == {}  # decided at once: nothing goes to the scheduler
            filler.unlink()
            manager.get_log("b", 0).append(batch([b"b-2"]))  # type: ignore[union-attr]
            assert values_of(manager, "b", 0) == [b"b-1", b"b-2"]
        finally:
            manager.close()


def test_every_directory_offline_tells_the_listener_none_is_left(tmp_path: Path) -> None:
    manager = two_dirs(tmp_path / "first", tmp_path / "second")
    listener = Listener()
    manager.add_dir_failure_listener(listener)
    try:
        manager.report_io_error(str(tmp_path / "second"), OSError(errno.EIO, "Input/output error"))
        assert listener.wait() == (str(tmp_path / "second"), [("b", 0)], 1)
        listener.told.clear()
        manager.report_io_error(str(tmp_path / "first"), OSError(errno.EIO, "Input/output error"))
        assert listener.wait() == (str(tmp_path / "first"), [("a", 0)], 0)
        assert manager.all_logs() == []
        with pytest.raises(KafkaStorageError, match="every log directory is offline"):
            manager.get_or_create_log("new", 0)
    finally:
        manager.close()


def test_a_full_disk_reported_is_not_a_failure(tmp_path: Path) -> None:
    manager = two_dirs(tmp_path / "first", tmp_path / "second")
    try:
        manager.report_io_error(str(tmp_path / "second"), OSError(errno.ENOSPC, "No space left on device"))
        manager.report_io_error(str(tmp_path / "second"), OSError(errno.EDQUOT, "Disk quota exceeded"))
        assert manager.offline_dirs() == {}
        assert values_of(manager, "b", 0) == [b"b-1"]
    finally:
        manager.close()


def test_a_directory_that_cannot_be_opened_starts_offline(tmp_path: Path) -> None:
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("a file where a log directory should be")
    manager = LogManager(config=LogManagerConfig(log_dirs=[str(tmp_path / "first"), str(blocker)]),
                         background=False)
    try:
        assert manager.offline_dirs().keys() == {str(blocker)}
        assert manager.get_or_create_log("a", 0).directory.startswith(str(tmp_path / "first"))
    finally:
        manager.close()
    with pytest.raises(OSError):  # with no directory usable the manager does not start
        LogManager(config=LogManagerConfig(log_dirs=[str(blocker)]), background=False)
