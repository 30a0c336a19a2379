"""The log cleaner on real segment files: what compaction keeps, drops and preserves."""

from __future__ import annotations

import os
import struct
import shutil
import tempfile
import threading
import time
from typing import Dict, List, Optional, Tuple

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pylogq import records
from pylogq.errors import OffsetOutOfRangeError
from pylogq.storage.checkpoint import CLEANER_CHECKPOINT, OffsetCheckpoint
from pylogq.storage.cleaner import CleanerStats, LogCleaner, Throttler, group_segments_by_size
from pylogq.config import LogConfig
from pylogq.storage.config import LogManagerConfig
from pylogq.storage.log import Log
from pylogq.storage.manager import LogManager
from pylogq.storage.scheduler import Scheduler
from pylogq.storage.segment import LogSegment

MAP_MEMORY = 24 * 4096


class FakeClock:
    def __init__(self, now: float = 1_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def _manager(root: str, **settings: object) -> LogManager:
    settings.setdefault("log_cleaner_dedupe_buffer_size", MAP_MEMORY)
    cfg = LogManagerConfig(log_dirs=[os.path.join(root, "logs")], log_cleaner_enable=False, **settings)
    return LogManager(config=cfg, background=False)


def _config(**overrides: object) -> LogConfig:
    settings = dict(cleanup_policy="compact", segment_bytes=1024, file_delete_delay_ms=0,
                    message_timestamp_difference_max_ms=2**62)
    settings.update(overrides)
    return LogConfig(**settings)


def _append(log: Log, pairs: List[Tuple[bytes, Optional[bytes]]], timestamp: int, codec: str = "none",
            **producer: int) -> None:
    keys = [k for k, _ in pairs]
    values = [v for _, v in pairs]
    log.append(bytes(records.build_batch(values, keys=keys, timestamps=timestamp, compression_type=codec,
                                         **producer)))


def _batches(log: Log) -> List[records.RecordBatch]:
    """Every v2 batch of the log, read through Log.read from the log start."""
    out = []
    offset = log.log_start_offset
    while offset < log.log_end_offset:
        data = log.read(offset, 1 << 20).read()
        assert data, "no data at offset %d below the log end %d" % (offset, log.log_end_offset)
        for info in records.iter_batches(data):
            batch = records.RecordBatch(data, info.position)
            out.append(batch)
            offset = batch.last_offset + 1
    return out


def _records(log: Log) -> List[records.Record]:
    return [r for b in _batches(log) for r in b.records()]


def _active_bytes(log: Log) -> bytes:
    seg = log.active_segment
    return os.pread(seg.file.fileno(), seg.size, 0)


@pytest.fixture
def manager(tmp_path):
    m = _manager(str(tmp_path))
    yield m
    m.close()


# -- the model test --------------------------------------------------------------------

KEYS = [b"k%d" % i for i in range(12)]
OP = st.tuples(st.integers(0, len(KEYS) - 1), st.one_of(st.none(), st.binary(min_size=1, max_size=30)))
WORKLOAD = st.lists(st.tuples(st.lists(OP, min_size=1, max_size=8), st.booleans()), min_size=1, max_size=25)


def _run_workload(log: Log, workload, clock: FakeClock) -> Dict[int, Tuple[bytes, Optional[bytes]]]:
    """Append the workload, one batch per step (timestamps rising), rolling where asked."""
    written: Dict[int, Tuple[bytes, Optional[bytes]]] = {}
    for step, (ops, roll) in enumerate(workload):
        pairs = [(KEYS[k], v) for k, v in ops]
        first = log.log_end_offset
        _append(log, pairs, timestamp=int(clock.now * 1000))
        for i, pair in enumerate(pairs):
            written[first + i] = pair
        clock.now += 1.0
        if roll:
            log.roll()
    log.roll()  # everything written becomes cleanable; the active segment is empty
    _append(log, [(KEYS[0], b"active")], timestamp=int(clock.now * 1000))
    written[log.log_end_offset - 1] = (KEYS[0], b"active")
    return written


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(workload=WORKLOAD, retention_passed=st.booleans(), segment_bytes=st.sampled_from([300, 700, 4000]))
def test_compaction_keeps_exactly_the_latest_value_of_every_key(workload, retention_passed, segment_bytes):
    root = tempfile.mkdtemp()
    clock = FakeClock()
    manager = LogManager(config=LogManagerConfig(log_dirs=[root], log_cleaner_enable=False,
                                                 log_cleaner_dedupe_buffer_size=MAP_MEMORY),
                         background=False, clock=clock)
    try:
        retention = 0 if retention_passed else 10**9
        log = manager.get_or_create_log("t", 0, _config(segment_bytes=segment_bytes,
                                                        delete_retention_ms=retention))
        written = _run_workload(log, workload, clock)
        active_before = _active_bytes(log)
        cleaner = LogCleaner(manager)
        cleanable_end = log.active_segment.base_offset
        stats = cleaner.clean_log(log)
        assert not stats.aborted and stats.end_offset == cleanable_end
        assert cleaner.checkpointed_offset(log) == cleanable_end

        latest: Dict[bytes, int] = {}
        for offset in sorted(written):
            if offset < cleanable_end:
                latest[written[offset][0]] = offset
        expected = {off: written[off] for off in latest.values()}

        def check(tombstones_kept: bool) -> None:
            got = _records(log)
            offsets = [r.offset for r in got]
            assert offsets == sorted(set(offsets)), "offsets must increase, without duplicates"
            cleaned = {r.offset: (r.key, r.value) for r in got if r.offset < cleanable_end}
            want = {o: kv for o, kv in expected.items() if tombstones_kept or kv[1] is not None}
            assert cleaned == want  # one record per key, the latest, at its original offset
            assert _active_bytes(log) == active_before

        check(tombstones_kept=True)  # the first clean has no clean section: no delete horizon
        stats = cleaner.clean_log(log)
        assert not stats.aborted
        check(tombstones_kept=not retention_passed)
        tombstones = sum(1 for _, v in expected.values() if v is None)
        assert stats.tombstones_dropped == (tombstones if retention_passed else 0)
    finally:
        manager.close()
        shutil.rmtree(root)  # one directory per example: tmp_path is the whole test's


def test_tombstones_survive_until_delete_retention_has_passed(tmp_path):
    clock = FakeClock()
    manager = LogManager(config=LogManagerConfig(log_dirs=[str(tmp_path)], log_cleaner_enable=False,
                                                 log_cleaner_dedupe_buffer_size=MAP_MEMORY),
                         background=False, clock=clock)
    # Segments of one or two batches, so cleaned segments are not merged with newer ones:
    # a merged segment's largest timestamp is its newest batch's (Kafka's rule too).
    log = manager.get_or_create_log("t", 0, _config(delete_retention_ms=60_000, segment_bytes=150))
    _append(log, [(b"a", b"1"), (b"b", b"1")], timestamp=1_000_000)
    _append(log, [(b"a", None)], timestamp=1_000_000)
    log.roll()
    _append(log, [(b"c", b"1")], timestamp=1_030_000)  # 30 s later: within delete.retention.ms
    log.roll()
    cleaner = LogCleaner(manager)
    cleaner.clean_log(log)
    _append(log, [(b"d", b"1")], timestamp=1_030_000)
    log.roll()
    cleaner.clean_log(log)
    assert [(r.key, r.value) for r in _records(log)] == [(b"b", b"1"), (b"a", None), (b"c", b"1"), (b"d", b"1")]
    _append(log, [(b"e", b"1")], timestamp=1_061_000)  # 61 s after the tombstone's segment
    log.roll()
    cleaner.clean_log(log)
    _append(log, [(b"f", b"1")], timestamp=1_062_000)
    log.roll()
    stats = cleaner.clean_log(log)
    assert stats.tombstones_dropped == 1
    assert [r.key for r in _records(log)] == [b"b", b"c", b"d", b"e", b"f"]
    manager.close()


# -- batches: idempotent producers, codecs, legacy, control ------------------------------


def test_an_emptied_idempotent_batch_stays_with_its_offsets_and_last_sequence(manager):
    log = manager.get_or_create_log("t", 0, _config())
    _append(log, [(b"a", b"1"), (b"b", b"1"), (b"c", b"1")], 1000, producer_id=7, producer_epoch=0,
            base_sequence=0)
    _append(log, [(b"x", b"1"), (b"y", b"1")], 1000, producer_id=7, producer_epoch=0, base_sequence=3)
    _append(log, [(b"a", b"2"), (b"b", b"2"), (b"c", b"2"), (b"x", b"2"), (b"y", b"2")], 1000)
    log.roll()
    before = _batches(log)
    LogCleaner(manager).clean_log(log)
    after = _batches(log)
    # The producer's first batch is gone (a later one of it remains); the last stays, empty.
    assert [b.base_offset for b in after] == [3, 5]
    empty = after[0]
    assert empty.records_count == 0 and empty.records() == []
    assert empty.size_in_bytes == records.HEADER_SIZE
    assert (empty.base_offset, empty.last_offset_delta) == (before[1].base_offset, before[1].last_offset_delta)
    assert (empty.producer_id, empty.producer_epoch, empty.base_sequence) == (7, 0, 3)
    assert empty.last_sequence == before[1].last_sequence == 4
    assert empty.max_timestamp == before[1].max_timestamp
    assert empty.validate_crc()
    assert after[1].records_count == 5


def test_a_partly_kept_batch_keeps_its_last_offset_delta_and_sequence(manager):
    log = manager.get_or_create_log("t", 0, _config())
    _append(log, [(b"a", b"1"), (b"b", b"1"), (b"c", b"1")], 1000, producer_id=9, producer_epoch=2,
            base_sequence=10, partition_leader_epoch=0)
    _append(log, [(b"c", b"2")], 1001)
    log.roll()
    original = _batches(log)[0]
    LogCleaner(manager).clean_log(log)
    batch = _batches(log)[0]
    assert [(r.offset, r.key) for r in batch.records()] == [(0, b"a"), (1, b"b")]
    assert batch.last_offset_delta == original.last_offset_delta == 2
    assert batch.last_sequence == original.last_sequence == 12
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (9, 2, 10)
    assert batch.validate_crc()


@pytest.mark.parametrize("codec", ["gzip", "lz4", "zstd", "snappy"])
def test_partly_kept_compressed_batches_are_recompressed_with_their_codec(manager, codec):
    log = manager.get_or_create_log("t", 0, _config(segment_bytes=1 << 20))
    pairs = [(b"key-%d" % (i % 7), b"value %d " % i * 10) for i in range(40)]
    _append(log, pairs, 1000, codec=codec)
    _append(log, [(b"key-3", b"new")], 1001, codec=codec)
    log.roll()
    LogCleaner(manager).clean_log(log)
    batches = _batches(log)
    assert [b.compression_type for b in batches] == [records.codecs.codec_id(codec)] * 2
    got = [(r.offset, r.key, r.value) for b in batches for r in b.records()]
    latest = {k: (i, v) for i, (k, v) in enumerate(pairs) if k != b"key-3"}
    assert got == sorted([(i, k, v) for k, (i, v) in latest.items()]) + [(40, b"key-3", b"new")]


def test_null_keys_are_dropped_and_control_batches_kept(tmp_path):
    manager = _manager(str(tmp_path))
    log = manager.get_or_create_log("t", 0, _config(cleanup_policy="delete"))
    _append(log, [(None, b"no key"), (b"a", b"1")], 1000)
    control = records.RecordBatchBuilder(is_control=True, is_transactional=True, producer_id=5, producer_epoch=0)
    control.append(0, 1000, struct.pack(">hh", 0, 1), b"\x00\x00\x00\x00\x00\x00")
    log.append_as_follower(bytes(_with_base(control.build(), log.log_end_offset)))
    _append(log, [(b"a", b"2")], 1001)
    log.roll()
    stats = LogCleaner(manager).clean_log(log)
    kept = _batches(log)
    assert [(b.base_offset, b.is_control_batch) for b in kept] == [(2, True), (3, False)]
    assert stats.records_read == 3 and stats.records_kept == 1
    manager.close()


def _with_base(batch: bytearray, base_offset: int) -> bytearray:
    struct.pack_into(">q", batch, 0, base_offset)
    return batch


def test_legacy_messages_are_kept_whole_or_dropped(manager):
    from pylogq.records.legacy import LegacyRecordBatchBuilder

    log = manager.get_or_create_log("t", 0, _config(segment_bytes=1 << 20))
    plain = LegacyRecordBatchBuilder(1)
    plain.append(0, 1000, b"a", b"old")
    plain.append(1, 1000, b"b", b"keep")
    log.append_as_follower(bytes(plain.build()))
    wrapped = LegacyRecordBatchBuilder(1, "gzip")
    wrapped.append(2, 1000, b"c", b"old")
    wrapped.append(3, 1000, b"d", b"keep")
    log.append_as_follower(bytes(wrapped.build()))
    _append(log, [(b"a", b"new"), (b"c", b"new")], 1001)
    log.roll()
    stats = LogCleaner(manager).clean_log(log)
    data = log.read(0, 1 << 20).read()
    cols = records.decode_columns(data)
    # The uncompressed message of "a" goes; the compressed wrapper stays whole ("d" is live).
    assert [(int(o), cols.key(i), cols.value(i)) for i, o in enumerate(cols.offsets)] == [
        (1, b"b", b"keep"), (2, b"c", b"old"), (3, b"d", b"keep"), (4, b"a", b"new"), (5, b"c", b"new")]
    assert stats.batches_dropped == 1


# -- rounds, choosing, checkpoints ----------------------------------------------------------


def test_a_small_map_cleans_in_rounds_and_the_checkpoint_advances(tmp_path):
    manager = _manager(str(tmp_path), log_cleaner_dedupe_buffer_size=24 * 40)  # 36 keys per round
    log = manager.get_or_create_log("t", 0, _config(segment_bytes=600))
    for rnd in range(3):
        for start in range(0, 100, 10):
            _append(log, [(b"key-%03d" % k, b"v%d" % rnd) for k in range(start, start + 10)], 1000 + rnd)
    log.roll()
    end = log.log_end_offset
    cleaner = LogCleaner(manager)
    ends = []
    while True:
        stats = cleaner.clean_log(log)
        assert not stats.aborted
        ends.append(stats.end_offset)
        assert cleaner.checkpointed_offset(log) == stats.end_offset
        if stats.end_offset == end:
            break
        assert len(ends) < 20
    assert len(ends) > 3 and ends == sorted(ends)
    final = {r.key: r.value for r in _records(log)}
    assert final == {b"key-%03d" % k: b"v2" for k in range(100)}
    assert len(_records(log)) == 100
    entries = OffsetCheckpoint(os.path.join(str(tmp_path), "logs", CLEANER_CHECKPOINT)).read()
    assert entries == {("t", 0): end}
    manager.close()


def test_clean_once_picks_the_dirtiest_compacted_log(tmp_path):
    manager = _manager(str(tmp_path))
    cfg = _config(min_cleanable_dirty_ratio=0.3, segment_bytes=1 << 20)
    logs = {name: manager.get_or_create_log(name, 0, cfg) for name in ("mild", "dirty")}
    logs["plain"] = manager.get_or_create_log("plain", 0, cfg.with_overrides(cleanup_policy="delete"))
    cleaner = LogCleaner(manager)
    for name, keys in (("mild", 20), ("dirty", 5), ("plain", 5)):
        for i in range(40):
            _append(logs[name], [(b"k%d" % (i % keys), b"x" * 20)], 1000)
        logs[name].roll()
    assert cleaner.cleanable(logs["dirty"]).dirty_ratio == 1.0
    for name in ("mild", "dirty"):
        cleaner.clean_log(logs[name])
    assert cleaner.cleanable(logs["dirty"]).dirty_ratio == 0.0
    assert cleaner.clean_once() is None  # nothing dirty; "plain" is not compacted
    for name, count in (("mild", 10), ("dirty", 80), ("plain", 80)):
        for i in range(count):
            _append(logs[name], [(b"k%d" % (i % 5), b"y" * 20)], 1000)
        logs[name].roll()
    ratios = {name: cleaner.cleanable(logs[name]).dirty_ratio for name in ("mild", "dirty")}
    assert 0.3 < ratios["mild"] < ratios["dirty"]
    first = cleaner.clean_once()
    assert (first.topic, first.records_kept) == ("dirty", 5)
    second = cleaner.clean_once()
    assert (second.topic, second.records_kept) == ("mild", 20)
    assert cleaner.clean_once() is None
    assert len(_records(logs["plain"])) == 120
    manager.close()


def test_compaction_lags(tmp_path):
    clock = FakeClock(2_000.0)
    manager = LogManager(config=LogManagerConfig(log_dirs=[str(tmp_path)], log_cleaner_enable=False,
                                                 log_cleaner_dedupe_buffer_size=MAP_MEMORY),
                         background=False, clock=clock)
    cfg = _config(min_compaction_lag_ms=10_000, max_compaction_lag_ms=60_000, min_cleanable_dirty_ratio=0.99)
    log = manager.get_or_create_log("t", 0, cfg)
    _append(log, [(b"a", b"1")], 1_000_000)
    log.roll()
    _append(log, [(b"a", b"2")], 1_995_000)  # 5 s old: younger than min.compaction.lag.ms
    log.roll()
    cleaner = LogCleaner(manager)
    target = cleaner.cleanable(log)
    assert (target.first_dirty_offset, target.first_uncleanable_offset) == (0, 1)
    assert target.needs_compaction_now  # the first segment is 1000 s old, over max.compaction.lag.ms
    stats = cleaner.clean_once()  # chosen despite a dirty ratio under 0.99
    assert stats is not None and stats.end_offset == 1
    assert [r.value for r in _records(log)] == [b"1", b"2"]  # the young record was not compacted
    clock.now += 10.0
    assert cleaner.cleanable(log).first_uncleanable_offset == 2
    cleaner.clean_log(log)
    assert [r.value for r in _records(log)] == [b"2"]
    manager.close()


def test_group_segments_by_size(tmp_path):
    cfg = _config(segment_bytes=10_000, segment_index_bytes=4096)
    segs = []
    for i, size in enumerate([4000, 4000, 3000, 9000, 100, 100]):
        s = LogSegment(str(tmp_path), i * 100, cfg)
        s.size = size
        segs.append(s)
    groups = group_segments_by_size(segs, 10_000, 4096)
    assert [[s.base_offset for s in g] for g in groups] == [[0, 100], [200], [300, 400, 500]]
    for s in segs:
        s.close()


# -- crash safety, concurrency, aborts -------------------------------------------------------


def _standalone_log(root: str, cfg: LogConfig, scheduler: Scheduler) -> Log:
    return Log(os.path.join(root, "t-0"), cfg, scheduler=scheduler)


@pytest.mark.parametrize("crash_at", ["after .swap", "after .deleted", "before .swap"])
def test_a_crash_during_the_swap_recovers_to_a_consistent_log(tmp_path, monkeypatch, crash_at):
    manager = _manager(str(tmp_path / "mgr"))
    scheduler = Scheduler("test")
    cfg = _config(segment_bytes=400)
    log = _standalone_log(str(tmp_path), cfg, scheduler)
    model = {}
    for i in range(60):
        key, value = b"k%d" % (i % 9), b"v%d" % i
        _append(log, [(key, value)], 1000 + i)
        model[key] = value
    log.roll()
    original = LogSegment.change_suffix

    def crashing(self, old, new):
        if (crash_at == "after .swap" and (old, new) == ("", ".deleted")) or \
                (crash_at == "after .deleted" and (old, new) == (".swap", "")) or \
                (crash_at == "before .swap" and (old, new) == (".cleaned", ".swap")):
            raise SystemExit("simulated crash")
        return original(self, old, new)

    monkeypatch.setattr(LogSegment, "change_suffix", crashing)
    with pytest.raises(SystemExit):
        LogCleaner(manager).clean_log(log)
    monkeypatch.setattr(LogSegment, "change_suffix", original)
    reopened = Log(os.path.join(str(tmp_path), "t-0"), cfg, scheduler=scheduler)
    got = _records(reopened)
    offsets = [r.offset for r in got]
    assert offsets == sorted(set(offsets))
    latest = {}
    for r in got:
        latest[r.key] = r.value
    assert latest == model
    leftovers = [n for n in os.listdir(reopened.directory) if n.endswith((".cleaned", ".swap", ".deleted"))]
    assert leftovers == []
    # The recovered log cleans normally.
    LogCleaner(manager).clean_log(reopened)
    assert sorted((r.key, r.value) for r in _records(reopened)) == sorted(model.items())
    reopened.close()
    scheduler.shutdown()
    manager.close()


def test_reads_during_a_clean_see_whole_batches_in_offset_order(manager):
    log = manager.get_or_create_log("t", 0, _config(segment_bytes=2000))
    for i in range(150):
        _append(log, [(b"k%d" % (i % 13), b"v" * 30), (b"u%d" % i, b"w")], 1000 + i)
    log.roll()
    stop = threading.Event()
    passes = [0]
    failures: List[BaseException] = []
    passed_after_clean = threading.Event()

    def reader() -> None:
        try:
            while True:
                done = stop.is_set()
                offset, last = log.log_start_offset, -1
                while offset < log.log_end_offset:
                    try:
                        data = log.read(offset, 3000).read()
                    except OffsetOutOfRangeError:
                        break
                    assert records.scan(data).valid_bytes == len(data) > 0  # whole batches, CRCs valid
                    for info in records.iter_batches(data):
                        assert info.base_offset > last
                        last = info.last_offset
                        offset = last + 1
                    time.sleep(0)  # let the cleaner have the GIL between reads
                passes[0] += 1
                if done:
                    passed_after_clean.set()
                    return
        except BaseException as exc:  # reported to the main thread
            failures.append(exc)
            passed_after_clean.set()

    t = threading.Thread(target=reader)
    t.start()
    cleaner = LogCleaner(manager)
    for _ in range(2):
        stats = cleaner.clean_log(log)
        assert not stats.aborted
    stop.set()
    assert passed_after_clean.wait(30)
    t.join(30)
    assert not failures, failures
    assert passes[0] >= 1
    assert len(_records(log)) == 13 + 150


def test_a_clean_is_aborted_when_the_segments_change(manager, monkeypatch):
    log = manager.get_or_create_log("t", 0, _config(segment_bytes=300))
    for i in range(40):
        _append(log, [(b"k%d" % (i % 3), b"v%d" % i)], 1000 + i)
    log.roll()
    cleaner = LogCleaner(manager)
    real = LogCleaner._clean_segment
    calls = [0]

    def meddling(self, *args):
        calls[0] += 1
        if calls[0] == 1:
            log.delete_records_before(log.segments[1].base_offset)  # retention removes a segment
        return real(self, *args)

    monkeypatch.setattr(LogCleaner, "_clean_segment", meddling)
    stats = cleaner.clean_log(log)
    assert stats.aborted
    assert cleaner.checkpointed_offset(log) is None
    assert [n for n in os.listdir(log.directory) if n.endswith(".cleaned")] == []
    monkeypatch.setattr(LogCleaner, "_clean_segment", real)
    stats = cleaner.clean_log(log)
    assert not stats.aborted
    assert {r.key: r.value for r in _records(log)} == {b"k0": b"v39", b"k1": b"v37", b"k2": b"v38"}


def test_abort_from_another_thread_waits_for_the_clean_to_stop(manager, monkeypatch):
    log = manager.get_or_create_log("t", 0, _config(segment_bytes=300))
    for i in range(40):
        _append(log, [(b"k%d" % (i % 3), b"v%d" % i)], 1000 + i)
    log.roll()
    before = [(r.offset, r.value) for r in _records(log)]
    cleaner = LogCleaner(manager)
    reading, go = threading.Event(), threading.Event()
    real = LogCleaner._read

    def blocking(self, segment, size, progress):
        reading.set()
        assert go.wait(30)
        return real(self, segment, size, progress)

    monkeypatch.setattr(LogCleaner, "_read", blocking)
    result: List[object] = []
    worker = threading.Thread(target=lambda: result.append(cleaner.clean_log(log)))
    worker.start()
    assert reading.wait(30)
    aborter = threading.Thread(target=cleaner.abort, args=(log,))
    aborter.start()
    progress = manager.cleaning.progress(log)
    assert progress is not None and progress.aborted.wait(30)
    assert aborter.is_alive()  # abort waits for the clean to stop
    go.set()
    aborter.join(30)
    worker.join(30)
    assert not aborter.is_alive() and result[0].aborted
    assert [(r.offset, r.value) for r in _records(log)] == before
    assert [n for n in os.listdir(log.directory) if n.endswith(".cleaned")] == []


# -- several cleaners over one manager's logs ------------------------------------------


def _compacted_log(manager: LogManager, n: int = 60, keys: int = 5) -> Tuple[Log, List[Tuple[int, bytes, bytes]]]:
    """A compacted log of many small segments; -> it and its compacted contents (offset, key, value)."""
    log = manager.get_or_create_log("t", 0, _config(segment_bytes=300))
    latest: Dict[bytes, Tuple[int, bytes]] = {}
    for i in range(n):
        key = b"k%d" % (i % keys)
        _append(log, [(key, b"v%d" % i)], 1000 + i)
        latest[key] = (log.log_end_offset - 1, b"v%d" % i)
    log.roll()
    return log, sorted((offset, key, value) for key, (offset, value) in latest.items())


def _contents(log: Log) -> List[Tuple[int, Optional[bytes], Optional[bytes]]]:
    return [(r.offset, r.key, r.value) for r in _records(log)]


class _CleansOfALog:
    """Watches ``LogCleaner._do_clean`` of every cleaner: which cleaners started a clean (in
    order) and whether two cleans of one log ever ran at once. The first clean parks at its
    start until ``release`` is set."""

    def __init__(self, monkeypatch) -> None:
        self.lock = threading.Lock()
        self.running: Dict[int, int] = {}
        self.overlaps: List[str] = []
        self.started: List[LogCleaner] = []
        self.first_inside = threading.Event()
        self.release = threading.Event()
        real = LogCleaner._do_clean

        def do_clean(cleaner, target, progress, stats, created):
            key = id(target.log)
            with self.lock:
                self.running[key] = self.running.get(key, 0) + 1
                if self.running[key] > 1:
                    self.overlaps.append("%d cleans of %s at once" % (self.running[key], target.log))
                self.started.append(cleaner)
                first = len(self.started) == 1
            try:
                if first:
                    self.first_inside.set()
                    assert self.release.wait(30)
                return real(cleaner, target, progress, stats, created)
            finally:
                with self.lock:
                    self.running[key] -= 1

        monkeypatch.setattr(LogCleaner, "_do_clean", do_clean)


def test_a_second_cleaner_never_picks_a_log_another_cleaner_is_cleaning(manager, monkeypatch):
    log, expected = _compacted_log(manager)
    watch = _CleansOfALog(monkeypatch)
    cleaners = [LogCleaner(manager), LogCleaner(manager)]
    start = threading.Barrier(2)
    done = [threading.Event(), threading.Event()]
    results: Dict[int, object] = {}

    def run(i: int) -> None:
        start.wait(30)
        try:
            results[i] = cleaners[i].clean_once()
        finally:
            done[i].set()

    threads = [threading.Thread(target=run, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    assert watch.first_inside.wait(30)
    holder = cleaners.index(watch.started[0])
    other = 1 - holder
    assert done[other].wait(30)  # while the holder is parked in its clean
    watch.release.set()
    for t in threads:
        t.join(30)
    assert not any(t.is_alive() for t in threads)
    assert watch.overlaps == []
    assert results[other] is None  # the only dirty log was taken: nothing to clean
    stats = results[holder]
    assert isinstance(stats, CleanerStats) and not stats.aborted
    assert _contents(log) == expected
    assert [n for n in os.listdir(log.directory) if n.endswith(".cleaned")] == []


def test_clean_log_waits_while_another_cleaner_cleans_the_log(manager, monkeypatch):
    log, expected = _compacted_log(manager)
    watch = _CleansOfALog(monkeypatch)
    cleaners = [LogCleaner(manager), LogCleaner(manager)]
    start = threading.Barrier(3)
    results: Dict[int, CleanerStats] = {}

    def run(i: int) -> None:
        start.wait(30)
        results[i] = cleaners[i].clean_log(log)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    start.wait(30)
    assert watch.first_inside.wait(30)
    watch.release.set()
    for t in threads:
        t.join(30)
    assert not any(t.is_alive() for t in threads)
    assert watch.overlaps == []
    assert len(watch.started) == 2 and set(results) == {0, 1}
    assert not any(stats.aborted for stats in results.values())
    assert _contents(log) == expected
    assert cleaners[0].checkpointed_offset(log) == log.active_segment.base_offset


def _park_the_first_read(monkeypatch) -> Tuple[threading.Event, threading.Event, list]:
    """The first segment read of any cleaner parks until ``go``; -> (reading, go, [its progress])."""
    reading, go = threading.Event(), threading.Event()
    progresses: list = []
    real = LogCleaner._read

    def parked(self, segment, size, progress):
        if not reading.is_set():
            progresses.append(progress)
            reading.set()
            assert go.wait(30)
        return real(self, segment, size, progress)

    monkeypatch.setattr(LogCleaner, "_read", parked)
    return reading, go, progresses


def test_abort_by_any_cleaner_waits_for_the_cleaner_holding_the_log(manager, monkeypatch):
    log, _ = _compacted_log(manager)
    before = _contents(log)
    holder, other = LogCleaner(manager), LogCleaner(manager)
    reading, go, progresses = _park_the_first_read(monkeypatch)
    result: List[CleanerStats] = []
    worker = threading.Thread(target=lambda: result.append(holder.clean_log(log)))
    worker.start()
    assert reading.wait(30)
    returned = threading.Event()

    def abort() -> None:
        other.abort(log)
        returned.set()

    aborter = threading.Thread(target=abort)
    aborter.start()
    assert progresses[0].aborted.wait(30)  # the other cleaner's abort reached the holder's clean
    assert not returned.is_set()  # and waits for it to stop
    go.set()
    aborter.join(30)
    worker.join(30)
    assert returned.is_set() and not worker.is_alive()
    assert result[0].aborted
    assert _contents(log) == before
    assert [n for n in os.listdir(log.directory) if n.endswith(".cleaned")] == []
    assert manager.cleaning.progress(log) is None
    assert not other.clean_log(log).aborted  # the log is free again


def test_deleting_a_log_aborts_the_clean_of_any_cleaner_of_the_manager(manager, monkeypatch):
    log, _ = _compacted_log(manager)
    assert manager.cleaner is None  # the clean below is not the manager's own cleaner's
    cleaner = LogCleaner(manager)
    reading, go, progresses = _park_the_first_read(monkeypatch)
    result: List[CleanerStats] = []
    worker = threading.Thread(target=lambda: result.append(cleaner.clean_log(log)))
    worker.start()
    assert reading.wait(30)
    deleted: List[bool] = []
    deleter = threading.Thread(target=lambda: deleted.append(manager.delete_log("t", 0)))
    deleter.start()
    assert progresses[0].aborted.wait(30)
    assert deleter.is_alive()  # delete_log waits for the clean to stop before it closes the log
    go.set()
    deleter.join(30)
    worker.join(30)
    assert deleted == [True] and result[0].aborted
    assert not os.path.exists(log.directory)  # no .cleaned file brought the directory back
    assert LogCleaner(manager).clean_once() is None


def test_deleting_a_log_while_a_cleaner_lists_the_logs_does_not_deadlock(tmp_path, monkeypatch):
    """The cleaner asks the manager for its logs holding no lock of its own or of the registry,
    so delete_log (holding the manager's lock, aborting through the registry) cannot wait on it."""
    manager = _manager(str(tmp_path))
    _compacted_log(manager)
    cleaner = LogCleaner(manager)
    manager.cleaner = cleaner  # as the manager's own cleaner: delete_log aborts through it too
    listing, go = threading.Event(), threading.Event()
    real = manager.all_logs

    def parked() -> List[Log]:
        listing.set()
        assert go.wait(30)
        return real()

    monkeypatch.setattr(manager, "all_logs", parked)
    grabber = threading.Thread(target=cleaner.clean_once, daemon=True)
    grabber.start()
    assert listing.wait(30)
    deleted = threading.Event()
    deleter = threading.Thread(target=lambda: deleted.set() if manager.delete_log("t", 0) else None, daemon=True)
    deleter.start()
    finished = deleted.wait(30)
    go.set()
    if not finished:
        pytest.fail("delete_log deadlocked with a cleaner asking the manager for its logs")
    grabber.join(30)
    assert not grabber.is_alive()
    manager.close()


def test_cleaner_threads_clean_in_the_background_and_shut_down(tmp_path):
    manager = _manager(str(tmp_path), log_cleaner_threads=2, log_cleaner_backoff_ms=1)
    log = manager.get_or_create_log("t", 0, _config())
    for i in range(50):
        _append(log, [(b"k%d" % (i % 5), b"v%d" % i)], 1000 + i)
    log.roll()
    cleaner = LogCleaner(manager)
    assert cleaner.map_memory == MAP_MEMORY // 2
    cleaner.start()
    try:
        deadline = time.monotonic() + 30
        while cleaner.checkpointed_offset(log) != log.active_segment.base_offset:
            assert time.monotonic() < deadline, "the cleaner threads did not clean the log"
            time.sleep(0.005)
    finally:
        cleaner.shutdown()
    assert {r.key: r.value for r in _records(log)} == {b"k%d" % i: b"v%d" % (45 + i) for i in range(5)}
    assert not any(t.is_alive() for t in threading.enumerate() if t.name.startswith("pylogq-log-cleaner"))
    manager.close()


def test_throttler_sleeps_off_the_excess_and_is_off_without_a_limit():
    now = [0.0]
    waits: List[float] = []
    t = Throttler(1000.0, waits.append, check_interval=0.1, clock=lambda: now[0])
    t.maybe_throttle(50)
    assert waits == []  # within the check interval
    now[0] = 0.2
    t.maybe_throttle(450)  # 500 bytes in 0.2 s at 1000 B/s: 0.3 s too fast
    assert waits == [pytest.approx(0.3)]
    off = Throttler(float("inf"), waits.append)
    off.maybe_throttle(10**12)
    assert not off.enabled and len(waits) == 1


def test_cleaner_stats_summary(manager):
    log = manager.get_or_create_log("t", 0, _config())
    for i in range(20):
        _append(log, [(b"k%d" % (i % 2), b"v" * 10)], 1000)
    log.roll()
    stats = LogCleaner(manager).clean_log(log)
    assert (stats.records_read, stats.records_kept, stats.records_dropped) == (20, 2, 18)
    assert stats.bytes_read > stats.bytes_written > 0
    assert stats.map_utilization == pytest.approx(2 / (MAP_MEMORY // 24))
    assert "cleaned log t-0 (dirty section [0, 20))" in stats.summary()
    assert "90.0% fewer records" in stats.summary()


def test_a_segment_the_clean_would_not_change_is_not_swapped(manager):
    log = manager.get_or_create_log("t", 0, _config(segment_bytes=150))
    for i in range(6):
        _append(log, [(b"k%d" % i, b"v")], 1000)
    log.roll()
    before = log.segments
    stats = LogCleaner(manager).clean_log(log)
    assert stats.records_kept == 6 and stats.segments_cleaned == len(before) - 1
    assert log.segments == before  # the same segment objects: nothing was rewritten
    assert [n for n in os.listdir(log.directory) if n.endswith(".cleaned")] == []
