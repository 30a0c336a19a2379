"""What replication costs and how fast it fails over: three ``pylogq-broker`` processes on this machine.

Groups, 100-byte values, confluent-kafka (librdkafka) on loopback, real ZooKeeper:
- "replicated produce 100B": N records handed to ``produce_batch()`` and flushed, into
  a fresh one-partition topic per round, with the same producer settings but
  ``acks``: replication factor 3 with ``acks=all`` (idempotent, ``min.insync.replicas=2``)
  against the peer row, replication factor 1 with ``acks=1``. LinkedIn measured 51%
  for Kafka on separate machines; here the three brokers share two cores with the
  client. Every round starts from the same state, outside the timed region: the
  previous round's topic deleted (its logs gone from every broker, so the brokers' page
  cache is recycled rather than grown round after round, and no follower still fetches
  it), the new topic created, and the round's producer sending one record with the
  round's ``acks`` and flushing it, so that the topic is served by every replica (a
  follower whose first fetch reached the leader before the leader knew the topic backs
  off ``replica.fetch.backoff.ms``) and the producer is connected and has its producer
  id. One untimed round first warms the brokers the same way for both cases. The summary
  gives the CPU the three brokers used per round together;
  ``extra_info["cpu_us_per_record"]`` splits it by role (the leader, each follower), per
  process and for its busiest thread: the leader's event loop (the produce requests and
  the followers' fetches) and a follower's replica fetcher.
- "failover to first ack": one round per benchmark: an idempotent acks=all producer
  writes steadily, the leader is taken away, and the time to the first
  acknowledgement of a record sent after that is measured
  (``zookeeper.session.timeout.ms`` 3000; the rest is the election and the client's
  metadata refresh, ``topic.metadata.refresh.interval.ms`` 1000, for every row with
  ``socket.timeout.ms`` 1000: librdkafka's idempotent producer sends nothing to a new
  leader until its requests to the old one are answered or timed out, and a frozen
  leader answers nothing, so with the default 60000 the SIGSTOP row timed that wait,
  not the failover). Three rows: the
  leader killed with SIGKILL; the leader frozen with SIGSTOP (it keeps its sockets and
  its ZooKeeper session until the session expires, and answers nothing; it gets SIGCONT
  once a new leader has acknowledged, and rejoins as a follower); and the reference row
  (the ratio's), the leader stopped with SIGTERM (a controlled shutdown, which hands its
  leaderships over before it exits): the ratio is what an abrupt failure costs over a
  planned one. Target for SIGKILL and SIGSTOP: under twice the session timeout,
  asserted only when timing is on and the run is not quick (``summary.asserting``).
  Every run checks the outcome: a record sent after the leader went is acknowledged
  (with another leader in ZooKeeper after SIGKILL and SIGSTOP), a SIGTERM exits 0, and
  the ISR is whole again once the broker is back (started again, or thawed).

N is 300k with 5 rounds after one warm-up round; at the smoke sizes (``--benchmark-disable``,
``--quick`` or ``PYLOGQ_NO_EXTENSIONS=1``: ``summary.smoke``) it is 5k and each benchmark runs
one round, without the warm-up round.
"""

from __future__ import annotations

import os
import statistics
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List, Tuple

import pytest
from summary import asserting, info, smoke

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.cluster._processes import ProcessCluster, cluster_on_own_zookeeper  # noqa: E402 - the suite's harness

confluent_kafka = pytest.importorskip("confluent_kafka")
confluent_admin = pytest.importorskip("confluent_kafka.admin")

SESSION_MS = 3000
VALUE = b"v" * 100


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ProcessCluster]:
    with cluster_on_own_zookeeper(tmp_path_factory.mktemp("replication"), 3, {
            "min.insync.replicas": 2, "zookeeper.session.timeout.ms": SESSION_MS}) as c:
        yield c


def _threads_cpu(pid: int) -> Dict[int, float]:
    """CPU seconds of each live thread of ``pid`` (its scheduler statistics, in ns)."""
    out: Dict[int, float] = {}
    for tid in os.listdir("/proc/%d/task" % pid):
        try:
            with open("/proc/%d/task/%s/schedstat" % (pid, tid)) as f:
                out[int(tid)] = int(f.read().split()[0]) / 1e9
        except (OSError, ValueError, IndexError):
            continue
    return out


def _cpus(c: ProcessCluster) -> Dict[int, Dict[int, float]]:
    return {b: _threads_cpu(p.proc.pid) for b, p in c.brokers.items() if p.proc is not None}


def _used(before: Dict[int, Dict[int, float]], after: Dict[int, Dict[int, float]]) -> Dict[int, Tuple[float, float]]:
    """Each broker's CPU seconds between two samples: (the process's, its busiest thread's). A thread
    started meanwhile counts from zero; none ends during a round (fetchers stop at the deletes)."""
    out = {}
    for b, threads in after.items():
        used = [s - before.get(b, {}).get(tid, 0.0) for tid, s in threads.items()]
        out[b] = (sum(used), max(used, default=0.0))
    return out


def _create(c: ProcessCluster, factor: int) -> str:
    name = "bench-%d-%s" % (factor, uuid.uuid4().hex[:8])
    admin = confluent_admin.AdminClient({"bootstrap.servers": c.bootstrap})
    admin.create_topics([confluent_admin.NewTopic(name, 1, factor)])[name].result(30)
    c.wait_until(lambda: (lambda s: s is not None and len(s[1]) == factor)(c.state(name, 0)), "the topic's ISR")
    return name


def _delete(c: ProcessCluster, name: str) -> None:
    """Delete a topic and wait until no broker holds its logs (renamed for deletion or not)."""
    admin = confluent_admin.AdminClient({"bootstrap.servers": c.bootstrap})
    admin.delete_topics([name])[name].result(30)

    def gone() -> bool:
        if c.zk.topic_exists(name) or c.zk.is_marked_for_deletion(name):
            return False
        return not any(entry.startswith(name + "-") for b in c.brokers for entry in os.listdir(c.data_dir(b)))

    c.wait_until(gone, "the deletion of %s" % name)


def _producer(c: ProcessCluster, n: int, acks: str) -> Any:
    return confluent_kafka.Producer({"bootstrap.servers": c.bootstrap, "acks": acks,
                                     "enable.idempotence": acks == "all", "linger.ms": 5,
                                     "batch.size": 1000000, "queue.buffering.max.messages": n + 1000,
                                     "queue.buffering.max.kbytes": 2097151})


def _produce(producer: Any, topic: str, n: int) -> None:
    failed: List[str] = []

    def report(err, msg) -> None:  # type: ignore[no-untyped-def]
        if err is not None:
            failed.append(str(err))

    for start in range(0, n, 10000):
        producer.produce_batch(topic, [{"value": VALUE} for _ in range(min(10000, n - start))], on_delivery=report)
        producer.poll(0)
    assert producer.flush(120) == 0 and not failed, failed[:3]


def _run(benchmark: Any, request: Any, c: ProcessCluster, factor: int, acks: str, peer: bool) -> None:
    rounds, warmup, n = (1, 0, 5000) if smoke(request.config) else (5, 1, 300000)
    samples: List[Dict[int, Dict[int, float]]] = []
    per_round: List[Dict[int, Tuple[float, float]]] = []
    leaders: List[int] = []

    def setup() -> Any:
        topic = _create(c, factor)
        producer = [_producer(c, n, acks)]  # the teardown lets it go before the topic does
        _produce(producer[0], topic, 1)  # the topic served by every replica, the producer connected
        leaders.append(c.state(topic, 0)[0])  # type: ignore[index]
        samples.append(_cpus(c))
        return (producer, topic), {}

    def round_(producer: List[Any], topic: str) -> None:
        _produce(producer[0], topic, n)
        per_round.append(_used(samples[-1], _cpus(c)))

    def teardown(producer: List[Any], topic: str) -> None:
        producer.clear()
        _delete(c, topic)

    info(benchmark, "replicated produce 100B", n, "records", peer=peer,
         target="replication factor 3 acks=all vs 1 acks=1 (LinkedIn: 51% on separate machines)")
    benchmark.pedantic(round_, setup=setup, teardown=teardown, rounds=rounds, warmup_rounds=warmup, iterations=1)
    # The warm-up round's figures are not the benchmark's.
    per_round, leaders = per_round[-rounds:], leaders[-rounds:]
    benchmark.extra_info["broker_cpu_seconds"] = statistics.median(sum(t for t, _ in r.values()) for r in per_round)
    # By role, not by broker: each round's fresh topic may have another leader. The
    # others are the followers with replication factor 3, idle brokers with 1.
    others = "each follower" if factor > 1 else "each other broker"

    def us(seconds: List[float]) -> float:
        return round(statistics.median(seconds) / n * 1e6, 3)

    leader_cpu = [r[leader] for r, leader in zip(per_round, leaders)]
    other_cpu = [[s for b, s in r.items() if b != leader] for r, leader in zip(per_round, leaders)]
    benchmark.extra_info["cpu_us_per_record"] = {
        "leader": us([t for t, _ in leader_cpu]),
        "leader's busiest thread": us([t for _, t in leader_cpu]),
        others: us([statistics.mean(t for t, _ in o) for o in other_cpu]),
        others + "'s busiest thread": us([statistics.mean(t for _, t in o) for o in other_cpu])}
    benchmark.extra_info["leaders"] = leaders


def test_replication_factor_3_acks_all(benchmark: Any, request: Any, cluster: ProcessCluster) -> None:
    _run(benchmark, request, cluster, 3, "all", peer=False)


def test_replication_factor_1_acks_1(benchmark: Any, request: Any, cluster: ProcessCluster) -> None:
    _run(benchmark, request, cluster, 1, "1", peer=True)


@pytest.mark.parametrize("how", ["kill", "freeze", "controlled"])
def test_failover_to_first_ack(benchmark: Any, request: Any, cluster: ProcessCluster, how: str) -> None:
    """Take the leader away under steady acks=all writes: SIGKILL, SIGSTOP (held until a new
    leader has acknowledged, then SIGCONT), or SIGTERM (the reference); the time to the first
    acknowledgement of a record sent after the signal."""
    topic = _create(cluster, 3)
    acks: List[Tuple[float, float]] = []  # (sent, acknowledged)
    stop = threading.Event()
    # socket.timeout.ms 1000 instead of 60000: the client's wait for an answer. A frozen leader
    # answers nothing, and the idempotent producer sends nothing to the new leader until its
    # requests to the old one are answered or timed out (the same for every row).
    producer = confluent_kafka.Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all",
                                         "enable.idempotence": True, "linger.ms": 5,
                                         "topic.metadata.refresh.interval.ms": 1000,
                                         "socket.timeout.ms": 1000})

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
            time.sleep(0.002)  # the writer's pace between records, not a wait for anything
        producer.flush(60)

    writer = threading.Thread(target=run)
    writer.start()
    killed: Dict[str, Any] = {}
    stopping: List[threading.Thread] = []
    try:
        cluster.wait_until(lambda: len(acks) > 200, "steady writes")

        def kill_and_wait() -> None:
            leader = cluster.state(topic, 0)[0]  # type: ignore[index]
            killed["broker"] = leader
            t0 = time.monotonic()
            if how == "kill":
                cluster.kill(leader)
            elif how == "freeze":
                cluster.freeze(leader)  # thawed below, once a new leader has acknowledged
            else:  # SIGTERM; the controlled shutdown runs on while the acknowledgements are awaited
                stopper = threading.Thread(target=lambda: killed.update(status=cluster.stop(leader)))
                stopper.start()
                stopping.append(stopper)
            cluster.wait_until(lambda: any(sent > t0 for sent, _ in acks[-20:]),
                               "the first acknowledgement of a record sent after the %s" % how, timeout=60)
            killed["seconds"] = min(acked for sent, acked in acks if sent > t0) - t0

        info(benchmark, "failover to first ack", 1, "failovers", peer=how == "controlled",
             target="SIGKILL, SIGSTOP: < 2 x zookeeper.session.timeout.ms (%d ms)" % SESSION_MS)
        benchmark.pedantic(kill_and_wait, rounds=1, iterations=1)
        killed["leader_after"] = cluster.state(topic, 0)[0]  # type: ignore[index]
        if how == "freeze":
            cluster.thaw(killed["broker"])  # SIGCONT: a new leader has acknowledged
        benchmark.extra_info["leader_gone_to_first_ack_s"] = round(killed["seconds"], 3)
        benchmark.extra_info["session_timeout_ms"] = SESSION_MS
    finally:
        if how == "freeze" and "broker" in killed:
            cluster.thaw(killed["broker"])  # first (harmless if thawed above): the writer's flush waits on it
        stop.set()
        writer.join(120)
        for stopper in stopping:
            stopper.join(120)
        if "broker" in killed:
            if how != "freeze":
                cluster.start(killed["broker"])
            cluster.wait_until(lambda: cluster.full_isr(topic, 1), "the ISR whole again")
    assert not writer.is_alive() and killed["seconds"] > 0
    if how == "controlled":
        assert killed["status"] == 0, "the leader's controlled shutdown exited with %s" % killed["status"]
    else:
        assert killed["leader_after"] not in (killed["broker"], -1), (
            "the first acknowledgement after the %s of leader %d came with leader %s in ZooKeeper"
            % (how, killed["broker"], killed["leader_after"]))
    if how == "freeze":  # it rejoined awake: the same process, not a restart
        assert cluster.brokers[killed["broker"]].running, "broker %d exited after SIGCONT:\n%s" % (
            killed["broker"], cluster.brokers[killed["broker"]].log_tail())
    if how != "controlled" and asserting(request.config):  # a speed target: timing on, not quick
        assert killed["seconds"] < 2 * SESSION_MS / 1000.0, (
            "failover after %s: %.2f s from the signal to the first acknowledgement, target < %.1f s "
            "(2 x zookeeper.session.timeout.ms)" % ("SIGKILL" if how == "kill" else "SIGSTOP", killed["seconds"],
                                                   2 * SESSION_MS / 1000.0))
