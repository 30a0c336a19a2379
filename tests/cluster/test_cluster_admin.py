"""Topic and group administration across a three-broker cluster, as librdkafka's 0081
(admin) test meets it: explicit replica assignments in CreateTopics and CreatePartitions
placed as asked and refused with Kafka's errors, OffsetDelete of partitions hosted on
other brokers than the coordinator's, and AlterConfigs of a read-only broker key."""

from __future__ import annotations

import time
import uuid
from typing import Any, Callable, Dict, List

import pytest
from confluent_kafka import Consumer as ConfluentConsumer, TopicPartition as ConfluentTopicPartition
from confluent_kafka.admin import (
    AdminClient as ConfluentAdminClient,
    NewPartitions as ConfluentNewPartitions,
    NewTopic as ConfluentNewTopic,
)

import pylogq
from pylogq import errors
from pylogq.client.admin import NewPartitions, NewTopic
from pylogq.client.connection import BrokerConnection
from pylogq.client.consumer import TopicPartition
from pylogq.protocol import AlterConfigOp, ApiKey, ConfigResourceType

TIMEOUT_S = 30.0


def _name(prefix: str) -> str:
    return "%s-%s" % (prefix, uuid.uuid4().hex[:8])


def _ids(cluster: pylogq.Cluster) -> List[int]:
    return sorted(b.broker_id for b in cluster.brokers)


def _eventually(check: Callable[[], Any], what: str) -> Any:
    """``check()``'s value once it is truthy, within the deadline."""
    deadline = time.monotonic() + TIMEOUT_S
    while True:
        value = check()
        if value:
            return value
        assert time.monotonic() < deadline, "timed out waiting for %s" % what
        time.sleep(0.05)


def _detail(message: str) -> str:
    """An error message without the "[Error N] NAME: " that pylogq puts before Kafka's text."""
    return message.split(": ", 1)[1] if message.startswith("[Error ") else message


def _conn(cluster: pylogq.Cluster, broker_id: int) -> BrokerConnection:
    host, port = cluster.broker(broker_id).listener_addresses[0]
    return BrokerConnection(host, port, "cluster-admin-test", 10.0)


def _replicas(admin: ConfluentAdminClient, topic: str, count: int) -> Dict[int, List[int]]:
    """partition -> replicas from Metadata, once it shows ``count`` partitions, each led by its first replica."""
    def seen() -> Dict[int, List[int]]:
        parts = admin.list_topics(topic, timeout=10).topics[topic].partitions
        if len(parts) != count or any(p.leader != p.replicas[0] for p in parts.values()):
            return {}
        return {p: list(m.replicas) for p, m in parts.items()}
    return _eventually(seen, "the metadata of %s" % topic)


def test_confluent_replica_assignments_are_placed_as_asked(pylogq_cluster: pylogq.Cluster) -> None:
    a, b, c = _ids(pylogq_cluster)
    admin = ConfluentAdminClient({"bootstrap.servers": pylogq_cluster.bootstrap_servers})
    topic = _name("assigned")
    admin.create_topics([ConfluentNewTopic(topic, 3, replica_assignment=[[a, b, c], [b, c, a], [c, a, b]])]
                        )[topic].result(TIMEOUT_S)
    assert _replicas(admin, topic, 3) == {0: [a, b, c], 1: [b, c, a], 2: [c, a, b]}
    admin.create_partitions([ConfluentNewPartitions(topic, 4, replica_assignment=[[b, a, c]])])[topic].result(TIMEOUT_S)
    assert _replicas(admin, topic, 4) == {0: [a, b, c], 1: [b, c, a], 2: [c, a, b], 3: [b, a, c]}


def test_pylogq_admin_client_places_replicas_as_asked(pylogq_cluster: pylogq.Cluster) -> None:
    a, b, c = _ids(pylogq_cluster)
    topic = _name("own-admin")
    with pylogq.AdminClient(bootstrap_servers=pylogq_cluster.bootstrap_servers) as admin:
        admin.create_topics([NewTopic(topic, replica_assignments={0: [c, a], 1: [a, b]})])
        admin.create_partitions({topic: NewPartitions(3, [[b, c]])})

        def described() -> Dict[int, List[int]]:
            parts = admin.describe_topics([topic])[0]["partitions"]
            return {p["partition"]: p["replicas"] for p in parts} if len(parts) == 3 else {}
        assert _eventually(described, "three partitions") == {0: [c, a], 1: [a, b], 2: [b, c]}
        with pytest.raises(errors.InvalidReplicationAssignmentError, match=r"Unknown broker\(s\) in replica "
                                                                          r"assignment: 7\."):
            admin.create_partitions({topic: NewPartitions(4, [[a, 7]])})
    assert pylogq_cluster.broker(a).describe_topic(topic).partitions[2].replicas == [b, c]


def test_offset_delete_on_partitions_of_every_broker(pylogq_cluster: pylogq.Cluster) -> None:
    """Each partition's only replica lives on another broker: the coordinator's broker hosts
    at most one of them, and deletes the group's offsets of all three (OffsetDelete sent as
    librdkafka sends it, to the coordinator; confluent-kafka's Python API has no call for it)."""
    ids = _ids(pylogq_cluster)
    admin = ConfluentAdminClient({"bootstrap.servers": pylogq_cluster.bootstrap_servers})
    topic = _name("spread")
    admin.create_topics([ConfluentNewTopic(topic, len(ids), replica_assignment=[[i] for i in ids])]
                        )[topic].result(TIMEOUT_S)
    assert _replicas(admin, topic, 3) == {p: [i] for p, i in enumerate(ids)}
    group = _name("offsets")
    consumer = ConfluentConsumer({"bootstrap.servers": pylogq_cluster.bootstrap_servers, "group.id": group,
                                  "enable.auto.commit": False})
    partitions = [ConfluentTopicPartition(topic, p) for p in range(3)]
    try:
        consumer.commit(offsets=[ConfluentTopicPartition(topic, p, 5) for p in range(3)], asynchronous=False)
        assert [tp.offset for tp in consumer.committed(partitions, timeout=10)] == [5, 5, 5]
        error, coordinator = pylogq_cluster.broker(ids[0]).coordinator_for(group)
        assert error == 0
        conn = _conn(pylogq_cluster, coordinator)
        try:
            body = {"group_id": group, "topics": [{"name": topic, "partitions": [
                {"partition_index": p} for p in (0, 1, 2, 9)]}]}
            response = conn.request(ApiKey.OFFSET_DELETE, body)
        finally:
            conn.close()
        assert response["error_code"] == 0
        codes = {p["partition_index"]: p["error_code"] for p in response["topics"][0]["partitions"]}
        assert codes == {0: 0, 1: 0, 2: 0, 9: errors.UnknownTopicOrPartitionError.code}
        assert [tp.offset for tp in consumer.committed(partitions, timeout=10)] == [-1001] * 3  # none committed
    finally:
        consumer.close()


def test_pylogq_admin_client_deletes_offsets_across_brokers(pylogq_cluster: pylogq.Cluster) -> None:
    ids = _ids(pylogq_cluster)
    topic, group = _name("spread-own"), _name("own-offsets")
    boot = pylogq_cluster.bootstrap_servers
    with pylogq.AdminClient(bootstrap_servers=boot) as admin:
        admin.create_topics([NewTopic(topic, replica_assignments={p: [i] for p, i in enumerate(ids)})])
        consumer = ConfluentConsumer({"bootstrap.servers": boot, "group.id": group, "enable.auto.commit": False})
        try:
            consumer.commit(offsets=[ConfluentTopicPartition(topic, p, 3) for p in range(3)], asynchronous=False)
        finally:
            consumer.close()
        wanted = [TopicPartition(topic, p) for p in range(3)]
        result = admin.delete_consumer_group_offsets(group, wanted)
        assert all(error is None for error in result.values()), result


def _create_topic(conn: BrokerConnection, name: str, assignments: List[List[int]], partitions: int = -1,
                  factor: int = -1, indexes: Any = None) -> Dict[str, Any]:
    indexes = list(range(len(assignments))) if indexes is None else indexes
    spec = {"name": name, "num_partitions": partitions, "replication_factor": factor, "configs": [],
            "assignments": [{"partition_index": p, "broker_ids": r} for p, r in zip(indexes, assignments)]}
    [result] = conn.request(ApiKey.CREATE_TOPICS, {"topics": [spec], "timeout_ms": 10000, "validate_only": False},
                            version=5)["topics"]
    return dict(result)


# Kafka's refusals of a new topic's assignment (brokers 0, 1, 2 stand for the cluster's three).
CREATE_REFUSALS = [
    ({"assignments": [[0, 1]], "partitions": 1}, errors.InvalidRequestError,
     "Both numPartitions or replicationFactor and replicasAssignments were set. Both cannot be used at the same "
     "time."),
    ({"assignments": [[0, 1]], "factor": 2}, errors.InvalidRequestError,
     "Both numPartitions or replicationFactor and replicasAssignments were set. Both cannot be used at the same "
     "time."),
    ({"assignments": [[0, 1], [1]]}, errors.InvalidReplicationAssignmentError,
     "All partitions should have the same number of replicas"),
    ({"assignments": [[0, 1], [2, 2]]}, errors.InvalidReplicationAssignmentError,
     "Duplicate replica assignment found: {0: [0, 1], 1: [2, 2]}"),
    ({"assignments": [[0], [1]], "indexes": [0, 2]}, errors.InvalidReplicationAssignmentError,
     "partitions should be a consecutive 0-based integer sequence"),
    ({"assignments": [[0], [1]], "indexes": [1, 1]}, errors.InvalidReplicationAssignmentError,
     "partitions should be a consecutive 0-based integer sequence"),
    ({"assignments": [[0, 7], [1, 9]]}, errors.InvalidReplicationAssignmentError,
     "Unknown broker(s) in replica assignment: 7, 9."),
    ({"assignments": [[]]}, errors.InvalidReplicationAssignmentError,
     "Cannot have replication factor of 0 for partition id 0."),
]


@pytest.mark.parametrize("case, error, message", CREATE_REFUSALS)
def test_create_topics_refuses_bad_assignments(pylogq_cluster: pylogq.Cluster, case: Dict[str, Any],
                                               error: type, message: str) -> None:
    ids = _ids(pylogq_cluster)
    shift = {0: ids[0], 1: ids[1], 2: ids[2], 7: max(ids) + 7, 9: max(ids) + 9}
    assignments = [[shift[b] for b in r] for r in case["assignments"]]
    message = message.replace("7, 9", "%d, %d" % (shift[7], shift[9])) if "Unknown" in message else message
    if "Duplicate" in message:
        message = "Duplicate replica assignment found: %s" % {0: assignments[0], 1: assignments[1]}
    topic = _name("refused")
    conn = _conn(pylogq_cluster, ids[1])
    try:
        result = _create_topic(conn, topic, assignments, case.get("partitions", -1), case.get("factor", -1),
                               case.get("indexes"))
    finally:
        conn.close()
    assert (result["error_code"], _detail(result["error_message"])) == (error.code, message)  # type: ignore[attr-defined]
    assert topic not in pylogq_cluster.broker(ids[0]).list_topics()


CREATE_PARTITIONS_REFUSALS = [
    (5, [[0, 7]], "Unknown broker(s) in replica assignment: 7."),
    (5, [[0, 1]], "Increasing the number of partitions by 2 but 1 assignments provided."),
    (4, [], "Increasing the number of partitions by 1 but 0 assignments provided."),
    (4, [[1, 1]], "Duplicate brokers not allowed in replica assignment: 1, 1 for partition id 3."),
    (4, [[]], "Cannot have replication factor of 0 for partition id 3."),
    (5, [[0, 1], [0, 1, 2]], "Inconsistent replication factor between partitions, partition 0 has 2 while "
                             "partitions [4] have replication factors [3], respectively."),
]


@pytest.mark.parametrize("total, assignments, message", CREATE_PARTITIONS_REFUSALS)
def test_create_partitions_refuses_bad_assignments(pylogq_cluster: pylogq.Cluster, total: int,
                                                   assignments: List[List[int]], message: str) -> None:
    ids = _ids(pylogq_cluster)
    shift = {0: ids[0], 1: ids[1], 2: ids[2], 7: max(ids) + 7}
    message = message.replace("assignment: 7.", "assignment: %d." % shift[7]) \
        .replace("1, 1 for", "%d, %d for" % (shift[1], shift[1]))
    topic = _name("grown")
    pylogq_cluster.create_topic(topic, 3, 2)
    conn = _conn(pylogq_cluster, ids[2])
    try:
        body = {"topics": [{"name": topic, "count": total,
                            "assignments": [{"broker_ids": [shift[b] for b in r]} for r in assignments]}],
                "timeout_ms": 10000, "validate_only": False}
        [result] = conn.request(ApiKey.CREATE_PARTITIONS, body, version=3)["results"]
    finally:
        conn.close()
    assert (result["error_code"], _detail(result["error_message"])) == (
        errors.InvalidReplicationAssignmentError.code, message)
    assert pylogq_cluster.broker(ids[0]).partitions_for(topic) == 3


@pytest.mark.parametrize("incremental", [False, True])
def test_alter_configs_of_a_read_only_broker_key(pylogq_cluster: pylogq.Cluster, incremental: bool) -> None:
    """Kafka refuses a key it cannot change while running with INVALID_REQUEST and names it,
    and stores nothing of that request; a key Kafka changes dynamically is taken, and removing
    a key that has no dynamic value is not an error."""
    broker_id = _ids(pylogq_cluster)[1]
    conn = _conn(pylogq_cluster, broker_id)

    def alter(configs: Dict[str, Any]) -> Dict[str, Any]:
        if incremental:
            entries = [{"name": k, "config_operation": AlterConfigOp.DELETE if v is None else AlterConfigOp.SET,
                        "value": v} for k, v in configs.items()]
            api = ApiKey.INCREMENTAL_ALTER_CONFIGS
        else:
            entries = [{"name": k, "value": v} for k, v in configs.items()]
            api = ApiKey.ALTER_CONFIGS
        body = {"resources": [{"resource_type": ConfigResourceType.BROKER, "resource_name": str(broker_id),
                               "configs": entries}], "validate_only": False}
        [result] = conn.request(api, body)["responses"]
        return dict(result)

    try:
        result = alter({"log.dirs": "/elsewhere"})
        assert (result["error_code"], _detail(result["error_message"])) == (
            errors.InvalidRequestError.code,
            "Invalid config value for resource ConfigResource(type=BROKER, name='%d'): Cannot update these configs "
            "dynamically: Set(log.dirs)" % broker_id)
        mixed = alter({"log.cleaner.threads": "2", "log.dirs": "/elsewhere"})
        assert mixed["error_code"] == errors.InvalidRequestError.code and "Set(log.dirs)" in mixed["error_message"]
        assert pylogq_cluster.broker(broker_id).broker_configs()["log.cleaner.threads"].source == "DEFAULT_CONFIG"
        assert alter({"log.cleaner.threads": "2"})["error_code"] == 0
        entry = pylogq_cluster.broker(broker_id).broker_configs()["log.cleaner.threads"]
        assert (entry.value, entry.source, entry.read_only) == ("2", "DYNAMIC_BROKER_CONFIG", False)
        if incremental:
            assert alter({"log.cleaner.threads": None})["error_code"] == 0
            assert alter({"log.cleaner.threads": None})["error_code"] == 0  # nothing left to remove
        else:
            assert alter({})["error_code"] == 0  # AlterConfigs replaces the whole dynamic set
        entry = pylogq_cluster.broker(broker_id).broker_configs()["log.cleaner.threads"]
        assert (entry.value, entry.source) == ("1", "DEFAULT_CONFIG")
    finally:
        conn.close()
    assert pylogq_cluster.broker(broker_id).broker_configs()["log.dirs"].value != "/elsewhere"
