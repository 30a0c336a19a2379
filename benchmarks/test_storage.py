"""The storage engine's hot paths: appending, scanning and recovering a log, against plain file I/O.

Groups and targets (the peer is the same bytes through bare ``os`` calls):
- "append 1MB batches": ``Log.append`` of 64 prebuilt ~1 MB v2 batches of
  100-byte records into a fresh log (segment.bytes 1 GB, default flush
  policy: no fsync) against ``os.write`` of the same bytes to a fresh file.
  Target >= 70% of os.write.
- "scan 1GB log": a 1 GB log of ~1 MB batches, in the page cache, read from
  the start with ``Log.read(offset, 1 MB)``; each region's bytes are read and
  the next offset follows its last whole batch. Target >= 2 GB/s; sequential
  1 MB ``os.pread`` of the same files is shown for scale.
- "recover 1GB segment": ``LogSegment.recover`` of a 1 GB segment of ~16 KB
  batches (a producer's default batch.size) without indexes: CRC and framing
  of every batch, both indexes rebuilt. Target >= 1 GB/s; 1 MB ``os.pread``
  of the file is shown for scale.

Without compiled kernels (``PYLOGQ_NO_EXTENSIONS=1``) or in a smoke
run (``--quick``, as CI runs them, or ``--benchmark-disable``) the logs are 16 MB and the append
group writes 4 batches, so the run stays short. Each benchmark records its
throughput in ``extra_info``.
"""

from __future__ import annotations

import os
import shutil
import struct
from typing import Iterator, List, Tuple

import pytest
from summary import info, smoke

from pylogq import records
from pylogq.storage.config import LogConfig
from pylogq.storage.log import Log
from pylogq.storage.scheduler import Scheduler
from pylogq.storage.segment import LogSegment

GB = 1 << 30
MB = 1 << 20
SMALL = 16 * MB
TS = 1_700_000_000_000
RECORD = 100


def _full_size(request) -> bool:
    return not smoke(request.config)


def _rate(benchmark, items: int) -> None:
    """Record the throughput (items/s at the median) once the timings exist."""
    stats = benchmark.stats
    if stats is not None and getattr(stats, "stats", None) is not None and stats.stats.median:
        benchmark.extra_info["bytes_per_s"] = items / stats.stats.median


def _batch(target_bytes: int) -> bytes:
    """One v2 batch of 100-byte records, uncompressed, just under ``target_bytes``."""
    per_record = RECORD + 8  # a 100-byte value with no key: 8 bytes of record framing
    n = max(1, (target_bytes - records.HEADER_SIZE) // per_record)
    values = [(b"%08d" % i) * (RECORD // 8) + b"0" * (RECORD % 8) for i in range(n)]
    return bytes(records.build_batch(values, timestamps=TS))


def _with_base(batch: bytes, base_offset: int) -> bytearray:
    """The batch at another base offset (the base offset is outside the CRC)."""
    out = bytearray(batch)
    struct.pack_into(">q", out, 0, base_offset)
    return out


# -- append ----------------------------------------------------------------------------

MB_BATCH = 1_000_000  # below max.message.bytes (1,048,588)


@pytest.fixture(scope="module")
def mb_batch() -> bytes:
    return _batch(MB_BATCH)


@pytest.fixture(scope="module")
def scheduler() -> Iterator[Scheduler]:
    s = Scheduler("bench-storage")
    yield s
    s.shutdown()


class _Fresh:
    """A new log (or file) per round, made in setup and removed at the next setup."""

    def __init__(self, root: str) -> None:
        self.root = root
        self.round = 0
        self.log = None
        self.fd = -1

    def _clear(self) -> None:
        if self.log is not None:
            self.log.close()
            self.log = None
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1
        shutil.rmtree(self.root, ignore_errors=True)
        os.makedirs(self.root)

    def new_log(self, scheduler: Scheduler, preallocate: bool = False) -> Log:
        self._clear()
        self.round += 1
        self.log = Log(os.path.join(self.root, "append-%d" % self.round),
                       LogConfig(segment_bytes=GB, preallocate=preallocate), scheduler=scheduler)
        return self.log

    def new_file(self) -> int:
        self._clear()
        self.round += 1
        self.fd = os.open(os.path.join(self.root, "plain-%d" % self.round), os.O_WRONLY | os.O_CREAT, 0o644)
        return self.fd

    def close(self) -> None:
        self._clear()
        shutil.rmtree(self.root, ignore_errors=True)


@pytest.mark.parametrize("preallocate", [False, True], ids=["default", "preallocate"])
def test_append_log(benchmark, request, tmp_path, mb_batch, scheduler, preallocate) -> None:
    """Kafka's ``preallocate`` (default false) reserves each segment's blocks up front."""
    count = 64 if _full_size(request) else 4
    fresh = _Fresh(str(tmp_path / "append"))
    state = {}

    def setup():
        state["log"] = fresh.new_log(scheduler, preallocate)
        return (), {}

    # A broker appends the produce request's own buffer, validated and patched
    # in place (Log.append takes a bytearray without copying it).
    buffer = bytearray(mb_batch)

    def append():
        log = state["log"]
        for _ in range(count):
            log.append(buffer)
        return log.log_end_offset

    items = count * len(mb_batch)
    info(benchmark, "append 1MB batches", items, "B", target=">= 70% of os.write")
    try:
        end = benchmark.pedantic(append, setup=setup, rounds=8 if count > 4 else 2, iterations=1)
        assert state["log"].size_in_bytes == items and end > 0
    finally:
        fresh.close()
    _rate(benchmark, items)


def test_append_os_write(benchmark, request, tmp_path, mb_batch) -> None:
    count = 64 if _full_size(request) else 4
    fresh = _Fresh(str(tmp_path / "append"))
    state = {}

    def setup():
        state["fd"] = fresh.new_file()
        return (), {}

    def write():
        fd = state["fd"]
        written = 0
        for _ in range(count):
            written += os.write(fd, mb_batch)
        return written

    items = count * len(mb_batch)
    info(benchmark, "append 1MB batches", items, "B", peer=True)
    try:
        assert benchmark.pedantic(write, setup=setup, rounds=8 if count > 4 else 2, iterations=1) == items
    finally:
        fresh.close()
    _rate(benchmark, items)


# -- scan --------------------------------------------------------------------------------


def _write_batches(path: str, template: bytes, total: int, first_offset: int = 0) -> Tuple[int, int]:
    """Write copies of ``template`` with increasing offsets until ``total`` bytes; -> (bytes, next offset)."""
    per = records.RecordBatch(template).last_offset_delta + 1
    chunk: List[bytes] = []
    written, offset = 0, first_offset
    with open(path, "wb") as f:
        while written + len(template) <= total:
            chunk.append(bytes(_with_base(template, offset)))
            offset += per
            written += len(template)
            if len(chunk) >= 64:
                f.write(b"".join(chunk))
                chunk.clear()
        f.write(b"".join(chunk))
    return written, offset


def _warm(paths: List[str]) -> int:
    total = 0
    for path in paths:
        fd = os.open(path, os.O_RDONLY)
        try:
            position = 0
            while True:
                n = len(os.pread(fd, MB, position))
                if not n:
                    break
                position += n
        finally:
            os.close(fd)
        total += position
    return total


@pytest.fixture(scope="module")
def scan_log(request, tmp_path_factory, mb_batch, scheduler) -> Iterator[Log]:
    """A log of ~1 MB batches (1 GB, or 16 MB in small runs), closed and reopened clean, then warmed."""
    size = GB if _full_size(request) else SMALL
    root = tmp_path_factory.mktemp("scan")
    directory = str(root / "scan-0")
    os.makedirs(directory)
    _write_batches(os.path.join(directory, "%020d.log" % 0), mb_batch, size)
    log = Log(directory, LogConfig(segment_bytes=GB), recovery_point=0, scheduler=scheduler)
    log.close()
    log = Log(directory, LogConfig(segment_bytes=GB), clean_shutdown=True, scheduler=scheduler)
    _warm([s.log_path for s in log.segments])
    yield log
    log.close()
    shutil.rmtree(str(root), ignore_errors=True)


def test_scan_log(benchmark, scan_log) -> None:
    log = scan_log
    end = log.log_end_offset

    def scan() -> int:
        offset, total = log.log_start_offset, 0
        while offset < end:
            region = log.read(offset, MB)
            data = region.read()
            total += len(data)
            last = None
            for last in records.iter_batches(data):
                pass
            offset = last.last_offset + 1
        return total

    items = scan()
    info(benchmark, "scan 1GB log", items, "B", target=">= 2 GB/s")
    assert benchmark.pedantic(scan, rounds=5, iterations=1) == items
    _rate(benchmark, items)


def test_scan_os_pread(benchmark, scan_log) -> None:
    paths = [s.log_path for s in scan_log.segments]
    items = _warm(paths)
    info(benchmark, "scan 1GB log", items, "B", peer=True)
    assert benchmark.pedantic(_warm, args=(paths,), rounds=5, iterations=1) == items
    _rate(benchmark, items)


# -- recover -----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def recover_segment(request, tmp_path_factory) -> Iterator[Tuple[str, int]]:
    """A segment file of ~16 KB batches (1 GB, or 16 MB in small runs) with no index files."""
    size = GB if _full_size(request) else SMALL
    root = tmp_path_factory.mktemp("recover")
    directory = str(root / "recover-0")
    os.makedirs(directory)
    path = os.path.join(directory, "%020d.log" % 0)
    written, _ = _write_batches(path, _batch(16 * 1024), size)
    _warm([path])
    yield directory, written
    shutil.rmtree(str(root), ignore_errors=True)


CONFIG = LogConfig(segment_bytes=GB)


def test_recover_segment(benchmark, recover_segment) -> None:
    directory, size = recover_segment
    state = {}

    def setup():
        previous = state.pop("segment", None)
        if previous is not None:
            previous.close()
        for name in os.listdir(directory):
            if not name.endswith(".log"):
                os.unlink(os.path.join(directory, name))
        state["segment"] = LogSegment.open(directory, 0, CONFIG)
        return (), {}

    def recover() -> int:
        return state["segment"].recover(CONFIG.max_message_bytes)

    info(benchmark, "recover 1GB segment", size, "B", target=">= 1 GB/s")
    try:
        assert benchmark.pedantic(recover, setup=setup, rounds=5, iterations=1) == 0
        segment = state["segment"]
        assert segment.size == size and segment.offset_index.entries > 0
    finally:
        if "segment" in state:
            state["segment"].close()
    _rate(benchmark, size)


def test_recover_os_pread(benchmark, recover_segment) -> None:
    directory, size = recover_segment
    paths = [os.path.join(directory, "%020d.log" % 0)]
    info(benchmark, "recover 1GB segment", size, "B", peer=True)
    assert benchmark.pedantic(_warm, args=(paths,), rounds=5, iterations=1) == size
    _rate(benchmark, size)
