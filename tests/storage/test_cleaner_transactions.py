"""The log cleaner on logs with transactions (KIP-98), written through a Partition as the
producers and the transaction coordinator write them: only committed records are mapped,
aborted records go, markers and transaction index entries go once they mark nothing left and
their segment is past the delete horizon, nothing at or past the last stable offset is
cleaned, each producer's last batches stay, and read_committed and read_uncommitted readers,
and a reopened partition, see what they saw before, less what compaction may drop."""

from __future__ import annotations

import os
import random
import shutil
import struct
import time
from typing import Dict, List, Optional, Sequence, Tuple

import pytest

from pylogq import records
from pylogq.client.fetcher import _without_aborted
from pylogq.cluster.state.partition import Partition
from pylogq.config import LogConfig
from pylogq.records.control import ABORT, COMMIT, build_end_txn_marker
from pylogq.storage.cleaner import LogCleaner
from pylogq.storage.config import LogManagerConfig
from pylogq.storage.log import Log
from pylogq.storage.manager import LogManager
from pylogq.storage.transaction_index import AbortedTxn

TS = 1_700_000_000_000
RETENTION_MS = 60_000
MAP_MEMORY = 24 * 4096

Pair = Tuple[bytes, Optional[bytes]]
Row = Tuple[int, bytes, Optional[bytes]]


class Producer:
    """A transactional producer's keyed batches, its sequences kept."""

    def __init__(self, pid: int, epoch: int = 0) -> None:
        self.pid, self.epoch, self.seq = pid, epoch, 0

    def txn(self, *pairs: Pair, ts: int = TS) -> bytes:
        data = records.build_batch([v for _, v in pairs], keys=[k for k, _ in pairs], timestamps=ts,
                                   producer_id=self.pid, producer_epoch=self.epoch, base_sequence=self.seq,
                                   is_transactional=True)
        self.seq += len(pairs)
        return bytes(data)

    def marker(self, control_type: int, ts: int = TS, coordinator_epoch: int = 0) -> bytes:
        return bytes(build_end_txn_marker(self.pid, self.epoch, control_type, coordinator_epoch, ts))


def plain(*pairs: Pair, ts: int = TS) -> bytes:
    return bytes(records.build_batch([v for _, v in pairs], keys=[k for k, _ in pairs], timestamps=ts))


def _config(**overrides: object) -> LogConfig:
    settings = dict(cleanup_policy="compact", segment_bytes=1 << 20, file_delete_delay_ms=0,
                    delete_retention_ms=RETENTION_MS, message_timestamp_difference_max_ms=2**62)
    settings.update(overrides)
    return LogConfig(**settings)


class Env:
    """A managed compacted log, its partition (one replica unless told) and a cleaner."""

    def __init__(self, root: str, map_memory: int = MAP_MEMORY, **config: object) -> None:
        self.root = root
        self.map_memory = map_memory
        self.config = _config(**config)
        self.open()

    def open(self, **partition: object) -> None:
        self.manager = LogManager(config=LogManagerConfig(log_dirs=[self.root], log_cleaner_enable=False,
                                                          log_cleaner_dedupe_buffer_size=self.map_memory),
                                  topic_config=lambda topic: self.config, background=False)
        self.log = self.manager.get_or_create_log("t", 0, self.config)
        assert self.log.config is self.config
        self.part = Partition("t", 0, self.log, **partition)  # type: ignore[arg-type]
        self.cleaner = LogCleaner(self.manager)

    def close(self) -> None:
        self.part.close()
        self.manager.close()

    def data(self, batch: bytes) -> int:
        return self.part.append(batch).base_offset

    def marker(self, batch: bytes) -> int:
        return self.part.append(batch, origin="coordinator").base_offset

    def roll(self) -> None:
        self.log.roll()

    def clean(self):
        stats = self.cleaner.clean_log(self.log)
        assert not stats.aborted
        return stats


@pytest.fixture
def env(tmp_path):
    e = Env(str(tmp_path / "logs"))
    yield e
    e.close()


# -- reading ----------------------------------------------------------------------------


def _batches(data: bytes) -> List[records.RecordBatch]:
    return [records.RecordBatch(data, info.position) for info in records.iter_batches(data)]


def _rows(data: bytes) -> List[Row]:
    return [(r.offset, r.key, r.value) for b in _batches(data) if not b.is_control_batch for r in b.records()]


def committed(part: Partition) -> List[Row]:
    """What a read_committed consumer reads from the log start: Partition.read_committed's
    batches without those of the aborted transactions it lists (the consumer's own filter)."""
    out: List[Row] = []
    offset = part.log.log_start_offset
    while offset < part.last_stable_offset:
        region, _, aborted = part.read_committed(offset, 1 << 20)
        data = region.read()
        if not data:
            break
        out += [row for row in _rows(_without_aborted(data, aborted)) if row[0] >= offset]
        offset = _batches(data)[-1].last_offset + 1
    return out


def uncommitted(part: Partition) -> List[Row]:
    """What a read_uncommitted consumer reads from the log start: every data record below the HW."""
    out: List[Row] = []
    offset = part.log.log_start_offset
    while offset < part.high_watermark:
        data = part.read(offset, 1 << 20).read()
        if not data:
            break
        out += [row for row in _rows(data) if row[0] >= offset]
        offset = _batches(data)[-1].last_offset + 1
    return out


def latest(rows: Sequence[Row]) -> Dict[bytes, bytes]:
    """The latest value of every key (a tombstone: no value)."""
    out: Dict[bytes, Optional[bytes]] = {}
    for _, key, value in rows:
        out[key] = value
    return {k: v for k, v in out.items() if v is not None}


def all_batches(log: Log) -> List[records.RecordBatch]:
    out = []
    for s in log.segments:
        data = os.pread(s.file.fileno(), s.size, 0)
        out += _batches(data)
    return out


def markers(log: Log) -> List[Tuple[int, int, str]]:
    """(offset, producer id, "COMMIT", "ABORT" or "EMPTY") of every control batch in the log."""
    out = []
    for b in all_batches(log):
        if b.is_control_batch:
            recs = b.records()
            kind = "EMPTY" if not recs else {ABORT: "ABORT", COMMIT: "COMMIT"}[struct.unpack(">hh", recs[0].key)[1]]
            out.append((b.base_offset, b.producer_id, kind))
    return out


def index_entries(log: Log) -> Dict[int, List[AbortedTxn]]:
    return {s.base_offset: s.txn_index.all_aborted_txns() for s in log.segments if s.txn_index.entries}


def entries(log: Log) -> List[AbortedTxn]:
    return [txn for found in index_entries(log).values() for txn in found]


def segment_bytes(log: Log) -> Dict[int, bytes]:
    return {s.base_offset: os.pread(s.file.fileno(), s.size, 0) for s in log.segments}


# -- the offset map holds committed records only -----------------------------------------


def test_an_aborted_record_does_not_hide_the_committed_record_of_its_key(env):
    p1, p2 = Producer(1), Producer(2)
    env.data(p1.txn((b"K", b"v1")))
    env.marker(p1.marker(COMMIT))
    env.data(p2.txn((b"K", b"v2")))
    env.marker(p2.marker(ABORT))
    env.data(plain((b"other", b"x")))
    env.roll()
    env.data(plain((b"more", b"y")))
    env.roll()
    assert latest(committed(env.part))[b"K"] == b"v1"
    stats = env.clean()
    assert stats.end_offset == env.log.active_segment.base_offset
    # The aborted v2 was not mapped: the committed v1 stays, and read_committed still reads it.
    assert latest(committed(env.part)) == {b"K": b"v1", b"other": b"x", b"more": b"y"}
    assert [r[1:] for r in committed(env.part)] == [(b"K", b"v1"), (b"other", b"x"), (b"more", b"y")]
    # v2 was p2's last data batch: kept, empty, for p2's sequence, and so is its ABORT marker.
    assert [r[1:] for r in uncommitted(env.part)] == [(b"K", b"v1"), (b"other", b"x"), (b"more", b"y")]
    emptied = [b for b in all_batches(env.log) if b.producer_id == 2 and not b.is_control_batch]
    assert [(b.base_offset, b.last_offset, b.base_sequence, b.is_transactional, len(b.records()))
            for b in emptied] == [(2, 2, 0, True, 0)]


def test_control_records_and_aborted_records_are_not_mapped(env):
    """A data record whose key has a control record's bytes is not taken for one (nor the
    other way round), and the keys of aborted records do not reach the map."""
    p1 = Producer(1)
    control_key = b"\x00\x00\x00\x01"  # a COMMIT marker's key
    env.data(plain((control_key, b"data"), (b"A", b"1")))
    env.data(p1.txn((b"A", b"aborted"), (b"B", b"aborted")))
    env.marker(p1.marker(ABORT))  # p1's data batch is its last: kept, emptied
    env.data(p1.txn((b"C", b"1")))
    env.marker(p1.marker(COMMIT))
    env.roll()
    stats = env.clean()
    assert stats.aborted_records_dropped == 2
    assert [r[1:] for r in committed(env.part)] == [(control_key, b"data"), (b"A", b"1"), (b"C", b"1")]
    offset_map = env.cleaner._offset_map()
    assert offset_map.get(b"A") == 0 + 1 and offset_map.get(b"B") == -1
    assert offset_map.get(control_key) == 0


# -- aborted records, markers and index entries ----------------------------------------


def test_aborted_records_go_then_their_marker_and_index_entry_once_past_the_horizon(tmp_path):
    # One or two batches a segment, so that cleaned segments are not merged with newer ones (a
    # merged segment's largest timestamp is its newest batch's: Kafka's rule too).
    env = Env(str(tmp_path / "logs"), segment_bytes=150)
    try:
        p1 = Producer(1)
        env.data(p1.txn((b"x", b"aborted")))  # 0
        env.roll()
        abort_at = env.marker(p1.marker(ABORT))  # 1
        env.roll()
        env.data(p1.txn((b"y", b"1")))  # 2: p1's last data batch
        env.roll()
        env.marker(p1.marker(COMMIT))  # 3
        env.roll()
        entry = AbortedTxn(1, 0, abort_at, 2)
        assert index_entries(env.log) == {abort_at: [entry]}
        before = committed(env.part)

        # Clean 1 (no clean section: nothing is past the horizon): the aborted record goes, and
        # its index entry with it; a batch of its transaction was met, so the marker stays.
        stats = env.clean()
        assert stats.aborted_records_dropped == 1 and stats.markers_dropped == 0
        assert "1 records of aborted transactions and 0 transaction markers dropped" in stats.summary()
        assert [b.base_offset for b in all_batches(env.log)] == [1, 2, 3]
        assert [(o, t) for o, _, t in markers(env.log)] == [(1, "ABORT"), (3, "COMMIT")]
        assert index_entries(env.log) == {}
        assert env.log.collect_aborted_transactions(0, env.log.log_end_offset) == []
        assert committed(env.part) == before

        # Clean 2, within delete.retention.ms of the clean section: the ABORT marker marks
        # nothing left now, but its segment is not past the horizon: it stays.
        env.data(plain((b"z", b"1"), ts=TS + 1000))  # 4
        env.roll()
        stats = env.clean()
        assert stats.markers_dropped == 0
        assert [(o, t) for o, _, t in markers(env.log)] == [(1, "ABORT"), (3, "COMMIT")]
        assert committed(env.part) == before + [(4, b"z", b"1")]

        # Newer data more than delete.retention.ms later: once it is in the clean section the
        # marker's segment is past the horizon and the marker goes. The COMMIT marker of p1's
        # last data batch stays whatever the horizon.
        env.data(plain((b"w", b"1"), ts=TS + RETENTION_MS + 1000))  # 5
        env.roll()
        env.clean()
        env.data(plain((b"v", b"1"), ts=TS + RETENTION_MS + 2000))  # 6
        env.roll()
        stats = env.clean()
        assert stats.markers_dropped == 1
        assert [(o, t) for o, _, t in markers(env.log)] == [(3, "COMMIT")]
        assert committed(env.part) == before + [(4, b"z", b"1"), (5, b"w", b"1"), (6, b"v", b"1")]
        assert uncommitted(env.part) == committed(env.part)
    finally:
        env.close()


def test_commit_markers_go_only_once_their_records_are_gone_and_past_the_horizon(tmp_path):
    env = Env(str(tmp_path / "logs"), segment_bytes=150)
    try:
        p1, p2 = Producer(1), Producer(2)
        env.data(p1.txn((b"a", b"1")))  # 0
        env.roll()
        env.marker(p1.marker(COMMIT))  # 1: its record is overwritten below
        env.roll()
        env.data(p2.txn((b"b", b"1")))  # 2
        env.roll()
        env.marker(p2.marker(COMMIT))  # 3: its record stays (the latest of b)
        env.roll()
        env.data(plain((b"a", b"2")))  # 4
        env.roll()
        env.data(p1.txn((b"c", b"1")))  # 5: p1's last data batch
        env.roll()
        env.marker(p1.marker(COMMIT))  # 6
        env.roll()
        env.data(p2.txn((b"b", b"2")))  # 7: p2's last data batch; 2 is overwritten
        env.roll()
        env.marker(p2.marker(COMMIT))  # 8
        env.roll()
        want = {b"a": b"2", b"b": b"2", b"c": b"1"}
        env.clean()  # the records at 0 and 2 go; their markers stay (their batches were met)
        assert [o for o, _, _ in markers(env.log)] == [1, 3, 6, 8]
        assert latest(committed(env.part)) == want
        env.data(plain((b"d", b"1"), ts=TS + 1000))  # 9
        env.roll()
        env.clean()  # markers 1 and 3 mark nothing left, but are within the horizon
        assert [o for o, _, _ in markers(env.log)] == [1, 3, 6, 8]
        env.data(plain((b"e", b"1"), ts=TS + RETENTION_MS + 1000))
        env.roll()
        env.clean()
        env.data(plain((b"f", b"1"), ts=TS + RETENTION_MS + 2000))
        env.roll()
        stats = env.clean()
        assert stats.markers_dropped == 2
        assert [o for o, _, _ in markers(env.log)] == [6, 8]
        assert latest(committed(env.part)) == {**want, b"d": b"1", b"e": b"1", b"f": b"1"}
    finally:
        env.close()


# -- the last stable offset bounds the clean -------------------------------------------


def test_an_open_transaction_and_what_follows_it_are_not_cleaned(env):
    p1 = Producer(1)
    env.data(plain((b"K", b"v1")))  # 0
    env.data(plain((b"J", b"1")))  # 1
    env.roll()
    env.data(plain((b"J", b"2")))  # 2
    env.data(p1.txn((b"K", b"v2")))  # 3: open
    env.data(plain((b"K", b"v3")))  # 4: above the last stable offset
    env.roll()
    env.data(plain((b"K", b"v4"), (b"J", b"3")))  # 5, 6
    env.roll()
    assert env.part.last_stable_offset == 3 and env.log.stable_offset == 3
    target = env.cleaner.cleanable(env.log)
    assert (target.first_dirty_offset, target.first_uncleanable_offset) == (0, 2)
    open_segments = {b: d for b, d in segment_bytes(env.log).items() if b >= 2}
    stats = env.clean()
    assert stats.end_offset == 2
    # Only the segment below the one holding the open transaction was cleaned: K=v1 and J=1
    # stay (newer values of both lie in the segments left whole).
    assert {b: d for b, d in segment_bytes(env.log).items() if b >= 2} == open_segments
    assert [r[1:] for r in committed(env.part)] == [(b"K", b"v1"), (b"J", b"1"), (b"J", b"2")]
    env.marker(p1.marker(COMMIT))  # 7
    env.roll()
    assert env.part.last_stable_offset == 8
    env.clean()
    assert [r[1:] for r in committed(env.part)] == [(b"K", b"v4"), (b"J", b"3")]


def test_records_above_the_high_watermark_are_not_cleaned(tmp_path):
    root = str(tmp_path / "logs")
    env = Env(root)
    try:
        env.part.close()
        env.part = Partition("t", 0, env.log, high_watermark=0, single_replica=False)
        env.data(plain((b"K", b"v1")))  # 0
        env.roll()
        env.data(plain((b"K", b"v2")))  # 1: not replicated yet
        env.roll()
        env.data(plain((b"K", b"v3")))  # 2
        env.part.update_high_watermark(1)
        assert env.log.high_watermark == 1 and env.log.stable_offset == 1
        assert env.clean().end_offset == 1
        assert [r[1:] for r in _rows(segment_bytes(env.log)[0])] == [(b"K", b"v1")]
        env.part.update_high_watermark(3)
        assert env.clean().end_offset == 2
        assert [r[1:] for b, d in sorted(segment_bytes(env.log).items()) for r in _rows(d)] == [(b"K", b"v2"),
                                                                                                (b"K", b"v3")]
        # A log whose partition is not open yet takes the checkpointed high watermark.
        env.manager.checkpoint_high_watermarks({("t", 0): 2})
        env.close()
        manager = LogManager(config=LogManagerConfig(log_dirs=[root], log_cleaner_enable=False), background=False)
        try:
            log = manager.get_log("t", 0)
            assert log is not None and log.high_watermark == 2 and log.stable_offset == 2
        finally:
            manager.close()
    finally:
        if not env.part.closed:
            env.close()


def test_a_log_no_partition_replicates_is_cleaned_up_to_its_active_segment(tmp_path):
    manager = LogManager(config=LogManagerConfig(log_dirs=[str(tmp_path)], log_cleaner_enable=False),
                         background=False)
    try:
        log = manager.get_or_create_log("t", 0, _config())
        log.append(plain((b"K", b"v1")))
        log.roll()
        log.append(plain((b"K", b"v2")))
        log.roll()
        assert log.high_watermark is None and log.stable_offset == log.log_end_offset == 2
        assert LogCleaner(manager).clean_log(log).end_offset == 2
        assert [r[1:] for r in _rows(segment_bytes(log)[0])] == [(b"K", b"v2")]
    finally:
        manager.close()


# -- before the partition opens: the log's own last stable offset ------------------------


def _reopened(root: str, config: LogConfig, **settings: object) -> LogManager:
    """The log manager of ``root`` opened again as a broker opens it, before any partition:
    its cleaner thread (when ``log_cleaner_enable``) starts at once."""
    options = dict(log_dirs=[root], log_cleaner_enable=False, log_cleaner_backoff_ms=10)
    options.update(settings)
    return LogManager(config=LogManagerConfig(**options), topic_config=lambda topic: config,  # type: ignore[arg-type]
                      background=bool(options["log_cleaner_enable"]))


def _wait_for_a_clean(manager: LogManager, log: Log) -> int:
    """The first dirty offset the manager's cleaner thread checkpointed for ``log`` once it cleaned it."""
    cleaner = manager.cleaner
    assert cleaner is not None
    deadline = time.monotonic() + 30
    while True:
        found = cleaner.checkpointed_offset(log)
        if found is not None:
            return found
        assert time.monotonic() < deadline, "the cleaner did not clean %s" % log.directory
        time.sleep(0.01)


def test_a_clean_before_the_partition_reopens_keeps_the_committed_record_an_open_transaction_would_hide(tmp_path):
    """A restart with a transaction open: the cleaner starts with the log manager, before the
    partition opens and replays its producers. The log replays its own transactions, so the
    open transaction's record of K is not taken as committed: the committed record of K stays,
    and once the transaction aborts read_committed readers still see it."""
    root = str(tmp_path / "logs")
    env = Env(root)
    p1 = Producer(1)
    env.data(plain((b"K", b"committed")))  # 0
    env.roll()
    env.data(p1.txn((b"K", b"pending")))  # 1: open at the restart
    env.data(plain((b"J", b"1")))  # 2
    env.roll()
    env.data(plain((b"J", b"2")))  # 3
    env.roll()
    assert env.part.last_stable_offset == 1
    env.manager.checkpoint_high_watermarks({("t", 0): env.part.high_watermark})  # as the broker does
    env.close()
    manager = _reopened(root, env.config, log_cleaner_enable=True)
    try:
        log = manager.get_log("t", 0)
        assert log is not None and log.high_watermark == 4
        # The cleaner's first pass: only the segment below the open transaction's.
        assert _wait_for_a_clean(manager, log) == 1
        assert log.first_unstable_offset == 1 and log.stable_offset == 1
        part = Partition("t", 0, log)  # the broker opens the partition after the log manager
        try:
            assert part.last_stable_offset == 1
            assert latest(committed(part)) == {b"K": b"committed"}
            part.append(p1.marker(ABORT), origin="coordinator")  # 4: the coordinator aborts it
            log.roll()
            assert latest(committed(part)) == {b"K": b"committed", b"J": b"2"}
            manager.cleaner.clean_log(log)  # type: ignore[union-attr]
            assert latest(committed(part)) == {b"K": b"committed", b"J": b"2"}
            assert [r[1:] for r in committed(part)] == [(b"K", b"committed"), (b"J", b"2")]
        finally:
            part.close()
    finally:
        manager.close()


def test_a_log_without_transactions_is_cleaned_after_a_restart_before_its_partition_opens(tmp_path):
    root = str(tmp_path / "logs")
    env = Env(root)
    for i in range(3):
        env.data(plain((b"K", b"v%d" % i), (b"J%d" % i, b"x")))
        env.roll()
    env.manager.checkpoint_high_watermarks({("t", 0): env.part.high_watermark})
    env.close()
    manager = _reopened(root, env.config, log_cleaner_enable=True)
    try:
        log = manager.get_log("t", 0)
        assert log is not None
        assert _wait_for_a_clean(manager, log) == 6
        assert log.first_unstable_offset is None and log.stable_offset == 6
        assert [r[1:] for r in _rows(b"".join(d for _, d in sorted(segment_bytes(log).items())))] == [
            (b"J0", b"x"), (b"J1", b"x"), (b"K", b"v2"), (b"J2", b"x")]
    finally:
        manager.close()


def test_a_log_no_partition_replicates_follows_its_own_transactions(tmp_path):
    """Without a partition the log replays what was appended since it last looked: a transaction
    open, decided, decided above the high watermark; a truncation; the log start moving past
    what it replayed. A partition's word, once given, is the last."""
    manager = _reopened(str(tmp_path), _config())
    try:
        log = manager.get_or_create_log("t", 0, _config())
        p1, p2 = Producer(1), Producer(2)
        log.append(plain((b"K", b"v1")))  # 0
        assert log.first_unstable_offset is None and log.stable_offset == 1
        log.append(p1.txn((b"K", b"v2")))  # 1
        log.append(plain((b"J", b"x")))  # 2
        log.append(p2.txn((b"J", b"y")))  # 3
        assert log.first_unstable_offset == 1 and log.stable_offset == 1
        log.append(p1.marker(COMMIT))  # 4
        assert log.first_unstable_offset == 3 and log.stable_offset == 3
        log.update_high_watermark(5)
        log.append(p2.marker(ABORT))  # 5: decided, not below the high watermark yet
        assert log.first_unstable_offset == 3 and log.stable_offset == 3
        log.update_high_watermark(6)
        assert log.first_unstable_offset is None and log.stable_offset == 6
        log.update_high_watermark(None)
        log.append(p1.txn((b"K", b"v3")))  # 6
        assert log.first_unstable_offset == 6
        assert log.truncate_to(6)
        assert log.first_unstable_offset is None and log.stable_offset == 6
        log.append(p1.txn((b"K", b"v3")))  # 6
        log.roll()
        log.append(plain((b"J", b"z")))  # 7
        assert log.first_unstable_offset == 6
        log.delete_records_before(7)  # the segment holding offset 6 goes
        assert log.first_unstable_offset == 7 and log.stable_offset == 7  # never below the log start
        log.append(p1.marker(COMMIT))  # 8
        assert log.first_unstable_offset is None and log.stable_offset == 9
        log.append(p2.txn((b"J", b"w")))  # 9
        assert log.first_unstable_offset == 9
        part = Partition("t", 0, log)
        try:
            assert part.first_unstable_offset == log.first_unstable_offset == 9
            log.update_first_unstable_offset(None)  # the partition's word is the log's
            assert log.first_unstable_offset is None
        finally:
            part.close()
    finally:
        manager.close()


# -- producers' last batches ----------------------------------------------------------


def test_a_producers_last_data_batch_stays_empty_with_its_marker(tmp_path):
    env = Env(str(tmp_path / "logs"), segment_bytes=150)  # cleaned segments not merged with newer ones
    try:
        _last_batches(env)
    finally:
        env.close()


def _last_batches(env: Env) -> None:
    p1, p2 = Producer(1), Producer(2)
    env.data(p1.txn((b"a", b"1"), (b"b", b"1")))  # 0, 1
    env.marker(p1.marker(COMMIT))  # 2
    env.data(p1.txn((b"a", b"2")))  # 3: p1's last data batch, overwritten below
    env.marker(p1.marker(COMMIT, coordinator_epoch=3))  # 4
    env.data(p2.txn((b"c", b"1"), (b"c", b"2")))  # 5, 6: p2's last data batch, aborted
    env.marker(p2.marker(ABORT))  # 7
    env.data(plain((b"a", b"3"), (b"b", b"3")))  # 8, 9
    env.roll()
    producers = env.part.active_producers()
    env.clean()
    kept = [(b.base_offset, b.last_offset, b.producer_id, b.base_sequence, b.is_transactional, b.is_control_batch,
             len(b.records())) for b in all_batches(env.log) if b.producer_id >= 0]
    assert kept == [
        (2, 2, 1, -1, True, True, 1),  # its batch 0..1 was met this clean
        (3, 3, 1, 2, True, False, 0),  # p1's last data batch, emptied, last sequence kept
        (4, 4, 1, -1, True, True, 1),
        (5, 6, 2, 0, True, False, 0),  # p2's last data batch, aborted: emptied
        (7, 7, 2, -1, True, True, 1),  # its ABORT marker and index entry stay with it
    ]
    assert entries(env.log) == [AbortedTxn(2, 5, 7, 8)]
    # The emptied batches are met again by every later clean: their markers stay for good.
    env.data(plain((b"d", b"1"), ts=TS + RETENTION_MS * 2))
    env.roll()
    env.clean()
    env.data(plain((b"e", b"1"), ts=TS + RETENTION_MS * 3))
    env.roll()
    env.clean()
    assert [o for o, _, _ in markers(env.log)] == [4, 7]
    assert entries(env.log) == [AbortedTxn(2, 5, 7, 8)]
    assert [r[1:] for r in committed(env.part)] == [(b"a", b"3"), (b"b", b"3"), (b"d", b"1"), (b"e", b"1")]
    env.close()
    env.open()
    assert env.part.active_producers() == producers


def test_a_fencing_abort_with_a_newer_epoch_stays_as_its_producers_last_control_batch(env):
    p1 = Producer(1)
    env.data(p1.txn((b"a", b"1")))  # 0
    env.marker(p1.marker(COMMIT))  # 1
    env.data(plain((b"a", b"2")))  # 2
    fenced = Producer(1, epoch=1)
    env.marker(fenced.marker(ABORT, coordinator_epoch=2))  # 3: an abort with no data, a newer epoch
    env.data(plain((b"x", b"1"), ts=TS + RETENTION_MS * 2))
    env.roll()
    env.data(plain((b"y", b"1"), ts=TS + RETENTION_MS * 3))
    env.roll()
    producers = env.part.active_producers()
    assert [(p.producer_id, p.producer_epoch, p.coordinator_epoch) for p in producers] == [(1, 1, 2)]
    for _ in range(3):
        env.clean()
    assert [(o, t) for o, _, t in markers(env.log)] == [(1, "COMMIT"), (3, "ABORT")]
    env.close()
    env.open()
    assert env.part.active_producers() == producers


# -- readers and restarts see the same log ----------------------------------------------


def _random_history(env: Env, rng: random.Random, steps: int) -> None:
    """Random plain batches, transactions of three producers committed or aborted (some left
    open), keys from a small set (tombstones too), random rolls, time moving on."""
    if not hasattr(env, "producers"):
        env.producers = [Producer(pid) for pid in (11, 12, 13)]  # type: ignore[attr-defined]
        env.open_txn = {p.pid: False for p in env.producers}  # type: ignore[attr-defined]
        env.ts = TS  # type: ignore[attr-defined]
    producers, open_txn = env.producers, env.open_txn  # type: ignore[attr-defined]
    keys = [b"k%d" % i for i in range(6)]
    ts = env.ts  # type: ignore[attr-defined]

    def pairs() -> List[Pair]:
        return [(rng.choice(keys), None if rng.random() < 0.1 else b"v%d" % rng.randrange(1000))
                for _ in range(rng.randint(1, 3))]

    for _ in range(steps):
        ts += rng.randrange(0, 20_000)
        choice = rng.random()
        p = rng.choice(producers)
        if choice < 0.3:
            env.data(plain(*pairs(), ts=ts))
        elif choice < 0.65:
            env.data(p.txn(*pairs(), ts=ts))
            open_txn[p.pid] = True
        elif choice < 0.9:
            if open_txn[p.pid] or rng.random() < 0.2:  # sometimes a marker with no data here
                env.marker(p.marker(ABORT if rng.random() < 0.5 else COMMIT, ts=ts))
                open_txn[p.pid] = False
        else:
            env.roll()
    env.roll()
    env.ts = ts  # type: ignore[attr-defined]


def _check_allowed(before_c: List[Row], before_u: List[Row], after_c: List[Row], after_u: List[Row],
                   end: int) -> None:
    """After a clean the readers see a subset of what they saw, the same latest value of every
    key, and everything at or past the cleaned section's end; what a read_uncommitted reader
    lost is aborted, or a committed record with a newer one of its key."""
    assert latest(after_c) == latest(before_c)
    assert set(after_c) <= set(before_c) and after_c == sorted(after_c)
    assert set(after_u) <= set(before_u) and after_u == sorted(after_u)
    assert [r for r in after_c if r[0] >= end] == [r for r in before_c if r[0] >= end]
    assert [r for r in after_u if r[0] >= end] == [r for r in before_u if r[0] >= end]
    newest = {}
    for offset, key, _ in before_c:
        newest[key] = offset
    committed_offsets = set(r[0] for r in before_c)
    for offset, key, value in set(before_u) - set(after_u):
        assert offset not in committed_offsets or newest[key] > offset or value is None, (offset, key)
    assert set(after_c) <= set(after_u) | set(r for r in before_c if r[0] >= end)


def test_readers_see_the_same_log_less_what_compaction_may_drop_and_a_restart_rebuilds_the_same_state(tmp_path):
    done: Dict[str, int] = {"aborted_records_dropped": 0, "markers_dropped": 0, "empty_batches_kept": 0,
                            "tombstones_dropped": 0, "open transactions": 0, "map filled": 0}
    for seed in range(9):
        rng = random.Random(seed)
        # The last seeds' map holds 3 keys: cleans end where it fills, within a segment.
        env = Env(str(tmp_path / str(seed)), map_memory=24 * (4 if seed >= 6 else 4096), segment_bytes=600,
                  delete_retention_ms=5_000)
        try:
            for _ in range(4):
                _random_history(env, rng, 30)
                _clean_and_compare(env, done)
        finally:
            env.close()
    # The histories met every case: aborted records, markers past the horizon, producers'
    # last batches emptied, cleans bounded by an open transaction.
    assert all(done.values()), done


def _clean_and_compare(env: Env, done: Dict[str, int]) -> None:
    before_c, before_u = committed(env.part), uncommitted(env.part)
    producers, lso = env.part.active_producers(), env.part.last_stable_offset
    ongoing = env.part.producer_state.txns.ongoing()
    stats = env.clean()
    for name in done:
        done[name] += getattr(stats, name, 0)
    done["open transactions"] += bool(ongoing)
    done["map filled"] += stats.end_offset < env.cleaner.cleanable(env.log).first_uncleanable_offset
    after_c, after_u = committed(env.part), uncommitted(env.part)
    _check_allowed(before_c, before_u, after_c, after_u, stats.end_offset)
    assert stats.end_offset <= lso
    # Every index entry left has its marker and a batch of its transaction in the log.
    batches = all_batches(env.log)
    for txn in entries(env.log):
        assert any(b.is_control_batch and b.base_offset == txn.last_offset for b in batches)
        assert any(b.producer_id == txn.producer_id and not b.is_control_batch
                   and txn.first_offset <= b.base_offset < txn.last_offset for b in batches)
    # A reopened log (its producer state replayed from what the clean left) is the same
    # partition: the same producers, open transactions and last stable offset. Before the
    # partition opens, the log's own replay of its transactions says the same.
    env.close()
    manager = _reopened(env.root, env.config)
    try:
        log = manager.get_log("t", 0)
        assert log is not None and log.stable_offset == lso
        first_unstable = log.first_unstable_offset
    finally:
        manager.close()
    env.open()
    assert env.part.first_unstable_offset == first_unstable
    assert env.part.active_producers() == producers
    assert env.part.producer_state.txns.ongoing() == ongoing
    assert env.part.last_stable_offset == lso
    assert (committed(env.part), uncommitted(env.part)) == (after_c, after_u)


@pytest.mark.parametrize("seed", range(3))
def test_a_crash_after_a_clean_recovers_the_same_producers_and_readers(tmp_path, seed):
    """Recovery of every segment (no clean-shutdown marker, no recovery point) replays the
    cleaned log and rewrites its transaction indexes: readers and producers are as they were."""
    rng = random.Random(100 + seed)
    env = Env(str(tmp_path / "logs"), segment_bytes=600)
    try:
        _random_history(env, rng, 60)
        env.clean()
        _random_history(env, rng, 20)
        env.clean()
        expected = (env.part.active_producers(), env.part.producer_state.txns.ongoing(),
                    env.part.last_stable_offset, committed(env.part), uncommitted(env.part))
        directory = env.log.directory
    finally:
        env.close()
    copy = str(tmp_path / "crash" / "t-0")
    shutil.copytree(directory, copy)
    for name in os.listdir(copy):
        if name.endswith(".txnindex"):
            os.truncate(os.path.join(copy, name), 0)
    log = Log(copy, _config(), clean_shutdown=False, recovery_point=0)
    try:
        part = Partition("t", 0, log)
        assert (part.active_producers(), part.producer_state.txns.ongoing(), part.last_stable_offset,
                committed(part), uncommitted(part)) == expected
        part.close()
    finally:
        log.close()
