"""Binary search over Kafka's offset and time index files.

Byte layouts (every integer big-endian, entries sorted ascending by key)::

    offset index entry (8 bytes)    time index entry (12 bytes)
      int32  relative_offset  key     int64  timestamp        key
      int32  position                 int32  relative_offset

Offsets are strictly increasing; timestamps never decrease, so equal
timestamps repeat. An index file is a preallocated mmap larger than its used
part, so every function takes ``entries``, the count of entries in use, and
checks ``entries * entry_size`` against the buffer before reading. Any
C-contiguous buffer works: bytes, bytearray, mmap, memoryview, numpy arrays.

Searches first look at the warm section, the entries in the last 8 KB of the
used part (Kafka's ``AbstractIndex.indexSlotRangeFor``): readers and appends
ask about recent offsets, so keeping their lookups on the warm tail pages
avoids page faults on cold parts of the mmap.

The compiled kernel ``pylogq._core._index`` is used when it loads; :data:`pure`
(the ``_py_*`` functions here) is its pure-Python twin, with the same results
and errors.
"""

from __future__ import annotations

import struct
import types
from operator import index
from typing import Any, List, Tuple

from .._speedups import compiled
from ..errors import InvalidArgumentError, InvalidArgumentTypeError

__all__ = [
    "OFFSET_ENTRY",
    "OFFSET_ENTRY_SIZE",
    "TIME_ENTRY",
    "TIME_ENTRY_SIZE",
    "WARM_SECTION_BYTES",
    "offset_index_lookup",
    "offset_index_upper",
    "time_index_lookup",
    "time_index_upper",
    "offset_index_entry",
    "time_index_entry",
    "offset_index_disorder",
    "time_index_disorder",
    "INDEX_SOUND",
    "OFFSET_FIRST_NEGATIVE",
    "OFFSET_NOT_INCREASING",
    "POSITION_FIRST_NEGATIVE",
    "POSITION_DECREASING",
    "TIMESTAMP_NOT_INCREASING",
    "OFFSET_DECREASING",
    "pure",
]

OFFSET_ENTRY_SIZE = 8
TIME_ENTRY_SIZE = 12
WARM_SECTION_BYTES = 8192

_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
#: An offset index entry: the offset relative to the segment's base, the byte position in its log.
OFFSET_ENTRY = struct.Struct(">ii")
#: A time index entry: the largest timestamp so far, the relative offset where it was reached.
TIME_ENTRY = struct.Struct(">qi")
_OFFSET_ENTRY = OFFSET_ENTRY
_TIME_ENTRY = TIME_ENTRY


def _int_arg(value: Any, what: str) -> int:
    """``value`` as an int (``operator.index``); InvalidArgumentTypeError naming ``what`` otherwise."""
    try:
        return index(value)
    except TypeError:
        raise InvalidArgumentTypeError("%s must be an int, not %r" % (what, value)) from None


def _nbytes(buf: Any) -> int:
    """The byte length of a C-contiguous buffer: InvalidArgumentTypeError for a non-buffer,
    BufferError (the buffer protocol's own, as the kernel's) for a non-contiguous one."""
    try:
        view = memoryview(buf)
    except TypeError:
        raise InvalidArgumentTypeError("buf must be a bytes-like object, not %s" % type(buf).__name__) from None
    with view:
        if not view.c_contiguous:
            raise BufferError("index buffer is not C-contiguous")
        return view.nbytes


def _check_entries(buf: Any, entries: Any, size: int) -> int:
    """``entries`` as an int, checked against the buffer (InvalidArgumentError if it does not fit)."""
    entries = _int_arg(entries, "entries")
    if entries < 0:
        raise InvalidArgumentError("entries must be an int >= 0, not %r" % (entries,))
    nbytes = _nbytes(buf)
    if entries > nbytes // size:
        raise InvalidArgumentError(
            "entries must be at most %d (%d-byte entries in a buffer of %d bytes), not %r"
            % (nbytes // size, size, nbytes, entries)
        )
    return entries


def _search(buf: Any, entries: int, target: int, size: int, floor: bool, what: str) -> int:
    target = _int_arg(target, what)
    entries = _check_entries(buf, entries, size)
    if entries == 0:
        return -1
    key = _I32.unpack_from if size == OFFSET_ENTRY_SIZE else _I64.unpack_from
    # Both searches find the first entry with key > bound: for the floor that
    # entry's predecessor is the answer; for the ceiling, keys being integers,
    # key > target - 1 is key >= target.
    bound = target if floor else target - 1
    warm = max(0, entries - 1 - WARM_SECTION_BYTES // size)
    if key(buf, warm * size)[0] <= bound:
        lo, hi = warm + 1, entries
    else:
        lo, hi = 0, warm
    while lo < hi:
        mid = (lo + hi) >> 1
        if key(buf, mid * size)[0] > bound:
            hi = mid
        else:
            lo = mid + 1
    if floor:
        return lo - 1
    return -1 if lo == entries else lo


def _py_offset_index_lookup(buf: Any, entries: int, target: int) -> int:
    """Slot of the last offset index entry with relative offset <= target, or -1."""
    return _search(buf, entries, target, OFFSET_ENTRY_SIZE, True, "target")


def _py_offset_index_upper(buf: Any, entries: int, target: int) -> int:
    """Slot of the first offset index entry with relative offset >= target, or -1."""
    return _search(buf, entries, target, OFFSET_ENTRY_SIZE, False, "target")


def _py_time_index_lookup(buf: Any, entries: int, target_ts: int) -> int:
    """Slot of the last time index entry with timestamp <= target_ts, or -1."""
    return _search(buf, entries, target_ts, TIME_ENTRY_SIZE, True, "target_ts")


def _py_time_index_upper(buf: Any, entries: int, target_ts: int) -> int:
    """Slot of the first time index entry with timestamp >= target_ts, or -1."""
    return _search(buf, entries, target_ts, TIME_ENTRY_SIZE, False, "target_ts")


def _entry(buf: Any, slot: int, entry: struct.Struct, kind: str) -> Tuple[int, int]:
    slot = _int_arg(slot, "slot")
    count = _nbytes(buf) // entry.size
    if slot < 0 or slot >= count:
        raise IndexError(
            "%s index slot %d out of range: the buffer holds %d entries" % (kind, slot, count)
        )
    first, second = entry.unpack_from(buf, slot * entry.size)
    return first, second


def _py_offset_index_entry(buf: Any, slot: int) -> Tuple[int, int]:
    """The ``(relative_offset, position)`` of offset index entry ``slot``."""
    return _entry(buf, slot, _OFFSET_ENTRY, "offset")


def _py_time_index_entry(buf: Any, slot: int) -> Tuple[int, int]:
    """The ``(timestamp, relative_offset)`` of time index entry ``slot``."""
    return _entry(buf, slot, _TIME_ENTRY, "time")


#: What an index's full sanity check finds (the first of ``offset_index_disorder``'s and
#: ``time_index_disorder``'s answer): one numbering for both indexes and both kernels.
INDEX_SOUND = 0
OFFSET_FIRST_NEGATIVE = 1  # the first entry's relative offset is negative (either index)
OFFSET_NOT_INCREASING = 2  # an offset index entry's relative offset is not above the one before
POSITION_FIRST_NEGATIVE = 3  # the offset index's first position is negative
POSITION_DECREASING = 4  # an offset index entry's position is below the one before
TIMESTAMP_NOT_INCREASING = 5  # a time index entry's timestamp is not above the one before
OFFSET_DECREASING = 6  # a time index entry's relative offset is below the one before


def _py_offset_index_disorder(buf: Any, entries: int) -> Tuple[int, int]:
    """``(problem, slot)``: the first rule the offset index's entries break, 0 for none.

    1: the first relative offset is negative; 2: entry ``slot``'s relative offset is
    not above the one before; 3: the first position is negative; 4: entry ``slot``'s
    position is below the one before. Rules are checked in that order.
    """
    entries = _check_entries(buf, entries, OFFSET_ENTRY_SIZE)
    if not entries:
        return 0, 0
    table = list(_OFFSET_ENTRY.iter_unpack(memoryview(buf)[: entries * OFFSET_ENTRY_SIZE]))
    if table[0][0] < 0:
        return OFFSET_FIRST_NEGATIVE, 0
    slot = _first_out_of_order(table, 0, strictly=True)
    if slot:
        return OFFSET_NOT_INCREASING, slot
    if table[0][1] < 0:
        return POSITION_FIRST_NEGATIVE, 0
    slot = _first_out_of_order(table, 1, strictly=False)
    return (POSITION_DECREASING, slot) if slot else (INDEX_SOUND, 0)


def _first_out_of_order(table: List[Tuple[int, int]], column: int, strictly: bool) -> int:
    """The first slot whose ``column`` is below the slot before's (or equal, when ``strictly``
    increasing is the rule); 0 for none."""
    for i in range(1, len(table)):
        if table[i][column] < table[i - 1][column] or (strictly and table[i][column] == table[i - 1][column]):
            return i
    return 0


def _py_time_index_disorder(buf: Any, entries: int) -> Tuple[int, int]:
    """``(problem, slot)``: the first rule the time index's entries break, 0 for none.

    5: entry ``slot``'s timestamp is not above the one before; 1: the first relative
    offset is negative; 6: entry ``slot``'s relative offset is below the one before.
    Rules are checked in that order.
    """
    entries = _check_entries(buf, entries, TIME_ENTRY_SIZE)
    if not entries:
        return 0, 0
    table = list(_TIME_ENTRY.iter_unpack(memoryview(buf)[: entries * TIME_ENTRY_SIZE]))
    slot = _first_out_of_order(table, 0, strictly=True)
    if slot:
        return TIMESTAMP_NOT_INCREASING, slot
    if table[0][1] < 0:
        return OFFSET_FIRST_NEGATIVE, 0
    slot = _first_out_of_order(table, 1, strictly=False)
    return (OFFSET_DECREASING, slot) if slot else (INDEX_SOUND, 0)


#: The pure-Python twin of the compiled kernel: the same names, the same results and errors.
pure = types.SimpleNamespace(
    offset_index_lookup=_py_offset_index_lookup,
    offset_index_upper=_py_offset_index_upper,
    time_index_lookup=_py_time_index_lookup,
    time_index_upper=_py_time_index_upper,
    offset_index_entry=_py_offset_index_entry,
    time_index_entry=_py_time_index_entry,
    offset_index_disorder=_py_offset_index_disorder,
    time_index_disorder=_py_time_index_disorder,
)

_kernel = compiled("_index") or pure
offset_index_lookup = _kernel.offset_index_lookup
offset_index_upper = _kernel.offset_index_upper
time_index_lookup = _kernel.time_index_lookup
time_index_upper = _kernel.time_index_upper
offset_index_entry = _kernel.offset_index_entry
time_index_entry = _kernel.time_index_entry
offset_index_disorder = _kernel.offset_index_disorder
time_index_disorder = _kernel.time_index_disorder
