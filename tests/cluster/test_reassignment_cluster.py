"""Reassignment across a three-broker cluster, driven by kafka-python's admin client
(AlterPartitionReassignments and ListPartitionReassignments go to the controller): the
records a partition held move with it, the new replica ends with the leader's log, the
removed one is deleted, and a cancelled reassignment leaves the partition where it was.
A broker that is not the controller answers NOT_CONTROLLER."""

from __future__ import annotations

import time
from typing import List

from kafka import TopicPartition as KafkaTopicPartition
from kafka.admin import KafkaAdminClient
from kafka.errors import InvalidReplicationAssignmentError, NoReassignmentInProgressError

import pylogq
from pylogq import errors
from pylogq.client.connection import BrokerConnection
from pylogq.protocol import ApiKey

from .._cluster_ops import eventually, topic_with_records

TIMEOUT_S = 30.0
RECORDS = 500




def _log_end(cluster: pylogq.Cluster, broker_id: int, topic: str) -> int:
    partition = cluster.broker(broker_id).cluster.replicas.host.hosted((topic, 0))  # type: ignore[union-attr]
    return -1 if partition is None else int(partition.log_end_offset)


def _hosts(cluster: pylogq.Cluster, broker_id: int, topic: str) -> bool:
    return cluster.broker(broker_id).cluster.replicas.host.hosted((topic, 0)) is not None  # type: ignore[union-attr]


def test_kafka_python_moves_a_partition_with_its_records(pylogq_cluster: pylogq.Cluster) -> None:
    a, b, c = sorted(x.broker_id for x in pylogq_cluster.brokers)
    topic = topic_with_records(pylogq_cluster, {0: [a, b]}, RECORDS)
    admin = KafkaAdminClient(bootstrap_servers=pylogq_cluster.bootstrap_servers)
    try:
        tp = KafkaTopicPartition(topic, 0)
        assert admin.alter_partition_reassignments({tp: [b, c]}) == {tp: None}
        eventually(lambda: admin.list_partition_reassignments() == {}, "the reassignment to complete")
        # The brokers hear the outcome by UpdateMetadata, sent once the controller decided it
        # (it stops listing the move first, as Kafka's does).
        described = eventually(lambda: (lambda d: d if d.replicas == [b, c] else None)(
            pylogq_cluster.broker(b).describe_topic(topic).partitions[0]), "broker %d's metadata" % b)
        assert described.leader == b and sorted(described.isr) == [b, c]
        # The new replica has every record; the removed one no longer hosts the partition.
        assert eventually(lambda: _log_end(pylogq_cluster, c, topic) == RECORDS, "broker %d's copy" % c)
        eventually(lambda: not _hosts(pylogq_cluster, a, topic), "broker %d to delete its replica" % a)
        consumer = pylogq.Consumer(bootstrap_servers=pylogq_cluster.bootstrap_servers, auto_offset_reset="earliest")
        try:
            consumer.assign([pylogq.client.consumer.TopicPartition(topic, 0)])
            values: List[bytes] = []
            deadline = time.monotonic() + TIMEOUT_S
            while len(values) < RECORDS and time.monotonic() < deadline:
                for records in consumer.poll(timeout_ms=500).values():
                    values += [r.value for r in records]
            assert values == [b"record-%d" % i for i in range(RECORDS)]
        finally:
            consumer.close()
    finally:
        admin.close()


def test_kafka_python_sees_kafkas_errors_and_a_cancellation(pylogq_cluster: pylogq.Cluster) -> None:
    a, b, c = sorted(x.broker_id for x in pylogq_cluster.brokers)
    topic = topic_with_records(pylogq_cluster, {0: [a, b]}, RECORDS)
    admin = KafkaAdminClient(bootstrap_servers=pylogq_cluster.bootstrap_servers)
    try:
        tp = KafkaTopicPartition(topic, 0)
        assert admin.alter_partition_reassignments({tp: [a, 99]}) == {tp: InvalidReplicationAssignmentError}
        assert admin.alter_partition_reassignments({tp: None}) == {tp: NoReassignmentInProgressError}
        # Hold the new replica back so the reassignment stays under way, then cancel it.
        pylogq_cluster.freeze_broker(c)
        try:
            assert admin.alter_partition_reassignments({tp: [c, b]}) == {tp: None}
            listed = admin.list_partition_reassignments()
            assert listed == {tp: {"replicas": [c, b, a], "adding_replicas": [c], "removing_replicas": [a]}}
            assert admin.alter_partition_reassignments({tp: None}) == {tp: None}
            assert admin.list_partition_reassignments() == {}
        finally:
            pylogq_cluster.thaw_broker(c)
        # Back on its original replicas, in the order the full set had them (Kafka's: the
        # target's first), so b, which the target kept, comes first now.
        eventually(lambda: pylogq_cluster.broker(a).describe_topic(topic).partitions[0].replicas == [b, a],
                    "the partition to be back on its replicas")
        eventually(lambda: not _hosts(pylogq_cluster, c, topic), "broker %d to delete the replica it was given" % c)
    finally:
        admin.close()


def test_a_broker_that_is_not_the_controller_answers_not_controller(pylogq_cluster: pylogq.Cluster) -> None:
    controller = pylogq_cluster.controller()
    assert controller is not None
    other = next(x for x in pylogq_cluster.brokers if x.broker_id != controller.broker_id)
    host, port = other.listener_addresses[0]
    conn = BrokerConnection(host, port, "reassignment-test", 10.0)
    try:
        for api, body in ((ApiKey.LIST_PARTITION_REASSIGNMENTS, {"timeout_ms": 1000, "topics": None}),
                          (ApiKey.ALTER_PARTITION_REASSIGNMENTS, {"timeout_ms": 1000, "topics": [
                              {"name": "t", "partitions": [{"partition_index": 0, "replicas": [0]}]}]})):
            answer = conn.request(api, body, version=0)
            assert answer["error_code"] == errors.NotControllerError.code, answer
    finally:
        conn.close()


def test_partitions_are_not_added_to_a_topic_being_reassigned(pylogq_cluster: pylogq.Cluster) -> None:
    a, b, c = sorted(x.broker_id for x in pylogq_cluster.brokers)
    topic = topic_with_records(pylogq_cluster, {0: [a, b]}, RECORDS)
    pylogq_cluster.freeze_broker(c)  # the new replica holds the reassignment open
    try:
        controller = pylogq_cluster.controller()
        assert controller is not None
        assert controller.alter_partition_reassignments({(topic, 0): [c, b]}) == {(topic, 0): (0, None)}
        try:
            pylogq_cluster.broker(a).create_partitions(topic, 2)
        except errors.ReassignmentInProgressError as exc:
            assert topic in str(exc)
        else:
            raise AssertionError("partitions were added to a topic being reassigned")
        assert controller.alter_partition_reassignments({(topic, 0): None}) == {(topic, 0): (0, None)}
    finally:
        pylogq_cluster.thaw_broker(c)
    pylogq_cluster.broker(a).create_partitions(topic, 2)
    assert len(pylogq_cluster.broker(a).describe_topic(topic).partitions) == 2


def test_an_in_process_admin_client_describes_the_whole_cluster(pylogq_cluster: pylogq.Cluster) -> None:
    """What pylogq reassign-partitions --generate reads (the brokers and their racks) is the
    cluster's, also through a Broker of it in this process, not that one broker's alone."""
    ids = sorted(x.broker_id for x in pylogq_cluster.brokers)
    controller = pylogq_cluster.controller()
    assert controller is not None
    for broker in pylogq_cluster.brokers:
        with pylogq.AdminClient(broker=broker) as admin:
            described = admin.describe_cluster()
        assert sorted(b["broker_id"] for b in described["brokers"]) == ids
        assert described["controller_id"] == controller.broker_id
