"""``pylogq dump-log``: print segment files the way Kafka's ``kafka-dump-log.sh`` does.

Files are told apart by suffix (a trailing ``.deleted``, ``.cleaned`` or
``.swap`` is looked through):

``.log``
    ``Dumping <file>``, ``Log starting offset: <base offset>``, then one line
    per batch in Kafka 3.x's ``DumpLogSegments`` format::

        baseOffset: 0 lastOffset: 2 count: 3 baseSequence: -1 lastSequence: -1 producerId: -1
        producerEpoch: -1 partitionLeaderEpoch: 0 isTransactional: false isControl: false
        deleteHorizonMs: OptionalLong.empty position: 0 CreateTime: 1700000000002 size: 100
        magic: 2 compresscodec: none crc: 3139461429 isvalid: true

    (one line), and for a legacy v0/v1 entry
    ``offset: 6 position: 214 CreateTime: 1700000000005 size: 42 magic: 1
    compresscodec: none crc: 123 isvalid: true``. With ``--deep-iteration``
    each record follows its batch (``| offset: 0 CreateTime: ... keySize: 1
    valueSize: 5 sequence: -1 headerKeys: []``); ``--print-data-log`` adds
    ``key: ... payload: ...`` (UTF-8, undecodable bytes replaced). Bytes after
    the last whole batch are reported as ``Found N invalid bytes at the end of
    <file>, starting at position P: <reason>``.
``.index`` / ``.timeindex``
    ``offset: O position: P`` / ``timestamp: T offset: O`` per entry, each
    checked against the ``.log`` next to it (an offset entry must point at the
    start of the batch holding its offset; a time entry must name the last
    offset of a batch whose max timestamp it holds); mismatches go to stderr
    in Kafka's words. ``--verify-index-only`` prints only the mismatches;
    ``--index-sanity-check`` only runs the index's full sanity check.
``.txnindex``
    ``version: 0 producerId: P firstOffset: F lastOffset: L lastStableOffset: S``
    per aborted transaction, as Kafka's tool prints them (the index options do
    not apply to it, as in Kafka); bytes after the last whole entry are reported.

The tool only reads: indexes are opened read-only, the log is walked with
storage's :class:`~pylogq.storage.segment.SegmentReader` (``pread`` of
whole batches in chunks of about 1 MB, so a segment of any size dumps in
constant memory), no lock is taken, so it is safe on the directory of a
running broker. An index of a segment that is still active is preallocated and
zero-filled past its last entry; as Kafka's tool does, the dump stops at the
first zero entry after entry 0, and the sanity check leaves out a tail of the
file that is all zeros (the entries before it are checked).

Exit status: 0 when every file was dumped (a dump that reports invalid bytes
or mismatches still did its job); 1 when a file is missing or unreadable
(``Error: cannot read ...`` on stderr), or a check asked for
(``--index-sanity-check``, ``--verify-index-only``) failed; 2 for usage errors.
A closed output (``| head``) ends the dump quietly: the ``pylogq`` command
handles it for every tool.
"""

from __future__ import annotations

import argparse
import bisect
import io
import os
import re
import stat
import struct
import sys
from typing import Any, Callable, Iterator, List, NamedTuple, Optional, TextIO, Tuple

from .. import records
from ..errors import CorruptIndexError, CorruptRecordError, DumpError
from ..records import codecs
from ..records.crc import crc32
from ..records.default_records import NO_SEQUENCE
from ..records.legacy import TIMESTAMP_TYPE_MASK as LEGACY_TIMESTAMP_TYPE_MASK
from ..records.legacy import iter_legacy_messages
from ..storage import index_search
from ..storage.index import OffsetIndex, TimeIndex
from ..storage.segment import (
    CLEANED_SUFFIX,
    DELETED_SUFFIX,
    INDEX_SUFFIX,
    LOG_SUFFIX,
    SWAP_SUFFIX,
    TIME_INDEX_SUFFIX,
    TXN_INDEX_SUFFIX,
    BatchHeader,
    SegmentReader,
    WalkStop,
)
from ..storage.segment import CORRUPT as STOP_CORRUPT
from ..storage.segment import END as STOP_END
from ..storage.segment import PARTIAL as STOP_PARTIAL
from ..storage.transaction_index import ABORTED_TXN, ABORTED_TXN_SIZE
from ._errors import report_error

__all__ = ["SUMMARY", "add_arguments", "build_parser", "run", "main"]

#: One line for ``--help``.
SUMMARY = "print segment files (.log, .index, .timeindex, .txnindex) as Kafka's kafka-dump-log.sh does"
#: Kafka's default for ``--max-bytes``: Integer.MAX_VALUE, "the whole file".
MAX_BYTES_DEFAULT = 2**31 - 1
RECORD_INDENT = "|"
#: The most bytes read at once to find out why the tail of a log is invalid.
_CONTROL_KEY = struct.Struct(">hh")
_END_TXN_VALUE = struct.Struct(">hi")
_ERROR_PREFIX = re.compile(r"^\[Error -?\d+\] [A-Z_]+: ")
_TIMESTAMP_TYPES = {0: "CreateTime", 1: "LogAppendTime"}
_CONTROL_TYPES = {0: "ABORT", 1: "COMMIT"}
_TRANSIT_SUFFIXES = (DELETED_SUFFIX, CLEANED_SUFFIX, SWAP_SUFFIX)
_OFFSET_ENTRY = index_search.OFFSET_ENTRY  # relative offset, position
_TIME_ENTRY = index_search.TIME_ENTRY  # timestamp, relative offset
# The rules index_search's disorder kernels check, by the code they return.
_OFFSET_RULES = {1: "the first offset is below the base offset", 2: "offsets not strictly increasing",
                 3: "the first position is negative", 4: "positions decrease"}
_TIME_RULES = {1: "timestamps not strictly increasing", 2: "the first offset is below the base offset",
               3: "offsets decrease"}


class _Options(NamedTuple):
    print_data_log: bool
    deep_iteration: bool
    index_sanity_check: bool
    verify_index_only: bool
    max_bytes: int


class _Entry(NamedTuple):
    """One whole entry of a log file: its header and its bytes."""

    header: BatchHeader
    data: bytes

    @property
    def position(self) -> int:
        return self.header.position


class _Report:
    """Where the dump writes: stdout for the dump, stderr for problems; remembers failures."""

    def __init__(self, out: TextIO, err: TextIO) -> None:
        self.out = out
        self.err = err
        self.failed = False

    def line(self, text: str) -> None:
        self.out.write(text + "\n")

    def problem(self, text: str) -> None:
        self.out.flush()
        self.err.write(text + "\n")
        self.err.flush()

    def error(self, text: str) -> None:
        """A file that could not be dumped: ``Error: <text>``, and the exit status is 1."""
        self.out.flush()
        report_error(self.err, text)
        self.err.flush()
        self.failed = True


# --------------------------------------------------------------------------- helpers


def _bool(value: bool) -> str:
    return "true" if value else "false"


def _reason(error: str, position: int) -> str:
    """A walker error without its error-code prefix, positioned in the file."""
    return _ERROR_PREFIX.sub("", error).replace("at byte 0", "at byte %d" % position)


def _text(data: Optional[bytes]) -> str:
    return data.decode("utf-8", errors="replace") if data is not None else ""


def _size(data: Optional[bytes]) -> int:
    return -1 if data is None else len(data)


def _codec_name(codec: int) -> str:
    return codecs.NAMES.get(codec, "unknown(%d)" % codec)


def _kind(path: str) -> str:
    """The file's kind by suffix: ``.log``, ``.index``, ``.timeindex``, ``.txnindex`` or ``""``."""
    name = os.path.basename(path)
    for suffix in _TRANSIT_SUFFIXES:
        if name.endswith(suffix):
            name = name[: -len(suffix)]
            break
    for suffix in (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX):
        if name.endswith(suffix):
            return suffix
    return ""


def _base_offset(path: str) -> int:
    """The base offset a segment file name starts with (Kafka takes the part before the first dot)."""
    stem = os.path.basename(path).split(".", 1)[0]
    if not stem.isdigit():
        raise DumpError("cannot dump %s: its name does not start with a base offset "
                        "(20 digits, e.g. 00000000000000000000%s)" % (path, _kind(path) or LOG_SUFFIX))
    return int(stem)


def _sibling(path: str, suffix: str) -> str:
    """The segment file next to ``path`` with ``suffix`` (and the same transit suffix, if any)."""
    directory, name = os.path.split(path)
    stem, _, rest = name.partition(".")
    transit = next((s for s in _TRANSIT_SUFFIXES if rest.endswith(s[1:])), "")
    return os.path.join(directory, stem + suffix + transit)


def _open_read(path: str) -> int:
    """A read-only descriptor of a regular file; DumpError with the OS's reason otherwise."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError as exc:
        raise DumpError("cannot read %s: %s" % (path, exc.strerror or exc)) from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise DumpError("cannot read %s: not a regular file" % path)
    return fd


# --------------------------------------------------------------------------- walking a log file


def _open_log(path: str) -> SegmentReader:
    """A read-only reader of a ``.log`` file; DumpError with the OS's reason otherwise."""
    return SegmentReader(io.FileIO(_open_read(path), "r"), close_file=True)


def _legacy_error(position: int, data: bytes) -> Optional[str]:
    """Why a legacy entry cannot be dumped (its fields do not fill it), or None; CRCs are reported per entry."""
    if data[16] >= 2:
        return None
    try:
        next(iter_legacy_messages(data, validate_crc=False, allow_partial=False))
    except CorruptRecordError as exc:
        return _reason("legacy message at byte 0: %s" % _ERROR_PREFIX.sub("", str(exc)), position)
    return None


class _Entries:
    """The whole entries of a log file from position 0 up to ``limit``, through the segment reader.

    The reader frames them (CRCs are reported per batch, not here); the dump
    also stops before a legacy message it cannot decode. After iteration,
    ``end`` is where the whole entries stop and ``error`` says why the bytes
    from there on are not an entry (None at the end of the data, or before a
    partial entry when ``partial_ok``).
    """

    def __init__(self, reader: SegmentReader, limit: int, partial_ok: bool) -> None:
        self.reader = reader
        self.limit = limit
        self.partial_ok = partial_ok
        self.end = 0
        self.error: Optional[str] = None

    def __iter__(self) -> Iterator[_Entry]:
        walk = self.reader.batches(0, self.limit)
        for batch in walk:
            data = bytes(batch.data)
            error = _legacy_error(batch.header.position, data)
            if error is not None:
                self.end, self.error = batch.header.position, error
                return
            yield _Entry(batch.header, data)
        stop = walk.stop
        assert stop is not None  # the walk ran to its end
        self.end = stop.position
        self.error = self._why(stop)

    def _why(self, stop: WalkStop) -> Optional[str]:
        if stop.reason == STOP_END or (stop.reason == STOP_PARTIAL and self.partial_ok):
            return None
        if stop.reason == STOP_PARTIAL:
            return "a partial batch: %s" % stop.detail
        if stop.reason == STOP_CORRUPT:
            return _reason(stop.detail or "", stop.position)
        return stop.detail  # the file shrank under the dump


# --------------------------------------------------------------------------- .log files


def _v2_batch_line(batch: "records.RecordBatch", position: int) -> str:
    horizon = "OptionalLong[%d]" % batch.base_timestamp if batch.has_delete_horizon else "OptionalLong.empty"
    return (
        "baseOffset: %d lastOffset: %d count: %d baseSequence: %d lastSequence: %d producerId: %d "
        "producerEpoch: %d partitionLeaderEpoch: %d isTransactional: %s isControl: %s deleteHorizonMs: %s"
        " position: %d %s: %d size: %d magic: %d compresscodec: %s crc: %d isvalid: %s" % (
            batch.base_offset, batch.last_offset, batch.records_count, batch.base_sequence, batch.last_sequence,
            batch.producer_id, batch.producer_epoch, batch.partition_leader_epoch, _bool(batch.is_transactional),
            _bool(batch.is_control_batch), horizon, position, _TIMESTAMP_TYPES[batch.timestamp_type],
            batch.max_timestamp, batch.size_in_bytes, batch.magic, _codec_name(batch.compression_type),
            batch.crc, _bool(batch.validate_crc()),
        )
    )


def _legacy_timestamp_type(magic: int, attributes: int) -> str:
    if magic == 0:
        return "NoTimestampType"
    return "LogAppendTime" if attributes & LEGACY_TIMESTAMP_TYPE_MASK else "CreateTime"


def _sequence(batch: "records.RecordBatch", offset: int) -> int:
    if batch.base_sequence < 0:
        return NO_SEQUENCE
    return (batch.base_sequence + offset - batch.base_offset) % 2**31


def _control_suffix(record: "records.Record") -> str:
    key = record.key or b""
    if len(key) < _CONTROL_KEY.size:
        return " controlType: UNKNOWN(-1)"
    _, type_id = _CONTROL_KEY.unpack_from(key)
    name = _CONTROL_TYPES.get(type_id)
    value = record.value or b""
    if name is None or len(value) < _END_TXN_VALUE.size:
        return " controlType: %s(%d)" % (name or "UNKNOWN", type_id)
    _, coordinator_epoch = _END_TXN_VALUE.unpack_from(value)
    return " endTxnMarker: %s coordinatorEpoch: %d" % (name, coordinator_epoch)


def _data_suffix(key: Optional[bytes], value: Optional[bytes]) -> str:
    out = ""
    if key is not None:
        out += " key: " + _text(key)
    if value is not None:
        out += " payload: " + _text(value)
    return out


class _OffsetTracker:
    """Kafka's check that offsets read in deep iteration follow one another."""

    def __init__(self) -> None:
        self.last = -1
        self.gaps: List[Tuple[int, int]] = []

    def see(self, offset: int) -> None:
        if self.last != -1 and offset != self.last + 1:
            self.gaps.append((self.last, offset))
        self.last = offset


def _dump_v2(entry: _Entry, opts: _Options, report: _Report, tracker: _OffsetTracker) -> None:
    batch = records.RecordBatch(entry.data, 0, check_crc=False)
    report.line(_v2_batch_line(batch, entry.position))
    if not opts.deep_iteration:
        return
    try:
        batch_records = batch.records()
    except CorruptRecordError as exc:
        report.line("%s cannot decode the records of the batch at position %d: %s"
                    % (RECORD_INDENT, entry.position, _reason(str(exc), entry.position)))
        return
    ts_name = _TIMESTAMP_TYPES[batch.timestamp_type]
    for record in batch_records:
        tracker.see(record.offset)
        text = "%s offset: %d %s: %d keySize: %d valueSize: %d sequence: %d headerKeys: [%s]" % (
            RECORD_INDENT, record.offset, ts_name, record.timestamp, _size(record.key), _size(record.value),
            _sequence(batch, record.offset), ",".join(k for k, _ in record.headers))
        if batch.is_control_batch:
            text += _control_suffix(record)
        elif opts.print_data_log:
            text += _data_suffix(record.key, record.value)
        report.line(text)


def _dump_legacy(entry: _Entry, opts: _Options, report: _Report, tracker: _OffsetTracker) -> None:
    data = entry.data
    message = next(iter_legacy_messages(data, validate_crc=False, allow_partial=False))
    valid = crc32(memoryview(data)[16:]) == message.crc
    ts_name = _legacy_timestamp_type(message.magic, message.attributes)
    report.line("offset: %d position: %d %s: %d size: %d magic: %d compresscodec: %s crc: %d isvalid: %s" % (
        message.offset, entry.position, ts_name, message.timestamp, len(data), message.magic,
        _codec_name(message.compression_type), message.crc, _bool(valid)))
    if not opts.deep_iteration:
        return
    try:
        try:
            inner = message.records(validate_crc=True)
            inner_valid = True
        except CorruptRecordError:
            inner = message.records(validate_crc=False)
            inner_valid = False
    except CorruptRecordError as exc:
        report.line("%s cannot decode the records of the entry at position %d: %s"
                    % (RECORD_INDENT, entry.position, _reason(str(exc), entry.position)))
        return
    for record in inner:
        tracker.see(record.offset)
        text = "%s offset: %d %s: %d keySize: %d valueSize: %d isValid: %s crc: %d" % (
            RECORD_INDENT, record.offset, ts_name, record.timestamp, _size(record.key), _size(record.value),
            _bool(inner_valid), record.checksum)
        if opts.print_data_log:
            text += _data_suffix(record.key, record.value)
        report.line(text)


def dump_log_file(path: str, opts: _Options, report: _Report) -> None:
    """Print every batch of a ``.log`` file (and its records with deep iteration)."""
    base = _base_offset(path)
    with _open_log(path) as reader:
        report.line("Log starting offset: %d" % base)
        limited = opts.max_bytes < MAX_BYTES_DEFAULT
        entries = _Entries(reader, min(reader.size, opts.max_bytes), partial_ok=limited)
        tracker = _OffsetTracker()
        for entry in entries:
            if entry.data[16] >= 2:
                _dump_v2(entry, opts, report, tracker)
            else:
                _dump_legacy(entry, opts, report, tracker)
        if entries.error is not None:
            report.line("Found %d invalid bytes at the end of %s, starting at position %d: %s" % (
                entries.limit - entries.end, os.path.basename(path), entries.end, entries.error))
    if tracker.gaps:
        report.problem("Non-consecutive offsets in %s" % os.path.abspath(path))
        for first, second in tracker.gaps:
            report.problem("  %d is followed by %d" % (first, second))


# --------------------------------------------------------------------------- index files


class _LogBatches:
    """The whole batches of the ``.log`` next to an index, for verifying its entries."""

    def __init__(self, path: str) -> None:
        with _open_log(path) as reader:
            headers = [entry.header for entry in _Entries(reader, reader.size, partial_ok=True)]
        self.by_position = {h.position: h for h in headers}
        self.headers = headers
        self.last_offsets = [h.last_offset for h in headers]

    def holding(self, offset: int):
        """The first batch whose last offset is >= ``offset``, or None."""
        i = bisect.bisect_left(self.last_offsets, offset)
        return self.headers[i] if i < len(self.headers) else None


def _open_index(factory: Callable[..., object], path: str, base: int):
    """``path`` opened read-only (the file is mapped, never changed)."""
    fd = _open_read(path)  # the missing/unreadable/not-a-file checks, with the OS's words
    os.close(fd)
    try:
        return factory(path, base, writable=False)
    except (OSError, ValueError) as exc:
        raise DumpError("cannot read %s: %s" % (path, getattr(exc, "strerror", None) or exc)) from None


def _sanity(index, path: str, report: _Report) -> None:
    try:
        index.sanity_check(full=True)
    except CorruptIndexError as exc:
        problem = _problem_before_zero_tail(index, path, str(exc))
        if problem is not None:
            report.line("%s failed sanity check: %s" % (path, problem))
            report.failed = True
            return
    report.line("%s passed sanity check." % path)


def _problem_before_zero_tail(index: Any, path: str, problem: str) -> Optional[str]:
    """The ``problem`` an index's sanity check found, seen past a zero-filled tail: ``problem``
    itself when the file has no such tail, else that of the entries before it (None: none).

    The index of a running broker's active segment is preallocated: its file is
    zeros past the last entry, and an index opened read-only counts them as
    entries (their offset is the base offset again). Kafka's tool stops at the
    first of them; the entries before are checked here by the same kernels the
    index's own check runs.
    """
    time_index = isinstance(index, TimeIndex)
    layout = _TIME_ENTRY if time_index else _OFFSET_ENTRY
    fd = _open_read(path)
    try:
        data = os.pread(fd, os.fstat(fd).st_size, 0)
    finally:
        os.close(fd)
    total, odd = divmod(len(data), layout.size)
    live = max(1, -(-len(data.rstrip(b"\0")) // layout.size))  # up to the last entry with a non-zero byte
    if odd or live >= total:
        return problem
    disorder = index_search.time_index_disorder if time_index else index_search.offset_index_disorder
    code, slot = disorder(data, live)
    if not code:
        return None
    base = index.base_offset

    def entry(i: int) -> str:
        first, second = layout.unpack_from(data, i * layout.size)
        return "timestamp: %d offset: %d" % (first, base + second) if time_index else \
            "offset: %d position: %d" % (base + first, second)

    rule = (_TIME_RULES if time_index else _OFFSET_RULES)[code]
    return "%s: entry %d is %s%s (the %d zero-filled entries after entry %d left out)" % (
        rule, slot, entry(slot), " after %s" % entry(slot - 1) if slot else "", total - live, live - 1)


def _live_entries(entries: List[Tuple[int, int]], base: int, offset_of: Callable[[Tuple[int, int]], int]):
    """The entries before the zero-filled tail of a preallocated index (Kafka's stopping rule)."""
    for i, entry in enumerate(entries):
        if i > 0 and offset_of(entry) == base:
            return
        yield entry


def _batches_for(path: str, report: _Report, required: bool) -> Optional[_LogBatches]:
    log_path = _sibling(path, LOG_SUFFIX)
    try:
        return _LogBatches(log_path)
    except DumpError as exc:
        if required:
            raise DumpError("cannot verify %s: %s" % (path, exc)) from None
        report.problem("not verifying %s against its log: %s" % (path, exc))
        return None


def _index_entries(cls: Any, path: str, base: int, opts: _Options,
                   report: _Report) -> Optional[List[Tuple[int, int]]]:
    """An index file's entries to dump; None when the sanity check was all that was asked
    for, or the index is empty (both reported here)."""
    index = _open_index(cls, path, base)
    try:
        if opts.index_sanity_check:
            _sanity(index, path, report)
            return None
        entries = index.all_entries()
    finally:
        index.close()
    if not entries:
        report.line("%s is empty." % path)
        return None
    return entries


def dump_offset_index(path: str, opts: _Options, report: _Report) -> None:
    """Print (or sanity-check, or verify) an ``.index`` file."""
    base = _base_offset(path)
    entries = _index_entries(OffsetIndex, path, base, opts, report)
    if entries is None:
        return
    batches = _batches_for(path, report, opts.verify_index_only)
    mismatches: List[Tuple[int, int]] = []
    for offset, position in _live_entries(entries, base, lambda e: e[0]):
        if batches is not None:
            header = batches.by_position.get(position)
            if header is None:
                mismatches.append((offset, -1))
            elif not (header.base_offset <= offset <= header.last_offset):
                mismatches.append((offset, header.last_offset))
        if not opts.verify_index_only:
            report.line("offset: %d position: %d" % (offset, position))
    if mismatches:
        report.problem("Index position mismatch: entries of %s do not point at the batch holding their offset"
                       % path)
        report.problem("Mismatches in :%s" % os.path.abspath(path))
        for index_offset, log_offset in mismatches:
            report.problem("  Index offset: %d, log offset: %d" % (index_offset, log_offset))
        if opts.verify_index_only:
            report.failed = True


def dump_time_index(path: str, opts: _Options, report: _Report) -> None:
    """Print (or sanity-check, or verify) a ``.timeindex`` file."""
    base = _base_offset(path)
    entries = _index_entries(TimeIndex, path, base, opts, report)
    if entries is None:
        return
    batches = _batches_for(path, report, opts.verify_index_only)
    not_found: List[Tuple[int, int]] = []
    wrong_ts: List[Tuple[int, int]] = []
    out_of_order: List[Tuple[int, int]] = []
    previous = -1
    for timestamp, offset in _live_entries(entries, base, lambda e: e[1]):
        if batches is not None:
            header = batches.holding(offset)
            if header is None or header.last_offset != offset:
                not_found.append((offset, -1 if header is None else header.last_offset))
            else:
                if header.max_timestamp != timestamp:
                    wrong_ts.append((timestamp, header.max_timestamp))
                if previous >= timestamp:
                    out_of_order.append((timestamp, previous))
        if not opts.verify_index_only:
            report.line("timestamp: %d offset: %d" % (timestamp, offset))
        previous = timestamp
    where = os.path.abspath(path)
    if wrong_ts:
        report.problem("Found timestamp mismatch in :%s" % where)
        for index_ts, log_ts in wrong_ts:
            report.problem("  Index timestamp: %d, log timestamp: %d" % (index_ts, log_ts))
    if out_of_order:
        report.problem("Found out of order timestamp in :%s" % where)
        for index_ts, prev_ts in out_of_order:
            report.problem("  Index timestamp: %d, Previously indexed timestamp: %d" % (index_ts, prev_ts))
    if not_found:
        report.problem("The following indexed offsets are not found in the log.")
        for index_offset, log_offset in not_found:
            report.problem("Indexed offset: %d, found log offset: %d" % (index_offset, log_offset))
    if opts.verify_index_only and (wrong_ts or out_of_order or not_found):
        report.failed = True


def dump_txn_index(path: str, opts: _Options, report: _Report) -> None:
    """Print a ``.txnindex`` file: each aborted transaction, as Kafka's DumpLogSegments."""
    fd = _open_read(path)
    try:
        size = os.fstat(fd).st_size
        data = os.pread(fd, size, 0)
    finally:
        os.close(fd)
    whole = len(data) - len(data) % ABORTED_TXN_SIZE
    for version, pid, first, last, lso in ABORTED_TXN.iter_unpack(data[:whole]):
        report.line("version: %d producerId: %d firstOffset: %d lastOffset: %d lastStableOffset: %d"
                    % (version, pid, first, last, lso))
    if whole != len(data):
        report.problem("Found %d bytes at the end of %s, fewer than a %d-byte entry"
                       % (len(data) - whole, os.path.abspath(path), ABORTED_TXN_SIZE))


# --------------------------------------------------------------------------- command line


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError("%r is not an integer" % text) from None
    if value <= 0:
        raise argparse.ArgumentTypeError("must be a positive number of bytes, got %d" % value)
    return value


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Kafka's DumpLogSegments options (the ones that do not decode application formats)."""
    parser.add_argument("--files", action="append", required=True, metavar="FILE[,FILE...]",
                        help="comma-separated .log, .index, .timeindex and .txnindex files to dump (may repeat)")
    parser.add_argument("--print-data-log", action="store_true",
                        help="print each record's key and payload (implies --deep-iteration)")
    parser.add_argument("--deep-iteration", action="store_true",
                        help="print each record of every batch, compressed or not")
    parser.add_argument("--index-sanity-check", action="store_true",
                        help="only check each index's integrity (full sanity check)")
    parser.add_argument("--verify-index-only", action="store_true",
                        help="only check index entries against the log and print mismatches")
    parser.add_argument("--max-bytes", type=_positive, default=MAX_BYTES_DEFAULT, metavar="N",
                        help="read at most N bytes of each .log file (default: the whole file)")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="pylogq dump-log", description=SUMMARY)
    add_arguments(parser)
    return parser


def run(args: argparse.Namespace, out: TextIO = sys.stdout, err: TextIO = sys.stderr) -> int:
    """Dump every file named by ``args``; -> the exit status (see the module docstring)."""
    opts = _Options(
        print_data_log=args.print_data_log,
        deep_iteration=args.deep_iteration or args.print_data_log,
        index_sanity_check=args.index_sanity_check,
        verify_index_only=args.verify_index_only,
        max_bytes=args.max_bytes,
    )
    report = _Report(out, err)
    files = [name.strip() for group in args.files for name in group.split(",") if name.strip()]
    if not files:
        report.problem("pylogq dump-log: --files names no file")
        return 2
    dumpers = {LOG_SUFFIX: dump_log_file, INDEX_SUFFIX: dump_offset_index, TIME_INDEX_SUFFIX: dump_time_index,
               TXN_INDEX_SUFFIX: dump_txn_index}
    for path in files:
        dumper = dumpers.get(_kind(path))
        if dumper is None:
            report.problem("Ignoring unknown file %s" % path)
            continue
        report.line("Dumping %s" % path)
        try:
            dumper(path, opts, report)
        except DumpError as exc:
            report.error(str(exc))
        except BrokenPipeError:
            raise  # the output's reader went away, not the file: the caller stops quietly
        except OSError as exc:
            report.error("cannot read %s: %s" % (path, exc.strerror or exc))
    out.flush()
    return 1 if report.failed else 0


def main(argv: Optional[List[str]] = None) -> int:
    return run(build_parser().parse_args(argv))
