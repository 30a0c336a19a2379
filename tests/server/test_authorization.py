"""Authorization on the wire: every API the broker serves, refused and then allowed.

A broker with Kafka's ACL authorizer serves SASL/PLAIN users: ``admin`` (a super user)
and ``alice``, whose principal ``User:alice`` starts with no ACL. For each API and each
resource it touches, alice's request is refused with Kafka's error code and nothing
changes; with exactly the ACL Kafka's documentation names (added through CreateAcls by
admin), the same request gets past authorization; Metadata v12 asking by name and by id
at once answers each as asked. Then the clients: kafka-python's and
confluent-kafka's admin ACL calls round trip, a confluent-kafka producer and consumer are
refused as Kafka's clients are (TOPIC_AUTHORIZATION_FAILED, GROUP_AUTHORIZATION_FAILED),
and a single node's ACLs survive a restart.
"""

from __future__ import annotations

import base64
import time
import uuid
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List, NamedTuple, Optional, Sequence, Tuple

import pytest

from pylogq import Broker
from pylogq.client.admin import (
    ACL,
    ACLFilter,
    ACLOperation,
    ACLPermissionType,
    ACLResourcePatternType,
    AdminClient,
    ResourcePattern,
    ResourcePatternFilter,
    ResourceType,
)
from pylogq.client.connection import BrokerConnection
from pylogq.protocol.constants import ApiKey
from pylogq.records import build_batch

TOPIC_DENIED, GROUP_DENIED, CLUSTER_DENIED, TXN_DENIED = 29, 30, 31, 53
SECURITY_DISABLED = 54
UNKNOWN_TOPIC_ID = 100
AUTHORIZER = {"authorizer.class.name": "kafka.security.authorizer.AclAuthorizer", "super.users": "User:admin",
              "group.initial.rebalance.delay.ms": 0, "offsets.topic.num.partitions": 1,
              "transaction.state.log.num.partitions": 1}
USERS = {"admin": "admin-secret", "alice": "alice-secret"}
Address = Tuple[str, int]
# Operations and resource types as the wire codes CreateAcls takes.
OP = {name: op.value for name, op in ACLOperation.__members__.items()}
RT = {name: t.value for name, t in ResourceType.__members__.items()}


@pytest.fixture
def secured(tmp_path: Path) -> Iterator[Tuple[Broker, Address]]:
    broker = Broker(str(tmp_path / "broker"), **AUTHORIZER)
    try:
        address = broker.serve("127.0.0.1", 0, sasl_users=USERS)
        yield broker, address
    finally:
        broker.close()


def _connect(address: Address, user: str) -> BrokerConnection:
    return BrokerConnection(address[0], address[1], "authz-test", 10.0, ("PLAIN", user, USERS[user]))


def _codes(body: Any) -> List[int]:
    """Every error code in a response, nested ones included."""
    out: List[int] = []
    if isinstance(body, dict):
        for key, value in body.items():
            if key.endswith("error_code"):  # partition_error_code too
                out.append(value)
            else:
                out.extend(_codes(value))
    elif isinstance(body, list):
        for item in body:
            out.extend(_codes(item))
    return out


def _grant(admin: BrokerConnection, grants: Sequence[Tuple[str, str, str]], principal: str = "User:alice",
           pattern: int = 3) -> None:
    answer = admin.request(ApiKey.CREATE_ACLS, {"creations": [
        {"resource_type": RT[kind], "resource_name": name, "resource_pattern_type": pattern, "principal": principal,
         "host": "*", "operation": OP[op], "permission_type": 3} for kind, name, op in grants]})
    assert _codes(answer) == [0] * len(grants), answer


def _revoke_all(admin: BrokerConnection) -> None:
    answer = admin.request(ApiKey.DELETE_ACLS, {"filters": [
        {"resource_type_filter": 1, "resource_name_filter": None, "pattern_type_filter": 1,
         "principal_filter": "User:alice", "host_filter": None, "operation": 1, "permission_type": 1}]})
    assert _codes(answer)[0] == 0


def _records(value: bytes = b"v") -> bytes:
    return bytes(build_batch([value]))


class Case(NamedTuple):
    """One API's authorization: the request, the ACLs it needs, the code it is refused with,
    and what must not change when it is."""

    api_key: int
    version: int
    body: Callable[[], Dict[str, Any]]
    grants: List[Tuple[str, str, str]]
    refused: int
    state: Optional[Callable[[Broker], Any]] = None
    #: ACLs it has before the refused attempt (the other resources the request touches).
    given: Tuple[Tuple[str, str, str], ...] = ()


def _acl_filter() -> Dict[str, Any]:
    return {"resource_type_filter": 1, "resource_name_filter": None, "pattern_type_filter": 1,
            "principal_filter": None, "host_filter": None, "operation": 1, "permission_type": 1}


def _partitions(topic: str) -> List[Dict[str, Any]]:
    return [{"name": topic, "partitions": [{"partition_index": 0, "committed_offset": 1,
                                             "committed_leader_epoch": -1, "commit_timestamp": -1,
                                             "committed_metadata": ""}]}]


def _txn_offsets(group: str) -> Dict[str, Any]:
    return {"transactional_id": "tx", "group_id": group, "producer_id": 1000, "producer_epoch": 0,
            "generation_id": -1, "member_id": "", "group_instance_id": None, "topics": [
                {"name": "data", "partitions": [{"partition_index": 0, "committed_offset": 1,
                                                 "committed_leader_epoch": -1, "committed_metadata": ""}]}]}


def _end(broker: Broker, topic: str = "data") -> Tuple[int, int]:
    return broker.list_offsets(topic, 0, -1)[0], broker.list_offsets(topic, 0, -2)[0]


CASES: Dict[str, Case] = {
    "Produce": Case(ApiKey.PRODUCE, 9, lambda: {
        "transactional_id": None, "acks": 1, "timeout_ms": 5000,
        "topic_data": [{"name": "data", "partition_data": [{"index": 0, "records": _records()}]}]},
        [("TOPIC", "data", "WRITE")], TOPIC_DENIED, _end),
    "Fetch": Case(ApiKey.FETCH, 11, lambda: {
        "replica_id": -1, "max_wait_ms": 0, "min_bytes": 1, "max_bytes": 1 << 20, "isolation_level": 0,
        "session_id": 0, "session_epoch": -1, "rack_id": "", "forgotten_topics_data": [],
        "topics": [{"topic": "data", "partitions": [{"partition": 0, "current_leader_epoch": -1, "fetch_offset": 0,
                                                     "log_start_offset": -1, "partition_max_bytes": 1 << 20}]}]},
        [("TOPIC", "data", "READ")], TOPIC_DENIED),
    "ListOffsets": Case(ApiKey.LIST_OFFSETS, 5, lambda: {
        "replica_id": -1, "isolation_level": 0, "topics": [{"name": "data", "partitions": [
            {"partition_index": 0, "current_leader_epoch": -1, "timestamp": -1}]}]},
        [("TOPIC", "data", "DESCRIBE")], TOPIC_DENIED),
    "Metadata": Case(ApiKey.METADATA, 9, lambda: {
        "topics": [{"name": "data"}], "allow_auto_topic_creation": False,
        "include_cluster_authorized_operations": False, "include_topic_authorized_operations": False},
        [("TOPIC", "data", "DESCRIBE")], TOPIC_DENIED),
    "Metadata auto-creation": Case(ApiKey.METADATA, 9, lambda: {
        "topics": [{"name": "auto-made"}], "allow_auto_topic_creation": True,
        "include_cluster_authorized_operations": False, "include_topic_authorized_operations": False},
        [("TOPIC", "auto-made", "CREATE"), ("TOPIC", "auto-made", "DESCRIBE")], TOPIC_DENIED,
        lambda b: sorted(b.list_topics())),
    "OffsetCommit group": Case(ApiKey.OFFSET_COMMIT, 2, lambda: {
        "group_id": "g", "generation_id_or_member_epoch": -1, "member_id": "", "retention_time_ms": -1,
        "topics": _partitions("data")},
        [("GROUP", "g", "READ"), ("TOPIC", "data", "READ")], GROUP_DENIED,
        lambda b: b.group_coordinator.fetch_committed("g", None)),
    "OffsetCommit topic": Case(ApiKey.OFFSET_COMMIT, 2, lambda: {
        "group_id": "g2", "generation_id_or_member_epoch": -1, "member_id": "", "retention_time_ms": -1,
        "topics": _partitions("data")},
        [("TOPIC", "data", "READ")], TOPIC_DENIED, lambda b: b.group_coordinator.fetch_committed("g2", None),
        given=(("GROUP", "g2", "READ"),)),
    "TxnOffsetCommit transactional id": Case(ApiKey.TXN_OFFSET_COMMIT, 3, lambda: _txn_offsets("tg"),
        [("TRANSACTIONAL_ID", "tx", "WRITE"), ("GROUP", "tg", "READ"), ("TOPIC", "data", "READ")], TXN_DENIED,
        lambda b: b.group_coordinator.fetch_committed("tg", [("data", 0)], True)),
    "TxnOffsetCommit group": Case(ApiKey.TXN_OFFSET_COMMIT, 3, lambda: _txn_offsets("tg"),
        [("GROUP", "tg", "READ"), ("TOPIC", "data", "READ")], GROUP_DENIED,
        lambda b: b.group_coordinator.fetch_committed("tg", [("data", 0)], True),
        given=(("TRANSACTIONAL_ID", "tx", "WRITE"),)),
    "TxnOffsetCommit topic": Case(ApiKey.TXN_OFFSET_COMMIT, 3, lambda: _txn_offsets("tg"),
        [("TOPIC", "data", "READ")], TOPIC_DENIED,
        lambda b: b.group_coordinator.fetch_committed("tg", [("data", 0)], True),
        given=(("TRANSACTIONAL_ID", "tx", "WRITE"), ("GROUP", "tg", "READ"))),
    "OffsetFetch": Case(ApiKey.OFFSET_FETCH, 3, lambda: {
        "group_id": "g", "topics": [{"name": "data", "partition_indexes": [0]}]},
        [("GROUP", "g", "DESCRIBE"), ("TOPIC", "data", "DESCRIBE")], GROUP_DENIED),
    "OffsetFetch topic": Case(ApiKey.OFFSET_FETCH, 3, lambda: {
        "group_id": "g", "topics": [{"name": "data", "partition_indexes": [0]}]},
        [("TOPIC", "data", "DESCRIBE")], TOPIC_DENIED, given=(("GROUP", "g", "DESCRIBE"),)),
    "FindCoordinator": Case(ApiKey.FIND_COORDINATOR, 1, lambda: {"key": "g", "key_type": 0},
                            [("GROUP", "g", "DESCRIBE")], GROUP_DENIED),
    "JoinGroup": Case(ApiKey.JOIN_GROUP, 5, lambda: {
        "group_id": "g", "session_timeout_ms": 10000, "rebalance_timeout_ms": 10000, "member_id": "",
        "group_instance_id": None, "protocol_type": "consumer", "protocols": [{"name": "range", "metadata": b""}]},
        [("GROUP", "g", "READ")], GROUP_DENIED),
    "SyncGroup": Case(ApiKey.SYNC_GROUP, 3, lambda: {
        "group_id": "g", "generation_id": 1, "member_id": "m", "group_instance_id": None, "assignments": []},
        [("GROUP", "g", "READ")], GROUP_DENIED),
    "Heartbeat": Case(ApiKey.HEARTBEAT, 1, lambda: {"group_id": "g", "generation_id": 1, "member_id": "m"},
                      [("GROUP", "g", "READ")], GROUP_DENIED),
    "LeaveGroup": Case(ApiKey.LEAVE_GROUP, 1, lambda: {"group_id": "g", "member_id": "m"},
                       [("GROUP", "g", "READ")], GROUP_DENIED),
    "DescribeGroups": Case(ApiKey.DESCRIBE_GROUPS, 2, lambda: {"groups": ["g"]},
                           [("GROUP", "g", "DESCRIBE")], GROUP_DENIED),
    "DeleteGroups": Case(ApiKey.DELETE_GROUPS, 1, lambda: {"groups_names": ["committed"]},
                         [("GROUP", "committed", "DELETE")], GROUP_DENIED,
                         lambda b: b.group_coordinator.fetch_committed("committed", None)),
    "OffsetDelete": Case(ApiKey.OFFSET_DELETE, 0, lambda: {
        "group_id": "committed", "topics": [{"name": "data", "partitions": [{"partition_index": 0}]}]},
        [("GROUP", "committed", "DELETE"), ("TOPIC", "data", "READ")], GROUP_DENIED,
        lambda b: b.group_coordinator.fetch_committed("committed", None)),
    "CreateTopics": Case(ApiKey.CREATE_TOPICS, 3, lambda: {
        "topics": [{"name": "made", "num_partitions": 1, "replication_factor": 1, "assignments": [], "configs": []}],
        "timeout_ms": 5000, "validate_only": False},
        [("TOPIC", "made", "CREATE")], TOPIC_DENIED, lambda b: sorted(b.list_topics())),
    "CreateTopics by the cluster": Case(ApiKey.CREATE_TOPICS, 3, lambda: {
        "topics": [{"name": "made2", "num_partitions": 1, "replication_factor": 1, "assignments": [],
                    "configs": []}], "timeout_ms": 5000, "validate_only": False},
        [("CLUSTER", "kafka-cluster", "CREATE")], TOPIC_DENIED, lambda b: sorted(b.list_topics())),
    "DeleteTopics": Case(ApiKey.DELETE_TOPICS, 3, lambda: {"topic_names": ["doomed"], "timeout_ms": 5000},
                         [("TOPIC", "doomed", "DELETE")], TOPIC_DENIED, lambda b: sorted(b.list_topics())),
    "CreatePartitions": Case(ApiKey.CREATE_PARTITIONS, 1, lambda: {
        "topics": [{"name": "data", "count": 2, "assignments": None}], "timeout_ms": 5000, "validate_only": False},
        [("TOPIC", "data", "ALTER")], TOPIC_DENIED, lambda b: b.partitions_for("data")),
    "DescribeConfigs topic": Case(ApiKey.DESCRIBE_CONFIGS, 1, lambda: {
        "resources": [{"resource_type": 2, "resource_name": "data", "configuration_keys": None}],
        "include_synonyms": False}, [("TOPIC", "data", "DESCRIBE_CONFIGS")], TOPIC_DENIED),
    "DescribeConfigs broker": Case(ApiKey.DESCRIBE_CONFIGS, 1, lambda: {
        "resources": [{"resource_type": 4, "resource_name": "0", "configuration_keys": None}],
        "include_synonyms": False}, [("CLUSTER", "kafka-cluster", "DESCRIBE_CONFIGS")], CLUSTER_DENIED),
    "AlterConfigs": Case(ApiKey.ALTER_CONFIGS, 1, lambda: {
        "resources": [{"resource_type": 2, "resource_name": "data",
                       "configs": [{"name": "retention.ms", "value": "1234"}]}], "validate_only": False},
        [("TOPIC", "data", "ALTER_CONFIGS")], TOPIC_DENIED, lambda b: b.describe_configs("data")),
    "IncrementalAlterConfigs": Case(ApiKey.INCREMENTAL_ALTER_CONFIGS, 0, lambda: {
        "resources": [{"resource_type": 2, "resource_name": "data",
                       "configs": [{"name": "retention.ms", "config_operation": 0, "value": "4321"}]}],
        "validate_only": False}, [("TOPIC", "data", "ALTER_CONFIGS")], TOPIC_DENIED,
        lambda b: b.describe_configs("data")),
    "DeleteRecords": Case(ApiKey.DELETE_RECORDS, 1, lambda: {
        "topics": [{"name": "data", "partitions": [{"partition_index": 0, "offset": 1}]}], "timeout_ms": 5000},
        [("TOPIC", "data", "DELETE")], TOPIC_DENIED, _end),
    "InitProducerId": Case(ApiKey.INIT_PRODUCER_ID, 1, lambda: {
        "transactional_id": None, "transaction_timeout_ms": 60000},
        [("CLUSTER", "kafka-cluster", "IDEMPOTENT_WRITE")], CLUSTER_DENIED),
    "InitProducerId by a topic": Case(ApiKey.INIT_PRODUCER_ID, 1, lambda: {
        "transactional_id": None, "transaction_timeout_ms": 60000}, [("TOPIC", "data", "WRITE")], CLUSTER_DENIED),
    "InitProducerId transactional": Case(ApiKey.INIT_PRODUCER_ID, 1, lambda: {
        "transactional_id": "tx", "transaction_timeout_ms": 60000}, [("TRANSACTIONAL_ID", "tx", "WRITE")], TXN_DENIED),
    "AddPartitionsToTxn transactional id": Case(ApiKey.ADD_PARTITIONS_TO_TXN, 1, lambda: {
        "v3_and_below_transactional_id": "tx", "v3_and_below_producer_id": 1, "v3_and_below_producer_epoch": 0,
        "v3_and_below_topics": [{"name": "data", "partitions": [0]}]}, [("TRANSACTIONAL_ID", "tx", "WRITE")],
        TXN_DENIED, given=(("TOPIC", "data", "WRITE"),)),
    "AddPartitionsToTxn topic": Case(ApiKey.ADD_PARTITIONS_TO_TXN, 1, lambda: {
        "v3_and_below_transactional_id": "tx", "v3_and_below_producer_id": 1, "v3_and_below_producer_epoch": 0,
        "v3_and_below_topics": [{"name": "data", "partitions": [0]}]}, [("TOPIC", "data", "WRITE")],
        TOPIC_DENIED, given=(("TRANSACTIONAL_ID", "tx", "WRITE"),)),
    "AddOffsetsToTxn transactional id": Case(ApiKey.ADD_OFFSETS_TO_TXN, 1, lambda: {
        "transactional_id": "tx", "producer_id": 1, "producer_epoch": 0, "group_id": "g"},
        [("TRANSACTIONAL_ID", "tx", "WRITE")], TXN_DENIED, given=(("GROUP", "g", "READ"),)),
    "AddOffsetsToTxn group": Case(ApiKey.ADD_OFFSETS_TO_TXN, 1, lambda: {
        "transactional_id": "tx", "producer_id": 1, "producer_epoch": 0, "group_id": "g"},
        [("GROUP", "g", "READ")], GROUP_DENIED, given=(("TRANSACTIONAL_ID", "tx", "WRITE"),)),
    "EndTxn": Case(ApiKey.END_TXN, 1, lambda: {
        "transactional_id": "tx", "producer_id": 1, "producer_epoch": 0, "committed": True},
        [("TRANSACTIONAL_ID", "tx", "WRITE")], TXN_DENIED),
    "WriteTxnMarkers": Case(ApiKey.WRITE_TXN_MARKERS, 1, lambda: {"markers": [{
        "producer_id": 1, "producer_epoch": 0, "transaction_result": False, "coordinator_epoch": 0,
        "topics": [{"name": "data", "partition_indexes": [0]}]}]},
        [("CLUSTER", "kafka-cluster", "CLUSTER_ACTION")], CLUSTER_DENIED, _end),
    "DescribeTransactions": Case(ApiKey.DESCRIBE_TRANSACTIONS, 0, lambda: {"transactional_ids": ["tx"]},
                                 [("TRANSACTIONAL_ID", "tx", "DESCRIBE")], TXN_DENIED),
    "DescribeProducers": Case(ApiKey.DESCRIBE_PRODUCERS, 0, lambda: {
        "topics": [{"name": "data", "partition_indexes": [0]}]}, [("TOPIC", "data", "READ")], TOPIC_DENIED),
    "DescribeLogDirs": Case(ApiKey.DESCRIBE_LOG_DIRS, 3, lambda: {"topics": None},
                            [("CLUSTER", "kafka-cluster", "DESCRIBE")], CLUSTER_DENIED),
    "AlterReplicaLogDirs": Case(ApiKey.ALTER_REPLICA_LOG_DIRS, 1, lambda: {
        "dirs": [{"path": "/nowhere", "topics": [{"name": "data", "partitions": [0]}]}]},
        [("CLUSTER", "kafka-cluster", "ALTER")], CLUSTER_DENIED),
    "ElectLeaders": Case(ApiKey.ELECT_LEADERS, 1, lambda: {
        "election_type": 0, "timeout_ms": 5000, "topic_partitions": [{"topic": "data", "partitions": [0]}]},
        [("CLUSTER", "kafka-cluster", "ALTER")], CLUSTER_DENIED),
    "AlterPartitionReassignments": Case(ApiKey.ALTER_PARTITION_REASSIGNMENTS, 0, lambda: {
        "timeout_ms": 5000, "topics": [{"name": "data", "partitions": [{"partition_index": 0, "replicas": [0]}]}]},
        [("CLUSTER", "kafka-cluster", "ALTER")], CLUSTER_DENIED),
    "ListPartitionReassignments": Case(ApiKey.LIST_PARTITION_REASSIGNMENTS, 0, lambda: {
        "timeout_ms": 5000, "topics": None}, [("CLUSTER", "kafka-cluster", "DESCRIBE")], CLUSTER_DENIED),
    "DescribeUserScramCredentials": Case(ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, 0, lambda: {"users": None},
                                         [("CLUSTER", "kafka-cluster", "DESCRIBE")], CLUSTER_DENIED),
    "AlterUserScramCredentials": Case(ApiKey.ALTER_USER_SCRAM_CREDENTIALS, 0, lambda: {
        "deletions": [], "upsertions": [{"name": "carol", "mechanism": 1, "iterations": 4096, "salt": b"salt",
                                         "salted_password": b"\x01" * 32}]},
        [("CLUSTER", "kafka-cluster", "ALTER")], CLUSTER_DENIED, lambda b: b.describe_user_configs()),
    "DescribeClientQuotas": Case(ApiKey.DESCRIBE_CLIENT_QUOTAS, 1, lambda: {"components": [], "strict": False},
                                 [("CLUSTER", "kafka-cluster", "DESCRIBE_CONFIGS")], CLUSTER_DENIED),
    "AlterClientQuotas": Case(ApiKey.ALTER_CLIENT_QUOTAS, 1, lambda: {"entries": [
        {"entity": [{"entity_type": "client-id", "entity_name": "greedy"}],
         "ops": [{"key": "producer_byte_rate", "value": 1024.0, "remove": False}]}], "validate_only": False},
        [("CLUSTER", "kafka-cluster", "ALTER_CONFIGS")], CLUSTER_DENIED, lambda b: b.describe_client_quotas([])),
    "DescribeAcls": Case(ApiKey.DESCRIBE_ACLS, 1, _acl_filter, [("CLUSTER", "kafka-cluster", "DESCRIBE")],
                         CLUSTER_DENIED),
    "CreateAcls": Case(ApiKey.CREATE_ACLS, 1, lambda: {"creations": [
        {"resource_type": 2, "resource_name": "x", "resource_pattern_type": 3, "principal": "User:bob", "host": "*",
         "operation": 3, "permission_type": 3}]}, [("CLUSTER", "kafka-cluster", "ALTER")], CLUSTER_DENIED,
        lambda b: b.authorizer.acls(_any_filter())),
    "DeleteAcls": Case(ApiKey.DELETE_ACLS, 1, lambda: {"filters": [
        dict(_acl_filter(), principal_filter="User:bob")]}, [("CLUSTER", "kafka-cluster", "ALTER")], CLUSTER_DENIED,
        lambda b: b.authorizer.acls(_any_filter())),
    "LeaderAndIsr": Case(ApiKey.LEADER_AND_ISR, 4, lambda: {
        "controller_id": 1, "controller_epoch": 1, "broker_epoch": -1, "ungrouped_partition_states": [],
        "topic_states": [], "live_leaders": []}, [("CLUSTER", "kafka-cluster", "CLUSTER_ACTION")], CLUSTER_DENIED),
    "UpdateMetadata": Case(ApiKey.UPDATE_METADATA, 5, lambda: {
        "controller_id": 1, "controller_epoch": 1, "broker_epoch": -1, "topic_states": [], "live_brokers": []},
        [("CLUSTER", "kafka-cluster", "CLUSTER_ACTION")], CLUSTER_DENIED),
    "StopReplica": Case(ApiKey.STOP_REPLICA, 2, lambda: {
        "controller_id": 1, "controller_epoch": 1, "broker_epoch": -1, "delete_partitions": False,
        "topics": []}, [("CLUSTER", "kafka-cluster", "CLUSTER_ACTION")], CLUSTER_DENIED),
    "ControlledShutdown": Case(ApiKey.CONTROLLED_SHUTDOWN, 2, lambda: {"broker_id": 1, "broker_epoch": -1},
                               [("CLUSTER", "kafka-cluster", "CLUSTER_ACTION")], CLUSTER_DENIED),
    "OffsetForLeaderEpoch": Case(ApiKey.OFFSET_FOR_LEADER_EPOCH, 3, lambda: {
        "replica_id": -1, "topics": [{"topic": "data", "partitions": [
            {"partition": 0, "current_leader_epoch": -1, "leader_epoch": 0}]}]},
        [("TOPIC", "data", "DESCRIBE")], TOPIC_DENIED),
}


def _any_filter() -> Any:
    from pylogq.cluster.acl import AclBindingFilter

    return AclBindingFilter.any()


def test_every_api_with_a_check_is_in_the_matrix() -> None:
    """Each API the broker serves is either here or needs no authorization in Kafka either."""
    unchecked = {ApiKey.API_VERSIONS, ApiKey.SASL_HANDSHAKE, ApiKey.SASL_AUTHENTICATE, ApiKey.LIST_GROUPS,
                 ApiKey.DESCRIBE_CLUSTER, ApiKey.LIST_TRANSACTIONS}  # the last three: filtered and reported
    assert {case.api_key for case in CASES.values()} | unchecked == set(ApiKey)


@pytest.mark.parametrize("name", sorted(CASES))
def test_refused_without_the_acl_and_allowed_with_it(secured: Tuple[Broker, Address], name: str) -> None:
    broker, address = secured
    case = CASES[name]
    for topic in ("data", "doomed"):
        broker.create_topic(topic)
    broker.produce("data", 0, _records(b"seed"))
    admin = _connect(address, "admin")
    alice = _connect(address, "alice")
    try:
        # A group with committed offsets (for the deletions), and an ACL of bob's (for DeleteAcls).
        committed = admin.request(ApiKey.OFFSET_COMMIT, {
            "group_id": "committed", "generation_id_or_member_epoch": -1, "member_id": "", "retention_time_ms": -1,
            "topics": _partitions("data")}, version=2)
        assert _codes(committed) == [0]
        _grant(admin, [("TOPIC", "unrelated", "READ")], principal="User:bob")
        if case.given:
            _grant(admin, case.given)
        before = case.state(broker) if case.state is not None else None
        refused = alice.request(case.api_key, case.body(), version=case.version)
        assert case.refused in _codes(refused), refused
        if case.state is not None:
            assert case.state(broker) == before, "a refused %s changed the broker" % name
        _grant(admin, case.grants)
        allowed = alice.request(case.api_key, case.body(), version=case.version)
        assert case.refused not in _codes(allowed), allowed
        assert not {TOPIC_DENIED, GROUP_DENIED, CLUSTER_DENIED} & set(_codes(allowed)), allowed
    finally:
        admin.close()
        alice.close()


def test_without_one_of_two_acls_a_request_is_still_refused(secured: Tuple[Broker, Address]) -> None:
    """OffsetCommit needs READ on the group and on the topic: the group alone commits nothing."""
    broker, address = secured
    broker.create_topic("data")
    admin, alice = _connect(address, "admin"), _connect(address, "alice")
    try:
        _grant(admin, [("GROUP", "g", "READ")])
        answer = alice.request(ApiKey.OFFSET_COMMIT, CASES["OffsetCommit group"].body(), version=2)
        assert _codes(answer) == [TOPIC_DENIED]
        assert broker.group_coordinator.fetch_committed("g", None)[1] == {}
    finally:
        admin.close()
        alice.close()


def test_listing_hides_what_it_may_not_describe(secured: Tuple[Broker, Address]) -> None:
    """Metadata of every topic and ListGroups show only what the principal may DESCRIBE;
    DESCRIBE on the cluster lists every group."""
    broker, address = secured
    for topic in ("seen", "hidden"):
        broker.create_topic(topic)
    admin, alice = _connect(address, "admin"), _connect(address, "alice")
    try:
        for group in ("g-seen", "g-hidden"):
            admin.request(ApiKey.OFFSET_COMMIT, {"group_id": group, "generation_id_or_member_epoch": -1,
                                                 "member_id": "", "retention_time_ms": -1,
                                                 "topics": _partitions("seen")}, version=2)
        _grant(admin, [("TOPIC", "seen", "READ"), ("GROUP", "g-seen", "DESCRIBE")])
        metadata = alice.request(ApiKey.METADATA, {"topics": None, "allow_auto_topic_creation": False,
                                                   "include_cluster_authorized_operations": True,
                                                   "include_topic_authorized_operations": True}, version=9)
        assert [t["name"] for t in metadata["topics"]] == ["seen"]
        # READ implies DESCRIBE; the cluster operations are 0 without DESCRIBE on the cluster.
        assert metadata["topics"][0]["topic_authorized_operations"] == (1 << 3) | (1 << 8)
        assert metadata["cluster_authorized_operations"] == 0
        groups = alice.request(ApiKey.LIST_GROUPS, {}, version=1)
        assert [g["group_id"] for g in groups["groups"]] == ["g-seen"]
        _grant(admin, [("CLUSTER", "kafka-cluster", "DESCRIBE")])
        groups = alice.request(ApiKey.LIST_GROUPS, {}, version=1)
        assert sorted(g["group_id"] for g in groups["groups"]) == ["g-hidden", "g-seen"]
        cluster = alice.request(ApiKey.DESCRIBE_CLUSTER, {"include_cluster_authorized_operations": True}, version=0)
        assert cluster["cluster_authorized_operations"] == 1 << 8
        described = alice.request(ApiKey.DESCRIBE_GROUPS, {"groups": ["g-seen"],
                                                           "include_authorized_operations": True}, version=3)
        assert described["groups"][0]["authorized_operations"] == 1 << 8
    finally:
        admin.close()
        alice.close()


def test_metadata_by_name_and_by_id_in_one_request(secured: Tuple[Broker, Address]) -> None:
    """Metadata v12 asking for topics by name and by id together: one it may not describe
    answers TOPIC_AUTHORIZATION_FAILED with its name (asked by name) or its id alone (asked
    by id); granted, both describe it."""
    broker, address = secured
    for topic in ("data", "open"):
        broker.create_topic(topic)
    data_id, open_id = (_wire_id(broker.describe_topic(t).topic_id) for t in ("data", "open"))
    unknown, zero = uuid.uuid4(), uuid.UUID(int=0)
    body = {"topics": [{"name": "data", "topic_id": zero}, {"name": None, "topic_id": data_id},
                       {"name": None, "topic_id": open_id}, {"name": None, "topic_id": unknown}],
            "allow_auto_topic_creation": False, "include_topic_authorized_operations": False}
    admin, alice = _connect(address, "admin"), _connect(address, "alice")
    try:
        _grant(admin, [("TOPIC", "open", "DESCRIBE")])
        answer = alice.request(ApiKey.METADATA, body, version=12)
        assert [(t["name"], t["topic_id"], t["error_code"]) for t in answer["topics"]] == [
            ("data", zero, TOPIC_DENIED), (None, data_id, TOPIC_DENIED), ("open", open_id, 0),
            (None, unknown, UNKNOWN_TOPIC_ID)]
        _grant(admin, [("TOPIC", "data", "DESCRIBE")])
        answer = alice.request(ApiKey.METADATA, body, version=12)
        assert [(t["name"], t["topic_id"], t["error_code"]) for t in answer["topics"]] == [
            ("data", data_id, 0), ("data", data_id, 0), ("open", open_id, 0), (None, unknown, UNKNOWN_TOPIC_ID)]
    finally:
        admin.close()
        alice.close()


def test_a_refused_reassignment_answers_each_partition(secured: Tuple[Broker, Address]) -> None:
    """AlterPartitionReassignments without ALTER on the cluster: the top-level error and each
    partition's, as Kafka's getErrorResponse answers it."""
    alice = _connect(secured[1], "alice")
    try:
        answer = alice.request(ApiKey.ALTER_PARTITION_REASSIGNMENTS, {"timeout_ms": 5000, "topics": [
            {"name": "data", "partitions": [{"partition_index": 0, "replicas": [0]},
                                            {"partition_index": 1, "replicas": None}]},
            {"name": "other", "partitions": [{"partition_index": 3, "replicas": [0]}]}]}, version=0)
    finally:
        alice.close()
    assert answer["error_code"] == CLUSTER_DENIED and answer["error_message"]
    assert [(t["name"], [(p["partition_index"], p["error_code"], p["error_message"]) for p in t["partitions"]])
            for t in answer["responses"]] == [
        ("data", [(0, CLUSTER_DENIED, answer["error_message"]), (1, CLUSTER_DENIED, answer["error_message"])]),
        ("other", [(3, CLUSTER_DENIED, answer["error_message"])])]


def _wire_id(text: str) -> uuid.UUID:
    return uuid.UUID(bytes=base64.urlsafe_b64decode(text + "=="))


def test_acl_apis_without_an_authorizer_answer_security_disabled(tmp_path: Path) -> None:
    with Broker(str(tmp_path)) as broker:
        address = broker.serve("127.0.0.1", 0)
        conn = BrokerConnection(address[0], address[1], "authz-test", 10.0)
        try:
            assert conn.request(ApiKey.DESCRIBE_ACLS, _acl_filter())["error_code"] == SECURITY_DISABLED
            assert _codes(conn.request(ApiKey.CREATE_ACLS, CASES["CreateAcls"].body())) == [SECURITY_DISABLED]
            assert _codes(conn.request(ApiKey.DELETE_ACLS, CASES["DeleteAcls"].body())) == [SECURITY_DISABLED]
        finally:
            conn.close()


def test_bad_filters_answer_invalid_request(secured: Tuple[Broker, Address]) -> None:
    admin = _connect(secured[1], "admin")
    try:
        described = admin.request(ApiKey.DESCRIBE_ACLS, dict(_acl_filter(), operation=0))
        assert described["error_code"] == 42
        deleted = admin.request(ApiKey.DELETE_ACLS, {"filters": [dict(_acl_filter(), resource_type_filter=0)]})
        assert _codes(deleted) == [42]
        created = admin.request(ApiKey.CREATE_ACLS, {"creations": [
            {"resource_type": 4, "resource_name": "not-the-cluster", "resource_pattern_type": 3,
             "principal": "User:bob", "host": "*", "operation": 7, "permission_type": 3}]})
        assert _codes(created) == [42] and "kafka-cluster" in created["results"][0]["error_message"]
    finally:
        admin.close()


# -- the clients --------------------------------------------------------------------------------


def _kafka_python_admin(address: Address) -> Any:
    kafka_admin = pytest.importorskip("kafka.admin")
    return kafka_admin, kafka_admin.KafkaAdminClient(
        bootstrap_servers="%s:%d" % address, security_protocol="SASL_PLAINTEXT", sasl_mechanism="PLAIN",
        sasl_plain_username="admin", sasl_plain_password=USERS["admin"], request_timeout_ms=10000)


def test_kafka_python_admin_round_trip(secured: Tuple[Broker, Address]) -> None:
    broker, address = secured
    ka, client = _kafka_python_admin(address)
    try:
        acl = ka.ACL("User:alice", "*", ka.ACLOperation.READ, ka.ACLPermissionType.ALLOW,
                     ka.ResourcePattern(ka.ResourceType.TOPIC, "orders", ka.ACLResourcePatternType.PREFIXED))
        created = client.create_acls([acl])
        assert created["succeeded"] == [acl] and not created["failed"]
        any_filter = ka.ACLFilter(None, None, ka.ACLOperation.ANY, ka.ACLPermissionType.ANY,
                                  ka.ResourcePatternFilter(ka.ResourceType.ANY, None, ka.ACLResourcePatternType.ANY))
        described, _ = client.describe_acls(any_filter)
        assert described == [acl]
        assert broker.authorizer is not None and broker.authorizer.authorize(
            "User:alice", "127.0.0.1", ACLOperation.READ, ResourceType.TOPIC, "orders-2024")
        deleted = client.delete_acls([any_filter])
        assert deleted[0][1] == [acl]
        assert client.describe_acls(any_filter)[0] == []
    finally:
        client.close()


def test_confluent_admin_round_trip(secured: Tuple[Broker, Address]) -> None:
    ck = pytest.importorskip("confluent_kafka.admin")
    address = secured[1]
    client = ck.AdminClient({"bootstrap.servers": "%s:%d" % address, "security.protocol": "SASL_PLAINTEXT",
                             "sasl.mechanism": "PLAIN", "sasl.username": "admin",
                             "sasl.password": USERS["admin"]})
    binding = ck.AclBinding(ck.ResourceType.GROUP, "workers", ck.ResourcePatternType.LITERAL, "User:alice", "*",
                            ck.AclOperation.READ, ck.AclPermissionType.ALLOW)
    for future in client.create_acls([binding]).values():
        assert future.result(timeout=10) is None
    any_filter = ck.AclBindingFilter(ck.ResourceType.ANY, None, ck.ResourcePatternType.ANY, None, None,
                                     ck.AclOperation.ANY, ck.AclPermissionType.ANY)
    assert client.describe_acls(any_filter).result(timeout=10) == [binding]
    deleted = client.delete_acls([any_filter])
    assert list(deleted.values())[0].result(timeout=10) == [binding]
    assert client.describe_acls(any_filter).result(timeout=10) == []


def test_pylogq_admin_round_trip(secured: Tuple[Broker, Address]) -> None:
    broker, address = secured
    acl = ACL("User:alice", "*", ACLOperation.WRITE, ACLPermissionType.ALLOW,
              ResourcePattern(ResourceType.TOPIC, "t"))
    any_filter = ACLFilter(None, None, ACLOperation.ANY, ACLPermissionType.ANY,
                           ResourcePatternFilter(ResourceType.ANY, None, ACLResourcePatternType.ANY))
    with AdminClient(bootstrap_servers="%s:%d" % address, security_protocol="SASL_PLAINTEXT",
                     sasl_mechanism="PLAIN", sasl_plain_username="admin",
                     sasl_plain_password=USERS["admin"]) as client:
        assert client.create_acls([acl]) == {"succeeded": [acl], "failed": []}
        assert client.describe_acls(any_filter) == ([acl], None)
    with AdminClient(broker=broker) as embedded:  # in process: the broker's own authorizer
        assert embedded.describe_acls(any_filter) == ([acl], None)
        assert embedded.delete_acls([any_filter]) == [(any_filter, [acl], None)]


def test_confluent_producer_and_consumer_are_refused(secured: Tuple[Broker, Address]) -> None:
    ck = pytest.importorskip("confluent_kafka")
    broker, address = secured
    broker.create_topic("guarded")
    common = {"bootstrap.servers": "%s:%d" % address, "security.protocol": "SASL_PLAINTEXT",
              "sasl.mechanism": "PLAIN", "sasl.username": "alice", "sasl.password": USERS["alice"]}
    admin = _connect(address, "admin")
    try:
        _grant(admin, [("TOPIC", "guarded", "DESCRIBE")])  # it may see the topic, not write or read it
        producer = ck.Producer(dict(common, **{"enable.idempotence": False, "message.timeout.ms": 10000}))
        reports: List[Any] = []
        producer.produce("guarded", b"v", on_delivery=lambda error, message: reports.append(error))
        producer.flush(15)
        assert len(reports) == 1 and reports[0] is not None
        assert reports[0].code() == ck.KafkaError.TOPIC_AUTHORIZATION_FAILED
        assert broker.list_offsets("guarded", 0, -1)[0] == 0  # nothing was appended
        consumer = ck.Consumer(dict(common, **{"group.id": "guarded-readers", "auto.offset.reset": "earliest"}))
        try:
            consumer.subscribe(["guarded"])
            deadline = time.monotonic() + 15
            seen: Optional[int] = None
            while seen is None and time.monotonic() < deadline:
                message = consumer.poll(0.5)
                if message is not None and message.error() is not None:
                    seen = message.error().code()
            assert seen == ck.KafkaError.GROUP_AUTHORIZATION_FAILED
        finally:
            consumer.close()
    finally:
        admin.close()


def test_pylogq_transactional_producer_initializes_again_once_authorized(secured: Tuple[Broker, Address]) -> None:
    """InitProducerId refused TRANSACTIONAL_ID_AUTHORIZATION_FAILED leaves pylogq's producer
    uninitialized, as Kafka's (3.6 on): init_transactions() succeeds once the ACL is added. So
    does FindCoordinator refused it (which Kafka's client takes as fatal)."""
    from pylogq.client.producer import Producer
    from pylogq.errors import TransactionalIdAuthorizationFailedError

    broker, address = secured
    broker.create_topic("ledger")
    admin = _connect(address, "admin")
    producer = Producer(bootstrap_servers="%s:%d" % address, security_protocol="SASL_PLAINTEXT",
                        sasl_mechanism="PLAIN", sasl_plain_username="alice", sasl_plain_password=USERS["alice"],
                        transactional_id="ledger-writer", max_block_ms=10000)
    try:
        with pytest.raises(TransactionalIdAuthorizationFailedError, match="finding the coordinator"):
            producer.init_transactions()
        _grant(admin, [("TRANSACTIONAL_ID", "ledger-writer", "DESCRIBE")])  # enough to find it, not to use it
        with pytest.raises(TransactionalIdAuthorizationFailedError, match="InitProducerId"):
            producer.init_transactions()
        _grant(admin, [("TRANSACTIONAL_ID", "ledger-writer", "WRITE"), ("TOPIC", "ledger", "WRITE")])
        producer.init_transactions()
        producer.begin_transaction()
        written = producer.send("ledger", b"entry", partition=0)
        producer.commit_transaction()
        assert written.get(5).offset == 0
    finally:
        producer.close()
        admin.close()
    deadline = time.monotonic() + 10
    while [d.state for d in broker.describe_transactions(["ledger-writer"])] != ["CompleteCommit"]:
        assert time.monotonic() < deadline, broker.describe_transactions(["ledger-writer"])
        time.sleep(0.02)


def test_a_single_nodes_acls_survive_a_restart(tmp_path: Path) -> None:
    data = str(tmp_path / "broker")
    with Broker(data, **AUTHORIZER) as broker:
        address = broker.serve("127.0.0.1", 0, sasl_users=USERS)
        admin = _connect(address, "admin")
        try:
            _grant(admin, [("TOPIC", "kept", "READ")], pattern=4)
        finally:
            admin.close()
    with Broker(data, **AUTHORIZER) as broker:
        assert broker.authorizer is not None
        assert broker.authorizer.authorize("User:alice", "127.0.0.1", ACLOperation.READ, ResourceType.TOPIC, "kept-1")
        address = broker.serve("127.0.0.1", 0, sasl_users=USERS)
        admin = _connect(address, "admin")
        try:
            described = admin.request(ApiKey.DESCRIBE_ACLS, _acl_filter())
            assert [(r["resource_name"], r["pattern_type"]) for r in described["resources"]] == [("kept", 4)]
        finally:
            admin.close()
