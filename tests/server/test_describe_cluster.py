"""DescribeCluster (60) and DescribeLogDirs (35): every version raw, and through pylogq's,
kafka-python's and confluent-kafka's admin clients, against a broker served on a real socket."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Dict, Iterator, List, Tuple

import pytest
from confluent_kafka.admin import AdminClient as ConfluentAdminClient
from kafka import KafkaAdminClient

import pylogq
from pylogq.client.admin import AdminClient, NewTopic
from pylogq.client.connection import BrokerConnection
from pylogq.errors import MismatchedEndpointTypeError, UnsupportedEndpointTypeError
from pylogq.protocol import SUPPORTED_VERSIONS, ApiKey
from pylogq.protocol.messages import DESCRIBE_CLUSTER_REQUEST, DESCRIBE_LOG_DIRS_REQUEST

TOPIC = "described"
NOT_COMPUTED = -2147483648  # ClusterAuthorizedOperations' default: not asked for
# Asked for, a broker without an authorizer allows every cluster operation (AclOperation codes):
CLUSTER_OPERATIONS = {"CREATE": 5, "ALTER": 7, "DESCRIBE": 8, "CLUSTER_ACTION": 9, "DESCRIBE_CONFIGS": 10,
                      "ALTER_CONFIGS": 11, "IDEMPOTENT_WRITE": 12}


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Tuple[pylogq.Broker, str, int]]:
    """A broker with two log dirs and a two-partition topic holding records, served on loopback."""
    dirs = [tmp_path / "d0", tmp_path / "d1"]
    with pylogq.Broker(str(tmp_path), log_dirs=",".join(str(d) for d in dirs),
                       group_initial_rebalance_delay_ms=0) as broker:
        broker.create_topic(TOPIC, 2)
        producer = pylogq.Producer(broker=broker)
        for i in range(20):
            producer.send(TOPIC, value=b"value %d" % i, key=b"k%d" % i, partition=i % 2)
        producer.flush()
        producer.close()
        host, port = broker.serve()
        yield broker, host, port


def _on_disk(broker: pylogq.Broker) -> Dict[Tuple[str, int], Tuple[str, int]]:
    """(topic, partition) -> (log dir, bytes of its .log files), read from the directories."""
    out = {}
    for log_dir in broker.config.log_manager.log_dirs:
        for name in os.listdir(log_dir):
            path = os.path.join(log_dir, name)
            topic, _, index = name.rpartition("-")
            if os.path.isdir(path) and index.isdigit():
                size = sum(os.path.getsize(os.path.join(path, f)) for f in os.listdir(path) if f.endswith(".log"))
                out[(topic, int(index))] = (os.path.abspath(log_dir), size)
    return out


def _flatten(results: List[Dict[str, Any]]) -> Dict[Tuple[str, int], Tuple[str, int]]:
    return {(t["name"], p["partition_index"]): (r["log_dir"], p["partition_size"])
            for r in results for t in r["topics"] for p in t["partitions"]}


# -- every version, raw ------------------------------------------------------------------------------


def test_advertised_ranges_are_kafka_3_9s() -> None:
    assert SUPPORTED_VERSIONS[ApiKey.DESCRIBE_CLUSTER] == (0, 1)
    assert SUPPORTED_VERSIONS[ApiKey.DESCRIBE_LOG_DIRS] == (0, 4)
    assert (DESCRIBE_CLUSTER_REQUEST.min_version, DESCRIBE_CLUSTER_REQUEST.max_version) == (0, 1)
    assert (DESCRIBE_LOG_DIRS_REQUEST.min_version, DESCRIBE_LOG_DIRS_REQUEST.max_version) == (0, 4)


@pytest.mark.parametrize("version", [0, 1])
def test_describe_cluster_every_version(served: Tuple[pylogq.Broker, str, int], version: int) -> None:
    broker, host, port = served
    conn = BrokerConnection(host, port, "raw", 10.0, None, "raw")
    try:
        for include in (False, True):
            response = conn.request(ApiKey.DESCRIBE_CLUSTER, {"include_cluster_authorized_operations": include},
                                    version=version)
            assert response["error_code"] == 0 and response["error_message"] is None
            assert response["cluster_id"] == broker.cluster_id
            assert response["controller_id"] == broker.broker_id
            assert response["brokers"] == [{"broker_id": broker.broker_id, "host": host, "port": port, "rack": None}]
            operations = sum(1 << op for op in CLUSTER_OPERATIONS.values()) if include else NOT_COMPUTED
            assert response["cluster_authorized_operations"] == operations
            assert response["endpoint_type"] == 1
        if version >= 1:
            for endpoint_type, code in ((2, MismatchedEndpointTypeError.code), (0, UnsupportedEndpointTypeError.code),
                                        (7, UnsupportedEndpointTypeError.code)):
                response = conn.request(ApiKey.DESCRIBE_CLUSTER, {"endpoint_type": endpoint_type}, version=version)
                assert response["error_code"] == code
                assert "type %d" % endpoint_type in response["error_message"]
                assert response["brokers"] == []
    finally:
        conn.close()


@pytest.mark.parametrize("version", [0, 1, 2, 3, 4])
def test_describe_log_dirs_every_version(served: Tuple[pylogq.Broker, str, int], version: int) -> None:
    broker, host, port = served
    expected = _on_disk(broker)
    assert expected[(TOPIC, 0)][1] > 0 and expected[(TOPIC, 1)][1] > 0
    log_dirs = sorted(os.path.abspath(d) for d in broker.config.log_manager.log_dirs)
    conn = BrokerConnection(host, port, "raw", 10.0, None, "raw")
    try:
        everything = conn.request(ApiKey.DESCRIBE_LOG_DIRS, {"topics": None}, version=version)
        assert everything["error_code"] == 0
        assert sorted(r["log_dir"] for r in everything["results"]) == log_dirs
        assert _flatten(everything["results"]) == expected  # __consumer_offsets too
        for r in everything["results"]:
            assert r["error_code"] == 0
            for t in r["topics"]:
                for p in t["partitions"]:
                    assert p["offset_lag"] == 0 and p["is_future_key"] is False
            if version >= 4:
                volume = os.statvfs(r["log_dir"])
                assert r["total_bytes"] == volume.f_blocks * volume.f_frsize
                assert 0 < r["usable_bytes"] <= r["total_bytes"]
            else:  # not on the wire before v4: the schema's default
                assert r["total_bytes"] == -1 and r["usable_bytes"] == -1

        some = conn.request(ApiKey.DESCRIBE_LOG_DIRS, {"topics": [
            {"topic": TOPIC, "partitions": [1, 9]}, {"topic": "no-such-topic", "partitions": [0]}]}, version=version)
        assert sorted(r["log_dir"] for r in some["results"]) == log_dirs  # every dir, even without a match
        assert _flatten(some["results"]) == {(TOPIC, 1): expected[(TOPIC, 1)]}
        none = conn.request(ApiKey.DESCRIBE_LOG_DIRS, {"topics": []}, version=version)
        assert _flatten(none["results"]) == {}
    finally:
        conn.close()


# -- clients ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("transport", ["tcp", "in_process"])
def test_pylogq_admin_client(served: Tuple[pylogq.Broker, str, int], transport: str) -> None:
    broker, host, port = served
    if transport == "tcp":
        admin = AdminClient(bootstrap_servers="%s:%d" % (host, port))
    else:
        admin = AdminClient(broker=broker)
    expected = _on_disk(broker)
    try:
        assert admin.describe_cluster() == {
            "cluster_id": broker.cluster_id, "controller_id": broker.broker_id,
            "brokers": [{"broker_id": broker.broker_id, "host": host, "port": port, "rack": None}]}
        (described,) = admin.describe_log_dirs()
        assert described["broker"] == broker.broker_id
        assert _flatten(described["log_dirs"]) == expected
        assert all(d["total_bytes"] > 0 and d["usable_bytes"] > 0 for d in described["log_dirs"])
        (by_topic,) = admin.describe_log_dirs([TOPIC], brokers=[broker.broker_id])
        assert _flatten(by_topic["log_dirs"]) == {tp: v for tp, v in expected.items() if tp[0] == TOPIC}
        (by_partition,) = admin.describe_log_dirs({TOPIC: [0]})
        assert _flatten(by_partition["log_dirs"]) == {(TOPIC, 0): expected[(TOPIC, 0)]}
        with pytest.raises(pylogq.errors.BrokerNotAvailableError):
            admin.describe_log_dirs(brokers=[broker.broker_id + 1])
        admin.create_topics([NewTopic("grown", 1, 1)])
        (grown,) = admin.describe_log_dirs(["grown"])
        assert _flatten(grown["log_dirs"]) == {("grown", 0): (_on_disk(broker)[("grown", 0)][0], 0)}
    finally:
        admin.close()


def test_in_process_describe_cluster_without_a_listener(tmp_path: Path) -> None:
    with pylogq.Broker(str(tmp_path)) as broker:
        with AdminClient(broker=broker) as admin:
            assert admin.describe_cluster()["brokers"] == [
                {"broker_id": broker.broker_id, "host": "", "port": -1, "rack": None}]


def test_kafka_python_admin_client(served: Tuple[pylogq.Broker, str, int]) -> None:
    broker, host, port = served
    admin = KafkaAdminClient(bootstrap_servers="%s:%d" % (host, port), request_timeout_ms=10000)
    try:
        cluster = admin.describe_cluster()
        assert cluster["cluster_id"] == broker.cluster_id
        assert cluster["controller_id"] == broker.broker_id
        assert [(b["broker_id"], b["host"], b["port"], b["rack"]) for b in cluster["brokers"]] == [
            (broker.broker_id, host, port, None)]
        (described,) = admin.describe_log_dirs()
        assert described["broker"] == broker.broker_id
        assert _flatten(described["log_dirs"]) == _on_disk(broker)
        (one,) = admin.describe_log_dirs({TOPIC: [1]})
        assert _flatten(one["log_dirs"]) == {(TOPIC, 1): _on_disk(broker)[(TOPIC, 1)]}
    finally:
        admin.close()


def test_confluent_kafka_describe_cluster(served: Tuple[pylogq.Broker, str, int]) -> None:
    broker, host, port = served
    admin = ConfluentAdminClient({"bootstrap.servers": "%s:%d" % (host, port)})
    cluster = admin.describe_cluster(request_timeout=10).result(timeout=15)
    assert cluster.cluster_id == broker.cluster_id
    assert cluster.controller.id == broker.broker_id
    assert [(n.id, n.host, n.port, n.rack) for n in cluster.nodes] == [(broker.broker_id, host, port, None)]
    with_operations = admin.describe_cluster(include_authorized_operations=True, request_timeout=10).result(timeout=15)
    assert with_operations.cluster_id == broker.cluster_id
    # librdkafka asks Metadata v8-10 for them, not DescribeCluster: with no authorizer, every
    # operation Kafka defines on the cluster.
    assert {op.value for op in with_operations.authorized_operations} == {5, 7, 8, 9, 10, 11, 12}
