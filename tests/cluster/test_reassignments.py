"""The controller's partition reassignment (controller/reassignments.py, KIP-455) against
the in-memory store: the two phases and what each writes and sends, cancellation, a
reassignment replacing another, ``/admin/reassign_partitions``, a controller failover
midway, a removed replica whose broker is down, and the checks a request must pass.

The leader's side is played by the test: a leader adding a caught-up follower to the
ISR is a conditional write of the partition's state, as :class:`~pylogq.cluster.state.partition.Partition`
makes it through the broker.
"""

from __future__ import annotations

from typing import Callable, Dict, List, Optional, Tuple

from pylogq import errors
from pylogq.cluster.contract import StopReplicaRequest
from pylogq.cluster.controller.controller import KafkaController
from pylogq.cluster.zk.client import KafkaZkClient
from pylogq.cluster.zk.data import PartitionState, TopicAssignment

from ._controller import Brokers, leader_and_isr, stored, write_topic
from .test_controller_channel import CueConnector, wait_for

T = "moving"


def assignment(zk: KafkaZkClient, topic: str = T) -> TopicAssignment:
    found = zk.get_topic_assignment(topic)
    assert found is not None
    return found[0]


def expand_isr(zk: KafkaZkClient, replica: int, topic: str = T, p: int = 0) -> PartitionState:
    """The leader adds a caught-up follower to the ISR (its own conditional write)."""
    state = zk.get_partition_state(topic, p)
    assert state is not None
    written = zk.update_partition_state(topic, p, state._replace(isr=state.isr + [replica]))
    assert written is not None, "the ISR write lost a race"
    return written


def stops(connector: CueConnector, broker_id: int) -> List[Tuple[Tuple[str, int], bool]]:
    """Every (partition, delete) the StopReplica requests delivered to ``broker_id`` named."""
    return [(tp, delete) for r in connector.of(broker_id) if isinstance(r, StopReplicaRequest)
            for tp, (_, delete) in r.partitions.items()]


def deleted(connector: CueConnector, broker_id: int) -> None:
    """Wait until ``broker_id`` was told to stop its replica of T-0 and delete its log (the
    controller's requests go out on its channel's threads, after the decision)."""
    wait_for(lambda: ((T, 0), True) in stops(connector, broker_id),
             "broker %d to be told to delete its replica" % broker_id)
    assert stops(connector, broker_id) == [((T, 0), True)]


def told(connector: CueConnector, broker_id: int, replicas: List[int], leader: int, epoch: int) -> None:
    """Wait until ``broker_id`` heard T-0's state with these replicas, leader and leader epoch."""
    def heard() -> bool:
        states = [s for s in leader_and_isr(connector, broker_id) if (s.topic, s.partition) == (T, 0)]
        return bool(states) and (states[-1].replicas, states[-1].leader, states[-1].leader_epoch) == \
            (replicas, leader, epoch)
    wait_for(heard, "broker %d to hear replicas %s, leader %d, epoch %d" % (broker_id, replicas, leader, epoch))


def started(brokers: Brokers, start: Callable[..., KafkaController], n: int = 4,
            replicas: Optional[List[int]] = None) -> KafkaController:
    """Brokers 0..n-1, topic T with one partition on ``replicas`` (0, 1 by default), led by
    its first replica with both in the ISR, and broker 0's controller."""
    for b in range(n):
        brokers.register(b)
    replicas = replicas or [0, 1]
    write_topic(brokers.sessions[0], T, {0: replicas}, {0: PartitionState(replicas[0], 0, list(replicas), 0)})
    controller = start(0)
    return controller


def test_phase_one_adds_the_target_and_keeps_the_original(brokers: Brokers, start: Callable[..., KafkaController],
                                                          connector: CueConnector) -> None:
    controller = started(brokers, start)
    zk = brokers.sessions[0]
    assert controller.alter_partition_reassignments({(T, 0): [1, 2]}) == {(T, 0): (0, None)}
    controller.wait_idle()
    # The full set: the target first, then the original replica being removed.
    assert assignment(zk) == TopicAssignment({0: [1, 2, 0]}, assignment(zk).topic_id, {0: [2]}, {0: [0]})
    assert stored(zk, T) == (0, [0, 1], 1)  # same leader and ISR, a new leader epoch
    for b in (0, 1, 2):
        told(connector, b, [1, 2, 0], 0, 1)
    assert not stops(connector, 0)
    listed = controller.list_partition_reassignments()
    assert listed is not None and list(listed) == [(T, 0)]
    assert (listed[(T, 0)].replicas, listed[(T, 0)].adding, listed[(T, 0)].removing) == ([1, 2, 0], [2], [0])


def test_phase_two_follows_the_isr_and_moves_the_leader_off_a_removed_replica(
        brokers: Brokers, start: Callable[..., KafkaController], connector: CueConnector) -> None:
    controller = started(brokers, start)
    zk = brokers.sessions[0]
    controller.alter_partition_reassignments({(T, 0): [1, 2]})
    controller.wait_idle()
    expand_isr(zk, 2)  # the new replica caught up: the leader takes it in
    wait_for(lambda: not assignment(zk).adding, "the reassignment to complete")
    controller.wait_idle()
    assert assignment(zk) == TopicAssignment({0: [1, 2]}, assignment(zk).topic_id)
    leader, isr, epoch = stored(zk, T)
    assert (leader, sorted(isr), epoch) == (1, [1, 2], 2)  # 0 is removed: 1 leads, 0 left the ISR
    for b in (1, 2):
        told(connector, b, [1, 2], 1, 2)
    deleted(connector, 0)  # stopped, its log deleted
    assert controller.list_partition_reassignments() == {}
    assert controller.assignments[T][0] == [1, 2]


def test_a_reassignment_the_isr_already_covers_completes_at_once(
        brokers: Brokers, start: Callable[..., KafkaController], connector: CueConnector) -> None:
    controller = started(brokers, start, replicas=[0, 1, 2])
    zk = brokers.sessions[0]
    assert controller.alter_partition_reassignments({(T, 0): [2, 1]}) == {(T, 0): (0, None)}
    controller.wait_idle()
    assert assignment(zk).partitions == {0: [2, 1]} and not assignment(zk).removing
    leader, isr, _ = stored(zk, T)
    assert leader == 2 and sorted(isr) == [1, 2]
    deleted(connector, 0)


def test_cancelling_goes_back_to_the_original_replicas_and_deletes_the_added_one(
        brokers: Brokers, start: Callable[..., KafkaController], connector: CueConnector) -> None:
    controller = started(brokers, start)
    zk = brokers.sessions[0]
    controller.alter_partition_reassignments({(T, 0): [1, 2]})
    controller.wait_idle()
    assert controller.alter_partition_reassignments({(T, 0): None}) == {(T, 0): (0, None)}
    controller.wait_idle()
    found = assignment(zk)
    assert sorted(found.partitions[0]) == [0, 1] and not found.adding and not found.removing
    deleted(connector, 2)
    assert not stops(connector, 0) and not stops(connector, 1)
    assert stored(zk, T)[0] == 0
    assert controller.list_partition_reassignments() == {}
    code, message = controller.alter_partition_reassignments({(T, 0): None})[(T, 0)]
    assert code == errors.NoReassignmentInProgressError.code and message


def test_a_new_target_replaces_the_one_under_way_from_the_same_original(
        brokers: Brokers, start: Callable[..., KafkaController], connector: CueConnector) -> None:
    controller = started(brokers, start)
    zk = brokers.sessions[0]
    controller.alter_partition_reassignments({(T, 0): [1, 2]})
    controller.wait_idle()
    controller.alter_partition_reassignments({(T, 0): [1, 3]})
    controller.wait_idle()
    found = assignment(zk)
    # Relative to the original [0, 1]: 3 is added, 0 removed; 2 is no longer wanted.
    assert (found.partitions[0], found.adding, found.removing) == ([1, 3, 0], {0: [3]}, {0: [0]})
    deleted(connector, 2)
    expand_isr(zk, 3)
    wait_for(lambda: assignment(zk).partitions[0] == [1, 3], "the second reassignment to complete")


def test_a_new_controller_carries_on_a_reassignment_under_way(
        brokers: Brokers, start: Callable[..., KafkaController], connector: CueConnector) -> None:
    first = started(brokers, start)
    zk = brokers.sessions[1]
    first.alter_partition_reassignments({(T, 0): [1, 2]})
    first.wait_idle()
    first.shutdown()  # it resigns; broker 1 takes over
    second = start(1)
    listed = second.list_partition_reassignments()
    assert listed is not None and listed[(T, 0)].adding == [2] and listed[(T, 0)].removing == [0]
    expand_isr(zk, 2)
    wait_for(lambda: assignment(zk).partitions[0] == [1, 2], "the reassignment to complete under the new controller")
    second.wait_idle()
    assert not assignment(zk).adding and not assignment(zk).removing
    assert stored(zk, T)[0] == 1
    wait_for(lambda: ((T, 0), True) in stops(connector, 0), "broker 0 to be told to delete its replica")


def test_the_admin_znode_a_tool_writes_is_carried_out_and_removed_when_done(
        brokers: Brokers, start: Callable[..., KafkaController]) -> None:
    controller = started(brokers, start)
    zk = brokers.sessions[0]
    write_topic(zk, "other", {0: [0, 1]}, {0: PartitionState(0, 0, [0, 1], 0)})
    controller.wait_idle()
    wait_for(lambda: "other" in controller.assignments, "the second topic")
    zk.set_reassignment_request({(T, 0): [1, 2], ("other", 0): [1, 0]})
    wait_for(lambda: zk.get_reassignment_request() == {(T, 0): [1, 2]}, "the completed partition to leave the znode")
    controller.wait_idle()
    # ("other", 0) only reorders its replicas: done at once, and gone from the znode.
    assert assignment(zk, "other").partitions[0] == [1, 0]
    assert zk.get_reassignment_request() == {(T, 0): [1, 2]}
    expand_isr(zk, 2)
    wait_for(lambda: zk.get_reassignment_request() is None, "the znode to go with its last partition")
    assert assignment(zk).partitions[0] == [1, 2]


def test_an_api_reassignment_replaces_the_tools_for_its_partition(
        brokers: Brokers, start: Callable[..., KafkaController]) -> None:
    controller = started(brokers, start)
    zk = brokers.sessions[0]
    zk.set_reassignment_request({(T, 0): [1, 2]})
    wait_for(lambda: (T, 0) in (controller.list_partition_reassignments() or {}), "the tool's reassignment")
    controller.alter_partition_reassignments({(T, 0): [1, 3]})
    controller.wait_idle()
    assert zk.get_reassignment_request() is None
    assert assignment(zk).adding == {0: [3]}


def test_a_replica_removed_while_its_broker_is_down_is_deleted_when_it_returns(
        brokers: Brokers, start: Callable[..., KafkaController], connector: CueConnector) -> None:
    for b in range(3):
        brokers.register(b)
    write_topic(brokers.sessions[0], T, {0: [1, 2]}, {0: PartitionState(1, 0, [1, 2], 0)})
    controller = start(0)
    zk = brokers.sessions[0]
    controller.alter_partition_reassignments({(T, 0): [1, 0]})
    controller.wait_idle()
    brokers.stop(2)
    wait_for(lambda: 2 not in controller.live, "broker 2's registration to go")
    expand_isr(zk, 0)
    wait_for(lambda: assignment(zk).partitions[0] == [1, 0], "the reassignment to complete")
    controller.wait_idle()
    assert not stops(connector, 2)
    brokers.register(2)
    wait_for(lambda: ((T, 0), True) in stops(connector, 2), "broker 2 to be told to delete its replica")


def test_requests_that_cannot_be_carried_out_are_refused_one_partition_at_a_time(
        brokers: Brokers, start: Callable[..., KafkaController]) -> None:
    controller = started(brokers, start, n=3)
    zk = brokers.sessions[0]
    bad = errors.InvalidReplicationAssignmentError.code
    answers = controller.alter_partition_reassignments({
        ("nope", 0): [1], (T, 7): [1], (T, 0): [1, 1]})
    assert answers[("nope", 0)][0] == errors.UnknownTopicOrPartitionError.code
    assert answers[(T, 7)][0] == errors.UnknownTopicOrPartitionError.code
    assert answers[(T, 0)][0] == bad and "twice" in str(answers[(T, 0)][1])
    assert controller.alter_partition_reassignments({(T, 0): []})[(T, 0)][0] == bad
    code, message = controller.alter_partition_reassignments({(T, 0): [1, 9]})[(T, 0)]
    assert code == bad and "[9]" in str(message)
    assert controller.alter_partition_reassignments({(T, 0): None})[(T, 0)][0] == \
        errors.NoReassignmentInProgressError.code
    controller.wait_idle()
    assert assignment(zk) == TopicAssignment({0: [0, 1]}, assignment(zk).topic_id)
    assert controller.list_partition_reassignments() == {}


def test_a_standby_controller_answers_not_controller(brokers: Brokers, start: Callable[..., KafkaController]) -> None:
    started(brokers, start, n=2)
    standby = start(1, wait_active=False)
    standby.wait_idle()
    assert not standby.active
    answers: Dict[Tuple[str, int], Tuple[int, Optional[str]]] = standby.alter_partition_reassignments({(T, 0): [1]})
    assert answers == {(T, 0): (errors.NotControllerError.code, None)}
    assert standby.list_partition_reassignments() is None
