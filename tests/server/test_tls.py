"""TLS listeners (SSL, SASL_SSL) with kafka-python, aiokafka, confluent-kafka, kcat and pylogq's clients.

One broker for the module serves four named listeners (``listener.security.protocol.map``):

- ``SSL``: server authentication only, its key store PKCS12;
- ``MTLS`` (an SSL listener): client certificates required (checked against the broker's
  PKCS12 trust store), its key store given inline as PEM under ``listener.name.mtls.``
  (Kafka's per-listener prefix);
- ``SASL_SSL``: PLAIN (JAAS users) and SCRAM-SHA-256/512 (credentials set over the
  plain listener) inside TLS;
- ``PLAINTEXT``, for the test's own setup.

Each client produces, consumes with a group and (where it has one) uses its admin API
on each; then the refusals: a certificate from a CA the broker does not trust, an expired
one, a client that does not trust the broker's CA, a wrong SCRAM password, bytes that are
not TLS, and a thousand connections that never finish a handshake beside a client that
works. The certificates come from ``tests/_certs.py``.
"""

from __future__ import annotations

import asyncio
import logging
import os
import re
import socket
import ssl
import struct
import subprocess
import time
import tracemalloc
from pathlib import Path
from typing import Any, Dict, Iterator, List, NamedTuple, Optional, Tuple

import pytest

import pylogq
from pylogq import errors
from pylogq.client.admin import NewTopic
from pylogq.client.connection import BrokerConnection
from pylogq.protocol.constants import ApiKey
from pylogq.protocol.scram import salted_password

from .._certs import (
    BROKER_KEY_PASSWORD,
    BROKER_P12_PASSWORD,
    CLIENT_DN,
    CLIENT_PASSWORD,
    TRUST_P12_PASSWORD,
    Certificates,
)
from .._limits import need_files
from .._tls import Address, TlsBroker, start, stop
from ._support import HEARTBEAT_MS, SESSION_TIMEOUT_MS, unique, wait_for
from .test_server import no_server_errors  # noqa: F401 - an autouse fixture: no error is logged by any test here

TIMEOUT_S = 30.0
RECORDS = 10
JAAS = 'org.apache.kafka.common.security.plain.PlainLoginModule required user_admin="admin-secret";'
SCRAM_PASSWORD = "alice-secret"
RULES = "RULE:^CN=(.*?),OU=Clients.*$/$1/,DEFAULT"
SASL_AUTHENTICATION_FAILED = 58
#: Connections that never finish their handshake, held at once beside working clients.
STALLED = 1000

class Mode(NamedTuple):
    """How a client reaches the broker: its listener, protocol, certificate, SASL login."""

    listener: str
    protocol: str
    client_cert: bool = False
    mechanism: Optional[str] = None
    user: Optional[str] = None
    password: Optional[str] = None


MODES = {
    "ssl": Mode("SSL", "SSL"),
    "mtls": Mode("MTLS", "SSL", client_cert=True),
    "sasl-plain": Mode("SASL_SSL", "SASL_SSL", mechanism="PLAIN", user="admin", password="admin-secret"),
    "sasl-scram-256": Mode("SASL_SSL", "SASL_SSL", mechanism="SCRAM-SHA-256", user="alice", password=SCRAM_PASSWORD),
    "sasl-scram-512": Mode("SASL_SSL", "SASL_SSL", mechanism="SCRAM-SHA-512", user="alice", password=SCRAM_PASSWORD),
}


def tls_settings(certs: Certificates, **extra: Any) -> Dict[str, Any]:
    """The module broker's settings (module docstring). Each listener names its own key store
    under its prefix (a listener sees the unprefixed keys too, as in Kafka, and a PKCS12 key
    store and an inline PEM one do not go together); the trust store is the broker's."""
    settings: Dict[str, Any] = {
        "listeners": "SSL://127.0.0.1:0,MTLS://127.0.0.1:0,SASL_SSL://127.0.0.1:0,PLAINTEXT://127.0.0.1:0",
        "listener.security.protocol.map": "SSL:SSL,MTLS:SSL,SASL_SSL:SASL_SSL,PLAINTEXT:PLAINTEXT",
        "ssl.truststore.type": "PKCS12",
        "ssl.truststore.location": certs.path("truststore.p12"),
        "ssl.truststore.password": TRUST_P12_PASSWORD,
        "listener.name.mtls.ssl.client.auth": "required",
        "listener.name.mtls.ssl.keystore.type": "PEM",
        "listener.name.mtls.ssl.keystore.certificate.chain": certs.text("broker.pem"),
        "listener.name.mtls.ssl.keystore.key": certs.text("broker-key.pem"),
        "listener.name.mtls.ssl.key.password": BROKER_KEY_PASSWORD,
        "listener.name.sasl_ssl.plain.sasl.jaas.config": JAAS,
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
        "ssl.principal.mapping.rules": RULES,
        "group.initial.rebalance.delay.ms": 0,
        "offsets.topic.num.partitions": 1,
    }
    for listener in ("ssl", "sasl_ssl"):
        settings.update({"listener.name.%s.ssl.keystore.type" % listener: "PKCS12",
                         "listener.name.%s.ssl.keystore.location" % listener: certs.path("broker.p12"),
                         "listener.name.%s.ssl.keystore.password" % listener: BROKER_P12_PASSWORD})
    settings.update(extra)
    return settings


@pytest.fixture(scope="module")
def tls_broker(tmp_path_factory: pytest.TempPathFactory, certs: Certificates) -> Iterator[TlsBroker]:
    tls = start(tmp_path_factory.mktemp("tls-broker"), tls_settings(certs))
    try:
        add_scram_user(tls.addresses["PLAINTEXT"], "alice", SCRAM_PASSWORD)
        yield tls
    finally:
        stop(tls)


def add_scram_user(address: Address, user: str, password: str) -> None:
    """``user`` with both SCRAM mechanisms, set over a plain listener (AlterUserScramCredentials)."""
    conn = BrokerConnection(address[0], address[1], "tls-test", 10.0)
    try:
        upsertions = []
        for index, mechanism in ((1, "SCRAM-SHA-256"), (2, "SCRAM-SHA-512")):
            salt = os.urandom(16)
            upsertions.append({"name": user, "mechanism": index, "iterations": 4096, "salt": salt,
                               "salted_password": salted_password(mechanism, password, salt, 4096)})
        response = conn.request(ApiKey.ALTER_USER_SCRAM_CREDENTIALS, {"deletions": [], "upsertions": upsertions})
        assert [r["error_code"] for r in response["results"]] == [0]
    finally:
        conn.close()


def values(tag: str) -> List[bytes]:
    return [("%s-%d-" % (tag, i)).encode() + b"x" * (50 + i) for i in range(RECORDS)]


# -- kafka-python ---------------------------------------------------------------------------

def kafka_python_config(tls: TlsBroker, certs: Certificates, mode: Mode) -> Dict[str, Any]:
    config: Dict[str, Any] = {"bootstrap_servers": tls.bootstrap(mode.listener), "security_protocol": mode.protocol,
                              "ssl_cafile": certs.path("ca.pem"), "request_timeout_ms": 10000}
    if mode.client_cert:
        config.update(ssl_certfile=certs.path("client.pem"), ssl_keyfile=certs.path("client-key-enc.pem"),
                      ssl_password=CLIENT_PASSWORD)
    if mode.mechanism:
        config.update(sasl_mechanism=mode.mechanism, sasl_plain_username=mode.user, sasl_plain_password=mode.password)
    return config


@pytest.mark.parametrize("mode", list(MODES))
def test_kafka_python(tls_broker: TlsBroker, certs: Certificates, mode: str) -> None:
    kafka = pytest.importorskip("kafka")
    from kafka.admin import NewTopic

    config = kafka_python_config(tls_broker, certs, MODES[mode])
    topic, group = unique("tls-kp"), unique("tls-kp-group")
    admin = kafka.KafkaAdminClient(**config)
    try:
        admin.create_topics([NewTopic(topic, num_partitions=2, replication_factor=1)])
        assert topic in admin.list_topics()
    finally:
        admin.close()
    producer = kafka.KafkaProducer(acks="all", **config)
    sent = values(mode)
    for value in sent:
        producer.send(topic, value)
    producer.flush(TIMEOUT_S)
    producer.close()
    consumer = kafka.KafkaConsumer(topic, group_id=group, auto_offset_reset="earliest", enable_auto_commit=False,
                                   session_timeout_ms=SESSION_TIMEOUT_MS, heartbeat_interval_ms=HEARTBEAT_MS,
                                   fetch_max_wait_ms=100, **config)
    got: List[bytes] = []
    try:
        wait_for(lambda: len(got) >= RECORDS, TIMEOUT_S, "kafka-python to consume",
                 step=lambda: got.extend(r.value for rs in consumer.poll(200).values() for r in rs))
        consumer.commit()
    finally:
        consumer.close()
    assert sorted(got) == sorted(sent)


# -- aiokafka ---------------------------------------------------------------------------------

def test_aiokafka_modes(tls_broker: TlsBroker, certs: Certificates) -> None:
    aiokafka = pytest.importorskip("aiokafka")
    from aiokafka.admin import AIOKafkaAdminClient, NewTopic
    from aiokafka.helpers import create_ssl_context

    async def run(mode: Mode, tag: str) -> None:
        context = create_ssl_context(cafile=certs.path("ca.pem"),
                                     certfile=certs.path("client.pem") if mode.client_cert else None,
                                     keyfile=certs.path("client-key.pem") if mode.client_cert else None)
        config: Dict[str, Any] = {"bootstrap_servers": tls_broker.bootstrap(mode.listener),
                                  "security_protocol": mode.protocol, "ssl_context": context}
        if mode.mechanism:
            config.update(sasl_mechanism=mode.mechanism, sasl_plain_username=mode.user,
                          sasl_plain_password=mode.password)
        topic, group = unique("tls-aio"), unique("tls-aio-group")
        admin = AIOKafkaAdminClient(**config)
        await admin.start()
        try:
            await admin.create_topics([NewTopic(topic, num_partitions=2, replication_factor=1)])
            assert topic in await admin.list_topics()
        finally:
            await admin.close()
        producer = aiokafka.AIOKafkaProducer(acks="all", **config)
        await producer.start()
        sent = values(tag)
        try:
            for value in sent:
                await producer.send_and_wait(topic, value)
        finally:
            await producer.stop()
        consumer = aiokafka.AIOKafkaConsumer(topic, group_id=group, auto_offset_reset="earliest",
                                             enable_auto_commit=False, session_timeout_ms=SESSION_TIMEOUT_MS,
                                             heartbeat_interval_ms=HEARTBEAT_MS, fetch_max_wait_ms=100, **config)
        await consumer.start()
        got: List[bytes] = []
        try:
            deadline = time.monotonic() + TIMEOUT_S
            while len(got) < RECORDS and time.monotonic() < deadline:
                batches = await consumer.getmany(timeout_ms=200)
                got.extend(r.value for rs in batches.values() for r in rs)
            await consumer.commit()
        finally:
            await consumer.stop()
        assert sorted(got) == sorted(sent), tag

    async def main() -> None:
        for tag, mode in MODES.items():
            await run(mode, tag)

    asyncio.run(main())


# -- confluent-kafka ---------------------------------------------------------------------------

def confluent_config(tls: TlsBroker, certs: Certificates, mode: Mode, **extra: Any) -> Dict[str, Any]:
    config: Dict[str, Any] = {"bootstrap.servers": tls.bootstrap(mode.listener),
                              "security.protocol": mode.protocol, "ssl.ca.location": certs.path("ca.pem")}
    if mode.client_cert:
        config.update({"ssl.certificate.location": certs.path("client.pem"),
                       "ssl.key.location": certs.path("client-key-enc.pem"), "ssl.key.password": CLIENT_PASSWORD})
    if mode.mechanism:
        config.update({"sasl.mechanisms": mode.mechanism, "sasl.username": mode.user, "sasl.password": mode.password})
    config.update(extra)
    return config


@pytest.mark.parametrize("mode", list(MODES))
def test_confluent_kafka(tls_broker: TlsBroker, certs: Certificates, mode: str) -> None:
    confluent = pytest.importorskip("confluent_kafka")
    from confluent_kafka.admin import AdminClient, NewTopic

    config = confluent_config(tls_broker, certs, MODES[mode])
    topic, group = unique("tls-ck"), unique("tls-ck-group")
    admin = AdminClient(config)
    admin.create_topics([NewTopic(topic, num_partitions=2, replication_factor=1)])[topic].result(TIMEOUT_S)
    assert topic in admin.list_topics(timeout=TIMEOUT_S).topics
    producer = confluent.Producer(dict(config, acks="all"))
    sent = values(mode)
    for value in sent:
        producer.produce(topic, value)
    assert producer.flush(TIMEOUT_S) == 0
    consumer = confluent.Consumer(dict(config, **{"group.id": group, "auto.offset.reset": "earliest",
                                                  "enable.auto.commit": False,
                                                  "session.timeout.ms": SESSION_TIMEOUT_MS,
                                                  "heartbeat.interval.ms": HEARTBEAT_MS,
                                                  "fetch.wait.max.ms": 50}))
    got: List[bytes] = []
    try:
        consumer.subscribe([topic])

        def step() -> None:
            message = consumer.poll(0.2)
            if message is not None and message.error() is None:
                got.append(message.value())

        wait_for(lambda: len(got) >= RECORDS, TIMEOUT_S, "confluent-kafka to consume", step=step)
        consumer.commit(asynchronous=False)
    finally:
        consumer.close()
    assert sorted(got) == sorted(sent)


# -- kcat ---------------------------------------------------------------------------------------

def kcat_args(tls: TlsBroker, certs: Certificates, mode: Mode) -> List[str]:
    args = ["-b", tls.bootstrap(mode.listener), "-X", "security.protocol=%s" % mode.protocol,
            "-X", "ssl.ca.location=%s" % certs.path("ca.pem")]
    if mode.client_cert:
        args += ["-X", "ssl.certificate.location=%s" % certs.path("client.pem"),
                 "-X", "ssl.key.location=%s" % certs.path("client-key.pem")]
    if mode.mechanism:
        args += ["-X", "sasl.mechanisms=%s" % mode.mechanism, "-X", "sasl.username=%s" % mode.user,
                 "-X", "sasl.password=%s" % mode.password]
    return args


def run_kcat(kcat: str, args: List[str], stdin: str = "") -> subprocess.CompletedProcess:  # type: ignore[type-arg]
    return subprocess.run([kcat, *args], input=stdin.encode(), capture_output=True, timeout=TIMEOUT_S)


def librdkafka_version(kcat: str) -> Tuple[int, ...]:
    found = re.search(r"librdkafka (\d+)\.(\d+)\.(\d+)", run_kcat(kcat, ["-V"]).stdout.decode())
    assert found is not None, "kcat -V names no librdkafka version"
    return tuple(int(g) for g in found.groups())


@pytest.mark.parametrize("mode", list(MODES))
def test_kcat(tls_broker: TlsBroker, certs: Certificates, kcat: str, mode: str) -> None:
    base = kcat_args(tls_broker, certs, MODES[mode])
    topic, group = unique("tls-kcat"), unique("tls-kcat-group")
    sent = ["%s-%d" % (mode, i) for i in range(RECORDS)]
    done = run_kcat(kcat, base + ["-P", "-t", topic], "".join(v + "\n" for v in sent))
    if MODES[mode].mechanism != "PLAIN" and MODES[mode].mechanism and librdkafka_version(kcat) < (2, 1, 0):
        # librdkafka 2.0 (Debian's kcat) sends the client nonce twice in its SCRAM client-final
        # message; Kafka's broker refuses that message, and so does pylogq's.
        assert done.returncode != 0
        assert "Authentication failed during authentication due to invalid credentials with SASL mechanism " \
               "%s" % MODES[mode].mechanism in done.stderr.decode(), done.stderr.decode()
        return
    assert done.returncode == 0, done.stderr.decode()
    done = run_kcat(kcat, base + ["-G", group, "-c", str(RECORDS), "-f", "%s\\n", "-X", "auto.offset.reset=earliest",
                                  "-X", "session.timeout.ms=%d" % SESSION_TIMEOUT_MS,
                                  "-X", "heartbeat.interval.ms=%d" % HEARTBEAT_MS, topic])
    assert done.returncode == 0, done.stderr.decode()
    assert sorted(done.stdout.decode().split()) == sorted(sent)
    done = run_kcat(kcat, base + ["-L", "-J"])  # metadata: the broker at the listener's own address
    assert done.returncode == 0, done.stderr.decode()
    assert '"name":"%s"' % tls_broker.bootstrap(MODES[mode].listener) in done.stdout.decode().replace(" ", "")


# -- pylogq's own clients -----------------------------------------------------------------------

def pylogq_options(certs: Certificates, mode: Mode) -> Dict[str, Any]:
    options: Dict[str, Any] = {"security_protocol": mode.protocol, "ssl_cafile": certs.path("ca.pem")}
    if mode.client_cert:
        options.update(ssl_certfile=certs.path("client.pem"), ssl_keyfile=certs.path("client-key-enc.pem"),
                       ssl_password=CLIENT_PASSWORD)
    if mode.mechanism:
        options.update(sasl_mechanism=mode.mechanism, sasl_plain_username=mode.user,
                       sasl_plain_password=mode.password)
    return options


@pytest.mark.parametrize("mode", list(MODES))
def test_pylogq_clients(tls_broker: TlsBroker, certs: Certificates, mode: str) -> None:
    options = pylogq_options(certs, MODES[mode])
    bootstrap = tls_broker.bootstrap(MODES[mode].listener)
    topic, group = unique("tls-pylogq"), unique("tls-pylogq-group")
    with pylogq.AdminClient(bootstrap_servers=bootstrap, **options) as admin:
        admin.create_topics([NewTopic(topic, 2, 1)])
        assert topic in admin.list_topics()
    sent = values(mode)
    with pylogq.Producer(bootstrap_servers=bootstrap, acks="all", **options) as producer:
        for value in sent:
            producer.send(topic, value).get(TIMEOUT_S)
    with pylogq.Consumer(topic, bootstrap_servers=bootstrap, group_id=group, auto_offset_reset="earliest",
                         **options) as consumer:
        got: List[bytes] = []
        wait_for(lambda: len(got) >= RECORDS, TIMEOUT_S, "pylogq's consumer",
                 step=lambda: got.extend(r.value for rs in consumer.poll(200).values() for r in rs))
        consumer.commit()
    assert sorted(got) == sorted(sent)


def test_large_fetch_responses_pass_through_tls(tls_broker: TlsBroker, certs: Certificates) -> None:
    """Regions larger than a chunk, and many of them, arrive whole and in order."""
    options = pylogq_options(certs, MODES["ssl"])
    bootstrap = tls_broker.bootstrap("SSL")
    topic = unique("tls-large")
    sent = [os.urandom(300_000) + bytes([i]) for i in range(12)]
    with pylogq.Producer(bootstrap_servers=bootstrap, acks=1, **options) as producer:
        for value in sent:
            producer.send(topic, value).get(TIMEOUT_S)
    with pylogq.Consumer(topic, bootstrap_servers=bootstrap, auto_offset_reset="earliest",
                         max_partition_fetch_bytes=4 << 20, **options) as consumer:
        got: List[bytes] = []
        wait_for(lambda: len(got) >= len(sent), TIMEOUT_S, "the large records",
                 step=lambda: got.extend(r.value for rs in consumer.poll(200).values() for r in rs))
    assert got == sent


def test_many_small_regions_pass_through_tls(tls_broker: TlsBroker, certs: Certificates) -> None:
    """A fetch of many partitions, a small region each, copied with its framing into the same TLS
    records: every record arrives, each in its partition."""
    options = pylogq_options(certs, MODES["ssl"])
    bootstrap = tls_broker.bootstrap("SSL")
    topic = unique("tls-many")
    partitions = 40
    with pylogq.AdminClient(bootstrap_servers=bootstrap, **options) as admin:
        admin.create_topics([NewTopic(topic, partitions, 1)])
    sent = {(p, b"%d-%d" % (p, i)) for p in range(partitions) for i in range(3)}
    with pylogq.Producer(bootstrap_servers=bootstrap, acks=1, **options) as producer:
        for p, value in sorted(sent):
            producer.send(topic, value, partition=p)
        producer.flush(TIMEOUT_S)
    with pylogq.Consumer(topic, bootstrap_servers=bootstrap, auto_offset_reset="earliest", **options) as consumer:
        got: List[Tuple[int, bytes]] = []
        wait_for(lambda: len(got) >= len(sent), TIMEOUT_S, "every partition's records",
                 step=lambda: got.extend((r.partition, r.value) for rs in consumer.poll(200).values() for r in rs))
    assert sorted(got) == sorted(sent)


# -- principals ---------------------------------------------------------------------------------

def principal_of(tls: TlsBroker, conn: BrokerConnection) -> str:
    """The principal the broker gave the server side of ``conn``."""
    port = conn._sock._sock.getsockname()[1]
    found = wait_for(lambda: [c for c in tls.connections() if c.peer.endswith(":%d" % port)], 10.0,
                     "the broker's side of the connection")
    return str(found[0].principal)


@pytest.mark.parametrize("mode, principal", [
    ("ssl", "User:ANONYMOUS"), ("mtls", "User:alice"), ("sasl-plain", "User:admin"),
    ("sasl-scram-256", "User:alice"), ("sasl-scram-512", "User:alice")])
def test_principal(tls_broker: TlsBroker, certs: Certificates, mode: str, principal: str) -> None:
    m = MODES[mode]
    context = ssl.create_default_context(cafile=certs.path("ca.pem"))
    if m.client_cert:
        context.load_cert_chain(certs.path("client.pem"), certs.path("client-key.pem"))
    sasl = (m.mechanism, m.user, m.password) if m.mechanism else None
    host, port = tls_broker.addresses[m.listener]
    conn = BrokerConnection(host, port, "tls-test", 10.0, sasl, ssl_context=context)  # type: ignore[arg-type]
    try:
        assert principal_of(tls_broker, conn) == principal
    finally:
        conn.close()


def test_principal_of_a_certificate_on_a_listener_that_only_asks(tmp_path: Path, certs: Certificates) -> None:
    """ssl.client.auth=requested: a certificate names the client (here by the DEFAULT rule,
    its whole subject), none leaves it anonymous; plain connections are anonymous."""
    tls = start(tmp_path / "b", dict(certs.broker_pem_settings(), **{
        "listeners": "SSL://127.0.0.1:0,PLAINTEXT://127.0.0.1:0", "ssl.client.auth": "requested"}))
    try:
        host, port = tls.addresses["SSL"]
        context = ssl.create_default_context(cafile=certs.path("ca.pem"))
        context.load_cert_chain(certs.path("client.pem"), certs.path("client-key.pem"))
        for ctx, expected in ((context, "User:" + CLIENT_DN),
                              (ssl.create_default_context(cafile=certs.path("ca.pem")), "User:ANONYMOUS")):
            conn = BrokerConnection(host, port, "tls-test", 10.0, ssl_context=ctx)
            try:
                assert principal_of(tls, conn) == expected
            finally:
                conn.close()
        host, port = tls.addresses["PLAINTEXT"]
        conn = BrokerConnection(host, port, "tls-test", 10.0)
        try:
            assert principal_of(tls, conn) == "User:ANONYMOUS"
        finally:
            conn.close()
    finally:
        stop(tls)


def test_sasl_ssl_principals_come_from_sasl_not_the_certificate(tmp_path: Path, certs: Certificates,
                                                               caplog: pytest.LogCaptureFixture) -> None:
    """On a SASL_SSL listener the principal is the SASL login's, as Kafka's principal builder
    names it: ssl.principal.mapping.rules do not apply to its certificate, so one that no rule
    matches is let in; an SSL listener with the same rules refuses that certificate."""
    caplog.set_level(logging.INFO, "pylogq.server")
    tls = start(tmp_path / "b", dict(certs.broker_p12_settings(), **{
        "listeners": "SASL_SSL://127.0.0.1:0,SSL://127.0.0.1:0", "ssl.client.auth": "required",
        "ssl.principal.mapping.rules": "RULE:^CN=(.*?),OU=Nobody.*$/$1/", "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_ssl.plain.sasl.jaas.config": JAAS}))
    try:
        context = ssl.create_default_context(cafile=certs.path("ca.pem"))
        context.load_cert_chain(certs.path("client.pem"), certs.path("client-key.pem"))
        host, port = tls.addresses["SASL_SSL"]
        conn = BrokerConnection(host, port, "tls-test", 10.0, ("PLAIN", "admin", "admin-secret"), ssl_context=context)
        try:
            assert principal_of(tls, conn) == "User:admin"
        finally:
            conn.close()
        assert not broker_logged(caplog, "SASL_SSL", "ssl.principal.mapping.rules")
        host, port = tls.addresses["SSL"]
        with pytest.raises(errors.KafkaConnectionError):  # refused after a TLS 1.3 handshake: a closed connection
            BrokerConnection(host, port, "tls-test", 10.0, ssl_context=context).close()
        refusal = "ssl.principal.mapping.rules: No rules apply to " + CLIENT_DN
        wait_for(lambda: broker_logged(caplog, "SSL", refusal), 10.0, "the SSL listener's refusal")
    finally:
        stop(tls)


# -- refusals -----------------------------------------------------------------------------------

REFUSALS = {
    # (listener, ca file the client trusts, its certificate, its key) -> what the handshake says
    "untrusted client certificate": ("MTLS", "ca.pem", "rogue.pem", "rogue-key.pem", "unknown ca"),
    "expired client certificate": ("MTLS", "ca.pem", "expired.pem", "expired-key.pem", "certificate expired"),
    "no client certificate": ("MTLS", "ca.pem", None, None, "certificate required"),
    "client does not trust the broker": ("SSL", "other-ca.pem", None, None, "certificate verify failed"),
}


@pytest.mark.parametrize("case", list(REFUSALS))
def test_refused_handshakes_pylogq(tls_broker: TlsBroker, certs: Certificates, case: str) -> None:
    listener, ca, cert, key, reason = REFUSALS[case]
    options: Dict[str, Any] = {"security_protocol": "SSL", "ssl_cafile": certs.path(ca)}
    if cert:
        options.update(ssl_certfile=certs.path(cert), ssl_keyfile=certs.path(key))
    with pytest.raises(errors.SslAuthenticationError, match="SSL handshake with .* failed: .*%s" % reason):
        pylogq.AdminClient(bootstrap_servers=tls_broker.bootstrap(listener), **options)
    # The broker goes on serving.
    with pylogq.AdminClient(bootstrap_servers=tls_broker.bootstrap("SSL"), **pylogq_options(certs, MODES["ssl"])) \
            as admin:
        admin.list_topics()


@pytest.mark.parametrize("case", list(REFUSALS))
def test_refused_handshakes_confluent(tls_broker: TlsBroker, certs: Certificates, case: str) -> None:
    confluent = pytest.importorskip("confluent_kafka")
    listener, ca, cert, key, reason = REFUSALS[case]
    config: Dict[str, Any] = {"bootstrap.servers": tls_broker.bootstrap(listener), "security.protocol": "SSL",
                              "ssl.ca.location": certs.path(ca)}
    if cert:
        config.update({"ssl.certificate.location": certs.path(cert), "ssl.key.location": certs.path(key)})
    seen: List[str] = []
    config["error_cb"] = lambda error: seen.append(str(error))
    producer = confluent.Producer(config)
    # librdkafka names the TLS alert the broker sent, or its own verification failure.
    wait_for(lambda: any(reason in e for e in seen), TIMEOUT_S, "librdkafka to report %r" % reason,
             step=lambda: producer.poll(0.1))


@pytest.mark.parametrize("case", list(REFUSALS))
def test_refused_handshakes_kcat(tls_broker: TlsBroker, certs: Certificates, kcat: str, case: str) -> None:
    listener, ca, cert, key, reason = REFUSALS[case]
    # kcat retries until its metadata timeout (-m, whole seconds) and then exits non-zero; librdkafka
    # logs the refusal of its first handshake within milliseconds, so one second is ample.
    args = ["-b", tls_broker.bootstrap(listener), "-X", "security.protocol=SSL", "-X",
            "ssl.ca.location=%s" % certs.path(ca), "-m", "1", "-L"]
    if cert:
        args += ["-X", "ssl.certificate.location=%s" % certs.path(cert), "-X",
                 "ssl.key.location=%s" % certs.path(key)]
    done = run_kcat(kcat, args)
    assert done.returncode != 0
    assert reason in done.stderr.decode(), done.stderr.decode()  # the alert, or its own verification failure


#: What the broker logs for each refusal (its reason, for the operator: a client that completes
#: a TLS 1.3 handshake before the broker checks its certificate may only see a closed
#: connection). A client that does not trust the broker sends an alert or just closes,
#: as it likes: the broker logs a failed handshake either way.
BROKER_REASONS = {
    "untrusted client certificate": "certificate verify failed: unable to get local issuer certificate",
    "expired client certificate": "certificate verify failed: certificate has expired",
    "no client certificate": "peer did not return a certificate",
    "client does not trust the broker": "error=",
}


def broker_logged(caplog: pytest.LogCaptureFixture, listener: str, reason: str) -> bool:
    return any("TLS handshake failed" in r.getMessage() and "listener=%s " % listener in r.getMessage()
               and reason in r.getMessage() for r in caplog.records)


@pytest.mark.parametrize("case", list(REFUSALS))
def test_refused_handshakes_kafka_python(tls_broker: TlsBroker, certs: Certificates, case: str,
                                         caplog: pytest.LogCaptureFixture) -> None:
    kafka = pytest.importorskip("kafka")
    listener, ca, cert, key, reason = REFUSALS[case]
    caplog.set_level(logging.WARNING, "kafka")
    caplog.set_level(logging.WARNING, "pylogq.server")
    # kafka-python retries until bootstrap_timeout_ms; its first handshake is refused within milliseconds.
    config: Dict[str, Any] = {"bootstrap_servers": tls_broker.bootstrap(listener), "security_protocol": "SSL",
                              "ssl_cafile": certs.path(ca), "bootstrap_timeout_ms": 1000}
    if cert:
        config.update(ssl_certfile=certs.path(cert), ssl_keyfile=certs.path(key))
    with pytest.raises(kafka.errors.KafkaError):
        kafka.KafkaAdminClient(**config)
    # kafka-python names the TLS alert (or its own verification failure) in its log.
    seen = [r.getMessage() for r in caplog.records if r.name.startswith("kafka")]
    assert any("Bootstrap connection" in m and reason in m.lower() for m in seen), seen
    assert broker_logged(caplog, listener, BROKER_REASONS[case])


@pytest.mark.parametrize("case", list(REFUSALS))
def test_refused_handshakes_aiokafka(tls_broker: TlsBroker, certs: Certificates, case: str,
                                     caplog: pytest.LogCaptureFixture) -> None:
    aiokafka = pytest.importorskip("aiokafka")
    from aiokafka.errors import KafkaConnectionError
    from aiokafka.helpers import create_ssl_context

    listener, ca, cert, key, reason = REFUSALS[case]
    caplog.set_level(logging.WARNING, "aiokafka")
    caplog.set_level(logging.WARNING, "pylogq.server")

    async def main() -> None:
        context = create_ssl_context(cafile=certs.path(ca), certfile=certs.path(cert) if cert else None,
                                     keyfile=certs.path(key) if cert else None)
        producer = aiokafka.AIOKafkaProducer(bootstrap_servers=tls_broker.bootstrap(listener),
                                             security_protocol="SSL", ssl_context=context)
        try:
            with pytest.raises(KafkaConnectionError, match="Unable to bootstrap"):
                await producer.start()
        finally:
            await producer.stop()

    asyncio.run(main())
    seen = [r.getMessage() for r in caplog.records if r.name.startswith("aiokafka")]
    if listener == "MTLS":
        # aiokafka's TLS 1.3 handshake is over before the broker checks the certificate: the
        # broker's alert reaches it as a closed connection, and the reason is in the broker's log.
        assert any("Unable connect to" in m and "closed" in m for m in seen), seen
    else:
        assert any("Unable connect to" in m and reason in m.lower() for m in seen), seen
    wait_for(lambda: broker_logged(caplog, listener, BROKER_REASONS[case]), 10.0, "the broker's log line")


def test_wrong_scram_password_over_sasl_ssl(tls_broker: TlsBroker, certs: Certificates) -> None:
    host, port = tls_broker.addresses["SASL_SSL"]
    context = ssl.create_default_context(cafile=certs.path("ca.pem"))
    for mechanism in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
        with pytest.raises(errors.SaslAuthenticationFailedError) as caught:
            BrokerConnection(host, port, "tls-test", 10.0, (mechanism, "alice", "wrong"), ssl_context=context)
        assert caught.value.code == SASL_AUTHENTICATION_FAILED
        assert "Authentication failed during authentication due to invalid credentials with SASL mechanism " \
               "%s" % mechanism in str(caught.value)
    confluent = pytest.importorskip("confluent_kafka")
    seen: List[str] = []
    producer = confluent.Producer(confluent_config(tls_broker, certs, MODES["sasl-scram-256"], **{
        "sasl.password": "wrong", "error_cb": lambda error: seen.append(str(error))}))
    wait_for(lambda: any("Authentication failed" in e for e in seen), TIMEOUT_S,
             "librdkafka to report the failed authentication", step=lambda: producer.poll(0.1))


def test_plain_client_on_an_ssl_listener_and_the_reverse(tls_broker: TlsBroker, certs: Certificates) -> None:
    """A plaintext client's ApiVersions read as a ClientHello: the broker closes; an SSL
    client on the plain listener: its ClientHello read as a request size: closed too."""
    host, port = tls_broker.addresses["SSL"]
    with pytest.raises(errors.KafkaConnectionError):
        BrokerConnection(host, port, "tls-test", 5.0)
    host, port = tls_broker.addresses["PLAINTEXT"]
    with pytest.raises(errors.SslAuthenticationError, match="is it an SSL listener"):
        BrokerConnection(host, port, "tls-test", 5.0,
                         ssl_context=ssl.create_default_context(cafile=certs.path("ca.pem")))


def _closed_by_broker(sock: socket.socket, deadline: float) -> bool:
    """Whether the broker closes ``sock`` before ``deadline`` (reading whatever it sends first)."""
    sock.settimeout(max(0.01, deadline - time.monotonic()))
    try:
        while sock.recv(4096):
            pass
    except socket.timeout:
        return False
    except ConnectionError:
        return True
    return True


@pytest.mark.parametrize("garbage", [b"GET / HTTP/1.1\r\nHost: x\r\n\r\n", b"\x16\x03\x01\x00\x05hello",
                                     b"\x16\x03\x03" + b"\xff" * 600, os.urandom(2048)])
def test_malformed_tls_bytes_close_the_connection(tls_broker: TlsBroker, certs: Certificates, garbage: bytes,
                                                  caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, "pylogq.server")
    sock = socket.create_connection(tls_broker.addresses["SSL"], timeout=5)
    try:
        sock.sendall(garbage)
        assert _closed_by_broker(sock, time.monotonic() + 10), "the broker kept a connection that sent garbage"
    finally:
        sock.close()
    wait_for(lambda: any("TLS handshake failed" in r.getMessage() for r in caplog.records), 10.0, "the log line")
    assert not any(r.exc_info for r in caplog.records), "a traceback was logged"
    test_pylogq_clients(tls_broker, certs, "ssl")  # still serving


class RawTls(NamedTuple):
    """A socket with its client side of TLS in the test's hands."""

    sock: socket.socket
    tls: ssl.SSLObject
    outgoing: ssl.MemoryBIO

    def send(self, plain: bytes) -> None:
        self.tls.write(plain)
        self.sock.sendall(self.outgoing.read())


def _handshaken(address: Address, certs: Certificates) -> RawTls:
    """A raw socket to ``address`` whose TLS handshake is done."""
    sock = socket.create_connection(address, timeout=10)
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    client = ssl.create_default_context(cafile=certs.path("ca.pem")).wrap_bio(incoming, outgoing,
                                                                             server_hostname="127.0.0.1")
    while True:
        try:
            client.do_handshake()
        except ssl.SSLWantReadError:
            sock.sendall(outgoing.read())
            data = sock.recv(65536)
            assert data, "the broker closed the connection during the handshake"
            incoming.write(data)
            continue
        sock.sendall(outgoing.read())
        return RawTls(sock, client, outgoing)


def test_a_record_that_does_not_decrypt_closes_the_connection(tls_broker: TlsBroker, certs: Certificates,
                                                              caplog: pytest.LogCaptureFixture) -> None:
    """An application-data record of random bytes after a real handshake: the broker closes the
    connection, its close line naming OpenSSL's reason, and logs no error."""
    caplog.set_level(logging.INFO, "pylogq.server")
    sock = _handshaken(tls_broker.addresses["SSL"], certs).sock  # what follows is not its TLS
    peer = "peer=127.0.0.1:%d " % sock.getsockname()[1]
    try:
        sock.sendall(b"\x17\x03\x03\x00\x20" + os.urandom(32))
        assert _closed_by_broker(sock, time.monotonic() + 10), "the broker kept a connection that sent garbage"
    finally:
        sock.close()
    closed = wait_for(lambda: [r.getMessage() for r in caplog.records
                               if "connection closed" in r.getMessage() and peer in r.getMessage()],
                      10.0, "the connection's close line")
    assert len(closed) == 1 and "reason=connection lost: TLS error: [SSL: DECRYPTION_FAILED_OR_BAD_RECORD_MAC]" \
        in closed[0], closed
    assert not [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    test_pylogq_clients(tls_broker, certs, "ssl")  # still serving


def test_a_requests_declared_size_allocates_nothing_over_tls(tls_broker: TlsBroker, certs: Certificates) -> None:
    """A client that declares a 100 MB request and sends 256 KiB of it costs the broker about what
    it sent, over TLS as over plain TCP: every read of decrypted bytes is bounded (CPython
    allocates the whole size asked on each read, and OpenSSL hands out 16 KiB records)."""
    raw = _handshaken(tls_broker.addresses["SSL"], certs)
    port = raw.sock.getsockname()[1]
    sent = 256 * 1024
    tracemalloc.start()
    try:
        raw.send(struct.pack(">i", 100_000_000) + os.urandom(sent))
        conn = wait_for(lambda: [c for c in tls_broker.connections() if c.peer.endswith(":%d" % port)],
                        10.0, "the broker's side of the connection")[0]
        wait_for(lambda: conn.reading_received >= sent, 10.0, "the broker to read what was sent")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
        raw.sock.close()
    assert conn.reading_size == 100_000_000
    assert peak < 16 << 20, "%d bytes allocated at the peak" % peak


def _client_hello() -> bytes:
    """A real ClientHello, as a client's first flight."""
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    client = ssl.create_default_context().wrap_bio(incoming, outgoing, server_hostname="localhost")
    with pytest.raises(ssl.SSLWantReadError):
        client.do_handshake()
    return outgoing.read()


def test_stalled_handshakes_do_not_stop_the_broker(tmp_path: Path, certs: Certificates,
                                                   caplog: pytest.LogCaptureFixture) -> None:
    """A thousand connections that never send a ClientHello, or only half of one, hold the
    broker up not at all: while every one of them is still in its handshake, real clients
    connect, produce and consume; the broker then stops without waiting for them, and has
    closed every one of them when its stop returns, logging no error."""
    caplog.set_level(logging.WARNING, "pylogq.server")
    count = STALLED
    need_files(2 * count + 512)  # each costs this process two files: the client's end and the broker's
    tls = start(tmp_path / "b", tls_settings(certs))  # the handshake timeout: 30 s
    stalled: List[socket.socket] = []
    try:
        try:
            hello = _client_hello()
            for i in range(count):
                sock = socket.create_connection(tls.addresses["SSL"], timeout=10)
                if i % 2:
                    sock.sendall(hello[: len(hello) // 2])
                stalled.append(sock)
            wait_for(lambda: len(tls.server._handshakes) == count, TIMEOUT_S,
                     "the broker to accept every connection")
            test_pylogq_clients(tls, certs, "ssl")
            test_kafka_python(tls, certs, "mtls")
            # Served while every stalled connection was still held in its handshake.
            assert len(tls.server._handshakes) == count
        finally:
            stop(tls)  # cancels the handshakes: they do not hold the stop for their timeout
        deadline = time.monotonic() + 10
        assert all(_closed_by_broker(sock, deadline) for sock in stalled), "a stalled connection outlived the stop"
    finally:
        for sock in stalled:
            sock.close()
    assert not tls.server._handshakes
    assert not [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR], "an error was logged"


def test_stalled_handshakes_are_closed_at_the_timeout(tmp_path: Path, certs: Certificates,
                                                      caplog: pytest.LogCaptureFixture) -> None:
    """socket.request.read.timeout.ms bounds a handshake: each stalled connection is closed
    with one log line, and a client then connects as before."""
    caplog.set_level(logging.WARNING, "pylogq.server")
    tls = start(tmp_path / "b", tls_settings(certs, **{"socket.request.read.timeout.ms": 1000}))
    stalled: List[socket.socket] = []
    try:
        hello = _client_hello()
        for i in range(20):
            sock = socket.create_connection(tls.addresses["SSL"], timeout=10)
            if i % 2:
                sock.sendall(hello[: len(hello) // 2])
            stalled.append(sock)
        deadline = time.monotonic() + TIMEOUT_S
        assert all(_closed_by_broker(s, deadline) for s in stalled)
        wait_for(lambda: len([r for r in caplog.records if "no handshake within 1000 ms" in r.getMessage()]) == 20,
                 10.0, "a log line per stalled connection")
        assert not tls.server._handshakes
        test_pylogq_clients(tls, certs, "ssl")
    finally:
        for sock in stalled:
            sock.close()
        stop(tls)


# -- settings -----------------------------------------------------------------------------------

def test_cipher_suites_and_protocols(tmp_path: Path, certs: Certificates) -> None:
    """ssl.cipher.suites takes Java's (IANA) names, of suites OpenSSL leaves out by default too
    (RSA key exchange, CBC), as Kafka takes any the JVM has; naming only TLS 1.2 suites keeps
    TLS 1.3 out, as in Kafka; ssl.enabled.protocols bounds the versions."""
    tls = start(tmp_path / "b", dict(certs.broker_pem_settings(), **{
        "listeners": "SSL://127.0.0.1:0",
        "ssl.cipher.suites": "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA,"
                             "TLS_RSA_WITH_AES_128_GCM_SHA256"}))
    try:
        enabled = {c["name"] for c in tls.server._ssl["SSL"].get_ciphers() if c["protocol"] != "TLSv1.3"}
        assert enabled == {"ECDHE-ECDSA-AES128-GCM-SHA256", "ECDHE-RSA-AES128-SHA", "AES128-GCM-SHA256"}
        context = ssl.create_default_context(cafile=certs.path("ca.pem"))
        with socket.create_connection(tls.addresses["SSL"], timeout=5) as raw:
            with context.wrap_socket(raw, server_hostname="127.0.0.1") as sock:
                assert sock.version() == "TLSv1.2"
                assert sock.cipher()[0] == "ECDHE-ECDSA-AES128-GCM-SHA256"
    finally:
        stop(tls)
    tls = start(tmp_path / "c", dict(certs.broker_pem_settings(), **{
        "listeners": "SSL://127.0.0.1:0", "ssl.enabled.protocols": "TLSv1.3"}))
    try:
        context = ssl.create_default_context(cafile=certs.path("ca.pem"))
        context.maximum_version = ssl.TLSVersion.TLSv1_2
        with socket.create_connection(tls.addresses["SSL"], timeout=5) as raw:
            with pytest.raises(ssl.SSLError):
                context.wrap_socket(raw, server_hostname="127.0.0.1")
    finally:
        stop(tls)


def test_pem_key_store_file(tmp_path: Path, certs: Certificates) -> None:
    """Kafka's PEM key store file (the encrypted key and the chain in one file) and a PEM
    trust store file."""
    tls = start(tmp_path / "b", {"listeners": "SSL://127.0.0.1:0", "ssl.keystore.type": "PEM",
                                 "ssl.keystore.location": certs.path("broker-store.pem"),
                                 "ssl.key.password": BROKER_KEY_PASSWORD})
    try:
        test_pylogq_clients(tls, certs, "ssl")
    finally:
        stop(tls)


def test_an_embedded_broker_serves_a_tls_listener(tmp_path: Path, certs: Certificates) -> None:
    """``Broker.serve(listeners=...)`` opens a TLS listener with the broker's own settings."""
    with pylogq.Broker(str(tmp_path / "b"), **certs.broker_p12_settings()) as broker:
        host, port = broker.serve(listeners="SSL://127.0.0.1:0")
        options = pylogq_options(certs, MODES["ssl"])
        with pylogq.AdminClient(bootstrap_servers="%s:%d" % (host, port), **options) as admin:
            admin.create_topics([NewTopic("embedded", 1, 1)])
        with pylogq.Producer(bootstrap_servers="%s:%d" % (host, port), **options) as producer:
            producer.send("embedded", b"over tls").get(TIMEOUT_S)
        with pylogq.Consumer("embedded", broker=broker, auto_offset_reset="earliest") as consumer:
            got: List[bytes] = []
            wait_for(lambda: bool(got), TIMEOUT_S, "the record",
                     step=lambda: got.extend(r.value for rs in consumer.poll(200).values() for r in rs))
        assert got == [b"over tls"]
        with pytest.raises(errors.NoBrokersAvailable, match="closed the connection"):  # not a plain listener
            pylogq.AdminClient(bootstrap_servers="%s:%d" % (host, port))


def config_error(tmp_path: Path, certs: Certificates, **settings: Any) -> str:
    """The ConfigError a broker with ``settings`` (dotted keys with ``__`` for ``.``) fails with."""
    base: Dict[str, Any] = {"listeners": "SSL://127.0.0.1:0"}
    base.update({k.replace("__", "."): v for k, v in settings.items()})
    data = tmp_path / ("b-%d" % len(list(tmp_path.iterdir())))
    try:
        tls = start(data, base)
    except errors.ConfigError as exc:
        return str(exc)
    stop(tls)
    raise AssertionError("no ConfigError for %s" % (sorted(settings),))


def test_config_errors(tmp_path: Path, certs: Certificates) -> None:
    p12 = certs.broker_p12_settings()
    pem = certs.broker_pem_settings()
    cases = [
        ({"listeners": "CLIENT://127.0.0.1:0"}, "No security protocol defined for listener CLIENT"),
        ({"listeners": "CLIENT://127.0.0.1:0", "listener.security.protocol.map": "CLIENT:TLS"},
         "Invalid security protocol `TLS` defined in listener.security.protocol.map"),
        ({"listeners": "SSL://127.0.0.1:0,ssl://127.0.0.1:0"}, "Each listener must have a different name"),
        ({"listeners": "PLAINTEXT://localhost:9,SSL://localhost:9"}, "Each listener must have a different port"),
        ({"listeners": "PLAINTEXT://127.0.0.1:0", "advertised.listeners": "SSL://h:1"},
         "advertised.listeners listener names must be equal to or a subset of the ones defined in listeners"),
        ({"inter.broker.listener.name": "PLAINTEXT", "security.inter.broker.protocol": "SSL"},
         "Only one of inter.broker.listener.name and security.inter.broker.protocol should be set."),
        ({"security.inter.broker.protocol": "TLS"}, "security.inter.broker.protocol"),
        ({}, "needs a key store"),
        (dict(p12, **{"ssl.keystore.type": "JKS"}), "ssl.keystore.type JKS is not supported"),
        (dict(p12, **{"ssl.keystore.location": str(tmp_path / "missing.p12")}),
         "configuration ssl.keystore.location: No such file"),
        (dict(p12, **{"ssl.keystore.password": "wrong"}), "ssl.keystore.password: wrong password"),
        (dict(p12, **{"ssl.truststore.password": "wrong"}), "ssl.truststore.password: wrong password"),
        (dict(pem, **{"ssl.key.password": "wrong"}), "ssl.key.password: cannot decrypt"),
        (dict(pem, **{"ssl.keystore.key": "not a key"}), "ssl.keystore.key"),
        (dict(pem, **{"ssl.keystore.certificate.chain": certs.text("client.pem")}),
         "ssl.keystore.certificate.chain: the private key does not match"),
        (dict(pem, **{"ssl.keystore.password": "x"}), "SSL key store password cannot be specified with PEM format"),
        ({"ssl.keystore.type": "PEM", "ssl.keystore.location": certs.path("broker-store.pem")},
         "SSL PEM key store is specified, but key password is not"),
        ({"ssl.keystore.type": "PEM", "ssl.keystore.location": certs.path("broker-store.pem"),
          "ssl.key.password": "wrong"}, "ssl.key.password: cannot decrypt"),
        (dict(pem, **{"ssl.enabled.protocols": "TLSv1.1"}), "ssl.enabled.protocols"),
        (dict(pem, **{"ssl.cipher.suites": "TLS_NO_SUCH_CIPHER"}), "cipher suite TLS_NO_SUCH_CIPHER"),
        (dict(pem, **{"ssl.client.auth": "always"}), "ssl.client.auth"),
        (dict(pem, **{"ssl.principal.mapping.rules": "RULE:^CN=(.*?)$/$1/X"}), "Invalid rule"),
        (dict(pem, **{"ssl.principal.mapping.rules": "RULE:^CN=(.*?$/$1/"}), "invalid pattern"),
        (dict(p12, **{"listener.name.ssl.ssl.keystore.location": str(tmp_path / "gone.p12")}),
         "configuration listener.name.ssl.ssl.keystore.location"),
        (dict(p12, **{"listener.name.ssl.ssl.client.auth": "always"}), "listener.name.ssl.ssl.client.auth"),
        (dict(p12, **{"listener.name.ssl.ssl.no.such.key": "x"}), "ssl.no.such.key is not a setting a listener overrides"),
        (dict(p12, **{"listener.name.ssl.ssl.truststore.certificates": certs.text("ca.pem"),
                      "listener.name.ssl.ssl.client.auth": "required"}),
         "SSL trust store certs can be specified only for PEM"),
    ]
    for settings, expected in cases:
        message = config_error(tmp_path, certs, **{k.replace(".", "__"): v for k, v in settings.items()})
        assert expected in message, (settings, message)


def test_secrets_are_hidden_in_a_configs_repr_as_describe_configs_hides_them(certs: Certificates) -> None:
    """Kafka's PASSWORD settings (the inline PEM key, chain and trusted certificates too, under a
    listener's prefix as well) never show in a ServerConfig's repr, and are the keys DescribeConfigs
    reports as sensitive."""
    from pylogq.config import sensitive
    from pylogq.server.config import ServerConfig

    secrets = {"ssl.keystore.certificate.chain": certs.text("broker.pem"),
               "ssl.keystore.key": certs.text("broker-key.pem"), "ssl.key.password": BROKER_KEY_PASSWORD,
               "ssl.truststore.certificates": certs.text("ca.pem"), "ssl.truststore.password": "trust-secret",
               "listener.name.mtls.ssl.keystore.password": "p12-secret",
               "listener.name.sasl_ssl.plain.sasl.jaas.config": JAAS}
    config = ServerConfig.build(dict(secrets, **{"ssl.keystore.type": "PEM", "ssl.truststore.type": "PEM"}))
    shown = repr(config)
    for key, value in secrets.items():
        assert sensitive(key), key
        assert "%s='[hidden]'" % key in shown
        assert value not in shown
    assert "ssl.keystore.type='PEM'" in shown and not sensitive("ssl.keystore.type")


def test_inter_broker_listener_rules() -> None:
    """Kafka's rules for a broker of a cluster, checked before it registers."""
    from pylogq.server.listeners import parse_listeners
    from pylogq.server.server import _check_inter_broker_listener

    listeners = parse_listeners("CLIENT://h:1,INTERNAL://h:2", protocol_map={"CLIENT": "SSL", "INTERNAL": "SSL"})
    protocols = {"CLIENT": "SSL", "INTERNAL": "SSL"}
    _check_inter_broker_listener("INTERNAL", True, listeners, {}, protocols)
    with pytest.raises(errors.ConfigError, match="inter.broker.listener.name must be a listener name defined in "
                                                 "advertised.listeners. The valid options based on currently "
                                                 "configured listeners are CLIENT,INTERNAL"):
        _check_inter_broker_listener("PLAINTEXT", False, listeners, {}, protocols)  # security.inter.broker.protocol
    with pytest.raises(errors.ConfigError, match="Listener with name OTHER defined in inter.broker.listener.name not "
                                                 "found in listener.security.protocol.map."):
        _check_inter_broker_listener("OTHER", True, listeners, {}, protocols)


def test_client_option_errors(certs: Certificates, tmp_path: Path) -> None:
    with pytest.raises(errors.ConfigError, match="ssl_cafile"):
        pylogq.AdminClient(bootstrap_servers="127.0.0.1:1", security_protocol="SSL",
                           ssl_cafile=str(tmp_path / "missing.pem"))
    with pytest.raises(errors.ConfigError, match="ssl_password"):
        pylogq.AdminClient(bootstrap_servers="127.0.0.1:1", security_protocol="SSL", ssl_cafile=certs.path("ca.pem"),
                           ssl_certfile=certs.path("client.pem"), ssl_keyfile=certs.path("client-key-enc.pem"),
                           ssl_password="wrong")
    with pytest.raises(errors.ConfigError, match="sasl_plain_username"):
        pylogq.AdminClient(bootstrap_servers="127.0.0.1:1", security_protocol="SASL_SSL",
                           ssl_cafile=certs.path("ca.pem"))



# -- the inter-broker client ------------------------------------------------------------------

INTER_BROKER_JAAS = {
    "PLAIN": 'org.apache.kafka.common.security.plain.PlainLoginModule required username="broker" '
             'password="%s" user_broker="broker-secret";',
    "SCRAM-SHA-256": 'org.apache.kafka.common.security.scram.ScramLoginModule required username="alice" '
                     'password="%s";',
}


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256", None])
def test_inter_broker_client(tmp_path: Path, certs: Certificates, mechanism: Optional[str]) -> None:
    """The client a broker reaches the others with, made from its own settings of its
    inter-broker listener: TLS with its key store as its certificate (the listener requires
    one) and, over SASL_SSL, the mechanism and the JAAS line's credentials; a wrong
    password makes the other broker unreachable, as Kafka's brokers see it."""
    from pylogq.server.inter_broker import secured_connector

    listener = "INTERNAL"
    settings: Dict[str, Any] = dict(certs.broker_p12_settings(), **{
        "listeners": "INTERNAL://127.0.0.1:0,PLAINTEXT://127.0.0.1:0",
        "listener.security.protocol.map": "INTERNAL:%s,PLAINTEXT:PLAINTEXT" % ("SASL_SSL" if mechanism else "SSL"),
        "listener.name.internal.ssl.client.auth": "required",
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256"})
    if mechanism:
        settings["sasl.mechanism.inter.broker.protocol"] = mechanism
        settings["listener.name.internal.plain.sasl.jaas.config"] = INTER_BROKER_JAAS["PLAIN"] % "broker-secret"
        settings["listener.name.internal.%s.sasl.jaas.config" % mechanism.lower()] = \
            INTER_BROKER_JAAS[mechanism] % ("broker-secret" if mechanism == "PLAIN" else SCRAM_PASSWORD)
    tls = start(tmp_path / "b", settings)
    try:
        if mechanism == "SCRAM-SHA-256":
            add_scram_user(tls.addresses["PLAINTEXT"], "alice", SCRAM_PASSWORD)
        host, port = tls.addresses[listener]
        client = secured_connector(tls.broker.config.listener, listener)(7, host, port)  # type: ignore[arg-type]
        try:
            # A single node answers a follower's question with an error of its own: reaching it is the point.
            answer = client.offsets_for_leader_epoch(7, {("t", 0): (0, 0)})
            assert list(answer) == [("t", 0)]
            principals = {c.principal for c in tls.connections() if c.listener.name == listener}
            assert principals == {{"PLAIN": "User:broker", "SCRAM-SHA-256": "User:alice"}.get(
                mechanism or "", "User:CN=localhost,OU=Brokers,O=pylogq,C=US")}
        finally:
            client.close()
        if mechanism:
            settings["listener.name.internal.%s.sasl.jaas.config" % mechanism.lower()] = \
                INTER_BROKER_JAAS[mechanism] % "wrong"
            wrong = pylogq.Broker(str(tmp_path / "other"), **settings)
            try:
                client = secured_connector(wrong.config.listener, listener)(7, host, port)  # type: ignore[arg-type]
                with pytest.raises(errors.BrokerNotAvailableError, match="Authentication failed"):
                    client.offsets_for_leader_epoch(7, {("t", 0): (0, 0)})
                client.close()
            finally:
                wrong.close()
    finally:
        stop(tls)


def test_inter_broker_client_settings_errors(certs: Certificates) -> None:
    from pylogq.server.config import ServerConfig
    from pylogq.server.inter_broker import secured_connector

    base = dict(certs.broker_p12_settings(), **{"listeners": "INTERNAL://127.0.0.1:0",
                                               "listener.security.protocol.map": "INTERNAL:SASL_SSL"})
    with pytest.raises(errors.ConfigError, match="sasl.mechanism.inter.broker.protocol GSSAPI is not supported"):
        secured_connector(ServerConfig.build(base), "INTERNAL")
    with pytest.raises(errors.ConfigError, match="listener.name.internal.plain.sasl.jaas.config is not set: its "
                                                 "username and password are what this broker authenticates"):
        secured_connector(ServerConfig.build(dict(base, **{"sasl.mechanism.inter.broker.protocol": "PLAIN"})),
                          "INTERNAL")
    with pytest.raises(errors.ConfigError, match="Listener with name OTHER defined in inter.broker.listener.name"):
        secured_connector(ServerConfig.build(base), "other")
    with pytest.raises(errors.ConfigError, match="ssl.truststore.password: wrong password"):
        secured_connector(ServerConfig.build(dict(base, **{"ssl.truststore.password": "x",
                                                           "listener.security.protocol.map": "INTERNAL:SSL"})),
                          "INTERNAL")


def test_a_listeners_own_sasl_mechanisms(tmp_path: Path, certs: Certificates) -> None:
    """``listener.name.<name>.sasl.enabled.mechanisms`` narrows what one listener offers."""
    tls = start(tmp_path / "b", dict(certs.broker_p12_settings(), **{
        "listeners": "SASL_SSL://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0,PLAINTEXT://127.0.0.1:0",
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-512",
        "listener.name.sasl_ssl.sasl.enabled.mechanisms": "SCRAM-SHA-512",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS}))
    try:
        add_scram_user(tls.addresses["PLAINTEXT"], "alice", SCRAM_PASSWORD)
        host, port = tls.addresses["SASL_SSL"]
        context = ssl.create_default_context(cafile=certs.path("ca.pem"))
        with pytest.raises(errors.UnsupportedSaslMechanismError, match="it offers SCRAM-SHA-512"):
            BrokerConnection(host, port, "tls-test", 10.0, ("PLAIN", "admin", "admin-secret"), ssl_context=context)
        BrokerConnection(host, port, "tls-test", 10.0, ("SCRAM-SHA-512", "alice", SCRAM_PASSWORD),
                         ssl_context=context).close()
        host, port = tls.addresses["SASL_PLAINTEXT"]
        BrokerConnection(host, port, "tls-test", 10.0, ("PLAIN", "admin", "admin-secret")).close()
    finally:
        stop(tls)


def test_the_authorizer_sees_the_certificates_principal(tmp_path: Path, certs: Certificates) -> None:
    """With Kafka's ACL authorizer, a client certificate's mapped subject is the principal ACLs
    and super.users name: alice (super user) creates a topic; an anonymous TLS client may not."""
    tls = start(tmp_path / "b", dict(certs.broker_p12_settings(), **{
        "listeners": "SSL://127.0.0.1:0", "ssl.client.auth": "requested", "ssl.principal.mapping.rules": RULES,
        "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer", "super.users": "User:alice"}))
    try:
        bootstrap = tls.bootstrap("SSL")
        with pylogq.AdminClient(bootstrap_servers=bootstrap, **pylogq_options(certs, MODES["mtls"])) as admin:
            admin.create_topics([NewTopic("by-alice", 1, 1)])
            assert "by-alice" in admin.list_topics()
        with pylogq.AdminClient(bootstrap_servers=bootstrap, **pylogq_options(certs, MODES["ssl"])) as admin:
            with pytest.raises(errors.TopicAuthorizationFailedError):
                admin.create_topics([NewTopic("by-anonymous", 1, 1)])
    finally:
        stop(tls)
