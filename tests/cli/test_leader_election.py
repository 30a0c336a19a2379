"""``pylogq leader-election`` and ``AdminClient.elect_leaders`` against a served three-broker
cluster, as Kafka's tool runs: a partition led by another broker than its preferred replica
(after that replica restarted) is given back to it, a second election is not needed, every
partition or those a JSON file lists can be named, and what cannot be elected is reported
(``Error completing leader election ...``, exit status 1)."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pylogq
from pylogq import errors
from pylogq.cli.clients import Clients
from pylogq.cli.main import run
from pylogq.client.admin import AdminClient
from pylogq.client.consumer import TopicPartition

from .._cluster_ops import eventually, led_elsewhere
from .conftest import Result

TIMEOUT_S = 30.0


def _cli(cluster: pylogq.Cluster, *argv: str) -> Result:
    out, err = io.StringIO(), io.StringIO()
    status = run(["leader-election", *argv], clients=Clients(bootstrap_servers=cluster.bootstrap_servers),
                 stdout=out, stderr=err)
    return Result(status, out.getvalue(), err.getvalue())




def test_a_preferred_election_of_one_partition_and_then_none_needed(pylogq_cluster: pylogq.Cluster) -> None:
    topic = led_elsewhere(pylogq_cluster)
    a = min(x.broker_id for x in pylogq_cluster.brokers)
    first = _cli(pylogq_cluster, "--election-type", "preferred", "--topic", topic, "--partition", "0")
    assert first == Result(0, "Successfully completed leader election (PREFERRED) for partitions %s-0\n" % topic, "")
    eventually(lambda: pylogq_cluster.leader(topic, 0) == a, "the preferred replica to lead")
    again = _cli(pylogq_cluster, "--election-type", "PREFERRED", "--topic", topic, "--partition", "0")
    assert again == Result(0, "Valid replica already elected for partitions %s-0\n" % topic, "")
    unclean = _cli(pylogq_cluster, "--election-type", "UNCLEAN", "--topic", topic, "--partition", "0")
    assert unclean == Result(0, "Valid replica already elected for partitions %s-0\n" % topic, "")


def test_every_partition_and_a_json_file(pylogq_cluster: pylogq.Cluster, tmp_path: Path) -> None:
    topic = led_elsewhere(pylogq_cluster, partitions=3)
    a = min(x.broker_id for x in pylogq_cluster.brokers)
    plan = tmp_path / "partitions.json"
    plan.write_text(json.dumps({"partitions": [{"topic": topic, "partition": 2}]}))
    from_file = _cli(pylogq_cluster, "--election-type", "PREFERRED", "--path-to-json-file", str(plan))
    assert from_file == Result(0, "Successfully completed leader election (PREFERRED) for partitions %s-2\n" % topic,
                               "")
    every = _cli(pylogq_cluster, "--election-type", "PREFERRED", "--all-topic-partitions")
    assert every.status == 0 and every.err == ""
    # Every partition of the cluster that needed one: this topic's other two among them.
    assert every.out.startswith("Successfully completed leader election (PREFERRED) for partitions ")
    assert "%s-0, %s-1" % (topic, topic) in every.out and "%s-2" % topic not in every.out
    eventually(lambda: all(pylogq_cluster.leader(topic, p) == a for p in range(3)), "every preferred replica")


def test_what_cannot_be_elected_is_reported(pylogq_cluster: pylogq.Cluster, tmp_path: Path) -> None:
    answer = _cli(pylogq_cluster, "--election-type", "PREFERRED", "--topic", "no-such-topic", "--partition", "0")
    assert answer.status == 1
    assert answer.out.startswith("Error completing leader election (PREFERRED) for partition: no-such-topic-0: ")
    assert answer.err == "Error: 1 replica(s) could not be elected\n"
    missing = _cli(pylogq_cluster, "--election-type", "PREFERRED", "--topic", "t")
    assert missing.status == 1 and "--partition" in missing.err
    bad = tmp_path / "bad.json"
    bad.write_text('{"partitions": [{"topic": "t"}]}')
    wrong = _cli(pylogq_cluster, "--election-type", "PREFERRED", "--path-to-json-file", str(bad))
    assert wrong.status == 1 and "is not" in wrong.err


def test_usage_errors(pylogq_cluster: pylogq.Cluster) -> None:
    for argv in ([], ["--election-type", "PREFERRED"], ["--election-type", "SOME", "--all-topic-partitions"],
                 ["--election-type", "PREFERRED", "--all-topic-partitions", "--topic", "t"]):
        try:
            _cli(pylogq_cluster, *argv)
        except SystemExit as exc:
            assert exc.code == 2, argv
        else:
            raise AssertionError("%s was accepted" % (argv,))


def test_the_admin_client_in_process_and_over_tcp(pylogq_cluster: pylogq.Cluster) -> None:
    topic = led_elsewhere(pylogq_cluster)
    a = min(x.broker_id for x in pylogq_cluster.brokers)
    controller = pylogq_cluster.controller()
    assert controller is not None
    other = next(x for x in pylogq_cluster.brokers if x.broker_id != controller.broker_id)
    with AdminClient(broker=other) as admin:
        try:
            admin.elect_leaders("PREFERRED", [TopicPartition(topic, 0)])
        except errors.NotControllerError as exc:
            assert str(controller.broker_id) in str(exc)
        else:
            raise AssertionError("a broker that is not the controller held an election")
    with AdminClient(broker=controller) as admin:
        assert admin.elect_leaders(0, {topic: [0]}) == {TopicPartition(topic, 0): None}
    eventually(lambda: pylogq_cluster.leader(topic, 0) == a, "the preferred replica to lead")
    with AdminClient(bootstrap_servers=pylogq_cluster.bootstrap_servers) as admin:
        [error] = admin.elect_leaders("preferred", [(topic, 0)]).values()
        assert isinstance(error, errors.ElectionNotNeededError)
        [error] = admin.elect_leaders(1, [(topic, 9)]).values()
        assert isinstance(error, errors.UnknownTopicOrPartitionError)
        try:
            admin.elect_leaders(1, [(topic, 9)], raise_errors=True)
        except errors.UnknownTopicOrPartitionError:
            pass
        else:
            raise AssertionError("raise_errors raised nothing")
