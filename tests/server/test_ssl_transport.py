"""pylogq/server/ssl_transport.py's SslTransportLayer against a client SSLObject, in memory: the
broker's side of a TLS connection handshaken through memory BIOs, its socket a recorder."""

from __future__ import annotations

import asyncio
import os
import ssl
from typing import Any, List, Tuple

import pytest

from pylogq.server.ssl_transport import GATHER_BELOW, GATHER_MAX, SslTransportLayer

from .._certs import BROKER_KEY_PASSWORD, Certificates


class Socket:
    """The writing end under the TLS layer: the records it was handed, in order."""

    def __init__(self) -> None:
        self.written: List[bytes] = []

    def write(self, data: bytes) -> None:
        self.written.append(bytes(data))

    async def drain(self) -> None:
        pass

    def is_closing(self) -> bool:
        return False

    def close(self) -> None:
        pass


class Reader:
    """The reading end under the TLS layer: what the client sent (a read waits for it, on the
    loop the test pumps)."""

    def __init__(self) -> None:
        self.data: List[bytes] = []

    async def read(self, n: int = -1) -> bytes:
        while not self.data:
            await asyncio.sleep(0)
        return self.data.pop(0)


def handshaken(certs: Certificates) -> Tuple[SslTransportLayer, Socket, Reader, ssl.SSLObject, ssl.MemoryBIO]:
    """The broker's layer and the client's SSLObject (and its incoming BIO), handshake done."""
    server_context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_context.load_cert_chain(certs.path("broker.pem"), certs.path("broker-key.pem"), BROKER_KEY_PASSWORD)
    sock, reader = Socket(), Reader()
    tls = SslTransportLayer(reader, sock, server_context)  # type: ignore[arg-type]
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    client = ssl.create_default_context(cafile=certs.path("ca.pem")).wrap_bio(incoming, outgoing,
                                                                             server_hostname="localhost")
    with pytest.raises(ssl.SSLWantReadError):
        client.do_handshake()
    reader.data.append(outgoing.read())

    async def serve() -> None:
        await tls.handshake()

    async def both() -> None:
        task = asyncio.ensure_future(serve())
        while not task.done():
            await asyncio.sleep(0)
            for record in sock.written:
                incoming.write(record)
            sock.written.clear()
            try:
                client.do_handshake()
            except ssl.SSLWantReadError:
                pass
            if outgoing.pending:
                reader.data.append(outgoing.read())
        await task

    asyncio.run(both())
    for record in sock.written:
        incoming.write(record)
    sock.written.clear()
    client.do_handshake()
    return tls, sock, reader, client, incoming


def _plain(client: ssl.SSLObject, incoming: ssl.MemoryBIO, records: List[bytes]) -> bytes:
    for record in records:
        incoming.write(record)
    out = []
    while True:
        try:
            out.append(client.read(1 << 20))
        except ssl.SSLWantReadError:
            return b"".join(out)


def test_small_writes_are_gathered_into_full_records_and_bounded(certs: Certificates) -> None:
    """Writes below a record's size wait for the next drain, gathered, but never more than
    GATHER_MAX of them: a response of many small pieces is not held whole as plain text."""
    tls, sock, _, client, incoming = handshaken(certs)
    pieces = [os.urandom(5000) for _ in range(200)]
    held = flushed = 0
    for piece in pieces:
        assert len(piece) < GATHER_BELOW
        tls.write(piece)
        held += len(piece)
        if held < GATHER_MAX:
            assert len(sock.written) == flushed, "a small write was encrypted before the drain"
        else:
            assert len(sock.written) > flushed, "%d bytes held" % held
            held, flushed = 0, len(sock.written)
    asyncio.run(tls.drain())
    assert _plain(client, incoming, sock.written) == b"".join(pieces)
    assert len(sock.written) <= len(pieces) * 5000 // GATHER_MAX + 1


def test_a_record_that_does_not_decrypt_is_a_reset(certs: Certificates) -> None:
    tls, _, reader, client, _ = handshaken(certs)
    reader.data.append(b"\x17\x03\x03\x00\x20" + os.urandom(32))

    async def read() -> Any:
        return await tls.readexactly(4)

    with pytest.raises(ConnectionResetError, match=r"^TLS error: \[SSL: DECRYPTION_FAILED_OR_BAD_RECORD_MAC\]"):
        asyncio.run(read())
