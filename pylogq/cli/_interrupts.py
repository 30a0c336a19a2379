"""Ctrl-C and SIGTERM for the tools: a request to stop, taken where stopping is safe.

Python raises KeyboardInterrupt at whatever bytecode the main thread is running
when the signal's handler runs. Inside a client that can be the middle of
``threading.Condition.wait``, after it let go of its lock and before the
``try`` that takes it back, or between any ``acquire`` and the ``with`` that
would release it: the exception then leaves the client's locks in a state no
later call survives (``RuntimeError: cannot release un-acquired lock`` from
the ``with`` block's exit, a traceback instead of the consumer leaving its
group and the tool exiting 130).

So while a tool is inside a client (:func:`deferred`), the handler only notes
the signal; the tool stops at the block's end or at a :func:`check` it makes
between steps, raising KeyboardInterrupt from its own code. Outside such a
block (a blocking read of stdin, connecting, an admin request) the signal
raises at once, as Python's own handler does: C code unwinds cleanly from it,
and a tool that is not inside a client has nothing to leave half done.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from typing import Any, Iterator

from ..errors import KafkaTimeoutError

__all__ = ["stop_signals", "deferred", "check", "flush"]

# How long one slice of a deferred wait lasts: the longest a stop request waits to be seen.
SLICE_S = 0.2


class _State:
    depth = 0  # how many deferred blocks the main thread is in
    pending = False  # a signal came during one


_state = _State()


def _handler(signum: int, frame: Any) -> None:
    if _state.depth:
        _state.pending = True
        return
    raise KeyboardInterrupt


@contextlib.contextmanager
def stop_signals() -> Iterator[None]:
    """SIGTERM, and SIGINT unless it was ignored at start (a background job), stop the tool as Ctrl-C.

    Only in the main thread (where Python runs signal handlers); elsewhere a no-op.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    signums = [signal.SIGTERM]
    if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
        signums.append(signal.SIGINT)
    previous = {signum: signal.signal(signum, _handler) for signum in signums}
    _state.pending = False
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        _state.pending = False


@contextlib.contextmanager
def deferred() -> Iterator[None]:
    """Hold a stop request made inside the block until its end (or a :func:`check`), then raise KeyboardInterrupt."""
    _state.depth += 1
    try:
        yield
    finally:
        _state.depth -= 1
    check()


def check() -> None:
    """Raise KeyboardInterrupt if a stop was requested during a deferred block."""
    if _state.pending:
        _state.pending = False
        raise KeyboardInterrupt


def flush(producer: Any) -> None:
    """``producer.flush()``, stoppable: waits in slices, ending with KeyboardInterrupt at a stop request."""
    with deferred():
        while True:
            try:
                producer.flush(SLICE_S)
                return
            except KafkaTimeoutError:
                check()
