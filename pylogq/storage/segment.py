"""One segment of a partition's log: a ``.log`` file of batches and its two indexes.

Files, named by the segment's base offset in 20 digits so ``ls`` sorts them::

    00000000000000368769.log        batches laid end to end, exactly as appended
    00000000000000368769.index      offset index: (relative offset, position) every
                                    ``index.interval.bytes`` of batches
    00000000000000368769.timeindex  time index: (max timestamp so far, its offset)
    00000000000000368769.txnindex   transaction index: the aborted transactions whose
                                    markers the segment holds (only once there is one;
                                    see :mod:`pylogq.storage.transaction_index`)

A suffix marks a file in transit: ``.deleted`` (scheduled for removal),
``.cleaned`` (compaction output not yet swapped in), ``.swap`` (compaction output
being swapped in). Readers get :class:`FileRegion` objects: an open file, a
position and a length, which a server can ``sendfile`` and a reader can decode.
A region keeps its file open, so a segment deleted or renamed under a reader
stays readable until the reader lets go (POSIX unlink semantics).

A segment holds no descriptor while nobody uses it: its ``.log`` file and its
index maps are opened on demand through the process's bounded cache of open
files (:mod:`pylogq.storage.file_cache`), the writer's included, and a region
or reader keeps the file it was given open after the cache let go of it.
Blocks are reserved ahead of appends only for segments written at a sustained
rate, within the process's budget (:mod:`pylogq.storage.reservation`).

Whatever walks a ``.log`` file entry by entry goes through :class:`SegmentReader`:
the log itself (loading, recovery, offset lookups), Spark tasks reading a
broker's directories and ``pylogq dump-log``. It only reads, stops at the
valid prefix and says where and why (:class:`WalkStop`).
"""

from __future__ import annotations

import errno
import io
import os
import threading
import time
from typing import Any, Callable, Generic, Iterator, List, NamedTuple, Optional, Tuple, TypeVar, Union


from ..errors import IllegalStateError, InvalidArgumentError, OffsetOutOfRangeError, RecordProblem
from ..records import CONTROL_MASK, BatchHeader, decode_columns, parse_header
from ..records._impl import scan_entries
from ..records.default_records import ENTRY_HEAD, HEADER_SIZE, LOG_OVERHEAD, MAGIC_OFFSET
from ..records.record_times import iter_record_times
from ..records.legacy import RECORD_OVERHEAD_V0, RECORD_OVERHEAD_V1
from ..config import LogConfig
from .file_cache import SharedFile, open_files
from .index import OffsetIndex, TimeIndex
from .reservation import RESERVE_MAX, RESERVE_MIN, next_chunk, reservation_budget
from .transaction_index import TransactionIndex

__all__ = [
    "LOG_SUFFIX", "INDEX_SUFFIX", "TIME_INDEX_SUFFIX", "TXN_INDEX_SUFFIX", "DELETED_SUFFIX", "CLEANED_SUFFIX",
    "SWAP_SUFFIX", "NO_TIMESTAMP", "RESERVE_CHUNK", "reserve_blocks", "filename_prefix",
    "offset_from_filename", "index_paths", "txn_index_path", "BatchHeader", "parse_header", "FileRegion", "LogSegment",
    "END", "PARTIAL", "TRUNCATED", "CORRUPT", "DEFAULT_CHUNK_BYTES", "WalkStop",
    "SegmentBatch", "SegmentChunk", "SegmentWalk", "SegmentReader",
]

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIME_INDEX_SUFFIX = ".timeindex"
TXN_INDEX_SUFFIX = ".txnindex"
DELETED_SUFFIX = ".deleted"
CLEANED_SUFFIX = ".cleaned"
SWAP_SUFFIX = ".swap"

NO_TIMESTAMP = -1


# The most a segment reserves ahead of its appends at once (pylogq.storage.reservation decides when and how much).
RESERVE_CHUNK = RESERVE_MAX
_NEVER = 2**62  # a position no append reaches: no reservation is tried again
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


def index_paths(log_path: str) -> Tuple[str, str]:
    """The offset and time index files beside a segment's log file, with its suffix
    (``.cleaned``, ``.swap``) carried over: ``00..05.log.swap`` has ``00..05.index.swap``."""
    prefix, _, suffix = log_path.rpartition(LOG_SUFFIX)
    return prefix + INDEX_SUFFIX + suffix, prefix + TIME_INDEX_SUFFIX + suffix


def txn_index_path(log_path: str) -> str:
    """The transaction index file beside a segment's log file, with its suffix carried over."""
    prefix, _, suffix = log_path.rpartition(LOG_SUFFIX)
    return prefix + TXN_INDEX_SUFFIX + suffix


def offset_from_filename(name: str) -> int:
    """The base offset a segment or index file name starts with."""
    stem = name.split(".", 1)[0]
    if len(stem) != 20 or not stem.isdigit():
        raise InvalidArgumentError("a segment file name is 20 digits then a suffix, not %r" % (name,))
    return int(stem)


class FileRegion:
    """A byte range of a segment file: what a read returns, ready for sendfile or decoding.

    Holds the open file, so the bytes stay readable even if the segment is
    deleted, or its file leaves the file cache, afterwards. ``read()`` raises
    if the file was truncated under the region (a replica truncating its log),
    rather than returning a torn batch. An empty region (:meth:`empty`, a read
    at the log end) holds no file.
    """

    __slots__ = ("file", "position", "length", "segment_base_offset")

    def __init__(self, file: Optional[io.FileIO], position: int, length: int, segment_base_offset: int) -> None:
        self.file = file
        self.position = position
        self.length = length
        self.segment_base_offset = segment_base_offset

    @classmethod
    def empty(cls, segment_base_offset: int, position: int) -> "FileRegion":
        """No bytes, at ``position`` of a segment: opens nothing (idle partitions are polled at their end)."""
        return cls(None, position, 0, segment_base_offset)

    def __len__(self) -> int:
        return self.length

    def fileno(self) -> int:
        if self.file is None:
            raise IllegalStateError("an empty region of segment %d has no file" % self.segment_base_offset)
        return self.file.fileno()

    def read(self) -> bytes:
        if self.length == 0:
            return b""
        data = os.pread(self.fileno(), self.length, self.position)
        if len(data) != self.length:
            raise OffsetOutOfRangeError(
                "segment %d was truncated while being read: %d of %d bytes at position %d"
                % (self.segment_base_offset, len(data), self.length, self.position)
            )
        return data

    def __repr__(self) -> str:
        return "FileRegion(segment=%d, position=%d, length=%d)" % (self.segment_base_offset, self.position, self.length)


# -- walking a segment file, read-only ---------------------------------------------------------

#: Why a walk over a segment file stopped (``WalkStop.reason``).
END = "end"  # every entry up to the walk's end was whole
PARTIAL = "partial"  # the entry there runs past the walk's end: a torn tail, a batch being written, an end that cuts it
TRUNCATED = "truncated"  # the file ends before the walk's end: it shrank under the reader
CORRUPT = "corrupt"  # the entry there is malformed, or (when CRCs are checked) fails its CRC

# The records walker's framing rules (``records.scan``): the magic is byte 16 in every format,
# and an entry is at least the smallest message of its magic, offset and length included.
_FRAME_BYTES = MAGIC_OFFSET + 1
_MIN_ENTRY = (LOG_OVERHEAD + RECORD_OVERHEAD_V0, LOG_OVERHEAD + RECORD_OVERHEAD_V1, HEADER_SIZE)
#: Bytes a bulk walk reads at once unless told otherwise: few reads, and a chunk stays in the CPU's
#: cache while the walker checks it (recovering a 1 GB segment from the page cache is faster this
#: way than through a mapping of the whole file, and slower with 8 MB chunks).
DEFAULT_CHUNK_BYTES = 1 << 20

_T = TypeVar("_T")


class WalkStop(NamedTuple):
    """Where a walk over a segment file stopped and why: from its start up to ``position``, entries were whole."""

    position: int
    reason: str  # END, PARTIAL, TRUNCATED or CORRUPT
    detail: Optional[str]  # what is wrong at ``position``, in words (None at END)
    problem: Optional[RecordProblem] = None  # CORRUPT: which check the entry there failed


class SegmentBatch(NamedTuple):
    """One whole entry of a segment file: its header and its bytes."""

    header: BatchHeader
    data: memoryview  # a view of the chunk it was read with


class SegmentChunk(NamedTuple):
    """Whole entries laid end to end, read from ``position`` of a segment file."""

    position: int
    data: Union[bytes, memoryview]


class SegmentWalk(Generic[_T]):
    """One pass over the entries of a segment file, from ``start`` up to ``end``: iterate it once.

    ``position`` is the end of the last item yielded (``start`` before the
    first). When the iteration has ended, ``stop`` says where the valid prefix
    ends and why; it is None before, and when the caller left the loop early.
    The words for a framing stop are worked out when ``stop`` is first read,
    so walks that never ask (the log's offset lookups, which routinely stop
    at an end inside a batch) read nothing more. Not thread-safe.
    """

    __slots__ = ("reader", "start", "end", "position", "finished", "_known_stop", "_steps")

    def __init__(self, reader: "SegmentReader", start: int, end: int,
                 steps: Callable[["SegmentWalk[_T]"], Iterator[_T]]) -> None:
        self.reader = reader
        self.start = start
        self.end = end
        self.position = start
        self.finished = False
        self._known_stop: Optional[WalkStop] = None  # set by a step that found the reason itself (a CRC)
        self._steps = steps

    def __iter__(self) -> Iterator[_T]:
        return self._steps(self)

    @property
    def stop(self) -> Optional[WalkStop]:
        if self._known_stop is None and self.finished:
            self._known_stop = self.reader.stop_at(self.position, self.end)
        return self._known_stop


def _at(error: str, position: int) -> str:
    """A records-walker error about the entry at byte 0 of a read, placed in the file."""
    return error.replace("at byte 0", "at byte %d" % position)


class _Reread:
    """``pread`` into one buffer, reused by every read: -> a memoryview of the bytes read.

    The buffer grows (a new one) when a read wants more than it holds.
    """

    __slots__ = ("file", "buffer")

    def __init__(self, file: io.FileIO, size: int) -> None:
        self.file = file
        self.buffer = memoryview(bytearray(max(size, 0)))

    def __call__(self, position: int, size: int) -> memoryview:
        if size > len(self.buffer):
            self.buffer = memoryview(bytearray(size))
        view = self.buffer[:size]
        return view[:os.preadv(self.file.fileno(), [view], position)]


class SegmentReader:
    """Walks the entries of one segment's ``.log`` file, read-only: Kafka's FileLogInputStream.

    The one way pylogq reads a segment file entry by entry: the log itself
    (loading, recovery, offset lookups), Spark tasks reading a broker's
    directories from outside it, and ``pylogq dump-log``. So it never writes,
    truncates, locks or maps the file, and reads with ``pread`` only (no
    shared file position; and no mapping, which a file truncated under it
    would turn into SIGBUS). Every walk is bounded by an end the caller fixes
    (``size``: the file's size when opened, or what the log hands out), so
    bytes appended meanwhile are not seen, and it stops at the valid prefix:
    at its end, before a partial entry (a torn tail, a batch still being
    written), before a malformed entry (the records walker's framing: magic
    0-2, a length no smaller than the magic's smallest entry) or, in a bulk
    walk with ``check_crc``, one failing its CRC, or where the file ends
    early because it shrank; ``walk.stop`` says which.

    Three walks: :meth:`headers` reads only each entry's header (61 bytes,
    for offset lookups through an index); :meth:`chunks` reads whole entries
    in chunks of about ``chunk_bytes``, cut by the compiled records walker
    (for decoding in bulk); :meth:`batches` is the chunked walk one entry at
    a time with its header. Borrows ``file`` unless ``close_file``; always
    asks it for its descriptor, so a closed file raises rather than a reused
    descriptor being read. Reads keep no state, so walks may run in any
    threads at once; each walk is iterated by one thread.
    """

    __slots__ = ("file", "size", "_close_file")

    def __init__(self, file: io.FileIO, size: Optional[int] = None, close_file: bool = False) -> None:
        self.file = file
        self.size = os.fstat(file.fileno()).st_size if size is None else size
        self._close_file = close_file

    @classmethod
    def open(cls, path: str, size: Optional[int] = None) -> "SegmentReader":
        """``path`` opened read-only; OSError (FileNotFoundError when it is gone) as the OS says."""
        return cls(io.FileIO(path, "r"), size, close_file=True)

    def close(self) -> None:
        if self._close_file:
            self.file.close()

    def __enter__(self) -> "SegmentReader":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def read(self, position: int, size: int) -> bytes:
        """``size`` bytes at ``position``, or fewer where the file ends."""
        return os.pread(self.file.fileno(), size, position)

    def header_at(self, position: int, end: Optional[int] = None) -> Optional[BatchHeader]:
        """The header of the whole entry at ``position`` ending by ``end``; None when there is none.

        Reads the header only; the CRC is not checked. ``stop_at`` says why there is none.
        """
        limit = self.size if end is None else end
        head = os.pread(self.file.fileno(), HEADER_SIZE, position)
        n = len(head)
        if n < _FRAME_BYTES:
            return None
        magic = head[MAGIC_OFFSET]
        if magic > 2:
            return None
        header = parse_header(head, position)
        size = header.size
        if size < _MIN_ENTRY[magic] or position + size > limit or (n < HEADER_SIZE and n < size):
            return None  # (the last: the file is shorter than the end it was given)
        return header

    def stop_at(self, position: int, end: Optional[int] = None) -> WalkStop:
        """Why no whole entry starts at ``position`` by ``end``, where a walk stopped (framing only, no CRC)."""
        limit = self.size if end is None else end
        remain = limit - position
        if remain <= 0:
            return WalkStop(position, END, None)
        head = os.pread(self.file.fileno(), min(remain, HEADER_SIZE), position)
        _, _, error, problem = scan_entries(head, 0, False)
        if error is not None:
            return WalkStop(position, CORRUPT, _at(error, position), problem)
        if len(head) >= LOG_OVERHEAD:
            declared = LOG_OVERHEAD + ENTRY_HEAD.unpack_from(head)[1]
            if declared > remain:
                return WalkStop(position, PARTIAL, "the entry at position %d declares %d bytes, %d remain"
                                % (position, declared, remain))
            have = max(os.fstat(self.file.fileno()).st_size - position, 0)
            return WalkStop(position, TRUNCATED, "the file ends after %d of the %d bytes of the entry at position %d"
                            % (have, declared, position))
        if len(head) < remain:
            return WalkStop(position, TRUNCATED, "the file ends at position %d, before the end of the walk at %d"
                            % (os.fstat(self.file.fileno()).st_size, limit))
        return WalkStop(position, PARTIAL, "%d bytes at position %d, too few for an entry header" % (remain, position))

    def headers(self, start: int = 0, end: Optional[int] = None) -> SegmentWalk[BatchHeader]:
        """The header of each whole entry from ``start`` (an entry's position) up to ``end``, one small read each.

        Bodies are not read: an entry counts as whole when its header fits it
        by ``end``, so a file truncated under the walk is noticed at the first
        header missing, not at the first body cut (the bulk walks see that).
        """
        return SegmentWalk(self, start, self.size if end is None else end, self._walk_headers)

    def _walk_headers(self, walk: SegmentWalk[BatchHeader]) -> Iterator[BatchHeader]:
        position, limit = walk.start, walk.end
        header_at = self.header_at
        while position < limit:
            header = header_at(position, limit)
            if header is None:
                break
            position += header.size
            walk.position = position
            yield header
        walk.finished = True

    def chunks(self, start: int = 0, end: Optional[int] = None, chunk_bytes: int = DEFAULT_CHUNK_BYTES,
               check_crc: bool = False, reuse: bool = False) -> SegmentWalk[SegmentChunk]:
        """Whole entries from ``start`` up to ``end``, read ``chunk_bytes`` at a time and cut to whole entries.

        An entry larger than ``chunk_bytes`` comes alone, read whole. With
        ``check_crc`` every entry's CRC is checked too (the compiled walker
        releases the GIL while it checks a large entry). With ``reuse`` the
        walk reads every chunk into one buffer of its own, so a chunk's data
        (a memoryview) holds its bytes only until the next chunk is read:
        for callers that are done with a chunk before asking for the next,
        whose large reads then write into the same memory each time rather
        than fresh pages the system must fault in and zero.
        """
        if chunk_bytes < 1:
            raise InvalidArgumentError("chunk_bytes must be an int >= 1, not %r" % (chunk_bytes,))
        limit = self.size if end is None else end
        return SegmentWalk(self, start, limit, lambda walk: self._walk_chunks(walk, chunk_bytes, check_crc, reuse))

    def _walk_chunks(self, walk: SegmentWalk[SegmentChunk], chunk_bytes: int,
                     check_crc: bool, reuse: bool) -> Iterator[SegmentChunk]:
        position, limit = walk.start, walk.end
        read = _Reread(self.file, min(chunk_bytes, limit - position)) if reuse else self.read
        while position < limit:
            data = read(position, min(chunk_bytes, limit - position))
            valid, _, error, problem = scan_entries(data, 0, check_crc)
            if valid == 0 and error is None:
                # The first entry is larger than the chunk, or not whole by the end.
                header = self.header_at(position, limit)
                if header is None:
                    break
                data = read(position, header.size)
                valid, _, error, problem = scan_entries(data, 0, check_crc)
            if valid == 0:
                if error is not None:
                    walk._known_stop = WalkStop(position, CORRUPT, _at(error, position), problem)
                break  # else the file shrank under the read: stop_at says so
            # A bad entry after ``valid`` bytes is read again at the top of the next round, as
            # the first of its read, so the stop names its position in the file.
            position += valid
            walk.position = position
            yield SegmentChunk(position - valid, data if valid == len(data) else memoryview(data)[:valid])
        walk.finished = True

    def batches(self, start: int = 0, end: Optional[int] = None, chunk_bytes: int = DEFAULT_CHUNK_BYTES,
                check_crc: bool = False) -> SegmentWalk[SegmentBatch]:
        """Each whole entry from ``start`` up to ``end`` with its header and bytes, read in chunks as :meth:`chunks`."""
        chunks = self.chunks(start, end, chunk_bytes, check_crc)
        return SegmentWalk(self, start, chunks.end, lambda walk: self._walk_batches(walk, chunks))

    @staticmethod
    def _walk_batches(walk: SegmentWalk[SegmentBatch], chunks: SegmentWalk[SegmentChunk]) -> Iterator[SegmentBatch]:
        for chunk in chunks:
            view = memoryview(chunk.data)
            n = len(view)
            pos = 0
            while pos < n:
                header = parse_header(bytes(view[pos : pos + HEADER_SIZE]), chunk.position + pos)
                end = pos + header.size
                walk.position = chunk.position + end
                yield SegmentBatch(header, view[pos:end])
                pos = end
        walk._known_stop = chunks._known_stop
        walk.finished = True


class LogSegment:
    """One segment: its log file, offset index, time index and transaction index.

    Invariant: the log file holds whole, validated batches from ``base_offset``
    up; every index entry points at the start of a batch whose offsets include
    or follow the entry's offset. Appends, truncation, renames and close come
    from one thread at a time (the log's lock); reads may run concurrently in
    any thread, up to a position the log hands them.

    Files: the ``.log`` file and the index maps are opened on demand through
    the process's file cache (:attr:`file` opens it again when the cache has
    let it go), so a segment nobody uses holds no descriptor. Blocks reserved
    ahead of appends (:mod:`pylogq.storage.reservation`) end at ``_allocated``;
    the write lock orders every change of the file's size (appends,
    truncation, giving reserved blocks back) with the budget asking for them
    back from another thread.
    """

    def __init__(self, directory: str, base_offset: int, config: LogConfig, suffix: str = "",
                 created_ms: Optional[int] = None) -> None:
        self.directory = directory
        self.base_offset = base_offset
        self.config = config
        prefix = os.path.join(directory, filename_prefix(base_offset))
        self.log_path = prefix + LOG_SUFFIX + suffix
        self.closed = False
        self._deleted = False
        self._file = open_files().handle(self._open_log, self._closed_error)
        fd = os.open(self.log_path, os.O_RDWR | os.O_CREAT, 0o644)
        file = self._file.put(SharedFile(fd, "r+", closefd=True))
        self.size = os.fstat(fd).st_size
        self.preallocated = False
        self._write_lock = threading.Lock()
        self._allocated = self.size  # disk blocks allocated up to here (see reserve_blocks)
        # Reservation ahead of appends: none for compaction output (written once, then inactive).
        self._reserve_at = self.size + RESERVE_MIN if not suffix else _NEVER  # where to consider the next chunk
        self._chunk = 0  # the last chunk granted
        self._chunk_started = time.monotonic()  # when the bytes up to _reserve_at started coming
        if config.preallocate and self.size == 0 and not suffix:
            # Kafka's preallocate: reserve the whole segment now, so appends write
            # into allocated blocks (faster); the file is cut to its data on roll
            # and close, and recovery cuts a crashed segment's zero tail.
            try:
                os.posix_fallocate(file.fileno(), 0, config.segment_bytes)
                self.preallocated = True
                self._allocated = config.segment_bytes
                self._reserve_at = _NEVER
            except OSError:  # a filesystem without fallocate: plain appends
                pass
        del file
        # Missing index files (deleted, or never written before a crash) must be rebuilt.
        offset_path, time_path = index_paths(self.log_path)
        self.indexes_existed = os.path.exists(offset_path) and os.path.exists(time_path)
        self.offset_index = OffsetIndex(offset_path, base_offset, config.segment_index_bytes)
        self.time_index = TimeIndex(time_path, base_offset, config.segment_index_bytes)
        #: The aborted transactions whose markers this segment holds (a file only once there is one).
        self.txn_index = TransactionIndex(txn_index_path(self.log_path), base_offset)
        #: Set by :meth:`recover`: whether the recovered batches hold a transaction marker (a
        #: producer's control batch), whose transaction index entries the loader then writes again.
        self.recovered_txn_markers = False
        self.created_ms = created_ms if created_ms is not None else int(time.time() * 1000)
        self.bytes_since_last_index_entry = 0
        self.max_timestamp_so_far = NO_TIMESTAMP
        self.offset_of_max_timestamp_so_far = base_offset
        self.rolling_timestamp: Optional[int] = None  # the first batch's max timestamp (time-based roll)
        self._last_offset = base_offset - 1  # the largest offset appended; known after load or append

    @property
    def file(self) -> io.FileIO:
        """The open ``.log`` file, opened again if the file cache let it go.

        Keep it only for the operation in hand, or hand it to a region or reader
        (which keeps it open). ValueError once the segment is closed or deleted.
        """
        return self._file.get()

    def _open_log(self) -> SharedFile:
        while True:
            path = self.log_path
            try:
                return SharedFile(path, "r+")  # never O_CREAT: a file deleted under us stays deleted
            except FileNotFoundError:
                if self.log_path == path:
                    raise
                # renamed meanwhile (.deleted, .swap): open it by its new name

    def _closed_error(self) -> Exception:
        return ValueError("segment %d of %s is %s" % (self.base_offset, self.directory,
                                                       "deleted" if self._deleted else "closed"))

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
        (plus the log overhead) and its offsets do not go backwards. The
        transaction index is emptied: its entries depend on the transactions of
        earlier segments too, so the loader writes them again
        (:attr:`recovered_txn_markers` says whether there are any).
        """
        self.offset_index.reset()
        self.time_index.reset()
        # Its entries depend on the transactions of earlier segments too: the loader writes them again.
        self.txn_index.reset()
        self.max_timestamp_so_far = NO_TIMESTAMP
        self.offset_of_max_timestamp_so_far = self.base_offset
        self.rolling_timestamp = None
        self.bytes_since_last_index_entry = 0
        self._last_offset = self.base_offset - 1
        valid = _recover_scan(self, self.reader(), max_message_bytes)
        truncated = self.size - valid
        with self._write_lock:
            # Also releases blocks a crashed process had reserved past the end.
            file = self._file.get()
            os.ftruncate(file.fileno(), valid)
            self.size = valid
            self._unreserve_locked()
        self.time_index.trim_to_valid_size()
        self.offset_index.resize(self.config.segment_index_bytes)
        self.time_index.resize(self.config.segment_index_bytes)
        return truncated

    # -- appending ------------------------------------------------------------

    def append(self, data: Union[bytes, bytearray], batches: List[BatchHeader]) -> None:
        """Write validated batches (their headers in ``batches``) at the end of the file."""
        if not data:
            return
        lock = self._write_lock
        lock.acquire()  # (not ``with``: this is the produce path, and acquire/release cost half as much)
        try:
            # The file is held for the whole append: the cache may let it go meanwhile, this write keeps it open.
            self._append_locked(self._file.get(), data, batches)
        finally:
            lock.release()

    def _append_locked(self, file: io.FileIO, data: Union[bytes, bytearray], batches: List[BatchHeader]) -> None:
        position = self.size
        end = position + len(data)
        if end > self._reserve_at:
            self._reserve_ahead(file, position, end)
        saved = (self._last_offset, self.max_timestamp_so_far, self.offset_of_max_timestamp_so_far,
                 self.rolling_timestamp, self.bytes_since_last_index_entry)
        try:
            view = memoryview(data)
            written = 0
            while written < len(data):  # a short write is retried: the next one says why (ENOSPC)
                n = os.pwrite(file.fileno(), view[written:], position + written)
                if n <= 0:
                    raise OSError(errno.EIO, "write to %s made no progress" % self.log_path)
                written += n
            self._index_batches(batches, position)
        except OSError:
            # A full disk or an I/O error: the segment goes back to exactly what it was (a
            # partial batch cut off, this append's index entries dropped), so it takes the
            # next append as if this one never happened.
            os.ftruncate(file.fileno(), position)
            self._unreserve_locked()  # the cut released the reserved blocks too
            self.offset_index.truncate_to(batches[0].base_offset)
            self.time_index.truncate_to(batches[0].base_offset)
            (self._last_offset, self.max_timestamp_so_far, self.offset_of_max_timestamp_so_far,
             self.rolling_timestamp, self.bytes_since_last_index_entry) = saved
            raise
        self.size = position + len(data)

    def _reserve_ahead(self, file: io.FileIO, position: int, end: int) -> None:
        """The append to ``end`` passed the point to consider reserving: reserve the next chunk
        if the writes since the last one came fast enough and the budget grants it."""
        now = time.monotonic()
        chunk = next_chunk(self._chunk, now - self._chunk_started)
        self._chunk_started = now
        if not chunk:  # slow writes: nothing reserved; look again after another RESERVE_MIN
            self._chunk = 0
            self._reserve_at = end + RESERVE_MIN
            return
        budget = reservation_budget()
        if budget.request(self, chunk) != chunk:  # no room now: ask for as much after another chunk's worth
            self._reserve_at = end + chunk
            return
        start = max(position, self._allocated)
        target = min(end + chunk, max(self.config.segment_bytes, end))
        if target <= start or reserve_blocks(file.fileno(), start, target - start):
            self._allocated = max(self._allocated, target)
            self._reserve_at = target
            self._chunk = chunk
        else:
            budget.release(self)
            self._reserve_at = _NEVER  # not available here: stop trying

    def release_reservation(self, wait: bool = True) -> bool:
        """Give back the blocks reserved past the data and the budget's grant; -> whether it did.

        The budget calls this from another segment's append to make room
        (``wait=False``: a segment being written keeps its blocks).
        """
        if not self._write_lock.acquire(blocking=wait):
            return False
        try:
            if self.closed:
                reservation_budget().release(self)
                return True
            try:
                self._trim_locked()
            except (OSError, ValueError):  # gone or failing: the grant goes all the same, never held forever
                reservation_budget().release(self)
            return True
        finally:
            self._write_lock.release()

    def _trim_locked(self) -> None:
        """Cut the file to its data, releasing the blocks reserved past it (under the write lock)."""
        if self.preallocated or self.size < self._allocated:
            file = self._file.get()
            os.ftruncate(file.fileno(), self.size)
        self.preallocated = False
        self._unreserve_locked()

    def _unreserve_locked(self) -> None:
        """Nothing is reserved past the data any more: return the grant, start again from no chunk."""
        self._allocated = self.size
        if self._reserve_at != _NEVER:
            self._reserve_at = self.size + RESERVE_MIN
        self._chunk = 0
        self._chunk_started = time.monotonic()
        reservation_budget().release(self)

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

    def reader(self) -> SegmentReader:
        """A reader of the log file as the log sees it now: its first ``size`` bytes."""
        return SegmentReader(self.file, self.size)

    def read_header(self, position: int) -> Optional[BatchHeader]:
        """The header of the entry at ``position``; None at the end or before a partial entry."""
        return self.reader().header_at(position)

    def iter_headers(self, position: int = 0, end: Optional[int] = None) -> Iterator[BatchHeader]:
        """The headers of the whole entries from ``position`` (an entry's start) up to ``end``."""
        limit = self.size if end is None else min(end, self.size)
        return iter(SegmentReader(self.file, limit).headers(position))

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
        reader = self.reader()
        for header in reader.headers(position):
            if header.max_timestamp < timestamp or header.last_offset < start_offset:
                continue
            data = reader.read(header.position, header.size)
            if header.magic >= 2:  # read as it decompresses: a batch of extreme ratio stays small
                for offset, ts in iter_record_times(data):
                    if offset >= start_offset and ts >= timestamp:
                        return ts, offset
                continue
            columns = decode_columns(data, start_offset=start_offset, skip_control=True)
            import numpy as np  # not at import: a broker starting up needs none of it

            late = np.flatnonzero(columns.timestamps >= timestamp)
            if len(late):
                i = int(late[0])
                return int(columns.timestamps[i]), int(columns.offsets[i])
        return None

    def find_max_timestamp(self, start_offset: int = 0) -> Optional[Tuple[int, int]]:
        """The first record at or after ``start_offset`` holding the segment's largest
        timestamp: -> (that timestamp, its offset), or None when the segment has none.

        Kafka's ListOffsets by max timestamp (KIP-734): the batch headers find the first
        batch whose max timestamp is the segment's, then its records are read for the
        first one carrying it.
        """
        best = NO_TIMESTAMP
        reader = self.reader()
        for header in reader.headers(0):
            if header.last_offset >= start_offset and header.max_timestamp > best:
                best = header.max_timestamp
        if best == NO_TIMESTAMP:
            return None
        return self.find_offset_by_timestamp(best, start_offset)

    @property
    def largest_timestamp(self) -> int:
        """The largest timestamp in the segment, or its file's mtime when it has none."""
        if self.max_timestamp_so_far != NO_TIMESTAMP:
            return self.max_timestamp_so_far
        return self.last_modified_ms

    @property
    def last_modified_ms(self) -> int:
        file = self._file.peek()  # retention asks every segment: no file is opened for it
        try:
            st = os.fstat(file.fileno()) if file is not None else os.stat(self.log_path)
        except (FileNotFoundError, ValueError):  # deleted meanwhile: when it was opened or made will do
            return self.created_ms
        return int(st.st_mtime * 1000)

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
        # The batch holding ``offset`` goes whole: a marker in it goes too.
        self.txn_index.truncate_to(min(offset, header.base_offset))
        with self._write_lock:
            file = self._file.get()
            os.ftruncate(file.fileno(), position)
            self.size = position
            self._unreserve_locked()
        # Rebuild the in-memory trackers from what is left.
        self.max_timestamp_so_far = NO_TIMESTAMP
        self.offset_of_max_timestamp_so_far = self.base_offset
        self.rolling_timestamp = None
        self._last_offset = self.base_offset - 1
        self.load_state()
        self.bytes_since_last_index_entry = 0
        return removed

    def flush(self) -> None:
        file = self._file.get()  # a descriptor opened now syncs the file's pages all the same
        os.fsync(file.fileno())
        self.offset_index.flush()
        self.time_index.flush()
        self.txn_index.flush()

    def on_become_inactive(self) -> None:
        """A new segment was rolled: record the final max timestamp and trim the indexes."""
        self.time_index.maybe_append(self.max_timestamp_so_far, self.offset_of_max_timestamp_so_far,
                                     skip_full_check=True)
        self.offset_index.trim_to_valid_size()
        self.time_index.trim_to_valid_size()
        self._trim_preallocation()

    def _trim_preallocation(self) -> None:
        """Cut the file to its data and release blocks reserved past it."""
        with self._write_lock:
            self._trim_locked()

    def close(self) -> None:
        """Trim the indexes and the file to their data and let go of the file.

        The file is not closed under a region or reader still holding it: it
        closes when the last of them lets go.
        """
        if self.closed:
            return
        if self.max_timestamp_so_far != NO_TIMESTAMP:
            self.time_index.maybe_append(self.max_timestamp_so_far, self.offset_of_max_timestamp_so_far,
                                         skip_full_check=True)
        self.offset_index.close()
        self.time_index.close()
        self.txn_index.close()
        with self._write_lock:
            self.closed = True
            try:
                self._trim_locked()
            finally:
                self._file.close()

    def close_handlers(self) -> None:
        """Let go of the file and unmap the indexes without writing anything (the file system
        failed: a trim could not be written, and a page written through a map might never be)."""
        if self.closed:
            return
        self.offset_index.close_handler()
        self.time_index.close_handler()
        self.txn_index.close()
        with self._write_lock:
            self.closed = True
            self._file.close()

    def change_suffix(self, old: str, new: str) -> None:
        """Rename the segment's files from suffix ``old`` to ``new`` (e.g. "" -> ".deleted")."""
        def swap(path: str) -> str:
            if not path.endswith(old):
                raise InvalidArgumentError("%s does not end with %r" % (path, old))
            return path[: len(path) - len(old)] + new if old else path + new

        new_log = swap(self.log_path)
        os.rename(self.log_path, new_log)
        self.log_path = new_log
        for index in (self.offset_index, self.time_index):
            if os.path.exists(index.path):
                index.rename_to(swap(index.path))
        self.txn_index.rename_to(swap(self.txn_index.path))

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
        self.txn_index.delete()
        self._deleted = True
        self._file.close()
        reservation_budget().release(self)  # the blocks go with the file
        for path in (self.log_path, self.offset_index.path, self.time_index.path):
            try:
                os.unlink(path)
            except FileNotFoundError:
                pass

    def __repr__(self) -> str:
        return "LogSegment(base_offset=%d, size=%d, path=%s)" % (self.base_offset, self.size, self.log_path)


def _recover_scan(segment: LogSegment, reader: SegmentReader, max_message_bytes: int) -> int:
    """Validate the segment batch by batch and rebuild its indexes; -> valid bytes.

    The reader checks framing and CRCs; the log's own rules follow here: the
    size limit, and offsets that only go up from the segment's base.
    """
    headers: List[BatchHeader] = []
    position = 0
    last = segment.base_offset - 1
    limit = max_message_bytes + LOG_OVERHEAD
    markers = False
    for batch in reader.batches(0, check_crc=True):
        header = batch.header
        if (header.size > limit or header.last_offset < header.base_offset or header.base_offset <= last
                or header.base_offset < segment.base_offset):
            break
        headers.append(header)
        last = header.last_offset
        position += header.size
        if header.attributes & CONTROL_MASK and header.producer_id >= 0 and header.magic >= 2:
            markers = True
    segment._index_batches(headers, 0)
    segment.recovered_txn_markers = markers
    return position
