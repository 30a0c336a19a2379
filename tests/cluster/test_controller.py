"""The controller (controller.py) on its own: its decisions against the in-memory store.

Brokers here are registrations in an in-memory ZooKeeper ensemble, each in a session
of its own (a process); the controller runs on broker 0's session with its event
thread, reacting to the store's watches as in a broker, and its requests go to a
recording connector (:class:`~.test_controller_channel.CueConnector`); the harness is
``_controller.py``, its fixtures in ``conftest.py``. Each test
checks the partition states the controller writes to the store and the requests it
sends: leader elections (the preferred replica of a new partition, the first live ISR
member in replica order, an unclean election only where the topic allows it), ISR
removal, controlled shutdown, broker registration and expiry, the controller's own
election and fencing.
"""

from __future__ import annotations

from typing import Callable

import pytest

from pylogq import errors
from pylogq.cluster.controller.controller import KafkaController
from pylogq.cluster.zk.data import PartitionState
from pylogq.cluster.zk.memory_store import InMemoryZooKeeper

from ._controller import (
    Brokers,
    described,
    leader_and_isr,
    stop_replica,
    stored,
    told,
    update_metadata,
    write_topic,
)
from .test_controller_channel import CueConnector, wait_for

# -- the controller's own election ------------------------------------------------------------


def test_one_controller_is_elected_and_a_standby_takes_over_with_a_higher_epoch_fencing_the_old(
        brokers: Brokers, start: Callable[..., KafkaController]) -> None:
    brokers.register(0)
    zk1 = brokers.register(1)
    first = start(0)
    second = start(1, wait_active=False)
    second.wait_idle()
    assert first.active and not second.active
    assert zk1.get_controller_id() == 0
    old_epoch = first.epoch
    assert zk1.get_controller_epoch() == old_epoch
    assert second.controlled_shutdown(0, -1) == (errors.NotControllerError.code, [])
    brokers.stop(0)  # broker 0's session ends: /controller goes with it
    wait_for(lambda: second.active, "the standby's election")
    assert zk1.get_controller_id() == 1
    assert second.epoch[0] == old_epoch[0] + 1
    assert zk1.get_controller_epoch() == second.epoch
    # A write made with the old controller epoch (a zombie that missed its session's end) is refused.
    write_topic(zk1, "t", {0: [1]})
    wait_for(lambda: zk1.get_partition_state("t", 0) is not None, "the new controller to elect a leader")
    state = zk1.get_partition_state("t", 0)
    assert state is not None and state.controller_epoch == second.epoch[0]
    with pytest.raises(errors.ControllerMovedError):
        zk1.update_partition_state("t", 0, state._replace(leader_epoch=1), old_epoch)
    assert stored(zk1, "t") == (1, [1], 0)


# -- new partitions ---------------------------------------------------------------------------


def test_a_new_partition_is_led_by_its_first_live_replica_with_the_live_replicas_in_sync(
        brokers: Brokers, connector: CueConnector, start: Callable[..., KafkaController]) -> None:
    zk0 = brokers.register(0)
    for b in (1, 2, 3):
        brokers.register(b)
    controller = start()
    # Partition 0's preferred replica is live; partition 1's (broker 4) never registered.
    write_topic(zk0, "t", {0: [2, 1, 3], 1: [4, 1, 2]})
    wait_for(lambda: zk0.get_partition_state("t", 1) is not None, "the new partitions' states")
    assert stored(zk0, "t", 0) == (2, [2, 1, 3], 0)
    assert stored(zk0, "t", 1) == (1, [1, 2], 0)
    assert controller.states[("t", 0)].leader == 2
    # Each live replica hears its partition's state, as new; every live broker the metadata.
    wait_for(lambda: all(told(connector, b, "t", 0, 2, 0) for b in (1, 2, 3))
             and all(told(connector, b, "t", 1, 1, 0) for b in (1, 2)), "LeaderAndIsr to the replicas")
    wait_for(lambda: all(described(connector, b, "t", 0, 2, 0, [0, 1, 2, 3])
                         and described(connector, b, "t", 1, 1, 0, [0, 1, 2, 3]) for b in (0, 1, 2, 3)),
             "UpdateMetadata to every live broker")
    sent = [s for s in leader_and_isr(connector, 2) if s.topic == "t"]
    assert all(s.is_new for s in sent)
    assert [s.offline_replicas for s in sent if s.partition == 1] == [[4]]
    # Only replicas hear LeaderAndIsr (each broker's requests arrive in order: the UpdateMetadata
    # waited for above came after any LeaderAndIsr of the same decision).
    assert not told(connector, 3, "t", 1, 1, 0) and leader_and_isr(connector, 0) == []


# -- failures: ISR-based elections, ISR removal, unclean elections ------------------------------


def test_a_failed_leader_is_replaced_by_the_first_live_isr_member_in_replica_order(
        brokers: Brokers, connector: CueConnector, start: Callable[..., KafkaController]) -> None:
    zk0 = brokers.register(0)
    for b in (1, 2, 3):
        brokers.register(b)
    write_topic(zk0, "t", {0: [1, 3, 2]}, {0: PartitionState(1, 4, [1, 2, 3], 1)})
    controller = start()
    assert stored(zk0, "t") == (1, [1, 2, 3], 4)  # nothing to repair
    assert 1 in controller.channel.brokers()
    brokers.stop(1)
    # Broker 3 comes before 2 in the assignment: it leads, though 2 is first in the ISR.
    wait_for(lambda: stored(zk0, "t")[0] != 1, "a new leader")
    assert stored(zk0, "t") == (3, [2, 3], 5)
    wait_for(lambda: told(connector, 2, "t", 0, 3, 5) and told(connector, 3, "t", 0, 3, 5),
             "LeaderAndIsr to the live replicas")
    wait_for(lambda: all(described(connector, b, "t", 0, 3, 5, [0, 2, 3]) for b in (0, 2, 3)),
             "UpdateMetadata without broker 1")
    assert 1 not in controller.channel.brokers() and 1 not in controller.live


def test_a_failed_follower_leaves_the_isr_and_the_leader_stays(
        brokers: Brokers, connector: CueConnector, start: Callable[..., KafkaController]) -> None:
    zk0 = brokers.register(0)
    for b in (1, 2, 3):
        brokers.register(b)
    write_topic(zk0, "t", {0: [1, 2, 3]}, {0: PartitionState(1, 0, [1, 2, 3], 1)})
    start()
    brokers.stop(3)
    wait_for(lambda: stored(zk0, "t")[1] == [1, 2], "broker 3 out of the ISR")
    assert stored(zk0, "t") == (1, [1, 2], 1)  # the leader epoch moves, as in Kafka's ZooKeeper mode
    wait_for(lambda: told(connector, 1, "t", 0, 1, 1) and told(connector, 2, "t", 0, 1, 1),
             "the new ISR to the live replicas")
    assert [s.isr for s in leader_and_isr(connector, 1) if s.leader_epoch == 1] == [[1, 2]]


def test_an_unclean_election_happens_only_where_the_topic_allows_it(
        brokers: Brokers, connector: CueConnector, start: Callable[..., KafkaController]) -> None:
    zk0 = brokers.register(0)
    for b in (1, 2, 3):
        brokers.register(b)
    # Brokers 2 and 3 fell out of sync; only 1 has every committed record.
    for name in ("clean", "dirty"):
        write_topic(zk0, name, {0: [1, 2, 3]}, {0: PartitionState(1, 0, [1], 1)})
    start(unclean=lambda topic: topic == "dirty")
    brokers.stop(1)
    wait_for(lambda: stored(zk0, "dirty")[0] == 2 and stored(zk0, "clean")[0] == -1, "the elections")
    # Allowed: the first live replica leads with whatever it has, alone in the ISR.
    assert stored(zk0, "dirty") == (2, [2], 1)
    # Not allowed: offline, the ISR keeping its last member (the only one with every record).
    assert stored(zk0, "clean") == (-1, [1], 1)
    wait_for(lambda: told(connector, 2, "dirty", 0, 2, 1) and told(connector, 3, "dirty", 0, 2, 1), "the leader")
    # The ISR member comes back: the offline partition is led again, by it.
    brokers.register(1)
    wait_for(lambda: stored(zk0, "clean")[0] == 1, "the ISR member to lead again")
    assert stored(zk0, "clean") == (1, [1], 2)
    assert stored(zk0, "dirty") == (2, [2], 1)  # no going back on an election made
    wait_for(lambda: told(connector, 1, "clean", 0, 1, 2), "LeaderAndIsr to the returning leader")


# -- controlled shutdown ------------------------------------------------------------------------


def test_controlled_shutdown_moves_the_broker_s_leaderships_and_takes_it_out_of_the_isrs(
        brokers: Brokers, connector: CueConnector, start: Callable[..., KafkaController]) -> None:
    zk0 = brokers.register(0)
    for b in (1, 2, 3):
        brokers.register(b)
    write_topic(zk0, "t", {0: [1, 2, 3], 1: [2, 1, 3], 2: [1], 3: [1, 2]},
                {0: PartitionState(1, 0, [1, 2, 3], 1), 1: PartitionState(2, 0, [2, 1, 3], 1),
                 2: PartitionState(1, 0, [1], 1), 3: PartitionState(1, 0, [1], 1)})
    controller = start()
    assert controller.controlled_shutdown(1, brokers.epoch(1) - 1)[0] == errors.StaleBrokerEpochError.code
    assert controller.controlled_shutdown(7, -1)[0] == errors.BrokerNotAvailableError.code
    assert stored(zk0, "t", 0) == (1, [1, 2, 3], 0)  # refused: nothing moved

    code, remaining = controller.controlled_shutdown(1, brokers.epoch(1))
    # Partition 3 has no other ISR member: it stays, and the broker is told it still leads it.
    # Partition 2 has no other replica: nothing to wait for.
    assert (code, remaining) == (0, [("t", 3)])
    assert stored(zk0, "t", 0) == (2, [2, 3], 1)  # led by the next ISR member in replica order
    assert stored(zk0, "t", 1) == (2, [2, 3], 1)  # followed: it leaves the ISR
    assert stored(zk0, "t", 2) == (1, [1], 0)
    assert stored(zk0, "t", 3) == (1, [1], 0)
    assert controller.shutting_down == {1}
    # The broker hears it follows what it led, and stops the replicas it followed (its logs kept).
    wait_for(lambda: told(connector, 1, "t", 0, 2, 1) and bool(stop_replica(connector, 1)), "the broker's requests")
    [stops] = [r.partitions for r in stop_replica(connector, 1)]
    assert stops[("t", 1)] == (0, False) and all(not delete for _, delete in stops.values())
    assert ("t", 2) not in stops and ("t", 3) not in stops  # what it still leads keeps running
    assert not told(connector, 1, "t", 1, 2, 1)
    wait_for(lambda: all(told(connector, b, "t", p, 2, 1) for b in (2, 3) for p in (0, 1)),
             "the new states to the other replicas")
    # Until it stops, it leads nothing new: a new partition skips it.
    write_topic(zk0, "u", {0: [1, 3]})
    wait_for(lambda: zk0.get_partition_state("u", 0) is not None, "the new partition's state")
    assert stored(zk0, "u") == (3, [3], 0)


# -- broker registration and expiry --------------------------------------------------------------


def test_a_broker_that_registers_gets_the_metadata_its_replicas_states_and_its_offline_partitions(
        brokers: Brokers, connector: CueConnector, start: Callable[..., KafkaController]) -> None:
    zk0 = brokers.register(0)
    for b in (1, 2):
        brokers.register(b)
    controller = start()
    write_topic(zk0, "t", {0: [1, 2, 3]})
    write_topic(zk0, "solo", {0: [3]})  # no live replica: it gets no leader yet
    wait_for(lambda: zk0.get_partition_state("t", 0) is not None, "the topic's state")
    controller.wait_idle()
    assert stored(zk0, "t") == (1, [1, 2], 0)
    assert zk0.get_partition_state("solo", 0) is None
    assert controller.channel.brokers() == [0, 1, 2]

    brokers.register(3)
    wait_for(lambda: zk0.get_partition_state("solo", 0) is not None, "the offline partition's election")
    assert stored(zk0, "solo") == (3, [3], 0)
    assert stored(zk0, "t") == (1, [1, 2], 0)  # it joins the ISR only once its leader sees it caught up
    assert controller.channel.brokers() == [0, 1, 2, 3] and 3 in controller.live
    wait_for(lambda: told(connector, 3, "t", 0, 1, 0) and told(connector, 3, "solo", 0, 3, 0),
             "the new broker's replicas")
    wait_for(lambda: all(described(connector, b, "solo", 0, 3, 0, [0, 1, 2, 3]) for b in (0, 1, 2, 3)),
             "UpdateMetadata naming the new broker to everyone")


def test_a_broker_whose_session_expires_leaves_the_cluster_and_its_queued_requests_are_dropped(
        ensemble: InMemoryZooKeeper, brokers: Brokers, connector: CueConnector,
        start: Callable[..., KafkaController]) -> None:
    zk0 = brokers.register(0)
    brokers.register(1)
    brokers.register(2, session_ms=300)
    write_topic(zk0, "t", {0: [2, 1], 1: [1, 2]},
                {0: PartitionState(2, 0, [2, 1], 1), 1: PartitionState(1, 0, [1, 2], 1)})
    connector.set_down(2, True)  # broker 2 cannot be reached from the start
    controller = start()
    wait_for(lambda: connector.attempts_of(2) > 0, "a delivery to broker 2 to be tried")
    # Its process dies: its session outlives it a while.
    brokers.kill(2)
    assert 2 in controller.live  # still registered
    wait_for(lambda: zk0.get_broker(2) is None, "the session to expire")
    wait_for(lambda: stored(zk0, "t", 0)[0] == 1 and stored(zk0, "t", 1)[1] == [1], "the controller's repairs")
    assert stored(zk0, "t", 0) == (1, [1], 1)
    assert stored(zk0, "t", 1) == (1, [1], 1)
    assert 2 not in controller.live and controller.channel.brokers() == [0, 1]
    connector.set_down(2, False)
    wait_for(lambda: described(connector, 1, "t", 0, 1, 1, [0, 1]), "UpdateMetadata to the live brokers")
    controller.wait_idle()
    assert connector.of(2) == []  # nothing for the dead broker was delivered, or is left to be


def test_a_broker_registered_again_is_a_restart_it_leaves_the_isrs_and_hears_its_states_again(
        brokers: Brokers, connector: CueConnector, start: Callable[..., KafkaController]) -> None:
    """A new registration epoch is a new life, maybe on an empty disk: it must catch up again."""
    zk0 = brokers.register(0)
    for b in (1, 2, 3):
        brokers.register(b)
    write_topic(zk0, "t", {0: [1, 2, 3]}, {0: PartitionState(1, 0, [1, 2, 3], 1)})
    controller = start()
    old = brokers.epoch(3)
    brokers.stop(3)
    brokers.register(3)  # possibly before the controller saw it go
    wait_for(lambda: 3 in controller.live and controller.live[3].epoch > old and stored(zk0, "t")[1] == [1, 2],
             "the restart to be handled")
    leader, isr, epoch = stored(zk0, "t")
    assert (leader, isr) == (1, [1, 2]) and epoch >= 1
    wait_for(lambda: told(connector, 3, "t", 0, 1, epoch), "broker 3's replica state")


def test_leaders_go_back_to_their_preferred_replica_when_it_is_in_sync(
        brokers: Brokers, start: Callable[..., KafkaController]) -> None:
    zk0 = brokers.register(0)
    for b in (1, 2, 3):
        brokers.register(b)
    write_topic(zk0, "t", {0: [1, 2, 3], 1: [3, 1, 2]},
                {0: PartitionState(2, 3, [2, 3, 1], 1), 1: PartitionState(1, 3, [1, 2], 1)})
    controller = start(rebalance_interval_s=0.05, imbalance_percentage=0)
    # Partition 0's preferred replica (1) is in sync: it leads again, in a new epoch.
    wait_for(lambda: stored(zk0, "t", 0)[0] == 1, "the preferred leader back")
    controller.wait_idle()  # the pass that moved it has looked at partition 1 too
    assert stored(zk0, "t", 0) == (1, [2, 3, 1], 4)
    # Partition 1's (3) is not in its ISR: the leadership stays where it is.
    assert stored(zk0, "t", 1) == (1, [1, 2], 3)


# -- failed log directories -------------------------------------------------------------------------


def test_replicas_in_a_failed_log_directory_go_offline_and_their_leaderships_move(
        brokers: Brokers, connector: CueConnector, start: Callable[..., KafkaController]) -> None:
    zk0 = brokers.register(0)
    for b in (1, 2, 3):
        brokers.register(b)
    write_topic(zk0, "t", {0: [1, 2, 3], 1: [2, 1, 3], 2: [1, 3, 2]},
                {0: PartitionState(1, 0, [1, 2, 3], 1), 1: PartitionState(2, 0, [2, 1, 3], 1),
                 2: PartitionState(1, 0, [1, 3, 2], 1)})
    controller = start()
    # Broker 1's directory holding t-0 and t-1 fails (t-2's is fine): it says so in the store,
    # and answers LeaderAndIsr for those two with KAFKA_STORAGE_ERROR.
    with connector.cond:
        connector.offline[1] = {("t", 0), ("t", 1)}
    brokers.sessions[1].propagate_log_dir_event(1)
    wait_for(lambda: stored(zk0, "t", 0)[0] != 1 and 1 not in stored(zk0, "t", 1)[1], "broker 1's replicas offline")
    controller.wait_idle()
    assert stored(zk0, "t", 0) == (2, [2, 3], 1)  # a leadership moved to the next ISR member
    assert stored(zk0, "t", 1) == (2, [2, 3], 1)  # out of the ISR, the leader stays
    assert stored(zk0, "t", 2) == (1, [1, 3, 2], 0)  # the other directory's: untouched
    assert zk0.get_log_dir_events() == []  # the notification is consumed
    wait_for(lambda: any((s.topic, s.partition, s.offline_replicas) == ("t", 0, [1])
                         for r in update_metadata(connector, 3) for s in r.partitions),
             "every broker's metadata naming broker 1's replica of t-0 offline")
    # An offline replica is never elected again, and hears no more LeaderAndIsr for it, while
    # its broker stays registered.
    heard = len(leader_and_isr(connector, 1))
    brokers.stop(2)
    wait_for(lambda: stored(zk0, "t", 0)[0] == 3 and stored(zk0, "t", 1)[0] == 3, "broker 3 leading both")
    brokers.stop(3)
    # One decision writes both partitions, one after the other: wait for the two.
    wait_for(lambda: stored(zk0, "t", 0)[0] == stored(zk0, "t", 1)[0] == -1,
             "t-0 and t-1 offline: their only replica left is in a failed directory")
    controller.wait_idle()
    assert stored(zk0, "t", 2)[0] == 1
    later = leader_and_isr(connector, 1)[heard:]
    assert later and {(s.topic, s.partition) for s in later} == {("t", 2)}
    # Registered again (a restart, its directory replaced), broker 1 hears its states again and
    # takes the leaderships its replicas are eligible for.
    with connector.cond:
        connector.offline[1] = set()
    brokers.stop(1)
    wait_for(lambda: 1 not in controller.live, "broker 1 gone")
    brokers.register(1)
    wait_for(lambda: told(connector, 1, "t", 0, -1, stored(zk0, "t", 0)[2]) or stored(zk0, "t", 0)[0] != -1,
             "broker 1 hearing t-0 again")
    controller.wait_idle()
    assert stored(zk0, "t", 2)[0] == 1
