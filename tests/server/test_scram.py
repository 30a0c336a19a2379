"""SASL/SCRAM-SHA-256 and -512 (RFC 5802, RFC 7677) and the credential admin APIs on one broker.

The derivation and both ends of the exchange are checked against RFC 7677's example;
the broker with raw requests (every error DescribeUserScramCredentials and
AlterUserScramCredentials answer, every malformed SCRAM message), with
confluent-kafka's admin client, and with kafka-python, aiokafka, confluent-kafka and
pylogq's own clients authenticating over SCRAM, and each refused a wrong password and
an unknown user with Kafka's message; credentials survive a restart.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import socket
import struct
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional, Tuple

import pytest

from pylogq import Broker
from pylogq.client.connection import BrokerConnection
from pylogq.errors import (
    ConfigError,
    KafkaConnectionError,
    SaslAuthenticationFailedError,
    ScramError,
    UnsupportedSaslMechanismError,
)
from pylogq.protocol import REQUEST_HEADER, REQUESTS, RESPONSE_HEADER, RESPONSES, Reader, header_versions
from pylogq.protocol.constants import ApiKey
from pylogq.protocol.scram import (
    ScramClient,
    ScramCredential,
    ScramServer,
    format_credential,
    make_credential,
    parse_credential,
    salted_password,
)
from pylogq.protocol.types import Writer

MECHANISMS = ("SCRAM-SHA-256", "SCRAM-SHA-512")
# Refusals answered after 10 ms rather than Kafka's 100: the delay itself is test_sasl_sessions.py's.
SASL_CONFIG: Dict[str, Any] = {"sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
               "group.initial.rebalance.delay.ms": 0, "offsets.topic.num.partitions": 1,
               "connection.failed.authentication.delay.ms": 10}
ADMIN = ("PLAIN", "admin", "admin-secret")
FAILED = "Authentication failed during authentication due to invalid credentials with SASL mechanism %s"
SASL_AUTHENTICATION_FAILED, UNSUPPORTED_SASL_MECHANISM = 58, 33
RESOURCE_NOT_FOUND, DUPLICATE_RESOURCE, UNACCEPTABLE_CREDENTIAL = 91, 92, 93
DEADLINE_S = 30.0

Address = Tuple[str, int]


# -- RFC 7677's example (SCRAM-SHA-256; RFC 5802's exchange with SHA-256) ------------------------

RFC_NONCE = "rOprNGfwEbeRWgbNEkqO"
RFC_SERVER_NONCE = "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
RFC_SALT = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
RFC_CLIENT_FIRST = b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO"
RFC_SERVER_FIRST = b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
RFC_CLIENT_FINAL = (b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
                    b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=")
RFC_SERVER_FINAL = b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="


def _rfc_credential() -> ScramCredential:
    return make_credential("SCRAM-SHA-256", salted_password("SCRAM-SHA-256", "pencil", RFC_SALT, 4096),
                           RFC_SALT, 4096)


def test_rfc7677_client_side() -> None:
    client = ScramClient("SCRAM-SHA-256", "user", "pencil", nonce=RFC_NONCE)
    assert client.first_message() == RFC_CLIENT_FIRST
    assert client.final_message(RFC_SERVER_FIRST) == RFC_CLIENT_FINAL
    client.verify(RFC_SERVER_FINAL)
    with pytest.raises(ScramError, match="signature does not match"):
        client.verify(b"v=" + base64.b64encode(b"\0" * 32))


def test_rfc7677_server_side() -> None:
    server = ScramServer("SCRAM-SHA-256", {"user": _rfc_credential()}.get, b"secret", nonce=RFC_SERVER_NONCE)
    assert server.step(RFC_CLIENT_FIRST) == (RFC_SERVER_FIRST, False)
    assert server.step(RFC_CLIENT_FINAL) == (RFC_SERVER_FINAL, True)
    assert server.complete and server.user == "user"


def test_derivation_follows_rfc5802() -> None:
    """StoredKey = H(HMAC(SaltedPassword, "Client Key")), ServerKey = HMAC(SaltedPassword, "Server Key"),
    SaltedPassword = PBKDF2 (RFC 5802's Hi); Kafka's string form round-trips."""
    for mechanism, name in (("SCRAM-SHA-256", "sha256"), ("SCRAM-SHA-512", "sha512")):
        salted = salted_password(mechanism, "pencil", RFC_SALT, 4096)
        assert salted == hashlib.pbkdf2_hmac(name, b"pencil", RFC_SALT, 4096)
        credential = make_credential(mechanism, salted, RFC_SALT, 4096)
        client_key = hmac.new(salted, b"Client Key", name).digest()
        assert credential.stored_key == hashlib.new(name, client_key).digest()
        assert credential.server_key == hmac.new(salted, b"Server Key", name).digest()
        text = format_credential(credential)
        assert text == "salt=W22ZaJ0SNY7soEsUEjb6gQ==,stored_key=%s,server_key=%s,iterations=4096" % (
            base64.b64encode(credential.stored_key).decode(), base64.b64encode(credential.server_key).decode())
        assert parse_credential(text) == credential
    with pytest.raises(ScramError, match="has no iterations"):
        parse_credential("salt=AA==,stored_key=AA==,server_key=AA==")
    with pytest.raises(ScramError, match="malformed"):
        parse_credential("salt=!!,stored_key=AA==,server_key=AA==,iterations=1")


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_client_and_server_agree(mechanism: str) -> None:
    salt = os.urandom(16)
    credential = make_credential(mechanism, salted_password(mechanism, "s3cret", salt, 4096), salt, 4096)
    server = ScramServer(mechanism, {"a,b=c": credential}.get, b"k")
    client = ScramClient(mechanism, "a,b=c", "s3cret")  # a name that needs saslname escapes
    first, done = server.step(client.first_message())
    assert not done
    final, done = server.step(client.final_message(first))
    assert done and server.user == "a,b=c"
    client.verify(final)
    wrong = ScramServer(mechanism, {"a,b=c": credential}.get, b"k")
    client = ScramClient(mechanism, "a,b=c", "wrong")
    with pytest.raises(ScramError, match="proof does not match"):
        wrong.step(client.final_message(wrong.step(client.first_message())[0]))


# -- the broker -------------------------------------------------------------------------------------


@pytest.fixture
def sasl_broker(tmp_path: Path) -> Iterator[Tuple[Broker, Address]]:
    broker = Broker(str(tmp_path / "broker"), **SASL_CONFIG)
    try:
        address = broker.serve("127.0.0.1", 0, sasl_users={"admin": "admin-secret"})
        yield broker, address
    finally:
        broker.close()


def _connect(address: Address, sasl: Optional[Tuple[str, str, str]] = ADMIN) -> BrokerConnection:
    return BrokerConnection(address[0], address[1], "scram-test", 10.0, sasl)


def _upsert(user: str, mechanism: int = 1, password: str = "pw", iterations: int = 4096) -> Dict[str, Any]:
    name = {1: "SCRAM-SHA-256", 2: "SCRAM-SHA-512"}.get(mechanism, "SCRAM-SHA-256")
    salt = os.urandom(16)
    return {"name": user, "mechanism": mechanism, "iterations": iterations, "salt": salt,
            "salted_password": salted_password(name, password, salt, max(1, iterations))}


def _alter(conn: BrokerConnection, upsertions: Optional[List[Dict[str, Any]]] = None,
           deletions: Optional[List[Dict[str, Any]]] = None) -> Dict[str, Tuple[int, Optional[str]]]:
    response = conn.request(ApiKey.ALTER_USER_SCRAM_CREDENTIALS,
                            {"deletions": deletions or [], "upsertions": upsertions or []})
    return {r["user"]: (r["error_code"], r["error_message"]) for r in response["results"]}


def _describe(conn: BrokerConnection, users: Optional[List[str]]) -> Dict[str, Any]:
    return conn.request(ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS,
                        {"users": None if users is None else [{"name": u} for u in users]})


def _add_user(address: Address, user: str, password: str, mechanisms: Tuple[str, ...] = MECHANISMS) -> None:
    conn = _connect(address)
    try:
        for mechanism in mechanisms:
            kind = 1 if mechanism == "SCRAM-SHA-256" else 2
            assert _alter(conn, [_upsert(user, kind, password, 8192)]) == {user: (0, None)}
    finally:
        conn.close()


def _authenticates(address: Address, mechanism: str, user: str, password: str) -> bool:
    try:
        conn = _connect(address, (mechanism, user, password))
    except SaslAuthenticationFailedError as exc:
        assert FAILED % mechanism in str(exc)
        return False
    conn.close()
    return True


def test_handshake_offers_the_enabled_mechanisms(sasl_broker: Tuple[Broker, Address]) -> None:
    conn = _connect(sasl_broker[1], None)
    try:
        answer = conn.request(ApiKey.SASL_HANDSHAKE, {"mechanism": "GSSAPI"})
        assert answer == {"error_code": UNSUPPORTED_SASL_MECHANISM,
                          "mechanisms": ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]}
    finally:
        conn.close()


def test_an_unknown_mechanism_in_the_config_is_refused(tmp_path: Path) -> None:
    settings: Dict[str, Any] = {"sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-1"}
    broker = Broker(str(tmp_path / "b"), **settings)
    try:
        with pytest.raises(ConfigError, match="SCRAM-SHA-1"):
            broker.serve("127.0.0.1", 0, sasl_users={"admin": "x"})
    finally:
        broker.close()


def test_scram_only_listener_needs_no_plain_users(tmp_path: Path) -> None:
    from pylogq.server import KafkaServer

    settings: Dict[str, Any] = {"sasl.enabled.mechanisms": "SCRAM-SHA-512",
                                "listeners": "SASL_PLAINTEXT://127.0.0.1:0"}
    broker = Broker(str(tmp_path / "b"), **settings)
    server = KafkaServer(broker)
    try:
        server.start_in_thread()
        host, port = server.addresses[0]
        broker.alter_user_config("bob", {"SCRAM-SHA-512": format_credential(make_credential(
            "SCRAM-SHA-512", salted_password("SCRAM-SHA-512", "pw", b"salt", 4096), b"salt", 4096))})
        assert _authenticates((host, port), "SCRAM-SHA-512", "bob", "pw")
        with pytest.raises(UnsupportedSaslMechanismError, match="it offers SCRAM-SHA-512"):
            _connect((host, port), ("PLAIN", "bob", "pw"))
    finally:
        server.stop_thread()
        broker.close()


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_authentication_and_a_wrong_password(sasl_broker: Tuple[Broker, Address], mechanism: str) -> None:
    address = sasl_broker[1]
    _add_user(address, "alice", "alice-secret", (mechanism,))
    assert _authenticates(address, mechanism, "alice", "alice-secret")
    assert not _authenticates(address, mechanism, "alice", "wrong")
    other = "SCRAM-SHA-512" if mechanism == "SCRAM-SHA-256" else "SCRAM-SHA-256"
    assert not _authenticates(address, other, "alice", "alice-secret")  # no credential for that one


def test_unknown_user_is_answered_like_a_known_one(sasl_broker: Tuple[Broker, Address]) -> None:
    """No user enumeration: an unknown user gets a server-first message (the same salt each
    time) and fails at the proof with the same message as a wrong password."""
    address = sasl_broker[1]
    _add_user(address, "alice", "alice-secret")
    salts = []
    for _ in range(2):
        conn = _connect(address, None)
        try:
            assert conn.request(ApiKey.SASL_HANDSHAKE, {"mechanism": "SCRAM-SHA-256"})["error_code"] == 0
            client = ScramClient("SCRAM-SHA-256", "nobody", "pw")
            answer = conn.request(ApiKey.SASL_AUTHENTICATE, {"auth_bytes": client.first_message()})
            assert answer["error_code"] == 0
            fields = dict(item.split("=", 1) for item in answer["auth_bytes"].decode().split(","))
            assert sorted(fields) == ["i", "r", "s"] and fields["i"] == "4096"
            salts.append(fields["s"])
            final = conn.request(ApiKey.SASL_AUTHENTICATE,
                                 {"auth_bytes": client.final_message(answer["auth_bytes"])})
            assert (final["error_code"], final["error_message"]) == (SASL_AUTHENTICATION_FAILED,
                                                                    FAILED % "SCRAM-SHA-256")
        finally:
            conn.close()
    assert salts[0] == salts[1]


def test_server_nonces_are_fresh(sasl_broker: Tuple[Broker, Address]) -> None:
    address = sasl_broker[1]
    _add_user(address, "alice", "alice-secret")
    nonces = set()
    for _ in range(3):
        conn = _connect(address, None)
        try:
            conn.request(ApiKey.SASL_HANDSHAKE, {"mechanism": "SCRAM-SHA-256"})
            answer = conn.request(ApiKey.SASL_AUTHENTICATE, {"auth_bytes": b"n,,n=alice,r=fixed"})
            nonce = answer["auth_bytes"].decode().split(",")[0][2:]
            assert nonce.startswith("fixed") and len(nonce) > len("fixed") + 16
            nonces.add(nonce)
        finally:
            conn.close()
    assert len(nonces) == 3


MALFORMED_FIRST = [b"", b"\xff\xfe", b"garbage", b"n,,n=,r=abc", b"n,,n=alice,r=", b"p=tls-unique,,n=alice,r=abc",
                   b"n,,r=abc,n=alice", b"n,a=bob,n=alice,r=abc", b"n,,n=al=ice,r=abc", b"n,,n=alice,r=abc,tokenauth=true",
                   b"n,,n=alice,r=a,b" + b"x" * 100000]


@pytest.mark.parametrize("token", MALFORMED_FIRST, ids=range(len(MALFORMED_FIRST)))
def test_malformed_client_first_is_refused(sasl_broker: Tuple[Broker, Address], token: bytes) -> None:
    _refused_cleanly(sasl_broker[1], [token])


MALFORMED_FINAL = ["", "c=biws", "c=biws,r={nonce}", "c=eSws,r={nonce},p={proof}", "c=biws,r=other,p={proof}",
                   "c=biws,r={nonce},p=!!!", "c=biws,r={nonce},p=AAAA", "r={nonce},c=biws,p={proof}",
                   "c=biws,r={nonce},p={proof}"]  # the last: a proof for another password


@pytest.mark.parametrize("template", MALFORMED_FINAL, ids=range(len(MALFORMED_FINAL)))
def test_malformed_client_final_is_refused(sasl_broker: Tuple[Broker, Address], template: str) -> None:
    address = sasl_broker[1]
    _add_user(address, "alice", "alice-secret", ("SCRAM-SHA-256",))
    client = ScramClient("SCRAM-SHA-256", "alice", "wrong-password")

    def final(server_first: bytes) -> bytes:
        nonce = server_first.decode().split(",")[0][2:]
        proof = client.final_message(server_first).decode().rpartition(",p=")[2]
        return template.format(nonce=nonce, proof=proof).encode()
    _refused_cleanly(address, [client.first_message(), final])


def _refused_cleanly(address: Address, steps: List[Any]) -> None:
    """Each step's token is answered until the last, refused with Kafka's error; the connection
    is then closed, and the broker goes on serving."""
    conn = _connect(address, None)
    try:
        assert conn.request(ApiKey.SASL_HANDSHAKE, {"mechanism": "SCRAM-SHA-256"})["error_code"] == 0
        previous = b""
        for i, step in enumerate(steps):
            token = step(previous) if callable(step) else step
            answer = conn.request(ApiKey.SASL_AUTHENTICATE, {"auth_bytes": token})
            if i < len(steps) - 1:
                assert answer["error_code"] == 0
                previous = answer["auth_bytes"]
        assert (answer["error_code"], answer["error_message"]) == (SASL_AUTHENTICATION_FAILED,
                                                                  FAILED % "SCRAM-SHA-256")
        with pytest.raises(KafkaConnectionError):
            conn.request(ApiKey.METADATA, {"topics": []})
    finally:
        conn.close()
    assert _authenticates(address, "PLAIN", "admin", "admin-secret")


def test_handshake_v0_then_bare_scram_tokens(sasl_broker: Tuple[Broker, Address]) -> None:
    """A SaslHandshake v0 client sends its SCRAM messages as bare frames and reads bare answers."""
    address = sasl_broker[1]
    _add_user(address, "alice", "alice-secret", ("SCRAM-SHA-512",))
    for password, ok in (("alice-secret", True), ("wrong", False)):
        with socket.create_connection(address, timeout=DEADLINE_S) as sock:
            sock.sendall(_encode(ApiKey.SASL_HANDSHAKE, 0, {"mechanism": "SCRAM-SHA-512"}, 1))
            assert _decode(ApiKey.SASL_HANDSHAKE, 0, _frame(sock))["error_code"] == 0
            client = ScramClient("SCRAM-SHA-512", "alice", password)
            sock.sendall(_bare(client.first_message()))
            server_first = _frame(sock)
            assert server_first is not None
            sock.sendall(_bare(client.final_message(server_first)))
            server_final = _frame(sock)
            if ok:
                assert server_final is not None
                client.verify(server_final)
                sock.sendall(_encode(ApiKey.METADATA, 1, {"topics": []}, 2))
                assert _decode(ApiKey.METADATA, 1, _frame(sock))["brokers"]
            else:
                assert server_final is None  # v0 has no error answer: the broker closes


def _bare(token: bytes) -> bytes:
    return struct.pack(">i", len(token)) + token


def _encode(api_key: int, version: int, body: Dict[str, Any], correlation_id: int) -> bytes:
    w = Writer()
    REQUEST_HEADER.encode_into(w, {"request_api_key": api_key, "request_api_version": version,
                                   "correlation_id": correlation_id, "client_id": "scram-test"},
                               header_versions(api_key, version)[0])
    REQUESTS[api_key].encode_into(w, body, version)
    return _bare(w.getvalue())


def _frame(sock: socket.socket) -> Optional[bytes]:
    data = b""
    while len(data) < 4:
        chunk = sock.recv(4 - len(data))
        if not chunk:
            return None
        data += chunk
    (size,) = struct.unpack(">i", data)
    body = b""
    while len(body) < size:
        chunk = sock.recv(size - len(body))
        assert chunk, "closed inside a frame"
        body += chunk
    return body


def _decode(api_key: int, version: int, frame: Optional[bytes]) -> Dict[str, Any]:
    assert frame is not None, "the broker closed the connection"
    r = Reader(frame)
    RESPONSE_HEADER.decode_from(r, header_versions(api_key, version)[1])
    body: Dict[str, Any] = RESPONSES[api_key].decode_from(r, version)
    return body


# -- the admin APIs, raw ----------------------------------------------------------------------------


def test_alter_and_describe_errors(sasl_broker: Tuple[Broker, Address]) -> None:
    conn = _connect(sasl_broker[1])
    try:
        assert _alter(conn, [_upsert("alice", 1), _upsert("alice", 2, iterations=16384)]) == {"alice": (0, None)}
        # a user/mechanism pair twice (upsert and delete alike): the user gets no change
        assert _alter(conn, [_upsert("bob", 1)], [{"name": "bob", "mechanism": 1}]) == {
            "bob": (DUPLICATE_RESOURCE, "A user credential cannot be altered twice in the same request")}
        assert _alter(conn, [_upsert("bob", 1), _upsert("bob", 1)])["bob"][0] == DUPLICATE_RESOURCE
        assert _alter(conn, [_upsert("carol", 3)], [{"name": "dave", "mechanism": 0}]) == {
            "carol": (UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism"),
            "dave": (UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism")}
        assert _alter(conn, [_upsert("carol", 1, iterations=4095), _upsert("dave", 2, iterations=16385),
                             _upsert("", 1)]) == {
            "carol": (UNACCEPTABLE_CREDENTIAL, "Too few iterations"),
            "dave": (UNACCEPTABLE_CREDENTIAL, "Too many iterations"),
            "": (UNACCEPTABLE_CREDENTIAL, "Username must not be empty")}
        # a bad change of a user fails all of that user's changes, not another user's
        assert _alter(conn, [_upsert("erin", 1), _upsert("erin", 2, iterations=1), _upsert("frank", 1)]) == {
            "erin": (UNACCEPTABLE_CREDENTIAL, "Too few iterations"), "frank": (0, None)}
        assert _alter(conn, deletions=[{"name": "alice", "mechanism": 2}, {"name": "nobody", "mechanism": 1}]) == {
            "alice": (0, None),
            "nobody": (RESOURCE_NOT_FOUND, "Attempt to delete a user credential that does not exist")}
        assert _alter(conn, deletions=[{"name": "alice", "mechanism": 2}])["alice"][0] == RESOURCE_NOT_FOUND

        everyone = _describe(conn, None)
        assert everyone["error_code"] == 0
        assert [(r["user"], r["error_code"], r["credential_infos"]) for r in everyone["results"]] == [
            ("alice", 0, [{"mechanism": 1, "iterations": 4096}]),
            ("frank", 0, [{"mechanism": 1, "iterations": 4096}])]
        assert _describe(conn, [])["results"] == everyone["results"]  # empty: every user, as Kafka
        named = _describe(conn, ["frank", "nobody", "alice", "alice", ""])["results"]
        assert [(r["user"], r["error_code"], r["error_message"]) for r in named] == [
            ("frank", 0, None),
            ("nobody", RESOURCE_NOT_FOUND, "Attempt to describe a user credential that does not exist: nobody"),
            ("alice", DUPLICATE_RESOURCE,
             "Cannot describe SCRAM credentials for the same user twice in a single request: alice"),
            ("", RESOURCE_NOT_FOUND, "Username must not be empty")]
    finally:
        conn.close()


def test_the_admin_apis_need_authentication(sasl_broker: Tuple[Broker, Address]) -> None:
    conn = _connect(sasl_broker[1], None)
    try:
        with pytest.raises(KafkaConnectionError):
            _describe(conn, None)
    finally:
        conn.close()


def test_confluent_admin_client(sasl_broker: Tuple[Broker, Address]) -> None:
    admin_mod = pytest.importorskip("confluent_kafka.admin")
    from confluent_kafka import KafkaException

    broker, (host, port) = sasl_broker
    admin = admin_mod.AdminClient({"bootstrap.servers": "%s:%d" % (host, port), "security.protocol": "SASL_PLAINTEXT",
                                   "sasl.mechanism": "PLAIN", "sasl.username": "admin",
                                   "sasl.password": "admin-secret"})
    info = admin_mod.ScramCredentialInfo(admin_mod.ScramMechanism.SCRAM_SHA_256, 8192)
    futures = admin.alter_user_scram_credentials([
        admin_mod.UserScramCredentialUpsertion("alice", info, b"alice-secret"),
        admin_mod.UserScramCredentialUpsertion("bob", admin_mod.ScramCredentialInfo(
            admin_mod.ScramMechanism.SCRAM_SHA_512, 100), b"bob-secret")])
    assert futures["alice"].result(DEADLINE_S) is None
    with pytest.raises(KafkaException, match="Too few iterations"):
        futures["bob"].result(DEADLINE_S)
    described = admin.describe_user_scram_credentials().result(DEADLINE_S)
    assert list(described) == ["alice"]
    infos = described["alice"].scram_credential_infos
    assert [(i.mechanism, i.iterations) for i in infos] == [(admin_mod.ScramMechanism.SCRAM_SHA_256, 8192)]
    with pytest.raises(KafkaException, match="does not exist"):
        admin.describe_user_scram_credentials(["bob"])["bob"].result(DEADLINE_S)
    assert _authenticates((host, port), "SCRAM-SHA-256", "alice", "alice-secret")
    futures = admin.alter_user_scram_credentials([
        admin_mod.UserScramCredentialDeletion("alice", admin_mod.ScramMechanism.SCRAM_SHA_256)])
    assert futures["alice"].result(DEADLINE_S) is None
    assert admin.describe_user_scram_credentials().result(DEADLINE_S) == {}
    assert not _authenticates((host, port), "SCRAM-SHA-256", "alice", "alice-secret")


# -- clients authenticating ---------------------------------------------------------------------------


def _topic() -> str:
    return "scram-" + uuid.uuid4().hex[:8]


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_kafka_python_round_trip(sasl_broker: Tuple[Broker, Address], mechanism: str,
                                 caplog: pytest.LogCaptureFixture) -> None:
    kafka = pytest.importorskip("kafka")
    broker, (host, port) = sasl_broker
    _add_user((host, port), "alice", "alice-secret")
    topic = _topic()
    broker.create_topic(topic, 1)
    config = {"bootstrap_servers": "%s:%d" % (host, port), "security_protocol": "SASL_PLAINTEXT",
              "sasl_mechanism": mechanism, "sasl_plain_username": "alice", "sasl_plain_password": "alice-secret"}
    producer = kafka.KafkaProducer(**config)
    for i in range(5):
        producer.send(topic, b"v%d" % i)
    producer.flush(DEADLINE_S)
    producer.close()
    consumer = kafka.KafkaConsumer(topic, auto_offset_reset="earliest", consumer_timeout_ms=int(DEADLINE_S * 1000),
                                   **config)
    got = []
    for message in consumer:
        got.append(message.value)
        if len(got) == 5:
            break
    consumer.close()
    assert got == [b"v%d" % i for i in range(5)]
    caplog.set_level("ERROR", logger="kafka")
    with pytest.raises(kafka.errors.KafkaError):
        kafka.KafkaProducer(bootstrap_timeout_ms=1000, **dict(config, sasl_plain_password="wrong"))
    seen = [r.getMessage() for r in caplog.records if r.name.startswith("kafka")]
    assert any(FAILED % mechanism in m for m in seen), "no authentication failure in %s" % seen


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_confluent_kafka_round_trip(sasl_broker: Tuple[Broker, Address], mechanism: str) -> None:
    ck = pytest.importorskip("confluent_kafka")
    broker, (host, port) = sasl_broker
    _add_user((host, port), "alice", "alice-secret")
    topic = _topic()
    broker.create_topic(topic, 1)
    config = {"bootstrap.servers": "%s:%d" % (host, port), "security.protocol": "SASL_PLAINTEXT",
              "sasl.mechanism": mechanism, "sasl.username": "alice", "sasl.password": "alice-secret"}
    producer = ck.Producer(config)
    for i in range(5):
        producer.produce(topic, b"v%d" % i)
    assert producer.flush(DEADLINE_S) == 0
    consumer = ck.Consumer(dict(config, **{"group.id": "g-" + topic, "auto.offset.reset": "earliest"}))
    consumer.subscribe([topic])
    got: List[bytes] = []
    deadline = time.monotonic() + DEADLINE_S
    while len(got) < 5 and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is not None and message.error() is None:
            got.append(message.value())
    consumer.close()
    assert got == [b"v%d" % i for i in range(5)]


def test_confluent_kafka_wrong_password_gets_kafkas_error(sasl_broker: Tuple[Broker, Address]) -> None:
    ck = pytest.importorskip("confluent_kafka")
    _, (host, port) = sasl_broker
    _add_user((host, port), "alice", "alice-secret")
    errors: List[Any] = []
    producer = ck.Producer({"bootstrap.servers": "%s:%d" % (host, port), "security.protocol": "SASL_PLAINTEXT",
                            "sasl.mechanism": "SCRAM-SHA-256", "sasl.username": "alice", "sasl.password": "wrong",
                            "error_cb": errors.append})
    deadline = time.monotonic() + DEADLINE_S
    while not any(e.code() == ck.KafkaError._AUTHENTICATION for e in errors) and time.monotonic() < deadline:
        producer.poll(0.2)
    failures = [e for e in errors if e.code() == ck.KafkaError._AUTHENTICATION]
    assert failures and FAILED % "SCRAM-SHA-256" in failures[0].str()


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_pylogq_clients_and_admin(sasl_broker: Tuple[Broker, Address], mechanism: str) -> None:
    from pylogq.client.admin import AdminClient, UserScramCredentialDeletion, UserScramCredentialUpsertion
    from pylogq.client.consumer import Consumer
    from pylogq.client.producer import Producer
    from pylogq.errors import ResourceNotFoundError, UnacceptableCredentialError

    broker, (host, port) = sasl_broker
    bootstrap = "%s:%d" % (host, port)
    admin = AdminClient(bootstrap_servers=bootstrap, security_protocol="SASL_PLAINTEXT", sasl_mechanism="PLAIN",
                        sasl_plain_username="admin", sasl_plain_password="admin-secret")
    try:
        assert admin.alter_user_scram_credentials(
            [UserScramCredentialUpsertion("alice", mechanism, "alice-secret", 8192)]) == {"alice": None}
        with pytest.raises(UnacceptableCredentialError, match="Too many iterations"):
            admin.alter_user_scram_credentials([UserScramCredentialUpsertion("bob", mechanism, "pw", 20000)])
        described = admin.describe_user_scram_credentials(["alice", "bob"])
        assert described["alice"] == [(mechanism, 8192)]
        assert isinstance(described["bob"], ResourceNotFoundError)
        topic = _topic()
        broker.create_topic(topic, 1)
        config: Dict[str, Any] = {"bootstrap_servers": bootstrap, "security_protocol": "SASL_PLAINTEXT",
                                  "sasl_mechanism": mechanism,
                  "sasl_plain_username": "alice", "sasl_plain_password": "alice-secret"}
        producer = Producer(**config)
        producer.send(topic, b"hello").get(DEADLINE_S)
        producer.close()
        consumer = Consumer(topic, auto_offset_reset="earliest", **config)
        got: List[bytes] = []
        deadline = time.monotonic() + DEADLINE_S
        while not got and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=500).values():
                got.extend(r.value for r in records)
        consumer.close()
        assert got == [b"hello"]
        with pytest.raises(SaslAuthenticationFailedError, match=FAILED % mechanism):
            Producer(**dict(config, sasl_plain_password="wrong"))
        admin.alter_user_scram_credentials([UserScramCredentialDeletion("alice", mechanism)])
        assert not _authenticates((host, port), mechanism, "alice", "alice-secret")
    finally:
        admin.close()


def _refusal(client: str, address: Address, mechanism: str, user: str, password: str,
             caplog: pytest.LogCaptureFixture) -> str:
    """What ``client`` reports when its SCRAM login is refused (it must not connect)."""
    bootstrap = "%s:%d" % address
    if client == "kafka-python":
        kafka = pytest.importorskip("kafka")
        caplog.set_level("ERROR", logger="kafka")
        with pytest.raises(kafka.errors.KafkaError):
            kafka.KafkaProducer(bootstrap_servers=bootstrap, security_protocol="SASL_PLAINTEXT",
                                sasl_mechanism=mechanism, sasl_plain_username=user, sasl_plain_password=password,
                                bootstrap_timeout_ms=1000)
        return "\n".join(r.getMessage() for r in caplog.records if r.name.startswith("kafka"))
    if client == "aiokafka":
        aiokafka = pytest.importorskip("aiokafka")
        import asyncio

        async def main() -> str:
            producer = aiokafka.AIOKafkaProducer(bootstrap_servers=bootstrap, security_protocol="SASL_PLAINTEXT",
                                                 sasl_mechanism=mechanism, sasl_plain_username=user,
                                                 sasl_plain_password=password)
            try:
                with pytest.raises(aiokafka.errors.KafkaError) as caught:
                    await producer.start()
            finally:
                await producer.stop()
            return str(caught.value)

        caplog.set_level("ERROR", logger="aiokafka")
        failed = asyncio.run(main())  # "Unable to bootstrap": the reason is in aiokafka's log
        return "\n".join([failed] + [r.getMessage() for r in caplog.records if r.name.startswith("aiokafka")])
    if client == "confluent-kafka":
        ck = pytest.importorskip("confluent_kafka")
        seen: List[Any] = []
        producer = ck.Producer({"bootstrap.servers": bootstrap, "security.protocol": "SASL_PLAINTEXT",
                                "sasl.mechanism": mechanism, "sasl.username": user, "sasl.password": password,
                                "error_cb": seen.append})
        deadline = time.monotonic() + DEADLINE_S
        while not any(e.code() == ck.KafkaError._AUTHENTICATION for e in seen) and time.monotonic() < deadline:
            producer.poll(0.2)
        return "\n".join(e.str() for e in seen if e.code() == ck.KafkaError._AUTHENTICATION)
    from pylogq.client.producer import Producer

    with pytest.raises(SaslAuthenticationFailedError) as refused:
        Producer(bootstrap_servers=bootstrap, security_protocol="SASL_PLAINTEXT", sasl_mechanism=mechanism,
                 sasl_plain_username=user, sasl_plain_password=password)
    return str(refused.value)


@pytest.mark.parametrize("mechanism", MECHANISMS)
@pytest.mark.parametrize("case", ["wrong password", "unknown user"])
@pytest.mark.parametrize("client", ["kafka-python", "aiokafka", "confluent-kafka", "pylogq"])
def test_every_client_is_refused_with_kafkas_error(sasl_broker: Tuple[Broker, Address], client: str, case: str,
                                                   mechanism: str, caplog: pytest.LogCaptureFixture) -> None:
    """A wrong password and an unknown user get the same answer, Kafka's, in each client's words."""
    _, address = sasl_broker
    _add_user(address, "alice", "alice-secret")
    user, password = ("alice", "wrong") if case == "wrong password" else ("nobody-%s" % uuid.uuid4().hex, "pw")
    reported = _refusal(client, address, mechanism, user, password, caplog)
    assert FAILED % mechanism in reported, reported


def test_aiokafka_round_trip(sasl_broker: Tuple[Broker, Address]) -> None:
    """aiokafka over SASL_PLAINTEXT with each SCRAM mechanism: its admin client creates the
    topic, a producer writes and a consumer group reads and commits."""
    aiokafka = pytest.importorskip("aiokafka")
    import asyncio

    from aiokafka.admin import AIOKafkaAdminClient, NewTopic

    _, address = sasl_broker
    _add_user(address, "alice", "alice-secret")

    async def run(mechanism: str) -> None:
        config: Dict[str, Any] = {"bootstrap_servers": "%s:%d" % address, "security_protocol": "SASL_PLAINTEXT",
                                  "sasl_mechanism": mechanism, "sasl_plain_username": "alice",
                                  "sasl_plain_password": "alice-secret"}
        topic = _topic()
        admin = AIOKafkaAdminClient(**config)
        await admin.start()
        try:
            await admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=1)])
            assert topic in await admin.list_topics()
        finally:
            await admin.close()
        producer = aiokafka.AIOKafkaProducer(acks="all", **config)
        await producer.start()
        try:
            for i in range(5):
                await producer.send_and_wait(topic, b"v%d" % i)
        finally:
            await producer.stop()
        consumer = aiokafka.AIOKafkaConsumer(topic, group_id="g-" + topic, auto_offset_reset="earliest",
                                             enable_auto_commit=False, **config)
        await consumer.start()
        got: List[bytes] = []
        try:
            deadline = time.monotonic() + DEADLINE_S
            while len(got) < 5 and time.monotonic() < deadline:
                batches = await consumer.getmany(timeout_ms=200)
                got.extend(r.value for rs in batches.values() for r in rs)
            await consumer.commit()
        finally:
            await consumer.stop()
        assert got == [b"v%d" % i for i in range(5)], mechanism

    async def main() -> None:
        for mechanism in MECHANISMS:
            await run(mechanism)

    asyncio.run(main())


def test_credentials_survive_a_restart(tmp_path: Path) -> None:
    data = str(tmp_path / "broker")
    broker = Broker(data, **SASL_CONFIG)
    try:
        address = broker.serve("127.0.0.1", 0, sasl_users={"admin": "admin-secret"})
        _add_user(address, "alice", "alice-secret")
    finally:
        broker.close()
    stored = (tmp_path / "broker" / "pylogq-users.json").read_text()
    assert "alice-secret" not in stored and "stored_key=" in stored
    broker = Broker(data, **SASL_CONFIG)
    try:
        address = broker.serve("127.0.0.1", 0, sasl_users={"admin": "admin-secret"})
        for mechanism in MECHANISMS:
            assert _authenticates(address, mechanism, "alice", "alice-secret")
        conn = _connect(address)
        try:
            infos = _describe(conn, ["alice"])["results"][0]["credential_infos"]
            assert infos == [{"mechanism": 1, "iterations": 8192}, {"mechanism": 2, "iterations": 8192}]
        finally:
            conn.close()
    finally:
        broker.close()


def test_configs_command_for_users(sasl_broker: Tuple[Broker, Address]) -> None:
    """``pylogq configs`` over the broker's plain listener (the tools speak no SASL yet); the
    credentials it sets authenticate on the SASL one."""
    broker, (host, port) = sasl_broker
    plain = broker.serve("127.0.0.1", 0)

    def configs(*args: str) -> Tuple[int, str, str]:
        done = subprocess.run([sys.executable, "-m", "pylogq", "configs", "--bootstrap-server", "%s:%d" % plain]
                              + list(args),
                              capture_output=True, text=True, timeout=120)
        return done.returncode, done.stdout, done.stderr

    users = ("--entity-type", "users", "--entity-name", "alice")
    assert configs("--alter", *users, "--add-config",
                   "SCRAM-SHA-256=[iterations=8192,password=alice-secret],SCRAM-SHA-512=[password=alice-secret]") == (
        0, "Completed updating config for user alice.\n", "")
    expected = ("SCRAM credential configs for user-principal 'alice' are "
                "SCRAM-SHA-256=iterations=8192, SCRAM-SHA-512=iterations=4096\n")
    assert configs("--describe", *users) == (0, expected, "")
    assert configs("--describe", "--entity-type", "users") == (0, expected, "")
    assert _authenticates((host, port), "SCRAM-SHA-512", "alice", "alice-secret")
    assert configs("--alter", *users, "--delete-config", "SCRAM-SHA-512")[0] == 0
    assert not _authenticates((host, port), "SCRAM-SHA-512", "alice", "alice-secret")
    code, out, err = configs("--alter", *users, "--delete-config", "SCRAM-SHA-512")
    assert (code, out) == (1, "") and "Attempt to delete a user credential that does not exist" in err
    code, out, err = configs("--alter", *users, "--add-config", "SCRAM-SHA-256=[iterations=100,password=x]")
    assert (code, out) == (1, "") and "Too few iterations" in err
    code, _, err = configs("--alter", *users, "--add-config", "SCRAM-SHA-256=[password=x],producer_byte_rate=1024")
    assert code == 1 and "Cannot alter both quota and SCRAM credential configs simultaneously" in err
    code, _, err = configs("--alter", *users, "--add-config", "SCRAM-SHA-256=[iterations=8192]")
    assert code == 1 and "a password is required" in err
