"""Offset and time index files: held to a brute-force model on both search implementations."""

from __future__ import annotations

import bisect
import importlib
import itertools
import os
import random
import struct
import threading
from pathlib import Path
from types import SimpleNamespace
from typing import List, Tuple

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pylogq import _speedups
from pylogq.errors import (
    CorruptIndexError,
    CorruptRecordError,
    IllegalStateError,
    IndexClosedError,
    IndexFullError,
    InvalidIndexEntryError,
)
from pylogq.storage import index, index_search
from pylogq.storage.index import OffsetIndex, TimeIndex, open_index

IMPLS = ["pure"] if _speedups.NO_EXTENSIONS else ["compiled", "pure"]
KERNELS = {
    "_offset_lookup": "offset_index_lookup",
    "_offset_upper": "offset_index_upper",
    "_offset_entry": "offset_index_entry",
    "_time_lookup": "time_index_lookup",
    "_time_upper": "time_index_upper",
    "_time_entry": "time_index_entry",
    "_offset_disorder": "offset_index_disorder",
    "_time_disorder": "time_index_disorder",
}
INT32_MAX = 2**31 - 1
OFFSET_WARM = index_search.WARM_SECTION_BYTES // 8
TIME_WARM = index_search.WARM_SECTION_BYTES // 12
SMALL = 64 * 1024

_names = itertools.count()


@pytest.fixture(scope="module", params=IMPLS)
def impl(request):
    """Bind the index module to one search implementation for the module's tests."""
    if request.param == "pure":
        kernels = SimpleNamespace(**{n: getattr(index_search, "_py_" + n) for n in KERNELS.values()})
    else:
        # A compiled module that does not import is a failure here, not a skip.
        kernels = importlib.import_module("pylogq._core._index")
    patch = pytest.MonkeyPatch()
    for attr, name in KERNELS.items():
        patch.setattr(index, attr, getattr(kernels, name))
    yield request.param
    patch.undo()


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    return tmp_path_factory.mktemp("index")


def fresh(workdir: Path, suffix: str) -> str:
    return str(workdir / ("%08d%s" % (next(_names), suffix)))


def test_the_index_module_uses_the_public_kernels():
    for attr, name in KERNELS.items():
        assert getattr(index, attr) is getattr(index_search, name)


# -- the model ----------------------------------------------------------------


def floor_entry(entries: List[Tuple[int, int]], target: int):
    keys = [k for k, _ in entries]
    i = bisect.bisect_right(keys, target) - 1
    return None if i < 0 else entries[i]


def ceil_entry(entries: List[Tuple[int, int]], target: int):
    keys = [k for k, _ in entries]
    i = bisect.bisect_left(keys, target)
    return None if i == len(entries) else entries[i]


def probes(keys: List[int], rng: random.Random, lo: int) -> List[int]:
    picks = [lo - 1, lo, 0, -1, 2**62, 2**64, -(2**64)]
    if keys:
        picks += [keys[0] - 1, keys[0], keys[-1], keys[-1] + 1]
        picks += [rng.choice(keys) + d for d in (-1, 0, 1) for _ in range(8)]
        # Either side of the warm section's first entry.
        warm = max(0, len(keys) - 1 - 1024)
        picks += [keys[warm] + d for d in (-1, 0, 1)]
        picks += [rng.randint(lo - 2, keys[-1] + 2) for _ in range(10)]
    return picks


def check_offset_index(idx: OffsetIndex, model: List[Tuple[int, int]], rng: random.Random) -> None:
    assert idx.entries == len(model)
    assert idx.last_offset == (model[-1][0] if model else idx.base_offset)
    for t in probes([o for o, _ in model], rng, idx.base_offset):
        assert idx.lookup(t) == (floor_entry(model, t) or (idx.base_offset, 0)), t
        assert idx.lookup_upper(t) == ceil_entry(model, t), t
    for n in {0, len(model) // 2, len(model) - 1} if model else ():
        assert idx.entry(n) == model[n]


def check_time_index(idx: TimeIndex, model: List[Tuple[int, int]], rng: random.Random) -> None:
    assert idx.entries == len(model)
    assert idx.last_entry == (model[-1] if model else (-1, idx.base_offset))
    for t in probes([ts for ts, _ in model], rng, 0):
        assert idx.lookup(t) == (floor_entry(model, t) or (-1, idx.base_offset)), t
        assert idx.lookup_upper(t) == ceil_entry(model, t), t
    for n in {0, len(model) // 2, len(model) - 1} if model else ():
        assert idx.entry(n) == model[n]


@settings(max_examples=60, deadline=None)
@given(
    n=st.one_of(st.integers(0, 30), st.integers(OFFSET_WARM - 3, 3 * OFFSET_WARM)),
    base=st.sampled_from([0, 1, 368769, 2**40]),
    seed=st.integers(0, 2**32),
    dense=st.booleans(),
)
def test_offset_index_matches_the_model(impl, workdir, n, base, seed, dense):
    rng = random.Random(seed)
    idx = OffsetIndex(fresh(workdir, ".index"), base, max_index_size=8 * (n + 5))
    model: List[Tuple[int, int]] = []
    offset, position = base + rng.randint(0, 3), rng.randint(0, 100)
    for _ in range(n):
        model.append((offset, position))
        idx.append(offset, position)
        offset += 1 + (rng.randint(0, 3) if dense else rng.randint(0, 1 << 20))
        position += rng.randint(0, 1 << 12)
    check_offset_index(idx, model, rng)
    # Truncation at an indexed offset, between two, below the first, past the last.
    if model:
        cut = rng.choice(model)[0] + rng.choice([0, 0, 1])
        idx.truncate_to(cut)
        model = [e for e in model if e[0] < cut]
        check_offset_index(idx, model, rng)
        idx.append(cut + 5, model[-1][1] + 1 if model else 0)
        model.append((cut + 5, model[-1][1] + 1 if model else 0))
        check_offset_index(idx, model, rng)
    idx.close()
    assert os.path.getsize(idx.path) == 8 * len(model)
    reopened = OffsetIndex(idx.path, base, max_index_size=8 * (n + 5), writable=False)
    check_offset_index(reopened, model, rng)
    reopened.sanity_check(full=True)
    reopened.delete()


@settings(max_examples=60, deadline=None)
@given(
    n=st.one_of(st.integers(0, 30), st.integers(TIME_WARM - 3, 3 * TIME_WARM)),
    base=st.sampled_from([0, 7, 2**40]),
    seed=st.integers(0, 2**32),
)
def test_time_index_matches_the_model(impl, workdir, n, base, seed):
    rng = random.Random(seed)
    idx = TimeIndex(fresh(workdir, ".timeindex"), base, max_index_size=12 * (n + 2))
    model: List[Tuple[int, int]] = []
    ts, offset = rng.randint(-3, 1_700_000_000_000), base
    for _ in range(n):
        # Timestamps that do not go up are skipped; offsets never go down.
        appended = idx.maybe_append(ts, offset)
        assert appended == (ts > (model[-1][0] if model else -1))
        if appended:
            model.append((ts, offset))
        ts += rng.choice([-5, 0, 1, 1, 1000, 1 << 33])
        offset += rng.choice([0, 1, 1, 100])
    check_time_index(idx, model, rng)
    if model:
        cut = rng.choice(model)[1] + rng.choice([0, 0, 1])
        idx.truncate_to(cut)
        model = [e for e in model if e[1] < cut]
        check_time_index(idx, model, rng)
    idx.close()
    assert os.path.getsize(idx.path) == 12 * len(model)
    reopened = TimeIndex(idx.path, base, writable=False)
    check_time_index(reopened, model, rng)
    reopened.sanity_check(full=True)
    reopened.delete()


# -- Kafka's bytes --------------------------------------------------------------


def test_offset_index_bytes_are_kafkas(impl, tmp_path):
    idx = OffsetIndex(tmp_path / "00000000000000000100.index", 100, max_index_size=4096)
    idx.append(100, 0)
    idx.append(105, 4096)
    idx.append(100 + INT32_MAX, INT32_MAX)
    idx.close()
    assert (tmp_path / "00000000000000000100.index").read_bytes() == bytes.fromhex(
        "00000000 00000000" "00000005 00001000" "7fffffff 7fffffff"
    )


def test_time_index_bytes_are_kafkas(impl, tmp_path):
    idx = TimeIndex(tmp_path / "00000000000000000100.timeindex", 100, max_index_size=4096)
    idx.maybe_append(1_700_000_000_000, 100)
    idx.maybe_append(1_700_000_000_001, 163)
    idx.close()
    assert (tmp_path / "00000000000000000100.timeindex").read_bytes() == bytes.fromhex(
        "0000018bcfe56800 00000000" "0000018bcfe56801 0000003f"
    )


# -- sizes, full, resize ------------------------------------------------------


def test_a_new_index_is_preallocated_to_max_index_size_rounded_down(impl, tmp_path):
    off = OffsetIndex(tmp_path / "a.index", 0, max_index_size=100)
    tim = TimeIndex(tmp_path / "a.timeindex", 0, max_index_size=100)
    assert os.path.getsize(off.path) == off.max_index_size == 96
    assert os.path.getsize(tim.path) == tim.max_index_size == 96
    assert off.max_entries == 12
    assert tim.max_entries == 7  # eight slots, the last reserved
    assert (off.entries, off.size_in_bytes, off.is_full()) == (0, 0, False)
    assert off.lookup(5) == (0, 0)
    assert tim.lookup(5) == (-1, 0)
    assert off.lookup_upper(0) is None and tim.lookup_upper(0) is None
    off.close()
    tim.close()
    assert os.path.getsize(off.path) == os.path.getsize(tim.path) == 0


def test_the_default_max_index_size_is_kafkas(impl, tmp_path):
    idx = OffsetIndex(tmp_path / "a.index", 0)
    assert idx.max_index_size == 10 * 1024 * 1024 == os.path.getsize(idx.path)
    assert idx.max_entries == 10 * 1024 * 1024 // 8
    assert TimeIndex(tmp_path / "a.timeindex", 0).max_entries == 10 * 1024 * 1024 // 12 - 1


def test_max_index_size_below_one_entry_is_refused(tmp_path):
    with pytest.raises(ValueError, match="max_index_size"):
        OffsetIndex(tmp_path / "a.index", 0, max_index_size=7)
    with pytest.raises(ValueError, match="max_index_size"):
        TimeIndex(tmp_path / "a.timeindex", 0, max_index_size=11)
    with pytest.raises(ValueError, match="base_offset"):
        OffsetIndex(tmp_path / "b.index", -1)


def test_a_full_offset_index_refuses_appends(impl, tmp_path):
    idx = OffsetIndex(tmp_path / "a.index", 10, max_index_size=8 * 4 + 5)
    for i in range(4):
        assert not idx.is_full()
        idx.append(10 + i, i)
    assert idx.is_full()
    with pytest.raises(IndexFullError, match="full"):
        idx.append(20, 20)
    assert idx.entries == 4 and idx.lookup(100) == (13, 3)


def test_the_time_index_keeps_its_last_slot_for_the_final_entry(impl, tmp_path):
    idx = TimeIndex(tmp_path / "a.timeindex", 0, max_index_size=12 * 4)
    for ts in (10, 20, 30):
        idx.maybe_append(ts, ts)
    assert idx.is_full()
    with pytest.raises(IndexFullError, match="full"):
        idx.maybe_append(40, 40)
    # The segment stops being active: its final max timestamp takes the reserved slot.
    assert idx.maybe_append(40, 40, skip_full_check=True)
    assert os.path.getsize(idx.path) == 48
    # Past the reserved slot the file grows by one entry rather than failing.
    assert idx.maybe_append(50, 50, skip_full_check=True)
    assert os.path.getsize(idx.path) == 60
    assert idx.lookup(45) == (40, 40) and idx.last_entry == (50, 50)
    idx.close()
    assert os.path.getsize(idx.path) == 60


def test_trim_makes_the_index_full_and_resize_grows_it_back(impl, tmp_path):
    idx = OffsetIndex(tmp_path / "a.index", 0, max_index_size=800)
    idx.append(0, 0)
    idx.append(3, 100)
    idx.trim_to_valid_size()
    assert os.path.getsize(idx.path) == 16 and idx.is_full()
    assert idx.lookup(2) == (0, 0) and idx.lookup(3) == (3, 100)
    assert idx.resize(idx.max_index_size)
    assert not idx.resize(idx.max_index_size)
    assert os.path.getsize(idx.path) == 800 and idx.max_entries == 100
    idx.append(9, 200)
    assert idx.lookup(100) == (9, 200)
    with pytest.raises(ValueError, match="need 24"):
        idx.resize(16)
    assert idx.resize(27)  # rounded down to whole entries
    assert os.path.getsize(idx.path) == 24 and idx.is_full()


def test_a_trimmed_empty_index_has_no_map_and_still_works(impl, tmp_path):
    idx = TimeIndex(tmp_path / "a.timeindex", 5, max_index_size=120)
    idx.trim_to_valid_size()
    assert os.path.getsize(idx.path) == 0 and idx.is_full()
    assert idx.lookup(10) == (-1, 5) and idx.lookup_upper(10) is None
    assert idx.maybe_append(10, 6, skip_full_check=True)
    assert os.path.getsize(idx.path) == 12 and idx.lookup(10) == (10, 6)


# -- appends ------------------------------------------------------------------


def test_offset_index_append_checks_order_and_field_ranges(impl, tmp_path):
    idx = OffsetIndex(tmp_path / "a.index", 1000, max_index_size=800)
    with pytest.raises(InvalidIndexEntryError, match="offset 999 .*base offset 1000"):
        idx.append(999, 0)
    with pytest.raises(InvalidIndexEntryError, match="offset %d" % (1000 + 2**31)):
        idx.append(1000 + 2**31, 0)
    with pytest.raises(InvalidIndexEntryError, match="position -1"):
        idx.append(1000, -1)
    with pytest.raises(InvalidIndexEntryError, match="position %d" % 2**31):
        idx.append(1000, 2**31)
    idx.append(1000, 0)
    for bad in (1000, 999):
        with pytest.raises(InvalidIndexEntryError, match="no larger than the last offset 1000"):
            idx.append(bad, 10)
    assert idx.entries == 1
    assert issubclass(InvalidIndexEntryError, ValueError) and issubclass(IndexFullError, ValueError)


def test_time_index_maybe_append_semantics(impl, tmp_path):
    idx = TimeIndex(tmp_path / "a.timeindex", 100, max_index_size=1200)
    assert not idx.maybe_append(-1, 100)  # no timestamp: never indexed
    assert idx.maybe_append(0, 100)
    assert not idx.maybe_append(0, 101)  # equal timestamp: skipped
    assert not idx.maybe_append(-7, 102)  # lower timestamp: skipped
    assert idx.maybe_append(5, 100)  # a later timestamp at the same offset
    with pytest.raises(InvalidIndexEntryError, match="offset 99 .*below the last offset 100"):
        idx.maybe_append(6, 99)
    with pytest.raises(InvalidIndexEntryError, match="offset %d" % (100 + 2**31)):
        idx.maybe_append(6, 100 + 2**31)
    assert idx.all_entries() == [(0, 100), (5, 100)]
    assert idx.lookup(4) == (0, 100) and idx.lookup(-5) == (-1, 100)
    assert idx.lookup_upper(1) == (5, 100) and idx.lookup_upper(6) is None
    assert idx.last_offset == 100


def test_time_index_truncate_removes_every_entry_at_or_past_the_offset(impl, tmp_path):
    idx = TimeIndex(tmp_path / "a.timeindex", 0, max_index_size=1200)
    for ts, off in [(1, 0), (2, 3), (3, 3), (4, 3), (5, 8)]:
        idx.maybe_append(ts, off)
    idx.truncate_to(9)
    assert idx.entries == 5
    idx.truncate_to(4)
    assert idx.all_entries() == [(1, 0), (2, 3), (3, 3), (4, 3)]
    idx.truncate_to(3)
    assert idx.all_entries() == [(1, 0)] and idx.last_entry == (1, 0)
    assert idx.maybe_append(2, 1)  # timestamps restart from the new last entry
    idx.truncate_to(0)
    assert idx.entries == 0 and idx.last_entry == (-1, 0)


def test_offset_index_truncate_to(impl, tmp_path):
    idx = OffsetIndex(tmp_path / "a.index", 50, max_index_size=800)
    for off in (50, 60, 70):
        idx.append(off, off * 10)
    idx.truncate_to(71)
    assert idx.entries == 3
    idx.truncate_to(65)
    assert idx.all_entries() == [(50, 500), (60, 600)] and idx.last_offset == 60
    idx.truncate_to(60)
    assert idx.all_entries() == [(50, 500)]
    idx.append(55, 550)
    idx.truncate_to(-(2**70))
    assert idx.entries == 0 and idx.last_offset == 50 and idx.last_entry == (50, 0)
    idx.append(50, 0)
    assert idx.lookup(51) == (50, 0)


def test_reset_empties_the_index_and_grows_it_back(impl, tmp_path):
    idx = OffsetIndex(tmp_path / "a.index", 0, max_index_size=80)
    idx.append(1, 1)
    idx.trim_to_valid_size()
    idx.reset()
    assert idx.entries == 0 and os.path.getsize(idx.path) == 80 and idx.max_entries == 10


# -- files on disk ------------------------------------------------------------


def test_reopen_restores_entries_and_extends_the_file_for_appends(impl, tmp_path):
    path = tmp_path / "00000000000000000042.index"
    idx = OffsetIndex(path, 42, max_index_size=8000)
    for i in range(300):
        idx.append(42 + 3 * i, 17 * i)
    before = [idx.lookup(t) for t in range(30, 1000, 7)]
    idx.close()
    assert os.path.getsize(path) == 300 * 8
    again = OffsetIndex(path, 42, max_index_size=8000)
    assert os.path.getsize(path) == 8000
    assert again.entries == 300 and again.last_offset == 42 + 3 * 299
    assert [again.lookup(t) for t in range(30, 1000, 7)] == before
    again.sanity_check(full=True)
    again.append(10_000, 99_999)
    again.close()
    assert os.path.getsize(path) == 301 * 8


def test_reopen_of_a_time_index(impl, tmp_path):
    path = tmp_path / "00000000000000000042.timeindex"
    idx = TimeIndex(path, 42, max_index_size=1200)
    for i in range(50):
        idx.maybe_append(1000 + i * 10, 42 + i)
    idx.close()
    again = TimeIndex(path, 42, max_index_size=1200)
    assert again.entries == 50 and again.last_entry == (1490, 91)
    assert again.lookup(1255) == (1250, 67)
    assert not again.maybe_append(1490, 92)
    assert again.maybe_append(1500, 92)


def test_an_untrimmed_index_counts_its_zero_tail_and_fails_the_full_check(impl, tmp_path):
    # The process died with the segment active: the file is still preallocated.
    path = tmp_path / "00000000000000000100.index"
    idx = OffsetIndex(path, 100, max_index_size=800)
    idx.append(100, 0)
    idx.append(103, 4000)
    idx.flush()
    crashed = OffsetIndex(path, 100, max_index_size=800)
    assert crashed.entries == 100 and crashed.is_full()
    assert crashed.last_offset == 100  # a zero entry: relative offset 0
    crashed.sanity_check()  # Kafka's quick check cannot tell
    with pytest.raises(CorruptIndexError, match="not strictly increasing: entry 2 has offset 100 after 103"):
        crashed.sanity_check(full=True)
    crashed.reset()
    crashed.sanity_check(full=True)
    assert crashed.entries == 0
    idx.delete()


def test_an_untrimmed_time_index_fails_the_full_check(impl, tmp_path):
    path = tmp_path / "00000000000000000100.timeindex"
    idx = TimeIndex(path, 100, max_index_size=120)
    idx.maybe_append(5, 100)
    idx.flush()
    crashed = TimeIndex(path, 100, max_index_size=120, writable=False)
    assert crashed.entries == 10 and crashed.last_entry == (0, 100)
    # Kafka's quick check sees the last timestamp (zero) below the first.
    with pytest.raises(CorruptIndexError, match="last timestamp 0 is below the first 5"):
        crashed.sanity_check()
    crashed.close()
    # A first timestamp of zero hides the zero tail from the quick check only.
    idx.reset()
    idx.maybe_append(0, 100)
    idx.flush()
    crashed = TimeIndex(path, 100, max_index_size=120, writable=False)
    crashed.sanity_check()
    with pytest.raises(CorruptIndexError, match="entry 1 has timestamp 0 after 0"):
        crashed.sanity_check(full=True)


def test_a_size_that_is_not_whole_entries_rounds_down_and_is_corrupt(impl, tmp_path):
    path = tmp_path / "00000000000000000000.index"
    path.write_bytes(b"".join(struct.pack(">ii", i, i * 10) for i in range(5)) + b"\x01\x02\x03")
    ro = OffsetIndex(path, 0, writable=False)
    assert ro.entries == 5 and ro.lookup(9) == (4, 40)
    with pytest.raises(CorruptIndexError, match="43 bytes, which is not a multiple of the entry size 8"):
        ro.sanity_check()
    ro.close()
    assert os.path.getsize(path) == 43
    rw = OffsetIndex(path, 0, max_index_size=800)
    assert rw.entries == 5 and os.path.getsize(path) == 800
    with pytest.raises(CorruptIndexError):
        rw.sanity_check()
    rw.append(5, 50)
    assert rw.lookup(100) == (5, 50)
    rw.reset()
    rw.sanity_check(full=True)
    tpath = tmp_path / "00000000000000000000.timeindex"
    tpath.write_bytes(struct.pack(">qi", 7, 0) + b"\x00" * 13)
    t = TimeIndex(tpath, 0, writable=False)
    assert t.entries == 2
    with pytest.raises(CorruptIndexError, match="25 bytes"):
        t.sanity_check()


def test_sanity_check_finds_broken_offset_indexes(impl, tmp_path):
    def index_of(name, base, entries):
        path = tmp_path / name
        path.write_bytes(b"".join(struct.pack(">ii", r, p) for r, p in entries))
        return OffsetIndex(path, base, writable=False)

    with pytest.raises(CorruptIndexError, match="last offset 95 is below the base offset 100"):
        index_of("a.index", 100, [(0, 0), (-5, 10)]).sanity_check()
    decreasing = index_of("b.index", 100, [(0, 0), (5, 10), (3, 20)])
    decreasing.sanity_check()
    with pytest.raises(CorruptIndexError, match="entry 2 has offset 103 after 105"):
        decreasing.sanity_check(full=True)
    with pytest.raises(CorruptIndexError, match="entry 0 has a negative relative offset -1"):
        index_of("c.index", 0, [(-1, 0), (5, 10)]).sanity_check(full=True)
    with pytest.raises(CorruptIndexError, match="negative position -7"):
        index_of("d.index", 0, [(0, -7), (5, 10)]).sanity_check(full=True)
    with pytest.raises(CorruptIndexError, match="positions decrease: entry 1 has position 5 after 10"):
        index_of("e.index", 0, [(0, 10), (5, 5)]).sanity_check(full=True)
    assert issubclass(CorruptIndexError, CorruptRecordError)


def test_sanity_check_finds_broken_time_indexes(impl, tmp_path):
    def index_of(name, base, entries):
        path = tmp_path / name
        path.write_bytes(b"".join(struct.pack(">qi", t, r) for t, r in entries))
        return TimeIndex(path, base, writable=False)

    with pytest.raises(CorruptIndexError, match="last timestamp 5 is below the first 9"):
        index_of("a.timeindex", 0, [(9, 0), (5, 1)]).sanity_check()
    with pytest.raises(CorruptIndexError, match="last offset 99 is below the base offset 100"):
        index_of("b.timeindex", 100, [(1, 0), (5, -1)]).sanity_check()
    middle = index_of("c.timeindex", 0, [(1, 0), (9, 1), (5, 2), (10, 3)])
    middle.sanity_check()
    with pytest.raises(CorruptIndexError, match="entry 2 has timestamp 5 after 9"):
        middle.sanity_check(full=True)
    with pytest.raises(CorruptIndexError, match="offsets decrease: entry 1 has offset 3 after 4"):
        index_of("d.timeindex", 0, [(1, 4), (2, 3)]).sanity_check(full=True)
    with pytest.raises(CorruptIndexError, match="negative relative offset -2"):
        index_of("e.timeindex", 0, [(1, -2), (2, 3)]).sanity_check(full=True)


def test_read_only_open_never_changes_the_file(impl, tmp_path):
    path = tmp_path / "00000000000000000000.index"
    idx = OffsetIndex(path, 0, max_index_size=800)
    idx.append(0, 0)
    idx.append(10, 100)
    idx.flush()
    ro = OffsetIndex(path, 0, writable=False)  # untrimmed: 100 entries, 98 of them zero
    assert not ro.writable and ro.entries == 100 and ro.lookup(5) == (0, 0)
    for call in (
        lambda: ro.append(20, 200),
        lambda: ro.truncate_to(0),
        ro.trim_to_valid_size,
        lambda: ro.resize(8000),
        ro.reset,
    ):
        with pytest.raises(IllegalStateError, match="read-only"):
            call()
    ro.flush()
    ro.close()
    assert os.path.getsize(path) == 800
    idx.close()
    assert os.path.getsize(path) == 16
    with pytest.raises(FileNotFoundError):
        OffsetIndex(tmp_path / "missing.index", 0, writable=False)
    assert not (tmp_path / "missing.index").exists()
    (tmp_path / "empty.timeindex").write_bytes(b"")
    empty = TimeIndex(tmp_path / "empty.timeindex", 3, writable=False)
    assert empty.entries == 0 and empty.lookup(1) == (-1, 3) and empty.all_entries() == []
    empty.sanity_check(full=True)


def test_a_zero_length_file_opens_writable_and_grows(impl, tmp_path):
    path = tmp_path / "a.index"
    path.write_bytes(b"")
    idx = OffsetIndex(path, 0, max_index_size=80)
    assert idx.entries == 0 and os.path.getsize(path) == 80
    idx.append(3, 30)
    assert idx.lookup(4) == (3, 30)


def test_flush_makes_entries_visible_to_plain_reads(impl, tmp_path):
    idx = OffsetIndex(tmp_path / "a.index", 0, max_index_size=80)
    idx.append(7, 70)
    idx.flush()
    with open(idx.path, "rb") as f:
        assert f.read(8) == struct.pack(">ii", 7, 70)


def test_rename_while_open_then_append(impl, tmp_path):
    idx = OffsetIndex(tmp_path / "00000000000000000000.index", 0, max_index_size=800)
    idx.append(0, 0)
    idx.rename_to(tmp_path / "00000000000000000000.index.deleted")
    assert idx.path == str(tmp_path / "00000000000000000000.index.deleted")
    assert not (tmp_path / "00000000000000000000.index").exists()
    idx.append(4, 40)
    assert idx.lookup(5) == (4, 40)
    idx.trim_to_valid_size()  # reopens the file at its new path
    idx.resize(800)
    idx.append(6, 60)
    idx.close()
    assert (tmp_path / "00000000000000000000.index.deleted").read_bytes() == struct.pack(
        ">iiiiii", 0, 0, 4, 40, 6, 60
    )
    # A file that is already gone is not an error: the new path is recorded.
    gone = OffsetIndex(tmp_path / "gone.index", 0, max_index_size=80)
    gone.delete()
    gone.rename_to(tmp_path / "gone.index.swap")
    assert gone.path.endswith(".swap") and not (tmp_path / "gone.index.swap").exists()


def test_delete(impl, tmp_path):
    idx = TimeIndex(tmp_path / "a.timeindex", 0, max_index_size=120)
    idx.maybe_append(1, 0)
    assert idx.delete()
    assert not (tmp_path / "a.timeindex").exists() and idx.closed
    assert not idx.delete()
    with pytest.raises(IndexClosedError):
        idx.lookup(1)


def test_a_closed_index_raises_a_clear_error(impl, tmp_path):
    off = OffsetIndex(tmp_path / "a.index", 0, max_index_size=80)
    off.append(1, 1)
    tim = TimeIndex(tmp_path / "a.timeindex", 0, max_index_size=120)
    tim.maybe_append(1, 1)
    off.close()
    tim.close()
    off.close()  # a second close does nothing
    assert off.entries == 1 and off.closed
    calls = [
        lambda: off.lookup(1),
        lambda: off.lookup_upper(1),
        lambda: off.entry(0),
        lambda: off.last_entry,
        lambda: off.append(2, 2),
        lambda: off.truncate_to(0),
        off.flush,
        off.sanity_check,
        off.all_entries,
        off.trim_to_valid_size,
        lambda: off.resize(80),
        off.reset,
        lambda: tim.lookup(1),
        lambda: tim.lookup_upper(1),
        lambda: tim.entry(0),
        lambda: tim.maybe_append(2, 2),
        lambda: tim.truncate_to(0),
        tim.sanity_check,
    ]
    for call in calls:
        with pytest.raises(IndexClosedError, match=r"index .*a\.(time)?index is closed"):
            call()
    assert issubclass(IndexClosedError, ValueError)


def test_entry_outside_the_used_part(impl, tmp_path):
    idx = OffsetIndex(tmp_path / "a.index", 0, max_index_size=80)
    idx.append(1, 1)
    for n in (-1, 1, 9):
        with pytest.raises(IndexError, match="1 entries, no entry %d" % n):
            idx.entry(n)


def test_open_index_by_suffix_and_context_manager(impl, tmp_path):
    with OffsetIndex(tmp_path / "00000000000000000005.index", 5, max_index_size=80) as idx:
        idx.append(6, 60)
    assert idx.closed and os.path.getsize(idx.path) == 8
    with TimeIndex(tmp_path / "00000000000000000005.timeindex", 5, max_index_size=120) as t:
        t.maybe_append(9, 6)
    os.rename(t.path, t.path + ".deleted")
    with open_index(idx.path, 5) as a, open_index(t.path + ".deleted", 5) as b:
        assert isinstance(a, OffsetIndex) and a.all_entries() == [(6, 60)]
        assert isinstance(b, TimeIndex) and b.all_entries() == [(9, 6)]
        assert not a.writable
    with pytest.raises(ValueError, match="must end with .index or .timeindex"):
        open_index(tmp_path / "x.log", 0)


# -- threads ------------------------------------------------------------------


def test_lookups_from_four_threads_during_100k_appends(impl, tmp_path):
    """Every lookup sees at least the entries appended before it began."""
    total, base = 100_000, 1000
    off = OffsetIndex(tmp_path / "a.index", base, max_index_size=8 * total)
    tim = TimeIndex(tmp_path / "a.timeindex", base, max_index_size=12 * (total + 1))
    done = threading.Event()
    failures: List[str] = []
    lookups = [0] * 4

    # Entry k: offset base + 2k + 1 at position 10k + 5; timestamp 100 + 3k.
    def check(seed: int) -> None:
        rng = random.Random(seed)
        try:
            while not done.is_set() or lookups[seed] == 0:
                target = rng.randint(base - 2, base + 2 * total + 2)
                before = off.entries
                got = off.lookup(target)
                after = off.entries
                floor_k = (target - base - 1) // 2  # -1 (or less) when below the first entry
                lo, hi = min(before - 1, floor_k), min(after - 1, floor_k)
                k = (got[0] - base - 1) // 2
                if not (
                    (lo < 0 and got == (base, 0))
                    or (lo <= k <= hi and got == (base + 2 * k + 1, 10 * k + 5))
                ):
                    failures.append("offset %d -> %r, want entry %d..%d" % (target, got, lo, hi))
                ts = rng.randint(90, 100 + 3 * total)
                before = tim.entries
                got = tim.lookup(ts)
                after = tim.entries
                floor_k = (ts - 100) // 3
                lo, hi = min(before - 1, floor_k), min(after - 1, floor_k)
                k = (got[0] - 100) // 3
                if not (
                    (lo < 0 and got == (-1, base))
                    or (lo <= k <= hi and got == (100 + 3 * k, base + 2 * k + 1))
                ):
                    failures.append("timestamp %d -> %r, want entry %d..%d" % (ts, got, lo, hi))
                lookups[seed] += 1
        except Exception as e:  # reported below: a thread's exception must fail the test
            failures.append(repr(e))

    readers = [threading.Thread(target=check, args=(i,)) for i in range(4)]
    for r in readers:
        r.start()
    try:
        for k in range(total):
            off.append(base + 2 * k + 1, 10 * k + 5)
            tim.maybe_append(100 + 3 * k, base + 2 * k + 1)
    finally:
        done.set()
        for r in readers:
            r.join()
    assert not failures, failures[:5]
    assert all(lookups)
    assert off.is_full() and tim.is_full()
    assert off.entries == tim.entries == total


def test_close_during_lookups_raises_only_the_closed_error(impl, tmp_path):
    idx = OffsetIndex(tmp_path / "a.index", 0, max_index_size=8 * 20_000)
    for k in range(20_000):
        idx.append(k, k)
    started = threading.Barrier(5)
    errors: List[BaseException] = []

    def read(seed: int) -> None:
        rng = random.Random(seed)
        started.wait()
        while True:
            try:
                t = rng.randint(0, 20_000)
                assert idx.lookup(t) == (min(t, 19_999),) * 2
            except IndexClosedError:
                return
            except BaseException as e:  # reported below
                errors.append(e)
                return

    readers = [threading.Thread(target=read, args=(i,)) for i in range(4)]
    for r in readers:
        r.start()
    started.wait()
    idx.close()
    for r in readers:
        r.join()
    assert not errors
    assert os.path.getsize(idx.path) == 8 * 20_000
