"""One Kafka protocol connection to one broker: pipelining, version negotiation, SASL (PLAIN, SCRAM).

The frames (size, header, body) are written, read and decoded by the protocol layer's
:mod:`pylogq.protocol.blocking_client`, which the brokers' inter-broker client uses too.

A broker answers the requests of one connection in the order they were sent, so
responses are matched to requests by a FIFO of in-flight entries, and each
response's correlation id is checked against its entry's. Requests are
pipelined: any thread may send while others wait; one reader thread per
connection reads every response and completes the waiting request's future.
A Produce with acks=0 gets no response and takes no FIFO entry.

On connect, ApiVersions picks per API the highest version both sides speak
(``min(ours, the broker's max)``); a broker that does not know our ApiVersions
version answers in the v0 layout with UNSUPPORTED_VERSION and its own range,
and the request is repeated at a version it knows. With SASL_PLAINTEXT or SASL_SSL the
SaslHandshake (v1) and SaslAuthenticate exchange follows before anything else. Over
SSL or SASL_SSL the TLS handshake comes first, when the socket connects: a failed one
(an untrusted or expired certificate on either side) raises SslAuthenticationError.

A broker answers ApiVersions at once, so that first answer is waited for
:data:`HANDSHAKE_TIMEOUT_S` at most, not the request timeout: a port that
accepts connections but does not speak Kafka (an HTTP server, a listener that
never answers, a stopped process) fails the connection in seconds, with
RequestTimedOutError naming its address. A first answer that cannot be Kafka's
(an HTTP reply read as a size is a gigabyte) fails it at once, with
KafkaConnectionError, before anything of that size is read.

With ``sensors`` (the client's :class:`~pylogq.client.metrics.NodeSensors` of
this broker) each request's bytes are recorded once written, and each
response's bytes, latency (from just before the request was written to its
response read whole) and throttle time before its waiter gets it.
"""

from __future__ import annotations

import collections
import concurrent.futures
import logging
import ssl
import threading
import time
from typing import Any, Deque, Dict, Mapping, Optional, Tuple

from ..errors import (
    KafkaConnectionError,
    ProtocolError,
    PylogqError,
    RequestTimedOutError,
    SslAuthenticationError,
    UnsupportedVersionError,
    error_for_code,
)
from ..protocol.blocking_client import (
    MIN_FRAME,
    SIZE,
    KafkaSocket,
    decode_response_body,
    decode_response_header,
    encode_request,
    ssl_reason,
)
from ..protocol.constants import ApiKey
from ..protocol.messages import API_NAMES
from ..protocol.sasl import sasl_login
from .metrics import NodeSensors

__all__ = ["BrokerConnection", "CLIENT_VERSIONS"]

log = logging.getLogger("pylogq.client.connection")


#: API key -> (lowest, highest) version this client speaks. The highest is the one it is
#: written for (CLIENTS.md's table); a lower one is used only when the broker's maximum is
#: lower, down to the lowest version carrying every field the client relies on.
CLIENT_VERSIONS: Dict[int, Tuple[int, int]] = {
    ApiKey.PRODUCE: (3, 7),  # v3: magic v2 record batches
    ApiKey.FETCH: (4, 11),  # v4: last stable offset, isolation level
    ApiKey.LIST_OFFSETS: (1, 2),  # v1: one offset per timestamp
    ApiKey.METADATA: (1, 4),  # v1: controller id, internal flag
    ApiKey.OFFSET_COMMIT: (2, 3),
    ApiKey.OFFSET_FETCH: (1, 7),  # v7: require_stable (KIP-447)
    ApiKey.FIND_COORDINATOR: (0, 1),
    ApiKey.JOIN_GROUP: (1, 5),  # v1: rebalance timeout
    ApiKey.HEARTBEAT: (0, 1),
    ApiKey.LEAVE_GROUP: (0, 1),
    ApiKey.SYNC_GROUP: (0, 3),
    ApiKey.DESCRIBE_GROUPS: (0, 2),
    ApiKey.LIST_GROUPS: (0, 1),
    ApiKey.SASL_HANDSHAKE: (1, 1),  # v1: the exchange continues in SaslAuthenticate requests
    ApiKey.API_VERSIONS: (0, 2),
    ApiKey.CREATE_TOPICS: (0, 3),
    ApiKey.DELETE_TOPICS: (0, 3),
    ApiKey.DELETE_RECORDS: (0, 1),
    ApiKey.INIT_PRODUCER_ID: (0, 4),  # v3: the epoch bumped by id and epoch (KIP-360); v4: PRODUCER_FENCED
    ApiKey.ADD_PARTITIONS_TO_TXN: (0, 3),  # v4+ is the brokers' batched form (KIP-890)
    ApiKey.ADD_OFFSETS_TO_TXN: (0, 3),
    ApiKey.END_TXN: (0, 3),
    ApiKey.TXN_OFFSET_COMMIT: (0, 3),  # v3: generation, member and instance ids (KIP-447)
    ApiKey.DESCRIBE_CONFIGS: (1, 1),  # v1: config source instead of is_default
    ApiKey.ALTER_CONFIGS: (0, 1),
    ApiKey.SASL_AUTHENTICATE: (0, 1),
    ApiKey.CREATE_PARTITIONS: (0, 1),
    ApiKey.DELETE_GROUPS: (0, 1),
    ApiKey.ELECT_LEADERS: (0, 2),
    ApiKey.INCREMENTAL_ALTER_CONFIGS: (0, 0),
    ApiKey.ALTER_PARTITION_REASSIGNMENTS: (0, 0),
    ApiKey.LIST_PARTITION_REASSIGNMENTS: (0, 0),
    ApiKey.OFFSET_DELETE: (0, 0),
    ApiKey.DESCRIBE_PRODUCERS: (0, 0),
    ApiKey.WRITE_TXN_MARKERS: (0, 1),  # an administrator's abort of a hanging transaction
    ApiKey.DESCRIBE_TRANSACTIONS: (0, 0),
    ApiKey.LIST_TRANSACTIONS: (0, 1),  # v1: the duration filter (KIP-994)
    ApiKey.ALTER_REPLICA_LOG_DIRS: (0, 2),
    ApiKey.DESCRIBE_LOG_DIRS: (0, 4),  # v4: total and usable bytes
    ApiKey.DESCRIBE_CLUSTER: (0, 1),
    ApiKey.DESCRIBE_CLIENT_QUOTAS: (0, 1),
    ApiKey.ALTER_CLIENT_QUOTAS: (0, 1),
    ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: (0, 0),
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS: (0, 0),
    ApiKey.DESCRIBE_ACLS: (1, 3),  # v1: resource pattern types
    ApiKey.CREATE_ACLS: (1, 3),
    ApiKey.DELETE_ACLS: (1, 3),
}

#: The longest wait for a TCP connect (Kafka's socket.connection.setup.timeout.ms).
CONNECT_TIMEOUT_S = 10.0
#: The longest wait for the answer to a new connection's first request (ApiVersions), which
#: a broker gives at once; the request timeout when that is shorter.
HANDSHAKE_TIMEOUT_S = 5.0
#: The largest response accepted before the handshake is done; an ApiVersions response is a
#: few hundred bytes, and a size read from another protocol's answer is usually far larger.
MAX_HANDSHAKE_RESPONSE = 1 << 20

_UNSUPPORTED_VERSION = UnsupportedVersionError.code


class _InFlight:
    """A request waiting for its response: what to decode it with and who waits."""

    __slots__ = ("correlation_id", "api_key", "version", "future", "sent_at")

    def __init__(self, correlation_id: int, api_key: int, version: int) -> None:
        self.correlation_id = correlation_id
        self.api_key = api_key
        self.version = version
        self.sent_at = 0.0  # monotonic, just before the request was written
        self.future: "concurrent.futures.Future[Dict[str, Any]]" = concurrent.futures.Future()


class BrokerConnection:
    """A connection to one broker; thread-safe, requests pipelined.

    Invariant: ``_in_flight`` holds, in send order, exactly the requests sent on
    this socket that expect a response and have not had one; the reader thread
    pops the head for each response. Once closed (by ``close()``, a socket error
    or a protocol error) every waiting future fails with KafkaConnectionError
    and the connection is never reused: the owner opens a new one.
    """

    def __init__(self, host: str, port: int, client_id: Optional[str], timeout_s: float,
                 sasl: Optional[Tuple[str, str, str]] = None, label: str = "",
                 sensors: Optional[NodeSensors] = None, ssl_context: Optional[ssl.SSLContext] = None) -> None:
        self.host = host
        self.port = port
        self.address = "%s:%d" % (host, port)
        self.label = label or self.address
        self.client_id = client_id
        self.timeout_s = timeout_s
        self.versions: Dict[int, int] = {}  # negotiated version per API key
        self.broker_versions: Dict[int, Tuple[int, int]] = {}
        self.closed = False
        #: Where requests and responses are counted (None: nowhere); the transport may move a
        #: bootstrap connection's counts to the broker Metadata names at its address.
        self.sensors = sensors
        self._send_lock = threading.Lock()
        self._in_flight: Deque[_InFlight] = collections.deque()
        self._correlation_id = 0
        self._close_reason = ""
        self._unanswered_writes = False  # requests sent that get no response (acks=0 produces)
        self._max_response: Optional[int] = MAX_HANDSHAKE_RESPONSE  # None once the handshake is done
        try:
            sock = KafkaSocket(host, port, min(timeout_s, CONNECT_TIMEOUT_S), ssl_context)
        except OSError as exc:
            raise KafkaConnectionError("cannot connect to %s: %s" % (self.address, exc.strerror or exc)) from None
        sock.settimeout(None)  # the reader blocks; waiters enforce their own deadlines
        self._sock = sock
        # An SSL error the reader met: in TLS 1.3 a broker refuses a client's certificate
        # after the client's side of the handshake is done, with an alert its first read meets.
        self._tls_failure: Optional[ssl.SSLError] = None
        self._reader = threading.Thread(target=self._read_loop, name="pylogq-conn-%s" % self.label, daemon=True)
        self._reader.start()
        try:
            self._negotiate_versions()
            self._max_response = None
            if sasl is not None:
                mechanism, username, password = sasl
                sasl_login(self.request, mechanism, username, password, "broker %s" % self.address)
        except BaseException:
            self.close("handshake failed")
            if self._tls_failure is not None:
                raise SslAuthenticationError("SSL handshake with %s failed: %s" % (
                    self.address, ssl_reason(self._tls_failure))) from None
            raise

    def __repr__(self) -> str:
        return "BrokerConnection(%s%s)" % (self.label, ", closed" if self.closed else "")

    # -- requests -------------------------------------------------------------------

    def version(self, api_key: int) -> int:
        """The version this connection uses for ``api_key``; UnsupportedVersionError if none fits."""
        found = self.versions.get(api_key)
        if found is None:
            ours = CLIENT_VERSIONS[api_key]
            theirs = self.broker_versions.get(api_key)
            raise UnsupportedVersionError(
                "broker %s %s %s; this client speaks v%d-%d" % (
                    self.address, "does not support" if theirs is None else "supports only",
                    API_NAMES.get(api_key, str(api_key)) if theirs is None
                    else "%s v%d-%d" % (API_NAMES.get(api_key, str(api_key)), theirs[0], theirs[1]),
                    ours[0], ours[1]))
        return found

    def send(self, api_key: int, body: Mapping[str, Any], version: Optional[int] = None,
             expect_response: bool = True) -> "concurrent.futures.Future[Dict[str, Any]]":
        """Send one request; -> the future of its decoded response body.

        Without ``expect_response`` (a Produce with acks=0) the future is already
        done (with an empty dict) once the bytes are written.
        """
        if version is None:
            version = self.version(api_key)
        with self._send_lock:
            if self.closed:
                raise KafkaConnectionError("connection to %s is closed (%s)" % (self.address, self._close_reason))
            correlation_id = self._correlation_id
            self._correlation_id = (correlation_id + 1) & 0x7FFFFFFF
            try:
                frame = encode_request(api_key, version, correlation_id, self.client_id, body)
            except ValueError as exc:
                raise PylogqError("cannot encode %s v%d: %s" % (API_NAMES.get(api_key, api_key), version, exc)) \
                    from None
            entry = _InFlight(correlation_id, api_key, version)
            if expect_response:
                self._in_flight.append(entry)
            else:
                entry.future.set_result({})
                self._unanswered_writes = True
            entry.sent_at = time.monotonic()
            try:
                self._sock.send(frame)
            except OSError as exc:
                reason = "send failed: %s" % (exc.strerror or exc)
            else:
                sensors = self.sensors
                if sensors is not None:
                    sensors.request_sent(len(frame), entry.sent_at)
                return entry.future
        self.close(reason)
        raise KafkaConnectionError("connection to %s lost: %s" % (self.address, reason))

    def request(self, api_key: int, body: Mapping[str, Any], timeout_s: Optional[float] = None,
                version: Optional[int] = None) -> Dict[str, Any]:
        """Send and wait for the response body; RequestTimedOutError (and the connection
        closed, as its state is unknown) when ``timeout_s`` (default: the request timeout) passes."""
        future = self.send(api_key, body, version)
        return self.wait(future, api_key, self.timeout_s if timeout_s is None else timeout_s)

    def wait(self, future: "concurrent.futures.Future[Dict[str, Any]]", api_key: int,
             timeout_s: float) -> Dict[str, Any]:
        """The response of a sent request; on timeout the connection is closed and
        RequestTimedOutError raised."""
        try:
            return future.result(max(0.0, timeout_s))
        except concurrent.futures.TimeoutError:
            self.close("request timed out")
            raise RequestTimedOutError("%s request to %s got no response within %d ms" % (
                API_NAMES.get(api_key, api_key), self.address, int(timeout_s * 1000))) from None

    def drain(self) -> None:
        """Wait until the broker has taken every request sent so far, best effort.

        A request without a response (a Produce with acks=0) is done for the
        client once written; one round trip behind it proves the broker read
        it, as a broker handles a connection's requests in order. Used before
        closing, so a closed acks=0 producer's records are on the broker.
        """
        if not self._unanswered_writes or self.closed:
            return
        try:
            self.request(ApiKey.API_VERSIONS, {})
            self._unanswered_writes = False
        except PylogqError as exc:
            log.debug("draining %s before close failed: %s", self.label, exc)

    # -- the reader ------------------------------------------------------------------

    def _read_loop(self) -> None:
        reason = "closed"
        try:
            while True:
                head = self._sock.read_exactly(SIZE.size)
                if head is None:
                    reason = "the broker closed the connection"
                    break
                (size,) = SIZE.unpack(head)
                if size < MIN_FRAME:
                    reason = "bad response size %d" % size
                    break
                limit = self._max_response
                if limit is not None and size > limit:
                    reason = "the first answer is not Kafka's (it starts with %r); is it a Kafka listener?" % (
                        bytes(head),)
                    break
                body = self._sock.read_exactly(size)
                if body is None:
                    reason = "the broker closed the connection mid-response"
                    break
                with self._send_lock:
                    entry = self._in_flight.popleft() if self._in_flight else None
                if entry is None:
                    reason = "a response arrived for no request"
                    break
                try:
                    correlation_id, r = decode_response_header(body, entry.api_key, entry.version)
                    if correlation_id != entry.correlation_id:
                        reason = "response correlation id %d does not match request %d" % (
                            correlation_id, entry.correlation_id)
                        entry.future.set_exception(KafkaConnectionError(
                            "connection to %s lost: %s" % (self.address, reason)))
                        break
                    decoded = decode_response_body(body, r, entry.api_key, entry.version)
                except (ProtocolError, ValueError) as exc:
                    reason = "undecodable %s v%d response: %s" % (
                        API_NAMES.get(entry.api_key, entry.api_key), entry.version, exc)
                    entry.future.set_exception(ProtocolError("from %s: %s" % (self.address, reason)))
                    break
                sensors = self.sensors
                if sensors is not None:
                    sensors.response_read(entry.api_key, size + 4, entry.sent_at, decoded.get("throttle_time_ms"))
                entry.future.set_result(decoded)
        except OSError as exc:
            if isinstance(exc, ssl.SSLError):
                self._tls_failure = exc
            reason = "receive failed: %s" % (exc.strerror or exc)
        self.close(reason)

    def close(self, reason: str = "closed by the client") -> None:
        """Close the socket and fail every waiting request. Idempotent."""
        with self._send_lock:
            if self.closed:
                return
            self.closed = True
            self._close_reason = reason
            pending = list(self._in_flight)
            self._in_flight.clear()
        self._sock.shutdown()
        self._sock.close()
        if pending:
            log.debug("connection to %s closed with %d requests in flight: %s", self.label, len(pending), reason)
        for entry in pending:
            if not entry.future.done():
                entry.future.set_exception(KafkaConnectionError("connection to %s lost: %s" % (self.address, reason)))

    # -- handshake -------------------------------------------------------------------

    def _negotiate_versions(self) -> None:
        version = CLIENT_VERSIONS[ApiKey.API_VERSIONS][1]
        for _ in range(3):
            response = self._first_answer(version)
            ranges = {k["api_key"]: (k["min_version"], k["max_version"]) for k in response["api_keys"]}
            code = response["error_code"]
            if code == _UNSUPPORTED_VERSION and ApiKey.API_VERSIONS in ranges:
                lower = min(version, ranges[ApiKey.API_VERSIONS][1])
                if lower < version and lower >= CLIENT_VERSIONS[ApiKey.API_VERSIONS][0]:
                    version = lower
                    continue
            if code:
                raise (error_for_code(code) or UnsupportedVersionError)(
                    "ApiVersions v%d to %s answered error %d" % (version, self.address, code))
            self.broker_versions = ranges
            for api_key, (lo, hi) in CLIENT_VERSIONS.items():
                theirs = ranges.get(api_key)
                if theirs is None:
                    continue
                chosen = min(hi, theirs[1])
                if chosen >= max(lo, theirs[0]):
                    self.versions[api_key] = chosen
            return
        raise UnsupportedVersionError("broker %s and this client share no ApiVersions version" % self.address)

    def _first_answer(self, version: int) -> Dict[str, Any]:
        """The broker's ApiVersions response, waited for :data:`HANDSHAKE_TIMEOUT_S` at most."""
        future = self.send(ApiKey.API_VERSIONS, {}, version)
        try:
            return self.wait(future, ApiKey.API_VERSIONS, min(self.timeout_s, HANDSHAKE_TIMEOUT_S))
        except RequestTimedOutError as exc:
            raise RequestTimedOutError("%s of connecting; is it a Kafka listener?" % exc.args[0]) from None
