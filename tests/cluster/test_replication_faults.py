"""Replication's mechanisms under the faults issue 29 lists, one component at a time.

Each test drives one part (a partition, the replica manager, the controller, the group
coordinator) into the situation a fault creates and checks Kafka's behaviour:

- a pending ISR expansion counts for the high watermark when the ISR is only the leader
  (KIP-497's maximal ISR);
- a controller whose state write conflicts with a leader's ISR change decides again on
  the state it reads back, never patching its first decision;
- an ISR write whose outcome is unknown (the connection lost after the store applied it)
  is tried again and recognised as applied;
- a controller event that fails on the store is finished by reading the cluster again;
- a new leader epoch of a leadership kept does not make the group coordinator reload;
- offset commits are not visible before they are replicated;
- elections skip brokers in controlled shutdown; UpdateMetadata is fenced and remembers
  the controller epoch; a new controller takes dead brokers out of the ISRs; LeaderAndIsr
  names a leader by its inter-broker endpoint; a broker that restarted since a
  partition's state was written is treated as failed for it (it may have an empty disk);
  a leadership that only moves to a new epoch keeps its followers' positions; the last
  live broker stops without asking anyone to take its leaderships;
- a leader whose store session may have ended (paused past it, expired, or cut off from
  the store and from its followers) appends nothing and its group coordinator answers
  nothing until the session is confirmed or the controller speaks to its new registration.
"""

from __future__ import annotations

import os
import shutil
import threading
import time
from typing import Any, Callable, Dict, Iterator, List, Optional, Tuple

import pytest

from pylogq import errors, records
from pylogq.cluster.broker.cluster_node import NOT_REGISTERED
from pylogq.cluster.broker.in_process import InProcessTransport
from pylogq.cluster.broker.local_cluster import Cluster
from pylogq.cluster.broker.replica_manager import ReplicaManager, ReplicationSettings
from pylogq.cluster.contract import (
    BrokerEndpoint,
    BrokerRegistration,
    LeaderAndIsrPartition,
    LeaderAndIsrRequest,
    UpdateMetadataRequest,
)
from pylogq.cluster.controller.controller import KafkaController
from pylogq.cluster.coordinator.group.coordinator import GroupCoordinator
from pylogq.cluster.delayed import Timer
from pylogq.cluster.state.partition import Partition
from pylogq.cluster.zk.client import KafkaZkClient
from pylogq.cluster.zk.data import (
    PartitionState,
    TopicAssignment,
    encode_partition_state,
    partition_state_path,
)
from pylogq.cluster.zk.memory_store import InMemoryZooKeeper
from pylogq.cluster.zk.session_guard import SessionGuard
from pylogq.cluster.zk.store import CONNECTED, EXPIRED, SUSPENDED
from pylogq.records import RecordBatch
from pylogq.storage.log import Log
from pylogq.storage.partition_metadata import META_FILE

from .test_local_cluster import read_all

DEADLINE_S = 20.0
TOPIC = "t"
TP = (TOPIC, 0)


def _wait_for(condition: Callable[[], bool], what: str, timeout: float = DEADLINE_S) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError("timed out waiting for %s" % what)
        time.sleep(0.01)


def _batch(n: int) -> bytes:
    return bytes(records.build_batch([b"v%d" % i for i in range(n)]))


def _replica(log: Log, alter_isr: Any = None) -> Partition:
    """A replica of a cluster as its broker opens it: no role until the controller's word."""
    part = Partition(TOPIC, 0, log, single_replica=False, broker_id=1, alter_isr=alter_isr)
    part.make_unassigned()
    return part


def _state(leader: int, epoch: int, isr: List[int], replicas: List[int], partition_epoch: int = 0,
           controller_epoch: int = 1) -> LeaderAndIsrPartition:
    return LeaderAndIsrPartition(TOPIC, 0, controller_epoch, leader, epoch, isr, partition_epoch, replicas)


# -- the partition: maximal ISR, and a new epoch of a kept leadership --------------------------


@pytest.fixture
def log(tmp_path: Any) -> Iterator[Log]:
    lg = Log(str(tmp_path / "t-0"))
    yield lg
    lg.close()


def test_a_pending_isr_expansion_holds_the_high_watermark_of_a_leader_alone_in_its_isr(log: Log) -> None:
    asked: List[Tuple[List[int], int]] = []
    part = _replica(log, lambda p, isr, epoch: asked.append((isr, epoch)))
    part.make_leader(_state(1, 1, [1], [1, 2]))
    part.append(_batch(1), required_acks=-1)
    assert part.high_watermark == 1
    part.update_follower_fetch_state(2, 1, 0, part.log_end_offset)  # caught up: asks to join
    assert asked == [([1, 2], 0)]
    for _ in range(5):  # acks=all appends while the expansion is being written
        part.append(_batch(1), required_acks=-1)
    # Follower 2 may be elected once the store has the expansion: nothing it lacks is committed.
    assert part.high_watermark == 1
    assert part.check_replicated(6) is None
    part.isr_change_done([1, 2], 0, 1)
    assert part.isr == (1, 2) and part.high_watermark == 1
    part.update_follower_fetch_state(2, 6, 0, part.log_end_offset)
    assert part.high_watermark == 6 and part.check_replicated(6) == 0


def test_a_refused_isr_expansion_lets_a_lone_leader_commit_again(log: Log) -> None:
    part = _replica(log, lambda p, isr, epoch: None)
    part.make_leader(_state(1, 1, [1], [1, 2]))
    part.update_follower_fetch_state(2, 0, 0, part.log_end_offset)
    part.append(_batch(3), required_acks=-1)
    assert part.high_watermark == 0
    part.isr_change_done([1, 2], 0, None)  # the store holds a newer state
    assert part.isr == (1,) and part.high_watermark == 3


def test_a_new_epoch_of_a_kept_leadership_keeps_the_followers_positions(log: Log) -> None:
    part = _replica(log, lambda p, isr, epoch: None)
    assert part.make_leader(_state(1, 1, [1, 2, 3], [1, 2, 3]))
    part.append(_batch(5), required_acks=-1)
    part.update_follower_fetch_state(3, 5, 0, 5)
    part.update_follower_fetch_state(2, 3, 0, 5)
    assert part.high_watermark == 3
    # The controller restates the partition in a new epoch (say, another replica's failure
    # was handled): the leadership is not new, and what the followers fetched still counts.
    assert not part.make_leader(_state(1, 2, [1, 2, 3], [1, 2, 3], partition_epoch=1))
    part.update_follower_fetch_state(2, 5, 0, 5)
    assert part.high_watermark == 5


# -- the replica manager: ISR writes of unknown outcome, leaderships that are news ----------------


class _FlakyStore:
    """A store whose next ``set`` is applied and then reported as a lost connection."""

    def __init__(self, store: Any) -> None:
        self._store = store
        self.lose_next_set = False

    def set(self, path: str, data: bytes, version: int = -1) -> Any:
        stat = self._store.set(path, data, version)
        if self.lose_next_set:
            self.lose_next_set = False
            raise errors.StoreConnectionError(path, "connection lost after the write")
        return stat

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)


class _PendingPartition:
    def __init__(self) -> None:
        self.topic, self.index = TOPIC, 0
        self.leader_epoch, self.isr, self.controller_epoch = 3, (1, 2), 1
        self.answered = threading.Event()
        self.written: Optional[int] = -2

    def isr_change_pending(self, proposed: List[int], expected: int) -> bool:
        return True

    def isr_change_done(self, proposed: List[int], expected: int, written: Optional[int]) -> bool:
        self.written = written
        self.answered.set()
        return False


class _Host:
    def __init__(self, partitions: Dict[Tuple[str, int], Partition]) -> None:
        self.partitions = partitions

    def hosted(self, tp: Tuple[str, int]) -> Optional[Partition]:
        return self.partitions.get(tp)

    def host_partition(self, topic: str, index: int, topic_id: Optional[str]) -> Partition:
        return self.partitions[(topic, index)]

    def unhost_partition(self, topic: str, index: int, delete: bool) -> None:
        self.partitions.pop((topic, index), None)

    def hosted_partitions(self) -> List[Partition]:
        return list(self.partitions.values())


def _replica_manager(zk: KafkaZkClient, host: _Host, timer: Timer,
                     on_leadership: Optional[Callable[[List[Any], List[Any]], None]] = None) -> ReplicaManager:
    def schedule(fn: Callable[[], None], delay: float, period: Optional[float], name: str) -> None:
        pass  # the periodic tasks are not part of these tests

    return ReplicaManager(1, host, zk, ReplicationSettings(), None, timer, schedule,  # type: ignore[arg-type]
                          lambda: 1, on_leadership)


def test_an_isr_write_whose_outcome_was_lost_is_tried_again_and_found_applied() -> None:
    ensemble = InMemoryZooKeeper()
    timer = Timer()
    try:
        flaky = _FlakyStore(ensemble.connect())
        zk = KafkaZkClient(flaky)  # type: ignore[arg-type]
        zk.ensure_layout()
        flaky.create(partition_state_path(TOPIC, 0), encode_partition_state(PartitionState(1, 3, [1, 2], 1)),
                     makepath=True)
        manager = _replica_manager(zk, _Host({}), timer)
        partition = _PendingPartition()
        flaky.lose_next_set = True
        manager._ask_isr_change(partition, [1], 0)  # type: ignore[arg-type]
        assert partition.answered.wait(DEADLINE_S)
        assert partition.written == 1  # taken, with the version the store holds
        assert zk.get_partition_state(TOPIC, 0)[:5] == (1, 3, [1], 1, 1)  # type: ignore[index]
        manager.close()
    finally:
        timer.close()
        ensemble.close()


def test_only_a_new_leadership_makes_the_coordinators_load(log: Log) -> None:
    ensemble = InMemoryZooKeeper()
    timer = Timer()
    calls: List[Tuple[List[Any], List[Any]]] = []
    try:
        zk = KafkaZkClient(ensemble.connect())
        part = _replica(log)
        manager = _replica_manager(zk, _Host({TP: part}), timer, lambda led, followed: calls.append((led, followed)))

        def request(leader: int, epoch: int, isr: List[int]) -> None:
            state = _state(leader, epoch, isr, [1, 2, 3], partition_epoch=epoch)
            live = [BrokerRegistration(b, (BrokerEndpoint("PLAINTEXT", "127.0.0.1", 1),)) for b in (1, 2, 3)]
            assert manager.become_leader_or_follower(LeaderAndIsrRequest(0, 1, 1, [state], {}, live))[0] == 0

        request(1, 1, [1, 2, 3])
        request(1, 2, [1, 2])  # a follower died: a new epoch, the same leadership
        request(1, 3, [1, 2, 3])
        assert calls == [([TP], [])]
        request(2, 4, [2, 3])  # the leadership goes
        assert calls[-1] == ([], [TP])
        manager.close()
    finally:
        timer.close()
        ensemble.close()


# -- the controller ------------------------------------------------------------------------------


class _Recorder:
    """A connector whose clients record the controller's requests and answer success."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.requests: List[Tuple[int, Any]] = []

    def __call__(self, broker_id: int, host: str, port: int) -> "_RecordingClient":
        return _RecordingClient(self, broker_id)


class _RecordingClient:
    def __init__(self, recorder: _Recorder, broker_id: int) -> None:
        self._recorder, self._broker_id = recorder, broker_id

    def _record(self, request: Any) -> None:
        with self._recorder.lock:
            self._recorder.requests.append((self._broker_id, request))

    def leader_and_isr(self, request: Any) -> Tuple[int, Dict[Any, int]]:
        self._record(request)
        return 0, {}

    def update_metadata(self, request: Any) -> int:
        self._record(request)
        return 0

    def stop_replica(self, request: Any) -> Tuple[int, Dict[Any, int]]:
        self._record(request)
        return 0, {}

    def abort(self) -> None:
        pass

    def close(self) -> None:
        pass


class _Brokers:
    """Broker registrations in an in-memory store, each its own session (a process)."""

    def __init__(self, ensemble: InMemoryZooKeeper) -> None:
        self.ensemble = ensemble
        self.sessions: Dict[int, Any] = {}

    def register(self, broker_id: int, endpoints: Optional[Tuple[BrokerEndpoint, ...]] = None) -> KafkaZkClient:
        zk = KafkaZkClient(self.ensemble.connect(session_timeout_ms=60000))
        zk.ensure_layout()
        endpoints = endpoints or (BrokerEndpoint("PLAINTEXT", "127.0.0.1", 9000 + broker_id),)
        zk.register_broker(BrokerRegistration(broker_id, endpoints), wait_s=5)
        self.sessions[broker_id] = zk
        return zk

    def kill(self, broker_id: int) -> None:
        self.sessions.pop(broker_id).store.close()


@pytest.fixture
def ensemble() -> Iterator[InMemoryZooKeeper]:
    e = InMemoryZooKeeper()
    yield e
    e.close()


def _topic(zk: KafkaZkClient, state: PartitionState, replicas: List[int] = [1, 2, 3]) -> None:
    zk.create_topic(TOPIC, TopicAssignment({0: list(replicas)}, "AAAAAAAAAAAAAAAAAAAAAQ"), {})
    zk.store.create(partition_state_path(TOPIC, 0), encode_partition_state(state), makepath=True)


def _controller(zk: KafkaZkClient, recorder: Optional[_Recorder] = None, listener: Optional[str] = None,
                unclean: bool = False) -> KafkaController:
    """A controller elected on the calling thread (its events, queued by watches, are not run
    unless the test starts its thread)."""
    controller = KafkaController(0, zk, recorder or _Recorder(), lambda topic: unclean,  # type: ignore[arg-type]
                                 listener)
    controller._elect()
    assert controller.active
    return controller


def _stored(zk: KafkaZkClient) -> Tuple[int, List[int]]:
    state = zk.get_partition_state(TOPIC, 0)
    assert state is not None
    return state.leader, state.isr


def test_a_leader_registered_again_since_its_state_was_written_is_replaced_at_failover(
        ensemble: InMemoryZooKeeper) -> None:
    brokers = _Brokers(ensemble)
    zk0 = brokers.register(0)
    for b in (1, 2, 3):
        brokers.register(b)
    _topic(zk0, PartitionState(1, 4, [1, 2, 3], 1))
    # Broker 1 dies and comes back (maybe with an empty disk) before any controller saw it go.
    brokers.kill(1)
    brokers.register(1)
    controller = _controller(zk0)
    try:
        assert _stored(zk0) == (2, [2, 3])
        state = zk0.get_partition_state(TOPIC, 0)
        assert state is not None and state.leader_epoch == 5
    finally:
        controller.shutdown()


def test_a_new_controller_takes_dead_brokers_out_of_the_isrs(ensemble: InMemoryZooKeeper) -> None:
    brokers = _Brokers(ensemble)
    zk0 = brokers.register(0)
    for b in (1, 2):
        brokers.register(b)
    _topic(zk0, PartitionState(1, 0, [1, 2, 3], 1))  # broker 3 is not registered
    controller = _controller(zk0)
    try:
        assert _stored(zk0) == (1, [1, 2])
    finally:
        controller.shutdown()


def test_an_election_skips_a_broker_in_controlled_shutdown(ensemble: InMemoryZooKeeper) -> None:
    brokers = _Brokers(ensemble)
    zk0 = brokers.register(0)
    for b in (1, 2, 3):
        brokers.register(b)
    _topic(zk0, PartitionState(1, 0, [1, 2, 3], 1))
    controller = _controller(zk0)
    try:
        controller.shutting_down.add(2)
        brokers.kill(1)
        controller._brokers_changed()
        assert _stored(zk0) == (3, [2, 3])
    finally:
        controller.shutdown()


def test_a_conflicting_write_makes_the_controller_decide_again_on_the_state_read_back(
        ensemble: InMemoryZooKeeper) -> None:
    brokers = _Brokers(ensemble)
    zk0 = brokers.register(0)
    zk1 = brokers.register(1)
    for b in (2, 3):
        brokers.register(b)
    _topic(zk0, PartitionState(1, 0, [1, 2, 3], 1))
    controller = _controller(zk0)
    real = controller.zk.update_partition_state
    raced = []

    def racing_leader(topic: str, partition: int, state: PartitionState, epoch: Any = None) -> Any:
        if epoch is not None and not raced:
            raced.append(True)
            # Meanwhile the leader drops broker 2 from the ISR (it stopped fetching).
            current = zk1.get_partition_state(TOPIC, 0)
            assert current is not None
            assert zk1.update_partition_state(TOPIC, 0, current._replace(isr=[1, 3])) is not None
        return real(topic, partition, state, epoch)

    controller.zk.update_partition_state = racing_leader  # type: ignore[method-assign]
    try:
        assert controller._controlled_shutdown(1, -1)[0] == 0
        assert raced
        # Broker 2 is no longer in sync: 3 leads (leader 2 with ISR [2, 3] would lose what only 1 and 3 have).
        assert _stored(zk0) == (3, [3])
    finally:
        controller.shutdown()


def test_an_event_that_failed_on_the_store_is_finished_by_reading_the_cluster_again(
        ensemble: InMemoryZooKeeper) -> None:
    brokers = _Brokers(ensemble)
    zk0 = brokers.register(0)
    for b in (1, 2, 3):
        brokers.register(b)
    _topic(zk0, PartitionState(1, 0, [1, 2, 3], 1))
    controller = KafkaController(0, zk0, _Recorder(), lambda topic: False)  # type: ignore[arg-type]
    controller.startup()
    try:
        _wait_for(lambda: controller.active, "the controller's election")
        controller.wait_idle()
        real = controller.zk.update_partition_state
        failures = []

        def failing_once(topic: str, partition: int, state: PartitionState, epoch: Any = None) -> Any:
            if not failures:
                failures.append(True)
                raise errors.StoreConnectionError(partition_state_path(topic, partition), "connection lost")
            return real(topic, partition, state, epoch)

        controller.zk.update_partition_state = failing_once  # type: ignore[method-assign]
        brokers.kill(1)  # the broker change event fails half-way: 1 has left the live set already
        _wait_for(lambda: _stored(zk0) == (2, [2, 3]), "a new leader after the store came back")
        assert failures
    finally:
        controller.shutdown()


def test_leader_and_isr_names_leaders_by_their_inter_broker_endpoint(ensemble: InMemoryZooKeeper) -> None:
    brokers = _Brokers(ensemble)
    zk0 = brokers.register(0)
    internal = {b: BrokerEndpoint("INTERNAL", "10.0.0.%d" % b, 9093) for b in (1, 2, 3)}
    for b in (1, 2, 3):
        brokers.register(b, (BrokerEndpoint("CLIENTS", "broker%d.example" % b, 9092), internal[b]))
    _topic(zk0, PartitionState(1, 0, [1, 2, 3], 1))
    recorder = _Recorder()
    controller = _controller(zk0, recorder, listener="INTERNAL")
    try:
        def leaders_named() -> List[Any]:
            with recorder.lock:
                return [r.live_leaders for _, r in recorder.requests if isinstance(r, LeaderAndIsrRequest)]

        _wait_for(lambda: len(leaders_named()) == 3, "LeaderAndIsr to the three replicas")
        for named in leaders_named():
            assert [(b.broker_id, b.endpoints) for b in named] == [(1, (internal[1],))]
    finally:
        controller.shutdown()


# -- the group coordinator: pending offset commits --------------------------------------------------


def test_an_offset_commit_is_visible_only_once_replicated() -> None:
    written: List[bytes] = []
    coordinator = GroupCoordinator(lambda p, batch: written.append(batch), lambda p: iter(()), start_timer=False)
    try:
        assert coordinator.commit_offsets("g", -1, "", {("t", 0): (5, None)}) == {("t", 0): 0}
        codes, complete = coordinator.commit_offsets_pending("g", -1, "", {("t", 0): (9, None)})
        assert codes == {("t", 0): 0} and len(written) == 2
        assert coordinator.fetch_offsets("g", [("t", 0)]) == {("t", 0): (5, "", 0)}
        complete(errors.NotEnoughReplicasAfterAppendError.code)  # the write did not replicate
        assert coordinator.fetch_offsets("g", [("t", 0)]) == {("t", 0): (5, "", 0)}
        codes, complete = coordinator.commit_offsets_pending("g", -1, "", {("t", 0): (12, None)})
        later, complete_later = coordinator.commit_offsets_pending("g", -1, "", {("t", 0): (15, None)})
        complete_later(0)
        complete(0)  # an earlier write completing last does not take the place of a later one
        assert coordinator.fetch_offsets("g", [("t", 0)]) == {("t", 0): (15, "", 0)}
        assert [RecordBatch(b).last_offset for b in written]  # real batches were written
    finally:
        coordinator.close()


# -- the broker of a cluster: UpdateMetadata fencing, the last broker's shutdown ------------------


def test_update_metadata_is_fenced_and_remembers_the_controller_epoch(tmp_path: Any) -> None:
    with Cluster(2, str(tmp_path), **{"zookeeper.session.timeout.ms": 2000}) as cluster:
        broker = cluster.broker(1)
        node = broker.cluster
        assert node is not None
        seen = node.replicas.controller_epoch
        newer = UpdateMetadataRequest(0, seen + 5, node.broker_epoch, [], [], {})
        assert broker.update_metadata(newer) == 0
        assert node.replicas.controller_epoch == seen + 5
        stale = UpdateMetadataRequest(0, seen, node.broker_epoch, [], [], {})
        assert broker.update_metadata(stale) == errors.StaleControllerEpochError.code
        earlier_life = UpdateMetadataRequest(0, seen + 5, node.broker_epoch - 1, [], [], {})
        assert broker.update_metadata(earlier_life) == errors.StaleBrokerEpochError.code


def test_the_last_live_broker_stops_without_a_controlled_shutdown(tmp_path: Any) -> None:
    with Cluster(2, str(tmp_path), **{"zookeeper.session.timeout.ms": 2000}) as cluster:
        cluster.create_topic(TOPIC, partitions=2, replication_factor=2)
        cluster.stop_broker(0)
        node = cluster.broker(1).cluster
        assert node is not None
        answer: List[bool] = []
        # With nowhere to move its leaderships, no attempt is made: a backoff would hang here.
        worker = threading.Thread(target=lambda: answer.append(node.controlled_shutdown_request(3, 3600.0)),
                                  daemon=True)
        worker.start()
        worker.join(DEADLINE_S)
        assert answer == [True]


def test_a_broker_with_an_empty_disk_takes_the_cluster_id_and_one_of_another_cluster_is_refused(
        tmp_path: Any) -> None:
    with Cluster(2, str(tmp_path), **{"zookeeper.session.timeout.ms": 2000}) as cluster:
        cluster_id = cluster.broker(0).cluster_id
        assert cluster.broker(1).cluster_id == cluster_id
        cluster.stop_broker(1)
        shutil.rmtree(cluster.broker_dir(1))  # the disk replaced
        assert cluster.start_broker(1).cluster_id == cluster_id
        with open(os.path.join(cluster.broker_dir(1), META_FILE)) as f:
            assert "cluster.id=%s\n" % cluster_id in f.read()
        cluster.stop_broker(1)
        with open(os.path.join(cluster.broker_dir(1), META_FILE), "w") as f:
            f.write("version=0\nbroker.id=1\ncluster.id=someOtherClusterId0000\n")
        with pytest.raises(errors.ConfigError, match="does not match someOtherClusterId0000"):
            cluster.start_broker(1)


def test_a_broker_back_in_an_isr_it_never_left_leaves_it_until_caught_up(ensemble: InMemoryZooKeeper) -> None:
    brokers = _Brokers(ensemble)
    zk0 = brokers.register(0)
    for b in (1, 2):
        brokers.register(b)
    _topic(zk0, PartitionState(1, 0, [1, 2], 1), replicas=[1, 2])
    controller = _controller(zk0)
    try:
        brokers.kill(1)
        brokers.kill(2)
        controller._brokers_changed()
        assert _stored(zk0) == (-1, [1, 2])  # offline; the ISR keeps its last members
        brokers.register(1)  # back: an ISR member, so it may lead
        controller._brokers_changed()
        assert _stored(zk0) == (1, [1, 2])
        brokers.register(2)  # back in an ISR it never left, perhaps without its log
        controller._brokers_changed()
        assert _stored(zk0) == (1, [1])  # it rejoins only once it has caught up
    finally:
        controller.shutdown()


def test_a_broker_not_yet_registered_refuses_requests_meant_for_its_previous_life(
        ensemble: InMemoryZooKeeper, log: Log) -> None:
    # The previous life of broker 1 is still registered (its session has not expired); the
    # new one, restarted at once on an empty disk, waits for it with its listener bound.
    old = _Brokers(ensemble).register(1)
    old_epoch = old.get_broker(1).epoch  # type: ignore[union-attr]
    new = KafkaZkClient(ensemble.connect(session_timeout_ms=60000))
    assert new.own_registration_epoch(1) is None
    timer = Timer()
    try:
        part = _replica(log)
        manager = _replica_manager(new, _Host({TP: part}), timer)
        manager._broker_epoch = lambda: NOT_REGISTERED  # type: ignore[method-assign]
        live = [BrokerRegistration(1, (BrokerEndpoint("PLAINTEXT", "127.0.0.1", 1),))]
        request = LeaderAndIsrRequest(0, 2, old_epoch, [_state(1, 4, [1, 2, 3], [1, 2, 3])], {}, live)
        assert manager.become_leader_or_follower(request)[0] == errors.StaleBrokerEpochError.code
        assert not part.is_leader  # an empty log never leads what the old life led
        manager.close()
        old.store.close()  # the old registration goes; the new life registers
        new.register_broker(BrokerRegistration(1, (BrokerEndpoint("PLAINTEXT", "127.0.0.1", 1),)), wait_s=5)
        assert new.own_registration_epoch(1) == new.get_broker(1).epoch > old_epoch  # type: ignore[union-attr]
    finally:
        timer.close()


def test_an_embedded_commit_in_a_cluster_is_answered_and_visible_once_replicated(tmp_path: Any) -> None:
    settings = {"zookeeper.session.timeout.ms": 60000, "replica.lag.time.max.ms": 60000,
                "offsets.commit.timeout.ms": 2000}
    with Cluster(3, str(tmp_path), **settings) as cluster:
        cluster.create_topic(TOPIC, partitions=1, replication_factor=3)
        transport = InProcessTransport(cluster.broker(0))
        p = transport.coordinator.partition_for("g")
        cluster.wait_for_topic("__consumer_offsets")  # every replica in sync and fetching
        leader = cluster.leader("__consumer_offsets", p)
        transport = InProcessTransport(cluster.broker(leader))
        assert transport.commit_offsets("g", -1, "", {TP: (5, None)}) == {TP: 0}
        followers = [b for b in range(3) if b != leader]
        for b in followers:
            cluster.freeze_broker(b)  # the commit cannot reach the rest of the ISR
        try:
            codes = transport.commit_offsets("g", -1, "", {TP: (9, None)})
            assert codes[TP] != 0
            assert transport.fetch_offsets("g", [TP]) == {TP: (5, "", 0)}
        finally:
            for b in followers:
                cluster.thaw_broker(b)
        assert transport.commit_offsets("g", -1, "", {TP: (12, None)}) == {TP: 0}
        assert transport.fetch_offsets("g", [TP]) == {TP: (12, "", 0)}


# -- a leader whose session may have ended: paused, expired, or cut off ----------------------


class _Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _guard(clock: _Clock, owned: Callable[[], Optional[int]], epoch: int = 7,
           watch_pauses: bool = True) -> SessionGuard:
    return SessionGuard(3000, owned, lambda: epoch, watch_pauses, clock=clock)


def test_a_broker_paused_past_its_session_leads_again_once_its_session_is_confirmed() -> None:
    clock = _Clock()
    answers: List[Any] = [errors.MetadataStoreError("no answer yet"), 7]  # the store answers late

    def owned() -> Optional[int]:
        answer = answers.pop(0) if len(answers) > 1 else answers[0]
        if isinstance(answer, Exception):
            raise answer
        return answer  # type: ignore[no-any-return]

    guard = _guard(clock, owned)
    try:
        assert guard.doubt(lambda: None) is None
        clock.now += 1.9  # less than two thirds of the session: a stall, not a pause
        assert guard.doubt(lambda: None) is None
        clock.now += 2.5
        assert "paused" in (guard.doubt(lambda: None) or "")
        _wait_for(lambda: not guard.in_doubt, "the session to be confirmed")
        assert answers == [7]  # asked again after the store's first silence
    finally:
        guard.close()


def test_a_broker_whose_session_ended_leads_again_only_once_the_controller_speaks_to_its_new_registration(
        ) -> None:
    clock = _Clock()
    guard = _guard(clock, lambda: None)  # the pause outlived the session: the registration is gone
    try:
        clock.now += 10
        assert guard.in_doubt
        _wait_for(lambda: "lost" in (guard.doubt(lambda: None) or ""), "the verification")
        guard.controller_spoke(7)  # a request meant for the registration that expired
        assert guard.in_doubt
        guard.controller_spoke(9)
        assert not guard.in_doubt
    finally:
        guard.close()
    expired = _guard(_Clock(), lambda: 7, watch_pauses=False)
    expired.session_state(SUSPENDED)
    expired.session_state(EXPIRED)  # the store said so itself
    expired.session_state(CONNECTED)  # a new session: the controller has not spoken yet
    assert expired.in_doubt
    expired.controller_spoke(8)
    assert not expired.in_doubt


def test_a_leader_cut_off_from_the_store_and_its_followers_stops_leading_but_not_during_a_store_outage() -> None:
    clock = _Clock()
    guard = _guard(clock, lambda: 7, watch_pauses=False)
    silent = {"ms": 10_000}
    followers = lambda: silent["ms"]  # noqa: E731
    guard.session_state(SUSPENDED)
    clock.now += 0.9  # under a third of the session: the session is surely alive
    assert guard.doubt(followers) is None
    clock.now += 0.5
    assert "cut off" in (guard.doubt(followers) or "")
    silent["ms"] = 300  # the followers still fetch: ZooKeeper is down, not this broker cut off
    assert guard.doubt(followers) is None
    assert guard.doubt(lambda: None) is None  # no other in-sync replica: nobody else could lead
    silent["ms"] = 10_000
    guard.session_state(CONNECTED)  # the same session, back
    assert guard.doubt(followers) is None


def test_a_leader_in_doubt_appends_nothing_and_its_coordinator_answers_nothing(log: Log) -> None:
    ensemble = InMemoryZooKeeper()
    timer = Timer()
    clock = _Clock()
    guard = _guard(clock, lambda: None)
    try:
        zk = KafkaZkClient(ensemble.connect())
        part = _replica(log)

        def schedule(fn: Callable[[], None], delay: float, period: Optional[float], name: str) -> None:
            pass

        registered = {"epoch": 7}
        manager = ReplicaManager(1, _Host({TP: part}), zk, ReplicationSettings(), None,  # type: ignore[arg-type]
                                 timer, schedule, lambda: registered["epoch"], guard=guard)
        live = [BrokerRegistration(b, (BrokerEndpoint("PLAINTEXT", "127.0.0.1", 1),)) for b in (1, 2)]
        lead = LeaderAndIsrRequest(0, 1, 7, [_state(1, 1, [1], [1, 2])], {}, live)
        assert manager.become_leader_or_follower(lead)[0] == 0
        manager.append_records(part, _batch(1), 1, 1000).wait()
        clock.now += 10  # paused past the session
        with pytest.raises(errors.NotLeaderOrFollowerError, match="may no longer lead"):
            manager.append_records(part, _batch(1), 1, 1000)
        assert part.log_end_offset == 1

        coordinator = GroupCoordinator(lambda p, batch: None, lambda p: iter(()), start_timer=False)
        coordinator.serve_partitions([])
        coordinator.load_partition(coordinator.partition_for("g"))
        coordinator.partition_in_doubt = lambda p: manager.leadership_doubt(part) is not None
        assert coordinator.fetch_offsets("g", [TP]) == {TP: (-1, "", errors.NotCoordinatorError.code)}

        _wait_for(lambda: "lost" in (guard.doubt(lambda: None) or ""), "the verification")
        registered["epoch"] = 9  # registered again, with a new session
        again = LeaderAndIsrRequest(0, 1, 9, [_state(1, 2, [1], [1, 2], partition_epoch=2)], {}, live)
        assert manager.become_leader_or_follower(again)[0] == 0  # the controller, to the new registration
        manager.append_records(part, _batch(1), 1, 1000).wait()
        assert part.log_end_offset == 2
        assert coordinator.fetch_offsets("g", [TP]) == {TP: (-1, "", 0)}
        coordinator.close()
        manager.close()
    finally:
        guard.close()
        timer.close()
        ensemble.close()


def test_a_leader_cut_off_from_the_store_and_its_followers_stops_serving_clients(tmp_path: Any) -> None:
    with Cluster(3, str(tmp_path), **{"zookeeper.session.timeout.ms": 3000}) as cluster:
        cluster.create_topic(TOPIC, partitions=1, replication_factor=3)
        cluster.wait_for_topic(TOPIC)
        leader = cluster.leader(TOPIC, 0)
        broker = cluster.broker(leader)
        broker.produce(TOPIC, 0, _batch(3), acks=-1)
        assert broker.fetch([(TOPIC, 0, 0, 1 << 20)], 0, 1)[TP].error_code == 0
        for b in range(3):
            if b != leader:
                cluster.cut(leader, b)
        cluster.disconnect_store(leader)

        def refused() -> bool:
            return broker.fetch([(TOPIC, 0, 0, 1 << 20)], 0, 1)[TP].error_code == \
                errors.NotLeaderOrFollowerError.code

        # While it has been cut off for less than the bounds, it still leads (a ZooKeeper blip).
        assert broker.fetch([(TOPIC, 0, 0, 1 << 20)], 0, 1)[TP].error_code == 0
        _wait_for(refused, "the cut-off leader to stop serving fetches")
        with pytest.raises(errors.NotLeaderOrFollowerError, match="cut off"):
            broker.produce(TOPIC, 0, _batch(1), acks=1)
        with pytest.raises(errors.NotLeaderOrFollowerError, match="may no longer lead"):
            broker.list_offsets(TOPIC, 0, -1)
        cluster.heal()
        cluster.reconnect_store(leader)
        _wait_for(lambda: cluster.settled(TOPIC), "the cluster to settle")
        now = cluster.broker(cluster.leader(TOPIC, 0))
        assert now.cluster is not None
        part = now.hosted(TP)
        assert part is not None
        _wait_for(lambda: now.cluster.replicas.leadership_doubt(part) is None,  # type: ignore[union-attr]
                  "the leader to hear from the store again")
        now.produce(TOPIC, 0, _batch(1), acks=-1)
        assert [o for o, _ in read_all(now, TOPIC, 0)] == [0, 1, 2, 3]  # nothing acknowledged was lost
