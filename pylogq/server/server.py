"""``KafkaServer``: the asyncio listener that serves a :class:`pylogq.Broker` to Kafka clients.

One event loop (uvloop when installed and asked for) accepts connections on every
listener, reads requests and writes responses. Requests that wait for an event
(long-poll fetches, group joins and syncs) are the broker's delayed operations,
answered through futures on the loop (:meth:`KafkaServer.parked`); broker calls that
do file work (topic creation and deletion) run in a small executor.
``stop()`` stops accepting, lets every request already read get its answer, and
closes the connections (those still in their TLS handshake at once, and waits until
they are closed); the broker itself is closed by its owner.

TLS (docs/security.md): an SSL or SASL_SSL listener's connections handshake first
(:mod:`.ssl_transport`), within ``socket.request.read.timeout.ms`` (or
``connections.max.idle.ms`` when shorter): a connection that stalls in its handshake or
sends bytes that are not TLS is closed with one log line, and holds until then its socket
only (and OpenSSL's state once it has sent something); it counts against the connection
limits as any other. On an SSL listener the client's certificate, when it shows one, names
its principal (:mod:`.ssl_principal`); on a SASL_SSL listener its SASL login does.

Connection limits (docs/operations.md, "Connection limits"): ``max.connections`` and
``max.connections.per.ip`` (with ``max.connections.per.ip.overrides``) are checked as a
connection is accepted, and one over a limit is closed at once; one reaper task closes
connections that stay idle past ``connections.max.idle.ms`` and requests that do not
arrive within ``socket.request.read.timeout.ms`` (see :mod:`.connection`). Connection
creation rates (KIP-612, :class:`~.quotas.ConnectionQuotas`) delay the acceptance of new
connections past ``max.connection.creation.rate``, one at a time per listener (Kafka's
acceptor waits the same way), and hold then close a connection from an address past its
``connection_creation_rate``; as in Kafka's ``ConnectionQuotas.inc``, the limits are
checked and the connection counted only after those waits, so a connection held for its
address's throttle counts against no limit. Client quotas (:class:`~.quotas.ClientQuotas`) follow the
broker's quota configs.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import logging
import os
import socket
import ssl
import threading
from typing import (
    Any,
    Callable,
    Coroutine,
    Dict,
    Generic,
    Iterable,
    Iterator,
    List,
    Mapping,
    Optional,
    Sequence,
    Set,
    Tuple,
    TypeVar,
    Union,
)

from ..cluster.contract import BrokerEndpoint, QuotaEntity, ServedBroker
from ..cluster.delayed import DelayedCall
from ..errors import ConfigError, IllegalStateError, PrincipalMappingError
from ..metrics import MetricsRegistry
from ..protocol import ApiKey
from .config import ServerConfig, parse_connection_overrides
from .connection import Connection, RequestMemory, RequestPlaces, RequestSlot
from .handler_base import error_name
from .handlers import Handlers
from .listeners import Listener, parse_jaas_users, parse_listeners
from .quotas import ClientQuotas, ConnectionQuotas, QuotaSettings
from .ssl_factory import server_context
from .ssl_principal import ANONYMOUS, SslPrincipalMapper, rfc2253_name
from .ssl_transport import SslTransportLayer

log = logging.getLogger("pylogq.server")

__all__ = ["KafkaServer", "SASL_MECHANISMS", "new_event_loop"]

#: The SASL mechanisms ``sasl.enabled.mechanisms`` may name.
SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")

_T = TypeVar("_T")
_V = TypeVar("_V")

# Threads for broker calls that do file work (topic creation, deletion, DeleteRecords);
# nothing that waits for an event takes one.
EXECUTOR_THREADS = 16
#: Threads for the transaction coordinator's calls and WriteTxnMarkers (see ``coordinator_executor``).
COORDINATOR_THREADS = 8
STOP_TIMEOUT_S = 30.0
# At most one "connection rejected" line per this many seconds: a client opening
# connections in a loop must not flood the log (the next line counts the ones left out).
REJECTION_LOG_INTERVAL_S = 10.0


def new_event_loop(use_uvloop: bool = False) -> asyncio.AbstractEventLoop:
    """A new event loop: uvloop's when asked for and installed, else asyncio's."""
    if use_uvloop:
        try:
            import uvloop  # type: ignore[import-not-found,unused-ignore]  # optional dependency
        except ImportError:
            pass
        else:
            loop: asyncio.AbstractEventLoop = uvloop.new_event_loop()
            return loop
    return asyncio.new_event_loop()


class KafkaServer:
    """Kafka protocol listeners for one broker.

    ``listeners`` is Kafka's setting (a string, its names in the broker's
    ``listener.security.protocol.map``; or (host, port) pairs for plain listeners, or
    Listener tuples); by default the broker's ``listeners`` config.
    ``advertised_listeners`` is what Metadata and FindCoordinator hand out
    (default: the listeners, with the bound port and, for a wildcard host, this
    machine's name). ``sasl_users`` enables SASL/PLAIN on plain listeners given as
    pairs; a SASL listener takes its users from here or its JAAS line
    (``listener.name.<name>.plain.sasl.jaas.config``). An SSL or SASL_SSL listener's
    context is built here from its ``ssl.*`` settings: a bad one is a ConfigError now.
    The loop runs in the caller's thread (``serve_forever``) or a thread of its own
    (``start_in_thread``).
    """

    def __init__(self, broker: ServedBroker, listeners: Union[None, str, Sequence[Union[Listener, Tuple[str, int]]]] = None,
                 advertised_listeners: Optional[str] = None, sasl_users: Optional[Mapping[str, str]] = None,
                 socket_request_max_bytes: Optional[int] = None, queued_max_requests: Optional[int] = None,
                 connections_max_idle_ms: Optional[int] = None) -> None:
        config = broker.config.listener
        if not isinstance(config, ServerConfig):  # a broker made before pylogq.server was imported
            config = ServerConfig()
        self.broker = broker
        from_config = listeners is None
        if listeners is None:
            listeners = config.listeners
        if isinstance(listeners, str):
            self.listeners = parse_listeners(listeners, "listeners", config.protocol_map())
        else:
            protocol = "SASL_PLAINTEXT" if sasl_users else "PLAINTEXT"
            self.listeners = [item if isinstance(item, Listener) else Listener(protocol, item[0], int(item[1]),
                                                                               protocol) for item in listeners]
        advertised = advertised_listeners if advertised_listeners is not None else config.advertised_listeners
        self._advertised: Dict[str, Listener] = {}
        if advertised:
            for item in parse_listeners(advertised, "advertised.listeners", config.protocol_map(),
                                        distinct_ports=False):
                self._advertised[item.name] = item
        # The listener the other brokers use: inter.broker.listener.name, else the one
        # security.inter.broker.protocol names.
        named = broker.config["inter.broker.listener.name"]
        inter_broker = str(named or broker.config["security.inter.broker.protocol"] or "").upper()
        if from_config and broker.config["zookeeper.connect"]:
            _check_inter_broker_listener(inter_broker, bool(named), self.listeners, self._advertised,
                                         config.protocol_map())
        # Each SASL listener's mechanisms (sasl.enabled.mechanisms, or its own under its
        # prefix) and PLAIN users (its JAAS line).
        self._sasl_users: Dict[str, Dict[str, str]] = {}
        self._sasl_mechanisms: Dict[str, Tuple[str, ...]] = {}
        for listener in self.listeners:
            if not listener.sasl:
                continue
            enabled = str(config.get("sasl.enabled.mechanisms", listener.name) or "")
            mechanisms = [m.strip() for m in enabled.split(",") if m.strip()]
            users = dict(sasl_users) if sasl_users else parse_jaas_users(
                config.get("plain.sasl.jaas.config", listener.name), listener.prefix + "plain.sasl.jaas.config")
            unknown = [m for m in mechanisms if m not in SASL_MECHANISMS]
            if unknown or not mechanisms:
                raise ConfigError("sasl.enabled.mechanisms: %r is not supported (supported: %s), got %r"
                                  % (unknown[0] if unknown else "", ", ".join(SASL_MECHANISMS), enabled))
            if "PLAIN" in mechanisms and not users:
                raise ConfigError("SASL/PLAIN on the %s listener %s needs users: set %s%s "
                                  "(user_NAME=\"PASSWORD\") or pass sasl_users"
                                  % (listener.protocol, listener.name, listener.prefix, "plain.sasl.jaas.config"))
            self._sasl_users[listener.name] = users
            self._sasl_mechanisms[listener.name] = tuple(dict.fromkeys(mechanisms))
        #: The SASL/PLAIN users of the first SASL listener (each listener's: sasl_users_for).
        self.sasl_users: Dict[str, str] = next(iter(self._sasl_users.values()), dict(sasl_users or {}))
        # Each TLS listener's context and each SSL listener's principal mapping, built now: a bad
        # key store or rule fails the start, naming its key. A SASL_SSL client's principal is its
        # SASL user's (Kafka's principal builder maps certificates for SSL channels only).
        self._ssl: Dict[str, ssl.SSLContext] = {}
        self._principal_mappers: Dict[str, SslPrincipalMapper] = {}
        for listener in self.listeners:
            if listener.ssl:
                get = config.source_for(listener.name)
                self._ssl[listener.name] = server_context(get, listener.name)
                if not listener.sasl:
                    self._principal_mappers[listener.name] = SslPrincipalMapper(
                        get("ssl.principal.mapping.rules")[0])
        #: What SaslHandshake offers on the first SASL listener (each one's: sasl_mechanisms_for).
        #: SCRAM users are the broker's (AlterUserScramCredentials).
        self.sasl_mechanisms = next(iter(self._sasl_mechanisms.values()), ("PLAIN",))
        #: Makes the salts SCRAM shows for unknown users (stable per name while this server runs).
        self.scram_secret = os.urandom(32)
        self.socket_request_max_bytes = int(socket_request_max_bytes or config.socket_request_max_bytes)
        self.queued_max_requests = int(queued_max_requests or config.queued_max_requests)
        self.connections_max_idle_ms = int(connections_max_idle_ms or config.connections_max_idle_ms)
        self.socket_request_read_timeout_ms = config.socket_request_read_timeout_ms
        #: How long a TLS handshake may take: a handshake is the arrival of a connection's
        #: first request, bounded as a request's arrival is (and by the idle limit).
        self.ssl_handshake_timeout_s = min(self.socket_request_read_timeout_ms, self.connections_max_idle_ms) / 1000.0
        self._handshakes: Set["asyncio.Task[None]"] = set()
        self.queued_max_request_bytes = config.queued_max_request_bytes  # 0 or less: unbounded, as Kafka
        self.request_memory: Optional[RequestMemory] = None
        self.max_connections = config.max_connections
        self.max_connections_per_ip = config.max_connections_per_ip
        self.max_connections_per_ip_overrides = _resolve_overrides(config.max_connections_per_ip_overrides)
        self._connections_per_ip: Dict[str, int] = {}  # accepted and not yet closed, by address
        self._accepted = 0  # their sum: what max.connections limits
        self._rejections = _RateLimitedLog(REJECTION_LOG_INTERVAL_S)
        quota_settings = QuotaSettings(config.quota_window_num, float(config.quota_window_size_seconds),
                                       config.controller_quota_window_num,
                                       float(config.controller_quota_window_size_seconds))
        #: Client quotas (docs/security.md, "Quotas"), following the broker's quota configs once started.
        self.quotas = ClientQuotas(quota_settings)
        # listener.name.<name>.max.connection.creation.rate, for any listener (None: the broker-wide rate only).
        listener_rates = {item.name: config.listener_overrides.get(item.prefix + "max.connection.creation.rate")
                          for item in self.listeners}
        # The inter-broker listener is not counted broker-wide when there are others (the first
        # listener when none is the other brokers').
        names = [item.name for item in self.listeners]
        if inter_broker not in names:
            inter_broker = names[0]
        #: KIP-612's connection creation rates.
        self.connection_quotas = ConnectionQuotas(config.max_connection_creation_rate, listener_rates,
                                                  str(inter_broker), quota_settings)
        self._accepting: Dict[str, asyncio.Lock] = {}  # per listener: connections accepted one at a time
        self._unwatch_quotas: Optional[Callable[[], None]] = None
        #: connection.failed.authentication.delay.ms and connections.max.reauth.ms (KIP-368).
        self.failed_authentication_delay_ms = config.connection_failed_authentication_delay_ms
        self.connections_max_reauth_ms = config.connections_max_reauth_ms
        fetch_max_bytes = broker.config["fetch.max.bytes"]
        assert isinstance(fetch_max_bytes, int)
        self.fetch_max_bytes = fetch_max_bytes
        self._send_buffer = config.socket_send_buffer_bytes
        self._receive_buffer = config.socket_receive_buffer_bytes
        self.handlers = Handlers(self)
        self.executor = concurrent.futures.ThreadPoolExecutor(EXECUTOR_THREADS, thread_name_prefix="pylogq-server")
        # Topic administration (create, delete, add partitions, alter configs, auto-creation)
        # runs one at a time under the broker's admin lock: one thread of its own, so it
        # never holds the threads above while it waits for that lock.
        self.admin_executor = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="pylogq-admin")
        # The transaction coordinator's calls and WriteTxnMarkers wait for the in-sync replicas
        # of what they write (up to 30 s): threads of their own, so that they never hold the
        # ones the controller's requests and produces need (which are what ends those waits).
        self.coordinator_executor = concurrent.futures.ThreadPoolExecutor(
            COORDINATOR_THREADS, thread_name_prefix="pylogq-txn")
        self.stopping = False
        self.addresses: List[Tuple[str, int]] = []  # advertised (host, port) per listener, once started
        # (local port, listener name) -> advertised listener: the name tells apart an IPv4 and an
        # IPv6 listener on one port, the port the listeners given as (host, port) pairs.
        self._bound: Dict[Tuple[int, str], Listener] = {}
        self._servers: List[asyncio.AbstractServer] = []
        self._connections: Set[Connection] = set()
        self._connection_tasks: Set["asyncio.Task[None]"] = set()
        self._next_id = 0
        self._loop: Optional[asyncio.AbstractEventLoop] = None
        self._thread: Optional[threading.Thread] = None
        self._reaper: Optional["asyncio.Task[None]"] = None
        #: The queued.max.requests places (their count held: the request queue size metric).
        self.request_places = RequestPlaces(self.queued_max_requests)
        #: Set once the broker has joined its cluster (at start for a single node): until then
        #: a connection answers only what Handlers.BEFORE_JOINING names.
        self.joined: asyncio.Event
        self._loop_thread: Optional[int] = None
        self.metrics: MetricsRegistry = broker.metrics_registry
        # Delayed operations a request is parked on -> the answer to give them at stop
        # (None: complete them with what they have, as a fetch at its deadline).
        self._parked: Dict[DelayedCall[Any], Any] = {}

    # -- lifecycle on the loop ------------------------------------------------------------

    async def start(self) -> None:
        """Bind every listener (port 0 takes a free port) and start accepting."""
        loop = asyncio.get_running_loop()
        self._loop = loop
        self.joined = asyncio.Event()

        def joined() -> None:
            try:
                loop.call_soon_threadsafe(self.joined.set)
            except RuntimeError:
                pass  # the loop is closed: stopped before the broker joined

        self.broker.when_joined(joined)
        self.request_places = RequestPlaces(self.queued_max_requests)  # bound to this loop
        if self.queued_max_request_bytes > 0:
            self.request_memory = RequestMemory(self.queued_max_request_bytes)
        self._loop_thread = threading.get_ident()
        try:
            for listener in self.listeners:
                server = await asyncio.start_server(
                    functools.partial(self._accept, listener=listener),
                    host=listener.host or None, port=listener.port, reuse_address=True, backlog=1024,
                    limit=1 << 20)
                self._servers.append(server)
                port = int(server.sockets[0].getsockname()[1])
                adv = self._advertised.get(listener.name)
                host = adv.host if adv is not None and adv.host else listener.host
                if host in ("", "0.0.0.0", "::"):
                    host = socket.getfqdn()
                advertised = Listener(listener.name, host, adv.port if adv is not None and adv.port else port,
                                      listener.protocol)
                for sock in server.sockets:
                    self._bound[(int(sock.getsockname()[1]), listener.name)] = advertised
                self.addresses.append((advertised.host, advertised.port))
        except OSError as exc:
            await self.stop()
            raise ConfigError("cannot listen on %s://%s:%d: %s" % (listener.name, listener.host, listener.port,
                                                                  exc)) from None
        self._reaper = loop.create_task(self._reap_idle())
        self._unwatch_quotas = self.broker.watch_client_quotas(self._quotas_changed)
        self.metrics.add_collector(self._readings)
        for (host, port), listener in zip(self.addresses, self.listeners):
            log.info("listening listener=%s protocol=%s bind=%s:%d advertised=%s:%d", listener.name,
                     listener.protocol, listener.host or "*", listener.port, host, port)

    async def stop(self) -> None:
        """Stop accepting, answer what was read, close the connections."""
        if self.stopping:
            return
        self.stopping = True
        for server in self._servers:
            server.close()
        for conn in list(self._connections):
            conn.stop_reading()
        for handshake in list(self._handshakes):
            handshake.cancel()
        for op, answer in list(self._parked.items()):  # parked requests answer now
            if answer is None:
                op.force_complete()  # a long poll: what is there now, not at its max_wait_ms
            else:
                op.complete_with(answer)  # a join or sync: NOT_COORDINATOR, the client finds the next one
        # A connection's task is in _handshakes until its handshake is done, then in _connection_tasks.
        tasks = self._connection_tasks | self._handshakes
        if tasks:
            done, pending = await asyncio.wait(list(tasks), timeout=STOP_TIMEOUT_S)
            for task in pending:
                task.cancel()
        if self._reaper is not None:
            self._reaper.cancel()
        for server in self._servers:
            await server.wait_closed()
        self.executor.shutdown(wait=False, cancel_futures=True)
        self.admin_executor.shutdown(wait=False, cancel_futures=True)
        self.coordinator_executor.shutdown(wait=False, cancel_futures=True)
        self.metrics.remove_collector(self._readings)
        if self._unwatch_quotas is not None:
            self._unwatch_quotas()
        log.info("stopped listeners=%d", len(self._servers))

    def _quotas_changed(self, configs: Mapping[QuotaEntity, Mapping[str, float]]) -> None:
        """The broker's quota configs, after each change (on the thread that applied it)."""
        self.quotas.update(configs)
        self.connection_quotas.set_ip_rates(self.quotas.ip_rates)

    # -- metrics ----------------------------------------------------------------------------

    def _readings(self) -> Iterator[Tuple[str, Tuple[str, ...], float]]:
        """The network gauges (read at a scrape, from any thread: counts copied first)."""
        counts: Dict[str, int] = {listener.name: 0 for listener in self.listeners}
        for conn in list(self._connections):
            counts[conn.listener.name] = counts.get(conn.listener.name, 0) + 1
        for name, count in counts.items():
            yield "kafka_server_socket_server_metrics_connection_count", (name,), count
        yield "kafka_network_requestchannel_requestqueuesize", (), self.request_places.held
        for name, rate, throttle in self.connection_quotas.readings():
            yield "kafka_server_socket_server_metrics_connection_creation_rate", (name,), rate
            yield "kafka_server_socket_server_metrics_connection_accept_throttle_time", (name,), throttle
        names = {"Produce": ("produce", "byte_rate"), "Fetch": ("fetch", "byte_rate"),
                 "Request": ("request", "request_time"), "ControllerMutation": ("controllermutation", "mutation_rate")}
        for manager in self.quotas.managers:
            for quota_type, tags, rate, throttle, tokens in manager.readings():
                prefix, measured = names[quota_type]
                yield "kafka_server_%s_%s" % (prefix, measured), tags, rate
                yield "kafka_server_%s_throttle_time" % prefix, tags, throttle
                if tokens is not None:
                    yield "kafka_server_controllermutation_tokens", tags, tokens

    def request_answered(self, slot: RequestSlot) -> None:
        """A response is about to be written: count the request and its answer's error codes
        (before the client can read it, so a client that has its answer sees it counted)."""
        api_key = slot.api_key
        if api_key < 0:
            return
        if api_key == ApiKey.FETCH:
            name = "FetchFollower" if slot.follower else "FetchConsumer"
        else:
            name = self.handlers.name(api_key)
        slot.metric_name = name
        items = [("kafka_network_requestmetrics_requests", (name, str(slot.version)), 1)]
        if slot.errors:
            items.extend(("kafka_network_requestmetrics_errors", (name, error_name(code)), count)
                         for code, count in slot.errors.items())
        self.metrics.inc_all(items)

    def request_sent(self, slot: RequestSlot, sending: float, sent: float) -> None:
        """A response is written: the request's times, from its arrival to the last byte sent."""
        if slot.api_key < 0:
            return
        key = (slot.metric_name,)
        self.metrics.observe_all((
            ("kafka_network_requestmetrics_totaltimems", key, (sent - slot.arrived) * 1000.0),
            ("kafka_network_requestmetrics_requestqueuetimems", key, (slot.started - slot.arrived) * 1000.0),
            ("kafka_network_requestmetrics_localtimems", key, (slot.dispatched - slot.started) * 1000.0),
            ("kafka_network_requestmetrics_remotetimems", key, (slot.done - slot.dispatched) * 1000.0),
            ("kafka_network_requestmetrics_responsequeuetimems", key, (sending - slot.done) * 1000.0),
            ("kafka_network_requestmetrics_responsesendtimems", key, (sent - sending) * 1000.0)))

    def session_expired(self, conn: Connection) -> None:
        """A request came after its connection's SASL session ended: the connection closes."""
        log.info("closing connection id=%d peer=%s principal=%s: its SASL session expired", conn.id, conn.peer,
                 conn.principal)
        self.metrics.inc("kafka_server_socket_server_metrics_expired_connections_killed_count")

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, listener: Listener) -> None:
        if self.stopping:
            writer.close()
            return
        peer = writer.get_extra_info("peername") or ("?", 0)
        ip = _normal_ip(str(peer[0]))
        if await self._rate_limited(ip, peer, listener):
            writer.close()
            return
        # Checked and counted with no wait in between (and after the rate waits, as Kafka counts).
        refused = self._over_limit(ip)
        if refused is not None:
            assert self._loop is not None
            self._rejections.warning(self._loop.time(), "connection rejected peer=%s:%s listener=%s reason=%s",
                                     ip, peer[1], listener.name, refused)
            writer.close()
            return
        self._connections_per_ip[ip] = self._connections_per_ip.get(ip, 0) + 1
        self._accepted += 1
        try:
            self.metrics.inc("kafka_server_socket_server_metrics_connection_creation", (listener.name,))
            try:
                await self._serve_connection(reader, writer, listener)
            finally:
                self.metrics.inc("kafka_server_socket_server_metrics_connection_close", (listener.name,))
        finally:
            self._accepted -= 1
            count = self._connections_per_ip[ip] - 1
            if count:
                self._connections_per_ip[ip] = count
            else:
                del self._connections_per_ip[ip]

    async def _rate_limited(self, ip: str, peer: Any, listener: Listener) -> bool:
        """KIP-612: wait while the broker's or the listener's connection creation rate is past
        its bound (connections of a listener are taken one at a time meanwhile, as Kafka's
        acceptor takes them); -> True when ``ip`` is past its own rate (the connection is then
        held for its throttle time, and the caller closes it)."""
        quotas = self.connection_quotas
        if quotas.limits(listener.name):
            lock = self._accepting.get(listener.name)
            if lock is None:
                lock = self._accepting[listener.name] = asyncio.Lock()
            async with lock:
                delay = quotas.accept_delay_ms(listener.name)
                if delay > 0:
                    await asyncio.sleep(delay / 1000.0)  # a throttle, not synchronization
        throttle = quotas.ip_throttle_ms(ip, listener.name)
        if throttle <= 0:
            return False
        assert self._loop is not None
        self._rejections.warning(self._loop.time(), "connection throttled peer=%s:%s listener=%s reason=%s",
                                 ip, peer[1], listener.name,
                                 "connection_creation_rate of %s exceeded: closed after %d ms" % (ip, throttle))
        await asyncio.sleep(throttle / 1000.0)
        return True

    def _over_limit(self, ip: str) -> Optional[str]:
        """Why a new connection from ``ip`` is refused (Kafka's checks, per IP first), or None."""
        limit = self.max_connections_per_ip_overrides.get(ip, self.max_connections_per_ip)
        if self._connections_per_ip.get(ip, 0) >= limit:
            key = "max.connections.per.ip.overrides" if ip in self.max_connections_per_ip_overrides else \
                "max.connections.per.ip"
            return "%s (%d) reached for %s" % (key, limit, ip)
        if self._accepted >= self.max_connections:
            return "max.connections (%d) reached" % self.max_connections
        return None

    async def _serve_connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                                listener: Listener) -> None:
        sock = writer.get_extra_info("socket")
        if sock is not None:
            try:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                if self._send_buffer > 0:
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, self._send_buffer)
                if self._receive_buffer > 0:
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, self._receive_buffer)
            except OSError:
                pass
        self._next_id += 1
        conn_id = self._next_id
        principal = ANONYMOUS
        ends: Tuple[Any, Any] = (reader, writer)
        if listener.ssl:
            found = await self._handshake(reader, writer, listener, conn_id)
            if found is None:
                return
            ends = (found[0], found[0])
            principal = found[1]
        conn = Connection(self, ends[0], ends[1], listener, conn_id, principal)
        task = asyncio.current_task()
        self._connections.add(conn)
        if task is not None:
            self._connection_tasks.add(task)
        try:
            await conn.run()
        finally:
            self._connections.discard(conn)
            if task is not None:
                self._connection_tasks.discard(task)

    async def _handshake(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, listener: Listener,
                         conn_id: int) -> Optional[Tuple[SslTransportLayer, str]]:
        """A TLS connection's handshake, within :attr:`ssl_handshake_timeout_s` -> its TLS ends and
        principal; None (the connection closed, one line logged) when it fails or stalls."""
        tls = SslTransportLayer(reader, writer, self._ssl[listener.name])
        peer = writer.get_extra_info("peername") or ("?", 0)
        task = asyncio.current_task()
        if task is not None:
            self._handshakes.add(task)
        try:
            await asyncio.wait_for(tls.handshake(), self.ssl_handshake_timeout_s)
            der = tls.peer_certificate()
            mapper = self._principal_mappers.get(listener.name)
            if der is None or mapper is None:
                principal = ANONYMOUS
            else:
                principal = "User:" + mapper.name(rfc2253_name(der))
        except asyncio.CancelledError:
            tls.close()
            if self.stopping:  # the server stops: the connection ends here, as a connection's reading does
                return None
            raise
        except (ssl.SSLError, OSError, EOFError, asyncio.TimeoutError, PrincipalMappingError, ValueError) as exc:
            if isinstance(exc, asyncio.TimeoutError):
                reason = "no handshake within %d ms (%d bytes received)" % (self.ssl_handshake_timeout_s * 1000,
                                                                           tls.handshake_bytes)
            elif isinstance(exc, PrincipalMappingError):
                reason = "ssl.principal.mapping.rules: %s" % exc
            else:
                reason = "%s: %s" % (type(exc).__name__, exc)
            log.warning("TLS handshake failed id=%d peer=%s:%s listener=%s error=%r", conn_id, peer[0], peer[1],
                        listener.name, reason)
            tls.close()
            return None
        finally:
            if task is not None:
                self._handshakes.discard(task)
        log.info("TLS handshake done id=%d peer=%s:%s listener=%s protocol=%s cipher=%s principal=%s", conn_id,
                 peer[0], peer[1], listener.name, tls.version, tls.cipher, principal)
        return tls, principal

    async def _reap_idle(self) -> None:
        """Close connections idle (nothing in flight, nothing received) for
        ``connections.max.idle.ms``, and those whose request has not arrived whole within
        ``socket.request.read.timeout.ms`` of its size prefix.

        One timer for every connection rather than one per request: a limit is enforced
        within a quarter of itself late, and a request costs no timer."""
        loop = asyncio.get_running_loop()
        idle_limit = self.connections_max_idle_ms / 1000.0
        read_limit = self.socket_request_read_timeout_ms / 1000.0
        period = min(max(min(idle_limit, read_limit) / 4, 0.01), 30.0)
        while True:
            await asyncio.sleep(period)  # a timer, not synchronization
            now = loop.time()
            for conn in list(self._connections):
                if conn.reading_since is not None and now - conn.reading_since > read_limit:
                    conn.close_reason = ("request not received within socket.request.read.timeout.ms (%d): "
                                         "%d of %d bytes" % (self.socket_request_read_timeout_ms,
                                                             conn.reading_received, conn.reading_size))
                    log.warning("request read timed out id=%d peer=%s received=%d size=%d timeout_ms=%d",
                                conn.id, conn.peer, conn.reading_received, conn.reading_size,
                                self.socket_request_read_timeout_ms)
                    conn.stop_reading()
                elif conn.idle and now - conn.last_active > idle_limit:
                    conn.close_reason = "idle for more than connections.max.idle.ms (%d)" % self.connections_max_idle_ms
                    conn.stop_reading()

    # -- delayed operations -----------------------------------------------------------------

    def new_future(self) -> "asyncio.Future[Any]":
        assert self._loop is not None
        return self._loop.create_future()

    def deliver_to(self, future: "asyncio.Future[_T]") -> "_FutureDelivery[_T]":
        """A delayed operation's ``deliver``: the answer becomes ``future``'s result on the
        loop, from any thread (and an operation that failed, its exception)."""
        assert self._loop is not None
        return _FutureDelivery(self._loop, self._loop_thread, future)

    async def parked(self, op: "DelayedCall[_T]", future: "asyncio.Future[_T]", at_stop: Optional[_T] = None) -> _T:
        """Wait for a delayed operation's answer; at :meth:`stop` it is completed with
        ``at_stop`` (None: with what it has)."""
        if self.stopping and not op.completed:
            if at_stop is None:
                op.force_complete()
            else:
                op.complete_with(at_stop)
        self._parked[op] = at_stop
        try:
            return await future
        finally:
            self._parked.pop(op, None)

    def endpoints(self) -> List[BrokerEndpoint]:
        """The advertised endpoints of the bound listeners (what a cluster member registers)."""
        out = []
        for listener, (host, port) in zip(self.listeners, self.addresses):
            out.append(BrokerEndpoint(listener.name, host, port, listener.protocol))
        return out

    def listener_name_for(self, conn: Connection) -> str:
        """The name of the listener a connection came in on (``PLAINTEXT``, ``CLIENT``)."""
        listener = self._bound.get((conn.local_port, conn.listener.name))
        return listener.name if listener is not None else self.listeners[0].name

    def sasl_users_for(self, listener: str) -> Mapping[str, str]:
        """The SASL/PLAIN users of listener ``listener`` (a name)."""
        return self._sasl_users.get(listener, self.sasl_users)

    def sasl_mechanisms_for(self, listener: str) -> Tuple[str, ...]:
        """The SASL mechanisms SaslHandshake offers on listener ``listener`` (a name)."""
        return self._sasl_mechanisms.get(listener, self.sasl_mechanisms)

    def advertised_for(self, conn: Connection) -> Tuple[str, int]:
        """The advertised (host, port) of the listener a connection came in on."""
        listener = self._bound.get((conn.local_port, conn.listener.name))
        if listener is None:
            return self.addresses[0]
        return listener.host, listener.port

    @property
    def connection_count(self) -> int:
        return len(self._connections)

    # -- running in a thread of its own -----------------------------------------------------

    def start_in_thread(self, use_uvloop: bool = False) -> None:
        """Run the loop in a daemon thread; returns once every listener is bound (or raises)."""
        started = threading.Event()
        failure: List[BaseException] = []
        loop = new_event_loop(use_uvloop)

        def run() -> None:
            asyncio.set_event_loop(loop)
            try:
                loop.run_until_complete(self.start())
            except BaseException as exc:  # noqa: BLE001 - handed to the caller
                failure.append(exc)
                started.set()
                loop.close()
                return
            started.set()
            try:
                loop.run_forever()
            finally:
                loop.run_until_complete(loop.shutdown_asyncgens())
                loop.close()

        self._thread = threading.Thread(target=run, name="pylogq-server", daemon=True)
        self._thread.start()
        started.wait()
        if failure:
            self._thread.join()
            raise failure[0]

    def stop_thread(self) -> None:
        """Stop a server started with ``start_in_thread`` and wait for its thread."""
        thread, loop = self._thread, self._loop
        if thread is None or loop is None or not thread.is_alive():
            return
        future = asyncio.run_coroutine_threadsafe(self.stop(), loop)
        try:
            future.result(STOP_TIMEOUT_S + 5)
        finally:
            loop.call_soon_threadsafe(loop.stop)
            thread.join(STOP_TIMEOUT_S)

    def run_coroutine(self, coro: Coroutine[Any, Any, _T]) -> _T:
        """Run a coroutine on the server's loop from another thread; -> its result."""
        if self._loop is None:
            raise IllegalStateError("server not started")
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result()


def _check_inter_broker_listener(name: str, named: bool, listeners: Sequence[Listener],
                                 advertised: Mapping[str, Listener], protocols: Mapping[str, str]) -> None:
    """Kafka's rules for a broker of a cluster: the inter-broker listener ``name`` (``named`` by
    inter.broker.listener.name, else security.inter.broker.protocol's) is in the protocol map,
    and is one the broker advertises."""
    if named and name not in protocols:
        raise ConfigError("Listener with name %s defined in inter.broker.listener.name not found in "
                          "listener.security.protocol.map." % name)
    names = list(advertised) if advertised else [listener.name for listener in listeners]
    if name not in names:
        raise ConfigError("inter.broker.listener.name must be a listener name defined in advertised.listeners. The "
                          "valid options based on currently configured listeners are %s" % ",".join(names))


def _hosts(items: Iterable[Tuple[str, int]]) -> str:
    return ", ".join("%s:%d" % item for item in items)


def _normal_ip(host: str) -> str:
    """An address as the per-IP limits key it: canonical text, IPv4-mapped IPv6 as IPv4."""
    import ipaddress  # after the first connection: not on the startup path

    try:
        address = ipaddress.ip_address(host.split("%", 1)[0])
    except ValueError:
        return host
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return str(address.ipv4_mapped)
    return str(address)


def _resolve_overrides(text: str) -> Dict[str, int]:
    """``max.connections.per.ip.overrides`` keyed by address: a host name counts for each
    of its addresses, resolved once at start, as Kafka does."""
    overrides = parse_connection_overrides(text)
    if not overrides:
        return {}
    import ipaddress  # only with overrides: not on the startup path

    resolved: Dict[str, int] = {}
    for host, count in overrides.items():
        try:
            ipaddress.ip_address(host)
        except ValueError:
            pass
        else:
            resolved[_normal_ip(host)] = count
            continue
        try:
            infos = socket.getaddrinfo(host, None, proto=socket.IPPROTO_TCP)
        except OSError as exc:
            raise ConfigError("max.connections.per.ip.overrides: cannot resolve %r: %s" % (host, exc)) from None
        for info in infos:
            resolved[_normal_ip(str(info[4][0]))] = count
    return resolved


class _RateLimitedLog:
    """A warning logged at most once per ``interval`` seconds; the next line logged says how
    many were left out. Runs on the loop (not thread-safe)."""

    def __init__(self, interval: float) -> None:
        self.interval = interval
        self._last = float("-inf")  # when the last line was logged
        self._left_out = 0

    def warning(self, now: float, message: str, *args: Any) -> None:
        if now - self._last < self.interval:
            self._left_out += 1
            return
        self._last = now
        left_out, self._left_out = self._left_out, 0
        log.warning(message + " not_logged_since_last=%d", *args, left_out)


class _FutureDelivery(Generic[_T]):
    """Hands a delayed operation's answer (or failure) to a loop's future from any thread.

    Called on the loop's own thread (an answer found at once, an append from a client of
    this server), it sets the future at once; from another thread it is handed over.
    """

    __slots__ = ("_loop", "_thread", "_future")

    def __init__(self, loop: asyncio.AbstractEventLoop, thread: Optional[int], future: "asyncio.Future[_T]") -> None:
        self._loop = loop
        self._thread = thread
        self._future = future

    def __call__(self, answer: _T) -> None:
        self._on_loop(self._future.set_result, answer)

    def fail(self, exc: BaseException) -> None:
        self._on_loop(self._future.set_exception, exc)

    def _on_loop(self, setter: Callable[[_V], None], value: _V) -> None:
        def settle() -> None:
            if not self._future.done():  # the connection may have gone and cancelled it
                setter(value)

        if threading.get_ident() == self._thread:
            settle()
        else:
            try:
                self._loop.call_soon_threadsafe(settle)
            except RuntimeError:  # the loop closed: nobody waits for the answer any more
                pass
