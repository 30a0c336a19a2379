"""How a broker reaches the other brokers of its cluster over the Kafka protocol.

:class:`TcpInterBrokerClient` implements the contract's
:class:`~pylogq.cluster.contract.InterBrokerClient` on a blocking socket: the
controller's sender threads, the follower fetchers and a broker's controlled shutdown
each own one and call it from their own thread. Requests go out at the newest version
the tables know (brokers of one pylogq version understand each other's), as the
typed objects of the contract turned into the wire's message classes
(:mod:`pylogq.protocol.message_data`) by :mod:`.replication_wire`, over the protocol
layer's :class:`~pylogq.protocol.blocking_client.BlockingClient`, which reads the answers
as message classes too; :mod:`.handlers_replication` is the receiving side. A connection
that fails, times out or answers garbage is closed and the call raises
:class:`~pylogq.errors.BrokerNotAvailableError`: the caller retries with a new client.

Over an SSL or SASL_SSL inter-broker listener the client handshakes TLS with the
context :func:`secured_connector` made from the broker's own ``ssl.*`` settings of that
listener (its trust store; its key store as the certificate shown to a broker whose
listener requires one), and over a SASL one it authenticates first, with
``sasl.mechanism.inter.broker.protocol`` (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512) and the
``username`` and ``password`` of the listener's JAAS config, as Kafka's brokers do. A
failed handshake or authentication is a BrokerNotAvailableError naming the cause, and is
logged: the caller retries, as with any broker it cannot reach.

Importing :mod:`pylogq.server` registers :func:`connect` and :func:`secured_connector`
as the brokers' connectors.
"""

from __future__ import annotations

import functools
import logging
import ssl
import threading
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple, Type, TypeVar

from .. import errors
from ..errors import ConfigError
from ..cluster.contract import (
    EpochEndOffset,
    InterBrokerConnector,
    FetchResult,
    LeaderAndIsrRequest,
    ReplicaFetchPartition,
    StopReplicaRequest,
    TxnMarker,
    UpdateMetadataRequest,
)
from ..protocol import ApiKey
from ..protocol import message_data as msg
from ..config import Config
from ..protocol.blocking_client import BlockingClient
from ..protocol.schema import Message
from ..protocol.sasl import sasl_login
from . import replication_wire as wire
from .config import ServerConfig
from .listeners import jaas_credentials, listener_prefix
from .ssl_factory import client_context

__all__ = ["TcpInterBrokerClient", "connect", "secured_connector"]

log = logging.getLogger("pylogq.server")
#: The SASL mechanisms a broker authenticates to another with.
INTER_BROKER_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")

#: The versions brokers send each other (Kafka 3.9's newest; Fetch by name, before topic ids).
VERSIONS: Dict[int, int] = {ApiKey.LEADER_AND_ISR: 7, ApiKey.UPDATE_METADATA: 8, ApiKey.STOP_REPLICA: 4,
            ApiKey.CONTROLLED_SHUTDOWN: 3, ApiKey.OFFSET_FOR_LEADER_EPOCH: 4, ApiKey.FETCH: 12,
            ApiKey.WRITE_TXN_MARKERS: 1}
#: How long a leader may wait for the replicas of the markers it writes (the broker's
#: TXN_WRITE_TIMEOUT_MS): a WriteTxnMarkers request's own wait.
TXN_MARKERS_WAIT_MS = 30000
#: How long a request may take beyond its own wait (Kafka's ``replica.socket.timeout.ms``).
SOCKET_TIMEOUT_S = 30.0
#: The largest response accepted (a fetch answers at most replica.fetch.response.max.bytes).
MAX_RESPONSE_BYTES = 1 << 30

_Response = TypeVar("_Response", bound=Message)


class TcpInterBrokerClient:
    """One connection to another broker. Used by one thread at a time (a lock serializes
    calls anyway)."""

    def __init__(self, broker_id: int, host: str, port: int, client_id: str = "pylogq-broker",
                 ssl_context: Optional[ssl.SSLContext] = None, sasl: Optional[Tuple[str, str, str]] = None) -> None:
        self.broker_id = broker_id
        self.address = (host, port)
        self.client_id = client_id
        self._sasl = sasl
        self._lock = threading.Lock()
        self._client = BlockingClient(host, port, client_id, SOCKET_TIMEOUT_S, ssl_context)

    def _connect(self) -> None:
        """Connect (handshaking TLS, authenticating SASL) unless connected; BrokerNotAvailableError
        when that fails (the socket closed)."""
        if self._client.connected:
            return
        try:
            self._client.connect()
            if self._sasl is not None:
                mechanism, username, password = self._sasl
                sasl_login(self._login_request, mechanism, username, password,
                           "broker %d at %s:%d" % ((self.broker_id,) + self.address))
        except (OSError, errors.PylogqError, ValueError) as exc:
            self._client.close()
            if isinstance(exc, (errors.SslAuthenticationError, errors.SaslAuthenticationFailedError)):
                log.warning("cannot authenticate to broker %d at %s:%d: %s", self.broker_id, self.address[0],
                            self.address[1], exc)
            raise errors.BrokerNotAvailableError("cannot connect to broker %d at %s:%d: %s"
                                                 % ((self.broker_id,) + self.address + (exc,))) from None

    def _login_request(self, api_key: int, body: Mapping[str, Any]) -> Mapping[str, Any]:
        """A SASL request of the login, at version 1 (SaslAuthenticate v1 answers with its error's message)."""
        return self._client.call(api_key, 1, body, SOCKET_TIMEOUT_S, 1 << 20)

    def _call(self, api_key: int, body: Message, response: Type[_Response], wait_ms: int = 0) -> _Response:
        """Send ``body`` and read its answer, of class ``response``."""
        version = VERSIONS[api_key]
        with self._lock:
            self._connect()
            frame, correlation_id = self._client.encode(api_key, version, body)
            try:
                answer = self._client.exchange(api_key, version, frame, correlation_id,
                                               SOCKET_TIMEOUT_S + wait_ms / 1000.0, MAX_RESPONSE_BYTES, typed=True)
            except (OSError, errors.ProtocolError, ValueError) as exc:
                self._client.close()
                raise errors.BrokerNotAvailableError("broker %d at %s:%d: %s"
                                                     % ((self.broker_id,) + self.address + (exc,))) from None
        assert isinstance(answer, response)  # the response table of api_key reads its class
        return answer

    # -- the controller's requests ------------------------------------------------------

    def leader_and_isr(self, request: LeaderAndIsrRequest) -> Tuple[int, Dict[Tuple[str, int], int]]:
        version = VERSIONS[ApiKey.LEADER_AND_ISR]
        answer = self._call(ApiKey.LEADER_AND_ISR, wire.encode_leader_and_isr(request, version),
                            msg.LeaderAndIsrResponse)
        return wire.decode_leader_and_isr_response(answer, request.topic_ids, version)

    def update_metadata(self, request: UpdateMetadataRequest) -> int:
        answer = self._call(ApiKey.UPDATE_METADATA,
                            wire.encode_update_metadata(request, VERSIONS[ApiKey.UPDATE_METADATA]),
                            msg.UpdateMetadataResponse)
        return wire.decode_update_metadata_response(answer)

    def stop_replica(self, request: StopReplicaRequest) -> Tuple[int, Dict[Tuple[str, int], int]]:
        answer = self._call(ApiKey.STOP_REPLICA, wire.encode_stop_replica(request, VERSIONS[ApiKey.STOP_REPLICA]),
                            msg.StopReplicaResponse)
        return wire.decode_stop_replica_response(answer)

    def controlled_shutdown(self, broker_id: int, broker_epoch: int) -> Tuple[int, List[Tuple[str, int]]]:
        answer = self._call(ApiKey.CONTROLLED_SHUTDOWN, wire.encode_controlled_shutdown(broker_id, broker_epoch),
                            msg.ControlledShutdownResponse, wait_ms=int(SOCKET_TIMEOUT_S * 1000))
        return wire.decode_controlled_shutdown_response(answer)

    # -- a follower's requests ----------------------------------------------------------

    def replica_fetch(self, replica_id: int, broker_epoch: int, partitions: Sequence[ReplicaFetchPartition],
                      max_wait_ms: int, min_bytes: int, max_bytes: int) -> Dict[Tuple[str, int], FetchResult]:
        fetch = wire.ReplicaFetch(replica_id, broker_epoch, list(partitions), max_wait_ms, min_bytes, max_bytes)
        answer = self._call(ApiKey.FETCH, wire.encode_replica_fetch(fetch, VERSIONS[ApiKey.FETCH]), msg.FetchResponse,
                            wait_ms=max_wait_ms)
        return wire.decode_replica_fetch_response(answer)

    def offsets_for_leader_epoch(self, replica_id: int, partitions: Mapping[Tuple[str, int], Tuple[int, int]]
                                 ) -> Dict[Tuple[str, int], EpochEndOffset]:
        answer = self._call(ApiKey.OFFSET_FOR_LEADER_EPOCH, wire.encode_offset_for_leader_epoch(replica_id, partitions),
                            msg.OffsetForLeaderEpochResponse)
        return wire.decode_offset_for_leader_epoch_response(answer)

    # -- a transaction coordinator's requests ---------------------------------------------

    def write_txn_markers(self, markers: Sequence[TxnMarker]) -> Dict[int, Dict[Tuple[str, int], int]]:
        # The leader answers once the markers are replicated, which may take its whole wait.
        answer = self._call(ApiKey.WRITE_TXN_MARKERS, wire.encode_write_txn_markers(markers),
                            msg.WriteTxnMarkersResponse, wait_ms=TXN_MARKERS_WAIT_MS)
        return wire.decode_write_txn_markers_response(answer)

    # -- lifecycle ----------------------------------------------------------------------

    def abort(self) -> None:
        """End the call in flight (its blocked read fails at once) without waiting for it."""
        self._client.abort()

    def close(self) -> None:
        with self._lock:
            self._client.close()


def connect(broker_id: int, host: str, port: int, ssl_context: Optional[ssl.SSLContext] = None,
            sasl: Optional[Tuple[str, str, str]] = None) -> TcpInterBrokerClient:
    """The brokers' connector (registered with the contract when :mod:`pylogq.server` is imported)."""
    return TcpInterBrokerClient(broker_id, host, port, ssl_context=ssl_context, sasl=sasl)


def secured_connector(settings: Config, listener: str) -> InterBrokerConnector:
    """The connector of a broker whose inter-broker listener is ``listener``: TLS and SASL as
    that listener's protocol and settings say (module docstring); ConfigError when they
    cannot make one."""
    if not isinstance(settings, ServerConfig):
        return connect
    protocol = settings.protocol_map().get(listener.upper())
    if protocol is None:
        raise ConfigError("Listener with name %s defined in inter.broker.listener.name not found in "
                          "listener.security.protocol.map." % listener.upper())
    ssl_context = client_context(settings.source_for(listener)) if protocol in ("SSL", "SASL_SSL") else None
    sasl: Optional[Tuple[str, str, str]] = None
    if protocol in ("SASL_PLAINTEXT", "SASL_SSL"):
        mechanism = settings.sasl_mechanism_inter_broker_protocol.upper()
        if mechanism not in INTER_BROKER_MECHANISMS:
            raise ConfigError("sasl.mechanism.inter.broker.protocol %s is not supported between pylogq brokers "
                              "(supported: %s)" % (mechanism, ", ".join(INTER_BROKER_MECHANISMS)))
        key = "%s.sasl.jaas.config" % mechanism.lower()
        credentials = jaas_credentials(settings.get(key, listener), listener_prefix(listener) + key)
        if credentials is None:
            raise ConfigError("%s%s is not set: its username and password are what this broker authenticates to the "
                              "others with" % (listener_prefix(listener), key))
        sasl = (mechanism,) + credentials
    if ssl_context is None and sasl is None:
        return connect
    return functools.partial(connect, ssl_context=ssl_context, sasl=sasl)

