"""The read side of transactions (KIP-98) over the network: a read_committed Fetch (v4+) stops
at the partition's last stable offset and lists the aborted transactions of what it returns;
ListOffsets v2+ read_committed answers the last stable offset for latest and bounds timestamp
searches by it; kafka-python's, aiokafka's, librdkafka's and pylogq's read_committed consumers see committed
transactions, never aborted ones, and wait at an ongoing one, while read_uncommitted
consumers see every record. The transactions are written with the partition-level API (the
coordinator's markers appended with origin "coordinator"), as the transaction coordinator
writes them."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional, Tuple

import pytest

import pylogq
from pylogq import records
from pylogq.client.connection import BrokerConnection
from pylogq.client.consumer import Consumer, TopicPartition
from pylogq.cluster.state.partition import Partition
from pylogq.protocol import ApiKey
from pylogq.records import iter_batches
from pylogq.records.control import ABORT, COMMIT
from pylogq.server.handler_base import uuid_of

from .._txn import TS, TxnBatches
from ._support import wait_for

TIMEOUT_S = 15.0


def plain(value: bytes, timestamp: int = TS) -> bytes:
    return bytes(records.build_batch([value], timestamps=timestamp))


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Tuple[pylogq.Broker, BrokerConnection, str]]:
    with pylogq.Broker(str(tmp_path / "data")) as broker:
        host, port = broker.serve()
        broker.create_topic("t", 1)
        conn = BrokerConnection(host, port, "read-committed-test", 10.0)
        try:
            yield broker, conn, "%s:%d" % (host, port)
        finally:
            conn.close()


def write_mixed(part: Partition) -> None:
    """0 plain; 1-2 p1 committed (marker 3); 4-5 p2 aborted (marker 7), p1's 6 committed
    (marker 8) inside it; 9 plain; 10 p3 ongoing; 11 plain after it."""
    p1, p2, p3 = TxnBatches(1), TxnBatches(2), TxnBatches(3)
    part.append(plain(b"a"))  # 0
    part.append(p1.txn(2))  # 1, 2
    part.append(p1.marker(COMMIT), origin="coordinator")  # 3
    part.append(p2.txn(2))  # 4, 5
    part.append(p1.txn(1))  # 6
    part.append(p2.marker(ABORT), origin="coordinator")  # 7
    part.append(p1.marker(COMMIT), origin="coordinator")  # 8
    part.append(plain(b"b"))  # 9
    part.append(p3.txn(1))  # 10: ongoing
    part.append(plain(b"c"))  # 11
    assert (part.high_watermark, part.last_stable_offset) == (12, 10)


def fetch(conn: BrokerConnection, version: int, offset: int, isolation: int,
          partition_max: int = 1 << 20, topic: Any = "t") -> Dict[str, Any]:
    body = {
        "replica_id": -1, "replica_state": {"replica_id": -1, "replica_epoch": -1},
        "max_wait_ms": 0, "min_bytes": 1, "max_bytes": 1 << 20, "isolation_level": isolation,
        "session_id": 0, "session_epoch": -1,
        "topics": [{"topic": topic if isinstance(topic, str) else "",
                    "topic_id": topic if isinstance(topic, uuid.UUID) else uuid.UUID(int=0),
                    "partitions": [{"partition": 0, "fetch_offset": offset, "partition_max_bytes": partition_max,
                                    "current_leader_epoch": -1, "log_start_offset": -1}]}],
        "forgotten_topics_data": [], "rack_id": "",
    }
    [answer] = conn.request(ApiKey.FETCH, body, version=version)["responses"]
    [part] = answer["partitions"]
    return dict(part)


def batch_offsets(data: Optional[bytes]) -> List[Tuple[int, int]]:
    return [(b.base_offset, b.last_offset) for b in iter_batches(bytes(data or b""))]


def aborted_of(part: Dict[str, Any]) -> Optional[List[Tuple[int, int]]]:
    found = part["aborted_transactions"]
    return None if found is None else [(a["producer_id"], a["first_offset"]) for a in found]


def topic_key(broker: pylogq.Broker, version: int) -> Any:
    return uuid_of(broker.topic_id("t")) if version >= 13 else "t"


# -- Fetch ------------------------------------------------------------------------------------


@pytest.mark.parametrize("version", [4, 11, 12, 13, 17])
def test_read_committed_fetch_stops_at_the_lso_with_the_aborted_transactions(served, version: int) -> None:
    broker, conn, _ = served
    write_mixed(broker.partition("t", 0))
    key = topic_key(broker, version)
    committed = fetch(conn, version, 0, 1, topic=key)
    assert committed["error_code"] == 0
    assert (committed["high_watermark"], committed["last_stable_offset"]) == (12, 10)
    assert batch_offsets(committed["records"])[-1] == (9, 9)  # nothing at or past the LSO
    assert aborted_of(committed) == [(2, 4)]
    # read_uncommitted reads to the HW, answers the same LSO and no aborted transactions (null).
    uncommitted = fetch(conn, version, 0, 0, topic=key)
    assert batch_offsets(uncommitted["records"])[-1] == (11, 11)
    assert uncommitted["last_stable_offset"] == 10 and uncommitted["aborted_transactions"] is None
    # From past the aborted transaction: none overlaps; at the LSO: empty, an empty list.
    later = fetch(conn, version, 8, 1, topic=key)
    assert batch_offsets(later["records"]) == [(8, 8), (9, 9)] and aborted_of(later) == []
    at_lso = fetch(conn, version, 10, 1, topic=key)
    assert not at_lso["records"] and aborted_of(at_lso) == []
    # From inside the aborted transaction (its last offset is 7): it overlaps.
    assert aborted_of(fetch(conn, version, 5, 1, topic=key)) == [(2, 4)]


def test_the_aborted_transactions_are_bounded_by_the_segment_read(tmp_path: Path) -> None:
    """Kafka bounds the search by the end of the segment read (the next segment's base): an
    abort in a later segment, of a transaction starting there, is not listed."""
    with pylogq.Broker(str(tmp_path / "data")) as broker:
        host, port = broker.serve()
        broker.create_topic("t", 1)
        part = broker.partition("t", 0)
        p1, p2 = TxnBatches(1), TxnBatches(2)
        part.append(p1.txn())  # 0
        part.append(p1.marker(ABORT), origin="coordinator")  # 1
        part.log.roll()
        part.append(p2.txn())  # 2
        part.append(p2.marker(ABORT), origin="coordinator")  # 3
        conn = BrokerConnection(host, port, "read-committed-test", 10.0)
        try:
            first = fetch(conn, 12, 0, 1)
            assert batch_offsets(first["records"]) == [(0, 0), (1, 1)]  # one segment's batches
            assert aborted_of(first) == [(1, 0)]
            assert aborted_of(fetch(conn, 12, 2, 1)) == [(2, 2)]
        finally:
            conn.close()


def test_an_abort_marker_in_a_later_segment_is_found_for_a_read_of_an_earlier_one(served) -> None:
    """The transaction starts in one segment and its ABORT marker (so its index entry) is in
    the next: a read of the first segment alone still lists it."""
    broker, conn, _ = served
    part = broker.partition("t", 0)
    p1 = TxnBatches(1)
    part.append(p1.txn(2))  # 0, 1
    part.log.roll()
    part.append(p1.marker(ABORT), origin="coordinator")  # 2, in the second segment
    part.append(plain(b"a"))  # 3
    answer = fetch(conn, 12, 0, 1)
    assert batch_offsets(answer["records"]) == [(0, 1)] and aborted_of(answer) == [(1, 0)]
    assert aborted_of(fetch(conn, 12, 2, 1)) == [(1, 0)]  # the marker's own batch: it still overlaps
    assert aborted_of(fetch(conn, 12, 3, 1)) == []


def test_a_partition_without_transactions_answers_the_hw_as_lso_and_collects_nothing(served) -> None:
    broker, conn, _ = served
    part = broker.partition("t", 0)
    part.append(plain(b"a"))
    part.append(plain(b"b"))
    assert not part.log.has_aborted_transactions  # a committed read then reads no transaction index
    for isolation in (0, 1):
        answer = fetch(conn, 12, 0, isolation)
        assert (answer["high_watermark"], answer["last_stable_offset"]) == (2, 2)
        assert batch_offsets(answer["records"]) == [(0, 0), (1, 1)]
        assert aborted_of(answer) == ([] if isolation else None)


def test_the_in_process_fetch_carries_the_lso_and_aborted_transactions(served) -> None:
    broker, _, _ = served
    write_mixed(broker.partition("t", 0))
    committed = broker.fetch([("t", 0, 0, 1 << 20)], max_wait_ms=0, isolation_level="read_committed")[("t", 0)]
    assert (committed.high_watermark, committed.last_stable_offset, committed.aborted_transactions) == (12, 10,
                                                                                                       [(2, 4)])
    assert committed.records is not None
    assert batch_offsets(committed.records.read())[-1] == (9, 9)
    uncommitted = broker.fetch([("t", 0, 0, 1 << 20)], max_wait_ms=0)[("t", 0)]
    assert (uncommitted.last_stable_offset, uncommitted.aborted_transactions) == (10, None)
    assert uncommitted.records is not None
    assert batch_offsets(uncommitted.records.read())[-1] == (11, 11)


# -- ListOffsets ------------------------------------------------------------------------------


def list_offset(conn: BrokerConnection, version: int, timestamp: int, isolation: int) -> Tuple[int, int]:
    body = {"replica_id": -1, "isolation_level": isolation, "topics": [{"name": "t", "partitions": [
        {"partition_index": 0, "timestamp": timestamp, "max_num_offsets": 1, "current_leader_epoch": -1}]}]}
    [topic] = conn.request(ApiKey.LIST_OFFSETS, body, version=version)["topics"]
    [part] = topic["partitions"]
    assert part["error_code"] == 0
    return part["offset"], part["timestamp"]


@pytest.mark.parametrize("version", [2, 5, 9])
def test_list_offsets_read_committed_is_bounded_by_the_lso(served, version: int) -> None:
    broker, conn, _ = served
    part = broker.partition("t", 0)
    p1 = TxnBatches(1)
    part.append(plain(b"a", TS))  # 0
    part.append(p1.txn())  # 1: ongoing, timestamp TS
    part.append(plain(b"b", TS + 5000))  # 2
    assert (part.high_watermark, part.last_stable_offset) == (3, 1)
    assert list_offset(conn, version, -1, 1)[0] == 1
    assert list_offset(conn, version, -1, 0)[0] == 3
    assert list_offset(conn, version, TS + 1000, 1)[0] == -1  # offset 2 is past the LSO
    assert list_offset(conn, version, TS + 1000, 0) == (2, TS + 5000)
    assert list_offset(conn, version, -2, 1)[0] == 0
    part.append(p1.marker(COMMIT), origin="coordinator")  # 3
    assert list_offset(conn, version, -1, 1)[0] == 4
    assert list_offset(conn, version, TS + 1000, 1) == (2, TS + 5000)


def test_list_offsets_v1_ignores_the_isolation_level(served) -> None:
    broker, conn, _ = served
    part = broker.partition("t", 0)
    part.append(TxnBatches(1).txn())
    assert list_offset(conn, 1, -1, 1)[0] == 1  # v1 has no isolation level: the HW


# -- real clients -----------------------------------------------------------------------------


def _values_kafka_python(bootstrap: str, isolation: str, count: int) -> List[bytes]:
    kafka = pytest.importorskip("kafka")
    consumer = kafka.KafkaConsumer(bootstrap_servers=bootstrap, isolation_level=isolation,
                                   auto_offset_reset="earliest", enable_auto_commit=False,
                                   consumer_timeout_ms=200)
    try:
        tp = kafka.TopicPartition("t", 0)
        consumer.assign([tp])
        got: List[bytes] = []

        def step() -> None:
            for batch in consumer.poll(timeout_ms=200).values():
                got.extend(r.value for r in batch)
        wait_for(lambda: len(got) >= count, TIMEOUT_S, "kafka-python %s read %d records" % (isolation, count),
                 step=step)
        consumer.poll(timeout_ms=300)  # nothing further arrives past what is fetchable
        got.extend(r.value for batch in consumer.poll(timeout_ms=300).values() for r in batch)
        position = consumer.position(tp)
        end = consumer.end_offsets([tp])[tp]
        return got + [b"position=%d" % position, b"end=%d" % end]
    finally:
        consumer.close()


def _values_confluent(bootstrap: str, isolation: str, count: int) -> List[bytes]:
    confluent = pytest.importorskip("confluent_kafka")
    consumer = confluent.Consumer({"bootstrap.servers": bootstrap, "group.id": "g-" + isolation,
                                   "isolation.level": isolation, "enable.auto.commit": False,
                                   "auto.offset.reset": "earliest"})
    try:
        consumer.assign([confluent.TopicPartition("t", 0, 0)])
        got: List[bytes] = []

        def step() -> None:
            message = consumer.poll(0.2)
            if message is not None and not message.error():
                got.append(message.value())
        wait_for(lambda: len(got) >= count, TIMEOUT_S, "librdkafka %s read %d records" % (isolation, count),
                 step=step)
        for _ in range(3):  # nothing further arrives past what is fetchable
            message = consumer.poll(0.2)
            if message is not None and not message.error():
                got.append(message.value())
        _, high = consumer.get_watermark_offsets(confluent.TopicPartition("t", 0), timeout=TIMEOUT_S)
        return got + [b"end=%d" % high]
    finally:
        consumer.close()


COMMITTED_VIEW = [b"a", b"1-0", b"1-1", b"1-2", b"b"]  # below the LSO, p2's aborted records dropped
EVERYTHING = [b"a", b"1-0", b"1-1", b"2-0", b"2-1", b"1-2", b"b", b"3-0", b"c"]


def test_kafka_python_read_committed_and_uncommitted(served) -> None:
    broker, _, bootstrap = served
    part = broker.partition("t", 0)
    write_mixed(part)
    committed = _values_kafka_python(bootstrap, "read_committed", len(COMMITTED_VIEW))
    assert committed == COMMITTED_VIEW + [b"position=10", b"end=10"]  # held at the LSO
    uncommitted = _values_kafka_python(bootstrap, "read_uncommitted", len(EVERYTHING))
    assert uncommitted == EVERYTHING + [b"position=12", b"end=12"]
    part.append(TxnBatches(3).marker(COMMIT), origin="coordinator")  # 12: the ongoing one commits
    after = _values_kafka_python(bootstrap, "read_committed", len(COMMITTED_VIEW) + 2)
    assert after == COMMITTED_VIEW + [b"3-0", b"c", b"position=13", b"end=13"]


def test_librdkafka_read_committed_and_uncommitted(served) -> None:
    broker, _, bootstrap = served
    part = broker.partition("t", 0)
    write_mixed(part)
    assert _values_confluent(bootstrap, "read_committed", len(COMMITTED_VIEW)) == COMMITTED_VIEW + [b"end=10"]
    assert _values_confluent(bootstrap, "read_uncommitted", len(EVERYTHING)) == EVERYTHING + [b"end=12"]
    part.append(TxnBatches(3).marker(ABORT), origin="coordinator")  # 12: the ongoing one aborts
    assert _values_confluent(bootstrap, "read_committed", len(COMMITTED_VIEW) + 1) == \
        COMMITTED_VIEW + [b"c", b"end=13"]


@pytest.mark.parametrize("transport", ["in-process", "tcp"])
def test_pylogq_consumer_read_committed_drops_aborted_records(served, transport: str) -> None:
    broker, _, bootstrap = served
    write_mixed(broker.partition("t", 0))
    where: Dict[str, Any] = {"broker": broker} if transport == "in-process" else {"bootstrap_servers": bootstrap}
    for isolation, expected in (("read_committed", COMMITTED_VIEW), ("read_uncommitted", EVERYTHING)):
        with Consumer(isolation_level=isolation, auto_offset_reset="earliest", **where) as consumer:
            tp = TopicPartition("t", 0)
            consumer.assign([tp])
            got: List[bytes] = []

            def step() -> None:
                for batch in consumer.poll(timeout_ms=200).values():
                    got.extend(r.value for r in batch)
            wait_for(lambda: len(got) >= len(expected), TIMEOUT_S, "pylogq %s read" % isolation, step=step)
            step()  # nothing further arrives past what is fetchable
            assert got == expected
            assert consumer.end_offsets([tp])[tp] == (10 if isolation == "read_committed" else 12)


def test_a_parked_read_committed_fetch_is_answered_when_the_transaction_commits(served) -> None:
    broker, conn, _ = served
    part = broker.partition("t", 0)
    p1 = TxnBatches(1)
    part.append(p1.txn(2))  # 0, 1: ongoing, the LSO held at 0
    body = {
        "replica_id": -1, "max_wait_ms": 10000, "min_bytes": 1, "max_bytes": 1 << 20, "isolation_level": 1,
        "session_id": 0, "session_epoch": -1,
        "topics": [{"topic": "t", "partitions": [{"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1 << 20,
                                                  "current_leader_epoch": -1, "log_start_offset": -1}]}],
        "forgotten_topics_data": [], "rack_id": "",
    }
    future = conn.send(ApiKey.FETCH, body, 12)
    wait_for(lambda: broker.fetch_purgatory.watched() > 0, TIMEOUT_S, "the fetch parked at the LSO")
    assert not future.done()
    part.append(p1.marker(COMMIT), origin="coordinator")  # 2
    [answer] = conn.wait(future, ApiKey.FETCH, TIMEOUT_S)["responses"]
    [got] = answer["partitions"]
    assert got["last_stable_offset"] == 3 and aborted_of(got) == []
    assert batch_offsets(got["records"]) == [(0, 1), (2, 2)]


def test_aiokafka_read_committed_and_uncommitted(served) -> None:
    aiokafka = pytest.importorskip("aiokafka")
    broker, _, bootstrap = served
    write_mixed(broker.partition("t", 0))

    async def read(isolation: str, count: int) -> List[bytes]:
        consumer = aiokafka.AIOKafkaConsumer(bootstrap_servers=bootstrap, isolation_level=isolation,
                                             auto_offset_reset="earliest", enable_auto_commit=False)
        await consumer.start()
        try:
            tp = aiokafka.TopicPartition("t", 0)
            consumer.assign([tp])
            got: List[bytes] = []
            deadline = asyncio.get_running_loop().time() + TIMEOUT_S
            while len(got) < count and asyncio.get_running_loop().time() < deadline:
                for batch in (await consumer.getmany(timeout_ms=200)).values():
                    got.extend(r.value for r in batch)
            for batch in (await consumer.getmany(timeout_ms=300)).values():  # nothing past what is fetchable
                got.extend(r.value for r in batch)
            end = (await consumer.end_offsets([tp]))[tp]
            return got + [b"end=%d" % end]
        finally:
            await consumer.stop()

    assert asyncio.run(read("read_committed", len(COMMITTED_VIEW))) == COMMITTED_VIEW + [b"end=10"]
    assert asyncio.run(read("read_uncommitted", len(EVERYTHING))) == EVERYTHING + [b"end=12"]
