"""A partition's transactions (KIP-98): producer state that opens and ends them, the markers it
refuses, the transaction index it writes, and the last stable offset, on a leader, a follower, after
a truncation, a restart and a crash, and in a copy to another log directory."""

from __future__ import annotations

import collections
import logging
import os
import random
import shutil
import signal
import struct
import subprocess
import sys
from typing import Dict, List, Tuple

import pytest

from pylogq import records
from pylogq.cluster.contract import LeaderAndIsrPartition, ProducerDescription
from pylogq.cluster.state.partition import Partition
from pylogq.config import LogConfig
from pylogq.errors import (
    InvalidProducerEpochError,
    InvalidRecordError,
    InvalidTxnStateError,
    OutOfOrderSequenceNumberError,
    TransactionCoordinatorFencedError,
)
from pylogq.records.control import ABORT, COMMIT, build_end_txn_marker, control_key
from pylogq.storage.log import Log
from pylogq.storage.manager import LogManager
from pylogq.storage.transaction_index import AbortedTxn
from tests.storage.test_crash import LINE_TIMEOUT, _Lines

from . import _txn_crash_child as child
from .test_partition import log, part  # noqa: F401 - the one-replica fixtures

TS = 1_700_000_000_000
LEADER_ID, FOLLOWER_ID = 1, 2


class Producer:
    """A transactional producer's batches, sequences kept (one per producer id)."""

    def __init__(self, pid: int, epoch: int = 0) -> None:
        self.pid, self.epoch, self.seq = pid, epoch, 0

    def txn(self, n: int = 1) -> bytes:
        data = records.build_batch([b"%d-%d" % (self.pid, self.seq + i) for i in range(n)], timestamps=TS,
                                   producer_id=self.pid, producer_epoch=self.epoch, base_sequence=self.seq,
                                   is_transactional=True)
        self.seq += n
        return bytes(data)

    def plain(self, n: int = 1) -> bytes:
        """An idempotent, non-transactional batch of the same producer."""
        data = records.build_batch([b"x"] * n, timestamps=TS, producer_id=self.pid, producer_epoch=self.epoch,
                                   base_sequence=self.seq)
        self.seq += n
        return bytes(data)

    def marker(self, control_type: int, coordinator_epoch: int = 0, epoch: int = -1) -> bytes:
        return bytes(build_end_txn_marker(self.pid, self.epoch if epoch < 0 else epoch, control_type,
                                          coordinator_epoch, TS))


def plain(n: int = 1) -> bytes:
    return bytes(records.build_batch([b"p"] * n, timestamps=TS))


def aborted(log: Log) -> Dict[int, List[AbortedTxn]]:
    """The transaction index entries of every segment holding some."""
    return {s.base_offset: s.txn_index.all_aborted_txns() for s in log.segments if s.txn_index.entries}


# -- one replica ---------------------------------------------------------------------------------


def test_an_ongoing_transaction_holds_the_last_stable_offset(part):
    p1 = Producer(1)
    part.append(plain(2))
    assert (part.high_watermark, part.last_stable_offset, part.first_unstable_offset) == (2, 2, None)
    part.append(p1.txn(3))  # offsets 2..4
    part.append(plain())  # 5: not transactional, still behind the open transaction
    assert (part.high_watermark, part.last_stable_offset, part.first_unstable_offset) == (6, 2, 2)
    assert part.log.last_stable_offset(part.high_watermark) == 2 and part.log.first_unstable_offset == 2
    part.append(p1.txn(1))  # 6: the same transaction
    part.append(p1.marker(COMMIT), origin="coordinator")  # 7
    assert (part.high_watermark, part.last_stable_offset, part.first_unstable_offset) == (8, 8, None)
    assert aborted(part.log) == {}  # a commit is not indexed
    assert [e.current_txn_first_offset for e in part.producer_state.entries()] == [-1]


def test_an_abort_is_indexed_with_the_last_stable_offset_of_its_moment(part):
    p1, p2, p3 = Producer(1), Producer(2), Producer(3)
    part.append(p1.txn(2))  # 0..1
    part.append(p2.txn())  # 2
    part.append(p1.marker(ABORT), origin="coordinator")  # 3: p2's transaction from 2 was ongoing
    assert part.last_stable_offset == 2
    part.append(p3.txn())  # 4
    part.append(p2.marker(ABORT, coordinator_epoch=1), origin="coordinator")  # 5: p3's from 4 ongoing
    assert part.last_stable_offset == 4
    part.append(p3.marker(ABORT), origin="coordinator")  # 6: nothing ongoing
    assert part.last_stable_offset == part.high_watermark == 7
    assert aborted(part.log) == {0: [AbortedTxn(1, 0, 3, 2), AbortedTxn(2, 2, 5, 4), AbortedTxn(3, 4, 6, 7)]}
    assert part.log.collect_aborted_transactions(3, 7) == [AbortedTxn(1, 0, 3, 2), AbortedTxn(2, 2, 5, 4),
                                                           AbortedTxn(3, 4, 6, 7)]


def test_markers_in_one_append_take_the_last_stable_offset_at_their_own_offsets(part):
    p1, p2, p3 = Producer(1), Producer(2), Producer(3)
    part.append(p1.txn() + p2.txn())  # 0, 1
    # Two markers in one append: the first sees p2's transaction ongoing, the second nothing.
    part.append(p1.marker(ABORT) + p2.marker(ABORT), origin="coordinator")  # 2, 3
    assert aborted(part.log) == {0: [AbortedTxn(1, 0, 2, 1), AbortedTxn(2, 1, 3, 4)]}
    assert part.last_stable_offset == 4
    # A transaction opened after a marker of the same append does not hold back that marker's
    # entry (a follower's fetch holds such runs of batches: it must index what its leader did).
    part.append(p3.txn())  # 4
    part.append(p3.marker(ABORT) + plain() + p1.txn(), origin="coordinator")  # 5, 6, 7
    assert aborted(part.log)[0][-1] == AbortedTxn(3, 4, 5, 6)
    assert (part.first_unstable_offset, part.last_stable_offset) == (7, 7)


def test_a_marker_of_a_transaction_with_no_data_here_indexes_nothing(part):
    p1 = Producer(1)
    part.append(p1.marker(ABORT, coordinator_epoch=4), origin="coordinator")
    assert aborted(part.log) == {} and part.last_stable_offset == 1
    assert part.active_producers() == [ProducerDescription(1, 0, -1, TS, 4, -1)]


def test_markers_of_a_fenced_producer_or_coordinator_are_refused(part):
    p1 = Producer(1, epoch=3)
    part.append(p1.txn())
    part.append(p1.marker(COMMIT, coordinator_epoch=5), origin="coordinator")
    part.append(p1.txn())  # a new transaction, open at 2
    end = part.log_end_offset
    # Kafka's ProducerAppendInfo.appendEndTxnMarker: an older producer epoch is INVALID_PRODUCER_EPOCH...
    with pytest.raises(InvalidProducerEpochError, match="marker of producer 1 has epoch 2, older than its current "
                                                        "epoch 3"):
        part.append(p1.marker(ABORT, coordinator_epoch=5, epoch=2), origin="coordinator")
    # ...an older coordinator epoch, TRANSACTION_COORDINATOR_FENCED.
    with pytest.raises(TransactionCoordinatorFencedError, match="coordinator epoch 4, older than the coordinator "
                                                                "epoch 5"):
        part.append(p1.marker(ABORT, coordinator_epoch=4), origin="coordinator")
    assert part.log_end_offset == end and part.first_unstable_offset == 2  # nothing written, still open
    # A newer producer epoch on a marker (the coordinator bumped it aborting a timed-out
    # transaction) is taken: the producer's older batches are fenced from then on.
    part.append(p1.marker(ABORT, coordinator_epoch=5, epoch=4), origin="coordinator")
    assert aborted(part.log) == {0: [AbortedTxn(1, 2, 3, 4)]}
    assert (part.producer_state.epoch(1), part.producer_state.coordinator_epoch(1)) == (4, 5)
    with pytest.raises(InvalidProducerEpochError):
        part.append(p1.txn())  # epoch 3
    bumped = Producer(1, epoch=4)
    part.append(bumped.txn())  # a new epoch starts at sequence 0
    assert part.first_unstable_offset == 4


def test_a_non_transactional_batch_inside_a_transaction_is_refused(part):
    p1 = Producer(1)
    part.append(p1.txn())
    with pytest.raises(InvalidTxnStateError, match="producer 1 sent a non-transactional batch while its "
                                                   r"transaction \(from offset 0\) is open"):
        part.append(p1.plain())
    p1.seq = 1
    with pytest.raises(InvalidTxnStateError):
        part.append(p1.txn() + p1.plain())  # even after a transactional batch of the same append
    assert part.log_end_offset == 1
    p1.seq = 1
    part.append(p1.txn())
    part.append(p1.marker(COMMIT), origin="coordinator")
    part.append(p1.plain())  # once it ended, idempotent batches are fine again
    assert part.log_end_offset == 4 and part.last_stable_offset == 4


def test_a_control_batch_from_the_coordinator_must_be_a_marker(part):
    bad = records.build_batch([b"\x00\x00\x00\x00\x00\x00"], keys=[b"\x00\x00\x00\x05"], timestamps=TS,
                              producer_id=1, producer_epoch=0, is_transactional=True, is_control=True)
    with pytest.raises(InvalidRecordError, match="type 5, not a transaction marker"):
        part.append(bad, origin="coordinator")
    with pytest.raises(InvalidRecordError, match="control batch"):
        part.append(Producer(1).marker(ABORT))  # a client never writes one
    assert part.log_end_offset == 0
    # Kafka's other control records (KRaft's) carry no producer: nothing to check or track.
    leader_change = records.build_batch([b"\x00\x00"], keys=[control_key(2)], timestamps=TS, is_control=True)
    part.append(leader_change, origin="coordinator")
    assert part.log_end_offset == 1 and part.last_stable_offset == 1


def test_sequences_of_a_transactional_producer_are_still_checked(part):
    p1 = Producer(1)
    part.append(p1.txn())
    p1.seq = 5
    with pytest.raises(OutOfOrderSequenceNumberError):
        part.append(p1.txn())


def test_the_log_start_moving_past_an_open_transaction_bounds_the_first_unstable_offset(part):
    p1 = Producer(1)
    part.append(plain(2))
    part.append(p1.txn())  # 2
    part.append(plain(3))  # 3..5
    part.delete_records_before(4)
    assert (part.first_unstable_offset, part.last_stable_offset) == (4, 4)  # Kafka's max(first, log start)
    part.append(p1.marker(ABORT), origin="coordinator")  # 6
    assert part.last_stable_offset == part.high_watermark == 7
    assert part.log.collect_aborted_transactions(4, 7) == [AbortedTxn(1, 2, 6, 7)]


# -- replicated --------------------------------------------------------------------------------------


def state(leader: int, epoch: int = 1) -> LeaderAndIsrPartition:
    return LeaderAndIsrPartition("t", 0, 1, leader, epoch, [LEADER_ID, FOLLOWER_ID], 0, [LEADER_ID, FOLLOWER_ID])


@pytest.fixture
def pair(tmp_path):
    leader_log, follower_log = Log(str(tmp_path / "leader" / "t-0")), Log(str(tmp_path / "follower" / "t-0"))
    leader = Partition("t", 0, leader_log, broker_id=LEADER_ID, single_replica=False)
    leader.make_leader(state(LEADER_ID))
    follower = Partition("t", 0, follower_log, broker_id=FOLLOWER_ID, single_replica=False)
    follower.make_follower(state(LEADER_ID))
    yield leader, follower
    for p in (leader, follower):
        p.close()
        p.log.close()


def replicate(leader: Partition, follower: Partition) -> None:
    """One fetch of the follower from the leader: what it lacks, the leader's HW and its own fetch state."""
    start = follower.log_end_offset
    data = leader.read_for_follower(start, 1 << 20).read()
    if data:
        follower.append_as_follower(data, leader_epoch=1)
    leader.update_follower_fetch_state(FOLLOWER_ID, follower.log_end_offset, 0, leader.log_end_offset)
    follower.update_follower_high_watermark(leader.high_watermark, leader.log_start_offset, 1)


def test_a_decided_transaction_stays_unstable_until_its_marker_is_replicated(pair):
    leader, follower = pair
    p1, p2 = Producer(1), Producer(2)
    leader.append(p1.txn(2))  # 0..1
    leader.append(p2.txn())  # 2
    leader.append(plain())  # 3
    replicate(leader, follower)
    assert (leader.high_watermark, leader.first_unstable_offset, leader.last_stable_offset) == (4, 0, 0)
    leader.append(p1.marker(ABORT), origin="coordinator")  # 4: decided, above the high watermark
    # Kafka's unreplicated transactions: the marker could still be lost with this leader.
    assert (leader.high_watermark, leader.first_unstable_offset, leader.last_stable_offset) == (4, 0, 0)
    assert [t.first_offset for t in leader.producer_state.txns.unreplicated()] == [0]
    replicate(leader, follower)
    assert leader.high_watermark == 5 and leader.producer_state.txns.unreplicated() == []
    assert (leader.first_unstable_offset, leader.last_stable_offset) == (2, 2)  # p2's
    replicate(leader, follower)
    assert (follower.high_watermark, follower.first_unstable_offset, follower.last_stable_offset) == (5, 2, 2)
    leader.append(p2.marker(COMMIT), origin="coordinator")  # 5
    assert leader.last_stable_offset == 2
    replicate(leader, follower)
    replicate(leader, follower)
    for p in (leader, follower):
        assert (p.high_watermark, p.first_unstable_offset, p.last_stable_offset) == (6, None, 6)
    # The follower wrote the same index from its own copy of the log.
    assert aborted(leader.log) == aborted(follower.log) == {0: [AbortedTxn(1, 0, 4, 2)]}
    assert leader.active_producers() == follower.active_producers()


def test_a_follower_fetching_many_batches_at_once_indexes_what_its_leader_did(pair):
    leader, follower = pair
    p1, p2 = Producer(1), Producer(2)
    leader.append(p1.txn())  # 0
    leader.append(p1.marker(ABORT), origin="coordinator")  # 1
    leader.append(plain())  # 2
    leader.append(p2.txn())  # 3
    leader.append(p2.marker(ABORT), origin="coordinator")  # 4
    leader.append(p1.txn())  # 5
    replicate(leader, follower)  # one fetch of all six batches
    assert aborted(leader.log) == {0: [AbortedTxn(1, 0, 1, 2), AbortedTxn(2, 3, 4, 5)]}
    assert aborted(follower.log) == aborted(leader.log)
    replicate(leader, follower)
    for p in (leader, follower):
        assert (p.high_watermark, p.first_unstable_offset, p.last_stable_offset) == (6, 5, 5)


def test_a_follower_truncating_loses_the_transactions_and_entries_above_the_point(pair):
    leader, follower = pair
    p1, p2 = Producer(1), Producer(2)
    leader.append(p1.txn())  # 0
    leader.append(p2.txn())  # 1
    leader.append(p1.marker(ABORT), origin="coordinator")  # 2
    leader.append(p2.txn())  # 3
    leader.append(p2.marker(ABORT), origin="coordinator")  # 4
    replicate(leader, follower)
    replicate(leader, follower)
    assert aborted(follower.log) == {0: [AbortedTxn(1, 0, 2, 1), AbortedTxn(2, 1, 4, 5)]}
    assert follower.last_stable_offset == 5
    # The leader's epoch ends at 4 (say): p2's marker is cut, its transaction open again.
    follower.truncate_as_follower(4, 1)
    assert aborted(follower.log) == {0: [AbortedTxn(1, 0, 2, 1)]}
    assert follower.producer_state.txns.ongoing() == [(2, 1)]
    assert (follower.high_watermark, follower.first_unstable_offset, follower.last_stable_offset) == (4, 1, 1)
    # Cut below p2's first batch: no transaction is open.
    follower.truncate_as_follower(1, 1)
    assert aborted(follower.log) == {} and follower.producer_state.txns.ongoing() == [(1, 0)]
    assert (follower.high_watermark, follower.last_stable_offset) == (1, 0)
    follower.truncate_fully_as_follower(10, 1)
    assert follower.producer_state.txns.ongoing() == [] and follower.first_unstable_offset is None
    assert follower.last_stable_offset == 10


# -- reopening -----------------------------------------------------------------------------------------


def _write_history(part: Partition) -> None:
    p1, p2, p3 = Producer(1), Producer(2), Producer(3)
    part.append(p1.txn(2))  # 0..1
    part.append(p2.txn())  # 2
    part.log.roll()
    part.append(p1.marker(ABORT), origin="coordinator")  # 3
    part.append(p3.txn())  # 4
    part.log.roll()
    part.append(p2.marker(ABORT, coordinator_epoch=2), origin="coordinator")  # 5
    part.append(plain())  # 6; p3's transaction from 4 stays open


@pytest.mark.parametrize("how", ["clean", "crash", "crash of the last segment"])
def test_producers_and_transactions_are_rebuilt_from_the_log(tmp_path, how):
    directory = str(tmp_path / "t-0")
    log = Log(directory, LogConfig())
    part = Partition("t", 0, log)
    _write_history(part)
    expected = (part.active_producers(), part.producer_state.txns.ongoing(), aborted(log), part.last_stable_offset)
    assert expected[1:] == ([(3, 4)], {3: [AbortedTxn(1, 0, 3, 2)], 5: [AbortedTxn(2, 2, 5, 4)]}, 4)
    part.close()
    log.close()
    recovery_point = {"clean": 7, "crash": 0, "crash of the last segment": 5}[how]
    if how != "clean":
        # A crash: the directory as it was, opened without the clean-shutdown marker, the
        # transaction indexes not flushed past the recovery point lost; recovery writes them
        # again from the log's transactions (those of segment 0 and 3 too, for segment 5's).
        copy = str(tmp_path / "crash" / "t-0")
        shutil.copytree(directory, copy)
        for name in os.listdir(copy):
            if name.endswith(".txnindex") and int(name[:20]) >= recovery_point:
                os.truncate(os.path.join(copy, name), 0)
        directory = copy
    log = Log(directory, LogConfig(), clean_shutdown=how == "clean", recovery_point=recovery_point)
    try:
        part = Partition("t", 0, log)
        assert (part.active_producers(), part.producer_state.txns.ongoing(), aborted(log),
                part.last_stable_offset) == expected
        part.append(Producer(3, epoch=0).marker(ABORT), origin="coordinator")
        assert part.last_stable_offset == 8 and log.collect_aborted_transactions(4, 8)[-1] == AbortedTxn(3, 4, 7, 8)
    finally:
        part.close()
        log.close()


def test_a_copy_to_another_log_directory_writes_its_own_index(tmp_path):
    log = Log(str(tmp_path / "a" / "t-0"))
    part = Partition("t", 0, log)
    _write_history(part)
    future = Log(str(tmp_path / "b" / "t-0"))
    part.start_future(future)
    while part.copy_to_future(40):  # a batch at a time
        pass
    assert future.log_end_offset == log.log_end_offset
    assert [(s.base_offset, s.txn_index.all_aborted_txns()) for s in future.segments if s.txn_index.entries] \
        == [(0, [AbortedTxn(1, 0, 3, 2), AbortedTxn(2, 2, 5, 4)])]  # one segment here: the entries are the same
    assert part.replace_with_future(lambda: future) == (True, 0)
    assert part.log is future and (part.first_unstable_offset, part.last_stable_offset) == (4, 4)
    part.close()
    log.close()
    future.close()


# -- killed while writing ---------------------------------------------------------------------------

CHILD = os.path.abspath(child.__file__)
REPO = os.path.dirname(os.path.dirname(os.path.dirname(CHILD)))
CYCLES = 6


def _model(log: Log) -> Tuple[Dict[int, List[AbortedTxn]], List[Tuple[int, int]]]:
    """What the log's batches say, replayed here on their own: each segment's aborted transactions
    (with the last stable offset at their marker) and the transactions still open."""
    opened: Dict[int, int] = {}  # producer id -> first offset
    ongoing: Dict[int, int] = {}  # first offset -> producer id, oldest first
    expected: Dict[int, List[AbortedTxn]] = {}
    for segment in log.segments:
        expected[segment.base_offset] = []
        data = segment.reader().read(0, segment.size)
        for h in records.iter_batches(data):
            pid = h.producer_id
            if pid < 0:
                continue
            if h.attributes & records.CONTROL_MASK:
                (record,) = records.RecordBatch(data, h.position)
                first = opened.pop(pid, None)
                if first is None:
                    continue
                if struct.unpack(">hh", record.key)[1] == ABORT:
                    lso = next((f for f, p in ongoing.items() if p != pid), h.base_offset + 1)
                    expected[segment.base_offset].append(AbortedTxn(pid, first, h.base_offset, lso))
                del ongoing[first]
            elif h.attributes & records.TRANSACTIONAL_MASK and pid not in opened:
                opened[pid] = h.base_offset
                ongoing[h.base_offset] = pid
    return expected, [(pid, first) for first, pid in ongoing.items()]


def _spawn(root: str, seed: int, stderr) -> Tuple[subprocess.Popen, _Lines]:
    proc = subprocess.Popen([sys.executable, CHILD, root, str(seed)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=stderr, cwd=REPO)
    return proc, _Lines(proc, stderr)


def test_a_partition_killed_while_writing_transactions_comes_back_as_its_log_says(tmp_path, caplog):
    """SIGKILL at a random moment, over and over; every reopening (recovery runs) must hold the
    transaction indexes and open transactions that an independent replay of its batches gives,
    and every acknowledged append."""
    root = str(tmp_path / "logs")
    os.makedirs(root)
    rng = random.Random(20261130)
    stats: Dict[str, int] = collections.Counter()
    errs = [open(str(tmp_path / ("child-%d.err" % i)), "w+b") for i in range(CYCLES + 1)]
    proc, lines = _spawn(root, 1, errs[0])
    end = 0
    try:
        for cycle in range(CYCLES):
            assert lines.next() == "ready"
            proc.stdin.write(b"go\n")
            proc.stdin.flush()
            assert lines.next().split() == ["open", str(end)], "cycle %d" % cycle
            seen: List[str] = []
            wanted = rng.randrange(5, 60)
            while sum(line.startswith("ack") for line in seen) < wanted:
                seen.append(lines.next())
            if rng.random() < 0.5:  # aim at an append itself
                while not seen[-1].startswith("append"):
                    seen.append(lines.next())
            os.kill(proc.pid, signal.SIGKILL)
            assert proc.wait(timeout=LINE_TIMEOUT) == -signal.SIGKILL
            seen += lines.drain()
            acks = [tuple(map(int, line.split()[1:])) for line in seen if line.startswith("ack")]
            acked_end = acks[-1][1] + 1
            proc.stdin.close()
            proc.stdout.close()
            proc, lines = _spawn(root, cycle + 2, errs[cycle + 1])  # starting while this one's log is checked

            caplog.clear()
            with caplog.at_level(logging.INFO, logger="pylogq.storage"):
                manager = LogManager([root], background=False)
            try:
                log = manager.get_log(child.TOPIC, child.PARTITION)
                assert log is not None and log.log_end_offset >= acked_end, "cycle %d" % cycle
                expected, ongoing = _model(log)
                assert {s.base_offset: s.txn_index.all_aborted_txns() for s in log.segments} == expected
                part = Partition(child.TOPIC, child.PARTITION, log)
                assert part.producer_state.txns.ongoing() == ongoing
                assert part.last_stable_offset == (ongoing[0][1] if ongoing else log.log_end_offset)
                part.close()
                stats["aborted"] += sum(len(v) for v in expected.values())
                stats["rebuilt"] += any("rebuilt the transaction indexes" in r.getMessage() for r in caplog.records)
                stats["segments"] = log.num_segments
                end = log.log_end_offset
            finally:
                manager.close()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        for f in errs:
            f.close()
    assert stats["aborted"] > 3 and stats["rebuilt"] > 0 and stats["segments"] > 3, stats
