"""Dynamic broker configs across a three-broker cluster: kept in the metadata store in Kafka's
format (``/config/brokers/<id>``, ``/config/brokers/<default>``) with a change notification
every broker reads; the cluster-wide default reaches every broker, a broker's own value
overrides it on that broker only; a log default lowered there refuses what it accepted on
topics that do not override it; the values outlive a broker's restart."""

from __future__ import annotations

import json
import time
import uuid
from typing import Any, Dict, List, Optional, Tuple

import pytest
from confluent_kafka import KafkaError, Producer as ConfluentProducer
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic

import pylogq
from pylogq import errors
from pylogq.client.connection import BrokerConnection
from pylogq.protocol import AlterConfigOp, ApiKey, ConfigResourceType

from .test_cluster_admin import TIMEOUT_S, _eventually, _ids

BIG = 20000


def _alter(cluster: pylogq.Cluster, via: int, name: str, configs: Dict[str, Any]) -> Tuple[int, Optional[str]]:
    """IncrementalAlterConfigs of one BROKER resource sent to broker ``via``; values are (op, value) or a SET."""
    host, port = cluster.broker(via).listener_addresses[0]
    conn = BrokerConnection(host, port, "dynamic-configs-test", 10.0)
    try:
        entries = []
        for key, change in configs.items():
            op, value = change if isinstance(change, tuple) else (AlterConfigOp.SET, change)
            entries.append({"name": key, "config_operation": op, "value": value})
        body = {"resources": [{"resource_type": ConfigResourceType.BROKER, "resource_name": name,
                               "configs": entries}], "validate_only": False}
        [result] = conn.request(ApiKey.INCREMENTAL_ALTER_CONFIGS, body)["responses"]
        message = result["error_message"]
        if message is not None and message.startswith("[Error "):  # pylogq's "[Error N] NAME: " before Kafka's text
            message = message.split(": ", 1)[1]
        return result["error_code"], message
    finally:
        conn.close()


def _source(cluster: pylogq.Cluster, broker_id: int, key: str) -> Tuple[Optional[str], str]:
    entry = cluster.broker(broker_id).broker_configs()[key]
    return entry.value, entry.source


def _produce(bootstrap: str, topic: str, size: int) -> Optional[KafkaError]:
    producer = ConfluentProducer({"bootstrap.servers": bootstrap, "message.max.bytes": 1000000,
                                  "retries": 0, "linger.ms": 0, "acks": "all"})
    outcome: List[Optional[KafkaError]] = []
    producer.produce(topic, b"x" * size, on_delivery=lambda err, msg: outcome.append(err))
    assert producer.flush(TIMEOUT_S) == 0
    return outcome[0]


def _stored(cluster: pylogq.Cluster, entity: str) -> Any:
    data, _ = cluster.brokers[0].cluster.zk.store.get("/config/brokers/%s" % entity)  # type: ignore[union-attr]
    return json.loads(data.decode())


def test_librdkafka_0081_scenario_answers_no_error(pylogq_cluster: pylogq.Cluster) -> None:
    broker = str(_ids(pylogq_cluster)[1])
    admin = AdminClient({"bootstrap.servers": pylogq_cluster.bootstrap_servers})
    resource = ConfigResource("broker", broker, set_config={"sasl.kerberos.min.time.before.relogin": "58000",
                                                            "background.threads": "9"})
    with pytest.warns(DeprecationWarning):
        futures = admin.alter_configs([resource])
    assert [f.result(TIMEOUT_S) for f in futures.values()] == [None]
    for entries in ([ConfigEntry("background.threads", "9", incremental_operation=AlterConfigOpType.SET),
                     ConfigEntry("log.cleanup.policy", "compact", incremental_operation=AlterConfigOpType.APPEND)],
                    [ConfigEntry("background.threads", None, incremental_operation=AlterConfigOpType.DELETE),
                     ConfigEntry("log.cleanup.policy", "compact", incremental_operation=AlterConfigOpType.SUBTRACT)]):
        futures = admin.incremental_alter_configs([ConfigResource("broker", broker, incremental_configs=entries)])
        assert [f.result(TIMEOUT_S) for f in futures.values()] == [None]
    assert _stored(pylogq_cluster, broker) == {"version": 1, "config": {
        "log.cleanup.policy": "delete", "sasl.kerberos.min.time.before.relogin": "58000"}}


def test_the_default_reaches_every_broker_and_a_broker_value_overrides_it_there_only(
        pylogq_cluster: pylogq.Cluster) -> None:
    a, b, c = _ids(pylogq_cluster)
    assert _alter(pylogq_cluster, a, "", {"log.retention.ms": "1000"}) == (0, None)
    assert _stored(pylogq_cluster, "<default>") == {"version": 1, "config": {"log.retention.ms": "1000"}}
    for broker in (a, b, c):
        _eventually(lambda: _source(pylogq_cluster, broker, "log.retention.ms")
                    == ("1000", "DYNAMIC_DEFAULT_BROKER_CONFIG"), "broker %d to take the default" % broker)
        assert pylogq_cluster.broker(broker).default_log_config.retention_ms == 1000
    assert _alter(pylogq_cluster, b, str(b), {"log.retention.ms": "2000"}) == (0, None)
    assert _source(pylogq_cluster, b, "log.retention.ms") == ("2000", "DYNAMIC_BROKER_CONFIG")
    assert pylogq_cluster.broker(b).default_log_config.retention_ms == 2000
    for broker in (a, c):
        assert _source(pylogq_cluster, broker, "log.retention.ms") == ("1000", "DYNAMIC_DEFAULT_BROKER_CONFIG")
    # Another broker's id is answered with Kafka's error by the broker asked.
    code, message = _alter(pylogq_cluster, a, str(b), {"log.retention.ms": "3000"})
    assert code == errors.InvalidRequestError.code
    assert "Unexpected broker id, expected %d, but received %d" % (a, b) in str(message)
    assert _alter(pylogq_cluster, b, "", {"listeners": "PLAINTEXT://127.0.0.1:9"})[0] == errors.InvalidRequestError.code
    # Deleting the default leaves broker b's own value, the others go back to the static one.
    assert _alter(pylogq_cluster, c, "", {"log.retention.ms": (AlterConfigOp.DELETE, None)}) == (0, None)
    for broker in (a, c):
        _eventually(lambda: _source(pylogq_cluster, broker, "log.retention.ms")[1] != "DYNAMIC_DEFAULT_BROKER_CONFIG",
                    "broker %d to drop the default" % broker)
        assert pylogq_cluster.broker(broker).default_log_config.retention_ms == 604800000
    assert _source(pylogq_cluster, b, "log.retention.ms") == ("2000", "DYNAMIC_BROKER_CONFIG")


def test_a_lowered_default_message_max_bytes_refuses_on_every_leader(pylogq_cluster: pylogq.Cluster) -> None:
    admin = AdminClient({"bootstrap.servers": pylogq_cluster.bootstrap_servers})
    plain, own = "plain-%s" % uuid.uuid4().hex[:6], "own-%s" % uuid.uuid4().hex[:6]
    for topic, config in ((plain, {}), (own, {"max.message.bytes": "100000"})):
        admin.create_topics([NewTopic(topic, 3, 3, config=config)])[topic].result(TIMEOUT_S)
    bootstrap = pylogq_cluster.bootstrap_servers
    assert _produce(bootstrap, plain, BIG) is None
    assert _alter(pylogq_cluster, _ids(pylogq_cluster)[0], "", {"message.max.bytes": "10000"}) == (0, None)
    for broker in _ids(pylogq_cluster):
        _eventually(lambda: pylogq_cluster.broker(broker).default_log_config.max_message_bytes == 10000,
                    "broker %d to take message.max.bytes" % broker)
    for _ in range(3):  # the partitioner spreads them over the three leaders
        refused = _produce(bootstrap, plain, BIG)
        assert refused is not None and refused.code() == KafkaError.MSG_SIZE_TOO_LARGE
        assert _produce(bootstrap, own, BIG) is None


def test_values_outlive_a_broker_restart(pylogq_cluster: pylogq.Cluster) -> None:
    a, b, _ = _ids(pylogq_cluster)
    assert _alter(pylogq_cluster, a, "", {"log.segment.bytes": "100000"}) == (0, None)
    assert _alter(pylogq_cluster, b, str(b), {"log.retention.ms": "2000", "background.threads": "4",
                                              "log.cleaner.threads": "2"}) == (0, None)
    assert pylogq_cluster.broker(b).logs.config.log_cleaner_threads == 1  # read when the log manager starts
    restarted = pylogq_cluster.restart_broker(b)
    assert restarted.logs.config.log_cleaner_threads == 2  # read from the store before the log manager started
    _eventually(lambda: restarted.broker_configs()["log.segment.bytes"].source == "DYNAMIC_DEFAULT_BROKER_CONFIG",
                "the restarted broker to load its dynamic configs")
    assert restarted.default_log_config.segment_bytes == 100000
    assert restarted.default_log_config.retention_ms == 2000
    assert restarted.broker_configs()["background.threads"].value == "4"
