"""Chaos: broker processes killed under an idempotent acks=all producer, nothing acknowledged lost.

Real ZooKeeper, three ``pylogq-broker`` processes, a topic with replication factor 3 and
``min.insync.replicas=2``, confluent-kafka (librdkafka) producing numbered records with
``enable.idempotence`` and ``acks=all`` to several partitions, and a kafka-python consumer
reading alongside. Each cycle kills a broker with SIGKILL (the leader of a partition or the
controller among them) and starts it again. At the end: every acknowledged record is
read back exactly once, in order, at the offset it was acknowledged with; whatever the
consumer read is still there; the replicas hold the same bytes below the high
watermark; and no produce outage lasted two session timeouts. With SIGTERM (a
controlled shutdown) instead, the producer sees no error at all.

``PYLOGQ_CHAOS_CYCLES`` runs more cycles, ``PYLOGQ_CHAOS_SEED`` replays a run.
"""

from __future__ import annotations

import os
import random
import threading
import time
from pathlib import Path
from typing import Dict, List, Optional, Tuple

import pytest

from ._processes import ProcessCluster, read_back, read_back_failures, replicas_identical

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


class Acks:
    """What the producer got acknowledged, per partition: (offset, value, ack time)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.acked: Dict[int, List[Tuple[int, bytes, float]]] = {p: [] for p in range(PARTITIONS)}
        self.errors: List[str] = []

    def on_delivery(self, err, msg) -> None:  # type: ignore[no-untyped-def]
        with self.lock:
            if err is not None:
                self.errors.append("%s: %s" % (msg.value(), err))
            else:
                self.acked[msg.partition()].append((msg.offset(), msg.value(), time.monotonic()))

    def count(self) -> int:
        with self.lock:
            return sum(len(v) for v in self.acked.values())


def _produce(cluster: ProcessCluster, acks: Acks, stop: threading.Event, failures: List[BaseException]) -> None:
    producer = confluent_kafka.Producer({
        "bootstrap.servers": cluster.bootstrap, "enable.idempotence": True, "acks": "all", "linger.ms": 5,
        "message.timeout.ms": 300000, "topic.metadata.refresh.interval.ms": 1000, "retry.backoff.ms": 50,
        "reconnect.backoff.max.ms": 500})
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
    rng = random.Random(SEED)
    cluster = ProcessCluster(tmp_path, zookeeper_connect, 3, {"min.insync.replicas": 2,
                                                             "zookeeper.session.timeout.ms": SESSION_MS})
    stop = threading.Event()
    failures: List[BaseException] = []
    acks = Acks()
    seen: Dict[int, List[Tuple[int, bytes]]] = {p: [] for p in range(PARTITIONS)}
    threads: List[threading.Thread] = []
    outages: List[float] = []
    elections: List[float] = []
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
            t0 = time.monotonic()
            if kill:
                cluster.kill(victim)
                cluster.wait_until(lambda: all(cluster.state(TOPIC, p)[0] != victim for p in led),  # type: ignore[index]
                                   "new leaders for broker %d's partitions" % victim)
                elections.append(time.monotonic() - t0)
            else:
                assert cluster.stop(victim) == 0, cluster.brokers[victim].log_tail()
            # Writes resume on the partitions it led (a new leader, or a shrunk ISR).
            cluster.wait_until(lambda: all(_acked_after(acks, p, t0) for p in range(PARTITIONS)) or failures,
                               "writes to resume after broker %d went" % victim, timeout=60)
            if kill:
                outages.append(max(_first_ack_after(acks, p, t0) - t0 for p in led) if led else 0.0)
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
        acked = {p: [(o, v) for o, v, _ in acks.acked[p]] for p in range(PARTITIONS)}
        for p, ours in acked.items():
            assert sorted(ours) == ours, "partition %d: acknowledgements out of order" % p
        problems = read_back_failures(TOPIC, final, acked, seen)
        assert not problems, problems
        statuses = cluster.stop_all()
        assert all(s == 0 for s in statuses.values()), statuses
        replicas_identical(cluster, TOPIC, PARTITIONS)
        for b in cluster.brokers.values():
            assert "Traceback" not in b.log_path.read_text(), b.log_tail()
        if kill:
            assert max(outages) < 2 * SESSION_MS / 1000.0, "produce outages per kill: %s s (elections after %s s)" % (
                outages, elections)
    finally:
        stop.set()
        for t in threads:
            t.join(30)
        cluster.close()


def _acked_after(acks: Acks, partition: int, t0: float) -> bool:
    with acks.lock:
        return any(t > t0 for _, _, t in acks.acked[partition][-50:])


def _first_ack_after(acks: Acks, partition: int, t0: float) -> float:
    with acks.lock:
        return min(t for _, _, t in acks.acked[partition] if t > t0)


@pytest.mark.slow
def test_kill_nine_chaos_loses_nothing_acknowledged(tmp_path: Path, zookeeper_connect: str) -> None:
    _run(tmp_path, zookeeper_connect, kill=True)


@pytest.mark.slow
def test_controlled_shutdowns_show_the_producer_no_error(tmp_path: Path, zookeeper_connect: str) -> None:
    _run(tmp_path, zookeeper_connect, kill=False)
