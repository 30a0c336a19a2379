"""One segment of a partition's log: a ``.log`` file of batches and its two indexes.

Files, named by the segment's base offset in 20 digits so ``ls`` sorts them::

    00000000000000368769.log        batches laid end to end, exactly as appended
    00000000000000368769.index      offset index: (relative offset, position) every
                                    ``index.interval.bytes`` of batches
    00000000000000368769.timeindex  time index: (max timestamp so far, its offset)

A suffix marks a file in transit: ``.deleted`` (scheduled for removal),
``.cleaned`` (compaction output not yet swapped in), ``.swap`` (compaction output
being swapped in). Readers get :class:`FileRegion` objects: an open file, a
position and a length, which a server can ``sendfile`` and a reader can decode.
A region keeps its file open, so a segment deleted or renamed under a reader
stays readable until the reader lets go (POSIX unlink semantics).
"""

from __future__ import annotations

import io
import os
import struct
import time
from typing import Any, Iterator, List, NamedTuple, Optional, Tuple, Union

import numpy as np

from ..errors import OffsetOutOfRangeError
from ..records import decode_columns
from ..records._impl import impl
from ..records.default_records import LAST_OFFSET_DELTA_OFFSET, MAX_TIMESTAMP_OFFSET
from .config import LogConfig
from .index import OffsetIndex, TimeIndex

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIME_INDEX_SUFFIX = ".timeindex"
DELETED_SUFFIX = ".deleted"
CLEANED_SUFFIX = ".cleaned"
SWAP_SUFFIX = ".swap"

_ENTRY_HEAD = struct.Struct(">qi")  # base offset, length: the first 12 bytes of every entry
_HEADER_READ = 61  # a v2 batch header; enough for the v0/v1 fields read here too
NO_TIMESTAMP = -1


# Appends reserve disk blocks ahead of the write position, this much at a time.
RESERVE_CHUNK = 16 * 1024 * 1024
_FALLOC_FL_KEEP_SIZE = 1
_fallocate: Any = None  # libc's fallocate(2), looked up on first use; False where there is none


def reserve_blocks(fd: int, offset: int, length: int) -> bool:
    """Allocate disk blocks for [offset, offset + length) without changing the file size.

    ``fallocate(2)`` with FALLOC_FL_KEEP_SIZE (Linux): later writes land in
    allocated blocks instead of allocating on the write path, which makes
    appends markedly faster on ext4 and xfs, and the file's size (what readers
    and recovery see) is untouched. ``ftruncate`` to the size releases the
    blocks past the end. -> False where the call is not available.
    """
    global _fallocate
    if _fallocate is None:
        try:
            import ctypes
            import ctypes.util

            libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
            fn = libc.fallocate
            fn.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_longlong, ctypes.c_longlong]
            fn.restype = ctypes.c_int
            _fallocate = fn
        except (OSError, AttributeError, TypeError):
            _fallocate = False
    if _fallocate is False:
        return False
    return _fallocate(fd, _FALLOC_FL_KEEP_SIZE, offset, length) == 0


def filename_prefix(offset: int) -> str:
    """Kafka's 20-digit zero-padded base offset: ``ls`` sorts segments by offset."""
    return "%020d" % offset


def offset_from_filename(name: str) -> int:
    """The base offset a segment or index file name starts with."""
    stem = name.split(".", 1)[0]
    if len(stem) != 20 or not stem.isdigit():
        raise ValueError("%r is not a segment file name (20 digits then a suffix)" % name)
    return int(stem)


class BatchHeader(NamedTuple):
    """What the log needs from an entry's header, in any format."""

    position: int
    size: int
    magic: int
    base_offset: int
    last_offset: int
    max_timestamp: int


def parse_header(head: bytes, position: int) -> BatchHeader:
    """Decode the first bytes of an entry (at least 17; 61 for a v2 batch's max timestamp)."""
    base, length = _ENTRY_HEAD.unpack_from(head, 0)
    magic = head[16]
    size = 12 + length
    if magic == 2 and len(head) >= 61:
        (delta,) = struct.unpack_from(">i", head, LAST_OFFSET_DELTA_OFFSET)
        (max_ts,) = struct.unpack_from(">q", head, MAX_TIMESTAMP_OFFSET)
        return BatchHeader(position, size, 2, base, base + delta, max_ts)
    max_ts = struct.unpack_from(">q", head, 18)[0] if magic == 1 and len(head) >= 26 else NO_TIMESTAMP
    # A v0/v1 entry is one message; a compressed wrapper carries its last inner offset.
    return BatchHeader(position, size, magic, base, base, max_ts)


class FileRegion:
    """A byte range of a segment file: what a read returns, ready for sendfile or decoding.

    Holds the open file, so the bytes stay readable even if the segment is
    deleted afterwards. ``read()`` raises if the file was truncated under the
    region (a replica truncating its log), rather than returning a torn batch.
    """

    __slots__ = ("file", "position", "length", "segment_base_offset")

    def __init__(self, file: io.FileIO, position: int, length: int, segment_base_offset: int) -> None:
        self.file = file
        self.position = position
        self.length = length
        self.segment_base_offset = segment_base_offset

    def __len__(self) -> int:
        return self.length

    def fileno(self) -> int:
        return self.file.fileno()

    def read(self) -> bytes:
        if self.length == 0:
            return b""
        data = os.pread(self.file.fileno(), self.length, self.position)
        if len(data) != self.length:
            raise OffsetOutOfRangeError(
                "segment %d was truncated while being read: %d of %d bytes at position %d"
                % (self.segment_base_offset, len(data), self.length, self.position)
            )
        return data

    def __repr__(self) -> str:
        return "FileRegion(segment=%d, position=%d, length=%d)" % (self.segment_base_offset, self.position, self.length)


class LogSegment:
    """One segment: its log file, offset index and time index.

    Invariant: the log file holds whole, validated batches from ``base_offset``
    up; every index entry points at the start of a batch whose offsets include
    or follow the entry's offset. Appends, truncation, renames and close come
    from one thread at a time (the log's lock); reads may run concurrently in
    any thread, up to a position the log hands them.
    """

    def __init__(self, directory: str, base_offset: int, config: LogConfig, suffix: str = "",
                 created_ms: Optional[int] = None) -> None:
        self.directory = directory
        self.base_offset = base_offset
        self.config = config
        prefix = os.path.join(directory, filename_prefix(base_offset))
        self.log_path = prefix + LOG_SUFFIX + suffix
        fd = os.open(self.log_path, os.O_RDWR | os.O_CREAT, 0o644)
        self.file = io.FileIO(fd, "r+", closefd=True)
        self.size = os.fstat(fd).st_size
        self.preallocated = False
        self._reserved = self.size  # disk blocks allocated up to here (see reserve_blocks)
        if config.preallocate and self.size == 0 and not suffix:
            # Kafka's preallocate: reserve the whole segment now, so appends write
            # into allocated blocks (faster); the file is cut to its data on roll
            # and close, and recovery cuts a crashed segment's zero tail.
            try:
                os.posix_fallocate(fd, 0, config.segment_bytes)
                self.preallocated = True
                self._reserved = config.segment_bytes
            except OSError:  # a filesystem without fallocate: plain appends
                pass
        # Missing index files (deleted, or never written before a crash) must be rebuilt.
        self.indexes_existed = os.path.exists(prefix + INDEX_SUFFIX + suffix) and os.path.exists(
            prefix + TIME_INDEX_SUFFIX + suffix)
        self.offset_index = OffsetIndex(prefix + INDEX_SUFFIX + suffix, base_offset, config.segment_index_bytes)
        self.time_index = TimeIndex(prefix + TIME_INDEX_SUFFIX + suffix, base_offset, config.segment_index_bytes)
        self.created_ms = created_ms if created_ms is not None else int(time.time() * 1000)
        self.bytes_since_last_index_entry = 0
        self.max_timestamp_so_far = NO_TIMESTAMP
        self.offset_of_max_timestamp_so_far = base_offset
        self.rolling_timestamp: Optional[int] = None  # the first batch's max timestamp (time-based roll)
        self._last_offset = base_offset - 1  # the largest offset appended; known after load or append
        self.closed = False

    # -- loading ------------------------------------------------------------

    @classmethod
    def open(cls, directory: str, base_offset: int, config: LogConfig, suffix: str = "") -> "LogSegment":
        """Open an existing segment (its files may lack indexes: recover() rebuilds them)."""
        segment = cls(directory, base_offset, config, suffix)
        try:
            segment.created_ms = int(os.stat(segment.log_path).st_mtime * 1000)
        except OSError:
            pass
        return segment

    def load_state(self) -> None:
        """Restore the max timestamp and the last offset from the indexes and the file tail.

        Used on a segment that needs no recovery: the last time index entry
        gives the max timestamp up to the last index entry, and the batches
        after the last offset index entry are read for the rest.
        """
        ts, offset = self.time_index.last_entry
        if ts != NO_TIMESTAMP:
            self.max_timestamp_so_far, self.offset_of_max_timestamp_so_far = ts, offset
        _, position = self.offset_index.lookup(2**62)
        last = self.base_offset - 1
        for header in self.iter_headers(position):
            last = header.last_offset
            if header.max_timestamp > self.max_timestamp_so_far:
                self.max_timestamp_so_far = header.max_timestamp
                self.offset_of_max_timestamp_so_far = header.last_offset
            if self.rolling_timestamp is None and header.position == 0:
                self.rolling_timestamp = header.max_timestamp
        if last < self.base_offset and self.offset_index.entries:
            last = self.offset_index.last_offset
        self._last_offset = last
        if self.size and self.rolling_timestamp is None:
            first = self.read_header(0)
            if first is not None:
                self.rolling_timestamp = first.max_timestamp

    def recover(self, max_message_bytes: int) -> int:
        """Check every batch, rebuild both indexes, truncate at the first invalid byte.

        -> the number of bytes truncated. A batch is valid when it is whole,
        well framed, passes its CRC, is no larger than ``max_message_bytes``
        (plus the log overhead) and its offsets do not go backwards.
        """
        self.offset_index.reset()
        self.time_index.reset()
        self.max_timestamp_so_far = NO_TIMESTAMP
        self.offset_of_max_timestamp_so_far = self.base_offset
        self.rolling_timestamp = None
        self.bytes_since_last_index_entry = 0
        data = _map_file(self.file, self.size)
        try:
            valid = _recover_scan(self, data, max_message_bytes)
        finally:
            if isinstance(data, memoryview):
                data.release()
        truncated = self.size - valid
        # Also releases blocks a crashed process had reserved past the end.
        os.ftruncate(self.file.fileno(), valid)
        self.size = valid
        self._reserved = valid
        self.time_index.trim_to_valid_size()
        self.offset_index.resize(self.config.segment_index_bytes)
        self.time_index.resize(self.config.segment_index_bytes)
        return truncated

    # -- appending ------------------------------------------------------------

    def append(self, data: Union[bytes, bytearray], batches: List[BatchHeader]) -> None:
        """Write validated batches (their headers in ``batches``) at the end of the file."""
        if not data:
            return
        position = self.size
        end = position + len(data)
        if end > self._reserved:
            target = max(end, min(self._reserved + RESERVE_CHUNK, self.config.segment_bytes))
            if reserve_blocks(self.file.fileno(), self._reserved, target - self._reserved):
                self._reserved = target
            else:
                self._reserved = 2**62  # not available here: stop trying
        written = os.pwrite(self.file.fileno(), data, position)
        if written != len(data):
            # A short write leaves a partial batch: cut it off so the file stays whole.
            os.ftruncate(self.file.fileno(), position)
            raise OSError("short write to %s: %d of %d bytes" % (self.log_path, written, len(data)))
        self._index_batches(batches, position)
        self.size = position + len(data)

    def _index_batches(self, batches: List[BatchHeader], position: int) -> None:
        interval = self.config.index_interval_bytes
        for b in batches:
            if b.max_timestamp > self.max_timestamp_so_far:
                self.max_timestamp_so_far = b.max_timestamp
                self.offset_of_max_timestamp_so_far = b.last_offset
            if self.rolling_timestamp is None:
                self.rolling_timestamp = b.max_timestamp
            if self.bytes_since_last_index_entry > interval:
                self.offset_index.append(b.last_offset, position)
                self.time_index.maybe_append(self.max_timestamp_so_far, self.offset_of_max_timestamp_so_far)
                self.bytes_since_last_index_entry = 0
            position += b.size
            self.bytes_since_last_index_entry += b.size
            self._last_offset = b.last_offset

    @property
    def next_offset(self) -> int:
        """One past the largest offset in this segment (the base offset when empty)."""
        return self._last_offset + 1 if self._last_offset >= self.base_offset else self.base_offset

    @property
    def last_offset(self) -> int:
        return self._last_offset

    def is_full_for(self, size: int, largest_offset: int) -> bool:
        """Whether appending ``size`` bytes up to ``largest_offset`` must go to a new segment."""
        return (
            (self.size > 0 and self.size + size > self.config.segment_bytes)
            or self.offset_index.is_full()
            or self.time_index.is_full()
            or largest_offset - self.base_offset > 2**31 - 1
        )

    # -- reading --------------------------------------------------------------

    def read_header(self, position: int) -> Optional[BatchHeader]:
        """The header of the entry at ``position``; None at the end or before a partial entry."""
        head = os.pread(self.file.fileno(), _HEADER_READ, position)
        if len(head) < 17:
            return None
        header = parse_header(head, position)
        if header.size < 12 + 14 or position + header.size > self.size:
            return None
        return header

    def iter_headers(self, position: int = 0, end: Optional[int] = None) -> Iterator[BatchHeader]:
        limit = self.size if end is None else end
        while position < limit:
            header = self.read_header(position)
            if header is None or position + header.size > limit:
                return
            yield header
            position += header.size

    def translate_offset(self, offset: int, start_position: int = 0) -> Optional[BatchHeader]:
        """The first batch whose last offset is >= ``offset``, searching from the index."""
        _, position = self.offset_index.lookup(offset)
        for header in self.iter_headers(max(position, start_position)):
            if header.last_offset >= offset:
                return header
        return None

    def read(self, offset: int, max_bytes: int, max_position: Optional[int] = None,
             min_one_batch: bool = True) -> Optional[FileRegion]:
        """Up to ``max_bytes`` of whole batches from the one holding ``offset`` (possibly none,
        when the first batch is larger and ``min_one_batch`` is off).

        None when no batch at or after ``offset`` lies below ``max_position``.
        With ``min_one_batch``, a first batch larger than ``max_bytes`` is
        returned whole (so a consumer can always make progress).
        """
        limit = self.size if max_position is None else min(max_position, self.size)
        start = self.translate_offset(offset)
        if start is None or start.position >= limit:
            return None
        length = min(limit - start.position, max_bytes)
        if min_one_batch and start.size > length:
            length = min(start.size, limit - start.position)
        elif length < limit - start.position:
            length = self._whole_batches(start, start.position + length)
        return FileRegion(self.file, start.position, length, self.base_offset)

    def _whole_batches(self, start: BatchHeader, end: int) -> int:
        """Bytes from ``start`` to the last batch boundary at or before ``end``.

        Kafka cuts a fetch at max bytes, mid-batch, and clients drop the partial
        batch and fetch it again; ending on a boundary sends nothing twice. The
        offset index (an entry per ``index.interval.bytes``) finds a batch start
        near ``end``, so only a few headers are read, whatever the batch size.
        """
        _, position = self.offset_index.floor_position(end)
        position = max(position, start.position)
        boundary = position
        for header in self.iter_headers(position, end):
            boundary = header.position + header.size
        return max(boundary - start.position, 0)

    def find_offset_by_timestamp(self, timestamp: int, start_offset: int = 0) -> Optional[Tuple[int, int]]:
        """The first record at or after ``start_offset`` with timestamp >= ``timestamp``.

        -> (its timestamp, its offset), or None. Kafka's findOffsetByTimestamp:
        the time index and batch max timestamps find the batch, then its
        records are read for the first one late enough.
        """
        ts_entry = self.time_index.lookup(timestamp)
        _, position = self.offset_index.lookup(max(ts_entry[1], start_offset))
        for header in self.iter_headers(position):
            if header.max_timestamp < timestamp or header.last_offset < start_offset:
                continue
            data = os.pread(self.file.fileno(), header.size, header.position)
            columns = decode_columns(data, start_offset=start_offset, skip_control=True)
            late = np.flatnonzero(columns.timestamps >= timestamp)
            if len(late):
                i = int(late[0])
                return int(columns.timestamps[i]), int(columns.offsets[i])
        return None

    @property
    def largest_timestamp(self) -> int:
        """The largest timestamp in the segment, or its file's mtime when it has none."""
        if self.max_timestamp_so_far != NO_TIMESTAMP:
            return self.max_timestamp_so_far
        return self.last_modified_ms

    @property
    def last_modified_ms(self) -> int:
        return int(os.fstat(self.file.fileno()).st_mtime * 1000)

    # -- truncation, flush, lifecycle --------------------------------------------------

    def truncate_to(self, offset: int) -> int:
        """Remove every batch whose offsets reach ``offset`` or beyond; -> bytes removed.

        A batch holding ``offset`` goes whole (batches are never split), so
        the segment may end below ``offset``.
        """
        header = self.translate_offset(offset)
        if header is None:
            return 0
        position = header.position  # every batch before it ends below offset
        removed = self.size - position
        self.offset_index.truncate_to(offset)
        self.time_index.truncate_to(offset)
        os.ftruncate(self.file.fileno(), position)
        self.size = position
        self._reserved = position
        # Rebuild the in-memory trackers from what is left.
        self.max_timestamp_so_far = NO_TIMESTAMP
        self.offset_of_max_timestamp_so_far = self.base_offset
        self.rolling_timestamp = None
        self._last_offset = self.base_offset - 1
        self.load_state()
        self.bytes_since_last_index_entry = 0
        return removed

    def flush(self) -> None:
        os.fsync(self.file.fileno())
        self.offset_index.flush()
        self.time_index.flush()

    def on_become_inactive(self) -> None:
        """A new segment was rolled: record the final max timestamp and trim the indexes."""
        self.time_index.maybe_append(self.max_timestamp_so_far, self.offset_of_max_timestamp_so_far,
                                     skip_full_check=True)
        self.offset_index.trim_to_valid_size()
        self.time_index.trim_to_valid_size()
        self._trim_preallocation()

    def _trim_preallocation(self) -> None:
        """Cut the file to its data and release blocks reserved past it."""
        if self.preallocated or self.size < self._reserved < 2**62:
            os.ftruncate(self.file.fileno(), self.size)
        self.preallocated = False
        self._reserved = self.size

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        if self.max_timestamp_so_far != NO_TIMESTAMP:
            self.time_index.maybe_append(self.max_timestamp_so_far, self.offset_of_max_timestamp_so_far,
                                         skip_full_check=True)
        self.offset_index.close()
        self.time_index.close()
        self._trim_preallocation()
        self.file.close()

    def change_suffix(self, old: str, new: str) -> None:
        """Rename the three files from suffix ``old`` to ``new`` (e.g. "" -> ".deleted")."""
        def swap(path: str) -> str:
            if not path.endswith(old):
                raise ValueError("%s does not end with %r" % (path, old))
            return path[: len(path) - len(old)] + new if old else path + new

        new_log = swap(self.log_path)
        os.rename(self.log_path, new_log)
        self.log_path = new_log
        for index in (self.offset_index, self.time_index):
            if os.path.exists(index.path):
                index.rename_to(swap(index.path))

    def delete(self) -> None:
        """Remove the segment's files.

        The log file object is not closed here: regions handed to readers keep
        it open, and it closes when the last of them is dropped. Reads always
        go through the file object, never a bare descriptor number, so a
        descriptor is never reused under a reader.
        """
        if not self.closed:
            self.closed = True
            self.offset_index.close()
            self.time_index.close()
        for path in (self.log_path, self.offset_index.path, self.time_index.path):
            try:
                os.unlink(path)
            except FileNotFoundError:
                pass

    def __repr__(self) -> str:
        return "LogSegment(base_offset=%d, size=%d, path=%s)" % (self.base_offset, self.size, self.log_path)


def _map_file(file: io.FileIO, size: int):
    """The file's first ``size`` bytes as a read-only buffer (an mmap view, or b"" when empty)."""
    if size == 0:
        return b""
    import mmap

    m = mmap.mmap(file.fileno(), size, prot=mmap.PROT_READ)
    return memoryview(m)


def _recover_scan(segment: LogSegment, data, max_message_bytes: int) -> int:
    """Validate ``data`` batch by batch and rebuild the segment's indexes; -> valid bytes."""
    valid, _, error = impl.scan_entries(data, 0, True)
    # Deep checks the framing walker does not do: size limit and monotonic offsets.
    headers: List[BatchHeader] = []
    position = 0
    last = segment.base_offset - 1
    limit = max_message_bytes + 12
    while position < valid:
        header = parse_header(bytes(data[position : position + _HEADER_READ]), position)
        if (header.size > limit or header.last_offset < header.base_offset or header.base_offset <= last
                or header.base_offset < segment.base_offset):
            break
        headers.append(header)
        last = header.last_offset
        position += header.size
    segment._index_batches(headers, 0)
    return position
