"""read_topic: Spark tasks read segment files directly and return exactly what a Consumer reads."""

from __future__ import annotations

import json
import os

import pytest

import pylogq
from pylogq.spark import DataLossError, plan_splits, read_topic

from .conftest import PARTITIONS, consume_all, spark_rows, spark_summary, write_mixed

SCHEMA = [("key", "binary"), ("value", "binary"), ("topic", "string"), ("partition", "int"), ("offset", "bigint"),
          ("timestamp", "timestamp"), ("timestampType", "int"),
          ("headers", "array<struct<key:string,value:binary>>")]


def test_rows_equal_what_a_consumer_reads(spark, mixed_topic, engine):
    df = read_topic(spark, mixed_topic.log_dir, "mixed", max_split_bytes=48 * 1024, engine=engine)
    assert df.dtypes == SCHEMA
    # Small splits: each partition is read by several tasks, one range of segments each.
    assert df.rdd.getNumPartitions() > PARTITIONS
    assert spark_summary(df) == mixed_topic.summary()
    assert spark_rows(df) == mixed_topic.rows
    assert {r["topic"] for r in df.select("topic").distinct().collect()} == {"mixed"}


def test_a_small_read_is_packed_into_one_task_per_core(spark, mixed_topic, engine):
    """Four small partitions on local[2]: two tasks of two splits each, as Spark packs small files."""
    assert spark.sparkContext.defaultParallelism == 2
    df = read_topic(spark, mixed_topic.log_dir, "mixed", engine=engine)
    assert df.rdd.getNumPartitions() == 2
    assert spark_rows(df) == mixed_topic.rows
    spark.conf.set("spark.sql.leafNodeDefaultParallelism", "4")
    try:
        df = read_topic(spark, mixed_topic.log_dir, "mixed", engine=engine)
        assert df.rdd.getNumPartitions() == PARTITIONS
        assert spark_summary(df) == mixed_topic.summary()
    finally:
        spark.conf.unset("spark.sql.leafNodeDefaultParallelism")


def test_compacted_topic_with_offset_gaps_and_tombstones(spark, compacted_topic, engine):
    df = read_topic(spark, compacted_topic.log_dir, "compacted", engine=engine)
    assert spark_summary(df) == compacted_topic.summary()
    assert spark_rows(df) == compacted_topic.rows
    assert any(row[3] is None for row in compacted_topic.rows)  # tombstones came through as null values


def test_offset_ranges_in_spark_kafka_forms(spark, mixed_topic, engine):
    spec = json.dumps({"mixed": {"0": 100, "1": -2, "2": -1, "3": 4000}})
    ending = json.dumps({"mixed": {"0": 200, "1": 50, "2": -1, "3": -1}})
    got = spark_rows(read_topic(spark, mixed_topic.log_dir, "mixed", starting_offsets=spec, ending_offsets=ending,
                                engine=engine))
    ends = {p: max(r[1] for r in mixed_topic.rows if r[0] == p) + 1 for p in range(PARTITIONS)}
    want = [r for r in mixed_topic.rows
            if (r[0] == 0 and 100 <= r[1] < 200) or (r[0] == 1 and r[1] < 50) or (r[0] == 3 and 4000 <= r[1] < ends[3])]
    assert got == want
    # A partition left out reads from earliest to latest.
    df = read_topic(spark, mixed_topic.log_dir, "mixed", starting_offsets={0: 10}, ending_offsets={0: 12},
                    engine=engine)
    got = spark_rows(df)
    assert [(r[0], r[1]) for r in got if r[0] == 0] == [(0, 10), (0, 11)]
    assert len(got) == 2 + sum(1 for r in mixed_topic.rows if r[0] != 0)


def test_reads_are_bounded_by_the_high_watermark_while_the_broker_appends(spark, pylogq_broker, pylogq_bootstrap,
                                                                         engine):
    pylogq_broker.create_topic("live", PARTITIONS, config={"segment.bytes": 16 * 1024})
    write_mixed(pylogq_broker, "live", 2000)
    df = read_topic(spark, pylogq_broker.data_dir, "live", bootstrap_servers=pylogq_bootstrap, engine=engine)
    assert df.count() == 2000
    write_mixed(pylogq_broker, "live", 1000, start=2000)
    assert df.count() == 2000  # the planned DataFrame is repeatable
    again = read_topic(spark, pylogq_broker.data_dir, "live", bootstrap_servers=pylogq_bootstrap, engine=engine)
    assert again.count() == 3000


def test_source_may_be_the_brokers_bootstrap_address(spark, pylogq_broker, pylogq_bootstrap):
    """Given only "host:port", the broker names its log.dirs (DescribeConfigs) and its high
    watermarks bound the read; the records still come from the segment files."""
    pylogq_broker.create_topic("by-address", PARTITIONS)
    write_mixed(pylogq_broker, "by-address", 1000)
    df = read_topic(spark, pylogq_bootstrap, "by-address")
    assert df.count() == 1000
    pylogq.spark.register(spark)
    loaded = spark.read.format("pylogq").option("source", pylogq_bootstrap).option("topic", "by-address").load()
    assert spark_summary(loaded) == spark_summary(df)


@pytest.fixture
def doomed_topic(tmp_path):
    """A topic whose first segments retention can take away, and the broker that owns it."""
    broker = pylogq.Broker(str(tmp_path))
    broker.create_topic("doomed", 1, config={"segment.bytes": 8 * 1024})
    write_mixed(broker, "doomed", 3000, partitions=1)
    yield broker
    broker.close()


def test_records_deleted_between_planning_and_reading_fail_the_read(spark, doomed_topic, engine):
    directory = doomed_topic.data_dir
    df = read_topic(spark, directory, "doomed", bootstrap_servers=None, engine=engine)
    lenient = read_topic(spark, directory, "doomed", fail_on_data_loss=False, engine=engine)
    before = len(plan_splits(directory, "doomed"))
    assert before >= 1
    new_start = doomed_topic.delete_records("doomed", 0, 1200)
    first_segment = min(int(name[:20]) for name in os.listdir(os.path.join(directory, "doomed-0"))
                        if name.endswith(".log"))
    assert first_segment > 0, "retention deleted no segment"
    with pytest.raises(Exception) as failure:
        df.count()
    message = str(failure.value)
    assert "DataLossError" in message
    assert "doomed-0" in message and "0" in message
    # Disabled: the lost records are skipped (with a warning in the task's log) and the rest is read.
    rows = spark_rows(lenient)
    offsets = [r[1] for r in rows]
    assert offsets == list(range(offsets[0], 3000))
    assert first_segment <= offsets[0] <= new_start


def test_clear_errors_on_the_driver(spark, mixed_topic, tmp_path):
    with pytest.raises(Exception, match="nonexistent"):
        read_topic(spark, str(tmp_path / "nonexistent"), "mixed")
    with pytest.raises(Exception, match="no-such-topic"):
        read_topic(spark, mixed_topic.log_dir, "no-such-topic")
    with pytest.raises(Exception, match="99999999"):
        read_topic(spark, mixed_topic.log_dir, "mixed", starting_offsets={0: 99999999})
    with pytest.raises(ValueError, match="batch_rows"):
        read_topic(spark, mixed_topic.log_dir, "mixed", batch_rows=0)


def test_empty_range_is_an_empty_dataframe(spark, mixed_topic):
    df = read_topic(spark, mixed_topic.log_dir, "mixed", starting_offsets="latest")
    assert df.dtypes == SCHEMA
    assert df.count() == 0


def test_consumer_and_files_agree_after_the_read(mixed_topic):
    # The files were only read: a consumer still sees the same records.
    assert consume_all(mixed_topic.log_dir, "mixed") == mixed_topic.rows
    assert issubclass(DataLossError, pylogq.errors.PylogqError)


def test_columns_and_timestamps(spark, mixed_topic, compacted_topic, engine):
    df = read_topic(spark, mixed_topic.log_dir, "mixed", columns=["value", "offset"], engine=engine)
    assert df.dtypes == [("value", "binary"), ("offset", "bigint")]
    assert sorted((r[1], r[0]) for r in df.collect()) == sorted((r[1], r[3]) for r in mixed_topic.rows)
    df = read_topic(spark, compacted_topic.log_dir, "compacted", columns="partition, offset", engine=engine)
    assert sorted(tuple(r) for r in df.collect()) == [(r[0], r[1]) for r in compacted_topic.rows]
    start = 1700000000000 + 15000
    got = spark_rows(read_topic(spark, mixed_topic.log_dir, "mixed", starting_timestamp=start, engine=engine))
    want = []
    for p in range(PARTITIONS):
        rows = [r for r in mixed_topic.rows if r[0] == p]
        first = next(r[1] for r in rows if r[4] >= start)
        want += [r for r in rows if r[1] >= first]
    assert want and got == want
    with pytest.raises(ValueError, match="unknown column"):
        read_topic(spark, mixed_topic.log_dir, "mixed", columns=["vaule"], engine=engine)


def test_the_schema_is_what_the_ddl_parses_to(spark, mixed_topic, engine):
    """read_topic builds its Spark schema from the Arrow one; it is the schema Spark parses from schema_ddl."""
    from pylogq.spark import COLUMNS, schema_ddl

    for columns in (None, ["value"], ["headers", "key"], ["timestamp", "offset", "timestampType"], list(COLUMNS)):
        parsed = spark.createDataFrame([], schema_ddl(columns)).schema
        assert read_topic(spark, mixed_topic.log_dir, "mixed", columns=columns, engine=engine).schema == parsed
        empty = read_topic(spark, mixed_topic.log_dir, "mixed", starting_offsets="latest", columns=columns,
                           engine=engine)
        assert empty.schema == parsed and empty.count() == 0


def test_a_spark_tasks_socket_is_found_and_set_to_answer_at_once(spark):
    """In a real PySpark worker, the task's socket to the JVM is the one read_topic's tasks set
    (TCP_QUICKACK and TCP_NODELAY: see pylogq.spark.splits._answer_promptly). A PySpark whose
    worker no longer shows it would make reads wait on delayed acknowledgements again."""

    def probe(batches):
        import os
        import socket

        import pyarrow as pa

        from pylogq.spark import splits

        fd = splits._task_socket_fd()
        sock = socket.socket(fileno=os.dup(fd)) if fd is not None else None
        tuned = splits._answer_promptly()
        after = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) if sock is not None else -1
        family = sock.family.name if sock is not None else ""
        if sock is not None:
            sock.close()
        numbers = [n for batch in batches for n in batch.column(0).to_pylist()]
        yield pa.RecordBatch.from_pydict({"number": numbers, "tuned": [tuned] * len(numbers),
                                          "family": [family] * len(numbers), "after": [after] * len(numbers)})

    rows = spark.range(0, 4, 1, 4).mapInArrow(probe, "number LONG, tuned BOOLEAN, family STRING, after LONG").collect()
    assert sorted(r["number"] for r in rows) == [0, 1, 2, 3]
    for r in rows:
        assert r["family"] in ("AF_INET", "AF_INET6") and r["tuned"] and r["after"] != 0, r


def test_malformed_bytes_in_a_segment_fail_the_read(spark, tmp_path, engine):
    """An entry whose magic or length no entry can have fails the read, naming the segment and byte, rather
    than ending the partition there without a word; a zero-filled tail still ends it quietly."""
    import struct

    from pylogq.records import build_batch

    broker = pylogq.Broker(str(tmp_path), log_cleaner_enable=False)
    broker.create_topic("bad", 1, config={"segment.bytes": 2048})
    for i in range(40):
        broker.produce("bad", 0, build_batch([b"value %d.%d" % (i, j) for j in range(10)]))
    broker.close()
    directory = os.path.join(str(tmp_path), "bad-0")
    first = os.path.join(directory, sorted(n for n in os.listdir(directory) if n.endswith(".log"))[0])
    with open(first, "rb") as f:
        good = f.read()
    second = 12 + struct.unpack_from(">i", good, 8)[0]
    for claimed in (None, 0x7FFFFFF0):  # the entry's own size, or one that runs past the file
        data = bytearray(good)
        data[second + 16] = 7  # the second entry's magic
        if claimed is not None:
            struct.pack_into(">i", data, second + 8, claimed)
        with open(first, "wb") as f:
            f.write(data)
        for columns in (["offset", "value"], ["offset"]):
            df = read_topic(spark, str(tmp_path), "bad", columns=columns, engine=engine)
            with pytest.raises(Exception) as failure:
                df.collect()
            assert "cannot be read past byte %d" % second in str(failure.value), (claimed, columns)
            assert "magic 7" in str(failure.value)
    # In the last segment, the planner meets it first.
    names = sorted(n for n in os.listdir(directory) if n.endswith(".log"))
    last = os.path.join(directory, names[-1])
    size = os.path.getsize(last)
    with open(last, "ab") as f:
        f.write(b"\0" * 64)  # a zero tail: not an error
    later = int(names[1][:20])  # the second segment's base: past the damage
    assert read_topic(spark, str(tmp_path), "bad", columns=["offset"], starting_offsets={0: later},
                      engine=engine).count() == 400 - later
    with open(last, "r+b") as f:
        f.truncate(size)
        f.seek(size)
        f.write(struct.pack(">qii", 400, 52, 0) + b"\x07" + b"\x01" * 51)  # an entry of magic 7
    with pytest.raises(pylogq.errors.CorruptRecordError, match="cannot be read past byte"):
        read_topic(spark, str(tmp_path), "bad", engine=engine)
