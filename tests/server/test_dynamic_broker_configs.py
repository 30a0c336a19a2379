"""Dynamic broker configs on a single broker, as Kafka's AlterConfigs and IncrementalAlterConfigs
set them on a BROKER resource: librdkafka's 0081 scenario, precedence (per-broker dynamic >
cluster-wide default > static > default) as DescribeConfigs reports it, log defaults that
existing topics take at once unless they override the key, Kafka's refusals, validate_only,
and the values kept in the data directory across a restart."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional, Tuple

import pytest
from confluent_kafka import KafkaError
from confluent_kafka import Producer as ConfluentProducer
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ConfigSource, NewTopic

import pylogq
from pylogq import errors
from pylogq.client.connection import BrokerConnection
from pylogq.cluster.broker.dynamic_config import DYNAMIC_CONFIG_FILE
from pylogq.protocol import AlterConfigOp, ApiKey, ConfigResourceType

TIMEOUT_S = 30.0
BIG = 20000  # bytes of a record value: accepted by the defaults, refused once message.max.bytes is 10000


@pytest.fixture
def admin(pylogq_bootstrap: str) -> AdminClient:
    return AdminClient({"bootstrap.servers": pylogq_bootstrap})


@pytest.fixture
def conn(pylogq_broker: pylogq.Broker) -> Iterator[BrokerConnection]:
    host, port = pylogq_broker.listener_addresses[0]
    connection = BrokerConnection(host, port, "dynamic-configs-test", 10.0)
    yield connection
    connection.close()


def _alter(conn: BrokerConnection, name: str, configs: Dict[str, Any], incremental: bool = True,
           validate_only: bool = False) -> Tuple[int, Optional[str]]:
    """One BROKER resource's (error code, message); incremental values are (op, value) or a value to SET."""
    if incremental:
        entries = []
        for key, change in configs.items():
            op, value = change if isinstance(change, tuple) else (AlterConfigOp.SET, change)
            entries.append({"name": key, "config_operation": op, "value": value})
        api = ApiKey.INCREMENTAL_ALTER_CONFIGS
    else:
        entries = [{"name": k, "value": v} for k, v in configs.items()]
        api = ApiKey.ALTER_CONFIGS
    body = {"resources": [{"resource_type": ConfigResourceType.BROKER, "resource_name": name, "configs": entries}],
            "validate_only": validate_only}
    [result] = conn.request(api, body)["responses"]
    message = result["error_message"]
    if message is not None and message.startswith("[Error "):  # pylogq's "[Error N] NAME: " before Kafka's text
        message = message.split(": ", 1)[1]
    return result["error_code"], message


def _describe(conn: BrokerConnection, name: str, keys: Optional[List[str]] = None) -> Dict[str, Dict[str, Any]]:
    """DescribeConfigs of a BROKER resource with synonyms: key -> its entry."""
    body = {"resources": [{"resource_type": ConfigResourceType.BROKER, "resource_name": name,
                           "configuration_keys": keys}], "include_synonyms": True, "include_documentation": False}
    [result] = conn.request(ApiKey.DESCRIBE_CONFIGS, body)["results"]
    assert result["error_code"] == 0, result
    return {c["name"]: c for c in result["configs"]}


def _synonyms(entry: Dict[str, Any]) -> List[Tuple[int, Optional[str]]]:
    return [(s["source"], s["value"]) for s in entry["synonyms"]]


def _produce(bootstrap: str, topic: str, size: int) -> Optional[KafkaError]:
    """One record of ``size`` bytes; -> the delivery error, or None when the broker took it."""
    producer = ConfluentProducer({"bootstrap.servers": bootstrap, "message.max.bytes": 1000000,
                                  "retries": 0, "linger.ms": 0})
    outcome: List[Optional[KafkaError]] = []
    producer.produce(topic, b"x" * size, on_delivery=lambda err, msg: outcome.append(err))
    assert producer.flush(TIMEOUT_S) == 0
    return outcome[0]


def _create(admin: AdminClient, topic: str, config: Optional[Dict[str, str]] = None) -> None:
    admin.create_topics([NewTopic(topic, 1, 1, config=config or {})])[topic].result(TIMEOUT_S)


def test_librdkafka_0081_scenario_answers_no_error(admin: AdminClient, pylogq_broker: pylogq.Broker) -> None:
    """librdkafka's 0081 sets a Kerberos key and background.threads with AlterConfigs, then SETs and
    DELETEs background.threads and APPENDs and SUBTRACTs compact on log.cleanup.policy."""
    broker = str(pylogq_broker.broker_id)
    resource = ConfigResource("broker", broker, set_config={"sasl.kerberos.min.time.before.relogin": "58000",
                                                            "background.threads": "9"})
    with pytest.warns(DeprecationWarning):
        futures = admin.alter_configs([resource])
    assert [f.result(TIMEOUT_S) for f in futures.values()] == [None]
    described = admin.describe_configs([ConfigResource("broker", broker)])
    [entries] = [f.result(TIMEOUT_S) for f in described.values()]
    assert entries["background.threads"].value == "9"
    assert entries["background.threads"].source == ConfigSource.DYNAMIC_BROKER_CONFIG.value
    assert not entries["background.threads"].is_read_only
    assert entries["sasl.kerberos.min.time.before.relogin"].value == "58000"

    def incremental(*entries: ConfigEntry) -> None:
        futures = admin.incremental_alter_configs([ConfigResource("broker", broker, incremental_configs=list(entries))])
        assert [f.result(TIMEOUT_S) for f in futures.values()] == [None]

    incremental(ConfigEntry("background.threads", "9", incremental_operation=AlterConfigOpType.SET),
                ConfigEntry("log.cleanup.policy", "compact", incremental_operation=AlterConfigOpType.APPEND))
    assert pylogq_broker.default_log_config.cleanup_policy == ("delete", "compact")
    incremental(ConfigEntry("background.threads", None, incremental_operation=AlterConfigOpType.DELETE),
                ConfigEntry("log.cleanup.policy", "compact", incremental_operation=AlterConfigOpType.SUBTRACT))
    assert pylogq_broker.default_log_config.cleanup_policy == ("delete",)
    entries = pylogq_broker.broker_configs()
    assert (entries["background.threads"].value, entries["background.threads"].source) == ("10", "DEFAULT_CONFIG")
    # AlterConfigs replaced the whole set: the Kerberos key stays from the incremental requests' base.
    assert entries["sasl.kerberos.min.time.before.relogin"].source == "DYNAMIC_BROKER_CONFIG"


def test_a_lowered_message_max_bytes_refuses_at_once_where_no_topic_overrides_it(
        admin: AdminClient, pylogq_broker: pylogq.Broker, pylogq_bootstrap: str, conn: BrokerConnection) -> None:
    _create(admin, "plain")
    _create(admin, "own", {"max.message.bytes": "100000"})
    assert _produce(pylogq_bootstrap, "plain", BIG) is None
    assert _alter(conn, "0", {"message.max.bytes": "10000"}) == (0, None)
    refused = _produce(pylogq_bootstrap, "plain", BIG)
    assert refused is not None and refused.code() == KafkaError.MSG_SIZE_TOO_LARGE
    assert _produce(pylogq_bootstrap, "own", BIG) is None  # its own override stands
    # DescribeConfigs of the topic and a topic created now show the new default.
    assert pylogq_broker.describe_configs("plain")["max.message.bytes"] == ("10000", True)
    assert pylogq_broker.describe_configs("own")["max.message.bytes"] == ("100000", False)
    _create(admin, "later")
    refused = _produce(pylogq_bootstrap, "later", BIG)
    assert refused is not None and refused.code() == KafkaError.MSG_SIZE_TOO_LARGE
    # DELETE returns the key to its static value (here Kafka's default): accepted again.
    assert _alter(conn, "0", {"message.max.bytes": (AlterConfigOp.DELETE, None)}) == (0, None)
    assert _produce(pylogq_bootstrap, "plain", BIG) is None
    assert pylogq_broker.describe_configs("plain")["max.message.bytes"] == ("1048588", True)


def test_precedence_per_broker_over_default_over_static(tmp_path: Path) -> None:
    with pylogq.Broker(str(tmp_path), **{"log.retention.ms": "5000"}) as broker:
        host, port = broker.serve("127.0.0.1", 0)
        conn = BrokerConnection(host, port, "precedence", 10.0)
        try:
            static = _describe(conn, "0", ["log.retention.ms"])["log.retention.ms"]
            assert (static["value"], static["config_source"]) == ("5000", ConfigSource.STATIC_BROKER_CONFIG.value)
            assert _alter(conn, "", {"log.retention.ms": "1000"}) == (0, None)
            assert broker.default_log_config.retention_ms == 1000
            assert _alter(conn, "0", {"log.retention.ms": "2000"}) == (0, None)
            assert broker.default_log_config.retention_ms == 2000
            entry = _describe(conn, "0", ["log.retention.ms"])["log.retention.ms"]
            assert (entry["value"], entry["config_source"], entry["read_only"]) == (
                "2000", ConfigSource.DYNAMIC_BROKER_CONFIG.value, False)
            assert _synonyms(entry) == [(ConfigSource.DYNAMIC_BROKER_CONFIG.value, "2000"),
                                        (ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value, "1000"),
                                        (ConfigSource.STATIC_BROKER_CONFIG.value, "5000"),
                                        (ConfigSource.DEFAULT_CONFIG.value, None)]
            # The default resource is seen without this broker's own value.
            default = _describe(conn, "", ["log.retention.ms"])["log.retention.ms"]
            assert (default["value"], default["config_source"]) == (
                "1000", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value)
            assert ConfigSource.DYNAMIC_BROKER_CONFIG.value not in [s for s, _ in _synonyms(default)]
            assert _alter(conn, "0", {"log.retention.ms": (AlterConfigOp.DELETE, None)}) == (0, None)
            assert broker.default_log_config.retention_ms == 1000
            assert _alter(conn, "", {"log.retention.ms": (AlterConfigOp.DELETE, None)}) == (0, None)
            assert broker.default_log_config.retention_ms == 5000
            entry = _describe(conn, "0", ["log.retention.ms"])["log.retention.ms"]
            assert (entry["value"], entry["config_source"]) == ("5000", ConfigSource.STATIC_BROKER_CONFIG.value)
        finally:
            conn.close()


def test_alter_configs_replaces_the_whole_set(pylogq_broker: pylogq.Broker, conn: BrokerConnection) -> None:
    both = {"log.retention.ms": "1000", "log.segment.bytes": "100000"}
    assert _alter(conn, "0", both, incremental=False) == (0, None)
    assert _alter(conn, "0", {"log.segment.bytes": "200000"}, incremental=False) == (0, None)
    assert pylogq_broker.dynamic_config.per_broker == {"log.segment.bytes": "200000"}
    assert pylogq_broker.default_log_config.segment_bytes == 200000
    assert pylogq_broker.default_log_config.retention_ms == 604800000


def test_validate_only_changes_nothing(pylogq_broker: pylogq.Broker, conn: BrokerConnection) -> None:
    before = pylogq_broker.broker_configs()
    for incremental in (True, False):
        assert _alter(conn, "0", {"log.retention.ms": "1000"}, incremental, validate_only=True) == (0, None)
        assert _alter(conn, "", {"log.retention.ms": "1000"}, incremental, validate_only=True) == (0, None)
        code, _ = _alter(conn, "0", {"log.retention.ms": "soon"}, incremental, validate_only=True)
        assert code == errors.InvalidRequestError.code
    assert pylogq_broker.broker_configs() == before
    assert pylogq_broker.default_log_config.retention_ms == 604800000
    assert not os.path.exists(os.path.join(pylogq_broker.data_dir, DYNAMIC_CONFIG_FILE))


@pytest.mark.parametrize("incremental", [True, False])
def test_kafka_refusals(pylogq_broker: pylogq.Broker, conn: BrokerConnection, incremental: bool) -> None:
    resource = "Invalid config value for resource ConfigResource(type=BROKER, name='%s'): "
    assert _alter(conn, "0", {"log.dirs": "/elsewhere", "log.retention.ms": "1"}, incremental) == (
        errors.InvalidRequestError.code, resource % "0" + "Cannot update these configs dynamically: Set(log.dirs)")
    assert _alter(conn, "", {"listeners": "PLAINTEXT://127.0.0.1:9"}, incremental) == (
        errors.InvalidRequestError.code, resource % "" + "Cannot update these configs at default cluster level, "
        "broker id must be specified: Set(listeners)")
    assert _alter(conn, "0", {"ssl.keystore.location": "/k"}, incremental) == (
        errors.InvalidRequestError.code, resource % "0" + "These security configs can be dynamically updated only "
        "per-listener using the listener prefix: Set(ssl.keystore.location)")
    jaas = "listener.name.sasl_plaintext.plain.sasl.jaas.config"
    assert _alter(conn, "0", {jaas: "x required;"}, incremental) == (
        errors.InvalidRequestError.code, resource % "0" + "Password encoder secret not configured")
    assert _alter(conn, "", {jaas: "x required;"}, incremental) == (
        errors.InvalidRequestError.code, resource % "" + "Cannot update these configs at default cluster level, "
        "broker id must be specified: Set(%s)" % jaas)
    code, message = _alter(conn, "0", {"log.segment.bytes": "big"}, incremental)
    assert code == errors.InvalidRequestError.code and "log.segment.bytes" in str(message) and "'big'" in str(message)
    code, message = _alter(conn, "0", {"sasl.kerberos.min.time.before.relogin": "soon"}, incremental)
    assert code == errors.InvalidRequestError.code and "sasl.kerberos.min.time.before.relogin" in str(message)
    assert _alter(conn, "7", {"log.retention.ms": "1"}, incremental) == (
        errors.InvalidRequestError.code, "Unexpected broker id, expected 0, but received 7")
    assert pylogq_broker.dynamic_config.per_broker == {} and pylogq_broker.dynamic_config.default == {}


def test_list_operations_only_on_list_keys(conn: BrokerConnection) -> None:
    assert _alter(conn, "0", {"log.retention.ms": (AlterConfigOp.APPEND, "1")}) == (
        errors.InvalidConfigError.code, "Config value append is not allowed for config key: log.retention.ms")
    assert _alter(conn, "0", {"no.such.key": (AlterConfigOp.SUBTRACT, "a")}) == (
        errors.InvalidConfigError.code, "Unknown config name: no.such.key")


def test_a_key_kafka_does_not_know_is_kept_as_kafka_keeps_custom_keys(pylogq_broker: pylogq.Broker,
                                                                     conn: BrokerConnection) -> None:
    assert _alter(conn, "0", {"custom.plugin.setting": "on"}) == (0, None)
    entry = _describe(conn, "0", ["custom.plugin.setting"])["custom.plugin.setting"]
    assert (entry["value"], entry["config_source"]) == ("on", ConfigSource.DYNAMIC_BROKER_CONFIG.value)


def test_values_survive_a_restart_in_the_data_directory(tmp_path: Path) -> None:
    with pylogq.Broker(str(tmp_path)) as broker:
        broker.create_topic("kept", 1)
        broker.alter_broker_configs("", [("SET", "log.retention.ms", "1000")])
        broker.alter_broker_configs("0", [("SET", "log.segment.bytes", "100000"), ("SET", "background.threads", "4"),
                                          ("SET", "log.cleaner.threads", "2")])
        assert broker.logs.config.log_cleaner_threads == 1  # read when the log manager starts
    stored = json.loads((tmp_path / DYNAMIC_CONFIG_FILE).read_text())
    assert stored == {"version": 1, "<default>": {"log.retention.ms": "1000"},
                      "0": {"background.threads": "4", "log.cleaner.threads": "2", "log.segment.bytes": "100000"}}
    with pylogq.Broker(str(tmp_path)) as broker:
        assert broker.default_log_config.retention_ms == 1000
        assert broker.default_log_config.segment_bytes == 100000
        assert broker.partition("kept", 0).log.config.segment_bytes == 100000
        assert broker.logs.config.log_cleaner_threads == 2
        entries = broker.broker_configs()
        assert (entries["background.threads"].value, entries["background.threads"].source) == (
            "4", "DYNAMIC_BROKER_CONFIG")
        assert entries["log.retention.ms"].source == "DYNAMIC_DEFAULT_BROKER_CONFIG"
