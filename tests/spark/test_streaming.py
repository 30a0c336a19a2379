"""readStream.format("pylogq"): micro-batches over checkpointed offsets, exactly once into a file sink."""

from __future__ import annotations

import collections
import json

import pytest

from .conftest import write_mixed

PARTITIONS = 2


def _stream(spark, broker, bootstrap, **options):
    reader = (spark.readStream.format("pylogq").option("source", broker.data_dir).option("topic", "events")
              .option("bootstrapServers", bootstrap).option("startingOffsets", "earliest"))
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load().selectExpr("partition", "offset", "CAST(value AS STRING) AS value")


def _sink(spark, path):
    """(partition, offset) pairs in the parquet sink, through its metadata log (committed files only)."""
    return sorted((r["partition"], r["offset"]) for r in spark.read.parquet(path).collect())


def _append(broker, count, start):
    write_mixed(broker, "events", count, start=start, partitions=PARTITIONS)


def _expected(broker):
    ends = {p: broker.list_offsets("events", p, -1)[0] for p in range(PARTITIONS)}
    return sorted((p, o) for p, end in ends.items() for o in range(end))


def test_new_records_arrive_in_the_next_micro_batch_and_restarts_resume_exactly(
        spark, pylogq_broker, pylogq_bootstrap, tmp_path):
    broker = pylogq_broker
    broker.create_topic("events", PARTITIONS, config={"segment.bytes": 16 * 1024})
    _append(broker, 1000, 0)
    out, checkpoint = str(tmp_path / "out"), str(tmp_path / "checkpoint")

    query = (_stream(spark, broker, pylogq_bootstrap, maxOffsetsPerTrigger=400).writeStream.format("parquet")
             .option("path", out).option("checkpointLocation", checkpoint).trigger(processingTime="100 milliseconds")
             .start())
    try:
        query.processAllAvailable()
        assert _sink(spark, out) == _expected(broker)
        # maxOffsetsPerTrigger: the first 1000 offsets came in batches of at most 400.
        sizes = [p["numInputRows"] for p in query.recentProgress if p["numInputRows"]]
        assert sum(sizes) == 1000 and max(sizes) <= 400 and len(sizes) >= 3

        _append(broker, 500, 1000)  # appended while the query runs
        query.processAllAvailable()
        assert _sink(spark, out) == _expected(broker)
    finally:
        query.stop()

    _append(broker, 700, 1500)  # appended while the query is down
    restarted = (_stream(spark, broker, pylogq_bootstrap).writeStream.format("parquet").option("path", out)
                 .option("checkpointLocation", checkpoint).trigger(availableNow=True).start())
    restarted.awaitTermination(120)
    assert restarted.exception() is None
    got = _sink(spark, out)
    counts = collections.Counter(got)
    assert not [k for k, n in counts.items() if n > 1], "duplicates after the restart"
    assert got == _expected(broker)  # no gap, no duplicate
    assert len(got) == 2200


def test_available_now_stops_at_the_end_seen_at_start_and_honours_starting_offsets(
        spark, pylogq_broker, pylogq_bootstrap, tmp_path):
    broker = pylogq_broker
    broker.create_topic("events", PARTITIONS)
    _append(broker, 300, 0)
    table = "pylogq_events_memory"
    query = (_stream(spark, broker, pylogq_bootstrap,
                     startingOffsets=json.dumps({"events": {"0": 100, "1": -1}}), maxOffsetsPerTrigger=20)
             .writeStream.format("memory").queryName(table).trigger(availableNow=True).start())
    query.awaitTermination(120)
    assert query.exception() is None
    rows = sorted((r["partition"], r["offset"]) for r in spark.table(table).collect())
    assert rows == [(0, o) for o in range(100, 150)]  # 150 records per partition; partition 1 from its end


def test_bad_streaming_options(spark, pylogq_broker, pylogq_bootstrap, tmp_path):
    pylogq_broker.create_topic("events", PARTITIONS)
    with pytest.raises(Exception, match="endingOffsets"):
        q = (_stream(spark, pylogq_broker, pylogq_bootstrap, endingOffsets="latest").writeStream.format("memory")
             .queryName("never").trigger(availableNow=True).start())
        q.awaitTermination(60)
        if q.exception() is not None:
            raise q.exception()
