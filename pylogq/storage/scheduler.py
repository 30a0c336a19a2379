"""A small background scheduler: delayed and periodic tasks on one daemon thread.

The log manager runs flushes, retention, checkpoints and delayed file
deletion here. A task that raises is logged and, if periodic, keeps its
schedule: one failing log must not stop the others' housekeeping.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import threading
import time
from typing import Callable, Dict, List, Optional, Tuple
from ..errors import IllegalStateError

__all__ = ["Scheduler"]

log = logging.getLogger("pylogq.storage")


class Scheduler:
    """Runs callables after a delay, once or every ``period`` seconds. Thread-safe."""

    def __init__(self, name: str = "pylogq-scheduler") -> None:
        self._name = name
        self._queue: List[Tuple[float, int, Callable[[], None], Optional[float], str]] = []
        self._seq = itertools.count()
        self._cond = threading.Condition()
        self._thread: Optional[threading.Thread] = None
        self._stopped = False
        self._failing: Dict[str, str] = {}  # task -> its last failure, while it keeps failing

    def schedule(self, fn: Callable[[], None], delay: float = 0.0, period: Optional[float] = None,
                 name: str = "") -> None:
        """Run ``fn`` after ``delay`` seconds, then every ``period`` seconds if given."""
        with self._cond:
            if self._stopped:
                raise IllegalStateError("scheduler %s is shut down" % self._name)
            heapq.heappush(self._queue, (time.monotonic() + delay, next(self._seq), fn, period, name))
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name=self._name, daemon=True)
                self._thread.start()
            self._cond.notify()

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._stopped and (not self._queue or self._queue[0][0] > time.monotonic()):
                    timeout = self._queue[0][0] - time.monotonic() if self._queue else None
                    self._cond.wait(timeout)
                if self._stopped:
                    return
                due, _, fn, period, name = heapq.heappop(self._queue)
                if period is not None:
                    heapq.heappush(self._queue, (max(due + period, time.monotonic()), next(self._seq), fn, period, name))
            self._call(fn, name)

    def _call(self, fn: Callable[[], None], name: str) -> None:
        """Run a task; a failure is logged with its traceback, and the same failure again
        (a full disk fails every flush) in one line, until the task succeeds."""
        key = name or repr(fn)
        try:
            fn()
        except Exception as exc:  # a failing task must not stop the others
            text = "%s: %s" % (type(exc).__name__, exc)
            if self._failing.get(key) == text:
                log.warning("scheduled task %s failed again: %s", key, text)
            else:
                self._failing[key] = text
                log.exception("scheduled task %s failed", key)
        else:
            if self._failing.pop(key, None) is not None:
                log.warning("scheduled task %s succeeds again", key)

    def run_pending(self, only_one_shot: bool = True) -> None:
        """Run every queued one-shot task now, in this thread (used at shutdown)."""
        with self._cond:
            tasks = [t for t in self._queue if not only_one_shot or t[3] is None]
            self._queue = [t for t in self._queue if only_one_shot and t[3] is not None]
            heapq.heapify(self._queue)
        for _, _, fn, _, name in sorted(tasks, key=lambda t: (t[0], t[1])):
            self._call(fn, name)

    def shutdown(self, run_pending: bool = True) -> None:
        """Stop the thread; with ``run_pending``, run the queued one-shot tasks first."""
        if run_pending:
            self.run_pending()
        with self._cond:
            self._stopped = True
            self._cond.notify_all()
            thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join()
