"""What replication costs and how fast it fails over: three ``pylogq-broker`` processes on this machine.

Groups, 100-byte values, confluent-kafka (librdkafka) on loopback, real ZooKeeper:
- "replicated produce 100B": N records handed to ``produce_batch()`` and flushed, into
  a fresh one-partition topic per round, with the same producer settings but
  ``acks``: replication factor 3 with ``acks=all`` (idempotent, ``min.insync.replicas=2``)
  against the peer row, replication factor 1 with ``acks=1``. LinkedIn measured 51%
  for Kafka on separate machines; here the three brokers share two cores with the
  client. The summary gives the CPU the three brokers used per round together;
  ``extra_info["cpu_us_per_record"]`` splits it by role (the leader, each follower),
  so the cost per record of leading and of following shows.
- "failover to first ack": one round per benchmark: an idempotent acks=all producer
  writes steadily, the leader is killed with SIGKILL, and the time to the first
  acknowledgement of a record sent after the kill is measured
  (``zookeeper.session.timeout.ms`` 3000; the rest is the election and the client's
  metadata refresh, ``topic.metadata.refresh.interval.ms`` 1000).

N is 300k; under ``--benchmark-disable`` or ``PYLOGQ_NO_EXTENSIONS=1`` it is 5k and each
benchmark runs one round.
"""

from __future__ import annotations

import os
import statistics
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List, Optional, Tuple

import pytest
from summary import info

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests._zookeeper import ZooKeeperServer  # noqa: E402 - the test suite's ZooKeeper harness
from tests.cluster._processes import ProcessCluster  # noqa: E402

confluent_kafka = pytest.importorskip("confluent_kafka")
confluent_admin = pytest.importorskip("confluent_kafka.admin")

SESSION_MS = 3000
VALUE = b"v" * 100


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ProcessCluster]:
    base = tmp_path_factory.mktemp("replication")
    zookeeper = ZooKeeperServer(base / "zookeeper")
    zookeeper.start()
    c = ProcessCluster(base, zookeeper.connect_string, 3, {"min.insync.replicas": 2,
                                                           "zookeeper.session.timeout.ms": SESSION_MS})
    try:
        c.start_all()
        yield c
    finally:
        c.close()
        zookeeper.stop()


def _cpu(pid: int) -> float:
    total = 0
    for tid in os.listdir("/proc/%d/task" % pid):
        try:
            with open("/proc/%d/task/%s/schedstat" % (pid, tid)) as f:
                total += int(f.read().split()[0])
        except (OSError, ValueError, IndexError):
            continue
    return total / 1e9


def _cpus(c: ProcessCluster) -> Dict[int, float]:
    return {b: _cpu(p.proc.pid) for b, p in c.brokers.items() if p.proc is not None}


def _create(c: ProcessCluster, factor: int) -> str:
    name = "bench-%d-%s" % (factor, uuid.uuid4().hex[:8])
    admin = confluent_admin.AdminClient({"bootstrap.servers": c.bootstrap})
    admin.create_topics([confluent_admin.NewTopic(name, 1, factor)])[name].result(30)
    c.wait_until(lambda: (lambda s: s is not None and len(s[1]) == factor)(c.state(name, 0)), "the topic's ISR")
    return name


def _produce(c: ProcessCluster, topic: str, n: int, acks: str) -> None:
    producer = confluent_kafka.Producer({"bootstrap.servers": c.bootstrap, "acks": acks,
                                         "enable.idempotence": acks == "all", "linger.ms": 5,
                                         "batch.size": 1000000, "queue.buffering.max.messages": n + 1000,
                                         "queue.buffering.max.kbytes": 2097151})
    failed: List[str] = []

    def report(err, msg) -> None:  # type: ignore[no-untyped-def]
        if err is not None:
            failed.append(str(err))

    for start in range(0, n, 10000):
        producer.produce_batch(topic, [{"value": VALUE} for _ in range(min(10000, n - start))], on_delivery=report)
        producer.poll(0)
    assert producer.flush(120) == 0 and not failed, failed[:3]


def _run(benchmark: Any, c: ProcessCluster, factor: int, acks: str, peer: bool) -> None:
    quick = benchmark.disabled or os.environ.get("PYLOGQ_NO_EXTENSIONS") == "1"
    rounds, n = (1, 5000) if quick else (5, 300000)
    per_round: List[Dict[int, float]] = []
    topics: List[str] = []
    leaders: List[int] = []

    def setup() -> Any:
        topics.append(_create(c, factor))
        leaders.append(c.state(topics[-1], 0)[0])  # type: ignore[index]
        per_round.append(_cpus(c))
        return (), {}

    def round_() -> None:
        _produce(c, topics[-1], n, acks)
        after = _cpus(c)
        per_round[-1] = {b: after[b] - per_round[-1][b] for b in after}

    info(benchmark, "replicated produce 100B", n, "records", peer=peer,
         target="replication factor 3 acks=all vs 1 acks=1 (LinkedIn: 51% on separate machines)")
    benchmark.pedantic(round_, setup=setup, rounds=rounds, iterations=1)
    benchmark.extra_info["broker_cpu_seconds"] = statistics.median(sum(r.values()) for r in per_round)
    # By role, not by broker: each round's fresh topic may have another leader. The
    # others are the followers with replication factor 3, idle brokers with 1.
    leader_cpu = [r[leader] for r, leader in zip(per_round, leaders)]
    other_cpu = [statistics.mean(s for b, s in r.items() if b != leader) for r, leader in zip(per_round, leaders)]
    benchmark.extra_info["cpu_us_per_record"] = {
        "leader": round(statistics.median(leader_cpu) / n * 1e6, 3),
        ("each follower" if factor > 1 else "each other broker"): round(statistics.median(other_cpu) / n * 1e6, 3)}
    benchmark.extra_info["leaders"] = leaders


def test_replication_factor_3_acks_all(benchmark: Any, cluster: ProcessCluster) -> None:
    _run(benchmark, cluster, 3, "all", peer=False)


def test_replication_factor_1_acks_1(benchmark: Any, cluster: ProcessCluster) -> None:
    _run(benchmark, cluster, 1, "1", peer=True)


def test_failover_to_first_ack(benchmark: Any, cluster: ProcessCluster) -> None:
    """Kill -9 the leader under steady acks=all writes; the time to the first acknowledgement
    of a record sent after the kill."""
    topic = _create(cluster, 3)
    acks: List[Tuple[float, float]] = []  # (sent, acknowledged)
    stop = threading.Event()
    producer = confluent_kafka.Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all",
                                         "enable.idempotence": True, "linger.ms": 5,
                                         "topic.metadata.refresh.interval.ms": 1000})

    def reporter(sent: float) -> Callable[[Any, Any], None]:
        def report(err, msg) -> None:  # type: ignore[no-untyped-def]
            if err is None:
                acks.append((sent, time.monotonic()))
        return report

    def run() -> None:
        while not stop.is_set():
            # Timed from the send: an answer already on its way when the leader dies
            # arrives after the kill but says nothing about the failover.
            producer.produce(topic, value=VALUE, on_delivery=reporter(time.monotonic()))
            producer.poll(0)
            time.sleep(0.002)
        producer.flush(60)

    writer = threading.Thread(target=run)
    writer.start()
    killed: Dict[str, Any] = {}
    try:
        cluster.wait_until(lambda: len(acks) > 200, "steady writes")

        def kill_and_wait() -> None:
            leader = cluster.state(topic, 0)[0]  # type: ignore[index]
            killed["broker"] = leader
            t0 = time.monotonic()
            cluster.kill(leader)
            cluster.wait_until(lambda: any(sent > t0 for sent, _ in acks[-20:]),
                               "the first acknowledgement of a record sent after the kill", timeout=60)
            killed["seconds"] = min(acked for sent, acked in acks if sent > t0) - t0

        info(benchmark, "failover to first ack", 1, "failovers",
             target="< 2 x zookeeper.session.timeout.ms (%d ms)" % SESSION_MS)
        benchmark.pedantic(kill_and_wait, rounds=1, iterations=1)
        benchmark.extra_info["kill_to_first_ack_s"] = round(killed["seconds"], 3)
        benchmark.extra_info["session_timeout_ms"] = SESSION_MS
    finally:
        stop.set()
        writer.join(120)
        if "broker" in killed:
            cluster.start(killed["broker"])
            cluster.wait_until(lambda: cluster.full_isr(topic, 1), "the ISR whole again")
    assert killed["seconds"] < 2 * SESSION_MS / 1000.0
