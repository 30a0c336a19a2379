"""SASL sessions on the broker: the failed-authentication delay and re-authentication (KIP-368).

A failed authentication is answered after ``connection.failed.authentication.delay.ms`` and
the connection then closed, while other connections are served meanwhile. With
``connections.max.reauth.ms`` a SaslAuthenticate v1+ answer carries the session's lifetime;
the client re-authenticates on the same connection (librdkafka does, through
confluent-kafka), a re-authentication must keep its principal, and a connection past its
session that sends anything but a SaslHandshake is closed without an answer, as Kafka
closes it. Guesses per second against the delay are measured in benchmarks/test_quotas.py.
"""

from __future__ import annotations

import socket
import time
from pathlib import Path
from typing import Any, Dict, Iterator, List, Tuple

import pytest

from pylogq import Broker
from pylogq.protocol.constants import ApiKey

from .test_quotas import RawConnection

Address = Tuple[str, int]
DEADLINE_S = 30.0
SASL_AUTHENTICATION_FAILED = 58
USERS = {"alice": "alice-secret", "bob": "bob-secret"}


def _broker(tmp_path: Path, **settings: Any) -> Tuple[Broker, Address]:
    broker = Broker(str(tmp_path / "broker"), **{"group.initial.rebalance.delay.ms": 0,
                                                 "offsets.topic.num.partitions": 1, **settings})
    return broker, broker.serve("127.0.0.1", 0, sasl_users=USERS)


@pytest.fixture
def delayed(tmp_path: Path) -> Iterator[Tuple[Broker, Address]]:
    broker, address = _broker(tmp_path, **{"connection.failed.authentication.delay.ms": 1000})
    try:
        yield broker, address
    finally:
        broker.close()


def _plain(user: str, password: str) -> bytes:
    return b"\x00" + user.encode() + b"\x00" + password.encode()


def _authenticate(conn: RawConnection, user: str, password: str, version: int = 1) -> Dict[str, Any]:
    assert conn.call(ApiKey.SASL_HANDSHAKE, 1, {"mechanism": "PLAIN"})["error_code"] == 0
    return conn.call(ApiKey.SASL_AUTHENTICATE, version, {"auth_bytes": _plain(user, password)})


def _closed(conn: RawConnection) -> bool:
    try:
        return conn.sock.recv(1) == b""
    except ConnectionError:
        return True


def test_a_failed_authentication_is_answered_after_the_delay_while_others_are_served(
        delayed: Tuple[Broker, Address]) -> None:
    _, address = delayed
    guesser, other = RawConnection(address, "guesser"), RawConnection(address, "other")
    try:
        assert guesser.call(ApiKey.SASL_HANDSHAKE, 1, {"mechanism": "PLAIN"})["error_code"] == 0
        sent = time.monotonic()
        guesser.sock.sendall(guesser.frame(ApiKey.SASL_AUTHENTICATE, 1, {"auth_bytes": _plain("alice", "guess")}))
        # Another connection authenticates and is answered while the guess waits.
        assert _authenticate(other, "bob", "bob-secret")["error_code"] == 0
        assert other.call(ApiKey.API_VERSIONS, 0, {})["error_code"] == 0
        answered_other = time.monotonic()
        failed = guesser.read(ApiKey.SASL_AUTHENTICATE, 1)
        answered_guess = time.monotonic()
        assert failed["error_code"] == SASL_AUTHENTICATION_FAILED
        assert failed["error_message"] == "Authentication failed: Invalid username or password"
        assert answered_other < answered_guess and answered_guess - sent >= 1.0
        assert _closed(guesser)
    finally:
        guesser.close()
        other.close()


@pytest.fixture
def sessions(tmp_path: Path) -> Iterator[Tuple[Broker, Address]]:
    broker, address = _broker(tmp_path, **{"connections.max.reauth.ms": 1500})
    try:
        yield broker, address
    finally:
        broker.close()


def test_the_session_lifetime_is_told_and_an_expired_session_is_closed(sessions: Tuple[Broker, Address]) -> None:
    broker, address = sessions
    conn = RawConnection(address, "expiring")
    try:
        authenticated = time.monotonic()
        assert _authenticate(conn, "alice", "alice-secret")["session_lifetime_ms"] == 1500
        # SaslAuthenticate v0 has no lifetime to tell; v1+ does. Requests go on until the end ...
        deadline = authenticated + DEADLINE_S
        while True:
            assert time.monotonic() < deadline, "the expired session was never closed"
            sent = time.monotonic()
            conn.sock.sendall(conn.frame(ApiKey.API_VERSIONS, 0, {}))
            first = conn.sock.recv(1)
            if not first:
                break
            conn.read_rest(first)
        # ... and the first one after it closes the connection, unanswered.
        assert sent - authenticated >= 1.5
    finally:
        conn.close()
    samples = broker.metrics_registry.samples()
    assert samples["kafka_server_socket_server_metrics_expired_connections_killed_count_total"] == 1


def test_reauthentication_renews_the_session_and_keeps_its_principal(sessions: Tuple[Broker, Address]) -> None:
    broker, address = sessions
    conn = RawConnection(address, "renewing")
    try:
        assert _authenticate(conn, "alice", "alice-secret")["session_lifetime_ms"] == 1500
        again = _authenticate(conn, "alice", "alice-secret", version=2)
        assert (again["error_code"], again["session_lifetime_ms"]) == (0, 1500)
        assert conn.call(ApiKey.API_VERSIONS, 0, {})["error_code"] == 0
        changed = _authenticate(conn, "bob", "bob-secret")
        assert changed["error_code"] == SASL_AUTHENTICATION_FAILED
        assert changed["error_message"] == "Cannot change principals during re-authentication from User:alice: User:bob"
        assert _closed(conn)
    finally:
        conn.close()
    samples = broker.metrics_registry.samples()
    assert samples["kafka_server_socket_server_metrics_successful_reauthentication_total"] == 1


def test_librdkafka_reauthenticates_on_its_connection(sessions: Tuple[Broker, Address]) -> None:
    ck = pytest.importorskip("confluent_kafka")
    broker, (host, port) = sessions
    broker.create_topic("reauth", 1)
    producer = ck.Producer({"bootstrap.servers": "%s:%d" % (host, port), "security.protocol": "SASL_PLAINTEXT",
                            "sasl.mechanism": "PLAIN", "sasl.username": "alice", "sasl.password": "alice-secret",
                            "linger.ms": 0})
    delivered: List[Any] = []
    try:
        deadline = time.monotonic() + DEADLINE_S
        # Produce until the broker has seen librdkafka re-authenticate on its connection twice
        # (it does so before 1.5 s sessions end); every record is delivered meanwhile.
        while broker.metrics_registry.samples().get(
                "kafka_server_socket_server_metrics_successful_reauthentication_total", 0) < 2:
            assert time.monotonic() < deadline, "librdkafka never re-authenticated"
            producer.produce("reauth", b"v", on_delivery=lambda err, msg: delivered.append(err))
            producer.poll(0.1)
        assert producer.flush(DEADLINE_S) == 0
    finally:
        producer.flush(1)
    assert delivered and all(err is None for err in delivered)
    samples = broker.metrics_registry.samples()
    assert samples["kafka_server_socket_server_metrics_expired_connections_killed_count_total"] == 0


def test_a_bare_socket_is_refused_after_the_delay(delayed: Tuple[Broker, Address]) -> None:
    _, address = delayed
    with socket.create_connection(address, timeout=10.0) as sock:
        conn = RawConnection.__new__(RawConnection)
        conn.sock, conn.client_id, conn.correlation_id = sock, "v0", 0
        assert conn.call(ApiKey.SASL_HANDSHAKE, 0, {"mechanism": "PLAIN"})["error_code"] == 0
        token = _plain("alice", "wrong")
        sent = time.monotonic()
        sock.sendall(len(token).to_bytes(4, "big") + token)  # SaslHandshake v0: a bare token follows
        assert sock.recv(1) == b""  # no answer to a bare token that fails: the connection closes
        assert time.monotonic() - sent >= 1.0
