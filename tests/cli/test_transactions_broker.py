"""``pylogq transactions`` against served brokers, as an operator runs it: the replicas a
partition's producer state is asked of (``describe-producers --broker-id`` on a follower)."""

from __future__ import annotations

import io
from typing import List

import pylogq
from pylogq.cli.clients import Clients
from pylogq.cli.main import run
from pylogq.client.producer import Producer

from .._cluster_ops import eventually, topic_with_records
from .conftest import Result


def _cli(bootstrap: str, *argv: str) -> Result:
    out, err = io.StringIO(), io.StringIO()
    status = run(["transactions", *argv], clients=Clients(bootstrap_servers=bootstrap), stdout=out, stderr=err)
    return Result(status, out.getvalue(), err.getvalue())


def test_describe_producers_on_a_follower(pylogq_cluster: pylogq.Cluster) -> None:
    ids = sorted(b.broker_id for b in pylogq_cluster.brokers)
    topic = topic_with_records(pylogq_cluster, {0: ids[:2]}, 0, prefix="producers")
    leader, follower = ids[0], ids[1]
    eventually(lambda: pylogq_cluster.leader(topic, 0) == leader, "%d to lead" % leader)
    with Producer(bootstrap_servers=pylogq_cluster.bootstrap_servers, enable_idempotence=True, acks="all") as p:
        for i in range(3):
            p.send(topic, b"v%d" % i, partition=0)
        p.flush()
    bootstrap = pylogq_cluster.bootstrap_servers

    def rows(*argv: str) -> List[List[str]]:
        found = _cli(bootstrap, "describe-producers", "--topic", topic, "--partition", "0", *argv)
        assert found.status == 0 and found.err == "", found
        return [[cell.strip() for cell in line.split("\t")[:-1]] for line in found.out.splitlines()[1:]]

    [on_leader] = rows()
    assert on_leader[1:4] + on_leader[5:6] == ["0", "-1", "2", "None"]
    # The follower's producer state is rebuilt from the records it copies.
    assert eventually(lambda: rows("--broker-id", str(follower)) == [on_leader], "the follower's state")
    missing = _cli(bootstrap, "describe-producers", "--topic", topic, "--partition", "0", "--broker-id", str(ids[2]))
    assert missing.status == 1 and missing.out == ""
    assert missing.err.startswith("Error: Failed to describe producers for partition %s-0 on broker %d: "
                                  "NOT_LEADER_OR_FOLLOWER" % (topic, ids[2]))
