"""Log.append's pass over a producer's records: outside the log's lock, control batches, bounded legacy sets.

(The decompression bounds themselves are the records layer's: tests/records/test_codecs.py
and test_fuzz.py; over the wire, tests/server/test_bombs.py.)
"""

from __future__ import annotations

import struct
import threading
from typing import Any, List

import pytest

from pylogq import records
from pylogq.cluster.state.partition import Partition
from pylogq.errors import InvalidRecordError, MessageTooLargeError
from pylogq.records import codecs, record_times
from pylogq.records.legacy import LegacyRecordBatchBuilder
from pylogq.config import LogConfig
from pylogq.storage.log import Log

TS = 1_700_000_000_000


def _marker() -> bytes:
    """A COMMIT transaction marker: a control batch."""
    return bytes(records.build_batch([b"\x00\x00\x00\x00\x00\x00"], keys=[struct.pack(">hh", 0, 1)], timestamps=TS,
                                     is_control=True, is_transactional=True, producer_id=5, producer_epoch=0))


def test_a_client_control_batch_is_refused_and_nothing_is_written(tmp_path: Any) -> None:
    with Log(str(tmp_path / "t-0")) as lg:
        plain = bytes(records.build_batch([b"a", b"b"], timestamps=TS))
        with pytest.raises(InvalidRecordError, match="Clients are not allowed to write control records") as refused:
            lg.append(plain + _marker(), allow_control=False)
        assert refused.value.record_errors == [(0, "Clients are not allowed to write control records")]
        assert lg.log_end_offset == 0
        lg.append(plain, allow_control=False)
        assert lg.append(_marker()).base_offset == 2  # the broker's own writers (and tools) may


def test_only_the_broker_writes_control_batches_to_a_partition(tmp_path: Any) -> None:
    log = Log(str(tmp_path / "t-0"))
    part = Partition("t", 0, log)
    try:
        with pytest.raises(InvalidRecordError):
            part.append(_marker())
        assert part.append(_marker(), origin="coordinator").base_offset == 0
    finally:
        part.close()


@pytest.mark.parametrize("codec", ["none", "zstd"])
def test_records_are_validated_without_the_log_lock(tmp_path: Any, monkeypatch: pytest.MonkeyPatch,
                                                    codec: str) -> None:
    """A compressed batch may take long to walk: flushes, retention and readers must not wait for it."""
    real = records.validate_batches
    free: List[bool] = []

    def spy(buffer: Any, require_keys: bool = False) -> Any:
        def probe() -> None:  # another thread: the log's RLock would let this one in anyway
            took = lg._lock.acquire(blocking=False)
            if took:
                lg._lock.release()
            free.append(took)

        thread = threading.Thread(target=probe)
        thread.start()
        thread.join()
        return real(buffer, require_keys)

    monkeypatch.setattr(records, "validate_batches", spy)
    with Log(str(tmp_path / "t-0")) as lg:
        lg.append(bytes(records.build_batch([b"x" * 100] * 10, timestamps=TS, compression_type=codec)))
    assert free == [True]


def test_a_legacy_wrapper_larger_than_the_window_is_too_large(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(codecs, "DECOMPRESS_WINDOW", 10_000)
    big = LegacyRecordBatchBuilder(1, codecs.GZIP)
    for i in range(20):
        big.append(i, TS + i, b"k", bytes(1000))
    with Log(str(tmp_path / "t-0"), LogConfig(cleanup_policy="compact")) as lg:
        with pytest.raises(MessageTooLargeError, match="v0/v1 wrapper's inner message set"):
            lg.append(bytes(big.build()))
        small = LegacyRecordBatchBuilder(1, codecs.GZIP)
        small.append(0, TS, b"k", b"v")
        small.append(1, TS, None, b"keyless")
        with pytest.raises(InvalidRecordError, match="Compacted topic cannot accept message without key") as refused:
            lg.append(bytes(small.build()))
        assert [i for i, _ in refused.value.record_errors] == [1]
        assert lg.log_end_offset == 0


@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4", "zstd"])
@pytest.mark.parametrize("log_append_time", [False, True])
def test_a_search_by_timestamp_reads_a_large_batch_as_it_decompresses(tmp_path: Any, codec: str,
                                                                     log_append_time: bool) -> None:
    """ListOffsets by timestamp finds the record in a batch larger than a decompression chunk
    through the streaming walk, and agrees with the columnar decoder on every record."""
    values = [bytes([i % 251]) * (64 << 10) for i in range(40)]  # 2.5 MiB decompressed, 10 chunks
    times = [TS + 10 * i for i in range(40)]
    batch = bytes(records.build_batch(values, keys=[b"k%d" % i for i in range(40)], timestamps=times,
                                      compression_type=codec))
    config = {"message.timestamp.type": "LogAppendTime"} if log_append_time else {}
    with Log(str(tmp_path / "t-0"), LogConfig.from_dict(config)) as lg:
        first = 0 if log_append_time else 1  # a LogAppendTime record before it could share its ms
        if not log_append_time:
            lg.append(bytes(records.build_batch([b"before"], timestamps=TS - 5)))
        lg.append(batch)
        data = lg.read(first, 1 << 30).read()
        walked = list(record_times.iter_record_times(data))
        columns = records.decode_columns(data)
        assert walked == list(zip(columns.offsets.tolist(), columns.timestamps.tolist()))
        assert [o for o, _ in walked] == list(range(first, first + 40))
        if log_append_time:
            stamp = walked[0][1]
            assert {t for _, t in walked} == {stamp}
            assert lg.offset_for_timestamp(stamp) == (0, stamp)
        else:
            assert lg.offset_for_timestamp(TS + 10 * 17 - 3) == (18, TS + 10 * 17)
            assert lg.offset_for_timestamp(TS + 10 * 39) == (40, TS + 10 * 39)
            assert lg.offset_for_timestamp(TS + 10 * 39 + 1) is None


def test_a_search_by_timestamp_in_a_batch_of_extreme_ratio_stays_small(tmp_path: Any) -> None:
    """A valid zstd batch of 400 x 1 MiB records (400 MiB decompressed, a few KB on disk): the
    search for its last record keeps the process's peak memory far below the batch's size."""
    import subprocess
    import sys
    import textwrap

    script = textwrap.dedent("""
        import resource, sys
        from pylogq import records
        from pylogq.storage.log import Log
        values = [b"\\0" * (1 << 20)] * 400
        batch = bytes(records.build_batch(values, timestamps=[1000 + i for i in range(400)],
                                          compression_type="zstd"))
        del values
        with Log(sys.argv[1]) as lg:
            lg.append(batch)
            del batch
            before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
            found = lg.offset_for_timestamp(1399)
            after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        print(found, before, after)
    """)
    done = subprocess.run([sys.executable, "-c", script, str(tmp_path / "t-0")], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    found, before, after = done.stdout.split(")")[0] + ")", *done.stdout.split(")")[1].split()
    assert found == "(399, 1399)"
    assert int(after) - int(before) < 64 * 1024, (before, after)  # KiB: far below the 400 MiB it holds


def test_an_oversized_batch_is_refused_before_it_is_decompressed(tmp_path: Any,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """max.message.bytes is checked from the length fields: a compressed batch over it is
    never walked (nor decompressed), whatever it would expand to."""
    batch = bytes(records.build_batch([bytes(range(256)) * 64 for _ in range(8)], timestamps=TS,
                                      compression_type="zstd"))
    walked: List[int] = []
    real = records.validate_batches

    def spy(buffer: Any, require_keys: bool = False) -> Any:
        walked.append(len(buffer))
        return real(buffer, require_keys)

    monkeypatch.setattr(records, "validate_batches", spy)
    with Log(str(tmp_path / "t-0"), LogConfig(max_message_bytes=len(batch) - 13)) as lg:
        small = bytes(records.build_batch([b"ok"], timestamps=TS))
        with pytest.raises(MessageTooLargeError, match="batch of %d bytes at byte %d of the append exceeds "
                                                       "max.message.bytes=%d" % (len(batch), len(small),
                                                                                 len(batch) - 13)):
            lg.append(small + batch)
        assert walked == [] and lg.log_end_offset == 0
        lg.config = LogConfig(max_message_bytes=len(batch) - 12)
        lg.append(small + batch)
        assert walked == [len(small) + len(batch)] and lg.log_end_offset == 9
