"""Consumer hot path: records out of a broker's log as ``ConsumerRecord`` objects through ``poll``.

Group "consume 100B": 1M records with 100-byte values (200k with
``--benchmark-disable`` or pure Python), produced in setup with the bulk path
(``build_batch`` + ``Broker.produce``) into one partition, then consumed from
offset 0 by ``Consumer.poll`` (default ``max_poll_records=500`` and with
5,000 per poll). Fetched regions are decoded by the compiled or the pure
columnar kernel. Target >= 2M records/s. The peer is pyka-log 0.1.2's
embedded ``pyka.storage.log.Log`` reading the same records back from its own
log files as ``Record`` objects with ``read_from(0)`` (written in setup with
``append``). Also mockafka-py 0.2.3's ``FakeConsumer`` (an in-memory stand-in
for confluent-kafka's consumer) consuming the same records from its own store.
"""

from __future__ import annotations

import importlib
import os

import pytest
from summary import info

import pylogq
from pylogq import _speedups
from pylogq.client import consumer as consumer_module
from pylogq.client.consumer import Consumer, TopicPartition
from pylogq.records import build_batch, columnar, default_records

try:
    from pyka.storage.log import Log as PykaLog

    HAVE_PYKA_LOG = True
except ImportError:  # the peer is optional: the group then has no ratio column
    HAVE_PYKA_LOG = False

IMPLS = [("pure", default_records)]
if not _speedups.NO_EXTENSIONS:
    IMPLS.insert(0, ("compiled", importlib.import_module("pylogq._core._records")))

TOPIC = "bench"
TP = TopicPartition(TOPIC, 0)
BATCH = 5000
TS = 1_700_000_000_000
GROUP = "consume 100B"
TARGET = ">= 2M records/s"


@pytest.fixture(scope="module")
def count(request):
    small = request.config.getoption("benchmark_disable") or _speedups.NO_EXTENSIONS
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
        if name == "pure":
            n, last = benchmark.pedantic(run, rounds=2, iterations=1)
        else:
            n, last = benchmark.pedantic(run, rounds=5, iterations=1, warmup_rounds=1)
    finally:
        consumer.close()
    assert n == count and last.offset == count - 1 and len(last.value) == 100
    median = benchmark.stats.stats.median if benchmark.stats else None
    if median:
        benchmark.extra_info["records_per_s"] = round(count / median)


@pytest.fixture(scope="module")
def mockafka_store(count, values):
    mockafka = pytest.importorskip("mockafka", reason="mockafka-py 0.2.3 (the peer) is not installed")
    from mockafka.kafka_store import KafkaStore

    KafkaStore(clean=True).create_partition(TOPIC, 1)
    producer = mockafka.FakeProducer()
    for i in range(count):
        producer.produce(TOPIC, value=values[i % BATCH], partition=0, timestamp=TS)
    yield mockafka
    KafkaStore(clean=True)


def test_poll_mockafka(benchmark, count, values, mockafka_store):
    info(benchmark, GROUP, count, "records", target=TARGET)

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

    n, last = benchmark.pedantic(run, rounds=1, iterations=1)
    assert n == count and last.value() == values[(count - 1) % BATCH]
    median = benchmark.stats.stats.median if benchmark.stats else None
    if median:
        benchmark.extra_info["records_per_s"] = round(count / median)


@pytest.fixture(scope="module")
def pyka_log(tmp_path_factory, count, values):
    log = PykaLog(tmp_path_factory.mktemp("pyka-log"))
    for i in range(count):
        log.append(None, values[i % BATCH], TS)
    log.sync()
    yield log
    log.close()


@pytest.mark.skipif(not HAVE_PYKA_LOG, reason="pyka-log is not installed")
def test_read_pyka_log(benchmark, count, values, pyka_log):
    info(benchmark, GROUP, count, "records", peer=HAVE_PYKA_LOG, target=TARGET)

    def run():
        n = 0
        last = None
        for last in pyka_log.read_from(0):
            n += 1
        return n, last

    n, last = benchmark.pedantic(run, rounds=1, iterations=1)
    assert n == count and last.offset == count - 1 and last.value == values[(count - 1) % BATCH]
    median = benchmark.stats.stats.median if benchmark.stats else None
    if median:
        benchmark.extra_info["records_per_s"] = round(count / median)
