"""pylogq.Cluster: replication in one process, with the in-memory metadata store.

Real brokers with real logs on disk, the in-memory store's ZooKeeper semantics (a
killed broker's session expires after its timeout), real controller, fetchers and
delayed produces. Failures are injected by stopping brokers abruptly.

The tests of the ``cluster`` fixture, and those building their own cluster whose subject
crosses brokers, run twice (the ``network`` fixture): with the brokers calling each other
directly, and over the Kafka protocol on loopback (the TCP inter-broker client and the
replication handlers), the cut links and frozen brokers applying alike. The chaos drill
runs in process only: the process-cluster drill (test_chaos.py) covers it over TCP.
"""

from __future__ import annotations

import logging
import os
import random
import threading
import time
from typing import Any, Dict, List, Optional, Tuple

import pytest

import pylogq
from pylogq import errors, records
from pylogq.cluster.broker.broker import Broker
from pylogq.cluster.broker.local_cluster import Cluster
from pylogq.cluster.contract import LeaderAndIsrPartition, LeaderAndIsrRequest, StopReplicaRequest
from pylogq.cluster.zk.client import KafkaZkClient

SESSION_MS = 600
FAST = {
    "zookeeper.session.timeout.ms": SESSION_MS,
    "replica.lag.time.max.ms": 2000,
    "replica.fetch.wait.max.ms": 100,
    "replica.fetch.backoff.ms": 50,
}
TIMEOUT_S = 20.0


@pytest.fixture(params=[False, True], ids=["in-process", "network"])
def network(request) -> bool:
    """Whether the brokers reach each other over the Kafka protocol on loopback (TCP clients, the
    inter-broker handlers) rather than by calling each other; the faults apply alike."""
    return bool(request.param)


@pytest.fixture
def cluster(tmp_path, network):
    c = Cluster(3, str(tmp_path), network=network, **FAST)
    yield c
    c.close()


def batch(values: List[bytes], pid: int = -1, epoch: int = -1, seq: int = -1) -> bytes:
    return bytes(records.build_batch(values, producer_id=pid, producer_epoch=epoch, base_sequence=seq))


def read_all(broker: Broker, topic: str, partition: int, upto: Optional[int] = None) -> List[Tuple[int, bytes]]:
    """(offset, value) of the partition's records on ``broker``'s replica below ``upto`` (its HW)."""
    part = broker.hosted((topic, partition))
    assert part is not None
    end = part.high_watermark if upto is None else upto
    out: List[Tuple[int, bytes]] = []
    offset = part.log_start_offset
    while offset < end:
        data = part.log.read(offset, 1 << 20, max_offset=end).read()
        if not data:
            break
        for info in records.iter_batches(data):
            for r in records.RecordBatch(data, info.position):
                if offset <= r.offset < end:
                    out.append((r.offset, r.value))
        offset = out[-1][0] + 1 if out else end
    return out


def leader_broker(c: Cluster, topic: str, partition: int) -> Broker:
    c.wait_until(lambda: c.running(c.leader(topic, partition)) is not None, TIMEOUT_S, "a live leader")
    return c.broker(c.leader(topic, partition))


def in_sync(c: Cluster, topic: str, partition: int, size: int) -> bool:
    leader = c.running(c.leader(topic, partition))
    part = leader.hosted((topic, partition)) if leader is not None else None
    return part is not None and part.is_leader and len(part.isr) == size


def test_a_topic_gets_leaders_and_full_isrs_on_every_replica(cluster):
    cluster.create_topic("t", 4, 3)
    for p in range(4):
        leader = cluster.leader("t", p)
        assert leader in (0, 1, 2)
        for b in cluster.brokers:
            part = b.hosted(("t", p))
            assert part is not None, "broker %d hosts no replica of t-%d" % (b.broker_id, p)
            assert part.leader_id == leader and sorted(part.isr) == [0, 1, 2]
            assert part.is_leader == (b.broker_id == leader)
    # The preferred leaders are spread over the brokers, one replica per broker per partition.
    leaders = [cluster.leader("t", p) for p in range(4)]
    assert len(set(leaders)) == 3
    for b in cluster.brokers:
        described = b.describe_topic("t")
        assert [(i.partition, i.leader, sorted(i.replicas)) for i in described.partitions] == \
            [(p, leaders[p], [0, 1, 2]) for p in range(4)]


def test_acks_all_waits_for_every_in_sync_replica(cluster):
    cluster.create_topic("t", 1, 3)
    leader = leader_broker(cluster, "t", 0)
    for i in range(20):
        r = leader.produce("t", 0, batch([b"v%d" % i]), acks=-1)
        assert r.error_code == 0 and r.base_offset == i
        # Acknowledged means committed: the high watermark has passed it already.
        assert leader.hosted(("t", 0)).high_watermark >= i + 1
    cluster.wait_until(lambda: all(b.hosted(("t", 0)).high_watermark == 20 for b in cluster.brokers), TIMEOUT_S,
                       "every replica's high watermark at 20")
    expected = [(i, b"v%d" % i) for i in range(20)]
    for b in cluster.brokers:
        assert read_all(b, "t", 0) == expected
    # Followers carry the leader's epoch stamps and epoch cache.
    for b in cluster.brokers:
        assert b.hosted(("t", 0)).log.latest_epoch == 0


def test_a_follower_refuses_producers_and_consumers(cluster):
    cluster.create_topic("t", 1, 3)
    leader = leader_broker(cluster, "t", 0)
    follower = next(b for b in cluster.brokers if b is not leader)
    with pytest.raises(errors.NotLeaderOrFollowerError):
        follower.produce("t", 0, batch([b"x"]), acks=1)
    results = follower.fetch([("t", 0, 0, 1 << 20)], max_wait_ms=0)
    assert results[("t", 0)].error_code == errors.NotLeaderOrFollowerError.code


def test_killing_the_leader_elects_an_isr_member_and_loses_nothing_acknowledged(cluster):
    cluster.create_topic("t", 1, 3)
    old = leader_broker(cluster, "t", 0)
    acked = [old.produce("t", 0, batch([b"a%d" % i]), acks=-1).base_offset for i in range(50)]
    assert acked == list(range(50))
    old_epoch = old.hosted(("t", 0)).leader_epoch
    cluster.stop_broker(old.broker_id, abrupt=True)
    new = leader_broker(cluster, "t", 0)
    assert new.broker_id != old.broker_id
    part = new.hosted(("t", 0))
    assert part.leader_epoch > old_epoch
    # Everything acknowledged is in the new leader's log at once. Its high watermark is the one it last heard
    # as a follower, a fetch behind the old leader's: it reaches 50 when the other ISR follower fetches from it.
    assert part.log_end_offset >= 50
    cluster.wait_until(lambda: part.high_watermark >= 50, TIMEOUT_S, "the new leader's high watermark at 50")
    assert read_all(new, "t", 0)[:50] == [(i, b"a%d" % i) for i in range(50)]
    # The shrunk ISR is in every live broker's metadata.
    cluster.wait_until(lambda: all(sorted(b.describe_topic("t").partitions[0].isr) == sorted(
        x.broker_id for x in cluster.brokers) for b in cluster.brokers), TIMEOUT_S, "the shrunk ISR")
    r = new.produce("t", 0, batch([b"after"]), acks=-1)
    assert r.base_offset == 50
    # The old leader comes back as a follower, catches up and rejoins the ISR.
    cluster.start_broker(old.broker_id)
    cluster.wait_until(lambda: in_sync(cluster, "t", 0, 3), TIMEOUT_S, "the restarted broker back in the ISR")
    back = cluster.broker(old.broker_id)
    cluster.wait_until(lambda: back.hosted(("t", 0)).high_watermark == 51, TIMEOUT_S, "its high watermark")
    assert read_all(back, "t", 0) == read_all(cluster.broker(cluster.leader("t", 0)), "t", 0)


def test_min_insync_replicas_refuses_acks_all_before_the_append(tmp_path, network):
    with Cluster(3, str(tmp_path), network=network, **dict(FAST, **{"min.insync.replicas": 2})) as c:
        c.create_topic("t", 1, 3)
        leader = leader_broker(c, "t", 0)
        others = [b.broker_id for b in c.brokers if b is not leader]
        for b in others:
            c.stop_broker(b, abrupt=True)
        c.wait_until(lambda: in_sync(c, "t", 0, 1), TIMEOUT_S, "the ISR to shrink to the leader")
        end = leader.hosted(("t", 0)).log_end_offset
        with pytest.raises(errors.NotEnoughReplicasError):
            leader.produce("t", 0, batch([b"x"]), acks=-1)
        assert leader.hosted(("t", 0)).log_end_offset == end  # nothing was written
        assert leader.produce("t", 0, batch([b"y"]), acks=1).error_code == 0  # acks=1 still works


def test_an_acks_all_produce_in_flight_when_the_isr_shrinks_answers_not_enough_replicas_after_append(tmp_path):
    with Cluster(2, str(tmp_path), **dict(FAST, **{"min.insync.replicas": 2})) as c:
        c.create_topic("t", 1, 2)
        leader = leader_broker(c, "t", 0)
        follower = next(b for b in c.brokers if b is not leader)
        # The follower cannot fetch, its session stays: the ISR shrinks by lag.
        c.cut(leader.broker_id, follower.broker_id)
        op = leader.produce_async("t", 0, batch([b"x"]), acks=-1, timeout_ms=20000)
        assert op.wait(TIMEOUT_S)
        assert op.answer().error_code == errors.NotEnoughReplicasAfterAppendError.code


def test_a_produce_that_cannot_replicate_in_time_times_out(tmp_path, network):
    with Cluster(2, str(tmp_path), network=network, **dict(FAST, **{"replica.lag.time.max.ms": 60000})) as c:
        c.create_topic("t", 1, 2)
        leader = leader_broker(c, "t", 0)
        follower = next(b for b in c.brokers if b is not leader)
        c.cut(leader.broker_id, follower.broker_id)
        op = leader.produce_async("t", 0, batch([b"x"]), acks=-1, timeout_ms=300)
        assert op.wait(TIMEOUT_S)
        assert op.answer().error_code == errors.RequestTimedOutError.code


def test_controlled_shutdown_moves_leadership_first(cluster):
    cluster.create_topic("t", 3, 3)
    led = {p: cluster.leader("t", p) for p in range(3)}
    victim = led[0]
    cluster.stop_broker(victim, abrupt=False)
    # No session had to expire: the store had the new leaders when the broker stopped.
    zk = KafkaZkClient(cluster.zookeeper.connect())
    for p in range(3):
        state = zk.get_partition_state("t", p)
        assert state is not None and state.leader != victim and victim not in state.isr
    zk.store.close()
    cluster.wait_until(lambda: all(cluster.leader("t", p) not in (victim, -1) for p in range(3)), TIMEOUT_S,
                       "every broker's metadata to show the new leaders")
    cluster.start_broker(victim)
    cluster.wait_until(lambda: all(in_sync(cluster, "t", p, 3) for p in range(3)), TIMEOUT_S,
                       "the broker back in every ISR")


def test_uncommitted_records_of_a_dead_leader_are_truncated_by_leader_epoch(cluster):
    """The old leader wrote records its followers never got; a new leader wrote others at the
    same offsets. When the old leader comes back it must take the new leader's log."""
    cluster.create_topic("t", 1, 3)
    old = leader_broker(cluster, "t", 0)
    for i in range(10):
        old.produce("t", 0, batch([b"c%d" % i]), acks=-1)
    followers = [b for b in cluster.brokers if b is not old]
    for f in followers:  # the followers cannot fetch: what comes next stays on the leader
        cluster.cut(old.broker_id, f.broker_id)
    for i in range(5):
        assert old.produce("t", 0, batch([b"lost%d" % i]), acks=1).base_offset == 10 + i
    cluster.stop_broker(old.broker_id, abrupt=True)
    cluster.heal()
    new = leader_broker(cluster, "t", 0)
    # A fetch already on its way when the links were cut may have copied the first of them.
    kept = new.hosted(("t", 0)).log_end_offset - 10
    assert 0 <= kept < 5
    for i in range(7):
        assert new.produce("t", 0, batch([b"new%d" % i]), acks=-1).base_offset == 10 + kept + i
    cluster.start_broker(old.broker_id)
    cluster.wait_until(lambda: in_sync(cluster, "t", 0, 3), TIMEOUT_S, "the old leader back in the ISR")
    end = 17 + kept
    cluster.wait_until(lambda: all(b.hosted(("t", 0)).high_watermark == end for b in cluster.brokers), TIMEOUT_S,
                       "every high watermark at the end")
    expected = [(i, b"c%d" % i) for i in range(10)] + [(10 + i, b"lost%d" % i) for i in range(kept)] + \
        [(10 + kept + i, b"new%d" % i) for i in range(7)]
    for b in cluster.brokers:
        assert read_all(b, "t", 0) == expected, "broker %d diverged" % b.broker_id
    _assert_identical_below_hw(cluster, "t", 0)


def _assert_identical_below_hw(c: Cluster, topic: str, partition: int) -> None:
    """Every replica holds the same bytes below the high watermark (offsets and leader epochs
    included: the leaders' stamps are copied as they are)."""
    parts = [b.hosted((topic, partition)) for b in c.brokers]
    hw = min(p.high_watermark for p in parts)
    first = parts[0].log.read(parts[0].log_start_offset, 1 << 30, max_offset=hw).read()
    for p in parts[1:]:
        assert p.log.read(p.log_start_offset, 1 << 30, max_offset=hw).read() == first


def test_offline_partition_without_unclean_election_waits_for_its_isr(tmp_path, network):
    with Cluster(2, str(tmp_path), network=network, **FAST) as c:
        c.create_topic("t", 1, 2)
        leader = leader_broker(c, "t", 0)
        other = next(b for b in c.brokers if b is not leader).broker_id
        leader.produce("t", 0, batch([b"x"]), acks=-1)
        # The follower leaves the ISR (it stops), then the leader dies: no ISR member is alive.
        c.stop_broker(other, abrupt=False)
        c.wait_until(lambda: in_sync(c, "t", 0, 1), TIMEOUT_S, "the ISR to shrink")
        c.stop_broker(leader.broker_id, abrupt=True)
        c.start_broker(other)
        def offline() -> bool:
            state = c.broker(other).cluster.metadata.partition("t", 0)
            return state is not None and state.leader == -1

        c.wait_until(offline, TIMEOUT_S, "the partition to be offline")
        # The ISR member comes back: it leads again with everything it had.
        c.start_broker(leader.broker_id)
        c.wait_until(lambda: c.leader("t", 0) == leader.broker_id, TIMEOUT_S, "its election")
        assert read_all(c.broker(leader.broker_id), "t", 0) == [(0, b"x")]


def test_unclean_leader_election_picks_a_live_replica_when_enabled(tmp_path, network):
    """The out-of-sync replica leads with what it had. Kept: the records it had copied before it
    left the ISR. Gone: those acknowledged by the lost leader alone, which a consumer had read.
    New records continue from the new leader's log end; a consumer at the position the lost
    records took it to reads on from the new log only, and the old leader, back, truncates to it."""
    from pylogq.client.consumer import TopicPartition

    tp = TopicPartition("t", 0)

    def read(reader: "pylogq.Consumer", count: int) -> List[Tuple[int, bytes]]:
        got: List[Tuple[int, bytes]] = []
        deadline = time.monotonic() + TIMEOUT_S
        while len(got) < count and time.monotonic() < deadline:
            got += [(r.offset, r.value) for r in reader.poll(timeout_ms=100).get(tp, [])]
        return got

    def reader_at(position: Optional[int]) -> "pylogq.Consumer":
        # Bootstrapped from the brokers serving now: a broker started again serves on a new port.
        reader = pylogq.Consumer(bootstrap_servers=c.serve(), auto_offset_reset="earliest")
        reader.assign([tp])
        if position is not None:
            reader.seek(tp, position)
        return reader

    with Cluster(2, str(tmp_path), network=network, **FAST) as c:
        c.create_topic("t", 1, 2, config={"unclean.leader.election.enable": "true"})
        leader = leader_broker(c, "t", 0)
        lost_id = leader.broker_id
        other = next(b for b in c.brokers if b is not leader).broker_id
        kept = [(0, b"kept-0"), (1, b"kept-1")]
        lost = [(2, b"lost-0"), (3, b"lost-1"), (4, b"lost-2")]
        # acks=all with both replicas in the ISR: the follower has these.
        assert leader.produce("t", 0, batch([v for _, v in kept]), acks=-1).base_offset == 0
        c.stop_broker(other, abrupt=False)
        c.wait_until(lambda: in_sync(c, "t", 0, 1), TIMEOUT_S, "the ISR to shrink")
        # acks=all again, but the ISR is the leader alone: only it has these.
        assert leader.produce("t", 0, batch([v for _, v in lost]), acks=-1).base_offset == 2
        reader = reader_at(None)
        try:
            assert read(reader, 5) == kept + lost  # served: below the lost leader's high watermark
            position = reader.position(tp)
        finally:
            reader.close()
        assert position == 5

        c.stop_broker(lost_id, abrupt=True)
        c.start_broker(other)
        c.wait_until(lambda: c.leader("t", 0) == other and in_sync(c, "t", 0, 1), TIMEOUT_S, "the unclean election")
        new = c.broker(other).hosted(("t", 0))
        assert new is not None and new.is_leader
        assert new.log_end_offset == 2 and read_all(c.broker(other), "t", 0, upto=2) == kept
        after = [(2, b"after-0"), (3, b"after-1")]
        assert c.broker(other).produce("t", 0, batch([v for _, v in after]), acks=-1).base_offset == 2
        log = kept + after

        # Position 5 is past the new log's end (4): out of range, the reader starts again from
        # the earliest offset and reads the new log, none of the lost records.
        reader = reader_at(position)
        try:
            assert read(reader, 4) == log
        finally:
            reader.close()

        c.start_broker(lost_id)
        c.wait_until(lambda: in_sync(c, "t", 0, 2), TIMEOUT_S, "the old leader back in the ISR")
        c.wait_until(lambda: all(b.hosted(("t", 0)).high_watermark == 4 for b in c.brokers), TIMEOUT_S,
                     "every high watermark at the new log's end")
        for b in c.brokers:
            assert read_all(b, "t", 0) == log, "broker %d" % b.broker_id
        assert c.broker(lost_id).hosted(("t", 0)).log_end_offset == 4  # its lost records cut off
        _assert_identical_below_hw(c, "t", 0)
        reader = reader_at(0)
        try:
            assert read(reader, 4) == log
        finally:
            reader.close()


def test_topic_admin_across_the_cluster(cluster):
    cluster.create_topic("t", 2, 2, config={"retention.ms": "3600000"})
    with pytest.raises(errors.TopicAlreadyExistsError):
        cluster.brokers[1].create_topic("t", 1, 1)
    with pytest.raises(errors.InvalidReplicationFactorError):
        cluster.brokers[0].create_topic("wide", 1, 4)
    # More partitions, through another broker.
    cluster.brokers[2].create_partitions("t", 5)
    cluster.wait_for_topic("t")
    for b in cluster.brokers:
        assert b.partitions_for("t") == 5
    hosts = {p: [b.broker_id for b in cluster.brokers if b.hosted(("t", p)) is not None] for p in range(5)}
    assert all(len(v) == 2 for v in hosts.values())
    # A config change reaches every replica's log.
    cluster.brokers[1].alter_configs("t", {"retention.ms": "1000"}, incremental=True)
    cluster.wait_until(lambda: all(b.hosted(("t", p)).log.config.retention_ms == 1000
                                   for b in cluster.brokers for p in range(5) if b.hosted(("t", p)) is not None),
                       TIMEOUT_S, "the config change on every replica")
    assert cluster.brokers[0].describe_configs("t")["retention.ms"] == ("1000", False)
    # Deletion: every replica's log goes, then the topic; the name can be used again.
    dirs = [os.path.join(b.data_dir, "t-%d" % p) for b in cluster.brokers for p in range(5)
            if b.hosted(("t", p)) is not None]
    cluster.brokers[0].delete_topic("t")
    assert "t" not in cluster.brokers[0].list_topics()  # the broker that was asked: at once
    cluster.wait_until(lambda: all("t" not in b.list_topics() for b in cluster.brokers), TIMEOUT_S,
                       "every broker's metadata to drop the topic")
    cluster.wait_until(lambda: not any(os.path.exists(d) for d in dirs), TIMEOUT_S, "the logs to be deleted")
    cluster.create_topic("t", 1, 3)
    assert cluster.brokers[0].partitions_for("t") == 1


def test_a_new_controller_takes_over_when_the_controller_dies(cluster):
    cluster.create_topic("t", 3, 3)
    controller = cluster.controller()
    assert controller is not None
    cluster.stop_broker(controller.broker_id, abrupt=True)
    cluster.wait_until(lambda: cluster.controller() is not None, TIMEOUT_S, "a new controller")
    new = cluster.controller()
    assert new.broker_id != controller.broker_id
    # It elects leaders for what the old controller led.
    for p in range(3):
        leader_broker(cluster, "t", p)
    cluster.create_topic("u", 1, 2)
    assert leader_broker(cluster, "u", 0).broker_id != controller.broker_id


def test_idempotent_retries_after_a_failover_are_not_duplicated(cluster):
    cluster.create_topic("t", 1, 3)
    leader = leader_broker(cluster, "t", 0)
    pid, epoch = leader.init_producer_id()
    first = batch([b"once"], pid, epoch, 0)
    assert leader.produce("t", 0, first, acks=-1).base_offset == 0
    cluster.stop_broker(leader.broker_id, abrupt=True)
    new = leader_broker(cluster, "t", 0)
    retried = new.produce("t", 0, first, acks=-1)  # the producer never saw the ack: it retries
    assert retried.base_offset == 0 and retried.duplicate
    assert new.produce("t", 0, batch([b"next"], pid, epoch, 1), acks=-1).base_offset == 1
    assert [v for _, v in read_all(new, "t", 0)] == [b"once", b"next"]


@pytest.mark.slow
def test_chaos_drill_with_the_in_memory_store(tmp_path):
    """Kill a random broker (leaders and controllers included) and restart it, again and
    again, under acks=all idempotent writes to several partitions with min.insync.replicas=2.
    Every acknowledged record is read back exactly once, in order, at its offset."""
    cycles = int(os.environ.get("PYLOGQ_CHAOS_CYCLES", "10"))
    seed = int(os.environ.get("PYLOGQ_CHAOS_SEED", random.randrange(1 << 30)))
    try:
        _chaos_drill(tmp_path, cycles, random.Random(seed))
    except BaseException as exc:
        exc.add_note("chaos seed %d (replay: PYLOGQ_CHAOS_SEED=%d)" % (seed, seed))
        raise


def _chaos_drill(tmp_path: Any, cycles: int, rng: random.Random) -> None:
    partitions = 3
    with Cluster(3, str(tmp_path), **dict(FAST, **{"min.insync.replicas": 2})) as c:
        c.create_topic("chaos", partitions, 3)
        acked: Dict[int, List[Tuple[int, bytes]]] = {p: [] for p in range(partitions)}
        stop = threading.Event()
        failures: List[BaseException] = []
        pid_epoch: Dict[str, Tuple[int, int]] = {}

        def producer(p: int) -> None:
            seq = 0
            try:
                while not stop.is_set():
                    value = b"p%d-%d" % (p, seq)
                    offset = _produce_until_acked(c, "chaos", p, value, pid_epoch, seq, stop)
                    if offset is None:
                        return
                    acked[p].append((offset, value))
                    seq += 1
            except BaseException as exc:  # noqa: BLE001 - handed to the test thread
                failures.append(exc)

        read: Dict[int, List[Tuple[int, bytes]]] = {p: [] for p in range(partitions)}

        def reader() -> None:
            """A consumer alongside: what it reads must never be taken back by a failover."""
            position = {p: 0 for p in range(partitions)}
            try:
                while not stop.is_set():
                    for p in range(partitions):
                        broker = c.running(c.leader("chaos", p))
                        if broker is None:
                            continue
                        result = broker.fetch([("chaos", p, position[p], 1 << 20)], max_wait_ms=20)[("chaos", p)]
                        if result.error_code or result.records is None:
                            continue
                        data = result.records.read()
                        for info in records.iter_batches(data):
                            for r in records.RecordBatch(data, info.position):
                                if r.offset >= position[p]:
                                    read[p].append((r.offset, r.value))
                                    position[p] = r.offset + 1
            except BaseException as exc:  # noqa: BLE001 - handed to the test thread
                failures.append(exc)

        threads = [threading.Thread(target=producer, args=(p,)) for p in range(partitions)]
        threads.append(threading.Thread(target=reader))
        for p in range(partitions):
            pid_epoch["p%d" % p] = c.brokers[1].init_producer_id()
        for t in threads:
            t.start()
        try:
            for _ in range(cycles):
                victim = rng.randrange(3)
                before = sum(len(v) for v in acked.values())
                c.wait_until(lambda: sum(len(v) for v in acked.values()) >= before + 5 or failures, TIMEOUT_S,
                             "writes between kills")
                c.stop_broker(victim, abrupt=True)
                c.start_broker(victim)
                c.wait_until(lambda: all(in_sync(c, "chaos", p, 3) for p in range(partitions)) or failures,
                             TIMEOUT_S * 2, "every ISR whole again")
        finally:
            stop.set()
            for t in threads:
                t.join(TIMEOUT_S)
        assert not failures, failures[0]
        for p in range(partitions):
            c.wait_until(lambda: in_sync(c, "chaos", p, 3), TIMEOUT_S, "the ISR")
            leader = leader_broker(c, "chaos", p)
            hw = leader.hosted(("chaos", p)).high_watermark
            c.wait_until(lambda: all(b.hosted(("chaos", p)).high_watermark == hw for b in c.brokers), TIMEOUT_S,
                         "every replica at the leader's high watermark")
            log_records = read_all(leader, "chaos", p)
            assert log_records == sorted(acked[p]) == acked[p], "partition %d: acknowledged records differ" % p
            stored = dict(log_records)
            assert read[p] and all(stored.get(o) == v for o, v in read[p]), "partition %d: a read record was lost" % p
            _assert_identical_below_hw(c, "chaos", p)


def _produce_until_acked(c: Cluster, topic: str, p: int, value: bytes, pid_epoch: Dict[str, Tuple[int, int]],
                         seq: int, stop: threading.Event) -> Optional[int]:
    """Send one idempotent batch to the partition's leader until it is acknowledged, retrying on
    leadership changes as a client does; -> its offset (None when stopped before it was sent:
    once sent, it is retried until acknowledged, so the log holds no record left unacknowledged)."""
    pid, epoch = pid_epoch["p%d" % p]
    data = batch([value], pid, epoch, seq)
    deadline = time.monotonic() + 120
    sent = False
    while time.monotonic() < deadline and (sent or not stop.is_set()):
        broker = c.running(c.leader(topic, p))
        if broker is None:
            time.sleep(0.01)  # a client's retry backoff
            continue
        try:
            op = broker.produce_async(topic, p, data, acks=-1, timeout_ms=5000)
            sent = True
        except (errors.RetriableError, errors.PylogqError):
            time.sleep(0.01)  # a client's retry backoff
            continue
        if not op.wait(30):
            continue
        result = op.answer()
        if result.error_code == 0:
            return result.base_offset
    return None


def test_pylogq_clients_follow_a_failover(pylogq_cluster: Cluster) -> None:
    """pylogq's own Producer and Consumer over TCP, against the plugin's cluster fixture: an
    idempotent acks=all producer and a group consumer go on through a leader's abrupt stop
    (the group's coordinator may move with it)."""
    cluster = pylogq_cluster
    cluster.create_topic("failover", 2, 3, config={"min.insync.replicas": "2"})
    boot = cluster.bootstrap_servers
    producer = pylogq.Producer(bootstrap_servers=boot, acks="all", enable_idempotence=True, retries=1000,
                               request_timeout_ms=10000, metadata_max_age_ms=1000)
    consumer = pylogq.Consumer("failover", bootstrap_servers=boot, group_id="failover-readers",
                               auto_offset_reset="earliest", metadata_max_age_ms=1000)
    seen = set()

    def consume(count: int) -> None:
        deadline = time.monotonic() + 60
        while len(seen) < count and time.monotonic() < deadline:
            for batch in consumer.poll(500).values():
                seen.update(r.value for r in batch)
        consumer.commit()

    try:
        futures = [producer.send("failover", value=b"v-%d" % i) for i in range(100)]
        producer.flush(TIMEOUT_S)
        consume(100)
        victim = cluster.leader("failover", 0)
        cluster.stop_broker(victim, abrupt=True)
        futures += [producer.send("failover", value=b"v-%d" % i) for i in range(100, 200)]
        producer.flush(60)
        assert all(f.get(1) is not None for f in futures)
        consume(200)
    finally:
        producer.close()
        consumer.close()
    assert seen == {b"v-%d" % i for i in range(200)}


def test_leaders_go_back_to_their_preferred_replicas(tmp_path, network) -> None:
    """auto.leader.rebalance.enable: a restarted broker leads again what it is the preferred leader of."""
    with Cluster(3, str(tmp_path), network=network,
                 **dict(FAST, **{"leader.imbalance.check.interval.seconds": 1})) as c:
        c.create_topic("t", 3, 3)
        preferred = {p: c.broker(0).describe_topic("t").partitions[p].replicas[0] for p in range(3)}
        assert {p: c.leader("t", p) for p in range(3)} == preferred
        moved = preferred[0]
        c.stop_broker(moved, abrupt=False)
        c.wait_until(lambda: c.leader("t", 0) not in (moved, -1), TIMEOUT_S, "a leader elsewhere")
        c.start_broker(moved)
        c.wait_until(lambda: all(in_sync(c, "t", p, 3) for p in range(3)), TIMEOUT_S, "full ISRs")
        c.wait_until(lambda: {p: c.leader("t", p) for p in range(3)} == preferred, TIMEOUT_S,
                     "every partition led by its preferred replica again")


def test_a_broker_restarted_before_its_session_expired_waits_for_it(cluster):
    """As Kafka does: the old registration (an ephemeral of the killed process's session) is
    waited for, then the broker registers with a new broker epoch."""
    cluster.create_topic("t", 1, 3)
    victim = cluster.brokers[1]
    old_epoch = victim.cluster.broker_epoch
    cluster.stop_broker(1, abrupt=True)
    started = time.monotonic()
    back = cluster.start_broker(1)  # at once: the old session is still alive in the store
    assert time.monotonic() - started >= SESSION_MS / 1000.0 * 0.5
    assert back.cluster.broker_epoch > old_epoch
    cluster.wait_until(lambda: in_sync(cluster, "t", 0, 3), TIMEOUT_S, "the broker back in the ISR")


def test_requests_of_an_older_controller_epoch_are_refused(cluster):
    cluster.create_topic("t", 1, 3)
    broker = cluster.brokers[0]
    part = broker.hosted(("t", 0))
    current = broker.cluster.replicas.controller_epoch
    stale = LeaderAndIsrPartition("t", 0, current - 1, 2, part.leader_epoch + 5, [2], part.partition_epoch + 5,
                                  [0, 1, 2])
    code, per_partition = broker.leader_and_isr(LeaderAndIsrRequest(9, current - 1, -1, [stale], {}, []))
    assert code == errors.StaleControllerEpochError.code
    assert broker.hosted(("t", 0)).leader_epoch == part.leader_epoch  # nothing changed
    code, _ = broker.stop_replica(StopReplicaRequest(9, current - 1, -1, {("t", 0): (-2, True)}))
    assert code == errors.StaleControllerEpochError.code and broker.hosted(("t", 0)) is not None
    # A request meant for an earlier life of the broker (its epoch) is refused too.
    code, _ = broker.leader_and_isr(LeaderAndIsrRequest(9, current, broker.cluster.broker_epoch - 1, [], {}, []))
    assert code == errors.StaleBrokerEpochError.code


def test_a_replica_stopped_with_its_log_kept_keeps_its_high_watermark_checkpointed(cluster):
    """A controlled shutdown stops the broker's followers (StopReplica without delete): their
    logs stay, and so must their high watermarks in replication-offset-checkpoint, which a
    reader of the files alone takes as the committed end."""
    from pylogq.storage.checkpoint import OffsetCheckpoint

    cluster.create_topic("t", 1, 3)
    leader = leader_broker(cluster, "t", 0)
    leader.produce("t", 0, batch([b"a", b"b", b"c"]), acks=-1)
    follower = next(b for b in cluster.brokers if b is not leader)
    cluster.wait_until(lambda: follower.hosted(("t", 0)).high_watermark == 3, TIMEOUT_S,
                       "the follower to learn the high watermark")
    current = follower.cluster.replicas.controller_epoch
    epoch = follower.hosted(("t", 0)).leader_epoch
    code, per_partition = follower.stop_replica(StopReplicaRequest(cluster.controller().broker_id, current, -1,
                                                                   {("t", 0): (epoch, False)}))
    assert code == 0 and per_partition == {("t", 0): 0}
    assert follower.hosted(("t", 0)) is None
    follower.checkpoint_high_watermarks()
    path = os.path.join(follower.data_dir, "replication-offset-checkpoint")
    assert OffsetCheckpoint(path).read()[("t", 0)] == 3


def test_a_leader_s_metrics_count_what_its_followers_fetched(cluster):
    cluster.create_topic("t", 1, 3)
    leader = leader_broker(cluster, "t", 0)
    data = batch([b"x" * 100] * 10)
    leader.produce("t", 0, data, acks=-1)  # answered once both followers have the batch
    m = leader.metrics()
    assert m["kafka_server_brokertopicmetrics_replicationbytesout_total"] >= 2 * len(data)
    assert m['kafka_server_brokertopicmetrics_bytesin_total{topic="t"}'] == len(data)
    assert m["kafka_server_replicamanager_underreplicatedpartitions"] == 0
    follower = next(b for b in cluster.brokers if b is not leader)
    assert follower.metrics()['kafka_log_log_logendoffset{partition="0",topic="t"}'] == 10


# -- faults: frozen brokers, lost store connections, store restarts -------------------------


def _registered(c: Cluster) -> Dict[int, int]:
    """Broker id -> broker epoch (its registration's czxid), as the store has them now."""
    zk = KafkaZkClient(c.zookeeper.connect())
    try:
        return {b: reg.epoch for b, reg in zk.get_all_brokers().items()}
    finally:
        zk.store.close()


def _call_in_thread(fn) -> Tuple[threading.Thread, List[object]]:
    out: List[object] = []

    def run() -> None:
        try:
            out.append(fn())
        except Exception as exc:  # noqa: BLE001 - recorded for the assertion
            out.append(exc)

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t, out


def test_requests_to_a_frozen_broker_wait_for_it_or_time_out(tmp_path, network):
    with Cluster(2, str(tmp_path), network=network, inter_broker_timeout_s=0.5, **FAST) as c:
        client = c.inter_broker_client(0, 1)
        assert client.offsets_for_leader_epoch(0, {}) == {}
        c.freeze_broker(1)
        assert c.frozen(1) and not c.frozen(0)
        started = time.monotonic()
        with pytest.raises(errors.BrokerNotAvailableError, match="frozen"):
            client.offsets_for_leader_epoch(0, {})
        assert time.monotonic() - started >= 0.5
        # Thawed within the timeout, the waiting request is answered.
        c.inter_broker_timeout_s = TIMEOUT_S
        t, out = _call_in_thread(lambda: client.offsets_for_leader_epoch(0, {}))
        c.thaw_broker(1)
        t.join(TIMEOUT_S)
        assert out == [{}]
        # abort() ends a request waiting for a frozen broker at once; the next one works.
        c.freeze_broker(1)
        t, out = _call_in_thread(lambda: client.offsets_for_leader_epoch(0, {}))
        deadline = time.monotonic() + TIMEOUT_S
        while t.is_alive() and time.monotonic() < deadline:
            client.abort()  # again, in case it came before the request was made
            t.join(0.05)
        assert len(out) == 1 and isinstance(out[0], errors.BrokerNotAvailableError)
        c.thaw_broker(1)
        assert client.offsets_for_leader_epoch(0, {}) == {}


def test_a_frozen_broker_s_own_requests_wait_until_it_is_thawed(tmp_path, network):
    # A session that outlives the second the test stays frozen.
    with Cluster(2, str(tmp_path), network=network, inter_broker_timeout_s=0.5,
                 **dict(FAST, **{"zookeeper.session.timeout.ms": 5000})) as c:
        client = c.inter_broker_client(0, 1)
        c.freeze_broker(0)
        t, out = _call_in_thread(lambda: client.offsets_for_leader_epoch(0, {}))
        # Its store calls wait too: a write by another session is not seen until the thaw.
        store = c.store_session(0)
        t2, out2 = _call_in_thread(lambda: store.exists("/brokers/ids/1") is not None)
        t.join(1.0)  # longer than the inter-broker timeout: a frozen caller has no clock running
        assert t.is_alive() and t2.is_alive() and out == [] and out2 == []
        c.thaw_broker(0)
        t.join(TIMEOUT_S)
        t2.join(TIMEOUT_S)
        assert out == [{}] and out2 == [True]


def test_a_broker_frozen_past_its_session_timeout_is_replaced_and_rejoins_when_thawed(cluster):
    cluster.create_topic("t", 1, 3)
    old = leader_broker(cluster, "t", 0)
    for i in range(10):
        assert old.produce("t", 0, batch([b"a%d" % i]), acks=-1).base_offset == i
    before = _registered(cluster)
    cluster.freeze_broker(old.broker_id)
    cluster.wait_until(lambda: old.broker_id not in _registered(cluster), TIMEOUT_S,
                       "the frozen broker's session to expire")
    cluster.wait_until(lambda: cluster.leader("t", 0) not in (old.broker_id, -1)
                       and all(b.cluster.metadata.partition("t", 0).leader not in (old.broker_id, -1)
                               for b in cluster.brokers if b is not old), TIMEOUT_S,
                       "a new leader in the other brokers' metadata")
    new = cluster.broker(cluster.leader("t", 0))
    cluster.wait_until(lambda: in_sync(cluster, "t", 0, 2), TIMEOUT_S, "the ISR without the frozen broker")
    assert new.produce("t", 0, batch([b"after"]), acks=-1).base_offset == 10
    cluster.thaw_broker(old.broker_id)
    cluster.wait_until(lambda: _registered(cluster).get(old.broker_id, -1) > before[old.broker_id], TIMEOUT_S,
                       "the thawed broker to register in a new session")
    cluster.wait_until(lambda: in_sync(cluster, "t", 0, 3), TIMEOUT_S, "the thawed broker back in the ISR")
    cluster.wait_until(lambda: all(b.hosted(("t", 0)).high_watermark == 11 for b in cluster.brokers), TIMEOUT_S,
                       "every high watermark at 11")
    assert read_all(old, "t", 0) == [(i, b"a%d" % i) for i in range(10)] + [(10, b"after")]
    _assert_identical_below_hw(cluster, "t", 0)


def _controller_noticed_the_death(c: Cluster, victim: int, topic: str, partitions: int) -> bool:
    """Every live broker's metadata has ``victim`` gone and a leader other than it for each
    partition: only the controller makes both so (a leader shrinks its ISR by itself)."""
    for b in c.brokers:
        view = b.cluster_view()
        if view is None or victim in [r.broker_id for r in view[1]]:
            return False
        for p in range(partitions):
            state = b.cluster.metadata.partition(topic, p)
            if state is None or state.leader in (victim, -1):
                return False
    return True


def test_a_store_blip_keeps_every_session_and_the_controller_still_reacts(cluster):
    cluster.create_topic("t", 3, 3)
    controller = cluster.controller()
    assert controller is not None
    before = _registered(cluster)
    sessions = {b: cluster.store_session(b).session_id for b in before}
    cluster.disconnect_store(controller.broker_id)
    cluster.wait_until(lambda: cluster.store_session(controller.broker_id).state == "suspended", TIMEOUT_S,
                       "SUSPENDED")
    cluster.reconnect_store(controller.broker_id)
    assert {b: cluster.store_session(b).session_id for b in before} == sessions
    assert _registered(cluster) == before
    # The watches it held went with the connection: it must still see a broker go.
    victim = next(b for b in before if b != controller.broker_id)
    assert victim in [cluster.leader("t", p) for p in range(3)]
    cluster.stop_broker(victim, abrupt=True)
    cluster.wait_until(lambda: _controller_noticed_the_death(cluster, victim, "t", 3), TIMEOUT_S,
                       "the controller to act on broker %d's death" % victim)
    assert cluster.controller() is controller


def _expire(cluster, victim) -> None:
    """Cut ``victim`` off from the store until its session has expired (its registration gone)."""
    cluster.disconnect_store(victim.broker_id)
    cluster.wait_until(lambda: victim.broker_id not in _registered(cluster), TIMEOUT_S, "the session to expire")


def _a_follower_expired(cluster):
    """A topic "t" on every broker, then a broker other than the controller expired; -> (it, the
    registrations before)."""
    cluster.create_topic("t", 1, 3)
    controller = cluster.controller()
    victim = next(b for b in cluster.brokers if b is not controller)
    before = _registered(cluster)
    _expire(cluster, victim)
    return victim, before


def test_a_store_disconnection_past_the_session_timeout_expires_the_broker_and_it_registers_again(cluster):
    victim, before = _a_follower_expired(cluster)
    cluster.wait_until(lambda: all(victim.broker_id not in b.describe_topic("t").partitions[0].isr
                                   for b in cluster.brokers if b is not victim), TIMEOUT_S,
                       "the expired broker out of the ISR")
    cluster.reconnect_store(victim.broker_id)
    cluster.wait_until(lambda: _registered(cluster).get(victim.broker_id, -1) > before[victim.broker_id], TIMEOUT_S,
                       "the broker to register again")
    cluster.wait_until(lambda: in_sync(cluster, "t", 0, 3), TIMEOUT_S, "the broker back in the ISR")


def test_a_registration_whose_answer_was_lost_is_the_brokers_epoch(cluster, caplog):
    """Registering again after an expiry, the connection goes right after the store applied the
    registration: the call fails (its answer lost), the broker says so without a traceback, and
    on the next connection it finds the registration its session made and takes its epoch
    (the one the controller fences its requests with) rather than registering a third time."""
    victim, before = _a_follower_expired(cluster)
    with caplog.at_level(logging.INFO, logger="pylogq.cluster"):
        cluster.reconnect_store(victim.broker_id)
        cluster.wait_until(lambda: victim.broker_id in _registered(cluster), TIMEOUT_S, "a new registration")
    registered = _registered(cluster)[victim.broker_id]
    assert registered > before[victim.broker_id]
    cluster.wait_until(lambda: victim.cluster.broker_epoch == registered, TIMEOUT_S, "the broker to take the epoch")
    # Now lose the answer of the registration: expire it again, arm the loss, reconnect.
    _expire(cluster, victim)
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="pylogq.cluster"):
        cluster.disconnect_store(victim.broker_id, after_next_write=True)  # armed while disconnected
        cluster.reconnect_store(victim.broker_id)
        cluster.wait_until(lambda: "could not register again yet" in caplog.text, TIMEOUT_S, "the lost answer")
        third = _registered(cluster).get(victim.broker_id)
        assert third is not None and third > registered  # applied, though its answer was lost
        cluster.reconnect_store(victim.broker_id)  # the loss disconnected it: connected again
        cluster.wait_until(lambda: victim.cluster.broker_epoch == third, TIMEOUT_S, "the broker to adopt its registration")
    assert _registered(cluster)[victim.broker_id] == third  # not registered a third time
    assert not [r for r in caplog.records if r.exc_info], "a traceback was logged"
    cluster.wait_until(lambda: in_sync(cluster, "t", 0, 3), TIMEOUT_S, "the broker back in the ISR")


def test_config_changes_unreadable_while_disconnected_are_a_warning_not_a_traceback(cluster, caplog):
    """A reconnection reads the config changes made meanwhile; the connection lost again before
    they are read is a warning (they are read on the next connection), not an error's traceback."""
    victim = next(b for b in cluster.brokers if b is not cluster.controller())
    cluster.disconnect_store(victim.broker_id)
    try:
        with caplog.at_level(logging.WARNING, logger="pylogq.cluster"):
            victim.cluster._apply_config_changes()  # the store's calls time out while disconnected
        found = [r for r in caplog.records if "could not read config changes" in r.getMessage()]
        assert found and not any(r.exc_info for r in found)
    finally:
        cluster.reconnect_store(victim.broker_id)


def test_a_store_restart_keeps_every_session(cluster):
    cluster.create_topic("t", 1, 3)
    leader = leader_broker(cluster, "t", 0)
    leader.produce("t", 0, batch([b"before"]), acks=-1)
    before = _registered(cluster)
    sessions = {b: cluster.store_session(b).session_id for b in before}
    cluster.restart_store(down_s=2 * SESSION_MS / 1000.0)  # down for longer than any session timeout
    assert {b: cluster.store_session(b).session_id for b in before} == sessions
    assert _registered(cluster) == before
    leader = leader_broker(cluster, "t", 0)
    assert leader.produce("t", 0, batch([b"after"]), acks=-1).base_offset == 1
    # The controller still watches the brokers.
    victim = leader.broker_id if leader is not cluster.controller() else \
        next(b for b in before if b != leader.broker_id)
    cluster.stop_broker(victim, abrupt=True)
    cluster.wait_until(lambda: _controller_noticed_the_death(cluster, victim, "t", 1), TIMEOUT_S,
                       "the controller to act on broker %d's death" % victim)


def test_a_broker_restarted_on_an_empty_disk_copies_its_replicas_back(cluster):
    cluster.create_topic("t", 1, 3)
    leader = leader_broker(cluster, "t", 0)
    for i in range(20):
        leader.produce("t", 0, batch([b"v%d" % i]), acks=-1)
    victim = next(b for b in cluster.brokers if b is not leader).broker_id
    cluster.stop_broker(victim, abrupt=True)
    back = cluster.start_broker(victim, wipe=True)
    cluster.wait_until(lambda: in_sync(cluster, "t", 0, 3), TIMEOUT_S, "the wiped broker back in the ISR")
    cluster.wait_until(lambda: back.hosted(("t", 0)).high_watermark == 20, TIMEOUT_S, "its high watermark")
    assert read_all(back, "t", 0) == [(i, b"v%d" % i) for i in range(20)]
