"""The mirror's long-running parts (a task, a flow's leader, a flow's worker): each runs on a
thread of its own, started once, asked to stop, and waited for."""

from __future__ import annotations

import threading
from typing import Optional

__all__ = ["Threaded"]


class Threaded:
    """The lifecycle of a part that runs :meth:`_run` on a daemon thread named ``thread_name``:
    :meth:`_start_thread` once, then :meth:`stop` (or :meth:`request_stop` and :meth:`join`).
    :meth:`_run` ends when it sees ``_stopping`` set. Thread-safe."""

    def __init__(self, thread_name: str) -> None:
        self._thread_name = thread_name
        self._stopping = threading.Event()
        self._thread: Optional[threading.Thread] = None

    def _run(self) -> None:
        raise NotImplementedError

    def _start_thread(self) -> None:
        if self._thread is not None:
            raise RuntimeError("%s was started already" % self._thread_name)
        self._thread = threading.Thread(target=self._run, name=self._thread_name, daemon=True)
        self._thread.start()

    def request_stop(self) -> None:
        """Ask the part to finish, without waiting."""
        self._stopping.set()

    def join(self, timeout: Optional[float] = None) -> bool:
        """Wait up to ``timeout`` seconds (None: as long as it takes) for the thread; -> whether it
        ended (True for a part never started)."""
        if self._thread is None:
            return True
        self._thread.join(timeout)
        return not self._thread.is_alive()

    def stop(self, timeout: Optional[float] = None) -> bool:
        """:meth:`request_stop`, then :meth:`join`."""
        self.request_stop()
        return self.join(timeout)

    @property
    def running(self) -> bool:
        """Whether the thread is alive."""
        return self._thread is not None and self._thread.is_alive()
