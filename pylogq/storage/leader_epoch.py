"""The leader epoch cache of one partition: Kafka's LeaderEpochFileCache (KIP-101, KIP-279).

For every leader epoch that wrote to the log, the offset of its first record:
``EpochEntry(epoch, start_offset)``. An epoch ends where the next one starts;
the latest one is still being written and ends at the log end offset. A
replica uses it to answer "where did epoch N end?" (OffsetsForLeaderEpoch) so
that a follower truncates exactly its divergent tail instead of trusting the
high watermark.

The entries live in the partition directory's ``leader-epoch-checkpoint``, in
Kafka's LeaderEpochCheckpointFile text format, each line ending in ``\\n``::

    0              version
    2              number of entries
    0 0            epoch start_offset, in epoch order
    3 368700

Invariant: epochs strictly increase and so do start offsets (an entry that
does not is removed by the one that contradicts it, as Kafka's ``assign``
does); every start offset is >= 0. Every change is made in memory and then
written whole (atomically and fsynced, see
:func:`~pylogq.storage.checkpoint.write_atomically`) before the call returns.
A write that fails raises and leaves the cache ``dirty``: memory is right, the
file is behind, and the next call that may change the cache (even one that
changes nothing, such as assigning the latest epoch again) writes it first.
The log never writes records while its cache is dirty, so the file never lacks
the epoch of a record on disk.

A file that does not parse (garbage, another version, a count that does not
match its lines, entries that break the invariant, an empty file) is never
trusted: one warning names it and the entries are rebuilt from the log's batch
headers, each v2 batch carrying the epoch of the leader that wrote it (legacy
v0/v1 batches carry none). A missing file is an empty cache: a log written
before epochs were kept, as Kafka treats it.
"""

from __future__ import annotations

import bisect
import logging
import os
import threading
from typing import Callable, Iterable, List, NamedTuple, Optional, Sequence, Tuple, Union

from ..errors import CorruptCheckpointError, InvalidArgumentError
from .checkpoint import LeaderEpochCheckpoint

__all__ = [
    "UNDEFINED_EPOCH",
    "UNDEFINED_EPOCH_OFFSET",
    "BatchEpochs",
    "EpochEntry",
    "LeaderEpochFileCache",
]

log = logging.getLogger("pylogq.storage")

#: OffsetsForLeaderEpoch's "no epoch" and "no offset" (Kafka's OffsetsForLeaderEpochResponse).
UNDEFINED_EPOCH = -1
UNDEFINED_EPOCH_OFFSET = -1

_INT_MAX = 2**31 - 1
_LONG_MAX = 2**63 - 1

PathType = Union[str, "os.PathLike[str]"]

#: The (partition leader epoch, base offset) of each v2 batch of a log, in offset order: what a
#: cache whose file does not parse is rebuilt from. The log gives it; legacy batches are left out.
BatchEpochs = Callable[[], Iterable[Tuple[int, int]]]


class EpochEntry(NamedTuple):
    """One leader epoch and the offset of the first record written in it."""

    epoch: int
    start_offset: int


class _Snapshot(NamedTuple):
    """The entries, their two columns and the last entry, published together by one assignment."""

    entries: Tuple[EpochEntry, ...]
    epochs: Tuple[int, ...]
    starts: Tuple[int, ...]
    latest: Optional[EpochEntry]


_EMPTY = _Snapshot((), (), (), None)


def _snapshot(entries: Sequence[EpochEntry]) -> _Snapshot:
    return _Snapshot(tuple(entries), tuple(e.epoch for e in entries), tuple(e.start_offset for e in entries),
                     entries[-1] if entries else None)


def _update_needed(latest: Optional[EpochEntry], epoch: int, start_offset: int) -> bool:
    """Kafka's rule: a new epoch, or the latest epoch starting earlier than recorded."""
    return latest is None or epoch != latest.epoch or start_offset < latest.start_offset


def _assign_into(entries: List[EpochEntry], entry: EpochEntry) -> Optional[List[EpochEntry]]:
    """Kafka's assign on ``entries`` in place: None when nothing changes, else the entries
    removed to keep the invariant (newest first), possibly none."""
    if not _update_needed(entries[-1] if entries else None, entry.epoch, entry.start_offset):
        return None
    removed = []
    while entries and (entries[-1].epoch >= entry.epoch or entries[-1].start_offset >= entry.start_offset):
        removed.append(entries.pop())
    entries.append(entry)
    return removed


def _check_entry(epoch: int, start_offset: int) -> EpochEntry:
    if isinstance(epoch, bool) or not isinstance(epoch, int) or not 0 <= epoch <= _INT_MAX:
        raise InvalidArgumentError("a leader epoch must be an int in [0, %d], not %r" % (_INT_MAX, epoch))
    if isinstance(start_offset, bool) or not isinstance(start_offset, int) or not 0 <= start_offset <= _LONG_MAX:
        raise InvalidArgumentError("the start offset of leader epoch %d must be an int in [0, %d], not %r"
                                   % (epoch, _LONG_MAX, start_offset))
    return EpochEntry(epoch, start_offset)


class LeaderEpochFileCache:
    """The (leader epoch -> start offset) entries of one partition, kept in ``leader-epoch-checkpoint``.

    Invariant: see the module docstring (epochs and start offsets strictly
    increase; the file holds what memory holds unless :attr:`dirty`).

    Every call that may change the cache returns whether it did (in memory)
    and raises OSError when the file could not be written (see ``dirty``).

    Thread-safety: changes are serialized by the cache's own lock and
    published as one immutable snapshot, so reads never lock and always see
    one consistent list. The log makes every change under its own lock, which
    orders each change with the log change it describes (an append, a
    truncation, the log start moving); a caller outside the log that needs
    the entries to agree with the log's offsets holds the log's lock too.
    """

    def __init__(self, path: PathType, batch_epochs: Optional[BatchEpochs] = None) -> None:
        """Load ``path``; a file that does not parse is rebuilt from ``batch_epochs`` (no batches
        when None) with one warning, and written back."""
        self.path = os.fspath(path)
        self._checkpoint = LeaderEpochCheckpoint(self.path)
        self._lock = threading.Lock()
        self._state = _EMPTY
        self._dirty = False
        try:
            entries = self._read()
        except CorruptCheckpointError as exc:
            entries = self._rebuilt(batch_epochs)
            self._checkpoint.write(entries)
            log.warning("%s; not trusted: rebuilt from the log's batch headers with %d entries (%s)",
                        exc, len(entries), ", ".join("epoch %d at %d" % e for e in entries) or "none")
        self._publish(entries)

    def _read(self) -> List[EpochEntry]:
        """The entries of the file, checked against the invariant; [] when it is missing."""
        try:
            if os.stat(self.path).st_size == 0:
                # Kafka's writer always writes the version and count lines: an empty file was cut.
                raise CorruptCheckpointError(self.path, None, "the file is empty (no version line)")
        except FileNotFoundError:
            return []
        entries = [EpochEntry(epoch, start) for epoch, start in self._checkpoint.read()]
        for number, entry in enumerate(entries, start=3):
            if entry.start_offset < 0:
                raise CorruptCheckpointError(self.path, number, "start offset %d of epoch %d is negative"
                                             % (entry.start_offset, entry.epoch))
            if number > 3:
                before = entries[number - 4]
                if entry.epoch <= before.epoch or entry.start_offset <= before.start_offset:
                    raise CorruptCheckpointError(
                        self.path, number, "entry %d %d does not follow %d %d: epochs and start offsets must "
                        "increase" % (entry.epoch, entry.start_offset, before.epoch, before.start_offset))
        return entries

    @staticmethod
    def _rebuilt(batch_epochs: Optional[BatchEpochs]) -> List[EpochEntry]:
        """The entries the batches say: each epoch from its first batch, as Kafka's segment
        recovery assigns them (a batch with no epoch, or an older one than the latest, adds nothing)."""
        entries: List[EpochEntry] = []
        if batch_epochs is None:
            return entries
        for epoch, base_offset in batch_epochs():
            if 0 <= epoch <= _INT_MAX and base_offset >= 0 and (not entries or epoch > entries[-1].epoch):
                _assign_into(entries, EpochEntry(epoch, base_offset))
        return entries

    def _publish(self, entries: Sequence[EpochEntry]) -> None:
        # One assignment of the snapshot: a reader sees the old list or the new one, whole.
        self._state = _snapshot(entries)

    def _store(self, entries: Sequence[EpochEntry]) -> None:
        """Publish ``entries``, then write them; a failed write leaves the cache dirty (lock held)."""
        self._publish(entries)
        self._dirty = True
        self._checkpoint.write(entries)
        self._dirty = False

    def _heal(self) -> None:
        """Write the entries again after a write failed (lock held)."""
        if self._dirty:
            self._store(self._state.entries)

    @property
    def dirty(self) -> bool:
        """Whether the last write of the file failed: memory holds entries the file does not."""
        return self._dirty

    def flush(self) -> bool:
        """Write the file if it is behind memory (:attr:`dirty`); -> whether it wrote. OSError
        when it still cannot."""
        with self._lock:
            dirty = self._dirty
            self._heal()
            return dirty

    # -- reading ------------------------------------------------------------------

    @property
    def entries(self) -> Tuple[EpochEntry, ...]:
        """Every entry, in epoch order (an immutable snapshot)."""
        return self._state.entries

    @property
    def latest_entry(self) -> Optional[EpochEntry]:
        """The entry of the latest epoch; None when the cache is empty."""
        return self._state.latest

    @property
    def latest_epoch(self) -> Optional[int]:
        """The latest epoch that wrote to the log (or was assigned its start); None when empty."""
        latest = self._state.latest
        return None if latest is None else latest.epoch

    @property
    def earliest_entry(self) -> Optional[EpochEntry]:
        """The entry of the earliest epoch; None when the cache is empty."""
        entries = self._state.entries
        return entries[0] if entries else None

    def __len__(self) -> int:
        return len(self._state.entries)

    def epoch_for_offset(self, offset: int) -> Optional[int]:
        """The epoch ``offset`` was written in: the latest one starting at or before it; None when
        every entry starts after it (or there is none)."""
        state = self._state
        i = bisect.bisect_right(state.starts, offset)
        return state.epochs[i - 1] if i else None

    def end_offset_for(self, requested_epoch: int, log_end_offset: int) -> Tuple[int, int]:
        """Kafka's endOffsetFor: -> (epoch, end offset) for OffsetsForLeaderEpoch.

        - ``UNDEFINED_EPOCH`` asked, or an epoch above every known one (or an
          empty cache): ``(UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET)``.
        - The latest epoch: it is still being written, so it ends at
          ``log_end_offset``.
        - Otherwise the largest epoch not above the one asked, and the start
          of the first epoch above it (where that epoch's records stop); an
          epoch below every known one answers itself with the first entry's
          start (its records, if any, are gone from the log).
        """
        if requested_epoch == UNDEFINED_EPOCH:
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        state = self._state
        entries = state.entries
        if entries and entries[-1].epoch == requested_epoch:
            return requested_epoch, log_end_offset
        i = bisect.bisect_right(state.epochs, requested_epoch)  # the first epoch above the one asked
        if i == len(entries):
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if i == 0:
            return requested_epoch, entries[0].start_offset
        return entries[i - 1].epoch, entries[i].start_offset

    # -- changing -----------------------------------------------------------------

    def assign(self, epoch: int, start_offset: int) -> bool:
        """Record that ``epoch`` starts at ``start_offset``; -> whether the cache changed.

        Kafka's rule: nothing changes for the latest epoch at or after its
        recorded start (the common case: no lock, no write). Otherwise the
        entries the new one contradicts (an epoch at or above it, or a start
        at or after its start) are removed, with a warning when that drops
        data's epochs rather than only an entry at the same start, and the
        new entry is written. ValueError for a negative or oversized epoch or
        offset.
        """
        entry = _check_entry(epoch, start_offset)
        if not self._dirty and not _update_needed(self._state.latest, epoch, start_offset):
            return False
        with self._lock:
            entries = list(self._state.entries)
            removed = _assign_into(entries, entry)
            if removed is None:
                self._heal()
                return False
            self._store(entries)
        self._warn_removed(entry, removed)
        return True

    def assign_all(self, entries: Iterable[Tuple[int, int]], *, clear: bool = False) -> bool:
        """Assign each ``(epoch, start_offset)`` in order, first removing every entry when
        ``clear``; one write for all of them. -> whether the cache changed."""
        new = [_check_entry(epoch, start) for epoch, start in entries]
        with self._lock:
            current = list(self._state.entries)
            result = [] if clear else list(current)
            removals = []
            for entry in new:
                removed = _assign_into(result, entry)
                if removed:
                    removals.append((entry, removed))
            if result == current:
                self._heal()
                return False
            self._store(result)
        for entry, removed in removals:
            self._warn_removed(entry, removed)
        return True

    def _warn_removed(self, entry: EpochEntry, removed: List[EpochEntry]) -> None:
        # An entry replaced at its own start is expected (the epoch wrote nothing); more is a conflict.
        if len(removed) > 1 or (removed and removed[0].start_offset != entry.start_offset):
            log.warning("%s: new epoch entry %d %d removed the conflicting entries %s; %d entries now",
                        self.path, entry.epoch, entry.start_offset,
                        ", ".join("%d %d" % e for e in reversed(removed)), len(self._state.entries))

    def truncate_from_end(self, end_offset: int) -> bool:
        """Remove every entry starting at or after ``end_offset`` (the log was cut there); a
        negative offset removes nothing. -> whether the cache changed."""
        with self._lock:
            entries = list(self._state.entries)
            if end_offset < 0 or not entries or entries[-1].start_offset < end_offset:
                self._heal()
                return False
            while entries and entries[-1].start_offset >= end_offset:
                entries.pop()
            self._store(entries)
            return True

    def truncate_from_start(self, start_offset: int) -> bool:
        """Drop the entries wholly below ``start_offset`` (the log start moved up): the epoch
        holding it keeps its entry with its start moved up to it; entries from it on stay.
        -> whether the cache changed."""
        with self._lock:
            entries = self._state.entries
            covered = bisect.bisect_right(self._state.starts, start_offset)
            if covered == 0 or (covered == 1 and entries[0].start_offset == start_offset):
                self._heal()
                return False
            self._store([EpochEntry(entries[covered - 1].epoch, start_offset)] + list(entries[covered:]))
            return True

    def clear(self) -> bool:
        """Remove every entry (the log was emptied); -> whether the cache changed."""
        with self._lock:
            if not self._state.entries:
                self._heal()
                return False
            self._store([])
            return True

    def __repr__(self) -> str:
        return "LeaderEpochFileCache(%r, %s)" % (self.path, " ".join("%d@%d" % e for e in self._state.entries))
