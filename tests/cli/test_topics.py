"""``pylogq topics``: kafka-topics.sh's actions and output, on an in-process broker."""

from __future__ import annotations

from typing import Any

import pytest

from pylogq.cli.main import main, run

from .conftest import Cli, run_process


def test_create_then_describe_prints_kafka_topics_format(cli: Cli) -> None:
    created = cli("topics", "--create", "--topic", "test", "--partitions", "2", "--replication-factor", "1",
                  "--config", "retention.ms=86400000", "--config", "cleanup.policy=compact,delete")
    assert created == (0, 'Created topic "test".\n', "")
    described = cli("topics", "--describe", "--topic", "test")
    assert described.status == 0
    assert described.out == (
        "Topic:test\tPartitionCount:2\tReplicationFactor:1\tConfigs:cleanup.policy=compact,delete,"
        "retention.ms=86400000\n"
        "\tTopic: test\tPartition: 0\tLeader: 0\tReplicas: 0\tIsr: 0\n"
        "\tTopic: test\tPartition: 1\tLeader: 0\tReplicas: 0\tIsr: 0\n")


def test_describe_without_topic_describes_every_topic_in_name_order(cli: Cli) -> None:
    for name in ("zeta", "alpha"):
        assert cli("topics", "--create", "--topic", name, "--partitions", "1").status == 0
    out = cli("topics", "--describe").out.splitlines()
    assert out == ["Topic:alpha\tPartitionCount:1\tReplicationFactor:1\tConfigs:",
                   "\tTopic: alpha\tPartition: 0\tLeader: 0\tReplicas: 0\tIsr: 0",
                   "Topic:zeta\tPartitionCount:1\tReplicationFactor:1\tConfigs:",
                   "\tTopic: zeta\tPartition: 0\tLeader: 0\tReplicas: 0\tIsr: 0"]


def test_describe_filters(cli: Cli) -> None:
    cli("topics", "--create", "--topic", "plain", "--partitions", "2")
    cli("topics", "--create", "--topic", "tuned", "--config", "retention.bytes=1000")
    overrides = cli("topics", "--describe", "--topics-with-overrides")
    assert overrides.out == "Topic:tuned\tPartitionCount:1\tReplicationFactor:1\tConfigs:retention.bytes=1000\n"
    # One broker: every replica is in sync and every partition has its leader.
    assert cli("topics", "--describe", "--under-replicated-partitions") == (0, "", "")
    assert cli("topics", "--describe", "--unavailable-partitions") == (0, "", "")


def test_create_refuses_an_existing_topic_unless_if_not_exists(cli: Cli) -> None:
    assert cli("topics", "--create", "--topic", "t").status == 0
    again = cli("topics", "--create", "--topic", "t")
    assert again == (1, "", 'Error: Topic "t" already exists.\n')
    assert cli("topics", "--create", "--topic", "t", "--if-not-exists") == (0, "", "")


def test_create_warns_about_metric_name_collisions(cli: Cli) -> None:
    out = cli("topics", "--create", "--topic", "my.topic").out.splitlines()
    assert out[0].startswith("WARNING: Due to limitations in metric names, topics with a period ('.') or "
                             "underscore ('_') could collide.")
    assert out[1] == 'Created topic "my.topic".'
    clash = cli("topics", "--create", "--topic", "my_topic")
    assert clash.status == 1 and "collides" in clash.err


def test_create_rejects_a_bad_config_naming_it(cli: Cli) -> None:
    bad = cli("topics", "--create", "--topic", "t", "--config", "retention.ms=soon")
    assert bad.status == 1 and "retention.ms" in bad.err
    assert cli("topics", "--list").out == ""
    assert "not KEY=VALUE" in cli("topics", "--create", "--topic", "t", "--config", "retention.ms").err


def test_create_with_replica_assignment(cli: Cli) -> None:
    assert cli("topics", "--create", "--topic", "t", "--replica-assignment", "0,0,0").status == 0
    assert cli("topics", "--describe", "--topic", "t").out.startswith(
        "Topic:t\tPartitionCount:3\tReplicationFactor:1\t")
    bad = cli("topics", "--create", "--topic", "u", "--replica-assignment", "0,7")
    assert bad.status == 1 and "Unknown broker(s) in replica assignment: 7." in bad.err


def test_list_sorted_and_filtered_by_regex(cli: Cli) -> None:
    for name in ("orders", "audit", "orders-dlq"):
        cli("topics", "--create", "--topic", name)
    assert cli("topics", "--list").out == "audit\norders\norders-dlq\n"
    assert cli("topics", "--list", "--topic", "orders.*").out == "orders\norders-dlq\n"
    assert cli("topics", "--list", "--topic", "audit,orders").out == "audit\norders\n"


def test_alter_grows_partitions_only(cli: Cli) -> None:
    cli("topics", "--create", "--topic", "t", "--partitions", "2")
    grown = cli("topics", "--alter", "--topic", "t", "--partitions", "5")
    assert grown.status == 0
    assert grown.out.splitlines() == [
        "WARNING: If partitions are increased for a topic that has a key, the partition logic or ordering of the "
        "messages will be affected",
        "Adding partitions succeeded!"]
    assert "PartitionCount:5" in cli("topics", "--describe", "--topic", "t").out
    shrink = cli("topics", "--alter", "--topic", "t", "--partitions", "3")
    assert shrink.status == 1 and "can only be increased" in shrink.err
    same = cli("topics", "--alter", "--topic", "t", "--partitions", "5")
    assert same.status == 1 and "already has 5 partitions" in same.err


@pytest.mark.parametrize("delete_flag", ["--deleteConfig", "--delete-config"])
def test_alter_configs_in_the_seeds_form(cli: Cli, delete_flag: str) -> None:
    cli("topics", "--create", "--topic", "t", "--config", "retention.ms=1000", "--config", "segment.ms=60000")
    changed = cli("topics", "--alter", "--topic", "t", "--config", "max.message.bytes=128000",
                  "--config", "retention.bytes=6000000000000")
    assert changed == (0, 'Updated config for topic "t".\n', "")
    assert cli("topics", "--describe", "--topic", "t").out.splitlines()[0].endswith(
        "Configs:max.message.bytes=128000,retention.bytes=6000000000000,retention.ms=1000,segment.ms=60000")
    removed = cli("topics", "--alter", "--topic", "t", delete_flag, "max.message.bytes", delete_flag, "segment.ms")
    assert removed.status == 0
    assert cli("topics", "--describe", "--topic", "t").out.splitlines()[0].endswith(
        "Configs:retention.bytes=6000000000000,retention.ms=1000")


def test_alter_configs_in_the_kafka_configs_form(cli: Cli) -> None:
    cli("topics", "--create", "--topic", "t")
    assert cli("topics", "--alter", "--topic", "t", "--add-config",
               "retention.ms=1000,cleanup.policy=compact,delete").status == 0
    assert cli("topics", "--describe", "--topic", "t").out.splitlines()[0].endswith(
        "Configs:cleanup.policy=compact,delete,retention.ms=1000")
    # --delete-config alone implies --alter, as kafka-configs.sh's does.
    assert cli("topics", "--topic", "t", "--delete-config", "retention.ms,cleanup.policy").status == 0
    assert cli("topics", "--describe", "--topic", "t").out.splitlines()[0].endswith("Configs:")


def test_alter_rejects_bad_configs_and_changes_nothing(cli: Cli) -> None:
    cli("topics", "--create", "--topic", "t", "--config", "retention.ms=1000")
    bad = cli("topics", "--alter", "--topic", "t", "--config", "no.such.key=1")
    assert bad.status == 1 and "no.such.key" in bad.err
    both = cli("topics", "--alter", "--topic", "t", "--config", "retention.ms=5", "--delete-config", "retention.ms")
    assert both.status == 1 and "both set and deleted" in both.err
    assert cli("topics", "--describe", "--topic", "t").out.splitlines()[0].endswith("Configs:retention.ms=1000")
    nothing = cli("topics", "--alter", "--topic", "t")
    assert nothing.status == 1 and "--alter needs" in nothing.err


def test_delete_exact_name_never_takes_regex_siblings(cli: Cli) -> None:
    cli("topics", "--create", "--topic", "t.1")
    cli("topics", "--create", "--topic", "tx1")
    deleted = cli("topics", "--delete", "--topic", "t.1")
    assert deleted == (0, "Topic t.1 is marked for deletion.\n", "")
    assert cli("topics", "--list").out == "tx1\n"
    cli("topics", "--create", "--topic", "tx2")
    assert cli("topics", "--delete", "--topic", "tx.*").out == (
        "Topic tx1 is marked for deletion.\nTopic tx2 is marked for deletion.\n")
    assert cli("topics", "--list").out == ""


def test_missing_topics(cli: Cli) -> None:
    for action in (["--delete"], ["--describe"], ["--alter", "--partitions", "3"]):
        missing = cli("topics", *action, "--topic", "ghost")
        assert missing == (1, "", "Error: Topic 'ghost' does not exist\n")
        assert cli("topics", *action, "--topic", "ghost", "--if-exists") == (0, "", "")


def test_internal_topic_cannot_be_deleted_or_altered(cli: Cli, broker: Any) -> None:
    from pylogq import Consumer

    cli("topics", "--create", "--topic", "t0")
    with Consumer(broker=broker, group_id="g", enable_auto_commit=False) as consumer:
        consumer.assign([("t0", 0)])
        consumer.commit({("t0", 0): 0})  # the group coordinator creates __consumer_offsets
    described = cli("topics", "--describe", "--topic", "__consumer_offsets")
    assert described.status == 0 and described.out.startswith("Topic:__consumer_offsets\tPartitionCount:")
    refused = cli("topics", "--delete", "--topic", "__consumer_offsets")
    assert refused.status == 1 and "internal topic" in refused.err
    assert cli("topics", "--alter", "--topic", "__consumer_offsets", "--partitions", "99").status == 1


def test_option_rules(cli: Cli) -> None:
    no_action = cli("topics", "--topic", "t")
    assert no_action.status == 1 and "exactly one action" in no_action.err
    wrong = cli("topics", "--alter", "--topic", "t", "--replication-factor", "2")
    assert wrong.status == 1 and "--replication-factor can't be used with --alter" in wrong.err
    no_topic = cli("topics", "--create")
    assert no_topic.status == 1 and "--create needs --topic" in no_topic.err


@pytest.mark.parametrize("argv", [
    ["topics", "--create", "--topic", "t", "--partitions", "0"],
    ["topics", "--list", "--bootstrap-server", "no-port"],
    ["topics", "--list", "--describe"],
])
def test_usage_errors_exit_2(argv: Any, capsys: Any) -> None:
    with pytest.raises(SystemExit) as exc:
        run(argv)
    assert exc.value.code == 2
    assert "error:" in capsys.readouterr().err


def test_unreachable_broker_is_an_error_not_a_traceback(capsys: Any) -> None:
    from socket import socket

    with socket() as s:  # a port nobody listens on: bound, never listening
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        status = run(["topics", "--list", "--bootstrap-server", "127.0.0.1:%d" % port])
    err = capsys.readouterr().err
    assert status == 1 and err.startswith("Error: ")


# -- over TCP, as a user runs it --------------------------------------------------------------------


def test_the_seeds_topic_commands_against_a_served_broker(pylogq_bootstrap: str) -> None:
    created = run_process(pylogq_bootstrap, "topics", "--create", "--topic", "test", "--partitions", "1",
                          "--replication-factor", "1")
    assert created == (0, 'Created topic "test".\n', "")
    assert run_process(pylogq_bootstrap, "topics", "--list") == (0, "test\n", "")
    assert run_process(pylogq_bootstrap, "topics", "--alter", "--topic", "test", "--partitions", "2",
                       "--config", "max.message.bytes=128000").status == 0
    described = run_process(pylogq_bootstrap, "topics", "--describe", "--topic", "test")
    assert described == (0, "Topic:test\tPartitionCount:2\tReplicationFactor:1\tConfigs:max.message.bytes=128000\n"
                            "\tTopic: test\tPartition: 0\tLeader: 0\tReplicas: 0\tIsr: 0\n"
                            "\tTopic: test\tPartition: 1\tLeader: 0\tReplicas: 0\tIsr: 0\n", "")
    assert run_process(pylogq_bootstrap, "topics", "--alter", "--topic", "test", "--deleteConfig",
                       "max.message.bytes").status == 0
    assert run_process(pylogq_bootstrap, "topics", "--create", "--topic", "test").status == 1
    assert run_process(pylogq_bootstrap, "topics", "--delete", "--topic", "test") == (
        0, "Topic test is marked for deletion.\n", "")
    assert run_process(pylogq_bootstrap, "topics", "--list") == (0, "", "")


def test_main_with_bootstrap_server_in_process(pylogq_bootstrap: str, capsys: Any) -> None:
    assert main(["topics", "--create", "--topic", "t", "--bootstrap-server", pylogq_bootstrap]) == 0
    assert main(["topics", "--describe", "--bootstrap-server", pylogq_bootstrap]) == 0
    assert capsys.readouterr().out.splitlines() == [
        'Created topic "t".', "Topic:t\tPartitionCount:1\tReplicationFactor:1\tConfigs:",
        "\tTopic: t\tPartition: 0\tLeader: 0\tReplicas: 0\tIsr: 0"]


def test_a_bootstrap_server_with_its_listeners_protocol_is_taken(pylogq_broker: Any, pylogq_bootstrap: str) -> None:
    """Kafka's tools take ``PLAINTEXT://host:port`` (librdkafka's test harness passes its brokers so),
    and any listener's name in front, as Kafka's clients do."""
    pylogq_broker.create_topic("listed")
    done = run_process("PLAINTEXT://%s,plaintext://%s" % (pylogq_bootstrap, pylogq_bootstrap), "topics", "--list")
    assert done == (0, "listed\n", "")
    # Any listener's name, as Kafka's clients take it: the protocol comes from the security settings.
    assert run_process("SSL://" + pylogq_bootstrap, "topics", "--list") == (0, "listed\n", "")
