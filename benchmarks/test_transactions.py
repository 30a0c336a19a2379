"""Transactions' cost, on one ``pylogq-broker`` process, with confluent-kafka's clients.

Group "transactional produce 100B": N keyless 100-byte records into a fresh
one-partition topic, the round ending when every record is acknowledged (and, for a
transactional producer, its last transaction committed). The reference is the
idempotent producer (``enable.idempotence=true``), librdkafka's defaults otherwise.
Rows: the transactional producer committing every 100 records, and every 10,000
records (``begin_transaction``, ``produce`` per record, ``commit_transaction``). Each
producer has its id and its connections before a round starts. Each
commit costs a round trip to the coordinator, its write to ``__transaction_state``, and
the markers; 100 per transaction pays that every 100 records. The ratios are reported,
no target asserted (the issue asks for the ratios).

Group "read_committed fetch 100B": a consumer reads the N committed records of a
topic with no aborted transaction (written by one transactional producer, 10,000 per
transaction) from the start to the end. The reference is ``isolation.level=
read_uncommitted``; the row is ``read_committed``, whose target is not to be slower
(the broker answers the last stable offset and no aborted transactions; the client
then filters nothing). Each round's consumer is made and connected before the round,
which times the fetches alone.

Rounds alternate with the reference's (summary.alternate). N is 200,000; 20,000 in a
smoke run.
"""

from __future__ import annotations

import itertools
import os
import time
from typing import Any, Iterator, Optional

import pytest
from confluent_kafka import Consumer as ConfluentConsumer
from confluent_kafka import Producer as ConfluentProducer
from confluent_kafka import TopicPartition as ConfluentTopicPartition
from peers import BrokerProcess
from summary import alternate, asserting, info, smoke

from pylogq.client.admin import AdminClient, NewTopic

FULL = 200_000
SMOKE = 20_000
VALUE = os.urandom(100)
ROUNDS = 5
TIMEOUT = 60.0
PRODUCE = "transactional produce 100B"
FETCH = "read_committed fetch 100B"

_names = itertools.count(1)


def _n(config: Any) -> int:
    return SMOKE if smoke(config) else FULL


class Produce:
    """One producer's rounds: a fresh topic and a connected producer (untimed), N records (timed)."""

    def __init__(self, server: BrokerProcess, admin: AdminClient, n: int, per_txn: Optional[int]) -> None:
        self.bootstrap, self.admin, self.n, self.per_txn = server.bootstrap, admin, n, per_txn
        self.topic: Optional[str] = None
        self.producer: Optional[ConfluentProducer] = None
        self.errors: list = []

    def prepare(self) -> None:
        self.finish()
        self._drop_topic()
        self.topic = "txn-bench-%d-%d" % (os.getpid(), next(_names))
        self.admin.create_topics([NewTopic(self.topic, 1, 1)])

        def on_delivery(err: Any, msg: Any) -> None:
            if err is not None:
                self.errors.append(err)

        config = {"bootstrap.servers": self.bootstrap, "on_delivery": on_delivery, "enable.idempotence": True}
        if self.per_txn is not None:
            config["transactional.id"] = self.topic
        self.producer = ConfluentProducer(config)
        if self.per_txn is not None:
            self.producer.init_transactions(TIMEOUT)  # its producer id, and the coordinator's connection
        else:
            # One record first (untimed): the idempotent producer's id, the topic's metadata and
            # the leader's connection are then there before the round, as init_transactions
            # makes them for the transactional producer.
            self.producer.produce(self.topic, VALUE)
            assert self.producer.flush(TIMEOUT) == 0
        self.producer.list_topics(self.topic, timeout=TIMEOUT)

    @property
    def stored(self) -> int:
        """The records the topic holds after a round."""
        return self.n + (1 if self.per_txn is None else 0)

    def run(self) -> int:
        producer, topic, per_txn = self.producer, self.topic, self.per_txn
        assert producer is not None and topic is not None
        produce, poll = producer.produce, producer.poll
        if per_txn is None:
            for _ in range(self.n):
                _send(produce, poll, topic)
            producer.flush(TIMEOUT)
            return self.n
        for start in range(0, self.n, per_txn):
            producer.begin_transaction()
            for _ in range(min(per_txn, self.n - start)):
                _send(produce, poll, topic)
            producer.commit_transaction(TIMEOUT)
        return self.n

    def finish(self) -> None:
        """The round's producer goes; its topic stays until the next round (checked after the last)."""
        producer, self.producer = self.producer, None
        if producer is not None:
            producer.flush(TIMEOUT)

    def _drop_topic(self) -> None:
        topic, self.topic = self.topic, None
        if topic is not None:
            self.admin.delete_topics([topic])

    def close(self) -> None:
        self.finish()
        self._drop_topic()


def _send(produce: Any, poll: Any, topic: str) -> None:
    while True:
        try:
            produce(topic, VALUE)
            return
        except BufferError:
            poll(0.01)


def _consumer(bootstrap: str, isolation: str) -> ConfluentConsumer:
    # queued.min.messages above N: with librdkafka's default (100,000), its fetcher stops when
    # that many records wait in its queue and looks again only after fetch.queue.backoff.ms
    # (1 s), a pause of the client's that most rounds would time.
    return ConfluentConsumer({"bootstrap.servers": bootstrap, "group.id": "bench-" + isolation,
                              "enable.auto.commit": False, "isolation.level": isolation,
                              "enable.partition.eof": True, "fetch.wait.max.ms": 10,
                              "queued.min.messages": 2 * FULL})


def _read(bootstrap: str, topic: str, n: int, isolation: str) -> int:
    consumer = _consumer(bootstrap, isolation)
    try:
        return _read_to_end(consumer, topic, n)
    finally:
        consumer.close()


def _read_to_end(consumer: ConfluentConsumer, topic: str, n: int) -> int:
    """Read ``topic``'s partition 0 from offset 0 to its end; -> the records read."""
    consumer.assign([ConfluentTopicPartition(topic, 0, 0)])
    count = 0
    deadline = time.monotonic() + TIMEOUT
    while True:
        # consume() returns at 10,000 messages or after its timeout: a short one, since the
        # end-of-partition event ends the read (it counts as one message).
        batch = consumer.consume(10_000, 0.05)
        if not batch:
            if time.monotonic() > deadline:
                raise AssertionError("no end within %.0f s (%d of %d read)" % (TIMEOUT, count, n))
            continue
        done = False
        for m in batch:
            if m.error():
                done = True
            else:
                count += 1
        if done:
            return count


@pytest.mark.parametrize("per_txn", [100, 10_000])
def test_transactional_produce(benchmark: Any, request: Any, server: BrokerProcess, admin: AdminClient,
                               per_txn: int) -> None:
    n = _n(request.config)
    own, peer = Produce(server, admin, n, per_txn), Produce(server, admin, n, None)
    info(benchmark, PRODUCE, n, "records", target="ratios reported (the issue asks for them)")
    benchmark.name = "transactional, %d records per transaction" % per_txn
    try:
        alternate(benchmark, own, peer, ROUNDS if asserting(request.config) else 1, 1)
        assert own.topic is not None and not own.errors
        assert _read(server.bootstrap, own.topic, n, "read_committed") == n
    finally:
        own.close()
        peer.close()


def test_idempotent_produce(benchmark: Any, request: Any, server: BrokerProcess, admin: AdminClient) -> None:
    n = _n(request.config)
    own = Produce(server, admin, n, None)
    info(benchmark, PRODUCE, n, "records", peer=True)
    benchmark.name = "idempotent (reference)"
    try:
        alternate(benchmark, own, None, ROUNDS if asserting(request.config) else 1, 1)
        assert own.topic is not None and not own.errors
        assert _read(server.bootstrap, own.topic, own.stored, "read_uncommitted") == own.stored
    finally:
        own.close()


class Fetch:
    """A consumer reading the whole committed topic, in one isolation level: made and
    connected to the partition's leader before the round (untimed), so that a round times
    the fetches alone."""

    def __init__(self, bootstrap: str, topic: str, n: int, isolation: str) -> None:
        self.bootstrap, self.topic, self.n, self.isolation = bootstrap, topic, n, isolation
        self.consumer: Optional[ConfluentConsumer] = None

    def prepare(self) -> None:
        self.finish()
        self.consumer = _consumer(self.bootstrap, self.isolation)
        # ListOffsets at the leader: the metadata and the leader's connection are there before run().
        low, high = self.consumer.get_watermark_offsets(ConfluentTopicPartition(self.topic, 0), TIMEOUT)
        assert high - low >= self.n

    def run(self) -> int:
        assert self.consumer is not None
        count = _read_to_end(self.consumer, self.topic, self.n)
        assert count == self.n
        return count

    def finish(self) -> None:
        consumer, self.consumer = self.consumer, None
        if consumer is not None:
            consumer.close()

    def close(self) -> None:
        self.finish()


@pytest.fixture(scope="module")
def committed_topic(request: Any, server: BrokerProcess, admin: AdminClient) -> Iterator[str]:
    n = _n(request.config)
    writer = Produce(server, admin, n, 10_000)
    writer.prepare()
    writer.run()
    writer.finish()
    topic = writer.topic
    assert topic is not None and not writer.errors
    yield topic
    admin.delete_topics([topic])


def test_read_committed_fetch(benchmark: Any, request: Any, server: BrokerProcess, committed_topic: str) -> None:
    n = _n(request.config)
    own = Fetch(server.bootstrap, committed_topic, n, "read_committed")
    peer = Fetch(server.bootstrap, committed_topic, n, "read_uncommitted")
    info(benchmark, FETCH, n, "records", target="not slower than read_uncommitted")
    benchmark.name = "read_committed"
    alternate(benchmark, own, peer, ROUNDS if asserting(request.config) else 1, 1)


def test_read_uncommitted_fetch(benchmark: Any, request: Any, server: BrokerProcess, committed_topic: str) -> None:
    n = _n(request.config)
    own = Fetch(server.bootstrap, committed_topic, n, "read_uncommitted")
    info(benchmark, FETCH, n, "records", peer=True)
    benchmark.name = "read_uncommitted (reference)"
    alternate(benchmark, own, None, ROUNDS if asserting(request.config) else 1, 1)
