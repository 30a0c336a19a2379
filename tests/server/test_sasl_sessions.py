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

import time
from pathlib import Path
from typing import Any, Dict, Iterator, List, Tuple

import pytest

from pylogq import Broker
from pylogq.protocol.constants import ApiKey

from .test_server import Wire

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


def _authenticate(conn: Wire, user: str, password: str, version: int = 1) -> Dict[str, Any]:
    assert conn.request(ApiKey.SASL_HANDSHAKE, 1, {"mechanism": "PLAIN"})["error_code"] == 0
    return conn.request(ApiKey.SASL_AUTHENTICATE, version, {"auth_bytes": _plain(user, password)})


def test_a_failed_authentication_is_answered_after_the_delay_while_others_are_served(
        delayed: Tuple[Broker, Address]) -> None:
    _, address = delayed
    guesser, other = Wire(address, client_id="guesser"), Wire(address, client_id="other")
    try:
        assert guesser.request(ApiKey.SASL_HANDSHAKE, 1, {"mechanism": "PLAIN"})["error_code"] == 0
        sent = time.monotonic()
        guesser.send(ApiKey.SASL_AUTHENTICATE, 1, {"auth_bytes": _plain("alice", "guess")})
        # Another connection authenticates and is answered while the guess waits.
        assert _authenticate(other, "bob", "bob-secret")["error_code"] == 0
        assert other.request(ApiKey.API_VERSIONS, 0, {})["error_code"] == 0
        answered_other = time.monotonic()
        _, failed = guesser.receive(ApiKey.SASL_AUTHENTICATE, 1)
        answered_guess = time.monotonic()
        assert failed["error_code"] == SASL_AUTHENTICATION_FAILED
        assert failed["error_message"] == "Authentication failed: Invalid username or password"
        assert answered_other < answered_guess and answered_guess - sent >= 1.0
        assert guesser.closed_by_server()
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
    conn = Wire(address, client_id="expiring")
    try:
        authenticated = time.monotonic()
        assert _authenticate(conn, "alice", "alice-secret")["session_lifetime_ms"] == 1500
        # SaslAuthenticate v0 has no lifetime to tell; v1+ does. Requests go on until the end ...
        deadline = authenticated + DEADLINE_S
        while True:
            assert time.monotonic() < deadline, "the expired session was never closed"
            sent = time.monotonic()
            conn.send(ApiKey.API_VERSIONS, 0, {})
            if conn.read_frame() is None:
                break
        # ... and the first one after it closes the connection, unanswered.
        assert sent - authenticated >= 1.5
    finally:
        conn.close()
    samples = broker.metrics_registry.samples()
    assert samples["kafka_server_socket_server_metrics_expired_connections_killed_count_total"] == 1


def test_reauthentication_renews_the_session_and_keeps_its_principal(sessions: Tuple[Broker, Address]) -> None:
    broker, address = sessions
    conn = Wire(address, client_id="renewing")
    try:
        assert _authenticate(conn, "alice", "alice-secret")["session_lifetime_ms"] == 1500
        again = _authenticate(conn, "alice", "alice-secret", version=2)
        assert (again["error_code"], again["session_lifetime_ms"]) == (0, 1500)
        assert conn.request(ApiKey.API_VERSIONS, 0, {})["error_code"] == 0
        changed = _authenticate(conn, "bob", "bob-secret")
        assert changed["error_code"] == SASL_AUTHENTICATION_FAILED
        assert changed["error_message"] == "Cannot change principals during re-authentication from User:alice: User:bob"
        assert conn.closed_by_server()
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
    with Wire(address, client_id="v0") as conn:
        assert conn.request(ApiKey.SASL_HANDSHAKE, 0, {"mechanism": "PLAIN"})["error_code"] == 0
        token = _plain("alice", "wrong")
        sent = time.monotonic()
        conn.sock.sendall(len(token).to_bytes(4, "big") + token)  # SaslHandshake v0: a bare token follows
        assert conn.sock.recv(1) == b""  # no answer to a bare token that fails: the connection closes
        assert time.monotonic() - sent >= 1.0
