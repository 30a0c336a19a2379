"""Spark reads of a topic: rows/s into a local[2] SparkSession, from segment files and the alternatives.

Group "spark read 100B": 1M records with 100-byte values over 4 partitions
(20k in a smoke run: ``--quick``, ``--benchmark-disable`` or ``PYLOGQ_NO_EXTENSIONS=1``),
written in setup with the bulk path (``build_batch`` + ``Broker.produce``). Each round runs one Spark job that
touches every column (an aggregate over key, value, topic, partition,
offset, timestamp, timestampType and headers), so no path gets away with
column pruning. The paths:

- ``direct read_topic``: :func:`pylogq.spark.read_topic` with its default
  engine, the JVM reader (:mod:`pylogq.spark.jvm`): the segment files decoded
  in Spark's task threads into columnar batches (target: >= 0.6x parquet);
- ``read_topic python``: ``read_topic(engine="python")``, the segment files
  decoded in Python workers into Arrow batches (``mapInArrow`` over the splits);
- ``direct format(pylogq)``: the same through the Python Data Source;
- ``arrow ceiling`` (the Python engine's yardstick; the ratio's reference is
  parquet): a Data Source yielding prebuilt Arrow batches
  of the same rows (read from Arrow IPC files written in setup, one per task
  of ``read_topic``'s plan, memory-mapped, so no decoding at all): what
  Python-to-Spark transfer costs here. Target:
  the Python engine at >= 0.7x of it;
- ``naive tuples``: rows as Python tuples through ``mapPartitions`` and
  ``createDataFrame``, the way a user without Arrow writes it (target: the
  direct path >= 3x faster);
- ``kafka-python``: kafka-python's consumer inside ``mapPartitions`` reading
  the topic from the pylogq broker serving the same log directory over TCP
  (target: the direct path >= 3x faster);
- ``parquet`` (the peer, the ratio's reference): ``spark.read.parquet`` of the same
  rows, written in setup: the reference for what Spark ingests natively.
- ``pylogq Consumer``: pylogq's own consumer inside ``mapPartitions`` (the
  consumer path; target: the direct path >= 10x faster).

Group "spark value only 100B": ``sum(length(value))``, the query that reads one
column: ``read_topic(columns=["value"])`` against parquet of the same rows
(target >= 0.6x parquet; the full-row group's direct and parquet give the
full-row ratio, target >= 0.6x too); the same query over every column of
``read_topic``, which Spark prunes to the values in the JVM reader's scan; and
the Python engine's read of the values.

Groups "spark read 100B distinct" and "spark value only 100B distinct": the
same two queries, ``read_topic`` (both engines) against parquet, on a topic whose every value
is distinct. The topic above writes one batch's 5000 random values again in
every batch, which parquet stores as a dictionary (13 MB of parquet for 100 MB
of values, against 111 MB when the values are distinct); most topics' values
are distinct (ids, timestamps, payloads), so these groups show what a data
engineer's own topic would see.

Before any path is measured, ``warm`` runs both groups' queries of pylogq and
of parquet in turn for ``WARM_ROUNDS`` rounds, so each meets the same JIT; the
paths under a second are measured over ``FAST_ROUNDS`` rounds.

``test_timestamp_filter_bytes``: a filter selecting the last 1% of the topic by
timestamp, planned and read with the pushdown Spark's filter pushdown hands the
reader; the bytes read (``/proc/self/io`` rchar) must be at most 5% of the
topic's bytes. Its group's reference (the ratio's) is pyarrow reading the same
1% from the parquet of the same rows with the same filter (``filters=``, which
pyarrow checks against the row groups' statistics before reading them).
``test_timestamp_filter_bytes_jvm``: the same filter on ``read_topic``'s
DataFrame; its reference is the same query on ``spark.read.parquet`` of the
same rows, where Spark pushes the filter into its parquet scan.
"""

from __future__ import annotations

import datetime
import os
import shutil
import subprocess
import sys
from typing import Any, Iterator, List, Tuple

import pytest
from summary import info, smoke

import pylogq
from pylogq.records import build_batch

TOPIC = "bench"
PARTITIONS = 4
BATCH = 5000
TS = 1_700_000_000_000
GROUP = "spark read 100B"
SETTINGS = {"offsets.topic.num.partitions": 1}
#: Rounds of every group's queries before any is measured (see ``warm``).
WARM_ROUNDS = 8
#: Rounds measured of the paths that take under a second (the medians move with the machine's noise).
FAST_ROUNDS = 11
TARGET = ("direct >= 0.6x parquet and >= 3x naive tuples and kafka-python; "
          "read_topic python >= 0.7x the Arrow ceiling")
AGGREGATE = (
    "count(*) AS rows",
    "sum(length(value)) AS value_bytes",
    "sum(coalesce(length(key), 0)) AS key_bytes",
    "sum(offset + partition + timestampType) AS offsets",
    "count(DISTINCT topic) AS topics",
    "max(timestamp) AS newest",
    "sum(coalesce(size(headers), 0)) AS headers",
)


def _java_missing() -> bool:
    java_home = os.environ.get("JAVA_HOME")
    java = os.path.join(java_home, "bin", "java") if java_home else shutil.which("java")
    if not java:
        return True
    try:
        subprocess.run([java, "-version"], capture_output=True, check=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return True
    return False


#: Whether this run is a smoke run (benchmarks/summary.py): set per module by ``count``.
_smoke = [False]


@pytest.fixture(scope="module")
def count(request):
    _smoke[0] = smoke(request.config)
    return 20_000 if _smoke[0] else 1_000_000


@pytest.fixture(scope="module")
def spark(tmp_path_factory):
    pytest.importorskip("pyspark", reason="pyspark is not installed")
    pytest.importorskip("pyarrow", reason="pyarrow is not installed")
    if _java_missing():
        pytest.skip("no Java runtime for Spark (apt-get install default-jdk-headless)")
    from pyspark.sql import SparkSession

    import pylogq.spark

    scratch = tmp_path_factory.mktemp("spark-bench")
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
    builder = (
        SparkSession.builder.master("local[2]").appName("pylogq-benchmarks")
        .config("spark.driver.bindAddress", "127.0.0.1").config("spark.driver.host", "127.0.0.1")
        .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.session.timeZone", "UTC").config("spark.sql.shuffle.partitions", "2")
        .config("spark.driver.memory", "2g")
        .config("spark.local.dir", str(scratch / "local")).config("spark.sql.warehouse.dir", str(scratch / "wh"))
    )
    from pylogq.spark import jvm

    global _jvm_problem
    try:
        builder = jvm.configure(builder)
    except jvm.JvmReaderUnavailable as exc:
        _jvm_problem = str(exc)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    pylogq.spark.register(session)
    # The tasks below are functions of this file, which Spark's workers cannot import: ship them by value.
    from pyspark import cloudpickle

    cloudpickle.register_pickle_by_value(sys.modules[__name__])
    yield session
    session.stop()


#: Why the session has no JVM reader ('' when it has it).
_jvm_problem = ""


@pytest.fixture(scope="module")
def jvm_reader(spark):
    """The session's JVM reader, read_topic's default engine: its benchmarks skip with the reason without a JDK."""
    from pylogq.spark import jvm

    if not jvm.available(spark):
        pytest.skip(_jvm_problem or "the session has no JVM reader")


def _write_topic(directory: str, count: int, distinct: bool) -> None:
    """The topic written into a log directory with the bulk path, and closed.

    ``distinct``: every record's value its own random bytes. Otherwise one
    batch's worth of random values (BATCH of them) is written again in every
    batch: a topic of 5000 distinct values, which parquet stores as a
    dictionary (13 MB of parquet for 100 MB of values).
    """
    values = [os.urandom(100) for _ in range(BATCH)]
    b = pylogq.Broker(directory, **SETTINGS)
    b.create_topic(TOPIC, PARTITIONS)
    per_partition = count // PARTITIONS
    for p in range(PARTITIONS):
        for base in range(0, per_partition, BATCH):
            n = min(BATCH, per_partition - base)
            if distinct:
                values = [os.urandom(100) for _ in range(n)]
            # Timestamps grow with the offsets, a millisecond per record: a topic written over time.
            b.produce(TOPIC, p, build_batch(values[:n], timestamps=[TS + base + j for j in range(n)]))
    # Closed, so the files' committed bound (the high watermark checkpoint, written every 5 s and
    # at shutdown) holds every record: a slow setup (pure Python) would otherwise leave a
    # checkpoint taken midway, and the reads would rightly stop there.
    b.close()


@pytest.fixture(scope="module")
def broker(tmp_path_factory, count):
    """The topic in a broker's log directory, the broker serving it on a loopback port."""
    directory = str(tmp_path_factory.mktemp("spark-bench-log"))
    _write_topic(directory, count, distinct=False)
    b = pylogq.Broker(directory, **SETTINGS)
    host, port = b.serve("127.0.0.1", 0)
    b.bootstrap_servers = "%s:%d" % (host, port)  # type: ignore[attr-defined]
    yield b
    b.close()


@pytest.fixture(scope="module")
def parquet_path(spark, broker, tmp_path_factory):
    """The same rows as parquet, written once: the reference of both groups."""
    from pylogq.spark import read_topic

    path = str(tmp_path_factory.mktemp("parquet") / "bench.parquet")
    read_topic(spark, broker.data_dir, TOPIC).write.parquet(path)
    return path


@pytest.fixture(scope="module")
def warm(spark, broker, count, parquet_path):
    """Rounds of both groups' queries, pylogq's and parquet's in turn, before any is measured.

    The JVM keeps compiling for dozens of queries (Spark generates and loads
    code for each plan); a path measured first would otherwise meet a colder
    JIT than one measured later.
    """
    _warm_up(spark, broker.data_dir, parquet_path, count)


def _warm_up(spark: Any, directory: str, parquet: str, count: int) -> None:
    """Rounds of both groups' queries of one topic, pylogq's and parquet's in turn."""
    from pylogq.spark import read_topic

    for _ in range(1 if count < 1_000_000 else WARM_ROUNDS):
        for engine in ("auto", "python"):
            _run(read_topic(spark, directory, TOPIC, engine=engine), count)
            _run_values(read_topic(spark, directory, TOPIC, columns=["value"], engine=engine), count)
        _run(spark.read.parquet(parquet), count)
        _run_values(spark.read.parquet(parquet), count)


def _run(df: Any, count: int) -> None:
    row = df.selectExpr(*AGGREGATE).collect()[0]
    assert row["rows"] == count and row["value_bytes"] == 100 * count and row["topics"] == 1


def _run_values(df: Any, count: int) -> None:
    row = df.selectExpr("count(*) AS rows", "sum(length(value)) AS value_bytes").collect()[0]
    assert row["rows"] == count and row["value_bytes"] == 100 * count


def _bench(benchmark: Any, fn: Any, rounds: int = 5) -> None:
    if benchmark.disabled:
        benchmark(fn)
    elif _smoke[0]:
        benchmark.pedantic(fn, rounds=1, iterations=1)
    else:
        benchmark.pedantic(fn, rounds=rounds, iterations=1, warmup_rounds=1)


def test_direct_read_topic(benchmark, spark, jvm_reader, broker, count, warm):
    from pylogq.spark import read_topic

    info(benchmark, GROUP, count, "rows", target=TARGET)
    _bench(benchmark, lambda: _run(read_topic(spark, broker.data_dir, TOPIC), count), FAST_ROUNDS)


def test_read_topic_python(benchmark, spark, broker, count, warm):
    from pylogq.spark import read_topic

    info(benchmark, GROUP, count, "rows", target=TARGET)
    _bench(benchmark, lambda: _run(read_topic(spark, broker.data_dir, TOPIC, engine="python"), count),
           FAST_ROUNDS)


def test_direct_format_pylogq(benchmark, spark, broker, count, warm):
    info(benchmark, GROUP, count, "rows", target=TARGET)
    reader = spark.read.format("pylogq").option("source", broker.data_dir).option("topic", TOPIC)
    _bench(benchmark, lambda: _run(reader.load(), count), FAST_ROUNDS)


# -- the ceiling: prebuilt Arrow batches of the same rows ----------------------------------------


@pytest.fixture(scope="module")
def arrow_files(spark, broker, tmp_path_factory):
    """The topic's rows as one Arrow IPC file per task of ``read_topic``'s plan, decoded once in setup."""
    import pyarrow as pa

    from pylogq.spark import pack_splits, plan_splits, read_split
    from pylogq.spark.splits import arrow_schema

    directory = tmp_path_factory.mktemp("arrow")
    paths = []
    tasks = pack_splits(plan_splits(broker.data_dir, TOPIC), spark.sparkContext.defaultParallelism)
    for i, task in enumerate(tasks):
        path = str(directory / ("task-%d.arrow" % i))
        with pa.OSFile(path, "wb") as sink, pa.ipc.new_file(sink, arrow_schema()) as writer:
            for split in task:
                for batch in read_split(split):
                    writer.write_batch(batch)
        paths.append(path)
    return paths


def _register_prebuilt(spark: Any) -> None:
    from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

    from pylogq.spark import SPARK_SCHEMA_DDL

    class PrebuiltReader(DataSourceReader):
        def __init__(self, paths: List[str]) -> None:
            self.paths = paths

        def partitions(self) -> List[InputPartition]:
            return [InputPartition(p) for p in self.paths]

        def read(self, partition: InputPartition) -> Iterator[Any]:
            import pyarrow as pa

            with pa.memory_map(partition.value) as source:
                reader = pa.ipc.open_file(source)
                for i in range(reader.num_record_batches):
                    yield reader.get_batch(i)

    class PrebuiltSource(DataSource):
        @classmethod
        def name(cls) -> str:
            return "pylogq_bench_prebuilt"

        def schema(self) -> str:
            return SPARK_SCHEMA_DDL

        def reader(self, schema: Any) -> DataSourceReader:
            return PrebuiltReader(self.options["paths"].split("|"))

    spark.dataSource.register(PrebuiltSource)


def test_arrow_ceiling(benchmark, spark, arrow_files, count, warm):
    info(benchmark, GROUP, count, "rows", target=TARGET)
    _register_prebuilt(spark)
    reader = spark.read.format("pylogq_bench_prebuilt").option("paths", "|".join(arrow_files))
    _bench(benchmark, lambda: _run(reader.load(), count), FAST_ROUNDS)


# -- what users write without pylogq.spark --------------------------------------------------------


def _tuples_of_split(splits: Iterator[Any]) -> Iterator[tuple]:
    from pylogq.spark import read_split

    for split in splits:
        for batch in read_split(split):
            for r in batch.to_pylist():
                yield (r["key"], r["value"], r["topic"], r["partition"], r["offset"], r["timestamp"],
                       r["timestampType"], r["headers"])


def test_naive_tuples(benchmark, spark, broker, count):
    from pylogq.spark import SPARK_SCHEMA_DDL, plan_splits

    info(benchmark, GROUP, count, "rows", target=TARGET)
    splits = plan_splits(broker.data_dir, TOPIC)

    def run() -> None:
        rdd = spark.sparkContext.parallelize(splits, len(splits)).mapPartitions(_tuples_of_split)
        _run(spark.createDataFrame(rdd, SPARK_SCHEMA_DDL), count)

    _bench(benchmark, run)


class _ConsumerReader:
    """A task: a client's consumer reads each planned range [start, end) from the broker as row tuples."""

    def __init__(self, bootstrap: str) -> None:
        self.bootstrap = bootstrap

    def _open(self) -> Tuple[Any, Any]:
        """(a consumer, the client's TopicPartition type)."""
        raise NotImplementedError

    def _close(self, consumer: Any) -> None:
        consumer.close()

    def __call__(self, ranges: Iterator[Any]) -> Iterator[tuple]:
        epoch = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)
        consumer, topic_partition = self._open()
        try:
            for topic, partition, start, end in ranges:
                tp = topic_partition(topic, partition)
                consumer.assign([tp])
                consumer.seek(tp, start)
                position = start
                while position < end:
                    for records in consumer.poll(timeout_ms=5000).values():
                        for r in records:
                            if r.offset >= end:
                                break
                            yield (r.key, r.value, r.topic, r.partition, r.offset,
                                   epoch + datetime.timedelta(milliseconds=r.timestamp), r.timestamp_type,
                                   [{"key": k, "value": v} for k, v in r.headers] or None)
                            position = r.offset + 1
        finally:
            self._close(consumer)


class _KafkaPythonReader(_ConsumerReader):
    """kafka-python's consumer."""

    def _open(self) -> Tuple[Any, Any]:
        from kafka import KafkaConsumer, TopicPartition

        return KafkaConsumer(bootstrap_servers=self.bootstrap, enable_auto_commit=False, max_poll_records=5000,
                             fetch_max_bytes=50 * 1024 * 1024,
                             max_partition_fetch_bytes=16 * 1024 * 1024), TopicPartition


def test_kafka_python(benchmark, spark, broker, count):
    pytest.importorskip("kafka", reason="kafka-python is not installed")

    info(benchmark, GROUP, count, "rows", target=TARGET)
    _bench_consumer_path(benchmark, spark, broker, count, _KafkaPythonReader(broker.bootstrap_servers))


def _bench_consumer_path(benchmark: Any, spark: Any, broker: Any, count: int, reader: Any) -> None:
    """A client's consumer in ``mapPartitions``, one task per planned split, rows as tuples."""
    from pylogq.spark import SPARK_SCHEMA_DDL, plan_splits

    ranges = [(s.topic, s.partition, s.start_offset, s.end_offset) for s in plan_splits(broker.data_dir, TOPIC)]

    def run() -> None:
        rdd = spark.sparkContext.parallelize(ranges, len(ranges)).mapPartitions(reader)
        _run(spark.createDataFrame(rdd, SPARK_SCHEMA_DDL), count)

    _bench(benchmark, run)


# -- the native reference ---------------------------------------------------------------------------


def test_parquet(benchmark, spark, parquet_path, count, warm):
    info(benchmark, GROUP, count, "rows", peer=True, target=TARGET)
    _bench(benchmark, lambda: _run(spark.read.parquet(parquet_path), count), FAST_ROUNDS)


# -- the consumer path ------------------------------------------------------------------------------


class _PylogqConsumerReader(_ConsumerReader):
    """pylogq's Consumer."""

    def _open(self) -> Tuple[Any, Any]:
        from pylogq import Consumer
        from pylogq.client.consumer import TopicPartition

        return Consumer(bootstrap_servers=self.bootstrap, enable_auto_commit=False, max_poll_records=5000), TopicPartition

    def _close(self, consumer: Any) -> None:
        consumer.close(autocommit=False)


def test_pylogq_consumer(benchmark, spark, broker, count):
    info(benchmark, GROUP, count, "rows", target="direct >= 10x pylogq's Consumer in mapPartitions")
    _bench_consumer_path(benchmark, spark, broker, count, _PylogqConsumerReader(broker.bootstrap_servers))


# -- one column ------------------------------------------------------------------------------------

VALUE_GROUP = "spark value only 100B"
VALUE_TARGET = "direct >= 0.6x parquet"


def test_value_only_direct(benchmark, spark, jvm_reader, broker, count, warm):
    from pylogq.spark import read_topic

    info(benchmark, VALUE_GROUP, count, "rows", target=VALUE_TARGET)
    _bench(benchmark, lambda: _run_values(read_topic(spark, broker.data_dir, TOPIC, columns=["value"]), count),
           FAST_ROUNDS)


def test_value_only_pruned_by_spark(benchmark, spark, jvm_reader, broker, count, warm):
    """The same query over every column of read_topic: Spark prunes the JVM reader's scan to the values."""
    from pylogq.spark import read_topic

    info(benchmark, VALUE_GROUP, count, "rows", target=VALUE_TARGET)
    _bench(benchmark, lambda: _run_values(read_topic(spark, broker.data_dir, TOPIC), count), FAST_ROUNDS)


def test_value_only_python(benchmark, spark, broker, count, warm):
    from pylogq.spark import read_topic

    info(benchmark, VALUE_GROUP, count, "rows", target=VALUE_TARGET)
    _bench(benchmark, lambda: _run_values(read_topic(spark, broker.data_dir, TOPIC, columns=["value"],
                                                     engine="python"), count), FAST_ROUNDS)


def test_value_only_format_pylogq(benchmark, spark, broker, count, warm):
    info(benchmark, VALUE_GROUP, count, "rows", target=VALUE_TARGET)
    reader = (spark.read.format("pylogq").option("source", broker.data_dir).option("topic", TOPIC)
              .schema("value BINARY"))
    _bench(benchmark, lambda: _run_values(reader.load(), count), FAST_ROUNDS)


def test_value_only_parquet(benchmark, spark, parquet_path, count, warm):
    info(benchmark, VALUE_GROUP, count, "rows", peer=True, target=VALUE_TARGET)
    _bench(benchmark, lambda: _run_values(spark.read.parquet(parquet_path), count), FAST_ROUNDS)


# -- distinct values ---------------------------------------------------------------------------------

DISTINCT_GROUP = "spark read 100B distinct"
DISTINCT_VALUE_GROUP = "spark value only 100B distinct"


@pytest.fixture(scope="module")
def distinct_dir(tmp_path_factory, count):
    """A log directory of the same topic with every value distinct, as most topics' values are."""
    directory = str(tmp_path_factory.mktemp("spark-bench-distinct"))
    _write_topic(directory, count, distinct=True)
    return directory


@pytest.fixture(scope="module")
def distinct_parquet(spark, distinct_dir, tmp_path_factory):
    """Its rows as parquet (no dictionary: 111 MB for 1M rows)."""
    from pylogq.spark import read_topic

    path = str(tmp_path_factory.mktemp("parquet-distinct") / "bench.parquet")
    read_topic(spark, distinct_dir, TOPIC).write.parquet(path)
    return path


@pytest.fixture(scope="module")
def warm_distinct(spark, distinct_dir, count, distinct_parquet, warm):
    """``warm``'s rounds, for the distinct topic's queries."""
    _warm_up(spark, distinct_dir, distinct_parquet, count)


def test_distinct_direct_read_topic(benchmark, spark, jvm_reader, distinct_dir, count, warm_distinct):
    from pylogq.spark import read_topic

    info(benchmark, DISTINCT_GROUP, count, "rows", target=VALUE_TARGET)
    _bench(benchmark, lambda: _run(read_topic(spark, distinct_dir, TOPIC), count), FAST_ROUNDS)


def test_distinct_read_topic_python(benchmark, spark, distinct_dir, count, warm_distinct):
    from pylogq.spark import read_topic

    info(benchmark, DISTINCT_GROUP, count, "rows", target=VALUE_TARGET)
    _bench(benchmark, lambda: _run(read_topic(spark, distinct_dir, TOPIC, engine="python"), count), FAST_ROUNDS)


def test_distinct_parquet(benchmark, spark, distinct_parquet, count, warm_distinct):
    info(benchmark, DISTINCT_GROUP, count, "rows", peer=True, target=VALUE_TARGET)
    _bench(benchmark, lambda: _run(spark.read.parquet(distinct_parquet), count), FAST_ROUNDS)


def test_distinct_value_only_direct(benchmark, spark, jvm_reader, distinct_dir, count, warm_distinct):
    from pylogq.spark import read_topic

    info(benchmark, DISTINCT_VALUE_GROUP, count, "rows", target=VALUE_TARGET)
    _bench(benchmark, lambda: _run_values(read_topic(spark, distinct_dir, TOPIC, columns=["value"]), count),
           FAST_ROUNDS)


def test_distinct_value_only_python(benchmark, spark, distinct_dir, count, warm_distinct):
    from pylogq.spark import read_topic

    info(benchmark, DISTINCT_VALUE_GROUP, count, "rows", target=VALUE_TARGET)
    _bench(benchmark, lambda: _run_values(read_topic(spark, distinct_dir, TOPIC, columns=["value"], engine="python"),
                                          count), FAST_ROUNDS)


def test_distinct_value_only_parquet(benchmark, spark, distinct_parquet, count, warm_distinct):
    info(benchmark, DISTINCT_VALUE_GROUP, count, "rows", peer=True, target=VALUE_TARGET)
    _bench(benchmark, lambda: _run_values(spark.read.parquet(distinct_parquet), count), FAST_ROUNDS)


# -- a timestamp filter -----------------------------------------------------------------------------


def _read_chars() -> int:
    with open("/proc/self/io") as f:
        return int(next(line for line in f if line.startswith("rchar:")).split()[1])


def test_timestamp_filter_bytes(benchmark, broker, count):
    """The last 1% of the topic by timestamp: the bytes the planner and the reader read, against
    the bytes of the topic's segment files."""
    from pylogq.spark import Pushdown, plan_splits, read_split

    per_partition = count // PARTITIONS
    pushdown = Pushdown(min_timestamp=TS + per_partition - per_partition // 100)
    total = sum(os.path.getsize(os.path.join(root, name)) for root, _, names in os.walk(broker.data_dir)
                for name in names if name.endswith(".log") and os.path.basename(root).startswith(TOPIC + "-"))
    info(benchmark, "spark timestamp filter 1%", count, "rows", target="reads <= 5% of the topic's bytes")
    outcome = {}

    def run() -> None:
        before = _read_chars()
        rows = sum(batch.num_rows for split in plan_splits(broker.data_dir, TOPIC, pushdown=pushdown)
                   for batch in read_split(split, pushdown=pushdown))
        outcome.update(rows=rows, read=_read_chars() - before)

    run()  # once before measuring: the first read imports pyarrow, whose files rchar counts too
    _bench(benchmark, run)
    assert outcome["rows"] == PARTITIONS * (per_partition // 100)
    share = outcome["read"] / total
    benchmark.extra_info.update(bytes_read=outcome["read"], topic_bytes=total, share=round(share, 4))
    if not _smoke[0]:  # (the smoke run's topic is 4 batches per partition: 1% of it is in one)
        assert share <= 0.05, "read %d of %d bytes (%.1f%%)" % (outcome["read"], total, 100 * share)


def _jvm_read_chars(spark: Any) -> int:
    """The bytes the session's JVM (driver and local executors: one process) has read so far."""
    pid = spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid()
    with open("/proc/%d/io" % pid) as f:
        return int(next(line for line in f if line.startswith("rchar:")).split()[1])


def test_timestamp_filter_bytes_jvm(benchmark, spark, jvm_reader, broker, count, warm):
    """The same 1% as a filter on read_topic's DataFrame, which Spark pushes into the JVM reader's
    scan: the bytes the JVM reads (its /proc rchar, which counts everything the process reads,
    about 150 kB per query of Spark's own) and the planner's, against the topic's segment files."""
    import datetime

    from pylogq.spark import read_topic

    per_partition = count // PARTITIONS
    since = datetime.datetime.fromtimestamp((TS + per_partition - per_partition // 100) / 1000,
                                            tz=datetime.timezone.utc)
    total = sum(os.path.getsize(os.path.join(root, name)) for root, _, names in os.walk(broker.data_dir)
                for name in names if name.endswith(".log") and os.path.basename(root).startswith(TOPIC + "-"))
    info(benchmark, "spark timestamp filter 1% (JVM reader)", count, "rows",
         target="reads <= 5% of the topic's bytes")
    outcome = {}

    def run() -> None:
        before, jvm_before = _read_chars(), _jvm_read_chars(spark)
        df = read_topic(spark, broker.data_dir, TOPIC)
        last = df.filter(df.timestamp >= since)
        row = last.selectExpr("count(*) AS rows", "sum(length(value)) AS value_bytes").collect()[0]
        outcome.update(rows=row["rows"], read=_read_chars() - before + _jvm_read_chars(spark) - jvm_before)

    run()
    _bench(benchmark, run)
    assert outcome["rows"] == PARTITIONS * (per_partition // 100)
    share = outcome["read"] / total
    benchmark.extra_info.update(bytes_read=outcome["read"], topic_bytes=total, share=round(share, 4))
    if not _smoke[0]:
        assert share <= 0.05, "read %d of %d bytes (%.1f%%)" % (outcome["read"], total, 100 * share)



def _since(count: int) -> datetime.datetime:
    """The first timestamp of the last 1% of each partition, as the parquet column holds it."""
    per_partition = count // PARTITIONS
    return datetime.datetime.fromtimestamp((TS + per_partition - per_partition // 100) / 1000,
                                           tz=datetime.timezone.utc)


def test_timestamp_filter_parquet(benchmark, parquet_path, count):
    """The reference of the 1% filter: pyarrow reading the same rows' parquet with the same filter."""
    import pyarrow as pa
    import pyarrow.dataset as ds
    import pyarrow.parquet as pq

    per_partition = count // PARTITIONS
    # Spark writes its timestamps as INT96, which pyarrow reads as UTC without a zone: compare alike.
    column = ds.dataset(parquet_path, format="parquet").schema.field("timestamp").type
    since = pa.scalar(_since(count) if column.tz else _since(count).replace(tzinfo=None), type=column)
    info(benchmark, "spark timestamp filter 1%", count, "rows", peer=True)
    outcome = {}

    def run() -> None:
        before = _read_chars()
        table = pq.read_table(parquet_path, filters=[("timestamp", ">=", since)])
        outcome.update(rows=table.num_rows, read=_read_chars() - before)

    run()
    _bench(benchmark, run)
    assert outcome["rows"] == PARTITIONS * (per_partition // 100)
    benchmark.extra_info.update(bytes_read=outcome["read"])


def test_timestamp_filter_parquet_spark(benchmark, spark, parquet_path, count, warm):
    """The reference of the JVM reader's 1% filter: the same query on the same rows' parquet in Spark."""
    per_partition = count // PARTITIONS
    since = _since(count)
    info(benchmark, "spark timestamp filter 1% (JVM reader)", count, "rows", peer=True)
    outcome = {}

    def run() -> None:
        df = spark.read.parquet(parquet_path)
        last = df.filter(df.timestamp >= since)
        row = last.selectExpr("count(*) AS rows", "sum(length(value)) AS value_bytes").collect()[0]
        outcome.update(rows=row["rows"])

    run()
    _bench(benchmark, run)
    assert outcome["rows"] == PARTITIONS * (per_partition // 100)
