"""Consumer hot path: records out of a broker's log as ``ConsumerRecord`` objects through ``poll``.

Group "consume 100B": 1M records with 100-byte values (200k in
a smoke run: ``--quick``, ``--benchmark-disable`` or pure Python), produced in setup with the bulk path
(``build_batch`` + ``Broker.produce``) into one partition, then consumed from
offset 0 by ``Consumer.poll`` (default ``max_poll_records=500`` and with
5,000 per poll). Fetched regions are decoded by the compiled or the pure
columnar kernel. Target >= 2M records/s.

The peer (the ratio's reference) is mockafka-py 0.2.3's ``FakeConsumer``, an
in-memory stand-in for confluent-kafka's consumer, reading the same records
back from its own embedded store (written in setup with ``FakeProducer``) as
message objects, 500 per ``consume`` call. Its store is a list in memory where
pylogq reads segment files, so the peer does less work per record. pyka-log's
embedded ``Log``, the reference before, is dropped: it is not on the package
index the test command installs from, so it could never run there.

Every row gets the same rounds: one untimed warm-up round, then ``ROUNDS``
timed rounds (under ``--benchmark-disable``, one untimed round; under ``--quick``, the same rounds
at the smoke size).
"""

from __future__ import annotations

import importlib
import os

import pytest
from summary import info, smoke

import pylogq
from pylogq import _speedups
from pylogq.client import consumer as consumer_module
from pylogq.client.consumer import Consumer, TopicPartition
from pylogq.records import build_batch, columnar, default_records

IMPLS = [("pure", default_records)]
if not _speedups.NO_EXTENSIONS:
    IMPLS.insert(0, ("compiled", importlib.import_module("pylogq._core._records")))

TOPIC = "bench"
TP = TopicPartition(TOPIC, 0)
BATCH = 5000
TS = 1_700_000_000_000
GROUP = "consume 100B"
TARGET = ">= 2M records/s"
#: Timed rounds of every row, after WARMUP untimed ones.
ROUNDS = 3
WARMUP = 1


def _rounds(benchmark, run):
    return benchmark.pedantic(run, rounds=ROUNDS, iterations=1, warmup_rounds=WARMUP)


@pytest.fixture(scope="module")
def count(request):
    small = smoke(request.config)
    return 200_000 if small else 1_000_000


@pytest.fixture(scope="module")
def values():
    return [os.urandom(100) for _ in range(BATCH)]


@pytest.fixture(scope="module")
def broker(tmp_path_factory, count, values):
    with pylogq.Broker(str(tmp_path_factory.mktemp("consumer-bench")), group_initial_rebalance_delay_ms=0) as b:
        b.create_topic(TOPIC, 1)
        for base in range(0, count, BATCH):
            b.produce(TOPIC, 0, build_batch(values, timestamps=TS))
        yield b


def _use_kernel(monkeypatch, impl):
    def decode(buffer, check_crc=True, skip_control=True, start_offset=None, end_offset=None):
        return columnar.RecordColumns(*impl.decode_columns(buffer, check_crc, skip_control, start_offset, end_offset))

    monkeypatch.setattr(consumer_module, "decode_columns", decode)


@pytest.mark.parametrize("max_poll_records", [500, 5000])
@pytest.mark.parametrize("name, impl", IMPLS, ids=[n for n, _ in IMPLS])
def test_poll(benchmark, monkeypatch, broker, count, name, impl, max_poll_records):
    info(benchmark, GROUP, count, "records", target=TARGET)
    benchmark.extra_info["max_poll_records"] = max_poll_records
    _use_kernel(monkeypatch, impl)
    consumer = Consumer(broker=broker, max_poll_records=max_poll_records)
    consumer.assign([TP])

    def run():
        consumer.seek(TP, 0)
        n = 0
        last = None
        while n < count:
            for records in consumer.poll(timeout_ms=1000).values():
                n += len(records)
                last = records[-1]
        return n, last

    try:
        n, last = _rounds(benchmark, run)
    finally:
        consumer.close()
    assert n == count and last.offset == count - 1 and len(last.value) == 100
    median = benchmark.stats.stats.median if benchmark.stats else None
    if median:
        benchmark.extra_info["records_per_s"] = round(count / median)


@pytest.fixture(scope="module")
def mockafka_store(count, values):
    mockafka = pytest.importorskip(
        "mockafka", reason="mockafka-py 0.2.3 (the peer) is not installed: scripts/run-tests installs it")
    from mockafka.kafka_store import KafkaStore

    KafkaStore(clean=True).create_partition(TOPIC, 1)
    producer = mockafka.FakeProducer()
    for i in range(count):
        producer.produce(TOPIC, value=values[i % BATCH], partition=0, timestamp=TS)
    yield mockafka
    KafkaStore(clean=True)


def test_poll_mockafka(benchmark, count, values, mockafka_store):
    info(benchmark, GROUP, count, "records", peer=True, target=TARGET)

    def run():
        consumer = mockafka_store.FakeConsumer()
        consumer.subscribe([TOPIC])
        n = 0
        last = None
        while n < count:
            messages = consumer.consume(num_messages=500)
            n += len(messages)
            last = messages[-1]
        return n, last

    n, last = _rounds(benchmark, run)
    assert n == count and last.value() == values[(count - 1) % BATCH]  # (its messages carry no offset)
    median = benchmark.stats.stats.median if benchmark.stats else None
    if median:
        benchmark.extra_info["records_per_s"] = round(count / median)
