"""DescribeProducers (61) over real sockets: the active idempotent producers of each partition.

Each producer is reported from the partition's producer state as Kafka reports
it without transactions: its id and epoch, the sequence of its last record, its
last batch's timestamp, coordinator epoch -1 and no open transaction (-1).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Dict, Iterator, List, Tuple

import pytest

from pylogq import Broker, errors
from pylogq.client.admin import AdminClient, NewTopic
from pylogq.client.connection import BrokerConnection
from pylogq.client.consumer import TopicPartition
from pylogq.client.producer import Producer
from pylogq.protocol import SUPPORTED_VERSIONS, ApiKey

from ._support import unique

TIMEOUT_S = 15.0
UNKNOWN_TOPIC_OR_PARTITION = 3


@pytest.fixture
def admin(bootstrap: str) -> Iterator[AdminClient]:
    with AdminClient(bootstrap_servers=bootstrap) as client:
        yield client


def _connection(bootstrap: str) -> BrokerConnection:
    host, port = bootstrap.rsplit(":", 1)
    return BrokerConnection(host, int(port), "describe-producers-test", TIMEOUT_S)


def test_pylogq_idempotent_producer(bootstrap: str, admin: AdminClient) -> None:
    topic = unique("dp-pylogq")
    admin.create_topics([NewTopic(topic, 2, 1)])
    assert admin.describe_producers([(topic, 0)]) == {TopicPartition(topic, 0): []}
    before = int(time.time() * 1000)
    with Producer(bootstrap_servers=bootstrap, enable_idempotence=True) as producer:
        for i in range(5):
            producer.send(topic, b"v%d" % i, partition=0)
        producer.flush()
    described = admin.describe_producers([TopicPartition(topic, 0), (topic, 1)])
    assert described[TopicPartition(topic, 1)] == []
    [state] = described[TopicPartition(topic, 0)]
    assert state.producer_id >= 0 and state.producer_epoch == 0
    assert state.last_sequence == 4
    assert before <= state.last_timestamp <= int(time.time() * 1000)
    assert (state.coordinator_epoch, state.current_txn_start_offset) == (-1, -1)


def test_confluent_kafka_idempotent_producer(bootstrap: str, admin: AdminClient) -> None:
    confluent_kafka = pytest.importorskip("confluent_kafka")
    topic = unique("dp-confluent")
    admin.create_topics([NewTopic(topic, 1, 1)])
    producers = []
    for _ in range(2):
        producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True,
                                             "linger.ms": 5})
        for i in range(3):
            producer.produce(topic, value=b"v%d" % i, partition=0)
        assert producer.flush(TIMEOUT_S) == 0
        producers.append(producer)
    described = admin.describe_producers([(topic, 0)])[TopicPartition(topic, 0)]
    assert len(described) == 2 and len({d.producer_id for d in described}) == 2
    assert all(d.last_sequence == 2 and d.coordinator_epoch == -1 and d.current_txn_start_offset == -1
               for d in described)


def test_unknown_partitions(bootstrap: str, admin: AdminClient) -> None:
    topic = unique("dp-unknown")
    admin.create_topics([NewTopic(topic, 1, 1)])
    with pytest.raises(errors.UnknownTopicOrPartitionError):
        admin.describe_producers([(topic, 5)])
    with pytest.raises(errors.UnknownTopicOrPartitionError):
        admin.describe_producers([(unique("dp-missing"), 0)])


def test_every_version_raw(bootstrap: str, admin: AdminClient) -> None:
    topic = unique("dp-raw")
    admin.create_topics([NewTopic(topic, 1, 1)])
    with Producer(bootstrap_servers=bootstrap, enable_idempotence=True) as producer:
        producer.send(topic, b"x", partition=0)
        producer.flush()
    lo, hi = SUPPORTED_VERSIONS[ApiKey.DESCRIBE_PRODUCERS]
    assert (lo, hi) == (0, 0)  # Kafka 3.9's whole range
    conn = _connection(bootstrap)
    try:
        for version in range(lo, hi + 1):
            response = conn.request(ApiKey.DESCRIBE_PRODUCERS, {"topics": [
                {"name": topic, "partition_indexes": [0, 3]}, {"name": "dp-no-such-topic", "partition_indexes": [0]}]},
                version=version)
            found: Dict[Tuple[str, int], Tuple[int, List[Tuple[int, int]]]] = {
                (t["name"], p["partition_index"]): (p["error_code"], [
                    (s["last_sequence"], s["coordinator_epoch"]) for s in p["active_producers"]])
                for t in response["topics"] for p in t["partitions"]}
            assert found == {(topic, 0): (0, [(0, -1)]), (topic, 3): (UNKNOWN_TOPIC_OR_PARTITION, []),
                             ("dp-no-such-topic", 0): (UNKNOWN_TOPIC_OR_PARTITION, [])}
    finally:
        conn.close()


def test_in_process(tmp_path: Path) -> None:
    with Broker(str(tmp_path / "b")) as broker:
        broker.create_topic("t", 1)
        with Producer(broker=broker, enable_idempotence=True) as producer:
            for i in range(3):
                producer.send("t", b"v%d" % i, partition=0)
            producer.flush()
        with AdminClient(broker=broker) as admin:
            [state] = admin.describe_producers([("t", 0)])[TopicPartition("t", 0)]
            assert (state.producer_epoch, state.last_sequence, state.coordinator_epoch) == (0, 2, -1)
            with pytest.raises(errors.UnknownTopicOrPartitionError):
                admin.describe_producers([("t", 1)])
