"""``pylogq groups``: kafka-consumer-groups.sh's list, describe, reset and delete, on an in-process broker."""

from __future__ import annotations

import datetime
import time
from typing import Any, Dict, Iterator, List

import pytest

from pylogq import Consumer, records
from pylogq.client.admin import AdminClient
from pylogq.client.consumer import TopicPartition

from .conftest import Cli, run_process

DEADLINE_S = 30.0
T0 = 1_700_000_000_000


@pytest.fixture
def topic(cli: Cli, broker: Any) -> str:
    """Topic ``t``: partition 0 holds 10 records (timestamps T0, T0+1000, ...), partition 1 holds 4."""
    assert cli("topics", "--create", "--topic", "t", "--partitions", "2").status == 0
    broker.produce("t", 0, records.build_batch([b"v%d" % i for i in range(10)],
                                               timestamps=[T0 + 1000 * i for i in range(10)]))
    broker.produce("t", 1, records.build_batch([b"w%d" % i for i in range(4)], timestamps=T0))
    return "t"


def commit(broker: Any, group: str, offsets: Dict[int, int]) -> None:
    """Commit offsets for a group with no members (as a tool or a manual-assignment consumer does)."""
    with Consumer(broker=broker, group_id=group, enable_auto_commit=False) as consumer:
        consumer.assign([TopicPartition("t", p) for p in offsets])
        consumer.commit({TopicPartition("t", p): o for p, o in offsets.items()})


def committed(broker: Any, group: str) -> Dict[int, int]:
    with AdminClient(broker=broker) as admin:
        return {tp.partition: om.offset for tp, om in admin.list_consumer_group_offsets(group).items()}


@pytest.fixture
def member(broker: Any, topic: str) -> Iterator[Consumer]:
    """An active member of group ``live`` that owns both partitions and has committed 4 records of partition 0."""
    consumer = Consumer(broker=broker, group_id="live", client_id="reader-1", enable_auto_commit=False,
                        session_timeout_ms=10000, heartbeat_interval_ms=100, auto_offset_reset="earliest")
    consumer.subscribe(["t"])
    deadline = time.monotonic() + DEADLINE_S
    while len(consumer.assignment()) < 2 and time.monotonic() < deadline:
        consumer.poll(timeout_ms=100, max_records=1)
    assert len(consumer.assignment()) == 2
    consumer.commit({TopicPartition("t", 0): 4})
    try:
        yield consumer
    finally:
        consumer.close(autocommit=False)


def member_id(broker: Any, group: str) -> str:
    with AdminClient(broker=broker) as admin:
        (only,) = admin.describe_consumer_groups([group])[0].members
        return only.member_id


def table(out: str) -> List[List[str]]:
    return [line.split() for line in out.splitlines() if line.strip()]


def test_list(cli: Cli, broker: Any, topic: str) -> None:
    assert cli("groups", "--list") == (0, "", "")
    commit(broker, "b-group", {0: 1})
    commit(broker, "a-group", {0: 1})
    assert cli("groups", "--list").out == "a-group\nb-group\n"


def test_describe_an_active_group(cli: Cli, broker: Any, member: Consumer) -> None:
    described = cli("groups", "--describe", "--group", "live")
    assert described.status == 0 and described.err == ""
    lines = described.out.split("\n")
    assert lines[0] == ""  # Kafka prints a blank line before the table
    header = lines[1]
    assert header.split() == ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG",
                              "CONSUMER-ID", "HOST", "CLIENT-ID"]
    # Columns are aligned: each heading starts where its values start.
    rows = [line for line in lines[2:] if line]
    for name in ("TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "CONSUMER-ID", "HOST",
                 "CLIENT-ID"):
        column = header.index(name)
        assert all(row[column - 1] == " " and row[column] != " " for row in rows), name
    mid = member_id(broker, "live")
    assert table("\n".join(rows)) == [
        ["live", "t", "0", "4", "10", "6", mid, "/127.0.0.1", "reader-1"],
        ["live", "t", "1", "-", "4", "-", mid, "/127.0.0.1", "reader-1"],
    ]


def test_describe_an_empty_group(cli: Cli, broker: Any, topic: str) -> None:
    commit(broker, "idle", {0: 7, 1: 4})
    described = cli("groups", "--describe", "--group", "idle")
    assert described.status == 0
    assert described.err == "\nConsumer group 'idle' has no active members.\n"
    assert table(described.out)[1:] == [["idle", "t", "0", "7", "10", "3", "-", "-", "-"],
                                        ["idle", "t", "1", "4", "4", "0", "-", "-", "-"]]


def test_describe_in_consumer_offset_checker_columns(cli: Cli, broker: Any, topic: str) -> None:
    commit(broker, "idle", {0: 7})
    described = cli("groups", "--describe", "--group", "idle", "--offset-checker")
    assert described.out.splitlines() == [
        "%-15s %-30s %-3s %-15s %-15s %-15s %s" % ("Group", "Topic", "Pid", "Offset", "logSize", "Lag", "Owner"),
        "%-15s %-30s %-3s %-15s %-15s %-15s %s" % ("idle", "t", "0", "7", "10", "3", "none"),
    ]


def test_describe_members(cli: Cli, broker: Any, member: Consumer) -> None:
    plain = cli("groups", "--describe", "--group", "live", "--members")
    assert table(plain.out) == [["GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS"],
                                ["live", member_id(broker, "live"), "/127.0.0.1", "reader-1", "2"]]
    verbose = cli("groups", "--describe", "--group", "live", "--members", "--verbose")
    assert table(verbose.out)[1][-1] == "t(0,1)"


def test_describe_state(cli: Cli, broker: Any, member: Consumer) -> None:
    described = cli("groups", "--describe", "--group", "live", "--state")
    assert described.status == 0 and described.err == ""
    lines = described.out.split("\n")
    assert lines[0] == "" and lines[1].split() == ["GROUP", "COORDINATOR", "(ID)", "ASSIGNMENT-STRATEGY", "STATE",
                                                   "#MEMBERS"]
    with AdminClient(broker=broker) as admin:
        coordinator = admin.find_coordinator("live")
    assert coordinator.broker_id == broker.broker_id
    where = "%s:%d  (%d)" % (coordinator.host, coordinator.port, coordinator.broker_id)
    # Kafka's layout: the first column as wide as the coordinator's (at least 25), then 25, 20, 15.
    width = max(25, len(where))
    assert lines[2] == "%-*s %-25s %-20s %-15s %s" % (width, "live", where, "range", "Stable", 1)
    commit(broker, "idle", {0: 1})
    idle = cli("groups", "--describe", "--group", "idle", "--state")
    assert idle.err == "\nConsumer group 'idle' has no active members.\n"
    assert table(idle.out)[1][:1] + table(idle.out)[1][-2:] == ["idle", "Empty", "0"]


def test_describe_a_missing_group(cli: Cli) -> None:
    assert cli("groups", "--describe", "--group", "ghost") == (
        1, "", "Error: Consumer group 'ghost' does not exist.\n")


def test_describe_all_groups(cli: Cli, broker: Any, topic: str) -> None:
    commit(broker, "one", {0: 1})
    commit(broker, "two", {1: 2})
    described = cli("groups", "--describe", "--all-groups")
    assert [row[:4] for row in table(described.out) if row[0] != "GROUP"] == [["one", "t", "0", "1"],
                                                                              ["two", "t", "1", "2"]]


def test_reset_is_a_dry_run_unless_executed(cli: Cli, broker: Any, topic: str) -> None:
    commit(broker, "g", {0: 7, 1: 3})
    plan = cli("groups", "--reset-offsets", "--group", "g", "--topic", "t", "--to-earliest")
    assert plan.status == 0 and "--execute option is missing" in plan.err
    assert table(plan.out) == [["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"], ["g", "t", "0", "0"],
                               ["g", "t", "1", "0"]]
    assert committed(broker, "g") == {0: 7, 1: 3}
    quiet = cli("groups", "--reset-offsets", "--group", "g", "--topic", "t", "--to-earliest", "--dry-run")
    assert quiet.err == "" and quiet.out == plan.out
    done = cli("groups", "--reset-offsets", "--group", "g", "--topic", "t", "--to-earliest", "--execute")
    assert done.status == 0 and done.out == plan.out
    assert committed(broker, "g") == {0: 0, 1: 0}


@pytest.mark.parametrize("spec, expected", [
    (["--to-latest"], {0: 10, 1: 4}),
    (["--to-offset", "5"], {0: 5, 1: 4}),  # partition 1 ends at 4: clamped
    (["--shift-by", "-5"], {0: 2, 1: 0}),  # 7-5 and 3-5 clamped to the log start
    (["--shift-by", "2"], {0: 9, 1: 4}),
    (["--to-current"], {0: 7, 1: 3}),
])
def test_reset_specs(cli: Cli, broker: Any, topic: str, spec: List[str], expected: Dict[int, int]) -> None:
    commit(broker, "g", {0: 7, 1: 3})
    done = cli("groups", "--reset-offsets", "--group", "g", "--topic", "t", *spec, "--execute")
    assert done.status == 0
    assert committed(broker, "g") == expected


def test_reset_clamping_is_reported(cli: Cli, broker: Any, topic: str) -> None:
    commit(broker, "g", {1: 3})
    done = cli("groups", "--reset-offsets", "--group", "g", "--topic", "t:1", "--to-offset", "99", "--execute")
    assert done.err == ("New offset (99) is higher than latest offset for topic partition t-1. "
                        "Value will be set to 4\n")


def test_reset_to_datetime(cli: Cli, broker: Any, topic: str) -> None:
    when = datetime.datetime.fromtimestamp((T0 + 3500) / 1000, tz=datetime.timezone.utc)
    text = when.strftime("%Y-%m-%dT%H:%M:%S.") + "%03dZ" % (when.microsecond // 1000)
    done = cli("groups", "--reset-offsets", "--group", "g", "--topic", "t:0", "--to-datetime", text, "--execute")
    assert done.status == 0
    assert committed(broker, "g") == {0: 4}  # the first record at or after T0+3.5 s
    local = datetime.datetime.fromtimestamp((T0 + 20000) / 1000).strftime("%Y-%m-%dT%H:%M:%S.000")
    later = cli("groups", "--reset-offsets", "--group", "g", "--topic", "t:0", "--to-datetime", local, "--execute")
    assert later.status == 0 and committed(broker, "g") == {0: 10}  # nothing that late: the log end
    bad = cli("groups", "--reset-offsets", "--group", "g", "--topic", "t", "--to-datetime", "yesterday")
    assert bad.status == 1 and "is not YYYY-MM-DDTHH:mm:SS.sss" in bad.err


def test_reset_all_topics_covers_what_the_group_committed(cli: Cli, broker: Any, topic: str) -> None:
    commit(broker, "g", {1: 3})
    done = cli("groups", "--reset-offsets", "--group", "g", "--all-topics", "--to-earliest", "--execute")
    assert table(done.out)[1:] == [["g", "t", "1", "0"]]
    assert committed(broker, "g") == {1: 0}


def test_reset_refuses_an_active_group(cli: Cli, broker: Any, member: Consumer) -> None:
    refused = cli("groups", "--reset-offsets", "--group", "live", "--topic", "t", "--to-earliest", "--execute")
    assert refused.status == 1
    assert ("Assignments can only be reset if the group 'live' is inactive, but the current state is Stable."
            in refused.err)
    assert committed(broker, "live") == {0: 4}


def test_reset_needs_a_scope_and_a_spec(cli: Cli, topic: str) -> None:
    no_scope = cli("groups", "--reset-offsets", "--group", "g", "--to-earliest")
    assert no_scope.status == 1 and "--topic or --all-topics" in no_scope.err
    no_spec = cli("groups", "--reset-offsets", "--group", "g", "--topic", "t")
    assert no_spec.status == 1 and "--to-earliest" in no_spec.err
    bad_partition = cli("groups", "--reset-offsets", "--group", "g", "--topic", "t:7", "--to-earliest")
    assert bad_partition.status == 1 and "has no partition 7" in bad_partition.err
    missing = cli("groups", "--reset-offsets", "--group", "g", "--topic", "ghost", "--to-earliest")
    assert missing.status == 1 and "Topic 'ghost' does not exist" in missing.err
    no_shift_base = cli("groups", "--reset-offsets", "--group", "g", "--topic", "t", "--shift-by", "1")
    assert no_shift_base.status == 1 and "has no committed offset" in no_shift_base.err


def test_delete(cli: Cli, broker: Any, member: Consumer) -> None:
    commit(broker, "idle", {0: 1})
    deleted = cli("groups", "--delete", "--group", "idle")
    assert deleted == (0, "Deletion of requested consumer groups ('idle') was successful.\n", "")
    assert cli("groups", "--list").out == "live\n"
    refused = cli("groups", "--delete", "--group", "live", "--group", "ghost")
    assert refused.status == 1
    assert refused.err.splitlines() == [
        "Error: Deletion of some consumer groups failed:",
        "* Group 'live' could not be deleted due to: NON_EMPTY_GROUP: group 'live' still has members; it can be "
        "deleted once they have left",
        "* Group 'ghost' could not be deleted due to: GROUP_ID_NOT_FOUND: group 'ghost' does not exist",
    ]


def test_delete_offsets(cli: Cli, broker: Any, member: Consumer) -> None:
    commit(broker, "idle", {0: 1, 1: 2})
    deleted = cli("groups", "--delete-offsets", "--group", "idle", "--topic", "t:0")
    assert deleted.status == 0 and deleted.err == ""
    assert deleted.out.splitlines() == [
        "Request succeed for deleting offsets with topic t:0 group idle", "",
        "TOPIC                          PARTITION       STATUS",
        "t                              0               Successful",
    ]
    assert committed(broker, "idle") == {1: 2}
    # A live group keeps the offsets of the topics it subscribes to.
    refused = cli("groups", "--delete-offsets", "--group", "live", "--topic", "t", "--topic", "nope")
    assert refused.status == 1
    assert refused.err == "Error: Encounter some partition level error, see the follow-up details:\n"
    assert refused.out.splitlines()[2:] == [
        "nope                           Not Provided    Error: unknown topic or partition",
        "t                              0               Error: group subscribed to topic",
        "t                              1               Error: group subscribed to topic",
    ]
    assert committed(broker, "live") == {0: 4}
    ghost = cli("groups", "--delete-offsets", "--group", "ghost", "--topic", "t")
    assert ghost == (1, "", "Error: 'ghost' does not exist.\n")
    assert cli("groups", "--delete-offsets", "--group", "idle").status == 1  # --topic is required


def test_group_is_required(cli: Cli) -> None:
    missing = cli("groups", "--describe")
    assert missing.status == 1 and "give --group" in missing.err


# -- over TCP, as a user runs it --------------------------------------------------------------------


def test_describe_a_kafka_python_group_then_reset_it(pylogq_broker: Any, pylogq_bootstrap: str) -> None:
    import kafka
    from kafka.structs import OffsetAndMetadata as KafkaOffset
    from kafka.structs import TopicPartition as KafkaTopicPartition

    pylogq_broker.create_topic("t", 1)
    pylogq_broker.produce("t", 0, records.build_batch([b"v%d" % i for i in range(6)]))
    consumer = kafka.KafkaConsumer(bootstrap_servers=pylogq_bootstrap, group_id="kp", client_id="kp-reader",
                                   enable_auto_commit=False, auto_offset_reset="earliest")
    try:
        # Join knowing the topic's partitions, with polls longer than a join: kafka-python
        # 3.0.12 loses the assignment of a rejoin (one that new metadata starts) whose
        # SyncGroup answer lands after poll() timed out, and never asks again
        # (tests/server/test_clients_kafka_python._subscribe).
        assert consumer.partitions_for_topic("t") == {0}
        consumer.subscribe(["t"])
        deadline = time.monotonic() + DEADLINE_S
        while not consumer.assignment() and time.monotonic() < deadline:
            consumer.poll(timeout_ms=1000, max_records=1)
        assert consumer.assignment() == {KafkaTopicPartition("t", 0)}
        consumer.commit({KafkaTopicPartition("t", 0): KafkaOffset(2, "", -1)})
        described = run_process(pylogq_bootstrap, "groups", "--describe", "--group", "kp")
        (row,) = table(described.out)[1:]
        assert row[:6] == ["kp", "t", "0", "2", "6", "4"] and row[-2:] == ["/127.0.0.1", "kp-reader"]
        state = run_process(pylogq_bootstrap, "groups", "--describe", "--group", "kp", "--state")
        assert table(state.out)[1] == ["kp", pylogq_bootstrap, "(%d)" % pylogq_broker.broker_id, "range", "Stable",
                                       "1"]
        refused = run_process(pylogq_bootstrap, "groups", "--reset-offsets", "--group", "kp", "--topic", "t",
                              "--to-latest", "--execute")
        assert refused.status == 1 and "inactive" in refused.err
    finally:
        consumer.close()
    reset = run_process(pylogq_bootstrap, "groups", "--reset-offsets", "--group", "kp", "--topic", "t",
                        "--to-latest", "--execute")
    assert reset.status == 0 and table(reset.out)[1:] == [["kp", "t", "0", "6"]]
    assert run_process(pylogq_bootstrap, "groups", "--list") == (0, "kp\n", "")
    assert run_process(pylogq_bootstrap, "groups", "--delete", "--group", "kp").status == 0
    assert run_process(pylogq_bootstrap, "groups", "--list") == (0, "", "")


def test_delete_offsets_over_tcp(pylogq_broker: Any, pylogq_bootstrap: str) -> None:
    pylogq_broker.create_topic("t", 2)
    commit(pylogq_broker, "g", {0: 1, 1: 1})
    deleted = run_process(pylogq_bootstrap, "groups", "--delete-offsets", "--group", "g", "--topic", "t:1,5")
    assert deleted.status == 1 and "partition level error" in deleted.err
    assert deleted.out.splitlines()[-2:] == [
        "t                              1               Successful",
        "t                              5               Error: unknown topic or partition",
    ]
    assert committed(pylogq_broker, "g") == {0: 1}


def test_describe_after_the_topic_was_deleted(cli: Cli, broker: Any, topic: str) -> None:
    cli("topics", "--create", "--topic", "other")
    commit(broker, "g", {0: 7})
    with Consumer(broker=broker, group_id="g", enable_auto_commit=False) as consumer:
        consumer.assign([TopicPartition("other", 0)])
        consumer.commit({TopicPartition("other", 0): 0})
    cli("topics", "--delete", "--topic", "t")
    described = cli("groups", "--describe", "--group", "g")
    assert described.status == 0
    rows = table(described.out)[1:]
    assert rows == [["g", "other", "0", "0", "0", "0", "-", "-", "-"],
                    ["g", "t", "0", "7", "-", "-", "-", "-", "-"]]  # no log end offset to compare with
