"""A leader cut off from its followers and ZooKeeper (not killed) by a fault-injecting proxy.

Every broker advertises a proxy in front of its listener, and reaches ZooKeeper through a
proxy of its own, so one broker can be cut off as a network partition would (bytes stop,
nothing is reset). The cut-off leader keeps running: it stops acknowledging acks=all
writes (its followers cannot fetch, and it cannot shrink its ISR without ZooKeeper),
while acks=1 writes sent to it directly still land in its log alone. The others elect a
new leader from the ISR once its session expires, and take writes. When the partition
heals the old leader learns it follows, truncates its log to the new leader's by leader
epoch (its acks=1 writes go), catches up and rejoins the ISR: nothing acknowledged with
acks=all is lost and every replica holds the same bytes.
"""

from __future__ import annotations

from pathlib import Path
from typing import Dict, List, Tuple

import pytest

from pylogq import errors, records

from .._proxy import TcpProxy
from .._ports import free_port
from ..server.test_server import Wire
from ._processes import ProcessCluster, replicas_identical

#: Replication across broker processes and ZooKeeper: the compiled pass only (tests/conftest.py).
pytestmark = pytest.mark.compiled_pass

confluent_kafka = pytest.importorskip("confluent_kafka")
confluent_admin = pytest.importorskip("confluent_kafka.admin")

TOPIC = "partitioned"
SESSION_MS = 3000
PRODUCE = 0


def _produce_acked(bootstrap: str, values: List[bytes]) -> List[Tuple[int, bytes]]:
    """Send with an idempotent acks=all producer; -> (offset, value) of each acknowledged one."""
    acked: List[Tuple[int, bytes]] = []
    failed: List[str] = []

    def report(err, msg) -> None:  # type: ignore[no-untyped-def]
        if err is None:
            acked.append((msg.offset(), msg.value()))
        else:
            failed.append(str(err))

    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all",
                                         "topic.metadata.refresh.interval.ms": 1000, "message.timeout.ms": 120000})
    for v in values:
        producer.produce(TOPIC, value=v, partition=0, on_delivery=report)
    assert producer.flush(150) == 0
    assert not failed, failed
    return acked


def _direct_produce(port: int, value: bytes, acks: int) -> Dict[str, int]:
    """A Produce sent straight to a broker's own listener (not its advertised proxy)."""
    batch = bytes(records.build_batch([value]))
    with Wire(("127.0.0.1", port), timeout=30) as wire:
        answer = wire.request(PRODUCE, 7, {"transactional_id": None, "acks": acks, "timeout_ms": 2000, "topic_data": [
            {"name": TOPIC, "partition_data": [{"index": 0, "records": batch}]}]})
    p = answer["responses"][0]["partition_responses"][0]
    return {"error_code": p["error_code"], "base_offset": p["base_offset"]}


@pytest.mark.slow
def test_a_partitioned_leader_stops_acknowledging_and_is_truncated_when_it_heals(
        tmp_path: Path, zookeeper_connect: str) -> None:
    zk_host, _, rest = zookeeper_connect.partition(":")
    zk_port, _, chroot = rest.partition("/")
    listen = {b: free_port() for b in range(3)}
    broker_proxies = {b: TcpProxy(("127.0.0.1", listen[b])) for b in range(3)}
    zk_proxies = {b: TcpProxy((zk_host, int(zk_port))) for b in range(3)}
    per_broker = {b: {"listeners": "PLAINTEXT://127.0.0.1:%d" % listen[b],
                      "advertised.listeners": "PLAINTEXT://127.0.0.1:%d" % broker_proxies[b].port,
                      "zookeeper.connect": "%s/%s" % (zk_proxies[b].address, chroot)} for b in range(3)}
    cluster = ProcessCluster(tmp_path, zookeeper_connect, 3,
                             {"min.insync.replicas": 2, "zookeeper.session.timeout.ms": SESSION_MS,
                              "replica.lag.time.max.ms": 6000},
                             ports=listen, broker_config=per_broker)
    bootstrap = ",".join(p.address for p in broker_proxies.values())
    try:
        cluster.start_all()
        admin = confluent_admin.AdminClient({"bootstrap.servers": bootstrap})
        admin.create_topics([confluent_admin.NewTopic(TOPIC, 1, 3)])[TOPIC].result(30)
        cluster.wait_until(lambda: cluster.full_isr(TOPIC, 1), "the full ISR")
        before = _produce_acked(bootstrap, [b"before-%d" % i for i in range(50)])
        assert [o for o, _ in before] == list(range(50))
        leader, isr, epoch = cluster.state(TOPIC, 0)  # type: ignore[misc]

        broker_proxies[leader].cut()
        zk_proxies[leader].cut()
        # acks=1 lands in the cut-off leader's log alone; acks=all is never acknowledged.
        alone = _direct_produce(listen[leader], b"alone", 1)
        assert alone == {"error_code": 0, "base_offset": 50}
        unreplicated = _direct_produce(listen[leader], b"unreplicated", -1)
        assert unreplicated["error_code"] in (errors.RequestTimedOutError.code,
                                              errors.NotEnoughReplicasAfterAppendError.code), unreplicated

        # The others elect a new leader from the ISR once the session expires.
        new_leader, new_isr, new_epoch = cluster.wait_until(
            lambda: (lambda s: s if s is not None and s[0] not in (leader, -1) else None)(cluster.state(TOPIC, 0)),
            "a new leader", timeout=60)
        assert new_epoch > epoch and leader not in new_isr
        during = _produce_acked(bootstrap, [b"during-%d" % i for i in range(50)])

        broker_proxies[leader].heal()
        zk_proxies[leader].heal()
        cluster.wait_until(lambda: cluster.full_isr(TOPIC, 1), "the old leader back in the ISR", timeout=90)
        after = _produce_acked(bootstrap, [b"after-%d" % i for i in range(20)])

        statuses = cluster.stop_all()
        assert all(s == 0 for s in statuses.values()), (statuses, cluster.logs())
        replicas_identical(cluster, TOPIC, 1)
        from pylogq.storage.log import Log

        with Log.open(str(cluster.data_dir(new_leader) / ("%s-0" % TOPIC))) as log:
            data = log.read(0, 1 << 30).read()
        stored = {r.offset: r.value for info in records.iter_batches(data)
                  for r in records.RecordBatch(data, info.position)}
        for offset, value in before + during + after:
            assert stored.get(offset) == value, "acknowledged %r at %d, stored %r" % (value, offset,
                                                                                       stored.get(offset))
        assert b"alone" not in stored.values() and b"unreplicated" not in stored.values()
        log_text = cluster.brokers[leader].log_path.read_text()
        assert "truncated to offset 50" in log_text, cluster.brokers[leader].log_tail()
    finally:
        try:
            cluster.close()  # raises on an unclean shutdown: the proxies are closed all the same
        finally:
            for p in list(broker_proxies.values()) + list(zk_proxies.values()):
                p.close()
