"""Partition: appends with idempotent producer checks, reads bounded by the high watermark, waits."""

from __future__ import annotations

import threading

import pytest

from pylogq import records
from pylogq.cluster.state.partition import Partition
from pylogq.errors import (
    CorruptRecordError,
    IllegalStateError,
    InvalidProducerEpochError,
    InvalidRequiredAcksError,
    NotLeaderOrFollowerError,
    OffsetOutOfRangeError,
    OutOfOrderSequenceNumberError,
    UnknownProducerIdError,
)
from pylogq.records import AppendResult
from pylogq.config import LogConfig
from pylogq.storage.log import Log

TS = 1_700_000_000_000


def batch(n, start=0, pid=-1, epoch=-1, seq=-1, ts=TS):
    return bytes(records.build_batch([b"value-%d" % (start + i) for i in range(n)], timestamps=ts,
                                     producer_id=pid, producer_epoch=epoch, base_sequence=seq))


def read_all(part, offset=0, isolation_level="read_uncommitted"):
    """(offset, value) of every record readable from ``offset``."""
    out = []
    while True:
        data = part.read(offset, 1 << 20, isolation_level).read()
        if not data:
            return out
        for info in records.iter_batches(data):
            for r in records.RecordBatch(data, info.position):
                if r.offset >= offset:
                    out.append((r.offset, r.value))
        offset = out[-1][0] + 1


@pytest.fixture
def log(tmp_path):
    lg = Log(str(tmp_path / "t-0"))
    yield lg
    lg.close()


@pytest.fixture
def part(log):
    p = Partition("t", 0, log)
    yield p
    p.close()


# -- appends and reads -----------------------------------------------------------------------


def test_append_read_round_trip_and_hw_follows_leo(part):
    assert (part.high_watermark, part.log_end_offset, part.log_start_offset) == (0, 0, 0)
    r1 = part.append(batch(3))
    r2 = part.append(bytearray(batch(2, start=3)), required_acks=-1)
    r3 = part.append(memoryview(batch(1, start=5)), required_acks=0)
    assert r1 == AppendResult(0, 0, -1, 0, 3, last_offset=2, batch_count=1, max_timestamp=TS,
                              offset_of_max_timestamp=2)
    assert (r2.base_offset, r2.last_offset, r2.record_count) == (3, 4, 2)
    assert (r3.base_offset, r3.last_offset) == (5, 5)
    assert part.high_watermark == part.log_end_offset == 6
    assert read_all(part) == [(i, b"value-%d" % i) for i in range(6)]
    assert read_all(part, 4) == [(4, b"value-4"), (5, b"value-5")]
    assert len(part.read(6, 1 << 20)) == 0
    with pytest.raises(OffsetOutOfRangeError):
        part.read(7, 1 << 20)


def test_required_acks_are_checked(part):
    for bad in (2, -2, 3, True, "1", None):
        with pytest.raises(InvalidRequiredAcksError, match="required_acks must be 0, 1 or -1"):
            part.append(batch(1), required_acks=bad)
    assert part.log_end_offset == 0


def test_isolation_levels(part):
    part.append(batch(2))
    assert read_all(part, isolation_level="read_committed") == read_all(part)
    with pytest.raises(ValueError, match="isolation_level"):
        part.read(0, 100, "read_dirty")


def test_append_errors_write_nothing(part):
    good = bytearray(batch(2))
    good[-1] ^= 0xFF  # the CRC no longer matches
    with pytest.raises(CorruptRecordError):
        part.append(good)
    assert part.log_end_offset == part.high_watermark == 0


def test_reads_stop_at_the_high_watermark(part):
    for i in range(5):
        part.append(batch(2, start=2 * i))
    assert part.high_watermark == 10
    assert part.update_high_watermark(4)  # as replication would after a leader change
    assert (part.high_watermark, part.log_end_offset) == (4, 10)
    assert read_all(part) == [(i, b"value-%d" % i) for i in range(4)]
    assert read_all(part, isolation_level="read_committed") == read_all(part)
    # Between the HW and the log end: nothing yet (not an error); past the log end: an error.
    assert len(part.read(4, 1 << 20)) == 0
    assert len(part.read(9, 1 << 20)) == 0
    with pytest.raises(OffsetOutOfRangeError):
        part.read(11, 1 << 20)
    assert not part.update_high_watermark(4)
    part.update_high_watermark(10)
    assert len(read_all(part)) == 10


def test_replicated_partition_leaves_the_hw_to_replication(log):
    part = Partition("t", 0, log, single_replica=False)
    part.append(batch(3))
    part.append(batch(3, start=3))
    assert (part.high_watermark, part.log_end_offset) == (0, 6)
    assert read_all(part) == []
    part.update_high_watermark(3)
    assert [o for o, _ in read_all(part)] == [0, 1, 2]
    with pytest.raises(OffsetOutOfRangeError, match="between the log start 0 and the log end 6"):
        part.update_high_watermark(7)
    with pytest.raises(OffsetOutOfRangeError):
        part.update_high_watermark(-1)


def test_high_watermark_on_open(log):
    log.append(batch(4))
    assert Partition("t", 0, log).high_watermark == 4
    assert Partition("t", 0, log, high_watermark=2).high_watermark == 2
    assert Partition("t", 0, log, high_watermark=99).high_watermark == 4


def test_leader_epoch_is_stamped_and_cannot_go_back(part):
    part.leader_epoch = 3
    part.append(batch(1))
    data = part.read(0, 1 << 20).read()
    assert records.RecordBatch(data).partition_leader_epoch == 3
    with pytest.raises(IllegalStateError, match="from 3 to 2"):
        part.leader_epoch = 2
    assert part.leader_epoch == 3


# -- idempotent producers ----------------------------------------------------------------------


def test_retried_batch_is_not_appended_twice(part):
    first = batch(3, pid=1000, epoch=0, seq=0)
    r = part.append(first)
    part.append(batch(2, start=3))  # someone else's records in between
    again = part.append(first)
    assert again == AppendResult(0, 0, -1, 0, 3, 2, 1, TS, 2, duplicate=True)
    assert part.log_end_offset == part.high_watermark == 5
    nxt = part.append(batch(2, start=5, pid=1000, epoch=0, seq=3))
    assert (nxt.base_offset, nxt.last_offset, nxt.duplicate) == (5, 6, False)
    assert part.append(first).base_offset == r.base_offset
    assert [o for o, _ in read_all(part)] == list(range(7))


def test_corrupt_retry_is_not_taken_for_the_original(part):
    first = batch(3, pid=7, epoch=0, seq=0)
    part.append(first)
    bad = bytearray(first)
    bad[-2] ^= 0x01
    with pytest.raises(CorruptRecordError):
        part.append(bad)


def test_sequence_gap_raises_and_writes_nothing(part):
    part.append(batch(2, pid=1, epoch=0, seq=0))
    with pytest.raises(OutOfOrderSequenceNumberError, match="sent sequence 5, expected 2"):
        part.append(batch(1, pid=1, epoch=0, seq=5))
    assert part.log_end_offset == 2
    part.append(batch(1, pid=1, epoch=0, seq=2))
    assert part.log_end_offset == 3


def test_fenced_epoch_raises(part):
    part.append(batch(1, pid=1, epoch=0, seq=0))
    part.append(batch(1, pid=1, epoch=1, seq=0))  # the producer bumped its epoch
    with pytest.raises(InvalidProducerEpochError):
        part.append(batch(1, pid=1, epoch=0, seq=1))
    with pytest.raises(OutOfOrderSequenceNumberError, match="new epoch starts at 0"):
        part.append(batch(1, pid=1, epoch=2, seq=1))
    assert part.log_end_offset == 2


def test_unknown_producer_must_start_at_zero(part):
    with pytest.raises(UnknownProducerIdError):
        part.append(batch(1, pid=5, epoch=0, seq=10))
    assert part.log_end_offset == 0


def test_coordinator_writes_are_not_checked(part):
    part.append(batch(1, pid=5, epoch=0, seq=10), origin="coordinator")
    assert part.log_end_offset == 1
    with pytest.raises(ValueError, match="origin"):
        part.append(batch(1), origin="replica")


def test_several_batches_in_one_append(part):
    data = batch(2, pid=1, epoch=0, seq=0) + batch(3, start=2, pid=1, epoch=0, seq=2) + batch(1, start=5)
    r = part.append(data)
    assert (r.base_offset, r.last_offset, r.record_count) == (0, 5, 6)
    assert part.producer_state.batches(1)[-1][2:4] == (2, 4)
    assert part.append(batch(3, start=2, pid=1, epoch=0, seq=2)).base_offset == 2
    with pytest.raises(OutOfOrderSequenceNumberError):
        part.append(batch(1, pid=1, epoch=0, seq=5) + batch(1, pid=1, epoch=0, seq=7))
    assert part.log_end_offset == 6


def test_duplicate_on_a_log_append_time_topic_returns_the_original_time(tmp_path):
    clock = [1000.0]
    with Log(str(tmp_path / "t-0"), LogConfig(message_timestamp_type="LogAppendTime"),
             clock=lambda: clock[0]) as lg:
        part = Partition("t", 0, lg)
        first = batch(2, pid=3, epoch=0, seq=0)
        r = part.append(first)
        assert r.log_append_time == 1_000_000
        clock[0] = 2000.0
        again = part.append(first)
        assert again.duplicate and again.log_append_time == 1_000_000
        assert lg.log_end_offset == 2


def test_producer_state_survives_reopening(tmp_path):
    path = str(tmp_path / "t-0")
    first = batch(3, pid=42, epoch=4, seq=0)
    second = batch(2, start=3, pid=42, epoch=4, seq=3)
    with Log(path) as lg:
        part = Partition("t", 0, lg)
        part.append(first)
        part.append(batch(1, start=100))
        part.append(second)
        part.close()
    with Log(path) as lg:
        part = Partition("t", 0, lg)
        assert part.high_watermark == 6
        assert part.append(first) == AppendResult(0, 0, -1, 0, 3, 2, 1, TS, 2, duplicate=True)
        assert part.append(second) == AppendResult(0, 4, -1, 0, 2, 5, 1, TS, 5, duplicate=True)
        with pytest.raises(OutOfOrderSequenceNumberError):
            part.append(batch(1, pid=42, epoch=4, seq=6))
        with pytest.raises(InvalidProducerEpochError):
            part.append(batch(1, pid=42, epoch=3, seq=0))
        assert part.append(batch(1, pid=42, epoch=4, seq=5)).base_offset == 6
        assert lg.log_end_offset == 7


def test_truncate_rewinds_hw_and_producer_state(part):
    part.append(batch(2, pid=1, epoch=0, seq=0))
    part.append(batch(2, pid=1, epoch=0, seq=2))
    assert part.truncate_to(2)
    assert (part.high_watermark, part.log_end_offset) == (2, 2)
    assert part.producer_state.last_sequence(1) == 1
    assert part.append(batch(2, pid=1, epoch=0, seq=2)).duplicate is False
    assert not part.truncate_to(10)


def test_concurrent_idempotent_producers(part):
    errors = []
    results = {}

    def producer(pid):
        try:
            seq = 0
            for i in range(30):
                data = batch(2, pid=pid, epoch=0, seq=seq)
                r = part.append(data)
                assert part.append(data) == r._replace(duplicate=True)
                results[(pid, i)] = r.base_offset
                seq += 2
        except Exception as exc:  # collected for the main thread
            errors.append(exc)

    threads = [threading.Thread(target=producer, args=(pid,)) for pid in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
        assert not t.is_alive()
    assert errors == []
    assert part.log_end_offset == part.high_watermark == 4 * 30 * 2
    assert sorted(results.values()) == list(range(0, 240, 2))


# -- the high watermark hook, closing ----------------------------------------------------------------


def test_high_watermark_advance_calls_the_hook_outside_the_lock(log):
    part = Partition("t", 0, log, single_replica=False)
    part.append(batch(3))
    calls = []

    def hook():
        # Outside the partition's lock: another thread can take it meanwhile.
        taken = []
        t = threading.Thread(target=lambda: taken.append(part._lock.acquire(timeout=5) and part._lock.release()))
        t.start()
        t.join(10)
        calls.append((part.high_watermark, taken == [None]))

    part.on_high_watermark_advanced = hook
    part.update_high_watermark(2)
    part.update_high_watermark(2)  # no move: no call
    part.update_high_watermark(3)
    assert calls == [(2, True), (3, True)]


def test_close_refuses_work(part):
    part.close()
    with pytest.raises(NotLeaderOrFollowerError):
        part.append(batch(1))
    with pytest.raises(NotLeaderOrFollowerError):
        part.read(0, 100)
    assert not part.log.closed  # the log belongs to whoever opened it


# -- offsets by time, deletion ---------------------------------------------------------------------


def test_offset_for_timestamp(part):
    part.append(batch(2, ts=TS))
    part.append(batch(2, start=2, ts=TS + 100))
    part.append(batch(2, start=4, ts=TS + 200))
    assert part.offset_for_timestamp(-2) == (0, -1)
    assert part.offset_for_timestamp(-1) == (6, -1)
    assert part.offset_for_timestamp(TS + 50) == (2, TS + 100)
    assert part.offset_for_timestamp(TS + 200) == (4, TS + 200)
    assert part.offset_for_timestamp(TS + 201) is None
    part.update_high_watermark(4)
    assert part.offset_for_timestamp(-1) == (4, -1)  # latest is the high watermark
    assert part.offset_for_timestamp(TS + 150) is None  # only at or past the HW
    # -3: the first record with the largest timestamp (KIP-734), none while it is past the
    # high watermark (as Kafka answers); -4: the log start (no tiered storage); -5: none.
    assert part.offset_for_timestamp(-3) is None
    part.update_high_watermark(6)
    assert part.offset_for_timestamp(-3) == (4, TS + 200)
    assert part.offset_for_timestamp(-4) == (0, -1)
    assert part.offset_for_timestamp(-5) is None
    with pytest.raises(ValueError, match="timestamp"):
        part.offset_for_timestamp(-6)


def test_delete_records_before_is_bounded_by_the_hw(part):
    for i in range(5):
        part.append(batch(2, start=2 * i))
    part.update_high_watermark(6)
    with pytest.raises(OffsetOutOfRangeError, match="high watermark 6"):
        part.delete_records_before(7)
    assert part.delete_records_before(4) == 4
    assert part.log_start_offset == 4
    assert part.offset_for_timestamp(-2) == (4, -1)
    with pytest.raises(OffsetOutOfRangeError):
        part.read(2, 1 << 20)
    assert [o for o, _ in read_all(part, 4)] == [4, 5]
    with pytest.raises(OffsetOutOfRangeError):
        part.delete_records_before(-1)
