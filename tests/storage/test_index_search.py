"""Offset and time index search, held to a brute-force reference on both implementations."""

from __future__ import annotations

import bisect
import importlib
import mmap
import random
import struct
from types import SimpleNamespace
from typing import List, Sequence

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pylogq import _speedups
from pylogq.errors import InvalidArgumentError, InvalidArgumentTypeError
from pylogq.storage import index_search
from pylogq.storage.index_search import (
    INDEX_SOUND,
    OFFSET_DECREASING,
    OFFSET_FIRST_NEGATIVE,
    OFFSET_NOT_INCREASING,
    POSITION_DECREASING,
    POSITION_FIRST_NEGATIVE,
    TIMESTAMP_NOT_INCREASING,
)

from .._argument_errors import check_raised

NAMES = (
    "offset_index_lookup",
    "offset_index_upper",
    "time_index_lookup",
    "time_index_upper",
    "offset_index_entry",
    "time_index_entry",
    "offset_index_disorder",
    "time_index_disorder",
)
IMPLS = ["pure"] if _speedups.NO_EXTENSIONS else ["compiled", "pure"]

INT32_MAX = 2**31 - 1
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
OFFSET_WARM = 8192 // 8
TIME_WARM = 8192 // 12


@pytest.fixture(scope="module", params=IMPLS)
def impl(request):
    if request.param == "pure":
        return SimpleNamespace(**{n: getattr(index_search, "_py_" + n) for n in NAMES})
    # A compiled module that does not import is a failure here, not a skip.
    return importlib.import_module("pylogq._core._index")


def test_public_module_uses_the_compiled_kernel_unless_disabled():
    expected = None if _speedups.NO_EXTENSIONS else importlib.import_module("pylogq._core._index")
    for name in NAMES:
        if expected is None:
            assert getattr(index_search, name) is getattr(index_search, "_py_" + name)
        else:
            assert getattr(index_search, name) is getattr(expected, name)


def offset_index(entries: Sequence[tuple], tail: int = 0) -> bytes:
    return b"".join(struct.pack(">ii", r, p) for r, p in entries) + bytes(tail)


def time_index(entries: Sequence[tuple], tail: int = 0) -> bytes:
    return b"".join(struct.pack(">qi", t, r) for t, r in entries) + bytes(tail)


def floor_slot(keys: List[int], target: int) -> int:
    return bisect.bisect_right(keys, target) - 1


def ceil_slot(keys: List[int], target: int) -> int:
    i = bisect.bisect_left(keys, target)
    return -1 if i == len(keys) else i


def targets_for(keys: List[int], rng: random.Random, lo: int, hi: int) -> List[int]:
    picks = [lo, hi, -1, 0]
    if keys:
        picks += [keys[0] - 1, keys[0], keys[-1], keys[-1] + 1]
        picks += [rng.choice(keys) + d for d in (-1, 0, 1) for _ in range(5)]
    picks += [rng.randint(lo, hi) for _ in range(10)]
    return picks


def as_kind(data: bytes, kind: str):
    if kind == "bytes":
        return data
    if kind == "bytearray":
        return bytearray(data)
    if kind == "memoryview":
        return memoryview(data)
    return np.frombuffer(data, dtype=np.uint8)


KINDS = st.sampled_from(["bytes", "bytearray", "memoryview", "numpy"])


@settings(max_examples=150, deadline=None)
@given(
    n=st.one_of(st.integers(0, 40), st.integers(OFFSET_WARM - 3, 3 * OFFSET_WARM)),
    seed=st.integers(0, 2**32),
    tail=st.sampled_from([0, 8, 4096]),
    kind=KINDS,
    dense=st.booleans(),
)
def test_offset_index_matches_reference(impl, n, seed, tail, kind, dense):
    rng = random.Random(seed)
    if dense:
        start = rng.randint(0, 1000)
        keys = list(range(start, start + 3 * n, 3))
    else:
        keys = sorted(rng.sample(range(0, INT32_MAX), n))
    buf = as_kind(offset_index([(k, i * 100) for i, k in enumerate(keys)], tail), kind)
    for t in targets_for(keys, rng, -5, INT32_MAX):
        assert impl.offset_index_lookup(buf, n, t) == floor_slot(keys, t), t
        assert impl.offset_index_upper(buf, n, t) == ceil_slot(keys, t), t
    for slot in {0, n // 2, n - 1} if n else ():
        assert impl.offset_index_entry(buf, slot) == (keys[slot], slot * 100)


@settings(max_examples=150, deadline=None)
@given(
    n=st.one_of(st.integers(0, 40), st.integers(TIME_WARM - 3, 3 * TIME_WARM)),
    seed=st.integers(0, 2**32),
    tail=st.sampled_from([0, 12, 4096]),
    kind=KINDS,
    spread=st.sampled_from([3, 50, 2**62]),
)
def test_time_index_matches_reference_with_duplicates(impl, n, seed, tail, kind, spread):
    rng = random.Random(seed)
    base = rng.randint(-(2**62), 2**62)
    keys = sorted(base + rng.randint(-spread, spread) for _ in range(n))
    buf = as_kind(time_index([(k, i) for i, k in enumerate(keys)], tail), kind)
    for t in targets_for(keys, rng, INT64_MIN, INT64_MAX):
        assert impl.time_index_lookup(buf, n, t) == floor_slot(keys, t), t
        assert impl.time_index_upper(buf, n, t) == ceil_slot(keys, t), t
    for slot in {0, n // 2, n - 1} if n else ():
        assert impl.time_index_entry(buf, slot) == (keys[slot], slot)


def test_equal_timestamps_give_last_for_lookup_and_first_for_upper(impl):
    # A run of equal timestamps straddling the warm boundary, and one inside each part.
    n = 3 * TIME_WARM
    keys = [10] * 5 + [20] * (n - 2 * TIME_WARM) + [30] * (2 * TIME_WARM - 10) + [40] * 5
    buf = time_index([(k, i) for i, k in enumerate(keys)])
    for t in (10, 20, 30, 40):
        assert impl.time_index_lookup(buf, n, t) == len(keys) - 1 - keys[::-1].index(t)
        assert impl.time_index_upper(buf, n, t) == keys.index(t)
    assert impl.time_index_lookup(buf, n, 9) == -1
    assert impl.time_index_upper(buf, n, 41) == -1


@pytest.mark.parametrize("n", [1, 2, OFFSET_WARM, OFFSET_WARM + 1, OFFSET_WARM + 2, 5000])
def test_warm_cold_boundary(impl, n):
    keys = [2 * i for i in range(n)]
    buf = offset_index([(k, 0) for k in keys], tail=64)
    warm = max(0, n - 1 - OFFSET_WARM)
    for slot in {0, max(0, warm - 1), warm, min(n - 1, warm + 1), n - 1}:
        for t in (keys[slot] - 1, keys[slot], keys[slot] + 1):
            assert impl.offset_index_lookup(buf, n, t) == floor_slot(keys, t)
            assert impl.offset_index_upper(buf, n, t) == ceil_slot(keys, t)


def test_empty_index(impl):
    for buf in (b"", bytes(4096)):
        assert impl.offset_index_lookup(buf, 0, 5) == -1
        assert impl.offset_index_upper(buf, 0, 5) == -1
        assert impl.time_index_lookup(buf, 0, 5) == -1
        assert impl.time_index_upper(buf, 0, 5) == -1


def test_targets_beyond_64_bits(impl):
    buf = offset_index([(0, 0), (5, 1)])
    tbuf = time_index([(INT64_MIN, 0), (INT64_MAX, 1)])
    assert impl.offset_index_lookup(buf, 2, 2**70) == 1
    assert impl.offset_index_upper(buf, 2, 2**70) == -1
    assert impl.offset_index_lookup(buf, 2, -(2**70)) == -1
    assert impl.offset_index_upper(buf, 2, -(2**70)) == 0
    assert impl.time_index_lookup(tbuf, 2, 2**64) == 1
    assert impl.time_index_upper(tbuf, 2, 2**64) == -1
    assert impl.time_index_upper(tbuf, 2, INT64_MAX) == 1
    assert impl.time_index_lookup(tbuf, 2, INT64_MIN) == 0
    assert impl.time_index_lookup(tbuf, 2, INT64_MIN - 1) == -1
    assert impl.time_index_upper(tbuf, 2, -(2**64)) == 0


def test_entries_exceeding_the_buffer(impl):
    buf = offset_index([(i, i) for i in range(4)], tail=7)
    assert impl.offset_index_lookup(buf, 4, 3) == 3
    with pytest.raises(ValueError, match=r"entries must be at most 4 \(8-byte entries in a buffer of 39 bytes\), not 5"):
        impl.offset_index_lookup(buf, 5, 3)
    with pytest.raises(ValueError, match=r"entries must be at most 4 .*, not 5"):
        impl.offset_index_upper(buf, 5, 3)
    tbuf = time_index([(i, i) for i in range(2)])
    with pytest.raises(ValueError, match=r"entries must be at most 2 \(12-byte entries in a buffer of 24 bytes\), not 3"):
        impl.time_index_lookup(tbuf, 3, 0)
    with pytest.raises(ValueError, match=r"entries must be at most 2 .*, not 3"):
        impl.time_index_upper(tbuf, 3, 0)


def test_negative_entries(impl):
    with pytest.raises(ValueError, match="entries must be an int >= 0, not -1"):
        impl.offset_index_lookup(bytes(16), -1, 0)
    with pytest.raises(ValueError, match="entries must be an int >= 0, not -3"):
        impl.time_index_upper(bytes(24), -3, 0)


def test_entry_bounds(impl):
    buf = offset_index([(1, 10), (2, 20)], tail=5)
    assert impl.offset_index_entry(buf, 1) == (2, 20)
    for slot in (2, -1, 10**6):
        with pytest.raises(IndexError, match="slot %d" % slot):
            impl.offset_index_entry(buf, slot)
    tbuf = time_index([(-1, 7)], tail=11)
    assert impl.time_index_entry(tbuf, 0) == (-1, 7)
    for slot in (1, -2):
        with pytest.raises(IndexError, match="slot %d" % slot):
            impl.time_index_entry(tbuf, slot)


def test_bad_arguments(impl):
    buf = offset_index([(1, 10)])
    with pytest.raises(TypeError):
        impl.offset_index_lookup(buf, 1, 1.5)
    with pytest.raises(TypeError):
        impl.offset_index_lookup(buf, 1.0, 1)
    with pytest.raises(TypeError):
        impl.offset_index_lookup("not a buffer", 0, 1)
    strided = np.zeros(64, dtype=np.uint8)[::2]
    # numpy reports a non-contiguous array as ValueError, memoryview as BufferError
    with pytest.raises((BufferError, ValueError)):
        impl.offset_index_lookup(strided, 1, 0)
    with pytest.raises((BufferError, ValueError)):
        impl.offset_index_lookup(memoryview(bytes(64))[::2], 1, 0)


def test_numpy_big_endian_records(impl):
    n = 3000
    arr = np.empty((n, 2), dtype=">i4")
    arr[:, 0] = np.arange(n) * 7
    arr[:, 1] = np.arange(n)
    keys = list(range(0, 7 * n, 7))
    for t in (-1, 0, 6, 7, 7 * n, 7 * 2500 + 3):
        assert impl.offset_index_lookup(arr, n, t) == floor_slot(keys, t)
        assert impl.offset_index_upper(arr, n, t) == ceil_slot(keys, t)


def test_mmap_of_a_preallocated_index_file(impl, tmp_path):
    # An index file as a segment keeps it: used entries, then a zero-filled preallocated tail.
    n = 5000
    keys = [3 * i + 1 for i in range(n)]
    path = tmp_path / "00000000000000000000.index"
    path.write_bytes(offset_index([(k, 4 * i) for i, k in enumerate(keys)], tail=64 * 1024))
    tkeys = [1_700_000_000_000 + i // 3 for i in range(n)]
    tpath = tmp_path / "00000000000000000000.timeindex"
    tpath.write_bytes(time_index([(t, i) for i, t in enumerate(tkeys)], tail=12 * 1000))
    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mm, \
            open(tpath, "rb") as tf, mmap.mmap(tf.fileno(), 0, access=mmap.ACCESS_READ) as tm:
        rng = random.Random(7)
        for t in targets_for(keys, rng, -10, 3 * n + 10):
            assert impl.offset_index_lookup(mm, n, t) == floor_slot(keys, t)
            assert impl.offset_index_upper(mm, n, t) == ceil_slot(keys, t)
        for t in targets_for(tkeys, rng, tkeys[0] - 5, tkeys[-1] + 5):
            assert impl.time_index_lookup(tm, n, t) == floor_slot(tkeys, t)
            assert impl.time_index_upper(tm, n, t) == ceil_slot(tkeys, t)
        assert impl.offset_index_entry(mm, n - 1) == (keys[-1], 4 * (n - 1))
        assert impl.offset_index_entry(mm, n) == (0, 0)
        full = len(mm) // 8
        assert impl.offset_index_lookup(mm, full, 2**31 - 1) == full - 1
        with pytest.raises(ValueError, match="entries must be at most %d .*, not %d" % (full, full + 1)):
            impl.offset_index_lookup(mm, full + 1, 0)


def offset_disorder_reference(entries: Sequence[tuple]) -> tuple:
    """The full sanity check's rules for an offset index, in order, on a list of entries."""
    if not entries:
        return INDEX_SOUND, 0
    if entries[0][0] < 0:
        return OFFSET_FIRST_NEGATIVE, 0
    for i in range(1, len(entries)):
        if entries[i][0] <= entries[i - 1][0]:
            return OFFSET_NOT_INCREASING, i
    if entries[0][1] < 0:
        return POSITION_FIRST_NEGATIVE, 0
    for i in range(1, len(entries)):
        if entries[i][1] < entries[i - 1][1]:
            return POSITION_DECREASING, i
    return INDEX_SOUND, 0


def time_disorder_reference(entries: Sequence[tuple]) -> tuple:
    if not entries:
        return INDEX_SOUND, 0
    for i in range(1, len(entries)):
        if entries[i][0] <= entries[i - 1][0]:
            return TIMESTAMP_NOT_INCREASING, i
    if entries[0][1] < 0:
        return OFFSET_FIRST_NEGATIVE, 0
    for i in range(1, len(entries)):
        if entries[i][1] < entries[i - 1][1]:
            return OFFSET_DECREASING, i
    return INDEX_SOUND, 0


def test_the_problem_codes_are_one_numbering() -> None:
    """The two indexes' checks answer in one numbering: a code names one rule whichever index broke it."""
    codes = [INDEX_SOUND, OFFSET_FIRST_NEGATIVE, OFFSET_NOT_INCREASING, POSITION_FIRST_NEGATIVE,
             POSITION_DECREASING, TIMESTAMP_NOT_INCREASING, OFFSET_DECREASING]
    assert sorted(codes) == list(range(7))


def _mostly_sound(draw_keys: List[int], rng: random.Random, flips: int) -> List[int]:
    """Sorted keys with ``flips`` of them replaced by a random value (breaking order, or not)."""
    keys = list(draw_keys)
    for _ in range(flips):
        if keys:
            keys[rng.randrange(len(keys))] = rng.randint(-3, max(keys) + 3)
    return keys


@given(n=st.integers(0, 300), seed=st.integers(0, 2**32 - 1), flips=st.integers(0, 2),
       tail=st.integers(0, 20))
@settings(max_examples=300, deadline=None)
def test_disorder_matches_the_reference(impl, n, seed, flips, tail):
    rng = random.Random(seed)
    rels = _mostly_sound(sorted(rng.sample(range(3 * n + 1), n)), rng, flips)
    positions = _mostly_sound(sorted(rng.randint(0, 10 * n) for _ in range(n)), rng, flips)
    entries = list(zip(rels, positions))
    assert impl.offset_index_disorder(offset_index(entries, tail=tail), n) == offset_disorder_reference(entries)
    stamps = _mostly_sound(sorted(rng.sample(range(1_700_000_000_000, 1_700_000_000_000 + 3 * n + 1), n)),
                           rng, flips)
    tentries = list(zip(stamps, _mostly_sound(sorted(rng.randint(0, 3 * n) for _ in range(n)), rng, flips)))
    assert impl.time_index_disorder(time_index(tentries, tail=tail), n) == time_disorder_reference(tentries)


def test_disorder_checks_only_the_entries_in_use_and_their_bounds(impl):
    # A preallocated index's zero-filled tail is not checked: only ``entries`` are.
    buf = offset_index([(0, 0), (5, 10)], tail=16)
    assert impl.offset_index_disorder(buf, 2) == (0, 0)
    assert impl.offset_index_disorder(buf, 3) == (OFFSET_NOT_INCREASING, 2)
    assert impl.offset_index_disorder(buf, 0) == (0, 0)
    # The highest keys and positions, and INT64 timestamps at their limits.
    assert impl.offset_index_disorder(offset_index([(0, 0), (2**31 - 1, 2**31 - 1)]), 2) == (0, 0)
    assert impl.time_index_disorder(time_index([(-2**63, 0), (2**63 - 1, 0)]), 2) == (0, 0)
    assert impl.time_index_disorder(time_index([(5, 0), (5, 1)]), 2) == (TIMESTAMP_NOT_INCREASING, 1)
    with pytest.raises(ValueError, match=r"entries must be at most 4 \(8-byte entries in a buffer of 32 bytes\), not 5"):
        impl.offset_index_disorder(buf, 5)
    with pytest.raises(ValueError, match=r"entries must be at most 1 \(12-byte entries in a buffer of 12 bytes\), not 2"):
        impl.time_index_disorder(time_index([(1, 0)]), 2)
    with pytest.raises(ValueError, match="entries must be an int >= 0, not -1"):
        impl.time_index_disorder(bytes(24), -1)


# ------------------------------------------------------------------ error classes

SEARCHES = [("offset_index_lookup", "target"), ("offset_index_upper", "target"),
            ("time_index_lookup", "target_ts"), ("time_index_upper", "target_ts")]




@pytest.mark.parametrize("name, target", SEARCHES)
def test_search_bad_arguments_error_classes(impl, name, target):
    search = getattr(impl, name)
    buf = bytes(48)  # 6 offset entries, 4 time entries
    size = 8 if name.startswith("offset") else 12
    fits = 48 // size
    for entries in (-1, -(2**70)):
        with pytest.raises(ValueError) as raised:
            search(buf, entries, 0)
        check_raised(raised, InvalidArgumentError, ValueError, "entries", "not %d" % entries)
    for entries in (fits + 1, 2**70):
        with pytest.raises(ValueError) as raised:
            search(buf, entries, 0)
        check_raised(raised, InvalidArgumentError, ValueError, "entries", "at most %d" % fits, "not %d" % entries)
    for entries, shown in ((1.0, "not 1.0"), ("1", "not '1'"), (None, "not None")):
        with pytest.raises(TypeError) as raised:
            search(buf, entries, 0)
        check_raised(raised, InvalidArgumentTypeError, TypeError, "entries", shown)
    for bad, shown in ((1.5, "not 1.5"), ("0", "not '0'"), (None, "not None")):
        with pytest.raises(TypeError) as raised:
            search(buf, 1, bad)
        check_raised(raised, InvalidArgumentTypeError, TypeError, target, shown)
    for bad, shown in (("not a buffer", "not str"), (None, "not NoneType"), ([0] * 16, "not list")):
        with pytest.raises(TypeError) as raised:
            search(bad, 0, 0)
        check_raised(raised, InvalidArgumentTypeError, TypeError, "buf", shown)
    # numpy integers are ints (operator.index)
    assert search(buf, np.int64(fits), np.int32(0)) == search(buf, fits, 0)


@pytest.mark.parametrize("name", ["offset_index_entry", "time_index_entry"])
def test_entry_bad_arguments_error_classes(impl, name):
    entry = getattr(impl, name)
    for slot, shown in ((1.0, "not 1.0"), ("0", "not '0'"), (None, "not None")):
        with pytest.raises(TypeError) as raised:
            entry(bytes(48), slot)
        check_raised(raised, InvalidArgumentTypeError, TypeError, "slot", shown)
    with pytest.raises(TypeError) as raised:
        entry("not a buffer", 0)
    check_raised(raised, InvalidArgumentTypeError, TypeError, "buf", "not str")
    # A slot outside the buffer stays an IndexError, however large (the kernel once overflowed).
    count = 48 // (8 if name.startswith("offset") else 12)
    for slot in (count, -1, 2**70, -(2**70)):
        with pytest.raises(IndexError, match="slot %d out of range" % slot):
            entry(bytes(48), slot)


@pytest.mark.parametrize("name", ["offset_index_disorder", "time_index_disorder"])
def test_disorder_bad_arguments_error_classes(impl, name):
    disorder = getattr(impl, name)
    fits = 48 // (8 if name.startswith("offset") else 12)
    for entries in (-1, -(2**70)):
        with pytest.raises(ValueError) as raised:
            disorder(bytes(48), entries)
        check_raised(raised, InvalidArgumentError, ValueError, "entries", "not %d" % entries)
    for entries in (fits + 1, 2**70):
        with pytest.raises(ValueError) as raised:
            disorder(bytes(48), entries)
        check_raised(raised, InvalidArgumentError, ValueError, "entries", "at most %d" % fits, "not %d" % entries)
    with pytest.raises(TypeError) as raised:
        disorder(bytes(48), 1.0)
    check_raised(raised, InvalidArgumentTypeError, TypeError, "entries", "not 1.0")
    with pytest.raises(TypeError) as raised:
        disorder("text", 0)
    check_raised(raised, InvalidArgumentTypeError, TypeError, "buf", "not str")
    assert disorder(bytes(48), entries=np.int64(0)) == (0, 0)
