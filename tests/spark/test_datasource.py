"""format("pylogq"): the batch Data Source reads the same rows as a Consumer, with Kafka-source options."""

from __future__ import annotations

import json

import pytest

import pylogq

from .conftest import PARTITIONS, spark_rows, spark_summary, write_mixed


def _reader(spark, topic):
    return spark.read.format("pylogq").option("source", topic.log_dir).option("topic", topic.topic)


def test_batch_read_equals_consumer(spark, mixed_topic):
    df = _reader(spark, mixed_topic).option("maxSplitBytes", 48 * 1024).load()
    assert [f.name for f in df.schema.fields] == ["key", "value", "topic", "partition", "offset", "timestamp",
                                                  "timestampType", "headers"]
    assert spark_summary(df) == mixed_topic.summary()
    assert spark_rows(df) == mixed_topic.rows


def test_compacted_topic(spark, compacted_topic):
    df = _reader(spark, compacted_topic).load()
    assert spark_summary(df) == compacted_topic.summary()
    assert spark_rows(df) == compacted_topic.rows


def test_starting_and_ending_offsets(spark, mixed_topic):
    df = (_reader(spark, mixed_topic)
          .option("startingOffsets", json.dumps({"mixed": {"0": 7, "1": -2, "2": -1, "3": -1}}))
          .option("endingOffsets", json.dumps({"mixed": {"0": 9, "1": 3, "2": -1, "3": -1}}))
          .load())
    assert [(r[0], r[1]) for r in spark_rows(df)] == [(0, 7), (0, 8), (1, 0), (1, 1), (1, 2)]


def test_load_path_and_filters_run_in_spark(spark, mixed_topic):
    df = spark.read.format("pylogq").option("topic", "mixed").load(mixed_topic.log_dir)
    assert df.where("partition = 2 AND offset < 10").count() == 10


def test_fail_on_data_loss_option(spark, tmp_path):
    broker = pylogq.Broker(str(tmp_path))
    try:
        broker.create_topic("t", 1, config={"segment.bytes": 8 * 1024})
        write_mixed(broker, "t", 2000, partitions=1)
        strict = spark.read.format("pylogq").option("source", broker.data_dir).option("topic", "t").load()
        lenient = (spark.read.format("pylogq").option("source", broker.data_dir).option("topic", "t")
                   .option("failOnDataLoss", "false").option("startingOffsets", json.dumps({"t": {"0": 0}})).load())
        assert strict.count() == 2000
        broker.delete_records("t", 0, 1000)
        # The planned start (0) is before the new log start: strict fails naming the lost range.
        with pytest.raises(Exception, match="DataLossError"):
            spark.read.format("pylogq").option("source", broker.data_dir).option("topic", "t") \
                .option("startingOffsets", json.dumps({"t": {"0": 0}})).load().count()
        offsets = [r[1] for r in spark_rows(lenient)]
        assert offsets and offsets[-1] == 1999 and offsets == list(range(offsets[0], 2000))
        assert 0 < offsets[0] <= 1000
    finally:
        broker.close()


@pytest.mark.parametrize("options, match", [
    ({"topic": "mixed"}, "source"),
    ({"source": "LOGDIR"}, "topic"),
    ({"source": "LOGDIR", "topic": "mixed", "failOnDataLoss": "maybe"}, "failOnDataLoss"),
    ({"source": "LOGDIR", "topic": "nope"}, "nope"),
    ({"source": "LOGDIR/missing", "topic": "mixed"}, "missing"),
])
def test_bad_options_name_the_problem(spark, mixed_topic, options, match):
    reader = spark.read.format("pylogq")
    for key, value in options.items():
        reader = reader.option(key, value.replace("LOGDIR", mixed_topic.log_dir))
    with pytest.raises(Exception, match=match):
        reader.load().count()


def test_partition_count(spark, mixed_topic):
    df = _reader(spark, mixed_topic).load()
    assert {r["partition"] for r in df.select("partition").distinct().collect()} == set(range(PARTITIONS))


# -- column pruning and pushdown -------------------------------------------------------------------


def test_a_narrower_schema_reads_only_its_columns(spark, mixed_topic):
    df = _reader(spark, mixed_topic).schema("offset BIGINT, value BINARY, partition INT").load()
    assert df.columns == ["offset", "value", "partition"]
    got = sorted(tuple(r) for r in df.collect())
    assert got == sorted((r[1], r[3], r[0]) for r in mixed_topic.rows)


def test_the_columns_option(spark, compacted_topic):
    df = _reader(spark, compacted_topic).option("columns", "partition,offset").load()
    assert df.columns == ["partition", "offset"]
    assert sorted(tuple(r) for r in df.collect()) == [(r[0], r[1]) for r in compacted_topic.rows]


@pytest.mark.parametrize("schema, match", [
    ("value BINARY, extra INT", "extra"),
    ("value STRING", "value.*string.*binary"),
])
def test_a_schema_pylogq_cannot_read_is_named(spark, mixed_topic, schema, match):
    with pytest.raises(Exception, match=match):
        _reader(spark, mixed_topic).schema(schema).load().count()


@pytest.mark.parametrize("pushdown", ["true", "false"])
def test_filters_on_partition_offset_and_timestamp(spark, mixed_topic, pushdown):
    low = 1700000000000 + 2000
    where = ("partition IN (1, 2) AND offset >= 100 AND offset < 1500 AND timestamp >= timestamp_millis(%d) "
             "AND timestamp < timestamp_millis(%d)" % (low, low + 3000))
    previous = spark.conf.get("spark.sql.python.filterPushdown.enabled")
    spark.conf.set("spark.sql.python.filterPushdown.enabled", pushdown)
    try:
        df = _reader(spark, mixed_topic).load().where(where)
        plan = df._jdf.queryExecution().optimizedPlan().toString()
        # Taken by the source when pushdown is on: Spark keeps only its not-null checks.
        assert ("timestamp_millis" not in plan and "IN (1,2)" not in plan) == (pushdown == "true"), plan
        got = spark_rows(df)
    finally:
        spark.conf.set("spark.sql.python.filterPushdown.enabled", previous)
    want = [r for r in mixed_topic.rows if r[0] in (1, 2) and 100 <= r[1] < 1500 and low <= r[4] < low + 3000]
    assert want and got == want


def test_starting_and_ending_timestamp_options(spark, mixed_topic):
    start, end = 1700000000000 + 5000, 1700000000000 + 9000
    df = (_reader(spark, mixed_topic).option("startingTimestamp", str(start)).option("endingTimestamp", str(end))
          .load())
    got = spark_rows(df)
    want = []
    for p in range(PARTITIONS):
        rows = [r for r in mixed_topic.rows if r[0] == p]
        first = next(r[1] for r in rows if r[4] >= start)
        last = next((r[1] for r in rows if r[4] >= end), rows[-1][1] + 1)
        want += [r for r in rows if first <= r[1] < last]
    assert want and got == want
    with pytest.raises(Exception, match="no record at or after"):
        _reader(spark, mixed_topic).option("startingTimestamp", str(end * 2)).load().count()
    lenient = _reader(spark, mixed_topic).option("startingTimestamp", str(end * 2))
    assert lenient.option("startingOffsetsByTimestampStrategy", "latest").load().count() == 0


# -- a replicated topic: the clientRack option ------------------------------------------------------


def test_client_rack_reads_each_partition_from_a_replica_in_that_rack(spark, tmp_path):
    """Three brokers in racks a, b and c, a topic replicated on all of them: with clientRack b
    (or Spark's kafka.client.rack) every split reads broker 1's files, and the rows are the
    Consumer's."""
    import os

    from pylogq.cluster.broker.local_cluster import Cluster
    from pylogq.spark import _spark_schema
    from pylogq.spark.datasource import PylogqDataSource
    from pylogq.spark.replicas import broker_id_of

    racks = {0: "a", 1: "b", 2: "c"}
    with Cluster(3, str(tmp_path / "cluster"), broker_config={b: {"broker.rack": r} for b, r in racks.items()},
                 **{"zookeeper.session.timeout.ms": 2000, "replica.fetch.wait.max.ms": 100,
                    "offsets.topic.num.partitions": 1}) as cluster:
        boot = cluster.serve()
        cluster.create_topic("racked", 2, 3)
        producer = pylogq.Producer(bootstrap_servers=boot, acks="all")
        for i in range(200):
            producer.send("racked", key=b"k%d" % i, value=b"v%d" % i, partition=i % 2, timestamp_ms=1700000000000 + i)
        producer.flush(30)
        producer.close()
        cluster.wait_until(lambda: all(b.hosted(("racked", p)).high_watermark == 100
                                       for b in cluster.brokers for p in range(2)), 30, "full replication")
        source = ",".join(os.path.join(cluster.data_dir, "broker-%d" % b) for b in range(3))
        for rack_option in ("clientRack", "kafka.client.rack"):
            options = {"source": source, "topic": "racked", "bootstrapServers": boot, rack_option: "b"}
            planned = PylogqDataSource(options).reader(_spark_schema(None)).partitions()
            assert {broker_id_of(os.path.dirname(p.split.directory)) for p in planned} == {1}, rack_option
        reader = spark.read.format("pylogq")
        for key, value in {"source": source, "topic": "racked", "bootstrapServers": boot, "clientRack": "b"}.items():
            reader = reader.option(key, value)
        got = [(r["partition"], r["offset"], r["key"], r["value"])
               for r in reader.load().select("partition", "offset", "key", "value").collect()]
    assert sorted(got) == sorted((i % 2, i // 2, b"k%d" % i, b"v%d" % i) for i in range(200))
