"""A follower's truncation against its leader (KIP-101, KIP-279), round by round, and its way
back into the ISR.

A follower asks its leader where its latest leader epoch ends in the leader's log
(OffsetsForLeaderEpoch) and truncates there. The leader answers with the largest epoch
it knows at or below the one asked about. When that epoch is one the follower never
saw, the follower cannot trust the answer's offset: it cuts its log to where its own
largest earlier epoch ends and asks again about that epoch (the "second round"). A
follower with no epochs truncates to its high watermark, as does one whose epoch the
leader cannot place. Copying on from there, it takes the leader's high watermark only
as far as its own log goes, and it joins the ISR only once it holds everything up to
where its leader's epoch starts (the leader may have written past its high watermark
before it led: a replica without those records must not become a candidate).

The first tests drive a fetcher round by round against a leader partition with a real
log; the last plays the history that leads there in a cluster: two leader changes
while a follower is cut off, then down.
"""

from __future__ import annotations

from typing import Any, Dict, Iterator, List, Mapping, Sequence, Tuple

import pytest

from pylogq import records
from pylogq.cluster.broker.local_cluster import Cluster
from pylogq.cluster.broker.replica_fetcher import FetcherSettings, ReplicaFetcherThread
from pylogq.cluster.contract import (
    BrokerEndpoint,
    BrokerRegistration,
    EpochEndOffset,
    FetchResult,
    LeaderAndIsrPartition,
    RecordBytes,
    ReplicaFetchPartition,
)
from pylogq.cluster.state.partition import Partition
from pylogq.storage.log import Log

from .test_local_cluster import read_all

TP = ("t", 0)
LEADER_ID, FOLLOWER_ID = 3, 2
LEADER = BrokerRegistration(LEADER_ID, (BrokerEndpoint("PLAINTEXT", "127.0.0.1", 9),))
DEADLINE_S = 30.0


def stamped(values: Sequence[bytes], base_offset: int, leader_epoch: int) -> bytes:
    """One batch as a leader of ``leader_epoch`` wrote it at ``base_offset`` (-1: no epoch)."""
    data = bytearray(records.build_batch(list(values)))
    records.assign_offsets(data, base_offset, leader_epoch)
    return bytes(data)


def log_bytes(log: Log) -> bytes:
    return log.read(log.log_start_offset, 1 << 30, max_offset=log.log_end_offset).read()


def values(log: Log) -> List[Tuple[int, bytes]]:
    data = log_bytes(log)
    return [(r.offset, r.value) for info in records.iter_batches(data)
            for r in records.RecordBatch(data, info.position)]


class LeaderSide:
    """The leader's answers to a follower's OffsetsForLeaderEpoch and Fetch, from a real
    leader partition (as :meth:`pylogq.Broker.offsets_for_leader_epoch` answers)."""

    def __init__(self, partition: Partition) -> None:
        self.partition = partition
        self.asked: List[Dict[Tuple[str, int], Tuple[int, int]]] = []

    def offsets_for_leader_epoch(self, replica_id: int, asks: Mapping[Tuple[str, int], Tuple[int, int]]
                                 ) -> Dict[Tuple[str, int], EpochEndOffset]:
        self.asked.append(dict(asks))
        out = {}
        for tp, (current, epoch) in asks.items():
            assert current == self.partition.leader_epoch
            found, end = self.partition.end_offset_for_epoch(epoch)
            out[tp] = EpochEndOffset(0, found, end)
        return out

    def replica_fetch(self, replica_id: int, broker_epoch: int, partitions: Sequence[ReplicaFetchPartition],
                      max_wait_ms: int, min_bytes: int, max_bytes: int) -> Dict[Tuple[str, int], FetchResult]:
        out = {}
        for p in partitions:
            region = self.partition.read_for_follower(p.fetch_offset, p.max_bytes)
            out[(p.topic, p.partition)] = FetchResult(0, self.partition.high_watermark,
                                                      self.partition.log_start_offset, RecordBytes(region.read()))
        return out

    def abort(self) -> None:
        pass

    def close(self) -> None:
        pass


def state(leader: int, epoch: int) -> LeaderAndIsrPartition:
    return LeaderAndIsrPartition("t", 0, 1, leader, epoch, [LEADER_ID], 0, [FOLLOWER_ID, LEADER_ID])


@pytest.fixture
def logs(tmp_path: Any) -> Iterator[Tuple[Log, Log]]:
    leader_log, follower_log = Log(str(tmp_path / "leader" / "t-0")), Log(str(tmp_path / "follower" / "t-0"))
    yield leader_log, follower_log
    leader_log.close()
    follower_log.close()


def leader_of(log: Log, epoch: int) -> Partition:
    """The leader's partition: it leads in ``epoch`` from its log end (recorded in its epoch cache)."""
    part = Partition("t", 0, log, broker_id=LEADER_ID, single_replica=False)
    part.make_leader(state(LEADER_ID, epoch))
    return part


def follower_of(log: Log, epoch: int, high_watermark: int) -> Partition:
    part = Partition("t", 0, log, broker_id=FOLLOWER_ID, single_replica=False, high_watermark=high_watermark)
    part.make_follower(state(LEADER_ID, epoch))
    return part


def fetcher_for(follower: Partition, leader: LeaderSide) -> ReplicaFetcherThread:
    """A fetcher of ``follower``'s partition, driven round by round by the test (not started);
    each fetch copies one batch."""
    fetcher = ReplicaFetcherThread(FOLLOWER_ID, LEADER, 0, FetcherSettings(backoff_ms=60000, max_bytes=1),
                                   lambda *a: leader,  # type: ignore[arg-type]
                                   lambda tp: follower if tp == TP else None, lambda: 1)
    fetcher.add_partitions({TP: (follower.leader_epoch, follower.high_watermark)})
    return fetcher


def truncate_round(fetcher: ReplicaFetcherThread) -> None:
    fetcher._truncate(dict(fetcher._states))


def fetch_to_the_end(fetcher: ReplicaFetcherThread, follower: Partition, leader: Partition) -> None:
    """Fetch until the follower's log ends where the leader's does; after each fetch its high
    watermark is the leader's, as far as its own log goes."""
    for _ in range(20):
        if follower.log_end_offset == leader.log_end_offset:
            assert follower.high_watermark == leader.high_watermark
            return
        fetcher._fetch(dict(fetcher._states))
        assert follower.high_watermark == min(leader.high_watermark, follower.log_end_offset), follower
    raise AssertionError("the follower did not catch up: %r, leader %r" % (follower, leader))


def test_a_last_epoch_the_leader_never_saw_is_asked_about_again_with_an_earlier_one(logs: Tuple[Log, Log]) -> None:
    """The follower's log: epoch 0 to offset 7, then epoch 2 (it led, and wrote what nobody
    copied). The leader's: epoch 0 to offset 5, epoch 1 to offset 8, epoch 3 (it never saw 2).
    Asked about 2, the leader answers "epoch 1 ends at 8"; the follower never saw 1, so 8
    means nothing to it: it cuts to where its epoch 0 ends (7) and asks about 0, which ends
    at 5 in the leader's log. One round only would keep its offsets 5 and 6 of epoch 0,
    which the leader does not have."""
    leader_log, follower_log = logs
    common = stamped([b"r%d" % i for i in range(5)], 0, 0)
    leader_log.append_as_follower(common)
    leader_log.append_as_follower(stamped([b"x0", b"x1", b"x2"], 5, 1))
    follower_log.append_as_follower(common)
    follower_log.append_as_follower(stamped([b"r5", b"r6"], 5, 0))
    follower_log.append_as_follower(stamped([b"y0", b"y1"], 7, 2))
    leader = leader_of(leader_log, 3)
    leader.append(bytes(records.build_batch([b"z0", b"z1"])))
    assert [tuple(e) for e in leader_log.leader_epoch_cache.entries] == [(0, 0), (1, 5), (3, 8)]
    follower = follower_of(follower_log, 3, high_watermark=5)
    side = LeaderSide(leader)
    fetcher = fetcher_for(follower, side)

    truncate_round(fetcher)
    assert side.asked == [{TP: (3, 2)}]
    assert follower.log_end_offset == 7 and follower_log.latest_epoch == 0
    assert fetcher.fetch_state(TP) == ("truncating", 3, 5)

    truncate_round(fetcher)
    assert side.asked[1:] == [{TP: (3, 0)}]
    assert follower.log_end_offset == 5
    assert fetcher.fetch_state(TP) == ("fetching", 3, 5)

    fetch_to_the_end(fetcher, follower, leader)
    assert log_bytes(follower_log) == log_bytes(leader_log)
    assert values(follower_log) == [(i, b"r%d" % i) for i in range(5)] + [(5, b"x0"), (6, b"x1"), (7, b"x2"),
                                                                         (8, b"z0"), (9, b"z1")]
    assert follower_log.leader_epoch_cache.entries == leader_log.leader_epoch_cache.entries


def test_an_epoch_the_leader_has_truncates_in_one_round_to_the_smaller_end(logs: Tuple[Log, Log]) -> None:
    leader_log, follower_log = logs
    common = stamped([b"r%d" % i for i in range(5)], 0, 0)
    leader_log.append_as_follower(common)
    follower_log.append_as_follower(common)
    follower_log.append_as_follower(stamped([b"lost5", b"lost6"], 5, 0))
    leader = leader_of(leader_log, 1)
    leader.append(bytes(records.build_batch([b"n5"])))
    follower = follower_of(follower_log, 1, high_watermark=5)
    side = LeaderSide(leader)
    fetcher = fetcher_for(follower, side)
    truncate_round(fetcher)
    assert side.asked == [{TP: (1, 0)}]
    assert follower.log_end_offset == 5 and fetcher.fetch_state(TP) == ("fetching", 1, 5)
    fetch_to_the_end(fetcher, follower, leader)
    assert log_bytes(follower_log) == log_bytes(leader_log)


def test_a_follower_without_epochs_truncates_to_its_high_watermark(logs: Tuple[Log, Log]) -> None:
    """Batches written before leader epochs (none stamped): nothing to ask the leader about, so
    what is past the high watermark may be another leader's lost writes and goes."""
    leader_log, follower_log = logs
    common = stamped([b"r%d" % i for i in range(4)], 0, -1)
    leader_log.append_as_follower(common)
    follower_log.append_as_follower(common)
    follower_log.append_as_follower(stamped([b"lost4", b"lost5"], 4, -1))
    assert follower_log.latest_epoch is None
    leader = leader_of(leader_log, 1)
    leader.append(bytes(records.build_batch([b"n4"])))
    follower = follower_of(follower_log, 1, high_watermark=4)
    side = LeaderSide(leader)
    fetcher = fetcher_for(follower, side)
    truncate_round(fetcher)
    assert side.asked == []
    assert follower.log_end_offset == 4 and fetcher.fetch_state(TP) == ("fetching", 1, 4)
    fetch_to_the_end(fetcher, follower, leader)
    assert log_bytes(follower_log) == log_bytes(leader_log)


def test_an_epoch_the_leader_cannot_place_truncates_to_the_high_watermark(logs: Tuple[Log, Log]) -> None:
    """The follower's last epoch is above every epoch the leader knows: the leader answers
    "undefined", and the follower falls back on its high watermark."""
    leader_log, follower_log = logs
    common = stamped([b"r%d" % i for i in range(4)], 0, 0)
    leader_log.append_as_follower(common)
    follower_log.append_as_follower(common)
    follower_log.append_as_follower(stamped([b"lost4", b"lost5"], 4, 5))
    leader = leader_of(leader_log, 1)
    follower = follower_of(follower_log, 1, high_watermark=4)
    side = LeaderSide(leader)
    fetcher = fetcher_for(follower, side)
    truncate_round(fetcher)
    assert side.asked == [{TP: (1, 5)}]
    assert follower.log_end_offset == 4 and fetcher.fetch_state(TP) == ("fetching", 1, 4)
    fetch_to_the_end(fetcher, follower, leader)
    assert log_bytes(follower_log) == log_bytes(leader_log)


# -- back in sync --------------------------------------------------------------------------------


def test_a_follower_joins_the_isr_only_once_it_reaches_its_leader_s_epoch_start(logs: Tuple[Log, Log]) -> None:
    """The new leader's log runs past the high watermark (records of the previous epoch not yet
    committed): a follower past the high watermark but short of the epoch's start lacks some of
    them, and must not count as in sync (it could be elected without them)."""
    leader_log, _ = logs
    for i in range(10):
        leader_log.append_as_follower(stamped([b"r%d" % i], i, 0))
    asked: List[List[int]] = []
    leader = Partition("t", 0, leader_log, broker_id=LEADER_ID, single_replica=False, high_watermark=5,
                       alter_isr=lambda part, isr, epoch: asked.append(list(isr)))
    # Broker 4 is in the ISR and has not fetched yet: the high watermark stays at 5.
    leader.make_leader(LeaderAndIsrPartition("t", 0, 1, LEADER_ID, 1, [LEADER_ID, 4], 0, [FOLLOWER_ID, LEADER_ID, 4]))
    assert leader.high_watermark == 5
    leader.update_follower_fetch_state(FOLLOWER_ID, 7, 0, leader.log_end_offset)
    assert asked == [] and leader.isr == (LEADER_ID, 4)
    leader.update_follower_fetch_state(FOLLOWER_ID, 10, 0, leader.log_end_offset)
    assert asked == [[LEADER_ID, 4, FOLLOWER_ID]]


# -- in a cluster ---------------------------------------------------------------------------------


SETTINGS: Dict[str, Any] = {
    "zookeeper.session.timeout.ms": 600,
    # Replicas cut off from their leader stay in the ISR: each election below is a clean one.
    "replica.lag.time.max.ms": 120000,
    "replica.fetch.wait.max.ms": 100,
    "replica.fetch.backoff.ms": 50,
}


def batch(value: bytes) -> bytes:
    return bytes(records.build_batch([value]))


def test_a_follower_back_after_two_leader_changes_truncates_in_two_rounds(tmp_path: Any) -> None:
    """Four replicas, in preference order P, A, F, L (the controller is a fifth broker, which
    no fault touches). Epoch 0: P leads; F copies two records that A and L never get. P dies:
    A leads epoch 1 from its shorter log, L copies what A writes, F cannot reach A. A dies:
    F (in the ISR, cut off but not lagging long enough to leave it) leads epoch 2 from its
    longer log and writes what L, cut off from it, never gets. F dies: L leads epoch 3.
    F comes back: its last epoch, 2, is one L never saw; L's answer names epoch 1, which F
    never saw: F must ask again about epoch 0 and truncate to where A started epoch 1."""
    with Cluster(5, str(tmp_path), **SETTINGS) as c:
        c.wait_until(lambda: c.controller() is not None, DEADLINE_S, "a controller")
        controller = c.controller()
        assert controller is not None
        p, a, f, l = [b for b in range(5) if b != controller.broker_id]
        controller.create_topic("t", replica_assignment={0: [p, a, f, l]})
        c.wait_for_topic("t", DEADLINE_S)
        assert c.leader("t", 0) == p

        def end(b: int) -> int:
            return _replica(c, b).log_end_offset

        for i in range(5):
            assert c.broker(p).produce("t", 0, batch(b"r%d" % i), acks=-1).base_offset == i
        # A and L stop copying P; F will not reach A, nor L reach F. Once A's and L's fetchers
        # have each been refused, no fetch of theirs that started before the cut is left to
        # bring them a record.
        before = {b: _retry_at(c, b) for b in (a, l)}
        for x, y in ((p, a), (p, l), (a, f), (f, l)):
            c.cut(x, y)
        c.wait_until(lambda: all(_retry_at(c, b) != before[b] for b in (a, l)), DEADLINE_S,
                     "A's and L's fetches from P to be refused")
        for i in (5, 6):
            assert c.broker(p).produce("t", 0, batch(b"r%d" % i), acks=1).base_offset == i
        c.wait_until(lambda: end(f) == 7, DEADLINE_S, "F to copy P's last records")
        assert end(a) == end(l) == 5

        c.stop_broker(p, abrupt=True)
        c.wait_until(lambda: _leads(c, a, 1), DEADLINE_S, "A to lead epoch 1")
        for i in range(3):  # epoch 1 starts at offset 5
            assert c.broker(a).produce("t", 0, batch(b"x%d" % i), acks=1).base_offset == 5 + i
        c.wait_until(lambda: end(l) == 8, DEADLINE_S, "L to copy epoch 1")
        assert end(f) == 7  # F never reached A

        c.stop_broker(a, abrupt=True)
        c.wait_until(lambda: _leads(c, f, 2), DEADLINE_S, "F to lead epoch 2")
        for i in range(2):  # epoch 2 starts at offset 7
            assert c.broker(f).produce("t", 0, batch(b"y%d" % i), acks=1).base_offset == 7 + i
        assert end(l) == 8  # L cannot reach F

        c.stop_broker(f, abrupt=True)
        c.wait_until(lambda: _leads(c, l, 3), DEADLINE_S, "L to lead epoch 3")
        leader = _replica(c, l)
        assert [tuple(e) for e in leader.log.leader_epoch_cache.entries] == [(0, 0), (1, 5), (3, 8)]
        for i in range(2):
            assert c.broker(l).produce("t", 0, batch(b"z%d" % i), acks=-1).base_offset == 8 + i
        c.heal()

        # F, back: asked about epoch 2, L answers "epoch 1 ends at 8"; F cuts to where its own
        # epoch 0 ends (7), asks about epoch 0 (it ends at 5 in L's log) and cuts to 5.
        c.start_broker(f)
        c.wait_until(lambda: _in_sync(c, l, f), DEADLINE_S, "F back in the ISR")
        back = _replica(c, f)
        c.wait_until(lambda: back.high_watermark == leader.high_watermark == 10, DEADLINE_S,
                     "both high watermarks at the end")
        assert log_bytes(back.log) == log_bytes(leader.log)
        assert back.log.leader_epoch_cache.entries == leader.log.leader_epoch_cache.entries
        kept = [v for _, v in read_all(c.broker(f), "t", 0)]
        assert kept == [b"r0", b"r1", b"r2", b"r3", b"r4", b"x0", b"x1", b"x2", b"z0", b"z1"]
        # What only F had, epoch 0's tail and all of epoch 2, is gone.
        assert not {b"r5", b"r6", b"y0", b"y1"} & set(kept)


def _retry_at(c: Cluster, broker_id: int) -> float:
    """When the broker's fetcher of t-0 may next fetch after a failure (its back-off): it
    changes each time a fetch fails."""
    node = c.broker(broker_id).cluster
    assert node is not None
    fetcher = node.replicas.fetchers.fetcher_of(TP)
    assert fetcher is not None, "broker %d does not fetch t-0" % broker_id
    with fetcher._lock:
        return fetcher._states[TP].delayed_until


def _replica(c: Cluster, broker_id: int) -> Partition:
    part = c.broker(broker_id).hosted(TP)
    assert part is not None, "broker %d hosts no replica of t-0" % broker_id
    return part


def _leads(c: Cluster, broker_id: int, epoch: int) -> bool:
    broker = c.running(broker_id)
    part = broker.hosted(TP) if broker is not None else None
    return part is not None and part.is_leader and part.leader_epoch == epoch


def _in_sync(c: Cluster, leader: int, follower: int) -> bool:
    part = c.broker(leader).hosted(TP)
    return part is not None and part.is_leader and follower in part.isr
