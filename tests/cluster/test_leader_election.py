"""Elections asked for (controller/leader_election.py): ElectLeaders' preferred and unclean
elections and ``/admin/preferred_replica_election``, against the in-memory store, then over
the wire from confluent-kafka's and kafka-python's admin clients on a three-broker cluster."""

from __future__ import annotations

from typing import Callable, Dict, List

from confluent_kafka import TopicPartition as ConfluentTopicPartition
from confluent_kafka.admin import AdminClient as ConfluentAdminClient
from confluent_kafka import ElectionType as ConfluentElectionType
from kafka.admin import KafkaAdminClient

import pylogq
from pylogq import errors
from pylogq.cluster.controller.controller import KafkaController
from pylogq.cluster.controller.leader_election import PREFERRED, UNCLEAN
from pylogq.cluster.zk.data import PartitionState

from .._cluster_ops import eventually, led_elsewhere
from ._controller import Brokers, leader_and_isr, stored, write_topic
from .test_controller_channel import CueConnector, wait_for

TIMEOUT_S = 30.0


def _cluster_of(brokers: Brokers, start: Callable[..., KafkaController], states: Dict[int, PartitionState],
                replicas: Dict[int, List[int]], n: int = 3) -> KafkaController:
    for b in range(n):
        brokers.register(b)
    write_topic(brokers.sessions[0], "t", replicas, states)
    return start(0)


def test_a_preferred_election_gives_the_partition_back_to_its_first_replica(
        brokers: Brokers, start: Callable[..., KafkaController], connector: CueConnector) -> None:
    controller = _cluster_of(brokers, start, {0: PartitionState(1, 3, [0, 1], 0)}, {0: [0, 1]})
    assert controller.elect_leaders(PREFERRED, [("t", 0)]) == {("t", 0): (0, None)}
    assert stored(brokers.sessions[0], "t") == (0, [0, 1], 4)
    wait_for(lambda: any(s.leader == 0 and s.leader_epoch == 4 for s in leader_and_isr(connector, 1)),
             "broker 1 to hear that 0 leads")
    code, message = controller.elect_leaders(PREFERRED, [("t", 0)])[("t", 0)]
    assert code == errors.ElectionNotNeededError.code and message


def test_a_preferred_replica_out_of_the_isr_cannot_lead(brokers: Brokers, start: Callable[..., KafkaController]) -> None:
    controller = _cluster_of(brokers, start, {0: PartitionState(1, 3, [1], 0)}, {0: [0, 1]})
    code, message = controller.elect_leaders(PREFERRED, [("t", 0)])[("t", 0)]
    assert code == errors.PreferredLeaderNotAvailableError.code and "0" in str(message)
    assert stored(brokers.sessions[0], "t") == (1, [1], 3)


def test_every_partition_answers_only_those_that_needed_an_election(
        brokers: Brokers, start: Callable[..., KafkaController]) -> None:
    controller = _cluster_of(brokers, start, {0: PartitionState(0, 0, [0, 1], 0), 1: PartitionState(0, 0, [0, 1], 0),
                                              2: PartitionState(2, 0, [2, 1], 0)},
                             {0: [0, 1], 1: [1, 0], 2: [1, 2]})
    assert controller.elect_leaders(PREFERRED, None) == {("t", 1): (0, None), ("t", 2): (0, None)}
    assert [stored(brokers.sessions[0], "t", p)[0] for p in range(3)] == [0, 1, 1]
    assert controller.elect_leaders(PREFERRED, None) == {}


def test_an_unclean_election_takes_a_live_replica_out_of_the_isr(
        brokers: Brokers, start: Callable[..., KafkaController]) -> None:
    # Leader 2 and the whole ISR gone: only 1, out of sync, is left; the topic does not allow
    # unclean elections on its own, so the partition stays offline until one is asked for.
    for b in range(3):
        brokers.register(b)
    write_topic(brokers.sessions[0], "t", {0: [2, 1]}, {0: PartitionState(2, 5, [2], 0)})
    brokers.stop(2)
    controller = start(0)
    zk = brokers.sessions[0]
    assert stored(zk, "t")[0] == -1
    assert controller.elect_leaders(PREFERRED, [("t", 0)])[("t", 0)][0] == errors.PreferredLeaderNotAvailableError.code
    assert controller.elect_leaders(UNCLEAN, [("t", 0)]) == {("t", 0): (0, None)}
    leader, isr, _ = stored(zk, "t")
    assert (leader, isr) == (1, [1])
    assert controller.elect_leaders(UNCLEAN, [("t", 0)])[("t", 0)][0] == errors.ElectionNotNeededError.code


def test_an_unclean_election_prefers_a_live_isr_member(brokers: Brokers, start: Callable[..., KafkaController]
                                                       ) -> None:
    for b in range(3):
        brokers.register(b)
    write_topic(brokers.sessions[0], "t", {0: [2, 0, 1]}, {0: PartitionState(-1, 5, [2, 1], 0)})
    brokers.stop(2)
    controller = start(0)
    # The controller's own repair may already have elected 1 (a live ISR member): either way 1 leads.
    answer = controller.elect_leaders(UNCLEAN, [("t", 0)])[("t", 0)][0]
    assert answer in (0, errors.ElectionNotNeededError.code)
    assert stored(brokers.sessions[0], "t")[:2] == (1, [1])


def test_no_live_replica_and_unknown_partitions(brokers: Brokers, start: Callable[..., KafkaController]) -> None:
    for b in range(3):
        brokers.register(b)
    write_topic(brokers.sessions[0], "t", {0: [2]}, {0: PartitionState(2, 0, [2], 0)})
    brokers.stop(2)
    controller = start(0)
    answers = controller.elect_leaders(UNCLEAN, [("t", 0), ("t", 9), ("nope", 0)])
    assert answers is not None
    assert answers[("t", 0)][0] == errors.EligibleLeadersNotAvailableError.code
    assert answers[("t", 9)][0] == answers[("nope", 0)][0] == errors.UnknownTopicOrPartitionError.code


def test_the_admin_znode_a_tool_writes_is_an_election_and_goes(brokers: Brokers,
                                                               start: Callable[..., KafkaController]) -> None:
    controller = _cluster_of(brokers, start, {0: PartitionState(1, 0, [0, 1], 0), 1: PartitionState(1, 0, [0, 1], 0)},
                             {0: [0, 1], 1: [0, 1]})
    zk = brokers.sessions[0]
    zk.request_preferred_election([("t", 1)])
    wait_for(lambda: zk.get_preferred_election_request() is None, "the controller to delete the znode")
    controller.wait_idle()
    assert stored(zk, "t", 1)[0] == 0
    assert stored(zk, "t", 0)[0] == 1  # not listed: left as it was


def test_a_standby_controller_holds_no_election(brokers: Brokers, start: Callable[..., KafkaController]) -> None:
    _cluster_of(brokers, start, {0: PartitionState(1, 0, [0, 1], 0)}, {0: [0, 1]})
    standby = start(1, wait_active=False)
    standby.wait_idle()
    assert standby.elect_leaders(PREFERRED, [("t", 0)]) is None


# -- over the wire ------------------------------------------------------------------------------




def test_confluent_kafka_elects_the_preferred_leader(pylogq_cluster: pylogq.Cluster) -> None:
    topic = led_elsewhere(pylogq_cluster)
    a = min(x.broker_id for x in pylogq_cluster.brokers)
    admin = ConfluentAdminClient({"bootstrap.servers": pylogq_cluster.bootstrap_servers})
    result = admin.elect_leaders(ConfluentElectionType.PREFERRED, [ConfluentTopicPartition(topic, 0)]).result(TIMEOUT_S)
    assert [(tp.topic, tp.partition, err) for tp, err in result.items()] == [(topic, 0, None)]
    eventually(lambda: pylogq_cluster.leader(topic, 0) == a, "the preferred replica %d to lead again" % a)
    again = admin.elect_leaders(ConfluentElectionType.PREFERRED, [ConfluentTopicPartition(topic, 0)]).result(TIMEOUT_S)
    [err] = list(again.values())
    assert err is not None and err.code() == errors.ElectionNotNeededError.code


def test_kafka_python_elects_the_preferred_leader(pylogq_cluster: pylogq.Cluster) -> None:
    topic = led_elsewhere(pylogq_cluster)
    a = min(x.broker_id for x in pylogq_cluster.brokers)
    admin = KafkaAdminClient(bootstrap_servers=pylogq_cluster.bootstrap_servers)
    try:
        admin.elect_leaders(0, {topic: [0]})
        eventually(lambda: pylogq_cluster.leader(topic, 0) == a, "the preferred replica %d to lead again" % a)
    finally:
        admin.close()
