"""Disk blocks reserved ahead of appends: only for sustained writers, within one budget per process.

Measured on the files themselves: what a segment holds reserved is the space
its file takes on disk (``st_blocks``) beyond the blocks its data needs.
Whether writes count as sustained depends on a clock; the tests fix the
answer instead of timing anything: ``RESERVE_WINDOW_S`` infinite (every
writer is sustained) or zero (none is).
"""

from __future__ import annotations

import os
from typing import Iterator

import pytest

from pylogq import records
from pylogq.storage import reservation
from pylogq.config import LogConfig
from pylogq.storage.config import LogManagerConfig
from pylogq.storage.manager import LogManager
from pylogq.storage.reservation import RESERVE_MAX, RESERVE_MIN, ReservationBudget, next_chunk
from pylogq.storage.segment import reserve_blocks

TS = 1_700_000_000_000
BLOCK = 4096
BUDGET = 8 * RESERVE_MIN


def reserved_bytes(path: str) -> int:
    """Bytes a file takes on disk beyond the blocks its data fills."""
    st = os.stat(path)
    return max(0, st.st_blocks * 512 - -(-st.st_size // BLOCK) * BLOCK)


def total_reserved(root: str) -> int:
    return sum(reserved_bytes(os.path.join(d, n)) for d, _, names in os.walk(root) for n in names
               if n.endswith(".log"))


@pytest.fixture
def supported(tmp_path) -> bool:
    probe = os.open(str(tmp_path / "probe"), os.O_RDWR | os.O_CREAT)
    try:
        return reserve_blocks(probe, 0, BLOCK)
    finally:
        os.close(probe)
        os.unlink(str(tmp_path / "probe"))


@pytest.fixture
def sustained(monkeypatch) -> None:
    monkeypatch.setattr(reservation, "RESERVE_WINDOW_S", float("inf"))


@pytest.fixture
def manager(tmp_path, monkeypatch) -> Iterator[LogManager]:
    """A manager with a budget of BUDGET bytes (a budget of its own: the process's is replaced)."""
    monkeypatch.setattr(reservation, "_shared", ReservationBudget())
    m = LogManager(config=LogManagerConfig(log_dirs=[str(tmp_path / "logs")], log_reserve_bytes_max=BUDGET,
                                           log_cleaner_enable=False), background=False)
    yield m
    m.close()


def small_batch(i: int) -> bytes:
    return bytes(records.build_batch([b"%05d" % i], timestamps=TS))


def big_batch() -> bytes:
    return bytes(records.build_batch([b"x" * 1000] * 250, timestamps=TS))  # ~250 KB


def write(log, nbytes: int, root: str = "") -> int:
    """Append ``nbytes`` in ~250 KB batches; -> the most the segment held reserved after an append.
    With ``root``, checks after every append that all logs under it hold at most the budget."""
    data = big_batch()
    start = log.active_segment.size
    most = 0
    while log.active_segment.size - start < nbytes:
        log.append(data)
        most = max(most, reserved_bytes(log.active_segment.log_path))
        if root:
            assert total_reserved(root) <= BUDGET
    return most


CONFIG = LogConfig(segment_bytes=1 << 30, segment_index_bytes=4096)


def test_a_thousand_partitions_with_one_small_record_each_reserve_nothing(tmp_path, manager, sustained):
    for p in range(1000):
        manager.get_or_create_log("small", p, CONFIG).append(small_batch(p))
    assert total_reserved(str(tmp_path / "logs")) == 0  # they were 16 GB (16 MB each)
    assert reservation.reservation_budget().used == 0


def test_partitions_written_heavily_reserve_no_more_than_the_budget_and_the_busiest_gets_its_own(
        tmp_path, manager, sustained, supported):
    root = str(tmp_path / "logs")
    logs = [manager.get_or_create_log("heavy", p, CONFIG) for p in range(24)]
    for log in logs:  # each earns a chunk of RESERVE_MIN, then of twice that: 24 of them want 72 MB
        most = write(log, 2 * RESERVE_MIN + 1, root)
        if supported:
            assert most >= RESERVE_MIN  # each got its chunk, the budget taking it back from older ones
    assert reservation.reservation_budget().used <= BUDGET
    busy = logs[0]  # the least recently granted: its blocks went to the others
    most = write(busy, 6 * RESERVE_MIN, root)  # written again: it takes room back from the others
    if supported:
        assert most >= 4 * RESERVE_MIN  # and its chunks grow again as it keeps writing
    for log in logs:
        log.roll()  # a rolled segment gives its blocks back (a file of many extents may keep a block of them)
    assert total_reserved(root) <= len(logs) * BLOCK and reservation.reservation_budget().used == 0


def test_a_slow_writer_reserves_nothing(tmp_path, manager, monkeypatch):
    monkeypatch.setattr(reservation, "RESERVE_WINDOW_S", 0.0)  # no write is ever sustained
    log = manager.get_or_create_log("slow", 0, CONFIG)
    write(log, 4 * RESERVE_MIN)
    assert reserved_bytes(log.active_segment.log_path) == 0 and reservation.reservation_budget().used == 0


def test_a_budget_of_zero_reserves_nothing(tmp_path, monkeypatch, sustained):
    monkeypatch.setattr(reservation, "_shared", ReservationBudget())
    with LogManager(config=LogManagerConfig(log_dirs=[str(tmp_path)], log_reserve_bytes_max=0,
                                            log_cleaner_enable=False), background=False) as m:
        log = m.get_or_create_log("t", 0, CONFIG)
        write(log, 4 * RESERVE_MIN)
        assert reserved_bytes(log.active_segment.log_path) == 0


def test_preallocate_still_reserves_the_whole_segment_outside_the_budget(tmp_path, manager, supported):
    log = manager.get_or_create_log("pre", 0, LogConfig(segment_bytes=64 * RESERVE_MIN, preallocate=True,
                                                        segment_index_bytes=4096))
    log.append(small_batch(0))
    path = log.active_segment.log_path
    if supported:
        assert os.stat(path).st_blocks * 512 >= 64 * RESERVE_MIN
    assert reservation.reservation_budget().used == 0
    log.close()
    assert os.path.getsize(path) == 73 and os.stat(path).st_blocks * 512 < 64 * 1024  # cut to its data on close


def test_chunks_double_while_writes_are_sustained():
    assert next_chunk(0, 0.0) == RESERVE_MIN
    assert next_chunk(RESERVE_MIN, 1.0) == 2 * RESERVE_MIN
    assert next_chunk(RESERVE_MAX, 1.0) == RESERVE_MAX
    assert next_chunk(8 * RESERVE_MIN, reservation.RESERVE_WINDOW_S + 1) == 0


def test_the_budget_takes_room_back_from_the_least_recently_granted():
    budget = ReservationBudget(3 * RESERVE_MIN)
    released = []

    class Holder:
        def __init__(self, name: str, busy: bool = False) -> None:
            self.name, self.busy = name, busy

        def release_reservation(self, wait: bool) -> bool:
            if self.busy:
                return False
            released.append(self.name)
            budget.release(self)
            return True

    a, b, c, d = Holder("a"), Holder("b", busy=True), Holder("c"), Holder("d")
    for h in (a, b, c):
        assert budget.request(h, RESERVE_MIN) == RESERVE_MIN
    assert budget.request(d, RESERVE_MIN) == RESERVE_MIN and released == ["a"]
    assert budget.request(a, 2 * RESERVE_MIN) == 0  # b is busy: only c's room could be had
    assert released == ["a", "c"]
    assert [h.name for h, _ in budget.holders()] == ["b", "d"] and budget.used == 2 * RESERVE_MIN
    assert budget.request(a, 4 * RESERVE_MIN) == 0  # more than the whole budget
    with pytest.raises(ValueError, match=">= 0"):
        ReservationBudget(-1)
