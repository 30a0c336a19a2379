"""The process's cache of open segment files and index maps: bounded, and never closing a file under a reader.

Descriptors are counted in ``/proc/self/fd``: a log of 345 segments holds no
more than the cache's capacity (it held three per segment, 1,035, before the
cache), and a region from a read, or a reader, keeps its file open and
readable after the cache let it go, its descriptor number never reused.
"""

from __future__ import annotations

import errno
import os
import random
import threading
from typing import Iterator, List

import pytest

from pylogq import records
from pylogq.storage import file_cache
from pylogq.config import LogConfig
from pylogq.storage.file_cache import MIN_CAPACITY, FileCache, SharedFile
from pylogq.storage.log import Log
from pylogq.storage.scheduler import Scheduler

TS = 1_700_000_000_000
CAPACITY = 32
# Descriptors open for an instant besides the cached ones (a flush-on-roll's fsync in the scheduler's thread).
TRANSIENT = 8

pytestmark = pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="counts descriptors in /proc/self/fd")


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


@pytest.fixture
def cache(monkeypatch) -> Iterator[FileCache]:
    """A small cache of its own for the test: segments opened meanwhile use it."""
    small = FileCache(CAPACITY)
    monkeypatch.setattr(file_cache, "_shared", small)
    yield small
    small.clear()


@pytest.fixture
def scheduler() -> Iterator[Scheduler]:
    s = Scheduler("test-file-cache")
    yield s
    s.shutdown()


def batch(start: int, n: int = 5) -> bytes:
    return bytes(records.build_batch([b"value-%08d" % (start + i) for i in range(n)],
                                     keys=[b"k%d" % i for i in range(n)],
                                     timestamps=[TS + start + i for i in range(n)]))


def many_segments(path: str, segments: int, scheduler: Scheduler) -> Log:
    """A log of ``segments`` segments of 4 batches of 5 records each."""
    log = Log(path, LogConfig(segment_bytes=4 * len(batch(0)), segment_index_bytes=4096, index_interval_bytes=0),
              scheduler=scheduler)
    offset = 0
    while log.num_segments < segments or log.active_segment.size < 4 * len(batch(0)):
        log.append(batch(offset))
        offset += 5
    return log


def read_everything(log: Log) -> List[bytes]:
    out, offset = [], log.log_start_offset
    while offset < log.log_end_offset:
        data = log.read(offset, 1 << 20).read()
        cols = records.decode_columns(data, start_offset=offset)
        out += [cols.value(i) for i in range(len(cols))]
        offset = int(cols.offsets[-1]) + 1
    return out


def test_a_345_segment_log_holds_a_bounded_number_of_descriptors(tmp_path, cache, scheduler):
    before = open_fds()
    log = many_segments(str(tmp_path / "t-0"), 345, scheduler)
    assert log.num_segments >= 345
    # Written, read from end to end and reopened: each stays within the cache's capacity.
    assert open_fds() - before <= CAPACITY + TRANSIENT
    values = read_everything(log)
    assert values == [b"value-%08d" % i for i in range(len(values))] and len(values) >= 345 * 20
    assert open_fds() - before <= CAPACITY + TRANSIENT
    assert len(cache) <= CAPACITY and cache.evictions > 0
    log.close()
    assert open_fds() - before <= TRANSIENT  # closed: the log holds nothing
    log = Log(str(tmp_path / "t-0"), LogConfig(segment_bytes=4 * len(batch(0)), segment_index_bytes=4096,
                                               index_interval_bytes=0), clean_shutdown=True, scheduler=scheduler)
    assert read_everything(log) == values
    assert open_fds() - before <= CAPACITY + TRANSIENT
    log.close()


def test_the_same_log_is_read_and_written_on_the_process_cache_set_by_the_manager(tmp_path, monkeypatch):
    from pylogq.storage.config import LogManagerConfig
    from pylogq.storage.manager import LogManager

    monkeypatch.setattr(file_cache, "_shared", FileCache())
    manager = LogManager(config=LogManagerConfig(log_dirs=[str(tmp_path)], log_open_files_max=20,
                                                 log_cleaner_enable=False), background=False)
    try:
        assert file_cache.open_files().capacity == 20
        log = manager.get_or_create_log("t", 0, LogConfig(segment_bytes=400, segment_index_bytes=4096))
        for i in range(100):
            log.append(batch(5 * i))
        assert log.num_segments > 20 and len(file_cache.open_files()) <= 20
        assert len(read_everything(log)) == 500
    finally:
        manager.close()
    manager = LogManager(config=LogManagerConfig(log_dirs=[str(tmp_path)], log_cleaner_enable=False),
                         background=False)
    manager.close()
    assert file_cache.open_files().capacity == file_cache.default_capacity()  # unset: from RLIMIT_NOFILE


def test_a_fetched_region_stays_readable_after_its_file_left_the_cache(tmp_path, cache, scheduler):
    log = many_segments(str(tmp_path / "t-0"), 3, scheduler)
    region = log.read(0, 1 << 20)
    expected = region.read()
    fd = region.fileno()
    inode = os.fstat(fd).st_ino
    cache.clear()  # the cache lets go of every file: the region still holds its own
    for other in range(3 * CAPACITY):  # new files open meanwhile, none may get the region's descriptor
        with open(str(tmp_path / ("other-%d" % other)), "wb"):
            pass
    assert region.fileno() == fd and os.fstat(fd).st_ino == inode
    assert region.read() == expected
    out = os.open(str(tmp_path / "sent"), os.O_RDWR | os.O_CREAT)
    try:  # what the server does with a region: sendfile from its descriptor
        assert os.sendfile(out, region.fileno(), region.position, len(region)) == len(region)
        assert os.pread(out, len(region), 0) == expected
    finally:
        os.close(out)
    # Deleted as well (retention): the region still reads, the log opens nothing for it.
    log.truncate_fully_and_start_at(log.log_end_offset)
    cache.clear()
    assert region.read() == expected
    log.close()
    assert region.read() == expected
    del region
    assert all(os.fstat(n).st_ino != inode for n in map(int, os.listdir("/proc/self/fd"))
               if _fstat_ok(n))  # the last user let go: the file is closed


def _fstat_ok(fd: int) -> bool:
    try:
        os.fstat(fd)
        return True
    except OSError:
        return False


def test_a_reader_keeps_its_file_while_the_cache_churns(tmp_path, cache, scheduler):
    """Readers of many segments in four threads and a writer share a cache too small for them all:
    every read returns the bytes written, however often the files come and go."""
    log = many_segments(str(tmp_path / "t-0"), 4 * CAPACITY, scheduler)
    end = log.log_end_offset
    expected = [b"value-%08d" % i for i in range(end)]
    failures: List[str] = []
    done = threading.Event()

    def read(seed: int) -> None:
        rng = random.Random(seed)
        try:
            while not done.is_set():
                offset = rng.randrange(end)
                cols = records.decode_columns(log.read(offset, 256).read(), start_offset=offset)
                got = [cols.value(i) for i in range(len(cols))]
                if not got or got != expected[offset:offset + len(got)]:
                    failures.append("offset %d: %r" % (offset, got[:2]))
        except Exception as exc:  # reported below: a thread's failure must fail the test
            failures.append(repr(exc))

    readers = [threading.Thread(target=read, args=(i,)) for i in range(4)]
    for r in readers:
        r.start()
    try:
        for i in range(200):
            log.append(batch(end + 5 * i))
    finally:
        done.set()
        for r in readers:
            r.join()
    assert not failures, failures[:5]
    assert read_everything(log) == [b"value-%08d" % i for i in range(end + 1000)]
    log.close()


# -- the cache itself ------------------------------------------------------------------


def test_capacity_is_bounded_and_follows_the_descriptor_limit():
    import resource

    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    expected = (file_cache.MAX_DEFAULT_CAPACITY if soft == resource.RLIM_INFINITY
                else max(MIN_CAPACITY, min(soft // 4, file_cache.MAX_DEFAULT_CAPACITY)))
    assert file_cache.default_capacity() == expected
    assert FileCache().capacity == expected
    with pytest.raises(ValueError, match=">= 16, not 3"):
        FileCache(3)


def _opener(tmp_path, name: str, opened: List[str]):
    path = str(tmp_path / name)
    open(path, "wb").close()

    def open_it() -> SharedFile:
        opened.append(name)
        return SharedFile(path, "r+")

    return open_it


def test_the_least_recently_used_file_goes_first(tmp_path):
    cache = FileCache(MIN_CAPACITY)
    opened: List[str] = []
    handles = [cache.handle(_opener(tmp_path, "f%d" % i, opened), lambda: ValueError("closed"))
               for i in range(MIN_CAPACITY + 2)]
    for h in handles[:MIN_CAPACITY]:
        h.get()
    for h in handles:
        h.referenced = False  # as after the clock hand passed them all
    handles[0].get()  # the oldest is used again: it gets a second chance
    handles[MIN_CAPACITY].get()  # one too many: the oldest not used since goes
    assert handles[0].peek() is not None and handles[1].peek() is None
    handles[MIN_CAPACITY + 1].get()
    assert handles[2].peek() is None and handles[0].peek() is not None
    assert len(cache) == MIN_CAPACITY and cache.evictions == 2
    opened.clear()
    handles[1].get()  # opened again on demand
    assert opened == ["f1"]


def test_a_closed_handle_raises_its_error_and_opens_nothing(tmp_path):
    cache = FileCache(MIN_CAPACITY)
    opened: List[str] = []
    h = cache.handle(_opener(tmp_path, "f", opened), lambda: ValueError("segment 7 is deleted"))
    first = h.get()
    assert h.close() is first and len(cache) == 0
    with pytest.raises(ValueError, match="segment 7 is deleted"):
        h.get()
    assert opened == ["f"] and not first.closed  # the caller still holds it: not closed under it
    del first


def test_out_of_descriptors_the_cache_gives_back_what_it_holds_and_tries_again(tmp_path):
    cache = FileCache(MIN_CAPACITY)
    opened: List[str] = []
    for i in range(MIN_CAPACITY):
        cache.handle(_opener(tmp_path, "f%d" % i, opened), lambda: ValueError("closed")).get()
    fail = [True]
    real = _opener(tmp_path, "g", opened)

    def emfile_once() -> SharedFile:
        if fail[0]:
            fail[0] = False
            raise OSError(errno.EMFILE, "Too many open files")
        return real()

    h = cache.handle(emfile_once, lambda: ValueError("closed"))
    assert h.get() is not None
    assert len(cache) <= MIN_CAPACITY // 2 + 1  # half was let go before the second try


def test_two_threads_opening_one_file_share_one_object(tmp_path):
    cache = FileCache(MIN_CAPACITY)
    gate = threading.Barrier(2)
    path = str(tmp_path / "f")
    open(path, "wb").close()
    made: List[SharedFile] = []

    def slow_open() -> SharedFile:
        f = SharedFile(path, "r+")
        made.append(f)
        gate.wait()  # both threads are inside the opener before either installs
        return f

    h = cache.handle(slow_open, lambda: ValueError("closed"))
    got: List[SharedFile] = []
    threads = [threading.Thread(target=lambda: got.append(h.get())) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(made) == 2 and got[0] is got[1] is h.peek()
    assert sum(f.closed for f in made) == 1  # the spare was closed, never handed out
