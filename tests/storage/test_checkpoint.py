"""Kafka's text checkpoint files: exact bytes, parsing errors, atomic replacement, concurrency."""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Dict, List, Tuple

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pylogq.errors import CorruptCheckpointError, PylogqError
from pylogq.storage import checkpoint
from pylogq.storage.checkpoint import (
    CLEAN_SHUTDOWN_FILE,
    CLEANER_CHECKPOINT,
    LEADER_EPOCH_CHECKPOINT,
    LOCK_FILE,
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
    REPLICATION_CHECKPOINT,
    LeaderEpochCheckpoint,
    OffsetCheckpoint,
    write_atomically,
)

TOPICS = st.text(alphabet="abcXYZ019._-", min_size=1, max_size=20)
OFFSET_MAPS = st.dictionaries(
    st.tuples(TOPICS, st.integers(0, 2**31 - 1)), st.integers(-(2**63), 2**63 - 1), max_size=30)
EPOCH_LISTS = st.lists(st.tuples(st.integers(0, 2**31 - 1), st.integers(-(2**63), 2**63 - 1)), max_size=30)


def test_file_names_are_kafkas() -> None:
    assert RECOVERY_POINT_CHECKPOINT == "recovery-point-offset-checkpoint"
    assert REPLICATION_CHECKPOINT == "replication-offset-checkpoint"
    assert LOG_START_OFFSET_CHECKPOINT == "log-start-offset-checkpoint"
    assert CLEANER_CHECKPOINT == "cleaner-offset-checkpoint"
    assert LEADER_EPOCH_CHECKPOINT == "leader-epoch-checkpoint"
    assert CLEAN_SHUTDOWN_FILE == ".kafka_cleanshutdown"
    assert LOCK_FILE == ".lock"


# --------------------------------------------------------------------------- golden bytes


def test_offset_checkpoint_golden_bytes(tmp_path: Path) -> None:
    path = tmp_path / RECOVERY_POINT_CHECKPOINT
    OffsetCheckpoint(path).write({("orders", 1): 77, ("events", 0): 1234})
    assert path.read_bytes() == b"0\n2\nevents 0 1234\norders 1 77\n"


def test_offset_checkpoint_golden_empty(tmp_path: Path) -> None:
    path = tmp_path / REPLICATION_CHECKPOINT
    OffsetCheckpoint(path).write({})
    assert path.read_bytes() == b"0\n0\n"
    assert OffsetCheckpoint(path).read() == {}


def test_leader_epoch_checkpoint_golden_bytes(tmp_path: Path) -> None:
    path = tmp_path / LEADER_EPOCH_CHECKPOINT
    LeaderEpochCheckpoint(path).write([(0, 0), (3, 4096)])
    assert path.read_bytes() == b"0\n2\n0 0\n3 4096\n"


def test_reads_a_file_as_kafka_writes_it(tmp_path: Path) -> None:
    path = tmp_path / CLEANER_CHECKPOINT
    path.write_bytes(b"0\n3\n__consumer_offsets 49 100\nmy-topic 0 0\nmy.topic_2 12 9223372036854775807\n")
    assert OffsetCheckpoint(path).read() == {
        ("__consumer_offsets", 49): 100,
        ("my-topic", 0): 0,
        ("my.topic_2", 12): 2**63 - 1,
    }


def test_write_sorts_for_deterministic_bytes(tmp_path: Path) -> None:
    entries = {("b", 2): 1, ("a", 10): 2, ("a", 9): 3}
    first, second = tmp_path / "one", tmp_path / "two"
    OffsetCheckpoint(first).write(entries)
    OffsetCheckpoint(second).write(dict(reversed(list(entries.items()))))
    assert first.read_bytes() == second.read_bytes() == b"0\n3\na 9 3\na 10 2\nb 2 1\n"


def test_leader_epochs_keep_their_order(tmp_path: Path) -> None:
    path = tmp_path / LEADER_EPOCH_CHECKPOINT
    LeaderEpochCheckpoint(path).write([(5, 10), (2, 3)])
    assert LeaderEpochCheckpoint(path).read() == [(5, 10), (2, 3)]


# --------------------------------------------------------------------------- round trips


@settings(max_examples=60, deadline=None)
@given(entries=OFFSET_MAPS)
def test_offset_round_trip(tmp_path_factory: pytest.TempPathFactory, entries: Dict[Tuple[str, int], int]) -> None:
    path = tmp_path_factory.mktemp("cp") / RECOVERY_POINT_CHECKPOINT
    OffsetCheckpoint(path).write(entries)
    assert OffsetCheckpoint(path).read() == entries
    assert not os.path.exists(str(path) + ".tmp")


@settings(max_examples=60, deadline=None)
@given(entries=EPOCH_LISTS)
def test_leader_epoch_round_trip(tmp_path_factory: pytest.TempPathFactory, entries: List[Tuple[int, int]]) -> None:
    path = tmp_path_factory.mktemp("cp") / LEADER_EPOCH_CHECKPOINT
    LeaderEpochCheckpoint(path).write(entries)
    assert LeaderEpochCheckpoint(path).read() == entries


def test_str_path_and_repr(tmp_path: Path) -> None:
    path = str(tmp_path / "x")
    cp = OffsetCheckpoint(path)
    assert cp.path == path
    assert repr(cp) == "OffsetCheckpoint(%r)" % path


def test_missing_and_empty_files_read_empty(tmp_path: Path) -> None:
    assert OffsetCheckpoint(tmp_path / "absent").read() == {}
    assert OffsetCheckpoint(tmp_path / "no-dir" / "absent").read() == {}
    assert LeaderEpochCheckpoint(tmp_path / "absent").read() == []
    (tmp_path / "empty").write_bytes(b"")
    assert OffsetCheckpoint(tmp_path / "empty").read() == {}
    assert LeaderEpochCheckpoint(tmp_path / "empty").read() == []


def test_tolerates_crlf_and_no_final_newline(tmp_path: Path) -> None:
    path = tmp_path / "cp"
    path.write_bytes(b"0\r\n1\r\nt 0 5")
    assert OffsetCheckpoint(path).read() == {("t", 0): 5}


# --------------------------------------------------------------------------- malformed files


@pytest.mark.parametrize(
    "content, line, problem",
    [
        (b"1\n0\n", 1, "unrecognized version 1"),
        (b"x\n0\n", 1, "version 'x' is not an integer"),
        (b"\n", 1, "is not an integer"),
        (b"0\n", 2, "missing the entry count"),
        (b"0\ntwo\n", 2, "entry count 'two' is not an integer"),
        (b"0\n-1\n", 2, "entry count -1 is out of range"),
        (b"0\n2\nt 0 1\n", 4, "expected 2 entries but the file ends after 1"),
        (b"0\n1\nt 0 1\nt 1 2\n", 4, "expected 1 entries but found 2"),
        (b"0\n1\nt 0 1\n\n", 4, "expected 1 entries but found 2"),
        (b"0\n1\nt 0\n", 3, "expected 3 space-separated fields"),
        (b"0\n1\nt 0 1 2\n", 3, "expected 3 space-separated fields"),
        (b"0\n1\nt p 1\n", 3, "partition 'p' is not an integer"),
        (b"0\n1\nt 0 1.5\n", 3, "offset '1.5' is not an integer"),
        (b"0\n1\nt 0 1_000\n", 3, "offset '1_000' is not an integer"),
        (b"0\n1\nt -1 0\n", 3, "partition -1 is out of range"),
        (b"0\n1\nt 0 9223372036854775808\n", 3, "offset 9223372036854775808 is out of range"),
        (b"0\n2\nt 0 1\nt 0 2\n", 4, "duplicate entry for t-0"),
        (b"0\n1\nt\xff 0 1\n", None, "not UTF-8"),
    ],
)
def test_malformed_offset_checkpoint(tmp_path: Path, content: bytes, line: int, problem: str) -> None:
    path = tmp_path / RECOVERY_POINT_CHECKPOINT
    path.write_bytes(content)
    with pytest.raises(CorruptCheckpointError) as info:
        OffsetCheckpoint(path).read()
    error = info.value
    assert isinstance(error, PylogqError)
    assert error.path == str(path)
    assert error.line == line
    assert problem in error.problem
    assert str(path) in str(error) and problem in str(error)
    if line is not None:
        assert "line %d" % line in str(error)


@pytest.mark.parametrize(
    "content, line, problem",
    [
        (b"0\n1\n0 0 0\n", 3, "expected 2 space-separated fields"),
        (b"0\n1\n-1 0\n", 3, "leader epoch -1 is out of range"),
        (b"0\n1\n0 x\n", 3, "start offset 'x' is not an integer"),
        (b"0\n0\n1 1\n", 3, "expected 0 entries but found 1"),
    ],
)
def test_malformed_leader_epoch_checkpoint(tmp_path: Path, content: bytes, line: int, problem: str) -> None:
    path = tmp_path / LEADER_EPOCH_CHECKPOINT
    path.write_bytes(content)
    with pytest.raises(CorruptCheckpointError) as info:
        LeaderEpochCheckpoint(path).read()
    assert info.value.line == line
    assert problem in str(info.value)


# --------------------------------------------------------------------------- bad arguments


@pytest.mark.parametrize("topic", ["has space", "tab\there", "new\nline", ""])
def test_write_rejects_topics_that_cannot_be_stored(tmp_path: Path, topic: str) -> None:
    path = tmp_path / "cp"
    OffsetCheckpoint(path).write({("good", 0): 1})
    with pytest.raises(ValueError, match="topic"):
        OffsetCheckpoint(path).write({(topic, 0): 1})
    assert OffsetCheckpoint(path).read() == {("good", 0): 1}


@pytest.mark.parametrize(
    "entries, match",
    [
        ({("t", -1): 0}, "partition of t"),
        ({("t", 2**31): 0}, "partition of t"),
        ({("t", True): 0}, "partition of t"),
        ({("t", 0): 2**63}, "offset of t-0"),
        ({("t", 0): "5"}, "offset of t-0"),
    ],
)
def test_write_rejects_bad_numbers(tmp_path: Path, entries: Dict[Tuple[str, int], int], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        OffsetCheckpoint(tmp_path / "cp").write(entries)
    assert not (tmp_path / "cp").exists()


@pytest.mark.parametrize("entries", [[(-1, 0)], [(0, 2**63)], [(0.5, 0)]])
def test_leader_epoch_write_rejects_bad_numbers(tmp_path: Path, entries: List[Tuple[int, int]]) -> None:
    with pytest.raises(ValueError):
        LeaderEpochCheckpoint(tmp_path / "cp").write(entries)


# --------------------------------------------------------------------------- atomicity


def test_failed_rename_keeps_the_old_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / RECOVERY_POINT_CHECKPOINT
    cp = OffsetCheckpoint(path)
    cp.write({("t", 0): 1})
    before = path.read_bytes()

    def broken_replace(src: str, dst: str) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(checkpoint.os, "replace", broken_replace)
    with pytest.raises(OSError, match="No space left"):
        cp.write({("t", 0): 2, ("t", 1): 3})
    assert path.read_bytes() == before
    assert cp.read() == {("t", 0): 1}
    assert not os.path.exists(str(path) + ".tmp")

    monkeypatch.undo()
    cp.write({("t", 0): 2})
    assert cp.read() == {("t", 0): 2}


def test_failed_fsync_keeps_the_old_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "data"
    write_atomically(path, b"old")

    def broken_fsync(fd: int) -> None:
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(checkpoint.os, "fsync", broken_fsync)
    with pytest.raises(OSError, match="Input/output"):
        write_atomically(path, b"new")
    assert path.read_bytes() == b"old"
    assert sorted(os.listdir(tmp_path)) == ["data"]


def test_write_atomically_creates_and_replaces(tmp_path: Path) -> None:
    path = tmp_path / CLEAN_SHUTDOWN_FILE
    write_atomically(path, b"")
    assert path.read_bytes() == b""
    write_atomically(str(path), b"abc")
    assert path.read_bytes() == b"abc"
    assert sorted(os.listdir(tmp_path)) == [CLEAN_SHUTDOWN_FILE]


def test_stale_tmp_is_ignored_then_replaced(tmp_path: Path) -> None:
    path = tmp_path / RECOVERY_POINT_CHECKPOINT
    tmp = tmp_path / (RECOVERY_POINT_CHECKPOINT + ".tmp")
    cp = OffsetCheckpoint(path)
    cp.write({("t", 0): 10})
    tmp.write_bytes(b"0\n5\nhalf-writt")
    assert cp.read() == {("t", 0): 10}
    tmp.write_bytes(b"garbage that is longer than the next checkpoint " * 10)
    cp.write({("t", 0): 11})
    assert not tmp.exists()
    assert path.read_bytes() == b"0\n1\nt 0 11\n"


def test_stale_tmp_without_a_checkpoint_reads_empty(tmp_path: Path) -> None:
    (tmp_path / (LEADER_EPOCH_CHECKPOINT + ".tmp")).write_bytes(b"0\n1\n3 4\n")
    assert LeaderEpochCheckpoint(tmp_path / LEADER_EPOCH_CHECKPOINT).read() == []


# --------------------------------------------------------------------------- concurrency


def test_concurrent_writers_never_interleave(tmp_path: Path) -> None:
    path = tmp_path / REPLICATION_CHECKPOINT
    maps = [{("topic-%d" % w, p): w * 1000 + p for p in range(50)} for w in range(4)]
    shared = OffsetCheckpoint(path)
    writers = [shared, shared, OffsetCheckpoint(path), OffsetCheckpoint(str(path))]
    stop = threading.Event()
    errors: List[BaseException] = []
    observed: List[Dict[Tuple[str, int], int]] = []

    def write(cp: OffsetCheckpoint, entries: Dict[Tuple[str, int], int]) -> None:
        try:
            for _ in range(40):
                cp.write(entries)
        except BaseException as exc:  # surfaced by the assertion below
            errors.append(exc)

    def read() -> None:
        try:
            while not stop.is_set():
                observed.append(OffsetCheckpoint(path).read())
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=write, args=(cp, m)) for cp, m in zip(writers, maps)]
    reader = threading.Thread(target=read)
    reader.start()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    stop.set()
    reader.join()
    assert errors == []
    final = OffsetCheckpoint(path).read()
    assert final in maps
    assert all(seen == {} or seen in maps for seen in observed)
    assert not os.path.exists(str(path) + ".tmp")
