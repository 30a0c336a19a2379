"""One client connection: framing, pipelining, SASL state, in-order responses and sendfile.

Requests are size-prefixed frames (int32, then the request header and body). A
connection reads them as they come and starts each at once, so a produce behind a
parked long-poll fetch still appends; responses leave in request order, as the
protocol requires. Bad frames (a size below zero or above ``socket.request.max.bytes``,
an unknown API, bytes that do not decode) close this connection only, after the
responses already due are written.
"""

from __future__ import annotations

import asyncio
import logging
import os
import struct
from typing import TYPE_CHECKING, Any, Awaitable, List, Optional, Tuple, Union

from ..errors import CloseConnection, ProtocolError
from ..protocol import REQUEST_HEADER, Reader
from .listeners import Listener

if TYPE_CHECKING:
    from .server import KafkaServer

log = logging.getLogger("pylogq.server")

__all__ = ["Connection", "CloseConnection"]

_HEADER = struct.Struct(">hhi")
_SIZE = struct.Struct(">i")
# Requests read ahead of their responses on one connection; past this the
# connection stops reading (Kafka answers one at a time; pipelining a few is cheaper).
MAX_IN_FLIGHT = 32
# Below this a region is copied into the write buffer: a sendfile call costs more.
SENDFILE_MIN = 64 * 1024
# After an answer that ends the connection (a failed SASL authentication), wait this long
# before closing, as Kafka does (connection.failed.authentication.delay.ms, 100 ms): a
# client that reads the answer and the end of the stream in one go may drop the answer.
CLOSE_AFTER_RESPONSE_DELAY_S = 0.1

Parts = Optional[List[Any]]
Outcome = Union[Parts, Awaitable[Parts]]


class Connection:
    """State of one client connection; runs on the server's event loop (not thread-safe)."""

    def __init__(self, server: "KafkaServer", reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                 listener: Listener, conn_id: int) -> None:
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
        self.user: Optional[str] = None
        self.client_id = ""
        self.requests = 0
        self.in_flight = 0
        self.last_active = asyncio.get_running_loop().time()
        self.close_reason = "client closed"
        self.close_after_response = False  # set by a handler whose answer ends the connection
        self._pending: "asyncio.Queue[Optional[Tuple[asyncio.Future[Parts], _Slot]]]" = asyncio.Queue(MAX_IN_FLIGHT)
        self._reading: Optional["asyncio.Task[None]"] = None
        self._stopped_reading = False

    # -- lifecycle -------------------------------------------------------------------

    async def run(self) -> None:
        loop = asyncio.get_running_loop()
        log.info("connection opened id=%d peer=%s listener=%s", self.id, self.peer, self.listener.protocol)
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

    def stop_reading(self) -> None:
        """Stop taking requests (shutdown or idle); answered requests still get their responses."""
        if self._reading is not None and not self._reading.done():
            self._stopped_reading = True  # the CancelledError that follows is ours, not the task's
            self._reading.cancel()

    @property
    def idle(self) -> bool:
        return self.in_flight == 0

    # -- reading ---------------------------------------------------------------------

    async def _read_loop(self) -> None:
        reader = self.reader
        server = self.server
        limit = server.socket_request_max_bytes
        while True:
            try:
                head = await reader.readexactly(4)
            except (asyncio.IncompleteReadError, ConnectionError):
                return
            size = _SIZE.unpack(head)[0]
            if size < 0 or size > limit:
                self.close_reason = "request size %d outside 0..socket.request.max.bytes (%d)" % (size, limit)
                log.warning("bad request id=%d peer=%s error=%r", self.id, self.peer, self.close_reason)
                return
            slot = _Slot(server)
            await slot.acquire()
            try:
                body = await reader.readexactly(size)
            except (asyncio.IncompleteReadError, ConnectionError):
                slot.release()
                self.close_reason = "connection closed mid-request"
                return
            except BaseException:  # stopped (idle or shutdown) mid-body: give the slot back
                slot.release()
                raise
            self.last_active = asyncio.get_running_loop().time()
            self.requests += 1
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
            if isinstance(outcome, list) or outcome is None:
                fut: "asyncio.Future[Parts]" = asyncio.get_running_loop().create_future()
                fut.set_result(outcome)
            else:
                fut = asyncio.ensure_future(outcome)
            self.in_flight += 1
            await self._pending.put((fut, slot))
            if self.close_after_response:
                self.close_reason = "closed after an error response"
                return

    def _dispatch(self, body: bytes, slot: "_Slot") -> Outcome:
        if self.sasl_raw_token:
            self.sasl_raw_token = False
            return self.server.handlers.sasl_raw_token(self, body)
        if len(body) < 8:
            raise CloseConnection("request of %d bytes is shorter than a request header" % len(body))
        api_key, version, correlation_id = _HEADER.unpack_from(body)
        slot.correlation_id = correlation_id
        handlers = self.server.handlers
        supported = handlers.supported(api_key)
        if supported is None:
            raise CloseConnection("unknown API key %d" % api_key)
        if not supported[0] <= version <= supported[1]:
            return handlers.unsupported_version(self, api_key, version, correlation_id)
        if not self.authenticated and api_key not in handlers.BEFORE_AUTHENTICATION:
            raise CloseConnection("%s request before SASL authentication" % handlers.name(api_key))
        reader = Reader(body)
        try:
            header = REQUEST_HEADER.decode_from(reader, handlers.request_header_version(api_key, version))
            request = handlers.decode(api_key, version, reader)
        except ProtocolError as exc:
            raise CloseConnection("malformed %s v%d request: %s" % (handlers.name(api_key), version, exc)) from None
        self.client_id = header["client_id"] or ""
        return handlers.handle(self, api_key, version, correlation_id, request, slot)

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
            self.last_active = asyncio.get_running_loop().time()

    async def _send_region(self, region: Any) -> None:
        """Write a file region: ``sendfile`` from the page cache when the loop can, else a copy."""
        length = len(region)
        # asyncio's own loops send a file natively; uvloop's inherits a sendfile that only raises.
        if length < SENDFILE_MIN or not isinstance(asyncio.get_running_loop(), asyncio.BaseEventLoop):
            self.writer.write(region.read())
            return
        sent = await asyncio.get_running_loop().sendfile(
            self.writer.transport, _RegionFile(region), region.position, length,  # type: ignore[arg-type]
            fallback=True)
        if sent != length:
            raise ConnectionError("sendfile wrote %d of %d bytes" % (sent, length))


class _Slot:
    """One of the server's ``queued.max.requests`` places, held from a request's read until its
    response is written, or until it parks (a long poll, a join) so parked requests never
    starve the rest. Carries the request's correlation id for handlers that frame their
    own responses."""

    __slots__ = ("_server", "_held", "correlation_id")

    def __init__(self, server: "KafkaServer") -> None:
        self._server = server
        self._held = False
        self.correlation_id = 0

    async def acquire(self) -> None:
        await self._server.request_slots.acquire()
        self._held = True

    def release(self) -> None:
        if self._held:
            self._held = False
            self._server.request_slots.release()


class _RegionFile:
    """A file object over a segment region for ``loop.sendfile``: it must not move the
    shared segment file's position, which other readers use concurrently."""

    mode = "rb"

    def __init__(self, region: Any) -> None:
        self._region = region
        self._position: int = region.position

    def fileno(self) -> int:
        return int(self._region.fileno())

    def seek(self, offset: int, whence: int = 0) -> int:
        self._position = offset
        return offset

    def tell(self) -> int:
        return self._position

    def readinto(self, buffer: Any) -> int:
        data = os.pread(self.fileno(), len(buffer), self._position)
        buffer[: len(data)] = data
        self._position += len(data)
        return len(data)
