"""Chaos: broker processes killed under an idempotent acks=all producer, nothing acknowledged lost.

Real ZooKeeper, three ``pylogq-broker`` processes, a topic with replication factor 3 and
``min.insync.replicas=2``, confluent-kafka (librdkafka) producing numbered records with
``enable.idempotence`` and ``acks=all`` to several partitions, and a kafka-python consumer
reading alongside. Each cycle kills a broker with SIGKILL (the leader of a partition or the
controller among them) and starts it again. At the end: every acknowledged record is
read back exactly once, in order, at the offset it was acknowledged with; whatever the
consumer read is still there; the replicas hold the same bytes below the high
watermark; and after every kill new leaders were elected and writes resumed on
every partition while the victim was still down. With SIGTERM (a controlled
shutdown) instead, the producer sees no error at all. How long an outage lasts is a
speed target for the benchmarks; here a wait is only bounded, generously.

``PYLOGQ_CHAOS_CYCLES`` runs more cycles, ``PYLOGQ_CHAOS_SEED`` replays a run (a
failure's message names the seed).
"""

from __future__ import annotations

import logging
import os
import random
import threading
import time
from pathlib import Path
from typing import Dict, List, Tuple

import pytest

from ._processes import (
    ProcessCluster,
    duplicate_failures,
    read_back,
    read_back_failures,
    replicas_identical,
    stored_copies,
)

#: Replication across broker processes and ZooKeeper: the compiled pass only (tests/conftest.py).
pytestmark = pytest.mark.compiled_pass

confluent_kafka = pytest.importorskip("confluent_kafka")
confluent_admin = pytest.importorskip("confluent_kafka.admin")
kafka = pytest.importorskip("kafka")

TOPIC = "chaos"
PARTITIONS = 3
SESSION_MS = 3000
CYCLES = int(os.environ.get("PYLOGQ_CHAOS_CYCLES", "10"))
SEED = int(os.environ.get("PYLOGQ_CHAOS_SEED", random.randrange(1 << 30)))
#: Acknowledgements a partition must get after a broker went, to count as writing again: more
#: than the few a delivery report can still bring of what was written before it went.
RESUMED = 20


class Acks:
    """What the producer got acknowledged, per partition: (offset, value), in acknowledgement order."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.acked: Dict[int, List[Tuple[int, bytes]]] = {p: [] for p in range(PARTITIONS)}
        self.errors: List[str] = []

    def on_delivery(self, err, msg) -> None:  # type: ignore[no-untyped-def]
        with self.lock:
            if err is not None:
                self.errors.append("%s: %s" % (msg.value(), err))
            else:
                self.acked[msg.partition()].append((msg.offset(), msg.value()))

    def count(self) -> int:
        with self.lock:
            return sum(len(v) for v in self.acked.values())

    def counts(self) -> Dict[int, int]:
        """Acknowledgements so far, per partition."""
        with self.lock:
            return {p: len(v) for p, v in self.acked.items()}


def _produce(cluster: ProcessCluster, acks: Acks, stop: threading.Event, failures: List[BaseException]) -> None:
    # librdkafka's idempotence state machine in producer.log (its epoch bumps tell its own
    # duplicates from the broker's: _processes.duplicate_failures).
    logger = logging.getLogger("chaos.producer.%s" % cluster.base.name)
    logger.propagate = False
    logger.setLevel(logging.DEBUG)
    handler = logging.FileHandler(cluster.base / "producer.log")
    handler.setFormatter(logging.Formatter("%(asctime)s %(message)s"))
    logger.addHandler(handler)
    producer = confluent_kafka.Producer({
        "bootstrap.servers": cluster.bootstrap, "enable.idempotence": True, "acks": "all", "linger.ms": 5,
        "message.timeout.ms": 300000, "topic.metadata.refresh.interval.ms": 1000, "retry.backoff.ms": 50,
        "reconnect.backoff.max.ms": 500, "logger": logger, "debug": "eos"})
    try:
        n = 0
        while not stop.is_set():
            try:
                producer.produce(TOPIC, value=b"r-%d" % n, partition=n % PARTITIONS, on_delivery=acks.on_delivery)
                n += 1
            except BufferError:
                producer.poll(0.05)
                continue
            producer.poll(0)
            time.sleep(0.002)  # pacing: about 500 records a second, room for the brokers on two cores
        left = producer.flush(120)
        if left:
            acks.errors.append("%d records still unacknowledged after the run" % left)
    except BaseException as exc:  # noqa: BLE001 - handed to the test thread
        failures.append(exc)
    finally:
        logger.removeHandler(handler)
        handler.close()


def _consume(cluster: ProcessCluster, seen: Dict[int, List[Tuple[int, bytes]]], stop: threading.Event,
             failures: List[BaseException]) -> None:
    # kafka-python reads alongside, not librdkafka: librdkafka 2.10 and later deadlock (their issue
    # 5476, open in 2.16) when a broker that Metadata no longer lists is dropped while an
    # OffsetForLeaderEpoch request to it waits, which brokers killed in a row make likely; the
    # consumer then stops reading and its close never returns.
    consumer = kafka.KafkaConsumer(bootstrap_servers=cluster.bootstrap, enable_auto_commit=False,
                                   metadata_max_age_ms=1000, request_timeout_ms=10000)
    try:
        partitions = [kafka.TopicPartition(TOPIC, p) for p in range(PARTITIONS)]
        consumer.assign(partitions)
        for tp in partitions:
            consumer.seek(tp, 0)
        while not stop.is_set():
            for tp, records in consumer.poll(timeout_ms=200).items():
                seen[tp.partition].extend((r.offset, r.value) for r in records)
    except BaseException as exc:  # noqa: BLE001 - handed to the test thread
        failures.append(exc)
    finally:
        consumer.close(autocommit=False)


def _run(tmp_path: Path, zookeeper_connect: str, kill: bool) -> None:
    try:
        _cycles(tmp_path, zookeeper_connect, kill)
    except BaseException as exc:
        if isinstance(exc, (KeyboardInterrupt, SystemExit)):
            raise
        raise AssertionError("chaos seed %d (replay: PYLOGQ_CHAOS_SEED=%d): %s: %s"
                             % (SEED, SEED, type(exc).__name__, exc)) from exc


def _cycles(tmp_path: Path, zookeeper_connect: str, kill: bool) -> None:
    rng = random.Random(SEED)
    cluster = ProcessCluster(tmp_path, zookeeper_connect, 3, {"min.insync.replicas": 2,
                                                             "zookeeper.session.timeout.ms": SESSION_MS})
    stop = threading.Event()
    failures: List[BaseException] = []
    acks = Acks()
    seen: Dict[int, List[Tuple[int, bytes]]] = {p: [] for p in range(PARTITIONS)}
    threads: List[threading.Thread] = []
    try:
        cluster.start_all()
        admin = confluent_admin.AdminClient({"bootstrap.servers": cluster.bootstrap})
        admin.create_topics([confluent_admin.NewTopic(TOPIC, PARTITIONS, 3)])[TOPIC].result(30)
        cluster.wait_until(lambda: cluster.full_isr(TOPIC, PARTITIONS), "the topic's full ISRs")
        # Daemon threads: one stuck (a client's close that never returns) fails the test below
        # rather than keeping the test process from exiting.
        threads = [threading.Thread(target=_produce, args=(cluster, acks, stop, failures), daemon=True),
                   threading.Thread(target=_consume, args=(cluster, seen, stop, failures), daemon=True)]
        for t in threads:
            t.start()
        cluster.wait_until(lambda: acks.count() > 200 or failures, "the first acknowledgements")
        for cycle in range(CYCLES):
            leaders = [cluster.state(TOPIC, p)[0] for p in range(PARTITIONS)]  # type: ignore[index]
            choice = cycle % 3
            victim = leaders[0] if choice == 0 else (cluster.controller() if choice == 1 else rng.randrange(3))
            assert victim is not None and victim >= 0
            led = [p for p in range(PARTITIONS) if leaders[p] == victim]
            before = acks.count()
            if kill:
                cluster.kill(victim)
                # Counted once it is dead: an acknowledgement beyond these was written without it.
                counts = acks.counts()
                cluster.wait_until(lambda: all(cluster.state(TOPIC, p)[0] not in (victim, -1)  # type: ignore[index]
                                               for p in led),
                                   "new leaders for broker %d's partitions" % victim, timeout=120)
            else:
                assert cluster.stop(victim) == 0, cluster.brokers[victim].log_tail()
                counts = acks.counts()
            # Writes resume on every partition while it is away (a new leader, or a shrunk ISR).
            cluster.wait_until(lambda: all(n > counts[p] + RESUMED for p, n in acks.counts().items()) or failures,
                               "writes to resume after broker %d went" % victim, timeout=120)
            assert not failures, failures[0]
            assert not cluster.brokers[victim].running
            cluster.start(victim)
            cluster.wait_until(lambda: cluster.full_isr(TOPIC, PARTITIONS), "every ISR whole again", timeout=90)
            assert acks.count() > before
        stop.set()
        for t in threads:
            t.join(180)
            assert not t.is_alive(), "%s did not finish within 180 s of the stop" % t.name
        assert not failures, failures[0]
        assert not acks.errors, acks.errors[:5]
        final = read_back(cluster.bootstrap, TOPIC, PARTITIONS, "chaos-check")
        acked = {p: list(acks.acked[p]) for p in range(PARTITIONS)}
        for p, ours in acked.items():
            assert sorted(ours) == ours, "partition %d: acknowledgements out of order" % p
        problems = read_back_failures(TOPIC, final, acked, seen, duplicates=False)
        assert not problems, problems
        statuses = cluster.stop_all()
        assert all(s == 0 for s in statuses.values()), statuses
        twice, notes = duplicate_failures(TOPIC, final, lambda p: stored_copies(cluster.data_dir(0) / (
            "%s-%d" % (TOPIC, p))), cluster.base / "producer.log")
        for note in notes:
            print("note:", note)
        assert not twice, twice
        replicas_identical(cluster, TOPIC, PARTITIONS)
        for b in cluster.brokers.values():
            assert "Traceback" not in b.log_path.read_text(), b.log_tail()
    finally:
        stop.set()
        for t in threads:
            t.join(30)
        cluster.close()


@pytest.mark.slow
def test_kill_nine_chaos_loses_nothing_acknowledged(tmp_path: Path, zookeeper_connect: str) -> None:
    _run(tmp_path, zookeeper_connect, kill=True)


@pytest.mark.slow
def test_controlled_shutdowns_show_the_producer_no_error(tmp_path: Path, zookeeper_connect: str) -> None:
    _run(tmp_path, zookeeper_connect, kill=False)
