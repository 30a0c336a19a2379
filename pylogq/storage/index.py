"""Kafka's offset index and time index files, memory-mapped.

Byte layouts (every integer big-endian, Kafka's own, so either side can read
the other's files)::

    <base offset, 20 digits>.index        8-byte entries
      int32  relative_offset   offset - base_offset, strictly increasing
      int32  position          byte position of a batch in the .log file

    <base offset, 20 digits>.timeindex   12-byte entries
      int64  timestamp         strictly increasing
      int32  relative_offset   offset - base_offset, never decreasing

A writable index file is preallocated to ``max_index_size`` bytes (Kafka's
``segment.index.bytes``, rounded down to a multiple of the entry size; a sparse
file) and mapped whole; entries are written through the map. When its segment
stops being active, or on ``close()``, the file is trimmed to exactly
``entries * entry_size`` bytes, so ``ls -l`` shows the real size, as with Kafka.

Opening an existing file takes ``entries = file_size // entry_size``: the file
length is the only record of how many entries are in use. A file that was
never trimmed (the process died with the segment active) therefore opens with
its zero-filled tail counted as entries; ``sanity_check(full=True)`` flags it
(repeated relative offsets, repeated timestamps) and the segment's recovery
rebuilds the index. A writable open then extends the file back to
``max_index_size`` for appends; a read-only open (``writable=False``, for dump
tools) maps the file read-only and never changes it.

Searches go through :mod:`pylogq.storage.index_search`, which looks at the warm
tail of the used part first so that lookups near the end, the common case,
stay on pages already in memory.

An index holds no descriptor and no map while nobody uses it (Kafka's
``LazyIndex``): the entry count and the last entry live in memory, the map is
made on the first lookup or append through the process's bounded cache of
open files (:mod:`pylogq.storage.file_cache`), which may let it go again, and
one-off reads (the last entry on open, sanity checks) use ``pread`` instead.
"""

from __future__ import annotations

import mmap
import os
import threading
from operator import index as _int
from typing import Any, List, Optional, Tuple, TypeVar, Union


from ..errors import (
    CorruptIndexError,
    IllegalStateError,
    IndexClosedError,
    IndexFullError,
    InvalidArgumentError,
    InvalidIndexEntryError,
)
from . import index_search
from .file_cache import LazyFile, open_files
from .index_search import (
    OFFSET_ENTRY_SIZE,
    OFFSET_FIRST_NEGATIVE,
    OFFSET_NOT_INCREASING,
    POSITION_FIRST_NEGATIVE,
    POSITION_DECREASING,
    TIME_ENTRY_SIZE,
    TIMESTAMP_NOT_INCREASING,
)

__all__ = ["OffsetIndex", "TimeIndex", "DEFAULT_MAX_INDEX_SIZE", "NO_TIMESTAMP", "OFFSET_ENTRY_SIZE",
           "TIME_ENTRY_SIZE", "open_index"]

#: Kafka's default ``segment.index.bytes``.
DEFAULT_MAX_INDEX_SIZE = 10 * 1024 * 1024
#: The timestamp of "no entry" (Kafka's ``RecordBatch.NO_TIMESTAMP``).
NO_TIMESTAMP = -1

INT32_MAX = 2**31 - 1
INT64_MIN = -(2**63)
INT64_MAX = 2**63 - 1

_OFFSET_ENTRY = index_search.OFFSET_ENTRY
_TIME_ENTRY = index_search.TIME_ENTRY

# The search kernels, bound here once so tests can hold both implementations
# of index_search to the same index tests.
_offset_lookup = index_search.offset_index_lookup
_offset_upper = index_search.offset_index_upper
_offset_entry = index_search.offset_index_entry
_time_lookup = index_search.time_index_lookup
_time_upper = index_search.time_index_upper
_time_entry = index_search.time_index_entry
_offset_disorder = index_search.offset_index_disorder
_time_disorder = index_search.time_index_disorder

PathType = Union[str, "os.PathLike[str]"]
_I = TypeVar("_I", bound="_Index")


# Bytes of zeros written ahead of the entries at a time (see _Index._ensure_filled).
_PREFILL_BYTES = 64 * 1024


class _Index:
    """The file, map and entry count shared by the offset and time indexes.

    Invariant: the first ``entries`` slots of the map hold the index; slots
    past them are free. ``entries`` only grows, except through
    ``truncate_to``, ``reset`` and ``close``.

    Thread-safety: one internal lock serializes every operation that touches
    the map, lookups included. Appends come from one writer (holding the log's
    lock) and lookups from any thread. Lookups hold the lock for one binary
    search, so a concurrent close or remap never unmaps pages under a search:
    CPython's mmap cannot close or resize while a buffer is exported, and the
    compiled search exports it with the GIL released on large indexes. The
    map is taken from the file cache under the lock and held for the
    operation, so the cache letting it go meanwhile unmaps nothing in use.
    """

    entry_size = 0
    kind = ""
    _read_entry: Any = None  # the kernel reading one raw entry: (buffer, slot) -> (int, int)

    def __init__(
        self,
        path: PathType,
        base_offset: int,
        max_index_size: int = DEFAULT_MAX_INDEX_SIZE,
        writable: bool = True,
    ) -> None:
        base_offset = _int(base_offset)
        max_index_size = _int(max_index_size)
        if base_offset < 0:
            raise InvalidArgumentError("base_offset must be >= 0, not %r" % (base_offset,))
        if writable and max_index_size < self.entry_size:
            raise InvalidArgumentError(
                "max_index_size must be at least one %s index entry (%d bytes), not %r"
                % (self.kind, self.entry_size, max_index_size)
            )
        self._path = os.fspath(path)
        self._base_offset = base_offset
        self._max_index_size = max(0, max_index_size) // self.entry_size * self.entry_size
        self._writable = bool(writable)
        self._lock = threading.Lock()
        self._length = 0  # the file's length: what a map of it covers
        self._filled = 0
        self._dirty = False  # entries written through a map since the last flush
        self._closed = False
        self._maps: LazyFile[mmap.mmap] = open_files().handle(self._open_map, self._closed_error)
        flags = os.O_RDWR | os.O_CREAT if writable else os.O_RDONLY
        fd = os.open(self._path, flags, 0o644)
        try:
            length = os.fstat(fd).st_size
            # Kafka's sanity check flags a file whose length is no multiple
            # of the entry size; remember it until the index is reset.
            self._misaligned_length: Optional[int] = (
                length if length % self.entry_size else None
            )
            self._entries = length // self.entry_size
            if writable:
                wanted = max(self._max_index_size, self._entries * self.entry_size)
                if length != wanted:
                    os.ftruncate(fd, wanted)
                    length = wanted
            self._length = length
            self._filled = min(self._entries * self.entry_size, length)
            last = os.pread(fd, self.entry_size, (self._entries - 1) * self.entry_size) if self._entries else b""
        finally:
            os.close(fd)
        self._set_last_entry(self._read_entry(last, 0) if len(last) == self.entry_size else None)

    # -- state -----------------------------------------------------------------

    @property
    def path(self) -> str:
        """The index file's current path (``rename_to`` changes it)."""
        return self._path

    @property
    def base_offset(self) -> int:
        """The segment's base offset: entries store offsets relative to it."""
        return self._base_offset

    @property
    def entries(self) -> int:
        """The number of entries in use."""
        return self._entries

    @property
    def max_entries(self) -> int:
        """The number of entries the current map holds."""
        return self._length // self.entry_size

    @property
    def max_index_size(self) -> int:
        """The configured file size, rounded down to a multiple of the entry size."""
        return self._max_index_size

    @property
    def size_in_bytes(self) -> int:
        """The bytes in use: ``entries * entry_size``, the size of a trimmed file."""
        return self._entries * self.entry_size

    @property
    def writable(self) -> bool:
        return self._writable

    @property
    def closed(self) -> bool:
        return self._closed

    def is_full(self) -> bool:
        """True when an append would have no free entry (the segment must roll)."""
        return self._entries >= self.max_entries

    def __repr__(self) -> str:
        return "%s(path=%r, base_offset=%d, entries=%d, max_entries=%d%s)" % (
            type(self).__name__,
            self._path,
            self._base_offset,
            self._entries,
            self.max_entries,
            ", closed" if self._closed else "",
        )

    def __enter__(self: _I) -> _I:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- the map ---------------------------------------------------------------

    def _open_map(self) -> mmap.mmap:
        """Map the whole file (the file cache calls this under the index's lock, on first use)."""
        fd = os.open(self._path, os.O_RDWR if self._writable else os.O_RDONLY)
        try:
            return mmap.mmap(fd, self._length, access=mmap.ACCESS_WRITE if self._writable else mmap.ACCESS_READ)
        finally:
            os.close(fd)

    def _closed_error(self) -> IndexClosedError:
        return IndexClosedError("%s index %s is closed" % (self.kind, self._path))

    def _map_locked(self) -> mmap.mmap:
        """The map of the file, from the file cache; hold it only while the lock is held.

        Only for a file with a length (an empty file has no map: mmap refuses it).
        """
        maps = self._maps
        mm = maps.value
        if mm is None:
            return maps.get()
        maps.referenced = True  # LazyFile.get() inlined: lookups and appends are hot
        return mm

    def _drop_map_locked(self, close: bool = False) -> None:
        """Let go of the map (the file's length changed, or the index closes): nothing else uses it
        now (every user holds the lock), so it is unmapped at once."""
        mm = self._maps.close() if close else self._maps.forget()
        if mm is not None:
            try:
                mm.close()
            except BufferError:  # still exported somewhere: it unmaps when that lets go
                pass

    def _slot_locked(self, n: int) -> Tuple[int, int]:
        """Raw entry ``n``, from the map if it is open, else with one ``pread`` (opens no map)."""
        mm = self._maps.peek()
        if mm is not None:
            return self._read_entry(mm, n)
        return self._read_entry(self._pread(n * self.entry_size, self.entry_size), 0)

    def _pread(self, position: int, size: int) -> bytes:
        fd = os.open(self._path, os.O_RDONLY)
        try:
            data = os.pread(fd, size, position)
        finally:
            os.close(fd)
        if len(data) != size:
            raise self._corrupt("the file ends at %d bytes, before its %d entries end", position + len(data),
                                self._entries)
        return data

    def _found(self, search: Any, target: int) -> Optional[Tuple[int, int]]:
        """The raw entry at the slot ``search`` picks for ``target``, or None.

        Under the lock: a search borrows the map (without the GIL on a large
        index), which must not close or shrink meanwhile. (acquire/release rather than
        ``with``: every read and append comes here, and they cost half as much.)
        """
        lock = self._lock
        lock.acquire()
        try:
            n = self._entries
            if self._closed:
                raise self._closed_error()
            if not n:
                return None
            maps = self._maps  # _map_locked() inlined: every read looks up an offset
            mm = maps.value
            if mm is None:
                mm = maps.get()
            else:
                maps.referenced = True
            slot = search(mm, n, target)
            if slot < 0:
                return None
            return self._read_entry(mm, slot)
        finally:
            lock.release()

    def _raw_entry(self, n: int) -> Tuple[int, int]:
        """The raw entry ``n``; IndexError outside ``[0, entries)``."""
        n = _int(n)
        with self._lock:
            self._check_open()
            if not 0 <= n < self._entries:
                raise IndexError(
                    "%s index %s has %d entries, no entry %d" % (self.kind, self._path, self._entries, n)
                )
            return self._read_entry(self._map_locked(), n)

    def _ensure_filled(self, upto: int) -> None:
        """Write zeros through the file ahead of the entries, a chunk at a time.

        The first store into a page of a sparse, never-written file region
        faults it in through the filesystem, which costs milliseconds on some
        systems; the same page written with ``pwrite`` first is already in the
        page cache and the store is cheap. Only bytes past the last entry are
        written, so no entry is ever overwritten.
        """
        if upto <= self._filled:
            return
        start = self._filled
        end = min(self._length, max(upto, start + _PREFILL_BYTES))
        fd = os.open(self._path, os.O_WRONLY)
        try:
            os.pwrite(fd, bytes(end - start), start)
        finally:
            os.close(fd)
        self._filled = end

    def _check_open(self) -> None:
        if self._closed:
            raise IndexClosedError("%s index %s is closed" % (self.kind, self._path))

    def _check_writable(self) -> None:
        self._check_open()
        if not self._writable:
            raise IllegalStateError("%s index %s is open read-only" % (self.kind, self._path))

    def _resize_locked(self, new_size: int) -> bool:
        new_size = max(0, new_size) // self.entry_size * self.entry_size
        if new_size < self._entries * self.entry_size:
            raise InvalidArgumentError(
                "cannot resize %s index %s to %d bytes: its %d entries need %d"
                % (self.kind, self._path, new_size, self._entries, self._entries * self.entry_size)
            )
        if new_size == self._length:
            return False
        # The old map goes first: no page past a shorter file's end stays mapped. No
        # search runs meanwhile (the lock is held); the next use maps the new length.
        self._drop_map_locked()
        fd = os.open(self._path, os.O_RDWR)
        try:
            os.ftruncate(fd, new_size)
        finally:
            os.close(fd)
        self._length = new_size
        self._filled = min(self._entries * self.entry_size, new_size)
        return True

    def resize(self, new_size: int) -> bool:
        """Set the file and map to ``new_size`` bytes (rounded down to whole entries).

        -> whether the size changed. Used to grow a trimmed index back to
        ``max_index_size`` when its segment becomes active again (load, roll).
        ``max_entries`` follows the new size.
        """
        new_size = _int(new_size)
        with self._lock:
            self._check_writable()
            return self._resize_locked(new_size)

    def trim_to_valid_size(self) -> None:
        """Shrink the file to exactly ``entries * entry_size`` bytes; the index is then full."""
        with self._lock:
            self._check_writable()
            self._resize_locked(self._entries * self.entry_size)

    def flush(self) -> None:
        """Make the entries written since the last flush durable (msync, or fsync once the map was let go)."""
        with self._lock:
            self._check_open()
            if not (self._writable and self._dirty and self._length):
                return
            mm = self._maps.peek()
            if mm is not None:
                mm.flush()
            else:  # the pages written through a map that was let go are the file's dirty pages
                fd = os.open(self._path, os.O_RDONLY)
                try:
                    os.fsync(fd)
                finally:
                    os.close(fd)
            self._dirty = False

    def close(self) -> None:
        """Trim the file (if writable) and unmap it; later calls do nothing.

        Lookups after close raise :class:`IndexClosedError`.
        """
        with self._lock:
            if self._closed:
                return
            try:
                if self._writable:
                    self._resize_locked(self._entries * self.entry_size)
            finally:
                self._drop_map_locked(close=True)
                self._closed = True

    def close_handler(self) -> None:
        """Unmap the index without trimming its file (its file system failed); later calls do nothing."""
        with self._lock:
            if not self._closed:
                self._drop_map_locked(close=True)
                self._closed = True

    def delete(self) -> bool:
        """Unmap the index (without trimming) and remove its file.

        -> whether a file was removed.
        """
        with self._lock:
            self._drop_map_locked(close=True)
            self._closed = True
            try:
                os.unlink(self._path)
            except FileNotFoundError:
                return False
            return True

    def rename_to(self, new_path: PathType) -> None:
        """Rename the file, open or not (POSIX keeps the map valid across a rename).

        A file that does not exist is not an error: the new path is recorded
        either way, as Kafka's ``renameTo`` does.
        """
        new_path = os.fspath(new_path)
        with self._lock:
            try:
                os.rename(self._path, new_path)
            except FileNotFoundError:
                if os.path.exists(self._path):
                    raise
            self._path = new_path

    def reset(self) -> None:
        """Remove every entry and grow the file back to ``max_index_size``."""
        with self._lock:
            self._check_writable()
            self._truncate_entries(0)
            self._resize_locked(self._max_index_size)
            self._misaligned_length = None

    def _truncate_entries(self, entries: int) -> None:
        self._entries = entries
        self._set_last_entry(self._slot_locked(entries - 1) if entries else None)

    def _set_last_entry(self, raw: Optional[Tuple[int, int]]) -> None:
        """Remember the last entry (raw, as stored; None when there is none)."""
        raise NotImplementedError

    def _used_bytes(self) -> bytes:
        """A copy of the used part (no buffer export outlives the call); read with ``pread``
        when no map is open (a sanity check on load maps nothing)."""
        if not self._entries:
            return b""
        size = self._entries * self.entry_size
        mm = self._maps.peek()
        return mm[:size] if mm is not None else self._pread(0, size)

    def _corrupt(self, message: str, *args: object) -> CorruptIndexError:
        return CorruptIndexError(
            "corrupt %s index %s: %s" % (self.kind, self._path, message % args)
        )

    def _check_length(self) -> None:
        if self._misaligned_length is not None:
            raise self._corrupt(
                "found %d bytes, which is not a multiple of the entry size %d",
                self._misaligned_length,
                self.entry_size,
            )


class OffsetIndex(_Index):
    """Offset -> position in the ``.log`` file, for every ``index.interval.bytes`` of batches.

    Invariant: offsets are strictly increasing and within ``[base_offset,
    base_offset + 2**31 - 1]``; positions are in ``[0, 2**31 - 1]``. A lookup
    finds the entry at or before an offset; the reader scans the log forward
    from its position. Thread-safe: one writer, any number of readers (see
    :class:`_Index`).
    """

    entry_size = OFFSET_ENTRY_SIZE
    kind = "offset"
    _read_entry = staticmethod(_offset_entry)

    def _set_last_entry(self, raw: Optional[Tuple[int, int]]) -> None:
        self._last_offset = self._base_offset + (raw[0] if raw is not None else 0)

    @property
    def last_offset(self) -> int:
        """The offset of the last entry (``base_offset`` when empty)."""
        return self._last_offset

    @property
    def last_entry(self) -> Tuple[int, int]:
        """The last ``(offset, position)``; ``(base_offset, 0)`` when empty."""
        with self._lock:
            self._check_open()
            if not self._entries:
                return self._base_offset, 0
            rel, position = self._slot_locked(self._entries - 1)
        return self._base_offset + rel, position

    def append(self, offset: int, position: int) -> None:
        """Add ``offset`` (absolute) at byte ``position`` of the log file.

        Raises :class:`IndexFullError` when full and
        :class:`InvalidIndexEntryError` for an offset no larger than the last
        one, or an offset or position that does not fit the 32-bit fields.
        """
        offset = _int(offset)
        position = _int(position)
        lock = self._lock  # acquire/release rather than ``with``: the produce path (see _found)
        lock.acquire()
        try:
            if self._closed or not self._writable:
                self._check_writable()
            n = self._entries
            if n * OFFSET_ENTRY_SIZE >= self._length:
                raise IndexFullError(
                    "offset index %s is full (%d entries)" % (self._path, n)
                )
            if n and offset <= self._last_offset:
                raise InvalidIndexEntryError(
                    "cannot append offset %d to offset index %s at slot %d: it is no larger "
                    "than the last offset %d" % (offset, self._path, n, self._last_offset)
                )
            relative = offset - self._base_offset
            if not 0 <= relative <= INT32_MAX:
                raise InvalidIndexEntryError(
                    "offset %d does not fit offset index %s with base offset %d: "
                    "offset - base_offset must be in [0, %d]"
                    % (offset, self._path, self._base_offset, INT32_MAX)
                )
            if not 0 <= position <= INT32_MAX:
                raise InvalidIndexEntryError(
                    "position %d for offset %d does not fit offset index %s: must be in [0, %d]"
                    % (position, offset, self._path, INT32_MAX)
                )
            self._ensure_filled((n + 1) * OFFSET_ENTRY_SIZE)
            _OFFSET_ENTRY.pack_into(self._map_locked(), n * OFFSET_ENTRY_SIZE, relative, position)
            self._dirty = True
            self._last_offset = offset
            self._entries = n + 1
        finally:
            lock.release()

    def lookup(self, target_offset: int) -> Tuple[int, int]:
        """The last ``(offset, position)`` with offset <= ``target_offset``.

        ``(base_offset, 0)`` when there is none: the reader then scans the
        segment from its start (Kafka's semantics).
        """
        found = self._found(_offset_lookup, _int(target_offset) - self._base_offset)
        if found is None:
            return self._base_offset, 0
        return self._base_offset + found[0], found[1]

    def lookup_upper(self, target_offset: int) -> Optional[Tuple[int, int]]:
        """The first ``(offset, position)`` with offset >= ``target_offset``, or None."""
        found = self._found(_offset_upper, _int(target_offset) - self._base_offset)
        return None if found is None else (self._base_offset + found[0], found[1])

    def floor_position(self, position: int) -> Tuple[int, int]:
        """The last ``(offset, position)`` whose position is <= ``position``; ``(base_offset, 0)``
        when there is none. Positions grow with offsets, so a binary search over entries works."""
        base = self._base_offset
        best = (base, 0)
        with self._lock:  # one search over one map, as the kernels' searches
            self._check_open()
            lo, hi = 0, self._entries - 1
            if hi < 0:
                return best
            mm = self._map_locked()
            while lo <= hi:
                mid = (lo + hi) >> 1
                rel, found = _offset_entry(mm, mid)
                if found <= position:
                    best = (base + rel, found)
                    lo = mid + 1
                else:
                    hi = mid - 1
        return best

    def entry(self, n: int) -> Tuple[int, int]:
        """The ``(offset, position)`` of entry ``n`` (IndexError outside ``[0, entries)``)."""
        rel, position = self._raw_entry(n)
        return self._base_offset + rel, position

    def all_entries(self) -> List[Tuple[int, int]]:
        """Every ``(offset, position)`` in order (for dump tools)."""
        with self._lock:
            self._check_open()
            data = self._used_bytes()
        base = self._base_offset
        return [(base + rel, position) for rel, position in _OFFSET_ENTRY.iter_unpack(data)]

    def truncate_to(self, offset: int) -> None:
        """Remove every entry with offset >= ``offset`` (Kafka's ``truncateTo``)."""
        target = _int(offset) - self._base_offset
        with self._lock:
            self._check_writable()
            n = self._entries
            if not n:
                return
            slot = _offset_upper(self._map_locked(), n, target)
            if slot >= 0:
                self._truncate_entries(slot)

    def sanity_check(self, full: bool = False) -> None:
        """Raise :class:`CorruptIndexError` if the file breaks the index's invariants.

        Always (Kafka's check): the loaded file's size is a multiple of 8 and
        the last offset is not below the base offset. With ``full``, every
        entry: relative offsets strictly increasing from >= 0, positions
        never decreasing and >= 0.
        """
        with self._lock:
            self._check_open()
            self._check_length()
            if self._entries and self._last_offset < self._base_offset:
                raise self._corrupt(
                    "%d entries but the last offset %d is below the base offset %d",
                    self._entries,
                    self._last_offset,
                    self._base_offset,
                )
            if not full:
                return
            data = self._used_bytes()
        if not data:
            return
        problem, i = _offset_disorder(data, len(data) // OFFSET_ENTRY_SIZE)
        if not problem:
            return
        rel, position = _OFFSET_ENTRY.unpack_from(data, i * OFFSET_ENTRY_SIZE)
        if problem in (OFFSET_NOT_INCREASING, POSITION_DECREASING):
            before_rel, before_position = _OFFSET_ENTRY.unpack_from(data, (i - 1) * OFFSET_ENTRY_SIZE)
        if problem == OFFSET_FIRST_NEGATIVE:
            raise self._corrupt("entry 0 has a negative relative offset %d", rel)
        if problem == OFFSET_NOT_INCREASING:
            raise self._corrupt(
                "offsets not strictly increasing: entry %d has offset %d after %d",
                i,
                self._base_offset + rel,
                self._base_offset + before_rel,
            )
        if problem == POSITION_FIRST_NEGATIVE:
            raise self._corrupt("entry 0 has a negative position %d", position)
        raise self._corrupt(
            "positions decrease: entry %d has position %d after %d", i, position, before_position)


class TimeIndex(_Index):
    """Timestamp -> the offset to start reading from to find records at or after it.

    Each entry holds the segment's max timestamp so far and the offset of the
    record that carried it. Invariant: timestamps strictly increasing,
    relative offsets never decreasing and within ``[0, 2**31 - 1]``.

    The last slot of the file is reserved: ``max_entries`` is one less than
    the slots the map holds, so ``maybe_append(..., skip_full_check=True)``,
    called when the segment stops being active, can always record the final
    max timestamp (Kafka reserves the slot the same way). If even that slot is
    taken (an index trimmed and then appended to), the file grows by one entry.
    Thread-safe: one writer, any number of readers (see :class:`_Index`).
    """

    entry_size = TIME_ENTRY_SIZE
    kind = "time"
    _read_entry = staticmethod(_time_entry)

    def _set_last_entry(self, raw: Optional[Tuple[int, int]]) -> None:
        self._last_entry = (raw[0], self._base_offset + raw[1]) if raw is not None else (NO_TIMESTAMP, self._base_offset)

    @property
    def max_entries(self) -> int:
        """The slots the map holds, less the one reserved for the final entry."""
        return max(0, self._length // TIME_ENTRY_SIZE - 1)

    @property
    def last_entry(self) -> Tuple[int, int]:
        """The last ``(timestamp, offset)``; ``(-1, base_offset)`` when empty."""
        return self._last_entry

    @property
    def last_offset(self) -> int:
        """The offset of the last entry (``base_offset`` when empty)."""
        return self._last_entry[1]

    def maybe_append(self, timestamp: int, offset: int, skip_full_check: bool = False) -> bool:
        """Add ``(timestamp, offset)`` if ``timestamp`` is above the last entry's.

        -> whether an entry was added. A timestamp no larger than the last
        one is skipped, so timestamps stay strictly increasing (Kafka's
        ``maybeAppend``); ``-1`` (no timestamp) is never added. Raises
        :class:`IndexFullError` when full, unless ``skip_full_check`` (the
        final entry of a segment that stops being active, which takes the
        reserved slot), and :class:`InvalidIndexEntryError` for an offset
        below the last one or outside the 32-bit relative range.
        """
        timestamp = _int(timestamp)
        offset = _int(offset)
        lock = self._lock  # acquire/release rather than ``with``: the produce path (see _found)
        lock.acquire()
        try:
            self._check_writable()
            n = self._entries
            if not skip_full_check and n >= self.max_entries:
                raise IndexFullError("time index %s is full (%d entries)" % (self._path, n))
            last_ts, last_offset = self._last_entry
            if n and offset < last_offset:
                raise InvalidIndexEntryError(
                    "cannot append offset %d to time index %s at slot %d: it is below the "
                    "last offset %d" % (offset, self._path, n, last_offset)
                )
            if timestamp <= last_ts:
                return False
            if timestamp > INT64_MAX:
                raise InvalidIndexEntryError(
                    "timestamp %d for time index %s does not fit 64 bits" % (timestamp, self._path)
                )
            relative = offset - self._base_offset
            if not 0 <= relative <= INT32_MAX:
                raise InvalidIndexEntryError(
                    "offset %d does not fit time index %s with base offset %d: "
                    "offset - base_offset must be in [0, %d]"
                    % (offset, self._path, self._base_offset, INT32_MAX)
                )
            if (n + 1) * TIME_ENTRY_SIZE > self._length:
                self._resize_locked((n + 1) * TIME_ENTRY_SIZE)
            self._ensure_filled((n + 1) * TIME_ENTRY_SIZE)
            _TIME_ENTRY.pack_into(self._map_locked(), n * TIME_ENTRY_SIZE, timestamp, relative)
            self._dirty = True
            self._last_entry = (timestamp, offset)
            self._entries = n + 1
            return True
        finally:
            lock.release()

    def lookup(self, target_ts: int) -> Tuple[int, int]:
        """The last ``(timestamp, offset)`` with timestamp <= ``target_ts``.

        ``(-1, base_offset)`` when there is none (Kafka's
        ``TimestampOffset(NO_TIMESTAMP, baseOffset)``).
        """
        found = self._found(_time_lookup, _int(target_ts))
        if found is None:
            return NO_TIMESTAMP, self._base_offset
        return found[0], self._base_offset + found[1]

    def lookup_upper(self, target_ts: int) -> Optional[Tuple[int, int]]:
        """The first ``(timestamp, offset)`` with timestamp >= ``target_ts``, or None."""
        found = self._found(_time_upper, _int(target_ts))
        return None if found is None else (found[0], self._base_offset + found[1])

    def entry(self, n: int) -> Tuple[int, int]:
        """The ``(timestamp, offset)`` of entry ``n`` (IndexError outside ``[0, entries)``)."""
        ts, rel = self._raw_entry(n)
        return ts, self._base_offset + rel

    def all_entries(self) -> List[Tuple[int, int]]:
        """Every ``(timestamp, offset)`` in order (for dump tools)."""
        with self._lock:
            self._check_open()
            data = self._used_bytes()
        base = self._base_offset
        return [(ts, base + rel) for ts, rel in _TIME_ENTRY.iter_unpack(data)]

    def truncate_to(self, offset: int) -> None:
        """Remove every entry with offset >= ``offset`` (Kafka's ``truncateTo``)."""
        target = _int(offset) - self._base_offset
        with self._lock:
            self._check_writable()
            if not self._entries:
                return
            mm = self._map_locked()
            # Offsets never decrease, so binary search for the first >= target.
            lo, hi = 0, self._entries
            while lo < hi:
                mid = (lo + hi) >> 1
                if _time_entry(mm, mid)[1] >= target:
                    hi = mid
                else:
                    lo = mid + 1
            if lo < self._entries:
                self._truncate_entries(lo)

    def sanity_check(self, full: bool = False) -> None:
        """Raise :class:`CorruptIndexError` if the file breaks the index's invariants.

        Always (Kafka's check): the loaded file's size is a multiple of 12,
        the last timestamp is not below the first and the last offset is not
        below the base offset. With ``full``, every entry: timestamps
        strictly increasing, relative offsets never decreasing from >= 0.
        """
        with self._lock:
            self._check_open()
            self._check_length()
            n = self._entries
            if n:
                last_ts, last_offset = self._last_entry
                first_ts, _ = self._slot_locked(0)
                if last_ts < first_ts:
                    raise self._corrupt(
                        "%d entries but the last timestamp %d is below the first %d",
                        n,
                        last_ts,
                        first_ts,
                    )
                if last_offset < self._base_offset:
                    raise self._corrupt(
                        "%d entries but the last offset %d is below the base offset %d",
                        n,
                        last_offset,
                        self._base_offset,
                    )
            if not full:
                return
            data = self._used_bytes()
        if not data:
            return
        problem, i = _time_disorder(data, len(data) // TIME_ENTRY_SIZE)
        if not problem:
            return
        ts, rel = _TIME_ENTRY.unpack_from(data, i * TIME_ENTRY_SIZE)
        if problem != OFFSET_FIRST_NEGATIVE:
            before_ts, before_rel = _TIME_ENTRY.unpack_from(data, (i - 1) * TIME_ENTRY_SIZE)
        if problem == TIMESTAMP_NOT_INCREASING:
            raise self._corrupt(
                "timestamps not strictly increasing: entry %d has timestamp %d after %d", i, ts, before_ts)
        if problem == OFFSET_FIRST_NEGATIVE:
            raise self._corrupt("entry 0 has a negative relative offset %d", rel)
        raise self._corrupt(
            "offsets decrease: entry %d has offset %d after %d",
            i,
            self._base_offset + rel,
            self._base_offset + before_rel,
        )



def open_index(
    path: PathType, base_offset: int, writable: bool = False
) -> Union[OffsetIndex, TimeIndex]:
    """Open an ``.index`` or ``.timeindex`` file by its suffix (``.deleted`` etc. ignored)."""
    name = os.fspath(path)
    for suffix in (".deleted", ".cleaned", ".swap"):
        if name.endswith(suffix):
            name = name[: -len(suffix)]
    if name.endswith(".timeindex"):
        return TimeIndex(path, base_offset, writable=writable)
    if name.endswith(".index"):
        return OffsetIndex(path, base_offset, writable=writable)
    raise InvalidArgumentError("index path must end with .index or .timeindex, not %r" % (os.fspath(path),))
