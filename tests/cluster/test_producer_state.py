"""Producer bookkeeping: duplicates, gaps, epochs, wrap-around, transactions and rebuild from a log."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pylogq import records
from pylogq.cluster.state.producer_state import (
    NUM_BATCHES_TO_RETAIN,
    BatchMetadata,
    ProducerEntry,
    ProducerStateManager,
    in_sequence,
    last_sequence,
    producer_batches,
)
from pylogq.errors import (
    InvalidProducerEpochError,
    OutOfOrderSequenceNumberError,
    TransactionCoordinatorFencedError,
    UnknownProducerIdError,
)
from pylogq.records.control import ABORT, COMMIT, build_end_txn_marker
from pylogq.storage.log import Log
from pylogq.storage.transaction_index import AbortedTxn

INT32_MAX = 2**31 - 1
TS = 1_700_000_000_000


def written(psm, pid, epoch, first_seq, count, first_offset, ts=TS):
    """Check then record a batch of ``count`` records, as the partition does."""
    last_seq = last_sequence(first_seq, count - 1)
    assert psm.check(pid, epoch, first_seq, last_seq) is None
    psm.update(pid, epoch, first_seq, last_seq, first_offset, first_offset + count - 1, ts)
    return last_seq


def test_sequence_arithmetic_wraps_like_the_producer():
    assert last_sequence(0, 9) == 9
    assert last_sequence(INT32_MAX, 0) == INT32_MAX
    assert last_sequence(INT32_MAX, 1) == 0
    assert last_sequence(INT32_MAX - 1, 4) == 2
    assert in_sequence(4, 5) and not in_sequence(4, 6) and not in_sequence(4, 4)
    assert in_sequence(INT32_MAX, 0)


def test_new_producer_in_sequence():
    psm = ProducerStateManager()
    last = written(psm, 1, 0, 0, 3, 0)
    last = written(psm, 1, 0, last + 1, 2, 3)
    assert psm.last_sequence(1) == 4 and psm.epoch(1) == 0 and 1 in psm and len(psm) == 1
    assert psm.batches(1) == (BatchMetadata(0, 2, 0, 2, TS), BatchMetadata(3, 4, 3, 4, TS))


def test_duplicate_returns_the_cached_offsets():
    psm = ProducerStateManager()
    written(psm, 1, 0, 0, 3, 100, ts=TS)
    written(psm, 1, 0, 3, 2, 103, ts=TS + 1)
    assert psm.check(1, 0, 0, 2) == (100, 102, TS)
    assert psm.check(1, 0, 3, 4) == (103, 104, TS + 1)
    # Same first sequence, different range: not the batch written, and not in sequence.
    with pytest.raises(OutOfOrderSequenceNumberError):
        psm.check(1, 0, 3, 5)


def test_only_the_last_five_batches_are_duplicates():
    psm = ProducerStateManager()
    seq = 0
    for i in range(NUM_BATCHES_TO_RETAIN + 2):
        written(psm, 9, 0, seq, 1, i)
        seq += 1
    assert len(psm.batches(9)) == NUM_BATCHES_TO_RETAIN
    assert psm.check(9, 0, 2, 2) == (2, 2, TS)
    # Older than the retained window: treated as out of order, as Kafka does.
    with pytest.raises(OutOfOrderSequenceNumberError, match="expected 7"):
        psm.check(9, 0, 1, 1)


def test_gap_raises_out_of_order():
    psm = ProducerStateManager()
    written(psm, 1, 0, 0, 5, 0)
    with pytest.raises(OutOfOrderSequenceNumberError, match="sent sequence 6, expected 5"):
        psm.check(1, 0, 6, 6)
    with pytest.raises(OutOfOrderSequenceNumberError):
        psm.check(1, 0, 2, 2)  # a sequence already passed, not a retained batch's range


def test_lower_epoch_is_fenced():
    psm = ProducerStateManager()
    written(psm, 1, 3, 0, 1, 0)
    with pytest.raises(InvalidProducerEpochError, match="epoch 2, older than its current epoch 3"):
        psm.check(1, 2, 1, 1)
    # Even a byte-identical retry of a batch from the old epoch is fenced, not a duplicate.
    psm2 = ProducerStateManager()
    written(psm2, 1, 0, 0, 1, 0)
    psm2.update(1, 1, 0, 0, 1, 1, TS)
    with pytest.raises(InvalidProducerEpochError):
        psm2.check(1, 0, 0, 0)


def test_higher_epoch_resets_the_sequence():
    psm = ProducerStateManager()
    written(psm, 1, 0, 0, 10, 0)
    with pytest.raises(OutOfOrderSequenceNumberError, match="a new epoch starts at 0"):
        psm.check(1, 1, 10, 10)
    written(psm, 1, 1, 0, 2, 10)
    assert psm.epoch(1) == 1
    assert psm.batches(1) == (BatchMetadata(0, 1, 10, 11, TS),)  # the old epoch's batches are gone
    with pytest.raises(InvalidProducerEpochError):
        psm.check(1, 0, 10, 10)


def test_unknown_producer_must_start_at_zero():
    psm = ProducerStateManager()
    with pytest.raises(UnknownProducerIdError, match="starts at sequence 42"):
        psm.check(5, 0, 42, 42)
    assert psm.check(5, 0, 0, 0) is None
    assert 5 not in psm  # check changes nothing


def test_wrap_around_after_int32_max():
    psm = ProducerStateManager()
    psm.update(1, 0, INT32_MAX - 2, INT32_MAX - 1, 0, 1, TS)
    last = written(psm, 1, 0, INT32_MAX, 3, 2)
    assert last == 1
    written(psm, 1, 0, 2, 1, 5)
    assert psm.check(1, 0, INT32_MAX, 1) == (2, 4, TS)


def test_producers_are_independent():
    psm = ProducerStateManager()
    written(psm, 1, 0, 0, 2, 0)
    written(psm, 2, 7, 0, 3, 2)
    written(psm, 1, 0, 2, 1, 5)
    assert psm.last_sequence(1) == 2 and psm.last_sequence(2) == 2 and psm.epoch(2) == 7
    assert psm.epoch(3) is None and psm.last_sequence(3) is None and psm.batches(3) == ()


def test_check_batches_sees_earlier_batches_of_the_same_append():
    psm = ProducerStateManager()
    written(psm, 1, 0, 0, 2, 0)
    assert psm.check_batches([(1, 0, 2, 3), (1, 0, 4, 4), (2, 0, 0, 1)]) is None
    with pytest.raises(OutOfOrderSequenceNumberError):
        psm.check_batches([(1, 0, 2, 3), (1, 0, 5, 5)])
    with pytest.raises(OutOfOrderSequenceNumberError):
        psm.check_batches([(3, 0, 0, 1), (3, 0, 3, 3)])
    assert psm.check_batches([(1, 0, 0, 1), (1, 0, 2, 2)]) == (0, 1, TS)
    assert psm.last_sequence(1) == 1 and 2 not in psm


def test_truncate_in_memory():
    psm = ProducerStateManager()
    written(psm, 1, 0, 0, 2, 0)
    written(psm, 2, 0, 0, 2, 2)
    written(psm, 1, 0, 2, 2, 4)
    psm.truncate_to(4)
    assert psm.last_sequence(1) == 1 and psm.last_sequence(2) == 1
    psm.truncate_to(2)
    assert 2 not in psm and psm.last_sequence(1) == 1
    psm.truncate_to(0)
    assert len(psm) == 0


# -- against a real log -----------------------------------------------------------


def idempotent_batch(n, pid, epoch, seq, ts=TS):
    return records.build_batch([b"v%d" % i for i in range(n)], timestamps=ts,
                               producer_id=pid, producer_epoch=epoch, base_sequence=seq)


def test_producer_batches_reads_the_header_fields():
    data = idempotent_batch(3, 11, 2, 7) + records.build_batch([b"x"], timestamps=TS) + idempotent_batch(2, 12, 0, 0)
    found = producer_batches(bytes(data))
    assert [(b.producer_id, b.producer_epoch, b.base_sequence, last_sequence(b.base_sequence, b.last_offset))
            for b in found] == [(11, 2, 7, 9), (12, 0, 0, 1)]  # as sent: every base offset is 0
    assert found[0].last_offset - found[0].base_offset == 2


def test_load_from_log_rebuilds_the_state(tmp_path):
    with Log(str(tmp_path / "t-0")) as log:
        log.append(idempotent_batch(3, 1, 0, 0))
        log.append(records.build_batch([b"plain"], timestamps=TS))
        log.append(idempotent_batch(2, 2, 5, 0, ts=TS + 5))
        log.append(idempotent_batch(2, 1, 0, 3))
        psm = ProducerStateManager()
        assert psm.load_from_log(log) == 3
        assert psm.batches(1) == (BatchMetadata(0, 2, 0, 2, TS), BatchMetadata(3, 4, 6, 7, TS))
        assert psm.batches(2) == (BatchMetadata(0, 1, 4, 5, TS + 5),)
        assert psm.epoch(2) == 5
        assert psm.check(1, 0, 3, 4) == (6, 7, TS)
        assert psm.check(1, 0, 5, 5) is None
        psm.truncate_to(6, log)
        assert psm.batches(1) == (BatchMetadata(0, 2, 0, 2, TS),)
        psm.truncate_to(3, log)
        assert 2 not in psm and psm.last_sequence(1) == 2


def test_load_from_log_reads_in_chunks_and_across_segments(tmp_path):
    from pylogq.config import LogConfig

    with Log(str(tmp_path / "t-0"), LogConfig(segment_bytes=1000)) as log:
        seq = 0
        for i in range(60):
            log.append(idempotent_batch(2, i % 3, 0, seq))
            if i % 3 == 2:
                seq += 2
        assert log.num_segments > 3
        psm = ProducerStateManager()
        assert psm.load_from_log(log, chunk_bytes=150) == 60
        assert sorted(psm.snapshot()) == [0, 1, 2]
        assert all(len(psm.batches(p)) == NUM_BATCHES_TO_RETAIN for p in range(3))
        assert psm.last_sequence(0) == 39
        assert psm.batches(2)[-1].last_offset == log.log_end_offset - 1


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 2), st.integers(1, 4), st.booleans()), min_size=1, max_size=40))
def test_model_duplicates_and_gaps(steps):
    """Against a model: a retry of a recent batch is a duplicate, the next sequence passes, a skip fails."""
    psm = ProducerStateManager()
    next_seq = {}
    history = {}
    offset = 0
    for pid, count, retry in steps:
        if retry and history.get(pid):
            first, last, fo, lo = history[pid][-1]
            assert psm.check(pid, 0, first, last) == (fo, lo, TS)
            continue
        first = next_seq.get(pid, 0)
        last = first + count - 1
        with pytest.raises((OutOfOrderSequenceNumberError, UnknownProducerIdError)):
            psm.check(pid, 0, first + 1, last + 1)
        assert psm.check(pid, 0, first, last) is None
        psm.update(pid, 0, first, last, offset, offset + count - 1, TS)
        history.setdefault(pid, []).append((first, last, offset, offset + count - 1))
        offset += count
        next_seq[pid] = last + 1


# -- transactions ---------------------------------------------------------------------


def txn_batch(n, pid, epoch, seq, ts=TS):
    return records.build_batch([b"t%d" % i for i in range(n)], timestamps=ts, producer_id=pid,
                               producer_epoch=epoch, base_sequence=seq, is_transactional=True)


def test_load_from_log_rebuilds_transactions_and_coordinator_epochs(tmp_path):
    with Log(str(tmp_path / "t-0")) as log:
        log.append(txn_batch(2, 1, 0, 0))  # 0..1: p1 opens
        log.append(txn_batch(1, 2, 3, 0))  # 2: p2 opens
        log.append(build_end_txn_marker(1, 0, ABORT, 6, TS + 1))  # 3
        log.append(txn_batch(1, 1, 0, 2))  # 4: p1 opens again
        log.append(build_end_txn_marker(2, 4, COMMIT, 6, TS + 2))  # 5: a bumped epoch on the marker
        psm = ProducerStateManager()
        assert psm.load_from_log(log, high_watermark=5) == 5
        assert psm.txns.ongoing() == [(1, 4)]
        # p2's commit (marker 5) is at the high watermark given: still unstable; p1's abort is not.
        assert [t.producer_id for t in psm.txns.unreplicated()] == [2] and psm.first_unstable_offset == 2
        psm.on_high_watermark(6)
        assert psm.first_unstable_offset == 4
        assert psm.entries() == [
            ProducerEntry(1, 0, 2, TS, 6, 4, (BatchMetadata(0, 1, 0, 1, TS), BatchMetadata(2, 2, 4, 4, TS))),
            ProducerEntry(2, 4, -1, TS + 2, 6, -1, ()),  # the new epoch's marker fenced its batches
        ]
        assert psm.check(2, 4, 0, 0) is None  # the new epoch starts at 0
        with pytest.raises(InvalidProducerEpochError):
            psm.check(2, 3, 1, 1)
        psm.truncate_to(4, log)  # p2's marker goes: its transaction is open again
        assert psm.txns.ongoing() == [(2, 2)] and psm.entries()[0].current_txn_first_offset == -1
        psm.truncate_to(3, log)
        assert psm.txns.ongoing() == [(1, 0), (2, 2)]


def test_the_coordinators_checks_see_the_earlier_markers_of_the_same_append(tmp_path):
    psm = ProducerStateManager()
    with Log(str(tmp_path / "t-0")) as log:
        data = build_end_txn_marker(1, 0, ABORT, 5, TS) + build_end_txn_marker(1, 0, ABORT, 4, TS)
        with pytest.raises(TransactionCoordinatorFencedError, match="coordinator epoch 4, older than the "
                                                                    "coordinator epoch 5"):
            log.append(data, check_producers=psm.check_coordinator_append, producers_appended=psm.appended)
        data = build_end_txn_marker(1, 2, ABORT, 5, TS) + build_end_txn_marker(1, 1, ABORT, 5, TS)
        with pytest.raises(InvalidProducerEpochError, match="epoch 1, older than its current epoch 2"):
            log.append(data, check_producers=psm.check_coordinator_append, producers_appended=psm.appended)
        assert log.log_end_offset == 0 and len(psm) == 0


def test_truncation_without_the_log_reopens_transactions_whose_marker_went():
    psm = ProducerStateManager()
    headers = [records.BatchHeader(0, 0, 2, 0, 1, TS, 2, records.TRANSACTIONAL_MASK, 1, 0, 0)]
    psm.appended(headers)
    marker = bytes(build_end_txn_marker(1, 0, ABORT, 0, TS, base_offset=2))
    (header,) = records.iter_batches(marker)
    indexed = []
    psm.appended([header], marker, indexed.append)
    assert indexed == [AbortedTxn(1, 0, 2, 3)] and psm.txns.ongoing() == []
    psm.truncate_to(2)
    assert psm.txns.ongoing() == [(1, 0)] and psm.batches(1) == (BatchMetadata(0, 1, 0, 1, TS),)
