"""``pylogq reassign-partitions`` against a served three-broker cluster, as Kafka's tool runs.

--generate prints the current and a proposed assignment in Kafka's JSON and changes
nothing; --execute starts the moves (setting the replication throttles with --throttle)
and --verify reports them until complete, then removes the throttles; a move held back
(its new replica cut off from the leader) is listed, refuses a second --execute without
--additional, and is cancelled. Bad JSON and unknown partitions or brokers are failures
(``Error: ...``, exit status 1); missing or misplaced options are usage errors (exit 2).
"""

from __future__ import annotations

import io
import itertools
import json
import time
import uuid
from pathlib import Path
from typing import Any, Dict, List, Tuple

import pytest

import pylogq
from pylogq.cli.clients import Clients
from pylogq.cli.main import run
from pylogq.client.admin import AdminClient, ConfigResource, ConfigResourceType, TopicPartition
from pylogq.testing import CLUSTER_TEST_DEFAULTS, TEST_DEFAULTS

from .._cluster_ops import await_replicas, replicas_of, roles, topic_with_records

from .conftest import Cli, Result, run_process

TIMEOUT_S = 30.0
RECORDS = 200
THROTTLE_KEYS = ("leader.replication.throttled.rate", "follower.replication.throttled.rate",
                 "replica.alter.log.dirs.io.max.bytes.per.second")
TOPIC_THROTTLE_KEYS = ("leader.replication.throttled.replicas", "follower.replication.throttled.replicas")
ROLLBACK = "Save this to use as the --reassignment-json-file option during rollback\n"
VERIFY_WARNING = ("Warning: You must run --verify periodically, until the reassignment completes, to ensure the "
                  "throttle is removed.\n")


def _cli(cluster: pylogq.Cluster, *argv: str) -> Result:
    """``pylogq reassign-partitions ARGV --bootstrap-server ...`` in this process, streams captured."""
    out, err = io.StringIO(), io.StringIO()
    status = run(["reassign-partitions", *argv], clients=Clients(bootstrap_servers=cluster.bootstrap_servers),
                 stdout=out, stderr=err)
    return Result(status, out.getvalue(), err.getvalue())




def _file(tmp_path: Path, content: Any) -> str:
    """A JSON file of ``content`` (text as it is)."""
    path = tmp_path / ("%s.json" % uuid.uuid4().hex[:8])
    path.write_text(content if isinstance(content, str) else json.dumps(content))
    return str(path)


def _plan(moves: Dict[Tuple[str, int], List[int]]) -> Dict[str, Any]:
    return {"version": 1, "partitions": [{"topic": t, "partition": p, "replicas": r} for (t, p), r in moves.items()]}


def _kafka_json(assignment: Dict[Tuple[str, int], List[int]]) -> str:
    """The reassignment JSON as Kafka's tool prints it, written out by hand."""
    return '{"version":1,"partitions":[%s]}' % ",".join(
        '{"topic":"%s","partition":%d,"replicas":[%s],"log_dirs":[%s]}' % (
            t, p, ",".join(map(str, r)), ",".join(['"any"'] * len(r))) for (t, p), r in sorted(assignment.items()))




def _throttles(cluster: pylogq.Cluster, topic: str) -> Tuple[Dict[str, str], Dict[int, Dict[str, str]]]:
    """The topic's throttled-replica configs, and each broker's dynamic throttle rates (as described)."""
    with AdminClient(bootstrap_servers=cluster.bootstrap_servers) as admin:
        described = admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, topic)])["topic"][topic]
        on_topic = {k: v["value"] for k, v in described.items() if k in TOPIC_THROTTLE_KEYS}
        on_brokers: Dict[int, Dict[str, str]] = {}
        for broker in sorted(x.broker_id for x in cluster.brokers):
            entries = admin.describe_configs([ConfigResource(ConfigResourceType.BROKER, str(broker))])
            on_brokers[broker] = {k: v["value"] for k, v in entries["broker"][str(broker)].items()
                                  if k in THROTTLE_KEYS and v["config_source"] == "DYNAMIC_BROKER_CONFIG"}
    return on_topic, on_brokers


# -- --generate ---------------------------------------------------------------------------------------


def test_generate_prints_the_current_and_a_proposed_assignment(pylogq_cluster: pylogq.Cluster,
                                                                tmp_path: Path) -> None:
    a, b, c = roles(pylogq_cluster)
    single = topic_with_records(pylogq_cluster, {0: [a], 1: [b]}, records=0)
    to_move = _file(tmp_path, {"version": 1, "topics": [{"topic": single}]})
    done = _cli(pylogq_cluster, "--generate", "--topics-to-move-json-file", to_move, "--broker-list", str(c))
    assert done == Result(0, "Current partition replica assignment\n%s\n\nProposed partition reassignment "
                             "configuration\n%s\n" % (_kafka_json({(single, 0): [a], (single, 1): [b]}),
                                                      _kafka_json({(single, 0): [c], (single, 1): [c]})), "")

    # Two replicas each onto two brokers: both on each partition, the preferred leaders alternating.
    pair = topic_with_records(pylogq_cluster, {0: [a, b], 1: [a, b], 2: [b, c], 3: [c, a]}, records=0)
    both = _file(tmp_path, {"topics": [{"topic": pair}, {"topic": single}]})  # version 1 when left out
    done = _cli(pylogq_cluster, "--generate", "--topics-to-move-json-file", both, "--broker-list", "%d,%d" % (b, c))
    assert done.status == 0 and done.err == ""
    lines = done.out.split("\n")
    assert lines[0] == "Current partition replica assignment" and lines[3] == "Proposed partition reassignment " \
                                                                              "configuration" and lines[5:] == [""]
    current, proposed = json.loads(lines[1]), json.loads(lines[4])
    assert lines[2] == "" and current == json.loads(_kafka_json({
        (pair, 0): [a, b], (pair, 1): [a, b], (pair, 2): [b, c], (pair, 3): [c, a], (single, 0): [a], (single, 1): [b]}))
    assert [(p["topic"], p["partition"]) for p in proposed["partitions"]] == sorted(
        [(pair, 0), (pair, 1), (pair, 2), (pair, 3), (single, 0), (single, 1)])
    of_pair = [p["replicas"] for p in proposed["partitions"] if p["topic"] == pair]
    assert all(sorted(replicas) == sorted([b, c]) for replicas in of_pair)
    assert [replicas[0] for replicas in of_pair].count(b) == 2
    assert all(p["replicas"] in ([b], [c]) for p in proposed["partitions"] if p["topic"] == single)
    assert all(p["log_dirs"] == ["any"] * len(p["replicas"]) for p in proposed["partitions"])
    # Nothing was moved.
    assert replicas_of(pylogq_cluster, pair) == [[a, b], [a, b], [b, c], [c, a]]
    assert _cli(pylogq_cluster, "--list").out == "No partition reassignments found.\n"


def test_generate_refuses_what_kafkas_tool_refuses(pylogq_cluster: pylogq.Cluster, tmp_path: Path) -> None:
    a, b, c = roles(pylogq_cluster)
    topic = topic_with_records(pylogq_cluster, {0: [a, b]}, records=0)
    good = _file(tmp_path, {"version": 1, "topics": [{"topic": topic}]})

    def refused(topics_file: str, brokers: str) -> str:
        done = _cli(pylogq_cluster, "--generate", "--topics-to-move-json-file", topics_file, "--broker-list", brokers)
        assert done.status == 1 and done.out == "" and done.err.count("\n") == 1, done
        assert done.err.startswith("Error: ")
        return done.err[len("Error: "):-1]

    assert refused(_file(tmp_path, {"topics": [{"topic": "ghost"}]}), "%d,%d" % (a, b)) == \
        "UNKNOWN_TOPIC_OR_PARTITION: Topic ghost not found."
    assert refused(good, "%d,%d,%d" % (a, b, a)) == "Broker list contains duplicate entries: [%d]" % a
    assert refused(_file(tmp_path, {"topics": [{"topic": topic}, {"topic": topic}]}), "%d" % a) == \
        "List of topics to reassign contains duplicate entries: [%s]" % topic
    assert refused(good, str(c)).startswith("INVALID_REPLICATION_FACTOR: replication factor: 2 larger than "
                                            "available brokers: 1")
    assert refused(good, "%d,99" % c).startswith("INVALID_REPLICATION_FACTOR")  # 99 is not in the cluster
    assert refused(_file(tmp_path, "{not json"), str(a)).startswith("The input string is not a valid JSON: ")
    assert refused(_file(tmp_path, {"version": 2, "topics": []}), str(a)) == "Not supported version field value 2"
    assert refused(_file(tmp_path, {"topics": [{"name": topic}]}), str(a)).endswith(
        ": topics[0]: No such field exists: `topic`")
    assert refused(_file(tmp_path, [topic]), str(a)).endswith(": expected a JSON object, not [\"%s\"]" % topic)
    assert refused(str(tmp_path / "missing.json"), str(a)) == "cannot read %s: No such file or directory" % (
        tmp_path / "missing.json")


def test_generate_is_rack_aware_unless_told_not_to_be(tmp_path: Path) -> None:
    racks = {0: "east", 1: "east", 2: "west", 3: None}
    config = {b: ({"broker.rack": r} if r else {}) for b, r in racks.items()}
    with pylogq.Cluster(4, str(tmp_path / "racks"), broker_config=config,
                        **{**CLUSTER_TEST_DEFAULTS, **TEST_DEFAULTS}) as cluster:
        cluster.serve()
        topic = topic_with_records(cluster, {p: [3, 2] for p in range(6)}, records=0)
        to_move = _file(tmp_path, {"topics": [{"topic": topic}]})
        done = _cli(cluster, "--generate", "--topics-to-move-json-file", to_move, "--broker-list", "0,1,2")
        assert done.status == 0, done
        proposed = json.loads(done.out.split("\n")[4])["partitions"]
        assert all({racks[r] for r in p["replicas"]} == {"east", "west"} for p in proposed)
        # Broker 3 has no rack: with it, Kafka's tool refuses, or places without racks when told to.
        done = _cli(cluster, "--generate", "--topics-to-move-json-file", to_move, "--broker-list", "1,2,3")
        assert done == Result(1, "", "Error: Not all brokers have rack information. Add --disable-rack-aware in "
                                     "command line to make replica assignment without rack information.\n")
        done = _cli(cluster, "--generate", "--topics-to-move-json-file", to_move, "--broker-list", "1,2,3",
                    "--disable-rack-aware")
        assert done.status == 0, done
        proposed = json.loads(done.out.split("\n")[4])["partitions"]
        assert all(len(set(p["replicas"])) == 2 and set(p["replicas"]) <= {1, 2, 3} for p in proposed)


# -- --execute and --verify ---------------------------------------------------------------------------


def test_execute_then_verify_until_complete_with_throttles(pylogq_cluster: pylogq.Cluster, tmp_path: Path) -> None:
    a, b, c = roles(pylogq_cluster)
    topic = topic_with_records(pylogq_cluster, {0: [a, b], 1: [b, c]}, RECORDS)
    plan = _file(tmp_path, _plan({(topic, 0): [b, c], (topic, 1): [c, a]}))
    done = _cli(pylogq_cluster, "--execute", "--reassignment-json-file", plan, "--throttle", "1000000")
    assert done == Result(0, "Current partition replica assignment\n\n%s\n\n%s%sThe inter-broker throttle limit was "
                             "set to 1000000 B/s\nSuccessfully started partition reassignments for %s-0,%s-1\n" % (
                                 _kafka_json({(topic, 0): [a, b], (topic, 1): [b, c]}), ROLLBACK, VERIFY_WARNING,
                                 topic, topic), "")
    # Kafka's throttles: the replicas moved from lead throttled, those added follow throttled,
    # and every broker moved from or to has both rates.
    on_topic, on_brokers = _throttles(pylogq_cluster, topic)
    assert on_topic == {"leader.replication.throttled.replicas": ",".join(sorted(
                            ["0:%d" % a, "0:%d" % b, "1:%d" % b, "1:%d" % c])),
                        "follower.replication.throttled.replicas": ",".join(sorted(["0:%d" % c, "1:%d" % a]))}
    rates = {"leader.replication.throttled.rate": "1000000", "follower.replication.throttled.rate": "1000000"}
    assert on_brokers == {a: rates, b: rates, c: rates}

    deadline = time.monotonic() + TIMEOUT_S
    while True:
        done = _cli(pylogq_cluster, "--verify", "--reassignment-json-file", plan)
        assert done.status == 0 and done.err == "", done
        if "still in progress" in done.out:
            assert "Clearing" not in done.out  # throttles stay while a move is under way
        elif "There is no active reassignment" not in done.out:  # (until Metadata shows the new replicas)
            break
        assert time.monotonic() < deadline, "the reassignment did not complete: %s" % done.out
        time.sleep(0.1)
    assert done.out == ("Status of partition reassignment:\nReassignment of partition %s-0 is completed.\n"
                        "Reassignment of partition %s-1 is completed.\n\nClearing broker-level throttles on brokers "
                        "%s\nClearing topic-level throttles on topic %s\n" % (
                            topic, topic, ",".join(map(str, sorted([a, b, c]))), topic))
    assert _throttles(pylogq_cluster, topic) == ({}, {a: {}, b: {}, c: {}})
    await_replicas(pylogq_cluster, topic, [[b, c], [c, a]])
    assert _cli(pylogq_cluster, "--list") == Result(0, "No partition reassignments found.\n", "")
    with AdminClient(bootstrap_servers=pylogq_cluster.bootstrap_servers) as admin:
        sizes = {d["broker"]: {(t["name"], p["partition_index"]): p["partition_size"]
                               for ld in d["log_dirs"] for t in ld["topics"] for p in t["partitions"]}
                 for d in admin.describe_log_dirs([topic])}
    assert sizes[c][(topic, 0)] == sizes[b][(topic, 0)] > 0  # the records moved with the partition
    assert sizes[a][(topic, 1)] == sizes[c][(topic, 1)] > 0
    # --verify again: still complete; --preserve-throttles leaves the throttles alone.
    done = _cli(pylogq_cluster, "--verify", "--reassignment-json-file", plan, "--preserve-throttles")
    assert done.out == ("Status of partition reassignment:\nReassignment of partition %s-0 is completed.\n"
                        "Reassignment of partition %s-1 is completed.\n\n" % (topic, topic))


def test_a_move_under_way_is_listed_throttled_again_and_cancelled(pylogq_cluster: pylogq.Cluster,
                                                                  tmp_path: Path) -> None:
    a, b, c = roles(pylogq_cluster)
    topic = topic_with_records(pylogq_cluster, {0: [a, b]}, RECORDS)
    plan = _file(tmp_path, _plan({(topic, 0): [a, c]}))
    pylogq_cluster.cut(a, c)  # c, added, cannot fetch from the leader a: the move stays under way
    try:
        done = _cli(pylogq_cluster, "--execute", "--reassignment-json-file", plan)
        assert done == Result(0, "Current partition replica assignment\n\n%s\n\n%sSuccessfully started partition "
                                 "reassignment for %s-0\n" % (_kafka_json({(topic, 0): [a, b]}), ROLLBACK, topic), "")
        assert _cli(pylogq_cluster, "--list") == Result(
            0, "Current partition reassignments:\n%s-0: replicas: %d,%d,%d. adding: %d. removing: %d.\n"
               % (topic, a, c, b, c, b), "")
        assert _cli(pylogq_cluster, "--verify", "--reassignment-json-file", plan) == Result(
            0, "Status of partition reassignment:\nReassignment of partition %s-0 is still in progress.\n\n" % topic, "")
        assert _cli(pylogq_cluster, "--execute", "--reassignment-json-file", plan) == Result(
            1, "", "Error: Cannot execute because there is an existing partition assignment.  Use --additional to "
                   "override this and create a new partition assignment in addition to the existing one. The "
                   "--additional flag can also be used to change the throttle by resubmitting the current "
                   "reassignment.\n")
        # --additional resubmits it, changing the throttle: the move's sources are its original replicas.
        await_replicas(pylogq_cluster, topic, [[a, c, b]])  # what it prints as the current assignment
        done = _cli(pylogq_cluster, "--execute", "--additional", "--reassignment-json-file", plan, "--throttle", "700",
                    "--replica-alter-log-dirs-throttle", "900")
        assert done.status == 0 and done.out.endswith(
            "%s%s%sThe inter-broker throttle limit was set to 700 B/s\nThe replica-alter-dir throttle limit was set to "
            "900 B/s\nSuccessfully started partition reassignment for %s-0\n" % (
                _kafka_json({(topic, 0): [a, c, b]}), "\n\n", ROLLBACK + VERIFY_WARNING, topic)), done
        rates = {"leader.replication.throttled.rate": "700", "follower.replication.throttled.rate": "700"}
        # No move between log directories: the log-dir throttle is set on no broker, as Kafka's tool sets it.
        assert _throttles(pylogq_cluster, topic) == (
            {"leader.replication.throttled.replicas": ",".join(sorted(["0:%d" % a, "0:%d" % b])),
             "follower.replication.throttled.replicas": "0:%d" % c}, {a: rates, b: rates, c: rates})
        done = _cli(pylogq_cluster, "--cancel", "--reassignment-json-file", plan)
        assert done == Result(0, "Successfully cancelled partition reassignment for: %s-0\nNone of the specified "
                                 "partition moves are active.\nClearing broker-level throttles on brokers %s\n"
                                 "Clearing topic-level throttles on topic %s\n"
                                 % (topic, ",".join(map(str, sorted([a, b, c]))), topic), "")
        assert _throttles(pylogq_cluster, topic) == ({}, {a: {}, b: {}, c: {}})
        assert _cli(pylogq_cluster, "--list").out == "No partition reassignments found.\n"
    finally:
        pylogq_cluster.heal()
    # Back on its original replicas, so the plan is not what the partition has.
    await_replicas(pylogq_cluster, topic, [[a, b]])
    assert _cli(pylogq_cluster, "--verify", "--reassignment-json-file", plan, "--preserve-throttles").out == (
        "Status of partition reassignment:\nThere is no active reassignment of partition %s-0, but replica set is "
        "%d,%d rather than %d,%d.\n\n" % (topic, a, b, a, c))
    assert _cli(pylogq_cluster, "--cancel", "--reassignment-json-file", plan, "--preserve-throttles") == Result(
        0, "None of the specified partition reassignments are active.\nNone of the specified partition moves are "
           "active.\n", "")


def test_execute_refuses_what_kafkas_tool_refuses(pylogq_cluster: pylogq.Cluster, tmp_path: Path) -> None:
    a, b, c = roles(pylogq_cluster)
    topic = topic_with_records(pylogq_cluster, {0: [a, b], 1: [a, b]}, records=0)

    def refused(content: Any) -> str:
        done = _cli(pylogq_cluster, "--execute", "--reassignment-json-file", _file(tmp_path, content))
        assert done.status == 1 and done.out == "" and done.err.count("\n") == 1, done
        assert done.err.startswith("Error: ")
        return done.err[len("Error: "):-1]

    assert refused(_plan({(topic, 0): [a, 99]})) == "Unknown broker id 99"
    assert refused(_plan({(topic, 0): [a, c], (topic, 5): [a, c]})) == \
        "UNKNOWN_TOPIC_OR_PARTITION: Unable to find partition: %s-5" % topic
    assert refused(_plan({("ghost", 0): [a]})) == "UNKNOWN_TOPIC_OR_PARTITION: Topic ghost not found."
    assert refused({"version": 1, "partitions": []}) == "Partition reassignment list cannot be empty"
    assert refused({"version": 1}) == "Partition reassignment list cannot be empty"
    assert refused(_plan({(topic, 0): []})) == "Partition replica list cannot be empty"
    twice = {"partitions": [{"topic": topic, "partition": 0, "replicas": [a]}] * 2}
    assert refused(twice) == "Partition reassignment contains duplicate topic partitions: %s-0" % topic
    assert refused(_plan({(topic, 0): [a, c, a], (topic, 1): [b, b]})) == (
        "Partition replica lists may not contain duplicate entries: %s-0 contains multiple entries for %d. "
        "%s-1 contains multiple entries for %d" % (topic, a, topic, b))
    one_dir = {"partitions": [{"topic": topic, "partition": 0, "replicas": [a, c], "log_dirs": ["any"]}]}
    assert refused(one_dir) == ("Size of replicas list [%d, %d] is different from size of log dirs list [any] for "
                                "partition %s-0" % (a, c, topic))
    assert refused({"partitions": [{"topic": topic, "partition": "0", "replicas": [a]}]}).endswith(
        ': partitions[0]: `partition` must be an integer, not "0"')
    assert refused({"partitions": [{"topic": topic, "partition": 0}]}).endswith(
        ": partitions[0]: No such field exists: `replicas`")
    assert refused("[}").startswith("The input string is not a valid JSON: ")
    # Nothing was started by any of them.
    assert _cli(pylogq_cluster, "--list").out == "No partition reassignments found.\n"
    assert replicas_of(pylogq_cluster, topic) == [[a, b], [a, b]]
    # A log directory the broker does not have fails the command once the reassignment has
    # started, as Kafka's tool fails it (the moves between directories come after).
    a_dir = {"partitions": [{"topic": topic, "partition": 0, "replicas": [a, c], "log_dirs": ["any", "/no/such"]}]}
    done = _cli(pylogq_cluster, "--execute", "--reassignment-json-file", _file(tmp_path, a_dir))
    assert done.status == 1 and done.out.endswith("Successfully started partition reassignment for %s-0\n" % topic)
    assert done.err.startswith("Error: Failed to alter dir for %s-0-%d: LOG_DIR_NOT_FOUND: " % (topic, c)), done


# -- the options ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("argv,message", [
    ([], "Command must include exactly one action: --generate, --execute, --verify, --cancel, --list"),
    (["--list", "--verify"], "Command must include exactly one action: --generate, --execute, --verify, --cancel, "
                             "--list"),
    (["--execute"], 'Missing required argument "[reassignment-json-file]"'),
    (["--verify"], 'Missing required argument "[reassignment-json-file]"'),
    (["--cancel"], 'Missing required argument "[reassignment-json-file]"'),
    (["--generate", "--broker-list", "1"], 'Missing required argument "[topics-to-move-json-file]"'),
    (["--generate", "--topics-to-move-json-file", "t.json"], 'Missing required argument "[broker-list]"'),
    (["--verify", "--reassignment-json-file", "r.json", "--throttle", "10"],
     'Option "[throttle]" can\'t be used with action "[verify]"'),
    (["--list", "--reassignment-json-file", "r.json"],
     'Option "[reassignment-json-file]" can\'t be used with action "[list]"'),
    (["--execute", "--reassignment-json-file", "r.json", "--preserve-throttles"],
     'Option "[preserve-throttles]" can\'t be used with action "[execute]"'),
    (["--cancel", "--reassignment-json-file", "r.json", "--additional"],
     'Option "[additional]" can\'t be used with action "[cancel]"'),
    (["--generate", "--topics-to-move-json-file", "t.json", "--broker-list", "1", "--timeout", "5"],
     'Option "[timeout]" can\'t be used with action "[generate]"'),
    (["--generate", "--topics-to-move-json-file", "t.json", "--broker-list", "1,x"],
     "argument --broker-list: '1,x' is not a comma-separated list of broker ids (\"0,1,2\")"),
    (["--execute", "--reassignment-json-file", "r.json", "--throttle", "fast"],
     "argument --throttle: 'fast' is not an integer"),
    (["--list", "--bogus"], "unrecognized arguments: --bogus"),
])
def test_usage_errors_print_the_usage(argv: List[str], message: str, capsys: Any) -> None:
    with pytest.raises(SystemExit) as exited:
        run(["reassign-partitions", *argv])
    assert exited.value.code == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith("usage: pylogq reassign-partitions ")
    assert captured.err.endswith("pylogq reassign-partitions: error: %s\n" % message)


def test_bootstrap_server_keeps_its_name_and_broker_list_is_the_target_brokers(capsys: Any) -> None:
    with pytest.raises(SystemExit):
        run(["reassign-partitions", "--help"])
    usage = capsys.readouterr().out
    assert "--bootstrap-server HOST:PORT" in usage and "--broker-list 0,1,2" in usage


# -- other ways in -----------------------------------------------------------------------------------------


def test_over_tcp_as_a_user_runs_it(pylogq_cluster: pylogq.Cluster, tmp_path: Path) -> None:
    a, b, c = roles(pylogq_cluster)
    topic = topic_with_records(pylogq_cluster, {0: [a]}, records=0)
    to_move = _file(tmp_path, {"version": 1, "topics": [{"topic": topic}]})
    done = run_process(pylogq_cluster.bootstrap_servers, "reassign-partitions", "--generate",
                       "--topics-to-move-json-file", to_move, "--broker-list", str(b))
    assert done == Result(0, "Current partition replica assignment\n%s\n\nProposed partition reassignment "
                             "configuration\n%s\n" % (_kafka_json({(topic, 0): [a]}), _kafka_json({(topic, 0): [b]})),
                          "")
    assert run_process(pylogq_cluster.bootstrap_servers, "reassign-partitions", "--list") == Result(
        0, "No partition reassignments found.\n", "")


def test_a_single_broker_in_this_process(cli: Cli, tmp_path: Path) -> None:
    assert cli("topics", "--create", "--topic", "t", "--partitions", "2").status == 0
    plan = _file(tmp_path, _plan({("t", 0): [0], ("t", 1): [0]}))
    done = cli("reassign-partitions", "--execute", "--reassignment-json-file", plan)
    assert done == Result(0, "Current partition replica assignment\n\n%s\n\n%sSuccessfully started partition "
                             "reassignments for t-0,t-1\n" % (_kafka_json({("t", 0): [0], ("t", 1): [0]}), ROLLBACK), "")
    assert cli("reassign-partitions", "--verify", "--reassignment-json-file", plan) == Result(
        0, "Status of partition reassignment:\nReassignment of partition t-0 is completed.\nReassignment of partition "
           "t-1 is completed.\n\nClearing broker-level throttles on broker 0\nClearing topic-level throttles on "
           "topic t\n", "")
    assert cli("reassign-partitions", "--list") == Result(0, "No partition reassignments found.\n", "")
    assert cli("reassign-partitions", "--execute", "--reassignment-json-file", _file(tmp_path, _plan({("t", 0): [1]}))) \
        == Result(1, "", "Error: Unknown broker id 1\n")


# -- moves between log directories ----------------------------------------------------------------------


def test_log_dirs_move_replicas_between_a_brokers_directories(tmp_path: Path) -> None:
    """Brokers with two log directories each: a plan whose ``log_dirs`` names directories moves
    an existing replica to its broker's other directory and creates an added one in the
    directory named (asked again until the reassignment has created it), with the log-dir
    throttle set on those brokers; --verify reports each move and, once all are done, removes
    the throttles; every record is still there."""
    dirs = {b: [str(tmp_path / "data" / ("broker-%d" % b)), str(tmp_path / ("second-%d" % b))] for b in range(3)}
    config = dict(CLUSTER_TEST_DEFAULTS, **TEST_DEFAULTS)
    with pylogq.Cluster(3, str(tmp_path / "data"), broker_config={b: {"log.dirs": ",".join(d)}
                                                                  for b, d in dirs.items()}, **config) as cluster:
        cluster.serve()
        topic = topic_with_records(cluster, {0: [0, 1]}, records=RECORDS)
        with AdminClient(bootstrap_servers=cluster.bootstrap_servers) as admin:
            where = admin.describe_replica_log_dirs([(topic, 0, 1)])[(topic, 0, 1)]["current_replica_log_dir"]
        elsewhere = [d for d in dirs[1] if d != where][0]
        plan = _file(tmp_path, {"version": 1, "partitions": [{"topic": topic, "partition": 0, "replicas": [0, 1, 2],
                                                             "log_dirs": ["any", elsewhere, dirs[2][1]]}]})
        done = _cli(cluster, "--execute", "--reassignment-json-file", plan, "--replica-alter-log-dirs-throttle",
                    "50000000")
        assert done.status == 0, done
        assert "The replica-alter-dir throttle limit was set to 50000000 B/s\n" in done.out
        started = [line for line in done.out.splitlines() if line.startswith("Successfully started log directory")]
        # Broker 1's move starts at once; broker 2's replica, once the reassignment has created it.
        assert sorted(r for line in started for r in line.split(": ", 1)[1].split(",")) == [
            "%s-0-1" % topic, "%s-0-2" % topic], done.out
        deadline = time.monotonic() + TIMEOUT_S
        while True:
            verified = _cli(cluster, "--verify", "--reassignment-json-file", plan)
            assert verified.status == 0, verified
            if "Clearing broker-level throttles" in verified.out:
                break
            assert time.monotonic() < deadline, verified.out
            time.sleep(0.1)  # a poll's pacing
        assert verified.out.startswith(
            "Status of partition reassignment:\nReassignment of partition %s-0 is completed.\n"
            "Reassignment of replica %s-0-1 completed successfully.\n"
            "Reassignment of replica %s-0-2 completed successfully.\n" % (topic, topic, topic)), verified.out
        assert _throttles(cluster, topic)[1] == {0: {}, 1: {}, 2: {}}
        with AdminClient(bootstrap_servers=cluster.bootstrap_servers) as admin:
            placed = admin.describe_replica_log_dirs([(topic, 0, 1), (topic, 0, 2)])
        assert placed[(topic, 0, 1)]["current_replica_log_dir"] == elsewhere
        assert placed[(topic, 0, 2)]["current_replica_log_dir"] == dirs[2][1]
        consumer = pylogq.Consumer(bootstrap_servers=cluster.bootstrap_servers, auto_offset_reset="earliest",
                                   consumer_timeout_ms=5000)
        try:
            consumer.assign([TopicPartition(topic, 0)])
            # The records written, and nothing after them (read up to the end offset, not until
            # nothing has come for consumer_timeout_ms).
            assert [m.value for m in itertools.islice(consumer, RECORDS)] == [b"record-%d" % i for i in range(RECORDS)]
            assert consumer.end_offsets([TopicPartition(topic, 0)]) == {TopicPartition(topic, 0): RECORDS}
        finally:
            consumer.close()
