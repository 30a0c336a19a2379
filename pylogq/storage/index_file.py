"""A segment's index files as read from outside the broker that writes them.

A reader in another process (the Spark reader, on a live broker's log
directories) cannot use an index the way its owner does:

- the broker may trim, grow or replace the file at any moment, so it is read
  with plain reads and never mapped;
- the active segment's indexes are preallocated and zero past their entries,
  so reading stops at the first all-zero entry after the first (an index's
  first entry may be all zeros: offset 0 at position 0);
- after a crash an index may be stale, so only the leading entries that keep
  the index's rules count: the rules :mod:`.index_search`'s disorder kernels
  check for the broker's own sanity check.

The answers are numpy arrays of absolute offsets, ready for ``searchsorted``.
"""

from __future__ import annotations

from typing import Any, Callable, List, Optional, Tuple

import numpy as np

from .index_search import (
    OFFSET_ENTRY_SIZE,
    OFFSET_FIRST_NEGATIVE,
    POSITION_FIRST_NEGATIVE,
    TIME_ENTRY_SIZE,
    offset_index_disorder,
    time_index_disorder,
)
from .segment import index_paths

__all__ = [
    "OFFSET_ENTRY_DTYPE",
    "TIME_ENTRY_DTYPE",
    "read_live_entries",
    "read_offset_index",
    "read_time_index",
]

#: An offset index entry as numpy reads it (the layout of :data:`.index_search.OFFSET_ENTRY`).
OFFSET_ENTRY_DTYPE = np.dtype([("offset", ">i4"), ("position", ">i4")])
#: A time index entry as numpy reads it (the layout of :data:`.index_search.TIME_ENTRY`).
TIME_ENTRY_DTYPE = np.dtype([("timestamp", ">i8"), ("offset", ">i4")])

_FIRST_READ = 64 * 1024
_LARGEST_READ = 16 << 20


def read_live_entries(path: str, entry_size: int) -> bytes:
    """The entries of an index file up to its zero-filled tail; b"" when the file cannot be read.

    Reads double from 64 KiB, so a preallocated 10 MiB index with a few
    entries costs about what those entries take.
    """
    try:
        f = open(path, "rb")
    except OSError:
        return b""
    pieces: List[bytes] = []
    want = _FIRST_READ // entry_size * entry_size
    with f:
        while True:
            try:
                piece = f.read(want)
            except OSError:
                break
            piece = piece[: len(piece) // entry_size * entry_size]
            if not piece:
                break
            filled = np.asarray(np.frombuffer(piece, np.uint8).reshape(-1, entry_size).any(axis=1))
            first = 0 if pieces else 1  # the index's first entry may be all zeros
            zero = np.flatnonzero(~filled[first:])
            if zero.size:
                pieces.append(piece[: (int(zero[0]) + first) * entry_size])
                break
            pieces.append(piece)
            want = min(want * 2, _LARGEST_READ)
    return b"".join(pieces)


def _sound_entries(disorder: Callable[[Any, int], Tuple[int, int]], raw: bytes, entries: int) -> int:
    """How many leading entries of ``raw`` keep every rule ``disorder`` checks.

    The kernel reports the first rule broken in its order of rules, not the
    first entry breaking one, so the count shrinks until the kernel finds
    nothing (one pass for any index a broker wrote).
    """
    while entries:
        problem, slot = disorder(raw, entries)
        if not problem:
            break
        entries = 0 if problem in (OFFSET_FIRST_NEGATIVE, POSITION_FIRST_NEGATIVE) else slot
    return entries


def read_offset_index(log_path: str, base_offset: int, log_size: int) -> Tuple[np.ndarray, np.ndarray]:
    """(absolute offsets, positions) of a segment's offset index: its trustworthy entries only.

    An entry ``(offset, position)`` says the batch at ``position`` ends with
    ``offset``. Entries count while they keep the index's rules and their
    positions lie inside the log file as sized by the caller (``log_size``).
    """
    raw = read_live_entries(index_paths(log_path)[0], OFFSET_ENTRY_SIZE)
    n = _sound_entries(offset_index_disorder, raw, len(raw) // OFFSET_ENTRY_SIZE)
    if not n:
        return np.empty(0, np.int64), np.empty(0, np.int64)
    entries = np.frombuffer(raw, OFFSET_ENTRY_DTYPE, count=n)
    positions = entries["position"].astype(np.int64)
    n = int(np.searchsorted(positions, log_size, side="left"))
    return base_offset + entries["offset"][:n].astype(np.int64), positions[:n]


def read_time_index(log_path: str, base_offset: int,
                    last_offset: Optional[int] = None) -> Tuple[np.ndarray, np.ndarray]:
    """(timestamps, absolute offsets) of a segment's time index: its trustworthy entries only.

    An entry ``(timestamp, offset)`` says every record of the segment at or
    below ``offset`` has a timestamp at or below ``timestamp``. Entries count
    while they keep the index's rules, and only up to ``last_offset`` (the
    segment's last offset) when it is known.
    """
    raw = read_live_entries(index_paths(log_path)[1], TIME_ENTRY_SIZE)
    n = _sound_entries(time_index_disorder, raw, len(raw) // TIME_ENTRY_SIZE)
    if not n:
        return np.empty(0, np.int64), np.empty(0, np.int64)
    entries = np.frombuffer(raw, TIME_ENTRY_DTYPE, count=n)
    offsets = base_offset + entries["offset"].astype(np.int64)
    if last_offset is not None:
        n = int(np.searchsorted(offsets, last_offset, side="right"))
    return entries["timestamp"][:n].astype(np.int64), offsets[:n]
