"""Spark integration: scan topics straight from their segment files, and write DataFrames to topics.

pylogq plans the splits and decodes the bytes; Spark schedules, retries and
scales. Three entry points:

- :func:`read_topic`: a DataFrame with Spark's Kafka-source columns (key,
  value, topic, partition, offset, timestamp, timestampType, headers), read by
  Spark tasks from the log directories without a broker in the read path.
- :func:`register`: the Python Data Source ``pylogq`` for
  ``spark.read.format("pylogq")`` and ``spark.readStream.format("pylogq")``.
- :func:`write_topic`: sends a DataFrame's rows to a topic through pylogq's
  producer, one producer per Spark task.

pyspark is imported only inside these functions, so ``import pylogq.spark``
works without it (the split planner and reader need only pyarrow).
"""

from __future__ import annotations

import logging
from typing import Any, Dict, Iterable, Iterator, List, Mapping, Optional, Sequence, Tuple, Union

from ..errors import DataLossError, InvalidArgumentError, PylogqError
from .splits import (COLUMNS, DEFAULT_MAX_SPLIT_BYTES, SPARK_SCHEMA_DDL, Pushdown, Split, _answer_promptly,
                     _freezing_after, arrow_schema, offset_for_time, pack_splits, parse_columns, parse_isolation_level,
                     plan_splits, read_split, schema_ddl)
from .writer import write_topic

log = logging.getLogger("pylogq.spark")

__all__ = [
    "COLUMNS",
    "DataLossError",
    "Pushdown",
    "SPARK_SCHEMA_DDL",
    "Split",
    "offset_for_time",
    "pack_splits",
    "plan_splits",
    "read_split",
    "read_topic",
    "register",
    "schema_ddl",
    "write_topic",
]

Offsets = Union[str, Mapping[int, int], None]


class _SplitReader:
    """The function ``mapInArrow`` runs in each task: task numbers in, Arrow batches of their splits' records out.

    The read's tasks are ``spark.range(tasks)``, one number per Spark
    partition, and this object carries each task's splits, so nothing but
    the task number passes through a Python stage before the read. A class
    rather than a closure, so Spark pickles it by reference (the task imports
    pylogq) and only the splits and settings travel with it.
    """

    def __init__(self, tasks: Sequence[Sequence[Split]], fail_on_data_loss: bool, batch_rows: int,
                 columns: Optional[Tuple[str, ...]] = None) -> None:
        self.tasks = [tuple(task) for task in tasks]
        self.fail_on_data_loss = fail_on_data_loss
        self.batch_rows = batch_rows
        self.columns = columns

    def __call__(self, batches: Iterable[Any]) -> Iterator[Any]:
        _answer_promptly()  # (before the task's number is read from ``batches``)
        return _freezing_after(self._read(batches))

    def _read(self, batches: Iterable[Any]) -> Iterator[Any]:
        for batch in batches:
            for number in batch.column(0).to_pylist():
                for split in self.tasks[number]:
                    yield from read_split(split, fail_on_data_loss=self.fail_on_data_loss,
                                          batch_rows=self.batch_rows, columns=self.columns)


def _parallelism(spark: Any) -> Optional[int]:
    """How many tasks a small read should fill: what Spark's file sources use (``spark.sql.leafNodeDefaultParallelism``,
    else the default parallelism); None when the session cannot say (Spark Connect without the setting)."""
    value = spark.conf.get("spark.sql.leafNodeDefaultParallelism", None)
    if value:
        return max(int(value), 1)
    try:
        return max(int(spark.sparkContext.defaultParallelism), 1)
    except (AttributeError, NotImplementedError):
        return None


def _spark_schema(columns: Optional[Tuple[str, ...]]) -> Any:
    """The Spark schema of a read of ``columns`` (None: all), made from its Arrow schema in this
    process: the same StructType that :func:`schema_ddl`'s DDL parses to, without the JVM round
    trips a DDL string costs each DataFrame (about 3 ms)."""
    from pyspark.sql.pandas.types import from_arrow_schema

    return from_arrow_schema(arrow_schema(columns))


def read_topic(spark: Any, source: Union[str, List[str]], topic: str, starting_offsets: Offsets = "earliest",
               ending_offsets: Offsets = "latest", fail_on_data_loss: bool = True,
               max_split_bytes: Optional[int] = None, bootstrap_servers: Optional[str] = None,
               batch_rows: int = 65536, columns: Optional[Sequence[str]] = None,
               starting_timestamp: Optional[int] = None, ending_timestamp: Optional[int] = None,
               timestamp_strategy: str = "error", engine: str = "auto", client_rack: Optional[str] = None,
               isolation_level: str = "read_uncommitted") -> Any:
    """A DataFrame of ``topic``'s records read from the segment files under ``source``.

    The splits are planned here, on the driver, bounded by the committed high
    watermark (the broker's at ``bootstrap_servers``; else what the files hold
    now, capped by a Kafka broker's replication checkpoint), so the DataFrame reads the same records however often it is
    evaluated while the broker keeps appending. The splits are packed into
    tasks as Spark packs files (:func:`pack_splits`: about one task per core
    for a small read, at most about ``max_split_bytes`` each for a large
    one); the DataFrame is ``spark.range(tasks)``, and ``mapInArrow`` decodes
    each task's segment files into Arrow batches, which reach the JVM without
    a per-row Python object. Offsets take Spark's
    Kafka-source forms: ``"earliest"``, ``"latest"``, ``{partition: offset}``
    or ``'{"topic": {"0": 23, "1": -2}}'`` (-2 earliest, -1 latest).

    Records deleted by retention after planning fail the task with
    :class:`DataLossError` naming the lost offsets, unless
    ``fail_on_data_loss=False``, which skips them with a warning.

    ``columns`` (a list, or comma-separated; None: all eight) makes a
    DataFrame of just those columns, and only those are decoded and shipped:
    Spark cannot prune the columns of a ``mapInArrow`` by itself, so name
    what the query needs. ``starting_timestamp``/``ending_timestamp``
    (milliseconds since the epoch; Spark's Kafka-source ``startingTimestamp``
    and ``endingTimestamp``) start or end each partition at its first record
    at or after that time, found through the time indexes, so the segments
    before the start are not read (``timestamp_strategy``: see
    :func:`plan_splits`).

    ``engine`` chooses who decodes: ``"jvm"``, the JVM reader
    (:mod:`pylogq.spark.jvm`), in Spark's task threads, as columnar batches
    Spark reads without copying rows, which also prunes to the columns the
    query reads by itself; ``"python"``, ``mapInArrow`` in Python workers;
    ``"auto"`` (the default), the JVM reader, given to a session started
    without it (:func:`pylogq.spark.jvm.configure`) with ``ADD JAR``
    (:func:`pylogq.spark.jvm.attach`), and Python when it cannot be had here
    (no JDK, a Spark Connect session), which a log line says once.

    ``client_rack`` (Kafka's ``client.rack``), with ``bootstrap_servers``: of
    a replicated topic whose log directories of several brokers are given,
    read each partition from an in-sync replica on a broker of that rack
    when there is one (:mod:`pylogq.spark.replicas`).

    ``isolation_level`` (Spark's Kafka-source option ``kafka.isolation.level``,
    Kafka's ``isolation.level``): ``"read_uncommitted"`` (the default, as
    Spark's) reads every data record, committed, aborted or still open;
    ``"read_committed"`` ends each partition at its last stable offset (the
    broker's at ``bootstrap_servers``, else found in the files) and drops the
    records of aborted transactions, with either engine. Transaction markers
    are never rows.
    """
    isolation_level = parse_isolation_level(isolation_level)
    if isinstance(batch_rows, bool) or not isinstance(batch_rows, int) or batch_rows < 1:
        raise InvalidArgumentError("batch_rows must be an int >= 1, not %r" % (batch_rows,))
    if engine not in ("auto", "jvm", "python"):
        raise InvalidArgumentError("engine must be 'auto', 'jvm' or 'python', not %r" % (engine,))
    on_jvm = engine != "python" and _jvm_reader(spark, required=engine == "jvm")
    chosen = None if columns is None else parse_columns(columns)
    schema = _spark_schema(chosen)
    max_bytes = DEFAULT_MAX_SPLIT_BYTES if max_split_bytes is None else max_split_bytes
    splits = plan_splits(source, topic, starting_offsets, ending_offsets, max_split_bytes=max_bytes,
                         bootstrap_servers=bootstrap_servers, starting_timestamp=starting_timestamp,
                         ending_timestamp=ending_timestamp, timestamp_strategy=timestamp_strategy,
                         client_rack=client_rack, isolation_level=isolation_level)
    if not splits:
        return spark.createDataFrame([], schema)
    parallelism = _parallelism(spark)
    if parallelism is None:
        tasks = [[split] for split in splits]
    else:
        tasks = pack_splits(splits, parallelism, max_bytes)
    if on_jvm:
        return _jvm_read(spark, tasks, schema, bool(fail_on_data_loss), batch_rows)
    numbers = spark.range(0, len(tasks), 1, len(tasks))
    return numbers.mapInArrow(_SplitReader(tasks, bool(fail_on_data_loss), batch_rows, chosen), schema)


_told_python_engine = False


def _jvm_reader(spark: Any, required: bool) -> bool:
    """Whether ``spark`` reads with the JVM reader, attaching it to a running session that lacks it.

    When it cannot be had (no JDK, Spark Connect), ``required`` raises
    JvmReaderUnavailable; otherwise the Python engine reads, and the first time
    a log line says why and how to get the faster reader.
    """
    global _told_python_engine
    from . import jvm

    try:
        jvm.attach(spark)
        return True
    except PylogqError as exc:  # JvmReaderUnavailable, or a jar that does not build against this PySpark
        if required:
            raise
        if not _told_python_engine:
            _told_python_engine = True
            log.warning("read_topic: reading with the Python engine, slower than the JVM reader (%s); build the "
                        "session with pylogq.spark.jvm.configure(SparkSession.builder) or install a JDK", exc)
        return False


def _jvm_read(spark: Any, tasks: Sequence[Sequence[Split]], schema: Any, fail_on_data_loss: bool,
              batch_rows: int) -> Any:
    """The JVM reader's DataFrame of ``tasks`` (each a list of splits): one Spark partition per task."""
    import json

    from .jvm import SOURCE_CLASS

    plan = json.dumps([[_split_json(s) for s in task] for task in tasks])
    return (spark.read.format(SOURCE_CLASS).schema(schema).option("splits", plan)
            .option("failOnDataLoss", "true" if fail_on_data_loss else "false")
            .option("batchRows", str(batch_rows)).load())


def _split_json(split: Split) -> Dict[str, Any]:
    """A split as the JVM reader's ``splits`` option names it."""
    out: Dict[str, Any] = {"topic": split.topic, "partition": split.partition, "directory": split.directory,
                           "start": split.start_offset, "end": split.end_offset}
    if split.aborted:
        out["aborted"] = [list(txn) for txn in split.aborted]
    return out


def register(spark: Any) -> None:
    """Register the Python Data Source ``pylogq`` (batch and streaming reads) with ``spark``."""
    from .datasource import PylogqDataSource

    spark.dataSource.register(PylogqDataSource)
