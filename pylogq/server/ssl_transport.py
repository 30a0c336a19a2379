"""TLS for one server connection, over its TCP stream (Kafka's SslTransportLayer).

The handshake and the records go through :class:`ssl.SSLObject` and two memory BIOs: the
bytes read from the socket go into OpenSSL, what it gives back is written to the socket.
Doing this here rather than with asyncio's own TLS transport keeps what a connection
holds in our hands:

- nothing of TLS exists until the client's first byte arrives: a connection that never
  sends a ClientHello holds its socket and its stream, no OpenSSL state and no buffer
  (asyncio's transport allocates a 256 KiB buffer per connection at accept);
- the handshake's failures (bad bytes, an untrusted certificate, a protocol or cipher
  the two sides do not share) reach the server as :class:`ssl.SSLError`, which it logs in
  one line and answers by closing, after OpenSSL's alert has been sent so the client
  learns why;
- writes are plain bytes, as a StreamWriter's: TLS leaves nothing for ``sendfile`` to
  send (the bytes must pass through OpenSSL), so the connection copies a fetch's file
  regions to it in bounded chunks, as it does wherever it cannot send a file
  (:meth:`~pylogq.server.connection.Connection._send_region`).

Reads hand back what OpenSSL has decrypted, up to the size asked (it decrypts a record
at a time and keeps the rest); a record that does not decrypt is a ConnectionResetError
naming OpenSSL's reason, as a broken stream is for :class:`asyncio.StreamReader`. Small
writes (a response's header, a partition's framing) are gathered and encrypted together at
the next :meth:`~SslTransportLayer.drain`, large ones at once: a response becomes a few
full TLS records, not one per piece. Runs on the server's event loop (not thread-safe).
"""

from __future__ import annotations

import asyncio
import ssl
from typing import Any, List, Optional, Union

__all__ = ["SslTransportLayer"]

#: The largest read from the socket at a time (a TLS record is at most 16 KiB and change).
READ_SIZE = 64 * 1024
#: Writes below this are gathered until the next drain (a TLS record holds 16 KiB).
GATHER_BELOW = 16 * 1024
#: Gathered writes are encrypted once they come to this much (full records, and never a
#: response of many small pieces held whole as plain text beside its encryption).
GATHER_MAX = 256 * 1024

Buffer = Union[bytes, bytearray, memoryview]


class SslTransportLayer:
    """The reading and writing ends of a TLS server connection over a TCP stream pair.

    :meth:`handshake` first; then :meth:`read` and :meth:`readexactly` (as
    :class:`asyncio.StreamReader`'s), :meth:`write`, :meth:`drain`, :meth:`close` and
    :meth:`get_extra_info` (as :class:`asyncio.StreamWriter`'s).
    """

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, context: ssl.SSLContext) -> None:
        self._reader = reader
        self._writer = writer
        self._context = context
        self._incoming = ssl.MemoryBIO()
        self._outgoing = ssl.MemoryBIO()
        self._ssl: Optional[ssl.SSLObject] = None
        self._gathered = bytearray()  # small writes not encrypted yet
        #: Bytes received before and during the handshake (what a stalled client sent).
        self.handshake_bytes = 0

    # -- the handshake --------------------------------------------------------------------

    async def handshake(self) -> None:
        """Run the server side of the handshake. ssl.SSLError when it fails (the alert is
        sent first), ConnectionError when the client closes first."""
        first = await self._reader.read(READ_SIZE)
        if not first:
            raise ConnectionResetError("closed before the TLS handshake")
        self.handshake_bytes = len(first)
        self._ssl = self._context.wrap_bio(self._incoming, self._outgoing, server_side=True)
        self._incoming.write(first)
        while True:
            try:
                self._ssl.do_handshake()
            except ssl.SSLWantReadError:
                self._flush()
                data = await self._reader.read(READ_SIZE)
                if not data:
                    raise ConnectionResetError("closed during the TLS handshake") from None
                self.handshake_bytes += len(data)
                self._incoming.write(data)
                continue
            except ssl.SSLError:
                self._flush()  # OpenSSL's alert tells the client why
                raise
            self._flush()
            return

    def peer_certificate(self) -> Optional[bytes]:
        """The client's certificate (DER) when it showed one that was verified, else None."""
        return self._ssl.getpeercert(binary_form=True) if self._ssl is not None else None

    @property
    def version(self) -> Optional[str]:
        return self._ssl.version() if self._ssl is not None else None

    @property
    def cipher(self) -> Optional[str]:
        found = self._ssl.cipher() if self._ssl is not None else None
        return found[0] if found else None

    # -- reading --------------------------------------------------------------------------

    async def read(self, n: int = -1) -> bytes:
        """Up to ``n`` bytes of plain text (b"" at the end of the stream); what is decrypted
        already is returned without waiting for more."""
        sslobj = self._ssl
        assert sslobj is not None, "read before the handshake"
        if n < 0:
            n = READ_SIZE
        chunks: List[bytes] = []
        got = 0
        while got < n:
            try:
                # Bounded: OpenSSL hands out a record at a time, and CPython allocates the whole
                # size asked for each call (a request's declared 100 MB, per 16 KiB record).
                chunk = sslobj.read(min(n - got, READ_SIZE))
            except ssl.SSLWantReadError:
                self._flush()  # a post-handshake message (a key update) may want an answer
                if got:
                    break
                data = await self._reader.read(READ_SIZE)
                if not data:
                    self._incoming.write_eof()
                else:
                    self._incoming.write(data)
                continue
            except (ssl.SSLZeroReturnError, ssl.SSLEOFError):
                break  # the client's close_notify, or its end of the stream without one
            except ssl.SSLError as exc:
                # A record that does not decrypt (bad bytes after the handshake): the connection
                # is lost, as a StreamReader reports a reset, so the connection closes as for one.
                from ..protocol.blocking_client import ssl_reason  # here only: a broker serves without it

                raise ConnectionResetError("TLS error: %s" % ssl_reason(exc)) from exc
            if not chunk:
                break
            chunks.append(chunk)
            got += len(chunk)
        return chunks[0] if len(chunks) == 1 else b"".join(chunks)

    async def readexactly(self, n: int) -> bytes:
        """Exactly ``n`` bytes; asyncio.IncompleteReadError when the stream ends first."""
        data = await self.read(n)
        if len(data) == n:
            return data
        chunks = [data]
        got = len(data)
        while got < n:
            chunk = await self.read(n - got)
            if not chunk:
                raise asyncio.IncompleteReadError(b"".join(chunks), n)
            chunks.append(chunk)
            got += len(chunk)
        return b"".join(chunks)

    # -- writing --------------------------------------------------------------------------

    def write(self, data: Buffer) -> None:
        """Encrypt ``data`` and hand the records to the socket's transport (a small write at
        the next :meth:`drain`, with the others gathered before it, or once they come to
        :data:`GATHER_MAX`)."""
        assert self._ssl is not None, "write before the handshake"
        if len(data) < GATHER_BELOW:
            self._gathered += data
            if len(self._gathered) >= GATHER_MAX:
                self._encrypt_gathered()
            return
        self._encrypt_gathered()
        self._ssl.write(data)
        self._flush()

    def _encrypt_gathered(self) -> None:
        if self._gathered:
            assert self._ssl is not None
            self._ssl.write(self._gathered)
            self._gathered = bytearray()
            self._flush()

    async def drain(self) -> None:
        self._encrypt_gathered()
        await self._writer.drain()

    def _flush(self) -> None:
        if self._outgoing.pending:
            self._writer.write(self._outgoing.read())

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return self._writer.get_extra_info(name, default)

    def close(self) -> None:
        """Send close_notify (best effort) and close the socket."""
        sslobj = self._ssl
        if sslobj is not None and not self._writer.is_closing():
            try:
                self._encrypt_gathered()
                sslobj.unwrap()
            except (ssl.SSLError, ValueError):
                pass  # the peer's close_notify is not awaited: the socket closes now
            try:
                self._flush()
            except (ConnectionError, OSError, RuntimeError):
                pass
        self._writer.close()
