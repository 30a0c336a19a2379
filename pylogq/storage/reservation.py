"""Disk blocks reserved ahead of appends: who may reserve, how much, and the process's budget.

An append that lands in blocks already allocated is much cheaper on ext4 and
xfs than one that allocates as it writes, so the active segment of a busy
partition reserves blocks ahead of its end (``fallocate`` with
``FALLOC_FL_KEEP_SIZE``, :func:`~pylogq.storage.segment.reserve_blocks`): the
file's size, all that readers and recovery look at, stays the data's. What
was reserved and not written is free space taken from the disk until the
segment rolls or closes, so it is rationed:

* only a segment written at a sustained rate reserves. A segment reserves
  nothing until :data:`RESERVE_MIN` bytes were appended to it within
  :data:`RESERVE_WINDOW_S` seconds; its chunk then doubles each time the last
  one was used up within that window, up to :data:`RESERVE_MAX`, and starts
  again from nothing when the writes slow down. A partition that takes a small
  record now and then reserves nothing;
* what every segment of the process holds reserved is bounded by one
  :class:`ReservationBudget` (``log.reserve.bytes.max``,
  :data:`DEFAULT_BUDGET`). When it is used up, the segments that reserved
  least recently give their unused blocks back (each under its own write lock,
  taken without waiting: one busy appending keeps them) so the partitions
  being written now get theirs.

Kafka's ``preallocate`` (the whole segment at creation) is separate and not
counted: an operator who sets it asks for that space.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import List, Optional, Protocol, Tuple

from ..errors import InvalidArgumentError

__all__ = ["RESERVE_MIN", "RESERVE_MAX", "RESERVE_WINDOW_S", "DEFAULT_BUDGET", "ReservationHolder",
           "ReservationBudget", "reservation_budget", "configure", "next_chunk"]

#: Bytes a segment must take within RESERVE_WINDOW_S before it reserves anything, and its first chunk.
RESERVE_MIN = 1 << 20
#: The largest chunk a segment reserves ahead at once.
RESERVE_MAX = 16 << 20
#: A chunk used up within this many seconds earns the next, twice as large.
RESERVE_WINDOW_S = 10.0
#: Kafka has no such limit; 256 MB lets 16 partitions at full rate hold a full chunk each.
DEFAULT_BUDGET = 256 << 20


def next_chunk(previous: int, elapsed: float) -> int:
    """The chunk a segment reserves when its last one (``previous`` bytes, 0 for none) was used
    up in ``elapsed`` seconds: twice as large if that was within the window, else nothing."""
    if elapsed > RESERVE_WINDOW_S:
        return 0
    return min(max(previous * 2, RESERVE_MIN), RESERVE_MAX)


class ReservationHolder(Protocol):
    """What the budget asks of a segment that holds reserved blocks."""

    def release_reservation(self, wait: bool) -> bool:
        """Give back the blocks reserved past the data (returning them to the budget); -> whether
        it did. ``wait=False``: give up at once if the segment is being written."""
        ...


class ReservationBudget:
    """The bytes all segments of the process may hold reserved ahead of their data.

    Invariant: ``used`` is the sum of the grants of the holders in the table,
    and at most ``limit``; a holder has at most one grant, its last chunk (a
    bound on what it still holds: its appends use the blocks up). A grant is
    returned when the holder releases its blocks (roll, close, truncation,
    deletion) or is asked to by a new request. Thread-safe: its lock is taken
    last, and nothing is called while it is held.
    """

    def __init__(self, limit: int = DEFAULT_BUDGET) -> None:
        self._lock = threading.Lock()
        self._grants: "OrderedDict[ReservationHolder, int]" = OrderedDict()  # least recently granted first
        self._limit = self._checked(limit)
        self.used = 0

    @staticmethod
    def _checked(limit: int) -> int:
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 0:
            raise InvalidArgumentError("the reservation budget must be a number of bytes >= 0, not %r" % (limit,))
        return limit

    @property
    def limit(self) -> int:
        return self._limit

    def set_limit(self, limit: int) -> None:
        """Use ``limit`` bytes from now on; grants above it are returned as their holders release them."""
        self._limit = self._checked(limit)

    def request(self, holder: ReservationHolder, amount: int) -> int:
        """Grant ``holder`` ``amount`` bytes in place of its previous grant (used up by now); -> the bytes
        granted: ``amount``, or 0 when the budget cannot make room.

        Called by a segment holding its own write lock; the holders asked to make
        room are tried without waiting for theirs, so two segments never wait
        for each other.
        """
        victims = self._grant_or_victims(holder, amount)
        if victims is None:
            return amount
        for victim in victims:
            victim.release_reservation(wait=False)
        retry = self._grant_or_victims(holder, amount, find_victims=False)
        return amount if retry is None else 0

    def _grant_or_victims(self, holder: ReservationHolder, amount: int,
                          find_victims: bool = True) -> Optional[List[ReservationHolder]]:
        """None when granted; else the least recently granted holders whose grants would make room."""
        with self._lock:
            self.used -= self._grants.pop(holder, 0)
            if amount > self._limit:
                return []
            if self.used + amount <= self._limit:
                self._grants[holder] = amount
                self.used += amount
                return None
            if not find_victims:
                return []
            victims: List[ReservationHolder] = []
            room = self._limit - self.used
            for other, granted in self._grants.items():
                if room >= amount:
                    break
                victims.append(other)
                room += granted
            return victims

    def release(self, holder: ReservationHolder) -> None:
        """``holder`` gave its reserved blocks back (or never will use them)."""
        with self._lock:
            self.used -= self._grants.pop(holder, 0)

    def holders(self) -> List[Tuple[ReservationHolder, int]]:
        """(holder, bytes granted), least recently granted first (for tests and metrics)."""
        with self._lock:
            return list(self._grants.items())

    def __repr__(self) -> str:
        return "ReservationBudget(%d of %d bytes granted to %d segments)" % (self.used, self._limit, len(self._grants))


_shared = ReservationBudget()


def reservation_budget() -> ReservationBudget:
    """The process's budget (one per process, as the disks are shared by every log in it)."""
    return _shared


def configure(limit: int) -> None:
    """Set the process's budget (``log.reserve.bytes.max``): the last log manager started sets it."""
    _shared.set_limit(limit)
