"""Real Kafka clients against a three-broker cluster while a broker is killed and restarted.

kafka-python, aiokafka, confluent-kafka and kcat each produce with acks=all to a topic
with replication factor 3 (``min.insync.replicas=2``) and consume it in a group, while
the leader of one of its partitions is killed with SIGKILL and started again. Every
acknowledged record is consumed.
"""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import threading
import time
import uuid
from pathlib import Path
from typing import Callable, Iterator, List, Set, Tuple

import pytest

from .._zookeeper import ZooKeeperServer
from ._processes import ProcessCluster

#: Replication across broker processes and ZooKeeper: the compiled pass only (tests/conftest.py).
pytestmark = pytest.mark.compiled_pass

TOTAL = 400
PARTITIONS = 2
DEADLINE_S = 120.0

Acked = List[Tuple[int, int, bytes]]  # (partition, offset, value)


@pytest.fixture(scope="module")
def cluster(zookeeper: ZooKeeperServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ProcessCluster]:
    if not zookeeper.running:
        zookeeper.start()
    connect = zookeeper.fresh_chroot("pylogq-clients-%s" % uuid.uuid4().hex[:8])
    c = ProcessCluster(tmp_path_factory.mktemp("cluster-clients"), connect, 3,
                       {"min.insync.replicas": 2, "zookeeper.session.timeout.ms": 3000})
    try:
        c.start_all()
        yield c
    finally:
        try:
            c.close()  # raises on an unclean shutdown: the chroot goes all the same
        finally:
            zookeeper.delete_chroot(connect)


def _topic(cluster: ProcessCluster, prefix: str) -> str:
    name = "%s-%s" % (prefix, uuid.uuid4().hex[:8])
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic(name, PARTITIONS, 3)])[name].result(30)
    cluster.wait_until(lambda: cluster.full_isr(name, PARTITIONS), "the topic's ISRs")
    return name


def _with_a_kill(cluster: ProcessCluster, topic: str, acked: Callable[[], int], produce: Callable[[], None],
                 consume: Callable[[], Set[bytes]]) -> Set[bytes]:
    """Run ``produce`` and ``consume`` in threads; kill the leader of partition 0 once some
    records are acknowledged, start it again once a new leader is elected."""
    results: List[Set[bytes]] = []
    failures: List[BaseException] = []

    def guarded(fn: Callable[[], object], keep: bool) -> Callable[[], None]:
        def run() -> None:
            try:
                value = fn()
                if keep:
                    results.append(value)  # type: ignore[arg-type]
            except BaseException as exc:  # noqa: BLE001 - handed to the test thread
                failures.append(exc)
        return run

    producer = threading.Thread(target=guarded(produce, False))
    consumer = threading.Thread(target=guarded(consume, True))
    producer.start()
    consumer.start()
    cluster.wait_until(lambda: acked() >= TOTAL // 4 or failures, "the first acknowledgements")
    victim = cluster.state(topic, 0)[0]  # type: ignore[index]
    cluster.kill(victim)
    cluster.wait_until(lambda: cluster.state(topic, 0)[0] not in (victim, -1), "a new leader")  # type: ignore[index]
    cluster.start(victim)
    producer.join(DEADLINE_S)
    consumer.join(DEADLINE_S)
    assert not failures, failures[0]
    assert not producer.is_alive() and not consumer.is_alive()
    cluster.wait_until(lambda: cluster.full_isr(topic, PARTITIONS), "every ISR whole again")
    return results[0]


def _values() -> List[bytes]:
    return [b"v-%04d" % i for i in range(TOTAL)]


def test_confluent_kafka(cluster: ProcessCluster) -> None:
    confluent_kafka = pytest.importorskip("confluent_kafka")
    topic = _topic(cluster, "ck")
    acked: Acked = []
    errors: List[str] = []

    def produce() -> None:
        p = confluent_kafka.Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all",
                                      "enable.idempotence": True, "topic.metadata.refresh.interval.ms": 1000})

        def report(err, msg) -> None:  # type: ignore[no-untyped-def]
            (errors.append(str(err)) if err else acked.append((msg.partition(), msg.offset(), msg.value())))

        for v in _values():
            p.produce(topic, value=v, on_delivery=report)
            p.poll(0)
            time.sleep(0.003)
        assert p.flush(DEADLINE_S) == 0

    def consume() -> Set[bytes]:
        c = confluent_kafka.Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": topic,
                                      "auto.offset.reset": "earliest", "topic.metadata.refresh.interval.ms": 1000})
        c.subscribe([topic])
        seen: Set[bytes] = set()
        deadline = time.monotonic() + DEADLINE_S
        try:
            while len(seen) < TOTAL and time.monotonic() < deadline:
                m = c.poll(0.5)
                if m is not None and not m.error():
                    seen.add(m.value())
        finally:
            c.close()
        return seen

    seen = _with_a_kill(cluster, topic, lambda: len(acked), produce, consume)
    assert not errors, errors[:3]
    assert {v for _, _, v in acked} == set(_values()) <= seen


def test_kafka_python(cluster: ProcessCluster) -> None:
    kafka = pytest.importorskip("kafka")
    topic = _topic(cluster, "kp")
    futures: List[object] = []

    def produce() -> None:
        p = kafka.KafkaProducer(bootstrap_servers=cluster.bootstrap, acks="all", retries=100,
                                retry_backoff_ms=200, request_timeout_ms=10000, metadata_max_age_ms=1000,
                                max_in_flight_requests_per_connection=1)
        for v in _values():
            futures.append(p.send(topic, value=v))
            time.sleep(0.003)
        p.flush(DEADLINE_S)
        p.close()

    def consume() -> Set[bytes]:
        c = kafka.KafkaConsumer(topic, bootstrap_servers=cluster.bootstrap, group_id=topic,
                                auto_offset_reset="earliest", metadata_max_age_ms=1000, request_timeout_ms=10000,
                                session_timeout_ms=10000, heartbeat_interval_ms=1000)
        seen: Set[bytes] = set()
        deadline = time.monotonic() + DEADLINE_S
        try:
            while len(seen) < TOTAL and time.monotonic() < deadline:
                for batch in c.poll(500).values():
                    seen.update(r.value for r in batch)
        finally:
            c.close()
        return seen

    seen = _with_a_kill(cluster, topic, lambda: sum(1 for f in list(futures) if f.succeeded()),  # type: ignore[attr-defined]
                        produce, consume)
    acked = [(md.partition, md.offset, v) for md, v in ((f.get(1), v) for f, v in zip(futures, _values()))]  # type: ignore[attr-defined]
    assert {v for _, _, v in acked} == set(_values()) <= seen


def test_aiokafka(cluster: ProcessCluster) -> None:
    aiokafka = pytest.importorskip("aiokafka")
    topic = _topic(cluster, "aio")
    acked: Acked = []

    async def produce_async() -> None:
        p = aiokafka.AIOKafkaProducer(bootstrap_servers=cluster.bootstrap, acks="all", enable_idempotence=True,
                                      metadata_max_age_ms=1000, request_timeout_ms=10000)
        await p.start()
        try:
            for v in _values():
                md = await p.send_and_wait(topic, value=v)
                acked.append((md.partition, md.offset, v))
        finally:
            await p.stop()

    async def consume_async() -> Set[bytes]:
        c = aiokafka.AIOKafkaConsumer(topic, bootstrap_servers=cluster.bootstrap, group_id=topic,
                                      auto_offset_reset="earliest", metadata_max_age_ms=1000,
                                      request_timeout_ms=10000, session_timeout_ms=10000,
                                      heartbeat_interval_ms=1000)
        await c.start()
        seen: Set[bytes] = set()
        deadline = time.monotonic() + DEADLINE_S
        try:
            while len(seen) < TOTAL and time.monotonic() < deadline:
                for batch in (await c.getmany(timeout_ms=500)).values():
                    seen.update(r.value for r in batch)
        finally:
            await c.stop()
        return seen

    seen = _with_a_kill(cluster, topic, lambda: len(acked), lambda: asyncio.run(produce_async()),
                        lambda: asyncio.run(consume_async()))
    assert {v for _, _, v in acked} == set(_values()) <= seen


def test_kcat(cluster: ProcessCluster) -> None:
    kcat = shutil.which("kcat") or shutil.which("kafkacat")
    if kcat is None:
        pytest.skip("kcat is not installed (Debian: apt-get install kcat)")
    topic = _topic(cluster, "kcat")
    sent = [0]

    def produce() -> None:
        proc = subprocess.Popen([kcat, "-P", "-b", cluster.bootstrap, "-t", topic, "-X", "acks=all",
                                 "-X", "enable.idempotence=true", "-X", "topic.metadata.refresh.interval.ms=1000",
                                 "-X", "message.timeout.ms=100000"], stdin=subprocess.PIPE, stderr=subprocess.PIPE)
        assert proc.stdin is not None
        for v in _values():
            proc.stdin.write(v + b"\n")
            proc.stdin.flush()
            sent[0] += 1
            time.sleep(0.003)
        _, err = proc.communicate(timeout=DEADLINE_S)  # closes kcat's input: it flushes and exits
        assert proc.returncode == 0, err.decode(errors="replace")  # kcat fails on an undelivered record

    def consume() -> Set[bytes]:
        done = subprocess.run([kcat, "-b", cluster.bootstrap, "-G", topic, "-c", str(TOTAL), "-q",
                               "-X", "auto.offset.reset=earliest", "-X", "topic.metadata.refresh.interval.ms=1000",
                               topic], capture_output=True, timeout=DEADLINE_S)
        assert done.returncode == 0, done.stderr.decode(errors="replace")
        return set(done.stdout.split(b"\n")) - {b""}

    seen = _with_a_kill(cluster, topic, lambda: sent[0], produce, consume)
    assert set(_values()) <= seen
