"""CreateTopics over every version Kafka 3.9 serves (0-7): the broker's defaults for -1
(KIP-464, v4+ on the client side), what was created in the answer (v5+, KIP-525) and the
topic id (v7)."""

from __future__ import annotations

import base64
import uuid
from pathlib import Path
from typing import Any, Iterator, Tuple

import pytest
from confluent_kafka.admin import AdminClient as ConfluentAdminClient, NewTopic as ConfluentNewTopic

import pylogq
from pylogq.client.connection import BrokerConnection
from pylogq.protocol import ApiKey, ConfigSource

DEFAULT_PARTITIONS = 3


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Tuple[pylogq.Broker, str, int]]:
    with pylogq.Broker(str(tmp_path / "data"), num_partitions=DEFAULT_PARTITIONS) as broker:
        host, port = broker.serve()
        yield broker, host, port


def _create(conn: BrokerConnection, version: int, name: str, validate_only: bool = False,
            **topic: Any) -> Any:
    spec = {"name": name, "num_partitions": -1, "replication_factor": -1, "assignments": [], "configs": []}
    spec.update(topic)
    response = conn.request(ApiKey.CREATE_TOPICS, {"topics": [spec], "timeout_ms": 10000,
                                                   "validate_only": validate_only}, version=version)
    [result] = response["topics"]
    return result


@pytest.mark.parametrize("version", range(8))
def test_every_version_creates_with_the_broker_defaults(served: Tuple[pylogq.Broker, str, int],
                                                        version: int) -> None:
    broker, host, port = served
    conn = BrokerConnection(host, port, "create-topics-test", 10.0)
    try:
        name = "t-v%d" % version
        if version >= 1:  # validateOnly (v1+) answers what would be created, and creates nothing
            checked = _create(conn, version, name, validate_only=True,
                              configs=[{"name": "retention.ms", "value": "3600000"}])
            assert checked["error_code"] == 0 and name not in broker.list_topics()
            if version >= 5:
                assert checked["num_partitions"] == DEFAULT_PARTITIONS and checked["replication_factor"] == 1
                assert checked["topic_id"] == uuid.UUID(int=0)
        result = _create(conn, version, name, configs=[{"name": "retention.ms", "value": "3600000"}])
        assert result["error_code"] == 0, result
        assert broker.partitions_for(name) == DEFAULT_PARTITIONS
        assert broker.describe_configs(name)["retention.ms"] == ("3600000", False)
        if version >= 5:
            assert result["num_partitions"] == DEFAULT_PARTITIONS and result["replication_factor"] == 1
            configs = {c["name"]: c for c in result["configs"]}
            assert set(configs) == set(broker.describe_configs(name))
            assert configs["retention.ms"]["value"] == "3600000"
            assert configs["retention.ms"]["config_source"] == ConfigSource.DYNAMIC_TOPIC_CONFIG
            assert configs["cleanup.policy"]["config_source"] == ConfigSource.DEFAULT_CONFIG
            assert not any(c["read_only"] or c["is_sensitive"] for c in configs.values())
        if version >= 7:
            expected = uuid.UUID(bytes=base64.urlsafe_b64decode(broker.topic_id(name) + "=="))
            assert result["topic_id"] == expected
        again = _create(conn, version, name)
        assert again["error_code"] == 36  # TOPIC_ALREADY_EXISTS
    finally:
        conn.close()


def test_confluent_kafka_creates_with_the_broker_defaults(served: Tuple[pylogq.Broker, str, int]) -> None:
    """librdkafka sends -1 only to a broker that advertises CreateTopics v4+ (KIP-464)."""
    broker, host, port = served
    admin = ConfluentAdminClient({"bootstrap.servers": "%s:%d" % (host, port)})
    futures = admin.create_topics([ConfluentNewTopic("defaults", num_partitions=-1, replication_factor=-1)],
                                  request_timeout=10)
    futures["defaults"].result(timeout=15)
    assert broker.partitions_for("defaults") == DEFAULT_PARTITIONS
    assert [p.replicas for p in broker.describe_topic("defaults").partitions] == [[broker.broker_id]] * 3
