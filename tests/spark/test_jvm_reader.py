"""The JVM reader (pylogq.spark.jvm): Spark DataFrames of segment files read in Spark's own task threads.

Every projection, whether named to read_topic or left to Spark's pruning, must give
exactly a Consumer's rows: logs with every codec, v0/v1 sets, a transaction marker,
LogAppendTime and compaction gaps (the ``logs`` fixture of test_splits.py). Bad bytes
fail the read with a message that says what is wrong, and the reader's jar is built
from the package's Java sources, with clear errors when it cannot be.
"""

from __future__ import annotations

import logging
import os
import re
import struct
from typing import Any, List, Sequence, Tuple

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pa = pytest.importorskip("pyarrow")

import pylogq.spark  # noqa: E402
from pylogq import Broker, records  # noqa: E402
from pylogq.errors import PylogqError  # noqa: E402
from pylogq.spark import Split, _jvm_read, _spark_schema, jvm, read_topic  # noqa: E402
from pylogq.spark.splits import read_split  # noqa: E402

from .test_pushdown import PROJECTIONS, TOPICS, _draw_pushdown, _expected_rows, _keep  # noqa: E402
from .test_splits import TS, logs  # noqa: E402,F401 - the fixture, shared

# The reader is Java, the same in both passes; the Python it is compared with has its own tests in both.
pytestmark = pytest.mark.compiled_pass


@pytest.fixture
def on_jvm(spark: Any) -> Any:
    """The session, which must have the JVM reader (a skip with the reason without a JDK)."""
    from .conftest import _jvm_problem

    if not jvm.available(spark):
        pytest.skip(_jvm_problem or "the session has no JVM reader")
    return spark


def _tuples(df: Any, columns: Sequence[str]) -> List[Tuple[Any, ...]]:
    """The DataFrame's rows as test_pushdown's tuples (timestamps in ms, headers as pairs or None)."""
    exprs = ["unix_millis(timestamp) AS timestamp" if c == "timestamp" else "`%s`" % c for c in columns]
    out = []
    for r in df.selectExpr(*exprs).toArrow().to_pylist():
        row = []
        for c in columns:
            v = r[c]
            if c == "headers" and v is not None:
                v = [(h["key"], h["value"]) for h in v]
            row.append(v)
        out.append(tuple(row))
    return out


def _in_order(rows: List[Tuple[Any, ...]], columns: Sequence[str]) -> List[Tuple[Any, ...]]:
    """Rows sorted by partition and offset when the projection has them (the tasks' order otherwise)."""
    if "offset" not in columns:
        return rows
    keys = [columns.index("offset")] + ([columns.index("partition")] if "partition" in columns else [])
    return sorted(rows, key=lambda r: tuple(r[k] for k in reversed(keys)))


@pytest.mark.parametrize("topic", TOPICS)
@pytest.mark.parametrize("columns", PROJECTIONS, ids=lambda c: "-".join(c))
def test_projections_equal_what_a_consumer_reads(on_jvm: Any, logs: Any, topic: str, columns: List[str]) -> None:
    data_dir, expected = logs
    want = _expected_rows(expected[topic], columns, topic)
    named = read_topic(on_jvm, data_dir, topic, columns=columns, max_split_bytes=3000, engine="jvm")
    assert named.columns == columns
    assert _in_order(_tuples(named, columns), columns) == _in_order(want, columns)
    # The same projection left to Spark: it prunes the scan to those columns by itself.
    pruned = read_topic(on_jvm, data_dir, topic, engine="jvm").select(*columns)
    scan = pruned._jdf.queryExecution().executedPlan().toString()
    read = re.search(r"pylogq segments \[([^\]]*)\]", scan)
    assert read is not None and set(read.group(1).split(", ")) == set(columns), scan
    assert _in_order(_tuples(pruned, columns), columns) == _in_order(want, columns)


def test_small_batches_and_timestamp_bounds(on_jvm: Any, logs: Any) -> None:
    data_dir, expected = logs
    columns = ["partition", "offset", "timestamp", "value", "headers"]
    for batch_rows in (1, 7, 1000):
        df = read_topic(on_jvm, data_dir, "mixed", columns=columns, batch_rows=batch_rows, engine="jvm")
        assert _in_order(_tuples(df, columns), columns) == _expected_rows(expected["mixed"], columns, "mixed")
    start, end = TS + 1500, TS + 2300
    df = read_topic(on_jvm, data_dir, "mixed", columns=columns, starting_timestamp=start, ending_timestamp=end,
                    engine="jvm")
    python = read_topic(on_jvm, data_dir, "mixed", columns=columns, starting_timestamp=start,
                        ending_timestamp=end, engine="python")
    got = _in_order(_tuples(df, columns), columns)
    assert got and got == _in_order(_tuples(python, columns), columns)


def test_header_keys_that_are_not_utf8_decode_as_kafkas_client_does(on_jvm: Any, tmp_path: Any) -> None:
    broker = Broker(str(tmp_path), log_cleaner_enable=False)
    broker.create_topic("h", 1)
    headers = [[("ok", b"1")], [], [(b"\xff\xfeb\xc3(".decode("utf-8", "surrogateescape"), None), ("", b"")]]
    broker.produce("h", 0, records.build_batch([b"a", b"b", b"c"], headers=headers))
    broker.close()
    columns = ["offset", "headers"]
    jvm_rows = _tuples(read_topic(on_jvm, str(tmp_path), "h", columns=columns, engine="jvm"), columns)
    python_rows = _tuples(read_topic(on_jvm, str(tmp_path), "h", columns=columns, engine="python"), columns)
    assert jvm_rows == python_rows
    assert jvm_rows == [(0, [("ok", b"1")]), (1, None), (2, [("\ufffd\ufffdb\ufffd(", None), ("", b"")])]


def _one_segment(tmp_path: Any, batches: int = 5) -> str:
    broker = Broker(str(tmp_path), log_cleaner_enable=False)
    broker.create_topic("t", 1)
    for i in range(batches):
        broker.produce("t", 0, records.build_batch([b"value %d.%d" % (i, j) for j in range(10)],
                                                   timestamps=TS + i, compression_type="zstd" if i % 2 else "none"))
    broker.close()
    return os.path.join(str(tmp_path), "t-0", "%020d.log" % 0)


def test_a_batch_with_a_bad_crc_fails_the_read_with_its_offset(on_jvm: Any, tmp_path: Any) -> None:
    path = _one_segment(tmp_path)
    with open(path, "r+b") as f:
        data = bytearray(f.read())
        second = 12 + struct.unpack_from(">i", data, 8)[0]  # the second batch: offsets 10..19, compressed
        data[second + 70] ^= 0xFF
        f.seek(0)
        f.write(data)
    df = read_topic(on_jvm, str(tmp_path), "t", engine="jvm")
    with pytest.raises(Exception) as failure:
        df.selectExpr("sum(length(value))").collect()
    assert "CRC" in str(failure.value) and "10" in str(failure.value)
    # Reading only the offsets needs no batch's records: the headers suffice, as in the Python reader
    # (and a count, which reads no column at all).
    assert read_topic(on_jvm, str(tmp_path), "t", columns=["offset"], engine="jvm").count() == 50
    assert df.count() == 50


def test_a_torn_tail_ends_the_read_where_whole_batches_end(on_jvm: Any, tmp_path: Any) -> None:
    """A batch still being written (its bytes cut short) or a preallocated zero tail is not read."""
    path = _one_segment(tmp_path)
    whole = os.path.getsize(path)
    tail = bytes(records.build_batch([b"late"] * 3))
    tail = struct.pack(">q", 50) + tail[8:]
    for torn in (tail[:30], tail[:-1], b"\x00" * 4096):
        with open(path, "r+b") as f:
            f.truncate(whole)
            f.seek(whole)
            f.write(torn)
        for columns in (["offset", "value"], ["offset"]):
            # A split past the committed end (the planner never makes one), so the reader meets the tail.
            split = Split("t", 0, os.path.dirname(path), 0, 53)
            df = _jvm_read(on_jvm, [[split]], _spark_schema(tuple(columns)), True, 65536)
            assert [r[0] for r in _tuples(df, columns)] == list(range(50)), (torn[:20], columns)


def test_both_engines_seek_through_a_stale_index_alike(on_jvm: Any, tmp_path: Any) -> None:
    """An index left stale by a crash (an entry naming another batch's position, a position that goes
    back) is trusted only as far as the index rules allow and checked against the log: both engines
    read exactly the split's records from any start."""
    path = _one_segment(tmp_path, batches=8)  # offsets 10*i .. 10*i+9 in batch i
    positions, position = [], 0
    with open(path, "rb") as f:
        data = f.read()
    while position < len(data):
        positions.append(position)
        position += 12 + struct.unpack_from(">i", data, position + 8)[0]
    entries = [(9, positions[0]), (19, positions[1]), (29, positions[1]), (39, positions[3]),
               (49, positions[4]), (59, positions[2]), (69, positions[6])]
    with open(path[:-4] + ".index", "wb") as f:
        f.write(b"".join(struct.pack(">ii", *e) for e in entries) + bytes(8 * 16))
    columns = ["offset", "value"]
    for start, end in ((0, 80), (25, 80), (31, 47), (45, 62), (61, 80), (79, 80)):
        split = Split("t", 0, os.path.dirname(path), start, end)
        jvm_rows = _tuples(_jvm_read(on_jvm, [[split]], _spark_schema(tuple(columns)), True, 65536), columns)
        python_rows = [(r["offset"], r["value"]) for b in read_split(split, columns=columns)
                       for r in b.to_pylist()]
        expected = [(o, b"value %d.%d" % divmod(o, 10)) for o in range(start, end)]
        assert jvm_rows == python_rows == expected, (start, end)


def test_engine_choice(spark: Any, mixed_topic: Any, monkeypatch: pytest.MonkeyPatch,
                       caplog: pytest.LogCaptureFixture) -> None:
    with pytest.raises(ValueError, match="engine"):
        read_topic(spark, mixed_topic.log_dir, "mixed", engine="scala")
    plan = read_topic(spark, mixed_topic.log_dir, "mixed")._jdf.queryExecution().executedPlan().toString()
    assert "MapInArrow" not in plan and "BatchScan pylogq segments" in plan

    def no_reader(session: Any, cache_dir: Any = None) -> None:
        raise jvm.JvmReaderUnavailable("no Java compiler: the JVM reader needs a JDK")

    monkeypatch.setattr(jvm, "attach", no_reader)
    with pytest.raises(jvm.JvmReaderUnavailable, match="no Java compiler"):
        read_topic(spark, mixed_topic.log_dir, "mixed", engine="jvm")
    # auto falls back to the Python workers, and says once why and how to get the reader.
    monkeypatch.setattr(pylogq.spark, "_told_python_engine", False)
    with caplog.at_level(logging.WARNING, logger="pylogq.spark"):
        for _ in range(2):
            plan = read_topic(spark, mixed_topic.log_dir, "mixed")._jdf.queryExecution().executedPlan().toString()
            assert "MapInArrow" in plan
    told = [r.getMessage() for r in caplog.records if r.name == "pylogq.spark"]
    assert len(told) == 1 and "Python engine" in told[0] and "no Java compiler" in told[0] and "configure" in told[0]


def test_the_jar_is_built_once_per_source_and_spark(tmp_path: Any) -> None:
    try:
        first = jvm.jar_path(str(tmp_path))
    except jvm.JvmReaderUnavailable as exc:
        pytest.skip(str(exc))
    assert os.path.basename(first).startswith("pylogq-spark-") and first.endswith(".jar")
    built = os.path.getmtime(first)
    assert jvm.jar_path(str(tmp_path)) == first and os.path.getmtime(first) == built
    assert [n for n in os.listdir(str(tmp_path))] == [os.path.basename(first)]  # no build directory left behind
    import zipfile

    names = zipfile.ZipFile(first).namelist()
    assert "pylogq/spark/jvm/SegmentSource.class" in names and "META-INF/MANIFEST.MF" in names


def test_clear_errors_when_the_jar_cannot_be_built(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    monkeypatch.delenv("JAVA_HOME", raising=False)
    with pytest.raises(jvm.JvmReaderUnavailable, match="javac"):
        jvm.jar_path(str(tmp_path / "cache"))
    monkeypatch.undo()
    sources = tmp_path / "java"
    sources.mkdir()
    (sources / "Broken.java").write_text("class Broken { int x = ; }\n")
    monkeypatch.setattr(jvm, "JAVA_DIR", str(sources))
    try:
        jvm._javac()
    except jvm.JvmReaderUnavailable as exc:
        pytest.skip(str(exc))
    with pytest.raises(PylogqError, match="(?s)does not compile.*Broken.java"):
        jvm.jar_path(str(tmp_path / "cache"))
    assert not [n for n in os.listdir(str(tmp_path / "cache")) if n.endswith(".jar")]


# -- filters ---------------------------------------------------------------------------------------


def _utc(ms: int) -> Any:
    import datetime

    return datetime.datetime.fromtimestamp(ms / 1000, tz=datetime.timezone.utc)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_filters_give_exactly_the_consumers_rows(on_jvm: Any, logs: Any, data: st.DataObject) -> None:
    """Spark's filters on partition, offset and timestamp, pushed into the scan (and applied again by Spark)."""
    from pyspark.sql import functions as F

    data_dir, expected = logs
    topic = data.draw(st.sampled_from(TOPICS))
    bounds = _draw_pushdown(data, expected[topic])
    columns = data.draw(st.sampled_from(PROJECTIONS))
    df = read_topic(on_jvm, data_dir, topic, engine="jvm", max_split_bytes=data.draw(st.sampled_from([2000, 10**9])))
    if bounds.partitions is not None:
        df = df.filter(F.col("partition").isin(sorted(bounds.partitions)))
    if bounds.min_offset is not None:
        df = df.filter(F.col("offset") >= bounds.min_offset)
    if bounds.max_offset is not None:
        df = df.filter(F.col("offset") < bounds.max_offset)
    if bounds.min_timestamp is not None:
        df = df.filter(F.col("timestamp") >= F.lit(_utc(bounds.min_timestamp)))
    if bounds.max_timestamp is not None:  # (<= the millisecond before: Spark's LessThanOrEqual)
        df = df.filter(F.col("timestamp") <= F.lit(_utc(bounds.max_timestamp - 1)))
    want = _expected_rows(expected[topic], columns, topic, _keep(bounds))
    assert _in_order(_tuples(df.select(*columns), columns), columns) == _in_order(want, columns)


def _jvm_read_chars(spark: Any) -> int:
    pid = spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid()
    with open("/proc/%d/io" % pid) as f:
        return int(next(line for line in f if line.startswith("rchar:")).split()[1])


def test_a_timestamp_filter_reads_only_the_segments_that_can_hold_it(on_jvm: Any, tmp_path: Any) -> None:
    broker = Broker(str(tmp_path), log_cleaner_enable=False)
    broker.create_topic("t", 2, config={"segment.bytes": "200000"})
    for i in range(2000):
        broker.produce("t", i % 2, records.build_batch([os.urandom(200) for _ in range(10)], timestamps=TS + i))
    broker.close()
    since = _utc(TS + 1980)  # the last 1%

    def query(filtered: bool) -> Any:
        # A new DataFrame each time: collecting one again would reuse its shuffle and read nothing.
        df = read_topic(on_jvm, str(tmp_path), "t", engine="jvm")
        if filtered:
            df = df.filter(df.timestamp >= since)
        return df.selectExpr("count(*) AS n", "sum(length(value)) AS bytes")

    assert "PushedFilters" in query(True)._jdf.queryExecution().executedPlan().toString()
    assert query(True).collect()[0]["n"] == 200 and query(False).collect()[0]["n"] == 20000  # (and warm)
    before = _jvm_read_chars(on_jvm)
    assert query(False).collect()[0]["bytes"] == 20000 * 200
    whole = _jvm_read_chars(on_jvm) - before
    before = _jvm_read_chars(on_jvm)
    assert query(True).collect()[0]["bytes"] == 200 * 200
    part = _jvm_read_chars(on_jvm) - before
    # (Each count includes about 150 kB that any Spark query reads: classes, cgroup statistics.)
    assert whole > 4_000_000 and part < whole // 8, (part, whole)
