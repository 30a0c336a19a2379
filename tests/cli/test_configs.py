"""``pylogq configs``: kafka-configs.sh's describe and alter of topic and broker configs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from .conftest import Cli, run_process

#: Config and quota administration moves no records and has no pure-Python twin: the compiled pass
#: only (tests/conftest.py).
pytestmark = pytest.mark.compiled_pass


@pytest.fixture
def topic(cli: Cli) -> str:
    assert cli("topics", "--create", "--topic", "t", "--config", "retention.ms=1000").status == 0
    return "t"


def test_describe_a_topic_prints_its_overrides_as_kafka_does(cli: Cli, topic: str) -> None:
    assert cli("configs", "--describe", "--entity-type", "topics", "--entity-name", topic) == (0, (
        "Dynamic configs for topic t are:\n"
        "  retention.ms=1000 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:retention.ms=1000}\n"), "")
    # The shortcut names the same entity.
    assert cli("configs", "--describe", "--topic", topic).out.startswith("Dynamic configs for topic t are:\n")


def test_describe_all_lists_every_key_with_its_source(cli: Cli, broker: Any, topic: str) -> None:
    described = cli("configs", "--describe", "--topic", topic, "--all")
    lines = described.out.splitlines()
    assert lines[0] == "All configs for topic t are:"
    entries = {line.split("=", 1)[0].strip(): line for line in lines[1:]}
    assert set(entries) == set(broker.describe_configs(topic))
    assert entries["retention.ms"].endswith("synonyms={DYNAMIC_TOPIC_CONFIG:retention.ms=1000}")
    default = broker.describe_configs(topic)["segment.bytes"][0]
    assert entries["segment.bytes"] == "  segment.bytes=%s sensitive=false synonyms={DEFAULT_CONFIG:segment.bytes=%s}" % (
        default, default)


def test_describe_without_a_name_covers_every_topic(cli: Cli, topic: str) -> None:
    assert cli("topics", "--create", "--topic", "u").status == 0
    described = cli("configs", "--describe", "--entity-type", "topics")
    assert [line for line in described.out.splitlines() if line.endswith("are:")] == [
        "Dynamic configs for topic t are:", "Dynamic configs for topic u are:"]


def test_alter_sets_and_deletes_only_the_keys_named(cli: Cli, broker: Any, topic: str) -> None:
    done = cli("configs", "--alter", "--topic", topic, "--add-config",
               "cleanup.policy=[compact,delete],max.message.bytes=2000")
    assert done == (0, "Completed updating config for topic t.\n", "")
    assert broker.describe_topic(topic).config == {
        "retention.ms": "1000", "cleanup.policy": "compact,delete", "max.message.bytes": "2000"}
    assert cli("configs", "--alter", "--entity-type", "topics", "--entity-name", topic,
               "--delete-config", "retention.ms,max.message.bytes").status == 0
    assert broker.describe_topic(topic).config == {"cleanup.policy": "compact,delete"}


def test_alter_from_a_properties_file(cli: Cli, broker: Any, topic: str, tmp_path: Path) -> None:
    path = tmp_path / "topic.properties"
    path.write_text("# overrides\nsegment.ms=60000\nretention.bytes: 123456\n")
    assert cli("configs", "--alter", "--topic", topic, "--add-config-file", str(path)).status == 0
    assert broker.describe_topic(topic).config == {"retention.ms": "1000", "segment.ms": "60000",
                                                   "retention.bytes": "123456"}


def test_alter_errors_change_nothing(cli: Cli, broker: Any, topic: str) -> None:
    missing = cli("configs", "--alter", "--topic", topic, "--add-config", "segment.ms=5", "--delete-config",
                  "segment.mss")
    assert missing == (1, "", "Error: INVALID_CONFIG: Invalid config(s): segment.mss (not topic configs)\n")
    typo = cli("configs", "--alter", "--topic", topic, "--add-config", "retention.mss=5")
    assert typo.status == 1 and "retention.mss" in typo.err
    bad = cli("configs", "--alter", "--topic", topic, "--add-config", "retention.ms=soon")
    assert bad.status == 1 and "retention.ms" in bad.err
    unknown = cli("configs", "--alter", "--topic", "nope", "--add-config", "retention.ms=5")
    assert unknown.status == 1 and "UNKNOWN_TOPIC_OR_PARTITION" in unknown.err
    assert broker.describe_topic(topic).config == {"retention.ms": "1000"}
    assert cli("configs", "--alter", "--topic", topic).status == 1  # nothing to change
    key = cli("configs", "--alter", "--topic", topic, "--add-config", "retention ms=5")
    assert key == (1, "", "Error: Invalid character found for config key: retention ms\n")


def test_entity_usage_errors(cli: Cli) -> None:
    assert "give one entity" in cli("configs", "--describe").err
    assert "give one entity" in cli("configs", "--describe", "--topic", "t", "--broker", "0").err
    assert "need --entity-type" in cli("configs", "--describe", "--entity-name", "t").err
    assert "must be a valid integer broker id, found: zero" in cli("configs", "--describe", "--broker", "zero").err
    assert "--entity-default applies to brokers" in cli("configs", "--describe", "--entity-type", "topics",
                                                        "--entity-default").err
    assert "must be specified" in cli("configs", "--alter", "--entity-type", "topics",
                                      "--add-config", "retention.ms=1").err


def test_broker_configs_static_and_dynamic(cli: Cli, broker: Any) -> None:
    # No dynamic broker configs yet: the heading alone, as Kafka prints for a broker without any.
    assert cli("configs", "--describe", "--broker", "0") == (0, "Dynamic configs for broker 0 are:\n", "")
    every = cli("configs", "--describe", "--entity-type", "brokers", "--entity-name", "0", "--all").out.splitlines()
    assert every[0] == "All configs for broker 0 are:"
    line = [x for x in every if x.startswith("  group.initial.rebalance.delay.ms=")]
    assert line == ["  group.initial.rebalance.delay.ms=0 sensitive=false "
                    "synonyms={STATIC_BROKER_CONFIG:group.initial.rebalance.delay.ms=0, "
                    "DEFAULT_CONFIG:group.initial.rebalance.delay.ms=3000}"]
    assert cli("configs", "--describe", "--entity-type", "brokers").out == (
        "Dynamic configs for broker 0 are:\nDefault configs for brokers in the cluster are:\n")
    # A key Kafka reads only at start is refused as Kafka refuses it.
    refused = cli("configs", "--alter", "--broker", "0", "--add-config", "log.dirs=/elsewhere")
    assert refused.status == 1 and "Cannot update these configs dynamically: Set(log.dirs)" in refused.err
    assert cli("configs", "--describe", "--broker", "5").status == 1
    # The cluster-wide default, then this broker's own value over it.
    assert cli("configs", "--alter", "--entity-type", "brokers", "--entity-default",
               "--add-config", "log.retention.ms=5000") == (
        0, "Completed updating default config for brokers in the cluster.\n", "")
    assert cli("configs", "--alter", "--broker", "0", "--add-config", "log.retention.ms=6000,background.threads=4") == (
        0, "Completed updating config for broker 0.\n", "")
    assert broker.default_log_config.retention_ms == 6000
    assert cli("configs", "--describe", "--broker", "0") == (0, (
        "Dynamic configs for broker 0 are:\n"
        "  background.threads=4 sensitive=false synonyms={DYNAMIC_BROKER_CONFIG:background.threads=4, "
        "DEFAULT_CONFIG:background.threads=10}\n"
        "  log.retention.ms=6000 sensitive=false synonyms={DYNAMIC_BROKER_CONFIG:log.retention.ms=6000, "
        "DYNAMIC_DEFAULT_BROKER_CONFIG:log.retention.ms=5000, DEFAULT_CONFIG:log.retention.ms=null}\n"), "")
    assert cli("configs", "--describe", "--broker-defaults") == (0, (
        "Default configs for brokers in the cluster are:\n"
        "  log.retention.ms=5000 sensitive=false synonyms={DYNAMIC_DEFAULT_BROKER_CONFIG:log.retention.ms=5000, "
        "DEFAULT_CONFIG:log.retention.ms=null}\n"), "")
    assert cli("configs", "--alter", "--broker", "0", "--delete-config", "log.retention.ms,background.threads",
               ).status == 0
    assert broker.default_log_config.retention_ms == 5000
    assert cli("configs", "--describe", "--broker", "0") == (0, "Dynamic configs for broker 0 are:\n", "")


def test_over_tcp_as_a_user_runs_it(pylogq_broker: Any, pylogq_bootstrap: str) -> None:
    pylogq_broker.create_topic("t", 1)
    done = run_process(pylogq_bootstrap, "configs", "--alter", "--topic", "t", "--add-config", "retention.ms=5000")
    assert done == (0, "Completed updating config for topic t.\n", "")
    described = run_process(pylogq_bootstrap, "configs", "--describe", "--topic", "t")
    assert described.out == ("Dynamic configs for topic t are:\n"
                             "  retention.ms=5000 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:retention.ms=5000}\n")
    broker_id = str(pylogq_broker.broker_id)
    every = run_process(pylogq_bootstrap, "configs", "--describe", "--broker", broker_id, "--all").out.splitlines()
    assert every[0] == "All configs for broker %s are:" % broker_id
    assert any(x.startswith("  log.dirs=") for x in every)
    # Over the wire too: a broker's dynamic value, and the cluster-wide default.
    done = run_process(pylogq_bootstrap, "configs", "--alter", "--entity-type", "brokers", "--entity-name", broker_id,
                       "--add-config", "message.max.bytes=100000")
    assert done == (0, "Completed updating config for broker %s.\n" % broker_id, "")
    assert pylogq_broker.default_log_config.max_message_bytes == 100000
    assert run_process(pylogq_bootstrap, "configs", "--describe", "--broker", broker_id).out == (
        "Dynamic configs for broker %s are:\n"
        "  message.max.bytes=100000 sensitive=false synonyms={DYNAMIC_BROKER_CONFIG:message.max.bytes=100000, "
        "DEFAULT_CONFIG:message.max.bytes=1048588}\n" % broker_id)
    done = run_process(pylogq_bootstrap, "configs", "--alter", "--entity-type", "brokers", "--entity-default",
                       "--add-config", "listeners=PLAINTEXT://127.0.0.1:9")
    assert done.status == 1 and "broker id must be specified: Set(listeners)" in done.err


def test_client_user_and_ip_quotas_as_kafka_configs_handles_them(cli: Cli) -> None:
    user_client = ("--entity-type", "users", "--entity-name", "alice", "--entity-type", "clients", "--entity-default")
    assert cli("configs", "--alter", *user_client,
               "--add-config", "producer_byte_rate=1048576,consumer_byte_rate=20971520") == (
        0, "Completed updating config for user alice.\n", "")
    assert cli("configs", "--alter", "--entity-type", "clients", "--entity-default",
               "--add-config", "request_percentage=12.5") == (
        0, "Completed updating default config for clients in the cluster.\n", "")
    assert cli("configs", "--alter", "--ip", "127.0.0.1", "--add-config", "connection_creation_rate=100") == (
        0, "Completed updating config for ip 127.0.0.1.\n", "")
    assert cli("configs", "--describe", *user_client) == (0, (
        "Quota configs for user-principal 'alice', the default client-id are consumer_byte_rate=2.097152E7, "
        "producer_byte_rate=1048576.0\n"), "")
    # The clients alone (strictly: not alice's), any name or the default.
    assert cli("configs", "--describe", "--entity-type", "clients") == (0, (
        "Quota configs for the default client-id are request_percentage=12.5\n"), "")
    assert cli("configs", "--describe", "--entity-type", "ips") == (0, (
        "Quota configs for ip '127.0.0.1' are connection_creation_rate=100.0\n"), "")
    assert cli("configs", "--alter", *user_client, "--delete-config", "producer_byte_rate").status == 0
    assert cli("configs", "--describe", "--entity-type", "users", "--entity-name", "alice",
               "--entity-type", "clients").out == (
        "Quota configs for user-principal 'alice', the default client-id are consumer_byte_rate=2.097152E7\n")
    # kafka-configs.sh's refusals.
    refused = cli("configs", "--alter", *user_client, "--delete-config", "producer_byte_rate")
    assert refused.status == 1 and "Invalid config(s): producer_byte_rate" in refused.err
    refused = cli("configs", "--alter", "--client", "c", "--add-config", "retention.ms=1")
    assert refused.status == 1 and "Only quota configs can be added for 'clients'" in refused.err
    refused = cli("configs", "--alter", "--client", "c", "--add-config", "producer_byte_rate=fast")
    assert refused.status == 1 and "Cannot parse quota configuration value for producer_byte_rate: fast" in refused.err
    refused = cli("configs", "--alter", "--client", "c", "--add-config", "producer_byte_rate=1.5")
    assert refused.status == 1 and "Configuration producer_byte_rate must be a LONG value" in refused.err
    refused = cli("configs", "--alter", "--user-defaults", "--add-config", "SCRAM-SHA-256=[password=x]")
    assert refused.status == 1 and "--entity-default or --user-defaults is not allowed" in refused.err
    refused = cli("configs", "--describe", "--entity-type", "topics", "--entity-type", "clients")
    assert refused.status == 1 and "may be given together" in refused.err
