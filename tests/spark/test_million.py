"""The issue's scale check: a million records over four partitions, every codec, some segments
compacted, read by ``read_topic`` and by ``format("pylogq")`` exactly as a Consumer reads them."""

from __future__ import annotations

from typing import Any

import pytest

import pylogq
from pylogq.records import build_batch
from pylogq.records.codecs import GZIP, LZ4, NONE, SNAPPY, ZSTD
from pylogq.spark import read_topic
from pylogq.storage.cleaner import LogCleaner

from .conftest import Expected, consume_all, spark_summary

RECORDS = 1_000_000
PARTITIONS = 4
BATCH = 2_500
KEYS = 200_000  # fewer keys than records, so compaction has duplicates to remove


@pytest.fixture(scope="module")
def million(tmp_path_factory: pytest.TempPathFactory) -> Expected:
    """Topic ``million``: 1M keyed records in batches cycling through the five codecs,
    4 MB segments, then every closed segment compacted (offset gaps and fewer records)."""
    log_dir = str(tmp_path_factory.mktemp("million"))
    broker = pylogq.Broker(log_dir, **{"offsets.topic.num.partitions": 1})
    try:
        broker.create_topic("million", PARTITIONS, config={"cleanup.policy": "compact",
                                                           "segment.bytes": 4 << 20})
        codecs = (NONE, GZIP, SNAPPY, LZ4, ZSTD)
        for n, start in enumerate(range(0, RECORDS, BATCH)):
            js = range(start, min(start + BATCH, RECORDS))
            keys = [b"key-%06d" % ((j * 7919) % KEYS) for j in js]
            values = [b"value-%08d-" % j + bytes([65 + j % 26]) * (j % 90) for j in js]
            broker.produce("million", n % PARTITIONS, build_batch(
                values, keys=keys, timestamps=[1700000000000 + j for j in js], compression_type=codecs[n % 5]))
        cleaner = LogCleaner(broker.logs)
        for p in range(PARTITIONS):
            log = broker.logs.get_log("million", p)
            assert log is not None
            cleaner.clean_log(log)  # the closed segments; the active one stays as written
    finally:
        broker.close()
    expected = Expected(log_dir, "million", consume_all(log_dir, "million"))
    assert RECORDS // 2 < len(expected.rows) < RECORDS, "compaction removed nothing (or everything)"
    return expected


def test_a_million_records_read_by_read_topic(spark: Any, million: Expected, engine: str) -> None:
    df = read_topic(spark, million.log_dir, "million", max_split_bytes=4 << 20, engine=engine)
    assert df.rdd.getNumPartitions() > PARTITIONS  # big partitions are read by several tasks
    assert spark_summary(df) == million.summary()
    # Small batches: many per chunk read, and chunks read into arrays that earlier batches used.
    small = read_topic(spark, million.log_dir, "million", batch_rows=999, engine=engine)
    assert spark_summary(small) == million.summary()


def test_a_million_records_read_by_the_data_source(spark: Any, million: Expected) -> None:
    pylogq.spark.register(spark)
    df = spark.read.format("pylogq").option("source", million.log_dir).option("topic", "million").load()
    assert spark_summary(df) == million.summary()
