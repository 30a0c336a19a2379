"""The TLS layer of pylogq's blocking socket (pylogq/protocol/blocking_client.py's ``_Tls``) against a
real TLS 1.3 server: what a read makes OpenSSL answer leaves before what is sent after it, and the
reading thread never waits for a send.

A post-handshake message that wants an answer is what the layer must order. Python's ``ssl`` cannot
make a server send a KeyUpdate, so the server here asks for the client's certificate after the
handshake (TLS 1.3 post-handshake authentication): the client's answer (its Certificate,
CertificateVerify and Finished) is written by OpenSSL while the client reads, exactly as a
KeyUpdate's answer is.
"""

from __future__ import annotations

import os
import socket
import ssl
import threading
from typing import Any, Dict, Iterator, List, NamedTuple

import pytest

from pylogq.protocol.blocking_client import _Tls

from .._certs import BROKER_KEY_PASSWORD, Certificates

#: The protocol layer has no pure-Python twin (records are opaque bytes to it): the compiled pass
#: only (tests/conftest.py).
pytestmark = pytest.mark.compiled_pass

TIMEOUT_S = 10.0


class Peers(NamedTuple):
    client: _Tls
    server: ssl.SSLSocket
    client_sock: socket.socket


@pytest.fixture
def peers(certs: Certificates) -> Iterator[Peers]:
    """A client ``_Tls`` and a server ``SSLSocket`` over a socket pair, handshaken, post-handshake
    authentication allowed on both sides and not asked for yet."""
    server_context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_context.load_cert_chain(certs.path("broker.pem"), certs.path("broker-key.pem"), BROKER_KEY_PASSWORD)
    server_context.load_verify_locations(certs.path("ca.pem"))
    server_context.verify_mode = ssl.CERT_REQUIRED
    server_context.post_handshake_auth = True  # with CERT_REQUIRED: asked for after the handshake, not in it
    client_context = ssl.create_default_context(cafile=certs.path("ca.pem"))
    client_context.load_cert_chain(certs.path("client.pem"), certs.path("client-key.pem"))
    client_context.post_handshake_auth = True
    client_sock, server_sock = socket.socketpair()
    client_sock.settimeout(TIMEOUT_S)
    server_sock.settimeout(TIMEOUT_S)
    accepted: List[ssl.SSLSocket] = []
    accepting = threading.Thread(target=lambda: accepted.append(
        server_context.wrap_socket(server_sock, server_side=True)))
    accepting.start()
    client = _Tls(client_sock, client_context, "localhost")
    client.handshake()
    accepting.join(TIMEOUT_S)
    assert accepted, "the server's handshake did not finish"
    server = accepted[0]
    assert server.version() == "TLSv1.3" and not server.getpeercert()
    try:
        yield Peers(client, server, client_sock)
    finally:
        server.close()
        client_sock.close()


def _read_in_thread(tls: _Tls, n: int) -> "tuple[threading.Thread, List[Any]]":
    got: List[Any] = []
    thread = threading.Thread(target=lambda: got.append(tls.read_exactly(n)), daemon=True)
    thread.start()
    return thread, got


def test_an_answer_the_reader_cannot_send_leaves_before_the_next_send(peers: Peers) -> None:
    """While another thread sends (it holds the send lock), a read that makes OpenSSL answer
    returns without waiting for it, leaving the answer for that sender, which sends it ahead of
    its own records: the server verifies the certificate, then reads the request."""
    peers.server.verify_client_post_handshake()
    peers.server.sendall(b"response")
    assert peers.client._send_lock.acquire(timeout=TIMEOUT_S)  # a send in progress
    try:
        reading, got = _read_in_thread(peers.client, 8)
        reading.join(TIMEOUT_S)
        assert not reading.is_alive(), "the reading thread waited for the sender"
        assert got == [b"response"]
        with peers.client._lock:
            assert peers.client._outgoing.pending, "OpenSSL wrote no answer to the certificate request"
    finally:
        peers.client._send_lock.release()
    peers.client.send(b"request")
    received = b""
    while len(received) < len(b"request"):
        received += peers.server.recv(64)
    assert received == b"request"
    subject: Dict[str, str] = {k: v for rdn in peers.server.getpeercert()["subject"] for k, v in rdn}
    assert subject["commonName"] == "alice"


def test_a_reader_with_nobody_sending_sends_the_answer_itself(peers: Peers) -> None:
    peers.server.verify_client_post_handshake()
    peers.server.sendall(b"response")
    reading, got = _read_in_thread(peers.client, 8)
    reading.join(TIMEOUT_S)
    assert got == [b"response"]
    with peers.client._lock:
        assert not peers.client._outgoing.pending
    # The answer is on the wire without a send: the server's next read verifies it.
    peers.server.setblocking(False)
    with pytest.raises(ssl.SSLWantReadError):
        peers.server.recv(64)
    assert peers.server.getpeercert()["subject"]


def test_reads_span_records_and_leave_the_rest_for_the_next_read(peers: Peers) -> None:
    """Each read decrypts straight into the buffer it returns, however the sizes asked fall on
    the records (16 KiB each); the end of the stream mid-read is None."""
    data = os.urandom(100_000)
    peers.server.sendall(data)
    sizes = [4, 70_000, 1, len(data) - 70_005]
    parts = [peers.client.read_exactly(size) for size in sizes]
    assert [len(part or b"") for part in parts] == sizes
    assert b"".join(bytes(part or b"") for part in parts) == data
    peers.server.sendall(b"abc")
    peers.server.close()
    assert peers.client.read_exactly(4) is None
