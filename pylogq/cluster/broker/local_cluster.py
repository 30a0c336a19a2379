"""``pylogq.Cluster``: n replicating brokers in one process, coordinated by an in-memory store.

The brokers are real :class:`pylogq.Broker` objects, each with its own data directory,
controller, replica manager and fetchers; they share an
:class:`~pylogq.cluster.zk.memory_store.InMemoryZooKeeper` (ZooKeeper's semantics:
sessions, ephemeral nodes, conditional writes, watches) and reach each other through
:class:`InProcessInterBrokerClient`, which calls the other broker directly (the
requests and answers are the same typed objects the Kafka protocol carries between
processes). :meth:`Cluster.serve` opens a Kafka listener on each broker for real clients.

The faults a production cluster meets, as far as one process can play them:

- a broker stopped abruptly, as if its process were killed (its session expires
  after ``zookeeper.session.timeout.ms``, its data stays on disk as the page cache
  would keep it), or cleanly with a controlled shutdown; started again on the same
  data, or on an empty data directory (:meth:`Cluster.start_broker`'s ``wipe``: a
  replaced disk);
- a broker frozen (SIGSTOP, a long GC pause: :meth:`Cluster.freeze_broker`), see below;
- a broker's connection to the store lost for a while, its session kept or expired
  (:meth:`Cluster.disconnect_store`), and the store restarted with every session
  kept (:meth:`Cluster.restart_store`);
- the link between two brokers cut (:meth:`Cluster.cut`).

With ``network=True`` the brokers reach each other over the Kafka protocol, through
:class:`NetworkInterBrokerClient`, and the same faults apply to those connections: a cut
link or a frozen broker gates a TCP request exactly as it gates a direct call.

A frozen broker is gated, not stopped: Python cannot suspend another thread. Its
store session stops heartbeating and its calls to the store and callbacks from it
wait (:meth:`~pylogq.cluster.zk.memory_store.InMemoryStoreClient.freeze`); its threads
that call another broker wait at its gate before the request and again before they
take the answer; other brokers' requests to it wait at its gate, before it takes
them and before its answer leaves, until it is thawed or ``inter_broker_timeout_s``
has passed (then BrokerNotAvailableError, as a TCP request to a stopped process
times out). What touches neither the store nor another broker goes on in it: its
timer expires delayed operations (an acks=all produce times out), its scheduler
flushes and checks ISRs (up to the store write, which waits), and a call already in
flight when it froze finishes. Clients are not gated: :meth:`Cluster.serve`'s
listeners and ``Broker`` calls made directly answer while it is frozen; a test
playing a client checks :meth:`Cluster.frozen` and takes no answer from it, as a
client's request would time out.
"""

from __future__ import annotations

import logging
import os
import shutil
import threading
import time
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Set, Tuple, TypeVar

from ... import errors
from ..contract import (
    BrokerEndpoint,
    EpochEndOffset,
    FetchResult,
    InterBrokerClient,
    LeaderAndIsrRequest,
    RecordBytes,
    ReplicaFetchPartition,
    StopReplicaRequest,
    TxnMarker,
    UpdateMetadataRequest,
    inter_broker_connector,
)
from ..coordinator.group.offsets_topic import OFFSETS_TOPIC
from ..zk.memory_store import InMemoryStoreClient, InMemoryZooKeeper
from .broker import Broker
from ...errors import InvalidArgumentError

__all__ = ["BrokerGate", "Cluster", "InProcessInterBrokerClient", "INTER_BROKER_TIMEOUT_S",
           "NetworkInterBrokerClient"]

log = logging.getLogger("pylogq.cluster")

#: The endpoint every in-process broker registers with before it serves a listener.
IN_PROCESS_LISTENER = "INPROCESS"
TopicPartition = Tuple[str, int]


_T = TypeVar("_T")

#: How long a request to a frozen broker waits for it (beyond the request's own wait), as
#: the TCP inter-broker client's socket timeout (Kafka's ``replica.socket.timeout.ms``).
INTER_BROKER_TIMEOUT_S = 30.0


class BrokerGate:
    """One broker process's run state as threads see it: running, frozen, or gone (stopped).

    A frozen broker's own threads wait at its gate when they call another broker
    (:meth:`pass_own`); other brokers' requests wait at it up to a deadline
    (:meth:`reach`). Gone releases every waiter with BrokerNotAvailableError.
    Thread-safe.
    """

    def __init__(self, broker_id: int) -> None:
        self.broker_id = broker_id
        self._cond = threading.Condition()
        self._frozen = False
        self._gone = False

    @property
    def frozen(self) -> bool:
        return self._frozen

    def freeze(self) -> None:
        with self._cond:
            self._frozen = True

    def thaw(self) -> None:
        with self._cond:
            self._frozen = False
            self._cond.notify_all()

    def close(self) -> None:
        """The process is gone: nothing waits at its gate any more."""
        with self._cond:
            self._gone = True
            self._cond.notify_all()

    def pass_own(self) -> None:
        """A thread of this broker goes on once the broker is not frozen (however long);
        BrokerNotAvailableError once it is gone."""
        with self._cond:
            while self._frozen and not self._gone:
                self._cond.wait()
            if self._gone:
                raise errors.BrokerNotAvailableError("broker %d is stopped" % self.broker_id)

    def reach(self, deadline: float, aborted: Callable[[], bool] = lambda: False) -> None:
        """Another broker's request goes on once this one is not frozen; BrokerNotAvailableError
        when it is gone, still frozen at ``deadline`` (``time.monotonic()``), or ``aborted()``
        (checked when :meth:`wake` is called)."""
        with self._cond:
            while self._frozen and not self._gone and not aborted():
                left = deadline - time.monotonic()
                if left <= 0:
                    raise errors.BrokerNotAvailableError("broker %d did not answer in time (it is frozen)"
                                                         % self.broker_id)
                self._cond.wait(left)
            if self._gone:
                raise errors.BrokerNotAvailableError("broker %d is not running" % self.broker_id)
            if aborted():
                raise errors.BrokerNotAvailableError("the request to broker %d was aborted" % self.broker_id)

    def wake(self) -> None:
        """Make the requests waiting at the gate check whether they were aborted."""
        with self._cond:
            self._cond.notify_all()


class InProcessInterBrokerClient:
    """Another broker of the same :class:`Cluster`, called directly; BrokerNotAvailableError
    when it is stopped (as a refused connection would be), cut off, or frozen for longer
    than the cluster's ``inter_broker_timeout_s``. A frozen caller waits at its own gate."""

    def __init__(self, cluster: "Cluster", source: int, broker_id: int, source_gate: Optional[BrokerGate] = None
                 ) -> None:
        self._cluster = cluster
        self._source = source
        self._broker_id = broker_id
        self._source_gate = source_gate if source_gate is not None else BrokerGate(source)
        self._lock = threading.Lock()
        self._calls = 0  # calls made; the one in flight is the last
        self._aborted = 0  # the last call abort() ended
        self._waiting_at: Optional[BrokerGate] = None

    def _call(self, call: Callable[[Broker], _T], wait_ms: int = 0) -> _T:
        self._source_gate.pass_own()
        with self._lock:
            self._calls += 1
            this = self._calls

        def aborted() -> bool:
            return self._aborted == this

        broker, gate = self._cluster._reach(self._source, self._broker_id)
        with self._lock:
            self._waiting_at = gate
        try:
            deadline = time.monotonic() + self._cluster.inter_broker_timeout_s + max(0, wait_ms) / 1000.0
            gate.reach(deadline, aborted)
            answer = call(broker)
            gate.reach(deadline, aborted)  # the answer leaves a frozen broker once it is thawed
        finally:
            with self._lock:
                self._waiting_at = None
        self._source_gate.pass_own()  # and a frozen caller takes it once thawed
        return answer

    def abort(self) -> None:
        """End the call in flight, if any: one waiting for a frozen broker raises
        BrokerNotAvailableError at once (the next call is not affected)."""
        with self._lock:
            self._aborted = self._calls
            gate = self._waiting_at
        if gate is not None:
            gate.wake()

    def leader_and_isr(self, request: LeaderAndIsrRequest) -> Tuple[int, Dict[TopicPartition, int]]:
        return self._call(lambda broker: broker.leader_and_isr(request))

    def update_metadata(self, request: UpdateMetadataRequest) -> int:
        return self._call(lambda broker: broker.update_metadata(request))

    def stop_replica(self, request: StopReplicaRequest) -> Tuple[int, Dict[TopicPartition, int]]:
        return self._call(lambda broker: broker.stop_replica(request))

    def controlled_shutdown(self, broker_id: int, broker_epoch: int) -> Tuple[int, List[TopicPartition]]:
        return self._call(lambda broker: broker.controlled_shutdown_of(broker_id, broker_epoch))

    def replica_fetch(self, replica_id: int, broker_epoch: int, partitions: Sequence[ReplicaFetchPartition],
                      max_wait_ms: int, min_bytes: int, max_bytes: int) -> Dict[TopicPartition, FetchResult]:
        def fetch(broker: Broker) -> Dict[TopicPartition, FetchResult]:
            op = broker.replica_fetch_async(replica_id, broker_epoch, partitions, max_wait_ms, min_bytes, max_bytes)
            op.wait()
            # The records are read now, as they would be sent: a file region read later could see
            # the leader's file after a truncation.
            return {tp: r._replace(records=RecordBytes(r.records.read())) if r.records is not None else r
                    for tp, r in op.answer().items()}

        return self._call(fetch, max_wait_ms)

    def offsets_for_leader_epoch(self, replica_id: int, partitions: Mapping[TopicPartition, Tuple[int, int]]
                                 ) -> Dict[TopicPartition, EpochEndOffset]:
        return self._call(lambda broker: broker.offsets_for_leader_epoch(dict(partitions)))

    def write_txn_markers(self, markers: Sequence[TxnMarker]) -> Dict[int, Dict[TopicPartition, int]]:
        return self._call(lambda broker: broker.write_txn_markers(markers))

    def close(self) -> None:
        pass


class NetworkInterBrokerClient(InProcessInterBrokerClient):
    """Another broker of a ``network=True`` :class:`Cluster`, over the Kafka protocol (``remote``,
    a client of its listener), with the cluster's faults applied as to a direct call: the
    request fails as unreachable when the target is stopped or the link is cut, and waits
    at the gates of a frozen caller or target. A call already on the wire when the link is
    cut finishes, as a direct call does; :meth:`abort` ends it (its connection is shut
    down, the next call opens another)."""

    def __init__(self, cluster: "Cluster", source: int, broker_id: int, source_gate: BrokerGate,
                 remote: InterBrokerClient) -> None:
        super().__init__(cluster, source, broker_id, source_gate)
        self._remote = remote
        self._on_wire = False

    def _remote_call(self, call: Callable[[], _T], wait_ms: int = 0) -> _T:
        def sent(_: Broker) -> _T:
            with self._lock:
                self._on_wire = True
            try:
                return call()
            finally:
                with self._lock:
                    self._on_wire = False

        return self._call(sent, wait_ms)

    def abort(self) -> None:
        super().abort()
        with self._lock:
            on_wire = self._on_wire
        if on_wire:
            self._remote.abort()

    def leader_and_isr(self, request: LeaderAndIsrRequest) -> Tuple[int, Dict[TopicPartition, int]]:
        return self._remote_call(lambda: self._remote.leader_and_isr(request))

    def update_metadata(self, request: UpdateMetadataRequest) -> int:
        return self._remote_call(lambda: self._remote.update_metadata(request))

    def stop_replica(self, request: StopReplicaRequest) -> Tuple[int, Dict[TopicPartition, int]]:
        return self._remote_call(lambda: self._remote.stop_replica(request))

    def controlled_shutdown(self, broker_id: int, broker_epoch: int) -> Tuple[int, List[TopicPartition]]:
        return self._remote_call(lambda: self._remote.controlled_shutdown(broker_id, broker_epoch))

    def replica_fetch(self, replica_id: int, broker_epoch: int, partitions: Sequence[ReplicaFetchPartition],
                      max_wait_ms: int, min_bytes: int, max_bytes: int) -> Dict[TopicPartition, FetchResult]:
        return self._remote_call(lambda: self._remote.replica_fetch(replica_id, broker_epoch, partitions, max_wait_ms,
                                                                    min_bytes, max_bytes), max_wait_ms)

    def offsets_for_leader_epoch(self, replica_id: int, partitions: Mapping[TopicPartition, Tuple[int, int]]
                                 ) -> Dict[TopicPartition, EpochEndOffset]:
        return self._remote_call(lambda: self._remote.offsets_for_leader_epoch(replica_id, partitions))

    def write_txn_markers(self, markers: Sequence[TxnMarker]) -> Dict[int, Dict[TopicPartition, int]]:
        return self._remote_call(lambda: self._remote.write_txn_markers(markers))

    def close(self) -> None:
        self._remote.close()


class Cluster:
    """``n_brokers`` replicating brokers in this process (ids 0..n-1), data under ``data_dir``.

    ``config`` is every broker's (Kafka's keys); ``broker_config`` adds per-broker keys
    (``{1: {"broker.rack": "b"}}``). Use as a context manager, or call :meth:`close`.
    Thread-safe.
    """

    def __init__(self, n_brokers: int, data_dir: str, *, broker_config: Optional[Mapping[int, Mapping[str, Any]]] = None,
                 start: bool = True, network: bool = False, inter_broker_timeout_s: float = INTER_BROKER_TIMEOUT_S,
                 **config: Any) -> None:
        """``network=True``: the brokers talk to each other over the Kafka protocol on loopback
        (each serves a listener from its start), as separate processes would, :meth:`cut`
        and :meth:`freeze_broker` applying to those connections; by default they call each
        other directly. ``inter_broker_timeout_s``: how long a request to a
        frozen broker waits for it (beyond its own wait) before it fails."""
        if n_brokers < 1:
            raise InvalidArgumentError("a cluster has at least one broker, got %d" % n_brokers)
        self.data_dir = os.path.abspath(data_dir)
        self.n_brokers = n_brokers
        self.network = network
        self.config = dict(config)
        self.broker_config = {b: dict(c) for b, c in (broker_config or {}).items()}
        self.inter_broker_timeout_s = inter_broker_timeout_s
        self.zookeeper = InMemoryZooKeeper()
        self._lock = threading.RLock()
        self._brokers: Dict[int, Broker] = {}
        self._sessions: Dict[int, InMemoryStoreClient] = {}
        self._gates: Dict[int, BrokerGate] = {}
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
        # __transaction_state likewise (Kafka's defaults: 3 replicas, min.insync.replicas 2).
        if not any(k in self.config for k in ("transaction.state.log.replication.factor",
                                              "transaction_state_log_replication_factor")):
            settings["transaction.state.log.replication.factor"] = min(3, self.n_brokers)
            settings["transaction.state.log.min.isr"] = min(2, self.n_brokers)
        settings.update(self.config)
        settings.update(self.broker_config.get(broker_id, {}))
        settings["broker.id"] = broker_id
        return settings

    def broker_dir(self, broker_id: int) -> str:
        """Broker ``broker_id``'s data directory."""
        return os.path.join(self.data_dir, "broker-%d" % broker_id)

    def start_broker(self, broker_id: int, wipe: bool = False) -> Broker:
        """Start broker ``broker_id`` on its data (after :meth:`stop_broker`, as a restart).
        ``wipe``: on an empty data directory instead (a replaced disk, the same broker id)."""
        with self._lock:
            if self.closed:
                raise errors.PylogqError("the cluster is closed")
            if broker_id in self._brokers:
                raise errors.PylogqError("broker %d is running" % broker_id)
            if wipe:
                shutil.rmtree(self.broker_dir(broker_id), ignore_errors=True)
            settings = self._settings(broker_id)
            timeout = int(settings.get("zookeeper.session.timeout.ms", settings.get("zookeeper_session_timeout_ms",
                                                                                     18000)))
            session = self.zookeeper.connect(session_timeout_ms=timeout)
            gate = BrokerGate(broker_id)
            try:
                broker = Broker(self.broker_dir(broker_id), metadata_store=session,
                                inter_broker=self._connector_of(broker_id, gate),
                                **settings)
            except BaseException:
                session.close()
                raise
            self._brokers[broker_id] = broker
            self._sessions[broker_id] = session
            self._gates[broker_id] = gate
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
            gate = self._gates.get(broker_id)
        if broker is None:
            return
        assert session is not None and gate is not None
        if abrupt:
            with self._lock:
                self._brokers.pop(broker_id, None)  # unreachable from now on, as a dead process
            gate.close()  # a frozen one's threads waiting at its gate go (to find it gone)
            session.abandon()
        else:
            self.thaw_broker(broker_id)  # a frozen process takes its SIGTERM when it runs again
            broker.controlled_shutdown()
            with self._lock:
                self._brokers.pop(broker_id, None)
        try:
            broker.close()
        finally:
            gate.close()
            with self._lock:
                self._sessions.pop(broker_id, None)
                self._served.pop(broker_id, None)
                self._gates.pop(broker_id, None)

    def restart_broker(self, broker_id: int, abrupt: bool = False, wipe: bool = False) -> Broker:
        self.stop_broker(broker_id, abrupt=abrupt)
        return self.start_broker(broker_id, wipe=wipe)

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

    def _connector_of(self, source: int, gate: BrokerGate) -> Callable[[int, str, int], InProcessInterBrokerClient]:
        """How broker ``source`` reaches the others: directly, or over the Kafka protocol to the
        endpoint it was given (``network``), the cluster's faults applied either way."""
        def connect(broker_id: int, host: str, port: int) -> InProcessInterBrokerClient:
            if not self.network:
                return InProcessInterBrokerClient(self, source, broker_id, gate)
            tcp = inter_broker_connector()
            if tcp is None:
                raise errors.PylogqError("a network cluster needs pylogq.server (import it) to reach its brokers")
            return NetworkInterBrokerClient(self, source, broker_id, gate, tcp(broker_id, host, port))

        return connect

    def inter_broker_client(self, source: int, target: int) -> InProcessInterBrokerClient:
        """A client of broker ``target`` as running broker ``source``'s threads call it (waiting
        at ``source``'s gate when it is frozen), over the Kafka protocol when ``network``."""
        with self._lock:
            gate = self._gates.get(source)
            if gate is None:
                raise errors.BrokerNotAvailableError("broker %d is not running" % source)
            host, port = self._served.get(target, ("in-process", target))
            if self.network and target not in self._served:
                raise errors.BrokerNotAvailableError("broker %d is not running" % target)
        return self._connector_of(source, gate)(target, host, port)

    def _reach(self, source: int, target: int) -> Tuple[Broker, BrokerGate]:
        """The broker ``source`` calls and its gate; BrokerNotAvailableError when it is stopped
        or the link is cut."""
        with self._lock:
            broker = self._brokers.get(target)
            gate = self._gates.get(target)
            if broker is None or gate is None:
                raise errors.BrokerNotAvailableError("broker %d is not running" % target)
            if (min(source, target), max(source, target)) in self._cut:
                raise errors.BrokerNotAvailableError("broker %d cannot reach broker %d (the link is cut)"
                                                     % (source, target))
            return broker, gate

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

    def freeze_broker(self, broker_id: int) -> None:
        """Freeze a running broker, as SIGSTOP or a long GC pause would (see the module
        docstring for what is gated): its session stops heartbeating and expires after
        ``zookeeper.session.timeout.ms`` unless it is thawed first."""
        with self._lock:
            broker = self._brokers.get(broker_id)
            if broker is None:
                raise errors.BrokerNotAvailableError("broker %d is not running" % broker_id)
            self._gates[broker_id].freeze()
            self._sessions[broker_id].freeze()

    def thaw_broker(self, broker_id: int) -> None:
        """Let a frozen broker run again: it finds what happened meanwhile (its session
        expired, new leaders elected). Nothing if it is not frozen or not running."""
        with self._lock:
            session = self._sessions.get(broker_id)
            gate = self._gates.get(broker_id)
        if session is not None and gate is not None:
            session.thaw()
            gate.thaw()

    def frozen(self, broker_id: int) -> bool:
        """Whether broker ``broker_id`` is running and frozen."""
        with self._lock:
            gate = self._gates.get(broker_id)
            return gate is not None and gate.frozen and broker_id in self._brokers

    def disconnect_store(self, broker_id: int, for_s: Optional[float] = None, after_next_write: bool = False
                         ) -> None:
        """Cut broker ``broker_id``'s connection to the store (a network blip or partition):
        SUSPENDED, its watches dropped, its store calls waiting; its session expires if the
        connection is not back within ``zookeeper.session.timeout.ms``. ``for_s``: back
        after that many seconds by itself (else :meth:`reconnect_store`).
        ``after_next_write``: right after its next write is applied, which then fails as
        if its answer were lost (a write of unknown outcome)."""
        with self._lock:
            session = self._sessions.get(broker_id)
            if session is None or broker_id not in self._brokers:
                raise errors.BrokerNotAvailableError("broker %d is not running" % broker_id)
        session.disconnect(for_s, after_next_write)

    def store_session(self, broker_id: int) -> Optional[InMemoryStoreClient]:
        """Running broker ``broker_id``'s store client (its session's state, for tests), or None."""
        with self._lock:
            return self._sessions.get(broker_id) if broker_id in self._brokers else None

    def reconnect_store(self, broker_id: int) -> None:
        """Give broker ``broker_id`` its store connection back (its session, if it has not
        expired; else a new one, after EXPIRED), or, connected, call off a disconnection armed
        for after its next write (armed while disconnected, it applies once connected)."""
        with self._lock:
            session = self._sessions.get(broker_id)
        if session is not None:
            session.reconnect()

    def stop_store(self) -> None:
        """Take the store down (every ZooKeeper server): every broker is disconnected, its
        store calls wait, and no session expires until :meth:`start_store`."""
        self.zookeeper.stop()

    def start_store(self) -> None:
        """Bring the store back after :meth:`stop_store`: each broker reconnects with its
        session (the timeouts count again from now, as a restarted ZooKeeper's do)."""
        self.zookeeper.start()

    def restart_store(self, down_s: float = 0.0) -> None:
        """:meth:`stop_store`, down for ``down_s`` seconds (the fault's length), :meth:`start_store`.
        Returns once the store serves again."""
        self.zookeeper.restart(down_s)

    # -- the cluster's state -------------------------------------------------------------

    @property
    def thawed_brokers(self) -> List[Broker]:
        """The running brokers that are not frozen, by id (a frozen one's view is stale)."""
        with self._lock:
            return [self._brokers[b] for b in sorted(self._brokers) if not self._gates[b].frozen]

    def controller(self) -> Optional[Broker]:
        """The broker whose controller is active, if any (frozen brokers aside)."""
        for broker in self.thawed_brokers:
            if broker.cluster is not None and broker.cluster.controller.active:
                return broker
        return None

    def leader(self, topic: str, partition: int) -> int:
        """The leader of a partition as the running brokers' metadata says (-1: none); frozen
        brokers, whose metadata is stale, aside."""
        for broker in self.thawed_brokers:
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
        and every running replica follows (or is) that leader (frozen brokers aside); for
        ``__consumer_offsets``, also whether each leader's group coordinator has loaded it."""
        brokers = self.thawed_brokers
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
                if (topic == OFFSETS_TOPIC and b.broker_id == state.leader
                        and not b.group_coordinator.serves_partition(p)):
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
        # The new endpoints reach every broker's metadata through the controller's UpdateMetadata:
        # until then a client's Metadata would list no broker it can connect to.
        self.wait_until(self._endpoints_known, 30.0, "every broker's metadata to list the served listeners")
        return self.bootstrap_servers

    def _endpoints_known(self) -> bool:
        with self._lock:
            served = dict(self._served)
        for broker in self.thawed_brokers:
            if broker.cluster is None:
                return False
            live = broker.cluster.metadata.live_brokers()
            for b, (h, p) in served.items():
                reg = live.get(b)
                if reg is None or not any(e.listener == "PLAINTEXT" and (e.host, e.port) == (h, p)
                                          for e in reg.endpoints):
                    return False
        return True

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
        # The faults end first: brokers that cannot reach the store would wait for it to close.
        self.zookeeper.start()
        for b in brokers:
            self.thaw_broker(b)
            self.reconnect_store(b)
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
            finally:
                with self._lock:
                    gate = self._gates.pop(b, None)
                if gate is not None:
                    gate.close()
        self._sessions.clear()
        self.zookeeper.close()

    def __enter__(self) -> "Cluster":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return "Cluster(%d brokers, running %s, data %s)" % (self.n_brokers, sorted(self._brokers), self.data_dir)
