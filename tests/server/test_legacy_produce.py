"""Legacy message sets (magic 0/1) are stored as v2 batches, as Kafka 3.x writes every append.

librdkafka's 0052 (msg_timestamps with a 0.9-format producer) replayed: confluent-kafka with
``api.version.request=false`` sends MessageSet v0 or v1, and a modern consumer reads the
records back with their values and timestamps, on one broker and on a three-broker cluster.
Raw requests: Produce v2 (magic 1), then Fetch v4+ answers a v2 batch and Fetch v1 the
records down-converted to magic 0.
"""

from __future__ import annotations

import time
from typing import Any, List, Tuple

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

import pylogq
from pylogq.client.connection import BrokerConnection
from pylogq.protocol import ApiKey
from pylogq.records import RecordBatch, build_batch, iter_batches
from pylogq.records.legacy import LegacyRecordBatchBuilder, assign_offsets_legacy, iter_legacy_records
from pylogq.server.handler_base import uuid_of

from .test_fetch_versions import fetch_request, served  # noqa: F401 - a fixture

TS = 1_700_000_000_000
#: librdkafka sizes its Metadata v0 parse buffer from the response; a short topic name on one
#: broker makes it too small ("tmpabuf memory shortage"), so the names are as long as its tests'.
TOPIC = "rdkafkatest_rnd_0052_msg_timestamps_legacy"


def _legacy(magic: int, codec: int) -> bytes:
    builder = LegacyRecordBatchBuilder(magic, codec)
    for i in range(4):
        builder.append(i, TS + i if magic else None, b"k%d" % i, b"v%d" % i)
    return bytes(builder.build())


def _produce(conn: BrokerConnection, version: int, topic: str, records: bytes) -> Any:
    response = conn.request(ApiKey.PRODUCE, {
        "transactional_id": None, "acks": 1, "timeout_ms": 5000,
        "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": records}]}]}, version=version)
    [part] = response["responses"][0]["partition_responses"]
    return part


def _fetch(conn: BrokerConnection, version: int, topic: Any) -> bytes:
    response = conn.request(ApiKey.FETCH, fetch_request(version, [(topic, [(0, 0, 1 << 20)])]), version=version)
    [part] = response["responses"][0]["partitions"]
    assert part["error_code"] == 0
    return bytes(part["records"] or b"")


@pytest.mark.parametrize("codec", [0, 1, 2, 3])
@pytest.mark.parametrize("magic", [0, 1])
def test_a_legacy_set_is_stored_and_fetched_as_a_v2_batch(served: Tuple[pylogq.Broker, BrokerConnection],
                                                         magic: int, codec: int) -> None:
    broker, conn = served
    broker.create_topic("t")
    first = _produce(conn, 2 if magic else 1, "t", _legacy(magic, codec))
    assert first["error_code"] == 0, first
    assert _produce(conn, 2 if magic else 1, "t", _legacy(magic, codec))["base_offset"] == 4
    for version in (4, 11, 16):
        data = _fetch(conn, version, uuid_of(broker.topic_id("t")) if version >= 13 else "t")
        headers = list(iter_batches(data))
        assert [(h.magic, h.base_offset, h.last_offset) for h in headers] == [(2, 0, 3), (2, 4, 7)]
        got = [(r.offset, r.timestamp, r.key, r.value) for h in headers for r in RecordBatch(data, h.position)]
        stamps = [TS + i if magic else -1 for i in range(4)]
        assert got == [(o, stamps[o % 4], b"k%d" % (o % 4), b"v%d" % (o % 4)) for o in range(8)]
        assert all(RecordBatch(data, h.position).compression_type == codec for h in headers)
    old = [(r.offset, r.magic, r.key, r.value) for r in iter_legacy_records(_fetch(conn, 1, "t"))]
    assert old == [(o, 0, b"k%d" % (o % 4), b"v%d" % (o % 4)) for o in range(8)]  # down-converted, as before


def _produce_legacy(bootstrap: str, topic: str, codec: str) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "api.version.request": False,
                         "broker.version.fallback": "0.9.0.1", "linger.ms": 100, "compression.codec": codec})
    reports: List[Any] = []
    for i in range(20):
        producer.produce(topic, value=b"value-%d" % i, key=b"k%d" % i, timestamp=TS + i, partition=0,
                         on_delivery=lambda err, msg: reports.append(err))
    assert producer.flush(30) == 0
    assert reports == [None] * 20


def _consume(bootstrap: str, topic: str) -> List[Tuple[int, bytes, Tuple[int, int]]]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "legacy-reader", "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, 0, 0)])
    got: List[Tuple[int, bytes, Tuple[int, int]]] = []
    deadline = time.monotonic() + 30
    try:
        while len(got) < 20 and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            assert msg.error() is None, msg.error()
            got.append((msg.offset(), msg.value(), msg.timestamp()))
    finally:
        consumer.close()
    return got


def _check(got: List[Tuple[int, bytes, Tuple[int, int]]]) -> None:
    # A 0.9 producer sends magic 0, which has no timestamp: Kafka's up-conversion writes a
    # CreateTime batch of records stamped -1 (NO_TIMESTAMP), read as (CREATE_TIME, -1).
    assert got == [(i, b"value-%d" % i, (1, -1)) for i in range(20)]


@pytest.mark.parametrize("codec", ["none", "gzip"])
def test_a_0_9_producer_reads_back_on_a_broker(pylogq_bootstrap: str, codec: str) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": pylogq_bootstrap})
    admin.create_topics([NewTopic(TOPIC, 1, 1)])[TOPIC].result(30)
    _produce_legacy(pylogq_bootstrap, TOPIC, codec)
    _check(_consume(pylogq_bootstrap, TOPIC))


def test_a_0_9_producer_reads_back_on_a_cluster(pylogq_cluster: Any) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    bootstrap = pylogq_cluster.bootstrap_servers
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(TOPIC, 1, 3)])[TOPIC].result(30)
    _produce_legacy(bootstrap, TOPIC, "none")
    _check(_consume(bootstrap, TOPIC))


def test_a_0_10_producer_keeps_its_timestamps(pylogq_bootstrap: str) -> None:
    """broker.version.fallback 0.10.0 without ApiVersions: MessageSet v1, which carries timestamps."""
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": pylogq_bootstrap})
    admin.create_topics([NewTopic(TOPIC, 1, 1)])[TOPIC].result(30)
    producer = Producer({"bootstrap.servers": pylogq_bootstrap, "api.version.request": False,
                         "broker.version.fallback": "0.10.0.0", "linger.ms": 100})
    for i in range(20):
        producer.produce(TOPIC, value=b"value-%d" % i, timestamp=TS + i, partition=0)
    assert producer.flush(30) == 0
    got = _consume(pylogq_bootstrap, TOPIC)
    assert got == [(i, b"value-%d" % i, (1, TS + i)) for i in range(20)]


@pytest.mark.parametrize("magic,codec", [(0, 0), (0, 1), (1, 0), (1, 1)])
def test_a_modern_consumer_reads_legacy_sets_of_an_old_segment(pylogq_broker: pylogq.Broker, pylogq_bootstrap: str,
                                                               magic: int, codec: int) -> None:
    """Segments written before up-conversion hold v0/v1 sets: Fetch v4+ serves them as they lie."""
    pylogq_broker.create_topic(TOPIC)
    log = pylogq_broker.logs.get_log(TOPIC, 0)
    assert log is not None
    for _ in range(5):
        stored, _ = assign_offsets_legacy(_legacy(magic, codec), log.log_end_offset)
        log.append_as_follower(stored)
    pylogq_broker.produce(TOPIC, 0, bytes(build_batch([b"v2"], timestamps=TS)))  # moves the high watermark
    got = _consume(pylogq_bootstrap, TOPIC)
    stamps = [(1, TS + i) if magic else (0, 0) for i in range(4)]  # librdkafka: magic 0 is NOT_AVAILABLE, 0
    assert got[:20] == [(o, b"v%d" % (o % 4), stamps[o % 4]) for o in range(20)]
