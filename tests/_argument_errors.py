"""The check the tests of bad arguments share: the project's class, the builtin it replaced, the value shown."""

from __future__ import annotations

from typing import Any

from pylogq.errors import PylogqError


def check_raised(raised: Any, cls: type, builtin: type, *shown: str) -> None:
    """The error in ``raised`` (a pytest ExceptionInfo) is ``cls`` (a PylogqError) and the builtin it
    used to be, and its message shows each of ``shown``."""
    exc = raised.value
    assert type(exc) is cls, type(exc)
    assert isinstance(exc, PylogqError) and isinstance(exc, builtin), type(exc).__mro__
    for text in shown:
        assert text in str(exc), (text, str(exc))
