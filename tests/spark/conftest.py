"""One local[2] SparkSession for the whole run, and the topics the Spark tests read.

A session takes 4-5 s to start, so it is session-scoped. It is hermetic: the
driver binds loopback only, no UI, workers run this interpreter (which has
pyarrow), scratch files go under pytest's temporary directory. Without pyspark
or a Java runtime the Spark tests skip with the reason (a failure under
``PYLOGQ_REQUIRE_ALL=1``).

The data: topic ``mixed`` (4 partitions, one batch codec after another,
keyed and keyless records, headers, small segments) and topic ``compacted``
(cleaned, so its offsets have gaps, with tombstones), written by pylogq's
producer and closed, so the files carry the committed high watermark. The
expected rows are what a pylogq Consumer reads back.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zlib
from typing import Any, Dict, Iterator, List, NamedTuple, Tuple

import pytest

import pylogq
from pylogq.storage.cleaner import LogCleaner

MIXED_RECORDS = 20000
PARTITIONS = 4
CODECS = (None, "gzip", "snappy", "lz4", "zstd")
SEGMENT_BYTES = 32 * 1024


def _java_problem() -> str:
    """Why Spark cannot start a JVM here ('' when it can)."""
    java_home = os.environ.get("JAVA_HOME")
    java = os.path.join(java_home, "bin", "java") if java_home else shutil.which("java")
    if not java or not os.path.exists(java):
        return ("no Java runtime (java on PATH or JAVA_HOME) for Spark; on Debian: apt-get install "
                "default-jdk-headless (a JDK: for Spark, and to build pylogq's JVM reader)")
    try:
        subprocess.run([java, "-version"], capture_output=True, check=True, timeout=60)
    except (OSError, subprocess.SubprocessError) as exc:
        return "the Java runtime %s does not run: %s" % (java, exc)
    return ""


#: Why the session has no JVM reader ('' when it has it).
_jvm_problem = ""


@pytest.fixture(scope="session")
def spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """A local[2] SparkSession with pylogq's data source registered and its JVM reader on the classpath."""
    global _jvm_problem
    pytest.importorskip("pyspark", reason="pyspark is not installed (pip install 'pyspark>=4.0' pyarrow 'pandas<3')")
    pytest.importorskip("pyarrow", reason="pyarrow is not installed")
    problem = _java_problem()
    if problem:
        pytest.skip(problem)
    from pyspark.sql import SparkSession

    import pylogq.spark

    scratch = tmp_path_factory.mktemp("spark")
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
    session = (
        SparkSession.builder.master("local[2]")
        .appName("pylogq-tests")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.local.dir", str(scratch / "local"))
        .config("spark.sql.warehouse.dir", str(scratch / "warehouse"))
        .config("spark.sql.streaming.forceDeleteTempCheckpointLocation", "true")
    )
    from pylogq.spark import jvm

    try:
        session = jvm.configure(session)
    except jvm.JvmReaderUnavailable as exc:
        _jvm_problem = str(exc)
    session = session.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    pylogq.spark.register(session)
    # PySpark's first column expression imports IPython for its error call sites, and IPython's
    # jedi raises the recursion limit: here, rather than inside a hypothesis test, which warns.
    from pyspark.sql import functions

    _ = functions.col("offset") >= 0
    try:
        yield session
    finally:
        session.stop()


@pytest.fixture(params=[pytest.param("jvm", marks=pytest.mark.compiled_pass), "python"])
def engine(request: pytest.FixtureRequest, spark: Any) -> str:
    """Each of read_topic's engines in turn; the JVM reader's runs skip (with the reason) without a JDK.
    (The JVM reader is Java either way: its runs are the compiled pass's only.)"""
    if request.param == "jvm":
        from pylogq.spark import jvm

        if not jvm.available(spark):
            pytest.skip(_jvm_problem or "the session has no JVM reader")
    return str(request.param)


class Expected(NamedTuple):
    """A topic's files and what a pylogq Consumer reads from them."""

    log_dir: str
    topic: str
    rows: List[Tuple[Any, ...]]  # (partition, offset, key, value, timestamp ms, timestamp type, headers)

    def summary(self) -> Dict[int, Tuple[int, int]]:
        return summarize(self.rows)


def checksum(partition: int, offset: int, key: Any, value: Any) -> int:
    """One row's share of a partition's checksum; the Spark side computes the same with crc32()."""
    return (offset + 3 * zlib.crc32(key or b"") + 7 * zlib.crc32(value or b"")
            + 11 * (key is None) + 13 * (value is None))


def summarize(rows: List[Tuple[Any, ...]]) -> Dict[int, Tuple[int, int]]:
    """Per partition: (row count, checksum over key, value and offset)."""
    out: Dict[int, Tuple[int, int]] = {}
    for row in rows:
        count, total = out.get(row[0], (0, 0))
        out[row[0]] = (count + 1, total + checksum(row[0], row[1], row[2], row[3]))
    return out


def spark_summary(df: Any) -> Dict[int, Tuple[int, int]]:
    """The same summary computed by Spark over a DataFrame with Kafka-source columns."""
    rows = df.selectExpr(
        "partition",
        "offset + 3 * crc32(coalesce(key, X'')) + 7 * crc32(coalesce(value, X''))"
        " + 11 * cast(key IS NULL AS BIGINT) + 13 * cast(value IS NULL AS BIGINT) AS c",
    ).groupBy("partition").agg({"*": "count", "c": "sum"}).collect()
    return {r["partition"]: (r["count(1)"], r["sum(c)"]) for r in rows}


def spark_rows(df: Any) -> List[Tuple[Any, ...]]:
    """Every row of a Kafka-source DataFrame as the tuples of :class:`Expected`, sorted."""
    table = df.selectExpr("partition", "offset", "key", "value", "unix_millis(timestamp) AS ts", "timestampType",
                          "headers").toArrow()
    out = []
    for r in table.to_pylist():
        headers = tuple((h["key"], h["value"]) for h in (r["headers"] or ()))
        out.append((r["partition"], r["offset"], r["key"], r["value"], r["ts"], r["timestampType"], headers))
    out.sort(key=lambda row: (row[0], row[1]))
    return out


def consume_all(log_dir: str, topic: str) -> List[Tuple[Any, ...]]:
    """Every record of ``topic`` as a pylogq Consumer reads it, over an in-process broker on ``log_dir``."""
    broker = pylogq.Broker(log_dir, **{"offsets.topic.num.partitions": 1})
    try:
        consumer = pylogq.Consumer(broker=broker, auto_offset_reset="earliest", enable_auto_commit=False)
        parts = [pylogq.client.consumer.TopicPartition(topic, p) for p in range(broker.partitions_for(topic))]
        consumer.assign(parts)
        ends = consumer.end_offsets(parts)
        rows: List[Tuple[Any, ...]] = []
        while any(consumer.position(tp) < end for tp, end in ends.items()):
            for records in consumer.poll(timeout_ms=1000).values():
                for r in records:
                    rows.append((r.partition, r.offset, r.key, r.value, r.timestamp, r.timestamp_type,
                                 tuple(r.headers)))
        consumer.close()
    finally:
        broker.close()
    rows.sort(key=lambda row: (row[0], row[1]))
    return rows


def write_mixed(broker: pylogq.Broker, topic: str, count: int, start: int = 0, partitions: int = PARTITIONS) -> None:
    """``count`` records over the topic's partitions, one codec after another, some keyed, some with headers."""
    step = max(1, count // (2 * len(CODECS)))
    i = start
    end = start + count
    round_ = 0
    while i < end:
        n = min(step, end - i)
        codec = CODECS[round_ % len(CODECS)]
        # Batches well under the tests' small segment.bytes, which a batch may not exceed.
        producer = pylogq.Producer(broker=broker, compression_type=codec, linger_ms=5, batch_size=4096)
        futures = []
        try:
            for j in range(i, i + n):
                key = None if j % 3 == 0 else b"key-%d" % (j % 997)
                value = (b"value-%08d-" % j) + bytes([65 + j % 26]) * (j % 120)
                headers = [("h", b"%d" % j), ("empty", b"")] if j % 5 == 0 else None
                futures.append(producer.send(topic, value=value, key=key, headers=headers, partition=j % partitions,
                                             timestamp_ms=1700000000000 + j))
            producer.flush()
            failed = [f.exception for f in futures if f.exception is not None]
            assert not failed, "%d sends failed: %r" % (len(failed), failed[0])
        finally:
            producer.close()
        i += n
        round_ += 1


@pytest.fixture(scope="session")
def mixed_topic(tmp_path_factory: pytest.TempPathFactory) -> Expected:
    """Topic ``mixed`` in a closed log dir: 20k records over 4 partitions, every codec, small segments."""
    log_dir = str(tmp_path_factory.mktemp("mixed"))
    broker = pylogq.Broker(log_dir)
    try:
        broker.create_topic("mixed", PARTITIONS, config={"segment.bytes": SEGMENT_BYTES})
        write_mixed(broker, "mixed", MIXED_RECORDS)
    finally:
        broker.close()
    return Expected(log_dir, "mixed", consume_all(log_dir, "mixed"))


@pytest.fixture(scope="session")
def compacted_topic(tmp_path_factory: pytest.TempPathFactory) -> Expected:
    """Topic ``compacted``: keys rewritten many times, some deleted, cleaned (offset gaps, tombstones)."""
    log_dir = str(tmp_path_factory.mktemp("compacted"))
    broker = pylogq.Broker(log_dir)
    try:
        broker.create_topic("compacted", 2, config={"cleanup.policy": "compact", "segment.bytes": 16 * 1024,
                                                    "delete.retention.ms": 86400000})
        producer = pylogq.Producer(broker=broker, compression_type="lz4", batch_size=4096)
        futures = []
        for j in range(6000):
            key = b"k%03d" % (j % 150)
            value = None if j % 41 == 0 else b"v-%d" % j
            futures.append(producer.send("compacted", value=value, key=key, partition=j % 2,
                                         timestamp_ms=1700000000000 + j))
        producer.flush()
        assert all(f.exception is None for f in futures)
        producer.close()
        cleaner = LogCleaner(broker.logs)
        for p in range(2):
            log = broker.logs.get_log("compacted", p)
            assert log is not None
            log.roll()
            cleaner.clean_log(log)
    finally:
        broker.close()
    expected = Expected(log_dir, "compacted", consume_all(log_dir, "compacted"))
    offsets = [row[1] for row in expected.rows if row[0] == 0]
    assert len(offsets) < offsets[-1] + 1, "the cleaner left no offset gaps to test"
    return expected
