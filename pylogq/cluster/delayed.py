"""Delayed operations: Kafka's purgatory, for every request that must wait.

A request that cannot be answered at once (a long-poll fetch waiting for bytes, a
JoinGroup waiting for the other members, a follower's SyncGroup waiting for the
leader's assignment, the embedded broker's blocking calls; replication's acks=all
produce later) becomes a :class:`DelayedOperation`. It completes exactly once:
when its condition holds (:meth:`DelayedOperation.try_complete`, checked when one of
the keys it watches changes) or when its deadline passes (one timer thread for the
whole broker fires it). Nothing parks a thread per waiting request: the answer is
handed to a callback, which an asyncio server turns into a future's result and an
embedded caller waits for on its own thread (:meth:`DelayedOperation.wait`).

The life of an operation::

    purgatory.try_complete_else_watch(op, keys)
        op.try_complete()          -> done now, or
        watched under every key, op.try_complete() once more (no missed change), and
        given to the timer when it has a deadline
    purgatory.check_and_complete(key)   (whoever changed ``key``: an append, a group event)
        op.try_complete() for each op watching ``key``
    timer at the deadline
        op.force_complete() -> op.on_expiration()
    op.force_complete() (any of the above, or close)
        the first caller wins and runs op.on_complete(); later calls return False

An operation whose answer cannot be made (its condition or its deadline's answer
raised: a bug) still completes: :attr:`DelayedOperation.error` keeps the exception,
:meth:`DelayedCall.answer` raises it, and a ``deliver`` with a ``fail(exc)`` method
(a server's future) is told, so a waiting client gets an answer (its connection is
closed) instead of waiting forever. The exception is raised on to the caller too
(the timer or the appender), which logs it.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import threading
import time
from typing import Callable, Dict, Generic, Hashable, Iterable, List, Optional, Set, Tuple, TypeVar
from ..errors import IllegalStateError

__all__ = ["DelayedCall", "DelayedOperation", "DelayedOperationPurgatory", "Tapped", "TimedTask", "Timer"]

log = logging.getLogger(__name__)

_T = TypeVar("_T")


class DelayedOperation:
    """One waiting request: completes once, by its condition, its deadline, or force.

    Subclasses implement :meth:`try_complete` (check the condition; if it holds,
    call :meth:`force_complete` and return its result) and :meth:`on_complete`
    (deliver the answer; runs exactly once, on whichever thread completed the
    operation, so it must not block). :meth:`on_expiration` runs after
    :meth:`on_complete` when the deadline completed it. Thread-safe.
    """

    def __init__(self, deadline: Optional[float]) -> None:
        #: ``time.monotonic()`` seconds at which the operation expires (None: never).
        self.deadline = deadline
        self.expired = False
        #: The exception that completed the operation without an answer (None: it has one).
        self.error: Optional[BaseException] = None
        self._completed = False
        self._done = threading.Event()
        self._lock = threading.Lock()

    @property
    def completed(self) -> bool:
        return self._completed

    def try_complete(self) -> bool:
        """Complete the operation if its condition holds; True when it did."""
        raise NotImplementedError

    def on_complete(self) -> None:
        """Deliver the answer (exactly once, must not block)."""
        raise NotImplementedError

    def on_expiration(self) -> None:
        """Called after :meth:`on_complete` when the deadline completed the operation."""

    def force_complete(self) -> bool:
        """Complete now whatever the condition; True for the caller that completed it."""
        with self._lock:
            if self._completed:
                return False
            self._completed = True
        self._finish()
        return True

    def on_failure(self, exc: BaseException) -> None:
        """Called once when completing raised ``exc`` (a bug): tell whoever waits."""

    def _finish(self) -> None:
        try:
            self.on_complete()
        except Exception as exc:
            self._failed(exc)
            raise
        finally:
            self._done.set()

    def _failed(self, exc: BaseException) -> None:
        self.error = exc
        try:
            self.on_failure(exc)
        except Exception:  # noqa: BLE001 - the first exception is the one raised on
            log.exception("delayed operation %r could not report its failure", self)

    def expire(self) -> None:
        """The timer's call at the deadline."""
        with self._lock:
            if self._completed:
                return
            self._completed = True
            self.expired = True
        self._finish()
        self.on_expiration()

    def wait(self, timeout: Optional[float] = None) -> bool:
        """Block the calling thread until completed (the embedded API); False on ``timeout``."""
        return self._done.wait(timeout)


class DelayedCall(DelayedOperation, Generic[_T]):
    """A delayed operation built from functions: the condition returns the answer or None.

    ``check()`` returns the answer when it is ready (None while not);
    ``on_deadline()`` the answer at the deadline; ``deliver(answer)`` hands it over,
    and ``deliver.fail(exc)``, when ``deliver`` has it, is called instead if ``check``
    or ``on_deadline`` raised.
    """

    def __init__(self, deadline: Optional[float], check: Callable[[], Optional[_T]],
                 on_deadline: Callable[[], _T], deliver: Callable[[_T], None]) -> None:
        super().__init__(deadline)
        self._check = check
        self._on_deadline = on_deadline
        self._deliver = deliver
        self._answer: Optional[_T] = None

    def try_complete(self) -> bool:
        with self._lock:
            if self._completed:
                return False
            failed: Optional[Exception] = None
            try:
                answer = self._check()
            except Exception as exc:
                self._completed = True  # no answer can be made: completed with the error
                failed = exc
            else:
                if answer is None:
                    return False
                self._answer = answer
                self._completed = True
        if failed is not None:
            try:
                self._failed(failed)
            finally:
                self._done.set()
            raise failed
        self._finish()
        return True

    def complete_with(self, answer: _T) -> bool:
        """Complete with ``answer`` (e.g. at shutdown); True when this call completed it."""
        with self._lock:
            if self._completed:
                return False
            self._answer = answer
            self._completed = True
        self._finish()
        return True

    def on_complete(self) -> None:
        if self._answer is None:
            self._answer = self._on_deadline()
        self._deliver(self._answer)

    def on_failure(self, exc: BaseException) -> None:
        fail = getattr(self._deliver, "fail", None)
        if fail is not None:
            fail(exc)

    @classmethod
    def immediate(cls, answer: _T, deliver: Callable[[_T], None] = lambda answer: None) -> "DelayedCall[_T]":
        """An operation answered already (``deliver`` called with ``answer`` now): the
        answer of a call that needed no wait, in the shape of one that might have."""
        op: DelayedCall[_T] = cls(None, lambda: None, lambda: answer, deliver)
        op.complete_with(answer)
        return op

    def answer(self) -> _T:
        """The answer once completed (the error that completed it raises)."""
        if self.error is not None:
            raise self.error
        if self._answer is None:
            raise IllegalStateError("the operation has not completed")
        return self._answer


class TimedTask(DelayedOperation):
    """``run()`` at a deadline on a :class:`Timer`: nothing completes it but time (a
    coordinator's next deadline, a session's expiry)."""

    def __init__(self, deadline: float, run: Callable[[], None]) -> None:
        super().__init__(deadline)
        self._run = run

    def try_complete(self) -> bool:
        return False

    def on_complete(self) -> None:
        """Nothing to answer: the work is done at expiration."""

    def on_expiration(self) -> None:
        self._run()


class Timer:
    """One thread that expires delayed operations at their deadlines.

    A heap of (deadline, sequence, operation); operations that completed before
    their deadline are dropped when they reach the top (or purged when they are
    the majority, so a busy broker's heap stays the size of what is waiting).
    Thread-safe.
    """

    def __init__(self, name: str = "pylogq-delayed-timer", clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._heap: List[Tuple[float, int, DelayedOperation]] = []
        self._sequence = itertools.count()
        self._cond = threading.Condition(threading.Lock())
        self._closed = False
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def add(self, op: DelayedOperation) -> None:
        """Expire ``op`` at its deadline unless it completes first."""
        if op.deadline is None:
            return
        with self._cond:
            if self._closed:
                raise IllegalStateError("the timer is closed")
            first = not self._heap or op.deadline < self._heap[0][0]
            heapq.heappush(self._heap, (op.deadline, next(self._sequence), op))
            if len(self._heap) > 1024 and len(self._heap) & 1023 == 0:
                self._purge()
            if first:
                self._cond.notify()

    def _purge(self) -> None:
        live = [entry for entry in self._heap if not entry[2].completed]
        if len(live) * 2 < len(self._heap):
            heapq.heapify(live)
            self._heap = live

    def size(self) -> int:
        """Operations on the timer, completed ones not yet dropped included."""
        with self._cond:
            return len(self._heap)

    def _run(self) -> None:
        while True:
            due: List[DelayedOperation] = []
            with self._cond:
                while not self._closed:
                    now = self._clock()
                    while self._heap and (self._heap[0][2].completed or self._heap[0][0] <= now):
                        _, _, op = heapq.heappop(self._heap)
                        if not op.completed:
                            due.append(op)
                    if due:
                        break
                    self._cond.wait(None if not self._heap else self._heap[0][0] - now)
                if self._closed and not due:
                    return
            for op in due:
                try:
                    op.expire()
                except Exception:  # noqa: BLE001 - one operation's failure must not stop the timer
                    log.exception("delayed operation %r failed at its deadline", op)

    def close(self) -> None:
        """Stop the thread; operations still waiting are left to their owners (see the purgatory's close)."""
        with self._cond:
            self._closed = True
            self._cond.notify()
        if self._thread is not threading.current_thread():
            self._thread.join()


class DelayedOperationPurgatory:
    """Delayed operations watched by key (a partition, a group), expired by a shared timer.

    Whoever changes a key calls :meth:`check_and_complete` with it; every operation
    watching the key is checked then, on that caller's thread. An operation watched
    under several keys is dropped from all of them once completed (lazily, when a
    key is checked, and by :meth:`purge` when completed entries pile up). Thread-safe.
    """

    def __init__(self, name: str, timer: Timer) -> None:
        self.name = name
        self._timer = timer
        self._watchers: Dict[Hashable, Set[DelayedOperation]] = {}
        self._lock = threading.Lock()
        self._closed = False
        self._since_purge = 0

    def try_complete_else_watch(self, op: DelayedOperation, keys: Iterable[Hashable], checked: bool = False) -> bool:
        """Complete ``op`` now if it can; else watch it under ``keys`` until it completes.

        True when it completed within this call. The condition is checked again
        after the operation is watched, so a change between the first check and
        the registration is never missed. ``checked``: the caller has just found the
        condition unmet itself, and the first check is skipped (a follower's fetch
        has read the log once already).
        """
        if not checked and op.try_complete():
            return True
        keys = list(keys)
        with self._lock:
            if self._closed:
                closed = True
            else:
                closed = False
                for key in keys:
                    self._watchers.setdefault(key, set()).add(op)
                self._since_purge += 1
                if self._since_purge >= 4096:
                    self._purge_locked()
        if closed:
            op.force_complete()
            return True
        if op.try_complete():
            return True
        self._timer.add(op)
        return op.completed

    def check_and_complete(self, key: Hashable) -> int:
        """Check every operation watching ``key``; -> how many completed."""
        with self._lock:
            watching = self._watchers.get(key)
            if not watching:
                return 0
            ops = list(watching)
        completed = 0
        for op in ops:
            try:
                if not op.completed and op.try_complete():
                    completed += 1
            except Exception:  # noqa: BLE001 - one operation's failure must not stall the others
                log.exception("delayed %s operation %r failed", self.name, op)
        with self._lock:
            watching = self._watchers.get(key)
            if watching is not None:
                watching.difference_update([op for op in ops if op.completed])
                if not watching:
                    del self._watchers[key]
        return completed

    def watched(self) -> int:
        """Operations still waiting (each counted once, whatever its keys)."""
        with self._lock:
            return len({op for ops in self._watchers.values() for op in ops if not op.completed})

    def purge(self) -> None:
        """Drop completed operations from every key."""
        with self._lock:
            self._purge_locked()

    def _purge_locked(self) -> None:
        self._since_purge = 0
        for key in list(self._watchers):
            live = {op for op in self._watchers[key] if not op.completed}
            if live:
                self._watchers[key] = live
            else:
                del self._watchers[key]

    def close(self) -> None:
        """Complete every waiting operation now (their owners answer with what they have)."""
        with self._lock:
            self._closed = True
            ops = {op for watching in self._watchers.values() for op in watching}
            self._watchers.clear()
        for op in ops:
            try:
                op.force_complete()
            except Exception:  # noqa: BLE001 - every other operation still gets its answer
                log.exception("delayed %s operation %r failed at close", self.name, op)


class Tapped(Generic[_T]):
    """A ``deliver`` that shows each answer to ``tap`` first (metrics count what is
    answered), and passes a failure on to ``deliver.fail`` as :class:`DelayedCall` expects."""

    __slots__ = ("_deliver", "_tap", "fail")

    def __init__(self, deliver: Callable[[_T], None], tap: Callable[[_T], None]) -> None:
        self._deliver = deliver
        self._tap = tap
        self.fail = getattr(deliver, "fail", None)

    def __call__(self, answer: _T) -> None:
        self._tap(answer)
        self._deliver(answer)
