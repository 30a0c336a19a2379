"""The controller's channel to the brokers (ControllerChannelManager): retry, order, removal.

Each broker has a queue and a sender thread. A request that cannot be delivered is
retried, on a new connection, until it is delivered or the broker leaves the channel;
requests go out oldest first, each exactly once; a removed broker's queue is dropped
and its sender ends, a request in flight to it abandoned. The connector here fails on
cue: it refuses a number of deliveries, refuses while a broker is marked down, or holds
a delivery until it is released or aborted. The last test plays the same fault in a
running cluster: the controller cut off from a broker while a topic is created.
"""

from __future__ import annotations

import threading
import time
from typing import Any, Callable, Dict, Iterator, List, Mapping, Optional, Sequence, Set, Tuple, Type

import pytest

from pylogq import errors, records
from pylogq.cluster.broker.local_cluster import Cluster
from pylogq.cluster.contract import (
    BrokerEndpoint,
    BrokerRegistration,
    EpochEndOffset,
    FetchResult,
    LeaderAndIsrRequest,
    ReplicaFetchPartition,
    StopReplicaRequest,
    UpdateMetadataRequest,
)
from pylogq.cluster.controller.channel import ControllerChannelManager, ControllerRequest

DEADLINE_S = 20.0


def wait_for(condition: Callable[[], bool], what: str, timeout: float = DEADLINE_S) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError("timed out waiting for %s" % what)
        time.sleep(0.005)


def registration(broker_id: int, port: Optional[int] = None, epoch: int = 1) -> BrokerRegistration:
    return BrokerRegistration(broker_id, (BrokerEndpoint("PLAINTEXT", "127.0.0.1", port or 9000 + broker_id),),
                              epoch=epoch)


def requests(n: int, start: int = 0) -> List[ControllerRequest]:
    """``n`` distinct requests of the three kinds in turn, told apart by their broker epoch."""
    out: List[ControllerRequest] = []
    for i in range(start, start + n):
        kind = i % 3
        if kind == 0:
            out.append(LeaderAndIsrRequest(0, 1, i, [], {}, []))
        elif kind == 1:
            out.append(UpdateMetadataRequest(0, 1, i, [], [], {}))
        else:
            out.append(StopReplicaRequest(0, 1, i, {("t", i): (0, False)}))
    return out


class CueConnector:
    """An inter-broker connector whose clients deliver the controller's requests into
    :attr:`delivered` and fail on cue, per broker: :meth:`refuse` the next n deliveries,
    :attr:`down` refuses while a broker is in it, :attr:`held` holds a delivery until the
    broker leaves it or the call is aborted. Thread-safe."""

    def __init__(self, error: Type[Exception] = errors.BrokerNotAvailableError) -> None:
        self.error = error
        self.cond = threading.Condition()
        self.delivered: Dict[int, List[Any]] = {}
        self.attempts: Dict[int, int] = {}
        self.connects: List[Tuple[int, str, int]] = []
        self.closes: Dict[int, int] = {}
        self.down: Set[int] = set()
        self.held: Set[int] = set()
        self.holding: Dict[int, int] = {}  # calls being held now, per broker
        self._refusals: Dict[int, int] = {}
        #: Replicas each broker answers LeaderAndIsr for with KAFKA_STORAGE_ERROR (a failed log dir).
        self.offline: Dict[int, Set[Tuple[str, int]]] = {}

    def __call__(self, broker_id: int, host: str, port: int) -> "_CueClient":
        with self.cond:
            self.connects.append((broker_id, host, port))
        return _CueClient(self, broker_id)

    def refuse(self, broker_id: int, n: int) -> None:
        with self.cond:
            self._refusals[broker_id] = n

    def set_down(self, broker_id: int, down: bool) -> None:
        with self.cond:
            (self.down.add if down else self.down.discard)(broker_id)

    def hold(self, broker_id: int) -> None:
        with self.cond:
            self.held.add(broker_id)

    def release(self, broker_id: int) -> None:
        with self.cond:
            self.held.discard(broker_id)
            self.cond.notify_all()

    def of(self, broker_id: int) -> List[Any]:
        with self.cond:
            return list(self.delivered.get(broker_id, []))

    def attempts_of(self, broker_id: int) -> int:
        with self.cond:
            return self.attempts.get(broker_id, 0)

    def deliver(self, client: "_CueClient", request: Any) -> None:
        b = client.broker_id
        with self.cond:
            self.attempts[b] = self.attempts.get(b, 0) + 1
            if b in self.held:
                self.holding[b] = self.holding.get(b, 0) + 1
                try:
                    while b in self.held and not client.aborted:
                        self.cond.wait()
                finally:
                    self.holding[b] -= 1
                if client.aborted:
                    raise errors.BrokerNotAvailableError("the call to broker %d was aborted" % b)
            if self._refusals.get(b, 0) > 0:
                self._refusals[b] -= 1
                raise self.error("broker %d refused the delivery" % b)
            if b in self.down:
                raise self.error("broker %d is down" % b)
            self.delivered.setdefault(b, []).append(request)


class _CueClient:
    def __init__(self, connector: CueConnector, broker_id: int) -> None:
        self.connector = connector
        self.broker_id = broker_id
        self.aborted = False

    def leader_and_isr(self, request: LeaderAndIsrRequest) -> Tuple[int, Dict[Any, int]]:
        self.connector.deliver(self, request)
        with self.connector.cond:
            offline = set(self.connector.offline.get(self.broker_id, ()))
        answers: Dict[Any, int] = {(p.topic, p.partition): errors.KafkaStorageError.code
                                   for p in request.partitions if (p.topic, p.partition) in offline}
        answers[("answer", request.broker_epoch)] = 0
        return 0, answers

    def update_metadata(self, request: UpdateMetadataRequest) -> int:
        self.connector.deliver(self, request)
        return 0

    def stop_replica(self, request: StopReplicaRequest) -> Tuple[int, Dict[Any, int]]:
        self.connector.deliver(self, request)
        return 0, {("answer", request.broker_epoch): 0}

    def controlled_shutdown(self, broker_id: int, broker_epoch: int) -> Tuple[int, List[Tuple[str, int]]]:
        raise AssertionError("the controller's channel sends no ControlledShutdown")

    def replica_fetch(self, replica_id: int, broker_epoch: int, partitions: Sequence[ReplicaFetchPartition],
                      max_wait_ms: int, min_bytes: int, max_bytes: int) -> Dict[Tuple[str, int], FetchResult]:
        raise AssertionError("the controller's channel sends no Fetch")

    def offsets_for_leader_epoch(self, replica_id: int, partitions: Mapping[Tuple[str, int], Tuple[int, int]]
                                 ) -> Dict[Tuple[str, int], EpochEndOffset]:
        raise AssertionError("the controller's channel sends no OffsetsForLeaderEpoch")

    def abort(self) -> None:
        with self.connector.cond:
            self.aborted = True
            self.connector.cond.notify_all()

    def close(self) -> None:
        with self.connector.cond:
            self.connector.closes[self.broker_id] = self.connector.closes.get(self.broker_id, 0) + 1


class Answers:
    """A callback recording (broker, response) in the order the sender calls it."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.seen: List[Tuple[int, Any]] = []

    def __call__(self, broker_id: int, response: Any) -> None:
        with self.lock:
            self.seen.append((broker_id, response))

    def count(self) -> int:
        with self.lock:
            return len(self.seen)


@pytest.fixture
def connector() -> CueConnector:
    return CueConnector()


@pytest.fixture
def channel(connector: CueConnector) -> Iterator[ControllerChannelManager]:
    manager = ControllerChannelManager(connector)
    yield manager
    connector.release(1)
    connector.release(2)
    manager.shutdown()


def sender_thread(channel: ControllerChannelManager, broker_id: int) -> threading.Thread:
    thread: threading.Thread = channel._senders[broker_id]._thread
    return thread


def expected_answer(request: Any) -> Any:
    return 0 if isinstance(request, UpdateMetadataRequest) else (0, {("answer", request.broker_epoch): 0})


@pytest.mark.parametrize("error", [errors.BrokerNotAvailableError, ConnectionResetError],
                         ids=["unreachable", "unexpected-error"])
def test_an_undeliverable_request_is_retried_on_a_new_connection_until_delivered_once(
        error: Type[Exception]) -> None:
    connector = CueConnector(error)
    channel = ControllerChannelManager(connector)
    try:
        channel.add_broker(registration(1))
        connector.refuse(1, 3)
        answers = Answers()
        [request] = requests(1)
        assert channel.send(1, request, answers)
        wait_for(lambda: channel.pending() == 0, "the request to leave the queue")
        assert connector.of(1) == [request]
        wait_for(lambda: answers.count() == 1, "its answer")
        assert connector.attempts_of(1) == 4  # three refusals, then the delivery
        # Each failure closed the connection; each retry opened another.
        assert len(connector.connects) == 4 and connector.closes.get(1) == 3
        assert answers.seen == [(1, expected_answer(request))]
    finally:
        channel.shutdown()


def test_requests_queued_while_a_broker_is_unreachable_arrive_oldest_first_each_once(
        channel: ControllerChannelManager, connector: CueConnector) -> None:
    channel.add_broker(registration(1))
    connector.set_down(1, True)
    answers = Answers()
    sent = requests(12)
    for r in sent:
        assert channel.send(1, r, answers)
    wait_for(lambda: connector.attempts_of(1) >= 3, "the sender to retry while the broker is down")
    assert channel.pending() == 12 and connector.of(1) == []  # nothing was given up
    connector.set_down(1, False)
    wait_for(lambda: channel.pending() == 0, "the queue to empty")
    assert connector.of(1) == sent
    wait_for(lambda: answers.count() == 12, "every answer")
    assert answers.seen == [(1, expected_answer(r)) for r in sent]
    # Sent after the outage, in order behind them.
    more = requests(3, start=12)
    for r in more:
        channel.send(1, r)
    wait_for(lambda: channel.pending() == 0, "the later requests")
    assert connector.of(1) == sent + more


def test_refusals_in_the_middle_of_a_queue_keep_its_order(channel: ControllerChannelManager,
                                                           connector: CueConnector) -> None:
    channel.add_broker(registration(1))
    connector.set_down(1, True)
    first = requests(4)
    for r in first:
        channel.send(1, r)
    wait_for(lambda: connector.attempts_of(1) >= 1, "a first attempt")
    connector.refuse(1, 5)  # the next five attempts fail, whatever the broker's state
    connector.set_down(1, False)
    rest = requests(6, start=4)
    for r in rest:
        channel.send(1, r)
    wait_for(lambda: channel.pending() == 0, "every request to be delivered")
    assert connector.of(1) == first + rest


def test_a_removed_broker_s_queue_is_dropped_and_its_sender_ends(channel: ControllerChannelManager,
                                                                 connector: CueConnector) -> None:
    channel.add_broker(registration(1))
    channel.add_broker(registration(2))
    thread = sender_thread(channel, 1)
    connector.set_down(1, True)
    answers = Answers()
    for r in requests(5):
        channel.send(1, r, answers)
    wait_for(lambda: connector.attempts_of(1) >= 2, "the sender to retry")
    channel.remove_broker(1)
    assert channel.brokers() == [2]
    assert not channel.send(1, requests(1)[0])  # a broker out of the channel takes nothing
    thread.join(DEADLINE_S)
    assert not thread.is_alive()
    # The broker is reachable again: what was queued for it is never delivered (the
    # controller sends a returning broker everything again when it registers).
    connector.set_down(1, False)
    attempts = connector.attempts_of(1)
    r2 = requests(1, start=20)[0]
    assert channel.send(2, r2)
    wait_for(lambda: connector.of(2) == [r2], "the other broker's request")
    assert connector.of(1) == [] and connector.attempts_of(1) == attempts and answers.count() == 0
    assert connector.closes.get(1, 0) >= 1  # its connection was closed


def test_removing_a_broker_abandons_the_request_in_flight(channel: ControllerChannelManager,
                                                          connector: CueConnector) -> None:
    """A broker that stopped answering (a frozen process) must not keep its sender."""
    channel.add_broker(registration(1))
    thread = sender_thread(channel, 1)
    connector.hold(1)
    answers = Answers()
    channel.send(1, requests(1)[0], answers)
    wait_for(lambda: connector.holding.get(1, 0) == 1, "the delivery to be in flight")
    channel.remove_broker(1)
    thread.join(DEADLINE_S)
    assert not thread.is_alive()
    assert connector.of(1) == [] and answers.count() == 0
    assert connector.attempts_of(1) == 1  # not tried again after the abort


def test_a_slow_broker_delays_only_its_own_queue(channel: ControllerChannelManager,
                                                 connector: CueConnector) -> None:
    channel.add_broker(registration(1))
    channel.add_broker(registration(2))
    connector.hold(1)
    to_1, to_2 = requests(3), requests(3, start=3)
    for a, b in zip(to_1, to_2):
        channel.send(1, a)
        channel.send(2, b)
    wait_for(lambda: connector.of(2) == to_2, "the other broker's requests")
    assert connector.of(1) == [] and connector.holding.get(1) == 1
    connector.release(1)
    wait_for(lambda: channel.pending() == 0, "the slow broker's requests")
    assert connector.of(1) == to_1


def test_a_broker_registered_anew_gets_a_new_queue_and_the_same_registration_keeps_its_own(
        channel: ControllerChannelManager, connector: CueConnector) -> None:
    old = registration(1, port=9001, epoch=5)
    channel.add_broker(old)
    connector.set_down(1, True)
    stale = requests(3)
    for r in stale:
        channel.send(1, r)
    wait_for(lambda: connector.attempts_of(1) >= 1, "a first attempt")
    channel.add_broker(old)  # the same registration again: nothing changes
    assert channel.pending() == 3
    old_thread = sender_thread(channel, 1)
    # Registered again (a restart, on another port): the old life's requests are dropped,
    # the new one's go to its new endpoint.
    channel.add_broker(registration(1, port=9101, epoch=9))
    old_thread.join(DEADLINE_S)
    assert not old_thread.is_alive() and channel.pending() == 0
    connector.set_down(1, False)
    fresh = requests(2, start=3)
    for r in fresh:
        channel.send(1, r)
    wait_for(lambda: channel.pending() == 0, "the new life's requests")
    assert connector.of(1) == fresh
    assert connector.connects[-1] == (1, "127.0.0.1", 9101)


def test_a_failing_callback_does_not_stop_the_sender(channel: ControllerChannelManager,
                                                     connector: CueConnector) -> None:
    channel.add_broker(registration(1))
    calls: List[int] = []

    def failing(broker_id: int, response: Any) -> None:
        calls.append(broker_id)
        raise RuntimeError("a bug in a callback")

    sent = requests(3)
    for r in sent:
        channel.send(1, r, failing)
    wait_for(lambda: channel.pending() == 0 and len(calls) == 3, "every request and callback")
    assert connector.of(1) == sent


def test_shutdown_drops_every_queue_and_ends_every_sender(connector: CueConnector) -> None:
    channel = ControllerChannelManager(connector)
    channel.add_broker(registration(1))
    channel.add_broker(registration(2))
    threads = [sender_thread(channel, 1), sender_thread(channel, 2)]
    connector.set_down(1, True)
    connector.hold(2)
    channel.send(1, requests(1)[0])
    channel.send(2, requests(1)[0])
    wait_for(lambda: connector.attempts_of(1) >= 1 and connector.holding.get(2) == 1, "both senders busy")
    channel.shutdown()
    for t in threads:
        assert not t.is_alive()
    assert channel.brokers() == [] and channel.pending() == 0
    assert connector.of(1) == [] and connector.of(2) == []


# -- in a running cluster ------------------------------------------------------------------------


SESSION: Dict[str, Any] = {"zookeeper.session.timeout.ms": 600, "replica.fetch.wait.max.ms": 100,
                           "replica.fetch.backoff.ms": 50}


def test_a_broker_the_controller_cannot_reach_gets_its_replicas_once_the_link_heals(tmp_path: Any) -> None:
    """The controller's LeaderAndIsr and UpdateMetadata to an unreachable (but registered)
    broker wait in its queue and arrive when the link comes back: nothing else would tell it."""
    with Cluster(3, str(tmp_path), **SESSION) as c:
        c.wait_until(lambda: c.controller() is not None, DEADLINE_S, "a controller")
        controller = c.controller()
        assert controller is not None and controller.cluster is not None
        cut_off = next(b.broker_id for b in c.brokers if b is not controller)
        c.cut(controller.broker_id, cut_off)
        controller.create_topic("t", replica_assignment={0: [controller.broker_id, cut_off]})
        channel = controller.cluster.controller.channel
        wait_for(lambda: channel.pending() >= 2, "the requests to the cut-off broker to queue")
        assert c.broker(cut_off).hosted(("t", 0)) is None
        assert "t" not in c.broker(cut_off).list_topics()
        c.heal()
        c.wait_for_topic("t", DEADLINE_S)
        follower = c.broker(cut_off).hosted(("t", 0))
        assert follower is not None and follower.leader_id == controller.broker_id
        assert controller.produce("t", 0, bytes(records.build_batch([b"x"])), acks=-1).error_code == 0
        c.wait_until(lambda: follower.log_end_offset == 1, DEADLINE_S, "the follower to copy the record")
