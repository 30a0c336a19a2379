"""The TCP transport: the :class:`Transport` methods as Kafka protocol requests.

``Producer``, ``Consumer`` and ``AdminClient`` given ``bootstrap_servers=`` talk
to ``pylogq-broker`` (or any Kafka-compatible broker) through a
:class:`TcpTransport`. Each method sends the request the in-process transport's
broker call corresponds to and returns the same shapes
(:class:`~pylogq.cluster.contract.ProduceResult`, :class:`~pylogq.cluster.contract.FetchResult`,
:class:`~pylogq.cluster.coordinator.group.coordinator.JoinResult`, ...) with the same error
behaviour: codes where the in-process call returns codes, the pylogq.errors
class of the wire's error code where it raises.

This module holds the routing (:class:`TcpTransport`: bootstrap, metadata,
leaders, coordinators, the controller, connections, retries);
:mod:`pylogq.client.tcp_requests` holds each API's request and the mapping of
its response (:class:`~pylogq.client.tcp_requests.TcpRequests`, which
:class:`TcpTransport` mixes in).

Routing: a bootstrap server answers Metadata, which names the brokers, the
controller and each partition's leader; Produce, Fetch, ListOffsets and
DeleteRecords go to the leader, the admin topic requests and the
reassignment requests to the controller (found again while it answers
NOT_CONTROLLER or cannot be reached), group requests to the group's
coordinator (FindCoordinator), cached and looked up again after
NOT_COORDINATOR, NOT_LEADER_OR_FOLLOWER or a lost connection; a
transactional producer's requests to its transactional id's coordinator
(FindCoordinator with key type 1), cached and looked up again the same way.

Fetching from the closest replica (KIP-392), as Kafka's Java consumer does: a
transport given ``client_rack`` sends it in every Fetch (v11+); when a leader's
answer names a ``preferred_read_replica`` for a partition, that partition's
fetches go to that broker until ``metadata_max_age_ms`` has passed or it
answers an error or cannot be reached, and then to the leader again (which may
name it again). Everything else about a partition (ListOffsets, DeleteRecords,
Produce) still goes to its leader.

Connections: one per broker and *channel*, so a request that the broker may
hold for long never delays another: ``fetch`` carries the long-polled Fetch,
``group`` the JoinGroup and SyncGroup that wait for a rebalance, ``default``
everything else (heartbeats included). A JoinGroup or SyncGroup whose caller's
wait (``timeout_s``) runs out stays in flight; the next call with the same
arguments waits for that same response instead of joining again, as the
in-process coordinator keeps a timed-out member in the group.

Metrics: given a client's :class:`~pylogq.client.metrics.NetworkSensors`,
every connection to a broker records into that broker's sensors
(``node-<id>``; ``bootstrap-<i>`` for the i-th bootstrap address until Metadata
names the broker there, when the connection's later requests count as that
broker's).
"""

from __future__ import annotations

import concurrent.futures
import re
import ssl
import threading
import time
from typing import Any, Callable, Dict, List, Mapping, NamedTuple, Optional, Sequence, Tuple, Union

from ..cluster.contract import BrokerNode, TopicDescription
from ..errors import (
    BrokerError,
    ConfigError,
    CoordinatorLoadInProgressError,
    CoordinatorNotAvailableError,
    KafkaConnectionError,
    LeaderNotAvailableError,
    NoBrokersAvailable,
    NotControllerError,
    NotCoordinatorError,
    ProtocolError,
    RequestTimedOutError,
    UnknownServerError,
    UnknownTopicOrPartitionError,
    UnsupportedVersionError,
)
from ..protocol.constants import ApiKey
from .connection import BrokerConnection
from .metrics import NetworkSensors, NodeSensors
from .ssl_context import client_ssl_context
from .tcp_requests import _COORDINATOR_CODES, FetchedRecords, NodeKey, TcpRequests, _raise
from .transport import Transport

__all__ = ["SASL_MECHANISMS", "SECURITY_PROTOCOLS", "FetchedRecords", "TcpTransport", "parse_bootstrap",
           "without_protocol"]

_RETRY_BACKOFF_S = 0.05
#: The security protocols a client speaks (Kafka's four) and the SASL mechanisms it logs in with.
SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
_LISTENER_PREFIX = re.compile(r"^[A-Za-z0-9_-]+://")

Bootstrap = Tuple[str, int]


def without_protocol(address: str) -> str:
    """``host:port`` of ``address``, without a listener's name in front (``PLAINTEXT://``,
    ``SSL://``: Kafka's clients and tools take a bootstrap address with its listener's)."""
    return _LISTENER_PREFIX.sub("", address, count=1)


def parse_bootstrap(servers: Any) -> List[Bootstrap]:
    """``"host:port,host2:port"`` or a list of ``"host:port"`` -> [(host, port)]; ConfigError if malformed."""
    items = servers.split(",") if isinstance(servers, str) else servers
    if not isinstance(items, (list, tuple)) or not items:
        raise ConfigError("bootstrap_servers must be 'host:port' or a list of them, not %r" % (servers,))
    out = []
    for item in items:
        if not isinstance(item, str):
            raise ConfigError("bootstrap_servers entry %r is not a 'host:port' string" % (item,))
        host, sep, port = without_protocol(item.strip()).rpartition(":")
        host = host.strip("[]")
        if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise ConfigError("bootstrap_servers entry %r is not 'host:port' (e.g. 127.0.0.1:9092)" % (item,))
        out.append((host, int(port)))
    return out


class _Pending(NamedTuple):
    """A JoinGroup or SyncGroup still in flight after its caller stopped waiting."""

    signature: Any
    connection: BrokerConnection
    future: "concurrent.futures.Future[Dict[str, Any]]"
    expires: float


class TcpTransport(TcpRequests, Transport):
    """Kafka's protocol over TCP to the brokers named by ``bootstrap_servers``. Thread-safe.

    Connects at once: an unreachable bootstrap raises NoBrokersAvailable naming
    the addresses tried. ``request_timeout_ms`` bounds each request (past it,
    RequestTimedOutError, and the connection is dropped: its state is unknown);
    a long-polled Fetch gets its wait on top. ``security_protocol`` is
    ``PLAINTEXT``, ``SSL``, ``SASL_PLAINTEXT`` or ``SASL_SSL``: SASL with ``sasl_mechanism``
    ``"PLAIN"``, ``"SCRAM-SHA-256"`` or ``"SCRAM-SHA-512"``, ``sasl_plain_username`` and
    ``sasl_plain_password``, as kafka-python names them for every mechanism; SSL with
    kafka-python's ``ssl_context``, ``ssl_cafile``, ``ssl_certfile``, ``ssl_keyfile``,
    ``ssl_password`` and ``ssl_check_hostname`` (:mod:`pylogq.client.ssl_context`). ``metrics``: the
    client's request sensors (see the module docstring). ``client_rack`` (a consumer's rack,
    Kafka's ``client.rack``) and ``metadata_max_age_ms`` (how long a preferred read replica
    is kept): see the module docstring.

    The routing lives here; each API's request and response mapping comes
    from :class:`~pylogq.client.tcp_requests.TcpRequests`, through the
    routing calls of :class:`~pylogq.client.tcp_requests.TcpRouting`.
    """

    def __init__(self, bootstrap_servers: Union[str, Sequence[str]], client_id: Optional[str] = "pylogq",
                 request_timeout_ms: int = 30000,
                 security_protocol: str = "PLAINTEXT", sasl_mechanism: Optional[str] = None,
                 sasl_plain_username: Optional[str] = None, sasl_plain_password: Optional[str] = None,
                 metrics: Optional[NetworkSensors] = None, client_rack: Optional[str] = None,
                 metadata_max_age_ms: int = 300000, ssl_context: Optional[ssl.SSLContext] = None,
                 ssl_cafile: Optional[str] = None, ssl_certfile: Optional[str] = None,
                 ssl_keyfile: Optional[str] = None, ssl_password: Optional[str] = None,
                 ssl_check_hostname: bool = True) -> None:
        self.bootstrap = parse_bootstrap(bootstrap_servers)
        self._sensors = metrics
        if client_id is not None and not isinstance(client_id, str):
            raise ConfigError("client_id must be a str, not %r" % (client_id,))
        if client_rack is not None and not isinstance(client_rack, str):
            raise ConfigError("client_rack must be a str, not %r" % (client_rack,))
        if isinstance(metadata_max_age_ms, bool) or not isinstance(metadata_max_age_ms, int) or \
                metadata_max_age_ms < 0:
            raise ConfigError("metadata_max_age_ms must be an integer >= 0, not %r" % (metadata_max_age_ms,))
        self.client_rack = client_rack
        self._read_replica_age_s = metadata_max_age_ms / 1000.0
        if isinstance(request_timeout_ms, bool) or not isinstance(request_timeout_ms, int) or request_timeout_ms < 1:
            raise ConfigError("request_timeout_ms must be an integer >= 1, not %r" % (request_timeout_ms,))
        protocol = str(security_protocol).upper()
        if protocol not in SECURITY_PROTOCOLS:
            raise ConfigError("security_protocol %r is not supported; use %s" % (security_protocol,
                                                                                " or ".join(SECURITY_PROTOCOLS)))
        self._sasl: Optional[Tuple[str, str, str]] = None
        self._ssl: Optional[ssl.SSLContext] = None
        if protocol in ("SSL", "SASL_SSL"):
            self._ssl = client_ssl_context(ssl_context, ssl_cafile, ssl_certfile, ssl_keyfile, ssl_password,
                                           ssl_check_hostname)
        if protocol in ("SASL_PLAINTEXT", "SASL_SSL"):
            mechanism = (sasl_mechanism or "PLAIN").upper()
            if mechanism not in SASL_MECHANISMS:
                raise ConfigError("sasl_mechanism %r is not supported; use %s"
                                  % (sasl_mechanism, ", ".join(SASL_MECHANISMS)))
            if not isinstance(sasl_plain_username, str) or not isinstance(sasl_plain_password, str):
                raise ConfigError("security_protocol %s needs sasl_plain_username and "
                                  "sasl_plain_password (str)" % protocol)
            self._sasl = (mechanism, sasl_plain_username, sasl_plain_password)
        self.client_id = client_id
        self.timeout_s = request_timeout_ms / 1000.0
        self._timeout_ms = request_timeout_ms
        self._lock = threading.RLock()
        self._connections: Dict[Tuple[NodeKey, str], BrokerConnection] = {}
        self._openers: Dict[Tuple[NodeKey, str], threading.Lock] = {}
        self._nodes: Dict[int, Bootstrap] = {}
        self._controller: Optional[int] = None
        self._leaders: Dict[str, List[int]] = {}
        # (topic, partition) -> (the preferred read replica a leader named, until when: monotonic s)
        self._read_replicas: Dict[Tuple[str, int], Tuple[int, float]] = {}
        self._coordinators: Dict[Tuple[int, str], int] = {}  # (key type, key) -> node: groups 0, transactions 1
        self._pending: Dict[Tuple[str, str], _Pending] = {}
        self._rebalance_timeout_s = 0.0
        self._closed = False
        self._metadata([])

    def __repr__(self) -> str:
        return "TcpTransport(%s)" % ",".join("%s:%d" % a for a in self.bootstrap)

    # -- connections ---------------------------------------------------------------------------

    def _connection(self, node: NodeKey, channel: str = "default") -> BrokerConnection:
        """The open connection to ``node`` for ``channel``, opened if needed.

        Opening (connect, ApiVersions, SASL) holds only that key's lock, so a
        slow broker never stalls requests to the others or on other channels.
        """
        key = (node, channel)
        with self._lock:
            conn = self._open_connection(key)
            if conn is not None:
                return conn
            opener = self._openers.setdefault(key, threading.Lock())
        with opener:
            with self._lock:
                conn = self._open_connection(key)
                if conn is not None:
                    return conn
                if isinstance(node, tuple):
                    host, port = node[1], node[2]
                    label = "bootstrap %s:%d" % (host, port)
                else:
                    address = self._nodes.get(node)
                    if address is None:
                        raise KafkaConnectionError("broker %d is not in the cluster metadata" % node)
                    host, port = address
                    label = "node %d %s:%d" % (node, host, port)
            conn = BrokerConnection(host, port, self.client_id, self.timeout_s, self._sasl,
                                    label if channel == "default" else "%s %s" % (label, channel),
                                    self._node_sensors(node), self._ssl)
            with self._lock:
                if self._closed:
                    conn.close()
                    raise KafkaConnectionError("this transport is closed")
                self._connections[key] = conn
            return conn

    def _node_sensors(self, node: NodeKey) -> Optional[NodeSensors]:
        """Where a connection to ``node`` counts its requests (None without metrics)."""
        if self._sensors is None:
            return None
        if isinstance(node, tuple):
            address = (node[1], node[2])
            index = self.bootstrap.index(address) if address in self.bootstrap else 0
            return self._sensors.node("bootstrap-%d" % index)
        return self._sensors.node(str(node))

    def _open_connection(self, key: Tuple[NodeKey, str]) -> Optional[BrokerConnection]:
        """The open connection under ``key``, if any (caller holds the lock)."""
        if self._closed:
            raise KafkaConnectionError("this transport is closed")
        conn = self._connections.get(key)
        return conn if conn is not None and not conn.closed else None

    def _any_connection(self) -> BrokerConnection:
        """A connection to some broker: an open one, else the first known broker or bootstrap that answers."""
        with self._lock:
            if self._closed:
                raise KafkaConnectionError("this transport is closed")
            for (node, channel), conn in self._connections.items():
                if channel == "default" and not conn.closed:
                    return conn
            candidates: List[NodeKey] = list(self._nodes) + [("bootstrap", h, p) for h, p in self.bootstrap]
        failures = []
        for node in candidates:
            try:
                return self._connection(node)
            except (KafkaConnectionError, RequestTimedOutError) as exc:  # timed out: no answer to ApiVersions
                failures.append(str(exc.args[0]) if exc.args else str(exc))
        raise NoBrokersAvailable("no broker reachable (bootstrap_servers %s): %s" % (
            ",".join("%s:%d" % a for a in self.bootstrap), "; ".join(failures)))

    def _call(self, node: Optional[NodeKey], api_key: int, body: Mapping[str, Any], channel: str = "default",
              retry: bool = True) -> Dict[str, Any]:
        """One request and its response, to ``node`` (None: any broker). A lost connection
        is reopened and the request sent once more when ``retry`` (it is safe to repeat)."""
        for attempt in (0, 1):
            conn = self._any_connection() if node is None else self._connection(node, channel)
            try:
                return conn.request(api_key, body)
            except KafkaConnectionError:
                if not retry or attempt or self._closed:
                    raise
        raise AssertionError("unreachable")

    def _backoff(self, deadline: float) -> bool:
        """Wait a retry backoff if it fits before ``deadline``; False when time is up."""
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return False
        time.sleep(min(_RETRY_BACKOFF_S, remaining))
        return True

    # -- metadata ------------------------------------------------------------------------------

    def _metadata(self, topics: Optional[List[str]], create: bool = False) -> Dict[str, Any]:
        """A Metadata response (``topics`` None: every topic); refreshes brokers, controller and leaders."""
        body = {"topics": None if topics is None else [{"name": t} for t in topics],
                "allow_auto_topic_creation": create}
        response = self._call(None, ApiKey.METADATA, body)
        with self._lock:
            for b in response["brokers"]:
                self._nodes[b["node_id"]] = (b["host"], b["port"])
            self._controller = response["controller_id"] if response["controller_id"] >= 0 else None
            for t in response["topics"]:
                if t["error_code"] == 0:
                    leaders = [-1] * len(t["partitions"])
                    for p in t["partitions"]:
                        if p["partition_index"] < len(leaders):
                            leaders[p["partition_index"]] = p["leader_id"]
                    self._leaders[t["name"]] = leaders
                else:
                    self._leaders.pop(t["name"], None)
            self._adopt_bootstrap_connections()
        return response

    def _adopt_bootstrap_connections(self) -> None:
        """Reuse a bootstrap connection as the default connection of the node at that address."""
        for node, address in self._nodes.items():
            key = (("bootstrap",) + address, "default")
            conn = self._connections.get(key)
            if conn is not None and not conn.closed and (node, "default") not in self._connections:
                self._connections[(node, "default")] = self._connections.pop(key)
                conn.sensors = self._node_sensors(node)

    def _topic_metadata(self, topic: str, create: bool = False) -> Optional[Dict[str, Any]]:
        """The Metadata entry of ``topic``; None when it does not exist. Waits out a topic
        still being created (LEADER_NOT_AVAILABLE) up to the request timeout."""
        deadline = time.monotonic() + self.timeout_s
        while True:
            response = self._metadata([topic], create)
            entry: Optional[Dict[str, Any]] = next((t for t in response["topics"] if t["name"] == topic), None)
            code = -1 if entry is None else entry["error_code"]
            if code == 0 and entry is not None and all(p["leader_id"] >= 0 for p in entry["partitions"]):
                return entry
            if code == UnknownTopicOrPartitionError.code:
                return None
            if code in (0, LeaderNotAvailableError.code, -1) and self._backoff(deadline):
                continue
            if code == 0:
                return entry
            _raise(code or LeaderNotAvailableError.code, "metadata for topic %r" % topic)

    def _leader(self, topic: str, partition: int) -> int:
        """The node id leading ``topic``-``partition`` (metadata refreshed when not cached)."""
        with self._lock:
            leaders = self._leaders.get(topic)
        if leaders is None or partition >= len(leaders) or leaders[partition] < 0:
            entry = self._topic_metadata(topic)
            with self._lock:
                leaders = self._leaders.get(topic) if entry is not None else None
        if leaders is None or not 0 <= partition < len(leaders):
            raise UnknownTopicOrPartitionError("%s-%d does not exist" % (topic, partition))
        if leaders[partition] < 0:
            raise LeaderNotAvailableError("%s-%d has no leader" % (topic, partition))
        return leaders[partition]

    def _forget_leaders(self, topic: str) -> None:
        with self._lock:
            self._leaders.pop(topic, None)

    def _read_replica(self, topic: str, partition: int) -> Optional[int]:
        """The broker a leader named as ``topic``-``partition``'s preferred read replica, while
        that holds: until ``metadata_max_age_ms`` after it was named (as Kafka's consumer keeps
        it for its metadata's max age), and with its address known; else None (the leader)."""
        key = (topic, partition)
        with self._lock:
            found = self._read_replicas.get(key)
            if found is None:
                return None
            node, until = found
            if time.monotonic() < until and node in self._nodes:
                return node
            del self._read_replicas[key]
            return None

    def _prefer_read_replica(self, topic: str, partition: int, node: int) -> None:
        """A leader named ``node`` as the replica to fetch ``topic``-``partition`` from."""
        with self._lock:
            self._read_replicas[(topic, partition)] = (node, time.monotonic() + self._read_replica_age_s)

    def _forget_read_replica(self, topic: str, partition: int) -> None:
        """Fetch ``topic``-``partition`` from its leader again (its read replica failed it)."""
        with self._lock:
            self._read_replicas.pop((topic, partition), None)

    def _node_ids(self) -> List[int]:
        """The ids of the brokers the metadata names, in order."""
        with self._lock:
            return sorted(self._nodes)

    # -- groups --------------------------------------------------------------------------------

    def _coordinator(self, group_id: str, deadline: float, key_type: int = 0) -> int:
        """The node id of ``group_id``'s coordinator (FindCoordinator, cached); with
        ``key_type`` 1, of the transactional id ``group_id``'s (FindCoordinator v1+)."""
        with self._lock:
            found = self._coordinators.get((key_type, group_id))
        if found is not None:
            return found
        what = "group" if key_type == 0 else "transactional id"
        while True:
            if key_type and self._any_connection().version(ApiKey.FIND_COORDINATOR) < 1:
                raise UnsupportedVersionError("the broker's FindCoordinator cannot find a transaction coordinator "
                                              "(it needs v1)")
            response = self._call(None, ApiKey.FIND_COORDINATOR, {"key": group_id, "key_type": key_type})
            code = response["error_code"]
            if code == 0:
                with self._lock:
                    self._nodes[response["node_id"]] = (response["host"], response["port"])
                    self._coordinators[(key_type, group_id)] = response["node_id"]
                return int(response["node_id"])
            if code not in _COORDINATOR_CODES or not self._backoff(deadline):
                _raise(code, "finding the coordinator of %s %r" % (what, group_id), response.get("error_message"))

    def find_coordinator(self, group_id: str) -> BrokerNode:
        """The broker coordinating ``group_id`` (FindCoordinator), with its advertised address."""
        node = self._coordinator(group_id, time.monotonic() + self.timeout_s)
        with self._lock:
            host, port = self._nodes[node]
        return BrokerNode(node, host, port)

    def _transaction_coordinator(self, transactional_id: str, deadline: float) -> Tuple[int, int]:
        """FindCoordinator for a transactional id (key type 1): -> (0, its coordinator's node id),
        or (the error code, -1) once ``deadline`` passes or the error is not one to wait out.
        Not cached: the administrator's calls are few, and an answer kept would go stale as
        ``__transaction_state``'s leaders move."""
        while True:
            response = self._call(None, ApiKey.FIND_COORDINATOR, {"key": transactional_id, "key_type": 1})
            code = int(response["error_code"])
            if code == 0:
                with self._lock:
                    self._nodes[response["node_id"]] = (response["host"], response["port"])
                return 0, int(response["node_id"])
            if code not in _COORDINATOR_CODES or not self._backoff(deadline):
                return code, -1

    def _forget_coordinator(self, group_id: str, key_type: int = 0) -> None:
        with self._lock:
            self._coordinators.pop((key_type, group_id), None)

    def _group_call(self, group_id: str, api_key: int, body: Mapping[str, Any],
                    code_of: Callable[[Dict[str, Any]], int], key_type: int = 0) -> Dict[str, Any]:
        """A request to the group's coordinator (``key_type`` 1: the transactional id's),
        found again (up to the request timeout) while the answer says it moved or is
        loading, or its connection was lost."""
        deadline = time.monotonic() + self.timeout_s
        while True:
            node = self._coordinator(group_id, deadline, key_type)
            try:
                response = self._call(node, api_key, body)
            except KafkaConnectionError:
                self._forget_coordinator(group_id, key_type)
                if not self._backoff(deadline):
                    raise
                continue
            if code_of(response) in _COORDINATOR_CODES:
                self._forget_coordinator(group_id, key_type)
                if self._backoff(deadline):
                    continue
            return response

    def _group_code(self, group_id: str, api_key: int, body: Mapping[str, Any]) -> int:
        """The error code of a group call that answers only a code; failures become codes too."""
        try:
            return int(self._group_call(group_id, api_key, body, lambda r: r["error_code"])["error_code"])
        except BrokerError as exc:
            return exc.code
        except ProtocolError:  # an undecodable answer: the connection is gone, the next call reconnects
            return UnknownServerError.code

    def _forget_pending(self, group_id: str) -> None:
        """Stop waiting for the group's JoinGroup or SyncGroup still in flight (the member left)."""
        with self._lock:
            for kind in ("join", "sync"):
                self._pending.pop((kind, group_id), None)

    def _await_group(self, kind: str, group_id: str, signature: Any, body: Dict[str, Any], api_key: int,
                     deadline: float, expires_s: float) -> Optional[Dict[str, Any]]:
        """Send (or keep waiting for) a JoinGroup or SyncGroup; None when ``deadline`` passes first."""
        key = (kind, group_id)
        while True:
            with self._lock:
                pending = self._pending.get(key)
                if pending is not None and (pending.signature != signature or time.monotonic() > pending.expires):
                    del self._pending[key]
                    pending.connection.close("abandoned %s of group %s" % (kind, group_id))
                    pending = None
            if pending is None:
                try:
                    node = self._coordinator(group_id, deadline)
                    conn = self._connection(node, "group")
                    future = conn.send(api_key, body)
                except (KafkaConnectionError, CoordinatorNotAvailableError, CoordinatorLoadInProgressError,
                        NotCoordinatorError, RequestTimedOutError):
                    self._forget_coordinator(group_id)
                    if self._backoff(deadline):
                        continue
                    return None
                pending = _Pending(signature, conn, future, time.monotonic() + expires_s)
                with self._lock:
                    self._pending[key] = pending
            try:
                response = pending.future.result(max(0.0, deadline - time.monotonic()))
            except concurrent.futures.TimeoutError:
                return None
            except (KafkaConnectionError, ProtocolError):
                with self._lock:
                    if self._pending.get(key) is pending:
                        del self._pending[key]
                self._forget_coordinator(group_id)
                if self._backoff(deadline):
                    continue
                return None
            with self._lock:
                if self._pending.get(key) is pending:
                    del self._pending[key]
            if response["error_code"] in _COORDINATOR_CODES:
                self._forget_coordinator(group_id)
                if self._backoff(deadline):
                    continue
                return None
            return response

    # -- admin ---------------------------------------------------------------------------------

    def _controller_call(self, api_key: int, body: Mapping[str, Any], code_of: Callable[[Dict[str, Any]], int],
                         timeout_s: Optional[float] = None, retry_lost: bool = False) -> Dict[str, Any]:
        """A request to the controller, found again (Metadata names it) while the answer is
        NOT_CONTROLLER or its broker cannot be reached, for up to ``timeout_s`` (None: the
        request timeout); past it, the last answer is returned. A connection lost with the
        request in flight is retried only when ``retry_lost`` (the request is safe to repeat):
        the controller may have carried it out.
        """
        deadline = time.monotonic() + (self.timeout_s if timeout_s is None else timeout_s)
        while True:
            with self._lock:
                controller = self._controller
            if controller is None:
                self._metadata([])
                with self._lock:
                    controller = self._controller
            try:
                conn = self._any_connection() if controller is None else self._connection(controller)
            except (KafkaConnectionError, RequestTimedOutError):
                # Nothing was sent: the controller moved or its broker is down.
                self._forget_controller()
                if self._backoff(deadline):
                    continue
                raise
            try:
                response = conn.request(api_key, body)
            except KafkaConnectionError:
                self._forget_controller()
                if retry_lost and not self._closed and self._backoff(deadline):
                    continue
                raise
            if code_of(response) == NotControllerError.code:
                self._forget_controller()
                if self._backoff(deadline):
                    continue
            return response

    def _forget_controller(self) -> None:
        with self._lock:
            self._controller = None

    def _await_topic(self, name: str, ready: Callable[[TopicDescription], bool]) -> TopicDescription:
        """The topic's description once metadata shows the change (brokers may lag the controller)."""
        deadline = time.monotonic() + self.timeout_s
        while True:
            try:
                desc = self.describe_topic(name)
                if ready(desc) or not self._backoff(deadline):
                    return desc
            except UnknownTopicOrPartitionError:
                if not self._backoff(deadline):
                    raise

    # -- lifecycle -------------------------------------------------------------------------------------

    def close(self) -> None:
        """Close every connection; requests in flight fail with KafkaConnectionError. Idempotent.

        First each connection that carried acks=0 produces is drained (one
        round trip, up to the request timeout), so the broker has read them.
        """
        with self._lock:
            connections = list(self._connections.values())
        for conn in connections:
            conn.drain()
        with self._lock:
            self._closed = True
            connections = list(self._connections.values())
            self._connections.clear()
            self._pending.clear()
        for conn in connections:
            conn.close()
