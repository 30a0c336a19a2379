"""A blocking Kafka protocol socket: request frames out, response frames in, one codec.

Wire framing (every integer big-endian)::

    Request  => Size:int32 RequestHeader Body      (header v1 or v2: api key, api version,
                                                    correlation id, client id; v0 has no client id)
    Response => Size:int32 ResponseHeader Body     (header v0 or v1: correlation id)

Both of pylogq's socket clients stand on this module: the clients' pipelined
:class:`~pylogq.client.connection.BrokerConnection` (which adds version negotiation,
SASL and a reader thread that matches pipelined responses to their requests) uses
:class:`KafkaSocket`, :func:`encode_request` and the response decoders; the brokers'
:class:`~pylogq.server.inter_broker.TcpInterBrokerClient` uses :class:`BlockingClient`, which
sends one request and reads its answer at a time.

Over TLS (an SSL or SASL_SSL listener) a :class:`KafkaSocket` is given an
:class:`ssl.SSLContext`: the handshake is done when it connects, and the records pass
through an :class:`ssl.SSLObject` of its own rather than an ``SSLSocket``, as one
thread reads while others write (OpenSSL's objects take one thread at a time: a lock
serializes them, never held across a wait for the network).

A request body is a message class of :mod:`pylogq.protocol.message_data` or a mapping of
its fields. A response is decoded as a dict (what the clients read), or with ``typed=True``
as its message class (what the brokers read).
"""

from __future__ import annotations

import re
import socket
import ssl
import struct
import threading
from typing import Any, Dict, Literal, Mapping, Optional, Tuple, Union, cast, overload

from ..errors import ProtocolError, SslAuthenticationError, UnsupportedVersionError
from .constants import ApiKey
from .messages import REQUEST_HEADER, REQUESTS, RESPONSE_HEADER, RESPONSES, header_versions
from .schema import Message
from .types import Reader, Writer

__all__ = ["KafkaSocket", "BlockingClient", "encode_request", "ssl_reason", "decode_response_header",
           "decode_response_body", "decode_response"]

SIZE = struct.Struct(">i")
_SSL_SOURCE = re.compile(r"\s*\(_ssl\.c:\d+\)$")
#: A frame's bytes (what :func:`encode_request` and :meth:`KafkaSocket.read_frame` give are bytearrays).
Frame = Union[bytes, bytearray]
#: A request body: its message class, or a mapping of its fields (snake_case names).
RequestBody = Union[Message, Mapping[str, Any]]
#: A decoded response body as a dict of its fields.
ResponseDict = Dict[str, Any]
#: The smallest response frame: a response header v0 (the correlation id).
MIN_FRAME = 4
_UNSUPPORTED_VERSION = UnsupportedVersionError.code


def encode_request(api_key: int, version: int, correlation_id: int, client_id: Optional[str],
                   body: RequestBody) -> bytearray:
    """One request frame, size prefix included; ValueError when ``body`` does not encode."""
    w = Writer()
    w.int32(0)  # the size, patched below
    REQUEST_HEADER.encode_into(w, {"request_api_key": api_key, "request_api_version": version,
                                   "correlation_id": correlation_id, "client_id": client_id},
                               header_versions(api_key, version)[0])
    REQUESTS[api_key].encode_into(w, body, version)
    w.buf[0:4] = SIZE.pack(len(w.buf) - 4)
    return w.buf


def decode_response_header(frame: Frame, api_key: int, version: int) -> Tuple[int, Reader]:
    """The correlation id of response frame ``frame`` (without its size), and a reader at its body;
    ProtocolError when the header does not decode."""
    r = Reader(frame)
    header = RESPONSE_HEADER.decode_from(r, header_versions(api_key, version)[1])
    correlation_id: int = header["correlation_id"]
    return correlation_id, r


@overload
def decode_response_body(frame: Frame, r: Reader, api_key: int, version: int, trailing_ok: bool = ...,
                         *, typed: Literal[False] = ...) -> ResponseDict: ...


@overload
def decode_response_body(frame: Frame, r: Reader, api_key: int, version: int, trailing_ok: bool = ...,
                         *, typed: Literal[True]) -> Message: ...


def decode_response_body(frame: Frame, r: Reader, api_key: int, version: int, trailing_ok: bool = False,
                         *, typed: bool = False) -> Union[ResponseDict, Message]:
    """The body of response frame ``frame`` from reader ``r`` (after the header): a dict, or with
    ``typed`` its message class.

    ProtocolError or ValueError when it does not decode, or (unless ``trailing_ok``) has bytes
    after the body. An ApiVersions answer with UNSUPPORTED_VERSION is read in the v0 layout,
    whatever version was asked (KIP-511).
    """
    if api_key == ApiKey.API_VERSIONS and r.remaining >= 2 and \
            struct.unpack_from(">h", frame, r.pos)[0] == _UNSUPPORTED_VERSION:
        schema = RESPONSES[ApiKey.API_VERSIONS]
        rest = memoryview(frame)[r.pos:]
        if typed:
            message: Message = schema.parse(rest, 0)
            return message
        return schema.decode(rest, 0)
    out: Union[ResponseDict, Message] = RESPONSES[api_key].read(r, version) if typed \
        else RESPONSES[api_key].decode_from(r, version)
    if r.remaining and not trailing_ok:
        raise ProtocolError("%d trailing bytes" % r.remaining)
    return out


@overload
def decode_response(frame: Frame, api_key: int, version: int, correlation_id: int, trailing_ok: bool = ...,
                    *, typed: Literal[False] = ...) -> ResponseDict: ...


@overload
def decode_response(frame: Frame, api_key: int, version: int, correlation_id: int, trailing_ok: bool = ...,
                    *, typed: Literal[True]) -> Message: ...


def decode_response(frame: Frame, api_key: int, version: int, correlation_id: int, trailing_ok: bool = False,
                    *, typed: bool = False) -> Union[ResponseDict, Message]:
    """The body of response frame ``frame`` to request ``correlation_id`` (a dict, or with ``typed``
    its message class); ProtocolError when it answers another request, and as
    :func:`decode_response_body` says."""
    got, r = decode_response_header(frame, api_key, version)
    if got != correlation_id:
        raise ProtocolError("response correlation id %d does not match request %d" % (got, correlation_id))
    if typed:
        return decode_response_body(frame, r, api_key, version, trailing_ok, typed=True)
    return decode_response_body(frame, r, api_key, version, trailing_ok)


class _Tls:
    """A client's TLS over a connected socket, through memory BIOs.

    ``send`` may be called from one thread while another reads (``read_exactly``): the
    SSLObject and the BIOs are used under ``_lock`` only, which no wait for the network
    holds. Records leave in the order OpenSSL wrote them into ``_outgoing``: bytes are
    taken out of it only by the holder of ``_send_lock``, which sends them before letting
    go. That matters when a read makes OpenSSL answer a post-handshake message (a TLS 1.3
    KeyUpdate): the records encrypted after the answer are under the new key, and must not
    reach the broker before it.

    Lock order: ``_send_lock``, then ``_lock``. The reading thread never waits for
    ``_send_lock``: were a send blocked on a full socket, it could wait on a broker that waits
    for this thread to read. It takes the lock if it is free; otherwise the holder sends
    the answer after its own records: whoever lets go of ``_send_lock`` looks again for
    bytes left in ``_outgoing`` (:meth:`_send_pending`).
    """

    RECV = 64 * 1024

    def __init__(self, sock: socket.socket, context: ssl.SSLContext, server_hostname: Optional[str]) -> None:
        self._sock = sock
        self._incoming = ssl.MemoryBIO()
        self._outgoing = ssl.MemoryBIO()
        self._ssl = context.wrap_bio(self._incoming, self._outgoing, server_side=False,
                                     server_hostname=server_hostname)
        self._lock = threading.Lock()
        self._send_lock = threading.Lock()

    def handshake(self) -> None:
        while True:
            try:
                self._ssl.do_handshake()
            except ssl.SSLWantReadError:
                self._sock.sendall(self._outgoing.read())
                data = self._sock.recv(self.RECV)
                if not data:
                    raise ConnectionResetError("the broker closed the connection during the TLS handshake") from None
                self._incoming.write(data)
                continue
            except ssl.SSLError:
                pending = self._outgoing.read()
                if pending:  # the alert that tells the broker why
                    try:
                        self._sock.sendall(pending)
                    except OSError:
                        pass
                raise
            self._sock.sendall(self._outgoing.read())
            return

    def send(self, data: Frame) -> None:
        with self._send_lock:
            with self._lock:
                self._ssl.write(data)
                out = self._outgoing.read()
            self._sock.sendall(out)
        self._send_pending()

    def _send_pending(self) -> None:
        """Send what OpenSSL wrote and nobody sent yet, unless another thread holds
        ``_send_lock``: that one looks again once it lets go."""
        while True:
            if not self._send_lock.acquire(blocking=False):
                return
            try:
                with self._lock:
                    out = self._outgoing.read() if self._outgoing.pending else b""
                if out:
                    self._sock.sendall(out)
            finally:
                self._send_lock.release()
            with self._lock:  # written while this thread held the lock by one that could not take it
                if not self._outgoing.pending:
                    return

    def _decrypt_into(self, buffer: memoryview) -> Optional[int]:
        """Decrypt into ``buffer`` what OpenSSL has (it keeps what does not fit) -> how many
        bytes (0 at the end of the stream), or None when it wants more from the socket."""
        with self._lock:
            try:
                # With a buffer, read() returns how many bytes it wrote there (typeshed says bytes).
                got: Optional[int] = cast(int, self._ssl.read(len(buffer), buffer))
            except ssl.SSLWantReadError:
                got = None
            except (ssl.SSLZeroReturnError, ssl.SSLEOFError):
                got = 0
            answered = self._outgoing.pending > 0
        # A post-handshake message's answer (a key update). At the end of the stream what OpenSSL
        # wrote is its alert about it, for a peer that is gone.
        if answered and got != 0:
            self._send_pending()
        return got

    def read_exactly(self, n: int) -> Optional[bytearray]:
        """The next ``n`` plain bytes, decrypted straight into the buffer returned; None when
        the stream ends first."""
        out = bytearray(n)
        view = memoryview(out)
        got = 0
        while got < n:
            k = self._decrypt_into(view[got:])
            if k is None:
                raw = self._sock.recv(self.RECV)
                with self._lock:
                    if raw:
                        self._incoming.write(raw)
                    else:
                        self._incoming.write_eof()
                continue
            if not k:
                return None
            got += k
        return out


class KafkaSocket:
    """A connected TCP socket to a Kafka listener, read and written in whole frames, over TLS
    when given an SSL context.

    One thread reads while any number send (sends are not interleaved by this class: the
    caller serializes them); :meth:`shutdown` may be called from any thread to make a
    blocked read or write fail at once.
    """

    def __init__(self, host: str, port: int, connect_timeout_s: float,
                 ssl_context: Optional[ssl.SSLContext] = None) -> None:
        """Connect, and with ``ssl_context`` handshake (OSError when either fails; an
        SslAuthenticationError when the handshake fails); the socket then blocks with
        ``connect_timeout_s`` until :meth:`settimeout` says otherwise. The broker's
        certificate is checked against ``host`` when the context checks host names."""
        sock = socket.create_connection((host, port), timeout=connect_timeout_s)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._sock = sock
        self._tls: Optional[_Tls] = None
        if ssl_context is not None:
            try:
                self._tls = _Tls(sock, ssl_context, host if ssl_context.check_hostname else None)
                self._tls.handshake()
            except ssl.SSLError as exc:
                sock.close()
                raise SslAuthenticationError("SSL handshake with %s:%d failed: %s" % (host, port, ssl_reason(exc))) \
                    from None
            except ConnectionError as exc:  # a listener that is not TLS reads a ClientHello as garbage
                sock.close()
                raise SslAuthenticationError("SSL handshake with %s:%d failed: %s (is it an SSL listener?)"
                                             % (host, port, exc)) from None
            except BaseException:
                sock.close()
                raise

    def settimeout(self, timeout_s: Optional[float]) -> None:
        """How long a read or write may block (None: forever)."""
        self._sock.settimeout(timeout_s)

    def send(self, frame: Frame) -> None:
        if self._tls is not None:
            self._tls.send(frame)
        else:
            self._sock.sendall(frame)

    def read_exactly(self, n: int) -> Optional[bytearray]:
        """The next ``n`` bytes; None when the broker closes the connection first."""
        if self._tls is not None:
            return self._tls.read_exactly(n)
        buf = bytearray(n)
        view = memoryview(buf)
        got = 0
        while got < n:
            k = self._sock.recv_into(view[got:], n - got)
            if k == 0:
                return None
            got += k
        return buf

    def read_frame(self, max_size: int) -> bytearray:
        """The next response frame without its size prefix.

        ConnectionError when the broker closes the connection, ProtocolError for a size
        smaller than a response header or larger than ``max_size`` (before reading any of it).
        """
        head = self.read_exactly(SIZE.size)
        if head is not None:
            (size,) = SIZE.unpack(head)
            if not MIN_FRAME <= size <= max_size:
                raise ProtocolError("response size %d" % size)
            frame = self.read_exactly(size)
            if frame is not None:
                return frame
        raise ConnectionError("connection closed by the broker")

    def shutdown(self) -> None:
        """Shut both directions down (blocked calls in other threads fail); never raises."""
        try:
            self._sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass  # not connected, or closed meanwhile

    def close(self) -> None:
        """Close the socket; never raises."""
        try:
            self._sock.close()
        except OSError:
            pass


def ssl_reason(exc: ssl.SSLError) -> str:
    """An SSL error as one line, as OpenSSL says it (``[SSL: CERTIFICATE_VERIFY_FAILED]
    certificate verify failed: unable to get local issuer certificate``)."""
    return _SSL_SOURCE.sub("", str(exc))


class BlockingClient:
    """One request at a time to one broker: send, then read the answer, on a socket opened at
    the first request and reopened after :meth:`close`.

    Not thread-safe (the caller serializes requests), except :meth:`abort`.
    A failed :meth:`exchange` leaves the socket as it is: the caller closes it.
    """

    def __init__(self, host: str, port: int, client_id: Optional[str], connect_timeout_s: float,
                 ssl_context: Optional[ssl.SSLContext] = None) -> None:
        self.host = host
        self.port = port
        self.client_id = client_id
        self.connect_timeout_s = connect_timeout_s
        self.ssl_context = ssl_context
        self._sock: Optional[KafkaSocket] = None
        self._correlation = 0

    @property
    def connected(self) -> bool:
        return self._sock is not None

    def connect(self) -> None:
        """Open the socket (and handshake, over TLS) unless it is open; OSError when that fails."""
        if self._sock is None:
            self._sock = KafkaSocket(self.host, self.port, self.connect_timeout_s, self.ssl_context)

    def encode(self, api_key: int, version: int, body: RequestBody) -> Tuple[bytearray, int]:
        """The next request's frame and correlation id; ValueError when ``body`` does not encode."""
        self._correlation = (self._correlation + 1) & 0x7FFFFFFF
        return encode_request(api_key, version, self._correlation, self.client_id, body), self._correlation

    @overload
    def exchange(self, api_key: int, version: int, frame: Frame, correlation_id: int, timeout_s: float,
                 max_response: int, *, typed: Literal[False] = ...) -> ResponseDict: ...

    @overload
    def exchange(self, api_key: int, version: int, frame: Frame, correlation_id: int, timeout_s: float,
                 max_response: int, *, typed: Literal[True]) -> Message: ...

    def exchange(self, api_key: int, version: int, frame: Frame, correlation_id: int, timeout_s: float,
                 max_response: int, *, typed: bool = False) -> Union[ResponseDict, Message]:
        """Send an encoded request (connecting first) and read its response's body (a dict, or
        with ``typed`` its message class), each socket operation waiting ``timeout_s`` at most;
        OSError, ProtocolError or ValueError on failure."""
        self.connect()
        sock = self._sock
        assert sock is not None
        sock.settimeout(timeout_s)
        sock.send(frame)
        response = sock.read_frame(max_response)
        if typed:
            return decode_response(response, api_key, version, correlation_id, trailing_ok=True, typed=True)
        return decode_response(response, api_key, version, correlation_id, trailing_ok=True)

    @overload
    def call(self, api_key: int, version: int, body: RequestBody, timeout_s: float, max_response: int,
             *, typed: Literal[False] = ...) -> ResponseDict: ...

    @overload
    def call(self, api_key: int, version: int, body: RequestBody, timeout_s: float, max_response: int,
             *, typed: Literal[True]) -> Message: ...

    def call(self, api_key: int, version: int, body: RequestBody, timeout_s: float, max_response: int,
             *, typed: bool = False) -> Union[ResponseDict, Message]:
        """Encode, send and read the answer: :meth:`encode` then :meth:`exchange`."""
        frame, correlation_id = self.encode(api_key, version, body)
        if typed:
            return self.exchange(api_key, version, frame, correlation_id, timeout_s, max_response, typed=True)
        return self.exchange(api_key, version, frame, correlation_id, timeout_s, max_response)

    def abort(self) -> None:
        """Make the call in flight fail at once (from another thread), without waiting for it."""
        sock = self._sock
        if sock is not None:
            sock.shutdown()

    def close(self) -> None:
        sock, self._sock = self._sock, None
        if sock is not None:
            sock.close()
