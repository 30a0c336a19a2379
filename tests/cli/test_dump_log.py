"""``pylogq dump-log``: run as a user runs it, on a log written by pylogq.storage.log.Log."""

from __future__ import annotations

import os
import struct
import subprocess
import sys
import zlib
from typing import Dict, List, NamedTuple

import pytest

from pylogq import records
from pylogq.records import codecs
from pylogq.records.legacy import LegacyRecordBatchBuilder, assign_offsets_legacy
from pylogq.config import LogConfig
from pylogq.storage.index import OffsetIndex, TimeIndex
from pylogq.storage.log import Log
from pylogq.storage.manager import LogManager

T0 = 1700000000000
FIRST = "%020d" % 0

# The first batch of the log: three uncompressed records, key b"k", value b"hello",
# timestamps T0..T0+2, no producer id. Its bytes are fixed, and so is its CRC-32C.
GOLDEN_BATCH = (
    "baseOffset: 0 lastOffset: 2 count: 3 baseSequence: -1 lastSequence: -1 producerId: -1 producerEpoch: -1 "
    "partitionLeaderEpoch: 0 isTransactional: false isControl: false deleteHorizonMs: OptionalLong.empty "
    "position: 0 CreateTime: 1700000000002 size: 100 magic: 2 compresscodec: none crc: 2406541307 isvalid: true"
)
GOLDEN_RECORDS = [
    "| offset: %d CreateTime: %d keySize: 1 valueSize: 5 sequence: -1 headerKeys: [] key: k payload: hello"
    % (i, T0 + i) for i in range(3)
]
# The uncompressed v1 message at offset 8: CRC-32 over magic..value, fixed bytes.
LEGACY_CRC = 2210409184


class Built(NamedTuple):
    directory: str
    first_log: str
    second_log: str
    end_offset: int


def _v2(codec: int, count: int, ts: int, **kwargs) -> bytearray:
    builder = records.RecordBatchBuilder(codec, **kwargs)
    for i in range(count):
        builder.append(i, ts + i, b"k", b"hello")
    return builder.build()


def _append_legacy(log: Log, data: bytes) -> None:
    """A v0/v1 message set as an old segment holds it (a leader's append up-converts to v2)."""
    stored, _ = assign_offsets_legacy(data, log.log_end_offset)
    log.append_as_follower(stored)


def _build_log(root: str) -> Built:
    directory = os.path.join(root, "events-0")
    log = Log(directory, LogConfig(index_interval_bytes=0))
    try:
        log.append(_v2(codecs.NONE, 3, T0))                                   # offsets 0-2, the golden batch
        gz = records.RecordBatchBuilder(codecs.GZIP)
        for i in range(3):
            gz.append(i, T0 + 10 + i, None, b"v%d" % i, [("h1", b"x"), ("h2", None)])
        log.append(gz.build())                                                # offsets 3-5, headers, null keys
        log.append(_v2(codecs.LZ4, 2, T0 + 20, producer_id=42, producer_epoch=3, base_sequence=10))  # 6-7
        legacy = LegacyRecordBatchBuilder(1, codecs.NONE)
        legacy.append(0, T0 + 30, b"lk", b"legacy")
        _append_legacy(log, legacy.build())                                   # offset 8, legacy v1
        wrapped = LegacyRecordBatchBuilder(1, codecs.GZIP)
        for i in range(3):
            wrapped.append(i, T0 + 40, b"lk", b"legacy%d" % i)
        _append_legacy(log, wrapped.build())                                  # offsets 9-11, v1 wrapper
        odd = records.RecordBatchBuilder(codecs.ZSTD)
        odd.append(0, T0 + 50, b"\xff\xfe", None)                             # offset 12, a tombstone
        odd.append(1, T0 + 51, "ключ".encode(), "значение".encode())          # offset 13, UTF-8
        log.append(odd.build())
        marker = records.RecordBatchBuilder(codecs.NONE, producer_id=42, producer_epoch=3, is_transactional=True,
                                            is_control=True)
        marker.append(0, T0 + 60, struct.pack(">hh", 0, 1), struct.pack(">hi", 0, 7))
        log.append(marker.build())                                            # offset 14, COMMIT marker
        log.roll()
        log.append(_v2(codecs.SNAPPY, 4, T0 + 70))                            # offsets 15-18, second segment
        end = log.log_end_offset
    finally:
        log.close()
    return Built(directory, os.path.join(directory, FIRST + ".log"), os.path.join(directory, "%020d.log" % 15), end)


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Built:
    return _build_log(str(tmp_path_factory.mktemp("dump")))


@pytest.fixture
def fresh(tmp_path) -> Built:
    """A log of its own, for tests that damage files."""
    return _build_log(str(tmp_path))


@pytest.fixture
def dump():
    """Run ``python -m pylogq dump-log`` on this pass's kernels: the compiled ones, or the pure-Python
    twins in the pure pass (``PYLOGQ_NO_EXTENSIONS=1``, which the child inherits). Each pass runs
    the tool on its own kernels: a compiled pass that ran the twins too would repeat the pure pass."""

    def run(*args: str) -> subprocess.CompletedProcess:
        out = subprocess.run([sys.executable, "-m", "pylogq", "dump-log", *args], capture_output=True, text=True,
                             timeout=120)
        assert "Traceback" not in out.stderr, out.stderr
        return out

    return run


def _lines(out: subprocess.CompletedProcess) -> List[str]:
    return out.stdout.splitlines()


def _sibling(log_path: str, suffix: str) -> str:
    return log_path[: -len(".log")] + suffix


# --------------------------------------------------------------------------- .log files


def test_golden_batch_and_legacy_lines(built, dump):
    out = dump("--files", built.first_log)
    assert out.returncode == 0, out.stderr
    lines = _lines(out)
    assert lines[:3] == ["Dumping %s" % built.first_log, "Log starting offset: 0", GOLDEN_BATCH]
    info = {i.base_offset: i for i in records.iter_batches(open(built.first_log, "rb").read())}
    legacy = ("offset: 8 position: %d CreateTime: %d size: 42 magic: 1 compresscodec: none crc: %d isvalid: true"
              % (info[8].position, T0 + 30, LEGACY_CRC))
    assert legacy in lines
    assert out.stderr == ""


def test_every_batch_has_a_line_matching_its_header(built, dump):
    data = open(built.first_log, "rb").read()
    lines = _lines(dump("--files", built.first_log))[2:]
    infos = list(records.iter_batches(data))
    assert len(lines) == len(infos) == 7
    for line, info in zip(lines, infos):
        entry = data[info.position : info.position + info.size]
        if info.magic == 2:
            batch = records.RecordBatch(entry)
            assert line.startswith("baseOffset: %d lastOffset: %d count: %d " % (
                info.base_offset, info.last_offset, info.records_count))
            assert " compresscodec: %s crc: %d isvalid: true" % (codecs.NAMES[batch.compression_type], batch.crc) in line
        else:
            assert line.startswith("offset: %d " % info.last_offset)
        assert " position: %d " % info.position in line
        assert " size: %d magic: %d " % (info.size, info.magic) in line
    producer = [ln for ln in lines if "producerId: 42 " in ln and "isControl: false" in ln]
    assert len(producer) == 1
    assert "baseSequence: 10 lastSequence: 11 producerId: 42 producerEpoch: 3 " in producer[0]
    assert "compresscodec: lz4" in producer[0]
    control = [ln for ln in lines if "isControl: true" in ln]
    assert len(control) == 1 and "isTransactional: true" in control[0]


def test_second_segment_reports_its_base_offset(built, dump):
    lines = _lines(dump("--files", built.second_log))
    assert lines[1] == "Log starting offset: 15"
    assert lines[2].startswith("baseOffset: 15 lastOffset: 18 count: 4 ")
    assert "compresscodec: snappy" in lines[2] and "position: 0 " in lines[2]


def test_deep_iteration_prints_every_record_without_payloads(built, dump):
    out = dump("--deep-iteration", "--files", ",".join([built.first_log, built.second_log]))
    assert out.returncode == 0
    record_lines = [ln for ln in _lines(out) if ln.startswith("| ")]
    offsets = [int(ln.split()[2]) for ln in record_lines]
    assert offsets == list(range(built.end_offset))
    assert not any("payload:" in ln or " key:" in ln for ln in record_lines)
    assert record_lines[0] == "| offset: 0 CreateTime: 1700000000000 keySize: 1 valueSize: 5 sequence: -1 headerKeys: []"
    by_offset: Dict[int, str] = dict(zip(offsets, record_lines))
    assert "sequence: 10 " in by_offset[6] and "sequence: 11 " in by_offset[7]
    assert by_offset[3].endswith("keySize: -1 valueSize: 2 sequence: -1 headerKeys: [h1,h2]")
    assert by_offset[8] == "| offset: 8 CreateTime: %d keySize: 2 valueSize: 6 isValid: true crc: %d" % (
        T0 + 30, LEGACY_CRC)
    assert by_offset[14].endswith("headerKeys: [] endTxnMarker: COMMIT coordinatorEpoch: 7")
    # Offsets run on across both files, but Kafka checks consecutiveness per file only.
    assert "Non-consecutive" not in out.stderr


def test_print_data_log_prints_keys_and_payloads(built, dump):
    out = dump("--print-data-log", "--files", built.first_log)
    assert out.returncode == 0
    lines = _lines(out)
    assert lines[2:6] == [GOLDEN_BATCH] + GOLDEN_RECORDS
    by_offset = {int(ln.split()[2]): ln for ln in lines if ln.startswith("| ")}
    assert by_offset[4].endswith("headerKeys: [h1,h2] payload: v1")  # a null key prints no key
    assert by_offset[8].endswith("isValid: true crc: %d key: lk payload: legacy" % LEGACY_CRC)
    assert by_offset[10].endswith(" key: lk payload: legacy1")
    assert by_offset[12].endswith("valueSize: -1 sequence: -1 headerKeys: [] key: \ufffd\ufffd")  # tombstone
    assert by_offset[13].endswith(" key: ключ payload: значение")
    assert "payload" not in by_offset[14]  # control records show the marker, not data


def test_max_bytes_stops_before_a_batch_it_cuts(built, dump):
    infos = list(records.iter_batches(open(built.first_log, "rb").read()))
    cut = infos[2].position + 5
    lines = _lines(dump("--max-bytes", str(cut), "--files", built.first_log))
    assert lines[2] == GOLDEN_BATCH
    assert len(lines) == 4  # two whole batches; the one cut short is no error
    assert not any("invalid bytes" in ln for ln in lines)


def test_a_v0_message_has_no_timestamp_type(tmp_path, dump):
    log = Log(str(tmp_path / "old-0"), LogConfig())
    v0 = LegacyRecordBatchBuilder(0, codecs.NONE)
    v0.append(0, None, b"k0", b"magic zero")
    _append_legacy(log, v0.build())
    log.close()
    path = str(tmp_path / "old-0" / (FIRST + ".log"))
    data = open(path, "rb").read()
    crc = zlib.crc32(data[16:])
    lines = _lines(dump("--print-data-log", "--files", path))
    assert lines[2:] == [
        "offset: 0 position: 0 NoTimestampType: -1 size: %d magic: 0 compresscodec: none crc: %d isvalid: true"
        % (len(data), crc),
        "| offset: 0 NoTimestampType: -1 keySize: 2 valueSize: 10 isValid: true crc: %d key: k0 payload: magic zero"
        % crc,
    ]


# --------------------------------------------------------------------------- damaged .log files


def test_garbage_after_the_log_is_reported_as_invalid_bytes(fresh, dump):
    size = os.path.getsize(fresh.first_log)
    with open(fresh.first_log, "ab") as f:
        f.write(b"garbage-garbage-garbage")
    out = dump("--deep-iteration", "--files", fresh.first_log)
    assert out.returncode == 0
    lines = _lines(out)
    assert lines[2] == GOLDEN_BATCH
    assert len([ln for ln in lines if not ln.startswith("| ")]) == 2 + 7 + 1
    assert lines[-1] == ("Found 23 invalid bytes at the end of %s.log, starting at position %d: "
                         "entry at byte %d has unknown magic 103" % (FIRST, size, size))


def test_a_truncated_batch_is_reported_as_partial(fresh, dump):
    infos = list(records.iter_batches(open(fresh.first_log, "rb").read()))
    last = infos[-1]
    os.truncate(fresh.first_log, last.position + 20)
    lines = _lines(dump("--files", fresh.first_log))
    assert len(lines) == 2 + 6 + 1
    assert lines[-1] == ("Found 20 invalid bytes at the end of %s.log, starting at position %d: a partial batch: "
                         "the entry at position %d declares %d bytes, 20 remain"
                         % (FIRST, last.position, last.position, last.size))


def test_a_batch_failing_its_crc_is_printed_invalid_and_the_dump_goes_on(fresh, dump):
    with open(fresh.first_log, "r+b") as f:
        f.seek(90)  # inside the golden batch's records
        byte = f.read(1)
        f.seek(90)
        f.write(bytes([byte[0] ^ 0x01]))
    out = dump("--print-data-log", "--files", fresh.first_log)
    assert out.returncode == 0
    lines = _lines(out)
    assert lines[2] == GOLDEN_BATCH.replace("isvalid: true", "isvalid: false")
    assert len([ln for ln in lines if ln.startswith(("baseOffset", "offset"))]) == 7
    assert not any("invalid bytes" in ln for ln in lines)


# --------------------------------------------------------------------------- index files


def test_index_dumps_match_the_index_entries(built, dump):
    index_path = _sibling(built.first_log, ".index")
    time_path = _sibling(built.first_log, ".timeindex")
    with OffsetIndex(index_path, 0, writable=False) as index:
        offsets = index.all_entries()
    with TimeIndex(time_path, 0, writable=False) as tindex:
        times = tindex.all_entries()
    assert len(offsets) >= 5 and len(times) >= 5
    out = dump("--files", "%s,%s" % (index_path, time_path))
    assert out.returncode == 0 and out.stderr == ""
    expected = (["Dumping %s" % index_path] + ["offset: %d position: %d" % e for e in offsets]
                + ["Dumping %s" % time_path] + ["timestamp: %d offset: %d" % e for e in times])
    assert _lines(out) == expected


def test_sanity_check_passes_on_intact_indexes(built, dump):
    paths = [_sibling(built.first_log, s) for s in (".index", ".timeindex")]
    out = dump("--index-sanity-check", "--files", ",".join(paths))
    assert out.returncode == 0
    assert _lines(out) == ["Dumping %s" % paths[0], "%s passed sanity check." % paths[0],
                           "Dumping %s" % paths[1], "%s passed sanity check." % paths[1]]


def test_sanity_check_fails_on_garbage_in_the_index(fresh, dump):
    index_path = _sibling(fresh.first_log, ".index")
    with open(index_path, "r+b") as f:
        f.write(struct.pack(">iiii", 9, 0, 2, 0))  # offsets going backwards
    out = dump("--index-sanity-check", "--files", index_path)
    assert out.returncode == 1
    assert _lines(out)[1].startswith("%s failed sanity check: " % index_path)
    assert "offsets not strictly increasing" in out.stdout


def test_sanity_check_fails_on_an_index_of_odd_length(fresh, dump):
    time_path = _sibling(fresh.first_log, ".timeindex")
    with open(time_path, "ab") as f:
        f.write(b"\x01\x02\x03")
    out = dump("--index-sanity-check", "--files", time_path)
    assert out.returncode == 1
    assert "failed sanity check" in out.stdout and "not a multiple of the entry size 12" in out.stdout


def test_verify_index_only_is_silent_on_a_good_index(built, dump):
    paths = [_sibling(built.first_log, s) for s in (".index", ".timeindex")]
    out = dump("--verify-index-only", "--files", ",".join(paths))
    assert out.returncode == 0 and out.stderr == ""
    assert _lines(out) == ["Dumping %s" % p for p in paths]


def test_verify_index_only_reports_an_entry_pointing_at_the_wrong_batch(fresh, dump):
    index_path = _sibling(fresh.first_log, ".index")
    with OffsetIndex(index_path, 0, writable=False) as index:
        (offset0, position0), (offset1, _) = index.entry(0), index.entry(1)
    with open(index_path, "r+b") as f:
        f.seek(8 + 4)
        f.write(struct.pack(">i", position0))  # entry 1 now points at entry 0's batch: still sorted
    out = dump("--verify-index-only", "--files", index_path)
    assert out.returncode == 1
    assert _lines(out) == ["Dumping %s" % index_path]
    assert "Index position mismatch" in out.stderr
    assert "Mismatches in :%s" % os.path.abspath(index_path) in out.stderr
    assert "  Index offset: %d, log offset: %d" % (offset1, offset0) in out.stderr.splitlines()
    sane = dump("--index-sanity-check", "--files", index_path)
    assert sane.returncode == 0  # well ordered: only the log can tell it is wrong


def test_verify_time_index_reports_a_wrong_timestamp(fresh, dump):
    time_path = _sibling(fresh.first_log, ".timeindex")
    with TimeIndex(time_path, 0, writable=False) as tindex:
        last_ts, last_offset = tindex.entry(tindex.entries - 1)
    with open(time_path, "r+b") as f:
        f.seek(os.path.getsize(time_path) - 12)
        f.write(struct.pack(">q", last_ts + 1000))
    out = dump("--verify-index-only", "--files", time_path)
    assert out.returncode == 1
    assert "Found timestamp mismatch in :%s" % os.path.abspath(time_path) in out.stderr
    assert "  Index timestamp: %d, log timestamp: %d" % (last_ts + 1000, last_ts) in out.stderr


# --------------------------------------------------------------------------- errors and live directories


def test_a_missing_file_exits_1_and_the_others_are_still_dumped(built, dump):
    missing = os.path.join(built.directory, "%020d.log" % 999)
    out = dump("--files", "%s,%s" % (missing, built.second_log))
    assert out.returncode == 1
    assert "cannot read %s: No such file or directory" % missing in out.stderr
    assert "Log starting offset: 15" in out.stdout


def test_a_missing_index_exits_1(built, dump):
    missing = os.path.join(built.directory, "%020d.index" % 999)
    out = dump("--files", missing)
    assert out.returncode == 1 and "cannot read %s" % missing in out.stderr


@pytest.mark.parametrize("args", [[], ["--files", "x.log", "--max-bytes", "0"], ["--files", "x.log", "--bogus"]])
def test_usage_errors_exit_2(dump, args):
    out = dump(*args)
    assert out.returncode == 2 and "usage:" in out.stderr


def test_dumps_a_directory_in_use_without_touching_it(tmp_path, dump):
    manager = LogManager(log_dirs=[str(tmp_path)], background=False)
    try:
        log = manager.get_or_create_log("live", 0, LogConfig(index_interval_bytes=0))
        for i in range(5):
            log.append(_v2(codecs.NONE, 2, T0 + 10 * i))
        directory = log.directory
        before = {n: (os.path.getsize(os.path.join(directory, n)), open(os.path.join(directory, n), "rb").read())
                  for n in os.listdir(directory)}
        index_path = os.path.join(directory, FIRST + ".index")
        assert os.path.getsize(index_path) > 8 * log.active_segment.offset_index.entries  # preallocated
        paths = [os.path.join(directory, FIRST + s) for s in (".log", ".index", ".timeindex")]
        out = dump("--deep-iteration", "--files", ",".join(paths))
        assert out.returncode == 0, out.stderr
        lines = _lines(out)
        assert len([ln for ln in lines if ln.startswith("baseOffset")]) == 5
        entries = log.active_segment.offset_index.all_entries()[: log.active_segment.offset_index.entries]
        index_lines = lines[lines.index("Dumping %s" % paths[1]) + 1 : lines.index("Dumping %s" % paths[2])]
        assert index_lines == ["offset: %d position: %d" % e for e in entries]  # stops at the zero-filled tail
        after = {n: (os.path.getsize(os.path.join(directory, n)), open(os.path.join(directory, n), "rb").read())
                 for n in os.listdir(directory)}
        assert after == before
        log.append(_v2(codecs.NONE, 1, T0 + 100))  # the owner goes on as before
    finally:
        manager.close()


# --------------------------------------------------------------------------- .txnindex files


def test_a_transaction_index_prints_each_aborted_transaction(tmp_path, dump):
    from pylogq.cluster.state.partition import Partition
    from pylogq.records.control import ABORT, build_end_txn_marker

    log = Log(str(tmp_path / "t-0"))
    part = Partition("t", 0, log)
    for pid in (7, 8):
        part.append(records.build_batch([b"x"], timestamps=1, producer_id=pid, producer_epoch=0, base_sequence=0,
                                        is_transactional=True))
    part.append(build_end_txn_marker(7, 0, ABORT, 0, 1), origin="coordinator")
    part.append(build_end_txn_marker(8, 0, ABORT, 0, 1), origin="coordinator")
    path = log.active_segment.txn_index.path
    log.close()
    out = dump("--files", path)
    assert out.returncode == 0 and out.stderr == ""
    # Kafka's DumpLogSegments.dumpTxnIndex lines.
    assert _lines(out) == ["Dumping %s" % path,
                           "version: 0 producerId: 7 firstOffset: 0 lastOffset: 2 lastStableOffset: 1",
                           "version: 0 producerId: 8 firstOffset: 1 lastOffset: 3 lastStableOffset: 4"]
    with open(path, "ab") as f:
        f.write(b"\x00" * 5)
    out = dump("--files", path)
    assert out.returncode == 0 and len(_lines(out)) == 3
    assert out.stderr == "Found 5 bytes at the end of %s, fewer than a 34-byte entry\n" % os.path.abspath(path)
