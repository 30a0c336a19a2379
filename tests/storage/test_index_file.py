"""Index files read from outside their broker: the zero-filled tail and stale entries left out."""

from __future__ import annotations

import os
import struct
from pathlib import Path
from typing import List, Tuple

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pylogq.storage.index import OffsetIndex, TimeIndex
from pylogq.storage.index_file import (
    OFFSET_ENTRY_DTYPE,
    TIME_ENTRY_DTYPE,
    read_live_entries,
    read_offset_index,
    read_time_index,
)
from pylogq.storage.segment import index_paths
from pylogq.storage.index_search import OFFSET_ENTRY, OFFSET_ENTRY_SIZE, TIME_ENTRY, TIME_ENTRY_SIZE

BASE = 1000
LOG_SIZE = 1 << 30


def _log(tmp_path: Path, suffix: str = ".log") -> str:
    path = str(tmp_path / ("%020d%s" % (BASE, suffix)))
    Path(path).write_bytes(b"")
    return path


def _write(path: str, entries: List[Tuple[int, int]], layout: struct.Struct, zero_tail: int = 0) -> None:
    with open(path, "wb") as f:
        f.write(b"".join(layout.pack(*e) for e in entries) + bytes(zero_tail * layout.size))


def test_the_numpy_layouts_are_the_index_entries() -> None:
    assert OFFSET_ENTRY_DTYPE.itemsize == OFFSET_ENTRY_SIZE == OFFSET_ENTRY.size
    assert TIME_ENTRY_DTYPE.itemsize == TIME_ENTRY_SIZE == TIME_ENTRY.size
    raw = OFFSET_ENTRY.pack(7, 4096) + TIME_ENTRY.pack(1_700_000_000_000, 7)
    assert np.frombuffer(raw, OFFSET_ENTRY_DTYPE, count=1).tolist() == [(7, 4096)]
    assert np.frombuffer(raw, TIME_ENTRY_DTYPE, count=1, offset=8).tolist() == [(1_700_000_000_000, 7)]


def test_index_paths_of_a_log_and_of_a_swap(tmp_path: Path) -> None:
    log = _log(tmp_path)
    assert index_paths(log) == (log[:-4] + ".index", log[:-4] + ".timeindex")
    swap = log + ".swap"
    assert index_paths(swap) == (log[:-4] + ".index.swap", log[:-4] + ".timeindex.swap")


def test_a_broker_written_preallocated_index_reads_without_its_zero_tail(tmp_path: Path) -> None:
    log = _log(tmp_path)
    offset_path, time_path = index_paths(log)
    with OffsetIndex(offset_path, BASE, max_index_size=1 << 20) as index:
        for i in range(50):
            index.append(BASE + 3 * i, 100 * i)  # entry 0 is all zeros: offset BASE at position 0
        index.flush()
        assert os.path.getsize(offset_path) == 1 << 20  # still preallocated
        with TimeIndex(time_path, BASE, max_index_size=1 << 20) as times:
            for i in range(20):
                times.maybe_append(1_000 + 10 * i, BASE + 3 * i)
            times.flush()
            offsets, positions = read_offset_index(log, BASE, LOG_SIZE)
            stamps, time_offsets = read_time_index(log, BASE)
    assert offsets.tolist() == [BASE + 3 * i for i in range(50)]
    assert positions.tolist() == [100 * i for i in range(50)]
    assert offsets.dtype == positions.dtype == np.int64
    assert stamps.tolist() == [1_000 + 10 * i for i in range(20)]
    assert time_offsets.tolist() == [BASE + 3 * i for i in range(20)]


def test_reads_grow_past_the_first_read(tmp_path: Path) -> None:
    path = str(tmp_path / "big.index")
    entries = [(i + 1, 8 * i) for i in range(40_000)]  # 320 KB: several doubling reads
    _write(path, entries, OFFSET_ENTRY, zero_tail=5000)
    assert read_live_entries(path, OFFSET_ENTRY_SIZE) == b"".join(OFFSET_ENTRY.pack(*e) for e in entries)


def test_a_missing_or_unreadable_index_reads_as_empty(tmp_path: Path) -> None:
    log = _log(tmp_path)
    offsets, positions = read_offset_index(log, BASE, LOG_SIZE)
    assert offsets.size == positions.size == 0
    os.mkdir(index_paths(log)[1])  # a directory where the time index should be
    assert read_live_entries(index_paths(log)[1], TIME_ENTRY_SIZE) == b""
    assert read_time_index(log, BASE)[0].size == 0


def test_a_torn_last_entry_is_left_out(tmp_path: Path) -> None:
    path = str(tmp_path / "torn.index")
    with open(path, "wb") as f:
        f.write(OFFSET_ENTRY.pack(1, 0) + OFFSET_ENTRY.pack(2, 10) + b"\x00\x00\x00\x03\x00")
    assert read_live_entries(path, OFFSET_ENTRY_SIZE) == OFFSET_ENTRY.pack(1, 0) + OFFSET_ENTRY.pack(2, 10)


@pytest.mark.parametrize(
    "entries, kept",
    [
        ([(-1, 0), (1, 10)], 0),  # the first offset negative: nothing to trust
        ([(0, -5), (1, 10)], 0),  # the first position negative
        ([(1, 0), (2, 10), (2, 20), (5, 30)], 2),  # an offset that does not increase
        ([(1, 0), (2, 10), (3, 5), (4, 30)], 2),  # a position that goes back
        ([(1, 0), (2, 10), (3, 5), (4, 30), (3, 40)], 2),  # a position goes back before an offset does
        ([(1, 0), (2, 10), (3, 10), (4, 30)], 4),  # two entries at one position break no rule
    ],
)
def test_offset_index_entries_count_while_they_keep_the_rules(tmp_path: Path, entries: List[Tuple[int, int]],
                                                               kept: int) -> None:
    log = _log(tmp_path)
    _write(index_paths(log)[0], entries, OFFSET_ENTRY, zero_tail=3)
    offsets, positions = read_offset_index(log, BASE, LOG_SIZE)
    assert list(zip(offsets.tolist(), positions.tolist())) == [(BASE + o, p) for o, p in entries[:kept]]


def test_offset_index_entries_past_the_log_do_not_count(tmp_path: Path) -> None:
    log = _log(tmp_path)
    _write(index_paths(log)[0], [(1, 0), (2, 100), (3, 200), (4, 300)], OFFSET_ENTRY)
    assert read_offset_index(log, BASE, 200)[1].tolist() == [0, 100]
    assert read_offset_index(log, BASE, 201)[1].tolist() == [0, 100, 200]


@pytest.mark.parametrize(
    "entries, kept",
    [
        ([(10, -1), (20, 3)], 0),  # the first offset negative
        ([(10, 1), (20, 3), (20, 4), (30, 5)], 2),  # a timestamp that does not increase
        ([(10, 1), (20, 3), (30, 2), (40, 5)], 2),  # an offset that goes back
        ([(10, 1), (20, 3), (30, 3), (40, 5)], 4),  # offsets may repeat
    ],
)
def test_time_index_entries_count_while_they_keep_the_rules(tmp_path: Path, entries: List[Tuple[int, int]],
                                                             kept: int) -> None:
    log = _log(tmp_path)
    _write(index_paths(log)[1], entries, TIME_ENTRY, zero_tail=2)
    stamps, offsets = read_time_index(log, BASE)
    assert list(zip(stamps.tolist(), offsets.tolist())) == [(t, BASE + o) for t, o in entries[:kept]]


def test_time_index_entries_stop_at_the_segments_last_offset(tmp_path: Path) -> None:
    log = _log(tmp_path)
    _write(index_paths(log)[1], [(10, 1), (20, 3), (30, 6)], TIME_ENTRY)
    assert read_time_index(log, BASE, BASE + 3)[1].tolist() == [BASE + 1, BASE + 3]
    assert read_time_index(log, BASE, BASE + 2)[1].tolist() == [BASE + 1]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(-3, 40), st.integers(-3, 400)), max_size=30))
def test_offset_index_reading_keeps_the_longest_sound_prefix(tmp_path_factory: pytest.TempPathFactory,
                                                              entries: List[Tuple[int, int]]) -> None:
    log = _log(tmp_path_factory.mktemp("idx"))
    _write(index_paths(log)[0], entries, OFFSET_ENTRY)
    # The model: Kafka's zero-tail stop, then entries while offsets rise strictly, positions never fall
    # and both start non-negative.
    live = list(entries)
    for i, e in enumerate(entries):
        if i > 0 and e == (0, 0):
            live = entries[:i]
            break
    kept = 0
    for i, (o, p) in enumerate(live):
        if o < 0 or p < 0 or (i and (o <= live[i - 1][0] or p < live[i - 1][1])):
            break
        kept = i + 1
    offsets, positions = read_offset_index(log, BASE, LOG_SIZE)
    assert list(zip(offsets.tolist(), positions.tolist())) == [(BASE + o, p) for o, p in live[:kept]]
