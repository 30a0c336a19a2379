"""write_topic: a DataFrame's rows reach the topic through pylogq's producer, and read back the same."""

from __future__ import annotations

import pytest

from pylogq.spark import read_topic, write_topic

from .conftest import spark_rows

ROWS = 3000


def _source(spark):
    return spark.range(ROWS, numPartitions=3).selectExpr(
        "IF(id % 4 = 0, NULL, CAST(CONCAT('key-', id % 50) AS BINARY)) AS key",
        "IF(id % 97 = 5, NULL, CAST(CONCAT('value-', id, '-', REPEAT('x', CAST(id % 40 AS INT))) AS BINARY)) AS value",
        "IF(id % 3 = 0, ARRAY(NAMED_STRUCT('key', 'n', 'value', CAST(CAST(id AS STRING) AS BINARY)),"
        " NAMED_STRUCT('key', 'z', 'value', CAST(NULL AS BINARY))), NULL) AS headers",
        "CAST(IF(id % 2 = 0, id % 3, NULL) AS INT) AS partition",
        "id",
    ).where("key IS NOT NULL OR value IS NOT NULL")


def test_round_trip_returns_the_same_rows(spark, pylogq_broker, pylogq_bootstrap):
    pylogq_broker.create_topic("written", 3)
    source = _source(spark)
    sent = write_topic(source, pylogq_bootstrap, "written")
    assert sent == source.count()
    back = read_topic(spark, pylogq_broker.data_dir, "written", bootstrap_servers=pylogq_bootstrap)
    got = sorted(((r[2], r[3], r[6]) for r in spark_rows(back)), key=repr)
    want = sorted(((r["key"], r["value"], tuple((h["key"], h["value"]) for h in (r["headers"] or ())))
                   for r in source.collect()), key=repr)
    assert len(got) == sent
    assert got == want
    # An explicit partition column is honoured; the others follow the default partitioner.
    placed = {(r["value"], r["partition"]) for r in back.select("value", "partition").collect()}
    for r in source.where("partition IS NOT NULL").select("value", "partition").collect():
        assert (r["value"], r["partition"]) in placed


def test_string_columns_and_a_topic_column(spark, pylogq_broker, pylogq_bootstrap):
    pylogq_broker.create_topic("a", 1)
    pylogq_broker.create_topic("b", 2)
    df = spark.range(100).selectExpr("CAST(id AS STRING) AS key", "CONCAT('v', id) AS value",
                                     "IF(id < 30, 'a', 'b') AS topic")
    assert write_topic(df, pylogq_bootstrap) == 100
    a = read_topic(spark, pylogq_broker.data_dir, "a", bootstrap_servers=pylogq_bootstrap)
    b = read_topic(spark, pylogq_broker.data_dir, "b", bootstrap_servers=pylogq_bootstrap)
    assert sorted(r["value"] for r in a.collect()) == sorted(b"v%d" % i for i in range(30))
    assert b.count() == 70
    # topic= wins over the column, as the Kafka sink's topic option does.
    assert write_topic(df, pylogq_bootstrap, "a", compression_type="zstd") == 100
    assert read_topic(spark, pylogq_broker.data_dir, "a", bootstrap_servers=pylogq_bootstrap).count() == 130


def test_a_failed_send_fails_the_job(spark, pylogq_broker, pylogq_bootstrap):
    pylogq_broker.create_topic("small", 2)
    df = spark.range(10).selectExpr("CAST(CAST(id AS STRING) AS BINARY) AS value",
                                    "CAST(IF(id = 7, 99, 0) AS INT) AS partition")
    with pytest.raises(Exception, match="unknown partition 99"):
        write_topic(df, pylogq_bootstrap, "small")


@pytest.mark.parametrize("select, kwargs, match", [
    ("CAST(CAST(id AS STRING) AS BINARY) AS key", {"topic": "t"}, "'value' column"),
    ("id AS value", {"topic": "t"}, "binary or string"),
    ("CAST(CAST(id AS STRING) AS BINARY) AS value", {}, "no topic"),
    ("CAST(CAST(id AS STRING) AS BINARY) AS value", {"topic": "t", "linger": 5}, "unknown producer configuration"),
    ("CAST(CAST(id AS STRING) AS BINARY) AS value", {"topic": "t", "target": ""}, "bootstrap address"),
    ("CAST(CAST(id AS STRING) AS BINARY) AS value, 'x' AS partition", {"topic": "t"}, "'partition' must be an int"),
    ("CAST(CAST(id AS STRING) AS BINARY) AS value, ARRAY('x') AS headers", {"topic": "t"}, "'headers' must be"),
])
def test_bad_input_is_refused_on_the_driver(spark, select, kwargs, match):
    df = spark.range(3).selectExpr(*select.split(", "))  # no expression here has a ", " inside
    target = kwargs.pop("target", "127.0.0.1:9")
    with pytest.raises(ValueError, match=match):
        write_topic(df, target, **kwargs)
