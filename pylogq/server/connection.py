"""One client connection: framing, pipelining, SASL state, in-order responses and sendfile.

Requests are size-prefixed frames (int32, then the request header and body). A
connection reads them as they come and starts each at once, so a produce behind a
parked long-poll fetch still appends; responses leave in request order, as the
protocol requires. Bad frames (a size below zero or above ``socket.request.max.bytes``,
an unknown API, bytes that do not decode) close this connection only, after the
responses already due are written.

What a client can make the broker hold, and for how long: a request takes one of the
server's ``queued.max.requests`` slots only once it has arrived whole, so clients that
send a size and stop hold no slot. From its size prefix, a request must arrive within
``socket.request.read.timeout.ms``, and a connection that receives nothing (between
requests or inside one) for ``connections.max.idle.ms`` with nothing in flight is
closed; the server's reaper enforces both. The body is kept as it arrives, never
allocated at its declared size, and ``queued.max.request.bytes`` (when set) bounds the
declared sizes of the requests being read or waiting for their answer.

A client over a quota (:mod:`.quotas`) gets its answer at once, with the throttle time,
and its connection is muted for that time (:meth:`Connection.mute_for`): no request is
taken from it until then, as Kafka mutes a throttled channel (KIP-219). A request read
before the throttle was decided (pipelined behind a parked fetch) is still served.

SASL sessions (KIP-368): with ``connections.max.reauth.ms`` a session ends that long after
its authentication; the client re-authenticates on the same connection (a SaslHandshake
then SaslAuthenticate), and any other request after the end closes the connection, as
Kafka closes it.
"""

from __future__ import annotations

import asyncio
import logging
import os
import struct
import time
from collections import deque
from typing import Any, Awaitable, Deque, Dict, FrozenSet, List, Optional, Protocol, Tuple, Union

from ..cluster.names import sanitize
from ..errors import CloseConnection, ProtocolError
from ..protocol import REQUEST_HEADER, Reader
from ..protocol.message_data import RequestHeader
from ..protocol.schema import Message
from ..protocol.scram import ScramServer
from .listeners import Listener
from .ssl_principal import ANONYMOUS

#: Kafka's kafka.request.logger: one line per answered request, at DEBUG.
request_log = logging.getLogger("pylogq.request")
log = logging.getLogger("pylogq.server")

__all__ = ["Connection", "ConnectionHost", "RequestHandler", "RequestMemory", "RequestPlaces", "RequestSlot",
           "StreamReading", "StreamWriting"]

_HEADER = struct.Struct(">hhi")
_SASL_HANDSHAKE = 17
_SIZE = struct.Struct(">i")
# Requests read ahead of their responses on one connection; past this the
# connection stops reading (Kafka answers one at a time; pipelining a few is cheaper).
MAX_IN_FLIGHT = 32
# Below this a region is copied into the write buffer: a sendfile call costs more.
SENDFILE_MIN = 64 * 1024
# A region copied (no sendfile: TLS, uvloop, or a small one) is read this much at a time.
COPY_CHUNK = 256 * 1024
# After an answer that ends the connection, wait this long before closing: a client that
# reads the answer and the end of the stream in one go may drop the answer (kafka-python 3
# reports a lost connection instead of a failed authentication). A failed SASL authentication
# also waits connection.failed.authentication.delay.ms before its answer, as Kafka delays it.
CLOSE_AFTER_RESPONSE_DELAY_S = 0.1

class Region(Protocol):
    """A byte range of a file a response sends as it is (a segment's
    :class:`~pylogq.storage.segment.FileRegion`): by sendfile when large, else copied
    (:meth:`Connection._send_region`)."""

    @property
    def position(self) -> int: ...

    def __len__(self) -> int: ...

    def read(self) -> bytes: ...

    def fileno(self) -> int: ...


class StreamReading(Protocol):
    """A connection's reading end: an :class:`asyncio.StreamReader`, or a TLS connection's
    (:class:`~pylogq.server.ssl_transport.SslTransportLayer`)."""

    async def read(self, n: int = -1) -> bytes: ...

    async def readexactly(self, n: int) -> bytes: ...


class StreamWriting(Protocol):
    """A connection's writing end: an :class:`asyncio.StreamWriter`, or a TLS connection's."""

    def write(self, data: bytes) -> None: ...

    async def drain(self) -> None: ...

    def close(self) -> None: ...

    def get_extra_info(self, name: str, default: Any = None) -> Any: ...


#: A piece of a response as written: bytes, or a file region between them.
Part = Union[bytes, Region]
#: A response as written (None: nothing to answer).
Parts = Optional[List[Part]]
Outcome = Union[Parts, Awaitable[Parts]]


class RequestHandler(Protocol):
    """What a connection hands its requests to (:class:`pylogq.server.handlers.Handlers`)."""

    @property
    def BEFORE_AUTHENTICATION(self) -> FrozenSet[int]: ...

    @property
    def BEFORE_JOINING(self) -> FrozenSet[int]: ...

    def supported(self, api_key: int) -> Optional[Tuple[int, int]]: ...

    def name(self, api_key: int) -> str: ...

    def request_header_version(self, api_key: int, version: int) -> int: ...

    def decode(self, api_key: int, version: int, reader: Reader) -> Message: ...

    def handle(self, conn: "Connection", api_key: int, version: int, correlation_id: int,
               request: Message, slot: "RequestSlot") -> Outcome: ...

    def unsupported_version(self, conn: "Connection", api_key: int, version: int, correlation_id: int) -> Outcome: ...

    def sasl_raw_token(self, conn: "Connection", token: bytes) -> Outcome: ...


class ConnectionHost(Protocol):
    """What a connection uses of the server that accepted it (:class:`pylogq.server.server.KafkaServer`)."""

    @property
    def handlers(self) -> RequestHandler: ...

    stopping: bool
    socket_request_max_bytes: int
    request_memory: Optional["RequestMemory"]
    request_places: "RequestPlaces"
    joined: asyncio.Event

    def request_answered(self, slot: "RequestSlot") -> None: ...

    def request_sent(self, slot: "RequestSlot", sending: float, sent: float) -> None: ...

    def session_expired(self, conn: "Connection") -> None: ...


class Connection:
    """State of one client connection; runs on the server's event loop (not thread-safe).

    ``principal`` is who the client is, as Kafka's principal builder names it (who the
    authorizer sees, what quotas key on): ``User:ANONYMOUS`` until it authenticates; on an SSL
    listener ``User:`` and its certificate's subject mapped by ``ssl.principal.mapping.rules``
    when it showed one; on a SASL listener ``User:`` and the SASL user name once
    authenticated (:meth:`authenticated_as`).
    """

    def __init__(self, server: ConnectionHost, reader: StreamReading, writer: StreamWriting,
                 listener: Listener, conn_id: int, principal: str = ANONYMOUS) -> None:
        self.server = server
        self.reader = reader
        self.writer = writer
        self.listener = listener
        self.id = conn_id
        peer = writer.get_extra_info("peername") or ("?", 0)
        self.peer = "%s:%s" % (peer[0], peer[1])
        self.peer_host = str(peer[0])
        sock = writer.get_extra_info("sockname") or (listener.host, listener.port)
        self.local_port = int(sock[1])
        self.authenticated = not listener.sasl
        self.sasl_mechanism: Optional[str] = None
        self.sasl_raw_token = False  # after SaslHandshake v0 the next frame is a bare token
        self.sasl_exchange: Optional[ScramServer] = None  # a SCRAM exchange under way
        self.user: Optional[str] = None
        # KIP-368: when this connection's SASL session ends (loop time; None: never), whether its
        # client authenticated with SaslAuthenticate v1+ (it may then re-authenticate), and a
        # re-authentication under way (a SaslHandshake on the authenticated connection).
        self.session_expires: Optional[float] = None
        self.reauthentication_supported = False
        self.reauthenticating = False
        self.reauthentication_mechanism: Optional[str] = None  # asked for by the re-authentication
        # KIP-219: no request is taken from the connection before this loop time (0: not muted).
        self.muted_until = 0.0
        self._principal = self.quota_user = ""
        self.principal = principal
        self.client_id = ""
        self.requests = 0
        self.in_flight = 0
        self.last_active = asyncio.get_running_loop().time()  # the last byte received or response written
        # The request being read: when its size prefix arrived (None between requests),
        # its declared size and the bytes received so far; the server's reaper reads them.
        self.reading_since: Optional[float] = None
        self.reading_size = 0
        self.reading_received = 0
        # Waiting for the server (a request slot, request memory), not for the client:
        # neither idle nor late, whatever the clock says.
        self.waiting_for_server = False
        self.close_reason = "client closed"
        self.close_after_response = False  # set by a handler whose answer ends the connection
        # Done when this connection's last Produce handled off the loop has appended: the next
        # one waits for it (Handlers.produce), so produces append in request order.
        self.produce_tail: "Optional[asyncio.Future[None]]" = None
        self._pending: "asyncio.Queue[Optional[Tuple[asyncio.Future[Parts], RequestSlot]]]" = asyncio.Queue(
            MAX_IN_FLIGHT)
        self._reading: Optional["asyncio.Task[None]"] = None
        self._stopped_reading = False

    # -- lifecycle -------------------------------------------------------------------

    async def run(self) -> None:
        loop = asyncio.get_running_loop()
        log.info("connection opened id=%d peer=%s listener=%s", self.id, self.peer, self.listener.name)
        writing = loop.create_task(self._write_loop())
        self._reading = loop.create_task(self._read_loop())
        try:
            await self._reading
        except asyncio.CancelledError:
            if not (self.server.stopping or self._stopped_reading):
                raise
        finally:
            await self._pending.put(None)
            try:
                await writing
            except Exception:  # noqa: BLE001 - a broken socket ends the connection either way
                pass
            if self.close_after_response and not self.server.stopping:
                await asyncio.sleep(CLOSE_AFTER_RESPONSE_DELAY_S)
            self.writer.close()
            log.info("connection closed id=%d peer=%s requests=%d reason=%s",
                     self.id, self.peer, self.requests, self.close_reason)

    @property
    def principal(self) -> str:
        return self._principal

    @principal.setter
    def principal(self, principal: str) -> None:
        self._principal = principal
        #: The principal's user as quotas know it (sanitized, as Kafka's session caches it):
        #: computed when the principal changes, not per request.
        self.quota_user = sanitize(principal.partition(":")[2])

    def authenticated_as(self, user: str, mechanism: str) -> None:
        """SASL authentication succeeded: the connection is ``User:<user>`` from now on."""
        self.user = user
        self.authenticated = True
        self.principal = "User:" + user
        log.info("authenticated id=%d peer=%s listener=%s principal=%s mechanism=%s", self.id, self.peer,
                 self.listener.name, self.principal, mechanism)

    def stop_reading(self) -> None:
        """Stop taking requests (shutdown or idle); answered requests still get their responses."""
        if self._reading is not None and not self._reading.done():
            self._stopped_reading = True  # the CancelledError that follows is ours, not the task's
            self._reading.cancel()

    def mute_for(self, throttle_ms: int) -> None:
        """Take no request from this connection for ``throttle_ms`` (a quota's throttle)."""
        if throttle_ms > 0:
            until = asyncio.get_running_loop().time() + throttle_ms / 1000.0
            if until > self.muted_until:
                self.muted_until = until

    async def _unmuted(self) -> None:
        """Wait out a throttle (waiting for the server: neither idle nor late); once it has
        ended the connection is unmuted (``muted_until`` 0: later requests do not wait here)."""
        loop = asyncio.get_running_loop()
        while True:
            left = self.muted_until - loop.time()
            if left <= 0:
                self.muted_until = 0.0
                return
            self.waiting_for_server = True
            try:
                await asyncio.sleep(left)  # the throttle itself, not synchronization
            finally:
                self.waiting_for_server = False

    @property
    def idle(self) -> bool:
        """Nothing in flight and not waiting for the server: an idle connection, or one
        inside a partial request (no progress since ``last_active`` is idleness too)."""
        return self.in_flight == 0 and not self.waiting_for_server

    # -- reading ---------------------------------------------------------------------

    async def _read_loop(self) -> None:
        reader = self.reader
        server = self.server
        limit = server.socket_request_max_bytes
        loop = asyncio.get_running_loop()
        while True:
            if self.muted_until:
                await self._unmuted()
            try:
                head = await reader.readexactly(4)
            except asyncio.IncompleteReadError:
                return
            except ConnectionError as exc:  # a reset, or a TLS record that does not decrypt
                self.close_reason = "connection lost: %s" % (exc,)
                return
            size = _SIZE.unpack(head)[0]
            if size < 0 or size > limit:
                self.close_reason = "request size %d outside 0..socket.request.max.bytes (%d)" % (size, limit)
                log.warning("bad request id=%d peer=%s error=%r", self.id, self.peer, self.close_reason)
                return
            slot = RequestSlot(server)
            try:
                if server.request_memory is not None:
                    self.waiting_for_server = True
                    await slot.reserve(server.request_memory, size)
                    self.waiting_for_server = False
                self.reading_since = self.last_active = loop.time()
                body = await self._read_body(size)
                self.reading_since = None
                if self.muted_until:  # throttled while this request arrived
                    await self._unmuted()
                arrived = time.monotonic()
                # The request is whole: only now does it take one of the queued.max.requests slots.
                self.waiting_for_server = True
                await slot.acquire()
                self.waiting_for_server = False
                slot.arrived = arrived
            except (asyncio.IncompleteReadError, ConnectionError):
                self.reading_since = None
                slot.release()
                self.close_reason = "connection closed mid-request"
                return
            except BaseException:  # stopped (idle, late or shutdown) mid-request: give back what it holds
                self.reading_since = None
                slot.release()
                raise
            self.requests += 1
            slot.size = size
            slot.started = time.monotonic()
            try:
                outcome = self._dispatch(body, slot)
            except CloseConnection as exc:
                slot.release()
                self.close_reason = str(exc)
                log.warning("bad request id=%d peer=%s client_id=%s error=%r",
                            self.id, self.peer, self.client_id, self.close_reason)
                return
            except Exception as exc:  # noqa: BLE001 - a handler bug ends this connection, not the server
                slot.release()
                self.close_reason = "internal error: %r" % (exc,)
                log.exception("request failed id=%d peer=%s client_id=%s", self.id, self.peer, self.client_id)
                return
            slot.done = slot.dispatched = time.monotonic()
            if isinstance(outcome, list) or outcome is None:
                fut: "asyncio.Future[Parts]" = loop.create_future()
                fut.set_result(outcome)
            else:
                fut = asyncio.ensure_future(outcome)
                fut.add_done_callback(slot.answered)
            self.in_flight += 1
            await self._pending.put((fut, slot))
            if self.close_after_response:
                self.close_reason = "closed after an error response"
                return

    async def _read_body(self, size: int) -> bytes:
        """The next ``size`` bytes, kept as they arrive (a declared size allocates nothing);
        each chunk is progress (``last_active``) for the idle reaper."""
        self.reading_size = size
        self.reading_received = 0
        if size == 0:
            return b""
        reader = self.reader
        chunk = await reader.read(size)
        if len(chunk) == size:  # the usual case: the request came in one piece
            self.reading_received = size
            return chunk
        loop = asyncio.get_running_loop()
        chunks = []
        received = 0
        while True:
            if not chunk:
                raise asyncio.IncompleteReadError(b"", size)
            chunks.append(chunk)
            received += len(chunk)
            self.reading_received = received
            self.last_active = loop.time()
            if received == size:
                return b"".join(chunks)
            chunk = await reader.read(size - received)

    def _dispatch(self, body: bytes, slot: "RequestSlot") -> Outcome:
        if self.sasl_raw_token:
            self.sasl_raw_token = False
            return self.server.handlers.sasl_raw_token(self, body)
        if len(body) < 8:
            raise CloseConnection("request of %d bytes is shorter than a request header" % len(body))
        api_key, version, correlation_id = _HEADER.unpack_from(body)
        slot.correlation_id = correlation_id
        slot.api_key = api_key
        slot.version = version
        handlers = self.server.handlers
        supported = handlers.supported(api_key)
        if supported is None:
            raise CloseConnection("unknown API key %d" % api_key)
        if not supported[0] <= version <= supported[1]:
            return handlers.unsupported_version(self, api_key, version, correlation_id)
        if not self.authenticated and api_key not in handlers.BEFORE_AUTHENTICATION:
            raise CloseConnection("%s request before SASL authentication" % handlers.name(api_key))
        if self.session_expires is not None and not self.reauthenticating and api_key != _SASL_HANDSHAKE \
                and asyncio.get_running_loop().time() >= self.session_expires:
            self.server.session_expired(self)
            raise CloseConnection("%s request after the SASL session expired (connections.max.reauth.ms)"
                                  % handlers.name(api_key))
        reader = Reader(body)
        try:
            header: RequestHeader = REQUEST_HEADER.read(reader, handlers.request_header_version(api_key, version))
            request = handlers.decode(api_key, version, reader)
        except ProtocolError as exc:
            raise CloseConnection("malformed %s v%d request: %s" % (handlers.name(api_key), version, exc)) from None
        self.client_id = header.client_id or ""
        if not self.server.joined.is_set() and api_key not in handlers.BEFORE_JOINING:
            return self._after_joining(api_key, version, correlation_id, request, slot)
        return handlers.handle(self, api_key, version, correlation_id, request, slot)

    async def _after_joining(self, api_key: int, version: int, correlation_id: int, request: Message,
                             slot: "RequestSlot") -> Parts:
        """A client's request to a broker still joining its cluster, answered once it has."""
        await self.server.joined.wait()
        outcome = self.server.handlers.handle(self, api_key, version, correlation_id, request, slot)
        if isinstance(outcome, list) or outcome is None:
            return outcome
        return await outcome

    # -- writing ---------------------------------------------------------------------

    async def _write_loop(self) -> None:
        writer = self.writer
        broken = False
        while True:
            item = await self._pending.get()
            if item is None:
                return
            fut, slot = item
            try:
                parts = await fut
            except CloseConnection as exc:
                parts = None
                self.close_reason = str(exc)
                self.stop_reading()
                broken = True
            except Exception as exc:  # noqa: BLE001 - one bad request must not take the server down
                log.exception("request failed id=%d peer=%s client_id=%s", self.id, self.peer, self.client_id)
                parts = None
                self.close_reason = "internal error: %r" % (exc,)
                self.stop_reading()
                broken = True
            finally:
                slot.release()
                self.in_flight -= 1
            if broken:
                # Drain the rest without answering: the connection is closing.
                continue
            sending = time.monotonic()
            self.server.request_answered(slot)
            if parts:
                try:
                    for part in parts:
                        if isinstance(part, bytes):
                            writer.write(part)
                        else:
                            await self._send_region(part)
                    await writer.drain()
                except (ConnectionError, OSError) as exc:
                    self.close_reason = "write failed: %s" % exc
                    self.stop_reading()
                    broken = True
            if not broken:
                sent = time.monotonic()
                self.server.request_sent(slot, sending, sent)
                if request_log.isEnabledFor(logging.DEBUG) and slot.api_key >= 0:
                    request_log.debug("completed %s v%d id=%d corr=%d client_id=%s errors=%s total_ms=%.1f",
                                      slot.metric_name or slot.api_key, slot.version, self.id, slot.correlation_id,
                                      self.client_id, dict(slot.errors) if slot.errors else "{}",
                                      (sent - slot.arrived) * 1000.0)
            self.last_active = asyncio.get_running_loop().time()

    async def _send_region(self, region: Region) -> None:
        """Write a file region: by ``sendfile`` from the page cache where that can be (a plain
        socket on one of asyncio's own loops, a region of :data:`SENDFILE_MIN` or more), else
        copied: whole when it is :data:`COPY_CHUNK` or less (a small region goes out with the
        framing written before it: over TLS, in the same records), else a chunk at a time with
        a drain between chunks, so that a large region is never held in memory whole. Over TLS
        the bytes must pass through OpenSSL; uvloop's loop inherits a sendfile that only raises."""
        length = len(region)
        writer = self.writer
        loop = asyncio.get_running_loop()
        if length >= SENDFILE_MIN and isinstance(writer, asyncio.StreamWriter) \
                and isinstance(loop, asyncio.BaseEventLoop):
            sent = await loop.sendfile(writer.transport, _RegionFile(region), region.position,  # type: ignore[arg-type]
                                       length, fallback=True)
            if sent != length:
                raise ConnectionError("sendfile wrote %d of %d bytes" % (sent, length))
            return
        if length <= COPY_CHUNK:
            writer.write(region.read())
            return
        fd, position, left = region.fileno(), region.position, length
        while left:
            chunk = os.pread(fd, min(left, COPY_CHUNK), position)
            if not chunk:
                raise ConnectionError("file region ended %d bytes early" % left)
            writer.write(chunk)
            position += len(chunk)
            left -= len(chunk)
            await writer.drain()


class RequestSlot:
    """What one request holds of the server: one of the ``queued.max.requests`` places, taken
    once the request has arrived whole, and its declared size of ``queued.max.request.bytes``
    (when bounded), taken before its body is read. Both are held until the response is
    written, or until the request parks (a long poll, a join) so parked requests never
    starve the rest. Carries the request's correlation id for handlers that frame their
    own responses. Runs on the loop (not thread-safe); ``release`` is idempotent."""

    __slots__ = ("_places", "_held", "_memory", "_bytes", "correlation_id", "api_key", "version", "follower",
                 "errors", "metric_name", "arrived", "started", "dispatched", "done", "size", "throttle_ms")

    def __init__(self, server: ConnectionHost) -> None:
        self._places = server.request_places
        self._held = False
        self._memory: Optional[RequestMemory] = None
        self._bytes = 0
        self.correlation_id = 0
        # For the request metrics: what it was (api -1: not a Kafka request), the error
        # codes of its answer, and when (time.monotonic) it arrived whole, took its slot
        # and started, left its handler, and had its answer ready.
        self.api_key = -1
        self.version = 0
        self.follower = False
        self.errors: Optional[Dict[int, int]] = None
        self.metric_name = ""
        self.arrived = self.started = self.dispatched = self.done = 0.0
        #: The request's size (what a produce quota counts), and a throttle its handler
        #: decided (a controller mutation quota's) for the response to carry.
        self.size = 0
        self.throttle_ms = 0

    def answered(self, future: "asyncio.Future[Parts]") -> None:
        self.done = time.monotonic()

    async def reserve(self, memory: "RequestMemory", size: int) -> None:
        await memory.acquire(size)
        self._memory = memory
        self._bytes = size

    async def acquire(self) -> None:
        await self._places.acquire()
        self._held = True

    def release(self) -> None:
        if self._held:
            self._held = False
            self._places.release()
        if self._memory is not None:
            memory, self._memory = self._memory, None
            memory.release(self._bytes)


class RequestPlaces:
    """``queued.max.requests``: the places requests hold while the server works on them.
    Runs on the loop (not thread-safe); ``held`` is read by the metrics from any thread."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.held = 0
        self._semaphore = asyncio.Semaphore(limit)

    async def acquire(self) -> None:
        await self._semaphore.acquire()
        self.held += 1

    def release(self) -> None:
        self.held -= 1
        self._semaphore.release()

    @property
    def free(self) -> int:
        return self.limit - self.held


class RequestMemory:
    """``queued.max.request.bytes``: a budget of request bytes, as Kafka's memory pool.

    A request reserves its declared size before its body is read and gives it back with
    its slot. As in Kafka (a non-strict pool), a reservation is granted whenever some
    budget is left, even if the request is larger than what is left: a request as large
    as ``socket.request.max.bytes`` is never starved, and what is reserved stays below
    the budget plus one request. Waiters are served in order. Runs on the loop (not
    thread-safe).
    """

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.available = capacity
        self._waiters: Deque[Tuple["asyncio.Future[None]", int]] = deque()

    async def acquire(self, size: int) -> None:
        if self.available > 0 and not self._waiters:
            self.available -= size
            return
        future: "asyncio.Future[None]" = asyncio.get_running_loop().create_future()
        self._waiters.append((future, size))
        try:
            await future
        except asyncio.CancelledError:
            if future.done() and not future.cancelled():  # granted, but the waiter was stopped
                self.release(size)
            elif (future, size) in self._waiters:
                self._waiters.remove((future, size))
                self._grant()  # it may have been first in line
            raise

    def release(self, size: int) -> None:
        self.available += size
        self._grant()

    def _grant(self) -> None:
        while self._waiters and self.available > 0:
            future, wanted = self._waiters.popleft()
            if future.done():  # cancelled; its waiter has not run yet
                continue
            self.available -= wanted
            future.set_result(None)


class _RegionFile:
    """A file object over a segment region for ``loop.sendfile``: it must not move the
    shared segment file's position, which other readers use concurrently."""

    mode = "rb"

    def __init__(self, region: Region) -> None:
        self._region = region
        self._position = region.position

    def fileno(self) -> int:
        return int(self._region.fileno())

    def seek(self, offset: int, whence: int = 0) -> int:
        self._position = offset
        return offset

    def tell(self) -> int:
        return self._position

    def readinto(self, buffer: bytearray) -> int:
        data = os.pread(self.fileno(), len(buffer), self._position)
        buffer[: len(data)] = data
        self._position += len(data)
        return len(data)
