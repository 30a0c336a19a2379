"""Splits of a topic for Spark: planned from a broker's log directories, read straight from segment files.

Spark schedules the reads; pylogq decides what each task reads and decodes it.
A :class:`Split` is one partition's offset range ``[start_offset, end_offset)``;
:func:`plan_splits` cuts every partition into splits of about
``max_split_bytes`` of segment files (whole segments, or ranges inside a big
segment found through its offset index), so a large partition is read by
many tasks, and every offset of the planned range belongs to exactly one
split. :func:`read_split` reads a split's segment files directly, with no
broker in the path, and yields Arrow record batches in the columns of Spark's
Kafka source (:data:`ARROW_SCHEMA`, :data:`SPARK_SCHEMA_DDL`).

Reads are safe beside a running broker: segment files are walked with
:class:`pylogq.storage.segment.SegmentReader` (read-only, stopping at the
valid prefix), nothing is ever written into a log directory, and no recovery
runs (so this module never uses :class:`pylogq.storage.log.Log`). The end of
every split is fixed at planning time, so a read returns the same records
however much the broker appends meanwhile. Records deleted by retention or
DeleteRecords between planning and reading are reported as
:class:`DataLossError`, or skipped with a :class:`DataLossWarning` when
``fail_on_data_loss=False`` (the option of Spark's Kafka source).

Transactions: a read is ``read_uncommitted`` (the default, as Spark's Kafka
source) or ``read_committed`` (Kafka's ``isolation.level``). A read_committed
plan ends each partition at its last stable offset instead of its high
watermark, and gives every split the aborted transactions overlapping its
range, from the segments' ``.txnindex`` files, as a broker's read_committed
Fetch does; the readers drop those transactions' batches with the rule of
Kafka's consumer. Control batches (transaction markers) are never rows.

pyarrow is imported on first use, so importing this module needs only numpy.
"""

from __future__ import annotations

import gc
import importlib
import json
import logging
import os
import re
import sys
import threading
import warnings
from dataclasses import dataclass, field
from typing import Any, Dict, Iterator, List, Mapping, NamedTuple, Optional, Sequence, Tuple, Union

import numpy as np

from ..errors import (
    CorruptRecordError,
    DataLossError,
    InvalidArgumentError,
    InvalidArgumentTypeError,
    OffsetOutOfRangeError,
    PylogqError,
    UnknownTopicOrPartitionError,
)
from ..records import RecordColumns, decode_columns, decode_headers, iter_batches
from ..records.default_records import CONTROL_MASK, ENTRY_MAGIC_OFFSET, TRANSACTIONAL_MASK
from ..records.default_records import HEADER_SIZE as HEADER_BYTES
from ..storage.checkpoint import LOG_START_OFFSET_CHECKPOINT, REPLICATION_CHECKPOINT, OffsetCheckpoint
from ..storage.index_file import read_offset_index, read_time_index
from ..storage.segment import CORRUPT, LOG_SUFFIX, SWAP_SUFFIX, SegmentReader, SegmentWalk, txn_index_path
from ..storage.transaction_index import read_aborted_txns
from .replicas import choose_replicas

__all__ = [
    "ARROW_SCHEMA",  # noqa: F822 - built on first access by the module __getattr__
    "COLUMNS",
    "SPARK_SCHEMA_DDL",
    "DEFAULT_MAX_SPLIT_BYTES",
    "OPEN_COST_BYTES",
    "DEFAULT_BATCH_ROWS",
    "EARLIEST",
    "LATEST",
    "ISOLATION_LEVELS",
    "READ_COMMITTED",
    "READ_UNCOMMITTED",
    "DataLossWarning",
    "Pushdown",
    "Split",
    "arrow_schema",
    "offset_for_time",
    "pack_splits",
    "parse_columns",
    "parse_isolation_level",
    "partition_bounds",
    "plan_splits",
    "read_split",
    "schema_ddl",
]

log = logging.getLogger("pylogq.spark")

#: Spark's Kafka source columns, in its order.
COLUMNS = ("key", "value", "topic", "partition", "offset", "timestamp", "timestampType", "headers")
_DDL = {
    "key": "key BINARY",
    "value": "value BINARY",
    "topic": "topic STRING",
    "partition": "partition INT",
    "offset": "offset BIGINT",
    "timestamp": "timestamp TIMESTAMP",
    "timestampType": "timestampType INT",
    "headers": "headers ARRAY<STRUCT<key: STRING, value: BINARY>>",
}
#: Spark's Kafka source columns, as a Spark DDL string.
SPARK_SCHEMA_DDL = ", ".join(_DDL[c] for c in COLUMNS)
#: Each column's type as Spark's ``DataType.simpleString()`` names it.
_SIMPLE_TYPES = {c: _DDL[c].split(" ", 1)[1].lower().replace(" ", "") for c in COLUMNS}
#: Columns that the batch headers give without reading the records (when a batch's offsets have no gaps).
_FROM_HEADERS = frozenset(("topic", "partition", "offset"))
#: The arrays of a RecordColumns, in its constructor's order.
_COLUMN_ARRAYS = RecordColumns.__slots__[2:]
#: A split holds about this many bytes of segment files (Spark's maxPartitionBytes).
DEFAULT_MAX_SPLIT_BYTES = 128 * 1024 * 1024
#: What starting one more split in a task costs, in bytes of reading (Spark's openCostInBytes).
OPEN_COST_BYTES = 4 * 1024 * 1024
#: Rows per Arrow record batch out of :func:`read_split`.
DEFAULT_BATCH_ROWS = 65536
#: Offset specs of Spark's Kafka source JSON: -2 is the earliest offset, -1 the latest.
EARLIEST = -2
LATEST = -1
#: Kafka's ``isolation.level`` values; the first is the default (Spark's Kafka source's too).
READ_UNCOMMITTED = "read_uncommitted"
READ_COMMITTED = "read_committed"
ISOLATION_LEVELS = (READ_UNCOMMITTED, READ_COMMITTED)

_MIN_CHUNK = 1 << 20
_MAX_CHUNK = 64 << 20
_OPEN_RETRIES = 100  # segments renamed between a listing and an open (compaction, retention)

OffsetSpec = Union[None, str, Mapping[Any, Any]]
#: An aborted transaction as a split carries it: (producer id, first offset, offset of its ABORT marker).
Aborted = Tuple[int, int, int]


class DataLossWarning(UserWarning):
    """Records of a split were deleted before they were read and were skipped (``fail_on_data_loss=False``)."""


@dataclass(frozen=True)
class Split:
    """One task's read: offsets ``[start_offset, end_offset)`` of one partition, from its directory.

    Plain fields only, so Spark can pickle it to executors. ``directory`` is
    the partition directory ``<log dir>/<topic>-<partition>``; it must be
    readable where the task runs (a shared or local filesystem).
    """

    topic: str
    partition: int
    directory: str
    start_offset: int
    end_offset: int
    #: About how many bytes of segment files the split spans (0: unknown); what
    #: :func:`pack_splits` weighs. Not part of the split's identity.
    size_bytes: int = field(default=0, compare=False)
    #: A read_committed split's aborted transactions overlapping its range, as (producer id,
    #: first offset, ABORT marker's offset), by first offset: the batches of each that lie in
    #: the range are not read (Kafka's consumer rule). Empty for read_uncommitted.
    aborted: Tuple[Aborted, ...] = ()


@dataclass(frozen=True)
class Pushdown:
    """What a query's filters allow, applied while planning and reading: exact, never approximate.

    ``partitions`` (None: all) and the offsets ``[min_offset, max_offset)``
    narrow the splits. The timestamps ``[min_timestamp, max_timestamp)``
    (milliseconds since the epoch, None: unbounded) move each partition's
    start to the first record at or after ``min_timestamp`` (found through
    the time and offset indexes, as Kafka's ListOffsets by time), so earlier
    segments are never read, and are applied to every row read as well
    (timestamps need not grow with offsets).
    """

    partitions: Optional[frozenset] = None
    min_offset: Optional[int] = None
    max_offset: Optional[int] = None
    min_timestamp: Optional[int] = None
    max_timestamp: Optional[int] = None

    @property
    def empty(self) -> bool:
        """Whether no row can pass."""
        return ((self.partitions is not None and not self.partitions)
                or (self.min_offset is not None and self.max_offset is not None and self.min_offset >= self.max_offset)
                or (self.min_timestamp is not None and self.max_timestamp is not None
                    and self.min_timestamp >= self.max_timestamp))

    @property
    def filters_rows(self) -> bool:
        """Whether rows are filtered by timestamp as they are read."""
        return self.min_timestamp is not None or self.max_timestamp is not None


def parse_columns(columns: Optional[Sequence[str]]) -> Tuple[str, ...]:
    """The columns of a read (a list, or comma-separated; None: all), checked: Spark's
    Kafka-source names, each once, at least one."""
    if columns is None:
        return COLUMNS
    if isinstance(columns, str):
        columns = [c.strip() for c in columns.split(",") if c.strip()]
    chosen = tuple(columns)
    unknown = [c for c in chosen if c not in _DDL]
    if unknown:
        raise InvalidArgumentError("unknown column(s) %s: the columns are %s"
                                   % (", ".join(map(repr, unknown)), ", ".join(COLUMNS)))
    if len(set(chosen)) != len(chosen):
        raise InvalidArgumentError("columns %r name a column twice" % (list(chosen),))
    if not chosen:
        raise InvalidArgumentError("columns must name at least one of %s" % ", ".join(COLUMNS))
    return chosen


def parse_isolation_level(value: Any) -> str:
    """An isolation level, checked as Kafka's consumer checks ``isolation.level``: ``read_uncommitted``
    or ``read_committed`` (None: the default, read_uncommitted)."""
    if value is None:
        return READ_UNCOMMITTED
    if value not in ISOLATION_LEVELS:
        raise InvalidArgumentError("Invalid value %r for configuration isolation.level: String must be one of: %s"
                                   % (value, ", ".join(ISOLATION_LEVELS)))
    return str(value)


def schema_ddl(columns: Optional[Sequence[str]] = None) -> str:
    """The Spark DDL of a read of ``columns`` (None: every column, :data:`SPARK_SCHEMA_DDL`)."""
    return ", ".join(_DDL[c] for c in parse_columns(columns))


# -- Arrow schema ------------------------------------------------------------------------------


def arrow_schema(columns: Optional[Sequence[str]] = None) -> Any:
    """The Arrow schema of :func:`read_split`'s batches of ``columns`` (None: all, :data:`ARROW_SCHEMA`)."""
    if columns is not None:
        full = arrow_schema()
        return _pyarrow().schema([full.field(c) for c in parse_columns(columns)])
    global _SCHEMA
    if _SCHEMA is None:
        pa = _pyarrow()
        header = pa.struct([pa.field("key", pa.string()), pa.field("value", pa.binary())])
        _SCHEMA = pa.schema([
            pa.field("key", pa.binary()),
            pa.field("value", pa.binary()),
            pa.field("topic", pa.string()),
            pa.field("partition", pa.int32()),
            pa.field("offset", pa.int64()),
            pa.field("timestamp", pa.timestamp("us", tz="UTC")),
            pa.field("timestampType", pa.int32()),
            # PySpark names a list's item field "element" and checks schemas field by field.
            pa.field("headers", pa.list_(pa.field("element", header))),
        ])
    return _SCHEMA


_SCHEMA: Any = None


def __getattr__(name: str) -> Any:
    # ARROW_SCHEMA is built on first access, so importing this module does not import pyarrow.
    if name == "ARROW_SCHEMA":
        return arrow_schema()
    raise AttributeError("module %r has no attribute %r" % (__name__, name))


def _pyarrow() -> Any:
    """The pyarrow module (imported by name: it ships no type information)."""
    try:
        return importlib.import_module("pyarrow")
    except ImportError as exc:  # pragma: no cover - pyarrow is installed with pylogq[spark]
        # The command of docs/spark.md: where pylogq is installed (editable too) it adds the
        # extra's packages only; a checkout not installed yet takes the extra with pylogq.
        raise ImportError("pylogq.spark needs pyarrow: pip install 'pylogq[spark]' (in a checkout where "
                          "pylogq is not installed yet: pip install -e '.[spark]') (%s)" % exc) from None


# -- files: log directories, segments, indexes, checkpoints ---------------------------------------


class _Segment(NamedTuple):
    base: int
    path: str  # the .log file (or .log.swap while a compaction swap is in flight)


def _source_dirs(source: Any) -> List[str]:
    """The log directories named by ``source``: a path, several comma-separated, or a list."""
    if isinstance(source, (str, os.PathLike)):
        text = os.fspath(source)
        items = [text] if os.path.isdir(text) or "," not in text else [s.strip() for s in text.split(",") if s.strip()]
    elif isinstance(source, (list, tuple)):
        items = [os.fspath(s) for s in source]
    else:
        raise InvalidArgumentTypeError("source must be a log directory path or a list of them, not %r" % (source,))
    if not items:
        raise InvalidArgumentError("source names no log directory")
    dirs = []
    for path in items:
        if not os.path.exists(path):
            raise PylogqError("log directory %s does not exist" % path)
        if not os.path.isdir(path):
            raise PylogqError("log directory %s is not a directory" % path)
        dirs.append(os.path.abspath(path))
    return dirs


_BOOTSTRAP = re.compile(r"[\w.-]+:\d+(,[\w.-]+:\d+)*\Z")


def _is_bootstrap(source: Any) -> bool:
    """Whether ``source`` is a bootstrap address ("host:port[,host:port]") rather than a path."""
    return isinstance(source, str) and not os.path.exists(source) and _BOOTSTRAP.match(source) is not None


def _broker_log_dirs(bootstrap_servers: str) -> List[str]:
    """The ``log.dirs`` a broker reports (DescribeConfigs on the broker resource)."""
    from ..client.tcp import TcpTransport

    transport = TcpTransport(bootstrap_servers)
    try:
        return transport.broker_log_dirs()
    finally:
        transport.close()


def _listdir(path: str, what: str) -> List[str]:
    try:
        return os.listdir(path)
    except FileNotFoundError:
        raise
    except OSError as exc:
        raise PylogqError("cannot read %s %s: %s" % (what, path, exc.strerror or exc)) from None


def _partition_dirs(dirs: Sequence[str], topic: str, bootstrap_servers: Any = None,
                    client_rack: Optional[str] = None) -> Dict[int, str]:
    """partition -> directory, for every ``<topic>-<n>`` directory in ``dirs``.

    A partition in the log directories of several brokers (a replicated
    topic) is read from one replica: see :mod:`pylogq.spark.replicas`.
    """
    if not isinstance(topic, str) or not topic:
        raise InvalidArgumentError("topic must be a non-empty string, not %r" % (topic,))
    pattern = re.compile(re.escape(topic) + r"-(\d+)\Z")
    candidates: Dict[int, List[str]] = {}
    for d in dirs:
        for name in _listdir(d, "log directory"):
            m = pattern.match(name)
            if m is None:
                continue
            full = os.path.join(d, name)
            if not os.path.isdir(full):
                continue
            candidates.setdefault(int(m.group(1)), []).append(full)
    found = choose_replicas(topic, candidates, _log_end, bootstrap_servers, client_rack)
    if not found:
        raise UnknownTopicOrPartitionError("topic %r has no partition directories in %s"
                                           % (topic, ", ".join(dirs)))
    _check_all_partitions(dirs, topic, found)
    return found


def _log_end(directory: str) -> int:
    """One past the last whole batch in a partition directory's files now (0 when it has none)."""
    try:
        segments = _list_segments(directory)
    except FileNotFoundError:
        return 0
    end = _segment_end(segments[-1]) if segments else None
    return end if end is not None else (segments[-1].base if segments else 0)


def _check_all_partitions(dirs: Sequence[str], topic: str, found: Mapping[int, str]) -> None:
    """With a pylogq broker's topic file at hand, every partition of the topic must be found."""
    for d in dirs:
        path = os.path.join(d, "pylogq-topics.json")
        try:
            with open(path) as f:
                meta = json.load(f).get("topics", {}).get(topic)
        except (OSError, ValueError, AttributeError):
            continue
        if not isinstance(meta, dict) or not isinstance(meta.get("partitions"), int):
            continue
        missing = sorted(set(range(meta["partitions"])) - set(found))
        if missing:
            raise PylogqError(
                "topic %s has %d partitions but no directory for partition(s) %s in %s: give every log "
                "directory of the broker" % (topic, meta["partitions"], ", ".join(map(str, missing)),
                                             ", ".join(dirs)))
        return


def _list_segments(directory: str) -> List[_Segment]:
    """The segments of a partition directory, by base offset (raises FileNotFoundError if it is gone).

    A ``.log.swap`` file (compaction output being swapped in) stands in for
    its base offset when the ``.log`` is already renamed away; ``.deleted``
    and ``.cleaned`` files are not part of the log.
    """
    segments: Dict[int, str] = {}
    swaps: Dict[int, str] = {}
    for name in _listdir(directory, "partition directory"):
        if name.endswith(LOG_SUFFIX):
            target = segments
        elif name.endswith(LOG_SUFFIX + SWAP_SUFFIX):
            target = swaps
        else:
            continue
        stem = name.split(".", 1)[0]
        if len(stem) == 20 and stem.isdigit():
            target[int(stem)] = os.path.join(directory, name)
    for base, path in swaps.items():
        segments.setdefault(base, path)
    return [_Segment(b, segments[b]) for b in sorted(segments)]


def _start_position(reader: SegmentReader, offsets: np.ndarray, positions: np.ndarray, target: int, size: int,
                    skip_older: bool = True) -> int:
    """Where to scan from for ``target``: the last index entry at or before it, checked against the log.

    An entry names the last offset of the batch at its position, so when that
    offset is below ``target`` the scan starts past the batch (``skip_older``),
    which a read starting mid-segment then never reads.
    """
    k = int(np.searchsorted(offsets, target, side="right")) - 1
    if k < 0:
        return 0
    header = reader.header_at(int(positions[k]), size)
    if header is None or header.last_offset != int(offsets[k]):
        return 0  # an index that does not match its log: scan the segment from its start
    if skip_older and header.last_offset < target:
        return header.position + header.size
    return int(positions[k])


def _end_position(reader: SegmentReader, offsets: np.ndarray, positions: np.ndarray, end: int, size: int) -> int:
    """A byte position past every batch holding an offset below ``end`` (the file size at worst)."""
    k = int(np.searchsorted(offsets, end, side="left"))
    if k >= len(offsets):
        return size
    header = reader.header_at(int(positions[k]), size)
    if header is None or header.last_offset != int(offsets[k]):
        return size
    return header.position + header.size  # the batch ending at offsets[k] >= end; later ones start past end


def _segment_end(segment: _Segment) -> Optional[int]:
    """One past the last offset of the segment's last whole batch on disk now; None when it has none."""
    try:
        reader = SegmentReader.open(segment.path)
    except FileNotFoundError:
        return None
    with reader:
        offsets, positions = read_offset_index(segment.path, segment.base, reader.size)
        position = _start_position(reader, offsets, positions, 2**62, reader.size, skip_older=False)
        last = None
        # The walk stops before a batch still being written, or a preallocated file's zero tail.
        walk = reader.headers(position)
        for header in walk:
            if header.last_offset < header.base_offset:
                break  # offsets that go backwards: no end to trust past here
            last = header.last_offset
        else:
            _check_stop(reader, walk, segment)
        return None if last is None else last + 1


def offset_for_time(directory: str, timestamp: int, start: int = 0, end: Optional[int] = None,
                    exact: bool = True) -> Optional[int]:
    """The first offset in ``[start, end)`` of a partition directory whose record's timestamp is at or
    after ``timestamp`` (milliseconds); None when there is none. Kafka's ListOffsets by time.

    Reads only what it must: a segment whose time index shows every record
    older is passed over after reading the batch headers past its last entry;
    in the segment that holds the answer, the walk starts at the last entry
    older than ``timestamp`` and decodes the one batch whose largest
    timestamp reaches it. v0 records (no timestamp: -1) are never at or after
    a timestamp >= 0. With ``exact=False`` the answer may be the first offset
    of the v2 batch holding that record, which is then not read past its
    header (for reads that filter their rows by timestamp anyway).
    """
    try:
        segments = _list_segments(directory)
    except FileNotFoundError:
        return None
    for i, segment in enumerate(segments):
        following = segments[i + 1].base if i + 1 < len(segments) else None
        if following is not None and following <= start:
            continue
        if end is not None and segment.base >= end:
            return None
        try:
            reader = SegmentReader.open(segment.path)
        except FileNotFoundError:
            continue  # removed by retention or a compaction swap since the listing
        with reader:
            found = _segment_offset_for_time(reader, segment, following, timestamp, start, end, exact)
        if found is not None:
            return None if found < 0 else found
    return None


def _segment_offset_for_time(reader: SegmentReader, segment: _Segment, following: Optional[int], timestamp: int,
                             start: int, end: Optional[int], exact: bool = True) -> Optional[int]:
    """:func:`offset_for_time` in one segment: the offset, None to go on to the next segment, -1 when
    the range ends here with no record at or after ``timestamp``."""
    size = reader.size
    times, time_offsets = read_time_index(segment.path, segment.base, None if following is None else following - 1)
    k = int(np.searchsorted(times, timestamp, side="left")) - 1  # the last entry older than the target
    scan_from = start if k < 0 else max(start, int(time_offsets[k]) + 1)
    offsets, positions = read_offset_index(segment.path, segment.base, size)
    position = _start_position(reader, offsets, positions, scan_from, size)
    for header in reader.headers(position):
        if header.last_offset < scan_from:
            continue
        if end is not None and header.magic == 2 and header.base_offset >= end:
            return -1
        if header.max_timestamp < timestamp:
            continue
        if header.magic == 2 and header.attributes & CONTROL_MASK:  # a control batch: no data records
            continue
        if not exact and header.magic == 2:
            return max(header.base_offset, scan_from)
        data = reader.read(header.position, header.size)
        columns = decode_columns(data, check_crc=True, skip_control=True, start_offset=scan_from, end_offset=end)
        hits = np.flatnonzero(columns.timestamps >= timestamp)
        if hits.size:
            return int(columns.offsets[hits[0]])
    return None


def _checkpointed(directory: str, name: str, topic: str, partition: int) -> Optional[int]:
    """The partition's entry in a checkpoint file of its log directory (None when absent)."""
    path = os.path.join(os.path.dirname(directory), name)
    return OffsetCheckpoint(path).read().get((topic, partition))


def _log_start(directory: str, segments: Sequence[_Segment], topic: str, partition: int) -> int:
    """The first readable offset: the first segment's base, or the checkpointed log start past it."""
    first = segments[0].base if segments else 0
    checkpointed = _checkpointed(directory, LOG_START_OFFSET_CHECKPOINT, topic, partition)
    return max(first, checkpointed or 0)


# -- planning ------------------------------------------------------------------------------------


def partition_bounds(source: Any, topic: str, bootstrap_servers: Any = None,
                     client_rack: Optional[str] = None,
                     isolation_level: str = READ_UNCOMMITTED) -> Dict[int, Tuple[int, int, str]]:
    """Per partition of ``topic``: (log start offset, committed end offset, partition directory).

    ``source`` is a log directory, several (a list, or comma-separated), of a
    broker (pylogq's or Kafka's layout). The log start is the first
    segment's base offset, or the ``log-start-offset-checkpoint`` entry when
    that is later (DeleteRecords). The committed end ("latest") is:

    - with ``bootstrap_servers``, the broker's high watermark (ListOffsets
      latest over TCP), and the log start is the broker's when later; the
      files must hold every record below it;
    - from files alone, the end of the last whole batch on disk at planning
      time (with one replica every appended batch is committed), capped by
      the ``replication-offset-checkpoint`` when the directory has one (the
      broker's checkpointed high watermarks, which pylogq's broker and Kafka's
      write every ``replica.high.watermark.checkpoint.interval.ms`` and at
      shutdown, so on a live broker it may lag by that interval).

    With the log directories of several brokers of a cluster (a replicated
    topic), each partition is read from one replica's directory: an ISR
    member with ``bootstrap_servers``, else the replica with the highest
    checkpointed high watermark, which then bounds the read
    (:mod:`pylogq.spark.replicas`). ``client_rack`` (with ``bootstrap_servers``)
    prefers an ISR member on a broker of that rack, as a consumer's
    ``client.rack`` does (KIP-392).

    With ``isolation_level="read_committed"`` the end is the last stable
    offset instead: below it every transaction is decided. With
    ``bootstrap_servers`` the broker's (ListOffsets latest, read_committed);
    from files alone, the first offset of the oldest transaction still open
    at the committed end found above, by a walk over the batch headers of
    the partition's segments below that end (:func:`_last_stable_offset`).

    Raises UnknownTopicOrPartitionError for a topic with no partition
    directory, PylogqError naming the path for a missing or unreadable
    directory.
    """
    if _is_bootstrap(source):
        # A broker's address: read the files of its log directories (which must be
        # reachable from here), bounded by its high watermarks.
        bootstrap_servers = bootstrap_servers or source
        source = _broker_log_dirs(source)
    dirs = _source_dirs(source)
    found = _partition_dirs(dirs, topic, bootstrap_servers, client_rack)
    isolation_level = parse_isolation_level(isolation_level)
    remote: Dict[int, Tuple[int, int]] = {}
    if bootstrap_servers:
        remote = _broker_offsets(bootstrap_servers, topic, sorted(found), isolation_level)
    out: Dict[int, Tuple[int, int, str]] = {}
    for p, directory in sorted(found.items()):
        try:
            segments = _list_segments(directory)
        except FileNotFoundError:
            raise PylogqError("partition directory %s disappeared while planning (topic deleted?)"
                              % directory) from None
        start = _log_start(directory, segments, topic, p)
        disk_end = _segment_end(segments[-1]) if segments else None
        if disk_end is None:
            disk_end = segments[-1].base if segments else start
        if p in remote:
            remote_start, end = remote[p]
            if end > disk_end:
                raise PylogqError(
                    "the broker at %s has %s-%d up to offset %d but %s holds records only up to %d: "
                    "source must be that broker's log directories" % (bootstrap_servers, topic, p, end,
                                                                       directory, disk_end))
            start = max(start, remote_start)
        else:
            end = disk_end
            replicated = _checkpointed(directory, REPLICATION_CHECKPOINT, topic, p)
            if replicated is not None:
                end = min(end, replicated)
            if isolation_level == READ_COMMITTED:
                end = max(_last_stable_offset(directory, segments, end), start) if end > start else end
        out[p] = (min(start, end), end, directory)
    return out


def _broker_offsets(bootstrap_servers: Any, topic: str, partitions: Sequence[int],
                    isolation_level: str = READ_UNCOMMITTED) -> Dict[int, Tuple[int, int]]:
    """(log start, end) per partition, asked of a running broker: the end is the high watermark,
    or for read_committed the last stable offset (ListOffsets latest with that isolation level)."""
    from ..client.consumer import Consumer, TopicPartition

    consumer = Consumer(bootstrap_servers=bootstrap_servers, enable_auto_commit=False,
                        isolation_level=isolation_level)
    try:
        known = consumer.partitions_for_topic(topic)
        if known is None:
            raise UnknownTopicOrPartitionError("topic %r does not exist on the broker at %s"
                                               % (topic, bootstrap_servers))
        tps = [TopicPartition(topic, p) for p in partitions if p in known]
        starts = consumer.beginning_offsets(tps)
        ends = consumer.end_offsets(tps)
    finally:
        consumer.close(autocommit=False)
    return {tp.partition: (starts[tp], ends[tp]) for tp in tps}


class _TxnWalk(NamedTuple):
    """Where a walk over a partition's batch headers for its open transactions stopped."""

    offset: int  # every batch starting below it was walked
    segment: int  # the base offset of the segment the walk stopped in
    file: Tuple[int, int]  # that segment file's (device, inode): a compaction swap is another file
    position: int  # the byte position of the first batch not walked in it
    open_txns: Tuple[Tuple[int, int], ...]  # (producer id, first offset) of each transaction open at ``offset``


#: The last walk of each partition directory (this process's plans: a stream's driver plans every
#: micro-batch): the next walk goes on from it. At most _TXN_WALKS directories, the oldest dropped.
_txn_walks: Dict[str, _TxnWalk] = {}
_TXN_WALKS = 4096
_txn_walks_lock = threading.Lock()


def _last_stable_offset(directory: str, segments: Sequence[_Segment], end: int) -> int:
    """The last stable offset of a partition whose committed end is ``end``, from its files: the
    first offset of the oldest transaction still open at ``end`` (``end`` when none is).

    pylogq writes no producer-state snapshots (a partition's broker rebuilds its transactions
    from the log's batch headers when it opens it), so neither can this: the batch headers below
    ``end`` are walked, one 61-byte read each, no record. A transactional batch opens its
    producer's transaction at its base offset unless one is open; a control batch (its COMMIT
    or ABORT marker) below ``end`` closes it. A marker at or past ``end`` is not committed yet,
    so its transaction stays open, as the broker keeps it unstable until the high watermark
    passes its marker. A transaction whose first batches retention deleted opens at the first
    one left: the offsets below belong to other, decided transactions or to none.

    The walk goes on from where this process's last walk of the directory stopped, when that
    segment file is still there and the end has not gone back: a log only grows at its end,
    and what retention or compaction removes below the last stable offset holds no open
    transaction. So a stream's micro-batches each walk only the batches appended since.
    Thread-safe.
    """
    with _txn_walks_lock:
        last = _txn_walks.get(directory)
    open_txns: Dict[int, int] = {}
    k, position = 0, 0
    if last is not None and last.offset <= end:
        for i, segment in enumerate(segments):
            if segment.base == last.segment:
                try:
                    stat = os.stat(segment.path)
                except FileNotFoundError:
                    break
                if (stat.st_dev, stat.st_ino) == last.file:
                    k, position, open_txns = i, last.position, dict(last.open_txns)
                break
    walked: Optional[_TxnWalk] = None
    for segment in segments[k:]:
        if segment.base >= end:
            break
        try:
            reader = SegmentReader.open(segment.path)
        except FileNotFoundError:
            position = 0
            continue  # deleted by retention since the listing: none of its batches is read
        with reader:
            stat = os.fstat(reader.file.fileno())
            stop = position
            for header in reader.headers(position):
                if header.base_offset >= end and header.magic == 2:
                    break
                stop = header.position + header.size
                if header.magic != 2 or header.producer_id < 0:
                    continue  # (v0/v1 messages have no producer)
                if header.attributes & CONTROL_MASK:
                    open_txns.pop(header.producer_id, None)
                elif header.attributes & TRANSACTIONAL_MASK:
                    open_txns.setdefault(header.producer_id, header.base_offset)
            walked = _TxnWalk(end, segment.base, (stat.st_dev, stat.st_ino), stop, tuple(open_txns.items()))
        position = 0
    if walked is not None:
        with _txn_walks_lock:
            _txn_walks.pop(directory, None)
            _txn_walks[directory] = walked
            while len(_txn_walks) > _TXN_WALKS:
                del _txn_walks[next(iter(_txn_walks))]
    return min(min(open_txns.values()), end) if open_txns else end


def _aborted_transactions(directory: str, start: int, end: int) -> List[Aborted]:
    """The aborted transactions with records in ``[start, end)`` of a partition directory, by first
    offset, from its segments' ``.txnindex`` files (Kafka's collectAbortedTransactions).

    An aborted transaction's entry is in the index of the segment holding its ABORT marker,
    at or after ``start`` when it overlaps the range; the walk goes from the segment holding
    ``start`` and ends at the first entry whose last stable offset reaches ``end`` (every
    transaction overlapping the range was decided by then). Costs one listing and a read of
    each index file that exists (most segments have none)."""
    try:
        segments = _list_segments(directory)
    except FileNotFoundError:
        return []
    k = max(_segment_for(segments, start), 0)
    found: List[Aborted] = []
    for segment in segments[k:]:
        complete = False
        for txn in read_aborted_txns(txn_index_path(segment.path)):
            if txn.last_offset >= start and txn.first_offset < end:
                found.append((txn.producer_id, txn.first_offset, txn.last_offset))
            if txn.last_stable_offset >= end:
                complete = True
                break
        if complete:
            break
    found.sort(key=lambda t: (t[1], t[0]))
    return found


def plan_splits(
    source: Any,
    topic: str,
    starting_offsets: OffsetSpec = "earliest",
    ending_offsets: OffsetSpec = "latest",
    max_split_bytes: int = DEFAULT_MAX_SPLIT_BYTES,
    bootstrap_servers: Any = None,
    starting_timestamp: Optional[int] = None,
    ending_timestamp: Optional[int] = None,
    timestamp_strategy: str = "error",
    pushdown: Optional[Pushdown] = None,
    client_rack: Optional[str] = None,
    isolation_level: str = READ_UNCOMMITTED,
) -> List[Split]:
    """The splits that read ``topic`` from ``starting_offsets`` up to ``ending_offsets``.

    Offsets take the forms of Spark's Kafka source: ``"earliest"``,
    ``"latest"``, a dict ``{partition: offset}`` (or ``{topic: {partition:
    offset}}``), or its JSON string ``'{"topic": {"0": 23, "1": -2}}'`` where
    -2 is earliest and -1 latest; a partition left out starts at the earliest
    offset and ends at the latest. "latest" is the committed end of
    :func:`partition_bounds`, fixed now: records appended later are not read.
    An offset outside [log start, committed end] raises OffsetOutOfRangeError
    naming the partition and the valid range.

    Splits come in partition order, then offset order; partitions with
    nothing to read get none. A partition over ``max_split_bytes`` of segment
    files is cut at segment boundaries, or inside a segment larger than
    ``max_split_bytes`` at offset index entries, into splits of at most about
    ``max_split_bytes`` each.

    ``starting_timestamp`` and ``ending_timestamp`` (milliseconds since the
    epoch; Spark's Kafka-source options ``startingTimestamp`` and
    ``endingTimestamp``) take precedence over the offsets: each partition
    starts, or ends, at its first record with a timestamp at or after the
    given one (Kafka's ListOffsets by time, through the segments' time and
    offset indexes). A partition with no such record ends at its latest
    offset; for a start, ``timestamp_strategy`` says what happens: "error"
    (Spark's default) raises OffsetOutOfRangeError, "latest" starts at the
    latest offset (nothing to read). A :class:`Pushdown` narrows the splits
    further (filters on partition, offset and timestamp). ``client_rack``: see
    :func:`partition_bounds`.

    ``isolation_level`` (Kafka's ``isolation.level``): ``"read_uncommitted"``
    (the default) reads every data record; ``"read_committed"`` makes
    "latest" each partition's last stable offset (an offset past it is out of
    range) and gives each split the aborted transactions overlapping it
    (:attr:`Split.aborted`), whose records :func:`read_split` drops.
    """
    if isinstance(max_split_bytes, bool) or not isinstance(max_split_bytes, int) or max_split_bytes < 1:
        raise InvalidArgumentError("max_split_bytes must be an int >= 1, not %r" % (max_split_bytes,))
    if timestamp_strategy not in ("error", "latest"):
        raise InvalidArgumentError("timestamp_strategy must be 'error' or 'latest', not %r" % (timestamp_strategy,))
    for name, ts in (("starting_timestamp", starting_timestamp), ("ending_timestamp", ending_timestamp)):
        if ts is not None and (isinstance(ts, bool) or not isinstance(ts, int)):
            raise InvalidArgumentError("%s must be milliseconds since the epoch (an int), not %r" % (name, ts))
    isolation_level = parse_isolation_level(isolation_level)
    bounds = partition_bounds(source, topic, bootstrap_servers=bootstrap_servers, client_rack=client_rack,
                              isolation_level=isolation_level)
    starts = _resolve(starting_offsets, "starting_offsets", topic, bounds, EARLIEST)
    ends = _resolve(ending_offsets, "ending_offsets", topic, bounds, LATEST)
    for p, (low, high, directory) in bounds.items():
        if starting_timestamp is not None:
            found = offset_for_time(directory, starting_timestamp, low, high)
            if found is None and timestamp_strategy == "error":
                raise OffsetOutOfRangeError(
                    "starting_timestamp %d: %s-%d has no record at or after it (its offsets are %d..%d); "
                    "timestamp_strategy='latest' (startingOffsetsByTimestampStrategy) starts such partitions "
                    "at the latest offset" % (starting_timestamp, topic, p, low, high))
            starts[p] = high if found is None else found
        if ending_timestamp is not None:
            found = offset_for_time(directory, ending_timestamp, low, high)
            ends[p] = high if found is None else found
    splits: List[Split] = []
    if pushdown is not None and pushdown.empty:
        return splits
    for p, (_, _, directory) in sorted(bounds.items()):
        start, end = starts[p], ends[p]
        if start > end:
            raise OffsetOutOfRangeError("%s-%d: starting offset %d is past ending offset %d" % (topic, p, start, end))
        if pushdown is not None:
            if pushdown.partitions is not None and p not in pushdown.partitions:
                continue
            if pushdown.min_offset is not None:
                start = max(start, pushdown.min_offset)
            if pushdown.max_offset is not None:
                end = min(end, pushdown.max_offset)
            if start < end and pushdown.min_timestamp is not None:
                found = offset_for_time(directory, pushdown.min_timestamp, start, end, exact=False)
                start = end if found is None else found
        if start >= end:
            continue
        cuts, sizes = _cut_points(directory, start, end, max_split_bytes)
        edges = [start] + cuts + [end]
        aborted = _aborted_transactions(directory, start, end) if isolation_level == READ_COMMITTED else []
        for a, b, size in zip(edges, edges[1:], sizes):
            overlapping = tuple(t for t in aborted if t[2] >= a and t[1] < b)
            splits.append(Split(topic, p, directory, a, b, size, overlapping))
    return splits


def _resolve(spec: OffsetSpec, name: str, topic: str, bounds: Mapping[int, Tuple[int, int, str]],
             default: int) -> Dict[int, int]:
    """An offsets option -> an absolute offset per partition, checked against the partition's range."""
    if spec is None:
        spec = "earliest" if default == EARLIEST else "latest"
    per_partition: Dict[int, Any] = {}
    if isinstance(spec, str):
        text = spec.strip()
        if text.lower() in ("earliest", "latest"):
            per_partition = {p: text.lower() for p in bounds}
        elif text.startswith("{"):
            try:
                parsed = json.loads(text)
            except ValueError as exc:
                raise InvalidArgumentError("%s is not valid JSON: %s (%r)" % (name, exc, spec)) from None
            per_partition = _partition_map(parsed, name, topic)
        else:
            raise InvalidArgumentError("%s must be 'earliest', 'latest', a dict or a JSON object like "
                                       "'{\"%s\": {\"0\": 23}}', not %r" % (name, topic, spec))
    elif isinstance(spec, Mapping):
        per_partition = _partition_map(spec, name, topic)
    else:
        raise InvalidArgumentTypeError("%s must be 'earliest', 'latest', a dict or a JSON string, not %r"
                                       % (name, spec))
    unknown = sorted(set(per_partition) - set(bounds))
    if unknown:
        raise UnknownTopicOrPartitionError("%s names partition(s) %s of %s, which has partitions %s"
                                           % (name, ", ".join(map(str, unknown)), topic,
                                              ", ".join(map(str, sorted(bounds)))))
    out: Dict[int, int] = {}
    for p, (low, high, _) in bounds.items():
        value = per_partition.get(p, default)
        if isinstance(value, str):
            value = {"earliest": EARLIEST, "latest": LATEST}.get(value.strip().lower(), value)
        if isinstance(value, bool) or not isinstance(value, int):
            raise InvalidArgumentError("%s for %s-%d must be an offset, -2 (earliest) or -1 (latest), not %r"
                                       % (name, topic, p, value))
        if value == EARLIEST:
            value = low
        elif value == LATEST:
            value = high
        elif value < 0:
            raise InvalidArgumentError("%s for %s-%d is %d: an offset is >= 0, or -2 (earliest), -1 (latest)"
                                       % (name, topic, p, value))
        if not low <= value <= high:
            raise OffsetOutOfRangeError(
                "%s for %s-%d is %d, out of range: valid offsets are %d..%d (log start .. committed end)"
                % (name, topic, p, value, low, high))
        out[p] = value
    return out


def _partition_map(spec: Mapping[Any, Any], name: str, topic: str) -> Dict[int, Any]:
    """{partition: offset} from ``{partition: offset}`` or ``{topic: {partition: offset}}``."""
    if not isinstance(spec, Mapping):
        raise InvalidArgumentError("%s must be a JSON object, not %r" % (name, spec))
    if any(isinstance(v, Mapping) for v in spec.values()):
        others = sorted(str(k) for k in spec if k != topic)
        if others:
            raise InvalidArgumentError("%s names topic(s) %s; this read is of topic %s"
                                       % (name, ", ".join(others), topic))
        spec = spec.get(topic, {})
    out: Dict[int, Any] = {}
    for key, value in spec.items():
        if isinstance(key, bool):
            raise InvalidArgumentError("%s: %r is not a partition number" % (name, key))
        if isinstance(key, int):
            p = key
        elif isinstance(key, str) and key.strip().isdigit():
            p = int(key)
        else:
            raise InvalidArgumentError("%s: %r is not a partition number" % (name, key))
        out[p] = value
    return out


def _cut_points(directory: str, start: int, end: int, max_bytes: int) -> Tuple[List[int], List[int]]:
    """Offsets strictly inside (start, end) that cut the range into pieces of about ``max_bytes``,
    and the bytes of segment files each piece spans (one more than the cuts; 0 when unknown).

    Candidates are segment base offsets and, inside segments larger than
    ``max_bytes``, the offset after each index entry (the start of the next
    batch); each has its byte position in the concatenated segment files.
    A piece takes the furthest candidate within ``max_bytes`` of its start
    (or the nearest one past it when there is none).
    """
    try:
        segments = _list_segments(directory)
    except FileNotFoundError:
        return [], [0]
    cand_off: List[np.ndarray] = []
    cand_pos: List[np.ndarray] = []
    total = 0
    for seg in segments:
        try:
            size = os.stat(seg.path).st_size
        except FileNotFoundError:
            continue
        cand_off.append(np.array([seg.base], np.int64))
        cand_pos.append(np.array([total], np.int64))
        if size > max_bytes:
            offsets, positions = read_offset_index(seg.path, seg.base, size)
            cand_off.append(offsets + 1)
            cand_pos.append(positions + total)
        total += size
    if not cand_off:
        return [], [0]
    off = np.concatenate(cand_off)
    pos = np.concatenate(cand_pos)
    order = np.argsort(off, kind="stable")
    off, pos = off[order], pos[order]
    off, first = np.unique(off, return_index=True)
    pos = np.maximum.accumulate(pos[first])
    k = int(np.searchsorted(off, start, side="right")) - 1
    last = int(pos[k]) if k >= 0 else 0
    # An index candidate's position is the start of the batch holding the offset before it, so the first
    # candidate past ``end`` bounds the bytes of the offsets below ``end``.
    k = int(np.searchsorted(off, end, side="right"))
    end_pos = int(pos[k]) if k < len(off) else total
    inside = (off > start) & (off < end)
    off, pos = off[inside], pos[inside]
    cuts: List[int] = []
    sizes: List[int] = []
    i, n = 0, len(off)
    while i < n and end_pos - last > max_bytes:
        j = max(int(np.searchsorted(pos, last + max_bytes, side="right")) - 1, i)
        while j < n and pos[j] <= last:
            j += 1
        if j >= n:
            break
        cuts.append(int(off[j]))
        sizes.append(int(pos[j]) - last)
        last = int(pos[j])
        i = j + 1
    sizes.append(max(end_pos - last, 0))
    return cuts, sizes


def pack_splits(splits: Sequence[Split], parallelism: int, max_bytes: int = DEFAULT_MAX_SPLIT_BYTES,
                open_cost: int = OPEN_COST_BYTES) -> List[List[Split]]:
    """The splits grouped into tasks, the way Spark's file sources pack files into partitions.

    Each split weighs its ``size_bytes`` plus ``open_cost`` (what starting
    one more read costs, Spark's ``spark.sql.files.openCostInBytes``). A task
    takes splits in planning order until the next would take it past
    ``min(max_bytes, max(open_cost, total weight / parallelism))``. So a read
    of a few small partitions becomes about ``parallelism`` tasks, one wave
    over the cores instead of one task per partition (every Python task has a
    fixed cost in Spark), while a large read keeps tasks of at most about
    ``max_bytes`` for retries and balance. Planning order keeps a partition's
    neighbouring splits in the same task.
    """
    if isinstance(parallelism, bool) or not isinstance(parallelism, int) or parallelism < 1:
        raise InvalidArgumentError("parallelism must be an int >= 1, not %r" % (parallelism,))
    if not splits:
        return []
    total = sum(s.size_bytes + open_cost for s in splits)
    target = min(max_bytes, max(open_cost, -(-total // parallelism)))
    tasks: List[List[Split]] = []
    current: List[Split] = []
    weight = 0
    for split in splits:
        if current and weight + split.size_bytes > target:
            tasks.append(current)
            current, weight = [], 0
        current.append(split)
        weight += split.size_bytes + open_cost
    tasks.append(current)
    return tasks


# -- reading -----------------------------------------------------------------------------------------


def read_split(split: Split, fail_on_data_loss: bool = True, batch_rows: int = DEFAULT_BATCH_ROWS,
               columns: Optional[Sequence[str]] = None, pushdown: Optional[Pushdown] = None) -> Iterator[Any]:
    """Yield the split's records as pyarrow RecordBatches of at most ``batch_rows`` rows (:data:`ARROW_SCHEMA`).

    Reads the segment files of ``split.directory`` read-only with the
    columnar decoder: v0, v1 and v2 entries, every codec, offset gaps of
    compacted logs; control batches (transaction markers) are skipped.
    Columns are Spark's Kafka source's: ``timestamp`` is the record's
    milliseconds as microseconds UTC; ``timestampType`` is 0 CreateTime, 1
    LogAppendTime, -1 for v0 records (which have no timestamp: -1 ms);
    ``headers`` is null for a record without headers (as Spark's source
    returns), and header keys that are not UTF-8 decode with replacement
    characters (as Kafka's Java client). Records deleted before they were
    read raise :class:`DataLossError`, or with ``fail_on_data_loss=False``
    are skipped with a :class:`DataLossWarning`.

    ``columns`` (None: all) chooses the columns, in the order given: only
    those are built. When they are among ``topic``, ``partition`` and
    ``offset``, a batch whose header shows offsets without gaps is not read
    past its header (nor decompressed, nor its CRC checked). ``pushdown``'s
    timestamp bounds filter the rows (its other bounds are the planner's).

    A read_committed split's batches of its aborted transactions
    (:attr:`Split.aborted`) are dropped: a transactional batch of an aborted
    transaction's producer that ends at or after the transaction's first
    offset and starts before its ABORT marker, as Kafka's consumer drops them
    with a fetch's aborted transactions. Only the chunks whose offsets reach
    into an aborted transaction have their batch headers looked at.
    """
    if isinstance(batch_rows, bool) or not isinstance(batch_rows, int) or batch_rows < 1:
        raise InvalidArgumentError("batch_rows must be an int >= 1, not %r" % (batch_rows,))
    chosen = parse_columns(columns)
    pa = _pyarrow()
    schema = arrow_schema(chosen if columns is not None else None)
    rows = pushdown if pushdown is not None and pushdown.filters_rows else None
    headers_only = rows is None and _FROM_HEADERS.issuperset(chosen)
    aborted = _AbortedTxns(split.aborted) if split.aborted else None
    for decoded in _iter_columns(split, fail_on_data_loss, batch_rows, headers_only, aborted):
        if rows is not None:
            decoded = _rows_in_time(decoded, rows.min_timestamp, rows.max_timestamp)
        n = len(decoded)
        for i in range(0, n, batch_rows):
            yield _to_arrow(pa, schema, chosen, decoded, i, min(n, i + batch_rows), split.topic, split.partition)


def _task_socket_fd() -> Optional[int]:
    """The file descriptor of the socket the PySpark worker running this code talks to the JVM
    through (None outside a PySpark worker).

    PySpark keeps no public handle on it: its worker module holds the stream
    it writes results to as a local named ``outfile`` (``main(infile,
    outfile)`` since Spark 1, ``invoke_udf(message_receiver, outfile)`` in
    Spark 4.3), so the frames of the running task are searched for one.
    """
    frame: Optional[Any] = sys._getframe(1)
    while frame is not None:
        if str(frame.f_globals.get("__name__", "")).startswith("pyspark."):
            out = frame.f_locals.get("outfile")
            fileno = getattr(out, "fileno", None)
            if fileno is not None:
                try:
                    return int(fileno())
                except (OSError, ValueError):
                    return None
        frame = frame.f_back
    return None


def _answer_promptly() -> bool:
    """Set the running Spark task's TCP socket to the JVM to acknowledge at once and to send
    without delay (``TCP_QUICKACK``, ``TCP_NODELAY``); -> whether there was one to set.

    PySpark's workers talk to the JVM over loopback TCP with the kernel's
    defaults: Nagle's algorithm on both ends and delayed acknowledgements.
    A task's command reaches the worker first; the few bytes of input that
    follow it (the task number of ``read_topic``'s plan, the partition of a
    Data Source read) are held by the JVM's Nagle until the worker
    acknowledges the command, which Linux delays up to 40 ms; the worker's
    last small writes of a task (its timings and end marker) can wait the
    same way at the other end. Measured on a local[2] session: an empty
    ``mapInArrow`` job of two tasks took 106-120 ms against 66-75 ms with the
    socket set here, and reads of a topic 20-60 ms less. Acknowledging at
    once sends the pending acknowledgement now, so the input comes straight
    away; no delay keeps the small writes from waiting. Both apply to that
    one connection, which the worker keeps for later tasks. Nothing is done
    over a Unix domain socket (``spark.python.unix.domain.socket.enabled``),
    which has neither behaviour, nor outside a PySpark worker.

    Called once per task, at the first point pylogq's code runs before the
    task reads its input: ``read_topic``'s task function when Spark calls it
    (it takes its input only after), a Data Source reader's settings as they
    are unpickled with the command (PySpark's read function takes the
    partition from the input before it calls the reader).
    """
    import socket

    fd = _task_socket_fd()
    if fd is None:
        return False
    try:
        sock = socket.socket(fileno=os.dup(fd))
    except OSError:
        return False
    try:
        if sock.family not in (socket.AF_INET, socket.AF_INET6) or sock.type != socket.SOCK_STREAM:
            return False
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        quickack = getattr(socket, "TCP_QUICKACK", None)  # (Linux's)
        if quickack is not None:
            sock.setsockopt(socket.IPPROTO_TCP, quickack, 1)
        return True
    except OSError:
        return False
    finally:
        sock.close()  # (the duplicate only: the task's connection stays open)


_worker_frozen = False


def _freezing_after(batches: Iterator[Any]) -> Iterator[Any]:
    """``batches`` (a Spark task's read), then once per process the worker's objects put out of the
    cyclic garbage collector's walk.

    Spark's Python worker daemon runs a full collection after every task of
    a reused worker, and a full collection walks every object the worker
    holds: pyspark, pyarrow, pandas (which pyarrow loads on its first
    arrays), numpy and pylogq are some 80 000 objects, 60-90 ms of CPU per
    task on a 2-core machine, spent while the JVM is still at work on the
    query. The first read to finish in a worker, when the modules a read
    needs are loaded, collects once and then freezes what is alive
    (``gc.freeze``): later collections walk only what later tasks create.
    An object frozen that later becomes part of an unreachable cycle is not
    collected: a one-time, bounded cost (mostly the modules and classes a
    worker keeps anyway).
    """
    global _worker_frozen
    yield from batches
    if not _worker_frozen:
        _worker_frozen = True
        gc.collect()
        gc.freeze()


class _Offsets:
    """The offsets of a run of records, for reads of the columns that batch headers give."""

    __slots__ = ("offsets",)

    def __init__(self, offsets: np.ndarray) -> None:
        self.offsets = offsets

    def __len__(self) -> int:
        return len(self.offsets)


def _rows_in_time(c: RecordColumns, low: Optional[int], high: Optional[int]) -> RecordColumns:
    """The rows of ``c`` with ``low <= timestamp < high`` (milliseconds; None: unbounded)."""
    keep = np.ones(len(c), dtype=bool)
    if low is not None:
        keep &= c.timestamps >= low
    if high is not None:
        keep &= c.timestamps < high
    return _kept_rows(c, keep)


def _kept_rows(c: RecordColumns, keep: np.ndarray) -> RecordColumns:
    """The rows of ``c`` where ``keep`` is true (``c`` itself when it is true everywhere)."""
    if keep.all():
        return c
    rows = np.flatnonzero(keep)
    return RecordColumns(c.data, len(rows), *(getattr(c, name)[rows] for name in _COLUMN_ARRAYS))


class _AbortedTxns:
    """A split's aborted transactions, for dropping their batches as they are read.

    Kafka's consumer rule, batch by batch: a transactional (not control) v2
    batch is aborted when its producer has an aborted transaction whose first
    offset is at or below the batch's last offset and whose ABORT marker lies
    past the batch's base offset. A producer has one transaction open at a
    time, so its aborted transactions' ranges do not overlap. Immutable.
    """

    __slots__ = ("by_producer", "low", "high")

    def __init__(self, aborted: Sequence[Aborted]) -> None:
        self.by_producer: Dict[int, List[Tuple[int, int]]] = {}
        for pid, first, marker in aborted:
            self.by_producer.setdefault(pid, []).append((first, marker))
        #: Every aborted record lies in [low, high).
        self.low = min(first for _, first, _ in aborted)
        self.high = max(marker for _, _, marker in aborted)

    def hides(self, header: Any) -> bool:
        """Whether the batch of ``header`` (a :class:`~pylogq.records.BatchHeader`) is aborted."""
        if header.magic != 2 or header.attributes & CONTROL_MASK or not header.attributes & TRANSACTIONAL_MASK:
            return False
        for first, marker in self.by_producer.get(header.producer_id, ()):
            if first <= header.last_offset and header.base_offset < marker:
                return True
        return False

    def drop(self, c: RecordColumns, data: Any) -> RecordColumns:
        """The rows of ``c`` (decoded from the whole batches of ``data``) not in an aborted batch."""
        n = len(c)
        if n == 0 or int(c.offsets[-1]) < self.low or int(c.offsets[0]) >= self.high:
            return c
        hidden = [(h.base_offset, h.last_offset + 1) for h in iter_batches(data) if self.hides(h)]
        if not hidden:
            return c
        keep = np.ones(n, dtype=bool)
        bounds = np.array(hidden, dtype=np.int64)
        # (Offsets grow through a chunk: each aborted batch's rows are one run of them.)
        firsts = np.searchsorted(c.offsets, bounds[:, 0], side="left")
        ends = np.searchsorted(c.offsets, bounds[:, 1], side="left")
        for a, b in zip(firsts.tolist(), ends.tolist()):
            keep[a:b] = False
        return _kept_rows(c, keep)


def _lost(split: Split, start: int, end: int, log_start: int, fail: bool, why: str = "") -> None:
    """Report offsets ``start..end - 1`` as lost: DataLossError, or a warning when not ``fail``."""
    last = end - 1
    reason = why or ("the log start is now %d (retention or DeleteRecords)" % log_start)
    message = ("offsets %d..%d of %s-%d were deleted before they could be read: %s"
               % (start, last, split.topic, split.partition, reason))
    if fail:
        raise DataLossError(message + "; read with fail_on_data_loss=False to skip them",
                            split.topic, split.partition, start, end)
    log.warning("skipping lost records: %s", message)
    warnings.warn(message + "; skipped (fail_on_data_loss=False)", DataLossWarning, stacklevel=4)


def _list_for_read(split: Split, position: int, fail: bool) -> Optional[List[_Segment]]:
    """The segments now; None (after reporting the loss) when the partition directory is gone."""
    try:
        return _list_segments(split.directory)
    except FileNotFoundError:
        _lost(split, position, split.end_offset, -1, fail,
              "the partition directory %s no longer exists (topic deleted?)" % split.directory)
        return None


def _skip_lost(split: Split, segments: Sequence[_Segment], position: int, fail: bool) -> int:
    """The first offset to read at or after ``position``: past records deleted before it (reported)."""
    log_start = _log_start(split.directory, segments, split.topic, split.partition) if segments else split.end_offset
    if position < log_start:
        lost_end = min(log_start, split.end_offset)
        _lost(split, position, lost_end, log_start, fail)
        return lost_end
    return position


def _segment_for(segments: Sequence[_Segment], position: int) -> int:
    """The index of the last segment whose base offset is at or below ``position`` (-1: none)."""
    for i in range(len(segments) - 1, -1, -1):
        if segments[i].base <= position:
            return i
    return -1


def _locate(split: Split, position: int, fail: bool) -> Optional[Tuple[List[Any], int, int]]:
    """List the split's segments again: -> (segments, the position to read from after any
    records lost to retention, the index of the segment holding it), or None when nothing
    is left to read."""
    segments = _list_for_read(split, position, fail)
    if segments is None:
        return None
    position = _skip_lost(split, segments, position, fail)
    return segments, position, _segment_for(segments, position)


def _iter_columns(split: Split, fail: bool, batch_rows: int, headers_only: bool = False,
                  aborted: Optional[_AbortedTxns] = None) -> Iterator[Any]:
    """The split's records, decoded chunk by chunk (each about ``batch_rows`` rows).

    Walks the segments in order from the one holding the start, listing the
    directory again whenever a file has moved (retention, compaction swaps)
    or the last listed segment is done (a newer one may have rolled). A
    segment opened stays readable even if the broker deletes it meanwhile.
    Each segment is read from the next offset wanted, not from its base: a
    v0/v1 compressed wrapper's inner records may lie below the base offset of
    the segment holding it (a segment rolled at the wrapper's last offset).
    """
    end = split.end_offset
    located = _locate(split, split.start_offset, fail)
    if located is None:
        return
    segments, position, k = located
    retries = 0
    bytes_per_row = 128.0
    while position < end:
        reader: Optional[SegmentReader] = None
        if k >= 0:
            try:
                reader = SegmentReader.open(segments[k].path)
            except FileNotFoundError:
                pass  # renamed since the listing (retention, or a compaction swap)
            except OSError as exc:
                raise PylogqError("cannot read segment %s: %s" % (segments[k].path, exc.strerror or exc)) from None
        if reader is None:
            # The segment holding ``position`` is gone or moved: look again.
            retries += 1
            if retries > _OPEN_RETRIES:
                raise PylogqError("%s: segment files keep moving; cannot find the one holding offset %d"
                                  % (split.directory, position))
            located = _locate(split, position, fail)
            if located is None:
                return
            segments, position, k = located
            continue
        segment = segments[k]
        with reader:
            for columns, chunk_bytes in _read_segment(reader, segment, position, end, batch_rows, bytes_per_row,
                                                      headers_only, aborted):
                if len(columns):
                    bytes_per_row = max(chunk_bytes / len(columns), 1.0)
                    position = max(position, int(columns.offsets[-1]) + 1)
                    yield columns
        if position >= end:
            return
        if k + 1 < len(segments):
            k += 1
            continue
        # The last segment listed is read to its end: a newer one may have rolled since.
        found = _list_for_read(split, position, fail)
        if found is None:
            return
        segments = found
        later = [i for i, s in enumerate(segments) if s.base > segment.base]
        if not later:
            return  # the rest of the range holds no records (compaction gaps, control batches)
        k = later[0]
        # Offsets below the next segment's base after a segment read to its end hold no records:
        # only records at or past that base can have been lost.
        expected_from = max(position, segments[k].base)
        checked = _skip_lost(split, segments, expected_from, fail)
        if checked > expected_from:
            position = checked
            k = _segment_for(segments, position)


def _read_segment(reader: SegmentReader, segment: _Segment, start: int, end: int, batch_rows: int,
                  bytes_per_row: float, headers_only: bool = False,
                  aborted: Optional[_AbortedTxns] = None) -> Iterator[Tuple[Any, int]]:
    """(columns, bytes read) of the records of one segment file with start <= offset < end.

    The file is read in chunks of whole batches sized to decode about
    ``batch_rows`` rows each, from the offset index entry before ``start`` to
    the batch holding ``end - 1`` (or the file's end); the reader stops where
    the readable data ends (a batch being written, a preallocated zero tail).
    CRCs are checked as the columns are decoded; the batches of ``aborted``
    transactions are dropped.
    """
    size = reader.size
    offsets, positions = read_offset_index(segment.path, segment.base, size)
    position = _start_position(reader, offsets, positions, start, size)
    limit = _end_position(reader, offsets, positions, end, size)
    if headers_only:
        yield from _read_offsets(reader, segment, position, limit, start, end, batch_rows, aborted)
        return
    chunk_bytes = int(min(max(bytes_per_row * batch_rows * 0.9, _MIN_CHUNK), _MAX_CHUNK))
    # (The chunks share one buffer: read_split's Arrow batches copy what they keep.)
    walk = reader.chunks(position, limit, chunk_bytes, reuse=True)
    for chunk in walk:
        columns = decode_columns(chunk.data, check_crc=True, skip_control=True, start_offset=start, end_offset=end)
        if aborted is not None:
            columns = aborted.drop(columns, chunk.data)
        yield columns, len(chunk.data)
        if len(columns) and int(columns.offsets[-1]) >= end - 1:
            return
    _check_stop(reader, walk, segment)


def _check_stop(reader: SegmentReader, walk: SegmentWalk, segment: _Segment) -> None:
    """Raise CorruptRecordError when a walk over a segment stopped at malformed bytes.

    A walk ends quietly at the end of what it was asked to read, before an
    entry still being written (or cut short by the end), where the file
    shrank, and at a zero-filled tail (a preallocated file past its data);
    anything else would leave the rest of the segment unread without a word.
    """
    stop = walk.stop
    if stop is None or stop.reason != CORRUPT:
        return
    if not any(reader.read(stop.position, ENTRY_MAGIC_OFFSET + 1)):
        return  # the zeros past a preallocated file's data
    detail = re.sub(r"^\[Error \d+\] \w+: ", "", stop.detail or "")
    raise CorruptRecordError("segment %s cannot be read past byte %d: %s" % (segment.path, stop.position, detail),
                             kind=stop.problem)


def _read_offsets(reader: SegmentReader, segment: _Segment, position: int, limit: int, start: int, end: int,
                  batch_rows: int, aborted: Optional[_AbortedTxns] = None) -> Iterator[Tuple[_Offsets, int]]:
    """(offsets, bytes read) of the records from ``position`` to ``limit`` with start <= offset < end,
    from the batch headers where they suffice.

    A v2 batch whose record count fills its offset range holds every offset
    from its base to its last; any other entry (a compacted batch with gaps,
    a v0/v1 message or compressed wrapper) is read and decoded.
    """
    runs: List[np.ndarray] = []
    count = 0
    read = 0
    walk = reader.headers(position, limit)
    for header in walk:
        read += HEADER_BYTES
        if header.last_offset < start:
            continue
        # (A v0/v1 compressed wrapper's header carries its last inner offset: only a decode says
        # which of its records lie below ``end``.)
        if header.magic == 2 and header.base_offset >= end:
            break
        if header.magic == 2:
            if header.attributes & CONTROL_MASK:  # a control batch: no data records
                continue
            if aborted is not None and aborted.hides(header):
                continue
            if header.records_count == header.last_offset - header.base_offset + 1:
                run = np.arange(max(header.base_offset, start), min(header.last_offset + 1, end), dtype=np.int64)
                runs.append(run)
                count += len(run)
                if count >= batch_rows:
                    yield _Offsets(np.concatenate(runs)), read
                    runs, count, read = [], 0, 0
                continue
        data = reader.read(header.position, header.size)
        read += len(data)
        decoded = decode_columns(data, check_crc=True, skip_control=True, start_offset=start, end_offset=end)
        runs.append(np.asarray(decoded.offsets, dtype=np.int64))
        count += len(decoded)
        if header.last_offset >= end - 1:
            break
    else:
        _check_stop(reader, walk, segment)
    if runs:
        yield _Offsets(np.concatenate(runs)), read


# -- Arrow conversion ------------------------------------------------------------------------------


def _to_arrow(pa: Any, schema: Any, columns: Sequence[str], c: Any, lo: int, hi: int, topic: str,
              partition: int) -> Any:
    """Rows ``lo..hi`` of decoded columns as one RecordBatch of ``schema`` (the ``columns`` chosen), with
    no per-row Python loop (except to decode headers, for the rows that have them). Only the
    columns chosen are built; ``c`` is an :class:`_Offsets` when they need nothing else."""
    n = hi - lo
    arrays = []
    data: Any = None
    for name in columns:
        if name == "key" or name == "value":
            if data is None:
                data = pa.py_buffer(c.data)
            if name == "key":
                arrays.append(_binary(pa, data, c.data, c.key_start[lo:hi], c.key_length[lo:hi]))
            else:
                arrays.append(_binary(pa, data, c.data, c.value_start[lo:hi], c.value_length[lo:hi]))
        elif name == "topic":
            arrays.append(_repeated_string(pa, topic, n))
        elif name == "partition":
            arrays.append(pa.array(np.full(n, partition, np.int32)))
        elif name == "offset":
            arrays.append(pa.array(np.ascontiguousarray(c.offsets[lo:hi])))
        elif name == "timestamp":
            arrays.append(pa.array(c.timestamps[lo:hi] * 1000, type=schema.field("timestamp").type))
        elif name == "timestampType":
            arrays.append(pa.array(c.timestamp_types[lo:hi].astype(np.int32)))
        else:
            arrays.append(_headers(pa, schema.field("headers").type, c, lo, hi))
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


def _binary(pa: Any, buffer: Any, raw: Any, starts: np.ndarray, lengths: np.ndarray) -> Any:
    """A binary array of ``raw[start:start + length]`` per row (length -1: null), gathered by Arrow.

    The values lie in ``raw`` in row order with gaps between them, so one
    large_binary array of 2n - 1 items (value, gap, value, ...) describes
    them without copying, and ``take`` of the even items gathers the values
    into a compact array.
    """
    n = len(starts)
    null = lengths < 0
    has_null = bool(null.any())
    if n == 0:
        return pa.array([], pa.binary())
    if has_null and bool(null.all()):  # (records without keys, most topics' keys)
        return pa.nulls(n, pa.binary())
    s = starts.astype(np.int64)
    e = s + (np.where(null, 0, lengths) if has_null else lengths)
    bounds = np.empty(2 * n, np.int64)
    bounds[0::2] = s
    bounds[1::2] = e
    if bounds[0] < 0 or bounds[-1] > len(buffer) or np.any(bounds[1:] < bounds[:-1]):
        return _binary_gathered(pa, raw, s, e, null, has_null)
    spread = pa.Array.from_buffers(pa.large_binary(), 2 * n - 1, [None, pa.py_buffer(bounds), buffer])
    indices = pa.array(np.arange(0, 2 * n, 2, dtype=np.int64), mask=null if has_null else None)
    return spread.take(indices).cast(pa.binary())


def _binary_gathered(pa: Any, raw: Any, s: np.ndarray, e: np.ndarray, null: np.ndarray, has_null: bool) -> Any:
    """The same array by a numpy gather (values out of order in the buffer: never from pylogq's decoders)."""
    lengths = e - s
    offsets = np.zeros(len(s) + 1, np.int64)
    np.cumsum(lengths, out=offsets[1:])
    source = np.repeat(s - offsets[:-1], lengths) + np.arange(int(offsets[-1]), dtype=np.int64)
    payload = np.frombuffer(raw, dtype=np.uint8)[source]
    validity = None
    if has_null:
        validity = pa.py_buffer(np.packbits(~null, bitorder="little"))
    return pa.Array.from_buffers(pa.large_binary(), len(s), [validity, pa.py_buffer(offsets),
                                                              pa.py_buffer(payload)]).cast(pa.binary())


def _repeated_string(pa: Any, text: str, n: int) -> Any:
    encoded = text.encode("utf-8")
    offsets = np.arange(n + 1, dtype=np.int64) * len(encoded)
    if offsets[-1] >= 2**31:
        return pa.array([text] * n, pa.string())
    return pa.Array.from_buffers(pa.string(), n, [None, pa.py_buffer(offsets.astype(np.int32)),
                                                  pa.py_buffer(encoded * n)])


def _headers(pa: Any, list_type: Any, c: RecordColumns, lo: int, hi: int) -> Any:
    """list<struct<key, value>> per row; null for rows without headers (Spark's Kafka source)."""
    n = hi - lo
    counts = c.headers_count[lo:hi]
    rows = np.flatnonzero(counts > 0)
    if rows.size == 0:
        return pa.nulls(n, type=list_type)
    keys: List[str] = []
    values: List[Optional[bytes]] = []
    starts = c.headers_start[lo:hi]
    for i in rows.tolist():
        for key, value in decode_headers(c.data, int(starts[i]), int(counts[i])):
            keys.append(key)
            values.append(value)
    try:
        key_array = pa.array(keys, pa.string())
    except (UnicodeEncodeError, pa.ArrowException):
        # Keys that were not UTF-8 (kept as surrogate escapes): Kafka's client decodes with replacements.
        key_array = pa.array([k.encode("utf-8", "surrogateescape").decode("utf-8", "replace") for k in keys],
                             pa.string())
    struct_type = list_type.value_type
    items = pa.StructArray.from_arrays([key_array, pa.array(values, pa.binary())], fields=list(struct_type))
    offsets = np.zeros(n + 1, np.int32)
    np.cumsum(counts, out=offsets[1:])
    return pa.ListArray.from_arrays(pa.array(offsets), items, type=list_type, mask=pa.array(counts == 0))
