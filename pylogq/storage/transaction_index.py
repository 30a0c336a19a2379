"""Kafka's transaction index: the aborted transactions whose ABORT markers a segment holds.

Byte layout (big-endian, Kafka's own AbortedTxn, so either side reads the other's files)::

    <base offset, 20 digits>.txnindex   34-byte entries, in the order their markers were written
      int16  version             0
      int64  producer_id
      int64  first_offset        the transaction's first offset (it may lie in an earlier segment)
      int64  last_offset         the offset of its ABORT marker, in this segment; strictly increasing
      int64  last_stable_offset  the partition's last stable offset once the marker was written: the
                                 first offset of the oldest other transaction then ongoing, or
                                 ``last_offset + 1`` when there was none

A segment has at most one transaction index, and most have none: the file is
created when the first aborted transaction is written to it. It is renamed,
truncated and deleted with its segment. A read_committed fetch asks, segment
after segment from the one holding its offset, for the aborted transactions
overlapping its range (:meth:`TransactionIndex.collect_aborted_txns`); the
search ends at the first entry whose last stable offset reaches the end of the
range, since every transaction that could overlap the range was decided by
then (``is_complete``).

A transaction's entry depends on the state of every producer when its marker
was written, which the segment alone does not hold: an index that cannot be
trusted (:meth:`TransactionIndex.sanity_check`) is rebuilt by the segment's
recovery, which replays the log's transactions from its start.
"""

from __future__ import annotations

import os
import struct
from typing import List, NamedTuple, Optional

from ..errors import CorruptIndexError, InvalidArgumentError
from .file_cache import SharedFile, open_files

__all__ = ["ABORTED_TXN", "ABORTED_TXN_SIZE", "AbortedTxn", "CompletedTxn", "TransactionIndex",
           "TxnIndexSearchResult", "CURRENT_VERSION", "parse_aborted_txns", "read_aborted_txns"]

#: One entry: version, producer id, first offset, last offset, last stable offset.
ABORTED_TXN = struct.Struct(">hqqqq")
ABORTED_TXN_SIZE = ABORTED_TXN.size  # 34
#: The only version of an entry Kafka writes (and reads).
CURRENT_VERSION = 0


class AbortedTxn(NamedTuple):
    """One entry of a transaction index: an aborted transaction (Kafka's AbortedTxn)."""

    producer_id: int
    first_offset: int
    last_offset: int  # the ABORT marker's offset
    last_stable_offset: int

    def pack(self) -> bytes:
        return ABORTED_TXN.pack(CURRENT_VERSION, self.producer_id, self.first_offset, self.last_offset,
                                self.last_stable_offset)


class CompletedTxn(NamedTuple):
    """A transaction a marker just ended (Kafka's CompletedTxn): from its first offset to the
    marker's offset, both inclusive."""

    producer_id: int
    first_offset: int
    last_offset: int  # the COMMIT or ABORT marker's offset
    is_aborted: bool


class TxnIndexSearchResult(NamedTuple):
    """The aborted transactions one segment's index holds for a range, and whether the search
    may stop there (Kafka's TxnIndexSearchResult): a later segment can hold none that overlap."""

    aborted_transactions: List[AbortedTxn]
    is_complete: bool


def parse_aborted_txns(data: bytes) -> List[AbortedTxn]:
    """The whole entries of a transaction index's bytes, in order (a partial last entry is not one)."""
    n = len(data) - len(data) % ABORTED_TXN_SIZE
    return [AbortedTxn(pid, first, last, lso) for _, pid, first, last, lso in ABORTED_TXN.iter_unpack(data[:n])]


def read_aborted_txns(path: str) -> List[AbortedTxn]:
    """Every entry of the transaction index file at ``path``, read-only, from outside the log
    (a reader of a broker's directories: :mod:`pylogq.spark.splits`); [] when there is no such file.

    Opens the file read-only and writes nothing, unlike :class:`TransactionIndex`, which belongs to
    the log that owns the segment. The entries are those whole when the file was read: an append
    running meanwhile adds one the next read sees."""
    try:
        with open(path, "rb") as f:
            return parse_aborted_txns(f.read())
    except FileNotFoundError:
        return []


class TransactionIndex:
    """One segment's ``.txnindex`` file, created by its first append (Kafka's TransactionIndex).

    Invariant: the file holds ``entries`` whole entries, their last offsets
    strictly increasing from the segment's base offset. Changes (append,
    truncation, reset, rename, delete) come from one thread at a time (the
    log's lock); reads run in any thread without a lock, on the entries the
    index held when they started. The file is opened through the process's
    bounded cache of open files, so an index nobody reads holds no descriptor.
    """

    def __init__(self, path: str, start_offset: int) -> None:
        self.path = path
        self.start_offset = start_offset
        self.closed = False
        self._file = open_files().handle(self._open, self._closed_error)
        try:
            self._size = os.stat(path).st_size  # a partial last entry counts here, for sanity_check to see
        except FileNotFoundError:
            self._size = 0
        self._last_offset: Optional[int] = None
        whole = self._size - self._size % ABORTED_TXN_SIZE
        if whole:
            last = self._read(whole - ABORTED_TXN_SIZE, ABORTED_TXN_SIZE)
            if len(last) == ABORTED_TXN_SIZE:
                self._last_offset = ABORTED_TXN.unpack(last)[3]

    def _open(self) -> SharedFile:
        return SharedFile(self.path, "r+")  # never O_CREAT: only an append creates the file

    def _closed_error(self) -> Exception:
        return ValueError("the transaction index %s is closed" % self.path)

    # -- state ---------------------------------------------------------------------

    @property
    def entries(self) -> int:
        """Whole entries in the file."""
        return self._size // ABORTED_TXN_SIZE

    @property
    def size(self) -> int:
        """Bytes in the file (0 when there is none)."""
        return self._size

    @property
    def last_offset(self) -> Optional[int]:
        """The last offset of the last entry; None when there is none."""
        return self._last_offset

    def __len__(self) -> int:
        return self.entries

    # -- writing -------------------------------------------------------------------

    def append(self, txn: AbortedTxn) -> None:
        """Add an aborted transaction whose marker is in this segment, after every entry there.

        InvalidArgumentError when its last offset does not follow the last entry's (Kafka's
        rule); OSError as the file system says, with the index as it was."""
        if self._last_offset is not None and txn.last_offset <= self._last_offset:
            raise InvalidArgumentError(
                "the last offset of appended transactions must increase, but %d is not greater than the last "
                "offset %d of the transaction index %s" % (txn.last_offset, self._last_offset, self.path))
        file = self._writable()
        # At the end of the whole entries: a torn entry a crash left there is overwritten.
        position = self._size - self._size % ABORTED_TXN_SIZE
        data = txn.pack()
        written = 0
        while written < len(data):
            written += os.pwrite(file.fileno(), data[written:], position + written)
        self._size = position + len(data)
        self._last_offset = txn.last_offset

    def _writable(self) -> SharedFile:
        file = self._file.peek()
        if file is not None:
            return file
        if self._size == 0 and not os.path.exists(self.path):
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            return self._file.put(SharedFile(fd, "r+", closefd=True))
        return self._file.get()

    def truncate_to(self, offset: int) -> None:
        """Remove the entries whose marker is at ``offset`` or beyond (their segment was cut there)."""
        keep = 0
        last: Optional[int] = None
        for txn in self.all_aborted_txns():
            if txn.last_offset >= offset:
                break
            keep += ABORTED_TXN_SIZE
            last = txn.last_offset
        if keep < self._size:
            self._cut(keep)
            self._last_offset = last

    def reset(self) -> None:
        """Remove every entry (the segment is being recovered: its entries are written again)."""
        if self._size or os.path.exists(self.path):
            self._cut(0)
        self._last_offset = None

    def _cut(self, size: int) -> None:
        if os.path.exists(self.path):
            os.truncate(self.path, size)
        self._size = size

    def flush(self) -> None:
        """fsync the file, when there is one."""
        if self._size == 0 and self._file.peek() is None:
            return
        try:
            file = self._file.get()
        except FileNotFoundError:
            return
        os.fsync(file.fileno())

    def rename_to(self, path: str) -> None:
        """Rename the file (a suffix change of its segment); the path changes even without a file."""
        try:
            if os.path.exists(self.path):
                os.rename(self.path, path)
        finally:
            self.path = path

    def close(self) -> None:
        """Let go of the file (a reader holding it keeps it open until done)."""
        self.closed = True
        self._file.close()

    def delete(self) -> None:
        """Close and remove the file, if there is one."""
        self.close()
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass
        self._size = 0
        self._last_offset = None

    # -- reading -------------------------------------------------------------------

    def _read(self, position: int, size: int) -> bytes:
        if size <= 0:
            return b""
        file = self._file.get()
        return os.pread(file.fileno(), size, position)

    def all_aborted_txns(self) -> List[AbortedTxn]:
        """Every entry, in order (a partial last entry is not one)."""
        size = self._size
        return parse_aborted_txns(self._read(0, size - size % ABORTED_TXN_SIZE))

    def collect_aborted_txns(self, fetch_offset: int, upper_bound_offset: int) -> TxnIndexSearchResult:
        """The aborted transactions overlapping [``fetch_offset``, ``upper_bound_offset``), and whether
        the search is complete (Kafka's collectAbortedTxns): it is once an entry's last stable offset
        reaches ``upper_bound_offset``, so no transaction decided later overlaps the range."""
        found: List[AbortedTxn] = []
        for txn in self.all_aborted_txns():
            if txn.last_offset >= fetch_offset and txn.first_offset < upper_bound_offset:
                found.append(txn)
            if txn.last_stable_offset >= upper_bound_offset:
                return TxnIndexSearchResult(found, True)
        return TxnIndexSearchResult(found, False)

    def sanity_check(self, end_offset: Optional[int] = None) -> None:
        """Raise :class:`~pylogq.errors.CorruptIndexError` when the file breaks the index's rules.

        Kafka's check (no entry's last offset below the segment's base offset) and
        more, since a wrong entry would hide committed records from read_committed
        consumers or show them aborted ones: the file is whole entries, each of
        version 0, with a producer id, a first offset at or below its last, last
        offsets strictly increasing, a last stable offset no further than one past
        its marker; with ``end_offset`` (one past the segment's last offset), no
        marker at or past it (an entry the segment's truncation left behind).
        """
        size = self._size
        if size % ABORTED_TXN_SIZE:
            raise self._corrupt("the file is %d bytes, not a whole number of %d-byte entries (a torn append)"
                                % (size, ABORTED_TXN_SIZE))
        data = self._read(0, size)
        if len(data) != size:
            raise self._corrupt("the file holds %d bytes, %d were expected" % (len(data), size))
        previous: Optional[int] = None
        for i, (version, pid, first, last, lso) in enumerate(ABORTED_TXN.iter_unpack(data)):
            entry = "entry %d (producer %d, offsets %d..%d, last stable offset %d)" % (i, pid, first, last, lso)
            if version != CURRENT_VERSION:
                raise self._corrupt("%s has version %d; version %d is the only one" % (entry, version,
                                                                                        CURRENT_VERSION))
            if last < self.start_offset:
                raise self._corrupt("%s ends below the segment's base offset %d" % (entry, self.start_offset))
            if pid < 0 or first < 0 or first > last or lso < 0 or lso > last + 1:
                raise self._corrupt("%s is impossible" % entry)
            if previous is not None and last <= previous:
                raise self._corrupt("%s does not follow the previous entry's last offset %d" % (entry, previous))
            if end_offset is not None and last >= end_offset:
                raise self._corrupt("%s is past the segment's last offset %d" % (entry, end_offset - 1))
            previous = last

    def _corrupt(self, detail: str) -> CorruptIndexError:
        return CorruptIndexError("corrupt transaction index %s: %s" % (self.path, detail))

    def __repr__(self) -> str:
        return "TransactionIndex(%s, entries=%d)" % (self.path, self.entries)
