"""Per-record errors (KIP-467): a refused batch names every bad record with Kafka's message.

librdkafka's 0011 (produce_batch) replayed: 100 records, every tenth keyless, to a compacted
topic fail exactly the ten keyless ones as INVALID_RECORD and the 90 others as failed by a
different record; on one broker and on a three-broker cluster served over TCP.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Dict, Iterator, List, Tuple

import pytest
from confluent_kafka import KafkaError, Producer

import pylogq
from pylogq.client.connection import BrokerConnection
from pylogq.errors import InvalidRecordError, InvalidTimestampError
from pylogq.protocol import ApiKey
from pylogq.records import build_batch

TS = 1_700_000_000_000
KEYLESS = "Compacted topic cannot accept message without key in topic partition compacted-0."


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Tuple[pylogq.Broker, BrokerConnection]]:
    with pylogq.Broker(str(tmp_path / "data")) as broker:
        host, port = broker.serve()
        broker.create_topic("compacted", config={"cleanup.policy": "compact"})
        broker.create_topic("recent", config={"message.timestamp.before.max.ms": 3_600_000,
                                              "message.timestamp.after.max.ms": 3_600_000})
        conn = BrokerConnection(host, port, "record-errors-test", 10.0)
        try:
            yield broker, conn
        finally:
            conn.close()


def _produce(conn: BrokerConnection, topic: str, records: bytes, version: int = 9) -> Dict[str, Any]:
    response = conn.request(ApiKey.PRODUCE, {
        "transactional_id": None, "acks": -1, "timeout_ms": 5000,
        "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": records}]}]}, version=version)
    [part] = response["responses"][0]["partition_responses"]
    return part


def test_every_keyless_record_of_the_batch_is_named(served: Tuple[pylogq.Broker, BrokerConnection]) -> None:
    broker, conn = served
    keys = [None if i % 10 == 0 else b"k%d" % i for i in range(100)]
    part = _produce(conn, "compacted", bytes(build_batch([b"v%d" % i for i in range(100)], keys=keys,
                                                         timestamps=TS, compression_type="lz4")))
    assert part["error_code"] == InvalidRecordError.code
    assert part["record_errors"] == [{"batch_index": i, "batch_index_error_message": KEYLESS}
                                     for i in range(0, 100, 10)]
    assert part["error_message"].endswith(  # after the "[Error 87] INVALID_RECORD: " every error message has
        "One or more records have been rejected due to 10 record errors in total, and only showing the first "
        "three errors at most: [RecordError(batchIndex=0, message='%s'), RecordError(batchIndex=10, "
        "message='%s'), RecordError(batchIndex=20, message='%s')]" % (KEYLESS, KEYLESS, KEYLESS))
    assert broker.list_offsets("compacted", 0, -1)[0] == 0


def test_every_timestamp_out_of_range_is_named(served: Tuple[pylogq.Broker, BrokerConnection]) -> None:
    broker, conn = served
    now = int(time.time() * 1000)
    stamps = [now, now - 7_200_000, now + 10, now + 7_200_000]
    part = _produce(conn, "recent", bytes(build_batch([b"a", b"b", b"c", b"d"], timestamps=stamps)))
    assert part["error_code"] == InvalidTimestampError.code
    assert part["error_message"].endswith("One or more records have been rejected due to invalid timestamp")
    assert [e["batch_index"] for e in part["record_errors"]] == [1, 3]
    for e, ts, offset in zip(part["record_errors"], (stamps[1], stamps[3]), (1, 3)):
        assert e["batch_index_error_message"].startswith(
            "Timestamp %d of message with offset %d is out of range. The timestamp should be within [" % (ts, offset))
    assert broker.list_offsets("recent", 0, -1)[0] == 0
    assert _produce(conn, "recent", bytes(build_batch([b"a"], timestamps=now)))["error_code"] == 0


def _keyless_batch(bootstrap: str, topic: str) -> List[Any]:
    """librdkafka's 0011: 100 records in one batch, every tenth keyless; the delivery errors.

    The records go in with one ``produce_batch`` call (``rd_kafka_produce_batch``, as 0011
    does), which queues them on the partition at once: with one ``produce`` call each, a
    sender finding the first of them already past ``linger.ms`` (the partition's leader
    learnt late, or the loop descheduled) sends what is queued so far as a batch of its own.
    """
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 500, "batch.num.messages": 1000,
                         "acks": "all", "retries": 0})
    reports: List[Any] = []
    messages = [{"value": b"v%d" % i, "key": None if i % 10 == 0 else b"k%d" % i} for i in range(100)]
    queued = producer.produce_batch(topic, messages, partition=0,
                                    on_delivery=lambda err, msg: reports.append((msg.key(), err)))
    assert queued == 100
    assert producer.flush(30) == 0
    return reports


def _check_reports(reports: List[Any]) -> None:
    assert len(reports) == 100
    invalid = [key for key, err in reports if err is not None and err.code() == KafkaError.INVALID_RECORD]
    other = [key for key, err in reports if err is not None and err.code() == KafkaError._INVALID_DIFFERENT_RECORD]
    assert invalid == [None] * 10
    assert len(other) == 90 and None not in other


def test_librdkafka_fails_the_keyless_records_and_names_the_others(
        pylogq_broker: pylogq.Broker, pylogq_bootstrap: str) -> None:
    pylogq_broker.create_topic("rdkafkatest_0011_compacted", config={"cleanup.policy": "compact"})
    _check_reports(_keyless_batch(pylogq_bootstrap, "rdkafkatest_0011_compacted"))


def test_librdkafka_per_record_errors_on_a_cluster(pylogq_cluster: Any) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    bootstrap = pylogq_cluster.bootstrap_servers
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic("rdkafkatest_0011_compacted", 1, 3,
                                  config={"cleanup.policy": "compact"})])["rdkafkatest_0011_compacted"].result(30)
    _check_reports(_keyless_batch(bootstrap, "rdkafkatest_0011_compacted"))
