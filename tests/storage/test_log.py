"""The partition log: append, read, roll, flush, recovery, retention and truncation on real files."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from pylogq import records
from pylogq.errors import (
    CorruptRecordError,
    IllegalStateError,
    InvalidTimestampError,
    MessageTooLargeError,
    OffsetOutOfRangeError,
    RecordListTooLargeError,
)
from pylogq.config import LogConfig
from pylogq.storage.log import Log, parse_dir_name

TS = 1_700_000_000_000


class Clock:
    """A settable clock (seconds), so time-based behaviour is tested without sleeping."""

    def __init__(self, ms: int = TS) -> None:
        self.ms = ms

    def __call__(self) -> float:
        return self.ms / 1000.0


def batch(n=10, start=0, ts=TS, size=20, codec=0, keys=True):
    values = [b"%08d" % (start + i) + b"x" * size for i in range(n)]
    key_list = [b"key-%d" % ((start + i) % 17) for i in range(n)] if keys else None
    return bytes(records.build_batch(values, keys=key_list, timestamps=[ts + i for i in range(n)],
                                     compression_type=codec))


def read_all(lg, start=None, max_offset=None):
    """Every record from ``start`` to the end, following regions segment by segment."""
    offset = lg.log_start_offset if start is None else start
    out = []
    while True:
        region = lg.read(offset, 1 << 20, max_offset=max_offset)
        if len(region) == 0:
            return out
        cols = records.decode_columns(region.read(), start_offset=offset)
        if len(cols) == 0:
            return out
        out += [(int(o), cols.value(i)) for i, o in enumerate(cols.offsets)]
        offset = int(cols.offsets[-1]) + 1


def test_directory_names_follow_kafka():
    assert parse_dir_name("/data/events-3") == ("events", 3)
    assert parse_dir_name("/data/my.topic_x-y-12") == ("my.topic_x-y", 12)
    for bad in ("/data/events", "/data/events-", "/data/ev ents-1", "/data/-x"):
        with pytest.raises(ValueError, match="<topic>-<partition>"):
            parse_dir_name(bad)


def test_append_assigns_offsets_and_reads_back(tmp_path):
    with Log(str(tmp_path / "t-0")) as lg:
        first = lg.append(batch(10))
        second = lg.append(batch(5, start=10, codec=3))
        assert (first.first_offset, first.last_offset, first.record_count) == (0, 9, 10)
        assert (second.first_offset, second.last_offset) == (10, 14)
        assert second.max_timestamp == TS + 4 and second.log_append_time == -1
        assert lg.log_end_offset == 15
        got = read_all(lg)
        assert [o for o, _ in got] == list(range(15))
        assert all(v.startswith(b"%08d" % o) for o, v in got)
        # A read from the middle of a batch starts with that batch.
        region = lg.read(12, 1 << 20)
        assert records.RecordBatch(region.read()).base_offset == 10


def test_files_are_named_by_base_offset_and_roll_on_segment_bytes(tmp_path):
    with Log(str(tmp_path / "t-0"), LogConfig(segment_bytes=2000, index_interval_bytes=100)) as lg:
        for i in range(20):
            lg.append(batch(5, start=5 * i))
        assert lg.num_segments >= 3
        bases = [s.base_offset for s in lg.segments]
        assert bases == sorted(bases) and bases[0] == 0
        for s in lg.segments[:-1]:
            assert s.size <= 2000
        names = set(os.listdir(lg.directory))
        for base in bases:
            for suffix in (".log", ".index", ".timeindex"):
                assert "%020d%s" % (base, suffix) in names
        assert [o for o, _ in read_all(lg)] == list(range(100))
    # Closed: every index trimmed to its entries.
    for name in os.listdir(str(tmp_path / "t-0")):
        if name.endswith(".index"):
            assert os.path.getsize(str(tmp_path / "t-0" / name)) % 8 == 0
            assert os.path.getsize(str(tmp_path / "t-0" / name)) < 10 * 1024 * 1024


def test_log_append_time(tmp_path):
    clock = Clock(TS + 10_000)
    with Log(str(tmp_path / "t-0"), LogConfig(message_timestamp_type="LogAppendTime"), clock=clock) as lg:
        info = lg.append(batch(3))
        assert info.log_append_time == TS + 10_000
        region = lg.read(0, 1 << 20)
        recs = records.RecordBatch(region.read()).records()
        assert [(r.timestamp, r.timestamp_type) for r in recs] == [(TS + 10_000, 1)] * 3


def test_size_and_timestamp_limits(tmp_path):
    with Log(str(tmp_path / "t-0"), LogConfig(max_message_bytes=500, segment_bytes=100_000,
                                              message_timestamp_difference_max_ms=60_000),
             clock=Clock()) as lg:
        with pytest.raises(MessageTooLargeError, match="max.message.bytes=500"):
            lg.append(batch(50))
        with pytest.raises(InvalidTimestampError, match="rejected due to invalid timestamp") as refused:
            lg.append(batch(2, ts=TS - 3_600_000))
        assert [i for i, _ in refused.value.record_errors] == [0, 1]  # every record, as Kafka lists them
        assert all("is out of range. The timestamp should be within [" in why
                   for _, why in refused.value.record_errors)
        with pytest.raises(RecordListTooLargeError):
            lg.append(b"".join(batch(2, start=i) for i in range(1000)))
        with pytest.raises(CorruptRecordError):
            lg.append(batch(2)[:-1])
        assert lg.log_end_offset == 0 and lg.size_in_bytes == 0
        lg.append(batch(2))
        assert lg.log_end_offset == 2


def test_read_bounds(tmp_path):
    with Log(str(tmp_path / "t-0")) as lg:
        for i in range(5):
            lg.append(batch(10, start=10 * i))
        assert len(lg.read(50, 100)) == 0
        with pytest.raises(OffsetOutOfRangeError, match="log end 50"):
            lg.read(51, 100)
        with pytest.raises(OffsetOutOfRangeError):
            lg.read(-1, 100)
        # max_offset (a high watermark): batches at or past it are not returned.
        assert [o for o, _ in read_all(lg, max_offset=30)] == list(range(30))
        assert len(lg.read(30, 1 << 20, max_offset=30)) == 0
        # A first batch bigger than max_bytes is returned whole.
        region = lg.read(0, 10)
        assert records.RecordBatch(region.read()).records_count == 10


@pytest.mark.parametrize("interval", [1, 4096, 1 << 20])
def test_reads_cut_by_max_bytes_end_on_a_batch_boundary(tmp_path, interval):
    """A read that max_bytes cuts short ends after its last whole batch, found through
    the offset index whatever its density, so a fetch never carries a partial batch."""
    with Log(str(tmp_path / "t-0"), LogConfig(index_interval_bytes=interval)) as lg:
        sizes = []
        for i in range(40):
            data = batch(1 + i % 7, start=lg.log_end_offset, size=50 + 37 * i)
            sizes.append(len(data))
            lg.append(data)
        ends = [sum(sizes[:k]) for k in range(1, len(sizes) + 1)]
        for max_bytes in (sizes[0], sizes[0] + 1, ends[5] - 1, ends[5], ends[5] + 1, ends[-1] - 1):
            region = lg.read(0, max_bytes)
            expected = max(e for e in ends if e <= max_bytes)
            assert len(region) == expected, max_bytes
            assert records.valid_prefix_length(region.read()) == expected
        # Offset 7 lies in the fourth batch (1 + 2 + 3 records before it): from its start.
        from_middle = lg.read(7, ends[12] - ends[2] - 1)
        assert from_middle.position == ends[2] and len(from_middle) == ends[11] - ends[2]


def test_offset_for_timestamp(tmp_path):
    with Log(str(tmp_path / "t-0"), LogConfig(segment_bytes=1500)) as lg:
        for i in range(10):
            lg.append(batch(5, start=5 * i, ts=TS + 1000 * i))
        assert lg.num_segments > 1
        # The first record late enough, not just its batch (Kafka's ListOffsets).
        assert lg.offset_for_timestamp(TS + 3000) == (15, TS + 3000)
        assert lg.offset_for_timestamp(TS + 3002) == (17, TS + 3002)
        assert lg.offset_for_timestamp(TS + 3005) == (20, TS + 4000)
        assert lg.offset_for_timestamp(TS + 99_999) is None
        assert lg.offset_for_timestamp(-2) == (0, -1)
        assert lg.offset_for_timestamp(-1) == (50, -1)


def test_truncate_to(tmp_path):
    with Log(str(tmp_path / "t-0"), LogConfig(segment_bytes=1500)) as lg:
        for i in range(10):
            lg.append(batch(5, start=5 * i))
        segments = lg.num_segments
        assert lg.truncate_to(23)  # inside the batch 20..24: the batch goes whole
        assert lg.log_end_offset == 20
        assert lg.num_segments < segments
        assert [o for o, _ in read_all(lg)] == list(range(20))
        info = lg.append(batch(3, start=20))
        assert info.first_offset == 20
        assert not lg.truncate_to(100)
        assert [o for o, _ in read_all(lg)] == list(range(23))


def test_truncate_fully_and_start_at(tmp_path):
    with Log(str(tmp_path / "t-0")) as lg:
        lg.append(batch(10))
        lg.truncate_fully_and_start_at(1000)
        assert (lg.log_start_offset, lg.log_end_offset, lg.num_segments) == (1000, 1000, 1)
        assert lg.append(batch(2)).first_offset == 1000
        assert os.listdir(lg.directory).count("%020d.log" % 1000) == 1
        assert "%020d.log" % 0 not in os.listdir(lg.directory)


def test_delete_records_before(tmp_path):
    with Log(str(tmp_path / "t-0"), LogConfig(segment_bytes=1500, file_delete_delay_ms=0)) as lg:
        for i in range(10):
            lg.append(batch(5, start=5 * i))
        before = lg.num_segments
        assert lg.delete_records_before(27) == 27
        assert lg.num_segments < before
        with pytest.raises(OffsetOutOfRangeError, match="log start 27"):
            lg.read(26, 100)
        assert read_all(lg)[0][0] == 27
        with pytest.raises(OffsetOutOfRangeError):
            lg.delete_records_before(51)
        assert not any(n.endswith(".deleted") for n in os.listdir(lg.directory))


def test_retention_by_time_and_size_never_the_active_segment(tmp_path):
    clock = Clock(TS)
    cfg = LogConfig(segment_bytes=1500, retention_ms=60_000, file_delete_delay_ms=0)
    with Log(str(tmp_path / "t-0"), cfg, clock=clock) as lg:
        for i in range(10):
            lg.append(batch(5, start=5 * i, ts=TS + 10_000 * i))
        segments = lg.num_segments
        assert lg.delete_old_segments() == 0
        clock.ms = TS + 200_000
        deleted = lg.delete_old_segments()
        assert 0 < deleted < segments
        assert lg.num_segments == segments - deleted
        assert all(s.largest_timestamp >= TS + 140_000 for s in lg.segments[:-1])
        clock.ms = TS + 10**9
        lg.delete_old_segments()
        assert lg.num_segments == 1 and lg.log_start_offset == lg.active_segment.base_offset
    with Log(str(tmp_path / "t-1"), LogConfig(segment_bytes=1500, retention_bytes=3000,
                                              file_delete_delay_ms=0)) as lg:
        for i in range(20):
            lg.append(batch(5, start=5 * i))
        lg.delete_old_segments()
        assert lg.size_in_bytes - lg.active_segment.size <= 3000
        assert [o for o, _ in read_all(lg)][-1] == 99


def test_deleted_segments_wait_for_the_delay(tmp_path):
    with Log(str(tmp_path / "t-0"), LogConfig(segment_bytes=1500, file_delete_delay_ms=3_600_000)) as lg:
        for i in range(10):
            lg.append(batch(5, start=5 * i))
        region = lg.read(0, 1 << 20)
        lg.delete_records_before(30)
        names = os.listdir(lg.directory)
        assert any(n.endswith(".log.deleted") for n in names)
        # A reader that got its region before the deletion still reads it.
        assert records.RecordBatch(region.read()).base_offset == 0
    # The pending deletions run at close.
    assert not any(n.endswith(".deleted") for n in os.listdir(str(tmp_path / "t-0")))


def test_time_based_roll(tmp_path):
    with Log(str(tmp_path / "t-0"), LogConfig(segment_ms=60_000)) as lg:
        lg.append(batch(2, ts=TS))
        lg.append(batch(2, start=2, ts=TS + 30_000))
        assert lg.num_segments == 1
        lg.append(batch(2, start=4, ts=TS + 61_000))
        assert lg.num_segments == 2 and lg.active_segment.base_offset == 4


def test_flush_messages_moves_the_recovery_point(tmp_path):
    with Log(str(tmp_path / "t-0"), LogConfig(flush_messages=15)) as lg:
        lg.append(batch(10))
        assert lg.recovery_point == 0
        lg.append(batch(10, start=10))
        assert lg.recovery_point == 20
        lg.append(batch(1, start=20))
        lg.flush()
        assert lg.recovery_point == 21


def test_reopen_after_clean_close_and_after_a_crash(tmp_path):
    path = str(tmp_path / "t-0")
    cfg = LogConfig(segment_bytes=3000, index_interval_bytes=200)
    with Log(path, cfg) as lg:
        for i in range(20):
            lg.append(batch(5, start=5 * i))
        segments = lg.num_segments
    with Log(path, cfg, clean_shutdown=True) as lg:
        assert (lg.log_end_offset, lg.num_segments, lg.recovered_bytes) == (100, segments, 0)
        assert [o for o, _ in read_all(lg)] == list(range(100))
        assert lg.append(batch(1, start=100)).first_offset == 100
    active = sorted(n for n in os.listdir(path) if n.endswith(".log"))[-1]
    with open(os.path.join(path, active), "ab") as f:
        f.write(b"\x00\x00\x00\x00\x00\x00\x00\x65\x00\x00\x01\x00" + os.urandom(100))  # a torn batch
    with Log(path, cfg, recovery_point=50) as lg:
        assert lg.recovered_bytes == 112
        assert lg.log_end_offset == 101
        assert [o for o, _ in read_all(lg)] == list(range(101))


def test_append_as_follower_keeps_offsets(tmp_path):
    with Log(str(tmp_path / "leader-0")) as leader, Log(str(tmp_path / "follower-0")) as follower:
        for i in range(5):
            leader.append(batch(4, start=4 * i))
        data = leader.read(0, 1 << 20).read()
        info = follower.append_as_follower(data)
        assert (info.first_offset, info.last_offset) == (0, 19)
        assert read_all(follower) == read_all(leader)
        with pytest.raises(CorruptRecordError, match="below the next offset"):
            follower.append_as_follower(data)
        # A gap (the source was compacted): the follower rolls a segment at the new base.
        later = bytearray(batch(3))
        records.assign_offsets(later, 40)
        follower.append_as_follower(bytes(later))
        assert follower.log_end_offset == 43 and follower.active_segment.base_offset == 40


def test_append_as_follower_checks_what_keeps_the_log_whole(tmp_path):
    """A follower refuses damaged bytes and bytes that do not continue its log, with nothing
    written; the producer state gets the headers of the one pass."""
    with Log(str(tmp_path / "leader-0")) as leader:
        leader.append(batch(4, size=200) + batch(3, start=4))
        data = leader.read(0, 1 << 20).read()
    damaged = bytearray(data)
    damaged[-1] ^= 0xFF  # in the last batch's last record: its CRC no longer holds
    ahead = bytearray(batch(2))
    records.assign_offsets(ahead, 5)  # offsets 5..6, which the leader's data has too
    with Log(str(tmp_path / "follower-0")) as follower:
        with pytest.raises(CorruptRecordError, match="CRC"):
            follower.append_as_follower(bytes(damaged))
        assert follower.log_end_offset == 0 and follower.size_in_bytes == 0
        follower.append_as_follower(bytes(ahead))
        with pytest.raises(CorruptRecordError, match="below the next offset"):
            follower.append_as_follower(data)
        assert follower.log_end_offset == 7 and [o for o, _ in read_all(follower)] == [5, 6]
    with Log(str(tmp_path / "replica-0")) as replica:
        seen = []

        def appended(headers, buffer, index_aborted):
            assert bytes(buffer) == data  # the bytes the headers' positions are in
            seen.extend(headers)

        info = replica.append_as_follower(memoryview(data), producers_appended=appended)
        assert (info.first_offset, info.last_offset, info.batch_count) == (0, 6, 2)
        assert [(h.base_offset, h.last_offset) for h in seen] == [(0, 3), (4, 6)]
        assert [o for o, _ in read_all(replica)] == list(range(7))
    with Log(str(tmp_path / "tiny-0"), LogConfig(segment_bytes=len(data) - 1)) as tiny:
        with pytest.raises(RecordListTooLargeError):
            tiny.append_as_follower(data, producers_appended=appended)
        assert tiny.log_end_offset == 0 and tiny.size_in_bytes == 0 and len(seen) == 2


def test_closed_log_refuses_writes(tmp_path):
    lg = Log(str(tmp_path / "t-0"))
    lg.close()
    with pytest.raises(ValueError, match="closed"):
        lg.append(batch(1))
    lg.close()  # idempotent


def test_close_without_flush_leaves_the_recovery_point(tmp_path):
    lg = Log(str(tmp_path / "t-0"))
    lg.append(batch(4))
    assert lg.recovery_point == 0
    lg.close(flush=False)
    assert lg.closed and lg.recovery_point == 0
    flushed = Log(str(tmp_path / "u-0"))
    flushed.append(batch(4))
    flushed.close()
    assert flushed.recovery_point == 4


def test_standalone_open_keeps_kafka_files_in_the_parent(tmp_path):
    path = str(tmp_path / "events-0")
    lg = Log.open(path, segment_bytes=4096)
    for i in range(10):
        lg.append(batch(5, start=5 * i))
    assert lg.config.segment_bytes == 4096
    assert os.path.exists(str(tmp_path / ".lock"))
    assert not os.path.exists(str(tmp_path / ".kafka_cleanshutdown"))
    lg.close()
    assert os.path.exists(str(tmp_path / ".kafka_cleanshutdown"))
    text = (tmp_path / "recovery-point-offset-checkpoint").read_text()
    assert text.splitlines()[:3] == ["0", "1", "events 0 50"]
    lg = Log.open(path, segment_bytes=4096)
    assert lg.recovered_bytes == 0 and lg.log_end_offset == 50
    assert not os.path.exists(str(tmp_path / ".kafka_cleanshutdown"))
    lg.close()


def test_a_reopened_standalone_log_runs_with_the_config_it_was_opened_with(tmp_path):
    path = str(tmp_path / "events-0")
    settings = dict(flush_messages=1, segment_bytes=65536)
    lg = Log.open(path, **settings)
    lg.append(batch(5))
    lg.close()
    lg = Log.open(path, **settings)
    try:
        assert (lg.config.segment_bytes, lg.config.flush_messages) == (65536, 1)
        assert lg.log_end_offset == 5 and lg.num_segments == 1
        lg.append(batch(5, start=5))
        assert lg.recovery_point == 10  # flush.messages=1: every append is flushed
        while lg.num_segments == 1:
            lg.append(batch(20, start=lg.log_end_offset, size=200))
            assert lg.log_end_offset < 10_000, "the log never rolled at segment.bytes=65536"
        first = lg.segments[0]
        assert 65536 - 20 * 300 < first.size <= 65536
    finally:
        lg.close()


def test_a_second_process_cannot_open_a_dir_in_use(tmp_path):
    path = str(tmp_path / "events-0")
    lg = Log.open(path)
    try:
        code = "from pylogq.storage.log import Log; Log.open(%r)" % path
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
        assert out.returncode != 0
        assert "in use by another process" in out.stderr
    finally:
        lg.close()


def test_standalone_logs_share_a_parent(tmp_path):
    a = Log.open(str(tmp_path / "a-0"))
    b = Log.open(str(tmp_path / "b-0"))
    a.append(batch(3))
    b.append(batch(4))
    with pytest.raises(IllegalStateError, match="already open"):
        Log.open(str(tmp_path / "a-0"))
    a.close()
    assert not os.path.exists(str(tmp_path / ".kafka_cleanshutdown"))
    b.close()
    assert os.path.exists(str(tmp_path / ".kafka_cleanshutdown"))
    lines = (tmp_path / "recovery-point-offset-checkpoint").read_text().splitlines()
    assert sorted(lines[2:]) == ["a 0 3", "b 0 4"]


def test_preallocate_reserves_the_segment_and_trims_it(tmp_path):
    path = str(tmp_path / "t-0")
    cfg = LogConfig(preallocate=True, segment_bytes=1 << 20)
    lg = Log(path, cfg)
    lg.append(batch(10))
    log_file = os.path.join(path, "%020d.log" % 0)
    assert os.path.getsize(log_file) == 1 << 20  # reserved up front
    assert [o for o, _ in read_all(lg)] == list(range(10))
    size = lg.active_segment.size
    lg.close()
    assert os.path.getsize(log_file) == size  # cut to its data on close
    # After a crash the reserved zeros are still there: recovery cuts them.
    lg = Log(path, cfg)
    lg.append(batch(5, start=10))
    lg.flush()
    for s in lg.segments:
        s.offset_index.flush()
    crashed = Log(path, cfg, recovery_point=0)  # what a new process sees (the old one never closed)
    assert os.path.getsize(log_file) == crashed.active_segment.size
    assert [o for o, _ in read_all(crashed)] == list(range(15))
    assert crashed.append(batch(1, start=15)).first_offset == 15
    crashed.close()


def test_a_sustained_writer_reserves_blocks_ahead_without_changing_the_size(tmp_path, monkeypatch):
    from pylogq.storage import reservation
    from pylogq.storage.segment import reserve_blocks

    # Every write counts as sustained (no clock in the test), and this test has the budget to itself.
    monkeypatch.setattr(reservation, "RESERVE_WINDOW_S", float("inf"))
    monkeypatch.setattr(reservation, "_shared", reservation.ReservationBudget())
    probe = os.open(str(tmp_path / "probe"), os.O_RDWR | os.O_CREAT)
    supported = reserve_blocks(probe, 0, 4096)
    os.close(probe)
    path = str(tmp_path / "t-0")
    lg = Log(path, LogConfig(segment_bytes=1 << 30))
    log_file = os.path.join(path, "%020d.log" % 0)
    lg.append(batch(10))
    assert os.stat(log_file).st_blocks * 512 < reservation.RESERVE_MIN  # a small append reserves nothing
    ahead = 0
    while lg.active_segment.size <= 3 * reservation.RESERVE_MIN:
        lg.append(batch(100, size=1000))
        st = os.stat(log_file)
        assert st.st_size == lg.active_segment.size  # readers and recovery see only the data
        ahead = max(ahead, st.st_blocks * 512 - st.st_size)
    if supported:  # Linux filesystems with fallocate
        assert ahead >= 2 * reservation.RESERVE_MIN  # the second chunk is twice the first
    lg.close()
    st = os.stat(log_file)
    assert st.st_blocks * 512 < st.st_size + 64 * 1024  # released on close
    assert reservation.reservation_budget().used == 0


KEYLESS = "Compacted topic cannot accept message without key in topic partition t-0."


def test_a_compacted_log_refuses_records_without_a_key(tmp_path):
    from pylogq.errors import InvalidRecordError

    with Log(str(tmp_path / "t-0"), LogConfig(cleanup_policy="compact")) as lg:
        lg.append(batch(3))
        with pytest.raises(InvalidRecordError, match="rejected due to 2 record errors") as refused:
            lg.append(batch(2, keys=False))
        assert refused.value.record_errors == [(0, KEYLESS), (1, KEYLESS)]
        assert lg.log_end_offset == 3


# -- the one pass of an append ----------------------------------------------------------


def test_an_append_reads_the_buffer_once(tmp_path, monkeypatch):
    """A v2 append walks its buffer in ``validate_batches`` alone: no header walk, no decode for keys."""
    passes = []
    validate = records.validate_batches
    monkeypatch.setattr(records, "validate_batches", lambda *a, **k: passes.append(a[1]) or validate(*a, **k))
    for name in ("iter_batches", "decode_columns", "scan", "assign_offsets"):
        monkeypatch.setattr(records, name, lambda *a, _name=name, **k: pytest.fail("%s walked the buffer" % _name))
    cfg = LogConfig(cleanup_policy="compact", index_interval_bytes=100)
    with Log(str(tmp_path / "t-0"), cfg) as lg:
        info = lg.append(batch(3) + batch(4, start=3, codec=1))
        assert (info.base_offset, info.last_offset, info.record_count, info.batch_count) == (0, 6, 7, 2)
        assert passes == [True]  # keys required: a compacted topic
        assert lg.active_segment.offset_index.entries == 1  # the second batch is past index.interval.bytes
    monkeypatch.undo()
    with Log(str(tmp_path / "t-0"), cfg) as lg:
        assert [o for o, _ in read_all(lg)] == list(range(7))


def test_a_record_without_a_key_in_a_later_compressed_batch_is_named_by_its_index(tmp_path):
    from pylogq.errors import InvalidRecordError

    with Log(str(tmp_path / "t-0"), LogConfig(cleanup_policy="compact")) as lg:
        lg.append(batch(5))
        keyless = bytes(records.build_batch([b"a", b"b", b"c"], keys=[b"k", b"k", None], timestamps=TS,
                                            compression_type="gzip"))
        with pytest.raises(InvalidRecordError, match=r"batchIndex=2, message='Compacted topic") as refused:
            lg.append(batch(2, start=5) + keyless)
        assert refused.value.record_errors == [(2, KEYLESS)]  # its place in its own batch
        assert lg.log_end_offset == 5 and lg.active_segment.size == len(batch(5))
    with Log(str(tmp_path / "u-0")) as lg:  # a plain topic takes it
        assert lg.append(batch(2) + keyless).record_count == 5


def test_producer_hooks_see_validated_batches_then_written_ones(tmp_path):
    """``check_producers`` runs after validation and before the log's own checks; a retry writes nothing."""
    seen = []

    def check(batches, buffer):
        assert buffer[batches[0].position + 16] == 2  # the batches' own buffer
        seen.append(("check", [(b.base_offset, b.producer_id, b.base_sequence) for b in batches]))
        return (0, 2, TS + 2) if batches[0].base_sequence == 0 and len(seen) > 2 else None

    def appended(batches, buffer, index_aborted):
        seen.append(("appended", [(b.base_offset, b.last_offset, b.max_timestamp) for b in batches]))

    idempotent = bytes(records.build_batch([b"a", b"b", b"c"], keys=[b"k"] * 3, timestamps=TS,
                                           producer_id=4, producer_epoch=0, base_sequence=0))
    cfg = LogConfig(max_message_bytes=100, message_timestamp_type="LogAppendTime")
    with Log(str(tmp_path / "t-0"), cfg, clock=Clock(TS + 50)) as lg:
        bad = bytearray(idempotent)
        bad[-1] ^= 1
        with pytest.raises(CorruptRecordError):
            lg.append(bad, check_producers=check, producers_appended=appended)
        assert seen == []  # bad bytes never reach the producer checks
        with pytest.raises(MessageTooLargeError):
            lg.append(idempotent + batch(5), check_producers=check, producers_appended=appended)
        assert seen == []  # sizes are checked first, from the length fields (as Kafka does)
        lg.append(idempotent, check_producers=check, producers_appended=appended)
        assert seen == [("check", [(0, 4, 0)]), ("appended", [(0, 2, TS + 50)])]
        retry = lg.append(idempotent, check_producers=check, producers_appended=appended)
        assert retry.duplicate and (retry.base_offset, retry.last_offset, retry.log_append_time) == (0, 2, TS + 2)
        assert lg.log_end_offset == 3 and seen[-1][0] == "check"
