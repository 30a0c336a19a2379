"""``pylogq.Cluster``: n replicating brokers in one process, coordinated by an in-memory store.

The brokers are real :class:`pylogq.Broker` objects, each with its own data directory,
controller, replica manager and fetchers; they share an
:class:`~pylogq.cluster.memory_store.InMemoryZooKeeper` (ZooKeeper's semantics:
sessions, ephemeral nodes, conditional writes, watches) and reach each other through
:class:`InProcessInterBrokerClient`, which calls the other broker directly (the
requests and answers are the same typed objects the Kafka protocol carries between
processes). A broker can be stopped abruptly, as if its process were killed (its
session expires after ``zookeeper.session.timeout.ms``, its data stays on disk as
the page cache would keep it), stopped cleanly with a controlled shutdown, and
started again on the same data. :meth:`Cluster.serve` opens a Kafka listener on each
broker for real clients.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Set, Tuple

from .. import errors
from .broker import Broker
from .contract import (
    BrokerEndpoint,
    EpochEndOffset,
    FetchResult,
    LeaderAndIsrRequest,
    RecordBytes,
    ReplicaFetchPartition,
    StopReplicaRequest,
    UpdateMetadataRequest,
)
from .memory_store import InMemoryStoreClient, InMemoryZooKeeper

__all__ = ["Cluster", "InProcessInterBrokerClient"]

log = logging.getLogger("pylogq.cluster")

#: The endpoint every in-process broker registers with before it serves a listener.
IN_PROCESS_LISTENER = "INPROCESS"
TopicPartition = Tuple[str, int]


class InProcessInterBrokerClient:
    """Another broker of the same :class:`Cluster`, called directly; BrokerNotAvailableError
    when it is stopped (as a refused connection would be)."""

    def __init__(self, cluster: "Cluster", source: int, broker_id: int) -> None:
        self._cluster = cluster
        self._source = source
        self._broker_id = broker_id

    def _target(self) -> Broker:
        broker = self._cluster.running(self._broker_id)
        if broker is None:
            raise errors.BrokerNotAvailableError("broker %d is not running" % self._broker_id)
        if not self._cluster.linked(self._source, self._broker_id):
            raise errors.BrokerNotAvailableError("broker %d cannot reach broker %d (the link is cut)"
                                                 % (self._source, self._broker_id))
        return broker

    def leader_and_isr(self, request: LeaderAndIsrRequest) -> Tuple[int, Dict[TopicPartition, int]]:
        return self._target().leader_and_isr(request)

    def update_metadata(self, request: UpdateMetadataRequest) -> int:
        return self._target().update_metadata(request)

    def stop_replica(self, request: StopReplicaRequest) -> Tuple[int, Dict[TopicPartition, int]]:
        return self._target().stop_replica(request)

    def controlled_shutdown(self, broker_id: int, broker_epoch: int) -> Tuple[int, List[TopicPartition]]:
        return self._target().controlled_shutdown_of(broker_id, broker_epoch)

    def replica_fetch(self, replica_id: int, broker_epoch: int, partitions: Sequence[ReplicaFetchPartition],
                      max_wait_ms: int, min_bytes: int, max_bytes: int) -> Dict[TopicPartition, FetchResult]:
        op = self._target().replica_fetch_async(replica_id, broker_epoch, partitions, max_wait_ms, min_bytes,
                                                max_bytes)
        op.wait()
        # The records are read now, as they would be sent: a file region read later could see
        # the leader's file after a truncation.
        return {tp: r._replace(records=RecordBytes(r.records.read())) if r.records is not None else r
                for tp, r in op.answer().items()}

    def offsets_for_leader_epoch(self, replica_id: int, partitions: Mapping[TopicPartition, Tuple[int, int]]
                                 ) -> Dict[TopicPartition, EpochEndOffset]:
        return self._target().offsets_for_leader_epoch(dict(partitions))

    def abort(self) -> None:
        pass  # a direct call cannot be abandoned half-way

    def close(self) -> None:
        pass


class Cluster:
    """``n_brokers`` replicating brokers in this process (ids 0..n-1), data under ``data_dir``.

    ``config`` is every broker's (Kafka's keys); ``broker_config`` adds per-broker keys
    (``{1: {"broker.rack": "b"}}``). Use as a context manager, or call :meth:`close`.
    Thread-safe.
    """

    def __init__(self, n_brokers: int, data_dir: str, *, broker_config: Optional[Mapping[int, Mapping[str, Any]]] = None,
                 start: bool = True, network: bool = False, **config: Any) -> None:
        """``network=True``: the brokers talk to each other over the Kafka protocol on loopback
        (each serves a listener from its start), as separate processes would; by default
        they call each other directly."""
        if n_brokers < 1:
            raise ValueError("a cluster has at least one broker, got %d" % n_brokers)
        self.data_dir = os.path.abspath(data_dir)
        self.n_brokers = n_brokers
        self.network = network
        self.config = dict(config)
        self.broker_config = {b: dict(c) for b, c in (broker_config or {}).items()}
        self.zookeeper = InMemoryZooKeeper()
        self._lock = threading.RLock()
        self._brokers: Dict[int, Broker] = {}
        self._sessions: Dict[int, InMemoryStoreClient] = {}
        self._served: Dict[int, Tuple[str, int]] = {}
        self._serve_options: Optional[Dict[str, Any]] = None
        self._cut: Set[Tuple[int, int]] = set()  # (a, b) pairs of brokers that cannot reach each other
        self.closed = False
        if start:
            try:
                for b in range(n_brokers):
                    self.start_broker(b)
            except BaseException:
                self.close()
                raise

    # -- brokers --------------------------------------------------------------------------

    def _settings(self, broker_id: int) -> Dict[str, Any]:
        # __consumer_offsets replicated like a production cluster's (Kafka's default of 3), on
        # at most as many brokers as there are.
        settings: Dict[str, Any] = {}
        if not any(k in self.config for k in ("offsets.topic.replication.factor", "offsets_topic_replication_factor")):
            settings["offsets.topic.replication.factor"] = min(3, self.n_brokers)
        settings.update(self.config)
        settings.update(self.broker_config.get(broker_id, {}))
        settings["broker.id"] = broker_id
        return settings

    def start_broker(self, broker_id: int) -> Broker:
        """Start broker ``broker_id`` on its data (after :meth:`stop_broker`, as a restart)."""
        with self._lock:
            if self.closed:
                raise errors.PylogqError("the cluster is closed")
            if broker_id in self._brokers:
                raise errors.PylogqError("broker %d is running" % broker_id)
            settings = self._settings(broker_id)
            timeout = int(settings.get("zookeeper.session.timeout.ms", settings.get("zookeeper_session_timeout_ms",
                                                                                     18000)))
            session = self.zookeeper.connect(session_timeout_ms=timeout)
            try:
                broker = Broker(os.path.join(self.data_dir, "broker-%d" % broker_id), metadata_store=session,
                                inter_broker=None if self.network else self._connector_of(broker_id), **settings)
            except BaseException:
                session.close()
                raise
            self._brokers[broker_id] = broker
            self._sessions[broker_id] = session
        try:
            endpoints = [BrokerEndpoint(IN_PROCESS_LISTENER, "in-process", broker_id, "PLAINTEXT")]
            if self.network or self._serve_options is not None:
                options = self._serve_options or {"host": "127.0.0.1", "port": 0}
                host, port = broker.serve(**options)
                self._served[broker_id] = (host, port)
                endpoints = [BrokerEndpoint("PLAINTEXT", host, port)]
            broker.join_cluster(endpoints)
        except BaseException:
            self.stop_broker(broker_id, abrupt=True)
            raise
        return broker

    def stop_broker(self, broker_id: int, abrupt: bool = False) -> None:
        """Stop a broker. ``abrupt``: as a killed process (no controlled shutdown; the others
        notice when its session expires, after ``zookeeper.session.timeout.ms``); else cleanly,
        its leaderships moved to other replicas first."""
        with self._lock:
            broker = self._brokers.get(broker_id)
            session = self._sessions.get(broker_id)
        if broker is None:
            return
        if abrupt:
            assert session is not None
            with self._lock:
                self._brokers.pop(broker_id, None)  # unreachable from now on, as a dead process
            session.abandon()
        else:
            broker.controlled_shutdown()
            with self._lock:
                self._brokers.pop(broker_id, None)
        try:
            broker.close()
        finally:
            with self._lock:
                self._sessions.pop(broker_id, None)
                self._served.pop(broker_id, None)

    def restart_broker(self, broker_id: int, abrupt: bool = False) -> Broker:
        self.stop_broker(broker_id, abrupt=abrupt)
        return self.start_broker(broker_id)

    def running(self, broker_id: int) -> Optional[Broker]:
        """Broker ``broker_id`` if it is running."""
        with self._lock:
            return self._brokers.get(broker_id)

    def broker(self, broker_id: int) -> Broker:
        found = self.running(broker_id)
        if found is None:
            raise errors.BrokerNotAvailableError("broker %d is not running" % broker_id)
        return found

    @property
    def brokers(self) -> List[Broker]:
        """The running brokers, by id."""
        with self._lock:
            return [self._brokers[b] for b in sorted(self._brokers)]

    def _connector_of(self, source: int) -> Callable[[int, str, int], InProcessInterBrokerClient]:
        def connect(broker_id: int, host: str, port: int) -> InProcessInterBrokerClient:
            return InProcessInterBrokerClient(self, source, broker_id)

        return connect

    # -- faults ---------------------------------------------------------------------------

    def cut(self, a: int, b: int) -> None:
        """Cut the link between brokers ``a`` and ``b``, both ways (their requests to each other
        fail as unreachable); their metadata store sessions are not affected."""
        with self._lock:
            self._cut.add((min(a, b), max(a, b)))

    def heal(self, a: Optional[int] = None, b: Optional[int] = None) -> None:
        """Restore the link between ``a`` and ``b`` (every link when both are None)."""
        with self._lock:
            if a is None or b is None:
                self._cut.clear()
            else:
                self._cut.discard((min(a, b), max(a, b)))

    def linked(self, a: int, b: int) -> bool:
        with self._lock:
            return (min(a, b), max(a, b)) not in self._cut

    # -- the cluster's state -------------------------------------------------------------

    def controller(self) -> Optional[Broker]:
        """The broker whose controller is active, if any."""
        for broker in self.brokers:
            if broker.cluster is not None and broker.cluster.controller.active:
                return broker
        return None

    def leader(self, topic: str, partition: int) -> int:
        """The leader of a partition as the running brokers' metadata says (-1: none)."""
        for broker in self.brokers:
            if broker.cluster is not None:
                state = broker.cluster.metadata.partition(topic, partition)
                if state is not None:
                    return state.leader
        return -1

    def wait_until(self, condition: Callable[[], bool], timeout_s: float = 30.0, what: str = "the cluster") -> None:
        """Wait until ``condition()`` holds, checking it every 20 ms (the state it reads is
        spread over brokers and threads that have nothing to wake a waiter with)."""
        deadline = time.monotonic() + timeout_s
        while not condition():
            if time.monotonic() > deadline:
                raise errors.RequestTimedOutError("%s did not happen within %.0f s" % (what, timeout_s))
            time.sleep(0.02)

    def create_topic(self, name: str, partitions: int = 1, replication_factor: Optional[int] = None,
                     config: Optional[Mapping[str, Any]] = None, timeout_s: float = 30.0) -> None:
        """Create a topic through a running broker (the controller assigns and elects), and
        wait until every running replica has taken its role (:meth:`wait_for_topic`)."""
        factor = min(3, self.n_brokers) if replication_factor is None else replication_factor
        self.brokers[0].create_topic(name, partitions, factor, config)
        self.wait_for_topic(name, timeout_s)

    def settled(self, topic: str) -> bool:
        """Whether every running broker's metadata has the topic with a leader for each partition,
        and every running replica follows (or is) that leader."""
        brokers = self.brokers
        if not brokers or brokers[0].cluster is None:
            return False
        states = brokers[0].cluster.metadata.partitions_of(topic)
        if not states:
            return False
        for b in brokers:
            assert b.cluster is not None
            if b.cluster.metadata.partitions_of(topic) != states:
                return False
            for p, state in states.items():
                if state.leader < 0:
                    return False
                if b.broker_id in state.replicas:
                    part = b.hosted((topic, p))
                    if part is None or part.leader_id != state.leader or part.leader_epoch != state.leader_epoch:
                        return False
        return True

    def wait_for_topic(self, topic: str, timeout_s: float = 30.0) -> None:
        """Wait until :meth:`settled` holds for ``topic``."""
        self.wait_until(lambda: self.settled(topic), timeout_s, "topic %s to settle" % topic)

    # -- clients ----------------------------------------------------------------------------

    def serve(self, host: str = "127.0.0.1", **options: Any) -> str:
        """Open a Kafka listener on every broker (port chosen by the system); -> the bootstrap
        list for clients (``host:port,host:port,...``). Brokers started later serve too."""
        with self._lock:
            self._serve_options = dict(options, host=host, port=0)
            brokers = dict(self._brokers)
        for b, broker in sorted(brokers.items()):
            if b in self._served:
                continue
            h, p = broker.serve(host=host, port=0, **options)
            self._served[b] = (h, p)
            broker.join_cluster([BrokerEndpoint("PLAINTEXT", h, p),
                                 BrokerEndpoint(IN_PROCESS_LISTENER, "in-process", b, "PLAINTEXT")])
        return self.bootstrap_servers

    @property
    def bootstrap_servers(self) -> str:
        with self._lock:
            return ",".join("%s:%d" % self._served[b] for b in sorted(self._served))

    # -- lifecycle ------------------------------------------------------------------------

    def close(self) -> None:
        """Stop every broker cleanly (no controlled shutdown: the whole cluster goes)."""
        with self._lock:
            if self.closed:
                return
            self.closed = True
            brokers = sorted(self._brokers)
        for b in brokers:
            broker = self.running(b)
            if broker is None:
                continue
            with self._lock:
                self._brokers.pop(b, None)
            try:
                broker.close()
            except Exception:  # noqa: BLE001 - the others close still
                log.exception("closing broker %d", b)
        self._sessions.clear()

    def __enter__(self) -> "Cluster":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return "Cluster(%d brokers, running %s, data %s)" % (self.n_brokers, sorted(self._brokers), self.data_dir)
