"""pylogq.AdminClient against a real Broker: every operation, its errors, and what survives a restart."""

from __future__ import annotations

import kafka.admin as kadmin
import kafka.structs as kstructs
import pytest

import pylogq
from pylogq import errors
from pylogq.client import assignors
from pylogq.client.admin import (
    AdminClient,
    AlterConfigOp,
    ConfigResource,
    ConfigResourceType,
    GroupInformation,
    NewPartitions,
    NewTopic,
    OffsetAndMetadata,
    TopicPartition,
)
from pylogq.client.transport import connect
from pylogq.records import build_batch


@pytest.fixture
def data_dir(tmp_path):
    return str(tmp_path / "data")


@pytest.fixture
def broker(data_dir):
    with pylogq.Broker(data_dir, group_initial_rebalance_delay_ms=0) as b:
        yield b


@pytest.fixture
def admin(broker):
    with AdminClient(broker=broker) as a:
        yield a


def _configs(admin, topic, config_filter="modified"):
    described = admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, topic)], config_filter=config_filter)
    return {k: v["value"] for k, v in described["topic"][topic].items()}


# -- construction ---------------------------------------------------------------------------


def test_unknown_keyword_is_a_config_error_naming_it(broker):
    with pytest.raises(errors.ConfigError, match="'retries'"):
        AdminClient(broker=broker, retries=3)


def test_needs_exactly_one_of_broker_and_bootstrap_servers(broker):
    with pytest.raises(errors.ConfigError):
        AdminClient()
    with pytest.raises(errors.ConfigError):
        AdminClient(broker=broker, bootstrap_servers="localhost:9092")
    with pytest.raises(errors.ConfigError, match="bootstrap_servers"):
        AdminClient(bootstrap_servers="localhost")  # no port


@pytest.mark.parametrize("value", [-1, "30000", 1.5, True])
def test_bad_request_timeout_is_a_config_error(broker, value):
    with pytest.raises(errors.ConfigError, match="request_timeout_ms"):
        AdminClient(broker=broker, request_timeout_ms=value)


def test_config_and_close(broker):
    admin = AdminClient(broker=broker, client_id="ops", request_timeout_ms=5000)
    assert admin.config == {"client_id": "ops", "request_timeout_ms": 5000}
    admin.close()
    admin.close()
    with pytest.raises(errors.PylogqError, match="closed"):
        admin.list_topics()
    assert not broker.closed


def test_accepts_a_transport(broker):
    with AdminClient(broker=connect(broker=broker)) as admin:
        admin.create_topics(["via-transport"])
        assert admin.list_topics() == ["via-transport"]


# -- topics -----------------------------------------------------------------------------------


def test_create_and_describe_topics(admin):
    result = admin.create_topics([NewTopic("events", 3, 1), NewTopic("audit", num_partitions=1, replication_factor=1)])
    assert result == {"events": None, "audit": None}
    assert admin.list_topics() == ["audit", "events"]
    described = admin.describe_topics(["events"])
    assert described == [{
        "error_code": 0, "topic": "events", "is_internal": False,
        "partitions": [{"error_code": 0, "partition": p, "leader": 0, "replicas": [0], "isr": [0],
                        "offline_replicas": []} for p in range(3)],
    }]
    assert [t["topic"] for t in admin.describe_topics()] == ["audit", "events"]


def test_create_topics_other_input_forms(admin, broker):
    admin.create_topics(["plain"])
    admin.create_topics({"from-dict": {"num_partitions": 2, "configs": {"retention.ms": "1000"}}})
    admin.create_topics([kadmin.NewTopic("from-kafka-python", 4, 1, topic_configs={"cleanup.policy": "compact"})])
    assert broker.partitions_for("plain") == broker.config["num.partitions"]
    assert broker.partitions_for("from-dict") == 2
    assert broker.partitions_for("from-kafka-python") == 4
    assert _configs(admin, "from-dict") == {"retention.ms": "1000"}
    assert _configs(admin, "from-kafka-python") == {"cleanup.policy": "compact"}
    with pytest.raises(TypeError):
        admin.create_topics("single-name")
    with pytest.raises(ValueError):
        admin.create_topics([])


def test_describe_unknown_and_internal_topics(admin):
    # __consumer_offsets is created by the first group call (as Kafka's first coordinator lookup).
    before = admin.describe_topics(["__consumer_offsets"])[0]
    assert before["error_code"] == errors.UnknownTopicOrPartitionError.code
    assert admin.describe_consumer_groups(["nobody"])[0].state == "Dead"
    unknown, internal = admin.describe_topics(["missing", "__consumer_offsets"])
    assert unknown == {"error_code": errors.UnknownTopicOrPartitionError.code, "topic": "missing",
                       "is_internal": False, "partitions": []}
    assert internal["error_code"] == 0 and internal["is_internal"] is True
    assert len(internal["partitions"]) == 50
    assert "__consumer_offsets" not in admin.list_topics()


@pytest.mark.parametrize("new_topic, error, match", [
    (NewTopic("bad name!", 1, 1), errors.InvalidTopicError, "bad name!"),
    (NewTopic("__consumer_offsets", 1, 1), errors.InvalidTopicError, "internal"),
    (NewTopic("zero", 0, 1), errors.InvalidPartitionsError, "at least 1"),
    (NewTopic("replicated", 1, 3), errors.InvalidReplicationFactorError, "replication factor 3"),
    (NewTopic("typo", 1, 1, topic_configs={"retention.mss": 1}), errors.InvalidConfigError, "retention.mss"),
    (NewTopic("bad-value", 1, 1, topic_configs={"segment.bytes": "lots"}), errors.InvalidConfigError,
     "segment.bytes"),
    (NewTopic("bad-policy", 1, 1, topic_configs={"cleanup.policy": "compcat"}), errors.InvalidConfigError,
     "cleanup.policy"),
])
@pytest.mark.parametrize("validate_only", [False, True])
def test_create_topic_errors(admin, new_topic, error, match, validate_only):
    with pytest.raises(error, match=match):
        admin.create_topics([new_topic], validate_only=validate_only)
    assert admin.list_topics() == []


def test_create_existing_topic(admin):
    admin.create_topics([NewTopic("dup", 1, 1)])
    for validate_only in (False, True):
        with pytest.raises(errors.TopicAlreadyExistsError, match="'dup' already exists"):
            admin.create_topics([NewTopic("dup", 2, 1)], validate_only=validate_only)


@pytest.mark.parametrize("validate_only", [False, True])
def test_create_colliding_topic(admin, validate_only):
    admin.create_topics(["a.b"])
    with pytest.raises(errors.InvalidTopicError, match="collides with existing topic 'a.b'"):
        admin.create_topics(["a_b"], validate_only=validate_only)
    assert admin.list_topics() == ["a.b"]


def test_create_topics_attempts_every_topic_and_reports_each(admin):
    admin.create_topics(["exists"])
    result = admin.create_topics([NewTopic("ok", 1, 1), NewTopic("exists", 1, 1), NewTopic("bad", -5, 1),
                                  NewTopic("twice", 1, 1), NewTopic("twice", 1, 1)], raise_errors=False)
    assert result["ok"] is None
    assert isinstance(result["exists"], errors.TopicAlreadyExistsError)
    assert isinstance(result["bad"], errors.InvalidPartitionsError)
    assert isinstance(result["twice"], errors.InvalidRequestError)
    assert admin.list_topics() == ["exists", "ok"]
    with pytest.raises(errors.TopicAlreadyExistsError):
        admin.create_topics([NewTopic("exists", 1, 1), NewTopic("also-ok", 1, 1)])
    assert "also-ok" in admin.list_topics()


def test_validate_only_creates_nothing(admin):
    assert admin.create_topics([NewTopic("dry", 2, 1, topic_configs={"retention.ms": 10})],
                               validate_only=True) == {"dry": None}
    assert admin.list_topics() == []


def test_replica_assignments(admin, broker):
    admin.create_topics([NewTopic("assigned", replica_assignments={0: [0], 1: [0]})])
    assert broker.partitions_for("assigned") == 2
    # Kafka's checks and messages, from the broker (and from the client for validate_only).
    for validate_only in (False, True):
        with pytest.raises(errors.InvalidReplicationAssignmentError,
                           match=r"Unknown broker\(s\) in replica assignment: 7\.$"):
            admin.create_topics([NewTopic("elsewhere", replica_assignments={0: [7]})], validate_only=validate_only)
        with pytest.raises(errors.InvalidReplicationAssignmentError,
                           match="partitions should be a consecutive 0-based integer sequence$"):
            admin.create_topics([NewTopic("gap", replica_assignments={0: [0], 2: [0]})], validate_only=validate_only)
        with pytest.raises(errors.InvalidReplicationAssignmentError, match="Duplicate replica assignment found: "):
            admin.create_topics([NewTopic("twice", replica_assignments={0: [0, 0]})], validate_only=validate_only)
        with pytest.raises(errors.InvalidRequestError, match="Both numPartitions or replicationFactor and "
                                                             "replicasAssignments were set"):
            admin.create_topics([NewTopic("both", 1, 1, replica_assignments={0: [0]})], validate_only=validate_only)
    assert admin.list_topics() == ["assigned"]


def test_delete_topics(admin, broker):
    admin.create_topics(["a", "b"])
    broker.produce("a", 0, build_batch([b"x"]))
    assert admin.delete_topics(["a"]) == {"a": None}
    assert admin.list_topics() == ["b"]
    with pytest.raises(errors.UnknownTopicOrPartitionError, match="'a' does not exist"):
        admin.delete_topics(["a"])
    with pytest.raises(errors.InvalidTopicError, match="internal"):
        admin.delete_topics(["__consumer_offsets"])
    result = admin.delete_topics(["missing", "b"], raise_errors=False)
    assert isinstance(result["missing"], errors.UnknownTopicOrPartitionError) and result["b"] is None
    assert admin.list_topics() == []
    admin.create_topics([NewTopic("a", 1, 1)])
    assert broker.list_offsets("a", 0, -1) == (0, -1)


def test_create_partitions(admin, broker):
    admin.create_topics([NewTopic("grow", 1, 1), NewTopic("grow2", 1, 1), NewTopic("grow3", 1, 1)])
    assert admin.create_partitions({"grow": NewPartitions(3)}) == {"grow": None}
    assert len(admin.describe_topics(["grow"])[0]["partitions"]) == 3
    admin.create_partitions({"grow2": 2, "grow3": kadmin.NewPartitions(4)})
    assert (broker.partitions_for("grow2"), broker.partitions_for("grow3")) == (2, 4)
    admin.create_partitions({"grow2": {"count": 3, "assignments": [[0]]}})
    assert broker.partitions_for("grow2") == 3
    assert admin.create_partitions({"grow": 5}, validate_only=True) == {"grow": None}
    assert broker.partitions_for("grow") == 3


@pytest.mark.parametrize("spec, error, match", [
    ({"grow": NewPartitions(3)}, errors.InvalidPartitionsError, "must be larger"),
    ({"grow": NewPartitions(1)}, errors.InvalidPartitionsError, "has 3 partitions"),
    ({"missing": NewPartitions(2)}, errors.UnknownTopicOrPartitionError, "'missing' does not exist"),
    ({"grow": NewPartitions(5, [[0]])}, errors.InvalidReplicationAssignmentError,
     "Increasing the number of partitions by 2 but 1 assignments provided.$"),
    ({"grow": NewPartitions(4, [[9]])}, errors.InvalidReplicationAssignmentError,
     r"Unknown broker\(s\) in replica assignment: 9\.$"),
    ({"grow": NewPartitions(4, [[0, 0]])}, errors.InvalidReplicationAssignmentError,
     "Duplicate brokers not allowed in replica assignment: 0, 0 for partition id 3.$"),
    ({"grow": NewPartitions(4, [[]])}, errors.InvalidReplicationAssignmentError,
     "Cannot have replication factor of 0 for partition id 3.$"),
])
@pytest.mark.parametrize("validate_only", [False, True])
def test_create_partitions_errors(admin, broker, spec, error, match, validate_only):
    admin.create_topics([NewTopic("grow", 3, 1)])
    with pytest.raises(error, match=match):
        admin.create_partitions(spec, validate_only=validate_only)
    assert broker.partitions_for("grow") == 3


# -- configs ------------------------------------------------------------------------------------


def test_describe_configs_filters(admin):
    admin.create_topics([NewTopic("c", 1, 1, topic_configs={"retention.ms": 60000, "cleanup.policy": "compact"})])
    assert _configs(admin, "c") == {"cleanup.policy": "compact", "retention.ms": "60000"}
    everything = admin.describe_configs([ConfigResource("topic", "c")], config_filter="all")["topic"]["c"]
    assert everything["retention.ms"] == {"value": "60000", "read_only": False, "is_default": False,
                                          "config_source": "DYNAMIC_TOPIC_CONFIG", "is_sensitive": False}
    assert everything["segment.bytes"]["is_default"] is True
    assert everything["segment.bytes"]["value"] == "1073741824"
    assert everything["segment.bytes"]["config_source"] == "DEFAULT_CONFIG"
    defaults = _configs(admin, "c", "default")
    assert "segment.bytes" in defaults and "retention.ms" not in defaults
    narrowed = admin.describe_configs([ConfigResource("TOPIC", "c", ["segment.bytes", "retention.ms"])],
                                      config_filter="all")
    assert sorted(narrowed["topic"]["c"]) == ["retention.ms", "segment.bytes"]
    via_kafka_python = admin.describe_configs([kadmin.ConfigResource(kadmin.ConfigResourceType.TOPIC, "c")],
                                              config_filter=kadmin.ConfigFilterType.MODIFIED)
    assert sorted(via_kafka_python["topic"]["c"]) == ["cleanup.policy", "retention.ms"]


def test_describe_broker_configs(broker, admin):
    described = admin.describe_configs([ConfigResource(ConfigResourceType.BROKER, "0")], config_filter="all",
                                       include_synonyms=True)
    entries = described["broker"]["0"]
    assert entries["log.dirs"]["value"] == broker.config.to_strings()["log.dirs"]
    assert entries["group.initial.rebalance.delay.ms"]["value"] == "0"  # as the broker was opened
    # Kafka's answer per key: the keys it changes while running are not read-only.
    assert not entries["log.retention.ms"]["read_only"] and not entries["message.max.bytes"]["read_only"]
    assert entries["log.dirs"]["read_only"] and entries["broker.id"]["read_only"]
    # STATIC_BROKER_CONFIG for what the broker was given, DEFAULT_CONFIG for the rest (as Kafka labels them).
    given = {k for k, e in entries.items() if e["config_source"] == "STATIC_BROKER_CONFIG"}
    assert {"log.dirs", "group.initial.rebalance.delay.ms"} <= given
    assert all(e["config_source"] == "DEFAULT_CONFIG" and e["is_default"] for k, e in entries.items() if k not in given)
    assert entries["group.initial.rebalance.delay.ms"]["synonyms"] == [
        {"name": "group.initial.rebalance.delay.ms", "value": "0", "source": "STATIC_BROKER_CONFIG"},
        {"name": "group.initial.rebalance.delay.ms", "value": "3000", "source": "DEFAULT_CONFIG"}]
    assert entries["num.partitions"]["synonyms"] == [
        {"name": "num.partitions", "value": entries["num.partitions"]["value"], "source": "DEFAULT_CONFIG"}]
    only = admin.describe_configs([ConfigResource(ConfigResourceType.BROKER, "0", ["log.dirs"])])
    assert list(only["broker"]["0"]) == ["log.dirs"]


def test_describe_configs_errors(admin):
    with pytest.raises(errors.UnknownTopicOrPartitionError, match="'missing'"):
        admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, "missing")])
    with pytest.raises(errors.InvalidRequestError, match="unknown broker 7"):
        admin.describe_configs([ConfigResource(ConfigResourceType.BROKER, "7")])
    with pytest.raises(errors.InvalidRequestError, match="broker id, not 'zero'"):
        admin.describe_configs([ConfigResource(ConfigResourceType.BROKER, "zero")])
    with pytest.raises(errors.ConfigError, match="sometimes"):
        admin.describe_configs([ConfigResource("topic", "x")], config_filter="sometimes")
    with pytest.raises(errors.ConfigError, match="'table'"):
        ConfigResource("table", "x")


def test_alter_configs_replaces_every_override(admin, broker):
    admin.create_topics([NewTopic("c", 2, 1, topic_configs={"retention.ms": 60000})])
    assert admin.alter_configs([ConfigResource("topic", "c", {"segment.bytes": 1048576})]) == {"topic": {"c": None}}
    assert _configs(admin, "c") == {"segment.bytes": "1048576"}
    assert all(broker.partition("c", p).log.config.segment_bytes == 1048576 for p in range(2))
    admin.alter_configs([ConfigResource("topic", "c", {})])
    assert _configs(admin, "c") == {}


@pytest.mark.parametrize("configs, error, match", [
    ({"retention.mss": 5}, errors.InvalidConfigError, "retention.mss"),
    ({"retention.ms": "soon"}, errors.InvalidConfigError, "retention.ms"),
    ({"min.cleanable.dirty.ratio": 2.0}, errors.InvalidConfigError, "min.cleanable.dirty.ratio"),
    ({"retention.ms": (AlterConfigOp.DELETE, None)}, errors.InvalidRequestError, "incremental_alter_configs"),
    ({"retention.ms": None}, errors.InvalidRequestError, "null value"),
])
@pytest.mark.parametrize("validate_only", [False, True])
def test_alter_configs_errors_change_nothing(admin, configs, error, match, validate_only):
    admin.create_topics([NewTopic("c", 1, 1, topic_configs={"retention.ms": 60000})])
    with pytest.raises(error, match=match):
        admin.alter_configs([ConfigResource("topic", "c", configs)], validate_only=validate_only)
    assert _configs(admin, "c") == {"retention.ms": "60000"}


def test_alter_configs_unknown_topic_and_validate_only(admin):
    with pytest.raises(errors.UnknownTopicOrPartitionError):
        admin.alter_configs([ConfigResource("topic", "missing", {"retention.ms": 1})])
    with pytest.raises(errors.UnknownTopicOrPartitionError):
        admin.alter_configs([ConfigResource("topic", "missing", {"retention.ms": 1})], validate_only=True)
    admin.create_topics(["c"])
    assert admin.alter_configs([ConfigResource("topic", "c", {"retention.ms": 1})], validate_only=True) \
        == {"topic": {"c": None}}
    assert _configs(admin, "c") == {}
    result = admin.alter_configs([ConfigResource("topic", "c", {"retention.ms": 5}),
                                  ConfigResource("topic", "missing", {"retention.ms": 5})], raise_errors=False)
    assert result["topic"]["c"] is None
    assert isinstance(result["topic"]["missing"], errors.UnknownTopicOrPartitionError)
    assert _configs(admin, "c") == {"retention.ms": "5"}


def test_incremental_alter_configs(admin):
    admin.create_topics([NewTopic("c", 1, 1, topic_configs={"retention.ms": 60000})])
    admin.incremental_alter_configs([ConfigResource("topic", "c", {"segment.bytes": 1048576})])
    assert _configs(admin, "c") == {"retention.ms": "60000", "segment.bytes": "1048576"}
    admin.incremental_alter_configs([ConfigResource("topic", "c", {"retention.ms": (AlterConfigOp.DELETE, None),
                                                                   "cleanup.policy": ("APPEND", "compact")})])
    assert _configs(admin, "c") == {"segment.bytes": "1048576", "cleanup.policy": "delete,compact"}
    admin.alter_configs([ConfigResource("topic", "c", {"cleanup.policy": (kadmin.AlterConfigOp.SUBTRACT, "delete")})],
                        incremental=True)
    assert _configs(admin, "c") == {"segment.bytes": "1048576", "cleanup.policy": "compact"}
    admin.incremental_alter_configs([kadmin.ConfigResource("TOPIC", "c", {"segment.bytes": (1, None)})])
    assert _configs(admin, "c") == {"cleanup.policy": "compact"}


@pytest.mark.parametrize("configs, error, match", [
    ({"retention.mss": 5}, errors.InvalidConfigError, "retention.mss"),
    ({"segment.bytes": -1}, errors.InvalidConfigError, "segment.bytes"),
    ({"retention.ms": (AlterConfigOp.APPEND, "1")}, errors.InvalidConfigError, "list configs"),
    ({"cleanup.policy": (AlterConfigOp.APPEND, "forever")}, errors.InvalidConfigError, "cleanup.policy"),
])
@pytest.mark.parametrize("validate_only", [False, True])
def test_incremental_alter_configs_errors_change_nothing(admin, configs, error, match, validate_only):
    admin.create_topics([NewTopic("c", 1, 1, topic_configs={"retention.ms": 60000})])
    with pytest.raises(error, match=match):
        admin.incremental_alter_configs([ConfigResource("topic", "c", configs)], validate_only=validate_only)
    assert _configs(admin, "c") == {"retention.ms": "60000"}


def test_incremental_validate_only_changes_nothing(admin):
    admin.create_topics([NewTopic("c", 1, 1, topic_configs={"retention.ms": 60000})])
    admin.incremental_alter_configs([ConfigResource("topic", "c", {"retention.ms": (AlterConfigOp.DELETE, None),
                                                                   "segment.bytes": 1048576})], validate_only=True)
    assert _configs(admin, "c") == {"retention.ms": "60000"}
    with pytest.raises(errors.ConfigError, match="MULTIPLY"):
        admin.incremental_alter_configs([ConfigResource("topic", "c", {"retention.ms": ("MULTIPLY", 2)})])


def test_topics_and_configs_survive_a_restart(data_dir):
    with pylogq.Broker(data_dir, group_initial_rebalance_delay_ms=0) as broker:
        with AdminClient(broker=broker) as admin:
            admin.create_topics([NewTopic("kept", 2, 1, topic_configs={"cleanup.policy": "compact"}),
                                 NewTopic("dropped", 1, 1), NewTopic("altered", 1, 1)])
            admin.create_partitions({"kept": NewPartitions(4)})
            admin.incremental_alter_configs([ConfigResource("topic", "kept", {"retention.ms": 1234})])
            admin.alter_configs([ConfigResource("topic", "altered", {"max.message.bytes": 4096})])
            admin.delete_topics(["dropped"])
    with pylogq.Broker(data_dir, group_initial_rebalance_delay_ms=0) as broker:
        with AdminClient(broker=broker) as admin:
            assert admin.list_topics() == ["altered", "kept"]
            assert len(admin.describe_topics(["kept"])[0]["partitions"]) == 4
            assert _configs(admin, "kept") == {"cleanup.policy": "compact", "retention.ms": "1234"}
            assert _configs(admin, "altered") == {"max.message.bytes": "4096"}
            assert broker.partition("kept", 3).log.config.retention_ms == 1234


# -- consumer groups ----------------------------------------------------------------------------


def _commit(broker, group, offsets):
    codes = connect(broker=broker).commit_offsets(group, -1, "", offsets)
    assert set(codes.values()) == {0}


def test_groups_from_a_simple_commit(admin, broker):
    admin.create_topics([NewTopic("t", 2, 1)])
    _commit(broker, "g1", {("t", 0): (5, "meta"), ("t", 1): (7, None)})
    _commit(broker, "g2", {("t", 0): (1, "")})
    assert admin.list_consumer_groups() == [("g1", ""), ("g2", "")]
    [info] = admin.describe_consumer_groups(["g1"])
    assert info == GroupInformation(0, "g1", "Empty", "", "", [], None)
    assert admin.list_consumer_group_offsets("g1") == {
        TopicPartition("t", 0): OffsetAndMetadata(5, "meta", -1),
        TopicPartition("t", 1): OffsetAndMetadata(7, "", -1),
    }
    asked = admin.list_consumer_group_offsets("g1", partitions=[kstructs.TopicPartition("t", 1), ("t", 9)])
    assert asked == {("t", 1): (7, "", -1), ("t", 9): (-1, "", -1)}
    assert admin.list_consumer_group_offsets("nobody") == {}
    assert admin.delete_consumer_groups(["g1"]) == [("g1", None)]
    assert admin.list_consumer_groups() == [("g2", "")]
    assert admin.list_consumer_group_offsets("g1") == {}
    assert admin.describe_consumer_groups(["g1"])[0].state == "Dead"
    with pytest.raises(errors.GroupIdNotFoundError, match="'g1' does not exist"):
        admin.delete_consumer_groups(["g1"])


def test_group_offsets_and_deletion_survive_a_restart(data_dir):
    with pylogq.Broker(data_dir, group_initial_rebalance_delay_ms=0) as broker:
        _commit(broker, "kept", {("t", 0): (3, "m")})
        _commit(broker, "gone", {("t", 0): (4, "")})
        with AdminClient(broker=broker) as admin:
            admin.delete_consumer_groups(["gone"])
    with pylogq.Broker(data_dir, group_initial_rebalance_delay_ms=0) as broker:
        with AdminClient(broker=broker) as admin:
            assert admin.list_consumer_groups() == [("kept", "")]
            assert admin.list_consumer_group_offsets("kept") == {("t", 0): (3, "m", -1)}


def test_describe_and_delete_a_group_with_members(admin, broker):
    transport = connect(broker=broker)
    subscription = assignors.encode_subscription(["t"])
    joined = transport.join_group("live", "", "client-1", 10000, 10000, "consumer", [("range", subscription)],
                                  timeout_s=10)
    assert joined.error_code == 0
    assignment = assignors.encode_assignment({"t": [0, 1]})
    synced = transport.sync_group("live", joined.generation_id, joined.member_id, {joined.member_id: assignment},
                                  timeout_s=10)
    assert synced.error_code == 0
    assert admin.list_consumer_groups() == [("live", "consumer")]
    [info] = admin.describe_consumer_groups(["live"])
    assert (info.group, info.state, info.protocol_type, info.protocol) == ("live", "Stable", "consumer", "range")
    [member] = info.members
    assert (member.member_id, member.client_id) == (joined.member_id, "client-1")
    assert member.member_metadata == assignors.decode_subscription(subscription)
    assert member.member_metadata.topics == ["t"]
    assert member.member_assignment.partitions == {"t": [0, 1]}

    with pytest.raises(errors.NonEmptyGroupError, match="'live' still has members"):
        admin.delete_consumer_groups(["live"])
    result = admin.delete_consumer_groups(["live", "unknown"], raise_errors=False)
    assert isinstance(result[0][1], errors.NonEmptyGroupError)
    assert isinstance(result[1][1], errors.GroupIdNotFoundError)

    assert transport.leave_group("live", joined.member_id) == 0
    assert admin.describe_consumer_groups(["live"])[0].state == "Empty"
    assert admin.delete_consumer_groups(["live"]) == [("live", None)]
    assert admin.list_consumer_groups() == []


def test_alter_consumer_group_offsets(admin, broker):
    admin.create_topics([NewTopic("t", 2, 1)])
    assert admin.alter_consumer_group_offsets("moved", {TopicPartition("t", 0): OffsetAndMetadata(5, "m", -1),
                                                        ("t", 1): 7}) == {("t", 0): None, ("t", 1): None}
    assert admin.list_consumer_group_offsets("moved") == {("t", 0): (5, "m", -1), ("t", 1): (7, "", -1)}
    assert admin.alter_consumer_group_offsets("moved", {}) == {}
    with pytest.raises(errors.InvalidArgumentError, match="t-0 must be an int >= 0"):
        admin.alter_consumer_group_offsets("moved", {("t", 0): -1})
    transport = connect(broker=broker)
    joined = transport.join_group("live", "", "client-1", 10000, 10000, "consumer",
                                  [("range", assignors.encode_subscription(["t"]))], timeout_s=10)
    assert joined.error_code == 0
    assert transport.sync_group("live", joined.generation_id, joined.member_id,
                                {joined.member_id: assignors.encode_assignment({"t": [0]})}, timeout_s=10).error_code == 0
    # A group whose members consume keeps its own offsets.
    with pytest.raises(errors.UnknownMemberIdError, match="'live' for t-0"):
        admin.alter_consumer_group_offsets("live", {("t", 0): 1})
    [(tp, error)] = admin.alter_consumer_group_offsets("live", {("t", 0): 1}, raise_errors=False).items()
    assert tp == ("t", 0) and isinstance(error, errors.UnknownMemberIdError)
    assert admin.list_consumer_group_offsets("live") == {}


def test_non_consumer_group_metadata_stays_bytes(admin, broker):
    transport = connect(broker=broker)
    joined = transport.join_group("connect", "", "worker", 10000, 10000, "connect", [("default", b"\x01raw")],
                                  timeout_s=10)
    transport.sync_group("connect", joined.generation_id, joined.member_id, {joined.member_id: b"\x02raw"},
                         timeout_s=10)
    [member] = admin.describe_consumer_groups(["connect"])[0].members
    assert (member.member_metadata, member.member_assignment) == (b"\x01raw", b"\x02raw")
    transport.leave_group("connect", joined.member_id)


# -- records ---------------------------------------------------------------------------------------


def test_delete_records(admin, broker):
    admin.create_topics([NewTopic("r", 2, 1)])
    broker.produce("r", 0, build_batch([b"a", b"b", b"c", b"d"]))
    broker.produce("r", 1, build_batch([b"e", b"f"]))
    low = admin.delete_records({TopicPartition("r", 0): 2, kstructs.TopicPartition("r", 1): -1})
    assert low == {("r", 0): 2, ("r", 1): 2}
    assert all(isinstance(tp, TopicPartition) for tp in low)
    assert broker.list_offsets("r", 0, -2) == (2, -1)
    assert broker.list_offsets("r", 1, -2) == (2, -1)
    assert admin.delete_records({("r", 0): 1}) == {("r", 0): 2}


def test_delete_records_errors_delete_nothing(admin, broker):
    admin.create_topics([NewTopic("r", 1, 1)])
    broker.produce("r", 0, build_batch([b"a", b"b"]))
    with pytest.raises(errors.UnknownTopicOrPartitionError, match="r-5"):
        admin.delete_records({("r", 0): 1, ("r", 5): 1})
    with pytest.raises(errors.UnknownTopicOrPartitionError, match="missing-0"):
        admin.delete_records({("missing", 0): 1})
    with pytest.raises(errors.OffsetOutOfRangeError, match="-7"):
        admin.delete_records({("r", 0): -7})
    assert broker.list_offsets("r", 0, -2)[0] == 0
    with pytest.raises(errors.OffsetOutOfRangeError, match="high watermark 2"):
        admin.delete_records({("r", 0): 3})
    assert broker.list_offsets("r", 0, -2)[0] == 0
