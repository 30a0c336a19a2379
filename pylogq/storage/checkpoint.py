"""Kafka's text checkpoint files, replaced atomically on every write.

Offset checkpoints (``recovery-point-offset-checkpoint``,
``replication-offset-checkpoint``, ``log-start-offset-checkpoint``,
``cleaner-offset-checkpoint``; one per log directory), UTF-8, each line ending
in ``\\n``::

    0                      version
    2                      number of entries
    my-topic 0 1234        topic, partition, offset separated by single spaces
    my-topic 1 77

The leader epoch checkpoint (``leader-epoch-checkpoint``; one per partition
directory) has the same header and ``epoch start_offset`` lines, in epoch
order.

A write goes to ``<path>.tmp``, which is flushed and fsynced, renamed over
``<path>``, and then the directory is fsynced: a reader sees the old file or
the new one, never a mix, and a crash leaves at worst a stale ``.tmp`` that
readers ignore and the next write replaces. A missing or empty file reads as
no entries (Kafka's behaviour). Anything else that does not parse raises
:class:`CorruptCheckpointError` naming the file, the line and the problem.
"""

from __future__ import annotations

import errno
import os
import re
import threading
from typing import Any, Dict, Generic, Iterable, List, Mapping, Tuple, TypeVar, Union

from ..errors import CorruptCheckpointError, InvalidArgumentError

__all__ = ["RECOVERY_POINT_CHECKPOINT", "REPLICATION_CHECKPOINT", "LOG_START_OFFSET_CHECKPOINT",
           "CLEANER_CHECKPOINT", "LEADER_EPOCH_CHECKPOINT", "CLEAN_SHUTDOWN_FILE", "LOCK_FILE", "CHECKPOINT_VERSION",
    "OffsetCheckpoint", "LeaderEpochCheckpoint", "write_atomically"]

RECOVERY_POINT_CHECKPOINT = "recovery-point-offset-checkpoint"
REPLICATION_CHECKPOINT = "replication-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT = "log-start-offset-checkpoint"
CLEANER_CHECKPOINT = "cleaner-offset-checkpoint"
LEADER_EPOCH_CHECKPOINT = "leader-epoch-checkpoint"
CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"
LOCK_FILE = ".lock"

CHECKPOINT_VERSION = 0
TMP_SUFFIX = ".tmp"

_INT_MAX = 2**31 - 1
_LONG_MIN = -(2**63)
_LONG_MAX = 2**63 - 1
# Java's Integer.parseInt / Long.parseLong accept an optional sign and ASCII digits only.
_INTEGER = re.compile(r"[+-]?[0-9]+\Z")

PathType = Union[str, "os.PathLike[str]"]
_T = TypeVar("_T")


# --------------------------------------------------------------------------- atomic replacement

_path_locks: Dict[str, threading.Lock] = {}
_path_locks_guard = threading.Lock()


def _lock_for(path: str) -> threading.Lock:
    """The process-wide lock for one file path, so writers of the same file never share a .tmp."""
    key = os.path.abspath(path)
    with _path_locks_guard:
        lock = _path_locks.get(key)
        if lock is None:
            lock = _path_locks[key] = threading.Lock()
        return lock


def _fsync_directory(directory: str) -> None:
    """Make a rename in ``directory`` durable; a no-op where directories cannot be opened or synced."""
    try:
        fd = os.open(directory or ".", os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError as exc:
        if exc.errno not in (errno.EINVAL, errno.EBADF, errno.ENOTSUP):
            raise
    finally:
        os.close(fd)


def write_atomically(path: PathType, data: bytes) -> None:
    """Replace the file at ``path`` with ``data`` so that readers see old or new, never a mix.

    Writes ``path + ".tmp"`` (truncating a stale one), flushes and fsyncs it,
    renames it over ``path`` and fsyncs the directory. On failure the
    ``.tmp`` is removed and ``path`` is left as it was. Calls for the same
    path are serialized by a process-wide lock; other processes are kept
    out by the log directory's ``.lock`` file.
    """
    target = os.fspath(path)
    tmp = target + TMP_SUFFIX
    with _lock_for(target):
        try:
            with open(tmp, "wb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, target)
        except BaseException:
            try:
                os.unlink(tmp)
            except OSError:
                pass
            raise
        _fsync_directory(os.path.dirname(target))


# --------------------------------------------------------------------------- the file format


def _parse_int(path: str, number: int, token: str, what: str, low: int, high: int) -> int:
    if not _INTEGER.match(token):
        raise CorruptCheckpointError(path, number, "%s %r is not an integer" % (what, token))
    value = int(token)
    if not low <= value <= high:
        raise CorruptCheckpointError(path, number, "%s %d is out of range [%d, %d]" % (what, value, low, high))
    return value


class _CheckpointFile(Generic[_T]):
    """Header, count and one line per entry; subclasses format and parse the entries."""

    #: Number of space-separated fields on an entry line.
    FIELDS = 0

    def __init__(self, path: PathType) -> None:
        self.path = os.fspath(path)

    def __repr__(self) -> str:
        return "%s(%r)" % (type(self).__name__, self.path)

    def _format(self, entries: List[_T]) -> bytes:
        lines = [str(CHECKPOINT_VERSION), str(len(entries))]
        lines.extend(self._format_entry(entry) for entry in entries)
        return "".join(line + "\n" for line in lines).encode("utf-8")

    def _format_entry(self, entry: _T) -> str:
        raise NotImplementedError

    def _parse_entry(self, number: int, tokens: List[str]) -> _T:
        raise NotImplementedError

    def _write_entries(self, entries: List[_T]) -> None:
        write_atomically(self.path, self._format(entries))

    def _read_entries(self) -> List[_T]:
        try:
            with open(self.path, "rb") as f:
                raw = f.read()
        except FileNotFoundError:
            return []
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise CorruptCheckpointError(self.path, None, "not UTF-8 text (%s)" % exc) from None
        if not text:
            return []
        lines = text.split("\n")
        if lines[-1] == "":
            lines.pop()
        lines = [line[:-1] if line.endswith("\r") else line for line in lines]
        version = lines[0].strip()
        if not _INTEGER.match(version):
            raise CorruptCheckpointError(self.path, 1, "version %r is not an integer" % lines[0])
        if int(version) != CHECKPOINT_VERSION:
            raise CorruptCheckpointError(self.path, 1, "unrecognized version %s (expected %d)"
                                         % (version, CHECKPOINT_VERSION))
        if len(lines) < 2:
            raise CorruptCheckpointError(self.path, 2, "missing the entry count")
        expected = _parse_int(self.path, 2, lines[1].strip(), "entry count", 0, _INT_MAX)
        found = len(lines) - 2
        if found < expected:
            raise CorruptCheckpointError(self.path, len(lines) + 1, "expected %d entries but the file ends after %d"
                                         % (expected, found))
        if found > expected:
            raise CorruptCheckpointError(self.path, expected + 3, "expected %d entries but found %d"
                                         % (expected, found))
        entries = []
        for number, line in enumerate(lines[2:], start=3):
            tokens = line.split()
            if len(tokens) != self.FIELDS:
                raise CorruptCheckpointError(self.path, number, "expected %d space-separated fields, got %r"
                                             % (self.FIELDS, line))
            entries.append(self._parse_entry(number, tokens))
        return entries


class OffsetCheckpoint(_CheckpointFile[Tuple[str, int, int]]):
    """A map of (topic, partition) -> offset in Kafka's OffsetCheckpointFile format.

    Thread-safe: ``write`` holds a lock shared by every checkpoint object for
    the same path in this process, so concurrent writers never interleave and
    the file always holds one complete map; ``read`` needs no lock because the
    file is only ever replaced by an atomic rename. Entries are written sorted
    by (topic, partition), so equal maps give identical bytes.
    """

    FIELDS = 3

    def read(self) -> Dict[Tuple[str, int], int]:
        """The checkpointed offsets; empty when the file is missing or empty."""
        result: Dict[Tuple[str, int], int] = {}
        for number, (topic, partition, offset) in enumerate(self._read_entries(), start=3):
            if (topic, partition) in result:
                raise CorruptCheckpointError(self.path, number, "duplicate entry for %s-%d" % (topic, partition))
            result[(topic, partition)] = offset
        return result

    def write(self, entries: Mapping[Tuple[str, int], int]) -> None:
        """Replace the file's contents with ``entries``, atomically and durably."""
        rows = []
        for key, offset in entries.items():
            topic, partition = key
            _check_topic(topic)
            _check_int("partition of %s" % topic, partition, 0, _INT_MAX)
            _check_int("offset of %s-%s" % (topic, partition), offset, _LONG_MIN, _LONG_MAX)
            rows.append((topic, partition, offset))
        rows.sort()
        self._write_entries(rows)

    def _format_entry(self, entry: Tuple[str, int, int]) -> str:
        return "%s %d %d" % entry

    def _parse_entry(self, number: int, tokens: List[str]) -> Tuple[str, int, int]:
        topic, partition, offset = tokens
        return (topic,
                _parse_int(self.path, number, partition, "partition", 0, _INT_MAX),
                _parse_int(self.path, number, offset, "offset", _LONG_MIN, _LONG_MAX))


class LeaderEpochCheckpoint(_CheckpointFile[Tuple[int, int]]):
    """The (leader epoch, start offset) pairs of one partition, in Kafka's LeaderEpochCheckpointFile format.

    Entries keep the order given (the leader epoch cache writes them in
    epoch order). Thread-safe in the same way as :class:`OffsetCheckpoint`.
    """

    FIELDS = 2

    def read(self) -> List[Tuple[int, int]]:
        """The checkpointed (epoch, start_offset) pairs; empty when the file is missing or empty."""
        return self._read_entries()

    def write(self, entries: Iterable[Tuple[int, int]]) -> None:
        """Replace the file's contents with ``entries``, atomically and durably."""
        rows = []
        for epoch, start_offset in entries:
            _check_int("leader epoch", epoch, 0, _INT_MAX)
            _check_int("start offset of epoch %s" % epoch, start_offset, _LONG_MIN, _LONG_MAX)
            rows.append((epoch, start_offset))
        self._write_entries(rows)

    def _format_entry(self, entry: Tuple[int, int]) -> str:
        return "%d %d" % entry

    def _parse_entry(self, number: int, tokens: List[str]) -> Tuple[int, int]:
        return (_parse_int(self.path, number, tokens[0], "leader epoch", 0, _INT_MAX),
                _parse_int(self.path, number, tokens[1], "start offset", _LONG_MIN, _LONG_MAX))


def _check_topic(topic: Any) -> None:
    if not isinstance(topic, str) or not topic:
        raise InvalidArgumentError("checkpoint topic must be a non-empty str, not %r" % (topic,))
    if any(c.isspace() for c in topic):
        raise InvalidArgumentError("checkpoint topic %r contains whitespace (legal characters are [a-zA-Z0-9._-])"
                                   % topic)


def _check_int(what: str, value: Any, low: int, high: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidArgumentError("%s must be an int, not %r" % (what, value))
    if not low <= value <= high:
        raise InvalidArgumentError("%s must be in [%d, %d], not %r" % (what, low, high, value))

