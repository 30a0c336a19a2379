"""The producer's two paths into an in-process broker, against mockafka's in-memory producer.

Groups and targets:
- "produce 1Mx100B": one million 100-byte keyless records, acks=1, ending
  with ``flush()``. ``send()`` record by record (target >= 700k records/s),
  ``send_batch()`` in one call (target >= 5M records/s), and the peer:
  mockafka-py 0.2.3's ``FakeProducer`` (confluent_kafka's ``Producer``
  mocked in memory: ``produce(topic, value, partition=0)`` then ``flush()``),
  which writes nothing to disk. Also kafka-python 3's
  ``DefaultRecordBatchBuilder`` appending the same records, shown for scale
  only (context, no ratio): the encoding work alone of a pure-Python client.
  pyka-log's embedded ``Log``, shown here before, is dropped: it is not on the
  package index the test command installs from, so it could never run there.
- "produce keyed 1Mx100B": the same with 16-byte keys (murmur2 per key).
Every row runs 3 timed rounds and no warm-up round, each into a fresh topic
(or store). In a smoke run (``--quick``, ``--benchmark-disable`` or ``PYLOGQ_NO_EXTENSIONS=1``) the runs
use 200k records so the smoke run stays quick; ``items`` is scaled accordingly.
"""

from __future__ import annotations

import random
import shutil
from typing import Any, Iterator, List, Optional

import pytest
from kafka.record.default_records import DefaultRecordBatchBuilder as KpBuilder
from summary import info, smoke

import pylogq
from pylogq.client.producer import Producer

FULL = 1_000_000
SMOKE = 200_000
TS = 1_700_000_000_000


def _count(request: Any) -> int:
    full = not smoke(request.config)
    return FULL if full else SMOKE


@pytest.fixture(scope="module")
def values() -> List[bytes]:
    rng = random.Random(11)
    return [rng.randbytes(100) for _ in range(FULL)]


@pytest.fixture(scope="module")
def keys() -> List[bytes]:
    rng = random.Random(12)
    return [rng.randbytes(16) for _ in range(FULL)]


class _FreshTopic:
    """One broker for the module; a new topic per round, the previous one deleted."""

    def __init__(self, root: str) -> None:
        self.root = root
        self.broker = pylogq.Broker(root, group_initial_rebalance_delay_ms=0)
        self.round = 0
        self.topic: Optional[str] = None

    def next(self) -> str:
        if self.topic is not None:
            self.broker.delete_topic(self.topic)
        self.round += 1
        self.topic = "bench-%d" % self.round
        self.broker.create_topic(self.topic, 4)
        return self.topic

    def close(self) -> None:
        self.broker.close()
        shutil.rmtree(self.root, ignore_errors=True)


@pytest.fixture
def fresh(tmp_path) -> Iterator[_FreshTopic]:
    f = _FreshTopic(str(tmp_path / "broker"))
    yield f
    f.close()


def _run_pedantic(benchmark: Any, fn: Any, setup: Any) -> Any:
    return benchmark.pedantic(fn, setup=setup, rounds=3, iterations=1, warmup_rounds=0)


@pytest.mark.parametrize("keyed", [False, True], ids=["keyless", "keyed"])
def test_send(benchmark, request, fresh, values, keys, keyed):
    n = _count(request)
    group = "produce keyed 1Mx100B" if keyed else "produce 1Mx100B"
    info(benchmark, group, n, "records", target=">= 700k records/s (send), >= 5M records/s (send_batch)")
    vals = values[:n]
    ks = keys[:n] if keyed else [None] * n
    producer = Producer(broker=fresh.broker, acks=1)
    state = {}

    def setup():
        state["topic"] = fresh.next()
        return (), {}

    def run():
        send = producer.send
        topic = state["topic"]
        future = None
        for v, k in zip(vals, ks):
            future = send(topic, v, k, None, None, TS)
        producer.flush()
        return future.get(0)

    try:
        meta = _run_pedantic(benchmark, run, setup)
    finally:
        producer.close()
    assert meta.offset >= 0


@pytest.mark.parametrize("keyed", [False, True], ids=["keyless", "keyed"])
def test_send_batch(benchmark, request, fresh, values, keys, keyed):
    n = _count(request)
    group = "produce keyed 1Mx100B" if keyed else "produce 1Mx100B"
    info(benchmark, group, n, "records")
    vals = values[:n]
    ks = keys[:n] if keyed else None
    producer = Producer(broker=fresh.broker, acks=1)
    state = {}

    def setup():
        state["topic"] = fresh.next()
        return (), {}

    def run():
        return producer.send_batch(state["topic"], vals, keys=ks, timestamp_ms=TS)

    try:
        results = _run_pedantic(benchmark, run, setup)
    finally:
        producer.close()
    assert sum(r.record_count for r in results) == n


@pytest.fixture(scope="module")
def mockafka() -> Any:
    """mockafka-py, the peer; its benchmarks skip without it (and fail under PYLOGQ_REQUIRE_ALL=1)."""
    return pytest.importorskip(
        "mockafka", reason="mockafka-py 0.2.3 (the peer) is not installed: scripts/run-tests installs it")


@pytest.mark.parametrize("keyed", [False, True], ids=["keyless", "keyed"])
def test_mockafka(benchmark, request, values, keys, keyed, mockafka):
    from mockafka.kafka_store import KafkaStore

    n = _count(request)
    group = "produce keyed 1Mx100B" if keyed else "produce 1Mx100B"
    info(benchmark, group, n, "records", peer=True)
    vals = values[:n]
    ks = keys[:n] if keyed else [None] * n
    producer = mockafka.FakeProducer()

    def setup():
        KafkaStore(clean=True)
        KafkaStore().create_partition("peer", 4)
        return (), {}

    def run():
        produce = producer.produce
        for v, k in zip(vals, ks):
            produce("peer", v, k, partition=0, timestamp=TS)
        return producer.flush()

    assert _run_pedantic(benchmark, run, setup) == 0
    KafkaStore(clean=True)


def test_kafka_python_builder(benchmark, request, values):
    """kafka-python 3's pure-Python batch builder on the same records: encoding only, for scale."""
    n = _count(request)
    info(benchmark, "produce 1Mx100B", n, "records", context=True)
    vals = values[:n]

    def run():
        built = 0
        builder = KpBuilder(magic=2, compression_type=0, is_transactional=False, producer_id=-1,
                            producer_epoch=-1, base_sequence=-1, batch_size=16384)
        offset = 0
        for v in vals:
            if builder.append(offset, TS, None, v, []) is None:
                built += len(builder.build())
                builder = KpBuilder(magic=2, compression_type=0, is_transactional=False, producer_id=-1,
                                    producer_epoch=-1, base_sequence=-1, batch_size=16384)
                offset = 0
                builder.append(offset, TS, None, v, [])
            offset += 1
        return built + len(builder.build())

    assert _run_pedantic(benchmark, run, lambda: ((), {})) > n * 100

