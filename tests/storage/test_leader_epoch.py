"""The leader epoch cache (Kafka's LeaderEpochFileCache) and how the log keeps it, on real files.

The cache alone: ``leader-epoch-checkpoint`` byte for byte as Kafka writes and
reads it, Kafka's answers of ``assign``, ``endOffsetFor`` and the two
truncations (worked cases, then a model of Kafka's rules against random
operations), a file that does not parse rebuilt with one warning, a write that
fails. The log: epochs across appends, follower appends carrying several
epochs, truncation from both ends, retention, and every way a run can end: a
clean close, a process killed at random moments, a segment cut short.
"""

from __future__ import annotations

import logging
import os
import random
import re
import select
import signal
import struct
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pylogq import records
from pylogq.errors import KafkaStorageError, MessageTooLargeError
from pylogq.records.legacy import LegacyRecordBatchBuilder
from pylogq.storage.checkpoint import CLEAN_SHUTDOWN_FILE, LEADER_EPOCH_CHECKPOINT
from pylogq.config import LogConfig
from pylogq.storage.leader_epoch import (
    UNDEFINED_EPOCH,
    UNDEFINED_EPOCH_OFFSET,
    EpochEntry,
    LeaderEpochFileCache,
)
from pylogq.storage.log import Log
from pylogq.storage.manager import LogManager

from .._filesystem import fill, small_tmpfs
from . import _epoch_child as child

TS = 1_700_000_000_000
UNDEFINED = (UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET)
CHILD = os.path.abspath(child.__file__)
REPO = os.path.dirname(os.path.dirname(os.path.dirname(CHILD)))
KILL_CYCLES = 16
LINE_TIMEOUT = 20.0  # seconds a live child may take to print its next line


# -- helpers --------------------------------------------------------------------------


def kafka_read(data: bytes) -> List[Tuple[int, int]]:
    """Kafka's CheckpointFile reader with LeaderEpochCheckpointFile's formatter, from their rules:
    a version line that must be 0, a count line, then exactly that many lines split on
    whitespace into an int32 epoch and an int64 start offset."""
    lines = data.decode("utf-8").split("\n")
    assert lines[-1] == "", "Kafka's writer ends every line with a newline"
    lines.pop()
    assert int(lines[0]) == 0, "version %r" % lines[0]
    count = int(lines[1])
    assert len(lines) == count + 2, "count %d, %d entry lines" % (count, len(lines) - 2)
    out = []
    for line in lines[2:]:
        fields = re.split(r"\s+", line)
        assert len(fields) == 2, line
        epoch, start = int(fields[0]), int(fields[1])
        assert -(2**31) <= epoch < 2**31 and -(2**63) <= start < 2**63
        out.append((epoch, start))
    return out


def kafka_bytes(entries: Sequence[Tuple[int, int]]) -> bytes:
    """What Kafka's CheckpointFile.write puts in the file (BufferedWriter.newLine is \\n on Linux)."""
    lines = ["0", str(len(entries))] + ["%d %d" % e for e in entries]
    return "".join(line + "\n" for line in lines).encode()


def read_file(path: str) -> bytes:
    with open(path, "rb") as f:
        return f.read()


def identity(path: str) -> Tuple[int, int]:
    """(inode, mtime) of a file: every write of a checkpoint renames a new file over it."""
    st = os.stat(path)
    return st.st_ino, st.st_mtime_ns


def batch(n: int = 5, epoch: int = 0, base_offset: int = 0, ts: int = TS) -> bytes:
    values = [b"value-%d" % i for i in range(n)]
    return bytes(records.build_batch(values, keys=[b"k%d" % i for i in range(n)], timestamps=ts,
                                     base_offset=base_offset, partition_leader_epoch=epoch))


def legacy_set(n: int = 2, first_offset: int = 0, magic: int = 1) -> bytes:
    builder = LegacyRecordBatchBuilder(magic)
    for i in range(n):
        builder.append(first_offset + i, TS + i, b"k%d" % i, b"old-%d" % i)
    return bytes(builder.build())


def file_epochs(directory: str) -> List[Tuple[int, int]]:
    """(partition leader epoch, base offset) of every v2 batch in the directory's segment files,
    read with nothing but the record walker and ``struct``."""
    out = []
    for name in sorted(n for n in os.listdir(directory) if n.endswith(".log")):
        data = read_file(os.path.join(directory, name))
        for header in records.iter_batches(data):
            if header.magic >= 2:
                out.append((struct.unpack_from(">i", data, header.position + 12)[0], header.base_offset))
    return out


def first_of_each_epoch(pairs: Sequence[Tuple[int, int]], start: int = 0) -> List[Tuple[int, int]]:
    """The entries a log's batches call for: each epoch at its first batch, trimmed to ``start``."""
    out: List[Tuple[int, int]] = []
    for epoch, base in pairs:
        if epoch >= 0 and (not out or epoch > out[-1][0]):
            out.append((epoch, base))
    below = [e for e in out if e[1] <= start]
    if below:
        out = [(below[-1][0], start)] + [e for e in out if e[1] > start]
    return out


def warnings_of(caplog: pytest.LogCaptureFixture) -> List[str]:
    return [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING and r.name.startswith("pylogq")]


def new_cache(directory: Path, entries: Sequence[Tuple[int, int]] = ()) -> LeaderEpochFileCache:
    cache = LeaderEpochFileCache(directory / LEADER_EPOCH_CHECKPOINT)
    for epoch, start in entries:
        cache.assign(epoch, start)
    return cache


@pytest.fixture
def checkpoint_write_fails():
    """Make writes of a directory's ``leader-epoch-checkpoint`` fail for real: a directory named
    like its temporary file (``open`` of it for writing raises IsADirectoryError, even for root);
    -> (break, mend) callables taking the directory."""
    made: List[str] = []

    def break_(directory: str) -> None:
        path = os.path.join(directory, LEADER_EPOCH_CHECKPOINT + ".tmp")
        os.mkdir(path)
        made.append(path)

    def mend(directory: str) -> None:
        path = os.path.join(directory, LEADER_EPOCH_CHECKPOINT + ".tmp")
        os.rmdir(path)
        made.remove(path)

    yield break_, mend
    for path in made:
        os.rmdir(path)


# -- the file ------------------------------------------------------------------------


def test_the_file_is_kafkas_byte_for_byte(tmp_path):
    cache = new_cache(tmp_path, [(0, 0), (2, 100), (5, 4096)])
    data = read_file(cache.path)
    assert data == b"0\n3\n0 0\n2 100\n5 4096\n"
    assert data == kafka_bytes([(0, 0), (2, 100), (5, 4096)])
    assert kafka_read(data) == [(0, 0), (2, 100), (5, 4096)]
    assert os.path.basename(cache.path) == "leader-epoch-checkpoint"
    cache.clear()
    assert read_file(cache.path) == b"0\n0\n"
    assert not [n for n in os.listdir(tmp_path) if n.endswith(".tmp")]


def test_a_file_written_by_kafka_is_read(tmp_path):
    # Kafka's reader splits entry lines on any run of whitespace, as its own doc comment writes them.
    (tmp_path / LEADER_EPOCH_CHECKPOINT).write_bytes(b"0\n3\n0  1\n1\t2\n7 1099511627776\n")
    cache = LeaderEpochFileCache(tmp_path / LEADER_EPOCH_CHECKPOINT)
    assert cache.entries == (EpochEntry(0, 1), EpochEntry(1, 2), EpochEntry(7, 2**40))
    assert (cache.latest_epoch, cache.earliest_entry, cache.latest_entry) == (7, (0, 1), (7, 2**40))


def test_loading_does_not_rewrite_the_file(tmp_path):
    cache = new_cache(tmp_path, [(1, 0), (4, 10)])
    before = (read_file(cache.path), identity(cache.path))
    again = LeaderEpochFileCache(cache.path)
    assert again.entries == cache.entries
    assert (read_file(cache.path), identity(cache.path)) == before


def test_a_missing_file_is_an_empty_cache_and_is_not_created(tmp_path):
    cache = LeaderEpochFileCache(tmp_path / LEADER_EPOCH_CHECKPOINT, lambda: [(3, 0)])
    assert (cache.entries, cache.latest_epoch, cache.latest_entry, cache.earliest_entry, len(cache)) == (
        (), None, None, None, 0)
    assert cache.end_offset_for(0, 10) == UNDEFINED
    assert not os.path.exists(cache.path)
    assert not cache.truncate_from_end(5) and not cache.truncate_from_start(5) and not cache.clear()
    assert not os.path.exists(cache.path)


CORRUPT = {
    "garbage": b"\x00\x01garbage",
    "not utf-8": b"0\n1\n\xff 0\n",
    "another version": b"1\n1\n0 0\n",
    "fewer entries than counted": b"0\n3\n0 0\n2 10\n",
    "more entries than counted": b"0\n1\n0 0\n2 10\n",
    "a field missing": b"0\n2\n0 0\n2\n",
    "a word for an offset": b"0\n1\n0 zero\n",
    "epochs going back": b"0\n2\n3 0\n2 10\n",
    "an epoch twice": b"0\n2\n3 0\n3 10\n",
    "offsets going back": b"0\n2\n0 10\n2 5\n",
    "an offset twice": b"0\n2\n0 10\n2 10\n",
    "a negative offset": b"0\n1\n0 -1\n",
    "a negative epoch": b"0\n1\n-1 0\n",
    "an epoch past int32": b"0\n1\n2147483648 0\n",
    "empty": b"",
}


@pytest.mark.parametrize("kind", sorted(CORRUPT))
def test_a_file_that_does_not_parse_is_rebuilt_from_the_batches_with_one_warning(tmp_path, caplog, kind):
    path = tmp_path / LEADER_EPOCH_CHECKPOINT
    path.write_bytes(CORRUPT[kind])
    batches = [(0, 0), (0, 5), (-1, 9), (2, 12), (1, 20), (2, 30), (6, 40)]
    with caplog.at_level(logging.WARNING, logger="pylogq.storage"):
        cache = LeaderEpochFileCache(path, lambda: batches)
    assert cache.entries == ((0, 0), (2, 12), (6, 40))
    assert read_file(str(path)) == kafka_bytes([(0, 0), (2, 12), (6, 40)])
    warned = warnings_of(caplog)
    assert len(warned) == 1, warned
    assert str(path) in warned[0] and "rebuilt" in warned[0]


def test_a_file_that_does_not_parse_and_no_batches_gives_an_empty_cache(tmp_path, caplog):
    path = tmp_path / LEADER_EPOCH_CHECKPOINT
    path.write_bytes(b"nonsense\n")
    with caplog.at_level(logging.WARNING, logger="pylogq.storage"):
        cache = LeaderEpochFileCache(path)
    assert cache.entries == ()
    assert read_file(str(path)) == b"0\n0\n"
    assert len(warnings_of(caplog)) == 1


# -- assign ---------------------------------------------------------------------------


def test_a_new_epoch_is_added_and_the_latest_one_is_not_moved_later(tmp_path):
    cache = new_cache(tmp_path)
    assert cache.assign(2, 10)
    written = identity(cache.path)
    assert not cache.assign(2, 11) and not cache.assign(2, 10)  # the epoch already started at 10
    assert identity(cache.path) == written  # no write for an assignment that changes nothing
    assert cache.entries == ((2, 10),)
    assert cache.assign(4, 15)
    assert cache.entries == ((2, 10), (4, 15)) and cache.latest_epoch == 4


def test_the_latest_epoch_starting_earlier_replaces_its_entry(tmp_path):
    cache = new_cache(tmp_path, [(5, 11), (6, 12), (7, 13)])
    assert cache.assign(7, 12)  # epoch 6's entry at 12 conflicts with it and goes
    assert cache.entries == ((5, 11), (7, 12))
    assert cache.end_offset_for(5, 0) == (5, 12) and cache.end_offset_for(6, 0) == (5, 12)


def test_a_new_epoch_at_the_same_start_replaces_the_entry_without_a_warning(tmp_path, caplog):
    cache = new_cache(tmp_path, [(1, 0), (2, 9)])
    with caplog.at_level(logging.WARNING, logger="pylogq.storage"):
        assert cache.assign(3, 9)  # epoch 2 wrote nothing
    assert cache.entries == ((1, 0), (3, 9))
    assert warnings_of(caplog) == []


def test_conflicting_entries_go_with_a_warning(tmp_path, caplog):
    cache = new_cache(tmp_path, [(1, 0), (2, 6)])
    with caplog.at_level(logging.WARNING, logger="pylogq.storage"):
        assert cache.assign(3, 5)  # starts before epoch 2 did: epoch 2's entry cannot stand
    assert cache.entries == ((1, 0), (3, 5))
    warned = warnings_of(caplog)
    assert len(warned) == 1 and "2 6" in warned[0] and cache.path in warned[0]


def test_an_older_epoch_later_in_the_log_removes_the_newer_ones(tmp_path):
    # Kafka's choice when epochs go back: truncate the history to the point of conflict.
    cache = new_cache(tmp_path, [(1, 5), (2, 6)])
    assert cache.assign(1, 7)
    assert cache.entries == ((1, 7),)
    assert cache.latest_epoch == 1
    assert cache.end_offset_for(1, 8) == (1, 8)
    assert cache.end_offset_for(2, 8) == UNDEFINED


@pytest.mark.parametrize("epoch, start", [(-1, 0), (0, -1), (2**31, 0), (0, 2**63), (True, 0), (0, 1.5), ("1", 0)])
def test_bad_epochs_and_offsets_are_refused(tmp_path, epoch, start):
    cache = new_cache(tmp_path, [(0, 0)])
    with pytest.raises(ValueError, match="leader epoch"):
        cache.assign(epoch, start)
    with pytest.raises(ValueError, match="leader epoch"):
        cache.assign_all([(1, 1), (epoch, start)])
    assert cache.entries == ((0, 0),)


def test_assign_all_writes_once_and_can_start_from_nothing(tmp_path):
    cache = new_cache(tmp_path, [(0, 0), (1, 10)])
    assert not cache.assign_all([(1, 12), (1, 15)])
    assert cache.assign_all([(1, 15), (3, 20), (3, 25), (4, 30)])
    assert cache.entries == ((0, 0), (1, 10), (3, 20), (4, 30))
    assert cache.assign_all([(5, 40)], clear=True)
    assert cache.entries == ((5, 40),)
    assert kafka_read(read_file(cache.path)) == [(5, 40)]
    assert cache.assign_all([], clear=True) and cache.entries == ()
    assert not cache.assign_all([], clear=True)


# -- endOffsetFor -----------------------------------------------------------------------

END_OFFSET_CASES = [
    # (entries, log end offset, requested epoch, answer)
    ([], 0, 7, UNDEFINED),  # nothing known
    ([], 73, UNDEFINED_EPOCH, UNDEFINED),
    ([(2, 10)], 20, UNDEFINED_EPOCH, UNDEFINED),  # a follower that knows no epoch
    ([(2, 10)], 20, 2, (2, 20)),  # the latest epoch ends at the log end
    ([(2, 10)], 10, 2, (2, 10)),  # ... even with nothing written in it yet
    ([(2, 10)], 20, 3, UNDEFINED),  # above every known epoch
    ([(2, 100)], 100, 3, UNDEFINED),
    ([(2, 10)], 20, 1, (1, 10)),  # below the first: the first known start
    ([(5, 11), (6, 12), (7, 13)], 20, 4, (4, 11)),
    ([(0, 10), (2, 13), (4, 17)], 25, 0, (0, 13)),  # an earlier epoch ends where the next starts
    ([(0, 10), (2, 13), (4, 17)], 25, 1, (0, 13)),  # between two: the one below, and the next start
    ([(0, 10), (2, 13), (4, 17)], 25, 2, (2, 17)),
    ([(0, 10), (2, 13), (4, 17)], 25, 3, (2, 17)),
    ([(0, 10), (2, 13), (4, 17)], 25, 4, (4, 25)),
    ([(0, 10), (2, 13), (4, 17)], 25, 5, UNDEFINED),
    ([(0, 10), (2, 13), (4, 17)], 25, 2**31 - 1, UNDEFINED),
    ([(1, 11), (2, 13), (3, 15)], 17, 2, (2, 15)),
    ([(0, 0), (1, 0)], 0, 0, (0, 0)),  # epoch 1 replaced epoch 0 at the same start: 0 is below the first
    ([(0, 0), (1, 5), (2, 10)], 10, 0, (0, 5)),
    ([(0, 0), (1, 5), (2, 10)], 10, 1, (1, 10)),
    ([(0, 0), (1, 5), (2, 10)], 10, 2, (2, 10)),
]


@pytest.mark.parametrize("entries, end, requested, answer", END_OFFSET_CASES)
def test_end_offset_for_answers_as_kafka_does(tmp_path, entries, end, requested, answer):
    cache = new_cache(tmp_path, entries)
    assert cache.end_offset_for(requested, end) == answer


def test_end_offsets_as_leaders_change_many_times(tmp_path):
    cache = new_cache(tmp_path)
    cache.assign(0, 0)
    cache.assign(1, 0)  # epoch 0 wrote nothing
    assert cache.entries == ((1, 0),)
    assert cache.end_offset_for(1, 0) == (1, 0) and cache.end_offset_for(0, 0) == (0, 0)
    assert cache.end_offset_for(1, 5) == (1, 5)
    cache.assign(2, 5)
    assert cache.end_offset_for(2, 10) == (2, 10)
    assert cache.end_offset_for(1, 10) == (1, 5)
    assert cache.end_offset_for(0, 10) == (0, 0)


def test_epoch_for_offset(tmp_path):
    cache = new_cache(tmp_path, [(2, 6), (3, 8), (4, 11)])
    answers = {0: None, 5: None, 6: 2, 7: 2, 8: 3, 10: 3, 11: 4, 10**12: 4}
    assert {offset: cache.epoch_for_offset(offset) for offset in answers} == answers
    cache.clear()
    assert cache.epoch_for_offset(3) is None


# -- truncation -------------------------------------------------------------------------

ENTRIES = [(2, 6), (3, 8), (4, 11)]


@pytest.mark.parametrize("end, after", [
    (8, [(2, 6)]),  # on an epoch's start: that epoch goes
    (9, [(2, 6), (3, 8)]),  # inside an epoch: it stays
    (11, [(2, 6), (3, 8)]),
    (12, ENTRIES),  # past every start: nothing to do
    (6, []),
    (0, []),
    (UNDEFINED_EPOCH_OFFSET, ENTRIES),  # no offset: nothing
])
def test_truncate_from_end(tmp_path, end, after):
    cache = new_cache(tmp_path, ENTRIES)
    assert cache.truncate_from_end(end) == (after != ENTRIES)
    assert cache.entries == tuple(after)
    assert kafka_read(read_file(cache.path)) == after


@pytest.mark.parametrize("start, after", [
    (1, ENTRIES),  # before the first entry: nothing
    (6, ENTRIES),  # at the first entry: nothing
    (7, [(2, 7), (3, 8), (4, 11)]),  # inside the first epoch: its start moves up
    (8, [(3, 8), (4, 11)]),  # at the second: the first goes
    (9, [(3, 9), (4, 11)]),
    (11, [(4, 11)]),
    (15, [(4, 15)]),  # past every start: the latest epoch stays, from there
    (UNDEFINED_EPOCH_OFFSET, ENTRIES),
])
def test_truncate_from_start(tmp_path, start, after):
    cache = new_cache(tmp_path, ENTRIES)
    written = identity(cache.path)
    assert cache.truncate_from_start(start) == (after != ENTRIES)
    assert cache.entries == tuple(after)
    assert kafka_read(read_file(cache.path)) == after
    if after == ENTRIES:
        assert identity(cache.path) == written


def test_clear(tmp_path):
    cache = new_cache(tmp_path, ENTRIES)
    assert cache.clear()
    assert cache.entries == () and cache.latest_epoch is None
    assert LeaderEpochFileCache(cache.path).entries == ()


# -- the model ----------------------------------------------------------------------------


class KafkaModel:
    """Kafka's LeaderEpochFileCache rules written out naively over a dict, as the model."""

    def __init__(self) -> None:
        self.epochs: Dict[int, int] = {}

    def entries(self) -> List[Tuple[int, int]]:
        return sorted(self.epochs.items())

    def assign(self, epoch: int, start: int) -> None:
        entries = self.entries()
        if entries and entries[-1][0] == epoch and start >= entries[-1][1]:
            return
        self.epochs = {e: s for e, s in entries if e < epoch and s < start}
        self.epochs[epoch] = start

    def clear(self) -> None:
        self.epochs = {}

    def truncate_from_end(self, end: int) -> None:
        if end >= 0:
            self.epochs = {e: s for e, s in self.epochs.items() if s < end}

    def truncate_from_start(self, start: int) -> None:
        covered = [e for e, s in self.entries() if s <= start]
        if covered:
            self.epochs = {e: s for e, s in self.epochs.items() if s > start}
            self.epochs[covered[-1]] = start

    def end_offset_for(self, requested: int, end: int) -> Tuple[int, int]:
        if requested == UNDEFINED_EPOCH:
            return UNDEFINED
        entries = self.entries()
        if entries and entries[-1][0] == requested:
            return requested, end
        higher = [(e, s) for e, s in entries if e > requested]
        if not higher:
            return UNDEFINED
        floor = [(e, s) for e, s in entries if e <= requested]
        return (floor[-1][0] if floor else requested), higher[0][1]

    def epoch_for_offset(self, offset: int) -> Optional[int]:
        found = None
        for e, s in self.entries():
            if s <= offset:
                found = e
        return found


EPOCHS = st.integers(0, 12)
OFFSETS = st.integers(0, 200)
OPERATIONS = st.lists(st.one_of(
    st.tuples(st.just("assign"), EPOCHS, OFFSETS),
    st.tuples(st.just("assign_all"), st.lists(st.tuples(EPOCHS, OFFSETS), max_size=4), st.booleans()),
    st.tuples(st.just("truncate_from_end"), st.integers(-1, 200)),
    st.tuples(st.just("truncate_from_start"), st.integers(-1, 200)),
    st.tuples(st.just("clear")),
), max_size=25)


@settings(max_examples=60, deadline=None)
@given(OPERATIONS)
def test_the_cache_follows_kafkas_rules_and_the_file_follows_the_cache(operations):
    with tempfile.TemporaryDirectory() as directory:
        path = os.path.join(directory, LEADER_EPOCH_CHECKPOINT)
        cache = LeaderEpochFileCache(path)
        model = KafkaModel()
        for op, *args in operations:
            if op == "assign_all":
                pairs, clear = args
                if clear:
                    model.epochs = {}
                for epoch, start in pairs:
                    model.assign(epoch, start)
                cache.assign_all(pairs, clear=clear)
            else:
                getattr(model, op)(*args)
                getattr(cache, op)(*args)
            entries = model.entries()
            assert list(cache.entries) == entries
            assert cache.latest_epoch == (entries[-1][0] if entries else None)
            assert all(a[0] < b[0] and a[1] < b[1] for a, b in zip(entries, entries[1:]))
            for requested in (-1, 0, 3, 6, 9, 12, 13):
                assert cache.end_offset_for(requested, 250) == model.end_offset_for(requested, 250)
            for offset in (0, 7, 50, 199, 250):
                assert cache.epoch_for_offset(offset) == model.epoch_for_offset(offset)
            if os.path.exists(path):
                assert kafka_read(read_file(path)) == entries
        assert list(LeaderEpochFileCache(path).entries) == model.entries()


def test_readers_see_whole_snapshots_while_a_writer_changes_the_cache(tmp_path):
    cache = new_cache(tmp_path, [(0, 0)])
    done = threading.Event()
    problems: List[str] = []

    def read() -> None:
        while not done.is_set():
            entries = cache.entries
            if any(a.epoch >= b.epoch or a.start_offset >= b.start_offset for a, b in zip(entries, entries[1:])):
                problems.append("not increasing: %s" % (entries,))
            latest = cache.latest_entry
            if latest is not None and cache.end_offset_for(latest.epoch, 10**9)[0] not in (latest.epoch, -1):
                problems.append("end offset of %s" % (latest,))

    readers = [threading.Thread(target=read)]
    for r in readers:
        r.start()
    try:
        for epoch in range(1, 30):
            cache.assign(epoch, epoch * 10)
            if epoch % 7 == 0:
                cache.truncate_from_end(epoch * 10 - 5)
            if epoch % 11 == 0:
                cache.truncate_from_start(epoch * 5)
    finally:
        done.set()
        for r in readers:
            r.join()
    assert problems == []


# -- a write that fails -----------------------------------------------------------------


def test_a_failed_write_leaves_the_cache_dirty_and_the_next_call_writes_it(tmp_path, checkpoint_write_fails):
    break_, mend = checkpoint_write_fails
    cache = new_cache(tmp_path, [(0, 0), (1, 10)])
    break_(str(tmp_path))
    with pytest.raises(OSError):
        cache.truncate_from_end(10)
    assert cache.entries == ((0, 0),) and cache.dirty  # right in memory, behind on disk
    assert kafka_read(read_file(cache.path)) == [(0, 0), (1, 10)]
    with pytest.raises(OSError):
        cache.assign(0, 20)  # changes nothing, but must write the file
    mend(str(tmp_path))
    assert not cache.assign(0, 20)
    assert not cache.dirty
    assert kafka_read(read_file(cache.path)) == [(0, 0)]
    assert not cache.flush()


# -- the log -----------------------------------------------------------------------------


def open_log(directory: str, **kwargs) -> Log:
    config = kwargs.pop("config", LogConfig(index_interval_bytes=0))
    return Log(directory, config, **kwargs)


def checkpoint_of(lg: Log) -> List[Tuple[int, int]]:
    return kafka_read(read_file(os.path.join(lg.directory, LEADER_EPOCH_CHECKPOINT)))


def test_appends_record_where_each_epoch_starts(tmp_path):
    directory = str(tmp_path / "t-0")
    with open_log(directory) as lg:
        lg.append(batch(3), 0)
        lg.append(batch(2), 0)
        written = identity(os.path.join(directory, LEADER_EPOCH_CHECKPOINT))
        for _ in range(20):
            lg.append(batch(1), 0)  # the same epoch: no write
        assert identity(os.path.join(directory, LEADER_EPOCH_CHECKPOINT)) == written
        lg.append(batch(4), 1)  # 25..28
        lg.append(batch(1), 3)  # 29
        lg.append(batch(2), 3)
        assert lg.leader_epoch_cache.entries == ((0, 0), (1, 25), (3, 29))
        assert checkpoint_of(lg) == [(0, 0), (1, 25), (3, 29)]
        assert lg.latest_epoch == 3
        assert [lg.end_offset_for_epoch(e) for e in (-1, 0, 1, 2, 3, 4)] == [
            UNDEFINED, (0, 25), (1, 29), (1, 29), (3, 32), UNDEFINED]
        # Every batch carries the epoch its entry says.
        assert file_epochs(directory) == [(0, 0), (0, 3)] + [(0, o) for o in range(5, 25)] + [
            (1, 25), (3, 29), (3, 30)]
    with open_log(directory) as lg:  # a clean restart: the same entries from the same bytes
        assert lg.leader_epoch_cache.entries == ((0, 0), (1, 25), (3, 29))
        assert lg.end_offset_for_epoch(1) == (1, 29)


def test_an_append_without_an_epoch_records_none(tmp_path):
    with open_log(str(tmp_path / "t-0")) as lg:
        lg.append(batch(3), -1)
        assert lg.latest_epoch is None and lg.end_offset_for_epoch(0) == UNDEFINED
        assert not os.path.exists(os.path.join(lg.directory, LEADER_EPOCH_CHECKPOINT))
        lg.append(batch(3), 2)
        assert lg.leader_epoch_cache.entries == ((2, 3),)


def test_a_refused_or_duplicate_append_records_nothing(tmp_path):
    with open_log(str(tmp_path / "t-0"), config=LogConfig(max_message_bytes=200)) as lg:
        lg.append(batch(1), 0)
        with pytest.raises(MessageTooLargeError):
            lg.append(bytes(records.build_batch([b"x" * 500], timestamps=TS)), 4)
        lg.append(batch(1), 4, check_producers=lambda headers, buffer: (0, 0, TS))  # a retry: not written
        assert lg.leader_epoch_cache.entries == ((0, 0),)


def test_a_legacy_append_records_the_leaders_epoch(tmp_path):
    # The messages carry no epoch; the leader knows the one it writes them in.
    with open_log(str(tmp_path / "t-0")) as lg:
        lg.append(batch(2), 0)
        lg.append(legacy_set(3), 1)
        lg.append(batch(1), 1)
        assert lg.leader_epoch_cache.entries == ((0, 0), (1, 2))


def test_a_follower_records_each_batchs_epoch_as_the_leader_did(tmp_path):
    leader = open_log(str(tmp_path / "leader" / "t-0"))
    follower = open_log(str(tmp_path / "follower" / "t-0"))
    try:
        for epoch, n in ((0, 3), (0, 2), (2, 4), (5, 1), (5, 1), (6, 2)):
            leader.append(batch(n), epoch)
        fetched = leader.read(0, 1 << 20).read()  # one fetch: several epochs
        follower.append_as_follower(fetched)
        assert follower.leader_epoch_cache.entries == leader.leader_epoch_cache.entries == (
            (0, 0), (2, 5), (5, 9), (6, 11))
        assert checkpoint_of(follower) == checkpoint_of(leader)
        written = identity(os.path.join(follower.directory, LEADER_EPOCH_CHECKPOINT))
        leader.append(batch(2), 6)
        follower.append_as_follower(leader.read(13, 1 << 20).read())  # the same epoch: no write
        assert identity(os.path.join(follower.directory, LEADER_EPOCH_CHECKPOINT)) == written
        assert follower.end_offset_for_epoch(5) == leader.end_offset_for_epoch(5) == (5, 11)
    finally:
        leader.close()
        follower.close()


def test_a_follower_batch_without_an_epoch_adds_nothing(tmp_path):
    with open_log(str(tmp_path / "t-0")) as lg:
        lg.append_as_follower(batch(2, epoch=-1))
        assert lg.latest_epoch is None
        lg.append_as_follower(batch(2, epoch=3, base_offset=2) + batch(2, epoch=-1, base_offset=4))
        assert lg.leader_epoch_cache.entries == ((3, 2),)


def test_a_follower_gap_starts_the_epoch_at_the_batch(tmp_path):
    with open_log(str(tmp_path / "t-0")) as lg:
        lg.append_as_follower(batch(2, epoch=1))
        lg.append_as_follower(batch(2, epoch=4, base_offset=100))
        assert lg.leader_epoch_cache.entries == ((1, 0), (4, 100))
        assert lg.end_offset_for_epoch(1) == (1, 100)


def test_a_legacy_batch_from_a_leader_clears_a_followers_cache(tmp_path, caplog):
    # Kafka's appendAsFollower: a message format going back means epochs cannot be trusted.
    with open_log(str(tmp_path / "t-0")) as lg:
        lg.append_as_follower(batch(2, epoch=1))
        with caplog.at_level(logging.WARNING, logger="pylogq.storage"):
            lg.append_as_follower(batch(1, epoch=2, base_offset=2) + legacy_set(2, first_offset=3)
                                  + batch(1, epoch=2, base_offset=5) + batch(1, epoch=3, base_offset=6))
        assert lg.leader_epoch_cache.entries == ((2, 5), (3, 6))
        assert checkpoint_of(lg) == [(2, 5), (3, 6)]
        assert len(warnings_of(caplog)) == 1 and "clearing" in warnings_of(caplog)[0]
        lg.append_as_follower(legacy_set(1, first_offset=7, magic=0))
        assert lg.leader_epoch_cache.entries == () and checkpoint_of(lg) == []


def test_truncation_from_the_end(tmp_path):
    with open_log(str(tmp_path / "t-0")) as lg:
        for epoch in (0, 0, 1, 1, 3, 3):
            lg.append(batch(5), epoch)  # epoch 0 at 0, 1 at 10, 3 at 20; the end at 30
        assert lg.truncate_to(22)  # inside epoch 3's first batch: the batch goes, and with it the epoch
        assert lg.log_end_offset == 20
        assert lg.leader_epoch_cache.entries == ((0, 0), (1, 10))
        assert lg.end_offset_for_epoch(1) == (1, 20) and lg.end_offset_for_epoch(3) == UNDEFINED
        assert lg.truncate_to(15)
        assert lg.leader_epoch_cache.entries == ((0, 0), (1, 10))
        assert lg.truncate_to(10)  # on epoch 1's start
        assert lg.leader_epoch_cache.entries == ((0, 0),) and checkpoint_of(lg) == [(0, 0)]
        lg.append(batch(5), 4)  # a new leader's epoch from the new end
        assert lg.leader_epoch_cache.entries == ((0, 0), (4, 10))
        assert file_epochs(lg.directory) == [(0, 0), (0, 5), (4, 10)]


def test_truncating_at_the_end_removes_an_epoch_that_wrote_nothing(tmp_path):
    # Kafka: a replica that became leader, gave its epoch the log end and lost the leadership
    # before writing anything must not keep that epoch when it follows.
    with open_log(str(tmp_path / "t-0")) as lg:
        lg.append(batch(5), 0)
        lg.assign_epoch_start_offset(7, lg.log_end_offset)
        assert lg.leader_epoch_cache.entries == ((0, 0), (7, 5)) and lg.end_offset_for_epoch(7) == (7, 5)
        assert not lg.truncate_to(5)
        assert lg.leader_epoch_cache.entries == ((0, 0),)
        with pytest.raises(ValueError, match="past the log end offset 5"):
            lg.assign_epoch_start_offset(8, 6)


def test_truncating_fully_clears_the_cache(tmp_path):
    with open_log(str(tmp_path / "t-0")) as lg:
        lg.append(batch(5), 0)
        lg.append(batch(5), 2)
        lg.truncate_fully_and_start_at(100)
        assert lg.leader_epoch_cache.entries == () and checkpoint_of(lg) == []
        lg.append(batch(2), 3)
        assert lg.leader_epoch_cache.entries == ((3, 100),)
        assert lg.truncate_to(50)  # below the log start: truncated fully again
        assert lg.leader_epoch_cache.entries == () and lg.log_end_offset == 50


def test_deleting_records_moves_the_first_epochs_start(tmp_path):
    with open_log(str(tmp_path / "t-0")) as lg:
        for epoch in (0, 0, 1, 2):
            lg.append(batch(5), epoch)  # 0 at 0, 1 at 10, 2 at 15
        lg.delete_records_before(7)
        assert lg.leader_epoch_cache.entries == ((0, 7), (1, 10), (2, 15))
        lg.delete_records_before(12)
        assert lg.leader_epoch_cache.entries == ((1, 12), (2, 15))
        assert checkpoint_of(lg) == [(1, 12), (2, 15)]
        assert lg.end_offset_for_epoch(0) == (0, 12)  # below the first known epoch


def test_retention_trims_the_epochs_below_the_new_log_start(tmp_path):
    config = LogConfig(segment_bytes=300, retention_bytes=500, file_delete_delay_ms=0, index_interval_bytes=0)
    with open_log(str(tmp_path / "t-0"), config=config) as lg:
        for i in range(20):
            lg.append(batch(2), i // 4)  # a new epoch every 8 offsets
        assert lg.delete_old_segments() > 0
        start = lg.log_start_offset
        assert start > 0
        expected = first_of_each_epoch([(i // 4, 2 * i) for i in range(20)], start)
        assert [tuple(e) for e in lg.leader_epoch_cache.entries] == expected
        assert checkpoint_of(lg) == expected
        assert lg.leader_epoch_cache.earliest_entry.start_offset == start


def test_loading_trims_to_the_checkpointed_log_start(tmp_path):
    directory = str(tmp_path / "t-0")
    with open_log(directory) as lg:
        for epoch in (0, 1, 2):
            lg.append(batch(5), epoch)
    with open_log(directory, log_start_offset=7, clean_shutdown=True) as lg:
        assert lg.leader_epoch_cache.entries == ((1, 7), (2, 10))
        assert checkpoint_of(lg) == [(1, 7), (2, 10)]


def test_the_file_survives_restarts_byte_for_byte(tmp_path):
    root = tmp_path / "data"
    manager = LogManager([str(root)], background=False)
    lg = manager.get_or_create_log("events", 0)
    for epoch in (0, 0, 3, 9):
        lg.append(batch(4), epoch)
    path = os.path.join(lg.directory, LEADER_EPOCH_CHECKPOINT)
    manager.close()
    before = read_file(path)
    assert before == b"0\n3\n0 0\n3 8\n9 12\n"
    for _ in range(3):
        manager = LogManager([str(root)], background=False)
        try:
            lg = manager.get_log("events", 0)
            assert lg.leader_epoch_cache.entries == ((0, 0), (3, 8), (9, 12))
        finally:
            manager.close()
        assert read_file(path) == before
        assert os.path.exists(root / CLEAN_SHUTDOWN_FILE)


def test_a_log_written_before_epochs_were_kept_starts_with_none(tmp_path, caplog):
    directory = str(tmp_path / "t-0")
    with open_log(directory) as lg:
        lg.append(batch(5), 2)
    os.unlink(os.path.join(directory, LEADER_EPOCH_CHECKPOINT))
    with caplog.at_level(logging.WARNING, logger="pylogq.storage"):
        with open_log(directory) as lg:
            assert lg.leader_epoch_cache.entries == () and lg.end_offset_for_epoch(2) == UNDEFINED
            assert not os.path.exists(os.path.join(directory, LEADER_EPOCH_CHECKPOINT))
            lg.append(batch(1), 3)
            assert lg.leader_epoch_cache.entries == ((3, 5),)
    assert warnings_of(caplog) == []


@pytest.mark.parametrize("kind", ["garbage", "count mismatch", "non-monotonic", "empty"])
def test_a_corrupt_checkpoint_is_rebuilt_from_the_log(tmp_path, caplog, kind):
    directory = str(tmp_path / "t-0")
    with open_log(directory, config=LogConfig(segment_bytes=400, index_interval_bytes=0)) as lg:
        for epoch in (0, 0, 1, 4, 4, 6):
            lg.append(batch(3), epoch)
        lg.append(legacy_set(2), 7)  # up-converted to a v2 batch: it carries epoch 7
        lg.append(batch(3), 7)
        assert lg.num_segments > 1
        kept = lg.leader_epoch_cache.entries
    assert kept == ((0, 0), (1, 6), (4, 9), (6, 15), (7, 18))  # the leader knew epoch 7 began at 18
    path = os.path.join(directory, LEADER_EPOCH_CHECKPOINT)
    damage = {"garbage": b"\x7fELF\x02\x01", "count mismatch": b"0\n6\n0 0\n1 6\n",
              "non-monotonic": b"0\n2\n4 9\n1 6\n", "empty": b""}
    with open(path, "wb") as f:
        f.write(damage[kind])
    with caplog.at_level(logging.WARNING, logger="pylogq.storage"):
        with open_log(directory) as lg:
            # The batches say epoch 7 began with the up-converted legacy set, at 18.
            assert lg.leader_epoch_cache.entries == ((0, 0), (1, 6), (4, 9), (6, 15), (7, 18))
            assert lg.end_offset_for_epoch(6) == (6, 18) and lg.end_offset_for_epoch(7) == (7, 23)
    warned = warnings_of(caplog)
    assert len(warned) == 1 and path in warned[0], warned
    assert read_file(path) == kafka_bytes([(0, 0), (1, 6), (4, 9), (6, 15), (7, 18)])


def test_entries_past_a_crashed_logs_end_are_cut(tmp_path):
    # The epoch's start is written before its records: a crash in between leaves an entry at
    # (or, after recovery cut a torn tail, past) the log end.
    directory = str(tmp_path / "t-0")
    with open_log(directory) as lg:
        lg.append(batch(5), 0)
        lg.append(batch(5), 1)
    path = os.path.join(directory, LEADER_EPOCH_CHECKPOINT)
    with open(path, "wb") as f:
        f.write(kafka_bytes([(0, 0), (1, 5), (2, 10), (3, 12)]))
    with open_log(directory, recovery_point=0) as lg:
        assert lg.leader_epoch_cache.entries == ((0, 0), (1, 5))
        assert checkpoint_of(lg) == [(0, 0), (1, 5)]


@pytest.mark.parametrize("cut", ["inside the last batch", "inside its header", "at its start"])
def test_a_segment_cut_short_takes_the_epochs_of_what_it_lost(tmp_path, cut):
    directory = str(tmp_path / "t-0")
    with open_log(directory) as lg:
        lg.append(batch(5), 0)
        lg.append(batch(5), 0)
        lg.append(batch(5), 2)  # 10..14: the batch the power loss tears
        log_path = lg.active_segment.log_path
    data = read_file(log_path)
    last = list(records.iter_batches(data))[-1]
    keep = {"inside the last batch": last.position + last.size - 7, "inside its header": last.position + 20,
            "at its start": last.position}[cut]
    with open(log_path, "r+b") as f:
        f.truncate(keep)
    with open_log(directory, recovery_point=0) as lg:  # not a clean shutdown: the segment is recovered
        assert lg.log_end_offset == 10
        assert lg.leader_epoch_cache.entries == ((0, 0),)
        assert lg.end_offset_for_epoch(2) == UNDEFINED
        assert checkpoint_of(lg) == [(0, 0)]
        lg.append(batch(1), 3)
        assert lg.leader_epoch_cache.entries == ((0, 0), (3, 10))


def test_deleting_the_log_removes_the_file_with_its_directory(tmp_path):
    lg = open_log(str(tmp_path / "t-0"))
    lg.append(batch(2), 1)
    assert os.path.exists(os.path.join(lg.directory, LEADER_EPOCH_CHECKPOINT))
    lg.delete()
    assert not os.path.exists(lg.directory)


def test_a_failed_checkpoint_write_fails_the_append_and_writes_nothing(tmp_path, checkpoint_write_fails):
    break_, mend = checkpoint_write_fails
    with open_log(str(tmp_path / "t-0")) as lg:
        lg.append(batch(5), 0)
        break_(lg.directory)
        lg.append(batch(5), 0)  # the same epoch: the checkpoint is not written, nothing fails
        for _ in range(2):
            with pytest.raises(KafkaStorageError, match="leader-epoch-checkpoint") as raised:
                lg.append(batch(5), 1)
            assert raised.value.code == 56
            assert lg.log_end_offset == 10
        mend(lg.directory)
        lg.append(batch(5), 1)
        assert lg.leader_epoch_cache.entries == ((0, 0), (1, 10)) and checkpoint_of(lg) == [(0, 0), (1, 10)]


def test_after_a_failed_truncation_write_no_record_is_written_until_the_file_is(
        tmp_path, checkpoint_write_fails, caplog):
    break_, mend = checkpoint_write_fails
    directory = str(tmp_path / "t-0")
    with open_log(directory) as lg:
        for epoch in (0, 0, 1, 1):
            lg.append(batch(5), epoch)
        break_(directory)
        with caplog.at_level(logging.WARNING, logger="pylogq.storage"):
            assert lg.truncate_to(10)  # the records go; the cache in memory with them
        assert any("could not write leader-epoch-checkpoint" in w for w in warnings_of(caplog))
        assert lg.leader_epoch_cache.entries == ((0, 0),) and lg.leader_epoch_cache.dirty
        assert checkpoint_of(lg) == [(0, 0), (1, 10)]  # behind: it still names epoch 1
        with pytest.raises(KafkaStorageError):
            lg.append(batch(5), 0)  # in epoch 0, which needs no entry: still no record past it
        with pytest.raises(KafkaStorageError):
            lg.append_as_follower(batch(5, epoch=0, base_offset=10))
        assert lg.log_end_offset == 10
        mend(directory)
        lg.append(batch(5), 0)
        assert checkpoint_of(lg) == [(0, 0)]
    with open_log(directory) as lg:
        assert lg.leader_epoch_cache.entries == ((0, 0),)


def test_a_full_disk_fails_the_append_of_a_new_epoch_and_it_succeeds_after(tmp_path):
    with small_tmpfs(tmp_path / "disk", 2 * 1024 * 1024) as disk:
        directory = str(disk / "t-0")
        lg = open_log(directory)
        try:
            lg.append(batch(5), 0)
            fill(disk / "filler")
            with pytest.raises(KafkaStorageError, match="No space left on device"):
                lg.append(batch(5), 1)
            assert lg.log_end_offset == 5 and checkpoint_of(lg) == [(0, 0)]
            os.unlink(disk / "filler")
            lg.append(batch(5), 1)
            assert checkpoint_of(lg) == [(0, 0), (1, 5)]
        finally:
            lg.close()
        with open_log(directory, recovery_point=0) as lg:
            assert lg.leader_epoch_cache.entries == ((0, 0), (1, 5))


# -- a process killed at random moments ---------------------------------------------------


class _Lines:
    """A child's stdout lines, read with deadlines (select), never blocking past them."""

    def __init__(self, proc: subprocess.Popen) -> None:
        self.proc = proc
        self.fd = proc.stdout.fileno()
        self.buffer = b""
        self.lines: List[str] = []
        self.eof = False

    def next(self, timeout: float = LINE_TIMEOUT) -> str:
        deadline = time.monotonic() + timeout
        while not self.lines:
            if self.eof:
                raise AssertionError("child exited (rc=%s) before printing a line" % self.proc.poll())
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise AssertionError("child printed nothing for %.0f s" % timeout)
            ready, _, _ = select.select([self.fd], [], [], remaining)
            if ready:
                chunk = os.read(self.fd, 65536)
                self.eof = not chunk
                self.buffer += chunk
                *complete, self.buffer = self.buffer.split(b"\n")
                self.lines.extend(line.decode() for line in complete)
        return self.lines.pop(0)


def _stderr(f) -> str:
    f.seek(0)
    return f.read().decode(errors="replace")[-2000:]


def test_a_process_killed_at_random_moments_leaves_a_cache_that_matches_its_log(tmp_path, caplog):
    """Kill the writer (it appends, changes epochs and truncates, writing the checkpoint at every
    change) at random rounds; after each kill the reopened log's entries are exactly the first
    batch of each epoch in its files, none at or past its end, the file is Kafka's format, and
    the next run sees what this one left."""
    root = str(tmp_path / "logs")
    os.makedirs(root)
    rng = random.Random(20240917)
    seen_end, seen_latest = 0, -1
    epoch_changes = 0
    for cycle in range(KILL_CYCLES):
        with open(os.path.join(str(tmp_path), "child-%d.err" % cycle), "w+b") as err:
            proc = subprocess.Popen([sys.executable, CHILD, root, str(cycle)], stdin=subprocess.PIPE,
                                    stdout=subprocess.PIPE, stderr=err, cwd=REPO)
            try:
                lines = _Lines(proc)
                assert lines.next() == "ready", _stderr(err)
                proc.stdin.write(b"go\n")
                proc.stdin.flush()
                assert lines.next().split() == ["open", str(seen_end), str(seen_latest)], (
                    "cycle %d: the child did not open the log this test saw last" % cycle)
                for _ in range(rng.randrange(1, 120)):
                    line = lines.next()
                    assert line.startswith("op "), "%s; %s" % (line, _stderr(err))
                os.kill(proc.pid, signal.SIGKILL)
                assert proc.wait(timeout=LINE_TIMEOUT) == -signal.SIGKILL
            finally:
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()
                proc.stdin.close()
                proc.stdout.close()
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="pylogq.storage"):
            manager = LogManager([root], background=False)
        try:
            lg = manager.get_log(child.TOPIC, child.PARTITION)
            directory = lg.directory
            assert not [n for n in os.listdir(directory) if n.endswith(".tmp")]
            entries = [tuple(e) for e in lg.leader_epoch_cache.entries]
            assert entries == first_of_each_epoch(file_epochs(directory)), "cycle %d" % cycle
            assert all(start < lg.log_end_offset for _, start in entries)
            path = os.path.join(directory, LEADER_EPOCH_CHECKPOINT)
            if os.path.exists(path):
                assert kafka_read(read_file(path)) == entries
            assert not [w for w in warnings_of(caplog) if LEADER_EPOCH_CHECKPOINT in w], warnings_of(caplog)
            seen_end = lg.log_end_offset
            seen_latest = lg.latest_epoch if lg.latest_epoch is not None else -1
            epoch_changes += len(entries)
        finally:
            manager.close()
    assert epoch_changes > KILL_CYCLES  # the kills did not all land before the first epoch's records
