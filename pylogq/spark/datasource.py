"""The PySpark Python Data Source ``pylogq``: batch and streaming reads of a topic's segment files.

``spark.read.format("pylogq")`` and ``spark.readStream.format("pylogq")``
after :func:`pylogq.spark.register`. Options (names as Spark's Kafka source
where it has one):

==================== ===========================================================
source (or path)     the log directory (several: comma-separated); required
topic (or subscribe) the topic; required
bootstrapServers     a broker ("host:port") whose committed high watermark
                     bounds the reads, instead of the checkpoint files
                     (also ``kafka.bootstrap.servers``)
startingOffsets      "earliest", "latest" or JSON ``{"topic":{"0":23,"1":-2}}``;
                     default earliest (batch), latest (streaming)
endingOffsets        batch only: "latest" (default) or JSON as above
failOnDataLoss       "true" (default): records deleted by retention before
                     they were read fail the query; "false": skipped, warned
maxOffsetsPerTrigger streaming: at most this many offsets per micro-batch,
                     shared among the partitions in proportion to their lag
maxSplitBytes        segment bytes per Spark task (big partitions get several)
startingTimestamp    batch: start each partition at its first record at or
                     after this time (milliseconds since the epoch); takes
                     precedence over startingOffsets
endingTimestamp      batch: end each partition at its first record at or
                     after this time (else at its latest offset)
startingOffsetsBy\
TimestampStrategy    "error" (default) or "latest": a partition with no record
                     at or after startingTimestamp fails the query, or reads
                     nothing
columns              the columns to read, comma-separated (also set by a
                     schema given with ``.schema(...)``, a subset of these)
clientRack           with bootstrapServers: read each partition of a
                     replicated topic from an in-sync replica on a broker of
                     this rack when one is given (also ``kafka.client.rack``)
kafka.isolation.\
level                "read_uncommitted" (default) or "read_committed": stop
                     each partition at its last stable offset and drop the
                     records of aborted transactions (also ``isolationLevel``)
==================== ===========================================================

Only the columns the DataFrame's schema names are decoded and shipped (PySpark
4.3 gives a Python Data Source no projection hook, so give a narrower schema or
the ``columns`` option). Filters on ``partition``, ``offset`` and ``timestamp``
reach the batch reader through ``pushFilters`` (PySpark 4.1+, with
``spark.sql.python.filterPushdown.enabled``): they narrow the splits, and a
lower bound on ``timestamp`` starts each partition at its first record at or
after it, found through the segments' time indexes, so the segments before it
are never read.

Streaming offsets are JSON like the Kafka source's, ``{"topic": {"0": 42}}``
(the next offset to read per partition); Spark checkpoints them, and a
micro-batch reads exactly the offsets between two of them from the files, so
a restarted query re-reads a batch identically and a file sink sees every
record once. ``Trigger.AvailableNow`` stops at the end seen when it started.
"""

from __future__ import annotations

import datetime
import json
import sys
import warnings
from typing import Any, Dict, Iterable, Iterator, List, Mapping, Optional, Sequence, Tuple

from pyspark.sql.datasource import DataSource, DataSourceReader, DataSourceStreamReader, InputPartition
from pyspark.sql.types import TimestampType

from ..errors import ConfigError, DataLossError, InvalidArgumentError, OffsetOutOfRangeError
from .splits import (_SIMPLE_TYPES, COLUMNS, READ_UNCOMMITTED, SPARK_SCHEMA_DDL, DataLossWarning, Pushdown, Split,
                     _answer_promptly, _freezing_after, parse_columns, parse_isolation_level, partition_bounds,
                     plan_splits, read_split, schema_ddl)

try:  # pyspark 4.2+: read limits and Trigger.AvailableNow for Python sources
    from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows, SupportsTriggerAvailableNow
except ImportError:  # pragma: no cover - pyspark 4.0/4.1
    ReadAllAvailable = ReadMaxRows = None  # type: ignore[assignment,misc]

    class SupportsTriggerAvailableNow:  # type: ignore[no-redef]
        """Stand-in on pyspark versions without Trigger.AvailableNow for Python sources."""


__all__ = ["PylogqDataSource"]

EARLIEST = -2
LATEST = -1
_TRUE = ("true", "1", "yes")
_FALSE = ("false", "0", "no")


class SplitPartition(InputPartition):
    """One Spark task's share of a read: a :class:`Split` (plain fields, so it pickles)."""

    def __init__(self, split: Split) -> None:
        super().__init__(split)
        self.split = split


def _option(options: Mapping[str, str], *names: str) -> Optional[str]:
    for name in names:
        value = options.get(name)
        if value is not None and str(value).strip() != "":
            return str(value).strip()
    return None


def _flag(options: Mapping[str, str], name: str, default: bool) -> bool:
    value = _option(options, name)
    if value is None:
        return default
    if value.lower() in _TRUE:
        return True
    if value.lower() in _FALSE:
        return False
    raise ConfigError("option %s must be true or false, not %r" % (name, value))


def _positive(options: Mapping[str, str], name: str) -> Optional[int]:
    value = _option(options, name)
    if value is None:
        return None
    try:
        number = int(value)
    except ValueError:
        raise ConfigError("option %s must be a positive integer, not %r" % (name, value)) from None
    if number < 1:
        raise ConfigError("option %s must be a positive integer, not %r" % (name, value))
    return number


class _Settings:
    """The options of one read, parsed and checked once, on the driver."""

    def __init__(self, options: Mapping[str, str], streaming: bool) -> None:
        source = _option(options, "source", "path")
        if source is None:
            raise ConfigError("option 'source' (the log directory) is required: "
                              "spark.read.format('pylogq').option('source', '/var/lib/pylogq')")
        self.source: Any = [s.strip() for s in source.split(",") if s.strip()] if "," in source else source
        topic = _option(options, "topic", "subscribe")
        if topic is None:
            raise ConfigError("option 'topic' is required")
        if "," in topic:
            raise ConfigError("option 'topic' names one topic, not %r" % topic)
        self.topic = topic
        self.bootstrap_servers = _option(options, "bootstrapServers", "kafka.bootstrap.servers")
        self.client_rack = _option(options, "clientRack", "kafka.client.rack")
        self.isolation_level = _isolation_level(options)
        self.starting = _option(options, "startingOffsets") or ("latest" if streaming else "earliest")
        self.ending = _option(options, "endingOffsets") or "latest"
        if streaming and _option(options, "endingOffsets") is not None:
            raise ConfigError("option endingOffsets applies to batch reads only (a stream has no end)")
        self.fail_on_data_loss = _flag(options, "failOnDataLoss", True)
        self.max_offsets_per_trigger = _positive(options, "maxOffsetsPerTrigger")
        self.max_split_bytes = _positive(options, "maxSplitBytes")
        self.batch_rows = _positive(options, "batchRows") or 65536
        self.starting_timestamp = _timestamp(options, "startingTimestamp")
        self.ending_timestamp = _timestamp(options, "endingTimestamp")
        if streaming and (self.starting_timestamp is not None or self.ending_timestamp is not None):
            raise ConfigError("options startingTimestamp and endingTimestamp apply to batch reads only")
        self.timestamp_strategy = (_option(options, "startingOffsetsByTimestampStrategy") or "error").lower()
        if self.timestamp_strategy not in ("error", "latest"):
            raise ConfigError("option startingOffsetsByTimestampStrategy must be error or latest, not %r"
                              % self.timestamp_strategy)
        columns = _option(options, "columns")
        self.columns: Optional[Tuple[str, ...]] = None if columns is None else parse_columns(columns)
        self.pushdown: Optional[Pushdown] = None

    def __setstate__(self, state: Dict[str, Any]) -> None:
        # Unpickled in a Spark task with the task's command, before the task reads its input (the
        # partition to read, which comes after the command): the task's socket is set now, so that
        # input is not held back waiting on a delayed acknowledgement (see _answer_promptly).
        self.__dict__.update(state)
        _answer_promptly()

    def with_schema(self, schema: Any) -> None:
        """Read the columns of ``schema`` (the one Spark hands the reader: ours, or the user's subset)."""
        names = [f.name for f in schema.fields]
        if names == list(COLUMNS):
            return
        expected = _SIMPLE_TYPES  # (a reader runs without a session to parse the DDL)
        for f in schema.fields:
            if f.name not in expected:
                raise ConfigError("schema column %r is not one of pylogq's: %s" % (f.name, ", ".join(COLUMNS)))
            if f.dataType.simpleString() != expected[f.name]:
                raise ConfigError("schema column %r has type %s; pylogq reads it as %s"
                                  % (f.name, f.dataType.simpleString(), expected[f.name]))
        self.columns = tuple(names)

    def plan(self, starting: Any, ending: Any) -> List[Split]:
        """The splits from ``starting`` to ``ending``; a start that retention deleted is data loss.

        Spark's Kafka source semantics: with failOnDataLoss a start below the
        log start fails naming the lost offsets; without, the read starts at
        the log start instead, with a warning.
        """
        kwargs: Dict[str, Any] = {"bootstrap_servers": self.bootstrap_servers, "client_rack": self.client_rack,
                                  "isolation_level": self.isolation_level, "pushdown": self.pushdown,
                                  "starting_timestamp": self.starting_timestamp,
                                  "ending_timestamp": self.ending_timestamp,
                                  "timestamp_strategy": self.timestamp_strategy}
        if self.max_split_bytes is not None:
            kwargs["max_split_bytes"] = self.max_split_bytes
        try:
            return plan_splits(self.source, self.topic, starting, ending, **kwargs)
        except OffsetOutOfRangeError:
            lost = self._lost_starts(starting)
            if not lost:
                raise
        message = "; ".join("offsets %d..%d of %s-%d were deleted before they could be read (the log start is now %d)"
                            % (start, low - 1, self.topic, p, low) for p, (start, low) in sorted(lost.items()))
        if self.fail_on_data_loss:
            first = min(lost)
            raise DataLossError(message + "; set failOnDataLoss to false to skip them",
                                self.topic, first, lost[first][0], lost[first][1])
        warnings.warn(message + "; skipped (failOnDataLoss=false)", DataLossWarning, stacklevel=2)
        moved = _offset_map(starting, self.topic)
        moved.update({p: low for p, (_, low) in lost.items()})
        return plan_splits(self.source, self.topic, json.dumps({self.topic: {str(p): o for p, o in moved.items()}}),
                           ending, **kwargs)

    def _lost_starts(self, starting: Any) -> Dict[int, Tuple[int, int]]:
        """partition -> (asked start, log start) for the explicit starts below their log start."""
        wanted = _offset_map(starting, self.topic)
        if not wanted:
            return {}
        bounds = self.bounds()
        return {p: (o, bounds[p][0]) for p, o in wanted.items() if p in bounds and 0 <= o < bounds[p][0]}

    def bounds(self) -> Dict[int, Tuple[int, int, str]]:
        """Each partition's (log start, end, directory): the end is the committed high watermark, or
        for read_committed the last stable offset (:func:`partition_bounds`)."""
        return partition_bounds(self.source, self.topic, bootstrap_servers=self.bootstrap_servers,
                                client_rack=self.client_rack, isolation_level=self.isolation_level)

    def read(self, partition: InputPartition) -> Iterator[Any]:
        split = partition.split if isinstance(partition, SplitPartition) else partition.value
        if split is None:  # Spark's stand-in partition of a read planned to nothing
            return iter(())
        # (The task's socket was set as these settings were unpickled: see __setstate__.)
        return _freezing_after(read_split(split, fail_on_data_loss=self.fail_on_data_loss, batch_rows=self.batch_rows,
                                          columns=self.columns, pushdown=self.pushdown))

    # -- filter pushdown ------------------------------------------------------------------

    def push(self, filters: Sequence[Any]) -> List[Any]:
        """Take the filters on partition, offset and timestamp into :attr:`pushdown`; -> the
        filters Spark must still evaluate (every other one, and those taken only in part)."""
        bounds: Dict[str, Any] = {}
        left = []
        for f in filters:
            if not _take(f, bounds):
                left.append(f)
        if bounds:
            self.pushdown = Pushdown(**bounds)
        return left


class PylogqDataSource(DataSource):
    """``format("pylogq")``: a topic's records with Spark's Kafka-source columns, read from its files."""

    @classmethod
    def name(cls) -> str:
        return "pylogq"

    def schema(self) -> str:
        columns = _option(self.options, "columns")
        return SPARK_SCHEMA_DDL if columns is None else schema_ddl(columns)

    def reader(self, schema: Any) -> DataSourceReader:
        settings = _Settings(self.options, streaming=False)
        settings.with_schema(schema)
        if _asked_to_push_filters():
            return PylogqFilteringReader(settings)
        return PylogqBatchReader(settings)

    def streamReader(self, schema: Any) -> DataSourceStreamReader:
        settings = _Settings(self.options, streaming=True)
        settings.with_schema(schema)
        return PylogqStreamReader(settings)


class PylogqBatchReader(DataSourceReader):
    """A batch read: splits planned on the driver, each read by one task as Arrow batches."""

    def __init__(self, settings: _Settings) -> None:
        self.settings = settings

    def partitions(self) -> Sequence[InputPartition]:
        return [SplitPartition(s) for s in self.settings.plan(self.settings.starting, self.settings.ending)]

    def read(self, partition: InputPartition) -> Iterator[Any]:
        return self.settings.read(partition)


class PylogqFilteringReader(PylogqBatchReader):
    """A batch read that takes Spark's filters on partition, offset and timestamp (PySpark 4.1+)."""

    def pushFilters(self, filters: List[Any]) -> Iterable[Any]:
        """Filters on ``partition``, ``offset`` and ``timestamp`` narrow the read; the rest are Spark's."""
        return self.settings.push(filters)


#: The PySpark worker that asks a reader to take filters (only when filter pushdown is enabled).
_PUSHDOWN_WORKER = "pyspark.sql.worker.data_source_pushdown_filters"


def _asked_to_push_filters() -> bool:
    """Whether :meth:`PylogqDataSource.reader` was called to take filters.

    PySpark (4.1 to 4.3) refuses to plan a read whose reader implements
    ``pushFilters`` while ``spark.sql.python.filterPushdown.enabled`` is false,
    and a data source cannot read that setting. Its filter-pushdown worker is
    the only caller that pushes filters, so the reader with ``pushFilters`` is
    handed to that worker alone: with pushdown off the read still works, with
    it on the filters are taken.
    """
    frame = sys._getframe(1)
    for _ in range(8):
        if frame is None:
            return False
        if frame.f_globals.get("__name__") == _PUSHDOWN_WORKER:
            return True
        frame = frame.f_back  # type: ignore[assignment]
    return False


Offsets = Dict[int, int]


class PylogqStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """A stream of micro-batches, each the offsets between two checkpointed per-partition positions.

    An offset is ``{topic: {"partition": next offset}}``. The latest offset is
    the committed high watermark of each partition (with read_committed, its
    last stable offset, so a micro-batch never ends inside an undecided
    transaction and drops the aborted ones it reads; a partition that appears
    later starts at its log start); ``maxOffsetsPerTrigger`` caps a batch,
    shared among the partitions in proportion to their lag, as Kafka's source
    does. Reading needs no state here: a batch's offsets name its records.
    """

    def __init__(self, settings: _Settings) -> None:
        self.settings = settings
        self._target: Optional[Offsets] = None  # Trigger.AvailableNow's end
        self._last: Optional[Offsets] = None  # pyspark < 4.2 calls latestOffset() without the start

    # -- offsets as Spark stores them -------------------------------------------------

    def _to_json(self, offsets: Offsets) -> dict:
        return {self.settings.topic: {str(p): int(o) for p, o in sorted(offsets.items())}}

    def _from_json(self, offset: Any) -> Offsets:
        if isinstance(offset, str):
            offset = json.loads(offset)
        if not isinstance(offset, dict) or self.settings.topic not in offset:
            raise ConfigError("checkpointed offset %r is not for topic %r: was the query's topic option changed?"
                              % (offset, self.settings.topic))
        return {int(p): int(o) for p, o in offset[self.settings.topic].items()}

    def _bounds(self) -> Dict[int, Tuple[int, int]]:
        return {p: (b[0], b[1]) for p, b in self.settings.bounds().items()}

    # -- DataSourceStreamReader -------------------------------------------------------

    def initialOffset(self) -> dict:
        bounds = self._bounds()
        starting = self.settings.starting
        if starting == "earliest":
            offsets = {p: b[0] for p, b in bounds.items()}
        elif starting == "latest":
            offsets = {p: b[1] for p, b in bounds.items()}
        else:
            try:
                given = json.loads(starting)
            except ValueError:
                raise ConfigError("startingOffsets must be earliest, latest or JSON like "
                                  "'{\"%s\": {\"0\": 23}}', not %r" % (self.settings.topic, starting)) from None
            wanted = self._from_json(given)
            offsets = {}
            for p, (low, high) in bounds.items():
                want = wanted.get(p, EARLIEST)
                if want == EARLIEST:
                    offsets[p] = low
                elif want == LATEST:
                    offsets[p] = high
                elif not low <= want <= high:
                    raise ConfigError("startingOffsets for %s-%d is %d, outside the partition's offsets [%d, %d]"
                                      % (self.settings.topic, p, want, low, high))
                else:
                    offsets[p] = want
            unknown = sorted(set(wanted) - set(bounds))
            if unknown:
                raise ConfigError("startingOffsets names partition(s) %s that topic %r does not have (it has %d)"
                                  % (unknown, self.settings.topic, len(bounds)))
        self._last = offsets
        return self._to_json(offsets)

    def prepareForTriggerAvailableNow(self) -> None:
        self._target = {p: b[1] for p, b in self._bounds().items()}

    def getDefaultReadLimit(self) -> Any:
        if ReadMaxRows is not None and self.settings.max_offsets_per_trigger is not None:
            return ReadMaxRows(self.settings.max_offsets_per_trigger)
        return ReadAllAvailable() if ReadAllAvailable is not None else None

    def latestOffset(self, start: Optional[dict] = None, limit: Any = None) -> dict:
        begin = self._from_json(start) if start is not None else self._last
        bounds = self._bounds()
        if self._target is not None:
            end = dict(self._target)
            for p, (low, _) in bounds.items():
                end.setdefault(p, low)
        else:
            end = {p: b[1] for p, b in bounds.items()}
        if begin is None:
            begin = {p: b[0] for p, b in bounds.items()}
        begin = {p: begin.get(p, bounds[p][0] if p in bounds else 0) for p in end}
        end = {p: max(begin[p], e) for p, e in end.items()}
        cap: Optional[int] = None
        if ReadMaxRows is not None and isinstance(limit, ReadMaxRows):
            cap = limit.max_rows
        elif limit is None and self.settings.max_offsets_per_trigger is not None:
            cap = self.settings.max_offsets_per_trigger
        if cap is not None:
            end = _rate_limit(begin, end, cap)
        self._last = end
        return self._to_json(end)

    def partitions(self, start: dict, end: dict) -> Sequence[InputPartition]:
        begin, stop = self._from_json(start), self._from_json(end)
        # Every partition is named (a partition left out would read earliest..latest):
        # -1..-1 is an empty range; one that appeared after ``start`` reads from its first offset.
        starting = {p: begin.get(p, EARLIEST) for p in stop}
        ending = dict(stop)
        for p, o in list(ending.items()):
            if o <= starting[p] and starting[p] != EARLIEST:
                starting[p] = ending[p] = LATEST
        wanted = {p for p, o in ending.items() if o != LATEST}
        if not wanted:
            return []
        splits = self.settings.plan(json.dumps(self._to_json(starting)), json.dumps(self._to_json(ending)))
        # A partition created since ``end`` was taken is not in it: its records belong to a later batch.
        return [SplitPartition(s) for s in splits if s.partition in wanted]

    def read(self, partition: InputPartition) -> Iterator[Any]:
        return self.settings.read(partition)

    def commit(self, end: dict) -> None:
        """Nothing to release: Spark's checkpoint holds the offsets, the files hold the records."""


def _offset_map(spec: Any, topic: str) -> Dict[int, int]:
    """The explicit per-partition offsets of a startingOffsets value (JSON text or dict); {} for earliest/latest."""
    if isinstance(spec, str):
        if not spec.strip().startswith("{"):
            return {}
        try:
            spec = json.loads(spec)
        except ValueError:
            return {}
    if not isinstance(spec, Mapping):
        return {}
    if topic in spec and isinstance(spec[topic], Mapping):
        spec = spec[topic]
    out: Dict[int, int] = {}
    for p, o in spec.items():
        try:
            out[int(p)] = int(o)
        except (TypeError, ValueError):
            return {}
    return out


def _rate_limit(begin: Offsets, end: Offsets, cap: int) -> Offsets:
    """``end`` moved back so at most ``cap`` offsets are read, shared in proportion to each partition's lag."""
    lags = {p: end[p] - begin[p] for p in end}
    total = sum(lags.values())
    if total <= cap:
        return end
    share = {p: cap * lag // total for p, lag in lags.items()}
    left = cap - sum(share.values())
    for p in sorted(lags, key=lambda q: lags[q] - share[q], reverse=True):
        if left == 0:
            break
        if share[p] < lags[p]:
            share[p] += 1
            left -= 1
    return {p: begin[p] + share[p] for p in end}


def _isolation_level(options: Mapping[str, str]) -> str:
    """The ``kafka.isolation.level`` option (Spark's Kafka source passes it to its consumers), or
    ``isolationLevel``: Kafka's values, read_uncommitted by default."""
    value = _option(options, "kafka.isolation.level", "isolationLevel")
    if value is None:
        return READ_UNCOMMITTED
    try:
        return parse_isolation_level(value)
    except InvalidArgumentError as exc:
        raise ConfigError("option kafka.isolation.level: %s" % exc) from None


def _timestamp(options: Mapping[str, str], name: str) -> Optional[int]:
    """A timestamp option: milliseconds since the epoch, as Spark's Kafka source takes it."""
    value = _option(options, name)
    if value is None:
        return None
    try:
        return int(value)
    except ValueError:
        raise ConfigError("option %s must be milliseconds since the epoch, not %r" % (name, value)) from None


_FLOOR, _CEIL = 0, 1


def _micros(value: Any) -> int:
    """A filter's timestamp literal as microseconds since the epoch, as PySpark converts TIMESTAMP
    values (a naive datetime is local time; a date is its midnight)."""
    if isinstance(value, datetime.datetime):
        return TimestampType().toInternal(value)
    if isinstance(value, datetime.date):
        return TimestampType().toInternal(datetime.datetime(value.year, value.month, value.day))
    raise TypeError(value)


def _millis(micros: int, rounding: int) -> int:
    return -((-micros) // 1000) if rounding == _CEIL else micros // 1000


def _integer(value: Any) -> Optional[int]:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _take(f: Any, bounds: Dict[str, Any]) -> bool:
    """Fold one pushed filter into ``bounds`` (Pushdown's fields); -> whether the read then applies it
    exactly (else Spark evaluates it after the read, which still gets narrower where it can)."""
    from pyspark.sql import datasource as ds

    attribute = getattr(f, "attribute", None)
    if not isinstance(attribute, tuple) or len(attribute) != 1:
        return False
    column = attribute[0].lower()
    value: Any = getattr(f, "value", None)
    kind = type(f).__name__
    if kind == "IsNotNull" and column in ("partition", "offset", "timestamp"):
        return True  # never null
    if column == "partition":
        if kind == "In":
            numbers = {v for v in value if _integer(v) is not None}
            _narrow_set(bounds, numbers)
            return len(numbers) == len(value)
        number = _integer(value)
        if number is None:
            return False
        if kind == "EqualTo":
            _narrow_set(bounds, {number})
            return True
        return False
    if column == "offset":
        if kind == "In":
            offsets = [v for v in value if _integer(v) is not None]
            if len(offsets) == len(value) and offsets:
                _narrow(bounds, "min_offset", min(offsets), max)
                _narrow(bounds, "max_offset", max(offsets) + 1, min)
            return False  # the offsets between them are Spark's to drop
        number = _integer(value)
        if number is None:
            return False
        low, high = {"EqualTo": (number, number + 1), "GreaterThan": (number + 1, None),
                     "GreaterThanOrEqual": (number, None), "LessThan": (None, number),
                     "LessThanOrEqual": (None, number + 1)}.get(kind, (None, None))
        if low is None and high is None:
            return False
        if low is not None:
            _narrow(bounds, "min_offset", low, max)
        if high is not None:
            _narrow(bounds, "max_offset", high, min)
        return True
    if column == "timestamp" and isinstance(f, (ds.EqualTo, ds.GreaterThan, ds.GreaterThanOrEqual, ds.LessThan,
                                                 ds.LessThanOrEqual)):
        try:
            micros = _micros(value)
        except TypeError:
            return False
        # A row's timestamp is whole milliseconds: t * 1000 compared with the literal's microseconds.
        if kind in ("GreaterThanOrEqual", "EqualTo"):
            _narrow(bounds, "min_timestamp", _millis(micros, _CEIL), max)
        if kind == "GreaterThan":
            _narrow(bounds, "min_timestamp", _millis(micros, _FLOOR) + 1, max)
        if kind in ("LessThan",):
            _narrow(bounds, "max_timestamp", _millis(micros, _CEIL), min)
        if kind in ("LessThanOrEqual", "EqualTo"):
            _narrow(bounds, "max_timestamp", _millis(micros, _FLOOR) + 1, min)
        return True
    return False


def _narrow(bounds: Dict[str, Any], name: str, value: int, pick: Any) -> None:
    bounds[name] = value if bounds.get(name) is None else pick(bounds[name], value)


def _narrow_set(bounds: Dict[str, Any], numbers: set) -> None:
    current = bounds.get("partitions")
    bounds["partitions"] = frozenset(numbers if current is None else current & numbers)
