"""Readers scanning a log while it is appended to, rolled, trimmed by retention and compacted.

Three reader threads scan from the log start over and over, the way a
consumer fetches: ``Log.read(offset, max_bytes)``, decode the whole batches of
the region, go on after the last one. One writer appends (small segments, so
it rolls often); a retention thread deletes old segments and moves the log
start offset; on the compacted variant a cleaner thread compacts instead.

A reader must see every offset in order (contiguous on the delete-policy log,
increasing on the compacted one), each record holding what the writer put at
its offset; a region's first batch is always whole (a region may end with a
partial batch, which the reader leaves for the next read); a range deleted
under a reader shows as OffsetOutOfRangeError, after which the reader starts
again from the log start. Any other exception in any thread fails the test.
"""

from __future__ import annotations

import random
import threading
import time
from typing import Callable, List

import numpy as np
import pytest

from pylogq import _speedups, records
from pylogq.errors import OffsetOutOfRangeError
from pylogq.storage.cleaner import LogCleaner
from pylogq.config import LogConfig
from pylogq.storage.config import LogManagerConfig
from pylogq.storage.log import Log
from pylogq.storage.manager import LogManager

from . import _crash_child as child

READERS = 3
APPENDS = 300 if _speedups.NO_EXTENSIONS else 1000
DEADLINE = 90.0  # seconds for the whole test; a thread still running then is a failure
READ_BYTES = 16 * 1024


def _key(offset: int) -> bytes:
    return b"key-%d" % (offset % 40)


def _batch(rng: random.Random, first: int) -> bytes:
    out = []
    offset = first
    for _ in range(rng.choice((1, 1, 2, 3))):
        count = rng.choice((1, 3, 10, 25))
        offsets = range(offset, offset + count)
        out.append(bytes(records.build_batch(
            [child.value_for(o) for o in offsets],
            keys=[_key(o) for o in offsets],
            timestamps=[1_700_000_000_000 + o for o in offsets],
            compression_type=rng.choice(child.CODECS),
        )))
        offset += count
    return b"".join(out)


class _Run:
    """Shared state of one run: the stop signal, the writer's progress, errors per thread."""

    def __init__(self, log: Log) -> None:
        self.log = log
        self.stop = threading.Event()
        self.writer_done = threading.Event()
        self.appended = threading.Condition()
        self.errors: List[str] = []
        self.counts = {"records read": 0, "restarts": 0, "passes": 0, "deletions": 0, "cleanings": 0}
        self.lock = threading.Lock()

    def thread(self, name: str, body: Callable[[], None]) -> threading.Thread:
        def run() -> None:
            try:
                body()
            except BaseException as exc:  # noqa: B902 - every failure is reported
                import traceback

                with self.lock:
                    self.errors.append("%s: %s\n%s" % (name, exc, traceback.format_exc()))
                self.stop.set()

        return threading.Thread(target=run, name=name, daemon=True)

    def count(self, key: str, n: int = 1) -> None:
        with self.lock:
            self.counts[key] += n


def _writer(run: _Run, seed: int) -> Callable[[], None]:
    def body() -> None:
        rng = random.Random(seed)
        try:
            for _ in range(APPENDS):
                if run.stop.is_set():
                    return
                first = run.log.log_end_offset
                info = run.log.append(_batch(rng, first))
                assert info.first_offset == first
                with run.appended:
                    run.appended.notify_all()
        finally:
            run.writer_done.set()
            with run.appended:
                run.appended.notify_all()

    return body


def _reader(run: _Run, compacted: bool) -> Callable[[], None]:
    """Scan from the log start to the end, again and again, until the writer is done and one pass more."""

    def body() -> None:
        log = run.log
        offset = log.log_start_offset
        passes_after_writer = 0
        while not run.stop.is_set():
            try:
                region = log.read(offset, READ_BYTES)
                data = region.read()
            except OffsetOutOfRangeError:
                start = log.log_start_offset
                assert start > offset, "offset %d out of range though the log starts at %d" % (offset, start)
                run.count("restarts")
                offset = start
                continue
            if not data:
                if run.writer_done.is_set() and offset >= log.log_end_offset:
                    passes_after_writer += 1
                    run.count("passes")
                    if passes_after_writer >= 2:
                        return
                    offset = log.log_start_offset
                    continue
                with run.appended:
                    if not run.writer_done.is_set() and offset >= log.log_end_offset:
                        run.appended.wait(1.0)
                continue
            batches = list(records.iter_batches(data, check_crc=True))
            assert batches and batches[0].position == 0, (
                "read at offset %d returned %d bytes whose first batch is partial" % (offset, len(data)))
            first = batches[0]
            assert first.last_offset >= offset, "read at %d returned batch %d..%d, wholly below it" % (
                offset, first.base_offset, first.last_offset)
            if not compacted:
                assert first.base_offset <= offset, "read at %d skipped to batch %d" % (offset, first.base_offset)
            whole = batches[-1].position + batches[-1].size
            columns = records.decode_columns(data[:whole], check_crc=True, start_offset=offset)
            got = columns.offsets
            if compacted:
                assert np.all(np.diff(got) > 0) and (len(got) == 0 or got[0] >= offset), got
            else:
                expected = np.arange(offset, batches[-1].last_offset + 1, dtype=np.int64)
                assert np.array_equal(got, expected), "records from %d: %s" % (offset, got[:20])
            for i in range(len(columns)):
                o = int(got[i])
                child.check_value(o, columns.value(i))
                assert columns.key(i) == _key(o)
            run.count("records read", len(columns))
            for a, b in zip(batches, batches[1:]):
                assert b.base_offset > a.last_offset, "batch %d..%d after %d..%d" % (
                    b.base_offset, b.last_offset, a.base_offset, a.last_offset)
            offset = batches[-1].last_offset + 1

    return body


def _retention(run: _Run, seed: int) -> Callable[[], None]:
    def body() -> None:
        rng = random.Random(seed)
        log = run.log
        while not run.writer_done.is_set() and not run.stop.is_set():
            before = log.num_segments
            if rng.random() < 0.3:
                start, end = log.log_start_offset, log.log_end_offset
                target = rng.randint(start, end)
                assert log.delete_records_before(target) >= target
            deleted = log.delete_old_segments()
            run.count("deletions", deleted + max(before - deleted - log.num_segments, 0))
            with run.appended:
                run.appended.wait(0.05)

    return body


def _compaction(run: _Run, manager: LogManager) -> Callable[[], None]:
    def body() -> None:
        cleaner = LogCleaner(manager)
        while not run.writer_done.is_set() and not run.stop.is_set():
            stats = cleaner.clean_log(run.log)
            assert not stats.aborted
            run.count("cleanings")
            with run.appended:
                run.appended.wait(0.05)

    return body


@pytest.mark.parametrize("policy", ["delete", "compact"])
def test_readers_see_whole_batches_in_order_under_writes_retention_and_compaction(tmp_path, policy) -> None:
    settings = dict(segment_bytes=32 * 1024, index_interval_bytes=2048, file_delete_delay_ms=0,
                    message_timestamp_difference_max_ms=2**62, retention_ms=-1)
    if policy == "delete":
        settings.update(retention_bytes=256 * 1024)
    else:
        settings.update(cleanup_policy="compact", min_cleanable_dirty_ratio=0.01, min_compaction_lag_ms=0)
    manager = LogManager(config=LogManagerConfig(log_dirs=[str(tmp_path)], log_cleaner_enable=False),
                         background=False)
    try:
        log = manager.get_or_create_log("c", 0, LogConfig(**settings))
        run = _Run(log)
        threads = [run.thread("writer", _writer(run, 1))]
        threads += [run.thread("reader-%d" % i, _reader(run, policy == "compact")) for i in range(READERS)]
        if policy == "delete":
            threads.append(run.thread("retention", _retention(run, 2)))
        else:
            threads.append(run.thread("cleaner", _compaction(run, manager)))
        for t in threads:
            t.start()
        deadline = time.monotonic() + DEADLINE
        for t in threads:
            t.join(max(deadline - time.monotonic(), 0.0))
        run.stop.set()
        alive = [t.name for t in threads if t.is_alive()]
        for t in threads:
            t.join(5.0)
        assert not run.errors, "\n".join(run.errors)
        assert not alive, "threads still running after %.0f s: %s (%s)" % (DEADLINE, alive, run.counts)
        assert run.counts["passes"] >= 2 * READERS, run.counts
        if policy == "delete":
            assert run.counts["deletions"] > 0, run.counts
            # Whether a reader fell behind retention during the run depends on
            # scheduling; the error it would have met is checked here for sure.
            assert log.log_start_offset > 0
            with pytest.raises(OffsetOutOfRangeError, match="log start %d" % log.log_start_offset):
                log.read(log.log_start_offset - 1, READ_BYTES)
        else:
            assert run.counts["cleanings"] > 0, run.counts
    finally:
        manager.close()
