"""Metadata, ListOffsets, DeleteTopics, DescribeConfigs, InitProducerId and the other topic and
config APIs over every version Kafka 3.9 serves, each sent raw at that version, with the
behaviour a version adds: topic ids (Metadata v10+/v12, DeleteTopics v6), authorized
operations (Metadata v8+), the record with the largest timestamp (ListOffsets v7+, -3), the
pre-0.10.1 offsets list (ListOffsets v0), leader epoch fencing (ListOffsets v4+), config types
and documentation (DescribeConfigs v3+)."""

from __future__ import annotations

import base64
import uuid
from pathlib import Path
from typing import Any, Dict, Iterator, List, Tuple

import pytest

import pylogq
from pylogq import errors
from pylogq.client.connection import BrokerConnection
from pylogq.protocol import SUPPORTED_VERSIONS, ApiKey
from pylogq.records import build_batch

NOT_COMPUTED = -2147483648
ZERO = uuid.UUID(int=0)
TS = 1_700_000_000_000


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Tuple[pylogq.Broker, BrokerConnection]]:
    config: Dict[str, Any] = {"log.segment.bytes": 1 << 20}
    with pylogq.Broker(str(tmp_path / "data"), **config) as broker:
        host, port = broker.serve()
        broker.create_topic("plain", 2)
        conn = BrokerConnection(host, port, "protocol-versions-test", 10.0)
        try:
            yield broker, conn
        finally:
            conn.close()


def _wire_id(text: str) -> uuid.UUID:
    return uuid.UUID(bytes=base64.urlsafe_b64decode(text + "=="))


def _produce(broker: pylogq.Broker, topic: str, timestamps: List[int], partition: int = 0,
             compression: str = "none") -> None:
    broker.produce(topic, partition, build_batch([b"v%d" % t for t in timestamps], timestamps=timestamps,
                                                 compression_type=compression))


# -- Metadata ---------------------------------------------------------------------------------


@pytest.mark.parametrize("version", range(13))
def test_metadata_each_version(served: Tuple[pylogq.Broker, BrokerConnection], version: int) -> None:
    broker, conn = served
    body: Dict[str, Any] = {"topics": [{"name": "plain"}], "allow_auto_topic_creation": False,
                            "include_topic_authorized_operations": False}
    answer = conn.request(ApiKey.METADATA, body, version=version)
    [topic] = answer["topics"]
    assert topic["name"] == "plain" and topic["error_code"] == 0
    assert [p["partition_index"] for p in topic["partitions"]] == [0, 1]
    assert all(p["leader_id"] == broker.broker_id for p in topic["partitions"])
    [node] = answer["brokers"]
    assert node["node_id"] == broker.broker_id and node["port"] == conn.port
    if version >= 1:
        assert answer["controller_id"] == broker.broker_id
    if version >= 2:
        assert answer["cluster_id"] == broker.cluster_id
    if version >= 7:
        assert all(p["leader_epoch"] == 0 for p in topic["partitions"])
    if version >= 8:
        assert topic["topic_authorized_operations"] == NOT_COMPUTED
    if version >= 10:
        assert topic["topic_id"] == _wire_id(broker.topic_id("plain"))


@pytest.mark.parametrize("version", range(8, 13))
def test_metadata_authorized_operations_when_asked(served: Tuple[pylogq.Broker, BrokerConnection],
                                                   version: int) -> None:
    """No authorizer: every operation Kafka defines on a topic (and, v8-10, the cluster) is allowed."""
    _, conn = served
    answer = conn.request(ApiKey.METADATA, {"topics": [{"name": "plain"}], "allow_auto_topic_creation": False,
                                            "include_cluster_authorized_operations": True,
                                            "include_topic_authorized_operations": True}, version=version)
    topic_ops = {3, 4, 5, 6, 7, 8, 10, 11}  # READ WRITE CREATE DELETE ALTER DESCRIBE DESCRIBE/ALTER_CONFIGS
    assert answer["topics"][0]["topic_authorized_operations"] == sum(1 << op for op in topic_ops)
    if version <= 10:
        assert answer["cluster_authorized_operations"] == sum(1 << op for op in (5, 7, 8, 9, 10, 11, 12))


def test_metadata_v0_empty_list_means_every_topic(served: Tuple[pylogq.Broker, BrokerConnection]) -> None:
    broker, conn = served
    broker.create_topic("other")
    names = {t["name"] for t in conn.request(ApiKey.METADATA, {"topics": []}, version=0)["topics"]}
    assert {"plain", "other"} <= names
    assert conn.request(ApiKey.METADATA, {"topics": [], "allow_auto_topic_creation": False},
                        version=1)["topics"] == []
    names = {t["name"] for t in conn.request(ApiKey.METADATA, {"topics": None}, version=1)["topics"]}
    assert {"plain", "other"} <= names


@pytest.mark.parametrize("version", range(4))
def test_metadata_before_v4_auto_creates(served: Tuple[pylogq.Broker, BrokerConnection], version: int) -> None:
    """v0-3 have no allow_auto_topic_creation: Kafka creates (auto.create.topics.enable)."""
    broker, conn = served
    name = "auto-v%d" % version
    conn.request(ApiKey.METADATA, {"topics": [{"name": name}]}, version=version)
    assert name in broker.list_topics()


def test_metadata_v12_by_topic_id(served: Tuple[pylogq.Broker, BrokerConnection]) -> None:
    broker, conn = served
    known = _wire_id(broker.topic_id("plain"))
    unknown = uuid.uuid4()
    answer = conn.request(ApiKey.METADATA, {"topics": [{"name": None, "topic_id": unknown},
                                                       {"name": None, "topic_id": known}],
                                            "allow_auto_topic_creation": True}, version=12)
    missing, found = answer["topics"]
    assert missing["name"] is None and missing["topic_id"] == unknown
    assert missing["error_code"] == errors.UnknownTopicIdError.code
    assert found["name"] == "plain" and found["topic_id"] == known and found["error_code"] == 0
    assert len(found["partitions"]) == 2
    assert len(broker.list_topics()) == 1  # an id names what exists: nothing is auto-created


@pytest.mark.parametrize("version", [10, 11])
def test_metadata_before_v12_refuses_topic_ids(served: Tuple[pylogq.Broker, BrokerConnection],
                                               version: int) -> None:
    broker, conn = served
    answer = conn.request(ApiKey.METADATA, {"topics": [{"name": None, "topic_id": _wire_id(broker.topic_id("plain"))}],
                                            "allow_auto_topic_creation": False}, version=version)
    assert answer["topics"][0]["error_code"] == errors.InvalidRequestError.code


# -- ListOffsets ------------------------------------------------------------------------------


def _list_offsets(conn: BrokerConnection, version: int, timestamp: int, partition: int = 0,
                  **extra: Any) -> Dict[str, Any]:
    body = {"replica_id": -1, "isolation_level": 0, "topics": [{"name": "plain", "partitions": [
        dict({"partition_index": partition, "timestamp": timestamp, "max_num_offsets": 1,
              "current_leader_epoch": -1}, **extra)]}]}
    [topic] = conn.request(ApiKey.LIST_OFFSETS, body, version=version)["topics"]
    [part] = topic["partitions"]
    return part


@pytest.mark.parametrize("version", range(11))
def test_list_offsets_latest_and_earliest_each_version(served: Tuple[pylogq.Broker, BrokerConnection],
                                                       version: int) -> None:
    broker, conn = served
    _produce(broker, "plain", [TS, TS + 1, TS + 2])
    broker.delete_records("plain", 0, 1)
    latest, earliest = _list_offsets(conn, version, -1), _list_offsets(conn, version, -2)
    assert latest["error_code"] == earliest["error_code"] == 0
    if version == 0:
        assert latest["old_style_offsets"] == [3] and earliest["old_style_offsets"] == [1]
    else:
        assert (latest["offset"], earliest["offset"]) == (3, 1)
    if version >= 4:
        assert latest["leader_epoch"] == 0


def test_list_offsets_v0_lists_segment_offsets_newest_first(served: Tuple[pylogq.Broker, BrokerConnection]) -> None:
    """Kafka 0.8's lookup: the base offset of each segment and the log end, up to max_num_offsets."""
    broker, conn = served
    broker.create_topic("rolled", 1, config={"segment.bytes": 200})
    for i in range(4):
        broker.produce("rolled", 0, build_batch([b"x" * 100], timestamps=TS + i))

    def offsets(timestamp: int, max_num_offsets: int) -> List[int]:
        body = {"replica_id": -1, "topics": [{"name": "rolled", "partitions": [
            {"partition_index": 0, "timestamp": timestamp, "max_num_offsets": max_num_offsets}]}]}
        [topic] = conn.request(ApiKey.LIST_OFFSETS, body, version=0)["topics"]
        return list(topic["partitions"][0]["old_style_offsets"])

    assert offsets(-1, 10) == [4, 3, 2, 1, 0]  # a segment per batch (each fills one), then the end
    assert offsets(-1, 2) == [4, 3]
    assert offsets(-2, 10) == [0]
    assert offsets(0, 10) == []  # no segment was last written that long ago


@pytest.mark.parametrize("compression", ["none", "gzip"])
def test_list_offsets_max_timestamp(served: Tuple[pylogq.Broker, BrokerConnection], compression: str) -> None:
    """-3 (v7+, KIP-734): the first record holding the largest timestamp."""
    broker, conn = served
    assert _list_offsets(conn, 7, -3)["offset"] == -1  # an empty partition has none
    _produce(broker, "plain", [TS + 5, TS + 9, TS + 3], compression=compression)
    _produce(broker, "plain", [TS + 9, TS + 1], compression=compression)
    for version in range(7, 11):
        part = _list_offsets(conn, version, -3)
        assert (part["error_code"], part["offset"], part["timestamp"], part["leader_epoch"]) == (0, 1, TS + 9, 0)


def test_list_offsets_earliest_local_and_latest_tiered(served: Tuple[pylogq.Broker, BrokerConnection]) -> None:
    broker, conn = served
    _produce(broker, "plain", [TS, TS, TS])
    broker.delete_records("plain", 0, 2)
    assert _list_offsets(conn, 8, -4)["offset"] == 2  # no tiered storage: the log start
    tiered = _list_offsets(conn, 9, -5)
    assert (tiered["error_code"], tiered["offset"], tiered["timestamp"]) == (0, -1, -1)


@pytest.mark.parametrize("epoch, code", [(-1, 0), (0, 0), (1, errors.UnknownLeaderEpochError.code)])
def test_list_offsets_fences_by_leader_epoch(served: Tuple[pylogq.Broker, BrokerConnection], epoch: int,
                                             code: int) -> None:
    _, conn = served
    for version in range(4, 11):
        assert _list_offsets(conn, version, -1, current_leader_epoch=epoch)["error_code"] == code


def test_list_offsets_refuses_a_partition_named_twice(served: Tuple[pylogq.Broker, BrokerConnection]) -> None:
    _, conn = served
    body = {"replica_id": -1, "isolation_level": 0, "topics": [{"name": "plain", "partitions": [
        {"partition_index": 0, "timestamp": -1}, {"partition_index": 0, "timestamp": -2},
        {"partition_index": 1, "timestamp": -1}]}]}
    [topic] = conn.request(ApiKey.LIST_OFFSETS, body, version=5)["topics"]
    assert [p["error_code"] for p in topic["partitions"]] == [errors.InvalidRequestError.code] * 2 + [0]


# -- DeleteTopics -----------------------------------------------------------------------------


@pytest.mark.parametrize("version", range(7))
def test_delete_topics_each_version(served: Tuple[pylogq.Broker, BrokerConnection], version: int) -> None:
    broker, conn = served
    broker.create_topic("doomed")
    topic_id = _wire_id(broker.topic_id("doomed"))
    if version >= 6:
        body: Dict[str, Any] = {"topics": [{"name": "doomed", "topic_id": ZERO}, {"name": "ghost", "topic_id": ZERO}],
                                "timeout_ms": 5000}
    else:
        body = {"topic_names": ["doomed", "ghost"], "timeout_ms": 5000}
    done, ghost = conn.request(ApiKey.DELETE_TOPICS, body, version=version)["responses"]
    assert (done["name"], done["error_code"]) == ("doomed", 0)
    assert (ghost["name"], ghost["error_code"]) == ("ghost", errors.UnknownTopicOrPartitionError.code)
    if version >= 5:
        assert done["error_message"] is None and ghost["error_message"]
    if version >= 6:
        assert done["topic_id"] == topic_id and ghost["topic_id"] == ZERO
    assert "doomed" not in broker.list_topics()


def test_delete_topics_v6_by_id(served: Tuple[pylogq.Broker, BrokerConnection]) -> None:
    broker, conn = served
    broker.create_topic("doomed")
    topic_id = _wire_id(broker.topic_id("doomed"))
    stranger = uuid.uuid4()
    body = {"topics": [{"name": None, "topic_id": topic_id}, {"name": None, "topic_id": stranger},
                       {"name": "plain", "topic_id": _wire_id(broker.topic_id("plain"))}], "timeout_ms": 5000}
    by_id, unknown, both = conn.request(ApiKey.DELETE_TOPICS, body, version=6)["responses"]
    assert (by_id["name"], by_id["topic_id"], by_id["error_code"]) == ("doomed", topic_id, 0)
    assert (unknown["name"], unknown["error_code"]) == (None, errors.UnknownTopicIdError.code)
    assert both["error_code"] == errors.InvalidRequestError.code  # name or id, not both
    assert broker.list_topics() == ["plain"]


# -- configs ----------------------------------------------------------------------------------


@pytest.mark.parametrize("version", range(5))
def test_describe_configs_each_version(served: Tuple[pylogq.Broker, BrokerConnection], version: int) -> None:
    broker, conn = served
    broker.alter_configs("plain", {"retention.ms": "1000"}, incremental=True)
    body = {"resources": [{"resource_type": 2, "resource_name": "plain",
                           "configuration_keys": ["retention.ms", "segment.bytes"]},
                          {"resource_type": 4, "resource_name": str(broker.broker_id),
                           "configuration_keys": ["log.segment.bytes"]}],
            "include_synonyms": True, "include_documentation": True}
    topic, node = conn.request(ApiKey.DESCRIBE_CONFIGS, body, version=version)["results"]
    configs = {c["name"]: c for c in topic["configs"]}
    assert configs["retention.ms"]["value"] == "1000" and configs["segment.bytes"]["value"] == str(1 << 20)
    if version == 0:
        assert not configs["retention.ms"]["is_default"] and configs["segment.bytes"]["is_default"]
    else:
        assert configs["retention.ms"]["config_source"] == 1  # DYNAMIC_TOPIC_CONFIG
        assert [s["source"] for s in configs["retention.ms"]["synonyms"]] == [1, 5]
    [segment_bytes] = node["configs"]
    assert segment_bytes["value"] == str(1 << 20)
    if version >= 3:  # each config's type and documentation (KIP-569)
        assert configs["retention.ms"]["config_type"] == 5  # LONG
        assert configs["segment.bytes"]["config_type"] == 3  # INT
        assert "segment" in configs["segment.bytes"]["documentation"]
        assert segment_bytes["config_type"] == 3
        described = broker.config.describe_key("log.segment.bytes")
        assert described is not None and segment_bytes["documentation"] == (described[1] or None)


def test_describe_configs_v3_documentation_only_when_asked(served: Tuple[pylogq.Broker, BrokerConnection]) -> None:
    _, conn = served
    body = {"resources": [{"resource_type": 2, "resource_name": "plain", "configuration_keys": ["segment.bytes"]}],
            "include_synonyms": False, "include_documentation": False}
    [topic] = conn.request(ApiKey.DESCRIBE_CONFIGS, body, version=4)["results"]
    assert topic["configs"][0]["documentation"] is None and topic["configs"][0]["config_type"] == 3


@pytest.mark.parametrize("version", range(3))
def test_alter_configs_each_version(served: Tuple[pylogq.Broker, BrokerConnection], version: int) -> None:
    broker, conn = served
    body = {"resources": [{"resource_type": 2, "resource_name": "plain",
                           "configs": [{"name": "retention.ms", "value": str(1000 + version)}]}],
            "validate_only": False}
    [result] = conn.request(ApiKey.ALTER_CONFIGS, body, version=version)["responses"]
    assert result["error_code"] == 0
    assert broker.describe_configs("plain")["retention.ms"][0] == str(1000 + version)


@pytest.mark.parametrize("version", range(2))
def test_incremental_alter_configs_each_version(served: Tuple[pylogq.Broker, BrokerConnection],
                                                version: int) -> None:
    broker, conn = served
    body = {"resources": [{"resource_type": 2, "resource_name": "plain",
                           "configs": [{"name": "retention.ms", "config_operation": 0, "value": "2000"}]}],
            "validate_only": False}
    [result] = conn.request(ApiKey.INCREMENTAL_ALTER_CONFIGS, body, version=version)["responses"]
    assert result["error_code"] == 0
    assert broker.describe_configs("plain")["retention.ms"][0] == "2000"


# -- partitions, records, producer ids --------------------------------------------------------


@pytest.mark.parametrize("version", range(4))
def test_create_partitions_each_version(served: Tuple[pylogq.Broker, BrokerConnection], version: int) -> None:
    broker, conn = served
    body = {"topics": [{"name": "plain", "count": 3, "assignments": None},
                       {"name": "plain-b", "count": 5, "assignments": [{"broker_ids": [broker.broker_id + 1]}]}],
            "timeout_ms": 5000, "validate_only": False}
    broker.create_topic("plain-b", 4)
    grown, elsewhere = conn.request(ApiKey.CREATE_PARTITIONS, body, version=version)["results"]
    assert grown["error_code"] == 0 and broker.partitions_for("plain") == 3
    assert elsewhere["error_code"] == errors.InvalidReplicationAssignmentError.code
    assert broker.partitions_for("plain-b") == 4


@pytest.mark.parametrize("version", range(3))
def test_delete_records_each_version(served: Tuple[pylogq.Broker, BrokerConnection], version: int) -> None:
    broker, conn = served
    _produce(broker, "plain", [TS] * 5)
    body = {"topics": [{"name": "plain", "partitions": [{"partition_index": 0, "offset": 3}]}], "timeout_ms": 5000}
    [topic] = conn.request(ApiKey.DELETE_RECORDS, body, version=version)["topics"]
    assert topic["partitions"][0]["error_code"] == 0 and topic["partitions"][0]["low_watermark"] == 3


@pytest.mark.parametrize("version", range(6))
def test_init_producer_id_each_version(served: Tuple[pylogq.Broker, BrokerConnection], version: int) -> None:
    _, conn = served
    body = {"transactional_id": None, "transaction_timeout_ms": 60000, "producer_id": -1, "producer_epoch": -1}
    first = conn.request(ApiKey.INIT_PRODUCER_ID, body, version=version)
    second = conn.request(ApiKey.INIT_PRODUCER_ID, body, version=version)
    assert first["error_code"] == second["error_code"] == 0
    assert first["producer_id"] != second["producer_id"] and first["producer_epoch"] == 0
    if version >= 3:  # KIP-360: an idempotent producer asking again by its id gets a new one
        again = conn.request(ApiKey.INIT_PRODUCER_ID, dict(body, producer_id=first["producer_id"],
                                                           producer_epoch=0), version=version)
        assert again["error_code"] == 0 and again["producer_id"] not in (first["producer_id"], -1)
        half = conn.request(ApiKey.INIT_PRODUCER_ID, dict(body, producer_id=first["producer_id"]), version=version)
        assert half["error_code"] == errors.InvalidRequestError.code


def test_every_api_serves_kafkas_range() -> None:
    assert SUPPORTED_VERSIONS[ApiKey.METADATA] == (0, 12)
    assert SUPPORTED_VERSIONS[ApiKey.LIST_OFFSETS] == (0, 10)
    assert SUPPORTED_VERSIONS[ApiKey.DELETE_TOPICS] == (0, 6)
    assert SUPPORTED_VERSIONS[ApiKey.DESCRIBE_CONFIGS] == (0, 4)
