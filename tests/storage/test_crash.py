"""Crash safety: a writer process killed with SIGKILL, and damaged files on disk.

The process test runs :mod:`tests.storage._crash_child` over and over on one
log directory, kills it at a random moment (sometimes right after an
acknowledgement, sometimes while it is appending), reopens the directory here
(no clean-shutdown marker: recovery runs) and checks that every acknowledged
offset is there, intact, with the offsets contiguous from the start. The next
child must then append from the log end offset this process saw.

The single-process tests damage the files the way a crash or a bad disk
leaves them and check that opening the log repairs them: garbage or a torn
batch at the end of a segment, missing or corrupt indexes, a retention
deletion cut short.
"""

from __future__ import annotations

import collections
import os
import random
import select
import signal
import subprocess
import sys
import time
from typing import Any, Dict, List, Optional, Tuple

import numpy as np
import pytest

from pylogq import records
from pylogq.errors import OffsetOutOfRangeError
from pylogq.storage.checkpoint import CLEAN_SHUTDOWN_FILE, OffsetCheckpoint
from pylogq.config import LogConfig
from pylogq.storage.config import LogManagerConfig
from pylogq.storage.log import Log
from pylogq.storage.manager import LogManager
from pylogq.storage.scheduler import Scheduler
from pylogq.storage.segment import (
    DELETED_SUFFIX,
    INDEX_SUFFIX,
    LOG_SUFFIX,
    TIME_INDEX_SUFFIX,
    LogSegment,
    filename_prefix,
)

from . import _crash_child as child

CHILD = os.path.abspath(child.__file__)
REPO = os.path.dirname(os.path.dirname(os.path.dirname(CHILD)))
CYCLES = 32
MAX_ACKS = 40
LINE_TIMEOUT = 20.0  # seconds a live child may take to print its next line


# -- checking a log's contents -----------------------------------------------------


def check_contents(log: Log, start: int = 0) -> int:
    """Read the log from ``start`` to its end and check every record; -> records seen.

    Every region must begin with a whole batch; batches must follow each other
    with no gap; every batch passes its CRC and every record holds what the
    writer puts at its offset (:func:`_crash_child.value_for`).
    """
    offset = start
    end = log.log_end_offset
    seen = 0
    while offset < end:
        data = log.read(offset, 64 * 1024).read()
        batches = list(records.iter_batches(data, check_crc=True))
        assert batches, "read at offset %d returned %d bytes without a whole batch" % (offset, len(data))
        assert batches[0].base_offset <= offset <= batches[0].last_offset or batches[0].base_offset == offset, (
            "read at offset %d starts with batch %d..%d" % (offset, batches[0].base_offset, batches[0].last_offset))
        for b in batches:
            assert b.base_offset == offset, "batch at %d follows offset %d: a gap or overlap" % (b.base_offset, offset - 1)
            offset = b.last_offset + 1
        whole = batches[-1].position + batches[-1].size
        columns = records.decode_columns(data[:whole], check_crc=True)
        expected = np.arange(batches[0].base_offset, offset, dtype=np.int64)
        assert np.array_equal(columns.offsets, expected), "records of offsets %d..%d are not contiguous" % (
            batches[0].base_offset, offset - 1)
        for i in range(len(columns)):
            o = int(columns.offsets[i])
            child.check_value(o, columns.value(i))
            assert columns.key(i) == child.key_for(o), "offset %d has key %r" % (o, columns.key(i))
            assert int(columns.timestamps[i]) == 1_700_000_000_000 + o
        seen += len(columns)
    assert offset == end, "the last batch ends at %d, the log at %d" % (offset, end)
    return seen


def check_segments(log: Log) -> None:
    """Segments tile the offsets: each starts where the previous one ends; no stray files."""
    segments = log.segments
    for a, b in zip(segments, segments[1:]):
        assert a.next_offset == b.base_offset, "segment %d ends at %d but the next starts at %d" % (
            a.base_offset, a.next_offset, b.base_offset)
    names = os.listdir(log.directory)
    stray = [n for n in names if n.endswith((DELETED_SUFFIX, ".cleaned", ".swap", ".tmp"))]
    assert not stray, "leftover files after open: %s" % stray
    bases = {s.base_offset for s in segments}
    for n in names:
        if n.endswith((LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX)):
            assert int(n.split(".", 1)[0]) in bases, "%s belongs to no segment" % n


# -- the process test -------------------------------------------------------------


class _Lines:
    """Lines from a child's stdout, read with deadlines (select), never blocking past them."""

    def __init__(self, proc: subprocess.Popen, stderr: Any) -> None:
        self.proc = proc
        self.stderr = stderr  # the file the child's stderr goes to
        self.fd = proc.stdout.fileno()
        self.buffer = b""
        self.lines: List[str] = []
        self.eof = False

    def _fill(self, timeout: float) -> bool:
        ready, _, _ = select.select([self.fd], [], [], max(timeout, 0.0))
        if not ready:
            return False
        chunk = os.read(self.fd, 65536)
        if not chunk:
            self.eof = True
            return False
        self.buffer += chunk
        *complete, self.buffer = self.buffer.split(b"\n")
        self.lines.extend(line.decode() for line in complete)
        return True

    def next(self, timeout: float = LINE_TIMEOUT) -> str:
        deadline = time.monotonic() + timeout
        while not self.lines:
            if self.eof:
                raise AssertionError("child exited (rc=%s) before printing a line; stderr: %s"
                                     % (self.proc.poll(), _stderr(self.stderr)))
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise AssertionError("child printed nothing for %.0f s" % timeout)
            self._fill(remaining)
        return self.lines.pop(0)

    def collect_for(self, seconds: float) -> None:
        """Gather whatever arrives within ``seconds`` (the random part of a kill moment)."""
        deadline = time.monotonic() + seconds
        while not self.eof and time.monotonic() < deadline:
            self._fill(deadline - time.monotonic())

    def drain(self) -> List[str]:
        """After the child died: every complete line left in the pipe (a torn last line is dropped)."""
        while not self.eof:
            if not self._fill(LINE_TIMEOUT) and not self.eof:
                raise AssertionError("pipe still open %.0f s after the child died" % LINE_TIMEOUT)
        lines, self.lines = self.lines, []
        return lines


def _stderr(file: Any) -> str:
    file.flush()
    file.seek(0)
    return file.read().decode(errors="replace")[-2000:]


def _spawn(root: str, seed: int, stderr) -> Tuple[subprocess.Popen, _Lines]:
    proc = subprocess.Popen(
        [sys.executable, CHILD, root, str(seed)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr, cwd=REPO,
    )
    return proc, _Lines(proc, stderr)


def _acks(lines: List[str]) -> List[Tuple[int, int]]:
    out = []
    for line in lines:
        kind, *fields = line.split()
        assert kind in ("ack", "append", "open"), "child reported: %s" % line
        if kind == "ack":
            out.append((int(fields[0]), int(fields[1])))
    return out


def test_sigkill_loses_no_acknowledged_offset(tmp_path, monkeypatch) -> None:
    root = str(tmp_path / "logs")
    os.makedirs(root)
    rng = random.Random(20240611)
    recover_calls = [0]
    original_recover = LogSegment.recover

    def counting_recover(self, max_message_bytes):
        recover_calls[0] += 1
        return original_recover(self, max_message_bytes)

    monkeypatch.setattr(LogSegment, "recover", counting_recover)
    end = 0
    stats: Dict[str, int] = collections.Counter()
    errs = [open(os.path.join(str(tmp_path), "child-%d.err" % i), "w+b") for i in range(CYCLES + 1)]
    proc, lines = _spawn(root, 1000, errs[0])
    try:
        for cycle in range(CYCLES):
            seed = 1000 + cycle
            assert lines.next() == "ready"
            proc.stdin.write(b"go\n")
            proc.stdin.flush()
            opened = lines.next().split()
            assert opened == ["open", "0", str(end)], (
                "cycle %d: the child opened the log at %s, the last log end was %d" % (cycle, opened, end))
            seen = [" ".join(opened)]
            acks_wanted = rng.randrange(MAX_ACKS + 1)
            while sum(line.startswith("ack") for line in seen) < acks_wanted:
                seen.append(lines.next())
            moment = rng.choice(("after an ack", "in an append", "any time"))
            stats[moment] += 1
            if moment == "in an append":
                while not seen[-1].startswith("append"):
                    seen.append(lines.next())
            elif moment == "any time":
                lines.collect_for(rng.uniform(0.0, 0.004))
            os.kill(proc.pid, signal.SIGKILL)
            assert proc.wait(timeout=LINE_TIMEOUT) == -signal.SIGKILL
            seen += lines.drain()
            torn = lines.buffer
            stats["torn lines"] += bool(torn)
            acks = _acks(seen)
            expected = end
            for first, last in acks:
                assert first == expected, "cycle %d: ack %d..%d after offset %d" % (cycle, first, last, expected - 1)
                expected = last + 1
            acked_end = expected
            stats["acks"] += len(acks)
            proc.stdin.close()
            proc.stdout.close()
            # The next child starts its interpreter while this one's log is checked.
            proc, lines = _spawn(root, seed + 1, errs[cycle + 1])

            assert not os.path.exists(os.path.join(root, CLEAN_SHUTDOWN_FILE)), "a killed child left a clean marker"
            recover_calls[0] = 0
            manager = LogManager([root], background=False)
            try:
                log = manager.get_log(child.TOPIC, child.PARTITION)
                assert log is not None
                assert recover_calls[0] >= 1, "cycle %d: reopened after a kill without recovery" % cycle
                assert log.log_start_offset == 0
                assert log.log_end_offset >= acked_end, (
                    "cycle %d: offsets %d..%d were acknowledged but the log ends at %d"
                    % (cycle, end, acked_end - 1, log.log_end_offset))
                stats["unacked tails"] += log.log_end_offset > acked_end
                stats["truncations"] += log.recovered_bytes > 0
                check_segments(log)
                assert check_contents(log) == log.log_end_offset
                end = log.log_end_offset
            finally:
                manager.close()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        for f in errs:
            f.close()
    assert stats["acks"] > CYCLES, stats  # the kills did not all land before the first append
    assert end > 0


# -- damaged files, one process -----------------------------------------------------

CONFIG = LogConfig(segment_bytes=child.SEGMENT_BYTES, index_interval_bytes=1024)


@pytest.fixture
def scheduler():
    """One scheduler for the test's logs, stopped after them (a log never waits for its own)."""
    s = Scheduler("test-crash")
    yield s
    s.shutdown()


def _fill(directory: str, scheduler: Scheduler, batches: int = 60) -> Tuple[Log, List[records.BatchHeader]]:
    """A log of ``batches`` appends across several segments; -> the open log and its batches."""
    log = Log(directory, CONFIG, scheduler=scheduler)
    rng = random.Random(7)
    for _ in range(batches):
        log.append(b"".join(child.build_batches(records, rng, log.log_end_offset)))
    return log, _all_batches(log)


def _all_batches(log: Log) -> List[records.BatchHeader]:
    out = []
    for segment in log.segments:
        out.extend(records.iter_batches(_read(segment.log_path)))
    return out


def _read(path: str) -> bytes:
    with open(path, "rb") as f:
        return f.read()


def _reopen(directory: str, scheduler: Scheduler, *, clean: bool, recovery_point: int = 0,
            log_start_offset: Optional[int] = None) -> Log:
    return Log(directory, CONFIG, clean_shutdown=clean, recovery_point=recovery_point,
               log_start_offset=log_start_offset, scheduler=scheduler)


def _active_log_file(log: Log) -> str:
    return log.active_segment.log_path


GARBAGE = {
    "random": lambda rng, last: rng.randbytes(1000),
    "zeros": lambda rng, last: bytes(4096),
    "bad crc": lambda rng, last: last[:30] + bytes([last[30] ^ 0x40]) + last[31:],
    "too long": lambda rng, last: last[:8] + (len(last) + 100).to_bytes(4, "big") + last[12:],
    "bad magic": lambda rng, last: last[:16] + b"\x07" + last[17:],
}


@pytest.mark.parametrize("kind", sorted(GARBAGE))
def test_garbage_after_the_last_batch_is_truncated(tmp_path, scheduler, kind) -> None:
    directory = str(tmp_path / "t-0")
    log, batches = _fill(directory, scheduler)
    end, segments = log.log_end_offset, log.num_segments
    path = _active_log_file(log)
    log.close()
    data = _read(path)
    last = list(records.iter_batches(data))[-1]
    garbage = GARBAGE[kind](random.Random(1), data[last.position : last.position + last.size])
    with open(path, "ab") as f:
        f.write(garbage)
    log = _reopen(directory, scheduler, clean=False, recovery_point=end)
    try:
        assert log.recovered_bytes == len(garbage)
        assert os.path.getsize(path) == len(data)
        assert (log.log_end_offset, log.num_segments) == (end, segments)
        assert check_contents(log) == end
        info = log.append(b"".join(child.build_batches(records, random.Random(2), end)))
        assert info.first_offset == end
        assert check_contents(log) == log.log_end_offset
    finally:
        log.close()


@pytest.mark.parametrize("cut", [1, 11, 12, 17, 61, "half", "one short"])
def test_active_segment_cut_mid_batch_keeps_whole_batches(tmp_path, scheduler, cut) -> None:
    directory = str(tmp_path / "t-0")
    log, batches = _fill(directory, scheduler)
    path = _active_log_file(log)
    base = log.active_segment.base_offset
    log.close()
    in_segment = list(records.iter_batches(_read(path)))
    victim = in_segment[-1]
    assert victim.size > 62
    keep = {"half": victim.size // 2, "one short": victim.size - 1}.get(cut, cut)
    os.truncate(path, victim.position + keep)
    log = _reopen(directory, scheduler, clean=False, recovery_point=base)
    try:
        assert log.recovered_bytes == keep
        assert log.log_end_offset == victim.base_offset
        assert check_contents(log) == victim.base_offset
        check_segments(log)
        info = log.append(b"".join(child.build_batches(records, random.Random(3), victim.base_offset)))
        assert info.first_offset == victim.base_offset
        assert check_contents(log) == log.log_end_offset
    finally:
        log.close()


def test_middle_segment_cut_mid_batch_ends_the_log_there(tmp_path, scheduler) -> None:
    """Kafka's rule: recovery truncates at the first bad byte and drops every later segment."""
    directory = str(tmp_path / "t-0")
    log, _ = _fill(directory, scheduler)
    assert log.num_segments >= 4
    victim_segment = log.segments[1]
    path = victim_segment.log_path
    log.close()
    in_segment = list(records.iter_batches(_read(path)))
    victim = in_segment[len(in_segment) // 2]
    os.truncate(path, victim.position + victim.size // 2)
    log = _reopen(directory, scheduler, clean=False, recovery_point=0)
    try:
        assert log.log_end_offset == victim.base_offset
        assert log.num_segments == 2
        assert check_contents(log) == victim.base_offset
        check_segments(log)
        info = log.append(b"".join(child.build_batches(records, random.Random(4), victim.base_offset)))
        assert info.first_offset == victim.base_offset
    finally:
        log.close()


def _index_damage(kind: str, path: str, rng: random.Random) -> None:
    size = os.path.getsize(path)
    entry = 12 if path.endswith(TIME_INDEX_SUFFIX) else 8
    if kind == "deleted":
        os.unlink(path)
    elif kind == "empty":
        os.truncate(path, 0)
    elif kind == "wrong size":
        with open(path, "ab") as f:
            f.write(rng.randbytes(entry // 2 + 1))
    elif kind == "random bytes, wrong size":
        with open(path, "wb") as f:
            f.write(rng.randbytes(max(size, entry) + 3))
    elif kind == "random bytes":
        with open(path, "wb") as f:
            f.write(rng.randbytes(max(size, 4 * entry)))
    elif kind == "last entry below base":
        with open(path, "r+b") as f:
            f.seek(size - entry + (8 if entry == 12 else 0))
            f.write((-5 & 0xFFFFFFFF).to_bytes(4, "big"))
    else:
        raise ValueError(kind)


def _check_lookups(log: Log, batches: List[records.BatchHeader]) -> None:
    """Every offset reads from the batch holding it; timestamps find their batch; indexes point at batches."""
    end = log.log_end_offset
    for b in batches:
        for offset in {b.base_offset, b.last_offset, (b.base_offset + b.last_offset) // 2}:
            data = log.read(offset, 1).read()
            first = next(records.iter_batches(data, check_crc=True))
            assert (first.base_offset, first.last_offset) == (b.base_offset, b.last_offset), (
                "offset %d read batch %d..%d" % (offset, first.base_offset, first.last_offset))
        found = log.offset_for_timestamp(1_700_000_000_000 + b.base_offset)
        assert found is not None and found[0] == b.base_offset, (b, found)
    assert log.offset_for_timestamp(1_700_000_000_000 + end) is None
    for segment in log.segments:
        starts = {info.position: info for info in records.iter_batches(_read(segment.log_path))}
        for offset, position in segment.offset_index.all_entries():
            assert position in starts and starts[position].last_offset == offset, (
                "segment %d: index entry (%d, %d) points at no batch ending there" % (
                    segment.base_offset, offset, position))
        for ts, offset in segment.time_index.all_entries():
            assert segment.base_offset <= offset < segment.next_offset and ts >= 1_700_000_000_000 + segment.base_offset


INDEX_DAMAGE = ["deleted", "empty", "wrong size", "random bytes, wrong size", "random bytes", "last entry below base"]


@pytest.mark.parametrize("which", ["first", "active"])
@pytest.mark.parametrize("suffix", [INDEX_SUFFIX, TIME_INDEX_SUFFIX])
@pytest.mark.parametrize("kind", INDEX_DAMAGE)
@pytest.mark.parametrize("clean", [True, False], ids=["clean", "crash"])
def test_damaged_index_is_rebuilt(tmp_path, scheduler, kind, suffix, which, clean) -> None:
    directory = str(tmp_path / "t-0")
    log, batches = _fill(directory, scheduler)
    end = log.log_end_offset
    segment = log.segments[0] if which == "first" else log.active_segment
    before = (segment.offset_index.all_entries(), segment.time_index.all_entries())
    path = os.path.join(directory, filename_prefix(segment.base_offset) + suffix)
    log.close()
    _index_damage(kind, path, random.Random("%s %s %s" % (kind, suffix, which)))
    log = _reopen(directory, scheduler, clean=clean, recovery_point=end)
    try:
        assert log.log_end_offset == end
        assert log.recovered_bytes == 0
        _check_lookups(log, batches)
        rebuilt = next(s for s in log.segments if s.base_offset == segment.base_offset)
        if kind != "empty":  # an empty index is valid for a segment that was never indexed: kept as is
            assert (rebuilt.offset_index.all_entries(), rebuilt.time_index.all_entries()) == before, (
                "the damaged %s of segment %d was not rebuilt" % (suffix, segment.base_offset))
        assert check_contents(log) == end
    finally:
        log.close()


@pytest.mark.parametrize("halfway", ["log only", "log and offset index"])
def test_deletion_cut_short_is_finished_on_open(tmp_path, scheduler, halfway) -> None:
    """Retention renamed segment 0 to .deleted and was renaming segment 1 when the process died."""
    directory = str(tmp_path / "t-0")
    log, batches = _fill(directory, scheduler)
    assert log.num_segments >= 4
    first, second, third = log.segments[:3]
    end = log.log_end_offset
    log.close()
    for suffix in (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX):
        p = os.path.join(directory, filename_prefix(first.base_offset) + suffix)
        os.rename(p, p + DELETED_SUFFIX)
    renamed = (LOG_SUFFIX,) if halfway == "log only" else (LOG_SUFFIX, INDEX_SUFFIX)
    for suffix in renamed:
        p = os.path.join(directory, filename_prefix(second.base_offset) + suffix)
        os.rename(p, p + DELETED_SUFFIX)
    # The log start offset checkpoint was not written yet: it still says 0.
    log = _reopen(directory, scheduler, clean=False, recovery_point=end, log_start_offset=0)
    try:
        assert log.segments[0].base_offset == third.base_offset
        assert log.log_start_offset == third.base_offset
        assert log.log_end_offset == end
        check_segments(log)
        assert check_contents(log, third.base_offset) == end - third.base_offset
        with pytest.raises(OffsetOutOfRangeError):
            log.read(0, 1024)
        _check_lookups(log, [b for b in batches if b.base_offset >= third.base_offset])
    finally:
        log.close()


def test_manager_recovers_without_the_clean_marker(tmp_path, monkeypatch) -> None:
    """A log dir whose clean-shutdown marker is gone is recovered; with the marker, nothing is scanned."""
    root = str(tmp_path)
    with LogManager([root], background=False) as manager:
        log = manager.get_or_create_log("t", 0, CONFIG)
        rng = random.Random(5)
        for _ in range(40):
            log.append(b"".join(child.build_batches(records, rng, log.log_end_offset)))
        end = log.log_end_offset
        path = log.active_segment.log_path
    with open(path, "ab") as f:
        f.write(b"\x00" * 100)
    calls = []
    original = LogSegment.recover
    monkeypatch.setattr(LogSegment, "recover", lambda self, m: calls.append(self.base_offset) or original(self, m))
    os.unlink(os.path.join(root, CLEAN_SHUTDOWN_FILE))
    with LogManager([root], background=False) as manager:
        log = manager.get_log("t", 0)
        assert calls and log.recovered_bytes == 100
        assert check_contents(log) == end


def test_clean_shutdown_skips_recovery(tmp_path, scheduler, monkeypatch) -> None:
    root = str(tmp_path)
    with LogManager([root], background=False) as manager:
        log = manager.get_or_create_log("t", 0, CONFIG)
        rng = random.Random(6)
        for _ in range(40):
            log.append(b"".join(child.build_batches(records, rng, log.log_end_offset)))
        end, segments = log.log_end_offset, log.num_segments
        before = [(s.base_offset, s.offset_index.all_entries()) for s in log.segments]
    assert os.path.exists(os.path.join(root, CLEAN_SHUTDOWN_FILE))

    def no_recovery(self, max_message_bytes):
        raise AssertionError("segment %d was recovered after a clean shutdown" % self.base_offset)

    monkeypatch.setattr(LogSegment, "recover", no_recovery)
    for _ in range(2):
        with LogManager([root], background=False) as manager:
            log = manager.get_log("t", 0)
            assert (log.log_end_offset, log.num_segments, log.recovered_bytes) == (end, segments, 0)
            assert log.recovery_point == end
            assert [(s.base_offset, s.offset_index.all_entries()) for s in log.segments] == before
            assert check_contents(log) == end
    # The standalone constructor's path (clean_shutdown=True) does the same.
    log = _reopen(os.path.join(root, "t-0"), scheduler, clean=True, recovery_point=end)
    try:
        assert log.recovered_bytes == 0 and log.log_end_offset == end
    finally:
        log.close()


# -- faults found on restart (issue 14, point 6) ---------------------------------------------
#
# Each test damages the files of a closed log the way a bad disk, a mistaken copy or an
# operator's edit would, opens them again, and checks that nothing valid was lost, hidden or
# deleted, and that the damage was reported.


def _warnings(caplog) -> List[str]:
    return [r.getMessage() for r in caplog.records if r.levelname == "WARNING" and r.name.startswith("pylogq")]


def _swap_garbage(kind: str, log: Log) -> Tuple[int, bytes]:
    """(base offset, bytes) of a ``.log.swap`` no compaction could have written."""
    segments = log.segments
    second, last = segments[1], segments[-1]
    data = _read(second.log_path)
    if kind == "random":
        return second.base_offset, random.Random(11).randbytes(50_000)
    if kind == "zeros":
        return second.base_offset, bytes(8192)
    if kind == "empty":
        return second.base_offset, b""
    if kind == "a bad CRC":
        batches = list(records.iter_batches(data))
        victim = batches[len(batches) // 2]
        at = victim.position + victim.size - 3
        return second.base_offset, data[:at] + bytes([data[at] ^ 0x01]) + data[at + 1:]
    if kind == "a torn batch":
        return second.base_offset, data[: len(data) - 7]
    if kind == "offsets reaching the active segment":
        return second.base_offset, _read(last.log_path)
    if kind == "a start inside the previous segment":
        return segments[0].base_offset + 1, data
    raise ValueError(kind)


SWAP_GARBAGE = ["random", "zeros", "empty", "a bad CRC", "a torn batch", "offsets reaching the active segment",
                "a start inside the previous segment"]


@pytest.mark.parametrize("clean", [True, False], ids=["clean", "crash"])
@pytest.mark.parametrize("kind", SWAP_GARBAGE)
def test_a_swap_file_that_is_not_compaction_output_is_removed_and_the_live_segments_kept(
        tmp_path, scheduler, caplog, kind, clean) -> None:
    directory = str(tmp_path / "t-0")
    log, batches = _fill(directory, scheduler)
    assert log.num_segments >= 4
    end, bases = log.log_end_offset, [s.base_offset for s in log.segments]
    base, garbage = _swap_garbage(kind, log)
    log.close()
    swap = os.path.join(directory, filename_prefix(base) + LOG_SUFFIX + ".swap")
    with open(swap, "wb") as f:
        f.write(garbage)
    log = _reopen(directory, scheduler, clean=clean, recovery_point=end)
    try:
        assert [s.base_offset for s in log.segments] == bases
        assert (log.log_start_offset, log.log_end_offset) == (0, end)
        assert check_contents(log) == end
        check_segments(log)
        _check_lookups(log, batches)
        assert not os.path.exists(swap)
        assert any("removing %s" % os.path.basename(swap) in w and "live segments are kept" in w
                   for w in _warnings(caplog)), _warnings(caplog)
    finally:
        log.close()


@pytest.mark.parametrize("old_segments", ["still live", "already renamed .deleted"])
def test_a_whole_swap_file_replaces_the_segments_it_covers(tmp_path, scheduler, caplog, old_segments) -> None:
    """A genuine interrupted swap still completes: here, segment 1 recopied whole by compaction."""
    caplog.set_level("INFO", logger="pylogq")
    directory = str(tmp_path / "t-0")
    log, batches = _fill(directory, scheduler)
    end, bases = log.log_end_offset, [s.base_offset for s in log.segments]
    second = log.segments[1]
    log.close()
    prefix = os.path.join(directory, filename_prefix(second.base_offset))
    with open(prefix + LOG_SUFFIX + ".swap", "wb") as f:
        f.write(_read(prefix + LOG_SUFFIX))
    if old_segments == "already renamed .deleted":
        for suffix in (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX):
            os.rename(prefix + suffix, prefix + suffix + DELETED_SUFFIX)
    log = _reopen(directory, scheduler, clean=False, recovery_point=end)
    try:
        assert [s.base_offset for s in log.segments] == bases
        assert check_contents(log) == end
        check_segments(log)
        _check_lookups(log, batches)
        assert any("completed an interrupted compaction swap" in r.getMessage() for r in caplog.records)
    finally:
        log.close()


def _manager(root: str) -> LogManager:
    """A manager of ``root`` without background work whose logs keep their records (no retention by time)."""
    return LogManager(config=LogManagerConfig(log_dirs=[root], log_retention_ms=-1), background=False)


def _manager_log(root: str, appends: int = 80) -> Tuple[int, int]:
    """A log ``t-0`` of several segments written and closed cleanly by a manager; -> (end, segments)."""
    with _manager(root) as manager:
        log = manager.get_or_create_log("t", 0, CONFIG)
        rng = random.Random(8)
        for _ in range(appends):
            log.append(b"".join(child.build_batches(records, rng, log.log_end_offset)))
        return log.log_end_offset, log.num_segments


def _write_checkpoint(root: str, name: str, entries: Dict[Tuple[str, int], int]) -> None:
    from pylogq.storage.checkpoint import OffsetCheckpoint

    OffsetCheckpoint(os.path.join(root, name)).write(entries)


@pytest.mark.parametrize("clean", [True, False], ids=["clean", "crash"])
def test_a_log_start_checkpoint_past_the_log_end_is_reported_and_ignored(tmp_path, caplog, clean) -> None:
    """Kafka would delete every segment; the records must stay readable and retention must keep them."""
    from pylogq.storage.checkpoint import LOG_START_OFFSET_CHECKPOINT

    root = str(tmp_path)
    end, segments = _manager_log(root)
    assert segments >= 4
    _write_checkpoint(root, LOG_START_OFFSET_CHECKPOINT, {("t", 0): end + 1000})
    if not clean:
        os.unlink(os.path.join(root, CLEAN_SHUTDOWN_FILE))
    with _manager(root) as manager:
        log = manager.get_log("t", 0)
        assert (log.log_start_offset, log.log_end_offset, log.num_segments) == (0, end, segments)
        assert check_contents(log) == end
        assert manager.cleanup_logs() == 0
        assert log.num_segments == segments
        assert any("log start offset %d (log-start-offset-checkpoint) is past the log end %d" % (end + 1000, end)
                   in w for w in _warnings(caplog)), _warnings(caplog)
    assert OffsetCheckpoint(os.path.join(root, LOG_START_OFFSET_CHECKPOINT)).read() == {("t", 0): 0}


def test_a_log_start_checkpoint_inside_the_log_is_kept(tmp_path) -> None:
    """DeleteRecords' offsets are trusted: the checkpoint agrees with the files."""
    from pylogq.storage.checkpoint import LOG_START_OFFSET_CHECKPOINT

    root = str(tmp_path)
    end, _ = _manager_log(root)
    _write_checkpoint(root, LOG_START_OFFSET_CHECKPOINT, {("t", 0): end // 2})
    with _manager(root) as manager:
        assert manager.get_log("t", 0).log_start_offset == end // 2


@pytest.mark.parametrize("clean", [True, False], ids=["clean", "crash"])
def test_a_recovery_point_past_the_log_end_is_reported_and_every_segment_checked(
        tmp_path, monkeypatch, caplog, clean) -> None:
    from pylogq.storage.checkpoint import RECOVERY_POINT_CHECKPOINT

    root = str(tmp_path)
    end, segments = _manager_log(root)
    _write_checkpoint(root, RECOVERY_POINT_CHECKPOINT, {("t", 0): end + 5})
    if not clean:
        os.unlink(os.path.join(root, CLEAN_SHUTDOWN_FILE))
    recovered = []
    original = LogSegment.recover
    monkeypatch.setattr(LogSegment, "recover", lambda self, m: recovered.append(self.base_offset) or original(self, m))
    with _manager(root) as manager:
        log = manager.get_log("t", 0)
        assert (log.log_end_offset, log.num_segments, log.recovered_bytes) == (end, segments, 0)
        assert check_contents(log) == end
        assert set(recovered) == {s.base_offset for s in log.segments}
        assert log.recovery_point == (end if clean else 0)
        assert any("recovery point %d (recovery-point-offset-checkpoint) is past the log end %d" % (end + 5, end)
                   in w for w in _warnings(caplog)), _warnings(caplog)


@pytest.mark.parametrize("name", ["recovery-point-offset-checkpoint", "log-start-offset-checkpoint"])
def test_an_unreadable_checkpoint_is_reported_and_ignored(tmp_path, caplog, name) -> None:
    root = str(tmp_path)
    end, segments = _manager_log(root)
    with open(os.path.join(root, name), "wb") as f:
        f.write(b"\x00\xff garbage\n")
    with _manager(root) as manager:
        log = manager.get_log("t", 0)
        assert (log.log_start_offset, log.log_end_offset, log.num_segments) == (0, end, segments)
        assert check_contents(log) == end
        assert any(name in w and "ignored" in w for w in _warnings(caplog)), _warnings(caplog)
    assert OffsetCheckpoint(os.path.join(root, name)).read()[("t", 0)] in (0, end)


def _cut_after_clean_shutdown(path: str, how: str) -> Tuple[int, int]:
    """Damage the last segment's ``.log`` of a cleanly closed log; -> (bytes kept, offset the log ends at)."""
    data = _read(path)
    batches = list(records.iter_batches(data))
    if how == "mid-batch":
        victim = batches[-3]
        os.truncate(path, victim.position + victim.size // 2)
        return victim.position, victim.base_offset
    if how == "last batch corrupted":
        victim = batches[-1]
        at = victim.position + victim.size - 5
        with open(path, "r+b") as f:
            f.seek(at)
            f.write(bytes([data[at] ^ 0x10]))
        return victim.position, victim.base_offset
    if how == "emptied":
        os.truncate(path, 0)
        return 0, -1
    raise ValueError(how)


@pytest.mark.parametrize("how", ["mid-batch", "last batch corrupted", "emptied"])
def test_a_log_cut_after_a_clean_shutdown_is_recovered_and_takes_appends_that_survive(tmp_path, caplog, how) -> None:
    """The end offset comes from the batches, never from a stale index: a new record lands where it is readable."""
    root = str(tmp_path)
    end, _ = _manager_log(root)
    with _manager(root) as manager:
        active = manager.get_log("t", 0).active_segment
        path, base = active.log_path, active.base_offset
    kept, new_end = _cut_after_clean_shutdown(path, how)
    new_end = base if new_end < 0 else new_end
    assert os.path.exists(os.path.join(root, CLEAN_SHUTDOWN_FILE))
    with _manager(root) as manager:
        log = manager.get_log("t", 0)
        assert log.log_end_offset == new_end < end
        assert os.path.getsize(path) == kept
        assert check_contents(log) == new_end
        check_segments(log)
        info = log.append(b"".join(child.build_batches(records, random.Random(9), new_end)))
        assert info.first_offset == new_end
        after = log.log_end_offset
        assert check_contents(log) == after
        assert any("recovering segment %d" % base in w for w in _warnings(caplog)), _warnings(caplog)
    with _manager(root) as manager:  # the acknowledged append survives a clean restart
        log = manager.get_log("t", 0)
        assert log.log_end_offset == after
        assert check_contents(log) == after


def test_stray_files_in_a_partition_directory_are_reported_and_left_alone(tmp_path, scheduler, caplog) -> None:
    directory = str(tmp_path / "t-0")
    log, batches = _fill(directory, scheduler)
    end = log.log_end_offset
    log.close()
    stray = {"foo.log": b"x", "123.log": b"yy", "0000000000000000abcd.log": b"zzz", "foo.index": b"\x00" * 8,
             "00000000000000000007.log.bak": b"copy", "notes.tmp": b"mine", "README": b"hello"}
    for name, body in stray.items():
        with open(os.path.join(directory, name), "wb") as f:
            f.write(body)
    os.mkdir(os.path.join(directory, "00000000000000000009.log"))
    for clean in (True, False):
        caplog.clear()
        log = _reopen(directory, scheduler, clean=clean, recovery_point=end)
        try:
            assert log.log_end_offset == end
            assert check_contents(log) == end
            _check_lookups(log, batches)
        finally:
            log.close()
        for name, body in stray.items():
            assert _read(os.path.join(directory, name)) == body
            assert any(name in w and "left alone" in w for w in _warnings(caplog)), (name, _warnings(caplog))
        assert os.path.isdir(os.path.join(directory, "00000000000000000009.log"))


def test_stray_directories_in_a_log_dir_are_reported_and_left_alone(tmp_path, caplog) -> None:
    root = str(tmp_path)
    end, _ = _manager_log(root)
    for name in ("lost+found", "backup", "t-x", "t-0.bak"):
        os.mkdir(os.path.join(root, name))
        with open(os.path.join(root, name, "00000000000000000000.log"), "wb") as f:
            f.write(b"not mine")
    with _manager(root) as manager:
        assert [(lg.topic, lg.partition) for lg in manager.all_logs()] == [("t", 0)]
        assert check_contents(manager.get_log("t", 0)) == end
    for name in ("lost+found", "backup", "t-x", "t-0.bak"):
        assert _read(os.path.join(root, name, "00000000000000000000.log")) == b"not mine"
        assert any(name in w and "left alone" in w for w in _warnings(caplog)), (name, _warnings(caplog))
