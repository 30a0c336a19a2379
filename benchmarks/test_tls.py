"""Produce and consume over TLS against PLAINTEXT: one ``pylogq-broker``, one client, one run.

One broker subprocess serves a PLAINTEXT and an SSL listener (server authentication,
TLS 1.3, PKCS12 key store; certificates from tests/_certs.py); the client is
confluent-kafka 2 (librdkafka), whose own cost is small beside the broker's, so the
ratio is the broker's TLS cost: the handshake once per connection, then every byte
through OpenSSL both ways, and no ``sendfile`` for fetches (a fetch's file regions are
copied, a large one 256 KiB at a time, and encrypted, as Kafka loses zero-copy under TLS
too).

Group "TLS produce 100B": N keyless 100-byte records into a fresh one-partition topic,
``produce()`` and ``poll(0)`` per record, ``flush()``; the PLAINTEXT row is the
reference. Group "TLS consume 1KiB": a consumer assigned the partition of a topic
holding N 1 KiB records reads them all from the beginning; group "TLS consume 1KiB, 200
partitions" the same records spread over 200 partitions, so that each fetch answers with
many small file regions. Each SSL round alternates with a PLAINTEXT round of the same
client (timed in the untimed setup), so both meet the same drifts of this shared machine;
the summary's "alt" ratio compares those. Target: TLS at least 0.5x PLAINTEXT (asserted in
a full run).

N is 300,000 records to produce and 100,000 to consume; in a smoke run (``--quick``,
``--benchmark-disable``, ``PYLOGQ_NO_EXTENSIONS=1``) 20,000 and 10,000, one round.
"""

from __future__ import annotations

import itertools
import os
import statistics
import time
from typing import Any, Dict, Iterator, Optional

import pytest
from confluent_kafka import Consumer as ConfluentConsumer
from confluent_kafka import Producer as ConfluentProducer
from confluent_kafka import TopicPartition
from peers import BrokerProcess, free_port, pylogq_broker
from summary import alternate, asserting, info, smoke

from pylogq.client.admin import AdminClient, NewTopic
from tests._certs import BROKER_P12_PASSWORD, make_certificates

PRODUCE_FULL, PRODUCE_SMOKE = 300_000, 20_000
CONSUME_FULL, CONSUME_SMOKE = 100_000, 10_000
SMALL = os.urandom(100)
LARGE = os.urandom(1024)
ROUNDS = 5
TIMEOUT = 120.0
TARGET = 0.5  # TLS throughput at least this fraction of PLAINTEXT's
MANY_PARTITIONS = 200

_names = itertools.count(1)


class Listeners:
    """The broker and each listener's client settings."""

    def __init__(self, process: BrokerProcess, ssl_port: int, ca: str) -> None:
        self.process = process
        self.configs: Dict[str, Dict[str, Any]] = {
            "PLAINTEXT": {"bootstrap.servers": process.bootstrap},
            "SSL": {"bootstrap.servers": "127.0.0.1:%d" % ssl_port, "security.protocol": "SSL",
                    "ssl.ca.location": ca},
        }
        self.admin = AdminClient(bootstrap_servers=process.bootstrap)


@pytest.fixture(scope="module")
def listeners(tmp_path_factory: Any) -> Iterator[Listeners]:
    base = tmp_path_factory.mktemp("tls-bench")
    certs = make_certificates(base / "certs")
    tls = free_port()
    process = pylogq_broker(str(base / "data"), overrides={
        "ssl.keystore.type": "PKCS12", "ssl.keystore.location": certs.path("broker.p12"),
        "ssl.keystore.password": BROKER_P12_PASSWORD}, listeners=["SSL://127.0.0.1:%d" % tls]).start()
    found = Listeners(process, tls, certs.path("ca.pem"))
    try:
        yield found
    finally:
        found.admin.close()
        process.stop()


class Produce:
    """One round: N small records through a connected producer into a fresh topic."""

    def __init__(self, listeners: Listeners, listener: str, n: int) -> None:
        self.listeners = listeners
        self.config = listeners.configs[listener]
        self.n = n
        self.topic: Optional[str] = None
        self.producer: Optional[ConfluentProducer] = None

    def prepare(self) -> None:
        self.finish()
        self.topic = "tls-produce-%d-%d" % (os.getpid(), next(_names))
        self.listeners.admin.create_topics([NewTopic(self.topic, 1, 1)])
        self.producer = ConfluentProducer(dict(self.config))
        self.producer.list_topics(self.topic, timeout=TIMEOUT)  # connected (handshake done), metadata known

    def run(self) -> int:
        producer, topic = self.producer, self.topic
        assert producer is not None and topic is not None
        produce, poll = producer.produce, producer.poll
        for _ in range(self.n):
            while True:
                try:
                    produce(topic, SMALL)
                    break
                except BufferError:
                    poll(0.001)
            poll(0)
        left = producer.flush(TIMEOUT)
        assert left == 0, "%d records unacknowledged" % left
        return self.n

    def finish(self) -> None:
        self.producer = None
        topic, self.topic = self.topic, None
        if topic is not None:
            self.listeners.admin.delete_topics([topic])


class Consume:
    """One round: a fresh consumer reads the N 1 KiB records of one topic (of ``partitions``
    partitions) from the start."""

    def __init__(self, listeners: Listeners, listener: str, topic: str, n: int, partitions: int = 1) -> None:
        self.config = dict(listeners.configs[listener], **{
            "group.id": "tls-bench", "enable.auto.commit": False, "fetch.wait.max.ms": 10})
        self.topic = topic
        self.n = n
        self.partitions = partitions
        self.consumer: Optional[ConfluentConsumer] = None

    def prepare(self) -> None:
        self.finish()
        self.consumer = ConfluentConsumer(self.config)
        self.consumer.list_topics(self.topic, timeout=TIMEOUT)  # connected (handshake done)

    def run(self) -> int:
        consumer = self.consumer
        assert consumer is not None
        consumer.assign([TopicPartition(self.topic, p, 0) for p in range(self.partitions)])
        got = 0
        deadline = time.monotonic() + TIMEOUT
        while got < self.n:
            assert time.monotonic() < deadline, "consumed %d of %d" % (got, self.n)
            for message in consumer.consume(10_000, 1.0):
                assert message.error() is None, message.error()
                got += 1
        return got

    def finish(self) -> None:
        consumer, self.consumer = self.consumer, None
        if consumer is not None:
            consumer.close()


def measure(benchmark: Any, request: Any, own: Any, peer: Optional[Any]) -> None:
    """Time ``own``'s rounds, alternating with the ``peer``'s (summary.alternate); in a full run,
    assert the target on the ratio of their medians."""
    small = smoke(request.config)
    warmup = 0 if small else 1
    try:
        result, peer_result = alternate(benchmark, own, peer, 1 if small else ROUNDS, warmup)
        assert result == own.n and (peer is None or peer_result == peer.n)
        if peer is not None and asserting(request.config) and benchmark.stats is not None:
            ratio = statistics.median(benchmark.extra_info["alternating_peer_seconds"]) / benchmark.stats.stats.median
            assert ratio >= TARGET, "TLS at %.2fx PLAINTEXT; the target is %.2fx" % (ratio, TARGET)
    finally:
        own.finish()
        if peer is not None:
            peer.finish()


def _n(request: Any, full: int, small: int) -> int:
    return small if smoke(request.config) else full


def _fill(listeners: Listeners, topic: str, partitions: int, n: int) -> str:
    """``topic`` created with ``partitions`` partitions and ``n`` 1 KiB records spread over them."""
    listeners.admin.create_topics([NewTopic(topic, partitions, 1)])
    producer = ConfluentProducer(dict(listeners.configs["PLAINTEXT"], **{"linger.ms": 20}))
    for i in range(n):
        while True:
            try:
                producer.produce(topic, LARGE, partition=i % partitions)
                break
            except BufferError:
                producer.poll(0.01)
    assert producer.flush(TIMEOUT) == 0
    return topic


@pytest.fixture(scope="module")
def filled(listeners: Listeners, request: Any) -> str:
    """A one-partition topic holding the consume rounds' records."""
    return _fill(listeners, "tls-consume-%d" % os.getpid(), 1, _n(request, CONSUME_FULL, CONSUME_SMOKE))


@pytest.fixture(scope="module")
def filled_many(listeners: Listeners, request: Any) -> str:
    """The consume rounds' records spread over :data:`MANY_PARTITIONS` partitions: a fetch answers
    with as many file regions, small ones (a cost per region shows here)."""
    return _fill(listeners, "tls-consume-many-%d" % os.getpid(), MANY_PARTITIONS,
                 _n(request, CONSUME_FULL, CONSUME_SMOKE))


def test_produce_plaintext(benchmark: Any, request: Any, listeners: Listeners) -> None:
    n = _n(request, PRODUCE_FULL, PRODUCE_SMOKE)
    info(benchmark, "TLS produce 100B", n, "records", peer=True)
    measure(benchmark, request, Produce(listeners, "PLAINTEXT", n), None)


def test_produce_ssl(benchmark: Any, request: Any, listeners: Listeners) -> None:
    n = _n(request, PRODUCE_FULL, PRODUCE_SMOKE)
    info(benchmark, "TLS produce 100B", n, "records", target="SSL >= %.1fx PLAINTEXT" % TARGET)
    measure(benchmark, request, Produce(listeners, "SSL", n), Produce(listeners, "PLAINTEXT", n))


def test_consume_plaintext(benchmark: Any, request: Any, listeners: Listeners, filled: str) -> None:
    n = _n(request, CONSUME_FULL, CONSUME_SMOKE)
    info(benchmark, "TLS consume 1KiB", n, "records", peer=True)
    measure(benchmark, request, Consume(listeners, "PLAINTEXT", filled, n), None)


def test_consume_ssl(benchmark: Any, request: Any, listeners: Listeners, filled: str) -> None:
    n = _n(request, CONSUME_FULL, CONSUME_SMOKE)
    info(benchmark, "TLS consume 1KiB", n, "records", target="SSL >= %.1fx PLAINTEXT" % TARGET)
    measure(benchmark, request, Consume(listeners, "SSL", filled, n), Consume(listeners, "PLAINTEXT", filled, n))


def test_consume_many_partitions_plaintext(benchmark: Any, request: Any, listeners: Listeners,
                                           filled_many: str) -> None:
    n = _n(request, CONSUME_FULL, CONSUME_SMOKE)
    info(benchmark, "TLS consume 1KiB, %d partitions" % MANY_PARTITIONS, n, "records", peer=True)
    measure(benchmark, request, Consume(listeners, "PLAINTEXT", filled_many, n, MANY_PARTITIONS), None)


def test_consume_many_partitions_ssl(benchmark: Any, request: Any, listeners: Listeners, filled_many: str) -> None:
    n = _n(request, CONSUME_FULL, CONSUME_SMOKE)
    info(benchmark, "TLS consume 1KiB, %d partitions" % MANY_PARTITIONS, n, "records",
         target="SSL >= %.1fx PLAINTEXT" % TARGET)
    measure(benchmark, request, Consume(listeners, "SSL", filled_many, n, MANY_PARTITIONS),
            Consume(listeners, "PLAINTEXT", filled_many, n, MANY_PARTITIONS))
