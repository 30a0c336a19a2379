"""OffsetDelete (47) over real sockets: real clients commit, offsets are deleted, OffsetFetch sees none.

The semantics are Kafka's GroupCoordinator.handleDeleteOffsets: an empty group
may delete any offset, a consumer group with members only those of topics it
does not subscribe to (GROUP_SUBSCRIBED_TO_TOPIC for the others), a group with
members of another protocol none (NON_EMPTY_GROUP); an unknown group answers
GROUP_ID_NOT_FOUND and a partition that does not exist UNKNOWN_TOPIC_OR_PARTITION.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, Iterator, List, Tuple

import pytest
from kafka import KafkaConsumer, KafkaProducer
from kafka.structs import OffsetAndMetadata as KafkaOffsetAndMetadata
from kafka.structs import TopicPartition as KafkaTopicPartition

from pylogq import Broker, errors
from pylogq.client.admin import AdminClient, NewTopic
from pylogq.client.connection import BrokerConnection
from pylogq.client.consumer import TopicPartition
from pylogq.protocol import SUPPORTED_VERSIONS, ApiKey

from ._support import consumer_settings, unique, wait_for

TIMEOUT_S = 15.0
NONE, UNKNOWN_TOPIC_OR_PARTITION, NON_EMPTY_GROUP, GROUP_ID_NOT_FOUND, GROUP_SUBSCRIBED_TO_TOPIC = 0, 3, 68, 69, 86


@pytest.fixture
def admin(bootstrap: str) -> Iterator[AdminClient]:
    with AdminClient(bootstrap_servers=bootstrap) as client:
        yield client


def _connection(bootstrap: str) -> BrokerConnection:
    host, port = bootstrap.rsplit(":", 1)
    return BrokerConnection(host, int(port), "offset-delete-test", TIMEOUT_S)


def _produce(bootstrap: str, topic: str, partitions: int, count: int) -> None:
    producer = KafkaProducer(bootstrap_servers=bootstrap, request_timeout_ms=10000)
    try:
        for p in range(partitions):
            for i in range(count):
                producer.send(topic, value=b"v%d" % i, partition=p)
        producer.flush()
    finally:
        producer.close()


def _subscribed(bootstrap: str, group: str, topic: str, partitions: int) -> KafkaConsumer:
    """A kafka-python group member that owns every partition of ``topic``.

    It joins knowing the topic's partitions, with polls longer than a join: kafka-python
    3.0.12 loses a rebalance that new metadata starts when its SyncGroup answer lands
    after poll() timed out (tests/server/test_clients_kafka_python._subscribe).
    """
    consumer = KafkaConsumer(**consumer_settings(bootstrap, group_id=group))
    assert consumer.partitions_for_topic(topic) == set(range(partitions))
    consumer.subscribe([topic])
    wait_for(lambda: consumer.poll(timeout_ms=1000) is not None and len(consumer.assignment()) == partitions,
             TIMEOUT_S, "the consumer's assignment")
    return consumer


def _committed(conn: BrokerConnection, group: str, topic: str, partitions: List[int]) -> Dict[int, int]:
    """OffsetFetch for ``partitions``, raw: partition -> committed offset (-1: none)."""
    response = conn.request(ApiKey.OFFSET_FETCH, {
        "group_id": group, "topics": [{"name": topic, "partition_indexes": partitions}]})
    return {p["partition_index"]: p["committed_offset"] for t in response["topics"] for p in t["partitions"]}


def _delete_raw(conn: BrokerConnection, group: str, wanted: List[Tuple[str, int]], version: int = 0
                ) -> Tuple[int, Dict[Tuple[str, int], int]]:
    topics: Dict[str, List[Dict[str, int]]] = {}
    for topic, partition in wanted:
        topics.setdefault(topic, []).append({"partition_index": partition})
    response = conn.request(ApiKey.OFFSET_DELETE, {
        "group_id": group, "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()]}, version=version)
    return response["error_code"], {(t["name"], p["partition_index"]): p["error_code"]
                                    for t in response["topics"] for p in t["partitions"]}


def test_a_left_groups_offsets_are_deleted(bootstrap: str, admin: AdminClient) -> None:
    topic, group = unique("od-left"), unique("od-left-group")
    admin.create_topics([NewTopic(topic, 2, 1)])
    _produce(bootstrap, topic, 2, 3)
    consumer = _subscribed(bootstrap, group, topic, 2)
    try:
        consumer.commit({KafkaTopicPartition(topic, 0): KafkaOffsetAndMetadata(3, "", -1),
                         KafkaTopicPartition(topic, 1): KafkaOffsetAndMetadata(2, "", -1)})
    finally:
        consumer.close(autocommit=False)
    wait_for(lambda: admin.describe_consumer_groups([group])[0].state == "Empty", TIMEOUT_S, "the group to empty")

    result = admin.delete_consumer_group_offsets(group, [TopicPartition(topic, 0)])
    assert result == {TopicPartition(topic, 0): None}
    conn = _connection(bootstrap)
    try:
        assert _committed(conn, group, topic, [0, 1]) == {0: -1, 1: 2}
    finally:
        conn.close()
    # The last offset gone, the group is gone too (Kafka's Empty -> Dead).
    assert admin.delete_consumer_group_offsets(group, [(topic, 1)]) == {TopicPartition(topic, 1): None}
    assert group not in {g for g, _ in admin.list_consumer_groups()}


def test_a_live_group_keeps_the_offsets_of_its_topics(bootstrap: str, admin: AdminClient) -> None:
    topic, other, group = unique("od-live"), unique("od-other"), unique("od-live-group")
    admin.create_topics([NewTopic(topic, 2, 1), NewTopic(other, 1, 1)])
    _produce(bootstrap, topic, 2, 2)
    consumer = _subscribed(bootstrap, group, topic, 2)
    try:
        consumer.commit({KafkaTopicPartition(topic, 0): KafkaOffsetAndMetadata(2, "", -1),
                         KafkaTopicPartition(other, 0): KafkaOffsetAndMetadata(0, "", -1)})
        results = admin.delete_consumer_group_offsets(
            group, [(topic, 0), (topic, 1), (other, 0), (other, 7)], raise_errors=False)
        assert {tp: None if e is None else type(e) for tp, e in results.items()} == {
            TopicPartition(topic, 0): errors.GroupSubscribedToTopicError,
            TopicPartition(topic, 1): errors.GroupSubscribedToTopicError,
            TopicPartition(other, 0): None,
            TopicPartition(other, 7): errors.UnknownTopicOrPartitionError,
        }
        with pytest.raises(errors.GroupSubscribedToTopicError):
            admin.delete_consumer_group_offsets(group, [(topic, 0)])
        conn = _connection(bootstrap)
        try:
            assert _committed(conn, group, topic, [0]) == {0: 2}
            assert _committed(conn, group, other, [0]) == {0: -1}
        finally:
            conn.close()
    finally:
        consumer.close(autocommit=False)


def test_an_unknown_group(bootstrap: str, admin: AdminClient) -> None:
    topic = unique("od-unknown")
    admin.create_topics([NewTopic(topic, 1, 1)])
    with pytest.raises(errors.GroupIdNotFoundError):
        admin.delete_consumer_group_offsets(unique("od-ghost"), [(topic, 0)])
    conn = _connection(bootstrap)
    try:
        assert _delete_raw(conn, unique("od-ghost"), [(topic, 0)]) == (GROUP_ID_NOT_FOUND, {})
        assert _delete_raw(conn, "", [(topic, 0)])[0] == errors.InvalidGroupIdError.code
    finally:
        conn.close()


def test_every_version_raw(bootstrap: str, admin: AdminClient) -> None:
    topic, group = unique("od-raw"), unique("od-raw-group")
    admin.create_topics([NewTopic(topic, 1, 1)])
    lo, hi = SUPPORTED_VERSIONS[ApiKey.OFFSET_DELETE]
    assert (lo, hi) == (0, 0)  # Kafka 3.9's whole range
    conn = _connection(bootstrap)
    try:
        for version in range(lo, hi + 1):
            conn.request(ApiKey.OFFSET_COMMIT, {
                "group_id": group, "generation_id_or_member_epoch": -1, "member_id": "",
                "topics": [{"name": topic, "partitions": [{"partition_index": 0, "committed_offset": 5}]}]})
            assert _committed(conn, group, topic, [0]) == {0: 5}
            assert _delete_raw(conn, group, [(topic, 0), (topic, 3), ("od-no-such-topic", 0)], version) == (NONE, {
                (topic, 0): NONE, (topic, 3): UNKNOWN_TOPIC_OR_PARTITION,
                ("od-no-such-topic", 0): UNKNOWN_TOPIC_OR_PARTITION})
            assert _committed(conn, group, topic, [0]) == {0: -1}
    finally:
        conn.close()


def test_a_group_of_another_protocol_with_members(tmp_path: Path) -> None:
    with Broker(str(tmp_path / "b"), group_initial_rebalance_delay_ms=0) as broker:
        broker.create_topic("t", 1)
        broker.ensure_offsets_topic()  # what a FindCoordinator would do first
        coordinator = broker.group_coordinator
        joined = coordinator.join_group("connect-group", "", "worker", 10000, 10000, "connect", [("v0", b"")])
        assert joined.error_code == 0
        host, port = broker.serve("127.0.0.1", 0)
        conn = BrokerConnection(host, port, "offset-delete-test", TIMEOUT_S)
        try:
            assert _delete_raw(conn, "connect-group", [("t", 0)]) == (NON_EMPTY_GROUP, {})
        finally:
            conn.close()
        with AdminClient(broker=broker) as admin, pytest.raises(errors.NonEmptyGroupError):
            admin.delete_consumer_group_offsets("connect-group", [("t", 0)])


def test_the_deletion_holds_after_a_restart(tmp_path: Path) -> None:
    config: Dict[str, Any] = {"group_initial_rebalance_delay_ms": 0, "offsets.topic.num.partitions": 2}
    with Broker(str(tmp_path / "b"), **config) as broker:
        broker.create_topic("t", 2)
        host, port = broker.serve("127.0.0.1", 0)
        bootstrap = "%s:%d" % (host, port)
        consumer = KafkaConsumer(**consumer_settings(bootstrap, group_id="g"))
        try:
            consumer.assign([KafkaTopicPartition("t", 0), KafkaTopicPartition("t", 1)])
            consumer.commit({KafkaTopicPartition("t", 0): KafkaOffsetAndMetadata(0, "", -1),
                             KafkaTopicPartition("t", 1): KafkaOffsetAndMetadata(0, "", -1)})
        finally:
            consumer.close(autocommit=False)
        with AdminClient(bootstrap_servers=bootstrap) as admin:
            assert admin.delete_consumer_group_offsets("g", [("t", 1)]) == {TopicPartition("t", 1): None}
    with Broker(str(tmp_path / "b"), **config) as broker:
        with AdminClient(broker=broker) as admin:
            committed = admin.list_consumer_group_offsets("g", [("t", 0), ("t", 1)])
            assert {tp.partition: om.offset for tp, om in committed.items()} == {0: 0, 1: -1}
            admin.delete_consumer_group_offsets("g", [("t", 0)])
    with Broker(str(tmp_path / "b"), **config) as broker:
        with AdminClient(broker=broker) as admin:
            assert "g" not in {g for g, _ in admin.list_consumer_groups()}
            committed = admin.list_consumer_group_offsets("g", [("t", 0)])
            assert committed[TopicPartition("t", 0)].offset == -1
