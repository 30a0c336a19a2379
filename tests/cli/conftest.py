"""Fixtures for the broker tools: an in-process broker and a way to run ``pylogq`` commands on it."""

from __future__ import annotations

import io
import subprocess
import sys
from typing import Any, Callable, Iterator, NamedTuple, Optional

import pytest

import pylogq
from pylogq.cli.clients import Clients
from pylogq.cli.main import run


class Result(NamedTuple):
    """What a command did: its exit status and what it printed."""

    status: int
    out: str
    err: str


Cli = Callable[..., Result]


@pytest.fixture
def broker(tmp_path: Any) -> Iterator[Any]:
    with pylogq.Broker(str(tmp_path / "data"), group_initial_rebalance_delay_ms=0,
                       group_min_session_timeout_ms=100) as b:
        yield b


def run_cli(broker: Any, *argv: str, stdin: bytes = b"", progress: Optional[bool] = None) -> Result:
    """Run ``pylogq ARGV`` on ``broker`` as the command line does, streams captured."""
    raw = io.BytesIO()
    out = io.TextIOWrapper(raw, encoding="utf-8", newline="", write_through=True)
    err = io.StringIO()
    status = run(list(argv), clients=Clients(broker=broker), stdin=io.BytesIO(stdin), stdout=out, stderr=err,
                 progress=progress)
    out.flush()
    return Result(status, raw.getvalue().decode("utf-8"), err.getvalue())


def run_process(bootstrap: str, *argv: str, stdin: bytes = b"", timeout: float = 60) -> Result:
    """Run ``python -m pylogq ARGV --bootstrap-server BOOTSTRAP`` as a user does."""
    proc = subprocess.run([sys.executable, "-m", "pylogq", *argv, "--bootstrap-server", bootstrap], input=stdin,
                          capture_output=True, timeout=timeout)
    return Result(proc.returncode, proc.stdout.decode("utf-8"), proc.stderr.decode("utf-8"))


@pytest.fixture
def cli(broker: Any) -> Cli:
    def call(*argv: str, stdin: bytes = b"", progress: Optional[bool] = None) -> Result:
        return run_cli(broker, *argv, stdin=stdin, progress=progress)
    return call
