"""The transaction index (``.txnindex``): Kafka's file format, its searches, and the index living and
dying with its segment: rolls, retention, truncation, compaction, crashes and damaged files.

The log's appends go through a producer state as a partition's do (the log knows no producers), so
the entries are the ones a broker writes: the first offset of the transaction, its ABORT marker's
offset, and the last stable offset of that moment.
"""

from __future__ import annotations

import logging
import os
import shutil
import struct
from typing import Dict, List

import pytest

from pylogq import records
from pylogq.cluster.state.producer_state import ProducerStateManager
from pylogq.config import LogConfig
from pylogq.errors import CorruptIndexError, InvalidArgumentError
from pylogq.records.control import ABORT, COMMIT, build_end_txn_marker
from pylogq.storage.cleaner import LogCleaner
from pylogq.storage.config import LogManagerConfig
from pylogq.storage.log import Log
from pylogq.storage.manager import LogManager
from pylogq.storage.scheduler import Scheduler
from pylogq.storage.segment import filename_prefix
from pylogq.storage.transaction_index import (
    ABORTED_TXN_SIZE,
    AbortedTxn,
    TransactionIndex,
    TxnIndexSearchResult,
)

TS = 1_700_000_000_000

# Kafka's TransactionIndexTest entries.
KAFKA_TXNS = [AbortedTxn(0, 0, 10, 11), AbortedTxn(1, 5, 15, 13), AbortedTxn(2, 18, 35, 25), AbortedTxn(3, 32, 50, 40)]


@pytest.fixture
def index(tmp_path):
    idx = TransactionIndex(str(tmp_path / "00000000000000000000.txnindex"), 0)
    yield idx
    idx.close()


# -- the file ----------------------------------------------------------------------------------


def test_an_entry_is_kafkas_34_bytes(index):
    index.append(AbortedTxn(983493, 137, 299, 200))
    with open(index.path, "rb") as f:
        data = f.read()
    assert data == bytes.fromhex("0000" "00000000000f01c5" "0000000000000089" "000000000000012b" "00000000000000c8")
    assert len(data) == ABORTED_TXN_SIZE == 34
    assert index.all_aborted_txns() == [AbortedTxn(983493, 137, 299, 200)]


def test_the_file_is_created_by_the_first_append(tmp_path):
    path = str(tmp_path / "00000000000000000005.txnindex")
    idx = TransactionIndex(path, 5)
    idx.flush()
    idx.reset()
    idx.truncate_to(0)
    assert idx.collect_aborted_txns(0, 100) == TxnIndexSearchResult([], False)
    idx.sanity_check(10)
    assert not os.path.exists(path) and idx.entries == 0 and idx.last_offset is None
    idx.append(AbortedTxn(1, 3, 7, 8))
    idx.flush()
    assert os.path.getsize(path) == ABORTED_TXN_SIZE and idx.entries == 1 and idx.last_offset == 7
    idx.close()


def test_a_reopened_index_appends_after_its_entries(index):
    for txn in KAFKA_TXNS:
        index.append(txn)
    index.close()
    reopened = TransactionIndex(index.path, 0)
    assert reopened.last_offset == 50 and reopened.entries == 4
    reopened.append(AbortedTxn(3, 50, 60, 55))
    assert reopened.all_aborted_txns() == KAFKA_TXNS + [AbortedTxn(3, 50, 60, 55)]
    with pytest.raises(InvalidArgumentError, match="must increase"):
        reopened.append(AbortedTxn(4, 51, 60, 61))
    reopened.close()


@pytest.mark.parametrize("last", [15, 10])
def test_the_last_offset_must_increase(index, last):
    index.append(AbortedTxn(1, 5, 15, 13))
    with pytest.raises(InvalidArgumentError, match="%d is not greater than the last offset 15" % last):
        index.append(AbortedTxn(0, 0, last, 11))
    assert os.path.getsize(index.path) == ABORTED_TXN_SIZE and index.all_aborted_txns() == [AbortedTxn(1, 5, 15, 13)]


def test_collect_aborted_txns_is_kafkas(index):
    for txn in KAFKA_TXNS:
        index.append(txn)
    assert index.collect_aborted_txns(0, 100) == (KAFKA_TXNS, False)
    assert index.collect_aborted_txns(0, 32) == (KAFKA_TXNS[:3], True)
    assert index.collect_aborted_txns(0, 35) == (KAFKA_TXNS, True)
    assert index.collect_aborted_txns(10, 35) == (KAFKA_TXNS, True)
    assert index.collect_aborted_txns(11, 35) == (KAFKA_TXNS[1:4], True)
    assert index.collect_aborted_txns(20, 41) == (KAFKA_TXNS[2:4], False)


def test_truncate_and_reset(index):
    txns = [AbortedTxn(0, 0, 10, 2), AbortedTxn(1, 5, 15, 16), AbortedTxn(2, 18, 35, 25), AbortedTxn(3, 32, 50, 40)]
    for txn in txns:
        index.append(txn)
    index.truncate_to(51)
    assert index.all_aborted_txns() == txns
    index.truncate_to(50)
    assert index.all_aborted_txns() == txns[:3] and index.last_offset == 35
    assert os.path.getsize(index.path) == 3 * ABORTED_TXN_SIZE
    index.append(AbortedTxn(4, 40, 45, 46))  # after the cut, not after the entry it removed
    index.reset()
    assert index.all_aborted_txns() == [] and index.last_offset is None and os.path.getsize(index.path) == 0
    index.append(AbortedTxn(0, 0, 1, 2))
    assert index.all_aborted_txns() == [AbortedTxn(0, 0, 1, 2)]


def test_rename_and_delete(tmp_path, index):
    index.append(AbortedTxn(0, 0, 10, 2))
    renamed = str(tmp_path / "00000000000000000000.txnindex.deleted")
    index.rename_to(renamed)
    index.append(AbortedTxn(1, 5, 15, 16))
    assert [t.first_offset for t in index.collect_aborted_txns(0, 100).aborted_transactions] == [0, 5]
    assert os.listdir(tmp_path) == ["00000000000000000000.txnindex.deleted"]
    index.delete()
    assert os.listdir(tmp_path) == []
    # Without a file, a rename changes only the path.
    lazy = TransactionIndex(str(tmp_path / "00000000000000000001.txnindex"), 1)
    lazy.rename_to(str(tmp_path / "00000000000000000001.txnindex.swap"))
    assert lazy.path.endswith(".swap") and os.listdir(tmp_path) == []
    lazy.delete()


def _written(path: str, data: bytes) -> TransactionIndex:
    with open(path, "wb") as f:
        f.write(data)
    return TransactionIndex(path, 0)


@pytest.mark.parametrize("damage, match", [
    (lambda good: good[:-5], "not a whole number of 34-byte entries"),
    (lambda good: good + b"\x00" * 7, "not a whole number"),
    (lambda good: b"\x00\x01" + good[2:], "entry 0 .* has version 1"),
    (lambda good: good[34:68] + good[:34] + good[68:], "entry 1 .* does not follow the previous entry's last offset 15"),
    (lambda good: good + AbortedTxn(9, 40, 60, 61).pack(), "entry 4 .* is past the segment's last offset 59"),
    (lambda good: good + AbortedTxn(9, 70, 60, 61).pack(), "entry 4 .* is impossible"),
    (lambda good: good + AbortedTxn(-1, 40, 55, 56).pack(), "entry 4 .* is impossible"),
    (lambda good: good + AbortedTxn(9, 40, 55, 57).pack(), "entry 4 .* is impossible"),
])
def test_sanity_check_finds_what_cannot_be_trusted(tmp_path, damage, match):
    good = b"".join(t.pack() for t in KAFKA_TXNS)
    ok = _written(str(tmp_path / "ok.txnindex"), good)
    ok.sanity_check(60)
    bad = _written(str(tmp_path / "bad.txnindex"), damage(good))
    with pytest.raises(CorruptIndexError, match=match):
        bad.sanity_check(60)
    ok.close()
    bad.close()


def test_sanity_check_is_kafkas_for_a_base_offset_past_the_entries(tmp_path):
    idx = _written(str(tmp_path / "x.txnindex"), b"".join(t.pack() for t in KAFKA_TXNS))
    idx.close()
    moved = TransactionIndex(idx.path, 100)
    with pytest.raises(CorruptIndexError, match="ends below the segment's base offset 100"):
        moved.sanity_check()
    moved.close()


# -- the index in a log --------------------------------------------------------------------------


class Writer:
    """Appends to a log through a producer state, as a partition does: clients' transactional
    and plain batches, the coordinator's markers."""

    def __init__(self, log: Log) -> None:
        self.log = log
        self.producers = ProducerStateManager()
        self.sequences: Dict[int, int] = {}

    def data(self, pid: int, n: int = 1, epoch: int = 0) -> int:
        seq = self.sequences.get(pid, 0)
        self.sequences[pid] = seq + n
        data = records.build_batch([b"v%d" % i for i in range(n)], keys=[b"k%d" % pid] * n, timestamps=TS,
                                   producer_id=pid, producer_epoch=epoch, base_sequence=seq, is_transactional=True)
        return self.log.append(data, check_producers=self.producers.check_append,
                               producers_appended=self.producers.appended).base_offset

    def marker(self, pid: int, control_type: int, epoch: int = 0, coordinator_epoch: int = 0) -> int:
        data = build_end_txn_marker(pid, epoch, control_type, coordinator_epoch, TS)
        return self.log.append(data, check_producers=self.producers.check_coordinator_append,
                               producers_appended=self.producers.appended).base_offset

    def plain(self, n: int = 1, key: bytes = b"plain") -> int:
        data = records.build_batch([b"p"] * n, keys=[key] * n, timestamps=TS)
        return self.log.append(data).base_offset


#: What :func:`scripted` writes: three segments (bases 0, 4, 7), transactions across them.
EXPECTED = {
    0: [],
    4: [AbortedTxn(1, 0, 4, 2)],  # p2's transaction (from 2) was ongoing
    7: [AbortedTxn(3, 5, 8, 7), AbortedTxn(1, 7, 9, 10)],  # p1's second (from 7), then nothing
}


def scripted(log: Log) -> Writer:
    w = Writer(log)
    assert w.data(1, 2) == 0  # p1 opens at 0
    assert w.data(2) == 2  # p2 opens at 2
    assert w.plain() == 3
    log.roll()
    assert w.marker(1, ABORT) == 4  # p1 aborted: LSO 2 (p2's)
    assert w.data(3) == 5  # p3 opens at 5, in segment 4
    assert w.marker(2, COMMIT) == 6  # committed: no entry
    log.roll()
    assert w.data(1) == 7  # p1 opens again at 7
    assert w.marker(3, ABORT) == 8  # p3 aborted (its first offset in segment 4): LSO 7 (p1's)
    assert w.marker(1, ABORT) == 9  # p1 aborted: nothing ongoing, LSO 10
    assert w.plain() == 10
    return w


def entries(log: Log) -> Dict[int, List[AbortedTxn]]:
    return {s.base_offset: s.txn_index.all_aborted_txns() for s in log.segments}


def txnindex_files(directory: str) -> List[str]:
    return sorted(n for n in os.listdir(directory) if ".txnindex" in n)


def index_bytes(directory: str) -> Dict[str, bytes]:
    out = {}
    for name in txnindex_files(directory):
        with open(os.path.join(directory, name), "rb") as f:
            out[name] = f.read()
    return out


@pytest.fixture
def scheduler():
    s = Scheduler("test-txnindex")
    yield s
    s.shutdown()


def open_log(directory: str, scheduler: Scheduler, **kwargs) -> Log:
    config = kwargs.pop("config", LogConfig(file_delete_delay_ms=0))
    return Log(directory, config, scheduler=scheduler, **kwargs)


def test_an_abort_is_indexed_in_the_segment_holding_its_marker(tmp_path, scheduler):
    directory = str(tmp_path / "t-0")
    log = open_log(directory, scheduler)
    w = scripted(log)
    assert entries(log) == EXPECTED
    # Created only for segments holding an aborted transaction's marker.
    assert txnindex_files(directory) == [filename_prefix(4) + ".txnindex", filename_prefix(7) + ".txnindex"]
    assert w.producers.txns.ongoing() == []
    assert w.producers.first_unstable_offset == 0  # decided, but no high watermark has passed a marker yet
    w.producers.on_high_watermark(log.log_end_offset)
    assert w.producers.first_unstable_offset is None
    log.close()


def test_aborted_transactions_are_collected_across_segments(tmp_path, scheduler):
    log = open_log(str(tmp_path / "t-0"), scheduler)
    scripted(log)
    all_three = EXPECTED[4] + EXPECTED[7]
    assert log.collect_aborted_transactions(0, 11) == all_three
    assert log.collect_aborted_transactions(5, 7) == [AbortedTxn(3, 5, 8, 7)]  # complete at its LSO 7
    assert log.collect_aborted_transactions(0, 3) == [AbortedTxn(1, 0, 4, 2)]  # segment 7 stops the search
    assert log.collect_aborted_transactions(9, 11) == [AbortedTxn(1, 7, 9, 10)]
    assert log.collect_aborted_transactions(10, 11) == []
    log.delete_records_before(4)
    assert [s.base_offset for s in log.segments] == [4, 7]
    assert log.collect_aborted_transactions(2, 11) == []  # below the first segment, as Kafka answers
    assert log.collect_aborted_transactions(4, 11) == all_three
    log.close()


def test_retention_and_deletion_take_the_index_with_the_segment(tmp_path):
    directory = str(tmp_path / "t-0")
    scheduler = Scheduler("test-txnindex-retention")
    log = Log(directory, LogConfig(file_delete_delay_ms=60_000), scheduler=scheduler)
    scripted(log)
    log.delete_records_before(7)
    assert [s.base_offset for s in log.segments] == [7]
    # Renamed with its segment at once, removed with it later.
    assert txnindex_files(directory) == [filename_prefix(4) + ".txnindex.deleted", filename_prefix(7) + ".txnindex"]
    assert log.collect_aborted_transactions(7, 11) == EXPECTED[7]
    log.close()
    scheduler.shutdown(run_pending=True)
    assert txnindex_files(directory) == [filename_prefix(7) + ".txnindex"]
    log = open_log(directory, Scheduler("test-txnindex-reopen"), log_start_offset=7, clean_shutdown=True)
    assert entries(log) == {7: EXPECTED[7]}
    log.truncate_fully_and_start_at(20)
    assert txnindex_files(directory) == [] and log.collect_aborted_transactions(20, 30) == []
    log.close()
    log.scheduler.shutdown()


@pytest.mark.parametrize("offset, expected", [
    (10, EXPECTED),
    (9, {0: [], 4: EXPECTED[4], 7: EXPECTED[7][:1]}),  # p1's marker at 9 goes, p3's stays
    (8, {0: [], 4: EXPECTED[4], 7: []}),
    (5, {0: [], 4: EXPECTED[4]}),  # segment 7 goes whole, with its index
    (4, {0: []}),  # and segment 4 with p1's marker
])
def test_truncation_takes_the_entries_of_the_markers_it_removes(tmp_path, scheduler, offset, expected):
    directory = str(tmp_path / "t-0")
    log = open_log(directory, scheduler)
    scripted(log)
    log.truncate_to(offset)
    assert entries(log) == expected
    names = txnindex_files(directory)
    assert (filename_prefix(7) + ".txnindex" in names) == (offset > 7)
    log.close()
    log = open_log(directory, scheduler, clean_shutdown=True)  # what was cut is not back, and it checks out
    assert entries(log) == expected
    log.close()


def test_an_append_after_a_truncation_writes_its_entry_where_the_old_one_was(tmp_path, scheduler):
    log = open_log(str(tmp_path / "t-0"), scheduler)
    scripted(log)
    log.truncate_to(9)
    w = Writer(log)
    w.producers.load_from_log(log)  # a partition's replay after its truncation
    assert w.producers.txns.ongoing() == [(1, 7)]
    w.sequences[1] = 1
    assert w.marker(1, ABORT) == 9
    assert entries(log) == EXPECTED
    log.close()


# -- recovery ------------------------------------------------------------------------------------


def _crash_copy(directory: str, tmp_path) -> str:
    """The files of a closed log, copied as a crash left them (opened without the clean marker)."""
    copy = str(tmp_path / "copy" / os.path.basename(directory))
    shutil.copytree(directory, copy)
    return copy


@pytest.mark.parametrize("recovery_point, rebuilt_segments, rebuilt_entries", [
    (0, 2, 3),  # every segment is recovered; 4 and 7 hold markers
    (4, 2, 3),
    (7, 1, 2),  # only the last: its entries still need the transactions of segment 4 (p3's from 5)
    (11, 1, 2),
])
def test_recovery_rewrites_the_index_of_every_segment_it_recovers(tmp_path, scheduler, caplog, recovery_point,
                                                                   rebuilt_segments, rebuilt_entries):
    directory = str(tmp_path / "t-0")
    log = open_log(directory, scheduler)
    scripted(log)
    log.close()
    before = index_bytes(directory)
    # A crash may leave an index behind its segment (the entry not yet written) or ahead of
    # it: recovery writes it again whatever it held.
    os.truncate(os.path.join(directory, filename_prefix(7) + ".txnindex"), ABORTED_TXN_SIZE + 9)
    caplog.set_level(logging.INFO, logger="pylogq.storage")
    log = open_log(directory, scheduler, clean_shutdown=False, recovery_point=recovery_point)
    try:
        assert entries(log) == EXPECTED
        assert log.log_end_offset == 11 and log.recovered_bytes == 0
    finally:
        log.close()
    assert index_bytes(directory) == before
    # Segment 7 is recovered whatever the recovery point (it is the last); 4 from a point below 7.
    rebuilt = [r.getMessage() for r in caplog.records if "rebuilt the transaction indexes" in r.getMessage()]
    assert rebuilt == ["%s: rebuilt the transaction indexes of %d recovered segment(s): %d aborted transaction(s)"
                       % (directory, rebuilt_segments, rebuilt_entries)]


def test_a_log_without_transactions_is_not_replayed_by_recovery(tmp_path, scheduler, caplog):
    directory = str(tmp_path / "t-0")
    log = open_log(directory, scheduler)
    w = Writer(log)
    for _ in range(3):
        w.plain()
        log.roll()
    log.close()
    caplog.set_level(logging.INFO, logger="pylogq.storage")
    log = open_log(directory, scheduler, clean_shutdown=False, recovery_point=0)
    assert log.log_end_offset == 3 and txnindex_files(directory) == []
    assert not [r for r in caplog.records if "transaction index" in r.getMessage()]
    log.close()


DAMAGE = {
    "torn entry": lambda data: data[:-11],
    "garbage after": lambda data: data + b"\xff" * 20,
    "version": lambda data: b"\x00\x07" + data[2:],
    "out of order": lambda data: data[34:] + data[:34],
    "past the segment": lambda data: data + AbortedTxn(1, 9, 30, 31).pack(),
    "below the segment": lambda data: AbortedTxn(1, 0, 3, 4).pack() + data,
}


@pytest.mark.parametrize("clean", [True, False])
@pytest.mark.parametrize("damage", sorted(DAMAGE))
def test_a_damaged_index_is_rebuilt_never_a_failed_load(tmp_path, scheduler, caplog, damage, clean):
    directory = str(tmp_path / "t-0")
    log = open_log(directory, scheduler)
    w = scripted(log)
    log.roll()
    w.plain()  # segment 7 is below the recovery point: only its checks find the damage
    log.close()
    before = index_bytes(directory)
    path = os.path.join(directory, filename_prefix(7) + ".txnindex")
    with open(path, "rb") as f:
        data = f.read()
    with open(path, "wb") as f:
        f.write(DAMAGE[damage](data))
    log = open_log(directory, scheduler, clean_shutdown=clean, recovery_point=12)
    try:
        assert entries(log) == {**EXPECTED, 11: []}
        assert log.log_end_offset == 12 and log.recovered_bytes == 0
    finally:
        log.close()
    assert index_bytes(directory) == before
    assert any("recovering segment 7 to rebuild its transaction index" in r.getMessage() for r in caplog.records)


def test_a_segment_recovered_after_a_torn_marker_loses_only_that_entry(tmp_path, scheduler):
    directory = str(tmp_path / "t-0")
    log = open_log(directory, scheduler)
    scripted(log)
    marker = log.active_segment.translate_offset(9)
    path = log.active_segment.log_path
    log.close()
    # The process died while writing p1's last marker: the batch is cut, its entry was never written.
    with open(path, "r+b") as f:
        f.truncate(marker.position + marker.size - 3)
    txnindex = os.path.join(directory, filename_prefix(7) + ".txnindex")
    os.truncate(txnindex, ABORTED_TXN_SIZE)
    log = open_log(directory, scheduler, clean_shutdown=False, recovery_point=7)
    assert log.log_end_offset == 9
    assert entries(log) == {0: [], 4: EXPECTED[4], 7: EXPECTED[7][:1]}
    w = Writer(log)
    w.producers.load_from_log(log)
    assert w.producers.txns.ongoing() == [(1, 7)]  # its transaction is open again
    log.close()


def test_leftover_index_files_are_removed_on_open(tmp_path, scheduler):
    directory = str(tmp_path / "t-0")
    log = open_log(directory, scheduler)
    scripted(log)
    log.close()
    leftovers = [filename_prefix(99) + ".txnindex",  # no .log
                 filename_prefix(4) + ".txnindex.deleted", filename_prefix(7) + ".txnindex.cleaned",
                 filename_prefix(7) + ".txnindex.swap"]
    for name in leftovers:
        with open(os.path.join(directory, name), "wb") as f:
            f.write(AbortedTxn(1, 0, 4, 2).pack())
    log = open_log(directory, scheduler, clean_shutdown=True)
    assert entries(log) == EXPECTED
    log.close()
    assert txnindex_files(directory) == [filename_prefix(4) + ".txnindex", filename_prefix(7) + ".txnindex"]


# -- compaction ----------------------------------------------------------------------------------


def test_compaction_carries_the_entries_into_the_cleaned_segments(tmp_path):
    root = str(tmp_path / "logs")
    manager = LogManager(config=LogManagerConfig(log_dirs=[root], log_cleaner_enable=False,
                                                 log_cleaner_dedupe_buffer_size=24 * 4096), background=False)
    try:
        config = LogConfig(cleanup_policy="compact", segment_bytes=1024, file_delete_delay_ms=0,
                           message_timestamp_difference_max_ms=2**62)
        log = manager.get_or_create_log("t", 0, config)
        w = Writer(log)
        for round_ in range(4):
            for _ in range(3):
                w.plain(2, key=b"dup")  # overwritten keys: every round's segment shrinks
            w.data(10 + round_, 2)
            w.plain(1, key=b"other")
            w.marker(10 + round_, ABORT if round_ % 2 == 0 else COMMIT)
            log.roll()
        w.plain()
        before = entries(log)
        aborted = [t for ts in before.values() for t in ts]
        assert [t.producer_id for t in aborted] == [10, 12]
        segments_before = log.segments
        stats = LogCleaner(manager).clean_log(log)
        assert not stats.aborted and stats.bytes_written < stats.bytes_read
        assert any(s not in segments_before for s in log.segments)  # cleaned segments were swapped in
        assert [t for ts in entries(log).values() for t in ts] == aborted
        assert log.collect_aborted_transactions(0, log.log_end_offset) == aborted
        directory = log.directory
    finally:
        manager.close()
    assert not [n for n in txnindex_files(directory) if n.endswith((".cleaned", ".swap", ".deleted"))]
    log = Log(directory, config, clean_shutdown=True)
    assert [t for ts in entries(log).values() for t in ts] == aborted
    log.close()


def test_the_file_kafka_writes_is_read(tmp_path, scheduler):
    """A partition directory copied from Kafka: its .txnindex is read (the same bytes pylogq writes)."""
    directory = str(tmp_path / "t-0")
    log = open_log(directory, scheduler)
    scripted(log)
    log.close()
    path = os.path.join(directory, filename_prefix(7) + ".txnindex")
    kafka = b"".join(struct.pack(">hqqqq", 0, t.producer_id, t.first_offset, t.last_offset, t.last_stable_offset)
                     for t in EXPECTED[7])
    with open(path, "rb") as f:
        assert f.read() == kafka
    log = open_log(directory, scheduler, clean_shutdown=True)
    assert log.collect_aborted_transactions(7, 11) == EXPECTED[7]
    log.close()
