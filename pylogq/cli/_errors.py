"""How every command-line tool reports a failure: one line ``Error: <message>`` on stderr, exit status 1.

The same prefix in ``pylogq`` (each subcommand) and ``pylogq-broker``, so a
script or a reader finds the failure the same way whatever failed. A broker
error reads ``Error: NAME: its message`` (``Error: NETWORK_EXCEPTION: no broker
reachable ...``): the code's name says what kind of refusal it was. Usage
errors stay argparse's (the subcommand's usage, ``error:``, exit status 2).

Imports nothing beyond :mod:`pylogq.errors`: ``pylogq-broker`` uses it before
anything else is loaded.
"""

from __future__ import annotations

from typing import TextIO, Union

from ..errors import BrokerError

__all__ = ["EXIT_FAILURE", "PREFIX", "error_text", "report_error"]

PREFIX = "Error: "
EXIT_FAILURE = 1


def error_text(exc: BaseException) -> str:
    """What a tool prints for a failure: a broker error as ``NAME: its message``, anything else as is."""
    if isinstance(exc, BrokerError) and exc.args:
        return "%s: %s" % (exc.name, exc.args[0])
    return str(exc)


def report_error(err: TextIO, problem: Union[str, BaseException]) -> int:
    """Write ``Error: <problem>`` as one line to ``err``; -> :data:`EXIT_FAILURE`, for ``return report_error(...)``."""
    text = problem if isinstance(problem, str) else error_text(problem)
    err.write("%s%s\n" % (PREFIX, text))
    return EXIT_FAILURE
