"""Transactional offset commits over a broker's real ``__consumer_offsets`` partitions: the producer's
epoch checked by the partition (a fenced one is INVALID_PRODUCER_EPOCH, as Kafka's log append answers
it), the markers written through the partition as the broker writes them (origin coordinator) and
reported with ``Broker.txn_markers_appended``, a single node's restart replaying what its log holds,
and a replicated partition's new leader loading pending and committed transactional offsets.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Dict, Tuple

from pylogq import Broker
from pylogq.cluster.broker.local_cluster import Cluster
from pylogq.cluster.contract import TxnOffset
from pylogq.cluster.coordinator.group.offsets_topic import OFFSETS_TOPIC
from pylogq.errors import InvalidProducerEpochError, UnknownTopicOrPartitionError, UnstableOffsetCommitError
from pylogq.records.control import ABORT, COMMIT, build_end_txn_marker

TP0, TP1 = ("data", 0), ("data", 1)
UNSTABLE = UnstableOffsetCommitError.code
TIMEOUT_S = 30.0


def _marker(broker: Broker, group: str, producer_id: int, epoch: int, committed: bool) -> None:
    """What WriteTxnMarkers does on the partition's leader: append the marker, then report it."""
    p = broker.group_coordinator.partition_for(group)
    broker.partition(OFFSETS_TOPIC, p).append(
        build_end_txn_marker(producer_id, epoch, COMMIT if committed else ABORT, 0, int(time.time() * 1000)),
        required_acks=-1, origin="coordinator")
    broker.txn_markers_appended(OFFSETS_TOPIC, p, producer_id, committed)


def _commit(broker: Broker, producer_id: int, epoch: int, offsets: Dict[Tuple[str, int], int],
            group: str = "g") -> Dict[Tuple[str, int], int]:
    return broker.txn_offset_commit("tx-%d" % producer_id, group, producer_id, epoch, -1, "", None,
                                    {tp: TxnOffset(o) for tp, o in offsets.items()})


def _seen(broker: Broker, stable: bool = True, group: str = "g") -> Dict[Tuple[str, int], Tuple[int, int]]:
    code, found = broker.group_coordinator.fetch_committed(group, [TP0, TP1], require_stable=stable)
    assert code == 0
    return {tp: (c.offset, c.error_code) for tp, c in found.items()}


def _single_node(path: Path) -> Broker:
    return Broker(str(path), group_initial_rebalance_delay_ms=0, offsets_topic_num_partitions=2)


def test_a_stale_epoch_is_refused_by_the_partition(tmp_path: Path) -> None:
    with _single_node(tmp_path / "b") as broker:
        broker.create_topic("data", partitions=2)
        assert broker.ensure_offsets_topic() == 0
        assert _commit(broker, 5, 1, {TP0: 10}) == {TP0: 0}
        assert _commit(broker, 5, 0, {TP1: 11}) == {TP1: InvalidProducerEpochError.code}
        _marker(broker, "g", 5, 1, False)
        assert _commit(broker, 5, 0, {TP0: 12}) == {TP0: InvalidProducerEpochError.code}
        assert _seen(broker) == {TP0: (-1, 0), TP1: (-1, 0)}  # nothing of the refused ones is pending
        # A partition that does not exist is answered by the broker, the others written.
        assert _commit(broker, 5, 2, {TP1: 13, ("data", 9): 1, ("nope", 0): 1}) == {
            TP1: 0, ("data", 9): UnknownTopicOrPartitionError.code, ("nope", 0): UnknownTopicOrPartitionError.code}
        _marker(broker, "g", 5, 2, True)
        assert _seen(broker) == {TP0: (-1, 0), TP1: (13, 0)}


def test_a_restart_replays_transactional_commits_and_markers(tmp_path: Path) -> None:
    path = tmp_path / "b"
    with _single_node(path) as broker:
        broker.create_topic("data", partitions=2)
        broker.ensure_offsets_topic()
        broker.group_coordinator.commit_offsets("g", -1, "", {TP1: (1, "")})
        assert _commit(broker, 21, 0, {TP0: 100}) == {TP0: 0}
        assert _commit(broker, 22, 3, {TP1: 200}) == {TP1: 0}
        assert _commit(broker, 23, 0, {TP0: 300}) == {TP0: 0}
        _marker(broker, "g", 21, 0, True)
        _marker(broker, "g", 23, 0, False)
        before = _seen(broker)
        assert before == {TP0: (100, 0), TP1: (-1, UNSTABLE)}
    with _single_node(path) as broker:
        assert _seen(broker) == before
        assert _seen(broker, stable=False) == {TP0: (100, 0), TP1: (1, 0)}
        # The producer state came back with the log: the open transaction's epoch still fences.
        assert _commit(broker, 22, 2, {TP0: 1}) == {TP0: InvalidProducerEpochError.code}
        _marker(broker, "g", 22, 3, True)
        assert _seen(broker) == {TP0: (100, 0), TP1: (200, 0)}
    with _single_node(path) as broker:
        assert _seen(broker) == {TP0: (100, 0), TP1: (200, 0)}


def test_a_new_leader_loads_pending_and_committed_offsets(tmp_path: Path) -> None:
    """The coordinator's broker stops; the follower that takes its ``__consumer_offsets`` partition
    over loads the committed transaction's offset and keeps the open one's pending until its marker."""
    settings = {"zookeeper.session.timeout.ms": 600, "replica.lag.time.max.ms": 2000,
                "replica.fetch.wait.max.ms": 100, "replica.fetch.backoff.ms": 50,
                "offsets.topic.num.partitions": 1, "offsets.topic.replication.factor": 3,
                "group.initial.rebalance.delay.ms": 0}
    with Cluster(3, str(tmp_path), **settings) as cluster:
        cluster.create_topic("data", 2, 3)
        cluster.wait_for_topic("data")
        assert cluster.brokers[0].ensure_offsets_topic() == 0
        cluster.wait_for_topic(OFFSETS_TOPIC)
        first = cluster.broker(cluster.leader(OFFSETS_TOPIC, 0))
        cluster.wait_until(lambda: first.group_coordinator.serves_partition(0), TIMEOUT_S, "the first load")
        assert _commit(first, 31, 0, {TP0: 7}) == {TP0: 0}  # answered once every replica has it
        assert _commit(first, 32, 0, {TP1: 8}) == {TP1: 0}
        _marker(first, "g", 31, 0, True)
        assert _seen(first) == {TP0: (7, 0), TP1: (-1, UNSTABLE)}
        end = first.partition(OFFSETS_TOPIC, 0).log_end_offset
        cluster.wait_until(lambda: all(b.partition(OFFSETS_TOPIC, 0).log_end_offset == end for b in cluster.brokers),
                           TIMEOUT_S, "the followers to have the marker")
        cluster.stop_broker(first.broker_id)

        def new_coordinator() -> bool:
            leader = cluster.leader(OFFSETS_TOPIC, 0)
            return leader not in (-1, first.broker_id) and \
                cluster.broker(leader).group_coordinator.serves_partition(0)

        cluster.wait_until(new_coordinator, TIMEOUT_S, "a new coordinator to load the partition")
        second = cluster.broker(cluster.leader(OFFSETS_TOPIC, 0))
        assert _seen(second) == {TP0: (7, 0), TP1: (-1, UNSTABLE)}
        _marker(second, "g", 32, 0, True)
        assert _seen(second) == {TP0: (7, 0), TP1: (8, 0)}


def test_the_offsets_topic_is_read_back_batch_by_batch(tmp_path: Path) -> None:
    """``read_batches`` gives each batch with its producer and marker, in log order, over more than
    one read of the partition; ``read_all`` only the data batches' (key, value)."""
    with _single_node(tmp_path / "b") as broker:
        broker.create_topic("data", partitions=2)
        broker.ensure_offsets_topic()
        p = broker.group_coordinator.partition_for("g")
        big = "x" * 3000  # a few hundred batches of ~3 KB: more than one 1 MiB read
        for i in range(400):
            broker.group_coordinator.commit_offsets("g", -1, "", {TP0: (i, big)})
        _commit(broker, 70, 0, {TP0: 1000, TP1: 1001})
        _marker(broker, "g", 70, 0, False)
        broker.group_coordinator.commit_offsets("g", -1, "", {TP1: (5, "")})
        batches = list(broker.offsets_topic.read_batches(p))
        assert [(len(b.records), b.producer_id, b.transactional, b.control_type) for b in batches] == \
            [(1, -1, False, -1)] * 400 + [(2, 70, True, -1), (0, 70, True, ABORT), (1, -1, False, -1)]
        records = [r for b in batches for r in b.records]
        assert list(broker.offsets_topic.read_all(p)) == records
        assert broker.partition(OFFSETS_TOPIC, p).log_end_offset == 404  # 400 + 2 + the marker + 1
