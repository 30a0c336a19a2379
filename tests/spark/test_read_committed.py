"""read_committed reads of segment files: each partition ends at its last stable offset, the
aborted transactions' records are dropped (Kafka's consumer rule, from the segments' .txnindex
files), control batches are never rows; read_uncommitted (the default) sees every data record.

The topic is written by real transactional producers (confluent-kafka, librdkafka) against a
served pylogq broker, which stays up: committed and aborted transactions, a committed
transaction of a second producer inside an aborted one's range, one transaction left open (so
later commits sit above the last stable offset), plain records before and after. Segments are
small, so transactions cross segment files and splits. Every read runs from the files alone
(the last stable offset found by a walk over the batch headers) and with the broker's
bootstrap address (its ListOffsets read_committed), with the planner and reader directly,
with both engines of ``read_topic``, and through the Data Source, batch and streaming.
"""

from __future__ import annotations

import os
import time
from typing import Any, Dict, Iterator, List, NamedTuple, Set

import pytest

import pylogq
from pylogq import records
from pylogq.errors import InvalidArgumentError, OffsetOutOfRangeError
from pylogq.records import CONTROL_MASK
from pylogq.records.control import ABORT, COMMIT
from pylogq.spark import splits as planner
from pylogq.spark.splits import partition_bounds, plan_splits, read_split
from pylogq.storage.checkpoint import REPLICATION_CHECKPOINT, OffsetCheckpoint
from pylogq.storage.segment import SegmentReader

from .._txn import TS, TxnBatches

pytest.importorskip("pyarrow", reason="pyarrow is not installed")
confluent_kafka = pytest.importorskip("confluent_kafka", reason="confluent-kafka is not installed")

TOPIC = "txns"
PARTITIONS = 2
TIMEOUT_S = 30.0
#: Small segments: transactions and their markers land in different segment files.
SEGMENT_BYTES = 2048


class Written(NamedTuple):
    """The served broker and what was written to ``txns``, as value sets."""

    broker: pylogq.Broker
    bootstrap: str
    everything: Set[bytes]  # every data record (read_uncommitted)
    committed: Set[bytes]  # the committed records below every partition's last stable offset
    aborted: Set[bytes]
    markers: int  # control batches written (COMMIT and ABORT markers)


def _values(prefix: str, n: int) -> List[bytes]:
    return [b"%s-%03d-" % (prefix.encode(), i) + b"x" * 60 for i in range(n)]


def _produce(producer: Any, values: List[bytes]) -> None:
    for i, value in enumerate(values):
        producer.produce(TOPIC, value=value, partition=i % PARTITIONS)
    assert producer.flush(TIMEOUT_S) == 0


def _transactional(bootstrap: str, txn_id: str) -> Any:
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id,
                                         "linger.ms": 5, "transaction.timeout.ms": 600000})
    producer.init_transactions(TIMEOUT_S)
    return producer


def _wait_for(condition: Any, what: str) -> None:
    deadline = time.monotonic() + TIMEOUT_S
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError("timed out waiting for %s" % what)
        time.sleep(0.02)


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Written]:
    broker = pylogq.Broker(str(tmp_path_factory.mktemp("txns")), **{"offsets.topic.num.partitions": 1})
    host, port = broker.serve("127.0.0.1", 0)
    bootstrap = "%s:%d" % (host, port)
    open_producer = None
    try:
        broker.create_topic(TOPIC, PARTITIONS, config={"segment.bytes": SEGMENT_BYTES})
        plain = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
        writer = _transactional(bootstrap, "writer")
        other = _transactional(bootstrap, "other")
        before, c1, a1, inside, c2 = (_values("before", 10), _values("c1", 20), _values("a1", 20),
                                      _values("inside", 6), _values("c2", 20))
        _produce(plain, before)
        writer.begin_transaction()
        _produce(writer, c1)
        writer.commit_transaction(TIMEOUT_S)
        writer.begin_transaction()
        _produce(writer, a1)  # written to the partitions ...
        other.begin_transaction()  # ... then another producer commits inside the aborted one's range
        _produce(other, inside)
        other.commit_transaction(TIMEOUT_S)
        writer.abort_transaction(TIMEOUT_S)  # ... then aborted
        writer.begin_transaction()
        _produce(writer, c2)
        writer.commit_transaction(TIMEOUT_S)
        # A transaction left open on both partitions: the last stable offsets stop at its first records.
        open_values, c3, a2, after = _values("open", 4), _values("c3", 10), _values("a2", 6), _values("after", 6)
        open_producer = _transactional(bootstrap, "left-open")
        open_producer.begin_transaction()
        _produce(open_producer, open_values)
        writer.begin_transaction()
        _produce(writer, c3)
        writer.commit_transaction(TIMEOUT_S)
        writer.begin_transaction()
        _produce(writer, a2)
        writer.abort_transaction(TIMEOUT_S)
        _produce(plain, after)
        # Markers are written by the coordinator after the commit returns: wait until each is in.
        markers = 6 * PARTITIONS  # writer: 3 commits, 2 aborts; other: 1 commit; each on both partitions
        _wait_for(lambda: _markers(broker) == markers, "the transaction markers")
        for p in range(PARTITIONS):
            part = broker.partition(TOPIC, p)
            assert part.last_stable_offset < part.high_watermark
        broker.checkpoint_high_watermarks()  # so the files alone carry the high watermarks
        everything = set(before + c1 + a1 + inside + c2 + open_values + c3 + a2 + after)
        yield Written(broker, bootstrap, everything, set(before + c1 + inside + c2), set(a1 + a2), markers)
    finally:
        if open_producer is not None:
            open_producer.abort_transaction(TIMEOUT_S)
        broker.close()


def _directories(broker: pylogq.Broker) -> List[str]:
    return [os.path.join(broker.data_dir, "%s-%d" % (TOPIC, p)) for p in range(PARTITIONS)]


def _markers(broker: pylogq.Broker) -> int:
    """Control batches in the topic's segment files."""
    found = 0
    for directory in _directories(broker):
        for name in sorted(os.listdir(directory)):
            if name.endswith(".log"):
                with SegmentReader.open(os.path.join(directory, name)) as reader:
                    found += sum(1 for h in reader.headers() if h.magic == 2 and h.attributes & CONTROL_MASK)
    return found


def _plain(value: bytes) -> bytes:
    return bytes(records.build_batch([value], timestamps=TS))


def _read(splits: List[Any], columns: Any = None) -> List[Dict[str, Any]]:
    return [row for split in splits for batch in read_split(split, columns=columns) for row in batch.to_pylist()]


SOURCES = ["files", "bootstrap"]


def _bootstrap(written: Written, source: str) -> Any:
    return written.bootstrap if source == "bootstrap" else None


# -- the planner and reader, without Spark ------------------------------------------------------------


def test_the_files_give_the_brokers_last_stable_offsets(written: Written) -> None:
    broker = written.broker
    checkpoint = OffsetCheckpoint(os.path.join(broker.data_dir, REPLICATION_CHECKPOINT)).read()
    for source in SOURCES:
        uncommitted = partition_bounds(broker.data_dir, TOPIC, bootstrap_servers=_bootstrap(written, source))
        committed = partition_bounds(broker.data_dir, TOPIC, bootstrap_servers=_bootstrap(written, source),
                                     isolation_level="read_committed")
        for p in range(PARTITIONS):
            part = broker.partition(TOPIC, p)
            assert uncommitted[p][1] == part.high_watermark == checkpoint[(TOPIC, p)]
            assert committed[p][1] == part.last_stable_offset < part.high_watermark, source


@pytest.mark.parametrize("source", SOURCES)
def test_read_committed_reads_exactly_the_committed_records(written: Written, source: str) -> None:
    bootstrap = _bootstrap(written, source)
    # Small splits: the aborted transactions are handed to the splits they overlap.
    committed = plan_splits(written.broker.data_dir, TOPIC, max_split_bytes=1500, bootstrap_servers=bootstrap,
                            isolation_level="read_committed")
    assert len(committed) > 2 * PARTITIONS and any(s.aborted for s in committed)
    assert not all(s.aborted for s in committed)
    rows = _read(committed)
    values = [r["value"] for r in rows]
    assert len(values) == len(set(values)) and set(values) == written.committed
    # Reads of the offsets alone (batch headers, no records) drop the same batches.
    assert sorted(r["offset"] for r in _read(committed, ["offset"])) == sorted(r["offset"] for r in rows)

    uncommitted = plan_splits(written.broker.data_dir, TOPIC, max_split_bytes=1500, bootstrap_servers=bootstrap)
    assert not any(s.aborted for s in uncommitted)
    everything = _read(uncommitted)
    assert len(everything) == len(written.everything)  # no control batch is a row
    assert {r["value"] for r in everything} == written.everything
    assert written.aborted <= {r["value"] for r in everything}
    offsets = sorted(r["offset"] for r in everything)
    assert sorted(r["offset"] for r in _read(uncommitted, ["offset"])) == offsets
    highs = sum(written.broker.partition(TOPIC, p).high_watermark for p in range(PARTITIONS))
    assert len(offsets) + written.markers == highs  # every other offset is a marker


def test_offsets_past_the_last_stable_offset_are_out_of_range(written: Written) -> None:
    lso = written.broker.partition(TOPIC, 0).last_stable_offset
    hw = written.broker.partition(TOPIC, 0).high_watermark
    with pytest.raises(OffsetOutOfRangeError, match="txns-0 is %d" % hw):
        plan_splits(written.broker.data_dir, TOPIC, ending_offsets={0: hw}, isolation_level="read_committed")
    splits = plan_splits(written.broker.data_dir, TOPIC, starting_offsets={0: lso}, ending_offsets={0: lso, 1: 0},
                         isolation_level="read_committed")
    assert splits == []
    # read_uncommitted reads past it: the open transaction's records and what followed.
    splits = plan_splits(written.broker.data_dir, TOPIC, starting_offsets={0: lso}, ending_offsets={0: hw, 1: 0})
    assert any(r["value"].startswith(b"open-") for r in _read(splits))


def test_bad_isolation_levels_are_refused(written: Written) -> None:
    for bad in ("READ_COMMITTED", "committed", ""):
        with pytest.raises(InvalidArgumentError, match="isolation.level"):
            plan_splits(written.broker.data_dir, TOPIC, isolation_level=bad)


def test_the_walk_for_the_last_stable_offset_goes_on_as_the_log_grows(tmp_path: Any) -> None:
    """Each plan walks on from where the last one stopped (a stream's micro-batches), and gets what a
    fresh walk and the broker get, across segment rolls, commits and aborts."""
    with pylogq.Broker(str(tmp_path)) as broker:
        broker.create_topic("grow", 1, config={"segment.bytes": 1024})
        part = broker.partition("grow", 0)
        p1, p2 = TxnBatches(1), TxnBatches(2)
        client, coordinator = "client", "coordinator"  # (markers come from the transaction coordinator)
        steps = [
            [(p1.txn(3), client), (_plain(b"a"), client)],
            [(p2.txn(2), client)] + [(_plain(b"filler-%d" % i + b"x" * 100), client) for i in range(12)],
            [(p1.marker(COMMIT), coordinator)],
            [(p2.txn(1), client), (p2.marker(ABORT), coordinator)],
            [(p1.txn(1), client)],
            [(p1.marker(ABORT), coordinator), (_plain(b"b"), client)],
        ]
        seen = []
        for step in steps:
            for batch, origin in step:
                part.append(batch, origin=origin)
            broker.checkpoint_high_watermarks()
            walked_on = partition_bounds(broker.data_dir, "grow", isolation_level="read_committed")[0][1]
            planner._txn_walks.clear()
            fresh = partition_bounds(broker.data_dir, "grow", isolation_level="read_committed")[0][1]
            assert walked_on == fresh == part.last_stable_offset
            seen.append(fresh)
        assert len(set(seen)) > 3 and seen[-1] == part.high_watermark
        assert len(os.listdir(os.path.join(broker.data_dir, "grow-0"))) > 6


# -- Spark ---------------------------------------------------------------------------------------------


def _spark_values(df: Any) -> List[bytes]:
    return [bytes(r["value"]) for r in df.select("value").collect()]


@pytest.mark.parametrize("source", SOURCES)
def test_read_topic_honours_the_isolation_level_with_either_engine(spark: Any, engine: str, written: Written,
                                                                   source: str) -> None:
    from pylogq.spark import read_topic

    kwargs = dict(bootstrap_servers=_bootstrap(written, source), engine=engine, max_split_bytes=1500)
    committed = read_topic(spark, written.broker.data_dir, TOPIC, isolation_level="read_committed", **kwargs)
    values = _spark_values(committed)
    assert len(values) == len(set(values)) and set(values) == written.committed
    assert committed.count() == len(written.committed)  # (the JVM reader: offsets from batch headers only)
    uncommitted = read_topic(spark, written.broker.data_dir, TOPIC, **kwargs)
    values = _spark_values(uncommitted)
    assert len(values) == len(written.everything) and set(values) == written.everything
    assert uncommitted.count() == len(written.everything)
    with pytest.raises(InvalidArgumentError, match="isolation.level"):
        read_topic(spark, written.broker.data_dir, TOPIC, isolation_level="snapshot", engine=engine)


def test_the_data_source_takes_kafka_isolation_level(spark: Any, written: Written) -> None:
    def load(**options: str) -> Any:
        reader = spark.read.format("pylogq").option("source", written.broker.data_dir).option("topic", TOPIC)
        for key, value in options.items():
            reader = reader.option(key.replace("_", "."), value)
        return reader.option("maxSplitBytes", "1500").load()

    assert set(_spark_values(load(kafka_isolation_level="read_committed"))) == written.committed
    assert len(_spark_values(load(kafka_isolation_level="read_committed"))) == len(written.committed)
    assert len(_spark_values(load())) == len(written.everything)
    assert set(_spark_values(load(kafka_isolation_level="read_uncommitted"))) == written.everything
    with pytest.raises(Exception, match="isolation.level"):
        load(kafka_isolation_level="uncommitted").collect()


def test_a_read_committed_stream_stops_at_the_last_stable_offset(spark: Any, written: Written) -> None:
    name = "pylogq_read_committed_stream"
    query = (spark.readStream.format("pylogq").option("source", written.broker.data_dir).option("topic", TOPIC)
             .option("bootstrapServers", written.bootstrap).option("startingOffsets", "earliest")
             .option("kafka.isolation.level", "read_committed").option("maxOffsetsPerTrigger", 25).load()
             .select("value").writeStream.format("memory").queryName(name).trigger(availableNow=True).start())
    query.awaitTermination(120)
    assert query.exception() is None
    values = _spark_values(spark.table(name))
    assert len(values) == len(written.committed) and set(values) == written.committed
    assert len([p for p in query.recentProgress if p["numInputRows"]]) > 1  # several micro-batches
