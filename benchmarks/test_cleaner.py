"""Compacting a log: pylogq's cleaner against copying the same bytes.

Group "log cleaner": a compacted log of 1M distinct keys (``b"key-%08d"``)
with 100-byte values in batches of 100 records and 16 MB segments. Every key
is written once in key order; then half of the keys are updated twice, in key
order, and 1000 random keys once more (so a few batches lose some records
and are rebuilt): 2M records, half of them dead, about 240 MB. The offset
map has 24 B * 1.2M of memory, enough for every key in one round. Each round
cleans a fresh copy of the log (copied outside the timed region).
Throughput is the bytes the clean read (``CleanerStats.bytes_read``). The
peer is ``shutil.copyfile`` of the same segment files: the floor for a job
that must read and rewrite them. In a smoke run (``--quick``,
``--benchmark-disable`` or ``PYLOGQ_NO_EXTENSIONS=1``: summary.py) the log has 20k keys. Target: >= 100 MB/s.
"""

from __future__ import annotations

import os
import random
import shutil
import tempfile
from typing import Any, Dict, Iterator, List, Tuple

import pytest
from summary import smoke

from pylogq import _speedups, records
from pylogq.storage.cleaner import LogCleaner
from pylogq.storage.config import LogConfig, LogManagerConfig
from pylogq.storage.log import Log
from pylogq.storage.manager import LogManager

KEYS = 1_000_000
SMALL_KEYS = 20_000
VALUE = 100
BATCH = 100
SEGMENT_BYTES = 16 * 1024 * 1024
TARGET = ">= 100 MB/s"


def _config() -> LogConfig:
    return LogConfig(cleanup_policy="compact", segment_bytes=SEGMENT_BYTES, file_delete_delay_ms=0,
                     message_timestamp_difference_max_ms=2**62)


def _build(path: str, keys: int) -> int:
    """Write the workload into a log at ``path``; -> the bytes of its cleanable segments."""
    log = Log(path, _config())
    value = b"v" * (VALUE - 8)
    rng = random.Random(42)

    def write(key_ids: List[int], version: int) -> None:
        for i in range(0, len(key_ids), BATCH):
            ids = key_ids[i : i + BATCH]
            log.append(bytes(records.build_batch([b"%s%08d" % (value, version)] * len(ids),
                                                 keys=[b"key-%08d" % k for k in ids], timestamps=1_000_000)))

    write(list(range(keys)), 0)
    half = list(range(keys // 2))
    write(half, 1)
    write(half, 2)
    write(sorted(rng.sample(range(keys), max(keys // 1000, 10))), 3)
    log.roll()
    size = sum(s.size for s in log.segments[:-1])
    log.close()
    return size


@pytest.fixture(scope="module")
def workload(request) -> Iterator[Tuple[str, int, int]]:
    small = smoke(request.config)
    keys = SMALL_KEYS if small else KEYS
    root = tempfile.mkdtemp(prefix="pylogq-bench-cleaner-")
    source = os.path.join(root, "source", "events-0")
    size = _build(source, keys)
    yield source, size, keys
    shutil.rmtree(root, ignore_errors=True)


class _Rounds:
    """Fresh copies of the source log, one per round, and what must be closed after."""

    def __init__(self, source: str) -> None:
        self.source = source
        self.root = os.path.dirname(os.path.dirname(source))
        self.count = 0
        self.open: List[Any] = []

    def next_dir(self) -> str:
        self.close()
        self.count += 1
        target = os.path.join(self.root, "round-%d" % self.count)
        shutil.rmtree(os.path.join(self.root, "round-%d" % (self.count - 1)), ignore_errors=True)
        return os.path.join(target, "events-0")

    def close(self) -> None:
        for thing in self.open:
            thing.close()
        self.open = []


def test_clean_log(benchmark, workload, tmp_path) -> None:
    source, size, keys = workload
    rounds = _Rounds(source)
    manager = LogManager(config=LogManagerConfig(log_dirs=[str(tmp_path / "manager")], log_cleaner_enable=False,
                                                 log_cleaner_dedupe_buffer_size=24 * int(keys * 1.2)),
                         background=False)
    cleaner = LogCleaner(manager)
    results: List[Any] = []

    def setup() -> Tuple[Tuple[Log], Dict[str, Any]]:
        path = rounds.next_dir()
        shutil.copytree(source, path)
        log = Log(path, _config(), clean_shutdown=True)
        rounds.open.append(log)
        return (log,), {}

    def clean(log: Log) -> Any:
        stats = cleaner.clean_log(log)
        results.append(stats)
        return stats

    benchmark.group = "log cleaner"
    benchmark.pedantic(clean, setup=setup, rounds=3, iterations=1)
    stats = results[-1]
    assert not stats.aborted and stats.bytes_read == size
    assert stats.records_read == 2 * keys + max(keys // 1000, 10) and stats.records_kept == keys
    assert stats.bytes_written < 0.6 * size
    median = benchmark.stats.stats.median if benchmark.stats else None
    benchmark.extra_info.update(
        items=size, unit="B", target=TARGET, keys=keys, log_bytes=size,
        bytes_written=stats.bytes_written, batches_rebuilt=stats.batches_rebuilt,
        mb_per_s=(size / median / 1e6) if median else None,
        implementation="pure" if _speedups.NO_EXTENSIONS else "compiled")
    rounds.close()
    manager.close()


def test_copyfile_peer(benchmark, workload, tmp_path) -> None:
    source, size, keys = workload
    names = sorted(n for n in os.listdir(source) if n.endswith(".log"))
    files = [os.path.join(source, n) for n in names][:-1]  # the cleanable segments, as the cleaner reads
    target = tmp_path / "copy"
    target.mkdir()

    def copy() -> int:
        total = 0
        for f in files:
            dest = str(target / os.path.basename(f))
            shutil.copyfile(f, dest)
            total += os.path.getsize(dest)
        return total

    benchmark.group = "log cleaner"
    copied = benchmark.pedantic(copy, rounds=3, iterations=1)
    assert copied == size
    median = benchmark.stats.stats.median if benchmark.stats else None
    benchmark.extra_info.update(items=size, unit="B", peer=True, target=TARGET,
                                mb_per_s=(size / median / 1e6) if median else None)
