"""Which logs are being cleaned, aborted or paused: Kafka's LogCleanerManager state.

The log manager owns one :class:`CleaningRegistry` (``LogManager.cleaning``) and
every :class:`~pylogq.storage.cleaner.LogCleaner` made for it claims logs there,
so a log has one clean at a time whichever cleaner runs it, and deleting,
truncating or closing a log can stop its clean (``abort``) and keep new ones off
(``pause``) until ``resume``.
"""

from __future__ import annotations

import threading
from typing import Dict, Optional

from .log import Log

__all__ = ["CleaningProgress", "CleaningRegistry"]


class CleaningProgress:
    """One clean in progress: its log, the thread running it, and the request to stop it."""

    __slots__ = ("log", "thread", "aborted")

    def __init__(self, log_: Log) -> None:
        self.log = log_
        self.thread = threading.get_ident()
        self.aborted = threading.Event()  # set by abort(); the clean stops at its next check


class CleaningRegistry:
    """Which logs are being cleaned and which may not be now (Kafka's LogCleanerManager state).

    Invariant: a log has at most one clean in progress, whichever cleaner (or
    thread) runs it; every cleaner made for a manager claims its logs in the
    manager's registry, and ``abort`` stops the clean of any of them. Logs are
    known by identity, so a log outside the manager (opened on its own, cleaned
    by a cleaner of the manager) is claimed the same way.

    Thread-safe. Its lock is taken last: nothing is called while it is held, so
    callers may hold the manager's lock or a log's. ``begin`` and ``abort`` wait
    for a clean to end; a clean takes no lock of the manager, so ``delete_log``
    may wait for one while holding the manager's lock.
    """

    def __init__(self) -> None:
        self._cond = threading.Condition(threading.Lock())
        self._in_progress: Dict[int, CleaningProgress] = {}  # id(log): the progress holds the log
        self._paused: Dict[int, Log] = {}

    def try_begin(self, log_: Log) -> Optional[CleaningProgress]:
        """Claim ``log_`` for a clean in this thread; None when it is being cleaned, paused or closed."""
        with self._cond:
            key = id(log_)
            if key in self._in_progress or key in self._paused or log_.closed:
                return None
            progress = self._in_progress[key] = CleaningProgress(log_)
            return progress

    def begin(self, log_: Log) -> CleaningProgress:
        """Claim ``log_`` for a clean in this thread, waiting while another clean of it runs
        or its cleaning is paused."""
        with self._cond:
            key = id(log_)
            while key in self._in_progress or key in self._paused:
                self._cond.wait()
            progress = self._in_progress[key] = CleaningProgress(log_)
            return progress

    def end(self, progress: CleaningProgress) -> None:
        """Release the claim of a clean that has stopped (done or aborted)."""
        with self._cond:
            key = id(progress.log)
            if self._in_progress.get(key) is progress:
                del self._in_progress[key]
            self._cond.notify_all()

    def progress(self, log_: Log) -> Optional[CleaningProgress]:
        """The clean of ``log_`` in progress, or None."""
        with self._cond:
            return self._in_progress.get(id(log_))

    def abort(self, log_: Log, *, pause: bool = False) -> None:
        """Stop the clean of ``log_`` by any cleaner; returns once it has stopped (at once when
        called from within that clean). With ``pause``, no clean of it starts until ``resume``."""
        with self._cond:
            key = id(log_)
            if pause:
                self._paused[key] = log_
            progress = self._in_progress.get(key)
            if progress is None:
                return
            progress.aborted.set()
            if progress.thread == threading.get_ident():
                return  # called from within this clean: it stops at its next check
            while self._in_progress.get(key) is progress:
                self._cond.wait()

    def resume(self, log_: Log) -> None:
        """Let cleans of ``log_`` start again after ``abort(log_, pause=True)``."""
        with self._cond:
            if self._paused.pop(id(log_), None) is not None:
                self._cond.notify_all()
